//! The database: opening (choosing the newest valid commit), the state
//! shared by all transactions, and the public [`Database`] handle.
//!
//! Invariants:
//! - `published` always holds the newest commit, whose pages are all in the
//!   file below its `page_count`;
//! - the writer state (behind one mutex) is only touched by the thread that
//!   holds the write transaction, or by `sync`;
//! - one `Shared` per file per process: opening a path that is already open
//!   in this process returns the same instance.

use crate::sync::{AtomicU64, Ordering};
use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};

use arc_swap::ArcSwap;

use crate::btree::page::{self, new_blob, seal, Limits};
use crate::catalog::{self, Catalog};
use crate::check::{verify_commit, CheckReport, Checker};
use crate::error::{Error, Result};
use crate::options::{BrokenProtocol, Durability, Options, MAX_READERS_LIMIT};
use crate::pages::{MapSource, PageSource};
use crate::stats::{CommitCounters, Stats, TreeStats};
use crate::storage::file::{DataFile, FileId};
use crate::storage::freespace::FreeSpace;
use crate::storage::map::Map;
use crate::storage::meta::{
    page_size_is_valid, Meta, MAX_PAGE_SIZE, META_LEN, META_SLOTS, MIN_PAGE_SIZE,
};
use crate::txn::read::ReadTxn;
use crate::txn::readers::ReaderTable;
use crate::txn::write::WriteTxn;

/// One committed state, as readers see it.
pub(crate) struct Snapshot {
    pub(crate) meta: Meta,
    pub(crate) source: MapSource,
    pub(crate) catalog: Catalog,
}

impl Snapshot {
    pub(crate) fn txn(&self) -> u64 {
        self.meta.txn
    }
}

/// What only the writer touches.
pub(crate) struct WriterState {
    pub(crate) free: FreeSpace,
    /// The newest commit known durable, and the meta slot that holds it.
    pub(crate) durable_txn: u64,
    pub(crate) durable_slot: u64,
    /// The file's length in bytes (grown in chunks ahead of use).
    pub(crate) file_len: u64,
    pub(crate) map: Arc<Map>,
    /// Set when an fsync failed: the kernel may have dropped dirty pages, so
    /// no further commit can be trusted until the file is reopened.
    pub(crate) poisoned: bool,
}

/// Counters of the commit path, for `stats()`.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) commits: AtomicU64,
    pub(crate) pages_written: AtomicU64,
    pub(crate) write_calls: AtomicU64,
    pub(crate) bytes_written: AtomicU64,
    pub(crate) syncs: AtomicU64,
}

pub(crate) struct Shared {
    pub(crate) path: PathBuf,
    pub(crate) file: DataFile,
    pub(crate) limits: Limits,
    pub(crate) default_durability: Durability,
    pub(crate) broken_protocol: Option<BrokenProtocol>,
    pub(crate) published: ArcSwap<Snapshot>,
    /// The txn of `published`, stored after it (see `txn::readers`).
    pub(crate) published_txn: AtomicU64,
    pub(crate) readers: ReaderTable,
    pub(crate) writer: Mutex<WriterState>,
    pub(crate) counters: Counters,
}

impl Shared {
    pub(crate) fn lock_writer(&self) -> MutexGuard<'_, WriterState> {
        self.writer.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn publish(&self, snapshot: Snapshot) {
        let txn = snapshot.txn();
        self.published.store(Arc::new(snapshot));
        self.published_txn.store(txn, Ordering::SeqCst);
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // A failure here only means the next open verifies the newest
        // commit's pages, as after a crash.
        let _ = crate::txn::commit::mark_clean(self);
        // The registry entry stays (dead): it tells a concurrent `open` that
        // this process is closing the file, so its lock is about to go.
    }
}

type Registry = Mutex<HashMap<FileId, Weak<Shared>>>;

/// Open databases of this process, by file identity.
fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| Mutex::new(HashMap::new()))
}

/// An open database. Cheap to clone (all clones share one instance);
/// `Send + Sync`.
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
    pub fn open(path: impl AsRef<Path>) -> Result<Database> {
        Database::open_with(path, &Options::default())
    }

    /// Opens the database at `path` with `options`.
    ///
    /// Errors: `Locked` if another process has it open; `NotAnIronbarkFile`,
    /// `IncompatibleVersion`, `Corrupted` for files that are not a valid
    /// ironbark database; `InvalidOption`/`InvalidPageSize` for bad options.
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
        let mut reg = registry().lock().unwrap_or_else(|e| e.into_inner());
        if !path.exists() {
            if !options.create {
                return Err(Error::Io(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("{} does not exist", path.display()),
                )));
            }
            match DataFile::create_atomically(path, &[&initial_image(options.page_size)]) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(Error::Io(e)),
            }
        }
        let file = DataFile::open(path, options.io_hook.clone())?;
        let file_id = file.id()?;
        let closing_here = match reg.get(&file_id) {
            Some(weak) => match weak.upgrade() {
                Some(shared) => return Ok(Database { shared }),
                None => true,
            },
            None => false,
        };
        lock_file(&file, closing_here)?;
        let shared = Arc::new(load(path, file, options)?);
        reg.insert(file_id, Arc::downgrade(&shared));
        Ok(Database { shared })
    }

    /// Starts the write transaction, waiting while another one is open.
    pub fn begin_write(&self) -> Result<WriteTxn<'_>> {
        WriteTxn::begin(&self.shared, self.shared.lock_writer())
    }

    /// Starts the write transaction, or fails with `Busy` at once if another
    /// one is open.
    pub fn try_begin_write(&self) -> Result<WriteTxn<'_>> {
        match self.shared.writer.try_lock() {
            Ok(guard) => WriteTxn::begin(&self.shared, guard),
            Err(std::sync::TryLockError::Poisoned(e)) => {
                WriteTxn::begin(&self.shared, e.into_inner())
            }
            Err(std::sync::TryLockError::WouldBlock) => Err(Error::Busy),
        }
    }

    /// Starts a read transaction on the newest commit. Never waits; fails
    /// only with `ReadersFull`.
    pub fn begin_read(&self) -> Result<ReadTxn> {
        ReadTxn::begin(self.shared.clone())
    }

    /// Makes every commit so far durable (one `fdatasync` if any commit is
    /// not yet durable).
    pub fn sync(&self) -> Result<()> {
        let mut w = self.shared.lock_writer();
        crate::txn::commit::sync_published(&self.shared, &mut w)
    }

    /// The largest key accepted, in bytes (1321 at 4 KiB pages).
    pub fn max_key_len(&self) -> usize {
        self.shared.limits.max_key
    }

    /// The page size of the file.
    pub fn page_size(&self) -> usize {
        self.shared.limits.page_size
    }

    /// The path this database was opened with.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// Verifies the whole newest commit: every page's checksum and
    /// structure, key order, tree shape, the counters in the catalog, and
    /// that every page is in use exactly once or free exactly once.
    pub fn check(&self) -> Result<CheckReport> {
        // The write lock keeps the free-space map and the snapshot in step.
        let _w = self.shared.lock_writer();
        let snap = self.shared.published.load_full();
        Checker::new(&snap.source, snap.meta).check_all(&snap.catalog, &self.free_extents(&snap)?)
    }

    fn free_extents(&self, snap: &Snapshot) -> Result<Vec<crate::storage::freespace::Extent>> {
        let state = load_state(&snap.source, &snap.meta)?;
        Ok(state.free)
    }

    /// Sizes, counts and counters.
    pub fn stats(&self) -> Result<Stats> {
        let snap = self.shared.published.load_full();
        let (free_pages, pinned_pages, durable_txn) = {
            let w = self.shared.lock_writer();
            let horizon = self.shared.readers.oldest().unwrap_or(u64::MAX);
            (
                w.free.reusable_pages() + w.free.pending_pages(),
                w.free.pending_pages_after(horizon),
                w.durable_txn,
            )
        };
        let c = &self.shared.counters;
        Ok(Stats {
            page_size: self.shared.limits.page_size,
            file_size_bytes: self.shared.file.len()?,
            page_count: snap.meta.page_count,
            free_pages,
            pages_pinned_by_readers: pinned_pages,
            last_txn_id: snap.txn(),
            durable_txn_id: durable_txn,
            live_readers: self.shared.readers.live(),
            max_readers: self.shared.readers.capacity(),
            oldest_snapshot: self.shared.readers.oldest(),
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
            counters: CommitCounters {
                commits: c.commits.load(Ordering::Relaxed),
                pages_written: c.pages_written.load(Ordering::Relaxed),
                write_calls: c.write_calls.load(Ordering::Relaxed),
                bytes_written: c.bytes_written.load(Ordering::Relaxed),
                syncs: c.syncs.load(Ordering::Relaxed),
            },
        })
    }
}

/// Locks the data file for this process. If another thread of this process
/// is closing the same file right now, its lock goes away as soon as its
/// last map is unmapped: wait for that (briefly) instead of failing.
fn lock_file(file: &DataFile, closing_here: bool) -> Result<()> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        match file.lock_exclusive() {
            Err(Error::Locked) if closing_here && std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            other => return other,
        }
    }
}

/// The bytes of a new file: two meta pages of txn 1 and an empty state blob.
fn initial_image(page_size: usize) -> Vec<u8> {
    let limits = Limits::new(page_size);
    let state = catalog::encode(
        &Catalog {
            next_tree_id: 1,
            trees: Vec::new(),
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
    }
    .encode();
    let mut image = vec![0u8; page_size * META_SLOTS as usize];
    image[..META_LEN].copy_from_slice(&meta);
    image[page_size..page_size + META_LEN].copy_from_slice(&meta);
    image.extend_from_slice(&blob);
    image
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

/// Reads and decodes the state blob a meta points to.
pub(crate) fn load_state(src: &MapSource, meta: &Meta) -> Result<catalog::State> {
    let run = src.blob_run(meta.state_pgno)?;
    if !page::checksum_ok(run) || page::stored_sum(run) != meta.state_sum {
        return Err(Error::corrupted_page(
            meta.state_pgno,
            "state blob checksum mismatch",
        ));
    }
    let data = page::blob_data(run, meta.state_pgno, Some(meta.state_txn), None)?;
    catalog::decode(data, meta.state_pgno, meta.page_count, meta.txn)
}

fn map_for(file: &DataFile, len: u64) -> Result<Arc<Map>> {
    Ok(Arc::new(Map::new(file.as_file(), len.saturating_mul(2))?))
}

/// Chooses the newest meta whose commit is intact, and builds the instance.
fn load(path: &Path, file: DataFile, options: &Options) -> Result<Shared> {
    let file_len = file.len()?;
    if file_len == 0 {
        return Err(Error::NotAnIronbarkFile);
    }
    let mut metas = read_metas(&file, file_len);
    metas.sort_by_key(|(_, m)| std::cmp::Reverse(m.as_ref().map(|m| m.txn).unwrap_or(0)));
    let map = map_for(&file, file_len)?;
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
        };
        let state = match load_state(&source, &meta).and_then(|s| {
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
        // Everything free in this commit is reusable once the commit is
        // durable: nothing older can be opened again, and no reader exists.
        let mut free = FreeSpace::default();
        for e in &state.free {
            free.add_reusable(*e);
        }
        if meta.last_synced_txn < meta.txn {
            file.sync_data()?;
        }
        let shared = Shared {
            path: path.to_path_buf(),
            limits: Limits::new(page_size),
            default_durability: options.durability,
            broken_protocol: options.broken_protocol,
            published: ArcSwap::from_pointee(Snapshot {
                meta,
                source,
                catalog: state.catalog,
            }),
            published_txn: AtomicU64::new(meta.txn),
            readers: ReaderTable::new(options.max_readers),
            writer: Mutex::new(WriterState {
                free,
                durable_txn: meta.txn,
                durable_slot: slot,
                file_len,
                map,
                poisoned: false,
            }),
            counters: Counters::default(),
            file,
        };
        return Ok(shared);
    }
    Err(first_error.unwrap_or(Error::NotAnIronbarkFile))
}

/// Free-standing helper for tests of the page resolver.
#[cfg(test)]
pub(crate) fn page_of(db: &Database, pgno: u64) -> Result<Vec<u8>> {
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
}
