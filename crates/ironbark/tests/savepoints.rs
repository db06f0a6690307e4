//! Savepoints (`WriteTxn::savepoint`, `rollback_to`, `release`): random
//! operations against a model (a `BTreeMap` per tree, and a stack of model
//! snapshots for the savepoints), checked inside the write transaction,
//! after commit, in a crash image of the files (the logged commit replayed
//! from the redo log) and after a clean reopen, with `check` finding no
//! leaked or doubly used page; and the misuses of a savepoint, each an
//! error that changes nothing.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;

use common::{read_model, temp_db, Images, Model, Rng};
use ironbark::{Database, Durability, Error, Options, Savepoint, WriteTxn};

const TREES: [&str; 3] = ["alpha", "beta", "gamma"];

fn options(page_size: usize) -> Options {
    Options {
        page_size,
        durability: Durability::None,
        ..Options::default()
    }
}

fn key(rng: &mut Rng, max_key: usize) -> Vec<u8> {
    match rng.below(25) {
        0 => {
            let n = 1 + rng.below(max_key as u64) as usize;
            rng.bytes(n)
        }
        // A small key space so that overwrites and deletes hit.
        _ => format!("k{:04}", rng.below(1500)).into_bytes(),
    }
}

fn value(rng: &mut Rng, page_size: usize) -> Vec<u8> {
    match rng.below(30) {
        0 => {
            let n = page_size * 2 + rng.below(page_size as u64) as usize;
            rng.bytes(n)
        }
        1 => {
            let n = page_size / 2 + rng.below(page_size as u64 / 2) as usize;
            rng.bytes(n)
        }
        _ => {
            let n = rng.below(90) as usize;
            rng.bytes(n)
        }
    }
}

fn bound(rng: &mut Rng, max_key: usize) -> Bound<Vec<u8>> {
    match rng.below(4) {
        0 => Bound::Unbounded,
        1 => Bound::Included(key(rng, max_key)),
        _ => Bound::Excluded(key(rng, max_key)),
    }
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    b.as_ref().map(Vec::as_slice)
}

/// Every tree of `tx` as the model has it (names, lengths, entries).
fn assert_txn_is(tx: &WriteTxn<'_>, model: &Model, what: &str) {
    let names: Vec<String> = model.keys().cloned().collect();
    assert_eq!(tx.list_trees(), names, "{what}: trees");
    for (name, entries) in model {
        let t = tx.tree(name).unwrap();
        assert_eq!(
            tx.len(&t).unwrap(),
            entries.len() as u64,
            "{what}: len of {name}"
        );
        let got: BTreeMap<Vec<u8>, Vec<u8>> = tx
            .iter(&t)
            .unwrap()
            .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
            .collect::<ironbark::Result<_>>()
            .unwrap();
        assert!(&got == entries, "{what}: entries of {name} differ");
    }
}

/// A database holding `model` (`what` names it in failures), whose pages
/// `check` finds neither leaked nor doubly used.
fn assert_db_is(db: &Database, model: &Model, what: &str) {
    let (_, got) = read_model(db).unwrap();
    assert!(&got == model, "{what}: the committed trees differ");
    db.check()
        .unwrap_or_else(|e| panic!("{what}: check failed: {e}"));
}

/// One random transaction of about `ops` operations with savepoints,
/// rollbacks and releases. Returns the model of what it leaves, and the
/// number of rollbacks it made.
fn random_txn(
    tx: &mut WriteTxn<'_>,
    rng: &mut Rng,
    mut model: Model,
    ops: usize,
    page_size: usize,
    max_key: usize,
    label: &str,
) -> (Model, u64) {
    let mut stack: Vec<(Savepoint, Model)> = Vec::new();
    // Savepoints released or rolled past: using them is an error.
    let mut dead: Vec<Savepoint> = Vec::new();
    let mut rollbacks = 0;
    for op in 0..ops {
        let what = format!("{label} op {op}");
        let name = TREES[rng.below(TREES.len() as u64) as usize];
        match rng.below(100) {
            0..=44 | 68..=69 => {
                let t = tx.open_tree(name).unwrap();
                let (k, v) = (key(rng, max_key), value(rng, page_size));
                tx.put(&t, &k, &v).unwrap();
                model.entry(name.into()).or_default().insert(k, v);
            }
            45..=49 => {
                let t = tx.open_tree(name).unwrap();
                let (k, v) = (key(rng, max_key), value(rng, page_size));
                tx.put_reserve(&t, &k, v.len()).unwrap().copy_from_slice(&v);
                model.entry(name.into()).or_default().insert(k, v);
            }
            50..=63 => {
                let Ok(t) = tx.tree(name) else { continue };
                let entries = &model[name];
                // Mostly a key that is there.
                let k = match entries.len() {
                    n if n > 0 && rng.chance(80) => entries
                        .keys()
                        .nth(rng.below(n as u64) as usize)
                        .unwrap()
                        .clone(),
                    _ => key(rng, max_key),
                };
                let removed = tx.delete(&t, &k).unwrap();
                let entries = model.get_mut(name).unwrap();
                assert_eq!(removed, entries.remove(&k).is_some(), "{what}: delete");
            }
            64..=65 => {
                let Ok(t) = tx.tree(name) else { continue };
                let (lo, hi) = (bound(rng, max_key), bound(rng, max_key));
                let n = tx.delete_range(&t, (as_ref(&lo), as_ref(&hi))).unwrap();
                let entries = model.get_mut(name).unwrap();
                let inverted = match (&lo, &hi) {
                    (
                        Bound::Included(l) | Bound::Excluded(l),
                        Bound::Included(h) | Bound::Excluded(h),
                    ) => {
                        l > h
                            || (l == h
                                && !matches!((&lo, &hi), (Bound::Included(_), Bound::Included(_))))
                    }
                    _ => false,
                };
                let doomed: Vec<Vec<u8>> = if inverted {
                    Vec::new()
                } else {
                    entries
                        .range::<[u8], _>((as_ref(&lo), as_ref(&hi)))
                        .map(|(k, _)| k.clone())
                        .collect()
                };
                assert_eq!(n, doomed.len() as u64, "{what}: delete_range");
                for k in doomed {
                    entries.remove(&k);
                }
            }
            66 if rng.chance(25) => {
                let Ok(t) = tx.tree(name) else { continue };
                let n = tx.clear(&t).unwrap();
                let entries = model.get_mut(name).unwrap();
                assert_eq!(n, entries.len() as u64, "{what}: clear");
                entries.clear();
            }
            67 if rng.chance(25) => {
                let existed = tx.drop_tree(name).unwrap();
                assert_eq!(existed, model.remove(name).is_some(), "{what}: drop_tree");
            }
            70..=80 => {
                let sp = tx.savepoint().unwrap();
                stack.push((sp, model.clone()));
            }
            81..=89 => {
                if stack.is_empty() {
                    continue;
                }
                // The innermost one most often, or any.
                let at = if rng.chance(50) {
                    stack.len() - 1
                } else {
                    rng.below(stack.len() as u64) as usize
                };
                tx.rollback_to(&stack[at].0).unwrap();
                dead.extend(stack.drain(at + 1..).map(|(sp, _)| sp));
                model = stack[at].1.clone();
                rollbacks += 1;
                assert_txn_is(tx, &model, &format!("{what}: after a rollback"));
            }
            90..=95 => {
                if stack.is_empty() {
                    continue;
                }
                let at = rng.below(stack.len() as u64) as usize;
                let mut gone = stack.drain(at..).map(|(sp, _)| sp);
                let sp = gone.next().unwrap();
                if rng.chance(70) {
                    tx.release(sp).unwrap();
                    dead.extend(gone);
                }
                // Otherwise dropped, with those after it: harmless (they
                // stay on the transaction's stack, unused).
            }
            _ => {
                // A dead savepoint is refused and changes nothing.
                if let Some(sp) = dead.last() {
                    let err = tx.rollback_to(sp).unwrap_err();
                    assert!(matches!(err, Error::InvalidSavepoint(_)), "{what}: {err}");
                    assert_txn_is(tx, &model, &format!("{what}: after a refused rollback"));
                }
            }
        }
        if op % 25 == 0 {
            assert_txn_is(tx, &model, &what);
        }
    }
    assert_txn_is(tx, &model, &format!("{label}: at the end"));
    (model, rollbacks)
}

/// The random test: transactions of random operations with savepoints,
/// committed (mostly) or aborted; after each commit the database, a crash
/// image of its files and (sometimes) a clean reopen hold the model.
fn run(seed: u64, page_size: usize, txns: usize) {
    let t = temp_db("savepoints.ib");
    let opts = options(page_size);
    let mut db = Database::open_with(&t.path, &opts).unwrap();
    let max_key = db.max_key_len() / 2;
    let mut rng = Rng::new(seed);
    // Trees of a few levels to start from, so that the savepoints see
    // splits and merges of committed and dirty pages alike.
    let mut committed = Model::new();
    let mut tx = db.begin_write().unwrap();
    for name in TREES {
        let t = tx.open_tree(name).unwrap();
        let entries = committed.entry(name.into()).or_default();
        for _ in 0..800 {
            let (k, v) = (key(&mut rng, max_key), value(&mut rng, page_size));
            tx.put(&t, &k, &v).unwrap();
            entries.insert(k, v);
        }
    }
    tx.commit().unwrap();
    let depths: Vec<u32> = db.stats().unwrap().trees.iter().map(|t| t.depth).collect();
    assert!(
        depths.iter().all(|&d| d >= 2),
        "trees of one leaf: {depths:?}"
    );
    let (mut rollbacks, mut logged, mut largest) = (0, 0, 0);
    for n in 0..txns {
        let label = format!("seed {seed} page {page_size} txn {n}");
        let logged_before = db.stats().unwrap().counters.logged_commits;
        let mut tx = db.begin_write().unwrap();
        // Small transactions too, which commit to the redo log.
        let ops = if rng.chance(50) {
            1 + rng.below(30)
        } else {
            50 + rng.below(400)
        };
        let (model, r) = random_txn(
            &mut tx,
            &mut rng,
            committed.clone(),
            ops as usize,
            page_size,
            max_key,
            &label,
        );
        rollbacks += r;
        if rng.chance(10) {
            tx.abort();
            assert_db_is(&db, &committed, &format!("{label}: after abort"));
            continue;
        }
        tx.commit().unwrap();
        committed = model;
        let grown = committed.values().map(|t| t.len()).max().unwrap_or(0);
        largest = largest.max(grown);
        // The files as a crash leaves them: the newest commits may be only
        // in the redo log, replayed on open.
        let image = Images::read(&t.path);
        assert_db_is(&db, &committed, &format!("{label}: after commit"));
        logged += db.stats().unwrap().counters.logged_commits - logged_before;
        let copy = temp_db("crash.ib");
        image.write(&copy.path);
        let crashed = Database::open_with(&copy.path, &opts).unwrap();
        assert_db_is(&crashed, &committed, &format!("{label}: crash image"));
        drop(crashed);
        if rng.chance(15) {
            drop(db);
            db = Database::open_with(&t.path, &opts).unwrap();
            assert_db_is(&db, &committed, &format!("{label}: after reopen"));
        }
    }
    drop(db);
    let db = Database::open_with(&t.path, &opts).unwrap();
    assert_db_is(
        &db,
        &committed,
        &format!("seed {seed}: after the last reopen"),
    );
    eprintln!(
        "seed {seed} page {page_size}: {rollbacks} rollbacks, {logged} logged commits, \
         largest tree {largest}"
    );
    assert!(rollbacks > 0, "the workload rolled nothing back");
    assert!(logged > 0, "no commit was logged");
}

#[test]
fn random_operations_with_savepoints_match_the_model_small_pages() {
    for seed in 1..=4 {
        run(seed, 1024, 25);
    }
}

#[test]
fn random_operations_with_savepoints_match_the_model_default_pages() {
    run(11, 4096, 20);
}

fn open(path: &std::path::Path) -> Database {
    Database::open_with(path, &options(1024)).unwrap()
}

#[test]
fn nested_rollbacks_and_releases() {
    let t = temp_db("nested.ib");
    let db = open(&t.path);
    let mut tx = db.begin_write().unwrap();
    let tr = tx.open_tree("t").unwrap();
    for i in 0..500u32 {
        tx.put(&tr, &i.to_be_bytes(), &[1; 40]).unwrap();
    }
    let outer = tx.savepoint().unwrap();
    for i in 0..500u32 {
        tx.put(&tr, &i.to_be_bytes(), &[2; 40]).unwrap();
    }
    let inner = tx.savepoint().unwrap();
    tx.delete_range(&tr, ..).unwrap();
    assert!(tx.is_empty(&tr).unwrap());
    tx.rollback_to(&inner).unwrap();
    assert_eq!(
        tx.get(&tr, &7u32.to_be_bytes()).unwrap(),
        Some(&[2u8; 40][..])
    );
    // The savepoint stays usable after a rollback to it.
    tx.put(&tr, b"x", b"y").unwrap();
    tx.rollback_to(&inner).unwrap();
    assert_eq!(tx.get(&tr, b"x").unwrap(), None);
    assert_eq!(tx.len(&tr).unwrap(), 500);
    tx.rollback_to(&outer).unwrap();
    assert_eq!(
        tx.get(&tr, &7u32.to_be_bytes()).unwrap(),
        Some(&[1u8; 40][..])
    );
    // `inner` was discarded by the rollback to `outer`.
    assert!(matches!(
        tx.rollback_to(&inner),
        Err(Error::InvalidSavepoint(_))
    ));
    assert!(matches!(tx.release(inner), Err(Error::InvalidSavepoint(_))));
    // A release keeps the changes; an outer savepoint still undoes them.
    let inner = tx.savepoint().unwrap();
    tx.put(&tr, b"kept", b"1").unwrap();
    tx.release(inner).unwrap();
    assert_eq!(tx.get(&tr, b"kept").unwrap(), Some(&b"1"[..]));
    tx.rollback_to(&outer).unwrap();
    assert_eq!(tx.get(&tr, b"kept").unwrap(), None);
    // Releasing the outer one releases those after it.
    let inner = tx.savepoint().unwrap();
    tx.release(outer).unwrap();
    assert!(matches!(
        tx.rollback_to(&inner),
        Err(Error::InvalidSavepoint(_))
    ));
    tx.put(&tr, b"last", b"1").unwrap();
    tx.commit().unwrap();
    let rx = db.begin_read().unwrap();
    assert_eq!(rx.len(&tr).unwrap(), 501);
    drop(rx);
    db.check().unwrap();
}

#[test]
fn a_savepoint_of_another_transaction_is_refused() {
    let t = temp_db("other.ib");
    let db = open(&t.path);
    let mut tx = db.begin_write().unwrap();
    let tr = tx.open_tree("t").unwrap();
    let sp = tx.savepoint().unwrap();
    tx.commit().unwrap();
    let mut tx = db.begin_write().unwrap();
    tx.put(&tr, b"k", b"v").unwrap();
    let err = tx.rollback_to(&sp).unwrap_err();
    assert!(matches!(err, Error::InvalidSavepoint(_)), "{err}");
    assert!(
        err.to_string().contains("another write transaction"),
        "{err}"
    );
    // A transaction that has savepoints of its own refuses it too.
    let _own = tx.savepoint().unwrap();
    assert!(matches!(
        tx.rollback_to(&sp),
        Err(Error::InvalidSavepoint(_))
    ));
    assert!(matches!(tx.release(sp), Err(Error::InvalidSavepoint(_))));
    assert_eq!(tx.get(&tr, b"k").unwrap(), Some(&b"v"[..]));
    tx.commit().unwrap();
    db.check().unwrap();
}

#[test]
fn trees_created_and_dropped_after_a_savepoint_are_rolled_back() {
    let t = temp_db("trees.ib");
    let db = open(&t.path);
    let mut tx = db.begin_write().unwrap();
    let kept = tx.open_tree("kept").unwrap();
    tx.put(&kept, b"a", b"1").unwrap();
    tx.commit().unwrap();

    let mut tx = db.begin_write().unwrap();
    let sp = tx.savepoint().unwrap();
    assert!(tx.drop_tree("kept").unwrap());
    let new = tx.open_tree("new").unwrap();
    tx.put(&new, b"b", b"2").unwrap();
    tx.rollback_to(&sp).unwrap();
    assert_eq!(tx.list_trees(), ["kept"]);
    assert_eq!(tx.get(&kept, b"a").unwrap(), Some(&b"1"[..]));
    // The handle of the tree created after the savepoint is stale, also
    // once a tree of that name is created again.
    assert!(tx.get(&new, b"b").is_err());
    let again = tx.open_tree("new").unwrap();
    assert!(tx.get(&new, b"b").is_err());
    assert_eq!(tx.get(&again, b"b").unwrap(), None);
    tx.commit().unwrap();
    let image = Images::read(&t.path);
    let copy = temp_db("copy.ib");
    image.write(&copy.path);
    let crashed = open(&copy.path);
    let rx = crashed.begin_read().unwrap();
    assert_eq!(rx.list_trees(), ["kept", "new"]);
    drop(rx);
    crashed.check().unwrap();
}

/// A small transaction rolled back to a savepoint commits to the redo log
/// with only the operations it kept: replayed from a crash image, the
/// database holds exactly them.
#[test]
fn a_logged_commit_records_only_what_survived() {
    let t = temp_db("logged.ib");
    let db = open(&t.path);
    let mut tx = db.begin_write().unwrap();
    let tr = tx.open_tree("t").unwrap();
    for i in 0..300u32 {
        tx.put(&tr, &i.to_be_bytes(), b"base").unwrap();
    }
    tx.commit().unwrap();
    db.check().unwrap();

    let before = db.stats().unwrap().counters.logged_commits;
    let mut tx = db.begin_write().unwrap();
    tx.put(&tr, b"before", b"1").unwrap();
    let space = tx.put_reserve(&tr, b"reserved", 4).unwrap();
    space.copy_from_slice(b"rsvd");
    let sp = tx.savepoint().unwrap();
    tx.put(&tr, b"undone", b"2").unwrap();
    tx.delete(&tr, &5u32.to_be_bytes()).unwrap();
    tx.put_reserve(&tr, b"undone-reserved", 3)
        .unwrap()
        .copy_from_slice(b"no!");
    tx.rollback_to(&sp).unwrap();
    tx.put(&tr, b"after", b"3").unwrap();
    tx.commit().unwrap();
    let image = Images::read(&t.path);
    assert_eq!(db.stats().unwrap().counters.logged_commits, before + 1);

    let copy = temp_db("copy.ib");
    image.write(&copy.path);
    let crashed = open(&copy.path);
    let rx = crashed.begin_read().unwrap();
    let tr = rx.tree("t").unwrap();
    assert_eq!(rx.get(&tr, b"before").unwrap(), Some(&b"1"[..]));
    assert_eq!(rx.get(&tr, b"reserved").unwrap(), Some(&b"rsvd"[..]));
    assert_eq!(rx.get(&tr, b"after").unwrap(), Some(&b"3"[..]));
    assert_eq!(rx.get(&tr, b"undone").unwrap(), None);
    assert_eq!(rx.get(&tr, b"undone-reserved").unwrap(), None);
    assert!(rx.get(&tr, &5u32.to_be_bytes()).unwrap().is_some());
    assert_eq!(rx.len(&tr).unwrap(), 303);
    drop(rx);
    crashed.check().unwrap();
}

/// Dropping a savepoint without releasing it is harmless: the transaction
/// commits as if it had been released.
#[test]
fn a_dropped_savepoint_is_harmless() {
    let t = temp_db("dropped.ib");
    let db = open(&t.path);
    let mut tx = db.begin_write().unwrap();
    let tr = tx.open_tree("t").unwrap();
    for i in 0..200u32 {
        let _sp = tx.savepoint().unwrap();
        tx.put(&tr, &i.to_be_bytes(), &[3; 100]).unwrap();
        // `_sp` goes out of scope unreleased.
    }
    tx.commit().unwrap();
    let rx = db.begin_read().unwrap();
    assert_eq!(rx.len(&tr).unwrap(), 200);
    drop(rx);
    db.check().unwrap();
}
