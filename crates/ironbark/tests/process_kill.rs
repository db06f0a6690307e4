//! Real process kills: a child process commits in a loop with `Immediate`
//! durability and reports each commit that returned; the parent SIGKILLs it
//! at random moments. After every kill: reopen, `check()`, and every
//! reported commit is present.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{temp_db, Rng};
use ironbark::{Database, Durability, Options};

const CHILD_ENV: &str = "IRONBARK_KILL_TEST_CHILD";

/// The child: commits `n` (key `n{n}` and the counter) one per transaction
/// and prints `n` after each commit returns.
fn child(path: &str) {
    let db = Database::open(path).expect("child open");
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
        tx.set_durability(Durability::Immediate);
        let t = tx.open_tree("t").unwrap();
        let len = rng.below(3) as usize * 900;
        tx.put(&t, format!("n{n:08}").as_bytes(), &rng.bytes(len))
            .unwrap();
        tx.put(&t, b"counter", &n.to_le_bytes()).unwrap();
        // Churn so that pages are freed and reused across kills.
        if n >= 50 {
            tx.delete(&t, format!("n{:08}", n - 50).as_bytes()).unwrap();
        }
        tx.commit().unwrap();
        writeln!(out, "{n}").unwrap();
        out.flush().unwrap();
    }
}

#[test]
fn sigkill_at_random_moments_loses_no_reported_commit() {
    if let Ok(path) = std::env::var(CHILD_ENV) {
        child(&path);
        return;
    }
    let kills: u64 = std::env::var("IRONBARK_KILLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    let t = temp_db("kill.ib");
    Database::open_with(&t.path, &Options::default()).unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut rng = Rng::new(2026);
    let mut last_reported: Option<u64> = None;
    for kill in 0..kills {
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "sigkill_at_random_moments_loses_no_reported_commit",
                "--nocapture",
            ])
            .env(CHILD_ENV, &t.path)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        // Read reports on a thread; kill after a random delay.
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
        let delay = Duration::from_micros(2_000 + rng.below(30_000));
        let started = Instant::now();
        while started.elapsed() < delay {
            std::thread::sleep(Duration::from_micros(500));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        if let Some(n) = reader.join().unwrap() {
            last_reported = Some(n);
        }
        let db = Database::open(&t.path).unwrap_or_else(|e| panic!("kill {kill}: open: {e}"));
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
        "{kills} kills, {} commits reported",
        last_reported.unwrap() + 1
    );
}
