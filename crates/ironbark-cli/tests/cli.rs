//! End-to-end tests of each subcommand, and of bad inputs.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Stdio};

use common::{
    assert_one_line_error, bytevalue_section, contents, entries, in_process, ironbark, make_db,
    spawn_guard,
};
use predicates::prelude::*;
use serde_json::Value;

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

#[test]
fn stat_text_and_json() {
    let dir = tmp();
    let db = dir.path().join("s.ib");
    make_db(&db, &[("main", entries(10)), ("users", entries(3000))]);

    ironbark()
        .args(["stat"])
        .arg(&db)
        .assert()
        .success()
        .stdout(predicate::str::contains("page size        4096"))
        .stdout(predicate::str::contains("trees            2"))
        .stdout(predicate::str::is_match(r"(?m)^users\s+2\s+3000\s+1\s+\d+\s+0$").unwrap());

    let out = ironbark()
        .args(["stat", "--json"])
        .arg(&db)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["page_size"], 4096);
    assert_eq!(v["live_readers"], 0);
    assert_eq!(v["oldest_snapshot"], Value::Null);
    assert!(v["last_txn_id"].as_u64().unwrap() >= 2);
    let trees = v["trees"].as_array().unwrap();
    assert_eq!(trees.len(), 2);
    assert_eq!(trees[1]["name"], "users");
    assert_eq!(trees[1]["entries"], 3000);
    assert_eq!(trees[1]["depth"], 2);
    assert_eq!(
        v["used_pages"].as_u64().unwrap() + v["free_pages"].as_u64().unwrap(),
        v["page_count"].as_u64().unwrap()
    );

    let out = ironbark()
        .args(["stat", "--tree", "main", "--json"])
        .arg(&db)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["name"], "main");
    assert_eq!(v["entries"], 10);

    let a = ironbark()
        .args(["stat", "--tree", "nope"])
        .arg(&db)
        .assert()
        .failure();
    assert_one_line_error(&a.get_output().stderr, "no tree named \"nope\"");
}

#[test]
fn dump_and_load_round_trip_in_both_formats() {
    let dir = tmp();
    let src = dir.path().join("src.ib");
    let binary: Vec<(Vec<u8>, Vec<u8>)> = vec![
        (b"\x00".to_vec(), b"".to_vec()),
        (b"back\\slash".to_vec(), b"\\\\x41".to_vec()),
        (b"caf\xc3\xa9".to_vec(), (0..=255u8).collect()),
        (b"zz".to_vec(), vec![7u8; 20_000]),
    ];
    make_db(
        &src,
        &[
            ("main", entries(50)),
            ("bin", binary),
            ("empty", vec![]),
            ("users", entries(2000)),
        ],
    );
    for print in [false, true] {
        let mut dump = ironbark();
        dump.args(["dump", "--all"]).arg(&src);
        if print {
            dump.arg("-p");
        }
        let text = dump.assert().success().get_output().stdout.clone();
        let s = String::from_utf8(text.clone()).unwrap();
        assert_eq!(s.matches("HEADER=END").count(), 4);
        // `main` comes first, without a database= line.
        assert!(s.starts_with(&format!(
            "VERSION=3\nformat={}\ntype=btree\n",
            if print { "print" } else { "bytevalue" }
        )));
        assert!(s.contains("database=bin\n") && s.contains("database=empty\n"));
        assert!(!s.contains("database=main"));

        let dst = dir.path().join(format!("dst-{print}.ib"));
        ironbark()
            .arg("load")
            .arg(&dst)
            .write_stdin(text.clone())
            .assert()
            .success()
            .stdout(predicate::str::contains("loaded 2054 entries into 4 trees"))
            // No progress bar when stderr is not a terminal.
            .stderr("");
        assert_eq!(contents(&src), contents(&dst));
        // Dumping the copy gives the same text.
        let mut again = ironbark();
        again.args(["dump", "--all"]).arg(&dst);
        if print {
            again.arg("-p");
        }
        again.assert().success().stdout(text).stderr("");
    }
}

#[test]
fn dump_one_tree_default_main_and_to_file() {
    let dir = tmp();
    let db = dir.path().join("d.ib");
    make_db(&db, &[("main", entries(2)), ("users", entries(3))]);

    // The default tree is `main`, written without database=.
    ironbark()
        .arg("dump")
        .arg(&db)
        .assert()
        .success()
        .stdout(bytevalue_section(None, &entries(2)));
    ironbark()
        .args(["dump", "--tree", "users"])
        .arg(&db)
        .assert()
        .success()
        .stdout(bytevalue_section(Some("users"), &entries(3)));
    let f = dir.path().join("out.txt");
    ironbark()
        .args(["dump", "-s", "users", "-p", "-f"])
        .arg(&f)
        .arg(&db)
        .assert()
        .success()
        .stdout("");
    let text = std::fs::read_to_string(&f).unwrap();
    assert!(text.contains("format=print\ndatabase=users\n"));
    assert!(text.contains("\n key00002\n value 2 xx\nDATA=END\n"));

    // No `main`: the error says what there is.
    let other = dir.path().join("o.ib");
    make_db(&other, &[("a", entries(1))]);
    let a = ironbark().arg("dump").arg(&other).assert().failure();
    assert_one_line_error(&a.get_output().stderr, "no tree named \"main\"");
    assert_one_line_error(&a.get_output().stderr, "--all");

    ironbark()
        .args(["dump", "--all", "--tree", "x"])
        .arg(&db)
        .assert()
        .code(2);

    // --all leaves out an empty `main`.
    let empty_main = dir.path().join("e.ib");
    make_db(&empty_main, &[("main", vec![]), ("x", entries(1))]);
    ironbark()
        .args(["dump", "--all"])
        .arg(&empty_main)
        .assert()
        .success()
        .stdout(bytevalue_section(Some("x"), &entries(1)));

    // Never over the database itself.
    let a = ironbark()
        .arg("dump")
        .arg(&db)
        .arg("-f")
        .arg(&db)
        .assert()
        .code(1);
    assert_one_line_error(&a.get_output().stderr, "over itself");
    assert_eq!(contents(&db).len(), 2);
}

#[test]
fn load_options_tree_append_and_merge() {
    let dir = tmp();
    let db = dir.path().join("l.ib");
    let input = dir.path().join("in.txt");
    std::fs::write(
        &input,
        bytevalue_section(Some("x"), &entries(3)) + &bytevalue_section(None, &entries(2)),
    )
    .unwrap();

    // --tree puts every section in one tree.
    ironbark()
        .arg("load")
        .arg(&db)
        .args(["--tree", "people", "-f"])
        .arg(&input)
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "loaded 5 entries into 1 tree (people)",
        ));
    let c = contents(&db);
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].0, "people");
    assert_eq!(c[0].1, entries(3));

    // Without --append, entries merge: same keys are overwritten.
    let changed = vec![(b"key00001".to_vec(), b"new".to_vec())];
    ironbark()
        .arg("load")
        .arg(&db)
        .write_stdin(bytevalue_section(Some("people"), &changed))
        .assert()
        .success();
    let c = contents(&db);
    assert_eq!(c[0].1.len(), 3);
    assert_eq!(c[0].1[1].1, b"new");

    // --append: keys after the existing ones, ascending.
    let later: Vec<_> = entries(6)[3..].to_vec();
    ironbark()
        .args(["load", "--append"])
        .arg(&db)
        .write_stdin(bytevalue_section(Some("people"), &later))
        .assert()
        .success();
    assert_eq!(contents(&db)[0].1.len(), 6);
    let before = contents(&db);
    for bad in [
        entries(7)[5..].to_vec(),
        vec![entries(9)[8].clone(), entries(9)[7].clone()],
    ] {
        let a = ironbark()
            .args(["load", "-a"])
            .arg(&db)
            .write_stdin(bytevalue_section(Some("people"), &bad))
            .assert()
            .code(1);
        assert_one_line_error(&a.get_output().stderr, "out of order");
        assert_eq!(contents(&db), before);
    }

    // Header keywords: ignored ones pass silently, odd ones warn.
    let text = bytevalue_section(Some("ints"), &entries(1)).replace(
        "type=btree\n",
        "type=btree\nintegerkey=1\nfancy=yes\nmapaddr=0x0\n",
    );
    ironbark()
        .arg("load")
        .arg(&db)
        .write_stdin(text)
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "line 5: integerkey=1: ironbark orders keys bytewise",
        ))
        .stderr(predicate::str::contains(
            "line 6: unrecognized header keyword ignored: fancy",
        ))
        .stderr(predicate::str::contains("mapaddr").not());

    // Empty input: nothing to do, not an error.
    ironbark()
        .arg("load")
        .arg(&db)
        .write_stdin("")
        .assert()
        .success()
        .stdout(predicate::str::contains("loaded nothing"));
}

#[test]
fn malformed_dump_names_the_line_and_loads_nothing() {
    let dir = tmp();
    let good = bytevalue_section(Some("a"), &entries(3));
    let cases = [
        // (text, line, message)
        (
            format!("{good}VERSION=3\nformat=bytevalue\nHEADER=END\n 6b\n 7g\nDATA=END\n"),
            20,
            "invalid hex digit 'g'",
        ),
        (
            format!("{good}VERSION=3\nHEADER=END\n 6b\n"),
            19,
            "no value",
        ),
        (
            format!("{good}VERSION=3\nHEADER=END\n 6b\n 6b\n"),
            20,
            "no DATA=END",
        ),
        (
            format!("{good}garbage here\n"),
            16,
            "expected a header line",
        ),
        (
            "VERSION=3\nformat=print\nHEADER=END\n a\\q\n b\nDATA=END\n".to_string(),
            4,
            "invalid escape",
        ),
        (
            "VERSION=3\ndupsort=1\nHEADER=END\nDATA=END\n".to_string(),
            2,
            "duplicate keys",
        ),
    ];
    // Into a new file: no file is left behind.
    for (text, line, msg) in &cases {
        let db = dir.path().join("new.ib");
        let a = ironbark()
            .arg("load")
            .arg(&db)
            .write_stdin(text.clone())
            .assert()
            .code(1);
        let err = &a.get_output().stderr;
        assert_one_line_error(err, &format!("stdin: line {line}: "));
        assert_one_line_error(err, msg);
        assert_one_line_error(err, "nothing was loaded");
        assert!(!db.exists());
    }
    // Into an existing database: it is unchanged.
    let db = dir.path().join("old.ib");
    make_db(&db, &[("a", entries(1)), ("b", entries(2))]);
    let before = contents(&db);
    let f = dir.path().join("bad.txt");
    for (text, line, _) in &cases {
        std::fs::write(&f, text).unwrap();
        let a = ironbark()
            .arg("load")
            .arg(&db)
            .arg("-f")
            .arg(&f)
            .assert()
            .code(1);
        assert_one_line_error(
            &a.get_output().stderr,
            &format!("{}: line {line}: ", f.display()),
        );
        assert_eq!(contents(&db), before);
    }
    // A key too long for the engine names its line too.
    let long = vec![(vec![b'k'; 5000], b"v".to_vec())];
    let a = ironbark()
        .arg("load")
        .arg(&db)
        .write_stdin(good + &bytevalue_section(Some("b"), &long))
        .assert()
        .code(1);
    assert_one_line_error(&a.get_output().stderr, "line 24: ");
    assert_one_line_error(&a.get_output().stderr, "larger than the limit");
    assert_eq!(contents(&db), before);
}

#[test]
fn copy_plain_and_compact() {
    let dir = tmp();
    let src = dir.path().join("src.ib");
    make_db(&src, &[("a", entries(20_000)), ("b", entries(10))]);
    in_process(|| {
        // Delete most of `a`, leaving free pages behind.
        let db = ironbark::Database::open(&src).unwrap();
        let mut tx = db.begin_write().unwrap();
        let a = tx.tree("a").unwrap();
        for (i, (k, _)) in entries(20_000).iter().enumerate() {
            if i % 10 != 0 {
                tx.delete(&a, k).unwrap();
            }
        }
        tx.commit().unwrap();
    });
    let plain = dir.path().join("plain.ib");
    let compact = dir.path().join("compact.ib");
    ironbark()
        .arg("copy")
        .arg(&src)
        .arg(&plain)
        .assert()
        .success()
        .stdout(predicate::str::contains("copied"));
    ironbark()
        .args(["copy", "--compact"])
        .arg(&src)
        .arg(&compact)
        .assert()
        .success()
        .stdout(predicate::str::contains("compacted: 2 trees, 2010 entries"))
        .stderr("");
    assert_eq!(contents(&src), contents(&plain));
    assert_eq!(contents(&src), contents(&compact));
    for p in [&plain, &compact] {
        ironbark().arg("check").arg(p).assert().success();
    }
    let pages = |p: &std::path::Path| {
        let out = ironbark()
            .args(["stat", "--json"])
            .arg(p)
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        let v: Value = serde_json::from_slice(&out).unwrap();
        (
            v["page_count"].as_u64().unwrap(),
            v["used_pages"].as_u64().unwrap(),
        )
    };
    let (src_pages, src_used) = pages(&src);
    let (compact_pages, compact_used) = pages(&compact);
    assert!(
        compact_pages * 2 < src_pages,
        "compact {compact_pages} pages, source {src_pages}"
    );
    assert!(compact_used < src_used, "{compact_used} vs {src_used}");
    // No temporary file is left behind.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 3);

    // Never overwrites.
    for compact in [false, true] {
        let mut c = ironbark();
        c.arg("copy");
        if compact {
            c.arg("-c");
        }
        let a = c.arg(&src).arg(&plain).assert().code(1);
        assert_one_line_error(&a.get_output().stderr, "already exists");
    }
}

#[test]
fn check_clean_and_corrupted() {
    let dir = tmp();
    let db = dir.path().join("c.ib");
    make_db(&db, &[("a", entries(5000))]);
    ironbark()
        .arg("check")
        .arg(&db)
        .assert()
        .success()
        .stdout(predicate::str::is_match(r"ok: \d+ pages .* 1 tree, 5000 entries\n$").unwrap());
    let out = ironbark()
        .args(["check", "--json"])
        .arg(&db)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["ok"], true);
    assert_eq!(v["entries"], 5000);

    // Damage a page in the middle of the tree.
    let (page_size, pages) = in_process(|| {
        let d = ironbark::Database::open(&db).unwrap();
        let s = d.stats().unwrap();
        (s.page_size as u64, s.page_count)
    });
    let mut bytes = std::fs::read(&db).unwrap();
    let at = (pages / 2 * page_size + page_size / 2) as usize;
    for b in &mut bytes[at..at + 16] {
        *b ^= 0x5a;
    }
    std::fs::write(&db, &bytes).unwrap();
    let a = ironbark().arg("check").arg(&db).assert().code(1);
    let out = String::from_utf8_lossy(&a.get_output().stdout).to_string();
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(out.contains("page "), "{out}");
    assert_one_line_error(&a.get_output().stderr, "integrity check found a problem");
    let a = ironbark()
        .args(["check", "--json"])
        .arg(&db)
        .assert()
        .code(1);
    let v: Value = serde_json::from_slice(&a.get_output().stdout).unwrap();
    assert_eq!(v["ok"], false);
    assert_eq!(v["problems"].as_array().unwrap().len(), 1);
}

#[test]
fn readers_and_clear_stale() {
    let dir = tmp();
    let db = dir.path().join("r.ib");
    make_db(&db, &[("a", entries(3))]);
    ironbark()
        .arg("readers")
        .arg(&db)
        .assert()
        .success()
        .stdout(predicate::str::contains("live readers     0 of 126 slots"))
        .stdout(predicate::str::contains("oldest snapshot  none"))
        .stdout(predicate::str::contains("later issue"));
    ironbark()
        .args(["readers", "--clear-stale"])
        .arg(&db)
        .assert()
        .success()
        .stdout(predicate::str::contains("nothing to clear"));
    let out = ironbark()
        .args(["readers", "--json"])
        .arg(&db)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["live_readers"], 0);
    assert_eq!(v["max_readers"], 126);
    ironbark()
        .args(["readers", "--help"])
        .assert()
        .success()
        .stdout(predicate::str::contains("later issue"));
}

#[test]
fn missing_and_foreign_files() {
    let dir = tmp();
    let missing = dir.path().join("missing.ib");
    let junk = dir.path().join("junk.txt");
    std::fs::write(&junk, "hello, I am not a database\n".repeat(500)).unwrap();
    let copy_dst = dir.path().join("copy.ib");
    let runs: Vec<Vec<&str>> = vec![
        vec!["stat"],
        vec!["dump"],
        vec!["dump", "--all"],
        vec!["copy"],
        vec!["copy", "--compact"],
        vec!["readers"],
        vec!["check"],
    ];
    for args in &runs {
        for (file, needle) in [
            (&missing, "no such file"),
            (&junk, "not an ironbark database file"),
        ] {
            let mut c = ironbark();
            c.args(args).arg(file);
            if args[0] == "copy" {
                c.arg(&copy_dst);
            }
            let a = c.assert().failure();
            let code = a.get_output().status.code();
            assert_eq!(
                code,
                Some(if args[0] == "check" { 2 } else { 1 }),
                "{args:?}"
            );
            assert_one_line_error(&a.get_output().stderr, needle);
            assert!(!copy_dst.exists());
        }
    }
    assert!(!missing.exists(), "a read command created the file");
    // load: of a missing input file, and into a foreign file.
    let a = ironbark()
        .arg("load")
        .arg(dir.path().join("new.ib"))
        .arg("-f")
        .arg(&missing)
        .assert()
        .code(1);
    assert_one_line_error(&a.get_output().stderr, "no such file");
    assert!(!dir.path().join("new.ib").exists());
    let a = ironbark()
        .arg("load")
        .arg(&junk)
        .write_stdin("")
        .assert()
        .code(1);
    assert_one_line_error(&a.get_output().stderr, "not an ironbark database file");
    // A directory (an LMDB environment, say).
    let a = ironbark().arg("stat").arg(dir.path()).assert().code(1);
    assert_one_line_error(&a.get_output().stderr, "is a directory");
}

#[test]
fn usage_errors_are_one_line_and_help_has_examples() {
    let a = ironbark().arg("stat").assert().code(2);
    assert_one_line_error(&a.get_output().stderr, "required");
    let a = ironbark()
        .args(["dump", "x.ib", "--bogus"])
        .assert()
        .code(2);
    assert_one_line_error(&a.get_output().stderr, "--bogus");
    for sub in ["stat", "dump", "load", "copy", "check", "readers"] {
        ironbark()
            .args([sub, "--help"])
            .assert()
            .success()
            .stdout(predicate::str::contains("Examples:"))
            .stdout(predicate::str::contains(format!("ironbark {sub}")));
    }
    ironbark()
        .arg("--version")
        .assert()
        .success()
        .stdout(predicate::str::starts_with("ironbark "));
}

#[test]
fn dump_into_a_closed_pipe_exits_quietly() {
    let dir = tmp();
    let db = dir.path().join("p.ib");
    make_db(&db, &[("main", entries(20_000))]);
    let _g = spawn_guard();
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("ironbark"))
        .arg("dump")
        .arg(&db)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 10];
    stdout.read_exact(&mut first).unwrap();
    assert_eq!(&first, b"VERSION=3\n");
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(141));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

/// When run with `IRONBARK_CLI_TEST_HOLD=PATH`, this test is the other
/// process of `locked_by_another_process`: it opens the database, keeps a
/// write transaction open, says READY, and waits until its stdin closes.
/// Otherwise it does nothing.
#[test]
fn hold_database_if_asked() {
    let Ok(path) = std::env::var("IRONBARK_CLI_TEST_HOLD") else {
        return;
    };
    let db = ironbark::Database::open(&path).unwrap();
    let mut tx = db.begin_write().unwrap();
    let t = tx.open_tree("a").unwrap();
    tx.put(&t, b"uncommitted", b"!").unwrap();
    println!("HOLDER-READY");
    std::io::stdout().flush().unwrap();
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
    drop(tx);
}

struct Holder(Child);

impl Drop for Holder {
    fn drop(&mut self) {
        drop(self.0.stdin.take());
        if self.0.wait().is_err() {
            let _ = self.0.kill();
        }
    }
}

#[test]
fn locked_by_another_process() {
    let dir = tmp();
    let db = dir.path().join("locked.ib");
    make_db(&db, &[("a", entries(3))]);
    let guard = spawn_guard();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "hold_database_if_asked",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("IRONBARK_CLI_TEST_HOLD", &db)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let holder = Holder(child);
    drop(guard);
    loop {
        match lines.next() {
            Some(Ok(l)) if l.contains("HOLDER-READY") => break,
            Some(Ok(_)) => continue,
            other => panic!("the holder process did not get ready: {other:?}"),
        }
    }
    let copy_dst = dir.path().join("copy.ib");
    for args in [
        vec!["stat"],
        vec!["dump", "--all"],
        vec!["check"],
        vec!["readers"],
        vec!["load"],
        vec!["copy"],
    ] {
        let mut c = ironbark();
        c.args(&args).arg(&db);
        if args[0] == "copy" {
            c.arg(&copy_dst);
        }
        let a = c.write_stdin("").assert().failure();
        assert_one_line_error(&a.get_output().stderr, "locked");
        assert_one_line_error(&a.get_output().stderr, "another process");
    }
    assert!(!copy_dst.exists());
    drop(holder);
    // Once the other process is gone, the database opens, unchanged.
    ironbark()
        .args(["stat", "--tree", "a"])
        .arg(&db)
        .assert()
        .success()
        .stdout(predicate::str::contains("entries         3"));
}
