//! The state blob: the catalog of named trees and the free-space map, as one
//! byte string written (as a blob run) by every commit and pointed to by its
//! meta page.
//!
//! Layout (little-endian):
//!
//! | size | field |
//! |---|---|
//! | 8 | next tree id |
//! | 4 | number of trees `T` |
//! | 4 | number of free extents `F` |
//! | T x (62 + name) | per tree, sorted by name: `u64 id, u64 root page, u64 root txn, u32 depth, u64 entries, u64 branch pages, u64 leaf pages, u64 overflow pages, u16 name length, name` |
//! | F x 24 | per extent: `u64 first page, u64 pages, u64 freed by txn` (0 = reusable) |
//!
//! Invariant: decoding validates every field against the page count, so a
//! damaged blob is `Corrupted`, never a panic or an out-of-range page.

use std::sync::Arc;

use crate::btree::search::Root;
use crate::btree::write::TreeState;
use crate::btree::MAX_DEPTH;
use crate::error::{Error, Result};
use crate::storage::freespace::{Extent, FreeSpace, PendingExtent};
use crate::storage::meta::META_SLOTS;

/// Bytes of a tree record before its name.
const TREE_FIXED_LEN: usize = 8 + 8 + 8 + 4 + 8 * 4 + 2;
const EXTENT_LEN: usize = 24;
const HEADER_LEN: usize = 16;

/// One named tree in a snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TreeEntry {
    pub(crate) id: u64,
    pub(crate) name: Arc<str>,
    pub(crate) state: TreeState,
}

/// The named trees of a snapshot, sorted by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Catalog {
    pub(crate) next_tree_id: u64,
    pub(crate) trees: Vec<TreeEntry>,
}

impl Catalog {
    pub(crate) fn find(&self, name: &str) -> Option<&TreeEntry> {
        self.trees
            .binary_search_by(|t| (*t.name).cmp(name))
            .ok()
            .map(|i| &self.trees[i])
    }
}

/// The decoded state blob.
pub(crate) struct State {
    pub(crate) catalog: Catalog,
    pub(crate) reusable: Vec<Extent>,
    pub(crate) pending: Vec<PendingExtent>,
}

/// The size `encode` will produce.
pub(crate) fn encoded_len(catalog: &Catalog, extents: usize) -> usize {
    HEADER_LEN
        + catalog
            .trees
            .iter()
            .map(|t| TREE_FIXED_LEN + t.name.len())
            .sum::<usize>()
        + extents * EXTENT_LEN
}

pub(crate) fn encode(catalog: &Catalog, free: &FreeSpace) -> Vec<u8> {
    let mut b = Vec::with_capacity(encoded_len(catalog, free.extent_count()));
    b.extend_from_slice(&catalog.next_tree_id.to_le_bytes());
    b.extend_from_slice(&(catalog.trees.len() as u32).to_le_bytes());
    b.extend_from_slice(&(free.extent_count() as u32).to_le_bytes());
    for t in &catalog.trees {
        let s = &t.state;
        b.extend_from_slice(&t.id.to_le_bytes());
        b.extend_from_slice(&s.root.pgno.to_le_bytes());
        b.extend_from_slice(&s.root.txn.to_le_bytes());
        b.extend_from_slice(&s.root.depth.to_le_bytes());
        for v in [s.entries, s.branch_pages, s.leaf_pages, s.overflow_pages] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&(t.name.len() as u16).to_le_bytes());
        b.extend_from_slice(t.name.as_bytes());
    }
    for e in free.reusable() {
        for v in [e.start, e.len, 0] {
            b.extend_from_slice(&v.to_le_bytes());
        }
    }
    for p in free.pending() {
        for v in [p.extent.start, p.extent.len, p.freed_by] {
            b.extend_from_slice(&v.to_le_bytes());
        }
    }
    b
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
    pgno: u64,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let s = self
            .b
            .get(self.at..self.at.checked_add(n).unwrap_or(usize::MAX))
            .ok_or_else(|| Error::corrupted_page(self.pgno, "state blob truncated"))?;
        self.at += n;
        Ok(s)
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
}

/// Decodes and validates a state blob of a commit with `page_count` pages
/// and txn id `txn`.
pub(crate) fn decode(b: &[u8], pgno: u64, page_count: u64, txn: u64) -> Result<State> {
    let bad = |d: String| Error::corrupted_page(pgno, d);
    let mut r = Reader { b, at: 0, pgno };
    let next_tree_id = r.u64()?;
    let tree_count = r.u32()? as usize;
    let extent_count = r.u32()? as usize;
    let min_len = tree_count
        .checked_mul(TREE_FIXED_LEN + 1)
        .and_then(|t| t.checked_add(extent_count.checked_mul(EXTENT_LEN)?))
        .ok_or_else(|| bad("state blob counts overflow".into()))?;
    if min_len > b.len() {
        return Err(bad("state blob counts exceed its length".into()));
    }
    let mut trees = Vec::with_capacity(tree_count);
    for _ in 0..tree_count {
        let id = r.u64()?;
        let root = Root {
            pgno: r.u64()?,
            txn: r.u64()?,
            depth: r.u32()?,
        };
        let state = TreeState {
            root,
            entries: r.u64()?,
            branch_pages: r.u64()?,
            leaf_pages: r.u64()?,
            overflow_pages: r.u64()?,
        };
        let name_len = r.u16()? as usize;
        let name = std::str::from_utf8(r.take(name_len)?)
            .map_err(|_| bad("tree name is not UTF-8".into()))?;
        if name.is_empty() || name.len() > crate::MAX_TREE_NAME_LEN {
            return Err(bad(format!("tree name length {} out of range", name.len())));
        }
        if id >= next_tree_id {
            return Err(bad(format!("tree id {id} not below the next id")));
        }
        let root_ok = if root.pgno == 0 {
            root.depth == 0 && state.entries == 0
        } else {
            (META_SLOTS..page_count).contains(&root.pgno)
                && (1..=MAX_DEPTH as u32).contains(&root.depth)
                && root.txn <= txn
        };
        if !root_ok {
            return Err(bad(format!("tree {name:?} has an invalid root")));
        }
        if let Some(prev) = trees.last() {
            let prev: &TreeEntry = prev;
            if *prev.name >= *name {
                return Err(bad("tree names out of order".into()));
            }
        }
        trees.push(TreeEntry {
            id,
            name: name.into(),
            state,
        });
    }
    let mut reusable = Vec::new();
    let mut pending = Vec::new();
    let mut last_freed_by = 0;
    for _ in 0..extent_count {
        let start = r.u64()?;
        let len = r.u64()?;
        let freed_by = r.u64()?;
        let in_range = start >= META_SLOTS
            && len > 0
            && start.checked_add(len).is_some_and(|e| e <= page_count);
        if !in_range || freed_by > txn {
            return Err(bad(format!("free extent {start}+{len} out of range")));
        }
        let extent = Extent { start, len };
        if freed_by == 0 {
            reusable.push(extent);
        } else {
            if freed_by < last_freed_by {
                return Err(bad("pending extents out of txn order".into()));
            }
            last_freed_by = freed_by;
            pending.push(PendingExtent { freed_by, extent });
        }
    }
    // No page may be free twice.
    let mut all: Vec<Extent> = reusable
        .iter()
        .copied()
        .chain(pending.iter().map(|p| p.extent))
        .collect();
    all.sort_unstable();
    if all.windows(2).any(|w| w[0].end() > w[1].start) {
        return Err(bad("free extents overlap".into()));
    }
    Ok(State {
        catalog: Catalog {
            next_tree_id,
            trees,
        },
        reusable,
        pending,
    })
}
