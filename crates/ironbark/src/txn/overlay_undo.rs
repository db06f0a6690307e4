//! The undo list of a write transaction's value overlays
//! (`storage::overlay`, `txn::overlaid`): where each overlay it appended
//! to stood before, so that its entries are cut off unless it commits.
//!
//! Invariant: the cut happens while the writer lock is still held (the
//! list drops inside `commit::commit`, or as a field of the transaction
//! declared before its `WriterGuard`), so no other transaction and no
//! checkpoint ever sees an entry of a transaction that did not commit.
//! Apart from `txn/write.rs`, so that it does not import `txn/overlaid.rs`,
//! which adds methods to `WriteTxn`.

use crate::storage::arena::Arena;
use crate::storage::overlay::Mark;

/// Puts that found no leaf to overlay after which a transaction whose
/// looks mostly miss (four times as often as they find one) stops looking:
/// each look is a descent, wasted on an insert.
const MISSES_BEFORE_GIVING_UP: u64 = 8;

/// The overlay entries a write transaction appended, to cut them off
/// unless it commits (see the module doc).
#[derive(Default)]
pub(crate) struct OverlayUndo<'db> {
    /// The process's arena (`Shared::arena`, set once): borrowed, not
    /// counted, since an atomic count here would wait for the append's
    /// stores to reach the cache.
    arena: Option<&'db Arena>,
    /// (the overlay's unit, its mark before the first append), in
    /// a vector the writer lends each transaction and takes back at
    /// commit (`with_buffer`, `take_buffer`): no allocation per commit,
    /// and a transaction that moves by value (a `WriteTxn`, its
    /// `Changes`) moves three words, where 16 marks kept inline made
    /// every single-put commit copy 384 bytes more at each of its moves.
    marks: Vec<(u64, Mark)>,
    /// Values overlaid (inserts among them).
    pub(crate) overlaid: u64,
    /// Keys inserted beside their leaves.
    pub(crate) inserted: u64,
    misses: u64,
}

impl<'db> OverlayUndo<'db> {
    /// An empty list whose marks go into `buffer` (emptied).
    pub(crate) fn with_buffer(mut buffer: Vec<(u64, Mark)>) -> Self {
        buffer.clear();
        OverlayUndo {
            marks: buffer,
            ..Default::default()
        }
    }

    /// The marks' vector back, for the next transaction, once `keep` made
    /// the entries stay (so there is nothing left to cut).
    pub(crate) fn take_buffer(&mut self) -> Vec<(u64, Mark)> {
        assert!(self.marks.is_empty(), "the buffer of a list still to cut");
        std::mem::take(&mut self.marks)
    }

    /// Whether the transaction stopped looking for leaves to overlay.
    pub(crate) fn gave_up(&self) -> bool {
        self.misses >= MISSES_BEFORE_GIVING_UP && self.misses > 4 * self.overlaid
    }

    /// Records an append to the overlay in unit `unit` (an arena
    /// leaf's or a file leaf's), which stood at `mark`;
    /// `first` when the transaction had appended nothing to it before (the
    /// caller knows in one load: the overlay's newest entry was not the
    /// transaction's, `OverlayPage::newest_txn`), whose mark is the one to
    /// cut back to. The order of the marks does not matter: each names
    /// another unit.
    pub(crate) fn record(&mut self, arena: &'db Arena, unit: u64, mark: Mark, first: bool) {
        self.arena = Some(arena);
        if first {
            debug_assert!(!self.marks.iter().any(|m| m.0 == unit));
            self.marks.push((unit, mark));
        }
        self.overlaid += 1;
    }

    /// The overlay in `from` moved to `to` (`Arena::move_file_overlay`),
    /// which stood at `mark` before this transaction's entries: giving the
    /// transaction up cuts `to` back to it. `from` is forgotten: it
    /// retired, so its slot may be handed out again before this
    /// transaction ends, and no snapshot from this transaction's on reads
    /// it, so its entries of this transaction need no cut. `recorded`:
    /// whether the list holds a mark of `from` (the transaction appended to
    /// it before); looked for from the end, where a unit moved up again
    /// in the same put lies (a scan of every mark at each move made a
    /// random fill's commits of 1,000 puts quadratic in their overlays).
    pub(crate) fn moved(
        &mut self,
        arena: &'db Arena,
        from: u64,
        to: u64,
        mark: Mark,
        recorded: bool,
    ) {
        self.arena = Some(arena);
        if recorded {
            if let Some(i) = self.marks.iter().rposition(|m| m.0 == from) {
                self.marks.swap_remove(i);
            }
        }
        debug_assert!(!self.marks.iter().any(|m| m.0 == from || m.0 == to));
        self.marks.push((to, mark));
    }

    /// The overlays it appended to: the leaves it did not copy.
    pub(crate) fn leaves(&self) -> u64 {
        self.marks.len() as u64
    }

    /// A put found no leaf to overlay.
    pub(crate) fn missed(&mut self) {
        self.misses += 1;
    }

    /// The transaction committed: its entries stay. Returns how many it
    /// overlaid (for `CommitCounters::values_overlaid`).
    pub(crate) fn keep(&mut self) -> u64 {
        self.marks.clear();
        self.overlaid
    }
}

impl Drop for OverlayUndo<'_> {
    fn drop(&mut self) {
        let Some(arena) = self.arena else {
            return;
        };
        for &(unit, mark) in self.marks.iter().rev() {
            // Attached until its leaf is superseded, which only a commit
            // of this transaction or a later one can do.
            let page = arena
                .overlay_in(unit)
                .expect("an overlay appended to lies in the arena");
            page.cut(mark);
        }
    }
}
