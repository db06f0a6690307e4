//! Options chosen at open, and the durability of a commit.
//!
//! Invariant: no option is silently ignored. `durability` and `read_only`
//! belong to the handle an open returns (two opens of one file in one
//! process may differ); `max_readers` shapes the per-process instance, so a
//! second open of the same file must ask for the same; `page_size` and
//! `create` only matter when the file is created or initialized.

/// How durable a commit is when `commit` returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Durability {
    /// The commit survives power loss: one `fdatasync` per commit.
    #[default]
    Immediate,
    /// No sync. A process crash loses nothing; an OS crash or power loss may
    /// lose the commits since the last sync, but the file always opens to a
    /// consistent earlier commit. [`crate::Database::sync`] makes them durable.
    None,
}

/// Options for [`crate::Database::open_with`].
#[derive(Clone, Debug)]
pub struct Options {
    /// Page size for a new (or empty) file: a power of two from 1024 to
    /// 65536 (default 4096). An existing file keeps the page size it was
    /// created with.
    pub page_size: usize,
    /// The default durability of the write transactions begun through this
    /// handle (default `Immediate`); each open's handle keeps its own.
    pub durability: Durability,
    /// The most read transactions alive at once (default 126). A second open
    /// of a file this process has open must ask for the same number (else
    /// `InvalidOption`); a process joining others that have the file open
    /// uses the table the first of them laid out (`Stats::max_readers`).
    pub max_readers: usize,
    /// Create the file if it is missing, and initialize it if it is empty
    /// (default `true`).
    pub create: bool,
    /// Open for reading only (default `false`): for a process that may not
    /// write the file (read-only permission or filesystem). Anything that
    /// would write through this handle fails with
    /// [`crate::Error::ReadOnly`] (other handles of the same file in this
    /// process may still write). If the lock file cannot be opened for
    /// writing either, the process reads without one and keeps other
    /// processes from starting to write while it is open (they are told so
    /// with [`crate::Error::LocklessReader`]); such an open fails with
    /// [`crate::Error::Locked`] if a process already writes (has run a
    /// write transaction since it opened the database). A read-only open creates a missing
    /// lock file only when run by the data file's owner or by root, so that
    /// another user's reader never leaves a lock file the owner cannot use.
    pub read_only: bool,
    /// Logged commits (default `true`): a small write
    /// transaction appends one record of its changes to the redo log
    /// `<path>-log` (synced under `Durability::Immediate`) and keeps its
    /// pages in memory, instead of writing them to the data file; a
    /// checkpoint writes them later (when the log or the memory passes its
    /// bound, on `Database::checkpoint`/`sync`, and at close), and an open
    /// after a crash replays the log. Used only while one process has the
    /// database open. Decided by the first open of the file in a process.
    /// Covered by the crash simulation like file commits (torn and garbled
    /// log records included); docs/design.md, "Logged commits", argues
    /// why a crash loses nothing.
    pub logged_commits: bool,
    /// Address space reserved for the read-only map of the data file, in
    /// bytes (default 64 GiB). Reserving costs no memory, and the map is
    /// made anew, larger, when the file outgrows it (which waits for no
    /// reader: old maps live while their snapshots do). Lower it where
    /// address space is limited: under `ulimit -v`, or valgrind, which
    /// refuses a 64 GiB mapping. The page arena of logged commits reserves
    /// at most a quarter of it (16 GiB by default).
    pub map_reservation: u64,
    /// The most bytes of dirty pages a write transaction keeps in memory
    /// (default 512 MiB, as LMDB's dirty list holds at most 128Ki pages of
    /// 4 KiB): past it, the transaction spills its oldest leaves and
    /// overflow values to an unnamed file beside the database (deleted
    /// when the transaction ends, or if the process dies) and reads them
    /// back from there, so that a transaction larger than memory commits
    /// instead of exhausting it. Branch pages stay in memory. One
    /// operation's pages are not split: a single value or `delete_range`
    /// larger than the bound is held whole until the next operation.
    /// Decided by the first open of the file in a process.
    pub max_dirty_bytes: usize,
    /// The redo log's bound: once the log holds this many bytes, the next
    /// commit is a checkpoint (which lets the log start over). `None`
    /// (the default) sizes it from the data: twice the bytes of the data
    /// file's pages and the in-memory pages of the logged commits, but at
    /// least 64 MiB and at most 256 MiB. A checkpoint rewrites every page
    /// the logged commits changed, up to the whole data, so a log twice
    /// the data keeps the checkpoints' bytes below half the log's own; the
    /// upper end bounds the replay after a crash (10-25 ms per MiB of
    /// log, measured: docs/benchmarks.md). A smaller bound checkpoints more
    /// often: shorter recovery, more bytes written. Decided by the first
    /// open of the file in a process.
    pub checkpoint_log_bytes: Option<u64>,
    /// The pages a checkpoint writes per step when it goes in steps: a
    /// checkpoint whose pages do not fit in the file's free pages and one
    /// step is written as several durable commits of about this many pages
    /// each, so the file grows by about one step instead of by a copy of
    /// every page the logged commits changed (docs/design.md, "Partial
    /// checkpoints"). `None` (the default) sizes it from the data: 1/16 of
    /// the file, at least 64 pages. Smaller steps keep the file smaller
    /// and cost a sync each. Decided by the first open of the file in a
    /// process.
    pub checkpoint_step_pages: Option<u64>,
    /// Opens a database whose redo log proves a durable commit damaged
    /// (default `false`). After a crash, recovery replays the log's records
    /// up to the first one that is torn or damaged. A record written after
    /// the log was synced vouches for every record before it, so a damaged
    /// record with an intact voucher after it is not a torn write but lost
    /// durable data (the medium, a misdirected write): by default the open
    /// that finds it (or the replay of a process that joins) fails with
    /// [`crate::Error::Corrupted`] naming the commits, and nothing is
    /// changed. With this set, recovery replays the records before the
    /// damage and drops the rest: the database opens at the last commit
    /// before the damaged one, a consistent but older state
    /// (docs/design.md, "Damage told from a torn write"). A read-only
    /// process rebuilding another process's newest logged commits from the
    /// log fails its read with `Corrupted` at any damaged record before
    /// that commit, with or without this option: it reads the newest
    /// commit or none. Decided by the first open of the file in a process.
    pub salvage_damaged_log: bool,
    /// Bytes of a branch region (default 2 MiB, a huge page; 0: none): the
    /// writer places branch pages in aligned regions of this size that
    /// hold nothing else (docs/design.md, "Branch regions"). For the
    /// engine's own tests, which use small regions to reach them with
    /// small files; a power of two, at least the page size (else
    /// `InvalidOption`). Decided by the first open of the file in a
    /// process.
    #[doc(hidden)]
    pub branch_region_bytes: usize,
    /// Fault injection for the engine's own tests: every write, sync, length
    /// change and read of the data file is first offered to this hook.
    #[doc(hidden)]
    pub io_hook: Option<crate::storage::file::IoHookHandle>,
    /// Deliberately breaks the commit protocol, so that the crash tests can
    /// show they catch a broken protocol. Never set this.
    #[doc(hidden)]
    pub broken_protocol: Option<BrokenProtocol>,
}

/// Ways to break the commit protocol on purpose (for testing the tests).
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BrokenProtocol {
    /// Reuse freed pages before the commit that freed them is durable (what
    /// LMDB does with MDB_NOSYNC).
    ReuseBeforeDurable,
    /// Write every meta page into slot 0, over the durable one.
    OneMetaSlot,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            page_size: 4096,
            durability: Durability::Immediate,
            max_readers: 126,
            create: true,
            read_only: false,
            logged_commits: true,
            map_reservation: DEFAULT_MAP_RESERVATION,
            max_dirty_bytes: DEFAULT_MAX_DIRTY_BYTES,
            checkpoint_log_bytes: None,
            salvage_damaged_log: false,
            checkpoint_step_pages: None,
            branch_region_bytes: DEFAULT_BRANCH_REGION_BYTES,
            io_hook: None,
            broken_protocol: None,
        }
    }
}

/// The default of `Options::branch_region_bytes`: one huge page of x86-64.
pub const DEFAULT_BRANCH_REGION_BYTES: usize = 2 << 20;

/// The default of `Options::map_reservation`: 64 GiB, of the 128 TiB of
/// address space a 64-bit process has.
pub const DEFAULT_MAP_RESERVATION: u64 = 64 << 30;

/// The default of `Options::max_dirty_bytes`: 512 MiB.
pub const DEFAULT_MAX_DIRTY_BYTES: usize = 512 << 20;

/// The largest `max_readers` accepted.
pub const MAX_READERS_LIMIT: usize = 1 << 16;
