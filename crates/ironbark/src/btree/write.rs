//! Mutations of the write path: insert with split, delete with merge (of
//! one key, or of a run of keys in one leaf), freeing the subtrees a key
//! range holds whole, and freeing a whole tree.
//! Copy-on-write: a committed page is never changed; the first change to
//! it copies it into a dirty page with a provisional number, and the
//! committed page is recorded as freed by this transaction.
//!
//! A dirty page frozen by a savepoint (`txn::savepoint`) is treated like a
//! committed one: copied before its first change (`touch`), so that it
//! keeps the savepoint's state.
//!
//! Invariants kept here: after every call the tree satisfies the rules in
//! `btree`'s module doc; a page is never both dirty and freed; a frozen
//! page is never changed; the page and entry counters in [`TreeState`]
//! match the tree.

use std::ops::Bound;

use crate::btree::cursor::Cursor;
use crate::btree::leaf_split::{shortest_separator, split_committed_leaf, Halves};
use crate::btree::page::{
    self, append_leaf_inline, branch_cell, cell_fits, cells_of, compare_keys, fill_page,
    fill_page_from, insert_cell, insert_cell_parts, leaf_cell_header, leaf_cell_inline,
    leaf_cell_overflow, overflow_ref, remove_cell, set_child, verify_page, LeafAppend, LeafValue,
    Limits, Node, Reads, BLOB_HEADER_LEN, BRANCH_CELL_HEADER, LEAF_CELL_HEADER, OVERFLOW_REF_LEN,
};
use crate::btree::page::{is_file_page, DIRTY_BIT};
use crate::btree::search::{
    check_root, find_leaf, inserted_value, is_deleted, live_entries, node_at, Root,
};
use crate::btree::MAX_DEPTH;
use crate::error::{Error, Result};
use crate::pages::{expected_txn, DirtyPages, Inserts, MapSource, PageSource, WriteSource};
use crate::storage::arena::ARENA_BIT;
use crate::storage::freespace::{Extent, FreeSpace, Freed, TakenAhead};
use crate::storage::overlay::{Insert, Overlaid, OverlayPage, MAX_ENTRIES};

/// Applies `overlay` (its newest entry of each index, as the writer sees
/// them) to `page`, dirty page `id`, a copy of the leaf the overlay
/// belongs to: an overlaid value has its cell's length
/// (`storage::overlay`), so each replaces the cell's value in place; a
/// tombstone removes its cell. An entry that does not fit its cell (a
/// slot the leaf lacks, a blob's reference, another length), or
/// tombstones for every cell, are damage: `Err`, the page unchanged.
pub(crate) fn apply_overlay(page: &mut [u8], id: u64, overlay: &OverlayPage<'_>) -> Result<()> {
    let mut newest = [(0u16, Overlaid::Deleted); MAX_ENTRIES];
    let n = overlay.newest_entries(u64::MAX, &mut newest)?;
    let mut values = [(0usize, &[][..]); MAX_ENTRIES];
    let mut deleted = [0usize; MAX_ENTRIES];
    let (mut n_values, mut n_deleted) = (0, 0);
    {
        let node = Node::parse(page, id, None)?;
        let base = page.as_ptr() as usize;
        for &(i, what) in &newest[..n] {
            let i = usize::from(i);
            let old = match (node.is_leaf && i < node.count).then(|| node.leaf_entry(i)) {
                Some(entry) => match entry?.1 {
                    LeafValue::Inline(old) => Some(old),
                    LeafValue::Overflow { .. } => None,
                },
                None => None,
            };
            match (old, what) {
                (Some(old), Overlaid::Value(v)) if old.len() == v.len() => {
                    values[n_values] = (old.as_ptr() as usize - base, v);
                    n_values += 1;
                }
                (Some(_), Overlaid::Deleted) => {
                    deleted[n_deleted] = i;
                    n_deleted += 1;
                }
                _ => {
                    return Err(Error::Corrupted {
                        page: None,
                        detail: format!("a value overlay's entry {i} does not fit its leaf"),
                    })
                }
            }
        }
        if n_deleted >= node.count && node.count > 0 {
            return Err(Error::Corrupted {
                page: None,
                detail: "a value overlay deletes every entry of its leaf".into(),
            });
        }
    }
    for &(offset, value) in &values[..n_values] {
        page[offset..offset + value.len()].copy_from_slice(value);
    }
    // From the last slot down, so that each removal leaves the slots still
    // to remove where they were.
    let deleted = &mut deleted[..n_deleted];
    deleted.sort_unstable();
    for &i in deleted.iter().rev() {
        remove_cell(page, i);
    }
    // Then the keys it adds, each at its place: the writer took an insert
    // only with room for it beside the leaf's cells and earlier inserts.
    let mut inserts: Inserts<'_> = [Insert::default(); MAX_ENTRIES];
    let n = overlay.inserts(u64::MAX, &mut inserts)?;
    for &Insert { key, value, .. } in &inserts[..n] {
        let does_not_fit = || Error::Corrupted {
            page: None,
            detail: "a value overlay's insert does not fit its leaf".into(),
        };
        let Err(at) = Node::parse(page, id, None)?.search_leaf(key)? else {
            return Err(does_not_fit());
        };
        let header = leaf_cell_header(key.len(), value.len() as u64, false);
        if !insert_cell_parts(page, at, &[&header, key, value]) {
            return Err(does_not_fit());
        }
    }
    Ok(())
}

/// A tree's root and counters, as the catalog stores them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct TreeState {
    pub(crate) root: Root,
    pub(crate) entries: u64,
    pub(crate) branch_pages: u64,
    pub(crate) leaf_pages: u64,
    pub(crate) overflow_pages: u64,
}

/// A branch on the path of `TreeWriter::copy_branches_above_wanted`'s
/// walk: its reference, its slot in its parent, and its copy once made.
#[derive(Clone, Copy)]
struct WalkStep {
    pgno: u64,
    txn: u64,
    sum: u64,
    slot: usize,
    copy: Option<u64>,
}

/// What `TreeWriter::copy_branches_above_wanted`'s walk is asked for.
struct Walk<'w> {
    wanted: &'w dyn Fn(u64) -> bool,
    found: &'w mut Vec<u64>,
    before_touch: &'w mut dyn FnMut(&mut DirtyPages),
}

/// The leaf the last put went to (a dirty page) and whether it is the
/// first or last leaf of its tree, so that the next put can skip the
/// descent when its key falls within that leaf's keys. Any key between a
/// leaf's first and last key belongs to that leaf (and any key at all past
/// the last leaf's first key, or before the first leaf's last key), so
/// checking against the leaf's own keys needs no copy of the separators.
///
/// Invariant: set only by a put that did not split, or by a split at the
/// end of the last leaf (to the new last leaf, which holds only the new
/// key), cleared by every other change of the tree's shape (split, delete
/// with its merges, drop), and by taking or rolling back to a savepoint:
/// its leaf is never frozen (`DirtyPages::editable_from`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Finger {
    /// The tree's root when the finger was set (0: no finger). Dirty
    /// numbers are never reused within a transaction, so it names the tree.
    root: u64,
    leaf: u64,
    leftmost: bool,
    rightmost: bool,
}

impl Finger {
    /// The leaf the last put went to (0: none).
    pub(crate) fn leaf(&self) -> u64 {
        self.leaf
    }

    /// The leaf that holds `key` in the tree rooted at `root`, if the
    /// finger points into that tree and the key is within the leaf's range.
    fn leaf_for(&self, dirty: &DirtyPages, root: u64, key: &[u8]) -> Result<Option<u64>> {
        if self.root == 0 || self.root != root {
            return Ok(None);
        }
        let leaf = Node::parse(dirty.get(self.leaf), self.leaf, None)?;
        if leaf.count == 0 {
            return Ok(None);
        }
        let above_first = self.leftmost || compare_keys(key, leaf.key(0)?).is_ge();
        let below_last = self.rightmost || compare_keys(key, leaf.key(leaf.count - 1)?).is_le();
        Ok((above_first && below_last).then_some(self.leaf))
    }
}

/// The write transaction's pages, borrowed for one mutation.
pub(crate) struct TreeWriter<'a> {
    pub(crate) base: &'a MapSource,
    pub(crate) dirty: &'a mut DirtyPages,
    /// Committed pages this transaction no longer references, with the
    /// txn that wrote them.
    pub(crate) freed: &'a mut Vec<Freed>,
    pub(crate) finger: &'a mut Finger,
    pub(crate) limits: Limits,
    /// Set in a transaction that writes its pages to the file: new blobs
    /// get their file pages and their seal as they are put.
    pub(crate) seal_at_put: Option<SealAtPut<'a>>,
}

/// Gives each new blob of a transaction that will commit to the file (not
/// logged) its file pages and seals it at once, while the value just
/// copied into it is in cache: sealed at commit, a load of large values
/// read every blob back from memory to checksum it (with 4,000-byte
/// values, 1,000 to a commit, 4 MB of them; benchmarks.md, session 50).
/// The commit writes the blob as sealed (`txn::commit`). Never for a
/// value the caller writes after the put (`WriteTxn::put_reserve`), whose
/// checksum would not hold, nor for a transaction placed in the arena.
pub(crate) struct SealAtPut<'a> {
    pub(crate) free: &'a mut FreeSpace,
    pub(crate) ahead: &'a mut TakenAhead,
    /// The page count of the transaction's base: the file's end.
    pub(crate) base_pages: u64,
    /// The txn the transaction commits as.
    pub(crate) txn: u64,
}

impl SealAtPut<'_> {
    /// The page number and txn a new blob of `pages` pages is sealed as.
    fn place(&mut self, pages: u64) -> (u64, u64) {
        (self.ahead.run(self.free, self.base_pages, pages), self.txn)
    }
}

/// A value to store: its bytes, or `len` zeros (a value reserved to be
/// written in place: `WriteTxn::put_reserve`, `WriteTxn::put_writer`),
/// which an overflow blob gets from zeroed memory, with no buffer of
/// zeros as long as the value.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Value<'v> {
    Bytes(&'v [u8]),
    Zeros(usize),
}

impl Value<'_> {
    pub(crate) fn len(&self) -> usize {
        match self {
            Value::Bytes(v) => v.len(),
            Value::Zeros(len) => *len,
        }
    }

    /// The bytes, for the inline paths (a zero value that fits in a
    /// leaf cell is shorter than a page).
    fn bytes(&self) -> std::borrow::Cow<'_, [u8]> {
        match self {
            Value::Bytes(v) => std::borrow::Cow::Borrowed(v),
            Value::Zeros(len) => std::borrow::Cow::Owned(vec![0; *len]),
        }
    }
}

/// One level of the path from the root: the dirty page and the slot taken.
#[derive(Clone, Copy, Default)]
struct Step {
    page: u64,
    slot: usize,
}

/// What `TreeWriter::put_in_committed_leaf` made of a committed leaf.
enum CommittedLeaf {
    /// Its dirty copy, for the put to go on into.
    Copied(u64),
    /// The put is done: the leaf split in one pass.
    Split(Halves),
}

impl<'a> TreeWriter<'a> {
    fn source(&self) -> WriteSource<'_> {
        WriteSource {
            base: self.base,
            dirty: self.dirty,
        }
    }

    /// The dirty copy of page `pgno`, making one if it is committed, or if
    /// it is a dirty page a savepoint froze (copy-on-write within the
    /// transaction: the frozen page keeps the savepoint's state).
    fn touch(&mut self, pgno: u64, txn: u64, sum: u64, level: u32) -> Result<u64> {
        // Dirty and not frozen, in one compare (`DirtyPages::editable_from`).
        if pgno >= self.dirty.editable_from {
            return Ok(pgno);
        }
        if pgno & DIRTY_BIT != 0 {
            return Ok(self.dirty.supersede(pgno));
        }
        let node = self.committed_node(pgno, txn, sum, level)?;
        self.copy_committed(node, txn)
    }

    /// The dirty copy of committed page `node`, verified (`verified`) and
    /// written by `txn`, which is recorded as freed by this transaction.
    /// An arena leaf's copy takes the values of its overlay, if it has one
    /// (`storage::overlay`).
    fn copy_committed(&mut self, node: Node<'a>, txn: u64) -> Result<u64> {
        let copy = self.dirty.add_copy(node.bytes);
        if let Some(overlay) = self.overlay_of(&node) {
            apply_overlay(self.dirty.get_mut(copy), copy, &overlay)?;
        }
        self.freed.push(Freed::new(
            Extent {
                start: node.pgno,
                len: 1,
            },
            txn,
        ));
        Ok(copy)
    }

    /// The value overlay of committed page `node`, if it is a leaf with
    /// one (`storage::overlay`): whoever takes the leaf's cells must take
    /// the overlay's entries with them.
    fn overlay_of(&self, node: &Node<'a>) -> Option<OverlayPage<'a>> {
        if !node.is_leaf {
            return None;
        }
        self.base.overlay_page(node.pgno)
    }

    /// A committed page about to be copied into the write path.
    fn committed_node(&self, pgno: u64, txn: u64, sum: u64, level: u32) -> Result<Node<'a>> {
        self.verified(
            node_at(self.base, pgno, txn, level, Reads::Whole)?,
            txn,
            sum,
        )
    }

    /// `node`, a committed page read at its level, once verified. Its
    /// checksum is verified here, since the copy gets a new, valid checksum
    /// at commit: damage must not be laundered. Every cell and reference is
    /// validated too, because the editors trust dirty pages.
    #[inline(always)]
    fn verified(&self, node: Node<'a>, txn: u64, sum: u64) -> Result<Node<'a>> {
        if node.pgno & ARENA_BIT != 0 {
            // An arena page is this process's memory, sealed from a dirty
            // page the editors made: nothing from disk to distrust.
            return Ok(node);
        }
        verify_page(node.bytes, node.pgno, txn, sum)?;
        node.check_cells()?;
        Ok(node)
    }

    /// Where the value of `key` lies, just stored by a put: the dirty page
    /// (a leaf for an inline value, the blob for an overflow value) and the
    /// byte offset of the value in it, so that a caller may fill in a value
    /// it reserved (`WriteTxn::put_reserve`).
    pub(crate) fn value_at(&self, tree: &TreeState, key: &[u8]) -> Result<(u64, usize)> {
        let missing = || Error::Corrupted {
            page: None,
            detail: "a key just stored is not in its tree".into(),
        };
        if tree.root.is_empty() {
            return Err(missing());
        }
        let src = self.source();
        let leaf = find_leaf(&src, tree.root, key)?;
        let slot = leaf.search_leaf(key)?.map_err(|_| missing())?;
        let (page, at) = match leaf.leaf_entry(slot)?.1 {
            LeafValue::Inline(v) => (
                leaf.pgno,
                v.as_ptr() as usize - leaf.bytes.as_ptr() as usize,
            ),
            LeafValue::Overflow { pgno, .. } => (pgno, BLOB_HEADER_LEN),
        };
        if page & DIRTY_BIT == 0 {
            return Err(Error::corrupted_page(
                page,
                "a value just stored is not in a dirty page",
            ));
        }
        Ok((page, at))
    }

    /// Frees page `pgno`, written by `txn` if it is committed.
    fn free_page(&mut self, pgno: u64, txn: u64) {
        if pgno & DIRTY_BIT != 0 {
            self.dirty.free(pgno);
        } else {
            self.freed.push(Freed::new(
                Extent {
                    start: pgno,
                    len: 1,
                },
                txn,
            ));
        }
    }

    /// Frees the overflow blob of a value of `len` bytes (its leaf cell's
    /// record); returns the pages it held.
    fn free_blob(&mut self, pgno: u64, txn: u64, len: u64) -> Result<u64> {
        if pgno & DIRTY_BIT != 0 {
            let pages = (self.dirty.get(pgno).len() / self.limits.page_size) as u64;
            self.dirty.free(pgno);
            return Ok(pages);
        }
        let run = self.base.blob_run(pgno)?;
        page::blob_data(run, pgno, expected_txn(pgno, txn), Some(len))?;
        // As many pages as the cell's value needs: not the header's count
        // unchecked, which damage would make free other values' pages.
        let pages = page::value_run_pages(run, pgno, len, self.limits.page_size)?;
        self.freed.push(Freed::new(
            Extent {
                start: pgno,
                len: pages,
            },
            txn,
        ));
        Ok(pages)
    }

    /// Checks a key and value against the limits; nothing is written on error.
    pub(crate) fn check_sizes(&self, key: &[u8], value_len: usize) -> Result<()> {
        if key.len() > self.limits.max_key {
            return Err(Error::KeyTooLarge {
                len: key.len(),
                max: self.limits.max_key,
            });
        }
        if value_len > crate::MAX_VALUE_LEN {
            return Err(Error::ValueTooLarge {
                len: value_len,
                max: crate::MAX_VALUE_LEN,
            });
        }
        Ok(())
    }

    /// Inserts or replaces `key`.
    /// The caller has checked the sizes (`check_sizes`).
    pub(crate) fn put(&mut self, tree: &mut TreeState, key: &[u8], value: Value<'_>) -> Result<()> {
        debug_assert!(self.check_sizes(key, value.len()).is_ok());
        if tree.root.is_empty() {
            let cell = self.new_cell(tree, key, value);
            tree.root = Root {
                pgno: self.dirty.add_page(self.limits.page_size, true, &[&cell]),
                txn: 0,
                sum: 0,
                depth: 1,
            };
            tree.leaf_pages += 1;
            tree.entries += 1;
            return Ok(());
        }
        // A run of puts into one leaf (a sequential load) skips the descent.
        if let Some(leaf) = self.finger.leaf_for(self.dirty, tree.root.pgno, key)? {
            if self.put_in_leaf(tree, leaf, key, value)? {
                return Ok(());
            }
        }
        self.put_from_root(tree, key, value, false)
    }

    /// `put` through a descent from the root, splitting the leaf (and the
    /// branches above it) if the entry does not fit. `leaf_is_full`: the
    /// caller found that the leaf the key goes to has no room for it, so
    /// the leaf splits without a second look.
    fn put_from_root(
        &mut self,
        tree: &mut TreeState,
        key: &[u8],
        value: Value<'_>,
        leaf_is_full: bool,
    ) -> Result<()> {
        check_root(tree.root)?;
        let mut path = [Step::default(); MAX_DEPTH];
        let mut rightmost = true;
        let mut leftmost = true;
        let root = tree.root;
        let mut id = self.touch(root.pgno, root.txn, root.sum, root.depth)?;
        tree.root.pgno = id;
        for level in (2..=tree.root.depth).rev() {
            let node = Node::parse(self.dirty.get(id), id, None)?;
            let slot = node.search_branch(key)?;
            rightmost &= slot + 1 == node.count;
            leftmost &= slot == 0;
            let (child, child_txn) = node.child(slot)?;
            let child_sum = node.child_sum(slot)?;
            path[(tree.root.depth - level) as usize] = Step { page: id, slot };
            let committed = child & DIRTY_BIT == 0;
            let child_id = if level == 2 && committed && !leaf_is_full {
                // A committed leaf: it may split in one pass, with its
                // overlay, instead of by a copy that is split again (a
                // dirty one, editable or frozen, goes by `touch`).
                let child = (child, child_txn, child_sum);
                match self.put_in_committed_leaf(tree, child, key, value, rightmost)? {
                    CommittedLeaf::Copied(copy) => copy,
                    CommittedLeaf::Split(halves) => {
                        self.dirty.link_child(id, slot, halves.left);
                        *self.finger = Finger::default();
                        let depth = tree.root.depth as usize - 1;
                        return self.grow_parents(tree, &path[..depth], halves, rightmost, None);
                    }
                }
            } else {
                self.touch(child, child_txn, child_sum, level - 1)?
            };
            if child_id != child {
                self.dirty.link_child(id, slot, child_id);
            }
            id = child_id;
        }
        if !leaf_is_full && self.put_in_leaf(tree, id, key, value)? {
            *self.finger = Finger {
                root: tree.root.pgno,
                leaf: id,
                leftmost,
                rightmost,
            };
            return Ok(());
        }
        // The leaf splits: the path changes, so no finger until the next put.
        *self.finger = Finger::default();
        let leaf = Node::parse(self.dirty.get(id), id, None)?;
        let slot = match leaf.search_leaf(key)? {
            Ok(i) => {
                if let (_, LeafValue::Overflow { pgno, txn, len, .. }) = leaf.leaf_entry(i)? {
                    tree.overflow_pages -= self.free_blob(pgno, txn, len)?;
                }
                remove_cell(self.dirty.get_mut(id), i);
                i
            }
            Err(i) => {
                tree.entries += 1;
                i
            }
        };
        let cell = self.new_cell(tree, key, value);
        let appending = rightmost && slot == Node::parse(self.dirty.get(id), id, None)?.count;
        let (separator, right) = self.split(id, slot, cell, appending, true);
        tree.leaf_pages += 1;
        // A split at the end leaves the new key alone in a new last leaf:
        // the finger moves there, so that a sequential load descends once
        // per leaf, not once per key after each split.
        let new_last_leaf = appending.then_some(right);
        let halves = Halves {
            left: id,
            separator,
            right,
        };
        let depth = tree.root.depth as usize - 1;
        self.grow_parents(tree, &path[..depth], halves, rightmost, new_last_leaf)
    }

    /// The put's way into committed leaf `pgno` (written by `txn`, its
    /// checksum `sum`), the child of the last branch of a descent: a
    /// split in one pass when the put adds a key the leaf and its overlay
    /// leave no room for (`btree::leaf_split`), which counts the new
    /// entry and leaf; else the leaf's dirty copy (`copy_committed`), for
    /// the put to go on into. A key past the tree's last leaf's cells
    /// (`rightmost`: the leaf is the last) goes the usual way, whose split
    /// at the end leaves the full leaf as it is (a sorted load's).
    fn put_in_committed_leaf(
        &mut self,
        tree: &mut TreeState,
        (pgno, txn, sum): (u64, u64, u64),
        key: &[u8],
        value: Value<'_>,
        rightmost: bool,
    ) -> Result<CommittedLeaf> {
        debug_assert!(pgno & DIRTY_BIT == 0, "a committed leaf");
        let node = self.committed_node(pgno, txn, sum, 1)?;
        let value_bytes = match value {
            Value::Bytes(v) if self.limits.value_is_inline(key.len(), v.len()) => Some(v),
            _ => None,
        };
        if let (Some(v), true) = (value_bytes, node.is_leaf) {
            let overlay = self.overlay_of(&node);
            // The bytes the leaf would need at most (its cell area's holes
            // counted): a leaf that surely has room is copied with no list
            // of its cells made.
            let inserted = overlay.as_ref().map_or(0, |o| {
                let (inserts, key_value_bytes) = o.inserted_cells();
                key_value_bytes + inserts * Node::leaf_cell_room(0, 0)
            });
            let at_most = node.used_at_most() + inserted + Node::leaf_cell_room(key.len(), v.len());
            let past_last = |slot: usize| rightmost && slot == node.count;
            if at_most > self.limits.page_size
                && node.search_leaf(key)?.is_err_and(|slot| !past_last(slot))
            {
                let page_size = self.limits.page_size;
                let halves =
                    split_committed_leaf(&node, overlay.as_ref(), key, v, self.dirty, page_size)?;
                if let Some(halves) = halves {
                    self.freed.push(Freed::new(
                        Extent {
                            start: node.pgno,
                            len: 1,
                        },
                        txn,
                    ));
                    tree.entries += 1;
                    tree.leaf_pages += 1;
                    return Ok(CommittedLeaf::Split(halves));
                }
            }
        }
        Ok(CommittedLeaf::Copied(self.copy_committed(node, txn)?))
    }

    /// Inserts the separator of a split's `halves` into the branches of
    /// `path` above them (the branch of the leaf's parent last), splitting
    /// each branch that has no room, and a new root above the old one if
    /// it split too. `rightmost`: the split leaf was the tree's last (a
    /// branch split at its end then leaves its full half as it is);
    /// `new_last_leaf`: the leaf the finger moves to after a split at the
    /// end of the tree.
    fn grow_parents(
        &mut self,
        tree: &mut TreeState,
        path: &[Step],
        halves: Halves,
        rightmost: bool,
        new_last_leaf: Option<u64>,
    ) -> Result<()> {
        let (mut sep, mut right) = (halves.separator, halves.right);
        for step in path.iter().rev() {
            let branch_cell = branch_cell(&sep, right, 0, 0);
            if insert_cell(self.dirty.get_mut(step.page), step.slot + 1, &branch_cell) {
                self.dirty.hint_parent(right, step.page, step.slot + 1);
                self.finger_on_last_leaf(tree, new_last_leaf);
                return Ok(());
            }
            let count = Node::parse(self.dirty.get(step.page), step.page, None)?.count;
            let appending = rightmost && step.slot + 1 == count;
            (sep, right) = self.split(step.page, step.slot + 1, branch_cell, appending, false);
            tree.branch_pages += 1;
        }
        // The root split: a new root above the two halves.
        let cells = [
            branch_cell(&[], tree.root.pgno, 0, 0),
            branch_cell(&sep, right, 0, 0),
        ];
        tree.root.pgno = self.dirty.add_page(self.limits.page_size, false, &cells);
        tree.root.depth += 1;
        tree.branch_pages += 1;
        if tree.root.depth as usize > MAX_DEPTH {
            return Err(Error::Corrupted {
                page: None,
                detail: "tree depth limit reached".into(),
            });
        }
        self.finger_on_last_leaf(tree, new_last_leaf);
        Ok(())
    }

    /// Points the finger at `leaf`, the new last leaf of `tree` after a
    /// split at the end (nothing when the split was elsewhere).
    fn finger_on_last_leaf(&mut self, tree: &TreeState, leaf: Option<u64>) {
        if let Some(leaf) = leaf {
            *self.finger = Finger {
                root: tree.root.pgno,
                leaf,
                leftmost: false,
                rightmost: true,
            };
        }
    }

    /// `put` of a key the caller says is past every key of the tree (a
    /// sorted load), checked first: `Ok(false)`, with nothing changed, when
    /// it is not. The check is one compare while the finger is on the last
    /// leaf, as it stays through a sorted load (splits at the end move it
    /// to the new last leaf); otherwise one read-only descent finds the
    /// last key. The put itself then splits full leaves at the end, so a
    /// sorted load leaves full pages.
    #[inline]
    pub(crate) fn append(
        &mut self,
        tree: &mut TreeState,
        key: &[u8],
        value: Value<'_>,
    ) -> Result<bool> {
        if !tree.root.is_empty() {
            let f = *self.finger;
            if f.root == tree.root.pgno && f.rightmost {
                // The sorted load's common case: one decode of the last
                // key, straight into the gap.
                match value {
                    Value::Bytes(bytes) if self.limits.value_is_inline(key.len(), bytes.len()) => {
                        match append_leaf_inline(self.dirty.get_mut(f.leaf), key, bytes) {
                            LeafAppend::Appended => {
                                tree.entries += 1;
                                return Ok(true);
                            }
                            LeafAppend::OutOfOrder => return Ok(false),
                            LeafAppend::Declined => {}
                        }
                    }
                    _ => {}
                }
                let leaf = Node::parse(self.dirty.get(f.leaf), f.leaf, None)?;
                if let Some(last) = leaf.count.checked_sub(1) {
                    if compare_keys(key, leaf.key(last)?).is_le() {
                        return Ok(false);
                    }
                    // The finger's leaf is the tree's last: the key goes at
                    // its end, with no second search (`put` would compare
                    // it with the leaf's first and last keys again).
                    let end = leaf.count;
                    if self.insert_in_leaf(tree, f.leaf, end, key, value)? {
                        return Ok(true);
                    }
                    // The last leaf is full: it splits at its end, with no
                    // second try to fit the key there (a count of the
                    // bytes in use per try).
                    self.put_from_root(tree, key, value, true)?;
                    return Ok(true);
                }
            }
            let src = self.source();
            let mut cursor = Cursor::for_one_entry(&src, tree.root);
            cursor.seek_last()?;
            if cursor.is_valid() && compare_keys(key, cursor.key()?).is_le() {
                return Ok(false);
            }
        }
        self.put(tree, key, value)?;
        Ok(true)
    }

    /// The leaf cell for `key` and `value`, with the value in a new blob
    /// when it does not fit inline.
    fn new_cell(&mut self, tree: &mut TreeState, key: &[u8], value: Value<'_>) -> Vec<u8> {
        if self.limits.value_is_inline(key.len(), value.len()) {
            leaf_cell_inline(key, &value.bytes())
        } else {
            let id = self.new_overflow(tree, value);
            leaf_cell_overflow(key, value.len() as u64, id, 0, 0)
        }
    }

    fn new_overflow(&mut self, tree: &mut TreeState, value: Value<'_>) -> u64 {
        tree.overflow_pages += self.limits.blob_pages(value.len());
        let page_size = self.limits.page_size;
        match value {
            Value::Bytes(v) => {
                let seal = self
                    .seal_at_put
                    .as_mut()
                    .map(|s| s.place(self.limits.blob_pages(v.len())));
                self.dirty.add_blob(page_size, v, seal)
            }
            // Zeros the caller fills in afterwards: sealed at commit.
            Value::Zeros(len) => self.dirty.add_zeroed_blob(page_size, len),
        }
    }

    /// Puts `key` into dirty leaf `id` if it fits there without a split:
    /// a value of the same length replaces the old one in place; otherwise
    /// the cell is written straight into the page. `false` (nothing
    /// changed) if the leaf would have to split.
    fn put_in_leaf(
        &mut self,
        tree: &mut TreeState,
        id: u64,
        key: &[u8],
        value: Value<'_>,
    ) -> Result<bool> {
        let inline = self.limits.value_is_inline(key.len(), value.len());
        let leaf = Node::parse(self.dirty.get(id), id, None)?;
        // Appending (a sequential load) needs one compare, not a search.
        let found = match leaf.count.checked_sub(1) {
            Some(last) if compare_keys(key, leaf.key(last)?).is_gt() => Err(leaf.count),
            _ => leaf.search_leaf(key)?,
        };
        let i = match found {
            Err(slot) => return self.insert_in_leaf(tree, id, slot, key, value),
            Ok(i) => i,
        };
        let old_len = leaf.cell(i)?.len();
        let old_blob = match leaf.leaf_entry(i)?.1 {
            LeafValue::Inline(old) if inline && old.len() == value.len() => {
                let at = old.as_ptr() as usize - leaf.bytes.as_ptr() as usize;
                self.dirty.get_mut(id)[at..at + value.len()].copy_from_slice(&value.bytes());
                return Ok(true);
            }
            LeafValue::Inline(_) => None,
            LeafValue::Overflow { pgno, txn, len, .. } => Some((pgno, txn, len)),
        };
        if !cell_fits(self.dirty.get(id), self.leaf_cell_len(key, value), old_len) {
            return Ok(false);
        }
        if let Some((pgno, txn, len)) = old_blob {
            tree.overflow_pages -= self.free_blob(pgno, txn, len)?;
        }
        remove_cell(self.dirty.get_mut(id), i);
        self.write_leaf_cell(tree, id, i, key, value);
        Ok(true)
    }

    /// Inserts a new `key` at `slot` of dirty leaf `id` if it fits without
    /// a split (`false`, nothing changed, if not).
    fn insert_in_leaf(
        &mut self,
        tree: &mut TreeState,
        id: u64,
        slot: usize,
        key: &[u8],
        value: Value<'_>,
    ) -> Result<bool> {
        if !cell_fits(self.dirty.get(id), self.leaf_cell_len(key, value), 0) {
            return Ok(false);
        }
        tree.entries += 1;
        self.write_leaf_cell(tree, id, slot, key, value);
        Ok(true)
    }

    /// Bytes of the leaf cell of `key` and `value` (a reference if the
    /// value goes to a blob).
    fn leaf_cell_len(&self, key: &[u8], value: Value<'_>) -> usize {
        let body = if self.limits.value_is_inline(key.len(), value.len()) {
            value.len()
        } else {
            OVERFLOW_REF_LEN
        };
        LEAF_CELL_HEADER + key.len() + body
    }

    /// Writes the cell of `key` and `value` at `slot` of dirty leaf `id`,
    /// which the caller checked it fits (`cell_fits`), with the value in a
    /// new blob if it does not fit inline.
    fn write_leaf_cell(
        &mut self,
        tree: &mut TreeState,
        id: u64,
        slot: usize,
        key: &[u8],
        value: Value<'_>,
    ) {
        let inline = self.limits.value_is_inline(key.len(), value.len());
        let header = leaf_cell_header(key.len(), value.len() as u64, !inline);
        let fitted = if inline {
            insert_cell_parts(
                self.dirty.get_mut(id),
                slot,
                &[&header, key, &value.bytes()],
            )
        } else {
            let blob = self.new_overflow(tree, value);
            let reference = overflow_ref(blob, 0, 0);
            insert_cell_parts(self.dirty.get_mut(id), slot, &[&header, key, &reference])
        };
        assert!(fitted, "a cell that fits was refused");
    }

    /// Splits dirty page `id` while inserting `cell` at `slot`. The left half
    /// stays in `id`; returns the separator key and the new right page.
    fn split(
        &mut self,
        id: u64,
        slot: usize,
        cell: Vec<u8>,
        appending: bool,
        is_leaf: bool,
    ) -> (Vec<u8>, u64) {
        if appending {
            return self.split_at_end(id, cell, is_leaf);
        }
        // The page's cells plus the new one, read from a copy of the page
        // (the page itself is rewritten as the left half): no buffer per
        // cell.
        thread_local! {
            static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        SCRATCH.with(|scratch| {
            let mut scratch = scratch.borrow_mut();
            scratch.clear();
            scratch.extend_from_slice(self.dirty.get(id));
            let old = Node::parse(&scratch, id, None).expect("dirty page is well formed");
            let n = old.count + 1;
            let cell_at = |i: usize| -> &[u8] {
                match i.cmp(&slot) {
                    std::cmp::Ordering::Less => old.cell(i).expect("dirty cell"),
                    std::cmp::Ordering::Equal => &cell,
                    std::cmp::Ordering::Greater => old.cell(i - 1).expect("dirty cell"),
                }
            };
            // Split by bytes in the middle: both halves fit
            // (`page::split_point`).
            let size = |i: usize| page::slotted_size(cell_at(i).len());
            let total: usize = (0..n).map(size).sum();
            let k = page::split_point(n, size, total, self.limits.usable());
            let page_size = self.limits.page_size;
            let first;
            let (sep, right) = if is_leaf {
                let left_last = cell_key(cell_at(k - 1), true);
                let right_first = cell_key(cell_at(k), true);
                let sep = shortest_separator(left_last, right_first).to_vec();
                let right = self
                    .dirty
                    .add_page_from(page_size, true, n - k, |i| cell_at(k + i));
                (sep, right)
            } else {
                // The middle cell's key moves up; its child becomes the
                // right page's first child, under the empty key.
                let mid = cell_at(k);
                let sep = cell_key(mid, false).to_vec();
                first = branch_cell(
                    &[],
                    page::u64_at(mid, 0),
                    page::u64_at(mid, 8),
                    page::u64_at(mid, 16),
                );
                let right = self.dirty.add_page_from(page_size, false, n - k, |i| {
                    if i == 0 {
                        &first[..]
                    } else {
                        cell_at(k + i)
                    }
                });
                (sep, right)
            };
            fill_page_from(self.dirty.get_mut(id), is_leaf, k, cell_at);
            (sep, right)
        })
    }

    /// The split of sequential inserts: the full page stays as it is, and
    /// the new cell (past its last key) starts a new right page.
    fn split_at_end(&mut self, id: u64, cell: Vec<u8>, is_leaf: bool) -> (Vec<u8>, u64) {
        let page_size = self.limits.page_size;
        let left = Node::parse(self.dirty.get(id), id, None).expect("dirty page is well formed");
        assert!(left.count >= 1, "split of an empty page");
        if is_leaf {
            let left_last = left.key(left.count - 1).expect("dirty cell is well formed");
            let sep = shortest_separator(left_last, cell_key(&cell, true)).to_vec();
            (sep, self.dirty.add_page(page_size, true, &[&cell]))
        } else {
            // The new cell's key moves up; its child is the right page's
            // first child, under the empty key.
            let sep = cell_key(&cell, false).to_vec();
            let first = branch_cell(
                &[],
                page::u64_at(&cell, 0),
                page::u64_at(&cell, 8),
                page::u64_at(&cell, 16),
            );
            (sep, self.dirty.add_page(page_size, false, &[first]))
        }
    }

    /// Removes `key`; returns whether it was there.
    pub(crate) fn delete(&mut self, tree: &mut TreeState, key: &[u8]) -> Result<bool> {
        // Merges may free or widen the finger's leaf.
        *self.finger = Finger::default();
        let mut path = [Step::default(); MAX_DEPTH];
        if !self.copy_path_to(tree, key, &mut path)? {
            return Ok(false);
        }
        let branches = tree.root.depth as usize - 1;
        let Step { page: leaf, slot } = path[branches];
        let (_, value) = Node::parse(self.dirty.get(leaf), leaf, None)?.leaf_entry(slot)?;
        if let LeafValue::Overflow { pgno, txn, len, .. } = value {
            tree.overflow_pages -= self.free_blob(pgno, txn, len)?;
        }
        remove_cell(self.dirty.get_mut(leaf), slot);
        tree.entries -= 1;
        self.rebalance(tree, &path[..branches], leaf)?;
        Ok(true)
    }

    /// Removes, from the leaf that holds `start`, the entries from `start`
    /// on whose keys are within `upper`, and returns how many: 0, with no
    /// page copied, if `start` is not in the tree. One descent and one copy
    /// of the path for the whole run, then the rebalancing of a single
    /// delete, so that a range is removed a leaf at a time rather than a
    /// key at a time. Keys in range past the leaf's last one are left for
    /// the caller's next run.
    pub(crate) fn delete_run(
        &mut self,
        tree: &mut TreeState,
        start: &[u8],
        upper: Bound<&[u8]>,
    ) -> Result<u64> {
        // Merges may free or widen the finger's leaf.
        *self.finger = Finger::default();
        let mut path = [Step::default(); MAX_DEPTH];
        if !self.copy_path_to(tree, start, &mut path)? {
            return Ok(0);
        }
        let branches = tree.root.depth as usize - 1;
        let Step {
            page: id,
            slot: first,
        } = path[branches];
        // The run's blobs are freed as it is read; its cells go after.
        let mut end = first;
        loop {
            let leaf = Node::parse(self.dirty.get(id), id, None)?;
            if end == leaf.count {
                break;
            }
            let (key, value) = leaf.leaf_entry(end)?;
            if !within(key, upper) {
                break;
            }
            if let LeafValue::Overflow { pgno, txn, len, .. } = value {
                tree.overflow_pages -= self.free_blob(pgno, txn, len)?;
            }
            end += 1;
        }
        for _ in first..end {
            remove_cell(self.dirty.get_mut(id), first);
        }
        let count = (end - first) as u64;
        tree.entries -= count;
        self.rebalance(tree, &path[..branches], id)?;
        Ok(count)
    }

    /// Makes the path to `key` editable for a delete, if `key` is in the
    /// tree: fills `path[..depth]` with the dirty page and slot of each
    /// level, the leaf's last. `false`, with no page copied, if it is not
    /// (a miss must not dirty any page). One descent: a copy is byte for
    /// byte the page searched, so the slots found hold in the copies, and
    /// the committed pages read on the way down are copied as read, not
    /// looked up again.
    fn copy_path_to(
        &mut self,
        tree: &mut TreeState,
        key: &[u8],
        path: &mut [Step; MAX_DEPTH],
    ) -> Result<bool> {
        if tree.root.is_empty() {
            return Ok(false);
        }
        check_root(tree.root)?;
        let depth = tree.root.depth as usize;
        // Each level's page if it is committed, to be copied as read, not
        // looked up again (a dirty page is not kept: `touch` takes it).
        let mut read: [&'a [u8]; MAX_DEPTH] = [&[]; MAX_DEPTH];
        let base = self.base;
        let src = self.source();
        let (mut pgno, mut txn) = (tree.root.pgno, tree.root.txn);
        for d in 0..depth {
            let level = (depth - d) as u32;
            let node = if pgno & DIRTY_BIT == 0 {
                let node = node_at(base, pgno, txn, level, Reads::Whole)?;
                read[d] = node.bytes;
                node
            } else {
                node_at(&src, pgno, txn, level, Reads::Search)?
            };
            if level == 1 {
                match node.search_leaf(key)? {
                    // Its overlay deleted the key: not in the tree.
                    Ok(slot) if is_deleted(&src, &node, slot)? => return Ok(false),
                    Ok(slot) => path[d].slot = slot,
                    // Its overlay inserts the key: in the copy, which takes
                    // the insert (the slot is found there, below).
                    Err(_) if inserted_value(&src, &node, key)?.is_some() => {}
                    Err(_) => return Ok(false),
                }
            } else {
                path[d].slot = node.search_branch(key)?;
                (pgno, txn) = node.child(path[d].slot)?;
            }
        }
        let root = tree.root;
        let (mut pgno, mut txn, mut sum) = (root.pgno, root.txn, root.sum);
        for d in 0..depth {
            let id = if pgno & DIRTY_BIT == 0 {
                // Its kind and txn were checked on the way down.
                let node = self.verified(Node::parse(read[d], pgno, None)?, txn, sum)?;
                self.copy_committed(node, txn)?
            } else {
                self.touch(pgno, txn, sum, (depth - d) as u32)?
            };
            match d.checked_sub(1) {
                None => tree.root.pgno = id,
                Some(up) if id != pgno => {
                    self.dirty.link_child(path[up].page, path[up].slot, id);
                }
                Some(_) => {}
            }
            path[d].page = id;
            if d + 1 < depth {
                let node = Node::parse(self.dirty.get(id), id, None)?;
                (pgno, txn) = node.child(path[d].slot)?;
                sum = node.child_sum(path[d].slot)?;
            } else if pgno & DIRTY_BIT == 0 && self.base.overlay_page(pgno).is_some() {
                // The copy of a committed leaf took its overlay, whose
                // deletes moved the slots after theirs and whose inserts
                // added cells: the key's slot is found again (it is there:
                // the search above saw it live).
                let leaf = Node::parse(self.dirty.get(id), id, None)?;
                path[d].slot = leaf.search_leaf(key)?.map_err(|_| Error::Corrupted {
                    page: None,
                    detail: "a key its leaf's overlay keeps is not in the leaf's copy".into(),
                })?;
            }
        }
        Ok(true)
    }

    /// Copies file leaf `leaf`, which has a value overlay in the base's
    /// span (`storage::arena::FileOverlays`), into the dirty pages with its
    /// path, the overlay applied, as a checkpoint must (no page reaches
    /// the file with an overlay, and the span's table ends with it):
    /// `Ok(false)`, nothing changed, if `tree` does not reach the leaf.
    /// The descent follows a key of the leaf that its overlay keeps (one
    /// always is: `txn::overlaid`), so it ends in the leaf if the tree
    /// holds it. The copy merges with a sibling if its tombstones left it
    /// underfull (`rebalance`), which may free another such leaf.
    pub(crate) fn fold_file_leaf(&mut self, tree: &mut TreeState, leaf: u64) -> Result<bool> {
        let Some(key) = self.key_of_overlaid_leaf(tree, leaf)? else {
            return Ok(false);
        };
        let mut path = [Step::default(); MAX_DEPTH];
        // A key the leaf's overlay keeps leads the descent to the leaf,
        // unless the file is damaged (a branch routes it elsewhere).
        if !self.copy_path_to(tree, key, &mut path)? {
            return Err(Error::corrupted_page(
                leaf,
                "a key of the leaf's value overlay does not lead to the leaf",
            ));
        }
        // Its tombstones took cells out, as deletes would have: the copy
        // merges with a sibling if underfull, as theirs would have.
        let branches = tree.root.depth as usize - 1;
        self.rebalance(tree, &path[..branches], path[branches].page)?;
        Ok(true)
    }

    /// Copies the branches on the path to file leaf `leaf`, which has a
    /// value overlay in the base's span, by `key`, one of its keys
    /// ([`TreeWriter::first_key_of_overlaid_leaf`]), into the dirty pages,
    /// and leaves the leaf itself where it is, its overlay with it (its
    /// parent's copy refers to it as the original did): a checkpoint in
    /// steps then finds a changed page above every such leaf, and folds
    /// each overlay into the copy it writes (`txn::checkpoint_steps`).
    /// The leaf is not read: the relayout before the steps verified it
    /// (`copy_branches_above_wanted`), and a leaf is never written while a
    /// snapshot reads it. Returns where the copy refers to the leaf:
    /// `Some(Some((parent, slot)))`, or `Some(None)` when the leaf is the
    /// root; `None` if `tree` does not reach the leaf by `key`, in which
    /// case the branches on the key's path are copied all the same (copies
    /// of unchanged pages: one descent, not a look before it, since the
    /// callers know the leaf's tree but for a safety net).
    pub(crate) fn copy_branches_above(
        &mut self,
        tree: &mut TreeState,
        leaf: u64,
        key: &[u8],
    ) -> Result<Option<Option<(u64, usize)>>> {
        if tree.root.is_empty() {
            return Ok(None);
        }
        let depth = tree.root.depth as usize;
        let root = tree.root;
        let (mut pgno, mut txn, mut sum) = (root.pgno, root.txn, root.sum);
        let mut parent: Option<(u64, usize)> = None;
        for d in 0..depth - 1 {
            let id = self.copy_on_path(tree, parent, pgno, txn, sum, (depth - d) as u32)?;
            let node = Node::parse(self.dirty.get(id), id, None)?;
            let slot = node.search_branch(key)?;
            (pgno, txn) = node.child(slot)?;
            sum = node.child_sum(slot)?;
            parent = Some((id, slot));
        }
        if pgno != leaf {
            return Ok(None);
        }
        Ok(Some(parent))
    }

    /// Copies branch `pgno` (at `level`) of a path into the dirty pages, if
    /// it is not a dirty page already, and links the copy from its
    /// parent's (`parent`: the parent's copy and the slot), or makes it
    /// the root. Returns the copy.
    fn copy_on_path(
        &mut self,
        tree: &mut TreeState,
        parent: Option<(u64, usize)>,
        pgno: u64,
        txn: u64,
        sum: u64,
        level: u32,
    ) -> Result<u64> {
        let id = self.touch(pgno, txn, sum, level)?;
        match parent {
            None => tree.root.pgno = id,
            Some((up, slot)) if id != pgno => self.dirty.link_child(up, slot, id),
            Some(_) => {}
        }
        Ok(id)
    }

    /// [`TreeWriter::copy_branches_above`] for every file leaf of `tree`
    /// that `wanted` names, in one walk of the tree's branches instead of
    /// a descent per leaf: each branch is read (and a file branch
    /// verified) once, each wanted leaf is verified against the checksum
    /// its parent records, and no other leaf is read. `before_touch` runs
    /// before the branches above a leaf are copied (to lend the dirty
    /// pages arena slots). Pushes each wanted leaf found onto `found`.
    pub(crate) fn copy_branches_above_wanted(
        &mut self,
        tree: &mut TreeState,
        wanted: &dyn Fn(u64) -> bool,
        found: &mut Vec<u64>,
        before_touch: &mut dyn FnMut(&mut DirtyPages),
    ) -> Result<()> {
        let root = tree.root;
        if root.is_empty() {
            return Ok(());
        }
        if root.depth == 1 {
            if is_file_page(root.pgno) && wanted(root.pgno) {
                self.verified_leaf(root.pgno, root.txn, root.sum)?;
                found.push(root.pgno);
            }
            return Ok(());
        }
        let mut path = Vec::with_capacity(root.depth as usize);
        path.push(WalkStep {
            pgno: root.pgno,
            txn: root.txn,
            sum: root.sum,
            slot: 0,
            copy: None,
        });
        let mut walk = Walk {
            wanted,
            found,
            before_touch,
        };
        self.walk_branch(tree, &mut path, &mut walk)
    }

    /// One branch of `copy_branches_above_wanted`'s walk: the last of
    /// `path`, at level `depth - (path.len() - 1)`.
    fn walk_branch(
        &mut self,
        tree: &mut TreeState,
        path: &mut Vec<WalkStep>,
        walk: &mut Walk<'_>,
    ) -> Result<()> {
        let depth = tree.root.depth;
        let level = depth - (path.len() as u32 - 1);
        let step = *path.last().expect("the walk starts at the root");
        // The children's references, copied out: copying the branch
        // (below) changes the dirty pages they would borrow from.
        let children = {
            let node = if step.pgno & DIRTY_BIT != 0 {
                Node::parse(self.dirty.get(step.pgno), step.pgno, None)?
            } else {
                self.committed_node(step.pgno, step.txn, step.sum, level)?
            };
            if node.is_leaf {
                return Err(Error::corrupted_page(
                    step.pgno,
                    "a leaf where the tree's depth puts a branch",
                ));
            }
            let mut children = Vec::with_capacity(node.count);
            for i in 0..node.count {
                let (pgno, txn) = node.child(i)?;
                children.push((pgno, txn, node.child_sum(i)?));
            }
            children
        };
        for (slot, (pgno, txn, sum)) in children.into_iter().enumerate() {
            if level > 2 {
                path.push(WalkStep {
                    pgno,
                    txn,
                    sum,
                    slot,
                    copy: None,
                });
                self.walk_branch(tree, path, walk)?;
                path.pop();
            } else if is_file_page(pgno) && (walk.wanted)(pgno) {
                (walk.before_touch)(self.dirty);
                self.copy_walked_path(tree, path)?;
                self.verified_leaf(pgno, txn, sum)?;
                walk.found.push(pgno);
            }
        }
        Ok(())
    }

    /// Copies the branches of `path` (root first) not copied yet into
    /// the dirty pages, each linked from its parent's copy, as
    /// `copy_branches_above` copies one leaf's.
    fn copy_walked_path(&mut self, tree: &mut TreeState, path: &mut [WalkStep]) -> Result<()> {
        let depth = tree.root.depth;
        for d in 0..path.len() {
            if path[d].copy.is_some() {
                continue;
            }
            let s = path[d];
            let parent = match d {
                0 => None,
                _ => Some((path[d - 1].copy.expect("copied root first"), s.slot)),
            };
            let id = self.copy_on_path(tree, parent, s.pgno, s.txn, s.sum, depth - d as u32)?;
            path[d].copy = Some(id);
        }
        Ok(())
    }

    /// File leaf `pgno`, verified against the txn and checksum its parent
    /// records: the leaf stays as it is, for a checkpoint step to fold, so
    /// damage in it is found now, before any step (a step that failed on
    /// it would stay pending, and every write transaction would fail on it
    /// in turn).
    fn verified_leaf(&self, pgno: u64, txn: u64, sum: u64) -> Result<()> {
        let node = self.verified(Node::parse(self.base.page(pgno)?, pgno, None)?, txn, sum)?;
        if !node.is_leaf {
            return Err(Error::corrupted_page(
                pgno,
                "a branch where the tree's depth puts a leaf",
            ));
        }
        Ok(())
    }

    /// The first key of file leaf `leaf` if it has a value overlay in the
    /// base's span: any key of a leaf's cells leads to it. One read of the
    /// leaf and no descent (which [`TreeWriter::key_of_overlaid_leaf`]
    /// adds, to check that a tree reaches the leaf).
    pub(crate) fn first_key_of_overlaid_leaf(&self, leaf: u64) -> Result<Option<&'a [u8]>> {
        debug_assert!(is_file_page(leaf));
        let base = self.base;
        if base.overlay_page(leaf).is_none() {
            return Ok(None);
        }
        let node = Node::parse(base.page(leaf)?, leaf, None)?;
        if !node.is_leaf || node.count == 0 {
            return Ok(None);
        }
        Ok(Some(node.key(0)?))
    }

    /// A key of file leaf `leaf` that its value overlay keeps (one always
    /// is: `txn::overlaid`), if `tree` reaches the leaf by it; `None` if
    /// the leaf has no overlay, is not a leaf, or is not in `tree`.
    pub(crate) fn key_of_overlaid_leaf(
        &self,
        tree: &TreeState,
        leaf: u64,
    ) -> Result<Option<&'a [u8]>> {
        debug_assert!(is_file_page(leaf));
        if tree.root.is_empty() {
            return Ok(None);
        }
        let base = self.base;
        let Some(overlay) = base.overlay_page(leaf) else {
            return Ok(None);
        };
        let node = Node::parse(base.page(leaf)?, leaf, None)?;
        if !node.is_leaf {
            return Ok(None);
        }
        let mut key = None;
        for i in 0..node.count {
            if overlay.value(i, u64::MAX)? != Some(Overlaid::Deleted) {
                key = Some(node.key(i)?);
                break;
            }
        }
        let Some(key) = key else {
            return Err(Error::corrupted_page(
                leaf,
                "value overlay deletes every entry of its leaf",
            ));
        };
        if find_leaf(&self.source(), tree.root, key)?.pgno != leaf {
            return Ok(None);
        }
        Ok(Some(key))
    }

    /// After a delete from dirty leaf `leaf` at the end of `path`: merges
    /// underfull pages into a sibling, upwards while a merge leaves its
    /// parent underfull, and removes root levels left with one child.
    fn rebalance(&mut self, tree: &mut TreeState, path: &[Step], leaf: u64) -> Result<()> {
        let mut child = leaf;
        for (d, &parent) in path.iter().enumerate().rev() {
            let is_leaf = d + 1 == path.len();
            if self.remove_if_empty(tree, parent, child, is_leaf)? {
                child = parent.page;
                continue;
            }
            if !self.merge_if_underfull(tree, parent, child, is_leaf)? {
                break;
            }
            child = parent.page;
        }
        self.shrink_root(tree)
    }

    /// If dirty page `child` (at `parent.slot`) holds no cell, takes it out
    /// of its parent. A merge would too, but not under a parent with no
    /// other child, which a branch that could not merge (two large
    /// branches, each too full to take the other) may be: without this, an
    /// empty leaf would stay below it. The parent's first key stays empty
    /// (its first child's range now starts at the removed one's); the
    /// parent may be left empty in turn, for the next level to remove.
    fn remove_if_empty(
        &mut self,
        tree: &mut TreeState,
        parent: Step,
        child: u64,
        is_leaf: bool,
    ) -> Result<bool> {
        // Not parsed: an empty branch is not a valid page.
        if page::cell_count(self.dirty.get(child)) > 0 {
            return Ok(false);
        }
        self.dirty.free(child);
        if is_leaf {
            tree.leaf_pages -= 1;
        } else {
            tree.branch_pages -= 1;
        }
        let p = self.dirty.get_mut(parent.page);
        remove_cell(p, parent.slot);
        if parent.slot == 0 && page::cell_count(p) > 0 {
            let pnode = Node::parse(self.dirty.get(parent.page), parent.page, None)?;
            let (first, first_txn) = pnode.child(0)?;
            let first_sum = pnode.child_sum(0)?;
            let cell = branch_cell(&[], first, first_txn, first_sum);
            let p = self.dirty.get_mut(parent.page);
            remove_cell(p, 0);
            let fitted = insert_cell(p, 0, &cell);
            assert!(fitted, "a shorter first cell was refused");
        }
        Ok(true)
    }

    /// If dirty page `child` (at `parent.slot`) is less than a quarter full
    /// and fits in one page with a sibling, merges them into `child`.
    fn merge_if_underfull(
        &mut self,
        tree: &mut TreeState,
        parent: Step,
        child: u64,
        is_leaf: bool,
    ) -> Result<bool> {
        let usable = self.limits.usable();
        let node = Node::parse(self.dirty.get(child), child, None)?;
        // Most deletes leave the page well above its minimum, which its
        // first few cells show: no count of the bytes of every cell.
        if node.uses_at_least(usable / 4)? {
            return Ok(false);
        }
        let used = node.used_bytes()?;
        let pnode = Node::parse(self.dirty.get(parent.page), parent.page, None)?;
        if pnode.count < 2 {
            return Ok(false);
        }
        let (left_slot, right_slot) = if parent.slot + 1 < pnode.count {
            (parent.slot, parent.slot + 1)
        } else {
            (parent.slot - 1, parent.slot)
        };
        let sib_slot = if left_slot == parent.slot {
            right_slot
        } else {
            left_slot
        };
        let (sib, sib_txn) = pnode.child(sib_slot)?;
        let separator = pnode.key(right_slot)?.to_vec();
        let level = if is_leaf { 1 } else { 2 };
        // A committed arena leaf's cells are read with its overlay applied
        // (in a scratch copy), or the merge would lose its newer values.
        let folded: Vec<u8>;
        let sib_node = if sib & DIRTY_BIT != 0 {
            Node::parse(self.dirty.get(sib), sib, None)?
        } else {
            let node = self.committed_node(sib, sib_txn, pnode.child_sum(sib_slot)?, level)?;
            match self.overlay_of(&node) {
                Some(overlay) => {
                    let mut copy = node.bytes.to_vec();
                    apply_overlay(&mut copy, sib, &overlay)?;
                    folded = copy;
                    Node::parse(&folded, sib, None)?
                }
                None => node,
            }
        };
        if sib_node.is_leaf != is_leaf {
            return Err(Error::corrupted_page(sib, "sibling at a different level"));
        }
        let extra = if is_leaf { 0 } else { separator.len() };
        if used + sib_node.used_bytes()? + extra > usable {
            return Ok(false);
        }
        let sib_cells: Vec<Vec<u8>> = (0..sib_node.count)
            .map(|i| sib_node.cell(i).map(<[u8]>::to_vec))
            .collect::<Result<_>>()?;
        let own_cells = cells_of(self.dirty.get(child));
        let (mut left, right) = if sib_slot == left_slot {
            (sib_cells, own_cells)
        } else {
            (own_cells, sib_cells)
        };
        for (i, c) in right.into_iter().enumerate() {
            if i == 0 && !is_leaf {
                left.push(branch_cell(
                    &separator,
                    page::u64_at(&c, 0),
                    page::u64_at(&c, 8),
                    page::u64_at(&c, 16),
                ));
            } else {
                left.push(c);
            }
        }
        fill_page(self.dirty.get_mut(child), is_leaf, &left);
        self.free_page(sib, sib_txn);
        let p = self.dirty.get_mut(parent.page);
        set_child(p, left_slot, child, 0, 0);
        remove_cell(p, right_slot);
        if is_leaf {
            tree.leaf_pages -= 1;
        } else {
            tree.branch_pages -= 1;
        }
        Ok(true)
    }

    /// Removes root levels with a single child, and an empty root leaf.
    fn shrink_root(&mut self, tree: &mut TreeState) -> Result<()> {
        loop {
            let root = tree.root.pgno;
            let node = Node::parse(self.dirty.get(root), root, None)?;
            if node.is_leaf {
                if node.count == 0 {
                    self.dirty.free(root);
                    tree.leaf_pages -= 1;
                    tree.root = Root::default();
                }
                return Ok(());
            }
            if node.count > 1 {
                return Ok(());
            }
            if node.count == 0 {
                // Its only child was taken out, empty (`remove_if_empty`).
                self.dirty.free(root);
                tree.branch_pages -= 1;
                tree.root = Root::default();
                return Ok(());
            }
            let (child, child_txn) = node.child(0)?;
            let child_sum = node.child_sum(0)?;
            self.dirty.free(root);
            tree.branch_pages -= 1;
            tree.root = Root {
                pgno: child,
                txn: child_txn,
                sum: child_sum,
                depth: tree.root.depth - 1,
            };
            if child & DIRTY_BIT == 0 {
                // An untouched page (the sibling of one taken out empty):
                // a committed tree has no level to shrink.
                return Ok(());
            }
        }
    }

    /// Frees every page of a tree (for dropping or clearing it), one visit
    /// per page read. A tree with no overflow values (its counter says so)
    /// has nothing in its leaves to free but the leaves themselves: they
    /// are freed from their parents' records, unread, so freeing it reads
    /// only its branch pages. A counter that is wrong (damage) can only
    /// leave blob pages unfreed, which `check` reports; nothing is freed
    /// twice.
    pub(crate) fn free_tree(&mut self, tree: &TreeState) -> Result<()> {
        *self.finger = Finger::default();
        if tree.root.is_empty() {
            return Ok(());
        }
        check_root(tree.root)?;
        let read_leaves = tree.overflow_pages != 0;
        if tree.root.depth == 1 && !read_leaves {
            self.free_page(tree.root.pgno, tree.root.txn);
            return Ok(());
        }
        self.free_subtree(tree.root.pgno, tree.root.txn, tree.root.depth, read_leaves)
    }

    fn free_subtree(&mut self, pgno: u64, txn: u64, level: u32, read_leaves: bool) -> Result<()> {
        let src = self.source();
        let node = node_at(&src, pgno, txn, level, Reads::Whole)?;
        // What to free is listed first: the node borrows the source.
        let (mut blobs, mut refs) = (Vec::new(), Vec::new());
        for i in 0..node.count {
            if node.is_leaf {
                if let (_, LeafValue::Overflow { pgno, txn, len, .. }) = node.leaf_entry(i)? {
                    blobs.push((pgno, txn, len));
                }
            } else {
                refs.push(node.child(i)?);
            }
        }
        for (p, t, len) in blobs {
            self.free_blob(p, t, len)?;
        }
        for (p, t) in refs {
            if level == 2 && !read_leaves {
                self.free_page(p, t);
            } else {
                self.free_subtree(p, t, level - 1, read_leaves)?;
            }
        }
        self.free_page(pgno, txn);
        Ok(())
    }

    /// Takes out of the tree every subtree that lies wholly within the
    /// key range `(lower, upper)`, if they hold at least
    /// [`PRUNE_MIN_LEAVES`] leaves between them, and returns the entries
    /// they held (0: nothing changed, no page copied). A pruned subtree is
    /// freed from its parent's records: its branches are read, and its
    /// leaves only for their entry counts (and blobs), never copied. Only
    /// the pages on the range's two edge paths are copied and edited, so a
    /// range of a million entries costs a few pages, not a descent and a
    /// rebalancing per leaf. The entries left in range (in the leaves on
    /// the edges, which the range holds only in part) are the caller's to
    /// delete, a leaf at a time (`delete_run`), whose rebalancing then
    /// merges the edges' pages. Pages on the edge paths may be left less
    /// full than a delete leaves them (never empty): the rules of the
    /// `btree` module doc hold, and later deletes near them merge them.
    pub(crate) fn prune_range(
        &mut self,
        tree: &mut TreeState,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
    ) -> Result<u64> {
        let everything = matches!((lower, upper), (Bound::Unbounded, Bound::Unbounded));
        if tree.root.is_empty() || tree.root.depth < 2 || everything {
            // All of a tree is `free_tree`'s (a pruned root must keep a child).
            return Ok(0);
        }
        check_root(tree.root)?;
        let root = tree.root;
        let range = (lower, upper);
        let edges = (None, None);
        if self.leaves_to_prune(
            root.pgno,
            root.txn,
            root.depth,
            edges,
            range,
            PRUNE_MIN_LEAVES,
        )? < PRUNE_MIN_LEAVES
        {
            return Ok(0);
        }
        // Merges and frees change the tree's shape.
        *self.finger = Finger::default();
        let mut pruned = Pruned {
            read_blobs: tree.overflow_pages != 0,
            ..Pruned::default()
        };
        let id = self.prune_below(
            root.pgno,
            root.txn,
            root.sum,
            root.depth,
            edges,
            range,
            &mut pruned,
        )?;
        let id = id.expect("a range with leaves to prune changed the tree");
        tree.root.pgno = id;
        let less = |have: u64, gone: u64, what: &str| {
            have.checked_sub(gone).ok_or_else(|| {
                Error::corrupted_page(
                    root.pgno,
                    format!("a range held {gone} {what}, more than its tree's {have}"),
                )
            })
        };
        tree.entries = less(tree.entries, pruned.entries, "entries")?;
        tree.leaf_pages = less(tree.leaf_pages, pruned.leaf_pages, "leaf pages")?;
        tree.branch_pages = less(tree.branch_pages, pruned.branch_pages, "branch pages")?;
        tree.overflow_pages = less(tree.overflow_pages, pruned.overflow_pages, "blob pages")?;
        self.shrink_root(tree)?;
        Ok(pruned.entries)
    }

    /// How many whole leaves below branch `pgno` (at `level`, holding the
    /// keys within `edges`) lie within `range`, counted up to `limit`.
    fn leaves_to_prune(
        &self,
        pgno: u64,
        txn: u64,
        level: u32,
        edges: Edges<'_>,
        range: KeyBounds<'_>,
        limit: usize,
    ) -> Result<usize> {
        let src = self.source();
        let node = node_at(&src, pgno, txn, level, Reads::Search)?;
        let Some(span) = RangeSpan::of(&node, edges, range)? else {
            return Ok(0);
        };
        let mut leaves = 0;
        for i in span.inside.clone() {
            if leaves >= limit {
                return Ok(leaves);
            }
            let (child, child_txn) = node.child(i)?;
            leaves += self.leaves_below(child, child_txn, level - 1, limit - leaves)?;
        }
        if level > 2 {
            for (i, child_edges) in span.partial(&node, edges)? {
                if leaves >= limit {
                    return Ok(leaves);
                }
                let (child, child_txn) = node.child(i)?;
                let (lo, hi) = (child_edges.0.as_deref(), child_edges.1.as_deref());
                leaves += self.leaves_to_prune(
                    child,
                    child_txn,
                    level - 1,
                    (lo, hi),
                    range,
                    limit - leaves,
                )?;
            }
        }
        Ok(leaves)
    }

    /// The leaves of the subtree at `pgno` (at `level`), counted up to
    /// `limit`: its leaves themselves are not read.
    fn leaves_below(&self, pgno: u64, txn: u64, level: u32, limit: usize) -> Result<usize> {
        if level == 1 {
            return Ok(1);
        }
        let src = self.source();
        let node = node_at(&src, pgno, txn, level, Reads::Search)?;
        if level == 2 {
            return Ok(node.count);
        }
        let mut leaves = 0;
        for i in 0..node.count {
            if leaves >= limit {
                break;
            }
            let (child, child_txn) = node.child(i)?;
            leaves += self.leaves_below(child, child_txn, level - 1, limit - leaves)?;
        }
        Ok(leaves)
    }

    /// `prune_range` below branch `pgno` (at `level` >= 2, holding the
    /// keys within `edges`): frees its children wholly within `range`,
    /// prunes within the (at most two) children the range holds in part,
    /// and returns its dirty copy if it changed (its parent then links
    /// it), else `None`, with no page copied.
    #[allow(clippy::too_many_arguments)]
    fn prune_below(
        &mut self,
        pgno: u64,
        txn: u64,
        sum: u64,
        level: u32,
        edges: Edges<'_>,
        range: KeyBounds<'_>,
        pruned: &mut Pruned,
    ) -> Result<Option<u64>> {
        assert!(level >= 2, "a leaf has no subtrees to prune");
        // What the edits below need of the page, copied out: the page is
        // copied (`touch`) only once something below it changed.
        let (span, inside, partial) = {
            let src = self.source();
            let node = node_at(&src, pgno, txn, level, Reads::Search)?;
            let Some(span) = RangeSpan::of(&node, edges, range)? else {
                return Ok(None);
            };
            let mut inside = Vec::with_capacity(span.inside.len());
            for i in span.inside.clone() {
                inside.push(node.child(i)?);
            }
            let mut partial = Vec::with_capacity(2);
            if level > 2 {
                for (i, child_edges) in span.partial(&node, edges)? {
                    let (child, child_txn) = node.child(i)?;
                    partial.push((i, child, child_txn, node.child_sum(i)?, child_edges));
                }
            }
            (span, inside, partial)
        };
        let mut relinks = Vec::with_capacity(2);
        for (slot, child, child_txn, child_sum, (lo, hi)) in partial {
            let child_edges = (lo.as_deref(), hi.as_deref());
            if let Some(copy) = self.prune_below(
                child,
                child_txn,
                child_sum,
                level - 1,
                child_edges,
                range,
                pruned,
            )? {
                relinks.push((slot, child, copy));
            }
        }
        if inside.is_empty() && relinks.is_empty() {
            return Ok(None);
        }
        let id = self.touch(pgno, txn, sum, level)?;
        for (slot, child, copy) in relinks {
            if copy != child {
                self.dirty.link_child(id, slot, copy);
            }
        }
        for (child, child_txn) in inside {
            self.free_counted(child, child_txn, level - 1, pruned)?;
        }
        let (first, taken_out) = (span.inside.start, span.inside.len());
        for _ in 0..taken_out {
            remove_cell(self.dirty.get_mut(id), first);
        }
        let page = self.dirty.get_mut(id);
        assert!(
            page::cell_count(page) > 0,
            "a branch not wholly in the range kept no child"
        );
        if first == 0 && taken_out > 0 {
            // The new first child's range starts at the branch's own
            // lower edge, as a first child's does: its key is empty.
            let node = Node::parse(self.dirty.get(id), id, None)?;
            let (child, child_txn) = node.child(0)?;
            let cell = branch_cell(&[], child, child_txn, node.child_sum(0)?);
            let page = self.dirty.get_mut(id);
            remove_cell(page, 0);
            let fitted = insert_cell(page, 0, &cell);
            assert!(fitted, "a shorter first cell was refused");
        }
        Ok(Some(id))
    }

    /// Frees the subtree at `pgno` (at `level`), counting what it held
    /// into `pruned`: its leaves are read for their entry counts (and for
    /// their blobs, if the tree has any), never copied.
    fn free_counted(&mut self, pgno: u64, txn: u64, level: u32, pruned: &mut Pruned) -> Result<()> {
        let src = self.source();
        let node = node_at(&src, pgno, txn, level, Reads::Search)?;
        let (mut blobs, mut refs) = (Vec::new(), Vec::new());
        if node.is_leaf {
            pruned.entries += live_entries(&src, &node)? as u64;
            pruned.leaf_pages += 1;
            if pruned.read_blobs {
                for i in 0..node.count {
                    if let (_, LeafValue::Overflow { pgno, txn, len, .. }) = node.leaf_entry(i)? {
                        blobs.push((pgno, txn, len));
                    }
                }
            }
        } else {
            pruned.branch_pages += 1;
            refs.reserve(node.count);
            for i in 0..node.count {
                refs.push(node.child(i)?);
            }
        }
        for (p, t, len) in blobs {
            pruned.overflow_pages += self.free_blob(p, t, len)?;
        }
        for (p, t) in refs {
            self.free_counted(p, t, level - 1, pruned)?;
        }
        self.free_page(pgno, txn);
        Ok(())
    }
}

/// Whole leaves a range must hold before `TreeWriter::prune_range` frees
/// its subtrees unread: below that, deleting the range a leaf at a time
/// costs little, and merges the pages on its edges as it goes, where
/// pruning leaves them as it finds them.
pub(crate) const PRUNE_MIN_LEAVES: usize = 64;

/// The lower and upper edge of a page's keys (`None`: unbounded), from
/// the separators of the branches above it.
type Edges<'k> = (Option<&'k [u8]>, Option<&'k [u8]>);

/// The same, owned (the page they come from is about to change).
type OwnedEdges = (Option<Vec<u8>>, Option<Vec<u8>>);

/// A key range's lower and upper bound.
type KeyBounds<'k> = (Bound<&'k [u8]>, Bound<&'k [u8]>);

/// What `prune_range` took out of a tree.
#[derive(Debug, Default)]
struct Pruned {
    /// Whether leaves are read for blobs (the tree has some).
    read_blobs: bool,
    entries: u64,
    leaf_pages: u64,
    branch_pages: u64,
    overflow_pages: u64,
}

/// The children of a branch a key range reaches: `first..=last`, of
/// which those in `inside` lie wholly within it; the others (`first`
/// and `last`, when not inside) hold it in part.
struct RangeSpan {
    first: usize,
    last: usize,
    inside: std::ops::Range<usize>,
}

impl RangeSpan {
    /// The span of `range` over branch `node`, whose keys lie within
    /// `edges`; `None` if the range is empty there. Every child strictly
    /// between the ones holding the two bounds lies wholly within the
    /// range; those two do if their own edges do.
    fn of(node: &Node<'_>, edges: Edges<'_>, range: KeyBounds<'_>) -> Result<Option<RangeSpan>> {
        let first = match range.0 {
            Bound::Unbounded => 0,
            Bound::Included(k) | Bound::Excluded(k) => node.search_branch(k)?,
        };
        let last = match range.1 {
            Bound::Unbounded => node.count - 1,
            Bound::Included(k) | Bound::Excluded(k) => node.search_branch(k)?,
        };
        if first > last {
            return Ok(None);
        }
        let whole = |i: usize| -> Result<bool> {
            let (lo, hi) = child_edges(node, edges, i)?;
            Ok(starts_within(lo, range.0) && ends_within(hi, range.1))
        };
        let start = if whole(first)? { first } else { first + 1 };
        let end = if whole(last)? { last + 1 } else { last };
        Ok(Some(RangeSpan {
            first,
            last,
            inside: start..end.max(start),
        }))
    }

    /// The children the range holds in part, each with its edges.
    fn partial(&self, node: &Node<'_>, edges: Edges<'_>) -> Result<Vec<(usize, OwnedEdges)>> {
        let mut out = Vec::with_capacity(2);
        for i in [self.first, self.last] {
            if self.inside.contains(&i) || out.iter().any(|(j, _)| *j == i) {
                continue;
            }
            let (lo, hi) = child_edges(node, edges, i)?;
            out.push((i, (lo.map(<[u8]>::to_vec), hi.map(<[u8]>::to_vec))));
        }
        Ok(out)
    }
}

/// The edges of child `i` of branch `node`, whose keys lie within `edges`.
fn child_edges<'k>(node: &Node<'k>, edges: Edges<'k>, i: usize) -> Result<Edges<'k>> {
    let lo = if i == 0 { edges.0 } else { Some(node.key(i)?) };
    let hi = if i + 1 < node.count {
        Some(node.key(i + 1)?)
    } else {
        edges.1
    };
    Ok((lo, hi))
}

/// Whether every key from `lo` on (`None`: from the first key of all) is
/// within the lower bound `lower`.
fn starts_within(lo: Option<&[u8]>, lower: Bound<&[u8]>) -> bool {
    match (lower, lo) {
        (Bound::Unbounded, _) => true,
        (_, None) => false,
        (Bound::Included(l), Some(k)) => compare_keys(k, l).is_ge(),
        (Bound::Excluded(l), Some(k)) => compare_keys(k, l).is_gt(),
    }
}

/// Whether every key below `hi` (`None`: every key) is within the upper
/// bound `upper`.
fn ends_within(hi: Option<&[u8]>, upper: Bound<&[u8]>) -> bool {
    match (upper, hi) {
        (Bound::Unbounded, _) => true,
        (_, None) => false,
        (Bound::Included(u) | Bound::Excluded(u), Some(k)) => compare_keys(k, u).is_le(),
    }
}

/// Whether `key` is within the upper bound `upper`.
fn within(key: &[u8], upper: Bound<&[u8]>) -> bool {
    match upper {
        Bound::Included(u) => compare_keys(key, u).is_le(),
        Bound::Excluded(u) => compare_keys(key, u).is_lt(),
        Bound::Unbounded => true,
    }
}

/// The key of an encoded cell.
fn cell_key(cell: &[u8], is_leaf: bool) -> &[u8] {
    if is_leaf {
        let klen = page::u16_at(cell, 0) as usize;
        &cell[page::LEAF_CELL_HEADER..page::LEAF_CELL_HEADER + klen]
    } else {
        let klen = page::u16_at(cell, 24) as usize;
        &cell[BRANCH_CELL_HEADER..BRANCH_CELL_HEADER + klen]
    }
}

#[cfg(test)]
mod tests {
    use crate::btree::leaf_split::shortest_separator;

    /// An overlay's values replace their cells' values in a copy of the
    /// leaf; an entry for a slot the leaf does not have, or of another
    /// length, is `Corrupted`, and the copy is left as it was.
    #[test]
    fn an_overlay_applies_to_its_leaf_and_a_misfit_entry_is_an_error() {
        use super::apply_overlay;
        use crate::btree::page::{fill_page, leaf_cell_inline, LeafValue, Node, DIRTY_BIT};
        use crate::error::Error;
        use crate::storage::arena::{Arena, ArenaSpace};
        use crate::storage::overlay::Overlaid;

        let leaf_page = |values: [&[u8]; 2]| {
            let mut page = vec![0u8; 4096];
            let cells = [
                leaf_cell_inline(b"a", values[0]),
                leaf_cell_inline(b"b", values[1]),
            ];
            fill_page(&mut page, true, &cells);
            page
        };
        let value = |page: &[u8], i: usize| match Node::parse(page, DIRTY_BIT, None)
            .unwrap()
            .leaf_entry(i)
            .unwrap()
            .1
        {
            LeafValue::Inline(v) => v.to_vec(),
            LeafValue::Overflow { .. } => panic!("inline values only"),
        };
        let arena = Arena::new(4096, 64 * 4096).unwrap();
        let mut space = ArenaSpace::default();
        let leaf = space.alloc(&arena, 1, u64::MAX, 1, false).unwrap().pgno();
        let fresh = space.alloc_overlay(&arena, leaf, 0, 0, u64::MAX).unwrap();
        let overlay = arena.attach_overlay(leaf, fresh);
        assert!(overlay.append(1, Overlaid::Value(b"BBB"), 2));
        assert!(overlay.append(1, Overlaid::Value(b"CCC"), 3));
        let mut page = leaf_page([b"111", b"222"]);
        apply_overlay(&mut page, DIRTY_BIT, &overlay).unwrap();
        assert_eq!(
            (value(&page, 0), value(&page, 1)),
            (b"111".to_vec(), b"CCC".to_vec())
        );
        for (index, bad) in [(2u16, &b"XYZ"[..]), (0, &b"toolong"[..])] {
            let mut page = leaf_page([b"111", b"222"]);
            let mark = overlay.mark();
            assert!(overlay.append(index, Overlaid::Value(bad), 4));
            let r = apply_overlay(&mut page, DIRTY_BIT, &overlay);
            assert!(matches!(r, Err(Error::Corrupted { .. })), "{r:?}");
            assert_eq!(page, leaf_page([b"111", b"222"]), "the copy changed");
            overlay.cut(mark);
        }
        // A tombstone removes its cell; tombstones for every cell, or for
        // a slot the leaf lacks, are damage.
        let mark = overlay.mark();
        assert!(overlay.append(0, Overlaid::Deleted, 4));
        let mut page = leaf_page([b"111", b"222"]);
        apply_overlay(&mut page, DIRTY_BIT, &overlay).unwrap();
        let node = Node::parse(&page, DIRTY_BIT, None).unwrap();
        assert_eq!((node.count, node.key(0).unwrap()), (1, &b"b"[..]));
        assert_eq!(value(&page, 0), b"CCC".to_vec());
        for extra in [1u16, 2] {
            let before = overlay.mark();
            assert!(overlay.append(extra, Overlaid::Deleted, 5));
            let mut page = leaf_page([b"111", b"222"]);
            let r = apply_overlay(&mut page, DIRTY_BIT, &overlay);
            assert!(matches!(r, Err(Error::Corrupted { .. })), "{r:?}");
            assert_eq!(page, leaf_page([b"111", b"222"]), "the copy changed");
            overlay.cut(before);
        }
        overlay.cut(mark);
    }

    /// A delete copies each page of its path once (one descent, whose
    /// slots hold in the copies); a delete of a missing key copies none.
    /// Checked on pages a commit wrote to the file, then on pages a
    /// logged commit left in the arena.
    #[test]
    fn a_delete_copies_its_path_once_and_a_miss_copies_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let db = crate::Database::open(dir.path().join("d.ib")).unwrap();
        let key = |i: u32| format!("key{i:08}").into_bytes();
        let mut tx = db.begin_write().unwrap();
        let t = tx.open_tree("t").unwrap();
        // Even keys only: the odd ones fall inside leaves, missing.
        for i in 0..20_000 {
            tx.put(&t, &key(2 * i), &[7; 100]).unwrap();
        }
        tx.commit().unwrap();
        for (round, at) in [2_000, 30_000].into_iter().enumerate() {
            let mut tx = db.begin_write().unwrap();
            // A transaction with a savepoint makes no value overlay: its
            // deletes copy (`txn::overlaid`).
            let _no_overlays = tx.savepoint().unwrap();
            let depth = tx.root(&t).unwrap().depth as usize;
            assert!(depth >= 3, "depth {depth}");
            let (pages, freed) = (tx.dirty.pages.len(), tx.freed.len());
            assert!(!tx.delete(&t, &key(at + 1)).unwrap());
            assert_eq!(tx.dirty.pages.len(), pages, "round {round}: a miss copied");
            assert_eq!(tx.freed.len(), freed, "round {round}: a miss freed");
            assert!(tx.delete(&t, &key(at)).unwrap());
            assert_eq!(tx.dirty.pages.len(), pages + depth, "round {round}");
            assert_eq!(tx.freed.len(), freed + depth, "round {round}");
            // Its path is dirty now: a delete beside it copies nothing.
            assert!(tx.delete(&t, &key(at + 2)).unwrap());
            assert!(!tx.delete(&t, &key(at + 2)).unwrap());
            assert_eq!(tx.dirty.pages.len(), pages + depth, "round {round}");
            assert_eq!(tx.get(&t, &key(at + 4)).unwrap(), Some(&[7; 100][..]));
            assert_eq!(tx.len(&t).unwrap(), 20_000 - 2 * (round as u64 + 1));
            tx.commit().unwrap();
            // A commit this small is logged: the next round's path starts
            // in the arena (this round's copy of the root).
            if round == 0 {
                assert_eq!(db.stats().unwrap().counters.logged_commits, 1);
            }
        }
        db.check().unwrap();
    }

    /// A range of most of a tree is removed by freeing its subtrees from
    /// their parents' records: only the pages on its two edge paths are
    /// copied (a delete a leaf at a time would copy every leaf), every
    /// page of the range is freed, and the commit, one redo operation,
    /// stays logged.
    #[test]
    fn a_large_range_copies_only_its_edge_paths() {
        let dir = tempfile::tempdir().unwrap();
        let db = crate::Database::open(dir.path().join("r.ib")).unwrap();
        let key = |i: u32| format!("key{i:08}").into_bytes();
        let n = 200_000;
        let mut tx = db.begin_write().unwrap();
        let t = tx.open_tree("t").unwrap();
        for i in 0..n {
            tx.put(&t, &key(i), &[7; 100]).unwrap();
        }
        tx.commit().unwrap();
        let leaves = db.stats().unwrap().trees[0].leaf_pages;
        let logged = db.stats().unwrap().counters.logged_commits;
        let mut tx = db.begin_write().unwrap();
        let depth = tx.root(&t).unwrap().depth as usize;
        assert!(depth >= 3, "depth {depth}");
        let (pages, freed) = (tx.dirty.pages.len(), tx.freed.len());
        let (lo, hi) = (key(n / 10), key(n - n / 10));
        let removed = tx.delete_range(&t, lo.as_slice()..hi.as_slice()).unwrap();
        assert_eq!(removed, u64::from(n - n / 5));
        let copied = tx.dirty.pages.len() - pages;
        assert!(
            copied <= 4 * depth,
            "{copied} pages copied for a range of {leaves} leaves"
        );
        let freed = (tx.freed.len() - freed) as u64;
        assert!(
            freed > leaves * 3 / 4,
            "{freed} pages freed of {leaves} leaves"
        );
        assert_eq!(tx.len(&t).unwrap(), u64::from(n / 5));
        assert_eq!(tx.get(&t, &key(n / 10 - 1)).unwrap(), Some(&[7; 100][..]));
        assert_eq!(tx.get(&t, &key(n / 10)).unwrap(), None);
        assert_eq!(tx.get(&t, &key(n - n / 10 - 1)).unwrap(), None);
        assert_eq!(tx.get(&t, &key(n - n / 10)).unwrap(), Some(&[7; 100][..]));
        let keys: Vec<Vec<u8>> = tx
            .iter(&t)
            .unwrap()
            .map(|e| e.unwrap().0.to_vec())
            .collect();
        let expected: Vec<Vec<u8>> = (0..n / 10).chain(n - n / 10..n).map(key).collect();
        assert_eq!(keys, expected);
        tx.commit().unwrap();
        assert_eq!(
            db.stats().unwrap().counters.logged_commits,
            logged + 1,
            "a pruning commit was not logged"
        );
        db.check().unwrap();
    }

    #[test]
    fn separator_is_between() {
        let cases: [(&[u8], &[u8]); 4] =
            [(b"abc", b"abd"), (b"a", b"b"), (b"ab", b"abc"), (b"", b"x")];
        for (l, r) in cases {
            let s = shortest_separator(l, r);
            assert!(l < s && s <= r, "{l:?} {s:?} {r:?}");
        }
    }
}
