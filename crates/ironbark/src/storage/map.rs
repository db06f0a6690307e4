//! The read-only shared memory map through which every committed page is
//! read.
//!
//! A [`Map`] reserves a large address range over the file once; the file
//! grows underneath it without remapping. When the file outgrows the
//! reservation, a new, larger `Map` is made and published with the next
//! snapshot; snapshots that hold the old one keep it alive (it is an `Arc`),
//! so a reader's slices never dangle.
//!
//! Soundness argument (see docs/design.md, "Why the map is sound"):
//! 1. The mapping is `PROT_READ`: this process cannot write through it.
//! 2. A snapshot only reads pages below its own `page_count`, and the file is
//!    never shortened while open, so every byte read is backed by the file
//!    (no SIGBUS). We assume no other program truncates the file.
//! 3. The writer never writes a page that a live snapshot can reach (the
//!    reclamation rule in `txn::write`), so bytes a reader borrows do not
//!    change while borrowed.
//! 4. Bytes are treated as untrusted: every read through [`Map::slice`] is
//!    bounds-checked, and the B+tree validates every field before use.

use std::fs::File;
use std::io;
use std::os::unix::io::AsRawFd;
use std::sync::atomic::{AtomicU8, Ordering};

use crate::error::{Error, Result};
use crate::storage::memory::memory_limit;

/// A read-only shared mapping of the data file.
#[derive(Debug)]
// Aligned, as `storage::arena::Arena` is, so that behind an `Arc` the
// fields every lookup reads share no cache line with the `Arc`'s counts,
// which the writer changes with every snapshot it publishes or drops.
#[repr(align(128))]
pub(crate) struct Map {
    ptr: *const u8,
    len: usize,
    /// What the kernel was told of this map ([`Map::advise_for_file_len`]):
    /// [`ADVICE_NONE`], [`ADVICE_HUGE`] or [`ADVICE_RANDOM`].
    advice: AtomicU8,
}

const _: () = assert!(std::mem::align_of::<Map>() >= 128);

/// No advice yet.
const ADVICE_NONE: u8 = 0;
/// `MADV_HUGEPAGE`: the file fits in memory.
const ADVICE_HUGE: u8 = 1;
/// `MADV_NOHUGEPAGE` and `MADV_RANDOM`: it does not (final).
const ADVICE_RANDOM: u8 = 2;

// SAFETY: the mapping is read-only and lives until `Drop`; sharing `&[u8]`
// views of immutable memory between threads is sound.
unsafe impl Send for Map {}
// SAFETY: as above; no method mutates through `&self`.
unsafe impl Sync for Map {}

/// The map is read at random once the file is larger than memory / this
/// ([`Map::advise_for_file_len`]).
const RANDOM_SHARE: u64 = 2;

impl Map {
    /// Maps `file` read-only over an address range of at least `min_len`
    /// bytes, and at least `reservation` (`Options::map_reservation`): the
    /// file may be shorter; only the part backed by the file is ever read.
    pub(crate) fn new(file: &File, min_len: u64, reservation: u64) -> Result<Map> {
        // At least 1 MiB: a new file's length is 0, and a map cannot be.
        let len = min_len.max(reservation).max(1 << 20);
        let len = usize::try_from(len)
            .map_err(|_| Error::Io(io::Error::other("map size exceeds the address space")))?;
        // SAFETY: a fresh shared read-only mapping of a file we hold open; the
        // kernel picks the address. The result is checked for MAP_FAILED.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(Error::Io(io::Error::last_os_error()));
        }
        Ok(Map {
            ptr: ptr as *const u8,
            len,
            advice: AtomicU8::new(ADVICE_NONE),
        })
    }

    /// Tells the kernel how this map is read, from the file's length:
    ///
    /// - **A file within half the memory** this process may fill (the
    ///   machine's, or its container's: `storage::memory`) is mapped with
    ///   `MADV_HUGEPAGE`: a page fault on a page not in the page cache reads
    ///   the aligned 2 MiB around it into one folio, which the kernel maps
    ///   with one 2 MiB page, so a lookup's descent takes one TLB entry per
    ///   2 MiB of file instead of one per page (at 10M records, lookups in
    ///   a file read back cold ran 1.37-1.53x LMDB with it, 1.23-1.28x
    ///   without). Pages the engine writes itself stay in the small folios
    ///   its writes made.
    /// - **A larger file** is read at random (`MADV_NOHUGEPAGE` and
    ///   `MADV_RANDOM`), so that a fault reads the one page a lookup needs,
    ///   not a readahead window (nor a 2 MiB folio) around it: when most
    ///   lookups miss the page cache, those extra pages evict pages that
    ///   later lookups need (LMDB's `MDB_NORDAHEAD`). Half, because the
    ///   file's pages share that memory with the page arena (up to an
    ///   eighth), the log's pages and the application's own: random inserts
    ///   in a 1 GiB container read 1 GB/s back from a 760 MiB file with
    ///   readahead, and 25 MB/s without. Final: a map told so is never
    ///   told otherwise.
    ///
    /// Called at open, on a map no one else holds yet, and whenever a
    /// commit's map is looked up (`Shared::map_covering`, under the lock of
    /// the shared map): never by two threads at once. One load when nothing
    /// changes. Hints: failure (a kernel without transparent huge pages) is
    /// harmless and ignored, and neither changes a byte read.
    pub(crate) fn advise_for_file_len(&self, file_len: u64) {
        self.advise_for_memory(file_len, memory_limit());
    }

    /// [`Map::advise_for_file_len`] with the memory size given (for tests).
    fn advise_for_memory(&self, file_len: u64, memory: u64) {
        let wanted = if file_len > memory / RANDOM_SHARE {
            ADVICE_RANDOM
        } else {
            ADVICE_HUGE
        };
        let now = self.advice.load(Ordering::Relaxed);
        if now == wanted || now == ADVICE_RANDOM {
            return;
        }
        self.advice.store(wanted, Ordering::Relaxed);
        let advise = |advice: libc::c_int| {
            // SAFETY: advice on our own mapping's whole range; it only
            // changes how the kernel reads the file into the page cache and
            // maps it, never a byte read.
            unsafe {
                libc::madvise(self.ptr as *mut libc::c_void, self.len, advice);
            }
        };
        if wanted == ADVICE_HUGE {
            advise(libc::MADV_HUGEPAGE);
        } else {
            advise(libc::MADV_NOHUGEPAGE);
            advise(libc::MADV_RANDOM);
        }
    }

    /// The bytes reserved for this map (not the file's length).
    pub(crate) fn reserved_len(&self) -> u64 {
        self.len as u64
    }

    /// `len` bytes at `offset`, or `None` if out of the reservation. The
    /// caller guarantees the range lies within the file (point 2 above).
    #[inline]
    pub(crate) fn slice(&self, offset: u64, len: usize) -> Option<&[u8]> {
        let end = offset.checked_add(len as u64)?;
        if end > self.len as u64 {
            return None;
        }
        // SAFETY: [offset, end) lies within the mapping, which lives as long
        // as `self`; the bytes are not written while borrowed (point 3 above).
        Some(unsafe { std::slice::from_raw_parts(self.ptr.add(offset as usize), len) })
    }
}

impl Map {
    /// Drops this process's mapping of the first `len` bytes' pages
    /// (`MADV_DONTNEED`), so that they no longer count in its resident
    /// set. For a shared file mapping this changes no byte anyone reads:
    /// a later access maps the same page of the file again. So it is
    /// sound with slices of those bytes alive, as long as the file's
    /// content there does not change (point 3 above). A hint: failure is
    /// harmless and ignored.
    pub(crate) fn forget_pages(&self, len: u64) {
        let len = (len as usize).min(self.len);
        if len == 0 {
            return;
        }
        // SAFETY: advice on a range inside our own mapping; MADV_DONTNEED on
        // a shared file mapping only drops page-table entries (the content
        // is refetched from the file on the next access), so no Rust
        // reference sees different bytes.
        unsafe {
            libc::madvise(self.ptr as *mut libc::c_void, len, libc::MADV_DONTNEED);
        }
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        // SAFETY: unmapping the range we mapped; no slice can outlive `self`.
        unsafe {
            libc::munmap(self.ptr as *mut libc::c_void, self.len);
        }
    }
}

/// Maps the first `len` bytes of `file` (open for reading and writing)
/// shared and writable, at an address the kernel picks. Making the mapping
/// is sound; what the caller does through the pointer is its to argue (the
/// redo log's [`WriteMap`], the lock file's atomics), and it unmaps it.
pub(crate) fn map_shared_writable(file: &File, len: usize) -> Result<*mut u8> {
    // SAFETY: a fresh mapping that aliases no memory of ours; the result is
    // checked for MAP_FAILED.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        return Err(Error::Io(io::Error::last_os_error()));
    }
    Ok(ptr as *mut u8)
}

/// A writable shared mapping of a file's first bytes, through which the
/// redo log appends its records: a memory copy into the page cache, as a
/// `pwrite` would make, without a system call per commit (records under
/// a page: `storage::log::WRITTEN_RECORD_BYTES`; see docs/design.md, "The
/// redo log is written through a map").
///
/// Soundness argument:
/// 1. The file is at least `len` bytes long for as long as the mapping
///    lives: the owner maps only bytes the file holds, and never shortens
///    the file below them (we assume no other program truncates it). So
///    every store lands in memory the file backs (no SIGBUS). The bytes
///    are allocated blocks (`fallocate`) or written zeros, not holes, so a
///    store needs no block allocation either.
/// 2. No Rust reference to the mapped bytes is ever made: [`WriteMap::write`]
///    copies into them with raw pointer copies, so what other processes
///    write or read there (through their own mappings or `pread`) cannot
///    invalidate a reference of ours.
/// 3. Stores are bounds-checked against `len` before any copy.
#[derive(Debug)]
pub(crate) struct WriteMap {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value until `Drop`, and
// `write` takes `&mut self`, so moving it to another thread is sound.
unsafe impl Send for WriteMap {}
// SAFETY: through `&self` only the length can be read; every store takes
// `&mut self`.
unsafe impl Sync for WriteMap {}

impl WriteMap {
    /// Maps the first `len` bytes of `file` (opened for reading and
    /// writing) shared and writable. The caller guarantees the file is at
    /// least `len` bytes long and stays so while the map lives.
    pub(crate) fn new(file: &File, len: u64) -> Result<WriteMap> {
        let len = usize::try_from(len)
            .ok()
            .filter(|&l| l > 0)
            .ok_or_else(|| Error::Io(io::Error::other("log map size out of range")))?;
        let ptr = map_shared_writable(file, len)?;
        // No read-ahead: a store to a log page not yet in the page cache
        // (a new or regrown log's first pass) faults, and the fault's
        // read-ahead would fill a window of pages ahead of it with zeros,
        // long before the appends reach them (about 200 us of a first
        // commit's 340 after open), where one page each, zeroed as the
        // append reaches it, is still in cache for the copy (single-put
        // deletes at 1M records, the log's first pass: 8-16% faster;
        // docs/design.md, "The redo log is written through a map"). A
        // hint: without it the appends are as correct.
        // SAFETY: advice on the range just mapped, which nothing else uses.
        unsafe { libc::madvise(ptr.cast(), len, libc::MADV_RANDOM) };
        Ok(WriteMap { ptr, len })
    }

    /// Asks for the `lines` cache lines from byte `at` (within the map)
    /// to be loaded, as `prefetch_line`: a hint, which reads nothing and
    /// cannot fault (a line of a page not yet in memory is dropped).
    pub(crate) fn prefetch_after(&self, at: u64, lines: usize) {
        for i in 0..lines as u64 {
            let offset = at + i * 64;
            if offset >= self.len as u64 {
                return;
            }
            // `wrapping_add`: an address within the map, never
            // dereferenced.
            prefetch_line(self.ptr.wrapping_add(offset as usize));
        }
    }

    /// The bytes mapped.
    pub(crate) fn len(&self) -> u64 {
        self.len as u64
    }

    /// Copies `bufs`, back to back, to the file at `offset`. Panics if they
    /// do not fit in the mapping (a bug in the caller, which grows the file
    /// and maps it again first).
    pub(crate) fn write(&mut self, offset: u64, bufs: &[&[u8]]) {
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        let end = offset.checked_add(total as u64);
        assert!(
            end.is_some_and(|e| e <= self.len as u64),
            "log map write of {total} bytes at {offset} past its {} bytes",
            self.len
        );
        let mut at = offset as usize;
        for b in bufs {
            // SAFETY: [at, at + b.len()) lies within the mapping (checked
            // above: the parts sum to `total`); the source is a live slice of
            // our own memory, which cannot overlap a fresh mapping; no
            // reference to the destination exists (point 2 above).
            unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), self.ptr.add(at), b.len()) };
            at += b.len();
        }
    }
}

impl Drop for WriteMap {
    fn drop(&mut self) {
        // SAFETY: unmapping the range we mapped; nothing borrows it.
        unsafe {
            libc::munmap(self.ptr as *mut libc::c_void, self.len);
        }
    }
}

/// Asks the CPU to start loading the cache line at `at` without waiting
/// for it. A hint only: nothing is read, and no value depends on it. The
/// one place the engine prefetches.
#[inline(always)]
pub(crate) fn prefetch_line(at: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` needs SSE, which every x86_64 CPU has (it is
    // in the target's baseline). A prefetch dereferences nothing and cannot
    // fault, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(at.cast::<i8>())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

/// Asks the CPU to start loading every cache line of `bytes` (past the
/// first, which the caller reads at once) without waiting for them. A hint
/// only: nothing is read, and no value depends on it.
#[inline(always)]
pub(crate) fn prefetch(bytes: &[u8]) {
    let mut at = 64;
    while at < bytes.len() {
        prefetch_line(bytes[at..].as_ptr());
        at += 64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The flags the kernel shows for this process's mapping that starts
    /// at `start` (`VmFlags` in `/proc/self/smaps`).
    fn vm_flags(start: *const u8) -> Vec<String> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").expect("smaps");
        let mut in_mapping = false;
        for line in smaps.lines() {
            let first = line.split_whitespace().next().unwrap_or("");
            if let Some((from, _)) = first.split_once('-') {
                if let Ok(from) = usize::from_str_radix(from, 16) {
                    in_mapping = from == start as usize;
                    continue;
                }
            }
            if in_mapping {
                if let Some(flags) = line.strip_prefix("VmFlags:") {
                    return flags.split_whitespace().map(str::to_string).collect();
                }
            }
        }
        panic!("no mapping at {start:p} in /proc/self/smaps");
    }

    #[test]
    fn a_file_within_half_the_memory_gets_huge_pages_and_a_larger_one_is_read_at_random() {
        let dir = tempfile::tempdir().unwrap();
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(dir.path().join("data"))
            .unwrap();
        let len = 1 << 20;
        file.set_len(len).unwrap();
        let map = Map::new(&file, len, 0).unwrap();
        let flag = |map: &Map, f: &str| vm_flags(map.ptr).iter().any(|g| g == f);
        assert!(
            !flag(&map, "hg") && !flag(&map, "rr"),
            "no advice before asked"
        );
        map.advise_for_memory(len, 2 * len);
        // (A kernel built without transparent huge pages refuses the advice.)
        let thp = std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists();
        assert_eq!(
            flag(&map, "hg"),
            thp,
            "a file within half the memory: huge pages"
        );
        assert!(
            !flag(&map, "rr"),
            "a file within half the memory keeps readahead"
        );
        map.advise_for_memory(len, 2 * len - 1);
        assert!(
            flag(&map, "rr"),
            "a file larger than half the memory: at random"
        );
        assert!(
            flag(&map, "nh") && !flag(&map, "hg"),
            "... without huge pages"
        );
        map.advise_for_memory(len, 4 * len);
        assert!(flag(&map, "rr") && !flag(&map, "hg"), "at random for good");
        // The real machine's memory: a 1 MiB file fits.
        let other = Map::new(&file, len, 0).unwrap();
        other.advise_for_file_len(len);
        assert!(flag(&other, "hg") == thp && !flag(&other, "rr"));
        assert!(memory_limit() > 2 * len);
    }
}
