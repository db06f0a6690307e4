//! The Python extension module `ironbark._ironbark`: `Database`,
//! `Transaction`, the range iterator, zero-copy value buffers and the
//! exception hierarchy, over the engine's public Rust API. The package
//! `python/ironbark` re-exports it with `open` and the type stubs.
//!
//! Safety rules kept here:
//! - a value handed out as a `memoryview` holds a reference to its read
//!   snapshot, so the bytes it points at stay mapped for as long as the
//!   memoryview lives, whatever Python does with the transaction;
//! - write transactions hand out copies only (their pages change on the
//!   next put); a transaction and its iterators are used only by the
//!   thread that began it (checked: another thread gets a `RuntimeError`);
//! - engine errors become exceptions; nothing here panics on user input.

use std::borrow::Cow;
use std::cell::RefCell;
use std::ffi::{c_int, c_void, CString};
use std::ops::Bound as RangeBound;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::{self, ThreadId};

use ironbark::{
    Database, Durability, Error as EngineError, IntWidth, Options, Range, ReadTxn, Savepoint, Tree,
    WriteTxn,
};
use pyo3::exceptions::{PyBufferError, PyException, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyIterator, PyMemoryView, PyTuple};
use pyo3::{create_exception, ffi};

/// The tree that calls without `tree=` use: LMDB's unnamed main database,
/// as the command-line tool maps it.
const DEFAULT_TREE: &str = "main";

create_exception!(
    ironbark,
    Error,
    PyException,
    "Base class of every ironbark error."
);
create_exception!(
    ironbark,
    IoError,
    Error,
    "The operating system reported an I/O error."
);
create_exception!(
    ironbark,
    CorruptedError,
    Error,
    "The file fails a check (checksum, structure)."
);
create_exception!(
    ironbark,
    NotAnIronbarkFileError,
    Error,
    "The file is not an ironbark database."
);
create_exception!(
    ironbark,
    IncompatibleVersionError,
    Error,
    "The file was written by an incompatible format version."
);
create_exception!(
    ironbark,
    InvalidPageSizeError,
    Error,
    "The page size is not supported."
);
create_exception!(
    ironbark,
    KeyTooLargeError,
    Error,
    "A key is longer than Database.max_key_len."
);
create_exception!(
    ironbark,
    KeyOutOfOrderError,
    Error,
    "Transaction.append was given a key not greater than the tree's last key."
);
create_exception!(
    ironbark,
    ValueTooLargeError,
    Error,
    "A value is longer than 1 GiB."
);
create_exception!(
    ironbark,
    InvalidTreeNameError,
    Error,
    "A tree name is empty or longer than 255 bytes."
);
create_exception!(
    ironbark,
    NoSuchTreeError,
    Error,
    "No tree of that name exists."
);
create_exception!(
    ironbark,
    TreeDroppedError,
    Error,
    "The tree was dropped in this transaction."
);
create_exception!(
    ironbark,
    ReadersFullError,
    Error,
    "Every reader slot is taken (max_readers)."
);
create_exception!(
    ironbark,
    BusyError,
    Error,
    "Another write transaction is in progress (nowait=True)."
);
create_exception!(
    ironbark,
    LockedError,
    Error,
    "Another process holds the write lock (nowait=True)."
);
create_exception!(
    ironbark,
    ReadOnlyError,
    Error,
    "A write on a read-only database or in a read transaction."
);
create_exception!(
    ironbark,
    PoisonedError,
    Error,
    "An earlier sync failed: reopen the database before writing."
);
create_exception!(
    ironbark,
    InvalidOptionError,
    Error,
    "An option is out of its range."
);
create_exception!(
    ironbark,
    TxnFailedError,
    Error,
    "An operation failed part-way: the transaction can only be aborted."
);
create_exception!(
    ironbark,
    StaleTreeError,
    Error,
    "A tree handle whose tree was dropped in an earlier transaction."
);
create_exception!(
    ironbark,
    ForeignTreeError,
    Error,
    "A tree handle used with another database than its own."
);
// A LockedError: like another process's writer, it keeps writers out, so
// code that retries on LockedError retries on it too.
create_exception!(
    ironbark,
    LocklessReaderError,
    LockedError,
    "A read-only process reading without the lock file keeps writers out (nowait=True)."
);
// A BusyError: the write transaction in progress is this thread's own, and
// this is what `begin(write=True)` raised for it before the engine had a
// kind of its own.
create_exception!(
    ironbark,
    WriteTxnOnThisThreadError,
    BusyError,
    "This thread already holds the write transaction: waiting would never end."
);
create_exception!(
    ironbark,
    WrongTreeKindError,
    Error,
    "A tree used as another kind than it is (a multimap as a plain tree, an integer-key tree of another width...)."
);
create_exception!(
    ironbark,
    PairTooLargeError,
    Error,
    "A multimap pair whose key and value together are longer than the key limit."
);
create_exception!(
    ironbark,
    IntegerKeySizeError,
    Error,
    "An integer key that does not fit the tree's key width."
);
create_exception!(
    ironbark,
    InvalidSavepointError,
    Error,
    "A savepoint released, rolled back past, or of another transaction."
);
create_exception!(
    ironbark,
    ArenaFullError,
    Error,
    "The newest commits do not fit in this process's page arena: end old read transactions."
);
create_exception!(
    ironbark,
    ClosedError,
    Error,
    "The transaction has ended, or the database is closed."
);

/// The exception for an engine error.
fn to_py(e: EngineError) -> PyErr {
    let msg = e.to_string();
    match e {
        EngineError::Io(_) => IoError::new_err(msg),
        EngineError::Corrupted { .. } => CorruptedError::new_err(msg),
        EngineError::NotAnIronbarkFile => NotAnIronbarkFileError::new_err(msg),
        EngineError::IncompatibleVersion { .. } => IncompatibleVersionError::new_err(msg),
        EngineError::InvalidPageSize(_) => InvalidPageSizeError::new_err(msg),
        EngineError::KeyTooLarge { .. } => KeyTooLargeError::new_err(msg),
        EngineError::KeyOutOfOrder(_) => KeyOutOfOrderError::new_err(msg),
        EngineError::ValueTooLarge { .. } => ValueTooLargeError::new_err(msg),
        EngineError::InvalidTreeName(_) => InvalidTreeNameError::new_err(msg),
        EngineError::NoSuchTree(_) => NoSuchTreeError::new_err(msg),
        EngineError::TreeDropped(_) => TreeDroppedError::new_err(msg),
        EngineError::ReadersFull { .. } => ReadersFullError::new_err(msg),
        EngineError::Busy => BusyError::new_err(msg),
        EngineError::Locked => LockedError::new_err(msg),
        EngineError::ReadOnly => ReadOnlyError::new_err(msg),
        EngineError::Poisoned => PoisonedError::new_err(msg),
        EngineError::InvalidOption(_) => InvalidOptionError::new_err(msg),
        EngineError::TxnFailed(_) => TxnFailedError::new_err(msg),
        EngineError::StaleTree(_) => StaleTreeError::new_err(msg),
        EngineError::ForeignTree(_) => ForeignTreeError::new_err(msg),
        EngineError::LocklessReader => LocklessReaderError::new_err(msg),
        EngineError::WriteTxnOnThisThread => WriteTxnOnThisThreadError::new_err(msg),
        EngineError::WrongTreeKind { .. } => WrongTreeKindError::new_err(msg),
        EngineError::PairTooLarge { .. } => PairTooLargeError::new_err(msg),
        EngineError::IntegerKeySize { .. } => IntegerKeySizeError::new_err(msg),
        EngineError::InvalidSavepoint(_) => InvalidSavepointError::new_err(msg),
        EngineError::ArenaFull { .. } => ArenaFullError::new_err(msg),
        // The engine's error is non-exhaustive: kinds newer than this list.
        _ => Error::new_err(msg),
    }
}

/// `Result` of the engine into `PyResult`.
trait OrRaise<T> {
    fn or_raise(self) -> PyResult<T>;
}

impl<T> OrRaise<T> for ironbark::Result<T> {
    fn or_raise(self) -> PyResult<T> {
        self.map_err(to_py)
    }
}

/// Moves a value across `Python::detach`, which runs its closure on the
/// calling thread: the value never changes threads, so it need not be
/// `Send` (a write transaction holds a mutex guard).
struct SameThread<T>(T);

// SAFETY: only used to carry a value into and out of `Python::detach`,
// whose closure runs on the current thread before `detach` returns; the
// value is therefore created, used and dropped on one thread.
unsafe impl<T> Send for SameThread<T> {}

impl<T> SameThread<T> {
    fn into_inner(self) -> T {
        self.0
    }
}

/// An open database: `ironbark.open(path, **options)`.
#[pyclass(module = "ironbark", name = "Database", frozen)]
struct PyDatabase {
    db: Mutex<Option<Database>>,
    path: PathBuf,
}

impl PyDatabase {
    fn database(&self) -> PyResult<Database> {
        self.db
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or_else(|| ClosedError::new_err("the database is closed"))
    }
}

#[pymethods]
impl PyDatabase {
    /// Begins a transaction: a read snapshot (default), or with
    /// `write=True` the write transaction.
    #[pyo3(signature = (write=false, buffers=false, nowait=false, sync=true))]
    fn begin(
        &self,
        py: Python<'_>,
        write: bool,
        buffers: bool,
        nowait: bool,
        sync: bool,
    ) -> PyResult<PyTransaction> {
        let db = self.database()?;
        let mut main = None;
        let state = if write {
            if !nowait && holds_writer(db.path()) {
                return Err(WriteTxnOnThisThreadError::new_err(
                    "this thread already holds the write transaction of this database \
                     (waiting for it would wait forever)",
                ));
            }
            let w = if nowait {
                db.try_begin_write().or_raise()?
            } else {
                // Waiting for another writer: let other Python threads run
                // (one of them may hold the write transaction).
                py.detach(|| SameThread(db.begin_write()))
                    .into_inner()
                    .or_raise()?
            };
            let mut w = w;
            if !sync {
                w.set_durability(Durability::None);
            }
            // SAFETY: the transaction borrows the database's shared state,
            // which lives in the `Arc` inside `db`, not in `db` itself;
            // `PyTransaction` keeps `db` and drops the transaction first
            // (field order, and `end` drops it explicitly).
            let w = unsafe { std::mem::transmute::<WriteTxn<'_>, WriteTxn<'static>>(w) };
            note_writer(db.path(), true);
            TxnState::Write(Box::new(w))
        } else {
            if nowait || !sync {
                return Err(PyValueError::new_err(
                    "nowait and sync apply to write transactions only",
                ));
            }
            let r = db.begin_read().or_raise()?;
            main = r.tree(DEFAULT_TREE).ok();
            TxnState::Read(Arc::new(r))
        };
        Ok(PyTransaction {
            state,
            _db: db,
            buffers,
            owner: current_thread(),
            main,
        })
    }

    /// Makes every commit so far durable (after `sync=False` commits).
    fn sync(&self, py: Python<'_>) -> PyResult<()> {
        let db = self.database()?;
        py.detach(|| db.sync()).or_raise()
    }

    /// Closes this handle. Transactions still open keep the database open
    /// until they end.
    fn close(&self) {
        self.db.lock().unwrap_or_else(|e| e.into_inner()).take();
    }

    /// Whether `close` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.db.lock().unwrap_or_else(|e| e.into_inner()).is_none()
    }

    /// The path the database was opened with.
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// The longest key accepted, in bytes.
    #[getter]
    fn max_key_len(&self) -> PyResult<usize> {
        Ok(self.database()?.max_key_len())
    }

    /// Whether the database was opened read-only.
    #[getter]
    fn read_only(&self) -> PyResult<bool> {
        Ok(self.database()?.is_read_only())
    }

    /// Sizes, counts and counters, as a dict (`trees` maps each tree's
    /// name to its own dict).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.database()?.stats().or_raise()?;
        let d = PyDict::new(py);
        d.set_item("page_size", s.page_size)?;
        d.set_item("file_size_bytes", s.file_size_bytes)?;
        d.set_item("page_count", s.page_count)?;
        d.set_item("free_pages", s.free_pages)?;
        d.set_item("pages_pinned_by_readers", s.pages_pinned_by_readers)?;
        d.set_item("last_txn_id", s.last_txn_id)?;
        d.set_item("durable_txn_id", s.durable_txn_id)?;
        d.set_item("live_readers", s.live_readers)?;
        d.set_item("max_readers", s.max_readers)?;
        d.set_item("oldest_snapshot", s.oldest_snapshot)?;
        d.set_item("logged_commits", s.counters.logged_commits)?;
        d.set_item("spills", s.counters.spills)?;
        d.set_item("checkpoint_steps", s.counters.checkpoint_steps)?;
        d.set_item(
            "checkpoint_runs_spliced",
            s.counters.checkpoint_runs_spliced,
        )?;
        d.set_item("checkpoint_roots_grown", s.counters.checkpoint_roots_grown)?;
        d.set_item(
            "checkpoint_leaves_folded",
            s.counters.checkpoint_leaves_folded,
        )?;
        d.set_item(
            "checkpoint_layouts_deferred",
            s.counters.checkpoint_layouts_deferred,
        )?;
        d.set_item("values_overlaid", s.counters.values_overlaid)?;
        d.set_item("inserts_overlaid", s.counters.inserts_overlaid)?;
        d.set_item("commits", s.counters.commits)?;
        d.set_item("bytes_written", s.counters.bytes_written)?;
        d.set_item("log_bytes", s.counters.log_bytes)?;
        let trees = PyDict::new(py);
        for t in &s.trees {
            let td = PyDict::new(py);
            td.set_item("entries", t.entries)?;
            td.set_item("depth", t.depth)?;
            td.set_item("branch_pages", t.branch_pages)?;
            td.set_item("leaf_pages", t.leaf_pages)?;
            td.set_item("overflow_pages", t.overflow_pages)?;
            trees.set_item(&t.name, td)?;
        }
        d.set_item("trees", trees)?;
        Ok(d)
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, PyTuple>) -> bool {
        self.close();
        false
    }

    fn __repr__(&self) -> String {
        let state = if self.closed() { " (closed)" } else { "" };
        format!(
            "<ironbark.Database {:?}{state}>",
            self.path.display().to_string()
        )
    }
}

// The signature's literal default, checked (a path there would show as `...`
// in the text signature the stubs are checked against).
const _: () = assert!(ironbark::DEFAULT_MAX_DIRTY_BYTES == 536870912);

/// Opens (by default creating) the database at `path`.
#[pyfunction]
#[pyo3(signature = (path, *, create=true, read_only=false, durability="immediate", page_size=4096, max_readers=126, logged_commits=true, max_dirty_bytes=536870912, checkpoint_log_bytes=None, salvage_damaged_log=false))]
#[allow(clippy::too_many_arguments)]
fn open(
    py: Python<'_>,
    path: PathBuf,
    create: bool,
    read_only: bool,
    durability: &str,
    page_size: usize,
    max_readers: usize,
    logged_commits: bool,
    max_dirty_bytes: usize,
    checkpoint_log_bytes: Option<u64>,
    salvage_damaged_log: bool,
) -> PyResult<PyDatabase> {
    let durability = match durability {
        "immediate" => Durability::Immediate,
        "none" => Durability::None,
        other => {
            return Err(InvalidOptionError::new_err(format!(
                "invalid option: durability {other:?} (\"immediate\" or \"none\")"
            )))
        }
    };
    let options = Options {
        page_size,
        max_readers,
        durability,
        create,
        read_only,
        logged_commits,
        max_dirty_bytes,
        checkpoint_log_bytes,
        salvage_damaged_log,
        ..Options::default()
    };
    let db = py
        .detach(|| Database::open_with(&path, &options))
        .or_raise()?;
    Ok(PyDatabase {
        db: Mutex::new(Some(db)),
        path,
    })
}

enum TxnState {
    Read(Arc<ReadTxn>),
    // Boxed: a write transaction is large, and most are reads.
    Write(Box<WriteTxn<'static>>),
    Ended,
}

/// A transaction: a context manager that commits when its block ends
/// normally and aborts when it raises.
#[pyclass(module = "ironbark", name = "Transaction")]
struct PyTransaction {
    // Declared before `_db`: the write transaction borrows the state `_db`
    // keeps alive.
    state: TxnState,
    _db: Database,
    buffers: bool,
    /// The thread that began the transaction: the only one that may use it.
    owner: ThreadId,
    /// A read transaction's handle of the default tree (`None` if it does
    /// not exist in the snapshot), looked up once.
    main: Option<Tree>,
}

// SAFETY: `state` (the one field that is not `Send + Sync`: a write
// transaction holds the write lock's mutex guard) is only reached through
// `PyTransaction::state`/`state_mut`, which raise on any thread but
// `owner`, so it is used by one thread only. It may be dropped on another
// thread (see `Drop`).
unsafe impl Send for PyTransaction {}
// SAFETY: as for `Send`: no shared access to `state` from a second thread.
unsafe impl Sync for PyTransaction {}

impl Drop for PyTransaction {
    fn drop(&mut self) {
        if current_thread() == self.owner && matches!(self.state, TxnState::Write(_)) {
            note_writer(self._db.path(), false);
        }
        if current_thread() != self.owner && matches!(self.state, TxnState::Write(_)) {
            // Dropped by another thread: on Linux, releasing the write lock
            // there is sound (std's mutex is a futex any thread may wake,
            // and the file lock belongs to the process); elsewhere the
            // transaction is leaked rather than unlocked by a thread that
            // does not own the lock.
            #[cfg(not(target_os = "linux"))]
            std::mem::forget(std::mem::replace(&mut self.state, TxnState::Ended));
        }
    }
}

thread_local! {
    /// The databases (by path) whose write transaction this thread holds,
    /// so that a second `begin(write=True)` fails instead of waiting for
    /// itself.
    static WRITING: RefCell<Vec<PathBuf>> = const { RefCell::new(Vec::new()) };
}

fn holds_writer(path: &Path) -> bool {
    WRITING.with(|w| w.borrow().iter().any(|p| p == path))
}

fn note_writer(path: &Path, held: bool) {
    WRITING.with(|w| {
        let mut w = w.borrow_mut();
        if held {
            w.push(path.to_path_buf());
        } else if let Some(i) = w.iter().position(|p| p == path) {
            w.swap_remove(i);
        }
    });
}

/// The calling thread's id (cached: `thread::current()` costs more).
fn current_thread() -> ThreadId {
    thread_local! {
        static ID: ThreadId = thread::current().id();
    }
    ID.with(|id| *id)
}

fn wrong_thread() -> PyErr {
    PyRuntimeError::new_err("an ironbark transaction is used only by the thread that began it")
}

fn closed() -> PyErr {
    ClosedError::new_err("the transaction has ended")
}

/// A key or value as Python sees it: copied `bytes`, or a zero-copy
/// `memoryview` that keeps the snapshot alive.
fn value_of<'py>(
    py: Python<'py>,
    bytes: &[u8],
    snapshot: Option<&Arc<ReadTxn>>,
) -> PyResult<Bound<'py, PyAny>> {
    match snapshot {
        None => Ok(PyBytes::new(py, bytes).into_any()),
        Some(snapshot) => {
            let buffer = Bound::new(
                py,
                PyBuffer {
                    ptr: bytes.as_ptr() as usize,
                    len: bytes.len(),
                    _snapshot: snapshot.clone(),
                },
            )?;
            Ok(PyMemoryView::from(buffer.as_any())?.into_any())
        }
    }
}

/// The upper bound of the keys that start with `prefix`: the prefix with
/// its last byte below 0xff incremented (and what follows it cut off), or
/// none when every byte is 0xff.
fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(&last) = end.last() {
        if last == 0xff {
            end.pop();
        } else {
            *end.last_mut().expect("non-empty") += 1;
            return Some(end);
        }
    }
    None
}

/// A `(key, value)` entry as Python sees it.
type PyEntry<'py> = (Bound<'py, PyAny>, Bound<'py, PyAny>);

/// A key or value of `put_many`, read in place: a `bytes` never changes,
/// and the reference keeps it alive while the engine holds the pair.
struct InPlace<'py>(Bound<'py, PyBytes>);

impl AsRef<[u8]> for InPlace<'_> {
    fn as_ref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

/// The pairs of `put_many`, converted as the engine takes them (16 at a
/// time) rather than all first, so a large iterable is never copied into
/// a list. An item that does not convert, or an exception of the iterable
/// itself, ends them and waits in `error`, to be raised once the pairs
/// before it are stored.
struct PairsOf<'py> {
    /// `None` once ended: a Python iterator may yield again after its end.
    items: Option<Bound<'py, PyIterator>>,
    taken: usize,
    error: Option<PyErr>,
}

impl<'py> Iterator for PairsOf<'py> {
    type Item = (InPlace<'py>, InPlace<'py>);

    fn next(&mut self) -> Option<Self::Item> {
        let items = self.items.as_mut()?;
        let next = items
            .next()
            .map(|item| item.and_then(|item| pair_of(&item, self.taken)));
        match next {
            Some(Ok(pair)) => {
                self.taken += 1;
                return Some(pair);
            }
            Some(Err(e)) => self.error = Some(e),
            None => {}
        }
        self.items = None;
        None
    }
}

/// The item `index` of `put_many`'s pairs as a key and a value, or the
/// `TypeError` that `put` raises for an argument that is not `bytes`.
fn pair_of<'py>(item: &Bound<'py, PyAny>, index: usize) -> PyResult<(InPlace<'py>, InPlace<'py>)> {
    let pair = item
        .cast::<PyTuple>()
        .map_err(|e| PyTypeError::new_err(format!("put_many: pair {index}: {e}")))?;
    if pair.len() != 2 {
        return Err(PyTypeError::new_err(format!(
            "put_many: pair {index} is a tuple of {} items, not (key, value)",
            pair.len()
        )));
    }
    let part = |i: usize, what: &str| {
        pair.get_item(i)?
            .cast_into::<PyBytes>()
            .map(InPlace)
            .map_err(|e| PyTypeError::new_err(format!("put_many: the {what} of pair {index}: {e}")))
    };
    Ok((part(0, "key")?, part(1, "value")?))
}

/// The edge and nearest-key lookups, which read alike in both kinds of
/// transaction.
#[derive(Clone, Copy)]
enum Lookup<'k> {
    First,
    Last,
    AtOrAfter(&'k [u8]),
    After(&'k [u8]),
    AtOrBefore(&'k [u8]),
    Before(&'k [u8]),
}

/// Runs `$what` (a [`Lookup`]) on the transaction `$t`: a macro, since the
/// two kinds of transaction share no trait.
macro_rules! run_lookup {
    ($t:expr, $tree:expr, $what:expr) => {
        match $what {
            Lookup::First => $t.first($tree),
            Lookup::Last => $t.last($tree),
            Lookup::AtOrAfter(k) => $t.get_ge($tree, k),
            Lookup::After(k) => $t.get_gt($tree, k),
            Lookup::AtOrBefore(k) => $t.get_le($tree, k),
            Lookup::Before(k) => $t.get_lt($tree, k),
        }
    };
}

/// Runs `$body` with `$t` the transaction's reads (a read snapshot or the
/// write transaction): a macro, since the two share no trait.
macro_rules! with_reader {
    ($self:expr, $t:ident => $body:expr) => {
        match $self.state()? {
            TxnState::Read(r) => {
                let $t: &ReadTxn = r;
                $body
            }
            TxnState::Write(w) => {
                let $t: &WriteTxn<'static> = w;
                $body
            }
            TxnState::Ended => Err(closed()),
        }
    };
}

/// The handle of the tree `name` (the default tree if `None`) for a
/// removal: a missing default tree has nothing to remove (`None`); a
/// missing named tree is `NoSuchTreeError`.
fn tree_to_remove_from(w: &WriteTxn<'static>, name: Option<&str>) -> PyResult<Option<Tree>> {
    match w.tree(name.unwrap_or(DEFAULT_TREE)) {
        Ok(t) => Ok(Some(t)),
        Err(EngineError::NoSuchTree(_)) if name.is_none() => Ok(None),
        Err(e) => Err(to_py(e)),
    }
}

impl PyTransaction {
    /// The entry a lookup finds in the tree `tree`, or `None`.
    fn look_up<'py>(
        &self,
        py: Python<'py>,
        tree: Option<&str>,
        what: Lookup<'_>,
    ) -> PyResult<Option<PyEntry<'py>>> {
        let Some(t) = self.read_tree(tree)? else {
            return Ok(None);
        };
        let found = match self.state()? {
            TxnState::Read(r) => run_lookup!(r, &t, what),
            TxnState::Write(w) => run_lookup!(w, &t, what),
            TxnState::Ended => return Err(closed()),
        }
        .or_raise()?;
        let Some((k, v)) = found else {
            return Ok(None);
        };
        let src = self.buffer_source();
        Ok(Some((value_of(py, k, src)?, value_of(py, v, src)?)))
    }

    /// Removes the entry with the smallest (`last` false) or largest key
    /// and returns it, copied.
    fn pop<'py>(
        &mut self,
        py: Python<'py>,
        tree: Option<&str>,
        last: bool,
    ) -> PyResult<Option<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)>> {
        let w = self.writer(if last { "pop_last" } else { "pop_first" })?;
        let Some(t) = tree_to_remove_from(w, tree)? else {
            return Ok(None);
        };
        let popped = if last {
            w.pop_last(&t)
        } else {
            w.pop_first(&t)
        }
        .or_raise()?;
        Ok(popped.map(|(k, v)| (PyBytes::new(py, &k), PyBytes::new(py, &v))))
    }

    /// The state, on the owner thread only.
    fn state(&self) -> PyResult<&TxnState> {
        if current_thread() != self.owner {
            return Err(wrong_thread());
        }
        Ok(&self.state)
    }

    fn state_mut(&mut self) -> PyResult<&mut TxnState> {
        if current_thread() != self.owner {
            return Err(wrong_thread());
        }
        Ok(&mut self.state)
    }

    /// The handle of `name` (the default tree if `None`) for reading: a
    /// missing default tree reads as empty (`None`); a missing named tree
    /// is `NoSuchTreeError`.
    fn read_tree(&self, name: Option<&str>) -> PyResult<Option<Cow<'_, Tree>>> {
        let r = match self.state()? {
            TxnState::Read(_) if name.is_none() => {
                return Ok(self.main.as_ref().map(Cow::Borrowed))
            }
            TxnState::Read(r) => r.tree(name.unwrap_or(DEFAULT_TREE)),
            TxnState::Write(w) => w.tree(name.unwrap_or(DEFAULT_TREE)),
            TxnState::Ended => return Err(closed()),
        };
        match r {
            Ok(t) => Ok(Some(Cow::Owned(t))),
            Err(EngineError::NoSuchTree(_)) if name.is_none() => Ok(None),
            Err(e) => Err(to_py(e)),
        }
    }

    fn writer(&mut self, what: &str) -> PyResult<&mut WriteTxn<'static>> {
        match self.state_mut()? {
            TxnState::Write(w) => Ok(&mut **w),
            TxnState::Read(_) => Err(ReadOnlyError::new_err(format!(
                "{what} in a read transaction (begin(write=True) to write)"
            ))),
            TxnState::Ended => Err(closed()),
        }
    }

    /// The snapshot values are borrowed from, when they are handed out as
    /// memoryviews.
    fn buffer_source(&self) -> Option<&Arc<ReadTxn>> {
        match &self.state {
            TxnState::Read(r) if self.buffers => Some(r),
            _ => None,
        }
    }

    fn end(&mut self, py: Python<'_>, commit: bool) -> PyResult<()> {
        let state = std::mem::replace(self.state_mut()?, TxnState::Ended);
        if let TxnState::Write(_) = state {
            note_writer(self._db.path(), false);
        }
        match state {
            TxnState::Write(w) if commit => {
                let w = SameThread(*w);
                py.detach(move || w.into_inner().commit()).or_raise()
            }
            TxnState::Ended => Err(closed()),
            _ => Ok(()),
        }
    }
}

#[pymethods]
impl PyTransaction {
    /// The value under `key`, or `default`.
    #[pyo3(signature = (key, default=None, *, tree=None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &[u8],
        default: Option<Bound<'py, PyAny>>,
        tree: Option<&str>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let Some(t) = self.read_tree(tree)? else {
            return Ok(default.unwrap_or_else(|| py.None().into_bound(py)));
        };
        let found = match self.state()? {
            TxnState::Read(r) => r.get(&t, key),
            TxnState::Write(w) => w.get(&t, key),
            TxnState::Ended => return Err(closed()),
        }
        .or_raise()?;
        match found {
            Some(v) => value_of(py, v, self.buffer_source()),
            None => Ok(default.unwrap_or_else(|| py.None().into_bound(py))),
        }
    }

    /// Stores `value` under `key` (creating the tree if needed). With
    /// `overwrite=False` an existing value is kept and the result is
    /// `False`.
    #[pyo3(signature = (key, value, *, tree=None, overwrite=true))]
    fn put(
        &mut self,
        key: &[u8],
        value: &[u8],
        tree: Option<&str>,
        overwrite: bool,
    ) -> PyResult<bool> {
        let w = self.writer("put")?;
        let t = w.open_tree(tree.unwrap_or(DEFAULT_TREE)).or_raise()?;
        if !overwrite && w.get(&t, key).or_raise()?.is_some() {
            return Ok(false);
        }
        w.put(&t, key, value).or_raise()?;
        Ok(true)
    }

    /// Stores each `(key, value)` of the iterable `pairs` in the tree
    /// (created if needed), in order, as `put` would one pair at a time
    /// (of two pairs with one key, the later wins); faster for keys
    /// scattered over a large tree. The first pair that fails (a key too
    /// large, an item that is not a tuple of two `bytes`) raises, with the
    /// pairs before it stored.
    #[pyo3(signature = (pairs, *, tree=None))]
    fn put_many(&mut self, pairs: &Bound<'_, PyAny>, tree: Option<&str>) -> PyResult<()> {
        let items = pairs.try_iter()?;
        let w = self.writer("put_many")?;
        let t = w.open_tree(tree.unwrap_or(DEFAULT_TREE)).or_raise()?;
        let mut pairs = PairsOf {
            items: Some(items),
            taken: 0,
            error: None,
        };
        // An engine error comes first: the pair it failed on was taken
        // before the item that ended the pairs.
        w.put_many(&t, &mut pairs).or_raise()?;
        pairs.error.map_or(Ok(()), Err)
    }

    /// Stores `value` under `key`, which must be greater than every key of
    /// the tree (created if needed): for loading sorted data, with one key
    /// compare instead of a search and full pages. A key out of order
    /// raises `KeyOutOfOrderError` and changes nothing.
    #[pyo3(signature = (key, value, *, tree=None))]
    fn append(&mut self, key: &[u8], value: &[u8], tree: Option<&str>) -> PyResult<()> {
        let w = self.writer("append")?;
        let t = w.open_tree(tree.unwrap_or(DEFAULT_TREE)).or_raise()?;
        w.append(&t, key, value).or_raise()
    }

    /// Removes `key`; returns whether it was there.
    #[pyo3(signature = (key, *, tree=None))]
    fn delete(&mut self, key: &[u8], tree: Option<&str>) -> PyResult<bool> {
        let w = self.writer("delete")?;
        let Some(t) = tree_to_remove_from(w, tree)? else {
            return Ok(false);
        };
        w.delete(&t, key).or_raise()
    }

    /// Stores `value` under `key` (creating the tree if needed) and
    /// returns the value it replaced, or `None`.
    #[pyo3(signature = (key, value, *, tree=None))]
    fn insert<'py>(
        &mut self,
        py: Python<'py>,
        key: &[u8],
        value: &[u8],
        tree: Option<&str>,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let w = self.writer("insert")?;
        let t = w.open_tree(tree.unwrap_or(DEFAULT_TREE)).or_raise()?;
        let old = w.insert(&t, key, value).or_raise()?;
        Ok(old.map(|v| PyBytes::new(py, &v)))
    }

    /// Whether the tree holds `key` (its value is not read).
    #[pyo3(signature = (key, *, tree=None))]
    fn contains_key(&self, key: &[u8], tree: Option<&str>) -> PyResult<bool> {
        let Some(t) = self.read_tree(tree)? else {
            return Ok(false);
        };
        match self.state()? {
            TxnState::Read(r) => r.contains_key(&t, key),
            TxnState::Write(w) => w.contains_key(&t, key),
            TxnState::Ended => return Err(closed()),
        }
        .or_raise()
    }

    /// The entry with the smallest key, as `(key, value)`, or `None`.
    #[pyo3(signature = (*, tree=None))]
    fn first<'py>(&self, py: Python<'py>, tree: Option<&str>) -> PyResult<Option<PyEntry<'py>>> {
        self.look_up(py, tree, Lookup::First)
    }

    /// The entry with the largest key, as `(key, value)`, or `None`.
    #[pyo3(signature = (*, tree=None))]
    fn last<'py>(&self, py: Python<'py>, tree: Option<&str>) -> PyResult<Option<PyEntry<'py>>> {
        self.look_up(py, tree, Lookup::Last)
    }

    /// The entry with the smallest key `>= key`, or `None`.
    #[pyo3(signature = (key, *, tree=None))]
    fn get_ge<'py>(
        &self,
        py: Python<'py>,
        key: &[u8],
        tree: Option<&str>,
    ) -> PyResult<Option<PyEntry<'py>>> {
        self.look_up(py, tree, Lookup::AtOrAfter(key))
    }

    /// The entry with the smallest key `> key`, or `None`.
    #[pyo3(signature = (key, *, tree=None))]
    fn get_gt<'py>(
        &self,
        py: Python<'py>,
        key: &[u8],
        tree: Option<&str>,
    ) -> PyResult<Option<PyEntry<'py>>> {
        self.look_up(py, tree, Lookup::After(key))
    }

    /// The entry with the largest key `<= key`, or `None`.
    #[pyo3(signature = (key, *, tree=None))]
    fn get_le<'py>(
        &self,
        py: Python<'py>,
        key: &[u8],
        tree: Option<&str>,
    ) -> PyResult<Option<PyEntry<'py>>> {
        self.look_up(py, tree, Lookup::AtOrBefore(key))
    }

    /// The entry with the largest key `< key`, or `None`.
    #[pyo3(signature = (key, *, tree=None))]
    fn get_lt<'py>(
        &self,
        py: Python<'py>,
        key: &[u8],
        tree: Option<&str>,
    ) -> PyResult<Option<PyEntry<'py>>> {
        self.look_up(py, tree, Lookup::Before(key))
    }

    /// Removes the entry with the smallest key and returns it as
    /// `(key, value)` (copied), or `None` if the tree is empty.
    #[pyo3(signature = (*, tree=None))]
    #[allow(clippy::type_complexity)]
    fn pop_first<'py>(
        &mut self,
        py: Python<'py>,
        tree: Option<&str>,
    ) -> PyResult<Option<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)>> {
        self.pop(py, tree, false)
    }

    /// Removes the entry with the largest key and returns it as
    /// `(key, value)` (copied), or `None` if the tree is empty.
    #[pyo3(signature = (*, tree=None))]
    #[allow(clippy::type_complexity)]
    fn pop_last<'py>(
        &mut self,
        py: Python<'py>,
        tree: Option<&str>,
    ) -> PyResult<Option<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)>> {
        self.pop(py, tree, true)
    }

    /// Removes every entry of the tree (which stays) and returns how many
    /// there were.
    #[pyo3(signature = (*, tree=None))]
    fn clear(&mut self, tree: Option<&str>) -> PyResult<u64> {
        let w = self.writer("clear")?;
        let Some(t) = tree_to_remove_from(w, tree)? else {
            return Ok(0);
        };
        w.clear(&t).or_raise()
    }

    /// Removes the entries with `start <= key < end` (`end` included with
    /// `inclusive_end=True`; `None` is no bound) and returns how many.
    #[pyo3(signature = (start=None, end=None, *, tree=None, inclusive_end=false))]
    fn delete_range(
        &mut self,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
        tree: Option<&str>,
        inclusive_end: bool,
    ) -> PyResult<u64> {
        let w = self.writer("delete_range")?;
        let Some(t) = tree_to_remove_from(w, tree)? else {
            return Ok(0);
        };
        let lower = start.map_or(RangeBound::Unbounded, RangeBound::Included);
        let upper = match end {
            Some(k) if inclusive_end => RangeBound::Included(k),
            Some(k) => RangeBound::Excluded(k),
            None => RangeBound::Unbounded,
        };
        w.delete_range(&t, (lower, upper)).or_raise()
    }

    /// Takes a savepoint of the write transaction: `rollback_to` it later
    /// undoes every change made since; savepoints nest.
    fn savepoint(&mut self) -> PyResult<PySavepoint> {
        let sp = self.writer("savepoint")?.savepoint().or_raise()?;
        Ok(PySavepoint { sp: Some(sp) })
    }

    /// Undoes every change made since `sp` was taken; `sp` stays (to roll
    /// back to again), the savepoints taken after it are discarded.
    fn rollback_to(&mut self, sp: &Bound<'_, PySavepoint>) -> PyResult<()> {
        let sp = sp.borrow();
        let token = sp.sp.as_ref().ok_or_else(released)?;
        self.writer("rollback_to")?.rollback_to(token).or_raise()
    }

    /// Forgets `sp` and the savepoints taken after it, keeping their
    /// changes.
    fn release(&mut self, sp: &Bound<'_, PySavepoint>) -> PyResult<()> {
        let w = self.writer("release")?;
        let token = sp.borrow_mut().sp.take().ok_or_else(released)?;
        w.release(token).or_raise()
    }

    /// Opens the multimap `name` (a sorted set of values per key),
    /// creating it if it does not exist.
    fn open_multimap(&mut self, name: &str) -> PyResult<()> {
        self.writer("open_multimap")?
            .open_multimap(name)
            .or_raise()
            .map(drop)
    }

    /// Opens the integer-key tree `name` with keys of `width` bytes (4 or
    /// 8), creating it if it does not exist.
    fn open_int_tree(&mut self, name: &str, width: usize) -> PyResult<()> {
        let width = IntWidth::of_len(width).ok_or_else(|| {
            PyValueError::new_err(format!("integer key width {width} (4 or 8 bytes)"))
        })?;
        self.writer("open_int_tree")?
            .open_int_tree(name, width)
            .or_raise()
            .map(drop)
    }

    /// Adds the pair (`key`, `value`) to the multimap `tree` (created if
    /// needed); returns `False` if it was there already.
    #[pyo3(signature = (key, value, *, tree))]
    fn put_dup(&mut self, key: &[u8], value: &[u8], tree: &str) -> PyResult<bool> {
        let w = self.writer("put_dup")?;
        let m = match w.multimap(tree) {
            Err(EngineError::NoSuchTree(_)) => w.open_multimap(tree),
            found => found,
        }
        .or_raise()?;
        w.put_dup(&m, key, value).or_raise()
    }

    /// Removes the pair (`key`, `value`); returns whether it was there.
    #[pyo3(signature = (key, value, *, tree))]
    fn delete_dup(&mut self, key: &[u8], value: &[u8], tree: &str) -> PyResult<bool> {
        let w = self.writer("delete_dup")?;
        let m = w.multimap(tree).or_raise()?;
        w.delete_dup(&m, key, value).or_raise()
    }

    /// Removes every value of `key`; returns how many there were.
    #[pyo3(signature = (key, *, tree))]
    fn delete_dups(&mut self, key: &[u8], tree: &str) -> PyResult<u64> {
        let w = self.writer("delete_dups")?;
        let m = w.multimap(tree).or_raise()?;
        w.delete_all(&m, key).or_raise()
    }

    /// The values of `key`, in order (reversed with `reverse=True`), as a
    /// list.
    #[pyo3(signature = (key, *, tree, reverse=false))]
    fn get_dups<'py>(
        &self,
        py: Python<'py>,
        key: &[u8],
        tree: &str,
        reverse: bool,
    ) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let src = self.buffer_source();
        with_reader!(self, t => {
            let m = t.multimap(tree).or_raise()?;
            let dups = t.get_dups(&m, key).or_raise()?;
            let to_py = |v: ironbark::Result<&[u8]>| value_of(py, v.or_raise()?, src);
            if reverse {
                dups.rev().map(to_py).collect()
            } else {
                dups.map(to_py).collect()
            }
        })
    }

    /// The number of values of `key` (0 if none).
    #[pyo3(signature = (key, *, tree))]
    fn count_dups(&self, key: &[u8], tree: &str) -> PyResult<u64> {
        with_reader!(self, t => {
            let m = t.multimap(tree).or_raise()?;
            t.count_dups(&m, key).or_raise()
        })
    }

    /// Whether the multimap holds the pair (`key`, `value`).
    #[pyo3(signature = (key, value, *, tree))]
    fn contains_dup(&self, key: &[u8], value: &[u8], tree: &str) -> PyResult<bool> {
        with_reader!(self, t => {
            let m = t.multimap(tree).or_raise()?;
            t.contains_dup(&m, key, value).or_raise()
        })
    }

    /// The pairs with `start <= key < end` (`end` included with
    /// `inclusive_end=True`; `None` is no bound), in (key, value) order or
    /// reversed, as a list of `(key, value)` tuples.
    #[pyo3(signature = (start=None, end=None, *, tree, reverse=false, inclusive_end=false))]
    #[allow(clippy::too_many_arguments)]
    fn multimap_range<'py>(
        &self,
        py: Python<'py>,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
        tree: &str,
        reverse: bool,
        inclusive_end: bool,
    ) -> PyResult<Vec<PyEntry<'py>>> {
        let lower = start.map_or(RangeBound::Unbounded, RangeBound::Included);
        let upper = match end {
            Some(k) if inclusive_end => RangeBound::Included(k),
            Some(k) => RangeBound::Excluded(k),
            None => RangeBound::Unbounded,
        };
        let src = self.buffer_source();
        with_reader!(self, t => {
            let m = t.multimap(tree).or_raise()?;
            let pairs = t.multimap_range(&m, (lower, upper)).or_raise()?;
            let to_py = |p: ironbark::Result<ironbark::Pair<'_>>| -> PyResult<PyEntry<'py>> {
                let (k, v) = p.or_raise()?;
                // A decoded key (one with zero bytes) is a copy; a key in
                // place and the value are handed out as any other.
                let key = match k {
                    Cow::Borrowed(k) => value_of(py, k, src)?,
                    Cow::Owned(k) => PyBytes::new(py, &k).into_any(),
                };
                Ok((key, value_of(py, v, src)?))
            };
            if reverse {
                pairs.rev().map(to_py).collect()
            } else {
                pairs.map(to_py).collect()
            }
        })
    }

    /// Stores `value` under the integer `key` of the integer-key tree
    /// `tree` (made by `open_int_tree`).
    #[pyo3(signature = (key, value, *, tree))]
    fn put_int(&mut self, key: u64, value: &[u8], tree: &str) -> PyResult<()> {
        let w = self.writer("put_int")?;
        let t = w.int_tree(tree).or_raise()?;
        w.put_int(&t, key, value).or_raise()
    }

    /// The value under the integer `key`, or `default`.
    #[pyo3(signature = (key, default=None, *, tree))]
    fn get_int<'py>(
        &self,
        py: Python<'py>,
        key: u64,
        default: Option<Bound<'py, PyAny>>,
        tree: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        let src = self.buffer_source();
        with_reader!(self, t => {
            let i = t.int_tree(tree).or_raise()?;
            match t.get_int(&i, key).or_raise()? {
                Some(v) => value_of(py, v, src),
                None => Ok(default.unwrap_or_else(|| py.None().into_bound(py))),
            }
        })
    }

    /// Removes the integer `key`; returns whether it was there.
    #[pyo3(signature = (key, *, tree))]
    fn delete_int(&mut self, key: u64, tree: &str) -> PyResult<bool> {
        let w = self.writer("delete_int")?;
        let t = w.int_tree(tree).or_raise()?;
        w.delete_int(&t, key).or_raise()
    }

    /// The entries with `start <= key < end` (`end` included with
    /// `inclusive_end=True`; `None` is no bound), in numeric order or
    /// reversed, as a list of `(key, value)` tuples.
    #[pyo3(signature = (start=None, end=None, *, tree, reverse=false, inclusive_end=false))]
    #[allow(clippy::too_many_arguments)]
    fn int_range<'py>(
        &self,
        py: Python<'py>,
        start: Option<u64>,
        end: Option<u64>,
        tree: &str,
        reverse: bool,
        inclusive_end: bool,
    ) -> PyResult<Vec<(u64, Bound<'py, PyAny>)>> {
        let lower = start.map_or(RangeBound::Unbounded, RangeBound::Included);
        let upper = match end {
            Some(k) if inclusive_end => RangeBound::Included(k),
            Some(k) => RangeBound::Excluded(k),
            None => RangeBound::Unbounded,
        };
        let src = self.buffer_source();
        with_reader!(self, t => {
            let i = t.int_tree(tree).or_raise()?;
            let range = t.int_range(&i, (lower, upper)).or_raise()?;
            let to_py = |e: ironbark::Result<(u64, &[u8])>| {
                let (k, v) = e.or_raise()?;
                Ok((k, value_of(py, v, src)?))
            };
            if reverse {
                range.rev().map(to_py).collect()
            } else {
                range.map(to_py).collect()
            }
        })
    }

    /// Deletes the tree `name` with all its entries; returns whether it
    /// existed.
    fn drop_tree(&mut self, name: &str) -> PyResult<bool> {
        self.writer("drop_tree")?.drop_tree(name).or_raise()
    }

    /// The names of all trees, in order.
    fn trees(&self) -> PyResult<Vec<String>> {
        match self.state()? {
            TxnState::Read(r) => Ok(r.list_trees()),
            TxnState::Write(w) => Ok(w.list_trees()),
            TxnState::Ended => Err(closed()),
        }
    }

    /// The number of entries of the tree (of a multimap: its pairs).
    #[pyo3(signature = (*, tree=None))]
    fn count(&self, py: Python<'_>, tree: Option<&str>) -> PyResult<u64> {
        let t = match self.read_tree(tree) {
            Ok(t) => t,
            Err(e) if e.is_instance_of::<WrongTreeKindError>(py) => {
                // A multimap or an integer-key tree.
                let name = tree.unwrap_or(DEFAULT_TREE);
                return with_reader!(self, t => {
                    if t.tree_kind(name).or_raise()?.multimap {
                        t.multimap_len(&t.multimap(name).or_raise()?)
                    } else {
                        t.int_len(&t.int_tree(name).or_raise()?)
                    }
                    .or_raise()
                });
            }
            Err(e) => return Err(e),
        };
        let Some(t) = t else {
            return Ok(0);
        };
        match self.state()? {
            TxnState::Read(r) => r.len(&t),
            TxnState::Write(w) => w.len(&t),
            TxnState::Ended => return Err(closed()),
        }
        .or_raise()
    }

    /// The entries with `start <= key < end` (`end` included with
    /// `inclusive_end=True`; `None` is no bound), in key order or with
    /// `reverse=True` in reverse, as `(key, value)` tuples.
    #[pyo3(signature = (start=None, end=None, *, tree=None, reverse=false, inclusive_end=false))]
    fn range(
        slf: &Bound<'_, Self>,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
        tree: Option<&str>,
        reverse: bool,
        inclusive_end: bool,
    ) -> PyResult<PyRangeIter> {
        let lower = match start {
            Some(k) => RangeBound::Included(Box::from(k)),
            None => RangeBound::Unbounded,
        };
        let upper = match end {
            Some(k) if inclusive_end => RangeBound::Included(Box::from(k)),
            Some(k) => RangeBound::Excluded(Box::from(k)),
            None => RangeBound::Unbounded,
        };
        PyRangeIter::new(slf, tree, lower, upper, reverse)
    }

    /// The entries whose keys start with `prefix`, as `(key, value)`.
    #[pyo3(signature = (prefix, *, tree=None, reverse=false))]
    fn prefix(
        slf: &Bound<'_, Self>,
        prefix: &[u8],
        tree: Option<&str>,
        reverse: bool,
    ) -> PyResult<PyRangeIter> {
        let upper = match prefix_end(prefix) {
            Some(end) => RangeBound::Excluded(end.into_boxed_slice()),
            None => RangeBound::Unbounded,
        };
        PyRangeIter::new(
            slf,
            tree,
            RangeBound::Included(Box::from(prefix)),
            upper,
            reverse,
        )
    }

    /// Iterates over the default tree: `for key, value in txn`.
    fn __iter__(slf: &Bound<'_, Self>) -> PyResult<PyRangeIter> {
        PyRangeIter::new(
            slf,
            None,
            RangeBound::Unbounded,
            RangeBound::Unbounded,
            false,
        )
    }

    /// Whether `key` is in the default tree.
    fn __contains__(&self, py: Python<'_>, key: &[u8]) -> PyResult<bool> {
        Ok(!self.get(py, key, None, None)?.is_none())
    }

    /// Commits a write transaction (ends a read one).
    fn commit(&mut self, py: Python<'_>) -> PyResult<()> {
        self.end(py, true)
    }

    /// Discards the transaction's changes. Calling it again does nothing.
    fn abort(&mut self, py: Python<'_>) -> PyResult<()> {
        if matches!(self.state()?, TxnState::Ended) {
            return Ok(());
        }
        self.end(py, false)
    }

    /// Whether this is the write transaction.
    #[getter]
    fn write(&self) -> bool {
        matches!(self.state, TxnState::Write(_))
    }

    /// Whether the transaction has ended.
    #[getter]
    fn ended(&self) -> bool {
        matches!(self.state, TxnState::Ended)
    }

    /// The id of the commit this transaction reads (or will commit as).
    #[getter]
    fn txn_id(&self) -> PyResult<u64> {
        match self.state()? {
            TxnState::Read(r) => Ok(r.txn_id()),
            TxnState::Write(w) => Ok(w.txn_id()),
            TxnState::Ended => Err(closed()),
        }
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Commits if the block ended normally, aborts if it raised; the
    /// exception (if any) propagates.
    #[pyo3(signature = (exc_type, _exc=None, _tb=None))]
    fn __exit__(
        &mut self,
        py: Python<'_>,
        exc_type: Option<Bound<'_, PyAny>>,
        _exc: Option<Bound<'_, PyAny>>,
        _tb: Option<Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        if matches!(self.state()?, TxnState::Ended) {
            return Ok(false); // ended inside the block
        }
        self.end(py, exc_type.is_none())?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        match self.state() {
            Ok(TxnState::Read(r)) => format!("<ironbark.Transaction read txn={}>", r.txn_id()),
            Ok(TxnState::Write(w)) => format!("<ironbark.Transaction write txn={}>", w.txn_id()),
            Ok(TxnState::Ended) => "<ironbark.Transaction (ended)>".into(),
            Err(_) => "<ironbark.Transaction (of another thread)>".into(),
        }
    }
}

/// A savepoint of a write transaction (`Transaction.savepoint`): a token
/// that holds nothing of the transaction; `release` uses it up.
#[pyclass(module = "ironbark", name = "Savepoint")]
struct PySavepoint {
    /// `None` once released.
    sp: Option<Savepoint>,
}

#[pymethods]
impl PySavepoint {
    fn __repr__(&self) -> String {
        let state = if self.sp.is_some() { "" } else { " (released)" };
        format!("<ironbark.Savepoint{state}>")
    }
}

fn released() -> PyErr {
    InvalidSavepointError::new_err("invalid savepoint: it was released")
}

/// The source of a range iterator.
enum IterSource {
    /// Over a read snapshot: the engine's iterator, built at the first step.
    /// It borrows the snapshot (held by `txn`) and the iterator's boxed
    /// bounds, which are never changed while it exists.
    Read {
        range: Option<Box<Range<'static>>>,
        txn: Arc<ReadTxn>,
        buffers: bool,
    },
    /// Over the write transaction, which may change between steps:
    /// positioned by the last key returned.
    Write {
        txn: Py<PyTransaction>,
        last: Option<Box<[u8]>>,
    },
    Done,
}

/// An iterator of `(key, value)` tuples.
#[pyclass(module = "ironbark", name = "RangeIterator")]
struct PyRangeIter {
    // Declared first: dropped before the bounds it borrows.
    source: IterSource,
    tree: Option<Tree>,
    lower: RangeBound<Box<[u8]>>,
    upper: RangeBound<Box<[u8]>>,
    reverse: bool,
    /// The thread of its transaction: the only one that may step it.
    owner: ThreadId,
}

// SAFETY: `source` (an engine iterator borrowing a snapshot, which is not
// declared `Send`) is only used by `__next__`, which raises on any thread
// but `owner`. Dropping it elsewhere only frees memory: the iterator holds
// references and owned buffers, and the snapshot's `Arc<ReadTxn>` is
// `Send + Sync`.
unsafe impl Send for PyRangeIter {}
// SAFETY: as for `Send`: `source` is never shared with a second thread.
unsafe impl Sync for PyRangeIter {}

fn borrowed(b: &RangeBound<Box<[u8]>>) -> RangeBound<&[u8]> {
    match b {
        RangeBound::Included(k) => RangeBound::Included(k),
        RangeBound::Excluded(k) => RangeBound::Excluded(k),
        RangeBound::Unbounded => RangeBound::Unbounded,
    }
}

/// Extends a bound's borrow to `'static`.
///
/// # Safety
/// The borrowed bytes must outlive every use of the result.
unsafe fn extend(b: RangeBound<&[u8]>) -> RangeBound<&'static [u8]> {
    // SAFETY: the caller guarantees the bytes outlive every use.
    let ext = |k: &[u8]| unsafe { &*(k as *const [u8]) };
    match b {
        RangeBound::Included(k) => RangeBound::Included(ext(k)),
        RangeBound::Excluded(k) => RangeBound::Excluded(ext(k)),
        RangeBound::Unbounded => RangeBound::Unbounded,
    }
}

impl PyRangeIter {
    fn new(
        txn: &Bound<'_, PyTransaction>,
        tree: Option<&str>,
        lower: RangeBound<Box<[u8]>>,
        upper: RangeBound<Box<[u8]>>,
        reverse: bool,
    ) -> PyResult<PyRangeIter> {
        let t = txn.borrow();
        let handle = t.read_tree(tree)?;
        let source = match (t.state()?, &handle) {
            (_, None) => IterSource::Done,
            (TxnState::Read(r), Some(_)) => IterSource::Read {
                range: None,
                txn: r.clone(),
                buffers: t.buffers,
            },
            (TxnState::Write(_), Some(_)) => IterSource::Write {
                txn: txn.clone().unbind(),
                last: None,
            },
            (TxnState::Ended, _) => return Err(closed()),
        };
        Ok(PyRangeIter {
            source,
            tree: handle.map(Cow::into_owned),
            lower,
            upper,
            reverse,
            owner: t.owner,
        })
    }
}

#[pymethods]
impl PyRangeIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    #[allow(clippy::type_complexity)]
    fn __next__<'py>(
        &mut self,
        py: Python<'py>,
    ) -> PyResult<Option<(Bound<'py, PyAny>, Bound<'py, PyAny>)>> {
        if current_thread() != self.owner {
            return Err(wrong_thread());
        }
        let Some(tree) = &self.tree else {
            return Ok(None);
        };
        let item = match &mut self.source {
            IterSource::Done => return Ok(None),
            IterSource::Read {
                range,
                txn,
                buffers,
            } => {
                if range.is_none() {
                    // SAFETY: the bounds borrow boxes owned by this
                    // iterator that are never replaced, and `range` (field
                    // `source`) is dropped before them; boxed bytes do not
                    // move when the iterator does.
                    let (lower, upper) =
                        unsafe { (extend(borrowed(&self.lower)), extend(borrowed(&self.upper))) };
                    // SAFETY: the range borrows the snapshot in the
                    // `Arc<ReadTxn>` held beside it in this variant, which
                    // outlives it (dropped after `range`, field order) and
                    // does not move.
                    let snapshot: &'static ReadTxn = unsafe { &*Arc::as_ptr(txn) };
                    *range = Some(Box::new(snapshot.range(tree, (lower, upper)).or_raise()?));
                }
                let r = range.as_mut().expect("built above");
                let next = if self.reverse {
                    r.next_back()
                } else {
                    r.next()
                };
                match next.transpose().or_raise()? {
                    None => None,
                    Some((k, v)) => {
                        let src = buffers.then_some(&*txn);
                        Some((value_of(py, k, src)?, value_of(py, v, src)?))
                    }
                }
            }
            IterSource::Write { txn, last } => {
                let t = txn.bind(py).borrow();
                let TxnState::Write(w) = t.state()? else {
                    return Err(closed());
                };
                let (mut lower, mut upper) = (borrowed(&self.lower), borrowed(&self.upper));
                if let Some(k) = last.as_deref() {
                    if self.reverse {
                        upper = RangeBound::Excluded(k);
                    } else {
                        lower = RangeBound::Excluded(k);
                    }
                }
                let mut range = w.range(tree, (lower, upper)).or_raise()?;
                let next = if self.reverse {
                    range.next_back()
                } else {
                    range.next()
                };
                match next.transpose().or_raise()? {
                    None => None,
                    Some((k, v)) => {
                        let item = (
                            PyBytes::new(py, k).into_any(),
                            PyBytes::new(py, v).into_any(),
                        );
                        *last = Some(Box::from(k));
                        Some(item)
                    }
                }
            }
        };
        match item {
            Some(kv) => Ok(Some(kv)),
            None => {
                // Release the snapshot (or the transaction) at the end.
                self.source = IterSource::Done;
                Ok(None)
            }
        }
    }
}

/// Bytes inside a read snapshot, exported through the buffer protocol
/// (read-only); holds the snapshot so the bytes stay mapped.
#[pyclass(module = "ironbark", name = "_Buffer", frozen)]
struct PyBuffer {
    ptr: usize,
    len: usize,
    _snapshot: Arc<ReadTxn>,
}

#[pymethods]
impl PyBuffer {
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        if view.is_null() {
            return Err(PyBufferError::new_err("null buffer view"));
        }
        if flags & ffi::PyBUF_WRITABLE == ffi::PyBUF_WRITABLE {
            return Err(PyBufferError::new_err("ironbark values are read-only"));
        }
        let (ptr, len) = (slf.get().ptr, slf.get().len);
        // SAFETY: `view` is non-null and points to a `Py_buffer` that the
        // interpreter lets us fill. `buf` points to `len` bytes inside the
        // read snapshot that `slf` keeps alive; `obj` takes a strong
        // reference to `slf`, so the snapshot lives while the view does.
        // `shape` and `strides` point into the view itself, which CPython
        // keeps in place while it is exported.
        unsafe {
            (*view).obj = slf.into_any().into_ptr();
            (*view).buf = ptr as *mut c_void;
            (*view).len = len as isize;
            (*view).readonly = 1;
            (*view).itemsize = 1;
            (*view).format = if flags & ffi::PyBUF_FORMAT == ffi::PyBUF_FORMAT {
                CString::from(c"B").into_raw()
            } else {
                std::ptr::null_mut()
            };
            (*view).ndim = 1;
            (*view).shape = if flags & ffi::PyBUF_ND == ffi::PyBUF_ND {
                &mut (*view).len
            } else {
                std::ptr::null_mut()
            };
            (*view).strides = if flags & ffi::PyBUF_STRIDES == ffi::PyBUF_STRIDES {
                &mut (*view).itemsize
            } else {
                std::ptr::null_mut()
            };
            (*view).suboffsets = std::ptr::null_mut();
            (*view).internal = std::ptr::null_mut();
        }
        Ok(())
    }

    unsafe fn __releasebuffer__(&self, view: *mut ffi::Py_buffer) {
        // SAFETY: `view` is the buffer `__getbuffer__` filled; a non-null
        // `format` is the `CString` it leaked there, freed once here.
        unsafe {
            if !(*view).format.is_null() {
                drop(CString::from_raw((*view).format));
            }
        }
    }
}

/// The extension module.
#[pymodule]
fn _ironbark(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_function(wrap_pyfunction!(open, m)?)?;
    m.add_class::<PyDatabase>()?;
    m.add_class::<PyTransaction>()?;
    m.add_class::<PyRangeIter>()?;
    m.add_class::<PySavepoint>()?;
    m.add("DEFAULT_TREE", DEFAULT_TREE)?;
    m.add("MAX_VALUE_LEN", ironbark::MAX_VALUE_LEN)?;
    m.add("Error", py.get_type::<Error>())?;
    m.add("IoError", py.get_type::<IoError>())?;
    m.add("CorruptedError", py.get_type::<CorruptedError>())?;
    m.add(
        "NotAnIronbarkFileError",
        py.get_type::<NotAnIronbarkFileError>(),
    )?;
    m.add(
        "IncompatibleVersionError",
        py.get_type::<IncompatibleVersionError>(),
    )?;
    m.add(
        "InvalidPageSizeError",
        py.get_type::<InvalidPageSizeError>(),
    )?;
    m.add("KeyTooLargeError", py.get_type::<KeyTooLargeError>())?;
    m.add("KeyOutOfOrderError", py.get_type::<KeyOutOfOrderError>())?;
    m.add("ValueTooLargeError", py.get_type::<ValueTooLargeError>())?;
    m.add(
        "InvalidTreeNameError",
        py.get_type::<InvalidTreeNameError>(),
    )?;
    m.add("NoSuchTreeError", py.get_type::<NoSuchTreeError>())?;
    m.add("TreeDroppedError", py.get_type::<TreeDroppedError>())?;
    m.add("ReadersFullError", py.get_type::<ReadersFullError>())?;
    m.add("BusyError", py.get_type::<BusyError>())?;
    m.add("LockedError", py.get_type::<LockedError>())?;
    m.add("ReadOnlyError", py.get_type::<ReadOnlyError>())?;
    m.add("PoisonedError", py.get_type::<PoisonedError>())?;
    m.add("InvalidOptionError", py.get_type::<InvalidOptionError>())?;
    m.add("TxnFailedError", py.get_type::<TxnFailedError>())?;
    m.add("StaleTreeError", py.get_type::<StaleTreeError>())?;
    m.add("ForeignTreeError", py.get_type::<ForeignTreeError>())?;
    m.add("LocklessReaderError", py.get_type::<LocklessReaderError>())?;
    m.add(
        "WriteTxnOnThisThreadError",
        py.get_type::<WriteTxnOnThisThreadError>(),
    )?;
    m.add("WrongTreeKindError", py.get_type::<WrongTreeKindError>())?;
    m.add("PairTooLargeError", py.get_type::<PairTooLargeError>())?;
    m.add("IntegerKeySizeError", py.get_type::<IntegerKeySizeError>())?;
    m.add(
        "InvalidSavepointError",
        py.get_type::<InvalidSavepointError>(),
    )?;
    m.add("ArenaFullError", py.get_type::<ArenaFullError>())?;
    m.add("ClosedError", py.get_type::<ClosedError>())?;
    Ok(())
}
