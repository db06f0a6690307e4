//! What a short session costs: the open, the first two single-put
//! commits and the close, averaged over many sessions on one small file.
//!
//! A process that opens a database, writes a record or two and exits (a
//! command-line tool, a test) pays these once each, and the first commit
//! after an open carries what the open leaves for later: the arena's
//! mappings, and the redo log's first pages (a clean close empties the
//! log, so each session's first commit writes pages new to the page
//! cache).
//!
//! `cargo run --release -p ironbark --example session_latency -- /tmp/sl.ib [SESSIONS]`

use std::time::{Duration, Instant};

use ironbark::{Database, Durability, Options};

/// One single-put commit (a 100-byte value under a key among 1,000, in
/// tree "t"), timed.
fn timed_commit(db: &Database, i: u64) -> Duration {
    let start = Instant::now();
    let mut tx = db.begin_write().expect("begin");
    let tree = tx.open_tree("t").expect("tree");
    tx.put(&tree, &(i * 7919 % 1000).to_be_bytes(), &[i as u8; 100])
        .expect("put");
    tx.commit().expect("commit");
    start.elapsed()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("usage: session_latency PATH [SESSIONS]");
    let sessions: u32 = args.next().map_or(200, |s| s.parse().expect("SESSIONS"));
    assert!(sessions > 0, "at least one session");
    let options = Options {
        durability: Durability::None,
        ..Options::default()
    };
    let mut totals = [Duration::ZERO; 4];
    for s in 0..sessions {
        let start = Instant::now();
        let db = Database::open_with(&path, &options).expect("open");
        totals[0] += start.elapsed();
        totals[1] += timed_commit(&db, u64::from(2 * s));
        totals[2] += timed_commit(&db, u64::from(2 * s + 1));
        let start = Instant::now();
        drop(db);
        totals[3] += start.elapsed();
    }
    let us = |d: Duration| d.as_micros() / u128::from(sessions);
    println!(
        "{sessions} sessions, mean us: open {}, first commit {}, second commit {}, close {}",
        us(totals[0]),
        us(totals[1]),
        us(totals[2]),
        us(totals[3])
    );
}
