//! Space: under steady overwrites the file stops growing; a long-lived
//! reader pins space only while it lives (and `stats` shows it); dropping a
//! tree frees its pages; deleting every key shrinks a tree to nothing and
//! merges keep it compact on the way. `check()` passes throughout.

mod common;

use common::{temp_db, Rng};
use ironbark::{Database, Durability, Options, Stats, Tree};

/// 100,000 keys (the CI runs the tests in release mode); fewer in a debug
/// build, which is ~10x slower, so the file stays within a minute there.
const KEYS: u64 = if cfg!(debug_assertions) {
    25_000
} else {
    100_000
};
const ROUNDS: u64 = 20;
const TXN_PUTS: u64 = 1000;

fn key(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..4].copy_from_slice(b"key-");
    k[4..12].copy_from_slice(&i.to_be_bytes());
    k[12..].copy_from_slice(&(i as u32).wrapping_mul(2_654_435_761).to_le_bytes());
    k
}

fn value(i: u64, round: u64) -> [u8; 100] {
    let mut v = [0u8; 100];
    v[..8].copy_from_slice(&i.to_le_bytes());
    v[8..16].copy_from_slice(&round.to_le_bytes());
    for (j, b) in v[16..].iter_mut().enumerate() {
        *b = (i as u8)
            .wrapping_add(round as u8)
            .wrapping_mul(j as u8 | 1);
    }
    v
}

fn open(path: &std::path::Path) -> Database {
    Database::open_with(
        path,
        &Options {
            durability: Durability::None,
            ..Options::default()
        },
    )
    .unwrap()
}

/// How a round of overwrites is made durable.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Sync {
    /// `Database::sync()` after the round.
    PerRound,
    /// The round's last commit is `Durability::Immediate`.
    ImmediateLast,
    /// Never: only what the engine does by itself under `Durability::None`.
    Never,
}

/// One round: overwrite every key, in transactions of `TXN_PUTS` puts, in
/// key order from a random starting point, made durable as `sync` says.
fn round(db: &Database, tree: &Tree, round: u64, rng: &mut Rng, sync: Sync) {
    let start = rng.below(KEYS);
    let mut done = 0;
    while done < KEYS {
        let mut tx = db.begin_write().unwrap();
        let n = TXN_PUTS.min(KEYS - done);
        for j in 0..n {
            let i = (start + done + j) % KEYS;
            tx.put(tree, &key(i), &value(i, round)).unwrap();
        }
        done += n;
        if sync == Sync::ImmediateLast && done == KEYS {
            tx.set_durability(Durability::Immediate);
        }
        tx.commit().unwrap();
    }
    if sync == Sync::PerRound {
        db.sync().unwrap();
    }
}

fn load(db: &Database) -> Tree {
    let mut tx = db.begin_write().unwrap();
    let tree = tx.open_tree("data").unwrap();
    tx.commit().unwrap();
    round(db, &tree, 0, &mut Rng::new(0), Sync::PerRound);
    tree
}

fn spot_check(db: &Database, tree: &Tree, round: u64, rng: &mut Rng) {
    let rx = db.begin_read().unwrap();
    assert_eq!(rx.len(tree).unwrap(), KEYS);
    for _ in 0..500 {
        let i = rng.below(KEYS);
        assert_eq!(
            rx.get(tree, &key(i)).unwrap(),
            Some(&value(i, round)[..]),
            "key {i} after round {round}"
        );
    }
}

fn describe(s: &Stats) -> String {
    format!(
        "page_count {}, free {}, pinned {}, file {} MiB",
        s.page_count,
        s.free_pages,
        s.pages_pinned_by_readers,
        s.file_size_bytes >> 20
    )
}

fn steady_overwrites(sync: Sync, rounds: u64) {
    let t = temp_db("space.ib");
    let db = open(&t.path);
    let tree = load(&db);
    let mut rng = Rng::new(sync as u64 + 1);
    let mut sizes = vec![0u64];
    for r in 1..=rounds {
        round(&db, &tree, r, &mut rng, sync);
        let s = db.stats().unwrap();
        sizes.push(s.page_count);
        assert!(s.file_size_bytes >= s.page_count * s.page_size as u64);
        if r == 2 || r == rounds / 2 || r == rounds {
            spot_check(&db, &tree, r, &mut rng);
            let report = db.check().unwrap();
            assert_eq!(report.entries, KEYS);
            assert_eq!(report.page_count, s.page_count);
        }
    }
    eprintln!("{sync:?}: page counts by round {sizes:?}");
    let (p2, p20) = (sizes[2], sizes[rounds as usize]);
    assert!(
        p20 as f64 <= p2 as f64 * 1.5,
        "{sync:?}: file grew from {p2} pages after round 2 to {p20} after round {rounds}"
    );
    // The data itself needs ~100,000 * ~125 bytes: the file is not wildly
    // larger than that.
    let data_pages = KEYS * 125 / 4096;
    assert!(
        p20 < data_pages * 6,
        "{p20} pages for about {data_pages} pages of data"
    );
    // Reopened: same contents, and the free space is still reused.
    drop(db);
    let db = open(&t.path);
    spot_check(&db, &tree, rounds, &mut rng);
    round(&db, &tree, rounds + 1, &mut rng, sync);
    let s = db.stats().unwrap();
    assert!(
        s.page_count as f64 <= p2 as f64 * 1.5,
        "after reopen: {}",
        describe(&s)
    );
    db.check().unwrap();
}

#[test]
fn steady_overwrites_with_sync_per_round() {
    steady_overwrites(Sync::PerRound, ROUNDS);
}

#[test]
fn steady_overwrites_with_durable_last_commit() {
    steady_overwrites(Sync::ImmediateLast, ROUNDS);
}

/// No sync at all: the engine must keep space bounded by itself.
#[test]
fn steady_overwrites_without_any_sync() {
    steady_overwrites(Sync::Never, ROUNDS / 2);
}

#[test]
fn long_reader_pins_space_only_while_it_lives() {
    let t = temp_db("pinned.ib");
    let db = open(&t.path);
    let tree = load(&db);
    let mut rng = Rng::new(3);
    for r in 1..=2 {
        round(&db, &tree, r, &mut rng, Sync::PerRound);
    }
    let before = db.stats().unwrap();
    assert_eq!(before.pages_pinned_by_readers, 0);
    let reader = db.begin_read().unwrap();
    let snapshot_txn = reader.txn_id();
    let mut grown = Vec::new();
    for r in 3..=5 {
        round(&db, &tree, r, &mut rng, Sync::PerRound);
        let s = db.stats().unwrap();
        assert_eq!(s.live_readers, 1);
        assert_eq!(s.oldest_snapshot, Some(snapshot_txn));
        assert!(
            s.pages_pinned_by_readers > 0,
            "round {r}: a reader is alive but nothing is pinned ({})",
            describe(&s)
        );
        grown.push(s);
    }
    // Pinned pages are free pages too, for check(): each page once.
    let report = db.check().unwrap();
    assert_eq!(report.free_pages, grown.last().unwrap().free_pages);
    let held = grown.last().unwrap().clone();
    // The reader pins at least the tree it sees (every page of which the
    // writer has since replaced).
    let tree_pages: u64 = before
        .trees
        .iter()
        .map(|t| t.leaf_pages + t.branch_pages + t.overflow_pages)
        .sum();
    assert!(
        held.pages_pinned_by_readers >= tree_pages,
        "pinned {} < the {tree_pages} pages of the snapshot's tree",
        held.pages_pinned_by_readers
    );
    assert!(
        held.page_count > before.page_count,
        "the file did not grow while the reader pinned space: {} -> {}",
        describe(&before),
        describe(&held)
    );
    // The reader still sees round 2, exactly.
    for _ in 0..2000 {
        let i = rng.below(KEYS);
        assert_eq!(reader.get(&tree, &key(i)).unwrap(), Some(&value(i, 2)[..]));
    }
    let n = reader
        .iter(&tree)
        .unwrap()
        .try_fold(0u64, |n, e| e.map(|_| n + 1))
        .unwrap();
    assert_eq!(n, KEYS);
    drop(reader);

    // Released: the next commit can reuse the pinned pages.
    let mut after = Vec::new();
    for r in 6..=10 {
        round(&db, &tree, r, &mut rng, Sync::PerRound);
        let s = db.stats().unwrap();
        assert_eq!(s.pages_pinned_by_readers, 0, "round {r}: {}", describe(&s));
        assert_eq!(s.live_readers, 0);
        after.push(s);
    }
    eprintln!(
        "before reader: {}\nwith reader: {}\nafter: {}",
        describe(&before),
        grown.iter().map(describe).collect::<Vec<_>>().join(" | "),
        after.iter().map(describe).collect::<Vec<_>>().join(" | ")
    );
    // The file stops growing: every round after the release fits in the
    // space the reader had pinned.
    for s in &after {
        assert!(
            s.page_count <= held.page_count,
            "the file kept growing after the reader closed: {} then {}",
            describe(&held),
            describe(s)
        );
    }
    // The reader pins only the pages its snapshot can read: pages written
    // and freed after it began are reused while it lives, so once its
    // snapshot's pages (and one round held for durability) are set aside
    // the file stops growing, however long the reader lives.
    let growth_late = held.page_count - grown[grown.len() - 2].page_count;
    assert!(
        growth_late <= tree_pages / 10,
        "the file grew by {growth_late} pages in a round while the reader lived"
    );
    assert!(after.last().unwrap().page_count <= held.page_count);
    spot_check(&db, &tree, 10, &mut rng);
    db.check().unwrap();
}

fn tree_pages(s: &Stats, name: &str) -> u64 {
    s.trees
        .iter()
        .find(|t| t.name == name)
        .map(|t| t.branch_pages + t.leaf_pages + t.overflow_pages)
        .unwrap_or(0)
}

#[test]
fn dropping_a_tree_frees_its_pages() {
    let t = temp_db("droptree.ib");
    let db = open(&t.path);
    let mut rng = Rng::new(4);
    let mut tx = db.begin_write().unwrap();
    let keep = tx.open_tree("keep").unwrap();
    for i in 0..2000 {
        tx.put(&keep, &key(i), &value(i, 0)).unwrap();
    }
    let victim = tx.open_tree("victim").unwrap();
    for i in 0..30_000 {
        let v = if i % 500 == 0 {
            let n = 10_000 + rng.below(5000) as usize;
            rng.bytes(n)
        } else {
            value(i, 1).to_vec()
        };
        tx.put(&victim, &key(i), &v).unwrap();
    }
    tx.commit().unwrap();
    db.sync().unwrap();
    // A commit with no readers, so everything freed so far is reusable.
    let mut tx = db.begin_write().unwrap();
    tx.put(&keep, b"x", b"y").unwrap();
    tx.commit().unwrap();
    db.check().unwrap();
    let before = db.stats().unwrap();
    let victim_pages = tree_pages(&before, "victim");
    assert!(victim_pages > 1000, "victim has {victim_pages} pages");

    let mut tx = db.begin_write().unwrap();
    assert!(tx.drop_tree("victim").unwrap());
    tx.commit().unwrap();
    // Under Durability::None the last durable commit still sees the
    // victim's pages: they are reusable once the drop is durable.
    db.sync().unwrap();
    let dropped = db.stats().unwrap();
    let report = db.check().unwrap();
    assert_eq!(report.free_pages, dropped.free_pages);
    let gained = dropped.free_pages as i64 - before.free_pages as i64;
    eprintln!(
        "victim {victim_pages} pages; free {} -> {} ({gained:+}); page_count {} -> {}",
        before.free_pages, dropped.free_pages, before.page_count, dropped.page_count
    );
    assert!(
        (gained - victim_pages as i64).abs() <= 8,
        "dropping a tree of {victim_pages} pages freed {gained}"
    );
    // At most the record of the freed extents grows the file.
    assert!(dropped.page_count <= before.page_count + 2);
    assert!(dropped.trees.iter().all(|t| t.name != "victim"));
    // The freed pages are reused by a new tree of the same size.
    let mut tx = db.begin_write().unwrap();
    let again = tx.open_tree("again").unwrap();
    for i in 0..30_000 {
        tx.put(&again, &key(i), &value(i, 2)).unwrap();
    }
    tx.commit().unwrap();
    db.sync().unwrap();
    let refilled = db.stats().unwrap();
    assert!(
        refilled.page_count <= dropped.page_count,
        "a new tree did not reuse the dropped tree's pages: {} -> {}",
        describe(&dropped),
        describe(&refilled)
    );
    db.check().unwrap();
    let rx = db.begin_read().unwrap();
    assert_eq!(rx.len(&keep).unwrap(), 2001);
    assert_eq!(rx.len(&again).unwrap(), 30_000);
}

#[test]
fn deleting_every_key_shrinks_the_tree_to_nothing() {
    let t = temp_db("deleteall.ib");
    let db = open(&t.path);
    const N: u64 = KEYS / 2;
    let mut tx = db.begin_write().unwrap();
    let tree = tx.open_tree("t").unwrap();
    for i in 0..N {
        tx.put(&tree, &key(i), &value(i, 0)).unwrap();
    }
    tx.commit().unwrap();
    let full = db.stats().unwrap();
    let full_pages = tree_pages(&full, "t");
    // Delete in a seeded random order.
    let mut order: Vec<u64> = (0..N).collect();
    let mut rng = Rng::new(5);
    for i in (1..order.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        order.swap(i, j);
    }
    let mut left = N;
    for (c, chunk) in order.chunks(1000).enumerate() {
        let mut tx = db.begin_write().unwrap();
        for &i in chunk {
            assert!(tx.delete(&tree, &key(i)).unwrap());
            assert!(!tx.delete(&tree, &key(i)).unwrap());
        }
        tx.commit().unwrap();
        left -= chunk.len() as u64;
        let s = db.stats().unwrap();
        let ts = s.trees.iter().find(|t| t.name == "t").unwrap();
        assert_eq!(ts.entries, left);
        if c % 10 == 9 || left == N / 10 {
            db.check().unwrap();
        }
        if left == N / 10 || left == N / 100 {
            // Leaves stay reasonably full: merges keep the tree compact.
            let bytes = left * (16 + 100 + 7 + 2);
            let fill = bytes as f64 / (ts.leaf_pages as f64 * (4096.0 - 32.0));
            eprintln!(
                "{left} keys left: {} leaves, {} branches, depth {}, fill {fill:.2}",
                ts.leaf_pages, ts.branch_pages, ts.depth
            );
            assert!(
                fill >= 0.2,
                "{left} keys in {} leaves: fill {fill:.2}",
                ts.leaf_pages
            );
        }
    }
    let s = db.stats().unwrap();
    let ts = s.trees.iter().find(|t| t.name == "t").unwrap();
    assert_eq!(
        (ts.entries, ts.depth, ts.branch_pages, ts.overflow_pages),
        (0, 0, 0, 0)
    );
    assert!(
        ts.leaf_pages <= 1,
        "an empty tree keeps {} leaves",
        ts.leaf_pages
    );
    let rx = db.begin_read().unwrap();
    assert!(rx.is_empty(&tree).unwrap());
    assert!(rx.iter(&tree).unwrap().next().is_none());
    assert!(rx.iter(&tree).unwrap().next_back().is_none());
    drop(rx);
    let report = db.check().unwrap();
    assert_eq!(report.entries, 0);
    // Nearly every page of the file is free again.
    assert!(
        s.free_pages + 2 + 8 >= s.page_count,
        "after deleting everything: {} (the full tree had {full_pages} pages)",
        describe(&s)
    );
    // The empty tree takes keys again.
    let mut tx = db.begin_write().unwrap();
    tx.put(&tree, b"again", b"1").unwrap();
    tx.commit().unwrap();
    assert_eq!(db.begin_read().unwrap().len(&tree).unwrap(), 1);
    db.check().unwrap();
}

/// Overwrites with values of mixed sizes (a third of them overflow values
/// of up to 60 KB, which need contiguous runs): fragmentation must not make
/// the file grow without bound.
#[test]
fn mixed_value_sizes_stay_bounded() {
    let t = temp_db("mixed.ib");
    let db = open(&t.path);
    let mut rng = Rng::new(6);
    let mut tx = db.begin_write().unwrap();
    let tree = tx.open_tree("t").unwrap();
    tx.commit().unwrap();
    let mut want = std::collections::BTreeMap::new();
    let mut sizes = Vec::new();
    let rounds = if cfg!(debug_assertions) { 14 } else { 20 };
    for round in 0..rounds {
        for _ in 0..10 {
            let mut tx = db.begin_write().unwrap();
            for _ in 0..200 {
                let k = format!("{:05}", rng.below(2000)).into_bytes();
                let n = if rng.chance(30) {
                    rng.below(60_000)
                } else {
                    rng.below(500)
                } as usize;
                let v = vec![round; n];
                tx.put(&tree, &k, &v).unwrap();
                want.insert(k, v);
            }
            tx.commit().unwrap();
        }
        db.sync().unwrap();
        sizes.push(db.stats().unwrap().page_count);
    }
    eprintln!("mixed sizes: page counts by round {sizes:?}");
    let (p5, last) = (sizes[5], *sizes.last().unwrap());
    assert!(
        last as f64 <= p5 as f64 * 1.5,
        "file grew from {p5} pages after round 5 to {last}"
    );
    let rx = db.begin_read().unwrap();
    for (k, v) in &want {
        assert_eq!(rx.get(&tree, k).unwrap(), Some(v.as_slice()));
    }
    drop(rx);
    db.check().unwrap();
}

/// Overwrites of random keys (every commit touches leaves all over the
/// tree): the file does not grow after the first rounds.
#[test]
fn random_overwrites_stay_bounded() {
    let t = temp_db("random.ib");
    let db = open(&t.path);
    let mut rng = Rng::new(7);
    let n = KEYS / 5;
    let mut tx = db.begin_write().unwrap();
    let tree = tx.open_tree("t").unwrap();
    for i in 0..n {
        tx.put(&tree, &key(i), &value(i, 0)).unwrap();
    }
    tx.commit().unwrap();
    let mut latest = vec![0u64; n as usize];
    let mut sizes = Vec::new();
    for round in 1..=10 {
        for _ in 0..20 {
            let mut tx = db.begin_write().unwrap();
            for _ in 0..500 {
                let i = rng.below(n);
                tx.put(&tree, &key(i), &value(i, round)).unwrap();
                latest[i as usize] = round;
            }
            tx.commit().unwrap();
        }
        db.sync().unwrap();
        sizes.push(db.stats().unwrap().page_count);
    }
    eprintln!("random overwrites: page counts by round {sizes:?}");
    assert!(
        sizes[9] as f64 <= sizes[1] as f64 * 1.5,
        "file grew from {} pages after round 2 to {}",
        sizes[1],
        sizes[9]
    );
    let rx = db.begin_read().unwrap();
    for (i, e) in rx.iter(&tree).unwrap().enumerate() {
        let (k, v) = e.unwrap();
        assert_eq!(k, key(i as u64));
        assert_eq!(v, value(i as u64, latest[i]));
    }
    drop(rx);
    db.check().unwrap();
}

#[test]
fn shrink_to_fit_gives_the_free_tail_back_and_spares_what_readers_see() {
    let t = temp_db("shrink.ib");
    let db = open(&t.path);
    let mut tx = db.begin_write().unwrap();
    let keep = tx.open_tree("keep").unwrap();
    for i in 0..1000 {
        tx.put(&keep, &key(i), &value(i, 0)).unwrap();
    }
    tx.commit().unwrap();
    // Loaded last, so its pages make up the end of the file.
    let mut tx = db.begin_write().unwrap();
    let bulk = tx.open_tree("bulk").unwrap();
    for i in 0..40_000 {
        tx.put(&bulk, &key(i), &value(i, 1)).unwrap();
    }
    tx.commit().unwrap();

    // A reader that sees the tail: nothing it can read is cut.
    let reader = db.begin_read().unwrap();
    let mut tx = db.begin_write().unwrap();
    assert!(tx.drop_tree("bulk").unwrap());
    tx.commit().unwrap();
    // Only the file's growth slack past the last page goes.
    let with_reader = db.shrink_to_fit().unwrap();
    assert!(
        with_reader <= 2 << 20,
        "{with_reader} bytes cut under a reader"
    );
    assert_eq!(
        reader.get(&bulk, &key(39_999)).unwrap(),
        Some(&value(39_999, 1)[..])
    );
    db.check().unwrap();
    drop(reader);

    let full = std::fs::metadata(&t.path).unwrap().len();
    let released = db.shrink_to_fit().unwrap();
    let shrunk = std::fs::metadata(&t.path).unwrap().len();
    eprintln!("file {full} -> {shrunk} bytes ({released} released)");
    assert_eq!(full - shrunk, released);
    assert!(
        shrunk < full / 4,
        "the dropped tree's pages stayed: {full} -> {shrunk}"
    );
    db.check().unwrap();
    // At most the state chain's last old blob is left to give back.
    let again = db.shrink_to_fit().unwrap();
    assert!(again <= 16 << 10, "a second shrink released {again} bytes");
    // The database goes on: it grows again as needed, and reopens intact.
    let mut tx = db.begin_write().unwrap();
    let again = tx.open_tree("again").unwrap();
    for i in 0..5000 {
        tx.put(&again, &key(i), &value(i, 2)).unwrap();
    }
    tx.commit().unwrap();
    drop(db);
    let db = open(&t.path);
    db.check().unwrap();
    let rx = db.begin_read().unwrap();
    let keep = rx.tree("keep").unwrap();
    assert_eq!(rx.len(&keep).unwrap(), 1000);
    assert_eq!(rx.get(&keep, &key(999)).unwrap(), Some(&value(999, 0)[..]));
    assert!(rx.tree("bulk").is_err());
}

/// Whether the filesystem holding `dir` allocates blocks with `fallocate`
/// (ext4, xfs, tmpfs do; some do not, and the file then grows as a hole).
fn filesystem_allocates(dir: &std::path::Path) -> bool {
    use std::os::fd::AsRawFd;
    let probe = std::fs::File::create(dir.join("fallocate-probe")).unwrap();
    // SAFETY: `fallocate` on a file we own; it reads no memory of ours.
    let rc = unsafe { libc::fallocate(probe.as_raw_fd(), 0, 0, 1 << 20) };
    rc == 0
}

/// The blocks of the pages a commit writes past the file's old end are
/// allocated before it writes them, and a few MiB ahead, not all of the
/// file's growth slack: every page the file's commits use has its block,
/// and what is allocated past them stays within the allocation ahead
/// (docs/design.md, "The file grows by itself"). Where the filesystem
/// cannot allocate so, the file still grows.
#[test]
fn the_file_grows_by_allocated_blocks() {
    use std::os::unix::fs::MetadataExt;
    let t = temp_db("grow.ib");
    let db = open(&t.path);
    let allocates = filesystem_allocates(t.dir.path());
    let mut lengths = Vec::new();
    for round in 0..12u64 {
        let mut tx = db.begin_write().unwrap();
        let tree = tx.open_tree("t").unwrap();
        // Values of 3,000 bytes: blobs, a commit too large to be logged,
        // so every one writes its pages to the file.
        for i in 0..400 {
            tx.put(&tree, &key(round * 400 + i), &[round as u8; 3000])
                .unwrap();
        }
        tx.commit().unwrap();
        let meta = std::fs::metadata(&t.path).unwrap();
        let stats = db.stats().unwrap();
        let used = stats.page_count * stats.page_size as u64;
        assert!(meta.len() >= used, "round {round}");
        lengths.push(meta.len());
        if allocates {
            let allocated = meta.blocks() * 512;
            assert!(
                allocated >= used,
                "round {round}: {used} bytes of pages, {allocated} allocated"
            );
            assert!(
                allocated <= used + (5 << 20),
                "round {round}: {used} bytes of pages, {allocated} allocated"
            );
        }
    }
    assert!(
        lengths.windows(2).all(|w| w[0] <= w[1]) && lengths[11] >= 12 * 400 * 3000,
        "the file grew to hold every value: {lengths:?}"
    );
    drop(db);
    let db = open(&t.path);
    let tx = db.begin_read().unwrap();
    let tree = tx.tree("t").unwrap();
    for i in [0, 399, 1200, 4799] {
        assert_eq!(tx.get(&tree, &key(i)).unwrap().unwrap()[0], (i / 400) as u8);
    }
}
