//! Simulated power loss (SQLite's crash tests, ALICE's crash states).
//!
//! A recording I/O hook logs every write, length change and sync the engine
//! makes, to the data file and to the redo log (`<data file>-log`) apart.
//! From the log, the harness builds the pair of files a power cut could
//! leave at each point: for each file, everything synced (a data sync makes
//! only the data file's writes durable, a log sync only the log's), plus
//! any subset of its unsynced writes, sector by sector kept, dropped or
//! garbled, with or without its unsynced length change. Each such pair
//! must open without repair, pass `check()`, and hold exactly the state of
//! some commit `k` with
//! (last commit acknowledged durable) <= k <= (last commit attempted).
//! The same harness run with a deliberately broken commit protocol must
//! find failures: that shows it can fail.
//!
//! Every workload runs twice: with logged commits off (every commit writes
//! the data file) and on (`Options::logged_commits`: small commits append a
//! redo record to the log, and `sync()`, `shrink_to_fit`, large
//! transactions, `stats()` and close are checkpoints into the data file).
//! In the logged runs the crash points cover a torn last record (sectors of
//! the record lost), garbage in unsynced log blocks (garbled sectors), a
//! crash between the log's sync and the commit's publish, during a
//! checkpoint, between the steps of a checkpoint written in steps (steps
//! of 4 pages, so most checkpoints go in steps: each step's trees, with
//! the log, must open to the newest commit), during the log's restart
//! after one, and during the very first commit of a new file; the loss modes apply to each file apart
//! (either file's unsynced writes all kept while the other's are lost, or
//! both at random). The log packs records at 8-byte offsets, so sectors are
//! cut at absolute 512-byte boundaries and a garbled sector garbles only
//! the bytes the write covered (a write never damages durable bytes it did
//! not cover: SQLite's "powersafe overwrite").
//!
//! The workloads include key ranges removed by pruning whole subtrees and
//! trees cleared (`Ranges`): with logged commits, each is one redo
//! operation, replayed after a crash. The logged runs also overwrite
//! values of one length and delete keys (tree "fixed"), which they keep
//! as value overlays and tombstones beside leaves in the arena: the
//! states read back after each commit go
//! through the overlays, the crash images through the log's replay, and
//! the two must agree.
//!
//! Every run places its branches in branch regions of 2 pages
//! (`REGION_BYTES`), so the crash points also cover a commit that takes a
//! new region (written whole first) and the list of regions after its
//! meta.
//!
//! Default run (a minute or two in release on a 2-core machine, the two
//! modes in parallel): 11,652 crash states with logged commits off (6 per
//! crash point: keep all, drop all, 4 random; seed 1) and 15,444 with
//! them on (up to `LOGGED_VARIANTS` = 8 per crash point: each file's
//! unsynced writes kept or dropped, the 4 combinations, less those that
//! repeat one, then 4 random; seed 1); plus 471 and 636 crash states
//! during the first open after a crash (with logged commits on, during
//! the log's replay). The tests print the counts.
//!
//! `IRONBARK_CRASH_STATES=1000000 cargo test --release --test crash_sim -- --nocapture`
//! runs the long mode (at least that many crash states in each mode).

mod common;

use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex};

use common::{read_model, temp_db, Images, Model, Rng};
use ironbark::{BrokenProtocol, Database, Durability, IoHook, IoHookHandle, Options};

const SECTOR: usize = 512;

/// Pages per checkpoint step (`Options::checkpoint_step_pages`).
const STEP_PAGES: u64 = 4;
/// More steps than a checkpoint of these workloads takes.
const MAX_STEPS: u64 = 1000;

#[derive(Clone, Debug)]
enum Op {
    /// A write to the data file.
    Write { offset: u64, data: Vec<u8> },
    /// The data file's length set.
    SetLen(u64),
    /// An `fdatasync` of the data file.
    Sync,
    /// A write to the redo log.
    LogWrite { offset: u64, data: Vec<u8> },
    /// The redo log's length set.
    LogSetLen(u64),
    /// An `fdatasync` of the redo log.
    LogSync,
    /// A commit is about to start.
    CommitStart,
    /// Up to `commits` commits are about to start: `shrink_to_fit` (two),
    /// or, with logged commits pending, a checkpoint (`sync()`, `stats()`,
    /// and first thing in `shrink_to_fit`), which may go in steps, each a
    /// commit (`Options::checkpoint_step_pages`).
    CommitsStart { commits: u64 },
    /// A commit returned; `durable` when it was `Immediate` (or a `sync()`
    /// returned): everything up to `txn` must survive.
    Done { txn: u64, durable: bool },
}

impl Op {
    /// Whether the op changes a file (a distinct crash point follows it).
    fn is_io(&self) -> bool {
        matches!(
            self,
            Op::Write { .. }
                | Op::SetLen(_)
                | Op::Sync
                | Op::LogWrite { .. }
                | Op::LogSetLen(_)
                | Op::LogSync
        )
    }

    /// A short description, for failure messages.
    fn kind(&self) -> String {
        match self {
            Op::Write { offset, data } => format!("data write {} at {offset}", data.len()),
            Op::LogWrite { offset, data } => format!("log write {} at {offset}", data.len()),
            Op::SetLen(l) => format!("data set_len {l}"),
            Op::LogSetLen(l) => format!("log set_len {l}"),
            other => format!("{other:?}"),
        }
    }
}

#[derive(Default)]
struct Recorder {
    ops: Mutex<Vec<Op>>,
}

impl Recorder {
    fn push(&self, op: Op) {
        self.ops.lock().unwrap().push(op);
    }
}

impl IoHook for Recorder {
    fn on_write(&self, offset: u64, bufs: &[&[u8]]) -> io::Result<()> {
        self.push(Op::Write {
            offset,
            data: bufs.concat(),
        });
        Ok(())
    }
    fn on_sync(&self) -> io::Result<()> {
        self.push(Op::Sync);
        Ok(())
    }
    fn on_set_len(&self, len: u64) -> io::Result<()> {
        self.push(Op::SetLen(len));
        Ok(())
    }
    fn on_log_write(&self, offset: u64, bufs: &[&[u8]]) -> io::Result<()> {
        self.push(Op::LogWrite {
            offset,
            data: bufs.concat(),
        });
        Ok(())
    }
    fn on_log_sync(&self) -> io::Result<()> {
        self.push(Op::LogSync);
        Ok(())
    }
    fn on_log_set_len(&self, len: u64) -> io::Result<()> {
        self.push(Op::LogSetLen(len));
        Ok(())
    }
}

/// Whether commits are logged (`Options::logged_commits`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Logged commits off: every commit writes the data file.
    Plain,
    /// Logged commits on.
    Logged,
}

impl Mode {
    fn logged(self) -> bool {
        self == Mode::Logged
    }
}

/// What a workload did: the states by txn id, and the I/O log.
struct Run {
    base: Images,
    states: BTreeMap<u64, Model>,
    ops: Vec<Op>,
    shape: Shape,
}

/// What the commits of a run were (from its I/O log).
#[derive(Clone, Copy, Debug, Default)]
struct Shape {
    /// Commits that wrote the log and not the data file.
    logged: usize,
    /// Commits (and syncs, shrinks, stats) that wrote the data file.
    file_commits: usize,
    /// File commits with a logged commit before them and one after them.
    checkpoints_between: usize,
    /// Log writes at offset 0 after other log writes: the log restarted.
    restarts: usize,
    /// Restarts by a logged commit that first synced the data file (its
    /// base, a checkpoint, was not durable).
    restarts_after_sync: usize,
    /// Writes and syncs of the log; syncs of the data file.
    log_writes: usize,
    log_syncs: usize,
    data_syncs: usize,
    /// Steps of checkpoints written in steps (from the counters).
    checkpoint_steps: u64,
    /// Branches those steps rebuilt over runs of the newest commit's
    /// subtrees, and trees they spliced across a root split (counters).
    runs_spliced: u64,
    roots_grown: u64,
}

fn shape_of(ops: &[Op]) -> Shape {
    let mut s = Shape::default();
    let mut in_commit = false;
    let (mut wrote_log, mut wrote_data) = (false, false);
    let mut logged_before = false;
    let mut checkpoint_pending = false;
    let mut log_written = false;
    let mut synced = false;
    for op in ops {
        match op {
            Op::CommitStart | Op::CommitsStart { .. } => {
                in_commit = true;
                wrote_log = false;
                wrote_data = false;
                synced = false;
            }
            Op::Write { .. } => wrote_data = true,
            Op::LogWrite { offset, .. } => {
                wrote_log = true;
                s.log_writes += 1;
                if *offset == 0 && log_written {
                    s.restarts += 1;
                    if in_commit && synced && !wrote_data {
                        s.restarts_after_sync += 1;
                    }
                }
                log_written = true;
            }
            Op::LogSync => s.log_syncs += 1,
            Op::Sync => {
                s.data_syncs += 1;
                synced = true;
            }
            Op::Done { .. } if in_commit => {
                in_commit = false;
                if wrote_data {
                    s.file_commits += 1;
                    if logged_before {
                        checkpoint_pending = true;
                    }
                } else if wrote_log {
                    s.logged += 1;
                    logged_before = true;
                    if checkpoint_pending {
                        s.checkpoints_between += 1;
                        checkpoint_pending = false;
                    }
                }
            }
            _ => {}
        }
    }
    s
}

#[derive(Clone, Copy, Debug)]
enum Workload {
    /// Many small transactions of puts, overwrites and deletes over several
    /// trees, mixed durability.
    SmallTxns,
    /// Large values in overflow runs, and tree drops.
    LargeValues,
    /// A file that grows a lot (big transactions; with logged commits,
    /// some too large to log: checkpoints).
    Growth,
    /// A long-lived reader pinning pages while the writer goes on.
    PinnedReader,
    /// Small transactions on a file just created: a crash during the very
    /// first transaction (LMDB leaves an unopenable file there).
    FirstTxn,
    /// Small transactions of random inserts only: a tree that grows several
    /// times over between checkpoints, its root splitting on the way, so
    /// that checkpoint steps splice grown trees. On odd seeds the keys are
    /// long (100 bytes: a branch of 1 KiB holds eight) and go to four
    /// trees, each of which reaches three levels, so that roots split
    /// between checkpoints.
    Inserts,
    /// Refills of a tree of some hundred leaves, and key ranges removed
    /// from it: most ranges hold whole subtrees, which are freed from
    /// their parents' records (`delete_range`'s pruning), some trees are
    /// cleared; each is one redo operation with logged commits.
    Ranges,
}

/// Branch regions of 2 pages (docs/design.md, "Branch regions"): past 64
/// pages, every commit places its branches in them, takes new ones (each
/// written whole first) and names them after its meta, so the crash
/// points cover all of it.
const REGION_BYTES: usize = 2048;

fn run_workload(workload: Workload, seed: u64, broken: Option<BrokenProtocol>, mode: Mode) -> Run {
    let t = temp_db("crash.ib");
    let page_size = 1024;
    {
        // The starting file: one durable commit with a little data (with
        // logged commits, the log then holds its record, cleared at close).
        let db = Database::open_with(
            &t.path,
            &Options {
                page_size,
                logged_commits: mode.logged(),
                branch_region_bytes: REGION_BYTES,
                ..Options::default()
            },
        )
        .unwrap();
        if !matches!(workload, Workload::FirstTxn) {
            let mut tx = db.begin_write().unwrap();
            let tree = tx.open_tree("base").unwrap();
            for i in 0..50u32 {
                tx.put(&tree, &i.to_be_bytes(), b"base value").unwrap();
            }
            tx.commit().unwrap();
        }
    }
    let base = Images::read(&t.path);
    let recorder = Arc::new(Recorder::default());
    let options = Options {
        page_size,
        durability: Durability::None,
        io_hook: Some(IoHookHandle(recorder.clone())),
        broken_protocol: broken,
        logged_commits: mode.logged(),
        // Steps of a few pages: most checkpoints of logged commits go in
        // steps, and crashes hit between them.
        checkpoint_step_pages: Some(STEP_PAGES),
        branch_region_bytes: REGION_BYTES,
        ..Options::default()
    };
    let db = Database::open_with(&t.path, &options).unwrap();
    let mut rng = Rng::new(seed);
    let mut states = BTreeMap::new();
    let (txn0, model0) = read_model(&db).unwrap();
    states.insert(txn0, model0);
    let mut pinned = None;
    let commits = match workload {
        Workload::Growth => 12,
        _ => 40,
    };
    // A checkpoint: `f` may commit (with logged commits pending), changing
    // no data; `Done` as durable.
    // `durable`: `sync` makes every commit durable; the checkpoint `stats`
    // writes is not (asking for figures does not change what a crash
    // keeps).
    let checkpoint =
        |states: &mut BTreeMap<u64, Model>, txn: u64, durable: bool, f: &dyn Fn()| -> u64 {
            recorder.push(Op::CommitsStart { commits: MAX_STEPS });
            f();
            let (after, model) = read_model(&db).unwrap();
            for t in txn + 1..=after {
                states.insert(t, model.clone());
            }
            recorder.push(Op::Done {
                txn: after,
                durable,
            });
            after
        };
    for c in 0..commits {
        let mut tx = db.begin_write().unwrap();
        // With logged commits, some transactions are too large to log
        // (most of these: a redo record that outweighs its pages, its 1-3
        // KB values in blobs of 1 KiB pages; 12 of 16 in one run):
        // checkpoints, often not durable, after
        // which the next logged commit must make the file durable before
        // it restarts the log.
        let big = mode.logged()
            && rng.chance(match workload {
                Workload::Growth => 35,
                _ => 5,
            });
        let ops = match workload {
            Workload::Growth => 300 + rng.below(600),
            Workload::Inserts => 10 + rng.below(30),
            Workload::Ranges => 0,
            _ if big => 150 + rng.below(100),
            _ => 1 + rng.below(25),
        };
        if matches!(workload, Workload::Ranges) {
            let tree = tx.open_tree("ranges").unwrap();
            let key = |i: u64| format!("r{i:05}").into_bytes();
            // A tree of up to some 300 leaves of 1 KiB; a range of a
            // fifth of it or more holds 64 whole leaves (pruned).
            match if c < 2 { 0 } else { rng.below(16) } {
                0..=6 => {
                    for _ in 0..1000 + rng.below(1000) {
                        let len = 8 + rng.below(20) as usize;
                        tx.put(&tree, &key(rng.below(6000)), &rng.bytes(len))
                            .unwrap();
                    }
                }
                7..=12 => {
                    let from = rng.below(6000);
                    let to = from + 500 + rng.below(5000);
                    tx.delete_range(&tree, key(from)..key(to)).unwrap();
                }
                13 => {
                    tx.clear(&tree).unwrap();
                }
                _ => {
                    for _ in 0..1 + rng.below(10) {
                        tx.delete(&tree, &key(rng.below(6000))).unwrap();
                    }
                }
            }
        }
        for _ in 0..ops {
            if matches!(workload, Workload::Inserts) {
                // Long keys go to four trees, each of which gains levels.
                let (pad, trees) = if seed % 2 == 1 { (89, 4) } else { (0, 1) };
                let tree = tx.open_tree(&format!("grown{}", rng.below(trees))).unwrap();
                let key = format!("ins{:08}{:-<pad$}", rng.below(100_000_000), "").into_bytes();
                let len = 20 + rng.below(40) as usize;
                tx.put(&tree, &key, &rng.bytes(len)).unwrap();
                continue;
            }
            if mode.logged() && rng.chance(25) {
                // Values of one length: with logged commits, overwrites of
                // leaves in the arena are value overlays (the plain runs
                // keep their own stream of operations).
                // Deletes there are tombstones in the overlays.
                let tree = tx.open_tree("fixed").unwrap();
                let key = format!("fix{:03}", rng.below(200)).into_bytes();
                if rng.chance(30) {
                    tx.delete(&tree, &key).unwrap();
                } else {
                    tx.put(&tree, &key, &rng.bytes(16)).unwrap();
                }
                continue;
            }
            let name = ["a", "b", "c"][rng.below(3) as usize];
            let tree = tx.open_tree(name).unwrap();
            let key = format!("key{:04}", rng.below(400)).into_bytes();
            match rng.below(10) {
                0..=5 => {
                    let len = match workload {
                        Workload::LargeValues if rng.chance(30) => 1000 + rng.below(5000) as usize,
                        _ if big => 1000 + rng.below(2000) as usize,
                        _ => rng.below(60) as usize,
                    };
                    tx.put(&tree, &key, &rng.bytes(len)).unwrap();
                }
                6..=8 => {
                    tx.delete(&tree, &key).unwrap();
                }
                _ => {
                    if matches!(workload, Workload::LargeValues) && rng.chance(20) {
                        tx.drop_tree(name).unwrap();
                    }
                }
            }
        }
        // Make sure every commit changes something, so txn ids and commits
        // correspond one to one.
        let tree = tx.open_tree("counter").unwrap();
        tx.put(&tree, b"commit", &(c as u64).to_le_bytes()).unwrap();
        let durable = rng.chance(30);
        if durable {
            tx.set_durability(Durability::Immediate);
        }
        recorder.push(Op::CommitStart);
        tx.commit().unwrap();
        let (mut txn, model) = read_model(&db).unwrap();
        recorder.push(Op::Done { txn, durable });
        states.insert(txn, model);
        // Inserts checkpoints every third commit: its tree grows between
        // two checkpoints, and its root splits between some two.
        let checkpoint_now = match workload {
            Workload::Inserts => c % 3 == 2,
            _ => rng.chance(10),
        };
        if checkpoint_now {
            if mode.logged() {
                // A checkpoint if logged commits are pending: a commit.
                txn = checkpoint(&mut states, txn, true, &|| db.sync().unwrap());
            } else {
                db.sync().unwrap();
                recorder.push(Op::Done { txn, durable: true });
            }
        }
        // Giving the free tail back: a durable commit, a second meta, and
        // the file cut, each of which a crash may interrupt.
        if matches!(workload, Workload::Growth | Workload::LargeValues) && rng.chance(25) {
            recorder.push(Op::CommitsStart {
                commits: if mode.logged() { 2 + MAX_STEPS } else { 2 },
            });
            db.shrink_to_fit().unwrap();
            let (after, model) = read_model(&db).unwrap();
            recorder.push(Op::Done {
                txn: after,
                durable: true,
            });
            // Its commits change no data.
            for t in txn + 1..=after {
                states.insert(t, model.clone());
            }
        }
        if matches!(workload, Workload::PinnedReader) {
            if pinned.is_none() && rng.chance(20) {
                pinned = Some(db.begin_read().unwrap());
            } else if pinned.is_some() && rng.chance(10) {
                pinned = None;
            }
        }
    }
    drop(pinned);
    // With logged commits pending, `stats` writes a checkpoint first.
    let c = if mode.logged() {
        let (txn, _) = read_model(&db).unwrap();
        let stats = std::cell::Cell::new(None);
        checkpoint(&mut states, txn, false, &|| {
            stats.set(Some(db.stats().unwrap()))
        });
        stats.take().unwrap().counters
    } else {
        db.stats().unwrap().counters
    };
    drop(db);
    let ops = std::mem::take(&mut *recorder.ops.lock().unwrap());
    let shape = Shape {
        checkpoint_steps: c.checkpoint_steps,
        runs_spliced: c.checkpoint_runs_spliced,
        roots_grown: c.checkpoint_roots_grown,
        ..shape_of(&ops)
    };
    match mode {
        // The state chain went through each of its steps (appended,
        // sealed, compacted), so crashes hit each of them.
        Mode::Plain => assert!(
            c.state_bases > 0 && c.state_seals > 0 && c.state_bases + c.state_seals < c.commits,
            "{workload:?}: {c:?}"
        ),
        // Few file commits: the state chain moves little. Instead, the
        // log was written and synced, commits were logged, checkpoints
        // came between logged commits (so the log restarted after them),
        // and the data file was synced.
        Mode::Logged => assert!(
            shape.log_writes > 0
                // (Growth has 12 commits: maybe no `Immediate` logged one.)
                && (shape.log_syncs > 0 || matches!(workload, Workload::Growth))
                && shape.data_syncs > 0
                && shape.logged > 0
                && shape.checkpoints_between > 0
                && shape.restarts > 0
                // Same-size overwrites were value overlays (Inserts and
                // Ranges have none), and random inserts were kept beside
                // their leaves.
                && (c.values_overlaid > 0
                    || matches!(workload, Workload::Inserts | Workload::Ranges))
                && (c.inserts_overlaid > 0 || !matches!(workload, Workload::Inserts)),
            "{workload:?} seed {seed}: {shape:?} {c:?}"
        ),
    }
    Run {
        base,
        states,
        ops,
        shape,
    }
}

/// How a crash treats the unsynced writes.
#[derive(Clone, Copy, Debug)]
enum Loss {
    KeepAll,
    DropAll,
    /// Each sector kept, dropped or garbled at random.
    Random,
}

/// One file as a power cut finds it: durable bytes and length, and the
/// writes since its last sync.
struct FileSim<'a> {
    durable: Vec<u8>,
    len: u64,
    pending: Vec<(u64, &'a [u8])>,
}

impl<'a> FileSim<'a> {
    fn new(base: &[u8]) -> FileSim<'a> {
        FileSim {
            durable: base.to_vec(),
            len: base.len() as u64,
            pending: Vec::new(),
        }
    }
    fn write(&mut self, offset: u64, data: &'a [u8]) {
        self.pending.push((offset, data));
        self.len = self.len.max(offset + data.len() as u64);
    }
    fn sync(&mut self) {
        self.durable.resize(self.len as usize, 0);
        for (offset, data) in self.pending.drain(..) {
            self.durable[offset as usize..offset as usize + data.len()].copy_from_slice(data);
        }
    }
    /// Whether anything since the last sync could be lost.
    fn unsynced(&self) -> bool {
        !self.pending.is_empty() || self.len != self.durable.len() as u64
    }
    /// The file after the power cut. Each write is cut at absolute sector
    /// boundaries; each piece is kept, dropped or garbled (only the bytes
    /// the write covered).
    fn crash(self, loss: Loss, rng: &mut Rng) -> Vec<u8> {
        let mut image = self.durable;
        let keep_len = match loss {
            Loss::KeepAll => true,
            Loss::DropAll => false,
            Loss::Random => rng.chance(50),
        };
        if keep_len {
            image.resize(self.len as usize, 0);
        }
        for (offset, data) in self.pending {
            let (start, end) = (offset as usize, offset as usize + data.len());
            let mut at = start;
            while at < end {
                let next = ((at / SECTOR + 1) * SECTOR).min(end);
                let piece = &data[at - start..next - start];
                let here = at;
                at = next;
                if next > image.len() {
                    continue; // beyond a length that was lost
                }
                let fate = match loss {
                    Loss::KeepAll => 0,
                    Loss::DropAll => 1,
                    Loss::Random => rng.below(10),
                };
                match fate {
                    0..=5 => image[here..next].copy_from_slice(piece),
                    6..=8 => {}
                    _ => {
                        let garbage = rng.bytes(piece.len());
                        image[here..next].copy_from_slice(&garbage);
                    }
                }
            }
        }
        image
    }
}

/// The files a power cut after `ops[..at]` could leave: `loss.0` for the
/// data file's unsynced writes, `loss.1` for the log's.
fn crash_images(base: &Images, ops: &[Op], loss: (Loss, Loss), rng: &mut Rng) -> Images {
    let mut data = FileSim::new(&base.data);
    let mut log = FileSim::new(&base.log);
    for op in ops {
        match op {
            Op::Write { offset, data: d } => data.write(*offset, d),
            Op::SetLen(l) => data.len = *l,
            Op::Sync => data.sync(),
            Op::LogWrite { offset, data: d } => log.write(*offset, d),
            Op::LogSetLen(l) => log.len = *l,
            Op::LogSync => log.sync(),
            _ => {}
        }
    }
    let data = data.crash(loss.0, rng);
    // A log with nothing unsynced draws nothing from `rng` (so runs with
    // logged commits off see the same images as before the log existed).
    let log = if log.unsynced() {
        log.crash(loss.1, rng)
    } else {
        log.durable
    };
    Images { data, log }
}

/// The data file a power cut after `ops` (data file ops only) could leave.
fn crash_image(base: &[u8], ops: &[Op], loss: Loss, rng: &mut Rng) -> Vec<u8> {
    let base = Images {
        data: base.to_vec(),
        log: Vec::new(),
    };
    crash_images(&base, ops, (loss, loss), rng).data
}

/// The commits that must and may survive a crash after `ops[..at]`.
fn bounds(ops: &[Op], first_txn: u64) -> (u64, u64) {
    let mut floor = first_txn;
    let mut last_done = first_txn;
    let mut open = 0;
    for op in ops {
        match op {
            Op::CommitStart => open = 1,
            Op::CommitsStart { commits } => open = *commits,
            Op::Done { txn, durable } => {
                open = 0;
                last_done = *txn;
                if *durable {
                    floor = *txn;
                }
            }
            _ => {}
        }
    }
    (floor, last_done + open)
}

/// Opens crash images (the data file at `path`, the log beside it) and
/// checks the promises; returns a failure message.
fn verify_image(
    path: &Path,
    images: &Images,
    run: &Run,
    floor: u64,
    ceiling: u64,
    mode: Mode,
) -> Option<String> {
    images.write(path);
    let result = (|| -> ironbark::Result<Option<String>> {
        // With logged commits, a read-only process opens first: it cannot
        // replay the log into the file, so it rebuilds the logged commits
        // in its own memory, and must read the very commit the writable
        // open then replays.
        let read_only = match mode {
            Mode::Logged => {
                let ro = Database::open_with(
                    path,
                    &Options {
                        read_only: true,
                        logged_commits: true,
                        ..Options::default()
                    },
                )?;
                Some(read_model(&ro)?)
            }
            Mode::Plain => None,
        };
        let db = Database::open_with(
            path,
            &Options {
                logged_commits: mode.logged(),
                ..Options::default()
            },
        )?;
        db.check()?;
        let (txn, model) = read_model(&db)?;
        if txn < floor || txn > ceiling {
            return Ok(Some(format!(
                "opened at txn {txn}, expected {floor}..={ceiling}"
            )));
        }
        if let Some((ro_txn, ro_model)) = read_only {
            if ro_model != model || ro_txn > txn {
                return Ok(Some(format!(
                    "a read-only open read txn {ro_txn}, unlike the writable open's txn {txn}"
                )));
            }
        }
        match run.states.get(&txn) {
            Some(m) if *m == model => Ok(None),
            Some(_) => Ok(Some(format!("txn {txn}: contents differ from that commit"))),
            None => Ok(Some(format!("txn {txn}: no such commit"))),
        }
    })();
    match result {
        Ok(None) => None,
        Ok(Some(msg)) => Some(msg),
        Err(e) => Some(format!("error: {e}")),
    }
}

/// The losses of variant `v` of a crash point. With logged commits off,
/// the first two keep and drop everything, the rest are random. With them
/// on, the first four keep or drop each file's unsynced writes (all four
/// combinations), the rest are random for both; `None` for a combination
/// that repeats an earlier one (a file with nothing unsynced).
fn losses(v: usize, mode: Mode, data_unsynced: bool, log_unsynced: bool) -> Option<(Loss, Loss)> {
    use Loss::*;
    match (mode, v) {
        (Mode::Plain, 0) => Some((KeepAll, KeepAll)),
        (Mode::Plain, 1) => Some((DropAll, DropAll)),
        (Mode::Plain, _) => Some((Random, Random)),
        (Mode::Logged, 0) => Some((KeepAll, KeepAll)),
        (Mode::Logged, 1) => Some((DropAll, DropAll)),
        (Mode::Logged, 2) if data_unsynced && log_unsynced => Some((KeepAll, DropAll)),
        (Mode::Logged, 3) if data_unsynced && log_unsynced => Some((DropAll, KeepAll)),
        (Mode::Logged, 2 | 3) => None,
        (Mode::Logged, _) => Some((Random, Random)),
    }
}

struct Outcome {
    states: usize,
    failures: Vec<String>,
    shape: Shape,
}

fn explore(
    workload: Workload,
    seed: u64,
    broken: Option<BrokenProtocol>,
    mode: Mode,
    variants: usize,
) -> Outcome {
    let run = run_workload(workload, seed, broken, mode);
    let first_txn = *run.states.keys().next().unwrap();
    // Crash images go to memory when it can: each open syncs the file.
    let dir = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    let path = dir.path().join("image.ib");
    let mut rng = Rng::new(seed ^ 0xC4A5);
    let mut outcome = Outcome {
        states: 0,
        failures: Vec::new(),
        shape: run.shape,
    };
    let (mut data_unsynced, mut log_unsynced) = (false, false);
    for at in 0..=run.ops.len() {
        if at > 0 {
            match &run.ops[at - 1] {
                Op::Write { .. } | Op::SetLen(_) => data_unsynced = true,
                Op::Sync => data_unsynced = false,
                Op::LogWrite { .. } | Op::LogSetLen(_) => log_unsynced = true,
                Op::LogSync => log_unsynced = false,
                _ => {}
            }
            // Only points where something changed are distinct crash points.
            if !run.ops[at - 1].is_io() {
                continue;
            }
        }
        let (floor, ceiling) = bounds(&run.ops[..at], first_txn);
        for v in 0..variants {
            let Some(loss) = losses(v, mode, data_unsynced, log_unsynced) else {
                continue;
            };
            let images = crash_images(&run.base, &run.ops[..at], loss, &mut rng);
            outcome.states += 1;
            if let Some(f) = verify_image(&path, &images, &run, floor, ceiling, mode) {
                outcome.failures.push(format!(
                    "{mode:?} {workload:?} seed {seed} op {at} ({}) variant {v} {loss:?}: {f}",
                    if at == 0 {
                        "start".to_string()
                    } else {
                        run.ops[at - 1].kind()
                    }
                ));
            }
        }
    }
    outcome
}

fn target_states() -> usize {
    std::env::var("IRONBARK_CRASH_STATES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000)
}

/// Crash states per crash point with logged commits on (fewer than off:
/// a logged run has more crash points per commit, two files to lose).
const LOGGED_VARIANTS: usize = 8;

/// Every workload, seed after seed, until `target` crash states: panics at
/// the first seed with a failure.
fn explore_all(mode: Mode, variants: usize, target: usize) -> usize {
    let workloads = [
        Workload::FirstTxn,
        Workload::SmallTxns,
        Workload::LargeValues,
        Workload::Growth,
        Workload::PinnedReader,
        Workload::Inserts,
        Workload::Ranges,
    ];
    let mut states = 0;
    let (mut steps, mut runs, mut roots) = (0, 0, 0);
    let mut seed = 1;
    while states < target {
        for w in workloads {
            let outcome = explore(w, seed, None, mode, variants);
            states += outcome.states;
            steps += outcome.shape.checkpoint_steps;
            runs += outcome.shape.runs_spliced;
            roots += outcome.shape.roots_grown;
            if std::env::var_os("IRONBARK_CRASH_VERBOSE").is_some() {
                eprintln!(
                    "{mode:?} {w:?} seed {seed}: {} states, {:?}",
                    outcome.states, outcome.shape
                );
            }
            assert!(
                outcome.failures.is_empty(),
                "{} of {} crash states failed; first: {}",
                outcome.failures.len(),
                outcome.states,
                outcome.failures[0]
            );
        }
        seed += 1;
    }
    // With logged commits, checkpoints went in steps (most of SmallTxns',
    // FirstTxn's and PinnedReader's do; Growth's ride on large commits),
    // so crashes hit between steps.
    assert!(
        mode == Mode::Plain || steps > 0,
        "no checkpoint went in steps"
    );
    // Crashes hit the splices of trees that grew since their checkpoint
    // (Inserts): runs of subtrees, and roots that split.
    eprintln!("{mode:?}: {steps} checkpoint steps, {runs} runs spliced, {roots} grown roots");
    assert!(
        mode == Mode::Plain || (runs > 0 && roots > 0),
        "steps spliced {runs} runs and {roots} grown roots"
    );
    states
}

#[test]
fn every_crash_state_opens_to_a_commit_in_bounds() {
    let states = explore_all(Mode::Plain, 6, target_states());
    eprintln!("logged commits off: {states} crash states verified");
}

#[test]
fn every_crash_state_with_logged_commits_opens_to_a_commit_in_bounds() {
    let states = explore_all(Mode::Logged, LOGGED_VARIANTS, target_states());
    eprintln!("logged commits on: {states} crash states verified");
}

#[test]
fn the_harness_catches_a_broken_protocol() {
    for broken in [
        BrokenProtocol::ReuseBeforeDurable,
        BrokenProtocol::OneMetaSlot,
    ] {
        let mut failures = 0;
        let mut states = 0;
        for seed in 1..=2 {
            for w in [Workload::SmallTxns, Workload::Growth] {
                let o = explore(w, seed, Some(broken), Mode::Plain, 6);
                failures += o.failures.len();
                states += o.states;
            }
        }
        eprintln!("{broken:?}: {failures} of {states} crash states failed");
        assert!(
            failures > 0,
            "{broken:?}: the crash harness found nothing wrong with a broken protocol"
        );
    }
}

/// A crash during the first open after a crash (which verifies, syncs and
/// marks the commit clean, and with logged commits replays the log into a
/// durable checkpoint) must not lose the commit that open chose.
fn crash_during_first_open(mode: Mode) -> usize {
    let run = run_workload(Workload::SmallTxns, 42, None, mode);
    let first_txn = *run.states.keys().next().unwrap();
    let dir = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    let first = dir.path().join("first.ib");
    let second = dir.path().join("second.ib");
    let mut rng = Rng::new(99);
    let mut states = 0;
    // Crash images whose newest commit is unproven, so open has work to do.
    for at in (1..=run.ops.len()).step_by(7) {
        let (floor, ceiling) = bounds(&run.ops[..at], first_txn);
        let images = crash_images(
            &run.base,
            &run.ops[..at],
            (Loss::Random, Loss::Random),
            &mut rng,
        );
        images.write(&first);
        let recorder = Arc::new(Recorder::default());
        let options = Options {
            io_hook: Some(IoHookHandle(recorder.clone())),
            logged_commits: mode.logged(),
            ..Options::default()
        };
        let chosen = {
            let db = Database::open_with(&first, &options).unwrap();
            read_model(&db).unwrap().0
        };
        assert!((floor..=ceiling).contains(&chosen));
        let reopen_ops = std::mem::take(&mut *recorder.ops.lock().unwrap());
        for k in 0..=reopen_ops.len() {
            for loss in [Loss::KeepAll, Loss::DropAll, Loss::Random] {
                let images2 = crash_images(&images, &reopen_ops[..k], (loss, loss), &mut rng);
                states += 1;
                // The first open chose `chosen`; a crash during it must not
                // lose that commit or expose another.
                if let Some(f) = verify_image(&second, &images2, &run, chosen, chosen, mode) {
                    panic!("{mode:?}: crash at op {at}, then at op {k} of the reopen: {f}");
                }
            }
        }
    }
    states
}

#[test]
fn a_crash_during_the_first_open_after_a_crash_is_harmless() {
    let states = crash_during_first_open(Mode::Plain);
    eprintln!("{states} crash states during reopen verified");
    assert!(states > 100);
}

#[test]
fn a_crash_during_the_replay_after_a_crash_is_harmless() {
    let states = crash_during_first_open(Mode::Logged);
    eprintln!("logged commits on: {states} crash states during reopen (replay) verified");
    assert!(states > 100);
}

/// A commit abandoned by a crash (its meta lost) leaves valid-looking pages
/// with the next txn id. After reopening, the next commit reuses that txn id
/// and very likely the same page numbers. If that commit is then torn, the
/// abandoned pages sit exactly where its lost writes should be, with a
/// correct checksum, page number and txn id: only the checksums that parents
/// record (a Merkle tree) tell them apart. Open must fall back.
#[test]
fn a_stale_page_from_an_abandoned_commit_is_caught() {
    let page_size = 1024usize;
    let dir = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    let path = dir.path().join("stale.ib");
    // File commits: whether 300 small puts are logged depends on the size
    // of their redo record against their pages, and this test is about
    // the pages a file commit writes.
    let options = |hook: &Arc<Recorder>| Options {
        page_size,
        io_hook: Some(IoHookHandle(hook.clone())),
        logged_commits: false,
        ..Options::default()
    };
    let fill = |db: &Database, value: &[u8]| {
        let mut tx = db.begin_write().unwrap();
        let t = tx.open_tree("t").unwrap();
        for i in 0..300u32 {
            tx.put(&t, format!("key{i:04}").as_bytes(), value).unwrap();
        }
        tx.commit().unwrap();
    };
    {
        let db = Database::open_with(
            &path,
            &Options {
                page_size,
                logged_commits: false,
                ..Options::default()
            },
        )
        .unwrap();
        fill(&db, b"base");
    }
    let base = std::fs::read(&path).unwrap();
    let base_state = read_model(&Database::open(&path).unwrap()).unwrap();
    // Commit F, whose meta page never reaches the disk.
    let rec_f = Arc::new(Recorder::default());
    {
        let db = Database::open_with(&path, &options(&rec_f)).unwrap();
        fill(&db, b"abandoned commit F");
    }
    let ops_f = std::mem::take(&mut *rec_f.ops.lock().unwrap());
    let without_meta: Vec<Op> = ops_f
        .into_iter()
        .filter(|op| !matches!(op, Op::Write { offset, .. } if (*offset as usize) < 2 * page_size))
        .collect();
    let mut rng = Rng::new(5);
    let image_a = crash_image(&base, &without_meta, Loss::KeepAll, &mut rng);
    std::fs::write(&path, &image_a).unwrap();
    // Reopen (falls back to the base commit) and commit N, torn.
    let rec_n = Arc::new(Recorder::default());
    {
        let db = Database::open_with(&path, &options(&rec_n)).unwrap();
        assert_eq!(
            read_model(&db).unwrap(),
            base_state,
            "open fell back past commit F"
        );
        fill(&db, b"commit N");
    }
    let ops_n = std::mem::take(&mut *rec_n.ops.lock().unwrap());
    // Power fails before N's fsync completes: of N's writes before it,
    // every page write, one at a time, is lost; everything else is kept.
    let before_sync = ops_n.iter().position(|op| matches!(op, Op::Sync)).unwrap();
    let mut pages: Vec<(u64, Vec<u8>)> = Vec::new();
    for op in &ops_n[..before_sync] {
        if let Op::Write { offset, data } = op {
            for (i, p) in data.chunks(page_size).enumerate() {
                pages.push((offset + (i * page_size) as u64, p.to_vec()));
            }
        }
    }
    let mut stale_hits = 0;
    for lost in 0..pages.len() {
        if (pages[lost].0 as usize) < 2 * page_size {
            continue; // the meta page itself
        }
        let mut image = image_a.clone();
        for (i, (offset, data)) in pages.iter().enumerate() {
            let at = *offset as usize;
            if i == lost {
                if image
                    .get(at..at + page_size)
                    .is_some_and(|old| old[8..16] == data[8..16])
                {
                    stale_hits += 1; // the abandoned page has N's txn id
                }
                continue;
            }
            if image.len() < at + data.len() {
                image.resize(at + data.len(), 0);
            }
            image[at..at + data.len()].copy_from_slice(data);
        }
        std::fs::write(&path, &image).unwrap();
        let db = Database::open(&path).unwrap_or_else(|e| panic!("lost page {lost}: open: {e}"));
        db.check()
            .unwrap_or_else(|e| panic!("lost page {lost}: check: {e}"));
        assert_eq!(
            read_model(&db).unwrap(),
            base_state,
            "lost page {lost}: a torn commit N was accepted"
        );
    }
    assert!(
        stale_hits > 0,
        "no lost write of N landed on a page of F: the test tested nothing"
    );
    eprintln!(
        "{} torn versions of N, {stale_hits} over a stale page of F",
        pages.len()
    );
}

/// Creating a file is crash-safe: it is written and synced under a
/// temporary name and then linked into place, so a crash leaves either no
/// file (a leftover temporary file is harmless) or a complete one.
#[test]
fn a_crash_while_creating_the_file_leaves_no_unopenable_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new.ib");
    // What a crash in the middle of creation leaves: a partial temporary
    // file beside a name that does not exist yet.
    let leftover = dir.path().join("new.ib.creating-999999");
    std::fs::write(&leftover, b"IRONBARK partial").unwrap();
    let db = Database::open(&path).unwrap();
    db.check().unwrap();
    drop(db);
    // The file under its final name is complete from the first byte on:
    // a copy of it opens even if nothing else was ever written to it.
    let image = std::fs::read(&path).unwrap();
    let copy = dir.path().join("copy.ib");
    std::fs::write(&copy, &image).unwrap();
    Database::open(&copy).unwrap().check().unwrap();
}
