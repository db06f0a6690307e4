//! Free space: which pages may be written, and which are waiting.
//!
//! Invariants:
//! - A page is in at most one place: a reusable extent, a pending extent, or
//!   in use by the newest commit (`db::check` verifies this on disk).
//! - A *pending* extent was freed by commit `freed_by`: snapshots older than
//!   `freed_by` may still read it, and so may the durable fallback commit.
//!   It becomes *reusable* only through [`FreeSpace::release`], which the
//!   writer calls with the oldest txn that no live snapshot and no durable
//!   meta still needs.
//! - Reusable extents are kept merged (no two touch), so the allocator sees
//!   the longest contiguous runs.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// A run of `len` pages starting at page `start`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Extent {
    pub(crate) start: u64,
    pub(crate) len: u64,
}

impl Extent {
    pub(crate) fn end(&self) -> u64 {
        self.start + self.len
    }
}

/// The extents one commit freed, waiting for the snapshots that can see
/// them (and the durable fallback commit) to be gone.
#[derive(Clone, Debug, PartialEq, Eq)]
struct PendingGroup {
    freed_by: u64,
    extents: Vec<Extent>,
    pages: u64,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct FreeSpace {
    /// Reusable extents by start page.
    by_start: BTreeMap<u64, u64>,
    /// The same extents by (length, start), for best-fit allocation.
    by_len: BTreeSet<(u64, u64)>,
    reusable_pages: u64,
    /// Pending extents, one group per freeing commit, in txn order.
    pending: VecDeque<PendingGroup>,
    /// The same extents by start page, for encoding in page order.
    pending_by_start: BTreeMap<u64, u64>,
    pending_pages: u64,
}

impl FreeSpace {
    pub(crate) fn reusable_pages(&self) -> u64 {
        self.reusable_pages
    }

    pub(crate) fn pending_pages(&self) -> u64 {
        self.pending_pages
    }

    /// Extents pending, over all groups.
    pub(crate) fn pending_extents(&self) -> usize {
        self.pending_by_start.len()
    }

    /// Pages pending whose `freed_by` is above `txn` (held back by readers or
    /// by durability).
    pub(crate) fn pending_pages_after(&self, txn: u64) -> u64 {
        self.pending
            .iter()
            .filter(|g| g.freed_by > txn)
            .map(|g| g.pages)
            .sum()
    }

    /// Pages pending whose `freed_by` is in `(after, up_to]`.
    pub(crate) fn pending_pages_between(&self, after: u64, up_to: u64) -> u64 {
        self.pending
            .iter()
            .filter(|g| g.freed_by > after && g.freed_by <= up_to)
            .map(|g| g.pages)
            .sum()
    }

    /// Every free extent (reusable and pending) in page order, merged, in
    /// time linear in the number of extents.
    pub(crate) fn all_merged(&self) -> Vec<Extent> {
        let mut out: Vec<Extent> =
            Vec::with_capacity(self.by_start.len() + self.pending_by_start.len());
        let mut a = self.by_start.iter().peekable();
        let mut b = self.pending_by_start.iter().peekable();
        loop {
            let next = match (a.peek(), b.peek()) {
                (Some(x), Some(y)) if x.0 <= y.0 => a.next(),
                (Some(_), Some(_)) => b.next(),
                (Some(_), None) => a.next(),
                (None, Some(_)) => b.next(),
                (None, None) => break,
            };
            let (&start, &len) = next.expect("peeked");
            match out.last_mut() {
                Some(last) if last.end() == start => last.len += len,
                _ => out.push(Extent { start, len }),
            }
        }
        out
    }

    /// The reusable extents, in page order.
    pub(crate) fn reusable(&self) -> impl Iterator<Item = Extent> + '_ {
        self.by_start
            .iter()
            .map(|(&start, &len)| Extent { start, len })
    }

    /// The pending groups, oldest first: the freeing txn and its extents
    /// (in page order).
    pub(crate) fn pending_groups(&self) -> impl Iterator<Item = (u64, &[Extent])> + '_ {
        self.pending.iter().map(|g| (g.freed_by, &g.extents[..]))
    }

    /// Rebuilds free space from decoded parts: reusable extents, and pending
    /// groups in increasing txn order. `None` if two extents overlap or
    /// the groups are out of order (a damaged state blob).
    pub(crate) fn from_parts(
        reusable: Vec<Extent>,
        pending: Vec<(u64, Vec<Extent>)>,
    ) -> Option<FreeSpace> {
        let mut all: Vec<Extent> = reusable.clone();
        all.extend(pending.iter().flat_map(|g| g.1.iter().copied()));
        all.sort_unstable();
        if all.iter().any(|e| e.len == 0) || all.windows(2).any(|w| w[0].end() > w[1].start) {
            return None;
        }
        if pending.windows(2).any(|w| w[0].0 >= w[1].0) {
            return None;
        }
        let mut free = FreeSpace::default();
        for e in reusable {
            free.add_reusable(e);
        }
        for (txn, extents) in pending {
            for e in extents {
                free.add_pending(txn, e);
            }
        }
        Some(free)
    }

    /// Adds a reusable extent, merging it with its neighbours.
    pub(crate) fn add_reusable(&mut self, extent: Extent) {
        assert!(extent.len > 0, "empty extent");
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

    fn remove_reusable(&mut self, start: u64, len: u64) {
        self.by_start.remove(&start);
        self.by_len.remove(&(len, start));
        self.reusable_pages -= len;
    }

    /// Records pages freed by commit `freed_by` (commits free in txn order).
    pub(crate) fn add_pending(&mut self, freed_by: u64, extent: Extent) {
        assert!(extent.len > 0, "empty extent");
        match self.pending.back_mut() {
            Some(g) if g.freed_by == freed_by => {
                g.extents.push(extent);
                g.pages += extent.len;
            }
            last => {
                assert!(
                    last.is_none_or(|g| g.freed_by < freed_by),
                    "pending extents out of txn order"
                );
                self.pending.push_back(PendingGroup {
                    freed_by,
                    extents: vec![extent],
                    pages: extent.len,
                });
            }
        }
        let clash = self.pending_by_start.insert(extent.start, extent.len);
        assert!(clash.is_none(), "page freed twice");
        self.pending_pages += extent.len;
    }

    fn pop_pending(&mut self, g: &PendingGroup) {
        for e in &g.extents {
            self.pending_by_start.remove(&e.start);
        }
        self.pending_pages -= g.pages;
    }

    /// Makes reusable every pending extent freed by a commit `<= txn`.
    pub(crate) fn release(&mut self, txn: u64) {
        while self.pending.front().is_some_and(|g| g.freed_by <= txn) {
            let g = self.pending.pop_front().expect("front");
            self.pop_pending(&g);
            for e in g.extents {
                self.add_reusable(e);
            }
        }
    }

    /// Undoes a commit `txn` that failed: its freed pages are in use again,
    /// and the pages it took from free space are free again.
    pub(crate) fn roll_back(&mut self, txn: u64, taken: &[Extent]) {
        if self.pending.back().is_some_and(|g| g.freed_by == txn) {
            let g = self.pending.pop_back().expect("back");
            self.pop_pending(&g);
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
