//! Logged commits (`Options::logged_commits`): small transactions go to the
//! redo log and the page arena, checkpoints write the file. What is
//! checked: every commit is read back at once and after reopening, a
//! reader's snapshot stays whole across logged commits and checkpoints, a
//! single-put commit writes a log record instead of pages, and a process
//! killed at random moments loses no commit it reported (the next open
//! replays the log).

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{temp_db, Rng};
use ironbark::{Database, Durability, Options};

fn logged(durability: Durability) -> Options {
    Options {
        durability,
        logged_commits: true,
        ..Options::default()
    }
}

#[test]
fn logged_commits_are_read_back_kept_apart_from_old_snapshots_and_reopened() {
    let t = temp_db("logged.ib");
    let db = Database::open_with(&t.path, &logged(Durability::None)).unwrap();
    let mut tx = db.begin_write().unwrap();
    let tree = tx.open_tree("t").unwrap();
    for i in 0..5_000u32 {
        tx.put(&tree, &i.to_be_bytes(), b"v0").unwrap();
    }
    tx.commit().unwrap();
    let old = db.begin_read().unwrap();
    let before = db.stats().unwrap().counters;
    let mut rng = Rng::new(7);
    let commits = 3_000u32;
    for n in 0..commits {
        let mut tx = db.begin_write().unwrap();
        if n % 10 == 0 {
            tx.set_durability(Durability::Immediate);
        }
        let k = rng.below(5_000) as u32;
        tx.put(&tree, &k.to_be_bytes(), format!("v{n}").as_bytes())
            .unwrap();
        if n % 7 == 0 {
            tx.delete(&tree, &((k + 1) % 5_000).to_be_bytes()).unwrap();
        }
        tx.commit().unwrap();
        let rx = db.begin_read().unwrap();
        assert_eq!(
            rx.get(&tree, &k.to_be_bytes()).unwrap(),
            Some(format!("v{n}").as_bytes()),
            "commit {n} not visible"
        );
    }
    // Backups of a snapshot whose newest pages are in memory: compact_to
    // reads them, copy_to refuses (a copy of the file's pages would be an
    // older commit).
    {
        let rx = db.begin_read().unwrap();
        let want: Vec<(Vec<u8>, Vec<u8>)> = rx
            .iter(&tree)
            .unwrap()
            .map(|e| e.unwrap())
            .map(|(k, v)| (k.to_vec(), v.to_vec()))
            .collect();
        assert!(matches!(
            rx.copy_to(t.dir.path().join("copy.ib")),
            Err(ironbark::Error::InvalidOption(_))
        ));
        assert!(!t.dir.path().join("copy.ib").exists());
        rx.compact_to(t.dir.path().join("compact.ib")).unwrap();
        let copy = Database::open(t.dir.path().join("compact.ib")).unwrap();
        copy.check().unwrap();
        let crx = copy.begin_read().unwrap();
        let ct = crx.tree("t").unwrap();
        let got: Vec<(Vec<u8>, Vec<u8>)> = crx
            .iter(&ct)
            .unwrap()
            .map(|e| e.unwrap())
            .map(|(k, v)| (k.to_vec(), v.to_vec()))
            .collect();
        assert_eq!(got, want, "compact_to of a logged snapshot");
    }
    // `stats` checkpoints first; its own commit is counted.
    let after = db.stats().unwrap().counters;
    let per_commit = (after.bytes_written - before.bytes_written) / u64::from(commits);
    assert!(
        per_commit < 4096,
        "a logged single-put commit wrote {per_commit} bytes on average: pages, not a record"
    );
    // The old snapshot still sees the first commit, whole.
    let n = old
        .iter(&tree)
        .unwrap()
        .map(|e| e.unwrap())
        .inspect(|(_, v)| assert_eq!(*v, b"v0"))
        .count();
    assert_eq!(n, 5_000);
    drop(old);
    let expected: Vec<(Vec<u8>, Vec<u8>)> = {
        let rx = db.begin_read().unwrap();
        rx.iter(&tree)
            .unwrap()
            .map(|e| e.unwrap())
            .map(|(k, v)| (k.to_vec(), v.to_vec()))
            .collect()
    };
    db.check().unwrap();
    drop(db);
    let db = Database::open_with(&t.path, &logged(Durability::None)).unwrap();
    db.check().unwrap();
    let rx = db.begin_read().unwrap();
    let tree = rx.tree("t").unwrap();
    let found: Vec<(Vec<u8>, Vec<u8>)> = rx
        .iter(&tree)
        .unwrap()
        .map(|e| e.unwrap())
        .map(|(k, v)| (k.to_vec(), v.to_vec()))
        .collect();
    assert_eq!(found, expected);
}

const CHILD_ENV: &str = "IRONBARK_LOGGED_KILL_CHILD";

/// The child: logged commits of key `n{n}` and the counter, one per
/// transaction, `Immediate`, printing `n` after each returns; trees are
/// created and dropped on the way, so the log carries those too.
fn child(path: &str) {
    let db = Database::open_with(path, &logged(Durability::Immediate)).expect("child open");
    let start = {
        let rx = db.begin_read().unwrap();
        match rx.tree("t") {
            Ok(t) => rx
                .get(&t, b"counter")
                .unwrap()
                .map(|v| u64::from_le_bytes(v.try_into().unwrap()) + 1)
                .unwrap_or(0),
            Err(_) => 0,
        }
    };
    let mut out = std::io::stdout().lock();
    let mut rng = Rng::new(start);
    for n in start.. {
        let mut tx = db.begin_write().unwrap();
        let t = tx.open_tree("t").unwrap();
        let len = rng.below(3) as usize * 900;
        tx.put(&t, format!("n{n:08}").as_bytes(), &rng.bytes(len))
            .unwrap();
        tx.put(&t, b"counter", &n.to_le_bytes()).unwrap();
        if n >= 50 {
            tx.delete(&t, format!("n{:08}", n - 50).as_bytes()).unwrap();
        }
        if n % 5 == 0 {
            let side = tx.open_tree(&format!("side{}", n % 3)).unwrap();
            tx.put(&side, b"k", &n.to_le_bytes()).unwrap();
        }
        if n % 15 == 7 {
            tx.drop_tree(&format!("side{}", (n + 1) % 3)).unwrap();
        }
        tx.commit().unwrap();
        writeln!(out, "{n}").unwrap();
        out.flush().unwrap();
    }
}

#[test]
fn a_process_killed_at_random_moments_loses_no_logged_commit() {
    if let Ok(path) = std::env::var(CHILD_ENV) {
        child(&path);
        return;
    }
    let kills: u64 = std::env::var("IRONBARK_KILLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40);
    let t = temp_db("logged-kill.ib");
    Database::open_with(&t.path, &logged(Durability::Immediate)).unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut rng = Rng::new(2026);
    let mut last_reported: Option<u64> = None;
    for kill in 0..kills {
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "a_process_killed_at_random_moments_loses_no_logged_commit",
                "--nocapture",
            ])
            .env(CHILD_ENV, &t.path)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut last = None;
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Ok(n) = line.trim().parse::<u64>() {
                    last = Some(n);
                }
            }
            last
        });
        let delay = Duration::from_micros(5_000 + rng.below(40_000));
        let started = Instant::now();
        while started.elapsed() < delay {
            std::thread::sleep(Duration::from_micros(500));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        if let Some(n) = reader.join().unwrap() {
            last_reported = Some(n);
        }
        let db = Database::open_with(&t.path, &logged(Durability::Immediate))
            .unwrap_or_else(|e| panic!("kill {kill}: open: {e}"));
        db.check()
            .unwrap_or_else(|e| panic!("kill {kill}: check: {e}"));
        let rx = db.begin_read().unwrap();
        if let Some(last) = last_reported {
            let tree = rx.tree("t").unwrap();
            let counter = u64::from_le_bytes(
                rx.get(&tree, b"counter")
                    .unwrap()
                    .unwrap()
                    .try_into()
                    .unwrap(),
            );
            assert!(
                counter >= last,
                "kill {kill}: commit {last} was reported but the file holds {counter}"
            );
            for n in counter.saturating_sub(49)..=counter {
                assert!(
                    rx.get(&tree, format!("n{n:08}").as_bytes())
                        .unwrap()
                        .is_some(),
                    "kill {kill}: commit {n} lost"
                );
            }
        }
    }
    assert!(
        last_reported.is_some_and(|n| n > kills),
        "the children committed too little to test anything"
    );
    eprintln!(
        "{kills} kills, {} logged commits reported",
        last_reported.unwrap() + 1
    );
}

const ROLE_ENV: &str = "IRONBARK_LOGGED_ROLE";

/// Reads the counter of tree `t`.
fn counter(db: &Database) -> ironbark::Result<u64> {
    let rx = db.begin_read()?;
    let t = rx.tree("t")?;
    Ok(u64::from_le_bytes(
        rx.get(&t, b"counter")?.unwrap().try_into().unwrap(),
    ))
}

/// A second process: reads the counter (a writable one replays the first
/// process's logged commits at open; a read-only one waits to be told the
/// first committed again), then, if writable, commits the next number.
fn joiner(path: &str, read_only: bool) {
    let db = Database::open_with(
        path,
        &Options {
            read_only,
            logged_commits: true,
            ..Options::default()
        },
    )
    .unwrap();
    let mut out = std::io::stdout().lock();
    if read_only {
        assert!(matches!(counter(&db), Err(ironbark::Error::Locked)));
        writeln!(out, "JOINER locked").unwrap();
        out.flush().unwrap();
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).unwrap();
    }
    let n = counter(&db).unwrap();
    if !read_only {
        let mut tx = db.begin_write().unwrap();
        let t = tx.open_tree("t").unwrap();
        tx.put(&t, b"counter", &(n + 1).to_le_bytes()).unwrap();
        tx.commit().unwrap();
        assert_eq!(db.stats().unwrap().counters.logged_commits, 0);
    }
    writeln!(out, "JOINER {n}").unwrap();
    out.flush().unwrap();
}

fn hear(out: &mut impl BufRead) -> String {
    let mut line = String::new();
    loop {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "child said nothing");
        if let Some(at) = line.find("JOINER ") {
            return line[at + 7..].trim_end().to_string();
        }
    }
}

#[test]
fn a_process_joining_reads_every_logged_commit() {
    if let Ok(role) = std::env::var(ROLE_ENV) {
        joiner(&std::env::var(CHILD_ENV).unwrap(), role == "ro");
        return;
    }
    for role in ["rw", "ro"] {
        let t = temp_db("joined.ib");
        let db = Database::open_with(&t.path, &logged(Durability::None)).unwrap();
        for n in 0..200u64 {
            let mut tx = db.begin_write().unwrap();
            let tree = tx.open_tree("t").unwrap();
            tx.put(&tree, b"counter", &n.to_le_bytes()).unwrap();
            tx.put(&tree, &n.to_be_bytes(), &[7u8; 100]).unwrap();
            tx.commit().unwrap();
        }
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "a_process_joining_reads_every_logged_commit",
                "--nocapture",
            ])
            .env(ROLE_ENV, role)
            .env(CHILD_ENV, &t.path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        if role == "ro" {
            assert_eq!(hear(&mut out), "locked");
            // Our next commit writes the file (two processes): the reader
            // can read it.
            let mut tx = db.begin_write().unwrap();
            let tree = tx.open_tree("t").unwrap();
            tx.put(&tree, b"counter", &200u64.to_le_bytes()).unwrap();
            tx.commit().unwrap();
            writeln!(child.stdin.as_mut().unwrap(), "go").unwrap();
            assert_eq!(hear(&mut out), "200");
        } else {
            assert_eq!(hear(&mut out), "199", "the joiner missed logged commits");
        }
        assert!(child.wait().unwrap().success());
        let expected = 200u64;
        assert_eq!(counter(&db).unwrap(), expected);
        // Alone again: logged commits resume, on top of the other's work.
        let before = db.stats().unwrap().counters.logged_commits;
        let mut tx = db.begin_write().unwrap();
        let tree = tx.open_tree("t").unwrap();
        tx.put(&tree, b"counter", &(expected + 1).to_le_bytes())
            .unwrap();
        tx.commit().unwrap();
        assert_eq!(db.stats().unwrap().counters.logged_commits, before + 1);
        db.check().unwrap();
        drop(db);
        let db = Database::open(&t.path).unwrap();
        assert_eq!(counter(&db).unwrap(), expected + 1);
        let rx = db.begin_read().unwrap();
        let tree = rx.tree("t").unwrap();
        for n in 0..200u64 {
            assert!(rx.get(&tree, &n.to_be_bytes()).unwrap().is_some());
        }
        db.check().unwrap();
    }
}

/// Readers whose snapshots live in the arena keep them whole while later
/// logged commits reuse every slot no reader can see.
#[test]
fn readers_of_logged_commits_keep_their_snapshots_while_slots_are_reused() {
    let t = temp_db("pinned.ib");
    let db = Database::open_with(&t.path, &logged(Durability::None)).unwrap();
    let mut rng = Rng::new(11);
    let snapshot = |db: &Database| -> Vec<(Vec<u8>, Vec<u8>)> {
        let rx = db.begin_read().unwrap();
        let tree = rx.tree("t").unwrap();
        rx.iter(&tree)
            .unwrap()
            .map(|e| e.unwrap())
            .map(|(k, v)| (k.to_vec(), v.to_vec()))
            .collect()
    };
    let mut held = Vec::new();
    for n in 0..6_000u32 {
        let mut tx = db.begin_write().unwrap();
        let tree = tx.open_tree("t").unwrap();
        let k = rng.below(2_000) as u32;
        let len = if rng.chance(5) { 3_000 } else { 40 };
        tx.put(&tree, &k.to_be_bytes(), &rng.bytes(len)).unwrap();
        tx.commit().unwrap();
        if n % 1_000 == 500 {
            held.push((db.begin_read().unwrap(), snapshot(&db)));
        }
        if n % 1_500 == 1_400 && !held.is_empty() {
            // Drop the oldest: its slots become reusable, the others' not.
            held.remove(0);
        }
    }
    assert!(db.stats().unwrap().counters.logged_commits > 5_000);
    for (rx, expected) in &held {
        let tree = rx.tree("t").unwrap();
        let found: Vec<(Vec<u8>, Vec<u8>)> = rx
            .iter(&tree)
            .unwrap()
            .map(|e| e.unwrap())
            .map(|(k, v)| (k.to_vec(), v.to_vec()))
            .collect();
        assert_eq!(&found, expected, "snapshot {} changed", rx.txn_id());
    }
    drop(held);
    db.check().unwrap();
}
