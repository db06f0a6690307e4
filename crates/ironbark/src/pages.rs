//! The page resolver: the one way the B+tree reaches a page, whether it is
//! committed (read through the memory map) or dirty (a private buffer of the
//! write transaction).
//!
//! Invariant: a committed page number is only resolved if it lies in
//! `[META_SLOTS, page_count)` of the snapshot being read, so every byte
//! returned is inside the file, or, carrying [`ARENA_BIT`], in the page
//! arena of logged commits (`storage::arena`), bounds-checked there too;
//! dirty page numbers carry [`DIRTY_BIT`] and never reach either.

use std::sync::Arc;

use crate::btree::page::{
    blob_run_pages, copy_page, is_branch_kind, page_kind, set_child, BLOB_HEADER_LEN, DIRTY_BIT,
    KIND_BLOB, KIND_BRANCH, KIND_LEAF,
};
use crate::error::{Error, Result};
use crate::storage::arena::{Arena, FileOverlays, SlotBuf, ARENA_BIT};
use crate::storage::map::Map;
use crate::storage::meta::META_SLOTS;
use crate::storage::overlay::{Insert, Overlaid, OverlayPage, MAX_ENTRIES};

/// Room for the inserts of one overlay.
pub(crate) type Inserts<'a> = [Insert<'a>; MAX_ENTRIES];
use crate::storage::spill::{SpillFile, SpillSlot};

/// Resolves page numbers to bytes. `Sync`, so that the cursors and
/// iterators that hold a `&dyn PageSource` may move to another thread
/// (`Range: Send`).
pub(crate) trait PageSource: Sync {
    /// The bytes of one page.
    fn page(&self, pgno: u64) -> Result<&[u8]>;
    /// The bytes of the blob run whose first page is `pgno`.
    fn blob_run(&self, pgno: u64) -> Result<&[u8]>;
    /// What the value overlay of committed leaf `leaf` says of its entry
    /// `index` as this source sees it (`storage::overlay`), if anything.
    fn overlay(&self, leaf: u64, index: usize) -> Result<Option<Overlaid<'_>>> {
        let _ = (leaf, index);
        Ok(None)
    }
    /// How many of committed leaf `leaf`'s entries `from..to` its overlay
    /// deletes, as this source sees it.
    fn deleted_between(&self, leaf: u64, from: usize, to: usize) -> Result<usize> {
        let _ = (leaf, from, to);
        Ok(0)
    }
    /// The keys (and their values) that committed leaf `leaf`'s overlay
    /// adds to it, as this source sees them, into `out` in no order;
    /// returns how many (`storage::overlay`: inserts).
    fn inserted<'s>(&'s self, leaf: u64, out: &mut Inserts<'s>) -> Result<usize> {
        let _ = (leaf, out);
        Ok(0)
    }
    /// The value committed leaf `leaf`'s overlay gives `key`, a key the
    /// leaf's cells lack, as this source sees it, if it inserts it.
    fn inserted_value(&self, leaf: u64, key: &[u8]) -> Result<Option<&[u8]>> {
        let _ = (leaf, key);
        Ok(None)
    }
    /// Insert `entry` of committed leaf `leaf`'s overlay, one `inserted`
    /// gave: its key and value.
    fn inserted_entry(&self, leaf: u64, entry: u8) -> Result<(&[u8], &[u8])> {
        let _ = (leaf, entry);
        Err(Error::corrupted_page(
            leaf,
            "no overlay inserts into this leaf",
        ))
    }
    /// Whether committed leaf `leaf`'s overlay has inserts of any txn.
    fn has_inserts(&self, leaf: u64) -> bool {
        let _ = leaf;
        false
    }
    /// Starts loading the lines a lookup reads of committed leaf `leaf`'s value
    /// overlay, if it has one: called as soon as the leaf's number is
    /// known, so that the overlay's miss overlaps the leaf's.
    #[inline(always)]
    fn prefetch_overlay(&self, leaf: u64) {
        let _ = leaf;
    }
    /// Whether leaves in the file may have value overlays in this source
    /// (`storage::arena::FileOverlays`); arena leaves may in any source.
    #[inline(always)]
    fn file_leaf_overlays(&self) -> bool {
        false
    }
}

/// Committed pages of one snapshot, read through the map.
#[derive(Clone)]
pub(crate) struct MapSource {
    pub(crate) map: Arc<Map>,
    pub(crate) page_count: u64,
    pub(crate) page_size: usize,
    /// The arena holding the pages of logged commits not yet checkpointed
    /// (`None` when the snapshot has none).
    pub(crate) arena: Option<Arc<Arena>>,
    /// The snapshot's txn: the value overlays of its arena leaves that it
    /// sees are those written at or before it (0 without an arena).
    pub(crate) overlay_txn: u64,
    /// The value overlays of file leaves in the snapshot's span of logged
    /// commits (`storage::arena::FileOverlays`), if any leaf has one
    /// (never without an arena).
    pub(crate) file_overlays: Option<Arc<FileOverlays>>,
}

impl MapSource {
    /// The value overlay of committed leaf `leaf` (`storage::overlay`), if
    /// it has one: an arena leaf's in the arena's table, a file leaf's in
    /// the span's.
    #[inline]
    pub(crate) fn overlay_page(&self, leaf: u64) -> Option<OverlayPage<'_>> {
        self.arena.as_ref()?.overlay_in(self.overlay_unit(leaf)?)
    }

    /// Starts loading the table word `overlay_unit(leaf)` reads.
    #[inline]
    pub(crate) fn prefetch_overlay_word(&self, leaf: u64) {
        let Some(arena) = self.arena.as_ref() else {
            return;
        };
        if leaf & ARENA_BIT != 0 {
            arena.prefetch_overlay_word(leaf);
        } else if let Some(files) = &self.file_overlays {
            files.prefetch_word(leaf);
        }
    }

    /// The overlay unit of `overlay_page`'s overlay
    /// (`storage::arena::OVERLAY_UNITS_PER_SLOT`).
    #[inline]
    pub(crate) fn overlay_unit(&self, leaf: u64) -> Option<u64> {
        let arena = self.arena.as_ref()?;
        if leaf & ARENA_BIT != 0 {
            return arena.overlay_unit(leaf);
        }
        self.file_overlays.as_ref()?.unit_of(leaf)
    }

    #[inline(never)]
    fn range(&self, pgno: u64, pages: u64) -> Result<&[u8]> {
        let end = pgno.checked_add(pages);
        if pgno < META_SLOTS || pages == 0 || end.is_none_or(|e| e > self.page_count) {
            // Off the hot path: an arena page number fails the file's test.
            if pgno & ARENA_BIT != 0 {
                if let Some(run) = self.arena.as_ref().and_then(|a| a.run(pgno, pages)) {
                    return Ok(run);
                }
            }
            return Err(Error::corrupted_page(
                pgno,
                format!(
                    "reference to pages {pgno}..+{pages} outside the {} pages in use",
                    self.page_count
                ),
            ));
        }
        let len = usize::try_from(pages * self.page_size as u64)
            .map_err(|_| Error::corrupted_page(pgno, "run too long"))?;
        self.map
            .slice(pgno * self.page_size as u64, len)
            .ok_or_else(|| Error::corrupted_page(pgno, "page beyond the map"))
    }
}

impl PageSource for MapSource {
    #[inline(always)]
    fn page(&self, pgno: u64) -> Result<&[u8]> {
        // A file page in range, inlined into the descent: one compare (the
        // subtraction wraps the meta pages to above any count) and the
        // map's own. The rest (arena pages, damage) goes the general way.
        if pgno.wrapping_sub(META_SLOTS) < self.page_count.saturating_sub(META_SLOTS) {
            if let Some(offset) = pgno.checked_mul(self.page_size as u64) {
                if let Some(page) = self.map.slice(offset, self.page_size) {
                    return Ok(page);
                }
            }
        }
        self.range(pgno, 1)
    }

    fn blob_run(&self, pgno: u64) -> Result<&[u8]> {
        let first = self.range(pgno, 1)?;
        let pages = blob_run_pages(first);
        if pages == 0 || (pages as usize).saturating_mul(self.page_size) < BLOB_HEADER_LEN {
            return Err(Error::corrupted_page(pgno, "blob run of zero pages"));
        }
        self.range(pgno, pages)
    }

    #[inline]
    fn overlay(&self, leaf: u64, index: usize) -> Result<Option<Overlaid<'_>>> {
        match self.overlay_page(leaf) {
            Some(page) => page.value(index, self.overlay_txn),
            None => Ok(None),
        }
    }

    fn deleted_between(&self, leaf: u64, from: usize, to: usize) -> Result<usize> {
        match self.overlay_page(leaf) {
            Some(page) => page.deleted_between(self.overlay_txn, from, to),
            None => Ok(0),
        }
    }

    fn inserted<'s>(&'s self, leaf: u64, out: &mut Inserts<'s>) -> Result<usize> {
        match self.overlay_page(leaf) {
            Some(page) => page.inserts(self.overlay_txn, out),
            None => Ok(0),
        }
    }

    fn inserted_value(&self, leaf: u64, key: &[u8]) -> Result<Option<&[u8]>> {
        match self.overlay_page(leaf) {
            Some(page) => page.inserted_value(key, self.overlay_txn),
            None => Ok(None),
        }
    }

    fn inserted_entry(&self, leaf: u64, entry: u8) -> Result<(&[u8], &[u8])> {
        match self.overlay_page(leaf) {
            Some(page) => page.insert_at(entry),
            None => Err(Error::corrupted_page(leaf, "its overlay is gone")),
        }
    }

    fn has_inserts(&self, leaf: u64) -> bool {
        self.overlay_page(leaf).is_some_and(|p| p.has_inserts())
    }

    #[inline(always)]
    fn prefetch_overlay(&self, leaf: u64) {
        if let Some(page) = self.overlay_page(leaf) {
            page.prefetch();
        }
    }

    #[inline(always)]
    fn file_leaf_overlays(&self) -> bool {
        self.file_overlays.is_some()
    }
}

/// A dirty page's buffer: on the heap, or in an arena slot lent to the
/// transaction (`storage::arena::SlotBuf`), where a logged commit publishes
/// it without copying it again.
#[derive(Debug)]
pub(crate) enum PageBuf {
    Heap(Box<[u8]>),
    Slot(SlotBuf),
}

impl std::ops::Deref for PageBuf {
    type Target = [u8];

    #[inline]
    fn deref(&self) -> &[u8] {
        match self {
            PageBuf::Heap(b) => b,
            PageBuf::Slot(s) => s,
        }
    }
}

impl std::ops::DerefMut for PageBuf {
    #[inline]
    fn deref_mut(&mut self) -> &mut [u8] {
        match self {
            PageBuf::Heap(b) => b,
            PageBuf::Slot(s) => s,
        }
    }
}

/// The dirty pages of a write transaction, indexed by provisional number.
///
/// Savepoints (`txn::savepoint`) freeze the pages that exist when one is
/// taken: those below `editable_from` are never edited (the write path
/// copies one first, `supersede`) and never handed to the pool when freed
/// (they go to `graveyard`), so that a rollback finds them as they were.
///
/// A transaction whose pages outgrow its memory budget spills some to a
/// spill file (`spill_to`, `storage::spill`): the page's buffer goes, its
/// number stays, and it is read through the spill file's map until an edit
/// copies it back (`get_mut`). So every page number handed out stays valid,
/// and nothing above this type knows which pages are in memory.
///
/// A transaction that may be logged is lent arena slots (`lend_slots`):
/// new page buffers come from them first, so that a logged commit
/// publishes those pages where they are (`take_slot`). A slot buffer
/// freed within the transaction goes back to `slots`, never to `pool`;
/// the slots still held when the transaction ends are reclaimed by the
/// next one (`ArenaSpace::reclaim_lent`).
pub(crate) struct DirtyPages {
    /// `None`: freed within the transaction, or spilled (`spilled[i].len
    /// > 0`).
    pub(crate) pages: Vec<Option<PageBuf>>,
    /// The lowest dirty page number that may be edited in place:
    /// `DIRTY_BIT | frozen pages`. One compare (`pgno >= editable_from`)
    /// tells a page that may be edited from a committed page (no
    /// `DIRTY_BIT`) and from a frozen one; with no savepoint it is
    /// `DIRTY_BIT`, so the test is the plain "is it dirty".
    pub(crate) editable_from: u64,
    /// Frozen pages freed or superseded since they were frozen, by index:
    /// dead for the commit (their slot in `pages` is `None`), kept for a
    /// rollback to a savepoint at which they were alive.
    pub(crate) graveyard: Vec<(usize, PageBuf)>,
    /// Overflow blobs added (freed ones included): when 0, no leaf can
    /// reference a dirty blob, and the commit need not look for any.
    pub(crate) blobs_added: usize,
    /// Each blob sealed as it was put (`btree::write::SealAtPut`), by
    /// index (`pgno` 0 for other pages; shorter than `pages` past the last
    /// such blob). The commit reads them here, not in the blobs, which a
    /// large commit has left in memory, not in cache.
    sealed_at_put: Vec<SealedBlob>,
    /// Page-sized buffers to reuse (kept by the writer across transactions,
    /// so that copying a page on write allocates nothing in steady state).
    pub(crate) pool: Vec<Box<[u8]>>,
    /// Bytes of the buffers in `pages` (live and in memory): what
    /// `Options::max_dirty_bytes` bounds.
    pub(crate) resident: usize,
    /// Where each spilled page lies, by index (empty until the first spill;
    /// then as long as `pages` at each spill, shorter after).
    spilled: Vec<SpillSlot>,
    /// Pages spilled now.
    spilled_count: usize,
    /// The spill file, made by the first spill.
    spill: Option<Box<SpillFile>>,
    /// Leaves a checkpoint reads from the page arena instead of copying
    /// them (`park_arena_leaf`), by index: the arena page number, 0 for
    /// none. Like spilled pages they are `None` in `pages`, read where they
    /// lie, and sealed on a copy that is written at once (`seal_with`), so
    /// a checkpoint holds no second copy of the arena's leaves.
    parked: Vec<u64>,
    /// Pages parked now.
    parked_count: usize,
    /// The arena the parked pages lie in.
    parked_arena: Option<Arc<Arena>>,
    /// Where the next spill starts looking (oldest pages first, in turn).
    spill_cursor: usize,
    /// Arena slots lent to this transaction and not in use: the next page
    /// buffers of leaves and blobs...
    slots: Vec<SlotBuf>,
    /// ... and of branches (slots of the arena's upper region, where it
    /// has room: `ArenaSpace`).
    branch_slots: Vec<SlotBuf>,
    /// Slots lent to this transaction in all.
    slots_lent: usize,
    /// Set when the arena could lend no more: the transaction stops asking.
    slots_refused: bool,
    /// By index: the dirty parent and slot a descent last linked each
    /// dirty page into (`link_child`), `(0, 0)` for none. Hints only: a
    /// split, merge or savepoint may have moved the page since, so the
    /// commit checks each against its parent (`seal::order_dirty`), and
    /// scans the dirty branches for their dirty children when one fails.
    parent_hints: Vec<(u64, u32)>,
}

/// A blob sealed as it was put: its page number and its checksum.
#[derive(Clone, Copy, Debug, Default)]
struct SealedBlob {
    pgno: u64,
    sum: u64,
}

/// Buffers kept for reuse at most (16 MiB of 4 KiB pages): a larger
/// transaction allocates the rest, and the pool does not pin its peak.
pub(crate) const POOL_MAX: usize = 4096;

/// Unused arena slots a transaction that may be logged holds before each
/// change of pages (topped up to these): for a put's leaf and one more
/// (a split), and for the branches above it (a root and a branch, and one
/// more for a fourth level or a split); pages a change makes beyond them
/// take heap buffers. Few, so that a single-put commit gives few back.
const SLOTS: usize = 2;
const BRANCH_SLOTS: usize = 3;

impl Default for DirtyPages {
    fn default() -> DirtyPages {
        DirtyPages {
            pages: Vec::new(),
            editable_from: DIRTY_BIT,
            graveyard: Vec::new(),
            blobs_added: 0,
            sealed_at_put: Vec::new(),
            pool: Vec::new(),
            resident: 0,
            spilled: Vec::new(),
            spilled_count: 0,
            spill: None,
            parked: Vec::new(),
            parked_count: 0,
            parked_arena: None,
            spill_cursor: 0,
            slots: Vec::new(),
            branch_slots: Vec::new(),
            slots_lent: 0,
            slots_refused: false,
            parent_hints: Vec::new(),
        }
    }
}

/// Dirty branches and leaves not found yet by the commit's walk of the
/// trees (`txn::seal::order_dirty`): the scan of a branch for its dirty
/// children stops when none of their kind is left.
#[derive(Default)]
pub(crate) struct TreePageKinds {
    branches: usize,
    leaves: usize,
}

impl TreePageKinds {
    /// Counts one dirty page of `kind` found; whether any of that kind is
    /// left. A count already at zero (which a correct count never reaches
    /// early) answers `true`: scanning on is always correct.
    pub(crate) fn take(&mut self, kind: u8) -> bool {
        let left = match kind {
            k if crate::btree::page::is_branch_kind(k) => &mut self.branches,
            crate::btree::page::KIND_LEAF => &mut self.leaves,
            _ => return true,
        };
        if *left == 0 {
            return true;
        }
        *left -= 1;
        *left > 0
    }
}

impl DirtyPages {
    /// A transaction's dirty pages, in a box the writer keeps between
    /// transactions (`WriterState::dirty_spare`, `emptied`): a transaction
    /// moves by a pointer, and one in steady state allocates nothing to
    /// hold its pages (page buffers, and the emptied vectors of pages and
    /// lent slots, are the last one's).
    pub(crate) fn boxed(spare: Option<Box<DirtyPages>>) -> Box<DirtyPages> {
        let dirty = spare.unwrap_or_default();
        debug_assert!(dirty.is_reset());
        dirty
    }

    /// Whether nothing of a transaction is left (what `emptied` gives).
    fn is_reset(&self) -> bool {
        self.pages.is_empty()
            && self.graveyard.is_empty()
            && self.slots.is_empty()
            && self.branch_slots.is_empty()
            && self.parent_hints.is_empty()
            && self.spill.is_none()
            && self.parked_arena.is_none()
            && self.resident == 0
    }

    /// Points slot `slot` of dirty branch `parent` at dirty page `child`
    /// (a copy the descent just made), remembering the link as `child`'s
    /// parent hint.
    pub(crate) fn link_child(&mut self, parent: u64, slot: usize, child: u64) {
        debug_assert!(parent & DIRTY_BIT != 0 && child & DIRTY_BIT != 0);
        set_child(self.get_mut(parent), slot, child, 0, 0);
        self.hint_parent(child, parent, slot);
    }

    /// Remembers that slot `slot` of dirty branch `parent` holds dirty page
    /// `child` (a hint: see `parent_hints`), for a link made by another
    /// way than `link_child` (a split's new page, inserted with its cell).
    pub(crate) fn hint_parent(&mut self, child: u64, parent: u64, slot: usize) {
        debug_assert!(parent & DIRTY_BIT != 0 && child & DIRTY_BIT != 0);
        let index = (child & !DIRTY_BIT) as usize;
        if self.parent_hints.len() <= index {
            self.parent_hints.resize(index + 1, (0, 0));
        }
        self.parent_hints[index] = (parent, slot as u32);
    }

    /// The dirty parent and slot page `index` was last linked into, if any
    /// (a hint: see `parent_hints`).
    #[inline]
    pub(crate) fn parent_hint(&self, index: usize) -> Option<(u64, usize)> {
        match self.parent_hints.get(index) {
            Some(&(parent, slot)) if parent != 0 => Some((parent, slot as usize)),
            _ => None,
        }
    }

    pub(crate) fn add(&mut self, page: PageBuf) -> u64 {
        self.resident += page.len();
        self.pages.push(Some(page));
        DIRTY_BIT | (self.pages.len() as u64 - 1)
    }

    /// A page-sized buffer for a page of `kind`: a lent arena slot if
    /// there is one for its kind, else from the pool if it has one
    /// (contents stale: the caller overwrites all of it), else a new one.
    #[inline]
    fn buffer(&mut self, page_size: usize, kind: u8) -> PageBuf {
        let slots = if is_branch_kind(kind) {
            &mut self.branch_slots
        } else {
            &mut self.slots
        };
        if let Some(s) = slots.pop() {
            if s.len() == page_size {
                return PageBuf::Slot(s);
            }
            slots.push(s);
        }
        PageBuf::Heap(match self.pool.pop() {
            Some(b) if b.len() == page_size => b,
            _ => vec![0u8; page_size].into_boxed_slice(),
        })
    }

    /// A buffer no longer used: a slot back to the slots of its region, a
    /// heap one to the pool (up to its bound).
    fn recycle(&mut self, page: PageBuf) {
        match page {
            PageBuf::Slot(s) if s.is_upper() => self.branch_slots.push(s),
            PageBuf::Slot(s) => self.slots.push(s),
            PageBuf::Heap(b) => {
                if self.pool.len() < POOL_MAX {
                    self.pool.push(b);
                }
            }
        }
    }

    /// Whether this transaction should be lent more arena slots: it holds
    /// few unused, has been lent fewer than `max` in all, and neither
    /// spilled nor was refused.
    #[inline]
    pub(crate) fn wants_slots(&self, max: usize) -> bool {
        (self.slots.len() < SLOTS || self.branch_slots.len() < BRANCH_SLOTS)
            && self.slots_lent < max
            && !self.slots_refused
            && self.spilled_count == 0
    }

    /// Takes arena slots from `lend` (`true`: for a branch) until `SLOTS`
    /// and `BRANCH_SLOTS` are unused (or it has none: then no more are
    /// asked for).
    pub(crate) fn lend_slots(&mut self, mut lend: impl FnMut(bool) -> Option<SlotBuf>) {
        for (branch, want) in [(true, BRANCH_SLOTS), (false, SLOTS)] {
            loop {
                let slots = if branch {
                    &mut self.branch_slots
                } else {
                    &mut self.slots
                };
                if slots.len() >= want {
                    break;
                }
                match lend(branch) {
                    Some(s) => {
                        slots.push(s);
                        self.slots_lent += 1;
                    }
                    None => {
                        self.slots_refused = true;
                        return;
                    }
                }
            }
        }
    }

    /// The arena page number of dirty page `id` if its buffer is a lent
    /// slot.
    #[inline]
    pub(crate) fn slot_pgno(&self, id: u64) -> Option<u64> {
        match self.pages[(id & !DIRTY_BIT) as usize].as_ref() {
            Some(PageBuf::Slot(s)) => Some(s.pgno()),
            _ => None,
        }
    }

    /// Takes the lent slot holding dirty page `id` out (a logged commit
    /// publishes it: `ArenaSpace::adopt`); the page is gone from here.
    pub(crate) fn take_slot(&mut self, id: u64) -> SlotBuf {
        let index = (id & !DIRTY_BIT) as usize;
        match self.pages[index].take() {
            Some(PageBuf::Slot(s)) => {
                self.resident -= s.len();
                s
            }
            _ => panic!("dirty page {id:#x} is not in an arena slot"),
        }
    }

    /// Adds an overflow blob holding `value` (see `blobs_added`); a
    /// one-page blob reuses a pooled buffer. With `seal` (`Some((pgno,
    /// txn))`, `btree::write::SealAtPut`) it is sealed at once as page
    /// `pgno` of commit `txn`, so that the checksum reads the value right
    /// after the copy wrote it.
    #[inline]
    pub(crate) fn add_blob(
        &mut self,
        page_size: usize,
        value: &[u8],
        seal: Option<(u64, u64)>,
    ) -> u64 {
        self.blobs_added += 1;
        let mut blob = if BLOB_HEADER_LEN + value.len() <= page_size {
            let mut b = self.buffer(page_size, KIND_BLOB);
            crate::btree::page::fill_blob(&mut b, page_size, value);
            b
        } else {
            PageBuf::Heap(crate::btree::page::new_blob(page_size, value, 1))
        };
        let Some((pgno, txn)) = seal else {
            return self.add(blob);
        };
        let sum = crate::btree::page::seal(&mut blob, pgno, txn);
        let index = self.pages.len();
        if self.sealed_at_put.len() <= index {
            self.sealed_at_put.resize(index + 1, SealedBlob::default());
        }
        self.sealed_at_put[index] = SealedBlob { pgno, sum };
        self.add(blob)
    }

    /// The page number and checksum blob `id` was sealed with as it was
    /// put, if it was (`add_blob`).
    #[inline]
    pub(crate) fn sealed_at_put(&self, id: u64) -> Option<(u64, u64)> {
        self.sealed(id).map(|s| (s.pgno, s.sum))
    }

    #[inline]
    fn sealed(&self, id: u64) -> Option<&SealedBlob> {
        debug_assert!(id & DIRTY_BIT != 0);
        let index = (id & !DIRTY_BIT) as usize;
        self.sealed_at_put.get(index).filter(|s| s.pgno != 0)
    }

    /// Adds an overflow blob holding `len` zeros, from zeroed memory: no
    /// buffer of zeros to copy from, and the allocator's zeroed pages
    /// (fresh from the system for a large run) are written only by the
    /// header and by whoever fills the value in (`WriteTxn::put_writer`).
    pub(crate) fn add_zeroed_blob(&mut self, page_size: usize, len: usize) -> u64 {
        self.blobs_added += 1;
        let pages = (BLOB_HEADER_LEN + len).div_ceil(page_size);
        let mut b = vec![0u8; pages * page_size].into_boxed_slice();
        crate::btree::page::write_blob_header(&mut b, page_size, len);
        debug_assert_eq!(blob_run_pages(&b) as usize, pages);
        debug_assert!(
            crate::btree::page::blob_data(&b, DIRTY_BIT, None, Some(len as u64))
                .is_ok_and(|d| d.len() == len)
        );
        self.add(PageBuf::Heap(b))
    }

    /// Adds a copy of the committed page `bytes`.
    pub(crate) fn add_copy(&mut self, bytes: &[u8]) -> u64 {
        let mut b = self.buffer(bytes.len(), page_kind(bytes));
        copy_page(&mut b, bytes);
        self.add(b)
    }

    /// Adds a new tree page holding `cells` in order (they fit).
    pub(crate) fn add_page<C: AsRef<[u8]>>(
        &mut self,
        page_size: usize,
        is_leaf: bool,
        cells: &[C],
    ) -> u64 {
        self.add_page_from(page_size, is_leaf, cells.len(), |i| cells[i].as_ref())
    }

    /// Adds a new tree page holding the `count` cells `cell(0)`, ... in
    /// order (they fit): `fill_page_from`.
    pub(crate) fn add_page_from<'c>(
        &mut self,
        page_size: usize,
        is_leaf: bool,
        count: usize,
        cell: impl Fn(usize) -> &'c [u8],
    ) -> u64 {
        self.add_page_parts(page_size, is_leaf, count, |i| [cell(i), &[], &[]])
    }

    /// Adds a new tree page holding the `count` cells `cell(0)`, ... (each
    /// in pieces) in order (they fit): `fill_page_parts`.
    pub(crate) fn add_page_parts<'c>(
        &mut self,
        page_size: usize,
        is_leaf: bool,
        count: usize,
        cell: impl Fn(usize) -> crate::btree::page::CellParts<'c>,
    ) -> u64 {
        let kind = if is_leaf { KIND_LEAF } else { KIND_BRANCH };
        let mut b = self.buffer(page_size, kind);
        crate::btree::page::fill_page_parts(&mut b, is_leaf, count, cell);
        self.add(b)
    }

    /// Every heap page buffer back to the pool (up to a bound), and the
    /// rest emptied for the next transaction, in the same box (see
    /// `boxed`). Lent arena slots are dropped here: the next write
    /// transaction reclaims them (`ArenaSpace::reclaim_lent`).
    pub(crate) fn emptied(self: Box<Self>, page_size: usize) -> Box<DirtyPages> {
        self.emptied_keeping(page_size, POOL_MAX)
    }

    /// `emptied`, keeping up to `pool_max` buffers (and no more: a larger
    /// pool kept before goes back). The steps of a checkpoint keep a
    /// step's worth, so that each step after the first writes its copies
    /// (the leaves it folds) into the last one's buffers, not into fresh
    /// memory the kernel must zero.
    pub(crate) fn emptied_keeping(
        mut self: Box<Self>,
        page_size: usize,
        pool_max: usize,
    ) -> Box<DirtyPages> {
        self.pool.truncate(pool_max);
        // A transaction that changed no page (an overlaid put or delete)
        // has none to give back: the chain of iterators below costs about
        // a hundred instructions even when empty.
        if !self.pages.is_empty() || !self.graveyard.is_empty() {
            let room = pool_max.saturating_sub(self.pool.len());
            self.pool.extend(
                self.pages
                    .drain(..)
                    .flatten()
                    .chain(self.graveyard.drain(..).map(|(_, b)| b))
                    .filter_map(|b| match b {
                        PageBuf::Heap(b) if b.len() == page_size => Some(b),
                        _ => None,
                    })
                    .take(room),
            );
        }
        // Every field named, so that a new one cannot be left out: the
        // vectors keep their capacity, the rest is as `default` makes it.
        let DirtyPages {
            pages: _,
            editable_from,
            graveyard: _,
            blobs_added,
            sealed_at_put,
            pool: _,
            resident,
            spilled,
            spilled_count,
            spill,
            parked,
            parked_count,
            parked_arena,
            spill_cursor,
            slots,
            branch_slots,
            slots_lent,
            slots_refused,
            parent_hints,
        } = &mut *self;
        *editable_from = DIRTY_BIT;
        *blobs_added = 0;
        sealed_at_put.clear();
        *resident = 0;
        spilled.clear();
        *spilled_count = 0;
        *spill = None;
        parked.clear();
        *parked_count = 0;
        *parked_arena = None;
        *spill_cursor = 0;
        slots.clear();
        branch_slots.clear();
        *slots_lent = 0;
        *slots_refused = false;
        parent_hints.clear();
        debug_assert!(self.is_reset());
        self
    }

    /// Whether dirty page `id` is frozen by a savepoint.
    #[inline]
    pub(crate) fn is_frozen(&self, id: u64) -> bool {
        debug_assert!(id & DIRTY_BIT != 0);
        id < self.editable_from
    }

    /// Freezes the first `len` pages (a savepoint: every page that exists
    /// when it is taken, or after a rollback or release, those of the
    /// innermost savepoint left).
    pub(crate) fn freeze(&mut self, len: usize) {
        debug_assert!(len <= self.pages.len());
        self.editable_from = DIRTY_BIT | len as u64;
    }

    /// The copy of frozen page `id` that the write path edits instead of
    /// it: a new dirty page; `id` goes to the graveyard (it stays as the
    /// savepoint saw it, dead for the commit, whose trees now reference
    /// the copy).
    pub(crate) fn supersede(&mut self, id: u64) -> u64 {
        debug_assert!(self.is_frozen(id));
        let index = (id & !DIRTY_BIT) as usize;
        let old = self.take(index);
        let mut copy = self.buffer(old.len(), page_kind(&old));
        copy.copy_from_slice(&old);
        self.graveyard.push((index, old));
        self.add(copy)
    }

    /// Undoes every change of pages since a savepoint that saw `len`
    /// pages and a graveyard of `graveyard_len`: pages made since are
    /// dropped (their buffers to the pool), frozen pages freed or
    /// superseded since come back. The caller freezes again.
    pub(crate) fn roll_back(&mut self, len: usize, graveyard_len: usize) {
        let back: Vec<(usize, PageBuf)> = self.graveyard.drain(graveyard_len..).collect();
        for (index, page) in back {
            if index < len {
                debug_assert!(self.pages[index].is_none() && !is_spilled(&self.spilled, index));
                self.resident += page.len();
                self.pages[index] = Some(page);
            } else {
                self.recycle(page);
            }
        }
        let dropped: Vec<PageBuf> = self.pages.drain(len..).flatten().collect();
        for page in dropped {
            self.resident -= page.len();
            self.recycle(page);
        }
        for index in len..self.spilled.len() {
            if is_spilled(&self.spilled, index) {
                self.drop_spilled(index);
            }
        }
        self.spilled.truncate(len);
        // The indexes past `len` go to new pages.
        self.sealed_at_put.truncate(len);
        for index in len..self.parked.len() {
            if self.parked[index] != 0 {
                self.unpark(index);
            }
        }
        self.parked.truncate(len);
        self.spill_cursor = self.spill_cursor.min(len);
    }

    /// After a release: frees the graveyard pages no savepoint left can
    /// bring back (those at or past `len`, the pages the innermost one
    /// left saw; all of them when none is left, `len` 0).
    pub(crate) fn bury(&mut self, len: usize) {
        let mut kept = Vec::with_capacity(self.graveyard.len());
        for (index, page) in std::mem::take(&mut self.graveyard) {
            if index < len {
                kept.push((index, page));
            } else {
                self.recycle(page);
            }
        }
        self.graveyard = kept;
    }

    #[inline]
    pub(crate) fn get(&self, id: u64) -> &[u8] {
        debug_assert!(id & DIRTY_BIT != 0);
        let index = (id & !DIRTY_BIT) as usize;
        match self.pages[index].as_deref() {
            Some(page) => page,
            None => self.spilled_page(index),
        }
    }

    /// A spilled page's bytes, read through the spill file's map, or a
    /// parked one's, read in the arena.
    #[cold]
    fn spilled_page(&self, index: usize) -> &[u8] {
        if let Some(page) = self.parked_page(index) {
            return page;
        }
        assert!(
            is_spilled(&self.spilled, index),
            "dirty page used after it was freed"
        );
        let spill = self
            .spill
            .as_ref()
            .expect("a spilled page has a spill file");
        spill.read(self.spilled[index])
    }

    #[inline]
    pub(crate) fn get_mut(&mut self, id: u64) -> &mut [u8] {
        debug_assert!(id & DIRTY_BIT != 0);
        let index = (id & !DIRTY_BIT) as usize;
        if self.pages[index].is_none() {
            self.unspill(index);
        }
        self.pages[index]
            .as_deref_mut()
            .expect("dirty page used after it was freed")
    }

    /// Adds arena leaf `pgno` (which references no arena blob, so its
    /// seal changes only its header) without copying it: it is read in
    /// the arena until its seal copies it (see `parked`).
    pub(crate) fn park_arena_leaf(&mut self, arena: &Arc<Arena>, pgno: u64) -> u64 {
        assert!(pgno & ARENA_BIT != 0);
        match &self.parked_arena {
            Some(a) => assert!(Arc::ptr_eq(a, arena), "pages parked from two arenas"),
            None => self.parked_arena = Some(arena.clone()),
        }
        let index = self.pages.len();
        self.pages.push(None);
        if self.parked.len() <= index {
            self.parked.resize(index + 1, 0);
        }
        self.parked[index] = pgno;
        self.parked_count += 1;
        debug_assert_eq!(page_kind(self.get(DIRTY_BIT | index as u64)), KIND_LEAF);
        DIRTY_BIT | index as u64
    }

    /// Parked page `index`'s bytes, in the arena.
    fn parked_page(&self, index: usize) -> Option<&[u8]> {
        let pgno = *self.parked.get(index)?;
        if pgno == 0 {
            return None;
        }
        let arena = self
            .parked_arena
            .as_ref()
            .expect("parked pages have an arena");
        Some(arena.run(pgno, 1).expect("a parked page lies in its arena"))
    }

    /// Forgets that page `index` is parked.
    fn unpark(&mut self, index: usize) {
        debug_assert!(self.parked[index] != 0);
        self.parked[index] = 0;
        self.parked_count -= 1;
    }

    /// Copies spilled (or parked) page `index` back into memory (to be
    /// edited), and gives its slot in the spill file back.
    #[cold]
    fn unspill(&mut self, index: usize) {
        if let Some(len) = self.parked_page(index).map(<[u8]>::len) {
            let mut page = self.buffer(len, KIND_LEAF);
            page.copy_from_slice(self.parked_page(index).expect("just seen"));
            self.unpark(index);
            self.resident += page.len();
            self.pages[index] = Some(page);
            return;
        }
        assert!(
            is_spilled(&self.spilled, index),
            "dirty page used after it was freed"
        );
        let len = self.spilled_page(index).len();
        let mut page = match self.pool.last() {
            Some(b) if b.len() == len => self.pool.pop().expect("just seen"),
            _ => vec![0u8; len].into_boxed_slice(),
        };
        page.copy_from_slice(self.spilled_page(index));
        self.drop_spilled(index);
        self.resident += page.len();
        self.pages[index] = Some(PageBuf::Heap(page));
    }

    /// Forgets that page `index` is spilled and gives its slot back.
    fn drop_spilled(&mut self, index: usize) {
        let slot = std::mem::take(&mut self.spilled[index]);
        debug_assert!(slot.len > 0);
        self.spilled_count -= 1;
        self.spill
            .as_mut()
            .expect("a spilled page has a spill file")
            .release(slot);
    }

    /// Takes page `index` out (copied back first if spilled).
    fn take(&mut self, index: usize) -> PageBuf {
        if self.pages[index].is_none() {
            self.unspill(index);
        }
        let page = self.pages[index]
            .take()
            .expect("dirty page used after it was freed");
        self.resident -= page.len();
        page
    }

    pub(crate) fn free(&mut self, id: u64) {
        let index = (id & !DIRTY_BIT) as usize;
        if id < self.editable_from {
            // Frozen: a rollback may need it again.
            let page = self.take(index);
            self.graveyard.push((index, page));
            return;
        }
        if self.pages[index].is_none() {
            if self.parked_page(index).is_some() {
                self.unpark(index);
                return;
            }
            assert!(is_spilled(&self.spilled, index), "dirty page freed twice");
            self.drop_spilled(index);
            return;
        }
        let page = self.take(index);
        self.recycle(page);
    }

    /// The dirty branches and leaves in memory, counted (see
    /// [`TreePageKinds`]).
    pub(crate) fn tree_page_kinds(&self) -> TreePageKinds {
        let mut kinds = TreePageKinds {
            leaves: self.parked_count,
            ..TreePageKinds::default()
        };
        for page in self.pages.iter().flatten() {
            match crate::btree::page::page_kind(page) {
                k if crate::btree::page::is_branch_kind(k) => kinds.branches += 1,
                crate::btree::page::KIND_LEAF => kinds.leaves += 1,
                _ => {}
            }
        }
        kinds
    }

    /// Pages live in this transaction: in memory, spilled or parked.
    pub(crate) fn live_count(&self) -> usize {
        self.pages.iter().filter(|p| p.is_some()).count() + self.spilled_count + self.parked_count
    }

    /// Whether any page is spilled (or parked) now: sealed on a copy.
    pub(crate) fn has_spilled(&self) -> bool {
        self.spilled_count > 0 || self.parked_count > 0
    }

    /// Seals page `id` with `edit` and returns its result: in place for a
    /// page in memory; for a spilled one, on a copy (in `scratch`) that
    /// goes to `out`, which writes it where the commit puts it, so that
    /// sealing a transaction larger than memory neither brings it back
    /// into memory nor writes it twice. The spill file keeps the unsealed
    /// page: only `out`'s copy is sealed.
    #[inline]
    pub(crate) fn seal_with<R>(
        &mut self,
        id: u64,
        scratch: &mut Vec<u8>,
        edit: impl FnOnce(&mut [u8]) -> R,
        out: &mut dyn FnMut(&[u8]) -> Result<()>,
    ) -> Result<R> {
        let index = (id & !DIRTY_BIT) as usize;
        if let Some(page) = self.pages[index].as_deref_mut() {
            return Ok(edit(page));
        }
        scratch.clear();
        scratch.extend_from_slice(self.spilled_page(index));
        let result = edit(scratch);
        out(scratch)?;
        Ok(result)
    }

    /// Brings every spilled or parked page back into memory: for a
    /// transaction placed whole in the arena, which takes none (a read-only
    /// process's rebuild of logged commits, `txn::recovery`).
    pub(crate) fn unspill_all(&mut self) {
        for index in 0..self.pages.len() {
            if self.out_of_memory(index) {
                self.unspill(index);
            }
        }
        debug_assert!(!self.has_spilled());
    }

    /// Whether dirty page `id` is spilled (then `seal_with` wrote its
    /// sealed copy already, and the commit must not write it again).
    /// Whether dirty page `id` is a branch. Branches are never spilled or
    /// parked, so such a page is not read to tell (a commit larger than
    /// memory would map it all back).
    pub(crate) fn is_branch(&self, id: u64) -> bool {
        self.pages[(id & !DIRTY_BIT) as usize]
            .as_deref()
            .is_some_and(|p| crate::btree::page::is_branch_kind(crate::btree::page::page_kind(p)))
    }

    pub(crate) fn is_spilled(&self, id: u64) -> bool {
        self.out_of_memory((id & !DIRTY_BIT) as usize)
    }

    /// Whether page `index` lies in the spill file or is parked.
    fn out_of_memory(&self, index: usize) -> bool {
        self.pages[index].is_none()
            && (is_spilled(&self.spilled, index) || self.parked_page(index).is_some())
    }

    /// Lets go of the memory that reading spilled pages took (see
    /// `SpillFile::forget_reads`); a no-op when nothing is spilled.
    pub(crate) fn forget_spill_reads(&self) {
        if let Some(f) = &self.spill {
            f.forget_reads();
        }
    }

    /// Spills pages until at most `target` bytes of them stay in memory:
    /// leaves and blobs (never branches, which every descent reads), from
    /// the oldest on, in turn, but not `keep` (the leaf the next put will
    /// likely edit). `open` makes the spill file on the first spill. On an
    /// error every page is as it was (the caller's operation fails before
    /// changing anything).
    pub(crate) fn spill_to(
        &mut self,
        target: usize,
        keep: u64,
        page_size: usize,
        open: impl FnOnce() -> Result<SpillFile>,
    ) -> Result<()> {
        if self.resident <= target {
            return Ok(());
        }
        if self.spill.is_none() {
            self.spill = Some(Box::new(open()?));
        }
        let n = self.pages.len();
        self.spilled.resize(n, SpillSlot::default());
        let keep = (keep & DIRTY_BIT != 0).then_some((keep & !DIRTY_BIT) as usize);
        // Pages are written in batches of at most this many bytes, so that
        // the list of buffers stays small.
        const BATCH_BYTES: usize = 8 << 20;
        let mut batch: Vec<usize> = Vec::new();
        let mut slots = Vec::new();
        let mut looked = 0;
        while self.resident > target && looked < n {
            batch.clear();
            let mut batch_bytes = 0;
            let mut to_free = self.resident - target;
            while looked < n && to_free > 0 && batch_bytes < BATCH_BYTES {
                let i = self.spill_cursor.min(n - 1);
                self.spill_cursor = if i + 1 >= n { 0 } else { i + 1 };
                looked += 1;
                if Some(i) == keep {
                    continue;
                }
                let Some(page) = self.pages[i].as_deref() else {
                    continue;
                };
                if is_branch_kind(page_kind(page)) {
                    continue;
                }
                batch.push(i);
                batch_bytes += page.len();
                to_free = to_free.saturating_sub(page.len());
            }
            if batch.is_empty() {
                break;
            }
            let bufs: Vec<&[u8]> = batch
                .iter()
                .map(|&i| self.pages[i].as_deref().expect("chosen in memory"))
                .collect();
            let spill = self.spill.as_mut().expect("made above");
            spill.write(&bufs, &mut slots)?;
            for (&i, &slot) in batch.iter().zip(&slots) {
                let page = self.pages[i].take().expect("chosen in memory");
                self.resident -= page.len();
                self.spilled[i] = slot;
                self.spilled_count += 1;
                if page.len() == page_size {
                    self.recycle(page);
                }
            }
        }
        self.forget_spill_reads();
        Ok(())
    }
}

/// Whether page `index` is spilled, by the table `spilled`.
#[inline]
fn is_spilled(spilled: &[SpillSlot], index: usize) -> bool {
    spilled.get(index).is_some_and(|s| s.len > 0)
}

/// A write transaction's view: its dirty pages over its base snapshot.
#[derive(Clone, Copy)]
pub(crate) struct WriteSource<'a> {
    pub(crate) base: &'a MapSource,
    pub(crate) dirty: &'a DirtyPages,
}

impl<'a> WriteSource<'a> {
    #[inline]
    pub(crate) fn resolve_page(self, pgno: u64) -> Result<&'a [u8]> {
        if pgno & DIRTY_BIT != 0 {
            Ok(self.dirty.get(pgno))
        } else {
            self.base.page(pgno)
        }
    }

    /// The overlay of committed leaf `leaf`, if it has one.
    fn overlay_page(self, leaf: u64) -> Option<OverlayPage<'a>> {
        if leaf & DIRTY_BIT != 0 {
            return None;
        }
        self.base.overlay_page(leaf)
    }

    /// What the overlay of committed leaf `leaf` says of entry `index`:
    /// every entry counts, this transaction's own too.
    pub(crate) fn resolve_overlay(self, leaf: u64, index: usize) -> Result<Option<Overlaid<'a>>> {
        match self.overlay_page(leaf) {
            Some(page) => page.value(index, u64::MAX),
            None => Ok(None),
        }
    }

    /// `PageSource::deleted_between` as this transaction sees it.
    pub(crate) fn resolve_deleted_between(
        self,
        leaf: u64,
        from: usize,
        to: usize,
    ) -> Result<usize> {
        match self.overlay_page(leaf) {
            Some(page) => page.deleted_between(u64::MAX, from, to),
            None => Ok(0),
        }
    }

    /// `PageSource::inserted` as this transaction sees it.
    pub(crate) fn resolve_inserted(self, leaf: u64, out: &mut Inserts<'a>) -> Result<usize> {
        match self.overlay_page(leaf) {
            Some(page) => page.inserts(u64::MAX, out),
            None => Ok(0),
        }
    }

    /// `PageSource::inserted_entry` as this transaction sees it.
    pub(crate) fn resolve_inserted_entry(
        self,
        leaf: u64,
        entry: u8,
    ) -> Result<(&'a [u8], &'a [u8])> {
        match self.overlay_page(leaf) {
            Some(page) => page.insert_at(entry),
            None => Err(Error::corrupted_page(leaf, "its overlay is gone")),
        }
    }

    /// `PageSource::has_inserts` as this transaction sees it.
    pub(crate) fn resolve_has_inserts(self, leaf: u64) -> bool {
        self.overlay_page(leaf).is_some_and(|p| p.has_inserts())
    }

    /// `PageSource::inserted_value` as this transaction sees it.
    pub(crate) fn resolve_inserted_value(self, leaf: u64, key: &[u8]) -> Result<Option<&'a [u8]>> {
        match self.overlay_page(leaf) {
            Some(page) => page.inserted_value(key, u64::MAX),
            None => Ok(None),
        }
    }

    pub(crate) fn resolve_blob_run(self, pgno: u64) -> Result<&'a [u8]> {
        if pgno & DIRTY_BIT != 0 {
            Ok(self.dirty.get(pgno))
        } else {
            self.base.blob_run(pgno)
        }
    }
}

impl PageSource for WriteSource<'_> {
    #[inline]
    fn page(&self, pgno: u64) -> Result<&[u8]> {
        self.resolve_page(pgno)
    }

    fn blob_run(&self, pgno: u64) -> Result<&[u8]> {
        self.resolve_blob_run(pgno)
    }

    fn overlay(&self, leaf: u64, index: usize) -> Result<Option<Overlaid<'_>>> {
        self.resolve_overlay(leaf, index)
    }

    fn deleted_between(&self, leaf: u64, from: usize, to: usize) -> Result<usize> {
        self.resolve_deleted_between(leaf, from, to)
    }

    fn inserted<'s>(&'s self, leaf: u64, out: &mut Inserts<'s>) -> Result<usize> {
        self.resolve_inserted(leaf, out)
    }

    fn inserted_value(&self, leaf: u64, key: &[u8]) -> Result<Option<&[u8]>> {
        self.resolve_inserted_value(leaf, key)
    }

    fn inserted_entry(&self, leaf: u64, entry: u8) -> Result<(&[u8], &[u8])> {
        self.resolve_inserted_entry(leaf, entry)
    }

    fn has_inserts(&self, leaf: u64) -> bool {
        self.resolve_has_inserts(leaf)
    }

    fn file_leaf_overlays(&self) -> bool {
        self.base.file_overlays.is_some()
    }
}

/// The txn id a parent expects of a child it points to: none for dirty
/// pages, which are stamped only at commit.
#[inline]
pub(crate) fn expected_txn(pgno: u64, txn: u64) -> Option<u64> {
    if pgno & DIRTY_BIT != 0 {
        None
    } else {
        Some(txn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btree::page::{cells_of, fill_page, leaf_cell_inline, seal};
    use crate::storage::arena::ArenaSpace;

    /// Emptied dirty pages are as new but keep their page buffers (up to
    /// the pool's bound) and vectors, in the same box, for the next
    /// transaction.
    #[test]
    fn emptied_dirty_pages_keep_their_buffers_and_nothing_else() {
        let page = vec![7u8; 4096];
        let mut dirty = DirtyPages::boxed(None);
        let a = dirty.add_copy(&page);
        let _b = dirty.add_copy(&page);
        let _c = dirty.add_copy(&page[..1024]);
        dirty.freeze(2);
        dirty.free(a);
        assert!(!dirty.is_reset());
        let before: *const DirtyPages = &*dirty;
        let pages_capacity = dirty.pages.capacity();
        let dirty = dirty.emptied(4096);
        assert!(std::ptr::eq(before, &*dirty), "the same box");
        assert!(dirty.is_reset());
        assert_eq!(dirty.editable_from, DIRTY_BIT, "no page frozen");
        assert_eq!(dirty.live_count(), 0);
        assert_eq!(
            dirty.pool.len(),
            2,
            "the two page-sized buffers, frozen or not"
        );
        assert!(dirty.pool.iter().all(|b| b.len() == 4096));
        assert_eq!(dirty.pages.capacity(), pages_capacity, "the vector kept");
        // The next transaction's pages come from the pool.
        let mut next = DirtyPages::boxed(Some(dirty));
        let id = next.add_copy(&page);
        assert_eq!(next.get(id), &page[..]);
        assert_eq!(next.pool.len(), 1);
    }

    /// A parked arena leaf reads as the leaf, counts as live, is sealed on
    /// a copy handed to the writer (the arena's page unchanged), and comes
    /// back into memory when edited; freeing it forgets it.
    #[test]
    fn a_parked_leaf_is_read_in_the_arena_and_sealed_on_a_copy() {
        let arena = Arc::new(Arena::new(4096, 16 * 4096).unwrap());
        let mut space = ArenaSpace::default();
        let cells: Vec<Vec<u8>> = (0..20u8)
            .map(|i| leaf_cell_inline(&[b'k', i], &[i; 30]))
            .collect();
        let mut leaf = vec![0u8; 4096];
        fill_page(&mut leaf, true, &cells);
        let mut parked_pgnos = Vec::new();
        for _ in 0..2 {
            let fresh = space.alloc(&arena, 1, u64::MAX, 3, false).unwrap();
            arena.write(&fresh, &leaf);
            parked_pgnos.push(fresh.pgno());
        }
        let mut dirty = DirtyPages::default();
        let other = dirty.add_copy(&leaf);
        let a = dirty.park_arena_leaf(&arena, parked_pgnos[0]);
        let b = dirty.park_arena_leaf(&arena, parked_pgnos[1]);
        assert_eq!(dirty.live_count(), 3);
        assert!(dirty.has_spilled() && dirty.is_spilled(a) && !dirty.is_spilled(other));
        assert_eq!(dirty.get(a), &leaf[..], "read where it lies");
        assert_eq!(dirty.resident, 4096, "no copy of a parked page in memory");

        let mut written = Vec::new();
        let mut scratch = Vec::new();
        let sum = dirty
            .seal_with(a, &mut scratch, |p| seal(p, 77, 9), &mut |sealed| {
                written.push(sealed.to_vec());
                Ok(())
            })
            .unwrap();
        assert_eq!(written.len(), 1, "a parked page is written as it is sealed");
        assert_eq!(crate::btree::page::stored_sum(&written[0]), sum);
        assert_eq!(cells_of(&written[0]), cells);
        assert_eq!(
            arena.run(parked_pgnos[0], 1).unwrap(),
            &leaf[..],
            "the arena's page is not sealed"
        );

        dirty.get_mut(b)[100] ^= 1;
        assert!(!dirty.is_spilled(b), "edited: back in memory");
        assert_eq!(arena.run(parked_pgnos[1], 1).unwrap(), &leaf[..]);
        assert_eq!(dirty.resident, 2 * 4096);
        dirty.free(a);
        assert_eq!(dirty.live_count(), 2);
        assert!(!dirty.has_spilled());
    }
}
