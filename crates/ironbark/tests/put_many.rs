//! `WriteTxn::put_many`: a batch of puts whose descents are walked
//! together, a level at a time, before the puts are made (each put then
//! takes the leaf the walk found while no put of the batch has copied
//! that leaf since: `txn::leaf_hints::LeafHint::holds`, asserted against a
//! fresh descent in debug builds). What is checked: a batch stores exactly
//! what the same puts one at a time store, in every state a tree passes
//! through (file leaves, arena leaves, overlays with values and inserts,
//! leaves a batch copies and splits, a tree that grows a level, duplicate
//! keys in a batch, savepoints, checkpoints, reopens); a bad pair stops
//! the batch with the pairs before it stored; damaged pages are reported
//! as errors, never a panic.

mod common;

use std::collections::BTreeMap;

use common::{assert_reads_agree, temp_db, Rng};
use ironbark::{Database, Durability, Error, Options, Tree};

type Entries = BTreeMap<Vec<u8>, Vec<u8>>;

fn key(i: u64) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

/// Keys are drawn from `0..SPAN`: batches overwrite, insert between and
/// around existing keys, and repeat keys.
const SPAN: u64 = 12_000;

/// A random batch of `n` pairs: mostly new or overwritten keys with values
/// of a few lengths (same-length overwrites go to overlays, others copy
/// their leaf), some keys repeated within the batch.
/// The depth of tree `name` (`Database::stats`).
fn depth(db: &Database, name: &str) -> u32 {
    let stats = db.stats().unwrap();
    stats.trees.iter().find(|t| t.name == name).unwrap().depth
}

fn batch(rng: &mut Rng, n: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut pairs: Vec<(Vec<u8>, Vec<u8>)> = Vec::with_capacity(n);
    for _ in 0..n {
        let k = if !pairs.is_empty() && rng.chance(8) {
            pairs[rng.below(pairs.len() as u64) as usize].0.clone()
        } else {
            key(rng.below(SPAN))
        };
        let len = [8, 8, 8, 30, 100][rng.below(5) as usize];
        pairs.push((k, rng.bytes(len)));
    }
    pairs
}

/// Two trees fed the same changes, one by `put_many`, the other by `put`
/// one pair at a time, through a thousand transactions of batches, single
/// deletes, savepoints rolled back and kept, checkpoints and a reopen:
/// after every commit both trees, and the model, hold the same entries
/// by every kind of read, and `check` passes.
#[test]
fn a_batch_stores_what_its_puts_one_at_a_time_store() {
    for durability in [Durability::None, Durability::Immediate] {
        let t = temp_db("many.ib");
        let options = Options {
            durability,
            ..Options::default()
        };
        let mut db = Database::open_with(&t.path, &options).unwrap();
        let mut rng = Rng::new(42);
        let mut model = Entries::new();
        let (mut batched, mut single): (Tree, Tree) = {
            let mut tx = db.begin_write().unwrap();
            let trees = (
                tx.open_tree("batched").unwrap(),
                tx.open_tree("single").unwrap(),
            );
            tx.commit().unwrap();
            trees
        };
        let mut logged_before = db.counters().logged_commits;
        for round in 0..1_000u64 {
            let mut tx = db.begin_write().unwrap();
            let mut staged = model.clone();
            let batches = 1 + rng.below(3);
            for _ in 0..batches {
                // Sizes around the look ahead's 16 keys, and large batches
                // early on, so that the tree grows levels under them.
                let n = if round < 40 {
                    200 + rng.below(400) as usize
                } else {
                    rng.below(50) as usize
                };
                let pairs = batch(&mut rng, n);
                let savepoint = if rng.chance(5) {
                    Some(tx.savepoint().unwrap())
                } else {
                    None
                };
                tx.put_many(&batched, pairs.iter().map(|(k, v)| (k, v)))
                    .unwrap();
                for (k, v) in &pairs {
                    tx.put(&single, k, v).unwrap();
                }
                match savepoint {
                    Some(sp) if rng.chance(50) => tx.rollback_to(&sp).unwrap(),
                    _ => {
                        for (k, v) in pairs {
                            staged.insert(k, v);
                        }
                    }
                }
                // The transaction reads what its batch stored.
                for _ in 0..4 {
                    let k = key(rng.below(SPAN));
                    let want = staged.get(&k).map(|v| &v[..]);
                    assert_eq!(tx.get(&batched, &k).unwrap(), want, "round {round}");
                    assert_eq!(tx.get(&single, &k).unwrap(), want, "round {round}");
                }
            }
            if rng.chance(30) {
                let k = key(rng.below(SPAN));
                let a = tx.delete(&batched, &k).unwrap();
                let b = tx.delete(&single, &k).unwrap();
                assert_eq!((a, b), (staged.remove(&k).is_some(), a), "round {round}");
            }
            tx.commit().unwrap();
            model = staged;
            if round % 97 == 96 {
                db.checkpoint().unwrap();
            }
            if round % 100 == 99 {
                let rx = db.begin_read().unwrap();
                let what = format!("{durability:?}, round {round}");
                assert_reads_agree(&rx, &batched, &model, key, SPAN, 50, &mut rng, &what);
                assert_reads_agree(&rx, &single, &model, key, SPAN, 50, &mut rng, &what);
                drop(rx);
                db.check().unwrap();
            }
            if round == 500 {
                drop(db);
                db = Database::open_with(&t.path, &options).unwrap();
                let rx = db.begin_read().unwrap();
                batched = rx.tree("batched").unwrap();
                single = rx.tree("single").unwrap();
                // Counters count from the open.
                logged_before = db.counters().logged_commits;
            }
        }
        assert!(
            db.counters().logged_commits > logged_before + 400,
            "{durability:?}: the batches were not logged: the look ahead never ran"
        );
        let rx = db.begin_read().unwrap();
        assert!(
            rx.len(&batched).unwrap() > SPAN / 2,
            "the keys filled the span"
        );
        assert!(depth(&db, "batched") >= 3, "the tree grew past two levels");
    }
}

/// A pair the tree refuses (a key over the limit) stops the batch with an
/// error: the pairs before it are stored, those after it are not, and the
/// transaction goes on and commits them.
#[test]
fn a_bad_pair_stops_the_batch_after_the_pairs_before_it() {
    let t = temp_db("bad.ib");
    let db = Database::open(&t.path).unwrap();
    let mut tx = db.begin_write().unwrap();
    let tree = tx.open_tree("t").unwrap();
    let mut pairs: Vec<(Vec<u8>, Vec<u8>)> = (0..40).map(|i| (key(i), b"v".to_vec())).collect();
    pairs[25].0 = vec![b'k'; 100_000];
    let err = tx
        .put_many(&tree, pairs.iter().map(|(k, v)| (k, v)))
        .unwrap_err();
    assert!(matches!(err, Error::KeyTooLarge { .. }), "{err:?}");
    tx.commit().unwrap();
    let rx = db.begin_read().unwrap();
    assert_eq!(rx.len(&tree).unwrap(), 25);
    for i in 0..40 {
        assert_eq!(rx.contains_key(&tree, &key(i)).unwrap(), i < 25, "key {i}");
    }
}

/// Every page of a file whose tree is three levels deep, damaged in its
/// slot array in turn: a batch of puts over the whole key range returns
/// an error or stores its pairs, and never panics (the look ahead reads
/// the damaged pages before any put does).
#[test]
fn a_batch_over_damaged_pages_fails_cleanly() {
    let t = temp_db("damaged.ib");
    let options = Options {
        page_size: 1024,
        durability: Durability::None,
        ..Options::default()
    };
    {
        let db = Database::open_with(&t.path, &options).unwrap();
        let mut tx = db.begin_write().unwrap();
        let tree = tx.open_tree("t").unwrap();
        for i in 0..3_000 {
            tx.put(&tree, &key(i * 2), b"value").unwrap();
        }
        tx.commit().unwrap();
        assert!(depth(&db, "t") >= 3);
    }
    let image = std::fs::read(&t.path).unwrap();
    let pages = image.len() / 1024;
    let mut rng = Rng::new(9);
    let (mut failed, mut stored) = (0, 0);
    for page in 2..pages {
        let mut bad = image.clone();
        // Past the 32-byte header: the slot array and the cells.
        bad[page * 1024 + 40] ^= 0x5A;
        bad[page * 1024 + 41] ^= 0xA5;
        std::fs::write(&t.path, &bad).unwrap();
        let _ = std::fs::remove_file(common::log_path(&t.path));
        let db = match Database::open_with(&t.path, &options) {
            Ok(db) => db,
            Err(_) => {
                failed += 1;
                continue;
            }
        };
        let result = (|| -> ironbark::Result<()> {
            let mut tx = db.begin_write()?;
            let tree = tx.tree("t")?;
            let pairs = batch(&mut rng, 64);
            tx.put_many(&tree, pairs.iter().map(|(k, v)| (k, v)))?;
            tx.commit()
        })();
        match result {
            Ok(()) => stored += 1,
            Err(_) => failed += 1,
        }
    }
    assert!(
        failed > 0,
        "no damage was reported ({stored} batches stored)"
    );
}
