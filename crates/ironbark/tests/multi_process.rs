//! Many processes on one database, with real processes (this test binary
//! re-run as a child with a role in `IRONBARK_MP_ROLE`): a writer and
//! readers running at once, SIGKILL of a writer mid-transaction and of
//! readers holding snapshots, two processes taking turns as writer (also
//! with branch regions, each placing branches in the other's), a file
//! grown by another process, and read-only opens (with and without a usable
//! lock file), also by other users (`setpriv`, needs root as CI has).
//! `check()` passes after each.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use common::temp_db;
use ironbark::{Database, Durability, Error, Options};

const ROLE_ENV: &str = "IRONBARK_MP_ROLE";
const PATH_ENV: &str = "IRONBARK_MP_PATH";

/// Keys of the invariant: every commit sets all of them to its number.
const KEYS: u64 = 16;
const WRITER_COMMITS: u64 = 300;

/// Runs this test binary's `test` as a child in `role`.
fn spawn(test: &str, role: &str, path: &Path) -> Child {
    spawn_as(test, role, path, None)
}

/// Runs this test binary's `test` as a child in `role`, as user (and
/// group) `uid` if given, with no supplementary groups.
/// Held while this file's tests copy a binary or start a process: a child
/// forked by one test while another's copy of the test binary still has its
/// write descriptor open would hold that descriptor until its exec, and
/// the copy's own exec would fail with "Text file busy" (`ETXTBSY`).
static SPAWN: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn spawn_as(test: &str, role: &str, path: &Path, uid: Option<u32>) -> Child {
    let _one_at_a_time = SPAWN.lock().unwrap_or_else(|e| e.into_inner());
    let mut exe = std::env::current_exe().unwrap();
    let mut command = match uid {
        None => Command::new(exe),
        Some(uid) => {
            // The build directory may be out of the other user's reach: run
            // a copy that sits beside the database.
            let copy = path.with_file_name("test-binary");
            if !copy.exists() {
                std::fs::copy(&exe, &copy).unwrap();
                chmod(&copy, 0o755);
            }
            exe = copy;
            let mut c = Command::new("setpriv");
            c.arg(format!("--reuid={uid}"))
                .arg(format!("--regid={uid}"))
                .arg("--clear-groups")
                .arg(exe);
            c
        }
    };
    command
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(ROLE_ENV, role)
        .env(PATH_ENV, path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn child")
}

/// The child's role, if this process is a child.
fn role() -> Option<(String, PathBuf)> {
    let role = std::env::var(ROLE_ENV).ok()?;
    let path = PathBuf::from(std::env::var(PATH_ENV).expect("path"));
    Some((role, path))
}

/// Tells the parent something (one line on stdout).
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    // The test harness prints its own lines too: tag ours.
    writeln!(out, "MP: {line}").unwrap();
    out.flush().unwrap();
}

/// Waits for the child's next `say` line.
fn hear(out: &mut BufReader<ChildStdout>) -> String {
    let mut line = String::new();
    loop {
        line.clear();
        let n = out.read_line(&mut line).expect("read child stdout");
        assert!(n > 0, "child exited before saying anything");
        // The harness may have begun the line ("test name ... ").
        if let Some(at) = line.find("MP: ") {
            return line[at + 4..].trim_end().to_string();
        }
    }
}

fn wait_ok(mut child: Child, what: &str) {
    let status = child.wait().unwrap();
    assert!(status.success(), "{what} failed: {status}");
}

fn kill(child: &mut Child) {
    child.kill().unwrap();
    child.wait().unwrap();
}

fn u64_of(v: &[u8]) -> u64 {
    u64::from_le_bytes(v.try_into().expect("8-byte value"))
}

fn key(i: u64) -> Vec<u8> {
    format!("k{i:04}").into_bytes()
}

/// Every key of the invariant holds the same number; returns it.
fn consistent_value(rx: &ironbark::ReadTxn) -> u64 {
    let t = rx.tree("t").unwrap();
    let first = u64_of(rx.get(&t, &key(0)).unwrap().unwrap());
    for i in 1..KEYS {
        let v = u64_of(rx.get(&t, &key(i)).unwrap().unwrap());
        assert_eq!(v, first, "snapshot {} is torn at key {i}", rx.txn_id());
    }
    first
}

fn create_invariant_db(path: &Path) {
    let db = Database::open(path).unwrap();
    let mut tx = db.begin_write().unwrap();
    let t = tx.open_tree("t").unwrap();
    for i in 0..KEYS {
        tx.put(&t, &key(i), &0u64.to_le_bytes()).unwrap();
    }
    tx.commit().unwrap();
}

/// Commits 1..=WRITER_COMMITS, each setting every key to its number, with
/// churn (a value of 2 KiB under a rotating key) so pages are freed and
/// reused; most commits without sync.
fn writer_role(path: &Path) {
    let db = Database::open(path).unwrap();
    say("open");
    for n in 1..=WRITER_COMMITS {
        let mut tx = db.begin_write().unwrap();
        tx.set_durability(if n % 10 == 0 {
            Durability::Immediate
        } else {
            Durability::None
        });
        let t = tx.open_tree("t").unwrap();
        for i in 0..KEYS {
            tx.put(&t, &key(i), &n.to_le_bytes()).unwrap();
        }
        tx.put(
            &t,
            format!("churn{}", n % 7).as_bytes(),
            &vec![n as u8; 2048],
        )
        .unwrap();
        tx.commit().unwrap();
    }
    say("done");
}

/// Reads until it sees the writer's last commit; every snapshot must be
/// consistent, and snapshots held across many commits must not change.
fn reader_role(path: &Path) {
    let db = Database::open(path).unwrap();
    say("open");
    let mut held: Vec<(ironbark::ReadTxn, u64)> = Vec::new();
    let mut seen = 0u64;
    let mut snapshots = 0u64;
    let deadline = Instant::now() + Duration::from_secs(120);
    while seen < WRITER_COMMITS {
        assert!(
            Instant::now() < deadline,
            "the writer's commits never arrived"
        );
        let rx = db.begin_read().unwrap();
        let v = consistent_value(&rx);
        assert!(v >= seen, "snapshots went back in time: {v} after {seen}");
        seen = v;
        snapshots += 1;
        if snapshots.is_multiple_of(50) {
            held.push((rx, v));
            if held.len() > 3 {
                held.remove(0);
            }
        }
        for (old, value) in &held {
            assert_eq!(consistent_value(old), *value, "a held snapshot changed");
        }
    }
    say(&format!("saw {snapshots} snapshots"));
}

#[test]
fn writer_and_reader_processes_see_only_whole_commits() {
    if let Some((role, path)) = role() {
        match role.as_str() {
            "writer" => writer_role(&path),
            "reader" => reader_role(&path),
            other => panic!("unknown role {other}"),
        }
        return;
    }
    let t = temp_db("mp.ib");
    create_invariant_db(&t.path);
    let test = "writer_and_reader_processes_see_only_whole_commits";
    let mut readers: Vec<Child> = (0..2).map(|_| spawn(test, "reader", &t.path)).collect();
    // Kept open until the children exit: they say more later.
    let mut outs = Vec::new();
    for r in &mut readers {
        let mut out = BufReader::new(r.stdout.take().unwrap());
        assert_eq!(hear(&mut out), "open");
        outs.push(out);
    }
    let writer = spawn(test, "writer", &t.path);
    // The parent reads too, in its own process.
    let db = Database::open(&t.path).unwrap();
    let mut last = 0;
    while last < WRITER_COMMITS {
        let rx = db.begin_read().unwrap();
        last = consistent_value(&rx);
    }
    wait_ok(writer, "writer process");
    for (r, mut out) in readers.into_iter().zip(outs) {
        assert!(hear(&mut out).starts_with("saw "));
        wait_ok(r, "reader process");
    }
    db.check().unwrap();
    drop(db);
    let db = Database::open(&t.path).unwrap();
    assert_eq!(consistent_value(&db.begin_read().unwrap()), WRITER_COMMITS);
    db.check().unwrap();
}

/// Begins a write, puts a lot, says so, and waits to be killed.
fn stuck_writer_role(path: &Path) {
    let db = Database::open(path).unwrap();
    let mut tx = db.begin_write().unwrap();
    let t = tx.open_tree("t").unwrap();
    for i in 0..5000u64 {
        tx.put(&t, format!("partial{i:06}").as_bytes(), &[7u8; 100])
            .unwrap();
    }
    say("in-txn");
    std::thread::sleep(Duration::from_secs(600));
}

/// Commits in a loop until killed, saying each commit number.
fn looping_writer_role(path: &Path) {
    let db = Database::open(path).unwrap();
    say("open");
    for n in 1u64.. {
        let mut tx = db.begin_write().unwrap();
        let t = tx.open_tree("t").unwrap();
        for i in 0..KEYS {
            tx.put(&t, &key(i), &n.to_le_bytes()).unwrap();
        }
        tx.put(&t, format!("big{}", n % 5).as_bytes(), &vec![1u8; 20_000])
            .unwrap();
        tx.commit().unwrap();
    }
}

#[test]
fn sigkill_of_a_writer_releases_the_lock_and_hides_its_transaction() {
    if let Some((role, path)) = role() {
        match role.as_str() {
            "stuck" => stuck_writer_role(&path),
            "looping" => looping_writer_role(&path),
            other => panic!("unknown role {other}"),
        }
        return;
    }
    let test = "sigkill_of_a_writer_releases_the_lock_and_hides_its_transaction";
    let t = temp_db("kill.ib");
    create_invariant_db(&t.path);
    let db = Database::open(&t.path).unwrap();
    let before = db.begin_read().unwrap();

    let mut stuck = spawn(test, "stuck", &t.path);
    assert_eq!(
        hear(&mut BufReader::new(stuck.stdout.take().unwrap())),
        "in-txn"
    );
    assert!(matches!(db.try_begin_write(), Err(Error::Locked)));
    // A thread waiting for the lock (asleep on it) takes it over when the
    // holder dies; the dead writer's transaction never happened.
    let waiter = {
        let db = db.clone();
        std::thread::spawn(move || {
            let mut tx = db
                .begin_write()
                .expect("the dead writer's lock is taken over");
            let tr = tx.open_tree("t").unwrap();
            assert_eq!(tx.get(&tr, b"partial000000").unwrap(), None);
            tx.put(&tr, b"after", b"1").unwrap();
            tx.commit().unwrap();
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        !waiter.is_finished(),
        "the waiter got the lock of a live holder"
    );
    kill(&mut stuck);
    waiter.join().unwrap();

    // Kill a writer in the middle of committing, many times; this process
    // keeps its database open throughout and must see only whole commits.
    let mut rng = common::Rng::new(5);
    for _ in 0..20 {
        let mut child = spawn(test, "looping", &t.path);
        let mut out = BufReader::new(child.stdout.take().unwrap());
        assert_eq!(hear(&mut out), "open");
        std::thread::sleep(Duration::from_micros(rng.below(30_000)));
        kill(&mut child);
        let rx = db.begin_read().unwrap();
        consistent_value(&rx);
        let mut tx = db.try_begin_write().expect("lock released by the kill");
        let tr = tx.open_tree("t").unwrap();
        tx.put(&tr, b"after", b"2").unwrap();
        tx.commit().unwrap();
    }
    assert_eq!(consistent_value(&before), 0, "an old snapshot changed");
    drop(before);
    db.check().unwrap();
}

/// Opens, holds a snapshot, says its txn, and waits to be killed.
fn holding_reader_role(path: &Path) {
    let db = Database::open(path).unwrap();
    let rx = db.begin_read().unwrap();
    say(&format!("holding {}", rx.txn_id()));
    std::thread::sleep(Duration::from_secs(600));
    drop(rx);
}

fn fill(db: &Database, generation: u8) {
    let mut tx = db.begin_write().unwrap();
    let t = tx.open_tree("data").unwrap();
    for i in 0..2000u64 {
        tx.put(&t, &i.to_be_bytes(), &[generation; 1000]).unwrap();
    }
    tx.commit().unwrap();
}

#[test]
fn sigkill_of_readers_frees_their_slots_and_space_is_reused() {
    if let Some((_, path)) = role() {
        holding_reader_role(&path);
        return;
    }
    let test = "sigkill_of_readers_frees_their_slots_and_space_is_reused";
    let t = temp_db("readers.ib");
    let db = Database::open(&t.path).unwrap();
    fill(&db, 0);
    let mut children: Vec<Child> = (0..3).map(|_| spawn(test, "r", &t.path)).collect();
    let mut pids = Vec::new();
    for c in &mut children {
        let line = hear(&mut BufReader::new(c.stdout.take().unwrap()));
        assert!(line.starts_with("holding "), "{line}");
        pids.push(c.id());
    }
    let readers = db.readers().unwrap();
    for pid in &pids {
        let r = readers
            .iter()
            .find(|r| r.pid == *pid)
            .expect("reader listed");
        assert!(r.alive);
    }
    // While they live, their snapshot's pages are pinned: the file grows.
    fill(&db, 1);
    fill(&db, 2);
    assert!(db.stats().unwrap().pages_pinned_by_readers > 0);
    for c in &mut children {
        kill(c);
    }
    let readers = db.readers().unwrap();
    assert_eq!(readers.iter().filter(|r| !r.alive).count(), 3);
    // The writer clears the dead readers by itself, when it needs space and
    // at least every 100 ms while readers hold pages back (their snapshots
    // pin no more than one copy of the data): many more rewrites of all the
    // data leave the file bounded.
    std::thread::sleep(Duration::from_millis(150));
    let size_before = db.stats().unwrap().file_size_bytes;
    for g in 3..40 {
        fill(&db, g);
    }
    let stats = db.stats().unwrap();
    assert_eq!(
        stats.live_readers, 0,
        "dead readers' slots were not cleared"
    );
    assert!(
        stats.file_size_bytes <= size_before + (4 << 20),
        "file grew from {size_before} to {} bytes",
        stats.file_size_bytes
    );
    // And explicitly.
    let mut c = spawn(test, "r", &t.path);
    hear(&mut BufReader::new(c.stdout.take().unwrap()));
    assert_eq!(
        db.clear_stale_readers().unwrap(),
        0,
        "a live reader is not stale"
    );
    kill(&mut c);
    assert_eq!(db.clear_stale_readers().unwrap(), 1);
    assert!(db.readers().unwrap().iter().all(|r| r.pid != c.id()));
    db.check().unwrap();
}

/// Increments the shared counter `n` times, one transaction each, and adds
/// its own key per increment; a checkpoint every `checkpoint_every`
/// commits, if given.
fn incrementer_role(
    path: &Path,
    options: &Options,
    name: &str,
    n: u64,
    checkpoint_every: Option<u64>,
) {
    let db = Database::open_with(path, options).unwrap();
    for i in 0..n {
        let mut tx = db.begin_write().unwrap();
        tx.set_durability(Durability::None);
        let t = tx.open_tree("t").unwrap();
        let c = tx.get(&t, b"counter").unwrap().map(u64_of).unwrap_or(0);
        tx.put(&t, b"counter", &(c + 1).to_le_bytes()).unwrap();
        tx.put(&t, format!("{name}{i:05}").as_bytes(), &[1u8; 300])
            .unwrap();
        tx.commit().unwrap();
        if checkpoint_every.is_some_and(|every| i % every == every - 1) {
            db.checkpoint().unwrap();
        }
    }
    db.sync().unwrap();
}

#[test]
fn two_processes_alternate_as_writer_without_losing_an_update() {
    const EACH: u64 = 300;
    if let Some((role, path)) = role() {
        incrementer_role(&path, &Options::default(), &role, EACH, None);
        return;
    }
    let test = "two_processes_alternate_as_writer_without_losing_an_update";
    let t = temp_db("turns.ib");
    Database::open(&t.path).unwrap();
    let a = spawn(test, "a", &t.path);
    let b = spawn(test, "b", &t.path);
    wait_ok(a, "process a");
    wait_ok(b, "process b");
    let db = Database::open(&t.path).unwrap();
    let rx = db.begin_read().unwrap();
    let tr = rx.tree("t").unwrap();
    assert_eq!(u64_of(rx.get(&tr, b"counter").unwrap().unwrap()), 2 * EACH);
    assert_eq!(rx.len(&tr).unwrap(), 2 * EACH + 1);
    db.check().unwrap();
}

/// Branch regions of 2 pages (docs/design.md, "Branch regions"), so that
/// a file of a few hundred KiB holds the 32 regions they start at.
const SMALL_REGIONS: usize = 8192;

fn small_regions(logged: bool) -> Options {
    Options {
        logged_commits: logged,
        branch_region_bytes: SMALL_REGIONS,
        ..Options::default()
    }
}

/// Two writer processes taking turns, each with branch regions and a
/// checkpoint every 25 commits: each reloads the free space and the
/// regions the other's commits named (`txn::shared`), and places its
/// branches there. No update is lost, the file checks clean, and its
/// newest meta names regions.
#[test]
fn two_processes_alternate_as_writer_with_branch_regions() {
    const EACH: u64 = 400;
    if let Some((role, path)) = role() {
        let (name, logged) = role.split_once('-').expect("role name-logged");
        let options = small_regions(logged == "logged");
        incrementer_role(&path, &options, name, EACH, Some(25));
        return;
    }
    let test = "two_processes_alternate_as_writer_with_branch_regions";
    for mode in ["file", "logged"] {
        let t = temp_db("region-turns.ib");
        Database::open_with(&t.path, &small_regions(mode == "logged")).unwrap();
        let a = spawn(test, &format!("a-{mode}"), &t.path);
        let b = spawn(test, &format!("b-{mode}"), &t.path);
        wait_ok(a, "process a");
        wait_ok(b, "process b");
        {
            let db = Database::open_with(&t.path, &small_regions(mode == "logged")).unwrap();
            let rx = db.begin_read().unwrap();
            let tr = rx.tree("t").unwrap();
            assert_eq!(u64_of(rx.get(&tr, b"counter").unwrap().unwrap()), 2 * EACH);
            assert_eq!(rx.len(&tr).unwrap(), 2 * EACH + 1);
            let report = db.check().unwrap();
            assert!(report.is_clean(), "{mode}: {:?}", report.problems);
        }
        // The newest meta's list (docs/file-format.md: after byte 88, the
        // region size in pages, then the count).
        let data = std::fs::read(&t.path).unwrap();
        let page = u32::from_le_bytes(data[12..16].try_into().unwrap()) as usize;
        let txn =
            |slot: usize| u64::from_le_bytes(data[slot * page + 16..][..8].try_into().unwrap());
        let newest = if txn(1) > txn(0) { 1 } else { 0 };
        let list = &data[newest * page + 88..];
        let size = u32::from_le_bytes(list[..4].try_into().unwrap()) as usize;
        let named = u32::from_le_bytes(list[4..8].try_into().unwrap());
        assert_eq!(size * page, SMALL_REGIONS, "{mode}");
        assert!(named > 0, "{mode}: no region named");
    }
}

/// Opens while the file is small, then waits for the parent to grow it and
/// reads everything the parent wrote.
fn late_reader_role(path: &Path, read_only: bool) {
    let db = Database::open_with(
        path,
        &Options {
            read_only,
            ..Options::default()
        },
    )
    .unwrap();
    if read_only {
        assert!(matches!(db.begin_write(), Err(Error::ReadOnly)));
        assert!(matches!(db.try_begin_write(), Err(Error::ReadOnly)));
        assert!(matches!(db.clear_stale_readers(), Err(Error::ReadOnly)));
    }
    say("open");
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    let rx = db.begin_read().unwrap();
    let t = rx.tree("big").unwrap();
    let mut n = 0u64;
    for e in rx.iter(&t).unwrap() {
        let (k, v) = e.unwrap();
        assert_eq!(v.len(), 4000);
        assert_eq!(v[0], k[7]);
        n += 1;
    }
    say(&format!("read {n}"));
}

#[test]
fn a_reader_process_sees_a_file_grown_by_another() {
    if let Some((role, path)) = role() {
        late_reader_role(&path, role == "ro");
        return;
    }
    let test = "a_reader_process_sees_a_file_grown_by_another";
    for role in ["rw", "ro"] {
        let t = temp_db("grow.ib");
        let db = Database::open(&t.path).unwrap();
        let small = db.stats().unwrap().file_size_bytes;
        let mut child = spawn(test, role, &t.path);
        let mut out = BufReader::new(child.stdout.take().unwrap());
        assert_eq!(hear(&mut out), "open");
        let mut tx = db.begin_write().unwrap();
        let tr = tx.open_tree("big").unwrap();
        for i in 0..20_000u64 {
            tx.put(&tr, &i.to_be_bytes(), &[i as u8; 4000]).unwrap();
        }
        tx.commit().unwrap();
        assert!(db.stats().unwrap().file_size_bytes > small + (50 << 20));
        writeln!(child.stdin.as_mut().unwrap(), "go").unwrap();
        assert_eq!(hear(&mut out), "read 20000");
        wait_ok(child, "reader process");
    }
}

#[test]
fn the_same_path_twice_in_one_process_is_one_instance() {
    let t = temp_db("twice.ib");
    let a = Database::open(&t.path).unwrap();
    let b = Database::open(&t.path).unwrap();
    let mut tx = a.begin_write().unwrap();
    assert!(matches!(b.try_begin_write(), Err(Error::Busy)));
    let tr = tx.open_tree("t").unwrap();
    tx.put(&tr, b"k", b"v").unwrap();
    tx.commit().unwrap();
    let rx = b.begin_read().unwrap();
    assert_eq!(
        rx.get(&rx.tree("t").unwrap(), b"k").unwrap(),
        Some(&b"v"[..])
    );
    // Read transactions are not tied to a thread, and a thread may hold many.
    let rx2 = a.begin_read().unwrap();
    let moved = std::thread::spawn(move || rx2.txn_id()).join().unwrap();
    assert_eq!(moved, rx.txn_id());
}

struct Mount(PathBuf);

impl Mount {
    fn run(args: &[&str]) {
        let _one_at_a_time = SPAWN.lock().unwrap_or_else(|e| e.into_inner());
        let status = Command::new("mount")
            .args(args)
            .status()
            .expect("run mount");
        assert!(
            status.success(),
            "mount {args:?} failed: this test needs root (CI runs as root)"
        );
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _one_at_a_time = SPAWN.lock().unwrap_or_else(|e| e.into_inner());
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// A read-only view of the database's directory: the lock file cannot be
/// opened for writing there, so the reader opens without one.
fn lockless_reader_role(path: &Path) {
    let db = Database::open_with(
        path,
        &Options {
            read_only: true,
            ..Options::default()
        },
    )
    .unwrap();
    let rx = db.begin_read().unwrap();
    let t = rx.tree("t").unwrap();
    let v = consistent_value(&rx);
    assert_eq!(rx.len(&t).unwrap(), KEYS);
    say(&format!("value {v}"));
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    assert_eq!(
        consistent_value(&rx),
        v,
        "a snapshot changed under a lockless reader"
    );
    db.check().unwrap();
    say("done");
}

#[test]
fn a_reader_on_a_read_only_mount_keeps_writers_out_while_open() {
    if let Some((_, path)) = role() {
        lockless_reader_role(&path);
        return;
    }
    let test = "a_reader_on_a_read_only_mount_keeps_writers_out_while_open";
    let dir = tempfile::tempdir().unwrap();
    let rw = dir.path().join("rw");
    let ro = dir.path().join("ro");
    std::fs::create_dir(&rw).unwrap();
    std::fs::create_dir(&ro).unwrap();
    Mount::run(&["--bind", rw.to_str().unwrap(), ro.to_str().unwrap()]);
    let _mount = Mount(ro.clone());
    Mount::run(&["-o", "remount,ro,bind", ro.to_str().unwrap()]);

    let path = rw.join("db.ib");
    create_invariant_db(&path);
    let db = Database::open(&path).unwrap();
    // Through the read-only mount, even a write open fails clearly.
    assert!(Database::open(ro.join("db.ib")).is_err());
    let mut child = spawn(test, "ro", &ro.join("db.ib"));
    let mut out = BufReader::new(child.stdout.take().unwrap());
    assert_eq!(hear(&mut out), "value 0");
    // The lockless reader holds the writer byte shared: writers wait, and
    // are told why.
    assert!(matches!(db.try_begin_write(), Err(Error::LocklessReader)));
    writeln!(child.stdin.as_mut().unwrap(), "go").unwrap();
    assert_eq!(hear(&mut out), "done");
    wait_ok(child, "read-only reader");
    let mut tx = db
        .try_begin_write()
        .expect("writers proceed once it closed");
    let tr = tx.open_tree("t").unwrap();
    tx.put(&tr, &key(0), &1u64.to_le_bytes()).unwrap();
    tx.commit().unwrap();
    db.check().unwrap();
}

/// Opens and says how it went.
fn damaged_lock_role(path: &Path) {
    match Database::open(path) {
        Err(Error::Corrupted { detail, .. }) => say(&format!("corrupted: {detail}")),
        other => say(&format!("unexpected: {other:?}")),
    }
}

#[test]
fn a_damaged_lock_file_is_an_error_while_shared_and_rebuilt_when_alone() {
    if let Some((_, path)) = role() {
        damaged_lock_role(&path);
        return;
    }
    let test = "a_damaged_lock_file_is_an_error_while_shared_and_rebuilt_when_alone";
    let t = temp_db("lockdmg.ib");
    create_invariant_db(&t.path);
    let mut lock_path = t.path.clone().into_os_string();
    lock_path.push("-lock");
    let lock_path = PathBuf::from(lock_path);
    let db = Database::open(&t.path).unwrap();
    let good = std::fs::read(&lock_path).unwrap();
    type Damage = Box<dyn Fn(&mut Vec<u8>)>;
    let damages: [(&str, Damage); 4] = [
        (
            "foreign magic",
            Box::new(|b| b[..8].copy_from_slice(b"NOTALOCK")),
        ),
        ("truncated", Box::new(|b| b.truncate(100))),
        (
            "reader count out of range",
            Box::new(|b| b[16..24].copy_from_slice(&u64::MAX.to_le_bytes())),
        ),
        (
            "another data file",
            Box::new(|b| b[40..48].copy_from_slice(&7u64.to_le_bytes())),
        ),
    ];
    for (what, damage) in &damages {
        let mut bad = good.clone();
        damage(&mut bad);
        // Rewritten in place: the open process keeps its locks and mapping.
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&lock_path)
            .unwrap();
        std::os::unix::fs::FileExt::write_all_at(&f, &bad, 0).unwrap();
        f.set_len(bad.len() as u64).unwrap();
        let mut child = spawn(test, "open", &t.path);
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let said = hear(&mut out);
        assert!(said.starts_with("corrupted: "), "{what}: {said}");
        wait_ok(child, what);
    }
    drop(db);
    // Alone, the first process rebuilds whatever it finds.
    std::fs::write(&lock_path, b"garbage").unwrap();
    let db = Database::open(&t.path).unwrap();
    assert_eq!(consistent_value(&db.begin_read().unwrap()), 0);
    db.check().unwrap();
}

/// Users for the tests with several users: the data file's owner, and
/// another user (neither in the other's group).
const OWNER: u32 = 65533;
const OTHER: u32 = 65534;

fn chown(path: &Path, uid: u32) {
    std::os::unix::fs::chown(path, Some(uid), Some(uid)).expect("chown (needs root, as CI has)");
}

fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn lock_file_of(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_os_string();
    p.push("-lock");
    PathBuf::from(p)
}

/// A file's owner, group and permission bits.
fn owner_of(path: &Path) -> (u32, u32, u32) {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).unwrap();
    (m.uid(), m.gid(), m.mode() & 0o777)
}

/// Opens (read-only or not), reads, for a writer commits, and says how it
/// went: "ok value N" or "err MESSAGE".
fn user_role(path: &Path, read_only: bool) {
    let r = (|| -> ironbark::Result<u64> {
        let db = Database::open_with(
            path,
            &Options {
                read_only,
                ..Options::default()
            },
        )?;
        let v = consistent_value(&db.begin_read()?);
        if !read_only {
            let mut tx = db.begin_write()?;
            let t = tx.open_tree("t")?;
            for i in 0..KEYS {
                tx.put(&t, &key(i), &(v + 1).to_le_bytes())?;
            }
            tx.commit()?;
            db.check()?;
        }
        Ok(v)
    })();
    match r {
        Ok(v) => say(&format!("ok value {v}")),
        Err(e) => say(&format!("err {e}")),
    }
}

fn run_user_role(test: &str, role: &str, path: &Path, uid: u32) -> String {
    let mut child = spawn_as(test, role, path, Some(uid));
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let said = hear(&mut out);
    wait_ok(child, role);
    said
}

#[test]
fn a_read_only_open_by_another_user_does_not_lock_the_owner_out() {
    if let Some((role, path)) = role() {
        user_role(&path, role == "ro");
        return;
    }
    let test = "a_read_only_open_by_another_user_does_not_lock_the_owner_out";
    let t = temp_db("users.ib");
    let log = common::log_path(&t.path);
    // A shared directory, like /tmp.
    chmod(t.dir.path(), 0o1777);
    // Made by root for the owner: only the data file is handed over. The
    // lock file and the redo log root's process left are root's, so they
    // go (the clean close left no record in the log): the owner's open
    // makes its own.
    create_invariant_db(&t.path);
    std::fs::remove_file(lock_file_of(&t.path)).unwrap();
    std::fs::remove_file(&log).ok();
    chown(&t.path, OWNER);
    chmod(&t.path, 0o644);

    // Another user reads: it may not leave a lock file or a log the owner
    // cannot use.
    assert_eq!(run_user_role(test, "ro", &t.path, OTHER), "ok value 0");
    for file in [lock_file_of(&t.path), log.clone()] {
        if let Ok(m) = std::fs::metadata(&file) {
            use std::os::unix::fs::MetadataExt;
            assert_eq!(m.uid(), OWNER, "{} belongs to the reader", file.display());
        }
    }
    // The owner writes, and its lock file and log take the data file's
    // mode and group whatever the umask.
    chmod(&t.path, 0o664);
    assert_eq!(run_user_role(test, "rw", &t.path, OWNER), "ok value 0");
    assert_eq!(owner_of(&lock_file_of(&t.path)), (OWNER, OWNER, 0o664));
    if Options::default().logged_commits {
        assert_eq!(owner_of(&log), (OWNER, OWNER, 0o664), "the log");
    }
    chmod(&t.path, 0o644);
    // The owner's lock file has the data file's mode: the other user may
    // still read (without it), not write.
    assert_eq!(run_user_role(test, "ro", &t.path, OTHER), "ok value 1");
    let said = run_user_role(test, "rw", &t.path, OTHER);
    assert!(
        said.starts_with("err ")
            && said.contains(t.path.to_str().unwrap())
            && !said.contains("-lock")
            && said.contains("read_only"),
        "a write open without write permission: {said}"
    );

    // A lock file the owner cannot write (left by an older version): the
    // error names the lock file, not the data file.
    let lock = lock_file_of(&t.path);
    std::fs::remove_file(&lock).ok();
    std::fs::write(&lock, b"").unwrap();
    chown(&lock, OTHER);
    chmod(&lock, 0o600);
    let said = run_user_role(test, "rw", &t.path, OWNER);
    assert!(
        said.starts_with("err ") && said.contains(lock.to_str().unwrap()),
        "{said}"
    );
    assert!(said.contains("Permission denied"), "{said}");

    // The same for a log the owner cannot write.
    std::fs::remove_file(&lock).unwrap();
    std::fs::remove_file(&log).ok();
    std::fs::write(&log, b"").unwrap();
    chown(&log, OTHER);
    chmod(&log, 0o600);
    let said = run_user_role(test, "rw", &t.path, OWNER);
    assert!(
        said.starts_with("err ")
            && said.contains(log.to_str().unwrap())
            && said.contains("Permission denied"),
        "{said}"
    );

    // Root opens a data file its owner has made read-only: the lock file
    // and the log it creates are the owner's, and the owner may write them
    // (so making the data file writable again is enough).
    std::fs::remove_file(lock_file_of(&t.path)).ok();
    std::fs::remove_file(&log).unwrap();
    chmod(&t.path, 0o440);
    let logged = Options {
        logged_commits: true,
        ..Options::default()
    };
    let db = Database::open_with(&t.path, &logged).unwrap();
    let mut tx = db.begin_write().unwrap();
    let tr = tx.open_tree("t").unwrap();
    tx.put(&tr, b"by root", b"").unwrap();
    tx.commit().unwrap();
    drop(db);
    assert_eq!(owner_of(&lock_file_of(&t.path)), (OWNER, OWNER, 0o640));
    assert_eq!(owner_of(&log), (OWNER, OWNER, 0o640), "the log");
}

/// Reads without a lock file (it may not write the owner's) until told to
/// stop.
fn lockless_user_role(path: &Path) {
    let db = Database::open_with(
        path,
        &Options {
            read_only: true,
            ..Options::default()
        },
    )
    .unwrap();
    let v = consistent_value(&db.begin_read().unwrap());
    say(&format!("value {v}"));
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    say("done");
}

#[test]
fn writers_are_told_of_a_reader_without_the_lock_file_and_need_not_wait_forever() {
    if let Some((_, path)) = role() {
        lockless_user_role(&path);
        return;
    }
    let test = "writers_are_told_of_a_reader_without_the_lock_file_and_need_not_wait_forever";
    let t = temp_db("lockless.ib");
    chmod(t.dir.path(), 0o755);
    create_invariant_db(&t.path);
    let db = Database::open(&t.path).unwrap();
    let mut child = spawn_as(test, "lockless", &t.path, Some(OTHER));
    let mut out = BufReader::new(child.stdout.take().unwrap());
    assert_eq!(hear(&mut out), "value 0");
    match db.try_begin_write() {
        Err(e @ Error::LocklessReader) => assert!(
            e.to_string()
                .contains("a read-only process without the lock file is reading"),
            "{e}"
        ),
        other => panic!("try_begin_write beside a lockless reader: {other:?}"),
    }
    let started = Instant::now();
    let r = db.begin_write_timeout(Duration::from_millis(200)).map(drop);
    assert!(matches!(r, Err(Error::LocklessReader)), "{r:?}");
    assert!(started.elapsed() >= Duration::from_millis(200));
    writeln!(child.stdin.as_mut().unwrap(), "go").unwrap();
    assert_eq!(hear(&mut out), "done");
    wait_ok(child, "lockless reader");
    let mut tx = db
        .begin_write_timeout(Duration::from_secs(10))
        .expect("writers proceed once it closed");
    let tr = tx.open_tree("t").unwrap();
    tx.put(&tr, &key(0), &1u64.to_le_bytes()).unwrap();
    tx.commit().unwrap();
    db.check().unwrap();
}
