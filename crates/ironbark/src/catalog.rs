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
//! | 4 | number of reusable free extents `R` |
//! | 4 | number of pending groups `G` |
//! | T x (70 + name) | per tree, sorted by name: `u64 id, u64 root page, u64 root txn, u64 root checksum, u32 depth, u64 entries, u64 branch pages, u64 leaf pages, u64 overflow pages, u16 name length, name` |
//! | R x (2 to 20) | per reusable extent, in page order, merged: `varint gap, varint pages`, where the gap is the first page minus the end of the previous extent (0 for the first) |
//! | G x (2 to 20 + extents) | per pending group, oldest first: `varint freed_by txn, varint extent count E`, then E x `varint gap, varint pages` as above (the gap restarting at 0 for each group) |
//!
//! Pending groups keep the txn that freed them because other processes may
//! hold snapshots that still read those pages: a writer in any process
//! reuses them only once no snapshot older than `freed_by` is alive and
//! the commit that freed them is durable. The first process to open the
//! file makes every free page reusable (open syncs first, and no reader
//! exists yet).
//!
//! Invariant: decoding validates every field against the page count, so a
//! damaged blob is `Corrupted`, never a panic or an out-of-range page.

use std::sync::Arc;

use crate::btree::search::Root;
use crate::btree::write::TreeState;
use crate::btree::MAX_DEPTH;
use crate::error::{Error, Result};
use crate::storage::freespace::{Extent, FreeSpace};
use crate::storage::meta::META_SLOTS;
use crate::txn::Tree;

/// Bytes of a tree record before its name.
const TREE_FIXED_LEN: usize = 8 + 8 + 8 + 8 + 4 + 8 * 4 + 2;
const HEADER_LEN: usize = 20;

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

    /// A handle to the tree `name` of the database `db`, or `NoSuchTree`.
    pub(crate) fn handle(&self, name: &str, db: u64) -> Result<Tree> {
        self.find(name)
            .map(|e| Tree {
                id: e.id,
                name: e.name.clone(),
                db,
            })
            .ok_or_else(|| Error::NoSuchTree(name.to_string()))
    }

    /// The names of all trees, in order.
    pub(crate) fn names(&self) -> Vec<String> {
        self.trees.iter().map(|t| t.name.to_string()).collect()
    }
}

/// The decoded state blob.
pub(crate) struct State {
    pub(crate) catalog: Catalog,
    /// Every free page: reusable, and pending with the txn that freed it.
    pub(crate) free: FreeSpace,
}

fn put_varint(b: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        b.push((v as u8) | 0x80);
        v >>= 7;
    }
    b.push(v as u8);
}

fn put_extents(b: &mut Vec<u8>, extents: impl Iterator<Item = Extent>) {
    let mut end = 0;
    for e in extents {
        put_varint(b, e.start - end);
        put_varint(b, e.len);
        end = e.end();
    }
}

pub(crate) fn encode(catalog: &Catalog, free: &FreeSpace) -> Vec<u8> {
    let reusable = free.reusable().count();
    let groups = free.pending_groups().count();
    let mut b = Vec::with_capacity(
        HEADER_LEN + catalog.trees.len() * 80 + reusable * 4 + free.pending_extents() * 4,
    );
    b.extend_from_slice(&catalog.next_tree_id.to_le_bytes());
    b.extend_from_slice(&(catalog.trees.len() as u32).to_le_bytes());
    b.extend_from_slice(&(reusable as u32).to_le_bytes());
    b.extend_from_slice(&(groups as u32).to_le_bytes());
    for t in &catalog.trees {
        let s = &t.state;
        b.extend_from_slice(&t.id.to_le_bytes());
        b.extend_from_slice(&s.root.pgno.to_le_bytes());
        b.extend_from_slice(&s.root.txn.to_le_bytes());
        b.extend_from_slice(&s.root.sum.to_le_bytes());
        b.extend_from_slice(&s.root.depth.to_le_bytes());
        for v in [s.entries, s.branch_pages, s.leaf_pages, s.overflow_pages] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&(t.name.len() as u16).to_le_bytes());
        b.extend_from_slice(t.name.as_bytes());
    }
    put_extents(&mut b, free.reusable());
    for (freed_by, extents) in free.pending_groups() {
        put_varint(&mut b, freed_by);
        put_varint(&mut b, extents.len() as u64);
        put_extents(&mut b, extents.iter().copied());
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
            .get(self.at..self.at.saturating_add(n))
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
    fn varint(&mut self) -> Result<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.take(1)?[0];
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(Error::corrupted_page(self.pgno, "varint too long"))
    }
}

/// Decodes and validates a state blob of a commit with `page_count` pages
/// and txn id `txn`; the free space only if `with_free` (readers need only
/// the catalog).
pub(crate) fn decode(
    b: &[u8],
    pgno: u64,
    page_count: u64,
    txn: u64,
    with_free: bool,
) -> Result<State> {
    let bad = |d: String| Error::corrupted_page(pgno, d);
    let mut r = Reader { b, at: 0, pgno };
    let next_tree_id = r.u64()?;
    let tree_count = r.u32()? as usize;
    let extent_count = r.u32()? as usize;
    let group_count = r.u32()? as usize;
    let min_len = tree_count
        .checked_mul(TREE_FIXED_LEN + 1)
        .and_then(|t| t.checked_add(extent_count.checked_mul(2)?))
        .and_then(|t| t.checked_add(group_count.checked_mul(2)?))
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
            sum: r.u64()?,
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
    if !with_free {
        return Ok(State {
            catalog: Catalog {
                next_tree_id,
                trees,
            },
            free: FreeSpace::default(),
        });
    }
    let reusable = read_extents(&mut r, extent_count, page_count)?;
    let mut pending = Vec::with_capacity(group_count.min(b.len()));
    for _ in 0..group_count {
        let freed_by = r.varint()?;
        if freed_by == 0 || freed_by > txn {
            return Err(bad(format!(
                "pending group of txn {freed_by} after commit {txn}"
            )));
        }
        let n = usize::try_from(r.varint()?)
            .ok()
            .filter(|&n| n > 0 && n <= b.len())
            .ok_or_else(|| bad("pending group extent count out of range".into()))?;
        pending.push((freed_by, read_extents(&mut r, n, page_count)?));
    }
    let free = FreeSpace::from_parts(reusable, pending)
        .ok_or_else(|| bad("free extents overlap or pending groups out of order".into()))?;
    Ok(State {
        catalog: Catalog {
            next_tree_id,
            trees,
        },
        free,
    })
}

/// `n` extents encoded as gaps and lengths, each within the commit's pages.
fn read_extents(r: &mut Reader<'_>, n: usize, page_count: u64) -> Result<Vec<Extent>> {
    let mut out = Vec::with_capacity(n.min(r.b.len()));
    let mut end = 0u64;
    for _ in 0..n {
        let gap = r.varint()?;
        let len = r.varint()?;
        let start = end.checked_add(gap);
        let in_range = start.is_some_and(|s| {
            s >= META_SLOTS && len > 0 && s.checked_add(len).is_some_and(|e| e <= page_count)
        });
        let Some(start) = start.filter(|_| in_range) else {
            return Err(Error::corrupted_page(
                r.pgno,
                format!("free extent {end}+{gap}, {len} pages, out of range"),
            ));
        };
        out.push(Extent { start, len });
        end = start + len;
    }
    Ok(out)
}
