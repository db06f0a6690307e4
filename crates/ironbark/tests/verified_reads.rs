//! Bulk readers verify what they read: `ReadTxn::range_verified` /
//! `iter_verified`, `ReadTxn::copy_to_verified` and `Database::compact_to`
//! fail with `Corrupted` naming the page on damage at rest (a changed byte,
//! a stale page with a valid checksum of its own, a damaged overflow run),
//! and leave no file behind; the fast reads (`get`, `iter`) stay
//! unverified, as designed. On a clean database, compaction writes exactly
//! the snapshot into a dense file that passes `check`.

mod common;

use std::path::Path;

use common::temp_db;
use ironbark::{Database, Error};

const PAGE: usize = 4096;

/// Entry `i` of the tree `t`: keys `key00000`..., values of varied length.
fn entry(i: usize) -> (Vec<u8>, Vec<u8>) {
    (
        format!("key{i:05}").into_bytes(),
        format!("value {i} {}", "x".repeat(i % 37)).into_bytes(),
    )
}

/// A database with a tree `t` of 3000 entries (several levels) and a tree
/// `big` whose values are overflow runs.
fn build(path: &Path) {
    let db = Database::open(path).unwrap();
    let mut tx = db.begin_write().unwrap();
    let t = tx.open_tree("t").unwrap();
    for i in 0..3000 {
        let (k, v) = entry(i);
        tx.put(&t, &k, &v).unwrap();
    }
    let big = tx.open_tree("big").unwrap();
    for i in 0..4u8 {
        tx.put(&big, &[b'b', i], &big_value(i)).unwrap();
    }
    tx.commit().unwrap();
}

fn big_value(i: u8) -> Vec<u8> {
    (0..20_000u32)
        .map(|j| (j as u8).wrapping_mul(31) ^ i)
        .collect()
}

fn find(bytes: &[u8], needle: &[u8]) -> usize {
    bytes
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("needle in the file")
}

/// The page a `Corrupted` error names.
fn damaged_page<T: std::fmt::Debug>(r: ironbark::Result<T>) -> (u64, String) {
    match r {
        Err(Error::Corrupted {
            page: Some(p),
            detail,
        }) => (p, detail),
        other => panic!("expected Corrupted naming a page, got {other:?}"),
    }
}

/// The first error of a scan.
fn scan_error<'a, I>(it: I) -> ironbark::Result<()>
where
    I: Iterator<Item = ironbark::Result<(&'a [u8], &'a [u8])>>,
{
    for e in it {
        e?;
    }
    Ok(())
}

/// Names in `dir` other than the listed databases' files (temporary files
/// left behind). A database's files are its data file, its lock file and
/// its redo log (`<name>-lock`, `<name>-log`).
fn leftovers(dir: &Path, databases: &[&str]) -> Vec<String> {
    let expected: Vec<String> = databases
        .iter()
        .flat_map(|d| [d.to_string(), format!("{d}-lock"), format!("{d}-log")])
        .collect();
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !expected.contains(n))
        .collect()
}

#[test]
fn damaged_leaf_fails_every_bulk_reader_and_no_file_is_left() {
    let t = temp_db("d.ib");
    build(&t.path);
    // Change a key (so that it is out of order) and a value in one leaf:
    // the page stays structurally valid; only its checksum tells.
    let mut bytes = std::fs::read(&t.path).unwrap();
    let (k, v) = entry(1000);
    let at = find(&bytes, &[k.as_slice(), v.as_slice()].concat());
    let page = (at / PAGE) as u64;
    bytes[at + 3] = b'9'; // key01000 -> key91000
    bytes[at + k.len() + 7] = b'X'; // value 1000 -> value 1X00
    std::fs::write(&t.path, &bytes).unwrap();

    let db = Database::open(&t.path).unwrap();
    let rx = db.begin_read().unwrap();
    let tree = rx.tree("t").unwrap();

    // The fast paths are unverified by design: they return the damage.
    let fast: Vec<(Vec<u8>, Vec<u8>)> = rx
        .iter(&tree)
        .unwrap()
        .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
        .collect();
    assert!(fast
        .iter()
        .any(|(k, v)| k == b"key91000" && v.starts_with(b"value 1X00")));

    // Verified scans, both ways, and from within the damaged page's range.
    for (what, r) in [
        ("forward", scan_error(rx.iter_verified(&tree).unwrap())),
        (
            "reverse",
            scan_error(rx.iter_verified(&tree).unwrap().rev()),
        ),
        (
            "range",
            scan_error(
                rx.range_verified(&tree, b"key00990".as_slice()..b"key01010".as_slice())
                    .unwrap(),
            ),
        ),
    ] {
        let (p, detail) = damaged_page(r);
        assert_eq!(p, page, "{what}: {detail}");
        assert!(detail.contains("checksum mismatch"), "{what}: {detail}");
    }
    // Pages it does not enter are not its concern.
    let tail = rx
        .range_verified(&tree, b"key02900".as_slice()..)
        .unwrap()
        .collect::<ironbark::Result<Vec<_>>>()
        .unwrap();
    assert_eq!(tail.len(), 100);
    // The other tree is intact.
    let big = rx.tree("big").unwrap();
    let all = rx
        .iter_verified(&big)
        .unwrap()
        .collect::<ironbark::Result<Vec<_>>>()
        .unwrap();
    assert_eq!(all.len(), 4);

    let dir = t.dir.path();
    let (p, _) = damaged_page(rx.copy_to_verified(dir.join("copy.ib")));
    assert_eq!(p, page);
    let (p, _) = damaged_page(rx.compact_to(dir.join("compact.ib")));
    assert_eq!(p, page);
    let (p, _) = damaged_page(db.compact_to(dir.join("compact.ib")));
    assert_eq!(p, page);
    assert_eq!(leftovers(dir, &["d.ib"]), Vec::<String>::new());

    // The page for page copy without verification still works, and keeps
    // the damage detectable (nothing is re-checksummed).
    rx.copy_to(dir.join("raw.ib")).unwrap();
    let raw = Database::open(dir.join("raw.ib")).unwrap();
    let (p, _) = damaged_page(raw.check());
    assert_eq!(p, page);
}

#[test]
fn stale_page_with_a_valid_checksum_is_caught_by_its_parents_record() {
    let t = temp_db("s.ib");
    build(&t.path);
    let old = std::fs::read(&t.path).unwrap();
    {
        let db = Database::open(&t.path).unwrap();
        let mut tx = db.begin_write().unwrap();
        let tree = tx.tree("t").unwrap();
        tx.put(&tree, b"key01000", b"NEW VALUE 1000").unwrap();
        tx.commit().unwrap();
    }
    // A lost write: the new leaf's place holds the old leaf's bytes, whose
    // own checksum is valid.
    let mut bytes = std::fs::read(&t.path).unwrap();
    let (k, v) = entry(1000);
    let old_page = find(&old, &[k.as_slice(), v.as_slice()].concat()) / PAGE;
    let new_page = find(&bytes, b"key01000NEW VALUE 1000") / PAGE;
    assert_ne!(old_page, new_page, "copy-on-write moves the leaf");
    bytes[new_page * PAGE..(new_page + 1) * PAGE]
        .copy_from_slice(&old[old_page * PAGE..(old_page + 1) * PAGE]);
    std::fs::write(&t.path, &bytes).unwrap();

    let db = Database::open(&t.path).unwrap();
    let rx = db.begin_read().unwrap();
    let tree = rx.tree("t").unwrap();
    let (p, detail) = damaged_page(scan_error(rx.iter_verified(&tree).unwrap()));
    assert_eq!(p, new_page as u64);
    assert!(detail.contains("parent's record"), "{detail}");
    let (p, _) = damaged_page(db.compact_to(t.dir.path().join("c.ib")));
    assert_eq!(p, new_page as u64);
    assert!(!t.dir.path().join("c.ib").exists());
}

#[test]
fn damaged_overflow_value_is_caught() {
    let t = temp_db("o.ib");
    build(&t.path);
    let mut bytes = std::fs::read(&t.path).unwrap();
    let value = big_value(2);
    let at = find(&bytes, &value[..64]);
    // A byte well inside the run, past its first page.
    let damaged = at + 9000;
    bytes[damaged] ^= 0x01;
    std::fs::write(&t.path, &bytes).unwrap();
    let run_start = (at / PAGE) as u64;

    let db = Database::open(&t.path).unwrap();
    let rx = db.begin_read().unwrap();
    let big = rx.tree("big").unwrap();
    // The fast read returns the damaged value.
    assert_ne!(rx.get(&big, b"b\x02").unwrap().unwrap(), value.as_slice());
    let (p, detail) = damaged_page(scan_error(rx.iter_verified(&big).unwrap()));
    assert_eq!(p, run_start, "{detail}");
    assert!(detail.contains("overflow"), "{detail}");
    let (p, _) = damaged_page(rx.copy_to_verified(t.dir.path().join("copy.ib")));
    assert_eq!(p, run_start);
    let (p, _) = damaged_page(db.compact_to(t.dir.path().join("c.ib")));
    assert_eq!(p, run_start);
    assert_eq!(leftovers(t.dir.path(), &["o.ib"]), Vec::<String>::new());
}

#[test]
fn compaction_of_a_clean_database_is_the_snapshot_in_a_dense_file() {
    let t = temp_db("c.ib");
    build(&t.path);
    let db = Database::open(&t.path).unwrap();
    // Free most of `t`'s pages, and make an empty tree.
    let mut tx = db.begin_write().unwrap();
    let tree = tx.tree("t").unwrap();
    for i in 0..3000 {
        if i % 10 != 0 {
            tx.delete(&tree, &entry(i).0).unwrap();
        }
    }
    tx.open_tree("empty").unwrap();
    tx.commit().unwrap();

    let rx = db.begin_read().unwrap();
    // A write after the snapshot is not in the compacted file.
    let mut tx = db.begin_write().unwrap();
    let tree = tx.tree("t").unwrap();
    tx.put(&tree, b"later", b"not in the snapshot").unwrap();
    tx.commit().unwrap();

    let dst = t.dir.path().join("small.ib");
    let done = rx.compact_to(&dst).unwrap();
    assert_eq!(done.txn_id, rx.txn_id());
    assert_eq!((done.trees, done.entries), (3, 304));
    // Never overwrites.
    match rx.compact_to(&dst) {
        Err(Error::Io(e)) => assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists),
        other => panic!("expected AlreadyExists, got {other:?}"),
    }
    let (_, want) = {
        let mut model = common::Model::new();
        for name in rx.list_trees() {
            let tr = rx.tree(&name).unwrap();
            model.insert(
                name,
                rx.iter_verified(&tr)
                    .unwrap()
                    .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
                    .collect(),
            );
        }
        (rx.txn_id(), model)
    };
    drop(rx);

    let small = Database::open(&dst).unwrap();
    small.check().unwrap();
    let (_, got) = common::read_model(&small).unwrap();
    assert!(got == want, "the compacted file holds exactly the snapshot");
    // Denser: fewer pages in all, and fewer leaves for the thinned tree.
    let (a, b) = (small.stats().unwrap(), db.stats().unwrap());
    assert!(a.page_count < b.page_count, "{a:?} vs {b:?}");
    let leaves = |s: &ironbark::Stats| s.trees.iter().find(|t| t.name == "t").unwrap().leaf_pages;
    assert!(leaves(&a) < leaves(&b), "{a:?} vs {b:?}");
    // Verified and fast scans agree on a clean tree.
    let rx = small.begin_read().unwrap();
    let tr = rx.tree("t").unwrap();
    assert!(rx
        .iter(&tr)
        .unwrap()
        .map(|e| e.unwrap())
        .eq(rx.iter_verified(&tr).unwrap().map(|e| e.unwrap())));
    drop(rx);
    let copy = t.dir.path().join("copy.ib");
    small.begin_read().unwrap().copy_to_verified(&copy).unwrap();
    Database::open(&copy).unwrap().check().unwrap();
    assert_eq!(
        leftovers(t.dir.path(), &["c.ib", "small.ib", "copy.ib"]),
        Vec::<String>::new()
    );
}
