//! The reader table: one cache-line slot per live read snapshot, holding the
//! snapshot's txn id (0 = free). The writer scans it to find the oldest
//! snapshot still alive.
//!
//! Protocol (Dekker-style, with sequentially consistent fences): a reader
//! stores the txn of the snapshot it loaded into its slot, fences, then
//! re-reads the published txn; if it changed, it retries. The writer
//! publishes a new txn, and later fences before it scans the slots. In the
//! total order of the two fences, either the writer's comes first (then the
//! reader sees the new txn and retries) or the reader's does (then the
//! writer sees the reader's slot): no page a reader can see is ever reused.
//! `loom` checks this (`loom_tests` below).
//! Only the owning thread of a slot writes it; claiming uses a CAS.

#[cfg(not(loom))]
use std::cell::Cell;

use crate::sync::{fence, AtomicU64, AtomicUsize, Ordering};

use crate::error::{Error, Result};

/// A slot being claimed: not yet holding a snapshot.
const CLAIMED: u64 = u64::MAX;

#[repr(align(64))]
struct Slot(AtomicU64);

pub(crate) struct ReaderTable {
    slots: Box<[Slot]>,
    /// Slots in use, for stats and a fast "no readers" check.
    live: AtomicUsize,
}

#[cfg(not(loom))]
thread_local! {
    /// Where this thread starts looking for a free slot, so threads spread
    /// over the table instead of fighting over slot 0.
    static HINT: Cell<usize> = const { Cell::new(usize::MAX) };
}

#[cfg(not(loom))]
static NEXT_HINT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The slot this thread tries first.
#[cfg(not(loom))]
fn start_hint() -> usize {
    HINT.with(|h| {
        if h.get() == usize::MAX {
            h.set(NEXT_HINT.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        }
        h.get()
    })
}

#[cfg(loom)]
fn start_hint() -> usize {
    0
}

impl ReaderTable {
    pub(crate) fn new(max_readers: usize) -> ReaderTable {
        assert!(max_readers > 0);
        ReaderTable {
            slots: (0..max_readers).map(|_| Slot(AtomicU64::new(0))).collect(),
            live: AtomicUsize::new(0),
        }
    }

    pub(crate) fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Claims a free slot.
    pub(crate) fn claim(&self) -> Result<usize> {
        let n = self.slots.len();
        let start = start_hint() % n;
        for k in 0..n {
            let i = (start + k) % n;
            let slot = &self.slots[i].0;
            if slot.load(Ordering::Relaxed) == 0
                && slot
                    .compare_exchange(0, CLAIMED, Ordering::SeqCst, Ordering::Relaxed)
                    .is_ok()
            {
                self.live.fetch_add(1, Ordering::SeqCst);
                return Ok(i);
            }
        }
        Err(Error::ReadersFull { max: n })
    }

    /// Records in slot `i` the snapshot that `load` returns, retrying until
    /// the published txn is still that snapshot's after the slot is set.
    pub(crate) fn register<S>(
        &self,
        i: usize,
        mut load: impl FnMut() -> S,
        txn_of: impl Fn(&S) -> u64,
        published_txn: &AtomicU64,
    ) -> S {
        loop {
            let snapshot = load();
            let txn = txn_of(&snapshot);
            debug_assert!(txn != 0 && txn != CLAIMED);
            self.slots[i].0.store(txn, Ordering::SeqCst);
            fence(Ordering::SeqCst);
            if published_txn.load(Ordering::SeqCst) == txn {
                return snapshot;
            }
        }
    }

    pub(crate) fn release(&self, i: usize) {
        let old = self.slots[i].0.swap(0, Ordering::Release);
        assert!(old != 0, "reader slot released twice");
        self.live.fetch_sub(1, Ordering::Relaxed);
    }

    /// The oldest snapshot txn held by a reader, if any. Call only after
    /// the newest commit is published.
    pub(crate) fn oldest(&self) -> Option<u64> {
        fence(Ordering::SeqCst);
        if self.live.load(Ordering::SeqCst) == 0 {
            // A reader increments `live` before it stores its txn, and
            // re-checks the published txn after; see the module doc.
            return None;
        }
        self.slots
            .iter()
            .map(|s| s.0.load(Ordering::SeqCst))
            .filter(|&t| t != 0 && t != CLAIMED)
            .min()
    }

    pub(crate) fn live(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }
}

/// Model check of the publication protocol: whatever the interleaving, a
/// writer that scanned the table after publishing txn 2 either sees the
/// reader's snapshot, or the reader sees txn 2 and retries. So pages freed
/// by commit 2 (visible to snapshot 1) are never reused under a reader of
/// snapshot 1.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    #[test]
    fn loom_reader_registration_vs_reclamation() {
        loom::model(|| {
            let table = Arc::new(ReaderTable::new(2));
            let published = Arc::new(AtomicU64::new(1));
            let reader = {
                let (table, published) = (table.clone(), published.clone());
                loom::thread::spawn(move || {
                    let slot = table.claim().unwrap();
                    table.register(
                        slot,
                        || published.load(Ordering::SeqCst),
                        |t| *t,
                        &published,
                    )
                })
            };
            // The writer publishes commit 2, then decides whether pages
            // freed by commit 2 may be reused: only if no snapshot < 2.
            published.store(2, Ordering::SeqCst);
            let may_reuse = table.oldest().is_none_or(|o| o >= 2);
            let reader_snapshot = reader.join().unwrap();
            assert!(
                !(may_reuse && reader_snapshot < 2),
                "pages reused under a live snapshot"
            );
        });
    }
}
