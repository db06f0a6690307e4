//! Streamed values (`WriteTxn::put_writer`, `get_reader`) and large
//! values: round trips at every size boundary of the page layout, written
//! in chunks of random sizes and read back with random seeks, in file and
//! logged commits; a short or overlong stream fails its transaction and
//! leaves nothing behind; a small streamed value reaches the redo log (a
//! crash image replays it) and a large one is committed as pages; and a
//! 256 MiB value streamed from a 1 MiB buffer raises the process's peak
//! memory by about its size, not twice it (in a child process, so that
//! other tests do not disturb the measure).

mod common;

use std::io::{Read, Seek, SeekFrom, Write};
use std::process::Command;

use common::{peak_rss, temp_db, Images, Rng};
use ironbark::{Database, Durability, Error, Options, ReadTxn, Tree};

/// Value sizes around the layout's boundaries for `page_size`: empty,
/// inline, one blob page exactly and a byte either side, whole numbers of
/// pages, and a few MiB.
fn sizes(page_size: usize) -> Vec<usize> {
    let header = 40; // a blob run's header
    let mut sizes = vec![0, 1, 2, 100, 1000, 1500, 2000, 2047, 2048, 2049, 3000];
    for pages in [1, 2, 3, 4] {
        let data = pages * page_size - header;
        sizes.extend([data - 1, data, data + 1]);
        sizes.extend([
            pages * page_size - 1,
            pages * page_size,
            pages * page_size + 1,
        ]);
    }
    sizes.extend([16 << 10, (16 << 10) + 1, 100_000, 256 << 10, (3 << 20) + 17]);
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

/// Writes `value` through `put_writer` in chunks of random sizes.
fn stream_in(tx: &mut ironbark::WriteTxn<'_>, t: &Tree, key: &[u8], value: &[u8], rng: &mut Rng) {
    let mut w = tx.put_writer(t, key, value.len()).unwrap();
    let mut at = 0;
    while at < value.len() {
        let max = if rng.chance(50) { 100 } else { 70_000 };
        let n = (1 + rng.below(max) as usize).min(value.len() - at);
        w.write_all(&value[at..at + n]).unwrap();
        at += n;
    }
    assert_eq!((w.written(), w.remaining()), (value.len(), 0));
    w.finish().unwrap();
}

/// Reads the value of `key` through `get_reader` with random seeks and
/// reads of random sizes, checking every byte against `value`, then
/// whole, sequentially.
fn check_reader(rx: &ReadTxn, t: &Tree, key: &[u8], value: &[u8], rng: &mut Rng) {
    let mut r = rx.get_reader(t, key).unwrap().expect("value present");
    assert_eq!(r.len(), value.len() as u64);
    for _ in 0..20 {
        let from = rng.below(value.len() as u64 + 10);
        assert_eq!(r.seek(SeekFrom::Start(from)).unwrap(), from);
        let mut buf = vec![0u8; 1 + rng.below(50_000) as usize];
        let n = r.read(&mut buf).unwrap();
        let from = from as usize;
        let expected = value.get(from..).unwrap_or(&[]);
        let expected = &expected[..expected.len().min(buf.len())];
        assert_eq!(&buf[..n], expected, "read at {from} of {}", value.len());
        assert_eq!(r.position(), (from + n) as u64);
    }
    if !value.is_empty() {
        let back = rng.below(value.len() as u64) as i64 + 1;
        r.seek(SeekFrom::End(-back)).unwrap();
        let mut tail = Vec::new();
        r.read_to_end(&mut tail).unwrap();
        assert_eq!(tail, &value[value.len() - back as usize..]);
        r.seek(SeekFrom::Current(-back)).unwrap();
        assert_eq!(
            r.stream_position().unwrap(),
            (value.len() as i64 - back) as u64
        );
    }
    assert!(r.seek(SeekFrom::End(-(value.len() as i64) - 1)).is_err());
    r.rewind().unwrap();
    let mut all = Vec::new();
    r.read_to_end(&mut all).unwrap();
    assert!(all == value, "whole value of {} bytes", value.len());
    assert!(r.as_bytes() == value);
}

fn round_trips(options: &Options, seed: u64) {
    let t = temp_db("large.ib");
    let db = Database::open_with(&t.path, options).unwrap();
    let mut rng = Rng::new(seed);
    let sizes = sizes(options.page_size);
    let values: Vec<(Vec<u8>, Vec<u8>)> = sizes
        .iter()
        .map(|&len| (format!("v{len:09}").into_bytes(), rng.bytes(len)))
        .collect();
    // One transaction per value, and then all of them again in one.
    for (key, value) in &values {
        let mut tx = db.begin_write().unwrap();
        let tree = tx.open_tree("t").unwrap();
        stream_in(&mut tx, &tree, key, value, &mut rng);
        assert!(tx.get(&tree, key).unwrap() == Some(&value[..]));
        tx.commit().unwrap();
        let rx = db.begin_read().unwrap();
        check_reader(&rx, &tree, key, value, &mut rng);
    }
    let mut tx = db.begin_write().unwrap();
    let tree = tx.open_tree("t").unwrap();
    for (key, value) in values.iter().rev() {
        let value: Vec<u8> = value.iter().map(|b| b ^ 0x5a).collect();
        stream_in(&mut tx, &tree, key, &value, &mut rng);
        // A read between streams, on the transaction's own pages.
        let mut r = tx.get_reader(&tree, key).unwrap().unwrap();
        let mut back = Vec::new();
        r.read_to_end(&mut back).unwrap();
        assert!(back == value);
    }
    tx.commit().unwrap();
    drop(db);
    let db = Database::open_with(&t.path, options).unwrap();
    db.check().unwrap();
    let rx = db.begin_read().unwrap();
    let tree = rx.tree("t").unwrap();
    assert_eq!(rx.len(&tree).unwrap(), values.len() as u64);
    for (key, value) in &values {
        let value: Vec<u8> = value.iter().map(|b| b ^ 0x5a).collect();
        check_reader(&rx, &tree, key, &value, &mut rng);
    }
}

#[test]
fn streamed_values_round_trip_at_every_size_boundary_in_file_commits() {
    for page_size in [4096, 16384] {
        let options = Options {
            page_size,
            logged_commits: false,
            ..Options::default()
        };
        round_trips(&options, page_size as u64);
    }
}

#[test]
fn streamed_values_round_trip_at_every_size_boundary_in_logged_commits() {
    let options = Options::default();
    assert!(options.logged_commits, "logged commits are the default");
    round_trips(&options, 99);
}

/// Opens the crash image of the database at `path` (its files as they are
/// now, as if the process had died) at `crashed`.
fn crash_image(path: &std::path::Path, crashed: &std::path::Path) -> Database {
    Images::read(path).write(crashed);
    Database::open(crashed).unwrap()
}

#[test]
fn a_small_streamed_value_is_logged_and_replayed_a_large_one_is_written_as_pages() {
    let t = temp_db("logged.ib");
    let crashed = t.dir.path().join("crashed.ib");
    let db = Database::open(&t.path).unwrap();
    let mut rng = Rng::new(5);
    let mut tx = db.begin_write().unwrap();
    let tree = tx.open_tree("t").unwrap();
    tx.put(&tree, b"base", b"x").unwrap();
    tx.commit().unwrap();
    let logged = |db: &Database| db.stats().unwrap().counters.logged_commits;

    // Small values, inline and in a blob, and another put after them:
    // one logged commit, which the crash image replays from the log.
    let (inline, blob) = (rng.bytes(300), rng.bytes(5000));
    let before = logged(&db);
    let mut tx = db.begin_write().unwrap();
    tx.set_durability(Durability::Immediate);
    stream_in(&mut tx, &tree, b"inline", &inline, &mut rng);
    stream_in(&mut tx, &tree, b"blob", &blob, &mut rng);
    tx.put(&tree, b"after", b"y").unwrap();
    tx.commit().unwrap();
    assert_eq!(logged(&db), before + 1, "a small streamed value is logged");
    {
        let db = crash_image(&t.path, &crashed);
        let rx = db.begin_read().unwrap();
        let tree = rx.tree("t").unwrap();
        assert_eq!(rx.get(&tree, b"inline").unwrap(), Some(&inline[..]));
        assert_eq!(rx.get(&tree, b"blob").unwrap(), Some(&blob[..]));
        assert_eq!(rx.get(&tree, b"after").unwrap(), Some(&b"y"[..]));
    }

    // The last put of a writer that is still open at commit (finished,
    // then the transaction committed with no call in between).
    let last = rng.bytes(5000);
    let mut tx = db.begin_write().unwrap();
    tx.set_durability(Durability::Immediate);
    stream_in(&mut tx, &tree, b"last", &last, &mut rng);
    tx.commit().unwrap();
    assert_eq!(logged(&db), before + 2);

    // A value too large for the log: the commit writes pages.
    let big = rng.bytes(600 << 10);
    let mut tx = db.begin_write().unwrap();
    tx.set_durability(Durability::Immediate);
    stream_in(&mut tx, &tree, b"big", &big, &mut rng);
    tx.put(&tree, b"small", b"z").unwrap();
    tx.commit().unwrap();
    assert_eq!(logged(&db), before + 2, "a large value is not logged");

    // And a small one after it is logged again.
    let mut tx = db.begin_write().unwrap();
    tx.set_durability(Durability::Immediate);
    let tail = rng.bytes(700);
    stream_in(&mut tx, &tree, b"tail", &tail, &mut rng);
    tx.commit().unwrap();
    assert_eq!(logged(&db), before + 3);

    let db = crash_image(&t.path, &crashed);
    db.check().unwrap();
    let rx = db.begin_read().unwrap();
    let tree = rx.tree("t").unwrap();
    for (key, value) in [
        (&b"inline"[..], &inline[..]),
        (b"blob", &blob),
        (b"last", &last),
        (b"big", &big),
        (b"small", b"z"),
        (b"tail", &tail),
    ] {
        check_reader(&rx, &tree, key, value, &mut rng);
    }
}

/// The longest value a leaf keeps inline beside a key of `key_len` bytes
/// at 4 KiB pages: half a page's usable bytes, less a slot and a cell's
/// header (docs/file-format.md, "Sizes").
fn max_inline_value(key_len: usize) -> usize {
    (4096 - 32) / 2 - 6 - 7 - key_len
}

/// Values up to half a page stay in their leaf, longer ones take a blob
/// (the tree's blob pages are exactly those of the values past the
/// limit), and leaves holding such values split, merge and take
/// overwrites of other lengths with every page within bounds: random
/// puts, overwrites and deletes of values from 1,000 to 2,400 bytes (one
/// or two to a leaf), in file and in logged commits, checked against a
/// model, by `check`, and after a reopen.
fn values_up_to_half_a_page_stay_inline(options: &Options, seed: u64) {
    let t = temp_db("inline.ib");
    let db = Database::open_with(&t.path, options).unwrap();
    let mut rng = Rng::new(seed);
    let mut model = std::collections::BTreeMap::new();
    let mut tx = db.begin_write().unwrap();
    let tree = tx.open_tree("t").unwrap();
    tx.commit().unwrap();
    let limit = max_inline_value(8);
    for round in 0..40 {
        let mut tx = db.begin_write().unwrap();
        for _ in 0..1 + rng.below(60) {
            let key = rng.below(400).to_be_bytes();
            if rng.below(4) == 0 {
                assert_eq!(
                    tx.delete(&tree, &key).unwrap(),
                    model.remove(&key).is_some()
                );
            } else {
                let len = match rng.below(3) {
                    0 => limit + rng.below(3) as usize - 1,
                    _ => 1000 + rng.below(1400) as usize,
                };
                let value = rng.bytes(len);
                tx.put(&tree, &key, &value).unwrap();
                model.insert(key, value);
            }
        }
        tx.commit().unwrap();
        let rx = db.begin_read().unwrap();
        let tree = rx.tree("t").unwrap();
        assert_eq!(rx.len(&tree).unwrap(), model.len() as u64, "round {round}");
        for (k, v) in &model {
            assert_eq!(rx.get(&tree, k).unwrap(), Some(&v[..]), "round {round}");
        }
    }
    drop(db);
    let db = Database::open_with(&t.path, options).unwrap();
    assert!(db.check().unwrap().is_clean());
    let blobs = model.values().filter(|v| v.len() > limit).count() as u64;
    let stats = db.stats().unwrap();
    let t = stats.trees.iter().find(|t| t.name == "t").unwrap();
    assert_eq!(
        t.overflow_pages, blobs,
        "a blob page for each value past the limit only"
    );
    assert!(
        model.values().any(|v| v.len() == limit),
        "the limit itself is reached"
    );
    assert!(model.values().any(|v| v.len() > limit));
    assert!(
        t.leaf_pages * 2 >= model.len() as u64 - blobs,
        "at most two inline values a leaf"
    );
    let rx = db.begin_read().unwrap();
    let tree = rx.tree("t").unwrap();
    let mut cursor = rx.iter(&tree).unwrap();
    for (k, v) in &model {
        let (key, value) = cursor.next().unwrap().unwrap();
        assert_eq!((key, value), (&k[..], &v[..]));
    }
    assert!(cursor.next().is_none());
}

#[test]
fn values_up_to_half_a_page_stay_inline_in_file_commits() {
    let options = Options {
        logged_commits: false,
        durability: Durability::None,
        ..Options::default()
    };
    values_up_to_half_a_page_stay_inline(&options, 11);
}

#[test]
fn values_up_to_half_a_page_stay_inline_in_logged_commits() {
    let options = Options {
        durability: Durability::None,
        ..Options::default()
    };
    values_up_to_half_a_page_stay_inline(&options, 12);
}

#[test]
fn a_short_or_overlong_stream_fails_its_transaction_and_leaves_nothing() {
    for logged_commits in [false, true] {
        let t = temp_db("short.ib");
        let options = Options {
            logged_commits,
            ..Options::default()
        };
        let db = Database::open_with(&t.path, &options).unwrap();
        let mut tx = db.begin_write().unwrap();
        let tree = tx.open_tree("t").unwrap();
        tx.put(&tree, b"old", b"kept").unwrap();
        tx.commit().unwrap();
        let snapshot = || {
            let rx = db.begin_read().unwrap();
            let all: Vec<(Vec<u8>, Vec<u8>)> = rx
                .iter(&tree)
                .unwrap()
                .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
                .collect();
            all
        };
        let before = snapshot();
        for len in [10, 5000, 1 << 20] {
            // Short: finish says so, and the commit fails.
            let mut tx = db.begin_write().unwrap();
            tx.put(&tree, b"other", b"change").unwrap();
            let mut w = tx.put_writer(&tree, b"old", len).unwrap();
            w.write_all(&vec![1u8; len - 1]).unwrap();
            match w.finish() {
                Err(Error::TxnFailed(why)) => assert!(why.contains("streamed value"), "{why}"),
                other => panic!("short stream finished with {other:?}"),
            }
            assert!(matches!(tx.commit(), Err(Error::TxnFailed(_))));
            assert_eq!(snapshot(), before, "len {len}");

            // Dropped unfinished: the commit fails.
            let mut tx = db.begin_write().unwrap();
            let mut w = tx.put_writer(&tree, b"new", len).unwrap();
            w.write_all(&[2u8; 3]).unwrap();
            drop(w);
            assert!(matches!(tx.commit(), Err(Error::TxnFailed(_))));
            assert_eq!(snapshot(), before, "len {len}");

            // Overlong: the write past the end is refused, and the commit fails.
            let mut tx = db.begin_write().unwrap();
            let mut w = tx.put_writer(&tree, b"new", len).unwrap();
            let err = w.write_all(&vec![3u8; len + 1]).unwrap_err();
            assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
            assert_eq!(w.remaining(), 0);
            assert!(w.finish().is_err());
            assert!(matches!(tx.commit(), Err(Error::TxnFailed(_))));
            assert_eq!(snapshot(), before, "len {len}");
        }
        // A whole value dropped without `finish` is whole: it commits.
        let mut tx = db.begin_write().unwrap();
        let mut w = tx.put_writer(&tree, b"whole", 4).unwrap();
        w.write_all(b"abcd").unwrap();
        drop(w);
        tx.commit().unwrap();
        let rx = db.begin_read().unwrap();
        assert_eq!(rx.get(&tree, b"whole").unwrap(), Some(&b"abcd"[..]));
    }
}

#[test]
fn put_writer_refuses_bad_sizes_and_leaves_the_transaction_usable() {
    let t = temp_db("bad.ib");
    let db = Database::open(&t.path).unwrap();
    let mut tx = db.begin_write().unwrap();
    let tree = tx.open_tree("t").unwrap();
    assert!(matches!(
        tx.put_writer(&tree, &[0u8; 70_000], 10),
        Err(Error::KeyTooLarge { .. })
    ));
    assert!(matches!(
        tx.put_writer(&tree, b"k", ironbark::MAX_VALUE_LEN + 1),
        Err(Error::ValueTooLarge { .. })
    ));
    assert!(tx.get_reader(&tree, b"k").unwrap().is_none());
    let mut w = tx.put_writer(&tree, b"k", 2).unwrap();
    w.write_all(b"ok").unwrap();
    w.finish().unwrap();
    tx.commit().unwrap();
    let rx = db.begin_read().unwrap();
    assert_eq!(rx.get(&tree, b"k").unwrap(), Some(&b"ok"[..]));
}

#[test]
fn put_reserve_of_a_large_value_is_zeroed_and_filled_in_place() {
    let t = temp_db("reserve.ib");
    let db = Database::open(&t.path).unwrap();
    let mut rng = Rng::new(11);
    let mut tx = db.begin_write().unwrap();
    let tree = tx.open_tree("t").unwrap();
    tx.put(&tree, b"k", &rng.bytes(50_000)).unwrap();
    let space = tx.put_reserve(&tree, b"k", 3 << 20).unwrap();
    assert!(space.iter().all(|&b| b == 0), "reserved space is zeroed");
    let value = rng.bytes(3 << 20);
    space[..1000].copy_from_slice(&value[..1000]);
    tx.commit().unwrap();
    let rx = db.begin_read().unwrap();
    let got = rx.get(&tree, b"k").unwrap().unwrap();
    assert_eq!(got.len(), 3 << 20);
    assert_eq!(&got[..1000], &value[..1000]);
    assert!(got[1000..].iter().all(|&b| b == 0));
    drop(rx);
    db.check().unwrap();
}

/// The peak memory check's child: set to the database path it works in.
const PEAK_CHILD: &str = "IRONBARK_PEAK_MEMORY_CHILD";
/// `put` makes the child store the value with a plain `put` of a vector
/// (which needs twice the value: the check fails then, by design).
const PEAK_MODE: &str = "IRONBARK_PEAK_MEMORY_MODE";
const PEAK_VALUE: usize = 256 << 20;

/// The child: streams (or `put`s) a 256 MiB value and commits, then
/// checks the peak memory it took.
#[test]
fn peak_memory_child() {
    let Ok(path) = std::env::var(PEAK_CHILD) else {
        return; // only in the child of `streaming_a_large_value_takes_its_size_in_memory_not_twice`
    };
    let db = Database::open(&path).unwrap();
    let mut tx = db.begin_write().unwrap();
    let tree = tx.open_tree("t").unwrap();
    tx.put(&tree, b"warm", b"up").unwrap();
    tx.commit().unwrap();
    let mut chunk = vec![0u8; 1 << 20];
    let base = peak_rss();
    let mut tx = db.begin_write().unwrap();
    let tree = tx.open_tree("t").unwrap();
    if std::env::var(PEAK_MODE).as_deref() == Ok("put") {
        let value: Vec<u8> = (0..PEAK_VALUE).map(|i| (i >> 20) as u8 | 1).collect();
        tx.put(&tree, b"big", &value).unwrap();
    } else {
        let mut w = tx.put_writer(&tree, b"big", PEAK_VALUE).unwrap();
        for i in 0..PEAK_VALUE >> 20 {
            chunk.fill(i as u8 | 1);
            w.write_all(&chunk).unwrap();
        }
        w.finish().unwrap();
    }
    tx.commit().unwrap();
    let grew = peak_rss().saturating_sub(base);
    println!("peak memory grew by {} MiB", grew >> 20);
    assert!(
        grew < PEAK_VALUE / 2 * 3,
        "storing a {} MiB value raised peak memory by {} MiB",
        PEAK_VALUE >> 20,
        grew >> 20
    );
    // The value is there (read through the map after the measure).
    let rx = db.begin_read().unwrap();
    let mut r = rx.get_reader(&tree, b"big").unwrap().unwrap();
    assert_eq!(r.len(), PEAK_VALUE as u64);
    r.seek(SeekFrom::Start(5 << 20)).unwrap();
    let mut b = [0u8; 1];
    r.read_exact(&mut b).unwrap();
    assert_eq!(b[0], 5 | 1);
}

#[test]
fn streaming_a_large_value_takes_its_size_in_memory_not_twice() {
    let t = temp_db("peak.ib");
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "peak_memory_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(PEAK_CHILD, &t.path)
        .env_remove(PEAK_MODE)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed\n{stdout}\n{stderr}");
    assert!(stdout.contains("peak memory grew by"), "{stdout}");
}
