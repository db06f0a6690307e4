//! The lock file `<data file>-lock`: what processes sharing one database
//! share in memory. It is mapped read-write and shared by every process that
//! has the database open, and holds:
//!
//! - a header: the txn of the newest commit and a copy of its meta page (so
//!   a process learns of another's commit without reading the data file),
//!   the durable txn and meta slot (the writer's crash-safety state), and
//!   the count of live readers;
//! - the reader table: one 64-byte slot per read transaction, holding the
//!   owner process and the snapshot's txn (`txn::readers`).
//!
//! It is not durable state: the first process to open the database
//! rebuilds it from the data file, and it can be deleted whenever no process
//! has the database open. A first process whose open fails deletes it
//! (under the gate), so every process re-checks after taking the gate that
//! the file it holds is still the one under the name.
//!
//! Whoever creates it gives it the data file's permission bits and group
//! (and, as root, its owner), so every user who may write the data file
//! may write the lock file too (see `db::open_instance` for which read-only
//! opens create it). Which process is first is decided with byte locks
//! (`storage::oslock`) on the lock file itself:
//!
//! - byte 0, the *gate*: held exclusively while a process opens or closes,
//!   so that opening and closing never interleave;
//! - byte 1, *liveness*: held shared by every process with the database
//!   open. A process that can lock it exclusively (under the gate) is alone:
//!   it initialises the file when opening, and marks the data file clean
//!   when closing;
//! - bytes from 2^32 on, *owner tokens*: a process that writes locks one
//!   of them exclusively for as long as it has the database open; the
//!   writer lock word (`Header::writer`) names the holder by it, so a
//!   waiting process can tell a dead holder from a live one.
//!
//! The writer lock itself is a word in the header, taken and released with
//! atomics and waited for with a futex: a write transaction makes no
//! system call for it. Readers that cannot use a lock file (a read-only
//! mount) are kept apart from writing processes with byte locks on the
//! data file instead (see `storage::file`).
//!
//! Invariant: after `initialize` or `attach` returns, the header and slots
//! are only ever accessed through atomics; the layout is validated before
//! the first access (a foreign or truncated lock file is an error).

use std::fs::{self, File, Metadata, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::storage::file::FileId;
use crate::storage::meta::{Meta, META_LEN};
use crate::storage::oslock::{conflicting_lock, lock_byte, LockKind};
use crate::sync::{fence, AtomicU64, Ordering};

/// One slot, on its own cache line.
#[repr(C, align(64))]
pub(crate) struct Slot {
    pub(crate) owner: AtomicU64,
    pub(crate) txn: AtomicU64,
}

/// The words of the table that the protocol shares besides the slots.
#[repr(C)]
pub(crate) struct TableHeader {
    /// The txn of the newest commit. Readers only load it, so its cache
    /// line stays shared among their cores; nothing a reader writes is
    /// outside its own slot.
    pub(crate) published_txn: AtomicU64,
    /// The high-water mark of the reader table: no slot at or above it has
    /// been claimed since the table was laid out, so a writer's scan stops
    /// there (`ReaderTable::snapshots`). Written only by a claim that goes
    /// past it (a thread's first read transaction, about), never by a
    /// reader's every transaction: a counter of claimed slots that every
    /// reader wrote was here before, and made readers of different cores
    /// contend.
    pub(crate) slots_used: AtomicU64,
}

const MAGIC: u64 = u64::from_le_bytes(*b"ibLOCK\0\0");
/// 6: `TableHeader::slots_used` (a process of version 5 would claim slots
/// without raising it, unseen by a version-6 writer's scan).
/// 7: a read-only process's slot marks its txn as a replay's (the top
/// bit, `txn::readers`), which a version-6 writer would take for a txn
/// newer than any and so protect nothing for.
const LOCK_FORMAT_VERSION: u64 = 7;
/// Bytes before the first reader slot.
pub(crate) const HEADER_LEN: usize = 4096;
const SLOT_LEN: usize = 64;
const GATE_BYTE: u64 = 0;
const LIVENESS_BYTE: u64 = 1;
/// The first of the bytes that writing processes lock exclusively for as
/// long as they have the database open, one each: the owner tokens of the
/// writer lock (past the file's end; a byte lock needs no byte).
const OWNER_BYTE_BASE: u64 = 1 << 32;
/// Owner tokens are `OWNER_BYTE_BASE + pid + k * 2^22` for the first `k`
/// below this whose byte is free (pids of other PID namespaces may clash).
const OWNER_TOKEN_TRIES: u64 = 64;
/// The bit of [`Header::writer`] that says a process sleeps waiting for it
/// (above every owner token).
pub(crate) const WRITER_WAITERS: u64 = 1 << 63;
/// 64-bit words per meta copy: a stamp, then the meta's bytes.
const META_WORDS: usize = 16;

/// The header, at offset 0 of the lock file.
#[repr(C)]
pub(crate) struct Header {
    magic: AtomicU64,
    version: AtomicU64,
    slot_count: AtomicU64,
    page_size: AtomicU64,
    data_dev: AtomicU64,
    data_ino: AtomicU64,
    /// The newest commit's txn and the live-reader count.
    pub(crate) table: TableHeader,
    /// The newest durable commit and the meta slot that holds it. Written
    /// only by the writer.
    pub(crate) durable_txn: AtomicU64,
    pub(crate) durable_slot: AtomicU64,
    /// Non-zero after an fsync failed in any process: no process commits
    /// again until the database is reopened by a first process.
    pub(crate) poisoned: AtomicU64,
    /// The processes with the database open (set to 1 by the first, one
    /// more per joining process, one less per closing one; a crashed
    /// process leaves it too high, which only disables logged commits
    /// until the next first process). Changed under the gate.
    pub(crate) processes: AtomicU64,
    /// Non-zero while the newest commits are logged commits whose pages
    /// live in one process's arena: that process's `ProcessId` word (or
    /// `u64::MAX`: an unknown, crashed one). A writer of any other process
    /// first replays the log into a checkpoint (`txn::recovery`).
    pub(crate) logged_by: AtomicU64,
    /// The processes with the database open for writing (counted like
    /// `processes`): logged commits are made only while it is 1, since the
    /// other processes are read-only ones, which rebuild logged commits
    /// from the log (`txn::recovery::follow_log`).
    pub(crate) writers: AtomicU64,
    /// The newest logged commit whose log record was synced (durable
    /// without being in the data file's durable commit). Written only by
    /// the writer.
    pub(crate) log_durable_txn: AtomicU64,
    /// The cross-process writer lock: 0 when free, else the owner token of
    /// the process that holds it (see [`LockFile::claim_owner_token`]),
    /// with [`WRITER_WAITERS`] set while another process sleeps waiting for
    /// it. Taken and released with atomics (`txn::shared`), so a write
    /// transaction costs no system call; a std atomic (not loom's) because
    /// processes sleep on it with a futex.
    pub(crate) writer: std::sync::atomic::AtomicU64,
    /// Copies of the two newest metas, by txn parity. Word 0 is a stamp: the
    /// meta's txn when the copy is whole, 0 while it is being written.
    metas: [[AtomicU64; META_WORDS]; 2],
}

/// An open, mapped lock file.
pub(crate) struct LockFile {
    file: File,
    path: PathBuf,
    ptr: *mut u8,
    len: usize,
    slot_count: usize,
}

// SAFETY: the mapping is only accessed through atomics (`Header`, `Slot`),
// which are `Sync`; the pointer stays valid until `Drop`.
unsafe impl Send for LockFile {}
// SAFETY: as above.
unsafe impl Sync for LockFile {}

/// The lock file's path for the data file `data`.
pub(crate) fn lock_path(data: &Path) -> PathBuf {
    let mut name = data.file_name().unwrap_or_default().to_os_string();
    name.push("-lock");
    data.with_file_name(name)
}

/// A lock file opened with the gate held, not yet mapped.
pub(crate) struct Gated {
    file: File,
    path: PathBuf,
    /// No other process has the database open.
    pub(crate) alone: bool,
}

/// Opens (creating if `create`, shaped after the data file's metadata
/// `data_meta`) the lock file of `data` and takes the gate. Fails with the
/// OS error if the file cannot be opened read-write (`NotFound` if it does
/// not exist and not `create`).
pub(crate) fn open_gated(data: &Path, data_meta: &Metadata, create: bool) -> io::Result<Gated> {
    let path = lock_path(data);
    loop {
        let file = match OpenOptions::new().read(true).write(true).open(&path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound && create => {
                match create_like(&path, data_meta) {
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                    other => other?,
                }
            }
            other => other?,
        };
        lock_byte(&file, GATE_BYTE, LockKind::Exclusive, true)?;
        // A first process whose open failed may have deleted the file while
        // we waited for the gate: then start over with the current one.
        // (`metadata` follows a symlink, as `open` did.)
        let current = match fs::metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let held = file.metadata()?;
        if (current.dev(), current.ino()) != (held.dev(), held.ino()) {
            continue;
        }
        let alone = lock_byte(&file, LIVENESS_BYTE, LockKind::Exclusive, false)?;
        return Ok(Gated { file, path, alone });
    }
}

/// Creates the lock file with the data file's permission bits (read and
/// write ones: whoever may write the data may write the lock, as with
/// LMDB; the owner always may) and group, and as root its owner. Changing
/// the group or owner is best effort: it fails harmlessly for a user
/// outside the data file's group.
fn create_like(path: &Path, data_meta: &Metadata) -> io::Result<File> {
    let mode = (data_meta.mode() & 0o666) | 0o600;
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)?;
    // The umask may have taken bits away: set them exactly.
    file.set_permissions(fs::Permissions::from_mode(mode))?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let owner = (unsafe { libc::geteuid() } == 0).then(|| data_meta.uid());
    let _ = std::os::unix::fs::fchown(&file, owner, Some(data_meta.gid()));
    Ok(file)
}

fn total_len(slot_count: usize) -> usize {
    HEADER_LEN + slot_count * SLOT_LEN
}

impl Gated {
    /// First process, whose open failed: removes the lock file (under the
    /// gate, so a process waiting for the gate notices and starts over),
    /// leaving nothing beside a file that does not open.
    pub(crate) fn discard(self) {
        assert!(self.alone, "discarding a lock file another process uses");
        let _ = fs::remove_file(&self.path);
        // Dropping `file` releases the gate and liveness locks.
    }

    /// First process: lays out a fresh lock file with `slot_count` reader
    /// slots, all free, and the meta `meta` as the newest commit.
    pub(crate) fn initialize(
        self,
        writable: bool,
        slot_count: usize,
        data_id: FileId,
        meta: &Meta,
        durable_txn: u64,
        durable_slot: u64,
    ) -> Result<LockFile> {
        assert!(self.alone, "initialising a lock file another process uses");
        assert!(slot_count > 0);
        assert!(std::mem::size_of::<Header>() <= HEADER_LEN);
        assert!(std::mem::size_of::<Slot>() == SLOT_LEN);
        let len = total_len(slot_count);
        // Truncating to 0 first zeroes every byte: all slots free.
        self.file.set_len(0)?;
        self.file.set_len(len as u64)?;
        let lock = LockFile::map(self.file, self.path, len, slot_count)?;
        let h = lock.header();
        h.version.store(LOCK_FORMAT_VERSION, Ordering::Relaxed);
        h.slot_count.store(slot_count as u64, Ordering::Relaxed);
        h.page_size
            .store(u64::from(meta.page_size), Ordering::Relaxed);
        h.data_dev.store(data_id.0, Ordering::Relaxed);
        h.data_ino.store(data_id.1, Ordering::Relaxed);
        h.durable_txn.store(durable_txn, Ordering::Relaxed);
        h.durable_slot.store(durable_slot, Ordering::Relaxed);
        h.processes.store(1, Ordering::Relaxed);
        h.writers.store(u64::from(writable), Ordering::Relaxed);
        lock.store_meta(meta);
        h.table.published_txn.store(meta.txn, Ordering::SeqCst);
        h.magic.store(MAGIC, Ordering::SeqCst);
        // Atomic conversion: no other process can slip in as "first".
        lock_byte(&lock.file, LIVENESS_BYTE, LockKind::Shared, false)?;
        Ok(lock)
    }

    /// Another process has the database open: joins its lock file after
    /// checking that it is one, for this data file.
    pub(crate) fn attach(self, data_id: FileId) -> Result<LockFile> {
        assert!(!self.alone);
        if !lock_byte(&self.file, LIVENESS_BYTE, LockKind::Shared, false)? {
            return Err(Error::Corrupted {
                page: None,
                detail: format!(
                    "lock file {}: another process holds it exclusively outside the gate",
                    self.path.display()
                ),
            });
        }
        let bad = |detail: &str| Error::Corrupted {
            page: None,
            detail: format!("lock file {}: {detail}", self.path.display()),
        };
        let mut head = [0u8; 48];
        let file_len = self.file.metadata()?.len();
        if file_len < HEADER_LEN as u64 {
            return Err(bad("shorter than its header"));
        }
        self.file.read_exact_at(&mut head, 0)?;
        let word = |i: usize| u64::from_le_bytes(head[i * 8..i * 8 + 8].try_into().expect("8"));
        if word(0) != MAGIC {
            return Err(bad("not an ironbark lock file"));
        }
        if word(1) != LOCK_FORMAT_VERSION {
            return Err(Error::IncompatibleVersion {
                found: word(1) as u32,
                supported: LOCK_FORMAT_VERSION as u32,
            });
        }
        let slot_count = word(2);
        if slot_count == 0 || slot_count > crate::MAX_READERS_LIMIT as u64 {
            return Err(bad("reader slot count out of range"));
        }
        let len = total_len(slot_count as usize);
        if file_len < len as u64 {
            return Err(bad("shorter than its reader table"));
        }
        if (word(4), word(5)) != data_id {
            return Err(bad(
                "it belongs to another data file (was the data file replaced while open?)",
            ));
        }
        LockFile::map(self.file, self.path, len, slot_count as usize)
    }
}

impl LockFile {
    fn map(file: File, path: PathBuf, len: usize, slot_count: usize) -> Result<LockFile> {
        if cfg!(loom) {
            // loom's atomics cannot live in shared memory.
            return Err(Error::Io(io::Error::other("no lock files under loom")));
        }
        // The callers checked that the file is at least `len` long.
        let ptr = crate::storage::map::map_shared_writable(&file, len)?;
        Ok(LockFile {
            file,
            path,
            ptr,
            len,
            slot_count,
        })
    }

    pub(crate) fn header(&self) -> &Header {
        // SAFETY: the mapping is page-aligned and at least HEADER_LEN bytes
        // long; `Header` is made only of `AtomicU64`s, valid for any bits,
        // and other processes only touch it through atomics too.
        unsafe { &*(self.ptr as *const Header) }
    }

    pub(crate) fn slots(&self) -> &[Slot] {
        // SAFETY: `slot_count` 64-byte slots follow the header within the
        // mapping (length checked at initialise/attach); offset 4096 is
        // 64-byte aligned; a `Slot` is two `AtomicU64`s, valid for any bits.
        unsafe {
            std::slice::from_raw_parts(self.ptr.add(HEADER_LEN) as *const Slot, self.slot_count)
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Retakes the gate (at close).
    pub(crate) fn take_gate(&self) -> io::Result<()> {
        lock_byte(&self.file, GATE_BYTE, LockKind::Exclusive, true).map(|_| ())
    }

    pub(crate) fn release_gate(&self) -> io::Result<()> {
        lock_byte(&self.file, GATE_BYTE, LockKind::Unlock, false).map(|_| ())
    }

    /// Under the gate: whether this is the only process with the database
    /// open. If so, it keeps the liveness lock exclusively.
    pub(crate) fn alone(&self) -> io::Result<bool> {
        lock_byte(&self.file, LIVENESS_BYTE, LockKind::Exclusive, false)
    }

    /// Whether another open of the lock file (another process, as a rule)
    /// has the database open: it holds the liveness byte. Only a hint, as
    /// [`conflicting_lock`] is; when the kernel cannot say, the answer is
    /// yes (waiting for it is safe).
    pub(crate) fn others_open(&self) -> bool {
        !matches!(conflicting_lock(&self.file, LIVENESS_BYTE), Ok(None))
    }

    /// Claims this process's owner token for the writer lock: locks a byte
    /// no other process holds, exclusively, for as long as the lock file
    /// is open (the kernel drops it when the process dies, which is how
    /// others tell a dead owner from a live one: [`LockFile::owner_alive`]).
    /// Claiming it again returns the same token (the lock is this open
    /// file's already).
    pub(crate) fn claim_owner_token(&self) -> io::Result<u64> {
        let pid = u64::from(std::process::id());
        for k in 0..OWNER_TOKEN_TRIES {
            let byte = OWNER_BYTE_BASE + pid + (k << 22);
            if lock_byte(&self.file, byte, LockKind::Exclusive, false)? {
                debug_assert!(byte & WRITER_WAITERS == 0);
                return Ok(byte);
            }
        }
        Err(io::Error::other(
            "no free owner byte for the writer lock in the lock file",
        ))
    }

    /// Whether the process whose owner token is `token` still has the
    /// database open: its byte is locked. When the kernel cannot say, the
    /// answer is yes (waiting longer is safe; taking the lock is not).
    pub(crate) fn owner_alive(&self, token: u64) -> bool {
        !matches!(conflicting_lock(&self.file, token), Ok(None))
    }

    /// Sleeps while the writer word's low 32 bits are those of `seen`, at
    /// most `timeout`; may return early. A futex wait on the shared mapping,
    /// which [`LockFile::wake_writer_waiters`] ends.
    pub(crate) fn wait_for_writer(&self, seen: u64, timeout: std::time::Duration) {
        let ts = libc::timespec {
            tv_sec: timeout.as_secs().min(i64::MAX as u64) as libc::time_t,
            tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
        };
        // SAFETY: the futex word is the writer word's low half, inside our
        // live mapping (the header), 4-byte aligned; FUTEX_WAIT only reads
        // it and the timespec, which lives across the call. Not
        // FUTEX_PRIVATE: other processes wake it through their own mappings.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.writer_futex(),
                libc::FUTEX_WAIT,
                seen as u32,
                &ts as *const libc::timespec,
            );
        }
    }

    /// Wakes every process sleeping in [`LockFile::wait_for_writer`].
    pub(crate) fn wake_writer_waiters(&self) {
        // SAFETY: as in `wait_for_writer`; FUTEX_WAKE reads no memory.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.writer_futex(),
                libc::FUTEX_WAKE,
                i32::MAX,
            );
        }
    }

    /// The address of the writer word's low 32 bits.
    fn writer_futex(&self) -> *const u32 {
        let word = &self.header().writer as *const _ as *const u32;
        if cfg!(target_endian = "little") {
            word
        } else {
            word.wrapping_add(1)
        }
    }

    /// Publishes a copy of `meta` (before its txn becomes the newest).
    pub(crate) fn store_meta(&self, meta: &Meta) {
        let copy = &self.header().metas[(meta.txn % 2) as usize];
        copy[0].store(0, Ordering::Relaxed);
        fence(Ordering::Release);
        for (i, chunk) in meta.encode().chunks_exact(8).enumerate() {
            copy[1 + i].store(
                u64::from_le_bytes(chunk.try_into().expect("8")),
                Ordering::Relaxed,
            );
        }
        copy[0].store(meta.txn, Ordering::Release);
    }

    /// The meta of commit `txn`, if its copy is whole (a newer commit may be
    /// overwriting it; then the caller retries with the newer txn).
    pub(crate) fn load_meta(&self, txn: u64) -> Option<Meta> {
        let copy = &self.header().metas[(txn % 2) as usize];
        if copy[0].load(Ordering::Acquire) != txn {
            return None;
        }
        let mut bytes = [0u8; META_LEN];
        for (i, chunk) in bytes.chunks_exact_mut(8).enumerate() {
            chunk.copy_from_slice(&copy[1 + i].load(Ordering::Relaxed).to_le_bytes());
        }
        fence(Ordering::Acquire);
        if copy[0].load(Ordering::Relaxed) != txn {
            return None;
        }
        Meta::decode(&bytes, 0).ok().filter(|m| m.txn == txn)
    }
}

impl Drop for LockFile {
    fn drop(&mut self) {
        // SAFETY: unmapping the range we mapped; every reference into it
        // (`header`, `slots`) borrows `self`, so none outlives it.
        unsafe {
            libc::munmap(self.ptr as *mut libc::c_void, self.len);
        }
        // Closing `file` drops the liveness and gate locks.
    }
}
