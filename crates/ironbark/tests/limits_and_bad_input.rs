//! Limits and bad input: key and value size limits (and one past them),
//! values around the inline/overflow threshold, hostile files (empty,
//! random, wrong magic, truncated, wrong version, damaged meta or data
//! pages), the reader limit, `Busy`, invalid options and tree names, stale
//! tree handles, and the cross-process `Locked` error.

mod common;

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::process::Command;

use common::{temp_db, Rng};
use ironbark::{Database, Durability, Error, Options, MAX_TREE_NAME_LEN, MAX_VALUE_LEN};

type Contents = BTreeMap<String, BTreeMap<Vec<u8>, Vec<u8>>>;

const PS: usize = 4096;

fn opts(page_size: usize, durability: Durability) -> Options {
    Options {
        page_size,
        durability,
        ..Options::default()
    }
}

/// Every tree's entries, read through a fresh snapshot.
fn dump(db: &Database) -> ironbark::Result<Contents> {
    let rx = db.begin_read()?;
    let mut out = Contents::new();
    for name in rx.list_trees() {
        let t = rx.tree(&name)?;
        let mut m = BTreeMap::new();
        for e in rx.iter(&t)? {
            let (k, v) = e?;
            m.insert(k.to_vec(), v.to_vec());
            assert!(m.len() < 10_000_000, "iteration does not end");
        }
        out.insert(name, m);
    }
    Ok(out)
}

fn meta_txn(image: &[u8], slot: usize, page_size: usize) -> u64 {
    let at = slot * page_size + 16;
    u64::from_le_bytes(image[at..at + 8].try_into().unwrap())
}

fn reseal_meta(image: &mut [u8], slot: usize, page_size: usize) {
    let base = slot * page_size;
    let sum = xxhash_rust::xxh3::xxh3_64(&image[base..base + 80]);
    image[base + 80..base + 88].copy_from_slice(&sum.to_le_bytes());
}

/// Opens `image` written to a fresh file, catching panics.
fn open_image(image: &[u8], what: &str) -> (common::TempDb, ironbark::Result<Database>) {
    let t = temp_db("image.ib");
    std::fs::write(&t.path, image).unwrap();
    let path = t.path.clone();
    let r = catch_unwind(AssertUnwindSafe(|| {
        Database::open_with(&path, &opts(PS, Durability::None))
    }))
    .unwrap_or_else(|_| panic!("{what}: open panicked"));
    if matches!(r, Err(Error::NotAnIronbarkFile)) {
        let mut lock = path.into_os_string();
        lock.push("-lock");
        assert!(
            !Path::new(&lock).exists(),
            "{what}: a lock file was left beside a file that is not a database"
        );
    }
    (t, r)
}

/// A database with a few trees over several commits; returns the contents
/// after each commit.
fn populate(db: &Database, seed: u64, commits: usize) -> Vec<Contents> {
    let mut rng = Rng::new(seed);
    let mut states = Vec::new();
    for c in 0..commits {
        let mut tx = db.begin_write().unwrap();
        for name in ["a", "b"] {
            let t = tx.open_tree(name).unwrap();
            for _ in 0..150 {
                let k = format!("key{:04}", rng.below(400)).into_bytes();
                let v = match rng.below(10) {
                    0 => {
                        let n = PS * 2 + rng.below(100) as usize;
                        rng.bytes(n)
                    }
                    _ => {
                        let n = rng.below(200) as usize;
                        rng.bytes(n)
                    }
                };
                tx.put(&t, &k, &v).unwrap();
            }
            for _ in 0..20 {
                let k = format!("key{:04}", rng.below(400)).into_bytes();
                tx.delete(&t, &k).unwrap();
            }
        }
        let t = tx.open_tree("commit").unwrap();
        tx.put(&t, b"n", c.to_string().as_bytes()).unwrap();
        tx.commit().unwrap();
        states.push(dump(db).unwrap());
    }
    states
}

#[test]
fn key_size_limit() {
    for page_size in [1024, 4096, 65536] {
        let t = temp_db("keys.ib");
        let db = Database::open_with(&t.path, &opts(page_size, Durability::None)).unwrap();
        let max = db.max_key_len();
        if page_size == 4096 {
            assert!(max >= 1024, "max key {max} at 4 KiB pages is below 1024");
        }
        let mut rng = Rng::new(page_size as u64);
        let max_key = rng.bytes(max);
        let mut too_long = max_key.clone();
        too_long.push(1);

        let mut tx = db.begin_write().unwrap();
        let tree = tx.open_tree("t").unwrap();
        tx.put(&tree, b"before", b"1").unwrap();
        tx.put(&tree, &max_key, b"max").unwrap();
        match tx.put(&tree, &too_long, b"x") {
            Err(Error::KeyTooLarge { len, max: m }) => {
                assert_eq!((len, m), (max + 1, max));
            }
            other => panic!("page size {page_size}: key of max+1 bytes gave {other:?}"),
        }
        // The failed put changed nothing; the transaction goes on.
        assert_eq!(tx.get(&tree, &too_long).unwrap(), None);
        assert_eq!(tx.len(&tree).unwrap(), 2);
        tx.put(&tree, b"after", b"2").unwrap();
        // An empty key is a key like any other.
        tx.put(&tree, b"", b"empty key").unwrap();
        // A long key with a large (overflow) value and with an empty value.
        let big_value = rng.bytes(page_size * 3);
        let mut max_key2 = max_key.clone();
        max_key2[max - 1] ^= 0x55;
        tx.put(&tree, &max_key2, &big_value).unwrap();
        assert!(matches!(
            tx.put(&tree, &too_long, &big_value),
            Err(Error::KeyTooLarge { .. })
        ));
        tx.commit().unwrap();

        let rx = db.begin_read().unwrap();
        assert_eq!(rx.get(&tree, &max_key).unwrap(), Some(&b"max"[..]));
        assert_eq!(rx.get(&tree, &max_key2).unwrap(), Some(&big_value[..]));
        assert_eq!(rx.get(&tree, b"").unwrap(), Some(&b"empty key"[..]));
        assert_eq!(rx.get(&tree, b"before").unwrap(), Some(&b"1"[..]));
        assert_eq!(rx.get(&tree, b"after").unwrap(), Some(&b"2"[..]));
        assert_eq!(rx.get(&tree, &too_long).unwrap(), None);
        assert_eq!(rx.len(&tree).unwrap(), 5);
        let first = rx.iter(&tree).unwrap().next().unwrap().unwrap();
        assert_eq!(first, (&b""[..], &b"empty key"[..]));
        let keys: Vec<Vec<u8>> = rx
            .iter(&tree)
            .unwrap()
            .map(|e| e.unwrap().0.to_vec())
            .collect();
        assert!(!keys.contains(&too_long));
        drop(rx);

        // A tree of max-length keys sharing a long prefix, so separators in
        // branch pages are long too.
        let mut tx = db.begin_write().unwrap();
        let big = tx.open_tree("big").unwrap();
        let mut want = BTreeMap::new();
        for i in 0..300u32 {
            let mut k = vec![b'p'; max];
            k[max - 4..].copy_from_slice(&(i.wrapping_mul(2_654_435_761)).to_be_bytes());
            let n = rng.below(40) as usize;
            let v = rng.bytes(n);
            tx.put(&big, &k, &v).unwrap();
            want.insert(k, v);
        }
        tx.commit().unwrap();
        let rx = db.begin_read().unwrap();
        let fwd: Vec<(Vec<u8>, Vec<u8>)> = rx
            .iter(&big)
            .unwrap()
            .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
            .collect();
        assert!(fwd == want.clone().into_iter().collect::<Vec<_>>());
        let rev: Vec<Vec<u8>> = rx
            .iter(&big)
            .unwrap()
            .rev()
            .map(|e| e.unwrap().0.to_vec())
            .collect();
        assert!(rev == want.keys().rev().cloned().collect::<Vec<_>>());
        let report = db.check().unwrap();
        assert_eq!(report.entries, 305);
    }
}

#[test]
fn value_size_limit_one_gib() {
    let t = temp_db("values.ib");
    let db = Database::open_with(&t.path, &opts(PS, Durability::None)).unwrap();
    let mut tx = db.begin_write().unwrap();
    let tree = tx.open_tree("v").unwrap();
    tx.put(&tree, b"small", b"old").unwrap();
    tx.commit().unwrap();

    let mut tx = db.begin_write().unwrap();
    // One past the limit: refused, the old value stays. (A zeroed
    // allocation: its pages are never touched if the size check comes first.)
    let past = vec![0u8; MAX_VALUE_LEN + 1];
    match tx.put(&tree, b"small", &past) {
        Err(Error::ValueTooLarge { len, max }) => {
            assert_eq!((len, max), (MAX_VALUE_LEN + 1, MAX_VALUE_LEN));
        }
        other => panic!("value of MAX_VALUE_LEN + 1 bytes gave {other:?}"),
    }
    assert!(matches!(
        tx.put(&tree, b"new", &past),
        Err(Error::ValueTooLarge { .. })
    ));
    drop(past);
    assert_eq!(tx.get(&tree, b"small").unwrap(), Some(&b"old"[..]));
    assert_eq!(tx.get(&tree, b"new").unwrap(), None);
    assert_eq!(tx.len(&tree).unwrap(), 1);

    // Exactly the limit.
    let mut huge = vec![7u8; MAX_VALUE_LEN];
    huge[0] = 1;
    huge[MAX_VALUE_LEN / 2] = 2;
    huge[MAX_VALUE_LEN - 1] = 3;
    tx.put(&tree, b"huge", &huge).unwrap();
    tx.put(&tree, b"z", b"after").unwrap();
    tx.commit().unwrap();

    let rx = db.begin_read().unwrap();
    let got = rx.get(&tree, b"huge").unwrap().expect("huge value present");
    assert_eq!(got.len(), MAX_VALUE_LEN);
    assert!(got == &huge[..], "1 GiB value does not round-trip");
    assert_eq!(rx.get(&tree, b"small").unwrap(), Some(&b"old"[..]));
    assert_eq!(rx.get(&tree, b"z").unwrap(), Some(&b"after"[..]));
    let stats = db.stats().unwrap();
    let ts = stats.trees.iter().find(|t| t.name == "v").unwrap();
    assert!(ts.overflow_pages as usize >= MAX_VALUE_LEN / PS);
    drop(rx);

    // Delete it: its pages become free.
    let mut tx = db.begin_write().unwrap();
    assert!(tx.delete(&tree, b"huge").unwrap());
    tx.commit().unwrap();
    let stats = db.stats().unwrap();
    assert!(stats.free_pages as usize >= MAX_VALUE_LEN / PS);
}

#[test]
fn values_around_inline_overflow_threshold() {
    for page_size in [1024usize, 4096, 65536] {
        let t = temp_db("threshold.ib");
        let db = Database::open_with(&t.path, &opts(page_size, Durability::None)).unwrap();
        let mut rng = Rng::new(7 + page_size as u64);
        // The documented layout: a cell holds at most a third of the usable
        // page (minus its slot); a leaf cell header is 7 bytes; a blob has a
        // 40-byte header.
        let max_cell = (page_size - 32) / 3 - 2;
        let mut lens = Vec::new();
        for key_len in [0usize, 1, 16, db.max_key_len()] {
            let threshold = max_cell - 7 - key_len;
            for v in threshold.saturating_sub(3)..=threshold + 3 {
                lens.push((key_len, v));
            }
        }
        for blob_edge in [page_size - 40, 2 * page_size - 40, 3 * page_size - 40] {
            for v in blob_edge - 2..=blob_edge + 2 {
                lens.push((8, v));
            }
        }
        lens.push((8, 0));
        let mut want = BTreeMap::new();
        let mut tx = db.begin_write().unwrap();
        let tree = tx.open_tree("t").unwrap();
        for (i, &(key_len, v)) in lens.iter().enumerate() {
            let mut k = rng.bytes(key_len);
            if key_len >= 4 {
                k[..4].copy_from_slice(&(i as u32).to_be_bytes());
            } else if want.contains_key(&k) {
                continue;
            }
            let value = rng.bytes(v);
            tx.put(&tree, &k, &value).unwrap();
            want.insert(k, value);
        }
        // Overwrite some with sizes on the other side of the threshold.
        let keys: Vec<Vec<u8>> = want.keys().cloned().collect();
        for k in keys.iter().step_by(3) {
            let old = want[k].len();
            let v = rng.bytes(if old > max_cell { 5 } else { max_cell + 1 });
            tx.put(&tree, k, &v).unwrap();
            want.insert(k.clone(), v);
        }
        tx.commit().unwrap();
        let verify = |db: &Database| {
            let rx = db.begin_read().unwrap();
            for (k, v) in &want {
                assert_eq!(
                    rx.get(&tree, k).unwrap(),
                    Some(v.as_slice()),
                    "page size {page_size}, key {} bytes, value {} bytes",
                    k.len(),
                    v.len()
                );
            }
            let got: Vec<(Vec<u8>, Vec<u8>)> = rx
                .iter(&tree)
                .unwrap()
                .rev()
                .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
                .collect();
            assert!(got.into_iter().rev().eq(want.clone()));
            db.check().unwrap();
        };
        verify(&db);
        drop(db);
        let db = Database::open_with(&t.path, &opts(page_size, Durability::None)).unwrap();
        verify(&db);

        // Small values never take overflow pages; page-sized ones do.
        let mut tx = db.begin_write().unwrap();
        let small = tx.open_tree("small").unwrap();
        for i in 0..50u32 {
            tx.put(&small, &i.to_be_bytes(), &[1u8; 20]).unwrap();
        }
        let large = tx.open_tree("large").unwrap();
        tx.put(&large, b"k", &vec![2u8; page_size]).unwrap();
        tx.commit().unwrap();
        let stats = db.stats().unwrap();
        let of = |n: &str| {
            stats
                .trees
                .iter()
                .find(|t| t.name == n)
                .unwrap()
                .overflow_pages
        };
        assert_eq!(of("small"), 0);
        assert!(of("large") >= 1);
    }
}

#[test]
fn empty_random_and_foreign_files() {
    // Empty file: initialized as a new database (as `tempfile` users expect).
    let (_t, r) = open_image(&[], "empty file");
    let db = r.unwrap_or_else(|e| panic!("empty file: {e}"));
    assert!(db.begin_read().unwrap().list_trees().is_empty());
    db.check().unwrap();
    // Random bytes, of several sizes.
    let mut rng = Rng::new(99);
    for len in [
        1usize,
        63,
        64,
        100,
        4095,
        4096,
        8192,
        3 * 4096,
        65536 * 3,
        200_000,
    ] {
        let image = rng.bytes(len);
        let (_t, r) = open_image(&image, "random bytes");
        assert!(r.is_err(), "{len} random bytes opened");
    }
    // Zeros. (Exactly the length of a new file's image, zeros are what a
    // crash while initializing an empty file can leave, and are initialized:
    // see tests/trust.rs.)
    let (_t, r) = open_image(&vec![0u8; 5 * PS], "zeros");
    assert!(matches!(r, Err(Error::NotAnIronbarkFile)), "zeros: {r:?}");
    // Text.
    let (_t, r) = open_image(&b"hello, this is not a database\n".repeat(500), "text");
    assert!(matches!(r, Err(Error::NotAnIronbarkFile)), "text: {r:?}");

    // Wrong magic in both meta pages of a valid file.
    let t = temp_db("valid.ib");
    let db = Database::open(&t.path).unwrap();
    populate(&db, 1, 3);
    drop(db);
    let image = std::fs::read(&t.path).unwrap();
    let mut bad = image.clone();
    bad[0] = b'X';
    bad[PS] = b'X';
    let (_t, r) = open_image(&bad, "wrong magic");
    assert!(
        matches!(r, Err(Error::NotAnIronbarkFile)),
        "wrong magic: {r:?}"
    );
    // Magic resealed with a new checksum: still not ours.
    let mut bad = image.clone();
    bad[..8].copy_from_slice(b"LMDBFILE");
    bad[PS..PS + 8].copy_from_slice(b"LMDBFILE");
    reseal_meta(&mut bad, 0, PS);
    reseal_meta(&mut bad, 1, PS);
    let (_t, r) = open_image(&bad, "foreign magic");
    assert!(
        matches!(r, Err(Error::NotAnIronbarkFile)),
        "foreign magic: {r:?}"
    );

    // A missing file with `create: false`.
    let t = temp_db("missing.ib");
    let r = Database::open_with(
        &t.path,
        &Options {
            create: false,
            ..Options::default()
        },
    );
    assert!(matches!(r, Err(Error::Io(_))), "missing file: {r:?}");
    assert!(!t.path.exists(), "create: false created the file");
}

#[test]
fn version_changed_is_incompatible() {
    let t = temp_db("version.ib");
    let db = Database::open(&t.path).unwrap();
    populate(&db, 2, 2);
    drop(db);
    let image = std::fs::read(&t.path).unwrap();
    for version in [0u32, 1, 2, 3, 8, 99, u32::MAX] {
        let mut bad = image.clone();
        for slot in 0..2 {
            bad[slot * PS + 8..slot * PS + 12].copy_from_slice(&version.to_le_bytes());
            reseal_meta(&mut bad, slot, PS);
        }
        let (_t, r) = open_image(&bad, "version");
        match r {
            Err(Error::IncompatibleVersion { found, supported }) => {
                assert_eq!(found, version);
                assert_eq!(supported, 7);
            }
            other => panic!("version {version}: {other:?}"),
        }
    }
    // Changed without resealing: the checksum no longer matches.
    let mut bad = image.clone();
    for slot in 0..2 {
        bad[slot * PS + 8] ^= 0x02;
    }
    let (_t, r) = open_image(&bad, "version, not resealed");
    assert!(
        matches!(r, Err(Error::Corrupted { .. })),
        "unsealed version change: {r:?}"
    );
    // An unsupported page size recorded in the file.
    let mut bad = image.clone();
    for slot in 0..2 {
        bad[slot * PS + 12..slot * PS + 16].copy_from_slice(&3000u32.to_le_bytes());
        reseal_meta(&mut bad, slot, PS);
    }
    let (_t, r) = open_image(&bad, "page size");
    assert!(r.is_err(), "page size 3000 in the file opened");
}

/// Reopens the file at `path`, after the commit that follows an open of
/// an older format, checking that one of its metas is format 7.
fn reopened_in_format_7(path: &std::path::Path) -> Database {
    let image = std::fs::read(path).unwrap();
    let versions: Vec<u32> = (0..2)
        .map(|slot| u32::from_le_bytes(image[slot * PS + 8..slot * PS + 12].try_into().unwrap()))
        .collect();
    assert!(
        versions.contains(&7),
        "no format 7 meta after a commit: {versions:?}"
    );
    Database::open_with(path, &opts(PS, Durability::None)).unwrap()
}

/// A file whose metas are format 4 (no log base; the checksum at byte 64
/// covers bytes 0..64) opens with its data, and its next commit writes
/// the current format.
#[test]
fn a_format_4_meta_opens_as_one_whose_log_base_is_its_txn() {
    let t = temp_db("v4.ib");
    let db = Database::open(&t.path).unwrap();
    populate(&db, 2, 2);
    let before = dump(&db).unwrap();
    drop(db);
    let mut image = std::fs::read(&t.path).unwrap();
    for slot in 0..2 {
        let base = slot * PS;
        image[base + 8..base + 12].copy_from_slice(&4u32.to_le_bytes());
        image[base + 64..base + 88].fill(0);
        let sum = xxhash_rust::xxh3::xxh3_64(&image[base..base + 64]);
        image[base + 64..base + 72].copy_from_slice(&sum.to_le_bytes());
    }
    let (k, r) = open_image(&image, "format 4");
    let db = r.unwrap_or_else(|e| panic!("a format 4 file did not open: {e}"));
    assert_eq!(dump(&db).unwrap(), before);
    db.check().unwrap();
    let mut tx = db.begin_write().unwrap();
    let tr = tx.open_tree("after").unwrap();
    tx.put(&tr, b"k", b"v").unwrap();
    tx.commit().unwrap();
    drop(db);
    let db = reopened_in_format_7(&k.path);
    db.check().unwrap();
}

/// A file whose metas are format 5 (the version a build that kept values
/// inline only up to a third of a page wrote; its pages read alike: here
/// a file of this build with its version set back) opens with its data;
/// values of up to half a page put after that stay in their leaves, blob
/// values overwritten by them included, and the next commit writes
/// format 7, which such a build refuses.
#[test]
fn a_format_5_file_opens_takes_larger_inline_values_and_becomes_format_7() {
    let t = temp_db("v5.ib");
    let db = Database::open_with(&t.path, &opts(PS, Durability::None)).unwrap();
    let mut tx = db.begin_write().unwrap();
    let tr = tx.open_tree("t").unwrap();
    let old = |i: u32| {
        vec![
            i as u8;
            if i.is_multiple_of(5) {
                2500
            } else {
                1500 + i as usize * 10
            }
        ]
    };
    for i in 0..50u32 {
        tx.put(&tr, &i.to_be_bytes(), &old(i)).unwrap();
    }
    tx.commit().unwrap();
    let before = dump(&db).unwrap();
    drop(db);
    let mut image = std::fs::read(&t.path).unwrap();
    for slot in 0..2 {
        image[slot * PS + 8..slot * PS + 12].copy_from_slice(&5u32.to_le_bytes());
        reseal_meta(&mut image, slot, PS);
    }
    let (k, r) = open_image(&image, "format 5");
    let db = r.unwrap_or_else(|e| panic!("a format 5 file did not open: {e}"));
    assert_eq!(dump(&db).unwrap(), before);
    db.check().unwrap();
    let mut tx = db.begin_write().unwrap();
    let tr = tx.open_tree("t").unwrap();
    for i in 0..50u32 {
        if i % 3 == 0 {
            tx.put(&tr, &i.to_be_bytes(), &vec![!(i as u8); 1900])
                .unwrap();
        }
    }
    tx.commit().unwrap();
    drop(db);
    let db = reopened_in_format_7(&k.path);
    assert!(db.check().unwrap().is_clean());
    let rx = db.begin_read().unwrap();
    let tr = rx.tree("t").unwrap();
    for i in 0..50u32 {
        let want = if i % 3 == 0 {
            vec![!(i as u8); 1900]
        } else {
            old(i)
        };
        assert_eq!(rx.get(&tr, &i.to_be_bytes()).unwrap(), Some(&want[..]));
    }
}

#[test]
fn damaged_newest_meta_falls_back_to_previous_commit() {
    // Four commits leave the newest in slot 0 (so the page size must be
    // found from slot 1), five in slot 1; at the smallest, default and
    // largest page sizes.
    for (page_size, commits) in [(4096, 4), (4096, 5), (1024, 4), (65536, 4)] {
        meta_fallback(page_size, commits);
    }
}

fn meta_fallback(ps: usize, commits: usize) {
    let t = temp_db("meta.ib");
    // Every commit a file commit, each writing a meta slot in turn (a
    // logged commit writes none: its record goes to the log).
    let file_commits = Options {
        logged_commits: false,
        ..opts(ps, Durability::Immediate)
    };
    let db = Database::open_with(&t.path, &file_commits).unwrap();
    let states = populate(&db, 3, commits);
    let (last, previous) = (&states[commits - 1], &states[commits - 2]);
    // The image of the file just after the last commit (before close, which
    // marks the commit clean in the other slot).
    let image = std::fs::read(&t.path).unwrap();
    drop(db);
    let (t0, t1) = (meta_txn(&image, 0, ps), meta_txn(&image, 1, ps));
    assert_eq!(t0.abs_diff(t1), 1, "meta slots hold txns {t0} and {t1}");
    let newest = if t0 > t1 { 0 } else { 1 };
    assert_eq!(
        newest,
        commits % 2,
        "page size {ps}: the newest meta is in slot {newest}"
    );
    let what_ps = format!("page size {ps}, newest in slot {newest}");

    // The untouched image opens to the last commit.
    let (_k, r) = open_image(&image, "intact");
    let db = r.unwrap();
    assert_eq!(&dump(&db).unwrap(), last, "{what_ps}");
    drop(db);

    for (what, damage) in [
        ("checksum byte", 60usize),
        ("txn byte", 17),
        ("page count byte", 25),
        ("magic byte", 3),
        ("page size byte", 13),
    ] {
        let mut bad = image.clone();
        bad[newest * ps + damage] ^= 0x10;
        let (_k, r) = open_image(&bad, what);
        let db = r.unwrap_or_else(|e| panic!("{what_ps}: damaged newest meta ({what}): {e}"));
        assert_eq!(
            &dump(&db).unwrap(),
            previous,
            "{what_ps}: damaged newest meta ({what}) did not fall back to the previous commit"
        );
        assert_eq!(db.page_size(), ps);
        db.check().unwrap();
        // And the fallback is writable.
        let mut tx = db.begin_write().unwrap();
        let tr = tx.open_tree("after").unwrap();
        tx.put(&tr, b"k", b"v").unwrap();
        tx.commit().unwrap();
        db.check().unwrap();
    }
    // The newest meta page zeroed (a torn write of the whole page).
    let mut bad = image.clone();
    bad[newest * ps..newest * ps + 88].fill(0);
    let (_k, r) = open_image(&bad, "zeroed");
    let db = r.unwrap_or_else(|e| panic!("{what_ps}: zeroed newest meta: {e}"));
    assert_eq!(
        &dump(&db).unwrap(),
        previous,
        "{what_ps}: zeroed newest meta"
    );
    drop(db);

    // The older slot damaged: the newest commit still opens.
    let mut bad = image.clone();
    bad[(1 - newest) * ps + 40] ^= 0x01;
    let (_k, r) = open_image(&bad, "older meta damaged");
    assert_eq!(
        &dump(&r.unwrap()).unwrap(),
        last,
        "{what_ps}: older meta damaged"
    );

    // Both damaged: an error, not a panic.
    let mut bad = image.clone();
    bad[40] ^= 0x01;
    bad[ps + 40] ^= 0x01;
    let (_k, r) = open_image(&bad, "both metas damaged");
    assert!(
        matches!(r, Err(Error::Corrupted { .. })),
        "{what_ps}: both metas: {r:?}"
    );
}

/// Mutated meta fields (resealed, so only the bounds checks stand in the
/// way): open, read and check must not panic.
#[test]
fn hostile_meta_fields_never_panic() {
    let t = temp_db("fuzzmeta.ib");
    let db = Database::open(&t.path).unwrap();
    let states = populate(&db, 4, 3);
    let image = std::fs::read(&t.path).unwrap();
    drop(db);
    let mut rng = Rng::new(4242);
    let mut opened = 0;
    for i in 0..150 {
        let mut bad = image.clone();
        for slot in 0..2 {
            if slot == 1 && rng.chance(30) {
                continue;
            }
            let field = [16usize, 24, 32, 40, 48][rng.below(5) as usize];
            let at = slot * PS + field;
            let old = u64::from_le_bytes(bad[at..at + 8].try_into().unwrap());
            let new = match rng.below(5) {
                0 => rng.next_u64(),
                1 => old.wrapping_add(1 + rng.below(3)),
                2 => old.wrapping_sub(1 + rng.below(3)),
                3 => u64::MAX >> rng.below(20),
                _ => rng.below(64),
            };
            bad[at..at + 8].copy_from_slice(&new.to_le_bytes());
            reseal_meta(&mut bad, slot, PS);
        }
        let (_k, r) = open_image(&bad, &format!("meta fuzz {i}"));
        if let Ok(db) = r {
            opened += 1;
            let d = catch_unwind(AssertUnwindSafe(|| dump(&db)))
                .unwrap_or_else(|_| panic!("meta fuzz {i}: reading panicked"));
            let c = catch_unwind(AssertUnwindSafe(|| db.check()))
                .unwrap_or_else(|_| panic!("meta fuzz {i}: check panicked"));
            if c.is_ok() {
                // A file that checks clean shows one of the real commits.
                let d = d.unwrap_or_else(|e| panic!("meta fuzz {i}: checks clean, reads {e}"));
                assert!(
                    states.contains(&d),
                    "meta fuzz {i}: checks clean but shows contents of no commit"
                );
            }
        }
    }
    eprintln!("meta fuzz: {opened} of 150 mutated files opened");
}

#[test]
fn truncated_file_is_an_error_never_a_panic() {
    let t = temp_db("trunc.ib");
    let db = Database::open(&t.path).unwrap();
    let states = populate(&db, 5, 5);
    // Read while open: the meta slots hold the last two commits.
    let image = std::fs::read(&t.path).unwrap();
    let page_count = db.stats().unwrap().page_count as usize;
    drop(db);
    let mut cuts = vec![
        0usize,
        1,
        8,
        63,
        64,
        65,
        PS - 1,
        PS,
        PS + 63,
        PS + 64,
        2 * PS - 1,
        2 * PS,
        2 * PS + 1,
        3 * PS,
        page_count * PS / 2,
        page_count * PS - PS,
        page_count * PS - 1,
        page_count * PS,
        image.len() - 1,
    ];
    let mut rng = Rng::new(5);
    for _ in 0..20 {
        cuts.push(rng.below((page_count * PS) as u64) as usize);
    }
    for cut in cuts {
        if cut == 0 {
            // An empty file is initialized as a new database (see
            // `empty_random_and_foreign_files`).
            continue;
        }
        let (_k, r) = open_image(&image[..cut], &format!("cut at {cut}"));
        match r {
            Err(_) => {}
            Ok(db) => {
                // Only a cut that keeps a whole commit may open, and then it
                // shows that commit exactly.
                let d = dump(&db).unwrap_or_else(|e| panic!("cut at {cut}: opened, reads {e}"));
                assert!(
                    states[3..].contains(&d),
                    "cut at {cut} opened to contents of no recent commit"
                );
                db.check()
                    .unwrap_or_else(|e| panic!("cut at {cut}: opened, check: {e}"));
                assert!(cut >= 3 * PS, "cut at {cut} opened");
            }
        }
    }
    // Cut below the newest commit's pages and past the last meta byte:
    // either an error or exactly the previous commit.
    let (_k, r) = open_image(&image[..page_count * PS - 1], "cut one byte short");
    if let Ok(db) = r {
        assert_eq!(dump(&db).unwrap(), states[3]);
    }
}

/// Finds the leaf pages of a file written by one commit (txn `txn`).
fn leaves_of(image: &[u8], txn: u64) -> Vec<usize> {
    (2..image.len() / PS)
        .filter(|&p| {
            let b = &image[p * PS..(p + 1) * PS];
            b[16] == 2
                && u64::from_le_bytes(b[8..16].try_into().unwrap()) == txn
                && u64::from_le_bytes(b[24..32].try_into().unwrap()) == p as u64
        })
        .collect()
}

/// The keys of a leaf page, parsed with the documented layout.
fn leaf_keys(page: &[u8]) -> Vec<(Vec<u8>, usize)> {
    let count = u16::from_le_bytes([page[18], page[19]]) as usize;
    (0..count)
        .map(|i| {
            // 6-byte slots: the cell offset, then the key head.
            let off = u16::from_le_bytes([page[32 + 6 * i], page[33 + 6 * i]]) as usize;
            let klen = u16::from_le_bytes([page[off], page[off + 1]]) as usize;
            (page[off + 7..off + 7 + klen].to_vec(), off)
        })
        .collect()
}

fn is_corrupted_at(e: &Error, page: usize) -> bool {
    matches!(e, Error::Corrupted { page: Some(p), .. } if *p == page as u64)
}

#[test]
fn damaged_data_page_is_reported_as_corrupted() {
    let t = temp_db("leaf.ib");
    let db = Database::open(&t.path).unwrap();
    let mut tx = db.begin_write().unwrap();
    let tree = tx.open_tree("t").unwrap();
    let mut want = BTreeMap::new();
    for i in 0..400u32 {
        let k = format!("key{i:05}").into_bytes();
        let v = format!("value-{i:05}-{}", "x".repeat(80)).into_bytes();
        tx.put(&tree, &k, &v).unwrap();
        want.insert(k, v);
    }
    let txn = tx.txn_id();
    tx.commit().unwrap();
    let unclean_image = std::fs::read(&t.path).unwrap();
    drop(db);
    let clean_image = std::fs::read(&t.path).unwrap();
    let leaves = leaves_of(&clean_image, txn);
    assert!(
        leaves.len() >= 4,
        "expected several leaves, found {leaves:?}"
    );
    let leaf = leaves[leaves.len() / 2];
    let page = &clean_image[leaf * PS..(leaf + 1) * PS];
    let keys = leaf_keys(page);
    assert!(!keys.is_empty());
    let (victim_key, cell) = keys[keys.len() / 2].clone();
    assert!(
        want.contains_key(&victim_key),
        "parsed a key that is not ours"
    );
    let other_leaf = leaves[0];
    let (other_key, _) = leaf_keys(&clean_image[other_leaf * PS..(other_leaf + 1) * PS])[0].clone();

    // Structural damage: every read that touches the page reports it,
    // naming the page; other pages still read correctly.
    let structural: [(&str, usize, &[u8]); 5] = [
        ("kind", 16, &[9]),
        ("txn", 8, &[0xEE]),
        ("cell count", 18, &[0xFF, 0xFF]),
        ("cell area offset", 20, &[0, 0, 0, 0]),
        ("slot offset", 32 + 6 * (keys.len() / 2), &[0xFF, 0xFF]),
    ];
    for (what, at, bytes) in structural {
        let mut bad = clean_image.clone();
        bad[leaf * PS + at..leaf * PS + at + bytes.len()].copy_from_slice(bytes);
        let (_k, r) = open_image(&bad, what);
        let db = r.unwrap_or_else(|e| panic!("{what}: open failed: {e}"));
        // A handle belongs to the file it came from: this is a copy.
        let tree = db.begin_read().unwrap().tree("t").unwrap();
        let rx = db.begin_read().unwrap();
        match rx.get(&tree, &victim_key) {
            Err(e) => assert!(is_corrupted_at(&e, leaf), "{what}: get gave {e}"),
            Ok(v) => panic!("{what}: get of a key in the damaged leaf gave {v:?}"),
        }
        assert_eq!(
            rx.get(&tree, &other_key).unwrap(),
            Some(want[&other_key].as_slice()),
            "{what}: an undamaged leaf reads wrong"
        );
        let mut saw_error = false;
        for e in rx.iter(&tree).unwrap() {
            match e {
                Ok((k, v)) => assert_eq!(Some(&v.to_vec()), want.get(k), "{what}: wrong entry"),
                Err(e) => {
                    assert!(is_corrupted_at(&e, leaf), "{what}: iteration gave {e}");
                    saw_error = true;
                }
            }
        }
        assert!(
            saw_error,
            "{what}: a full scan passed over the damaged leaf"
        );
        let c = db.check();
        assert!(
            matches!(&c, Err(e) if is_corrupted_at(e, leaf)),
            "{what}: check gave {c:?}"
        );
    }

    // A flipped value byte after a clean close: check() names the page.
    // (Reads do not verify checksums: the design leaves that to check()
    // and to open after an unclean shutdown.)
    let value_at = leaf * PS + cell + 7 + victim_key.len() + 3;
    let mut bad = clean_image.clone();
    bad[value_at] ^= 0x01;
    let (_k, r) = open_image(&bad, "value byte");
    let db = r.unwrap();
    let tree = db.begin_read().unwrap().tree("t").unwrap();
    let c = db.check();
    assert!(
        matches!(&c, Err(e) if is_corrupted_at(e, leaf)),
        "value byte: check gave {c:?}"
    );
    match db.begin_read().unwrap().get(&tree, &victim_key) {
        Ok(Some(v)) if v != want[&victim_key].as_slice() => eprintln!(
            "note: after a clean close, a damaged value byte in leaf {leaf} is read \
             without error (reads do not verify checksums); check() reports it"
        ),
        Ok(v) => assert_eq!(v, Some(want[&victim_key].as_slice())),
        Err(e) => assert!(is_corrupted_at(&e, leaf), "value byte: get gave {e}"),
    }
    drop(db);

    // The same damage in a commit that was not closed cleanly: open verifies
    // the commit's pages, so the damaged commit is never shown.
    let mut bad = unclean_image.clone();
    bad[value_at] ^= 0x01;
    let (_k, r) = open_image(&bad, "value byte, unclean");
    match r {
        Err(e) => assert!(matches!(e, Error::Corrupted { .. }), "unclean: {e}"),
        Ok(db) => {
            let d = dump(&db).unwrap();
            // Only the previous commit (the empty database) may show.
            assert!(d.is_empty(), "unclean open showed the damaged commit");
            db.check().unwrap();
        }
    }
}

/// Random byte damage anywhere past the meta pages: never a panic; a read
/// that returns wrong data is always caught by `check()`.
#[test]
fn random_page_damage_never_panics() {
    let t = temp_db("fuzzdata.ib");
    let db = Database::open(&t.path).unwrap();
    let states = populate(&db, 6, 4);
    drop(db);
    let image = std::fs::read(&t.path).unwrap();
    let last = states.last().unwrap();
    let used = {
        let (_k, r) = open_image(&image, "intact");
        r.unwrap().stats().unwrap().page_count as usize
    };
    let mut rng = Rng::new(66);
    let mut detected = 0;
    for i in 0..120 {
        let mut bad = image.clone();
        let page = 2 + rng.below(used as u64 - 2) as usize;
        for _ in 0..1 + rng.below(4) {
            let at = page * PS + rng.below(PS as u64) as usize;
            bad[at] ^= 1 << rng.below(8);
        }
        let (_k, r) = open_image(&bad, &format!("damage {i}"));
        let Ok(db) = r else { continue };
        let d = catch_unwind(AssertUnwindSafe(|| dump(&db)))
            .unwrap_or_else(|_| panic!("damage {i} (page {page}): reading panicked"));
        let c = catch_unwind(AssertUnwindSafe(|| db.check()))
            .unwrap_or_else(|_| panic!("damage {i} (page {page}): check panicked"));
        if let Err(e) = &d {
            assert!(
                matches!(e, Error::Corrupted { .. }),
                "damage {i}: read error {e}"
            );
        }
        let wrong = d.as_ref().is_ok_and(|d| d != last);
        if wrong || d.is_err() {
            assert!(
                c.is_err(),
                "damage {i} (page {page}): reads differ but check() passes"
            );
        }
        if c.is_err() {
            detected += 1;
        }
    }
    eprintln!("data fuzz: check() detected damage in {detected} of 120 files");
}

#[test]
fn reader_limit() {
    let t = temp_db("readers.ib");
    let db = Database::open_with(
        &t.path,
        &Options {
            max_readers: 4,
            ..Options::default()
        },
    )
    .unwrap();
    let mut held: Vec<_> = (0..4).map(|_| db.begin_read().unwrap()).collect();
    match db.begin_read() {
        Err(Error::ReadersFull { max }) => assert_eq!(max, 4),
        other => panic!("5th reader: {other:?}"),
    }
    // From another thread too.
    std::thread::scope(|s| {
        s.spawn(|| {
            assert!(matches!(db.begin_read(), Err(Error::ReadersFull { .. })));
        });
    });
    assert_eq!(db.stats().unwrap().live_readers, 4);
    // The writer is not blocked by a full table.
    let mut tx = db.begin_write().unwrap();
    let tr = tx.open_tree("t").unwrap();
    tx.put(&tr, b"k", b"v").unwrap();
    tx.commit().unwrap();
    held.pop();
    let rx = db.begin_read().unwrap();
    assert_eq!(rx.get(&tr, b"k").unwrap(), Some(&b"v"[..]));
    assert!(matches!(db.begin_read(), Err(Error::ReadersFull { .. })));
    // A full table: `check` and `stats` read the newest commit under the
    // write lock, after the checkpoint of what was logged.
    assert_eq!(db.check().unwrap().entries, 1);
    assert_eq!(db.stats().unwrap().live_readers, 4);
    drop(held);
    drop(rx);
    assert_eq!(db.stats().unwrap().live_readers, 0);
    let again: Vec<_> = (0..4).map(|_| db.begin_read().unwrap()).collect();
    assert_eq!(again.len(), 4);
}

#[test]
fn busy_writer() {
    let t = temp_db("busy.ib");
    let db = Database::open(&t.path).unwrap();
    let mut tx = db.begin_write().unwrap();
    let tr = tx.open_tree("t").unwrap();
    tx.put(&tr, b"k", b"1").unwrap();
    assert!(matches!(db.try_begin_write(), Err(Error::Busy)));
    std::thread::scope(|s| {
        s.spawn(|| assert!(matches!(db.try_begin_write(), Err(Error::Busy))));
    });
    // A clone (and a second open of the same path) shares the lock.
    let db2 = Database::open(&t.path).unwrap();
    assert!(matches!(db2.try_begin_write(), Err(Error::Busy)));
    tx.commit().unwrap();
    let mut tx = db2.try_begin_write().unwrap();
    assert_eq!(tx.get(&tr, b"k").unwrap(), Some(&b"1"[..]));
    tx.put(&tr, b"k", b"2").unwrap();
    assert!(matches!(db.try_begin_write(), Err(Error::Busy)));
    drop(tx); // abort
    assert_eq!(
        db.begin_read().unwrap().get(&tr, b"k").unwrap(),
        Some(&b"1"[..])
    );
    assert!(db.try_begin_write().is_ok());
}

#[test]
fn invalid_options() {
    let t = temp_db("opts.ib");
    for page_size in [0usize, 1, 512, 1000, 3000, 4095, 4097, 131_072, 1 << 20] {
        let r = Database::open_with(&t.path, &opts(page_size, Durability::Immediate));
        assert!(
            matches!(r, Err(Error::InvalidPageSize(p)) if p == page_size as u64),
            "page size {page_size}: {r:?}"
        );
    }
    for max_readers in [0usize, ironbark::MAX_READERS_LIMIT + 1, usize::MAX] {
        let r = Database::open_with(
            &t.path,
            &Options {
                max_readers,
                ..Options::default()
            },
        );
        assert!(
            matches!(r, Err(Error::InvalidOption(_))),
            "max_readers {max_readers}: {r:?}"
        );
    }
    assert!(!t.path.exists(), "a rejected open created the file");
    // Every valid page size works, and an existing file keeps its own.
    for page_size in [1024usize, 2048, 4096, 8192, 16384, 32768, 65536] {
        let t = temp_db("ps.ib");
        let db = Database::open_with(&t.path, &opts(page_size, Durability::None)).unwrap();
        assert_eq!(db.page_size(), page_size);
        drop(db);
        let db = Database::open_with(&t.path, &opts(1024, Durability::None)).unwrap();
        assert_eq!(db.page_size(), page_size);
    }
}

#[test]
fn tree_names_and_handles() {
    let t = temp_db("names.ib");
    let db = Database::open(&t.path).unwrap();
    let mut tx = db.begin_write().unwrap();
    assert!(matches!(tx.open_tree(""), Err(Error::InvalidTreeName(_))));
    let long = "n".repeat(MAX_TREE_NAME_LEN + 1);
    assert!(matches!(
        tx.open_tree(&long),
        Err(Error::InvalidTreeName(_))
    ));
    let longest = "n".repeat(MAX_TREE_NAME_LEN);
    let lt = tx.open_tree(&longest).unwrap();
    tx.put(&lt, b"k", b"v").unwrap();
    let odd = tx.open_tree("with/slash and \u{e9}\u{0}nul").unwrap();
    tx.put(&odd, b"k", b"odd").unwrap();
    assert!(matches!(tx.tree("missing"), Err(Error::NoSuchTree(_))));
    let a = tx.open_tree("a").unwrap();
    tx.put(&a, b"k", b"a1").unwrap();
    tx.commit().unwrap();
    assert_eq!(db.begin_read().unwrap().list_trees().len(), 3);

    let rx = db.begin_read().unwrap();
    assert!(matches!(rx.tree("missing"), Err(Error::NoSuchTree(_))));
    assert_eq!(rx.get(&odd, b"k").unwrap(), Some(&b"odd"[..]));
    drop(rx);

    // A handle used after its tree is dropped, in the same transaction.
    let mut tx = db.begin_write().unwrap();
    assert!(tx.drop_tree("a").unwrap());
    assert!(!tx.drop_tree("a").unwrap());
    assert!(tx.put(&a, b"k", b"x").is_err());
    assert!(tx.get(&a, b"k").is_err());
    assert!(tx.delete(&a, b"k").is_err());
    assert!(tx.iter(&a).is_err());
    assert!(matches!(tx.tree("a"), Err(Error::NoSuchTree(_))));
    // A reader that began before the drop still sees the tree.
    let old_rx = db.begin_read().unwrap();
    tx.commit().unwrap();
    assert_eq!(old_rx.get(&a, b"k").unwrap(), Some(&b"a1"[..]));
    let rx = db.begin_read().unwrap();
    assert!(rx.get(&a, b"k").is_err());
    assert!(rx.iter(&a).is_err());
    assert!(matches!(rx.tree("a"), Err(Error::NoSuchTree(_))));
    drop(rx);

    // A new tree of the same name is a different tree: the old handle
    // does not reach it.
    let mut tx = db.begin_write().unwrap();
    let a2 = tx.open_tree("a").unwrap();
    tx.put(&a2, b"k", b"a2").unwrap();
    assert!(tx.get(&a, b"k").is_err(), "stale handle reads the new tree");
    assert!(tx.put(&a, b"k", b"stale").is_err());
    tx.commit().unwrap();
    let rx = db.begin_read().unwrap();
    assert!(rx.get(&a, b"k").is_err(), "stale handle reads the new tree");
    assert_eq!(rx.get(&a2, b"k").unwrap(), Some(&b"a2"[..]));
    assert_eq!(old_rx.get(&a, b"k").unwrap(), Some(&b"a1"[..]));
    drop(old_rx);
    db.check().unwrap();
}

#[test]
fn same_path_twice_shares_the_instance() {
    let t = temp_db("twice.ib");
    let db1 = Database::open(&t.path).unwrap();
    // Through another spelling of the same path.
    let other = t.dir.path().join(".").join("twice.ib");
    let db2 = Database::open(&other).unwrap();
    let mut tx = db1.begin_write().unwrap();
    let tr = tx.open_tree("t").unwrap();
    tx.put(&tr, b"k", b"from db1").unwrap();
    tx.commit().unwrap();
    assert_eq!(
        db2.begin_read().unwrap().get(&tr, b"k").unwrap(),
        Some(&b"from db1"[..])
    );
    let mut tx = db2.begin_write().unwrap();
    tx.put(&tr, b"k2", b"from db2").unwrap();
    tx.commit().unwrap();
    assert_eq!(
        db1.begin_read().unwrap().get(&tr, b"k2").unwrap(),
        Some(&b"from db2"[..])
    );
    // Dropping one handle leaves the other working.
    drop(db1);
    let mut tx = db2.begin_write().unwrap();
    tx.put(&tr, b"k3", b"3").unwrap();
    tx.commit().unwrap();
    drop(db2);
    // Reopened after both are gone.
    let db = Database::open(&t.path).unwrap();
    let rx = db.begin_read().unwrap();
    assert_eq!(rx.len(&rx.tree("t").unwrap()).unwrap(), 3);
}

const CHILD_PATH_ENV: &str = "IRONBARK_TEST_LOCK_CHILD_PATH";
const CHILD_EXPECT_ENV: &str = "IRONBARK_TEST_LOCK_CHILD_EXPECT";

/// Not a test on its own: the body of the child process that
/// `a_second_process_reads_but_waits_to_write` spawns. Does nothing unless the
/// environment says so.
#[test]
fn lock_child_process() {
    let Ok(path) = std::env::var(CHILD_PATH_ENV) else {
        return;
    };
    let expect = std::env::var(CHILD_EXPECT_ENV).unwrap();
    // Another process may always open and read; only writing waits.
    let db = Database::open(&path).unwrap();
    let rx = db.begin_read().unwrap();
    let t = rx.tree("t").unwrap();
    let v = String::from_utf8(rx.get(&t, b"k").unwrap().unwrap().to_vec()).unwrap();
    match (expect.as_str(), db.try_begin_write()) {
        ("locked", Err(Error::Locked)) => println!("CHILD-RESULT: locked {v}"),
        ("open", Ok(tx)) => {
            drop(tx);
            println!("CHILD-RESULT: open {v}");
        }
        (e, r) => panic!("child expected {e}, got {r:?}"),
    };
}

fn run_child(path: &Path, expect: &str) -> String {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "lock_child_process",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_PATH_ENV, path)
        .env(CHILD_EXPECT_ENV, expect)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "child failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .find_map(|l| l.split_once("CHILD-RESULT: ").map(|(_, r)| r))
        .unwrap_or_else(|| panic!("child did not run the check:\n{stdout}"))
        .to_string()
}

#[test]
fn a_second_process_reads_but_waits_to_write() {
    let t = temp_db("locked.ib");
    let db = Database::open(&t.path).unwrap();
    let mut tx = db.begin_write().unwrap();
    let tr = tx.open_tree("t").unwrap();
    tx.put(&tr, b"k", b"parent").unwrap();
    tx.commit().unwrap();
    // No writer now: the child may write.
    assert_eq!(run_child(&t.path, "open"), "open parent");
    // A write transaction open in the parent keeps the child's writer out,
    // and the child still reads the last commit, not the open transaction.
    let mut tx = db.begin_write().unwrap();
    tx.put(&tr, b"k", b"uncommitted").unwrap();
    assert_eq!(run_child(&t.path, "locked"), "locked parent");
    drop(tx);
    // A read snapshot alive in the parent keeps nobody out.
    let rx = db.begin_read().unwrap();
    assert_eq!(run_child(&t.path, "open"), "open parent");
    drop(rx);
    drop(db);
    // And the parent can open it again afterwards.
    let db = Database::open(&t.path).unwrap();
    assert_eq!(
        db.begin_read().unwrap().get(&tr, b"k").unwrap(),
        Some(&b"parent"[..])
    );
}

/// Once an operation of a write transaction fails part-way (here a
/// delete that reaches a damaged leaf), every later operation of that
/// transaction is refused with `TxnFailed`, reads included: its pages may
/// be half changed (a page freed, its parent not yet relinked), and a
/// later delete walked into such a page and panicked ("dirty page used
/// after it was freed"; found in session 61 by damaging files of 1 KiB
/// pages). The commit is refused, nothing of the transaction is kept, and
/// the next transaction works.
#[test]
fn operations_after_a_failed_one_are_refused() {
    for logged in [false, true] {
        let t = temp_db("failedtxn.ib");
        let options = Options {
            logged_commits: logged,
            ..opts(1024, Durability::Immediate)
        };
        let db = Database::open_with(&t.path, &options).unwrap();
        let mut tx = db.begin_write().unwrap();
        let tr = tx.open_tree("t").unwrap();
        for i in 0..2000u32 {
            tx.put(&tr, format!("key{i:06}").as_bytes(), &[7u8; 40])
                .unwrap();
        }
        tx.commit().unwrap();
        db.checkpoint().unwrap();
        drop(db);
        // One commit into a new file: every leaf in it is live. Damage the
        // one that holds key001000 (a byte of its cells, not its header).
        let mut image = std::fs::read(&t.path).unwrap();
        let ps = 1024;
        let leaf = (2..image.len() / ps)
            .find(|&p| {
                let b = &image[p * ps..(p + 1) * ps];
                b[16] == 2
                    && u64::from_le_bytes(b[24..32].try_into().unwrap()) == p as u64
                    && b.windows(9).any(|w| w == b"key001000")
            })
            .expect("the leaf of key001000");
        image[leaf * ps + ps - 3] ^= 0x5a;
        std::fs::write(&t.path, &image).unwrap();

        let db = Database::open_with(&t.path, &options).unwrap();
        let mut tx = db.begin_write().unwrap();
        let tr = tx.tree("t").unwrap();
        let mut first_error = None;
        for i in 0..2000u32 {
            if let Err(e) = tx.delete(&tr, format!("key{i:06}").as_bytes()) {
                first_error = Some((i, e));
                break;
            }
        }
        let (at, e) = first_error.expect("a delete reached the damaged leaf");
        assert!(matches!(e, Error::Corrupted { .. }), "delete {at}: {e}");
        let refused = |r: ironbark::Result<()>, what: &str| {
            assert!(
                matches!(r, Err(Error::TxnFailed(_))),
                "logged {logged}: {what} after a failed delete: {r:?}"
            );
        };
        refused(tx.delete(&tr, b"key000000").map(|_| ()), "a delete");
        refused(tx.put(&tr, b"key001999", b"v"), "a put");
        refused(tx.get(&tr, b"key001999").map(|_| ()), "a get");
        refused(tx.range(&tr, ..).map(|_| ()), "a range");
        refused(tx.len(&tr).map(|_| ()), "a count");
        refused(tx.delete_range(&tr, ..).map(|_| ()), "a range delete");
        refused(tx.open_tree("new").map(|_| ()), "a tree's creation");
        refused(tx.drop_tree("t").map(|_| ()), "a tree's drop");
        refused(tx.savepoint().map(|_| ()), "a savepoint");
        refused(tx.commit(), "the commit");
        // Nothing of it was kept.
        let rx = db.begin_read().unwrap();
        assert_eq!(rx.get(&tr, b"key000000").unwrap(), Some(&[7u8; 40][..]));
        drop(rx);
        // A write cursor that was open when its delete failed: its next
        // step is refused too (its position may name a freed page).
        let mut tx = db.begin_write().unwrap();
        let mut cursor = tx.cursor_mut(&tr).unwrap();
        let failed = loop {
            let entry = cursor.next().unwrap();
            assert!(
                entry.is_some(),
                "a cursor's delete reached the damaged leaf"
            );
            if let Err(e) = cursor.delete_current() {
                break e;
            }
        };
        assert!(matches!(failed, Error::Corrupted { .. }), "{failed}");
        let next = cursor.next().map(|e| e.is_some());
        assert!(
            matches!(next, Err(Error::TxnFailed(_))),
            "logged {logged}: a cursor's step after its failed delete: {next:?}"
        );
        drop(tx);
        // The file takes the next transaction.
        let mut tx = db.begin_write().unwrap();
        let other = tx.open_tree("other").unwrap();
        tx.put(&other, b"k", b"v").unwrap();
        tx.commit().unwrap();
    }
}

/// Writes (puts, deletes, overflow values, a tree drop) on a file with a
/// damaged page: errors, never a panic, and the file stays usable.
#[test]
fn writes_on_a_damaged_file_never_panic() {
    let t = temp_db("dmgwrite.ib");
    let db = Database::open(&t.path).unwrap();
    let mut rng = Rng::new(77);
    let mut tx = db.begin_write().unwrap();
    let tr = tx.open_tree("t").unwrap();
    for i in 0..3000u32 {
        let n = if i % 100 == 0 {
            9000
        } else {
            rng.below(200) as usize
        };
        let v = rng.bytes(n);
        tx.put(&tr, format!("key{i:06}").as_bytes(), &v).unwrap();
    }
    tx.commit().unwrap();
    let pages = db.stats().unwrap().page_count as usize;
    drop(db); // a clean close: open verifies nothing but the metas
    let image = std::fs::read(&t.path).unwrap();
    let mut outcomes = BTreeMap::<&str, u32>::new();
    for i in 0..300u64 {
        // Each case on its own seed, so a failure is reproducible alone.
        let mut rng = Rng::new(1000 + i);
        let mut bad = image.clone();
        let p = 2 + rng.below(pages as u64 - 2) as usize;
        for _ in 0..1 + rng.below(3) {
            // Headers more often than anything else.
            let at = if rng.chance(50) {
                rng.below(64)
            } else {
                rng.below(PS as u64)
            };
            bad[p * PS + at as usize] = rng.next_u64() as u8;
        }
        let t2 = temp_db("dmg.ib");
        std::fs::write(&t2.path, &bad).unwrap();
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            let Ok(db) = Database::open(&t2.path) else {
                return "open failed";
            };
            let mut tx = db.begin_write().unwrap();
            let tr = tx.tree("t").unwrap();
            for j in 0..300u32 {
                let k = format!("key{:06}", rng.below(3200));
                let _ = match j % 3 {
                    0 => tx.delete(&tr, k.as_bytes()).map(|_| ()),
                    1 => tx.put(&tr, k.as_bytes(), &vec![1u8; rng.below(3) as usize * 1000]),
                    _ => tx.put(&tr, k.as_bytes(), b"x"),
                };
            }
            if rng.chance(10) {
                let _ = tx.drop_tree("t");
            }
            let committed = tx.commit().is_ok();
            let _ = db.check();
            // Whatever happened, the instance still takes a commit.
            let mut tx = db.begin_write().unwrap();
            let other = tx.open_tree("other").unwrap();
            tx.put(&other, b"k", b"v").unwrap();
            tx.commit().unwrap();
            if committed {
                "committed"
            } else {
                "commit refused"
            }
        }))
        .unwrap_or_else(|_| {
            let _ = std::fs::write(format!("/tmp/ironbark-damaged-{i}.ib"), &bad);
            panic!(
                "damage {i} (seed {}) on page {p}: a write panicked",
                1000 + i
            )
        });
        *outcomes.entry(outcome).or_default() += 1;
    }
    eprintln!("writes on damaged files: {outcomes:?}");
}

#[test]
fn inverted_and_empty_ranges_are_empty() {
    use std::ops::Bound::{Excluded, Included, Unbounded};
    let t = temp_db("ranges.ib");
    let db = Database::open(&t.path).unwrap();
    let mut tx = db.begin_write().unwrap();
    let tr = tx.open_tree("t").unwrap();
    let empty = tx.open_tree("empty").unwrap();
    for i in 0..1000u32 {
        tx.put(&tr, format!("{i:05}").as_bytes(), b"v").unwrap();
    }
    tx.commit().unwrap();
    let rx = db.begin_read().unwrap();
    let (a, b): (&[u8], &[u8]) = (b"00500", b"00100");
    let count = |r: (std::ops::Bound<&[u8]>, std::ops::Bound<&[u8]>)| {
        let f = rx.range(&tr, r).unwrap().filter(|e| e.is_ok()).count();
        let back = rx
            .range(&tr, r)
            .unwrap()
            .rev()
            .filter(|e| e.is_ok())
            .count();
        assert_eq!(f, back, "{r:?}: forward and reverse differ");
        f
    };
    assert_eq!(count((Included(a), Excluded(b))), 0);
    assert_eq!(count((Included(a), Included(b))), 0);
    assert_eq!(count((Excluded(a), Excluded(b))), 0);
    assert_eq!(count((Included(a), Excluded(a))), 0);
    assert_eq!(count((Excluded(a), Included(a))), 0);
    assert_eq!(count((Excluded(a), Excluded(a))), 0);
    assert_eq!(count((Included(a), Included(a))), 1);
    assert_eq!(count((Included(b), Excluded(a))), 400);
    assert_eq!(count((Excluded(b"00999"), Unbounded)), 0);
    assert_eq!(count((Unbounded, Excluded(b"00000"))), 0);
    assert_eq!(count((Unbounded, Included(b"00000"))), 1);
    assert_eq!(count((Included(b""), Unbounded)), 1000);
    assert_eq!(count((Excluded(b""), Unbounded)), 1000);
    assert_eq!(rx.iter(&empty).unwrap().count(), 0);
    assert_eq!(rx.iter(&empty).unwrap().rev().count(), 0);
    assert_eq!(rx.range(&empty, a..b).unwrap().count(), 0);
    assert_eq!(rx.get(&empty, b"").unwrap(), None);
}

#[test]
fn many_trees_with_long_names() {
    let t = temp_db("trees.ib");
    let db = Database::open_with(&t.path, &opts(PS, Durability::None)).unwrap();
    let name = |i: u32| format!("{i:05}{}", "n".repeat(MAX_TREE_NAME_LEN - 5));
    let mut tx = db.begin_write().unwrap();
    for i in 0..3000u32 {
        let tr = tx.open_tree(&name(i)).unwrap();
        tx.put(&tr, b"k", &i.to_le_bytes()).unwrap();
    }
    tx.commit().unwrap();
    db.check().unwrap();
    let mut alive: std::collections::BTreeSet<u32> = (0..3000).collect();
    for r in 0..5u32 {
        let mut tx = db.begin_write().unwrap();
        for i in (r..3000u32).step_by(7) {
            if i % 2 == 0 {
                assert_eq!(tx.drop_tree(&name(i)).unwrap(), alive.remove(&i));
            } else {
                let tr = tx.open_tree(&name(i)).unwrap();
                tx.put(&tr, b"k2", &[0u8; 3000]).unwrap();
                alive.insert(i);
            }
        }
        tx.commit().unwrap();
        db.check().unwrap();
    }
    drop(db);
    let db = Database::open(&t.path).unwrap();
    let report = db.check().unwrap();
    let rx = db.begin_read().unwrap();
    let names = rx.list_trees();
    assert_eq!(names.len(), alive.len());
    assert_eq!(report.trees, alive.len());
    for i in alive {
        let tr = rx.tree(&name(i)).unwrap();
        assert_eq!(rx.get(&tr, b"k").unwrap(), Some(&i.to_le_bytes()[..]));
    }
}

/// A `ReadTxn` keeps the instance alive after every `Database` handle is
/// dropped; reopening the path meanwhile gives the same instance.
#[test]
fn reader_outlives_its_database_handle() {
    let t = temp_db("outlive.ib");
    let db = Database::open(&t.path).unwrap();
    let mut tx = db.begin_write().unwrap();
    let tr = tx.open_tree("t").unwrap();
    tx.put(&tr, b"k", b"1").unwrap();
    tx.commit().unwrap();
    let rx = db.begin_read().unwrap();
    drop(db);
    assert_eq!(rx.get(&tr, b"k").unwrap(), Some(&b"1"[..]));
    let db = Database::open(&t.path).unwrap();
    assert_eq!(db.stats().unwrap().live_readers, 1);
    let mut tx = db.begin_write().unwrap();
    tx.put(&tr, b"k", b"2").unwrap();
    tx.commit().unwrap();
    drop(db);
    assert_eq!(rx.get(&tr, b"k").unwrap(), Some(&b"1"[..]));
    drop(rx);
    let db = Database::open(&t.path).unwrap();
    assert_eq!(
        db.begin_read().unwrap().get(&tr, b"k").unwrap(),
        Some(&b"2"[..])
    );
    db.check().unwrap();
}

/// The write path marks its own (uncommitted) pages with bit 63 of the page
/// number. A committed page whose child or overflow reference has that bit
/// set (a damaged or hostile file) must be reported as `Corrupted`, like
/// the read path does, not taken for a dirty page: that panics (index out of
/// bounds, or "a dirty page is unreachable" at commit).
#[test]
fn committed_reference_with_bit_63_set_is_corruption() {
    let t = temp_db("bit63.ib");
    let db = Database::open(&t.path).unwrap();
    let mut tx = db.begin_write().unwrap();
    let tr = tx.open_tree("t").unwrap();
    for i in 0..20u32 {
        tx.put(&tr, format!("small{i:02}").as_bytes(), b"v")
            .unwrap();
    }
    tx.put(&tr, b"big", &[5u8; 10_000]).unwrap();
    let txn = tx.txn_id();
    tx.commit().unwrap();
    drop(db);
    let mut image = std::fs::read(&t.path).unwrap();
    // The one leaf; its cell for "big" holds `u64 blob page, u64 blob txn`
    // after the key.
    let leaves = leaves_of(&image, txn);
    assert_eq!(leaves.len(), 1);
    let leaf = leaves[0];
    let (_, cell) = leaf_keys(&image[leaf * PS..(leaf + 1) * PS])
        .into_iter()
        .find(|(k, _)| k == b"big")
        .unwrap();
    let msb = leaf * PS + cell + 7 + 3 + 7;
    image[msb] |= 0x80;
    // Reseal the page, so only the reference is wrong.
    let sum = xxhash_rust::xxh3::xxh3_64(&image[leaf * PS + 8..(leaf + 1) * PS]);
    image[leaf * PS..leaf * PS + 8].copy_from_slice(&sum.to_le_bytes());

    let (_k, r) = open_image(&image, "bit 63");
    let db = r.unwrap();
    // A handle belongs to the file it came from: this is a copy.
    let tr = db.begin_read().unwrap().tree("t").unwrap();
    // The read path: Corrupted.
    let r = db
        .begin_read()
        .unwrap()
        .get(&tr, b"big")
        .map(|v| v.map(<[u8]>::len));
    assert!(matches!(r, Err(Error::Corrupted { .. })), "read: {r:?}");
    // The write path: the same lookup, a delete, and a commit of a leaf
    // copied from the damaged one.
    let lookup = catch_unwind(AssertUnwindSafe(|| {
        let tx = db.begin_write().unwrap();
        let r = tx.get(&tr, b"big").map(|v| v.map(<[u8]>::len));
        format!("{r:?}")
    }));
    let delete = catch_unwind(AssertUnwindSafe(|| {
        let mut tx = db.begin_write().unwrap();
        format!("{:?}", tx.delete(&tr, b"big"))
    }));
    let commit = catch_unwind(AssertUnwindSafe(|| {
        let mut tx = db.begin_write().unwrap();
        // Copying the damaged leaf may already report it; if not, commit must.
        match tx.put(&tr, b"small00", b"w") {
            Ok(()) => format!("{:?}", tx.commit()),
            Err(e) => format!("{:?}", Err::<(), _>(e)),
        }
    }));
    assert!(
        lookup.is_ok() && delete.is_ok() && commit.is_ok(),
        "write path panicked on a committed reference with bit 63 set: \
         get {:?}, delete {:?}, put+commit {:?}",
        lookup.is_ok(),
        delete.is_ok(),
        commit.is_ok()
    );
    let lookup = lookup.unwrap();
    assert!(
        lookup.starts_with("Err(Corrupted"),
        "WriteTxn::get gave {lookup}"
    );
}

/// Damage must not be laundered by a later write. Copy-on-write copies a
/// committed page into the transaction and seals the copy with a fresh
/// checksum; if the page was damaged on disk (a flipped value byte: reads
/// do not verify checksums, `check()` does), the damage then becomes
/// permanent and `check()` can no longer see it. Either the write reports
/// `Corrupted` naming the page, or `check()` still does afterwards.
#[test]
fn damage_is_not_laundered_by_a_later_write() {
    let t = temp_db("launder.ib");
    let db = Database::open(&t.path).unwrap();
    let mut tx = db.begin_write().unwrap();
    let tr = tx.open_tree("t").unwrap();
    for i in 0..10u32 {
        tx.put(&tr, format!("k{i}").as_bytes(), b"good-value")
            .unwrap();
    }
    tx.commit().unwrap();
    // A logged commit's leaf is written to the file by the checkpoint,
    // under the checkpoint's txn id: the newest commit's.
    db.checkpoint().unwrap();
    let txn = db.begin_read().unwrap().txn_id();
    drop(db);
    let mut image = std::fs::read(&t.path).unwrap();
    let leaves = leaves_of(&image, txn);
    assert_eq!(leaves.len(), 1);
    let leaf = leaves[0];
    let pos = image[leaf * PS..(leaf + 1) * PS]
        .windows(10)
        .rposition(|w| w == b"good-value")
        .unwrap();
    image[leaf * PS + pos] = b'B';
    let (_k, r) = open_image(&image, "launder");
    let db = r.unwrap();
    // A handle belongs to the file it came from: this is a copy.
    let tr = db.begin_read().unwrap().tree("t").unwrap();
    let c = db.check();
    assert!(
        matches!(&c, Err(e) if is_corrupted_at(e, leaf)),
        "check before the write: {c:?}"
    );
    let write = (|| {
        let mut tx = db.begin_write()?;
        tx.put(&tr, b"zzz", b"new")?;
        tx.commit()
    })();
    match write {
        Err(e) => assert!(is_corrupted_at(&e, leaf), "the write failed with {e}"),
        Ok(()) => {
            let rx = db.begin_read().unwrap();
            let damaged: Vec<String> = rx
                .iter(&tr)
                .unwrap()
                .map(|e| e.unwrap())
                .filter(|(k, v)| k.starts_with(b"k") && *v != b"good-value")
                .map(|(k, v)| {
                    format!(
                        "{} = {}",
                        String::from_utf8_lossy(k),
                        String::from_utf8_lossy(v)
                    )
                })
                .collect();
            let c = db.check();
            assert!(
                matches!(&c, Err(Error::Corrupted { .. })),
                "a write over damaged leaf {leaf} resealed it: check() now passes \
                 while the tree reads {damaged:?}"
            );
        }
    }
}

/// A value's blob run whose header claims more pages than the value needs
/// (damage the checksum would show, which a write does not read): the
/// delete of that value is refused as damage, where it freed the pages
/// the header claimed, other values' among them, and a later commit
/// panicked ("free extents overlap"; found in session 60). The other
/// values delete, and the file takes commits. The same holds when the
/// header's value length is damaged to agree with its run length: the
/// leaf cell's length is what the free trusts.
#[test]
fn a_damaged_blob_run_length_is_damage_when_its_value_is_freed() {
    for (logged, with_len) in [(false, false), (true, false), (false, true), (true, true)] {
        let t = temp_db("blobrun.ib");
        // Durable commits: an open re-checks the pages of a commit that
        // may not have been (and takes a damaged one for a torn write).
        let options = Options {
            logged_commits: logged,
            ..opts(PS, Durability::Immediate)
        };
        let db = Database::open_with(&t.path, &options).unwrap();
        let mut tx = db.begin_write().unwrap();
        let tr = tx.open_tree("t").unwrap();
        for i in 0..20u32 {
            tx.put(&tr, &i.to_be_bytes(), &vec![i as u8; 9000]).unwrap();
        }
        tx.commit().unwrap();
        drop(db);
        let mut image = std::fs::read(&t.path).unwrap();
        let run = (2..image.len() / PS)
            .find(|&p| {
                let b = &image[p * PS..(p + 1) * PS];
                b[16] == 3
                    && u64::from_le_bytes(b[24..32].try_into().unwrap()) == p as u64
                    && u64::from_le_bytes(b[32..40].try_into().unwrap()) == 9000
            })
            .expect("a value's blob run");
        if with_len {
            // Five pages and a length that needs them: the header agrees
            // with itself, and only the cell says otherwise.
            image[run * PS + 20..run * PS + 24].copy_from_slice(&5u32.to_le_bytes());
            let len = (5 * PS - 40 - 1) as u64;
            image[run * PS + 32..run * PS + 40].copy_from_slice(&len.to_le_bytes());
        } else {
            image[run * PS + 20..run * PS + 24].copy_from_slice(&40u32.to_le_bytes());
        }
        std::fs::write(&t.path, &image).unwrap();

        let db = Database::open_with(&t.path, &options).unwrap();
        let mut refused = 0;
        for i in 0..20u32 {
            let mut tx = db.begin_write().unwrap();
            let tr = tx
                .tree("t")
                .unwrap_or_else(|e| panic!("logged {logged}, delete {i}: {e}"));
            let deleted = tx.delete(&tr, &i.to_be_bytes()).and_then(|_| tx.commit());
            match deleted {
                Ok(()) => {}
                Err(Error::Corrupted { detail, .. }) => {
                    assert!(detail.contains("blob"), "{detail}");
                    refused += 1;
                }
                Err(e) => panic!("delete {i}: {e}"),
            }
            let _ = db.checkpoint();
        }
        assert_eq!(refused, 1, "logged: {logged}, length damaged: {with_len}");
        let mut tx = db.begin_write().unwrap();
        let other = tx.open_tree("other").unwrap();
        tx.put(&other, b"k", b"v").unwrap();
        tx.commit().unwrap();
        drop(db);
    }
}
