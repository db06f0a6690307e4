//! Damage is never laundered, and migration pipelines fail loudly:
//!
//! - `dump`, `copy` and `copy --compact` of a database with a damaged leaf
//!   fail, naming the page, and write nothing (no output file, no partial
//!   dump, no copy that would pass `check` with the damage in it);
//! - a dump that cannot be written whole writes nothing, so `ironbark dump
//!   --all A | ironbark load B` fails in load too and creates nothing;
//! - `load` refuses empty and truncated input and creates nothing.
//!
//! The LMDB side of these (`mdb_dump`, `mdb_load`) is in lmdb_roundtrip.rs.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};

use common::{
    assert_one_line_error, bytevalue_section, contents, entries, ironbark, make_db, spawn_guard,
};

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

const PAGE: usize = 4096;

/// The files in `dir`.
fn files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Damages the leaf holding entry 1000 of `entries(..)` in place: its key
/// becomes `key91000` (out of order) and its value `value 1X00 ...`. The
/// page stays structurally valid; only its checksum tells. Returns the page.
fn damage_leaf(db: &Path) -> u64 {
    let mut bytes = std::fs::read(db).unwrap();
    let (k, v) = entries(1001).pop().unwrap();
    let cell = [k.as_slice(), v.as_slice()].concat();
    let at = bytes
        .windows(cell.len())
        .position(|w| w == cell.as_slice())
        .expect("the entry's cell is in the file");
    bytes[at + 3] = b'9';
    bytes[at + k.len() + 7] = b'X';
    std::fs::write(db, &bytes).unwrap();
    (at / PAGE) as u64
}

#[test]
fn damaged_leaf_fails_dump_and_nothing_is_written() {
    let dir = tmp();
    let db = dir.path().join("d.ib");
    make_db(&db, &[("main", entries(3000)), ("other", entries(10))]);
    let page = damage_leaf(&db);
    let damaged = format!("page {page}: page checksum mismatch");

    // dump, to stdout: nothing written, one line naming the page.
    for args in [&["dump"][..], &["dump", "--all"], &["dump", "-p", "--lmdb"]] {
        let a = ironbark().args(args).arg(&db).assert().code(1);
        assert_eq!(a.get_output().stdout, b"", "{args:?}");
        assert_one_line_error(&a.get_output().stderr, &damaged);
        assert_one_line_error(&a.get_output().stderr, "nothing was written");
    }
    // A tree without damage still dumps.
    ironbark()
        .args(["dump", "--tree", "other"])
        .arg(&db)
        .assert()
        .success()
        .stdout(bytevalue_section(Some("other"), &entries(10)));

    // dump -f: no file, and an earlier file of that name is left as it was.
    let out = dir.path().join("out.txt");
    let a = ironbark()
        .args(["dump", "--all", "-f"])
        .arg(&out)
        .arg(&db)
        .assert()
        .code(1);
    assert_one_line_error(&a.get_output().stderr, &damaged);
    assert!(!out.exists());
    std::fs::write(&out, "an earlier dump\n").unwrap();
    ironbark()
        .args(["dump", "-f"])
        .arg(&out)
        .arg(&db)
        .assert()
        .code(1);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "an earlier dump\n");
    std::fs::remove_file(&out).unwrap();

    // The damage is still there for check to report.
    let a = ironbark().arg("check").arg(&db).assert().code(1);
    assert!(String::from_utf8_lossy(&a.get_output().stdout).contains(&damaged));
}

#[test]
fn damaged_leaf_fails_copy_and_compacting_copy_and_no_file_is_left() {
    let dir = tmp();
    let db = dir.path().join("d.ib");
    make_db(&db, &[("main", entries(3000)), ("other", entries(10))]);
    let page = damage_leaf(&db);
    let damaged = format!("page {page}: page checksum mismatch");

    // copy and copy --compact: no file (nor a temporary one) is left. (A
    // compacting copy that read without verifying would write the damaged
    // key and value under fresh checksums: a file that passes check.)
    for compact in [false, true] {
        let dst = dir.path().join("copy.ib");
        let mut c = ironbark();
        c.arg("copy");
        if compact {
            c.arg("--compact");
        }
        let a = c.arg(&db).arg(&dst).assert().code(1);
        assert_eq!(a.get_output().stdout, b"");
        assert_one_line_error(&a.get_output().stderr, &damaged);
        assert_one_line_error(&a.get_output().stderr, "nothing was copied");
        assert_eq!(
            files(dir.path()),
            ["d.ib", "d.ib-lock", "d.ib-log"],
            "compact {compact}"
        );
    }

    // The damage is still there for check to report.
    let a = ironbark().arg("check").arg(&db).assert().code(1);
    assert!(String::from_utf8_lossy(&a.get_output().stdout).contains(&damaged));
}

/// Runs `ironbark dump ARGS A | ironbark load B`, as a shell pipeline
/// does, and returns both exit codes and load's stderr.
fn pipeline(dump_args: &[&str], a: &Path, b: &Path) -> (Option<i32>, Option<i32>, String) {
    let bin = assert_cmd::cargo::cargo_bin("ironbark");
    let _g = spawn_guard();
    let mut dump = Command::new(&bin)
        .arg("dump")
        .args(dump_args)
        .arg(a)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let load = Command::new(&bin)
        .arg("load")
        .arg(b)
        .stdin(dump.stdout.take().unwrap())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let load = load.wait_with_output().unwrap();
    let dump = dump.wait().unwrap();
    (
        dump.code(),
        load.status.code(),
        String::from_utf8_lossy(&load.stderr).into_owned(),
    )
}

#[test]
fn a_dump_that_cannot_finish_writes_nothing_and_the_pipeline_loads_nothing() {
    let dir = tmp();
    let a = dir.path().join("a.ib");
    // Nine trees; the fifth in name order has a newline in its name, which
    // the dump format cannot carry.
    let names = ["a", "b", "c", "d", "e\nf", "g", "h", "i", "j"];
    let trees: Vec<(&str, common::Entries)> = names.iter().map(|n| (*n, entries(20))).collect();
    make_db(&a, &trees);

    let out = ironbark().args(["dump", "--all"]).arg(&a).assert().code(1);
    assert_eq!(
        out.get_output().stdout,
        b"",
        "nothing is written before the dump is known to finish"
    );
    assert_one_line_error(&out.get_output().stderr, "\"e\\nf\": a name with a newline");

    let b = dir.path().join("b.ib");
    let (dump_code, load_code, load_err) = pipeline(&["--all"], &a, &b);
    assert_eq!(dump_code, Some(1));
    assert_eq!(load_code, Some(1), "load must fail: {load_err}");
    assert_one_line_error(load_err.as_bytes(), "no dump sections");
    assert!(!b.exists(), "a failed load created the database");
    assert!(!dir.path().join("b.ib-lock").exists());

    // The same pipeline without the bad tree works.
    let good = dir.path().join("good.ib");
    make_db(&good, &trees[..4]);
    let (dump_code, load_code, load_err) = pipeline(&["--all"], &good, &b);
    assert_eq!((dump_code, load_code), (Some(0), Some(0)), "{load_err}");
    assert_eq!(contents(&b), contents(&good));
}

#[test]
fn load_refuses_empty_and_truncated_input_and_creates_nothing() {
    let dir = tmp();
    let db = dir.path().join("new.ib");
    let two =
        bytevalue_section(Some("a"), &entries(3)) + &bytevalue_section(Some("b"), &entries(3));
    let cases: Vec<(String, &str)> = vec![
        (String::new(), "no dump sections"),
        ("\n\n  \n".to_string(), "no dump sections"),
        (
            two.strip_suffix("DATA=END\n").unwrap().to_string(),
            "no DATA=END",
        ),
        (two[..two.len() - 20].to_string(), "no DATA=END"),
        (
            two[..two.find("HEADER=END").unwrap()].to_string(),
            "no HEADER=END",
        ),
    ];
    for (text, msg) in &cases {
        let a = ironbark()
            .arg("load")
            .arg(&db)
            .write_stdin(text.clone())
            .assert()
            .code(1);
        assert_one_line_error(&a.get_output().stderr, msg);
        assert_one_line_error(&a.get_output().stderr, "nothing was loaded");
        assert_eq!(files(dir.path()), Vec::<String>::new(), "{text:?}");
    }
    // The empty-input error says how to dump an LMDB main database.
    let a = ironbark()
        .arg("load")
        .arg(&db)
        .write_stdin("")
        .assert()
        .code(1);
    assert_one_line_error(&a.get_output().stderr, "`mdb_dump ENV`, without -a");

    // Into an existing database: unchanged.
    make_db(&db, &[("a", entries(1))]);
    let before = contents(&db);
    for (text, msg) in &cases {
        let a = ironbark()
            .arg("load")
            .arg(&db)
            .write_stdin(text.clone())
            .assert()
            .code(1);
        assert_one_line_error(&a.get_output().stderr, msg);
        assert_eq!(contents(&db), before);
    }
}
