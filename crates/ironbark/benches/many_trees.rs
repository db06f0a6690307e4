//! What a lookup pays for the number of trees in the database.
//!
//! `cargo bench -p ironbark --bench many_trees`
//!
//! Loads the same 1M records (16-byte keys, 100-byte values) as one tree,
//! then as 10,000 trees of 100, and times, on one thread, random `get`s
//! through handles taken beforehand (a random tree, then a random key of
//! it). Each lookup resolves its handle in the snapshot's catalog; with
//! 10,000 trees a search of the catalog by name touches about 14 entries
//! and their names, where a handle that remembers its tree's place in the
//! catalog touches one.

use std::hint::black_box;
use std::time::Instant;

use ironbark::{Database, Durability, Options, Tree};

const RECORDS: u64 = 1_000_000;
const LOOKUPS: u64 = 2_000_000;

fn main() -> ironbark::Result<()> {
    for trees in [1u64, 10_000] {
        let per_tree = RECORDS / trees;
        let dir = tempfile::tempdir()?;
        let options = Options {
            durability: Durability::None,
            ..Options::default()
        };
        let db = Database::open_with(dir.path().join("bench.ib"), &options)?;
        let name = |t: u64| format!("tree{t:05}");
        let key = |i: u64| format!("{i:016}");
        let mut tx = db.begin_write()?;
        for t in 0..trees {
            let tree = tx.open_tree(&name(t))?;
            for i in 0..per_tree {
                tx.put(&tree, key(i).as_bytes(), &[7u8; 100])?;
            }
        }
        tx.commit()?;
        db.checkpoint()?;
        let rx = db.begin_read()?;
        let handles: Vec<Tree> = (0..trees)
            .map(|t| rx.tree(&name(t)))
            .collect::<ironbark::Result<_>>()?;
        // Warm the map (this machine pages out idle memory).
        for h in &handles {
            assert_eq!(rx.iter(h)?.count() as u64, per_tree);
        }
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let keys: Vec<String> = (0..per_tree).map(key).collect();
        let start = Instant::now();
        let mut found = 0u64;
        for _ in 0..LOOKUPS {
            let h = &handles[(next() % trees) as usize];
            let k = &keys[(next() % per_tree) as usize];
            found += black_box(rx.get(h, k.as_bytes())?).is_some() as u64;
        }
        let elapsed = start.elapsed();
        assert_eq!(found, LOOKUPS);
        println!(
            "{trees:>6} trees of {per_tree:>7} records: {:>6.1} ns per get",
            elapsed.as_nanos() as f64 / LOOKUPS as f64
        );
    }
    Ok(())
}
