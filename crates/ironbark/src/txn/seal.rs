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

use crate::btree::page::{seal, set_child, set_overflow, LeafValue, Node, DIRTY_BIT};
use crate::catalog::Catalog;
use crate::error::Result;
use crate::pages::DirtyPages;

/// The live dirty tree pages in pre-order (so leaves land in key order) and
/// the dirty blobs they reference.
pub(crate) fn order_dirty(catalog: &Catalog, dirty: &DirtyPages) -> Result<(Vec<u64>, Vec<u64>)> {
    let mut order = Vec::new();
    let mut blobs = Vec::new();
    let mut stack = Vec::new();
    for t in &catalog.trees {
        if t.state.root.pgno & DIRTY_BIT != 0 {
            stack.push(t.state.root.pgno);
        }
        while let Some(id) = stack.pop() {
            order.push(id);
            let node = Node::parse(dirty.get(id), id, None)?;
            if node.is_leaf && dirty.blobs_added == 0 {
                continue;
            }
            for i in (0..node.count).rev() {
                let child = if node.is_leaf {
                    match node.leaf_entry(i)?.1 {
                        LeafValue::Overflow { pgno, .. } => pgno,
                        LeafValue::Inline(_) => continue,
                    }
                } else {
                    node.child(i)?.0
                };
                if child & DIRTY_BIT == 0 {
                    continue;
                }
                if node.is_leaf {
                    blobs.push(child);
                } else {
                    stack.push(child);
                }
            }
        }
    }
    let live = dirty.pages.iter().filter(|p| p.is_some()).count();
    assert_eq!(
        order.len() + blobs.len(),
        live,
        "a dirty page is unreachable"
    );
    Ok((order, blobs))
}

/// Replaces provisional numbers in dirty page `id` with real ones and the
/// checksums of the (already sealed) children, then stamps and checksums it.
/// Returns its checksum.
fn patch_and_seal(
    dirty: &mut DirtyPages,
    id: u64,
    real: &[u64],
    sums: &[u64],
    txn: u64,
) -> Result<u64> {
    let real_of = |p: u64| real[(p & !DIRTY_BIT) as usize];
    let sum_of = |p: u64| sums[(p & !DIRTY_BIT) as usize];
    let node = Node::parse(dirty.get(id), id, None)?;
    let mut patches = Vec::new();
    let scan = !node.is_leaf || dirty.blobs_added > 0;
    for i in (0..node.count).filter(|_| scan) {
        let target = if node.is_leaf {
            match node.leaf_entry(i)?.1 {
                LeafValue::Overflow { pgno, .. } => pgno,
                LeafValue::Inline(_) => continue,
            }
        } else {
            node.child(i)?.0
        };
        if target & DIRTY_BIT != 0 {
            patches.push((i, real_of(target), sum_of(target)));
        }
    }
    let is_leaf = node.is_leaf;
    let buf = dirty.get_mut(id);
    for (i, pgno, sum) in patches {
        assert!(pgno != 0, "dirty page without a real number");
        assert!(sum != 0, "child sealed after its parent");
        if is_leaf {
            set_overflow(buf, i, pgno, txn, sum);
        } else {
            set_child(buf, i, pgno, txn, sum);
        }
    }
    Ok(seal(buf, real_of(id), txn))
}

/// Gives every dirty page its real number `real[index]` (a file page or an
/// arena slot): patches parents, stamps and checksums every page, blobs
/// first, then tree pages children before parents (reversed pre-order),
/// since each parent records its children's checksums; then the roots.
pub(crate) fn seal_all(
    dirty: &mut DirtyPages,
    catalog: &mut Catalog,
    order: &[u64],
    blobs: &[u64],
    real: &[u64],
    txn: u64,
) -> Result<()> {
    let mut sums = vec![0u64; dirty.pages.len()];
    for &b in blobs {
        let i = (b & !DIRTY_BIT) as usize;
        sums[i] = seal(dirty.get_mut(b), real[i], txn);
    }
    for &id in order.iter().rev() {
        sums[(id & !DIRTY_BIT) as usize] = patch_and_seal(dirty, id, real, &sums, txn)?;
    }
    for t in catalog.trees.iter_mut() {
        let root = &mut t.state.root;
        if root.pgno & DIRTY_BIT != 0 {
            let i = (root.pgno & !DIRTY_BIT) as usize;
            root.pgno = real[i];
            root.txn = txn;
            root.sum = sums[i];
        }
    }
    Ok(())
}
