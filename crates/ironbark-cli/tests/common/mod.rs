//! Helpers shared by the CLI's end-to-end tests.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::path::Path;
use std::sync::{RwLock, RwLockReadGuard};

use assert_cmd::assert::Assert;
use assert_cmd::Command;

/// Key-value pairs.
pub type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// Keeps child processes from being spawned while this test process has a
/// database open.
///
/// A database's lock belongs to its open file, and a child forked by
/// another test thread shares the parent's open files until it execs: a
/// database opened here and closed just before would still be locked for a
/// moment, and an `ironbark` run on it would fail with "locked". So spawns
/// share this lock and in-process opens take it alone.
static FORK_GUARD: RwLock<()> = RwLock::new(());

/// Held while spawning and running child processes.
pub fn spawn_guard() -> RwLockReadGuard<'static, ()> {
    FORK_GUARD.read().unwrap_or_else(|e| e.into_inner())
}

/// Runs `f`, which opens databases in this process, with no child process
/// being spawned meanwhile.
pub fn in_process<T>(f: impl FnOnce() -> T) -> T {
    let _g = FORK_GUARD.write().unwrap_or_else(|e| e.into_inner());
    f()
}

/// A command line of the `ironbark` binary, run under [`spawn_guard`].
pub struct Ironbark(Command);

impl Ironbark {
    pub fn arg(&mut self, a: impl AsRef<OsStr>) -> &mut Self {
        self.0.arg(a);
        self
    }

    pub fn args<I, S>(&mut self, args: I) -> &mut Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.0.args(args);
        self
    }

    pub fn write_stdin(&mut self, input: impl Into<Vec<u8>>) -> &mut Self {
        self.0.write_stdin(input.into());
        self
    }

    pub fn assert(&mut self) -> Assert {
        let _g = spawn_guard();
        self.0.assert()
    }
}

/// The `ironbark` binary of this crate.
pub fn ironbark() -> Ironbark {
    Ironbark(Command::cargo_bin("ironbark").expect("the ironbark binary is built"))
}

/// Creates a database at `path` holding `trees`, each a list of entries.
pub fn make_db(path: &Path, trees: &[(&str, Entries)]) {
    in_process(|| make_db_here(path, trees))
}

fn make_db_here(path: &Path, trees: &[(&str, Entries)]) {
    let db = ironbark::Database::open(path).unwrap();
    let mut tx = db.begin_write().unwrap();
    for (name, entries) in trees {
        let t = tx.open_tree(name).unwrap();
        for (k, v) in entries {
            tx.put(&t, k, v).unwrap();
        }
    }
    tx.commit().unwrap();
}

/// `n` entries with keys `key00000`... and values of varied length.
pub fn entries(n: usize) -> Entries {
    (0..n)
        .map(|i| {
            (
                format!("key{i:05}").into_bytes(),
                format!("value {i} {}", "x".repeat(i % 37)).into_bytes(),
            )
        })
        .collect()
}

/// All entries of every tree, read through the engine.
pub fn contents(path: &Path) -> Vec<(String, Entries)> {
    in_process(|| contents_here(path))
}

fn contents_here(path: &Path) -> Vec<(String, Entries)> {
    let db = ironbark::Database::open_with(
        path,
        &ironbark::Options {
            create: false,
            ..Default::default()
        },
    )
    .unwrap();
    let rx = db.begin_read().unwrap();
    rx.list_trees()
        .into_iter()
        .map(|name| {
            let t = rx.tree(&name).unwrap();
            let entries = rx
                .iter(&t)
                .unwrap()
                .map(|e| {
                    let (k, v) = e.unwrap();
                    (k.to_vec(), v.to_vec())
                })
                .collect();
            (name, entries)
        })
        .collect()
}

/// stderr is one line `ironbark: ...` containing `needle`, and no panic.
pub fn assert_one_line_error(stderr: &[u8], needle: &str) {
    let s = String::from_utf8_lossy(stderr);
    assert!(s.starts_with("ironbark: "), "stderr: {s:?}");
    assert_eq!(s.trim_end().lines().count(), 1, "stderr: {s:?}");
    assert!(s.contains(needle), "stderr {s:?} lacks {needle:?}");
    assert!(!s.contains("panicked"), "stderr: {s:?}");
}

/// A section of dump text in `format=bytevalue`, as `mdb_dump` writes it.
pub fn bytevalue_section(database: Option<&str>, entries: &[(Vec<u8>, Vec<u8>)]) -> String {
    let mut s = String::from("VERSION=3\nformat=bytevalue\n");
    if let Some(d) = database {
        s += &format!("database={d}\n");
    }
    s += "type=btree\nmapsize=1048576\nmaxreaders=126\ndb_pagesize=4096\nHEADER=END\n";
    for (k, v) in entries {
        for bytes in [k, v] {
            s.push(' ');
            for b in bytes {
                s += &format!("{b:02x}");
            }
            s.push('\n');
        }
    }
    s + "DATA=END\n"
}
