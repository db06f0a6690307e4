//! Files of formats 4-6, whose branch pages have plain 6-byte slots
//! (format 7's branches also hint at their children in their slots:
//! `btree::page::KIND_HINTED_BRANCH`), open with this build: every entry
//! reads back, `check` is clean, and writes go on in a tree of both kinds
//! of branches, which the next commit marks format 7.
//!
//! Such a file is made by this build with the test knob that makes it
//! fill branches as those formats did, its metas then set back to format
//! 6. The knob affects the whole process: this file holds one test.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{temp_db, Rng};
use ironbark::{Database, Durability, Options};

const PAGE: usize = 4096;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn options() -> Options {
    Options {
        page_size: PAGE,
        durability: Durability::None,
        ..Options::default()
    }
}

/// Branch pages of the file by kind: (plain, hinted).
fn branch_kinds(path: &Path) -> (usize, usize) {
    let data = std::fs::read(path).unwrap();
    let mut kinds = (0, 0);
    for (pgno, page) in data.chunks_exact(PAGE).enumerate().skip(2) {
        let own = u64::from_le_bytes(page[24..32].try_into().unwrap());
        if own != pgno as u64 {
            continue;
        }
        match page[16] {
            1 => kinds.0 += 1,
            4 => kinds.1 += 1,
            _ => {}
        }
    }
    kinds
}

/// Puts `n` random keys (and deletes a tenth of those already there) in
/// trees "t" and "u", in commits of 1,000.
fn churn(db: &Database, model: &mut [Model; 2], n: usize, rng: &mut Rng) {
    for _ in 0..n / 1000 {
        let mut tx = db.begin_write().unwrap();
        for (name, m) in ["t", "u"].iter().zip(model.iter_mut()) {
            let tree = tx.open_tree(name).unwrap();
            for _ in 0..1000 {
                let key = format!("key:{:012}", rng.below(1 << 40)).into_bytes();
                let len = 20 + rng.below(80) as usize;
                let value = rng.bytes(len);
                tx.put(&tree, &key, &value).unwrap();
                m.insert(key, value);
            }
            let gone: Vec<Vec<u8>> = m.keys().step_by(10).take(100).cloned().collect();
            for key in gone {
                tx.delete(&tree, &key).unwrap();
                m.remove(&key);
            }
        }
        tx.commit().unwrap();
    }
}

fn assert_reads(db: &Database, model: &[Model; 2]) {
    let rx = db.begin_read().unwrap();
    for (name, m) in ["t", "u"].iter().zip(model) {
        let tree = rx.tree(name).unwrap();
        let got: Model = rx
            .iter(&tree)
            .unwrap()
            .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
            .collect();
        assert!(
            got == *m,
            "tree {name}: {} entries, {} wanted",
            got.len(),
            m.len()
        );
        for (k, v) in m.iter().step_by(97) {
            assert_eq!(rx.get(&tree, k).unwrap(), Some(&v[..]));
        }
    }
    assert!(db.check().unwrap().is_clean());
}

fn set_meta_version(path: &Path, version: u32) {
    let mut image = std::fs::read(path).unwrap();
    for slot in 0..2 {
        let base = slot * PAGE;
        image[base + 8..base + 12].copy_from_slice(&version.to_le_bytes());
        let sum = xxhash_rust::xxh3::xxh3_64(&image[base..base + 80]);
        image[base + 80..base + 88].copy_from_slice(&sum.to_le_bytes());
    }
    std::fs::write(path, image).unwrap();
}

fn meta_versions(path: &Path) -> Vec<u32> {
    let image = std::fs::read(path).unwrap();
    (0..2)
        .map(|slot| {
            u32::from_le_bytes(image[slot * PAGE + 8..slot * PAGE + 12].try_into().unwrap())
        })
        .collect()
}

#[test]
fn a_format_6_file_of_plain_branches_reads_and_takes_writes() {
    let t = temp_db("plain.ib");
    let mut rng = Rng::new(0x9_1a1e);
    let mut model = [Model::new(), Model::new()];

    ironbark::write_plain_branches_for_tests(true);
    let db = Database::open_with(&t.path, &options()).unwrap();
    churn(&db, &mut model, 30_000, &mut rng);
    drop(db);
    ironbark::write_plain_branches_for_tests(false);
    let (plain, hinted) = branch_kinds(&t.path);
    assert!(plain >= 10 && hinted == 0, "{plain} plain, {hinted} hinted");
    set_meta_version(&t.path, 6);

    let db = Database::open_with(&t.path, &options()).unwrap();
    assert_reads(&db, &model);
    churn(&db, &mut model, 20_000, &mut rng);
    assert_reads(&db, &model);
    drop(db);
    let (plain, hinted) = branch_kinds(&t.path);
    assert!(
        hinted > 0,
        "no hinted branch after the writes ({plain} plain)"
    );
    assert!(
        meta_versions(&t.path).contains(&7),
        "{:?}",
        meta_versions(&t.path)
    );

    let db = Database::open_with(&t.path, &options()).unwrap();
    assert_reads(&db, &model);
}
