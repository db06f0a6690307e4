//! Snapshots lent to read transactions without a reference count: the
//! reader protocol of LMDB, applied to the snapshot object as well as to
//! its pages.
//!
//! A read transaction that held its snapshot by an `Arc` wrote the
//! snapshot's reference count twice; beside a writer that publishes a new
//! snapshot between most reads, that count's cache line moved between the
//! reader's and the writer's cores on every read, and loading the newest
//! `Arc` went through `arc_swap`'s slow path (about a fifth of the reader's
//! time in `readwhilewriting`). Here a reader writes only its own reader
//! slot: it registers at the newest txn `T` (`ReaderTable::try_register`,
//! unchanged) and then borrows the snapshot this process published for
//! `T`, which the writer keeps alive for as long as any registered slot
//! can lead to it.
//!
//! Invariants:
//! - the lender holds an `Arc` of every snapshot it ever made lendable
//!   (`Retained::lent`) until a scan of the reader table, made after that
//!   snapshot stopped being the newest, found no slot registered at its
//!   txn; only then is it freed or kept as a spare;
//! - a reader dereferences a lent snapshot only if it read it, consistently
//!   with its txn (a sequence lock: `seq` is odd while the pair changes),
//!   after registering at that very txn; so a scan that did not see the
//!   slot ran after the reader's loads, or the reader saw the newer pair
//!   and did not take the old one (the Dekker argument of `txn::readers`:
//!   every access here is `SeqCst`);
//! - the pair and `lent` change only under the `retained` mutex, so every
//!   swap is ordered before the scans that may free what it retired;
//! - a long-lived reader keeps only the snapshots of its own txn, not one
//!   per commit since.

use std::collections::VecDeque;
use std::ptr::NonNull;
use std::sync::Arc;

use crate::sync::{AtomicPtr, AtomicU64, Mutex, MutexGuard, Ordering::SeqCst, OwnLines};

use crate::txn::readers::ReaderTable;

/// Lent snapshots at which a publish first scans the reader table to free
/// those no reader can hold: a bound on what the lender keeps (beyond the
/// snapshots readers hold) while it has spares.
pub(crate) const SCAN_AT_LEAST: usize = 32;

/// Lent snapshots at which a write transaction that finds no spare scans
/// the reader table to free some: a scan reads every slot (a profile of
/// single-put overwrites at 10M records had 3.7% of its time there when
/// this was 4), so it frees a batch.
const REFILL_AT: usize = 16;

/// Freed snapshots kept for the next publishes to reuse (their allocation
/// and their catalog's vector), so that a commit allocates nothing: as
/// many as a scan frees when no reader holds any.
const SPARES_MAX: usize = SCAN_AT_LEAST;

/// What a lender lends: `txn::shared::Snapshot`, or a stand-in in the
/// model check.
pub(crate) trait Lendable: Send + Sync {
    /// The txn of the commit it shows.
    fn txn(&self) -> u64;
}

/// The snapshots this process's writer published, lent to its readers.
pub(crate) struct Lender<T: Lendable> {
    /// Even while `newest` and `newest_txn` are a consistent pair.
    seq: AtomicU64,
    /// The newest lendable snapshot (null: none, the slow path).
    newest: AtomicPtr<T>,
    /// Its txn (0 with a null `newest`).
    newest_txn: AtomicU64,
    /// The writer's alone, on lines of its own: beside the pair, which
    /// every reader reads, its lock at each publish missed the cache.
    retained: OwnLines<Mutex<Retained<T>>>,
}

struct Retained<T> {
    /// Every lendable snapshot not yet freed, oldest first.
    lent: VecDeque<Arc<T>>,
    /// Whether the last of `lent` is `newest` (not after `withdraw`).
    last_is_newest: bool,
    /// Freed snapshots no one else holds, for reuse.
    spares: Vec<Arc<T>>,
    /// `lent`'s length at which the next publish scans.
    scan_at: usize,
    /// The scan's buffer (kept: a commit allocates nothing).
    seen: Vec<u64>,
}

/// A snapshot borrowed from the lender: valid while the reader slot that
/// was registered at its txn before it was borrowed stays registered.
pub(crate) struct Borrowed<T>(NonNull<T>);

// SAFETY: a `Borrowed` only ever gives out `&T`, and `T` is `Sync` (for
// `Snapshot`: `Arc`s, plain data and a catalog vector, none with interior
// mutability); the lender keeps the snapshot alive whatever thread the
// borrowing transaction moves to, since its reader slot, not its thread,
// is what protects it.
unsafe impl<T: Sync> Send for Borrowed<T> {}
// SAFETY: as for `Send`: shared access to a `Sync` snapshot.
unsafe impl<T: Sync> Sync for Borrowed<T> {}

impl<T> std::ops::Deref for Borrowed<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: the pointer came from an `Arc<T>` that the lender
        // holds in `lent`; it is freed only after a scan of the reader
        // table made after it stopped being the newest found no slot at
        // its txn (module doc), and the transaction owning this `Borrowed`
        // keeps its slot registered at that txn until after dropping it
        // (`ReadTxn`'s `Drop` releases the slot, then the borrow, which is
        // never read again). No `&mut` to a lent snapshot exists: the
        // lender writes over one (`lend_built_after`, `with_spare`) only
        // once it is out of `lent` and unshared.
        unsafe { self.0.as_ref() }
    }
}

impl<T: Lendable> Lender<T> {
    pub(crate) fn new() -> Lender<T> {
        Lender {
            seq: AtomicU64::new(0),
            newest: AtomicPtr::new(std::ptr::null_mut()),
            newest_txn: AtomicU64::new(0),
            retained: OwnLines(Mutex::new(Retained {
                lent: VecDeque::new(),
                last_is_newest: false,
                spares: Vec::new(),
                scan_at: SCAN_AT_LEAST,
                seen: Vec::new(),
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Retained<T>> {
        // Nothing panics while it is held: a poisoned one is consistent.
        self.retained.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The txn of the newest lendable snapshot (0: none). A hint: the
    /// reader checks it again under the sequence lock.
    #[inline]
    pub(crate) fn newest_txn(&self) -> u64 {
        self.newest_txn.load(SeqCst)
    }

    /// Writes the pair under the sequence lock. The caller holds `retained`.
    fn set_newest(&self, _held: &mut Retained<T>, snapshot: *const T, txn: u64) {
        let s = self.seq.load(SeqCst);
        debug_assert!(s.is_multiple_of(2), "the sequence lock has one writer");
        self.seq.store(s + 1, SeqCst);
        self.newest.store(snapshot.cast_mut(), SeqCst);
        self.newest_txn.store(txn, SeqCst);
        self.seq.store(s + 2, SeqCst);
    }

    /// Makes `snapshot` the one readers registered at its txn borrow
    /// (called by the writer's publish, before it publishes the txn in the
    /// reader table), and frees what no reader can hold once enough has
    /// accumulated.
    fn lend_locked(&self, r: &mut Retained<T>, snapshot: &Arc<T>, readers: &ReaderTable) {
        if let Some(last) = r.lent.back() {
            assert!(
                snapshot.txn() >= last.txn(),
                "lent snapshots come in commit order"
            );
        }
        r.lent.push_back(snapshot.clone());
        r.last_is_newest = true;
        self.set_newest(r, Arc::as_ptr(snapshot), snapshot.txn());
        if r.lent.len() >= r.scan_at {
            Self::release_unseen(r, readers);
        }
    }

    /// Lends `snapshot`, this process's newest, unless the lender lends it
    /// or a newer one already: called after the newest changes other than
    /// by the writer's publish (another process's commit loaded by a
    /// reader, recovery), possibly on several threads at once, each with
    /// what it found newest.
    pub(crate) fn offer(&self, snapshot: &Arc<T>, readers: &ReaderTable) {
        let txn = snapshot.txn();
        let mut r = self.lock();
        let lent_newer = r.lent.back().is_some_and(|last| last.txn() > txn);
        let lent_already = r.last_is_newest
            && r.lent
                .back()
                .is_some_and(|last| Arc::ptr_eq(last, snapshot));
        if txn != 0 && !lent_newer && !lent_already {
            self.lend_locked(&mut r, snapshot, readers);
        }
    }

    /// Stops lending while the process's newest snapshot changes other
    /// than by the writer's publish (another process's commit, recovery):
    /// readers take the slow path until the next `offer` or `lend_built_after`.
    pub(crate) fn withdraw(&self) {
        let mut r = self.lock();
        r.last_is_newest = false;
        self.set_newest(&mut r, std::ptr::null(), 0);
    }

    /// Frees (or keeps as spares) the lent snapshots that are not the
    /// newest and whose txn no registered reader slot holds.
    fn release_unseen(r: &mut Retained<T>, readers: &ReaderTable) {
        let mut seen = std::mem::take(&mut r.seen);
        // After every swap made so far (they were made under this lock):
        // a slot this scan misses belongs to a reader that will see them.
        readers.snapshots(&mut seen);
        let newest = if r.last_is_newest {
            r.lent.pop_back()
        } else {
            None
        };
        for _ in 0..r.lent.len() {
            let Some(mut snapshot) = r.lent.pop_front() else {
                break;
            };
            if seen.binary_search(&snapshot.txn()).is_ok() {
                r.lent.push_back(snapshot);
            } else if r.spares.len() < SPARES_MAX && Arc::get_mut(&mut snapshot).is_some() {
                r.spares.push(snapshot);
            }
        }
        if let Some(newest) = newest {
            r.lent.push_back(newest);
        }
        r.scan_at = SCAN_AT_LEAST.max(r.lent.len() * 2);
        r.seen = seen;
    }

    /// Frees the lent snapshots no reader can hold when there is no spare,
    /// so that the same few allocations go round: once a few are lent, so
    /// that a scan frees several (until then a publish allocates).
    fn refill_spares(r: &mut Retained<T>, readers: &ReaderTable) {
        if r.spares.is_empty() && r.lent.len() >= REFILL_AT {
            Self::release_unseen(r, readers);
        }
    }

    /// Lends `value`, the writer's newest, written over a spare's
    /// allocation when there is one (no allocation): the spare and the
    /// lending in one taking of the lock, since a publish does both.
    /// Returns the lent `Arc`.
    #[cfg(all(test, loom))]
    pub(crate) fn lend_new(&self, value: T, readers: &ReaderTable) -> Arc<T> {
        self.lend_built_after(written_over(value), readers, |_| {})
    }

    /// Lends a value, the writer's newest, built by `build` into a spare
    /// no one else holds when there is one (`build(Some(spare))`, which
    /// returns `None`: no allocation), else as a new value (`build(None)`,
    /// which returns it); calls `before` with the new `Arc` just before it
    /// is lent (under the lender's lock, which borrowers do not take). A
    /// publish swaps its newest snapshot there: a borrower fails while
    /// the lent txn is ahead of the reader table's, so lending last makes
    /// that window short (beside a writer at 1M records, 11% of read
    /// transactions fell in it when the swap came after the lending). A
    /// value built where it will live keeps what it shares with the
    /// spare's (a logged commit's snapshot its map and arena: no count
    /// changed), and is not moved. Returns the lent `Arc`.
    pub(crate) fn lend_built_after(
        &self,
        build: impl FnOnce(Option<&mut T>) -> Option<T>,
        readers: &ReaderTable,
        before: impl FnOnce(&Arc<T>),
    ) -> Arc<T> {
        let mut r = self.lock();
        Self::refill_spares(&mut r, readers);
        let mut spare = r.spares.pop();
        let snapshot = match spare.as_mut().and_then(Arc::get_mut) {
            Some(unshared) => {
                let made = build(Some(unshared));
                debug_assert!(made.is_none(), "a value built into a spare");
                spare.expect("the spare just written")
            }
            None => Arc::new(build(None).expect("a value built without a spare")),
        };
        before(&snapshot);
        self.lend_locked(&mut r, &snapshot, readers);
        snapshot
    }

    /// Drops the spares, as the next publishes would write over them
    /// (for the model check).
    #[cfg(all(test, loom))]
    fn drop_spares(&self) {
        self.lock().spares.clear();
    }

    /// What `take` makes of a spare (a write transaction takes its
    /// catalog's vector to fill: `WriteTxn::begin_on`); the publish that
    /// ends the transaction then takes that spare (the last).
    pub(crate) fn with_spare<R>(
        &self,
        readers: &ReaderTable,
        take: impl FnOnce(&mut T) -> R,
    ) -> Option<R> {
        let mut r = self.lock();
        Self::refill_spares(&mut r, readers);
        let spare = r.spares.last_mut()?;
        Arc::get_mut(spare).map(take)
    }

    /// Registers `slot` at the newest txn and borrows this process's
    /// snapshot of it, if it lends one (else `None`, the slot possibly
    /// registered at some txn: the caller registers it again). The borrow
    /// is valid while the slot stays registered.
    #[inline]
    pub(crate) fn borrow_newest(&self, readers: &ReaderTable, slot: usize) -> Option<Borrowed<T>> {
        let txn = readers.published_txn();
        if self.newest_txn() != txn || !readers.try_register(slot, txn) {
            return None;
        }
        // Read after registering: a snapshot freed since cannot be read
        // here (module doc).
        let s = self.seq.load(SeqCst);
        if !s.is_multiple_of(2) {
            return None;
        }
        let snapshot = self.newest.load(SeqCst);
        let lent_txn = self.newest_txn.load(SeqCst);
        if self.seq.load(SeqCst) != s || lent_txn != txn {
            return None;
        }
        NonNull::new(snapshot).map(Borrowed)
    }

    /// How many snapshots are lent (for tests).
    #[cfg(test)]
    pub(crate) fn lent_len(&self) -> usize {
        self.lock().lent.len()
    }

    /// Frees what no reader can hold now (for the model check).
    #[cfg(all(test, loom))]
    fn scan(&self, readers: &ReaderTable) {
        Self::release_unseen(&mut self.lock(), readers);
    }
}

/// The lending protocol under every interleaving loom explores: a reader
/// registers and borrows while the writer lends txn 2 over txn 1,
/// publishes it, scans and drops the spares (a publish would write over
/// them). The stand-in snapshots record, apart from themselves, when they
/// are freed: a reader that borrowed one must never find it freed while
/// its slot is registered.
/// A `build` for `Lender::lend_built_after` that lends `value` as it is:
/// written over the spare's, or as the new value when there is no spare.
pub(crate) fn written_over<T>(value: T) -> impl FnOnce(Option<&mut T>) -> Option<T> {
    move |spare| match spare {
        Some(spare) => {
            *spare = value;
            None
        }
        None => Some(value),
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::atomic::AtomicBool;

    struct Stand {
        txn: u64,
        freed: Arc<AtomicBool>,
    }

    impl Lendable for Stand {
        fn txn(&self) -> u64 {
            self.txn
        }
    }

    impl Drop for Stand {
        fn drop(&mut self) {
            self.freed.store(true, SeqCst);
        }
    }

    #[test]
    fn loom_a_lent_snapshot_is_not_freed_under_its_borrower() {
        loom::model(|| {
            let table = loom::sync::Arc::new(ReaderTable::private(2, 1));
            let lender = loom::sync::Arc::new(Lender::<Stand>::new());
            let freed = [
                Arc::new(AtomicBool::new(false)),
                Arc::new(AtomicBool::new(false)),
            ];
            let first = lender.lend_new(
                Stand {
                    txn: 1,
                    freed: freed[0].clone(),
                },
                &table,
            );
            let first_ptr = Arc::as_ptr(&first) as usize;
            drop(first);
            let reader = {
                let (table, lender, freed) = (table.clone(), lender.clone(), freed.clone());
                loom::thread::spawn(move || {
                    let slot = table.claim().unwrap();
                    if let Some(lent) = lender.borrow_newest(&table, slot) {
                        // Which one, by address: reading it is what is
                        // being checked.
                        let which = usize::from(&*lent as *const Stand as usize != first_ptr);
                        assert!(!freed[which].load(SeqCst), "a borrowed snapshot was freed");
                        assert_eq!(lent.txn, which as u64 + 1);
                    }
                    table.release(slot);
                })
            };
            drop(lender.lend_new(
                Stand {
                    txn: 2,
                    freed: freed[1].clone(),
                },
                &table,
            ));
            table.publish(2);
            lender.scan(&table);
            // A spare is written over by the next publish: here, dropped.
            lender.drop_spares();
            reader.join().unwrap();
        });
    }
}
