//! The database: opening (choosing the newest valid commit, joining other
//! processes through the lock file) and the public [`Database`] handle.
//! The state its transactions share is `txn/shared.rs`.
//!
//! Invariants:
//! - one `Shared` per file per process: opening a path that is already open
//!   in this process returns a handle to the same instance. A handle carries
//!   its own durability default and read-only flag; options that shape the
//!   instance (`max_readers`) must match the first open's, else the open is
//!   refused, so no option is silently ignored;
//! - `writer_thread` names the thread that holds the write lock (0: none),
//!   so that a call that would wait for the write lock on that very thread
//!   fails instead of waiting forever.

use crate::sync::{ArcCell, Ordering, OwnLines};
use std::collections::HashMap;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::AtomicU64 as StdAtomicU64;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use crate::btree::page::{new_blob, seal, Limits};
use crate::catalog::Catalog;
use crate::check::{verify_commit, CheckReport, Checker};
use crate::error::{Error, Result};
use crate::options::{Durability, Options, MAX_READERS_LIMIT};
use crate::pages::MapSource;
use crate::state::{self, Chain};
use crate::stats::{CommitCounters, ReaderInfo, Stats, TreeStats};
use crate::storage::file::{DataFile, FileId};
use crate::storage::freespace::{FreeSpace, Protector};
use crate::storage::lockfile;
use crate::storage::log::RedoLog;
use crate::storage::map::Map;
use crate::storage::meta::{
    page_size_is_valid, read_zones, Meta, MAX_PAGE_SIZE, META_LEN, META_SLOTS, MIN_PAGE_SIZE,
};
use crate::txn::read::ReadTxn;
use crate::txn::reader_stripes::Stripes;
use crate::txn::readers::ReaderTable;
use crate::txn::shared::{Counters, Shared, Snapshot, WriterLock, WriterState, GRAVEYARD_CAPACITY};
use crate::txn::snapshot_lender::Lender;
use crate::txn::write::WriteTxn;

/// Open databases of this process, by file identity.
#[derive(Default)]
struct Registry {
    open: HashMap<FileId, Weak<Shared>>,
    /// Every file opened so far and its `db_id`: kept after close, so that
    /// tree handles stay valid across a reopen of the same file (16 bytes
    /// per distinct file).
    ids: HashMap<FileId, u64>,
}

impl Registry {
    fn db_id(&mut self, file: FileId) -> u64 {
        let next = self.ids.len() as u64 + 1;
        *self.ids.entry(file).or_insert(next)
    }
}

fn registry() -> &'static Mutex<Registry> {
    static REGISTRY: OnceLock<Mutex<Registry>> = OnceLock::new();
    REGISTRY.get_or_init(|| Mutex::new(Registry::default()))
}

/// An open database. Cheap to clone; `Send + Sync`. Any number of
/// processes may open the same file: readers in all of them, one writer at
/// a time.
///
/// Opening a file that this process already has open gives a handle to
/// the same instance (one reader table view, one writer lock). A handle
/// keeps the `durability` and `read_only` it was opened with (a read-only
/// handle of an instance another handle writes through cannot write);
/// `max_readers` must be the same as the first open's (else
/// `InvalidOption`), and `page_size` matters only when the file is created.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("doc.ib");
/// let db = ironbark::Database::open(&path)?;
/// let mut tx = db.begin_write()?;
/// let users = tx.open_tree("users")?;
/// tx.put(&users, b"alice", b"{\"age\": 30}")?;
/// tx.commit()?;
/// let rx = db.begin_read()?;
/// assert_eq!(rx.get(&users, b"alice")?, Some(&b"{\"age\": 30}"[..]));
/// # Ok::<(), ironbark::Error>(())
/// ```
#[derive(Clone)]
pub struct Database {
    pub(crate) shared: Arc<Shared>,
    /// Where its read transactions take their handles on the instance and
    /// its snapshot (`txn::reader_stripes`), shared by its clones.
    stripes: Arc<Stripes>,
    /// This handle's default durability for write transactions.
    durability: Durability,
    /// This handle may not write (set by `Options::read_only`).
    read_only: bool,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database")
            .field("path", &self.shared.path)
            .finish_non_exhaustive()
    }
}

impl Database {
    /// Opens the database at `path`, creating it if missing, with default
    /// [`Options`].
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("data.ib");
    /// let db = ironbark::Database::open(&path)?; // created: it did not exist
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// tx.put(&t, b"k", b"v")?;
    /// tx.commit()?;
    /// drop(db);
    /// let db = ironbark::Database::open(&path)?; // opened again: the commit is there
    /// let rx = db.begin_read()?;
    /// assert_eq!(rx.get(&rx.tree("t")?, b"k")?, Some(&b"v"[..]));
    /// # Ok::<(), ironbark::Error>(())
    /// ```
    pub fn open(path: impl AsRef<Path>) -> Result<Database> {
        Database::open_with(path, &Options::default())
    }

    /// Opens the database at `path` with `options`. Other processes may
    /// have it open too; they share the lock file `<path>-lock`. A missing
    /// file is created, and so is an empty one (zero bytes, as `tempfile`
    /// makes), unless `create` is off or the open is read-only. An open that
    /// fails leaves no lock file behind (unless another process has the
    /// database open).
    ///
    /// Errors: `NotAnIronbarkFile`, `IncompatibleVersion`, `Corrupted` for
    /// files that are not a valid ironbark database (or a damaged lock
    /// file); `InvalidOption`/`InvalidPageSize` for bad options, or for a
    /// `max_readers` other than that of this process's open instance of
    /// the file; `Io` naming the file (the data file or the lock file) that
    /// could not be opened.
    ///
    /// ```
    /// use ironbark::{Database, Durability, Error, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let options = Options {
    ///     page_size: 8192,
    ///     durability: Durability::None,
    ///     ..Options::default()
    /// };
    /// let db = Database::open_with(dir.path().join("data.ib"), &options)?;
    /// assert_eq!(db.page_size(), 8192);
    /// let no_create = Options { create: false, ..Options::default() };
    /// let missing = Database::open_with(dir.path().join("missing.ib"), &no_create);
    /// assert!(matches!(missing, Err(Error::Io(_))));
    /// # Ok::<(), ironbark::Error>(())
    /// ```
    pub fn open_with(path: impl AsRef<Path>, options: &Options) -> Result<Database> {
        let path = path.as_ref();
        if !page_size_is_valid(options.page_size as u64) {
            return Err(Error::InvalidPageSize(options.page_size as u64));
        }
        if options.max_readers == 0 || options.max_readers > MAX_READERS_LIMIT {
            return Err(Error::InvalidOption(format!(
                "max_readers must be 1 to {MAX_READERS_LIMIT}"
            )));
        }
        let region = options.branch_region_bytes;
        if region != 0 && (!region.is_power_of_two() || region < options.page_size) {
            return Err(Error::InvalidOption(format!(
                "branch_region_bytes must be 0 or a power of two of at least the page size, not {region}"
            )));
        }
        let may_create = options.create && !options.read_only;
        let mut reg = registry().lock().unwrap_or_else(|e| e.into_inner());
        if !path.exists() {
            if !may_create {
                return Err(Error::Io(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("{} does not exist", path.display()),
                )));
            }
            match DataFile::create_atomically(path, &[&initial_image(options.page_size)]) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(Error::file(path, "data file", e)),
            }
        }
        let file = DataFile::open(path, !options.read_only, options.io_hook.clone())
            .map_err(|e| Error::file(path, "data file", e))?;
        let file_id = file.id()?;
        if let Some(shared) = reg.open.get(&file_id).and_then(Weak::upgrade) {
            return Database::another_handle(shared, options);
        }
        // Not an ironbark file, or both metas damaged: fail before a lock
        // file is created beside it (unless it is blank, to be initialized).
        if let [(_, Err(e)), (_, Err(_))] = read_metas(&file, file.len()?) {
            if !may_create || blank_page_size(&file, options.page_size)?.is_none() {
                return Err(e);
            }
        }
        let db_id = reg.db_id(file_id);
        let shared = Arc::new(open_instance(path, file, file_id, options, db_id)?);
        // The commit the open loaded is lent to readers until the next.
        shared
            .lender
            .offer(&shared.published.load_full(), &shared.readers);
        reg.open.retain(|_, weak| weak.strong_count() > 0);
        reg.open.insert(file_id, Arc::downgrade(&shared));
        drop(reg);
        let db = Database::handle(shared, options);
        if let Some(lock) = db.shared.readers.lock_file() {
            if !db.shared.read_only && lock.header().logged_by.load(Ordering::Acquire) != 0 {
                // Logged commits this process cannot read (after a crash,
                // or in another process's arena): taking the write lock
                // replays them into a checkpoint.
                drop(crate::txn::recovery::lock_writer(&db.shared, true)?);
            }
            // Another process's commit: load it as a reader would, which
            // also validates its state blob now rather than later (unless
            // it is a logged commit a read-only process cannot read yet).
            match ReadTxn::begin(db.stripes.for_this_thread()) {
                Err(Error::Locked) if db.shared.read_only => {}
                other => drop(other?),
            }
            if let Some(mut w) = db.shared.try_lock_writer_if_writing() {
                db.shared.clear_stale(&mut w, true);
            }
            lock.release_gate()?;
        }
        Ok(db)
    }

    fn handle(shared: Arc<Shared>, options: &Options) -> Database {
        Database {
            stripes: Arc::new(Stripes::new(&shared)),
            shared,
            durability: options.durability,
            read_only: options.read_only,
        }
    }

    /// A handle to the instance this process has open already, if the
    /// options can be honoured by it.
    fn another_handle(shared: Arc<Shared>, options: &Options) -> Result<Database> {
        if shared.read_only && !options.read_only {
            return Err(Error::InvalidOption(format!(
                "read_only: {} is already open read-only in this process, \
                 so it cannot be opened for writing too",
                shared.path.display()
            )));
        }
        if shared.max_readers_option != options.max_readers {
            return Err(Error::InvalidOption(format!(
                "max_readers: {} is already open in this process with max_readers {}, \
                 asked for {}",
                shared.path.display(),
                shared.max_readers_option,
                options.max_readers
            )));
        }
        Ok(Database::handle(shared, options))
    }

    fn writable(&self) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnly);
        }
        Ok(())
    }

    /// Starts the write transaction, waiting while another thread or
    /// process has one open (or a read-only process without the lock file
    /// has the database open: see `Options::read_only`).
    /// `ReadOnly` for a read-only handle.
    ///
    /// Not re-entrant: on a thread that already holds the write transaction
    /// (of this or any handle to the same file) it fails with
    /// `WriteTxnOnThisThread` instead of waiting for itself forever. Use
    /// [`Database::begin_write_timeout`] to bound the wait.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// tx.put(&t, b"k", b"v")?;
    /// // Not re-entrant: a second one on this thread would wait for itself.
    /// assert!(matches!(db.begin_write(), Err(ironbark::Error::WriteTxnOnThisThread)));
    /// tx.commit()?;
    /// assert_eq!(db.begin_read()?.get(&t, b"k")?, Some(&b"v"[..]));
    /// # Ok::<(), ironbark::Error>(())
    /// ```
    pub fn begin_write(&self) -> Result<WriteTxn<'_>> {
        self.writable()?;
        WriteTxn::begin(
            &self.shared,
            crate::txn::recovery::lock_writer(&self.shared, true)?,
            self.durability,
        )
    }

    /// Starts the write transaction, or fails at once with `Busy` if a
    /// thread of this process (the calling one included) has one open,
    /// `Locked` if another process has,
    /// or `LocklessReader` if a read-only process without the lock file
    /// keeps writers out.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let tx = db.try_begin_write()?;
    /// std::thread::scope(|s| {
    ///     let other = s.spawn(|| db.try_begin_write().map(drop));
    ///     assert!(matches!(other.join().unwrap(), Err(ironbark::Error::Busy)));
    /// });
    /// tx.commit()?;
    /// assert!(db.try_begin_write().is_ok()); // free again
    /// # Ok::<(), ironbark::Error>(())
    /// ```
    pub fn try_begin_write(&self) -> Result<WriteTxn<'_>> {
        self.writable()?;
        WriteTxn::begin(
            &self.shared,
            crate::txn::recovery::lock_writer(&self.shared, false)?,
            self.durability,
        )
    }

    /// Starts the write transaction, waiting at most `timeout` for another
    /// writer; then fails with the reason `try_begin_write` gives (`Busy`,
    /// `Locked` or `LocklessReader`). `WriteTxnOnThisThread` at once if the
    /// calling thread holds the write transaction.
    ///
    /// ```
    /// use std::time::Duration;
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let tx = db.begin_write()?;
    /// std::thread::scope(|s| {
    ///     let other = s.spawn(|| db.begin_write_timeout(Duration::from_millis(20)).map(drop));
    ///     assert!(matches!(other.join().unwrap(), Err(ironbark::Error::Busy)));
    /// });
    /// tx.abort();
    /// assert!(db.begin_write_timeout(Duration::from_millis(20)).is_ok());
    /// # Ok::<(), ironbark::Error>(())
    /// ```
    pub fn begin_write_timeout(&self, timeout: Duration) -> Result<WriteTxn<'_>> {
        self.writable()?;
        if self.shared.writer_is_this_thread() {
            return Err(Error::WriteTxnOnThisThread);
        }
        let deadline = Instant::now() + timeout;
        // Polls: neither the mutex nor the file lock can wait with a
        // timeout. Short pauses first, so a brief commit costs little.
        let mut pause = Duration::from_micros(50);
        loop {
            match self.try_begin_write() {
                Err(Error::Busy | Error::Locked | Error::LocklessReader)
                    if Instant::now() < deadline =>
                {
                    let left = deadline.saturating_duration_since(Instant::now());
                    std::thread::sleep(pause.min(left));
                    pause = (pause * 2).min(Duration::from_millis(10));
                }
                other => return other,
            }
        }
    }

    /// Starts a read transaction on the newest commit of any process. Never
    /// waits; fails only with `ReadersFull` (after clearing slots of dead
    /// processes if it can).
    ///
    /// Space: while a read transaction lives, the pages of its snapshot that
    /// later commits replace cannot be reused, so a long-lived reader beside
    /// a busy writer makes the file grow by up to one copy of the data it
    /// sees (`Stats::pages_pinned_by_readers` shows how many pages); pages
    /// written and freed after it began are reused as usual. They become
    /// reusable when it ends, and `Database::shrink_to_fit` gives a free
    /// tail of the file back.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// # let mut tx = db.begin_write()?;
    /// # let t = tx.open_tree("t")?;
    /// # tx.put(&t, b"k", b"old")?;
    /// # tx.commit()?;
    /// let rx = db.begin_read()?; // a snapshot: later commits do not change it
    /// let mut tx = db.begin_write()?;
    /// tx.put(&t, b"k", b"new")?;
    /// tx.commit()?;
    /// assert_eq!(rx.get(&t, b"k")?, Some(&b"old"[..]));
    /// assert_eq!(db.begin_read()?.get(&t, b"k")?, Some(&b"new"[..]));
    /// # Ok::<(), ironbark::Error>(())
    /// ```
    pub fn begin_read(&self) -> Result<ReadTxn> {
        ReadTxn::begin(self.stripes.for_this_thread())
    }

    /// Makes every commit so far durable in the data file: a checkpoint if
    /// logged commits are pending (their pages written to the file, one
    /// `fdatasync`), else one `fdatasync` if any commit is not yet durable.
    /// Nothing to do on a read-only handle. Waits for the write lock
    /// (`WriteTxnOnThisThread` on the thread that holds it).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// tx.put(&t, b"k", b"v")?;
    /// tx.commit()?; // a logged commit: its pages are not in the data file yet
    /// let backup = dir.path().join("backup.ib");
    /// assert!(db.begin_read()?.copy_to(&backup).is_err()); // so no page copy
    /// db.checkpoint()?;
    /// db.begin_read()?.copy_to(&backup)?;
    /// let copy = ironbark::Database::open(&backup)?.begin_read()?;
    /// assert_eq!(copy.get(&copy.tree("t")?, b"k")?, Some(&b"v"[..]));
    /// # Ok::<(), ironbark::Error>(())
    /// ```
    pub fn checkpoint(&self) -> Result<()> {
        self.sync()
    }

    /// The same as [`Database::checkpoint`]: every commit so far durable.
    ///
    /// ```
    /// use ironbark::{Database, Durability, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let options = Options { durability: Durability::None, ..Options::default() };
    /// let db = Database::open_with(dir.path().join("data.ib"), &options)?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// tx.put(&t, b"k", b"v")?;
    /// tx.commit()?; // not synced
    /// let stats = db.stats()?;
    /// assert!(stats.durable_txn_id < stats.last_txn_id);
    /// db.sync()?;
    /// let stats = db.stats()?;
    /// assert_eq!(stats.durable_txn_id, stats.last_txn_id);
    /// # Ok::<(), ironbark::Error>(())
    /// ```
    pub fn sync(&self) -> Result<()> {
        if self.read_only {
            return Ok(());
        }
        let mut w = crate::txn::recovery::lock_writer(&self.shared, true)?;
        let result = crate::txn::commit::sync_published(&self.shared, &mut w);
        self.shared.save_durable(&w);
        result
    }

    /// Gives the free pages at the end of the file back to the filesystem
    /// and returns how many bytes the file lost. Makes every commit so far
    /// durable first (a sync), then writes one durable commit and one meta
    /// page, so it costs a few syncs: call it after deleting much, not after
    /// every transaction. Pages that a live reader can still see, or free
    /// pages in the middle of the file, stay (`compact_to` rewrites a file
    /// densely). Waits for the write lock; `ReadOnly` on a read-only
    /// handle.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("shrink.ib");
    /// let db = ironbark::Database::open(&path)?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// for i in 0u32..20_000 {
    ///     tx.put(&t, &i.to_be_bytes(), &[7u8; 100])?;
    /// }
    /// tx.commit()?;
    /// let mut tx = db.begin_write()?;
    /// tx.drop_tree("t")?;
    /// tx.commit()?;
    /// let released = db.shrink_to_fit()?;
    /// assert!(released > 1 << 20);
    /// # Ok::<(), ironbark::Error>(())
    /// ```
    pub fn shrink_to_fit(&self) -> Result<u64> {
        if self.read_only {
            return Err(Error::ReadOnly);
        }
        let mut w = crate::txn::recovery::lock_writer(&self.shared, true)?;
        let result = crate::txn::commit::shrink(&self.shared, &mut w);
        // Whatever step it stopped at, other processes (and this one's next
        // write lock, which reloads it) must see the durable slot as it is.
        self.shared.save_durable(&w);
        result
    }

    /// The largest key accepted, in bytes (1317 at 4 KiB pages).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// assert_eq!(db.max_key_len(), 1317); // at the default 4 KiB pages
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// tx.put(&t, &vec![b'k'; db.max_key_len()], b"v")?;
    /// let too_long = vec![b'k'; db.max_key_len() + 1];
    /// let refused = tx.put(&t, &too_long, b"v");
    /// assert!(matches!(refused, Err(ironbark::Error::KeyTooLarge { .. })));
    /// # Ok::<(), ironbark::Error>(())
    /// ```
    pub fn max_key_len(&self) -> usize {
        self.shared.limits.max_key
    }

    /// The page size of the file.
    ///
    /// ```
    /// use ironbark::{Database, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("data.ib");
    /// let db = Database::open(&path)?;
    /// assert_eq!(db.page_size(), 4096); // the default
    /// let big = dir.path().join("big.ib");
    /// let db = Database::open_with(&big, &Options { page_size: 16384, ..Options::default() })?;
    /// drop(db);
    /// assert_eq!(Database::open(&big)?.page_size(), 16384); // kept by the file
    /// # Ok::<(), ironbark::Error>(())
    /// ```
    pub fn page_size(&self) -> usize {
        self.shared.limits.page_size
    }

    /// The path this database was opened with.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("data.ib");
    /// let db = ironbark::Database::open(&path)?;
    /// assert_eq!(db.path(), path.as_path());
    /// # Ok::<(), ironbark::Error>(())
    /// ```
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// Whether this handle is read-only (`Options::read_only`).
    ///
    /// ```
    /// use ironbark::{Database, Error, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("data.ib");
    /// let db = Database::open(&path)?;
    /// assert!(!db.is_read_only());
    /// let ro = Database::open_with(&path, &Options { read_only: true, ..Options::default() })?;
    /// assert!(ro.is_read_only());
    /// assert!(matches!(ro.begin_write(), Err(Error::ReadOnly)));
    /// # Ok::<(), ironbark::Error>(())
    /// ```
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// Verifies the whole newest commit: every page's checksum and
    /// structure, key order, tree shape, the counters in the catalog, and
    /// that every page is in use exactly once or free exactly once. Runs on
    /// a read snapshot, so writers in any process go on meanwhile.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// for i in 0u32..100 {
    ///     tx.put(&t, &i.to_be_bytes(), b"v")?;
    /// }
    /// tx.commit()?;
    /// let report = db.check()?; // Err(Corrupted) on damage
    /// assert!(report.is_clean());
    /// assert_eq!((report.trees, report.entries), (1, 100));
    /// # Ok::<(), ironbark::Error>(())
    /// ```
    pub fn check(&self) -> Result<CheckReport> {
        self.with_newest(|snap, _| {
            let state = state::load(&snap.source, &snap.meta, true)?;
            Checker::new(&snap.source, snap.meta).check_all(&snap.catalog, &state)
        })
    }

    /// Runs `f` on the newest commit with its pages protected from reuse:
    /// by a reader slot of its own, or, when every slot is taken, by the
    /// write lock (not on a read-only handle, which then fails with
    /// `ReadersFull`; else it waits for a writer; on the thread that holds the
    /// write lock it fails with `WriteTxnOnThisThread` instead: that
    /// thread's transaction may be reusing the newest commit's free pages,
    /// so its lock protects nothing to read). `f` also gets the slot it
    /// holds, so that reports can leave it out.
    pub(crate) fn with_newest<T>(
        &self,
        f: impl FnOnce(&Snapshot, Option<usize>) -> Result<T>,
    ) -> Result<T> {
        if self.shared.read_only {
            let rx = self.begin_read()?;
            return f(rx.snapshot(), Some(rx.slot()));
        }
        if self.shared.published.load_full().source.arena.is_none() {
            // Nothing logged since the last checkpoint: the newest commit
            // is the file's, unless a logged commit lands before the
            // snapshot is taken.
            match self.begin_read() {
                Ok(rx) if rx.snapshot().source.arena.is_none() => {
                    return f(rx.snapshot(), Some(rx.slot()));
                }
                Ok(_) | Err(Error::ReadersFull { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        // Pages of logged commits are not in the file yet: the file's
        // accounting (and so `check` and `stats`) describes a checkpoint.
        // Under the write lock, and the snapshot taken before it is
        // released: a commit in between would put pages in the arena again
        // (session 25: `check` beside a writer thread reported "tree beyond
        // the page count" for an arena page, 29 times in 200,000).
        let mut w = crate::txn::recovery::lock_writer(&self.shared, true)?;
        if self.shared.published.load_full().source.arena.is_some() {
            // A durable checkpoint only if the newest commit is durable
            // already (its log record synced): asking for figures must not
            // change what a crash keeps.
            let newest_durable = self.shared.readers.lock_file().is_some_and(|l| {
                l.header().log_durable_txn.load(Ordering::Acquire)
                    >= self.shared.readers.published_txn()
            });
            let durability = if newest_durable {
                Durability::Immediate
            } else {
                Durability::None
            };
            let result = crate::txn::commit::checkpoint(&self.shared, &mut w, durability);
            self.shared.save_durable(&w);
            result?;
        }
        match self.begin_read() {
            Ok(rx) => {
                drop(w);
                f(rx.snapshot(), Some(rx.slot()))
            }
            Err(Error::ReadersFull { .. }) => {
                // Every slot is taken: the write lock protects the newest
                // commit's pages while `f` reads them.
                let snap = self.shared.published.load_full();
                f(&snap, None)
            }
            Err(e) => Err(e),
        }
    }

    /// Sizes, counts and counters. Takes a reader slot; when every slot is
    /// taken, waits for the write lock instead (`WriteTxnOnThisThread` on
    /// the thread that holds it), except on a read-only handle, which
    /// takes no write lock and fails with `ReadersFull`. The same holds
    /// for `check`, `check_report` and `readers`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// tx.put(&t, b"k", b"v")?;
    /// tx.commit()?;
    /// let stats = db.stats()?;
    /// assert_eq!(stats.page_size, 4096);
    /// assert_eq!(stats.last_txn_id, db.begin_read()?.txn_id());
    /// assert_eq!((stats.trees[0].name.as_str(), stats.trees[0].entries), ("t", 1));
    /// assert!(stats.counters.commits >= 1);
    /// assert_eq!(stats.live_readers, 0);
    /// # Ok::<(), ironbark::Error>(())
    /// ```
    pub fn stats(&self) -> Result<Stats> {
        self.with_newest(|snap, own_slot| self.stats_of(snap, own_slot))
    }

    fn stats_of(&self, snap: &Snapshot, own_slot: Option<usize>) -> Result<Stats> {
        let mut free = state::load(&snap.source, &snap.meta, true)?.free;
        let others: Vec<_> = self
            .shared
            .readers
            .view()
            .into_iter()
            .filter(|v| Some(v.slot) != own_slot)
            .collect();
        let oldest = others.iter().map(|v| v.txn).filter(|&t| t != 0).min();
        let free_pages = free.reusable_pages() + free.pending_pages();
        // What stays pending with the readers as the only protectors.
        let mut snapshots: Vec<u64> = others.iter().map(|v| v.txn).filter(|&t| t != 0).collect();
        snapshots.sort_unstable();
        snapshots.dedup();
        let mut protectors: Vec<Protector> = others
            .iter()
            .filter(|v| v.txn != 0)
            .map(|v| v.protector)
            .collect();
        protectors.sort_unstable();
        protectors.dedup();
        free.release(&protectors);
        let durable_txn = match self.shared.readers.lock_file() {
            // A logged commit whose record was synced is durable too.
            Some(lock) => {
                let h = lock.header();
                let logged = h.log_durable_txn.load(Ordering::Acquire);
                h.durable_txn
                    .load(Ordering::Acquire)
                    .max(logged.min(snap.txn()))
            }
            None => self
                .shared
                .writer
                .inspect(true, |w| w.durable_txn)
                .expect("waited for"),
        };
        // Arena slots of logged commits that readers keep from reuse (a
        // writer at work hides them: then only file pages are counted). A
        // read-only process's arena is read by its own readers alone, by
        // their snapshots, where their slots show the durable commit a
        // rebuild was built on (`txn::read::protector`).
        let arena_snapshots = self
            .shared
            .readers
            .own_snapshots_but(own_slot)
            .unwrap_or(snapshots);
        let arena_pinned = self
            .shared
            .writer
            .inspect(false, |w| w.arena_space.pinned_by(&arena_snapshots))
            .unwrap_or(0);
        Ok(Stats {
            page_size: self.shared.limits.page_size,
            file_size_bytes: self.shared.file.len()?,
            page_count: snap.meta.page_count,
            free_pages,
            pages_pinned_by_readers: free.pending_pages() + arena_pinned,
            last_txn_id: snap.txn(),
            durable_txn_id: durable_txn,
            // Not counting the snapshot this call holds.
            live_readers: others.len(),
            max_readers: self.shared.readers.capacity(),
            oldest_snapshot: oldest,
            trees: snap
                .catalog
                .trees
                .iter()
                .map(|t| TreeStats {
                    name: t.name.to_string(),
                    depth: t.state.root.depth,
                    entries: t.state.entries,
                    branch_pages: t.state.branch_pages,
                    leaf_pages: t.state.leaf_pages,
                    overflow_pages: t.state.overflow_pages,
                })
                .collect(),
            counters: self.counters(),
        })
    }

    /// What this process's commits have done so far (the `counters` of
    /// [`Database::stats`]), read without touching the file: unlike
    /// `stats`, this never checkpoints logged commits, so it costs a few
    /// atomic loads and leaves the work of the next checkpoint (or of the
    /// close) where it is.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let before = db.counters();
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// tx.put(&t, b"k", b"v")?;
    /// tx.commit()?;
    /// assert_eq!(db.counters().commits, before.commits + 1);
    /// # Ok::<(), ironbark::Error>(())
    /// ```
    pub fn counters(&self) -> CommitCounters {
        let c = &self.shared.counters;
        CommitCounters {
            commits: c.commits.load(Ordering::Relaxed),
            pages_written: c.pages_written.load(Ordering::Relaxed),
            write_calls: c.write_calls.load(Ordering::Relaxed),
            bytes_written: c.bytes_written.load(Ordering::Relaxed),
            bytes_mapped: c.bytes_mapped.load(Ordering::Relaxed),
            log_bytes: c.log_bytes.load(Ordering::Relaxed),
            syncs: c.syncs.load(Ordering::Relaxed),
            state_bases: c.state_bases.load(Ordering::Relaxed),
            state_seals: c.state_seals.load(Ordering::Relaxed),
            logged_commits: c.logged_commits.load(Ordering::Relaxed),
            spills: c.spills.load(Ordering::Relaxed),
            checkpoint_steps: c.checkpoint_steps.load(Ordering::Relaxed),
            checkpoint_runs_spliced: c.checkpoint_runs_spliced.load(Ordering::Relaxed),
            checkpoint_roots_grown: c.checkpoint_roots_grown.load(Ordering::Relaxed),
            checkpoint_leaves_folded: c.checkpoint_leaves_folded.load(Ordering::Relaxed),
            checkpoint_layouts_deferred: c.checkpoint_layouts_deferred.load(Ordering::Relaxed),
            values_overlaid: c.values_overlaid.load(Ordering::Relaxed),
            inserts_overlaid: c.inserts_overlaid.load(Ordering::Relaxed),
        }
    }

    /// The read transactions alive now, in every process: owner pid,
    /// snapshot, whether the owner still runs, and the free pages that
    /// cannot be reused while that snapshot lives.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// # let mut tx = db.begin_write()?;
    /// # tx.open_tree("t")?;
    /// # tx.commit()?;
    /// let rx = db.begin_read()?;
    /// let readers = db.readers()?;
    /// assert_eq!(readers.len(), 1);
    /// assert_eq!(readers[0].pid, std::process::id());
    /// assert_eq!(readers[0].snapshot_txn, rx.txn_id());
    /// assert!(readers[0].alive);
    /// drop(rx);
    /// assert!(db.readers()?.is_empty());
    /// # Ok::<(), ironbark::Error>(())
    /// ```
    pub fn readers(&self) -> Result<Vec<ReaderInfo>> {
        self.with_newest(|snap, own_slot| {
            let free = state::load(&snap.source, &snap.meta, true)?.free;
            Ok(self
                .shared
                .readers
                .view()
                .into_iter()
                .filter(|v| v.txn != 0 && Some(v.slot) != own_slot)
                .map(|v| ReaderInfo {
                    pid: v.owner.pid(),
                    snapshot_txn: v.txn,
                    alive: v.owner.is_alive(),
                    pinned_pages: free.visible_to(v.protector),
                })
                .collect())
        })
    }

    /// Frees the reader slots of processes that died while reading, so the
    /// pages their snapshots held can be reused; returns how many. The
    /// writer does this by itself when it needs space, and `open` does it
    /// too. Waits for the write lock (`WriteTxnOnThisThread` on the thread
    /// that holds it); `ReadOnly` on a read-only handle.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// # let mut tx = db.begin_write()?;
    /// # tx.open_tree("t")?;
    /// # tx.commit()?;
    /// let rx = db.begin_read()?;
    /// // Its owner (this process) is alive: the slot is not stale.
    /// assert_eq!(db.clear_stale_readers()?, 0);
    /// assert_eq!(db.readers()?[0].snapshot_txn, rx.txn_id());
    /// # Ok::<(), ironbark::Error>(())
    /// ```
    pub fn clear_stale_readers(&self) -> Result<usize> {
        self.writable()?;
        let mut w = crate::txn::recovery::lock_writer(&self.shared, true)?;
        Ok(self.shared.clear_stale(&mut w, true))
    }
}

impl Database {
    /// The full integrity check of [`Database::check`], but listing every
    /// problem it finds instead of failing with the first: a damaged page
    /// is reported and its subtree skipped, and the check goes on with the
    /// rest (up to 1000 problems).
    ///
    /// Returns `Ok` whenever the check could run, damaged or not:
    /// [`CheckReport::is_clean`] tells which, and
    /// [`CheckReport::problems`] lists the damage (also damage that stops
    /// the check early, such as an unreadable state blob). Fails only when
    /// the check cannot run: I/O errors, or `ReadersFull` on a read-only
    /// open. Like `check`, it runs on a read snapshot beside writers in any
    /// process.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// for k in [b"a", b"b", b"c"] {
    ///     tx.put(&t, k, b"v")?;
    /// }
    /// tx.commit()?;
    /// let report = db.check_report()?; // Ok, damaged or not
    /// assert!(report.is_clean(), "{:?}", report.problems);
    /// assert_eq!((report.trees, report.entries), (1, 3));
    /// # Ok::<(), ironbark::Error>(())
    /// ```
    pub fn check_report(&self) -> Result<CheckReport> {
        self.with_newest(|snap, _| {
            let state = match state::load(&snap.source, &snap.meta, true) {
                Ok(state) => state,
                Err(Error::Corrupted { page, detail }) => {
                    return Ok(CheckReport {
                        page_count: snap.meta.page_count,
                        trees: snap.catalog.trees.len(),
                        problems: vec![(page, detail)],
                        ..CheckReport::default()
                    })
                }
                Err(e) => return Err(e),
            };
            Checker::new(&snap.source, snap.meta).collect(&snap.catalog, &state)
        })
    }
}

/// Opens this process's instance: joins the other processes through the
/// lock file, or, as the first (or on a read-only filesystem, alone),
/// chooses the newest intact commit and lays out the lock file. Returns
/// with the lock file's gate held (released by `open_with`).
fn open_instance(
    path: &Path,
    file: DataFile,
    file_id: FileId,
    options: &Options,
    db_id: u64,
) -> Result<Shared> {
    // A read-only process creates the lock file only if the lock file it
    // makes is usable by the data file's owner (it is the owner, or root,
    // which gives the lock file to the owner); otherwise it reads without
    // one, rather than leave a file that locks the owner out.
    let data = file.as_file().metadata()?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    let create = !options.read_only || euid == 0 || euid == data.uid();
    let gated = match lockfile::open_gated(path, &data, create) {
        Ok(g) => Some(g),
        Err(e)
            if options.read_only
                && matches!(
                    e.raw_os_error(),
                    Some(libc::EACCES | libc::EROFS | libc::EPERM | libc::ENOENT)
                ) =>
        {
            None
        }
        Err(e) => return Err(Error::file(&lockfile::lock_path(path), "lock file", e)),
    };
    let Some(gated) = gated else {
        // No lock file: a read-only reader that keeps writing processes out
        // for as long as it is open (or fails with `Locked` if one writes
        // already), so nothing it reads is ever overwritten.
        file.lockless_reader_lock()?;
        let loaded = load(&file, options.map_reservation)?;
        let end = log_end(path, None, loaded.meta.txn, options.salvage_damaged_log)?;
        if loaded.meta.replay_end(end)?.is_some() {
            // Commits a crash left in the log: only a writer can replay
            // them, and this reader keeps writers out.
            return Err(Error::Locked);
        }
        let readers = ReaderTable::private(options.max_readers, loaded.meta.txn);
        return Ok(assemble(path, file, options, db_id, loaded, readers, None));
    };
    if gated.alone {
        let first = || -> Result<Loaded> {
            if !options.read_only {
                DataFile::clean_leftovers(path);
            }
            match load(&file, options.map_reservation) {
                Ok(loaded) => Ok(loaded),
                Err(e) => {
                    if !options.create || options.read_only {
                        return Err(e);
                    }
                    // Under the gate, alone: no other process can be
                    // initializing or using the file meanwhile.
                    let Some(page_size) = blank_page_size(&file, options.page_size)? else {
                        return Err(e);
                    };
                    initialize_in_place(&file, page_size)?;
                    load(&file, options.map_reservation)
                }
            }
        };
        let loaded = match first() {
            Ok(l) => l,
            Err(e) => {
                // Nobody else has the database open: leave no lock file
                // beside a file that does not open.
                gated.discard();
                return Err(e);
            }
        };
        let log = open_log(path, options)?;
        // Before the lock file is laid out: a step of a checkpoint whose
        // log is damaged does not open, and leaves no lock file behind.
        let salvage = options.salvage_damaged_log;
        let end = match log_end(path, log.as_ref(), loaded.meta.txn, salvage)
            .and_then(|end| loaded.meta.replay_end(end))
        {
            Ok(end) => end,
            Err(e) => {
                gated.discard();
                return Err(e);
            }
        };
        let lock = gated.initialize(
            !options.read_only,
            options.max_readers,
            file_id,
            &loaded.meta,
            loaded.meta.txn,
            loaded.slot,
        )?;
        let lock = Arc::new(lock);
        let readers = ReaderTable::shared(lock.clone(), options.read_only);
        if let Some(end) = end {
            // A crash left logged commits past the file's newest commit,
            // the newest being the log's last: `open_with` replays them
            // (the writer of any process would), and until then a
            // read-only process rebuilds them from the log
            // (`txn::recovery::follow_log`) rather than read an older one.
            lock.header().logged_by.store(u64::MAX, Ordering::Release);
            readers.publish(end);
        }
        return Ok(assemble(path, file, options, db_id, loaded, readers, log));
    }
    let lock = gated.attach(file_id)?;
    // Under the gate: a writable process joining ends logged commits (a
    // writer of another process could not continue them: `Shared::may_log`);
    // a read-only one rebuilds them from the log.
    lock.header().processes.fetch_add(1, Ordering::SeqCst);
    if !options.read_only {
        lock.header().writers.fetch_add(1, Ordering::SeqCst);
    }
    let readers = ReaderTable::shared(Arc::new(lock), options.read_only);
    let page_size = read_meta(&file, file.len()?, 0, 0)
        .map(|m| m.page_size as usize)
        .unwrap_or(options.page_size);
    let file_len = file.len()?;
    let map = map_for(&file, file_len, options.map_reservation)?;
    // A placeholder snapshot (txn 0): the first reader loads the newest.
    let placeholder = Snapshot {
        meta: Meta {
            page_size: page_size as u32,
            txn: 0,
            page_count: 0,
            state_pgno: 0,
            state_txn: 0,
            state_sum: 0,
            last_synced_txn: 0,
            log_base: 0,
            replay_to: 0,
        },
        source: MapSource {
            map: map.clone(),
            page_count: 0,
            page_size,
            arena: None,
            overlay_txn: 0,
            file_overlays: None,
        },
        catalog: Catalog::default(),
    };
    Ok(Shared {
        path: path.to_path_buf(),
        limits: Limits::new(page_size),
        broken_protocol: options.broken_protocol,
        logged_commits: options.logged_commits,
        map_reservation: options.map_reservation,
        max_dirty_bytes: options.max_dirty_bytes,
        checkpoint_log_bytes: options.checkpoint_log_bytes,
        salvage_damaged_log: options.salvage_damaged_log,
        checkpoint_step_pages: options.checkpoint_step_pages,
        branch_region_bytes: options.branch_region_bytes,
        read_only: options.read_only,
        db_id,
        max_readers_option: options.max_readers,
        writer_thread: OwnLines(StdAtomicU64::new(0)),
        published_epoch: OwnLines(StdAtomicU64::new(0)),
        graveyard: Mutex::new(Vec::with_capacity(GRAVEYARD_CAPACITY)),
        lender: Lender::new(),
        published: OwnLines(ArcCell::from_pointee(placeholder)),
        map: Mutex::new(map),
        readers: OwnLines(readers),
        writer: WriterLock::new(WriterState::new(
            FreeSpace::default(),
            Chain::default(),
            0,
            0,
            file_len,
            open_log(path, options)?,
        )),
        arena: OnceLock::new(),
        counters: OwnLines(Counters::default()),
        file,
    })
}

/// The redo log of a writable instance (`None` for a read-only one, and
/// when there is none and logged commits are off).
fn open_log(path: &Path, options: &Options) -> Result<Option<RedoLog>> {
    if options.read_only {
        return Ok(None);
    }
    let log_path = crate::storage::log::log_path(path);
    let created = !log_path.exists();
    if created && !options.logged_commits {
        // Nothing to replay, and nothing will be logged.
        return Ok(None);
    }
    let log = RedoLog::open(&log_path, options.io_hook.clone())?;
    if created {
        if let Ok(data) = std::fs::metadata(path) {
            log.match_owner(&data);
        }
    }
    Ok(Some(log))
}

/// The txn of the redo log's last record (`None`: no log, or no record),
/// read through `log` or, for an instance that keeps none, a read-only
/// handle; `Corrupted` where a record past the chain's end proves a
/// durable commit past `durable` (the data file's) damaged, unless
/// `salvage` (`txn::recovery::checked_chain_end`).
fn log_end(path: &Path, log: Option<&RedoLog>, durable: u64, salvage: bool) -> Result<Option<u64>> {
    let read_only;
    let log = match log {
        Some(l) => l,
        None => match RedoLog::open_read_only(&crate::storage::log::log_path(path))? {
            Some(l) => {
                read_only = l;
                &read_only
            }
            None => return Ok(None),
        },
    };
    let scan = log.scan()?;
    crate::txn::recovery::checked_chain_end(log, &scan, durable, salvage, path)
}

/// The instance of a process that loaded the commit itself.
fn assemble(
    path: &Path,
    file: DataFile,
    options: &Options,
    db_id: u64,
    loaded: Loaded,
    readers: ReaderTable,
    log: Option<RedoLog>,
) -> Shared {
    let Loaded {
        meta,
        slot,
        source,
        catalog,
        mut free,
        chain,
        file_len,
    } = loaded;
    // Everything free in this commit is reusable: it is durable (`load`
    // synced it), and no reader of any process exists yet.
    free.release(&[]);
    let region_pages = (options.branch_region_bytes / meta.page_size as usize) as u64;
    free.adopt_zones(region_pages, &read_zones(&file, &meta, region_pages));
    Shared {
        path: path.to_path_buf(),
        limits: Limits::new(meta.page_size as usize),
        broken_protocol: options.broken_protocol,
        logged_commits: options.logged_commits,
        map_reservation: options.map_reservation,
        max_dirty_bytes: options.max_dirty_bytes,
        checkpoint_log_bytes: options.checkpoint_log_bytes,
        salvage_damaged_log: options.salvage_damaged_log,
        checkpoint_step_pages: options.checkpoint_step_pages,
        branch_region_bytes: options.branch_region_bytes,
        read_only: options.read_only,
        db_id,
        max_readers_option: options.max_readers,
        writer_thread: OwnLines(StdAtomicU64::new(0)),
        map: Mutex::new(source.map.clone()),
        published_epoch: OwnLines(StdAtomicU64::new(0)),
        graveyard: Mutex::new(Vec::with_capacity(GRAVEYARD_CAPACITY)),
        lender: Lender::new(),
        published: OwnLines(ArcCell::from_pointee(Snapshot {
            // A step of a checkpoint is no commit a reader may see: txn 0
            // sends the first reader to the log's newest commit, which the
            // open replays (a read-only process rebuilds it from the log).
            meta: if meta.is_partial() {
                Meta { txn: 0, ..meta }
            } else {
                meta
            },
            source,
            catalog,
        })),
        readers: OwnLines(readers),
        writer: WriterLock::new(WriterState::new(free, chain, meta.txn, slot, file_len, log)),
        arena: OnceLock::new(),
        counters: OwnLines(Counters::default()),
        file,
    }
}

/// The bytes of a new file: two meta pages of txn 1 and an empty state blob.
fn initial_image(page_size: usize) -> Vec<u8> {
    let limits = Limits::new(page_size);
    let state = state::encode_base(
        &Catalog {
            next_tree_id: 1,
            trees: Default::default(),
        },
        &FreeSpace::default(),
    );
    let mut blob = new_blob(page_size, &state, 1);
    let state_sum = seal(&mut blob, META_SLOTS, 1);
    let page_count = META_SLOTS + limits.blob_pages(state.len());
    let meta = Meta {
        page_size: page_size as u32,
        txn: 1,
        page_count,
        state_pgno: META_SLOTS,
        state_txn: 1,
        state_sum,
        last_synced_txn: 1,
        log_base: 1,
        replay_to: 1,
    }
    .encode();
    let mut image = vec![0u8; page_size * META_SLOTS as usize];
    image[..META_LEN].copy_from_slice(&meta);
    image[page_size..page_size + META_LEN].copy_from_slice(&meta);
    image.extend_from_slice(&blob);
    image
}

/// The page size to initialize `file` with, if it is blank: empty, or what
/// a crash while initializing an empty file (`initialize_in_place`) can
/// leave: exactly as long as the initial image, every byte zero or the
/// image's byte at that offset. Such a file holds no data, so initializing
/// it loses nothing; any other file (a truncated database too) is left
/// alone. `preferred` (the page size asked for) is tried first.
fn blank_page_size(file: &DataFile, preferred: usize) -> Result<Option<usize>> {
    let len = file.len()?;
    if len == 0 {
        return Ok(Some(preferred));
    }
    let sizes = std::iter::once(preferred).chain(std::iter::successors(Some(MIN_PAGE_SIZE), |s| {
        (*s < MAX_PAGE_SIZE).then_some(s * 2)
    }));
    let mut bytes = Vec::new();
    for page_size in sizes {
        let image = initial_image(page_size);
        if image.len() as u64 != len {
            continue;
        }
        if bytes.is_empty() {
            bytes = vec![0u8; image.len()];
            file.read_exact_at(&mut bytes, 0)?;
        }
        if bytes.iter().zip(&image).all(|(&b, &i)| b == 0 || b == i) {
            return Ok(Some(page_size));
        }
    }
    Ok(None)
}

/// Writes the initial image into a blank `file` (see `blank_page_size`):
/// the state blob first and synced, then the metas, so that a meta that
/// survives a crash points at a durable blob; a crash before leaves a
/// blank file again.
fn initialize_in_place(file: &DataFile, page_size: usize) -> Result<()> {
    let image = initial_image(page_size);
    let metas = page_size * META_SLOTS as usize;
    file.set_len(image.len() as u64)?;
    file.write_vectored_at(&[&image[metas..]], metas as u64)?;
    file.sync_data()?;
    file.write_vectored_at(&[&image[..metas]], 0)?;
    file.sync_data()
}

/// Reads the meta in `slot`; for slot 1 the page size must be known.
fn read_meta(file: &DataFile, file_len: u64, slot: u64, page_size: u64) -> Result<Meta> {
    let offset = slot * page_size;
    if offset + META_LEN as u64 > file_len {
        return Err(Error::NotAnIronbarkFile);
    }
    let mut buf = [0u8; META_LEN];
    file.read_exact_at(&mut buf, offset)?;
    let meta = Meta::decode(&buf, slot)?;
    if slot == 1 && meta.page_size as u64 != page_size {
        return Err(Error::corrupted_page(1, "meta page sizes disagree"));
    }
    Ok(meta)
}

/// Both meta slots, each decoded or its error.
fn read_metas(file: &DataFile, file_len: u64) -> [(u64, Result<Meta>); 2] {
    let m0 = read_meta(file, file_len, 0, 0);
    let m1 = match &m0 {
        Ok(m) => read_meta(file, file_len, 1, m.page_size as u64),
        Err(_) => {
            // Slot 0 is unreadable, so the page size is unknown: try each.
            let mut found = Err(Error::NotAnIronbarkFile);
            let mut size = MIN_PAGE_SIZE as u64;
            while size <= MAX_PAGE_SIZE as u64 {
                match read_meta(file, file_len, 1, size) {
                    Ok(m) => {
                        found = Ok(m);
                        break;
                    }
                    Err(Error::NotAnIronbarkFile) => {}
                    Err(e) => found = Err(e),
                }
                size *= 2;
            }
            found
        }
    };
    [(0, m0), (1, m1)]
}

fn map_for(file: &DataFile, len: u64, reservation: u64) -> Result<Arc<Map>> {
    let map = Map::new(file.as_file(), len.saturating_mul(2), reservation)?;
    map.advise_for_file_len(len);
    Ok(Arc::new(map))
}

/// The commit an opening process chose.
struct Loaded {
    meta: Meta,
    /// The meta slot that holds it.
    slot: u64,
    source: MapSource,
    catalog: Catalog,
    free: FreeSpace,
    chain: Chain,
    file_len: u64,
}

/// Chooses the newest meta whose commit is intact (verifying the pages of
/// a commit not known durable, and syncing it), as the first process to
/// open the file.
fn load(file: &DataFile, map_reservation: u64) -> Result<Loaded> {
    let file_len = file.len()?;
    if file_len == 0 {
        return Err(Error::NotAnIronbarkFile);
    }
    let mut metas = read_metas(file, file_len);
    // Newest first; of two copies of one commit, the one marked durable at
    // a clean close first (so the open need not verify its pages).
    metas.sort_by_key(|(_, m)| {
        std::cmp::Reverse(
            m.as_ref()
                .map(|m| (m.txn, m.last_synced_txn))
                .unwrap_or((0, 0)),
        )
    });
    let map = map_for(file, file_len, map_reservation)?;
    let mut first_error = None;
    for (slot, meta) in metas {
        let meta = match meta {
            Ok(m) => m,
            Err(e) => {
                first_error.get_or_insert(e);
                continue;
            }
        };
        let page_size = meta.page_size as usize;
        if meta
            .page_count
            .checked_mul(page_size as u64)
            .is_none_or(|l| l > file_len)
        {
            first_error.get_or_insert(Error::corrupted_page(
                slot,
                format!(
                    "file is truncated: {file_len} bytes, commit needs {} pages",
                    meta.page_count
                ),
            ));
            continue;
        }
        let source = MapSource {
            map: map.clone(),
            page_count: meta.page_count,
            page_size,
            arena: None,
            overlay_txn: 0,
            file_overlays: None,
        };
        let state = match state::load(&source, &meta, true).and_then(|s| {
            if meta.last_synced_txn < meta.txn {
                verify_commit(&source, &meta, &s.catalog)?;
            }
            Ok(s)
        }) {
            Ok(s) => s,
            Err(e) => {
                first_error.get_or_insert(e);
                continue;
            }
        };
        if meta.last_synced_txn < meta.txn {
            file.sync_data()?;
        }
        return Ok(Loaded {
            meta,
            slot,
            source,
            catalog: state.catalog,
            free: state.free,
            chain: state.chain,
            file_len,
        });
    }
    Err(first_error.unwrap_or(Error::NotAnIronbarkFile))
}

/// Free-standing helper for tests of the page resolver.
#[cfg(test)]
pub(crate) fn page_of(db: &Database, pgno: u64) -> Result<Vec<u8>> {
    use crate::pages::PageSource;
    let snap = db.shared.published.load_full();
    snap.source.page(pgno).map(<[u8]>::to_vec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initial_image_opens() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.ib");
        let db = Database::open(&p).unwrap();
        assert_eq!(db.stats().unwrap().last_txn_id, 1);
        db.check().unwrap();
        assert!(page_of(&db, 2).is_ok());
    }

    /// One commit of `k` = `v` in tree `t`.
    fn put_k(db: &Database, v: &[u8]) {
        let mut tx = db.begin_write().unwrap();
        let t = tx.open_tree("t").unwrap();
        tx.put(&t, b"k", v).unwrap();
        tx.commit().unwrap();
    }

    /// A reader's last reference to a snapshot goes to the graveyard and is
    /// freed at the writer's next publish; a reference that is not the
    /// last is simply dropped.
    #[test]
    fn the_writer_frees_the_snapshots_readers_give_up() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path().join("g.ib")).unwrap();
        let commit = |v: &[u8]| put_k(&db, v);
        let graveyard = || db.shared.graveyard.lock().unwrap().len();
        commit(b"1");
        let held = db.shared.published.load_full();
        db.shared.bury(db.shared.published.load_full());
        assert_eq!(graveyard(), 0, "not the last reference");
        // The lender keeps the snapshot until a scan finds no reader at
        // its txn, and then lets it go, since someone else holds it.
        let mut commits = 0;
        while Arc::strong_count(&held) > 1 {
            commit(b"2");
            commits += 1;
            assert!(commits < 100, "the lender never let the snapshot go");
        }
        let weak = Arc::downgrade(&held);
        db.shared.bury(held);
        assert_eq!(graveyard(), 1, "the last reference");
        assert!(weak.upgrade().is_some(), "kept for the writer");
        commit(b"4");
        assert_eq!(graveyard(), 0);
        assert!(weak.upgrade().is_none(), "freed at the publish");
    }

    /// A process that has not committed since it opened lends the commit
    /// it loaded at open: its readers borrow too.
    #[test]
    fn a_reopened_database_lends_the_commit_it_loaded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.ib");
        {
            let db = Database::open(&path).unwrap();
            put_k(&db, b"1");
        }
        let db = Database::open(&path).unwrap();
        let rx = db.begin_read().unwrap();
        assert!(rx.borrows_its_snapshot());
        let t = rx.tree("t").unwrap();
        assert_eq!(rx.get(&t, b"k").unwrap(), Some(&b"1"[..]));
    }

    /// With no reader holding snapshots, commits reuse a few snapshot
    /// allocations (the lender's spares). A snapshot a reader borrows is
    /// never written over while it reads it, and a reader held over many
    /// commits keeps only its own snapshot lent, not one per commit.
    #[test]
    fn a_publish_reuses_the_snapshots_no_reader_can_hold() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path().join("s.ib")).unwrap();
        let commit = |v: &[u8]| put_k(&db, v);
        let published = || Arc::as_ptr(&db.shared.published.load_full());
        let mut seen = std::collections::HashSet::new();
        for _ in 0..200 {
            commit(b"1");
            seen.insert(published());
        }
        assert!(
            seen.len() <= 2 * crate::txn::snapshot_lender::SCAN_AT_LEAST,
            "{} allocations for 200 commits",
            seen.len()
        );
        commit(b"4");
        let rx = db.begin_read().unwrap();
        assert!(rx.borrows_its_snapshot(), "a local commit is lent");
        let held: *const Snapshot = rx.snapshot();
        let t = rx.tree("t").unwrap();
        for i in 0..1000 {
            commit(format!("v{i}").as_bytes());
            assert_ne!(published(), held, "a borrowed snapshot written over");
        }
        assert!(
            db.shared.lender.lent_len() <= crate::txn::snapshot_lender::SCAN_AT_LEAST + 1,
            "{} snapshots lent with one reader",
            db.shared.lender.lent_len()
        );
        assert_eq!(rx.txn_id() + 1000, db.begin_read().unwrap().txn_id());
        assert_eq!(rx.get(&t, b"k").unwrap(), Some(&b"4"[..]));
    }
}
