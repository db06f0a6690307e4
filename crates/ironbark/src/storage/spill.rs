//! The spill file of a write transaction whose dirty pages outgrow
//! `Options::max_dirty_bytes`: an unnamed file beside the data file
//! (`O_TMPFILE`; it has no name, so it vanishes when closed, crash
//! included) that holds dirty pages the transaction had no room for in
//! memory, as LMDB spills its dirty pages. The transaction reads them back
//! through a read-only map of this file, and copies one back into memory
//! only to edit it (`pages::DirtyPages`).
//!
//! Invariant: a spilled page's bytes are written (`pwritev`) before any
//! reference to them is handed out, and a slot is written again only after
//! it was given back, through `&mut self` (so no slice of it is alive
//! then); the file only grows
//! while the transaction lives, so every mapped byte read is backed by
//! it. Soundness of the map: `storage::map`, points 1-4 (this file is
//! private to one transaction: no other program knows its inode).

use std::path::Path;

use crate::error::Result;
use crate::storage::file::DataFile;
use crate::storage::map::Map;

/// Where a spilled page lies in the spill file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SpillSlot {
    /// Byte offset in the spill file.
    pub(crate) offset: u64,
    /// Length in bytes; 0: the page is not spilled.
    pub(crate) len: u64,
}

/// An open spill file and the map its pages are read through.
pub(crate) struct SpillFile {
    file: DataFile,
    map: Map,
    /// Bytes written: the end of the file's used part.
    end: u64,
    /// Freed one-page slots, reused before the file grows.
    free_pages: Vec<u64>,
    page_size: usize,
    /// Address space to reserve for the map (it is made anew, larger, when
    /// the file outgrows it).
    reservation: u64,
}

impl SpillFile {
    /// Creates an unnamed spill file in `dir` (see
    /// [`DataFile::create_spill`]).
    pub(crate) fn create(
        data: &DataFile,
        dir: &Path,
        page_size: usize,
        reservation: u64,
    ) -> Result<SpillFile> {
        let file = data.create_spill(dir)?;
        let map = Map::new(file.as_file(), 0, reservation)?;
        Ok(SpillFile {
            file,
            map,
            end: 0,
            free_pages: Vec::new(),
            page_size,
            reservation,
        })
    }

    /// Writes `pages` (each a page or a blob run) and returns where each
    /// went, in order, in `slots`. One-page buffers reuse freed slots
    /// first; the rest go back to back at the end of the file, in as few
    /// `pwritev` calls as the kernel allows. On an error nothing is
    /// recorded as spilled (the caller keeps its buffers), and the slots
    /// taken are given back.
    pub(crate) fn write(&mut self, pages: &[&[u8]], slots: &mut Vec<SpillSlot>) -> Result<()> {
        slots.clear();
        let mut tail: Vec<&[u8]> = Vec::new();
        let mut tail_len = 0u64;
        let reused_before = self.free_pages.len();
        let mut reused = Vec::new();
        for &p in pages {
            debug_assert!(!p.is_empty() && p.len() % self.page_size == 0);
            if p.len() == self.page_size {
                if let Some(offset) = self.free_pages.pop() {
                    reused.push((offset, p));
                    slots.push(SpillSlot {
                        offset,
                        len: p.len() as u64,
                    });
                    continue;
                }
            }
            slots.push(SpillSlot {
                offset: self.end + tail_len,
                len: p.len() as u64,
            });
            tail.push(p);
            tail_len += p.len() as u64;
        }
        let mut written = Ok(());
        for &(offset, p) in &reused {
            written = written.and_then(|_| self.file.write_vectored_at(&[p], offset).map(|_| ()));
        }
        if written.is_ok() && !tail.is_empty() {
            written = self.file.write_vectored_at(&tail, self.end).map(|_| ());
        }
        if let Err(e) = written {
            self.free_pages
                .extend(reused.iter().map(|&(offset, _)| offset));
            debug_assert_eq!(self.free_pages.len(), reused_before);
            slots.clear();
            return Err(e);
        }
        self.end += tail_len;
        if self.end > self.map.reserved_len() {
            // No slice of the old map is alive: this is `&mut self`.
            self.map = Map::new(self.file.as_file(), self.end * 2, self.reservation)?;
        }
        Ok(())
    }

    /// The bytes of a spilled page.
    pub(crate) fn read(&self, slot: SpillSlot) -> &[u8] {
        assert!(
            slot.len > 0 && slot.offset + slot.len <= self.end,
            "spill slot {slot:?} outside the {} bytes written",
            self.end
        );
        self.map
            .slice(slot.offset, slot.len as usize)
            .expect("the map covers every written byte")
    }

    /// Gives a slot back: a one-page slot is reused by a later spill.
    pub(crate) fn release(&mut self, slot: SpillSlot) {
        debug_assert!(slot.len > 0);
        if slot.len == self.page_size as u64 {
            self.free_pages.push(slot.offset);
        }
    }

    /// Lets go of the memory the map holds for pages read so far, so that
    /// reading spilled pages back does not grow the process's resident set
    /// (the kernel keeps them in its page cache, which it may evict). The
    /// bytes stay readable: the next read maps them again from the file,
    /// unchanged, so a slice alive across this call still reads the same
    /// bytes.
    pub(crate) fn forget_reads(&self) {
        self.map.forget_pages(self.end);
    }
}
