//! Read-side handles on an open database, striped by thread, so that
//! beginning and ending a read transaction writes no cache line that the
//! other reading threads write too.
//!
//! A read transaction keeps two things alive: the instance (`Shared`) and
//! the snapshot it reads. Holding each by an `Arc` cloned per transaction
//! cost four read-modify-writes per transaction on two reference counts
//! that every reading thread writes; with two reader threads those lines
//! moved between the cores on every read (readrandom scaled 1.74x from one
//! thread to two, LMDB's 2.2x). Instead each thread takes its handles from
//! one of [`STRIPES`] stripes, chosen by a per-thread index:
//! - a [`Stripe`] holds the instance, and a transaction holds its stripe,
//!   whose count only the threads of that stripe write;
//! - a stripe caches the newest snapshot its threads read, in a wrapper
//!   ([`StripeSnapshot`]) of its own, so that a transaction holding it
//!   writes only the wrapper's count.
//!
//! Invariants:
//! - the cache never decides what a reader sees: a cached snapshot is used
//!   only while it is the very object the instance publishes as its newest
//!   (`Shared::published`, unchanged since: the count of its changes,
//!   `Shared::published_epoch`, is the one the snapshot was cached at), by
//!   a transaction whose reader slot is registered at its txn while that
//!   txn is the newest commit (`ReaderTable::try_register`, the protocol
//!   of `txn::readers`, unchanged): the begin an uncached transaction
//!   makes;
//! - a stripe's cache is only ever replaced by a newer snapshot;
//! - the stripes hold the instance, so it closes when its last handle and
//!   its last read transaction are gone, as before.
//!
//! A transaction first borrows the snapshot the lender lends for the
//! newest txn (`txn::snapshot_lender`, no count at all); the stripes serve
//! when the lender has none for it (the moments the newest changes other
//! than by this process's publish). A stale cache then means the
//! transaction holds the snapshot's own `Arc` (one shared
//! read-modify-write each way), and a stripe caches a snapshot only when a
//! second transaction takes it, so readers do not allocate a wrapper per
//! read.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwapOption;

use crate::txn::shared::{Shared, Snapshot};
use crate::txn::snapshot_lender::Borrowed;

/// Stripes per database handle: as many reader threads as this take
/// distinct stripes (threads are numbered in the order they first read).
pub(crate) const STRIPES: usize = 16;

/// One stripe: the instance, for the transactions of its threads, and the
/// newest snapshot they read. Aligned so that its reference count (at the
/// start of its `Arc` allocation) shares a line with no other stripe's.
#[repr(align(128))]
pub(crate) struct Stripe {
    pub(crate) shared: Arc<Shared>,
    cached: ArcSwapOption<StripeSnapshot>,
    /// The epoch of the last snapshot a transaction of this stripe took
    /// uncached (`u64::MAX`: none): a second one at that epoch caches it.
    last_uncached: AtomicU64,
}

/// A snapshot as a stripe caches it: its own allocation, so that the
/// transactions holding it write this count, not the snapshot's.
#[repr(align(128))]
pub(crate) struct StripeSnapshot {
    snapshot: Arc<Snapshot>,
    /// `Shared::published_epoch` when `snapshot` was the instance's newest.
    epoch: u64,
}

impl StripeSnapshot {
    #[inline]
    pub(crate) fn txn(&self) -> u64 {
        self.snapshot.txn()
    }

    /// The snapshot.
    #[inline]
    pub(crate) fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }
}

/// What a read transaction holds of its snapshot.
pub(crate) enum SnapshotRef {
    /// Through its stripe's cache.
    Cached(Arc<StripeSnapshot>),
    /// By the snapshot's own count (the cache held another commit).
    Own(Arc<Snapshot>),
    /// Lent by this process's writer, without a count: valid while the
    /// transaction's reader slot stays registered (`txn::snapshot_lender`).
    Borrowed(Borrowed<Snapshot>),
    /// Nothing: given up (`release`), as the transaction ends.
    Released,
}

impl SnapshotRef {
    /// Gives the reference up; if it was the snapshot's last, the writer
    /// frees the snapshot (`Shared::bury`).
    pub(crate) fn release(self, shared: &Shared) {
        match self {
            SnapshotRef::Cached(wrapper) => release_wrapper(wrapper, shared),
            SnapshotRef::Own(snapshot) => shared.bury(snapshot),
            SnapshotRef::Borrowed(_) | SnapshotRef::Released => {}
        }
    }
}

/// Gives up a reference to a stripe's wrapper: the wrapper is freed here
/// (a reader allocated it), its snapshot by the writer if this was the
/// last reference (`Shared::bury`).
fn release_wrapper(wrapper: Arc<StripeSnapshot>, shared: &Shared) {
    if let Some(last) = Arc::into_inner(wrapper) {
        shared.bury(last.snapshot);
    }
}

impl std::ops::Deref for SnapshotRef {
    type Target = Snapshot;
    #[inline]
    fn deref(&self) -> &Snapshot {
        match self {
            SnapshotRef::Cached(c) => &c.snapshot,
            SnapshotRef::Own(s) => s,
            SnapshotRef::Borrowed(s) => s,
            SnapshotRef::Released => unreachable!("a released snapshot is not read"),
        }
    }
}

/// A database handle's stripes (shared by its clones).
pub(crate) struct Stripes {
    stripes: Box<[Arc<Stripe>]>,
}

impl Stripes {
    pub(crate) fn new(shared: &Arc<Shared>) -> Stripes {
        Stripes {
            stripes: (0..STRIPES)
                .map(|_| {
                    Arc::new(Stripe {
                        shared: shared.clone(),
                        cached: ArcSwapOption::empty(),
                        last_uncached: AtomicU64::new(u64::MAX),
                    })
                })
                .collect(),
        }
    }

    /// The calling thread's stripe.
    #[inline]
    pub(crate) fn for_this_thread(&self) -> &Arc<Stripe> {
        &self.stripes[thread_index() % self.stripes.len()]
    }
}

impl Stripe {
    /// The cached snapshot, if it is still the instance's newest: cached
    /// at this `Shared::published_epoch`, so `published` has not changed
    /// since (the very object, not only the same txn: recovery may publish
    /// a txn again with other pages).
    #[inline]
    pub(crate) fn cached(&self, epoch: u64) -> Option<Arc<StripeSnapshot>> {
        let guard = self.cached.load();
        match &*guard {
            Some(c) if c.epoch == epoch => Some(Arc::clone(c)),
            _ => None,
        }
    }

    /// Notes that a transaction of this stripe took `snapshot` uncached,
    /// loaded from `Shared::published` while its epoch was `epoch` before
    /// and after; the second one to take it caches it, unless a newer one
    /// is cached.
    pub(crate) fn took(&self, snapshot: &Arc<Snapshot>, epoch: u64) {
        if self.last_uncached.swap(epoch, Ordering::Relaxed) != epoch {
            return;
        }
        let wrapped = Some(Arc::new(StripeSnapshot {
            snapshot: snapshot.clone(),
            epoch,
        }));
        let previous = self.cached.rcu(|current| match current {
            Some(c) if c.epoch >= epoch => current.clone(),
            _ => wrapped.clone(),
        });
        if let Some(previous) = previous {
            release_wrapper(previous, &self.shared);
        }
    }
}

/// This thread's number, in the order threads first read (any database).
#[inline]
fn thread_index() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static INDEX: usize = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    INDEX.with(|i| *i)
}
