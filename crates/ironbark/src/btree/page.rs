//! The byte layout of tree pages (branch, leaf) and blob runs (overflow
//! values and the state blob), with bounds-checked accessors for pages read
//! from the file and in-place editors for dirty pages.
//!
//! Every tree page starts with this header (little-endian):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | XXH3-64 of the page from byte 8 to its end |
//! | 8 | 8 | txn id that wrote the page |
//! | 16 | 1 | kind: 1 branch, 2 leaf, 3 blob |
//! | 17 | 1 | tree pages: the length of the prefix every key shares (see below); blob: zero |
//! | 18 | 2 | number of cells (tree pages) |
//! | 20 | 4 | tree pages: offset of the lowest cell; blob: pages in the run |
//! | 24 | 8 | the page's own page number |
//! | 32 | 8 | blob only: length of the data, which starts at byte 40 |
//!
//! Tree pages: after the header, a slot array in key order; cells are
//! packed from the end of the page downwards. A slot is 6 bytes: the
//! cell's `u16` offset, then the key's *head*: the 4 bytes of the key that
//! follow the page's prefix (zero-padded, as a big-endian number, stored
//! little-endian), so that a search compares `u32`s in the slot array and
//! reads one cell to confirm, instead of one cell (a cache miss) per probe.
//! Every key of the page (but a branch's first, which is empty and never
//! compared) starts with the page's prefix, whose length is byte 17: the
//! prefix may be shorter than the keys' longest common one (it is made
//! longest when the page is rebuilt), never longer.
//! Leaf cell: `u16 key_len, u8 flags, u32 value_len, key, value` where flags
//! 0 is an inline value and 1 an overflow value whose bytes are replaced by
//! `u64 blob page, u64 blob txn, u64 blob checksum`.
//! Branch cell: `u64 child page, u64 child txn, u64 child checksum, u16
//! key_len, key`. Recording each child's checksum in its parent makes the
//! tree a Merkle tree: a stale page (an old version left where a lost write
//! should have landed) is caught even when its own checksum, page number
//! and txn id are all valid.

use crate::checksum::checksum;
use crate::error::{Error, Result};
use crate::storage::arena::ARENA_BIT;
use crate::storage::map::{prefetch, prefetch_line};

pub(crate) const HEADER_LEN: usize = 32;
/// Marks a provisional page number: an index into the write transaction's
/// dirty pages, replaced by a real page number at commit.
pub(crate) const DIRTY_BIT: u64 = 1 << 63;

/// Whether `pgno` is a page of the data file: neither an arena slot nor a
/// dirty page.
#[inline]
pub(crate) fn is_file_page(pgno: u64) -> bool {
    pgno & (ARENA_BIT | DIRTY_BIT) == 0
}

pub(crate) const BLOB_HEADER_LEN: usize = 40;
/// A branch page of 6-byte slots (files of formats 4-6): its child page
/// numbers are in its cells only.
pub(crate) const KIND_BRANCH: u8 = 1;
pub(crate) const KIND_LEAF: u8 = 2;
pub(crate) const KIND_BLOB: u8 = 3;
/// A branch page whose slots also hold a hint of their child's page
/// number ([`HINTED_SLOT_LEN`]), so that a descent asks for the child as
/// soon as its search picks the slot, before the cell is read: what this
/// build writes (format 7), unless the cells do not fit with the wider
/// slots (`fill_page_parts`).
pub(crate) const KIND_HINTED_BRANCH: u8 = 4;
pub(crate) const LEAF_CELL_HEADER: usize = 7;
pub(crate) const BRANCH_CELL_HEADER: usize = 26;
pub(crate) const OVERFLOW_REF_LEN: usize = 24;
pub(crate) const FLAG_OVERFLOW: u8 = 1;
const SLOT_LEN: usize = 6;
/// The slot of a [`KIND_HINTED_BRANCH`] page: a plain slot, then the
/// child's page number hint (`u32` at [`SLOT_HINT`]).
const HINTED_SLOT_LEN: usize = 10;
/// Where a slot's key head is.
const SLOT_HEAD: usize = 2;
/// Where a hinted slot's child hint is.
const SLOT_HINT: usize = 6;
// A hinted branch's entry (slot and cell) is no longer than a leaf's with
// a blob reference, so the largest key (`Limits::max_key`) stands.
const _: () =
    assert!(HINTED_SLOT_LEN + BRANCH_CELL_HEADER <= SLOT_LEN + LEAF_CELL_HEADER + OVERFLOW_REF_LEN);

/// Set by the engine's own tests alone ([`write_plain_branches_for_tests`]).
static PLAIN_BRANCHES: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Makes every branch page this process fills from now on one of plain
/// slots, as builds of formats 4-6 wrote them, or (`false`) back to the
/// hinted kind: for the engine's own tests of files of those formats,
/// which are written with it set and then opened without. Never set it
/// otherwise: it affects every database of the process.
#[doc(hidden)]
pub fn write_plain_branches_for_tests(on: bool) {
    PLAIN_BRANCHES.store(on, std::sync::atomic::Ordering::SeqCst);
}

/// Whether a page of `kind` is a branch (of either slot width).
#[inline(always)]
pub(crate) fn is_branch_kind(kind: u8) -> bool {
    kind == KIND_BRANCH || kind == KIND_HINTED_BRANCH
}

/// The slot width of a tree page of `kind`.
#[inline(always)]
pub(crate) fn slot_len_of(kind: u8) -> usize {
    if kind == KIND_HINTED_BRANCH {
        HINTED_SLOT_LEN
    } else {
        SLOT_LEN
    }
}

/// The slot width of dirty tree page `b`.
#[inline(always)]
fn slot_len(b: &[u8]) -> usize {
    slot_len_of(b[16])
}

/// The hint a hinted slot keeps of child page `pgno`: its low 31 bits,
/// and the top bit for an arena page; 0 (no hint) for a provisional
/// (dirty) number or a file page past 2^31 (8 TiB of 4 KiB pages). Page 0
/// is a meta page, never a child, so 0 is free to mean none. A hint is
/// only ever asked for ahead: the cell's number is what a descent reads
/// (and `check_cells` checks the two agree).
#[inline(always)]
fn child_hint_of(pgno: u64) -> u32 {
    let number = pgno & !ARENA_BIT;
    if pgno & DIRTY_BIT != 0 || number >= 1 << 31 {
        return 0;
    }
    number as u32 | (u32::from(pgno & ARENA_BIT != 0) << 31)
}
/// The longest key prefix a page keeps (header byte 17).
const MAX_PREFIX: usize = u8::MAX as usize;

#[inline]
pub(crate) fn u16_at(b: &[u8], at: usize) -> u16 {
    // One bounds check for both bytes (indexing each took two).
    u16::from_le_bytes(b[at..at + 2].try_into().expect("2 bytes"))
}
#[inline]
pub(crate) fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
#[inline]
pub(crate) fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}
fn put_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}
fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
pub(crate) fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// How much of a tree page's start a descent asks the CPU to load at once:
/// the header and the slot array of a page of up to 80 cells (a full
/// branch of 16-byte keys has about 84), which a binary search would
/// otherwise fetch one dependent cache miss per probe.
const SEARCH_PREFETCH_BYTES: usize = 512;

/// How much of a branch page's start a descent asks for at once
/// (`Reads::Branch`, `Reads::Ahead`): the header and the slot array of a
/// hinted branch of up to 80 cells (its slots take 10 bytes).
const BRANCH_PREFETCH_BYTES: usize = 832;

/// Bytes of a leaf `Reads::LeafAhead` asks for.
const LEAF_AHEAD_BYTES: usize = 256;

/// What a descent is about to read of a tree page, so that the lines it
/// will need are requested together, as soon as the page is known: their
/// misses then overlap instead of queueing behind each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reads {
    /// The header, the slot array, and the one cell the search lands on,
    /// which cannot be known in advance: a lookup's page, branch or leaf.
    /// Only the header and the slot array are asked for: all of the page
    /// would cost a lookup 63 prefetch instructions a level (a fifth more
    /// instructions per `get` at 1M records) and 64 lines of memory
    /// traffic for the one cell it reads.
    Search,
    /// `Search` of a branch page, whose slots may be wider
    /// ([`KIND_HINTED_BRANCH`]).
    Branch,
    /// Any or all of its cells: a leaf a cursor steps through (its cells
    /// lie anywhere in the page, in no order, and each step would miss on
    /// its own), a page the write path copies or frees.
    Whole,
    /// What `Search` asks for, the header's line included: a page a batch
    /// of descents will search later, after other keys' work
    /// (`btree::search::prefetch_descents`).
    Ahead,
    /// `Ahead` of a leaf: the header and the slots of a leaf of about 35
    /// entries (a leaf's binary search probes a few of its slots; the
    /// lines a longer slot array needs past these, it misses on).
    LeafAhead,
    /// What `Ahead` asked for earlier: nothing more to ask.
    Asked,
}

/// Starts loading what `reads` says of `page` into the cache.
#[inline(always)]
pub(crate) fn prefetch_page(page: &[u8], reads: Reads) {
    match reads {
        Reads::Search => prefetch(&page[..page.len().min(SEARCH_PREFETCH_BYTES)]),
        Reads::Branch => prefetch(&page[..page.len().min(BRANCH_PREFETCH_BYTES)]),
        Reads::Ahead => {
            prefetch_line(page.as_ptr());
            prefetch(&page[..page.len().min(BRANCH_PREFETCH_BYTES)]);
        }
        Reads::Whole => prefetch(page),
        Reads::LeafAhead => {
            prefetch_line(page.as_ptr());
            prefetch(&page[..page.len().min(LEAF_AHEAD_BYTES)]);
        }
        Reads::Asked => {}
    }
}

/// How much of a blob run a lookup asks for as soon as it has the run:
/// its first page. A value in a blob starts a page of its own, and the
/// hardware's prefetchers, which stay within a 4 KiB page, would fetch it
/// a miss at a time as the caller reads it.
const BLOB_PREFETCH_BYTES: usize = 4096;

/// Starts loading the first page of blob run `run` into the cache.
#[inline(always)]
pub(crate) fn prefetch_blob_start(run: &[u8]) {
    prefetch(&run[..run.len().min(BLOB_PREFETCH_BYTES)]);
}

/// The size limits that follow from the page size.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    pub(crate) page_size: usize,
    /// The largest leaf cell of an inline value: two of them (with their
    /// slots) fill a page's usable bytes, so the split of a full page plus
    /// one cell always yields two pages that hold their cells
    /// ([`split_point`]). A value longer than its cell allows goes to a
    /// blob, which takes whole pages: values up to about half a page stay
    /// in their leaf, as LMDB keeps them (inline up to a third until
    /// session 51, a 2,000-byte value took a blob page of its own and a
    /// sorted load of them wrote twice LMDB's bytes).
    pub(crate) max_inline_cell: usize,
    /// The largest key: its branch cell, and its leaf cell with a blob
    /// reference, take at most a third of a page's usable bytes.
    pub(crate) max_key: usize,
}

impl Limits {
    pub(crate) fn new(page_size: usize) -> Limits {
        let usable = page_size - HEADER_LEN;
        let max_key = usable / 3 - SLOT_LEN - LEAF_CELL_HEADER - OVERFLOW_REF_LEN;
        Limits {
            page_size,
            max_inline_cell: usable / 2 - SLOT_LEN,
            max_key,
        }
    }

    pub(crate) fn usable(&self) -> usize {
        self.page_size - HEADER_LEN
    }

    /// Whether a value of `value_len` bytes with a key of `key_len` is
    /// stored inline in the leaf (else in an overflow blob).
    pub(crate) fn value_is_inline(&self, key_len: usize, value_len: usize) -> bool {
        LEAF_CELL_HEADER + key_len + value_len <= self.max_inline_cell
    }

    /// Pages in a blob run holding `data_len` bytes.
    pub(crate) fn blob_pages(&self, data_len: usize) -> u64 {
        (BLOB_HEADER_LEN + data_len).div_ceil(self.page_size) as u64
    }
}

/// The value of a leaf cell.
#[derive(Clone, Copy, Debug)]
pub(crate) enum LeafValue<'a> {
    Inline(&'a [u8]),
    Overflow {
        pgno: u64,
        txn: u64,
        len: u64,
        sum: u64,
    },
}

/// A read-only view of a tree page whose header has been validated.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Node<'a> {
    pub(crate) bytes: &'a [u8],
    pub(crate) pgno: u64,
    pub(crate) count: usize,
    pub(crate) is_leaf: bool,
    /// Bytes a slot takes ([`SLOT_LEN`], or [`HINTED_SLOT_LEN`] for a
    /// hinted branch).
    pub(crate) slot_len: usize,
}

pub(crate) fn page_txn(b: &[u8]) -> u64 {
    u64_at(b, 8)
}

pub(crate) fn page_kind(b: &[u8]) -> u8 {
    b[16]
}

impl<'a> Node<'a> {
    /// Validates the header of a tree page. `expected_txn` is the txn id the
    /// parent recorded (`None` for dirty pages, which have none yet).
    #[inline(always)]
    pub(crate) fn parse(bytes: &'a [u8], pgno: u64, expected_txn: Option<u64>) -> Result<Node<'a>> {
        if bytes.len() < HEADER_LEN * 2 {
            return Err(Error::corrupted_page(pgno, "page too small"));
        }
        let kind = page_kind(bytes);
        if kind != KIND_LEAF && !is_branch_kind(kind) {
            return Err(Error::corrupted_page(
                pgno,
                format!("unexpected page kind {kind}"),
            ));
        }
        if let Some(t) = expected_txn {
            if page_txn(bytes) != t {
                return Err(Error::corrupted_page(
                    pgno,
                    format!(
                        "page txn {} does not match its parent's record {t}",
                        page_txn(bytes)
                    ),
                ));
            }
        }
        let count = u16_at(bytes, 18) as usize;
        let upper = u32_at(bytes, 20) as usize;
        let slot_len = slot_len_of(kind);
        if HEADER_LEN + count * slot_len > upper || upper > bytes.len() {
            return Err(Error::corrupted_page(pgno, "cell area out of bounds"));
        }
        if count == 0 && kind != KIND_LEAF {
            return Err(Error::corrupted_page(pgno, "empty branch page"));
        }
        Ok(Node {
            bytes,
            pgno,
            count,
            is_leaf: kind == KIND_LEAF,
            slot_len,
        })
    }

    fn corrupt(&self, detail: &str) -> Error {
        Error::corrupted_page(self.pgno, detail.to_string())
    }

    #[inline(always)]
    fn cell_offset(&self, i: usize) -> Result<usize> {
        debug_assert!(i < self.count);
        let off = u16_at(self.bytes, HEADER_LEN + i * self.slot_len) as usize;
        if off < HEADER_LEN + self.count * self.slot_len || off >= self.bytes.len() {
            return Err(self.corrupt("cell offset out of bounds"));
        }
        Ok(off)
    }

    /// The bytes of cell `i`, exactly.
    #[inline(always)]
    pub(crate) fn cell(&self, i: usize) -> Result<&'a [u8]> {
        let off = self.cell_offset(i)?;
        let len = if self.is_leaf {
            let h = self
                .bytes
                .get(off..off + LEAF_CELL_HEADER)
                .ok_or_else(|| self.corrupt("leaf cell header out of bounds"))?;
            let klen = u16_at(h, 0) as usize;
            let body = if h[2] & FLAG_OVERFLOW != 0 {
                OVERFLOW_REF_LEN
            } else {
                u32_at(h, 3) as usize
            };
            LEAF_CELL_HEADER + klen + body
        } else {
            let h = self
                .bytes
                .get(off..off + BRANCH_CELL_HEADER)
                .ok_or_else(|| self.corrupt("branch cell header out of bounds"))?;
            BRANCH_CELL_HEADER + u16_at(h, 24) as usize
        };
        self.bytes
            .get(off..off + len)
            .ok_or_else(|| self.corrupt("cell extends past the page"))
    }

    #[inline(always)]
    pub(crate) fn key(&self, i: usize) -> Result<&'a [u8]> {
        let off = self.cell_offset(i)?;
        let (start, klen_at) = if self.is_leaf {
            (off + LEAF_CELL_HEADER, off)
        } else {
            (off + BRANCH_CELL_HEADER, off + 24)
        };
        let klen = self
            .bytes
            .get(klen_at..klen_at + 2)
            .map(|b| u16_at(b, 0) as usize)
            .ok_or_else(|| self.corrupt("key length out of bounds"))?;
        self.bytes
            .get(start..start + klen)
            .ok_or_else(|| self.corrupt("key extends past the page"))
    }

    /// A committed page can only reference committed pages: a provisional
    /// (dirty) number in it is damage, not a reference.
    #[inline]
    fn check_ref(&self, target: u64) -> Result<u64> {
        if target & DIRTY_BIT != 0 && self.pgno & DIRTY_BIT == 0 {
            return Err(self.corrupt("reference to a page number with the top bit set"));
        }
        Ok(target)
    }

    /// Key and value of leaf cell `i`.
    #[inline(always)]
    pub(crate) fn leaf_entry(&self, i: usize) -> Result<(&'a [u8], LeafValue<'a>)> {
        debug_assert!(self.is_leaf);
        // Decoded from the header in place, with one bounds check for the
        // key and body together: a scan's step is mostly this.
        let off = self.cell_offset(i)?;
        let h = self
            .bytes
            .get(off..off + LEAF_CELL_HEADER)
            .ok_or_else(|| self.corrupt("leaf cell header out of bounds"))?;
        let klen = u16_at(h, 0) as usize;
        let overflow = h[2] & FLAG_OVERFLOW != 0;
        let value_len = u32_at(h, 3);
        let body_len = if overflow {
            OVERFLOW_REF_LEN
        } else {
            value_len as usize
        };
        let start = off + LEAF_CELL_HEADER;
        let (key, body) = self
            .bytes
            .get(start..start + klen + body_len)
            .ok_or_else(|| self.corrupt("cell extends past the page"))?
            .split_at(klen);
        let value = if overflow {
            LeafValue::Overflow {
                pgno: self.check_ref(u64_at(body, 0))?,
                txn: u64_at(body, 8),
                len: u64::from(value_len),
                sum: u64_at(body, 16),
            }
        } else {
            LeafValue::Inline(body)
        };
        Ok((key, value))
    }

    /// Child page and its txn id for branch cell `i`.
    #[inline(always)]
    pub(crate) fn child(&self, i: usize) -> Result<(u64, u64)> {
        debug_assert!(!self.is_leaf);
        let off = self.cell_offset(i)?;
        let h = self
            .bytes
            .get(off..off + 16)
            .ok_or_else(|| self.corrupt("branch cell out of bounds"))?;
        Ok((self.check_ref(u64_at(h, 0))?, u64_at(h, 8)))
    }

    /// The page number slot `i` of a hinted branch gives as its child's
    /// (`None` for another page, or no hint): not checked against the
    /// cell, so only for asking for the child's lines ahead of
    /// [`Node::child`]. `i` below the count.
    #[inline(always)]
    pub(crate) fn child_hint(&self, i: usize) -> Option<u64> {
        debug_assert!(!self.is_leaf && i < self.count);
        if self.slot_len != HINTED_SLOT_LEN {
            return None;
        }
        // Within the slot array, which `parse` checked lies in the page.
        let hint = u32_at(self.bytes, HEADER_LEN + i * HINTED_SLOT_LEN + SLOT_HINT);
        let number = u64::from(hint & !(1 << 31));
        (hint != 0).then_some(if hint >> 31 != 0 {
            number | ARENA_BIT
        } else {
            number
        })
    }

    /// Calls `found(i, pgno)` for each child `i` of this branch whose page
    /// number has any of the bits of `mask` set, from the last child to the
    /// first, until it returns `false`: the commit's one scan of a dirty
    /// branch for its dirty children, a load and a test per child.
    pub(crate) fn children_marked(
        &self,
        mask: u64,
        mut found: impl FnMut(usize, u64) -> bool,
    ) -> Result<()> {
        debug_assert!(!self.is_leaf);
        let slots = self
            .bytes
            .get(HEADER_LEN..HEADER_LEN + self.count * self.slot_len)
            .ok_or_else(|| self.corrupt("slot array out of bounds"))?;
        for (i, slot) in slots.chunks_exact(self.slot_len).enumerate().rev() {
            let off = u16::from_le_bytes([slot[0], slot[1]]) as usize;
            let pgno = self
                .bytes
                .get(off..off + 8)
                .filter(|_| off >= HEADER_LEN + self.count * self.slot_len)
                .map(|b| u64_at(b, 0))
                .ok_or_else(|| self.corrupt("branch cell out of bounds"))?;
            if pgno & mask != 0 && !found(i, pgno) {
                break;
            }
        }
        Ok(())
    }

    /// The checksum that branch cell `i` records for its child.
    pub(crate) fn child_sum(&self, i: usize) -> Result<u64> {
        debug_assert!(!self.is_leaf);
        let off = self.cell_offset(i)?;
        self.bytes
            .get(off + 16..off + 24)
            .map(|b| u64_at(b, 0))
            .ok_or_else(|| self.corrupt("branch cell out of bounds"))
    }

    /// The length of the prefix every key of the page shares.
    #[inline]
    fn prefix_len(&self) -> usize {
        usize::from(self.bytes[17])
    }

    /// The slot array: `count` slots, within the page (checked by `parse`).
    #[inline(always)]
    fn slots(&self) -> &'a [u8] {
        &self.bytes[HEADER_LEN..HEADER_LEN + self.count * self.slot_len]
    }

    /// The head in slot `i` (below the count).
    #[inline(always)]
    fn head(&self, i: usize) -> u32 {
        u32_at(self.slots(), i * self.slot_len + SLOT_HEAD)
    }

    /// Where `key` falls among keys `first..self.count`, by their heads:
    /// `Err(0)`/`Err(1)` below them all, `Err(count)` above them all, when
    /// `key` does not start with the page's prefix; else `Ok((lo, hi))`,
    /// the keys whose head equals `key`'s (every key before `lo` is below
    /// `key`, every key from `hi` on above it). Reads one cell, to learn
    /// the prefix.
    #[inline(always)]
    fn head_range(
        &self,
        first: usize,
        key: &[u8],
    ) -> Result<std::result::Result<(usize, usize), usize>> {
        let count = self.count;
        if first >= count {
            return Ok(Err(first));
        }
        let p = self.prefix_len();
        let h = key_head(key, p);
        let lo = self.first_head_not_below(first, h);
        if self.is_leaf && lo < count && self.head(lo) == h {
            // The lines of cell `lo` past its first, where its head is the
            // key's (a lookup that will find its key there reads the value
            // next): asked for now, they arrive with the first, not after
            // it. A missing key's head rarely matches, and asks for none.
            if let Ok(off) = self.cell_offset(lo) {
                let end = (off + CELL_PREFETCH_BYTES).min(self.bytes.len());
                prefetch(&self.bytes[off..end]);
            }
        }
        // The keys share their first `p` bytes: does `key` start with them?
        if p > 0 {
            let probe = self.key(lo.min(count - 1))?;
            let page_prefix = probe
                .get(..p)
                .ok_or_else(|| self.corrupt("key shorter than the page's prefix"))?;
            match compare_keys(&key[..p.min(key.len())], page_prefix) {
                std::cmp::Ordering::Less => return Ok(Err(first)),
                std::cmp::Ordering::Greater => return Ok(Err(count)),
                // A key shorter than the prefix and equal to its start is
                // below every key of the page.
                std::cmp::Ordering::Equal if key.len() < p => return Ok(Err(first)),
                std::cmp::Ordering::Equal => {}
            }
        }
        // The keys whose head is `h`: mostly none or one, so a short walk;
        // a search past that (a page whose prefix is shorter than its keys
        // share has runs of equal heads).
        let mut end = lo;
        while end < count && end < lo + 4 && self.head(end) == h {
            end += 1;
        }
        if end == lo + 4 {
            let mut top = count;
            while end < top {
                let mid = end + (top - end) / 2;
                if self.head(mid) <= h {
                    end = mid + 1;
                } else {
                    top = mid;
                }
            }
        }
        Ok(Ok((lo, end)))
    }

    /// The first slot from `first` (below the count) whose head is not
    /// below `h`. The outcome of comparing a random key's head with a
    /// slot's is a coin toss the branch predictor loses half the time, so
    /// no step branches on one. Each halving step is a select marked
    /// unpredictable (`std::hint::select_unpredictable`), which LLVM keeps
    /// as a conditional move: unmarked, its x86 backend turns a select in
    /// a loop into a branch where a load feeds the condition. The range's
    /// length after each step depends only on the count, so the loop's
    /// exit is the same for every key of a page. Once `HEAD_WINDOW` slots
    /// or fewer are left, the search counts the heads below `h` among
    /// the next `HEAD_WINDOW` slots: independent loads, added up, where
    /// three more halving steps would each wait for the load before.
    /// Heads past the range are not below `h`, so counting a whole window
    /// past its end changes nothing. The probes index the slot array
    /// sliced once, with `u32` indices (a count is a `u16`): their offsets
    /// cannot overflow, so each costs one bounds check against the array's
    /// length, not two against the page's.
    /// The search is compiled for each slot width, so that a probe's
    /// address is a constant multiple of its index (a multiplication by
    /// the width read from the page would lengthen every step's chain).
    #[inline(always)]
    fn first_head_not_below(&self, first: usize, h: u32) -> usize {
        if self.slot_len == HINTED_SLOT_LEN {
            self.first_head_not_below_in::<HINTED_SLOT_LEN>(first, h)
        } else {
            self.first_head_not_below_in::<SLOT_LEN>(first, h)
        }
    }

    /// [`Node::first_head_not_below`] in a page of slots of `W` bytes.
    #[inline(always)]
    fn first_head_not_below_in<const W: usize>(&self, first: usize, h: u32) -> usize {
        debug_assert!(first < self.count && W == self.slot_len);
        let slots = self.slots();
        let count = self.count as u32;
        // The answer is in lo..=lo + n: every head before `lo` is below
        // `h`, none from `lo + n` on is.
        let (mut lo, mut n) = (first as u32, count - first as u32);
        while n > HEAD_WINDOW {
            let half = n / 2;
            // Either way the answer stays in the new range: past `lo +
            // half` if its head is below `h`, else at or before it, and
            // `n - half >= half`.
            let below = slot_head::<W>(slots, lo + half) < h;
            lo = std::hint::select_unpredictable(below, lo + half, lo);
            n -= half;
        }
        debug_assert!(lo >= first as u32 && lo + n <= count);
        // A whole window where the page has one from `first` (a fixed
        // count of probes, unrolled, no loop to leave): moved back from
        // `lo` to end at the count, it takes in heads before `lo`, which
        // are below `h` and counted.
        let first = first as u32;
        if count - first >= HEAD_WINDOW {
            let start = lo.min(count - HEAD_WINDOW);
            let window = &slots[start as usize * W..(start + HEAD_WINDOW) as usize * W];
            let below: u32 = (0..HEAD_WINDOW)
                .map(|i| u32::from(slot_head::<W>(window, i) < h))
                .sum();
            return (start + below) as usize;
        }
        let below: u32 = (lo..count)
            .map(|i| u32::from(slot_head::<W>(slots, i) < h))
            .sum();
        (lo + below) as usize
    }

    /// Asks for the lines of leaf cells `search_leaf(key)` will read,
    /// reading only the header and the slot array: the cell where the
    /// heads say the key is or would go, whose key the search compares
    /// (for a batch of descents that searches the leaf later:
    /// `btree::search::prefetch_descents`).
    #[inline]
    pub(crate) fn prefetch_search(&self, key: &[u8]) {
        if self.count == 0 {
            return;
        }
        let at = self
            .first_head_not_below(0, key_head(key, self.prefix_len()))
            .min(self.count - 1);
        if let Ok(off) = self.cell_offset(at) {
            let end = (off + CELL_PREFETCH_BYTES).min(self.bytes.len());
            prefetch_line(self.bytes[off..].as_ptr());
            prefetch(&self.bytes[off..end]);
        }
    }

    /// Checks every cell and the slot array against the keys, in one pass:
    /// each cell lies within the page (a leaf's value or blob reference, a
    /// branch's child reference), every key (but a branch's first) starts
    /// with the page's prefix, and every slot's head is its key's. Searches
    /// and the editors rely on it (they trust dirty pages), so the write
    /// path checks each committed page it copies, and so does `check`.
    pub(crate) fn check_cells(&self) -> Result<()> {
        let prefix = self.prefix_len();
        let first = usize::from(!self.is_leaf);
        let page_prefix = match first < self.count {
            true => self.key(first)?.get(..prefix),
            false => Some(&[][..]),
        };
        let Some(page_prefix) = page_prefix else {
            return Err(self.corrupt("key shorter than the page's prefix"));
        };
        for i in 0..self.count {
            let key = if self.is_leaf {
                self.leaf_entry(i)?.0
            } else {
                let (child, _) = self.child(i)?;
                if self.slot_len == HINTED_SLOT_LEN
                    && u32_at(self.slots(), i * HINTED_SLOT_LEN + SLOT_HINT) != child_hint_of(child)
                {
                    return Err(self.corrupt("slot's child hint does not match its cell"));
                }
                self.key(i)?
            };
            // `compare_keys`, not a slice compare: a call to `memcmp` per
            // key cost more than the few bytes of a prefix.
            let has_prefix = key
                .get(..prefix)
                .is_some_and(|p| compare_keys(p, page_prefix).is_eq());
            if i >= first && !has_prefix {
                return Err(self.corrupt("key without the page's prefix"));
            }
            if self.head(i) != key_head(key, prefix) {
                return Err(self.corrupt("slot's key head does not match its key"));
            }
        }
        Ok(())
    }

    /// Leaf: `Ok(i)` if key `i` equals `key`, else `Err(i)` where it would go.
    /// Inlined, as `search_branch` is.
    #[inline(always)]
    pub(crate) fn search_leaf(&self, key: &[u8]) -> Result<std::result::Result<usize, usize>> {
        let (mut lo, mut hi) = match self.head_range(0, key)? {
            Ok(range) => range,
            Err(at) => return Ok(Err(at)),
        };
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match compare_keys(self.key(mid)?, key) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Ok(Ok(mid)),
            }
        }
        Ok(Err(lo))
    }

    /// Branch: the index of the child whose range holds `key`. Inlined
    /// into the descents, which call it once a level.
    #[inline(always)]
    pub(crate) fn search_branch(&self, key: &[u8]) -> Result<usize> {
        // The largest i >= 1 with key[i] <= key, else 0 (key 0 is empty and
        // never compared).
        let (mut lo, mut hi) = match self.head_range(1, key)? {
            Ok(range) => range,
            Err(at) => return Ok(at - 1),
        };
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if compare_keys(self.key(mid)?, key) != std::cmp::Ordering::Greater {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(lo - 1)
    }

    /// Bytes the header, slots and cells take at most: the header, the
    /// slot array and the cell area from its start to the page's end (any
    /// holes in it counted as used). One read of the header, no cell.
    pub(crate) fn used_at_most(&self) -> usize {
        let upper = (u32_at(self.bytes, 20) as usize).min(self.bytes.len());
        HEADER_LEN + self.count * self.slot_len + (self.bytes.len() - upper)
    }

    /// Bytes a leaf cell of a key and an inline value takes, with its slot.
    pub(crate) fn leaf_cell_room(key_len: usize, value_len: usize) -> usize {
        LEAF_CELL_HEADER + key_len + value_len + SLOT_LEN
    }

    /// Bytes used by cells and slots.
    pub(crate) fn used_bytes(&self) -> Result<usize> {
        let mut used = 0;
        for i in 0..self.count {
            used += self.cell(i)?.len() + self.slot_len;
        }
        Ok(used)
    }

    /// Whether cells and slots use at least `bytes`: counted in slot order
    /// up to the first cells that reach it.
    pub(crate) fn uses_at_least(&self, bytes: usize) -> Result<bool> {
        let mut used = 0;
        for i in 0..self.count {
            if used >= bytes {
                return Ok(true);
            }
            used += self.cell(i)?.len() + self.slot_len;
        }
        Ok(used >= bytes)
    }
}

/// Slots whose heads a search counts instead of halving them
/// (`Node::first_head_not_below`): 8 slots are 48 bytes, one or two
/// lines. Lookups on a 1M random fill, the halving steps conditional
/// moves, ran slower with 4 or 16 (benchmarks.md, session 57).
const HEAD_WINDOW: u32 = 8;

/// Bytes of a leaf cell a lookup asks for ahead (`Node::head_range`):
/// three lines, a 16-byte key and a 100-byte value wherever it starts.
const CELL_PREFETCH_BYTES: usize = 192;

/// Byte-wise key order, eight bytes at a time (keys are short; a call to
/// `memcmp` per comparison costs more than the comparison).
#[inline(always)]
pub(crate) fn compare_keys(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    let n = a.len().min(b.len());
    let (x, y) = (&a[..n], &b[..n]);
    let word = |s: &[u8], at: usize| u64::from_be_bytes(s[at..at + 8].try_into().expect("8 bytes"));
    if n >= 8 {
        let mut i = 0;
        while i + 8 < n {
            let (p, q) = (word(x, i), word(y, i));
            if p != q {
                return p.cmp(&q);
            }
            i += 8;
        }
        // The last eight bytes, overlapping compared ones unless `n` is a
        // multiple of 8: those are equal, so the first difference in this
        // window is the first of all. No byte-at-a-time tail.
        let (p, q) = (word(x, n - 8), word(y, n - 8));
        if p != q {
            return p.cmp(&q);
        }
    } else {
        // A slice compare would call `memcmp`, which costs more than 0-7
        // bytes do.
        for (p, q) in x.iter().zip(y) {
            if p != q {
                return p.cmp(q);
            }
        }
    }
    a.len().cmp(&b.len())
}

/// The head in slot `i` of a slot array (`Node::slots`): one bounds check,
/// which the callers' indices (below the slot count) always pass.
#[inline(always)]
fn slot_head<const W: usize>(slots: &[u8], i: u32) -> u32 {
    let at = i as usize * W + SLOT_HEAD;
    u32_at(slots, at)
}

/// The head of `key` in a page whose keys share a prefix of `prefix`
/// bytes: the 4 bytes after it, zero-padded, as a big-endian number, so
/// that heads are in key order (a smaller head means a smaller key; equal
/// heads say nothing).
#[inline]
pub(crate) fn key_head(key: &[u8], prefix: usize) -> u32 {
    let tail = key.get(prefix..).unwrap_or(&[]);
    if let Some(four) = tail.first_chunk::<4>() {
        // The common case, with no call to copy a variable length.
        return u32::from_be_bytes(*four);
    }
    // By cases: a copy of a variable length (0-3 bytes), even a loop of
    // byte copies, compiles to a call to memcpy.
    match *tail {
        [] => 0,
        [a] => u32::from_be_bytes([a, 0, 0, 0]),
        [a, b] => u32::from_be_bytes([a, b, 0, 0]),
        [a, b, c, ..] => u32::from_be_bytes([a, b, c, 0]),
    }
}

/// The key of a cell of a dirty page (well formed).
fn cell_key(cell: &[u8], is_leaf: bool) -> &[u8] {
    if is_leaf {
        &cell[LEAF_CELL_HEADER..LEAF_CELL_HEADER + u16_at(cell, 0) as usize]
    } else {
        &cell[BRANCH_CELL_HEADER..BRANCH_CELL_HEADER + u16_at(cell, 24) as usize]
    }
}

/// The first slot whose key is compared (a branch's first key is empty and
/// never is): keys from it on share the page's prefix.
fn first_keyed(b: &[u8]) -> usize {
    usize::from(is_branch_kind(b[16]))
}

/// The length of the longest common prefix of `a` and `b`, at most
/// [`MAX_PREFIX`].
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len()).min(MAX_PREFIX);
    // Eight bytes at a time: neighbouring keys of a sorted load share most
    // of their bytes, and every insert measures what the new key shares.
    let mut i = 0;
    while i + 8 <= n {
        let x = u64::from_be_bytes(a[i..i + 8].try_into().expect("8 bytes"));
        let y = u64::from_be_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        if x != y {
            return i + ((x ^ y).leading_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

/// The key of slot `i` of a dirty page (well formed).
fn slot_key(b: &[u8], i: usize) -> &[u8] {
    let off = u16_at(b, HEADER_LEN + i * slot_len(b)) as usize;
    cell_key(&b[off..], b[16] == KIND_LEAF)
}

/// Checks the invariant of the slot array (debug builds, after every edit
/// of a page): keys in order, all with the page's prefix, heads matching.
#[cfg(any(test, debug_assertions))]
fn assert_heads(b: &[u8]) {
    if cell_count(b) == 0 {
        // An empty branch on its way out is not a valid page to parse.
        return;
    }
    let node = Node::parse(b, u64::MAX, None).expect("dirty page is well formed");
    node.check_cells().expect("slot array matches the keys");
    for i in (usize::from(!node.is_leaf) + 1)..node.count {
        assert!(
            node.key(i - 1).expect("key") < node.key(i).expect("key"),
            "slot {i}: out of order"
        );
    }
}

/// Sets the page's prefix length to `prefix` and every keyed slot's head
/// to match.
fn rewrite_heads(b: &mut [u8], prefix: usize) {
    debug_assert!(prefix <= MAX_PREFIX);
    b[17] = prefix as u8;
    // Every slot, the unkeyed first one of a branch too: it may become
    // keyed by a shift (an insert at 0), and its head must then be right.
    for i in 0..cell_count(b) {
        let head = key_head(slot_key(b, i), prefix);
        put_u32(b, HEADER_LEN + i * slot_len(b) + SLOT_HEAD, head);
    }
}

/// Makes the page's prefix the longest its keys share (that of its first
/// and last keyed slots, the keys being in order) and rewrites the heads.
fn refresh_prefix(b: &mut [u8]) {
    let (first, count) = (first_keyed(b), cell_count(b));
    let prefix = if first < count {
        common_prefix(slot_key(b, first), slot_key(b, count - 1))
    } else {
        0
    };
    rewrite_heads(b, prefix);
}

/// The fixed header of a leaf cell: key length, flags, value length.
pub(crate) fn leaf_cell_header(
    key_len: usize,
    value_len: u64,
    overflow: bool,
) -> [u8; LEAF_CELL_HEADER] {
    let mut h = [0u8; LEAF_CELL_HEADER];
    h[0..2].copy_from_slice(&(key_len as u16).to_le_bytes());
    h[2] = if overflow { FLAG_OVERFLOW } else { 0 };
    h[3..7].copy_from_slice(&(value_len as u32).to_le_bytes());
    h
}

/// Encodes a leaf cell with its value inline.
pub(crate) fn leaf_cell_inline(key: &[u8], value: &[u8]) -> Vec<u8> {
    [
        &leaf_cell_header(key.len(), value.len() as u64, false)[..],
        key,
        value,
    ]
    .concat()
}

/// The reference a leaf cell holds to an overflow blob.
pub(crate) fn overflow_ref(pgno: u64, txn: u64, sum: u64) -> [u8; OVERFLOW_REF_LEN] {
    let mut r = [0u8; OVERFLOW_REF_LEN];
    r[0..8].copy_from_slice(&pgno.to_le_bytes());
    r[8..16].copy_from_slice(&txn.to_le_bytes());
    r[16..24].copy_from_slice(&sum.to_le_bytes());
    r
}

/// Encodes a leaf cell whose value lives in the blob at `pgno`.
pub(crate) fn leaf_cell_overflow(
    key: &[u8],
    value_len: u64,
    pgno: u64,
    txn: u64,
    sum: u64,
) -> Vec<u8> {
    [
        &leaf_cell_header(key.len(), value_len, true)[..],
        key,
        &overflow_ref(pgno, txn, sum),
    ]
    .concat()
}

/// Encodes a branch cell.
pub(crate) fn branch_cell(key: &[u8], child: u64, child_txn: u64, child_sum: u64) -> Vec<u8> {
    let mut c = Vec::with_capacity(BRANCH_CELL_HEADER + key.len());
    push_branch_cell(&mut c, key, child, child_txn, child_sum);
    c
}

/// Appends a branch cell's encoding to `out`.
pub(crate) fn push_branch_cell(
    out: &mut Vec<u8>,
    key: &[u8],
    child: u64,
    child_txn: u64,
    child_sum: u64,
) {
    out.extend_from_slice(&child.to_le_bytes());
    out.extend_from_slice(&child_txn.to_le_bytes());
    out.extend_from_slice(&child_sum.to_le_bytes());
    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
    out.extend_from_slice(key);
}

/// The bytes a cell of `cell_len` bytes takes with a plain slot. A hinted
/// branch's slots take more; the page makers fall back to plain slots for
/// cells that fit only so (`fill_page_parts`), so that a count of cells
/// that fit by this always fits.
pub(crate) fn slotted_size(cell_len: usize) -> usize {
    cell_len + SLOT_LEN
}

/// Where the split of a page whose `n` cells (at least two, each of at
/// most half of `usable` bytes with its slot, as [`Limits`] keeps them)
/// take `total` bytes with their slots, more than `usable`, puts its
/// right half: cell `k` on (`1 <= k < n`), both halves within `usable`.
/// By bytes in the middle: the left half takes the cells up to and
/// including the one that reaches half of `total`, unless that makes it
/// overflow (a cell of half a page after almost half of `total`), and
/// then stops before it. Either way each half fits: the left one holds
/// at most `usable`; then the right one holds at most half of `total`
/// (at most three-quarters of `usable`, as `total` exceeds a full page by
/// one cell), or, where the left one stops short, less than `total`
/// less `usable` plus half of it, which is below `usable`.
pub(crate) fn split_point(
    n: usize,
    size: impl Fn(usize) -> usize,
    total: usize,
    usable: usize,
) -> usize {
    assert!(n >= 2, "split of a page with fewer than two cells");
    let mut k = n - 1;
    let mut acc = 0;
    for i in 0..n {
        acc += size(i);
        if acc >= total / 2 {
            k = if acc <= usable { i + 1 } else { i };
            break;
        }
    }
    let k = k.clamp(1, n - 1);
    let left: usize = (0..k).map(&size).sum();
    assert!(
        left <= usable && total - left <= usable,
        "a split whose halves do not fit: {left} and {} of {usable} bytes",
        total - left
    );
    k
}

/// Makes `b` a tree page holding `cells` in order. The caller guarantees
/// they fit.
pub(crate) fn fill_page<C: AsRef<[u8]>>(b: &mut [u8], is_leaf: bool, cells: &[C]) {
    fill_page_from(b, is_leaf, cells.len(), |i| cells[i].as_ref());
}

/// Makes `b` a tree page holding the `count` cells `cell(0)`, `cell(1)`,
/// ... in order (a split's halves, read around the cell it adds, with no
/// list of them made): [`fill_page_parts`] with each cell in one piece.
pub(crate) fn fill_page_from<'c>(
    b: &mut [u8],
    is_leaf: bool,
    count: usize,
    cell: impl Fn(usize) -> &'c [u8],
) {
    fill_page_parts(b, is_leaf, count, |i| [cell(i), &[], &[]]);
}

/// A cell as up to three pieces written back to back (a leaf cell's
/// header and key from one place, its value from another), so that a
/// page is filled from where its cells' bytes lie, with no buffer per
/// cell.
pub(crate) type CellParts<'c> = [&'c [u8]; 3];

/// Makes `b` a tree page holding the `count` cells `cell(0)`, `cell(1)`,
/// ... (each in pieces: [`CellParts`]) in order. The caller guarantees
/// they fit. The header, the slots and the cells are written; the free
/// gap between them is not, since nothing reads it until an edit writes
/// over it, and `seal` zeroes it before the page reaches the file (as for
/// `copy_page`). Cells are placed from the page's end down, in order, as
/// inserts at the end would place them, and the heads are written once,
/// for the prefix of the first and last keyed cells, not rewritten as the
/// prefix shrinks.
pub(crate) fn fill_page_parts<'c>(
    b: &mut [u8],
    is_leaf: bool,
    count: usize,
    cell: impl Fn(usize) -> CellParts<'c>,
) {
    assert!(
        b.len() <= usize::from(u16::MAX) + 1,
        "slot offsets are 16-bit"
    );
    b[..HEADER_LEN].fill(0);
    // A branch with a hint of each child in its slots, if its cells fit
    // with the wider slots: they do unless the cells came from a full
    // branch of plain slots (a file of an earlier format), which stays so.
    let hinted = !is_leaf
        && !PLAIN_BRANCHES.load(std::sync::atomic::Ordering::Relaxed)
        && (0..count)
            .map(|i| cell(i).iter().map(|p| p.len()).sum::<usize>() + HINTED_SLOT_LEN)
            .sum::<usize>()
            <= b.len() - HEADER_LEN;
    b[16] = match (is_leaf, hinted) {
        (true, _) => KIND_LEAF,
        (false, true) => KIND_HINTED_BRANCH,
        (false, false) => KIND_BRANCH,
    };
    let width = slot_len(b);
    let mut upper = b.len();
    for i in 0..count {
        let parts = cell(i);
        let len = parts[0].len() + parts[1].len() + parts[2].len();
        let slots_end = HEADER_LEN + (i + 1) * width;
        assert!(
            upper >= slots_end + len,
            "cells given to fill_page do not fit"
        );
        upper -= len;
        let mut at = upper;
        for p in parts {
            if !p.is_empty() {
                b[at..at + p.len()].copy_from_slice(p);
                at += p.len();
            }
        }
        put_u16(b, slots_end - width, upper as u16);
        if hinted {
            let hint = child_hint_of(u64_at(b, upper));
            put_u32(b, slots_end - width + SLOT_HINT, hint);
        }
    }
    put_u16(b, 18, count as u16);
    put_u32(b, 20, upper as u32);
    refresh_prefix(b);
    #[cfg(debug_assertions)]
    assert_heads(b);
}

/// The number of cells of a dirty page (which may be an empty branch on
/// its way out, which `Node::parse` refuses).
pub(crate) fn cell_count(b: &[u8]) -> usize {
    u16_at(b, 18) as usize
}

fn upper_of(b: &[u8]) -> usize {
    u32_at(b, 20) as usize
}

/// The free gap of tree page `b`, between its slot array and its cell
/// area: `None` for a blob or state page, or a header that describes no
/// gap inside the page (a damaged one: its copy is then whole).
fn free_gap(b: &[u8]) -> Option<std::ops::Range<usize>> {
    if b.len() < HEADER_LEN {
        return None;
    }
    let kind = page_kind(b);
    if kind != KIND_LEAF && !is_branch_kind(kind) {
        return None;
    }
    let slots_end = HEADER_LEN + cell_count(b) * slot_len_of(kind);
    let upper = upper_of(b);
    (slots_end <= upper && upper <= b.len()).then_some(slots_end..upper)
}

/// Copies page `from` into `to` (of the same length) to be changed there:
/// a tree page's free gap is not copied, since nothing reads it until a
/// put writes a slot or a cell over it, and `seal` zeroes it before a
/// file page is checksummed, so what `to` held there (a recycled buffer's
/// stale bytes) never reaches the file. About a third of a page at a
/// random fill's occupancy, read and written once per copy-on-write.
pub(crate) fn copy_page(to: &mut [u8], from: &[u8]) {
    assert_eq!(to.len(), from.len(), "pages of one size");
    match free_gap(from) {
        Some(gap) => {
            to[..gap.start].copy_from_slice(&from[..gap.start]);
            to[gap.end..].copy_from_slice(&from[gap.end..]);
        }
        None => to.copy_from_slice(from),
    }
}

/// Free bytes between the slot array and the cell area of a dirty page.
fn gap(b: &[u8]) -> usize {
    upper_of(b) - (HEADER_LEN + cell_count(b) * slot_len(b))
}

/// The cells of a dirty page, copied out in order.
pub(crate) fn cells_of(b: &[u8]) -> Vec<Vec<u8>> {
    let node = Node::parse(b, u64::MAX, None).expect("dirty page is well formed");
    (0..node.count)
        .map(|i| node.cell(i).expect("dirty cell is well formed").to_vec())
        .collect()
}

/// Rewrites a dirty page so its free space is one gap: the cells are
/// copied out to a scratch page kept per thread (no allocation per
/// compaction) and packed back from the end in slot order.
fn compact(b: &mut [u8]) {
    thread_local! {
        static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    SCRATCH.with(|scratch| {
        let mut scratch = scratch.borrow_mut();
        scratch.clear();
        scratch.extend_from_slice(b);
        let old = Node::parse(&scratch, u64::MAX, None).expect("dirty page is well formed");
        let mut upper = b.len();
        for i in 0..old.count {
            let cell = old.cell(i).expect("dirty cell is well formed");
            upper -= cell.len();
            b[upper..upper + cell.len()].copy_from_slice(cell);
            put_u16(b, HEADER_LEN + i * old.slot_len, upper as u16);
        }
        put_u32(b, 20, upper as u32);
        // The gap holds no stale cell bytes (removed values stay out of the
        // file once their page is compacted).
        b[HEADER_LEN + old.count * old.slot_len..upper].fill(0);
    });
    refresh_prefix(b);
}

/// Whether a cell of `len` bytes fits in a dirty page once the cell of
/// `removed` bytes (0: none) is taken out: at once if the gap holds it,
/// else by counting the bytes in use.
pub(crate) fn cell_fits(b: &[u8], len: usize, removed: usize) -> bool {
    let need = len + slot_len(b);
    if gap(b) >= need {
        return true;
    }
    let used = Node::parse(b, u64::MAX, None)
        .and_then(|n| n.used_bytes())
        .expect("dirty page is well formed");
    let freed = if removed > 0 {
        removed + slot_len(b)
    } else {
        0
    };
    b.len() - HEADER_LEN - (used - freed) >= need
}

/// Inserts `cell` at slot `index` of a dirty page; `false` if it does not
/// fit even after compaction (the caller splits).
pub(crate) fn insert_cell(b: &mut [u8], index: usize, cell: &[u8]) -> bool {
    insert_cell_parts(b, index, &[cell])
}

/// Inserts the cell made of `parts`, back to back, at slot `index` of a
/// dirty page (so a caller need not assemble the cell in a buffer first);
/// `false` if it does not fit even after compaction.
pub(crate) fn insert_cell_parts(b: &mut [u8], index: usize, parts: &[&[u8]]) -> bool {
    let count = cell_count(b);
    assert!(index <= count);
    let len: usize = parts.iter().map(|p| p.len()).sum();
    let width = slot_len(b);
    let need = len + width;
    if gap(b) < need {
        let used = Node::parse(b, u64::MAX, None)
            .and_then(|n| n.used_bytes())
            .expect("dirty page is well formed");
        if b.len() - HEADER_LEN - used < need {
            return false;
        }
        compact(b);
    }
    let upper = upper_of(b) - len;
    let mut at = upper;
    for p in parts {
        b[at..at + p.len()].copy_from_slice(p);
        at += p.len();
    }
    let slots = HEADER_LEN + index * width;
    if index < count {
        // Not an append at the end (a sorted load's every insert).
        b.copy_within(slots..HEADER_LEN + count * width, slots + width);
    }
    put_u16(b, slots, upper as u16);
    if width == HINTED_SLOT_LEN {
        let hint = child_hint_of(u64_at(b, upper));
        put_u32(b, slots + SLOT_HINT, hint);
    }
    put_u16(b, 18, (count + 1) as u16);
    put_u32(b, 20, upper as u32);
    // The slot that just became keyed: the new one, or, for an insert
    // before a branch's first key, the old first slot shifted past it. Its
    // key may not share the page's prefix: then the prefix shrinks to what
    // it shares, and every head is rewritten.
    let first = first_keyed(b);
    let keyed = index.max(first);
    let prefix = usize::from(b[17]);
    if keyed <= count {
        let other = if keyed == first { keyed + 1 } else { first };
        let shared = if other > count {
            // The only keyed slot: the prefix is its whole key (as a page
            // built with one key gets), so that a page grown by inserts
            // (a branch of a sorted load) keeps the longest prefix, shrunk
            // as keys come, instead of none: with none, every head of such
            // a branch would be the same 4 bytes and searches would read a
            // cell per probe.
            let whole = slot_key(b, keyed).len().min(MAX_PREFIX);
            if whole != prefix {
                rewrite_heads(b, whole);
                return true;
            }
            whole
        } else {
            match slot_key(b, other).get(..prefix) {
                Some(page_prefix) => common_prefix(page_prefix, slot_key(b, keyed)),
                None => 0,
            }
        };
        if shared < prefix {
            rewrite_heads(b, shared);
            return true;
        }
    }
    let head = key_head(slot_key(b, index), prefix);
    put_u32(b, slots + SLOT_HEAD, head);
    debug_assert!(
        index <= first || slot_key(b, index - 1) < slot_key(b, index),
        "cell inserted out of order"
    );
    #[cfg(debug_assertions)]
    assert_heads(b);
    true
}

/// What [`append_leaf_inline`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LeafAppend {
    /// The cell went in after the last one.
    Appended,
    /// The key is not greater than the leaf's last key: nothing changed.
    OutOfOrder,
    /// Nothing changed: the cell needs a compaction or a split, or the key
    /// does not share the page's prefix (the general insert handles all
    /// three).
    Declined,
}

/// Appends the cell of `key` with its inline `value` after the last cell of
/// a dirty, non-empty leaf, when the key is greater than the leaf's last key
/// and fits in the page's gap: a sorted load's every put. It decodes the
/// last key once, for the order check and the prefix check alike (every
/// key of a page shares its prefix, so the last key's prefix is the
/// page's), where [`insert_cell_parts`] would decode the first key and the
/// new cell again.
pub(crate) fn append_leaf_inline(b: &mut [u8], key: &[u8], value: &[u8]) -> LeafAppend {
    debug_assert_eq!(b[16], KIND_LEAF);
    let count = cell_count(b);
    let Some(last_slot) = count.checked_sub(1) else {
        return LeafAppend::Declined;
    };
    let last = slot_key(b, last_slot);
    if compare_keys(key, last).is_le() {
        return LeafAppend::OutOfOrder;
    }
    let prefix = usize::from(b[17]);
    if prefix > 0 && (key.len() < prefix || key[..prefix] != last[..prefix]) {
        return LeafAppend::Declined;
    }
    let len = LEAF_CELL_HEADER + key.len() + value.len();
    let slots_end = HEADER_LEN + count * SLOT_LEN;
    let upper = upper_of(b);
    if upper - slots_end < len + SLOT_LEN {
        return LeafAppend::Declined;
    }
    let at = upper - len;
    b[at..at + LEAF_CELL_HEADER].copy_from_slice(&leaf_cell_header(
        key.len(),
        value.len() as u64,
        false,
    ));
    b[at + LEAF_CELL_HEADER..at + LEAF_CELL_HEADER + key.len()].copy_from_slice(key);
    b[at + LEAF_CELL_HEADER + key.len()..at + len].copy_from_slice(value);
    put_u16(b, slots_end, at as u16);
    put_u32(b, slots_end + SLOT_HEAD, key_head(key, prefix));
    put_u16(b, 18, (count + 1) as u16);
    put_u32(b, 20, at as u32);
    #[cfg(debug_assertions)]
    assert_heads(b);
    LeafAppend::Appended
}

/// Removes slot `index` of a dirty page (its cell bytes become garbage,
/// reclaimed by the next compaction).
pub(crate) fn remove_cell(b: &mut [u8], index: usize) {
    let count = cell_count(b);
    assert!(index < count);
    let width = slot_len(b);
    let slots = HEADER_LEN + index * width;
    b.copy_within(slots + width..HEADER_LEN + count * width, slots);
    put_u16(b, 18, (count - 1) as u16);
    if count == 1 {
        put_u32(b, 20, b.len() as u32);
        b[17] = 0;
    }
    #[cfg(debug_assertions)]
    assert_heads(b);
}

/// Points branch cell `index` of a dirty page at `child` written by `txn`.
pub(crate) fn set_child(b: &mut [u8], index: usize, child: u64, txn: u64, sum: u64) {
    let width = slot_len(b);
    let slot = HEADER_LEN + index * width;
    if width == HINTED_SLOT_LEN {
        put_u32(b, slot + SLOT_HINT, child_hint_of(child));
    }
    let off = u16_at(b, slot) as usize;
    put_u64(b, off, child);
    put_u64(b, off + 8, txn);
    put_u64(b, off + 16, sum);
}

/// Points overflow leaf cell `index` of a dirty page at blob `pgno`.
pub(crate) fn set_overflow(b: &mut [u8], index: usize, pgno: u64, txn: u64, sum: u64) {
    let off = u16_at(b, HEADER_LEN + index * SLOT_LEN) as usize;
    let klen = u16_at(b, off) as usize;
    let at = off + LEAF_CELL_HEADER + klen;
    put_u64(b, at, pgno);
    put_u64(b, at + 8, txn);
    put_u64(b, at + 16, sum);
}

/// Stamps a page (or the first page of a blob run) with its final number and
/// txn id, then its checksum, which it returns. The last step before a page
/// is written. A tree page's free gap is zeroed first (see [`copy_page`]).
pub(crate) fn seal(b: &mut [u8], pgno: u64, txn: u64) -> u64 {
    if let Some(gap) = free_gap(b) {
        b[gap].fill(0);
    }
    put_u64(b, 8, txn);
    put_u64(b, 24, pgno);
    let sum = checksum(&b[8..]);
    put_u64(b, 0, sum);
    sum
}

/// What the checksum field holds in an arena page (`storage::arena`): the
/// arena is this process's memory, never read from disk, so its pages are
/// stamped but not checksummed; a checkpoint copies them into file pages,
/// which are. Nonzero, so that a parent sealed before its child still
/// shows.
pub(crate) const ARENA_SUM: u64 = u64::MAX;

/// Stamps an arena page with its slot number and txn id, without a
/// checksum (see [`ARENA_SUM`]); returns what its parent records.
pub(crate) fn stamp_arena(b: &mut [u8], pgno: u64, txn: u64) -> u64 {
    debug_assert!(pgno & ARENA_BIT != 0);
    put_u64(b, 8, txn);
    put_u64(b, 24, pgno);
    put_u64(b, 0, ARENA_SUM);
    ARENA_SUM
}

/// The checksum stored in a page's header (not verified).
pub(crate) fn stored_sum(b: &[u8]) -> u64 {
    u64_at(b, 0)
}

/// Whether the stored checksum matches the bytes.
pub(crate) fn checksum_ok(b: &[u8]) -> bool {
    b.len() >= HEADER_LEN && u64_at(b, 0) == checksum(&b[8..])
}

/// A blob run in memory: header plus `data`, padded to whole pages (at
/// least `min_pages`).
pub(crate) fn new_blob(page_size: usize, data: &[u8], min_pages: usize) -> Box<[u8]> {
    let pages = (BLOB_HEADER_LEN + data.len())
        .div_ceil(page_size)
        .max(min_pages);
    let mut b = vec![0u8; pages * page_size].into_boxed_slice();
    fill_blob(&mut b, page_size, data);
    b
}

/// Makes `b` (whole pages of `page_size`, large enough) a blob run holding
/// `data`; every byte is rewritten.
pub(crate) fn fill_blob(b: &mut [u8], page_size: usize, data: &[u8]) {
    let end = BLOB_HEADER_LEN + data.len();
    b[..BLOB_HEADER_LEN].fill(0);
    write_blob_header(b, page_size, data.len());
    b[BLOB_HEADER_LEN..end].copy_from_slice(data);
    b[end..].fill(0);
}

/// Writes the header fields of a blob run (whole pages of `page_size`)
/// holding `len` bytes of data, leaving every other byte as it is (a
/// zeroed run becomes a blob of zeros without a pass over its data).
pub(crate) fn write_blob_header(b: &mut [u8], page_size: usize, len: usize) {
    b[16] = KIND_BLOB;
    put_u32(b, 20, (b.len() / page_size) as u32);
    put_u64(b, 32, len as u64);
}

/// Pages in the blob run whose first page is `first` (header not trusted).
pub(crate) fn blob_run_pages(first: &[u8]) -> u64 {
    u32_at(first, 20) as u64
}

/// The pages of the value blob run at `pgno` (of `page_size` pages)
/// whose first page (or more) is `first`, holding a value of `len` bytes: what its header says, if that
/// is what the value needs (a value's run is never longer). Else
/// `Corrupted`: a run length from a damaged header would free pages that
/// other values hold.
pub(crate) fn value_run_pages(first: &[u8], pgno: u64, len: u64, page_size: usize) -> Result<u64> {
    let pages = blob_run_pages(first);
    let needed = (BLOB_HEADER_LEN as u64)
        .saturating_add(len)
        .div_ceil(page_size as u64);
    if first.len() < BLOB_HEADER_LEN || page_kind(first) != KIND_BLOB || pages != needed {
        return Err(Error::corrupted_page(
            pgno,
            format!("blob run of {pages} pages for a value of {len} bytes"),
        ));
    }
    Ok(pages)
}

/// Validates a whole blob run and returns its data.
pub(crate) fn blob_data(
    run: &[u8],
    pgno: u64,
    expected_txn: Option<u64>,
    expected_len: Option<u64>,
) -> Result<&[u8]> {
    if run.len() < BLOB_HEADER_LEN || page_kind(run) != KIND_BLOB {
        return Err(Error::corrupted_page(pgno, "not a blob page"));
    }
    if let Some(t) = expected_txn {
        if page_txn(run) != t {
            return Err(Error::corrupted_page(
                pgno,
                "blob txn does not match its reference",
            ));
        }
    }
    let len = u64_at(run, 32);
    if let Some(e) = expected_len {
        if len != e {
            return Err(Error::corrupted_page(
                pgno,
                "blob length does not match its reference",
            ));
        }
    }
    run.get(BLOB_HEADER_LEN..)
        .and_then(|d| d.get(..usize::try_from(len).ok()?))
        .ok_or_else(|| Error::corrupted_page(pgno, "blob length exceeds its run"))
}

/// Verifies a committed tree page against its own checksum and the record
/// its parent (a branch cell, or the catalog for a root) keeps of it: the
/// checksum, the txn id, and the page's own number. The one check shared by
/// `check` and the verified cursors of bulk readers (dump, copy, compact),
/// so that damage is reported the same way wherever it is found.
pub(crate) fn verify_page(b: &[u8], pgno: u64, txn: u64, sum: u64) -> Result<()> {
    // An arena page has no checksum (see `ARENA_SUM`): its stamps are
    // checked all the same.
    let arena = pgno & ARENA_BIT != 0;
    if !arena && !checksum_ok(b) {
        return Err(Error::corrupted_page(pgno, "page checksum mismatch"));
    }
    if stored_sum(b) != sum && !arena {
        return Err(Error::corrupted_page(
            pgno,
            "page checksum differs from its parent's record (a stale page)",
        ));
    }
    if u64_at(b, 24) != pgno {
        return Err(Error::corrupted_page(
            pgno,
            "page records another page number",
        ));
    }
    if page_txn(b) != txn {
        return Err(Error::corrupted_page(
            pgno,
            "page txn does not match its parent's record",
        ));
    }
    Ok(())
}

/// Verifies a committed overflow blob run against its own checksum, the
/// checksum its leaf cell records, and its own page number. (Its txn id
/// and length are checked by `blob_data` whenever the value is read.)
pub(crate) fn verify_blob(run: &[u8], pgno: u64, sum: u64) -> Result<()> {
    let summed = pgno & ARENA_BIT != 0 || (checksum_ok(run) && stored_sum(run) == sum);
    if !summed || u64_at(run, 24) != pgno {
        return Err(Error::corrupted_page(
            pgno,
            "overflow blob checksum mismatch",
        ));
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A deterministic generator (xorshift), so a failure replays.
    pub(crate) struct Rng(pub(crate) u64);
    impl Rng {
        pub(crate) fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
    }

    /// A full page plus one cell, every cell up to the inline limit (half
    /// a page with its slot), splits into two halves that fit, wherever
    /// the large cells lie: among them, a cell of half a page right after
    /// almost half of the bytes, where the left half must stop before it.
    /// The split as it stood before session 51 (the left half takes the
    /// cell that reaches the middle) overflows there.
    #[test]
    fn a_split_point_leaves_two_halves_that_fit() {
        let limits = Limits::new(4096);
        let usable = limits.usable();
        let max = slotted_size(limits.max_inline_cell);
        assert_eq!(2 * max, usable, "two of the largest cells fill a page");
        let mut rng = Rng(0x5917_7e55);
        let mut overflowed_before = false;
        for round in 0..50_000 {
            // Cells of a full page (up to `usable`), then one more.
            let mut sizes = Vec::new();
            let mut used = 0;
            loop {
                let size = match rng.below(4) {
                    0 => max,
                    1 => slotted_size(LEAF_CELL_HEADER + 16 + rng.below(120) as usize),
                    _ => slotted_size(LEAF_CELL_HEADER + 1 + rng.below(2000) as usize),
                }
                .min(max);
                if used + size > usable {
                    break;
                }
                used += size;
                sizes.push(size);
            }
            let new = if round % 3 == 0 {
                max
            } else {
                slotted_size(LEAF_CELL_HEADER + rng.below(2019) as usize).min(max)
            };
            sizes.insert(rng.below(sizes.len() as u64 + 1) as usize, new);
            let total: usize = sizes.iter().sum();
            if total <= usable {
                continue;
            }
            let k = split_point(sizes.len(), |i| sizes[i], total, usable);
            let left: usize = sizes[..k].iter().sum();
            assert!(k >= 1 && k < sizes.len());
            assert!(left <= usable && total - left <= usable, "{sizes:?} at {k}");
            let mut acc = 0;
            let old_k = sizes
                .iter()
                .position(|s| {
                    acc += s;
                    acc >= total / 2
                })
                .map_or(sizes.len() - 1, |i| (i + 1).clamp(1, sizes.len() - 1));
            overflowed_before |= sizes[..old_k].iter().sum::<usize>() > usable;
        }
        assert!(overflowed_before, "the old rule's overflow was reached");
    }

    /// The common prefix, measured eight bytes at a time, is the one a
    /// byte-by-byte walk finds, capped at `MAX_PREFIX`, wherever the first
    /// difference lies (inside or past a word, past the cap, none).
    #[test]
    fn common_prefix_agrees_with_a_byte_walk() {
        let mut rng = Rng(0x5eed_c0de);
        for _ in 0..20_000 {
            let len = rng.below(300) as usize;
            let a: Vec<u8> = (0..len).map(|_| rng.below(2) as u8).collect();
            let mut b = a.clone();
            b.truncate(rng.below(len as u64 + 1) as usize);
            if !b.is_empty() && rng.below(2) == 0 {
                let i = rng.below(b.len() as u64) as usize;
                b[i] ^= 1 << rng.below(8);
            }
            let walk = a
                .iter()
                .zip(&b)
                .take_while(|(x, y)| x == y)
                .count()
                .min(MAX_PREFIX);
            assert_eq!(common_prefix(&a, &b), walk, "{a:?} {b:?}");
            assert_eq!(common_prefix(&b, &a), walk, "{b:?} {a:?}");
        }
    }

    /// Keys that share long prefixes, differ inside and past the 4 head
    /// bytes, and are prefixes of one another.
    fn random_key(rng: &mut Rng) -> Vec<u8> {
        let stem: &[u8] = match rng.below(4) {
            0 => b"user:0000",
            1 => b"user:00",
            2 => b"",
            _ => b"user:0000000000",
        };
        let mut k = stem.to_vec();
        for _ in 0..rng.below(7) {
            k.push(b"\x000019:\xff"[rng.below(6) as usize]);
        }
        k
    }

    /// Every search on a page answers as a linear scan of its keys does,
    /// and the slot array keeps its invariant, through random inserts,
    /// removals (which keep the prefix) and rebuilds (which lengthen it),
    /// on leaves and on branches (whose first key is empty and never
    /// compared, and gets a key shifted past it by an insert at 0).
    #[test]
    fn searches_by_key_heads_agree_with_a_scan() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for round in 0..300 {
            let is_leaf = round % 2 == 0;
            let mut page = vec![0u8; 1024];
            let mut keys: Vec<Vec<u8>> = Vec::new();
            let cell = |k: &[u8]| -> Vec<u8> {
                if is_leaf {
                    leaf_cell_inline(k, b"v")
                } else {
                    branch_cell(k, 7, 1, 2)
                }
            };
            if is_leaf {
                fill_page::<&[u8]>(&mut page, true, &[]);
            } else {
                fill_page(&mut page, false, &[cell(b"")]);
                keys.push(Vec::new());
            }
            let first = usize::from(!is_leaf);
            for _ in 0..200 {
                match rng.below(10) {
                    0..=5 => {
                        let k = random_key(&mut rng);
                        if !is_leaf && k.is_empty() {
                            continue;
                        }
                        match keys[first..].binary_search(&k) {
                            Ok(_) => {}
                            Err(i) => {
                                if insert_cell(&mut page, first + i, &cell(&k)) {
                                    keys.insert(first + i, k);
                                }
                            }
                        }
                    }
                    6..=7 if keys.len() > first => {
                        let i = first + rng.below((keys.len() - first) as u64) as usize;
                        remove_cell(&mut page, i);
                        keys.remove(i);
                    }
                    8 => {
                        let cells: Vec<Vec<u8>> = keys.iter().map(|k| cell(k)).collect();
                        fill_page(&mut page, is_leaf, &cells);
                    }
                    _ if !is_leaf && keys.len() > 2 => {
                        // The first child goes: the next one takes its place
                        // under the empty key, as a merge leaves it.
                        remove_cell(&mut page, 0);
                        remove_cell(&mut page, 0);
                        insert_cell(&mut page, 0, &cell(b""));
                        keys.remove(1);
                    }
                    _ => {}
                }
                assert_heads(&page);
                let node = Node::parse(&page, 1, None).unwrap();
                for _ in 0..8 {
                    let probe = random_key(&mut rng);
                    let below = keys[first..]
                        .iter()
                        .filter(|k| k.as_slice() < probe.as_slice())
                        .count();
                    if is_leaf {
                        let want = match keys.binary_search(&probe) {
                            Ok(i) => Ok(i),
                            Err(_) => Err(below),
                        };
                        assert_eq!(
                            node.search_leaf(&probe).unwrap(),
                            want,
                            "{probe:?} in {keys:?}"
                        );
                    } else {
                        let at_most = keys[first..]
                            .iter()
                            .filter(|k| k.as_slice() <= probe.as_slice())
                            .count();
                        assert_eq!(
                            node.search_branch(&probe).unwrap(),
                            at_most,
                            "{probe:?} in {keys:?}"
                        );
                    }
                }
            }
        }
    }

    /// `first_head_not_below` answers as a scan of the slot array does,
    /// on pages of one slot to about 140 (200 keys drawn from 243, the
    /// repeats dropped), heads in runs of equal ones, from slot 0 or 1,
    /// for heads below, among, equal to and above the page's: the
    /// halving, the whole window moved back to end at the count, and the
    /// short count of a small page.
    #[test]
    fn the_first_head_not_below_agrees_with_a_scan() {
        let mut rng = Rng(0x005e_ed0f_4ead);
        let mut page = vec![0u8; 4096];
        for count in 1..=200usize {
            // Keys of 5 bytes from a small alphabet: their heads repeat.
            let mut keys: Vec<Vec<u8>> = (0..count)
                .map(|_| (0..5).map(|_| b"0a~"[rng.below(3) as usize]).collect())
                .collect();
            keys.sort();
            keys.dedup();
            let cells: Vec<Vec<u8>> = keys.iter().map(|k| leaf_cell_inline(k, b"")).collect();
            fill_page(&mut page, true, &cells);
            let node = Node::parse(&page, 1, None).unwrap();
            let heads: Vec<u32> = (0..node.count as u32)
                .map(|i| node.head(i as usize))
                .collect();
            let mut probes = vec![0, u32::MAX];
            for &h in &heads {
                probes.extend([h.wrapping_sub(1), h, h.wrapping_add(1)]);
            }
            for first in [0, 1].into_iter().filter(|&f| f < node.count) {
                for &h in &probes {
                    let want = first + heads[first..].iter().filter(|&&x| x < h).count();
                    assert_eq!(
                        node.first_head_not_below(first, h),
                        want,
                        "{} slots from {first}, head {h:#x}",
                        node.count
                    );
                }
            }
        }
    }

    /// The append fast path leaves the page byte for byte as the general
    /// insert at the end does, refuses keys not above the last one without
    /// a change, and declines (changing nothing) where the general insert
    /// must shrink the prefix or compact.
    #[test]
    fn leaf_append_matches_the_general_insert() {
        let mut rng = Rng(0x0dd_ba11);
        let mut appended = 0;
        let mut declined = 0;
        for _ in 0..200 {
            let mut fast = vec![0u8; 1024];
            fill_page::<&[u8]>(&mut fast, true, &[]);
            let mut slow = fast.clone();
            let mut keys: Vec<Vec<u8>> = (0..rng.below(60)).map(|_| random_key(&mut rng)).collect();
            keys.sort();
            keys.dedup();
            for (n, k) in keys.iter().enumerate() {
                let value = vec![b'v'; rng.below(40) as usize];
                if n > 0 && rng.below(8) == 0 {
                    // A key not above the last: refused, the page unchanged.
                    let before = fast.clone();
                    let old = keys[rng.below(n as u64) as usize].clone();
                    assert_eq!(
                        append_leaf_inline(&mut fast, &old, &value),
                        LeafAppend::OutOfOrder
                    );
                    assert_eq!(fast, before);
                }
                let before = fast.clone();
                let count = cell_count(&slow);
                let fitted = insert_cell(&mut slow, count, &leaf_cell_inline(k, &value));
                match append_leaf_inline(&mut fast, k, &value) {
                    LeafAppend::Appended => {
                        appended += 1;
                        assert!(fitted);
                    }
                    LeafAppend::Declined => {
                        declined += 1;
                        assert_eq!(fast, before, "a declined append changed the page");
                        if fitted {
                            assert!(insert_cell(&mut fast, count, &leaf_cell_inline(k, &value)));
                        }
                    }
                    LeafAppend::OutOfOrder => panic!("sorted key {k:?} refused"),
                }
                assert_eq!(fast, slow, "pages differ after key {k:?}");
                if !fitted {
                    break;
                }
            }
            Node::parse(&fast, u64::MAX, None)
                .unwrap()
                .check_cells()
                .unwrap();
        }
        assert!(
            appended > 1000 && declined > 10,
            "{appended} appended, {declined} declined"
        );
    }

    /// A page built in one pass (`fill_page`, a split's halves) is the
    /// page that inserts of its cells in order build, byte for byte but
    /// for the free gap, which it leaves as the buffer held it (a recycled
    /// buffer's stale bytes) and the seal zeroes: leaves and branches,
    /// keys with long shared prefixes and none, pages full and nearly
    /// empty.
    #[test]
    fn a_page_built_in_one_pass_matches_one_built_by_inserts() {
        let mut rng = Rng(0x00f1_110f_ca5e);
        let mut full = 0;
        for round in 0..400 {
            let is_leaf = round % 2 == 0;
            let mut keys: Vec<Vec<u8>> = (0..1 + rng.below(90))
                .map(|_| random_key(&mut rng))
                .collect();
            keys.sort();
            keys.dedup();
            let mut cells: Vec<Vec<u8>> = Vec::new();
            let mut used = HEADER_LEN;
            for (i, k) in keys.iter().enumerate() {
                let cell = if is_leaf {
                    leaf_cell_inline(k, &vec![b'v'; rng.below(30) as usize])
                } else {
                    // A branch's first key is empty.
                    let key = if i == 0 { &[][..] } else { &k[..] };
                    branch_cell(key, 2 + i as u64, 7, 9)
                };
                // A branch this build makes has hinted slots.
                let width = if is_leaf { SLOT_LEN } else { HINTED_SLOT_LEN };
                if used + cell.len() + width > 1024 {
                    full += 1;
                    break;
                }
                used += cell.len() + width;
                cells.push(cell);
            }
            let mut by_inserts = vec![0u8; 1024];
            fill_page::<&[u8]>(&mut by_inserts, is_leaf, &[]);
            for (i, c) in cells.iter().enumerate() {
                assert!(insert_cell(&mut by_inserts, i, c));
            }
            let mut one_pass = vec![0xAAu8; 1024];
            fill_page(&mut one_pass, is_leaf, &cells);
            let gap = free_gap(&one_pass).expect("a tree page");
            assert_eq!(free_gap(&by_inserts), Some(gap.clone()));
            assert_eq!(
                one_pass[..gap.start],
                by_inserts[..gap.start],
                "round {round}"
            );
            assert_eq!(one_pass[gap.end..], by_inserts[gap.end..], "round {round}");
            assert!(
                one_pass[gap.clone()].iter().all(|&b| b == 0xAA),
                "gap written"
            );
            Node::parse(&one_pass, u64::MAX, None)
                .unwrap()
                .check_cells()
                .unwrap();
            seal(&mut one_pass, 5, 3);
            seal(&mut by_inserts, 5, 3);
            assert_eq!(one_pass, by_inserts, "round {round}: sealed pages differ");
        }
        assert!(full > 50, "only {full} full pages");
    }

    /// A page whose slot array does not match its keys (damage a checksum
    /// would catch on disk) is an error for `check_cells`, not a wrong
    /// answer taken on trust by the write path.
    #[test]
    fn a_stale_head_or_prefix_is_reported() {
        let cells: Vec<Vec<u8>> = [&b"user:0001"[..], b"user:0002", b"user:0003"]
            .iter()
            .map(|k| leaf_cell_inline(k, b"v"))
            .collect();
        let mut page = vec![0u8; 512];
        fill_page(&mut page, true, &cells);
        assert_eq!(page[17], 8, "the longest shared prefix");
        Node::parse(&page, 1, None).unwrap().check_cells().unwrap();
        let mut bad = page.clone();
        bad[HEADER_LEN + SLOT_LEN + SLOT_HEAD] ^= 1;
        assert!(Node::parse(&bad, 1, None).unwrap().check_cells().is_err());
        let mut bad = page.clone();
        bad[17] = 9;
        assert!(Node::parse(&bad, 1, None).unwrap().check_cells().is_err());
        // A value length that runs past the page: the same pass finds it.
        let mut bad = page.clone();
        let off = u16_at(&bad, HEADER_LEN + 2 * SLOT_LEN) as usize;
        bad[off + 3..off + 7].copy_from_slice(&4096u32.to_le_bytes());
        let err = Node::parse(&bad, 1, None)
            .unwrap()
            .check_cells()
            .unwrap_err();
        assert!(err.to_string().contains("past the page"), "{err}");
    }

    /// A branch's cells for children `children` under keys `k0000`,
    /// `k0002`, ... (the first key empty).
    fn branch_cells(children: &[u64]) -> Vec<Vec<u8>> {
        children
            .iter()
            .enumerate()
            .map(|(i, &child)| {
                let key = if i == 0 {
                    Vec::new()
                } else {
                    format!("k{:04}", 2 * i).into_bytes()
                };
                branch_cell(&key, child, 7 + i as u64, 100 + i as u64)
            })
            .collect()
    }

    /// Branch page `b` rewritten with plain slots, as formats 4-6 wrote
    /// it: the same cells where they lie, the slots 6 bytes again.
    fn to_plain(b: &[u8]) -> Vec<u8> {
        assert_eq!(b[16], KIND_HINTED_BRANCH);
        let mut plain = b.to_vec();
        let count = cell_count(b);
        for i in 0..count {
            let from = HEADER_LEN + i * HINTED_SLOT_LEN;
            let to = HEADER_LEN + i * SLOT_LEN;
            plain[to..to + SLOT_LEN].copy_from_slice(&b[from..from + SLOT_LEN]);
        }
        plain[HEADER_LEN + count * SLOT_LEN..upper_of(b)].fill(0);
        plain[16] = KIND_BRANCH;
        plain
    }

    /// A branch this build fills hints at each child in its slot (file and
    /// arena pages; none for a provisional number), and keeps the hints
    /// right through inserts, removals and new children; the same page of
    /// plain slots (an older file's) gives no hints and the same answers.
    #[test]
    fn branches_hint_their_children_and_plain_ones_read_alike() {
        let mut children: Vec<u64> = (0..40u64).map(|i| 1000 + 37 * i).collect();
        children[5] = ARENA_BIT | 12;
        children[9] = DIRTY_BIT | 3;
        children[11] = 1 << 40;
        let mut page = vec![0u8; 4096];
        fill_page(&mut page, false, &branch_cells(&children));
        assert_eq!(page[16], KIND_HINTED_BRANCH);
        let mut plain = to_plain(&page);
        let want_hint = |child: u64| match child {
            c if c & DIRTY_BIT != 0 || c == 1 << 40 => None,
            c => Some(c),
        };
        for round in 0..3 {
            for (b, hinted) in [(&page, true), (&plain, false)] {
                let node = Node::parse(b, u64::MAX, None).unwrap();
                node.check_cells().unwrap();
                for i in 0..node.count {
                    let (child, _) = node.child(i).unwrap();
                    let hint = node.child_hint(i);
                    assert_eq!(hint, if hinted { want_hint(child) } else { None });
                }
            }
            let (a, b) = (
                Node::parse(&page, u64::MAX, None).unwrap(),
                Node::parse(&plain, u64::MAX, None).unwrap(),
            );
            assert_eq!(a.count, b.count);
            for probe in 0..100u32 {
                let key = format!("k{probe:04}").into_bytes();
                let i = a.search_branch(&key).unwrap();
                assert_eq!(i, b.search_branch(&key).unwrap(), "{probe}");
                assert_eq!(a.child(i).unwrap(), b.child(i).unwrap());
            }
            // Edits, the same on both.
            match round {
                0 => {
                    let cell = branch_cell(b"k0003", ARENA_BIT | 99, 1, 2);
                    assert!(insert_cell(&mut page, 2, &cell));
                    assert!(insert_cell(&mut plain, 2, &cell));
                    set_child(&mut page, 9, 4242, 3, 4);
                    set_child(&mut plain, 9, 4242, 3, 4);
                }
                _ => {
                    remove_cell(&mut page, 4);
                    remove_cell(&mut plain, 4);
                    set_child(&mut page, 0, ARENA_BIT | 7, 3, 4);
                    set_child(&mut plain, 0, ARENA_BIT | 7, 3, 4);
                }
            }
        }
    }

    /// A damaged hint is damage to `check_cells`; a descent takes its
    /// child from the cell all the same.
    #[test]
    fn a_damaged_hint_is_reported_and_not_followed() {
        let children: Vec<u64> = (0..10u64).map(|i| 500 + i).collect();
        let mut page = vec![0u8; 4096];
        fill_page(&mut page, false, &branch_cells(&children));
        let mut bad = page.clone();
        bad[HEADER_LEN + 3 * HINTED_SLOT_LEN + SLOT_HINT] ^= 0x10;
        let node = Node::parse(&bad, 1, None).unwrap();
        let err = node.check_cells().unwrap_err();
        assert!(err.to_string().contains("child hint"), "{err}");
        assert_eq!(node.child_hint(3), Some(503 ^ 0x10));
        let i = node.search_branch(b"k0006").unwrap();
        assert_eq!(i, 3);
        assert_eq!(node.child(i).unwrap(), (503, 10));
    }

    /// Cells that fit a page only with plain slots (a full branch of an
    /// older file, spliced or merged as it was) make a plain branch.
    #[test]
    fn cells_that_fit_only_plain_slots_make_a_plain_branch() {
        let mut page = vec![0u8; 1024];
        let usable = page.len() - HEADER_LEN;
        let per = |slot: usize| usable / (BRANCH_CELL_HEADER + 5 + slot);
        let n = per(SLOT_LEN);
        assert!(per(HINTED_SLOT_LEN) < n);
        let children: Vec<u64> = (0..n as u64).map(|i| 64 + i).collect();
        let mut cells = branch_cells(&children);
        cells[0] = branch_cell(b"k0000", 64, 7, 100);
        fill_page(&mut page, false, &cells);
        assert_eq!(page[16], KIND_BRANCH);
        Node::parse(&page, 1, None).unwrap().check_cells().unwrap();
        fill_page(&mut page, false, &cells[..per(HINTED_SLOT_LEN)]);
        assert_eq!(page[16], KIND_HINTED_BRANCH);
    }

    /// A copy leaves the destination's free gap as it was (a recycled
    /// buffer's stale bytes) and reads the same; the seal zeroes the gap,
    /// so no stale byte reaches the file, and the checksum covers zeros.
    #[test]
    fn a_copy_skips_the_free_gap_and_the_seal_zeroes_it() {
        let cells: Vec<Vec<u8>> = (0..5u8)
            .map(|i| leaf_cell_inline(&[b'k', i], &[i; 20]))
            .collect();
        let mut page = vec![0u8; 1024];
        fill_page(&mut page, true, &cells);
        let gap = free_gap(&page).unwrap();
        assert!(gap.len() > 800, "a page mostly free: {gap:?}");
        let mut copy = vec![0xAAu8; 1024];
        copy_page(&mut copy, &page);
        assert!(
            copy[gap.clone()].iter().all(|&b| b == 0xAA),
            "gap not copied"
        );
        assert_eq!(copy[..gap.start], page[..gap.start]);
        assert_eq!(copy[gap.end..], page[gap.end..]);
        assert_eq!(cells_of(&copy), cells, "the copy reads as the page");
        seal(&mut copy, 7, 3);
        assert!(copy[gap].iter().all(|&b| b == 0), "the seal zeroes the gap");
        assert!(checksum_ok(&copy));
        // A blob run, or a page whose header names no gap, is copied whole.
        let blob = new_blob(1024, &[5u8; 100], 1);
        let mut copy = vec![0xAAu8; 1024];
        copy_page(&mut copy, &blob);
        assert_eq!(copy, *blob);
        let mut damaged = page.clone();
        put_u32(&mut damaged, 20, 4000);
        let mut copy = vec![0xAAu8; 1024];
        copy_page(&mut copy, &damaged);
        assert_eq!(copy, damaged);
    }

    #[test]
    fn compare_keys_is_byte_order() {
        let keys: [&[u8]; 9] = [
            b"",
            b"\x00",
            b"a",
            b"abcdefgh",
            b"abcdefgh\x00",
            b"abcdefgi",
            b"abcdefghijklmnopq",
            b"\xff\xff\xff\xff\xff\xff\xff\xff",
            b"b",
        ];
        for a in keys {
            for b in keys {
                assert_eq!(compare_keys(a, b), a.cmp(b), "{a:?} vs {b:?}");
            }
        }
    }

    /// Keys of every length to 25 that differ in one byte, at every
    /// position and either way, or are a prefix of one another: the
    /// overlapping last word of a length that is not a multiple of 8 finds
    /// the first difference.
    #[test]
    fn compare_keys_finds_the_first_difference_at_every_position() {
        for n in 0..=25usize {
            let base: Vec<u8> = (0..n as u8).map(|i| i.wrapping_mul(37)).collect();
            for d in 0..n {
                for delta in [1u8, 0x80, 0xff] {
                    let mut other = base.clone();
                    other[d] = other[d].wrapping_add(delta);
                    // A later difference the other way must not win.
                    if d + 1 < n {
                        other[n - 1] = other[n - 1].wrapping_sub(delta);
                    }
                    assert_eq!(compare_keys(&base, &other), base.cmp(&other), "{n} {d}");
                    assert_eq!(compare_keys(&other, &base), other.cmp(&base), "{n} {d}");
                }
            }
            for m in 0..=n {
                assert_eq!(
                    compare_keys(&base[..m], &base),
                    base[..m].cmp(&base),
                    "{m}/{n}"
                );
                assert_eq!(
                    compare_keys(&base, &base[..m]),
                    base.as_slice().cmp(&base[..m])
                );
            }
        }
    }
}
