//! Simulated power loss (SQLite's crash tests, ALICE's crash states).
//!
//! A recording I/O hook logs every write, length change and sync the engine
//! makes. From the log, the harness builds the file a power cut could leave
//! at each point: everything synced, plus any subset of the unsynced writes,
//! sector by sector kept, dropped or garbled, with or without the unsynced
//! length change. Each such file must open without repair, pass `check()`,
//! and hold exactly the state of some commit `k` with
//! (last commit acknowledged durable) <= k <= (last commit attempted).
//! The same harness run with a deliberately broken commit protocol must
//! find failures: that shows it can fail.
//!
//! `IRONBARK_CRASH_STATES=1000000 cargo test --release --test crash_sim -- --nocapture`
//! runs the long mode (at least that many crash states).

mod common;

use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex};

use common::{read_model, temp_db, Model, Rng};
use ironbark::{BrokenProtocol, Database, Durability, IoHook, IoHookHandle, Options};

const SECTOR: usize = 512;

#[derive(Clone, Debug)]
enum Op {
    Write {
        offset: u64,
        data: Vec<u8>,
    },
    SetLen(u64),
    Sync,
    /// A commit is about to start.
    CommitStart,
    /// `Database::shrink_to_fit` is about to start: up to two commits.
    ShrinkStart,
    /// A commit returned; `durable` when it was `Immediate` (or a `sync()`
    /// returned): everything up to `txn` must survive.
    Done {
        txn: u64,
        durable: bool,
    },
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
}

/// What a workload did: the states by txn id, and the I/O log.
struct Run {
    base_image: Vec<u8>,
    states: BTreeMap<u64, Model>,
    ops: Vec<Op>,
}

#[derive(Clone, Copy, Debug)]
enum Workload {
    /// Many small transactions of puts, overwrites and deletes over several
    /// trees, mixed durability.
    SmallTxns,
    /// Large values in overflow runs, and tree drops.
    LargeValues,
    /// A file that grows a lot (big transactions).
    Growth,
    /// A long-lived reader pinning pages while the writer goes on.
    PinnedReader,
    /// Small transactions on a file just created: a crash during the very
    /// first transaction (LMDB leaves an unopenable file there).
    FirstTxn,
}

fn run_workload(workload: Workload, seed: u64, broken: Option<BrokenProtocol>) -> Run {
    let t = temp_db("crash.ib");
    let page_size = 1024;
    {
        // The starting file: one durable commit with a little data.
        let db = Database::open_with(
            &t.path,
            &Options {
                page_size,
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
    let base_image = std::fs::read(&t.path).unwrap();
    let recorder = Arc::new(Recorder::default());
    let options = Options {
        page_size,
        durability: Durability::None,
        io_hook: Some(IoHookHandle(recorder.clone())),
        broken_protocol: broken,
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
    for c in 0..commits {
        let mut tx = db.begin_write().unwrap();
        let ops = match workload {
            Workload::Growth => 300 + rng.below(600),
            _ => 1 + rng.below(25),
        };
        for _ in 0..ops {
            let name = ["a", "b", "c"][rng.below(3) as usize];
            let tree = tx.open_tree(name).unwrap();
            let key = format!("key{:04}", rng.below(400)).into_bytes();
            match rng.below(10) {
                0..=5 => {
                    let len = match workload {
                        Workload::LargeValues if rng.chance(30) => 1000 + rng.below(5000) as usize,
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
        let (txn, model) = read_model(&db).unwrap();
        recorder.push(Op::Done { txn, durable });
        states.insert(txn, model);
        if rng.chance(10) {
            db.sync().unwrap();
            recorder.push(Op::Done { txn, durable: true });
        }
        // Giving the free tail back: a durable commit, a second meta, and
        // the file cut, each of which a crash may interrupt.
        if matches!(workload, Workload::Growth | Workload::LargeValues) && rng.chance(25) {
            recorder.push(Op::ShrinkStart);
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
    // The state chain went through each of its steps (appended, sealed,
    // compacted), so crashes hit each of them.
    let c = db.stats().unwrap().counters;
    assert!(
        c.state_bases > 0 && c.state_seals > 0 && c.state_bases + c.state_seals < c.commits,
        "{workload:?}: {c:?}"
    );
    drop(db);
    let ops = std::mem::take(&mut *recorder.ops.lock().unwrap());
    Run {
        base_image,
        states,
        ops,
    }
}

/// How a crash treats the unsynced writes.
#[derive(Clone, Copy)]
enum Loss {
    KeepAll,
    DropAll,
    /// Each sector kept, dropped or garbled at random.
    Random,
}

/// The file a power cut after `ops[..at]` could leave.
fn crash_image(base: &[u8], ops: &[Op], loss: Loss, rng: &mut Rng) -> Vec<u8> {
    let mut durable = base.to_vec();
    let mut len = base.len() as u64;
    let mut pending: Vec<(u64, &[u8])> = Vec::new();
    for op in ops {
        match op {
            Op::Write { offset, data } => {
                pending.push((*offset, data));
                len = len.max(offset + data.len() as u64);
            }
            Op::SetLen(l) => len = *l,
            Op::Sync => {
                durable.resize(len as usize, 0);
                for (offset, data) in pending.drain(..) {
                    durable[offset as usize..offset as usize + data.len()].copy_from_slice(data);
                }
            }
            _ => {}
        }
    }
    let mut image = durable;
    let keep_len = match loss {
        Loss::KeepAll => true,
        Loss::DropAll => false,
        Loss::Random => rng.chance(50),
    };
    if keep_len {
        image.resize(len as usize, 0);
    }
    for (offset, data) in pending {
        for (i, sector) in data.chunks(SECTOR).enumerate() {
            let at = offset as usize + i * SECTOR;
            if at + sector.len() > image.len() {
                continue; // beyond a length that was lost
            }
            let fate = match loss {
                Loss::KeepAll => 0,
                Loss::DropAll => 1,
                Loss::Random => rng.below(10),
            };
            match fate {
                0..=5 => image[at..at + sector.len()].copy_from_slice(sector),
                6..=8 => {}
                _ => {
                    let garbage = rng.bytes(sector.len());
                    image[at..at + sector.len()].copy_from_slice(&garbage);
                }
            }
        }
    }
    image
}

/// The commits that must and may survive a crash after `ops[..at]`.
fn bounds(ops: &[Op], first_txn: u64) -> (u64, u64) {
    let mut floor = first_txn;
    let mut last_done = first_txn;
    let mut open = 0;
    for op in ops {
        match op {
            Op::CommitStart => open = 1,
            Op::ShrinkStart => open = 2,
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

/// Opens a crash image and checks the promises; returns a failure message.
fn verify_image(path: &Path, image: &[u8], run: &Run, floor: u64, ceiling: u64) -> Option<String> {
    std::fs::write(path, image).unwrap();
    let result = (|| -> ironbark::Result<Option<String>> {
        let db = Database::open(path)?;
        db.check()?;
        let (txn, model) = read_model(&db)?;
        if txn < floor || txn > ceiling {
            return Ok(Some(format!(
                "opened at txn {txn}, expected {floor}..={ceiling}"
            )));
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

struct Outcome {
    states: usize,
    failures: Vec<String>,
}

fn explore(
    workload: Workload,
    seed: u64,
    broken: Option<BrokenProtocol>,
    variants: usize,
) -> Outcome {
    let run = run_workload(workload, seed, broken);
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
    };
    for at in 0..=run.ops.len() {
        // Only points where something changed are distinct crash points.
        if at > 0 && !matches!(run.ops[at - 1], Op::Write { .. } | Op::SetLen(_) | Op::Sync) {
            continue;
        }
        let (floor, ceiling) = bounds(&run.ops[..at], first_txn);
        for v in 0..variants {
            let loss = match v {
                0 => Loss::KeepAll,
                1 => Loss::DropAll,
                _ => Loss::Random,
            };
            let image = crash_image(&run.base_image, &run.ops[..at], loss, &mut rng);
            outcome.states += 1;
            if let Some(f) = verify_image(&path, &image, &run, floor, ceiling) {
                outcome
                    .failures
                    .push(format!("{workload:?} seed {seed} op {at} variant {v}: {f}"));
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

#[test]
fn every_crash_state_opens_to_a_commit_in_bounds() {
    let target = target_states();
    let workloads = [
        Workload::FirstTxn,
        Workload::SmallTxns,
        Workload::LargeValues,
        Workload::Growth,
        Workload::PinnedReader,
    ];
    let mut states = 0;
    let mut seed = 1;
    while states < target {
        for w in workloads {
            let outcome = explore(w, seed, None, 6);
            states += outcome.states;
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
    eprintln!("{states} crash states verified");
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
                let o = explore(w, seed, Some(broken), 6);
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

#[test]
fn a_crash_during_the_first_open_after_a_crash_is_harmless() {
    let run = run_workload(Workload::SmallTxns, 42, None);
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
        let image = crash_image(&run.base_image, &run.ops[..at], Loss::Random, &mut rng);
        std::fs::write(&first, &image).unwrap();
        let recorder = Arc::new(Recorder::default());
        let options = Options {
            io_hook: Some(IoHookHandle(recorder.clone())),
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
                let image2 = crash_image(&image, &reopen_ops[..k], loss, &mut rng);
                states += 1;
                // The first open chose `chosen`; a crash during it must not
                // lose that commit or expose another.
                if let Some(f) = verify_image(&second, &image2, &run, chosen, chosen) {
                    panic!("crash at op {at}, then at op {k} of the reopen: {f}");
                }
            }
        }
    }
    eprintln!("{states} crash states during reopen verified");
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
    let options = |hook: &Arc<Recorder>| Options {
        page_size,
        io_hook: Some(IoHookHandle(hook.clone())),
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
