//! The typed layer (`ironbark::typed`): every codec round-trips, every key
//! codec keeps the order (checked bytewise on random pairs and against a
//! `BTreeMap` model through real trees: scans, ranges, nearest-key lookups,
//! edits), and bytes a codec did not write decode to `Error::Codec`, never
//! a panic or a wrong value.

mod common;

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::ops::Bound;

use common::Rng;
use ironbark::typed::{Key, TypedTree, Value};
use ironbark::{Database, Error, Options, WriteTxn};

/// Small pages, so that a few thousand keys make a tree of several levels.
fn open_small(dir: &tempfile::TempDir) -> Database {
    let options = Options {
        page_size: 1024,
        ..Options::default()
    };
    Database::open_with(dir.path().join("data.ib"), &options).unwrap()
}

fn encoded<K: Key>(key: &K::Input) -> Vec<u8> {
    K::encode(key).unwrap().as_ref().to_vec()
}

/// A key codec whose inputs and decoded values are the key type itself
/// (the integers and their tuples).
trait PlainKey: Key + for<'a> Value<Input = Self, Decoded<'a> = Self, Owned = Self> {}
impl<K: Key + for<'a> Value<Input = K, Decoded<'a> = K, Owned = K>> PlainKey for K {}

/// Random values of an integer type, a third of them at or next to the
/// edges (MIN, -1, 0, 1, MAX), the rest spread over the whole range.
trait Sample: Sized + Copy + Ord + Debug + 'static {
    const EDGES: &'static [Self];
    fn random(rng: &mut Rng) -> Self;
    fn sample(rng: &mut Rng) -> Self {
        if !Self::EDGES.is_empty() && rng.chance(33) {
            Self::EDGES[rng.below(Self::EDGES.len() as u64) as usize]
        } else {
            Self::random(rng)
        }
    }
}

macro_rules! sample_int {
    ($($t:ty),*) => {$(
        impl Sample for $t {
            #[allow(unused_comparisons)]
            const EDGES: &'static [$t] = &[
                <$t>::MIN,
                <$t>::MIN.wrapping_add(1),
                (0 as $t).wrapping_sub(1),
                0,
                1,
                <$t>::MAX - 1,
                <$t>::MAX,
            ];
            fn random(rng: &mut Rng) -> $t {
                let wide = (u128::from(rng.next_u64()) << 64) | u128::from(rng.next_u64());
                // Small magnitudes too, so that neighbours and shared
                // leading bytes are common.
                let wide = if rng.chance(50) { wide % 512 } else { wide };
                let v = wide as $t;
                if rng.chance(50) { v.wrapping_neg() } else { v }
            }
        }
    )*};
}

sample_int!(u8, u16, u32, u64, u128, i8, i16, i32, i64, i128);

impl<A: Sample, B: Sample> Sample for (A, B) {
    /// None of its own: the parts' edges come from sampling them.
    const EDGES: &'static [Self] = &[];
    fn random(rng: &mut Rng) -> Self {
        (A::sample(rng), B::sample(rng))
    }
}

/// `encode(a) < encode(b)` iff `a < b`, and `==` iff `==`, on random pairs
/// and on every pair of edges; and every key decodes back to itself.
fn check_bytewise_order<K: PlainKey + Sample>(seed: u64) {
    let mut rng = Rng::new(seed);
    let mut keys: Vec<K> = K::EDGES.to_vec();
    keys.extend((0..300).map(|_| K::sample(&mut rng)));
    for a in &keys {
        assert_eq!(K::decode(&encoded::<K>(a)).unwrap(), *a);
        for b in &keys {
            assert_eq!(
                encoded::<K>(a).cmp(&encoded::<K>(b)),
                a.cmp(b),
                "{} keys {a:?} and {b:?}",
                std::any::type_name::<K>()
            );
        }
    }
}

#[test]
fn integer_and_tuple_encodings_sort_in_numeric_order() {
    check_bytewise_order::<u8>(1);
    check_bytewise_order::<u16>(2);
    check_bytewise_order::<u32>(3);
    check_bytewise_order::<u64>(4);
    check_bytewise_order::<u128>(5);
    check_bytewise_order::<i8>(6);
    check_bytewise_order::<i16>(7);
    check_bytewise_order::<i32>(8);
    check_bytewise_order::<i64>(9);
    check_bytewise_order::<i128>(10);
    check_bytewise_order::<(i32, u8)>(11);
    check_bytewise_order::<(u8, i64)>(12);
}

#[test]
fn signed_integers_are_big_endian_with_the_sign_bit_flipped() {
    // The documented byte layout, so that other programs can read it.
    assert_eq!(encoded::<i8>(&i8::MIN), [0x00]);
    assert_eq!(encoded::<i8>(&-1), [0x7f]);
    assert_eq!(encoded::<i8>(&0), [0x80]);
    assert_eq!(encoded::<i16>(&1), [0x80, 0x01]);
    assert_eq!(encoded::<i32>(&-2), [0x7f, 0xff, 0xff, 0xfe]);
    assert_eq!(encoded::<u32>(&0x0102_0304), [1, 2, 3, 4]);
    assert_eq!(encoded::<(u8, i8)>(&(7, -128)), [7, 0]);
}

/// Random keys put, replaced, deleted and appended through a typed tree
/// and a `BTreeMap` alike, in one write transaction, then every read
/// compared (in the write transaction and in a snapshot after the commit).
fn check_against_model<K: PlainKey + Sample>(seed: u64) {
    let dir = tempfile::tempdir().unwrap();
    let db = open_small(&dir);
    let mut rng = Rng::new(seed);
    let mut model: BTreeMap<K, u64> = BTreeMap::new();
    let mut tx = db.begin_write().unwrap();
    let tree = TypedTree::<K, u64>::open(&mut tx, "t").unwrap();
    for i in 0..3000u64 {
        let key = K::sample(&mut rng);
        match rng.below(10) {
            0 => assert_eq!(
                tree.delete(&mut tx, &key).unwrap(),
                model.remove(&key).is_some()
            ),
            1 => assert_eq!(
                tree.insert(&mut tx, &key, &i).unwrap(),
                model.insert(key, i)
            ),
            _ => {
                tree.put(&mut tx, &key, &i).unwrap();
                model.insert(key, i);
            }
        }
    }
    compare(&tree, &tx, &model, &mut rng);
    tx.commit().unwrap();
    let rx = db.begin_read().unwrap();
    compare(&tree, &rx, &model, &mut rng);
}

fn compare<K: PlainKey + Sample, T: ironbark::typed::ReadableTxn>(
    tree: &TypedTree<K, u64>,
    txn: &T,
    model: &BTreeMap<K, u64>,
    rng: &mut Rng,
) {
    let all: Vec<(K, u64)> = tree.iter(txn).unwrap().map(Result::unwrap).collect();
    let expected: Vec<(K, u64)> = model.iter().map(|(k, v)| (*k, *v)).collect();
    assert_eq!(all, expected, "{}", std::any::type_name::<K>());
    let reversed: Vec<(K, u64)> = tree.iter(txn).unwrap().rev().map(Result::unwrap).collect();
    assert!(reversed.iter().eq(expected.iter().rev()));
    assert_eq!(tree.len(txn).unwrap(), model.len() as u64);
    assert_eq!(
        tree.first(txn).unwrap(),
        model.first_key_value().map(|(k, v)| (*k, *v))
    );
    assert_eq!(
        tree.last(txn).unwrap(),
        model.last_key_value().map(|(k, v)| (*k, *v))
    );
    let entry = |e: Option<(&K, &u64)>| e.map(|(k, v)| (*k, *v));
    for _ in 0..300 {
        let probe = K::sample(rng);
        assert_eq!(tree.get(txn, &probe).unwrap(), model.get(&probe).copied());
        assert_eq!(
            tree.contains_key(txn, &probe).unwrap(),
            model.contains_key(&probe)
        );
        assert_eq!(
            tree.get_ge(txn, &probe).unwrap(),
            entry(model.range(probe..).next())
        );
        assert_eq!(
            tree.get_gt(txn, &probe).unwrap(),
            entry(
                model
                    .range((Bound::Excluded(probe), Bound::Unbounded))
                    .next()
            )
        );
        assert_eq!(
            tree.get_le(txn, &probe).unwrap(),
            entry(model.range(..=probe).next_back())
        );
        assert_eq!(
            tree.get_lt(txn, &probe).unwrap(),
            entry(model.range(..probe).next_back())
        );
        let other = K::sample(rng);
        let (lo, hi) = (probe.min(other), probe.max(other));
        let bounds = match rng.below(4) {
            0 => (Bound::Included(lo), Bound::Excluded(hi)),
            1 => (Bound::Excluded(lo), Bound::Included(hi)),
            2 => (Bound::Included(lo), Bound::Unbounded),
            _ => (Bound::Unbounded, Bound::Included(hi)),
        };
        let got: Vec<(K, u64)> = tree
            .range(txn, bounds)
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let want: Vec<(K, u64)> = model.range(bounds).map(|(k, v)| (*k, *v)).collect();
        assert_eq!(got, want, "range {bounds:?}");
    }
}

#[test]
fn typed_trees_of_integer_keys_agree_with_a_btreemap() {
    check_against_model::<u8>(21);
    check_against_model::<u16>(22);
    check_against_model::<u32>(23);
    check_against_model::<u64>(24);
    check_against_model::<u128>(25);
    check_against_model::<i8>(26);
    check_against_model::<i16>(27);
    check_against_model::<i32>(28);
    check_against_model::<i64>(29);
    check_against_model::<i128>(30);
    check_against_model::<(i32, u8)>(31);
}

/// Strings over a small alphabet with a multi-byte character, empty ones
/// included, so that prefixes and the empty key are common.
fn random_string(rng: &mut Rng) -> String {
    const ALPHABET: [&str; 5] = ["a", "b", "\u{0}", "é", "\u{10ffff}"];
    let len = rng.below(5) as usize;
    (0..len)
        .map(|_| ALPHABET[rng.below(ALPHABET.len() as u64) as usize])
        .collect()
}

#[test]
fn string_keys_sort_as_strings_and_borrow_the_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_small(&dir);
    let mut rng = Rng::new(40);
    let mut model: BTreeMap<String, i64> = BTreeMap::new();
    let mut tx = db.begin_write().unwrap();
    let tree = TypedTree::<&str, i64>::open(&mut tx, "s").unwrap();
    for i in 0..2000i64 {
        let key = random_string(&mut rng);
        let value = i - 1000;
        tree.put(&mut tx, &key, &value).unwrap();
        model.insert(key, value);
    }
    tx.commit().unwrap();
    let rx = db.begin_read().unwrap();
    let all: Vec<(&str, i64)> = tree.iter(&rx).unwrap().map(Result::unwrap).collect();
    let want: Vec<(&str, i64)> = model.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    assert_eq!(all, want);
    assert_eq!(tree.first(&rx).unwrap(), Some(("", model[""])));
    for _ in 0..200 {
        let (a, b) = (random_string(&mut rng), random_string(&mut rng));
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        let got: Vec<&str> = tree
            .range(&rx, lo.as_str()..hi.as_str())
            .unwrap()
            .map(|e| e.unwrap().0)
            .collect();
        let want: Vec<&str> = model
            .range(lo.clone()..hi)
            .map(|(k, _)| k.as_str())
            .collect();
        assert_eq!(got, want);
        assert_eq!(
            tree.get_ge(&rx, &lo).unwrap().map(|(k, _)| k),
            model.range(lo.clone()..).next().map(|(k, _)| k.as_str())
        );
    }
    // The `String` codec reads the same bytes, owned.
    let owned = TypedTree::<String, i64>::new(tree.raw().clone());
    assert_eq!(
        owned.last(&rx).unwrap(),
        model.last_key_value().map(|(k, v)| (k.clone(), *v))
    );
    let borrowed: &str = tree.first(&rx).unwrap().unwrap().0;
    drop(tree); // the entry borrows the snapshot, not the handle
    assert_eq!(borrowed, "");
}

#[test]
fn every_codec_round_trips_through_a_tree() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("data.ib")).unwrap();
    let mut tx = db.begin_write().unwrap();

    fn round_trip<K: Key, V: Value>(
        tx: &mut WriteTxn<'_>,
        name: &str,
        key: &K::Input,
        value: &V::Input,
    ) -> (Vec<u8>, Vec<u8>) {
        let tree = TypedTree::<K, V>::open(tx, name).unwrap();
        tree.put(tx, key, value).unwrap();
        let (k, v) = tx.first(tree.raw()).unwrap().unwrap();
        (k.to_vec(), v.to_vec())
    }

    macro_rules! ints {
        ($($t:ty),*) => {$(
            for x in [<$t>::MIN, 0, <$t>::MAX] {
                let name = format!("{}-{x}", stringify!($t));
                let (k, v) = round_trip::<$t, $t>(&mut tx, &name, &x, &x);
                assert_eq!(<$t>::decode(&k).unwrap(), x);
                assert_eq!(<$t>::decode(&v).unwrap(), x);
                assert_eq!(k.len(), std::mem::size_of::<$t>());
                let tree = TypedTree::<$t, $t>::find(&tx, &name).unwrap();
                assert_eq!(tree.get(&tx, &x).unwrap(), Some(x));
            }
        )*};
    }
    ints!(u8, u16, u32, u64, u128, i8, i16, i32, i64, i128);

    for s in ["", "plain", "ünïcödé ✓", "nul\0inside"] {
        let name = format!("str-{s:?}");
        round_trip::<&str, &str>(&mut tx, &name, s, s);
        let t = TypedTree::<&str, String>::find(&tx, &name).unwrap();
        assert_eq!(t.get(&tx, s).unwrap(), Some(s.to_string()));
        let t = TypedTree::<String, &str>::find(&tx, &name).unwrap();
        assert_eq!(t.get(&tx, s).unwrap(), Some(s));
    }

    let bytes: &[u8] = &[0, 255, 1, 254];
    round_trip::<&[u8], Vec<u8>>(&mut tx, "bytes", bytes, b"");
    let t = TypedTree::<Vec<u8>, &[u8]>::find(&tx, "bytes").unwrap();
    assert_eq!(t.get(&tx, bytes).unwrap(), Some(&b""[..]));
    assert_eq!(t.first(&tx).unwrap(), Some((bytes.to_vec(), &b""[..])));

    round_trip::<[u8; 3], [u8; 2]>(&mut tx, "arrays", b"abc", b"xy");
    let t = TypedTree::<[u8; 3], [u8; 2]>::find(&tx, "arrays").unwrap();
    assert_eq!(t.get(&tx, b"abc").unwrap(), Some(*b"xy"));

    let (_, v) = round_trip::<u32, ()>(&mut tx, "set", &5, &());
    assert!(v.is_empty());
    let t = TypedTree::<u32, ()>::find(&tx, "set").unwrap();
    assert_eq!(t.get(&tx, &5).unwrap(), Some(()));

    let key = (u8::MAX, i16::MIN, 7u32, -1i64);
    let (k, _) = round_trip::<(u8, i16, u32, i64), (u16, u16)>(&mut tx, "tuples", &key, &(1, 2));
    assert_eq!(k.len(), 1 + 2 + 4 + 8);
    let t = TypedTree::<(u8, i16, u32, i64), (u16, u16)>::find(&tx, "tuples").unwrap();
    assert_eq!(t.get(&tx, &key).unwrap(), Some((1, 2)));
    assert_eq!(t.first(&tx).unwrap(), Some((key, (1, 2))));
    tx.commit().unwrap();
}

fn is_codec_error<T: Debug>(result: ironbark::Result<T>) -> bool {
    match result {
        Err(Error::Codec { codec, detail }) => {
            assert!(!codec.is_empty() && !detail.is_empty());
            true
        }
        other => panic!("expected a codec error, got {other:?}"),
    }
}

#[test]
fn foreign_bytes_decode_to_an_error_not_a_panic() {
    // Codec by codec, on bytes of the wrong length or content.
    assert!(is_codec_error(u64::decode(b"abc")));
    assert!(is_codec_error(i8::decode(b"")));
    assert!(is_codec_error(u128::decode(&[0; 17])));
    assert!(is_codec_error(<&str>::decode(&[0xff, 0xfe])));
    assert!(is_codec_error(String::decode(b"\xc3")));
    assert!(is_codec_error(<&str>::decode_owned(vec![0x80])));
    assert!(is_codec_error(<[u8; 4]>::decode(b"abc")));
    assert!(is_codec_error(<()>::decode(b"x")));
    assert!(is_codec_error(<(u8, u32)>::decode(&[0; 4])));
    assert!(is_codec_error(<(u8, u32)>::decode(&[0; 6])));
    let message = u64::decode(b"abc").unwrap_err().to_string();
    assert!(
        message.contains("u64") && message.contains("8 bytes") && message.contains('3'),
        "{message}"
    );

    // Through a tree: bytes written untyped, read with a codec that does
    // not fit them.
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("data.ib")).unwrap();
    let mut tx = db.begin_write().unwrap();
    let raw = tx.open_tree("raw").unwrap();
    tx.put(&raw, b"k", b"abc").unwrap(); // a 3-byte value
    tx.put(&raw, &[0xff], b"\xff\xfe").unwrap(); // a 1-byte key, not UTF-8 value
    tx.commit().unwrap();
    let rx = db.begin_read().unwrap();

    let as_u64 = TypedTree::<&[u8], u64>::new(raw.clone());
    assert!(is_codec_error(as_u64.get(&rx, b"k")));
    assert!(is_codec_error(as_u64.first(&rx)));
    let as_text = TypedTree::<&[u8], &str>::new(raw.clone());
    assert!(is_codec_error(as_text.last(&rx)));
    assert_eq!(as_text.get(&rx, b"k").unwrap(), Some("abc"));
    let u32_keys = TypedTree::<u32, &[u8]>::new(raw.clone());
    assert!(is_codec_error(u32_keys.get_ge(&rx, &0)));
    // A scan reports each undecodable entry and goes on.
    let entries: Vec<_> = u32_keys.iter(&rx).unwrap().collect();
    assert_eq!(entries.len(), 2);
    assert!(entries.into_iter().all(is_codec_error));
    // One-byte keys do decode as u8: a codec refuses only bytes that do
    // not fit it.
    let u8_keys = TypedTree::<u8, &[u8]>::new(raw.clone());
    let keys: Vec<u8> = u8_keys
        .range(&rx, 0..=255)
        .unwrap()
        .map(|e| e.unwrap().0)
        .collect();
    assert_eq!(keys, [b'k', 0xff]);
    drop(rx);

    // Writes that return the old entry decode it first, and change
    // nothing when it does not decode.
    let mut tx = db.begin_write().unwrap();
    let by_name = TypedTree::<&str, u64>::new(raw.clone());
    assert!(is_codec_error(by_name.insert(&mut tx, "k", &1)));
    assert_eq!(tx.get(&raw, b"k").unwrap(), Some(&b"abc"[..]));
    assert!(is_codec_error(as_u64.pop_first(&mut tx)));
    assert!(is_codec_error(as_text.pop_last(&mut tx)));
    assert_eq!(tx.len(&raw).unwrap(), 2);
    assert!(is_codec_error(as_u64.get_or_insert(&mut tx, b"k", &1)));
    // Deletes need no decoding.
    assert!(as_u64.delete(&mut tx, b"k").unwrap());
    assert_eq!(
        as_text.pop_last(&mut tx).ok(),
        None,
        "0xfe 0xff is not UTF-8"
    );
}

#[test]
fn removals_and_appends_follow_the_typed_order() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_small(&dir);
    let mut rng = Rng::new(50);
    let mut tx = db.begin_write().unwrap();
    let tree = TypedTree::<i64, String>::open(&mut tx, "events").unwrap();
    // A sorted load from negative to positive keys is in order only if
    // the encoding sorts negative numbers first.
    let mut model: BTreeMap<i64, String> = BTreeMap::new();
    for k in -2000..2000i64 {
        let v = format!("v{k}");
        tree.append(&mut tx, &(k * 1000), &v).unwrap();
        model.insert(k * 1000, v);
    }
    assert!(matches!(
        tree.append(&mut tx, &i64::MIN, "late"),
        Err(Error::KeyOutOfOrder(_))
    ));
    tree.append(&mut tx, &i64::MAX, "last").unwrap();
    model.insert(i64::MAX, "last".into());
    for _ in 0..50 {
        let (a, b) = (i64::sample(&mut rng), i64::sample(&mut rng));
        let (lo, hi) = (a.min(b), a.max(b));
        let removed = tree.delete_range(&mut tx, lo..hi).unwrap();
        let doomed: Vec<i64> = model.range(lo..hi).map(|(k, _)| *k).collect();
        assert_eq!(removed, doomed.len() as u64, "{lo}..{hi}");
        for k in doomed {
            model.remove(&k);
        }
        assert_eq!(tree.pop_first(&mut tx).unwrap(), model.pop_first());
        assert_eq!(tree.pop_last(&mut tx).unwrap(), model.pop_last());
    }
    let all: Vec<(i64, String)> = tree.iter(&tx).unwrap().map(Result::unwrap).collect();
    assert!(all.iter().eq(model
        .iter()
        .map(|(k, v)| (*k, v.clone()))
        .collect::<Vec<_>>()
        .iter()));
    assert_eq!(tree.clear(&mut tx).unwrap(), model.len() as u64);
    assert_eq!(tree.first(&tx).unwrap(), None);
    assert_eq!(tree.pop_first(&mut tx).unwrap(), None);
    tx.commit().unwrap();
}

#[cfg(feature = "serde")]
#[test]
fn serde_values_round_trip_and_foreign_bytes_are_refused() {
    use ironbark::typed::SerdeBincode;

    #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq, Clone)]
    struct Record {
        name: String,
        tags: Vec<String>,
        score: Option<i32>,
    }

    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("data.ib")).unwrap();
    let mut tx = db.begin_write().unwrap();
    let tree = TypedTree::<u32, SerdeBincode<Record>>::open(&mut tx, "records").unwrap();
    let record = Record {
        name: "alice".into(),
        tags: vec!["a".into(), "".into()],
        score: Some(-3),
    };
    tree.put(&mut tx, &1, &record).unwrap();
    assert_eq!(tree.get(&tx, &1).unwrap(), Some(record.clone()));
    assert_eq!(
        tree.insert(&mut tx, &1, &record).unwrap(),
        Some(record.clone())
    );
    // A length prefix far beyond the bytes, trailing bytes, and a value of
    // another type.
    tx.put(
        tree.raw(),
        &2u32.to_be_bytes(),
        &[0xfc, 0xff, 0xff, 0xff, 0x7f],
    )
    .unwrap();
    let mut with_trailing = SerdeBincode::<Record>::encode(&record).unwrap();
    with_trailing.push(0);
    tx.put(tree.raw(), &3u32.to_be_bytes(), &with_trailing)
        .unwrap();
    tx.put(tree.raw(), &4u32.to_be_bytes(), b"abc").unwrap();
    for key in [2, 3, 4] {
        assert!(is_codec_error(tree.get(&tx, &key)), "key {key}");
    }
    tx.commit().unwrap();
}
