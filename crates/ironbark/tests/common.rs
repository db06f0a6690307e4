//! Helpers shared by the integration tests: a seeded RNG (tests are
//! reproducible: no clock seeds) and temp databases.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use ironbark::Database;

/// Every tree's entries.
pub type Model = BTreeMap<String, BTreeMap<Vec<u8>, Vec<u8>>>;

/// SplitMix64: small, fast, deterministic.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(len + 8);
        while v.len() < len {
            v.extend_from_slice(&self.next_u64().to_le_bytes());
        }
        v.truncate(len);
        v
    }
}

pub struct TempDb {
    pub dir: tempfile::TempDir,
    pub path: PathBuf,
}

pub fn temp_db(name: &str) -> TempDb {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(name);
    TempDb { dir, path }
}

/// The newest commit's txn id and every tree's entries, by full scans.
pub fn read_model(db: &Database) -> ironbark::Result<(u64, Model)> {
    let rx = db.begin_read()?;
    let mut model = Model::new();
    for name in rx.list_trees() {
        let tree = rx.tree(&name)?;
        let mut entries = BTreeMap::new();
        for e in rx.iter(&tree)? {
            let (k, v) = e?;
            entries.insert(k.to_vec(), v.to_vec());
        }
        model.insert(name, entries);
    }
    Ok((rx.txn_id(), model))
}
