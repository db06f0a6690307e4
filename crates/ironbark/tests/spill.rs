//! Write transactions larger than their memory budget
//! (`Options::max_dirty_bytes`): they spill dirty pages to a spill file and
//! still commit exactly what they did, with savepoints, overflow values,
//! reads of their own writes and I/O errors on the spill file; and a
//! transaction many times its budget commits in bounded memory.

mod common;

use std::collections::BTreeMap;
use std::io;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use common::{peak_rss, temp_db, Rng};
use ironbark::{Database, Error, IoHook, IoHookHandle, Options};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn options(max_dirty_bytes: usize) -> Options {
    Options {
        max_dirty_bytes,
        ..Options::default()
    }
}

fn key(rng: &mut Rng) -> Vec<u8> {
    format!("key{:08}", rng.below(200_000)).into_bytes()
}

/// Mostly short values, some that need an overflow blob of one or more pages.
fn value(rng: &mut Rng) -> Vec<u8> {
    let len = match rng.below(100) {
        0..=89 => 1 + rng.below(120) as usize,
        90..=97 => 2000 + rng.below(3000) as usize,
        _ => 9000 + rng.below(20_000) as usize,
    };
    rng.bytes(len)
}

/// The entries a range iterator yields.
fn entries<'a>(range: impl Iterator<Item = ironbark::Result<(&'a [u8], &'a [u8])>>) -> Model {
    range
        .map(|e| {
            let (k, v) = e.unwrap();
            (k.to_vec(), v.to_vec())
        })
        .collect()
}

fn contents(db: &Database) -> Model {
    let rx = db.begin_read().unwrap();
    let t = rx.tree("t").unwrap();
    entries(rx.range(&t, ..).unwrap())
}

/// Random puts, overwrites and deletes in one transaction 30x larger than
/// its 64 KiB budget, reading its own writes back as it goes.
#[test]
fn a_transaction_past_its_budget_spills_and_commits_exactly_its_changes() {
    let t = temp_db("spill.ib");
    let db = Database::open_with(&t.path, &options(64 << 10)).unwrap();
    let mut model = Model::new();
    let mut rng = Rng::new(7);
    for round in 0..2 {
        let mut tx = db.begin_write().unwrap();
        let tree = tx.open_tree("t").unwrap();
        for i in 0..6000 {
            let k = key(&mut rng);
            if rng.chance(20) {
                let had = model.remove(&k).is_some();
                assert_eq!(tx.delete(&tree, &k).unwrap(), had);
            } else {
                let v = value(&mut rng);
                tx.put(&tree, &k, &v).unwrap();
                model.insert(k, v);
            }
            if i % 97 == 0 {
                let probe = key(&mut rng);
                assert_eq!(
                    tx.get(&tree, &probe).unwrap(),
                    model.get(&probe).map(|v| &v[..]),
                    "round {round}, op {i}"
                );
            }
        }
        // A scan of the whole tree inside the transaction reads spilled
        // leaves and blobs.
        let seen = entries(tx.range(&tree, ..).unwrap());
        assert!(seen == model, "round {round}: the transaction's own view");
        tx.commit().unwrap();
        assert!(contents(&db) == model, "round {round}: after commit");
    }
    let stats = db.stats().unwrap().counters;
    assert!(stats.spills > 0, "the budget never made it spill");
    assert!(db.check().unwrap().is_clean());
    drop(db);
    let db = Database::open(&t.path).unwrap();
    assert!(contents(&db) == model, "after reopening");
    assert!(db.check().unwrap().is_clean());
}

/// Savepoints across spills: a rollback brings back pages that were
/// spilled before it and drops those spilled after.
#[test]
fn savepoints_roll_back_across_spills() {
    let t = temp_db("spill-savepoints.ib");
    let db = Database::open_with(&t.path, &options(32 << 10)).unwrap();
    let mut rng = Rng::new(11);
    let mut model = Model::new();
    let mut tx = db.begin_write().unwrap();
    let tree = tx.open_tree("t").unwrap();
    for _ in 0..2000 {
        let (k, v) = (key(&mut rng), value(&mut rng));
        tx.put(&tree, &k, &v).unwrap();
        model.insert(k, v);
    }
    let sp = tx.savepoint().unwrap();
    let kept = model.clone();
    for _ in 0..3000 {
        let k = key(&mut rng);
        if rng.chance(30) {
            tx.delete(&tree, &k).unwrap();
        } else {
            tx.put(&tree, &k, &value(&mut rng)).unwrap();
        }
    }
    tx.rollback_to(&sp).unwrap();
    let seen = entries(tx.range(&tree, ..).unwrap());
    assert!(seen == kept, "the rollback restored the savepoint's view");
    for _ in 0..2000 {
        let (k, v) = (key(&mut rng), value(&mut rng));
        tx.put(&tree, &k, &v).unwrap();
        model.insert(k, v);
    }
    let mut expected = kept;
    // `model` holds the puts before and after the savepoint; the ones in
    // between were rolled back.
    for (k, v) in &model {
        expected.insert(k.clone(), v.clone());
    }
    tx.commit().unwrap();
    assert!(contents(&db) == expected);
    assert!(db.stats().unwrap().counters.spills > 0);
    assert!(db.check().unwrap().is_clean());
}

/// Fails spill-file writes number `from` to `to` (counting from 1).
struct SpillFailer {
    count: AtomicU64,
    from: u64,
    to: u64,
    failed: AtomicU64,
}

impl IoHook for SpillFailer {
    fn on_spill_write(&self, _: u64, _: &[&[u8]]) -> io::Result<()> {
        let n = self.count.fetch_add(1, Ordering::SeqCst) + 1;
        if (self.from..=self.to).contains(&n) {
            self.failed.fetch_add(1, Ordering::SeqCst);
            return Err(io::Error::from_raw_os_error(libc_enospc()));
        }
        Ok(())
    }
}

fn libc_enospc() -> i32 {
    28
}

/// A failed spill write fails the operation that needed room, which then
/// changed nothing: the transaction goes on and commits the rest.
#[test]
fn a_failed_spill_fails_one_operation_and_loses_nothing_else() {
    for (from, to) in [(1, 1), (2, 4), (3, 3)] {
        let t = temp_db("spill-error.ib");
        let hook = Arc::new(SpillFailer {
            count: AtomicU64::new(0),
            from,
            to,
            failed: AtomicU64::new(0),
        });
        let opts = Options {
            io_hook: Some(IoHookHandle(hook.clone())),
            ..options(32 << 10)
        };
        let db = Database::open_with(&t.path, &opts).unwrap();
        let mut rng = Rng::new(from * 100 + to);
        let mut model = Model::new();
        let mut refused = 0;
        let mut tx = db.begin_write().unwrap();
        let tree = tx.open_tree("t").unwrap();
        for _ in 0..3000 {
            let (k, v) = (key(&mut rng), value(&mut rng));
            match tx.put(&tree, &k, &v) {
                Ok(()) => {
                    model.insert(k, v);
                }
                Err(Error::Io(e)) => {
                    assert_eq!(e.raw_os_error(), Some(28));
                    refused += 1;
                }
                Err(e) => panic!("unexpected error {e}"),
            }
        }
        tx.commit().unwrap();
        assert_eq!(refused, hook.failed.load(Ordering::SeqCst));
        assert!(refused > 0, "no spill write was failed");
        assert!(contents(&db) == model, "failures {from}..={to}");
        assert!(db.check().unwrap().is_clean());
    }
}

/// Fails every write to the data file while `on` (from the commit's
/// first write: the sealed copies of spilled pages).
struct DataWriteFailer {
    on: AtomicBool,
    failed: AtomicU64,
}

impl IoHook for DataWriteFailer {
    fn on_write(&self, _: u64, _: &[&[u8]]) -> io::Result<()> {
        if self.on.load(Ordering::SeqCst) {
            self.failed.fetch_add(1, Ordering::SeqCst);
            return Err(io::Error::from_raw_os_error(libc_enospc()));
        }
        Ok(())
    }
}

/// A commit of a transaction that spilled fails when writing its pages:
/// nothing of it is visible, before or after reopening, and the file
/// checks clean.
#[test]
fn a_spilled_commit_that_cannot_write_loses_nothing_committed() {
    let t = temp_db("spill-commit-error.ib");
    let hook = Arc::new(DataWriteFailer {
        on: AtomicBool::new(false),
        failed: AtomicU64::new(0),
    });
    let opts = Options {
        io_hook: Some(IoHookHandle(hook.clone())),
        ..options(32 << 10)
    };
    let mut rng = Rng::new(5);
    let mut model = Model::new();
    {
        let db = Database::open_with(&t.path, &opts).unwrap();
        let mut tx = db.begin_write().unwrap();
        let tree = tx.open_tree("t").unwrap();
        for _ in 0..500 {
            let (k, v) = (key(&mut rng), value(&mut rng));
            tx.put(&tree, &k, &v).unwrap();
            model.insert(k, v);
        }
        tx.commit().unwrap();
        let mut tx = db.begin_write().unwrap();
        for _ in 0..3000 {
            tx.put(&tree, &key(&mut rng), &value(&mut rng)).unwrap();
        }
        hook.on.store(true, Ordering::SeqCst);
        assert!(matches!(tx.commit(), Err(Error::Io(_))));
        hook.on.store(false, Ordering::SeqCst);
        assert!(hook.failed.load(Ordering::SeqCst) > 0);
        assert!(db.stats().unwrap().counters.spills > 0);
        assert!(contents(&db) == model, "the failed commit is not visible");
    }
    let db = Database::open(&t.path).unwrap();
    assert!(contents(&db) == model, "after reopening");
    assert!(db.check().unwrap().is_clean());
}

/// The peak memory check's child: set to the database path it works in.
const PEAK_CHILD: &str = "IRONBARK_SPILL_PEAK_CHILD";
/// Bytes the child's one transaction stores.
const PEAK_DATA: usize = 768 << 20;
/// Its budget.
const PEAK_BUDGET: usize = 32 << 20;

/// The child: one transaction of 768 MiB of sorted 1000-byte values under a
/// 32 MiB budget, then checks the peak memory it took.
#[test]
fn spill_peak_memory_child() {
    let Ok(path) = std::env::var(PEAK_CHILD) else {
        return; // only in the child of `a_transaction_many_times_its_budget_commits_in_bounded_memory`
    };
    let db = Database::open_with(&path, &options(PEAK_BUDGET)).unwrap();
    let base = peak_rss();
    let mut tx = db.begin_write().unwrap();
    let tree = tx.open_tree("t").unwrap();
    let mut value = vec![0u8; 1000];
    let n = PEAK_DATA / value.len();
    for i in 0..n {
        value[..8].copy_from_slice(&(i as u64).to_be_bytes());
        tx.put(&tree, format!("{i:012}").as_bytes(), &value)
            .unwrap();
    }
    tx.commit().unwrap();
    let grew = peak_rss().saturating_sub(base);
    println!("peak memory grew by {} MiB", grew >> 20);
    assert!(db.stats().unwrap().counters.spills > 0);
    assert!(
        grew < PEAK_DATA / 4,
        "a {} MiB transaction under a {} MiB budget raised peak memory by {} MiB",
        PEAK_DATA >> 20,
        PEAK_BUDGET >> 20,
        grew >> 20
    );
    let rx = db.begin_read().unwrap();
    assert_eq!(rx.len(&tree).unwrap(), n as u64);
    let v = rx.get(&tree, format!("{:012}", n / 3).as_bytes()).unwrap();
    assert_eq!(v.unwrap()[..8], ((n / 3) as u64).to_be_bytes());
}

#[test]
fn a_transaction_many_times_its_budget_commits_in_bounded_memory() {
    let t = temp_db("spill-peak.ib");
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "spill_peak_memory_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(PEAK_CHILD, &t.path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed\n{stdout}\n{stderr}");
    assert!(stdout.contains("peak memory grew by"), "{stdout}");
}
