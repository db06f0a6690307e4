//! Edges of a read-only process's rebuilds of logged commits
//! (`recovery::follow_log`):
//!
//! - without write access: a read-only open of a database a killed writer
//!   left logged commits in, whose data file and log are read-only, and
//!   (through a child process run as another user when the test runs as
//!   root, since root ignores permission bits) in a directory it may not
//!   write, with and without a lock file it may write. It reads every
//!   commit or fails with a clear error, never panics, and leaves the data
//!   file and the log byte for byte as they were (and creates no file);
//! - out of arena room: a read-only process whose held snapshots pin so
//!   many versions that the rebuild of the newest commit no longer fits in
//!   its page arena fails that rebuild with an error while the held
//!   snapshots read on, and rebuilds the newest commit again once they are
//!   dropped.
//!
//! The second process is this test binary re-run with a role in
//! `IRONBARK_ROE_ROLE`.

mod common;

use std::collections::BTreeMap;
use std::io::{BufReader, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use common::{assert_clean, commit_to_t, counter, dump_t, hear, log_path, read_only, temp_db};
use ironbark::{Database, Durability, Error, Options, ReadTxn};

const ROLE_ENV: &str = "IRONBARK_ROE_ROLE";
const PATH_ENV: &str = "IRONBARK_ROE_PATH";
/// The reader child's `Options::max_dirty_bytes`.
const DIRTY_ENV: &str = "IRONBARK_ROE_DIRTY";
/// The commits the reader child expects to read.
const COMMITS_ENV: &str = "IRONBARK_ROE_COMMITS";

type Model = common::Entries;

/// Keys of tree `t` loaded by `base`.
const BASE_KEYS: u64 = 3000;

/// What commit `n` does to tree `t`: sets `counter` to `n`, and puts or
/// deletes `changes` random keys (of the first `span`, and as many again
/// beyond the loaded ones when `span` is `BASE_KEYS`), with now and then a
/// value that takes overflow pages.
fn ops(n: u64, (changes, span): Shape) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    common::t_ops(0xed6e_5eed, n, changes, span)
}

/// Changes per commit, and the keys they fall on (`ops`).
type Shape = (u64, u64);

/// The data after the load and commits `0..commits` of `shape`.
fn model(commits: u64, shape: Shape) -> Model {
    common::t_model(BASE_KEYS, commits, |n| ops(n, shape))
}

/// Tree `t` of `BASE_KEYS` keys, then a checkpoint, so that what follows
/// is logged.
fn base(db: &Database) {
    common::load_t(db, BASE_KEYS);
}

fn commit(db: &Database, n: u64, shape: Shape) {
    commit_to_t(db, ops(n, shape));
}

/// `rx` reads exactly `want`: a verified scan, and lookups of every
/// seventh key.
fn assert_reads(rx: &ReadTxn, want: &Model) {
    let got = dump_t(rx);
    assert!(
        &got == want,
        "snapshot {} differs from its model: {} entries for {}",
        rx.txn_id(),
        got.len(),
        want.len()
    );
    let t = rx.tree("t").unwrap();
    for (k, v) in want.iter().step_by(7) {
        assert_eq!(rx.get(&t, k).unwrap(), Some(&v[..]));
    }
}

fn role() -> Option<String> {
    std::env::var(ROLE_ENV).ok()
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap()
}

fn child(test: &str, role: &str, path: &Path) -> Command {
    common::role_command(test, ROLE_ENV, role, PATH_ENV, path)
}

// ---------------------------------------------------------------------
// Without write access.

/// Commits of `CHANGES` changes each a killed writer makes.
const KILLED_COMMITS: u64 = 300;
const CHANGES: Shape = (8, BASE_KEYS);

/// Loads, makes `KILLED_COMMITS` logged commits and dies without a close
/// (which would checkpoint): the log holds them all.
fn killed_writer(path: &str) {
    let db = Database::open_with(
        path,
        &Options {
            durability: Durability::None,
            ..Options::default()
        },
    )
    .unwrap();
    base(&db);
    for n in 0..KILLED_COMMITS {
        commit(&db, n, CHANGES);
    }
    assert_eq!(db.counters().logged_commits, KILLED_COMMITS);
    println!("ROE done");
    std::io::stdout().flush().unwrap();
    std::process::exit(0);
}

fn kill_a_writer(test: &str, path: &Path) {
    let mut c = child(test, "killed-writer", path).spawn().unwrap();
    let mut out = BufReader::new(c.stdout.take().unwrap());
    hear(&mut out, "ROE done");
    std::io::copy(&mut out, &mut std::io::sink()).unwrap();
    assert!(c.wait().unwrap().success());
}

/// What a file is: its bytes (a hash, and its length), mode and
/// modification time.
#[derive(Debug, PartialEq, Eq)]
struct FileState {
    len: u64,
    hash: u64,
    mode: u32,
    mtime: (i64, i64),
}

/// Every file in `dir` by name. The lock file's contents are left out:
/// it is shared memory (reader slots), which every process writes.
fn dir_state(dir: &Path) -> BTreeMap<String, Option<FileState>> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().into_string().unwrap();
        let state = if name.ends_with("-lock") {
            None
        } else {
            let m = e.metadata().unwrap();
            let bytes = std::fs::read(e.path()).unwrap();
            Some(FileState {
                len: m.len(),
                hash: xxhash_rust::xxh3::xxh3_64(&bytes),
                mode: m.mode(),
                mtime: (m.mtime(), m.mtime_nsec()),
            })
        };
        out.insert(name, state);
    }
    out
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

const UNCHANGED_TEST: &str = "a_read_only_rebuild_changes_no_file_of_a_killed_writers_database";

/// A read-only process opens a database whose writer was killed with 300
/// logged commits in the log, its data file and log made read-only
/// (mode 0444): it rebuilds them (in memory, and past its dirty-page
/// budget, spilling), reads every commit, checks clean and closes, twice,
/// and the data file and the log are byte for byte, mode and modification
/// time what they were, and no file is left beside them. A writable open
/// then replays the same commits.
#[test]
fn a_read_only_rebuild_changes_no_file_of_a_killed_writers_database() {
    if role().as_deref() == Some("killed-writer") {
        return killed_writer(&env(PATH_ENV));
    }
    let t = temp_db("unchanged.ib");
    kill_a_writer(UNCHANGED_TEST, &t.path);
    let want = model(KILLED_COMMITS, CHANGES);
    chmod(&t.path, 0o444);
    chmod(&log_path(&t.path), 0o444);
    let before = dir_state(t.dir.path());
    assert!(
        before[&format!("{}-log", "unchanged.ib")]
            .as_ref()
            .unwrap()
            .len
            > 0
    );
    for max_dirty_bytes in [64 << 10, ironbark::DEFAULT_MAX_DIRTY_BYTES] {
        let ro = Database::open_with(
            &t.path,
            &Options {
                max_dirty_bytes,
                ..read_only()
            },
        )
        .unwrap();
        let rx = ro.begin_read().unwrap();
        assert_eq!(counter(&rx), KILLED_COMMITS - 1);
        assert_reads(&rx, &want);
        drop(rx);
        assert_clean(&ro, want.len());
        ro.checkpoint().unwrap();
        ro.sync().unwrap();
        if max_dirty_bytes < ironbark::DEFAULT_MAX_DIRTY_BYTES {
            assert!(ro.counters().spills > 0, "the rebuild did not spill");
        }
        drop(ro);
        assert_eq!(
            dir_state(t.dir.path()),
            before,
            "a read-only open changed a file"
        );
    }
    chmod(&t.path, 0o644);
    chmod(&log_path(&t.path), 0o644);
    let db = Database::open(&t.path).unwrap();
    assert_reads(&db.begin_read().unwrap(), &want);
    assert_clean(&db, want.len());
}

/// A read-only process that opens `PATH_ENV` (with `DIRTY_ENV` as its
/// dirty-page budget), reads and checks it, and says what happened:
/// `ROE open-err <error>`, or `ROE read <counter> <whether it is the
/// model of COMMITS_ENV commits> <check clean>`.
fn reader(path: &str) {
    let opts = Options {
        max_dirty_bytes: env(DIRTY_ENV).parse().unwrap(),
        ..read_only()
    };
    let commits: u64 = env(COMMITS_ENV).parse().unwrap();
    match Database::open_with(path, &opts) {
        Err(e) => println!("ROE open-err {e:?}"),
        Ok(db) => {
            let rx = db.begin_read().unwrap();
            let matches = dump_t(&rx) == model(commits, CHANGES);
            let n = counter(&rx);
            drop(rx);
            let clean = db.check().unwrap().is_clean();
            println!("ROE read {n} {matches} {clean}");
        }
    }
    std::io::stdout().flush().unwrap();
}

/// Runs `reader` on `path` as a user who may not write it: as `nobody`
/// when the test runs as root (who ignores permission bits), else as
/// this user. Returns what it said.
fn read_as_another_user(test: &str, path: &Path, dirty: usize, commits: u64) -> String {
    let mut c = child(test, "reader", path);
    c.env(DIRTY_ENV, dirty.to_string())
        .env(COMMITS_ENV, commits.to_string())
        .stderr(Stdio::piped());
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        c.uid(65534).gid(65534);
    }
    let out = c.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the reader failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout
        .lines()
        .find_map(|l| l.find("ROE ").map(|at| l[at + 4..].trim().to_string()));
    line.unwrap_or_else(|| panic!("the reader said nothing: {stdout}"))
}

const NO_ACCESS_TEST: &str = "a_reader_that_may_write_nothing_reads_or_fails_cleanly";

/// A read-only process that may write neither the files nor their
/// directory (files 0444, directory 0555, run as another user than
/// root). Without a lock file it reads without one: a clean database it
/// reads, the logged commits of a killed writer it cannot replay, and it
/// fails with `Locked` (a read-only filesystem takes that path too). With
/// a lock file it may write, it rebuilds them from the log, within its
/// dirty-page budget and past it (before session 27 the latter failed
/// the open with a bare `EACCES`: the spill file lives in the directory).
/// Every time the data file and the log are unchanged and no file
/// appears.
#[test]
fn a_reader_that_may_write_nothing_reads_or_fails_cleanly() {
    match role().as_deref() {
        Some("killed-writer") => return killed_writer(&env(PATH_ENV)),
        Some("reader") => return reader(&env(PATH_ENV)),
        _ => {}
    }
    let t = temp_db("noaccess.ib");
    let dir = t.dir.path();
    let lock = dir.join("noaccess.ib-lock");
    kill_a_writer(NO_ACCESS_TEST, &t.path);
    for f in [&t.path, &log_path(&t.path), &lock] {
        chmod(f, 0o444);
    }
    let small = 64 << 10;
    let big = ironbark::DEFAULT_MAX_DIRTY_BYTES;
    let want = format!("read {} true true", KILLED_COMMITS - 1);

    // With a lock file every user may write: the rebuild.
    chmod(&lock, 0o666);
    chmod(dir, 0o555);
    let before = dir_state(dir);
    for dirty in [big, small] {
        let said = read_as_another_user(NO_ACCESS_TEST, &t.path, dirty, KILLED_COMMITS);
        assert_eq!(said, want, "max_dirty_bytes {dirty}");
        assert_eq!(dir_state(dir), before, "max_dirty_bytes {dirty}");
    }

    // Without one: the lockless reader cannot read the logged commits.
    chmod(dir, 0o755);
    std::fs::remove_file(&lock).unwrap();
    chmod(dir, 0o555);
    let before = dir_state(dir);
    for dirty in [big, small] {
        let said = read_as_another_user(NO_ACCESS_TEST, &t.path, dirty, KILLED_COMMITS);
        assert_eq!(said, "open-err Locked", "max_dirty_bytes {dirty}");
        assert_eq!(dir_state(dir), before);
    }

    // A writable open replays them and closes cleanly: then the lockless
    // reader reads them.
    chmod(dir, 0o755);
    chmod(&t.path, 0o644);
    chmod(&log_path(&t.path), 0o644);
    {
        let db = Database::open(&t.path).unwrap();
        assert_eq!(counter(&db.begin_read().unwrap()), KILLED_COMMITS - 1);
    }
    let _ = std::fs::remove_file(&lock);
    chmod(&t.path, 0o444);
    if log_path(&t.path).exists() {
        chmod(&log_path(&t.path), 0o444);
    }
    chmod(dir, 0o555);
    let before = dir_state(dir);
    for dirty in [big, small] {
        let said = read_as_another_user(NO_ACCESS_TEST, &t.path, dirty, KILLED_COMMITS);
        assert_eq!(said, want, "max_dirty_bytes {dirty}");
        assert_eq!(dir_state(dir), before);
    }
    chmod(dir, 0o755);
}

// ---------------------------------------------------------------------
// Out of arena room.

/// The arena test's commits: three changes each, on the keys of about 37
/// of the tree's 110 leaves, so that the pages they changed since the
/// load (those of the newest commit in the arena) level off at about 40.
const FEW: Shape = (3, BASE_KEYS / 3);

/// A writer that does what stdin asks, a line at a time, and answers
/// `ROE ok <logged commits>`: `load`, `commits <from> <to>`, `exit`. Its
/// bounds are the defaults: it does not checkpoint by itself here.
fn serving_writer(path: &str) {
    let db = Database::open_with(
        path,
        &Options {
            durability: Durability::None,
            ..Options::default()
        },
    )
    .unwrap();
    let mut out = std::io::stdout();
    loop {
        let mut line = String::new();
        if std::io::stdin().read_line(&mut line).unwrap() == 0 {
            break;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        match words[..] {
            ["load"] => base(&db),
            ["commits", from, to] => {
                for n in from.parse().unwrap()..to.parse().unwrap() {
                    commit(&db, n, FEW);
                }
            }
            ["exit"] => break,
            _ => panic!("unknown command {line:?}"),
        }
        writeln!(out, "ROE ok {}", db.counters().logged_commits).unwrap();
        out.flush().unwrap();
    }
    drop(db);
    println!("ROE exited");
}

struct Writer {
    child: Child,
    stdin: ChildStdin,
    out: BufReader<ChildStdout>,
}

impl Writer {
    fn start(test: &str, path: &Path) -> Writer {
        let mut child = child(test, "serving-writer", path).spawn().unwrap();
        let stdin = child.stdin.take().unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        Writer { child, stdin, out }
    }

    /// Runs `command`; returns the writer's logged commits so far.
    fn ask(&mut self, command: &str) -> u64 {
        writeln!(self.stdin, "{command}").unwrap();
        self.stdin.flush().unwrap();
        hear(&mut self.out, "ROE ok ").parse().unwrap()
    }

    fn exit(mut self) {
        writeln!(self.stdin, "exit").unwrap();
        self.stdin.flush().unwrap();
        hear(&mut self.out, "ROE exited");
        std::io::copy(&mut self.out, &mut std::io::sink()).unwrap();
        assert!(self.child.wait().unwrap().success(), "the writer failed");
    }
}

/// Whether `e` is the error of a rebuild that does not fit in the arena.
fn is_arena_full(e: &Error) -> bool {
    matches!(e, Error::ArenaFull { pages: 64 })
}

const ROOM_TEST: &str = "a_rebuild_that_held_snapshots_leave_no_arena_room_for_fails_until_they_go";

/// A read-only process with a page arena of 64 pages (a quarter of its
/// 1 MiB `map_reservation`) follows a live writer's logged commits, which
/// keep about 40 pages of the tree in its arena, two commits at a time,
/// holding every snapshot it rebuilt: each pins the versions of the pages
/// it reads, until a rebuild no longer fits. That `begin_read` fails with
/// an error (again when retried, and after more commits, with no panic);
/// the held snapshots still read exactly their commits. With the newest
/// one it rebuilt still held it fails the same way (the rebuild after a
/// failed one applies every commit since the file's, on fresh pages);
/// once every snapshot is gone it reads the newest commit and follows on,
/// every `begin_read` succeeding: a rebuild of the commits since the last
/// one that no longer fits (a blob needs consecutive slots) falls back to
/// the rebuild from the file (before session 27 round 4 failed here).
#[test]
fn a_rebuild_that_held_snapshots_leave_no_arena_room_for_fails_until_they_go() {
    if role().as_deref() == Some("serving-writer") {
        return serving_writer(&env(PATH_ENV));
    }
    let t = temp_db("room.ib");
    let mut w = Writer::start(ROOM_TEST, &t.path);
    w.ask("load");
    let mut n = 40;
    assert_eq!(w.ask(&format!("commits 0 {n}")), n);
    let ro = Database::open_with(
        &t.path,
        &Options {
            map_reservation: 1 << 20,
            ..read_only()
        },
    )
    .unwrap();
    let mut held: Vec<(ReadTxn, u64)> = Vec::new();
    let mut failed = None;
    for _ in 0..40 {
        match ro.begin_read() {
            Ok(rx) => {
                assert_eq!(counter(&rx), n - 1);
                assert_reads(&rx, &model(n, FEW));
                held.push((rx, n));
            }
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
        let to = n + 2;
        assert_eq!(w.ask(&format!("commits {n} {to}")), to, "not logged");
        n = to;
    }
    let e = failed.expect("the arena never filled");
    assert!(is_arena_full(&e), "{e:?}");
    assert!(held.len() >= 2, "the first rebuilds did not fit");
    // Retried: the same error, and the held snapshots read on.
    for _ in 0..3 {
        let r = ro.begin_read();
        assert!(r.as_ref().is_err_and(is_arena_full), "{:?}", r.map(|_| ()));
    }
    for (rx, commits) in &held {
        assert_reads(rx, &model(*commits, FEW));
    }
    // More commits meanwhile: still no room.
    assert_eq!(w.ask(&format!("commits {n} {}", n + 2)), n + 2);
    n += 2;
    let r = ro.begin_read();
    assert!(r.as_ref().is_err_and(is_arena_full), "{:?}", r.map(|_| ()));
    for (rx, commits) in &held {
        assert_reads(rx, &model(*commits, FEW));
    }

    // The old snapshots go but the newest stays: still no room (a
    // rebuild after a failed one starts from the file: a second copy of
    // the 40-odd changed pages beside the ones the held snapshot pins).
    let newest = held.pop().unwrap();
    drop(held);
    let r = ro.begin_read();
    assert!(r.as_ref().is_err_and(is_arena_full), "{:?}", r.map(|_| ()));
    assert_reads(&newest.0, &model(newest.1, FEW));
    drop(newest);

    // Every snapshot gone: the newest commit is read again, then followed,
    // and it checks clean.
    for round in 0..6 {
        let rx = ro
            .begin_read()
            .unwrap_or_else(|e| panic!("round {round}, with no snapshot held: {e:?}"));
        assert_eq!(counter(&rx), n - 1);
        assert_reads(&rx, &model(n, FEW));
        drop(rx);
        assert_eq!(w.ask(&format!("commits {n} {}", n + 2)), n + 2);
        n += 2;
    }
    assert_clean(&ro, model(n, FEW).len());
    drop(ro);
    w.exit();
}

// ---------------------------------------------------------------------
// A damaged log record under a live writer.

const DAMAGE_TEST: &str =
    "a_damaged_log_record_fails_a_read_only_rebuild_and_the_writers_checkpoint_ends_it";

/// Waits at most a minute for what `f` returns, run on a thread of its
/// own: a read that never returns fails the test instead of hanging it.
fn within_a_minute<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(60))
        .expect("no answer in a minute: the read hangs")
}

/// A live writer has made 30 logged commits; a read-only process
/// followed it to the twentieth, and a byte of the 26th record in the
/// log is then flipped in place (the writer holds its commits in its
/// arena and reads no log). The follower cannot rebuild the newest commit
/// from the log: `begin_read` fails with `Corrupted` naming that record's
/// commit, again when retried while the writer publishes more commits,
/// and so does the process's next first open
/// (read-only), each within a minute (until session 59 each looked again
/// for as long as the writer made no checkpoint, spinning). The writer's
/// commits are unharmed: its close checkpoints them from memory, and a
/// read-only open then reads every one.
#[test]
fn a_damaged_log_record_fails_a_read_only_rebuild_and_the_writers_checkpoint_ends_it() {
    if role().as_deref() == Some("serving-writer") {
        return serving_writer(&env(PATH_ENV));
    }
    let t = temp_db("damaged.ib");
    let mut w = Writer::start(DAMAGE_TEST, &t.path);
    w.ask("load");
    assert_eq!(w.ask("commits 0 20"), 20);
    let ro = std::sync::Arc::new(Database::open_with(&t.path, &read_only()).unwrap());
    assert_eq!(counter(&ro.begin_read().unwrap()), 19, "followed");
    assert_eq!(w.ask("commits 20 30"), 30);
    let log = std::fs::read(log_path(&t.path)).unwrap();
    let starts = common::chain_starts(&log);
    assert_eq!(starts.len(), 30, "one record a logged commit");
    let damaged = starts[25];
    let damaged_txn = u64::from_le_bytes(log[damaged + 16..damaged + 24].try_into().unwrap());
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(log_path(&t.path))
            .unwrap();
        // A byte of the payload, past the 32-byte header.
        f.write_at(&[log[damaged + 40] ^ 0x10], (damaged + 40) as u64)
            .unwrap();
    }
    let names_the_record = |e: Error| match e {
        Error::Corrupted { detail, .. } => assert!(
            detail.contains(&format!("record of commit {damaged_txn} ")),
            "{detail}"
        ),
        e => panic!("the damaged record gave {e}"),
    };

    let mut n = 30;
    for _ in 0..3 {
        let r = ro.clone();
        match within_a_minute(move || r.begin_read().map(|rx| counter(&rx))) {
            Err(e) => names_the_record(e),
            Ok(counter) => panic!("read commit {counter} past a damaged log record"),
        }
        // The writer publishes more meanwhile: the damage stays.
        assert_eq!(w.ask(&format!("commits {n} {}", n + 1)), n + 1);
        n += 1;
    }
    // The process's first open again (its instance gone): the open
    // rebuilds the newest commit.
    drop(ro);
    let path = t.path.clone();
    match within_a_minute(move || Database::open_with(&path, &read_only()).map(|_| ())) {
        Err(e) => names_the_record(e),
        Ok(()) => panic!("a read-only open read past a damaged log record"),
    }

    w.exit();
    let ro = Database::open_with(&t.path, &read_only()).unwrap();
    let rx = ro.begin_read().unwrap();
    assert_eq!(counter(&rx), n - 1);
    assert_reads(&rx, &model(n, FEW));
    drop(rx);
    assert_clean(&ro, model(n, FEW).len());
}
