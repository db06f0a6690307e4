//! The one error type of the engine.
//!
//! Invariant: every failure a caller can cause (bad input, limits) or meet
//! (I/O, a damaged or foreign file) is an [`Error`] value; the engine panics
//! only on a broken internal invariant, which is a bug.

use std::fmt;
use std::io;

/// What went wrong. `#[non_exhaustive]`: new kinds may be added.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The operating system reported an I/O error.
    Io(io::Error),
    /// The file holds bytes that fail a check: a checksum, a bound, a
    /// structural rule. `page` names the page when one is to blame.
    Corrupted {
        /// The page number where the damage was found, if any.
        page: Option<u64>,
        /// What check failed.
        detail: String,
    },
    /// The file does not start with ironbark's magic bytes.
    NotAnIronbarkFile,
    /// The file was written by an incompatible format version.
    IncompatibleVersion {
        /// The version found in the file.
        found: u32,
        /// The version this build reads and writes.
        supported: u32,
    },
    /// The page size is not supported (asked for in `Options`, or found in
    /// the file).
    InvalidPageSize(u64),
    /// A key is longer than [`crate::Database::max_key_len`].
    KeyTooLarge {
        /// The length of the key given.
        len: usize,
        /// The largest key allowed.
        max: usize,
    },
    /// A value is longer than [`crate::MAX_VALUE_LEN`].
    ValueTooLarge {
        /// The length of the value given.
        len: usize,
        /// The largest value allowed.
        max: usize,
    },
    /// [`crate::WriteTxn::append`] was given a key that is not greater
    /// than the last key of the tree (named here). Nothing was changed.
    KeyOutOfOrder(String),
    /// A tree name is empty or longer than [`crate::MAX_TREE_NAME_LEN`].
    InvalidTreeName(String),
    /// No tree of that name exists in this snapshot.
    NoSuchTree(String),
    /// A tree handle was used after its tree was dropped in this transaction.
    TreeDropped(String),
    /// A tree handle was used after its tree was dropped in an earlier
    /// transaction (a tree of the same name may have been created since:
    /// it is another tree, so get a new handle).
    StaleTree(String),
    /// A tree handle was used with another database than the one it came
    /// from.
    ForeignTree(String),
    /// All reader slots are taken (see `Options::max_readers`).
    ReadersFull {
        /// The configured limit.
        max: usize,
    },
    /// A process that does not write (a read-only handle, or any handle
    /// while another process writes) could not rebuild the newest logged
    /// commits in its page arena: those commits, with the older versions
    /// its open read transactions hold, take more than the arena's
    /// `pages` (a quarter of `Options::map_reservation`, within a quarter
    /// of memory). The database is not damaged: ending old read
    /// transactions, or the writer's next checkpoint, makes room.
    ArenaFull {
        /// The arena's bound, in pages.
        pages: u64,
    },
    /// `try_begin_write` (or `begin_write_timeout`, when its time ran out)
    /// found another write transaction of this process in progress.
    Busy,
    /// `try_begin_write` (or `begin_write_timeout`) found another process's
    /// write transaction in progress. Also returned by a read-only open
    /// that cannot use the lock file (`Options::read_only`) while another
    /// process writes the database, or while its log holds commits only a
    /// writer can replay.
    Locked,
    /// `try_begin_write` (or `begin_write_timeout`) found no writer, but a
    /// read-only process that reads without the lock file (it could not
    /// open it for writing): such a reader keeps every writer out until it
    /// closes the database (see `Options::read_only`).
    LocklessReader,
    /// The calling thread already holds the write transaction (or is inside
    /// a call that holds the write lock), so waiting for the write lock
    /// would never end: commit or drop the transaction first. Returned by
    /// every call that would wait for the write lock (`begin_write`,
    /// `begin_write_timeout`, `sync`, `clear_stale_readers`, and `stats`,
    /// `check`, `check_report`, `readers` when every reader slot is taken).
    WriteTxnOnThisThread,
    /// This handle was opened read-only (`Options::read_only`).
    ReadOnly,
    /// An earlier fsync failed; the instance refuses writes until reopened,
    /// since the kernel may have dropped the unsynced pages.
    Poisoned,
    /// An option is out of its range.
    InvalidOption(String),
    /// A typed tree's codec ([`crate::typed`]) cannot decode the bytes it
    /// read (of another type, or written by another program), or cannot
    /// encode a value (a serde type whose serialization fails).
    Codec {
        /// The codec, as its type is named (`u64`, `str`, ...).
        codec: &'static str,
        /// What does not fit.
        detail: String,
    },
    /// An operation of this write transaction failed part-way (for example
    /// on a corrupted page), so the transaction refuses every later
    /// operation and its commit: drop it and begin another.
    TxnFailed(String),
    /// A [`crate::Savepoint`] that cannot be used with this transaction:
    /// taken by another one, released, or discarded by a rollback to an
    /// outer savepoint. Nothing was changed.
    InvalidSavepoint(String),
    /// A tree was opened as another kind than it was created as (a
    /// multimap as a plain tree, an integer-key tree of 4-byte keys as
    /// one of 8-byte keys...): see [`crate::TreeKind`].
    WrongTreeKind {
        /// The tree's name.
        name: String,
        /// The kind asked for.
        expected: crate::TreeKind,
        /// The kind the tree was created as.
        found: crate::TreeKind,
    },
    /// A (key, value) pair of a multimap is stored as one key of the tree,
    /// and this pair's encoding (the key with each zero byte doubled, two
    /// bytes of separator, the value) is longer than
    /// [`crate::Database::max_key_len`]. Nothing was changed.
    PairTooLarge {
        /// The length of the encoded pair.
        len: usize,
        /// The largest key allowed.
        max: usize,
    },
    /// A key of an integer-key tree does not fit the tree's width (a
    /// number above `u32::MAX` for 4-byte keys, or a byte key of another
    /// length than the width). Nothing was changed.
    IntegerKeySize {
        /// The tree's name.
        name: String,
        /// The width of the tree's keys, in bytes.
        width: usize,
        /// What was given: a length in bytes, or the number that does not fit.
        detail: String,
    },
}

/// `Result` with the engine's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An I/O error opening or creating `path` (`what`: "data file", "lock
    /// file"), with the path in the message, and on a permission error a
    /// hint at what helps. Keeps the error's kind.
    pub(crate) fn file(path: &std::path::Path, what: &str, e: io::Error) -> Error {
        let hint = match (e.kind(), what) {
            (io::ErrorKind::PermissionDenied, "lock file") => {
                "; every process that writes the database must be able to write its lock \
                 file, and a process that only reads can open it with Options::read_only"
            }
            (io::ErrorKind::PermissionDenied, _) => {
                "; to read a database this process may not write, open it with \
                 Options::read_only"
            }
            _ => "",
        };
        Error::Io(io::Error::new(
            e.kind(),
            format!("{what} {}: {e}{hint}", path.display()),
        ))
    }

    /// A corruption error that names a page.
    pub(crate) fn corrupted_page(page: u64, detail: impl Into<String>) -> Error {
        Error::Corrupted {
            page: Some(page),
            detail: detail.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io(e) => write!(f, "I/O error: {e}"),
            Error::Corrupted {
                page: Some(p),
                detail,
            } => write!(f, "database corrupted at page {p}: {detail}"),
            Error::Corrupted { page: None, detail } => write!(f, "database corrupted: {detail}"),
            Error::NotAnIronbarkFile => write!(f, "not an ironbark database file"),
            Error::IncompatibleVersion { found, supported } => write!(
                f,
                "incompatible file format version {found} (this build supports {supported})"
            ),
            Error::InvalidPageSize(s) => write!(
                f,
                "unsupported page size {s} (a power of two from 1024 to 65536)"
            ),
            Error::KeyTooLarge { len, max } => {
                write!(f, "key of {len} bytes is larger than the limit of {max}")
            }
            Error::ValueTooLarge { len, max } => {
                write!(f, "value of {len} bytes is larger than the limit of {max}")
            }
            Error::KeyOutOfOrder(n) => write!(
                f,
                "key out of order: an append to tree {n:?} must be greater than the \
                 tree's last key"
            ),
            Error::InvalidTreeName(n) => write!(
                f,
                "invalid tree name {n:?} (1 to {} bytes)",
                crate::MAX_TREE_NAME_LEN
            ),
            Error::NoSuchTree(n) => write!(f, "no tree named {n:?}"),
            Error::TreeDropped(n) => write!(f, "tree {n:?} was dropped in this transaction"),
            Error::StaleTree(n) => write!(
                f,
                "the handle to tree {n:?} is stale: that tree was dropped in an earlier \
                 transaction (a tree of that name now is another tree: get a new handle)"
            ),
            Error::ForeignTree(n) => {
                write!(f, "the handle to tree {n:?} belongs to another database")
            }
            Error::ReadersFull { max } => {
                write!(
                    f,
                    "all {max} reader slots are in use (Options::max_readers)"
                )
            }
            Error::ArenaFull { pages } => write!(
                f,
                "the newest commits do not fit in this process's page arena \
                 ({pages} pages): end old read transactions, or let the \
                 writer checkpoint"
            ),
            Error::Busy => write!(f, "another write transaction is in progress"),
            Error::Locked => write!(
                f,
                "another process is writing to the database (its write lock is held)"
            ),
            Error::LocklessReader => write!(
                f,
                "a read-only process without the lock file is reading; \
                 writers wait until it closes"
            ),
            Error::WriteTxnOnThisThread => write!(
                f,
                "this thread already holds the write transaction; waiting for the \
                 write lock would never end (commit or drop the transaction first)"
            ),
            Error::ReadOnly => write!(f, "the database is open read-only"),
            Error::Poisoned => write!(
                f,
                "an earlier sync failed; reopen the database before writing again"
            ),
            Error::InvalidOption(s) => write!(f, "invalid option: {s}"),
            Error::Codec { codec, detail } => write!(f, "{codec} codec: {detail}"),
            Error::TxnFailed(s) => write!(
                f,
                "the write transaction cannot commit: an operation failed part-way ({s})"
            ),
            Error::InvalidSavepoint(s) => write!(f, "invalid savepoint: {s}"),
            Error::WrongTreeKind {
                name,
                expected,
                found,
            } => write!(
                f,
                "tree {name:?} is a {found}, not a {expected}: open it with the API of its kind"
            ),
            Error::PairTooLarge { len, max } => write!(
                f,
                "multimap pair encodes to {len} bytes, larger than the key limit of {max}                  (the key, with its zero bytes doubled, plus 2, plus the value)"
            ),
            Error::IntegerKeySize {
                name,
                width,
                detail,
            } => write!(
                f,
                "tree {name:?} has {width}-byte integer keys: {detail} does not fit"
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Error {
        Error::Io(e)
    }
}
