//! A read-only process's rebuilds of logged commits (`recovery::follow_log`)
//! under pressure: a rebuild larger than its dirty-page budget or its page
//! arena, a full reader table, and a snapshot held across many rebuilds
//! while the writer keeps logging and checkpointing (in steps too). What is
//! checked: every read agrees with a model of the committed data, `check`
//! reports no damage, and what cannot be done fails with an error, never a
//! panic, a hang or wrong data.
//!
//! The second process is this test binary re-run with a role in
//! `IRONBARK_ROR_ROLE`.

mod common;

use std::io::{BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{assert_clean, commit_to_t, counter, dump_t, hear, read_only, temp_db};
use ironbark::{Database, Durability, Error, IoHook, IoHookHandle, Options, ReadTxn};

const ROLE_ENV: &str = "IRONBARK_ROR_ROLE";
const PATH_ENV: &str = "IRONBARK_ROR_PATH";

/// Keys of tree `t` loaded by `base`.
const BASE_KEYS: u64 = 20_000;

type Model = common::Entries;

use common::t_key as key;

/// What commit `n` of the workload does to tree `t`: it sets `counter` to
/// `n`, and puts or deletes a few random keys (in and beyond the loaded
/// ones), with now and then a value that takes overflow pages.
fn ops(n: u64) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    common::t_ops(0x0b5e_55ed, n, 8, BASE_KEYS)
}

/// The data after the load and workload commits `0..commits`.
fn model(commits: u64) -> Model {
    common::t_model(BASE_KEYS, commits, ops)
}

/// Tree `t` of `BASE_KEYS` keys, in one transaction, then a checkpoint, so
/// that what follows is logged.
fn base(db: &Database) {
    common::load_t(db, BASE_KEYS);
}

/// Commits workload commit `n`.
fn commit(db: &Database, n: u64) {
    commit_to_t(db, ops(n));
}

/// Every read of `rx` agrees with `want`: a verified forward scan, a
/// backward one, the length, and lookups of every `step`-th key.
fn assert_reads(rx: &ReadTxn, want: &Model, step: usize) {
    let got = dump_t(rx);
    if &got != want {
        let first = got
            .iter()
            .zip(want.iter())
            .position(|(a, b)| a != b)
            .unwrap_or(got.len().min(want.len()));
        panic!(
            "snapshot {} differs from the model: {} entries for {}, first difference at entry {first}",
            rx.txn_id(),
            got.len(),
            want.len()
        );
    }
    let t = rx.tree("t").unwrap();
    assert_eq!(rx.len(&t).unwrap(), want.len() as u64);
    let back = rx
        .iter(&t)
        .unwrap()
        .rev()
        .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect::<ironbark::Result<Vec<_>>>()
        .unwrap();
    assert!(
        back.iter().map(|(k, v)| (k, v)).eq(want.iter().rev()),
        "backward scan"
    );
    for (k, v) in want.iter().step_by(step) {
        assert_eq!(rx.get(&t, k).unwrap(), Some(&v[..]), "get {k:?}");
    }
    for k in (BASE_KEYS..BASE_KEYS + BASE_KEYS / 10).step_by(step) {
        assert_eq!(
            rx.get(&t, &key(k)).unwrap(),
            want.get(&key(k)).map(|v| &v[..])
        );
    }
}

fn spawn(test: &str, role: &str, path: &Path) -> Child {
    common::role_command(test, ROLE_ENV, role, PATH_ENV, path)
        .spawn()
        .unwrap()
}

fn role() -> Option<String> {
    std::env::var(ROLE_ENV).ok()
}

fn role_path() -> String {
    std::env::var(PATH_ENV).unwrap()
}

/// Workload commits a killed writer makes: about 4,800 random changes,
/// which touch most of tree `t`'s 700 leaves.
const KILLED_COMMITS: u64 = 600;

/// A writer that loads, makes `KILLED_COMMITS` logged commits and dies
/// without a close (which would checkpoint): the log holds them all.
fn killed_writer(path: &str) {
    let db = Database::open_with(
        path,
        &Options {
            durability: Durability::None,
            ..Options::default()
        },
    )
    .unwrap();
    base(&db);
    for n in 0..KILLED_COMMITS {
        commit(&db, n);
    }
    assert_eq!(
        db.counters().logged_commits,
        KILLED_COMMITS,
        "{:?}",
        db.counters()
    );
    println!("ROR done");
    std::io::stdout().flush().unwrap();
    std::process::exit(0);
}

/// Runs `killed_writer` on `t` as a child of test `test`.
fn kill_a_writer(test: &str, t: &common::TempDb) {
    let mut child = spawn(test, "killed-writer", &t.path);
    let mut out = BufReader::new(child.stdout.take().unwrap());
    hear(&mut out, "ROR done");
    std::io::copy(&mut out, &mut std::io::sink()).unwrap();
    assert!(child.wait().unwrap().success());
}

const SPILL_TEST: &str = "a_rebuild_larger_than_the_dirty_page_budget_reads_every_commit";

/// A read-only process whose one rebuild of 600 logged commits (nearly
/// every leaf of the tree) is many times its dirty-page budget
/// (`Options::max_dirty_bytes`, 64 KiB): the rebuild spills, and still
/// reads exactly the committed data, and checks clean.
#[test]
fn a_rebuild_larger_than_the_dirty_page_budget_reads_every_commit() {
    if role().as_deref() == Some("killed-writer") {
        return killed_writer(&role_path());
    }
    let t = temp_db("spill.ib");
    kill_a_writer(SPILL_TEST, &t);
    let want = model(KILLED_COMMITS);
    let ro = Database::open_with(
        &t.path,
        &Options {
            max_dirty_bytes: 64 << 10,
            ..read_only()
        },
    )
    .unwrap();
    let rx = ro.begin_read().unwrap();
    assert_eq!(counter(&rx), KILLED_COMMITS - 1);
    assert_reads(&rx, &want, 7);
    assert_clean(&ro, want.len());
    assert!(ro.counters().spills > 0, "the rebuild did not spill");
    drop(rx);
    drop(ro);
    // The writable open replays the same commits into the file.
    let db = Database::open(&t.path).unwrap();
    assert_reads(&db.begin_read().unwrap(), &want, 101);
    assert_clean(&db, want.len());
}

const ARENA_TEST: &str = "a_rebuild_larger_than_the_page_arena_fails_cleanly";

/// A read-only process whose page arena (a quarter of
/// `Options::map_reservation`: 64 pages here) cannot hold its rebuild of
/// 600 logged commits: its open (which reads the newest commit) fails
/// with an error, every time, with no panic; once a writable open has
/// replayed the log into the file, it opens and reads every commit; and
/// its later rebuilds of small logged commits fit.
#[test]
fn a_rebuild_larger_than_the_page_arena_fails_cleanly() {
    if role().as_deref() == Some("killed-writer") {
        return killed_writer(&role_path());
    }
    let t = temp_db("arena.ib");
    kill_a_writer(ARENA_TEST, &t);
    let small = Options {
        map_reservation: 1 << 20,
        ..read_only()
    };
    for _ in 0..3 {
        match Database::open_with(&t.path, &small) {
            // A quarter of the 1 MiB reservation: not damage, a bound.
            Err(Error::ArenaFull { pages: 64 }) => {}
            other => panic!("a rebuild past the arena: {other:?}"),
        }
    }
    // With room, the same process reads them.
    let ro = Database::open_with(&t.path, &read_only()).unwrap();
    let rx = ro.begin_read().unwrap();
    assert_eq!(counter(&rx), KILLED_COMMITS - 1);
    assert_reads(&rx, &model(KILLED_COMMITS), 7);
    drop(rx);
    drop(ro);

    // The writable open replays the log into the file (and its close
    // checkpoints): then the small arena has nothing to rebuild.
    drop(Database::open(&t.path).unwrap());
    let ro = Database::open_with(&t.path, &small).unwrap();
    let rx = ro.begin_read().unwrap();
    assert_eq!(counter(&rx), KILLED_COMMITS - 1);
    assert_reads(&rx, &model(KILLED_COMMITS), 7);
    assert_clean(&ro, model(KILLED_COMMITS).len());
}

/// Holds the data file's `pause_at`-th sync once armed, until a line comes
/// on stdin: a writer stopped between the steps of a checkpoint.
#[derive(Default)]
struct PauseAtSync {
    armed: AtomicBool,
    syncs: AtomicU64,
}

impl IoHook for PauseAtSync {
    fn on_sync(&self) -> std::io::Result<()> {
        if self.armed.load(Ordering::SeqCst) && self.syncs.fetch_add(1, Ordering::SeqCst) == 3 {
            println!("ROR paused");
            std::io::stdout().flush().unwrap();
            let mut line = String::new();
            std::io::stdin().read_line(&mut line).unwrap();
        }
        Ok(())
    }
}

/// Reader slots of the database the serving writer makes.
const MAX_READERS: usize = 6;

/// A writer process that does what stdin asks, one line at a time, and
/// answers each with `ROR ok <logged commits> <checkpoint steps>`:
/// `load`, `commits <from> <to>` (workload commits), `checkpoint`,
/// `stepped-checkpoint` (a checkpoint that stops at its fourth sync, says
/// `ROR paused` and goes on at the next line), `hold <n>` (read
/// transactions kept open), `release`, `exit`. Its log's bound is small,
/// so it checkpoints by itself too, and its checkpoints go in steps of 16
/// pages.
fn serving_writer(path: &str) {
    let hook = Arc::new(PauseAtSync::default());
    let db = Database::open_with(
        path,
        &Options {
            durability: Durability::None,
            max_readers: MAX_READERS,
            checkpoint_log_bytes: Some(256 << 10),
            checkpoint_step_pages: Some(16),
            io_hook: Some(IoHookHandle(hook.clone())),
            ..Options::default()
        },
    )
    .unwrap();
    let mut held = Vec::new();
    let mut out = std::io::stdout();
    loop {
        let mut line = String::new();
        if std::io::stdin().read_line(&mut line).unwrap() == 0 {
            break;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        match words[..] {
            ["load"] => base(&db),
            ["commits", from, to] => {
                for n in from.parse().unwrap()..to.parse().unwrap() {
                    commit(&db, n);
                }
            }
            ["checkpoint"] => db.checkpoint().unwrap(),
            ["stepped-checkpoint"] => {
                hook.syncs.store(0, Ordering::SeqCst);
                hook.armed.store(true, Ordering::SeqCst);
                db.checkpoint().unwrap();
                hook.armed.store(false, Ordering::SeqCst);
            }
            ["hold", n] => {
                for _ in 0..n.parse().unwrap() {
                    held.push(db.begin_read().unwrap());
                }
            }
            ["release"] => held.clear(),
            ["exit"] => break,
            _ => panic!("unknown command {line:?}"),
        }
        let c = db.counters();
        writeln!(out, "ROR ok {} {}", c.logged_commits, c.checkpoint_steps).unwrap();
        out.flush().unwrap();
    }
    drop(held);
    drop(db);
    println!("ROR exited");
}

/// The parent's end of a `serving_writer`.
struct Writer {
    child: Child,
    stdin: ChildStdin,
    out: BufReader<ChildStdout>,
}

impl Writer {
    fn start(test: &str, path: &Path) -> Writer {
        let mut child = spawn(test, "serving-writer", path);
        let stdin = child.stdin.take().unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        Writer { child, stdin, out }
    }

    fn send(&mut self, command: &str) {
        writeln!(self.stdin, "{command}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Runs `command`; returns the writer's logged commits and checkpoint
    /// steps so far.
    fn ask(&mut self, command: &str) -> (u64, u64) {
        self.send(command);
        self.answer()
    }

    fn answer(&mut self) -> (u64, u64) {
        let a = hear(&mut self.out, "ROR ok ");
        let mut n = a.split(' ').map(|w| w.parse().unwrap());
        (n.next().unwrap(), n.next().unwrap())
    }

    fn exit(mut self) {
        self.send("exit");
        hear(&mut self.out, "ROR exited");
        std::io::copy(&mut self.out, &mut std::io::sink()).unwrap();
        assert!(self.child.wait().unwrap().success(), "the writer failed");
    }
}

fn read_only_with(max_readers: usize) -> Options {
    Options {
        max_readers,
        ..read_only()
    }
}

const FULL_TEST: &str = "a_full_reader_table_fails_a_rebuild_cleanly";

/// A read-only process that must rebuild logged commits while the reader
/// table is full (of its own readers, then of the writer's): `begin_read`,
/// `check`, `stats` and `readers` fail at once with `ReadersFull` (no
/// panic, no wait); the readers held read on; once a slot frees, the
/// rebuild reads the newest commit.
#[test]
fn a_full_reader_table_fails_a_rebuild_cleanly() {
    if role().as_deref() == Some("serving-writer") {
        return serving_writer(&role_path());
    }
    let t = temp_db("full.ib");
    let mut w = Writer::start(FULL_TEST, &t.path);
    w.ask("load");
    let (logged, _) = w.ask("commits 0 50");
    assert_eq!(logged, 50);
    let ro = Database::open_with(&t.path, &read_only_with(MAX_READERS)).unwrap();
    let mut held: Vec<ReadTxn> = (0..MAX_READERS).map(|_| ro.begin_read().unwrap()).collect();
    assert_eq!(counter(&held[0]), 49);
    let (logged, _) = w.ask("commits 50 60");
    assert_eq!(logged, 60, "not logged");
    let full = |ro: &Database| {
        let started = Instant::now();
        for _ in 0..3 {
            let r = ro.begin_read();
            assert!(
                matches!(r, Err(Error::ReadersFull { max: MAX_READERS })),
                "{r:?}"
            );
            assert!(matches!(ro.check(), Err(Error::ReadersFull { .. })));
            assert!(matches!(ro.stats(), Err(Error::ReadersFull { .. })));
            assert!(matches!(ro.readers(), Err(Error::ReadersFull { .. })));
        }
        assert!(started.elapsed() < Duration::from_secs(5), "waited");
    };
    full(&ro);
    assert_reads(&held[0], &model(50), 17);
    // A slot frees: the rebuild of the ten commits.
    held.pop();
    let rx = ro.begin_read().unwrap();
    assert_eq!(counter(&rx), 59);
    assert_reads(&rx, &model(60), 7);
    // The table full of the writer's readers (and two of this process's).
    held.truncate(1);
    held.push(rx);
    w.ask(&format!("hold {}", MAX_READERS - 2));
    w.ask("commits 60 70");
    full(&ro);
    assert_reads(&held[0], &model(50), 17);
    assert_reads(&held[1], &model(60), 17);
    w.ask("release");
    let rx = ro.begin_read().unwrap();
    assert_eq!(counter(&rx), 69);
    assert_reads(&rx, &model(70), 7);
    drop(rx);
    drop(held);
    assert_clean(&ro, model(70).len());
    w.exit();
}

const HELD_TEST: &str = "a_snapshot_held_across_rebuilds_and_stepped_checkpoints_reads_on";

/// A read-only process holds snapshots (a logged commit it rebuilt, one it
/// rebuilt on a step of a checkpoint its writer is in the middle of, and
/// a checkpoint) while the writer goes on logging and checkpointing, by
/// itself and on demand, in steps, reusing the pages the checkpoints free;
/// meanwhile the process rebuilds commit after commit. Every held snapshot
/// still reads exactly its commit, every new one its own, and `check`
/// passes.
#[test]
fn a_snapshot_held_across_rebuilds_and_stepped_checkpoints_reads_on() {
    if role().as_deref() == Some("serving-writer") {
        return serving_writer(&role_path());
    }
    let t = temp_db("held.ib");
    let mut w = Writer::start(HELD_TEST, &t.path);
    w.ask("load");
    w.ask("commits 0 100");
    let ro = Database::open_with(&t.path, &read_only_with(MAX_READERS)).unwrap();
    // (snapshot, its last commit)
    let mut kept: Vec<(ReadTxn, u64)> = Vec::new();
    let rx = ro.begin_read().unwrap();
    assert_eq!(counter(&rx), 99);
    kept.push((rx, 99));
    // Its reader keeps the durable commit it was built on.
    let built_on = ro.stats().unwrap().durable_txn_id;
    assert!(built_on < kept[0].0.txn_id());

    // A checkpoint stopped between its steps: the newest commit rebuilt on
    // the durable step.
    w.ask("commits 100 400");
    let (_, steps_before) = w.ask("commits 400 401");
    let logged_txn = ro.begin_read().unwrap().txn_id();
    w.send("stepped-checkpoint");
    hear(&mut w.out, "ROR paused");
    let rx = ro.begin_read().unwrap();
    assert_eq!(counter(&rx), 400);
    assert_reads(&rx, &model(401), 7);
    assert_clean(&ro, model(401).len());
    // Its reader registers the durable step it was built on, above the
    // logged commit's (the commit is rebuilt at the txn of the layout the
    // writer published after a step, if it published one, which is that
    // step's txn + 1: `logged::publish_step_layout`).
    let steps_txn = ro
        .readers()
        .unwrap()
        .iter()
        .map(|r| r.snapshot_txn)
        .max()
        .unwrap();
    assert!(
        steps_txn > logged_txn + 1 && steps_txn + 1 >= rx.txn_id(),
        "not rebuilt on a step: {steps_txn} (logged commit {logged_txn}, reader {})",
        rx.txn_id()
    );
    assert_eq!(ro.stats().unwrap().oldest_snapshot, Some(built_on));
    kept.push((rx, 400));
    w.send("go");
    let (_, steps) = w.answer();
    assert!(
        steps >= steps_before + 3,
        "no checkpoint in steps: {steps_before} -> {steps}"
    );

    let mut n = 401;
    let mut rebuilds = 0;
    for round in 0..12u64 {
        let to = n + 60;
        w.ask(&format!("commits {n} {to}"));
        n = to;
        if round % 3 == 1 {
            w.ask("checkpoint");
        }
        // Rebuilds of every few commits.
        for _ in 0..3 {
            let to = n + 5;
            w.ask(&format!("commits {n} {to}"));
            n = to;
            let rx = ro.begin_read().unwrap();
            assert_eq!(counter(&rx), n - 1);
            rebuilds += 1;
        }
        let rx = ro.begin_read().unwrap();
        assert_reads(&rx, &model(n), 29);
        if round == 5 {
            kept.push((rx, n - 1));
        }
        for (rx, last) in &kept {
            assert_reads(rx, &model(last + 1), 29);
        }
    }
    let (logged, steps_after) = w.ask("checkpoint");
    assert!(steps_after > steps, "no more checkpoints in steps");
    assert!(logged > n / 2, "too few logged commits: {logged} of {n}");
    assert!(rebuilds >= 36);
    for (rx, last) in &kept {
        assert_reads(rx, &model(last + 1), 3);
    }
    assert_clean(&ro, model(n).len());
    drop(kept);
    assert_clean(&ro, model(n).len());
    w.exit();
}

const RACING_TEST: &str = "rebuilds_racing_a_writer_that_never_pauses_all_succeed";

/// Two threads of a read-only process rebuild commit after commit while
/// the writer logs 2,000 commits without a pause, its small log bound
/// checkpointing them (in steps) and restarting the log every few dozen
/// commits. Every `begin_read` succeeds: a scan that a checkpoint's new
/// chain cut short is a reason to look again, not damage
/// (`recovery::short_chain` reports a short chain only when the durable
/// commit did not move). Each thread reads commits in order, each one
/// exactly (every tenth read checked against the model), and the last
/// read after the writer is done is its last commit.
#[test]
fn rebuilds_racing_a_writer_that_never_pauses_all_succeed() {
    if role().as_deref() == Some("serving-writer") {
        return serving_writer(&role_path());
    }
    let t = temp_db("racing.ib");
    let mut w = Writer::start(RACING_TEST, &t.path);
    w.ask("load");
    w.ask("commits 0 10");
    let ro = Arc::new(Database::open_with(&t.path, &read_only_with(MAX_READERS)).unwrap());
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (ro, done) = (ro.clone(), done.clone());
            std::thread::spawn(move || {
                let (mut last, mut reads) = (0, 0u64);
                while !done.load(Ordering::SeqCst) {
                    let rx = ro.begin_read().unwrap();
                    let now = counter(&rx);
                    assert!(now >= last, "read commit {now} after {last}");
                    if reads % 10 == 0 {
                        assert_reads(&rx, &model(now + 1), 97);
                    }
                    last = now;
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    let to = 2010;
    w.send(&format!("commits 10 {to}"));
    let (logged, steps) = w.answer();
    done.store(true, Ordering::SeqCst);
    for r in readers {
        let reads = r.join().expect("a reader failed");
        assert!(reads > 0);
    }
    assert!(logged > 1000, "too few logged commits: {logged}");
    assert!(steps > 0, "no checkpoint in steps");
    let rx = ro.begin_read().unwrap();
    assert_eq!(counter(&rx), to - 1);
    assert_reads(&rx, &model(to), 7);
    drop(rx);
    w.exit();
}

const PINS_TEST: &str = "a_read_only_stats_count_the_arena_versions_its_readers_keep";

/// `Stats::pages_pinned_by_readers` in a read-only process counts the
/// versions of its own page arena that its readers keep. A reader of a
/// rebuilt commit registers the older durable commit the rebuild was
/// built on (`txn::read::protector`), so its slot does not show the
/// snapshot whose versions it reads: those are counted by the snapshot.
/// The versions a later rebuild replaced stay counted while the reader
/// lives, and are not once it is gone.
#[test]
fn a_read_only_stats_count_the_arena_versions_its_readers_keep() {
    if role().as_deref() == Some("serving-writer") {
        return serving_writer(&role_path());
    }
    let t = temp_db("pins.ib");
    let mut w = Writer::start(PINS_TEST, &t.path);
    w.ask("load");
    w.ask("commits 0 20");
    let ro = Database::open_with(&t.path, &read_only_with(MAX_READERS)).unwrap();
    let held = ro.begin_read().unwrap();
    assert_eq!(counter(&held), 19);
    let built_on = ro.stats().unwrap().durable_txn_id;
    assert!(built_on < held.txn_id(), "not a rebuilt snapshot");
    let alone = ro.stats().unwrap().pages_pinned_by_readers;

    // Every commit changes the counter's leaf: the next rebuild replaces
    // the held snapshot's version of it.
    w.ask("commits 20 30");
    let rx = ro.begin_read().unwrap();
    assert_eq!(counter(&rx), 29);
    drop(rx);
    let kept = ro.stats().unwrap().pages_pinned_by_readers;
    assert!(
        kept > alone,
        "the held reader's replaced versions are not counted: {alone} -> {kept}"
    );
    assert_reads(&held, &model(20), 7);

    drop(held);
    drop(ro.begin_read().unwrap());
    let released = ro.stats().unwrap().pages_pinned_by_readers;
    assert!(
        released < kept,
        "versions still counted after their reader ended: {kept} -> {released}"
    );
    w.exit();
}
