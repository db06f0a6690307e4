//! The convenience API (`first`/`last`, nearest-key lookups, `prefix`,
//! `pop_*`, `insert`, `get_or_insert`, `clear`, `delete_range`, `retain`,
//! `Tree` as a map key), checked against a `BTreeMap` model on trees deep
//! enough to span many pages, in both kinds of transaction.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::ops::Bound;

use common::{temp_db, Images, Rng};
use ironbark::{Database, Error, Options, Range, ReadTxn, Tree, WriteTxn};

type Map = BTreeMap<Vec<u8>, Vec<u8>>;
type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// Small pages, so that a few thousand keys make a tree of several levels.
fn open_small(path: &std::path::Path) -> Database {
    let options = Options {
        page_size: 1024,
        ..Options::default()
    };
    Database::open_with(path, &options).unwrap()
}

/// Keys over a small alphabet that includes 0x00 and 0xff, so that keys
/// share prefixes, collide, and sit at the edges of the byte order.
fn random_key(rng: &mut Rng) -> Vec<u8> {
    const ALPHABET: [u8; 6] = [0x00, 0x01, b'a', b'b', 0xfe, 0xff];
    let len = rng.below(7) as usize;
    (0..len)
        .map(|_| ALPHABET[rng.below(ALPHABET.len() as u64) as usize])
        .collect()
}

/// Mostly small values, some long enough to go to overflow pages.
fn random_value(rng: &mut Rng) -> Vec<u8> {
    let len = if rng.chance(5) {
        600 + rng.below(3000) as usize
    } else {
        rng.below(40) as usize
    };
    rng.bytes(len)
}

fn owned(e: Option<(&[u8], &[u8])>) -> Option<(Vec<u8>, Vec<u8>)> {
    e.map(|(k, v)| (k.to_vec(), v.to_vec()))
}

fn model_entry<'a, I: Iterator<Item = (&'a Vec<u8>, &'a Vec<u8>)>>(
    mut it: I,
) -> Option<(Vec<u8>, Vec<u8>)> {
    it.next().map(|(k, v)| (k.clone(), v.clone()))
}

fn collect<'a>(
    r: impl Iterator<Item = ironbark::Result<(&'a [u8], &'a [u8])>>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    r.map(|e| {
        let (k, v) = e.unwrap();
        (k.to_vec(), v.to_vec())
    })
    .collect()
}

/// The same lookups through either kind of transaction.
trait Lookups {
    fn first(&self, t: &Tree) -> ironbark::Result<Option<(&[u8], &[u8])>>;
    fn last(&self, t: &Tree) -> ironbark::Result<Option<(&[u8], &[u8])>>;
    fn get_ge(&self, t: &Tree, k: &[u8]) -> ironbark::Result<Option<(&[u8], &[u8])>>;
    fn get_gt(&self, t: &Tree, k: &[u8]) -> ironbark::Result<Option<(&[u8], &[u8])>>;
    fn get_le(&self, t: &Tree, k: &[u8]) -> ironbark::Result<Option<(&[u8], &[u8])>>;
    fn get_lt(&self, t: &Tree, k: &[u8]) -> ironbark::Result<Option<(&[u8], &[u8])>>;
    fn contains_key(&self, t: &Tree, k: &[u8]) -> ironbark::Result<bool>;
    fn prefix(&self, t: &Tree, p: &[u8]) -> ironbark::Result<Range<'_>>;
}

macro_rules! lookups {
    ($t:ty) => {
        impl Lookups for $t {
            fn first(&self, t: &Tree) -> ironbark::Result<Option<(&[u8], &[u8])>> {
                <$t>::first(self, t)
            }
            fn last(&self, t: &Tree) -> ironbark::Result<Option<(&[u8], &[u8])>> {
                <$t>::last(self, t)
            }
            fn get_ge(&self, t: &Tree, k: &[u8]) -> ironbark::Result<Option<(&[u8], &[u8])>> {
                <$t>::get_ge(self, t, k)
            }
            fn get_gt(&self, t: &Tree, k: &[u8]) -> ironbark::Result<Option<(&[u8], &[u8])>> {
                <$t>::get_gt(self, t, k)
            }
            fn get_le(&self, t: &Tree, k: &[u8]) -> ironbark::Result<Option<(&[u8], &[u8])>> {
                <$t>::get_le(self, t, k)
            }
            fn get_lt(&self, t: &Tree, k: &[u8]) -> ironbark::Result<Option<(&[u8], &[u8])>> {
                <$t>::get_lt(self, t, k)
            }
            fn contains_key(&self, t: &Tree, k: &[u8]) -> ironbark::Result<bool> {
                <$t>::contains_key(self, t, k)
            }
            fn prefix(&self, t: &Tree, p: &[u8]) -> ironbark::Result<Range<'_>> {
                <$t>::prefix(self, t, p)
            }
        }
    };
}
lookups!(ReadTxn);
lookups!(WriteTxn<'_>);

/// Every lookup of `txn` agrees with `model` at `probes` keys, and every
/// prefix scan (forward, reverse, and from both ends at once) with the
/// model's keys that start with the prefix.
fn check_lookups(txn: &impl Lookups, t: &Tree, model: &Map, probes: &[Vec<u8>]) {
    assert_eq!(owned(txn.first(t).unwrap()), model_entry(model.iter()));
    assert_eq!(owned(txn.last(t).unwrap()), model_entry(model.iter().rev()));
    for key in probes {
        let k = key.as_slice();
        let ge = model_entry(model.range::<[u8], _>((Bound::Included(k), Bound::Unbounded)));
        let gt = model_entry(model.range::<[u8], _>((Bound::Excluded(k), Bound::Unbounded)));
        let le = model_entry(
            model
                .range::<[u8], _>((Bound::Unbounded, Bound::Included(k)))
                .rev(),
        );
        let lt = model_entry(
            model
                .range::<[u8], _>((Bound::Unbounded, Bound::Excluded(k)))
                .rev(),
        );
        assert_eq!(owned(txn.get_ge(t, k).unwrap()), ge, "get_ge {k:?}");
        assert_eq!(owned(txn.get_gt(t, k).unwrap()), gt, "get_gt {k:?}");
        assert_eq!(owned(txn.get_le(t, k).unwrap()), le, "get_le {k:?}");
        assert_eq!(owned(txn.get_lt(t, k).unwrap()), lt, "get_lt {k:?}");
        assert_eq!(
            txn.contains_key(t, k).unwrap(),
            model.contains_key(k),
            "contains {k:?}"
        );

        let want: Vec<(Vec<u8>, Vec<u8>)> = model
            .iter()
            .filter(|(mk, _)| mk.starts_with(k))
            .map(|(mk, mv)| (mk.clone(), mv.clone()))
            .collect();
        assert_eq!(collect(txn.prefix(t, k).unwrap()), want, "prefix {k:?}");
        let mut rev = collect(txn.prefix(t, k).unwrap().rev());
        rev.reverse();
        assert_eq!(rev, want, "prefix {k:?} reversed");
        // From both ends at once: the two halves meet without overlap.
        let mut both = txn.prefix(t, k).unwrap();
        let (mut front, mut back) = (Vec::new(), Vec::new());
        while let Some(e) = both.next() {
            front.push(e.unwrap().0.to_vec());
            match both.next_back() {
                Some(e) => back.push(e.unwrap().0.to_vec()),
                None => break,
            }
        }
        back.reverse();
        front.extend(back);
        let want_keys: Vec<Vec<u8>> = want.iter().map(|(k, _)| k.clone()).collect();
        assert_eq!(front, want_keys, "prefix {k:?} from both ends");
    }
}

/// Probe keys: random ones, every key in the model, and the edge prefixes
/// (empty, 0xff runs, a byte followed by 0xff).
fn probes(rng: &mut Rng, model: &Map) -> Vec<Vec<u8>> {
    let mut p: Vec<Vec<u8>> = (0..300).map(|_| random_key(rng)).collect();
    p.extend(model.keys().step_by(7).cloned());
    p.extend([
        vec![],
        vec![0xff],
        vec![0xff, 0xff],
        vec![0xff; 7],
        vec![0x00],
        vec![b'a', 0xff],
        vec![0xfe, 0xff],
    ]);
    p
}

#[test]
fn lookups_agree_with_model_in_both_transactions() {
    let db_dir = temp_db("lookups.ib");
    let db = open_small(&db_dir.path);
    let mut rng = Rng::new(0x5eed_0001);
    let mut model = Map::new();
    let t = {
        let mut tx = db.begin_write().unwrap();
        let t = tx.open_tree("t").unwrap();
        // An empty tree: every lookup is None, every prefix empty.
        let empty: Vec<Vec<u8>> = vec![vec![], vec![0xff], b"a".to_vec()];
        check_lookups(&tx, &t, &model, &empty);
        tx.commit().unwrap();
        t
    };
    check_lookups(&db.begin_read().unwrap(), &t, &model, &[vec![], vec![0xff]]);
    for round in 0..4 {
        let mut tx = db.begin_write().unwrap();
        for _ in 0..1500 {
            let k = random_key(&mut rng);
            if rng.chance(25) {
                tx.delete(&t, &k).unwrap();
                model.remove(&k);
            } else {
                let v = random_value(&mut rng);
                tx.put(&t, &k, &v).unwrap();
                model.insert(k, v);
            }
        }
        let p = probes(&mut rng, &model);
        // Uncommitted changes, through the write transaction's own pages.
        check_lookups(&tx, &t, &model, &p);
        tx.commit().unwrap();
        let rx = db.begin_read().unwrap();
        check_lookups(&rx, &t, &model, &p);
        assert!(
            model.len() > 100,
            "round {round}: the model is too small to test much"
        );
    }
    db.check().unwrap();
}

#[test]
fn prefix_results_outlive_the_prefix_argument() {
    let db_dir = temp_db("prefix.ib");
    let db = Database::open(&db_dir.path).unwrap();
    let mut tx = db.begin_write().unwrap();
    let t = tx.open_tree("t").unwrap();
    for k in [
        &b"app"[..],
        b"apple",
        b"apply",
        b"b",
        &[b'a', 0xff],
        &[0xff],
        &[0xff, 0xff, 1],
    ] {
        tx.put(&t, k, k).unwrap();
    }
    tx.commit().unwrap();
    let rx = db.begin_read().unwrap();
    let keys: Vec<&[u8]> = {
        let prefix = b"appl".to_vec();
        let range = rx.prefix(&t, &prefix).unwrap();
        drop(prefix);
        range.map(|e| e.unwrap().0).collect()
    };
    assert_eq!(keys, [&b"apple"[..], b"apply"]);
    let ff: Vec<&[u8]> = rx
        .prefix(&t, &[0xff])
        .unwrap()
        .map(|e| e.unwrap().0)
        .collect();
    assert_eq!(ff, [&[0xff][..], &[0xff, 0xff, 1]]);
    let a: Vec<&[u8]> = rx
        .prefix(&t, b"a")
        .unwrap()
        .rev()
        .map(|e| e.unwrap().0)
        .collect();
    assert_eq!(a, [&[b'a', 0xff][..], b"apply", b"apple", b"app"]);
    assert_eq!(rx.prefix(&t, b"").unwrap().count(), 7);
    // A nearest-key lookup's entry outlives its key argument too.
    let (k, v) = {
        let probe = b"apple!".to_vec();
        rx.get_gt(&t, &probe).unwrap().unwrap()
    };
    assert_eq!((k, v), (&b"apply"[..], &b"apply"[..]));
    let first = rx.first(&t).unwrap().unwrap().0;
    assert_eq!(first, b"app");
}

#[test]
fn pop_insert_and_get_or_insert_agree_with_model() {
    let db_dir = temp_db("pop.ib");
    let db = open_small(&db_dir.path);
    let mut rng = Rng::new(0x5eed_0002);
    let mut model = Map::new();
    let mut tx = db.begin_write().unwrap();
    let t = tx.open_tree("t").unwrap();
    for i in 0..20_000u32 {
        let k = random_key(&mut rng);
        match rng.below(10) {
            0 => assert_eq!(tx.pop_first(&t).unwrap(), model.pop_first(), "op {i}"),
            1 => assert_eq!(tx.pop_last(&t).unwrap(), model.pop_last(), "op {i}"),
            2 | 3 => {
                let v = random_value(&mut rng);
                // The value already there, or else the one given.
                let want = model.get(&k).cloned().unwrap_or_else(|| v.clone());
                assert_eq!(tx.get_or_insert(&t, &k, &v).unwrap(), &want[..], "op {i}");
                model.entry(k).or_insert(v);
            }
            _ => {
                let v = random_value(&mut rng);
                assert_eq!(tx.insert(&t, &k, &v).unwrap(), model.insert(k, v), "op {i}");
            }
        }
        if i % 2000 == 1999 {
            assert_eq!(tx.len(&t).unwrap(), model.len() as u64);
            tx.commit().unwrap();
            tx = db.begin_write().unwrap();
        }
    }
    assert_eq!(
        collect(tx.iter(&t).unwrap()),
        model.into_iter().collect::<Vec<_>>()
    );
    // Drain from both ends.
    while let Some((k, _)) = tx.pop_first(&t).unwrap() {
        if let Some((k2, _)) = tx.pop_last(&t).unwrap() {
            assert!(k < k2);
        }
    }
    assert!(tx.is_empty(&t).unwrap());
    assert_eq!(tx.pop_first(&t).unwrap(), None);
    assert_eq!(tx.pop_last(&t).unwrap(), None);
    tx.commit().unwrap();
    db.check().unwrap();
}

#[test]
fn insert_refused_for_size_changes_nothing() {
    let db_dir = temp_db("sizes.ib");
    let db = Database::open(&db_dir.path).unwrap();
    let mut tx = db.begin_write().unwrap();
    let t = tx.open_tree("t").unwrap();
    tx.put(&t, b"k", b"v").unwrap();
    let long_key = vec![7u8; db.max_key_len() + 1];
    assert!(matches!(
        tx.insert(&t, &long_key, b"x"),
        Err(Error::KeyTooLarge { .. })
    ));
    assert!(matches!(
        tx.get_or_insert(&t, &long_key, b"x"),
        Err(Error::KeyTooLarge { .. })
    ));
    assert_eq!(tx.len(&t).unwrap(), 1);
    tx.commit().unwrap();
}

/// Fills `t` with `n` keys of 60-byte values, and with `blobs` every
/// 50th value long enough for overflow pages.
fn fill(tx: &mut WriteTxn<'_>, t: &Tree, n: u32, seed: u32, blobs: bool) {
    for i in 0..n {
        let k = (i.wrapping_mul(2_654_435_761) ^ seed).to_be_bytes();
        let len = if blobs && i % 50 == 0 { 3000 } else { 60 };
        tx.put(t, &k, &vec![i as u8; len]).unwrap();
    }
}

#[test]
fn clear_keeps_handles_and_snapshots() {
    let db_dir = temp_db("clear.ib");
    let db = open_small(&db_dir.path);
    let mut tx = db.begin_write().unwrap();
    let t = tx.open_tree("t").unwrap();
    let other = tx.open_tree("other").unwrap();
    fill(&mut tx, &t, 5000, 1, true);
    tx.put(&other, b"stays", b"1").unwrap();
    tx.commit().unwrap();

    let before = db.begin_read().unwrap();
    let mut tx = db.begin_write().unwrap();
    assert_eq!(tx.clear(&t).unwrap(), 5000);
    assert_eq!(tx.clear(&t).unwrap(), 0);
    assert!(tx.is_empty(&t).unwrap());
    assert_eq!(tx.first(&t).unwrap(), None);
    // The same handle, in the clearing transaction and after it.
    tx.put(&t, b"new", b"value").unwrap();
    tx.commit().unwrap();
    let rx = db.begin_read().unwrap();
    assert_eq!(rx.tree("t").unwrap(), t);
    assert_eq!(
        collect(rx.iter(&t).unwrap()),
        [(b"new".to_vec(), b"value".to_vec())]
    );
    assert_eq!(rx.get(&other, b"stays").unwrap(), Some(&b"1"[..]));
    // A snapshot from before the clear still sees every entry.
    assert_eq!(before.len(&t).unwrap(), 5000);
    assert_eq!(before.iter(&t).unwrap().count(), 5000);
    drop(before);
    db.check().unwrap();
    let stats = db.stats().unwrap();
    let ts = stats.trees.iter().find(|s| s.name == "t").unwrap();
    assert_eq!(ts.entries, 1);
    drop(rx);
    drop(db);
    // And after reopening (the clear was a file commit; later ones logged).
    let db = open_small(&db_dir.path);
    let rx = db.begin_read().unwrap();
    let t2 = rx.tree("t").unwrap();
    assert_eq!(rx.len(&t2).unwrap(), 1);
    db.check().unwrap();
}

#[test]
fn clear_in_a_mixed_transaction_survives_a_crash() {
    // Puts before and after a clear in one transaction, a logged commit
    // after it, and the files as a crash leaves them (no checkpoint at
    // close): recovery replays the log, the clear included (one redo
    // operation), puts around it in their order.
    let db_dir = temp_db("mixed.ib");
    let crashed = db_dir.dir.path().join("crashed.ib");
    {
        let db = open_small(&db_dir.path);
        let mut tx = db.begin_write().unwrap();
        let t = tx.open_tree("t").unwrap();
        tx.put(&t, b"a", b"1").unwrap();
        tx.commit().unwrap();
        let mut tx = db.begin_write().unwrap();
        tx.put(&t, b"b", b"2").unwrap();
        assert_eq!(tx.clear(&t).unwrap(), 2);
        tx.put(&t, b"c", b"3").unwrap();
        tx.commit().unwrap();
        let mut tx = db.begin_write().unwrap();
        tx.put(&t, b"d", b"4").unwrap();
        tx.commit().unwrap();
        // Logged commits: the range reaches the log as one operation, the
        // other removals as deletes.
        let mut tx = db.begin_write().unwrap();
        for k in [b"e", b"f", b"g", b"h"] {
            tx.put(&t, k, b"5").unwrap();
        }
        assert_eq!(
            tx.delete_range(&t, b"e".as_slice()..=b"f".as_slice())
                .unwrap(),
            2
        );
        tx.commit().unwrap();
        let mut tx = db.begin_write().unwrap();
        assert_eq!(tx.retain(&t, |k, _| k != b"g").unwrap(), 1);
        assert_eq!(
            tx.pop_last(&t).unwrap(),
            Some((b"h".to_vec(), b"5".to_vec()))
        );
        tx.commit().unwrap();
        Images::read(&db_dir.path).write(&crashed);
    }
    for path in [&crashed, &db_dir.path] {
        let db = open_small(path);
        let rx = db.begin_read().unwrap();
        let t = rx.tree("t").unwrap();
        assert_eq!(
            collect(rx.iter(&t).unwrap()),
            [
                (b"c".to_vec(), b"3".to_vec()),
                (b"d".to_vec(), b"4".to_vec())
            ],
            "{}",
            path.display()
        );
        db.check().unwrap();
    }
}

#[test]
fn delete_range_across_leaves_survives_a_crash() {
    // A range across many leaves, removed a leaf at a time in a logged
    // commit (small, so logged as its deletes), and the files as a crash
    // leaves them: replaying the log must remove the same keys.
    let db_dir = temp_db("range_crash.ib");
    let crashed = db_dir.dir.path().join("crashed.ib");
    let (expected, removed) = {
        let db = open_small(&db_dir.path);
        let mut tx = db.begin_write().unwrap();
        let big = tx.open_tree("big").unwrap();
        fill(&mut tx, &big, 3000, 9, false);
        tx.commit().unwrap();
        // (`stats` checkpoints: only before the commit under test.)
        let logged_before = db.stats().unwrap().counters.logged_commits;
        let mut tx = db.begin_write().unwrap();
        let lo = 0x4000_0000u32.to_be_bytes();
        let hi = 0x4800_0000u32.to_be_bytes();
        let removed = tx.delete_range(&big, lo.as_slice()..hi.as_slice()).unwrap();
        tx.commit().unwrap();
        Images::read(&db_dir.path).write(&crashed);
        assert!(removed > 50, "removed {removed}");
        assert_eq!(
            db.stats().unwrap().counters.logged_commits,
            logged_before + 1
        );
        let rx = db.begin_read().unwrap();
        (collect(rx.iter(&big).unwrap()), removed)
    };
    assert_eq!(expected.len() as u64, 3000 - removed);
    let db = open_small(&crashed);
    let rx = db.begin_read().unwrap();
    let big = rx.tree("big").unwrap();
    assert_eq!(collect(rx.iter(&big).unwrap()), expected);
    db.check().unwrap();
}

#[test]
fn clears_and_ranges_stay_logged_and_replay_after_a_crash() {
    // A range within one leaf, a range of all of a tree (a clear), and a
    // range that prunes whole subtrees are each one redo operation: their
    // commits stay logged, and a crash image replays them to the same
    // trees. (A `clear` of its own: `clear_in_a_mixed_transaction_...`.)
    let db_dir = temp_db("logging.ib");
    let crashed = db_dir.dir.path().join("crashed.ib");
    let logged = |db: &Database| db.stats().unwrap().counters.logged_commits;
    let expected = {
        let db = open_small(&db_dir.path);
        let mut tx = db.begin_write().unwrap();
        let small = tx.open_tree("small").unwrap();
        let big = tx.open_tree("big").unwrap();
        let wide = tx.open_tree("wide").unwrap();
        fill(&mut tx, &big, 2000, 7, false);
        fill(&mut tx, &wide, 20_000, 8, true);
        for k in [b"a", b"b", b"c"] {
            tx.put(&small, k, b"v").unwrap();
        }
        tx.commit().unwrap();
        // (`stats` checkpoints: only before the commits under test.)
        let before = logged(&db);
        // All of a one-leaf tree: a range op, logged (beside a put, so
        // that the commit has a page to weigh its record against).
        let mut tx = db.begin_write().unwrap();
        assert_eq!(
            tx.delete_range::<std::ops::RangeFull>(&small, ..).unwrap(),
            3
        );
        tx.put(&big, b"extra", b"1").unwrap();
        tx.commit().unwrap();
        // All of a tree as a range: a clear.
        let mut tx = db.begin_write().unwrap();
        tx.put(&small, b"x", b"y").unwrap();
        assert_eq!(tx.delete_range(&big, b"".as_slice()..).unwrap(), 2001);
        tx.commit().unwrap();
        // Most of a tree with blobs: whole subtrees pruned.
        let mut tx = db.begin_write().unwrap();
        let lo = 0x1000_0000u32.to_be_bytes();
        let hi = 0xf000_0000u32.to_be_bytes();
        let removed = tx
            .delete_range(&wide, lo.as_slice()..hi.as_slice())
            .unwrap();
        assert!(removed > 15_000, "removed {removed}");
        tx.commit().unwrap();
        Images::read(&db_dir.path).write(&crashed);
        assert_eq!(logged(&db), before + 3, "a removal was not logged");
        let rx = db.begin_read().unwrap();
        let trees = ["small", "big", "wide"].map(|name| {
            let t = rx.tree(name).unwrap();
            collect(rx.iter(&t).unwrap())
        });
        assert_eq!(trees[0], [(b"x".to_vec(), b"y".to_vec())], "the small tree");
        assert!(trees[1].is_empty(), "the cleared tree");
        assert_eq!(trees[2].len() as u64, 20_000 - removed);
        drop(rx);
        db.check().unwrap();
        trees
    };
    let db = open_small(&crashed);
    let rx = db.begin_read().unwrap();
    for (name, entries) in ["small", "big", "wide"].iter().zip(&expected) {
        let t = rx.tree(name).unwrap();
        assert_eq!(
            &collect(rx.iter(&t).unwrap()),
            entries,
            "{name} after replay"
        );
    }
    drop(rx);
    db.check().unwrap();
}

#[test]
fn fill_and_clear_cycles_reuse_pages() {
    let db_dir = temp_db("cycles.ib");
    let db = open_small(&db_dir.path);
    let mut tx = db.begin_write().unwrap();
    let t = tx.open_tree("t").unwrap();
    tx.commit().unwrap();
    let mut sizes = Vec::new();
    for cycle in 0..12u32 {
        // Odd cycles have no overflow values: their leaves are freed
        // unread (`check` would find a page that was not freed).
        let blobs = cycle % 2 == 0;
        let mut tx = db.begin_write().unwrap();
        fill(&mut tx, &t, 20_000, cycle, blobs);
        tx.commit().unwrap();
        let stats = db.stats().unwrap();
        let ts = stats.trees.iter().find(|s| s.name == "t").unwrap();
        assert_eq!(ts.overflow_pages > 0, blobs);
        let mut tx = db.begin_write().unwrap();
        assert_eq!(tx.clear(&t).unwrap(), 20_000);
        tx.commit().unwrap();
        db.check().unwrap();
        sizes.push(std::fs::metadata(&db_dir.path).unwrap().len());
    }
    // After the first cycles have made room, the file stops growing.
    assert!(
        sizes[0] > 1 << 20,
        "a fill is large enough to matter: {sizes:?}"
    );
    assert_eq!(
        sizes[4], sizes[11],
        "the file grew across cycles: {sizes:?}"
    );
    let rx = db.begin_read().unwrap();
    assert!(rx.is_empty(&t).unwrap());
    drop(rx);
    // A tree of one leaf, cleared and dropped.
    let mut tx = db.begin_write().unwrap();
    tx.put(&t, b"one", b"leaf").unwrap();
    tx.commit().unwrap();
    let mut tx = db.begin_write().unwrap();
    assert_eq!(tx.clear(&t).unwrap(), 1);
    tx.put(&t, b"again", b"x").unwrap();
    tx.commit().unwrap();
    db.check().unwrap();
    let mut tx = db.begin_write().unwrap();
    assert!(tx.drop_tree("t").unwrap());
    tx.commit().unwrap();
    db.check().unwrap();
}

/// Removes the range `(lo, hi)` from `t` and from `model`, checking that
/// `delete_range` says it removed what the model held there.
fn delete_range_in_both(
    tx: &mut WriteTxn<'_>,
    t: &Tree,
    model: &mut Map,
    (lo, hi): (Bound<Vec<u8>>, Bound<Vec<u8>>),
    round: usize,
) {
    let doomed: Vec<Vec<u8>> = model
        .range::<Vec<u8>, _>((lo.clone(), hi.clone()))
        .map(|(k, _)| k.clone())
        .collect();
    let as_slices = (
        lo.as_ref().map(Vec::as_slice),
        hi.as_ref().map(Vec::as_slice),
    );
    let removed = tx.delete_range(t, as_slices).unwrap();
    assert_eq!(
        removed,
        doomed.len() as u64,
        "round {round}: {lo:?}..{hi:?}"
    );
    for k in doomed {
        model.remove(&k);
    }
}

#[test]
fn delete_range_and_retain_agree_with_model() {
    let db_dir = temp_db("ranges.ib");
    let db = open_small(&db_dir.path);
    let mut rng = Rng::new(0x5eed_0003);
    let mut model = Map::new();
    let mut tx = db.begin_write().unwrap();
    let t = tx.open_tree("t").unwrap();
    for round in 0..40 {
        for _ in 0..800 {
            let k = random_key(&mut rng);
            let v = random_value(&mut rng);
            tx.put(&t, &k, &v).unwrap();
            model.insert(k, v);
        }
        let bound = |rng: &mut Rng| -> Bound<Vec<u8>> {
            match rng.below(3) {
                0 => Bound::Unbounded,
                1 => Bound::Included(random_key(rng)),
                _ => Bound::Excluded(random_key(rng)),
            }
        };
        let (mut lo, mut hi) = (bound(&mut rng), bound(&mut rng));
        // BTreeMap panics on an inverted range; the store removes nothing.
        let inverted = match (&lo, &hi) {
            (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => {
                a > b
            }
            _ => false,
        };
        if inverted {
            std::mem::swap(&mut lo, &mut hi);
        }
        if let (Bound::Excluded(a), Bound::Excluded(b)) = (&lo, &hi) {
            if a == b {
                hi = Bound::Included(b.clone());
            }
        }
        delete_range_in_both(&mut tx, &t, &mut model, (lo, hi), round);
        if round % 3 == 0 {
            let cut = rng.below(256) as u8;
            let removed = tx
                .retain(&t, |k, v| k.len() % 2 == 0 || v.first() > Some(&cut))
                .unwrap();
            let before = model.len();
            model.retain(|k, v| k.len() % 2 == 0 || v.first() > Some(&cut));
            assert_eq!(
                removed,
                (before - model.len()) as u64,
                "round {round}: retain"
            );
        }
        assert_eq!(tx.len(&t).unwrap(), model.len() as u64);
        if round % 5 == 4 {
            assert_eq!(
                collect(tx.iter(&t).unwrap()),
                model.clone().into_iter().collect::<Vec<_>>()
            );
            tx.commit().unwrap();
            db.check().unwrap();
            tx = db.begin_write().unwrap();
        }
    }
    // An inverted range and an empty one remove nothing.
    let len = tx.len(&t).unwrap();
    assert_eq!(
        tx.delete_range(&t, (Bound::Included(&b"b"[..]), Bound::Excluded(&b"a"[..])))
            .unwrap(),
        0
    );
    assert_eq!(
        tx.delete_range(&t, (Bound::Excluded(&b"a"[..]), Bound::Excluded(&b"a"[..])))
            .unwrap(),
        0
    );
    assert_eq!(tx.len(&t).unwrap(), len);
    // The whole range is a clear.
    assert_eq!(tx.delete_range::<std::ops::RangeFull>(&t, ..).unwrap(), len);
    assert!(tx.is_empty(&t).unwrap());
    tx.commit().unwrap();
    db.check().unwrap();
}

#[test]
fn large_ranges_agree_with_model_across_savepoints_and_reopens() {
    // Ranges over up to half of a tree of some thousand leaves (1 KiB
    // pages, four levels): most hold whole subtrees, which are freed from
    // their parents' records, with the leaves on their edges trimmed.
    // Some values are blobs; every kind of bound; a savepoint rolled back
    // now and then; `check` after every commit (its walk counts every
    // page and entry against the tree's counters); reopened every few.
    let db_dir = temp_db("prune.ib");
    let mut db = open_small(&db_dir.path);
    let mut rng = Rng::new(0x5eed_0011);
    let mut model = Map::new();
    let key = |i: u64| (i as u32).to_be_bytes().to_vec();
    const SPACE: u64 = 200_000;
    for round in 0..30 {
        let mut tx = db.begin_write().unwrap();
        let t = tx.open_tree("t").unwrap();
        for _ in 0..4000 {
            let k = key(rng.below(SPACE));
            let v = if rng.chance(40) {
                vec![k[3]; 1500]
            } else {
                let len = 1 + rng.below(60) as usize;
                rng.bytes(len)
            };
            tx.put(&t, &k, &v).unwrap();
            model.insert(k, v);
        }
        let saved = (round % 4 == 1).then(|| (tx.savepoint().unwrap(), model.clone()));
        let from = rng.below(SPACE);
        let to = from + 1 + rng.below(SPACE / 2);
        let mut bound = |at: u64| match rng.below(3) {
            0 => Bound::Unbounded,
            1 => Bound::Included(key(at)),
            _ => Bound::Excluded(key(at)),
        };
        let (lo, hi) = (bound(from), bound(to.min(SPACE)));
        delete_range_in_both(&mut tx, &t, &mut model, (lo, hi), round);
        assert_eq!(tx.len(&t).unwrap(), model.len() as u64, "round {round}");
        if let Some((sp, before)) = saved {
            tx.rollback_to(&sp).unwrap();
            model = before;
        }
        assert_eq!(
            collect(tx.iter(&t).unwrap()),
            model.clone().into_iter().collect::<Vec<_>>(),
            "round {round}"
        );
        tx.commit().unwrap();
        db.check().unwrap();
        if round % 6 == 5 {
            drop(db);
            db = open_small(&db_dir.path);
            let rx = db.begin_read().unwrap();
            let t = rx.tree("t").unwrap();
            assert_eq!(
                collect(rx.iter(&t).unwrap()),
                model.clone().into_iter().collect::<Vec<_>>(),
                "round {round}, reopened"
            );
        }
    }
}

#[test]
fn new_methods_resolve_handles_like_the_old_ones() {
    let db_dir = temp_db("handles.ib");
    let db = Database::open(&db_dir.path).unwrap();
    let mut tx = db.begin_write().unwrap();
    let t = tx.open_tree("t").unwrap();
    tx.put(&t, b"k", b"v").unwrap();
    tx.commit().unwrap();
    let mut tx = db.begin_write().unwrap();
    tx.drop_tree("t").unwrap();
    assert!(matches!(tx.first(&t), Err(Error::TreeDropped(_))));
    assert!(matches!(tx.get_ge(&t, b""), Err(Error::TreeDropped(_))));
    assert!(matches!(tx.clear(&t), Err(Error::TreeDropped(_))));
    assert!(matches!(tx.pop_last(&t), Err(Error::TreeDropped(_))));
    assert!(matches!(
        tx.retain(&t, |_, _| true),
        Err(Error::TreeDropped(_))
    ));
    assert!(matches!(
        tx.delete_range(&t, b"a".as_slice()..),
        Err(Error::TreeDropped(_))
    ));
    tx.commit().unwrap();
    let rx = db.begin_read().unwrap();
    assert!(matches!(rx.prefix(&t, b""), Err(Error::StaleTree(_))));
    assert!(matches!(
        rx.contains_key(&t, b"k"),
        Err(Error::StaleTree(_))
    ));
}

/// A handle remembers where its tree was in the catalog (a hint): after
/// trees are created or dropped before it, it still finds its own tree,
/// and never another tree that took its place.
#[test]
fn handles_resolve_after_the_catalog_moves_their_trees() {
    let db_dir = temp_db("moves.ib");
    let db = Database::open(&db_dir.path).unwrap();
    let mut tx = db.begin_write().unwrap();
    let m = tx.open_tree("m").unwrap();
    tx.put(&m, b"k", b"m").unwrap();
    tx.commit().unwrap();
    // "a" and "b" sort before "m", which moves from the first place.
    let mut tx = db.begin_write().unwrap();
    for name in ["b", "a"] {
        let t = tx.open_tree(name).unwrap();
        tx.put(&t, b"k", name.as_bytes()).unwrap();
        assert_eq!(tx.get(&m, b"k").unwrap(), Some(&b"m"[..]));
    }
    tx.commit().unwrap();
    let rx = db.begin_read().unwrap();
    assert_eq!(rx.get(&m, b"k").unwrap(), Some(&b"m"[..]));
    let a = rx.tree("a").unwrap();
    assert_eq!(rx.get(&a, b"k").unwrap(), Some(&b"a"[..]));
    drop(rx);
    // "a" dropped: "b" takes its place, which its handle must not read.
    let mut tx = db.begin_write().unwrap();
    tx.drop_tree("a").unwrap();
    assert!(matches!(tx.get(&a, b"k"), Err(Error::TreeDropped(_))));
    assert_eq!(tx.get(&m, b"k").unwrap(), Some(&b"m"[..]));
    tx.commit().unwrap();
    let rx = db.begin_read().unwrap();
    assert!(matches!(rx.get(&a, b"k"), Err(Error::StaleTree(_))));
    assert_eq!(rx.get(&m, b"k").unwrap(), Some(&b"m"[..]));
    // Created again under its name, "a" is another tree.
    drop(rx);
    let mut tx = db.begin_write().unwrap();
    let a_new = tx.open_tree("a").unwrap();
    assert!(tx.get(&a_new, b"k").unwrap().is_none());
    assert!(matches!(tx.get(&a, b"k"), Err(Error::StaleTree(_))));
    tx.commit().unwrap();
    // Two new databases: each one's first tree has the same id and place;
    // a handle of one is foreign to the other.
    let (x_dir, y_dir) = (temp_db("x.ib"), temp_db("y.ib"));
    let (x, y) = (
        Database::open(&x_dir.path).unwrap(),
        Database::open(&y_dir.path).unwrap(),
    );
    let mut handles = Vec::new();
    for db in [&x, &y] {
        let mut tx = db.begin_write().unwrap();
        let t = tx.open_tree("t").unwrap();
        tx.put(&t, b"k", b"v").unwrap();
        tx.commit().unwrap();
        handles.push(t);
    }
    let rx = x.begin_read().unwrap();
    assert!(matches!(
        rx.get(&handles[1], b"k"),
        Err(Error::ForeignTree(_))
    ));
    let mut tx = x.begin_write().unwrap();
    assert!(matches!(
        tx.get(&handles[1], b"k"),
        Err(Error::ForeignTree(_))
    ));
    assert!(matches!(
        tx.put(&handles[1], b"k", b"w"),
        Err(Error::ForeignTree(_))
    ));
}

#[test]
fn tree_handles_are_hashable_and_ordered() {
    let db_dir = temp_db("tree.ib");
    let db = Database::open(&db_dir.path).unwrap();
    let mut tx = db.begin_write().unwrap();
    let b = tx.open_tree("b").unwrap();
    let a = tx.open_tree("a").unwrap();
    let b_again = tx.open_tree("b").unwrap();
    tx.commit().unwrap();
    let rx = db.begin_read().unwrap();
    let b_read = rx.tree("b").unwrap();
    assert_eq!(b, b_again);
    assert_eq!(b, b_read);
    let set: HashSet<Tree> = [a.clone(), b.clone(), b_again, b_read]
        .into_iter()
        .collect();
    assert_eq!(set.len(), 2);
    let ordered: BTreeSet<Tree> = set.into_iter().collect();
    assert_eq!(
        ordered.into_iter().collect::<Vec<_>>(),
        [a.clone(), b.clone()]
    );
    assert!(a < b);
    drop(rx);
    // A tree created again under the same name is another tree, after it.
    let mut tx = db.begin_write().unwrap();
    tx.drop_tree("b").unwrap();
    let b_new = tx.open_tree("b").unwrap();
    tx.commit().unwrap();
    assert_ne!(b, b_new);
    assert!(b < b_new && a < b_new);
    // The same name in another database is another tree.
    let other_dir = temp_db("other.ib");
    let other = Database::open(&other_dir.path).unwrap();
    let mut tx = other.begin_write().unwrap();
    let a_other = tx.open_tree("a").unwrap();
    tx.commit().unwrap();
    assert_ne!(a, a_other);
    let mut map = std::collections::HashMap::new();
    map.insert(a.clone(), 1);
    map.insert(a_other.clone(), 2);
    assert_eq!(map[&a], 1);
    assert_eq!(map[&a_other], 2);
}

fn leaf_pages(db: &Database, name: &str) -> u64 {
    let stats = db.stats().unwrap();
    stats
        .trees
        .iter()
        .find(|t| t.name == name)
        .unwrap()
        .leaf_pages
}

#[test]
fn append_refuses_keys_out_of_order_and_changes_nothing() {
    let db_dir = temp_db("append_order.ib");
    let db = open_small(&db_dir.path);
    let mut tx = db.begin_write().unwrap();
    let t = tx.open_tree("t").unwrap();
    let other = tx.open_tree("other").unwrap();
    tx.append(&t, b"", b"empty key first").unwrap();
    for k in [&b"b"[..], b"c", b"c\x00", b"d"] {
        tx.append(&t, k, k).unwrap();
    }
    // Equal to the last key, before it, and before the first.
    for bad in [&b"d"[..], b"c\xff", b""] {
        match tx.append(&t, bad, b"x") {
            Err(Error::KeyOutOfOrder(name)) => assert_eq!(name, "t"),
            other => panic!("append of {bad:?}: {other:?}"),
        }
    }
    // Each tree has its own order.
    tx.append(&other, b"a", b"1").unwrap();
    // Size errors come before the order check, as for `put`.
    let long = vec![b'z'; db.max_key_len() + 1];
    assert!(matches!(
        tx.append(&t, &long, b"v"),
        Err(Error::KeyTooLarge { .. })
    ));
    // A refused append leaves the transaction usable and the tree as it was.
    tx.append(&t, b"e", b"5").unwrap();
    tx.commit().unwrap();
    let rx = db.begin_read().unwrap();
    let keys: Vec<Vec<u8>> = collect(rx.iter(&t).unwrap())
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(
        keys,
        [&b""[..], b"b", b"c", b"c\x00", b"d", b"e"].map(<[u8]>::to_vec)
    );
    drop(rx);

    // A new transaction has no finger: the order is checked against the
    // committed last key, including one in an overflow value's leaf.
    let mut tx = db.begin_write().unwrap();
    tx.put(&t, b"f", &vec![7u8; 3000]).unwrap();
    tx.commit().unwrap();
    let mut tx = db.begin_write().unwrap();
    assert!(matches!(
        tx.append(&t, b"f", b"x"),
        Err(Error::KeyOutOfOrder(_))
    ));
    assert!(matches!(
        tx.append(&t, b"a", b"x"),
        Err(Error::KeyOutOfOrder(_))
    ));
    // After the last key is deleted, the new last key is the bound.
    assert!(tx.delete(&t, b"f").unwrap());
    tx.append(&t, b"e\x00", b"after e").unwrap();
    // After a put in the middle (which moves the finger) too.
    tx.put(&t, b"bb", b"middle").unwrap();
    assert!(matches!(
        tx.append(&t, b"e\x00", b"x"),
        Err(Error::KeyOutOfOrder(_))
    ));
    tx.append(&t, b"g", b"7").unwrap();
    assert_eq!(tx.last(&t).unwrap(), Some((&b"g"[..], &b"7"[..])));
    assert_eq!(tx.len(&t).unwrap(), 9);
    tx.commit().unwrap();
    db.check().unwrap();
}

#[test]
fn append_gives_what_put_gives_with_full_pages() {
    let db_dir = temp_db("append_fill.ib");
    let db = open_small(&db_dir.path);
    let mut rng = Rng::new(0xa99e_0001);
    // Sorted distinct keys of varied length, some values in overflow pages.
    let keys: BTreeSet<Vec<u8>> = (0..6000)
        .map(|_| {
            let len = 1 + rng.below(12) as usize;
            rng.bytes(len)
        })
        .collect();
    let entries: Vec<(Vec<u8>, Vec<u8>)> = keys
        .into_iter()
        .map(|k| {
            let v = if rng.chance(2) {
                rng.bytes(1500)
            } else {
                let len = rng.below(50) as usize;
                rng.bytes(len)
            };
            (k, v)
        })
        .collect();
    let mut shuffled = entries.clone();
    for i in (1..shuffled.len()).rev() {
        shuffled.swap(i, rng.below(i as u64 + 1) as usize);
    }
    // The appends in several transactions, so that some start without a
    // finger; the puts in random order.
    let chunks = [0, 1, 2000, 2001, 4500, entries.len()];
    for w in chunks.windows(2) {
        let mut tx = db.begin_write().unwrap();
        let appended = tx.open_tree("appended").unwrap();
        for (k, v) in &entries[w[0]..w[1]] {
            tx.append(&appended, k, v).unwrap();
        }
        tx.commit().unwrap();
    }
    let mut tx = db.begin_write().unwrap();
    let put = tx.open_tree("put").unwrap();
    for (k, v) in &shuffled {
        tx.put(&put, k, v).unwrap();
    }
    tx.commit().unwrap();
    {
        let rx = db.begin_read().unwrap();
        let a = rx.tree("appended").unwrap();
        assert_eq!(collect(rx.iter(&a).unwrap()), entries);
        assert_eq!(collect(rx.iter(&put).unwrap()), entries);
    }
    db.check().unwrap();
    let (appended, random) = (leaf_pages(&db, "appended"), leaf_pages(&db, "put"));
    // Random inserts leave leaves about 70% full; appends leave them full
    // but for the last one (and the commit boundaries, which continue the
    // same last leaf).
    assert!(
        appended * 100 < random * 80,
        "appended: {appended} leaves, random puts: {random}"
    );
    let inline_bytes: usize = entries
        .iter()
        .map(|(k, v)| {
            let body = if v.len() < 1000 { v.len() } else { 20 };
            k.len() + body + 12
        })
        .sum();
    assert!(
        (appended as usize) < inline_bytes / 900 + 10,
        "appended: {appended} leaves for {inline_bytes} bytes of cells"
    );
}

#[test]
fn appends_survive_a_crash_in_both_kinds_of_commit() {
    for logged in [true, false] {
        let db_dir = temp_db("append_crash.ib");
        let crashed = db_dir.dir.path().join("crashed.ib");
        let options = Options {
            page_size: 1024,
            logged_commits: logged,
            ..Options::default()
        };
        let expected = {
            let db = Database::open_with(&db_dir.path, &options).unwrap();
            let mut tx = db.begin_write().unwrap();
            let t = tx.open_tree("t").unwrap();
            fill(&mut tx, &t, 500, 3, false);
            tx.commit().unwrap();
            // A small append after the committed keys: a logged commit
            // (with logged_commits), replayed as puts.
            let logged_before = db.stats().unwrap().counters.logged_commits;
            let mut tx = db.begin_write().unwrap();
            for i in 0..20u32 {
                let mut k = vec![0xff, 0xff, 0xff, 0xff];
                k.extend_from_slice(&i.to_be_bytes());
                tx.append(&t, &k, b"appended").unwrap();
            }
            tx.commit().unwrap();
            Images::read(&db_dir.path).write(&crashed);
            let rx = db.begin_read().unwrap();
            let expected = collect(rx.iter(&t).unwrap());
            drop(rx);
            let logged_after = db.stats().unwrap().counters.logged_commits;
            assert_eq!(logged_after - logged_before, u64::from(logged));
            expected
        };
        assert_eq!(expected.len(), 520);
        let db = Database::open_with(&crashed, &options).unwrap();
        let rx = db.begin_read().unwrap();
        let t = rx.tree("t").unwrap();
        assert_eq!(collect(rx.iter(&t).unwrap()), expected, "logged: {logged}");
        drop(rx);
        db.check().unwrap();
    }
}

#[test]
fn put_reserve_values_reach_the_pages_and_the_redo_log() {
    for logged in [true, false] {
        let db_dir = temp_db("reserve.ib");
        let crashed = db_dir.dir.path().join("crashed.ib");
        let options = Options {
            logged_commits: logged,
            ..Options::default()
        };
        let mut model = Map::new();
        {
            let db = Database::open_with(&db_dir.path, &options).unwrap();
            let mut tx = db.begin_write().unwrap();
            let t = tx.open_tree("t").unwrap();
            for i in 0..3000u32 {
                let k = format!("k{i:05}").into_bytes();
                let v = vec![i as u8; 40];
                tx.put(&t, &k, &v).unwrap();
                model.insert(k, v);
            }
            tx.commit().unwrap();
            let logged_before = db.stats().unwrap().counters.logged_commits;

            let mut tx = db.begin_write().unwrap();
            let pattern = |len: usize, seed: u8| -> Vec<u8> {
                (0..len)
                    .map(|i| (i as u8).wrapping_mul(31) ^ seed)
                    .collect()
            };
            // Inline, overflow, empty, over an existing key of the same
            // length (replaced in place) and of another length.
            let cases: [(&[u8], usize, u8); 5] = [
                (b"k01000x", 100, 1),
                (b"k02000x", 2500, 2),
                (b"k00500x", 0, 3),
                (b"k01500", 40, 4),
                (b"k02500", 300, 5),
            ];
            for (k, len, seed) in cases {
                let value = pattern(len, seed);
                let space = tx.put_reserve(&t, k, len).unwrap();
                assert_eq!(space.len(), len);
                assert!(space.iter().all(|&b| b == 0), "the space is zeroed");
                space.copy_from_slice(&value);
                // Read back through the transaction before anything else.
                assert_eq!(tx.get(&t, k).unwrap(), Some(&value[..]));
                model.insert(k.to_vec(), value);
            }
            // A reservation, then puts next to it that split its leaf (the
            // value moves: its bytes must be in the log from before).
            let value = pattern(200, 6);
            tx.put_reserve(&t, b"k00100x", 200)
                .unwrap()
                .copy_from_slice(&value);
            model.insert(b"k00100x".to_vec(), value);
            for i in 0..30u8 {
                let k = [&b"k00100x"[..], &[i]].concat();
                tx.put(&t, &k, &[i; 90]).unwrap();
                model.insert(k, vec![i; 90]);
            }
            // The last reservation is written just before the commit, and
            // only half of it: the rest stays zero.
            let mut value = vec![0u8; 64];
            value[..32].copy_from_slice(&pattern(32, 7));
            tx.put_reserve(&t, b"last", 64).unwrap()[..32].copy_from_slice(&value[..32]);
            model.insert(b"last".to_vec(), value);
            // Refused sizes are errors, with nothing changed.
            assert!(matches!(
                tx.put_reserve(&t, b"huge", ironbark::MAX_VALUE_LEN + 1),
                Err(Error::ValueTooLarge { .. })
            ));
            let long_key = vec![b'k'; db.max_key_len() + 1];
            assert!(matches!(
                tx.put_reserve(&t, &long_key, 1),
                Err(Error::KeyTooLarge { .. })
            ));
            tx.commit().unwrap();
            Images::read(&db_dir.path).write(&crashed);
            let rx = db.begin_read().unwrap();
            let all: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            assert_eq!(collect(rx.iter(&t).unwrap()), all);
            drop(rx);
            let logged_after = db.stats().unwrap().counters.logged_commits;
            assert_eq!(
                logged_after - logged_before,
                u64::from(logged),
                "logged: {logged}"
            );
        }
        // After a crash the logged commit is replayed from its record.
        let db = Database::open_with(&crashed, &options).unwrap();
        let rx = db.begin_read().unwrap();
        let t = rx.tree("t").unwrap();
        let all: Vec<_> = model.into_iter().collect();
        assert_eq!(collect(rx.iter(&t).unwrap()), all, "logged: {logged}");
        drop(rx);
        db.check().unwrap();
    }
}

#[test]
fn cursor_mut_edits_agree_with_model() {
    let db_dir = temp_db("cursor_mut.ib");
    let db = open_small(&db_dir.path);
    let mut rng = Rng::new(0xc0c0_0001);
    let mut model = Map::new();
    let t = {
        let mut tx = db.begin_write().unwrap();
        let t = tx.open_tree("t").unwrap();
        // An empty tree: nothing to step on, nothing to edit.
        let mut c = tx.cursor_mut(&t).unwrap();
        assert_eq!(c.next().unwrap(), None);
        assert!(!c.delete_current().unwrap());
        assert!(!c.replace_current(b"v").unwrap());
        drop(c);
        tx.commit().unwrap();
        t
    };
    for round in 0..6 {
        let mut tx = db.begin_write().unwrap();
        // Fill up with random entries, some in overflow pages.
        for _ in 0..1500 {
            let len = 1 + rng.below(6) as usize;
            let k = rng.bytes(len);
            let v = random_value(&mut rng);
            tx.put(&t, &k, &v).unwrap();
            model.insert(k, v);
        }
        // Walk from a random start (or the first key), editing at random:
        // runs of deletes (merges), growing and shrinking replacements
        // (splits, values to and from overflow pages), skips.
        let start = if round % 2 == 0 {
            Vec::new()
        } else {
            rng.bytes(1)
        };
        let expected_keys: Vec<Vec<u8>> = model
            .range(start.clone()..)
            .map(|(k, _)| k.clone())
            .collect();
        let mut seen = Vec::new();
        let mut c = tx.cursor_mut(&t).unwrap();
        c.seek(&start);
        let mut deleting = 0;
        while let Some((k, v)) = c.next().unwrap() {
            assert_eq!(Some(v), model.get(k).map(Vec::as_slice));
            let k = k.to_vec();
            assert_eq!(c.key(), Some(&k[..]));
            seen.push(k.clone());
            if deleting == 0 && rng.chance(5) {
                deleting = 1 + rng.below(60);
            }
            if deleting > 0 {
                deleting -= 1;
                assert!(c.delete_current().unwrap());
                assert!(!c.delete_current().unwrap(), "deleted twice");
                assert!(!c.replace_current(b"x").unwrap(), "replaced after delete");
                assert_eq!(c.key(), None);
                model.remove(&k);
            } else if rng.chance(40) {
                let v = random_value(&mut rng);
                assert!(c.replace_current(&v).unwrap());
                assert_eq!(c.key(), Some(&k[..]));
                model.insert(k, v);
            }
        }
        // Past the end: no entry, no edit.
        assert_eq!(c.next().unwrap(), None);
        assert!(!c.delete_current().unwrap());
        drop(c);
        assert_eq!(seen, expected_keys, "round {round}: keys visited");
        let all: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        assert_eq!(collect(tx.iter(&t).unwrap()), all, "round {round}");
        assert_eq!(tx.len(&t).unwrap(), model.len() as u64);
        tx.commit().unwrap();
        db.check().unwrap();
        let depth = db.stats().unwrap().trees[0].depth;
        assert!(
            depth >= 2,
            "round {round}: a tree of {depth} levels tests little"
        );
    }
    // A refused replacement changes nothing and the cursor goes on.
    let mut tx = db.begin_write().unwrap();
    let mut c = tx.cursor_mut(&t).unwrap();
    let (first, _) = c.next().unwrap().unwrap();
    let first = first.to_vec();
    let huge = vec![0u8; ironbark::MAX_VALUE_LEN + 1];
    assert!(matches!(
        c.replace_current(&huge),
        Err(Error::ValueTooLarge { .. })
    ));
    drop(huge);
    let second = c.next().unwrap().map(|(k, _)| k.to_vec());
    assert_eq!(second.as_ref(), model.keys().nth(1));
    drop(c);
    assert_eq!(
        tx.get(&t, &first).unwrap(),
        model.get(&first).map(Vec::as_slice)
    );
    tx.commit().unwrap();
    // A handle of another database is refused when the cursor is made.
    let other_dir = temp_db("cursor_mut_other.ib");
    let other = Database::open(&other_dir.path).unwrap();
    let mut otx = other.begin_write().unwrap();
    assert!(matches!(otx.cursor_mut(&t), Err(Error::ForeignTree(_))));
}

#[test]
fn write_transactions_and_iterators_move_between_threads() {
    // Compile-time: these may be sent to another thread.
    fn send<T: Send>() {}
    send::<WriteTxn<'static>>();
    send::<Range<'static>>();
    send::<ReadTxn>();
    send::<ironbark::CursorMut<'static, 'static>>();

    let db_dir = temp_db("send.ib");
    let db = Database::open(&db_dir.path).unwrap();
    let mut tx = db.begin_write().unwrap();
    let t = tx.open_tree("t").unwrap();
    tx.put(&t, b"a", b"begun here").unwrap();
    std::thread::scope(|s| {
        // A writer that waits for the lock, woken when the transaction
        // commits on the thread it was sent to.
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let (db, waiter_t) = (&db, t.clone());
        let waiter = s.spawn(move || {
            started_tx.send(()).unwrap();
            let mut tx = db.begin_write().unwrap();
            let t = waiter_t;
            assert_eq!(tx.get(&t, b"b").unwrap(), Some(&b"committed there"[..]));
            tx.put(&t, b"c", b"after").unwrap();
            tx.commit().unwrap();
        });
        started_rx.recv().unwrap();
        // (Time for the waiter to block in `begin_write`.)
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(matches!(db.try_begin_write(), Err(Error::Busy)));
        let t = t.clone();
        s.spawn(move || {
            tx.put(&t, b"b", b"committed there").unwrap();
            tx.commit().unwrap();
        })
        .join()
        .unwrap();
        waiter.join().unwrap();
    });
    // A range begun on one thread and read on another.
    let rx = db.begin_read().unwrap();
    let range = rx.range(&t, b"b".as_slice()..).unwrap();
    let keys = std::thread::scope(|s| {
        s.spawn(move || range.map(|e| e.unwrap().0.to_vec()).collect::<Vec<_>>())
            .join()
            .unwrap()
    });
    assert_eq!(keys, [b"b".to_vec(), b"c".to_vec()]);
    // The lock is free again, for this thread too.
    drop(db.begin_write().unwrap());
}

#[test]
fn range_bounds_of_any_byte_slice_type_agree_with_model() {
    let db_dir = temp_db("bounds.ib");
    let db = open_small(&db_dir.path);
    let mut rng = Rng::new(0xb0b0_0001);
    let mut model = Map::new();
    let mut tx = db.begin_write().unwrap();
    let t = tx.open_tree("t").unwrap();
    for _ in 0..2000 {
        let k = random_key(&mut rng);
        let v = random_value(&mut rng);
        tx.put(&t, &k, &v).unwrap();
        model.insert(k, v);
    }
    tx.commit().unwrap();
    let want = |lo: Bound<&[u8]>, hi: Bound<&[u8]>| -> Entries {
        model
            .range::<[u8], _>((lo, hi))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    let rx = db.begin_read().unwrap();
    let tx = db.begin_write().unwrap();
    for _ in 0..200 {
        let (mut a, mut b) = (random_key(&mut rng), random_key(&mut rng));
        if a > b {
            std::mem::swap(&mut a, &mut b);
        }
        let (sa, sb) = (a.as_slice(), b.as_slice());
        use Bound::{Excluded, Included, Unbounded};
        // The same ranges, written with keys of several types.
        let cases: Vec<(Entries, Entries)> = vec![
            (
                collect(rx.range(&t, a.clone()..b.clone()).unwrap()),
                want(Included(sa), Excluded(sb)),
            ),
            (
                collect(tx.range(&t, &a..=&b).unwrap()),
                want(Included(sa), Included(sb)),
            ),
            (collect(rx.range(&t, sa..).unwrap().rev()), {
                let mut w = want(Included(sa), Unbounded);
                w.reverse();
                w
            }),
            (
                collect(tx.range(&t, ..a.clone().into_boxed_slice()).unwrap()),
                want(Unbounded, Excluded(sa)),
            ),
            (
                collect(rx.range(&t, ..=&b).unwrap()),
                want(Unbounded, Included(sb)),
            ),
            (
                collect(
                    tx.range(&t, (Excluded(a.clone()), Included(b.clone())))
                        .unwrap(),
                ),
                want(Excluded(sa), Included(sb)),
            ),
            (
                collect(rx.range_verified(&t, (Excluded(&a), Unbounded)).unwrap()),
                want(Excluded(sa), Unbounded),
            ),
        ];
        for (i, (got, want)) in cases.into_iter().enumerate() {
            assert_eq!(got, want, "case {i}: {a:?} {b:?}");
        }
    }
    // Fixed-size arrays, and the whole tree.
    let n = model.range(b"a".to_vec()..b"b".to_vec()).count();
    assert_eq!(rx.range(&t, b"a"..b"b").unwrap().count(), n);
    assert_eq!(rx.range(&t, [b'a']..[b'b']).unwrap().count(), n);
    assert_eq!(tx.range(&t, ..).unwrap().count(), model.len());
    drop(tx);
    drop(rx);
    // Entries outlive the bounds they were found with.
    let rx = db.begin_read().unwrap();
    let first = {
        let from = vec![b'a'];
        rx.range(&t, from..).unwrap().next().unwrap().unwrap()
    };
    assert_eq!(
        Some((first.0.to_vec(), first.1.to_vec())),
        model_entry(model.range(b"a".to_vec()..))
    );
    drop(rx);
    // delete_range takes the same bounds.
    let mut tx = db.begin_write().unwrap();
    let (lo, hi) = (vec![b'a'], vec![b'b', 0xff]);
    let expected = model.range(lo.clone()..=hi.clone()).count() as u64;
    assert!(expected > 0);
    assert_eq!(tx.delete_range(&t, &lo..=&hi).unwrap(), expected);
    assert_eq!(tx.delete_range(&t, lo..=hi).unwrap(), 0);
    assert_eq!(
        tx.delete_range(&t, [0xfe]..).unwrap(),
        model.range(vec![0xfe]..).count() as u64
    );
    tx.commit().unwrap();
    db.check().unwrap();
}

/// Ranges and prefix scans stepped from both ends at random, over a tree
/// of many leaves whose keys share prefixes of every length: the checks a
/// scan skips within a leaf that lies wholly inside its bound (one
/// compare per leaf) must never let it past the bound or the prefix, nor
/// past the other end.
#[test]
fn ranges_stepped_from_both_ends_stop_at_their_bounds() {
    let db_dir = temp_db("both_ends.ib");
    let db = open_small(&db_dir.path);
    let mut rng = Rng::new(0xb0_7e17d);
    let mut model = Map::new();
    let mut tx = db.begin_write().unwrap();
    let t = tx.open_tree("t").unwrap();
    for _ in 0..6000 {
        let k = random_key(&mut rng);
        let n = rng.below(30) as usize;
        let v = rng.bytes(n);
        tx.put(&t, &k, &v).unwrap();
        model.insert(k, v);
    }
    tx.commit().unwrap();
    let rx = db.begin_read().unwrap();
    for case in 0..400 {
        let (mut a, mut b) = (random_key(&mut rng), random_key(&mut rng));
        if a > b {
            std::mem::swap(&mut a, &mut b);
        }
        let prefix = case % 2 == 1;
        let (mut range, mut want): (Range<'_>, std::collections::VecDeque<_>) = if prefix {
            let p = a.clone();
            (
                rx.prefix(&t, &p).unwrap(),
                model
                    .iter()
                    .filter(|(k, _)| k.starts_with(&p))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            )
        } else {
            (
                rx.range(&t, a.clone()..=b.clone()).unwrap(),
                model
                    .range::<[u8], _>((Bound::Included(&a[..]), Bound::Included(&b[..])))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            )
        };
        loop {
            let (got, expected) = if rng.chance(2) {
                (range.next(), want.pop_front())
            } else {
                (range.next_back(), want.pop_back())
            };
            let got = got.map(|e| {
                let (k, v) = e.unwrap();
                (k.to_vec(), v.to_vec())
            });
            assert_eq!(got, expected, "case {case}: {a:?} {b:?} prefix {prefix}");
            if got.is_none() {
                break;
            }
        }
    }
}

/// A small address-space reservation (`Options::map_reservation`, for
/// valgrind or `ulimit -v`): the file outgrows its map many times over,
/// each growth maps it anew, and every snapshot keeps reading what it saw.
#[test]
fn a_file_outgrowing_a_small_map_reservation_is_read_whole() {
    let db_dir = temp_db("small_map.ib");
    let options = Options {
        map_reservation: 1 << 20,
        ..Options::default()
    };
    let db = Database::open_with(&db_dir.path, &options).unwrap();
    let mut old = Vec::new();
    let t = {
        let mut tx = db.begin_write().unwrap();
        let t = tx.open_tree("t").unwrap();
        tx.commit().unwrap();
        t
    };
    for round in 0..8u32 {
        let mut tx = db.begin_write().unwrap();
        for i in 0..2_000u32 {
            tx.put(&t, &(round * 2_000 + i).to_be_bytes(), &[round as u8; 300])
                .unwrap();
        }
        tx.commit().unwrap();
        old.push((round, db.begin_read().unwrap()));
    }
    let size = std::fs::metadata(&db_dir.path).unwrap().len();
    assert!(size > 4 << 20, "the file ({size} bytes) outgrew the map");
    for (round, rx) in &old {
        let mut n = 0u32;
        for entry in rx.iter(&t).unwrap() {
            let (_, v) = entry.unwrap();
            assert_eq!(v.len(), 300);
            n += 1;
        }
        assert_eq!(n, (round + 1) * 2_000, "snapshot of round {round}");
        let v = rx.get(&t, &(round * 2_000).to_be_bytes()).unwrap();
        assert_eq!(v, Some(&[*round as u8; 300][..]));
    }
    drop(old);
    drop(db);
    let db = Database::open_with(&db_dir.path, &options).unwrap();
    db.check().unwrap();
    assert_eq!(db.begin_read().unwrap().iter(&t).unwrap().count(), 16_000);
}
