//! The data file: create (crash-safely), lock, positioned reads and writes,
//! growth and sync. Every system call the engine makes on the file goes
//! through [`DataFile`], so that fault injection has one seam to replace.

use std::fs::{self, File, OpenOptions};
use std::io::{self, IoSlice};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::storage::oslock::{lock_byte, LockKind};

/// The byte of the data file whose lock is the writer lock.
const WRITER_BYTE: u64 = 0;

/// The largest number of buffers passed to one `pwritev` (Linux IOV_MAX).
const IOV_MAX: usize = 1024;

/// The fault-injection seam: called before each operation the engine makes
/// on an open data file. An `Err` fails the operation without performing
/// it, and the engine returns that error. Hidden from the docs: it exists
/// for the crash, I/O-error and disk-full tests.
#[doc(hidden)]
pub trait IoHook: Send + Sync + 'static {
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
    /// Before `len` bytes are read at `offset` (meta pages at open).
    fn on_read(&self, _offset: u64, _len: usize) -> io::Result<()> {
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

/// An open data file.
#[derive(Debug)]
pub(crate) struct DataFile {
    file: File,
    hook: Option<IoHookHandle>,
}

/// The identity of a file on this machine: (device, inode).
pub(crate) type FileId = (u64, u64);

impl DataFile {
    /// Opens `path` for reading, and for writing if `writable`.
    pub(crate) fn open(
        path: &Path,
        writable: bool,
        hook: Option<IoHookHandle>,
    ) -> Result<DataFile> {
        let file = OpenOptions::new().read(true).write(writable).open(path)?;
        Ok(DataFile { file, hook })
    }

    fn hook(&self) -> Option<&dyn IoHook> {
        self.hook.as_ref().map(|h| &*h.0)
    }

    /// Creates `path` holding exactly `parts`, back to back, atomically: the bytes
    /// are written and synced to a temporary file that is then linked under
    /// its final name, and the directory is synced. A crash at any point
    /// leaves either no file or a complete one. Fails with `AlreadyExists` if
    /// another process created the file first.
    pub(crate) fn create_atomically(path: &Path, parts: &[&[u8]]) -> io::Result<()> {
        let dir = parent_dir(path);
        let tmp = temp_name(path);
        let result = (|| {
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&tmp)?;
            let mut offset = 0u64;
            for part in parts {
                f.write_all_at(part, offset)?;
                offset += part.len() as u64;
            }
            f.sync_all()?;
            fs::hard_link(&tmp, path)?;
            File::open(&dir)?.sync_all()
        })();
        let _ = fs::remove_file(&tmp);
        result
    }

    /// Takes the cross-process writer lock (byte 0, exclusive). Without
    /// `wait`, `Ok(false)` if another process holds it.
    pub(crate) fn lock_writer(&self, wait: bool) -> Result<bool> {
        Ok(lock_byte(
            &self.file,
            WRITER_BYTE,
            LockKind::Exclusive,
            wait,
        )?)
    }

    pub(crate) fn unlock_writer(&self) -> Result<()> {
        lock_byte(&self.file, WRITER_BYTE, LockKind::Unlock, false)?;
        Ok(())
    }

    /// Holds the writer byte shared for as long as the file is open, so no
    /// writer can start (for a reader without a lock file). Waits for a
    /// writer that is committing now.
    pub(crate) fn lock_writer_shared(&self) -> Result<()> {
        lock_byte(&self.file, WRITER_BYTE, LockKind::Shared, true)?;
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
        if let Some(h) = self.hook() {
            h.on_write(offset, bufs)?;
        }
        let mut calls = 0u64;
        let mut offset = offset;
        let mut index = 0usize; // first buffer not fully written
        let mut skip = 0usize; // bytes of bufs[index] already written
        while index < bufs.len() {
            let end = (index + IOV_MAX).min(bufs.len());
            let slices: Vec<IoSlice<'_>> = bufs[index..end]
                .iter()
                .enumerate()
                .map(|(i, b)| IoSlice::new(if i == 0 { &b[skip..] } else { b }))
                .collect();
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
            let mut written = n as usize;
            offset += written as u64;
            while written > 0 {
                let left = bufs[index].len() - skip;
                if written >= left {
                    written -= left;
                    index += 1;
                    skip = 0;
                } else {
                    skip += written;
                    written = 0;
                }
            }
        }
        Ok(calls)
    }

    pub(crate) fn set_len(&self, len: u64) -> Result<()> {
        if let Some(h) = self.hook() {
            h.on_set_len(len)?;
        }
        self.file.set_len(len)?;
        Ok(())
    }

    /// Makes every write so far durable (`fdatasync`: data and the size).
    pub(crate) fn sync_data(&self) -> Result<()> {
        if let Some(h) = self.hook() {
            h.on_sync()?;
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

fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn temp_name(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".creating-{}", std::process::id()));
    path.with_file_name(name)
}
