//! Hot compaction: [`Database::compact_to`] and [`ReadTxn::compact_to`]
//! write one read snapshot into a new file holding only the live data, every
//! tree rewritten densely.
//!
//! Invariants:
//! - Everything written is read through verified cursors: every tree page
//!   and overflow run of the snapshot is checked against the checksum its
//!   parent records before its bytes are used. Damage fails the compaction
//!   with `Error::Corrupted` naming the page; it is never written into the
//!   new file under fresh checksums (which would make it pass `check`).
//! - Each tree is loaded in key order, so every insert appends at the right
//!   edge and the write path's sequential split leaves pages full.
//! - The file appears under its name whole or not at all: it is built
//!   under a unique temporary name in the target directory, synced, linked
//!   under its final name (a link never replaces a file that appeared
//!   meanwhile) and the directory synced. On failure the temporary file and
//!   its lock file are removed, and nothing is left under the final name.
//! - The source is only read: writers in any process go on committing; the
//!   snapshot's read slot keeps its pages from reuse until the end.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::db::Database;
use crate::error::{Error, Result};
use crate::options::{Durability, Options};
use crate::storage::lockfile::lock_path;
use crate::txn::read::ReadTxn;

/// Bytes of keys and values per write transaction of the new file: large
/// transactions amortise the commits; each one's dirty pages stay in
/// memory until it commits.
const BATCH_BYTES: usize = 32 << 20;

/// Distinguishes the temporary files of compactions running at once in one
/// process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// What [`Database::compact_to`] wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Compacted {
    /// The txn id of the snapshot that was compacted.
    pub txn_id: u64,
    /// Trees written (empty ones included).
    pub trees: usize,
    /// Entries written over all trees.
    pub entries: u64,
}

impl Database {
    /// Writes the newest commit into a new database file at `path` holding
    /// only the live data: a hot, compacting backup (like `mdb_copy -c`).
    ///
    /// It reads one snapshot, so writers in any process go on committing
    /// meanwhile and the new file holds exactly one commit. Every tree is
    /// rewritten in key order with full pages, so the file is about the
    /// size of the live data. Every page is verified as it is read (see
    /// [`ReadTxn::range_verified`]): a damaged page fails the compaction
    /// with [`Error::Corrupted`] naming it, instead of being copied under a
    /// fresh checksum. The file is built under a temporary name in the same
    /// directory, synced, and linked under `path` only when complete; on
    /// any failure nothing is left behind. `path` must not exist
    /// (`Error::Io` of kind `AlreadyExists`). The new file has the page
    /// size of this one.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("users")?;
    /// for i in 0..1000u32 {
    ///     tx.put(&t, &i.to_be_bytes(), b"value")?;
    /// }
    /// tx.commit()?;
    ///
    /// let done = db.compact_to(dir.path().join("small.ib"))?;
    /// assert_eq!((done.trees, done.entries), (1, 1000));
    /// let small = ironbark::Database::open(dir.path().join("small.ib"))?;
    /// small.check()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn compact_to(&self, path: impl AsRef<Path>) -> Result<Compacted> {
        self.begin_read()?.compact_to(path)
    }
}

impl ReadTxn {
    /// [`Database::compact_to`] of this snapshot: for a caller that wants
    /// to know the snapshot (its txn id, its trees) before compacting it.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// # let mut tx = db.begin_write()?;
    /// # let t = tx.open_tree("t")?;
    /// # tx.put(&t, b"k", b"v")?;
    /// # tx.commit()?;
    /// let rx = db.begin_read()?;
    /// let done = rx.compact_to(dir.path().join("small.ib"))?;
    /// assert_eq!(done.txn_id, rx.txn_id());
    /// assert_eq!((done.trees, done.entries), (1, 1));
    /// let small = ironbark::Database::open(dir.path().join("small.ib"))?;
    /// let srx = small.begin_read()?;
    /// assert_eq!(srx.get(&srx.tree("t")?, b"k")?, Some(&b"v"[..]));
    /// # Ok(())
    /// # }
    /// ```
    pub fn compact_to(&self, path: impl AsRef<Path>) -> Result<Compacted> {
        let path = path.as_ref();
        if fs::symlink_metadata(path).is_ok() {
            return Err(Error::Io(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} already exists", path.display()),
            )));
        }
        let tmp = temp_path(path)?;
        let result = self.write_compacted(&tmp).and_then(|(trees, entries)| {
            // A link, not a rename: it never replaces a file created at
            // `path` meanwhile.
            fs::hard_link(&tmp, path)?;
            Ok(Compacted {
                txn_id: self.txn_id(),
                trees,
                entries,
            })
        });
        let _ = fs::remove_file(&tmp);
        let _ = fs::remove_file(lock_path(&tmp));
        let _ = fs::remove_file(crate::storage::log::log_path(&tmp));
        let done = result?;
        if let Err(e) = File::open(parent_dir(path)).and_then(|d| d.sync_all()) {
            // The name may not survive a crash: do not report a backup
            // that might vanish.
            let _ = fs::remove_file(path);
            return Err(e.into());
        }
        Ok(done)
    }

    /// Writes every tree of this snapshot into a new database at `tmp`,
    /// synced; returns the trees and entries written.
    fn write_compacted(&self, tmp: &Path) -> Result<(usize, u64)> {
        let options = Options {
            page_size: self.snapshot().source.page_size,
            durability: Durability::None,
            ..Options::default()
        };
        let out = Database::open_with(tmp, &options)?;
        let names = self.list_trees();
        let mut entries = 0u64;
        for name in &names {
            // The kind is kept, and the stored keys copied as they are.
            let kind = self.tree_kind(name)?;
            let from = self.tree_of_kind(name, kind)?;
            let mut tx = out.begin_write()?;
            let mut to = tx.open_tree_kind(name, kind)?;
            let mut batch = 0usize;
            for entry in self.iter_verified(&from)? {
                let (k, v) = entry?;
                tx.put(&to, k, v)?;
                entries += 1;
                batch += k.len() + v.len();
                if batch >= BATCH_BYTES {
                    tx.commit()?;
                    tx = out.begin_write()?;
                    to = tx.tree_of_kind(name, kind)?;
                    batch = 0;
                }
            }
            tx.commit()?;
        }
        out.sync()?;
        Ok((names.len(), entries))
    }
}

/// A name for the file under construction beside `path`, unused now.
fn temp_path(path: &Path) -> Result<PathBuf> {
    let name = path.file_name().ok_or_else(|| {
        Error::Io(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}: not a file name", path.display()),
        ))
    })?;
    loop {
        let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(".compacting-{}-{n}", std::process::id()));
        let tmp = path.with_file_name(tmp_name);
        // A leftover of a crashed compaction must not be opened and added
        // to: take the next name.
        if fs::symlink_metadata(&tmp).is_err() && fs::symlink_metadata(lock_path(&tmp)).is_err() {
            return Ok(tmp);
        }
    }
}

fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}
