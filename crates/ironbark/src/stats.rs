//! What `Database::stats` reports.

/// Sizes, counts and counters of a database.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct Stats {
    /// Bytes per page.
    pub page_size: usize,
    /// The data file's length in bytes (grown ahead of use in chunks).
    pub file_size_bytes: u64,
    /// Pages in use by the newest commit, meta pages and free pages included.
    pub page_count: u64,
    /// Free pages (reusable now, or waiting for older snapshots).
    pub free_pages: u64,
    /// Free pages that cannot be reused yet because a live reader's snapshot
    /// can still see them (file pages, and with `Options::logged_commits`
    /// also in-memory pages of logged commits). In a read-only process the
    /// in-memory pages are those of its own rebuilds of logged commits,
    /// counted by the snapshots its readers read.
    pub pages_pinned_by_readers: u64,
    /// The txn id of the newest commit.
    pub last_txn_id: u64,
    /// The newest txn id known to be durable.
    pub durable_txn_id: u64,
    /// Read transactions alive now.
    pub live_readers: usize,
    /// The reader limit.
    pub max_readers: usize,
    /// The oldest snapshot a live reader holds. A read-only process's
    /// reader of a logged commit it rebuilt from the log counts with the
    /// durable commit the rebuild was built on, whose file pages it keeps:
    /// older than its snapshot's own (`ReadTxn::txn_id`), or, a step of a
    /// partial checkpoint, newer.
    pub oldest_snapshot: Option<u64>,
    /// Per named tree.
    pub trees: Vec<TreeStats>,
    /// Commit-path counters since open.
    pub counters: CommitCounters,
}

/// Shape of one named tree.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct TreeStats {
    /// The tree's name.
    pub name: String,
    /// Levels (0 when empty, 1 when the root is a leaf).
    pub depth: u32,
    /// Entries.
    pub entries: u64,
    /// Branch pages.
    pub branch_pages: u64,
    /// Leaf pages.
    pub leaf_pages: u64,
    /// Pages of overflow values.
    pub overflow_pages: u64,
}

/// Counters of the commit path since the database was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CommitCounters {
    /// Commits that wrote something.
    pub commits: u64,
    /// Pages written (meta pages included).
    pub pages_written: u64,
    /// Write calls (`pwritev`, `pwrite`).
    pub write_calls: u64,
    /// Bytes written: passed to write calls, or stored through the log's
    /// writable map (`bytes_mapped`).
    pub bytes_written: u64,
    /// Of `bytes_written`, those of log records stored through the log's
    /// writable map: no write call carries them, so a count of the
    /// process's write calls (`wchar` of /proc/self/io) misses them.
    pub bytes_mapped: u64,
    /// Of `bytes_written`, those written to the redo log: its records, and
    /// the zeros that grow it (`write_calls` counts each growth). The rest
    /// are the data file's: file commits and checkpoints.
    pub log_bytes: u64,
    /// `fdatasync` calls.
    pub syncs: u64,
    /// Commits that wrote a new base image of the catalog and free space
    /// (the rest appended a delta record to the state chain).
    pub state_bases: u64,
    /// Delta blobs left in the state chain when full (sealed).
    pub state_seals: u64,
    /// Commits that were logged (`Options::logged_commits`): counted in
    /// `commits` too; their bytes are those of their log records.
    pub logged_commits: u64,
    /// Times a write transaction outgrew `Options::max_dirty_bytes` and
    /// spilled pages to its spill file.
    pub spills: u64,
    /// Steps of checkpoints written in steps (all but the last step of
    /// each, which counts as a commit): a checkpoint whose pages would not
    /// fit in the file's free pages is written a share of the file at a
    /// time, each share a durable commit.
    pub checkpoint_steps: u64,
    /// Branches of checkpoint steps rebuilt over a run of two or more of
    /// the newest commit's subtrees: where a tree grew by splits since its
    /// last checkpoint, a step splices the run that covers the same keys
    /// as the checkpoint's branch (a step that failed and was taken up
    /// again counts again).
    pub checkpoint_runs_spliced: u64,
    /// Checkpoint steps that spliced a tree whose root split since its
    /// last checkpoint (the step's tree takes the newest root's height).
    pub checkpoint_roots_grown: u64,
    /// File leaves with value overlays that checkpoint steps wrote folded
    /// (a copy with the overlay applied), each as the step that took it
    /// wrote it (docs/design.md, "Partial checkpoints").
    pub checkpoint_leaves_folded: u64,
    /// Layouts of the newest commit over a checkpoint step's folded leaves
    /// that found no room in the page arena, so that the next step's
    /// layout leads to those leaves' copies too (until then, readers of
    /// the published snapshot keep the old leaves from reuse).
    pub checkpoint_layouts_deferred: u64,
    /// Same-size overwrites and deletes committed as value overlays: the
    /// new value, or a tombstone, kept beside its leaf (a published page
    /// of a logged commit) instead of in a copy of the leaf and of the
    /// branches above it (see docs/design.md, "Value overlays").
    pub values_overlaid: u64,
    /// Of `values_overlaid`, inserts: keys a leaf lacked, kept beside it
    /// (in its overlay) instead of in a copy of it and its branches, until
    /// the leaf's next copy or checkpoint takes them in (docs/design.md,
    /// "Value overlays").
    pub inserts_overlaid: u64,
}

/// One live read transaction, in any process (`Database::readers`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReaderInfo {
    /// The process that owns it.
    pub pid: u32,
    /// The txn of the snapshot it reads. For a read-only process's
    /// snapshot of a logged commit rebuilt from the log, the durable commit
    /// the rebuild was built on, whose file pages it keeps: older than the
    /// snapshot's own (`ReadTxn::txn_id`), or, a step of a partial
    /// checkpoint, newer.
    pub snapshot_txn: u64,
    /// Whether that process still runs (a dead one's slot is *stale*: see
    /// `Database::clear_stale_readers`).
    pub alive: bool,
    /// Free pages that cannot be reused while this snapshot lives.
    pub pinned_pages: u64,
}
