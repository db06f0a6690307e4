//! `Database::check_report`: the full check lists every problem it finds
//! (a damaged page is reported and its subtree skipped, the rest is still
//! checked), while `Database::check` fails with the first one.

mod common;

use std::path::Path;

use common::{temp_db, Rng};
use ironbark::{Database, Error};

const PS: usize = 4096;

/// Two trees, `a` and `b`, each over many leaves; values carry the tree's
/// marker so that their leaves can be found in the file.
fn build(path: &Path) {
    let db = Database::open(path).unwrap();
    let mut tx = db.begin_write().unwrap();
    for name in ["a", "b"] {
        let t = tx.open_tree(name).unwrap();
        for i in 0..3000u32 {
            let v = format!("{name}-marker-value-{i:06}");
            tx.put(&t, format!("key{i:06}").as_bytes(), v.as_bytes())
                .unwrap();
        }
    }
    tx.commit().unwrap();
}

/// The page holding `needle`, searching from the start of the file.
fn page_of(image: &[u8], needle: &[u8]) -> usize {
    image
        .windows(needle.len())
        .position(|w| w == needle)
        .unwrap()
        / PS
}

fn flip(image: &mut [u8], page: usize) {
    for b in &mut image[page * PS + PS / 2..page * PS + PS / 2 + 8] {
        *b ^= 0x5a;
    }
}

fn pages_of(report: &ironbark::CheckReport) -> Vec<u64> {
    report.problems.iter().filter_map(|(p, _)| *p).collect()
}

#[test]
fn clean_database_has_no_problems() {
    let t = temp_db("clean.ib");
    build(&t.path);
    let db = Database::open(&t.path).unwrap();
    let report = db.check_report().unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    assert_eq!(report.trees, 2);
    assert_eq!(report.entries, 6000);
    assert_eq!(db.check().unwrap(), report);
}

#[test]
fn every_damaged_leaf_is_listed_and_the_rest_still_checked() {
    let t = temp_db("two.ib");
    build(&t.path);
    let mut image = std::fs::read(&t.path).unwrap();
    let a_leaf = page_of(&image, b"a-marker-value-001000");
    let b_leaf = page_of(&image, b"b-marker-value-002000");
    let a_other = page_of(&image, b"a-marker-value-002500");
    assert!(a_leaf != b_leaf && a_leaf != a_other && b_leaf != a_other);
    for p in [a_leaf, b_leaf, a_other] {
        flip(&mut image, p);
    }
    std::fs::write(&t.path, &image).unwrap();

    let db = Database::open(&t.path).unwrap();
    let report = db.check_report().unwrap();
    assert!(!report.is_clean());
    let pages = pages_of(&report);
    for p in [a_leaf, b_leaf, a_other] {
        assert!(
            pages.contains(&(p as u64)),
            "page {p} missing from {:?}",
            report.problems
        );
    }
    // One line per damaged page: no echo of the skipped subtrees as
    // leaked pages or wrong counters.
    assert_eq!(report.problems.len(), 3, "{:?}", report.problems);
    for (_, detail) in &report.problems {
        assert!(detail.contains("checksum"), "{detail}");
        assert!(!detail.contains('\n'), "{detail:?}");
    }

    // `check` fails with the first problem and says there are more.
    match db.check() {
        Err(Error::Corrupted {
            page: Some(p),
            detail,
        }) => {
            assert_eq!(Some(p), pages.first().copied());
            assert!(detail.contains("(and 2 more problems)"), "{detail}");
        }
        other => panic!("check gave {other:?}"),
    }
}

#[test]
fn a_damaged_branch_skips_its_subtree_but_not_the_other_tree() {
    let t = temp_db("branch.ib");
    build(&t.path);
    let db = Database::open(&t.path).unwrap();
    let stats = db.stats().unwrap();
    let depth = stats.trees.iter().map(|t| t.depth).min().unwrap();
    assert!(depth >= 2, "the trees must have branch pages");
    drop(db);
    // The root of tree `a`: a page that no marker value lives in but whose
    // damage makes every leaf of `a` unreachable. Find it as the page whose
    // damage gives a problem at that very page, other than the leaves.
    let image = std::fs::read(&t.path).unwrap();
    let b_leaf = page_of(&image, b"b-marker-value-000100");
    let mut found = false;
    for p in 2..stats.page_count as usize {
        if image[p * PS..(p + 1) * PS]
            .windows(9)
            .any(|w| w == b"-marker-v")
        {
            continue; // a leaf
        }
        let mut bad = image.clone();
        flip(&mut bad, p);
        flip(&mut bad, b_leaf);
        std::fs::write(&t.path, &bad).unwrap();
        let Ok(db) = Database::open(&t.path) else {
            continue;
        };
        let report = db.check_report().unwrap();
        let pages = pages_of(&report);
        if pages.contains(&(p as u64)) && report.problems.iter().all(|(_, d)| !d.contains("state"))
        {
            // A branch (or a free page) of either tree: the leaf of `b` is
            // still reported, unless it sits under that very branch.
            assert!(
                pages.contains(&(b_leaf as u64)) || report.problems.len() == 1,
                "{:?}",
                report.problems
            );
            found = true;
        }
        assert_eq!(db.check().is_err(), !report.is_clean());
    }
    assert!(found, "no branch page was found");
}

/// Random damage anywhere: `check_report` never panics, and agrees with
/// `check` on whether the file is damaged and on the first problem.
#[test]
fn random_damage_reports_agree_with_check() {
    let t = temp_db("fuzz.ib");
    build(&t.path);
    let clean = std::fs::read(&t.path).unwrap();
    let mut rng = Rng::new(6);
    for _ in 0..60 {
        let mut bad = clean.clone();
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(bad.len() as u64) as usize;
            bad[at] ^= 1 << rng.below(8);
        }
        std::fs::write(&t.path, &bad).unwrap();
        let Ok(db) = Database::open(&t.path) else {
            continue;
        };
        let report = match db.check_report() {
            Ok(r) => r,
            Err(e) => panic!("check_report could not run: {e}"),
        };
        assert!(report.problems.len() <= 1001);
        match db.check() {
            Ok(r) => assert!(report.is_clean() && r == report),
            Err(Error::Corrupted { page, detail }) => {
                let (first_page, first) = &report.problems[0];
                assert_eq!(page, *first_page);
                assert!(detail.starts_with(first.as_str()), "{detail} / {first}");
            }
            Err(e) => panic!("check gave {e}"),
        }
    }
}

/// More damaged pages than a report lists: 1000 problems, then one line
/// counting the rest.
#[test]
fn problems_are_capped() {
    let t = temp_db("many.ib");
    let db = Database::open(&t.path).unwrap();
    let mut tx = db.begin_write().unwrap();
    let tree = tx.open_tree("t").unwrap();
    for i in 0..60_000u32 {
        let v = format!("cap-marker-{i:08}-{}", "v".repeat(40));
        tx.put(&tree, format!("key{i:08}").as_bytes(), v.as_bytes())
            .unwrap();
    }
    tx.commit().unwrap();
    drop(db);
    let mut image = std::fs::read(&t.path).unwrap();
    let leaves: Vec<usize> = (0..image.len() / PS)
        .filter(|&p| {
            image[p * PS..(p + 1) * PS]
                .windows(11)
                .any(|w| w == b"cap-marker-")
        })
        .collect();
    assert!(leaves.len() > 1010, "only {} leaves", leaves.len());
    for &p in &leaves {
        flip(&mut image, p);
    }
    std::fs::write(&t.path, &image).unwrap();
    let db = Database::open(&t.path).unwrap();
    let report = db.check_report().unwrap();
    assert_eq!(report.problems.len(), 1001);
    let (page, last) = &report.problems[1000];
    assert_eq!(*page, None);
    assert_eq!(
        *last,
        format!(
            "{} more problems not listed (a check lists at most 1000)",
            leaves.len() - 1000
        )
    );
    let pages = pages_of(&report);
    assert_eq!(pages.len(), 1000);
    assert!(pages.iter().all(|p| leaves.contains(&(*p as usize))));
}
