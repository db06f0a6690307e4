//! Zero allocation on the read path: a counting global allocator (counting
//! per thread, so other test threads do not interfere) shows that
//! `ReadTxn::get` (hits, misses, overflow values) and every cursor step
//! (`next` and `next_back` of `range` and `iter`, including the first step,
//! which seeks) allocate nothing; nor do the steps of the verified
//! iterators of bulk readers (`iter_verified`).

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::hint::black_box;
use std::ops::{Bound, RangeBounds};

use common::{temp_db, Rng};
use ironbark::{Database, Durability, Options, ReadTxn, Tree};

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn bump() {
    // `try_with`: the allocator may run while thread-locals are torn down.
    let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
}

// SAFETY: every call is forwarded unchanged to the system allocator; the
// counter is a const-initialised thread-local `Cell`, which never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        bump();
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        bump();
        System.alloc_zeroed(layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        bump();
        System.realloc(ptr, layout, new_size)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made by this thread so far.
fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

/// Runs `f`, returning its result and the allocations it made.
fn counted<T>(f: impl FnOnce() -> T) -> (T, u64) {
    let before = allocations();
    let r = f();
    (r, allocations() - before)
}

struct Fixture {
    _t: common::TempDb,
    db: Database,
    tree: Tree,
    keys: Vec<Vec<u8>>,
    misses: Vec<Vec<u8>>,
    overflow_keys: Vec<Vec<u8>>,
}

fn fixture(page_size: usize) -> Fixture {
    let t = temp_db("alloc.ib");
    let db = Database::open_with(
        &t.path,
        &Options {
            page_size,
            durability: Durability::None,
            ..Options::default()
        },
    )
    .unwrap();
    let mut rng = Rng::new(page_size as u64);
    let mut tx = db.begin_write().unwrap();
    let tree = tx.open_tree("t").unwrap();
    let mut keys = Vec::new();
    let mut overflow_keys = Vec::new();
    for i in 0..20_000u32 {
        let mut k = format!("k{:08}", i * 2).into_bytes();
        let extra = rng.below(30) as usize;
        k.resize(k.len() + extra, b'~');
        let v = if i % 400 == 0 {
            overflow_keys.push(k.clone());
            let n = page_size * 2 + rng.below(100_000) as usize;
            rng.bytes(n)
        } else {
            let n = rng.below(150) as usize;
            rng.bytes(n)
        };
        tx.put(&tree, &k, &v).unwrap();
        keys.push(k);
    }
    // A few empty values and a long key.
    tx.put(&tree, b"", b"").unwrap();
    keys.push(Vec::new());
    let long = vec![b'z'; db.max_key_len()];
    tx.put(&tree, &long, b"long").unwrap();
    keys.push(long);
    tx.commit().unwrap();
    keys.sort();
    let misses = (0..2000u32)
        .map(|i| format!("k{:08}", i * 20 + 1).into_bytes())
        .chain([b"a".to_vec(), vec![0xFF; 40], b"k".to_vec()])
        .collect();
    let s = db.stats().unwrap();
    let ts = s.trees.iter().find(|t| t.name == "t").unwrap();
    assert!(ts.depth >= 3, "tree of depth {}: too shallow", ts.depth);
    assert!(ts.overflow_pages > 0);
    Fixture {
        _t: t,
        db,
        tree,
        keys,
        misses,
        overflow_keys,
    }
}

fn gets(rx: &ReadTxn, f: &Fixture) {
    for (what, keys, present) in [
        ("hits", &f.keys, true),
        ("misses", &f.misses, false),
        ("overflow hits", &f.overflow_keys, true),
    ] {
        // Warm up (first touches of the map fault pages in; the kernel
        // does that, not the heap).
        for k in keys {
            black_box(rx.get(&f.tree, k).unwrap());
        }
        let (found, n) = counted(|| {
            let mut found = 0;
            for k in keys {
                let v = rx.get(&f.tree, black_box(k)).unwrap();
                if let Some(v) = black_box(v) {
                    found += 1;
                    black_box(v.len());
                }
            }
            found
        });
        assert_eq!(found, if present { keys.len() } else { 0 }, "{what}");
        assert_eq!(n, 0, "{} gets ({what}) allocated {n} times", keys.len());
    }
}

/// Steps `it` with `next`/`next_back` chosen by `pattern`, counting the
/// allocations of each step alone. Returns the keys seen, in key order.
fn steps(mut it: ironbark::Range<'_>, rng: &mut Rng, pattern: u64) -> (Vec<Vec<u8>>, u64) {
    let mut front = Vec::new();
    let mut back = Vec::new();
    let mut allocs = 0;
    loop {
        let forward = match pattern {
            0 => true,
            1 => false,
            _ => rng.chance(50),
        };
        let (e, n) = if forward {
            counted(|| it.next().map(|e| e.unwrap()))
        } else {
            counted(|| it.next_back().map(|e| e.unwrap()))
        };
        allocs += n;
        let Some((k, v)) = e else { break };
        black_box(v);
        if forward {
            front.push(k.to_vec());
        } else {
            back.push(k.to_vec());
        }
    }
    back.reverse();
    front.extend(back);
    (front, allocs)
}

fn cursors(rx: &ReadTxn, f: &Fixture, rng: &mut Rng) {
    let all = f.keys.clone();
    for pattern in 0..3 {
        let (it, created) = counted(|| rx.iter(&f.tree).unwrap());
        if created > 0 {
            eprintln!("note: creating an iterator allocated {created} times");
        }
        let (seen, n) = steps(it, rng, pattern);
        assert!(seen == all, "pattern {pattern}: iteration is wrong");
        assert_eq!(
            n,
            0,
            "pattern {pattern}: {} iter steps allocated {n} times",
            seen.len() + 1
        );
    }
    // Ranges with every kind of bound, from existing and missing keys.
    for r in 0..60 {
        let pick = |rng: &mut Rng| -> Vec<u8> {
            if rng.chance(50) {
                f.keys[rng.below(f.keys.len() as u64) as usize].clone()
            } else {
                f.misses[rng.below(f.misses.len() as u64) as usize].clone()
            }
        };
        let (mut a, mut b) = (pick(rng), pick(rng));
        if a > b {
            std::mem::swap(&mut a, &mut b);
        }
        let lo = match rng.below(3) {
            0 => Bound::Included(a.as_slice()),
            1 => Bound::Excluded(a.as_slice()),
            _ => Bound::Unbounded,
        };
        let hi = match rng.below(3) {
            0 => Bound::Included(b.as_slice()),
            1 => Bound::Excluded(b.as_slice()),
            _ => Bound::Unbounded,
        };
        let want: Vec<Vec<u8>> = all
            .iter()
            .filter(|k| (lo, hi).contains(&k.as_slice()))
            .cloned()
            .collect();
        let (it, created) = counted(|| rx.range(&f.tree, (lo, hi)).unwrap());
        // Bounds of up to 64 bytes are kept inline: a seek allocates
        // nothing either.
        assert!(a.len() <= 64 && b.len() <= 64);
        assert_eq!(
            created, 0,
            "range {r}: creating it allocated {created} times"
        );
        let (seen, n) = steps(it, rng, r % 3);
        assert!(seen == want, "range {r}: wrong keys");
        assert_eq!(
            n,
            0,
            "range {r}: {} steps allocated {n} times",
            seen.len() + 1
        );
    }
}

#[test]
fn reads_allocate_nothing() {
    for page_size in [4096, 1024] {
        let f = fixture(page_size);
        let (rx, n) = counted(|| f.db.begin_read().unwrap());
        eprintln!("page size {page_size}: begin_read allocated {n} times");
        // Once this thread's stripe caches the newest snapshot (at the
        // second transaction that takes it), beginning and ending a read
        // transaction allocates nothing.
        drop(f.db.begin_read().unwrap());
        let (again, n) = counted(|| drop(f.db.begin_read().unwrap()));
        assert_eq!(
            n, 0,
            "a read transaction's begin and end allocated {n} times"
        );
        black_box(again);
        gets(&rx, &f);
        let mut rng = Rng::new(9);
        cursors(&rx, &f, &mut rng);
        for pattern in 0..3 {
            let (seen, n) = steps(rx.iter_verified(&f.tree).unwrap(), &mut rng, pattern);
            assert!(
                seen == f.keys,
                "pattern {pattern}: verified iteration is wrong"
            );
            assert_eq!(
                n,
                0,
                "pattern {pattern}: {} verified steps allocated {n} times",
                seen.len() + 1
            );
        }
        // The counter works: an allocation is seen.
        let (_, n) = counted(|| black_box(vec![1u8; 10]));
        assert_eq!(n, 1);
    }
}

/// The same inside a write transaction, over a mix of its own (dirty) pages
/// and committed ones.
#[test]
fn write_txn_reads_allocate_nothing() {
    let f = fixture(4096);
    let mut tx = f.db.begin_write().unwrap();
    // Dirty some pages: every 50th key rewritten, a few new overflow values.
    for k in f.keys.iter().step_by(50) {
        tx.put(&f.tree, k, b"rewritten").unwrap();
    }
    tx.put(&f.tree, b"k00000100~new", &vec![3u8; 20_000])
        .unwrap();
    let mut keys = f.keys.clone();
    keys.push(b"k00000100~new".to_vec());
    keys.sort();
    for k in &keys {
        black_box(tx.get(&f.tree, k).unwrap());
    }
    let (found, n) = counted(|| {
        let mut found = 0;
        for k in keys.iter().chain(f.misses.iter()) {
            if black_box(tx.get(&f.tree, black_box(k)).unwrap()).is_some() {
                found += 1;
            }
        }
        found
    });
    assert_eq!(found, keys.len());
    assert_eq!(n, 0, "WriteTxn::get allocated {n} times");
    let mut rng = Rng::new(10);
    for pattern in 0..3 {
        let it = tx.iter(&f.tree).unwrap();
        let (seen, n) = steps(it, &mut rng, pattern);
        assert!(seen == keys, "pattern {pattern}: iteration is wrong");
        assert_eq!(
            n, 0,
            "pattern {pattern}: WriteTxn iteration steps allocated {n} times"
        );
    }
    let (a, b): (&[u8], &[u8]) = (b"k00001000", b"k00030000");
    let (seen, n) = steps(tx.range(&f.tree, a..b).unwrap(), &mut rng, 2);
    assert_eq!(
        seen.len(),
        keys.iter()
            .filter(|k| (a..b).contains(&k.as_slice()))
            .count()
    );
    assert_eq!(n, 0, "WriteTxn range steps allocated {n} times");
}

/// A single-put logged commit in steady state allocates nothing: the
/// transaction's page vectors, its list of freed pages and its catalog are
/// the previous transaction's, kept by the writer, and the snapshot it
/// publishes is written over the one the publish before it replaced. What
/// is left are vectors of the writer's own bookkeeping reaching a new
/// length now and then (doubling): at most one allocation per 100 commits.
#[test]
fn single_put_logged_commits_allocate_nothing_in_steady_state() {
    for durability in [Durability::None, Durability::Immediate] {
        let t = temp_db("commits.ib");
        let options = Options {
            durability,
            logged_commits: true,
            ..Options::default()
        };
        let db = Database::open_with(&t.path, &options).unwrap();
        let mut tx = db.begin_write().unwrap();
        let tree = tx.open_tree("t").unwrap();
        for i in 0..20_000u32 {
            tx.put(&tree, &i.to_be_bytes(), &[1u8; 100]).unwrap();
        }
        tx.commit().unwrap();
        let commit = |i: u32| {
            let mut tx = db.begin_write().unwrap();
            tx.put(
                &tree,
                &(i.wrapping_mul(7_919) % 20_000).to_be_bytes(),
                &[i as u8; 100],
            )
            .unwrap();
            tx.commit().unwrap();
        };
        let commits = if durability == Durability::None {
            3_000
        } else {
            300
        };
        for i in 0..commits {
            commit(i);
        }
        // `counters`, not `stats`: a call of `stats` checkpoints, which
        // would send every leaf back to the file.
        let before = db.counters();
        let ((), n) = counted(|| {
            for i in commits..2 * commits {
                commit(i);
            }
        });
        let after = db.counters();
        assert_eq!(
            after.logged_commits - before.logged_commits,
            u64::from(commits),
            "{durability:?}: every commit was logged"
        );
        assert!(
            n <= u64::from(commits) / 100,
            "{durability:?}: {commits} single-put commits allocated {n} times"
        );
        // Same-size overwrites of leaves in the arena were value overlays
        // (most of them where the warm-up touched every leaf), so that path
        // allocates nothing either.
        let least = if durability == Durability::None {
            u64::from(commits) / 2
        } else {
            1
        };
        assert!(
            after.values_overlaid - before.values_overlaid >= least,
            "{durability:?}: {} of {commits} overwrites overlaid",
            after.values_overlaid - before.values_overlaid
        );
    }
}

#[test]
fn reads_of_overlaid_values_allocate_nothing() {
    let t = temp_db("overlaid.ib");
    let db = Database::open(&t.path).unwrap();
    let mut tx = db.begin_write().unwrap();
    let tree = tx.open_tree("t").unwrap();
    for i in 0..5_000u32 {
        tx.put(&tree, &i.to_be_bytes(), &[0u8; 24]).unwrap();
    }
    tx.commit().unwrap();
    // Twice over every key, one put a commit: the first copies each leaf
    // into the arena, the second overlays.
    for round in 1..=2u8 {
        for i in (0..5_000u32).step_by(3) {
            let mut tx = db.begin_write().unwrap();
            tx.put(&tree, &i.to_be_bytes(), &[round; 24]).unwrap();
            tx.commit().unwrap();
        }
    }
    assert!(db.counters().values_overlaid > 1_000);
    let rx = db.begin_read().unwrap();
    let (sum, n) = counted(|| {
        let mut sum = 0u64;
        for i in 0..5_000u32 {
            let v = rx.get(&tree, &i.to_be_bytes()).unwrap().unwrap();
            sum += u64::from(v[0]);
        }
        for e in rx.iter(&tree).unwrap() {
            sum += u64::from(e.unwrap().1[0]);
        }
        for e in rx.iter(&tree).unwrap().rev() {
            sum += u64::from(e.unwrap().1[0]);
        }
        sum
    });
    // Every third key reads 2, the rest 0: overlaid values were read.
    assert_eq!(sum, 3 * 2 * u64::from(5_000u32.div_ceil(3)));
    assert_eq!(n, 0, "reads of overlaid values allocated {n} times");
}

/// Single-put deletes kept as tombstones (value overlays) allocate
/// nothing in steady state, and neither do reads that step over them.
#[test]
fn overlaid_deletes_and_reads_across_them_allocate_nothing() {
    let t = temp_db("tombstones.ib");
    let db = Database::open(&t.path).unwrap();
    let mut tx = db.begin_write().unwrap();
    let tree = tx.open_tree("t").unwrap();
    for i in 0..20_000u32 {
        tx.put(&tree, &i.to_be_bytes(), &[1u8; 24]).unwrap();
    }
    tx.commit().unwrap();
    // Every leaf into the arena (a put of another length copies it).
    for i in (0..20_000u32).step_by(50) {
        let mut tx = db.begin_write().unwrap();
        tx.put(&tree, &i.to_be_bytes(), &[2u8; 30]).unwrap();
        tx.commit().unwrap();
    }
    let delete = |i: u32| {
        let mut tx = db.begin_write().unwrap();
        assert!(tx.delete(&tree, &i.to_be_bytes()).unwrap());
        tx.commit().unwrap();
    };
    // Keys 1, 4, 7, ...: a leaf keeps most of its keys.
    for i in (1..3_000u32).step_by(3) {
        delete(i);
    }
    let before = db.counters();
    let ((), n) = counted(|| {
        for i in (3_001..6_000u32).step_by(3) {
            delete(i);
        }
    });
    let after = db.counters();
    assert!(
        after.values_overlaid - before.values_overlaid >= 900,
        "{} of 1,000 deletes overlaid",
        after.values_overlaid - before.values_overlaid
    );
    assert!(n <= 10, "1,000 single-put deletes allocated {n} times");
    let rx = db.begin_read().unwrap();
    let (seen, n) = counted(|| {
        let mut seen = 0u64;
        for i in 0..6_000u32 {
            seen += u64::from(rx.get(&tree, &i.to_be_bytes()).unwrap().is_some());
        }
        seen += rx.iter(&tree).unwrap().count() as u64;
        seen += rx.iter(&tree).unwrap().rev().count() as u64;
        seen
    });
    assert_eq!(seen, 4_000 + 2 * (20_000 - 2_000));
    assert_eq!(n, 0, "reads across tombstones allocated {n} times");
}
