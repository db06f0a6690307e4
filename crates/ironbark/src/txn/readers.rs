//! The reader table: one 64-byte slot per live read transaction, holding
//! its owner process and the txn of its snapshot (0 = none yet). Every
//! process's writer scans it to find the oldest snapshot alive in any
//! process. The table lives in the lock file (`storage::lockfile`), or in
//! private memory when the database is opened without one (read-only
//! filesystem) or under loom.
//!
//! Registration protocol (Dekker-style, with sequentially consistent
//! fences): a reader stores the txn of the snapshot it chose into its slot,
//! fences, then re-reads the published txn; if it changed, it retries. The
//! writer publishes a new txn, and later fences before it scans the slots.
//! In the total order of the two fences, either the writer's comes first
//! (then the reader sees the new txn and retries) or the reader's does (then
//! the writer sees the reader's slot): no page a reader can see is ever
//! reused. The writer scans only the slots below the table's high-water
//! mark (`TableHeader::slots_used`), which a claim raises past its slot
//! before the reader registers there, so the same order of fences shows
//! the writer the raised mark too. `loom` checks both (`loom_tests`
//! below). Atomics in memory shared
//! between processes behave as between threads, so the argument holds
//! across processes.
//!
//! Ownership: a slot is claimed by a CAS of its owner word from 0 to this
//! process's [`ProcessId`]; only the owning transaction writes its txn.
//! Liveness rule: a slot whose owner process no longer exists (its pid is
//! gone, or now belongs to a process started at another time) is *stale*;
//! only a holder of the writer lock clears stale slots, so two clearers never
//! race.

#[cfg(not(loom))]
use std::cell::Cell;
use std::sync::Arc;

use crate::sync::{fence, AtomicU64, Ordering};

use crate::error::{Error, Result};
use crate::storage::freespace::Protector;
use crate::storage::lockfile::{LockFile, Slot, TableHeader};

/// A process, as stored in a slot's owner word: the pid in the low 22 bits
/// (Linux pids are below 2^22) and the process's start time (in clock
/// ticks since boot, from `/proc/<pid>/stat`) above, so a recycled pid is
/// not taken for the process that died.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ProcessId(u64);

const PID_BITS: u32 = 22;

impl ProcessId {
    fn new(pid: u32, start_time: u64) -> ProcessId {
        ProcessId(u64::from(pid) & ((1 << PID_BITS) - 1) | start_time << PID_BITS)
    }

    /// This process.
    pub(crate) fn current() -> ProcessId {
        static CURRENT: std::sync::OnceLock<ProcessId> = std::sync::OnceLock::new();
        *CURRENT.get_or_init(|| {
            let pid = std::process::id();
            ProcessId::new(pid, start_time(pid).unwrap_or(0))
        })
    }

    /// The word stored for this process in shared memory (never 0).
    pub(crate) fn word(self) -> u64 {
        self.0
    }

    pub(crate) fn pid(self) -> u32 {
        (self.0 & ((1 << PID_BITS) - 1)) as u32
    }

    /// Whether the process still runs (a zombie does not: its memory and
    /// locks are gone). Reads `/proc`; without it, asks `kill(pid, 0)`
    /// (which cannot tell a recycled pid).
    pub(crate) fn is_alive(self) -> bool {
        let pid = self.pid();
        if pid == 0 {
            return false;
        }
        match proc_stat(pid) {
            Some((state, t)) => ProcessId::new(pid, t) == self && state != b'Z' && state != b'X',
            None if std::path::Path::new("/proc/self/stat").exists() => false,
            None => !self.is_surely_dead(),
        }
    }

    /// A cheap test (one system call, no `/proc`): true if no process has
    /// this pid. A false answer proves nothing (the pid may be recycled).
    pub(crate) fn is_surely_dead(self) -> bool {
        let pid = self.pid();
        if pid == 0 {
            return true;
        }
        // SAFETY: kill with signal 0 only checks for existence.
        let rc = unsafe { libc::kill(pid as libc::pid_t, 0) };
        rc != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
    }
}

/// This process's start time (field 22 of `/proc/<pid>/stat`), masked to
/// the bits a `ProcessId` keeps.
fn start_time(pid: u32) -> Option<u64> {
    proc_stat(pid).map(|(_, t)| t)
}

/// Fields 3 (state) and 22 (start time) of `/proc/<pid>/stat`.
fn proc_stat(pid: u32) -> Option<(u8, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces; fields resume after ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = *fields.next()?.as_bytes().first()?;
    let t: u64 = fields.nth(18)?.parse().ok()?;
    Some((state, t & ((1 << (64 - PID_BITS)) - 1)))
}

/// One reader's slot, as reported by `Database::readers`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SlotView {
    /// The slot's index in the table.
    pub(crate) slot: usize,
    pub(crate) owner: ProcessId,
    /// The snapshot registered (0: none).
    pub(crate) txn: u64,
    /// How the writer counts it (meaningful when `txn != 0`).
    pub(crate) protector: Protector,
}

enum Memory {
    Private {
        header: Box<TableHeader>,
        slots: Box<[Slot]>,
    },
    Shared(Arc<LockFile>),
}

pub(crate) struct ReaderTable {
    memory: Memory,
    me: ProcessId,
    /// [`REPLAY_FLAG`] if this process's readers register as replays (it
    /// is read-only), else 0.
    register_flag: u64,
    /// In a read-only process, the snapshot each of its own slots reads
    /// (0: none), by slot: the slot itself shows what its file pages need
    /// (a rebuild's durable commit, which may be older than the snapshot:
    /// `txn::read::protector`), while the versions of this process's
    /// arena are kept by the snapshots themselves ([`ReaderTable::
    /// arena_snapshots`]). Empty in a process that writes, whose slots
    /// show their snapshots.
    own_snapshots: Box<[AtomicU64]>,
}

/// Set in a slot's txn word by a reader of a read-only process, which
/// may read a logged commit rebuilt from the log onto the file's trees
/// (`txn::recovery::follow_log`): a replay, which the writer holds pages
/// for longer than for its own process's readers (`Protector`).
const REPLAY_FLAG: u64 = 1 << 63;

/// How the writer counts a slot's txn word.
fn protector_of(word: u64) -> Protector {
    let txn = word & !REPLAY_FLAG;
    if word & REPLAY_FLAG != 0 {
        Protector::replay(txn)
    } else {
        Protector::reader(txn)
    }
}

#[cfg(not(loom))]
thread_local! {
    /// Where this thread starts looking for a free slot: the slot it last
    /// claimed, at first its number in this process (threads numbered in
    /// the order they first read), so threads settle on slots of their own
    /// instead of fighting over slot 0, and the slots in use stay low (the
    /// high-water mark bounds every writer's scan: `snapshots`).
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

/// Makes `slot`, just claimed, where this thread looks first next time: a
/// thread whose first choice another process's thread holds settles on
/// the slot it found instead.
#[cfg(not(loom))]
fn remember_hint(slot: usize) {
    HINT.with(|h| h.set(slot));
}

#[cfg(loom)]
fn start_hint() -> usize {
    0
}

#[cfg(loom)]
fn remember_hint(_slot: usize) {}

impl ReaderTable {
    /// A table in this process's memory, with the newest commit `txn`.
    pub(crate) fn private(max_readers: usize, txn: u64) -> ReaderTable {
        assert!(max_readers > 0);
        ReaderTable {
            memory: Memory::Private {
                header: Box::new(TableHeader {
                    published_txn: AtomicU64::new(txn),
                    slots_used: AtomicU64::new(0),
                }),
                slots: (0..max_readers)
                    .map(|_| Slot {
                        owner: AtomicU64::new(0),
                        txn: AtomicU64::new(0),
                    })
                    .collect(),
            },
            me: ProcessId::current(),
            register_flag: 0,
            own_snapshots: Box::new([]),
        }
    }

    /// The table in a lock file; `replays` for a read-only process.
    pub(crate) fn shared(lock: Arc<LockFile>, replays: bool) -> ReaderTable {
        let own_snapshots: Box<[AtomicU64]> = if replays {
            (0..lock.slots().len()).map(|_| AtomicU64::new(0)).collect()
        } else {
            Box::new([])
        };
        ReaderTable {
            memory: Memory::Shared(lock),
            me: ProcessId::current(),
            register_flag: if replays { REPLAY_FLAG } else { 0 },
            own_snapshots,
        }
    }

    pub(crate) fn lock_file(&self) -> Option<&Arc<LockFile>> {
        match &self.memory {
            Memory::Shared(l) => Some(l),
            Memory::Private { .. } => None,
        }
    }

    fn header(&self) -> &TableHeader {
        match &self.memory {
            Memory::Private { header, .. } => header,
            Memory::Shared(l) => &l.header().table,
        }
    }

    fn slots(&self) -> &[Slot] {
        match &self.memory {
            Memory::Private { slots, .. } => slots,
            Memory::Shared(l) => l.slots(),
        }
    }

    pub(crate) fn capacity(&self) -> usize {
        self.slots().len()
    }

    /// The newest published txn.
    pub(crate) fn published_txn(&self) -> u64 {
        self.header().published_txn.load(Ordering::SeqCst)
    }

    /// Makes `txn` the newest commit (after its pages and meta are written).
    pub(crate) fn publish(&self, txn: u64) {
        self.header().published_txn.store(txn, Ordering::SeqCst);
    }

    /// Claims a free slot for this process.
    pub(crate) fn claim(&self) -> Result<usize> {
        let slots = self.slots();
        let n = slots.len();
        let start = start_hint() % n;
        for k in 0..n {
            let i = (start + k) % n;
            let owner = &slots[i].owner;
            if owner.load(Ordering::Relaxed) == 0
                && owner
                    .compare_exchange(0, self.me.0, Ordering::SeqCst, Ordering::Relaxed)
                    .is_ok()
            {
                // Raised before the slot is registered, so that a writer
                // whose scan could miss the registration cannot miss the
                // mark (`snapshots`). Sequentially consistent both ways: a
                // mark this load sees above `i` (another thread's raise)
                // then precedes this reader's fence, as its own would.
                let mark = &self.header().slots_used;
                if mark.load(Ordering::SeqCst) <= i as u64 {
                    mark.fetch_max(i as u64 + 1, Ordering::SeqCst);
                }
                remember_hint(i);
                return Ok(i);
            }
        }
        Err(Error::ReadersFull { max: n })
    }

    /// The slots a writer's scan covers: those below the high-water mark.
    /// A mark past the table (a damaged lock file) covers the whole table.
    fn used_slots(&self) -> &[Slot] {
        let slots = self.slots();
        let mark = self.header().slots_used.load(Ordering::SeqCst);
        &slots[..(mark.min(slots.len() as u64) as usize)]
    }

    /// Records `txn` in slot `i`; true if `txn` is still the newest commit
    /// after that, so its pages are protected until the slot is released.
    /// On false the caller retries with the newer commit.
    pub(crate) fn try_register(&self, i: usize, txn: u64) -> bool {
        self.try_register_protecting(i, txn, txn)
    }

    /// [`ReaderTable::try_register`] of a snapshot of commit `txn` whose
    /// pages need the protection of a reader at `protect`: a read-only
    /// process's rebuild of logged commit `txn` reads the pages of the
    /// durable commit it was built on, which may be older than `txn` or,
    /// a step of a partial checkpoint, newer (`txn::read::protector`).
    pub(crate) fn try_register_protecting(&self, i: usize, protect: u64, txn: u64) -> bool {
        debug_assert!(txn != 0 && protect != 0 && protect & REPLAY_FLAG == 0);
        // A plain store and one fence: the fence alone orders the store
        // before the re-read (the module doc's Dekker argument), where a
        // sequentially consistent store would add a second barrier (an
        // `xchg` on x86) to every read transaction.
        if let Some(own) = self.own_snapshots.get(i) {
            own.store(txn, Ordering::Relaxed);
        }
        self.slots()[i]
            .txn
            .store(protect | self.register_flag, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        self.published_txn() == txn
    }

    pub(crate) fn release(&self, i: usize) {
        if let Some(own) = self.own_snapshots.get(i) {
            own.store(0, Ordering::Release);
        }
        let slot = &self.slots()[i];
        slot.txn.store(0, Ordering::Release);
        // Plain stores, no read-modify-write: no one else writes the owner
        // word of a live process's slot (claimers wait for 0, and only
        // dead owners' slots are cleared), so a load and a store do what a
        // swap would, without a locked instruction per read transaction.
        let owner = &slot.owner;
        assert!(
            owner.load(Ordering::Relaxed) == self.me.0,
            "reader slot released by a non-owner"
        );
        owner.store(0, Ordering::Release);
    }

    /// The snapshot of every live reader, sorted, without duplicates, into
    /// `out` (a buffer the writer keeps, so a commit allocates nothing).
    pub(crate) fn snapshots(&self, out: &mut Vec<u64>) {
        out.clear();
        out.extend(self.registered().map(|word| word & !REPLAY_FLAG));
        out.sort_unstable();
        out.dedup();
    }

    /// The snapshots this process's arena must keep the versions of, sorted,
    /// without duplicates, into `out`: in a read-only process, those its
    /// own readers read (other processes never read its arena); else
    /// [`ReaderTable::snapshots`].
    pub(crate) fn arena_snapshots(&self, out: &mut Vec<u64>) {
        if self.own_snapshots.is_empty() {
            return self.snapshots(out);
        }
        // As in `registered`: after the arena's owner retired versions,
        // every reader either shows here or reads a newer snapshot.
        fence(Ordering::SeqCst);
        self.own_snapshots_into(None, out);
    }

    /// The snapshots this process's own readers read, but slot `except`'s,
    /// sorted, without duplicates, into `out`.
    fn own_snapshots_into(&self, except: Option<usize>, out: &mut Vec<u64>) {
        out.clear();
        out.extend(
            self.own_snapshots
                .iter()
                .enumerate()
                .filter(|&(i, _)| Some(i) != except)
                .map(|(_, t)| t.load(Ordering::SeqCst))
                .filter(|&t| t != 0),
        );
        out.sort_unstable();
        out.dedup();
    }

    /// In a read-only process, the snapshots its own readers read, but
    /// slot `except`'s (a caller's own: `Database::stats`), sorted,
    /// without duplicates: what its arena keeps versions for, as
    /// [`ReaderTable::arena_snapshots`] counts them. `None` in a process
    /// that writes, whose slots show their snapshots.
    pub(crate) fn own_snapshots_but(&self, except: Option<usize>) -> Option<Vec<u64>> {
        if self.own_snapshots.is_empty() {
            return None;
        }
        let mut out = Vec::new();
        self.own_snapshots_into(except, &mut out);
        Some(out)
    }

    /// [`ReaderTable::snapshots`], each counted as a reader or a replay
    /// (`Protector`), for the release of file pages.
    pub(crate) fn protectors(&self, out: &mut Vec<Protector>) {
        out.clear();
        out.extend(self.registered().map(protector_of));
        out.sort_unstable();
        out.dedup();
    }

    /// The txn word of every registered slot.
    fn registered(&self) -> impl Iterator<Item = u64> + '_ {
        // The writer's half of the Dekker protocol (module doc): after it
        // published, every reader either shows here or sees the new txn.
        fence(Ordering::SeqCst);
        self.used_slots()
            .iter()
            .map(|s| s.txn.load(Ordering::SeqCst))
            .filter(|&t| t != 0)
    }

    /// Every claimed slot.
    pub(crate) fn view(&self) -> Vec<SlotView> {
        self.slots()
            .iter()
            .enumerate()
            .filter_map(|(slot, s)| {
                let owner = s.owner.load(Ordering::Acquire);
                let word = s.txn.load(Ordering::Acquire);
                (owner != 0).then(|| SlotView {
                    slot,
                    owner: ProcessId(owner),
                    txn: word & !REPLAY_FLAG,
                    protector: protector_of(word),
                })
            })
            .collect()
    }

    /// Frees the slots of processes that no longer exist; returns how many.
    /// `thorough` reads `/proc` once per foreign process, which also finds
    /// zombies and recycled pids; otherwise one `kill(pid, 0)` per foreign
    /// process finds those that are gone for good. The caller holds the
    /// writer lock (the only clearer; see module doc).
    pub(crate) fn clear_stale(&self, thorough: bool) -> usize {
        let mut cleared = 0;
        let mut checked: Vec<(u64, bool)> = Vec::new();
        // A quick check covers the slots below the high-water mark, which
        // hold every registered snapshot (`snapshots`); a thorough one the
        // whole table, which also frees a slot whose owner died between
        // its claim and the raise of the mark.
        let slots = if thorough {
            self.slots()
        } else {
            self.used_slots()
        };
        for slot in slots {
            let owner = slot.owner.load(Ordering::Acquire);
            if owner == 0 || owner == self.me.0 {
                continue;
            }
            let alive = match checked.iter().find(|c| c.0 == owner) {
                Some(c) => c.1,
                None => {
                    let owner = ProcessId(owner);
                    let alive = if thorough {
                        owner.is_alive()
                    } else {
                        !owner.is_surely_dead()
                    };
                    checked.push((owner.0, alive));
                    alive
                }
            };
            if alive {
                continue;
            }
            // The owner is dead, so nothing else writes this slot, and
            // claimers wait for the owner word to be 0.
            slot.txn.store(0, Ordering::SeqCst);
            if slot
                .owner
                .compare_exchange(owner, 0, Ordering::SeqCst, Ordering::Relaxed)
                .is_ok()
            {
                cleared += 1;
            }
        }
        cleared
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

    fn oldest(table: &ReaderTable) -> Option<u64> {
        let mut snapshots = Vec::new();
        table.snapshots(&mut snapshots);
        snapshots.first().copied()
    }

    #[test]
    fn loom_reader_registration_vs_reclamation() {
        registration_vs_reclamation(false);
    }

    /// The same with slot 0 held, so that the reader claims slot 1 and
    /// raises the high-water mark the writer's scan stops at.
    #[test]
    fn loom_a_claim_above_the_mark_vs_reclamation() {
        registration_vs_reclamation(true);
    }

    fn registration_vs_reclamation(slot_0_held: bool) {
        loom::model(move || {
            let table = Arc::new(ReaderTable::private(2, 1));
            if slot_0_held {
                assert_eq!(table.claim().unwrap(), 0);
            }
            let reader = {
                let table = table.clone();
                loom::thread::spawn(move || {
                    let slot = table.claim().unwrap();
                    loop {
                        let txn = table.published_txn();
                        if table.try_register(slot, txn) {
                            return txn;
                        }
                    }
                })
            };
            // The writer publishes commit 2, then decides whether pages
            // freed by commit 2 may be reused: only if no snapshot < 2.
            table.publish(2);
            let may_reuse = oldest(&table).is_none_or(|o| o >= 2);
            let reader_snapshot = reader.join().unwrap();
            assert!(
                !(may_reuse && reader_snapshot < 2),
                "pages reused under a live snapshot"
            );
        });
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// The oldest live snapshot, as the writer sees it.
    fn oldest(table: &ReaderTable) -> Option<u64> {
        let mut snapshots = Vec::new();
        table.snapshots(&mut snapshots);
        snapshots.first().copied()
    }

    #[test]
    fn this_process_is_alive_and_a_recycled_pid_is_not() {
        let me = ProcessId::current();
        assert!(me.is_alive());
        assert_eq!(me.pid(), std::process::id());
        // Same pid, another start time: the pid was recycled.
        let other = ProcessId::new(me.pid(), (me.0 >> PID_BITS) + 1);
        assert!(!other.is_alive());
        assert!(!ProcessId(0).is_alive());
    }

    #[test]
    fn stale_slots_of_dead_owners_are_cleared() {
        let table = ReaderTable::private(4, 5);
        let mine = table.claim().unwrap();
        assert!(table.try_register(mine, 5));
        // Forge a slot owned by a process that does not exist (claimed, so
        // below the high-water mark, then handed to the dead owner).
        let dead = ProcessId::new(ProcessId::current().pid(), 1);
        let i = table.claim().unwrap();
        table.slots()[i].owner.store(dead.0, Ordering::SeqCst);
        table.slots()[i].txn.store(3, Ordering::SeqCst);
        assert_eq!(oldest(&table), Some(3));
        assert_eq!(
            table.clear_stale(false),
            0,
            "its pid lives: only /proc tells"
        );
        assert_eq!(table.clear_stale(true), 1);
        assert_eq!(oldest(&table), Some(5));
        assert_eq!(table.view().len(), 1);
        table.release(mine);
        assert_eq!(oldest(&table), None);
    }

    #[test]
    fn a_quick_check_clears_below_the_mark_and_a_thorough_one_everywhere() {
        let table = ReaderTable::private(8, 5);
        // A process that is gone for good: a child, waited for.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        let dead = ProcessId::new(pid, 1);
        // Below the mark: slot 0, claimed by hand (`claim` starts at this
        // thread's hint, which may be any slot, the last one too).
        let below = 0;
        table.slots()[below].owner.store(dead.0, Ordering::SeqCst);
        table.header().slots_used.store(1, Ordering::SeqCst);
        table.slots()[below].txn.store(3, Ordering::SeqCst);
        // Above the mark: an owner that died between its claim and the
        // raise of the mark, before it registered a snapshot.
        let above = 6;
        assert_eq!(table.used_slots().len(), 1);
        table.slots()[above].owner.store(dead.0, Ordering::SeqCst);
        assert_eq!(table.clear_stale(false), 1, "the slot below the mark");
        assert_eq!(table.view().len(), 1, "the slot above the mark stays");
        assert_eq!(table.clear_stale(true), 1, "the slot above the mark");
        assert!(table.view().is_empty());
    }

    #[test]
    fn every_claimed_slot_lies_below_the_mark_the_writer_scans_to() {
        let table = ReaderTable::private(64, 100);
        let mark = || table.header().slots_used.load(Ordering::SeqCst) as usize;
        assert_eq!(mark(), 0, "a new table: nothing to scan");
        let mut held = Vec::new();
        for txn in 1..=64u64 {
            let slot = table.claim().unwrap();
            assert!(
                slot < mark(),
                "slot {slot} claimed above the mark {}",
                mark()
            );
            assert!(table.slots()[slot].txn.load(Ordering::SeqCst) == 0);
            table.slots()[slot].txn.store(txn, Ordering::SeqCst);
            held.push(slot);
            let mut seen = Vec::new();
            table.snapshots(&mut seen);
            assert_eq!(seen, (1..=txn).collect::<Vec<_>>(), "every holder scanned");
        }
        assert_eq!(mark(), 64);
        assert!(matches!(table.claim(), Err(Error::ReadersFull { max: 64 })));
        for slot in held {
            table.release(slot);
        }
        let mut seen = Vec::new();
        table.snapshots(&mut seen);
        assert!(seen.is_empty());
        assert_eq!(mark(), 64, "the mark never falls while the table lives");
    }
}
