//! Value overlays (docs/design.md, "Value overlays"): a same-size
//! overwrite of a key whose leaf is a published arena page keeps the new
//! value beside the leaf instead of copying the leaf and its path. What is
//! checked: such overwrites are overlaid (the counter moves, and no page
//! is copied for them), every reader sees exactly its snapshot's values
//! through `get` and through cursors in both directions, an aborted or
//! failed transaction's overlaid values never show, a savepoint's rollback
//! undoes overwrites, overlays that fill up are folded into a copy of the
//! leaf, and checkpoints, reopens and crash images (log replay) keep every
//! committed value; `check` passes throughout.

mod common;

use std::collections::BTreeMap;

use common::{delete_range_in_both, temp_db, Images, Rng};
use ironbark::{Database, Durability, Options, ReadTxn, Tree};

/// A tree's entries, as a model.
type Entries = BTreeMap<Vec<u8>, Vec<u8>>;

const KEYS: u32 = 3_000;
const VALUE_LEN: usize = 40;

fn key(i: u32) -> [u8; 4] {
    i.to_be_bytes()
}

/// A value of `VALUE_LEN` bytes naming key `i` and version `v`.
fn value(i: u32, v: u32) -> Vec<u8> {
    let mut out = format!("key {i:>6} version {v:>8}").into_bytes();
    out.resize(VALUE_LEN, b'.');
    out
}

fn options() -> Options {
    Options {
        durability: Durability::None,
        ..Options::default()
    }
}

/// A database with keys `0..KEYS` at version 0, then each overwritten once
/// in single-put commits, so that every leaf is a published arena page.
fn arena_resident(path: &std::path::Path) -> (Database, Tree, BTreeMap<u32, Vec<u8>>) {
    let db = Database::open_with(path, &options()).unwrap();
    let mut tx = db.begin_write().unwrap();
    let tree = tx.open_tree("t").unwrap();
    let mut model = BTreeMap::new();
    for i in 0..KEYS {
        tx.put(&tree, &key(i), &value(i, 0)).unwrap();
        model.insert(i, value(i, 0));
    }
    tx.commit().unwrap();
    for i in (0..KEYS).step_by(7) {
        let mut tx = db.begin_write().unwrap();
        tx.put(&tree, &key(i), &value(i, 1)).unwrap();
        tx.commit().unwrap();
        model.insert(i, value(i, 1));
    }
    (db, tree, model)
}

/// `arena_resident`, its model keyed by the keys' bytes.
fn arena_resident_entries(path: &std::path::Path) -> (Database, Tree, Entries) {
    let (db, tree, model) = arena_resident(path);
    let model = model
        .into_iter()
        .map(|(i, v)| (key(i).to_vec(), v))
        .collect();
    (db, tree, model)
}

/// Reopens the closed database at `path`: its reads agree with `model`
/// (`assert_reads_agree`), and `check` passes.
fn assert_reopened_reads_agree(path: &std::path::Path, model: &Entries, rng: &mut Rng) {
    let db = Database::open_with(path, &options()).unwrap();
    let rx = db.begin_read().unwrap();
    assert_reads_agree(&rx, &rx.tree("t").unwrap(), model, rng, "reopened");
    drop(rx);
    db.check().unwrap();
}

/// Asserts that `rx` sees exactly `model`: by `get` of every key, and by
/// full scans forward and backward.
fn assert_sees(rx: &ReadTxn, tree: &Tree, model: &BTreeMap<u32, Vec<u8>>, what: &str) {
    for (i, v) in model {
        assert_eq!(
            rx.get(tree, &key(*i)).unwrap(),
            Some(&v[..]),
            "{what}: get of key {i}"
        );
    }
    let forward: Vec<(Vec<u8>, Vec<u8>)> = rx
        .iter(tree)
        .unwrap()
        .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
        .collect();
    let expected: Vec<(Vec<u8>, Vec<u8>)> = model
        .iter()
        .map(|(i, v)| (key(*i).to_vec(), v.clone()))
        .collect();
    assert_eq!(forward, expected, "{what}: forward scan");
    let backward: Vec<(Vec<u8>, Vec<u8>)> = rx
        .iter(tree)
        .unwrap()
        .rev()
        .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
        .collect();
    let mut reversed = expected;
    reversed.reverse();
    assert_eq!(backward, reversed, "{what}: backward scan");
}

fn overlaid(db: &Database) -> u64 {
    db.counters().values_overlaid
}

#[test]
fn same_size_overwrites_are_overlaid_and_each_snapshot_sees_its_own_values() {
    let t = temp_db("overlays.ib");
    let (db, tree, mut model) = arena_resident(&t.path);
    let start = overlaid(&db);
    let mut snapshots = vec![(db.begin_read().unwrap(), model.clone())];
    let mut rng = Rng::new(11);
    let pages_before = db.counters().pages_written;
    for round in 1..=2_000u32 {
        let mut tx = db.begin_write().unwrap();
        let i = rng.below(u64::from(KEYS)) as u32;
        tx.put(&tree, &key(i), &value(i, round + 1)).unwrap();
        // The transaction reads its own overlaid value.
        assert_eq!(
            tx.get(&tree, &key(i)).unwrap(),
            Some(&value(i, round + 1)[..])
        );
        tx.commit().unwrap();
        model.insert(i, value(i, round + 1));
        if round % 500 == 0 {
            snapshots.push((db.begin_read().unwrap(), model.clone()));
        }
    }
    let after = overlaid(&db) - start;
    // Most of the 2,000 overwrites find their leaf in the arena; those
    // whose overlay was full copied the leaf instead.
    assert!(
        after > 1_500,
        "only {after} of 2000 overwrites were overlaid"
    );
    assert_eq!(
        db.counters().pages_written,
        pages_before,
        "logged overwrites wrote pages"
    );
    for (n, (rx, m)) in snapshots.iter().enumerate() {
        assert_sees(rx, &tree, m, &format!("snapshot {n}"));
    }
    assert_sees(&db.begin_read().unwrap(), &tree, &model, "newest");
    drop(snapshots);
    db.check().unwrap();
    db.checkpoint().unwrap();
    assert_sees(
        &db.begin_read().unwrap(),
        &tree,
        &model,
        "after a checkpoint",
    );
    db.check().unwrap();
    drop(db);
    let db = Database::open_with(&t.path, &options()).unwrap();
    let rx = db.begin_read().unwrap();
    assert_sees(&rx, &rx.tree("t").unwrap(), &model, "reopened");
    drop(rx);
    db.check().unwrap();
}

#[test]
fn aborted_and_rolled_back_overwrites_never_show() {
    let t = temp_db("undo.ib");
    let (db, tree, model) = arena_resident(&t.path);
    let before = overlaid(&db);
    // An overlaid overwrite, then an abort: the value stays, for readers
    // and for the next transaction, which overlays the same leaf again.
    for i in [0u32, 7, 14, 700] {
        let mut tx = db.begin_write().unwrap();
        tx.put(&tree, &key(i), &value(i, 99)).unwrap();
        tx.put(&tree, &key(i + 1), &value(i + 1, 99)).unwrap();
        assert_eq!(tx.get(&tree, &key(i)).unwrap(), Some(&value(i, 99)[..]));
        tx.abort();
        assert_sees(&db.begin_read().unwrap(), &tree, &model, "after an abort");
        let tx = db.begin_write().unwrap();
        assert_eq!(tx.get(&tree, &key(i)).unwrap(), Some(&model[&i][..]));
        drop(tx);
    }
    assert_eq!(overlaid(&db), before, "an aborted overwrite was counted");
    // The same leaves, overwritten and committed after the aborts.
    let mut model = model;
    for i in [0u32, 7, 14, 700] {
        let mut tx = db.begin_write().unwrap();
        tx.put(&tree, &key(i), &value(i, 5)).unwrap();
        tx.commit().unwrap();
        model.insert(i, value(i, 5));
    }
    assert!(overlaid(&db) >= before + 4);
    assert_sees(&db.begin_read().unwrap(), &tree, &model, "after commits");
    // A savepoint's rollback undoes an overwrite made after it.
    let mut tx = db.begin_write().unwrap();
    tx.put(&tree, &key(21), &value(21, 50)).unwrap();
    model.insert(21, value(21, 50));
    let sp = tx.savepoint().unwrap();
    tx.put(&tree, &key(28), &value(28, 51)).unwrap();
    tx.rollback_to(&sp).unwrap();
    assert_eq!(tx.get(&tree, &key(28)).unwrap(), Some(&model[&28][..]));
    tx.commit().unwrap();
    assert_sees(&db.begin_read().unwrap(), &tree, &model, "after a rollback");
    db.check().unwrap();
    drop(db);
    let db = Database::open_with(&t.path, &options()).unwrap();
    let rx = db.begin_read().unwrap();
    assert_sees(&rx, &rx.tree("t").unwrap(), &model, "reopened");
}

#[test]
fn a_crash_image_replays_overlaid_overwrites() {
    let t = temp_db("crash.ib");
    let (db, tree, mut model) = arena_resident(&t.path);
    let start = overlaid(&db);
    let mut rng = Rng::new(5);
    let mut images = Vec::new();
    for round in 0..600u32 {
        let mut tx = db.begin_write().unwrap();
        if round % 50 == 0 {
            tx.set_durability(Durability::Immediate);
        }
        for _ in 0..1 + rng.below(3) {
            let i = rng.below(u64::from(KEYS)) as u32;
            tx.put(&tree, &key(i), &value(i, round + 10)).unwrap();
            model.insert(i, value(i, round + 10));
        }
        tx.commit().unwrap();
        if round % 100 == 99 {
            // The files as a crash would leave them: every commit is in the
            // log (written through its map), none of the overlays in a file.
            images.push((Images::read(&t.path), model.clone()));
        }
    }
    assert!(overlaid(&db) - start > 500);
    drop(db);
    for (n, (image, m)) in images.iter().enumerate() {
        let c = temp_db("image.ib");
        image.write(&c.path);
        let db = Database::open_with(&c.path, &options()).unwrap();
        let rx = db.begin_read().unwrap();
        let tree = rx.tree("t").unwrap();
        assert_sees(&rx, &tree, m, &format!("crash image {n}"));
        drop(rx);
        db.check().unwrap();
    }
}

#[test]
fn overwrites_mixed_with_inserts_deletes_and_other_lengths_agree_with_a_model() {
    let t = temp_db("mixed.ib");
    let (db, tree, mut model) = arena_resident_entries(&t.path);
    let mut rng = Rng::new(3);
    let mut held: Vec<(ReadTxn, Entries)> = Vec::new();
    for round in 0..3_000u32 {
        let mut tx = db.begin_write().unwrap();
        let mut staged = model.clone();
        for _ in 0..1 + rng.below(4) {
            let k = key(rng.below(u64::from(KEYS) + 200) as u32).to_vec();
            match rng.below(10) {
                0 => {
                    tx.delete(&tree, &k).unwrap();
                    staged.remove(&k);
                }
                1 => {
                    // Another length: a copy of the leaf, never an overlay.
                    let len = 1 + rng.below(80) as usize;
                    let v = rng.bytes(len);
                    tx.put(&tree, &k, &v).unwrap();
                    staged.insert(k, v);
                }
                _ => {
                    let len = staged.get(&k).map_or(VALUE_LEN, Vec::len);
                    let v = rng.bytes(len);
                    tx.put(&tree, &k, &v).unwrap();
                    staged.insert(k, v);
                }
            }
        }
        if rng.chance(10) {
            tx.abort();
        } else {
            tx.commit().unwrap();
            model = staged;
        }
        if round % 400 == 0 {
            held.push((db.begin_read().unwrap(), model.clone()));
        }
        if round % 1_000 == 999 {
            db.checkpoint().unwrap();
        }
    }
    assert!(overlaid(&db) > 1_000, "{} overlaid", overlaid(&db));
    for (n, (rx, m)) in held.iter().enumerate() {
        let seen: Entries = rx
            .iter(&tree)
            .unwrap()
            .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
            .collect();
        assert_eq!(&seen, m, "held snapshot {n}");
        for (k, v) in m {
            assert_eq!(rx.get(&tree, k).unwrap(), Some(&v[..]), "held {n}");
        }
    }
    drop(held);
    db.check().unwrap();
    drop(db);
    let db = Database::open_with(&t.path, &options()).unwrap();
    let rx = db.begin_read().unwrap();
    let tree = rx.tree("t").unwrap();
    let seen: Entries = rx
        .iter(&tree)
        .unwrap()
        .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
        .collect();
    assert_eq!(seen, model, "reopened");
}

/// A delete that leaves its leaf underfull merges it with a sibling; a
/// sibling that is an arena leaf with an overlay must bring its overlaid
/// values (and not its cells' older ones) into the merged page.
#[test]
fn a_merge_with_an_overlaid_sibling_keeps_the_overlaid_values() {
    let t = temp_db("merge.ib");
    let db = Database::open_with(&t.path, &options()).unwrap();
    // Keys put in random order leave leaves partly full, so that an
    // emptied leaf fits beside its sibling.
    let mut order: Vec<u32> = (0..KEYS).collect();
    let mut rng = Rng::new(5);
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let mut tx = db.begin_write().unwrap();
    let tree = tx.open_tree("t").unwrap();
    let mut model = BTreeMap::new();
    for &i in &order {
        tx.put(&tree, &key(i), &value(i, 0)).unwrap();
        model.insert(i, value(i, 0));
    }
    tx.commit().unwrap();
    let start = overlaid(&db);
    for i in (0..KEYS).step_by(3) {
        let mut tx = db.begin_write().unwrap();
        tx.put(&tree, &key(i), &value(i, 2)).unwrap();
        tx.commit().unwrap();
        model.insert(i, value(i, 2));
    }
    assert!(overlaid(&db) - start > 300, "the overwrites were overlaid");
    // Deleted left to right, 50 keys a transaction (few pages copied, so
    // no checkpoint sends the overlays to the file first): a leaf emptied
    // merges with its right sibling, not yet copied, whose overlay holds
    // the values `arena_resident` and the overwrites above gave it.
    for chunk in 4..36 {
        let mut tx = db.begin_write().unwrap();
        for i in chunk * 50..chunk * 50 + 50 {
            assert!(tx.delete(&tree, &key(i)).unwrap());
            model.remove(&i);
        }
        tx.commit().unwrap();
    }
    assert_sees(&db.begin_read().unwrap(), &tree, &model, "after the merges");
    db.check().unwrap();
    db.checkpoint().unwrap();
    assert_sees(
        &db.begin_read().unwrap(),
        &tree,
        &model,
        "after a checkpoint",
    );
}

/// Every way a reader reaches entries (`common::assert_reads_agree`),
/// checked against `model` for keys around those of the tree.
fn assert_reads_agree(rx: &ReadTxn, tree: &Tree, model: &Entries, rng: &mut Rng, what: &str) {
    let key_of = |i: u64| key(i as u32).to_vec();
    common::assert_reads_agree(
        rx,
        tree,
        model,
        key_of,
        u64::from(KEYS) + 50,
        200,
        rng,
        what,
    );
}

/// Deletes of keys in published arena leaves are tombstones in the
/// leaves' overlays: no page is written for them, and every reader, of
/// every snapshot held meanwhile, sees exactly its snapshot's entries by
/// every kind of lookup and scan, before and after a checkpoint folds
/// the tombstones in, and after a reopen.
#[test]
fn overlaid_deletes_hide_their_keys_from_every_later_snapshot_only() {
    let t = temp_db("tombstones.ib");
    let (db, tree, mut model) = arena_resident_entries(&t.path);
    let start = overlaid(&db);
    let pages_before = db.counters().pages_written;
    let mut rng = Rng::new(17);
    let mut held = vec![(db.begin_read().unwrap(), model.clone())];
    let mut deleted = 0;
    for round in 0..1_500u32 {
        let mut tx = db.begin_write().unwrap();
        let k = key(rng.below(u64::from(KEYS)) as u32).to_vec();
        if rng.chance(75) {
            let was = model.remove(&k).is_some();
            assert_eq!(tx.delete(&tree, &k).unwrap(), was, "round {round}");
            // The transaction no longer sees it.
            assert_eq!(tx.get(&tree, &k).unwrap(), None);
            deleted += u32::from(was);
        } else {
            // An overwrite of a live key, or the insert of a deleted one.
            let v = value(round, round);
            tx.put(&tree, &k, &v).unwrap();
            model.insert(k, v);
        }
        assert_eq!(tx.len(&tree).unwrap(), model.len() as u64);
        tx.commit().unwrap();
        if round % 300 == 0 {
            held.push((db.begin_read().unwrap(), model.clone()));
        }
    }
    assert!(deleted > 700, "{deleted} deletes");
    assert!(
        overlaid(&db) - start > 1_000,
        "only {} changes overlaid",
        overlaid(&db) - start
    );
    assert!(
        db.counters().pages_written == pages_before,
        "logged deletes wrote pages"
    );
    for (n, (rx, m)) in held.iter().enumerate() {
        assert_reads_agree(rx, &tree, m, &mut rng, &format!("held snapshot {n}"));
    }
    assert_reads_agree(&db.begin_read().unwrap(), &tree, &model, &mut rng, "newest");
    db.check().unwrap();
    drop(held);
    db.checkpoint().unwrap();
    assert_reads_agree(
        &db.begin_read().unwrap(),
        &tree,
        &model,
        &mut rng,
        "checkpointed",
    );
    db.check().unwrap();
    drop(db);
    assert_reopened_reads_agree(&t.path, &model, &mut rng);
}

/// A transaction that deletes keys by tombstones and then writes the
/// same leaves the usual way (a put of another length copies the leaf,
/// taking its tombstones), deletes through a write cursor, a range
/// delete across tombstoned leaves, and aborts: all agree with a model.
#[test]
fn tombstones_meet_copies_cursors_ranges_and_aborts() {
    let t = temp_db("tombstone-mix.ib");
    let (db, tree, mut model) = arena_resident_entries(&t.path);
    let mut rng = Rng::new(23);
    for round in 0..400u32 {
        let mut tx = db.begin_write().unwrap();
        let mut staged = model.clone();
        let base = rng.below(u64::from(KEYS) - 40) as u32;
        for _ in 0..1 + rng.below(6) {
            let k = key(base + rng.below(40) as u32).to_vec();
            match rng.below(6) {
                0..=2 => {
                    assert_eq!(tx.delete(&tree, &k).unwrap(), staged.remove(&k).is_some());
                }
                3 => {
                    let len = 1 + rng.below(90) as usize;
                    let v = rng.bytes(len);
                    tx.put(&tree, &k, &v).unwrap();
                    staged.insert(k, v);
                }
                4 => {
                    let v = value(round, 1);
                    tx.put(&tree, &k, &v).unwrap();
                    staged.insert(k, v);
                }
                _ => {
                    // A write cursor deletes every other entry from `k`.
                    let mut c = tx.cursor_mut(&tree).unwrap();
                    c.seek(&k);
                    for step in 0..6 {
                        match c.next().unwrap() {
                            Some((ck, _)) => {
                                let ck = ck.to_vec();
                                if step % 2 == 0 {
                                    assert!(c.delete_current().unwrap());
                                    staged.remove(&ck);
                                }
                            }
                            None => break,
                        }
                    }
                }
            }
        }
        if round % 50 == 49 {
            let lo = key(base).to_vec();
            let hi = key(base + 20).to_vec();
            let n = tx.delete_range(&tree, &lo[..]..&hi[..]).unwrap();
            let gone: Vec<Vec<u8>> = staged.range(lo..hi).map(|(k, _)| k.clone()).collect();
            assert_eq!(n, gone.len() as u64, "round {round}: range delete count");
            for k in gone {
                staged.remove(&k);
            }
        }
        let seen: Entries = tx
            .iter(&tree)
            .unwrap()
            .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
            .collect();
        assert_eq!(seen, staged, "round {round}: the transaction's own view");
        if rng.chance(15) {
            tx.abort();
        } else {
            tx.commit().unwrap();
            model = staged;
        }
    }
    assert_reads_agree(&db.begin_read().unwrap(), &tree, &model, &mut rng, "end");
    db.check().unwrap();
    drop(db);
    assert_reopened_reads_agree(&t.path, &model, &mut rng);
}

/// `count_dups` counts a key's values by its leaves' entry counts: values
/// deleted by tombstones are left out, for every snapshot held, and for
/// the write transaction that deleted them.
#[test]
fn counts_of_a_multimap_key_leave_out_its_tombstoned_values() {
    let t = temp_db("dups.ib");
    let db = Database::open_with(&t.path, &options()).unwrap();
    let mut tx = db.begin_write().unwrap();
    let m = tx.open_multimap("m").unwrap();
    for v in 0..3_000u32 {
        tx.put_dup(&m, b"k", &v.to_be_bytes()).unwrap();
    }
    for v in 0..100u32 {
        tx.put_dup(&m, b"j", &v.to_be_bytes()).unwrap();
        tx.put_dup(&m, b"l", &v.to_be_bytes()).unwrap();
    }
    tx.commit().unwrap();
    let start = overlaid(&db);
    let mut live: std::collections::BTreeSet<u32> = (0..3_000).collect();
    let mut rng = Rng::new(29);
    let mut held = Vec::new();
    for round in 0..1_200 {
        let v = rng.below(3_000) as u32;
        let mut tx = db.begin_write().unwrap();
        assert_eq!(
            tx.delete_dup(&m, b"k", &v.to_be_bytes()).unwrap(),
            live.remove(&v)
        );
        assert_eq!(tx.count_dups(&m, b"k").unwrap(), live.len() as u64);
        tx.commit().unwrap();
        if round % 200 == 0 {
            held.push((db.begin_read().unwrap(), live.len() as u64));
        }
    }
    assert!(overlaid(&db) - start > 500, "{}", overlaid(&db) - start);
    held.push((db.begin_read().unwrap(), live.len() as u64));
    for (n, (rx, count)) in held.iter().enumerate() {
        let m = rx.multimap("m").unwrap();
        assert_eq!(rx.count_dups(&m, b"k").unwrap(), *count, "held {n}");
        assert_eq!(
            rx.get_dups(&m, b"k").unwrap().count() as u64,
            *count,
            "held {n}"
        );
        assert_eq!(rx.count_dups(&m, b"j").unwrap(), 100, "held {n}");
        assert_eq!(rx.count_dups(&m, b"l").unwrap(), 100, "held {n}");
    }
    drop(held);
    db.check().unwrap();
}

/// Tombstones never delete the last entry of a leaf (that delete copies
/// the leaf instead, which then merges or empties as usual): deleting
/// every key of a small tree, one commit each, in random order, keeps
/// every read right down to the empty tree, and `check` clean.
#[test]
fn deleting_every_key_of_a_small_tree_by_single_commits_empties_it() {
    let t = temp_db("empty-out.ib");
    let db = Database::open_with(&t.path, &options()).unwrap();
    let mut tx = db.begin_write().unwrap();
    let tree = tx.open_tree("t").unwrap();
    let mut model = Entries::new();
    for i in 0..150u32 {
        tx.put(&tree, &key(i), &value(i, 0)).unwrap();
        model.insert(key(i).to_vec(), value(i, 0));
    }
    // Another tree makes the file large enough that the arena (bounded
    // by twice the file) holds every copy and overlay made below.
    let pad = tx.open_tree("pad").unwrap();
    for i in 0..20_000u32 {
        tx.put(&pad, &key(i), &value(i, 0)).unwrap();
    }
    tx.commit().unwrap();
    // Every leaf into the arena.
    for i in (0..150u32).step_by(20) {
        let mut tx = db.begin_write().unwrap();
        tx.put(&tree, &key(i), &value(i, 1)).unwrap();
        tx.commit().unwrap();
        model.insert(key(i).to_vec(), value(i, 1));
    }
    let start = overlaid(&db);
    let mut rng = Rng::new(31);
    let mut order: Vec<u32> = (0..150).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i as u64 + 1) as usize);
    }
    for (n, i) in order.into_iter().enumerate() {
        let mut tx = db.begin_write().unwrap();
        assert!(tx.delete(&tree, &key(i)).unwrap());
        tx.commit().unwrap();
        model.remove(key(i).as_slice());
        if n % 10 == 9 || model.len() < 5 {
            // (No `check` here: it checkpoints, sending the leaves back
            // to the file.)
            let rx = db.begin_read().unwrap();
            assert_reads_agree(&rx, &tree, &model, &mut rng, &format!("{n} deleted"));
        }
    }
    db.check().unwrap();
    assert!(overlaid(&db) - start > 100, "{}", overlaid(&db) - start);
    let rx = db.begin_read().unwrap();
    assert_eq!(rx.len(&tree).unwrap(), 0);
    assert_eq!(rx.first(&tree).unwrap(), None);
}

/// The rule itself: in a leaf of three keys, two deletes are tombstones
/// and the third, which would leave no entry, copies the leaf.
#[test]
fn the_last_entry_of_a_leaf_is_never_a_tombstone() {
    let t = temp_db("last-entry.ib");
    let db = Database::open_with(&t.path, &options()).unwrap();
    let mut tx = db.begin_write().unwrap();
    let small = tx.open_tree("small").unwrap();
    for k in [b"a", b"b", b"c"] {
        tx.put(&small, k, b"value").unwrap();
    }
    let pad = tx.open_tree("pad").unwrap();
    for i in 0..20_000u32 {
        tx.put(&pad, &key(i), &value(i, 0)).unwrap();
    }
    tx.commit().unwrap();
    // Another length: the leaf is copied into the arena.
    let mut tx = db.begin_write().unwrap();
    tx.put(&small, b"a", b"longer value").unwrap();
    tx.commit().unwrap();
    let mut counts = vec![overlaid(&db)];
    for k in [b"b", b"a", b"c"] {
        let mut tx = db.begin_write().unwrap();
        assert!(tx.delete(&small, k).unwrap());
        tx.commit().unwrap();
        counts.push(overlaid(&db));
    }
    db.check().unwrap();
    assert_eq!(
        counts.windows(2).map(|w| w[1] - w[0]).collect::<Vec<_>>(),
        [1, 1, 0],
        "two tombstones, then a copy"
    );
    let rx = db.begin_read().unwrap();
    assert_eq!(rx.len(&small).unwrap(), 0);
    assert_eq!(rx.iter(&small).unwrap().count(), 0);
    assert_eq!(rx.get(&small, b"c").unwrap(), None);
}

/// Random small transactions of every kind of write, mostly to keys in
/// published arena leaves (so that most same-size overwrites and deletes
/// become overlay entries), checked against a model: inside each
/// transaction after each change, for snapshots held across hundreds of
/// commits, and after checkpoints and reopens. Savepoints (whose
/// transactions overlay nothing), write cursors, range deletes, pops and
/// aborts are mixed in, so that overlay entries meet every other way a
/// leaf changes.
#[test]
fn random_small_transactions_of_every_write_kind_agree_with_a_model() {
    for seed in [41, 42, 43] {
        random_small_transactions(seed);
    }
}

fn random_small_transactions(seed: u64) {
    use std::ops::Bound::{Excluded, Included, Unbounded};
    let t = temp_db("random.ib");
    let (mut db, mut tree, mut model) = arena_resident_entries(&t.path);
    // Counters are the open database's: summed across reopens.
    let (mut start, mut overlaid_before) = (overlaid(&db), 0);
    let mut rng = Rng::new(seed);
    let mut held: Vec<(ReadTxn, Entries)> = Vec::new();
    let some_key = |rng: &mut Rng, m: &Entries| -> Vec<u8> {
        if !m.is_empty() && rng.chance(70) {
            let i = rng.below(m.len() as u64) as usize;
            m.keys().nth(i).unwrap().clone()
        } else if rng.chance(60) {
            // A key between two of the first fill's: an insert into the
            // middle of a leaf.
            let mut k = key(rng.below(u64::from(KEYS)) as u32).to_vec();
            k.push(rng.below(3) as u8);
            k
        } else {
            key(rng.below(u64::from(KEYS) + 200) as u32).to_vec()
        }
    };
    for round in 0..2_000u32 {
        let what = format!("seed {seed} round {round}");
        let mut tx = db.begin_write().unwrap();
        let mut staged = model.clone();
        let ops = if rng.chance(80) { 1 } else { 2 + rng.below(12) };
        for _ in 0..ops {
            let k = some_key(&mut rng, &staged);
            match rng.below(100) {
                0..=34 => {
                    let len = staged.get(&k).map_or(VALUE_LEN, Vec::len);
                    let v = rng.bytes(len);
                    tx.put(&tree, &k, &v).unwrap();
                    staged.insert(k.clone(), v);
                }
                35..=49 => {
                    let was = staged.remove(&k).is_some();
                    assert_eq!(tx.delete(&tree, &k).unwrap(), was, "{what}: delete");
                }
                50..=57 => {
                    let len = 1 + rng.below(90) as usize;
                    let v = rng.bytes(len);
                    tx.put(&tree, &k, &v).unwrap();
                    staged.insert(k.clone(), v);
                }
                58..=62 => {
                    let len = staged.get(&k).map_or(VALUE_LEN, Vec::len);
                    let v = rng.bytes(len);
                    let old = staged.insert(k.clone(), v.clone());
                    assert_eq!(tx.insert(&tree, &k, &v).unwrap(), old, "{what}: insert");
                }
                63..=65 => {
                    let v = value(round, 7);
                    let want = staged.entry(k.clone()).or_insert(v.clone()).clone();
                    assert_eq!(
                        tx.get_or_insert(&tree, &k, &v).unwrap(),
                        &want[..],
                        "{what}: get_or_insert"
                    );
                }
                66..=68 => {
                    let (got, want) = if rng.chance(50) {
                        let want = staged.pop_first();
                        (tx.pop_first(&tree).unwrap(), want)
                    } else {
                        let want = staged.pop_last();
                        (tx.pop_last(&tree).unwrap(), want)
                    };
                    assert_eq!(got, want, "{what}: pop");
                }
                69..=71 => {
                    let hi = key(u32::from_be_bytes(k[..4].try_into().unwrap())
                        + 1
                        + rng.below(6) as u32)
                    .to_vec();
                    delete_range_in_both(&mut tx, &tree, &mut staged, &k, &hi, &what);
                }
                72..=75 => {
                    let want = staged
                        .range(k.clone()..)
                        .next()
                        .map(|(k, v)| (k.clone(), v.clone()));
                    let mut cursor = tx.cursor_mut(&tree).unwrap();
                    cursor.seek(&k);
                    let got = cursor
                        .next()
                        .unwrap()
                        .map(|(k, v)| (k.to_vec(), v.to_vec()));
                    assert_eq!(got, want, "{what}: write cursor");
                    if let Some((found, old)) = want {
                        if rng.chance(50) {
                            assert!(cursor.delete_current().unwrap(), "{what}: delete_current");
                            staged.remove(&found);
                        } else {
                            let v = rng.bytes(old.len());
                            assert!(cursor.replace_current(&v).unwrap(), "{what}: replace");
                            staged.insert(found, v);
                        }
                    }
                }
                76..=79 => {
                    let sp = tx.savepoint().unwrap();
                    let before = staged.clone();
                    for _ in 0..1 + rng.below(3) {
                        let k = some_key(&mut rng, &staged);
                        if rng.chance(50) {
                            let len = staged.get(&k).map_or(VALUE_LEN, Vec::len);
                            let v = rng.bytes(len);
                            tx.put(&tree, &k, &v).unwrap();
                            staged.insert(k, v);
                        } else {
                            let was = staged.remove(&k).is_some();
                            assert_eq!(tx.delete(&tree, &k).unwrap(), was, "{what}: sp delete");
                        }
                    }
                    if rng.chance(50) {
                        tx.rollback_to(&sp).unwrap();
                        staged = before;
                    } else {
                        tx.release(sp).unwrap();
                    }
                }
                80..=89 => {
                    assert_eq!(
                        tx.get(&tree, &k).unwrap(),
                        staged.get(&k).map(|v| &v[..]),
                        "{what}: get in the transaction"
                    );
                    let pair = |e: Option<(&[u8], &[u8])>| e.map(|(k, v)| (k.to_vec(), v.to_vec()));
                    let owned =
                        |e: Option<(&Vec<u8>, &Vec<u8>)>| e.map(|(k, v)| (k.clone(), v.clone()));
                    assert_eq!(
                        pair(tx.get_gt(&tree, &k).unwrap()),
                        owned(staged.range((Excluded(k.clone()), Unbounded)).next()),
                        "{what}: get_gt in the transaction"
                    );
                    assert_eq!(
                        pair(tx.get_le(&tree, &k).unwrap()),
                        owned(staged.range(..=k.clone()).next_back()),
                        "{what}: get_le in the transaction"
                    );
                }
                _ => {
                    let n = 1 + rng.below(40) as usize;
                    let forward = rng.chance(50);
                    let got: Vec<(Vec<u8>, Vec<u8>)> = if forward {
                        tx.range(&tree, (Included(&k[..]), Unbounded))
                            .unwrap()
                            .take(n)
                            .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
                            .collect()
                    } else {
                        tx.range(&tree, (Unbounded, Included(&k[..])))
                            .unwrap()
                            .rev()
                            .take(n)
                            .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
                            .collect()
                    };
                    let want: Vec<(Vec<u8>, Vec<u8>)> = if forward {
                        staged
                            .range(k.clone()..)
                            .take(n)
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect()
                    } else {
                        staged
                            .range(..=k.clone())
                            .rev()
                            .take(n)
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect()
                    };
                    assert_eq!(got, want, "{what}: scan in the transaction");
                }
            }
        }
        assert_eq!(tx.len(&tree).unwrap(), staged.len() as u64, "{what}: len");
        if rng.chance(12) {
            tx.abort();
        } else {
            tx.commit().unwrap();
            model = staged;
        }
        if round % 60 == 0 {
            held.push((db.begin_read().unwrap(), model.clone()));
            if held.len() > 5 {
                let (rx, m) = held.remove(0);
                assert_reads_agree(&rx, &tree, &m, &mut rng, &format!("{what}: released"));
            }
        }
        if round % 450 == 449 {
            db.checkpoint().unwrap();
        }
        if round % 700 == 699 {
            for (n, (rx, m)) in held.drain(..).enumerate() {
                assert_reads_agree(&rx, &tree, &m, &mut rng, &format!("{what}: held {n}"));
            }
            overlaid_before += overlaid(&db) - start;
            drop(db);
            db = Database::open_with(&t.path, &options()).unwrap();
            start = overlaid(&db);
            db.check().unwrap();
            tree = db.begin_read().unwrap().tree("t").unwrap();
            assert_reads_agree(&db.begin_read().unwrap(), &tree, &model, &mut rng, &what);
        }
    }
    for (n, (rx, m)) in held.iter().enumerate() {
        assert_reads_agree(
            rx,
            &tree,
            m,
            &mut rng,
            &format!("seed {seed}: held {n} at the end"),
        );
    }
    drop(held);
    let total = overlaid_before + overlaid(&db) - start;
    assert!(total > 1_000, "seed {seed}: only {total} changes overlaid");
    db.check().unwrap();
    drop(db);
    assert_reopened_reads_agree(&t.path, &model, &mut rng);
}

/// `put_reserve` and `put_writer` hand out the bytes of the value in a
/// dirty page, so they never take the overlay's path, even for a value
/// that an ordinary put would overlay (a same-size overwrite in a
/// published arena leaf): the bytes written through them are the value
/// every later reader sees. Before session 24 such a reservation was
/// overlaid (a value of zeros), then failed to find its value in a dirty
/// page: `Corrupted`, and the transaction failed.
#[test]
fn reservations_are_never_overlaid() {
    use std::io::Write;
    let t = temp_db("reserve.ib");
    let (db, tree, mut model) = arena_resident_entries(&t.path);
    for round in 0..40u32 {
        let mut tx = db.begin_write().unwrap();
        let overwrite = key(round * 13).to_vec();
        let v = value(round, 9);
        tx.put_reserve(&tree, &overwrite, VALUE_LEN)
            .unwrap()
            .copy_from_slice(&v);
        model.insert(overwrite, v);
        let mut insert = key(round * 17 + 1).to_vec();
        insert.push(7);
        let v = value(round, 10);
        let mut w = tx.put_writer(&tree, &insert, VALUE_LEN).unwrap();
        w.write_all(&v).unwrap();
        w.finish().unwrap();
        model.insert(insert, v);
        tx.commit().unwrap();
    }
    let mut rng = Rng::new(5);
    assert_reads_agree(
        &db.begin_read().unwrap(),
        &tree,
        &model,
        &mut rng,
        "reserved",
    );
    db.check().unwrap();
    drop(db);
    assert_reopened_reads_agree(&t.path, &model, &mut rng);
}

/// A transaction of many same-size overwrites, all overlaid, is a
/// logged commit: its redo record outgrows 16 KiB, but each overlaid
/// change counts as the page it spared, so the record is not dropped
/// for being larger than half its dirty pages (there are none), and the
/// commit writes no page of the data file. Before session 24 the
/// transaction stopped logging there and its commit was a checkpoint.
#[test]
fn a_large_transaction_of_overlaid_overwrites_stays_logged() {
    let t = temp_db("large_overlaid.ib");
    let (db, tree, mut model) = arena_resident(&t.path);
    let before = db.counters();
    // Every fourth key of the first 16 leaves: each overlay keeps room for
    // them, 59 bytes of record each, over 16 KiB in all.
    let keys: Vec<u32> = (0..1_136).step_by(4).collect();
    let mut tx = db.begin_write().unwrap();
    for &i in &keys {
        let v = value(i, 3);
        tx.put(&tree, &key(i), &v).unwrap();
        model.insert(i, v);
    }
    tx.commit().unwrap();
    let after = db.counters();
    let overlaid = after.values_overlaid - before.values_overlaid;
    assert_eq!(overlaid, keys.len() as u64, "not every overwrite overlaid");
    assert_eq!(
        after.logged_commits,
        before.logged_commits + 1,
        "not logged"
    );
    assert_eq!(after.pages_written, before.pages_written, "pages written");
    assert_sees(&db.begin_read().unwrap(), &tree, &model, "after");
    drop(db);
    let db = Database::open_with(&t.path, &options()).unwrap();
    assert_sees(&db.begin_read().unwrap(), &tree, &model, "reopened");
}

/// A transaction that overwrites in every leaf of the tree (more leaves
/// than its undo list keeps inline) overlays them all, and giving it up
/// cuts every one of its entries off: readers, the transactions after it
/// and a reopen see none of them. Until session 24 a transaction
/// overlaid in 16 leaves at most and copied the rest.
#[test]
fn a_transaction_overlaying_in_every_leaf_is_undone_whole() {
    let t = temp_db("many_leaves.ib");
    let (db, tree, mut model) = arena_resident(&t.path);
    let keys: Vec<u32> = (0..KEYS).step_by(6).collect();
    // Given up: by an abort, then by a failed commit's drop.
    for round in 0..2u32 {
        let before = db.counters().values_overlaid;
        let held = db.begin_read().unwrap();
        let mut tx = db.begin_write().unwrap();
        for &i in &keys {
            tx.put(&tree, &key(i), &value(i, 100 + round)).unwrap();
        }
        assert_eq!(
            tx.get(&tree, &key(keys[7])).unwrap(),
            Some(&value(keys[7], 100 + round)[..])
        );
        if round == 0 {
            tx.abort();
        } else {
            drop(tx);
        }
        assert_eq!(db.counters().values_overlaid, before, "round {round}");
        assert_sees(&held, &tree, &model, "held across the abort");
        assert_sees(&db.begin_read().unwrap(), &tree, &model, "after the abort");
    }
    // Other keys of the same leaves, by a transaction of the same txn id
    // as the ones given up: an entry of theirs left uncut would show now.
    let others: Vec<u32> = (3..KEYS).step_by(6).collect();
    let before = db.counters();
    let mut tx = db.begin_write().unwrap();
    for &i in &others {
        let v = value(i, 200);
        tx.put(&tree, &key(i), &v).unwrap();
        model.insert(i, v);
    }
    tx.commit().unwrap();
    let after = db.counters();
    assert_eq!(
        after.values_overlaid - before.values_overlaid,
        others.len() as u64,
        "every overwrite overlaid"
    );
    assert_eq!(after.pages_written, before.pages_written);
    assert_sees(&db.begin_read().unwrap(), &tree, &model, "committed");
    db.check().unwrap();
    drop(db);
    let db = Database::open_with(&t.path, &options()).unwrap();
    assert_sees(&db.begin_read().unwrap(), &tree, &model, "reopened");
}
