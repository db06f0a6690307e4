//! The CLI on databases whose newest commits are logged commits
//! (`Options::logged_commits`, the default): only in the redo log and in
//! the memory of the process that made them. Every read command must see
//! them, change no file, and fail (when it must) with one clear line;
//! `copy` must carry them into a valid database with nothing to replay.
//!
//! Two sources of such a database: a writer killed (SIGKILL) with logged
//! commits pending, and a writer process alive and committing while the
//! command runs. The writers are helper processes: this test binary run
//! again with `ROLE_ENV` set.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use common::{assert_one_line_error, bytevalue_section, entries, in_process, make_db, spawn_guard};
use serde_json::Value;

const ROLE_ENV: &str = "IRONBARK_CLI_LOGGED_ROLE";
const DB_ENV: &str = "IRONBARK_CLI_LOGGED_DB";

/// Entries of the tree `bulk`, loaded (and checkpointed) before the
/// writer starts.
const BULK: usize = 5000;
/// Commits the killed writer makes, all logged.
const KILLED_COMMITS: u64 = 300;

fn key(n: u64) -> Vec<u8> {
    format!("k{n:06}").into_bytes()
}

fn value(n: u64) -> Vec<u8> {
    format!("v{n}-").repeat((n % 7 + 1) as usize).into_bytes()
}

/// Commit `n` (from 1): puts `key(n)` into `log` and `n` as `counter`
/// into `meta`; every fifth commit also deletes the previous key, and
/// commit 7 makes the tree `late` with one entry.
fn commit(db: &ironbark::Database, n: u64) {
    let mut tx = db.begin_write().unwrap();
    let log = tx.open_tree("log").unwrap();
    let meta = tx.open_tree("meta").unwrap();
    tx.put(&log, &key(n), &value(n)).unwrap();
    if n.is_multiple_of(5) {
        tx.delete(&log, &key(n - 1)).unwrap();
    }
    tx.put(&meta, b"counter", n.to_string().as_bytes()).unwrap();
    if n == 7 {
        let late = tx.open_tree("late").unwrap();
        tx.put(&late, b"made", b"at 7").unwrap();
    }
    tx.commit().unwrap();
}

type Tree = Vec<(Vec<u8>, Vec<u8>)>;

/// Every tree after commit `c`, by name.
fn model(c: u64) -> BTreeMap<String, Tree> {
    let mut log = BTreeMap::new();
    for n in 1..=c {
        log.insert(key(n), value(n));
        if n % 5 == 0 {
            log.remove(&key(n - 1));
        }
    }
    let mut all = BTreeMap::new();
    all.insert("bulk".to_string(), entries(BULK));
    all.insert("log".to_string(), log.into_iter().collect());
    all.insert(
        "meta".to_string(),
        vec![(b"counter".to_vec(), c.to_string().into_bytes())],
    );
    if c >= 7 {
        all.insert(
            "late".to_string(),
            vec![(b"made".to_vec(), b"at 7".to_vec())],
        );
    }
    all
}

fn total_entries(all: &BTreeMap<String, Tree>) -> usize {
    all.values().map(Vec::len).sum()
}

/// The trees of a `dump --all` text (format=bytevalue).
fn parse_dump(text: &[u8]) -> BTreeMap<String, Tree> {
    let text = std::str::from_utf8(text).unwrap();
    let mut all = BTreeMap::new();
    let mut name = "main".to_string();
    let mut data: Option<Vec<Vec<u8>>> = None;
    for line in text.lines() {
        if let Some(d) = &mut data {
            if line == "DATA=END" {
                let pairs: Tree = d.chunks(2).map(|p| (p[0].clone(), p[1].clone())).collect();
                all.insert(std::mem::take(&mut name), pairs);
                name = "main".to_string();
                data = None;
            } else {
                let hex = line.strip_prefix(' ').expect("a data line");
                d.push(
                    (0..hex.len())
                        .step_by(2)
                        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                        .collect(),
                );
            }
        } else if let Some(n) = line.strip_prefix("database=") {
            name = n.to_string();
        } else if line == "HEADER=END" {
            data = Some(Vec::new());
        }
    }
    assert!(data.is_none(), "a section without DATA=END");
    all
}

/// The commit a set of trees is (it must be exactly `model` of it).
fn counter_of(all: &BTreeMap<String, Tree>) -> u64 {
    let c: u64 = std::str::from_utf8(&all["meta"][0].1)
        .unwrap()
        .parse()
        .unwrap();
    assert!(*all == model(c), "the trees are not those of commit {c}");
    c
}

// ---------------------------------------------------------------------
// Helper processes.

/// Runs the helper role named in `ROLE_ENV`, if any.
#[test]
fn helper_process_if_asked() {
    let (Ok(role), Ok(path)) = (std::env::var(ROLE_ENV), std::env::var(DB_ENV)) else {
        return;
    };
    match role.as_str() {
        // `KILLED_COMMITS` logged commits, then waits to be killed.
        "killed" => {
            let db = ironbark::Database::open(&path).unwrap();
            for n in 1..=KILLED_COMMITS {
                commit(&db, n);
            }
            println!("COMMITTED logged={}", db.counters().logged_commits);
            std::io::stdout().flush().unwrap();
            let mut sink = Vec::new();
            let _ = std::io::stdin().read_to_end(&mut sink);
            // Never closes cleanly: the parent kills it first.
            std::thread::sleep(std::time::Duration::from_secs(3600));
        }
        // Commits in a thread until stdin closes; a line `at` on stdin is
        // answered with `AT n`, n the last commit returned.
        "live" => {
            let db = Arc::new(ironbark::Database::open(&path).unwrap());
            let stop = Arc::new(AtomicBool::new(false));
            let last = Arc::new(AtomicU64::new(0));
            let (d, s, l) = (db.clone(), stop.clone(), last.clone());
            let worker = std::thread::spawn(move || {
                let mut n = 0;
                while n < 10 || !s.load(Ordering::SeqCst) {
                    n += 1;
                    commit(&d, n);
                    l.store(n, Ordering::SeqCst);
                    std::thread::sleep(std::time::Duration::from_micros(300));
                }
                n
            });
            while last.load(Ordering::SeqCst) < 10 {
                std::thread::yield_now();
            }
            println!("READY");
            std::io::stdout().flush().unwrap();
            for line in std::io::stdin().lock().lines() {
                if line.unwrap().trim() == "at" {
                    println!("AT {}", last.load(Ordering::SeqCst));
                    std::io::stdout().flush().unwrap();
                }
            }
            stop.store(true, Ordering::SeqCst);
            let n = worker.join().unwrap();
            println!("DONE {n} logged={}", db.counters().logged_commits);
        }
        other => panic!("unknown role {other}"),
    }
}

struct Helper {
    child: Child,
    lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
}

impl Helper {
    fn spawn(role: &str, db: &Path) -> Helper {
        let guard = spawn_guard();
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "helper_process_if_asked",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(ROLE_ENV, role)
            .env(DB_ENV, db)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        drop(guard);
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Helper { child, lines }
    }

    /// The next line starting with `prefix`, without it.
    fn hear(&mut self, prefix: &str) -> String {
        for l in self.lines.by_ref() {
            let l = l.unwrap();
            // (libtest's "test ... " may come first on the line.)
            if let Some(at) = l.find(prefix) {
                return l[at + prefix.len()..].trim().to_string();
            }
        }
        panic!("the helper ended before saying {prefix:?}");
    }

    /// The last commit the live writer made.
    fn at(&mut self) -> u64 {
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "at").unwrap();
        stdin.flush().unwrap();
        self.hear("AT ").parse().unwrap()
    }

    fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// Stops the live writer: (commits, logged commits).
    fn stop(mut self) -> (u64, u64) {
        drop(self.child.stdin.take());
        let said = self.hear("DONE ");
        assert!(self.child.wait().unwrap().success());
        let (n, logged) = said.split_once(" logged=").unwrap();
        (n.parse().unwrap(), logged.parse().unwrap())
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A database of `bulk` (checkpointed) plus `KILLED_COMMITS` logged
/// commits of a writer killed with SIGKILL: they are only in the log.
fn killed_writer_db(dir: &Path, name: &str) -> PathBuf {
    let db = dir.join(name);
    make_db(&db, &[("bulk", entries(BULK))]);
    let mut w = Helper::spawn("killed", &db);
    let logged: u64 = w.hear("COMMITTED logged=").parse().unwrap();
    assert_eq!(logged, KILLED_COMMITS, "every commit was logged");
    w.kill();
    assert!(log_of(&db).metadata().unwrap().len() > 0);
    db
}

fn log_of(db: &Path) -> PathBuf {
    let mut s = db.as_os_str().to_owned();
    s.push("-log");
    PathBuf::from(s)
}

// ---------------------------------------------------------------------
// Running the CLI.

fn bin() -> PathBuf {
    assert_cmd::cargo::cargo_bin("ironbark")
}

/// Runs `ironbark args...` (as `uid` when given), with `stdin`.
fn run_as(uid: Option<u32>, args: &[&std::ffi::OsStr], stdin: &[u8]) -> Output {
    let _g = spawn_guard();
    let mut c = Command::new(bin());
    c.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(uid) = uid {
        c.uid(uid).gid(uid);
    }
    let mut child = c.spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin).unwrap();
    drop(input);
    child.wait_with_output().unwrap()
}

fn run(args: &[&std::ffi::OsStr]) -> Output {
    run_as(None, args, b"")
}

/// stdout of a run that must succeed, with no panic.
fn ok(out: Output, what: &str) -> Vec<u8> {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{what} failed ({:?}): {err}",
        out.status.code()
    );
    assert!(!err.contains("panicked"), "{what}: {err}");
    out.stdout
}

fn os(s: &str) -> &std::ffi::OsStr {
    s.as_ref()
}

/// What a file is: its bytes, mode and modification time.
type FileState = (Vec<u8>, u32, (i64, i64));

/// Every file in `dir` by name; the lock file's contents (shared memory
/// every process writes) left out.
fn dir_state(dir: &Path) -> BTreeMap<String, Option<FileState>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let name = e.file_name().into_string().unwrap();
            let state = (!name.ends_with("-lock")).then(|| {
                let m = e.metadata().unwrap();
                (
                    std::fs::read(e.path()).unwrap(),
                    m.mode(),
                    (m.mtime(), m.mtime_nsec()),
                )
            });
            (name, state)
        })
        .collect()
}

/// The commit `stat --json` shows: its `log`, `meta` and `bulk` trees'
/// entries must be those of some commit at least `at` (returned).
fn stat_commit(db: &Path, uid: Option<u32>, at: u64) -> u64 {
    let out = ok(
        run_as(uid, &[os("stat"), os("--json"), db.as_os_str()], b""),
        "stat",
    );
    let v: Value = serde_json::from_slice(&out).unwrap();
    let trees: BTreeMap<String, u64> = v["trees"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_string(),
                t["entries"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(trees["bulk"], BULK as u64);
    assert_eq!(trees["meta"], 1);
    let log = trees["log"];
    // len(model(c)["log"]) = c - c / 5: the smallest such c.
    let c = (at..).find(|&c| c - c / 5 >= log).unwrap();
    assert_eq!(c - c / 5, log, "stat: {v}");
    assert!(c >= at, "stat shows commit {c}, older than {at}");
    assert_eq!(trees.contains_key("late"), c >= 7);
    assert_eq!(
        v["used_pages"].as_u64().unwrap() + v["free_pages"].as_u64().unwrap(),
        v["page_count"].as_u64().unwrap(),
        "stat: {v}"
    );
    c
}

/// `dump --all`: the commit it holds, at least `at`.
fn dump_commit(db: &Path, uid: Option<u32>, at: u64) -> u64 {
    let out = ok(
        run_as(uid, &[os("dump"), os("--all"), db.as_os_str()], b""),
        "dump",
    );
    let mut all = parse_dump(&out);
    // (What `load` added: the tests check it apart.)
    all.remove("loaded");
    let c = counter_of(&all);
    assert!(c >= at, "dump shows commit {c}, older than {at}");
    c
}

/// `check`: clean, with the entries of a commit at least `at`.
fn check_ok(db: &Path, uid: Option<u32>, at: u64) {
    let out = ok(run_as(uid, &[os("check"), db.as_os_str()], b""), "check");
    let s = String::from_utf8_lossy(&out);
    let n: usize = s
        .split(" trees, ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("check said {s:?}"));
    assert!(n >= total_entries(&model(at)), "check: {s}");
}

/// `copy` (or `copy --compact`) of `src` to `dst`: the copy is a valid
/// database holding one whole commit at least `at`, with no log to
/// replay. Returns the commit.
fn copy_and_verify(src: &Path, dst: &Path, compact: bool, uid: Option<u32>, at: u64) -> u64 {
    let mut args = vec![os("copy")];
    if compact {
        args.push(os("--compact"));
    }
    args.extend([src.as_os_str(), dst.as_os_str()]);
    let said = String::from_utf8(ok(run_as(uid, &args, b""), "copy")).unwrap();
    assert!(said.starts_with("copied "), "{said}");
    // Nothing to replay: no log beside the copy (or an empty one).
    assert!(
        log_of(dst).metadata().map_or(0, |m| m.len()) == 0,
        "the copy has a redo log to replay"
    );
    // A valid database that `check` accepts, holding one whole commit.
    check_ok(dst, None, at);
    let c = dump_commit(dst, None, at);
    // The copy's own file holds that commit: an open that may write
    // finds nothing to replay and reads it.
    in_process(|| {
        let db = ironbark::Database::open_with(
            dst,
            &ironbark::Options {
                create: false,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(db.counters().logged_commits, 0);
        let rx = db.begin_read().unwrap();
        let meta = rx.tree("meta").unwrap();
        assert_eq!(
            rx.get(&meta, b"counter").unwrap(),
            Some(c.to_string().as_bytes())
        );
    });
    c
}

// ---------------------------------------------------------------------
// A killed writer.

/// A killed writer's log with the record of commit 101 damaged, which the
/// intact, durable records after it prove was durable: `check` reports it
/// (exit 1, the open's error as its finding, naming the way out), a plain
/// `copy` fails and creates nothing, and `copy --salvage-damaged-log`
/// copies commit 100 into a database with nothing to replay; the source
/// and its log are left as they were.
#[test]
fn a_damaged_durable_log_record_is_reported_and_copy_salvages_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = killed_writer_db(dir.path(), "damaged.ib");
    let mut log = std::fs::read(log_of(&db)).unwrap();
    let mut at = 0usize;
    for _ in 0..100 {
        assert_eq!(&log[at + 8..at + 12], b"IBLG");
        let len = u32::from_le_bytes(log[at + 12..at + 16].try_into().unwrap()) as usize;
        at += (32 + len).next_multiple_of(8);
    }
    log[at + 40] ^= 0x55;
    std::fs::write(log_of(&db), &log).unwrap();
    // The data file and the log (an open that fails may take the lock
    // file, which holds no durable state, away).
    let files = || {
        let mut state = dir_state(dir.path());
        state.retain(|name, _| !name.ends_with("-lock"));
        state
    };
    let before = files();

    let out = run(&[os("check"), db.as_os_str()]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "check: {said}");
    assert!(said.contains("salvage_damaged_log"), "check: {said}");
    let out_dir = tempfile::tempdir().unwrap();
    let dst = out_dir.path().join("copy.ib");
    let out = run(&[os("copy"), db.as_os_str(), dst.as_os_str()]);
    assert!(
        !out.status.success(),
        "a plain copy of a damaged log succeeded"
    );
    assert!(!dst.exists(), "a failed copy created its file");
    assert_eq!(files(), before, "the failed commands changed a file");

    let said = String::from_utf8(ok(
        run(&[
            os("copy"),
            os("--salvage-damaged-log"),
            db.as_os_str(),
            dst.as_os_str(),
        ]),
        "copy --salvage-damaged-log",
    ))
    .unwrap();
    assert!(said.starts_with("copied "), "{said}");
    assert!(
        log_of(&dst).metadata().map_or(0, |m| m.len()) == 0,
        "the copy has a redo log to replay"
    );
    assert_eq!(dump_commit(&dst, None, 100), 100);
    check_ok(&dst, None, 100);
    assert_eq!(files(), before, "the salvaging copy changed the source");
}

/// Every read command on a database whose writer was killed with 300
/// logged commits pending sees the newest of them, and leaves the data
/// file and the log byte for byte as they were; `copy` and `copy
/// --compact` carry all of them; then `load` (a writer) replays them and
/// adds its own.
#[test]
fn read_commands_see_a_killed_writers_logged_commits_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = killed_writer_db(dir.path(), "killed.ib");
    let out_dir = tempfile::tempdir().unwrap();
    let before = dir_state(dir.path());
    let unchanged = |what: &str| {
        assert_eq!(dir_state(dir.path()), before, "{what} changed a file");
    };
    let n = KILLED_COMMITS;

    for round in 0..2 {
        assert_eq!(stat_commit(&db, None, n), n);
        unchanged("stat");
        let out = ok(
            run(&[os("stat"), os("--tree"), os("log"), db.as_os_str()]),
            "stat --tree",
        );
        assert!(
            String::from_utf8_lossy(&out).contains(&format!("entries         {}\n", n - n / 5)),
            "{}",
            String::from_utf8_lossy(&out)
        );
        unchanged("stat --tree");
        assert_eq!(dump_commit(&db, None, n), n);
        unchanged("dump");
        let f = out_dir.path().join(format!("late-{round}.txt"));
        ok(
            run(&[
                os("dump"),
                os("--tree"),
                os("late"),
                os("-f"),
                f.as_os_str(),
                db.as_os_str(),
            ]),
            "dump -f",
        );
        assert_eq!(
            parse_dump(&std::fs::read(&f).unwrap())["late"],
            model(n)["late"]
        );
        unchanged("dump -f");
        check_ok(&db, None, n);
        unchanged("check");
        let out = ok(
            run(&[os("readers"), os("--json"), db.as_os_str()]),
            "readers",
        );
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["last_txn_id"], stat_json(&db)["last_txn_id"]);
        unchanged("readers");
        for compact in [false, true] {
            let dst = out_dir.path().join(format!("copy-{round}-{compact}.ib"));
            assert_eq!(copy_and_verify(&db, &dst, compact, None, n), n);
            unchanged("copy");
        }
    }

    // A writer: `load` replays the log and adds its entries.
    let input = bytevalue_section(Some("loaded"), &entries(10));
    ok(
        run_as(None, &[os("load"), db.as_os_str()], input.as_bytes()),
        "load",
    );
    let out = ok(run(&[os("dump"), os("--all"), db.as_os_str()]), "dump");
    let mut all = parse_dump(&out);
    assert_eq!(all.remove("loaded").unwrap(), entries(10));
    assert_eq!(counter_of(&all), n);
    check_ok(&db, None, n);
}

fn stat_json(db: &Path) -> Value {
    serde_json::from_slice(&ok(
        run(&[os("stat"), os("--json"), db.as_os_str()]),
        "stat",
    ))
    .unwrap()
}

// ---------------------------------------------------------------------
// A live writer.

/// While a writer process keeps making logged commits, every read
/// command sees at least the newest commit made before it started, and
/// each copy holds one whole commit, at least that one, with nothing to
/// replay; `load` slips in between the commits.
#[test]
fn read_commands_and_copies_beside_a_live_logging_writer() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("live.ib");
    make_db(&db, &[("bulk", entries(BULK))]);
    let out_dir = tempfile::tempdir().unwrap();
    let mut w = Helper::spawn("live", &db);
    w.hear("READY");

    let mut seen = Vec::new();
    for round in 0..3 {
        let at = w.at();
        seen.push(stat_commit(&db, None, at));
        let at = w.at();
        seen.push(dump_commit(&db, None, at));
        let at = w.at();
        check_ok(&db, None, at);
        ok(run(&[os("readers"), db.as_os_str()]), "readers");
        for compact in [false, true] {
            let at = w.at();
            let dst = out_dir.path().join(format!("copy-{round}-{compact}.ib"));
            seen.push(copy_and_verify(&db, &dst, compact, None, at));
        }
    }
    let input = bytevalue_section(Some("loaded"), &entries(10));
    ok(
        run_as(
            None,
            &[os("load"), os("--wait"), db.as_os_str()],
            input.as_bytes(),
        ),
        "load",
    );
    let at = w.at();
    seen.push(dump_commit(&db, None, at));
    let (commits, logged) = w.stop();
    assert!(logged > 0, "the writer made no logged commit");
    assert!(seen.iter().all(|&c| c <= commits), "{seen:?} of {commits}");

    let out = ok(run(&[os("dump"), os("--all"), db.as_os_str()]), "dump");
    let mut all = parse_dump(&out);
    assert_eq!(all.remove("loaded").unwrap(), entries(10));
    assert_eq!(counter_of(&all), commits);
    check_ok(&db, None, commits);
}

// ---------------------------------------------------------------------
// Without write permission.

/// A user other than root (who ignores permission bits): `nobody`, or
/// this user when the tests do not run as root.
fn other_user() -> Option<u32> {
    let euid = std::fs::metadata("/proc/self").unwrap().uid();
    (euid == 0).then_some(65534)
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A database whose writer was killed with logged commits pending, in a
/// directory and files the CLI's user may not write. With a lock file it
/// may write, every read command sees the commits and changes nothing;
/// without one (it cannot create it), they cannot be read: the commands
/// fail with one line that says why, and change nothing. `load` fails
/// with one line naming what it may not write.
#[test]
fn read_commands_without_write_permission() {
    let user = other_user();
    let top = tempfile::tempdir().unwrap();
    chmod(top.path(), 0o755);
    let dir = top.path().join("ro");
    std::fs::create_dir(&dir).unwrap();
    let db = killed_writer_db(&dir, "ro.ib");
    let lock = {
        let mut s = db.as_os_str().to_owned();
        s.push("-lock");
        PathBuf::from(s)
    };
    // Where the copies go: a directory the user may write.
    let out = top.path().join("out");
    std::fs::create_dir(&out).unwrap();
    if let Some(uid) = user {
        std::os::unix::fs::chown(&out, Some(uid), Some(uid)).unwrap();
    }
    for f in [&db, &log_of(&db), &lock] {
        chmod(f, 0o444);
    }
    let n = KILLED_COMMITS;

    // A lock file everyone may write: the commits are read.
    chmod(&lock, 0o666);
    chmod(&dir, 0o555);
    let before = dir_state(&dir);
    assert_eq!(stat_commit(&db, user, n), n);
    assert_eq!(dump_commit(&db, user, n), n);
    check_ok(&db, user, n);
    ok(
        run_as(user, &[os("readers"), db.as_os_str()], b""),
        "readers",
    );
    for compact in [false, true] {
        let dst = out.join(format!("copy-{compact}.ib"));
        assert_eq!(copy_and_verify(&db, &dst, compact, user, n), n);
    }
    assert_eq!(dir_state(&dir), before);

    // `load` may not write: one line, nothing changed.
    let input = bytevalue_section(Some("loaded"), &entries(3));
    let load = run_as(user, &[os("load"), db.as_os_str()], input.as_bytes());
    let clear = run_as(
        user,
        &[os("readers"), os("--clear-stale"), db.as_os_str()],
        b"",
    );
    for o in [&load, &clear] {
        assert_eq!(o.status.code(), Some(1));
        assert_one_line_error(&o.stderr, "ro.ib: Permission denied");
        assert_one_line_error(&o.stderr, "this command writes the database");
        // (Not the engine's hint for programs: "Options::read_only".)
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !err.contains("Options::") && !err.contains("os error"),
            "{err}"
        );
    }
    assert_eq!(dir_state(&dir), before);

    // No lock file, and none can be made: the logged commits cannot be
    // read without replaying them, which needs write access.
    chmod(&dir, 0o755);
    std::fs::remove_file(&lock).unwrap();
    chmod(&dir, 0o555);
    let before = dir_state(&dir);
    let nolock = out.join("nolock.ib");
    for args in [
        vec![os("stat"), db.as_os_str()],
        vec![os("dump"), os("--all"), db.as_os_str()],
        vec![os("check"), db.as_os_str()],
        vec![os("readers"), db.as_os_str()],
        vec![os("copy"), db.as_os_str(), nolock.as_os_str()],
    ] {
        let o = run_as(user, &args, b"");
        assert!(!o.status.success(), "{args:?} succeeded");
        assert_one_line_error(&o.stderr, "redo log");
        assert!(o.stdout.is_empty() || args[0] == "check", "{args:?}");
        assert_eq!(dir_state(&dir), before, "{args:?}");
    }
    assert!(!nolock.exists());

    // Once an open that may write has replayed the log (and closed), the
    // same user reads without a lock file.
    chmod(&dir, 0o755);
    chmod(&db, 0o644);
    chmod(&log_of(&db), 0o644);
    in_process(|| drop(ironbark::Database::open(&db).unwrap()));
    let _ = std::fs::remove_file(&lock);
    chmod(&db, 0o444);
    if log_of(&db).exists() {
        chmod(&log_of(&db), 0o444);
    }
    chmod(&dir, 0o555);
    let before = dir_state(&dir);
    assert_eq!(stat_commit(&db, user, n), n);
    assert_eq!(dump_commit(&db, user, n), n);
    check_ok(&db, user, n);
    let dst = out.join("replayed.ib");
    assert_eq!(copy_and_verify(&db, &dst, false, user, n), n);
    assert_eq!(dir_state(&dir), before);

    // A data file the user may not even read: one line, no hint that
    // only a program could follow.
    chmod(&db, 0o000);
    for cmd in ["stat", "dump", "check"] {
        let o = run_as(user, &[os(cmd), db.as_os_str()], b"");
        assert!(!o.status.success(), "{cmd}");
        assert_one_line_error(&o.stderr, "ro.ib: Permission denied");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !err.contains("Options::") && !err.contains("os error"),
            "{err}"
        );
    }
    chmod(&db, 0o444);
    chmod(&dir, 0o755);
}
