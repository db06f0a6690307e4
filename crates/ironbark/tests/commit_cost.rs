//! What a small commit costs must not depend on what the file holds: the
//! bytes and pages a single-put commit writes stay flat (within 20%) as the
//! free space fragments into 100 to 100,000 extents and as the catalog grows
//! from 1 to 10,000 trees. (Before the state chain, every commit rewrote the
//! whole catalog and free-space map.) Both kinds of commit: file commits
//! (logged commits off), whose pages and state record are what is measured;
//! and logged commits (the default), whose bytes, log records plus the
//! checkpoint that writes them to the file, must stay flat too.

mod common;

use common::temp_db;
use ironbark::{Database, Durability, Options};

/// Average bytes and pages written per commit over `commits` single-put
/// commits into the small tree `hot`. With logged commits, the bytes of
/// their log records and of the one checkpoint that writes them to the
/// file (`stats` makes it, as a checkpoint would come sooner or later).
fn single_put_cost(db: &Database, commits: u64, logged: bool) -> (f64, f64) {
    // Nothing logged before is left for the first `stats` to checkpoint.
    db.checkpoint().unwrap();
    let before = db.stats().unwrap().counters;
    for i in 0..commits {
        let mut tx = db.begin_write().unwrap();
        let hot = tx.open_tree("hot").unwrap();
        tx.put(&hot, &(i % 64).to_be_bytes(), &i.to_le_bytes())
            .unwrap();
        tx.commit().unwrap();
    }
    let after = db.stats().unwrap().counters;
    let logged_commits = after.logged_commits - before.logged_commits;
    if logged {
        assert_eq!(
            logged_commits, commits,
            "a single-put commit was not logged"
        );
        assert_eq!(
            after.commits - before.commits,
            commits + 1,
            "the logged commits and one checkpoint"
        );
    } else {
        assert_eq!(logged_commits, 0);
        assert_eq!(after.commits - before.commits, commits);
    }
    let n = commits as f64;
    (
        (after.bytes_written - before.bytes_written) as f64 / n,
        (after.pages_written - before.pages_written) as f64 / n,
    )
}

/// One cost of a commit, from (bytes, pages).
type Cost = fn((f64, f64)) -> f64;

/// Both costs within 20% at every level; for logged commits the bytes only,
/// since they write pages only at the one checkpoint.
fn assert_flat(what: &str, logged: bool, costs: &[(u64, (f64, f64))]) {
    eprintln!("{what}, logged {logged}: (level, bytes/commit, pages/commit) {costs:?}");
    // Bytes, then pages.
    let picks: &[Cost] = if logged {
        &[|c| c.0]
    } else {
        &[|c| c.0, |c| c.1]
    };
    for pick in picks {
        let values: Vec<f64> = costs.iter().map(|(_, c)| pick(*c)).collect();

        let min = values.iter().cloned().fold(f64::MAX, f64::min);
        let max = values.iter().cloned().fold(0.0, f64::max);
        assert!(
            max <= min * 1.2,
            "{what}, logged {logged}: a single-put commit costs {min:.1} to {max:.1}: {costs:?}"
        );
    }
}

fn options(page_size: usize, logged: bool) -> Options {
    Options {
        page_size,
        durability: Durability::None,
        logged_commits: logged,
        ..Options::default()
    }
}

#[test]
fn single_put_commits_cost_the_same_with_100_to_100000_free_extents() {
    for logged in [false, true] {
        free_extents(logged);
    }
}

fn free_extents(logged: bool) {
    let t = temp_db("extents.ib");
    // 1 KiB pages: a 600-byte value is a one-page overflow run, so every
    // other key deleted leaves a one-page hole.
    let db = Database::open_with(&t.path, &options(1024, logged)).unwrap();
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
        costs.push((extents, single_put_cost(&db, 5_000, logged)));
    }
    assert_flat("free extents", logged, &costs);
    db.check().unwrap();
}

#[test]
fn single_put_commits_cost_the_same_with_1_to_10000_trees() {
    for logged in [false, true] {
        trees(logged);
    }
}

fn trees(logged: bool) {
    let t = temp_db("trees.ib");
    let db = Database::open_with(&t.path, &options(4096, logged)).unwrap();
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
        costs.push((target, single_put_cost(&db, 3_000, logged)));
    }
    assert_eq!(db.stats().unwrap().trees.len() as u64, trees);
    assert_flat("trees", logged, &costs);
    db.check().unwrap();
}
