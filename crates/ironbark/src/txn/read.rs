//! Read transactions: a registered snapshot. Lookups and cursors borrow the
//! memory map for the life of the transaction: zero-copy, no allocation, no
//! lock, no system call (a prefix scan copies its prefix, once, so that
//! its entries borrow only the transaction).
//!
//! Two kinds of reads: fast ones (`get` and the other lookups, `range`,
//! `prefix`, `iter`), which check the structure of every page they read
//! but not its checksum, and verified ones for bulk readers
//! (`range_verified`, `iter_verified`, `copy_to_verified`, `compact_to`),
//! which check every page's checksum against its parent's record before
//! trusting it, so that a copy or a dump never carries damage on as if it
//! were data.

use std::sync::Arc;

use crate::bounds::KeyRange;
use crate::btree::cursor::{count_between, edge, nearest, Nearest, Range};
use crate::btree::search::{self, Root};
use crate::catalog::TreeEntry;
use crate::check::verify_trees;
use crate::error::{Error, Result};
use crate::state;
use crate::storage::file::DataFile;
use crate::storage::meta::{Meta, META_LEN, META_SLOTS};
use crate::txn::reader_stripes::{SnapshotRef, Stripe};
use crate::txn::recovery::{is_rebuilt, stale};
use crate::txn::shared::{Shared, Snapshot};
use crate::txn::Tree;

/// Tries to register a snapshot before giving up: each failed try means a
/// commit was published meanwhile, or this process's writer is between
/// lending a commit and showing it (tries that then yield), or the lock
/// file is damaged, so this is only reached if the lock file is broken.
const MAX_REGISTER_ATTEMPTS: u32 = 1 << 20;

/// How many times in a row a read-only process's rebuild may find no
/// durable commit to build the newest logged commit on
/// (`recovery::follow_log` returning `None`: a checkpoint moved on, look
/// again) while no other process has the database open, before it gives
/// up. With no writer, nothing will move: the log begins past what the
/// durable commit can be followed by (its newer meta or state damaged or
/// lost), and looking again would spin until `MAX_REGISTER_ATTEMPTS`
/// (minutes of log scans; found in session 61 by damaged crash images).
/// While another process has it open, its writer may be in a checkpoint
/// whose sync is slow, and the rebuild looks again for as long as that.
const REBUILD_LOOKS_ALONE: u32 = 8;

#[cfg(test)]
thread_local! {
    /// Read transactions of this thread that began past the lent snapshot
    /// (for tests).
    static SLOW_PATHS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// A consistent, read-only view of one commit. `Send`: it may move to
/// another thread. Dropping it frees its reader slot.
pub struct ReadTxn {
    /// Its thread's stripe, which holds the instance
    /// (`txn::reader_stripes`: no count that other threads write).
    stripe: Arc<Stripe>,
    snapshot: SnapshotRef,
    slot: usize,
}

impl std::fmt::Debug for ReadTxn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadTxn")
            .field("txn", &self.snapshot.txn())
            .finish()
    }
}

impl ReadTxn {
    pub(crate) fn begin(stripe: &Arc<Stripe>) -> Result<ReadTxn> {
        let shared = &stripe.shared;
        let slot = match shared.readers.claim() {
            Err(Error::ReadersFull { .. }) => {
                // Slots of dead processes may be filling the table.
                if let Ok(mut w) = shared.lock_writer(false) {
                    shared.clear_stale(&mut w, true);
                }
                shared.readers.claim()?
            }
            other => other?,
        };
        let mut attempts = 0u32;
        let mut rebuild_looks_alone = 0u32;
        let snapshot = loop {
            attempts += 1;
            if attempts > MAX_REGISTER_ATTEMPTS {
                shared.readers.release(slot);
                return Err(Error::Corrupted {
                    page: None,
                    detail: "the lock file's newest commit cannot be read (damaged lock file?)"
                        .into(),
                });
            }
            // The common case in a process that writes: its writer lends
            // the newest commit's snapshot; taken without writing anything
            // but the reader slot.
            match shared.lender.borrow_newest(&shared.readers, slot) {
                Some(lent) if protector(shared, &lent) == lent.txn() => {
                    break SnapshotRef::Borrowed(lent);
                }
                // A rebuild on a checkpoint step, whose slot must show the
                // step's txn: a borrowed snapshot is valid only while the
                // slot shows its own (`txn::snapshot_lender`), so it is
                // taken by count below instead.
                Some(_) => {}
                None => {
                    // This process's writer lends the newest commit or a
                    // newer one it has not yet shown in the reader table:
                    // the borrow lost a race with a publish, so it is tried
                    // again rather than the slow path taken. The slow
                    // path's `arc_swap` loads would give this thread a debt
                    // node that every later publish pays for (`Debt::
                    // pay_all` tries each slot of every thread's node with
                    // a locked instruction): with 64 threads that had
                    // taken it, single-put commits ran at 0.21-0.62x their
                    // rate (`examples/commit_vs_reader_threads.rs`). A writer preempted mid-publish is waited for
                    // by yielding, so that the attempts last. The table
                    // is read first: the writer lends before it updates the
                    // table, so a lent txn read after it is at least the
                    // table's then, unless another process committed.
                    let shown = shared.readers.published_txn();
                    let lent = shared.lender.newest_txn();
                    if lent != 0 && lent >= shown {
                        if attempts.is_multiple_of(64) {
                            std::thread::yield_now();
                        } else {
                            std::hint::spin_loop();
                        }
                        continue;
                    }
                }
            }
            #[cfg(test)]
            SLOW_PATHS.with(|n| n.set(n.get() + 1));
            // Else the stripe may cache this process's newest snapshot,
            // taken without writing a reference count that other threads
            // write.
            let epoch = shared.published_epoch();
            if let Some(cached) = stripe.cached(epoch) {
                let txn = cached.txn();
                if txn == shared.readers.published_txn() && !stale(shared, cached.snapshot()) {
                    if register(shared, slot, cached.snapshot(), txn) {
                        break SnapshotRef::Cached(cached);
                    }
                    continue;
                }
            }
            let cached = shared.published.load_full();
            let txn = shared.readers.published_txn();
            let meta = if cached.txn() == txn && !stale(shared, &cached) {
                None
            } else if cached.txn() > txn {
                // This process's writer is between caching and publishing.
                std::hint::spin_loop();
                continue;
            } else {
                // Another process committed: its meta from the lock file.
                // A torn copy means a newer commit is being published.
                match shared.readers.lock_file().and_then(|l| l.load_meta(txn)) {
                    Some(meta) => Some(meta),
                    None if shared.foreign_logged() => {
                        // A logged commit: its pages live in another
                        // process's arena (or a crashed one's), its record
                        // in the redo log (`Options::logged_commits`).
                        if !shared.read_only {
                            // A process that may write replays them when it
                            // takes the write lock (at its open).
                            shared.readers.release(slot);
                            return Err(Error::Locked);
                        }
                        // A read-only one rebuilds the commit from the log
                        // in its own memory, registered at the durable
                        // commit it builds on, so that its pages stay
                        // (`recovery::follow_log` registers the slot).
                        match crate::txn::recovery::follow_log(shared, txn, slot) {
                            Ok(Some(s)) if register(shared, slot, &s, txn) => {
                                break SnapshotRef::Own(s)
                            }
                            Ok(Some(_)) => continue,
                            // A checkpoint moved on: look again, while
                            // anything can move (`REBUILD_LOOKS_ALONE`).
                            Ok(None) => {
                                let alone =
                                    shared.readers.lock_file().is_some_and(|l| !l.others_open());
                                rebuild_looks_alone =
                                    if alone { rebuild_looks_alone + 1 } else { 0 };
                                if rebuild_looks_alone > REBUILD_LOOKS_ALONE {
                                    shared.readers.release(slot);
                                    return Err(Error::Corrupted {
                                        page: None,
                                        detail: format!(
                                            "commit {txn} cannot be rebuilt from the redo log: \
                                             no durable commit it follows can be read, and no \
                                             other process has the database open (the log \
                                             begins past the durable commit's; a newer meta \
                                             or its state is damaged or lost)"
                                        ),
                                    });
                                }
                                continue;
                            }
                            Err(e) => {
                                shared.readers.release(slot);
                                return Err(e);
                            }
                        }
                    }
                    None => continue,
                }
            };
            let registered = match meta {
                None => register(shared, slot, &cached, txn),
                Some(_) => shared.readers.try_register(slot, txn),
            };
            if !registered {
                continue;
            }
            // The snapshot's pages are protected from here on.
            match meta {
                None => {
                    if shared.published_epoch() == epoch {
                        stripe.took(&cached, epoch);
                    }
                    break SnapshotRef::Own(cached);
                }
                Some(meta) => match shared.install_snapshot(meta) {
                    Ok(s) => break SnapshotRef::Own(s),
                    Err(e) => {
                        shared.readers.release(slot);
                        return Err(e);
                    }
                },
            }
        };
        Ok(ReadTxn {
            stripe: stripe.clone(),
            snapshot,
            slot,
        })
    }

    /// The instance this transaction reads.
    #[inline]
    pub(crate) fn shared(&self) -> &Shared {
        &self.stripe.shared
    }

    pub(crate) fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// Whether the snapshot is lent by this process's writer (the fast
    /// path of `begin`).
    #[cfg(test)]
    pub(crate) fn borrows_its_snapshot(&self) -> bool {
        matches!(self.snapshot, SnapshotRef::Borrowed(_))
    }

    /// The reader-table slot this transaction holds.
    pub(crate) fn slot(&self) -> usize {
        self.slot
    }

    /// The txn id of the commit this transaction sees.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let before = db.begin_read()?.txn_id();
    /// let mut tx = db.begin_write()?;
    /// tx.open_tree("t")?;
    /// tx.commit()?;
    /// assert_eq!(db.begin_read()?.txn_id(), before + 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn txn_id(&self) -> u64 {
        self.snapshot.txn()
    }

    fn entry(&self, tree: &Tree) -> Result<&TreeEntry> {
        let catalog = &self.snapshot.catalog;
        let db = self.shared().db_id;
        tree.entry_in(catalog, db)
            .ok_or_else(|| tree.unresolved(db, catalog, None))
    }

    fn root(&self, tree: &Tree) -> Result<Root> {
        Ok(self.entry(tree)?.state.root)
    }

    /// A handle to the tree `name`, or `NoSuchTree`.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// # let mut tx = db.begin_write()?;
    /// # let t = tx.open_tree("users")?;
    /// # tx.put(&t, b"alice", b"1")?;
    /// # tx.commit()?;
    /// let rx = db.begin_read()?;
    /// let users = rx.tree("users")?;
    /// assert_eq!(rx.get(&users, b"alice")?, Some(&b"1"[..]));
    /// assert!(matches!(rx.tree("nope"), Err(ironbark::Error::NoSuchTree(_))));
    /// # Ok(())
    /// # }
    /// ```
    pub fn tree(&self, name: &str) -> Result<Tree> {
        Tree::find(&self.snapshot.catalog, name, self.shared().db_id)
    }

    /// The names of all trees, in order.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// tx.open_tree("b")?;
    /// tx.open_tree("a")?;
    /// tx.commit()?;
    /// assert_eq!(db.begin_read()?.list_trees(), ["a", "b"]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn list_trees(&self) -> Vec<String> {
        self.snapshot.catalog.names()
    }

    /// The number of entries in `tree`.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// # let mut tx = db.begin_write()?;
    /// # let t = tx.open_tree("t")?;
    /// # tx.put(&t, b"a", b"1")?;
    /// # tx.put(&t, b"b", b"2")?;
    /// # tx.put(&t, b"c", b"3")?;
    /// # tx.commit()?;
    /// let rx = db.begin_read()?;
    /// assert_eq!(rx.len(&t)?, 3);
    /// # Ok(())
    /// # }
    /// ```
    pub fn len(&self, tree: &Tree) -> Result<u64> {
        Ok(self.entry(tree)?.state.entries)
    }

    /// The number of entries of `tree` with keys from `lower` (included)
    /// to `upper` (excluded), counted from the leaves' entry counts (see
    /// `btree::cursor::count_between`): O(leaf pages), no value read.
    pub(crate) fn count_between(&self, tree: &Tree, lower: &[u8], upper: &[u8]) -> Result<u64> {
        count_between(&self.snapshot.source, self.root(tree)?, lower, upper)
    }

    /// Whether `tree` has no entries.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let empty = tx.open_tree("empty")?;
    /// let full = tx.open_tree("full")?;
    /// tx.put(&full, b"k", b"v")?;
    /// tx.commit()?;
    /// let rx = db.begin_read()?;
    /// assert!(rx.is_empty(&empty)?);
    /// assert!(!rx.is_empty(&full)?);
    /// # Ok(())
    /// # }
    /// ```
    pub fn is_empty(&self, tree: &Tree) -> Result<bool> {
        Ok(self.len(tree)? == 0)
    }

    /// The value stored under `key`, borrowed from the map.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// # let mut tx = db.begin_write()?;
    /// # let t = tx.open_tree("users")?;
    /// # tx.put(&t, b"alice", b"1")?;
    /// # tx.commit()?;
    /// let rx = db.begin_read()?;
    /// assert_eq!(rx.get(&t, b"alice")?, Some(&b"1"[..]));
    /// assert_eq!(rx.get(&t, b"bob")?, None);
    /// # Ok(())
    /// # }
    /// ```
    #[inline]
    pub fn get(&self, tree: &Tree, key: &[u8]) -> Result<Option<&[u8]>> {
        let root = self.root(tree)?;
        search::get(&self.snapshot.source, root, key)
    }

    /// The entries with keys in `range`, in key order (`.rev()` for
    /// reverse). The bounds may be of any byte-slice-like type
    /// ([`KeyRange`]); they are copied, so the entries borrow the
    /// transaction, not the bounds.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// # let mut tx = db.begin_write()?;
    /// # let t = tx.open_tree("t")?;
    /// # for k in [b"a", b"b", b"c"] { tx.put(&t, k, b"v")?; }
    /// # tx.commit()?;
    /// let rx = db.begin_read()?;
    /// let from = b"b".to_vec();
    /// let range = rx.range(&t, from..)?; // the Vec moves in, the entries outlive it
    /// let keys: Vec<&[u8]> = range.map(|e| e.map(|(k, _)| k)).collect::<ironbark::Result<_>>()?;
    /// assert_eq!(keys, [&b"b"[..], &b"c"[..]]);
    /// assert_eq!(rx.range(&t, b"a"..=b"b")?.rev().count(), 2);
    /// # Ok(())
    /// # }
    /// ```
    #[inline]
    pub fn range<R: KeyRange>(&self, tree: &Tree, range: R) -> Result<Range<'_>> {
        let root = self.root(tree)?;
        let (lower, upper) = range.key_bounds();
        Ok(Range::new(&self.snapshot.source, root, lower, upper))
    }

    /// All entries of `tree`, in key order.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// # let mut tx = db.begin_write()?;
    /// # let t = tx.open_tree("t")?;
    /// # tx.put(&t, b"b", b"2")?;
    /// # tx.put(&t, b"a", b"1")?;
    /// # tx.commit()?;
    /// let rx = db.begin_read()?;
    /// let entries: Vec<(&[u8], &[u8])> = rx.iter(&t)?.collect::<ironbark::Result<_>>()?;
    /// assert_eq!(entries, [(&b"a"[..], &b"1"[..]), (&b"b"[..], &b"2"[..])]);
    /// assert_eq!(rx.iter(&t)?.rev().next().transpose()?, Some((&b"b"[..], &b"2"[..])));
    /// # Ok(())
    /// # }
    /// ```
    pub fn iter(&self, tree: &Tree) -> Result<Range<'_>> {
        self.range(tree, ..)
    }

    /// The entry with the smallest key, or `None` if `tree` is empty.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// # let mut tx = db.begin_write()?;
    /// # let t = tx.open_tree("t")?;
    /// # for (k, v) in [(&b"a"[..], &b"1"[..]), (b"c", b"3"), (b"e", b"5")] { tx.put(&t, k, v)?; }
    /// # tx.commit()?;
    /// let rx = db.begin_read()?;
    /// let t = rx.tree("t")?; // holds a: 1, c: 3, e: 5
    /// assert_eq!(rx.first(&t)?, Some((&b"a"[..], &b"1"[..])));
    /// # Ok(())
    /// # }
    /// ```
    pub fn first(&self, tree: &Tree) -> Result<Option<(&[u8], &[u8])>> {
        edge(&self.snapshot.source, self.root(tree)?, false)
    }

    /// The entry with the largest key, or `None` if `tree` is empty.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// # let mut tx = db.begin_write()?;
    /// # let t = tx.open_tree("t")?;
    /// # for (k, v) in [(&b"a"[..], &b"1"[..]), (b"c", b"3"), (b"e", b"5")] { tx.put(&t, k, v)?; }
    /// # tx.commit()?;
    /// let rx = db.begin_read()?;
    /// let t = rx.tree("t")?; // holds a: 1, c: 3, e: 5
    /// assert_eq!(rx.last(&t)?, Some((&b"e"[..], &b"5"[..])));
    /// # Ok(())
    /// # }
    /// ```
    pub fn last(&self, tree: &Tree) -> Result<Option<(&[u8], &[u8])>> {
        edge(&self.snapshot.source, self.root(tree)?, true)
    }

    /// The entry with the smallest key `>= key`.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// # let mut tx = db.begin_write()?;
    /// # let t = tx.open_tree("t")?;
    /// # for (k, v) in [(&b"a"[..], &b"1"[..]), (b"c", b"3"), (b"e", b"5")] { tx.put(&t, k, v)?; }
    /// # tx.commit()?;
    /// let rx = db.begin_read()?;
    /// let t = rx.tree("t")?; // holds a: 1, c: 3, e: 5
    /// assert_eq!(rx.get_ge(&t, b"c")?, Some((&b"c"[..], &b"3"[..])));
    /// assert_eq!(rx.get_ge(&t, b"d")?, Some((&b"e"[..], &b"5"[..])));
    /// assert_eq!(rx.get_ge(&t, b"f")?, None);
    /// # Ok(())
    /// # }
    /// ```
    pub fn get_ge(&self, tree: &Tree, key: &[u8]) -> Result<Option<(&[u8], &[u8])>> {
        nearest(
            &self.snapshot.source,
            self.root(tree)?,
            key,
            Nearest::AtOrAfter,
        )
    }

    /// The entry with the smallest key `> key`.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// # let mut tx = db.begin_write()?;
    /// # let t = tx.open_tree("t")?;
    /// # for (k, v) in [(&b"a"[..], &b"1"[..]), (b"c", b"3"), (b"e", b"5")] { tx.put(&t, k, v)?; }
    /// # tx.commit()?;
    /// let rx = db.begin_read()?;
    /// let t = rx.tree("t")?; // holds a: 1, c: 3, e: 5
    /// assert_eq!(rx.get_gt(&t, b"c")?, Some((&b"e"[..], &b"5"[..])));
    /// assert_eq!(rx.get_gt(&t, b"e")?, None);
    /// # Ok(())
    /// # }
    /// ```
    pub fn get_gt(&self, tree: &Tree, key: &[u8]) -> Result<Option<(&[u8], &[u8])>> {
        nearest(&self.snapshot.source, self.root(tree)?, key, Nearest::After)
    }

    /// The entry with the largest key `<= key`.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// # let mut tx = db.begin_write()?;
    /// # let t = tx.open_tree("t")?;
    /// # for (k, v) in [(&b"a"[..], &b"1"[..]), (b"c", b"3"), (b"e", b"5")] { tx.put(&t, k, v)?; }
    /// # tx.commit()?;
    /// let rx = db.begin_read()?;
    /// let t = rx.tree("t")?; // holds a: 1, c: 3, e: 5
    /// assert_eq!(rx.get_le(&t, b"c")?, Some((&b"c"[..], &b"3"[..])));
    /// assert_eq!(rx.get_le(&t, b"b")?, Some((&b"a"[..], &b"1"[..])));
    /// assert_eq!(rx.get_le(&t, b"")?, None);
    /// # Ok(())
    /// # }
    /// ```
    pub fn get_le(&self, tree: &Tree, key: &[u8]) -> Result<Option<(&[u8], &[u8])>> {
        nearest(
            &self.snapshot.source,
            self.root(tree)?,
            key,
            Nearest::AtOrBefore,
        )
    }

    /// The entry with the largest key `< key`.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// # let mut tx = db.begin_write()?;
    /// # let t = tx.open_tree("t")?;
    /// # for (k, v) in [(&b"a"[..], &b"1"[..]), (b"c", b"3"), (b"e", b"5")] { tx.put(&t, k, v)?; }
    /// # tx.commit()?;
    /// let rx = db.begin_read()?;
    /// let t = rx.tree("t")?; // holds a: 1, c: 3, e: 5
    /// assert_eq!(rx.get_lt(&t, b"c")?, Some((&b"a"[..], &b"1"[..])));
    /// assert_eq!(rx.get_lt(&t, b"a")?, None);
    /// # Ok(())
    /// # }
    /// ```
    pub fn get_lt(&self, tree: &Tree, key: &[u8]) -> Result<Option<(&[u8], &[u8])>> {
        nearest(
            &self.snapshot.source,
            self.root(tree)?,
            key,
            Nearest::Before,
        )
    }

    /// Whether `tree` holds `key` (no value is read: an overflow value's
    /// pages are not touched).
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// # let mut tx = db.begin_write()?;
    /// # let t = tx.open_tree("t")?;
    /// # for (k, v) in [(&b"a"[..], &b"1"[..]), (b"c", b"3"), (b"e", b"5")] { tx.put(&t, k, v)?; }
    /// # tx.commit()?;
    /// let rx = db.begin_read()?;
    /// let t = rx.tree("t")?; // holds a: 1, c: 3, e: 5
    /// assert!(rx.contains_key(&t, b"c")?);
    /// assert!(!rx.contains_key(&t, b"d")?);
    /// # Ok(())
    /// # }
    /// ```
    pub fn contains_key(&self, tree: &Tree, key: &[u8]) -> Result<bool> {
        search::contains(&self.snapshot.source, self.root(tree)?, key)
    }

    /// The entries whose keys start with `prefix`, in key order (`.rev()`
    /// for reverse): the same iterator as `range`. The empty prefix is every
    /// key; a prefix of 0xff bytes runs to the end of the tree. The entries
    /// borrow the transaction, not `prefix` (which is copied, once).
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// # let mut tx = db.begin_write()?;
    /// # let t = tx.open_tree("t")?;
    /// # for (k, v) in [(&b"a"[..], &b"1"[..]), (b"c", b"3"), (b"e", b"5")] { tx.put(&t, k, v)?; }
    /// # tx.commit()?;
    /// let rx = db.begin_read()?;
    /// let t = rx.tree("t")?; // holds a: 1, c: 3, e: 5
    /// let keys: Vec<&[u8]> = rx
    ///     .prefix(&t, b"c")?
    ///     .map(|e| e.map(|(k, _)| k))
    ///     .collect::<ironbark::Result<_>>()?;
    /// assert_eq!(keys, [&b"c"[..]]);
    /// assert_eq!(rx.prefix(&t, b"")?.rev().count(), 3);
    /// # Ok(())
    /// # }
    /// ```
    pub fn prefix(&self, tree: &Tree, prefix: &[u8]) -> Result<Range<'_>> {
        Ok(Range::prefix(
            &self.snapshot.source,
            self.root(tree)?,
            prefix,
        ))
    }

    /// Like [`ReadTxn::range`], but every page is verified before it is
    /// trusted: each tree page's checksum against the checksum its parent
    /// (or the catalog, for the root) records, once, when the iterator
    /// first enters the page, and each overflow value's run when the value
    /// is read. Damage is an [`Error::Corrupted`] naming the page, never a
    /// wrong key or value. For bulk readers (dumps, copies, exports); it
    /// costs one checksum per page read, which `get` and `range` do not pay.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// # let mut tx = db.begin_write()?;
    /// # let t = tx.open_tree("users")?;
    /// # tx.put(&t, b"alice", b"1")?;
    /// # tx.commit()?;
    /// let rx = db.begin_read()?;
    /// let users = rx.tree("users")?;
    /// for entry in rx.range_verified(&users, b"a".as_slice()..)? {
    ///     let (key, value) = entry?; // Err(Corrupted) on a damaged page
    ///     assert_eq!((key, value), (&b"alice"[..], &b"1"[..]));
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn range_verified<R: KeyRange>(&self, tree: &Tree, range: R) -> Result<Range<'_>> {
        Ok(self.range(tree, range)?.verified())
    }

    /// All entries of `tree`, in key order, verified as they are read (see
    /// [`ReadTxn::range_verified`]).
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// # let mut tx = db.begin_write()?;
    /// # let t = tx.open_tree("t")?;
    /// # tx.put(&t, b"a", b"1")?;
    /// # tx.put(&t, b"b", b"2")?;
    /// # tx.commit()?;
    /// let rx = db.begin_read()?;
    /// let mut keys = Vec::new();
    /// for entry in rx.iter_verified(&t)? {
    ///     let (key, _) = entry?; // Err(Corrupted) on a damaged page
    ///     keys.push(key);
    /// }
    /// assert_eq!(keys, [b"a", b"b"]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn iter_verified(&self, tree: &Tree) -> Result<Range<'_>> {
        self.range_verified(tree, ..)
    }

    /// Writes a consistent copy of this snapshot to a new file at `path`
    /// (a hot backup: the writer may go on committing meanwhile). The copy
    /// is page for page, free pages included; it is written to a temporary
    /// file, synced, and then linked under `path`, which must not exist.
    ///
    /// The pages are copied as they are, checksums included, so damage in
    /// the source stays detectable in the copy; [`ReadTxn::copy_to_verified`]
    /// refuses to copy a damaged snapshot at all. A snapshot that holds
    /// logged commits not yet written to the file
    /// (`Options::logged_commits`) cannot be copied page for page:
    /// `InvalidOption` (checkpoint first, or use `compact_to`).
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// # let mut tx = db.begin_write()?;
    /// # let t = tx.open_tree("t")?;
    /// # tx.put(&t, b"k", b"v")?;
    /// # tx.commit()?;
    /// db.checkpoint()?; // logged commits into the data file first
    /// let backup = dir.path().join("backup.ib");
    /// db.begin_read()?.copy_to(&backup)?;
    /// assert!(db.begin_read()?.copy_to(&backup).is_err()); // exists now
    /// let copy = ironbark::Database::open(&backup)?;
    /// let rx = copy.begin_read()?;
    /// assert_eq!(rx.get(&rx.tree("t")?, b"k")?, Some(&b"v"[..]));
    /// # Ok(())
    /// # }
    /// ```
    pub fn copy_to(&self, path: impl AsRef<std::path::Path>) -> Result<()> {
        self.copy_pages_to(path.as_ref())
    }

    /// [`ReadTxn::copy_to`], after verifying the snapshot: the state blob
    /// (catalog and free space) and every page of every tree and overflow
    /// value, against the checksums their parents record. On damage it
    /// fails with [`Error::Corrupted`] naming the page, and no file is
    /// created. Free pages are copied unverified: they hold no data.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// # let mut tx = db.begin_write()?;
    /// # let t = tx.open_tree("t")?;
    /// # tx.put(&t, b"k", b"v")?;
    /// # tx.commit()?;
    /// db.checkpoint()?; // logged commits into the data file first
    /// let backup = dir.path().join("backup.ib");
    /// db.begin_read()?.copy_to_verified(&backup)?; // Err(Corrupted) on damage
    /// let copy = ironbark::Database::open(&backup)?;
    /// assert!(copy.check()?.is_clean());
    /// let rx = copy.begin_read()?;
    /// assert_eq!(rx.get(&rx.tree("t")?, b"k")?, Some(&b"v"[..]));
    /// # Ok(())
    /// # }
    /// ```
    pub fn copy_to_verified(&self, path: impl AsRef<std::path::Path>) -> Result<()> {
        let snap = &*self.snapshot;
        if snap.source.arena.is_some() {
            // Refused below: before the work of verifying.
            return self.copy_pages_to(path.as_ref());
        }
        state::load(&snap.source, &snap.meta, true)?;
        verify_trees(&snap.source, &snap.meta, &snap.catalog)?;
        self.copy_pages_to(path.as_ref())
    }

    fn copy_pages_to(&self, path: &std::path::Path) -> Result<()> {
        if self.snapshot.source.arena.is_some() {
            // Its newest pages are in memory (logged commits): a copy of the
            // file's pages would be an older commit under this one's txn id.
            return Err(Error::InvalidOption(
                "copy_to: this snapshot holds logged commits not yet in the file; \
                 call Database::checkpoint() first, or use compact_to"
                    .into(),
            ));
        }
        let meta = Meta {
            last_synced_txn: self.snapshot.txn(),
            log_base: self.snapshot.txn(),
            replay_to: self.snapshot.txn(),
            ..self.snapshot.meta
        };
        let source = &self.snapshot.source;
        let page_size = source.page_size;
        let mut head = vec![0u8; page_size * META_SLOTS as usize];
        head[..META_LEN].copy_from_slice(&meta.encode());
        head[page_size..page_size + META_LEN].copy_from_slice(&meta.encode());
        let body_len = usize::try_from((meta.page_count - META_SLOTS) * page_size as u64)
            .map_err(|_| Error::InvalidOption("snapshot too large to copy".into()))?;
        let body = source
            .map
            .slice(META_SLOTS * page_size as u64, body_len)
            .ok_or_else(|| Error::corrupted_page(META_SLOTS, "snapshot beyond the map"))?;
        DataFile::create_atomically(path, &[&head, body])?;
        Ok(())
    }
}

/// The snapshot a reader of `snap` registers, to keep its pages from
/// reuse: its own txn, or, for a read-only process's rebuild of a logged
/// commit (`recovery::follow_log`), the durable commit it was built on
/// (`meta.state_txn`: every file commit writes its state), registered as
/// a replay. The rebuild reads that commit's pages, which the writer may
/// free at or before the rebuilt txn: a step of a checkpoint frees the
/// pages of the step before it at its own txn and publishes the newest
/// commit again at that txn, before its sync; and the steps of the
/// checkpoint of commit `T` are numbered above `T`, a rebuild of `T` on
/// one reading pages born after `T`. A replay at the durable commit `D`
/// keeps every page of `D` until the commit that frees it. (Until session
/// 26 a rebuild on a step registered `T`, and until session 59 the
/// newer of `T` and the step, and in both cases pages were reused under
/// it.) Every other snapshot's `state_txn` is at most its txn.
pub(crate) fn protector(shared: &Shared, snap: &Snapshot) -> u64 {
    if is_rebuilt(shared, snap) {
        snap.meta.state_txn
    } else {
        snap.txn().max(snap.meta.state_txn)
    }
}

/// Registers `slot` as a reader of `snap`, the snapshot of commit `txn`;
/// true if that holds: `txn` is still the newest commit and, for a
/// rebuild, the commit it was built on is still the durable one, read
/// after the registration (the writer saves a newer durable commit before
/// it looks at the readers for the pages the older one frees: Dekker, as
/// with the newest commit).
fn register(shared: &Shared, slot: usize, snap: &Snapshot, txn: u64) -> bool {
    shared
        .readers
        .try_register_protecting(slot, protector(shared, snap), txn)
        && !stale(shared, snap)
}

impl Drop for ReadTxn {
    fn drop(&mut self) {
        self.shared().readers.release(self.slot);
        std::mem::replace(&mut self.snapshot, SnapshotRef::Released).release(&self.stripe.shared);
    }
}

#[cfg(test)]
mod tests {
    use super::SLOW_PATHS;
    use crate::{Database, Durability, Options};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    /// Readers beside their process's writer always borrow its lent
    /// snapshot: none takes the slow path, whose `arc_swap` loads would make
    /// every later publish pay for the reader's thread, however often a
    /// begin lands between a publish's lending and its update of the reader
    /// table (before session 26 such a begin took the slow path).
    #[test]
    fn readers_beside_their_writer_never_take_the_slow_path() {
        let dir = tempfile::tempdir().unwrap();
        let options = Options {
            durability: Durability::None,
            ..Options::default()
        };
        let db = Arc::new(Database::open_with(dir.path().join("d.ib"), &options).unwrap());
        let mut tx = db.begin_write().unwrap();
        let t = tx.open_tree("t").unwrap();
        for i in 0..100u32 {
            tx.put(&t, &i.to_be_bytes(), &[0; 8]).unwrap();
        }
        tx.commit().unwrap();
        let done = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (db, done, t) = (db.clone(), done.clone(), t.clone());
                std::thread::spawn(move || {
                    let mut reads = 0u64;
                    while !done.load(Ordering::Relaxed) {
                        let rx = db.begin_read().unwrap();
                        let value = rx.get(&t, &5u32.to_be_bytes()).unwrap();
                        assert_eq!(value.map(<[u8]>::len), Some(8));
                        reads += 1;
                    }
                    (reads, SLOW_PATHS.with(|n| n.get()))
                })
            })
            .collect();
        for i in 0..30_000u32 {
            let mut tx = db.begin_write().unwrap();
            tx.put(&t, &(i % 100).to_be_bytes(), &i.to_le_bytes().repeat(2))
                .unwrap();
            tx.commit().unwrap();
        }
        done.store(true, Ordering::Relaxed);
        for reader in readers {
            let (reads, slow) = reader.join().unwrap();
            assert!(reads > 0);
            assert_eq!(
                slow, 0,
                "{slow} of {reads} read transactions took the slow path"
            );
        }
    }
}
