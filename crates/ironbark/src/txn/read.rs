//! Read transactions: a registered snapshot. Lookups and cursors borrow the
//! memory map for the life of the transaction: zero-copy, no allocation, no
//! lock, no system call.

use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use crate::btree::cursor::Range;
use crate::btree::search::{self, Root};
use crate::catalog::TreeEntry;
use crate::db::{Shared, Snapshot};
use crate::error::{Error, Result};
use crate::storage::file::DataFile;
use crate::storage::meta::{Meta, META_LEN, META_SLOTS};
use crate::txn::Tree;

/// A consistent, read-only view of one commit. `Send`: it may move to
/// another thread. Dropping it frees its reader slot.
pub struct ReadTxn {
    shared: Arc<Shared>,
    snapshot: Arc<Snapshot>,
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
    pub(crate) fn begin(shared: Arc<Shared>) -> Result<ReadTxn> {
        let slot = shared.readers.claim()?;
        let snapshot = shared.readers.register(
            slot,
            || shared.published.load_full(),
            |s| s.txn(),
            &shared.published_txn,
        );
        Ok(ReadTxn {
            shared,
            snapshot,
            slot,
        })
    }

    /// The txn id of the commit this transaction sees.
    pub fn txn_id(&self) -> u64 {
        self.snapshot.txn()
    }

    fn entry(&self, tree: &Tree) -> Result<&TreeEntry> {
        match self.snapshot.catalog.find(&tree.name) {
            Some(e) if e.id == tree.id => Ok(e),
            _ => Err(Error::NoSuchTree(tree.name.to_string())),
        }
    }

    fn root(&self, tree: &Tree) -> Result<Root> {
        Ok(self.entry(tree)?.state.root)
    }

    /// A handle to the tree `name`, or `NoSuchTree`.
    pub fn tree(&self, name: &str) -> Result<Tree> {
        self.snapshot.catalog.handle(name)
    }

    /// The names of all trees, in order.
    pub fn list_trees(&self) -> Vec<String> {
        self.snapshot.catalog.names()
    }

    /// The number of entries in `tree`.
    pub fn len(&self, tree: &Tree) -> Result<u64> {
        Ok(self.entry(tree)?.state.entries)
    }

    /// Whether `tree` has no entries.
    pub fn is_empty(&self, tree: &Tree) -> Result<bool> {
        Ok(self.len(tree)? == 0)
    }

    /// The value stored under `key`, borrowed from the map.
    #[inline]
    pub fn get(&self, tree: &Tree, key: &[u8]) -> Result<Option<&[u8]>> {
        let root = self.root(tree)?;
        search::get(&self.snapshot.source, root, key)
    }

    /// The entries with keys in `range`, in key order (`.rev()` for reverse).
    pub fn range<'a, R: RangeBounds<&'a [u8]>>(
        &'a self,
        tree: &Tree,
        range: R,
    ) -> Result<Range<'a>> {
        let root = self.root(tree)?;
        Ok(Range::new(
            &self.snapshot.source,
            root,
            copied(range.start_bound()),
            copied(range.end_bound()),
        ))
    }

    /// All entries of `tree`, in key order.
    pub fn iter<'a>(&'a self, tree: &Tree) -> Result<Range<'a>> {
        self.range::<std::ops::RangeFull>(tree, ..)
    }

    /// Writes a consistent copy of this snapshot to a new file at `path`
    /// (a hot backup: the writer may go on committing meanwhile). The copy
    /// is page for page, free pages included; it is written to a temporary
    /// file, synced, and then linked under `path`, which must not exist.
    pub fn copy_to(&self, path: impl AsRef<std::path::Path>) -> Result<()> {
        let meta = Meta {
            last_synced_txn: self.snapshot.txn(),
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
        DataFile::create_atomically(path.as_ref(), &[&head, body])?;
        Ok(())
    }
}

/// `Bound<&&[u8]>` to `Bound<&[u8]>`.
pub(crate) fn copied<'a>(b: Bound<&&'a [u8]>) -> Bound<&'a [u8]> {
    match b {
        Bound::Included(k) => Bound::Included(*k),
        Bound::Excluded(k) => Bound::Excluded(*k),
        Bound::Unbounded => Bound::Unbounded,
    }
}

impl Drop for ReadTxn {
    fn drop(&mut self) {
        self.shared.readers.release(self.slot);
    }
}
