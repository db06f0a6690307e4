//! Inserts kept beside their leaves (docs/design.md, "Value overlays",
//! inserts): a put of a key that a committed leaf lacks, where the leaf has
//! room for it, appends the key and its value to the leaf's overlay
//! instead of copying the leaf and its branches. What is checked: such
//! puts are taken (the counter moves), every reader sees exactly its
//! snapshot's keys by every kind of lookup and scan (the merge of a leaf's
//! cells and its inserts, in both directions, across leaves), a
//! transaction given up leaves none of its inserts, a later change of an
//! inserted key (an overwrite, a delete, a range delete, a write cursor)
//! goes through a copy that takes the inserts in, and checkpoints, reopens
//! and crash images (log replay) keep every committed key; `check` passes
//! throughout.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound::{Excluded, Unbounded};

use common::{assert_reads_agree, delete_range_in_both, temp_db, Images, Rng};
use ironbark::{Database, Durability, Options, ReadTxn, Tree};

type Entries = BTreeMap<Vec<u8>, Vec<u8>>;

/// Keys of the first load: `0, 4, 8, ...` below `4 * LOADED`, in a random
/// order, so that its leaves are about two thirds full.
const LOADED: u64 = 4_000;

fn key(i: u64) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

fn options() -> Options {
    Options {
        durability: Durability::None,
        ..Options::default()
    }
}

fn inserts_overlaid(db: &Database) -> u64 {
    db.counters().inserts_overlaid
}

/// A database of `LOADED` keys put in a random order in transactions of
/// 100 and checkpointed: its leaves are file pages with room.
fn loaded(path: &std::path::Path, rng: &mut Rng) -> (Database, Tree, Entries) {
    let db = Database::open_with(path, &options()).unwrap();
    let mut order: Vec<u64> = (0..LOADED).map(|i| 4 * i).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let mut model = Entries::new();
    let mut tx = db.begin_write().unwrap();
    let tree = tx.open_tree("t").unwrap();
    tx.commit().unwrap();
    for chunk in order.chunks(100) {
        let mut tx = db.begin_write().unwrap();
        for &i in chunk {
            let len = 20 + rng.below(40) as usize;
            let v = rng.bytes(len);
            tx.put(&tree, &key(i), &v).unwrap();
            model.insert(key(i), v);
        }
        tx.commit().unwrap();
    }
    db.checkpoint().unwrap();
    (db, tree, model)
}

/// Asserts that `rx` sees exactly `model`, by every lookup and scan,
/// for keys around and between the loaded ones.
fn assert_sees(rx: &ReadTxn, tree: &Tree, model: &Entries, rng: &mut Rng, what: &str) {
    assert_reads_agree(rx, tree, model, key, 4 * LOADED + 8, 300, rng, what);
}

/// Single-put inserts between the loaded keys (their leaves are file
/// pages with room, then arena pages with overlays): they are taken as
/// inserts, and each snapshot held along the way sees exactly its keys,
/// before and after a checkpoint takes them into the leaves, and after a
/// reopen.
#[test]
fn inserts_are_kept_beside_their_leaves_and_each_snapshot_sees_its_own_keys() {
    let t = temp_db("inserts.ib");
    let mut rng = Rng::new(1);
    let (db, tree, mut model) = loaded(&t.path, &mut rng);
    let start = inserts_overlaid(&db);
    let mut held: Vec<(ReadTxn, Entries)> = Vec::new();
    for round in 0..1_500u64 {
        let i = 4 * rng.below(LOADED) + 1 + rng.below(3);
        let len = 1 + rng.below(60) as usize;
        let v = rng.bytes(len);
        let mut tx = db.begin_write().unwrap();
        tx.put(&tree, &key(i), &v).unwrap();
        tx.commit().unwrap();
        model.insert(key(i), v);
        if round % 300 == 150 {
            held.push((db.begin_read().unwrap(), model.clone()));
        }
    }
    let taken = inserts_overlaid(&db) - start;
    assert!(
        taken > 1_000,
        "{taken} of 1,500 inserts kept beside their leaves"
    );
    for (n, (rx, m)) in held.iter().enumerate() {
        assert_sees(rx, &tree, m, &mut rng, &format!("snapshot {n}"));
    }
    let rx = db.begin_read().unwrap();
    assert_sees(&rx, &tree, &model, &mut rng, "newest");
    db.check().unwrap();
    db.checkpoint().unwrap();
    for (n, (rx, m)) in held.iter().enumerate() {
        assert_sees(
            rx,
            &tree,
            m,
            &mut rng,
            &format!("snapshot {n}, after a checkpoint"),
        );
    }
    assert_sees(&rx, &tree, &model, &mut rng, "newest, after a checkpoint");
    drop(rx);
    held.clear();
    assert_eq!(db.check().unwrap().entries, model.len() as u64);
    drop(db);
    let db = Database::open_with(&t.path, &options()).unwrap();
    let rx = db.begin_read().unwrap();
    assert_sees(&rx, &rx.tree("t").unwrap(), &model, &mut rng, "reopened");
    drop(rx);
    db.check().unwrap();
}

/// Inserts of a transaction given up never show, to its successors or to
/// readers; the transaction's own reads see them while it lives.
#[test]
fn inserts_of_a_transaction_given_up_never_show() {
    let t = temp_db("aborted.ib");
    let mut rng = Rng::new(2);
    let (db, tree, mut model) = loaded(&t.path, &mut rng);
    for round in 0..400u64 {
        let start = inserts_overlaid(&db);
        let mut tx = db.begin_write().unwrap();
        let mut staged = model.clone();
        for _ in 0..1 + rng.below(4) {
            let i = 4 * rng.below(LOADED) + 1 + rng.below(3);
            let v = rng.bytes(8);
            tx.put(&tree, &key(i), &v).unwrap();
            staged.insert(key(i), v);
        }
        // The transaction's own view: every key it put, in order.
        let keys: Vec<Vec<u8>> = tx
            .iter(&tree)
            .unwrap()
            .map(|e| e.map(|(k, _)| k.to_vec()).unwrap())
            .collect();
        assert!(keys.iter().eq(staged.keys()), "round {round}: own view");
        if round % 2 == 0 {
            drop(tx);
            assert_eq!(inserts_overlaid(&db), start, "round {round}");
        } else {
            tx.commit().unwrap();
            model = staged;
        }
    }
    let rx = db.begin_read().unwrap();
    assert_sees(&rx, &tree, &model, &mut rng, "after aborts");
    drop(rx);
    db.check().unwrap();
}

/// Every other write on keys its overlay inserted, and on their
/// neighbours: overwrites of the same and of another length, deletes, range
/// deletes, write cursors, `insert` and pops. Each goes the usual way,
/// through a copy of the leaf that takes the inserts in; readers of older
/// snapshots keep theirs.
#[test]
fn changes_of_inserted_keys_agree_with_a_model() {
    let t = temp_db("changes.ib");
    let mut rng = Rng::new(3);
    let (db, tree, mut model) = loaded(&t.path, &mut rng);
    let start = inserts_overlaid(&db);
    let mut held: Vec<(ReadTxn, Entries)> = Vec::new();
    for round in 0..3_000u64 {
        let what = format!("round {round}");
        let mut tx = db.begin_write().unwrap();
        let mut staged = model.clone();
        let ops = if rng.chance(80) { 1 } else { 2 + rng.below(6) };
        for _ in 0..ops {
            let i = 4 * rng.below(LOADED) + rng.below(4);
            let k = key(i);
            match rng.below(100) {
                0..=49 => {
                    let len = staged.get(&k).map_or(1 + rng.below(50) as usize, Vec::len);
                    let len = if rng.chance(20) {
                        1 + rng.below(50) as usize
                    } else {
                        len
                    };
                    let v = rng.bytes(len);
                    tx.put(&tree, &k, &v).unwrap();
                    staged.insert(k, v);
                }
                50..=69 => {
                    let was = staged.remove(&k).is_some();
                    assert_eq!(tx.delete(&tree, &k).unwrap(), was, "{what}: delete");
                }
                70..=74 => {
                    let hi = key(i + 1 + rng.below(6));
                    delete_range_in_both(&mut tx, &tree, &mut staged, &k, &hi, &what);
                }
                75..=84 => {
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
                    // On to the next entry, which may be an insert too.
                    let after = want.as_ref().and_then(|(found, _)| {
                        staged
                            .range((Excluded(found.clone()), Unbounded))
                            .next()
                            .map(|(k, v)| (k.clone(), v.clone()))
                    });
                    let next = cursor
                        .next()
                        .unwrap()
                        .map(|(k, v)| (k.to_vec(), v.to_vec()));
                    assert_eq!(next, after, "{what}: write cursor's next");
                    if let Some((found, _)) = after {
                        if rng.chance(50) {
                            assert!(cursor.delete_current().unwrap(), "{what}: delete_current");
                            staged.remove(&found);
                        } else {
                            let v = rng.bytes(5);
                            assert!(cursor.replace_current(&v).unwrap(), "{what}: replace");
                            staged.insert(found, v);
                        }
                    }
                }
                85..=89 => {
                    let v = rng.bytes(9);
                    let old = staged.insert(k.clone(), v.clone());
                    assert_eq!(tx.insert(&tree, &k, &v).unwrap(), old, "{what}: insert");
                }
                90..=94 => {
                    let got = tx.get(&tree, &k).unwrap().map(<[u8]>::to_vec);
                    assert_eq!(got, staged.get(&k).cloned(), "{what}: own get");
                }
                _ => {
                    let (got, want) = if rng.chance(50) {
                        (tx.pop_first(&tree).unwrap(), staged.pop_first())
                    } else {
                        (tx.pop_last(&tree).unwrap(), staged.pop_last())
                    };
                    assert_eq!(got, want, "{what}: pop");
                }
            }
        }
        if rng.chance(10) {
            drop(tx);
        } else {
            tx.commit().unwrap();
            model = staged;
        }
        if round % 500 == 250 {
            held.push((db.begin_read().unwrap(), model.clone()));
        }
        if round % 1_000 == 999 {
            db.checkpoint().unwrap();
        }
    }
    assert!(
        inserts_overlaid(&db) - start > 300,
        "{} inserts kept beside their leaves",
        inserts_overlaid(&db) - start
    );
    for (n, (rx, m)) in held.iter().enumerate() {
        assert_sees(rx, &tree, m, &mut rng, &format!("snapshot {n}"));
    }
    held.clear();
    let rx = db.begin_read().unwrap();
    assert_sees(&rx, &tree, &model, &mut rng, "newest");
    drop(rx);
    assert_eq!(db.check().unwrap().entries, model.len() as u64);
    drop(db);
    let db = Database::open_with(&t.path, &options()).unwrap();
    let rx = db.begin_read().unwrap();
    assert_sees(&rx, &rx.tree("t").unwrap(), &model, &mut rng, "reopened");
}

/// The files as a crash leaves them, every commit in the log and no
/// insert in a leaf of the data file: the replay puts every key back.
#[test]
fn a_crash_image_replays_inserts() {
    let t = temp_db("crash.ib");
    let mut rng = Rng::new(4);
    let (db, tree, mut model) = loaded(&t.path, &mut rng);
    let start = inserts_overlaid(&db);
    let mut images = Vec::new();
    for round in 0..600u64 {
        let mut tx = db.begin_write().unwrap();
        if round % 50 == 0 {
            tx.set_durability(Durability::Immediate);
        }
        for _ in 0..1 + rng.below(3) {
            let i = 4 * rng.below(LOADED) + 1 + rng.below(3);
            let v = rng.bytes(12);
            tx.put(&tree, &key(i), &v).unwrap();
            model.insert(key(i), v);
        }
        tx.commit().unwrap();
        if round % 200 == 199 {
            images.push((Images::read(&t.path), model.clone()));
        }
    }
    assert!(inserts_overlaid(&db) - start > 500);
    drop(db);
    for (n, (image, m)) in images.iter().enumerate() {
        let c = temp_db("image.ib");
        image.write(&c.path);
        let db = Database::open_with(&c.path, &options()).unwrap();
        let rx = db.begin_read().unwrap();
        assert_sees(
            &rx,
            &rx.tree("t").unwrap(),
            m,
            &mut rng,
            &format!("crash image {n}"),
        );
        drop(rx);
        db.check().unwrap();
    }
}
