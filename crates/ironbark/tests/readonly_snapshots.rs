//! Snapshots that hold logged commits (their pages in an arena, numbered
//! with the arena bit), read where the data file alone does not hold them:
//! through a read-only process that rebuilds them from the redo log (beside
//! a live writer, and after a writer was killed before any checkpoint),
//! through a read-only handle of a writing instance, and through the
//! writer's own handle. What is checked: every read path (lookups, nearest
//! keys, ranges both ways, verified ranges, streamed values, multimaps,
//! integer and typed trees) sees exactly the committed data; `check`,
//! `check_report`, `stats` and `readers` report no damage and the right
//! counts; `compact_to` writes a valid file (it opens and checks clean)
//! holding every committed transaction; and a page-for-page `copy_to`,
//! which cannot hold commits that are not in the file, refuses rather than
//! write an older commit under the newer one's txn id.
//!
//! The second process is this test binary re-run with a role in
//! `IRONBARK_ROS_ROLE`.

mod common;

use std::collections::BTreeMap;
use std::io::{BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use common::{hear, read_only, temp_db, Rng};
use ironbark::typed::TypedTree;
use ironbark::{Database, Durability, Error, IntWidth, IoHook, IoHookHandle, Options, ReadTxn};

const ROLE_ENV: &str = "IRONBARK_ROS_ROLE";
const PATH_ENV: &str = "IRONBARK_ROS_PATH";
const DST_ENV: &str = "IRONBARK_ROS_DST";

/// Keys of tree `plain` loaded by `base`.
const BASE_KEYS: u32 = 4000;

/// Every tree's entries as the byte API stores them (a multimap's pairs,
/// an integer tree's keys big-endian), by tree name.
type Dump = BTreeMap<String, Vec<(Vec<u8>, Vec<u8>)>>;

fn logged(durability: Durability) -> Options {
    Options {
        durability,
        logged_commits: true,
        ..Options::default()
    }
}

/// One bulk transaction (written as pages: a checkpoint) of every tree
/// kind, then a checkpoint, so that what follows is logged.
fn base(db: &Database) {
    let mut tx = db.begin_write().unwrap();
    let plain = tx.open_tree("plain").unwrap();
    for i in 0..BASE_KEYS {
        tx.put(&plain, &i.to_be_bytes(), &[i as u8; 100]).unwrap();
    }
    let mm = tx.open_multimap("mm").unwrap();
    for k in 0..100u32 {
        for d in 0..5u32 {
            tx.put_dup(
                &mm,
                format!("k{k:03}").as_bytes(),
                format!("d{d}").as_bytes(),
            )
            .unwrap();
        }
    }
    let ints = tx.open_int_tree("ints", IntWidth::U64).unwrap();
    for n in 0..1000u64 {
        tx.put_int(&ints, n * 3, &n.to_le_bytes()).unwrap();
    }
    let typed = TypedTree::<u64, String>::open(&mut tx, "typed").unwrap();
    for n in 0..500u64 {
        typed.put(&mut tx, &n, &format!("v{n:04}")).unwrap();
    }
    tx.commit().unwrap();
    db.checkpoint().unwrap();
}

/// Small transactions of every kind a logged commit holds: same-size
/// overwrites (value overlays), deletes (tombstones), inserts, values
/// that take overflow pages, multimap and integer-tree changes, typed puts,
/// and a counter that every commit sets to its number.
struct Workload {
    rng: Rng,
    n: u64,
}

impl Workload {
    fn new() -> Workload {
        Workload {
            rng: Rng::new(0x5eed_2026),
            n: 0,
        }
    }

    fn commit_one(&mut self, db: &Database) {
        let n = self.n;
        self.n += 1;
        let rng = &mut self.rng;
        let mut tx = db.begin_write().unwrap();
        let plain = tx.tree("plain").unwrap();
        tx.put(&plain, b"counter", &n.to_le_bytes()).unwrap();
        let ops = 1 + rng.below(3);
        for _ in 0..ops {
            let key = (rng.below(u64::from(BASE_KEYS) + 500) as u32).to_be_bytes();
            match rng.below(100) {
                0..=39 => tx.put(&plain, &key, &[n as u8; 100]).unwrap(),
                40..=54 => {
                    tx.delete(&plain, &key).unwrap();
                }
                55..=64 => {
                    let len = 5000 + rng.below(6000) as usize;
                    tx.put(
                        &plain,
                        format!("blob{:02}", n % 20).as_bytes(),
                        &rng.bytes(len),
                    )
                    .unwrap();
                }
                65..=79 => {
                    let mm = tx.multimap("mm").unwrap();
                    let k = format!("k{:03}", rng.below(120));
                    let d = format!("d{}", rng.below(8));
                    if rng.chance(70) {
                        tx.put_dup(&mm, k.as_bytes(), d.as_bytes()).unwrap();
                    } else {
                        tx.delete_dup(&mm, k.as_bytes(), d.as_bytes()).unwrap();
                    }
                }
                80..=92 => {
                    let ints = tx.int_tree("ints").unwrap();
                    let k = rng.below(3300);
                    if rng.chance(85) {
                        tx.put_int(&ints, k, &(n + 7).to_le_bytes()).unwrap();
                    } else {
                        tx.delete_int(&ints, k).unwrap();
                    }
                }
                _ => {
                    let typed = TypedTree::<u64, String>::find(&tx, "typed").unwrap();
                    typed
                        .put(&mut tx, &rng.below(600), &format!("w{n:04}"))
                        .unwrap();
                }
            }
        }
        tx.commit().unwrap();
    }
}

/// Every tree of the snapshot, read forward with the plain cursors.
fn dump(rx: &ReadTxn) -> Dump {
    let mut d = Dump::new();
    let plain = rx.tree("plain").unwrap();
    let entries = rx
        .iter(&plain)
        .unwrap()
        .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect::<ironbark::Result<_>>()
        .unwrap();
    d.insert("plain".into(), entries);
    let mm = rx.multimap("mm").unwrap();
    let pairs = rx
        .multimap_iter(&mm)
        .unwrap()
        .map(|p| p.map(|(k, v)| (k.into_owned(), v.to_vec())))
        .collect::<ironbark::Result<_>>()
        .unwrap();
    d.insert("mm".into(), pairs);
    let ints = rx.int_tree("ints").unwrap();
    let pairs = rx
        .int_iter(&ints)
        .unwrap()
        .map(|p| p.map(|(k, v)| (k.to_be_bytes().to_vec(), v.to_vec())))
        .collect::<ironbark::Result<_>>()
        .unwrap();
    d.insert("ints".into(), pairs);
    let typed = rx.tree("typed").unwrap();
    let entries = rx
        .iter(&typed)
        .unwrap()
        .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect::<ironbark::Result<_>>()
        .unwrap();
    d.insert("typed".into(), entries);
    if let Ok(wide) = rx.tree("wide") {
        let entries = rx
            .iter(&wide)
            .unwrap()
            .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
            .collect::<ironbark::Result<_>>()
            .unwrap();
        d.insert("wide".into(), entries);
    }
    d
}

/// The dump of the workload's first `commits` transactions, made in a
/// database without logged commits (every commit written as pages).
fn reference(dir: &Path, commits: u64) -> Dump {
    reference_of(dir, |db| {
        base(db);
        let mut w = Workload::new();
        for _ in 0..commits {
            w.commit_one(db);
        }
    })
}

/// The dump of what `write` commits, in a database without logged commits.
fn reference_of(dir: &Path, write: impl FnOnce(&Database)) -> Dump {
    let path = dir.join("reference.ib");
    let db = Database::open_with(
        &path,
        &Options {
            logged_commits: false,
            durability: Durability::None,
            ..Options::default()
        },
    )
    .unwrap();
    write(&db);
    let rx = db.begin_read().unwrap();
    dump(&rx)
}

/// Every read path of `rx` agrees with `want`: lookups, nearest keys,
/// ranges both ways, verified ranges, prefixes, streamed values, and the
/// multimap, integer and typed APIs.
fn read_everything(rx: &ReadTxn, want: &Dump) {
    assert_eq!(&dump(rx), want, "forward scans");
    let plain = rx.tree("plain").unwrap();
    let entries = &want["plain"];
    assert_eq!(rx.len(&plain).unwrap(), entries.len() as u64);
    let back: Vec<_> = rx
        .iter(&plain)
        .unwrap()
        .rev()
        .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect::<ironbark::Result<_>>()
        .unwrap();
    assert!(back.iter().eq(entries.iter().rev()), "backward scan");
    let verified: Vec<_> = rx
        .iter_verified(&plain)
        .unwrap()
        .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect::<ironbark::Result<_>>()
        .unwrap();
    assert_eq!(&verified, entries, "verified scan");
    let model: BTreeMap<_, _> = entries.iter().cloned().collect();
    for (k, v) in entries {
        assert_eq!(rx.get(&plain, k).unwrap(), Some(&v[..]), "get {k:?}");
        if let Some(mut r) = rx.get_reader(&plain, k).unwrap() {
            let mut read = Vec::new();
            r.read_to_end(&mut read).unwrap();
            assert_eq!(&read, v, "get_reader {k:?}");
        }
    }
    for i in (0..BASE_KEYS + 500).step_by(37) {
        let probe = i.to_be_bytes().to_vec();
        let ge = model.range(probe.clone()..).next();
        assert_eq!(
            rx.get_ge(&plain, &probe)
                .unwrap()
                .map(|(k, v)| (k.to_vec(), v.to_vec())),
            ge.map(|(k, v)| (k.clone(), v.clone())),
            "get_ge {i}"
        );
        let lt = model.range(..probe.clone()).next_back();
        assert_eq!(
            rx.get_lt(&plain, &probe)
                .unwrap()
                .map(|(k, v)| (k.to_vec(), v.to_vec())),
            lt.map(|(k, v)| (k.clone(), v.clone())),
            "get_lt {i}"
        );
        assert_eq!(
            rx.contains_key(&plain, &probe).unwrap(),
            model.contains_key(&probe)
        );
    }
    let lo = 1000u32.to_be_bytes();
    let hi = 3000u32.to_be_bytes();
    let mid: Vec<_> = rx
        .range(&plain, &lo[..]..&hi[..])
        .unwrap()
        .rev()
        .map(|e| e.unwrap().0.to_vec())
        .collect();
    let want_mid: Vec<_> = model
        .range(lo.to_vec()..hi.to_vec())
        .rev()
        .map(|(k, _)| k.clone())
        .collect();
    assert_eq!(mid, want_mid, "a range backwards");
    let blobs = rx.prefix(&plain, b"blob").unwrap().count();
    assert_eq!(
        blobs,
        model.keys().filter(|k| k.starts_with(b"blob")).count()
    );

    let mm = rx.multimap("mm").unwrap();
    let pairs = &want["mm"];
    assert_eq!(rx.multimap_len(&mm).unwrap(), pairs.len() as u64);
    let back: Vec<_> = rx
        .multimap_iter_verified(&mm)
        .unwrap()
        .rev()
        .map(|p| p.map(|(k, v)| (k.into_owned(), v.to_vec())))
        .collect::<ironbark::Result<_>>()
        .unwrap();
    assert!(back.iter().eq(pairs.iter().rev()), "multimap backwards");
    for k in 0..120u32 {
        let key = format!("k{k:03}").into_bytes();
        let dups: Vec<_> = rx
            .get_dups(&mm, &key)
            .unwrap()
            .map(|d| d.unwrap().to_vec())
            .collect();
        let want_dups: Vec<_> = pairs
            .iter()
            .filter(|(pk, _)| *pk == key)
            .map(|(_, v)| v.clone())
            .collect();
        assert_eq!(dups, want_dups, "get_dups {k}");
        assert_eq!(rx.count_dups(&mm, &key).unwrap(), want_dups.len() as u64);
    }

    let ints = rx.int_tree("ints").unwrap();
    let int_model: BTreeMap<u64, Vec<u8>> = want["ints"]
        .iter()
        .map(|(k, v)| (u64::from_be_bytes(k[..].try_into().unwrap()), v.clone()))
        .collect();
    assert_eq!(rx.int_len(&ints).unwrap(), int_model.len() as u64);
    for k in (0..3300).step_by(11) {
        assert_eq!(
            rx.get_int(&ints, k).unwrap().map(<[u8]>::to_vec),
            int_model.get(&k).cloned(),
            "get_int {k}"
        );
    }
    let ranged: Vec<u64> = rx
        .int_range(&ints, 500..2500)
        .unwrap()
        .rev()
        .map(|e| e.unwrap().0)
        .collect();
    let want_ranged: Vec<u64> = int_model.range(500..2500).rev().map(|(k, _)| *k).collect();
    assert_eq!(ranged, want_ranged, "int_range backwards");

    let typed = TypedTree::<u64, String>::find(rx, "typed").unwrap();
    let all: Vec<(u64, String)> = typed.iter(rx).unwrap().map(Result::unwrap).collect();
    assert_eq!(all.len(), want["typed"].len());
    for (k, v) in &all {
        assert_eq!(typed.get(rx, k).unwrap().as_ref(), Some(v));
    }
}

/// The entries `check` counts: every tree's, a multimap's pairs included.
fn entries_of(d: &Dump) -> u64 {
    d.values().map(|e| e.len() as u64).sum()
}

/// `stats` names every tree with the snapshot's counts.
fn assert_stats(db: &Database, want: &Dump, txn: u64) {
    let stats = db.stats().unwrap();
    assert_eq!(stats.last_txn_id, txn, "stats of another commit");
    let counts: BTreeMap<String, u64> = stats
        .trees
        .iter()
        .map(|t| (t.name.clone(), t.entries))
        .collect();
    let want: BTreeMap<String, u64> = want
        .iter()
        .map(|(n, e)| (n.clone(), e.len() as u64))
        .collect();
    assert_eq!(counts, want, "stats' entries");
}

/// `compact_to` of `rx` into `dst`: the new file opens, checks clean and
/// holds exactly the snapshot.
fn assert_compacts(rx: &ReadTxn, dst: &Path) {
    let want = dump(rx);
    let done = rx.compact_to(dst).unwrap();
    assert_eq!(done.txn_id, rx.txn_id());
    assert_eq!(done.entries, entries_of(&want));
    let copy = Database::open(dst).unwrap();
    let report = copy.check().unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    assert_eq!(report.entries, entries_of(&want));
    let crx = copy.begin_read().unwrap();
    read_everything(&crx, &want);
}

/// A page-for-page copy of a snapshot that holds logged commits is refused,
/// and leaves no file behind.
fn assert_plain_copy_refused(rx: &ReadTxn, dst: &Path) {
    for verified in [false, true] {
        let r = if verified {
            rx.copy_to_verified(dst)
        } else {
            rx.copy_to(dst)
        };
        assert!(
            matches!(r, Err(Error::InvalidOption(_))),
            "a page-for-page copy of logged commits: {r:?}"
        );
        assert!(!dst.exists(), "a refused copy left a file");
    }
}

fn spawn(test: &str, role: &str, path: &Path, dst: &Path) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture"])
        .env(ROLE_ENV, role)
        .env(PATH_ENV, path)
        .env(DST_ENV, dst)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

const KILLED_COMMITS: u64 = 300;

/// A writer process killed before any checkpoint: its commits are in the
/// redo log only. A read-only process rebuilds them, reads them all,
/// checks them, and compacts them into a valid copy; a page-for-page copy
/// refuses. The writable open that follows replays them into the file.
#[test]
fn a_killed_writers_logged_commits_are_read_checked_and_compacted_read_only() {
    const TEST: &str = "a_killed_writers_logged_commits_are_read_checked_and_compacted_read_only";
    if std::env::var(ROLE_ENV).as_deref() == Ok("killed-writer") {
        let db = Database::open_with(
            std::env::var(PATH_ENV).unwrap(),
            &logged(Durability::Immediate),
        )
        .unwrap();
        base(&db);
        let mut w = Workload::new();
        for _ in 0..KILLED_COMMITS {
            w.commit_one(&db);
        }
        assert!(db.counters().logged_commits >= KILLED_COMMITS - 5);
        println!("ROS done");
        std::io::stdout().flush().unwrap();
        // Dies without a close (which would checkpoint).
        std::process::exit(0);
    }
    let t = temp_db("killed.ib");
    let mut child = spawn(TEST, "killed-writer", &t.path, &t.path);
    let mut out = BufReader::new(child.stdout.take().unwrap());
    hear(&mut out, "ROS done");
    assert!(child.wait().unwrap().success());
    let want = reference(t.dir.path(), KILLED_COMMITS);

    let ro = Database::open_with(&t.path, &read_only()).unwrap();
    let rx = ro.begin_read().unwrap();
    read_everything(&rx, &want);
    let report = ro.check().unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    assert_eq!(report.entries, entries_of(&want));
    let report = ro.check_report().unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_stats(&ro, &want, rx.txn_id());
    let readers = ro.readers().unwrap();
    assert_eq!(readers.len(), 1, "{readers:?}");
    // It keeps the durable commit the rebuild was built on.
    assert_eq!(
        readers[0].snapshot_txn,
        ro.stats().unwrap().durable_txn_id,
        "{readers:?}"
    );
    assert!(readers[0].snapshot_txn < rx.txn_id());
    assert_plain_copy_refused(&rx, &t.dir.path().join("plain-copy.ib"));
    assert_compacts(&rx, &t.dir.path().join("compact.ib"));
    // `Database::compact_to` takes the newest snapshot.
    let whole = t.dir.path().join("compact2.ib");
    let done = ro.compact_to(&whole).unwrap();
    assert_eq!(done.txn_id, rx.txn_id());
    let copy = Database::open_with(&whole, &read_only()).unwrap();
    read_everything(&copy.begin_read().unwrap(), &want);
    drop(copy);
    drop(rx);
    drop(ro);

    // The writable open replays the log: the same data, now in the file.
    let db = Database::open(&t.path).unwrap();
    read_everything(&db.begin_read().unwrap(), &want);
    assert!(db.check().unwrap().is_clean());
    let rx = db.begin_read().unwrap();
    rx.copy_to_verified(t.dir.path().join("after-replay.ib"))
        .unwrap();
    let copy = Database::open(t.dir.path().join("after-replay.ib")).unwrap();
    assert!(copy.check().unwrap().is_clean());
    read_everything(&copy.begin_read().unwrap(), &want);
}

/// The read-only process of the test below: while the writer commits (and
/// now and then checkpoints), it reads snapshot after snapshot, checks
/// each one's reads agree, runs `check` and `stats`, and compacts three of
/// them, each copy checked and compared with its snapshot. Prints the
/// counter of each compacted snapshot.
fn live_copier(path: &Path, dst: &Path) {
    let db = Database::open_with(path, &read_only()).unwrap();
    let mut out = std::io::stdout().lock();
    for round in 0..3 {
        let rx = db.begin_read().unwrap();
        let want = dump(&rx);
        read_everything(&rx, &want);
        let counter = {
            let plain = rx.tree("plain").unwrap();
            u64::from_le_bytes(
                rx.get(&plain, b"counter")
                    .unwrap()
                    .unwrap()
                    .try_into()
                    .unwrap(),
            )
        };
        let report = db.check().unwrap();
        assert!(report.is_clean(), "{:?}", report.problems);
        let stats = db.stats().unwrap();
        assert!(stats.last_txn_id >= rx.txn_id());
        let dst = dst.with_file_name(format!("live-{round}.ib"));
        assert_compacts(&rx, &dst);
        if rx
            .copy_to(dst.with_file_name(format!("live-plain-{round}.ib")))
            .is_ok()
        {
            // Only a snapshot of a checkpoint copies page for page: the
            // copy holds the same data.
            let copy =
                Database::open(dst.with_file_name(format!("live-plain-{round}.ib"))).unwrap();
            assert!(copy.check().unwrap().is_clean());
            assert_eq!(dump(&copy.begin_read().unwrap()), want);
        }
        writeln!(out, "ROS copied {round} {counter}").unwrap();
        out.flush().unwrap();
    }
}

/// A read-only process copies (compacting) a database whose writer, in
/// another process, keeps making logged commits: every copy is a valid file
/// holding one whole commit, no older than the last one made before the
/// copier started.
#[test]
fn a_read_only_process_compacts_beside_a_writer_of_logged_commits() {
    const TEST: &str = "a_read_only_process_compacts_beside_a_writer_of_logged_commits";
    if std::env::var(ROLE_ENV).as_deref() == Ok("live-copier") {
        live_copier(
            Path::new(&std::env::var(PATH_ENV).unwrap()),
            Path::new(&std::env::var(DST_ENV).unwrap()),
        );
        return;
    }
    let t = temp_db("live.ib");
    let db = Database::open_with(&t.path, &logged(Durability::None)).unwrap();
    base(&db);
    let mut w = Workload::new();
    for _ in 0..200 {
        w.commit_one(&db);
    }
    let before = w.n - 1;
    let logged_before = db.counters().logged_commits;
    let mut child = spawn(TEST, "live-copier", &t.path, &t.dir.path().join("x.ib"));
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let heard = std::thread::spawn(move || {
        let heard: Vec<_> = (0..3).map(|_| hear(&mut out, "ROS copied ")).collect();
        // The rest (the child's test summary) read too: a closed pipe would
        // fail the child.
        std::io::copy(&mut out, &mut std::io::sink()).unwrap();
        heard
    });
    while !heard.is_finished() {
        w.commit_one(&db);
        if w.n.is_multiple_of(400) {
            db.checkpoint().unwrap();
        }
    }
    let heard = heard.join().unwrap();
    assert!(child.wait().unwrap().success(), "the copier failed");
    assert!(
        db.counters().logged_commits - logged_before > 10,
        "too few logged commits beside the copier to test anything"
    );
    let mut last = before;
    for line in heard {
        let counter: u64 = line.split(' ').nth(1).unwrap().parse().unwrap();
        assert!(counter >= last, "a copy went back from {last} to {counter}");
        last = counter;
    }
}

/// The writer's own process: a read-only handle of the writing instance
/// and the writer's handle both read, check and compact the logged
/// commits, and refuse a page-for-page copy of them until a checkpoint.
#[test]
fn the_writing_process_compacts_its_logged_commits_from_either_handle() {
    let t = temp_db("own.ib");
    let db = Database::open_with(&t.path, &logged(Durability::Immediate)).unwrap();
    base(&db);
    let mut w = Workload::new();
    for _ in 0..150 {
        w.commit_one(&db);
    }
    read_everything(&db.begin_read().unwrap(), &reference(t.dir.path(), 150));
    let ro = Database::open_with(&t.path, &read_only()).unwrap();
    for (name, handle) in [("rw", &db), ("ro", &ro)] {
        let logged = db.counters().logged_commits;
        w.commit_one(&db);
        assert_eq!(db.counters().logged_commits, logged + 1, "not logged");
        let rx = handle.begin_read().unwrap();
        let want = dump(&rx);
        read_everything(&rx, &want);
        assert_plain_copy_refused(&rx, &t.dir.path().join(format!("{name}-plain.ib")));
        assert_compacts(&rx, &t.dir.path().join(format!("{name}-compact.ib")));
        let report = handle.check().unwrap();
        assert!(report.is_clean(), "{name}: {:?}", report.problems);
        assert_eq!(report.entries, entries_of(&want));
    }
    db.checkpoint().unwrap();
    let rx = ro.begin_read().unwrap();
    let plain = t.dir.path().join("after-checkpoint.ib");
    rx.copy_to_verified(&plain).unwrap();
    let copy = Database::open(&plain).unwrap();
    assert!(copy.check().unwrap().is_clean());
    assert_eq!(dump(&copy.begin_read().unwrap()), dump(&rx));
}

/// Keys of tree `wide`, loaded by `wide_load`.
const WIDE_KEYS: u32 = 40_000;

/// A tree of about 1,300 leaves, in one transaction, then a checkpoint.
fn wide_load(db: &Database) {
    let mut tx = db.begin_write().unwrap();
    let wide = tx.open_tree("wide").unwrap();
    for i in 0..WIDE_KEYS {
        tx.put(&wide, &i.to_be_bytes(), &[1u8; 100]).unwrap();
    }
    tx.commit().unwrap();
    db.checkpoint().unwrap();
}

/// 100 transactions of 100 random puts each into tree `wide` (keys in and
/// beyond the loaded ones): logged commits that change most of its leaves.
fn wide_changes(db: &Database) {
    let mut rng = Rng::new(77);
    for n in 0..100u32 {
        let mut tx = db.begin_write().unwrap();
        let wide = tx.tree("wide").unwrap();
        for _ in 0..100 {
            let k = rng.below(u64::from(WIDE_KEYS) * 11 / 10) as u32;
            tx.put(&wide, &k.to_be_bytes(), &[n as u8; 100]).unwrap();
        }
        tx.commit().unwrap();
    }
}

/// Ends the process at the data file's `exit_at`-th sync once armed: a
/// writer killed between the steps of a checkpoint.
#[derive(Default)]
struct ExitAtSync {
    armed: AtomicBool,
    syncs: AtomicU64,
}

impl IoHook for ExitAtSync {
    fn on_sync(&self) -> std::io::Result<()> {
        if self.armed.load(Ordering::SeqCst) && self.syncs.fetch_add(1, Ordering::SeqCst) == 3 {
            println!("ROS killed");
            std::io::stdout().flush().unwrap();
            std::process::exit(0);
        }
        Ok(())
    }
}

const STEPS_TEST: &str =
    "a_writer_killed_between_checkpoint_steps_is_read_checked_and_compacted_read_only";

/// The child of the tests below: the workload, tree `wide` and its changes
/// in logged commits, then a checkpoint in steps during which the process
/// ends (`ExitAtSync`).
fn stepping_writer(path: &str) {
    let hook = Arc::new(ExitAtSync::default());
    let db = Database::open_with(
        path,
        &Options {
            checkpoint_step_pages: Some(64),
            io_hook: Some(IoHookHandle(hook.clone())),
            ..logged(Durability::None)
        },
    )
    .unwrap();
    stepped_writes(&db);
    assert!(db.counters().logged_commits >= 195, "{:?}", db.counters());
    hook.armed.store(true, Ordering::SeqCst);
    db.checkpoint().unwrap();
    println!("ROS checkpoint done: {:?}", db.counters());
    std::process::exit(0);
}

/// What `stepping_writer` commits.
fn stepped_writes(db: &Database) {
    base(db);
    wide_load(db);
    let mut w = Workload::new();
    for _ in 0..100 {
        w.commit_one(db);
    }
    // Last: a commit of the workload's with a blob and few other pages
    // may be too large to log (a checkpoint), and the checkpoint in steps
    // must hold these changes.
    wide_changes(db);
}

/// Runs `stepping_writer` on `t` (as a child of test `test`) and returns
/// the dump of everything it committed.
fn killed_between_steps(test: &str, t: &common::TempDb) -> Dump {
    let mut child = spawn(test, "stepping-writer", &t.path, &t.path);
    let mut out = BufReader::new(child.stdout.take().unwrap());
    assert_eq!(hear(&mut out, "ROS "), "killed", "no checkpoint in steps");
    assert!(child.wait().unwrap().success());
    reference_of(t.dir.path(), stepped_writes)
}

/// A writer killed in the middle of a checkpoint in steps: the file's
/// durable commit is a step (part of the logged commits' pages, numbered
/// above the newest logged commit), the log holds the rest. A read-only
/// process rebuilds the newest commit on the step, reads it, checks it
/// (until session 26 `check` reported "child txn is newer than the
/// commit") and compacts it into a valid copy of every committed
/// transaction; the writable open then replays it.
#[test]
fn a_writer_killed_between_checkpoint_steps_is_read_checked_and_compacted_read_only() {
    if std::env::var(ROLE_ENV).as_deref() == Ok("stepping-writer") {
        stepping_writer(&std::env::var(PATH_ENV).unwrap());
        return;
    }
    let t = temp_db("stepped.ib");
    let want = killed_between_steps(STEPS_TEST, &t);

    let ro = Database::open_with(&t.path, &read_only()).unwrap();
    let rx = ro.begin_read().unwrap();
    read_everything(&rx, &want);
    let report = ro.check().unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    assert_eq!(report.entries, entries_of(&want));
    let report = ro.check_report().unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_stats(&ro, &want, rx.txn_id());
    assert_plain_copy_refused(&rx, &t.dir.path().join("plain-copy.ib"));
    assert_compacts(&rx, &t.dir.path().join("compact.ib"));
    drop(rx);
    drop(ro);

    let db = Database::open(&t.path).unwrap();
    read_everything(&db.begin_read().unwrap(), &want);
    assert!(db.check().unwrap().is_clean());
}

const REUSE_TEST: &str = "a_snapshot_rebuilt_on_a_checkpoint_step_keeps_its_pages_from_reuse";

/// The writable process of the test below: its open replays the log on the
/// step; then it rewrites tree `wide` many times over, with every commit
/// written to the file, so that every page free for reuse is reused.
fn rewriter(path: &str) {
    let db = Database::open_with(
        path,
        &Options {
            logged_commits: false,
            ..Options::default()
        },
    )
    .unwrap();
    let mut rng = Rng::new(99);
    for n in 0..30u32 {
        let mut tx = db.begin_write().unwrap();
        let value = [0xee - n as u8; 100];
        let wide = tx.tree("wide").unwrap();
        for _ in 0..4000 {
            let k = rng.below(u64::from(WIDE_KEYS)) as u32;
            tx.put(&wide, &k.to_be_bytes(), &value).unwrap();
        }
        // Every tree: the steps may have written any of them.
        let plain = tx.tree("plain").unwrap();
        for k in 0..BASE_KEYS + 500 {
            tx.put(&plain, &k.to_be_bytes(), &value).unwrap();
        }
        let ints = tx.int_tree("ints").unwrap();
        for k in 0..3300 {
            tx.put_int(&ints, k, &value[..8]).unwrap();
        }
        let mm = tx.multimap("mm").unwrap();
        for k in 0..120 {
            tx.put_dup(&mm, format!("k{k:03}").as_bytes(), &value[..3])
                .unwrap();
        }
        let typed = TypedTree::<u64, String>::find(&tx, "typed").unwrap();
        for k in 0..600 {
            typed.put(&mut tx, &k, &format!("x{n:04}")).unwrap();
        }
        tx.commit().unwrap();
    }
    println!("ROS rewritten");
}

/// A read-only process's snapshot of the newest logged commit, rebuilt on
/// a step of a checkpoint in steps whose writer was killed, stays whole
/// while another process replays the log and then rewrites the data many
/// times over: the step's pages it reads are not reused under it.
#[test]
fn a_snapshot_rebuilt_on_a_checkpoint_step_keeps_its_pages_from_reuse() {
    match std::env::var(ROLE_ENV).as_deref() {
        Ok("stepping-writer") => return stepping_writer(&std::env::var(PATH_ENV).unwrap()),
        Ok("rewriter") => return rewriter(&std::env::var(PATH_ENV).unwrap()),
        _ => {}
    }
    let t = temp_db("reused.ib");
    let want = killed_between_steps(REUSE_TEST, &t);
    let ro = Database::open_with(&t.path, &read_only()).unwrap();
    let kept = ro.begin_read().unwrap();
    read_everything(&kept, &want);
    eprintln!(
        "DEBUG kept {} readers {:?}",
        kept.txn_id(),
        ro.readers().unwrap()
    );
    let mut child = spawn(REUSE_TEST, "rewriter", &t.path, &t.path);
    let mut out = BufReader::new(child.stdout.take().unwrap());
    assert_eq!(hear(&mut out, "ROS "), "rewritten");
    std::io::copy(&mut out, &mut std::io::sink()).unwrap();
    assert!(child.wait().unwrap().success(), "the rewriter failed");
    read_everything(&kept, &want);
    drop(kept);
    let report = ro.check().unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
}
