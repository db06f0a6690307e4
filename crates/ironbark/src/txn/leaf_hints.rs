//! What `WriteTxn::put_many`'s look ahead (`txn::overlaid`) leaves its
//! puts: each key's leaf as the look ahead found it (`LeafHint`), and the
//! leaves looks ahead found lately (`RecentLeaves`, kept by the writer
//! across transactions), which say when a look ahead would hide no miss.
//! Apart from `txn/overlaid.rs`, which adds methods to `WriteTxn`, so that
//! `txn/write.rs` and `txn/shared.rs` do not import it.
//!
//! Invariant: a put takes a hint only while it holds (`LeafHint::holds`):
//! the hinted leaf is the one a descent of its key would reach.

use crate::storage::freespace::Freed;

/// The leaf of a key of tree `tree`, (page number, txn) as `leaf_ref`
/// gives it, found by a look ahead (`WriteTxn::look_ahead`) when the
/// transaction had freed `freed_at` pages.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LeafHint {
    tree: usize,
    leaf: (u64, u64),
    freed_at: usize,
}

/// Leaves the looks ahead found lately, one page number per slot chosen
/// by a hash of it (a miss evicts): a batch whose leaves were nearly all
/// found lately touches leaves that are in cache (a region the puts keep
/// returning to: seed 003's first transactions, a small tree, sorted
/// keys), where a look ahead costs instructions and hides no miss. After
/// such a batch the next few go without one.
#[derive(Default)]
pub(crate) struct RecentLeaves {
    /// Empty until the first look ahead (no memory for a writer that
    /// never batches).
    slots: Vec<u64>,
    /// Batches to go without a look ahead.
    skip: u32,
}

/// Slots of [`RecentLeaves`]: 256 leaves are 1 MiB of 4 KiB pages, about
/// what a core's L2 cache holds.
const RECENT_LEAVES: usize = 256;

/// Batches a look ahead that found its leaves recent skips after it.
const RECENT_SKIP: u32 = 7;

impl RecentLeaves {
    /// Whether the next batch goes without a look ahead (counted).
    #[inline]
    pub(crate) fn skips(&mut self) -> bool {
        let skip = self.skip > 0;
        self.skip = self.skip.saturating_sub(1);
        skip
    }

    /// Records a look ahead's leaves; if half of them were found lately,
    /// the next `RECENT_SKIP` batches go without one. Half: a put whose
    /// pages are in cache pays about 540 instructions for a look ahead, one
    /// that misses saves a chain of misses worth about twice that.
    pub(crate) fn found(&mut self, leaves: &[Option<(u64, u64)>]) {
        if self.slots.is_empty() {
            self.slots = vec![0; RECENT_LEAVES];
        }
        let mut recent = 0;
        for &(pgno, _) in leaves.iter().flatten() {
            // Fibonacci hashing: page numbers are dense, arena ones carry
            // a high bit.
            let slot = (pgno.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as usize;
            recent += usize::from(self.slots[slot] == pgno);
            self.slots[slot] = pgno;
        }
        if recent * 2 >= leaves.len() {
            self.skip = RECENT_SKIP;
        }
    }
}

impl LeafHint {
    #[inline]
    pub(crate) fn new(tree: usize, leaf: (u64, u64), freed_at: usize) -> LeafHint {
        LeafHint {
            tree,
            leaf,
            freed_at,
        }
    }

    /// The leaf: (page number, txn).
    #[inline]
    pub(crate) fn leaf(&self) -> (u64, u64) {
        self.leaf
    }

    /// Whether it still names the leaf a descent of its key into tree `i`
    /// reaches, `freed` being the pages the transaction freed: no page
    /// freed since the look ahead is the leaf. A committed leaf stays
    /// where the key leads until a put copies it (the copy frees it): a
    /// key changes leaves only when its leaf splits, which a put does to a
    /// copy, and puts merge nothing; a dirty leaf stays dirty (a put that
    /// finds one copies nothing into the overlay, whichever dirty leaf it
    /// is).
    #[inline]
    pub(crate) fn holds(&self, i: usize, freed: &[Freed]) -> bool {
        self.tree == i
            && freed
                .get(self.freed_at..)
                .is_some_and(|since| since.iter().all(|f| f.extent.start != self.leaf.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch whose leaves were half found lately makes the next
    /// `RECENT_SKIP` batches go without a look ahead, then one looks
    /// again; batches of new leaves never skip.
    #[test]
    fn batches_in_a_recent_region_skip_their_look_ahead_for_a_while() {
        let mut recent = RecentLeaves::default();
        let leaves = |from: u64| -> Vec<Option<(u64, u64)>> {
            (from..from + 16).map(|p| Some((p, 1))).collect()
        };
        // New leaves, batch after batch: always a look.
        for batch in 0..50 {
            assert!(!recent.skips(), "batch {batch}");
            recent.found(&leaves(1_000 + 16 * batch));
        }
        // Half of them seen before (in the last batch): the next
        // RECENT_SKIP batches skip.
        let last = 1_000 + 16 * 49;
        let mut half = leaves(last);
        half[8..].copy_from_slice(&leaves(90_000)[8..]);
        assert!(!recent.skips());
        recent.found(&half);
        for batch in 0..RECENT_SKIP {
            assert!(recent.skips(), "batch {batch} after a recent one");
        }
        assert!(!recent.skips(), "a look again after the skipped batches");
        // Fewer than half seen before: no skip. Leaves whose walk failed
        // (`None`) count as not found lately.
        let mut few = leaves(last);
        few[7..].copy_from_slice(&leaves(200_000)[7..]);
        recent.found(&few);
        assert!(!recent.skips());
        let mut failed = leaves(last);
        failed[7..].fill(None);
        recent.found(&failed);
        assert!(!recent.skips());
    }
}
