//! The C API of ironbark (`include/ironbark.h`, documented in
//! `docs/c-api.md`): opaque handles over the engine's public Rust API.
//!
//! Rules every exported function keeps:
//! - it never unwinds into C: its body runs under [`catch_unwind`], and a
//!   panic (a bug) becomes `IRONBARK_EPANIC`;
//! - it checks every pointer it is given for null before use and reports a
//!   null as `IRONBARK_EINVAL`, with a message in [`ironbark_last_error`];
//! - every failure is a status code plus a thread-local message.
//!
//! Handles own what they borrow: a write transaction owns a clone of its
//! [`Database`] (so closing the database handle first is harmless), and a
//! read cursor owns a reference to its snapshot.

#![allow(clippy::missing_safety_doc)] // Each function's safety contract is in the header.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_uint, CStr, CString};
use std::ops::Bound;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::Arc;

use ironbark::{
    Database, Durability, Error, IntRange, IntTree, IntWidth, Multimap, Options, Pairs, Range,
    ReadTxn, Savepoint, Tree, TreeKind, WriteTxn,
};

/// Success.
pub const IRONBARK_OK: c_int = 0;
/// No such key; a cursor at its end.
pub const IRONBARK_NOTFOUND: c_int = 1;
/// A null pointer or an invalid argument.
pub const IRONBARK_EINVAL: c_int = -1;
/// The operating system reported an I/O error.
pub const IRONBARK_EIO: c_int = -2;
/// The file fails a check.
pub const IRONBARK_ECORRUPTED: c_int = -3;
/// Not an ironbark database file.
pub const IRONBARK_ENOTIRONBARK: c_int = -4;
/// An incompatible file format version.
pub const IRONBARK_EVERSION: c_int = -5;
/// An unsupported page size.
pub const IRONBARK_EPAGESIZE: c_int = -6;
/// A key longer than the limit.
pub const IRONBARK_EKEYSIZE: c_int = -7;
/// A value longer than the limit.
pub const IRONBARK_EVALSIZE: c_int = -8;
/// A tree name empty or too long.
pub const IRONBARK_ETREENAME: c_int = -9;
/// No tree of that name.
pub const IRONBARK_ENOTREE: c_int = -10;
/// The tree was dropped in this transaction.
pub const IRONBARK_ETREEDROPPED: c_int = -11;
/// Every reader slot is taken.
pub const IRONBARK_EREADERSFULL: c_int = -12;
/// Another thread holds the write transaction.
pub const IRONBARK_EBUSY: c_int = -13;
/// Another process holds the write lock.
pub const IRONBARK_ELOCKED: c_int = -14;
/// A read-only database, or a write in a read transaction.
pub const IRONBARK_EREADONLY: c_int = -15;
/// An earlier sync failed; reopen first.
pub const IRONBARK_EPOISONED: c_int = -16;
/// An option out of range.
pub const IRONBARK_EOPTION: c_int = -17;
/// An operation failed part-way; the transaction can only be aborted.
pub const IRONBARK_ETXNFAILED: c_int = -18;
/// The cursor's transaction has ended.
pub const IRONBARK_ETXNENDED: c_int = -19;
/// An internal error (a bug), caught at the boundary.
pub const IRONBARK_EPANIC: c_int = -20;
/// An error kind newer than this library's list.
pub const IRONBARK_EUNKNOWN: c_int = -21;
/// A tree handle whose tree was dropped in an earlier transaction.
pub const IRONBARK_ESTALETREE: c_int = -22;
/// A tree handle used with another database than its own.
pub const IRONBARK_EFOREIGNTREE: c_int = -23;
/// A read-only process without the lock file keeps writers out.
pub const IRONBARK_ELOCKLESSREADER: c_int = -24;
/// This thread already holds the write transaction: waiting would never end.
pub const IRONBARK_EWRITETXNTHREAD: c_int = -25;
/// `ironbark_append`: the key is not greater than the tree's last key.
pub const IRONBARK_EKEYORDER: c_int = -26;
/// A tree opened or used as another kind than it is (a multimap as a plain
/// tree, an integer-key tree of another width...).
pub const IRONBARK_EWRONGKIND: c_int = -27;
/// A multimap pair whose encoding is longer than the key limit.
pub const IRONBARK_EPAIRSIZE: c_int = -28;
/// An integer key that does not fit the tree's width.
pub const IRONBARK_EINTKEYSIZE: c_int = -29;
/// A savepoint released, rolled back past, or of another transaction.
pub const IRONBARK_ESAVEPOINT: c_int = -30;
/// A process that does not write could not rebuild the newest commits in
/// its page arena (old read transactions hold too much): not damage.
pub const IRONBARK_EARENAFULL: c_int = -31;
/// `ironbark_put_dup`: the pair was there already (nothing changed).
pub const IRONBARK_KEYEXIST: c_int = 2;

/// `ironbark_txn_begin`: a read snapshot.
pub const IRONBARK_TXN_READ_ONLY: c_uint = 1;
/// `ironbark_txn_begin`: fail instead of waiting for the write lock.
pub const IRONBARK_TXN_NOWAIT: c_uint = 2;
/// `ironbark_txn_begin`: commit without `fdatasync`.
pub const IRONBARK_TXN_NOSYNC: c_uint = 4;
/// `ironbark_tree_open`: create the tree if missing.
pub const IRONBARK_TREE_CREATE: c_uint = 1;
/// `ironbark_tree_open`: a multimap (a sorted set of values per key).
pub const IRONBARK_TREE_MULTIMAP: c_uint = 2;
/// `ironbark_tree_open`: integer keys of 4 bytes (`uint32_t` range).
pub const IRONBARK_TREE_INTKEY32: c_uint = 4;
/// `ironbark_tree_open`: integer keys of 8 bytes (`uint64_t`).
pub const IRONBARK_TREE_INTKEY64: c_uint = 8;
/// `ironbark_cursor_open`: iterate in descending key order.
pub const IRONBARK_CURSOR_REVERSE: c_uint = 1;
/// `ironbark_cursor_open`: include the end bound.
pub const IRONBARK_CURSOR_END_INCLUSIVE: c_uint = 2;
/// `ironbark_options.durability`: one `fdatasync` per commit.
pub const IRONBARK_DURABILITY_IMMEDIATE: i32 = 0;
/// `ironbark_options.durability`: no sync at commit.
pub const IRONBARK_DURABILITY_NONE: i32 = 1;

/// Options of `ironbark_open` (the header's `ironbark_options`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ironbark_options {
    /// Page size for a new file.
    pub page_size: u32,
    /// Read transactions alive at once.
    pub max_readers: u32,
    /// `IRONBARK_DURABILITY_*`.
    pub durability: i32,
    /// Create the file if missing (non-zero).
    pub create: i32,
    /// Open for reading only (non-zero).
    pub read_only: i32,
    /// Open at the last commit before a damaged durable redo log record
    /// instead of failing with `IRONBARK_ECORRUPTED` (non-zero;
    /// `Options::salvage_damaged_log`). Last, so that the fields before it
    /// keep their offsets.
    pub salvage_damaged_log: i32,
}

/// What `ironbark_stat` reports (the header's `ironbark_stat`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ironbark_stat {
    /// Bytes per page.
    pub page_size: u64,
    /// The data file's length.
    pub file_size_bytes: u64,
    /// Pages in use by the newest commit.
    pub page_count: u64,
    /// Free pages.
    pub free_pages: u64,
    /// The newest commit.
    pub last_txn_id: u64,
    /// The newest commit known durable.
    pub durable_txn_id: u64,
    /// Read transactions alive now.
    pub live_readers: u64,
    /// The reader limit.
    pub max_readers: u64,
    /// Named trees.
    pub tree_count: u64,
    /// Entries in all trees.
    pub entries: u64,
}

/// An open database (`ironbark_db`).
pub struct Db {
    db: Database,
}

/// A transaction (`ironbark_txn`).
pub struct Txn {
    kind: TxnKind,
}

enum TxnKind {
    Read(Arc<ReadTxn>),
    Write(Rc<WriteCell>),
}

/// The write transaction with the database handle it borrows. The cell is
/// emptied when the transaction ends; cursors share it and see that.
struct WriteCell {
    // Declared before `_db`, so dropped before it: the transaction borrows
    // the database's shared state, which `_db` keeps alive.
    txn: RefCell<Option<WriteTxn<'static>>>,
    _db: Database,
}

/// A tree handle (`ironbark_tree`): a plain tree, a multimap or an
/// integer-key tree, as `ironbark_tree_open`'s flags asked for.
pub struct TreeHandle {
    handle: Handle,
}

enum Handle {
    Plain(Tree),
    Multimap(Multimap),
    Int(IntTree),
}

/// `EWRONGKIND`: a handle of the tree `name`, of kind `found`, given to a
/// call for trees of kind `wanted`.
fn wrong_kind(name: &str, found: &str, wanted: &str) -> Failure {
    Failure {
        code: IRONBARK_EWRONGKIND,
        message: format!("tree {name:?} is {found}, not {wanted}"),
    }
}

impl TreeHandle {
    fn describe(&self) -> (&str, &'static str) {
        match &self.handle {
            Handle::Plain(t) => (t.name(), "a plain tree"),
            Handle::Multimap(m) => (m.name(), "a multimap"),
            Handle::Int(t) => (t.name(), "an integer-key tree"),
        }
    }

    /// The handle of a plain tree, or `EWRONGKIND`.
    fn plain(&self) -> Result<&Tree, Failure> {
        match &self.handle {
            Handle::Plain(t) => Ok(t),
            _ => {
                let (name, found) = self.describe();
                Err(wrong_kind(name, found, "a plain tree"))
            }
        }
    }

    /// The handle of a multimap, or `EWRONGKIND`.
    fn multimap(&self) -> Result<&Multimap, Failure> {
        match &self.handle {
            Handle::Multimap(m) => Ok(m),
            _ => {
                let (name, found) = self.describe();
                Err(wrong_kind(name, found, "a multimap"))
            }
        }
    }

    /// The handle of an integer-key tree, or `EWRONGKIND`.
    fn int_tree(&self) -> Result<&IntTree, Failure> {
        match &self.handle {
            Handle::Int(t) => Ok(t),
            _ => {
                let (name, found) = self.describe();
                Err(wrong_kind(name, found, "an integer-key tree"))
            }
        }
    }
}

/// The entries of any kind of tree (a multimap's pairs) in the
/// transaction `$t`: a macro, since the two transactions share no trait.
macro_rules! count_of {
    ($t:expr, $tree:expr) => {
        match &$tree.handle {
            Handle::Plain(t) => $t.len(t),
            Handle::Multimap(m) => $t.multimap_len(m),
            Handle::Int(t) => $t.int_len(t),
        }
    };
}

/// Evaluates `$call` (an expression of `$t`, the transaction) in either
/// kind of transaction. What it gives must not borrow the write
/// transaction (raw pointers, counts, flags): the borrow of its cell ends
/// here. A macro, not a function: the two transactions share no trait.
macro_rules! in_txn {
    ($txn:expr, $t:ident => $call:expr) => {
        match &$txn.kind {
            TxnKind::Read(r) => {
                let $t: &ReadTxn = r;
                $call
            }
            TxnKind::Write(cell) => {
                let w = cell.txn.try_borrow().map_err(|_| ended())?;
                let $t: &WriteTxn<'static> = w.as_ref().ok_or_else(ended)?;
                $call
            }
        }
    };
}

/// Runs the lookup `$call` (see [`in_txn`]) and gives its entry as a
/// [`RawEntry`].
macro_rules! look_up {
    ($txn:expr, $t:ident => $call:expr) => {
        in_txn!($txn, $t => $call?.map(raw_entry))
    };
}

/// A cursor (`ironbark_cursor`): over a plain tree's entries, a
/// multimap's pairs, or an integer-key tree's entries.
pub struct Cursor {
    kind: CursorKind,
}

enum CursorKind {
    Plain(PlainCursor),
    Pairs(PairCursor),
    Int(IntCursor),
}

/// A cursor over a plain tree.
struct PlainCursor {
    // Declared first, so dropped before the bounds and the snapshot it
    // borrows.
    source: CursorSource,
    tree: Tree,
    lower: Bound<Box<[u8]>>,
    upper: Bound<Box<[u8]>>,
    /// The key of the last `seek`: tightens `lower` (or `upper` in reverse)
    /// until the next seek.
    seek: Option<Box<[u8]>>,
    reverse: bool,
}

enum CursorSource {
    /// A read cursor: an iterator over its own snapshot, built at the first
    /// `next` after open or seek. `range` borrows `txn` and the cursor's
    /// boxed bounds, which stay put while it is `Some`.
    Read {
        range: Option<Box<Range<'static>>>,
        txn: Arc<ReadTxn>,
    },
    /// A write cursor: positioned by the last key it returned, since the
    /// transaction may change between steps.
    Write {
        cell: Rc<WriteCell>,
        last: Option<Box<[u8]>>,
    },
}

/// A failure on its way to C: a status code and a message.
#[derive(Debug)]
struct Failure {
    code: c_int,
    message: String,
}

impl Failure {
    fn invalid(message: impl Into<String>) -> Failure {
        Failure {
            code: IRONBARK_EINVAL,
            message: message.into(),
        }
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        Failure {
            code: code_of(&e),
            message: e.to_string(),
        }
    }
}

/// The status code of an engine error.
fn code_of(e: &Error) -> c_int {
    match e {
        Error::Io(_) => IRONBARK_EIO,
        Error::Corrupted { .. } => IRONBARK_ECORRUPTED,
        Error::NotAnIronbarkFile => IRONBARK_ENOTIRONBARK,
        Error::IncompatibleVersion { .. } => IRONBARK_EVERSION,
        Error::InvalidPageSize(_) => IRONBARK_EPAGESIZE,
        Error::KeyTooLarge { .. } => IRONBARK_EKEYSIZE,
        Error::ValueTooLarge { .. } => IRONBARK_EVALSIZE,
        Error::InvalidTreeName(_) => IRONBARK_ETREENAME,
        Error::NoSuchTree(_) => IRONBARK_ENOTREE,
        Error::TreeDropped(_) => IRONBARK_ETREEDROPPED,
        Error::ReadersFull { .. } => IRONBARK_EREADERSFULL,
        Error::Busy => IRONBARK_EBUSY,
        Error::Locked => IRONBARK_ELOCKED,
        Error::ReadOnly => IRONBARK_EREADONLY,
        Error::Poisoned => IRONBARK_EPOISONED,
        Error::InvalidOption(_) => IRONBARK_EOPTION,
        Error::TxnFailed(_) => IRONBARK_ETXNFAILED,
        Error::StaleTree(_) => IRONBARK_ESTALETREE,
        Error::ForeignTree(_) => IRONBARK_EFOREIGNTREE,
        Error::LocklessReader => IRONBARK_ELOCKLESSREADER,
        Error::WriteTxnOnThisThread => IRONBARK_EWRITETXNTHREAD,
        Error::KeyOutOfOrder(_) => IRONBARK_EKEYORDER,
        Error::WrongTreeKind { .. } => IRONBARK_EWRONGKIND,
        Error::PairTooLarge { .. } => IRONBARK_EPAIRSIZE,
        Error::IntegerKeySize { .. } => IRONBARK_EINTKEYSIZE,
        Error::InvalidSavepoint(_) => IRONBARK_ESAVEPOINT,
        Error::ArenaFull { .. } => IRONBARK_EARENAFULL,
        // The engine's error is non-exhaustive: kinds newer than this list.
        _ => IRONBARK_EUNKNOWN,
    }
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last_error(message: &str) {
    let message = CString::new(message.replace('\0', "\\0")).unwrap_or_default();
    LAST_ERROR.with(|l| *l.borrow_mut() = message);
}

/// Runs an exported function's body: a panic becomes `IRONBARK_EPANIC`, a
/// failure its code, and both leave their message for
/// `ironbark_last_error`.
fn guard(body: impl FnOnce() -> Result<c_int, Failure>) -> c_int {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(code)) => code,
        Ok(Err(failure)) => {
            set_last_error(&failure.message);
            failure.code
        }
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            set_last_error(&format!("internal error (a bug in ironbark): {what}"));
            IRONBARK_EPANIC
        }
    }
}

/// Runs the body of a function that returns nothing: a panic is caught and
/// only recorded.
fn guard_void(body: impl FnOnce()) {
    guard(|| {
        body();
        Ok(IRONBARK_OK)
    });
}

/// `ptr` as a shared reference, or `EINVAL` naming `what`.
///
/// # Safety
/// A non-null `ptr` must point to a live `T` that nothing mutates for `'a`.
unsafe fn reference<'a, T>(ptr: *const T, what: &str) -> Result<&'a T, Failure> {
    // SAFETY: the caller guarantees a non-null `ptr` is a live, unaliased-
    // for-writes `T` (a handle this library handed out, or a C object the
    // caller owns); `as_ref` checks for null.
    unsafe { ptr.as_ref() }.ok_or_else(|| Failure::invalid(format!("{what} is null")))
}

/// `ptr` as an exclusive reference, or `EINVAL` naming `what`.
///
/// # Safety
/// A non-null `ptr` must point to a live `T` that nothing else uses for
/// `'a`.
unsafe fn exclusive<'a, T>(ptr: *mut T, what: &str) -> Result<&'a mut T, Failure> {
    // SAFETY: the caller guarantees a non-null `ptr` is a live `T` used by
    // no one else meanwhile; `as_mut` checks for null.
    unsafe { ptr.as_mut() }.ok_or_else(|| Failure::invalid(format!("{what} is null")))
}

/// The byte string `ptr[..len]`; a null `ptr` is the empty string if `len`
/// is 0 and `EINVAL` otherwise.
///
/// # Safety
/// A non-null `ptr` must point to `len` readable bytes that stay unchanged
/// for `'a`.
unsafe fn bytes<'a>(ptr: *const u8, len: usize, what: &str) -> Result<&'a [u8], Failure> {
    if ptr.is_null() {
        return if len == 0 {
            Ok(&[])
        } else {
            Err(Failure::invalid(format!(
                "{what} is null with length {len}"
            )))
        };
    }
    if len > isize::MAX as usize {
        return Err(Failure::invalid(format!(
            "{what} length {len} is too large"
        )));
    }
    // SAFETY: `ptr` is non-null and, by the caller's contract, points to
    // `len` (<= isize::MAX) initialised bytes that live and stay unchanged
    // for `'a`.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// The array `ptr[..count]`; a null `ptr` is the empty array if `count`
/// is 0 and `EINVAL` otherwise, as is a misaligned one.
///
/// # Safety
/// A non-null `ptr` must point to `count` initialised `T`s that stay
/// unchanged for `'a`.
unsafe fn array<'a, T>(ptr: *const T, count: usize, what: &str) -> Result<&'a [T], Failure> {
    if ptr.is_null() {
        return if count == 0 {
            Ok(&[])
        } else {
            Err(Failure::invalid(format!(
                "{what} is null with count {count}"
            )))
        };
    }
    if !ptr.is_aligned() {
        return Err(Failure::invalid(format!("{what} is misaligned")));
    }
    if count
        .checked_mul(size_of::<T>())
        .is_none_or(|n| n > isize::MAX as usize)
    {
        return Err(Failure::invalid(format!(
            "{what} count {count} is too large"
        )));
    }
    // SAFETY: `ptr` is non-null, aligned and, by the caller's contract,
    // points to `count` (spanning <= isize::MAX bytes) initialised `T`s
    // that live and stay unchanged for `'a`.
    Ok(unsafe { std::slice::from_raw_parts(ptr, count) })
}

/// The NUL-terminated UTF-8 string at `ptr`.
///
/// # Safety
/// A non-null `ptr` must point to a NUL-terminated string that lives for
/// `'a`.
unsafe fn text<'a>(ptr: *const c_char, what: &str) -> Result<&'a str, Failure> {
    if ptr.is_null() {
        return Err(Failure::invalid(format!("{what} is null")));
    }
    // SAFETY: `ptr` is non-null and, by the caller's contract, a
    // NUL-terminated string alive for `'a`.
    let c = unsafe { CStr::from_ptr(ptr) };
    c.to_str()
        .map_err(|_| Failure::invalid(format!("{what} is not valid UTF-8")))
}

/// Writes `value` through the out-pointer `out`, or fails with `EINVAL`.
///
/// # Safety
/// A non-null `out` must be valid for a write of `T`.
unsafe fn store<T>(out: *mut T, value: T, what: &str) -> Result<(), Failure> {
    if out.is_null() {
        return Err(Failure::invalid(format!("{what} is null")));
    }
    // SAFETY: `out` is non-null and, by the caller's contract, valid for a
    // write of `T`; `write` does not read or drop the old contents.
    unsafe { out.write(value) };
    Ok(())
}

/// Clears the out-pointer `out` (if non-null) so a failed call leaves no
/// stale handle behind.
///
/// # Safety
/// A non-null `out` must be valid for a write of a pointer.
unsafe fn clear<T>(out: *mut *mut T) {
    if !out.is_null() {
        // SAFETY: non-null, and valid for a write by the caller's contract.
        unsafe { out.write(std::ptr::null_mut()) };
    }
}

/// The version of the library, NUL-terminated and static.
#[no_mangle]
pub extern "C" fn ironbark_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// A static description of `code`.
#[no_mangle]
pub extern "C" fn ironbark_strerror(code: c_int) -> *const c_char {
    let s: &'static CStr = match code {
        IRONBARK_OK => c"success",
        IRONBARK_NOTFOUND => c"not found",
        IRONBARK_EINVAL => c"invalid argument (a null pointer or a bad value)",
        IRONBARK_EIO => c"I/O error",
        IRONBARK_ECORRUPTED => c"database corrupted",
        IRONBARK_ENOTIRONBARK => c"not an ironbark database file",
        IRONBARK_EVERSION => c"incompatible file format version",
        IRONBARK_EPAGESIZE => c"unsupported page size",
        IRONBARK_EKEYSIZE => c"key too large",
        IRONBARK_EVALSIZE => c"value too large",
        IRONBARK_ETREENAME => c"invalid tree name",
        IRONBARK_ENOTREE => c"no such tree",
        IRONBARK_ETREEDROPPED => c"tree dropped in this transaction",
        IRONBARK_EREADERSFULL => c"all reader slots are in use",
        IRONBARK_EBUSY => c"another write transaction is in progress",
        IRONBARK_ELOCKED => c"another process holds the write lock",
        IRONBARK_EREADONLY => c"read-only",
        IRONBARK_EPOISONED => c"an earlier sync failed; reopen the database",
        IRONBARK_EOPTION => c"invalid option",
        IRONBARK_ETXNFAILED => c"the transaction failed part-way and can only be aborted",
        IRONBARK_ETXNENDED => c"the transaction has ended",
        IRONBARK_EPANIC => c"internal error",
        IRONBARK_EUNKNOWN => c"unknown error",
        IRONBARK_ESTALETREE => c"stale tree handle: the tree was dropped in an earlier transaction",
        IRONBARK_EFOREIGNTREE => c"the tree handle belongs to another database",
        IRONBARK_ELOCKLESSREADER => {
            c"a read-only process without the lock file is reading; writers wait until it closes"
        }
        IRONBARK_EWRITETXNTHREAD => c"this thread already holds the write transaction",
        IRONBARK_EKEYORDER => {
            c"key out of order: an append must be greater than the tree's last key"
        }
        IRONBARK_EWRONGKIND => {
            c"wrong tree kind: the tree is a plain tree, a multimap or an integer-key tree"
        }
        IRONBARK_EPAIRSIZE => c"multimap pair too large: key and value exceed the key limit",
        IRONBARK_EINTKEYSIZE => c"integer key does not fit the tree's key width",
        IRONBARK_ESAVEPOINT => {
            c"invalid savepoint: released, rolled back past, or of another transaction"
        }
        IRONBARK_EARENAFULL => {
            c"the newest commits do not fit in this process's page arena: end old read transactions"
        }
        IRONBARK_KEYEXIST => c"the pair is already in the multimap",
        _ => c"unknown status code",
    };
    s.as_ptr()
}

/// The message of the last error on this thread.
#[no_mangle]
pub extern "C" fn ironbark_last_error() -> *const c_char {
    // The CString stays in the thread-local until the next failure on this
    // thread replaces it, which is the lifetime the header promises.
    LAST_ERROR.with(|l| l.borrow().as_ptr())
}

fn defaults() -> ironbark_options {
    let d = Options::default();
    ironbark_options {
        page_size: d.page_size as u32,
        max_readers: d.max_readers as u32,
        durability: IRONBARK_DURABILITY_IMMEDIATE,
        create: d.create as i32,
        read_only: d.read_only as i32,
        salvage_damaged_log: d.salvage_damaged_log as i32,
    }
}

/// Fills `*opts` with the defaults.
#[no_mangle]
pub unsafe extern "C" fn ironbark_options_init(opts: *mut ironbark_options) -> c_int {
    guard(|| {
        // SAFETY: the header requires a non-null `opts` to point to a
        // writable `ironbark_options`.
        unsafe { store(opts, defaults(), "opts") }?;
        Ok(IRONBARK_OK)
    })
}

fn options_of(o: &ironbark_options) -> Result<Options, Failure> {
    let durability = match o.durability {
        IRONBARK_DURABILITY_IMMEDIATE => Durability::Immediate,
        IRONBARK_DURABILITY_NONE => Durability::None,
        other => {
            return Err(Failure {
                code: IRONBARK_EOPTION,
                message: format!("invalid option: durability {other} (0 immediate, 1 none)"),
            })
        }
    };
    Ok(Options {
        page_size: o.page_size as usize,
        max_readers: o.max_readers as usize,
        durability,
        create: o.create != 0,
        read_only: o.read_only != 0,
        salvage_damaged_log: o.salvage_damaged_log != 0,
        ..Options::default()
    })
}

/// Opens the database at `path`.
#[no_mangle]
pub unsafe extern "C" fn ironbark_open(
    path: *const c_char,
    opts: *const ironbark_options,
    db: *mut *mut Db,
) -> c_int {
    guard(|| {
        // SAFETY: `db` is null or a writable pointer slot (header contract).
        unsafe { clear(db) };
        if db.is_null() {
            return Err(Failure::invalid("db (the out-pointer) is null"));
        }
        // SAFETY: `path` is null or a NUL-terminated string (header).
        let path = unsafe { text(path, "path") }?;
        let options = if opts.is_null() {
            Options::default()
        } else {
            // SAFETY: `opts` is non-null and points to an `ironbark_options`
            // the caller owns for the call (header).
            options_of(unsafe { reference(opts, "opts") }?)?
        };
        let handle = Db {
            db: Database::open_with(path, &options)?,
        };
        // SAFETY: `db` was checked non-null above and is writable (header).
        unsafe { store(db, Box::into_raw(Box::new(handle)), "db") }?;
        Ok(IRONBARK_OK)
    })
}

/// Closes the database handle.
#[no_mangle]
pub unsafe extern "C" fn ironbark_close(db: *mut Db) {
    guard_void(|| {
        if !db.is_null() {
            // SAFETY: a non-null `db` came from `ironbark_open`'s
            // `Box::into_raw` and is closed once (header contract).
            drop(unsafe { Box::from_raw(db) });
        }
    })
}

/// Makes every commit durable.
#[no_mangle]
pub unsafe extern "C" fn ironbark_sync(db: *mut Db) -> c_int {
    guard(|| {
        // SAFETY: `db` is null or a live handle from `ironbark_open`.
        let db = unsafe { reference(db, "db") }?;
        db.db.sync()?;
        Ok(IRONBARK_OK)
    })
}

/// The longest key accepted.
#[no_mangle]
pub unsafe extern "C" fn ironbark_max_key_len(db: *mut Db, len: *mut usize) -> c_int {
    guard(|| {
        // SAFETY: `db` is null or a live handle from `ironbark_open`.
        let db = unsafe { reference(db, "db") }?;
        // SAFETY: `len` is null or writable (header).
        unsafe { store(len, db.db.max_key_len(), "len") }?;
        Ok(IRONBARK_OK)
    })
}

/// Sizes and counts of the database.
#[no_mangle]
pub unsafe extern "C" fn ironbark_stats(db: *mut Db, stats: *mut ironbark_stat) -> c_int {
    guard(|| {
        // SAFETY: `db` is null or a live handle from `ironbark_open`.
        let db = unsafe { reference(db, "db") }?;
        if stats.is_null() {
            return Err(Failure::invalid("stats is null"));
        }
        let s = db.db.stats()?;
        let out = ironbark_stat {
            page_size: s.page_size as u64,
            file_size_bytes: s.file_size_bytes,
            page_count: s.page_count,
            free_pages: s.free_pages,
            last_txn_id: s.last_txn_id,
            durable_txn_id: s.durable_txn_id,
            live_readers: s.live_readers as u64,
            max_readers: s.max_readers as u64,
            tree_count: s.trees.len() as u64,
            entries: s.trees.iter().map(|t| t.entries).sum(),
        };
        // SAFETY: `stats` is non-null and writable (header).
        unsafe { store(stats, out, "stats") }?;
        Ok(IRONBARK_OK)
    })
}

/// Begins a transaction.
#[no_mangle]
pub unsafe extern "C" fn ironbark_txn_begin(
    db: *mut Db,
    flags: c_uint,
    txn: *mut *mut Txn,
) -> c_int {
    guard(|| {
        // SAFETY: `txn` is null or a writable pointer slot (header).
        unsafe { clear(txn) };
        // SAFETY: `db` is null or a live handle from `ironbark_open`.
        let db = unsafe { reference(db, "db") }?;
        if txn.is_null() {
            return Err(Failure::invalid("txn (the out-pointer) is null"));
        }
        let known = IRONBARK_TXN_READ_ONLY | IRONBARK_TXN_NOWAIT | IRONBARK_TXN_NOSYNC;
        if flags & !known != 0 {
            return Err(Failure::invalid(format!("unknown txn flags {flags:#x}")));
        }
        let kind = if flags & IRONBARK_TXN_READ_ONLY != 0 {
            TxnKind::Read(Arc::new(db.db.begin_read()?))
        } else {
            let owner = db.db.clone();
            let mut w = if flags & IRONBARK_TXN_NOWAIT != 0 {
                owner.try_begin_write()?
            } else {
                owner.begin_write()?
            };
            if flags & IRONBARK_TXN_NOSYNC != 0 {
                w.set_durability(Durability::None);
            }
            // SAFETY: the transaction borrows the database's shared state,
            // which lives in the `Arc` inside `owner`, not in `owner` itself;
            // `WriteCell` keeps `owner` and drops the transaction before it
            // (field order), and the transaction is never handed out with
            // the `'static` lifetime (only borrowed through the cell).
            let w = unsafe { std::mem::transmute::<WriteTxn<'_>, WriteTxn<'static>>(w) };
            TxnKind::Write(Rc::new(WriteCell {
                txn: RefCell::new(Some(w)),
                _db: owner,
            }))
        };
        let handle = Box::into_raw(Box::new(Txn { kind }));
        // SAFETY: `txn` was checked non-null above and is writable (header).
        unsafe { store(txn, handle, "txn") }?;
        Ok(IRONBARK_OK)
    })
}

/// Commits (or, for a read transaction, ends) and frees the transaction.
#[no_mangle]
pub unsafe extern "C" fn ironbark_txn_commit(txn: *mut Txn) -> c_int {
    guard(|| {
        if txn.is_null() {
            return Err(Failure::invalid("txn is null"));
        }
        // SAFETY: a non-null `txn` came from `ironbark_txn_begin`'s
        // `Box::into_raw` and is ended once (header contract).
        let txn = unsafe { Box::from_raw(txn) };
        match txn.kind {
            TxnKind::Read(_) => Ok(IRONBARK_OK),
            TxnKind::Write(cell) => {
                let w = cell.txn.try_borrow_mut().ok().and_then(|mut t| t.take());
                match w {
                    Some(w) => {
                        w.commit()?;
                        Ok(IRONBARK_OK)
                    }
                    None => Err(Failure {
                        code: IRONBARK_ETXNENDED,
                        message: "the transaction has ended".into(),
                    }),
                }
            }
        }
    })
}

/// Aborts and frees the transaction.
#[no_mangle]
pub unsafe extern "C" fn ironbark_txn_abort(txn: *mut Txn) {
    guard_void(|| {
        if txn.is_null() {
            return;
        }
        // SAFETY: a non-null `txn` came from `ironbark_txn_begin`'s
        // `Box::into_raw` and is ended once (header contract).
        let txn = unsafe { Box::from_raw(txn) };
        if let TxnKind::Write(cell) = txn.kind {
            // Empty the cell now: cursors that share it see the end.
            if let Ok(mut t) = cell.txn.try_borrow_mut() {
                drop(t.take());
            }
        }
    })
}

/// `ETXNENDED`: the transaction behind a cursor or handle has ended.
fn ended() -> Failure {
    Failure {
        code: IRONBARK_ETXNENDED,
        message: "the transaction has ended".into(),
    }
}

fn read_only(what: &str) -> Failure {
    Failure {
        code: IRONBARK_EREADONLY,
        message: format!("{what} in a read transaction"),
    }
}

/// The handle of the existing tree `$name` in the transaction `$t`, if it
/// is of the kind `$kind` (`EWRONGKIND` otherwise): a macro, since the two
/// transactions share no trait.
macro_rules! open_existing {
    ($t:expr, $name:expr, $kind:expr) => {{
        let (name, kind): (&str, TreeKind) = ($name, $kind);
        let handle = if kind.multimap {
            Handle::Multimap($t.multimap(name)?)
        } else if kind.integer_key.is_some() {
            Handle::Int($t.int_tree(name)?)
        } else {
            Handle::Plain($t.tree(name)?)
        };
        let found = match &handle {
            Handle::Plain(_) => TreeKind::PLAIN,
            Handle::Multimap(m) => m.kind(),
            Handle::Int(t) => TreeKind::int_keys(t.width()),
        };
        if found == kind {
            Ok::<Handle, Failure>(handle)
        } else {
            Err(Failure::from(Error::WrongTreeKind {
                name: name.to_string(),
                expected: kind,
                found,
            }))
        }
    }};
}

/// Opens a tree handle.
#[no_mangle]
pub unsafe extern "C" fn ironbark_tree_open(
    txn: *mut Txn,
    name: *const c_char,
    flags: c_uint,
    tree: *mut *mut TreeHandle,
) -> c_int {
    guard(|| {
        // SAFETY: `tree` is null or a writable pointer slot (header).
        unsafe { clear(tree) };
        // SAFETY: `txn` is null or a live handle from `ironbark_txn_begin`.
        let txn = unsafe { reference(txn, "txn") }?;
        // SAFETY: `name` is null or a NUL-terminated string (header).
        let name = unsafe { text(name, "name") }?;
        if tree.is_null() {
            return Err(Failure::invalid("tree (the out-pointer) is null"));
        }
        let known = IRONBARK_TREE_CREATE
            | IRONBARK_TREE_MULTIMAP
            | IRONBARK_TREE_INTKEY32
            | IRONBARK_TREE_INTKEY64;
        if flags & !known != 0 {
            return Err(Failure::invalid(format!("unknown tree flags {flags:#x}")));
        }
        let width = match (
            flags & IRONBARK_TREE_INTKEY32 != 0,
            flags & IRONBARK_TREE_INTKEY64 != 0,
        ) {
            (false, false) => None,
            (true, false) => Some(IntWidth::U32),
            (false, true) => Some(IntWidth::U64),
            (true, true) => {
                return Err(Failure::invalid(
                    "IRONBARK_TREE_INTKEY32 and IRONBARK_TREE_INTKEY64 together",
                ))
            }
        };
        let kind = match (flags & IRONBARK_TREE_MULTIMAP != 0, width) {
            (false, None) => TreeKind::PLAIN,
            (true, None) => TreeKind::MULTIMAP,
            (true, Some(w)) => TreeKind::int_multimap(w),
            (false, Some(w)) => TreeKind::int_keys(w),
        };
        let handle = match &txn.kind {
            TxnKind::Read(r) => open_existing!(r, name, kind)?,
            TxnKind::Write(cell) => {
                let mut w = cell.txn.try_borrow_mut().map_err(|_| ended())?;
                let w = w.as_mut().ok_or_else(ended)?;
                if flags & IRONBARK_TREE_CREATE != 0 {
                    match (kind.multimap, width) {
                        (false, None) => Handle::Plain(w.open_tree(name)?),
                        (true, None) => Handle::Multimap(w.open_multimap(name)?),
                        (true, Some(width)) => Handle::Multimap(w.open_int_multimap(name, width)?),
                        (false, Some(width)) => Handle::Int(w.open_int_tree(name, width)?),
                    }
                } else {
                    open_existing!(w, name, kind)?
                }
            }
        };
        let handle = Box::into_raw(Box::new(TreeHandle { handle }));
        // SAFETY: `tree` was checked non-null above and is writable.
        unsafe { store(tree, handle, "tree") }?;
        Ok(IRONBARK_OK)
    })
}

/// Frees a tree handle.
#[no_mangle]
pub unsafe extern "C" fn ironbark_tree_close(tree: *mut TreeHandle) {
    guard_void(|| {
        if !tree.is_null() {
            // SAFETY: a non-null `tree` came from `ironbark_tree_open`'s
            // `Box::into_raw` and is closed once (header contract).
            drop(unsafe { Box::from_raw(tree) });
        }
    })
}

/// The number of entries of a tree.
#[no_mangle]
pub unsafe extern "C" fn ironbark_tree_count(
    txn: *mut Txn,
    tree: *const TreeHandle,
    count: *mut u64,
) -> c_int {
    guard(|| {
        // SAFETY: `txn` is null or a live handle from `ironbark_txn_begin`.
        let txn = unsafe { reference(txn, "txn") }?;
        // SAFETY: `tree` is null or a live handle from `ironbark_tree_open`.
        let tree = unsafe { reference(tree, "tree") }?;
        if count.is_null() {
            return Err(Failure::invalid("count is null"));
        }
        // Any kind of tree: its entries, or a multimap's pairs.
        let n = in_txn!(txn, t => count_of!(t, tree)?);
        // SAFETY: `count` is non-null and writable (header).
        unsafe { store(count, n, "count") }?;
        Ok(IRONBARK_OK)
    })
}

/// Looks a key up, zero-copy.
#[no_mangle]
pub unsafe extern "C" fn ironbark_get(
    txn: *mut Txn,
    tree: *const TreeHandle,
    key: *const u8,
    key_len: usize,
    val: *mut *const u8,
    val_len: *mut usize,
) -> c_int {
    guard(|| {
        // SAFETY: `txn` is null or a live handle from `ironbark_txn_begin`.
        let txn = unsafe { reference(txn, "txn") }?;
        // SAFETY: `tree` is null or a live handle from `ironbark_tree_open`.
        let tree = unsafe { reference(tree, "tree") }?.plain()?;
        // SAFETY: `key` is null or `key_len` readable bytes (header).
        let key = unsafe { bytes(key, key_len, "key") }?;
        if val.is_null() || val_len.is_null() {
            return Err(Failure::invalid("val or val_len is null"));
        }
        // The value stays where it is: in the read snapshot (alive while
        // the transaction is) or in the write transaction's pages (until
        // its next change), which is what the header promises the caller.
        let found = in_txn!(txn, t => t.get(tree, key)?.map(|v| (v.as_ptr(), v.len())));
        let Some((ptr, len)) = found else {
            return Ok(IRONBARK_NOTFOUND);
        };
        // SAFETY: both out-pointers are non-null and writable (header).
        unsafe {
            store(val, ptr, "val")?;
            store(val_len, len, "val_len")?;
        }
        Ok(IRONBARK_OK)
    })
}

/// The write transaction of `txn`, or `EREADONLY` naming `what`.
fn writer<'a>(txn: &'a Txn, what: &str) -> Result<&'a Rc<WriteCell>, Failure> {
    match &txn.kind {
        TxnKind::Read(_) => Err(read_only(what)),
        TxnKind::Write(cell) => Ok(cell),
    }
}

/// Stores a value.
#[no_mangle]
pub unsafe extern "C" fn ironbark_put(
    txn: *mut Txn,
    tree: *const TreeHandle,
    key: *const u8,
    key_len: usize,
    val: *const u8,
    val_len: usize,
) -> c_int {
    guard(|| {
        // SAFETY: `txn` is null or a live handle from `ironbark_txn_begin`.
        let txn = unsafe { reference(txn, "txn") }?;
        // SAFETY: `tree` is null or a live handle from `ironbark_tree_open`.
        let tree = unsafe { reference(tree, "tree") }?.plain()?;
        // SAFETY: `key` is null or `key_len` readable bytes (header).
        let key = unsafe { bytes(key, key_len, "key") }?;
        // SAFETY: `val` is null or `val_len` readable bytes (header).
        let val = unsafe { bytes(val, val_len, "val") }?;
        let cell = writer(txn, "put")?;
        let mut w = cell.txn.try_borrow_mut().map_err(|_| ended())?;
        w.as_mut().ok_or_else(ended)?.put(tree, key, val)?;
        Ok(IRONBARK_OK)
    })
}

/// The pairs of `ironbark_put_many`: its four arrays, of one length.
struct PairArrays<'a> {
    keys: &'a [*const u8],
    key_lens: &'a [usize],
    vals: &'a [*const u8],
    val_lens: &'a [usize],
}

impl<'a> PairArrays<'a> {
    /// Pair `i`, or `EINVAL` naming it.
    ///
    /// # Safety
    /// As for [`bytes`], for the key and the value of pair `i`.
    unsafe fn pair(&self, i: usize) -> Result<(&'a [u8], &'a [u8]), Failure> {
        let at = |f: Failure| Failure::invalid(format!("{} (pair {i})", f.message));
        // SAFETY: by the caller's contract, each is null or its length of
        // readable bytes that stay unchanged for `'a`.
        unsafe {
            Ok((
                bytes(self.keys[i], self.key_lens[i], "key").map_err(at)?,
                bytes(self.vals[i], self.val_lens[i], "val").map_err(at)?,
            ))
        }
    }
}

/// Stores many values, their descents walked together.
#[no_mangle]
pub unsafe extern "C" fn ironbark_put_many(
    txn: *mut Txn,
    tree: *const TreeHandle,
    keys: *const *const u8,
    key_lens: *const usize,
    vals: *const *const u8,
    val_lens: *const usize,
    count: usize,
) -> c_int {
    guard(|| {
        // SAFETY: `txn` is null or a live handle from `ironbark_txn_begin`.
        let txn = unsafe { reference(txn, "txn") }?;
        // SAFETY: `tree` is null or a live handle from `ironbark_tree_open`.
        let tree = unsafe { reference(tree, "tree") }?.plain()?;
        // SAFETY: each array is null or `count` readable elements (header).
        let pairs = unsafe {
            PairArrays {
                keys: array(keys, count, "keys")?,
                key_lens: array(key_lens, count, "key_lens")?,
                vals: array(vals, count, "vals")?,
                val_lens: array(val_lens, count, "val_lens")?,
            }
        };
        // Every pair is checked before the first is stored, so that a bad
        // argument stores nothing, as for `ironbark_put`.
        for i in 0..count {
            // SAFETY: pair `i`'s key and value are null or their lengths of
            // readable bytes (header).
            unsafe { pairs.pair(i) }?;
        }
        let cell = writer(txn, "put_many")?;
        let mut w = cell.txn.try_borrow_mut().map_err(|_| ended())?;
        // SAFETY: as above; every pair converts, as checked there.
        let checked = (0..count).map_while(|i| unsafe { pairs.pair(i) }.ok());
        w.as_mut().ok_or_else(ended)?.put_many(tree, checked)?;
        Ok(IRONBARK_OK)
    })
}

/// Removes a key.
#[no_mangle]
pub unsafe extern "C" fn ironbark_delete(
    txn: *mut Txn,
    tree: *const TreeHandle,
    key: *const u8,
    key_len: usize,
) -> c_int {
    guard(|| {
        // SAFETY: `txn` is null or a live handle from `ironbark_txn_begin`.
        let txn = unsafe { reference(txn, "txn") }?;
        // SAFETY: `tree` is null or a live handle from `ironbark_tree_open`.
        let tree = unsafe { reference(tree, "tree") }?.plain()?;
        // SAFETY: `key` is null or `key_len` readable bytes (header).
        let key = unsafe { bytes(key, key_len, "key") }?;
        let cell = writer(txn, "delete")?;
        let mut w = cell.txn.try_borrow_mut().map_err(|_| ended())?;
        let existed = w.as_mut().ok_or_else(ended)?.delete(tree, key)?;
        Ok(if existed {
            IRONBARK_OK
        } else {
            IRONBARK_NOTFOUND
        })
    })
}

fn owned(b: Option<&[u8]>, inclusive: bool) -> Bound<Box<[u8]>> {
    match b {
        None => Bound::Unbounded,
        Some(k) if inclusive => Bound::Included(k.into()),
        Some(k) => Bound::Excluded(k.into()),
    }
}

fn borrowed(b: &Bound<Box<[u8]>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k),
        Bound::Excluded(k) => Bound::Excluded(k),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// The tighter of a lower bound and `key` (included).
fn raise_lower<'a>(lower: Bound<&'a [u8]>, key: &'a [u8]) -> Bound<&'a [u8]> {
    match lower {
        Bound::Included(l) | Bound::Excluded(l) if l >= key => lower,
        _ => Bound::Included(key),
    }
}

/// The tighter of an upper bound and `key` (included).
fn lower_upper<'a>(upper: Bound<&'a [u8]>, key: &'a [u8]) -> Bound<&'a [u8]> {
    match upper {
        Bound::Included(u) | Bound::Excluded(u) if u <= key => upper,
        _ => Bound::Included(key),
    }
}

/// A key and its value.
type Entry<'a> = (&'a [u8], &'a [u8]);

impl PlainCursor {
    /// The next entry, as raw parts that stay valid as the header says.
    fn step(&mut self) -> Result<Option<Entry<'_>>, Failure> {
        match &mut self.source {
            CursorSource::Read { range, txn } => {
                if range.is_none() {
                    let (lower, upper) = {
                        let (l, u) =
                            borrowed_bounds(&self.lower, &self.upper, &self.seek, self.reverse);
                        // SAFETY: the bounds borrow boxes owned by this
                        // cursor, which are neither dropped nor replaced
                        // while `range` is `Some` (`seek` clears `range`
                        // first, and `range` is dropped before the fields
                        // it borrows), and boxed data does not move when
                        // the cursor does.
                        unsafe { (extend(l), extend(u)) }
                    };
                    // SAFETY: the range borrows the snapshot inside the
                    // `Arc<ReadTxn>` that this cursor holds in the same
                    // variant; it is dropped before that `Arc` (field
                    // order) and the snapshot does not move.
                    let txn: &'static ReadTxn = unsafe { &*Arc::as_ptr(txn) };
                    *range = Some(Box::new(txn.range(&self.tree, (lower, upper))?));
                }
                let r = range.as_mut().expect("built above");
                let next = if self.reverse {
                    r.next_back()
                } else {
                    r.next()
                };
                Ok(next.transpose()?)
            }
            CursorSource::Write { cell, last } => {
                let w = cell.txn.try_borrow().map_err(|_| ended())?;
                let w = w.as_ref().ok_or_else(ended)?;
                let (lower, upper) = {
                    let (mut l, mut u) =
                        borrowed_bounds(&self.lower, &self.upper, &self.seek, self.reverse);
                    if let Some(k) = last.as_deref() {
                        if self.reverse {
                            u = Bound::Excluded(k);
                        } else {
                            l = Bound::Excluded(k);
                        }
                    }
                    (l, u)
                };
                let mut range = w.range(&self.tree, (lower, upper))?;
                let next = if self.reverse {
                    range.next_back()
                } else {
                    range.next()
                };
                let Some((k, v)) = next.transpose()? else {
                    return Ok(None);
                };
                let (k, v) = (k as *const [u8], v as *const [u8]);
                // SAFETY: `k` points into the transaction's pages (see
                // below); only copied here.
                *last = Some(unsafe { &*k }.into());
                // SAFETY: the entry lives in the write transaction's pages,
                // which stay unchanged until its next put/delete/end: the
                // lifetime the header gives the caller. The `RefCell` guard
                // only spans this call.
                Ok(Some(unsafe { (&*k, &*v) }))
            }
        }
    }
}

/// The bounds of a cursor tightened by its seek key.
fn borrowed_bounds<'a>(
    lower: &'a Bound<Box<[u8]>>,
    upper: &'a Bound<Box<[u8]>>,
    seek: &'a Option<Box<[u8]>>,
    reverse: bool,
) -> (Bound<&'a [u8]>, Bound<&'a [u8]>) {
    let (mut l, mut u) = (borrowed(lower), borrowed(upper));
    if let Some(seek) = seek {
        if reverse {
            u = lower_upper(u, seek);
        } else {
            l = raise_lower(l, seek);
        }
    }
    (l, u)
}

/// Extends a bound's borrow to `'static`.
///
/// # Safety
/// The borrowed bytes must outlive every use of the result.
unsafe fn extend(b: Bound<&[u8]>) -> Bound<&'static [u8]> {
    // SAFETY: the caller guarantees the bytes outlive every use.
    let ext = |k: &[u8]| unsafe { &*(k as *const [u8]) };
    match b {
        Bound::Included(k) => Bound::Included(ext(k)),
        Bound::Excluded(k) => Bound::Excluded(ext(k)),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// Whether the write transaction of `cell` has ended.
fn has_ended(cell: &WriteCell) -> bool {
    cell.txn.try_borrow().map(|t| t.is_none()).unwrap_or(true)
}

/// What a new cursor reads: a read snapshot or the write transaction.
enum Origin {
    Read(Arc<ReadTxn>),
    Write(Rc<WriteCell>),
}

/// The origin of a cursor of `txn` over `handle`, after checking that the
/// tree is there (`NoSuchTree`... now rather than at the first step).
fn origin(txn: &Txn, handle: &TreeHandle) -> Result<Origin, Failure> {
    match &txn.kind {
        TxnKind::Read(r) => {
            count_of!(r, handle)?;
            Ok(Origin::Read(r.clone()))
        }
        TxnKind::Write(cell) => {
            let w = cell.txn.try_borrow().map_err(|_| ended())?;
            let w = w.as_ref().ok_or_else(ended)?;
            count_of!(w, handle)?;
            Ok(Origin::Write(cell.clone()))
        }
    }
}

/// `EWRONGKIND`: a byte-key cursor call (`what`) on an integer-key cursor.
fn int_cursor(what: &str) -> Failure {
    Failure {
        code: IRONBARK_EWRONGKIND,
        message: format!(
            "{what} on a cursor of an integer-key tree (use ironbark_cursor_next_int)"
        ),
    }
}

/// A cursor over the pairs of a multimap whose keys are within bounds
/// (`ironbark_cursor_open` on a multimap, `ironbark_cursor_open_dups`).
struct PairCursor {
    // Declared first, so dropped before the multimap, the bounds and the
    // snapshot it borrows.
    source: PairSource,
    /// Boxed: a read cursor's iterator borrows it.
    map: Box<Multimap>,
    lower: Bound<Box<[u8]>>,
    upper: Bound<Box<[u8]>>,
    /// The key of the last `seek`, as for a plain cursor.
    seek: Option<Box<[u8]>>,
    reverse: bool,
    /// The last key returned when it had to be decoded (a key with zero
    /// bytes is not stored as itself): valid until the next step.
    key_buf: Vec<u8>,
}

/// A multimap pair, copied.
type OwnedPair = (Box<[u8]>, Box<[u8]>);

enum PairSource {
    /// As a plain read cursor: the engine's iterator over its own
    /// snapshot, built at the first step after open or seek; it borrows
    /// `txn`, the boxed multimap and the cursor's boxed bounds.
    Read {
        pairs: Option<Box<Pairs<'static>>>,
        txn: Arc<ReadTxn>,
    },
    /// As a plain write cursor: positioned by the last pair it returned.
    Write {
        cell: Rc<WriteCell>,
        last: Option<OwnedPair>,
    },
}

impl PairCursor {
    /// The next pair, as raw parts valid as the header says.
    fn step(&mut self) -> Result<Option<Entry<'_>>, Failure> {
        let (key, value) = match &mut self.source {
            PairSource::Read { pairs, txn } => {
                if pairs.is_none() {
                    let (l, u) =
                        borrowed_bounds(&self.lower, &self.upper, &self.seek, self.reverse);
                    // SAFETY: as for a plain read cursor (`PlainCursor::step`):
                    // the bounds borrow boxes this cursor owns, which stay
                    // put while `pairs` is `Some` (seek clears it first).
                    let (l, u) = unsafe { (extend(l), extend(u)) };
                    // SAFETY: the iterator borrows the snapshot in the
                    // `Arc<ReadTxn>` held beside it and the boxed multimap,
                    // both dropped after it (field order) and never moved.
                    let (txn, map): (&'static ReadTxn, &'static Multimap) =
                        unsafe { (&*Arc::as_ptr(txn), &*(&*self.map as *const Multimap)) };
                    *pairs = Some(Box::new(txn.multimap_range(map, (l, u))?));
                }
                let p = pairs.as_mut().expect("built above");
                let next = if self.reverse {
                    p.next_back()
                } else {
                    p.next()
                };
                let Some((k, v)) = next.transpose()? else {
                    return Ok(None);
                };
                (raw_key(k), v as *const [u8])
            }
            PairSource::Write { cell, last } => {
                let w = cell.txn.try_borrow().map_err(|_| ended())?;
                let w = w.as_ref().ok_or_else(ended)?;
                let (mut l, mut u) =
                    borrowed_bounds(&self.lower, &self.upper, &self.seek, self.reverse);
                // From the last pair's key on: the pairs of that key up to
                // the last one are skipped below.
                if let Some((k, _)) = last.as_ref() {
                    if self.reverse {
                        u = lower_upper(u, k);
                    } else {
                        l = raise_lower(l, k);
                    }
                }
                let mut pairs = w.multimap_range(&self.map, (l, u))?;
                let found = loop {
                    let next = if self.reverse {
                        pairs.next_back()
                    } else {
                        pairs.next()
                    };
                    let Some((k, v)) = next.transpose()? else {
                        break None;
                    };
                    let done = last.as_ref().is_some_and(|(lk, lv)| {
                        let order = (&k[..], v).cmp(&(&lk[..], &lv[..]));
                        if self.reverse {
                            order.is_ge()
                        } else {
                            order.is_le()
                        }
                    });
                    if !done {
                        break Some((k, v));
                    }
                };
                let Some((k, v)) = found else {
                    return Ok(None);
                };
                *last = Some((Box::from(&k[..]), Box::from(v)));
                (raw_key(k), v as *const [u8])
            }
        };
        let key: *const [u8] = match key {
            RawKey::Borrowed(k) => k,
            RawKey::Decoded(k) => {
                self.key_buf = k;
                &self.key_buf[..]
            }
        };
        // SAFETY: the value and a borrowed key live in the read snapshot
        // this cursor holds, or in the write transaction's pages, which
        // stay unchanged until its next put/delete/end (the lifetime the
        // header gives, as for a plain cursor; the `RefCell` guard only
        // spans this call); a decoded key lives in `key_buf` until the
        // next step, which needs `&mut self`.
        Ok(Some(unsafe { (&*key, &*value) }))
    }
}

/// A multimap key as a cursor hands it on: where it is in the pages, or
/// decoded (a key with zero bytes is not stored as itself).
enum RawKey {
    Borrowed(*const [u8]),
    Decoded(Vec<u8>),
}

fn raw_key(k: std::borrow::Cow<'_, [u8]>) -> RawKey {
    match k {
        std::borrow::Cow::Borrowed(k) => RawKey::Borrowed(k),
        std::borrow::Cow::Owned(k) => RawKey::Decoded(k),
    }
}

/// Opens a cursor.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn ironbark_cursor_open(
    txn: *mut Txn,
    tree: *const TreeHandle,
    start: *const u8,
    start_len: usize,
    end: *const u8,
    end_len: usize,
    flags: c_uint,
    cursor: *mut *mut Cursor,
) -> c_int {
    guard(|| {
        // SAFETY: `cursor` is null or a writable pointer slot (header).
        unsafe { clear(cursor) };
        // SAFETY: `txn` is null or a live handle from `ironbark_txn_begin`.
        let txn = unsafe { reference(txn, "txn") }?;
        // SAFETY: `tree` is null or a live handle from `ironbark_tree_open`.
        let handle = unsafe { reference(tree, "tree") }?;
        // A null bound is no bound (not the empty key).
        let start = if start.is_null() {
            None
        } else {
            // SAFETY: non-null, `start_len` readable bytes (header).
            Some(unsafe { bytes(start, start_len, "start") }?)
        };
        let end = if end.is_null() {
            None
        } else {
            // SAFETY: non-null, `end_len` readable bytes (header).
            Some(unsafe { bytes(end, end_len, "end") }?)
        };
        if cursor.is_null() {
            return Err(Failure::invalid("cursor (the out-pointer) is null"));
        }
        let known = IRONBARK_CURSOR_REVERSE | IRONBARK_CURSOR_END_INCLUSIVE;
        if flags & !known != 0 {
            return Err(Failure::invalid(format!("unknown cursor flags {flags:#x}")));
        }
        let lower = owned(start, true);
        let upper = owned(end, flags & IRONBARK_CURSOR_END_INCLUSIVE != 0);
        let reverse = flags & IRONBARK_CURSOR_REVERSE != 0;
        let kind = match &handle.handle {
            Handle::Plain(tree) => CursorKind::Plain(PlainCursor {
                source: match origin(txn, handle)? {
                    Origin::Read(txn) => CursorSource::Read { range: None, txn },
                    Origin::Write(cell) => CursorSource::Write { cell, last: None },
                },
                tree: tree.clone(),
                lower,
                upper,
                seek: None,
                reverse,
            }),
            Handle::Multimap(m) => CursorKind::Pairs(PairCursor {
                source: match origin(txn, handle)? {
                    Origin::Read(txn) => PairSource::Read { pairs: None, txn },
                    Origin::Write(cell) => PairSource::Write { cell, last: None },
                },
                map: Box::new(m.clone()),
                lower,
                upper,
                seek: None,
                reverse,
                key_buf: Vec::new(),
            }),
            Handle::Int(t) => {
                return Err(wrong_kind(
                    t.name(),
                    "an integer-key tree (use ironbark_cursor_open_int)",
                    "a tree of byte keys",
                ))
            }
        };
        let handle = Cursor { kind };
        // SAFETY: `cursor` was checked non-null above and is writable.
        unsafe { store(cursor, Box::into_raw(Box::new(handle)), "cursor") }?;
        Ok(IRONBARK_OK)
    })
}

/// The next entry of a cursor.
#[no_mangle]
pub unsafe extern "C" fn ironbark_cursor_next(
    cursor: *mut Cursor,
    key: *mut *const u8,
    key_len: *mut usize,
    val: *mut *const u8,
    val_len: *mut usize,
) -> c_int {
    guard(|| {
        // SAFETY: `cursor` is null or a live handle from
        // `ironbark_cursor_open`, used by this thread only (header).
        let cursor = unsafe { exclusive(cursor, "cursor") }?;
        if key.is_null() || key_len.is_null() || val.is_null() || val_len.is_null() {
            return Err(Failure::invalid("key, key_len, val or val_len is null"));
        }
        let found = match &mut cursor.kind {
            CursorKind::Plain(c) => c.step()?,
            CursorKind::Pairs(c) => c.step()?,
            CursorKind::Int(_) => return Err(int_cursor("ironbark_cursor_next")),
        };
        let Some((k, v)) = found else {
            return Ok(IRONBARK_NOTFOUND);
        };
        // SAFETY: the four out-pointers are non-null and writable (header).
        unsafe {
            store(key, k.as_ptr(), "key")?;
            store(key_len, k.len(), "key_len")?;
            store(val, v.as_ptr(), "val")?;
            store(val_len, v.len(), "val_len")?;
        }
        Ok(IRONBARK_OK)
    })
}

/// Repositions a cursor.
#[no_mangle]
pub unsafe extern "C" fn ironbark_cursor_seek(
    cursor: *mut Cursor,
    key: *const u8,
    key_len: usize,
) -> c_int {
    guard(|| {
        // SAFETY: `cursor` is null or a live handle from
        // `ironbark_cursor_open`, used by this thread only (header).
        let cursor = unsafe { exclusive(cursor, "cursor") }?;
        // SAFETY: `key` is null or `key_len` readable bytes (header).
        let key = unsafe { bytes(key, key_len, "key") }?;
        // Drop the iterator before replacing the seek key it borrows.
        match &mut cursor.kind {
            CursorKind::Plain(c) => {
                match &mut c.source {
                    CursorSource::Read { range, .. } => *range = None,
                    CursorSource::Write { cell, last } => {
                        if has_ended(cell) {
                            return Err(ended());
                        }
                        *last = None;
                    }
                }
                c.seek = Some(key.into());
            }
            CursorKind::Pairs(c) => {
                match &mut c.source {
                    PairSource::Read { pairs, .. } => *pairs = None,
                    PairSource::Write { cell, last } => {
                        if has_ended(cell) {
                            return Err(ended());
                        }
                        *last = None;
                    }
                }
                c.seek = Some(key.into());
            }
            CursorKind::Int(_) => return Err(int_cursor("ironbark_cursor_seek")),
        }
        Ok(IRONBARK_OK)
    })
}

/// Frees a cursor.
#[no_mangle]
pub unsafe extern "C" fn ironbark_cursor_close(cursor: *mut Cursor) {
    guard_void(|| {
        if !cursor.is_null() {
            // SAFETY: a non-null `cursor` came from `ironbark_cursor_open`'s
            // `Box::into_raw` and is closed once (header contract).
            drop(unsafe { Box::from_raw(cursor) });
        }
    })
}

/// The entry a lookup found, as raw parts: where the key and the value
/// are and how long, valid as `ironbark_get`'s value is.
type RawEntry = (*const u8, usize, *const u8, usize);

fn raw_entry((key, value): Entry<'_>) -> RawEntry {
    (key.as_ptr(), key.len(), value.as_ptr(), value.len())
}

/// Checks the four out-pointers of an entry.
fn check_entry_out(
    key: *mut *const u8,
    key_len: *mut usize,
    val: *mut *const u8,
    val_len: *mut usize,
) -> Result<(), Failure> {
    if key.is_null() || key_len.is_null() || val.is_null() || val_len.is_null() {
        return Err(Failure::invalid("key, key_len, val or val_len is null"));
    }
    Ok(())
}

/// Hands a lookup's entry to C: `OK` with the four out-pointers set, or
/// `NOTFOUND`.
///
/// # Safety
/// The out-pointers must be non-null (checked by [`check_entry_out`]) and
/// writable.
unsafe fn give_entry(
    found: Option<RawEntry>,
    key: *mut *const u8,
    key_len: *mut usize,
    val: *mut *const u8,
    val_len: *mut usize,
) -> Result<c_int, Failure> {
    let Some((k, kl, v, vl)) = found else {
        return Ok(IRONBARK_NOTFOUND);
    };
    // SAFETY: the caller guarantees the four out-pointers are writable.
    unsafe {
        store(key, k, "key")?;
        store(key_len, kl, "key_len")?;
        store(val, v, "val")?;
        store(val_len, vl, "val_len")?;
    }
    Ok(IRONBARK_OK)
}

/// Runs `body` on the write transaction of `txn` (`EREADONLY` naming
/// `what` for a read transaction, `ETXNENDED` once it has ended).
fn with_writer<T>(
    txn: &Txn,
    what: &str,
    body: impl FnOnce(&mut WriteTxn<'static>) -> Result<T, Failure>,
) -> Result<T, Failure> {
    let cell = writer(txn, what)?;
    let mut w = cell.txn.try_borrow_mut().map_err(|_| ended())?;
    body(w.as_mut().ok_or_else(ended)?)
}

extern "C" {
    fn malloc(size: usize) -> *mut std::ffi::c_void;
    fn free(ptr: *mut std::ffi::c_void);
}

/// A copy of `bytes` in memory from `malloc` (never null: at least one
/// byte is allocated), for the caller to release with `ironbark_free`.
fn malloc_copy(bytes: &[u8]) -> Result<*mut u8, Failure> {
    // SAFETY: `malloc` has no preconditions; its result is checked below.
    let ptr = unsafe { malloc(bytes.len().max(1)) }.cast::<u8>();
    if ptr.is_null() {
        return Err(Failure {
            code: IRONBARK_EIO,
            message: format!("out of memory copying {} bytes", bytes.len()),
        });
    }
    // SAFETY: `ptr` is a fresh allocation of at least `bytes.len()` bytes,
    // which cannot overlap `bytes`.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr, bytes.len()) };
    Ok(ptr)
}

/// Frees a buffer the library allocated.
#[no_mangle]
pub unsafe extern "C" fn ironbark_free(ptr: *mut std::ffi::c_void) {
    guard_void(|| {
        // SAFETY: `ptr` is null (which `free` ignores) or a buffer from
        // `malloc_copy`, freed once (header contract).
        unsafe { free(ptr) }
    })
}

/// Stores a value under a key that must be greater than every key.
#[no_mangle]
pub unsafe extern "C" fn ironbark_append(
    txn: *mut Txn,
    tree: *const TreeHandle,
    key: *const u8,
    key_len: usize,
    val: *const u8,
    val_len: usize,
) -> c_int {
    guard(|| {
        // SAFETY: `txn` is null or a live handle from `ironbark_txn_begin`.
        let txn = unsafe { reference(txn, "txn") }?;
        // SAFETY: `tree` is null or a live handle from `ironbark_tree_open`.
        let tree = unsafe { reference(tree, "tree") }?.plain()?;
        // SAFETY: `key` is null or `key_len` readable bytes (header).
        let key = unsafe { bytes(key, key_len, "key") }?;
        // SAFETY: `val` is null or `val_len` readable bytes (header).
        let val = unsafe { bytes(val, val_len, "val") }?;
        with_writer(txn, "append", |w| Ok(w.append(tree, key, val)?))?;
        Ok(IRONBARK_OK)
    })
}

/// The entry with the smallest (`last` false) or largest key.
///
/// # Safety
/// As the header says for `ironbark_first`.
unsafe fn edge_entry(
    txn: *mut Txn,
    tree: *const TreeHandle,
    last: bool,
    key: *mut *const u8,
    key_len: *mut usize,
    val: *mut *const u8,
    val_len: *mut usize,
) -> c_int {
    guard(|| {
        // SAFETY: `txn` is null or a live handle from `ironbark_txn_begin`.
        let txn = unsafe { reference(txn, "txn") }?;
        // SAFETY: `tree` is null or a live handle from `ironbark_tree_open`.
        let tree = unsafe { reference(tree, "tree") }?.plain()?;
        check_entry_out(key, key_len, val, val_len)?;
        let found = if last {
            look_up!(txn, t => t.last(tree))
        } else {
            look_up!(txn, t => t.first(tree))
        };
        // SAFETY: the out-pointers were checked non-null; writable (header).
        unsafe { give_entry(found, key, key_len, val, val_len) }
    })
}

/// The entry with the smallest key.
#[no_mangle]
pub unsafe extern "C" fn ironbark_first(
    txn: *mut Txn,
    tree: *const TreeHandle,
    key: *mut *const u8,
    key_len: *mut usize,
    val: *mut *const u8,
    val_len: *mut usize,
) -> c_int {
    // SAFETY: the arguments are passed on under the same contract.
    unsafe { edge_entry(txn, tree, false, key, key_len, val, val_len) }
}

/// The entry with the largest key.
#[no_mangle]
pub unsafe extern "C" fn ironbark_last(
    txn: *mut Txn,
    tree: *const TreeHandle,
    key: *mut *const u8,
    key_len: *mut usize,
    val: *mut *const u8,
    val_len: *mut usize,
) -> c_int {
    // SAFETY: the arguments are passed on under the same contract.
    unsafe { edge_entry(txn, tree, true, key, key_len, val, val_len) }
}

/// Which neighbour of a key a nearest-key lookup finds.
#[derive(Clone, Copy)]
enum Nearest {
    AtOrAfter,
    After,
    AtOrBefore,
    Before,
}

/// The nearest-key lookups: the entry nearest `target` on the side
/// `which` says.
///
/// # Safety
/// As the header says for `ironbark_get_ge`.
#[allow(clippy::too_many_arguments)]
unsafe fn nearest_entry(
    txn: *mut Txn,
    tree: *const TreeHandle,
    target: *const u8,
    target_len: usize,
    which: Nearest,
    key: *mut *const u8,
    key_len: *mut usize,
    val: *mut *const u8,
    val_len: *mut usize,
) -> c_int {
    guard(|| {
        // SAFETY: `txn` is null or a live handle from `ironbark_txn_begin`.
        let txn = unsafe { reference(txn, "txn") }?;
        // SAFETY: `tree` is null or a live handle from `ironbark_tree_open`.
        let tree = unsafe { reference(tree, "tree") }?.plain()?;
        // SAFETY: `target` is null or `target_len` readable bytes (header).
        let target = unsafe { bytes(target, target_len, "target") }?;
        check_entry_out(key, key_len, val, val_len)?;
        let found = match which {
            Nearest::AtOrAfter => look_up!(txn, t => t.get_ge(tree, target)),
            Nearest::After => look_up!(txn, t => t.get_gt(tree, target)),
            Nearest::AtOrBefore => look_up!(txn, t => t.get_le(tree, target)),
            Nearest::Before => look_up!(txn, t => t.get_lt(tree, target)),
        };
        // SAFETY: the out-pointers were checked non-null; writable (header).
        unsafe { give_entry(found, key, key_len, val, val_len) }
    })
}

/// The entry with the smallest key `>= target`.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn ironbark_get_ge(
    txn: *mut Txn,
    tree: *const TreeHandle,
    target: *const u8,
    target_len: usize,
    key: *mut *const u8,
    key_len: *mut usize,
    val: *mut *const u8,
    val_len: *mut usize,
) -> c_int {
    // SAFETY: the arguments are passed on under the same contract.
    unsafe {
        nearest_entry(
            txn,
            tree,
            target,
            target_len,
            Nearest::AtOrAfter,
            key,
            key_len,
            val,
            val_len,
        )
    }
}

/// The entry with the smallest key `> target`.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn ironbark_get_gt(
    txn: *mut Txn,
    tree: *const TreeHandle,
    target: *const u8,
    target_len: usize,
    key: *mut *const u8,
    key_len: *mut usize,
    val: *mut *const u8,
    val_len: *mut usize,
) -> c_int {
    // SAFETY: the arguments are passed on under the same contract.
    unsafe {
        nearest_entry(
            txn,
            tree,
            target,
            target_len,
            Nearest::After,
            key,
            key_len,
            val,
            val_len,
        )
    }
}

/// The entry with the largest key `<= target`.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn ironbark_get_le(
    txn: *mut Txn,
    tree: *const TreeHandle,
    target: *const u8,
    target_len: usize,
    key: *mut *const u8,
    key_len: *mut usize,
    val: *mut *const u8,
    val_len: *mut usize,
) -> c_int {
    // SAFETY: the arguments are passed on under the same contract.
    unsafe {
        nearest_entry(
            txn,
            tree,
            target,
            target_len,
            Nearest::AtOrBefore,
            key,
            key_len,
            val,
            val_len,
        )
    }
}

/// The entry with the largest key `< target`.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn ironbark_get_lt(
    txn: *mut Txn,
    tree: *const TreeHandle,
    target: *const u8,
    target_len: usize,
    key: *mut *const u8,
    key_len: *mut usize,
    val: *mut *const u8,
    val_len: *mut usize,
) -> c_int {
    // SAFETY: the arguments are passed on under the same contract.
    unsafe {
        nearest_entry(
            txn,
            tree,
            target,
            target_len,
            Nearest::Before,
            key,
            key_len,
            val,
            val_len,
        )
    }
}

/// Whether a key is present.
#[no_mangle]
pub unsafe extern "C" fn ironbark_contains_key(
    txn: *mut Txn,
    tree: *const TreeHandle,
    key: *const u8,
    key_len: usize,
) -> c_int {
    guard(|| {
        // SAFETY: `txn` is null or a live handle from `ironbark_txn_begin`.
        let txn = unsafe { reference(txn, "txn") }?;
        // SAFETY: `tree` is null or a live handle from `ironbark_tree_open`.
        let tree = unsafe { reference(tree, "tree") }?.plain()?;
        // SAFETY: `key` is null or `key_len` readable bytes (header).
        let key = unsafe { bytes(key, key_len, "key") }?;
        let present = in_txn!(txn, t => t.contains_key(tree, key)?);
        Ok(if present {
            IRONBARK_OK
        } else {
            IRONBARK_NOTFOUND
        })
    })
}

/// Stores a value and hands back a copy of the value it replaced.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn ironbark_insert(
    txn: *mut Txn,
    tree: *const TreeHandle,
    key: *const u8,
    key_len: usize,
    val: *const u8,
    val_len: usize,
    old: *mut *mut u8,
    old_len: *mut usize,
) -> c_int {
    guard(|| {
        // SAFETY: `old` is null or a writable pointer slot (header).
        unsafe { clear(old) };
        // SAFETY: `txn` is null or a live handle from `ironbark_txn_begin`.
        let txn = unsafe { reference(txn, "txn") }?;
        // SAFETY: `tree` is null or a live handle from `ironbark_tree_open`.
        let tree = unsafe { reference(tree, "tree") }?.plain()?;
        // SAFETY: `key` is null or `key_len` readable bytes (header).
        let key = unsafe { bytes(key, key_len, "key") }?;
        // SAFETY: `val` is null or `val_len` readable bytes (header).
        let val = unsafe { bytes(val, val_len, "val") }?;
        if old.is_null() || old_len.is_null() {
            return Err(Failure::invalid("old or old_len is null"));
        }
        let replaced = with_writer(txn, "insert", |w| Ok(w.insert(tree, key, val)?))?;
        let (copy, len) = match replaced {
            Some(v) => (malloc_copy(&v)?, v.len()),
            None => (std::ptr::null_mut(), 0),
        };
        // SAFETY: both out-pointers were checked non-null; writable (header).
        unsafe {
            store(old, copy, "old")?;
            store(old_len, len, "old_len")?;
        }
        Ok(if copy.is_null() {
            IRONBARK_NOTFOUND
        } else {
            IRONBARK_OK
        })
    })
}

/// Removes the entry with the smallest (`last` false) or largest key and
/// hands back copies of it.
///
/// # Safety
/// As the header says for `ironbark_pop_first`.
unsafe fn pop_entry(
    txn: *mut Txn,
    tree: *const TreeHandle,
    last: bool,
    key: *mut *mut u8,
    key_len: *mut usize,
    val: *mut *mut u8,
    val_len: *mut usize,
) -> c_int {
    guard(|| {
        // SAFETY: `key` and `val` are null or writable pointer slots.
        unsafe {
            clear(key);
            clear(val);
        }
        // SAFETY: `txn` is null or a live handle from `ironbark_txn_begin`.
        let txn = unsafe { reference(txn, "txn") }?;
        // SAFETY: `tree` is null or a live handle from `ironbark_tree_open`.
        let tree = unsafe { reference(tree, "tree") }?.plain()?;
        if key.is_null() || key_len.is_null() || val.is_null() || val_len.is_null() {
            return Err(Failure::invalid("key, key_len, val or val_len is null"));
        }
        let what = if last { "pop_last" } else { "pop_first" };
        let popped = with_writer(txn, what, |w| {
            Ok(if last {
                w.pop_last(tree)?
            } else {
                w.pop_first(tree)?
            })
        })?;
        let Some((k, v)) = popped else {
            return Ok(IRONBARK_NOTFOUND);
        };
        let key_copy = malloc_copy(&k)?;
        let val_copy = match malloc_copy(&v) {
            Ok(p) => p,
            Err(e) => {
                // SAFETY: `key_copy` came from `malloc_copy` and is not
                // handed out.
                unsafe { free(key_copy.cast()) };
                return Err(e);
            }
        };
        // SAFETY: the four out-pointers were checked non-null; writable.
        unsafe {
            store(key, key_copy, "key")?;
            store(key_len, k.len(), "key_len")?;
            store(val, val_copy, "val")?;
            store(val_len, v.len(), "val_len")?;
        }
        Ok(IRONBARK_OK)
    })
}

/// Removes and hands back the entry with the smallest key.
#[no_mangle]
pub unsafe extern "C" fn ironbark_pop_first(
    txn: *mut Txn,
    tree: *const TreeHandle,
    key: *mut *mut u8,
    key_len: *mut usize,
    val: *mut *mut u8,
    val_len: *mut usize,
) -> c_int {
    // SAFETY: the arguments are passed on under the same contract.
    unsafe { pop_entry(txn, tree, false, key, key_len, val, val_len) }
}

/// Removes and hands back the entry with the largest key.
#[no_mangle]
pub unsafe extern "C" fn ironbark_pop_last(
    txn: *mut Txn,
    tree: *const TreeHandle,
    key: *mut *mut u8,
    key_len: *mut usize,
    val: *mut *mut u8,
    val_len: *mut usize,
) -> c_int {
    // SAFETY: the arguments are passed on under the same contract.
    unsafe { pop_entry(txn, tree, true, key, key_len, val, val_len) }
}

/// Removes every entry of a tree.
#[no_mangle]
pub unsafe extern "C" fn ironbark_clear(
    txn: *mut Txn,
    tree: *const TreeHandle,
    count: *mut u64,
) -> c_int {
    guard(|| {
        // SAFETY: `txn` is null or a live handle from `ironbark_txn_begin`.
        let txn = unsafe { reference(txn, "txn") }?;
        // SAFETY: `tree` is null or a live handle from `ironbark_tree_open`.
        let tree = unsafe { reference(tree, "tree") }?.plain()?;
        if count.is_null() {
            return Err(Failure::invalid("count is null"));
        }
        let removed = with_writer(txn, "clear", |w| Ok(w.clear(tree)?))?;
        // SAFETY: `count` is non-null and writable (header).
        unsafe { store(count, removed, "count") }?;
        Ok(IRONBARK_OK)
    })
}

/// `ptr[..len]` as a range bound: null with length 0 is no bound (not the
/// empty key); null with another length is `EINVAL`, as for [`bytes`].
///
/// # Safety
/// As for [`bytes`].
unsafe fn optional_bytes<'a>(
    ptr: *const u8,
    len: usize,
    what: &str,
) -> Result<Option<&'a [u8]>, Failure> {
    if ptr.is_null() && len == 0 {
        return Ok(None);
    }
    // SAFETY: non-null, `len` readable bytes (the caller's contract).
    Ok(Some(unsafe { bytes(ptr, len, what) }?))
}

/// Removes the entries with keys in a range.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn ironbark_delete_range(
    txn: *mut Txn,
    tree: *const TreeHandle,
    start: *const u8,
    start_len: usize,
    end: *const u8,
    end_len: usize,
    flags: c_uint,
    count: *mut u64,
) -> c_int {
    guard(|| {
        // SAFETY: `txn` is null or a live handle from `ironbark_txn_begin`.
        let txn = unsafe { reference(txn, "txn") }?;
        // SAFETY: `tree` is null or a live handle from `ironbark_tree_open`.
        let tree = unsafe { reference(tree, "tree") }?.plain()?;
        // SAFETY: `start` is null or `start_len` readable bytes (header).
        let start = unsafe { optional_bytes(start, start_len, "start") }?;
        // SAFETY: `end` is null or `end_len` readable bytes (header).
        let end = unsafe { optional_bytes(end, end_len, "end") }?;
        if count.is_null() {
            return Err(Failure::invalid("count is null"));
        }
        if flags & !IRONBARK_CURSOR_END_INCLUSIVE != 0 {
            return Err(Failure::invalid(format!(
                "unknown delete_range flags {flags:#x} (only IRONBARK_CURSOR_END_INCLUSIVE)"
            )));
        }
        let lower = start.map_or(Bound::Unbounded, Bound::Included);
        let upper = match end {
            None => Bound::Unbounded,
            Some(e) if flags & IRONBARK_CURSOR_END_INCLUSIVE != 0 => Bound::Included(e),
            Some(e) => Bound::Excluded(e),
        };
        let removed = with_writer(txn, "delete_range", |w| {
            Ok(w.delete_range(tree, (lower, upper))?)
        })?;
        // SAFETY: `count` is non-null and writable (header).
        unsafe { store(count, removed, "count") }?;
        Ok(IRONBARK_OK)
    })
}

/// Stores a zeroed value of a given length and hands out its bytes.
#[no_mangle]
pub unsafe extern "C" fn ironbark_put_reserve(
    txn: *mut Txn,
    tree: *const TreeHandle,
    key: *const u8,
    key_len: usize,
    val_len: usize,
    space: *mut *mut u8,
) -> c_int {
    guard(|| {
        // SAFETY: `space` is null or a writable pointer slot (header).
        unsafe { clear(space) };
        // SAFETY: `txn` is null or a live handle from `ironbark_txn_begin`.
        let txn = unsafe { reference(txn, "txn") }?;
        // SAFETY: `tree` is null or a live handle from `ironbark_tree_open`.
        let tree = unsafe { reference(tree, "tree") }?.plain()?;
        // SAFETY: `key` is null or `key_len` readable bytes (header).
        let key = unsafe { bytes(key, key_len, "key") }?;
        if space.is_null() {
            return Err(Failure::invalid("space is null"));
        }
        // The space is in the transaction's own page, which stays where it
        // is until the transaction's next change or its end; the engine
        // reads it back at its next call (the header's "until the next
        // call on the transaction").
        let ptr = with_writer(txn, "put_reserve", |w| {
            Ok(w.put_reserve(tree, key, val_len)?.as_mut_ptr())
        })?;
        // SAFETY: `space` was checked non-null and is writable (header).
        unsafe { store(space, ptr, "space") }?;
        Ok(IRONBARK_OK)
    })
}

/// The smallest key greater than every key that starts with `prefix`, or
/// `None` if there is none (`prefix` is empty or all 0xff bytes).
fn prefix_end(prefix: &[u8]) -> Option<Box<[u8]>> {
    let last = prefix.iter().rposition(|&b| b != 0xff)?;
    let mut end = prefix[..=last].to_vec();
    end[last] += 1;
    Some(end.into())
}

/// Opens a cursor over the keys that start with a prefix.
#[no_mangle]
pub unsafe extern "C" fn ironbark_cursor_open_prefix(
    txn: *mut Txn,
    tree: *const TreeHandle,
    prefix: *const u8,
    prefix_len: usize,
    flags: c_uint,
    cursor: *mut *mut Cursor,
) -> c_int {
    guard(|| {
        // SAFETY: `cursor` is null or a writable pointer slot (header).
        unsafe { clear(cursor) };
        // SAFETY: `prefix` is null or `prefix_len` readable bytes (header).
        let prefix = unsafe { bytes(prefix, prefix_len, "prefix") }?;
        if flags & !IRONBARK_CURSOR_REVERSE != 0 {
            return Err(Failure::invalid(format!(
                "unknown prefix cursor flags {flags:#x} (only IRONBARK_CURSOR_REVERSE)"
            )));
        }
        // A prefix is the range from itself to the first key past every
        // key that starts with it: the cursor is an ordinary one (seek
        // included), with those bounds.
        let end = prefix_end(prefix);
        let (end_ptr, end_len) = match &end {
            Some(e) => (e.as_ptr(), e.len()),
            None => (std::ptr::null(), 0),
        };
        // SAFETY: `txn`, `tree` and `cursor` are passed on under the
        // header's contract; `prefix` and `end` are live for the call.
        Ok(unsafe {
            ironbark_cursor_open(
                txn,
                tree,
                prefix.as_ptr(),
                prefix.len(),
                end_ptr,
                end_len,
                flags,
                cursor,
            )
        })
    })
}

/// A savepoint (`ironbark_savepoint`): the engine's token, which names its
/// transaction and holds nothing of it.
pub struct SavepointHandle {
    sp: Savepoint,
}

/// Takes a savepoint of a write transaction.
#[no_mangle]
pub unsafe extern "C" fn ironbark_savepoint_take(
    txn: *mut Txn,
    sp: *mut *mut SavepointHandle,
) -> c_int {
    guard(|| {
        // SAFETY: `sp` is null or a writable pointer slot (header).
        unsafe { clear(sp) };
        // SAFETY: `txn` is null or a live handle from `ironbark_txn_begin`.
        let txn = unsafe { reference(txn, "txn") }?;
        if sp.is_null() {
            return Err(Failure::invalid("sp (the out-pointer) is null"));
        }
        let taken = with_writer(txn, "savepoint", |w| Ok(w.savepoint()?))?;
        let handle = Box::into_raw(Box::new(SavepointHandle { sp: taken }));
        // SAFETY: `sp` was checked non-null above and is writable.
        unsafe { store(sp, handle, "sp") }?;
        Ok(IRONBARK_OK)
    })
}

/// Rolls a write transaction back to a savepoint, which stays.
#[no_mangle]
pub unsafe extern "C" fn ironbark_savepoint_rollback(
    txn: *mut Txn,
    sp: *const SavepointHandle,
) -> c_int {
    guard(|| {
        // SAFETY: `txn` is null or a live handle from `ironbark_txn_begin`.
        let txn = unsafe { reference(txn, "txn") }?;
        // SAFETY: `sp` is null or a live handle from
        // `ironbark_savepoint_take`.
        let sp = &unsafe { reference(sp, "sp") }?.sp;
        with_writer(txn, "rollback", |w| Ok(w.rollback_to(sp)?))?;
        Ok(IRONBARK_OK)
    })
}

/// Releases a savepoint (and those taken after it) and frees its handle.
#[no_mangle]
pub unsafe extern "C" fn ironbark_savepoint_release(
    txn: *mut Txn,
    sp: *mut SavepointHandle,
) -> c_int {
    guard(|| {
        if sp.is_null() {
            return Err(Failure::invalid("sp is null"));
        }
        // SAFETY: a non-null `sp` came from `ironbark_savepoint_take`'s
        // `Box::into_raw` and is released or closed once (header); it is
        // freed whatever the result.
        let sp = unsafe { Box::from_raw(sp) };
        // SAFETY: `txn` is null or a live handle from `ironbark_txn_begin`.
        let txn = unsafe { reference(txn, "txn") }?;
        with_writer(txn, "release", |w| Ok(w.release(sp.sp)?))?;
        Ok(IRONBARK_OK)
    })
}

/// Frees a savepoint handle without releasing the savepoint.
#[no_mangle]
pub unsafe extern "C" fn ironbark_savepoint_close(sp: *mut SavepointHandle) {
    guard_void(|| {
        if !sp.is_null() {
            // SAFETY: a non-null `sp` came from `ironbark_savepoint_take`'s
            // `Box::into_raw` and is released or closed once (header).
            drop(unsafe { Box::from_raw(sp) });
        }
    })
}

/// Adds a (key, value) pair to a multimap.
#[no_mangle]
pub unsafe extern "C" fn ironbark_put_dup(
    txn: *mut Txn,
    tree: *const TreeHandle,
    key: *const u8,
    key_len: usize,
    val: *const u8,
    val_len: usize,
) -> c_int {
    guard(|| {
        // SAFETY: `txn` is null or a live handle from `ironbark_txn_begin`.
        let txn = unsafe { reference(txn, "txn") }?;
        // SAFETY: `tree` is null or a live handle from `ironbark_tree_open`.
        let m = unsafe { reference(tree, "tree") }?.multimap()?;
        // SAFETY: `key` is null or `key_len` readable bytes (header).
        let key = unsafe { bytes(key, key_len, "key") }?;
        // SAFETY: `val` is null or `val_len` readable bytes (header).
        let val = unsafe { bytes(val, val_len, "val") }?;
        let added = with_writer(txn, "put_dup", |w| Ok(w.put_dup(m, key, val)?))?;
        Ok(if added {
            IRONBARK_OK
        } else {
            IRONBARK_KEYEXIST
        })
    })
}

/// Removes a (key, value) pair from a multimap.
#[no_mangle]
pub unsafe extern "C" fn ironbark_delete_dup(
    txn: *mut Txn,
    tree: *const TreeHandle,
    key: *const u8,
    key_len: usize,
    val: *const u8,
    val_len: usize,
) -> c_int {
    guard(|| {
        // SAFETY: `txn` is null or a live handle from `ironbark_txn_begin`.
        let txn = unsafe { reference(txn, "txn") }?;
        // SAFETY: `tree` is null or a live handle from `ironbark_tree_open`.
        let m = unsafe { reference(tree, "tree") }?.multimap()?;
        // SAFETY: `key` is null or `key_len` readable bytes (header).
        let key = unsafe { bytes(key, key_len, "key") }?;
        // SAFETY: `val` is null or `val_len` readable bytes (header).
        let val = unsafe { bytes(val, val_len, "val") }?;
        let existed = with_writer(txn, "delete_dup", |w| Ok(w.delete_dup(m, key, val)?))?;
        Ok(if existed {
            IRONBARK_OK
        } else {
            IRONBARK_NOTFOUND
        })
    })
}

/// Removes every value of a key of a multimap.
#[no_mangle]
pub unsafe extern "C" fn ironbark_delete_dups(
    txn: *mut Txn,
    tree: *const TreeHandle,
    key: *const u8,
    key_len: usize,
    count: *mut u64,
) -> c_int {
    guard(|| {
        // SAFETY: `txn` is null or a live handle from `ironbark_txn_begin`.
        let txn = unsafe { reference(txn, "txn") }?;
        // SAFETY: `tree` is null or a live handle from `ironbark_tree_open`.
        let m = unsafe { reference(tree, "tree") }?.multimap()?;
        // SAFETY: `key` is null or `key_len` readable bytes (header).
        let key = unsafe { bytes(key, key_len, "key") }?;
        if count.is_null() {
            return Err(Failure::invalid("count is null"));
        }
        let removed = with_writer(txn, "delete_dups", |w| Ok(w.delete_all(m, key)?))?;
        // SAFETY: `count` is non-null and writable (header).
        unsafe { store(count, removed, "count") }?;
        Ok(IRONBARK_OK)
    })
}

/// The number of values of a key of a multimap.
#[no_mangle]
pub unsafe extern "C" fn ironbark_count_dups(
    txn: *mut Txn,
    tree: *const TreeHandle,
    key: *const u8,
    key_len: usize,
    count: *mut u64,
) -> c_int {
    guard(|| {
        // SAFETY: `txn` is null or a live handle from `ironbark_txn_begin`.
        let txn = unsafe { reference(txn, "txn") }?;
        // SAFETY: `tree` is null or a live handle from `ironbark_tree_open`.
        let m = unsafe { reference(tree, "tree") }?.multimap()?;
        // SAFETY: `key` is null or `key_len` readable bytes (header).
        let key = unsafe { bytes(key, key_len, "key") }?;
        if count.is_null() {
            return Err(Failure::invalid("count is null"));
        }
        let n = in_txn!(txn, t => t.count_dups(m, key)?);
        // SAFETY: `count` is non-null and writable (header).
        unsafe { store(count, n, "count") }?;
        Ok(IRONBARK_OK)
    })
}

/// Whether a multimap holds a (key, value) pair.
#[no_mangle]
pub unsafe extern "C" fn ironbark_contains_dup(
    txn: *mut Txn,
    tree: *const TreeHandle,
    key: *const u8,
    key_len: usize,
    val: *const u8,
    val_len: usize,
) -> c_int {
    guard(|| {
        // SAFETY: `txn` is null or a live handle from `ironbark_txn_begin`.
        let txn = unsafe { reference(txn, "txn") }?;
        // SAFETY: `tree` is null or a live handle from `ironbark_tree_open`.
        let m = unsafe { reference(tree, "tree") }?.multimap()?;
        // SAFETY: `key` is null or `key_len` readable bytes (header).
        let key = unsafe { bytes(key, key_len, "key") }?;
        // SAFETY: `val` is null or `val_len` readable bytes (header).
        let val = unsafe { bytes(val, val_len, "val") }?;
        let present = in_txn!(txn, t => t.contains_dup(m, key, val)?);
        Ok(if present {
            IRONBARK_OK
        } else {
            IRONBARK_NOTFOUND
        })
    })
}

/// Opens a cursor over the values of one key of a multimap.
#[no_mangle]
pub unsafe extern "C" fn ironbark_cursor_open_dups(
    txn: *mut Txn,
    tree: *const TreeHandle,
    key: *const u8,
    key_len: usize,
    flags: c_uint,
    cursor: *mut *mut Cursor,
) -> c_int {
    guard(|| {
        // SAFETY: `cursor` is null or a writable pointer slot (header).
        unsafe { clear(cursor) };
        // SAFETY: `tree` is null or a live handle from `ironbark_tree_open`.
        unsafe { reference(tree, "tree") }?.multimap()?;
        // SAFETY: `key` is null or `key_len` readable bytes (header).
        let key = unsafe { bytes(key, key_len, "key") }?;
        if flags & !IRONBARK_CURSOR_REVERSE != 0 {
            return Err(Failure::invalid(format!(
                "unknown dups cursor flags {flags:#x} (only IRONBARK_CURSOR_REVERSE)"
            )));
        }
        // The values of a key are the pairs with keys from it to it: an
        // ordinary multimap cursor with those bounds.
        // SAFETY: `txn`, `tree` and `cursor` are passed on under the
        // header's contract; `key` is live for the call.
        Ok(unsafe {
            ironbark_cursor_open(
                txn,
                tree,
                key.as_ptr(),
                key.len(),
                key.as_ptr(),
                key.len(),
                flags | IRONBARK_CURSOR_END_INCLUSIVE,
                cursor,
            )
        })
    })
}

/// Stores a value under an integer key.
#[no_mangle]
pub unsafe extern "C" fn ironbark_put_int(
    txn: *mut Txn,
    tree: *const TreeHandle,
    key: u64,
    val: *const u8,
    val_len: usize,
) -> c_int {
    guard(|| {
        // SAFETY: `txn` is null or a live handle from `ironbark_txn_begin`.
        let txn = unsafe { reference(txn, "txn") }?;
        // SAFETY: `tree` is null or a live handle from `ironbark_tree_open`.
        let t = unsafe { reference(tree, "tree") }?.int_tree()?;
        // SAFETY: `val` is null or `val_len` readable bytes (header).
        let val = unsafe { bytes(val, val_len, "val") }?;
        with_writer(txn, "put_int", |w| Ok(w.put_int(t, key, val)?))?;
        Ok(IRONBARK_OK)
    })
}

/// Looks an integer key up, zero-copy.
#[no_mangle]
pub unsafe extern "C" fn ironbark_get_int(
    txn: *mut Txn,
    tree: *const TreeHandle,
    key: u64,
    val: *mut *const u8,
    val_len: *mut usize,
) -> c_int {
    guard(|| {
        // SAFETY: `txn` is null or a live handle from `ironbark_txn_begin`.
        let txn = unsafe { reference(txn, "txn") }?;
        // SAFETY: `tree` is null or a live handle from `ironbark_tree_open`.
        let t = unsafe { reference(tree, "tree") }?.int_tree()?;
        if val.is_null() || val_len.is_null() {
            return Err(Failure::invalid("val or val_len is null"));
        }
        // In place, as `ironbark_get`'s value.
        let found = in_txn!(txn, x => x.get_int(t, key)?.map(|v| (v.as_ptr(), v.len())));
        let Some((ptr, len)) = found else {
            return Ok(IRONBARK_NOTFOUND);
        };
        // SAFETY: both out-pointers are non-null and writable (header).
        unsafe {
            store(val, ptr, "val")?;
            store(val_len, len, "val_len")?;
        }
        Ok(IRONBARK_OK)
    })
}

/// Removes an integer key.
#[no_mangle]
pub unsafe extern "C" fn ironbark_delete_int(
    txn: *mut Txn,
    tree: *const TreeHandle,
    key: u64,
) -> c_int {
    guard(|| {
        // SAFETY: `txn` is null or a live handle from `ironbark_txn_begin`.
        let txn = unsafe { reference(txn, "txn") }?;
        // SAFETY: `tree` is null or a live handle from `ironbark_tree_open`.
        let t = unsafe { reference(tree, "tree") }?.int_tree()?;
        let existed = with_writer(txn, "delete_int", |w| Ok(w.delete_int(t, key)?))?;
        Ok(if existed {
            IRONBARK_OK
        } else {
            IRONBARK_NOTFOUND
        })
    })
}

/// A cursor over an integer-key tree (`ironbark_cursor_open_int`).
struct IntCursor {
    // Declared first, so dropped before the tree handle and the snapshot
    // it borrows.
    source: IntSource,
    /// Boxed: a read cursor's iterator borrows it.
    tree: Box<IntTree>,
    lower: Bound<u64>,
    upper: Bound<u64>,
    reverse: bool,
}

enum IntSource {
    /// The engine's iterator over the cursor's own snapshot, built at the
    /// first step; it borrows `txn` and the boxed tree handle.
    Read {
        range: Option<Box<IntRange<'static>>>,
        txn: Arc<ReadTxn>,
    },
    /// Positioned by the last key it returned.
    Write {
        cell: Rc<WriteCell>,
        last: Option<u64>,
    },
}

impl IntCursor {
    /// The next entry, with the value valid as the header says.
    fn step(&mut self) -> Result<Option<(u64, &[u8])>, Failure> {
        match &mut self.source {
            IntSource::Read { range, txn } => {
                if range.is_none() {
                    // SAFETY: the iterator borrows the snapshot in the
                    // `Arc<ReadTxn>` held beside it and the boxed tree
                    // handle, both dropped after it (field order) and never
                    // moved.
                    let (txn, tree): (&'static ReadTxn, &'static IntTree) =
                        unsafe { (&*Arc::as_ptr(txn), &*(&*self.tree as *const IntTree)) };
                    *range = Some(Box::new(txn.int_range(tree, (self.lower, self.upper))?));
                }
                let r = range.as_mut().expect("built above");
                let next = if self.reverse {
                    r.next_back()
                } else {
                    r.next()
                };
                Ok(next.transpose()?)
            }
            IntSource::Write { cell, last } => {
                let w = cell.txn.try_borrow().map_err(|_| ended())?;
                let w = w.as_ref().ok_or_else(ended)?;
                let (mut lower, mut upper) = (self.lower, self.upper);
                if let Some(k) = *last {
                    if self.reverse {
                        upper = Bound::Excluded(k);
                    } else {
                        lower = Bound::Excluded(k);
                    }
                }
                let mut range = w.int_range(&self.tree, (lower, upper))?;
                let next = if self.reverse {
                    range.next_back()
                } else {
                    range.next()
                };
                let Some((k, v)) = next.transpose()? else {
                    return Ok(None);
                };
                *last = Some(k);
                let v = v as *const [u8];
                // SAFETY: the value lives in the write transaction's pages,
                // unchanged until its next put/delete/end (the header's
                // lifetime); the `RefCell` guard only spans this call.
                Ok(Some((k, unsafe { &*v })))
            }
        }
    }
}

/// Opens a cursor over the integer keys of a tree within bounds.
#[no_mangle]
pub unsafe extern "C" fn ironbark_cursor_open_int(
    txn: *mut Txn,
    tree: *const TreeHandle,
    start: *const u64,
    end: *const u64,
    flags: c_uint,
    cursor: *mut *mut Cursor,
) -> c_int {
    guard(|| {
        // SAFETY: `cursor` is null or a writable pointer slot (header).
        unsafe { clear(cursor) };
        // SAFETY: `txn` is null or a live handle from `ironbark_txn_begin`.
        let txn = unsafe { reference(txn, "txn") }?;
        // SAFETY: `tree` is null or a live handle from `ironbark_tree_open`.
        let handle = unsafe { reference(tree, "tree") }?;
        let t = handle.int_tree()?;
        // A null bound is no bound.
        // SAFETY: `start` and `end` are null or point to a `uint64_t`
        // (header).
        let (start, end) = unsafe { (start.as_ref().copied(), end.as_ref().copied()) };
        if cursor.is_null() {
            return Err(Failure::invalid("cursor (the out-pointer) is null"));
        }
        let known = IRONBARK_CURSOR_REVERSE | IRONBARK_CURSOR_END_INCLUSIVE;
        if flags & !known != 0 {
            return Err(Failure::invalid(format!("unknown cursor flags {flags:#x}")));
        }
        let upper = match end {
            None => Bound::Unbounded,
            Some(e) if flags & IRONBARK_CURSOR_END_INCLUSIVE != 0 => Bound::Included(e),
            Some(e) => Bound::Excluded(e),
        };
        let handle = Cursor {
            kind: CursorKind::Int(IntCursor {
                source: match origin(txn, handle)? {
                    Origin::Read(txn) => IntSource::Read { range: None, txn },
                    Origin::Write(cell) => IntSource::Write { cell, last: None },
                },
                tree: Box::new(t.clone()),
                lower: start.map_or(Bound::Unbounded, Bound::Included),
                upper,
                reverse: flags & IRONBARK_CURSOR_REVERSE != 0,
            }),
        };
        // SAFETY: `cursor` was checked non-null above and is writable.
        unsafe { store(cursor, Box::into_raw(Box::new(handle)), "cursor") }?;
        Ok(IRONBARK_OK)
    })
}

/// The next entry of an integer-key cursor.
#[no_mangle]
pub unsafe extern "C" fn ironbark_cursor_next_int(
    cursor: *mut Cursor,
    key: *mut u64,
    val: *mut *const u8,
    val_len: *mut usize,
) -> c_int {
    guard(|| {
        // SAFETY: `cursor` is null or a live handle from a cursor open
        // call, used by this thread only (header).
        let cursor = unsafe { exclusive(cursor, "cursor") }?;
        if key.is_null() || val.is_null() || val_len.is_null() {
            return Err(Failure::invalid("key, val or val_len is null"));
        }
        let CursorKind::Int(c) = &mut cursor.kind else {
            return Err(Failure {
                code: IRONBARK_EWRONGKIND,
                message: "ironbark_cursor_next_int on a cursor of byte keys \
                          (use ironbark_cursor_next)"
                    .into(),
            });
        };
        let Some((k, v)) = c.step()? else {
            return Ok(IRONBARK_NOTFOUND);
        };
        // SAFETY: the three out-pointers are non-null and writable (header).
        unsafe {
            store(key, k, "key")?;
            store(val, v.as_ptr(), "val")?;
            store(val_len, v.len(), "val_len")?;
        }
        Ok(IRONBARK_OK)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_a_status_code_with_a_message() {
        let code = guard(|| panic!("boom"));
        assert_eq!(code, IRONBARK_EPANIC);
        // SAFETY: `ironbark_last_error` returns a NUL-terminated string.
        let message = unsafe { CStr::from_ptr(ironbark_last_error()) };
        assert!(message.to_str().unwrap().contains("boom"), "{message:?}");
    }

    #[test]
    fn a_prefix_ends_at_its_successor() {
        assert_eq!(prefix_end(b"ab").as_deref(), Some(&b"ac"[..]));
        assert_eq!(prefix_end(b"a\xff\xff").as_deref(), Some(&b"b"[..]));
        assert_eq!(prefix_end(b"\xff\xff"), None);
        assert_eq!(prefix_end(b""), None);
    }

    #[test]
    fn seek_bounds_keep_the_tighter_one() {
        assert_eq!(
            raise_lower(Bound::Unbounded, b"k"),
            Bound::Included(&b"k"[..])
        );
        assert_eq!(
            raise_lower(Bound::Included(b"m"), b"k"),
            Bound::Included(&b"m"[..])
        );
        assert_eq!(
            raise_lower(Bound::Excluded(b"a"), b"k"),
            Bound::Included(&b"k"[..])
        );
        assert_eq!(
            lower_upper(Bound::Excluded(b"c"), b"k"),
            Bound::Excluded(&b"c"[..])
        );
        assert_eq!(
            lower_upper(Bound::Unbounded, b"k"),
            Bound::Included(&b"k"[..])
        );
    }
}
