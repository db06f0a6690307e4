//! What verifying checksums on the read path would cost.
//!
//! `cargo bench -p ironbark --bench read_verify`
//!
//! Measures, on one thread, random `get`s over a database of 1M records
//! (16-byte keys, 100-byte values) as ironbark does them (no checksum on
//! the read path), and the cost of hashing the pages such a lookup visits
//! (tree depth x XXH3-64 of one page, over pages spread like the tree's).
//! The ratio is the slowdown that read-path verification would add.

use std::hint::black_box;
use std::time::Instant;

use ironbark::{Database, Durability, Options};

fn main() -> ironbark::Result<()> {
    let records = 1_000_000u64;
    let dir = tempfile::tempdir()?;
    let options = Options {
        durability: Durability::None,
        ..Options::default()
    };
    let db = Database::open_with(dir.path().join("bench.ib"), &options)?;
    let key = |i: u64| format!("{:016}", i.wrapping_mul(0x9E37_79B9_7F4A_7C15) % records);
    for batch in 0..records / 10_000 {
        let mut tx = db.begin_write()?;
        let t = tx.open_tree("t")?;
        for i in batch * 10_000..(batch + 1) * 10_000 {
            tx.put(&t, format!("{i:016}").as_bytes(), &[7u8; 100])?;
        }
        tx.commit()?;
    }
    let stats = db.stats()?;
    let depth = stats.trees[0].depth as u64;
    let rx = db.begin_read()?;
    let t = rx.tree("t")?;
    // Warm the map (this machine pages out idle memory).
    assert_eq!(rx.iter(&t)?.count() as u64, records);

    let lookups = 2_000_000u64;
    let start = Instant::now();
    for i in 0..lookups {
        black_box(rx.get(&t, key(i).as_bytes())?.expect("present"));
    }
    let get_ns = start.elapsed().as_nanos() as f64 / lookups as f64;

    // Hash `depth` pages per lookup, chosen from a buffer as large as the
    // database, so cache behaviour is alike.
    let page = options.page_size;
    let pages = (stats.page_count as usize).max(1);
    let buffer: Vec<u8> = (0..pages * page).map(|i| (i * 31 % 251) as u8).collect();
    let start = Instant::now();
    let mut acc = 0u64;
    for i in 0..lookups {
        for level in 0..depth {
            let p = ((i * 0x9E37_79B9 + level * 7919) % pages as u64) as usize;
            acc ^= xxhash_rust::xxh3::xxh3_64(&buffer[p * page..(p + 1) * page]);
        }
    }
    black_box(acc);
    let verify_ns = start.elapsed().as_nanos() as f64 / lookups as f64;
    println!("random get, 1M records, depth {depth}: {get_ns:.0} ns per lookup");
    println!("XXH3-64 of {depth} x {page}-byte pages: {verify_ns:.0} ns per lookup");
    println!(
        "verifying every page on the read path would make a lookup {:.2}x as slow",
        (get_ns + verify_ns) / get_ns
    );
    Ok(())
}
