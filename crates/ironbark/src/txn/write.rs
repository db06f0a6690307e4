//! The write transaction: private dirty pages over the snapshot it began
//! from. Nothing reaches the file before `commit`; dropping the transaction
//! discards it.
//!
//! Invariant: while a `WriteTxn` lives it holds the write lock (this
//! process's writer mutex and the cross-process lock), so the free-space map
//! and the dirty pages belong to it alone.
//!
//! Its reads are a `ReadTxn`'s (the same functions of `btree::search` and
//! `btree::cursor`), over its own pages. The conveniences built on `put`
//! and `delete` (`insert`, `get_or_insert`, `pop_first`, `pop_last`,
//! `retain`) reach the redo log as the puts and deletes they make;
//! `delete_range` and `clear`, which free whole subtrees without a delete
//! per key, reach it as one operation each (replayed on the same trees,
//! it removes the same entries).

use std::collections::HashMap;
use std::ops::Bound;
use std::sync::Arc;

use smallvec::SmallVec;

use crate::bounds::KeyRange;
use crate::btree::cursor::{count_between, edge, nearest, Nearest, Range};
use crate::btree::search::{self, Root, DESCENT_BATCH};
use crate::btree::write::{Finger, SealAtPut, TreeState, TreeWriter, Value};
use crate::catalog::{Catalog, TreeEntry};
use crate::error::{Error, Result};
use crate::options::Durability;
use crate::pages::{DirtyPages, Inserts, PageSource, WriteSource};
use crate::storage::freespace::Freed;
use crate::storage::overlay::Overlaid;
use crate::txn::leaf_hints::LeafHint;
use crate::txn::logged::{record_outweighs_pages, LOG_BOUND_MAX_BYTES, SMALL_RECORD_BYTES};
use crate::txn::redo::{self, RedoOp};
use crate::txn::shared::{Shared, Snapshot, WriterGuard};
use crate::txn::Tree;

/// The one write transaction. Changes are visible to it at once and to
/// everyone else after `commit`. Dropped without commit, it is aborted.
///
/// `Send`: it may be begun on one thread and used, committed or dropped on
/// another (a worker pool). One thing stays with the thread that began it:
/// the check that makes a call that would wait for the write lock on the
/// thread holding it fail with [`Error::WriteTxnOnThisThread`] instead of
/// waiting for itself. After a move, that thread still gets the error
/// (until the transaction ends) and the thread it moved to would wait.
///
/// ```
/// # fn main() -> ironbark::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
/// let mut tx = db.begin_write()?;
/// let t = tx.open_tree("t")?;
/// std::thread::scope(|s| {
///     s.spawn(move || {
///         tx.put(&t, b"k", b"from a worker")?;
///         tx.commit()
///     })
///     .join()
///     .unwrap()
/// })?;
/// # Ok(())
/// # }
/// ```
pub struct WriteTxn<'db> {
    pub(crate) shared: &'db Shared,
    /// Declared (so dropped) before `writer`: its lent arena slots are gone
    /// before the next write transaction can reclaim them.
    pub(crate) dirty: Box<DirtyPages>,
    /// The value overlays it appended to (`txn::overlaid`); declared before
    /// `writer` too: they are cut off under the writer lock unless it
    /// commits.
    pub(crate) overlays: crate::txn::overlay_undo::OverlayUndo<'db>,
    pub(crate) writer: WriterGuard<'db>,
    pub(crate) base: Arc<Snapshot>,
    pub(crate) catalog: Box<Catalog>,
    /// Committed pages this transaction stopped using.
    pub(crate) freed: Vec<Freed>,
    /// Where the last put went (see `Finger`).
    pub(crate) finger: Finger,
    /// The catalog index of the tree used last (checked by id on use; an
    /// atomic only so that the transaction stays `Sync`).
    pub(crate) tree_hint: std::sync::atomic::AtomicUsize,
    pub(crate) changed: bool,
    /// Set when a mutation failed part-way: the dirty pages may be
    /// inconsistent, so the transaction can only be aborted.
    pub(crate) failed: Option<String>,
    pub(crate) durability: Durability,
    /// The changes as redo-log operations (`txn::redo`), while `logging`:
    /// recording stops (and the commit writes pages instead) once a
    /// transaction outgrows `MAX_LOGGED_BYTES`.
    pub(crate) redo: Vec<u8>,
    pub(crate) logging: bool,
    /// The value `put_reserve` handed out last, whose bytes the caller
    /// may still be writing: its put record in `redo` holds zeros until
    /// `flush_reserved` copies the value in, before any change of pages
    /// can move it and at commit.
    pub(crate) reserved: Option<Reserved>,
    /// The savepoints taken and not released (`txn::savepoint`).
    pub(crate) savepoints: crate::txn::savepoint_stack::Savepoints,
    /// A read-only process's rebuild that could not spill (see `spill`):
    /// it keeps its pages in memory and tries no more.
    unspillable: bool,
    /// Whether a new blob gets its file pages and its seal as it is put
    /// once the transaction stopped logging (`btree::write::SealAtPut`):
    /// not in the replays of logged commits (`txn::recovery`), whose
    /// pages may go to the arena.
    pub(crate) seal_blobs_at_put: bool,
}

/// A reserved value: `len` bytes at `at` in dirty page `page`, whose copy
/// in the redo record starts at `redo_at`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Reserved {
    page: u64,
    at: usize,
    len: usize,
    redo_at: usize,
}

/// Zeros for the value of a reservation up to this long (a longer one is
/// `Value::Zeros`: an overflow blob of zeroed memory, or, for a page size
/// that keeps values this long inline, a page's worth of zeros).
const ZEROS: [u8; 16 << 10] = [0; 16 << 10];

/// How `WriteTxn::store` stores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Store {
    /// A put: into a value overlay where one can take it
    /// (`txn::overlaid`), else into the key's leaf.
    Put,
    /// An append: into the last leaf, refused unless the key is above
    /// every key of the tree.
    Append,
    /// The put of a reservation (`put_reserve`, `put_writer`), whose
    /// bytes the caller writes afterwards where they lie: always into a
    /// dirty page, never an overlay (which readers may be reading).
    Reserve,
}

/// The largest redo record a commit logs; a larger transaction writes its
/// pages at once (a checkpoint). A sixteenth of the log's largest bound:
/// under that bound, a transaction that begins with the log within a
/// sixteenth of it checkpoints first (`logged::checkpoint_due`) and its
/// record then fits; under a smaller one, a record that does not fit
/// makes its commit a checkpoint, written at once with its pages
/// (`logged::write_placed`). A transaction whose pages are few for its record's bytes (a
/// sorted load) is written as pages well before this
/// (`logged::record_outweighs_pages`); below it, scattered puts are
/// logged, their pages written by a later checkpoint with those of the
/// commits after them. At 256 KiB, transactions of 5,000 random puts of
/// 100-byte values into 1M records wrote their 5,000 leaves each: 194k
/// puts/s and 33 times their bytes, against 1.03M and 2.8 in
/// transactions of 1,000; at 4 MiB, transactions of 50,000 ran at 294k
/// and 14 times their bytes (572k and 2.8 at 16 MiB).
pub(crate) const MAX_LOGGED_BYTES: usize = (LOG_BOUND_MAX_BYTES / 16) as usize;

impl std::fmt::Debug for WriteTxn<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteTxn")
            .field("base_txn", &self.base.txn())
            .finish_non_exhaustive()
    }
}

impl<'db> WriteTxn<'db> {
    /// Begins with the write lock held, committing with `durability` unless
    /// `set_durability` says otherwise.
    pub(crate) fn begin(
        shared: &'db Shared,
        writer: WriterGuard<'db>,
        durability: Durability,
    ) -> Result<WriteTxn<'db>> {
        let mut writer = writer;
        let mut base = shared.published.load_full();
        if !writer.poisoned {
            if writer.checkpoint_steps.is_some() {
                // A checkpoint in steps is finished before anything else
                // is committed: its steps write the newest commit, which
                // must stay the newest until the last.
                crate::txn::commit::checkpoint(shared, &mut writer, Durability::Immediate)?;
                base = shared.published.load_full();
            } else if crate::txn::logged::checkpoint_due(shared, &writer, base.meta.page_count) {
                crate::txn::commit::checkpoint(shared, &mut writer, durability)?;
                base = shared.published.load_full();
            }
        }
        WriteTxn::begin_on(shared, writer, base, durability)
    }

    /// Begins on `base` (the newest commit, except when a read-only
    /// process rebuilds a logged commit: `txn::recovery::follow_log`).
    pub(crate) fn begin_on(
        shared: &'db Shared,
        writer: WriterGuard<'db>,
        base: Arc<Snapshot>,
        durability: Durability,
    ) -> Result<WriteTxn<'db>> {
        let mut writer = writer;
        if writer.poisoned {
            return Err(Error::Poisoned);
        }
        // No transaction is open: the arena slots an earlier one was lent
        // and did not publish come back (`ArenaSpace::reclaim_lent`).
        writer.arena_space.reclaim_lent();
        let dirty = DirtyPages::boxed(writer.dirty_spare.take());
        let mut redo = std::mem::take(&mut writer.redo_buffer);
        redo.clear();
        let mut freed = std::mem::take(&mut writer.freed_buffer);
        freed.clear();
        let overlays = crate::txn::overlay_undo::OverlayUndo::with_buffer(std::mem::take(
            &mut writer.overlay_marks,
        ));
        let logging = shared.may_log(&writer);
        // A spare snapshot's catalog lends its vector (see
        // `Shared::publish`).
        let mut catalog = writer.catalog_spare.take().unwrap_or_default();
        if let Some(lent) = shared
            .lender
            .with_spare(&shared.readers, |spare| std::mem::take(&mut spare.catalog))
        {
            *catalog = lent;
        }
        Catalog::clone_from(&mut catalog, &base.catalog);
        Ok(WriteTxn {
            redo,
            logging,
            shared,
            catalog,
            base,
            writer,
            dirty,
            freed,
            finger: Finger::default(),
            tree_hint: std::sync::atomic::AtomicUsize::new(0),
            changed: false,
            failed: None,
            durability,
            reserved: None,
            savepoints: Default::default(),
            overlays,
            unspillable: false,
            seal_blobs_at_put: true,
        })
    }

    /// The durability of this commit (default: the `Options::durability`
    /// of the handle that began it).
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// use ironbark::Durability;
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// tx.set_durability(Durability::None); // this commit is not synced
    /// tx.open_tree("t")?;
    /// tx.commit()?;
    /// let stats = db.stats()?;
    /// assert!(stats.durable_txn_id < stats.last_txn_id);
    /// let mut tx = db.begin_write()?; // the default again: Immediate
    /// tx.open_tree("u")?;
    /// tx.commit()?;
    /// let stats = db.stats()?;
    /// assert_eq!(stats.durable_txn_id, stats.last_txn_id);
    /// # Ok(())
    /// # }
    /// ```
    pub fn set_durability(&mut self, durability: Durability) {
        self.durability = durability;
    }

    /// The txn id this transaction will commit as.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let id = tx.txn_id();
    /// tx.open_tree("t")?;
    /// tx.commit()?;
    /// assert_eq!(db.begin_read()?.txn_id(), id);
    /// # Ok(())
    /// # }
    /// ```
    pub fn txn_id(&self) -> u64 {
        self.base.txn() + 1
    }

    #[inline]
    fn index_of(&self, tree: &Tree) -> Result<usize> {
        self.usable()?;
        // Most calls name the tree of the call before: one compare of ids
        // instead of a search by name.
        let hint = self.tree_hint.load(std::sync::atomic::Ordering::Relaxed);
        for at in [hint, tree.slot] {
            if let Some(e) = self.catalog.trees.get(at) {
                if e.id == tree.id && tree.db == self.shared.db_id {
                    if at != hint {
                        self.tree_hint
                            .store(at, std::sync::atomic::Ordering::Relaxed);
                    }
                    return Ok(at);
                }
            }
        }
        let i = self.search_tree(tree)?;
        self.tree_hint
            .store(i, std::sync::atomic::Ordering::Relaxed);
        Ok(i)
    }

    fn search_tree(&self, tree: &Tree) -> Result<usize> {
        match self
            .catalog
            .trees
            .binary_search_by(|t| (*t.name).cmp(&tree.name))
        {
            Ok(i) if self.catalog.trees[i].id == tree.id && tree.db == self.shared.db_id => Ok(i),
            _ => Err(tree.unresolved(self.shared.db_id, &self.catalog, Some(&self.base.catalog))),
        }
    }

    /// Opens the tree `name`, creating it (empty) if it does not exist.
    /// A tree created as another kind (a multimap, an integer-key tree) is
    /// [`Error::WrongTreeKind`].
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?; // created
    /// tx.put(&t, b"k", b"v")?;
    /// let again = tx.open_tree("t")?; // opened: the same tree
    /// assert_eq!(tx.get(&again, b"k")?, Some(&b"v"[..]));
    /// assert!(matches!(tx.open_tree(""), Err(ironbark::Error::InvalidTreeName(_))));
    /// # Ok(())
    /// # }
    /// ```
    pub fn open_tree(&mut self, name: &str) -> Result<Tree> {
        self.open_tree_kind(name, crate::TreeKind::PLAIN)
    }

    /// Opens the tree `name` of `kind`, creating it (empty) if it does not
    /// exist; `WrongTreeKind` if it exists as another kind.
    pub(crate) fn open_tree_kind(&mut self, name: &str, kind: crate::TreeKind) -> Result<Tree> {
        self.usable()?;
        if name.is_empty() || name.len() > crate::MAX_TREE_NAME_LEN {
            return Err(Error::InvalidTreeName(name.to_string()));
        }
        let i = match self.catalog.trees.binary_search_by(|t| (*t.name).cmp(name)) {
            Ok(i) => i,
            Err(i) => {
                let id = self.catalog.next_tree_id;
                self.catalog.next_tree_id += 1;
                self.catalog.trees.insert(
                    i,
                    TreeEntry {
                        id,
                        name: name.into(),
                        state: TreeState::default(),
                        kind,
                    },
                );
                self.changed = true;
                if self.logging {
                    redo::create(&mut self.redo, id, name, kind.flags());
                }
                i
            }
        };
        Tree::of_kind(&self.catalog, i, kind, self.shared.db_id)
    }

    /// A handle to the existing tree `name`, or `NoSuchTree`.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// assert!(matches!(tx.tree("t"), Err(ironbark::Error::NoSuchTree(_))));
    /// let t = tx.open_tree("t")?;
    /// assert_eq!(tx.tree("t")?, t);
    /// # Ok(())
    /// # }
    /// ```
    pub fn tree(&self, name: &str) -> Result<Tree> {
        Tree::find(&self.catalog, name, self.shared.db_id)
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
    /// assert_eq!(tx.list_trees(), ["a", "b"]);
    /// tx.drop_tree("a")?;
    /// assert_eq!(tx.list_trees(), ["b"]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn list_trees(&self) -> Vec<String> {
        self.catalog.names()
    }

    /// Deletes the tree `name` and frees all its pages; returns whether it
    /// existed. Handles to it fail with `TreeDropped` in this transaction
    /// and with `StaleTree` in later ones (also once a tree of the same
    /// name was created again).
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// # let mut tx = db.begin_write()?;
    /// # let t = tx.open_tree("t")?;
    /// # tx.put(&t, b"k", b"v")?;
    /// # tx.commit()?;
    /// let mut tx = db.begin_write()?;
    /// assert!(tx.drop_tree("t")?);
    /// assert!(!tx.drop_tree("t")?); // gone already
    /// assert!(matches!(tx.get(&t, b"k"), Err(ironbark::Error::TreeDropped(_))));
    /// tx.commit()?;
    /// assert!(db.begin_read()?.list_trees().is_empty());
    /// # Ok(())
    /// # }
    /// ```
    pub fn drop_tree(&mut self, name: &str) -> Result<bool> {
        self.usable()?;
        let Ok(i) = self.catalog.trees.binary_search_by(|t| (*t.name).cmp(name)) else {
            return Ok(false);
        };
        let state = self.catalog.trees[i].state;
        self.changed = true;
        let result = self.tree_writer()?.free_tree(&state);
        self.note_failure(result)?;
        if self.logging {
            redo::drop_tree(&mut self.redo, self.catalog.trees[i].id);
        }
        self.catalog.trees.remove(i);
        Ok(true)
    }

    /// The tree writer, for a change of pages: first, the value reserved
    /// last goes into the redo record, before the change can move it.
    #[inline]
    fn tree_writer(&mut self) -> Result<TreeWriter<'_>> {
        Ok(self.tree_writer_and_catalog()?.0)
    }

    /// `tree_writer`, and the catalog borrowed beside it, so that a change
    /// edits its tree's record in place. Inlined, with the record not
    /// copied out and back: a put that got the writer returned through
    /// memory and copied the record read each back in wider loads than it
    /// was written in, a store-forwarding stall that took a third of
    /// `store`'s time in a sorted load (`perf annotate`).
    #[inline(always)]
    fn tree_writer_and_catalog(&mut self) -> Result<(TreeWriter<'_>, &mut Catalog)> {
        self.tree_writer_sealing(false)
    }

    /// `tree_writer_and_catalog`, whose new blobs are sealed as they are
    /// put (`SealAtPut`) if `seal_blobs` (the caller's put makes one, and
    /// the transaction writes its pages to the file: `store`).
    #[inline(always)]
    fn tree_writer_sealing(&mut self, seal_blobs: bool) -> Result<(TreeWriter<'_>, &mut Catalog)> {
        self.flush_reserved();
        if self.dirty.resident > self.shared.max_dirty_bytes && !self.unspillable {
            self.spill()?;
        }
        if self.logging && self.dirty.wants_slots(crate::txn::logged::LEND_MAX) {
            // Pages this change copies go straight to arena slots.
            crate::txn::logged::lend(self.shared, &mut self.writer, &self.base, &mut self.dirty);
        }
        let seal_at_put = if seal_blobs {
            let w = &mut *self.writer;
            Some(SealAtPut {
                free: &mut w.free,
                ahead: &mut w.taken_ahead,
                base_pages: self.base.meta.page_count,
                txn: self.base.txn() + 1,
            })
        } else {
            None
        };
        let writer = TreeWriter {
            base: &self.base.source,
            dirty: &mut self.dirty,
            freed: &mut self.freed,
            finger: &mut self.finger,
            limits: self.shared.limits,
            seal_at_put,
        };
        Ok((writer, &mut self.catalog))
    }

    /// Spills dirty pages to the spill file until half of
    /// `Options::max_dirty_bytes` stays in memory (see `DirtyPages::spill_to`).
    /// Halfway, so that a transaction growing past the bound spills once per
    /// half of it, in large sequential writes. Changes nothing on an error.
    ///
    /// The only write transactions of a read-only process, its rebuilds of
    /// logged commits (`txn::recovery`), bring every spilled page back
    /// into memory before placing them in the arena: spilling saves them
    /// no memory at the end. Where they cannot spill (a directory they may
    /// not write: the spill file lives beside the data file) they keep
    /// their pages in memory instead of failing, as a read-only open that
    /// needs no write access must (until session 27 such a rebuild past
    /// `Options::max_dirty_bytes` failed the open with a bare `EACCES`).
    #[cold]
    fn spill(&mut self) -> Result<()> {
        let shared = self.shared;
        let ps = shared.limits.page_size;
        let keep = self.finger.leaf();
        let spilled = self
            .dirty
            .spill_to(shared.max_dirty_bytes / 2, keep, ps, || {
                crate::storage::spill::SpillFile::create(
                    &shared.file,
                    &shared.path,
                    ps,
                    shared.map_reservation,
                )
            });
        match spilled {
            Err(_) if shared.read_only => {
                self.unspillable = true;
                return Ok(());
            }
            other => other?,
        }
        shared
            .counters
            .spills
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// Stores `value` under `key`, replacing any value there.
    /// Errors `KeyTooLarge` / `ValueTooLarge` leave the tree unchanged.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// tx.put(&t, b"k", b"1")?;
    /// tx.put(&t, b"k", b"2")?; // replaces
    /// tx.commit()?;
    /// let rx = db.begin_read()?;
    /// assert_eq!(rx.get(&t, b"k")?, Some(&b"2"[..]));
    /// assert_eq!(rx.len(&t)?, 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn put(&mut self, tree: &Tree, key: &[u8], value: &[u8]) -> Result<()> {
        self.store(tree, key, Value::Bytes(value), Store::Put, None)
    }

    /// Stores each `(key, value)` of `pairs` in `tree`, in order, as
    /// [`put`](Self::put) would one pair at a time (of two pairs with one
    /// key, the later wins), and stops at the first error, with the pairs
    /// before it stored. Faster than `put` in a loop for keys scattered
    /// over a tree larger than the CPU's caches: it walks the paths of up
    /// to 16 keys at once, a level of the tree at a time, so that their
    /// cache misses overlap instead of following one another, and each
    /// put then finds its pages in cache. The nearest thing in LevelDB and
    /// RocksDB is a `WriteBatch`.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// tx.put_many(&t, [(&b"b"[..], &b"2"[..]), (b"a", b"1"), (b"b", b"3")])?;
    /// tx.commit()?;
    /// let rx = db.begin_read()?;
    /// assert_eq!(rx.get(&t, b"a")?, Some(&b"1"[..]));
    /// assert_eq!(rx.get(&t, b"b")?, Some(&b"3"[..]));
    /// # Ok(())
    /// # }
    /// ```
    pub fn put_many<K, V>(
        &mut self,
        tree: &Tree,
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Result<()>
    where
        K: AsRef<[u8]>,
        V: AsRef<[u8]>,
    {
        self.put_batch(tree, pairs, false)
    }

    /// `put_many`; `scattered`: the puts were scattered (a replay of
    /// logged commits, which logs nothing itself), so the look ahead runs
    /// whether the transaction logs or not.
    fn put_batch<K, V>(
        &mut self,
        tree: &Tree,
        pairs: impl IntoIterator<Item = (K, V)>,
        scattered: bool,
    ) -> Result<()>
    where
        K: AsRef<[u8]>,
        V: AsRef<[u8]>,
    {
        let i = self.index_of(tree)?;
        let mut pairs = pairs.into_iter();
        loop {
            let batch: SmallVec<[(K, V); DESCENT_BATCH]> =
                pairs.by_ref().take(DESCENT_BATCH).collect();
            let mut hints = [None; DESCENT_BATCH];
            // A look ahead pays for scattered puts, which are logged; a
            // sorted load (not logged past its first puts) finds its pages
            // in cache, and would pay for a second descent per put.
            if batch.len() > 1 && (self.logging || scattered) {
                let mut keys: [&[u8]; DESCENT_BATCH] = [&[]; DESCENT_BATCH];
                for (key, (k, _)) in keys.iter_mut().zip(&batch) {
                    *key = k.as_ref();
                }
                self.look_ahead(i, &keys[..batch.len()], &mut hints);
            }
            for ((k, v), hint) in batch.iter().zip(hints) {
                self.store(tree, k.as_ref(), Value::Bytes(v.as_ref()), Store::Put, hint)?;
            }
            if batch.len() < DESCENT_BATCH {
                return Ok(());
            }
        }
    }

    /// Stores `value` under `key`, which must be greater than every key of
    /// `tree`: the call for loading sorted data (LMDB's `MDB_APPEND`).
    /// It checks the order with one compare against the last leaf (kept
    /// from the append before), so a sorted load never searches from the
    /// root but once per leaf, and full leaves split at the end, so the
    /// load leaves full pages. A key not greater than the tree's last key
    /// is refused with [`Error::KeyOutOfOrder`] and changes nothing: the
    /// transaction stays usable. In the redo log it is a put.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let log = tx.open_tree("log")?;
    /// for i in 0..1000u32 {
    ///     tx.append(&log, &i.to_be_bytes(), b"event")?;
    /// }
    /// let err = tx.append(&log, &5u32.to_be_bytes(), b"late").unwrap_err();
    /// assert!(matches!(err, ironbark::Error::KeyOutOfOrder(_)));
    /// assert_eq!(tx.len(&log)?, 1000);
    /// tx.commit()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn append(&mut self, tree: &Tree, key: &[u8], value: &[u8]) -> Result<()> {
        self.store(tree, key, Value::Bytes(value), Store::Append, None)
    }

    /// Stores a value of `len` bytes under `key` and returns the space for
    /// its bytes, in the transaction's own page (LMDB's `MDB_RESERVE`):
    /// the caller writes the value in place, with no buffer of its own to
    /// copy from (a value built by serialization, a copy from a reader).
    /// The space is zeroed, so what the caller leaves unwritten stays zero
    /// (a value long enough for overflow pages gets them from zeroed
    /// memory: no buffer of zeros as long as the value is made). For a
    /// value written in pieces, [`WriteTxn::put_writer`] is the same put
    /// behind an `io::Write`.
    /// It can be written until the next call on the transaction; what it
    /// holds then is the value, in the pages and in the redo record of a
    /// logged commit alike. Errors are `put`'s.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// let space = tx.put_reserve(&t, b"counter", 8)?;
    /// space.copy_from_slice(&42u64.to_le_bytes());
    /// tx.commit()?;
    /// let rx = db.begin_read()?;
    /// assert_eq!(rx.get(&t, b"counter")?, Some(&42u64.to_le_bytes()[..]));
    /// # Ok(())
    /// # }
    /// ```
    pub fn put_reserve(&mut self, tree: &Tree, key: &[u8], len: usize) -> Result<&mut [u8]> {
        let (page, at) = self.reserve(tree, key, len)?;
        Ok(&mut self.dirty.get_mut(page)[at..at + len])
    }

    /// Stores `len` zeros under `key` (with no buffer of zeros as long as
    /// the value: an overflow value's blob is zeroed memory) and returns
    /// where they lie in the dirty pages (`TreeWriter::value_at`); when
    /// logging, the put record is `flush_reserved`'s to fill in.
    pub(crate) fn reserve(&mut self, tree: &Tree, key: &[u8], len: usize) -> Result<(u64, usize)> {
        self.tree_writer()?.check_sizes(key, len)?;
        let value = match ZEROS.get(..len) {
            Some(z) => Value::Bytes(z),
            None => Value::Zeros(len),
        };
        self.store(tree, key, value, Store::Reserve, None)?;
        let state = self.catalog.trees[self.index_of(tree)?].state;
        let found = self.tree_writer()?.value_at(&state, key);
        let (page, at) = self.note_failure(found)?;
        if self.logging {
            // The put's record ends with the value (`redo::put`).
            self.reserved = Some(Reserved {
                page,
                at,
                len,
                redo_at: self.redo.len() - len,
            });
        }
        Ok((page, at))
    }

    /// Copies the value `put_reserve` handed out last into its put record.
    /// Inlined: every call that changes pages runs it first, and there is
    /// mostly nothing to do.
    #[inline]
    pub(crate) fn flush_reserved(&mut self) {
        if self.reserved.is_some() {
            self.flush_reserved_value();
        }
    }

    #[cold]
    fn flush_reserved_value(&mut self) {
        if let Some(r) = self.reserved.take() {
            // Recording may have stopped since (the record is dropped then).
            if self.logging {
                let value = &self.dirty.get(r.page)[r.at..r.at + r.len];
                self.redo[r.redo_at..r.redo_at + r.len].copy_from_slice(value);
            }
        }
    }

    /// `put`, an append (which may refuse the key), or the put of a
    /// reservation (see `Store`); `hint`, the key's leaf as a look ahead
    /// found it (`put_many`).
    fn store(
        &mut self,
        tree: &Tree,
        key: &[u8],
        value: Value<'_>,
        how: Store,
        hint: Option<LeafHint>,
    ) -> Result<()> {
        let i = self.index_of(tree)?;
        let append = how == Store::Append;
        if let (Store::Put, Value::Bytes(v)) = (how, value) {
            self.flush_reserved();
            let overlaid = self.put_overlaid(i, key, v, hint);
            if overlaid.as_ref().is_ok_and(|&done| done) {
                self.changed = true;
                self.record_put(tree, key, value);
            }
            if !matches!(overlaid, Ok(false)) {
                return self.note_failure(overlaid.map(|_| ()));
            }
        }
        // A put whose value goes to a new blob, of a transaction that
        // writes its pages to the file, seals the blob at once.
        let seal_blob = how != Store::Reserve
            && self.seal_blobs_at_put
            && !self.logging
            && !self.shared.limits.value_is_inline(key.len(), value.len());
        if seal_blob && self.writer.taken_ahead.is_empty() {
            // Before the transaction's first such blob, the pending pages
            // no protector reads become reusable, as at a commit's start:
            // the pages the last commits freed, for these blobs.
            crate::txn::commit::release(self.shared, &mut self.writer);
        }
        let (mut writer, catalog) = self.tree_writer_sealing(seal_blob)?;
        let state = &mut catalog.trees[i].state;
        writer.check_sizes(key, value.len())?;
        let result = if append {
            match writer.append(state, key, value) {
                Ok(false) => return Err(Error::KeyOutOfOrder(tree.name.to_string())),
                other => other.map(|_| ()),
            }
        } else {
            writer.put(state, key, value)
        };
        self.changed = true;
        self.record_put(tree, key, value);
        self.note_failure(result)
    }

    /// Records a put in the redo record, while the transaction is logged.
    fn record_put(&mut self, tree: &Tree, key: &[u8], value: Value<'_>) {
        if self.logging {
            // A record that would outgrow the log's bound stops recording
            // before its value is copied in: a large value is never copied
            // into the record only to be dropped with it.
            let record = redo::PUT_HEADER_MAX_LEN + key.len() + value.len();
            if self.redo.len().saturating_add(record) > MAX_LOGGED_BYTES {
                self.logging = false;
                self.redo.clear();
            } else {
                match value {
                    Value::Bytes(v) => redo::put(&mut self.redo, tree.id, key, v),
                    Value::Zeros(len) => redo::put_zeros(&mut self.redo, tree.id, key, len),
                }
                self.check_log_size();
            }
        }
    }

    /// Stops recording redo operations once the commit will not be logged
    /// anyway: the record is too large, or (past 16 KiB) larger than half
    /// of every tree page made dirty so far (the commit's rule,
    /// `logged::record_outweighs_pages`, on an upper bound of its pages): a sorted bulk load stops copying its
    /// bytes into the record after its first hundred or so puts (past 64
    /// KiB, recording cost a sorted load of 2M records a fifth of its
    /// rate).
    fn check_log_size(&mut self) {
        let len = self.redo.len() as u64;
        // Every page ever added, live or not, is an entry of `pages`, and
        // every blob one of them (whatever its length): the tree pages'
        // entries are the rest (fewer, after a rollback to a savepoint
        // dropped blobs that `blobs_added` still counts: the transaction
        // then stops logging sooner, which only costs its commit the
        // log's saving). Past `SMALL_RECORD_BYTES` the rule counts no blob
        // page.
        let ps = self.shared.limits.page_size as u64;
        let tree_pages = self
            .dirty
            .pages
            .len()
            .saturating_sub(self.dirty.blobs_added) as u64;
        if len > MAX_LOGGED_BYTES as u64
            || (len > SMALL_RECORD_BYTES
                && record_outweighs_pages(len, tree_pages, 0, self.overlays.leaves(), ps))
        {
            self.logging = false;
            self.redo.clear();
        }
    }

    /// Applies the operations of the redo records `payloads`, in order
    /// (recovery, and the rebuilds of read-only processes), resolving
    /// trees by id in this transaction's catalog. Runs of puts to one tree,
    /// across records, go in batches (`put_batch`): the logged commits were
    /// scattered puts, whose descents a batch walks together.
    pub(crate) fn apply_redo<'p>(
        &mut self,
        payloads: impl IntoIterator<Item = &'p [u8]>,
    ) -> Result<()> {
        let mut trees = ReplayTrees::default();
        let mut run: SmallVec<[(&'p [u8], &'p [u8]); DESCENT_BATCH]> = SmallVec::new();
        let mut run_tree: Option<Tree> = None;
        for payload in payloads {
            for op in redo::decode(payload) {
                let op = op?;
                if let RedoOp::Put { tree, key, value } = op {
                    if run_tree.as_ref().is_some_and(|t| t.id == tree) && run.len() < DESCENT_BATCH
                    {
                        run.push((key, value));
                        continue;
                    }
                }
                if let Some(t) = run_tree.take() {
                    self.put_batch(&t, run.drain(..), true)?;
                }
                match op {
                    RedoOp::Put { tree, key, value } => {
                        run_tree = Some(self.replay_tree(&mut trees, tree)?);
                        run.push((key, value));
                    }
                    RedoOp::Delete { tree, key } => {
                        let t = self.replay_tree(&mut trees, tree)?;
                        self.delete(&t, key)?;
                    }
                    RedoOp::Create { tree, name, kind } => {
                        let t = self.open_tree_kind(name, kind)?;
                        if t.id != tree {
                            return Err(Error::Corrupted {
                                page: None,
                                detail: format!(
                                    "redo log record creates tree {name:?} as id {tree}, replay made {}",
                                    t.id
                                ),
                            });
                        }
                    }
                    RedoOp::Drop { tree } => {
                        let name = self.replay_tree(&mut trees, tree)?.name;
                        self.drop_tree(&name)?;
                    }
                    RedoOp::DeleteRange { tree, lower, upper } => {
                        let t = self.replay_tree(&mut trees, tree)?;
                        self.delete_range(&t, (lower, upper))?;
                    }
                    RedoOp::Clear { tree } => {
                        let t = self.replay_tree(&mut trees, tree)?;
                        self.clear(&t)?;
                    }
                }
            }
        }
        if let Some(t) = run_tree {
            self.put_batch(&t, run.drain(..), true)?;
        }
        Ok(())
    }

    /// The tree of id `id` in this transaction's catalog, for a replay.
    fn replay_tree(&self, trees: &mut ReplayTrees, id: u64) -> Result<Tree> {
        let slot = trees
            .slot_of(&self.catalog, id)
            .ok_or_else(|| Error::Corrupted {
                page: None,
                detail: format!("redo log record names tree id {id}, which does not exist"),
            })?;
        Ok(Tree {
            id,
            name: self.catalog.trees[slot].name.clone(),
            db: self.shared.db_id,
            slot,
        })
    }

    /// Refuses every operation on the trees once one failed part-way
    /// (`failed`): its changes may be half made (a page freed and its
    /// parent not yet relinked), and the transaction can only be dropped,
    /// as LMDB refuses a transaction after an error. Reads are refused
    /// too, since they would walk the same half-made pages.
    #[inline(always)]
    pub(crate) fn usable(&self) -> Result<()> {
        match &self.failed {
            None => Ok(()),
            Some(why) => Err(Self::failed_error(why)),
        }
    }

    #[cold]
    fn failed_error(why: &str) -> Error {
        Error::TxnFailed(why.to_string())
    }

    /// Records that a mutation failed part-way.
    #[inline(always)]
    fn note_failure<T>(&mut self, result: Result<T>) -> Result<T> {
        if let Err(e) = &result {
            self.record_failure(e);
        }
        result
    }

    #[cold]
    fn record_failure(&mut self, e: &Error) {
        self.failed.get_or_insert_with(|| e.to_string());
    }

    /// Removes `key`; returns whether it was there.
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
    /// let mut tx = db.begin_write()?;
    /// assert!(tx.delete(&t, b"a")?);
    /// assert!(!tx.delete(&t, b"a")?); // not there any more
    /// tx.commit()?;
    /// let rx = db.begin_read()?;
    /// assert_eq!(rx.get(&t, b"a")?, None);
    /// assert_eq!(rx.len(&t)?, 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn delete(&mut self, tree: &Tree, key: &[u8]) -> Result<bool> {
        let i = self.index_of(tree)?;
        self.flush_reserved();
        match self.delete_overlaid(i, key) {
            Ok(Some(true)) => {
                self.changed = true;
                if self.logging {
                    redo::delete(&mut self.redo, tree.id, key);
                    self.check_log_size();
                }
                return Ok(true);
            }
            Ok(Some(false)) => return Ok(false),
            Ok(None) => {}
            Err(e) => return self.note_failure(Err(e)),
        }
        let (mut writer, catalog) = self.tree_writer_and_catalog()?;
        let result = writer.delete(&mut catalog.trees[i].state, key);
        if !matches!(result, Ok(false)) {
            self.changed = true;
        }
        if self.logging && matches!(result, Ok(true)) {
            redo::delete(&mut self.redo, tree.id, key);
            self.check_log_size();
        }
        self.note_failure(result)
    }

    /// The root of `tree` as this transaction sees it.
    pub(crate) fn root(&self, tree: &Tree) -> Result<Root> {
        Ok(self.catalog.trees[self.index_of(tree)?].state.root)
    }

    /// The value under `key` as this transaction sees it.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// tx.put(&t, b"k", b"v")?;
    /// assert_eq!(tx.get(&t, b"k")?, Some(&b"v"[..])); // before the commit
    /// assert_eq!(tx.get(&t, b"x")?, None);
    /// # Ok(())
    /// # }
    /// ```
    pub fn get(&self, tree: &Tree, key: &[u8]) -> Result<Option<&[u8]>> {
        search::get(self, self.root(tree)?, key)
    }

    /// The number of entries in `tree`.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// tx.put(&t, b"a", b"1")?;
    /// tx.put(&t, b"b", b"2")?;
    /// tx.put(&t, b"a", b"3")?; // replaces: still two
    /// assert_eq!(tx.len(&t)?, 2);
    /// # Ok(())
    /// # }
    /// ```
    pub fn len(&self, tree: &Tree) -> Result<u64> {
        Ok(self.catalog.trees[self.index_of(tree)?].state.entries)
    }

    /// The number of entries of `tree` with keys from `lower` (included)
    /// to `upper` (excluded), counted from the leaves' entry counts (see
    /// `btree::cursor::count_between`): O(leaf pages), no value read.
    pub(crate) fn count_between(&self, tree: &Tree, lower: &[u8], upper: &[u8]) -> Result<u64> {
        count_between(self, self.root(tree)?, lower, upper)
    }

    /// Whether `tree` has no entries.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// assert!(tx.is_empty(&t)?);
    /// tx.put(&t, b"k", b"v")?;
    /// assert!(!tx.is_empty(&t)?);
    /// # Ok(())
    /// # }
    /// ```
    pub fn is_empty(&self, tree: &Tree) -> Result<bool> {
        Ok(self.len(tree)? == 0)
    }

    /// The entries with keys in `range` as this transaction sees them.
    /// The bounds may be of any byte-slice-like type ([`KeyRange`]); they
    /// are copied, so the entries borrow the transaction, not the bounds.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// for k in [b"a", b"b", b"c"] {
    ///     tx.put(&t, k, b"v")?;
    /// }
    /// let first = {
    ///     let upper = vec![b'b'];
    ///     let mut range = tx.range(&t, ..=&upper)?;
    ///     range.next().transpose()?
    /// }; // `upper` is gone; the entry borrows `tx`
    /// assert_eq!(first, Some((&b"a"[..], &b"v"[..])));
    /// # Ok(())
    /// # }
    /// ```
    pub fn range<R: KeyRange>(&self, tree: &Tree, range: R) -> Result<Range<'_>> {
        let root = self.catalog.trees[self.index_of(tree)?].state.root;
        let (lower, upper) = range.key_bounds();
        Ok(Range::new(self, root, lower, upper))
    }

    /// All entries of `tree`, in key order.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// for k in [b"c", b"a", b"b"] {
    ///     tx.put(&t, k, b"v")?;
    /// }
    /// let mut keys = Vec::new();
    /// for entry in tx.iter(&t)? {
    ///     keys.push(entry?.0);
    /// }
    /// assert_eq!(keys, [b"a", b"b", b"c"]);
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
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// for (k, v) in [(&b"a"[..], &b"1"[..]), (b"c", b"3"), (b"e", b"5")] {
    ///     tx.put(&t, k, v)?;
    /// }
    /// assert_eq!(tx.first(&t)?, Some((&b"a"[..], &b"1"[..])));
    /// # Ok(())
    /// # }
    /// ```
    pub fn first(&self, tree: &Tree) -> Result<Option<(&[u8], &[u8])>> {
        edge(self, self.root(tree)?, false)
    }

    /// The entry with the largest key, or `None` if `tree` is empty.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// for (k, v) in [(&b"a"[..], &b"1"[..]), (b"c", b"3"), (b"e", b"5")] {
    ///     tx.put(&t, k, v)?;
    /// }
    /// assert_eq!(tx.last(&t)?, Some((&b"e"[..], &b"5"[..])));
    /// # Ok(())
    /// # }
    /// ```
    pub fn last(&self, tree: &Tree) -> Result<Option<(&[u8], &[u8])>> {
        edge(self, self.root(tree)?, true)
    }

    /// The entry with the smallest key `>= key`.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// for (k, v) in [(&b"a"[..], &b"1"[..]), (b"c", b"3"), (b"e", b"5")] {
    ///     tx.put(&t, k, v)?;
    /// }
    /// assert_eq!(tx.get_ge(&t, b"c")?, Some((&b"c"[..], &b"3"[..])));
    /// assert_eq!(tx.get_ge(&t, b"d")?, Some((&b"e"[..], &b"5"[..])));
    /// assert_eq!(tx.get_ge(&t, b"f")?, None);
    /// # Ok(())
    /// # }
    /// ```
    pub fn get_ge(&self, tree: &Tree, key: &[u8]) -> Result<Option<(&[u8], &[u8])>> {
        nearest(self, self.root(tree)?, key, Nearest::AtOrAfter)
    }

    /// The entry with the smallest key `> key`.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// for (k, v) in [(&b"a"[..], &b"1"[..]), (b"c", b"3"), (b"e", b"5")] {
    ///     tx.put(&t, k, v)?;
    /// }
    /// assert_eq!(tx.get_gt(&t, b"c")?, Some((&b"e"[..], &b"5"[..])));
    /// assert_eq!(tx.get_gt(&t, b"e")?, None);
    /// # Ok(())
    /// # }
    /// ```
    pub fn get_gt(&self, tree: &Tree, key: &[u8]) -> Result<Option<(&[u8], &[u8])>> {
        nearest(self, self.root(tree)?, key, Nearest::After)
    }

    /// The entry with the largest key `<= key`.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// for (k, v) in [(&b"a"[..], &b"1"[..]), (b"c", b"3"), (b"e", b"5")] {
    ///     tx.put(&t, k, v)?;
    /// }
    /// assert_eq!(tx.get_le(&t, b"c")?, Some((&b"c"[..], &b"3"[..])));
    /// assert_eq!(tx.get_le(&t, b"b")?, Some((&b"a"[..], &b"1"[..])));
    /// assert_eq!(tx.get_le(&t, b"")?, None);
    /// # Ok(())
    /// # }
    /// ```
    pub fn get_le(&self, tree: &Tree, key: &[u8]) -> Result<Option<(&[u8], &[u8])>> {
        nearest(self, self.root(tree)?, key, Nearest::AtOrBefore)
    }

    /// The entry with the largest key `< key`.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// for (k, v) in [(&b"a"[..], &b"1"[..]), (b"c", b"3"), (b"e", b"5")] {
    ///     tx.put(&t, k, v)?;
    /// }
    /// assert_eq!(tx.get_lt(&t, b"c")?, Some((&b"a"[..], &b"1"[..])));
    /// assert_eq!(tx.get_lt(&t, b"a")?, None);
    /// # Ok(())
    /// # }
    /// ```
    pub fn get_lt(&self, tree: &Tree, key: &[u8]) -> Result<Option<(&[u8], &[u8])>> {
        nearest(self, self.root(tree)?, key, Nearest::Before)
    }

    /// Whether `tree` holds `key` (no value is read: an overflow value's
    /// pages are not touched).
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// for (k, v) in [(&b"a"[..], &b"1"[..]), (b"c", b"3"), (b"e", b"5")] {
    ///     tx.put(&t, k, v)?;
    /// }
    /// assert!(tx.contains_key(&t, b"c")?);
    /// assert!(!tx.contains_key(&t, b"d")?);
    /// # Ok(())
    /// # }
    /// ```
    pub fn contains_key(&self, tree: &Tree, key: &[u8]) -> Result<bool> {
        search::contains(self, self.root(tree)?, key)
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
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// for (k, v) in [(&b"a"[..], &b"1"[..]), (b"c", b"3"), (b"e", b"5")] {
    ///     tx.put(&t, k, v)?;
    /// }
    /// let keys: Vec<&[u8]> = tx
    ///     .prefix(&t, b"c")?
    ///     .map(|e| e.map(|(k, _)| k))
    ///     .collect::<ironbark::Result<_>>()?;
    /// assert_eq!(keys, [&b"c"[..]]);
    /// assert_eq!(tx.prefix(&t, b"")?.rev().count(), 3);
    /// # Ok(())
    /// # }
    /// ```
    pub fn prefix(&self, tree: &Tree, prefix: &[u8]) -> Result<Range<'_>> {
        Ok(Range::prefix(self, self.root(tree)?, prefix))
    }

    /// Removes the entry with the smallest key and returns it (owned: the
    /// pages it was read from may be freed by the removal).
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let jobs = tx.open_tree("jobs")?;
    /// tx.put(&jobs, b"002", b"second")?;
    /// tx.put(&jobs, b"001", b"first")?;
    /// assert_eq!(tx.pop_first(&jobs)?, Some((b"001".to_vec(), b"first".to_vec())));
    /// assert_eq!(tx.len(&jobs)?, 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn pop_first(&mut self, tree: &Tree) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.pop(tree, false)
    }

    /// Removes the entry with the largest key and returns it (owned).
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let stack = tx.open_tree("stack")?;
    /// tx.put(&stack, b"1", b"bottom")?;
    /// tx.put(&stack, b"2", b"top")?;
    /// assert_eq!(tx.pop_last(&stack)?, Some((b"2".to_vec(), b"top".to_vec())));
    /// assert_eq!(tx.pop_last(&stack)?, Some((b"1".to_vec(), b"bottom".to_vec())));
    /// assert_eq!(tx.pop_last(&stack)?, None);
    /// # Ok(())
    /// # }
    /// ```
    pub fn pop_last(&mut self, tree: &Tree) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.pop(tree, true)
    }

    fn pop(&mut self, tree: &Tree, last: bool) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let Some((key, value)) = edge(self, self.root(tree)?, last)? else {
            return Ok(None);
        };
        let (key, value) = (key.to_vec(), value.to_vec());
        self.delete(tree, &key)?;
        Ok(Some((key, value)))
    }

    /// Stores `value` under `key` and returns the value it replaced. The
    /// old value is copied out before it is overwritten, which costs one
    /// more descent and a copy of its bytes: [`WriteTxn::put`] is the
    /// cheaper call when the old value is not wanted.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// assert_eq!(tx.insert(&t, b"k", b"old")?, None);
    /// assert_eq!(tx.insert(&t, b"k", b"new")?, Some(b"old".to_vec()));
    /// assert_eq!(tx.get(&t, b"k")?, Some(&b"new"[..]));
    /// # Ok(())
    /// # }
    /// ```
    pub fn insert(&mut self, tree: &Tree, key: &[u8], value: &[u8]) -> Result<Option<Vec<u8>>> {
        // Sizes first, so that a refused put reads nothing and changes nothing.
        self.tree_writer()?.check_sizes(key, value.len())?;
        let old = self.get(tree, key)?.map(<[u8]>::to_vec);
        self.put(tree, key, value)?;
        Ok(old)
    }

    /// The value under `key`, after storing `value` there if `key` was
    /// missing (an existing value is left as it is).
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// assert_eq!(tx.get_or_insert(&t, b"k", b"first")?, b"first");
    /// assert_eq!(tx.get_or_insert(&t, b"k", b"second")?, b"first");
    /// # Ok(())
    /// # }
    /// ```
    pub fn get_or_insert(&mut self, tree: &Tree, key: &[u8], value: &[u8]) -> Result<&[u8]> {
        if !self.contains_key(tree, key)? {
            self.put(tree, key, value)?;
        }
        // A second lookup: the value must borrow the transaction as it is
        // after the put.
        self.get(tree, key)?.ok_or_else(|| Error::Corrupted {
            page: None,
            detail: "a key just stored is not in its tree".into(),
        })
    }

    /// Removes every entry of `tree` and returns how many there were. The
    /// tree stays (same handle, same id): its pages are freed as by
    /// [`WriteTxn::drop_tree`], one visit per page, not a delete per key.
    ///
    /// The redo log records it as one operation, whatever the tree holds.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let cache = tx.open_tree("cache")?;
    /// for i in 0..1000u32 {
    ///     tx.put(&cache, &i.to_be_bytes(), b"value")?;
    /// }
    /// assert_eq!(tx.clear(&cache)?, 1000);
    /// assert!(tx.is_empty(&cache)?);
    /// tx.put(&cache, b"again", b"ok")?; // the handle stays valid
    /// tx.commit()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn clear(&mut self, tree: &Tree) -> Result<u64> {
        let i = self.index_of(tree)?;
        if self.logging {
            self.flush_reserved();
            redo::clear(&mut self.redo, tree.id);
        }
        self.clear_at(i)
    }

    /// `clear` of catalog entry `i`, not recorded.
    fn clear_at(&mut self, i: usize) -> Result<u64> {
        let state = self.catalog.trees[i].state;
        if state.root.is_empty() {
            return Ok(0);
        }
        self.changed = true;
        let result = self.tree_writer()?.free_tree(&state);
        self.note_failure(result)?;
        self.catalog.trees[i].state = TreeState::default();
        Ok(state.entries)
    }

    /// Removes the entries with keys in `range` and returns how many.
    /// A range that holds every entry of a tree of more than one leaf is a
    /// [`WriteTxn::clear`] (one visit per page). Any other range that holds
    /// whole subtrees of at least 64 leaves between them has them freed
    /// from their parents' records, unread but for their leaves' entry
    /// counts (and blobs): removing most of a tree of a million entries
    /// copies a few pages, on the range's two edges. What is left in
    /// range, or all of a smaller range, is removed a leaf at a time: a
    /// lookup, one copy of the path and one rebalancing per leaf it
    /// touches, not per key. The redo log records the range as one
    /// operation, whatever it holds. An empty or inverted range removes
    /// nothing.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// for k in [b"a", b"b", b"c", b"d"] {
    ///     tx.put(&t, k, b"v")?;
    /// }
    /// assert_eq!(tx.delete_range(&t, b"b".as_slice()..b"d".as_slice())?, 2);
    /// assert_eq!(tx.len(&t)?, 2);
    /// # Ok(())
    /// # }
    /// ```
    pub fn delete_range<R: KeyRange>(&mut self, tree: &Tree, range: R) -> Result<u64> {
        let (lower, upper) = range.key_bounds();
        let (lower, upper) = (lower.map(<[u8]>::to_vec), upper.map(<[u8]>::to_vec));
        let i = self.index_of(tree)?;
        // One redo operation for the whole range: replayed on the same
        // trees, it removes the same entries, however it removes them.
        if self.logging {
            self.flush_reserved();
            redo::delete_range(&mut self.redo, tree.id, as_slice(&lower), as_slice(&upper));
        }
        // All of a tree of more than one leaf: one visit per page.
        if self.root(tree)?.depth > 1
            && self.covers_tree(tree, as_slice(&lower), as_slice(&upper))?
        {
            return self.clear_at(i);
        }
        // The subtrees wholly in range go first, freed from their parents'
        // records (`TreeWriter::prune_range`); what is left in range lies
        // in the leaves on its two edges.
        let mut state = self.catalog.trees[i].state;
        let result =
            self.tree_writer()?
                .prune_range(&mut state, as_slice(&lower), as_slice(&upper));
        let mut removed = self.note_failure(result)?;
        if removed > 0 {
            self.catalog.trees[i].state = state;
            self.changed = true;
        }
        let mut from = lower;
        loop {
            // The first key left in range starts the next run; the run
            // removes it and the keys after it in its leaf, so the scan
            // resumes after it.
            let start = match self
                .range(tree, (as_slice(&from), as_slice(&upper)))?
                .next()
            {
                None => return Ok(removed),
                Some(entry) => entry?.0.to_vec(),
            };
            // Each run starts past the last: a scan that gives a key at or
            // before it read keys out of order (damage the write path's
            // checks had not yet met), and looking again would loop.
            if let Bound::Excluded(last) = &from {
                if start <= *last {
                    let e = Error::Corrupted {
                        page: None,
                        detail: format!(
                            "a scan of tree {:?} gave a key at or before the one it resumed after",
                            tree.name
                        ),
                    };
                    return self.note_failure(Err(e));
                }
            }
            let mut state = self.catalog.trees[i].state;
            let result = self
                .tree_writer()?
                .delete_run(&mut state, &start, as_slice(&upper));
            self.catalog.trees[i].state = state;
            self.changed = true;
            removed += self.note_failure(result)?;
            from = Bound::Excluded(start);
        }
    }

    /// Keeps only the entries for which `keep(key, value)` is true (asked
    /// in key order) and returns how many it removed. Every entry is read
    /// once; each removal is a delete (a descent).
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// for i in 0..10u8 {
    ///     tx.put(&t, &[i], &[i * 10])?;
    /// }
    /// assert_eq!(tx.retain(&t, |_key, value| value[0] >= 50)?, 5);
    /// assert_eq!(tx.first(&t)?, Some((&[5u8][..], &[50u8][..])));
    /// # Ok(())
    /// # }
    /// ```
    pub fn retain<F: FnMut(&[u8], &[u8]) -> bool>(
        &mut self,
        tree: &Tree,
        mut keep: F,
    ) -> Result<u64> {
        // The entries borrow the pages the deletes change, so they are
        // read in batches: up to `BATCH` entries looked at, the keys to
        // remove copied out and removed, and the scan resumed after the
        // last key looked at.
        const BATCH: usize = 1024;
        let mut from = Bound::Unbounded;
        let mut doomed: Vec<Vec<u8>> = Vec::new();
        let mut removed = 0;
        loop {
            doomed.clear();
            let mut seen = 0;
            let mut last_seen = None;
            for entry in self.range(tree, (as_slice(&from), Bound::Unbounded))? {
                let (key, value) = entry?;
                if !keep(key, value) {
                    doomed.push(key.to_vec());
                }
                seen += 1;
                if seen == BATCH {
                    last_seen = Some(key.to_vec());
                    break;
                }
            }
            for key in &doomed {
                if self.delete(tree, key)? {
                    removed += 1;
                }
            }
            match last_seen {
                Some(key) => from = Bound::Excluded(key),
                None => return Ok(removed),
            }
        }
    }

    /// Whether `lower..upper` holds every key of `tree` (two lookups).
    fn covers_tree(&self, tree: &Tree, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> Result<bool> {
        let root = self.root(tree)?;
        let (Some((first, _)), Some((last, _))) =
            (edge(self, root, false)?, edge(self, root, true)?)
        else {
            return Ok(false);
        };
        let from_start = match lower {
            Bound::Unbounded => true,
            Bound::Included(l) => l <= first,
            Bound::Excluded(l) => l < first,
        };
        let to_end = match upper {
            Bound::Unbounded => true,
            Bound::Included(u) => last <= u,
            Bound::Excluded(u) => last < u,
        };
        Ok(from_start && to_end)
    }

    /// Commits: when it returns `Ok`, readers that begin see the changes,
    /// and with `Durability::Immediate` they survive power loss.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// tx.put(&t, b"k", b"v")?;
    /// let before = db.begin_read()?; // began before the commit
    /// tx.commit()?;
    /// assert!(before.list_trees().is_empty());
    /// assert_eq!(db.begin_read()?.get(&t, b"k")?, Some(&b"v"[..]));
    /// # Ok(())
    /// # }
    /// ```
    pub fn commit(mut self) -> Result<()> {
        self.flush_reserved();
        let WriteTxn {
            shared,
            mut writer,
            base,
            catalog,
            dirty,
            freed,
            changed,
            failed,
            durability,
            redo,
            logging,
            overlays,
            ..
        } = self;
        if failed.is_some() || !changed {
            // Cut off under the writer lock.
            drop(overlays);
            writer.dirty_spare = Some(dirty.emptied(shared.limits.page_size));
            writer.catalog_spare = Some(catalog);
            writer.redo_buffer = redo;
            writer.freed_buffer = freed;
            return match failed {
                Some(why) => Err(Error::TxnFailed(why)),
                None => Ok(()),
            };
        }
        // A transaction that spilled pages is too large to log anyway (and
        // a logged commit copies every page into memory).
        let logging = logging && !dirty.has_spilled();
        let changes = crate::txn::commit::Changes {
            catalog,
            dirty,
            freed,
            redo,
            loggable: logging,
            overlays,
        };
        crate::txn::commit::commit(shared, writer, &base, changes, durability)
    }

    /// Discards every change (the same as dropping the transaction).
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// # let mut tx = db.begin_write()?;
    /// # let t = tx.open_tree("t")?;
    /// # tx.put(&t, b"k", b"v")?;
    /// # tx.commit()?;
    /// let mut tx = db.begin_write()?;
    /// tx.put(&t, b"k", b"changed")?;
    /// tx.open_tree("other")?;
    /// tx.abort();
    /// let rx = db.begin_read()?;
    /// assert_eq!(rx.get(&t, b"k")?, Some(&b"v"[..]));
    /// assert_eq!(rx.list_trees(), ["t"]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn abort(self) {}
}

/// The transaction resolves its own pages (dirty first, then its base
/// snapshot), so values it returns borrow the transaction itself.
impl PageSource for WriteTxn<'_> {
    #[inline]
    fn page(&self, pgno: u64) -> Result<&[u8]> {
        WriteSource {
            base: &self.base.source,
            dirty: &self.dirty,
        }
        .resolve_page(pgno)
    }

    fn blob_run(&self, pgno: u64) -> Result<&[u8]> {
        WriteSource {
            base: &self.base.source,
            dirty: &self.dirty,
        }
        .resolve_blob_run(pgno)
    }

    fn overlay(&self, leaf: u64, index: usize) -> Result<Option<Overlaid<'_>>> {
        WriteSource {
            base: &self.base.source,
            dirty: &self.dirty,
        }
        .resolve_overlay(leaf, index)
    }

    fn deleted_between(&self, leaf: u64, from: usize, to: usize) -> Result<usize> {
        WriteSource {
            base: &self.base.source,
            dirty: &self.dirty,
        }
        .resolve_deleted_between(leaf, from, to)
    }

    fn inserted<'s>(&'s self, leaf: u64, out: &mut Inserts<'s>) -> Result<usize> {
        WriteSource {
            base: &self.base.source,
            dirty: &self.dirty,
        }
        .resolve_inserted(leaf, out)
    }

    fn inserted_value(&self, leaf: u64, key: &[u8]) -> Result<Option<&[u8]>> {
        WriteSource {
            base: &self.base.source,
            dirty: &self.dirty,
        }
        .resolve_inserted_value(leaf, key)
    }

    fn inserted_entry(&self, leaf: u64, entry: u8) -> Result<(&[u8], &[u8])> {
        WriteSource {
            base: &self.base.source,
            dirty: &self.dirty,
        }
        .resolve_inserted_entry(leaf, entry)
    }

    fn has_inserts(&self, leaf: u64) -> bool {
        WriteSource {
            base: &self.base.source,
            dirty: &self.dirty,
        }
        .resolve_has_inserts(leaf)
    }

    fn file_leaf_overlays(&self) -> bool {
        self.base.source.file_overlays.is_some()
    }
}

/// `Bound<Vec<u8>>` to `Bound<&[u8]>`.
fn as_slice(bound: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    bound.as_ref().map(Vec::as_slice)
}

/// Where each tree is in a replaying transaction's catalog, by id, for the
/// trees that redo records name (`WriteTxn::apply_redo`): a replay looked
/// for each operation's tree with a scan of the catalog, O(trees) per put
/// (the recovery of 100,000 single-put commits into 10,000 trees took
/// 696-754 ms, 501-591 ms with this; `examples/recovery_time.rs`).
///
/// A place is used only where the catalog holds that very id (ids are
/// never reused), so the map needs no invalidation: a record that creates
/// or drops a tree moves the others, and the next lookup that finds its
/// place stale (or no place) builds the map again.
#[derive(Default)]
struct ReplayTrees {
    slots: HashMap<u64, usize>,
}

impl ReplayTrees {
    /// The place of tree `id` in `catalog`, if it has one.
    fn slot_of(&mut self, catalog: &Catalog, id: u64) -> Option<usize> {
        let found = |slots: &HashMap<u64, usize>| {
            slots
                .get(&id)
                .copied()
                .filter(|&slot| catalog.trees.get(slot).is_some_and(|e| e.id == id))
        };
        if let Some(slot) = found(&self.slots) {
            return Some(slot);
        }
        self.slots.clear();
        self.slots.extend(
            catalog
                .trees
                .iter()
                .enumerate()
                .map(|(slot, e)| (e.id, slot)),
        );
        found(&self.slots)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kind::TreeKind;

    fn catalog(ids: &[(u64, &str)]) -> Catalog {
        let mut c = Catalog::default();
        for &(id, name) in ids {
            c.upsert(TreeEntry {
                id,
                name: Arc::from(name),
                state: TreeState::default(),
                kind: TreeKind::default(),
            });
            c.next_tree_id = c.next_tree_id.max(id + 1);
        }
        c
    }

    /// Every tree is found at its place; after the catalog changed, the
    /// places are checked and rebuilt, never trusted; a tree that is not
    /// there is not found.
    #[test]
    fn replay_trees_find_each_tree_at_its_place_even_after_the_catalog_moved() {
        let mut trees = ReplayTrees::default();
        let c = catalog(&[(1, "m"), (2, "x")]);
        assert_eq!(trees.slot_of(&c, 1), Some(0));
        assert_eq!(trees.slot_of(&c, 2), Some(1));
        assert_eq!(trees.slot_of(&c, 3), None);
        // "a" sorts first: every place moves.
        let moved = catalog(&[(1, "m"), (2, "x"), (3, "a")]);
        assert_eq!(trees.slot_of(&moved, 1), Some(1));
        assert_eq!(trees.slot_of(&moved, 2), Some(2));
        assert_eq!(trees.slot_of(&moved, 3), Some(0));
        let dropped = catalog(&[(2, "x"), (3, "a")]);
        assert_eq!(trees.slot_of(&dropped, 1), None);
        assert_eq!(trees.slot_of(&dropped, 2), Some(1));
    }
}
