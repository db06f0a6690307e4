//! How the cost of a commit depends on how many threads have ever read.
//!
//! For each count `K` given, a fresh database gets 1,000 records; `K`
//! threads then read beside a writer for 300 ms (so that some of their
//! read transactions find no lent snapshot and take the slow path) and
//! park. The main thread then times 200,000 single-put commits under
//! `Durability::None` while the `K` threads are parked: what the commits pay
//! for the readers is what each publish does per thread that ever read,
//! not the readers' work.
//!
//! `cargo run --release -p ironbark --example commit_vs_reader_threads -- 0 1 4 16 64`

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ironbark::{Database, Durability, Options};

const RECORDS: u32 = 1_000;
const COMMITS: u32 = 200_000;

fn main() {
    let counts: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("a thread count"))
        .collect();
    let counts = if counts.is_empty() {
        vec![0, 1, 4, 16, 64]
    } else {
        counts
    };
    for k in counts {
        let rate = commits_per_second(k);
        println!("{k} threads that read: {rate:.0} single-put commits/s");
    }
}

fn commits_per_second(readers: usize) -> f64 {
    let dir = tempfile::tempdir().expect("temporary directory");
    let options = Options {
        durability: Durability::None,
        ..Options::default()
    };
    let db = Arc::new(Database::open_with(dir.path().join("data.ib"), &options).expect("open"));
    let mut tx = db.begin_write().expect("begin");
    let t = tx.open_tree("t").expect("tree");
    for i in 0..RECORDS {
        tx.put(&t, &i.to_be_bytes(), &[1u8; 100]).expect("put");
    }
    tx.commit().expect("commit");

    let stop = Arc::new(AtomicBool::new(false));
    let parked = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..readers)
        .map(|_| {
            let (db, stop, parked, t) = (db.clone(), stop.clone(), parked.clone(), t.clone());
            std::thread::spawn(move || {
                let start = Instant::now();
                while start.elapsed() < Duration::from_millis(300) {
                    let rx = db.begin_read().expect("begin_read");
                    let found = rx.get(&t, &7u32.to_be_bytes()).expect("get");
                    assert!(found.is_some(), "record 7 is always there");
                }
                parked.fetch_add(1, Ordering::SeqCst);
                while !stop.load(Ordering::Relaxed) {
                    std::thread::park();
                }
            })
        })
        .collect();
    // Commits beside the readers while they read, until every one has
    // parked.
    let warm = Instant::now();
    let mut i = 0u32;
    while warm.elapsed() < Duration::from_millis(400) || parked.load(Ordering::SeqCst) < readers {
        put_one(&db, &t, i);
        i += 1;
    }
    let start = Instant::now();
    for i in 0..COMMITS {
        put_one(&db, &t, i);
    }
    let rate = f64::from(COMMITS) / start.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for thread in threads {
        thread.thread().unpark();
        thread.join().expect("reader thread");
    }
    rate
}

/// One single-put commit overwriting record `i % RECORDS`.
fn put_one(db: &Database, t: &ironbark::Tree, i: u32) {
    let mut tx = db.begin_write().expect("begin");
    let value = [(i % 251) as u8; 100];
    tx.put(t, &(i % RECORDS).to_be_bytes(), &value)
        .expect("put");
    tx.commit().expect("commit");
}
