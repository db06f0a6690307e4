//! Value overlays: a same-size overwrite or a delete of a key in a
//! committed leaf (a published arena page or a file page), or an insert of
//! a key the leaf lacks, recorded beside the leaf instead of in a copy of
//! it.
//!
//! A logged commit that overwrites the value of a key with one of the same
//! length, where the key's leaf is a committed page, would copy the
//! leaf and every branch above it (copy-on-write). Instead the new value
//! goes into the leaf's *overlay*: an overlay unit (an eighth, a quarter or
//! the whole of an arena slot: `storage::arena::OVERLAY_UNITS_PER_SLOT`) of entries
//! (txn, the
//! entry's index in the leaf, the value), appended in commit order. A
//! delete is an entry that says the index is deleted (a *tombstone*: no
//! value, its length field [`TOMBSTONE`]). A reader of snapshot `S` takes
//! the last entry for its index with txn <= `S`; the leaf itself, its
//! parents and the reader's page walk are unchanged (a cursor steps over
//! the indexes its snapshot sees deleted). An *insert* adds a key the
//! leaf's cells lack: its index field is [`INSERTED`], its bytes the key's
//! length (u16), the key and the value; a lookup that misses the cells
//! takes the insert of its key its snapshot sees, and a cursor walks the
//! merge of the cells and the inserts in key order. The next copy of the
//! leaf (a change of its keys, a full overlay, a merge, a checkpoint)
//! applies the overlay to the copy, values in place, tombstoned cells
//! removed and inserted keys added, so no page ever reaches the file with
//! one. An index's cell holds an
//! inline value (a tombstone never stands for a blob's reference) and
//! keeps at least one index of its leaf not deleted (the writer's rule,
//! `txn::overlaid`), so a fold never leaves a leaf empty.
//!
//! Which leaf has an overlay: the *overlay table* (`storage::arena`), one
//! word per arena slot, `overlay unit + 1` or 0; for a file leaf, the
//! table of its span of logged commits (`storage::arena::FileOverlays`),
//! one word per file page.
//!
//! An overlay page (the unit's bytes) starts with one cache line that
//! an append reads and writes whole, and a lookup reads first: bytes
//! 0..47 say, for each index below 47, which entry is its newest (entry
//! number + 1, 0 for none; a reader of such an index reads that entry,
//! and all of the list only if the entry is not its to read: newer than
//! its snapshot, or cut off and reused for another index); byte 47 is 1
//! once any entry is an insert (a lookup of a key the cells lack reads
//! the list only then); bytes 48..56
//! are the writer's word (the entry count, the count of tombstones among
//! them and the count of inserts: u8 each; the bytes the values take: u16;
//! the bytes the inserts take: u16; no reader reads them); bytes 56..64 a
//! filter of the indexes from 47 up that have entries (bit `index % 64`: a
//! reader of an index whose bit is clear reads nothing else) and of the
//! keys inserted (bit [`insert_bit`] of the key: a lookup of a key whose
//! bit is clear reads no insert, nor does the writer's look for one).
//! Entry headers of 16 bytes follow from byte 64 up
//! (txn: u64, index: u16, length: u16, value offset: u32), values packed
//! from the page's end down. After the last entry a header whose txn is
//! 0 ends the list. The newest-entry bytes and the filter are only ever
//! set, until the page is reused. One line for all the writer's words
//! and a reader's first look, not two: an append into an overlay not in
//! cache waits on one miss before it knows where its entry goes, and
//! writes two lines (that one and its header's), where a first line of
//! newest entries and a second of the writer's word made it three
//! (benchmarks.md, session 39).
//!
//! The protocol, which makes the reads sound while the writer appends:
//! - a header's txn word is only ever read and written atomically; a
//!   reader reads nothing else of an entry until it has read its txn and
//!   found it at or below its snapshot (and not 0);
//! - an entry whose txn is at or below the newest published commit is
//!   complete and never written again until the page is reused, which the
//!   oldest-reader rule orders after every reader that could see it: the
//!   overlay is retired with its leaf, born when the leaf was;
//! - every header txn word that is neither 0 nor at or below the newest
//!   published commit belongs to the write transaction in progress (or to
//!   one that was given up, whose entries were each cut off by a 0 written
//!   into their txn words): no reader reads that entry, nor a list past
//!   it;
//! - the writer writes an entry's value and header fields, then a 0 into
//!   the next header's txn, then the entry's txn (release), all before the
//!   commit that publishes that txn;
//! - the overlay table's word for a leaf slot is cleared when the slot is
//!   handed out again, before anything can publish the new page in it; a
//!   file leaf's table is its span's, which no snapshot of a later span
//!   holds, and no file page is freed within a span.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

use crate::error::{Error, Result};
use crate::storage::map::prefetch_line;

/// Values longer than this are not overlaid: an overlay holds a few dozen
/// small values, and a long value is better written into a copy.
pub(crate) const MAX_OVERLAY_VALUE: usize = 512;

/// Bytes before the first entry header: the cache line of the newest
/// entries, the writer's word and the filter.
const FIRST_HEADER: usize = 64;
/// Whether an overlay of `bytes` holds `n` entries whose values are
/// `value_len` bytes long (0 for tombstones): the first lines, their
/// headers and the zero header that ends the list, and their values
/// (`OverlayPage::append`'s rule).
pub(crate) fn entries_fit(bytes: usize, n: usize, value_len: usize) -> bool {
    n < MAX_ENTRIES && FIRST_HEADER + (n + 1) * ENTRY_HEADER + n * value_len <= bytes
}

/// Where the writer's word lies (entries, tombstones, inserts: u8 each;
/// one spare byte; bytes the values take, bytes the inserts take: u16
/// each), and the filter of indexes from [`NEWEST_INDEXES`] up and of the
/// keys inserted.
const WRITER_WORD_AT: usize = 48;
const FILTER_AT: usize = 56;
/// Indexes whose newest entry the first line names.
const NEWEST_INDEXES: usize = 47;
/// The first line's byte that says whether any entry is an insert (1
/// once one is appended, until the page is reused): a lookup of a key
/// its leaf lacks reads the list only then.
const HAS_INSERTS_AT: usize = 47;
/// The index field of an *insert*: an entry that adds a key its leaf
/// lacks, its bytes the key's length (u16), the key and the value. No
/// leaf has this many entries.
pub(crate) const INSERTED: u16 = u16::MAX - 1;
/// Bytes of an insert before its key: the key's length.
const INSERT_KEY_LEN: usize = 2;
/// Bytes of each entry header.
const ENTRY_HEADER: usize = 16;
/// The length field of a tombstone: the entry deletes its index.
pub(crate) const TOMBSTONE: u16 = u16::MAX;

/// What an overlay says of one index of its leaf, for some snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Overlaid<'a> {
    /// The entry's value is this one (of its cell's length).
    Value(&'a [u8]),
    /// The entry is deleted.
    Deleted,
}

/// Entries an overlay holds at most, whatever its room for values: the
/// entry numbers fit the first line's bytes, and a reader that must read
/// the list (an older snapshot, an index from 47 up) reads a few lines.
pub(crate) const MAX_ENTRIES: usize = 32;

/// Where the writer is in an overlay page: entries, the offset where the
/// values begin, and how many of the entries are tombstones. Saved before
/// a transaction's first append, so that giving the transaction up cuts
/// its entries off (`OverlayPage::cut`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Mark {
    pub(crate) entries: u32,
    pub(crate) values_at: u32,
    pub(crate) tombstones: u32,
    /// How many of the entries are inserts, and the bytes they take (each
    /// its key's length, its key and its value): what the leaf must find
    /// room for when a copy folds them in, without a scan of the list.
    pub(crate) inserts: u32,
    pub(crate) insert_bytes: u32,
}

/// The bit of the overlay's filter that an insert of `key` sets: a lookup
/// of a key whose bit is clear knows, with one load, that no insert holds
/// it. The bits of indexes (`index % 64`) and of keys share the word: a
/// bit set by either only makes the other's lookup read the list.
#[inline]
pub(crate) fn insert_bit(key: &[u8]) -> u64 {
    let mut h = key.len() as u64;
    let mut chunks = key.chunks_exact(8);
    for c in &mut chunks {
        let word = u64::from_le_bytes(c.try_into().expect("chunks of 8"));
        h = (h ^ word).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    let mut tail = [0u8; 8];
    tail[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    h = (h ^ u64::from_le_bytes(tail)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    1 << (h >> 58)
}

/// One overlay page in the arena: `ptr` to its `page_size` bytes (an
/// overlay unit's: an eighth, a quarter or the whole of an arena slot). Made by
/// the arena only, for a slot that holds an overlay (see the module doc
/// for who may call what).
pub(crate) struct OverlayPage<'a> {
    pub(crate) ptr: *mut u8,
    pub(crate) page_size: usize,
    /// The arena the page lies in, borrowed.
    pub(crate) arena: PhantomData<&'a [u8]>,
}

impl<'a> OverlayPage<'a> {
    fn txn_word(&self, entry: usize) -> Option<&AtomicU64> {
        let at = FIRST_HEADER + entry * ENTRY_HEADER;
        if at + ENTRY_HEADER > self.page_size {
            return None;
        }
        // SAFETY: in the page (checked), 8-aligned (the page is, and so are
        // `at`'s terms); header txn words are only accessed atomically.
        Some(unsafe { &*(self.ptr.add(at) as *const AtomicU64) })
    }

    /// Starts loading the page's first two lines (the newest entries, the
    /// writer's word and the filter; the first four entry headers)
    /// without waiting for them: an append reads the first and writes its
    /// header, a lookup reads the first and, if the index has an entry,
    /// its header.
    #[inline(always)]
    pub(crate) fn prefetch(&self) {
        prefetch_line(self.ptr);
        prefetch_line(self.ptr.wrapping_add(FIRST_HEADER));
    }

    /// Writer: starts loading the lines the next append writes (its
    /// entry's header, and the two lines below the values, where a value
    /// of up to 128 bytes goes), from the writer's word: for a caller
    /// whose first line is in cache already (a look ahead asked for it:
    /// `WriteTxn::look_ahead`), so that the append's stores do not wait.
    #[inline(always)]
    pub(crate) fn prefetch_append(&self) {
        let m = self.mark();
        let header = FIRST_HEADER + m.entries as usize * ENTRY_HEADER;
        let values_at = m.values_at as usize;
        for at in [
            header,
            values_at.saturating_sub(1),
            values_at.saturating_sub(65),
        ] {
            if at < self.page_size {
                prefetch_line(self.ptr.wrapping_add(at));
            }
        }
    }

    fn filter(&self) -> &AtomicU64 {
        // SAFETY: bytes 56..64 of the page (which is longer, and 8-aligned),
        // only ever accessed atomically.
        unsafe { &*(self.ptr.add(FILTER_AT) as *const AtomicU64) }
    }

    fn has_inserts_byte(&self) -> &AtomicU8 {
        // SAFETY: byte 47 of the page's first line, only ever accessed
        // atomically.
        unsafe { &*(self.ptr.add(HAS_INSERTS_AT) as *const AtomicU8) }
    }

    /// Whether any entry is an insert (of any txn: a reader that finds
    /// one still reads only those of its snapshot).
    #[inline]
    pub(crate) fn has_inserts(&self) -> bool {
        self.has_inserts_byte().load(Ordering::Acquire) != 0
    }

    /// The newest entry of index `index` (< `NEWEST_INDEXES`), plus one.
    fn newest(&self, index: usize) -> &AtomicU8 {
        assert!(index < NEWEST_INDEXES);
        // SAFETY: byte `index` of the page's first line, only ever
        // accessed atomically.
        unsafe { &*(self.ptr.add(index) as *const AtomicU8) }
    }

    /// Writer: an empty overlay.
    pub(crate) fn init(&self) {
        self.set_mark(Mark {
            entries: 0,
            values_at: self.page_size as u32,
            tombstones: 0,
            inserts: 0,
            insert_bytes: 0,
        });
        for index in 0..NEWEST_INDEXES {
            self.newest(index).store(0, Ordering::Relaxed);
        }
        self.has_inserts_byte().store(0, Ordering::Relaxed);
        self.filter().store(0, Ordering::Release);
        self.txn_word(0)
            .expect("a page holds a header")
            .store(0, Ordering::Release);
    }

    /// Writer: where it is (the writer's word).
    pub(crate) fn mark(&self) -> Mark {
        // SAFETY: bytes 48..56 of the page (which is longer); the writer's
        // word is read and written by the one writer only (module doc).
        let word = unsafe { std::ptr::read_unaligned(self.ptr.add(WRITER_WORD_AT) as *const u64) };
        let value_bytes = (word >> 32) as u16;
        Mark {
            entries: (word & 0xFF) as u32,
            tombstones: (word >> 8 & 0xFF) as u32,
            inserts: (word >> 16 & 0xFF) as u32,
            values_at: self.page_size as u32 - u32::from(value_bytes),
            insert_bytes: u32::from((word >> 48) as u16),
        }
    }

    fn set_mark(&self, m: Mark) {
        assert!(
            m.entries as usize <= MAX_ENTRIES && m.tombstones + m.inserts <= m.entries,
            "an overlay's counts within its bound"
        );
        // The appends that raise them check the room first.
        debug_assert!(
            m.values_at as usize <= self.page_size
                && m.insert_bytes as usize + m.values_at as usize <= self.page_size
        );
        // The values take less than the page, which is at most 64 KiB.
        let value_bytes = u64::from(self.page_size as u32 - m.values_at);
        let word = u64::from(m.entries)
            | u64::from(m.tombstones) << 8
            | u64::from(m.inserts) << 16
            | value_bytes << 32
            | u64::from(m.insert_bytes) << 48;
        // SAFETY: as for `mark`.
        unsafe { std::ptr::write_unaligned(self.ptr.add(WRITER_WORD_AT) as *mut u64, word) };
    }

    /// Writer: how many of the entries are inserts, and the bytes of their
    /// keys and values (all of them: the writer's bound).
    pub(crate) fn inserted_cells(&self) -> (usize, usize) {
        let m = self.mark();
        let inserts = m.inserts as usize;
        (inserts, m.insert_bytes as usize - inserts * INSERT_KEY_LEN)
    }

    /// Writer: how many of the entries are tombstones and how many are
    /// inserts, if every entry is visible at `bound` (the newest one's txn
    /// is at or below it): what the lists read at `bound` would count, from
    /// the writer's word and one header. Each tombstone deletes an index
    /// no other tombstone does (`txn::overlaid` declines a change of a
    /// deleted index), so it is the number of indexes deleted.
    pub(crate) fn counts_seen_at(&self, bound: u64) -> Option<(usize, usize)> {
        let m = self.mark();
        if m.entries > 0 {
            let newest = self
                .txn_word(m.entries as usize - 1)?
                .load(Ordering::Acquire);
            if newest == 0 || newest > bound {
                return None;
            }
        }
        Some((m.tombstones as usize, m.inserts as usize))
    }

    /// Writer: the txn of the newest entry, if any (a transaction whose own
    /// entry is newest has recorded this overlay in its undo list).
    pub(crate) fn newest_txn(&self) -> Option<u64> {
        let entries = self.mark().entries as usize;
        let word = self.txn_word(entries.checked_sub(1)?)?;
        Some(word.load(Ordering::Relaxed))
    }

    /// Writer: whether any entry is a tombstone (if none, no index is
    /// deleted, whatever the snapshot).
    pub(crate) fn has_tombstones(&self) -> bool {
        self.mark().tombstones > 0
    }

    /// Writer: appends entry `index` = `entry` (a value, or a tombstone),
    /// written by `txn`. False when the overlay has no room for it.
    pub(crate) fn append(&self, index: u16, entry: Overlaid<'_>, txn: u64) -> bool {
        let (value, len) = match entry {
            Overlaid::Value(v) => (v, v.len() as u16),
            Overlaid::Deleted => (&[][..], TOMBSTONE),
        };
        assert!(txn != 0 && value.len() <= MAX_OVERLAY_VALUE && index != INSERTED);
        let filter_bit = if usize::from(index) >= NEWEST_INDEXES {
            1 << (index % 64)
        } else {
            0
        };
        self.append_bytes(index, &[], value, len, txn, filter_bit)
    }

    /// Writer: appends an insert of `key` = `value` (a key its leaf lacks),
    /// written by `txn`. False when the overlay has no room for it.
    pub(crate) fn append_insert(&self, key: &[u8], value: &[u8], txn: u64) -> bool {
        assert!(txn != 0 && key.len() <= usize::from(u16::MAX));
        let len = INSERT_KEY_LEN + key.len() + value.len();
        let Ok(len) = u16::try_from(len) else {
            return false;
        };
        if len == TOMBSTONE {
            return false;
        }
        let key_len = (key.len() as u16).to_le_bytes();
        self.append_bytes(INSERTED, &[&key_len, key], value, len, txn, insert_bit(key))
    }

    /// Writer: appends an entry of index `index` whose bytes are `head`'s
    /// slices then `value` (`len` of them, or `TOMBSTONE` for none), and
    /// sets `filter_bit` (0 for none) in the filter.
    fn append_bytes(
        &self,
        index: u16,
        head: &[&[u8]],
        value: &[u8],
        len: u16,
        txn: u64,
        filter_bit: u64,
    ) -> bool {
        let bytes = if len == TOMBSTONE {
            0
        } else {
            usize::from(len)
        };
        assert_eq!(
            head.iter().map(|h| h.len()).sum::<usize>() + value.len(),
            bytes,
            "an entry's bytes are its length"
        );
        let m = self.mark();
        let entries = m.entries as usize;
        let headers_end = FIRST_HEADER + (entries + 2) * ENTRY_HEADER;
        let values_at = m.values_at as usize;
        if self.is_full_of_entries() || values_at < headers_end + bytes {
            return false;
        }
        let at = values_at - bytes;
        let header = FIRST_HEADER + entries * ENTRY_HEADER;
        // SAFETY: `at..values_at` and the header's fields lie in the page
        // (checked above) and belong to no entry a reader may read: they
        // are past the list's end (module doc).
        unsafe {
            let mut to = at;
            for part in head.iter().chain([&value]) {
                std::ptr::copy_nonoverlapping(part.as_ptr(), self.ptr.add(to), part.len());
                to += part.len();
            }
            let fields = self.ptr.add(header + 8);
            std::ptr::write_unaligned(fields as *mut u16, index);
            std::ptr::write_unaligned(fields.add(2) as *mut u16, len);
            std::ptr::write_unaligned(fields.add(4) as *mut u32, at as u32);
        }
        self.txn_word(entries + 1)
            .expect("room checked")
            .store(0, Ordering::Relaxed);
        // One writer: a load and a store, no read-modify-write, and none
        // when the bit is set (readers' copies of the line stay valid).
        let inserted = index == INSERTED;
        let at_or_past = usize::from(index) >= NEWEST_INDEXES && !inserted;
        let filter = self.filter();
        let bits = filter.load(Ordering::Relaxed);
        if bits & filter_bit != filter_bit {
            filter.store(bits | filter_bit, Ordering::Release);
        }
        if inserted && !self.has_inserts() {
            self.has_inserts_byte().store(1, Ordering::Release);
        }
        self.txn_word(entries)
            .expect("room checked")
            .store(txn, Ordering::Release);
        if !at_or_past && !inserted {
            self.newest(usize::from(index))
                .store(entries as u8 + 1, Ordering::Release);
        }
        self.set_mark(Mark {
            entries: entries as u32 + 1,
            values_at: at as u32,
            tombstones: m.tombstones + u32::from(len == TOMBSTONE),
            inserts: m.inserts + u32::from(inserted),
            insert_bytes: m.insert_bytes + if inserted { bytes as u32 } else { 0 },
        });
        true
    }

    /// Writer: whether it holds as many entries as an overlay may, however
    /// large (`append` refuses more).
    pub(crate) fn is_full_of_entries(&self) -> bool {
        self.mark().entries as usize + 1 >= MAX_ENTRIES
    }

    /// Writer: copies every entry of `self` (all of them, the writer's
    /// bound) into the empty overlay `to`, at least as large, with its entry
    /// number and txn, and returns `to`'s mark before the first entry of
    /// txn `txn` (the transaction under way: what giving it up cuts `to`
    /// back to), or `None` if an entry is damaged or `to` is smaller. One
    /// copy of the values and of the first line, and a pass over the
    /// headers that moves each value's offset by the size difference: the
    /// values stay packed against the page's end, in order, so the entries
    /// read as they did. No reader reaches `to` until the table names it.
    pub(crate) fn copy_entries_to(&self, to: &OverlayPage<'_>, txn: u64) -> Option<Mark> {
        let m = self.mark();
        let entries = m.entries as usize;
        let value_bytes = self.page_size - m.values_at as usize;
        let headers_end = FIRST_HEADER + (entries + 1) * ENTRY_HEADER;
        if to.page_size < self.page_size
            || to.mark().entries != 0
            || headers_end + value_bytes > to.page_size
        {
            return None;
        }
        let shift = to.page_size - self.page_size;
        let mut before_txn = None;
        let mut counts = Mark {
            values_at: to.page_size as u32,
            ..Mark::default()
        };
        for entry in 0..entries {
            let entry_txn = self.txn_word(entry)?.load(Ordering::Acquire);
            let header = FIRST_HEADER + entry * ENTRY_HEADER;
            // SAFETY: the header lies in both pages (`headers_end` checked
            // for `to`; `self` holds `entries` headers); `self`'s entries
            // are the writer's to read, `to`'s past its (empty) list are
            // the writer's to write.
            let (index, len, at) = unsafe {
                let fields = self.ptr.add(header + 8);
                (
                    std::ptr::read_unaligned(fields as *const u16),
                    std::ptr::read_unaligned(fields.add(2) as *const u16),
                    std::ptr::read_unaligned(fields.add(4) as *const u32) as usize,
                )
            };
            let bytes = if len == TOMBSTONE {
                0
            } else {
                usize::from(len)
            };
            if entry_txn == 0 || at < m.values_at as usize || at + bytes > self.page_size {
                return None;
            }
            if entry_txn == txn && before_txn.is_none() {
                before_txn = Some(counts);
            }
            // SAFETY: as above.
            unsafe {
                let fields = to.ptr.add(header + 8);
                std::ptr::write_unaligned(fields as *mut u16, index);
                std::ptr::write_unaligned(fields.add(2) as *mut u16, len);
                std::ptr::write_unaligned(fields.add(4) as *mut u32, (at + shift) as u32);
            }
            to.txn_word(entry)?.store(entry_txn, Ordering::Relaxed);
            let inserted = index == INSERTED;
            counts = Mark {
                entries: counts.entries + 1,
                values_at: (at + shift) as u32,
                tombstones: counts.tombstones + u32::from(len == TOMBSTONE),
                inserts: counts.inserts + u32::from(inserted),
                insert_bytes: counts.insert_bytes + if inserted { bytes as u32 } else { 0 },
            };
        }
        if counts.tombstones != m.tombstones
            || counts.inserts != m.inserts
            || counts.insert_bytes != m.insert_bytes
            || counts.values_at as usize != to.page_size - value_bytes
        {
            return None;
        }
        // SAFETY: the values lie at the end of both pages (checked), and
        // the first line's bytes before the writer's word (the newest
        // entries and the insert byte) in both; `to` is not yet visible.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.ptr.add(m.values_at as usize),
                to.ptr.add(counts.values_at as usize),
                value_bytes,
            );
            std::ptr::copy_nonoverlapping(self.ptr, to.ptr, WRITER_WORD_AT);
        }
        to.txn_word(entries)?.store(0, Ordering::Relaxed);
        to.filter()
            .store(self.filter().load(Ordering::Relaxed), Ordering::Release);
        to.set_mark(counts);
        Some(before_txn.unwrap_or(counts))
    }

    /// Writer: cuts the entries off back to `m` (a transaction given up).
    /// Every entry cut gets a zero txn word, not only the first: a reader
    /// that goes straight to an index's newest entry (the first line may
    /// still name a cut one) finds it unreadable and reads the list.
    pub(crate) fn cut(&self, m: Mark) {
        let now = self.mark();
        assert!(
            m.entries <= now.entries,
            "a mark from before the entries cut"
        );
        for entry in (m.entries..now.entries).rev() {
            self.txn_word(entry as usize)
                .expect("entries lie within the page")
                .store(0, Ordering::Release);
        }
        self.set_mark(m);
    }

    /// The entries visible at `bound` (txn <= bound), oldest first, as
    /// (index, what it says). A reader's bound is its snapshot's txn; the
    /// writer's is `u64::MAX` (its own entries too). An entry whose fields
    /// do not fit the page is damage: `Err`.
    pub(crate) fn visit(
        &self,
        bound: u64,
        mut f: impl FnMut(u16, Overlaid<'a>) -> Result<()>,
    ) -> Result<()> {
        for entry in 0..MAX_ENTRIES {
            match self.entry(entry, bound)? {
                Some((index, value)) => f(index, value)?,
                None => break,
            }
        }
        Ok(())
    }

    /// Entry `entry` if it is visible at `bound` (its txn not 0 and at or
    /// below it): its index and what it says.
    fn entry(&self, entry: usize, bound: u64) -> Result<Option<(u16, Overlaid<'a>)>> {
        let Some(word) = self.txn_word(entry) else {
            return Ok(None);
        };
        let txn = word.load(Ordering::Acquire);
        if txn == 0 || txn > bound {
            return Ok(None);
        }
        let header = FIRST_HEADER + entry * ENTRY_HEADER;
        // SAFETY: the entry is complete and not written again while
        // visible (module doc); the fields lie in the page (the header
        // does, `txn_word` checked).
        let (index, len, at) = unsafe {
            let fields = self.ptr.add(header + 8);
            (
                std::ptr::read_unaligned(fields as *const u16),
                std::ptr::read_unaligned(fields.add(2) as *const u16) as usize,
                std::ptr::read_unaligned(fields.add(4) as *const u32) as usize,
            )
        };
        if len == usize::from(TOMBSTONE) {
            return Ok(Some((index, Overlaid::Deleted)));
        }
        if at < header + ENTRY_HEADER || at + len > self.page_size {
            return Err(Error::Corrupted {
                page: None,
                detail: format!("overlay entry {entry} lies outside its page"),
            });
        }
        // SAFETY: in the page (checked); immutable while visible.
        let value = unsafe { std::slice::from_raw_parts(self.ptr.add(at), len) };
        Ok(Some((index, Overlaid::Value(value))))
    }

    /// What the newest entry of index `index` visible at `bound` says, if
    /// there is one.
    #[inline]
    pub(crate) fn value(&self, index: usize, bound: u64) -> Result<Option<Overlaid<'a>>> {
        if index < NEWEST_INDEXES {
            let newest = usize::from(self.newest(index).load(Ordering::Acquire));
            if newest == 0 {
                return Ok(None);
            }
            if let Some(found) = self.entry(newest - 1, bound)? {
                if usize::from(found.0) == index {
                    return Ok(Some(found.1));
                }
            }
            // Newer than the snapshot, or cut off and reused: the list.
        } else if self.filter().load(Ordering::Acquire) & 1 << (index % 64) == 0 {
            return Ok(None);
        }
        let mut found = None;
        self.visit(bound, |i, v| {
            if usize::from(i) == index {
                found = Some(v);
            }
            Ok(())
        })?;
        Ok(found)
    }

    /// The newest entry of each index visible at `bound`, in `out`
    /// (index, what it says), in no particular order; returns how many.
    /// An overlay holds fewer than [`MAX_ENTRIES`] entries, so `out` has
    /// room for every index.
    pub(crate) fn newest_entries(
        &self,
        bound: u64,
        out: &mut [(u16, Overlaid<'a>); MAX_ENTRIES],
    ) -> Result<usize> {
        let mut n = 0;
        self.visit(bound, |index, what| {
            if index == INSERTED {
                return Ok(());
            }
            match out[..n].iter_mut().find(|e| e.0 == index) {
                Some(e) => e.1 = what,
                None => {
                    out[n] = (index, what);
                    n += 1;
                }
            }
            Ok(())
        })?;
        Ok(n)
    }

    /// The inserts visible at `bound`, in `out`, in the order appended;
    /// returns how many. An insert whose bytes do not hold its key is
    /// damage: `Err`.
    pub(crate) fn inserts(&self, bound: u64, out: &mut [Insert<'a>; MAX_ENTRIES]) -> Result<usize> {
        if !self.has_inserts() {
            return Ok(0);
        }
        let mut n = 0;
        for entry in 0..MAX_ENTRIES {
            match self.entry(entry, bound)? {
                Some((INSERTED, Overlaid::Value(bytes))) => {
                    let (key, value) = split_insert(bytes)?;
                    out[n] = Insert {
                        entry: entry as u8,
                        key,
                        value,
                    };
                    n += 1;
                }
                Some(_) => {}
                None => break,
            }
        }
        Ok(n)
    }

    /// Insert `entry`, one [`OverlayPage::inserts`] gave a reader (visible
    /// to it, so complete and unchanged since): its key and value.
    pub(crate) fn insert_at(&self, entry: u8) -> Result<(&'a [u8], &'a [u8])> {
        match self.entry(usize::from(entry), u64::MAX)? {
            Some((INSERTED, Overlaid::Value(bytes))) => split_insert(bytes),
            _ => Err(Error::Corrupted {
                page: None,
                detail: format!("overlay entry {entry} is not an insert"),
            }),
        }
    }

    /// Whether an insert of `key` may be in the list: false when no entry
    /// is an insert, or the filter's bit for the key is clear. The bit is
    /// set before any entry of the key is published: one that a snapshot
    /// sees was published before the snapshot was taken, and so was the
    /// bit.
    #[inline]
    fn may_have_inserted(&self, key: &[u8]) -> bool {
        self.has_inserts() && self.filter().load(Ordering::Acquire) & insert_bit(key) != 0
    }

    /// The value of the insert of `key` visible at `bound`, if any.
    pub(crate) fn inserted_value(&self, key: &[u8], bound: u64) -> Result<Option<&'a [u8]>> {
        if !self.may_have_inserted(key) {
            return Ok(None);
        }
        let mut found = None;
        self.visit(bound, |index, what| {
            if let (INSERTED, Overlaid::Value(bytes)) = (index, what) {
                let (k, v) = split_insert(bytes)?;
                if k == key {
                    found = Some(v);
                }
            }
            Ok(())
        })?;
        Ok(found)
    }

    /// How many indexes in `from..to` are deleted as seen at `bound`.
    pub(crate) fn deleted_between(&self, bound: u64, from: usize, to: usize) -> Result<usize> {
        let mut newest = [(0u16, Overlaid::Deleted); MAX_ENTRIES];
        let n = self.newest_entries(bound, &mut newest)?;
        Ok(newest[..n]
            .iter()
            .filter(|e| e.1 == Overlaid::Deleted && (from..to).contains(&usize::from(e.0)))
            .count())
    }
}

/// An insert a reader sees: its entry number in the overlay, its key and
/// its value.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Insert<'a> {
    pub(crate) entry: u8,
    pub(crate) key: &'a [u8],
    pub(crate) value: &'a [u8],
}

/// An insert's bytes as (key, value).
fn split_insert(bytes: &[u8]) -> Result<(&[u8], &[u8])> {
    let damaged = || Error::Corrupted {
        page: None,
        detail: "an overlay's insert does not hold its key".into(),
    };
    let (len, rest) = bytes
        .split_first_chunk::<INSERT_KEY_LEN>()
        .ok_or_else(damaged)?;
    let key_len = usize::from(u16::from_le_bytes(*len));
    if key_len > rest.len() {
        return Err(damaged());
    }
    Ok(rest.split_at(key_len))
}

#[cfg(test)]
mod tests {
    use super::Overlaid::{Deleted, Value};
    use super::{entries_fit, OverlayPage};
    use crate::storage::arena::{Arena, ArenaSpace, FileOverlays, ARENA_BIT, WHOLE_SLOT_UNIT};

    #[test]
    fn readers_see_the_entries_of_their_snapshot_and_cut_entries_never() {
        let arena = Arena::new(4096, 64 * 4096).unwrap();
        let mut space = ArenaSpace::default();
        let leaf = space.alloc(&arena, 1, u64::MAX, 3, false).unwrap().pgno();
        assert!(arena.overlay(leaf).is_none());
        let fresh = space.alloc_overlay(&arena, leaf, 100, 0, u64::MAX).unwrap();
        let page = arena.attach_overlay(leaf, fresh);
        assert!(page.append(5, Value(b"at 4"), 4));
        assert!(page.append(6, Value(b"six"), 4));
        let before_5 = page.mark();
        assert!(page.append(5, Value(b"at 5"), 5));
        let page = arena.overlay(leaf).unwrap();
        assert_eq!(page.value(5, 3).unwrap(), None, "older than every entry");
        assert_eq!(page.value(5, 4).unwrap(), Some(Value(b"at 4")));
        assert_eq!(page.value(5, 5).unwrap(), Some(Value(b"at 5")));
        assert_eq!(page.value(5, u64::MAX).unwrap(), Some(Value(b"at 5")));
        assert_eq!(page.value(6, 9).unwrap(), Some(Value(b"six")));
        assert_eq!(page.value(7, 9).unwrap(), None);
        // Txn 5 given up: its entry is cut off, and a later txn 5 that
        // appends nothing leaves nothing of it visible.
        page.cut(before_5);
        assert_eq!(page.value(5, u64::MAX).unwrap(), Some(Value(b"at 4")));
        assert!(page.append(6, Value(b"new"), 5));
        assert_eq!(page.value(6, 5).unwrap(), Some(Value(b"new")));
        assert_eq!(page.value(5, 5).unwrap(), Some(Value(b"at 4")));
        // The table forgets the overlay when the leaf's slot is handed out
        // again.
        space.retire(leaf, 1, 9);
        space.retire_overlay(arena.overlay_unit(leaf).unwrap(), 9);
        assert_eq!(space.live_pages(), 0);
        space.release(&[]);
        let again = space.alloc(&arena, 1, u64::MAX, 10, false).unwrap().pgno();
        let other = space.alloc(&arena, 1, u64::MAX, 10, false).unwrap().pgno();
        assert!(arena.overlay(again).is_none() && arena.overlay(other).is_none());
        assert_eq!(leaf & ARENA_BIT, ARENA_BIT);
    }

    #[test]
    fn file_leaf_overlays_share_a_slot_which_retires_with_the_last() {
        use crate::storage::arena::OVERLAY_UNITS_PER_SLOT as UNITS;
        let arena = Arena::new(4096, 64 * 4096).unwrap();
        let files = FileOverlays::new(64, 0).unwrap();
        let mut space = ArenaSpace::default();
        let units: Vec<u64> = (0..UNITS)
            .map(|i| {
                space
                    .alloc_overlay(&arena, 10 + i, 100, 0, u64::MAX)
                    .unwrap()
            })
            .collect();
        assert!(
            units.iter().all(|u| u / UNITS == units[0] / UNITS),
            "one slot, {UNITS} eighths: {units:?}"
        );
        let pages: Vec<OverlayPage<'_>> = (0..UNITS)
            .map(|i| arena.attach_file_overlay(&files, 10 + i, 1, units[i as usize]))
            .collect();
        // Each unit is its own overlay: filled to its end, none spills
        // into the next.
        let value = [7u8; 100];
        let mut appended = 0;
        while pages[0].append(appended as u16 % 60, Value(&value), 6) {
            appended += 1;
        }
        assert_eq!(appended, 3, "an eighth holds 3 values of 100 bytes");
        assert!(entries_fit(512, 3, 100) && !entries_fit(512, 4, 100));
        let mut tombstones = 0;
        while pages[2].append(tombstones as u16, Deleted, 6) {
            tombstones += 1;
        }
        assert_eq!(tombstones, 27, "and 27 tombstones");
        assert!(entries_fit(512, 27, 0) && !entries_fit(512, 28, 0));
        assert!(pages[1].append(1, Value(b"b's"), 6));
        assert_eq!(pages[1].value(1, 6).unwrap(), Some(Value(b"b's")));
        assert_eq!(pages[0].value(0, 6).unwrap(), Some(Value(&value[..])));
        assert_eq!(pages[2].value(3, 6).unwrap(), Some(Deleted));
        assert_eq!(files.unit_of(11), Some(units[1]));
        // Units retired at 7, 8, 7, ... keep the slot; the last at 9
        // retires it, as born at 0 and retired at 9.
        let txns = [7, 8, 7, 7, 8, 7, 8, 9];
        for (unit, txn) in units.iter().zip(txns) {
            assert_eq!(space.retired_pages(), 0);
            space.retire_overlay(*unit, txn);
        }
        assert_eq!(space.retired_pages(), 1);
        assert_eq!(
            space.pinned_by(&[8]),
            1,
            "a reader before the last retirement"
        );
        assert_eq!(space.pinned_by(&[9]), 0);
        // The next file leaf's overlay takes a new slot; an arena leaf's
        // takes a whole one.
        let c = space.alloc_overlay(&arena, 20, 100, 0, u64::MAX).unwrap();
        assert_ne!(c / UNITS, units[0] / UNITS);
        let leaf = space.alloc(&arena, 1, u64::MAX, 3, false).unwrap().pgno();
        let whole = space.alloc_overlay(&arena, leaf, 100, 0, u64::MAX).unwrap();
        assert_ne!(whole & WHOLE_SLOT_UNIT, 0);
        assert_eq!(arena.attach_overlay(leaf, whole).page_size, 4096);
        assert!(
            arena.overlay_in(whole | 1).is_none(),
            "a whole slot starts at its slot"
        );
        space.retire_overlay(whole, 5);
        assert_eq!(space.retired_pages(), 2);
    }

    /// Overlay units come in three sizes, each slot's units of one size:
    /// an eighth for a file leaf's first change (a quarter when an eighth
    /// would not hold two such values: at 1 KiB pages, one longer than 8
    /// bytes), then a quarter and a whole slot as the overlay fills
    /// (`alloc_larger_overlay`). A unit number names its size, and a unit
    /// not aligned to its size, or with both tags, is none.
    #[test]
    fn overlay_units_grow_from_eighths_to_quarters_to_whole_slots() {
        use crate::storage::arena::{UnitSize, OVERLAY_UNITS_PER_SLOT as UNITS, QUARTER_UNIT};
        assert_eq!(UnitSize::first_for_file_leaf(4096, 100), UnitSize::Eighth);
        assert_eq!(UnitSize::first_for_file_leaf(4096, 0), UnitSize::Eighth);
        assert_eq!(UnitSize::first_for_file_leaf(4096, 200), UnitSize::Eighth);
        assert_eq!(UnitSize::first_for_file_leaf(4096, 201), UnitSize::Quarter);
        assert_eq!(UnitSize::first_for_file_leaf(1024, 0), UnitSize::Eighth);
        assert_eq!(UnitSize::first_for_file_leaf(1024, 8), UnitSize::Eighth);
        assert_eq!(UnitSize::first_for_file_leaf(1024, 9), UnitSize::Quarter);
        let arena = Arena::new(4096, 64 * 4096).unwrap();
        let mut space = ArenaSpace::default();
        let eighth = space.alloc_overlay(&arena, 10, 100, 0, u64::MAX).unwrap();
        let big = space.alloc_overlay(&arena, 11, 300, 0, u64::MAX).unwrap();
        assert_eq!(UnitSize::of(eighth), Some(UnitSize::Eighth));
        assert_eq!(UnitSize::of(big), Some(UnitSize::Quarter));
        assert_ne!(
            (big & !QUARTER_UNIT) / UNITS,
            eighth / UNITS,
            "quarters and eighths in slots of their own"
        );
        let quarter = space
            .alloc_larger_overlay(&arena, eighth, 0, u64::MAX)
            .unwrap();
        assert_eq!(UnitSize::of(quarter), Some(UnitSize::Quarter));
        assert_eq!(
            (quarter & !QUARTER_UNIT) / UNITS,
            (big & !QUARTER_UNIT) / UNITS,
            "the open quarter slot's next unit"
        );
        assert_eq!(quarter, big + 2, "quarters start at even eighths");
        let whole = space
            .alloc_larger_overlay(&arena, quarter, 0, u64::MAX)
            .unwrap();
        assert_eq!(UnitSize::of(whole), Some(UnitSize::Whole));
        assert_eq!(space.alloc_larger_overlay(&arena, whole, 0, u64::MAX), None);
        let sizes: Vec<usize> = [eighth, quarter, whole]
            .iter()
            .map(|&u| arena.overlay_in(u).unwrap().page_size)
            .collect();
        assert_eq!(sizes, [512, 1024, 4096]);
        assert!(
            arena.overlay_in(quarter + 1).is_none(),
            "a quarter at an odd eighth"
        );
        assert!(arena
            .overlay_in(eighth | QUARTER_UNIT | WHOLE_SLOT_UNIT)
            .is_none());
        // A value that fills an eighth's room alone still fits a quarter.
        let page = arena.overlay_in(big).unwrap();
        page.init();
        assert!(page.append(0, Value(&[1u8; 300]), 2));
    }

    #[test]
    fn a_slot_whose_units_retire_before_all_are_handed_out_waits_for_the_rest() {
        use crate::storage::arena::OVERLAY_UNITS_PER_SLOT as UNITS;
        let arena = Arena::new(4096, 64 * 4096).unwrap();
        let mut space = ArenaSpace::default();
        let first = space.alloc_overlay(&arena, 10, 100, 0, u64::MAX).unwrap();
        space.retire_overlay(first, 4);
        assert_eq!(space.retired_pages(), 0, "more units to hand out");
        let rest: Vec<u64> = (1..UNITS)
            .map(|i| {
                space
                    .alloc_overlay(&arena, 10 + i, 100, 0, u64::MAX)
                    .unwrap()
            })
            .collect();
        assert!(rest.iter().all(|u| u / UNITS == first / UNITS));
        for unit in &rest {
            space.retire_overlay(*unit, 6);
        }
        assert_eq!(space.retired_pages(), 1);
        assert_eq!(space.pinned_by(&[5]), 1);
        assert_eq!(space.pinned_by(&[6]), 0);
    }

    #[test]
    fn a_cut_entry_named_newest_is_never_read() {
        let arena = Arena::new(4096, 64 * 4096).unwrap();
        let mut space = ArenaSpace::default();
        let leaf = space.alloc(&arena, 1, u64::MAX, 1, false).unwrap().pgno();
        let fresh = space.alloc_overlay(&arena, leaf, 100, 0, u64::MAX).unwrap();
        let page = arena.attach_overlay(leaf, fresh);
        assert!(page.append(1, Value(b"kept"), 2));
        let before = page.mark();
        // Txn 3 overwrites index 1 twice and index 5, then is given up.
        assert!(page.append(1, Value(b"gone"), 3));
        assert!(page.append(5, Value(b"gone"), 3));
        assert!(page.append(1, Value(b"gone"), 3));
        page.cut(before);
        // Txn 3 again (the id is reused), overwriting index 7 only, commits:
        // the first line still names cut entries for indexes 1 and 5.
        assert!(page.append(7, Value(b"new"), 3));
        assert_eq!(page.value(1, 3).unwrap(), Some(Value(b"kept")));
        assert_eq!(page.value(5, 3).unwrap(), None);
        assert_eq!(page.value(7, 3).unwrap(), Some(Value(b"new")));
        assert_eq!(page.value(1, u64::MAX).unwrap(), Some(Value(b"kept")));
    }

    #[test]
    fn indexes_past_the_first_line_are_found_by_the_list() {
        let arena = Arena::new(4096, 64 * 4096).unwrap();
        let mut space = ArenaSpace::default();
        let leaf = space.alloc(&arena, 1, u64::MAX, 1, false).unwrap().pgno();
        let fresh = space.alloc_overlay(&arena, leaf, 100, 0, u64::MAX).unwrap();
        let page = arena.attach_overlay(leaf, fresh);
        assert!(page.append(200, Value(b"a"), 2));
        assert!(page.append(70, Value(b"b"), 2));
        assert!(page.append(200, Value(b"c"), 3));
        assert_eq!(page.value(200, 2).unwrap(), Some(Value(b"a")));
        assert_eq!(page.value(200, 3).unwrap(), Some(Value(b"c")));
        assert_eq!(page.value(70, 3).unwrap(), Some(Value(b"b")));
        assert_eq!(page.value(71, 3).unwrap(), None);
        assert_eq!(
            page.value(6, 3).unwrap(),
            None,
            "6 is 70 % 64, but below 47: the first line names its newest entry"
        );
        // The first line names indexes below 47; 47 up go by the filter
        // (bit `index % 64`, which 50 and 114 share) and the list.
        assert!(page.append(47, Value(b"d"), 4));
        assert!(page.append(50, Value(b"e"), 4));
        assert_eq!(page.value(47, 4).unwrap(), Some(Value(b"d")));
        assert_eq!(page.value(46, 4).unwrap(), None);
        assert_eq!(page.value(50, 4).unwrap(), Some(Value(b"e")));
        assert_eq!(page.value(50, 3).unwrap(), None, "older than its entry");
        assert_eq!(
            page.value(114, 4).unwrap(),
            None,
            "its filter bit, not its entry"
        );
        assert_eq!(page.value(48, 4).unwrap(), None);
    }

    /// Inserts: each snapshot sees those of its txns, a lookup by key
    /// finds them, they never answer for an index (nor set its filter bit
    /// or first-line byte), a cut takes them off, and a move to a larger
    /// unit keeps them with their entry numbers.
    #[test]
    fn inserts_are_seen_by_their_snapshots_and_never_stand_for_an_index() {
        use super::{Insert, INSERTED, MAX_ENTRIES};
        use crate::storage::arena::UnitSize;
        let arena = Arena::new(4096, 64 * 4096).unwrap();
        let mut space = ArenaSpace::default();
        let leaf = space.alloc(&arena, 1, u64::MAX, 1, false).unwrap().pgno();
        let fresh = space
            .alloc_insert_overlay(&arena, leaf, 100, 0, u64::MAX)
            .unwrap();
        let page = arena.attach_overlay(leaf, fresh);
        assert!(!page.has_inserts());
        assert!(page.append(3, Value(b"three"), 2));
        assert!(page.append_insert(b"kb", b"vb", 2));
        assert!(page.has_inserts());
        let before_4 = page.mark();
        assert!(page.append_insert(b"ka", b"va", 4));
        assert!(page.append(3, Deleted, 4));
        fn keys(page: &OverlayPage<'_>, bound: u64) -> Vec<(u8, Vec<u8>, Vec<u8>)> {
            let mut found = [Insert::default(); MAX_ENTRIES];
            let n = page.inserts(bound, &mut found).unwrap();
            found[..n]
                .iter()
                .map(|i| (i.entry, i.key.to_vec(), i.value.to_vec()))
                .collect()
        }
        assert_eq!(keys(&page, 1), vec![]);
        assert_eq!(keys(&page, 2), vec![(1, b"kb".to_vec(), b"vb".to_vec())]);
        assert_eq!(
            keys(&page, 4),
            vec![
                (1, b"kb".to_vec(), b"vb".to_vec()),
                (2, b"ka".to_vec(), b"va".to_vec())
            ]
        );
        assert_eq!(page.inserted_value(b"ka", 3).unwrap(), None);
        assert_eq!(page.inserted_value(b"ka", 4).unwrap(), Some(&b"va"[..]));
        assert_eq!(page.inserted_value(b"kc", 9).unwrap(), None);
        assert_eq!(page.insert_at(2).unwrap(), (&b"ka"[..], &b"va"[..]));
        assert!(page.insert_at(0).is_err(), "entry 0 is a value");
        // No index answers for an insert.
        assert_eq!(page.value(usize::from(INSERTED), 9).unwrap(), None);
        assert_eq!(page.value(3, 2).unwrap(), Some(Value(b"three")));
        assert_eq!(page.value(3, 4).unwrap(), Some(Deleted));
        let mut newest = [(0u16, Deleted); MAX_ENTRIES];
        assert_eq!(page.newest_entries(9, &mut newest).unwrap(), 1);
        assert_eq!(page.deleted_between(9, 0, 100).unwrap(), 1);
        // A larger unit takes them, in order, with their txns.
        let larger = space.alloc_overlay(&arena, leaf, 100, 0, u64::MAX).unwrap();
        assert!(UnitSize::of(larger) > UnitSize::of(fresh));
        let to = arena.overlay_in(larger).unwrap();
        to.init();
        let mark = page.copy_entries_to(&to, 4).unwrap();
        assert_eq!(keys(&to, 2), keys(&page, 2));
        assert_eq!(keys(&to, 4), keys(&page, 4));
        assert!(to.has_inserts());
        // Txn 4 given up: its insert is cut off.
        to.cut(mark);
        page.cut(before_4);
        assert_eq!(keys(&page, 9), vec![(1, b"kb".to_vec(), b"vb".to_vec())]);
        assert_eq!(keys(&to, 9), vec![(1, b"kb".to_vec(), b"vb".to_vec())]);
        assert_eq!(page.inserted_value(b"ka", 9).unwrap(), None);
        // The writer's counts follow the cut, in both units.
        assert_eq!(page.inserted_cells(), (1, 4));
        assert_eq!(to.inserted_cells(), (1, 4));
    }

    /// The writer's count of inserts and their bytes agrees with the list
    /// through appends of every kind, cuts and a move to a larger unit;
    /// the filter never hides an insert, and a key never inserted is found
    /// absent without a hit in the list.
    #[test]
    fn insert_counts_and_the_key_filter_agree_with_the_list() {
        use super::{Insert, MAX_ENTRIES};
        fn by_scan(page: &OverlayPage<'_>) -> (usize, usize) {
            let mut found = [Insert::default(); MAX_ENTRIES];
            let n = page.inserts(u64::MAX, &mut found).unwrap();
            let bytes = found[..n].iter().map(|i| i.key.len() + i.value.len()).sum();
            (n, bytes)
        }
        let arena = Arena::new(4096, 64 * 4096).unwrap();
        let mut space = ArenaSpace::default();
        let leaf = space.alloc(&arena, 1, u64::MAX, 1, false).unwrap().pgno();
        let unit = space
            .alloc_insert_overlay(&arena, leaf, 40, 0, u64::MAX)
            .unwrap();
        let page = arena.attach_overlay(leaf, unit);
        assert_eq!(page.inserted_cells(), (0, 0));
        let mut marks = Vec::new();
        let mut txn = 1;
        for i in 0..40u32 {
            let key = format!("key{:05}", i * 7919 % 1000);
            let value = vec![b'v'; (i % 5) as usize];
            marks.push(page.mark());
            let appended = match i % 4 {
                0 | 1 => page.append_insert(key.as_bytes(), &value, txn),
                2 => page.append((i % 60) as u16, Value(&value), txn),
                _ => page.append((i % 60) as u16, Deleted, txn),
            };
            if !appended {
                marks.pop();
                break;
            }
            assert_eq!(page.inserted_cells(), by_scan(&page), "after entry {i}");
            let deleted = page.deleted_between(u64::MAX, 0, 100).unwrap();
            let counts = (deleted, by_scan(&page).0);
            assert_eq!(page.counts_seen_at(txn), Some(counts), "after entry {i}");
            assert_eq!(page.counts_seen_at(txn - 1), None, "entries past the bound");
            if i % 4 <= 1 {
                let found = page.inserted_value(key.as_bytes(), u64::MAX).unwrap();
                assert_eq!(found, Some(&value[..]), "{key} inserted");
            }
            txn += u64::from(i % 3 == 0);
        }
        assert!(marks.len() > 4, "the unit took several entries");
        // Keys never inserted: absent, whatever the filter says.
        for i in 0..2000 {
            let key = format!("other{i}");
            assert_eq!(page.inserted_value(key.as_bytes(), u64::MAX).unwrap(), None);
        }
        let larger = space.alloc_overlay(&arena, 2, 4000, 0, u64::MAX).unwrap();
        let to = arena.overlay_in(larger).unwrap();
        to.init();
        let before_last = page.copy_entries_to(&to, txn).unwrap();
        assert_eq!(to.inserted_cells(), page.inserted_cells());
        assert_eq!(to.mark().entries, page.mark().entries);
        assert!(before_last.entries < to.mark().entries);
        // Every snapshot reads the same entries, values and lookups there.
        fn listed(page: &OverlayPage<'_>, bound: u64) -> Vec<(u16, Option<Vec<u8>>)> {
            let mut all = Vec::new();
            page.visit(bound, |index, what| {
                all.push(match what {
                    Value(v) => (index, Some(v.to_vec())),
                    Deleted => (index, None),
                });
                Ok(())
            })
            .unwrap();
            all
        }
        for bound in 0..=txn {
            assert_eq!(listed(&to, bound), listed(&page, bound), "at {bound}");
            for index in 0..64 {
                assert_eq!(
                    to.value(index, bound).unwrap(),
                    page.value(index, bound).unwrap()
                );
            }
            for i in 0..40u32 {
                let key = format!("key{:05}", i * 7919 % 1000);
                let (a, b) = (
                    to.inserted_value(key.as_bytes(), bound),
                    page.inserted_value(key.as_bytes(), bound),
                );
                assert_eq!(a.unwrap(), b.unwrap(), "{key} at {bound}");
            }
        }
        // The copy appends as the original would.
        assert!(to.append_insert(b"late", b"v", txn));
        assert_eq!(to.inserted_value(b"late", txn).unwrap(), Some(&b"v"[..]));
        to.cut(before_last);
        assert_eq!(listed(&to, u64::MAX).len(), before_last.entries as usize);
        while let Some(mark) = marks.pop() {
            page.cut(mark);
            assert_eq!(page.inserted_cells(), by_scan(&page));
        }
        assert_eq!(page.inserted_cells(), (0, 0));
    }

    #[test]
    fn tombstones_delete_their_index_from_their_txn_on() {
        let arena = Arena::new(4096, 64 * 4096).unwrap();
        let mut space = ArenaSpace::default();
        let leaf = space.alloc(&arena, 1, u64::MAX, 1, false).unwrap().pgno();
        let fresh = space.alloc_overlay(&arena, leaf, 100, 0, u64::MAX).unwrap();
        let page = arena.attach_overlay(leaf, fresh);
        assert!(page.append(3, Value(b"v3"), 2));
        assert!(page.append(3, Deleted, 3));
        assert!(page.append(90, Deleted, 3));
        assert!(page.append(4, Deleted, 4));
        assert_eq!(page.value(3, 2).unwrap(), Some(Value(b"v3")));
        assert_eq!(page.value(3, 3).unwrap(), Some(Deleted));
        assert_eq!(page.value(90, 2).unwrap(), None);
        assert_eq!(page.value(90, 3).unwrap(), Some(Deleted));
        assert_eq!(page.deleted_between(2, 0, 100).unwrap(), 0);
        assert_eq!(page.deleted_between(3, 0, 100).unwrap(), 2);
        assert_eq!(page.deleted_between(4, 0, 100).unwrap(), 3);
        assert_eq!(
            page.deleted_between(4, 4, 90).unwrap(),
            1,
            "90 is past the end"
        );
        // A later value for a deleted index makes it live again, and a
        // tombstone cut off (its txn given up) deletes nothing.
        assert!(page.append(4, Value(b"back"), 5));
        let before = page.mark();
        assert!(page.append(3, Value(b"gone"), 6));
        assert!(page.append(5, Deleted, 6));
        assert_eq!(page.mark().tombstones, 4);
        page.cut(before);
        assert_eq!(
            page.mark().tombstones,
            3,
            "the cut tombstone is not counted"
        );
        assert!(page.has_tombstones());
        assert_eq!(page.value(4, 5).unwrap(), Some(Value(b"back")));
        assert_eq!(page.value(5, u64::MAX).unwrap(), None);
        assert_eq!(page.value(3, u64::MAX).unwrap(), Some(Deleted));
        assert_eq!(page.deleted_between(u64::MAX, 0, 100).unwrap(), 2);
        let mut newest = [(0, Deleted); super::MAX_ENTRIES];
        let n = page.newest_entries(u64::MAX, &mut newest).unwrap();
        let mut got = newest[..n].to_vec();
        got.sort_by_key(|e| e.0);
        assert_eq!(got, [(3, Deleted), (4, Value(b"back")), (90, Deleted)]);
    }

    #[test]
    fn an_overlay_refuses_entries_past_its_room() {
        let arena = Arena::new(1024, 64 * 1024).unwrap();
        let mut space = ArenaSpace::default();
        let leaf = space.alloc(&arena, 1, u64::MAX, 1, false).unwrap().pgno();
        let fresh = space.alloc_overlay(&arena, leaf, 100, 0, u64::MAX).unwrap();
        let page = arena.attach_overlay(leaf, fresh);
        let value = [7u8; 100];
        let mut n = 0;
        while page.append(n, Value(&value), 2) {
            n += 1;
        }
        // 1 KiB (an arena leaf's overlay takes a whole slot): 64 bytes
        // before the headers, then 16 of header and 100 of value each,
        // with room for the closing header.
        assert_eq!(n, 8);
        for i in 0..n {
            assert_eq!(page.value(usize::from(i), 2).unwrap(), Some(Value(&value)));
        }
        assert!(page.append(0, Value(b""), 2), "an empty value still fits");
        assert_eq!(page.value(0, 2).unwrap(), Some(Value(b"")));
    }
}
