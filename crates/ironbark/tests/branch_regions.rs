//! Branch regions: the writer places branch pages in aligned regions that
//! hold nothing else (docs/design.md, "Branch regions"), so that a
//! lookup's upper levels lie in a few of them. Checked on the closed file,
//! read as docs/file-format.md lays it out: the live branches of a random
//! load lie in the regions the meta names, and in few, where without
//! regions they spread over many; the regions outlive a reopen (a single
//! put then takes no new one); a damaged list of them is ignored, and the
//! next commit names regions again; a whole list naming regions that hold
//! leaves, and a region size changed between opens, lose nothing.
//! `check()` passes throughout.

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use common::{temp_db, Rng};
use ironbark::{Database, Durability, Options};

const PAGE: usize = 4096;
/// 16 pages: a file of a few MiB holds many regions.
const REGION: usize = 64 << 10;
const REGION_PAGES: u64 = (REGION / PAGE) as u64;
/// Branch page kinds: of plain slots (6 bytes), and of slots that hint
/// at their children (10 bytes), which this build writes.
const KIND_BRANCH: u8 = 1;
const KIND_HINTED_BRANCH: u8 = 4;
/// Where the list of regions starts in a meta page (after the meta's 88
/// bytes).
const LIST_AT: usize = 88;

fn options(region: usize, logged: bool) -> Options {
    Options {
        page_size: PAGE,
        durability: Durability::None,
        logged_commits: logged,
        branch_region_bytes: region,
        ..Options::default()
    }
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().unwrap())
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// The live branch pages of the file's one tree: from the newest root
/// (the branch no other references, with the highest txn), through child
/// references whose txn matches the child's header.
fn live_branches(path: &Path) -> BTreeSet<u64> {
    let data = std::fs::read(path).unwrap();
    let mut branches = std::collections::BTreeMap::new();
    for pgno in 2..(data.len() / PAGE) as u64 {
        let p = &data[pgno as usize * PAGE..][..PAGE];
        let slot_len = match p[16] {
            KIND_BRANCH => 6,
            KIND_HINTED_BRANCH => 10,
            _ => continue,
        };
        if u64_at(p, 24) != pgno {
            continue;
        }
        let count = u16_at(p, 18) as usize;
        let children: Vec<(u64, u64)> = (0..count)
            .map(|i| {
                let cell = u16_at(p, 32 + slot_len * i) as usize;
                (u64_at(p, cell), u64_at(p, cell + 8))
            })
            .collect();
        branches.insert(pgno, (u64_at(p, 8), children));
    }
    let referenced: BTreeSet<(u64, u64)> = branches
        .values()
        .flat_map(|(_, c)| c.iter().copied())
        .collect();
    let root = branches
        .iter()
        .filter(|(p, (txn, _))| !referenced.contains(&(**p, *txn)))
        .max_by_key(|(_, (txn, _))| *txn)
        .map(|(p, _)| *p)
        .expect("a root branch");
    let (mut live, mut stack) = (BTreeSet::new(), vec![root]);
    while let Some(p) = stack.pop() {
        if live.insert(p) {
            for &(child, txn) in &branches[&p].1 {
                if branches.get(&child).is_some_and(|(t, _)| *t == txn) {
                    stack.push(child);
                }
            }
        }
    }
    live
}

/// The meta slot (0 or 1) of the newest commit in the file's bytes.
fn newest_meta(data: &[u8]) -> usize {
    (0..2)
        .max_by_key(|&slot| u64_at(&data[slot * PAGE..], 16))
        .unwrap()
}

/// The regions the newest meta names (its list's checksum unchecked:
/// the engine checks it; here a damaged list is one the test damaged).
fn listed_regions(path: &Path) -> Vec<u64> {
    let data = std::fs::read(path).unwrap();
    let newest = newest_meta(&data);
    let list = &data[newest * PAGE + LIST_AT..];
    assert_eq!(
        u32_at(list, 0) as u64,
        REGION_PAGES,
        "the list's region size"
    );
    (0..u32_at(list, 4) as usize)
        .map(|i| u64_at(list, 8 + 8 * i))
        .collect()
}

fn regions_of(pages: &BTreeSet<u64>) -> BTreeSet<u64> {
    pages
        .iter()
        .map(|p| p / REGION_PAGES * REGION_PAGES)
        .collect()
}

/// A sorted load: `commits` commits of 1,000 keys in order (16-byte keys,
/// 100-byte values). Each branch is written for the last time when it
/// fills, at its own commit: without regions, beside that commit's leaves.
fn load_sorted(db: &Database, commits: u64) {
    for c in 0..commits {
        let mut tx = db.begin_write().unwrap();
        let t = tx.open_tree("t").unwrap();
        for i in c * 1000..(c + 1) * 1000 {
            let mut k = [0u8; 16];
            k[..8].copy_from_slice(&i.to_be_bytes());
            tx.put(&t, &k, &[i as u8; 100]).unwrap();
        }
        tx.commit().unwrap();
    }
}

/// `commits` commits of `puts` random keys (16-byte keys, 100-byte values).
fn load(db: &Database, rng: &mut Rng, commits: u64, puts: u64) {
    for _ in 0..commits {
        let mut tx = db.begin_write().unwrap();
        let t = tx.open_tree("t").unwrap();
        for _ in 0..puts {
            tx.put(&t, &rng.bytes(16), &rng.bytes(100)).unwrap();
        }
        tx.commit().unwrap();
    }
}

fn assert_clean(db: &Database) {
    let report = db.check().unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
}

#[test]
fn a_sorted_load_keeps_its_branches_in_few_regions() {
    for logged in [false, true] {
        let mut spread = Vec::new();
        for region in [REGION, 0] {
            let t = temp_db("regions.ib");
            {
                let db = Database::open_with(&t.path, &options(region, logged)).unwrap();
                load_sorted(&db, 60);
                assert_clean(&db);
            }
            let live = live_branches(&t.path);
            let regions = regions_of(&live);
            if region != 0 {
                // Branches written before the file held 32 regions lie
                // anywhere (`ZONE_MIN_REGIONS`): the first few, here.
                let regions: BTreeSet<u64> = regions
                    .iter()
                    .copied()
                    .filter(|&r| r >= 32 * REGION_PAGES)
                    .collect();
                let listed: BTreeSet<u64> = listed_regions(&t.path).into_iter().collect();
                assert!(
                    regions.is_subset(&listed),
                    "logged {logged}: branches in {regions:?}, regions {listed:?}"
                );
                let packed = (live.len() as u64).div_ceil(REGION_PAGES);
                // The regions also hold the copies that the newest durable
                // commit still reads (none synced here).
                assert!(
                    regions.len() as u64 <= packed + 2,
                    "logged {logged}: {} branches in {} regions",
                    live.len(),
                    regions.len()
                );
            }
            spread.push((live.len(), regions.len()));
        }
        // The same load without regions: its branches lie in many more.
        assert!(
            spread[1].1 >= 3 * spread[0].1,
            "logged {logged}: (branches, regions) with and without: {spread:?}"
        );
    }
}

#[test]
fn regions_outlive_a_reopen_and_a_damaged_list() {
    for logged in [false, true] {
        regions_outlive_a_reopen(logged);
    }
}

/// With logged commits, the put of each open reaches the file at its
/// close (a checkpoint), and the loads' small commits at checkpoints.
fn regions_outlive_a_reopen(logged: bool) {
    let t = temp_db("reopen.ib");
    let mut rng = Rng::new(11);
    {
        let db = Database::open_with(&t.path, &options(REGION, logged)).unwrap();
        load(&db, &mut rng, 300, 100);
    }
    let listed = listed_regions(&t.path);
    assert!(!listed.is_empty(), "logged {logged}: no region named");
    // A put per open: its path's branches go to the regions named, and no
    // region is added (without the list, each open would take one).
    for _ in 0..10 {
        let db = Database::open_with(&t.path, &options(REGION, logged)).unwrap();
        load(&db, &mut rng, 1, 1);
        assert_clean(&db);
    }
    assert_eq!(listed_regions(&t.path), listed, "no region added");
    let live = live_branches(&t.path);
    let listed_set: BTreeSet<u64> = listed.iter().copied().collect();
    assert!(regions_of(&live).is_subset(&listed_set));
    // Both lists damaged: the open ignores them (no error, nothing lost),
    // and its commits name the regions they place branches in.
    let count = {
        let db = Database::open_with(&t.path, &options(REGION, logged)).unwrap();
        db.check().unwrap().entries
    };
    let mut data = std::fs::read(&t.path).unwrap();
    for slot in 0..2 {
        data[slot * PAGE + LIST_AT + 8] ^= 0x55;
    }
    std::fs::write(&t.path, &data).unwrap();
    {
        let db = Database::open_with(&t.path, &options(REGION, logged)).unwrap();
        assert_eq!(db.check().unwrap().entries, count);
        load(&db, &mut rng, 50, 100);
        assert_clean(&db);
    }
    let relisted: BTreeSet<u64> = listed_regions(&t.path).into_iter().collect();
    assert!(!relisted.is_empty());
    let live = live_branches(&t.path);
    let outside = live
        .iter()
        .filter(|p| !relisted.contains(&(*p / REGION_PAGES * REGION_PAGES)))
        .count();
    // 5,000 random puts rewrite most branches.
    assert!(
        outside * 4 < live.len(),
        "{outside} of {} branches outside the regions named",
        live.len()
    );
}

type Model = std::collections::BTreeMap<Vec<u8>, Vec<u8>>;

/// `commits` commits of 100 random puts, each recorded in `model`.
fn put(db: &Database, rng: &mut Rng, model: &mut Model, commits: u64) {
    for _ in 0..commits {
        let mut tx = db.begin_write().unwrap();
        let tree = tx.open_tree("t").unwrap();
        for _ in 0..100 {
            let (k, v) = (rng.bytes(16), rng.bytes(100));
            tx.put(&tree, &k, &v).unwrap();
            model.insert(k, v);
        }
        tx.commit().unwrap();
    }
}

/// Asserts that tree "t" holds exactly `model`.
fn assert_holds(db: &Database, model: &Model, what: &str) {
    let rx = db.begin_read().unwrap();
    let tree = rx.tree("t").unwrap();
    let mut n = 0;
    for item in rx.iter(&tree).unwrap() {
        let (k, v) = item.unwrap();
        assert_eq!(model.get(k).map(Vec::as_slice), Some(v), "{what}");
        n += 1;
    }
    assert_eq!(n, model.len(), "{what}");
}

/// Writes, after both meta pages, a whole list (its checksum right) that
/// names `regions`.
fn write_list(path: &Path, regions: &[u64]) {
    let mut data = std::fs::read(path).unwrap();
    let mut list = Vec::new();
    list.extend_from_slice(&(REGION_PAGES as u32).to_le_bytes());
    list.extend_from_slice(&(regions.len() as u32).to_le_bytes());
    for r in regions {
        list.extend_from_slice(&r.to_le_bytes());
    }
    let sum = xxhash_rust::xxh3::xxh3_64(&list);
    list.extend_from_slice(&sum.to_le_bytes());
    for slot in 0..2 {
        data[slot * PAGE + LIST_AT..][..list.len()].copy_from_slice(&list);
    }
    std::fs::write(path, &data).unwrap();
}

/// A list is a hint no reader reads: one that names regions holding
/// leaves (written by another build, or stale) makes their free pages the
/// branches', and changes nothing else. Here it names every region of the
/// file: the records stay, `check()` stays clean, and later commits, which
/// free and rewrite those leaves, lose nothing.
#[test]
fn a_list_naming_regions_that_hold_leaves_loses_nothing() {
    for logged in [false, true] {
        let t = temp_db("stale.ib");
        let mut model = Model::new();
        let mut rng = Rng::new(23);
        {
            let db = Database::open_with(&t.path, &options(REGION, logged)).unwrap();
            put(&db, &mut rng, &mut model, 300);
        }
        let data = std::fs::read(&t.path).unwrap();
        let newest = newest_meta(&data);
        let page_count = u64_at(&data[newest * PAGE..], 24);
        let every: Vec<u64> = (0..page_count / REGION_PAGES)
            .map(|r| r * REGION_PAGES)
            .collect();
        let leaves_in_listed = (2..page_count)
            .filter(|&p| data[p as usize * PAGE + 16] == 2)
            .count();
        assert!(every.len() > 8 && leaves_in_listed > 100, "{every:?}");
        write_list(&t.path, &every);
        for round in 0..3 {
            let db = Database::open_with(&t.path, &options(REGION, logged)).unwrap();
            put(&db, &mut rng, &mut model, 40);
            assert_clean(&db);
            assert_holds(&db, &model, &format!("logged {logged}, round {round}"));
        }
        let listed: BTreeSet<u64> = listed_regions(&t.path).into_iter().collect();
        assert!(
            every.iter().all(|r| listed.contains(r)),
            "the regions named stay named"
        );
    }
}

/// Reopened with regions off, then with regions of another size, the
/// list the file names is of no use (off: ignored; another size: not
/// adopted): nothing is lost, `check()` stays clean, and the commits of
/// the new size name regions of that size.
#[test]
fn a_changed_region_size_loses_nothing() {
    for logged in [false, true] {
        let t = temp_db("resized.ib");
        let mut model = Model::new();
        let mut rng = Rng::new(31);
        for (round, region) in [REGION, 0, 2 * REGION, REGION].into_iter().enumerate() {
            {
                let db = Database::open_with(&t.path, &options(region, logged)).unwrap();
                put(&db, &mut rng, &mut model, 300);
                assert_clean(&db);
                assert_holds(&db, &model, &format!("logged {logged}, round {round}"));
            }
            let data = std::fs::read(&t.path).unwrap();
            let newest = newest_meta(&data);
            let list = &data[newest * PAGE + LIST_AT..];
            let (size, named) = (u32_at(list, 0) as usize, u32_at(list, 4));
            if region == 0 {
                assert_eq!(named, 0, "logged {logged}: regions named with regions off");
            } else {
                assert_eq!(size * PAGE, region, "logged {logged}, round {round}");
                assert!(named > 0, "logged {logged}, round {round}: no region named");
            }
        }
    }
}

#[test]
fn a_region_size_that_is_not_a_power_of_two_is_refused() {
    let t = temp_db("bad.ib");
    for bad in [3 * PAGE, PAGE / 2] {
        let err = Database::open_with(&t.path, &options(bad, false)).unwrap_err();
        assert!(matches!(err, ironbark::Error::InvalidOption(_)), "{err:?}");
    }
}
