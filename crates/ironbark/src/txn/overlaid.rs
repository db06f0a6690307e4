//! Same-size overwrites, deletes and inserts as value overlays: the write
//! transaction's side of `storage::overlay`.
//!
//! A put whose key is in a committed leaf (a published arena page, or a
//! page of the data file: `storage::arena::FileOverlays`), holding an
//! inline value of the new value's length, appends the value to the
//! leaf's overlay instead of copying the leaf and its path; a delete of such a key
//! (holding an inline value of any length) appends a tombstone, unless
//! that would leave the leaf with no entry (the copy that folds the
//! overlay in must not be empty); a put of a key the leaf's cells lack
//! appends an insert, if the leaf has room for it beside its cells and
//! the overlay's other inserts (the copy that folds them in must not
//! split: `overlay_insert`). A later change of a key the overlay inserted
//! goes through a copy of the leaf, which takes the inserts in. It is
//! tried only where it can pay: a
//! transaction that may be logged (overlays live in the arena, which only
//! logged commits use), with no savepoint taken (a rollback to one would
//! have to cut overlays too), and for values up to `MAX_OVERLAY_VALUE`. A
//! transaction whose puts keep finding no such leaf (inserts, leaves it
//! already copied) stops looking after a few (`txn::overlay_undo`); a
//! writer whose looks keep missing across transactions (single-put
//! commits to leaves not in the arena) looks at one put in 16 until a
//! look finds one.
//!
//! Invariant: every overlay entry this transaction appends is recorded
//! in its `OverlayUndo` (`txn::overlay_undo`) before it returns, so that
//! it is cut off again unless the transaction commits; a tombstone takes
//! its entry off the tree's count in the transaction's catalog, an
//! insert adds one.

use std::sync::Arc;

use crate::btree::page::Node;
use crate::btree::page::{LeafValue, Reads, DIRTY_BIT};
use crate::btree::search::{leaf_ref, node_at, prefetch_descents, DESCENT_BATCH};
use crate::error::{Error, Result};
use crate::pages::{MapSource, WriteSource};
use crate::storage::arena::{FileOverlays, ARENA_BIT, WHOLE_SLOT_UNIT};
use crate::storage::overlay::{Overlaid, OverlayPage, MAX_OVERLAY_VALUE};
use crate::txn::leaf_hints::LeafHint;
use crate::txn::logged::{arena_bound, arena_memory_cap};
use crate::txn::shared::Snapshot;
use crate::txn::write::WriteTxn;

/// Looks that found no leaf to overlay, in a row across transactions,
/// after which only one put in [`OVERLAY_SAMPLE`] looks (a look that finds
/// one looks at every put again).
const MISSES_BEFORE_SAMPLING: u64 = 64;
const OVERLAY_SAMPLE: u64 = 16;

impl<'db> WriteTxn<'db> {
    /// Walks the descents of `keys`, puts about to be made into tree `i`
    /// one after another (`WriteTxn::put_many`), together
    /// (`btree::search::prefetch_descents`), asking for each key's pages
    /// and its leaf's overlay lines before the first put reads them: their
    /// cache misses overlap instead of following one another. Sets
    /// `hints[j]` to the leaf it found for `keys[j]`, which that key's
    /// put takes instead of descending again while it holds
    /// (`LeafHint::holds`).
    pub(crate) fn look_ahead(&mut self, i: usize, keys: &[&[u8]], hints: &mut [Option<LeafHint>]) {
        if self.writer.recent_leaves.skips() {
            return;
        }
        let root = self.catalog.trees[i].state.root;
        let base = &self.base.source;
        let src = WriteSource {
            base,
            dirty: &self.dirty,
        };
        let mut leaves = [None; DESCENT_BATCH];
        prefetch_descents(
            &src,
            root,
            keys,
            &mut leaves,
            |leaf| {
                if leaf & DIRTY_BIT == 0 {
                    base.prefetch_overlay_word(leaf);
                }
            },
            |leaf| {
                if let Some(page) = (leaf & DIRTY_BIT == 0)
                    .then(|| base.overlay_page(leaf))
                    .flatten()
                {
                    page.prefetch();
                }
            },
        );
        self.writer
            .recent_leaves
            .found(&leaves[..keys.len().min(DESCENT_BATCH)]);
        let freed_at = self.freed.len();
        for (hint, leaf) in hints.iter_mut().zip(leaves) {
            *hint = leaf.map(|leaf| LeafHint::new(i, leaf, freed_at));
        }
    }

    /// `put` of `value` into tree `i` (the catalog's index) as a value
    /// overlay, if `key` holds an inline value of the same length in a
    /// committed leaf: `Ok(true)`, no page copied. `Ok(false)`, with
    /// nothing changed, when it does not (the caller puts as usual).
    /// `hint`: the key's leaf as a look ahead found it (`look_ahead`).
    pub(crate) fn put_overlaid(
        &mut self,
        i: usize,
        key: &[u8],
        value: &[u8],
        hint: Option<LeafHint>,
    ) -> Result<bool> {
        if value.len() > MAX_OVERLAY_VALUE {
            return Ok(false);
        }
        match self.overlay_change(i, key, Overlaid::Value(value), hint)? {
            Change::Overlaid => Ok(true),
            Change::Inserted => {
                let state = &mut self.catalog.trees[i].state;
                state.entries += 1;
                self.overlays.inserted += 1;
                Ok(true)
            }
            Change::Absent | Change::Declined => Ok(false),
        }
    }

    /// `delete` of `key` from tree `i` as a tombstone in its leaf's
    /// overlay, if the key holds an inline value in a committed leaf with
    /// another entry left: `Some(true)`, no page copied, the
    /// tree's count lowered. `Some(false)` when the look found that the
    /// key is not in the tree (nothing to delete, no second descent);
    /// `None`, with nothing changed, otherwise (the caller deletes as
    /// usual).
    pub(crate) fn delete_overlaid(&mut self, i: usize, key: &[u8]) -> Result<Option<bool>> {
        match self.overlay_change(i, key, Overlaid::Deleted, None)? {
            Change::Overlaid => {
                let state = &mut self.catalog.trees[i].state;
                state.entries = state
                    .entries
                    .checked_sub(1)
                    .ok_or_else(|| Error::Corrupted {
                        page: None,
                        detail: "a tree's entry count is below the entries it holds".into(),
                    })?;
                Ok(Some(true))
            }
            Change::Absent => Ok(Some(false)),
            Change::Declined | Change::Inserted => Ok(None),
        }
    }

    /// Appends `change` for `key` of tree `i` to its leaf's overlay, if
    /// the rules in the module doc allow it.
    fn overlay_change(
        &mut self,
        i: usize,
        key: &[u8],
        change: Overlaid<'_>,
        hint: Option<LeafHint>,
    ) -> Result<Change> {
        if !self.logging || !self.savepoints.is_empty() || self.overlays.gave_up() {
            return Ok(Change::Declined);
        }
        let root = self.catalog.trees[i].state.root;
        let w = &mut *self.writer;
        if w.overlay_misses >= MISSES_BEFORE_SAMPLING {
            w.overlay_misses += 1;
            if !w.overlay_misses.is_multiple_of(OVERLAY_SAMPLE) {
                return Ok(Change::Declined);
            }
        }
        // The snapshot's arena, if it has one, is the process's
        // (`Shared::arena`, set once). A base without one (the first
        // commit after a checkpoint) has only file leaves, and gets it
        // with the span's table (`span_file_overlays`).
        let shared: &'db crate::txn::shared::Shared = self.shared;
        let Some(arena) = shared.arena.get().and_then(|a| a.as_deref()) else {
            return Ok(Change::Declined);
        };
        debug_assert!(self
            .base
            .source
            .arena
            .as_deref()
            .is_none_or(|a| std::ptr::eq(a, arena)));
        if root.is_empty() {
            return Ok(Change::Declined);
        }
        let src = WriteSource {
            base: &self.base.source,
            dirty: &self.dirty,
        };
        let hint = hint.filter(|h| h.holds(i, &self.freed));
        let (pgno, txn) = match hint {
            Some(h) => {
                // The leaf a descent finds, or (for a dirty one, which a put
                // only declines) a dirty leaf too.
                debug_assert!(
                    leaf_ref(&src, root, key).is_ok_and(
                        |real| real == h.leaf() || (real.0 & h.leaf().0 & DIRTY_BIT != 0)
                    ),
                    "a look ahead's leaf no longer holds its key"
                );
                h.leaf()
            }
            None => leaf_ref(&src, root, key)?,
        };
        // A look ahead asked for the leaf's lines already.
        let reads = if hint.is_some() {
            Reads::Asked
        } else {
            Reads::Search
        };
        if pgno & DIRTY_BIT != 0 && change != Overlaid::Deleted {
            // Not a committed leaf: no overlay, and a put has nothing to
            // learn from the leaf's search (a delete does: it may find its
            // key absent).
            return Ok(self.missed_look());
        }
        // The overlay's look-up and first lines load while the leaf does.
        let existing_unit = self.base.source.overlay_unit(pgno);
        let existing = existing_unit.and_then(|u| arena.overlay_in(u));
        if let Some(page) = &existing {
            if hint.is_some() {
                // Its first line is in cache: ask for the lines its
                // append will write, while the leaf is searched.
                page.prefetch_append();
            } else {
                page.prefetch();
            }
        }
        let leaf = node_at(&src, pgno, txn, 1, reads)?;
        let mut index = None;
        let found = leaf.search_leaf(key)?;
        let committed = leaf.pgno & DIRTY_BIT == 0 && leaf.is_leaf;
        if found.is_err() {
            // Not among the cells: an insert of the overlay's, or not in
            // the tree at all (whatever leaf it is, the key would be in it).
            let inserted = match &existing {
                Some(page) if committed => page.inserted_value(key, u64::MAX)?.is_some(),
                _ => false,
            };
            match change {
                // A change of a key the overlay inserted goes by a copy,
                // which folds the insert in first.
                _ if inserted => return Ok(Change::Declined),
                Overlaid::Deleted => return Ok(Change::Absent),
                Overlaid::Value(value) if committed => {
                    let (pgno, used) = (leaf.pgno, leaf.used_at_most());
                    return self.overlay_insert(i, pgno, used, existing, existing_unit, key, value);
                }
                Overlaid::Value(_) => {}
            }
        }
        if committed {
            if let Ok(i) = found {
                if let (_, LeafValue::Inline(old)) = leaf.leaf_entry(i)? {
                    if match change {
                        Overlaid::Value(v) => old.len() == v.len(),
                        Overlaid::Deleted => true,
                    } {
                        index = Some(i);
                    }
                }
            }
        }
        let Some(index) = index else {
            return Ok(self.missed_look());
        };
        self.writer.overlay_misses = 0;
        if let Some(page) = existing.as_ref().filter(|p| p.has_tombstones()) {
            // A key its overlay deleted is not there to overwrite or
            // delete (a put of it is an insert); a tombstone leaves the
            // leaf another entry.
            if page.value(index, u64::MAX)? == Some(Overlaid::Deleted) {
                return Ok(match change {
                    Overlaid::Deleted => Change::Absent,
                    Overlaid::Value(_) => Change::Declined,
                });
            }
            // Each tombstone deletes one index at most: while the leaf has
            // two cells more than its overlay has tombstones, one stays
            // whatever they say, with no scan of the list.
            if change == Overlaid::Deleted
                && page.mark().tombstones as usize + 2 > leaf.count
                && page.deleted_between(u64::MAX, 0, leaf.count)? + 2 > leaf.count
            {
                return Ok(Change::Declined);
            }
        } else if change == Overlaid::Deleted && leaf.count < 2 {
            return Ok(Change::Declined);
        }
        let index = u16::try_from(index).expect("a leaf holds fewer than 2^16 entries");
        self.append_entry(
            i,
            leaf.pgno,
            existing,
            existing_unit,
            Entry::Change(index, change),
        )
    }

    /// A put of `key`, which committed leaf `leaf` lacks, as an insert in
    /// the leaf's overlay, if the value is inline and small, the overlay
    /// does not insert the key already, and the leaf has room for the key
    /// beside its cells and the overlay's other inserts (so that the copy
    /// that folds them in never splits: `btree::write::apply_overlay`).
    #[allow(clippy::too_many_arguments)]
    fn overlay_insert(
        &mut self,
        i: usize,
        leaf: u64,
        leaf_used: usize,
        existing: Option<OverlayPage<'db>>,
        existing_unit: Option<u64>,
        key: &[u8],
        value: &[u8],
    ) -> Result<Change> {
        let limits = &self.shared.limits;
        if key.len() > limits.max_key
            || !limits.value_is_inline(key.len(), value.len())
            || INSERT_BYTES + key.len() + value.len() > MAX_OVERLAY_VALUE
        {
            return Ok(self.missed_look());
        }
        let mut room = leaf_used + Node::leaf_cell_room(key.len(), value.len());
        if let Some(page) = &existing {
            // Each insert's cell room is its key and value plus a cell's
            // and a slot's fixed bytes (`leaf_cell_room`, linear in them).
            let (inserts, key_value_bytes) = page.inserted_cells();
            room += key_value_bytes + inserts * Node::leaf_cell_room(0, 0);
        }
        if room > limits.page_size {
            return Ok(self.missed_look());
        }
        self.writer.overlay_misses = 0;
        match self.append_entry(i, leaf, existing, existing_unit, Entry::Insert(key, value))? {
            Change::Overlaid => Ok(Change::Inserted),
            other => Ok(other),
        }
    }

    /// Appends `entry` to the overlay of committed leaf `leaf_pgno`
    /// (`existing`, in unit `existing_unit`, or a new one), moving a full
    /// file leaf's unit to a larger one; `Declined` when no overlay can
    /// take it.
    fn append_entry(
        &mut self,
        i: usize,
        leaf_pgno: u64,
        existing: Option<OverlayPage<'db>>,
        existing_unit: Option<u64>,
        entry: Entry<'_>,
    ) -> Result<Change> {
        let shared: &'db crate::txn::shared::Shared = self.shared;
        let Some(arena) = shared.arena.get().and_then(|a| a.as_deref()) else {
            return Ok(Change::Declined);
        };
        let (page, unit) = match (existing, existing_unit) {
            (Some(page), Some(unit)) => (page, unit),
            _ => {
                let Some(limit) = self.overlay_limit() else {
                    return Ok(Change::Declined);
                };
                let files = if leaf_pgno & ARENA_BIT == 0 {
                    match self.span_file_overlays() {
                        Some(files) => Some(files),
                        None => return Ok(Change::Declined),
                    }
                } else {
                    None
                };
                let w = &mut *self.writer;
                let file_born = files.as_ref().map_or(0, |f| f.born());
                let unit = match entry {
                    Entry::Insert(..) => w.arena_space.alloc_insert_overlay(
                        arena,
                        leaf_pgno,
                        entry.bytes(),
                        file_born,
                        limit,
                    ),
                    Entry::Change(..) => w.arena_space.alloc_overlay(
                        arena,
                        leaf_pgno,
                        entry.bytes(),
                        file_born,
                        limit,
                    ),
                };
                let Some(unit) = unit else {
                    return Ok(Change::Declined);
                };
                let page = match files {
                    Some(files) => {
                        let tree = self.catalog.trees[i].id;
                        arena.attach_file_overlay(&files, leaf_pgno, tree, unit)
                    }
                    None => arena.attach_overlay(leaf_pgno, unit),
                };
                (page, unit)
            }
        };
        let mark = page.mark();
        let txn = self.base.txn() + 1;
        let first = page.newest_txn() != Some(txn);
        if entry.append_to(&page, txn) {
            self.overlays.record(arena, unit, mark, first);
            return Ok(Change::Overlaid);
        }
        // Full. A file leaf's unit below a whole slot moves to the next
        // size up (until one has room for the value: at small pages a
        // quarter may not); any other overlay makes the put copy the leaf,
        // applying it.
        let (mut unit, mut recorded) = (unit, !first);
        loop {
            let Some((page, larger, mark)) =
                self.move_to_larger_unit(arena, leaf_pgno, unit, txn, recorded)
            else {
                return Ok(Change::Declined);
            };
            (unit, recorded) = (larger, true);
            if entry.append_to(&page, txn) {
                // `move_to_larger_unit` recorded the mark.
                self.overlays.record(arena, unit, mark, false);
                return Ok(Change::Overlaid);
            }
        }
    }

    /// Moves the full overlay of leaf `leaf`, the unit `unit` (an
    /// eighth or a quarter of a slot), to a unit of the next size up
    /// (`Arena::move_file_overlay`): an eighth holds 3 values of 100 bytes,
    /// a quarter 8, a whole slot 31 entries, and a leaf changed that often
    /// would otherwise be copied (with its path) well before a whole slot
    /// would have filled. Returns the new overlay, its unit and its mark
    /// before txn `txn`'s entries, which the undo list records in place of
    /// the old unit's (`OverlayUndo::moved`); `None` for a whole slot's
    /// (an arena leaf's overlay is one unless it began with an insert),
    /// for a unit that holds as many entries as a whole slot may (not its
    /// bytes: its count), or when the arena has no room. An arena leaf's
    /// moves the same way (`Arena::move_arena_overlay`), born with the
    /// leaf. `recorded`: whether the undo list holds a mark of `unit`
    /// (the transaction appended to it before).
    fn move_to_larger_unit(
        &mut self,
        arena: &'db crate::storage::arena::Arena,
        leaf: u64,
        unit: u64,
        txn: u64,
        recorded: bool,
    ) -> Option<(
        crate::storage::overlay::OverlayPage<'db>,
        u64,
        crate::storage::overlay::Mark,
    )> {
        if unit & WHOLE_SLOT_UNIT != 0 {
            return None;
        }
        if arena.overlay_in(unit)?.is_full_of_entries() {
            return None;
        }
        // An arena leaf's overlay is in a unit below a whole slot only if
        // it began with an insert (`ArenaSpace::alloc_insert_overlay`).
        let files = if leaf & ARENA_BIT == 0 {
            Some(self.base.source.file_overlays.clone()?)
        } else {
            None
        };
        let limit = self.overlay_limit()?;
        let w = &mut *self.writer;
        let born = match &files {
            Some(files) => files.born(),
            None => w.arena_space.born_of(leaf),
        };
        let to = w
            .arena_space
            .alloc_larger_overlay(arena, unit, born, limit)?;
        let moved = match &files {
            Some(files) => arena.move_file_overlay(files, leaf, unit, to, txn),
            None => arena.move_arena_overlay(leaf, unit, to, txn),
        };
        match moved {
            Some((page, mark)) => {
                // No snapshot from this transaction's on reads it.
                w.arena_space.retire_overlay(unit, txn);
                self.overlays.moved(arena, unit, to, mark, recorded);
                Some((page, to, mark))
            }
            None => {
                // Never named by the table: nothing reads it.
                w.arena_space.retire_overlay(to, txn);
                None
            }
        }
    }

    /// The arena's bound for a new overlay slot, or `None` when overlays
    /// fill the arena's share of memory: they are left out of its bound,
    /// never out of its share.
    fn overlay_limit(&self) -> Option<u64> {
        let ps = self.shared.limits.page_size as u64;
        let cap = arena_memory_cap(ps);
        (self.writer.arena_space.live_pages_and_overlays() < cap - cap / 16)
            .then(|| arena_bound(ps, self.base.meta.page_count))
    }

    /// The table of file leaf overlays of the base's span of logged
    /// commits, made on the first one (`storage::arena::FileOverlays`):
    /// the base becomes a copy that holds it (and the arena, if the base
    /// is a file commit's), which the commit's snapshot
    /// and the span's later ones inherit (a transaction that does not
    /// commit takes it away again: its overlay slots retire with the
    /// span's). `None` if the table cannot be reserved.
    fn span_file_overlays(&mut self) -> Option<Arc<FileOverlays>> {
        if let Some(files) = &self.base.source.file_overlays {
            return Some(files.clone());
        }
        let files = Arc::new(FileOverlays::new(self.base.meta.page_count, self.base.txn()).ok()?);
        let base = &self.base;
        let arena = base.source.arena.clone().or_else(|| self.shared.arena())?;
        self.base = Arc::new(Snapshot {
            meta: base.meta,
            source: MapSource {
                arena: Some(arena),
                file_overlays: Some(files.clone()),
                ..base.source.clone()
            },
            catalog: base.catalog.clone(),
        });
        Some(files)
    }

    /// Counts a look that found no leaf to overlay, for the transaction's
    /// and the writer's rules of when to stop looking (module doc).
    fn missed_look(&mut self) -> Change {
        self.overlays.missed();
        let w = &mut *self.writer;
        w.overlay_misses = w.overlay_misses.saturating_add(1);
        Change::Declined
    }
}

/// An entry for an overlay: a change of one of its leaf's cells, or a
/// key the leaf lacks.
#[derive(Clone, Copy)]
enum Entry<'k> {
    Change(u16, Overlaid<'k>),
    Insert(&'k [u8], &'k [u8]),
}

/// Bytes an insert takes in an overlay besides its key and value: the
/// key's length.
const INSERT_BYTES: usize = 2;

impl Entry<'_> {
    /// Its bytes in the overlay, for the size of a new one.
    fn bytes(&self) -> usize {
        match *self {
            Entry::Change(_, Overlaid::Value(v)) => v.len(),
            Entry::Change(_, Overlaid::Deleted) => 0,
            Entry::Insert(key, value) => INSERT_BYTES + key.len() + value.len(),
        }
    }

    fn append_to(&self, page: &OverlayPage<'_>, txn: u64) -> bool {
        match *self {
            Entry::Change(index, change) => page.append(index, change, txn),
            Entry::Insert(key, value) => page.append_insert(key, value, txn),
        }
    }
}

/// What a look for an overlay did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Change {
    /// Appended to the leaf's overlay: nothing else to do.
    Overlaid,
    /// Appended an insert of a key its leaf lacked: the tree has one
    /// entry more.
    Inserted,
    /// A delete whose key is not in the tree: nothing to do.
    Absent,
    /// Nothing done: the caller changes the tree the usual way.
    Declined,
}

#[cfg(test)]
mod tests {
    use crate::{Database, Durability, Error, Options, Tree};

    /// A tree of `keys` keys (`u32`, big-endian) whose leaf of key 5 is a
    /// published arena page with a value overlay: single-put commits log,
    /// the first (a value of another length) copies the leaf into the
    /// arena, the second overlays it.
    fn overlaid_leaves(keys: u32) -> (tempfile::TempDir, Database, Tree) {
        let dir = tempfile::tempdir().unwrap();
        let options = Options {
            durability: Durability::None,
            ..Options::default()
        };
        let db = Database::open_with(dir.path().join("t.ib"), &options).unwrap();
        let mut tx = db.begin_write().unwrap();
        let tree = tx.open_tree("t").unwrap();
        for i in 0..keys {
            tx.put(&tree, &i.to_be_bytes(), &[7; 20]).unwrap();
        }
        tx.commit().unwrap();
        for v in 0..2u8 {
            let mut tx = db.begin_write().unwrap();
            tx.put(&tree, &5u32.to_be_bytes(), &[v; 30]).unwrap();
            tx.commit().unwrap();
        }
        assert!(db.counters().values_overlaid >= 1, "no overlay");
        (dir, db, tree)
    }

    /// A tombstone lowers its tree's entry count; a count already at zero
    /// while the tree holds the key (a damaged catalog) is `Corrupted`,
    /// never a wrapped count, and the transaction changes nothing.
    #[test]
    fn a_tombstone_below_a_zero_entry_count_is_corrupted() {
        let (_dir, db, tree) = overlaid_leaves(200);
        // A deletion there, with the count as stored, is a tombstone (the
        // counter moves at the commit).
        let mut tx = db.begin_write().unwrap();
        let before = db.counters().values_overlaid;
        assert!(tx.delete(&tree, &8u32.to_be_bytes()).unwrap());
        tx.commit().unwrap();
        assert_eq!(db.counters().values_overlaid, before + 1, "not a tombstone");

        let mut tx = db.begin_write().unwrap();
        let entry = tx.catalog.trees.iter_mut().find(|e| &*e.name == "t");
        entry.unwrap().state.entries = 0;
        match tx.delete(&tree, &9u32.to_be_bytes()) {
            Err(Error::Corrupted { detail, .. }) => {
                assert!(detail.contains("entry count"), "{detail}");
            }
            other => panic!("expected Corrupted, got {other:?}"),
        }
        tx.abort();
        let rx = db.begin_read().unwrap();
        assert_eq!(rx.len(&rx.tree("t").unwrap()).unwrap(), 199);
        assert!(rx.contains_key(&tree, &9u32.to_be_bytes()).unwrap());
    }

    /// Two states the writer's rules never make, made by hand in a leaf's
    /// overlay: every entry deleted (the writer keeps one), and a
    /// tombstone a snapshot sees appended after a cursor of it stopped on
    /// the entry (the protocol appends only at a txn no snapshot sees).
    /// Each reads as `Corrupted`, never as a panic or an empty leaf
    /// trusted: `check` names the overlay, and the cursor refuses the
    /// entry it stands on.
    #[test]
    fn overlays_the_writer_never_makes_are_errors() {
        use crate::btree::cursor::Cursor;
        use crate::storage::overlay::Overlaid;

        let (_dir, db, tree) = overlaid_leaves(20);
        // (Not `Database::check`: it checkpoints first, leaving no arena.)
        let rx = db.begin_read().unwrap();
        let snap = db.shared.published.load_full();
        assert_eq!(
            snap.txn(),
            rx.txn_id(),
            "the reader holds the snapshot's pages"
        );
        let root = snap.catalog.find("t").unwrap().state.root;
        assert_eq!(root.depth, 1, "one leaf");
        let arena = snap.source.arena.as_ref().expect("logged commits");
        let overlay = arena.overlay(root.pgno).expect("the leaf has an overlay");
        let mut cursor = Cursor::new(&snap.source, root);
        cursor.seek_ge(&3u32.to_be_bytes()).unwrap();
        assert_eq!(cursor.key().unwrap(), 3u32.to_be_bytes());
        for i in 0..20u16 {
            assert!(overlay.append(i, Overlaid::Deleted, snap.txn()));
        }

        match cursor.entry() {
            Err(Error::Corrupted { detail, .. }) => {
                assert!(detail.contains("deleted entry"), "{detail}");
            }
            other => panic!("expected Corrupted, got {other:?}"),
        }
        // A lookup sees what the overlay says, as for any tombstone.
        assert_eq!(rx.get(&tree, &3u32.to_be_bytes()).unwrap(), None);
        // The check of the snapshot's trees names the overlay.
        match crate::check::verify_trees(&snap.source, &snap.meta, &snap.catalog) {
            Err(Error::Corrupted { page, detail }) => {
                assert!(
                    detail.contains("value overlay deletes every entry"),
                    "{detail}"
                );
                assert_eq!(page, Some(root.pgno));
            }
            other => panic!("expected Corrupted, got {other:?}"),
        }
        // `Database::check` checkpoints first: the fold refuses the overlay.
        drop((cursor, rx));
        match db.check() {
            Err(Error::Corrupted { detail, .. }) => {
                assert!(detail.contains("deletes every entry"), "{detail}");
            }
            other => panic!("expected Corrupted, got {other:?}"),
        }
    }

    /// The same damage in the overlay of a file leaf (kept in its span's
    /// table, `storage::arena::FileOverlays`): the checkpoint's fold of
    /// the leaf refuses it as `Corrupted`, never folds it into an empty
    /// leaf.
    #[test]
    fn a_file_leaf_overlay_deleting_every_entry_is_refused_by_the_fold() {
        use crate::storage::arena::ARENA_BIT;
        use crate::storage::overlay::Overlaid;

        let dir = tempfile::tempdir().unwrap();
        let options = Options {
            durability: Durability::None,
            ..Options::default()
        };
        let db = Database::open_with(dir.path().join("f.ib"), &options).unwrap();
        let mut tx = db.begin_write().unwrap();
        let tree = tx.open_tree("t").unwrap();
        for i in 0..20u32 {
            tx.put(&tree, &i.to_be_bytes(), &[7; 20]).unwrap();
        }
        tx.commit().unwrap();
        db.checkpoint().unwrap();
        // The leaf is a file page: its first change since the checkpoint
        // is overlaid.
        let before = db.counters().values_overlaid;
        let mut tx = db.begin_write().unwrap();
        tx.put(&tree, &5u32.to_be_bytes(), &[8; 20]).unwrap();
        tx.commit().unwrap();
        assert_eq!(db.counters().values_overlaid, before + 1, "not overlaid");
        let snap = db.shared.published.load_full();
        let root = snap.catalog.find("t").unwrap().state.root;
        assert_eq!(root.depth, 1, "one leaf");
        assert_eq!(root.pgno & ARENA_BIT, 0, "the leaf is a file page");
        let overlay = snap
            .source
            .overlay_page(root.pgno)
            .expect("the file leaf has an overlay");
        for i in 0..20u16 {
            assert!(overlay.append(i, Overlaid::Deleted, snap.txn()));
        }
        drop(snap);
        match db.check() {
            Err(Error::Corrupted { detail, .. }) => {
                assert!(detail.contains("deletes every entry"), "{detail}");
            }
            other => panic!("expected Corrupted, got {other:?}"),
        }
    }
}
