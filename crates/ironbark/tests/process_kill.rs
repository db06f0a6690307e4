//! Real process kills: a child process commits in a loop with `Immediate`
//! durability and reports each commit that returned; the parent SIGKILLs it
//! at random moments. After every kill: reopen, `check()`, and every
//! reported commit is present.

mod common;

use std::time::Duration;

use common::{assert_reported_commits_hold, counting_child, run_and_kill, temp_db, Rng};
use ironbark::{Database, Options};

const CHILD_ENV: &str = "IRONBARK_KILL_TEST_CHILD";
const TEST: &str = "sigkill_at_random_moments_loses_no_reported_commit";

#[test]
fn sigkill_at_random_moments_loses_no_reported_commit() {
    if let Ok(path) = std::env::var(CHILD_ENV) {
        let db = Database::open(path).expect("child open");
        counting_child(&db, |_, _| {});
        return;
    }
    let kills: u64 = std::env::var("IRONBARK_KILLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    let t = temp_db("kill.ib");
    Database::open_with(&t.path, &Options::default()).unwrap();
    let mut rng = Rng::new(2026);
    let mut last_reported: Option<u64> = None;
    for kill in 0..kills {
        let delay = Duration::from_micros(2_000 + rng.below(30_000));
        if let Some(n) = run_and_kill(TEST, CHILD_ENV, &t.path, delay) {
            last_reported = Some(n);
        }
        let db = Database::open(&t.path).unwrap_or_else(|e| panic!("kill {kill}: open: {e}"));
        db.check()
            .unwrap_or_else(|e| panic!("kill {kill}: check: {e}"));
        if let Some(last) = last_reported {
            assert_reported_commits_hold(&db, last, kill);
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
