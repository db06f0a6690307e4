//! The reader table: one cache-line slot per live read snapshot, holding the
//! snapshot's txn id (0 = free). The writer scans it to find the oldest
//! snapshot still alive.
//!
//! Protocol (Dekker-style, all SeqCst): a reader stores the txn of the
//! snapshot it loaded into its slot, then re-reads the published txn; if it
//! changed, it retries. The writer publishes a new txn before it scans the
//! slots. Either the writer sees the reader's slot, or the reader sees the
//! new txn and retries, so no page a reader can see is ever reused.
//! Only the owning thread of a slot writes it; claiming uses a CAS.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

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

thread_local! {
    /// Where this thread starts looking for a free slot, so threads spread
    /// over the table instead of fighting over slot 0.
    static HINT: Cell<usize> = const { Cell::new(usize::MAX) };
}

static NEXT_HINT: AtomicUsize = AtomicUsize::new(0);

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
        let start = HINT.with(|h| {
            if h.get() == usize::MAX {
                h.set(NEXT_HINT.fetch_add(1, Ordering::Relaxed));
            }
            h.get()
        }) % n;
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

    /// Records that slot `i` reads snapshot `txn`.
    pub(crate) fn set(&self, i: usize, txn: u64) {
        debug_assert!(txn != 0 && txn != CLAIMED);
        self.slots[i].0.store(txn, Ordering::SeqCst);
    }

    pub(crate) fn release(&self, i: usize) {
        let old = self.slots[i].0.swap(0, Ordering::Release);
        assert!(old != 0, "reader slot released twice");
        self.live.fetch_sub(1, Ordering::Relaxed);
    }

    /// The oldest snapshot txn held by a reader, if any.
    pub(crate) fn oldest(&self) -> Option<u64> {
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
