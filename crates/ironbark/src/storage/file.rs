//! The data file: create (crash-safely), lock, positioned reads and writes,
//! growth and sync. Every system call the engine makes on the file goes
//! through [`DataFile`], so that fault injection has one seam to replace.
//! The redo log beside it (`log.rs`) is a [`DataFile`] too, opened with
//! [`DataFile::open_log`]: its writes, syncs and length changes call the
//! hook's `on_log_*` methods instead, so a test can fail or record either
//! file's operations alone.
//!
//! Creation is atomic: a file appears under its name complete and synced,
//! or not at all. It is written as an unnamed file (`O_TMPFILE`) and linked
//! into place; where the filesystem lacks `O_TMPFILE`, under a temporary
//! name unique to this creation (`<name>.creating-<pid>-<nanos>-<n>`) that
//! its creator holds a lock on while it exists. A temporary file nobody
//! holds a lock on is a crashed creation's leftover, and is removed.

use std::fs::{self, File, OpenOptions};
use std::io::{self, IoSlice};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::storage::map::WriteMap;
use crate::storage::oslock::{conflicting_lock, lock_byte, LockKind};

/// The byte of the data file whose lock is the writer lock.
/// Byte locks on the data file that keep readers without a lock file and
/// writing processes apart (`declare_writing`): held shared by each reader
/// without a lock file while it is open...
const LOCKLESS_READER_BYTE: u64 = 0;
/// ... and by each process that has written (or tried to) while it has
/// the database open.
const WRITE_INTENT_BYTE: u64 = 1;

/// The largest number of buffers passed to one `pwritev` (Linux allows
/// 1024). 64, as LMDB: with 1024 buffers of one page each, the kernel's copy
/// into the page cache ran 4-5x slower on this machine's ext4 (a load of
/// 4000-byte values: 160k puts/s at 1024, 700k at 64 or 256, 480k at 16).
const IOV_MAX: usize = 64;

/// The fault-injection seam: called before each operation the engine makes
/// on an open data file. An `Err` fails the operation without performing
/// it, and the engine returns that error. Hidden from the docs: it exists
/// for the crash, I/O-error and disk-full tests. Unwind-safe, so that a
/// `Database` holding one is too (`catch_unwind` around database calls
/// compiles).
#[doc(hidden)]
pub trait IoHook:
    Send + Sync + std::panic::RefUnwindSafe + std::panic::UnwindSafe + 'static
{
    /// Before `bufs` are written back to back at byte `offset`.
    fn on_write(&self, _offset: u64, _bufs: &[&[u8]]) -> io::Result<()> {
        Ok(())
    }
    /// Before an `fdatasync`.
    fn on_sync(&self) -> io::Result<()> {
        Ok(())
    }
    /// Before the file's length is set to `len`.
    fn on_set_len(&self, _len: u64) -> io::Result<()> {
        Ok(())
    }
    /// Before `len` bytes are read at `offset` (meta pages at open, and
    /// the redo log's records when it is scanned).
    fn on_read(&self, _offset: u64, _len: usize) -> io::Result<()> {
        Ok(())
    }
    /// Before `bufs` are written back to back at byte `offset` of the redo
    /// log (records, and the zeros that grow it).
    fn on_log_write(&self, _offset: u64, _bufs: &[&[u8]]) -> io::Result<()> {
        Ok(())
    }
    /// Before an `fdatasync` of the redo log.
    fn on_log_sync(&self) -> io::Result<()> {
        Ok(())
    }
    /// Before the redo log's length is set to `len`.
    fn on_log_set_len(&self, _len: u64) -> io::Result<()> {
        Ok(())
    }
    /// Before `bufs` are written back to back at byte `offset` of a write
    /// transaction's spill file.
    fn on_spill_write(&self, _offset: u64, _bufs: &[&[u8]]) -> io::Result<()> {
        Ok(())
    }
}

/// A hook in `Options` (a newtype so that `Options` stays `Debug`).
#[doc(hidden)]
#[derive(Clone)]
pub struct IoHookHandle(pub std::sync::Arc<dyn IoHook>);

impl std::fmt::Debug for IoHookHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IoHook")
    }
}

/// Which file a [`DataFile`] is: it picks the hook methods its operations
/// call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FileKind {
    /// The database's data file.
    Data,
    /// The redo log beside it (`<data file>-log`).
    Log,
    /// A write transaction's spill file (`storage::spill`).
    Spill,
}

/// An open data file (or redo log: see [`FileKind`]).
#[derive(Debug)]
pub(crate) struct DataFile {
    file: File,
    hook: Option<IoHookHandle>,
    kind: FileKind,
}

/// The identity of a file on this machine: (device, inode).
pub(crate) type FileId = (u64, u64);

impl DataFile {
    /// Opens `path` for reading, and for writing if `writable`.
    pub(crate) fn open(
        path: &Path,
        writable: bool,
        hook: Option<IoHookHandle>,
    ) -> io::Result<DataFile> {
        let file = OpenOptions::new().read(true).write(writable).open(path)?;
        Ok(DataFile {
            file,
            hook,
            kind: FileKind::Data,
        })
    }

    /// Opens the redo log at `path` for reading and writing, creating it
    /// (empty, mode 0o600) if missing. Not created atomically: an empty or
    /// half-grown log holds no valid record, which is what a log that was
    /// never written means anyway.
    pub(crate) fn open_log(path: &Path, hook: Option<IoHookHandle>) -> io::Result<DataFile> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)?;
        Ok(DataFile {
            file,
            hook,
            kind: FileKind::Log,
        })
    }

    /// Creates a spill file (`storage::spill`) beside the data file at
    /// `path`: unnamed (`O_TMPFILE`), so that it disappears when closed,
    /// even by a crash; where the filesystem lacks `O_TMPFILE`, a file
    /// created under a temporary name (one `clean_leftovers` removes) and
    /// unlinked at once. Its writes go to this file's hook as
    /// `on_spill_write`.
    pub(crate) fn create_spill(&self, path: &Path) -> io::Result<DataFile> {
        let unnamed = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_TMPFILE)
            .mode(0o600)
            .open(parent_dir(path));
        let file = match unnamed {
            Ok(f) => f,
            Err(_) => {
                let mut name = path.file_name().unwrap_or_default().to_os_string();
                name.push(format!(
                    "{TEMP_INFIX}spill-{}-{}",
                    std::process::id(),
                    SPILL_SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                ));
                let tmp = path.with_file_name(name);
                let f = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(&tmp)?;
                fs::remove_file(&tmp)?;
                f
            }
        };
        Ok(DataFile {
            file,
            hook: self.hook.clone(),
            kind: FileKind::Spill,
        })
    }

    /// Opens the redo log at `path` for reading only; `None` if missing.
    pub(crate) fn open_log_read_only(path: &Path) -> io::Result<Option<DataFile>> {
        match File::open(path) {
            Ok(file) => Ok(Some(DataFile {
                file,
                hook: None,
                kind: FileKind::Log,
            })),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Gives the file the read and write permission bits and group (and,
    /// as root, the owner) of `like` (the data file), plus read and write
    /// for the owner, as the lock file gets them: whoever may write the
    /// data file may write this one too, and the owner always may (root may
    /// create the log beside a data file its owner has made read-only for
    /// now; once the owner makes it writable again, the log must not lock
    /// the owner out). Best effort: a failure leaves the file as created.
    pub(crate) fn match_owner(&self, like: &std::fs::Metadata) {
        use std::os::unix::fs::MetadataExt;
        let fd = self.file.as_raw_fd();
        // SAFETY: fchmod and fchown take a descriptor we hold open and plain
        // integers; they read no memory of ours.
        unsafe {
            libc::fchmod(fd, ((like.mode() & 0o666) | 0o600) as libc::mode_t);
            let uid = if libc::geteuid() == 0 {
                like.uid()
            } else {
                u32::MAX
            };
            libc::fchown(fd, uid, like.gid());
        }
    }

    fn hook(&self) -> Option<&dyn IoHook> {
        self.hook.as_ref().map(|h| &*h.0)
    }

    /// Tells the hooks of a write of `bufs` at `offset`, which they may
    /// fail (before anything is written).
    fn before_write(&self, bufs: &[&[u8]], offset: u64) -> Result<()> {
        match (self.hook(), self.kind) {
            (Some(h), FileKind::Data) => h.on_write(offset, bufs)?,
            (Some(h), FileKind::Log) => h.on_log_write(offset, bufs)?,
            (Some(h), FileKind::Spill) => h.on_spill_write(offset, bufs)?,
            (None, _) => {}
        }
        Ok(())
    }

    /// Maps the file's first `len` bytes for writing through
    /// [`DataFile::write_mapped`]. The caller guarantees the file holds
    /// them (written bytes, not holes) for as long as the map lives.
    pub(crate) fn map_writable(&self, len: u64) -> Result<WriteMap> {
        WriteMap::new(&self.file, len)
    }

    /// Writes `bufs`, back to back, at `offset` through `map` (a map of
    /// this file from [`DataFile::map_writable`]): to the hooks and to the
    /// page cache the same as [`DataFile::write_vectored_at`], but a memory
    /// copy instead of a system call. A later `sync_data` makes it durable.
    /// Inlined into the log's append, whose parts it then copies without a
    /// loop over a slice (a call cost about 90 instructions a commit).
    #[inline]
    pub(crate) fn write_mapped(
        &self,
        map: &mut WriteMap,
        bufs: &[&[u8]],
        offset: u64,
    ) -> Result<()> {
        self.before_write(bufs, offset)?;
        map.write(offset, bufs);
        Ok(())
    }

    /// Creates `path` holding exactly `parts`, back to back, atomically: the
    /// bytes are written and synced to a temporary file (unnamed where the
    /// filesystem can) that is then linked under its final name, and the
    /// directory is synced. A crash at any point leaves either no file or a
    /// complete one. Fails with `AlreadyExists` if another process created
    /// the file first. Removes the leftovers of crashed creations of `path`
    /// first.
    pub(crate) fn create_atomically(path: &Path, parts: &[&[u8]]) -> io::Result<()> {
        let dir = parent_dir(path);
        DataFile::clean_leftovers(path);
        match create_unnamed(&dir, path, parts) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => create_named(path, parts)?,
            other => other?,
        }
        File::open(&dir)?.sync_all()
    }

    /// Removes the temporary files of crashed creations of `path` (named
    /// `<name>.creating-...`): those no creator holds a lock on. Best
    /// effort: what cannot be read or removed is left.
    pub(crate) fn clean_leftovers(path: &Path) {
        let Some(name) = path.file_name() else {
            return;
        };
        let mut prefix = name.to_os_string();
        prefix.push(TEMP_INFIX);
        let prefix = prefix.as_encoded_bytes();
        let Ok(entries) = fs::read_dir(parent_dir(path)) else {
            return;
        };
        for entry in entries.flatten() {
            if entry.file_name().as_encoded_bytes().starts_with(prefix)
                && entry.file_type().is_ok_and(|t| t.is_file())
            {
                remove_if_abandoned(&entry.path());
            }
        }
    }

    /// Declares that this process writes the database, for as long as the
    /// file is open: holds byte [`WRITE_INTENT_BYTE`] shared, unless a
    /// reader without a lock file holds [`LOCKLESS_READER_BYTE`] (then
    /// `Ok(false)`, holding nothing). Such a reader cannot register its
    /// snapshot, so no process may write while it reads; it checks the
    /// other way round when it opens (`lockless_reader_lock`). Each side
    /// takes its own lock before it looks for the other's, so of two that
    /// race at least one sees the other and backs off. With `wait`, waits
    /// for such readers to close instead of returning `Ok(false)`.
    pub(crate) fn declare_writing(&self, wait: bool) -> Result<bool> {
        loop {
            lock_byte(&self.file, WRITE_INTENT_BYTE, LockKind::Shared, true)?;
            if conflicting_lock(&self.file, LOCKLESS_READER_BYTE)?.is_none() {
                return Ok(true);
            }
            lock_byte(&self.file, WRITE_INTENT_BYTE, LockKind::Unlock, false)?;
            if !wait {
                return Ok(false);
            }
            // Until the lockless readers close.
            lock_byte(&self.file, LOCKLESS_READER_BYTE, LockKind::Exclusive, true)?;
            lock_byte(&self.file, LOCKLESS_READER_BYTE, LockKind::Unlock, false)?;
        }
    }

    /// For a read-only process without a lock file: holds
    /// [`LOCKLESS_READER_BYTE`] shared for as long as the file is open, so
    /// no process starts writing (`declare_writing`); fails with `Locked`
    /// if a process writes the database already (it has declared it).
    pub(crate) fn lockless_reader_lock(&self) -> Result<()> {
        lock_byte(&self.file, LOCKLESS_READER_BYTE, LockKind::Shared, true)?;
        if conflicting_lock(&self.file, WRITE_INTENT_BYTE)?.is_some() {
            lock_byte(&self.file, LOCKLESS_READER_BYTE, LockKind::Unlock, false)?;
            return Err(Error::Locked);
        }
        Ok(())
    }

    pub(crate) fn id(&self) -> Result<FileId> {
        let m = self.file.metadata()?;
        Ok((m.dev(), m.ino()))
    }

    pub(crate) fn len(&self) -> Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    /// Reads exactly `buf.len()` bytes at `offset`; a short file is an
    /// `UnexpectedEof` I/O error.
    pub(crate) fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        if let Some(h) = self.hook() {
            h.on_read(offset, buf.len())?;
        }
        self.file.read_exact_at(buf, offset)?;
        Ok(())
    }

    /// Writes `bufs` back to back starting at `offset`, in as few `pwritev`
    /// calls as the kernel allows. Returns the number of calls made.
    pub(crate) fn write_vectored_at(&self, bufs: &[&[u8]], offset: u64) -> Result<u64> {
        self.before_write(bufs, offset)?;
        let mut calls = 0u64;
        let mut offset = offset;
        let mut index = 0usize; // first buffer not fully written
        let mut skip = 0usize; // bytes of bufs[index] already written

        // A few buffers (a log record, a meta page) go on the stack, so that
        // a commit's small writes allocate nothing.
        let mut few = [IoSlice::new(&[]); 8];
        let mut many: Vec<IoSlice<'_>> = Vec::new();
        // Empty buffers (a record's padding) are passed over: a `pwritev`
        // of nothing but them would write nothing, which reads as a failure.
        (index, skip) = past_written(bufs, index, skip, 0);
        while index < bufs.len() {
            let end = (index + IOV_MAX).min(bufs.len());
            // The first buffer from `skip` on (a retry after a short write).
            let from_skip = |i: usize| if i == 0 { skip } else { 0 };
            let slices: &[IoSlice<'_>] = if end - index <= few.len() {
                for (i, (slot, b)) in few.iter_mut().zip(&bufs[index..end]).enumerate() {
                    *slot = IoSlice::new(&b[from_skip(i)..]);
                }
                &few[..end - index]
            } else {
                many.clear();
                let rest = bufs[index..end].iter().enumerate();
                many.extend(rest.map(|(i, b)| IoSlice::new(&b[from_skip(i)..])));
                &many
            };
            let offset_arg = libc::off_t::try_from(offset)
                .map_err(|_| Error::Io(io::Error::other("file offset out of range")))?;
            // SAFETY: IoSlice is ABI-compatible with iovec; the slices borrow
            // live buffers for the duration of the call and the kernel only
            // reads them.
            let n = unsafe {
                libc::pwritev(
                    self.file.as_raw_fd(),
                    slices.as_ptr() as *const libc::iovec,
                    slices.len() as libc::c_int,
                    offset_arg,
                )
            };
            calls += 1;
            if n < 0 {
                let err = io::Error::last_os_error();
                if err.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(Error::Io(err));
            }
            if n == 0 {
                return Err(Error::Io(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "pwritev wrote nothing",
                )));
            }
            let written = n as usize;
            offset += written as u64;
            (index, skip) = past_written(bufs, index, skip, written);
        }
        Ok(calls)
    }

    pub(crate) fn set_len(&self, len: u64) -> Result<()> {
        match (self.hook(), self.kind) {
            (Some(h), FileKind::Data) => h.on_set_len(len)?,
            (Some(h), FileKind::Log) => h.on_log_set_len(len)?,
            (Some(_), FileKind::Spill) => {}
            (None, _) => {}
        }
        self.file.set_len(len)?;
        Ok(())
    }

    /// Extends the file from `from` (its length) to `to` bytes with blocks
    /// allocated but not written (`fallocate`): they read as zeros, and a
    /// store into them through a map needs no block allocated, so it cannot
    /// fault for a full disk. `Ok(false)` if the filesystem cannot allocate
    /// that way (the caller then writes zeros). Hooks see a length change.
    pub(crate) fn allocate(&self, from: u64, to: u64) -> Result<bool> {
        assert!(from < to, "allocate grows the file");
        match (self.hook(), self.kind) {
            (Some(h), FileKind::Data) => h.on_set_len(to)?,
            (Some(h), FileKind::Log) => h.on_log_set_len(to)?,
            (Some(_), FileKind::Spill) => {}
            (None, _) => {}
        }
        self.fallocate(0, from, to)
    }

    /// Allocates blocks for `from..to`, within the file's length, without
    /// writing them (`fallocate` keeping the size): they read as zeros, as
    /// the hole they fill did, so no byte changes and no hook is told.
    /// Pages written there later need no block allocated. `Ok(false)` if
    /// the filesystem cannot allocate that way.
    pub(crate) fn allocate_within(&self, from: u64, to: u64) -> Result<bool> {
        assert!(from < to, "an empty allocation");
        self.fallocate(libc::FALLOC_FL_KEEP_SIZE, from, to)
    }

    /// `fallocate(mode)` of `from..to`, retried when interrupted;
    /// `Ok(false)` if the filesystem does not support it.
    fn fallocate(&self, mode: libc::c_int, from: u64, to: u64) -> Result<bool> {
        let range = |v: u64| {
            libc::off_t::try_from(v)
                .map_err(|_| Error::Io(io::Error::other("file offset out of range")))
        };
        let (offset, len) = (range(from)?, range(to - from)?);
        loop {
            // SAFETY: `fallocate` reads no memory of ours; the descriptor
            // is open for as long as `self` lives.
            let rc = unsafe { libc::fallocate(self.file.as_raw_fd(), mode, offset, len) };
            if rc == 0 {
                return Ok(true);
            }
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => return Ok(false),
                _ => return Err(Error::Io(err)),
            }
        }
    }

    /// Makes every write so far durable (`fdatasync`: data and the size).
    pub(crate) fn sync_data(&self) -> Result<()> {
        match (self.hook(), self.kind) {
            (Some(h), FileKind::Data) => h.on_sync()?,
            (Some(h), FileKind::Log) => h.on_log_sync()?,
            (Some(_), FileKind::Spill) => {}
            (None, _) => {}
        }
        self.file.sync_data()?;
        Ok(())
    }

    /// Starts writing the file's dirty pages back, without waiting and
    /// without making anything durable: the next `sync_data` then finds
    /// most of its work done. A hint; failure is harmless and ignored.
    pub(crate) fn start_writeback(&self) {
        // SAFETY: `sync_file_range` reads no memory of ours; the descriptor
        // is open for as long as `self` lives.
        unsafe {
            libc::sync_file_range(self.file.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE);
        }
    }

    pub(crate) fn as_file(&self) -> &File {
        &self.file
    }
}

/// Where a vectored write resumes (the first buffer not fully written and
/// the bytes of it already written) after `written` more bytes from buffer
/// `index`, byte `skip`: past every buffer those bytes cover, and past any
/// empty buffer after them.
fn past_written(
    bufs: &[&[u8]],
    mut index: usize,
    mut skip: usize,
    mut written: usize,
) -> (usize, usize) {
    while index < bufs.len() {
        let left = bufs[index].len() - skip;
        if written < left {
            return (index, skip + written);
        }
        written -= left;
        index += 1;
        skip = 0;
    }
    assert_eq!(written, 0, "the kernel wrote more than it was given");
    (index, skip)
}

fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// What follows the file's name in a temporary file's name.
const TEMP_INFIX: &str = ".creating-";

/// Tells apart the named spill files one process makes.
static SPILL_SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn write_parts(f: &File, parts: &[&[u8]]) -> io::Result<()> {
    let mut offset = 0u64;
    for part in parts {
        f.write_all_at(part, offset)?;
        offset += part.len() as u64;
    }
    f.sync_all()
}

/// Creates `path` through an unnamed file in `dir`: nothing is left behind
/// by a crash. Fails (with something other than `AlreadyExists`) where the
/// filesystem or the system cannot.
fn create_unnamed(dir: &Path, path: &Path, parts: &[&[u8]]) -> io::Result<()> {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_TMPFILE)
        .mode(0o666)
        .open(dir)?;
    write_parts(&f, parts)?;
    let target = c_path(path)?;
    // By descriptor (needs CAP_DAC_READ_SEARCH), else through /proc.
    // SAFETY: linkat with a descriptor we own, an empty NUL-terminated
    // path and a live NUL-terminated target.
    let rc = unsafe {
        libc::linkat(
            f.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_FDCWD,
            target.as_ptr(),
            libc::AT_EMPTY_PATH,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    if err.kind() == io::ErrorKind::AlreadyExists {
        return Err(err);
    }
    let proc_path = c_path(Path::new(&format!("/proc/self/fd/{}", f.as_raw_fd())))?;
    // SAFETY: linkat with two live NUL-terminated paths.
    let rc = unsafe {
        libc::linkat(
            libc::AT_FDCWD,
            proc_path.as_ptr(),
            libc::AT_FDCWD,
            target.as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    Err(io::Error::last_os_error())
}

fn c_path(path: &Path) -> io::Result<std::ffi::CString> {
    std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

/// Creates `path` through a temporary file of a name no other creation
/// uses, locked while it exists so that `clean_leftovers` spares it.
fn create_named(path: &Path, parts: &[&[u8]]) -> io::Result<()> {
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    loop {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut name = path.file_name().unwrap_or_default().to_os_string();
        name.push(format!("{TEMP_INFIX}{}-{nanos}-{seq}", std::process::id()));
        let tmp = path.with_file_name(name);
        let f = match OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&tmp)
        {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        };
        // A cleaner may have taken it for a leftover between its creation
        // and our lock: then it is gone or going, and we start over.
        if !lock_byte(&f, 0, LockKind::Exclusive, false)? || !same_file(&f, &tmp) {
            continue;
        }
        let result = write_parts(&f, parts).and_then(|()| fs::hard_link(&tmp, path));
        // Ours (created new and locked), so ours to remove.
        let _ = fs::remove_file(&tmp);
        return result;
    }
}

/// Whether `path` names the file `f` is open on.
fn same_file(f: &File, path: &Path) -> bool {
    match (f.metadata(), fs::symlink_metadata(path)) {
        (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    }
}

/// Removes the temporary file `path` if no creator holds its lock.
fn remove_if_abandoned(path: &Path) {
    let Ok(f) = File::open(path) else {
        return;
    };
    // Holding the lock, no creator can take it; a creator that took it
    // earlier keeps it until it has removed the file itself.
    if lock_byte(&f, 0, LockKind::Shared, false).unwrap_or(false) && same_file(&f, path) {
        let _ = fs::remove_file(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A vectored write resumes at the first byte not written, and passes
    /// over empty buffers (a log record without padding), so that it never
    /// asks the kernel to write nothing.
    #[test]
    fn a_vectored_write_resumes_past_what_was_written_and_empty_buffers() {
        let bufs: [&[u8]; 5] = [b"", b"abc", b"", b"de", b""];
        assert_eq!(past_written(&bufs, 0, 0, 0), (1, 0));
        assert_eq!(past_written(&bufs, 1, 0, 2), (1, 2));
        assert_eq!(past_written(&bufs, 1, 2, 1), (3, 0));
        assert_eq!(past_written(&bufs, 1, 0, 4), (3, 1));
        assert_eq!(past_written(&bufs, 1, 0, 5), (5, 0));
        assert_eq!(past_written(&bufs, 3, 1, 1), (5, 0));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v");
        let file = DataFile::open_log(&path, None).unwrap();
        file.write_vectored_at(&bufs, 8).unwrap();
        file.write_vectored_at(&[b"", b""], 0).unwrap();
        assert_eq!(std::fs::read(&path).unwrap()[8..], *b"abcde");
    }

    /// The fallback for filesystems without `O_TMPFILE`, called directly.
    #[test]
    fn the_named_fallback_creates_whole_files_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.ib");
        create_named(&path, &[b"ab", b"cd"]).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"abcd");
        let again = create_named(&path, &[b"x"]).map_err(|e| e.kind());
        assert_eq!(again, Err(io::ErrorKind::AlreadyExists));
        assert_eq!(fs::read(&path).unwrap(), b"abcd");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn the_unnamed_way_is_taken_where_the_filesystem_has_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.ib");
        // tmpfs, ext4, xfs and btrfs have O_TMPFILE; the test directory
        // is on one of them in CI.
        create_unnamed(dir.path(), &path, &[b"xyz"]).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"xyz");
        let again = create_unnamed(dir.path(), &path, &[b"x"]).map_err(|e| e.kind());
        assert_eq!(again, Err(io::ErrorKind::AlreadyExists));
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
