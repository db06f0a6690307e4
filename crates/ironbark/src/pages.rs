//! The page resolver: the one way the B+tree reaches a page, whether it is
//! committed (read through the memory map) or dirty (a private buffer of the
//! write transaction).
//!
//! Invariant: a committed page number is only resolved if it lies in
//! `[META_SLOTS, page_count)` of the snapshot being read, so every byte
//! returned is inside the file; dirty page numbers carry [`DIRTY_BIT`] and
//! never reach the file.

use std::sync::Arc;

use crate::btree::page::{blob_run_pages, BLOB_HEADER_LEN, DIRTY_BIT};
use crate::error::{Error, Result};
use crate::storage::map::Map;
use crate::storage::meta::META_SLOTS;

/// Resolves page numbers to bytes.
pub(crate) trait PageSource {
    /// The bytes of one page.
    fn page(&self, pgno: u64) -> Result<&[u8]>;
    /// The bytes of the blob run whose first page is `pgno`.
    fn blob_run(&self, pgno: u64) -> Result<&[u8]>;
}

/// Committed pages of one snapshot, read through the map.
#[derive(Clone)]
pub(crate) struct MapSource {
    pub(crate) map: Arc<Map>,
    pub(crate) page_count: u64,
    pub(crate) page_size: usize,
}

impl MapSource {
    #[inline]
    fn range(&self, pgno: u64, pages: u64) -> Result<&[u8]> {
        let end = pgno.checked_add(pages);
        if pgno < META_SLOTS || pages == 0 || end.is_none_or(|e| e > self.page_count) {
            return Err(Error::corrupted_page(
                pgno,
                format!(
                    "reference to pages {pgno}..+{pages} outside the {} pages in use",
                    self.page_count
                ),
            ));
        }
        let len = usize::try_from(pages * self.page_size as u64)
            .map_err(|_| Error::corrupted_page(pgno, "run too long"))?;
        self.map
            .slice(pgno * self.page_size as u64, len)
            .ok_or_else(|| Error::corrupted_page(pgno, "page beyond the map"))
    }
}

impl PageSource for MapSource {
    #[inline]
    fn page(&self, pgno: u64) -> Result<&[u8]> {
        self.range(pgno, 1)
    }

    fn blob_run(&self, pgno: u64) -> Result<&[u8]> {
        let first = self.range(pgno, 1)?;
        let pages = blob_run_pages(first);
        if pages == 0 || (pages as usize).saturating_mul(self.page_size) < BLOB_HEADER_LEN {
            return Err(Error::corrupted_page(pgno, "blob run of zero pages"));
        }
        self.range(pgno, pages)
    }
}

/// The dirty pages of a write transaction, indexed by provisional number.
#[derive(Default)]
pub(crate) struct DirtyPages {
    /// `None`: freed within the transaction.
    pub(crate) pages: Vec<Option<Box<[u8]>>>,
    /// Overflow blobs added (freed ones included): when 0, no leaf can
    /// reference a dirty blob, and the commit need not look for any.
    pub(crate) blobs_added: usize,
}

impl DirtyPages {
    pub(crate) fn add(&mut self, page: Box<[u8]>) -> u64 {
        self.pages.push(Some(page));
        DIRTY_BIT | (self.pages.len() as u64 - 1)
    }

    /// Adds an overflow blob (see `blobs_added`).
    pub(crate) fn add_blob(&mut self, blob: Box<[u8]>) -> u64 {
        self.blobs_added += 1;
        self.add(blob)
    }

    pub(crate) fn get(&self, id: u64) -> &[u8] {
        debug_assert!(id & DIRTY_BIT != 0);
        self.pages[(id & !DIRTY_BIT) as usize]
            .as_deref()
            .expect("dirty page used after it was freed")
    }

    pub(crate) fn get_mut(&mut self, id: u64) -> &mut [u8] {
        debug_assert!(id & DIRTY_BIT != 0);
        self.pages[(id & !DIRTY_BIT) as usize]
            .as_deref_mut()
            .expect("dirty page used after it was freed")
    }

    pub(crate) fn free(&mut self, id: u64) {
        let slot = &mut self.pages[(id & !DIRTY_BIT) as usize];
        assert!(slot.is_some(), "dirty page freed twice");
        *slot = None;
    }
}

/// A write transaction's view: its dirty pages over its base snapshot.
#[derive(Clone, Copy)]
pub(crate) struct WriteSource<'a> {
    pub(crate) base: &'a MapSource,
    pub(crate) dirty: &'a DirtyPages,
}

impl<'a> WriteSource<'a> {
    #[inline]
    pub(crate) fn resolve_page(self, pgno: u64) -> Result<&'a [u8]> {
        if pgno & DIRTY_BIT != 0 {
            Ok(self.dirty.get(pgno))
        } else {
            self.base.page(pgno)
        }
    }

    pub(crate) fn resolve_blob_run(self, pgno: u64) -> Result<&'a [u8]> {
        if pgno & DIRTY_BIT != 0 {
            Ok(self.dirty.get(pgno))
        } else {
            self.base.blob_run(pgno)
        }
    }
}

impl PageSource for WriteSource<'_> {
    #[inline]
    fn page(&self, pgno: u64) -> Result<&[u8]> {
        self.resolve_page(pgno)
    }

    fn blob_run(&self, pgno: u64) -> Result<&[u8]> {
        self.resolve_blob_run(pgno)
    }
}

/// The txn id a parent expects of a child it points to: none for dirty
/// pages, which are stamped only at commit.
#[inline]
pub(crate) fn expected_txn(pgno: u64, txn: u64) -> Option<u64> {
    if pgno & DIRTY_BIT != 0 {
        None
    } else {
        Some(txn)
    }
}
