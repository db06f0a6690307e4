//! Cursor positions against a model, in a tree deep enough (1 KiB pages,
//! depth >= 3) that short scans cross leaf and branch boundaries often:
//! seeks to every stored key and to every key between two stored ones,
//! before the first and past the last; a few steps forward from each, a
//! few back; both ends of one range stepped in turn until they meet; the
//! nearest-key lookups; whole scans both ways.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;

use common::{temp_db, Rng};
use ironbark::{Database, Durability, Options, ReadTxn, Tree};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Stored keys are `key` and an even number; odd numbers fall between.
fn key(i: u64) -> Vec<u8> {
    format!("key{i:07}").into_bytes()
}

fn setup(t: &common::TempDb) -> (Database, Tree, Model) {
    let db = Database::open_with(
        &t.path,
        &Options {
            page_size: 1024,
            durability: Durability::None,
            ..Options::default()
        },
    )
    .expect("open");
    let mut model = Model::new();
    let mut rng = Rng::new(0x5eed_c0de);
    let mut tx = db.begin_write().expect("write");
    let tree = tx.open_tree("t").expect("tree");
    for i in 0..4000u64 {
        let k = key(2 * i);
        // Values of varied lengths make leaves of varied counts.
        let len = 20 + rng.below(80) as usize;
        let v = rng.bytes(len);
        tx.put(&tree, &k, &v).expect("put");
        model.insert(k, v);
    }
    tx.commit().expect("commit");
    // Holes: runs of deleted keys, so that some leaves are sparse and
    // some seeks land in a gap that spans a leaf boundary.
    let mut tx = db.begin_write().expect("write");
    let mut i = 0;
    while i < 4000u64 {
        if rng.chance(20) {
            for j in i..(i + 1 + rng.below(40)).min(4000) {
                tx.delete(&tree, &key(2 * j)).expect("delete");
                model.remove(&key(2 * j));
            }
        }
        i += 1 + rng.below(60);
    }
    tx.commit().expect("commit");
    let stats = db.stats().expect("stats");
    let depth = stats.trees.iter().find(|s| s.name == "t").expect("t").depth;
    assert!(depth >= 3, "the tree is deep enough: depth {depth}");
    (db, tree, model)
}

/// Every probe: stored keys, keys between them, before the first and past
/// the last, a prefix of every key and the empty key.
fn probes() -> Vec<Vec<u8>> {
    let mut p: Vec<Vec<u8>> = (0..8001u64).map(key).collect();
    p.extend([
        b"".to_vec(),
        b"key".to_vec(),
        b"kex".to_vec(),
        b"kez".to_vec(),
    ]);
    p
}

fn entries<'a>(
    it: impl Iterator<Item = ironbark::Result<(&'a [u8], &'a [u8])>>,
    n: usize,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    it.take(n)
        .map(|e| {
            let (k, v) = e.expect("entry");
            (k.to_vec(), v.to_vec())
        })
        .collect()
}

fn owned<'a>(
    it: impl Iterator<Item = (&'a Vec<u8>, &'a Vec<u8>)>,
    n: usize,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    it.take(n).map(|(k, v)| (k.clone(), v.clone())).collect()
}

#[test]
fn short_scans_from_every_seek_agree_with_the_model() {
    let t = temp_db("paths.ib");
    let (db, tree, model) = setup(&t);
    let rx = db.begin_read().expect("read");
    for p in probes() {
        let s = p.as_slice();
        let got = entries(rx.range(&tree, s..).expect("range"), 12);
        assert_eq!(got, owned(model.range(p.clone()..), 12), "from {p:?}");
        let got = entries(rx.range(&tree, ..=s).expect("range").rev(), 12);
        let want = owned(model.range(..=p.clone()).rev(), 12);
        assert_eq!(got, want, "back from {p:?}");
        let got = entries(
            rx.range(&tree, (Bound::Excluded(s), Bound::Unbounded))
                .expect("range"),
            3,
        );
        let want = owned(
            model.range((Bound::Excluded(p.clone()), Bound::Unbounded)),
            3,
        );
        assert_eq!(got, want, "after {p:?}");
        let got = entries(rx.range(&tree, ..s).expect("range").rev(), 3);
        assert_eq!(
            got,
            owned(model.range(..p.clone()).rev(), 3),
            "before {p:?}"
        );
    }
}

#[test]
fn nearest_lookups_agree_with_the_model() {
    let t = temp_db("paths.ib");
    let (db, tree, model) = setup(&t);
    let rx = db.begin_read().expect("read");
    let pair = |e: Option<(&[u8], &[u8])>| e.map(|(k, v)| (k.to_vec(), v.to_vec()));
    let want = |e: Option<(&Vec<u8>, &Vec<u8>)>| e.map(|(k, v)| (k.clone(), v.clone()));
    for p in probes() {
        let s = p.as_slice();
        let (ge, gt, le, lt) = (
            model.range(p.clone()..).next(),
            model
                .range((Bound::Excluded(p.clone()), Bound::Unbounded))
                .next(),
            model.range(..=p.clone()).next_back(),
            model.range(..p.clone()).next_back(),
        );
        assert_eq!(pair(rx.get_ge(&tree, s).expect("ge")), want(ge), "ge {p:?}");
        assert_eq!(pair(rx.get_gt(&tree, s).expect("gt")), want(gt), "gt {p:?}");
        assert_eq!(pair(rx.get_le(&tree, s).expect("le")), want(le), "le {p:?}");
        assert_eq!(pair(rx.get_lt(&tree, s).expect("lt")), want(lt), "lt {p:?}");
    }
}

/// Both ends of one range, stepped in a seeded order until they meet:
/// every entry once, none after they meet.
#[test]
fn both_ends_of_a_range_meet_once() {
    let t = temp_db("paths.ib");
    let (db, tree, model) = setup(&t);
    let rx = db.begin_read().expect("read");
    let mut rng = Rng::new(7);
    for _ in 0..300 {
        let a = key(rng.below(8001));
        let b = key(rng.below(8001));
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        let mut got = rx
            .range(&tree, lo.as_slice()..hi.as_slice())
            .expect("range");
        let mut want = model.range(lo.clone()..hi.clone());
        loop {
            let back = rng.chance(50);
            let (g, w) = if back {
                (got.next_back(), want.next_back())
            } else {
                (got.next(), want.next())
            };
            let g = g
                .map(|e| e.expect("entry"))
                .map(|(k, v)| (k.to_vec(), v.to_vec()));
            assert_eq!(g, w.map(|(k, v)| (k.clone(), v.clone())), "{lo:?}..{hi:?}");
            if g.is_none() {
                assert!(got.next().is_none() && got.next_back().is_none());
                break;
            }
        }
    }
}

#[test]
fn whole_scans_cross_every_leaf_both_ways() {
    let t = temp_db("paths.ib");
    let (db, tree, model) = setup(&t);
    let rx: ReadTxn = db.begin_read().expect("read");
    let n = model.len();
    assert_eq!(
        entries(rx.iter(&tree).expect("iter"), n + 1),
        owned(model.iter(), n)
    );
    let got = entries(rx.iter(&tree).expect("iter").rev(), n + 1);
    assert_eq!(got, owned(model.iter().rev(), n));
    let (first, last) = (model.iter().next(), model.iter().next_back());
    let pair = |e: Option<(&[u8], &[u8])>| e.map(|(k, v)| (k.to_vec(), v.to_vec()));
    let want = |e: Option<(&Vec<u8>, &Vec<u8>)>| e.map(|(k, v)| (k.clone(), v.clone()));
    assert_eq!(pair(rx.first(&tree).expect("first")), want(first));
    assert_eq!(pair(rx.last(&tree).expect("last")), want(last));
}
