//! The write transaction: private dirty pages over the snapshot it began
//! from. Nothing reaches the file before `commit`; dropping the transaction
//! discards it.
//!
//! Invariant: while a `WriteTxn` lives it holds the write lock (this
//! process's writer mutex and the cross-process lock), so the free-space map
//! and the dirty pages belong to it alone.

use std::ops::RangeBounds;
use std::sync::Arc;

use crate::btree::cursor::Range;
use crate::btree::search;
use crate::btree::write::{Finger, TreeState, TreeWriter};
use crate::catalog::{Catalog, TreeEntry};
use crate::error::{Error, Result};
use crate::options::Durability;
use crate::pages::{DirtyPages, PageSource, WriteSource};
use crate::storage::freespace::Freed;
use crate::txn::logged::LOG_RATIO;
use crate::txn::redo::{self, RedoOp};
use crate::txn::shared::{Shared, Snapshot, WriterGuard};
use crate::txn::Tree;

/// The one write transaction. Changes are visible to it at once and to
/// everyone else after `commit`. Dropped without commit, it is aborted.
pub struct WriteTxn<'db> {
    pub(crate) shared: &'db Shared,
    pub(crate) writer: WriterGuard<'db>,
    pub(crate) base: Arc<Snapshot>,
    pub(crate) catalog: Catalog,
    pub(crate) dirty: DirtyPages,
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
}

/// The largest redo record a commit logs; a larger transaction writes its
/// pages at once (a checkpoint), which costs less than logging its bytes
/// and writing its pages later too.
pub(crate) const MAX_LOGGED_BYTES: usize = 256 << 10;

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
        let base = shared.published.load_full();
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
        let dirty = DirtyPages::with_pool(std::mem::take(&mut writer.page_pool));
        let mut redo = std::mem::take(&mut writer.redo_buffer);
        redo.clear();
        let logging = shared.may_log(&writer);
        Ok(WriteTxn {
            redo,
            logging,
            shared,
            catalog: base.catalog.clone(),
            base,
            writer,
            dirty,
            freed: Vec::new(),
            finger: Finger::default(),
            tree_hint: std::sync::atomic::AtomicUsize::new(0),
            changed: false,
            failed: None,
            durability,
        })
    }

    /// The durability of this commit (default: the `Options::durability`
    /// of the handle that began it).
    pub fn set_durability(&mut self, durability: Durability) {
        self.durability = durability;
    }

    /// The txn id this transaction will commit as.
    pub fn txn_id(&self) -> u64 {
        self.base.txn() + 1
    }

    fn index_of(&self, tree: &Tree) -> Result<usize> {
        // Most calls name the tree of the call before: one compare of ids
        // instead of a search by name.
        let hint = self.tree_hint.load(std::sync::atomic::Ordering::Relaxed);
        if let Some(e) = self.catalog.trees.get(hint) {
            if e.id == tree.id && tree.db == self.shared.db_id {
                return Ok(hint);
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
    pub fn open_tree(&mut self, name: &str) -> Result<Tree> {
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
                    },
                );
                self.changed = true;
                if self.logging {
                    redo::create(&mut self.redo, id, name);
                }
                i
            }
        };
        let e = &self.catalog.trees[i];
        Ok(Tree {
            id: e.id,
            name: e.name.clone(),
            db: self.shared.db_id,
        })
    }

    /// A handle to the existing tree `name`, or `NoSuchTree`.
    pub fn tree(&self, name: &str) -> Result<Tree> {
        Tree::find(&self.catalog, name, self.shared.db_id)
    }

    /// The names of all trees, in order.
    pub fn list_trees(&self) -> Vec<String> {
        self.catalog.names()
    }

    /// Deletes the tree `name` and frees all its pages; returns whether it
    /// existed. Handles to it fail with `TreeDropped` in this transaction
    /// and with `StaleTree` in later ones (also once a tree of the same
    /// name was created again).
    pub fn drop_tree(&mut self, name: &str) -> Result<bool> {
        let Ok(i) = self.catalog.trees.binary_search_by(|t| (*t.name).cmp(name)) else {
            return Ok(false);
        };
        let state = self.catalog.trees[i].state;
        self.changed = true;
        let result = self.tree_writer().free_tree(&state);
        self.note_failure(result)?;
        if self.logging {
            redo::drop_tree(&mut self.redo, self.catalog.trees[i].id);
        }
        self.catalog.trees.remove(i);
        Ok(true)
    }

    fn tree_writer(&mut self) -> TreeWriter<'_> {
        TreeWriter {
            base: &self.base.source,
            dirty: &mut self.dirty,
            freed: &mut self.freed,
            finger: &mut self.finger,
            limits: self.shared.limits,
        }
    }

    /// Stores `value` under `key`, replacing any value there.
    /// Errors `KeyTooLarge` / `ValueTooLarge` leave the tree unchanged.
    pub fn put(&mut self, tree: &Tree, key: &[u8], value: &[u8]) -> Result<()> {
        let i = self.index_of(tree)?;
        let mut state = self.catalog.trees[i].state;
        self.tree_writer().check_sizes(key, value.len())?;
        let result = self.tree_writer().put(&mut state, key, value);
        self.catalog.trees[i].state = state;
        self.changed = true;
        if self.logging {
            redo::put(&mut self.redo, tree.id, key, value);
            self.check_log_size();
        }
        self.note_failure(result)
    }

    /// Stops recording redo operations once the commit will not be logged
    /// anyway: the record is too large, or (past 16 KiB) larger than half
    /// of every page made dirty so far (the commit's rule, `LOG_RATIO`, on
    /// an upper bound of its pages): a sorted bulk load stops copying its
    /// bytes into the record after its first hundred or so puts (past 64
    /// KiB, recording cost a sorted load of 2M records a fifth of its
    /// rate).
    fn check_log_size(&mut self) {
        let len = self.redo.len() as u64;
        let dirty_bytes = self.dirty.pages.len() as u64 * self.shared.limits.page_size as u64;
        if len > MAX_LOGGED_BYTES as u64 || (len > 16 << 10 && len * LOG_RATIO > dirty_bytes) {
            self.logging = false;
            self.redo.clear();
        }
    }

    /// Applies the operations of a redo record (recovery), resolving trees
    /// by id in this transaction's catalog.
    pub(crate) fn apply_redo(&mut self, payload: &[u8]) -> Result<()> {
        let tree_of = |txn: &WriteTxn<'_>, id: u64| -> Result<Tree> {
            let e = txn
                .catalog
                .trees
                .iter()
                .find(|t| t.id == id)
                .ok_or_else(|| Error::Corrupted {
                    page: None,
                    detail: format!("redo log record names tree id {id}, which does not exist"),
                })?;
            Ok(Tree {
                id,
                name: e.name.clone(),
                db: txn.shared.db_id,
            })
        };
        for op in redo::decode(payload) {
            match op? {
                RedoOp::Put { tree, key, value } => {
                    let t = tree_of(self, tree)?;
                    self.put(&t, key, value)?;
                }
                RedoOp::Delete { tree, key } => {
                    let t = tree_of(self, tree)?;
                    self.delete(&t, key)?;
                }
                RedoOp::Create { tree, name } => {
                    let t = self.open_tree(name)?;
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
                    let name = tree_of(self, tree)?.name;
                    self.drop_tree(&name)?;
                }
            }
        }
        Ok(())
    }

    /// Records that a mutation failed part-way.
    fn note_failure<T>(&mut self, result: Result<T>) -> Result<T> {
        if let Err(e) = &result {
            self.failed.get_or_insert_with(|| e.to_string());
        }
        result
    }

    /// Removes `key`; returns whether it was there.
    pub fn delete(&mut self, tree: &Tree, key: &[u8]) -> Result<bool> {
        let i = self.index_of(tree)?;
        let mut state = self.catalog.trees[i].state;
        let result = self.tree_writer().delete(&mut state, key);
        self.catalog.trees[i].state = state;
        if !matches!(result, Ok(false)) {
            self.changed = true;
        }
        if self.logging && matches!(result, Ok(true)) {
            redo::delete(&mut self.redo, tree.id, key);
            self.check_log_size();
        }
        self.note_failure(result)
    }

    /// The value under `key` as this transaction sees it.
    pub fn get(&self, tree: &Tree, key: &[u8]) -> Result<Option<&[u8]>> {
        let root = self.catalog.trees[self.index_of(tree)?].state.root;
        search::get(self, root, key)
    }

    /// The number of entries in `tree`.
    pub fn len(&self, tree: &Tree) -> Result<u64> {
        Ok(self.catalog.trees[self.index_of(tree)?].state.entries)
    }

    /// Whether `tree` has no entries.
    pub fn is_empty(&self, tree: &Tree) -> Result<bool> {
        Ok(self.len(tree)? == 0)
    }

    /// The entries with keys in `range` as this transaction sees them.
    pub fn range<'a, R: RangeBounds<&'a [u8]>>(
        &'a self,
        tree: &Tree,
        range: R,
    ) -> Result<Range<'a>> {
        let root = self.catalog.trees[self.index_of(tree)?].state.root;
        Ok(Range::new(
            self,
            root,
            range.start_bound().map(|k| *k),
            range.end_bound().map(|k| *k),
        ))
    }

    /// All entries of `tree`, in key order.
    pub fn iter<'a>(&'a self, tree: &Tree) -> Result<Range<'a>> {
        self.range::<std::ops::RangeFull>(tree, ..)
    }

    /// Commits: when it returns `Ok`, readers that begin see the changes,
    /// and with `Durability::Immediate` they survive power loss.
    pub fn commit(self) -> Result<()> {
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
            ..
        } = self;
        if failed.is_some() || !changed {
            writer.page_pool = dirty.into_pool(shared.limits.page_size);
            writer.redo_buffer = redo;
            return match failed {
                Some(why) => Err(Error::TxnFailed(why)),
                None => Ok(()),
            };
        }
        let changes = crate::txn::commit::Changes {
            catalog,
            dirty,
            freed,
            redo: logging.then_some(redo),
        };
        crate::txn::commit::commit(shared, writer, &base, changes, durability)
    }

    /// Discards every change (the same as dropping the transaction).
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
}
