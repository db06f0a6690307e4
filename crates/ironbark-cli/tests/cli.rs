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
        "type=btree\nreversekey=1\nfancy=yes\nmapaddr=0x0\n",
    );
    ironbark()
        .arg("load")
        .arg(&db)
        .write_stdin(text)
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "line 5: reversekey=1: ironbark orders keys bytewise",
        ))
        .stderr(predicate::str::contains(
            "line 6: unrecognized header keyword ignored: fancy",
        ))
        .stderr(predicate::str::contains("mapaddr").not());

    // Empty input is an error (what a failed dump upstream sends), and the
    // database is unchanged (see trust.rs for new files).
    let before = contents(&db);
    let a = ironbark()
        .arg("load")
        .arg(&db)
        .write_stdin("")
        .assert()
        .code(1);
    assert_one_line_error(&a.get_output().stderr, "no dump sections");
    assert_eq!(contents(&db), before);
}

#[test]
fn load_append_into_a_new_database_fills_pages_or_leaves_nothing() {
    let dir = tmp();
    // Out of order on line 3 of the data (a key equal to the one before):
    // an error naming the line, and no file left behind.
    let mut bad = entries(5);
    bad[3] = bad[2].clone();
    let db = dir.path().join("new.ib");
    let a = ironbark()
        .args(["load", "--append"])
        .arg(&db)
        .write_stdin(bytevalue_section(Some("t"), &bad))
        .assert()
        .code(1);
    let err = &a.get_output().stderr;
    // The header is 8 lines, then two lines per entry: the fourth entry's
    // key is line 15.
    assert_one_line_error(
        err,
        "stdin: line 15: key out of order for --append in tree \"t\"",
    );
    assert_one_line_error(err, "nothing was loaded");
    for leftover in ["new.ib", "new.ib-lock", "new.ib-log"] {
        assert!(
            !dir.path().join(leftover).exists(),
            "a failed load left {leftover} behind"
        );
    }
    // In order: the same entries as a load without --append, in full
    // pages (as few leaves as a sorted load of puts, fewer than random
    // order gives).
    let sorted = entries(20_000);
    let appended = dir.path().join("appended.ib");
    ironbark()
        .args(["load", "--append"])
        .arg(&appended)
        .write_stdin(bytevalue_section(Some("t"), &sorted))
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "loaded 20000 entries into 1 tree (t)",
        ));
    assert_eq!(contents(&appended), [("t".to_string(), sorted.clone())]);
    let leaves = |path: &std::path::Path| -> u64 {
        let out = ironbark()
            .args(["stat", "--json"])
            .arg(path)
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        let v: Value = serde_json::from_slice(&out).unwrap();
        v["trees"][0]["leaf_pages"].as_u64().unwrap()
    };
    let mut shuffled = sorted.clone();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for i in (1..shuffled.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        shuffled.swap(i, (x % (i as u64 + 1)) as usize);
    }
    let random = dir.path().join("random.ib");
    make_db(&random, &[("t", shuffled)]);
    let (a, r) = (leaves(&appended), leaves(&random));
    assert!(a * 100 < r * 80, "appended: {a} leaves, random order: {r}");
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
            "VERSION=3\ndupsort=1\nintegerdup=1\nHEADER=END\nDATA=END\n".to_string(),
            3,
            "(MDB_INTEGERDUP) are not supported",
        ),
        (
            "VERSION=3\nintegerkey=1\nHEADER=END\n 010203\n 00\nDATA=END\n".to_string(),
            4,
            "integerkey=1 needs keys of 4 or 8 bytes",
        ),
        (
            "VERSION=3\nintegerkey=1\nHEADER=END\n 01020304\n 00\n 0102\n 00\nDATA=END\n"
                .to_string(),
            6,
            "4-byte integer keys: a key of 2 bytes does not fit",
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
        assert!(
            !dir.path().join("new.ib-lock").exists(),
            "a failed load left the lock file behind"
        );
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
fn copy_of_a_database_whose_writer_holds_logged_commits() {
    let dir = tmp();
    let src = dir.path().join("live.ib");
    make_db(&src, &[("a", entries(500))]);
    // A writer stays open with small commits logged (in its memory and the
    // redo log, not yet in the data file).
    let db = in_process(|| {
        let db = ironbark::Database::open(&src).unwrap();
        for i in 0..20u32 {
            let mut tx = db.begin_write().unwrap();
            let a = tx.tree("a").unwrap();
            tx.put(&a, format!("late{i:02}").as_bytes(), b"v").unwrap();
            tx.commit().unwrap();
        }
        assert!(db.stats().unwrap().counters.logged_commits >= 20);
        // (`stats` checkpointed: log some more after it.)
        for i in 20..30u32 {
            let mut tx = db.begin_write().unwrap();
            let a = tx.tree("a").unwrap();
            tx.put(&a, format!("late{i:02}").as_bytes(), b"v").unwrap();
            tx.commit().unwrap();
        }
        db
    });
    let dst = dir.path().join("copy.ib");
    ironbark()
        .arg("copy")
        .arg(&src)
        .arg(&dst)
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "compacted (its newest commits were in the redo log): 1 tree, 530 entries",
        ));
    drop(db);
    assert_eq!(contents(&src), contents(&dst));
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
    // No temporary file (nor its lock file) is left behind.
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().all(|n| !n.starts_with('.')),
        "left behind: {names:?}"
    );
    assert_eq!(
        names
            .iter()
            .filter(|n| !n.ends_with("-lock") && !n.ends_with("-log"))
            .count(),
        3,
        "{names:?}"
    );

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

    // Damage two leaves far apart: both are reported, one line each.
    let mut bytes = std::fs::read(&db).unwrap();
    let page_size = 4096;
    let leaf_of = |bytes: &[u8], needle: &[u8]| {
        bytes
            .windows(needle.len())
            .position(|w| w == needle)
            .unwrap()
            / page_size
    };
    let first = leaf_of(&bytes, b"value 100 ");
    let second = leaf_of(&bytes, b"value 4000 ");
    assert_ne!(first, second);
    for page in [first, second] {
        let at = page * page_size + page_size / 2;
        for b in &mut bytes[at..at + 16] {
            *b ^= 0x5a;
        }
    }
    std::fs::write(&db, &bytes).unwrap();
    let a = ironbark().arg("check").arg(&db).assert().code(1);
    let out = String::from_utf8_lossy(&a.get_output().stdout).to_string();
    assert_eq!(out.lines().count(), 2, "{out}");
    for page in [first, second] {
        assert!(
            out.lines()
                .any(|l| l.contains(&format!(": page {page}: page checksum mismatch"))),
            "page {page} not reported: {out}"
        );
    }
    assert_one_line_error(
        &a.get_output().stderr,
        "the integrity check found 2 problems",
    );
    let a = ironbark()
        .args(["check", "--json"])
        .arg(&db)
        .assert()
        .code(1);
    let v: Value = serde_json::from_slice(&a.get_output().stdout).unwrap();
    assert_eq!(v["ok"], false);
    let problems = v["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 2, "{v}");
    assert_eq!(problems[0]["page"], first as u64);
    assert_eq!(problems[1]["page"], second as u64);

    // Damage that keeps the file from opening is one problem, status 1.
    let mut bytes = std::fs::read(&db).unwrap();
    for b in &mut bytes[64..4096 * 2] {
        *b ^= 0xff;
    }
    std::fs::write(&db, &bytes).unwrap();
    let a = ironbark().arg("check").arg(&db).assert().failure();
    let code = a.get_output().status.code();
    let err = String::from_utf8_lossy(&a.get_output().stderr).to_string();
    assert!(!err.contains("panicked"), "{err}");
    assert!(code == Some(1) || code == Some(2), "{code:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn readers_and_clear_stale() {
    let dir = tmp();
    let db = dir.path().join("r.ib");
    make_db(&db, &[("a", entries(3000))]);
    ironbark()
        .arg("readers")
        .arg(&db)
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "live readers     0 of 126 slots\n",
        ))
        .stdout(predicate::str::contains("oldest snapshot  none"))
        .stdout(predicate::str::contains("this process").not());
    ironbark()
        .args(["readers", "--clear-stale"])
        .arg(&db)
        .assert()
        .success()
        .stdout(predicate::str::contains("cleared 0 stale reader slots"));

    // A reader in another process, then a commit that frees pages it sees.
    // (A second process keeps the database open throughout: when the last
    // process closes it, the next one to open it starts a new reader table,
    // and stale slots are gone anyway.)
    let _keeper = Helper::spawn("open", &db);
    let mut reader = Helper::spawn("read", &db);
    let reader_pid = reader.pid();
    in_process(|| {
        let d = ironbark::Database::open(&db).unwrap();
        let mut tx = d.begin_write().unwrap();
        let a = tx.tree("a").unwrap();
        for (k, _) in entries(3000) {
            tx.put(&a, &k, b"rewritten").unwrap();
        }
        tx.commit().unwrap();
    });
    let v = readers_json(&db, &[]);
    assert_eq!(v["live_readers"], 1, "{v}");
    assert_eq!(v["stale_readers"], 0, "{v}");
    let r = &v["readers"][0];
    assert_eq!(r["pid"], reader_pid, "{v}");
    assert_eq!(r["alive"], true, "{v}");
    assert_eq!(r["snapshot_txn"], 2, "{v}");
    assert_eq!(v["last_txn_id"], 3, "{v}");
    let pinned = r["pinned_pages"].as_u64().unwrap();
    assert!(pinned > 0, "{v}");
    assert_eq!(r["pinned_bytes"].as_u64().unwrap(), pinned * 4096);
    assert_eq!(v["oldest_snapshot"], 2);
    assert_eq!(v["pages_pinned_by_readers"], pinned);
    ironbark()
        .arg("readers")
        .arg(&db)
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "live readers     1 of 126 slots\n",
        ))
        .stdout(predicate::str::contains("oldest snapshot  txn 2"))
        .stdout(
            predicate::str::is_match(format!(r"\n\s+{reader_pid}\s+2\s+alive\s+{pinned}\s"))
                .unwrap(),
        );
    // stat sees it too.
    let out = ironbark()
        .args(["stat", "--json"])
        .arg(&db)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let s: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(s["live_readers"], 1);
    assert_eq!(s["oldest_snapshot"], 2);

    // The reader's process dies without ending its read: a stale slot.
    reader.kill();
    ironbark()
        .arg("readers")
        .arg(&db)
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "live readers     1 of 126 slots (1 of dead processes: clear with --clear-stale)",
        ))
        .stdout(predicate::str::is_match(format!(r"\n\s+{reader_pid}\s+2\s+dead\s")).unwrap());
    assert_eq!(readers_json(&db, &[])["stale_readers"], 1);
    ironbark()
        .args(["readers", "--clear-stale"])
        .arg(&db)
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "cleared 1 stale reader slot of dead processes\n",
        ))
        .stdout(predicate::str::contains(
            "live readers     0 of 126 slots\n",
        ));
    let v = readers_json(&db, &["--clear-stale"]);
    assert_eq!(v["cleared_stale"], 0);
    assert_eq!(v["live_readers"], 0);
    assert_eq!(v["readers"].as_array().unwrap().len(), 0);
    assert_eq!(v["pages_pinned_by_readers"], 0);
    ironbark()
        .args(["readers", "--help"])
        .assert()
        .success()
        .stdout(predicate::str::contains("every process"));
}

fn readers_json(db: &std::path::Path, extra: &[&str]) -> Value {
    let out = ironbark()
        .args(["readers", "--json"])
        .args(extra)
        .arg(db)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    serde_json::from_slice(&out).unwrap()
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
    assert!(
        !dir.path().join("missing.ib-lock").exists() && !dir.path().join("junk.txt-lock").exists(),
        "a lock file was left beside a missing or foreign file"
    );
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
        .write_stdin(bytevalue_section(None, &entries(1)))
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

/// The other process of the multi-process tests. When run with
/// `IRONBARK_CLI_TEST_ROLE=ROLE` and `IRONBARK_CLI_TEST_DB=PATH`, this test
/// opens the database and plays ROLE until its stdin closes:
///
/// - `open`: keeps the database open, nothing more;
/// - `hold`: keeps a write transaction open (uncommitted);
/// - `read`: keeps a read transaction open;
/// - `write`: commits again and again, each commit setting every key of
///   the tree `inv` to the commit's counter, and says how many it made.
///
/// It prints `READY` once in place. Otherwise it does nothing.
#[test]
fn helper_process_if_asked() {
    let (Ok(role), Ok(path)) = (
        std::env::var("IRONBARK_CLI_TEST_ROLE"),
        std::env::var("IRONBARK_CLI_TEST_DB"),
    ) else {
        return;
    };
    let ready = || {
        println!("READY");
        std::io::stdout().flush().unwrap();
    };
    let stdin_closed = || {
        let mut sink = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut sink);
    };
    match role.as_str() {
        "hold" => {
            let db = ironbark::Database::open(&path).unwrap();
            let mut tx = db.begin_write().unwrap();
            let t = tx.open_tree("a").unwrap();
            tx.put(&t, b"uncommitted", b"!").unwrap();
            ready();
            stdin_closed();
            drop(tx);
        }
        "open" => {
            let db = ironbark::Database::open(&path).unwrap();
            ready();
            stdin_closed();
            drop(db);
        }
        "read" => {
            let db = ironbark::Database::open(&path).unwrap();
            let rx = db.begin_read().unwrap();
            ready();
            stdin_closed();
            drop(rx);
        }
        "write" => {
            let options = ironbark::Options {
                durability: ironbark::Durability::None,
                ..Default::default()
            };
            let db = ironbark::Database::open_with(&path, &options).unwrap();
            let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let s = stop.clone();
            std::thread::spawn(move || {
                stdin_closed();
                s.store(true, std::sync::atomic::Ordering::SeqCst);
            });
            let mut counter = 0u64;
            while counter == 0 || !stop.load(std::sync::atomic::Ordering::SeqCst) {
                counter += 1;
                let mut tx = db.begin_write().unwrap();
                let t = tx.open_tree(INV_TREE).unwrap();
                let value = inv_value(counter);
                for i in 0..INV_KEYS {
                    tx.put(&t, format!("inv{i:05}").as_bytes(), &value).unwrap();
                }
                tx.commit().unwrap();
                if counter == 1 {
                    ready();
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            println!("COMMITS {counter}");
        }
        other => panic!("unknown role {other}"),
    }
}

const INV_TREE: &str = "inv";
const INV_KEYS: usize = 2000;

/// The value every key of `inv` holds after commit `counter`.
fn inv_value(counter: u64) -> Vec<u8> {
    format!("{counter:012}|").repeat(12).into_bytes()
}

/// Checks the invariant of the `write` helper in the database at `path`:
/// every key of `inv` holds the same counter. Returns it.
fn inv_counter(path: &std::path::Path) -> u64 {
    let all = contents(path);
    let (_, inv) = all
        .iter()
        .find(|(name, _)| name == INV_TREE)
        .expect("the tree inv");
    assert_eq!(inv.len(), INV_KEYS);
    let first = &inv[0].1;
    assert!(
        inv.iter().all(|(_, v)| v == first),
        "a copy mixes commits: {:?} ... {:?}",
        String::from_utf8_lossy(first),
        inv.iter()
            .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
            .find(|v| v.as_bytes() != first.as_slice())
    );
    let counter: u64 = String::from_utf8_lossy(&first[..12]).parse().unwrap();
    assert_eq!(*first, inv_value(counter));
    counter
}

/// A helper process (see [`helper_process_if_asked`]), stopped (stdin
/// closed, waited for) when dropped.
struct Helper {
    child: Child,
    lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
}

impl Helper {
    fn spawn(role: &str, db: &std::path::Path) -> Helper {
        let guard = spawn_guard();
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "helper_process_if_asked",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("IRONBARK_CLI_TEST_ROLE", role)
            .env("IRONBARK_CLI_TEST_DB", db)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        drop(guard);
        let mut h = Helper { child, lines };
        loop {
            match h.lines.next() {
                Some(Ok(l)) if l.contains("READY") => break,
                Some(Ok(_)) => continue,
                other => panic!("the {role} helper did not get ready: {other:?}"),
            }
        }
        h
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Closes its stdin and returns the line starting with `prefix` that
    /// it prints before it ends.
    fn stop(mut self, prefix: &str) -> String {
        drop(self.child.stdin.take());
        let line = self
            .lines
            .by_ref()
            .map_while(|l| l.ok())
            .find(|l| l.starts_with(prefix))
            .unwrap_or_default();
        assert!(self.child.wait().unwrap().success());
        line
    }

    /// Kills it (SIGKILL): whatever it holds is left behind.
    fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        if self.child.try_wait().ok().flatten().is_none() && self.child.wait().is_err() {
            let _ = self.child.kill();
        }
    }
}

/// A writer in another process holds the write lock: `load` fails at once
/// with one line and loads nothing (or waits with --wait), while every
/// read command works beside it.
#[test]
fn write_locked_by_another_process() {
    let dir = tmp();
    let db = dir.path().join("locked.ib");
    make_db(&db, &[("a", entries(3))]);
    let holder = Helper::spawn("hold", &db);

    ironbark()
        .args(["stat", "--tree", "a"])
        .arg(&db)
        .assert()
        .success()
        .stdout(predicate::str::contains("entries         3\n"));
    let out = ironbark()
        .args(["dump", "--all"])
        .arg(&db)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8_lossy(&out);
    assert!(text.contains("database=a\n"), "{text}");
    // The other process's uncommitted entry is not seen.
    assert!(!text.contains(&hex(b"uncommitted")), "{text}");
    assert_eq!(text.lines().filter(|l| l.starts_with(' ')).count(), 6);
    ironbark()
        .arg("check")
        .arg(&db)
        .assert()
        .success()
        .stdout(predicate::str::contains("ok:"));
    ironbark().arg("readers").arg(&db).assert().success();
    for (name, compact) in [("copy.ib", false), ("compact.ib", true)] {
        let dst = dir.path().join(name);
        let mut c = ironbark();
        c.arg("copy");
        if compact {
            c.arg("--compact");
        }
        c.arg(&db).arg(&dst).assert().success();
        assert_eq!(contents(&dst), contents(&db));
    }

    // load: one line, promptly, nothing loaded.
    let input = bytevalue_section(Some("a"), &[(b"new".to_vec(), b"1".to_vec())]);
    let started = std::time::Instant::now();
    let a = ironbark()
        .arg("load")
        .arg(&db)
        .write_stdin(input.clone())
        .assert()
        .code(1);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "load took {:?}",
        started.elapsed()
    );
    assert_one_line_error(&a.get_output().stderr, "locked for writing");
    assert_one_line_error(&a.get_output().stderr, "another process");
    assert_one_line_error(&a.get_output().stderr, "nothing was loaded");
    // Clearing stale readers needs the write lock too.
    let a = ironbark()
        .args(["readers", "--clear-stale"])
        .arg(&db)
        .assert()
        .code(1);
    assert_one_line_error(&a.get_output().stderr, "locked for writing");

    holder.stop("");
    // Once the other process is done, the database is unchanged and loads.
    ironbark()
        .args(["stat", "--tree", "a"])
        .arg(&db)
        .assert()
        .success()
        .stdout(predicate::str::contains("entries         3\n"));
    ironbark()
        .arg("load")
        .arg(&db)
        .write_stdin(input)
        .assert()
        .success();
    ironbark()
        .args(["stat", "--tree", "a"])
        .arg(&db)
        .assert()
        .success()
        .stdout(predicate::str::contains("entries         4\n"));
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `copy` and `copy --compact` are consistent hot backups while a writer in
/// another process keeps committing; the other commands work beside it.
#[test]
fn hot_backup_beside_a_writer_in_another_process() {
    let dir = tmp();
    let src = dir.path().join("live.ib");
    make_db(&src, &[("bulk", entries(30_000))]);
    let writer = Helper::spawn("write", &src);

    let mut counters = Vec::new();
    for round in 0..3 {
        for compact in [false, true] {
            let dst = dir.path().join(format!("backup-{round}-{compact}.ib"));
            let mut c = ironbark();
            c.arg("copy");
            if compact {
                c.arg("--compact");
            }
            c.arg(&src)
                .arg(&dst)
                .assert()
                .success()
                .stdout(predicate::str::contains("copied"));
            ironbark()
                .arg("check")
                .arg(&dst)
                .assert()
                .success()
                .stdout(predicate::str::contains("ok:"));
            counters.push(inv_counter(&dst));
            let bulk = contents(&dst)
                .into_iter()
                .find(|(n, _)| n == "bulk")
                .unwrap()
                .1;
            assert_eq!(bulk, entries(30_000));
        }
    }

    // Beside the writer: check, stat, readers, dump (of one snapshot), and
    // load --wait, which slips in between its commits.
    ironbark()
        .arg("check")
        .arg(&src)
        .assert()
        .success()
        .stdout(predicate::str::contains("ok:"));
    ironbark()
        .args(["stat", "--json"])
        .arg(&src)
        .assert()
        .success();
    ironbark().arg("readers").arg(&src).assert().success();
    let out = ironbark()
        .args(["dump", "--tree", INV_TREE])
        .arg(&src)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8_lossy(&out);
    let values: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with(' '))
        .skip(1)
        .step_by(2)
        .collect();
    assert_eq!(values.len(), INV_KEYS);
    assert!(
        values.iter().all(|v| *v == values[0]),
        "the dump mixes commits"
    );
    ironbark()
        .args(["load", "--wait", "--tree", "loaded"])
        .arg(&src)
        .write_stdin(bytevalue_section(None, &entries(10)))
        .assert()
        .success();

    let last = writer.stop("COMMITS ");
    let commits: u64 = last
        .strip_prefix("COMMITS ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the writer said {last:?}"));
    // The backups were taken while the writer committed: they hold
    // different commits, in order, all within what it committed.
    assert!(counters.windows(2).all(|w| w[0] <= w[1]), "{counters:?}");
    assert!(counters[0] < counters[counters.len() - 1], "{counters:?}");
    assert!(
        counters[counters.len() - 1] < commits,
        "{counters:?} of {commits}"
    );
    assert_eq!(inv_counter(&src), commits);
    let all = contents(&src);
    assert_eq!(
        all.iter().find(|(n, _)| n == "loaded").unwrap().1,
        entries(10)
    );
}
