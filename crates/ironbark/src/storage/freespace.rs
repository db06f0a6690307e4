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

use std::collections::{BTreeMap, BTreeSet};

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

/// An extent waiting for the commits that can see it to be gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PendingExtent {
    pub(crate) freed_by: u64,
    pub(crate) extent: Extent,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct FreeSpace {
    /// Reusable extents by start page.
    by_start: BTreeMap<u64, u64>,
    /// The same extents by (length, start), for best-fit allocation.
    by_len: BTreeSet<(u64, u64)>,
    reusable_pages: u64,
    /// Pending extents in order of `freed_by` (commits free in txn order).
    pending: Vec<PendingExtent>,
    pending_pages: u64,
}

impl FreeSpace {
    pub(crate) fn reusable_pages(&self) -> u64 {
        self.reusable_pages
    }

    pub(crate) fn pending_pages(&self) -> u64 {
        self.pending_pages
    }

    /// Pages pending whose `freed_by` is above `txn` (held back by readers or
    /// by durability).
    pub(crate) fn pending_pages_after(&self, txn: u64) -> u64 {
        self.pending
            .iter()
            .filter(|p| p.freed_by > txn)
            .map(|p| p.extent.len)
            .sum()
    }

    /// Pages pending whose `freed_by` is in `(after, up_to]`.
    pub(crate) fn pending_pages_between(&self, after: u64, up_to: u64) -> u64 {
        self.pending
            .iter()
            .filter(|p| p.freed_by > after && p.freed_by <= up_to)
            .map(|p| p.extent.len)
            .sum()
    }

    pub(crate) fn reusable(&self) -> impl Iterator<Item = Extent> + '_ {
        self.by_start
            .iter()
            .map(|(&start, &len)| Extent { start, len })
    }

    pub(crate) fn pending(&self) -> &[PendingExtent] {
        &self.pending
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

    /// Records pages freed by commit `freed_by`, merging with the previous
    /// pending extent of the same commit when they touch.
    pub(crate) fn add_pending(&mut self, freed_by: u64, extent: Extent) {
        assert!(extent.len > 0, "empty extent");
        if let Some(last) = self.pending.last_mut() {
            assert!(
                last.freed_by <= freed_by,
                "pending extents out of txn order"
            );
            if last.freed_by == freed_by && last.extent.end() == extent.start {
                last.extent.len += extent.len;
                self.pending_pages += extent.len;
                return;
            }
        }
        self.pending.push(PendingExtent { freed_by, extent });
        self.pending_pages += extent.len;
    }

    /// Makes reusable every pending extent freed by a commit `<= txn`.
    pub(crate) fn release(&mut self, txn: u64) {
        let ready = self.pending.partition_point(|p| p.freed_by <= txn);
        if ready == 0 {
            return;
        }
        let released: Vec<PendingExtent> = self.pending.drain(..ready).collect();
        for p in released {
            self.pending_pages -= p.extent.len;
            self.add_reusable(p.extent);
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
