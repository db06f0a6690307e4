//! I/O errors injected at the Nth file operation, for every N of a
//! workload: transient and persistent, EIO and ENOSPC, fsync included, on
//! the data file and on the redo log, with logged commits on and off.
//! Every call returns `Ok` or `Err` (never panics); the instance keeps
//! serving the last good commit; after a failed fsync it refuses writes
//! (`Poisoned`); reopening gives a consistent state: the last commit that
//! returned `Ok`, or one whose `commit` failed after that.

mod common;

use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use common::{temp_db, Images, Rng};
use ironbark::{Database, Durability, Error, IoHook, IoHookHandle, Options};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Fails operation number `fail_at` (counting from 1), and every later one
/// when `persistent`.
struct Failer {
    count: AtomicU64,
    fail_at: u64,
    persistent: bool,
    errno: i32,
    failed_syncs: AtomicU64,
}

impl Failer {
    fn step(&self, is_sync: bool) -> io::Result<()> {
        let n = self.count.fetch_add(1, Ordering::SeqCst) + 1;
        if n == self.fail_at || (self.persistent && n > self.fail_at) {
            if is_sync {
                self.failed_syncs.fetch_add(1, Ordering::SeqCst);
            }
            return Err(io::Error::from_raw_os_error(self.errno));
        }
        Ok(())
    }
}

impl IoHook for Failer {
    fn on_write(&self, _: u64, _: &[&[u8]]) -> io::Result<()> {
        self.step(false)
    }
    fn on_sync(&self) -> io::Result<()> {
        self.step(true)
    }
    fn on_set_len(&self, _: u64) -> io::Result<()> {
        self.step(false)
    }
    fn on_read(&self, _: u64, _: usize) -> io::Result<()> {
        self.step(false)
    }
    fn on_log_write(&self, _: u64, _: &[&[u8]]) -> io::Result<()> {
        self.step(false)
    }
    fn on_log_sync(&self) -> io::Result<()> {
        self.step(true)
    }
    fn on_log_set_len(&self, _: u64) -> io::Result<()> {
        self.step(false)
    }
}

fn read_all(db: &Database) -> ironbark::Result<Model> {
    let rx = db.begin_read()?;
    let Ok(tree) = rx.tree("t") else {
        return Ok(Model::new());
    };
    rx.iter(&tree)?
        .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect()
}

/// Runs the workload against a hooked instance. Returns the last state a
/// commit returned `Ok` for, the states of commits that failed after it,
/// and the number of operations the hook saw.
fn workload(db: &Database, seed: u64) -> (Model, Vec<Model>) {
    let mut rng = Rng::new(seed);
    let mut committed = read_all(db).unwrap_or_default();
    let mut maybe = Vec::new();
    for c in 0..30u64 {
        let mut tx = match db.begin_write() {
            Ok(tx) => tx,
            Err(Error::Poisoned) => break,
            Err(e) => panic!("begin_write: {e}"),
        };
        let mut model = committed.clone();
        let tree = tx.open_tree("t").unwrap();
        let mut ok = true;
        for _ in 0..1 + rng.below(40) {
            let k = format!("k{:03}", rng.below(300)).into_bytes();
            if rng.chance(70) {
                let len = if rng.chance(10) {
                    3000
                } else {
                    rng.below(80) as usize
                };
                let v = rng.bytes(len);
                // Puts only read pages: they fail only on corruption.
                if tx.put(&tree, &k, &v).is_err() {
                    ok = false;
                    break;
                }
                model.insert(k, v);
            } else {
                if tx.delete(&tree, &k).is_err() {
                    ok = false;
                    break;
                }
                model.remove(&k);
            }
        }
        if !ok {
            continue;
        }
        if c % 3 == 0 {
            tx.set_durability(Durability::Immediate);
        }
        match tx.commit() {
            Ok(()) => {
                committed = model;
                maybe.clear();
            }
            Err(Error::Io(_)) => maybe.push(model),
            Err(e) => panic!("commit failed with an unexpected error: {e}"),
        }
        // The instance serves the last good commit, whatever failed.
        assert!(
            read_all(db).unwrap() == committed,
            "the instance lost its last good commit"
        );
        if c % 7 == 0 {
            match db.sync() {
                Ok(()) | Err(Error::Io(_)) | Err(Error::Poisoned) => {}
                Err(e) => panic!("sync: {e}"),
            }
        }
    }
    (committed, maybe)
}

fn base_file(path: &std::path::Path) {
    let db = Database::open(path).unwrap();
    let mut tx = db.begin_write().unwrap();
    let t = tx.open_tree("t").unwrap();
    for i in 0..100u32 {
        tx.put(&t, format!("k{i:03}").as_bytes(), b"initial")
            .unwrap();
    }
    tx.commit().unwrap();
}

/// Branch regions of one page (docs/design.md, "Branch regions"): past
/// 32 pages, a commit starts one for each branch page it cannot place in
/// those it has, so the workload's commits write new regions and name
/// them after their metas.
const REGION_BYTES: usize = 4096;

#[test]
fn every_nth_operation_fails_cleanly() {
    for logged in [true, false] {
        every_nth_operation(logged);
    }
}

fn every_nth_operation(logged: bool) {
    let t = temp_db("io.ib");
    base_file(&t.path);
    // Both files: a run leaves records in the log, which must not meet the
    // next run's data file.
    let base = Images::read(&t.path);
    // Count the operations of a clean run.
    let counter = Arc::new(Failer {
        count: AtomicU64::new(0),
        fail_at: u64::MAX,
        persistent: false,
        errno: libc::EIO,
        failed_syncs: AtomicU64::new(0),
    });
    {
        let options = Options {
            io_hook: Some(IoHookHandle(counter.clone())),
            durability: Durability::None,
            logged_commits: logged,
            branch_region_bytes: REGION_BYTES,
            ..Options::default()
        };
        let db = Database::open_with(&t.path, &options).unwrap();
        workload(&db, 5);
    }
    // The workload's commits started branch regions (the meta names some),
    // so errors hit their writes too.
    let head = std::fs::read(&t.path).unwrap();
    assert!(
        (0..2)
            .any(|slot| u32::from_le_bytes(head[slot * 4096 + 92..][..4].try_into().unwrap()) > 0),
        "logged {logged}: no branch region named"
    );
    let total = counter.count.load(Ordering::SeqCst);
    assert!(total > 40, "the workload made only {total} I/O operations");
    let mut runs = 0;
    for errno in [libc::EIO, libc::ENOSPC] {
        for persistent in [false, true] {
            for fail_at in 1..=total + 1 {
                base.write(&t.path);
                let failer = Arc::new(Failer {
                    count: AtomicU64::new(0),
                    fail_at,
                    persistent,
                    errno,
                    failed_syncs: AtomicU64::new(0),
                });
                let options = Options {
                    io_hook: Some(IoHookHandle(failer.clone())),
                    durability: Durability::None,
                    logged_commits: logged,
                    branch_region_bytes: REGION_BYTES,
                    ..Options::default()
                };
                let (committed, maybe) = match Database::open_with(&t.path, &options) {
                    Ok(db) => {
                        let r = workload(&db, 5);
                        if failer.failed_syncs.load(Ordering::SeqCst) > 0 {
                            assert!(
                                matches!(db.begin_write(), Err(Error::Poisoned)),
                                "writes are refused after a failed fsync"
                            );
                        }
                        r
                    }
                    Err(Error::Io(_)) => (
                        read_all(&Database::open(&t.path).unwrap()).unwrap(),
                        Vec::new(),
                    ),
                    Err(e) => panic!("open failed with an unexpected error: {e}"),
                };
                runs += 1;
                let db = Database::open(&t.path).unwrap();
                db.check()
                    .unwrap_or_else(|e| panic!("logged {logged} fail_at {fail_at}: check: {e}"));
                let found = read_all(&db).unwrap();
                assert!(
                    found == committed || maybe.contains(&found),
                    "logged {logged} errno {errno} persistent {persistent} fail_at {fail_at}: reopened state is neither the last good commit nor a failed one"
                );
            }
        }
    }
    eprintln!("logged {logged}: {runs} runs, {total} operations each");
}

/// A commit of 120 values of 4,000 bytes (480 KB of overflow blobs, which
/// a file commit writes a chunk at a time as it seals them, before its
/// tree pages): an error at each of its file operations, transient or
/// persistent, fails it cleanly, and the file reopens at the state before
/// it or, where the commit returned `Ok`, at its own.
#[test]
fn a_commit_of_many_blobs_fails_cleanly_at_each_of_its_writes() {
    let t = temp_db("blobs.ib");
    base_file(&t.path);
    let base = Images::read(&t.path);
    let before = read_all(&Database::open(&t.path).unwrap()).unwrap();
    let mut after = before.clone();
    let mut rng = Rng::new(17);
    let puts: Vec<(Vec<u8>, Vec<u8>)> = (0..120u32)
        .map(|i| (format!("big{i:03}").into_bytes(), rng.bytes(4000)))
        .collect();
    after.extend(puts.iter().cloned());
    // Returns the commit's write calls.
    let commit = |failer: &Arc<Failer>| -> ironbark::Result<u64> {
        let options = Options {
            io_hook: Some(IoHookHandle(failer.clone())),
            logged_commits: false,
            ..Options::default()
        };
        let db = Database::open_with(&t.path, &options)?;
        let mut tx = db.begin_write()?;
        let tree = tx.open_tree("t")?;
        for (k, v) in &puts {
            tx.put(&tree, k, v)?;
        }
        let calls = db.counters().write_calls;
        tx.commit()?;
        Ok(db.counters().write_calls - calls)
    };
    let failer = |fail_at: u64, persistent: bool| {
        Arc::new(Failer {
            count: AtomicU64::new(0),
            fail_at,
            persistent,
            errno: libc::EIO,
            failed_syncs: AtomicU64::new(0),
        })
    };
    let clean = failer(u64::MAX, false);
    let calls = commit(&clean).unwrap();
    assert!(read_all(&Database::open(&t.path).unwrap()).unwrap() == after);
    // Two chunks of blobs, the tree pages and the state, the meta.
    assert!(calls >= 4, "the commit wrote in {calls} calls");
    let total = clean.count.load(Ordering::SeqCst);
    for persistent in [false, true] {
        for fail_at in 1..=total {
            base.write(&t.path);
            let result = commit(&failer(fail_at, persistent));
            let db = Database::open(&t.path).unwrap();
            db.check()
                .unwrap_or_else(|e| panic!("fail_at {fail_at}: check: {e}"));
            let found = read_all(&db).unwrap();
            match result {
                Ok(_) => assert!(
                    found == after,
                    "fail_at {fail_at}: a commit that returned Ok is lost"
                ),
                Err(Error::Io(_)) => assert!(
                    found == before || found == after,
                    "fail_at {fail_at} persistent {persistent}: neither the state before nor after"
                ),
                Err(e) => panic!("fail_at {fail_at}: an unexpected error: {e}"),
            }
        }
    }
}
