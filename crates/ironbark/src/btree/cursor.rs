//! Cursors and what is built on them: range and prefix iteration, in both
//! directions, and the lookups of an edge (first, last) or of the nearest
//! key to a given one. Both kinds of transaction call these with their own
//! page source, so a lookup has one implementation.
//!
//! A cursor is the leaf it is on and its slot there, under a stack of
//! (branch, slot) frames from the root to the leaf's parent: stepping
//! allocates nothing, takes no lock and makes no system call. The leaf is
//! kept apart from the branches because all but one step in a leaf's worth
//! touch only it (one compare and an increment, no frame lookup); the
//! branches are read again only to cross into the next leaf. Invariant:
//! when the cursor is valid, `leaf` is the leaf on the path the frames
//! describe (each frame's slot is the child taken below it) and `idx <
//! leaf.count`, unless the leaf's overlay inserts keys: then the cursor
//! is on a cell `idx` or on an insert `k` of the leaf's inserts (sorted,
//! `ins`), and walks the merge of the two in key order (`step_merged`).
//! The first [`INLINE_FRAMES`] branch frames live inside the
//! cursor, so a cursor (and a range, which holds two) stays small enough to
//! be made and moved cheaply; the frames of a deeper tree go on to a vector
//! that the first seek grows once and later steps reuse.
//!
//! A cursor is either fast (the default: pages are checked for structure as
//! they are read, their checksums are not) or verified. A verified cursor
//! checks each tree page's checksum against the record its parent keeps
//! (the catalog for the root) once, when it first enters the page, and each
//! overflow run's when it reads the value: so every byte it returns is
//! covered by a verified checksum chain from the snapshot's meta page.
//! Bulk readers (dump, copy, compaction) use it, so that damage at rest is
//! an error naming the page instead of being laundered into a fresh file.
//! The fast path pays one predictable branch per page entered.

use std::ops::Bound;

use crate::btree::page::{
    compare_keys, page_kind, slot_len_of, verify_blob, verify_page, LeafValue, Node, Reads,
    KIND_LEAF,
};
use crate::btree::search::{
    ask_for_hinted_child, check_root, is_deleted, leaf_entry_seen, may_be_overlaid, node_at,
    resolve_value, Root,
};
use crate::btree::MAX_DEPTH;
use crate::error::Result;
use crate::pages::PageSource;
use crate::storage::arena::ARENA_BIT;
use crate::storage::overlay::{Insert, MAX_ENTRIES};

/// A branch on a cursor's path and the slot of the child taken there.
/// Compact (32 bytes), because a range holds two cursors' worth and is
/// moved whole: the page's parsed form is rebuilt from it (`node`) only
/// when a step crosses into another leaf.
#[derive(Clone, Copy)]
struct Frame<'a> {
    bytes: &'a [u8],
    pgno: u64,
    /// The branch's cell count (at most `u16::MAX`, from its header).
    count: u32,
    idx: u32,
}

impl<'a> Frame<'a> {
    fn new(node: &Node<'a>, idx: usize) -> Frame<'a> {
        debug_assert!(!node.is_leaf && idx < node.count);
        Frame {
            bytes: node.bytes,
            pgno: node.pgno,
            count: node.count as u32,
            idx: idx as u32,
        }
    }

    fn node(&self) -> Node<'a> {
        Node {
            bytes: self.bytes,
            pgno: self.pgno,
            count: self.count as usize,
            is_leaf: false,
            slot_len: slot_len_of(page_kind(self.bytes)),
        }
    }
}

/// Branch frames a cursor keeps inline (its leaf is kept apart, so a tree
/// of depth `INLINE_FRAMES + 1` needs no heap). Branches keep shortened
/// separators, so even long keys leave them a wide fan-out: 100,000 random
/// 293-byte keys in 1 KiB pages make a tree of depth 5, and with 16-byte
/// keys in 4 KiB pages a tree of depth 10 would hold over 10^18 entries.
/// A cursor in a deeper tree allocates its extra frames once, at its first
/// seek. A seek moves the range that holds two cursors several times: with
/// all `MAX_DEPTH` frames inline a range was 5.4 KB, and copying it cost
/// 12% of a `seekrandom`'s instructions.
const INLINE_FRAMES: usize = 9;

/// A cursor's stack of branch frames, root first: the first `N` inline,
/// the rest of a deeper tree's on the heap.
#[derive(Clone)]
struct Frames<'a, const N: usize> {
    /// Frames `0..min(len, N)`.
    inline: [Option<Frame<'a>>; N],
    /// Frames `N..len` (entries past them are stale, kept for their
    /// capacity, so that a cursor's steps reuse what its seek allocated).
    deep: Vec<Frame<'a>>,
    len: usize,
}

impl<'a, const N: usize> Frames<'a, N> {
    fn new() -> Self {
        Frames {
            inline: [None; N],
            deep: Vec::new(),
            len: 0,
        }
    }

    fn len(&self) -> usize {
        self.len
    }

    fn clear(&mut self) {
        self.len = 0;
    }

    fn pop(&mut self) {
        self.len -= 1;
    }

    fn push(&mut self, frame: Frame<'a>) {
        match self.len.checked_sub(N) {
            None => self.inline[self.len] = Some(frame),
            Some(i) => {
                // Within the capacity an earlier seek left: no allocation.
                self.deep.truncate(i);
                self.deep.push(frame);
            }
        }
        self.len += 1;
    }

    /// The last frame pushed, if any.
    fn top_mut(&mut self) -> Option<&mut Frame<'a>> {
        match self.len.checked_sub(N + 1) {
            None => self.inline.get_mut(self.len.checked_sub(1)?)?.as_mut(),
            Some(i) => self.deep.get_mut(i),
        }
    }
}

/// A position in one tree.
#[derive(Clone)]
pub(crate) struct Cursor<'a> {
    src: &'a dyn PageSource,
    root: Root,
    /// The branches above `leaf`, root first.
    path: Frames<'a, INLINE_FRAMES>,
    /// The leaf the cursor is on (when valid), and its slot there.
    leaf: Node<'a>,
    idx: usize,
    valid: bool,
    /// Verify each page's checksum as it is entered (see the module doc).
    verify: bool,
    /// What a descent asks for of the leaf it lands on: all of it for a
    /// cursor that steps, the search lines for one that reads a single
    /// entry where it lands (`for_one_entry`).
    leaf_reads: Reads,
    /// `src.file_leaf_overlays()`, asked once.
    file_leaf_overlays: bool,
    /// The keys the leaf's overlay inserts that the source sees
    /// (`storage::overlay`), as their entry numbers in the overlay, sorted
    /// by key: `ins_len` of them, none for nearly every leaf. With any, the
    /// cursor walks the merge of the cells and these (`step_merged`).
    ins: [u8; MAX_ENTRIES],
    ins_len: usize,
    /// With inserts: the first insert whose key is above the entry the
    /// cursor is on (or, on an insert, that insert), and whether the
    /// cursor is on insert `k` rather than on cell `idx`. On an insert,
    /// `idx` is the first cell whose key is above it.
    k: usize,
    on_insert: bool,
}

enum Descent<'k> {
    First,
    Last,
    AtOrAfter(&'k [u8]),
    AtOrBefore(&'k [u8]),
}

impl<'a> Cursor<'a> {
    #[inline]
    pub(crate) fn new(src: &'a dyn PageSource, root: Root) -> Cursor<'a> {
        Cursor {
            src,
            root,
            path: Frames::new(),
            leaf: Node {
                bytes: &[],
                pgno: 0,
                count: 0,
                is_leaf: true,
                slot_len: slot_len_of(KIND_LEAF),
            },
            idx: 0,
            valid: false,
            verify: false,
            leaf_reads: Reads::Whole,
            file_leaf_overlays: src.file_leaf_overlays(),
            ins: [0; MAX_ENTRIES],
            ins_len: 0,
            k: 0,
            on_insert: false,
        }
    }

    /// A cursor for reading the one entry a seek lands on (an edge, the
    /// nearest key) or little more: its leaves are searched like a
    /// lookup's, not asked for whole.
    #[inline]
    pub(crate) fn for_one_entry(src: &'a dyn PageSource, root: Root) -> Cursor<'a> {
        Cursor {
            leaf_reads: Reads::Search,
            ..Cursor::new(src, root)
        }
    }

    /// Makes this cursor verify checksums (before its first seek).
    pub(crate) fn set_verify(&mut self, verify: bool) {
        self.verify = verify;
    }

    pub(crate) fn is_valid(&self) -> bool {
        self.valid
    }

    /// Descends from child `(pgno, txn)` at `level` to a leaf, choosing the
    /// slot at each page by `how`. `sum` is the checksum the parent records
    /// for the child; only a verifying cursor reads it.
    fn descend(
        &mut self,
        mut pgno: u64,
        mut txn: u64,
        mut sum: u64,
        mut level: u32,
        how: &Descent<'_>,
    ) -> Result<()> {
        loop {
            if self.verify {
                // Before the header is trusted, so that damage anywhere in
                // the page reads as a checksum mismatch of this page.
                verify_page(self.src.page(pgno)?, pgno, txn, sum)?;
            }
            // A leaf is stepped through (unless `for_one_entry`), a
            // branch searched.
            let reads = if level == 1 {
                // The overlay the landing reads (is its entry deleted?),
                // asked for with the leaf, as `find_leaf` does.
                self.src.prefetch_overlay(pgno);
                self.leaf_reads
            } else {
                Reads::Search
            };
            let node = node_at(self.src, pgno, txn, level, reads)?;
            if node.is_leaf {
                self.idx = match how {
                    Descent::First => 0,
                    Descent::Last => node.count.wrapping_sub(1),
                    Descent::AtOrAfter(k) => match node.search_leaf(k)? {
                        Ok(i) | Err(i) => i,
                    },
                    Descent::AtOrBefore(k) => match node.search_leaf(k)? {
                        Ok(i) => i,
                        Err(i) => i.wrapping_sub(1),
                    },
                };
                self.leaf = node;
                self.on_insert = false;
                self.ins_len = 0;
                if self.leaf.pgno & ARENA_BIT != 0 || self.file_leaf_overlays {
                    self.load_inserts(how)?;
                }
                return Ok(());
            }
            let idx = match how {
                Descent::First => 0,
                Descent::Last => node.count - 1,
                Descent::AtOrAfter(k) | Descent::AtOrBefore(k) => node.search_branch(k)?,
            };
            // Levels fall by one a page from a root depth of at most
            // `MAX_DEPTH` (`check_root`), and `node_at` requires a leaf at
            // level 1: a path never outgrows the limit.
            debug_assert!(self.path.len() < MAX_DEPTH);
            self.path.push(Frame::new(&node, idx));
            ask_for_hinted_child(self.src, &node, idx, level);
            (pgno, txn) = node.child(idx)?;
            sum = self.child_sum(&node, idx)?;
            level -= 1;
        }
    }

    /// The checksum branch `node` records for child `idx`, when verifying.
    fn child_sum(&self, node: &Node<'a>, idx: usize) -> Result<u64> {
        if self.verify {
            node.child_sum(idx)
        } else {
            Ok(0)
        }
    }

    fn seek(&mut self, how: Descent<'_>) -> Result<()> {
        self.path.clear();
        self.valid = false;
        if self.root.is_empty() {
            return Ok(());
        }
        check_root(self.root)?;
        self.descend(
            self.root.pgno,
            self.root.txn,
            self.root.sum,
            self.root.depth,
            &how,
        )?;
        self.valid = true;
        let forward = matches!(how, Descent::First | Descent::AtOrAfter(_));
        if self.ins_len != 0 {
            return if forward {
                self.settle_forward()
            } else {
                self.settle_back(self.idx)
            };
        }
        // A leaf slot of `count` (or "-1" as wrapping) means: not in this
        // leaf; step to the neighbour (which skips deleted entries).
        if self.idx >= self.leaf.count {
            if forward {
                self.idx = self.leaf.count.wrapping_sub(1);
                self.step_forward()?;
            } else {
                self.idx = 0;
                self.step_back()?;
            }
            return Ok(());
        }
        self.skip_deleted(forward)
    }

    /// Steps on (forward, or back) while the entry the cursor is on is
    /// one its source sees deleted by an overlay (`storage::overlay`):
    /// every position a seek or step leaves is a live entry. A file leaf
    /// has none unless the source's span gave file leaves overlays, so it
    /// costs two compares.
    #[inline(always)]
    fn skip_deleted(&mut self, forward: bool) -> Result<()> {
        if self.valid && (self.leaf.pgno & ARENA_BIT != 0 || self.file_leaf_overlays) {
            return self.skip_deleted_in_arena(forward);
        }
        Ok(())
    }

    #[inline(never)]
    fn skip_deleted_in_arena(&mut self, forward: bool) -> Result<()> {
        // A step across into a leaf with inserts settles there (`settle_*`).
        while self.valid && self.ins_len == 0 && is_deleted(self.src, &self.leaf, self.idx)? {
            if forward {
                let next = self.idx + 1;
                if next < self.leaf.count {
                    self.idx = next;
                } else {
                    self.step_forward_across()?;
                }
            } else if self.idx > 0 && self.idx <= self.leaf.count {
                self.idx -= 1;
            } else {
                self.step_back_across()?;
            }
        }
        Ok(())
    }

    pub(crate) fn seek_first(&mut self) -> Result<()> {
        self.seek(Descent::First)
    }

    pub(crate) fn seek_last(&mut self) -> Result<()> {
        self.seek(Descent::Last)
    }

    /// The first key `>= key`.
    pub(crate) fn seek_ge(&mut self, key: &[u8]) -> Result<()> {
        self.seek(Descent::AtOrAfter(key))
    }

    /// The last key `<= key`.
    pub(crate) fn seek_le(&mut self, key: &[u8]) -> Result<()> {
        self.seek(Descent::AtOrBefore(key))
    }

    /// Moves to the next key; invalid past the end.
    #[inline(always)]
    pub(crate) fn step_forward(&mut self) -> Result<()> {
        debug_assert!(self.valid);
        if self.ins_len != 0 {
            return self.step_merged(true);
        }
        // Within the leaf (all but one step in a leaf's worth): no loop,
        // no call, no frame.
        let next = self.idx.wrapping_add(1);
        if next < self.leaf.count {
            self.idx = next;
        } else {
            self.step_forward_across()?;
        }
        self.skip_deleted(true)
    }

    /// `step_forward` out of a leaf: up to the first branch with a next
    /// child, then down its left edge.
    fn step_forward_across(&mut self) -> Result<()> {
        loop {
            let Some(top) = self.path.top_mut() else {
                self.valid = false;
                return Ok(());
            };
            if top.idx + 1 < top.count {
                top.idx += 1;
                let (node, idx) = (top.node(), top.idx as usize);
                return self.descend_child(&node, idx, true);
            }
            self.path.pop();
        }
    }

    /// Moves to the previous key; invalid before the start.
    #[inline(always)]
    pub(crate) fn step_back(&mut self) -> Result<()> {
        debug_assert!(self.valid);
        if self.ins_len != 0 {
            return self.step_merged(false);
        }
        if self.idx > 0 && self.idx <= self.leaf.count {
            self.idx -= 1;
        } else {
            self.step_back_across()?;
        }
        self.skip_deleted(false)
    }

    /// `step_back` out of a leaf: up to the first branch with a previous
    /// child, then down its right edge.
    fn step_back_across(&mut self) -> Result<()> {
        loop {
            let Some(top) = self.path.top_mut() else {
                self.valid = false;
                return Ok(());
            };
            if top.idx > 0 {
                top.idx -= 1;
                let (node, idx) = (top.node(), top.idx as usize);
                return self.descend_child(&node, idx, false);
            }
            self.path.pop();
        }
    }

    /// Down child `idx` of `node`, the deepest frame on the path, to its
    /// first key (its last unless `forward`).
    fn descend_child(&mut self, node: &Node<'a>, idx: usize, forward: bool) -> Result<()> {
        // The path holds the branches from the root (at `root.depth`) down
        // to `node`, so `node`'s child is one level below the last of them.
        let level = self.root.depth - self.path.len() as u32;
        let r = node
            .child(idx)
            .and_then(|(child, txn)| Ok((child, txn, self.child_sum(node, idx)?)))
            .and_then(|(child, txn, sum)| self.descend_edge(child, txn, sum, level, forward));
        if r.is_err() {
            // The path is half rebuilt: no step may go on from it.
            self.valid = false;
        }
        r
    }

    /// After moving to a new subtree: its first (or last) key, skipping
    /// empty leaves.
    fn descend_edge(
        &mut self,
        child: u64,
        txn: u64,
        sum: u64,
        level: u32,
        forward: bool,
    ) -> Result<()> {
        self.descend(
            child,
            txn,
            sum,
            level,
            if forward {
                &Descent::First
            } else {
                &Descent::Last
            },
        )?;
        if self.ins_len != 0 {
            return if forward {
                self.settle_forward()
            } else {
                self.settle_back(self.idx)
            };
        }
        if self.leaf.count == 0 {
            // An empty leaf (only transiently possible): keep moving.
            self.idx = if forward { usize::MAX } else { 0 };
            return if forward {
                self.step_forward()
            } else {
                self.step_back()
            };
        }
        Ok(())
    }

    /// Where the cursor is (when valid): a cell of its leaf and its slot,
    /// or a key the leaf's overlay inserts, with its value (then a caller
    /// that must drop the cursor goes on from the key).
    pub(crate) fn landed(&self) -> Result<Option<Landed<'a>>> {
        if !self.valid {
            return Ok(None);
        }
        if self.on_insert {
            let (key, value) = self.insert(self.k)?;
            return Ok(Some(Landed::Inserted(key, value)));
        }
        Ok(Some(Landed::Cell(self.leaf, self.idx)))
    }

    pub(crate) fn key(&self) -> Result<&'a [u8]> {
        debug_assert!(self.valid);
        if self.on_insert {
            return Ok(self.insert(self.k)?.0);
        }
        self.leaf.key(self.idx)
    }

    /// Insert `k` of the leaf's sorted inserts: its key and value.
    fn insert(&self, k: usize) -> Result<(&'a [u8], &'a [u8])> {
        self.src.inserted_entry(self.leaf.pgno, self.ins[k])
    }

    /// Loads the inserts of the leaf just landed on, sorted by key, and
    /// where among them the descent `how` puts the cursor (`k`: for a
    /// forward descent the first insert at or after its key, for a
    /// backward one the count of inserts at or before it).
    #[inline(never)]
    fn load_inserts(&mut self, how: &Descent<'_>) -> Result<()> {
        let mut found = [Insert::default(); MAX_ENTRIES];
        let n = self.src.inserted(self.leaf.pgno, &mut found)?;
        if n == 0 {
            return Ok(());
        }
        let found = &mut found[..n];
        found.sort_unstable_by(|a, b| compare_keys(a.key, b.key));
        for (slot, insert) in self.ins.iter_mut().zip(found.iter()) {
            *slot = insert.entry;
        }
        self.ins_len = n;
        let below = |key: &[u8], or_equal: bool| {
            found
                .iter()
                .take_while(|i| match compare_keys(i.key, key) {
                    std::cmp::Ordering::Less => true,
                    std::cmp::Ordering::Equal => or_equal,
                    std::cmp::Ordering::Greater => false,
                })
                .count()
        };
        self.k = match how {
            Descent::First => 0,
            Descent::Last => n,
            Descent::AtOrAfter(key) => below(key, false),
            Descent::AtOrBefore(key) => below(key, true),
        };
        Ok(())
    }

    /// With inserts: from cell candidate `idx` and insert candidate `k`
    /// (the first of each not below the place the cursor moves to), puts
    /// the cursor on the lower of the two, skipping deleted cells, or on
    /// the next leaf's first entry if neither is left.
    fn settle_forward(&mut self) -> Result<()> {
        while self.idx < self.leaf.count && is_deleted(self.src, &self.leaf, self.idx)? {
            self.idx += 1;
        }
        let cell = self.idx < self.leaf.count;
        let insert = self.k < self.ins_len;
        if !cell && !insert {
            self.on_insert = false;
            self.ins_len = 0;
            self.idx = self.leaf.count.wrapping_sub(1);
            self.step_forward_across()?;
            // A leaf without inserts is entered as `step_forward` does.
            return self.skip_deleted(true);
        }
        self.on_insert = insert
            && (!cell || compare_keys(self.insert(self.k)?.0, self.leaf.key(self.idx)?).is_lt());
        Ok(())
    }

    /// With inserts: from cell candidate `last` (wrapping below 0 for
    /// none) and the inserts `..k` (the last of each not above the place
    /// the cursor moves to), puts the cursor on the higher of the two,
    /// skipping deleted cells, or on the previous leaf's last entry if
    /// neither is left.
    fn settle_back(&mut self, mut last: usize) -> Result<()> {
        while last < self.leaf.count && is_deleted(self.src, &self.leaf, last)? {
            last = last.wrapping_sub(1);
        }
        let cell = last < self.leaf.count;
        let insert = self.k > 0;
        if !cell && !insert {
            self.on_insert = false;
            self.ins_len = 0;
            self.idx = 0;
            self.step_back_across()?;
            return self.skip_deleted(false);
        }
        self.on_insert = insert
            && (!cell || compare_keys(self.insert(self.k - 1)?.0, self.leaf.key(last)?).is_gt());
        if self.on_insert {
            self.k -= 1;
            self.idx = last.wrapping_add(1);
        } else {
            self.idx = last;
        }
        Ok(())
    }

    /// A step among the leaf's cells and its inserts, in key order.
    #[inline(never)]
    fn step_merged(&mut self, forward: bool) -> Result<()> {
        if forward {
            if self.on_insert {
                self.k += 1;
            } else {
                self.idx += 1;
            }
            self.settle_forward()
        } else {
            // The last cell and the last insert below the entry it is on.
            self.settle_back(self.idx.wrapping_sub(1))
        }
    }

    /// Leaves the leaf it is on for the next one's first entry (invalid
    /// past the end).
    fn next_leaf(&mut self) -> Result<()> {
        self.on_insert = false;
        self.ins_len = 0;
        self.step_forward_across()
    }

    pub(crate) fn entry(&self) -> Result<(&'a [u8], &'a [u8])> {
        let (k, v) = self.leaf_entry()?;
        Ok((k, self.value(v)?))
    }

    /// The key and the value's reference, decoded from the cell once: a
    /// scan checks the key against its bounds, then reads the value
    /// (`value`).
    #[inline(always)]
    fn leaf_entry(&self) -> Result<(&'a [u8], LeafValue<'a>)> {
        debug_assert!(self.valid);
        if self.on_insert {
            let (key, value) = self.insert(self.k)?;
            return Ok((key, LeafValue::Inline(value)));
        }
        if self.leaf.pgno & ARENA_BIT == 0 && !self.file_leaf_overlays {
            // No overlay to look at: no call through `src`.
            return self.leaf.leaf_entry(self.idx);
        }
        leaf_entry_seen(self.src, &self.leaf, self.idx)?.ok_or_else(on_a_deleted_entry)
    }

    /// The bytes of a value found by `leaf_entry` (its blob verified first
    /// if this cursor verifies).
    #[inline(always)]
    fn value(&self, v: LeafValue<'a>) -> Result<&'a [u8]> {
        if let (true, LeafValue::Overflow { pgno, sum, .. }) = (self.verify, v) {
            verify_blob(self.src.blob_run(pgno)?, pgno, sum)?;
        }
        resolve_value(self.src, v)
    }

    /// The leaf the cursor is on (its page number) and its last key, or
    /// its first (when valid): a scan compares that key with its bound
    /// once per leaf, not once per key.
    fn leaf_edge_key(&self, last: bool) -> Result<Option<(u64, &'a [u8])>> {
        if !self.valid {
            return Ok(None);
        }
        let node = self.leaf;
        let i = if last { node.count - 1 } else { 0 };
        let mut key = node.key(i)?;
        if self.ins_len != 0 {
            // The leaf's inserts may lie beyond its cells.
            let edge = self.insert(if last { self.ins_len - 1 } else { 0 })?.0;
            if (compare_keys(edge, key) == std::cmp::Ordering::Greater) == last {
                key = edge;
            }
        }
        Ok(Some((node.pgno, key)))
    }
}

/// An iterator over the entries of a tree within key bounds (`range`) or
/// under a key prefix (`prefix`), in key order, or in reverse with
/// `.rev()`. Yields `Result` because each step reads pages that are
/// checked as they are read. `Send`, like the transactions it borrows.
///
/// ```
/// # fn main() -> ironbark::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
/// # let mut tx = db.begin_write()?;
/// # let t = tx.open_tree("t")?;
/// # tx.put(&t, b"a", b"1")?;
/// # tx.commit()?;
/// let rx = db.begin_read()?;
/// let range = rx.iter(&t)?;
/// let n = std::thread::scope(|s| s.spawn(move || range.count()).join().unwrap());
/// assert_eq!(n, 1);
/// # Ok(())
/// # }
/// ```
pub struct Range<'a> {
    front: Cursor<'a>,
    back: Cursor<'a>,
    /// The bounds, owned so that the entries borrow only the source,
    /// never the caller's keys.
    lower: Bound<OwnedKey>,
    upper: Bound<OwnedKey>,
    front_started: bool,
    back_started: bool,
    last_front: Option<&'a [u8]>,
    last_back: Option<&'a [u8]>,
    /// The leaf (page number) whose every key from the front cursor's
    /// position on is below the upper bound and within the prefix: the
    /// front cursor's steps there skip that check (`u64::MAX`: none).
    front_clear_leaf: u64,
    /// The same for the back cursor and the lower bound.
    back_clear_leaf: u64,
    /// Some key can fail `below_upper` (`above_lower`): if not, a scan
    /// does not read a leaf's last (first) key to skip the check, one cache
    /// miss per leaf. Fixed when the range is made, tested at every step.
    bounded_above: bool,
    bounded_below: bool,
    /// For a prefix scan: the prefix every key must start with, owned so
    /// that the entries borrow only the source, never the caller's prefix.
    prefix: Option<OwnedKey>,
    done: bool,
}

/// The longest key a range keeps inline.
const INLINE_KEY: usize = 64;

/// A bound or prefix a range owns: inline up to [`INLINE_KEY`] bytes, so
/// that making a range (a seek) allocates nothing for the keys of most
/// trees; on the heap beyond.
enum OwnedKey {
    Inline { len: u8, bytes: [u8; INLINE_KEY] },
    Heap(Box<[u8]>),
}

impl OwnedKey {
    #[inline]
    fn new(key: &[u8]) -> OwnedKey {
        if key.len() <= INLINE_KEY {
            let mut bytes = [0u8; INLINE_KEY];
            bytes[..key.len()].copy_from_slice(key);
            OwnedKey::Inline {
                len: key.len() as u8,
                bytes,
            }
        } else {
            OwnedKey::Heap(key.into())
        }
    }
}

impl std::ops::Deref for OwnedKey {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            OwnedKey::Inline { len, bytes } => &bytes[..usize::from(*len)],
            OwnedKey::Heap(key) => key,
        }
    }
}

impl<'a> Range<'a> {
    /// Inlined, so that a caller's range is built where it is used rather
    /// than built, returned and copied (it is about 1 KB).
    #[inline(always)]
    pub(crate) fn new(
        src: &'a dyn PageSource,
        root: Root,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
    ) -> Range<'a> {
        Range {
            front: Cursor::new(src, root),
            back: Cursor::new(src, root),
            lower: lower.map(OwnedKey::new),
            upper: upper.map(OwnedKey::new),
            front_started: false,
            back_started: false,
            last_front: None,
            last_back: None,
            front_clear_leaf: u64::MAX,
            back_clear_leaf: u64::MAX,
            bounded_above: !matches!(upper, Bound::Unbounded),
            bounded_below: !matches!(lower, Bound::Unbounded),
            prefix: None,
            done: false,
        }
    }

    /// The entries whose keys start with `prefix`. The empty prefix is
    /// every key; a prefix of 0xff bytes has no successor key, so its scan
    /// runs to the end of the tree (see `prefix_end`).
    pub(crate) fn prefix(src: &'a dyn PageSource, root: Root, prefix: &[u8]) -> Range<'a> {
        let mut range = Range::new(src, root, Bound::Unbounded, Bound::Unbounded);
        range.prefix = Some(OwnedKey::new(prefix));
        range.bounded_above = true;
        range.bounded_below = true;
        range
    }

    /// This range, reading through verified cursors (see the module doc).
    /// Called before the first step.
    pub(crate) fn verified(mut self) -> Range<'a> {
        self.front.set_verify(true);
        self.back.set_verify(true);
        self
    }

    fn within_prefix(&self, key: &[u8]) -> bool {
        self.prefix.as_deref().is_none_or(|p| key.starts_with(p))
    }

    fn below_upper(&self, key: &[u8]) -> bool {
        if !self.within_prefix(key) {
            return false;
        }
        match &self.upper {
            Bound::Included(u) => key <= &u[..],
            Bound::Excluded(u) => key < &u[..],
            Bound::Unbounded => true,
        }
    }

    fn above_lower(&self, key: &[u8]) -> bool {
        if !self.within_prefix(key) {
            return false;
        }
        match &self.lower {
            Bound::Included(l) => key >= &l[..],
            Bound::Excluded(l) => key > &l[..],
            Bound::Unbounded => true,
        }
    }

    /// The front cursor's first position: its seek.
    #[inline(never)]
    fn start_front(&mut self) -> Result<()> {
        self.front_started = true;
        if let Some(p) = &self.prefix {
            // Keys starting with `p` are the keys `>= p` up to the
            // first one that does not (checked in `below_upper`).
            self.front.seek_ge(p)?;
        } else {
            match &self.lower {
                Bound::Unbounded => self.front.seek_first()?,
                Bound::Included(k) => self.front.seek_ge(k)?,
                Bound::Excluded(k) => {
                    self.front.seek_ge(k)?;
                    if self.front.is_valid() && self.front.key()? == &k[..] {
                        self.front.step_forward()?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Inlined (with `next`) into the caller's loop, its seek and leaf
    /// crossings out of line: a step within a leaf is then a compare, an
    /// increment and the decoding of one cell, with no call.
    #[inline(always)]
    fn advance_front(&mut self) -> Result<Option<(&'a [u8], &'a [u8])>> {
        if !self.front_started {
            self.start_front()?;
        } else {
            self.front.step_forward()?;
        }
        if !self.front.is_valid() {
            return Ok(None);
        }
        let (key, value) = self.front.leaf_entry()?;
        if self.bounded_above && self.front.leaf.pgno != self.front_clear_leaf {
            if let Some((leaf, last)) = self.front.leaf_edge_key(true)? {
                if self.below_upper(last) {
                    self.front_clear_leaf = leaf;
                } else if !self.below_upper(key) {
                    return Ok(None);
                }
            }
        }
        if self.last_back.is_some_and(|b| key >= b) {
            return Ok(None);
        }
        self.last_front = Some(key);
        Ok(Some((key, self.front.value(value)?)))
    }

    /// The back cursor's first position: its seek.
    #[inline(never)]
    fn start_back(&mut self) -> Result<()> {
        self.back_started = true;
        if let Some(p) = &self.prefix {
            // The last key starting with `p` is the last one below its
            // successor, or the last key of all if it has none.
            match prefix_end(p) {
                Some(end) => {
                    self.back.seek_le(&end)?;
                    if self.back.is_valid() && self.back.key()? == &end[..] {
                        self.back.step_back()?;
                    }
                }
                None => self.back.seek_last()?,
            }
        } else {
            match &self.upper {
                Bound::Unbounded => self.back.seek_last()?,
                Bound::Included(k) => self.back.seek_le(k)?,
                Bound::Excluded(k) => {
                    self.back.seek_le(k)?;
                    if self.back.is_valid() && self.back.key()? == &k[..] {
                        self.back.step_back()?;
                    }
                }
            }
        }
        Ok(())
    }

    /// As `advance_front`.
    #[inline(always)]
    fn advance_back(&mut self) -> Result<Option<(&'a [u8], &'a [u8])>> {
        if !self.back_started {
            self.start_back()?;
        } else {
            self.back.step_back()?;
        }
        if !self.back.is_valid() {
            return Ok(None);
        }
        let (key, value) = self.back.leaf_entry()?;
        if self.bounded_below && self.back.leaf.pgno != self.back_clear_leaf {
            if let Some((leaf, first)) = self.back.leaf_edge_key(false)? {
                if self.above_lower(first) {
                    self.back_clear_leaf = leaf;
                } else if !self.above_lower(key) {
                    return Ok(None);
                }
            }
        }
        if self.last_front.is_some_and(|f| key <= f) {
            return Ok(None);
        }
        self.last_back = Some(key);
        Ok(Some((key, self.back.value(value)?)))
    }

    fn finish(
        &mut self,
        r: Result<Option<(&'a [u8], &'a [u8])>>,
    ) -> Option<Result<(&'a [u8], &'a [u8])>> {
        match r {
            Ok(Some(e)) => Some(Ok(e)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

impl<'a> Iterator for Range<'a> {
    type Item = Result<(&'a [u8], &'a [u8])>;

    // Inlined into the caller's loop (across crates, which needs the
    // attribute): a call per entry cost as much as the step itself.
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let r = self.advance_front();
        self.finish(r)
    }
}

impl DoubleEndedIterator for Range<'_> {
    #[inline]
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let r = self.advance_back();
        self.finish(r)
    }
}

/// The smallest key greater than every key that starts with `prefix`: the
/// prefix without its trailing 0xff bytes, its last byte incremented.
/// `None` when there is none (the prefix is empty or all 0xff bytes): then
/// every key from the prefix on starts with it, up to the end of the tree.
pub(crate) fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let keep = prefix.iter().rposition(|&b| b != 0xff)?;
    let mut end = prefix[..=keep].to_vec();
    end[keep] += 1;
    Some(end)
}

/// Which entry a nearest-key lookup wants, relative to its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Nearest {
    AtOrAfter,
    After,
    AtOrBefore,
    Before,
}

/// A key and its value, borrowed from the page source.
pub(crate) type Entry<'a> = (&'a [u8], &'a [u8]);

/// The first entry of a tree (the last with `last`). The lookups of both
/// kinds of transaction share this and `nearest`, as they share
/// `search::get` and `Range`.
pub(crate) fn edge<'a>(
    src: &'a dyn PageSource,
    root: Root,
    last: bool,
) -> Result<Option<Entry<'a>>> {
    let mut cursor = Cursor::for_one_entry(src, root);
    if last {
        cursor.seek_last()?;
    } else {
        cursor.seek_first()?;
    }
    current(&cursor)
}

/// The entry nearest to `key` in the direction `how` asks for.
pub(crate) fn nearest<'a>(
    src: &'a dyn PageSource,
    root: Root,
    key: &[u8],
    how: Nearest,
) -> Result<Option<Entry<'a>>> {
    let mut cursor = Cursor::for_one_entry(src, root);
    match how {
        Nearest::AtOrAfter | Nearest::After => {
            cursor.seek_ge(key)?;
            if how == Nearest::After && cursor.is_valid() && cursor.key()? == key {
                cursor.step_forward()?;
            }
        }
        Nearest::AtOrBefore | Nearest::Before => {
            cursor.seek_le(key)?;
            if how == Nearest::Before && cursor.is_valid() && cursor.key()? == key {
                cursor.step_back()?;
            }
        }
    }
    current(&cursor)
}

/// The number of entries with keys from `lower` (included) to `upper`
/// (excluded), counted leaf by leaf from the leaves' entry counts: one
/// descent to the first key `>= lower`, then per leaf one read of its last
/// key (is the whole rest of the leaf below `upper`?) and, in the leaf
/// where `upper` falls, one binary search. No value is read and no other
/// key decoded, so it costs O(leaf pages touched), not O(entries). An
/// inverted range (`lower > upper`) counts 0.
pub(crate) fn count_between(
    src: &dyn PageSource,
    root: Root,
    lower: &[u8],
    upper: &[u8],
) -> Result<u64> {
    let mut cursor = Cursor::for_one_entry(src, root);
    cursor.seek_ge(lower)?;
    let mut n = 0u64;
    while cursor.valid {
        let (node, idx) = (cursor.leaf, cursor.idx);
        // The leaf's inserts within the bounds (those below the cursor are
        // below `lower`).
        for k in 0..cursor.ins_len {
            let key = cursor.insert(k)?.0;
            n += u64::from(key >= lower && key < upper);
        }
        // A cell the cursor is on, or (on an insert) the first cell above
        // it: `idx <= node.count`.
        let last = node.count - 1;
        let end = if node.key(last)? < upper {
            node.count
        } else {
            match node.search_leaf(upper)? {
                Ok(i) | Err(i) => i,
            }
        };
        // Entries its overlay deletes are cells the snapshot does not see.
        let deleted = if may_be_overlaid(src, node.pgno) && idx < end {
            src.deleted_between(node.pgno, idx, end)?
        } else {
            0
        };
        n += end.saturating_sub(idx).saturating_sub(deleted) as u64;
        if end < node.count {
            break;
        }
        // Straight to the next leaf's first entry.
        cursor.next_leaf()?;
    }
    Ok(n)
}

/// Where a cursor is: a cell of a leaf and its slot, or a key the leaf's
/// overlay inserts, with its value.
pub(crate) enum Landed<'a> {
    Cell(Node<'a>, usize),
    Inserted(&'a [u8], &'a [u8]),
}

/// A cursor found on an entry its source sees deleted: every seek and
/// step skips those, so this is a broken invariant, reported as damage
/// rather than a panic.
fn on_a_deleted_entry() -> crate::error::Error {
    crate::error::Error::Corrupted {
        page: None,
        detail: "a cursor stopped on a deleted entry".into(),
    }
}

fn current<'a>(cursor: &Cursor<'a>) -> Result<Option<Entry<'a>>> {
    if cursor.is_valid() {
        cursor.entry().map(Some)
    } else {
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::{prefix_end, Frame, Frames};

    fn frame(pgno: u64) -> Frame<'static> {
        Frame {
            bytes: &[],
            pgno,
            count: 0,
            idx: pgno as u32 * 3,
        }
    }

    /// Pushes, pops and edits of the top frame, in a pattern that crosses
    /// the inline/heap boundary both ways many times, agree with a vector;
    /// once the heap part has grown, going back down and up reuses it.
    #[test]
    fn frames_beyond_the_inline_ones_agree_with_a_vector() {
        let mut frames: Frames<'static, 3> = Frames::new();
        let mut model: Vec<(u64, u32)> = Vec::new();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut deepest = 0;
        for step in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            match x % 5 {
                0..=2 if model.len() < 12 => {
                    frames.push(frame(step));
                    model.push((step, step as u32 * 3));
                }
                4 if x.is_multiple_of(7) => {
                    frames.clear();
                    model.clear();
                }
                _ if !model.is_empty() => {
                    frames.top_mut().expect("a frame").idx += 1;
                    model.last_mut().unwrap().1 += 1;
                    if x.is_multiple_of(2) {
                        frames.pop();
                        model.pop();
                    }
                }
                _ => {}
            }
            assert_eq!(frames.len(), model.len(), "step {step}");
            match model.last() {
                Some(&(pgno, idx)) => {
                    let top = frames.top_mut().expect("a frame");
                    assert_eq!((top.pgno, top.idx), (pgno, idx), "step {step}");
                }
                None => assert!(frames.top_mut().is_none(), "step {step}"),
            }
            deepest = deepest.max(model.len());
        }
        assert_eq!(deepest, 12, "the pattern reaches the heap frames");
        assert!(frames.deep.capacity() < 2 * (12 - 3), "heap frames reused");
    }

    #[test]
    fn prefix_end_is_the_successor() {
        assert_eq!(prefix_end(b""), None);
        assert_eq!(prefix_end(&[0xff, 0xff]), None);
        assert_eq!(prefix_end(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_end(&[b'a', 0xff]), Some(b"b".to_vec()));
        assert_eq!(prefix_end(&[0, 0xfe, 0xff]), Some(vec![0, 0xff]));
    }
}
