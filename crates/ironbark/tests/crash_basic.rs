//! Durability without fault injection: copies of the database (its data
//! file and its redo log) taken just after a commit open to that commit; a
//! database closed after `Durability::None` commits reopens with all of
//! them; torn last commits (the new meta page with any mix of old and new
//! contents of the pages the commit wrote) open to exactly the old or the
//! new state; and torn log records (any prefix or mix of the records
//! logged since a checkpoint) open to one of the commits they hold. The
//! copy and close tests run with logged commits on (the default) and off;
//! the torn-page tests are about the file commit protocol, so they turn
//! logged commits off.

mod common;

use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::{temp_db, Images, Rng};
use ironbark::{BrokenProtocol, Database, Durability, IoHook, IoHookHandle, Options};

type Contents = BTreeMap<String, BTreeMap<Vec<u8>, Vec<u8>>>;

fn open(path: &Path, durability: Durability) -> ironbark::Result<Database> {
    open_logged(path, durability, Options::default().logged_commits)
}

/// `logged`: whether commits may be logged (`Options::logged_commits`).
fn open_logged(path: &Path, durability: Durability, logged: bool) -> ironbark::Result<Database> {
    Database::open_with(
        path,
        &Options {
            durability,
            logged_commits: logged,
            ..Options::default()
        },
    )
}

/// For the torn-page tests, which tear the pages and meta a file commit
/// writes: logged commits off, so that every commit writes the data file.
/// `broken`: a deliberately broken commit protocol, to show that the torn
/// commit tests catch one.
fn open_broken(
    path: &Path,
    durability: Durability,
    broken: Option<BrokenProtocol>,
) -> ironbark::Result<Database> {
    Database::open_with(
        path,
        &Options {
            durability,
            logged_commits: false,
            broken_protocol: broken,
            ..Options::default()
        },
    )
}

fn dump(db: &Database) -> Contents {
    let rx = db.begin_read().unwrap();
    rx.list_trees()
        .into_iter()
        .map(|name| {
            let t = rx.tree(&name).unwrap();
            let m = rx
                .iter(&t)
                .unwrap()
                .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
                .collect();
            (name, m)
        })
        .collect()
}

/// One random transaction over a few trees: puts (some overflow values),
/// deletes, and now and then a tree dropped or created.
fn random_txn(db: &Database, rng: &mut Rng, durability: Option<Durability>, size: usize) {
    let mut tx = db.begin_write().unwrap();
    if let Some(d) = durability {
        tx.set_durability(d);
    }
    let names = ["alpha", "beta", "gamma", "delta"];
    if rng.chance(10) {
        let name = names[rng.below(4) as usize];
        tx.drop_tree(name).unwrap();
    }
    for _ in 0..size {
        let t = tx.open_tree(names[rng.below(3) as usize]).unwrap();
        let k = format!("key{:05}", rng.below(3000)).into_bytes();
        if rng.chance(20) {
            tx.delete(&t, &k).unwrap();
        } else {
            let n = match rng.below(40) {
                0 => 5000 + rng.below(20_000) as usize,
                1 => 0,
                _ => rng.below(300) as usize,
            };
            let v = rng.bytes(n);
            tx.put(&t, &k, &v).unwrap();
        }
    }
    tx.commit().unwrap();
}

/// Writes `image` (a data file and its log) to a new database and opens
/// it.
fn open_image(image: &Images) -> (common::TempDb, ironbark::Result<Database>) {
    let t = temp_db("copy.ib");
    image.write(&t.path);
    let r = open(&t.path, Durability::Immediate);
    (t, r)
}

/// A data file image with no log (the torn-page tests, whose commits all
/// write the data file).
fn data_only(data: Vec<u8>) -> Images {
    Images {
        data,
        log: Vec::new(),
    }
}

#[test]
fn copy_after_immediate_commit_has_everything() {
    for logged in [true, false] {
        let t = temp_db("imm.ib");
        let db = open_logged(&t.path, Durability::Immediate, logged).unwrap();
        let mut rng = Rng::new(1);
        for c in 0..12 {
            random_txn(&db, &mut rng, None, 50 + c * 20);
            let want = dump(&db);
            // What is in the files now (the page cache, but the same bytes
            // a synced disk holds): with logged commits, the newest ones
            // are only in the log.
            let image = Images::read(&t.path);
            let (_copy, r) = open_image(&image);
            let copy = r.unwrap_or_else(|e| {
                panic!("logged {logged}, commit {c}: the copy does not open: {e}")
            });
            assert!(
                dump(&copy) == want,
                "logged {logged}, commit {c}: the copy differs"
            );
            copy.check().unwrap();
            // The copy is a working database.
            let mut tx = copy.begin_write().unwrap();
            let tr = tx.open_tree("copy-only").unwrap();
            tx.put(&tr, b"k", b"v").unwrap();
            tx.commit().unwrap();
            copy.check().unwrap();
        }
        drop(db);
        let db = open_logged(&t.path, Durability::Immediate, logged).unwrap();
        db.check().unwrap();
    }
}

/// Whether each file has writes that no `fdatasync` of it has covered yet:
/// the newest commit is durable when neither has. (Not `Stats`: with
/// logged commits pending, `stats` checkpoints, durably.)
#[derive(Default)]
struct Unsynced {
    data: AtomicBool,
    log: AtomicBool,
}

impl Unsynced {
    fn any(&self) -> bool {
        self.data.load(Ordering::SeqCst) || self.log.load(Ordering::SeqCst)
    }
}

impl IoHook for Unsynced {
    fn on_write(&self, _: u64, _: &[&[u8]]) -> io::Result<()> {
        self.data.store(true, Ordering::SeqCst);
        Ok(())
    }
    fn on_sync(&self) -> io::Result<()> {
        self.data.store(false, Ordering::SeqCst);
        Ok(())
    }
    fn on_log_write(&self, _: u64, _: &[&[u8]]) -> io::Result<()> {
        self.log.store(true, Ordering::SeqCst);
        Ok(())
    }
    fn on_log_sync(&self) -> io::Result<()> {
        self.log.store(false, Ordering::SeqCst);
        Ok(())
    }
}

#[test]
fn durability_none_commits_survive_a_clean_close() {
    for logged in [true, false] {
        let t = temp_db("none.ib");
        let mut rng = Rng::new(2);
        let mut want = Contents::new();
        for session in 0..5 {
            let unsynced = Arc::new(Unsynced::default());
            let options = Options {
                durability: Durability::None,
                logged_commits: logged,
                io_hook: Some(IoHookHandle(unsynced.clone())),
                ..Options::default()
            };
            let db = Database::open_with(&t.path, &options).unwrap();
            assert!(
                dump(&db) == want,
                "logged {logged}, session {session}: reopen lost commits"
            );
            for _ in 0..30 {
                random_txn(&db, &mut rng, None, 40);
            }
            // An aborted transaction is not there after reopen either.
            let mut tx = db.begin_write().unwrap();
            let tr = tx.open_tree("aborted").unwrap();
            tx.put(&tr, b"k", b"v").unwrap();
            drop(tx);
            want = dump(&db);
            assert!(
                unsynced.any(),
                "logged {logged}, session {session}: the last commit is already durable; \
                 the test means to close before a sync"
            );
            // A reader alive at close does not change the outcome.
            let rx = db.begin_read().unwrap();
            drop(db);
            drop(rx);
        }
        let db = open_logged(&t.path, Durability::None, logged).unwrap();
        assert!(dump(&db) == want, "logged {logged}");
        assert!(!db
            .begin_read()
            .unwrap()
            .list_trees()
            .contains(&"aborted".to_string()));
        db.check().unwrap();
    }
}

struct Torn {
    /// The file right after the last durable commit.
    old: Vec<u8>,
    /// The file right after the last commit.
    new: Vec<u8>,
    old_state: Contents,
    new_state: Contents,
    page_size: usize,
}

/// Builds a file image from `new` but with `old`'s bytes (zeros past its
/// end) for the pages where `use_old` says so; `meta_old` takes the meta
/// page the last commit wrote from `old` too.
fn mix(torn: &Torn, use_old: &dyn Fn(usize) -> bool, meta_old: bool) -> Vec<u8> {
    let ps = torn.page_size;
    let mut image = torn.new.clone();
    if image.len() < torn.old.len() {
        image.resize(torn.old.len(), 0);
    }
    for p in 0..image.len() / ps {
        let is_meta = p < 2;
        let take_old = if is_meta { meta_old } else { use_old(p) };
        if take_old {
            let range = p * ps..(p + 1) * ps;
            match torn.old.get(range.clone()) {
                Some(old) => image[range].copy_from_slice(old),
                None => image[range].fill(0),
            }
        }
    }
    image
}

fn differing_pages(torn: &Torn) -> Vec<usize> {
    let ps = torn.page_size;
    let pages = torn.new.len().max(torn.old.len()) / ps;
    (2..pages)
        .filter(|&p| {
            let r = p * ps..(p + 1) * ps;
            torn.old.get(r.clone()) != torn.new.get(r)
        })
        .collect()
}

/// Opens `image`: it must open, to exactly the old or the new state, and
/// pass `check()`. Returns whether it showed the new state.
fn open_torn(torn: &Torn, image: &[u8], what: &str) -> bool {
    let (_t, r) = open_image(&data_only(image.to_vec()));
    let db = r.unwrap_or_else(|e| panic!("{what}: a torn commit does not open: {e}"));
    let got = dump(&db);
    let is_new = got == torn.new_state;
    assert!(
        is_new || got == torn.old_state,
        "{what}: opened to a state that is neither the old nor the new commit"
    );
    db.check()
        .unwrap_or_else(|e| panic!("{what}: check after a torn commit: {e}"));
    // And it takes a commit.
    let mut tx = db.begin_write().unwrap();
    let tr = tx.open_tree("after-crash").unwrap();
    tx.put(&tr, b"k", b"v").unwrap();
    tx.commit().unwrap();
    db.check()
        .unwrap_or_else(|e| panic!("{what}: check after a commit on a torn file: {e}"));
    is_new
}

fn torn_mixes(torn: &Torn, seed: u64, label: &str) {
    let diff = differing_pages(torn);
    assert!(!diff.is_empty(), "{label}: the commit changed no page");
    let mut rng = Rng::new(seed);
    // All pages new: the new state.
    let image = mix(torn, &|_| false, false);
    assert!(
        open_torn(torn, &image, &format!("{label}: all pages new")),
        "{label}: the complete commit did not open to the new state"
    );
    // The new meta, none of the pages: the old state.
    let image = mix(torn, &|_| true, false);
    assert!(
        !open_torn(torn, &image, &format!("{label}: meta only")),
        "{label}: a meta without its pages opened to the new state"
    );
    // The pages without the meta: the old state.
    let image = mix(torn, &|_| false, true);
    assert!(
        !open_torn(torn, &image, &format!("{label}: pages without meta")),
        "{label}: pages without their meta opened to the new state"
    );
    // Exactly one page old (each of them, or a sample).
    let mut singles = diff.clone();
    while singles.len() > 24 {
        let i = rng.below(singles.len() as u64) as usize;
        singles.swap_remove(i);
    }
    let mut new_count = 0;
    for &p in &singles {
        let image = mix(torn, &|q| q == p, false);
        if open_torn(torn, &image, &format!("{label}: page {p} old")) {
            new_count += 1;
        }
    }
    // Random mixes, half and half and mostly new.
    for m in 0..16 {
        let pct = if m % 2 == 0 { 50 } else { 90 };
        let new_pages: Vec<usize> = diff.iter().copied().filter(|_| rng.chance(pct)).collect();
        let old_is = |p: usize| !new_pages.contains(&p);
        let meta_old = rng.chance(10);
        let image = mix(torn, &old_is, meta_old);
        open_torn(torn, &image, &format!("{label}: mix {m} ({pct}% new)"));
    }
    // The file's growth lost: the new meta in a file of the old length
    // (old or new state, depending on whether the commit needed the growth).
    if torn.new.len() > torn.old.len() {
        let image = mix(torn, &|_| false, false);
        open_torn(
            torn,
            &image[..torn.old.len()],
            &format!("{label}: growth lost"),
        );
    }
    eprintln!(
        "{label}: {} pages differ; {new_count} of {} single-old-page mixes opened to the new state",
        diff.len(),
        singles.len()
    );
}

/// The last commit torn on top of an `Immediate` commit.
#[test]
fn torn_commit_after_durable_commit() {
    torn_after_durable(None);
}

fn torn_after_durable(broken: Option<BrokenProtocol>) {
    for (seed, size) in [(10u64, 5usize), (11, 60), (12, 400)] {
        let t = temp_db("torn.ib");
        let db = open_broken(&t.path, Durability::Immediate, broken).unwrap();
        let mut rng = Rng::new(seed);
        for _ in 0..15 {
            random_txn(&db, &mut rng, None, 80);
        }
        let old = std::fs::read(&t.path).unwrap();
        let old_state = dump(&db);
        random_txn(&db, &mut rng, None, size);
        let new = std::fs::read(&t.path).unwrap();
        let torn = Torn {
            old,
            new,
            old_state,
            new_state: dump(&db),
            page_size: db.page_size(),
        };
        assert!(torn.old_state != torn.new_state);
        drop(db);
        torn_mixes(&torn, seed, &format!("durable base, {size} ops"));
    }
}

/// `Durability::None` commits after a durable one, then the last commit:
/// any mix of the pages written since the durable commit opens to the
/// durable state or to the last commit.
#[test]
fn torn_commits_after_none_commits() {
    torn_after_none(None);
}

fn torn_after_none(broken: Option<BrokenProtocol>) {
    for (seed, last) in [(20u64, Durability::None), (21, Durability::Immediate)] {
        let t = temp_db("torn-none.ib");
        let db = open_broken(&t.path, Durability::None, broken).unwrap();
        let mut rng = Rng::new(seed);
        for _ in 0..10 {
            random_txn(&db, &mut rng, None, 80);
        }
        db.sync().unwrap();
        let durable_txn = db.stats().unwrap().last_txn_id;
        let old = std::fs::read(&t.path).unwrap();
        let old_state = dump(&db);
        for _ in 0..4 {
            random_txn(&db, &mut rng, Some(Durability::None), 20);
        }
        let before_last = db.stats().unwrap();
        assert_eq!(
            before_last.durable_txn_id, durable_txn,
            "the engine synced on its own; the test's premise does not hold"
        );
        random_txn(&db, &mut rng, Some(last), 30);
        let new = std::fs::read(&t.path).unwrap();
        let torn = Torn {
            old,
            new,
            old_state,
            new_state: dump(&db),
            page_size: db.page_size(),
        };
        drop(db);
        torn_mixes(&torn, seed, &format!("after None commits, last {last:?}"));
    }
}

/// The torn-commit tests have teeth: with the commit protocol broken on
/// purpose (freed pages reused before the commit that freed them is
/// durable, as LMDB does under `MDB_NOSYNC`; or one meta slot written over
/// the durable one), they fail.
#[test]
fn torn_commit_tests_catch_broken_protocols() {
    for broken in [
        BrokenProtocol::ReuseBeforeDurable,
        BrokenProtocol::OneMetaSlot,
    ] {
        let caught = std::panic::catch_unwind(|| {
            torn_after_durable(Some(broken));
            torn_after_none(Some(broken));
        })
        .is_err();
        assert!(caught, "the torn-commit tests pass with {broken:?}");
    }
}

/// Torn commits right after a reopen, at 1 KiB pages (deeper trees, more
/// pages per commit): after a clean close (both meta slots then hold the
/// same commit) and after a close with unsynced `Durability::None` commits
/// (open verifies and syncs the newest commit, whose free pages the next
/// commit may then reuse).
#[test]
fn torn_commit_after_reopen() {
    for (seed, clean) in [(30u64, true), (31, false)] {
        let t = temp_db("torn-reopen.ib");
        let options = Options {
            page_size: 1024,
            durability: if clean {
                Durability::Immediate
            } else {
                Durability::None
            },
            // The torn pages of a file commit, as above.
            logged_commits: false,
            ..Options::default()
        };
        let db = Database::open_with(&t.path, &options).unwrap();
        let mut rng = Rng::new(seed);
        for _ in 0..12 {
            random_txn(&db, &mut rng, None, 80);
        }
        if !clean {
            assert!(db.stats().unwrap().durable_txn_id < db.stats().unwrap().last_txn_id);
        }
        drop(db);
        let db = Database::open_with(&t.path, &options).unwrap();
        let old = std::fs::read(&t.path).unwrap();
        let old_state = dump(&db);
        random_txn(&db, &mut rng, Some(Durability::Immediate), 150);
        let new = std::fs::read(&t.path).unwrap();
        let torn = Torn {
            old,
            new,
            old_state,
            new_state: dump(&db),
            page_size: 1024,
        };
        drop(db);
        let label = if clean {
            "after a clean reopen"
        } else {
            "after reopening unsynced commits"
        };
        torn_mixes(&torn, seed, label);
    }
}

/// `Durability::None`: "a process crash loses nothing". What the page cache
/// holds after each commit (a copy of the file, taken with no sync and no
/// close) opens to that commit exactly.
#[test]
fn copy_after_none_commit_has_everything() {
    for logged in [true, false] {
        let t = temp_db("nonecopy.ib");
        let db = open_logged(&t.path, Durability::None, logged).unwrap();
        let mut rng = Rng::new(40);
        for c in 0..15 {
            random_txn(&db, &mut rng, None, 30 + c * 10);
            if c == 7 {
                db.sync().unwrap();
            }
            let want = dump(&db);
            let image = Images::read(&t.path);
            let (_copy, r) = open_image(&image);
            let copy = r.unwrap_or_else(|e| {
                panic!("logged {logged}, commit {c}: the copy does not open: {e}")
            });
            assert!(
                dump(&copy) == want,
                "logged {logged}, commit {c}: the copy lost commits"
            );
            copy.check().unwrap();
        }
    }
}

/// A small transaction (a few puts of short values, a delete), which a
/// database with logged commits logs rather than checkpoints.
fn small_txn(db: &Database, rng: &mut Rng) {
    let mut tx = db.begin_write().unwrap();
    let t = tx.open_tree("alpha").unwrap();
    for _ in 0..1 + rng.below(4) {
        let k = format!("key{:05}", rng.below(3000)).into_bytes();
        let len = rng.below(200) as usize;
        tx.put(&t, &k, &rng.bytes(len)).unwrap();
    }
    let k = format!("key{:05}", rng.below(3000)).into_bytes();
    tx.delete(&t, &k).unwrap();
    tx.commit().unwrap();
}

/// Opens `image`: it must open to one of `states` and pass `check()`, and
/// take a commit. Returns which state it showed.
fn open_torn_log(image: &Images, states: &[Contents], what: &str) -> usize {
    let (_t, r) = open_image(image);
    let db = r.unwrap_or_else(|e| panic!("{what}: torn log records do not open: {e}"));
    let got = dump(&db);
    let Some(i) = states.iter().position(|s| *s == got) else {
        panic!("{what}: opened to a state that is none of the commits since the checkpoint")
    };
    db.check()
        .unwrap_or_else(|e| panic!("{what}: check after torn log records: {e}"));
    let mut tx = db.begin_write().unwrap();
    let tr = tx.open_tree("after-crash").unwrap();
    tx.put(&tr, b"k", b"v").unwrap();
    tx.commit().unwrap();
    db.check()
        .unwrap_or_else(|e| panic!("{what}: check after a commit on torn log records: {e}"));
    i
}

/// The torn-commit tests for logged commits: after a durable checkpoint,
/// logged commits write only the log. A crash may leave any prefix of the
/// records written since (torn anywhere), or any mix of the sectors
/// written since the last sync (all of them under `None`, the last
/// record's under `Immediate`); each such image opens to one of the
/// commits since the checkpoint (a longer prefix never to an older one),
/// and the whole records to the last.
#[test]
fn torn_log_records_after_a_checkpoint() {
    const SECTOR: usize = 512;
    for (seed, durability) in [(50u64, Durability::Immediate), (51, Durability::None)] {
        let label = format!("logged {durability:?}");
        let t = temp_db("torn-log.ib");
        let db = open_logged(&t.path, durability, true).unwrap();
        let mut rng = Rng::new(seed);
        for _ in 0..10 {
            random_txn(&db, &mut rng, None, 80);
        }
        db.checkpoint().unwrap();
        let old = Images::read(&t.path);
        let mut states = vec![dump(&db)];
        for _ in 0..6 {
            small_txn(&db, &mut rng);
            states.push(dump(&db));
        }
        let new = Images::read(&t.path);
        assert!(
            new.data == old.data,
            "{label}: a commit after the checkpoint wrote the data file; the test means logged commits"
        );
        drop(db);
        let last = states.len() - 1;
        // The log as the checkpoint left it, as long as the new one.
        let mut base = old.log.clone();
        base.resize(base.len().max(new.log.len()), 0);
        let first = (0..new.log.len())
            .find(|&i| base[i] != new.log[i])
            .expect("the commits wrote no log record");
        let end = (0..new.log.len())
            .rev()
            .find(|&i| base[i] != new.log[i])
            .unwrap()
            + 1;
        let with_log = |log: Vec<u8>| Images {
            data: new.data.clone(),
            log,
        };
        assert_eq!(
            open_torn_log(&with_log(new.log.clone()), &states, &label),
            last,
            "{label}: the whole records did not open to the last commit"
        );
        assert_eq!(
            open_torn_log(&with_log(base.clone()), &states, &label),
            0,
            "{label}: the log without the records did not open to the checkpoint"
        );
        // Prefixes torn at every 8 bytes (records are 8-byte aligned), or a
        // sample of 48, and the whole of them last.
        let mut cuts: Vec<usize> = (first..end).step_by(8).collect();
        while cuts.len() > 48 {
            let i = rng.below(cuts.len() as u64) as usize;
            cuts.remove(i);
        }
        cuts.push(end);
        let mut previous = 0;
        let mut seen = std::collections::BTreeSet::new();
        for &cut in &cuts {
            let mut log = base.clone();
            log[..cut].copy_from_slice(&new.log[..cut]);
            let i = open_torn_log(&with_log(log), &states, &format!("{label}: cut at {cut}"));
            assert!(
                i >= previous,
                "{label}: the log cut at {cut} opened to commit {i}, an older one than a shorter cut"
            );
            previous = i;
            seen.insert(i);
        }
        assert_eq!(previous, last, "{label}: the longest cut is the whole log");
        eprintln!(
            "{label}: {} log bytes written; {} cuts opened to commits {seen:?} of 0..={last}",
            end - first,
            cuts.len()
        );
        assert!(
            seen.len() > 2,
            "{label}: no cut ended between two records ({seen:?}); the test means to see earlier commits"
        );
        // Any mix of the sectors written since the last sync, old and new:
        // under `None` all of them, over the log as the checkpoint left it;
        // under `Immediate` those of the last record, over the log with
        // every record before it, which were synced before it was written
        // (a mix that takes back a durable record is damage, which an open
        // reports: tests/corruption.rs).
        let (synced, mix_from) = match durability {
            Durability::None => (base.clone(), first),
            Durability::Immediate => {
                let last_start = *common::chain_starts(&new.log).last().expect("records");
                let mut synced = base.clone();
                synced[..last_start].copy_from_slice(&new.log[..last_start]);
                (synced, last_start)
            }
        };
        for m in 0..16 {
            let pct = if m % 2 == 0 { 50 } else { 90 };
            let mut log = synced.clone();
            for s in mix_from / SECTOR..end.div_ceil(SECTOR) {
                if rng.chance(pct) {
                    let r = s * SECTOR..((s + 1) * SECTOR).min(log.len());
                    log[r.clone()].copy_from_slice(&new.log[r]);
                }
            }
            open_torn_log(
                &with_log(log),
                &states,
                &format!("{label}: mix {m} ({pct}% new)"),
            );
        }
    }
}
