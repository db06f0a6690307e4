//! # ironbark
//!
//! An embedded, transactional, ordered key-value store: a copy-on-write
//! B+tree in one file, read through a read-only memory map (lock-free,
//! zero-copy reads that scale with threads), written with positioned writes
//! and committed with a single `fdatasync`.
//!
//! ```
//! # fn main() -> ironbark::Result<()> {
//! # let dir = tempfile::tempdir().unwrap();
//! # let path = dir.path().join("data.ib");
//! let db = ironbark::Database::open(&path)?;       // created if missing
//! let mut tx = db.begin_write()?;                   // one writer at a time
//! let users = tx.open_tree("users")?;               // created on first open
//! tx.put(&users, b"alice", b"{\"age\": 30}")?;
//! tx.put(&users, b"bob", b"{\"age\": 25}")?;
//! tx.delete(&users, b"bob")?;
//! tx.commit()?;                                     // durable when it returns
//!
//! let rx = db.begin_read()?;                        // a snapshot; never waits
//! assert_eq!(rx.get(&users, b"alice")?, Some(&b"{\"age\": 30}"[..]));
//! for entry in rx.range(&users, b"a"..b"m")? {
//!     let (key, value) = entry?;                    // borrowed from the map
//!     assert_eq!(key, b"alice");
//!     assert!(!value.is_empty());
//! }
//! # Ok(())
//! # }
//! ```
//!
//! See `docs/design.md` for the architecture and the crash-safety argument,
//! and `docs/file-format.md` for the byte layout.
//!
//! # Platform
//!
//! Linux only (kernel 3.15 or later), on any architecture Rust supports
//! there: the crate is built and tested on Linux alone, and on other
//! systems it does not build (a compile error says so). What it relies on:
//!
//! - `fdatasync` (through `File::sync_data`) to make a commit durable, and
//!   `sync_file_range` to start writeback early under
//!   [`Durability::None`], so that the sync it defers finds its work mostly
//!   done;
//! - open-file-description locks (`F_OFD_SETLK`, `F_OFD_GETLK`), which
//!   belong to an open file rather than a process, for telling live
//!   processes from dead ones, and a futex on the lock file's shared
//!   mapping for waiting for the write lock;
//! - a shared, writable mapping of the redo log, through which commits
//!   append their records;
//! - `/proc/<pid>/stat` to find the reader slots of dead processes (a pid
//!   and its start time, so a recycled pid is not mistaken for the reader);
//! - `O_TMPFILE` with `linkat` (where the filesystem has it) to make a new
//!   file appear whole under its name, and `MAP_NORESERVE` for the arena of
//!   logged commits.
//!
//! # The API at a glance
//!
//! Both kinds of transaction read the same way: [`ReadTxn::get`],
//! [`ReadTxn::contains_key`], [`ReadTxn::first`] and [`ReadTxn::last`], the
//! nearest-key lookups [`ReadTxn::get_ge`], [`ReadTxn::get_gt`],
//! [`ReadTxn::get_le`] and [`ReadTxn::get_lt`], and the iterators
//! [`ReadTxn::range`], [`ReadTxn::prefix`] and [`ReadTxn::iter`] (all on
//! [`WriteTxn`] too, seeing its own uncommitted changes). Range bounds may
//! be keys of any byte-slice-like type (`b"a"..b"m"`, `start_vec..`, a
//! pair of `Bound`s: [`KeyRange`]). The entries of a lookup, a range or a
//! prefix scan borrow the transaction, not the keys passed in. [`WriteTxn`] adds
//! [`WriteTxn::put`], [`WriteTxn::append`] (for sorted loads: keys in
//! ascending order, full pages, no search per key),
//! [`WriteTxn::put_reserve`] (the value written in place),
//! [`WriteTxn::insert`] (returning the old value),
//! [`WriteTxn::get_or_insert`], [`WriteTxn::delete`],
//! [`WriteTxn::pop_first`], [`WriteTxn::pop_last`], a cursor that deletes
//! or replaces the entry it is on ([`WriteTxn::cursor_mut`]), and the bulk
//! removals
//! [`WriteTxn::clear`] (one visit per page, the tree and its handles
//! staying), [`WriteTxn::delete_range`] and [`WriteTxn::retain`].
//! Savepoints roll back part of a write transaction:
//! [`WriteTxn::savepoint`] returns a [`Savepoint`], [`WriteTxn::rollback_to`]
//! undoes what came after it (nested savepoints: a stack, as SQL's), and
//! [`WriteTxn::release`] forgets it. A
//! [`Tree`] handle is `Hash + Ord`, so it can key a map.
//!
//! Large values stream: [`WriteTxn::put_writer`] returns a
//! [`ValueWriter`] (`io::Write`) that writes a value of known length in
//! pieces straight into its pages (N bytes of memory for a value of N,
//! never twice that), and [`ReadTxn::get_reader`] (on [`WriteTxn`] too) a
//! [`ValueReader`] (`io::Read + Seek + BufRead`) over the value where it
//! lies in the map, touching only the pages read.
//!
//! For typed keys and values, [`typed::TypedTree`] wraps a tree handle
//! with two codecs (integers, strings, byte strings, fixed-width tuples;
//! any serde type as a value with the `serde` feature): the same calls,
//! taking and returning Rust values, in the keys' own order (every key
//! codec encodes order-preservingly).
//!
//! Besides plain trees there are two other kinds ([`TreeKind`]), each with
//! a handle of its own type: a [`Multimap`] keeps a sorted set of values
//! per key (LMDB's `MDB_DUPSORT`: [`WriteTxn::open_multimap`],
//! [`WriteTxn::put_dup`], [`ReadTxn::get_dups`], [`ReadTxn::multimap_range`]),
//! and an [`IntTree`] has unsigned integer keys in numeric order (LMDB's
//! `MDB_INTEGERKEY`: [`WriteTxn::open_int_tree`], [`WriteTxn::put_int`],
//! [`ReadTxn::int_range`]).

#![warn(missing_docs)]

#[cfg(not(target_os = "linux"))]
compile_error!(
    "ironbark supports Linux only: it relies on open-file-description locks \
     (F_OFD_SETLK) and /proc to share a database between processes"
);

mod bounds;
mod btree;
mod catalog;
mod check;
mod checksum;
mod compact;
mod db;
mod error;
mod intkey;
mod kind;
mod multimap;
mod options;
mod pages;
mod state;
mod stats;
mod storage;
mod sync;
mod txn;
pub mod typed;

pub use bounds::KeyRange;
pub use btree::cursor::Range;
pub use check::CheckReport;
pub use compact::Compacted;
pub use db::Database;
pub use error::{Error, Result};
pub use intkey::{IntRange, IntTree};
pub use kind::{IntWidth, TreeKind};
pub use multimap::{Dups, Multimap, Pair, Pairs};
#[doc(hidden)]
pub use options::BrokenProtocol;
pub use options::{
    Durability, Options, DEFAULT_MAP_RESERVATION, DEFAULT_MAX_DIRTY_BYTES, MAX_READERS_LIMIT,
};
pub use stats::{CommitCounters, ReaderInfo, Stats, TreeStats};
#[doc(hidden)]
pub use storage::file::{IoHook, IoHookHandle};
pub use txn::cursor_mut::CursorMut;
pub use txn::read::ReadTxn;
pub use txn::savepoint_stack::Savepoint;
pub use txn::stream::{ValueReader, ValueWriter};
pub use txn::write::WriteTxn;
pub use txn::Tree;

/// The largest value, in bytes: 1 GiB. Larger values are refused with
/// [`Error::ValueTooLarge`] before anything is written.
pub const MAX_VALUE_LEN: usize = 1 << 30;

/// The longest tree name, in bytes.
pub const MAX_TREE_NAME_LEN: usize = 255;

#[doc(hidden)]
pub use crate::btree::page::write_plain_branches_for_tests;
