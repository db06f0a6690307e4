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

use crate::error::{Error, Result};

/// The smallest address range reserved for a map: 64 GiB. Reserving costs
/// only address space, of which a 64-bit process has 128 TiB.
pub(crate) const MIN_RESERVATION_BYTES: u64 = 64 << 30;

/// A read-only shared mapping of the data file.
#[derive(Debug)]
pub(crate) struct Map {
    ptr: *const u8,
    len: usize,
}

// SAFETY: the mapping is read-only and lives until `Drop`; sharing `&[u8]`
// views of immutable memory between threads is sound.
unsafe impl Send for Map {}
// SAFETY: as above; no method mutates through `&self`.
unsafe impl Sync for Map {}

impl Map {
    /// Maps `file` read-only over an address range of at least `min_len`
    /// bytes (the file may be shorter; only the part backed by the file is
    /// ever read).
    pub(crate) fn new(file: &File, min_len: u64) -> Result<Map> {
        let len = min_len.max(MIN_RESERVATION_BYTES);
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
        })
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

impl Drop for Map {
    fn drop(&mut self) {
        // SAFETY: unmapping the range we mapped; no slice can outlive `self`.
        unsafe {
            libc::munmap(self.ptr as *mut libc::c_void, self.len);
        }
    }
}
