//! Model-based test: random operations on several trees, checked against a
//! `BTreeMap` model after every step, with commits, aborts, reopens and tree
//! drops, over the whole range of key and value sizes.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;

use common::{temp_db, Rng};
use ironbark::{Database, Durability, Options};

type Model = BTreeMap<String, BTreeMap<Vec<u8>, Vec<u8>>>;

const TREES: [&str; 3] = ["alpha", "beta", "gamma"];

fn key(rng: &mut Rng, max_key: usize) -> Vec<u8> {
    match rng.below(20) {
        0 => Vec::new(),
        1 => rng.bytes(max_key),
        2 => {
            let n = rng.below(max_key as u64 + 1) as usize;
            rng.bytes(n)
        }
        // A small key space so that overwrites and deletes hit.
        _ => format!("k{:05}", rng.below(3000)).into_bytes(),
    }
}

fn value(rng: &mut Rng, page_size: usize) -> Vec<u8> {
    match rng.below(30) {
        0 => Vec::new(),
        1 => {
            let n = page_size * 3 + rng.below(page_size as u64) as usize;
            rng.bytes(n)
        }
        2 => {
            let n = page_size / 2 + rng.below(page_size as u64) as usize;
            rng.bytes(n)
        }
        _ => {
            let n = rng.below(120) as usize;
            rng.bytes(n)
        }
    }
}

fn bound(rng: &mut Rng, max_key: usize) -> Bound<Vec<u8>> {
    match rng.below(3) {
        0 => Bound::Unbounded,
        1 => Bound::Included(key(rng, max_key)),
        _ => Bound::Excluded(key(rng, max_key)),
    }
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k.as_slice()),
        Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

fn valid_range(lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> bool {
    // BTreeMap::range panics on inverted or empty-excluded ranges.
    match (lo, hi) {
        (Bound::Included(a), Bound::Included(b)) => a <= b,
        (Bound::Included(a), Bound::Excluded(b)) | (Bound::Excluded(a), Bound::Included(b)) => {
            a <= b
        }
        (Bound::Excluded(a), Bound::Excluded(b)) => a < b,
        _ => true,
    }
}

fn verify_all(db: &Database, model: &Model) {
    let rx = db.begin_read().unwrap();
    let names: Vec<String> = model.keys().cloned().collect();
    assert_eq!(rx.list_trees(), names);
    for (name, m) in model {
        let t = rx.tree(name).unwrap();
        assert_eq!(rx.len(&t).unwrap(), m.len() as u64, "tree {name}");
        let got: Vec<(Vec<u8>, Vec<u8>)> = rx
            .iter(&t)
            .unwrap()
            .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
            .collect();
        let want: Vec<(Vec<u8>, Vec<u8>)> = m.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        assert!(got == want, "tree {name}: full scan differs from the model");
    }
}

fn run(seed: u64, page_size: usize, steps: usize) {
    let t = temp_db("model.ib");
    let options = Options {
        page_size,
        durability: Durability::None,
        ..Options::default()
    };
    let mut db = Database::open_with(&t.path, &options).unwrap();
    let max_key = db.max_key_len();
    let mut rng = Rng::new(seed);
    let mut committed: Model = Model::new();
    let mut step = 0;
    while step < steps {
        let mut model = committed.clone();
        let mut tx = db.begin_write().unwrap();
        let ops = 1 + rng.below(60) as usize;
        for _ in 0..ops {
            step += 1;
            let name = TREES[rng.below(TREES.len() as u64) as usize];
            match rng.below(100) {
                0..=44 => {
                    let tree = tx.open_tree(name).unwrap();
                    let (k, v) = (key(&mut rng, max_key), value(&mut rng, page_size));
                    tx.put(&tree, &k, &v).unwrap();
                    model.entry(name.to_string()).or_default().insert(k, v);
                }
                45..=64 => {
                    let tree = tx.open_tree(name).unwrap();
                    let m = model.entry(name.to_string()).or_default();
                    // Delete an existing key most of the time.
                    let k = if !m.is_empty() && rng.chance(80) {
                        let i = rng.below(m.len() as u64) as usize;
                        m.keys().nth(i).unwrap().clone()
                    } else {
                        key(&mut rng, max_key)
                    };
                    let existed = m.remove(&k).is_some();
                    assert_eq!(
                        tx.delete(&tree, &k).unwrap(),
                        existed,
                        "seed {seed} step {step}"
                    );
                }
                65..=79 => {
                    if let Some(m) = model.get(name) {
                        let tree = tx.tree(name).unwrap();
                        let k = key(&mut rng, max_key);
                        assert_eq!(
                            tx.get(&tree, &k).unwrap(),
                            m.get(&k).map(Vec::as_slice),
                            "seed {seed} step {step}"
                        );
                    }
                }
                80..=91 => {
                    if let Some(m) = model.get(name) {
                        let tree = tx.tree(name).unwrap();
                        let (lo, hi) = (bound(&mut rng, max_key), bound(&mut rng, max_key));
                        if !valid_range(&lo, &hi) {
                            continue;
                        }
                        let want: Vec<(&[u8], &[u8])> = m
                            .range::<Vec<u8>, _>((lo.clone(), hi.clone()))
                            .map(|(k, v)| (k.as_slice(), v.as_slice()))
                            .collect();
                        let range = tx.range(&tree, (as_ref(&lo), as_ref(&hi))).unwrap();
                        if rng.chance(50) {
                            let got: Vec<_> = range.map(Result::unwrap).collect();
                            assert!(got == want, "seed {seed} step {step}: forward range");
                        } else {
                            let got: Vec<_> = range.rev().map(Result::unwrap).collect();
                            let want: Vec<_> = want.into_iter().rev().collect();
                            assert!(got == want, "seed {seed} step {step}: reverse range");
                        }
                    }
                }
                92..=93 if rng.chance(5) => {
                    let existed = model.remove(name).is_some();
                    assert_eq!(tx.drop_tree(name).unwrap(), existed);
                }
                _ => {
                    // Interleaved iteration from both ends meets in the middle.
                    if let Some(m) = model.get(name) {
                        let tree = tx.tree(name).unwrap();
                        let mut it = tx.iter(&tree).unwrap();
                        let mut front = Vec::new();
                        let mut back = Vec::new();
                        loop {
                            let e = if rng.chance(50) {
                                it.next().map(|e| (true, e))
                            } else {
                                it.next_back().map(|e| (false, e))
                            };
                            match e {
                                Some((true, e)) => front.push(e.unwrap().0.to_vec()),
                                Some((false, e)) => back.push(e.unwrap().0.to_vec()),
                                None => break,
                            }
                        }
                        back.reverse();
                        front.extend(back);
                        let want: Vec<Vec<u8>> = m.keys().cloned().collect();
                        assert!(
                            front == want,
                            "seed {seed} step {step}: two-ended iteration"
                        );
                    }
                }
            }
        }
        match rng.below(10) {
            0 => drop(tx), // abort
            _ => {
                if rng.chance(10) {
                    tx.set_durability(Durability::Immediate);
                }
                tx.commit().unwrap();
                committed = model;
            }
        }
        if rng.chance(5) {
            drop(db);
            db = Database::open_with(&t.path, &options).unwrap();
        }
        verify_all(&db, &committed);
        if rng.chance(20) {
            db.check()
                .unwrap_or_else(|e| panic!("seed {seed} step {step}: check failed: {e}"));
        }
    }
    let report = db.check().unwrap();
    let stats = db.stats().unwrap();
    eprintln!(
        "seed {seed}: {steps} steps, {report:?}, depth {:?}",
        stats.trees.iter().map(|t| t.depth).collect::<Vec<_>>()
    );
    assert!(
        report.entries > 0,
        "the workload left no data: it tested nothing"
    );
}

#[test]
fn model_small_pages() {
    for seed in 0..4 {
        run(seed, 1024, 15_000);
    }
}

#[test]
fn model_default_pages() {
    for seed in 100..103 {
        run(seed, 4096, 15_000);
    }
}

#[test]
fn model_large_pages() {
    run(200, 16384, 10_000);
}
