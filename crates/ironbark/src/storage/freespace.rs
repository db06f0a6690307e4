//! Free space: which pages may be written, and which are waiting; and
//! where new pages go (`Allocator`, `TakenAhead`, branch regions).
//!
//! Invariants:
//! - A page is in at most one place: a reusable extent, a pending extent, or
//!   in use by the newest commit (`db::check` verifies this on disk).
//! - A *pending* extent was written by commit `born` and freed by commit
//!   `freed`: exactly the snapshots `born <= s < freed` can read it. It
//!   becomes *reusable* only when no *protector* lies in that interval. The
//!   protectors are the snapshots of live readers and the newest durable
//!   commit (the commit a crash falls back to), passed to
//!   [`FreeSpace::release`] by the writer.
//! - A reader of this process's own commits reads a shorter interval,
//!   `born <= s < left`: a checkpoint frees the file pages that logged
//!   commits stopped using, at `freed` (its own txn, above every logged
//!   commit), but the snapshots from the logged commit `left` on no longer
//!   read them. Only a *replay* reads them there: the durable commit (a
//!   crash's recovery replays the log onto it) and a read-only process
//!   rebuilding a logged commit from the log onto the file's trees, whose
//!   pages may differ from the writer's (`Protector`).
//! - Reusable extents are kept merged (no two touch), so the allocator sees
//!   the longest contiguous runs.
//! - The reusable pages inside branch regions (aligned 2 MiB runs the
//!   writer keeps for branch pages: docs/design.md, "Branch regions") are
//!   kept apart and given to branch pages only (`Allocator::branch_pages`);
//!   on disk, and to everything that reads free space as a whole
//!   (`reusable`), they are reusable pages like the others.
//!
//! Why the interval and not just "freed after the oldest reader" (LMDB's
//! rule): a long-lived reader then pins only the pages its own snapshot can
//! see. Pages written and freed after it began are reused as soon as no other
//! protector sees them, so the file stays bounded by the reader's snapshot,
//! not by the commits made while it lives.
//!
//! Cost: a pending extent is placed under the oldest protector that holds it
//! (`held`); when a protector goes away only its own group is re-examined.
//! Protectors only ever disappear or appear newer than every pending extent
//! (a new reader starts at the newest commit; the durable commit only moves
//! forward), so each extent moves at most once per protector that held it.

use std::collections::{BTreeMap, BTreeSet};

/// A run of `len` pages starting at page `start`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Extent {
    pub(crate) start: u64,
    pub(crate) len: u64,
}

impl Extent {
    pub(crate) fn end(&self) -> u64 {
        self.start + self.len
    }
}

/// Pages a commit stopped using, with the commit that wrote them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Freed {
    pub(crate) extent: Extent,
    /// The txn that wrote these pages (the oldest, if merged).
    pub(crate) born: u64,
    /// The first commit whose trees no longer hold these pages, if older
    /// than the commit that frees them (`Pending::left`); else
    /// [`Freed::LEFT_WHEN_FREED`].
    pub(crate) left: u64,
}

impl Freed {
    /// `left` of pages the commit that frees them stopped using.
    pub(crate) const LEFT_WHEN_FREED: u64 = u64::MAX;

    /// Pages written by `born` that the commit recording them stopped
    /// using.
    pub(crate) fn new(extent: Extent, born: u64) -> Freed {
        Freed {
            extent,
            born,
            left: Freed::LEFT_WHEN_FREED,
        }
    }
}

/// A pending extent: readable by the snapshots `born <= s < freed`, and by
/// this process's own readers only while `s < left` (`left <= freed`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pending {
    pub(crate) extent: Extent,
    pub(crate) born: u64,
    pub(crate) left: u64,
    pub(crate) freed: u64,
}

/// A snapshot that someone may read, as the writer's release sees it:
/// ordered by txn, a reader before a replay of the same txn.
///
/// A *reader* reads the trees a commit of this writer's process left:
/// its own commits, or file commits. A *replay* reads the trees of a
/// durable file commit with the log's records applied on top: the durable
/// commit itself (where a crash's recovery starts), and every reader of a
/// read-only process, which may rebuild a logged commit that way
/// (`txn::recovery::follow_log`) and whose snapshots are therefore not
/// page for page the writer's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Protector(u64);

impl Protector {
    /// A reader of commit `txn`'s own trees.
    pub(crate) fn reader(txn: u64) -> Protector {
        assert!(txn < 1 << 62, "txn {txn} out of range");
        Protector(txn << 1)
    }

    /// A replay onto the file, registered at `txn`.
    pub(crate) fn replay(txn: u64) -> Protector {
        assert!(txn < 1 << 62, "txn {txn} out of range");
        Protector(txn << 1 | 1)
    }

    pub(crate) fn txn(self) -> u64 {
        self.0 >> 1
    }

    pub(crate) fn is_replay(self) -> bool {
        self.0 & 1 == 1
    }

    /// Whether this protector can read `p`.
    fn reads(self, p: &Pending) -> bool {
        let end = if self.is_replay() { p.freed } else { p.left };
        p.born <= self.txn() && self.txn() < end
    }
}

#[derive(Clone, Debug, Default)]
struct HeldGroup {
    entries: Vec<Pending>,
    pages: u64,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct FreeSpace {
    /// Reusable extents by start page.
    by_start: BTreeMap<u64, u64>,
    /// The same extents by (length, start), for best-fit allocation.
    by_len: BTreeSet<(u64, u64)>,
    reusable_pages: u64,
    /// Pending extents not yet placed under a protector: those freed by the
    /// newest commits (the snapshot before them may still gain readers until
    /// the commit is published) and those loaded from disk.
    fresh: Vec<Pending>,
    /// Pending extents by the oldest protector that can read them.
    held: BTreeMap<Protector, HeldGroup>,
    pending_pages: u64,
    /// Branch regions: aligned runs of `region_pages` pages (2 MiB) that
    /// only branch pages take (`Allocator::branch_pages`), by start page.
    /// A placement preference of this writer, not on disk.
    zones: BTreeSet<u64>,
    /// Pages per branch region (0 until the writer sets it).
    region_pages: u64,
    /// The reusable pages inside branch regions, by start page; kept
    /// merged, apart from `by_start`, so that leaves never take them.
    zone_free: BTreeMap<u64, u64>,
    zone_free_pages: u64,
}

impl FreeSpace {
    pub(crate) fn reusable_pages(&self) -> u64 {
        self.reusable_pages + self.zone_free_pages
    }

    /// Sets the size of a branch region in pages (0: no regions). Regions
    /// of another size are forgotten: their free pages become plain ones.
    pub(crate) fn set_region_pages(&mut self, pages: u64) {
        assert!(
            pages == 0 || pages.is_power_of_two(),
            "region of {pages} pages"
        );
        self.zones.clear();
        let zone_free = std::mem::take(&mut self.zone_free);
        self.zone_free_pages = 0;
        self.region_pages = pages;
        for (start, len) in zone_free {
            self.add_plain(Extent { start, len });
        }
    }

    /// The branch regions' first pages, in order.
    pub(crate) fn zones(&self) -> impl Iterator<Item = u64> + '_ {
        self.zones.iter().copied()
    }

    /// Makes the regions starting at `starts` branch regions, as a commit
    /// recorded them (`storage::meta::encode_zones`): the reusable pages
    /// inside them become theirs.
    pub(crate) fn adopt_zones(&mut self, region_pages: u64, starts: &[u64]) {
        self.set_region_pages(region_pages);
        for &z in starts {
            assert!(z % region_pages == 0, "region at {z}");
            if !self.zones.insert(z) {
                continue;
            }
            // The free extents that reach into the region, given back
            // through `add_reusable`, which splits them at its edges.
            let end = z + region_pages;
            let inside: Vec<Extent> = self
                .by_start
                .range(..end)
                .rev()
                .take_while(|(&s, &l)| s + l > z)
                .map(|(&start, &len)| Extent { start, len })
                .collect();
            for extent in inside {
                self.remove_reusable(extent.start, extent.len);
                self.add_reusable(extent);
            }
        }
    }

    pub(crate) fn region_pages(&self) -> u64 {
        self.region_pages
    }

    /// Branch regions held.
    pub(crate) fn zone_count(&self) -> usize {
        self.zones.len()
    }

    /// Makes the region starting at `start` a branch region. Its pages
    /// must not be reusable yet (a region past the file's end): those
    /// freed later join the region's free pages.
    pub(crate) fn add_zone(&mut self, start: u64) {
        let rp = self.region_pages;
        assert!(rp > 0 && start.is_multiple_of(rp), "region at {start}");
        debug_assert!(self
            .by_start
            .range(..start + rp)
            .next_back()
            .is_none_or(|(&s, &l)| s + l <= start));
        assert!(self.zones.insert(start), "region {start} twice");
    }

    /// Forgets the branch regions from page `end` on: those a failed
    /// commit started past the file's end, where nothing of them is free.
    pub(crate) fn forget_zones_from(&mut self, end: u64) {
        let gone = self.zones.split_off(&end);
        assert!(
            self.zone_free.range(end..).next().is_none(),
            "free pages in the regions of a failed commit: {gone:?}"
        );
    }

    /// Takes up to `n` free pages of the branch regions, lowest first, so
    /// that branches fill few regions.
    pub(crate) fn take_zone(&mut self, mut n: u64, out: &mut Vec<Extent>) -> u64 {
        let mut got = 0;
        while n > 0 {
            let Some((&start, &len)) = self.zone_free.iter().next() else {
                break;
            };
            self.zone_free.remove(&start);
            let take = len.min(n);
            if len > take {
                self.zone_free.insert(start + take, len - take);
            }
            self.zone_free_pages -= take;
            out.push(Extent { start, len: take });
            n -= take;
            got += take;
        }
        got
    }

    fn add_zone_free(&mut self, mut start: u64, mut len: u64) {
        if let Some((&ps, &pl)) = self.zone_free.range(..start).next_back() {
            assert!(ps + pl <= start, "free extents overlap");
            if ps + pl == start {
                self.zone_free.remove(&ps);
                start = ps;
                len += pl;
            }
        }
        if let Some((&ns, &nl)) = self.zone_free.range(start..).next() {
            assert!(start + len <= ns, "free extents overlap");
            if start + len == ns {
                self.zone_free.remove(&ns);
                len += nl;
            }
        }
        self.zone_free.insert(start, len);
        self.zone_free_pages += len;
    }

    pub(crate) fn pending_pages(&self) -> u64 {
        self.pending_pages
    }

    /// Pages held back by protector `p` (and maybe by newer ones too).
    pub(crate) fn held_by(&self, p: Protector) -> u64 {
        self.held.get(&p).map_or(0, |g| g.pages)
    }

    /// Pending pages that protector `p` can read.
    pub(crate) fn visible_to(&self, p: Protector) -> u64 {
        self.pending()
            .filter(|e| p.reads(e))
            .map(|e| e.extent.len)
            .sum()
    }

    /// Every pending extent, in no particular order.
    pub(crate) fn pending(&self) -> impl Iterator<Item = &Pending> + '_ {
        self.fresh
            .iter()
            .chain(self.held.values().flat_map(|g| g.entries.iter()))
    }

    /// Every free extent (reusable and pending) in page order, merged.
    pub(crate) fn all_merged(&self) -> Vec<Extent> {
        let mut all: Vec<Extent> = self.reusable().collect();
        all.extend(self.pending().map(|p| p.extent));
        merged(all)
    }

    /// The reusable extents, in page order, merged (branch regions'
    /// pages included).
    pub(crate) fn reusable(&self) -> impl Iterator<Item = Extent> + '_ {
        let all: Vec<Extent> = self
            .by_start
            .iter()
            .chain(self.zone_free.iter())
            .map(|(&start, &len)| Extent { start, len })
            .collect();
        merged(all).into_iter()
    }

    /// Adds a reusable extent, merging it with its neighbours; the pages
    /// in branch regions go to those regions' free pages.
    pub(crate) fn add_reusable(&mut self, extent: Extent) {
        assert!(extent.len > 0, "empty extent");
        if self.zones.is_empty() {
            return self.add_plain(extent);
        }
        let rp = self.region_pages;
        let mut at = extent.start;
        while at < extent.end() {
            let region = at / rp * rp;
            if self.zones.contains(&region) {
                let end = extent.end().min(region + rp);
                self.add_zone_free(at, end - at);
                at = end;
            } else {
                let next = self
                    .zones
                    .range(region..)
                    .next()
                    .copied()
                    .unwrap_or(u64::MAX);
                let end = extent.end().min(next);
                self.add_plain(Extent {
                    start: at,
                    len: end - at,
                });
                at = end;
            }
        }
    }

    fn add_plain(&mut self, extent: Extent) {
        let mut start = extent.start;
        let mut len = extent.len;
        if let Some((&prev_start, &prev_len)) = self.by_start.range(..start).next_back() {
            assert!(prev_start + prev_len <= start, "free extents overlap");
            if prev_start + prev_len == start {
                self.remove_reusable(prev_start, prev_len);
                start = prev_start;
                len += prev_len;
            }
        }
        if let Some((&next_start, &next_len)) = self.by_start.range(start..).next() {
            assert!(start + len <= next_start, "free extents overlap");
            if start + len == next_start {
                self.remove_reusable(next_start, next_len);
                len += next_len;
            }
        }
        self.by_start.insert(start, len);
        self.by_len.insert((len, start));
        self.reusable_pages += len;
    }

    /// The reusable extent that ends at page `end` (the file's last page in
    /// use), if any.
    pub(crate) fn reusable_tail(&self, end: u64) -> Option<Extent> {
        let (&start, &len) = self.by_start.range(..end).next_back()?;
        (start + len == end).then_some(Extent { start, len })
    }

    /// Takes the reusable extent that ends at page `end`, if any.
    pub(crate) fn take_reusable_tail(&mut self, end: u64) -> Option<Extent> {
        let tail = self.reusable_tail(end)?;
        self.remove_reusable(tail.start, tail.len);
        Some(tail)
    }

    fn remove_reusable(&mut self, start: u64, len: u64) {
        self.by_start.remove(&start);
        self.by_len.remove(&(len, start));
        self.reusable_pages -= len;
    }

    /// Records pages written by `born` and freed by commit `freed`.
    pub(crate) fn add_pending(&mut self, p: Pending) {
        assert!(p.extent.len > 0, "empty extent");
        assert!(
            p.born < p.freed,
            "pages freed by the commit that wrote them"
        );
        assert!(p.left <= p.freed, "pages left after they were freed");
        self.pending_pages += p.extent.len;
        self.fresh.push(p);
    }

    /// Makes reusable every pending extent that no protector can read.
    /// `protectors` are sorted and hold the snapshot of every live reader
    /// and the newest durable commit (a replay).
    pub(crate) fn release(&mut self, protectors: &[Protector]) {
        debug_assert!(protectors.windows(2).all(|w| w[0] < w[1]));
        // Groups are few (one per protector that holds pages).
        while let Some(k) = self
            .held
            .keys()
            .copied()
            .find(|k| protectors.binary_search(k).is_err())
        {
            let g = self.held.remove(&k).expect("key found");
            self.pending_pages -= g.pages;
            for p in g.entries {
                self.place(p, protectors);
            }
        }
        let mut fresh = std::mem::take(&mut self.fresh);
        for p in fresh.drain(..) {
            self.pending_pages -= p.extent.len;
            self.place(p, protectors);
        }
        // Keep the buffer: every commit frees a few extents.
        self.fresh = fresh;
    }

    /// Puts `p` under the oldest protector that can read it, or makes it
    /// reusable. The protectors passed over are readers in `[left,
    /// freed)`: few distinct txns (readers register the newest commit).
    fn place(&mut self, p: Pending, protectors: &[Protector]) {
        let i = protectors.partition_point(|s| s.txn() < p.born);
        let holder = protectors[i..]
            .iter()
            .take_while(|s| s.txn() < p.freed)
            .find(|s| s.reads(&p));
        match holder {
            Some(&s) => {
                let g = self.held.entry(s).or_default();
                g.entries.push(p);
                g.pages += p.extent.len;
                self.pending_pages += p.extent.len;
            }
            _ => self.add_reusable(p.extent),
        }
    }

    /// Undoes a commit `txn` that failed: its freed pages are in use again,
    /// and the pages it took from free space are free again.
    pub(crate) fn roll_back(&mut self, txn: u64, taken: &[Extent]) {
        while self.fresh.last().is_some_and(|p| p.freed == txn) {
            let p = self.fresh.pop().expect("last");
            self.pending_pages -= p.extent.len;
        }
        for e in taken {
            self.add_reusable(*e);
        }
    }

    /// Takes `n` contiguous reusable pages: the smallest extent that holds
    /// them (best fit, lowest start on ties), from its front.
    pub(crate) fn take_contiguous(&mut self, n: u64) -> Option<u64> {
        assert!(n > 0);
        let &(len, start) = self.by_len.range((n, 0)..).next()?;
        self.remove_reusable(start, len);
        if len > n {
            self.by_start.insert(start + n, len - n);
            self.by_len.insert((len - n, start + n));
            self.reusable_pages += len - n;
        }
        Some(start)
    }

    /// Takes the largest reusable extent, up to `max` pages of it.
    pub(crate) fn take_largest(&mut self, max: u64) -> Option<Extent> {
        assert!(max > 0);
        let &(len, start) = self.by_len.iter().next_back()?;
        let take = len.min(max);
        self.remove_reusable(start, len);
        if len > take {
            self.by_start.insert(start + take, len - take);
            self.by_len.insert((len - take, start + take));
            self.reusable_pages += len - take;
        }
        Some(Extent { start, len: take })
    }
}

/// `extents` (no two overlapping) in page order, those that touch merged.
fn merged(mut extents: Vec<Extent>) -> Vec<Extent> {
    extents.sort_unstable();
    let mut out: Vec<Extent> = Vec::with_capacity(extents.len());
    for e in extents {
        match out.last_mut() {
            Some(last) if last.end() == e.start => last.len += e.len,
            _ => out.push(e),
        }
    }
    out
}

/// Branch regions begin once the file holds this many regions' pages (64
/// MiB): a smaller file's branches take few TLB entries wherever they
/// lie, and a region's unused pages would be a larger share of it.
pub(crate) const ZONE_MIN_REGIONS: u64 = 32;

/// Page allocation for one commit: from free space (recording what it took,
/// so a failed commit can give it back), else from the end of the file.
pub(crate) struct Allocator<'a> {
    pub(crate) free: &'a mut FreeSpace,
    /// The file's end in pages: where a run no free extent holds starts.
    pub(crate) page_count: u64,
    pub(crate) taken: &'a mut Vec<Extent>,
}

impl Allocator<'_> {
    /// `n` contiguous pages: a best-fit free extent, else the file's end.
    pub(crate) fn run(&mut self, n: u64) -> u64 {
        if let Some(start) = self.free.take_contiguous(n) {
            self.taken.push(Extent { start, len: n });
            return start;
        }
        let start = self.page_count;
        self.page_count += n;
        start
    }

    /// Returns the run just allocated, unused.
    pub(crate) fn give_back(&mut self, e: Extent) {
        if e.end() == self.page_count {
            self.page_count = e.start;
        } else {
            assert_eq!(self.taken.pop(), Some(e), "give_back of another run");
            self.free.add_reusable(e);
        }
    }

    /// Whether a commit of `n` more pages may place branches in regions:
    /// regions are on, and the file would reach [`ZONE_MIN_REGIONS`] of
    /// them if all `n` came from its end.
    pub(crate) fn may_place_regions(&self, n: u64) -> bool {
        let rp = self.free.region_pages();
        rp > 0 && self.page_count + n >= ZONE_MIN_REGIONS * rp
    }

    /// `n` pages for branch pages, lowest first: from the branch regions'
    /// free pages, then from new regions at the file's end (once the file
    /// holds [`ZONE_MIN_REGIONS`] regions; before, as [`Allocator::pages`]).
    /// A new region's start is pushed to `new_regions`; the pages skipped
    /// to align it and those of it left unused, to `unused`: the caller
    /// records them as freed, so that they are free on disk.
    pub(crate) fn branch_pages(
        &mut self,
        n: u64,
        max_regions: usize,
        new_regions: &mut Vec<u64>,
        unused: &mut Vec<Extent>,
    ) -> Vec<Extent> {
        let rp = self.free.region_pages();
        if n == 0 || rp == 0 || self.page_count < ZONE_MIN_REGIONS * rp {
            return self.pages(n);
        }
        let mut runs = Vec::new();
        let got = self.free.take_zone(n, &mut runs);
        self.taken.extend_from_slice(&runs);
        let mut left = n - got;
        if left > 0 && self.free.zone_count() + left.div_ceil(rp) as usize > max_regions {
            // The meta cannot name more regions: the rest go where leaves do.
            runs.extend(self.pages(left));
            return runs;
        }
        while left > 0 {
            let start = self.page_count.next_multiple_of(rp);
            if start > self.page_count {
                unused.push(Extent {
                    start: self.page_count,
                    len: start - self.page_count,
                });
            }
            let used = left.min(rp);
            runs.push(Extent { start, len: used });
            if used < rp {
                unused.push(Extent {
                    start: start + used,
                    len: rp - used,
                });
            }
            self.free.add_zone(start);
            new_regions.push(start);
            self.page_count = start + rp;
            left -= used;
        }
        runs
    }

    /// `n` pages in as few runs as possible.
    pub(crate) fn pages(&mut self, n: u64) -> Vec<Extent> {
        if n == 0 {
            return Vec::new();
        }
        if let Some(start) = self.free.take_contiguous(n) {
            self.taken.push(Extent { start, len: n });
            return vec![Extent { start, len: n }];
        }
        let mut runs = Vec::new();
        let mut left = n;
        while left > 0 {
            let Some(e) = self.free.take_largest(left) else {
                break;
            };
            self.taken.push(e);
            left -= e.len;
            runs.push(e);
        }
        if left > 0 {
            runs.push(Extent {
                start: self.page_count,
                len: left,
            });
            self.page_count += left;
        }
        runs
    }
}

/// File pages the open write transaction gave its new blobs as it put
/// them, before its commit (`btree::write::SealAtPut`): a transaction
/// that writes its pages to the file (not logged) seals each blob while
/// the value it just copied is in cache, and a seal names the page. Its
/// commit takes these over (`txn::commit`: the extents as taken, the end
/// as the file's); any other end of the transaction leaves them here, and
/// the next taker of the write lock gives them back
/// ([`TakenAhead::give_back`]), before anything else reads free space or
/// loads it anew. Invariant: every run is in `runs`; those from free space
/// also in `taken`, the others lie below `file_end`.
#[derive(Debug, Default)]
pub(crate) struct TakenAhead {
    /// The free extents taken, in order.
    pub(crate) taken: Vec<Extent>,
    /// Every run given out, from free space or the file's end, in order.
    pub(crate) runs: Vec<Extent>,
    /// The file's end after the runs taken from it (0: none was).
    pub(crate) file_end: u64,
}

impl TakenAhead {
    /// `n` pages for a blob of a transaction whose base has `base_pages`
    /// pages: a best-fit free extent, else the file's end (the rule of
    /// [`Allocator::run`], which the commit's own pages follow).
    pub(crate) fn run(&mut self, free: &mut FreeSpace, base_pages: u64, n: u64) -> u64 {
        let mut alloc = Allocator {
            free,
            page_count: base_pages.max(self.file_end),
            taken: &mut self.taken,
        };
        let start = alloc.run(n);
        if alloc.page_count > base_pages {
            self.file_end = alloc.page_count;
        }
        self.runs.push(Extent { start, len: n });
        start
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// Gives the free extents a transaction that did not commit took back
    /// to `free`, and forgets the rest (past its base's end, never
    /// recorded anywhere).
    pub(crate) fn give_back(&mut self, free: &mut FreeSpace) {
        for e in self.taken.drain(..) {
            free.add_reusable(e);
        }
        self.runs.clear();
        self.file_end = 0;
    }
}

/// Free space as replayed from the state chain: every free extent by start
/// page, with the commits that wrote and freed it (`freed == 0`: reusable).
/// Replay needs one map because a commit may take pages that it found
/// reusable but the chain still records as pending (release is not logged:
/// it depends on the readers alive at the time).
#[derive(Clone, Debug, Default)]
pub(crate) struct FreeMap {
    by_start: BTreeMap<u64, (u64, u64, u64)>,
}

impl FreeMap {
    /// Adds an extent; `false` if it overlaps one already free.
    pub(crate) fn insert(&mut self, e: Extent, born: u64, freed: u64) -> bool {
        if e.len == 0 {
            return false;
        }
        if let Some((&s, &(len, ..))) = self.by_start.range(..e.end()).next_back() {
            if s + len > e.start {
                return false;
            }
        }
        self.by_start.insert(e.start, (e.len, born, freed));
        true
    }

    /// Removes the pages of `e`, which must all be free (possibly spread
    /// over several adjacent extents); `false` if some are not.
    pub(crate) fn remove(&mut self, e: Extent) -> bool {
        if e.len == 0 {
            return false;
        }
        // Check first, so a failure changes nothing.
        let mut at = e.start;
        let mut pieces = Vec::new();
        while at < e.end() {
            let Some((&s, &(len, born, freed))) = self.by_start.range(..=at).next_back() else {
                return false;
            };
            if s + len <= at {
                return false;
            }
            pieces.push((s, len, born, freed));
            at = s + len;
        }
        for (s, len, born, freed) in pieces {
            self.by_start.remove(&s);
            if s < e.start {
                self.by_start.insert(s, (e.start - s, born, freed));
            }
            if s + len > e.end() {
                self.by_start
                    .insert(e.end(), (s + len - e.end(), born, freed));
            }
        }
        true
    }

    /// The free space: reusable extents, and pending ones waiting for
    /// the next [`FreeSpace::release`].
    pub(crate) fn into_free_space(self) -> FreeSpace {
        let mut free = FreeSpace::default();
        for (start, (len, born, freed)) in self.by_start {
            let extent = Extent { start, len };
            if freed == 0 {
                free.add_reusable(extent);
            } else {
                // Which commit stopped using them is not on disk: every
                // reader holds them as long as a replay would.
                free.add_pending(Pending {
                    extent,
                    born,
                    left: freed,
                    freed,
                });
            }
        }
        free
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ext(start: u64, len: u64) -> Extent {
        Extent { start, len }
    }

    fn pending(extent: Extent, born: u64, freed: u64) -> Pending {
        Pending {
            extent,
            born,
            left: freed,
            freed,
        }
    }

    fn readers(txns: &[u64]) -> Vec<Protector> {
        txns.iter().map(|&t| Protector::reader(t)).collect()
    }

    #[test]
    fn a_reader_pins_only_what_its_snapshot_sees() {
        let mut f = FreeSpace::default();
        // Written by 3, freed by 10: snapshot 5 sees it.
        f.add_pending(pending(ext(10, 2), 3, 10));
        // Written by 7, freed by 9: snapshot 5 cannot see it.
        f.add_pending(pending(ext(20, 1), 7, 9));
        f.release(&readers(&[5, 10]));
        assert_eq!(f.reusable().collect::<Vec<_>>(), vec![ext(20, 1)]);
        assert_eq!(f.held_by(Protector::reader(5)), 2);
        assert_eq!(f.visible_to(Protector::reader(5)), 2);
        // The reader ends: the protector list no longer holds 5.
        f.release(&readers(&[10]));
        assert_eq!(f.pending_pages(), 0);
        assert_eq!(f.reusable_pages(), 3);
    }

    #[test]
    fn an_extent_moves_to_the_next_protector_that_sees_it() {
        let mut f = FreeSpace::default();
        f.add_pending(pending(ext(4, 1), 2, 9));
        f.release(&readers(&[3, 6, 12]));
        assert_eq!(f.held_by(Protector::reader(3)), 1);
        f.release(&readers(&[6, 12]));
        assert_eq!(f.held_by(Protector::reader(6)), 1);
        f.release(&readers(&[12]));
        assert_eq!(f.reusable_pages(), 1);
    }

    #[test]
    fn a_reader_of_this_process_does_not_hold_what_its_trees_left() {
        let mut f = FreeSpace::default();
        // Written by 3, left by logged commit 6, freed by checkpoint 9.
        f.add_pending(Pending {
            extent: ext(40, 3),
            born: 3,
            left: 6,
            freed: 9,
        });
        // A reader of 7 (after the logged commit) does not read it...
        f.release(&readers(&[7]));
        assert_eq!(f.reusable_pages(), 3);
        f.add_pending(Pending {
            extent: ext(50, 2),
            born: 3,
            left: 6,
            freed: 9,
        });
        // ...one of 5 does; so does a replay registered at 7 or 8 (the
        // durable commit, or a read-only process rebuilding 7 on the file).
        f.release(&[Protector::reader(5), Protector::reader(7)]);
        assert_eq!(f.held_by(Protector::reader(5)), 2);
        f.release(&[Protector::reader(7), Protector::replay(8)]);
        assert_eq!(f.held_by(Protector::replay(8)), 2);
        assert_eq!(f.visible_to(Protector::reader(7)), 0);
        assert_eq!(f.visible_to(Protector::replay(7)), 2);
        f.release(&[Protector::reader(7), Protector::replay(9)]);
        assert_eq!(f.pending_pages(), 0);
        assert_eq!(f.reusable_pages(), 5);
    }

    #[test]
    fn a_reader_sorts_before_a_replay_of_its_txn() {
        assert!(Protector::reader(7) < Protector::replay(7));
        assert!(Protector::replay(7) < Protector::reader(8));
        assert_eq!(Protector::replay(7).txn(), 7);
        assert!(Protector::replay(7).is_replay() && !Protector::reader(7).is_replay());
    }

    #[test]
    fn roll_back_forgets_the_failed_commit() {
        let mut f = FreeSpace::default();
        f.add_reusable(ext(2, 10));
        let s = f.take_contiguous(4).unwrap();
        f.add_pending(pending(ext(30, 1), 1, 5));
        f.roll_back(5, &[ext(s, 4)]);
        assert_eq!(f.pending_pages(), 0);
        assert_eq!(f.reusable().collect::<Vec<_>>(), vec![ext(2, 10)]);
    }

    /// Blobs placed ahead of their commit take a best-fit free extent,
    /// else the file's end past the base; an aborted transaction's free
    /// extents come back whole and its pages past the end are forgotten.
    #[test]
    fn pages_taken_ahead_come_back_unless_committed() {
        let mut f = FreeSpace::default();
        f.add_reusable(ext(10, 1));
        f.add_reusable(ext(20, 3));
        let mut ahead = TakenAhead::default();
        assert_eq!(ahead.run(&mut f, 100, 2), 20, "best fit");
        assert_eq!(ahead.run(&mut f, 100, 2), 100, "no extent of 2 left");
        assert_eq!(ahead.run(&mut f, 100, 1), 10);
        assert_eq!(ahead.run(&mut f, 100, 1), 22);
        assert_eq!(ahead.run(&mut f, 100, 3), 102, "after the last run");
        assert_eq!(ahead.file_end, 105);
        assert_eq!(ahead.taken, [ext(20, 2), ext(10, 1), ext(22, 1)]);
        assert_eq!(ahead.runs.len(), 5);
        assert_eq!(f.reusable_pages(), 0);
        ahead.give_back(&mut f);
        assert!(ahead.is_empty() && ahead.taken.is_empty() && ahead.file_end == 0);
        assert_eq!(
            f.reusable().collect::<Vec<_>>(),
            vec![ext(10, 1), ext(20, 3)]
        );
        assert_eq!(ahead.run(&mut f, 100, 4), 100, "the end forgotten");
    }

    #[test]
    fn free_map_removes_across_adjacent_extents() {
        let mut m = FreeMap::default();
        assert!(m.insert(ext(10, 5), 0, 0));
        assert!(m.insert(ext(15, 5), 2, 4));
        assert!(!m.insert(ext(12, 1), 1, 2), "overlap");
        assert!(!m.remove(ext(18, 4)), "20 and 21 are not free");
        assert!(m.remove(ext(12, 6)));
        let f = m.into_free_space();
        assert_eq!(f.reusable().collect::<Vec<_>>(), vec![ext(10, 2)]);
        assert_eq!(f.pending_pages(), 2);
    }

    /// Branch pages fill the branch regions lowest first, then new regions
    /// at the file's end (aligned; the pages skipped and those left unused
    /// reported); leaves never take a region's pages, which come back to
    /// it when freed; the reusable extents seen from outside are merged
    /// across the line between the two kinds.
    #[test]
    fn branch_regions_hold_branches_only() {
        let mut f = FreeSpace::default();
        f.set_region_pages(8);
        let mut taken = Vec::new();
        let (mut regions, mut unused) = (Vec::new(), Vec::new());
        // A file too small for regions: branches go where leaves do.
        let mut alloc = Allocator {
            free: &mut f,
            page_count: 60,
            taken: &mut taken,
        };
        assert_eq!(
            alloc.branch_pages(2, 10, &mut regions, &mut unused),
            [ext(60, 2)]
        );
        assert!(regions.is_empty() && unused.is_empty());
        // Past 32 regions: a new region at the next boundary.
        alloc.page_count = 259;
        assert_eq!(
            alloc.branch_pages(3, 10, &mut regions, &mut unused),
            [ext(264, 3)]
        );
        assert_eq!(regions, [264]);
        assert_eq!(unused, [ext(259, 5), ext(267, 5)]);
        assert_eq!(alloc.page_count, 272);
        // The unused pages come back as free: those of the region stay its.
        for e in unused.drain(..) {
            f.add_reusable(e);
        }
        assert_eq!(f.reusable_pages(), 10);
        assert_eq!(f.reusable().collect::<Vec<_>>(), [ext(259, 5), ext(267, 5)]);
        let mut alloc = Allocator {
            free: &mut f,
            page_count: 272,
            taken: &mut taken,
        };
        assert_eq!(
            alloc.pages(6),
            [ext(259, 5), ext(272, 1)],
            "leaves skip the region"
        );
        assert_eq!(
            alloc.branch_pages(2, 10, &mut regions, &mut unused),
            [ext(267, 2)]
        );
        // Freed pages straddling the region's edge split at it, and the
        // region's lowest free pages go first.
        f.add_reusable(ext(264, 3));
        f.add_reusable(ext(272, 1));
        assert_eq!(
            f.reusable().collect::<Vec<_>>(),
            [ext(264, 3), ext(269, 4)],
            "merged across the edge"
        );
        let mut alloc = Allocator {
            free: &mut f,
            page_count: 273,
            taken: &mut taken,
        };
        assert_eq!(alloc.pages(2), [ext(272, 1), ext(273, 1)], "page 272 only");
        assert_eq!(
            alloc.branch_pages(5, 10, &mut regions, &mut unused),
            [ext(264, 3), ext(269, 2)]
        );
        // A region's last free page, then a new one (the end is aligned).
        alloc.page_count = 288;
        assert_eq!(
            alloc.branch_pages(9, 2, &mut regions, &mut unused),
            [ext(271, 1), ext(288, 8)]
        );
        assert_eq!(regions, [264, 288]);
        assert!(unused.is_empty());
        // A failed commit's new region is forgotten; the one before stays.
        let mut g = f.clone();
        g.forget_zones_from(288);
        assert_eq!(g.zones().collect::<Vec<_>>(), [264]);
        let mut alloc = Allocator {
            free: &mut f,
            page_count: 296,
            taken: &mut taken,
        };
        // No room left in the meta for another region: as leaves.
        assert_eq!(
            alloc.branch_pages(3, 2, &mut regions, &mut unused),
            [ext(296, 3)]
        );
        assert_eq!(f.zone_count(), 2);
    }

    /// A loaded free space takes back the regions a commit named: the
    /// reusable pages inside them become theirs, those around stay plain;
    /// another region size forgets them.
    #[test]
    fn adopted_regions_take_their_free_pages() {
        let mut f = FreeSpace::default();
        f.add_reusable(ext(261, 20));
        f.add_reusable(ext(296, 2));
        f.adopt_zones(8, &[272, 296]);
        assert_eq!(f.zone_count(), 2);
        let mut taken = Vec::new();
        let mut alloc = Allocator {
            free: &mut f,
            page_count: 320,
            taken: &mut taken,
        };
        assert_eq!(alloc.pages(11), [ext(261, 11)], "pages 261..272 are plain");
        let (mut regions, mut unused) = (Vec::new(), Vec::new());
        assert_eq!(
            alloc.branch_pages(11, 10, &mut regions, &mut unused),
            [ext(272, 8), ext(296, 2), ext(320, 1)]
        );
        assert_eq!(f.reusable().collect::<Vec<_>>(), [ext(280, 1)]);
        f.add_reusable(ext(272, 2));
        f.set_region_pages(16);
        assert_eq!(f.zone_count(), 0);
        let mut alloc = Allocator {
            free: &mut f,
            page_count: 336,
            taken: &mut taken,
        };
        assert_eq!(alloc.pages(3), [ext(272, 2), ext(280, 1)], "plain again");
    }
}
