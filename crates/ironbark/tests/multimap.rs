//! Multimaps (sorted duplicate values per key) against a model, a
//! `BTreeMap<key, BTreeSet<value>>`, with the keys and values that break a
//! naive pair encoding: empty ones, zero and 0xff bytes, prefixes of each
//! other. Commits, aborts and reopens (logged commits replayed from the
//! redo log, and synced ones); then the kind errors and the size limit.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use common::{temp_db, Rng};
use ironbark::{Database, Durability, Error, IntWidth, Multimap, Options, ReadTxn, TreeKind};

type Model = BTreeMap<Vec<u8>, BTreeSet<Vec<u8>>>;

/// Short strings over {0x00, 0x01, 'a', 0xff}: empty ones, prefixes of
/// each other and escapes are all frequent.
fn short(rng: &mut Rng, max: u64) -> Vec<u8> {
    const ALPHABET: [u8; 4] = [0x00, 0x01, b'a', 0xff];
    (0..rng.below(max + 1))
        .map(|_| ALPHABET[rng.below(4) as usize])
        .collect()
}

fn bound(rng: &mut Rng) -> Bound<Vec<u8>> {
    match rng.below(3) {
        0 => Bound::Unbounded,
        1 => Bound::Included(short(rng, 3)),
        _ => Bound::Excluded(short(rng, 3)),
    }
}

fn in_range(k: &[u8], lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> bool {
    let above = match lo {
        Bound::Included(b) => k >= &b[..],
        Bound::Excluded(b) => k > &b[..],
        Bound::Unbounded => true,
    };
    let below = match hi {
        Bound::Included(b) => k <= &b[..],
        Bound::Excluded(b) => k < &b[..],
        Bound::Unbounded => true,
    };
    above && below
}

fn pairs_of(model: &Model) -> Vec<(Vec<u8>, Vec<u8>)> {
    model
        .iter()
        .flat_map(|(k, vs)| vs.iter().map(move |v| (k.clone(), v.clone())))
        .collect()
}

/// Every pair of the multimap, in order, and checked backwards too.
fn read_all(rx: &ReadTxn, m: &Multimap) -> Vec<(Vec<u8>, Vec<u8>)> {
    let fwd: Vec<_> = rx
        .multimap_iter(m)
        .unwrap()
        .map(|p| p.map(|(k, v)| (k.into_owned(), v.to_vec())))
        .collect::<ironbark::Result<_>>()
        .unwrap();
    let mut back: Vec<_> = rx
        .multimap_iter_verified(m)
        .unwrap()
        .rev()
        .map(|p| p.map(|(k, v)| (k.into_owned(), v.to_vec())))
        .collect::<ironbark::Result<_>>()
        .unwrap();
    back.reverse();
    assert_eq!(fwd, back);
    fwd
}

fn run(seed: u64, page_size: usize, steps: usize) {
    let t = temp_db("multimap.ib");
    let options = Options {
        page_size,
        durability: Durability::None,
        ..Options::default()
    };
    let mut db = Database::open_with(&t.path, &options).unwrap();
    let mut rng = Rng::new(seed);
    let mut committed = Model::new();
    let mut tx = db.begin_write().unwrap();
    tx.open_multimap("m").unwrap();
    tx.commit().unwrap();
    let mut step = 0;
    while step < steps {
        let mut model = committed.clone();
        let mut tx = db.begin_write().unwrap();
        if rng.chance(30) {
            tx.set_durability(Durability::Immediate);
        }
        let m = tx.open_multimap("m").unwrap();
        for _ in 0..1 + rng.below(40) {
            step += 1;
            let k = short(&mut rng, 4);
            let v = short(&mut rng, 4);
            match rng.below(100) {
                0..=54 => {
                    let added = tx.put_dup(&m, &k, &v).unwrap();
                    assert_eq!(added, model.entry(k.clone()).or_default().insert(v));
                }
                55..=74 => {
                    let removed = tx.delete_dup(&m, &k, &v).unwrap();
                    let was = model.get_mut(&k).is_some_and(|vs| vs.remove(&v));
                    assert_eq!(removed, was);
                    if model.get(&k).is_some_and(BTreeSet::is_empty) {
                        model.remove(&k);
                    }
                }
                75..=79 => {
                    let n = tx.delete_all(&m, &k).unwrap();
                    let was = model.remove(&k).map_or(0, |vs| vs.len() as u64);
                    assert_eq!(n, was, "delete_all {k:?}");
                }
                80..=89 => {
                    let want: Vec<Vec<u8>> = model
                        .get(&k)
                        .map(|vs| vs.iter().cloned().collect())
                        .unwrap_or_default();
                    let got: Vec<Vec<u8>> = tx
                        .get_dups(&m, &k)
                        .unwrap()
                        .map(|v| v.map(<[u8]>::to_vec))
                        .collect::<ironbark::Result<_>>()
                        .unwrap();
                    assert_eq!(got, want, "get_dups {k:?}");
                    let mut rev: Vec<Vec<u8>> = tx
                        .get_dups(&m, &k)
                        .unwrap()
                        .rev()
                        .map(|v| v.map(<[u8]>::to_vec))
                        .collect::<ironbark::Result<_>>()
                        .unwrap();
                    rev.reverse();
                    assert_eq!(rev, want);
                    assert_eq!(tx.count_dups(&m, &k).unwrap(), want.len() as u64);
                    assert_eq!(tx.first_dup(&m, &k).unwrap(), want.first().map(|v| &v[..]));
                    assert_eq!(tx.last_dup(&m, &k).unwrap(), want.last().map(|v| &v[..]));
                    let has = model.get(&k).is_some_and(|vs| vs.contains(&v));
                    assert_eq!(tx.contains_dup(&m, &k, &v).unwrap(), has);
                }
                _ => {
                    let (lo, hi) = (bound(&mut rng), bound(&mut rng));
                    let want: Vec<_> = pairs_of(&model)
                        .into_iter()
                        .filter(|(k, _)| in_range(k, &lo, &hi))
                        .collect();
                    let got: Vec<_> = tx
                        .multimap_range(&m, (lo.clone(), hi.clone()))
                        .unwrap()
                        .map(|p| p.map(|(k, v)| (k.into_owned(), v.to_vec())))
                        .collect::<ironbark::Result<_>>()
                        .unwrap();
                    assert_eq!(got, want, "range {lo:?} {hi:?}");
                }
            }
        }
        assert_eq!(tx.multimap_len(&m).unwrap(), pairs_of(&model).len() as u64);
        if rng.chance(85) {
            tx.commit().unwrap();
            committed = model;
        } else {
            drop(tx);
        }
        if rng.chance(10) {
            drop(db);
            db = Database::open_with(&t.path, &options).unwrap();
        }
        let rx = db.begin_read().unwrap();
        let m = rx.multimap("m").unwrap();
        assert_eq!(read_all(&rx, &m), pairs_of(&committed), "seed {seed}");
    }
    drop(db);
    let db = Database::open_with(&t.path, &options).unwrap();
    let rx = db.begin_read().unwrap();
    assert_eq!(rx.tree_kind("m").unwrap(), TreeKind::MULTIMAP);
    assert_eq!(
        read_all(&rx, &rx.multimap("m").unwrap()),
        pairs_of(&committed)
    );
    db.check().unwrap();
}

#[test]
fn model_small_pages() {
    for seed in 0..4 {
        run(seed, 1024, 1500);
    }
}

#[test]
fn model_default_pages() {
    run(99, 4096, 3000);
}

#[test]
fn many_values_of_one_key_span_pages() {
    let t = temp_db("big.ib");
    let db = Database::open(&t.path).unwrap();
    let mut tx = db.begin_write().unwrap();
    let m = tx.open_multimap("m").unwrap();
    for i in 0..5000u32 {
        tx.put_dup(&m, b"k\0", &i.to_be_bytes()).unwrap();
        tx.put_dup(&m, b"k", &i.to_be_bytes()).unwrap();
        tx.put_dup(&m, b"k\0\0", &i.to_be_bytes()).unwrap();
    }
    tx.commit().unwrap();
    let rx = db.begin_read().unwrap();
    let m = rx.multimap("m").unwrap();
    for key in [&b"k"[..], b"k\0", b"k\0\0"] {
        assert_eq!(rx.count_dups(&m, key).unwrap(), 5000);
        let vals: Vec<u32> = rx
            .get_dups(&m, key)
            .unwrap()
            .map(|v| u32::from_be_bytes(v.unwrap().try_into().unwrap()))
            .collect();
        assert_eq!(vals, (0..5000).collect::<Vec<_>>());
    }
    let keys: BTreeSet<Vec<u8>> = rx
        .multimap_iter(&m)
        .unwrap()
        .map(|p| p.unwrap().0.into_owned())
        .collect();
    assert_eq!(keys.len(), 3);
    drop(rx);
    let mut tx = db.begin_write().unwrap();
    let m = tx.multimap("m").unwrap();
    assert_eq!(tx.delete_all(&m, b"k\0").unwrap(), 5000);
    assert_eq!(tx.multimap_len(&m).unwrap(), 10000);
    assert_eq!(tx.count_dups(&m, b"k").unwrap(), 5000);
    assert_eq!(tx.count_dups(&m, b"k\0\0").unwrap(), 5000);
    tx.commit().unwrap();
    db.check().unwrap();
}

/// `count_dups` counts whole leaves by their entry counts: it must agree
/// with iteration for a key whose values fill many leaves (starting and
/// ending mid-leaf, among neighbours that share its prefix), after
/// deletes leave leaves part-empty, in both kinds of transaction, and for
/// keys with no values, between and around the others.
#[test]
fn count_dups_agrees_with_iteration_across_many_leaves() {
    let t = temp_db("count.ib");
    let options = Options {
        page_size: 1024,
        durability: Durability::None,
        ..Options::default()
    };
    let db = Database::open_with(&t.path, &options).unwrap();
    let mut tx = db.begin_write().unwrap();
    let m = tx.open_multimap("m").unwrap();
    let neighbours: [&[u8]; 6] = [b"", b"j", b"k\0", b"k\x01", b"ka", b"l"];
    for (i, key) in neighbours.iter().enumerate() {
        for v in 0..(37 * (i as u32 + 1)) {
            tx.put_dup(&m, key, &v.to_be_bytes()).unwrap();
        }
    }
    for v in 0..10_000u32 {
        tx.put_dup(&m, b"k", &v.to_be_bytes()).unwrap();
    }
    let check = |counted: u64, iterated: usize, what: &str| {
        assert_eq!(counted, iterated as u64, "{what}");
    };
    check(tx.count_dups(&m, b"k").unwrap(), 10_000, "write txn");
    check(
        tx.count_dups(&m, b"k").unwrap(),
        tx.get_dups(&m, b"k").unwrap().count(),
        "write txn, iterated",
    );
    tx.commit().unwrap();
    let stats = db.stats().unwrap();
    let leaves = stats
        .trees
        .iter()
        .find(|t| t.name == "m")
        .unwrap()
        .leaf_pages;
    assert!(leaves > 100, "the values fill many leaves: {leaves}");

    let mut rng = Rng::new(7);
    let mut tx = db.begin_write().unwrap();
    let m = tx.multimap("m").unwrap();
    // Deletes that leave many leaves part-full, and some whole runs.
    let mut left = 10_000u64;
    for v in 0..10_000u32 {
        if rng.chance(40) || (3000..4500).contains(&v) {
            assert!(tx.delete_dup(&m, b"k", &v.to_be_bytes()).unwrap());
            left -= 1;
        }
    }
    assert_eq!(tx.count_dups(&m, b"k").unwrap(), left);
    tx.commit().unwrap();

    let rx = db.begin_read().unwrap();
    let m = rx.multimap("m").unwrap();
    let mut keys: Vec<&[u8]> = neighbours.to_vec();
    keys.extend_from_slice(&[b"k", b"absent", b"k\0\0", b"kz", b"\xff\xff"]);
    for key in keys {
        let iterated = rx.get_dups(&m, key).unwrap().map(Result::unwrap).count();
        check(
            rx.count_dups(&m, key).unwrap(),
            iterated,
            &format!("{key:?}"),
        );
    }
    assert_eq!(rx.count_dups(&m, b"k").unwrap(), left);
    assert_eq!(rx.count_dups(&m, b"absent").unwrap(), 0);
    // An empty multimap counts 0.
    drop(rx);
    let mut tx = db.begin_write().unwrap();
    let empty = tx.open_multimap("empty").unwrap();
    assert_eq!(tx.count_dups(&empty, b"k").unwrap(), 0);
}

#[test]
fn kinds_are_kept_and_checked() {
    let t = temp_db("kinds.ib");
    let db = Database::open(&t.path).unwrap();
    let mut tx = db.begin_write().unwrap();
    tx.open_tree("plain").unwrap();
    let m = tx.open_multimap("multi").unwrap();
    tx.put_dup(&m, b"a", b"1").unwrap();
    tx.open_int_tree("ints", IntWidth::U32).unwrap();
    tx.open_int_multimap("intmulti", IntWidth::U64).unwrap();
    let wrong = |r: ironbark::Result<()>| {
        assert!(
            matches!(r, Err(Error::WrongTreeKind { .. })),
            "{:?}",
            r.err()
        )
    };
    wrong(tx.open_tree("multi").map(drop));
    wrong(tx.tree("multi").map(drop));
    wrong(tx.open_multimap("plain").map(drop));
    wrong(tx.multimap("plain").map(drop));
    wrong(tx.multimap("ints").map(drop));
    wrong(tx.open_multimap("intmulti").map(drop));
    wrong(tx.open_int_multimap("intmulti", IntWidth::U32).map(drop));
    wrong(tx.open_int_tree("multi", IntWidth::U64).map(drop));
    wrong(tx.int_tree("intmulti").map(drop));
    let e = tx.open_tree("multi").unwrap_err().to_string();
    assert!(e.contains("multimap") && e.contains("plain tree"), "{e}");
    tx.commit().unwrap();
    drop(db);

    // Kinds persist, in the file and in a compacted copy.
    let db = Database::open(&t.path).unwrap();
    let copy = t.dir.path().join("compacted.ib");
    db.begin_read().unwrap().compact_to(&copy).unwrap();
    for db in [db, Database::open(&copy).unwrap()] {
        let rx = db.begin_read().unwrap();
        assert_eq!(rx.tree_kind("plain").unwrap(), TreeKind::PLAIN);
        assert_eq!(rx.tree_kind("multi").unwrap(), TreeKind::MULTIMAP);
        assert_eq!(
            rx.tree_kind("ints").unwrap(),
            TreeKind::int_keys(IntWidth::U32)
        );
        assert_eq!(
            rx.tree_kind("intmulti").unwrap(),
            TreeKind::int_multimap(IntWidth::U64)
        );
        wrong(rx.tree("multi").map(drop));
        wrong(rx.tree("ints").map(drop));
        let m = rx.multimap("multi").unwrap();
        assert_eq!(rx.first_dup(&m, b"a").unwrap(), Some(&b"1"[..]));
        assert_eq!(
            rx.multimap("intmulti").unwrap().kind(),
            TreeKind::int_multimap(IntWidth::U64)
        );
        assert!(matches!(rx.tree_kind("none"), Err(Error::NoSuchTree(_))));
        db.check().unwrap();
    }
}

#[test]
fn a_dropped_multimap_can_come_back_as_another_kind() {
    let t = temp_db("drop.ib");
    let db = Database::open(&t.path).unwrap();
    let mut tx = db.begin_write().unwrap();
    let m = tx.open_multimap("x").unwrap();
    tx.put_dup(&m, b"k", b"v").unwrap();
    tx.commit().unwrap();
    let mut tx = db.begin_write().unwrap();
    assert!(tx.drop_tree("x").unwrap());
    let plain = tx.open_tree("x").unwrap();
    tx.put(&plain, b"k", b"v").unwrap();
    assert!(matches!(
        tx.put_dup(&m, b"k", b"w"),
        Err(Error::TreeDropped(_))
    ));
    tx.commit().unwrap();
    let rx = db.begin_read().unwrap();
    assert_eq!(rx.tree_kind("x").unwrap(), TreeKind::PLAIN);
    assert!(matches!(rx.get_dups(&m, b"k"), Err(Error::StaleTree(_))));
}

#[test]
fn too_long_pairs_are_refused_and_change_nothing() {
    let t = temp_db("long.ib");
    let db = Database::open(&t.path).unwrap();
    let max = db.max_key_len();
    let mut tx = db.begin_write().unwrap();
    let m = tx.open_multimap("m").unwrap();
    // The longest pair that fits: key + 2 + value == max.
    let key = vec![b'k'; 10];
    let value = vec![b'v'; max - 12];
    assert!(tx.put_dup(&m, &key, &value).unwrap());
    // One byte more, or a zero byte in the key (escaped to two): too long.
    let longer = vec![b'v'; max - 11];
    let zero_key = [&[0u8][..], &key[1..]].concat();
    for (k, v) in [(&key, &longer), (&zero_key, &value)] {
        match tx.put_dup(&m, k, v) {
            Err(Error::PairTooLarge { len, max: m }) => {
                assert_eq!((len, m), (max + 1, max));
            }
            other => panic!("{other:?}"),
        }
        assert!(!tx.delete_dup(&m, k, v).unwrap());
        assert!(!tx.contains_dup(&m, k, v).unwrap());
    }
    let huge = vec![0u8; 1 << 20];
    assert!(matches!(
        tx.put_dup(&m, &huge, b""),
        Err(Error::PairTooLarge { .. })
    ));
    assert_eq!(tx.get_dups(&m, &huge).unwrap().count(), 0);
    assert_eq!(tx.multimap_len(&m).unwrap(), 1);
    tx.commit().unwrap();
    let rx = db.begin_read().unwrap();
    let m = rx.multimap("m").unwrap();
    assert_eq!(
        rx.get_dups(&m, &key).unwrap().next().unwrap().unwrap(),
        value
    );
}

#[test]
fn integer_key_multimaps_take_keys_of_their_width() {
    let t = temp_db("intmulti.ib");
    let db = Database::open(&t.path).unwrap();
    let mut tx = db.begin_write().unwrap();
    let m = tx.open_int_multimap("m", IntWidth::U32).unwrap();
    for n in [65536u32, 1, 256, 2] {
        tx.put_dup(&m, &n.to_be_bytes(), b"b").unwrap();
        tx.put_dup(&m, &n.to_be_bytes(), b"a").unwrap();
    }
    for bad in [&b""[..], b"abc", &7u64.to_be_bytes()] {
        assert!(matches!(
            tx.put_dup(&m, bad, b"x"),
            Err(Error::IntegerKeySize { width: 4, .. })
        ));
        assert!(tx.delete_all(&m, bad).is_err());
    }
    let keys: Vec<u32> = tx
        .multimap_iter(&m)
        .unwrap()
        .map(|p| u32::from_be_bytes(p.unwrap().0[..].try_into().unwrap()))
        .collect();
    assert_eq!(keys, [1, 1, 2, 2, 256, 256, 65536, 65536]);
    tx.commit().unwrap();
}
