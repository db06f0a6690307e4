//! Blobs sealed as they are put: in a transaction that writes its pages
//! to the file (not logged), each new overflow value gets its file pages
//! and its checksum at once (`btree::write::SealAtPut`), and the commit
//! writes it as sealed. What could go wrong is the bookkeeping of those
//! pages, so every test ends with `check` (every page used or free
//! exactly once) and the values read back, after a reopen too:
//! - a load of large values, logged at first and then not;
//! - values replaced or deleted in the transaction that put them, and a
//!   savepoint rolled back over some: their pages are freed, not leaked;
//! - an aborted transaction and a failed commit give the pages they took
//!   back: the next commit of the same load leaves the same file as if
//!   they had never run.

mod common;

use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::{temp_db, Rng};
use ironbark::{Database, Durability, Error, IoHook, IoHookHandle, Options, Tree};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// A value two blob pages long for some keys, one page for the others.
fn value(rng: &mut Rng, i: u64) -> Vec<u8> {
    rng.bytes(if i.is_multiple_of(7) { 6000 } else { 4000 })
}

fn key(i: u64) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn file_commits() -> Options {
    Options {
        logged_commits: false,
        durability: Durability::None,
        ..Options::default()
    }
}

fn read_all(db: &Database, tree: &str) -> Model {
    let rx = db.begin_read().unwrap();
    let t = rx.tree(tree).unwrap();
    rx.range(&t, ..)
        .unwrap()
        .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect::<ironbark::Result<_>>()
        .unwrap()
}

/// `check` finds nothing wrong and `model` is what `db` holds, then the
/// same after a reopen.
fn assert_holds(path: &std::path::Path, db: Database, model: &Model) {
    for db in [Some(db), None] {
        let db = db.unwrap_or_else(|| Database::open(path).unwrap());
        let report = db.check().unwrap();
        assert!(report.is_clean(), "{:?}", report.problems);
        assert!(read_all(&db, "t") == *model, "the values differ");
    }
}

/// A load of 600 large values in one transaction that starts logged
/// (its first values go to the redo record) and stops once the record
/// outweighs its pages; then the same in a file-commit database.
#[test]
fn a_load_of_large_values_reads_back_whole() {
    for options in [Options::default(), file_commits()] {
        let t = temp_db("load.ib");
        let db = Database::open_with(&t.path, &options).unwrap();
        let mut rng = Rng::new(1);
        let mut model = Model::new();
        let mut tx = db.begin_write().unwrap();
        let tree = tx.open_tree("t").unwrap();
        for i in 0..600 {
            let v = value(&mut rng, i);
            tx.put(&tree, &key(i), &v).unwrap();
            model.insert(key(i), v);
        }
        tx.commit().unwrap();
        let pages = db.stats().unwrap().page_count;
        // 600 values of one or two pages: every blob page is in the file,
        // and not many more besides (the tree, the metas, the state).
        let blob_pages = 600 + 600 / 7 + 1;
        assert!(
            (blob_pages..blob_pages + 64).contains(&pages),
            "{pages} pages for {blob_pages} blob pages"
        );
        assert_holds(&t.path, db, &model);
    }
}

/// Values replaced (by other large values and by small ones) and deleted
/// in the transaction that put them, and a savepoint rolled back over
/// puts of large values: the pages their blobs took are free after the
/// commit (`check` finds none used twice or lost), and reused.
#[test]
fn blobs_the_commit_no_longer_holds_are_freed() {
    let t = temp_db("replaced.ib");
    let db = Database::open_with(&t.path, &file_commits()).unwrap();
    let mut rng = Rng::new(2);
    let mut model = Model::new();
    let mut tx = db.begin_write().unwrap();
    let tree = tx.open_tree("t").unwrap();
    for i in 0..300 {
        let v = value(&mut rng, i);
        tx.put(&tree, &key(i), &v).unwrap();
        model.insert(key(i), v);
    }
    for i in (0..300).step_by(3) {
        let v = if i % 2 == 0 {
            value(&mut rng, i)
        } else {
            b"small now".to_vec()
        };
        tx.put(&tree, &key(i), &v).unwrap();
        model.insert(key(i), v);
    }
    for i in (1..300).step_by(5) {
        assert!(tx.delete(&tree, &key(i)).unwrap());
        model.remove(&key(i));
    }
    let sp = tx.savepoint().unwrap();
    for i in 300..400 {
        let v = value(&mut rng, i);
        tx.put(&tree, &key(i), &v).unwrap();
    }
    tx.rollback_to(&sp).unwrap();
    for i in 400..450 {
        let v = value(&mut rng, i);
        tx.put(&tree, &key(i), &v).unwrap();
        model.insert(key(i), v);
    }
    tx.commit().unwrap();
    db.sync().unwrap();
    let after_first = db.stats().unwrap();
    assert!(
        after_first.free_pages >= 100,
        "the replaced, deleted and rolled back blobs are free: {} free pages",
        after_first.free_pages
    );
    // The next loads reuse those pages (synced, so that no durable commit
    // holds them): the file grows by less than their blobs take.
    for round in 0..2 {
        let mut tx = db.begin_write().unwrap();
        for i in 0..150 {
            let k = key(1000 + round * 1000 + i);
            let v = rng.bytes(4000);
            tx.put(&tree, &k, &v).unwrap();
            model.insert(k, v);
        }
        tx.commit().unwrap();
        db.sync().unwrap();
    }
    let grown = db.stats().unwrap().page_count - after_first.page_count;
    assert!(grown < 300, "the file grew by {grown} pages for 300 blobs");
    assert_holds(&t.path, db, &model);
}

/// Loads `n` large values into tree `t` of `db` from `seed`, committed
/// or not.
fn load(db: &Database, tree: &Tree, seed: u64, n: u64, commit: bool) -> ironbark::Result<Model> {
    let mut rng = Rng::new(seed);
    let mut model = Model::new();
    let mut tx = db.begin_write()?;
    for i in 0..n {
        let v = value(&mut rng, i);
        tx.put(tree, &key(seed * 10_000 + i), &v)?;
        model.insert(key(seed * 10_000 + i), v);
    }
    if commit {
        tx.commit()?;
    } else {
        tx.abort();
    }
    Ok(model)
}

/// A database with free space: 400 large values loaded, 300 of them
/// deleted, synced (so the pages are reusable, not held for the durable
/// commit).
fn with_free_space(db: &Database) -> (Tree, Model) {
    let mut tx = db.begin_write().unwrap();
    let tree = tx.open_tree("t").unwrap();
    tx.commit().unwrap();
    let mut model = load(db, &tree, 1, 400, true).unwrap();
    let mut tx = db.begin_write().unwrap();
    for i in 0..300 {
        tx.delete(&tree, &key(10_000 + i)).unwrap();
        model.remove(&key(10_000 + i));
    }
    tx.commit().unwrap();
    db.sync().unwrap();
    db.sync().unwrap();
    (tree, model)
}

/// The same on pages reused from free space: the runs a replaced or
/// deleted blob took from it go back to it (the state chain never records
/// them as taken), which the reopen's replay of the chain checks.
#[test]
fn blobs_replaced_on_reused_pages_go_back_to_free_space() {
    let t = temp_db("reused.ib");
    let db = Database::open_with(&t.path, &file_commits()).unwrap();
    let (tree, mut model) = with_free_space(&db);
    let free_before = db.stats().unwrap().free_pages;
    let mut rng = Rng::new(3);
    let mut tx = db.begin_write().unwrap();
    for i in 0..200 {
        tx.put(&tree, &key(i), &value(&mut rng, i)).unwrap();
    }
    for i in 0..200 {
        let v = value(&mut rng, i);
        tx.put(&tree, &key(i), &v).unwrap();
        model.insert(key(i), v);
    }
    for i in (0..200).step_by(2) {
        assert!(tx.delete(&tree, &key(i)).unwrap());
        model.remove(&key(i));
    }
    tx.commit().unwrap();
    assert!(free_before >= 300, "{free_before} free pages to reuse");
    assert_holds(&t.path, db, &model);
}

/// Fails every data file write once armed.
struct FailWrites(AtomicBool);

impl IoHook for FailWrites {
    fn on_write(&self, _: u64, _: &[&[u8]]) -> io::Result<()> {
        if self.0.load(Ordering::SeqCst) {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        Ok(())
    }
}

/// A database with free space (`with_free_space`), then `first` (given
/// the database, its tree and its write hook), then a load of 500 large
/// values committed and synced: the file's (pages, free pages), after
/// `check` and the values read back.
fn twin_run(
    path: &std::path::Path,
    first: impl FnOnce(&Database, &Tree, &FailWrites),
) -> (u64, u64) {
    let hook = Arc::new(FailWrites(AtomicBool::new(false)));
    let options = Options {
        io_hook: Some(IoHookHandle(hook.clone())),
        ..file_commits()
    };
    let db = Database::open_with(path, &options).unwrap();
    let (tree, mut model) = with_free_space(&db);
    first(&db, &tree, &hook);
    model.extend(load(&db, &tree, 8, 500, true).unwrap());
    db.sync().unwrap();
    let s = db.stats().unwrap();
    assert_holds(path, db, &model);
    (s.page_count, s.free_pages)
}

/// An aborted load takes free extents and pages past the file's end for
/// its blobs as it puts them; the next write transaction gets them back,
/// so a load after it leaves the file exactly as the same load without
/// the aborted one does.
#[test]
fn an_aborted_load_gives_its_pages_back() {
    let (twin, t) = (temp_db("twin.ib"), temp_db("aborted.ib"));
    let without = twin_run(&twin.path, |_, _, _| {});
    let with = twin_run(&t.path, |db, tree, _| {
        load(db, tree, 7, 500, false).unwrap();
    });
    assert_eq!(with, without, "(pages, free pages) after an aborted load");
}

/// A commit that fails to write gives back the pages its blobs took as
/// they were put: the same instance then commits the load again and ends
/// as a twin that never failed.
#[test]
fn a_failed_commit_gives_its_pages_back() {
    let (twin, t) = (temp_db("twin.ib"), temp_db("failed.ib"));
    let without = twin_run(&twin.path, |_, _, _| {});
    let with = twin_run(&t.path, |db, tree, hook| {
        hook.0.store(true, Ordering::SeqCst);
        match load(db, tree, 7, 500, true) {
            Err(Error::Io(_)) => {}
            other => panic!("the failing commit returned {other:?}"),
        }
        hook.0.store(false, Ordering::SeqCst);
    });
    assert_eq!(with, without, "(pages, free pages) after a failed commit");
}
