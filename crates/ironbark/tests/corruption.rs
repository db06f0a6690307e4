//! Corrupted files: every byte of a small database flipped one at a time
//! (and every byte of a redo log of durable commits: `every_byte_of_a_durable_log_flipped`),
//! every bit of both meta pages, and a seeded mutation fuzzer. Each damaged
//! file is either harmless (the bytes were unused) or detected as an error
//! at open or by `check()`: no panic, no hang, no huge allocation, and a
//! file that passes `check()` returns exactly the right data.
//!
//! `IRONBARK_FUZZ_CASES=1000000 cargo test --release --test corruption -- --nocapture`
//! runs the fuzzer longer.

mod common;

use std::path::Path;

use common::{read_model, temp_db, Model, Rng};
use ironbark::{Database, Durability, Error, Options};

fn build(path: &Path) -> Model {
    let options = Options {
        page_size: 1024,
        durability: Durability::Immediate,
        ..Options::default()
    };
    let db = Database::open_with(path, &options).unwrap();
    let mut rng = Rng::new(77);
    let mut model = Model::new();
    for round in 0..6 {
        let mut tx = db.begin_write().unwrap();
        for name in ["one", "two", "three"] {
            let t = tx.open_tree(name).unwrap();
            let m = model.entry(name.to_string()).or_default();
            for _ in 0..25 {
                let k = format!("{name}-{:04}", rng.below(60)).into_bytes();
                if round > 2 && rng.chance(30) {
                    tx.delete(&t, &k).unwrap();
                    m.remove(&k);
                } else {
                    let len = if rng.chance(5) {
                        2500
                    } else {
                        rng.below(40) as usize
                    };
                    let v = rng.bytes(len);
                    tx.put(&t, &k, &v).unwrap();
                    m.insert(k, v);
                }
            }
        }
        tx.commit().unwrap();
    }
    db.sync().unwrap();
    // The state chain holds a base and sealed and open deltas, so the
    // flips below hit every kind of state blob.
    let c = db.stats().unwrap().counters;
    assert!(c.state_seals > 0, "no sealed delta: {c:?}");
    model
}

/// Every entry by scans, checked against lookups and reverse scans.
fn read_checked(db: &Database) -> ironbark::Result<Model> {
    let (_, model) = read_model(db)?;
    let rx = db.begin_read()?;
    for (name, entries) in &model {
        let tree = rx.tree(name)?;
        // Point lookups and reverse scans take other paths.
        for (k, v) in entries {
            if rx.get(&tree, k)? != Some(v.as_slice()) {
                return Err(Error::Corrupted {
                    page: None,
                    detail: "lookup disagrees with scan".into(),
                });
            }
        }
        let reverse: Vec<Vec<u8>> = rx
            .iter(&tree)?
            .rev()
            .map(|e| e.map(|(k, _)| k.to_vec()))
            .collect::<Result<_, _>>()?;
        if !reverse.iter().rev().eq(entries.keys()) {
            return Err(Error::Corrupted {
                page: None,
                detail: "reverse scan disagrees".into(),
            });
        }
    }
    Ok(model)
}

#[derive(Debug, PartialEq)]
enum Verdict {
    Harmless,
    Detected,
}

/// Opens a damaged image: detected (an error at open or from `check()`),
/// or harmless (then every read must return exactly the model).
fn judge(path: &Path, image: &[u8], model: &Model) -> Verdict {
    std::fs::write(path, image).unwrap();
    let db = match Database::open(path) {
        Ok(db) => db,
        Err(_) => return Verdict::Detected,
    };
    if db.check().is_err() {
        // Reads of a file that fails `check()` must still not panic.
        let _ = read_checked(&db);
        return Verdict::Detected;
    }
    match read_checked(&db) {
        Ok(m) if m == *model => Verdict::Harmless,
        Ok(_) => panic!("a damaged file passed check() and returned wrong data"),
        Err(e) => panic!("a damaged file passed check() but a read failed: {e}"),
    }
}

fn setup() -> (
    common::TempDb,
    tempfile::TempDir,
    Vec<u8>,
    Model,
    std::path::PathBuf,
) {
    let t = temp_db("corrupt.ib");
    let model = build(&t.path);
    // Close cleanly: both meta slots then describe the newest commit.
    let image = std::fs::read(&t.path).unwrap();
    // Damaged copies live in memory when it can: there are many.
    let shm = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    let damaged = shm.path().join("damaged.ib");
    (t, shm, image, model, damaged)
}

#[test]
fn every_byte_flipped() {
    let (_t, _shm, image, model, damaged) = setup();
    let page_size = 1024;
    // The file is grown in chunks; flip bytes of the pages in use.
    let (in_use, used_pages) = {
        let db = Database::open(&_t.path).unwrap();
        let s = db.stats().unwrap();
        (
            s.page_count as usize * page_size,
            (s.page_count - s.free_pages) as usize,
        )
    };
    // The flips reach every kind of tree page: leaves (2), blobs (3) and
    // branches whose slots hint at their children (4), each page found
    // by its own number in its header.
    for kind in [2u8, 3, 4] {
        assert!(
            (2..in_use / page_size).any(|p| {
                let b = &image[p * page_size..(p + 1) * page_size];
                b[16] == kind && u64::from_le_bytes(b[24..32].try_into().unwrap()) == p as u64
            }),
            "no page of kind {kind} in the image"
        );
    }
    let (mut harmless, mut detected) = (0, 0);
    for at in 0..in_use {
        let mut bad = image.clone();
        bad[at] ^= 0xA5;
        match judge(&damaged, &bad, &model) {
            Verdict::Harmless => harmless += 1,
            Verdict::Detected => detected += 1,
        }
    }
    eprintln!("{in_use} byte flips: {detected} detected, {harmless} harmless");
    // Every byte of a page in use is covered by a checksum; a damaged meta
    // page is harmless, since the other slot holds the same commit.
    assert!(
        detected >= (used_pages - 2) * page_size,
        "{detected} flips detected, but {used_pages} pages are in use"
    );
}

#[test]
fn every_bit_of_the_meta_pages() {
    let (_t, _shm, image, model, damaged) = setup();
    let page_size = 1024;
    // The meta (88 bytes) and the list of branch regions after it (16
    // bytes when it names none): the list is a hint, so a damaged one is
    // ignored, and the other slot holds the same meta.
    for slot in 0..2 {
        for byte in 0..104 {
            for bit in 0..8 {
                let mut bad = image.clone();
                bad[slot * page_size + byte] ^= 1 << bit;
                // The other slot holds the same commit: nothing may change.
                assert_eq!(
                    judge(&damaged, &bad, &model),
                    Verdict::Harmless,
                    "slot {slot} byte {byte} bit {bit}"
                );
            }
        }
    }
    // Both meta pages damaged: an error, never a panic.
    let mut bad = image.clone();
    bad[10] ^= 1;
    bad[page_size + 10] ^= 1;
    assert_eq!(judge(&damaged, &bad, &model), Verdict::Detected);
}

#[test]
fn seeded_mutation_fuzzer() {
    let (_t, _shm, image, model, damaged) = setup();
    let cases: u64 = std::env::var("IRONBARK_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3000);
    let page_size = 1024;
    let pages = image.len() / page_size;
    let mut rng = Rng::new(4242);
    let mut detected = 0;
    for case in 0..cases {
        let mut bad = image.clone();
        match rng.below(6) {
            // A few random bytes.
            0 | 1 => {
                for _ in 0..1 + rng.below(8) {
                    let at = rng.below(bad.len() as u64) as usize;
                    bad[at] = rng.next_u64() as u8;
                }
            }
            // An interesting value written over a random field-sized spot.
            2 => {
                let at = rng.below(bad.len() as u64 - 8) as usize;
                let v: u64 =
                    [0, 1, u64::MAX, u64::MAX >> 1, 1 << 32, 0xFFFF, 2, 3][rng.below(8) as usize];
                let width = [1usize, 2, 4, 8][rng.below(4) as usize];
                bad[at..at + width].copy_from_slice(&v.to_le_bytes()[..width]);
            }
            // A page replaced by another page (stale or misdirected write).
            3 => {
                let (a, b) = (
                    rng.below(pages as u64) as usize,
                    rng.below(pages as u64) as usize,
                );
                let src = bad[b * page_size..(b + 1) * page_size].to_vec();
                bad[a * page_size..(a + 1) * page_size].copy_from_slice(&src);
            }
            // Truncated.
            4 => bad.truncate(rng.below(bad.len() as u64) as usize),
            // A page zeroed.
            _ => {
                let a = rng.below(pages as u64) as usize;
                bad[a * page_size..(a + 1) * page_size].fill(0);
            }
        }
        if judge(&damaged, &bad, &model) == Verdict::Detected {
            detected += 1;
        }
        let _ = case;
    }
    eprintln!("{cases} fuzz cases, {detected} detected, the rest harmless");
    assert!(detected > 0);
}

#[test]
fn foreign_and_empty_files() {
    let t = temp_db("foreign.ib");
    // (An empty file is initialized as a new database: tests/trust.rs.)
    for content in [
        b"SQLite format 3\0".to_vec(),
        vec![0u8; 8192],
        Rng::new(1).bytes(100_000),
    ] {
        std::fs::write(&t.path, &content).unwrap();
        match Database::open(&t.path) {
            Err(Error::NotAnIronbarkFile) | Err(Error::Corrupted { .. }) => {}
            other => panic!("a foreign file of {} bytes gave {other:?}", content.len()),
        }
    }
}

const LOG_CHILD_ENV: &str = "IRONBARK_CORRUPTION_LOG_CHILD";
/// Durable commits the child logs before it dies.
const LOG_COMMITS: u64 = 24;

/// The commits counted so far: `counter` and keys `0..=counter`, or `None`
/// for a tree that holds none yet.
fn counted(db: &Database) -> ironbark::Result<Option<u64>> {
    let rx = db.begin_read()?;
    let Ok(t) = rx.tree("t") else {
        return Ok(None);
    };
    let Some(c) = rx.get(&t, b"counter")? else {
        return Ok(None);
    };
    let c = u64::from_le_bytes(c.try_into().expect("8-byte counter"));
    for n in 0..LOG_COMMITS {
        assert_eq!(
            rx.get(&t, &n.to_be_bytes())?.is_some(),
            n <= c,
            "key {n} with counter {c}: not the state of one commit"
        );
    }
    Ok(Some(c))
}

/// Every byte of a redo log of durable commits flipped, one at a time, in
/// a copy of the files a process left when it died after its last commit.
/// A flip is reported (`Corrupted`, the open changes nothing) whenever a
/// later intact record vouches for the damaged one, which every record but
/// the last two has (the one after it, or the one after that when the flip
/// hit the damaged record's checksum or length, which the next one's
/// check needs); in the last two, the replay may instead end before the
/// damaged record. Never a panic, never a state that is not a whole
/// commit, never a commit past the damage.
#[test]
fn every_byte_of_a_durable_log_flipped() {
    let options = Options {
        durability: Durability::Immediate,
        logged_commits: true,
        page_size: 1024,
        ..Options::default()
    };
    if let Ok(path) = std::env::var(LOG_CHILD_ENV) {
        let db = Database::open_with(&path, &options).unwrap();
        for n in 0..LOG_COMMITS {
            let mut tx = db.begin_write().unwrap();
            let t = tx.open_tree("t").unwrap();
            tx.put(&t, b"counter", &n.to_le_bytes()).unwrap();
            tx.put(&t, &n.to_be_bytes(), b"v").unwrap();
            tx.commit().unwrap();
        }
        std::process::exit(0);
    }
    let t = temp_db("log.ib");
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "every_byte_of_a_durable_log_flipped",
            "--nocapture",
        ])
        .env(LOG_CHILD_ENV, &t.path)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let log_path = common::log_path(&t.path);
    let data = std::fs::read(&t.path).unwrap();
    let log = std::fs::read(&log_path).unwrap();
    // The records' extents (docs/file-format.md, "The redo log"): each
    // commit's own, the tree's creation in the first.
    let mut starts = vec![0usize];
    while log[*starts.last().unwrap() + 8..][..4] == *b"IBLG" {
        let at = *starts.last().unwrap();
        let len = u32::from_le_bytes(log[at + 12..at + 16].try_into().unwrap()) as usize;
        starts.push(at + (32 + len).next_multiple_of(8));
    }
    let records = starts.len() - 1;
    assert_eq!(records as u64, LOG_COMMITS, "one record a commit");
    let used = starts[records];
    let shm = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    let damaged = shm.path().join("damaged.ib");
    let damaged_log = common::log_path(&damaged);
    let (mut reported, mut replayed_before) = (0, 0);
    for at in 0..used {
        let record = starts.partition_point(|&s| s <= at) - 1;
        let mut bad = log.clone();
        bad[at] ^= 0xA5;
        std::fs::write(&damaged, &data).unwrap();
        std::fs::write(&damaged_log, &bad).unwrap();
        let _ = std::fs::remove_file(damaged.with_file_name("damaged.ib-lock"));
        match Database::open_with(&damaged, &options) {
            Err(Error::Corrupted { .. }) => {
                reported += 1;
                assert!(
                    std::fs::read(&damaged_log).unwrap() == bad,
                    "byte {at}: the failed open changed the log"
                );
            }
            Err(e) => panic!("byte {at} (record {record}): {e}"),
            Ok(db) => {
                assert!(
                    record + 2 >= records,
                    "byte {at} of record {record} of {records}: dropped without a word"
                );
                db.check().unwrap();
                // The commits before the damaged record's, no more, no fewer.
                let want = (record as u64).checked_sub(1);
                assert_eq!(counted(&db).unwrap(), want, "byte {at}");
                replayed_before += 1;
            }
        }
    }
    eprintln!("{used} log bytes flipped: {reported} reported, {replayed_before} replayed up to the damage");
    assert!(reported > used * 3 / 4, "{reported} of {used} reported");
}
