//! Logged commits (`Options::logged_commits`): small transactions go to the
//! redo log and the page arena, checkpoints write the file. What is
//! checked: every commit is read back at once and after reopening, a
//! reader's snapshot stays whole across logged commits and checkpoints, a
//! single-put commit writes a log record instead of pages, and a process
//! killed at random moments loses no commit it reported (the next open
//! replays the log).

mod common;

use std::io::{self, BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{
    assert_reported_commits_hold, counting_child, model_of, read_model, run_and_kill, temp_db, Rng,
};
use ironbark::{Database, Durability, Error, IoHook, IoHookHandle, Options};

fn logged(durability: Durability) -> Options {
    Options {
        durability,
        logged_commits: true,
        ..Options::default()
    }
}

/// Keys `0..n` (as big-endian `u32`) put with value `v0` into tree `t` of
/// a new database opened with `options`, in one transaction.
fn loaded(t: &common::TempDb, options: &Options, n: u32) -> (Database, ironbark::Tree) {
    let db = Database::open_with(&t.path, options).unwrap();
    let mut tx = db.begin_write().unwrap();
    let tree = tx.open_tree("t").unwrap();
    for i in 0..n {
        tx.put(&tree, &i.to_be_bytes(), b"v0").unwrap();
    }
    tx.commit().unwrap();
    (db, tree)
}

#[test]
fn logged_commits_are_read_back_kept_apart_from_old_snapshots_and_reopened() {
    let t = temp_db("logged.ib");
    let (db, tree) = loaded(&t, &logged(Durability::None), 5_000);
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
        assert!(matches!(
            rx.copy_to(t.dir.path().join("copy.ib")),
            Err(Error::InvalidOption(_))
        ));
        assert!(!t.dir.path().join("copy.ib").exists());
        rx.compact_to(t.dir.path().join("compact.ib")).unwrap();
        let copy = Database::open(t.dir.path().join("compact.ib")).unwrap();
        copy.check().unwrap();
        assert_eq!(
            read_model(&copy).unwrap().1,
            model_of(&rx).unwrap(),
            "compact_to of a logged snapshot"
        );
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
    let (_, expected) = read_model(&db).unwrap();
    db.check().unwrap();
    drop(db);
    let db = Database::open_with(&t.path, &logged(Durability::None)).unwrap();
    db.check().unwrap();
    assert_eq!(read_model(&db).unwrap().1, expected);
}

/// A record appended through the log's map makes no write call, so the
/// counters say which bytes no count of write calls sees (`bytes_mapped`);
/// a record synced at once is written with a call, and is not among them.
#[test]
fn log_bytes_stored_through_the_map_are_counted_apart() {
    let t = temp_db("mapped.ib");
    let (db, tree) = loaded(&t, &logged(Durability::None), 1_000);
    let commit = |durability: Durability| {
        let before = db.stats().unwrap().counters;
        let mut tx = db.begin_write().unwrap();
        tx.set_durability(durability);
        tx.put(&tree, &7u32.to_be_bytes(), &[9u8; 100]).unwrap();
        tx.commit().unwrap();
        // Read before `stats`, which checkpoints (its commit is counted).
        let after = db.stats().unwrap().counters;
        assert_eq!(after.logged_commits, before.logged_commits + 1);
        let log = after.log_bytes - before.log_bytes;
        assert!(
            log <= after.bytes_written - before.bytes_written,
            "the log's bytes are among the bytes written"
        );
        (
            after.bytes_mapped - before.bytes_mapped,
            after.write_calls - before.write_calls,
            log,
        )
    };
    let (mapped, _, log) = commit(Durability::None);
    assert!(
        (100..1_000).contains(&mapped),
        "a 100-byte put appended through the map counted {mapped} mapped bytes"
    );
    // The first record grows the log, by blocks allocated, not written
    // (the test directory's filesystem allocates without writing).
    assert_eq!(log, mapped, "the first record is all the log wrote");
    let (mapped, _, log) = commit(Durability::None);
    assert_eq!(log, mapped, "a record is all the log wrote");
    let (mapped, calls, log) = commit(Durability::Immediate);
    assert_eq!(mapped, 0, "a record synced at once is written, not mapped");
    assert!(calls >= 1);
    assert!(
        (100..1_000).contains(&log),
        "a synced record counted {log} log bytes"
    );
}

/// `Database::counters` reads the counters without checkpointing logged
/// commits: the checkpoint's work stays for `stats` (or the close) to do.
/// A benchmark that took its counters through `stats` before timing the
/// close moved a whole checkpoint out of the timed close.
#[test]
fn counters_leave_the_checkpoint_to_stats_or_the_close() {
    let t = temp_db("counters.ib");
    let (db, tree) = loaded(&t, &logged(Durability::None), 1_000);
    db.stats().unwrap();
    for i in 0..100u32 {
        let mut tx = db.begin_write().unwrap();
        tx.put(&tree, &(i * 7).to_be_bytes(), &[1u8; 100]).unwrap();
        tx.commit().unwrap();
    }
    let before = db.counters();
    assert!(before.logged_commits >= 100);
    let again = db.counters();
    assert_eq!(again, before, "reading the counters wrote nothing");
    let after = db.stats().unwrap().counters;
    assert!(
        after.pages_written > before.pages_written,
        "stats checkpointed the logged commits"
    );
    assert_eq!(after.logged_commits, before.logged_commits);
}

/// `Options::checkpoint_log_bytes` bounds the log: with a 64 KiB bound,
/// 2,000 single-put commits of ~140-byte records (about 280 KiB of log)
/// make at least 3 checkpoints, where the default bound, sized from the
/// data but at least 64 MiB, logs every one of them; and every commit is
/// read back after reopening either way.
#[test]
fn the_log_bound_option_sets_how_often_a_checkpoint_runs() {
    let run = |bound: Option<u64>| {
        let t = temp_db("bound.ib");
        let options = Options {
            checkpoint_log_bytes: bound,
            ..logged(Durability::None)
        };
        let (db, tree) = loaded(&t, &options, 1_000);
        let before = db.stats().unwrap().counters;
        for i in 0..2_000u32 {
            let mut tx = db.begin_write().unwrap();
            tx.put(&tree, &(i % 1_000).to_be_bytes(), &[i as u8; 100])
                .unwrap();
            tx.commit().unwrap();
        }
        let after = db.stats().unwrap().counters;
        drop(db);
        let db = Database::open_with(&t.path, &options).unwrap();
        let rtx = db.begin_read().unwrap();
        let tree = rtx.tree("t").unwrap();
        for i in 1_000..2_000u32 {
            let value = rtx.get(&tree, &(i % 1_000).to_be_bytes()).unwrap();
            assert_eq!(value, Some(&[i as u8; 100][..]), "key {}", i % 1_000);
        }
        let commits = after.commits - before.commits;
        let logged = after.logged_commits - before.logged_commits;
        // `stats` checkpoints once (its commit is counted among them).
        commits - logged - 1
    };
    assert_eq!(run(None), 0, "the default bound logs 280 KiB of records");
    let checkpoints = run(Some(64 << 10));
    assert!(
        (3..=40).contains(&checkpoints),
        "a 64 KiB bound over ~280 KiB of log checkpointed {checkpoints} times"
    );
}

/// The checkpoint bounds are sized from the data, the data file's pages
/// and the arena's, not from the file alone: a random fill from an empty
/// file lives in the arena, where the file says a few pages. 600 commits
/// of 1,000 random puts of 16-byte keys and 100-byte values (some 69 MiB
/// of log, over 100 MiB of leaves) are all logged and write no page of the
/// file until the close: sized from the file, the log's bound (64 MiB)
/// and the arena's old floor (64 MiB) each checkpointed once before the
/// end (the arena's floor is 256 MiB within an eighth of memory: this
/// test wants 2 GiB). The data reads back after reopening.
#[test]
fn a_random_fill_from_empty_is_not_checkpointed_before_its_data_reaches_the_bounds() {
    const COMMITS: u64 = 600;
    const PUTS: u64 = 1_000;
    let t = temp_db("fill.ib");
    let options = logged(Durability::None);
    let db = Database::open_with(&t.path, &options).unwrap();
    let mut tx = db.begin_write().unwrap();
    let tree = tx.open_tree("t").unwrap();
    tx.commit().unwrap();
    let key = |i: u64| {
        let mut k = [0u8; 16];
        k[..8].copy_from_slice(&i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes());
        k[8..].copy_from_slice(&i.to_be_bytes());
        k
    };
    let value = |i: u64| [(i % 251) as u8; 100];
    let mut before = db.counters();
    for c in 0..COMMITS {
        if c == 1 {
            // The first, into an empty tree, fills new pages: a file
            // commit (`logged::record_outweighs_pages`).
            before = db.counters();
        }
        let mut tx = db.begin_write().unwrap();
        let pairs: Vec<([u8; 16], [u8; 100])> = (c * PUTS..(c + 1) * PUTS)
            .map(|i| (key(i), value(i)))
            .collect();
        tx.put_many(&tree, pairs.iter().map(|(k, v)| (&k[..], &v[..])))
            .unwrap();
        tx.commit().unwrap();
    }
    let after = db.counters();
    assert_eq!(after.logged_commits - before.logged_commits, COMMITS - 1);
    let log_mib = (after.log_bytes - before.log_bytes) >> 20;
    assert!(
        log_mib > 60,
        "the fill logged {log_mib} MiB, past the point where a bound of 64 MiB checkpoints"
    );
    assert_eq!(
        after.pages_written, before.pages_written,
        "a checkpoint ran during the fill"
    );
    drop(db);
    let db = Database::open_with(&t.path, &options).unwrap();
    let rtx = db.begin_read().unwrap();
    let tree = rtx.tree("t").unwrap();
    assert_eq!(rtx.len(&tree).unwrap(), COMMITS * PUTS);
    for i in (0..COMMITS * PUTS).step_by(997) {
        assert_eq!(
            rtx.get(&tree, &key(i)).unwrap(),
            Some(&value(i)[..]),
            "key {i}"
        );
    }
}

/// The operations of a redo payload with their puts and deletes written
/// as builds before session 46 wrote them: ops `1` and `2`, a u64 tree
/// id, a u16 key length and (puts) a u32 value length, instead of ops `7`
/// and `8` with varints (docs/file-format.md, "The redo log"). A leading
/// sync marker (`9`, written since session 58) is dropped: those builds
/// wrote none.
fn with_fixed_width_heads(payload: &[u8]) -> Vec<u8> {
    fn varint(bytes: &[u8], at: &mut usize) -> u64 {
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let b = bytes[*at];
            *at += 1;
            n |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return n;
            }
        }
        panic!("a varint of more than 10 bytes");
    }
    let mut out = Vec::new();
    let mut at = usize::from(payload.first() == Some(&9));
    while at < payload.len() {
        let op = payload[at];
        at += 1;
        assert!(
            op == 7 || op == 8,
            "this workload logs puts and deletes only"
        );
        let tree = varint(payload, &mut at);
        let klen = varint(payload, &mut at) as usize;
        let vlen = if op == 7 {
            varint(payload, &mut at) as usize
        } else {
            0
        };
        out.push(op - 6);
        out.extend_from_slice(&tree.to_le_bytes());
        out.extend_from_slice(&(klen as u16).to_le_bytes());
        if op == 7 {
            out.extend_from_slice(&(vlen as u32).to_le_bytes());
        }
        out.extend_from_slice(&payload[at..at + klen + vlen]);
        at += klen + vlen;
    }
    out
}

/// A log left by a build from before session 46, whose puts and deletes
/// have fixed-width heads, replays: the crash image of logged commits is
/// rewritten record by record in that form (each record checksummed
/// again, chained as the log chains them), and an open replays it to the
/// same trees as the log this build wrote.
#[test]
fn a_log_of_fixed_width_puts_and_deletes_from_an_earlier_build_replays() {
    use xxhash_rust::xxh3::xxh3_64_with_seed;
    let t = temp_db("old-log.ib");
    let options = logged(Durability::Immediate);
    let (db, tree) = loaded(&t, &options, 2_000);
    db.checkpoint().unwrap();
    let before = db.counters();
    let mut rng = Rng::new(46);
    for c in 0..40u32 {
        let mut tx = db.begin_write().unwrap();
        for _ in 0..5 {
            let k = (rng.below(4_000) as u32).to_be_bytes();
            tx.put(&tree, &k, format!("value of commit {c}").as_bytes())
                .unwrap();
        }
        tx.delete(&tree, &(rng.below(4_000) as u32).to_be_bytes())
            .unwrap();
        tx.commit().unwrap();
    }
    assert_eq!(db.counters().logged_commits - before.logged_commits, 40);
    let want = read_model(&db).unwrap();
    let crashed = t.dir.path().join("crashed.ib");
    common::Images::read(&t.path).write(&crashed);
    drop(db);

    let log_path = common::log_path(&crashed);
    let log = std::fs::read(&log_path).unwrap();
    let mut old = Vec::new();
    let (mut at, mut seed, mut old_seed, mut records) = (0usize, None, None, 0);
    while at + 32 <= log.len() && &log[at + 8..at + 12] == b"IBLG" {
        let len = u32::from_le_bytes(log[at + 12..at + 16].try_into().unwrap()) as usize;
        let epoch = u64::from_le_bytes(log[at + 24..at + 32].try_into().unwrap());
        let sum = u64::from_le_bytes(log[at..at + 8].try_into().unwrap());
        let seed_now = seed.unwrap_or(epoch);
        if xxh3_64_with_seed(&log[at + 8..at + 32 + len], seed_now) != sum {
            break; // past the chain's end
        }
        seed = Some(sum);
        let payload = with_fixed_width_heads(&log[at + 32..at + 32 + len]);
        let start = old.len();
        old.extend_from_slice(&[0; 8]);
        old.extend_from_slice(&log[at + 8..at + 12]);
        old.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        old.extend_from_slice(&log[at + 16..at + 32]);
        old.extend_from_slice(&payload);
        let old_sum = xxh3_64_with_seed(&old[start + 8..], old_seed.unwrap_or(epoch));
        old[start..start + 8].copy_from_slice(&old_sum.to_le_bytes());
        old_seed = Some(old_sum);
        old.resize(old.len().next_multiple_of(8), 0);
        at += (32 + len).next_multiple_of(8);
        records += 1;
    }
    assert_eq!(
        records, 40,
        "the crash image's log holds every logged commit"
    );
    assert!(
        old.len() > at + 40 * 6 * 9,
        "the old heads are 9 to 11 bytes longer an operation"
    );
    old.resize(old.len().max(log.len()), 0);
    std::fs::write(&log_path, &old).unwrap();

    let db = Database::open_with(&crashed, &options).unwrap();
    assert_eq!(read_model(&db).unwrap(), want);
    assert!(db.check().unwrap().is_clean());
}

/// A transaction of thousands of scattered puts is logged like one of a
/// few: its record (5,000 puts of 100-byte values, some 640 KiB) is small
/// beside the leaves it changes, which a later checkpoint writes with
/// those of the commits after it. Until session 44 a record past 256 KiB
/// made the commit write its pages at once (a random fill in transactions
/// of 5,000 ran at a fifth of the rate of one in transactions of 1,000).
#[test]
fn a_large_transaction_of_scattered_puts_is_logged() {
    let t = temp_db("large.ib");
    let options = logged(Durability::None);
    let db = Database::open_with(&t.path, &options).unwrap();
    let key = |i: u64| (i * 2).to_be_bytes();
    let mut tx = db.begin_write().unwrap();
    let tree = tx.open_tree("t").unwrap();
    for i in 0..100_000u64 {
        tx.append(&tree, &key(i), &[0u8; 100]).unwrap();
    }
    tx.commit().unwrap();
    let before = db.counters();
    let mut rng = Rng::new(7);
    let mut model = std::collections::BTreeMap::new();
    let mut tx = db.begin_write().unwrap();
    for n in 0..5_000u64 {
        // Keys the tree holds and keys between them.
        let k = (rng.below(200_000)).to_be_bytes();
        let v = [(n % 250) as u8 + 1; 100];
        tx.put(&tree, &k, &v).unwrap();
        model.insert(k, v);
    }
    tx.commit().unwrap();
    let after = db.counters();
    assert_eq!(after.logged_commits - before.logged_commits, 1, "logged");
    assert_eq!(
        after.pages_written, before.pages_written,
        "the commit wrote no page of the file"
    );
    assert!(after.log_bytes - before.log_bytes > 512 << 10);
    drop(db);
    let db = Database::open_with(&t.path, &options).unwrap();
    let rtx = db.begin_read().unwrap();
    let tree = rtx.tree("t").unwrap();
    for (k, v) in &model {
        assert_eq!(rtx.get(&tree, k).unwrap(), Some(&v[..]));
    }
    let added = model
        .keys()
        .filter(|k| u64::from_be_bytes(**k) % 2 == 1)
        .count() as u64;
    assert_eq!(rtx.len(&tree).unwrap(), 100_000 + added);
}

/// A blob's pages are written once whichever way its commit goes, so a
/// transaction whose record is mostly blob values is not logged: a
/// sorted load of 2,040-byte values (just past the inline limit, each
/// blob in a page of its own, half of it empty) writes its pages at once,
/// its values never copied into the log. A single put of such a value is
/// still logged (a small record counts its blob pages: made a file
/// commit, it would checkpoint the commits logged before it). Before
/// session 51 the load was logged, its half-empty blob pages outweighing
/// its record: with 2,000-byte values, then blobs, 0.15x LMDB's rate.
#[test]
fn a_load_of_values_in_blobs_writes_pages_not_log_records() {
    let t = temp_db("blobs.ib");
    let options = logged(Durability::None);
    let db = Database::open_with(&t.path, &options).unwrap();
    let value = |i: u64| vec![(i % 251) as u8 + 1; 2040];
    let mut tx = db.begin_write().unwrap();
    let tree = tx.open_tree("t").unwrap();
    tx.commit().unwrap();
    let mut next = 0u64;
    for _ in 0..3 {
        let before = db.counters();
        let mut tx = db.begin_write().unwrap();
        for _ in 0..200 {
            tx.append(&tree, &next.to_be_bytes(), &value(next)).unwrap();
            next += 1;
        }
        tx.commit().unwrap();
        let after = db.counters();
        assert_eq!(
            after.logged_commits, before.logged_commits,
            "a load of 408 KB of blobs is not logged"
        );
        assert!(
            after.log_bytes - before.log_bytes < 16 << 10,
            "its values are not copied into the log: {} bytes",
            after.log_bytes - before.log_bytes
        );
        assert!(
            after.pages_written - before.pages_written >= 200,
            "one page per blob"
        );
    }
    let before = db.counters();
    let mut tx = db.begin_write().unwrap();
    tx.put(&tree, &next.to_be_bytes(), &value(next)).unwrap();
    tx.commit().unwrap();
    next += 1;
    let after = db.counters();
    assert_eq!(
        after.logged_commits - before.logged_commits,
        1,
        "a single put is logged"
    );
    assert!(after.log_bytes - before.log_bytes >= 2040);
    drop(db);
    let db = Database::open_with(&t.path, &options).unwrap();
    assert!(db.check().unwrap().is_clean());
    let rtx = db.begin_read().unwrap();
    let tree = rtx.tree("t").unwrap();
    assert_eq!(rtx.len(&tree).unwrap(), next);
    for i in 0..next {
        assert_eq!(
            rtx.get(&tree, &i.to_be_bytes()).unwrap(),
            Some(&value(i)[..])
        );
    }
}

const CHILD_ENV: &str = "IRONBARK_LOGGED_KILL_CHILD";
const KILL_TEST: &str = "a_process_killed_at_random_moments_loses_no_logged_commit";

/// The child: `counting_child` with logged commits, creating and dropping
/// trees on the way, so the log carries those too.
fn child(path: &str) {
    let db = Database::open_with(path, &logged(Durability::Immediate)).expect("child open");
    counting_child(&db, |tx, n| {
        if n % 5 == 0 {
            let side = tx.open_tree(&format!("side{}", n % 3)).unwrap();
            tx.put(&side, b"k", &n.to_le_bytes()).unwrap();
        }
        if n % 15 == 7 {
            tx.drop_tree(&format!("side{}", (n + 1) % 3)).unwrap();
        }
    });
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
    let mut rng = Rng::new(2026);
    let mut last_reported: Option<u64> = None;
    for kill in 0..kills {
        let delay = Duration::from_micros(5_000 + rng.below(40_000));
        if let Some(n) = run_and_kill(KILL_TEST, CHILD_ENV, &t.path, delay) {
            last_reported = Some(n);
        }
        if kill % 2 == 1 {
            // A read-only process first: it cannot replay the log into the
            // file, so it rebuilds the logged commits in its own memory.
            let ro = Database::open_with(
                &t.path,
                &Options {
                    read_only: true,
                    ..logged(Durability::Immediate)
                },
            )
            .unwrap_or_else(|e| panic!("kill {kill}: read-only open: {e}"));
            if let Some(last) = last_reported {
                assert_reported_commits_hold(&ro, last, kill);
            }
        }
        let db = Database::open_with(&t.path, &logged(Durability::Immediate))
            .unwrap_or_else(|e| panic!("kill {kill}: open: {e}"));
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
/// process's logged commits at open; a read-only one rebuilds them from the
/// log in its own memory, keeps that snapshot, and once told the first
/// process committed again reads the new commit and checks the kept one is
/// whole), then, if writable, commits the next number.
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
        let kept = db.begin_read().unwrap();
        let t = kept.tree("t").unwrap();
        let n = u64::from_le_bytes(
            kept.get(&t, b"counter")
                .unwrap()
                .unwrap()
                .try_into()
                .unwrap(),
        );
        writeln!(out, "JOINER {n}").unwrap();
        out.flush().unwrap();
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).unwrap();
        // The first process's checkpoint freed file pages this snapshot
        // reads: it stays whole all the same.
        for k in 0..=n {
            assert_eq!(
                kept.get(&t, &k.to_be_bytes()).unwrap(),
                Some(&[7u8; 100][..])
            );
        }
        assert_eq!(kept.iter(&t).unwrap().count() as u64, n + 2);
    }
    let n = counter(&db).unwrap();
    if read_only {
        // The first process went on logging: the newer commits are
        // rebuilt from the records appended since, whole.
        let rx = db.begin_read().unwrap();
        let t = rx.tree("t").unwrap();
        for k in 0..=n {
            assert_eq!(rx.get(&t, &k.to_be_bytes()).unwrap(), Some(&[7u8; 100][..]));
        }
        // The check of commits rebuilt in this process's arena (the first
        // process waits meanwhile): the file's accounting is the last
        // checkpoint's. Until session 25 it reported an arena page as
        // "tree beyond the page count".
        let report = db.check().unwrap();
        assert_eq!(report.entries, n + 2);
        assert!(db.check_report().unwrap().problems.is_empty());
    }
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
        let logged_before = db.stats().unwrap().counters.logged_commits;
        let expected = if role == "ro" {
            assert_eq!(hear(&mut out), "199", "the reader missed logged commits");
            // A read-only process does not stop logged commits: it rebuilds
            // them from the log.
            for n in 200..203u64 {
                let mut tx = db.begin_write().unwrap();
                let tree = tx.open_tree("t").unwrap();
                tx.put(&tree, b"counter", &n.to_le_bytes()).unwrap();
                tx.put(&tree, &n.to_be_bytes(), &[7u8; 100]).unwrap();
                tx.commit().unwrap();
            }
            writeln!(child.stdin.as_mut().unwrap(), "go").unwrap();
            assert_eq!(hear(&mut out), "202");
            202
        } else {
            assert_eq!(hear(&mut out), "199", "the joiner missed logged commits");
            200
        };
        assert!(child.wait().unwrap().success());
        assert_eq!(counter(&db).unwrap(), expected);
        let logged_meanwhile = db.stats().unwrap().counters.logged_commits - logged_before;
        assert_eq!(
            logged_meanwhile,
            if role == "ro" { 3 } else { 0 },
            "{role}: commits logged while the other process was open"
        );
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
    let mut held = Vec::new();
    for n in 0..6_000u32 {
        let mut tx = db.begin_write().unwrap();
        let tree = tx.open_tree("t").unwrap();
        let k = rng.below(2_000) as u32;
        let len = if rng.chance(5) { 3_000 } else { 40 };
        tx.put(&tree, &k.to_be_bytes(), &rng.bytes(len)).unwrap();
        tx.commit().unwrap();
        if n % 1_000 == 500 {
            let rx = db.begin_read().unwrap();
            let model = model_of(&rx).unwrap();
            held.push((rx, model));
        }
        if n % 1_500 == 1_400 && !held.is_empty() {
            // Drop the oldest: its slots become reusable, the others' not.
            held.remove(0);
        }
    }
    assert!(db.stats().unwrap().counters.logged_commits > 5_000);
    for (rx, expected) in &held {
        assert_eq!(
            &model_of(rx).unwrap(),
            expected,
            "snapshot {} changed",
            rx.txn_id()
        );
    }
    drop(held);
    db.check().unwrap();
}

/// Fails the next log write, or the next log sync, when armed.
#[derive(Default)]
struct LogFaults {
    write: AtomicBool,
    sync: AtomicBool,
}

impl IoHook for LogFaults {
    fn on_log_write(&self, _offset: u64, _bufs: &[&[u8]]) -> io::Result<()> {
        if self.write.swap(false, Ordering::SeqCst) {
            return Err(io::Error::other("injected log write error"));
        }
        Ok(())
    }
    fn on_log_sync(&self) -> io::Result<()> {
        if self.sync.swap(false, Ordering::SeqCst) {
            return Err(io::Error::other("injected log sync error"));
        }
        Ok(())
    }
}

/// One logged commit: the counter and key `n`.
fn count(db: &Database, n: u64) -> ironbark::Result<()> {
    let mut tx = db.begin_write()?;
    let tree = tx.open_tree("t")?;
    tx.put(&tree, b"counter", &n.to_le_bytes())?;
    tx.put(&tree, &n.to_be_bytes(), b"v")?;
    tx.commit()
}

#[test]
fn a_failed_log_write_or_sync_is_an_error_and_loses_no_commit() {
    let t = temp_db("faults.ib");
    let faults = Arc::new(LogFaults::default());
    let options = Options {
        io_hook: Some(IoHookHandle(faults.clone())),
        ..logged(Durability::Immediate)
    };
    let db = Database::open_with(&t.path, &options).unwrap();
    for n in 0..10 {
        count(&db, n).unwrap();
    }
    faults.write.store(true, Ordering::SeqCst);
    assert!(
        count(&db, 10).is_err(),
        "a failed log write fails the commit"
    );
    assert_eq!(counter(&db).unwrap(), 9, "a failed commit is not published");
    count(&db, 10).unwrap();
    assert_eq!(counter(&db).unwrap(), 10);
    // A failed sync may have lost the record: nothing more is trusted.
    faults.sync.store(true, Ordering::SeqCst);
    assert!(count(&db, 11).is_err());
    assert!(matches!(count(&db, 12), Err(Error::Poisoned)));
    drop(db);
    let db = Database::open_with(&t.path, &logged(Durability::Immediate)).unwrap();
    db.check().unwrap();
    let c = counter(&db).unwrap();
    assert!(c == 10 || c == 11, "reopened at {c}, expected 10 or 11");
    let rx = db.begin_read().unwrap();
    let tree = rx.tree("t").unwrap();
    for n in 0..=c {
        assert!(rx.get(&tree, &n.to_be_bytes()).unwrap().is_some(), "{n}");
    }
}

const DAMAGE_ENV: &str = "IRONBARK_LOGGED_DAMAGE_CHILD";

/// A database whose process made 100 logged commits (counter `n` and key
/// `n`, each its own commit, with `durability`) and died without closing,
/// with a byte of the 61st commit's log record flipped. The child is this
/// test binary running `test` again.
fn damaged_log(test: &str, durability: Durability) -> common::TempDb {
    if let Ok(path) = std::env::var(DAMAGE_ENV) {
        let db = Database::open_with(&path, &logged(durability)).unwrap();
        for n in 0..100 {
            count(&db, n).unwrap();
        }
        // No close: the log is all there is of these commits.
        std::process::exit(0);
    }
    let t = temp_db("damaged.ib");
    let status = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture"])
        .env(DAMAGE_ENV, &t.path)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    // Walk the records (docs/file-format.md) to the 61st commit's and flip
    // a byte of its payload.
    let log_path = format!("{}-log", t.path.display());
    let mut log = std::fs::read(&log_path).unwrap();
    let mut at = 0usize;
    for _ in 0..60 {
        assert_eq!(&log[at + 8..at + 12], b"IBLG");
        let len = u32::from_le_bytes(log[at + 12..at + 16].try_into().unwrap()) as usize;
        at += (32 + len).next_multiple_of(8);
    }
    assert_eq!(&log[at + 8..at + 12], b"IBLG");
    log[at + 40] ^= 0x55;
    std::fs::write(&log_path, &log).unwrap();
    t
}

/// The recovery replayed the 60 records before the damaged one and none
/// after: counter 59, keys 0 to 59.
fn assert_replayed_up_to_the_damage(db: &Database) {
    db.check().unwrap();
    assert_eq!(
        counter(db).unwrap(),
        59,
        "the replay applies the records before the damaged one, and none after"
    );
    let rx = db.begin_read().unwrap();
    let tree = rx.tree("t").unwrap();
    for n in 0..100u64 {
        assert_eq!(
            rx.get(&tree, &n.to_be_bytes()).unwrap().is_some(),
            n < 60,
            "key {n}"
        );
    }
}

/// Commits never synced: a crash may tear their records in any order, so
/// a damaged record followed by intact ones is what a crash may leave, and
/// the replay ends before it.
#[test]
fn a_damaged_record_of_commits_never_synced_ends_the_replay_before_it() {
    let t = damaged_log(
        "a_damaged_record_of_commits_never_synced_ends_the_replay_before_it",
        Durability::None,
    );
    let db = Database::open_with(&t.path, &logged(Durability::Immediate)).unwrap();
    assert_replayed_up_to_the_damage(&db);
}

/// Durable commits: each record after the first was written once the log
/// was synced through the one before, and says so, so the intact 62nd
/// proves the damaged 61st was durable. The open reports it and changes
/// nothing (it reports it again); with `salvage_damaged_log` it opens at
/// the 60th commit.
#[test]
fn a_damaged_durable_log_record_is_an_error_unless_salvaged() {
    let t = damaged_log(
        "a_damaged_durable_log_record_is_an_error_unless_salvaged",
        Durability::Immediate,
    );
    let log_before = std::fs::read(format!("{}-log", t.path.display())).unwrap();
    for _ in 0..2 {
        match Database::open_with(&t.path, &logged(Durability::Immediate)) {
            Err(Error::Corrupted { detail, .. }) => {
                assert!(
                    detail.contains("salvage_damaged_log") && detail.contains("were durable"),
                    "{detail}"
                );
            }
            Err(e) => panic!("a damaged durable record gave {e}"),
            Ok(_) => panic!("a damaged durable record was dropped without a word"),
        }
    }
    let log_after = std::fs::read(format!("{}-log", t.path.display())).unwrap();
    assert!(log_after == log_before, "the failed opens changed the log");
    let salvage = Options {
        salvage_damaged_log: true,
        ..logged(Durability::Immediate)
    };
    let db = Database::open_with(&t.path, &salvage).unwrap();
    assert_replayed_up_to_the_damage(&db);
    drop(db);
    // The salvage's checkpoint left a log that opens as any other.
    let db = Database::open_with(&t.path, &logged(Durability::Immediate)).unwrap();
    assert_replayed_up_to_the_damage(&db);
}

const FOLLOW_ENV: &str = "IRONBARK_LOGGED_FOLLOW_CHILD";
const FOLLOW_COMMITS: u64 = 20_000;

/// The read-only process: reads snapshot after snapshot while the other
/// process commits, until it sees the last commit. Every snapshot must be
/// a whole commit (counter `c` and keys `0..=c`, nothing more), and the
/// counter never goes back.
fn follower(path: &str) {
    let db = Database::open_with(
        path,
        &Options {
            read_only: true,
            ..Options::default()
        },
    )
    .unwrap();
    let mut last = 0u64;
    let mut snapshots = 0u64;
    while last + 1 < FOLLOW_COMMITS {
        let rx = db.begin_read().unwrap();
        let t = rx.tree("t").unwrap();
        let c = u64::from_le_bytes(rx.get(&t, b"counter").unwrap().unwrap().try_into().unwrap());
        assert!(c >= last, "the counter went back from {last} to {c}");
        assert_eq!(
            rx.iter(&t).unwrap().count() as u64,
            c + 2,
            "commit {c} not whole"
        );
        for k in [0, c / 2, c] {
            assert!(
                rx.get(&t, &k.to_be_bytes()).unwrap().is_some(),
                "key {k} of commit {c}"
            );
        }
        last = c;
        snapshots += 1;
    }
    println!("FOLLOWER {snapshots}");
}

#[test]
fn a_read_only_process_follows_logged_commits_as_they_are_made() {
    if let Ok(path) = std::env::var(FOLLOW_ENV) {
        follower(&path);
        return;
    }
    let t = temp_db("followed.ib");
    let db = Database::open_with(&t.path, &logged(Durability::None)).unwrap();
    let put = |n: u64, extra: usize| {
        let mut tx = db.begin_write().unwrap();
        let tree = tx.open_tree("t").unwrap();
        tx.put(&tree, b"counter", &n.to_le_bytes()).unwrap();
        tx.put(&tree, &n.to_be_bytes(), &vec![7u8; 100 + extra])
            .unwrap();
        tx.commit().unwrap();
    };
    put(0, 0);
    let before = db.stats().unwrap().counters.logged_commits;
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_read_only_process_follows_logged_commits_as_they_are_made",
            "--nocapture",
        ])
        .env(FOLLOW_ENV, &t.path)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    for n in 1..FOLLOW_COMMITS {
        // Now and then a checkpoint (the log restarts after it) or a value
        // too large to log: the follower must start over from the file.
        if n % 500 == 0 {
            db.checkpoint().unwrap();
        }
        put(n, if n % 700 == 0 { 300_000 } else { 0 });
    }
    let mut line = String::new();
    let snapshots = loop {
        line.clear();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "the follower said nothing"
        );
        if let Some(at) = line.find("FOLLOWER ") {
            break line[at + 9..].trim_end().parse::<u64>().unwrap();
        }
    };
    assert!(child.wait().unwrap().success(), "the follower failed");
    let logged = db.stats().unwrap().counters.logged_commits - before;
    assert!(
        logged > FOLLOW_COMMITS * 9 / 10,
        "only {logged} commits were logged while a read-only process was open"
    );
    eprintln!("{logged} logged commits, the follower read {snapshots} snapshots");
}

/// A checkpoint after logged commits that changed most leaves seals the
/// leaves it reads in the arena on copies (parked, not copied in advance)
/// and writes them in runs of consecutive pages, not a call per page; and
/// every record reads back, before and after a reopen.
#[test]
fn a_checkpoint_writes_the_arenas_leaves_in_runs() {
    let t = temp_db("runs.ib");
    let n = 40_000u32;
    let (db, tree) = loaded(&t, &logged(Durability::None), n);
    db.checkpoint().unwrap();
    for i in 0..4_000u32 {
        let k = i.wrapping_mul(7_919) % n;
        let mut tx = db.begin_write().unwrap();
        tx.put(&tree, &k.to_be_bytes(), &[(i % 251) as u8; 40])
            .unwrap();
        tx.commit().unwrap();
    }
    let before = db.counters();
    assert!(before.logged_commits >= 4_000);
    db.checkpoint().unwrap();
    let after = db.counters();
    let pages = after.pages_written - before.pages_written;
    let calls = after.write_calls - before.write_calls;
    assert!(pages > 100, "the checkpoint wrote {pages} pages");
    assert!(
        calls * 8 < pages,
        "{calls} write calls for {pages} pages: not in runs"
    );
    let expected = |k: u32| -> Vec<u8> {
        // The last put of each key, if any.
        (0..4_000u32)
            .rev()
            .find(|i| i.wrapping_mul(7_919) % n == k)
            .map_or(b"v0".to_vec(), |i| vec![(i % 251) as u8; 40])
    };
    let verify = |db: &Database| {
        let rx = db.begin_read().unwrap();
        let tree = rx.tree("t").unwrap();
        for k in (0..n).step_by(7) {
            assert_eq!(
                rx.get(&tree, &k.to_be_bytes()).unwrap().unwrap(),
                &expected(k)[..]
            );
        }
        db.check().unwrap();
    };
    verify(&db);
    drop(db);
    let db = Database::open_with(&t.path, &logged(Durability::None)).unwrap();
    verify(&db);
}
