//! Migration to and from LMDB through the real `mdb_dump` and `mdb_load`
//! of Debian's `lmdb-utils`. These tests fail (they do not skip) when the
//! tools are missing: install them with `apt-get install lmdb-utils`.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};

use common::{contents, entries, ironbark};

/// Runs an LMDB tool; fails the test with a clear message if it is not
/// installed or if it fails.
fn mdb(tool: &str, args: &[&std::ffi::OsStr], stdin: Option<&[u8]>) -> Vec<u8> {
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
        pipe.write_all(input).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{tool} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
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
