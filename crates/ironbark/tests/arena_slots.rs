//! Dirty pages placed early in arena slots (`DirtyPages::lend_slots`): a
//! transaction that may be logged copies the pages it changes straight
//! into slots of the page arena, which a logged commit publishes in place.
//! Every other end of such a transaction must give the slots back and
//! leave no trace: an abort, a rollback to a savepoint, a commit that turns
//! into a checkpoint (a record too large to log), a transaction that
//! spills. Random transactions of each kind run against a
//! model; after each one the database equals the model, a reader's
//! snapshot taken earlier still reads what it read (a slot it can reach
//! was not lent and written), and `check` finds no damage, before and
//! after reopening.

mod common;

use std::collections::BTreeMap;

use common::{model_of, read_model, temp_db, Model, Rng};
use ironbark::{Database, Durability, Options, ReadTxn, Tree, WriteTxn};

const TREE: &str = "t";

fn options(max_dirty_bytes: usize) -> Options {
    Options {
        durability: Durability::None,
        logged_commits: true,
        max_dirty_bytes,
        ..Options::default()
    }
}

fn key(rng: &mut Rng) -> Vec<u8> {
    format!("key{:06}", rng.below(4000)).into_bytes()
}

fn value(rng: &mut Rng) -> Vec<u8> {
    let n = match rng.below(20) {
        0 => 1000 + rng.below(3000) as usize,
        1 => 0,
        _ => 20 + rng.below(100) as usize,
    };
    rng.bytes(n)
}

/// `n` random puts and deletes, applied to `tx` and to `m`.
fn change(
    tx: &mut WriteTxn<'_>,
    tree: &Tree,
    m: &mut BTreeMap<Vec<u8>, Vec<u8>>,
    rng: &mut Rng,
    n: usize,
) {
    for _ in 0..n {
        let k = key(rng);
        if rng.chance(20) {
            let was = tx.delete(tree, &k).unwrap();
            assert_eq!(was, m.remove(&k).is_some());
        } else {
            let v = value(rng);
            tx.put(tree, &k, &v).unwrap();
            m.insert(k, v);
        }
    }
}

fn model(entries: &BTreeMap<Vec<u8>, Vec<u8>>) -> Model {
    let mut m = Model::new();
    m.insert(TREE.to_string(), entries.clone());
    m
}

fn run(seed: u64, max_dirty_bytes: usize) {
    let t = temp_db("slots.ib");
    let db = Database::open_with(&t.path, &options(max_dirty_bytes)).unwrap();
    let mut rng = Rng::new(seed);
    let mut m = BTreeMap::new();
    let mut tx = db.begin_write().unwrap();
    let tree = tx.open_tree(TREE).unwrap();
    change(&mut tx, &tree, &mut m, &mut rng, 3000);
    tx.commit().unwrap();
    let logged_before = db.stats().unwrap().counters.logged_commits;
    // Readers pinned at earlier commits, with what they must keep reading.
    let mut readers: Vec<(ReadTxn, Model)> = Vec::new();
    let mut kinds = [0u32; 7];
    for step in 0..300 {
        let kind = rng.below(7) as usize;
        kinds[kind] += 1;
        let mut tx = db.begin_write().unwrap();
        let mut next = m.clone();
        match kind {
            // A small transaction: a logged commit of early-placed pages.
            0 | 1 => {
                let n = 1 + rng.below(30) as usize;
                change(&mut tx, &tree, &mut next, &mut rng, n);
                tx.commit().unwrap();
                m = next;
            }
            // Aborted: its slots come back, nothing is published.
            2 => {
                let n = 1 + rng.below(50) as usize;
                change(&mut tx, &tree, &mut next, &mut rng, n);
                if rng.chance(50) {
                    tx.abort();
                } else {
                    drop(tx);
                }
            }
            // Savepoints: the pages made after one go back to the
            // transaction's slots; the commit is logged.
            3 => {
                let n = 1 + rng.below(10) as usize;
                change(&mut tx, &tree, &mut next, &mut rng, n);
                let kept = next.clone();
                let sp = tx.savepoint().unwrap();
                let n = 1 + rng.below(40) as usize;
                change(&mut tx, &tree, &mut next, &mut rng, n);
                tx.rollback_to(&sp).unwrap();
                next = kept;
                let n = rng.below(10) as usize;
                change(&mut tx, &tree, &mut next, &mut rng, n);
                if rng.chance(20) {
                    tx.abort();
                } else {
                    tx.release(sp).unwrap();
                    tx.commit().unwrap();
                    m = next;
                }
            }
            // Too large a record to log: a checkpoint written from pages
            // that lie in lent slots (and heap buffers past the lending
            // bound), whose slots then come back.
            4 => {
                for _ in 0..2500 {
                    let k = key(&mut rng);
                    let v = rng.bytes(150);
                    tx.put(&tree, &k, &v).unwrap();
                    next.insert(k, v);
                }
                tx.commit().unwrap();
                m = next;
            }
            // A reader pinned here (dropped later), and a small commit.
            5 => {
                if readers.len() < 4 {
                    let rx = db.begin_read().unwrap();
                    let seen = model_of(&rx).unwrap();
                    readers.push((rx, seen));
                } else {
                    let (rx, seen) = readers.remove(rng.below(4) as usize);
                    assert_eq!(
                        model_of(&rx).unwrap(),
                        seen,
                        "step {step}: a reader's snapshot changed"
                    );
                }
                change(&mut tx, &tree, &mut next, &mut rng, 3);
                tx.commit().unwrap();
                m = next;
            }
            // A forced checkpoint between small commits.
            _ => {
                change(&mut tx, &tree, &mut next, &mut rng, 2);
                tx.commit().unwrap();
                m = next;
                if rng.chance(50) {
                    db.checkpoint().unwrap();
                } else {
                    assert!(db.check().unwrap().is_clean(), "step {step}");
                }
            }
        }
        let (_, got) = read_model(&db).unwrap();
        assert_eq!(got, model(&m), "step {step} (kind {kind})");
        for (rx, seen) in &readers {
            assert_eq!(
                &model_of(rx).unwrap(),
                seen,
                "step {step}: a reader's snapshot changed"
            );
        }
    }
    assert!(kinds.iter().all(|&k| k > 0), "every kind ran: {kinds:?}");
    let stats = db.stats().unwrap().counters;
    assert!(
        stats.logged_commits > logged_before + 50,
        "few logged commits: {}",
        stats.logged_commits - logged_before
    );
    drop(readers);
    assert!(db.check().unwrap().is_clean());
    drop(db);
    let db = Database::open_with(&t.path, &options(max_dirty_bytes)).unwrap();
    assert_eq!(read_model(&db).unwrap().1, model(&m), "after reopening");
    assert!(db.check().unwrap().is_clean());
}

#[test]
fn early_placed_pages_survive_aborts_rollbacks_and_checkpoints() {
    run(7, Options::default().max_dirty_bytes);
}

#[test]
fn early_placed_pages_survive_spilling_transactions() {
    // A budget of 64 pages: the large transactions spill, with pages in
    // lent slots among those spilled.
    run(11, 64 * 4096);
}
