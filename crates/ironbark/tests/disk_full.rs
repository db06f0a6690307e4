//! Disk full, for real: a database on a 2 MiB tmpfs, written until the file
//! system refuses. The error is a clear `Err`; the database stays readable
//! with everything committed; once space is freed it accepts writes again;
//! after reopening nothing committed is lost. With logged commits on (the
//! default) and off; with them on, the space a checkpoint needs is a copy
//! of the pages the logged commits changed, which the test then gives.
//!
//! Mounting needs root (as CI runs); without it this test fails with a
//! message saying so.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::Rng;
use ironbark::{Database, Error, Options};

struct Mount(PathBuf);

impl Mount {
    fn tmpfs(dir: &Path, size: &str) -> Mount {
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .status()
            .expect("run mount");
        assert!(
            status.success(),
            "mounting a tmpfs failed: this test needs root (CI runs as root)"
        );
        Mount(dir.to_path_buf())
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

fn read_all(db: &Database) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let rx = db.begin_read().unwrap();
    let Ok(t) = rx.tree("t") else {
        return BTreeMap::new();
    };
    rx.iter(&t)
        .unwrap()
        .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
        .collect()
}

#[test]
fn enospc_is_an_error_and_loses_nothing() {
    for logged in [false, true] {
        fill_the_disk(logged);
    }
}

fn fill_the_disk(logged: bool) {
    let dir = tempfile::tempdir().unwrap();
    let _mount = Mount::tmpfs(dir.path(), "2m");
    let path = dir.path().join("full.ib");
    let ballast = dir.path().join("ballast");
    std::fs::write(&ballast, vec![1u8; 256 * 1024]).unwrap();
    let options = Options {
        logged_commits: logged,
        ..Options::default()
    };

    let db = Database::open_with(&path, &options).unwrap();
    let mut rng = Rng::new(11);
    let mut committed = BTreeMap::new();
    let mut failure = None;
    for i in 0..10_000u32 {
        let mut tx = db.begin_write().unwrap();
        let t = tx.open_tree("t").unwrap();
        let mut model = committed.clone();
        for j in 0..4u32 {
            let k = format!("{i:05}-{j}").into_bytes();
            let v = rng.bytes(if j == 0 { 3000 } else { 500 });
            tx.put(&t, &k, &v).unwrap();
            model.insert(k, v);
        }
        match tx.commit() {
            Ok(()) => committed = model,
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    let failure = failure.expect("a 2 MiB file system never filled up");
    eprintln!(
        "DEBUG failure {failure:?} after {} entries",
        committed.len()
    );
    match &failure {
        Error::Io(e) => assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}"),
        other => panic!("disk full gave {other:?}, not an I/O error"),
    }
    assert!(!failure.to_string().is_empty());
    // The data file allocates its pages' blocks, and a few MiB ahead, and
    // the log grows by steps of 1 MiB at least; where what is ahead does
    // not fit, what the commit needs still may. (With the whole step or
    // nothing, 8 entries fit in logged mode.)
    assert!(
        committed.len() > 400,
        "only {} entries fit",
        committed.len()
    );
    // Still readable, with everything committed.
    assert!(read_all(&db) == committed);
    if logged {
        // A log growth that failed part-way gave back what it wrote.
        // (Its first growth is 1 MiB, the next one what failed: before
        // this, the log kept 1.79 MB of the 2 MiB.)
        let log_len = std::fs::metadata(dir.path().join("full.ib-log"))
            .unwrap()
            .len();
        assert!(log_len <= 1 << 20, "the log kept {log_len} bytes");
    }
    if logged {
        // `check` first checkpoints the logged commits into the data file
        // (its accounting describes a checkpoint), which needs space the
        // disk may not have: then that is the error, and nothing is lost.
        // Once space is freed, the check below must pass.
        match db.check() {
            Ok(_) => {}
            Err(Error::Io(e)) => assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}"),
            Err(e) => panic!("check on a full disk: {e}"),
        }
        assert!(
            read_all(&db) == committed,
            "a failed checkpoint lost commits"
        );
    } else {
        db.check().unwrap();
    }

    // Free space: the database checks, and writes work again.
    std::fs::remove_file(&ballast).unwrap();
    if logged {
        // A checkpoint needs room for a new copy of every page the logged
        // commits changed (the durable commit keeps the old ones until it
        // is replaced), more than the ballast gave back: until it has that
        // room it fails with ENOSPC, losing nothing; give it the room.
        match db.check() {
            Ok(_) => {}
            Err(Error::Io(e)) => assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}"),
            Err(e) => panic!("check with little space: {e}"),
        }
        assert!(read_all(&db) == committed);
        let status = Command::new("mount")
            .args(["-o", "remount,size=8m"])
            .arg(dir.path())
            .status()
            .expect("run mount");
        assert!(status.success(), "growing the tmpfs failed");
    }
    if let Err(e) = db.check() {
        panic!("logged {logged}: space was freed, and check still fails: {e}");
    }
    let mut tx = db.begin_write().unwrap();
    let t = tx.open_tree("t").unwrap();
    tx.put(&t, b"after", b"space was freed").unwrap();
    tx.commit().unwrap();
    committed.insert(b"after".to_vec(), b"space was freed".to_vec());
    assert!(read_all(&db) == committed);
    drop(db);

    let db = Database::open_with(&path, &options).unwrap();
    db.check().unwrap();
    assert!(
        read_all(&db) == committed,
        "logged {logged}: reopened database lost committed data"
    );
}

/// Bytes the file system holding `dir` can still give.
fn free_bytes(dir: &Path) -> u64 {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).unwrap();
    // SAFETY: `statvfs` fills the zeroed struct we pass and reads only the
    // NUL-terminated path.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::statvfs(path.as_ptr(), &mut st) }, 0);
    st.f_bavail as u64 * st.f_frsize as u64
}

/// A disk with room for the pages a commit writes but not for the blocks
/// the file allocates ahead of them (a growth step of 2 MiB on a 16 MiB
/// file, with 1 MiB free): the commits still go in, allocating their own
/// pages' blocks, until the disk is truly full.
#[test]
fn commits_fit_where_the_blocks_ahead_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let _mount = Mount::tmpfs(dir.path(), "32m");
    let path = dir.path().join("ahead.ib");
    let options = Options {
        logged_commits: false,
        ..Options::default()
    };
    let db = Database::open_with(&path, &options).unwrap();
    let mut tx = db.begin_write().unwrap();
    let t = tx.open_tree("t").unwrap();
    for i in 0..4_000u32 {
        tx.put(&t, &i.to_be_bytes(), &[1u8; 4000]).unwrap();
    }
    tx.commit().unwrap();
    let ps = db.stats().unwrap().page_size as u64;
    let pages_before = db.stats().unwrap().page_count;
    let file_len = std::fs::metadata(&path).unwrap().len();
    let free = 1u64 << 20;
    std::fs::write(
        dir.path().join("ballast"),
        vec![1u8; (free_bytes(dir.path()) - free) as usize],
    )
    .unwrap();
    let mut i = 4_000u32;
    let failure = loop {
        let mut tx = db.begin_write().unwrap();
        let t = tx.open_tree("t").unwrap();
        tx.put(&t, &i.to_be_bytes(), &[2u8; 4000]).unwrap();
        if let Err(e) = tx.commit() {
            break e;
        }
        i += 1;
        assert!(i < 20_000, "a disk of 1 MiB free never filled up");
    };
    match &failure {
        Error::Io(e) => assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}"),
        other => panic!("disk full gave {other:?}, not an I/O error"),
    }
    // The pages written past the file's length at the ballast (its slack
    // was allocated with it) took most of the 1 MiB left.
    let grown = db.stats().unwrap().page_count * ps;
    let beyond = grown.saturating_sub(file_len.max(pages_before * ps));
    assert!(
        beyond >= free / 2,
        "{beyond} bytes of pages past the file's {file_len} with {free} free"
    );
    drop(db);
    let db = Database::open_with(&path, &options).unwrap();
    let rx = db.begin_read().unwrap();
    let t = rx.tree("t").unwrap();
    assert_eq!(rx.get(&t, &(i - 1).to_be_bytes()).unwrap().unwrap()[0], 2);
    assert!(rx.get(&t, &i.to_be_bytes()).unwrap().is_none());
}
