//! A first run: writes and reads a million records and prints what it took.
//! `cargo run --release --example quickstart [-- RECORDS [seq]]`

use std::time::Instant;

use ironbark::{Database, Durability, Options};

fn main() -> ironbark::Result<()> {
    let records: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let dir = std::env::temp_dir().join(format!("ironbark-quickstart-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("quickstart.ib");
    let options = Options {
        durability: Durability::None,
        ..Options::default()
    };
    let db = Database::open_with(&path, &options)?;
    let sequential = std::env::args().nth(2).is_some_and(|a| a == "seq");
    let key = |i: u64| {
        if sequential {
            format!("{i:016}")
        } else {
            format!(
                "{:016}",
                i.wrapping_mul(0x9E37_79B9_7F4A_7C15) % 1_000_000_000_000
            )
        }
    };
    let value = [0x5au8; 100];

    let t = Instant::now();
    for batch in 0..records.div_ceil(1000) {
        let mut tx = db.begin_write()?;
        let tree = tx.open_tree("demo")?;
        for i in batch * 1000..((batch + 1) * 1000).min(records) {
            tx.put(&tree, key(i).as_bytes(), &value)?;
        }
        tx.commit()?;
    }
    db.sync()?;
    let fill = t.elapsed();

    let t = Instant::now();
    let rx = db.begin_read()?;
    let tree = rx.tree("demo")?;
    let mut found = 0u64;
    for i in 0..records {
        if rx.get(&tree, key(i).as_bytes())?.is_some() {
            found += 1;
        }
    }
    let read = t.elapsed();
    assert_eq!(found, records, "every record written is read back");

    let t = Instant::now();
    let scanned = rx.iter(&tree)?.count() as u64;
    let scan = t.elapsed();
    assert_eq!(scanned, records);
    drop(rx);

    let stats = db.stats()?;
    let per_sec = |n: u64, d: std::time::Duration| n as f64 / d.as_secs_f64() / 1e3;
    let order = if sequential { "sequential" } else { "random" };
    println!("{records} records of 16-byte keys and 100-byte values, {order} order, 1000 per transaction:");
    println!("  fill   {:>8.0}k puts/s", per_sec(records, fill));
    println!(
        "  read   {:>8.0}k gets/s (one thread)",
        per_sec(records, read)
    );
    println!("  scan   {:>8.0}k entries/s", per_sec(records, scan));
    println!(
        "  file   {:.1} MiB, depth {}, {} leaf pages, {} bytes written in {} write calls",
        stats.file_size_bytes as f64 / (1 << 20) as f64,
        stats.trees[0].depth,
        stats.trees[0].leaf_pages,
        stats.counters.bytes_written,
        stats.counters.write_calls
    );
    drop(db);
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
