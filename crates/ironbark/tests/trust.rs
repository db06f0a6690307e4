//! What a caller can rely on when the database is used in ways that used to
//! surprise: opening a path twice with different options, calls that would
//! wait for a lock the calling thread holds, stale or foreign tree handles,
//! failed opens, empty files, and leftovers of a crashed creation. (The
//! cases with several processes or users are in `multi_process.rs`.)

mod common;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use common::temp_db;
use ironbark::{Database, Durability, Error, IoHook, IoHookHandle, Options};

fn lock_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_os_string();
    p.push("-lock");
    PathBuf::from(p)
}

/// Runs `f` on its own thread; fails the test if it has not returned within
/// five seconds (a hang), instead of hanging the test run.
fn within_5s<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(5))
        .unwrap_or_else(|_| panic!("{what} hung"))
}

/// Counts the `fdatasync`s of the data file and of the redo log. (Not
/// `Stats::counters`: with logged commits pending, `stats` checkpoints,
/// and that syncs.)
#[derive(Default)]
struct Syncs(AtomicU64);

impl Syncs {
    fn count(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

impl IoHook for Syncs {
    fn on_sync(&self) -> io::Result<()> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    fn on_log_sync(&self) -> io::Result<()> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

fn one_commit(db: &Database) {
    let mut tx = db.begin_write().unwrap();
    let t = tx.open_tree("t").unwrap();
    tx.put(&t, b"k", b"v").unwrap();
    tx.commit().unwrap();
}

// Item: a second open of an open path keeps its own options or is refused.

#[test]
fn a_second_open_keeps_its_own_durability() {
    // A commit syncs the data file, or (logged) the log: one sync either way.
    for logged in [true, false] {
        let t = temp_db("dur.ib");
        let syncs = Arc::new(Syncs::default());
        let options = |durability| Options {
            durability,
            logged_commits: logged,
            io_hook: Some(IoHookHandle(syncs.clone())),
            ..Options::default()
        };
        let fast = Database::open_with(&t.path, &options(Durability::None)).unwrap();
        let safe = Database::open_with(&t.path, &options(Durability::Immediate)).unwrap();
        let before = syncs.count();
        one_commit(&safe);
        assert_eq!(
            syncs.count() - before,
            1,
            "logged {logged}: an Immediate handle committed without fsync"
        );
        let before = syncs.count();
        one_commit(&fast);
        assert_eq!(
            syncs.count() - before,
            0,
            "logged {logged}: a None handle synced"
        );
        // Clones keep the handle's settings.
        let before = syncs.count();
        one_commit(&safe.clone());
        assert_eq!(syncs.count() - before, 1, "logged {logged}");
    }
}

#[test]
fn a_read_only_open_of_a_path_open_for_writing_is_read_only() {
    let t = temp_db("ro.ib");
    let rw = Database::open(&t.path).unwrap();
    one_commit(&rw);
    let ro = Database::open_with(
        &t.path,
        &Options {
            read_only: true,
            ..Options::default()
        },
    )
    .unwrap();
    assert!(ro.is_read_only());
    assert!(!rw.is_read_only());
    assert!(matches!(ro.begin_write(), Err(Error::ReadOnly)));
    assert!(matches!(ro.try_begin_write(), Err(Error::ReadOnly)));
    assert!(matches!(ro.clear_stale_readers(), Err(Error::ReadOnly)));
    // It reads, and the writable handle still writes.
    let rx = ro.begin_read().unwrap();
    assert_eq!(
        rx.get(&rx.tree("t").unwrap(), b"k").unwrap(),
        Some(&b"v"[..])
    );
    one_commit(&rw);
    // The other way round is refused: the instance has no write access.
    drop((rx, ro, rw));
    let ro = Database::open_with(
        &t.path,
        &Options {
            read_only: true,
            ..Options::default()
        },
    )
    .unwrap();
    match Database::open(&t.path) {
        Err(Error::InvalidOption(m)) => assert!(m.contains("read_only"), "{m}"),
        other => panic!("read-write open of a read-only instance: {other:?}"),
    }
    drop(ro);
}

#[test]
fn a_second_open_asking_for_another_reader_count_is_refused() {
    let t = temp_db("readers.ib");
    let _a = Database::open_with(
        &t.path,
        &Options {
            max_readers: 8,
            ..Options::default()
        },
    )
    .unwrap();
    match Database::open_with(
        &t.path,
        &Options {
            max_readers: 200,
            ..Options::default()
        },
    ) {
        Err(Error::InvalidOption(m)) => {
            assert!(
                m.contains("max_readers") && m.contains("200") && m.contains('8'),
                "{m}"
            )
        }
        other => panic!("max_readers ignored: {other:?}"),
    }
    // The same options again are fine.
    let b = Database::open_with(
        &t.path,
        &Options {
            max_readers: 8,
            ..Options::default()
        },
    )
    .unwrap();
    assert_eq!(b.stats().unwrap().max_readers, 8);
}

// Item: re-entering the write lock on the thread that holds it is an error.

#[test]
fn begin_write_on_the_thread_that_holds_the_write_txn_is_an_error() {
    let t = temp_db("reenter.ib");
    let db = Database::open(&t.path).unwrap();
    within_5s("begin_write re-entered", move || {
        let tx = db.begin_write().unwrap();
        assert!(matches!(db.begin_write(), Err(Error::WriteTxnOnThisThread)));
        assert!(matches!(
            db.begin_write_timeout(Duration::from_secs(60)),
            Err(Error::WriteTxnOnThisThread)
        ));
        assert!(matches!(db.sync(), Err(Error::WriteTxnOnThisThread)));
        assert!(matches!(
            db.clear_stale_readers(),
            Err(Error::WriteTxnOnThisThread)
        ));
        // A second handle of the same instance is the same lock.
        let other = Database::open(db.path()).unwrap();
        assert!(matches!(
            other.begin_write(),
            Err(Error::WriteTxnOnThisThread)
        ));
        let msg = Error::WriteTxnOnThisThread.to_string();
        assert!(msg.contains("this thread"), "{msg}");
        drop(tx);
        // Once it is gone, the thread begins again; another thread waits.
        let tx = db.begin_write().unwrap();
        let db2 = db.clone();
        let waiter = std::thread::spawn(move || db2.begin_write().map(drop).is_ok());
        std::thread::sleep(Duration::from_millis(50));
        tx.commit().unwrap();
        assert!(waiter.join().unwrap());
    });
}

#[test]
fn begin_write_timeout_gives_up_with_the_reason() {
    let t = temp_db("timeout.ib");
    let db = Database::open(&t.path).unwrap();
    let tx = db.begin_write().unwrap();
    let db2 = db.clone();
    let r = std::thread::spawn(move || {
        let started = std::time::Instant::now();
        let r = db2
            .begin_write_timeout(Duration::from_millis(100))
            .map(drop);
        (r, started.elapsed())
    })
    .join()
    .unwrap();
    assert!(matches!(r.0, Err(Error::Busy)), "{:?}", r.0);
    assert!(r.1 >= Duration::from_millis(100), "{:?}", r.1);
    drop(tx);
    db.begin_write_timeout(Duration::from_millis(100))
        .unwrap()
        .commit()
        .unwrap();
}

// Item: reports called by the write-lock holder with every slot taken.

#[test]
fn reports_on_the_writer_thread_with_every_reader_slot_taken_do_not_hang() {
    let t = temp_db("full.ib");
    let db = Database::open_with(
        &t.path,
        &Options {
            max_readers: 1,
            ..Options::default()
        },
    )
    .unwrap();
    one_commit(&db);
    within_5s("a report on the writer thread", move || {
        let rx = db.begin_read().unwrap();
        let tx = db.begin_write().unwrap();
        assert!(matches!(db.stats(), Err(Error::WriteTxnOnThisThread)));
        assert!(matches!(db.check(), Err(Error::WriteTxnOnThisThread)));
        assert!(matches!(
            db.check_report(),
            Err(Error::WriteTxnOnThisThread)
        ));
        assert!(matches!(db.readers(), Err(Error::WriteTxnOnThisThread)));
        drop(tx);
        // Without the write transaction they fall back to the write lock.
        assert_eq!(db.stats().unwrap().live_readers, 1);
        db.check().unwrap();
        assert_eq!(db.readers().unwrap().len(), 1);
        drop(rx);
    });
}

// Item: tree handles say what is wrong with them.

#[test]
fn a_handle_to_a_tree_dropped_in_an_earlier_txn_is_stale() {
    let t = temp_db("stale.ib");
    let db = Database::open(&t.path).unwrap();
    let mut tx = db.begin_write().unwrap();
    let old = tx.open_tree("t").unwrap();
    tx.put(&old, b"k", b"v").unwrap();
    tx.commit().unwrap();
    let mut tx = db.begin_write().unwrap();
    assert!(tx.drop_tree("t").unwrap());
    // Dropped in this transaction: said so.
    assert!(matches!(tx.get(&old, b"k"), Err(Error::TreeDropped(_))));
    tx.commit().unwrap();
    // Dropped in an earlier one: a stale handle, not "in this transaction".
    let mut tx = db.begin_write().unwrap();
    match tx.put(&old, b"k", b"v") {
        Err(e @ Error::StaleTree(_)) => {
            let m = e.to_string();
            assert!(!m.contains("in this transaction"), "{m}");
        }
        other => panic!("{other:?}"),
    }
    let rx = db.begin_read().unwrap();
    assert!(matches!(rx.get(&old, b"k"), Err(Error::StaleTree(_))));
    drop(rx);
    // Recreated: the old handle is stale, not "no tree named t".
    let new = tx.open_tree("t").unwrap();
    tx.put(&new, b"k", b"w").unwrap();
    assert!(matches!(tx.get(&old, b"k"), Err(Error::StaleTree(_))));
    tx.commit().unwrap();
    let rx = db.begin_read().unwrap();
    match rx.get(&old, b"k") {
        Err(e @ Error::StaleTree(_)) => {
            assert!(e.to_string().contains("stale"), "{e}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(rx.get(&new, b"k").unwrap(), Some(&b"w"[..]));
    // An older snapshot does not have a tree created after it: NoSuchTree.
    let mut tx = db.begin_write().unwrap();
    let later = tx.open_tree("later").unwrap();
    tx.commit().unwrap();
    assert!(matches!(rx.get(&later, b"k"), Err(Error::NoSuchTree(_))));
}

#[test]
fn a_handle_from_another_database_is_refused() {
    let a = temp_db("a.ib");
    let b = temp_db("b.ib");
    let db_a = Database::open(&a.path).unwrap();
    let db_b = Database::open(&b.path).unwrap();
    for (db, v) in [(&db_a, &b"from a"[..]), (&db_b, &b"from b"[..])] {
        let mut tx = db.begin_write().unwrap();
        let t = tx.open_tree("t").unwrap();
        tx.put(&t, b"k", v).unwrap();
        tx.commit().unwrap();
    }
    let handle_a = db_a.begin_read().unwrap().tree("t").unwrap();
    let rx = db_b.begin_read().unwrap();
    match rx.get(&handle_a, b"k") {
        Err(Error::ForeignTree(n)) => assert_eq!(n, "t"),
        other => panic!("a handle of a read b's tree: {other:?}"),
    }
    let mut tx = db_b.begin_write().unwrap();
    assert!(matches!(
        tx.put(&handle_a, b"k", b"x"),
        Err(Error::ForeignTree(_))
    ));
    drop(tx);
    // Handles stay valid across a reopen of the same file, and through a
    // second handle of the same instance.
    drop((rx, db_a));
    let db_a = Database::open(&a.path).unwrap();
    let again = Database::open(&a.path).unwrap();
    assert_eq!(
        db_a.begin_read().unwrap().get(&handle_a, b"k").unwrap(),
        Some(&b"from a"[..])
    );
    assert_eq!(
        again.begin_read().unwrap().get(&handle_a, b"k").unwrap(),
        Some(&b"from a"[..])
    );
}

// Item: the handle can be used inside `catch_unwind` (compile-level).

#[test]
fn database_and_read_txn_are_unwind_safe() {
    fn unwind_safe<T: std::panic::RefUnwindSafe + std::panic::UnwindSafe>(_: &T) {}
    let t = temp_db("unwind.ib");
    let db = Database::open(&t.path).unwrap();
    unwind_safe(&db);
    let n = std::panic::catch_unwind(|| db.begin_read().unwrap().list_trees().len()).unwrap();
    assert_eq!(n, 0);
    let r = std::panic::catch_unwind(|| {
        let rx = db.begin_read().unwrap();
        rx.txn_id()
    });
    assert_eq!(r.unwrap(), 1);
}

// Item: failed opens leave nothing behind; an empty file becomes a database.

#[test]
fn a_failed_open_leaves_no_lock_file() {
    let t = temp_db("trunc.ib");
    {
        let db = Database::open(&t.path).unwrap();
        let mut tx = db.begin_write().unwrap();
        let tr = tx.open_tree("t").unwrap();
        for i in 0..2000u32 {
            tx.put(&tr, &i.to_be_bytes(), &[7u8; 100]).unwrap();
        }
        tx.commit().unwrap();
    }
    std::fs::remove_file(lock_path(&t.path)).unwrap();
    // Truncated: the metas are whole, the commit's pages are gone.
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&t.path)
        .unwrap();
    f.set_len(4 * 4096).unwrap();
    drop(f);
    let r = Database::open(&t.path);
    assert!(r.is_err(), "a truncated file opened");
    assert!(
        !lock_path(&t.path).exists(),
        "a failed open left a lock file: {r:?}"
    );
    // A read-only open (as `check` makes) too.
    let r = Database::open_with(
        &t.path,
        &Options {
            read_only: true,
            ..Options::default()
        },
    );
    assert!(r.is_err());
    assert!(!lock_path(&t.path).exists());
}

#[test]
fn an_empty_file_is_initialized() {
    let t = temp_db("empty.ib");
    std::fs::write(&t.path, b"").unwrap();
    let db = Database::open(&t.path).unwrap();
    one_commit(&db);
    db.check().unwrap();
    drop(db);
    let db = Database::open(&t.path).unwrap();
    let rx = db.begin_read().unwrap();
    assert_eq!(
        rx.get(&rx.tree("t").unwrap(), b"k").unwrap(),
        Some(&b"v"[..])
    );
    // A file made with the tempfile crate, as its users do.
    let f = tempfile::NamedTempFile::new().unwrap();
    let db = Database::open_with(
        f.path(),
        &Options {
            page_size: 8192,
            ..Options::default()
        },
    )
    .unwrap();
    assert_eq!(db.page_size(), 8192);
    db.check().unwrap();
    drop(db);
    let _ = std::fs::remove_file(lock_path(f.path()));
}

#[test]
fn an_empty_file_is_not_initialized_without_create_or_read_only() {
    let t = temp_db("empty2.ib");
    std::fs::write(&t.path, b"").unwrap();
    for options in [
        Options {
            create: false,
            ..Options::default()
        },
        Options {
            read_only: true,
            ..Options::default()
        },
    ] {
        let r = Database::open_with(&t.path, &options);
        assert!(matches!(r, Err(Error::NotAnIronbarkFile)), "{r:?}");
        assert_eq!(std::fs::metadata(&t.path).unwrap().len(), 0);
        assert!(!lock_path(&t.path).exists());
    }
}

#[test]
fn an_interrupted_initialization_is_initialized_again() {
    // What a crash while initializing an empty file can leave: some of the
    // image's sectors, zeros elsewhere.
    let t = temp_db("image.ib");
    let image = {
        let src = temp_db("src.ib");
        drop(Database::open(&src.path).unwrap());
        std::fs::read(&src.path).unwrap()
    };
    let mut partial = image.clone();
    for sector in partial.chunks_mut(512).step_by(2) {
        sector.fill(0);
    }
    std::fs::write(&t.path, &partial).unwrap();
    let db = Database::open(&t.path).unwrap();
    one_commit(&db);
    db.check().unwrap();
}

// Item: leftovers of a crashed creation.

/// The name a crashed creation by this process's pid left behind (the
/// name earlier versions used).
fn leftover_of(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_os_string();
    p.push(format!(".creating-{}", std::process::id()));
    PathBuf::from(p)
}

#[test]
fn a_leftover_with_this_process_pid_does_not_fail_creation() {
    let t = temp_db("pid.ib");
    let leftover = leftover_of(&t.path);
    std::fs::write(&leftover, b"IRONBARK partial").unwrap();
    let db = Database::open(&t.path).expect("open beside a leftover of this pid");
    db.check().unwrap();
    assert!(!leftover.exists(), "a leftover nobody owns was kept");
    // copy_to has the same flaw.
    let dest = t.dir.path().join("copy.ib");
    let leftover = leftover_of(&dest);
    std::fs::write(&leftover, b"partial copy").unwrap();
    db.begin_read().unwrap().copy_to(&dest).unwrap();
    Database::open(&dest).unwrap().check().unwrap();
    assert!(!leftover.exists());
}

#[test]
fn a_temporary_file_being_written_by_another_creator_is_left_alone() {
    use std::os::unix::io::AsRawFd;
    let t = temp_db("live.ib");
    // A creator at work: it holds a lock on its temporary file.
    let theirs = leftover_of(&t.path);
    let f = std::fs::File::create(&theirs).unwrap();
    // SAFETY: a zeroed flock is valid; fcntl gets a live pointer.
    let rc = unsafe {
        let mut fl: libc::flock = std::mem::zeroed();
        fl.l_type = libc::F_WRLCK as libc::c_short;
        fl.l_whence = libc::SEEK_SET as libc::c_short;
        fl.l_len = 1;
        libc::fcntl(f.as_raw_fd(), libc::F_OFD_SETLK, &fl as *const libc::flock)
    };
    assert_eq!(rc, 0);
    Database::open(&t.path).unwrap().check().unwrap();
    assert!(
        theirs.exists(),
        "deleted a temporary file it did not create"
    );
    drop(f);
    // Once its creator is gone, the next open clears it.
    std::fs::remove_file(lock_path(&t.path)).unwrap();
    Database::open(&t.path).unwrap();
    assert!(!theirs.exists());
}

#[test]
fn creation_leaves_no_temporary_file() {
    let t = temp_db("clean.ib");
    let db = Database::open(&t.path).unwrap();
    db.begin_read()
        .unwrap()
        .copy_to(t.dir.path().join("c.ib"))
        .unwrap();
    let mut names: Vec<_> = std::fs::read_dir(t.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    // The database's own files: the data file, the lock file and (with
    // logged commits, the default) the redo log.
    let mut want = vec!["c.ib", "clean.ib", "clean.ib-lock"];
    if Options::default().logged_commits {
        want.push("clean.ib-log");
    }
    assert_eq!(names, want);
}

// Item: the documents state the platform, the re-entry rule and the space
// cost of long-lived readers.

#[test]
fn the_documents_state_the_platform_and_the_caveats() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap();
    let readme = read("../../README.md");
    assert!(
        readme.contains("Linux only"),
        "README: no platform statement"
    );
    let lib = read("src/lib.rs");
    assert!(lib.contains("# Platform") && lib.contains("Linux only"));
    let db = read("src/db.rs");
    let begin_write = db.find("pub fn begin_write(").unwrap();
    let doc = &db[db[..begin_write].rfind("/// Starts").unwrap()..begin_write];
    assert!(doc.contains("Not re-entrant"), "begin_write: {doc}");
    let begin_read = db.find("pub fn begin_read(").unwrap();
    let doc = &db[db[..begin_read].rfind("/// Starts").unwrap()..begin_read];
    assert!(doc.contains("long-lived reader"), "begin_read: {doc}");
    let design = read("../../docs/design.md");
    assert!(design.contains("The cost of a long-lived reader is space"));
}
