//! The state of one open database shared by every transaction of this
//! process: the newest snapshot, the map, the reader table, the writer's
//! state behind the write lock, and the commit counters.
//!
//! Invariants:
//! - the reader table's published txn is the newest commit of any process;
//!   `published` caches this process's newest known snapshot, and a reader
//!   that finds it older loads the newer one from the lock file's meta copy
//!   (after registering, so its pages cannot be reused meanwhile);
//! - the writer state (behind one mutex) is only touched by the thread that
//!   holds the write transaction, which also holds the cross-process writer
//!   lock (the lock file's writer word), and is refreshed from the lock file
//!   when another process committed since.

use crate::sync::{ArcCell, AtomicU64, Ordering, OwnLines};
use std::path::PathBuf;
use std::sync::atomic::AtomicU64 as StdAtomicU64;
use std::sync::atomic::Ordering as StdOrdering;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Instant;

use crate::btree::page::Limits;
use crate::catalog::Catalog;
use crate::error::{Error, Result};
use crate::options::BrokenProtocol;
use crate::pages::{DirtyPages, MapSource};
use crate::state::{self, Chain};
use crate::storage::arena::{Arena, ArenaSpace};
use crate::storage::file::DataFile;
use crate::storage::freespace::{FreeSpace, Freed, Protector, TakenAhead};
use crate::storage::lockfile::WRITER_WAITERS;
use crate::storage::log::{ChainEnd, RedoLog};
use crate::storage::map::Map;
use crate::storage::meta::{read_zones, Meta};
use crate::txn::readers::ReaderTable;
use crate::txn::seal::Placement;
use crate::txn::snapshot_lender::{Lendable, Lender};

/// Snapshots the graveyard holds at most (`Shared::graveyard`): readers
/// give up at most one per commit per stripe, and the writer empties it at
/// every commit.
pub(crate) const GRAVEYARD_CAPACITY: usize = 64;

/// One committed state, as readers see it.
///
/// Aligned to a cache line so that, inside its `Arc`, the reference counts
/// (which every `begin_read` and every end of a read transaction change, on
/// every thread) do not share a line with the fields every lookup reads:
/// otherwise one thread's `begin_read` would cost every other reading
/// thread a cache miss on its next lookup.
#[repr(align(64))]
pub(crate) struct Snapshot {
    pub(crate) meta: Meta,
    pub(crate) source: MapSource,
    pub(crate) catalog: Catalog,
}

impl Snapshot {
    pub(crate) fn txn(&self) -> u64 {
        self.meta.txn
    }
}

impl Lendable for Snapshot {
    fn txn(&self) -> u64 {
        Snapshot::txn(self)
    }
}

/// How often a process waiting for the writer lock checks whether its
/// holder died (a live holder wakes it when it releases the lock).
const OWNER_CHECK_INTERVAL: std::time::Duration = std::time::Duration::from_millis(10);

/// How often, at most, the writer reads `/proc` for dead readers.
pub(crate) const THOROUGH_INTERVAL: std::time::Duration = std::time::Duration::from_millis(100);

/// What only the writer touches.
pub(crate) struct WriterState {
    pub(crate) free: FreeSpace,
    /// File pages the open write transaction gave its blobs as it put
    /// them; left over from one that ended without a commit, given back
    /// when the write lock is next taken (`Shared::lock_writer`).
    pub(crate) taken_ahead: TakenAhead,
    /// The state chain of the newest commit (see `state.rs`).
    pub(crate) chain: Chain,
    /// The commit that `free` and `chain` describe; when another process
    /// has committed since, the writer reloads them from its state chain.
    pub(crate) state_txn: u64,
    /// The snapshots free pages are protected for (live readers and the
    /// durable commit): a buffer kept so a commit allocates nothing.
    pub(crate) protectors: Vec<Protector>,
    /// The same snapshots' txns, for the arena's slots (which only this
    /// process's readers read): a buffer like `protectors`.
    pub(crate) snapshots: Vec<u64>,
    /// The durable txn when writeback was last started early (under
    /// `Durability::None`, once per durable txn).
    pub(crate) writeback_for: u64,
    /// The dirty pages of the last write transaction, emptied, with their
    /// page buffers and vectors, for the next (`DirtyPages::boxed`).
    pub(crate) dirty_spare: Option<Box<DirtyPages>>,
    /// The box of the last write transaction's catalog, whose contents
    /// went into its snapshot (so a transaction moves by a pointer).
    pub(crate) catalog_spare: Option<Box<Catalog>>,
    /// The emptied list of pages a write transaction freed, kept for the
    /// next (as `dirty_spare` and `redo_buffer` are).
    pub(crate) freed_buffer: Vec<Freed>,
    /// The newest commit known durable, and the meta slot that holds it
    /// (mirrored in the lock file for the other processes).
    pub(crate) durable_txn: u64,
    pub(crate) durable_slot: u64,
    /// The file's length in bytes as last seen (grown in chunks ahead of
    /// use; another process may have grown it further).
    pub(crate) file_len: u64,
    /// The bytes from the file's start whose blocks are allocated, as far
    /// as this writer knows: blocks are allocated a little ahead of the
    /// pages written (`commit::ensure_file_len`). The file's length when
    /// the writer learns it from the file; `u64::MAX` once the filesystem
    /// turned out unable to allocate.
    pub(crate) allocated_to: u64,
    /// Set when an fsync failed: the kernel may have dropped dirty pages, so
    /// no further commit can be trusted until the file is reopened.
    pub(crate) poisoned: bool,
    /// Looks for a leaf to overlay (`txn::overlaid`) that found none, in a
    /// row, across transactions: past a few dozen, only one put in
    /// `OVERLAY_SAMPLE` looks, so single-put commits whose leaves are not
    /// in the arena (a file larger than the working set between
    /// checkpoints) do not pay a second descent each.
    pub(crate) overlay_misses: u64,
    /// The leaves `put_many`'s looks ahead found lately
    /// (`txn::leaf_hints::RecentLeaves`): where they keep finding the same
    /// leaves, which are then in cache, they stop for a while.
    pub(crate) recent_leaves: crate::txn::leaf_hints::RecentLeaves,
    /// When the reader table was last searched for slots of dead processes.
    pub(crate) stale_checked: Option<Instant>,
    /// The redo log (`None` for an instance that cannot write).
    pub(crate) log: Option<RedoLog>,
    /// The arena's slots: live, retired, free (`txn::logged`).
    pub(crate) arena_space: ArenaSpace,
    /// File pages that logged commits since the last checkpoint stopped
    /// using: freed by the next checkpoint.
    pub(crate) logged_freed: Vec<Freed>,
    /// The catalog of the last file commit, while logged commits followed
    /// it (the state chain records changes against it).
    pub(crate) checkpoint_catalog: Option<Catalog>,
    /// A checkpoint being written in steps, between its first step and its
    /// last (`txn::checkpoint_steps`); `checkpoint_catalog` is then the
    /// last step's.
    pub(crate) checkpoint_steps: Option<crate::txn::checkpoint_steps::Steps>,
    /// The redo buffer kept between write transactions.
    pub(crate) redo_buffer: Vec<u8>,
    /// The overlay undo list's vector, kept between write transactions
    /// (`OverlayUndo::with_buffer`).
    pub(crate) overlay_marks: Vec<(u64, crate::storage::overlay::Mark)>,
    /// The commit's placement buffers, kept between commits.
    pub(crate) placement: Placement,
    /// The list of branch regions written after each meta
    /// (`storage::meta::encode_zones`), kept between commits.
    pub(crate) zone_list: Vec<u8>,
    /// A read-only instance's place in the log it follows
    /// (`recovery::follow_log`).
    pub(crate) following: Option<Following>,
    /// This process's owner token for the cross-process writer lock, once
    /// it has declared that it writes (`Shared::lock_writer`).
    pub(crate) owner_token: Option<u64>,
}

/// Where a read-only process stands in the log of another process's logged
/// commits: the log, open for reading, and the end of the record of the
/// last commit it rebuilt.
pub(crate) struct Following {
    pub(crate) log: RedoLog,
    pub(crate) at: ChainEnd,
}

impl WriterState {
    /// The state of a writer that knows nothing yet: `refresh_writer` or
    /// the open fills it in.
    pub(crate) fn new(
        free: FreeSpace,
        chain: Chain,
        txn: u64,
        durable_slot: u64,
        file_len: u64,
        log: Option<RedoLog>,
    ) -> WriterState {
        WriterState {
            free,
            taken_ahead: TakenAhead::default(),
            chain,
            protectors: Vec::new(),
            snapshots: Vec::new(),
            writeback_for: 0,
            dirty_spare: None,
            catalog_spare: None,
            freed_buffer: Vec::new(),
            state_txn: txn,
            durable_txn: txn,
            durable_slot,
            file_len,
            allocated_to: file_len,
            poisoned: false,
            overlay_misses: 0,
            recent_leaves: Default::default(),
            stale_checked: None,
            log,
            arena_space: ArenaSpace::default(),
            logged_freed: Vec::new(),
            checkpoint_catalog: None,
            checkpoint_steps: None,
            redo_buffer: Vec::new(),
            overlay_marks: Vec::new(),
            placement: Placement::default(),
            zone_list: Vec::new(),
            following: None,
            owner_token: None,
        }
    }

    /// Forgets the logged commits this process made: another process
    /// replayed them into a checkpoint at `txn`, so every arena slot retires
    /// there.
    fn forget_logged(&mut self, txn: u64) {
        self.arena_space.retire_all(txn);
        self.logged_freed.clear();
        self.checkpoint_catalog = None;
        self.checkpoint_steps = None;
    }
}

/// Counters of the commit path, for `stats()`.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) commits: AtomicU64,
    pub(crate) pages_written: AtomicU64,
    pub(crate) write_calls: AtomicU64,
    pub(crate) bytes_written: AtomicU64,
    pub(crate) bytes_mapped: AtomicU64,
    pub(crate) log_bytes: AtomicU64,
    pub(crate) syncs: AtomicU64,
    pub(crate) state_bases: AtomicU64,
    pub(crate) state_seals: AtomicU64,
    pub(crate) logged_commits: AtomicU64,
    pub(crate) spills: AtomicU64,
    /// Steps of checkpoints written in steps, but for the last of each.
    pub(crate) checkpoint_steps: AtomicU64,
    pub(crate) checkpoint_runs_spliced: AtomicU64,
    pub(crate) checkpoint_roots_grown: AtomicU64,
    pub(crate) checkpoint_leaves_folded: AtomicU64,
    pub(crate) checkpoint_layouts_deferred: AtomicU64,
    pub(crate) values_overlaid: AtomicU64,
    pub(crate) inserts_overlaid: AtomicU64,
}

// Aligned to a cache line for the reason `Snapshot` is: each read
// transaction holds an `Arc<Shared>`.
#[repr(align(64))]
pub(crate) struct Shared {
    pub(crate) path: PathBuf,
    pub(crate) file: DataFile,
    pub(crate) limits: Limits,
    pub(crate) broken_protocol: Option<BrokenProtocol>,
    /// `Options::logged_commits` of the first open in this process.
    pub(crate) logged_commits: bool,
    /// `Options::map_reservation`: the least address space a map of the
    /// data file reserves.
    pub(crate) map_reservation: u64,
    /// `Options::max_dirty_bytes` of the first open in this process.
    pub(crate) max_dirty_bytes: usize,
    /// `Options::checkpoint_log_bytes` of the first open in this process.
    pub(crate) checkpoint_log_bytes: Option<u64>,
    /// `Options::salvage_damaged_log` of the first open in this process.
    pub(crate) salvage_damaged_log: bool,
    /// `Options::checkpoint_step_pages` of the first open in this process.
    pub(crate) checkpoint_step_pages: Option<u64>,
    /// `Options::branch_region_bytes` of the first open in this process.
    pub(crate) branch_region_bytes: usize,
    /// The instance has no write access (the first open was read-only).
    pub(crate) read_only: bool,
    /// This database's identity in this process, carried by its tree
    /// handles (the same for every open of the same file).
    pub(crate) db_id: u64,
    /// The `max_readers` the instance was opened with (a later open of the
    /// same file in this process must ask for the same).
    pub(crate) max_readers_option: usize,
    /// The token (`thread_token`) of the thread holding the write lock, or
    /// 0. Written only by that thread (std atomics: not part of the
    /// model-checked reader protocol).
    pub(crate) writer_thread: OwnLines<StdAtomicU64>,
    /// The newest snapshot this process knows (see the module doc).
    /// Changed only through `set_published`/`update_published`.
    ///
    /// This, `published_epoch`, `writer_thread` and `counters`, which the
    /// writer writes at every commit, are on lines of their own, away from
    /// what every read transaction reads (`db_id` at each lookup, `readers`
    /// at each begin): until session 35 `db_id` shared a line with the
    /// first three.
    pub(crate) published: OwnLines<ArcCell<Snapshot>>,
    /// How many times `published` changed: counted after each change, so a
    /// snapshot loaded from `published` between two equal counts is still
    /// the newest while the count stays (`txn::reader_stripes`).
    pub(crate) published_epoch: OwnLines<StdAtomicU64>,
    /// Snapshots whose last reference a reader gave up, for the writer to
    /// free (`bury`): a snapshot is allocated by the writer's thread, and
    /// freeing it on a reader's thread takes the writer's malloc arena lock
    /// (a reader beside a fast writer blocked on it thousands of times a
    /// second). Never grows past its capacity.
    pub(crate) graveyard: Mutex<Vec<Arc<Snapshot>>>,
    /// The snapshots this process's writer published, lent to readers
    /// without a reference count (`txn::snapshot_lender`).
    pub(crate) lender: Lender<Snapshot>,
    /// The map new snapshots are read through; replaced by a larger one when
    /// the file outgrows it.
    pub(crate) map: Mutex<Arc<Map>>,
    /// On lines of its own: every read transaction reads it (the lock
    /// file's address), and the fields the compiler places beside it are
    /// the writer's to write at every commit (`writer_thread`, `published`,
    /// `published_epoch`, the writer's mutex, the graveyard's). With a
    /// field added to the table in session 35 it moved onto the line of
    /// the first three, and reads beside a writer ran 0.93x.
    pub(crate) readers: OwnLines<ReaderTable>,
    pub(crate) writer: WriterLock,
    pub(crate) counters: OwnLines<Counters>,
    /// The page arena of logged commits, reserved at the first one (`None`
    /// inside: it could not be reserved, and commits write the file).
    pub(crate) arena: OnceLock<Option<Arc<Arena>>>,
}

/// This process's writer mutex, which holds the writer state: the thread
/// that takes the lock takes the state out of it, and puts it back to
/// release it. So the guard owns what it guards and may move to another
/// thread with the write transaction (`WriteTxn: Send`), which a std
/// `MutexGuard` may not; the std mutex inside is held only while the state
/// is taken out or put back.
pub(crate) struct WriterLock {
    slot: Mutex<WriterSlot>,
    returned: Condvar,
}

struct WriterSlot {
    /// `None` while a thread holds the lock.
    state: Option<Box<WriterState>>,
    /// Threads waiting for it: only then does a release wake one (a
    /// system call).
    waiting: usize,
}

impl WriterLock {
    pub(crate) fn new(state: WriterState) -> WriterLock {
        WriterLock {
            slot: Mutex::new(WriterSlot {
                state: Some(Box::new(state)),
                waiting: 0,
            }),
            returned: Condvar::new(),
        }
    }

    /// Takes the state: waits for it if `wait`, else `None` while another
    /// thread holds it.
    fn take(&self, wait: bool) -> Option<Box<WriterState>> {
        // The mutex guards only this slot, and nothing panics while it is
        // held: a poisoned one holds a consistent slot.
        let mut slot = self.slot.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(state) = slot.state.take() {
                return Some(state);
            }
            if !wait {
                return None;
            }
            slot.waiting += 1;
            slot = self.returned.wait(slot).unwrap_or_else(|e| e.into_inner());
            slot.waiting -= 1;
        }
    }

    fn put_back(&self, state: Box<WriterState>) {
        let mut slot = self.slot.lock().unwrap_or_else(|e| e.into_inner());
        slot.state = Some(state);
        let wake = slot.waiting > 0;
        drop(slot);
        if wake {
            self.returned.notify_one();
        }
    }

    /// `f` of the writer state, when no write transaction of this process
    /// holds it (or, with `wait`, once none does); `None` when one does.
    pub(crate) fn inspect<R>(&self, wait: bool, f: impl FnOnce(&WriterState) -> R) -> Option<R> {
        let state = self.take(wait)?;
        let r = f(&state);
        self.put_back(state);
        Some(r)
    }
}

/// The write lock: this process's writer mutex (and the writer state taken
/// out of it) and, across processes, the lock file's writer word. Dropping
/// it releases the word first, so another thread of this process never
/// takes the mutex while this thread still holds the word.
pub(crate) struct WriterGuard<'a> {
    shared: &'a Shared,
    /// `Some` until dropped.
    state: Option<Box<WriterState>>,
    /// Whether it holds the cross-process lock (not a follower's guard:
    /// `Shared::lock_follower`).
    file_locked: bool,
}

impl std::ops::Deref for WriterGuard<'_> {
    type Target = WriterState;
    fn deref(&self) -> &WriterState {
        self.state
            .as_deref()
            .expect("the writer state is held until drop")
    }
}

impl std::ops::DerefMut for WriterGuard<'_> {
    fn deref_mut(&mut self) -> &mut WriterState {
        self.state
            .as_deref_mut()
            .expect("the writer state is held until drop")
    }
}

impl Drop for WriterGuard<'_> {
    fn drop(&mut self) {
        // Before the mutex is released.
        self.shared
            .writer_thread
            .store(0, std::sync::atomic::Ordering::Relaxed);
        if self.file_locked {
            self.shared.unlock_other_processes();
        }
        if let Some(state) = self.state.take() {
            self.shared.writer.put_back(state);
        }
    }
}

/// A number for the calling thread, unique in this process and never 0.
fn thread_token() -> u64 {
    static NEXT: StdAtomicU64 = StdAtomicU64::new(1);
    thread_local! {
        // Const-initialized and without a destructor, so it can be read
        // even while thread-locals are being destroyed (a transaction
        // dropped by another thread-local's destructor).
        static TOKEN: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }
    TOKEN.with(|t| {
        if t.get() == 0 {
            t.set(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        }
        t.get()
    })
}

impl Shared {
    /// Whether the calling thread holds the write lock. Only that thread
    /// stores its own token, so a relaxed load cannot see it otherwise.
    pub(crate) fn writer_is_this_thread(&self) -> bool {
        self.writer_thread
            .load(std::sync::atomic::Ordering::Relaxed)
            == thread_token()
    }

    /// Takes the write lock: waits for another thread or process holding it
    /// if `wait` (but fails with `WriteTxnOnThisThread` if the calling
    /// thread holds it), else fails with `Busy` (this process), `Locked`
    /// (another process's writer) or `LocklessReader` (a read-only process
    /// without the lock file). Then brings the writer state up to date,
    /// unless the newest commits are another process's logged commits
    /// (`foreign_logged`), which a writer replays first
    /// (`txn::recovery::lock_writer`).
    pub(crate) fn lock_writer(&self, wait: bool) -> Result<WriterGuard<'_>> {
        if self.read_only {
            return Err(Error::ReadOnly);
        }
        if wait && self.writer_is_this_thread() {
            return Err(Error::WriteTxnOnThisThread);
        }
        let Some(state) = self.writer.take(wait) else {
            return Err(Error::Busy);
        };
        // Returned to the mutex on every way out (the guard's drop).
        let mut w = WriterGuard {
            shared: self,
            state: Some(state),
            file_locked: false,
        };
        // A transaction of this process that gave blobs file pages ended
        // without committing: the free space it took is free again.
        let WriterState {
            free, taken_ahead, ..
        } = &mut *w;
        taken_ahead.give_back(free);
        self.lock_other_processes(&mut w, wait)?;
        w.file_locked = true;
        self.writer_thread
            .store(thread_token(), std::sync::atomic::Ordering::Relaxed);
        if self.foreign_logged() {
            // The newest commits live in the log and another process's
            // arena (or a crashed one's): no state to refresh from until
            // they are replayed (`txn::recovery::lock_writer`).
            return Ok(w);
        }
        self.refresh_writer(&mut w)?;
        Ok(w)
    }

    /// `lock_writer(false)`, but only in a process that has declared it
    /// writes (has taken the write lock before): for chores of the writer
    /// at open, which a process that only reads should not declare for
    /// (that would keep readers without a lock file out).
    pub(crate) fn try_lock_writer_if_writing(&self) -> Option<WriterGuard<'_>> {
        if self.read_only {
            return None;
        }
        let declared = self.writer.inspect(false, |w| w.owner_token.is_some())?;
        if !declared {
            return None;
        }
        self.lock_writer(false).ok()
    }

    /// Takes the cross-process writer lock, the header's `writer` word:
    /// free (0) or naming its holder by owner token. With `wait`, sleeps
    /// (futex) until it is released, checking every
    /// [`OWNER_CHECK_INTERVAL`] whether the holder died (its token byte is
    /// unlocked), and then takes it over; without, fails with `Locked`.
    /// The first time, it also declares that this process writes, which
    /// waits for (or, without `wait`, fails with `LocklessReader` on)
    /// readers without a lock file. Called with this process's writer
    /// mutex held, so only one thread of a process ever contends here.
    fn lock_other_processes(&self, w: &mut WriterGuard<'_>, wait: bool) -> Result<()> {
        let Some(lock) = self.readers.lock_file() else {
            // Only read-only instances have no lock file.
            return Err(Error::ReadOnly);
        };
        let me = match w.owner_token {
            Some(token) => token,
            None => {
                if !self.file.declare_writing(wait)? {
                    return Err(Error::LocklessReader);
                }
                let token = lock.claim_owner_token()?;
                w.owner_token = Some(token);
                token
            }
        };
        let word = &lock.header().writer;
        loop {
            let seen = word.load(StdOrdering::Acquire);
            let owner = seen & !WRITER_WAITERS;
            // Free; or held in this process's name, which only a process
            // of ours could have stored (this instance is the process's
            // only one for the file, and its mutex is ours); or held by a
            // process that died holding it (its transaction never
            // published: what it left is recovered like a crash).
            if owner == 0 || owner == me || !lock.owner_alive(owner) {
                let mine = me | (seen & WRITER_WAITERS);
                if word
                    .compare_exchange(seen, mine, StdOrdering::Acquire, StdOrdering::Relaxed)
                    .is_ok()
                {
                    return Ok(());
                }
                continue;
            }
            if !wait {
                return Err(Error::Locked);
            }
            if seen & WRITER_WAITERS == 0
                && word
                    .compare_exchange(
                        seen,
                        seen | WRITER_WAITERS,
                        StdOrdering::Relaxed,
                        StdOrdering::Relaxed,
                    )
                    .is_err()
            {
                continue;
            }
            lock.wait_for_writer(seen, OWNER_CHECK_INTERVAL);
        }
    }

    /// Releases the cross-process writer lock, waking the processes that
    /// wait for it.
    fn unlock_other_processes(&self) {
        if let Some(lock) = self.readers.lock_file() {
            let old = lock.header().writer.swap(0, StdOrdering::Release);
            debug_assert_ne!(old & !WRITER_WAITERS, 0, "writer lock released twice");
            if old & WRITER_WAITERS != 0 {
                lock.wake_writer_waiters();
            }
        }
    }

    /// This process's writer mutex without the cross-process write lock,
    /// for an instance that cannot write (read-only): its writer state
    /// holds only the arena of the logged commits it rebuilt
    /// (`txn::recovery::follow_log`). Nothing else takes that mutex in such
    /// an instance.
    pub(crate) fn lock_follower(&self) -> WriterGuard<'_> {
        debug_assert!(self.read_only);
        WriterGuard {
            shared: self,
            state: self.writer.take(true),
            file_locked: false,
        }
    }

    /// The durable commit the lock file shows (`None` without one).
    pub(crate) fn durable_txn_shown(&self) -> Option<u64> {
        self.readers
            .lock_file()
            .map(|l| l.header().durable_txn.load(Ordering::Acquire))
    }

    /// Whether the newest commits are logged commits of another process.
    pub(crate) fn foreign_logged(&self) -> bool {
        self.readers.lock_file().is_some_and(|l| {
            let by = l.header().logged_by.load(Ordering::Acquire);
            by != 0 && by != crate::txn::readers::ProcessId::current().word()
        })
    }

    /// Records which process's arena holds the newest commits (0: none).
    pub(crate) fn set_logged_by(&self, word: u64) {
        if let Some(l) = self.readers.lock_file() {
            let h = &l.header().logged_by;
            if h.load(Ordering::Relaxed) != word {
                h.store(word, Ordering::Release);
            }
        }
    }

    /// Whether a commit may be logged: this instance can write, has its log,
    /// is the only process with the database open for writing (a writer of
    /// another process could not continue from this process's arena; a
    /// read-only process rebuilds logged commits from the log), and the
    /// protocol is not broken on purpose for a test.
    pub(crate) fn may_log(&self, w: &WriterState) -> bool {
        self.logged_commits
            && w.log.is_some()
            && !w.poisoned
            && self.broken_protocol.is_none()
            && self
                .readers
                .lock_file()
                .is_some_and(|l| l.header().writers.load(Ordering::Acquire) == 1)
    }

    /// The page arena, reserved on first use.
    pub(crate) fn arena(&self) -> Option<Arc<Arena>> {
        self.arena_ref().cloned()
    }

    /// `arena`, borrowed: no count changed (a logged commit's).
    pub(crate) fn arena_ref(&self) -> Option<&Arc<Arena>> {
        self.arena
            .get_or_init(|| {
                Arena::new(
                    self.limits.page_size,
                    crate::storage::arena::RESERVATION_BYTES
                        .min(usize::try_from(self.map_reservation / 4).unwrap_or(usize::MAX)),
                )
                .ok()
                .map(Arc::new)
            })
            .as_ref()
    }

    /// Loads what other processes changed since this process last wrote:
    /// the durable txn and slot, the poisoned flag, and, after another
    /// process's commit, the free space of the newest commit.
    fn refresh_writer(&self, w: &mut WriterState) -> Result<()> {
        let Some(lock) = self.readers.lock_file() else {
            return Ok(());
        };
        let h = lock.header();
        w.durable_txn = h.durable_txn.load(Ordering::Acquire);
        w.durable_slot = h.durable_slot.load(Ordering::Acquire);
        w.poisoned |= h.poisoned.load(Ordering::Acquire) != 0;
        let txn = self.readers.published_txn();
        if w.state_txn == txn {
            return Ok(());
        }
        // Nobody can publish while we hold the writer lock, so the copy of
        // the newest meta is whole unless the lock file is damaged.
        let meta = lock.load_meta(txn).ok_or_else(|| Error::Corrupted {
            page: None,
            detail: format!(
                "lock file {}: no whole copy of the newest meta",
                lock.path().display()
            ),
        })?;
        let snapshot = self.install_snapshot(meta)?;
        let state = state::load(&snapshot.source, &meta, true)?;
        w.forget_logged(txn);
        // Given back when the lock was taken (`lock_writer`), so none of
        // it is missing from the state loaded.
        assert!(w.taken_ahead.is_empty(), "pages taken ahead at a refresh");
        w.free = state.free;
        let region_pages = (self.branch_region_bytes / self.limits.page_size) as u64;
        w.free
            .adopt_zones(region_pages, &read_zones(&self.file, &meta, region_pages));
        w.chain = state.chain;
        w.file_len = self.file.len()?;
        w.allocated_to = w.allocated_to.min(w.file_len);
        w.state_txn = txn;
        Ok(())
    }

    /// Mirrors the writer's durable state into the lock file.
    pub(crate) fn save_durable(&self, w: &WriterState) {
        if let Some(lock) = self.readers.lock_file() {
            let h = lock.header();
            h.durable_txn.store(w.durable_txn, Ordering::Release);
            h.durable_slot.store(w.durable_slot, Ordering::Release);
            if w.poisoned {
                h.poisoned.store(1, Ordering::Release);
            }
        }
    }

    /// Gives up a reader's reference to `snapshot`. The last one goes to
    /// the graveyard, emptied at the next change of `published`, unless
    /// the graveyard is busy or full: a reader never waits for it.
    pub(crate) fn bury(&self, snapshot: Arc<Snapshot>) {
        if Arc::strong_count(&snapshot) == 1 {
            if let Ok(mut graveyard) = self.graveyard.try_lock() {
                if graveyard.len() < graveyard.capacity() {
                    graveyard.push(snapshot);
                    return;
                }
            }
        }
        drop(snapshot);
    }

    /// Makes `snapshot` this process's newest known snapshot.
    pub(crate) fn set_published(&self, snapshot: Arc<Snapshot>) {
        self.lender.withdraw();
        self.published.store(snapshot);
        self.after_publish_change();
        self.lender
            .offer(&self.published.load_full(), &self.readers);
    }

    /// What follows every change of `published`: its count, and the
    /// graveyard emptied.
    fn after_publish_change(&self) {
        self.published_epoch.fetch_add(1, StdOrdering::SeqCst);
        self.empty_graveyard();
    }

    /// Replaces this process's newest known snapshot by what `f` makes of
    /// it (`ArcCell::update`: under its lock, so `f` runs once).
    pub(crate) fn update_published(&self, f: impl FnOnce(&Arc<Snapshot>) -> Arc<Snapshot>) {
        self.lender.withdraw();
        self.published.update(f);
        self.after_publish_change();
        self.lender
            .offer(&self.published.load_full(), &self.readers);
    }

    /// Frees the snapshots readers gave up (`graveyard`). Called where
    /// `published` changes: in a writing process that is its writer's
    /// publish, on the thread that allocated them; in a read-only one (no
    /// publish), the reader that installs a newer commit, so the graveyard
    /// never keeps snapshots longer than until the next commit is seen.
    fn empty_graveyard(&self) {
        if let Ok(mut graveyard) = self.graveyard.try_lock() {
            graveyard.clear();
        }
    }

    /// The count of changes of `published` (see the field).
    #[inline]
    pub(crate) fn published_epoch(&self) -> u64 {
        self.published_epoch.load(StdOrdering::SeqCst)
    }

    /// Makes `snapshot` the newest commit: for this process's readers, then
    /// in the lock file for every process. Its `Arc` is a spare of the
    /// lender's when it has one (a lent snapshot no one can hold any more:
    /// the snapshot is written over it, no allocation), and it is lent to
    /// this process's readers (`txn::snapshot_lender`).
    pub(crate) fn publish(&self, writer: &mut WriterState, snapshot: Snapshot) {
        let meta = snapshot.meta;
        // A logged commit's meta describes only its file part: other
        // processes must not build a snapshot from it (`foreign_logged`).
        let logged = snapshot.source.arena.is_some();
        self.publish_built(
            writer,
            meta,
            logged,
            crate::txn::snapshot_lender::written_over(snapshot),
        );
    }

    /// `publish`, the snapshot of commit `meta` built by `build` where it
    /// will live (`Lender::lend_built_after`); `logged` when it
    /// has logged commits (an arena).
    pub(crate) fn publish_built(
        &self,
        _writer: &mut WriterState,
        meta: Meta,
        logged: bool,
        build: impl FnOnce(Option<&mut Snapshot>) -> Option<Snapshot>,
    ) {
        let txn = meta.txn;
        // Lent before the reader table shows the txn, so that a reader who
        // sees it there finds it lent (`txn::snapshot_lender`), and after
        // `published` holds it, so that the lent txn runs ahead of the
        // table's only briefly (borrowers fail meanwhile). The replaced
        // snapshot stays lent until no reader can hold it.
        let lent = self.lender.lend_built_after(build, &self.readers, |new| {
            drop(self.published.swap(new.clone()));
            self.after_publish_change();
        });
        debug_assert_eq!(lent.txn(), txn);
        debug_assert_eq!(lent.source.arena.is_some(), logged);
        if let Some(lock) = self.readers.lock_file().filter(|_| !logged) {
            lock.store_meta(&meta);
        }
        self.readers.publish(txn);
    }

    /// A map that covers `page_count` pages.
    pub(crate) fn map_covering(&self, page_count: u64) -> Result<Arc<Map>> {
        let needed = page_count.saturating_mul(self.limits.page_size as u64);
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if needed > map.reserved_len() {
            *map = Arc::new(Map::new(
                self.file.as_file(),
                needed.saturating_mul(2),
                self.map_reservation,
            )?);
        }
        map.advise_for_file_len(needed);
        Ok(map.clone())
    }

    /// Builds the snapshot of a commit made by another process and caches
    /// it as this process's newest, unless a newer one is cached already.
    /// The caller protects the commit's pages (a registered reader slot, or
    /// the writer lock).
    pub(crate) fn install_snapshot(&self, meta: Meta) -> Result<Arc<Snapshot>> {
        if meta.page_size as usize != self.limits.page_size {
            return Err(Error::Corrupted {
                page: None,
                detail: "the newest commit has another page size".into(),
            });
        }
        // The copy came from the lock file, which another process writes:
        // never map past the end of the data file (that would be SIGBUS).
        let file_len = self.file.len()?;
        if meta
            .page_count
            .checked_mul(self.limits.page_size as u64)
            .is_none_or(|l| l > file_len)
        {
            return Err(Error::Corrupted {
                page: None,
                detail: format!(
                    "the lock file's newest commit needs {} pages, the file has {file_len} bytes",
                    meta.page_count
                ),
            });
        }
        let source = self.file_source(&meta)?;
        let state = state::load(&source, &meta, false)?;
        let snapshot = Arc::new(Snapshot {
            meta,
            source,
            catalog: state.catalog,
        });
        self.cache_if_newer(&snapshot);
        Ok(snapshot)
    }

    /// Makes `snapshot` this process's newest known commit, unless a newer
    /// one is cached already (another thread got further meanwhile).
    pub(crate) fn cache_if_newer(&self, snapshot: &Arc<Snapshot>) {
        self.update_published(|cached| {
            // A rebuild of the same commit on a newer durable commit
            // replaces one on an older (`txn::recovery::stale`).
            let newer =
                (cached.txn(), cached.meta.state_txn) < (snapshot.txn(), snapshot.meta.state_txn);
            if newer {
                snapshot.clone()
            } else {
                cached.clone()
            }
        });
    }

    /// The pages of the file's commit `meta`, read through the map.
    pub(crate) fn file_source(&self, meta: &Meta) -> Result<MapSource> {
        Ok(MapSource {
            map: self.map_covering(meta.page_count)?,
            page_count: meta.page_count,
            page_size: self.limits.page_size,
            arena: None,
            overlay_txn: 0,
            file_overlays: None,
        })
    }

    /// Frees reader slots of dead processes. Reading `/proc` (which also
    /// finds zombies and recycled pids) is done when `force`d or at most
    /// every 100 ms; in between, one `kill(pid, 0)` per foreign process
    /// finds the processes that are gone. The caller holds the writer lock.
    pub(crate) fn clear_stale(&self, w: &mut WriterState, force: bool) -> usize {
        let now = Instant::now();
        let thorough = force || w.stale_checked.is_none_or(|t| now - t >= THOROUGH_INTERVAL);
        if thorough {
            w.stale_checked = Some(now);
        }
        self.readers.clear_stale(thorough)
    }
}
