//! Checkpoints written in steps: when the pages of the logged commits do
//! not fit in the file's free pages, a checkpoint writes a share of them at
//! a time, each share a durable commit that frees the pages the next one
//! reuses. What is checked: the file grows by a share of itself instead of
//! a second copy of the changed pages; the steps happened (counted); every
//! commit reads back before and after reopening; `check` passes, so the
//! trees' counters (entries, pages by kind) are exact after splicing;
//! splits, merges, deletes and large values (overflow pages) on the way;
//! a reader's snapshot taken before the steps stays whole, and so does
//! every reader begun during them, also when the arena has no room for a
//! step's layout; a step or a re-layout whose write fails loses nothing
//! and is taken up again.

mod common;

use std::collections::BTreeMap;

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use common::{temp_db, Rng};
use ironbark::{Database, Durability, IoHook, IoHookHandle, Options, ReadTxn, Tree};

fn options() -> Options {
    Options {
        durability: Durability::None,
        logged_commits: true,
        ..Options::default()
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("key{i:013}").into_bytes()
}

fn read_all(db: &Database) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let rx = db.begin_read().unwrap();
    contents(&rx, &rx.tree("t").unwrap())
}

/// Every record of `model` reads back and `check` passes (exact
/// counters), before and after a reopen.
fn reads_back_before_and_after_reopen(
    db: Database,
    path: &std::path::Path,
    model: &BTreeMap<Vec<u8>, Vec<u8>>,
) {
    assert!(read_all(&db) == *model);
    db.check().unwrap();
    drop(db);
    let db = Database::open_with(path, &options()).unwrap();
    assert!(read_all(&db) == *model, "reopened");
    db.check().unwrap();
}

/// Checkpoints `db`, checking that a reader from before keeps its
/// snapshot through it, that every record of `model` reads back after it,
/// and that `check` counts them (`what` names the round in failures).
/// Returns the stats after.
fn checkpoint_checked(
    db: &Database,
    model: &BTreeMap<Vec<u8>, Vec<u8>>,
    what: &str,
) -> ironbark::Stats {
    let rx = db.begin_read().unwrap();
    let tree = rx.tree("t").unwrap();
    let seen = contents(&rx, &tree);
    db.checkpoint().unwrap();
    assert!(
        contents(&rx, &tree) == seen,
        "{what}: a reader's snapshot changed"
    );
    drop(rx);
    assert!(read_all(db) == *model, "{what}");
    let report = db.check().unwrap();
    assert_eq!(report.entries, model.len() as u64, "{what}");
    db.stats().unwrap()
}

/// Every entry of `tree` as `rx` sees it.
fn contents(rx: &ReadTxn, tree: &Tree) -> BTreeMap<Vec<u8>, Vec<u8>> {
    rx.range(tree, ..)
        .unwrap()
        .map(|e| {
            let (k, v) = e.unwrap();
            (k.to_vec(), v.to_vec())
        })
        .collect()
}

/// Loads `n` records in batches (file commits), checkpoints, and returns
/// the model and the page count.
fn load(db: &Database, n: u64) -> (BTreeMap<Vec<u8>, Vec<u8>>, u64) {
    let mut model = BTreeMap::new();
    for start in (0..n).step_by(1000) {
        let mut tx = db.begin_write().unwrap();
        let tree = tx.open_tree("t").unwrap();
        for i in start..(start + 1000).min(n) {
            let v = vec![b'a' + (i % 26) as u8; 100];
            tx.put(&tree, &key(i), &v).unwrap();
            model.insert(key(i), v);
        }
        tx.commit().unwrap();
    }
    db.checkpoint().unwrap();
    let pages = db.stats().unwrap().page_count;
    (model, pages)
}

/// Single-put commits: with `shape_changes`, also inserts and deletes
/// (splits and merges) and values past a page (overflow runs).
fn churn(
    db: &Database,
    model: &mut BTreeMap<Vec<u8>, Vec<u8>>,
    n: u64,
    commits: u32,
    shape_changes: bool,
    rng: &mut Rng,
) {
    for c in 0..commits {
        let mut tx = db.begin_write().unwrap();
        let tree = tx.open_tree("t").unwrap();
        let k = key(rng.below(n));
        let roll = rng.below(100);
        if shape_changes && roll < 15 {
            tx.delete(&tree, &k).unwrap();
            model.remove(&k);
        } else {
            let (k, len) = if shape_changes && roll < 30 {
                (key(n + rng.below(n)), 100)
            } else if shape_changes && roll < 33 {
                (k, 9000)
            } else {
                (k, 100)
            };
            let v = vec![(c % 251) as u8; len];
            tx.put(&tree, &k, &v).unwrap();
            model.insert(k, v);
        }
        tx.commit().unwrap();
    }
}

#[test]
fn a_checkpoint_of_overwrites_to_every_leaf_grows_the_file_by_a_share_of_it() {
    let t = temp_db("steps.ib");
    let db = Database::open_with(&t.path, &options()).unwrap();
    let n = 30_000;
    let (mut model, loaded_pages) = load(&db, n);
    let mut rng = Rng::new(5);
    // (`stats` checkpoints first: taken before the logged commits.)
    let before = db.stats().unwrap().counters;
    // ~860 leaves; 6,000 random overwrites leave hardly one unchanged.
    churn(&db, &mut model, n, 6_000, false, &mut rng);
    db.checkpoint().unwrap();
    let stats = db.stats().unwrap();
    let steps = stats.counters.checkpoint_steps - before.checkpoint_steps;
    eprintln!(
        "{steps} steps: {loaded_pages} -> {} pages",
        stats.page_count
    );
    assert!(steps >= 4, "the checkpoint went in {steps} steps");
    // The steps folded the overlaid leaves themselves, nearly every leaf
    // (none copied into memory before them).
    let folded = stats.counters.checkpoint_leaves_folded - before.checkpoint_leaves_folded;
    let leaves = stats.trees[0].leaf_pages;
    assert!(
        folded * 4 >= leaves * 3 && folded <= leaves,
        "{folded} leaves folded by the steps, of {leaves}"
    );
    assert!(
        stats.page_count * 100 <= loaded_pages * 112,
        "the file grew from {loaded_pages} to {} pages in {steps} steps",
        stats.page_count
    );
    reads_back_before_and_after_reopen(db, &t.path, &model);
}

/// A stream of readers beside a checkpoint's steps: at each sync of the
/// data file (one per step), the reader held so far ends and one of the
/// newest commit begins, as a reader thread's would.
#[derive(Default)]
struct RollingReader {
    db: Mutex<Option<Database>>,
    reader: Mutex<Option<ReadTxn>>,
    rolled: AtomicU64,
}

impl IoHook for RollingReader {
    fn on_sync(&self) -> io::Result<()> {
        let db = self.db.lock().unwrap();
        if let Some(db) = db.as_ref() {
            let next = db.begin_read().map_err(io::Error::other)?;
            *self.reader.lock().unwrap() = Some(next);
            self.rolled.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    }
}

/// Readers that begin while the steps run read the newest commit, whose
/// trees no longer hold the file pages the steps free: the steps reuse
/// those pages as they go, and the file grows as little as with no reader.
/// (Until session 35 every reader of the newest commit held them until
/// the last step, and the file grew by the whole checkpoint: beside
/// `readwhilewriting`'s reader it reached 1.7-1.9x LMDB's.)
#[test]
fn readers_that_come_and_go_during_the_steps_do_not_make_the_file_grow() {
    // Overwrites only: value overlays on the file's leaves, which the
    // checkpoint first lays out again in memory (a commit of no entries of
    // its own), then writes in steps. Then inserts, deletes and large
    // values too: leaves copied to memory by the logged commits
    // themselves, and a file that grows with its data.
    for shape_changes in [false, true] {
        let quiet = checkpoint_beside_readers(shape_changes, false);
        let rolling = checkpoint_beside_readers(shape_changes, true);
        eprintln!("shape changes {shape_changes}: {quiet} pages alone, {rolling} beside readers");
        assert!(
            rolling * 100 <= quiet * 105,
            "shape changes {shape_changes}: the file reached {rolling} pages beside readers, {quiet} alone"
        );
    }
}

/// Loads 30,000 records, churns them with 6,000 logged single-put commits
/// and checkpoints them in steps, with a reader rolled at every step if
/// `rolling`; checks that every reader read its commit whole and that the
/// checkpoint went in steps, and returns the file's page count.
fn checkpoint_beside_readers(shape_changes: bool, rolling: bool) -> u64 {
    let t = temp_db("rolling.ib");
    let hook = Arc::new(RollingReader::default());
    let with_hook = Options {
        io_hook: Some(IoHookHandle(hook.clone())),
        ..options()
    };
    let db = Database::open_with(&t.path, &with_hook).unwrap();
    let n = 30_000;
    let (mut model, _) = load(&db, n);
    let before = db.stats().unwrap().counters;
    churn(&db, &mut model, n, 6_000, shape_changes, &mut Rng::new(5));
    let rx = db.begin_read().unwrap();
    let tree = rx.tree("t").unwrap();
    let seen = contents(&rx, &tree);
    if rolling {
        *hook.db.lock().unwrap() = Some(db.clone());
        // The reader from before the checkpoint ends at its first step.
        *hook.reader.lock().unwrap() = Some(rx);
    } else {
        drop(rx);
    }
    db.checkpoint().unwrap();
    let last = hook.reader.lock().unwrap().take();
    *hook.db.lock().unwrap() = None;
    let rolled = hook.rolled.load(Ordering::SeqCst);
    let stats = db.stats().unwrap();
    let steps = stats.counters.checkpoint_steps - before.checkpoint_steps;
    assert!(steps >= 4, "the checkpoint went in {steps} steps");
    assert!(
        seen == model,
        "the reader from before saw the newest commit"
    );
    if rolling {
        assert!(rolled >= steps, "{rolled} readers for {steps} steps");
        // The last reader, begun during the steps, reads the newest commit.
        let last = last.expect("a reader began during the steps");
        assert!(contents(&last, &last.tree("t").unwrap()) == model);
    }
    reads_back_before_and_after_reopen(db, &t.path, &model);
    stats.page_count
}

#[test]
fn steps_keep_counters_exact_through_splits_merges_and_overflow_runs() {
    for seed in 1..=4 {
        let t = temp_db("shapes.ib");
        let db = Database::open_with(&t.path, &options()).unwrap();
        let n = 20_000;
        let (mut model, _) = load(&db, n);
        let mut rng = Rng::new(seed);
        for round in 0..3 {
            let before = db.stats().unwrap().counters;
            churn(&db, &mut model, n, 3_000, true, &mut rng);
            let stats = checkpoint_checked(&db, &model, &format!("seed {seed} round {round}"));
            eprintln!(
                "seed {seed} round {round}: {} steps",
                stats.counters.checkpoint_steps - before.checkpoint_steps
            );
        }
        drop(db);
        let db = Database::open_with(&t.path, &options()).unwrap();
        assert!(read_all(&db) == model, "seed {seed}: reopened");
        db.check().unwrap();
    }
}

/// Fails the data file's writes once `countdown` is set to `n`: the
/// `n`-th write from then on fails, and every one after it until it is
/// reset to 0 (a full disk).
#[derive(Default)]
struct FailWrites {
    countdown: AtomicU64,
}

impl IoHook for FailWrites {
    fn on_write(&self, _offset: u64, _bufs: &[&[u8]]) -> io::Result<()> {
        match self.countdown.load(Ordering::SeqCst) {
            0 => Ok(()),
            1 => Err(io::Error::from_raw_os_error(libc::ENOSPC)),
            n => {
                self.countdown.store(n - 1, Ordering::SeqCst);
                Ok(())
            }
        }
    }
}

#[test]
fn a_step_that_fails_is_taken_up_again_and_loses_nothing() {
    for fail_at in [1, 2, 5, 9] {
        let t = temp_db("fail.ib");
        let hook = Arc::new(FailWrites::default());
        let faulty = Options {
            io_hook: Some(IoHookHandle(hook.clone())),
            ..options()
        };
        let db = Database::open_with(&t.path, &faulty).unwrap();
        let n = 20_000;
        let (mut model, _) = load(&db, n);
        let before = db.stats().unwrap().counters;
        churn(&db, &mut model, n, 4_000, false, &mut Rng::new(fail_at));
        hook.countdown.store(fail_at, Ordering::SeqCst);
        let failed = db.checkpoint();
        assert!(
            failed.is_err(),
            "write {fail_at} of the checkpoint failed, and it succeeded"
        );
        let done = db.stats();
        // Still failing: the steps cannot go on, and nothing is lost.
        assert!(done.is_err(), "fail at {fail_at}: {done:?}");
        assert!(
            read_all(&db) == model,
            "fail at {fail_at}: a failed step lost commits"
        );
        hook.countdown.store(0, Ordering::SeqCst);
        // The next write transaction finishes the steps first.
        let mut tx = db.begin_write().unwrap();
        let tree = tx.open_tree("t").unwrap();
        tx.put(&tree, b"after", b"the steps").unwrap();
        tx.commit().unwrap();
        model.insert(b"after".to_vec(), b"the steps".to_vec());
        let after = db.stats().unwrap().counters;
        assert!(
            after.checkpoint_steps > before.checkpoint_steps,
            "fail at {fail_at}: no step was written"
        );
        assert!(read_all(&db) == model, "fail at {fail_at}");
        db.check().unwrap();
        drop(db);
        let db = Database::open_with(&t.path, &options()).unwrap();
        assert!(read_all(&db) == model, "fail at {fail_at}: reopened");
        db.check().unwrap();
    }
}

/// Checkpoints that the log's bound brings run before the write
/// transaction that finds the log near it, so they go in steps too: under
/// a stream of single-put overwrites with a small log bound, the file
/// stays near its loaded size instead of doubling at each checkpoint.
#[test]
fn checkpoints_the_log_bound_brings_go_in_steps_and_keep_the_file_small() {
    let t = temp_db("bound.ib");
    let bounded = Options {
        checkpoint_log_bytes: Some(512 << 10),
        ..options()
    };
    let db = Database::open_with(&t.path, &bounded).unwrap();
    let n = 30_000;
    let (mut model, loaded_pages) = load(&db, n);
    let before = db.stats().unwrap().counters;
    let mut rng = Rng::new(9);
    let mut largest = 0;
    for _ in 0..8 {
        // ~2,500 records of ~140 bytes: 350 KiB of log, most of the
        // bound; eight rounds cross it several times.
        churn(&db, &mut model, n, 2_500, false, &mut rng);
        // The pages the file's commit uses: its length runs ahead of them
        // in chunks of at least 1 MiB (allocated: `fallocate`).
        let stats = db.stats().unwrap();
        largest = largest.max(stats.page_count * stats.page_size as u64);
    }
    let after = db.stats().unwrap().counters;
    let checkpoints =
        after.commits - after.logged_commits - (before.commits - before.logged_commits);
    let steps = after.checkpoint_steps - before.checkpoint_steps;
    let page_size = db.stats().unwrap().page_size as u64;
    eprintln!(
        "{checkpoints} checkpoints in {steps} steps; the file reached {largest} bytes from {}",
        loaded_pages * page_size
    );
    assert!(checkpoints >= 4, "{checkpoints} checkpoints");
    assert!(
        steps >= 4 * 3,
        "{steps} steps over {checkpoints} checkpoints"
    );
    assert!(
        largest <= loaded_pages * page_size * 125 / 100,
        "the file reached {largest} bytes from {} loaded",
        loaded_pages * page_size
    );
    assert!(read_all(&db) == model);
    db.check().unwrap();
}

/// A random fill in two parts: records `0..total / share` (of the
/// permutation `i * 7919 + 13` of `0..total`, as the benchmark's, with
/// keys `key_of` and values of `value_len`) loaded and checkpointed, the
/// rest put by logged commits of `batch`, then a checkpoint in steps of 64
/// pages. Asserts that the commits were logged, that the checkpoint went
/// in steps that spliced runs of the grown tree (and across its root
/// split, if it had one) and left at most 8% of the file free, and that
/// every record reads back, before and after a reopen, with exact
/// counters. Returns
/// the tree's depth before and after.
fn grow_in_steps(
    name: &str,
    total: u64,
    share: u64,
    batch: u64,
    key_of: impl Fn(u64) -> Vec<u8>,
    value_len: usize,
) -> (u32, u32) {
    let t = temp_db(name);
    let stepped = Options {
        checkpoint_step_pages: Some(64),
        ..options()
    };
    let db = Database::open_with(&t.path, &stepped).unwrap();
    let nth = |i: u64| key_of((i * 7919 + 13) % total);
    let mut model = BTreeMap::new();
    let mut put_batch = |db: &Database, range: std::ops::Range<u64>| {
        let mut tx = db.begin_write().unwrap();
        let tree = tx.open_tree("t").unwrap();
        for i in range {
            let v = vec![b'a' + (i % 26) as u8; value_len];
            tx.put(&tree, &nth(i), &v).unwrap();
            model.insert(nth(i), v);
        }
        tx.commit().unwrap();
    };
    put_batch(&db, 0..total / share);
    db.checkpoint().unwrap();
    let before = db.stats().unwrap();
    for start in (total / share..total).step_by(batch as usize) {
        put_batch(&db, start..(start + batch).min(total));
    }
    let commits = (total - total / share).div_ceil(batch);
    let logged = db.counters().logged_commits - before.counters.logged_commits;
    db.checkpoint().unwrap();
    let stats = db.stats().unwrap();
    let steps = stats.counters.checkpoint_steps - before.counters.checkpoint_steps;
    let runs = stats.counters.checkpoint_runs_spliced - before.counters.checkpoint_runs_spliced;
    let grown = stats.counters.checkpoint_roots_grown - before.counters.checkpoint_roots_grown;
    let (from, to) = (before.trees[0].depth, stats.trees[0].depth);
    eprintln!(
        "{logged} of {commits} commits logged, {steps} steps ({runs} runs spliced, \
         {grown} grown roots), depth {from} -> {to}: \
         {} pages ({} free) -> {} pages ({} free)",
        before.page_count, before.free_pages, stats.page_count, stats.free_pages
    );
    assert!(runs > 0, "no step spliced a run of the grown tree");
    // A root that split once since the checkpoint is spliced across; one
    // that did not split never is.
    if to == from + 1 && from >= 2 {
        assert!(grown > 0, "the root split and no step spliced across it");
    }
    if to == from {
        assert_eq!(grown, 0, "no root split, yet a step spliced across one");
    }
    assert!(
        logged * 10 >= commits * 8,
        "{logged} of {commits} commits logged"
    );
    assert!(steps >= 4, "the checkpoints went in {steps} steps");
    assert!(
        stats.free_pages * 100 <= stats.page_count * 8,
        "{} of {} pages free after the checkpoint",
        stats.free_pages,
        stats.page_count
    );
    reads_back_before_and_after_reopen(db, &t.path, &model);
    (from, to)
}

/// A tree that grew several times over since its last checkpoint (random
/// inserts split every branch, so no branch keeps its separators) still
/// goes in steps: each branch of the checkpoint keeps its separators in
/// the grown tree, so a step replaces a child of it by the run of the
/// grown tree's children that covers the same keys. Before, such a
/// checkpoint went in one step and left the old tree's pages free: a
/// fifth to a third of the file.
#[test]
fn a_tree_that_grew_threefold_since_its_checkpoint_goes_in_steps() {
    grow_in_steps("grown.ib", 40_000, 4, 100, key, 100);
}

/// A tree whose root split since its last checkpoint (it gained a level)
/// still goes in steps: the first step's tree takes the new root's height,
/// with a new branch under it per child of the new root, holding the old
/// root's children (and runs of the grown tree's where an old child's
/// range spans two new branches). Long keys make branches small, so that
/// a few thousand records reach four levels.
#[test]
fn a_tree_whose_root_split_since_its_checkpoint_goes_in_steps() {
    let long_key = |i: u64| format!("{i:0>400}").into_bytes();
    let (from, to) = grow_in_steps("root_split.ib", 24_000, 8, 50, long_key, 20);
    assert!(to > from, "the tree stayed at depth {from}");
}

/// Trees that grow, shrink and grow again between checkpoints, with long
/// keys (small branches, so four or five levels, and runs spliced several
/// levels deep), in steps of a few pages: each checkpoint reads back, its
/// counters are exact (`check`), a reader from before it keeps its
/// snapshot, and so does a reopen.
#[test]
fn steps_through_growth_and_shrinking_at_every_level_keep_every_key() {
    for seed in 1..=3 {
        let t = temp_db("phases.ib");
        let stepped = Options {
            checkpoint_step_pages: Some(16),
            ..options()
        };
        let db = Database::open_with(&t.path, &stepped).unwrap();
        let mut rng = Rng::new(100 + seed);
        let mut model = BTreeMap::new();
        let key = |k: u64| format!("{k:0>300}").into_bytes();
        let mut steps = 0;
        // Grow from empty, shrink by half, grow past the start, shrink
        // again: every phase changes the shape of every level.
        for (round, (inserts, deletes)) in [(3_000, 0), (0, 1_500), (4_000, 500), (500, 3_000)]
            .into_iter()
            .enumerate()
        {
            let before = db.stats().unwrap().counters;
            let mut left = (inserts, deletes);
            while left != (0, 0) {
                let mut tx = db.begin_write().unwrap();
                let tree = tx.open_tree("t").unwrap();
                for _ in 0..20 {
                    if left.0 > 0 && (left.1 == 0 || rng.chance(50)) {
                        let k = key(rng.below(1_000_000));
                        let len = 10 + rng.below(40) as usize;
                        let v = rng.bytes(len);
                        tx.put(&tree, &k, &v).unwrap();
                        model.insert(k, v);
                        left.0 -= 1;
                    } else if left.1 > 0 {
                        left.1 -= 1;
                        let Some(k) = model
                            .keys()
                            .nth(rng.below(model.len() as u64) as usize)
                            .cloned()
                        else {
                            continue;
                        };
                        tx.delete(&tree, &k).unwrap();
                        model.remove(&k);
                    }
                }
                tx.commit().unwrap();
            }
            let stats = checkpoint_checked(&db, &model, &format!("seed {seed} round {round}"));
            steps += stats.counters.checkpoint_steps - before.checkpoint_steps;
            eprintln!(
                "seed {seed} round {round}: {} entries, depth {}, {steps} steps so far, {} of {} pages free",
                model.len(),
                stats.trees[0].depth,
                stats.free_pages,
                stats.page_count
            );
        }
        assert!(steps >= 8, "seed {seed}: {steps} steps");
        drop(db);
        let db = Database::open_with(&t.path, &options()).unwrap();
        assert!(read_all(&db) == model, "seed {seed}: reopened");
        db.check().unwrap();
    }
}

/// A step copies the branches of the last checkpoint it splices into; a
/// damaged one is an error, never copied under a fresh checksum (which
/// would launder the damage into a page that verifies).
#[test]
fn a_damaged_branch_of_the_last_checkpoint_fails_the_step_and_is_not_laundered() {
    let t = temp_db("damaged.ib");
    let db = Database::open_with(&t.path, &options()).unwrap();
    let n = 30_000;
    let (mut model, _) = load(&db, n);
    // (Before the logged commits: `stats` checkpoints them.)
    let page_size = db.stats().unwrap().page_size;
    churn(&db, &mut model, n, 6_000, false, &mut Rng::new(3));
    // Every branch page of the file (byte 16: the page kind, 1 or 4 for a
    // branch) gets its stored checksum damaged. The newest commit reads
    // none of them: every path changed, so its branches are in memory.
    let mut file = std::fs::read(&t.path).unwrap();
    let mut damaged = 0;
    for page in file.chunks_exact_mut(page_size).skip(2) {
        if page[16] == 1 || page[16] == 4 {
            page[0] ^= 0x40;
            damaged += 1;
        }
    }
    assert!(damaged >= 2, "{damaged} branch pages");
    std::fs::write(&t.path, &file).unwrap();
    assert!(
        read_all(&db) == model,
        "the newest commit read a damaged page"
    );
    match db.checkpoint() {
        Err(ironbark::Error::Corrupted { .. }) => {}
        other => panic!("a checkpoint over damaged branches gave {other:?}"),
    }
    assert!(read_all(&db) == model, "a failed step lost commits");
}

/// Fails the redo log's writes of an empty record (the record a
/// checkpoint's re-layout publishes under, before its steps) while
/// `armed`, as a full disk would; counts the attempts in `seen`.
#[derive(Default)]
struct FailEmptyLogRecord {
    armed: std::sync::atomic::AtomicBool,
    seen: AtomicU64,
}

impl IoHook for FailEmptyLogRecord {
    fn on_log_write(&self, _offset: u64, bufs: &[&[u8]]) -> io::Result<()> {
        if bufs.len() >= 2 && bufs[1].is_empty() {
            self.seen.fetch_add(1, Ordering::SeqCst);
            if self.armed.load(Ordering::SeqCst) {
                return Err(io::Error::from_raw_os_error(libc::ENOSPC));
            }
        }
        Ok(())
    }
}

/// The re-layout before a checkpoint (every file leaf with a value
/// overlay copied to the arena) is a logged commit of its own; when its
/// log record cannot be written, the checkpoint fails, no commit is lost,
/// a reader from before keeps its snapshot, and the next checkpoint does
/// the re-layout and finishes.
#[test]
fn a_relayout_whose_log_record_fails_loses_nothing_and_is_taken_up_again() {
    for durability in [Durability::None, Durability::Immediate] {
        let t = temp_db("relayout.ib");
        let hook = Arc::new(FailEmptyLogRecord::default());
        let faulty = Options {
            durability,
            io_hook: Some(IoHookHandle(hook.clone())),
            ..options()
        };
        let db = Database::open_with(&t.path, &faulty).unwrap();
        let n = 20_000;
        let (mut model, _) = load(&db, n);
        // Same-size overwrites of file leaves: value overlays, which the
        // re-layout folds into arena copies.
        churn(&db, &mut model, n, 3_000, false, &mut Rng::new(7));
        let rx = db.begin_read().unwrap();
        let tree = rx.tree("t").unwrap();
        let seen = contents(&rx, &tree);
        let records_before = hook.seen.load(Ordering::SeqCst);
        hook.armed.store(true, Ordering::SeqCst);
        let failed = db.checkpoint();
        assert!(failed.is_err(), "{durability:?}: the checkpoint succeeded");
        let records_failed = hook.seen.load(Ordering::SeqCst);
        assert!(
            records_failed > records_before,
            "{durability:?}: the checkpoint wrote no re-layout record"
        );
        assert!(contents(&rx, &tree) == seen, "{durability:?}: the reader");
        assert!(read_all(&db) == model, "{durability:?}: commits lost");
        hook.armed.store(false, Ordering::SeqCst);
        let mut tx = db.begin_write().unwrap();
        let t2 = tx.open_tree("t").unwrap();
        tx.put(&t2, b"after", b"the failure").unwrap();
        tx.commit().unwrap();
        model.insert(b"after".to_vec(), b"the failure".to_vec());
        db.checkpoint().unwrap();
        assert!(
            hook.seen.load(Ordering::SeqCst) > records_failed,
            "{durability:?}: the next checkpoint did no re-layout"
        );
        assert!(contents(&rx, &tree) == seen, "{durability:?}: the reader");
        drop(rx);
        assert_eq!(db.check().unwrap().entries, model.len() as u64);
        reads_back_before_and_after_reopen(db, &t.path, &model);
    }
}

/// Readers begun at every sync of the data file, each held to the end.
#[derive(Default)]
struct HeldReaders {
    db: Mutex<Option<Database>>,
    readers: Mutex<Vec<ReadTxn>>,
}

impl IoHook for HeldReaders {
    fn on_sync(&self) -> io::Result<()> {
        let db = self.db.lock().unwrap();
        if let Some(db) = db.as_ref() {
            let reader = db.begin_read().map_err(io::Error::other)?;
            self.readers.lock().unwrap().push(reader);
        }
        Ok(())
    }
}

/// After each step but the last, the newest commit is published again,
/// laid out over the leaves the step folded, in new arena copies of the
/// branches above them; those copies take no slot retired during the
/// steps. When the arena has no room left for them, the layout is not
/// published: the published snapshot still reads leaves the steps folded
/// and freed. A reader that begins at a step's sync reads that snapshot,
/// and the steps after must not reuse those leaves under it. Every such
/// reader is held to the end and must read the whole newest commit; the
/// checkpoint completes and reads back. (Without the readers' protection
/// during the steps, these readers fail on reused pages.)
#[test]
fn layouts_the_arena_has_no_room_for_leave_their_readers_whole() {
    let t = temp_db("deferred.ib");
    let hook = Arc::new(HeldReaders::default());
    let small_arena = Options {
        io_hook: Some(IoHookHandle(hook.clone())),
        // An arena of a quarter of this, 2.5 MiB: room for the churn's
        // overlays and for the first layouts, not for every one.
        map_reservation: 10 << 20,
        checkpoint_step_pages: Some(32),
        ..options()
    };
    let db = Database::open_with(&t.path, &small_arena).unwrap();
    let n = 30_000;
    let (mut model, _) = load(&db, n);
    let before = db.counters();
    churn(&db, &mut model, n, 6_000, false, &mut Rng::new(5));
    *hook.db.lock().unwrap() = Some(db.clone());
    db.checkpoint().unwrap();
    *hook.db.lock().unwrap() = None;
    let readers = std::mem::take(&mut *hook.readers.lock().unwrap());
    let after = db.counters();
    let steps = after.checkpoint_steps - before.checkpoint_steps;
    let deferred = after.checkpoint_layouts_deferred - before.checkpoint_layouts_deferred;
    eprintln!(
        "{steps} steps, {deferred} layouts deferred, {} readers",
        readers.len()
    );
    assert!(
        deferred > 0 && deferred < steps,
        "{deferred} of the {steps} steps' layouts found no arena room: the arena's size no longer makes the case"
    );
    assert!(
        readers.len() as u64 > steps,
        "a reader at every step's sync"
    );
    for (i, rx) in readers.iter().enumerate() {
        assert!(
            contents(rx, &rx.tree("t").unwrap()) == model,
            "the reader begun at sync {i}"
        );
    }
    drop(readers);
    reads_back_before_and_after_reopen(db, &t.path, &model);
}
