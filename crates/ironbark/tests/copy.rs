//! Hot backup: `ReadTxn::copy_to` writes exactly the snapshot, while the
//! writer goes on committing.

mod common;

use common::{temp_db, Rng};
use ironbark::{Database, Durability, Options};

#[test]
fn copy_is_the_snapshot_while_the_writer_commits() {
    let t = temp_db("src.ib");
    let options = Options {
        durability: Durability::None,
        ..Options::default()
    };
    let db = Database::open_with(&t.path, &options).unwrap();
    let mut rng = Rng::new(7);
    let mut tx = db.begin_write().unwrap();
    let tree = tx.open_tree("t").unwrap();
    for i in 0..20_000u32 {
        let len = rng.below(200) as usize;
        tx.put(&tree, &i.to_be_bytes(), &rng.bytes(len)).unwrap();
    }
    tx.put(&tree, b"big", &rng.bytes(50_000)).unwrap();
    tx.commit().unwrap();

    let rx = db.begin_read().unwrap();
    let want: Vec<(Vec<u8>, Vec<u8>)> = rx
        .iter(&tree)
        .unwrap()
        .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
        .collect();
    // The writer keeps changing the database after the snapshot was taken.
    for round in 0..5u32 {
        let mut tx = db.begin_write().unwrap();
        for i in 0..5_000u32 {
            tx.put(&tree, &i.to_be_bytes(), &round.to_le_bytes())
                .unwrap();
        }
        tx.delete(&tree, b"big").unwrap();
        tx.commit().unwrap();
    }
    let copy = t.dir.path().join("copy.ib");
    rx.copy_to(&copy).unwrap();
    assert!(
        rx.copy_to(&copy).is_err(),
        "an existing file is never overwritten"
    );
    drop(rx);

    let backup = Database::open(&copy).unwrap();
    backup.check().unwrap();
    let rx = backup.begin_read().unwrap();
    let tree = rx.tree("t").unwrap();
    let got: Vec<(Vec<u8>, Vec<u8>)> = rx
        .iter(&tree)
        .unwrap()
        .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
        .collect();
    assert_eq!(got.len(), want.len());
    assert!(got == want, "the copy holds exactly the snapshot");
}
