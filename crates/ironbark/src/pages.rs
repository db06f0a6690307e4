//! The page resolver: the one way the B+tree reaches a page, whether it is
//! committed (read through the memory map) or dirty (a private buffer of the
//! write transaction).
//!
//! Invariant: a committed page number is only resolved if it lies in
//! `[META_SLOTS, page_count)` of the snapshot being read, so every byte
//! returned is inside the file, or, carrying [`ARENA_BIT`], in the page
//! arena of logged commits (`storage::arena`), bounds-checked there too;
//! dirty page numbers carry [`DIRTY_BIT`] and never reach either.

use std::sync::Arc;

use crate::btree::page::{blob_run_pages, BLOB_HEADER_LEN, DIRTY_BIT};
use crate::error::{Error, Result};
use crate::storage::arena::{Arena, ARENA_BIT};
use crate::storage::map::Map;
use crate::storage::meta::META_SLOTS;

/// Resolves page numbers to bytes. `Sync`, so that the cursors and
/// iterators that hold a `&dyn PageSource` may move to another thread
/// (`Range: Send`).
pub(crate) trait PageSource: Sync {
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
    /// The arena holding the pages of logged commits not yet checkpointed
    /// (`None` when the snapshot has none).
    pub(crate) arena: Option<Arc<Arena>>,
}

impl MapSource {
    #[inline]
    fn range(&self, pgno: u64, pages: u64) -> Result<&[u8]> {
        let end = pgno.checked_add(pages);
        if pgno < META_SLOTS || pages == 0 || end.is_none_or(|e| e > self.page_count) {
            // Off the hot path: an arena page number fails the file's test.
            if pgno & ARENA_BIT != 0 {
                if let Some(run) = self.arena.as_ref().and_then(|a| a.run(pgno, pages)) {
                    return Ok(run);
                }
            }
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
///
/// Savepoints (`txn::savepoint`) freeze the pages that exist when one is
/// taken: those below `editable_from` are never edited (the write path
/// copies one first, `supersede`) and never handed to the pool when freed
/// (they go to `graveyard`), so that a rollback finds them as they were.
pub(crate) struct DirtyPages {
    /// `None`: freed within the transaction.
    pub(crate) pages: Vec<Option<Box<[u8]>>>,
    /// The lowest dirty page number that may be edited in place:
    /// `DIRTY_BIT | frozen pages`. One compare (`pgno >= editable_from`)
    /// tells a page that may be edited from a committed page (no
    /// `DIRTY_BIT`) and from a frozen one; with no savepoint it is
    /// `DIRTY_BIT`, so the test is the plain "is it dirty".
    pub(crate) editable_from: u64,
    /// Frozen pages freed or superseded since they were frozen, by index:
    /// dead for the commit (their slot in `pages` is `None`), kept for a
    /// rollback to a savepoint at which they were alive.
    pub(crate) graveyard: Vec<(usize, Box<[u8]>)>,
    /// Overflow blobs added (freed ones included): when 0, no leaf can
    /// reference a dirty blob, and the commit need not look for any.
    pub(crate) blobs_added: usize,
    /// Page-sized buffers to reuse (kept by the writer across transactions,
    /// so that copying a page on write allocates nothing in steady state).
    pub(crate) pool: Vec<Box<[u8]>>,
}

/// Buffers kept for reuse at most (16 MiB of 4 KiB pages): a larger
/// transaction allocates the rest, and the pool does not pin its peak.
const POOL_MAX: usize = 4096;

impl Default for DirtyPages {
    fn default() -> DirtyPages {
        DirtyPages {
            pages: Vec::new(),
            editable_from: DIRTY_BIT,
            graveyard: Vec::new(),
            blobs_added: 0,
            pool: Vec::new(),
        }
    }
}

impl DirtyPages {
    /// Starts with the buffers of `pool`.
    pub(crate) fn with_pool(pool: Vec<Box<[u8]>>) -> DirtyPages {
        DirtyPages {
            pool,
            ..DirtyPages::default()
        }
    }

    pub(crate) fn add(&mut self, page: Box<[u8]>) -> u64 {
        self.pages.push(Some(page));
        DIRTY_BIT | (self.pages.len() as u64 - 1)
    }

    /// A page-sized buffer: from the pool if it has one (contents stale:
    /// the caller overwrites all of it), else a new one.
    fn buffer(&mut self, page_size: usize) -> Box<[u8]> {
        match self.pool.pop() {
            Some(b) if b.len() == page_size => b,
            _ => vec![0u8; page_size].into_boxed_slice(),
        }
    }

    /// Adds an overflow blob holding `value` (see `blobs_added`); a
    /// one-page blob reuses a pooled buffer.
    pub(crate) fn add_blob(&mut self, page_size: usize, value: &[u8]) -> u64 {
        self.blobs_added += 1;
        let blob = if BLOB_HEADER_LEN + value.len() <= page_size {
            let mut b = self.buffer(page_size);
            crate::btree::page::fill_blob(&mut b, page_size, value);
            b
        } else {
            crate::btree::page::new_blob(page_size, value, 1)
        };
        self.add(blob)
    }

    /// Adds an overflow blob holding `len` zeros, from zeroed memory: no
    /// buffer of zeros to copy from, and the allocator's zeroed pages
    /// (fresh from the system for a large run) are written only by the
    /// header and by whoever fills the value in (`WriteTxn::put_writer`).
    pub(crate) fn add_zeroed_blob(&mut self, page_size: usize, len: usize) -> u64 {
        self.blobs_added += 1;
        let pages = (BLOB_HEADER_LEN + len).div_ceil(page_size);
        let mut b = vec![0u8; pages * page_size].into_boxed_slice();
        crate::btree::page::write_blob_header(&mut b, page_size, len);
        debug_assert_eq!(blob_run_pages(&b) as usize, pages);
        debug_assert!(
            crate::btree::page::blob_data(&b, DIRTY_BIT, None, Some(len as u64))
                .is_ok_and(|d| d.len() == len)
        );
        self.add(b)
    }

    /// Adds a copy of the committed page `bytes`.
    pub(crate) fn add_copy(&mut self, bytes: &[u8]) -> u64 {
        let mut b = self.buffer(bytes.len());
        b.copy_from_slice(bytes);
        self.add(b)
    }

    /// Adds a new tree page holding `cells` in order (they fit).
    pub(crate) fn add_page<C: AsRef<[u8]>>(
        &mut self,
        page_size: usize,
        is_leaf: bool,
        cells: &[C],
    ) -> u64 {
        let mut b = self.buffer(page_size);
        crate::btree::page::fill_page(&mut b, is_leaf, cells);
        self.add(b)
    }

    /// Every page buffer back to `pool` (up to a bound), for the next
    /// transaction.
    pub(crate) fn into_pool(self, page_size: usize) -> Vec<Box<[u8]>> {
        let mut pool = self.pool;
        let room = POOL_MAX.saturating_sub(pool.len());
        pool.extend(
            self.pages
                .into_iter()
                .flatten()
                .chain(self.graveyard.into_iter().map(|(_, b)| b))
                .filter(|b| b.len() == page_size)
                .take(room),
        );
        pool
    }

    /// Whether dirty page `id` is frozen by a savepoint.
    #[inline]
    pub(crate) fn is_frozen(&self, id: u64) -> bool {
        debug_assert!(id & DIRTY_BIT != 0);
        id < self.editable_from
    }

    /// Freezes the first `len` pages (a savepoint: every page that exists
    /// when it is taken, or after a rollback or release, those of the
    /// innermost savepoint left).
    pub(crate) fn freeze(&mut self, len: usize) {
        debug_assert!(len <= self.pages.len());
        self.editable_from = DIRTY_BIT | len as u64;
    }

    /// The copy of frozen page `id` that the write path edits instead of
    /// it: a new dirty page; `id` goes to the graveyard (it stays as the
    /// savepoint saw it, dead for the commit, whose trees now reference
    /// the copy).
    pub(crate) fn supersede(&mut self, id: u64) -> u64 {
        debug_assert!(self.is_frozen(id));
        let index = (id & !DIRTY_BIT) as usize;
        let old = self.pages[index]
            .take()
            .expect("dirty page used after it was freed");
        let mut copy = self.buffer(old.len());
        copy.copy_from_slice(&old);
        self.graveyard.push((index, old));
        self.add(copy)
    }

    /// Undoes every change of pages since a savepoint that saw `len`
    /// pages and a graveyard of `graveyard_len`: pages made since are
    /// dropped (their buffers to the pool), frozen pages freed or
    /// superseded since come back. The caller freezes again.
    pub(crate) fn roll_back(&mut self, len: usize, graveyard_len: usize) {
        for (index, page) in self.graveyard.drain(graveyard_len..) {
            if index < len {
                debug_assert!(self.pages[index].is_none());
                self.pages[index] = Some(page);
            } else if self.pool.len() < POOL_MAX {
                self.pool.push(page);
            }
        }
        for page in self.pages.drain(len..).flatten() {
            if self.pool.len() < POOL_MAX {
                self.pool.push(page);
            }
        }
    }

    /// After a release: frees the graveyard pages no savepoint left can
    /// bring back (those at or past `len`, the pages the innermost one
    /// left saw; all of them when none is left, `len` 0).
    pub(crate) fn bury(&mut self, len: usize) {
        let mut kept = Vec::with_capacity(self.graveyard.len());
        for (index, page) in self.graveyard.drain(..) {
            if index < len {
                kept.push((index, page));
            } else if self.pool.len() < POOL_MAX {
                self.pool.push(page);
            }
        }
        self.graveyard = kept;
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
        let index = (id & !DIRTY_BIT) as usize;
        let page = self.pages[index].take().expect("dirty page freed twice");
        if id < self.editable_from {
            // Frozen: a rollback may need it again.
            self.graveyard.push((index, page));
        } else if self.pool.len() < POOL_MAX {
            self.pool.push(page);
        }
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
