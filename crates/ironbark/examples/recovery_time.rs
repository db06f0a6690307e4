//! How long an open takes to replay the redo log after a crash, and after a
//! clean close.
//!
//! A child process loads 1M records (8-byte keys, 100-byte values) into
//! `TREES` trees, makes `COMMITS` logged single-put commits (each to a tree
//! and key chosen at random) under `Durability::None`, and exits without
//! closing (as a crash of the process would). The parent then times the
//! open that replays the log and writes the checkpoint, with the files in
//! the page cache and (as root) after dropping the caches, and an open
//! after a clean close.
//!
//! `cargo run --release -p ironbark --example recovery_time -- /tmp/rt 400000 [TREES]`

use std::path::Path;
use std::time::Instant;

use ironbark::{Database, Durability, Options};

const RECORDS: u64 = 1_000_000;

fn options() -> Options {
    Options {
        durability: Durability::None,
        logged_commits: true,
        ..Options::default()
    }
}

/// The child: load, then `commits` logged commits, then exit unclosed.
fn fill(path: &Path, commits: u64, trees: u64) {
    let db = Database::open_with(path, &options()).expect("open");
    let mut tx = db.begin_write().expect("begin");
    let handles: Vec<_> = (0..trees)
        .map(|n| tx.open_tree(&format!("t{n:05}")).expect("tree"))
        .collect();
    for i in 0..RECORDS {
        let t = &handles[(i % trees) as usize];
        tx.put(t, &i.to_be_bytes(), &[1u8; 100]).expect("put");
    }
    tx.commit().expect("commit");
    db.checkpoint().expect("checkpoint");
    let mut x = 1u64;
    for i in 0..commits {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let mut tx = db.begin_write().expect("begin");
        let record = (x >> 20) % RECORDS;
        let t = &handles[(record % trees) as usize];
        tx.put(t, &record.to_be_bytes(), &[(i % 251) as u8; 100])
            .expect("put");
        tx.commit().expect("commit");
    }
    // No close: the process ends as a crash would end it.
    std::process::exit(0);
}

fn time_open(path: &Path) -> f64 {
    let start = Instant::now();
    let db = Database::open_with(path, &options()).expect("open");
    let ms = start.elapsed().as_secs_f64() * 1e3;
    drop(db);
    ms
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() == 5 && args[1] == "--fill" {
        fill(
            Path::new(&args[2]),
            args[3].parse().expect("commits"),
            args[4].parse().expect("trees"),
        );
    }
    let dir = Path::new(
        args.get(1)
            .map(String::as_str)
            .unwrap_or("/tmp/recovery-time"),
    );
    let commits: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(400_000);
    let trees: u64 = args
        .get(3)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
        .clamp(1, RECORDS);
    std::fs::create_dir_all(dir).expect("dir");
    for (name, cold) in [("warm.ib", false), ("cold.ib", true)] {
        let path = dir.join(name);
        for suffix in ["", "-lock", "-log"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
        let status = std::process::Command::new(std::env::current_exe().expect("exe"))
            .args([
                "--fill",
                path.to_str().expect("utf-8 path"),
                &commits.to_string(),
                &trees.to_string(),
            ])
            .status()
            .expect("child");
        assert!(status.success());
        let log = std::fs::metadata(format!("{}-log", path.display()))
            .expect("log")
            .len() as f64
            / 1048576.0;
        let dropped = cold
            && std::process::Command::new("sh")
                .args(["-c", "sync && echo 3 > /proc/sys/vm/drop_caches"])
                .status()
                .is_ok_and(|s| s.success());
        let recovery = time_open(&path);
        let clean = time_open(&path);
        println!(
            "{commits} commits into {trees} trees, log file {log:.1} MiB, page cache {}: \
             recovery open {recovery:.0} ms; open after a clean close {clean:.2} ms",
            if dropped { "dropped" } else { "warm" },
        );
    }
}
