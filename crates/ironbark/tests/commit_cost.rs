//! What a small commit costs must not depend on what the file holds: the
//! bytes and pages a single-put commit writes stay flat (within 20%) as the
//! free space fragments into 100 to 100,000 extents and as the catalog grows
//! from 1 to 10,000 trees. (Before the state chain, every commit rewrote the
//! whole catalog and free-space map.)

mod common;

use common::temp_db;
use ironbark::{Database, Durability, Options};

/// Average bytes and pages written per commit over `commits` single-put
/// commits into the small tree `hot`.
fn single_put_cost(db: &Database, commits: u64) -> (f64, f64) {
    let before = db.stats().unwrap().counters;
    for i in 0..commits {
        let mut tx = db.begin_write().unwrap();
        let hot = tx.open_tree("hot").unwrap();
        tx.put(&hot, &(i % 64).to_be_bytes(), &i.to_le_bytes())
            .unwrap();
        tx.commit().unwrap();
    }
    let after = db.stats().unwrap().counters;
    assert_eq!(after.commits - before.commits, commits);
    let n = commits as f64;
    (
        (after.bytes_written - before.bytes_written) as f64 / n,
        (after.pages_written - before.pages_written) as f64 / n,
    )
}

fn assert_flat(what: &str, costs: &[(u64, (f64, f64))]) {
    eprintln!("{what}: (level, bytes/commit, pages/commit) {costs:?}");
    for pick in [|c: (f64, f64)| c.0, |c: (f64, f64)| c.1] {
        let values: Vec<f64> = costs.iter().map(|(_, c)| pick(*c)).collect();
        let min = values.iter().cloned().fold(f64::MAX, f64::min);
        let max = values.iter().cloned().fold(0.0, f64::max);
        assert!(
            max <= min * 1.2,
            "{what}: a single-put commit costs {min:.1} to {max:.1}: {costs:?}"
        );
    }
}

fn options(page_size: usize) -> Options {
    Options {
        page_size,
        durability: Durability::None,
        ..Options::default()
    }
}

#[test]
fn single_put_commits_cost_the_same_with_100_to_100000_free_extents() {
    let t = temp_db("extents.ib");
    // 1 KiB pages: a 600-byte value is a one-page overflow run, so every
    // other key deleted leaves a one-page hole.
    let db = Database::open_with(&t.path, &options(1024)).unwrap();
    const KEYS: u64 = 200_000;
    let value = [7u8; 600];
    for batch in 0..KEYS / 10_000 {
        let mut tx = db.begin_write().unwrap();
        let bulk = tx.open_tree("bulk").unwrap();
        for i in batch * 10_000..(batch + 1) * 10_000 {
            tx.put(&bulk, &i.to_be_bytes(), &value).unwrap();
        }
        tx.commit().unwrap();
    }
    db.sync().unwrap();
    let mut costs = Vec::new();
    let mut deleted = 0;
    for extents in [100u64, 1_000, 10_000, 100_000] {
        // Delete every other key up to 2 x extents: one hole each.
        let mut tx = db.begin_write().unwrap();
        let bulk = tx.open_tree("bulk").unwrap();
        while deleted < extents {
            assert!(tx.delete(&bulk, &(deleted * 2).to_be_bytes()).unwrap());
            deleted += 1;
        }
        tx.commit().unwrap();
        db.sync().unwrap();
        let free = db.stats().unwrap().free_pages;
        assert!(free >= extents, "{free} free pages for {extents} holes");
        // Long enough to include the occasional new base of the chain.
        costs.push((extents, single_put_cost(&db, 5_000)));
    }
    assert_flat("free extents", &costs);
    db.check().unwrap();
}

#[test]
fn single_put_commits_cost_the_same_with_1_to_10000_trees() {
    let t = temp_db("trees.ib");
    let db = Database::open_with(&t.path, &options(4096)).unwrap();
    let mut costs = Vec::new();
    let mut trees = 1u64; // "hot"
    for target in [1u64, 100, 1_000, 10_000] {
        let mut tx = db.begin_write().unwrap();
        while trees < target {
            let tree = tx.open_tree(&format!("tree-{trees:05}")).unwrap();
            tx.put(&tree, b"k", b"v").unwrap();
            trees += 1;
        }
        tx.commit().unwrap();
        costs.push((target, single_put_cost(&db, 3_000)));
    }
    assert_eq!(db.stats().unwrap().trees.len() as u64, trees);
    assert_flat("trees", &costs);
    db.check().unwrap();
}
