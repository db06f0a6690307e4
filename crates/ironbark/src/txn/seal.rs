//! Placement's common steps, shared by file commits (`txn::commit`) and
//! logged commits (`txn::logged`): the order of a transaction's dirty pages
//! (tree pages in pre-order, so leaves land in key order, and the blobs
//! they reference), and sealing them once each has its real number (a file
//! page or an arena slot): parents patched with their children's numbers,
//! txn ids and checksums, every page stamped and checksummed.
//!
//! Invariant: every live dirty page is reached from a root exactly once
//! (asserted), and a parent is sealed after all its children, since it
//! records their checksums.

use crate::btree::page::{
    page_kind, seal, set_child, set_overflow, stamp_arena, LeafValue, Node, DIRTY_BIT, KIND_LEAF,
};
use crate::catalog::Catalog;
use crate::error::Result;
use crate::pages::{DirtyPages, TreePageKinds};

/// Dirty pages up to which `order_dirty` counts them by kind first, to
/// stop scanning a branch once it found them all.
const SMALL_COMMIT_PAGES: usize = 64;

/// Spilled pages read between two calls of `forget_spill_reads`, at most:
/// placing a transaction larger than memory then reads its spilled pages
/// without keeping them all mapped.
const SPILL_READS: usize = 1 << 14;

/// Where a transaction's dirty pages go, in order, and where each is
/// referenced: found by one scan of every dirty page, which sealing then
/// reuses instead of scanning again. The writer keeps one between commits
/// (`WriterState::placement`), so that a commit allocates none of it.
#[derive(Default)]
pub(crate) struct Placement {
    /// The live dirty tree pages in pre-order (so leaves land in key order).
    pub(crate) pages: Vec<u64>,
    /// The dirty blobs they reference.
    pub(crate) blobs: Vec<u64>,
    /// The real number (file page or arena slot) of each dirty page, by
    /// index: set by the caller between `order_dirty` and `seal_all`.
    pub(crate) real: Vec<u64>,
    /// `(cell, dirty page)` of every reference to a dirty page, grouped by
    /// the page that holds it.
    refs: Vec<(usize, u64)>,
    /// For dirty page index `i`, its references: `refs[start..end]`.
    spans: Vec<(u32, u32)>,
    /// The checksum of each sealed page, by index.
    sums: Vec<u64>,
    stack: Vec<u64>,
}

impl Placement {
    /// Pages of the tree pages and blobs, for a page size of `page_size`.
    pub(crate) fn page_count(&self, dirty: &DirtyPages, page_size: usize) -> u64 {
        let blob_pages: u64 = self
            .blobs
            .iter()
            .map(|b| (dirty.get(*b).len() / page_size) as u64)
            .sum();
        self.pages.len() as u64 + blob_pages
    }
}

/// Fills `p` with the placement of the live dirty pages (see
/// [`Placement`]); `p.real` is all zeros.
pub(crate) fn order_dirty(catalog: &Catalog, dirty: &DirtyPages, p: &mut Placement) -> Result<()> {
    let n = dirty.pages.len();
    p.pages.clear();
    p.blobs.clear();
    p.refs.clear();
    p.stack.clear();
    p.spans.clear();
    p.spans.resize(n, (0, 0));
    p.real.clear();
    p.real.resize(n, 0);
    // Dirty tree pages not found yet, by kind, for a small transaction:
    // the scan of a branch for its dirty children stops once no dirty page
    // of their kind is left to find, so a single put's path is found after
    // half of each branch's children, on average. (A large transaction has
    // dirty children everywhere; counting its pages would cost a header
    // read each.)
    let mut left =
        (n <= SMALL_COMMIT_PAGES && !dirty.has_spilled()).then(|| dirty.tree_page_kinds());
    let take = |left: &mut Option<TreePageKinds>, id: u64| -> bool {
        match left {
            Some(left) => left.take(page_kind(dirty.get(id))),
            None => true,
        }
    };
    for t in &catalog.trees {
        if t.state.root.pgno & DIRTY_BIT != 0 {
            p.stack.push(t.state.root.pgno);
            take(&mut left, t.state.root.pgno);
        }
        while let Some(id) = p.stack.pop() {
            p.pages.push(id);
            if p.pages.len() % SPILL_READS == 0 {
                dirty.forget_spill_reads();
            }
            let node = Node::parse(dirty.get(id), id, None)?;
            let start = p.refs.len() as u32;
            if !node.is_leaf {
                // Pushed last to first, so popped (and placed) in key order.
                let (refs, stack) = (&mut p.refs, &mut p.stack);
                node.children_marked(DIRTY_BIT, |i, child| {
                    refs.push((i, child));
                    stack.push(child);
                    take(&mut left, child)
                })?;
            } else if dirty.blobs_added > 0 {
                for i in 0..node.count {
                    if let LeafValue::Overflow { pgno, .. } = node.leaf_entry(i)?.1 {
                        if pgno & DIRTY_BIT != 0 {
                            p.refs.push((i, pgno));
                            p.blobs.push(pgno);
                        }
                    }
                }
            }
            p.spans[(id & !DIRTY_BIT) as usize] = (start, p.refs.len() as u32);
        }
    }
    dirty.forget_spill_reads();
    let live = dirty.live_count();
    assert_eq!(
        p.pages.len() + p.blobs.len(),
        live,
        "a dirty page is unreachable"
    );
    Ok(())
}

/// Gives every dirty page its real number `real[index]` (a file page, or an
/// arena slot when `arena`): patches parents with their children's
/// numbers, txn ids and checksums, stamps every page and checksums it (a
/// file page: an arena page has none, `page::ARENA_SUM`); blobs first, then
/// tree pages children before parents (reversed pre-order), since each
/// parent records its children's checksums; then the roots. A spilled page
/// is sealed on a copy that goes to `write_spilled` with its real number
/// (a file commit writes it there; a logged commit never has spilled
/// pages).
pub(crate) fn seal_all(
    dirty: &mut DirtyPages,
    catalog: &mut Catalog,
    placement: &mut Placement,
    txn: u64,
    arena: bool,
    write_spilled: &mut dyn FnMut(u64, &[u8]) -> Result<()>,
) -> Result<()> {
    let index = |p: u64| (p & !DIRTY_BIT) as usize;
    let stamp = |b: &mut [u8], pgno: u64| {
        if arena {
            stamp_arena(b, pgno, txn)
        } else {
            seal(b, pgno, txn)
        }
    };
    let Placement {
        pages,
        blobs,
        real,
        refs,
        spans,
        sums,
        ..
    } = placement;
    sums.clear();
    sums.resize(dirty.pages.len(), 0);
    let mut scratch = Vec::new();
    for &b in blobs.iter() {
        let pgno = real[index(b)];
        sums[index(b)] =
            dirty.seal_with(b, &mut scratch, |buf| stamp(buf, pgno), &mut |sealed| {
                write_spilled(pgno, sealed)
            })?;
    }
    for (n, &id) in pages.iter().rev().enumerate() {
        if n % SPILL_READS == SPILL_READS - 1 {
            dirty.forget_spill_reads();
        }
        let (start, end) = spans[index(id)];
        let children = &refs[start as usize..end as usize];
        let sums_so_far = &*sums;
        let pgno = real[index(id)];
        let seal_page = |buf: &mut [u8]| {
            let is_leaf = page_kind(buf) == KIND_LEAF;
            for &(cell, child) in children {
                let (pgno, sum) = (real[index(child)], sums_so_far[index(child)]);
                assert!(pgno != 0, "dirty page without a real number");
                assert!(sum != 0, "child sealed after its parent");
                if is_leaf {
                    set_overflow(buf, cell, pgno, txn, sum);
                } else {
                    set_child(buf, cell, pgno, txn, sum);
                }
            }
            stamp(buf, pgno)
        };
        let sum = dirty.seal_with(id, &mut scratch, seal_page, &mut |sealed| {
            write_spilled(pgno, sealed)
        })?;
        sums[index(id)] = sum;
    }
    dirty.forget_spill_reads();
    for t in catalog.trees.iter_mut() {
        let root = &mut t.state.root;
        if root.pgno & DIRTY_BIT != 0 {
            let i = index(root.pgno);
            root.pgno = real[i];
            root.txn = txn;
            root.sum = sums[i];
        }
    }
    Ok(())
}
