//! Migration to and from LMDB through the real `mdb_dump` and `mdb_load`
//! of Debian's `lmdb-utils`. These tests fail (they do not skip) when the
//! tools are missing: install them with `apt-get install lmdb-utils`.
//!
//! Also what the migration must not do quietly: `mdb_dump -a` of an
//! environment with only a main database prints nothing, which `ironbark
//! load` refuses (the documented command is `mdb_dump ENV`); and what
//! `mdb_load` cannot take, which `ironbark dump --lmdb` refuses up front.

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::{assert_one_line_error, contents, entries, ironbark, make_db};

/// Runs an LMDB tool; fails the test with a clear message if it is not
/// installed or if it fails.
fn mdb(tool: &str, args: &[&std::ffi::OsStr], stdin: Option<&[u8]>) -> Vec<u8> {
    let out = mdb_run(tool, args, stdin);
    assert!(
        out.status.success(),
        "{tool} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Runs an LMDB tool and returns what it did, success or not; fails the
/// test with a clear message if it is not installed.
fn mdb_run(tool: &str, args: &[&std::ffi::OsStr], stdin: Option<&[u8]>) -> Output {
    let _g = common::spawn_guard();
    let mut cmd = Command::new(tool);
    cmd.args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
            "{tool} is not on PATH: install lmdb-utils (apt-get install -y lmdb-utils) \
             to run the LMDB round-trip tests"
        ),
        Err(e) => panic!("cannot run {tool}: {e}"),
    };
    if let Some(input) = stdin {
        use std::io::Write;
        let mut pipe = child.stdin.take().unwrap();
        // mdb_load may stop reading early when it fails.
        let _ = pipe.write_all(input);
    }
    child.wait_with_output().unwrap()
}

fn os(p: &Path) -> &std::ffi::OsStr {
    p.as_os_str()
}

/// The dump text with the `mapsize=` lines removed: the one header line
/// that legitimately differs (each side sizes the map for its own data).
fn without_mapsize(text: &[u8]) -> String {
    String::from_utf8(text.to_vec())
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with("mapsize="))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// Dump text for `mdb_load`. In `format=bytevalue`: the `format=print`
/// reader of LMDB 0.9.24's `mdb_load` decodes `\\` wrongly after an
/// earlier `\xx` escape on the same line.
fn lmdb_text(entries: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    common::bytevalue_section(None, entries).into_bytes()
}

#[test]
fn lmdb_tools_are_installed() {
    mdb("mdb_dump", &["-V".as_ref()], None);
    mdb("mdb_load", &["-V".as_ref()], None);
}

#[test]
fn named_databases_round_trip_through_lmdb() {
    let dir = tempfile::tempdir().unwrap();
    let env = dir.path().join("env.mdb");
    let binary: Vec<(Vec<u8>, Vec<u8>)> = vec![
        (b"\x00\x01".to_vec(), b"".to_vec()),
        (b"a\\b".to_vec(), b"\\41 not an escape".to_vec()),
        (b"caf\xc3\xa9".to_vec(), (0..=255u8).collect()),
        (b"\xff\xfe".to_vec(), b"high".to_vec()),
    ];
    let big: Vec<(Vec<u8>, Vec<u8>)> = (0..6u8)
        .map(|i| (vec![b'k', i], vec![i; 9000 + i as usize]))
        .collect();
    let named = [
        ("accounts", entries(3000)),
        ("binary", binary),
        ("blobs", big),
        ("empty", vec![]),
    ];
    // An LMDB environment with named databases, made by mdb_load -s.
    for (name, entries) in &named {
        let text = dir.path().join(format!("{name}.txt"));
        std::fs::write(&text, lmdb_text(entries)).unwrap();
        mdb(
            "mdb_load",
            &[
                "-n".as_ref(),
                "-s".as_ref(),
                name.as_ref(),
                "-f".as_ref(),
                os(&text),
                os(&env),
            ],
            None,
        );
    }
    let original = mdb("mdb_dump", &["-n".as_ref(), "-a".as_ref(), os(&env)], None);
    assert_eq!(
        String::from_utf8_lossy(&original)
            .matches("database=")
            .count(),
        4
    );

    // mdb_dump -a | ironbark load
    let ib = dir.path().join("migrated.ib");
    ironbark()
        .arg("load")
        .arg(&ib)
        .write_stdin(original.clone())
        .assert()
        .success();
    let got = contents(&ib);
    assert_eq!(
        got.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        ["accounts", "binary", "blobs", "empty"]
    );
    for ((name, want), (_, have)) in named.iter().zip(&got) {
        let mut want = want.clone();
        want.sort();
        assert_eq!(&want, have, "tree {name}");
    }
    ironbark().arg("check").arg(&ib).assert().success();

    // ironbark dump --all is the same text as mdb_dump -a.
    let ours = ironbark()
        .args(["dump", "--all"])
        .arg(&ib)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    assert_eq!(without_mapsize(&ours), without_mapsize(&original));

    // ... and mdb_load takes it back.
    let back = dir.path().join("back.mdb");
    mdb("mdb_load", &["-n".as_ref(), os(&back)], Some(&ours));
    let again = mdb("mdb_dump", &["-n".as_ref(), "-a".as_ref(), os(&back)], None);
    assert_eq!(without_mapsize(&again), without_mapsize(&original));

    // The print format too, for data without backslashes (LMDB 0.9.24's
    // mdb_dump -p does not escape them, and its mdb_load can misread `\\`).
    for name in ["accounts", "blobs", "empty"] {
        let text = ironbark()
            .args(["dump", "-p", "--tree", name])
            .arg(&ib)
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        let back = dir.path().join(format!("back-print-{name}.mdb"));
        mdb("mdb_load", &["-n".as_ref(), os(&back)], Some(&text));
        let bytes = |env: &Path| {
            mdb(
                "mdb_dump",
                &["-n".as_ref(), "-s".as_ref(), name.as_ref(), os(env)],
                None,
            )
        };
        assert_eq!(
            without_mapsize(&bytes(&back)),
            without_mapsize(&bytes(&env)),
            "tree {name}"
        );
    }
}

#[test]
fn main_database_maps_to_the_tree_main() {
    let dir = tempfile::tempdir().unwrap();
    let env = dir.path().join("main.mdb");
    let data = entries(500);
    mdb(
        "mdb_load",
        &["-n".as_ref(), os(&env)],
        Some(&lmdb_text(&data)),
    );
    let original = mdb("mdb_dump", &["-n".as_ref(), os(&env)], None);
    assert!(!String::from_utf8_lossy(&original).contains("database="));

    let f = dir.path().join("main.txt");
    std::fs::write(&f, &original).unwrap();
    let ib = dir.path().join("main.ib");
    ironbark()
        .arg("load")
        .arg(&ib)
        .arg("-f")
        .arg(&f)
        .assert()
        .success();
    let got = contents(&ib);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, "main");
    assert_eq!(got[0].1, data);

    // `ironbark dump` of `main` has no database= line, with or without --all.
    for all in [false, true] {
        let mut c = ironbark();
        c.arg("dump").arg(&ib);
        if all {
            c.arg("--all");
        }
        let ours = c.assert().success().get_output().stdout.clone();
        assert_eq!(without_mapsize(&ours), without_mapsize(&original));
        let back = dir.path().join(format!("back-{all}.mdb"));
        mdb("mdb_load", &["-n".as_ref(), os(&back)], Some(&ours));
        let again = mdb("mdb_dump", &["-n".as_ref(), os(&back)], None);
        assert_eq!(without_mapsize(&again), without_mapsize(&original));
    }
}

#[test]
fn each_kind_of_lmdb_environment_migrates_with_its_documented_command() {
    let dir = tempfile::tempdir().unwrap();
    // Only a main database: `mdb_dump -a` prints nothing (LMDB 0.9.24)...
    let main_only = dir.path().join("main-only.mdb");
    let data = entries(50);
    mdb(
        "mdb_load",
        &["-n".as_ref(), os(&main_only)],
        Some(&lmdb_text(&data)),
    );
    let with_a = mdb(
        "mdb_dump",
        &["-n".as_ref(), "-a".as_ref(), os(&main_only)],
        None,
    );
    assert_eq!(with_a, b"", "mdb_dump -a of a main-only environment");
    // ... which load refuses, creating nothing, and says what to run.
    let ib = dir.path().join("main.ib");
    let a = ironbark()
        .arg("load")
        .arg(&ib)
        .write_stdin(with_a)
        .assert()
        .code(1);
    assert_one_line_error(&a.get_output().stderr, "no dump sections");
    assert_one_line_error(&a.get_output().stderr, "`mdb_dump ENV`, without -a");
    assert!(!ib.exists() && !dir.path().join("main.ib-lock").exists());
    // `mdb_dump ENV`, without -a, is the command for it.
    let text = mdb("mdb_dump", &["-n".as_ref(), os(&main_only)], None);
    ironbark()
        .arg("load")
        .arg(&ib)
        .write_stdin(text)
        .assert()
        .success();
    assert_eq!(contents(&ib), vec![("main".to_string(), data.clone())]);

    // Named databases: `mdb_dump -a ENV`.
    let named = dir.path().join("named.mdb");
    for name in ["x", "y"] {
        mdb(
            "mdb_load",
            &["-n".as_ref(), "-s".as_ref(), name.as_ref(), os(&named)],
            Some(&lmdb_text(&data)),
        );
    }
    let text = mdb(
        "mdb_dump",
        &["-n".as_ref(), "-a".as_ref(), os(&named)],
        None,
    );
    let ib = dir.path().join("named.ib");
    ironbark()
        .arg("load")
        .arg(&ib)
        .write_stdin(text)
        .assert()
        .success();
    assert_eq!(
        contents(&ib),
        vec![("x".to_string(), data.clone()), ("y".to_string(), data)]
    );
}

/// Loads `text` into a new LMDB file environment: whether `mdb_load`
/// succeeded, and the environment.
fn mdb_load(dir: &Path, name: &str, text: &[u8]) -> (bool, std::path::PathBuf) {
    let env = dir.join(name);
    let out = mdb_run("mdb_load", &["-n".as_ref(), os(&env)], Some(text));
    (out.status.success(), env)
}

/// Named trees of entries, for `make_db`.
type Trees = Vec<(&'static str, common::Entries)>;

#[test]
fn dump_lmdb_refuses_what_mdb_load_cannot_take() {
    let dir = tempfile::tempdir().unwrap();
    let key = |n: usize| vec![b'k'; n];
    let v = b"v".to_vec();
    // (trees, dump arguments, what --lmdb says)
    let cases: Vec<(Trees, &[&str], &str)> = vec![
        (
            vec![("main", vec![(vec![], v.clone()), (b"a".to_vec(), v.clone())])],
            &[],
            "tree \"main\": LMDB cannot take an empty key",
        ),
        (
            vec![("long", vec![(key(512), v.clone())])],
            &["--tree", "long"],
            "tree \"long\": key 0x6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b... of 512 bytes \
             is longer than LMDB's limit of 511 bytes",
        ),
        (
            vec![("main", vec![(b"users".to_vec(), v.clone())]), ("users", entries(3))],
            &["--all"],
            "tree \"main\": key \"users\" is also the name of the tree \"users\"",
        ),
    ];
    for (i, (trees, args, msg)) in cases.iter().enumerate() {
        let db = dir.path().join(format!("case{i}.ib"));
        make_db(&db, trees);
        // Without --lmdb the dump is written, and the real mdb_load fails on it.
        let text = ironbark()
            .arg("dump")
            .args(*args)
            .arg(&db)
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        let (ok, _) = mdb_load(dir.path(), &format!("case{i}.mdb"), &text);
        assert!(!ok, "case {i}: mdb_load took what --lmdb refuses");
        // With --lmdb nothing is written, and the message names the problem.
        let a = ironbark()
            .args(["dump", "--lmdb"])
            .args(*args)
            .arg(&db)
            .assert()
            .code(1);
        assert_eq!(a.get_output().stdout, b"", "case {i}");
        assert_one_line_error(&a.get_output().stderr, msg);
    }

    // A NUL in a tree name: mdb_load cuts the name there, so two trees
    // become one LMDB database and an entry is lost without an error.
    let db = dir.path().join("nul.ib");
    make_db(
        &db,
        &[
            ("a\0one", vec![(b"k".to_vec(), b"1".to_vec())]),
            ("a\0two", vec![(b"k".to_vec(), b"2".to_vec())]),
        ],
    );
    let text = ironbark()
        .args(["dump", "--all"])
        .arg(&db)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let (ok, env) = mdb_load(dir.path(), "nul.mdb", &text);
    assert!(ok, "LMDB 0.9.24's mdb_load takes the NUL without a word");
    let back = mdb("mdb_dump", &["-n".as_ref(), "-a".as_ref(), os(&env)], None);
    let back = String::from_utf8_lossy(&back);
    assert_eq!(back.matches("database=").count(), 1, "{back}");
    assert!(back.contains("database=a\n"), "{back}");
    let a = ironbark()
        .args(["dump", "--all", "--lmdb"])
        .arg(&db)
        .assert()
        .code(1);
    assert_eq!(a.get_output().stdout, b"");
    assert_one_line_error(
        &a.get_output().stderr,
        "tree \"a\\0one\": LMDB cannot take a NUL byte in a database name",
    );

    // A backslash with -p: refused by --lmdb (LMDB 0.9's mdb_load misreads
    // `\\` after an earlier escape on the same line).
    let db = dir.path().join("bs.ib");
    make_db(
        &db,
        &[("main", vec![(b"a\\b".to_vec(), b"\x01\\".to_vec())])],
    );
    let a = ironbark()
        .args(["dump", "-p", "--lmdb"])
        .arg(&db)
        .assert()
        .code(1);
    assert_one_line_error(&a.get_output().stderr, "dump without -p");

    // What LMDB can take passes --lmdb unchanged, up to the longest key, and
    // loads.
    let db = dir.path().join("ok.ib");
    make_db(
        &db,
        &[
            ("main", vec![(key(511), v.clone()), (b"k".to_vec(), vec![])]),
            ("users", entries(100)),
        ],
    );
    let plain = ironbark()
        .args(["dump", "--all"])
        .arg(&db)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let checked = ironbark()
        .args(["dump", "--all", "--lmdb"])
        .arg(&db)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    assert_eq!(plain, checked);
    let (ok, env) = mdb_load(dir.path(), "ok.mdb", &checked);
    assert!(ok, "mdb_load refused a dump that passed --lmdb");
    let back = mdb(
        "mdb_dump",
        &["-n".as_ref(), "-s".as_ref(), "users".as_ref(), os(&env)],
        None,
    );
    assert_eq!(
        without_mapsize(&back),
        without_mapsize(
            &ironbark()
                .args(["dump", "--tree", "users"])
                .arg(&db)
                .assert()
                .success()
                .get_output()
                .stdout
                .clone()
        )
    );
}

/// A section of dump text for `mdb_load` with the header `flags` lines
/// (`dupsort=1`, `integerkey=1`: what its mdb_load reads).
fn flagged_section(name: &str, flags: &str, entries: &[(Vec<u8>, Vec<u8>)]) -> String {
    common::bytevalue_section(Some(name), entries)
        .replace("maxreaders=126\n", &format!("maxreaders=126\n{flags}"))
}

#[test]
fn dupsort_and_integerkey_databases_round_trip_through_lmdb() {
    let dir = tempfile::tempdir().unwrap();
    let env = dir.path().join("kinds.mdb");
    // Keys and values that a naive pair encoding confuses: zero and 0xff
    // bytes, prefixes of each other, and a key with many values (LMDB
    // moves those to a sub-database).
    let mut dups: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let parts: [&[u8]; 6] = [b"a", b"a\x00", b"a\x00\x00", b"ab", b"\xff", b"\x00"];
    for k in parts {
        for v in [&b"\x00"[..], b"1", b"\x00\x00", b"\xff\x00", b"a"] {
            dups.push((k.to_vec(), v.to_vec()));
        }
    }
    for i in 0..700u32 {
        dups.push((b"many".to_vec(), format!("value {i:05}").into_bytes()));
    }
    let small = [65536u32, 1, 2, 256, 0, u32::MAX, 16_777_216, 255, 257];
    let ints32: Vec<(Vec<u8>, Vec<u8>)> = small
        .iter()
        .map(|n| (n.to_ne_bytes().to_vec(), format!("n{n}").into_bytes()))
        .collect();
    let big = [1u64 << 40, 1, 256, 1 << 32, u64::MAX, 0, 65536];
    let ints64: Vec<(Vec<u8>, Vec<u8>)> = big
        .iter()
        .map(|n| (n.to_ne_bytes().to_vec(), n.to_be_bytes().to_vec()))
        .collect();
    let mut both: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    for n in [256u32, 1, 65536] {
        for v in [&b"y"[..], b"x", b"\x00"] {
            both.push((n.to_ne_bytes().to_vec(), v.to_vec()));
        }
    }
    let text = [
        flagged_section("both", "dupsort=1\nintegerkey=1\n", &both),
        flagged_section("dups", "dupsort=1\n", &dups),
        flagged_section("ints32", "integerkey=1\n", &ints32),
        flagged_section("ints64", "integerkey=1\n", &ints64),
        flagged_section("plain", "", &entries(50)),
    ]
    .concat();
    let text_file = dir.path().join("kinds.txt");
    std::fs::write(&text_file, text).unwrap();
    mdb(
        "mdb_load",
        &["-n".as_ref(), "-f".as_ref(), os(&text_file), os(&env)],
        None,
    );
    let original = mdb("mdb_dump", &["-n".as_ref(), "-a".as_ref(), os(&env)], None);
    let original_text = String::from_utf8_lossy(&original);
    assert_eq!(original_text.matches("dupsort=1").count(), 2);
    assert_eq!(original_text.matches("integerkey=1").count(), 3);

    // mdb_dump -a | ironbark load
    let ib = dir.path().join("kinds.ib");
    ironbark()
        .arg("load")
        .arg(&ib)
        .write_stdin(original.clone())
        .assert()
        .success();
    ironbark().arg("check").arg(&ib).assert().success();

    // Through the API: the kinds, numeric order, the values of a key.
    common::in_process(|| {
        use ironbark::{IntWidth, TreeKind};
        let db = ironbark::Database::open(&ib).unwrap();
        let rx = db.begin_read().unwrap();
        assert_eq!(rx.tree_kind("dups").unwrap(), TreeKind::MULTIMAP);
        assert_eq!(
            rx.tree_kind("both").unwrap(),
            TreeKind::int_multimap(IntWidth::U32)
        );
        let t = rx.int_tree("ints32").unwrap();
        assert_eq!(t.width(), IntWidth::U32);
        let keys: Vec<u64> = rx.int_iter(&t).unwrap().map(|e| e.unwrap().0).collect();
        let mut want: Vec<u64> = small.iter().map(|&n| u64::from(n)).collect();
        want.sort_unstable();
        assert_eq!(keys, want);
        let t = rx.int_tree("ints64").unwrap();
        let keys: Vec<u64> = rx.int_iter(&t).unwrap().map(|e| e.unwrap().0).collect();
        let mut want = big.to_vec();
        want.sort_unstable();
        assert_eq!(keys, want);
        assert_eq!(
            rx.get_int(&t, 1 << 32).unwrap(),
            Some(&(1u64 << 32).to_be_bytes()[..])
        );
        let m = rx.multimap("dups").unwrap();
        assert_eq!(rx.count_dups(&m, b"many").unwrap(), 700);
        let values: Vec<&[u8]> = rx
            .get_dups(&m, b"a\x00")
            .unwrap()
            .map(|v| v.unwrap())
            .collect();
        assert_eq!(values, [&b"\x00"[..], b"\x00\x00", b"1", b"a", b"\xff\x00"]);
        assert_eq!(rx.multimap_len(&m).unwrap(), dups.len() as u64);
    });

    // ironbark dump --all is the same text as mdb_dump -a ...
    let ours = ironbark()
        .args(["dump", "--all", "--lmdb"])
        .arg(&ib)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    assert_eq!(without_mapsize(&ours), without_mapsize(&original));

    // ... and mdb_load takes it back, byte for byte.
    let back = dir.path().join("back.mdb");
    mdb("mdb_load", &["-n".as_ref(), os(&back)], Some(&ours));
    let again = mdb("mdb_dump", &["-n".as_ref(), "-a".as_ref(), os(&back)], None);
    assert_eq!(without_mapsize(&again), without_mapsize(&original));

    // One database at a time too, into a database that has it: the pairs
    // are stored once (loading twice changes nothing).
    for name in ["both", "dups", "ints32"] {
        let one = mdb(
            "mdb_dump",
            &["-n".as_ref(), "-s".as_ref(), name.as_ref(), os(&env)],
            None,
        );
        ironbark()
            .arg("load")
            .arg(&ib)
            .write_stdin(one.clone())
            .assert()
            .success();
        let ours = ironbark()
            .args(["dump", "--tree", name])
            .arg(&ib)
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        assert_eq!(without_mapsize(&ours), without_mapsize(&one), "{name}");
    }
}

#[test]
fn sections_load_only_into_trees_of_their_kind() {
    let dir = tempfile::tempdir().unwrap();
    let ib = dir.path().join("k.ib");
    let one = vec![(b"k".to_vec(), b"v".to_vec())];
    ironbark()
        .arg("load")
        .arg(&ib)
        .write_stdin(flagged_section("t", "", &one))
        .assert()
        .success();
    for (flags, key) in [
        ("dupsort=1\n", b"k".to_vec()),
        ("integerkey=1\n", vec![0u8; 4]),
    ] {
        let a = ironbark()
            .arg("load")
            .arg(&ib)
            .write_stdin(flagged_section("t", flags, &[(key, b"v".to_vec())]))
            .assert()
            .code(1);
        assert_one_line_error(&a.get_output().stderr, "is a plain tree, not a");
    }
}
