//! The page arena: the page versions of logged commits, kept in memory
//! until a checkpoint writes them to the data file (see `txn::commit`).
//!
//! A logged commit does not write its pages to the file: they go to slots
//! of this arena, sealed exactly as file pages are (stamped with their
//! number, `ARENA_BIT | slot`, and their txn, and checksummed), and parents
//! reference them by that number. A reader resolves such a number by
//! arithmetic (`base + slot * page_size`): no table, no lock, no system
//! call. Published versions are never changed; a superseded one is
//! *retired* with the txn that stopped using it and becomes reusable once
//! no live reader's snapshot lies between the txn that wrote it and that
//! one (the rule file pages follow, without the durable commit as a
//! protector: the arena is never durable, the redo log is).
//!
//! The arena is one private anonymous mapping reserved once (address space
//! only; memory is used by the slots touched). It belongs to one process:
//! logged commits are made only while one process has the database open
//! (see docs/design.md, "Logged commits"). Its first 64 MiB hold branch
//! pages (the upper region: [`ArenaSpace`]) and are advised into huge
//! pages, so that the pages every descent reads take few TLB entries; the
//! rest, whose memory the write path touches for the first time, stays in
//! 4 KiB pages.
//!
//! A write transaction that may be logged also borrows single slots
//! *before* its commit ([`ArenaSpace::lend`]): a [`SlotBuf`] is a dirty
//! page buffer that lives in an unpublished slot, so that the page is
//! copied once (committed page -> slot) instead of twice (committed page
//! -> heap buffer -> slot at commit). A logged commit seals such a page in
//! place and publishes the slot ([`ArenaSpace::adopt`]); any other end of
//! the transaction (a checkpoint, an abort, a failed commit) leaves its
//! slots lent, and the next write transaction takes them back
//! ([`ArenaSpace::reclaim_lent`]) before lending any: by then every
//! `SlotBuf` of the earlier one is gone (they live only in its
//! `DirtyPages`).
//!
//! Soundness (the same argument as `storage::map`): readers borrow `&[u8]`
//! of published slots; the writer only writes slots handed out by
//! [`ArenaSpace::alloc`] or [`ArenaSpace::lend`], which never hand out a
//! slot a live snapshot can reach (nor one lent and not yet adopted or
//! reclaimed), and a [`Fresh`] run or a [`SlotBuf`] (each the only handle
//! to its slots, neither `Clone`) is the only way to write. A lent slot
//! is published only by `adopt`, which consumes its `SlotBuf`. Every read
//! is bounds-checked against the reservation.

use std::io;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::storage::overlay::OverlayPage;
use crate::sync::OwnLines;

/// Marks a page number as an arena slot (the dirty bit is `1 << 63`).
pub(crate) const ARENA_BIT: u64 = 1 << 62;

/// Address space reserved for the arena: 16 GiB, of which only the slots in
/// use cost memory.
pub(crate) const RESERVATION_BYTES: usize = 16 << 30;

/// Slots made present ahead of the never-used mark (128 KiB of 4 KiB
/// pages): a commit that takes a never-used slot finds it present. Four
/// steps, not more: the first commits after an open make the whole lead
/// present, and a short run never uses most of it. With 256 slots (until
/// session 45) that was half of the first two commits' samples in seed
/// 003's workload (100 commits of 100 random puts into 1M records); with
/// 32 its first two commits took about 340 us instead of 550, the others
/// 4% less, and the run 1.07x the rate (benchmarks.md, session 45).
const POPULATE_LEAD: u64 = 32;

/// Slots made present at most by one commit that takes never-used slots
/// while the lead is short: more than a single-put commit takes, so the
/// lead holds, and few enough that no commit pays for many. Making 512
/// slots present at once cost the commit that did it about 2 ms at 10M
/// records on the test VM (one commit in 512: the p99.9), where zeroing a
/// fresh page costs microseconds. In the upper region (huge pages) a
/// step that reaches a fresh 2 MiB page makes its 512 slots present all
/// the same, and that commit pays (random fills' p99 per commit rose
/// from 2.3 to 6.4 ms with the whole arena in huge pages: benchmarks.md,
/// session 30); the lead still spares the commits between.
const POPULATE_STEP: u64 = 8;

/// Bytes at the start of the arena kept for branch pages (the *upper
/// region*): 64 MiB, the branches of a tree of some 15M leaves of 4 KiB.
const UPPER_REGION_BYTES: usize = 64 << 20;

/// Bytes at the start of the upper region in 4 KiB pages, not huge ones:
/// the branches of a tree of up to some 1M records (about 500 branch
/// pages). A session's first commit that copies a branch made its first
/// slots present, and faulting in the region's first 2 MiB page zeroed
/// all of it: about 100 us, more than the rest of the first commit after
/// an open
/// (`examples/session_latency.rs`, benchmarks.md, session 39), for a
/// tree that may never hold more than a few branches in the arena.
const UPPER_SMALL_PAGES_BYTES: usize = 2 << 20;

/// Overlay units per slot: a value overlay lives in an *overlay unit*,
/// an eighth, a quarter or the whole of an arena slot ([`UnitSize`]),
/// numbered in eighths (`slot * 8 + eighth`) and tagged with its size
/// ([`QUARTER_UNIT`], [`WHOLE_SLOT_UNIT`]; an eighth has no tag). Most
/// overlays hold a few entries until their leaf's next copy or the
/// checkpoint (after a random delete or overwrite in each of 35,000
/// leaves at 1M records, six on average; at 10M records, 200k of them
/// leave one in each of 200k leaves), so a slot each made the memory the
/// kernel must zero the largest cost of single-put deletes: a fifth of
/// their time was spent faulting fresh overlay pages in (benchmarks.md,
/// session 29); half a slot each, then a quarter, still most of the time
/// of single-put overwrites at 10M records (sessions 31 and 32). A file
/// leaf's overlay (a leaf's first change since the checkpoint) starts in
/// an eighth (512 bytes of a 4 KiB page: 3 values of 100 bytes, or 27
/// tombstones) and, as it fills, moves to a quarter (8 values, or the 31
/// tombstones an overlay holds at most) and then to a whole slot
/// (`Arena::move_file_overlay`): without the moves, 200k single-put
/// overwrites into 200k records (25 per leaf) copied leaves far more
/// often and ran 0.89-0.96x, and eighths moved straight to whole slots
/// made 1M records' overwrites 0.87-0.99x. An arena leaf, which was
/// copied in this span already (by an insert, or because its overlay
/// filled), gets a whole slot at once.
pub(crate) const OVERLAY_UNITS_PER_SLOT: u64 = 8;

/// Tags an overlay unit number that names a quarter slot's overlay
/// (two eighths, the first of them even).
pub(crate) const QUARTER_UNIT: u64 = 1 << 30;

/// Tags an overlay unit number that names a whole slot's overlay (its
/// first eighth's number, `slot * 8`, with this bit): a table word holds
/// the unit number + 1 in 32 bits.
pub(crate) const WHOLE_SLOT_UNIT: u64 = 1 << 31;

/// The size tags of an overlay unit number.
const UNIT_TAGS: u64 = QUARTER_UNIT | WHOLE_SLOT_UNIT;

/// The size of an overlay unit (see [`OVERLAY_UNITS_PER_SLOT`]). The
/// units of one slot are all of one size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum UnitSize {
    Eighth,
    Quarter,
    Whole,
}

impl UnitSize {
    /// The size unit number `unit` names, `None` if it carries both tags.
    pub(crate) fn of(unit: u64) -> Option<UnitSize> {
        match (unit & QUARTER_UNIT != 0, unit & WHOLE_SLOT_UNIT != 0) {
            (false, false) => Some(UnitSize::Eighth),
            (true, false) => Some(UnitSize::Quarter),
            (false, true) => Some(UnitSize::Whole),
            (true, true) => None,
        }
    }

    /// Eighths of a slot in a unit of this size.
    fn eighths(self) -> u64 {
        match self {
            UnitSize::Eighth => 1,
            UnitSize::Quarter => 2,
            UnitSize::Whole => OVERLAY_UNITS_PER_SLOT,
        }
    }

    /// The tag of a unit number of this size.
    fn tag(self) -> u64 {
        match self {
            UnitSize::Eighth => 0,
            UnitSize::Quarter => QUARTER_UNIT,
            UnitSize::Whole => WHOLE_SLOT_UNIT,
        }
    }

    /// The size a full overlay of this size moves to, if any.
    pub(crate) fn larger(self) -> Option<UnitSize> {
        match self {
            UnitSize::Eighth => Some(UnitSize::Quarter),
            UnitSize::Quarter => Some(UnitSize::Whole),
            UnitSize::Whole => None,
        }
    }

    /// The first unit of a file leaf's overlay whose first change is a
    /// value of `value_len` bytes (0 for a tombstone), in slots of
    /// `page_size`: an eighth where it holds two such entries (at 4 KiB
    /// pages, values up to 200 bytes; at 1 KiB, up to 8), so that a leaf
    /// changed once or twice before the checkpoint takes 512 bytes of
    /// fresh memory; a quarter otherwise (a value that fills an eighth
    /// alone would move at once).
    pub(crate) fn first_for_file_leaf(page_size: usize, value_len: usize) -> UnitSize {
        let eighth = page_size / OVERLAY_UNITS_PER_SLOT as usize;
        if crate::storage::overlay::entries_fit(eighth, 2, value_len) {
            UnitSize::Eighth
        } else {
            UnitSize::Quarter
        }
    }
}

/// The arena's mapping.
#[derive(Debug)]
// Aligned so that, behind an `Arc`, these fields, which every lookup of an
// arena page reads, share no cache line with the `Arc`'s counts, which
// every snapshot the writer publishes or drops changes: sharing one, a
// reader and the writer beside it passed that line back and forth at
// every commit (in the writer's profile, the load of `slots` in
// `MapSource::range` took 141 ns of its 2,980 per single-put commit).
#[repr(align(128))]
pub(crate) struct Arena {
    ptr: *mut u8,
    len: usize,
    page_size: usize,
    slots: u64,
    /// Slots `0..upper_slots` hold branch pages (see [`ArenaSpace`]); 0
    /// in an arena too small to set them apart.
    upper_slots: u64,
    /// Which leaf slots have a value overlay (`storage::overlay`).
    overlays: OverlayTable,
}

// Behind an `Arc` its counts take the first line of the allocation and the
// fields start 128 bytes on (two lines: the adjacent-line prefetcher).
const _: () = assert!(std::mem::align_of::<Arena>() >= 128);
const _: () = assert!(std::mem::align_of::<FileOverlays>() >= 128);

// SAFETY: the mapping lives until `Drop`; readers only read published
// slots, and the one writer only writes `Fresh` runs no reader can reach
// (module doc), so sharing it between threads is sound.
unsafe impl Send for Arena {}
// SAFETY: as above.
unsafe impl Sync for Arena {}

impl Arena {
    /// Reserves an arena of `RESERVATION_BYTES` (or `reserve` bytes) for
    /// pages of `page_size`.
    pub(crate) fn new(page_size: usize, reserve: usize) -> Result<Arena> {
        assert!(page_size.is_power_of_two());
        let len = reserve.max(page_size) / page_size * page_size;
        let overlays = OverlayTable::new((len / page_size) as u64)?;
        let ptr = reserve_anonymous(len, Pages::Private)?;
        let upper_bytes = if len >= 8 * UPPER_REGION_BYTES {
            UPPER_REGION_BYTES
        } else {
            0
        };
        // The upper region (branch pages) in 2 MiB pages past its first
        // 2 MiB (`UPPER_SMALL_PAGES_BYTES`), the rest in 4 KiB pages. Every descent reads a root and branches, and every
        // commit puts new copies of some of them in the upper region's
        // slots, which go round: its few huge pages are touched once and
        // save a TLB miss per level. The lower region takes a fresh slot
        // for each leaf a commit copies and each overlay unit, so most of
        // its memory is touched for the first time in the write path; on a
        // VM that returns free memory to its host (free page reporting),
        // a fresh 2 MiB page cost 1.5-2.3 ms per MiB there against 0.35 for
        // 4 KiB pages, and with the whole arena in huge pages single-put
        // overwrites at 1M records ran 0.70-0.78x, random fills 0.83-0.93x
        // in most pairs, and the reader beside a writer 1.06x (median of
        // five pairs; docs/design.md, "Logged commits"; benchmarks.md,
        // session 33).
        #[cfg(target_os = "linux")]
        // SAFETY: advice on our own fresh mapping (`upper_bytes <= len`);
        // it changes only the size of the pages backing it (zeroed either
        // way), never a byte read or written. A failure (no THP) leaves
        // 4 KiB pages. The lower region is advised too, so that a system
        // whose default is huge pages everywhere runs what was measured.
        unsafe {
            let small = UPPER_SMALL_PAGES_BYTES.min(upper_bytes);
            libc::madvise(ptr.cast(), small, libc::MADV_NOHUGEPAGE);
            libc::madvise(
                ptr.add(small).cast(),
                upper_bytes - small,
                libc::MADV_HUGEPAGE,
            );
            libc::madvise(
                ptr.add(upper_bytes).cast(),
                len - upper_bytes,
                libc::MADV_NOHUGEPAGE,
            );
        }
        Ok(Arena {
            ptr,
            len,
            page_size,
            slots: (len / page_size) as u64,
            upper_slots: (upper_bytes / page_size) as u64,
            overlays,
        })
    }

    /// The value overlay of leaf `pgno` (an arena page number), if it has
    /// one (`storage::overlay`).
    #[inline]
    pub(crate) fn overlay(&self, pgno: u64) -> Option<OverlayPage<'_>> {
        self.overlay_in(self.overlay_unit(pgno)?)
    }

    /// Starts loading the table word `overlay_unit` of leaf `pgno` reads.
    #[inline]
    pub(crate) fn prefetch_overlay_word(&self, pgno: u64) {
        if pgno & ARENA_BIT != 0 {
            self.overlays.prefetch_word(pgno & !ARENA_BIT);
        }
    }

    /// The overlay unit (see [`OVERLAY_UNITS_PER_SLOT`]) of leaf `pgno`'s
    /// value overlay, if it has one (in the reservation: the table's words
    /// are the writer's, checked anyway).
    #[inline]
    pub(crate) fn overlay_unit(&self, pgno: u64) -> Option<u64> {
        let slot = pgno & !ARENA_BIT;
        if pgno & ARENA_BIT == 0 || slot >= self.slots {
            return None;
        }
        self.overlays
            .get(slot)
            .filter(|&u| u & !UNIT_TAGS < self.slots * OVERLAY_UNITS_PER_SLOT)
    }

    /// The bytes of an eighth of a slot (the smallest overlay unit).
    fn eighth_bytes(&self) -> usize {
        self.page_size / OVERLAY_UNITS_PER_SLOT as usize
    }

    /// The value overlay in unit `unit` (a unit a table names: `Arena`'s
    /// own, or a [`FileOverlays`]), if the unit lies in the reservation.
    #[inline]
    pub(crate) fn overlay_in(&self, unit: u64) -> Option<OverlayPage<'_>> {
        let size = UnitSize::of(unit)?;
        let first = unit & !UNIT_TAGS;
        if !first.is_multiple_of(size.eighths()) || first >= self.slots * OVERLAY_UNITS_PER_SLOT {
            // A unit starts at a multiple of its size (a whole slot's at
            // its slot), so it ends within its slot.
            return None;
        }
        Some(OverlayPage {
            // SAFETY: in the mapping (checked: the unit starts in the
            // reservation at a multiple of its size, so it ends within
            // its slot); what may be read or written of an overlay page
            // is `storage::overlay`'s protocol.
            ptr: unsafe { self.ptr.add(first as usize * self.eighth_bytes()) },
            page_size: size.eighths() as usize * self.eighth_bytes(),
            arena: std::marker::PhantomData,
        })
    }

    /// Makes `unit` (just handed out by `ArenaSpace::alloc_overlay`) the
    /// empty overlay of file leaf `pgno` of tree `tree` (its catalog id),
    /// which has none, in `files`.
    pub(crate) fn attach_file_overlay(
        &self,
        files: &FileOverlays,
        pgno: u64,
        tree: u64,
        unit: u64,
    ) -> OverlayPage<'_> {
        assert!(pgno & ARENA_BIT == 0 && pgno < files.table.slots);
        assert!(files.table.get(pgno).is_none(), "a leaf has one overlay");
        let page = self.overlay_in(unit).expect("a fresh unit is in the arena");
        page.init();
        files
            .leaves
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(FileLeaf { pgno, tree });
        files.table.set(pgno, unit);
        page
    }

    /// Moves the overlay of file leaf `pgno` in `files`, the unit `from`,
    /// which is full, to `to` (a larger unit just handed out by
    /// `ArenaSpace::alloc_larger_overlay`): its entries are copied, then the
    /// table names `to`. A reader that read the table before finds every
    /// entry it may read in `from`, which retires with the transaction
    /// (`ArenaSpace::retire_overlay`); one that reads it after finds the
    /// same entries in `to`. Returns `to`'s page and its mark before the
    /// entries of txn `txn` (the transaction under way), or `None` (the
    /// table unchanged) if the entries are damaged.
    pub(crate) fn move_file_overlay(
        &self,
        files: &FileOverlays,
        pgno: u64,
        from: u64,
        to: u64,
        txn: u64,
    ) -> Option<(OverlayPage<'_>, crate::storage::overlay::Mark)> {
        assert!(pgno < files.table.slots && files.table.get(pgno) == Some(from));
        let moved = self.copy_overlay(from, to, txn)?;
        files.table.set(pgno, to);
        Some(moved)
    }

    /// The entries of overlay unit `from` copied in order into the larger,
    /// fresh unit `to`, and `to`'s mark before txn `txn`'s; `None` if they
    /// are damaged or `to` cannot take them. No table names `to` yet.
    fn copy_overlay(
        &self,
        from: u64,
        to: u64,
        txn: u64,
    ) -> Option<(OverlayPage<'_>, crate::storage::overlay::Mark)> {
        assert!(
            UnitSize::of(from) < UnitSize::of(to),
            "a move to a larger unit"
        );
        let (old, new) = (self.overlay_in(from)?, self.overlay_in(to)?);
        new.init();
        let mark = old.copy_entries_to(&new, txn)?;
        Some((new, mark))
    }

    /// Makes `unit` (just handed out by `ArenaSpace::alloc_overlay`) the
    /// empty overlay of leaf `pgno`, which has none: no reader reaches
    /// the unit until the table names it.
    pub(crate) fn attach_overlay(&self, pgno: u64, unit: u64) -> OverlayPage<'_> {
        let slot = pgno & !ARENA_BIT;
        assert!(pgno & ARENA_BIT != 0 && slot < self.slots);
        assert!(self.overlays.get(slot).is_none(), "a leaf has one overlay");
        let page = self.overlay_in(unit).expect("a fresh unit is in the arena");
        page.init();
        self.overlays.set(slot, unit);
        page
    }

    /// Moves the overlay of arena leaf `pgno` from unit `from` to the
    /// larger, fresh unit `to`, as `move_file_overlay` does for a file
    /// leaf's: the entries copied in order, then the overlay table names
    /// `to`. `None` if `to` cannot take them.
    pub(crate) fn move_arena_overlay(
        &self,
        pgno: u64,
        from: u64,
        to: u64,
        txn: u64,
    ) -> Option<(OverlayPage<'_>, crate::storage::overlay::Mark)> {
        let slot = pgno & !ARENA_BIT;
        assert!(pgno & ARENA_BIT != 0 && self.overlays.get(slot) == Some(from));
        let moved = self.copy_overlay(from, to, txn)?;
        self.overlays.set(slot, to);
        Some(moved)
    }

    /// Forgets any overlay of `slot`, which is being handed out again.
    fn forget_overlay(&self, slot: u64) {
        self.overlays.clear(slot);
    }

    /// The slots of the upper region (branch pages): `0..` this.
    pub(crate) fn upper_slots(&self) -> u64 {
        self.upper_slots
    }

    /// The number of slots reserved.
    pub(crate) fn slots(&self) -> u64 {
        self.slots
    }

    /// Makes the memory of `pages` slots from `slot` present at once (one
    /// system call), so that writing them takes no page fault each. A
    /// hint: where the kernel cannot (before Linux 5.14, or out of
    /// memory), each slot faults in when first written, as without it.
    fn populate(&self, slot: u64, pages: u64) {
        assert!(slot + pages <= self.slots);
        #[cfg(target_os = "linux")]
        // SAFETY: the range lies within the mapping (asserted) and holds no
        // slot in use yet (the caller populates only slots beyond its
        // `next`); MADV_POPULATE_WRITE faults the pages in as a write would,
        // which on this private anonymous mapping leaves them zero, as they
        // are.
        unsafe {
            libc::madvise(
                self.ptr.add((slot * self.page_size as u64) as usize).cast(),
                (pages * self.page_size as u64) as usize,
                libc::MADV_POPULATE_WRITE,
            )
        };
    }

    /// The bytes of `pages` slots from the one numbered `pgno` (which
    /// carries `ARENA_BIT`), or `None` if out of the reservation.
    #[inline]
    pub(crate) fn run(&self, pgno: u64, pages: u64) -> Option<&[u8]> {
        let slot = pgno & !ARENA_BIT;
        if pgno & ARENA_BIT == 0 || pages == 0 || slot.checked_add(pages)? > self.slots {
            return None;
        }
        let ps = self.page_size as u64;
        // SAFETY: the range lies within the mapping, which lives as long as
        // `self`; published slots are not written while borrowed (module
        // doc).
        Some(unsafe {
            std::slice::from_raw_parts(self.ptr.add((slot * ps) as usize), (pages * ps) as usize)
        })
    }

    /// Copies `bytes` (whole pages) into the run `fresh` was handed out for.
    pub(crate) fn write(&self, fresh: &Fresh, bytes: &[u8]) {
        assert_eq!(
            bytes.len() as u64,
            fresh.pages * self.page_size as u64,
            "arena write of another length than its run"
        );
        assert!(fresh.slot + fresh.pages <= self.slots);
        // SAFETY: in bounds (asserted); `Fresh` runs are reachable by no
        // snapshot and handed to one writer (`ArenaSpace::alloc`), so no
        // reference to these bytes exists while they are written.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.ptr.add((fresh.slot * self.page_size as u64) as usize),
                bytes.len(),
            );
        }
    }
}

/// How a reservation's pages come to be (`reserve_anonymous`).
#[derive(Clone, Copy)]
enum Pages {
    /// Private: the slots, which are made present (written) before any
    /// reader can reach them.
    Private,
    /// Shared (`MAP_SHARED`, memory of this process alone all the same):
    /// the overlay tables, whose words readers read before the writer
    /// first sets them. A read of a private page maps the kernel's shared
    /// zero page, and the first write then replaces it, which on x86
    /// interrupts every CPU running a thread of this process to flush its
    /// TLB (a reader beside the writer took about 30 such interrupts a
    /// second). A read of a shared anonymous page makes it present, zeroed
    /// and writable, as a write would: the later write takes no fault.
    Shared,
}

/// Reserves `len` bytes of anonymous memory, readable and writable and
/// zero, of which only the pages touched take memory (`MAP_NORESERVE`).
/// The caller unmaps it.
fn reserve_anonymous(len: usize, pages: Pages) -> Result<*mut u8> {
    let sharing = match pages {
        Pages::Private => libc::MAP_PRIVATE,
        Pages::Shared => libc::MAP_SHARED,
    };
    // SAFETY: a fresh anonymous mapping; the kernel picks the address and
    // the result is checked for MAP_FAILED.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            sharing | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        return Err(Error::Io(io::Error::last_os_error()));
    }
    Ok(ptr.cast())
}

/// One word per arena slot: `overlay slot + 1` for a leaf slot with an
/// overlay, else 0. A reserved anonymous mapping: only the words of slots
/// in use cost memory.
#[derive(Debug)]
struct OverlayTable {
    ptr: *mut AtomicU32,
    slots: u64,
    /// Words set now. While it is 0 no look-up reads the table: an arena
    /// with no overlay (random inserts, deletes) pays one load of this
    /// line, not a miss in the table per page. A reader that can see an
    /// overlay entry sees it non-zero: it was raised before the entry's
    /// commit was published, and is lowered for that overlay only when
    /// its leaf's slot is handed out again, after no reader sees the leaf.
    /// On lines of its own: the writer changes it at each overlay given or
    /// taken, and every lookup of an overlay reads `ptr` and `slots`.
    attached: OwnLines<AtomicU64>,
}

// SAFETY: the table is only accessed through atomics.
unsafe impl Send for OverlayTable {}
// SAFETY: as above.
unsafe impl Sync for OverlayTable {}

impl OverlayTable {
    /// A table for `slots` arena slots, all without an overlay.
    fn new(slots: u64) -> Result<OverlayTable> {
        // Its zero bytes are valid `AtomicU32`s (0: no overlay).
        let ptr = reserve_anonymous((slots.max(1) * 4) as usize, Pages::Shared)?;
        Ok(OverlayTable {
            ptr: ptr.cast(),
            slots,
            attached: OwnLines(AtomicU64::new(0)),
        })
    }

    /// Starts loading the word of `slot` (none for a slot out of range,
    /// or while no word is set).
    #[inline]
    fn prefetch_word(&self, slot: u64) {
        if slot < self.slots && self.attached.load(Ordering::Relaxed) != 0 {
            crate::storage::map::prefetch_line(self.ptr.wrapping_add(slot as usize).cast());
        }
    }

    fn word(&self, slot: u64) -> &AtomicU32 {
        assert!(slot < self.slots, "overlay table index out of range");
        // SAFETY: in bounds (asserted); the mapping lives as long as `self`
        // and is only accessed atomically.
        unsafe { &*self.ptr.add(slot as usize) }
    }

    /// The overlay unit of leaf slot `slot`, if it has one.
    #[inline]
    fn get(&self, slot: u64) -> Option<u64> {
        if self.attached.load(Ordering::Relaxed) == 0 {
            return None;
        }
        match self.word(slot).load(Ordering::Acquire) {
            0 => None,
            v => Some(u64::from(v) - 1),
        }
    }

    /// Gives leaf slot `slot` the overlay in unit `overlay` (initialized).
    fn set(&self, slot: u64, overlay: u64) {
        let v = u32::try_from(overlay + 1).expect("overlay units fit in 32 bits");
        self.attached.fetch_add(1, Ordering::Relaxed);
        self.word(slot).store(v, Ordering::Release);
    }

    /// Forgets the overlay of `slot` (the slot is being handed out anew).
    #[inline]
    fn clear(&self, slot: u64) {
        if self.attached.load(Ordering::Relaxed) == 0 {
            return;
        }
        let w = self.word(slot);
        if w.load(Ordering::Relaxed) != 0 {
            w.store(0, Ordering::Release);
            self.attached.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// The value overlays of file leaves (`storage::overlay`) attached by the
/// logged commits that follow one file commit (a *span*): which leaf has
/// one, and the writer's list of them.
///
/// A file page, unlike an arena slot, is not this process's to reuse: a
/// checkpoint (of this process or another) frees and rewrites it. So the
/// table is not the arena's: each span has its own, which every snapshot
/// of the span holds (`MapSource::file_overlays`), and no snapshot of
/// another span sees. Logged commits free no file page, so a word names
/// the overlay of the leaf the page holds for every snapshot that holds
/// the table; a word whose leaf a logged commit superseded stays, for the
/// snapshots that still see that leaf, and no later one reaches the page.
/// Only the steps of a checkpoint free file pages within a span (the
/// superseded leaves, and the leaves they fold), and reuse them: the
/// snapshots published from the relayout before the steps on hold tables of
/// their own without those leaves (`FileOverlays::without`). The
/// overlay slots retire with their leaves, or all at once when the span
/// ends (`ArenaSpace::retire_all`), so no snapshot of a later span, which
/// the reuse of a slot could be for, holds this table.
#[derive(Debug)]
#[repr(align(128))] // Behind an `Arc`, as `Arena` is: the table's fields apart from its counts.
pub(crate) struct FileOverlays {
    /// One word per page of the file commit the span follows.
    table: OverlayTable,
    /// The txn of the snapshot whose copy made the table: every snapshot
    /// that holds it is newer, so the span's overlays count as born then
    /// (`ArenaSpace::alloc_overlay`).
    born: u64,
    /// The writer's: every leaf given an overlay in the span, in order, so
    /// that a checkpoint folds the ones its trees still reach
    /// (`txn::commit`). Only the writer locks it.
    leaves: OwnLines<std::sync::Mutex<Vec<FileLeaf>>>,
}

/// A file leaf given a value overlay, and the tree it was in (its
/// catalog id).
#[derive(Clone, Copy, Debug)]
pub(crate) struct FileLeaf {
    pub(crate) pgno: u64,
    pub(crate) tree: u64,
}

impl FileOverlays {
    /// The table of the same span without the leaves `gone` names (leaves
    /// a checkpoint step wrote folded, which it may free and reuse while
    /// the span lasts: a snapshot laid out without them must not find
    /// their overlays under those page numbers; `txn::checkpoint_steps`).
    pub(crate) fn without(&self, gone: &std::collections::HashSet<u64>) -> Result<FileOverlays> {
        let kept = FileOverlays::new(self.table.slots, self.born)?;
        let leaves = self.leaves.lock().unwrap_or_else(|e| e.into_inner());
        let mut kept_leaves = Vec::with_capacity(leaves.len().saturating_sub(gone.len()));
        for leaf in leaves.iter().filter(|l| !gone.contains(&l.pgno)) {
            if let Some(unit) = self.table.get(leaf.pgno) {
                kept.table.set(leaf.pgno, unit);
                kept_leaves.push(*leaf);
            }
        }
        *kept.leaves.lock().unwrap_or_else(|e| e.into_inner()) = kept_leaves;
        Ok(kept)
    }

    /// A table for a span over a file commit of `pages` pages, made by a
    /// copy of the snapshot of txn `born`.
    pub(crate) fn new(pages: u64, born: u64) -> Result<FileOverlays> {
        Ok(FileOverlays {
            table: OverlayTable::new(pages)?,
            born,
            leaves: OwnLines(std::sync::Mutex::new(Vec::new())),
        })
    }

    /// The overlay unit of file leaf `pgno`'s value overlay, if it has one. Not
    /// gated by the count of words set, as the arena's table is: a span
    /// has a table only once a leaf was given an overlay, and the count,
    /// which each overlay given raises, is a line the readers would then
    /// share with the writer.
    #[inline]
    pub(crate) fn unit_of(&self, pgno: u64) -> Option<u64> {
        if pgno >= self.table.slots {
            return None;
        }
        match self.table.word(pgno).load(Ordering::Acquire) {
            0 => None,
            v => Some(u64::from(v) - 1),
        }
    }

    /// Starts loading the table word `unit_of(pgno)` reads.
    #[inline]
    pub(crate) fn prefetch_word(&self, pgno: u64) {
        self.table.prefetch_word(pgno);
    }

    /// When the span's overlays count as born (see the field).
    pub(crate) fn born(&self) -> u64 {
        self.born
    }

    /// How many leaves were given an overlay in the span.
    pub(crate) fn leaf_count(&self) -> u64 {
        self.leaves.lock().unwrap_or_else(|e| e.into_inner()).len() as u64
    }

    /// The leaves given an overlay in the span, in order.
    pub(crate) fn leaves(&self) -> Vec<FileLeaf> {
        self.leaves
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Drop for OverlayTable {
    fn drop(&mut self) {
        // SAFETY: unmapping what `new` mapped; no reference outlives `self`.
        unsafe {
            libc::munmap(self.ptr.cast(), (self.slots.max(1) * 4) as usize);
        }
    }
}

/// One slot lent to a write transaction to hold a dirty page (see the
/// module doc): reachable by no snapshot, and the only handle to its slot,
/// so it may be read and written like a heap buffer. Not `Clone`: only
/// [`ArenaSpace::lend`] makes one; [`ArenaSpace::adopt`] consumes it.
#[derive(Debug)]
pub(crate) struct SlotBuf {
    arena: Arc<Arena>,
    slot: u64,
}

impl SlotBuf {
    /// The page number of the slot (`ARENA_BIT | slot`).
    pub(crate) fn pgno(&self) -> u64 {
        ARENA_BIT | self.slot
    }

    /// Whether the slot lies in the arena's upper region (branch pages).
    pub(crate) fn is_upper(&self) -> bool {
        self.slot < self.arena.upper_slots
    }
}

impl std::ops::Deref for SlotBuf {
    type Target = [u8];

    #[inline]
    fn deref(&self) -> &[u8] {
        let ps = self.arena.page_size;
        // SAFETY: `lend` checked the slot lies within the mapping, which the
        // `Arc` keeps alive; the slot is reachable by no snapshot and this
        // `SlotBuf` is its only handle (module doc), so no `&mut` to these
        // bytes exists while `&self` is borrowed.
        unsafe { std::slice::from_raw_parts(self.arena.ptr.add(self.slot as usize * ps), ps) }
    }
}

impl std::ops::DerefMut for SlotBuf {
    #[inline]
    fn deref_mut(&mut self) -> &mut [u8] {
        let ps = self.arena.page_size;
        // SAFETY: as for `deref`; `&mut self` is exclusive, and no reader can
        // reach an unpublished slot, so these bytes have no other reference.
        unsafe { std::slice::from_raw_parts_mut(self.arena.ptr.add(self.slot as usize * ps), ps) }
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        // SAFETY: unmapping the range we mapped; no slice outlives `self`
        // (snapshots hold the arena by `Arc`).
        unsafe {
            libc::munmap(self.ptr as *mut libc::c_void, self.len);
        }
    }
}

/// A run of slots just handed out: reachable by no snapshot, so it may be
/// written. Not `Clone`: only [`ArenaSpace::alloc`] makes one.
#[derive(Debug)]
pub(crate) struct Fresh {
    slot: u64,
    pages: u64,
}

impl Fresh {
    /// The page number of the run's first slot.
    pub(crate) fn pgno(&self) -> u64 {
        ARENA_BIT | self.slot
    }
}

/// Which slots are free, in use, or retired (the writer's alone).
///
/// Two regions: branch pages take slots of the *upper region*
/// (`0..upper_end`, from the arena's `upper_slots`, learned at the first
/// allocation), so that the pages every descent reads lie together in
/// huge pages; every other page, and a branch page when the upper region
/// is full, takes slots of the rest (`upper_end..`). Each region has its
/// own never-used mark (`upper_next`, `next`) and free list
/// (`upper_free`, `free`); a slot goes back to the free list of the region
/// it lies in.
///
/// Invariants: a slot is in exactly one of: beyond its region's mark
/// (never used since the last reset), its region's free list, `live` (set
/// bit in `live`), `lent` (set bit in
/// `lent_bits`: a [`SlotBuf`] of the current write transaction, or of an
/// ended one not yet reclaimed), or `retired`; `born[slot]` is the txn
/// that wrote a live or retired slot; `live_count` counts the set bits of
/// `live`, `lent_count` those of `lent_bits`, `retired_count` the pages in
/// `retired`; every lent slot is in `lent` (which may also hold slots lent
/// once and adopted since).
#[derive(Debug, Default)]
pub(crate) struct ArenaSpace {
    /// The end of the upper region (0 until learned, or when the arena has
    /// none).
    upper_end: u64,
    /// The upper region's `next`, `populated` and `free`, as below.
    upper_next: u64,
    upper_populated: u64,
    upper_free: Vec<u64>,
    next: u64,
    /// Slots below this were made present (`Arena::populate`); memory
    /// stays present across resets of `next`.
    populated: u64,
    free: Vec<u64>,
    /// (first slot, pages, txn that wrote it, txn that stopped using it).
    retired: Vec<(u64, u64, u64, u64)>,
    live: Vec<u64>,
    born: SlotTable<u64>,
    live_count: u64,
    retired_count: u64,
    lent: Vec<u64>,
    lent_bits: Vec<u64>,
    lent_count: u64,
    /// Live slots that hold value overlays (`storage::overlay`): taken by
    /// `alloc_overlay`, given back by `retire_overlay` or `retire_all`. At
    /// most one per live leaf, they are left out of the bounds (`limit`,
    /// `live_pages`): an overlay spares copies of its leaf, and counting
    /// it would make checkpoints come twice as often.
    overlay_count: u64,
    /// Per unit size below a whole slot (eighths, quarters): the overlay
    /// slot whose units of that size are not all handed out yet, and the
    /// eighth its next unit starts at (1 to `OVERLAY_UNITS_PER_SLOT - 1`).
    open_slots: [Option<(u64, u64)>; 2],
    /// Per overlay slot: its units handed out and not retired, and the
    /// latest txn that retired one. The slot retires when no unit is live
    /// (nor to be handed out), with that txn and the earliest of the
    /// units' birth txns (`born`): a reader of any unit is then kept.
    overlay_units: SlotTable<(u8, u64)>,
}

/// A value per arena slot, in two vectors: one for the upper region
/// (slots `0..upper_end`) and one for the rest (from `upper_end`), each
/// grown only as far as its region's slots are used. One vector from
/// slot 0 would be zero-filled across the whole upper region (16,384
/// slots in a default arena) at the first write of a lower slot: 400 KiB
/// for the two tables, a hundred page faults in the first commit of every
/// writing process (benchmarks.md, session 47).
#[derive(Debug, Default)]
struct SlotTable<T> {
    upper: Vec<T>,
    lower: Vec<T>,
}

impl<T: Copy + Default> SlotTable<T> {
    /// Whether `slot` is in the upper region, and its index in that
    /// region's vector; `upper_end` is the upper region's end (0 before
    /// the regions are learned, when no slot is in use).
    #[inline]
    fn index(upper_end: u64, slot: u64) -> (bool, usize) {
        if slot < upper_end {
            (true, slot as usize)
        } else {
            (false, (slot - upper_end) as usize)
        }
    }

    /// `slot`'s value. Panics for a slot never written (a bug: every
    /// caller reads a slot in use), as indexing one vector did.
    #[inline]
    fn get(&self, upper_end: u64, slot: u64) -> T {
        let (upper, i) = Self::index(upper_end, slot);
        let table = if upper { &self.upper } else { &self.lower };
        *table
            .get(i)
            .unwrap_or_else(|| panic!("arena slot {slot} read before it was written"))
    }

    /// `slot`'s value, for writing: its region's vector grown to hold it.
    #[inline]
    fn get_mut(&mut self, upper_end: u64, slot: u64) -> &mut T {
        let (upper, i) = Self::index(upper_end, slot);
        let table = if upper {
            &mut self.upper
        } else {
            &mut self.lower
        };
        if table.len() <= i {
            table.resize(i + 1, T::default());
        }
        &mut table[i]
    }
}

/// Sets (`on`) or clears bit `slot` of `bits`, which must be the other way.
#[inline]
fn flip(bits: &mut Vec<u64>, slot: u64, on: bool) {
    let (word, bit) = ((slot / 64) as usize, 1u64 << (slot % 64));
    if word >= bits.len() {
        bits.resize(word + 1, 0);
    }
    assert!((bits[word] & bit != 0) != on, "arena slot {slot} state");
    if on {
        bits[word] |= bit;
    } else {
        bits[word] &= !bit;
    }
}

/// Whether bit `slot` of `bits` is set.
fn is_set(bits: &[u64], slot: u64) -> bool {
    bits.get((slot / 64) as usize)
        .is_some_and(|w| w & (1 << (slot % 64)) != 0)
}

/// The first of `pages` slots from `*next` (never used since the last
/// reset) if they end by `end` (the end of their region), moving `*next`
/// past them. Memory is made present ahead of `*next` (`*populated`:
/// slots below it are present): what the slots taken need, at once, and
/// then [`POPULATE_STEP`] more (at most) in a call that finds the lead a
/// step or more short of [`POPULATE_LEAD`], never past `end`.
fn take_never_used(
    arena: &Arena,
    next: &mut u64,
    populated: &mut u64,
    pages: u64,
    end: u64,
) -> Option<u64> {
    if *next + pages > end {
        return None;
    }
    debug_assert!(*populated >= *next, "slots below `next` are present");
    let slot = *next;
    *next += pages;
    let lead_end = (*next + POPULATE_LEAD).min(end);
    // Topped up once the lead is a step short, a step at a time: one
    // system call per step of single slots taken, where topping up to the
    // full lead at every take made one per slot (112,660 calls for 400k
    // single-put commits at 1M records, 14,234 with steps; benchmarks.md,
    // session 39).
    if *populated < *next || *populated < lead_end.saturating_sub(POPULATE_STEP) {
        let to = (*next).max(*populated + POPULATE_STEP).min(lead_end);
        arena.populate(*populated, to - *populated);
        *populated = to;
    }
    Some(slot)
}

/// Puts the slots `slot..slot + pages` on the free list of their region:
/// `upper_free` below `upper_end`, else `free`.
fn push_free(
    upper_end: u64,
    free: &mut Vec<u64>,
    upper_free: &mut Vec<u64>,
    slot: u64,
    pages: u64,
) {
    for s in slot..slot + pages {
        if s < upper_end {
            upper_free.push(s);
        } else {
            free.push(s);
        }
    }
}

/// Whether a reader of one of `protectors` (sorted snapshot txns) can see a
/// version written at `born` and replaced at `freed`: a snapshot in
/// `[born, freed)`.
fn protected(protectors: &[u64], born: u64, freed: u64) -> bool {
    let i = protectors.partition_point(|&p| p < born);
    protectors.get(i).is_some_and(|&p| p < freed)
}

impl ArenaSpace {
    /// Slots in use by the newest commit's trees (value overlays left
    /// out).
    pub(crate) fn live_pages(&self) -> u64 {
        debug_assert!(self.overlay_count <= self.live_count);
        self.live_count - self.overlay_count
    }

    /// Slots in use, value overlays included (memory in use).
    pub(crate) fn live_pages_and_overlays(&self) -> u64 {
        self.live_count
    }

    /// Slots free for reuse now, in the region that has fewer (the upper
    /// region counted when the arena has one): a release is worth its scan
    /// of the reader table when either runs short, or branches would take
    /// never-used slots of the upper region while retired ones wait.
    pub(crate) fn free_slots(&self) -> u64 {
        let lower = self.free.len() as u64;
        if self.upper_end == 0 {
            lower
        } else {
            lower.min(self.upper_free.len() as u64)
        }
    }

    /// Slots retired and not yet released.
    pub(crate) fn retired_pages(&self) -> u64 {
        self.retired_count
    }

    /// Retired slots that readers of `protectors` (sorted snapshot txns)
    /// keep from reuse.
    pub(crate) fn pinned_by(&self, protectors: &[u64]) -> u64 {
        self.retired
            .iter()
            .filter(|&&(_, _, born, freed)| protected(protectors, born, freed))
            .map(|&(_, pages, _, _)| pages)
            .sum()
    }

    fn set_live(&mut self, slot: u64, pages: u64, live: bool) {
        for s in slot..slot + pages {
            flip(&mut self.live, s, live);
        }
        if live {
            self.live_count += pages;
        } else {
            self.live_count -= pages;
        }
    }

    /// Slots of either region used since the last reset, less those
    /// holding value overlays now.
    fn touched(&self) -> u64 {
        (self.next - self.upper_end + self.upper_next).saturating_sub(self.overlay_count)
    }

    /// The first of `pages` slots beyond `next` (never used since the last
    /// reset), if the arena has them and the slots used since the last
    /// reset, in both regions, stay within `limit`. Their memory is made
    /// present ahead of `next` (`take_never_used`): at 10M records, where
    /// nearly every single-put commit takes a fresh slot, a page fault per
    /// slot was a quarter of the commit's time.
    fn never_used(&mut self, arena: &Arena, pages: u64, limit: u64) -> Option<u64> {
        self.learn_regions(arena);
        if self.touched() + pages > limit {
            return None;
        }
        take_never_used(
            arena,
            &mut self.next,
            &mut self.populated,
            pages,
            arena.slots(),
        )
    }

    /// Sets the regions apart from the arena's first use on.
    fn learn_regions(&mut self, arena: &Arena) {
        if self.upper_end != arena.upper_slots() {
            assert!(
                self.next == 0 && self.upper_end == 0,
                "the arena's regions change after use"
            );
            self.upper_end = arena.upper_slots();
            self.next = self.upper_end;
            self.populated = self.upper_end;
            // Its free list can hold the whole region: it never grows
            // after this (no allocation on the commit path).
            self.upper_free.reserve_exact(self.upper_end as usize);
        }
    }

    /// A slot for a branch page: from the upper region when it has one
    /// (within `limit`, as `never_used`), else `None`.
    fn upper_slot(&mut self, arena: &Arena, limit: u64) -> Option<u64> {
        self.learn_regions(arena);
        if let Some(slot) = self.upper_free.pop() {
            return Some(slot);
        }
        if self.touched() + 1 > limit {
            return None;
        }
        let end = self.upper_end;
        take_never_used(
            arena,
            &mut self.upper_next,
            &mut self.upper_populated,
            1,
            end,
        )
    }

    /// Puts freed slots back on the free list of their region.
    fn free_run(&mut self, slot: u64, pages: u64) {
        push_free(
            self.upper_end,
            &mut self.free,
            &mut self.upper_free,
            slot,
            pages,
        );
    }

    /// `pages` contiguous slots of `arena` no snapshot can reach, for the
    /// commit of `txn`, or `None` when the arena is full (the caller then
    /// checkpoints instead). A `branch` page takes a slot of the upper
    /// region while it has one.
    pub(crate) fn alloc(
        &mut self,
        arena: &Arena,
        pages: u64,
        limit: u64,
        txn: u64,
        branch: bool,
    ) -> Option<Fresh> {
        assert!(pages > 0);
        let upper = if branch && pages == 1 {
            self.upper_slot(arena, limit)
        } else {
            None
        };
        let slot = match upper {
            Some(slot) => slot,
            None if pages == 1 && !self.free.is_empty() => self.free.pop().expect("non-empty"),
            None => self.never_used(arena, pages, limit)?,
        };
        for s in slot..slot + pages {
            arena.forget_overlay(s);
        }
        self.set_live(slot, pages, true);
        for s in slot..slot + pages {
            *self.born.get_mut(self.upper_end, s) = txn;
        }
        Some(Fresh { slot, pages })
    }

    /// One slot of `arena` no snapshot can reach, lent to the current write
    /// transaction to hold a dirty page (see the module doc), or `None`
    /// when the arena is full up to `limit`: for a `branch` page, a slot of
    /// the upper region while it has one.
    pub(crate) fn lend(&mut self, arena: &Arc<Arena>, limit: u64, branch: bool) -> Option<SlotBuf> {
        let upper = if branch {
            self.upper_slot(arena, limit)
        } else {
            None
        };
        let slot = match upper.or_else(|| self.free.pop()) {
            Some(slot) => slot,
            None => self.never_used(arena, 1, limit)?,
        };
        arena.forget_overlay(slot);
        flip(&mut self.lent_bits, slot, true);
        self.lent.push(slot);
        self.lent_count += 1;
        Some(SlotBuf {
            arena: arena.clone(),
            slot,
        })
    }

    /// Publishes a lent slot for the logged commit of `txn` (which sealed
    /// the page in it): it becomes live, written at `txn`. Returns its page
    /// number.
    pub(crate) fn adopt(&mut self, buf: SlotBuf, txn: u64) -> u64 {
        let slot = buf.slot;
        drop(buf);
        flip(&mut self.lent_bits, slot, false);
        self.lent_count -= 1;
        self.set_live(slot, 1, true);
        *self.born.get_mut(self.upper_end, slot) = txn;
        ARENA_BIT | slot
    }

    /// An overlay unit (see [`OVERLAY_UNITS_PER_SLOT`]) for the value
    /// overlay of live leaf `leaf`, whose first entry holds `value_len`
    /// bytes: for a file leaf, a unit of `UnitSize::first_for_file_leaf`
    /// (the next one of the last slot taken for that size, or the first of
    /// a new one) born at `file_born` (its span's `FileOverlays::born`: a
    /// reader older than that holds another span's table, and cannot reach
    /// it); for an arena leaf, a whole slot born when the leaf was (a
    /// reader that sees the leaf may read its overlay, so it is kept as
    /// long). Overlay slots are left out of the bounds (see
    /// `overlay_count`). The earliest birth of a slot's units is its own
    /// (`born`); the units of one slot are of one size and one span
    /// (`retire_all` ends a span and closes the open slots).
    pub(crate) fn alloc_overlay(
        &mut self,
        arena: &Arena,
        leaf: u64,
        value_len: usize,
        file_born: u64,
        limit: u64,
    ) -> Option<u64> {
        if leaf & ARENA_BIT != 0 {
            let born = self.born_of(leaf);
            return self.alloc_unit(arena, UnitSize::Whole, born, limit);
        }
        let size = UnitSize::first_for_file_leaf(arena.page_size, value_len);
        self.alloc_unit(arena, size, file_born, limit)
    }

    /// A unit for the overlay of `leaf` whose first entry is an insert of
    /// `bytes`: as `alloc_overlay` for a file leaf; for an arena leaf too
    /// (not a whole slot: most leaves take a few inserts between
    /// checkpoints, and a whole slot each doubled the arena's memory for
    /// random inserts), born with the leaf, moving to a larger unit as it
    /// fills (`Arena::move_overlay`).
    pub(crate) fn alloc_insert_overlay(
        &mut self,
        arena: &Arena,
        leaf: u64,
        bytes: usize,
        file_born: u64,
        limit: u64,
    ) -> Option<u64> {
        let size = UnitSize::first_for_file_leaf(arena.page_size, bytes);
        let born = if leaf & ARENA_BIT != 0 {
            self.born_of(leaf)
        } else {
            file_born
        };
        self.alloc_unit(arena, size, born, limit)
    }

    /// A unit of the next size up for the overlay of a file leaf whose
    /// unit `from` filled (`Arena::move_file_overlay`), born at
    /// `file_born`; `None` for a whole slot's (none is larger), or when
    /// the arena has no room.
    pub(crate) fn alloc_larger_overlay(
        &mut self,
        arena: &Arena,
        from: u64,
        file_born: u64,
        limit: u64,
    ) -> Option<u64> {
        let size = UnitSize::of(from)?.larger()?;
        self.alloc_unit(arena, size, file_born, limit)
    }

    /// A unit of `size` born at `born`: a whole slot, or the next unit of
    /// the open slot of that size (a new slot when none is open).
    fn alloc_unit(&mut self, arena: &Arena, size: UnitSize, born: u64, limit: u64) -> Option<u64> {
        let open = match size {
            UnitSize::Eighth => 0,
            UnitSize::Quarter => 1,
            UnitSize::Whole => {
                let slot = self.new_overlay_slot(arena, limit, born)?;
                return Some(size.tag() | (slot * OVERLAY_UNITS_PER_SLOT));
            }
        };
        let step = size.eighths();
        if let Some((slot, next)) = self.open_slots[open].take() {
            debug_assert!(0 < next && next < OVERLAY_UNITS_PER_SLOT && next % step == 0);
            let slot_born = self.born.get_mut(self.upper_end, slot);
            *slot_born = (*slot_born).min(born);
            self.overlay_units.get_mut(self.upper_end, slot).0 += 1;
            if next + step < OVERLAY_UNITS_PER_SLOT {
                self.open_slots[open] = Some((slot, next + step));
            }
            return Some(size.tag() | (slot * OVERLAY_UNITS_PER_SLOT + next));
        }
        let slot = self.new_overlay_slot(arena, limit, born)?;
        self.open_slots[open] = Some((slot, step));
        Some(size.tag() | (slot * OVERLAY_UNITS_PER_SLOT))
    }

    /// A slot for overlays, born at `born`, counted as an overlay slot
    /// with one unit live; `None` when the arena has no room.
    fn new_overlay_slot(&mut self, arena: &Arena, limit: u64, born: u64) -> Option<u64> {
        let slot = self.alloc(arena, 1, limit, born, false)?.slot;
        self.overlay_count += 1;
        *self.overlay_units.get_mut(self.upper_end, slot) = (1, 0);
        Some(slot)
    }

    /// The value overlay in `unit` is no longer used by commits from `txn`
    /// on (its leaf was superseded); its slot retires with the last of its
    /// units.
    pub(crate) fn retire_overlay(&mut self, unit: u64, txn: u64) {
        let slot = (unit & !UNIT_TAGS) / OVERLAY_UNITS_PER_SLOT;
        let (live, retired_at) = self.overlay_units.get_mut(self.upper_end, slot);
        assert!(*live > 0, "overlay unit {unit} retired twice");
        *live -= 1;
        *retired_at = (*retired_at).max(txn);
        let open = self
            .open_slots
            .iter()
            .flatten()
            .any(|&(open, _)| open == slot);
        if *live == 0 && !open {
            let txn = *retired_at;
            self.retire(ARENA_BIT | slot, 1, txn);
            self.overlay_count -= 1;
        }
    }

    /// The txn that wrote live slot `pgno` (an arena page number).
    pub(crate) fn born_of(&self, pgno: u64) -> u64 {
        let slot = pgno & !ARENA_BIT;
        assert!(is_set(&self.live, slot), "born_of a slot not in use");
        self.born.get(self.upper_end, slot)
    }

    /// Slots lent and not adopted.
    #[cfg(test)]
    pub(crate) fn lent_pages(&self) -> u64 {
        self.lent_count
    }

    /// Takes back every slot lent and not adopted: called when no write
    /// transaction is open (at the next one's start), so that no
    /// [`SlotBuf`] of them exists. They were never published.
    pub(crate) fn reclaim_lent(&mut self) {
        for slot in self.lent.drain(..) {
            if is_set(&self.lent_bits, slot) {
                flip(&mut self.lent_bits, slot, false);
                self.lent_count -= 1;
                push_free(
                    self.upper_end,
                    &mut self.free,
                    &mut self.upper_free,
                    slot,
                    1,
                );
            }
        }
        debug_assert_eq!(self.lent_count, 0);
    }

    /// Gives back a run `alloc` handed out that was never published.
    pub(crate) fn unalloc(&mut self, fresh: Fresh) {
        self.set_live(fresh.slot, fresh.pages, false);
        self.free_run(fresh.slot, fresh.pages);
    }

    /// The run at `pgno` is no longer used by commits from `txn` on.
    pub(crate) fn retire(&mut self, pgno: u64, pages: u64, txn: u64) {
        let slot = pgno & !ARENA_BIT;
        assert!(pgno & ARENA_BIT != 0);
        assert!(if slot < self.upper_end {
            pages == 1 && slot < self.upper_next
        } else {
            slot + pages <= self.next
        });
        self.set_live(slot, pages, false);
        let born = self.born.get(self.upper_end, slot);
        assert!(born < txn, "arena slot retired by the commit that wrote it");
        self.retired.push((slot, pages, born, txn));
        self.retired_count += pages;
    }

    /// Retires every live slot (a checkpoint at `txn` wrote them all to the
    /// file).
    pub(crate) fn retire_all(&mut self, txn: u64) {
        // Room on the free list for every slot retired here (the commits
        // that release them then allocate nothing), made here, off the
        // commit path.
        self.free
            .reserve((self.retired_count + self.live_count) as usize);
        for word in 0..self.live.len() {
            let mut bits = self.live[word];
            while bits != 0 {
                let slot = word as u64 * 64 + bits.trailing_zeros() as u64;
                bits &= bits - 1;
                self.retire(ARENA_BIT | slot, 1, txn);
            }
        }
        debug_assert_eq!(self.live_count, 0);
        // The overlays went with the rest (their units' counts are set
        // anew when a slot is next taken for overlays).
        self.overlay_count = 0;
        self.open_slots = [None; 2];
    }

    /// Makes reusable every retired slot no reader of `protectors` (sorted
    /// snapshot txns of the live readers) can see: a long-lived reader keeps
    /// only the versions its own snapshot reads. Returns true when the arena
    /// became empty (and was reset to its start, so that its memory in use
    /// stays that of the slots live at once).
    pub(crate) fn release(&mut self, protectors: &[u64]) -> bool {
        let before = self.retired.len();
        let upper_end = self.upper_end;
        let (free, upper_free) = (&mut self.free, &mut self.upper_free);
        let mut released = 0;
        self.retired.retain(|&(slot, pages, born, freed)| {
            if protected(protectors, born, freed) {
                return true;
            }
            push_free(upper_end, free, upper_free, slot, pages);
            released += pages;
            false
        });
        self.retired_count -= released;
        if self.retired.len() < before
            && self.live_count == 0
            && self.lent_count == 0
            && self.retired.is_empty()
        {
            self.next = self.upper_end;
            self.upper_next = 0;
            self.free.clear();
            self.upper_free.clear();
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Minor page faults this thread took so far.
    #[cfg(target_os = "linux")]
    fn minor_faults() -> i64 {
        // SAFETY: getrusage writes the struct it is given, nothing else.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: as above; RUSAGE_THREAD is this thread's.
        assert_eq!(
            unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) },
            0
        );
        usage.ru_minflt
    }

    /// A word of an overlay table a reader read before the writer sets it
    /// takes no second fault when set: a private page read first would
    /// have mapped the zero page, and its replacement at the write is a
    /// TLB shootdown of every CPU running a thread of the process
    /// (`Pages::Shared`).
    #[cfg(target_os = "linux")]
    #[test]
    fn a_table_word_read_first_is_set_without_a_fault() {
        let table = OverlayTable::new(1 << 20).unwrap();
        for slot in [5_000u64, 400_000, 1_000_000] {
            assert_eq!(table.word(slot).load(Ordering::Acquire), 0);
            let before = minor_faults();
            table.set(slot, 41);
            assert_eq!(minor_faults(), before, "setting slot {slot} faulted");
            assert_eq!(table.get(slot), Some(41));
        }
    }

    /// The per-slot tables grow per region: the first slots of the lower
    /// region (past the upper region's 16,384) make no entry for the upper
    /// region's slots, and each region's slots keep their own values.
    #[test]
    fn slot_tables_grow_only_as_far_as_each_region_is_used() {
        let arena = Arc::new(Arena::new(4096, 1 << 30).unwrap());
        let upper = arena.upper_slots();
        assert_eq!(upper, (UPPER_REGION_BYTES / 4096) as u64);
        let mut space = ArenaSpace::default();
        let leaf = space.alloc(&arena, 2, u64::MAX, 3, false).unwrap();
        assert!(leaf.slot >= upper, "a leaf run takes lower slots");
        assert_eq!(space.born.lower.len(), 2);
        assert!(space.born.upper.is_empty());
        let branch = space.lend(&arena, u64::MAX, true).unwrap();
        assert!(branch.slot < upper, "a branch takes an upper slot");
        let branch = space.adopt(branch, 4);
        let unit = space
            .alloc_overlay(&arena, leaf.pgno(), 8, 0, u64::MAX)
            .unwrap();
        assert_eq!(space.born_of(leaf.pgno()), 3);
        assert_eq!(space.born_of(branch), 4);
        // The leaf's two slots and the overlay's whole slot after them.
        assert_eq!(space.born.upper.len(), 1);
        assert_eq!(space.born.lower.len(), 3);
        assert_eq!(space.overlay_units.lower.len(), 3);
        assert!(space.overlay_units.upper.is_empty());
        space.retire(leaf.pgno(), 2, 6);
        space.retire(branch, 1, 6);
        space.retire_overlay(unit, 6);
        assert!(space.release(&[]));
        assert_eq!(space.live_pages(), 0);
    }

    #[test]
    fn slots_are_reused_only_after_the_oldest_reader_passes_their_retirement() {
        let arena = Arena::new(4096, 64 * 4096).unwrap();
        let mut space = ArenaSpace::default();
        let a = space.alloc(&arena, 1, u64::MAX, 3, false).unwrap();
        let b = space.alloc(&arena, 2, u64::MAX, 3, false).unwrap();
        arena.write(&a, &[7u8; 4096]);
        arena.write(&b, &[9u8; 8192]);
        assert_eq!(arena.run(a.pgno(), 1).unwrap()[0], 7);
        assert_eq!(arena.run(b.pgno(), 2).unwrap()[8191], 9);
        assert_eq!(space.live_pages(), 3);
        space.retire(a.pgno(), 1, 5);
        assert!(!space.release(&[4]), "a reader at 4 still sees slot a");
        let c = space.alloc(&arena, 1, u64::MAX, 5, false).unwrap();
        assert_ne!(c.pgno(), a.pgno(), "slot a reused while a reader sees it");
        assert!(
            !space.release(&[2, 5]),
            "a reader older than slot a does not pin it"
        );
        let d = space.alloc(&arena, 1, u64::MAX, 6, false).unwrap();
        assert_eq!(d.pgno(), a.pgno(), "slot a reusable once no reader sees it");
        space.retire(c.pgno(), 1, 7);
        assert_eq!(space.pinned_by(&[6]), 1, "a reader at 6 sees slot c");
        space.retire_all(8);
        assert_eq!(space.live_pages(), 0);
        assert!(space.release(&[]), "an arena with nothing live resets");
        let e = space.alloc(&arena, 1, u64::MAX, 9, false).unwrap();
        assert_eq!(e.pgno(), ARENA_BIT, "allocation starts over at slot 0");
    }

    /// Memory is made present ahead of the never-used mark, a little per
    /// call: a run of single-slot takes never finds its slot absent and
    /// never makes more than `POPULATE_STEP` slots present at once (making
    /// 512 present at once was one commit's 2 ms), nor makes any present in
    /// more than one take of `POPULATE_STEP` once the lead is reached (a
    /// system call each); a run larger than the lead is made present
    /// whole; the region's end bounds it all.
    #[test]
    fn memory_is_made_present_ahead_a_little_at_a_time() {
        let slots = 2 * POPULATE_LEAD + 100;
        let arena = Arena::new(4096, slots as usize * 4096).unwrap();
        let (mut next, mut populated) = (0, 0);
        for _ in 0..POPULATE_LEAD + 50 {
            let before = populated;
            let slot = take_never_used(&arena, &mut next, &mut populated, 1, slots).unwrap();
            assert_eq!(slot + 1, next);
            assert!(populated >= next, "slot {slot} taken before it is present");
            assert!(
                populated - before <= POPULATE_STEP,
                "{} at once",
                populated - before
            );
            assert!(populated <= next + POPULATE_LEAD);
        }
        assert!(
            populated + POPULATE_STEP >= next + POPULATE_LEAD && populated <= next + POPULATE_LEAD,
            "the lead is reached and kept within a step"
        );
        let (mut calls, takes) = (0, 4 * POPULATE_STEP);
        for _ in 0..takes {
            let before = populated;
            take_never_used(&arena, &mut next, &mut populated, 1, slots).unwrap();
            calls += u64::from(populated != before);
        }
        assert!(
            calls <= takes / POPULATE_STEP,
            "{calls} calls for {takes} slots taken"
        );
        let big = POPULATE_LEAD + 10;
        take_never_used(&arena, &mut next, &mut populated, big, slots).unwrap();
        assert!(populated >= next);
        while take_never_used(&arena, &mut next, &mut populated, 1, slots).is_some() {
            assert!(populated >= next && populated <= slots);
        }
        assert_eq!(
            (next, populated),
            (slots, slots),
            "the region's end bounds both"
        );
    }

    #[test]
    fn lent_slots_are_published_by_adopt_and_otherwise_reclaimed() {
        let arena = Arc::new(Arena::new(4096, 8 * 4096).unwrap());
        let mut space = ArenaSpace::default();
        let mut a = space.lend(&arena, u64::MAX, false).unwrap();
        let mut b = space.lend(&arena, u64::MAX, false).unwrap();
        assert_ne!(a.pgno(), b.pgno());
        a.fill(5);
        b.fill(6);
        assert_eq!(space.lent_pages(), 2);
        let pa = space.adopt(a, 4);
        assert_eq!(arena.run(pa, 1).unwrap()[4095], 5);
        assert_eq!(space.live_pages(), 1);
        drop(b);
        // Nothing live or retired, but a slot is lent: no reset.
        space.retire(pa, 1, 5);
        assert!(!space.release(&[]), "no reset while a slot is lent");
        assert_eq!(space.lent_pages(), 1);
        space.reclaim_lent();
        assert_eq!(space.lent_pages(), 0);
        let free = space.free_slots();
        let c = space.lend(&arena, u64::MAX, false).unwrap();
        assert_eq!(
            space.free_slots(),
            free - 1,
            "a reclaimed slot is lent again"
        );
        assert_ne!(c.pgno(), pa, "... but not twice at once");
        let mut all = vec![c];
        while let Some(s) = space.lend(&arena, 8, false) {
            all.push(s);
        }
        let mut slots: Vec<u64> = all.iter().map(|s| s.pgno()).collect();
        slots.sort_unstable();
        slots.dedup();
        assert_eq!(slots.len(), all.len(), "a slot lent twice");
        assert_eq!(all.len(), 8, "every slot of the arena lent once");
    }

    #[test]
    fn a_full_arena_says_so_and_reads_out_of_range_are_refused() {
        let arena = Arena::new(4096, 4 * 4096).unwrap();
        let mut space = ArenaSpace::default();
        assert!(space.alloc(&arena, 3, u64::MAX, 1, false).is_some());
        assert!(space.alloc(&arena, 2, u64::MAX, 1, false).is_none());
        assert!(
            space.alloc(&arena, 1, 3, 1, false).is_none(),
            "the limit binds"
        );
        assert!(space.alloc(&arena, 1, u64::MAX, 1, false).is_some());
        assert!(arena.run(ARENA_BIT | 3, 2).is_none());
        assert!(arena.run(3, 1).is_none(), "a file page number is no slot");
        assert!(arena.run(ARENA_BIT | u64::MAX >> 2, 1).is_none());
    }

    #[test]
    fn branch_pages_take_the_upper_region_while_it_has_room() {
        let arena = Arc::new(Arena::new(4096, 8 * UPPER_REGION_BYTES).unwrap());
        let upper = arena.upper_slots();
        assert_eq!(upper, (UPPER_REGION_BYTES / 4096) as u64);
        let mut space = ArenaSpace::default();
        let leaf = space.alloc(&arena, 1, u64::MAX, 3, false).unwrap();
        let branch = space.alloc(&arena, 1, u64::MAX, 3, true).unwrap();
        assert_eq!(leaf.pgno(), ARENA_BIT | upper, "leaves start past it");
        assert_eq!(branch.pgno(), ARENA_BIT, "branches start at its start");
        let lent = space.lend(&arena, u64::MAX, true).unwrap();
        assert!(lent.is_upper());
        assert!(!space.lend(&arena, u64::MAX, false).unwrap().is_upper());
        let pb = space.adopt(lent, 3);
        // A branch slot freed goes back to the upper region only.
        space.retire(branch.pgno(), 1, 4);
        space.retire(pb, 1, 4);
        assert!(!space.release(&[]), "a leaf is still live");

        let again = space.alloc(&arena, 1, u64::MAX, 5, false).unwrap();
        assert!(again.slot >= upper, "a leaf took a branch slot");
        let reused = space.alloc(&arena, 1, u64::MAX, 5, true).unwrap();
        assert!(reused.slot < upper, "a freed branch slot was not reused");
        // A full upper region sends branches to the rest.
        let mut taken = 1;
        while let Some(f) = space.alloc(&arena, 1, u64::MAX, 6, true) {
            if f.slot >= upper {
                break;
            }
            taken += 1;
        }
        assert_eq!(taken, upper, "every upper slot used before any past it");
        // Free slots count in the region that has fewer: a branch must not
        // take never-used upper slots while retired ones wait.
        let mut two = ArenaSpace::default();
        let l = two.alloc(&arena, 1, u64::MAX, 1, false).unwrap();
        let b = two.alloc(&arena, 1, u64::MAX, 1, true).unwrap();
        two.retire(l.pgno(), 1, 2);
        assert!(!two.release(&[]), "a branch is still live");
        assert_eq!(two.free_slots(), 0, "the upper region has none free");
        assert!(two.alloc(&arena, 1, u64::MAX, 3, true).is_some());
        two.retire(b.pgno(), 1, 3);
        assert!(!two.release(&[]), "a branch is still live");
        assert_eq!(two.free_slots(), 1, "one free in each region");
        // The limit counts the slots used in both regions.
        let mut small = ArenaSpace::default();
        assert!(small.alloc(&arena, 2, 3, 1, false).is_some());
        assert!(small.alloc(&arena, 1, 3, 1, true).is_some());
        assert!(
            small.alloc(&arena, 1, 3, 1, false).is_none(),
            "the limit binds"
        );
        assert!(
            small.alloc(&arena, 1, 3, 1, true).is_none(),
            "... on branches too"
        );
        // Emptied, the arena starts over in both regions.
        small.retire_all(2);
        assert!(small.release(&[]));
        assert_eq!(small.alloc(&arena, 1, 3, 3, true).unwrap().slot, 0);
        assert_eq!(small.alloc(&arena, 1, 3, 3, false).unwrap().slot, upper);
    }
}
