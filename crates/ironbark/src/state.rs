//! The state chain: how the catalog of trees and the free-space map are
//! persisted, so that a commit writes what it changed, not what the file
//! holds.
//!
//! The meta page points to the *tip* of a chain of blob runs:
//!
//! ```text
//! meta -> delta (open) -> delta (sealed) -> ... -> base
//! ```
//!
//! - The **base** is a full image: every tree record, every reusable extent,
//!   every pending extent with the txns that wrote and freed it.
//! - A **delta** holds the records of one or more commits, each listing what
//!   that commit changed: the trees it created, changed or dropped, the
//!   extents it freed (with the txn that wrote them), and the extents it took
//!   from free space. A delta links to the blob before it with that blob's
//!   page, txn and checksum, so the chain is part of the Merkle tree rooted
//!   in the meta page.
//! - A commit copies the newest (*open*) delta, appends its record and frees
//!   the old copy, while the records fit in one page; otherwise it *seals* the
//!   open delta (leaves it in the chain) and starts a new one. When the deltas
//!   outgrow half the base (plus a fixed slack), the commit writes a new base
//!   instead and frees the whole chain.
//!
//! So a commit writes one state page (amortized: plus a base every
//! `base / 2` bytes of deltas), whatever the number of trees and free
//! extents; open reads the base and at most about half its size in deltas.
//!
//! Release of pending pages (pending -> reusable) is not recorded: it depends
//! on the readers alive at the time, and any writer recomputes it from the
//! txns each pending extent carries (`storage/freespace.rs`). Replay
//! therefore keeps every free extent in one map (`FreeMap`), since a commit
//! may take pages the chain still lists as pending.
//!
//! Invariant: decoding validates every field (page ranges against the
//! commit's page count, txn order along the chain, record counts against
//! the bytes), so a damaged chain is `Corrupted`, never a panic, a huge
//! allocation or a hang.

use crate::btree::page::{self, blob_data, BLOB_HEADER_LEN};
use crate::btree::search::Root;
use crate::btree::write::TreeState;
use crate::btree::MAX_DEPTH;
use crate::catalog::{Catalog, TreeEntry};
use crate::error::{Error, Result};
use crate::kind::TreeKind;
use crate::pages::PageSource;
use crate::storage::freespace::{Extent, FreeMap, FreeSpace, Freed};
use crate::storage::meta::{Meta, META_SLOTS};

const KIND_BASE: u8 = 0;
const KIND_DELTA: u8 = 1;

/// Bytes of a tree record before its name.
const TREE_FIXED_LEN: usize = 8 + 8 + 8 + 8 + 4 + 8 * 4 + 2;
/// Bytes of a base before its records: kind, next tree id, three counts.
const BASE_HEADER_LEN: usize = 1 + 8 + 4 + 4 + 4;
/// Bytes of a delta before its records: kind, the previous blob's page,
/// txn and checksum.
pub(crate) const DELTA_HEADER_LEN: usize = 1 + 8 + 8 + 8;
/// The deltas may exceed half the base by this many pages' worth of bytes
/// before the next commit writes a new base (so a small base is not
/// rewritten every few commits).
const COMPACT_SLACK_PAGES: usize = 2;
/// At most this many blobs in a chain (a damaged chain must not make open
/// read the whole file); far above what the compaction rule produces.
const MAX_CHAIN: usize = 1 << 16;

/// A blob run of the chain, as the blob after it (or the meta) records it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct BlobRef {
    pub(crate) extent: Extent,
    pub(crate) txn: u64,
    pub(crate) sum: u64,
}

/// The newest delta, which the next commit may copy and extend.
#[derive(Clone, Debug)]
pub(crate) struct OpenDelta {
    pub(crate) blob: BlobRef,
    /// The blob it links to: the newest sealed delta, or the base.
    pub(crate) prev: BlobRef,
    pub(crate) records: Vec<u8>,
}

/// The shape of the chain of the newest commit, as the writer keeps it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Chain {
    pub(crate) base: BlobRef,
    pub(crate) base_bytes: usize,
    /// Sealed deltas, oldest first.
    pub(crate) sealed: Vec<BlobRef>,
    pub(crate) sealed_bytes: usize,
    pub(crate) open: Option<OpenDelta>,
}

impl Chain {
    /// Every blob of the chain (their pages are in use).
    pub(crate) fn blobs(&self) -> impl Iterator<Item = &BlobRef> + '_ {
        std::iter::once(&self.base)
            .chain(self.sealed.iter())
            .chain(self.open.iter().map(|o| &o.blob))
    }

    /// The blob the next new delta links to.
    fn newest_sealed(&self) -> BlobRef {
        *self.sealed.last().unwrap_or(&self.base)
    }

    fn delta_bytes(&self) -> usize {
        self.sealed_bytes + self.open.as_ref().map_or(0, |o| o.records.len())
    }
}

/// What a commit does with the chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Plan {
    /// Copy the open delta with this commit's record appended; free the old.
    Append,
    /// Keep the open delta (if any) in the chain; start a new one.
    Seal,
    /// Write a new base; free the whole chain.
    Compact,
}

impl Chain {
    /// Chooses the plan for a record of about `record_len` bytes, with
    /// `page_size`-byte pages.
    pub(crate) fn plan(&self, record_len: usize, page_size: usize) -> Plan {
        let capacity = page_size - BLOB_HEADER_LEN - DELTA_HEADER_LEN;
        if let Some(o) = &self.open {
            if o.records.len() + record_len <= capacity {
                return Plan::Append;
            }
        }
        if self.delta_bytes() + record_len > self.base_bytes / 2 + COMPACT_SLACK_PAGES * page_size {
            Plan::Compact
        } else {
            Plan::Seal
        }
    }

    /// The blobs a commit following `plan` stops using.
    pub(crate) fn freed_by(&self, plan: Plan) -> Vec<BlobRef> {
        match plan {
            Plan::Append => self.open.iter().map(|o| o.blob).collect(),
            Plan::Seal => Vec::new(),
            Plan::Compact => self.blobs().copied().collect(),
        }
    }

    /// The payload of the new delta blob (header and records) for `plan`
    /// (not `Compact`) and this commit's `record`.
    pub(crate) fn delta_data(&self, plan: Plan, record: &[u8]) -> Vec<u8> {
        let (prev, old): (BlobRef, &[u8]) = match (plan, &self.open) {
            (Plan::Append, Some(o)) => (o.prev, &o.records),
            (Plan::Seal, Some(o)) => (o.blob, &[]),
            (Plan::Seal, None) => (self.newest_sealed(), &[]),
            _ => unreachable!("no delta for {plan:?}"),
        };
        let mut b = Vec::with_capacity(DELTA_HEADER_LEN + old.len() + record.len());
        b.push(KIND_DELTA);
        b.extend_from_slice(&prev.extent.start.to_le_bytes());
        b.extend_from_slice(&prev.txn.to_le_bytes());
        b.extend_from_slice(&prev.sum.to_le_bytes());
        b.extend_from_slice(old);
        b.extend_from_slice(record);
        b
    }

    /// The chain after a commit that followed `plan` and wrote `blob` with
    /// `data` (a delta payload, or a base of `data.len()` bytes).
    pub(crate) fn after(&self, plan: Plan, blob: BlobRef, data: &[u8]) -> Chain {
        match plan {
            Plan::Compact => Chain {
                base: blob,
                base_bytes: data.len(),
                sealed: Vec::new(),
                sealed_bytes: 0,
                open: None,
            },
            Plan::Append | Plan::Seal => {
                let mut next = self.clone();
                let prev = if plan == Plan::Seal {
                    if let Some(o) = next.open.take() {
                        next.sealed.push(o.blob);
                        next.sealed_bytes += o.records.len();
                    }
                    next.newest_sealed()
                } else {
                    next.open.as_ref().expect("append to an open delta").prev
                };
                next.open = Some(OpenDelta {
                    blob,
                    prev,
                    records: data[DELTA_HEADER_LEN..].to_vec(),
                });
                next
            }
        }
    }
}

fn put_varint(b: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        b.push((v as u8) | 0x80);
        v >>= 7;
    }
    b.push(v as u8);
}

fn put_tree(b: &mut Vec<u8>, t: &TreeEntry) {
    let s = &t.state;
    b.extend_from_slice(&t.id.to_le_bytes());
    b.extend_from_slice(&s.root.pgno.to_le_bytes());
    b.extend_from_slice(&s.root.txn.to_le_bytes());
    b.extend_from_slice(&s.root.sum.to_le_bytes());
    b.extend_from_slice(&s.root.depth.to_le_bytes());
    for v in [s.entries, s.branch_pages, s.leaf_pages, s.overflow_pages] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    // Names are at most 255 bytes: the high byte of the length field
    // holds the tree's kind flags (0, a plain tree, in older files).
    let field = u16::from(t.kind.flags()) << 8 | t.name.len() as u16;
    b.extend_from_slice(&field.to_le_bytes());
    b.extend_from_slice(t.name.as_bytes());
}

/// A full image: the catalog and every free extent.
pub(crate) fn encode_base(catalog: &Catalog, free: &FreeSpace) -> Vec<u8> {
    let reusable = free.reusable().count();
    let mut pending: Vec<_> = free.pending().copied().collect();
    pending.sort_unstable_by_key(|p| p.extent.start);
    let mut b = Vec::with_capacity(
        BASE_HEADER_LEN + catalog.trees.len() * 80 + reusable * 4 + pending.len() * 8,
    );
    b.push(KIND_BASE);
    b.extend_from_slice(&catalog.next_tree_id.to_le_bytes());
    b.extend_from_slice(&(catalog.trees.len() as u32).to_le_bytes());
    b.extend_from_slice(&(reusable as u32).to_le_bytes());
    b.extend_from_slice(&(pending.len() as u32).to_le_bytes());
    for t in &catalog.trees {
        put_tree(&mut b, t);
    }
    let mut end = 0;
    for e in free.reusable() {
        put_varint(&mut b, e.start - end);
        put_varint(&mut b, e.len);
        end = e.end();
    }
    let mut end = 0;
    for p in &pending {
        put_varint(&mut b, p.extent.start - end);
        put_varint(&mut b, p.extent.len);
        put_varint(&mut b, p.born);
        put_varint(&mut b, p.freed);
        end = p.extent.end();
    }
    b
}

/// Appends to `b` the record of commit `txn`: the trees changed from `old`
/// to `new`, the extents it freed (sorted by start) and those it took.
pub(crate) fn encode_record(
    b: &mut Vec<u8>,
    txn: u64,
    new: &Catalog,
    old: &Catalog,
    freed: &[Freed],
    taken: &[Extent],
) {
    let mut upserts = Vec::new();
    let mut drops = Vec::new();
    new.changes_since(old, &mut upserts, &mut drops);
    put_varint(b, txn);
    put_varint(b, new.next_tree_id);
    put_varint(b, upserts.len() as u64);
    for t in upserts {
        put_tree(b, t);
    }
    put_varint(b, drops.len() as u64);
    for name in drops {
        b.extend_from_slice(&(name.len() as u16).to_le_bytes());
        b.extend_from_slice(name.as_bytes());
    }
    put_varint(b, freed.len() as u64);
    let mut end = 0;
    for f in freed {
        put_varint(b, f.extent.start - end);
        put_varint(b, f.extent.len);
        put_varint(b, f.born);
        end = f.extent.end();
    }
    let mut taken = taken.to_vec();
    taken.sort_unstable();
    put_varint(b, taken.len() as u64);
    let mut end = 0;
    for e in &taken {
        put_varint(b, e.start - end);
        put_varint(b, e.len);
        end = e.end();
    }
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
    pgno: u64,
}

impl<'a> Reader<'a> {
    fn bad(&self, detail: impl Into<String>) -> Error {
        Error::corrupted_page(self.pgno, detail.into())
    }
    fn done(&self) -> bool {
        self.at >= self.b.len()
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let s = self
            .b
            .get(self.at..self.at.saturating_add(n))
            .ok_or_else(|| self.bad("state blob truncated"))?;
        self.at += n;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(self.take(2)?.try_into().expect("2")))
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4")))
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8")))
    }
    fn varint(&mut self) -> Result<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.u8()?;
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(self.bad("varint too long"))
    }
    /// A count of items of at least `min_len` bytes each that must fit in
    /// what is left (so a damaged count cannot cause a huge allocation).
    fn count(&mut self, min_len: usize) -> Result<usize> {
        let n = self.varint()?;
        usize::try_from(n)
            .ok()
            .filter(|&n| n.saturating_mul(min_len) <= self.b.len() - self.at)
            .ok_or_else(|| self.bad(format!("count {n} exceeds the state blob")))
    }
    fn name(&mut self) -> Result<&'a str> {
        let len = self.u16()? as usize;
        self.name_of_len(len)
    }
    /// A tree record's name and kind: the kind flags are the high byte of
    /// its length field.
    fn name_and_kind(&mut self) -> Result<(&'a str, TreeKind)> {
        let field = self.u16()?;
        let flags = (field >> 8) as u8;
        let kind = TreeKind::from_flags(flags)
            .ok_or_else(|| self.bad(format!("unknown tree kind flags {flags:#x}")))?;
        Ok((self.name_of_len(usize::from(field & 0xff))?, kind))
    }
    fn name_of_len(&mut self, len: usize) -> Result<&'a str> {
        let name =
            std::str::from_utf8(self.take(len)?).map_err(|_| self.bad("tree name is not UTF-8"))?;
        if name.is_empty() || name.len() > crate::MAX_TREE_NAME_LEN {
            return Err(self.bad(format!("tree name length {} out of range", name.len())));
        }
        Ok(name)
    }
    /// A tree record of a commit `txn` with `page_count` pages.
    fn tree(&mut self, page_count: u64, txn: u64) -> Result<TreeEntry> {
        let id = self.u64()?;
        let root = Root {
            pgno: self.u64()?,
            txn: self.u64()?,
            sum: self.u64()?,
            depth: self.u32()?,
        };
        let state = TreeState {
            root,
            entries: self.u64()?,
            branch_pages: self.u64()?,
            leaf_pages: self.u64()?,
            overflow_pages: self.u64()?,
        };
        let (name, kind) = self.name_and_kind()?;
        let root_ok = if root.pgno == 0 {
            root.depth == 0 && state.entries == 0
        } else {
            (META_SLOTS..page_count).contains(&root.pgno)
                && (1..=MAX_DEPTH as u32).contains(&root.depth)
                && root.txn <= txn
        };
        if !root_ok {
            return Err(self.bad(format!("tree {name:?} has an invalid root")));
        }
        Ok(TreeEntry {
            id,
            name: name.into(),
            state,
            kind,
        })
    }
    /// An extent as a gap from `end` and a length, within the page count.
    fn extent(&mut self, end: &mut u64, page_count: u64) -> Result<Extent> {
        let gap = self.varint()?;
        let len = self.varint()?;
        let start = end.checked_add(gap);
        let in_range = start.is_some_and(|s| {
            s >= META_SLOTS && len > 0 && s.checked_add(len).is_some_and(|e| e <= page_count)
        });
        match start.filter(|_| in_range) {
            Some(start) => {
                *end = start + len;
                Ok(Extent { start, len })
            }
            None => Err(self.bad(format!(
                "free extent {end}+{gap}, {len} pages, out of range"
            ))),
        }
    }
}

/// The decoded state of a commit.
pub(crate) struct State {
    pub(crate) catalog: Catalog,
    /// Every free page (empty unless loaded `with_free`).
    pub(crate) free: FreeSpace,
    pub(crate) chain: Chain,
}

/// One blob of the chain, read and verified.
struct ChainBlob<'a> {
    blob: BlobRef,
    data: &'a [u8],
}

/// Reads the state of `meta`'s commit: the catalog, and the free space
/// only `with_free` (readers need only the catalog). Every blob of the
/// chain is checked against the checksum and txn its successor (or the
/// meta) recorded.
pub(crate) fn load<S: PageSource>(src: &S, meta: &Meta, with_free: bool) -> Result<State> {
    let ps = meta.page_size as u64;
    let mut blobs: Vec<ChainBlob<'_>> = Vec::new();
    let mut next = BlobRef {
        extent: Extent {
            start: meta.state_pgno,
            len: 0,
        },
        txn: meta.state_txn,
        sum: meta.state_sum,
    };
    loop {
        let pgno = next.extent.start;
        if blobs.len() >= MAX_CHAIN {
            return Err(Error::corrupted_page(pgno, "state chain too long"));
        }
        if !(META_SLOTS..meta.page_count).contains(&pgno) {
            return Err(Error::corrupted_page(pgno, "state blob page out of range"));
        }
        let run = src.blob_run(pgno)?;
        if !page::checksum_ok(run) || page::stored_sum(run) != next.sum {
            return Err(Error::corrupted_page(pgno, "state blob checksum mismatch"));
        }
        let data = blob_data(run, pgno, Some(next.txn), None)?;
        next.extent.len = run.len() as u64 / ps;
        let mut r = Reader {
            b: data,
            at: 0,
            pgno,
        };
        let kind = r.u8()?;
        blobs.push(ChainBlob { blob: next, data });
        match kind {
            KIND_BASE => break,
            KIND_DELTA => {
                let prev = BlobRef {
                    extent: Extent {
                        start: r.u64()?,
                        len: 0,
                    },
                    txn: r.u64()?,
                    sum: r.u64()?,
                };
                if prev.txn >= next.txn || prev.txn == 0 {
                    return Err(r.bad("state chain txns out of order"));
                }
                next = prev;
            }
            k => return Err(r.bad(format!("unknown state blob kind {k}"))),
        }
    }
    let base = blobs.pop().expect("a base ends the chain");
    let mut state = decode_base(base.data, base.blob, meta, with_free)?;
    let mut last_txn = base.blob.txn;
    let newest = blobs.first().map(|b| b.blob);
    for (i, b) in blobs.iter().enumerate().rev() {
        let mut r = Reader {
            b: &b.data[DELTA_HEADER_LEN..],
            at: 0,
            pgno: b.blob.extent.start,
        };
        while !r.done() {
            last_txn = apply_record(&mut r, &mut state, meta, last_txn, b.blob.txn, with_free)?;
        }
        if i == 0 {
            // The newest delta stays open for the next commit to extend.
            state.chain.open = Some(OpenDelta {
                blob: b.blob,
                prev: state.chain.newest_sealed(),
                records: b.data[DELTA_HEADER_LEN..].to_vec(),
            });
        } else {
            state.chain.sealed.push(b.blob);
            state.chain.sealed_bytes += b.data.len() - DELTA_HEADER_LEN;
        }
    }
    debug_assert_eq!(state.chain.open.as_ref().map(|o| o.blob), newest);
    Ok(state.into())
}

/// Replay state: the catalog and every free extent.
struct Replay {
    catalog: Catalog,
    free: FreeMap,
    chain: Chain,
}

fn decode_base(data: &[u8], blob: BlobRef, meta: &Meta, with_free: bool) -> Result<Replay> {
    let mut r = Reader {
        b: data,
        at: 1,
        pgno: blob.extent.start,
    };
    let next_tree_id = r.u64()?;
    let tree_count = r.u32()? as usize;
    let reusable = r.u32()? as usize;
    let pending = r.u32()? as usize;
    let min_len = tree_count
        .saturating_mul(TREE_FIXED_LEN + 1)
        .saturating_add(reusable.saturating_mul(2))
        .saturating_add(pending.saturating_mul(4));
    if min_len > data.len() {
        return Err(r.bad("state blob counts exceed its length"));
    }
    let mut catalog = Catalog {
        next_tree_id,
        trees: crate::catalog::Trees::with_capacity(tree_count),
    };
    for _ in 0..tree_count {
        let t = r.tree(meta.page_count, blob.txn)?;
        if t.id >= next_tree_id {
            return Err(r.bad(format!("tree id {} not below the next id", t.id)));
        }
        if catalog.trees.last().is_some_and(|p| p.name >= t.name) {
            return Err(r.bad("tree names out of order"));
        }
        catalog.trees.push(t);
    }
    let mut free = FreeMap::default();
    if with_free {
        let mut end = 0;
        for _ in 0..reusable {
            let e = r.extent(&mut end, meta.page_count)?;
            if !free.insert(e, 0, 0) {
                return Err(r.bad("free extents overlap"));
            }
        }
        let mut end = 0;
        for _ in 0..pending {
            let e = r.extent(&mut end, meta.page_count)?;
            let born = r.varint()?;
            let freed = r.varint()?;
            if born >= freed || freed > blob.txn || !free.insert(e, born, freed) {
                return Err(r.bad("pending extent out of range or overlapping"));
            }
        }
    }
    Ok(Replay {
        catalog,
        free,
        chain: Chain {
            base: blob,
            base_bytes: data.len(),
            ..Chain::default()
        },
    })
}

/// Applies one commit record; returns its txn.
fn apply_record(
    r: &mut Reader<'_>,
    s: &mut Replay,
    meta: &Meta,
    after_txn: u64,
    blob_txn: u64,
    with_free: bool,
) -> Result<u64> {
    let txn = r.varint()?;
    if txn <= after_txn || txn > blob_txn {
        return Err(r.bad(format!("state record of txn {txn} out of order")));
    }
    s.catalog.next_tree_id = r.varint()?;
    for _ in 0..r.count(TREE_FIXED_LEN + 1)? {
        let t = r.tree(meta.page_count, txn)?;
        if t.id >= s.catalog.next_tree_id {
            return Err(r.bad(format!("tree id {} not below the next id", t.id)));
        }
        s.catalog.upsert(t);
    }
    for _ in 0..r.count(3)? {
        let name = r.name()?;
        if !s.catalog.remove(name) {
            return Err(r.bad(format!("record drops tree {name:?}, which does not exist")));
        }
    }
    let mut end = 0;
    for _ in 0..r.count(3)? {
        let e = r.extent(&mut end, meta.page_count)?;
        let born = r.varint()?;
        if born >= txn || (with_free && !s.free.insert(e, born, txn)) {
            return Err(r.bad(format!("freed extent {e:?} of txn {txn} is invalid")));
        }
    }
    let mut end = 0;
    for _ in 0..r.count(2)? {
        let e = r.extent(&mut end, meta.page_count)?;
        if with_free && !s.free.remove(e) {
            return Err(r.bad(format!("txn {txn} took {e:?}, which was not free")));
        }
    }
    Ok(txn)
}

impl From<Replay> for State {
    fn from(r: Replay) -> State {
        State {
            catalog: r.catalog,
            free: r.free.into_free_space(),
            chain: r.chain,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kind::IntWidth;

    #[test]
    fn tree_records_keep_their_kind_and_refuse_unknown_flags() {
        for kind in [
            TreeKind::PLAIN,
            TreeKind::MULTIMAP,
            TreeKind::int_keys(IntWidth::U32),
            TreeKind::int_multimap(IntWidth::U64),
        ] {
            let entry = TreeEntry {
                id: 3,
                name: "tree".into(),
                state: TreeState::default(),
                kind,
            };
            let mut b = Vec::new();
            put_tree(&mut b, &entry);
            let mut r = Reader {
                b: &b,
                at: 0,
                pgno: 9,
            };
            assert_eq!(r.tree(10, 1).unwrap(), entry);
            // The flag byte follows the one-byte name length.
            let flags_at = TREE_FIXED_LEN - 1;
            if kind == TreeKind::PLAIN {
                // As older files wrote it: a u16 name length.
                assert_eq!(b[flags_at - 1..flags_at + 1], 4u16.to_le_bytes());
            }
            for bad in [0x80, 0x06, 0x07, 0x10] {
                let mut b = b.clone();
                b[flags_at] = bad;
                let mut r = Reader {
                    b: &b,
                    at: 0,
                    pgno: 9,
                };
                assert!(matches!(r.tree(10, 1), Err(Error::Corrupted { .. })));
            }
        }
    }
}
