//! Integer-key trees: numeric order, ranges, keys too large for the
//! width, and persistence.

mod common;

use std::collections::BTreeMap;

use common::{temp_db, Rng};
use ironbark::{Database, Durability, Error, IntWidth, Options, TreeKind};

fn keys(rx: &ironbark::ReadTxn, t: &ironbark::IntTree) -> Vec<u64> {
    rx.int_iter(t).unwrap().map(|e| e.unwrap().0).collect()
}

#[test]
fn keys_come_back_in_numeric_order() {
    let t = temp_db("ints.ib");
    let db = Database::open(&t.path).unwrap();
    let mut tx = db.begin_write().unwrap();
    let small = tx.open_int_tree("small", IntWidth::U32).unwrap();
    let big = tx.open_int_tree("big", IntWidth::U64).unwrap();
    let numbers = [
        65536u64,
        1,
        0,
        256,
        2,
        255,
        u64::from(u32::MAX),
        16_777_216,
        257,
    ];
    for &n in &numbers {
        tx.put_int(&small, n, &n.to_le_bytes()).unwrap();
        tx.put_int(&big, n << 8, &n.to_le_bytes()).unwrap();
    }
    tx.put_int(&big, u64::MAX, b"max").unwrap();
    tx.commit().unwrap();

    let rx = db.begin_read().unwrap();
    let mut sorted = numbers.to_vec();
    sorted.sort_unstable();
    assert_eq!(keys(&rx, &small), sorted);
    let mut big_sorted: Vec<u64> = sorted.iter().map(|n| n << 8).collect();
    big_sorted.push(u64::MAX);
    assert_eq!(keys(&rx, &big), big_sorted);
    let rev: Vec<u64> = rx
        .int_iter(&small)
        .unwrap()
        .rev()
        .map(|e| e.unwrap().0)
        .collect();
    assert_eq!(rev, sorted.iter().rev().copied().collect::<Vec<_>>());
    for &n in &numbers {
        assert_eq!(rx.get_int(&small, n).unwrap(), Some(&n.to_le_bytes()[..]));
    }
    assert_eq!(rx.get_int(&small, 3).unwrap(), None);
    assert_eq!(rx.int_len(&big).unwrap(), numbers.len() as u64 + 1);
    let mid: Vec<u64> = rx
        .int_range(&small, 2..65536)
        .unwrap()
        .map(|e| e.unwrap().0)
        .collect();
    assert_eq!(mid, [2, 255, 256, 257]);
    // Bounds beyond the width clamp.
    assert_eq!(rx.int_range(&small, (1u64 << 32)..).unwrap().count(), 0);
    assert_eq!(
        rx.int_range(&small, 1..=u64::MAX).unwrap().count(),
        numbers.len() - 1
    );
    assert_eq!(
        rx.int_range(
            &small,
            (
                std::ops::Bound::Excluded(u64::from(u32::MAX)),
                std::ops::Bound::Unbounded
            )
        )
        .unwrap()
        .count(),
        0
    );
}

#[test]
fn keys_too_large_for_the_width_are_refused() {
    let t = temp_db("wide.ib");
    let db = Database::open(&t.path).unwrap();
    let mut tx = db.begin_write().unwrap();
    let small = tx.open_int_tree("small", IntWidth::U32).unwrap();
    for n in [1u64 << 32, u64::MAX] {
        match tx.put_int(&small, n, b"x") {
            Err(Error::IntegerKeySize { width: 4, .. }) => {}
            other => panic!("{other:?}"),
        }
        assert_eq!(tx.get_int(&small, n).unwrap(), None);
        assert!(!tx.delete_int(&small, n).unwrap());
    }
    assert_eq!(tx.int_len(&small).unwrap(), 0);
    assert!(matches!(
        tx.open_int_tree("small", IntWidth::U64),
        Err(Error::WrongTreeKind { .. })
    ));
    assert!(matches!(tx.tree("small"), Err(Error::WrongTreeKind { .. })));
    tx.open_tree("plain").unwrap();
    assert!(matches!(
        tx.int_tree("plain"),
        Err(Error::WrongTreeKind { .. })
    ));
    tx.commit().unwrap();
}

#[test]
fn random_operations_match_a_model_across_reopens() {
    let dir = temp_db("model.ib");
    let options = Options {
        page_size: 1024,
        durability: Durability::None,
        ..Options::default()
    };
    let mut db = Database::open_with(&dir.path, &options).unwrap();
    let mut rng = Rng::new(7);
    let mut model: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    for round in 0..60 {
        let mut tx = db.begin_write().unwrap();
        let t = tx.open_int_tree("t", IntWidth::U32).unwrap();
        for _ in 0..50 {
            let n = match rng.below(3) {
                0 => rng.below(300),
                1 => rng.below(1 << 20),
                _ => rng.below(1 << 32),
            };
            if rng.chance(70) {
                let len = rng.below(20) as usize;
                let v = rng.bytes(len);
                tx.put_int(&t, n, &v).unwrap();
                model.insert(n, v);
            } else {
                assert_eq!(tx.delete_int(&t, n).unwrap(), model.remove(&n).is_some());
            }
        }
        tx.commit().unwrap();
        if round % 7 == 0 {
            drop(db);
            db = Database::open_with(&dir.path, &options).unwrap();
        }
        let rx = db.begin_read().unwrap();
        assert_eq!(
            rx.tree_kind("t").unwrap(),
            TreeKind::int_keys(IntWidth::U32)
        );
        let t = rx.int_tree("t").unwrap();
        let got: Vec<(u64, Vec<u8>)> = rx
            .int_iter_verified(&t)
            .unwrap()
            .map(|e| e.map(|(k, v)| (k, v.to_vec())))
            .collect::<ironbark::Result<_>>()
            .unwrap();
        let want: Vec<(u64, Vec<u8>)> = model.iter().map(|(k, v)| (*k, v.clone())).collect();
        assert_eq!(got, want);
    }
    db.check().unwrap();
}
