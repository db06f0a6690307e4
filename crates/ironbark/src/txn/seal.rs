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
/// stop scanning a branch once it found them all (and, when their parent
/// hints fail, scans every dirty branch instead of those the hints miss).
const SMALL_COMMIT_PAGES: usize = 64;

/// Bytes of sealed blobs `seal_all` hands to its caller to write at a
/// time: well within a core's L2 cache, so that the write's copy into the
/// page cache reads what the seal's checksum just read (a bulk load of
/// 4,000-byte values seals 4 MB of blobs per commit of 1,000), and enough
/// to make each write call a long run.
pub(crate) const BLOB_CHUNK_BYTES: usize = 256 << 10;

/// What `seal_all` hands a chunk of sealed blobs to: the dirty pages, the
/// chunk's blob ids, and every dirty page's real number by index.
pub(crate) type WriteBlobs<'a> = dyn FnMut(&DirtyPages, &[u64], &[u64]) -> Result<()> + 'a;

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
    /// The pages whose parent hint names each dirty page (`order_by_hints`):
    /// for `n` dirty pages, `n + 2` words of where each page's list starts
    /// and ends, then the lists, each entry `slot << 32 | index` (one
    /// vector, since the writer moves its `Placement` at each commit).
    hint_lists: Vec<u64>,
}

impl Placement {
    /// Empties it for a transaction of `n` dirty pages.
    fn reset(&mut self, n: usize) {
        self.pages.clear();
        self.blobs.clear();
        self.refs.clear();
        self.stack.clear();
        self.spans.clear();
        self.spans.resize(n, (0, 0));
        self.real.clear();
        self.real.resize(n, 0);
    }

    /// Pages of the tree pages, and of the blobs, for a page size of
    /// `page_size`.
    pub(crate) fn page_counts(&self, dirty: &DirtyPages, page_size: usize) -> (u64, u64) {
        let blob_pages: u64 = self
            .blobs
            .iter()
            .map(|b| (dirty.get(*b).len() / page_size) as u64)
            .sum();
        (self.pages.len() as u64, blob_pages)
    }
}

/// Fills `p` with the placement of the live dirty pages (see
/// [`Placement`]); `p.real` is all zeros.
pub(crate) fn order_dirty(catalog: &Catalog, dirty: &DirtyPages, p: &mut Placement) -> Result<()> {
    let n = dirty.pages.len();
    if n == 0 {
        // No page to place (a commit of value overlays only): no root is
        // dirty, so there is no tree to walk.
        p.reset(0);
        return Ok(());
    }
    // The edges come from the descent's parent hints, checked against each
    // parent: a single put's path is then found without reading a
    // branch's children, and a batch's branches are read only where a
    // hint went stale. A small commit whose hints fail goes to the scan
    // below (which stops once it found its few pages); a larger one scans
    // only the branches whose hints failed, and the whole scan runs only
    // if a page is still unfound (a savepoint's copy, a branch's split).
    if !dirty.has_spilled() {
        let small = n <= SMALL_COMMIT_PAGES;
        if order_by_hints(catalog, dirty, p, !small)? {
            return Ok(());
        }
    }
    order_scanning(catalog, dirty, p)
}

/// `order_dirty` by a scan of each dirty branch for its dirty children.
fn order_scanning(catalog: &Catalog, dirty: &DirtyPages, p: &mut Placement) -> Result<()> {
    let n = dirty.pages.len();
    let small = n <= SMALL_COMMIT_PAGES && !dirty.has_spilled();
    p.reset(n);
    // Dirty tree pages not found yet, by kind, for a small transaction:
    // the scan of a branch for its dirty children stops once no dirty page
    // of their kind is left to find, so a single put's path is found after
    // half of each branch's children, on average. (A large transaction has
    // dirty children everywhere; counting its pages would cost a header
    // read each.)
    let mut left = small.then(|| dirty.tree_page_kinds());
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
            if p.pages.len().is_multiple_of(SPILL_READS) {
                dirty.forget_spill_reads();
            }
            let node = Node::parse(dirty.get(id), id, None)?;
            let start = p.refs.len() as u32;
            if !node.is_leaf {
                push_dirty_children(&node, p, |child| take(&mut left, child))?;
            } else if dirty.blobs_added > 0 {
                push_blob_refs(&node, p)?;
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

/// `order_dirty` from the parent hints of the pages
/// (`DirtyPages::link_child`): a page is a child of the page its hint
/// names only if that page's slot holds it. A branch with no hinted child,
/// or one whose hint fails, has its children found by a scan of it
/// (`scan_branches`), or, without, makes this give up. Returns whether
/// every live page was found (else the caller scans them all).
fn order_by_hints(
    catalog: &Catalog,
    dirty: &DirtyPages,
    p: &mut Placement,
    scan_branches: bool,
) -> Result<bool> {
    let n = dirty.pages.len();
    p.reset(n);
    let index = |id: u64| (id & !DIRTY_BIT) as usize;
    // The hinted children of each page, grouped by parent (a counting
    // sort: one pass to count, one to place).
    assert!(n <= u32::MAX as usize, "a page index fits in 32 bits");
    let parent_of = |i: usize| {
        dirty
            .parent_hint(i)
            .filter(|&(parent, _)| parent & DIRTY_BIT != 0 && index(parent) < n)
    };
    let lists = &mut p.hint_lists;
    lists.clear();
    lists.resize(n + 2, 0);
    for i in 0..n {
        if let Some((parent, _)) = parent_of(i) {
            lists[index(parent) + 2] += 1;
        }
    }
    // Starts counted from the end of the `n + 2` words.
    lists[1] = (n + 2) as u64;
    for i in 2..n + 2 {
        lists[i] += lists[i - 1];
    }
    lists.resize(lists[n + 1] as usize, 0);
    for i in 0..n {
        if let Some((parent, slot)) = parent_of(i) {
            // `lists[parent + 1]` is where the parent's next child goes;
            // once all are placed it is where its children end.
            let at = lists[index(parent) + 1] as usize;
            lists[at] = (slot as u64) << 32 | i as u64;
            lists[index(parent) + 1] += 1;
        }
    }
    lists[0] = (n + 2) as u64;
    for t in &catalog.trees {
        let root = t.state.root.pgno;
        if root & DIRTY_BIT == 0 {
            continue;
        }
        p.stack.push(root);
        while let Some(id) = p.stack.pop() {
            p.pages.push(id);
            let node = Node::parse(dirty.get(id), id, None)?;
            let start = p.refs.len() as u32;
            if !node.is_leaf {
                let (from, to) = (p.hint_lists[index(id)], p.hint_lists[index(id) + 1]);
                let children = &mut p.hint_lists[from as usize..to as usize];
                let mut linked = true;
                for &link in children.iter() {
                    let (slot, child) = ((link >> 32) as usize, DIRTY_BIT | (link as u32) as u64);
                    linked = linked && slot < node.count && node.child(slot)?.0 == child;
                }
                // A branch none links a child to may still have one (a
                // split's new page, where no descent linked it): a small
                // commit counts on the final count to find out.
                if linked && (!children.is_empty() || !scan_branches) {
                    // Last to first, as the scan pushes them, so that they
                    // are popped (and placed) in key order.
                    children.sort_unstable_by(|a, b| b.cmp(a));
                    for &link in children.iter() {
                        let child = DIRTY_BIT | (link as u32) as u64;
                        p.refs.push(((link >> 32) as usize, child));
                        p.stack.push(child);
                    }
                } else if scan_branches {
                    push_dirty_children(&node, p, |_| true)?;
                } else {
                    return Ok(false);
                }
            } else if dirty.blobs_added > 0 {
                push_blob_refs(&node, p)?;
            }
            p.spans[index(id)] = (start, p.refs.len() as u32);
        }
    }
    Ok(p.pages.len() + p.blobs.len() == dirty.live_count())
}

/// Finds branch `node`'s dirty children by a scan of its cells, records
/// their references and pushes them for the walk (last to first, so that
/// they are popped, and placed, in key order), until `more(child)` says
/// no more are to be found.
fn push_dirty_children(
    node: &Node<'_>,
    p: &mut Placement,
    mut more: impl FnMut(u64) -> bool,
) -> Result<()> {
    let (refs, stack) = (&mut p.refs, &mut p.stack);
    node.children_marked(DIRTY_BIT, |i, child| {
        refs.push((i, child));
        stack.push(child);
        more(child)
    })
}

/// Records the dirty overflow blobs leaf `node` refers to.
fn push_blob_refs(node: &Node<'_>, p: &mut Placement) -> Result<()> {
    for i in 0..node.count {
        if let LeafValue::Overflow { pgno, .. } = node.leaf_entry(i)?.1 {
            if pgno & DIRTY_BIT != 0 {
                p.refs.push((i, pgno));
                p.blobs.push(pgno);
            }
        }
    }
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
/// pages). With `write_blobs`, the blobs in memory are handed to it as
/// they are sealed, in chunks of about [`BLOB_CHUNK_BYTES`] (the
/// blobs' ids, then every page's real number by index): a file commit
/// writes them while the seal's read left them in cache, not after
/// every other page's seal.
pub(crate) fn seal_all(
    dirty: &mut DirtyPages,
    catalog: &mut Catalog,
    placement: &mut Placement,
    txn: u64,
    arena: bool,
    write_spilled: &mut dyn FnMut(u64, &[u8]) -> Result<()>,
    mut write_blobs: Option<&mut WriteBlobs<'_>>,
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
    let (mut chunk_start, mut chunk_bytes) = (0, 0);
    for (n, &b) in blobs.iter().enumerate() {
        let pgno = real[index(b)];
        sums[index(b)] = match dirty.sealed_at_put(b) {
            // Sealed as it was put (`btree::write::SealAtPut`): written as
            // it is, from the spill file if it went there.
            Some((at, sum)) => {
                assert!(!arena && at == pgno, "a blob sealed at put placed again");
                if dirty.is_spilled(b) {
                    write_spilled(pgno, dirty.get(b))?;
                }
                sum
            }
            None => dirty.seal_with(b, &mut scratch, |buf| stamp(buf, pgno), &mut |sealed| {
                write_spilled(pgno, sealed)
            })?,
        };
        if let Some(write) = write_blobs.as_mut() {
            if !dirty.is_spilled(b) {
                chunk_bytes += dirty.get(b).len();
            }
            if chunk_bytes >= BLOB_CHUNK_BYTES || n + 1 == blobs.len() {
                write(dirty, &blobs[chunk_start..=n], real)?;
                (chunk_start, chunk_bytes) = (n + 1, 0);
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::overlay::MAX_OVERLAY_VALUE;

    /// The pages of a placement, each with its references, for comparing
    /// two placements as sets.
    fn edges(p: &Placement) -> Vec<(u64, Vec<(usize, u64)>)> {
        let mut out: Vec<(u64, Vec<(usize, u64)>)> = p
            .pages
            .iter()
            .map(|&id| {
                let (start, end) = p.spans[(id & !DIRTY_BIT) as usize];
                let mut refs = p.refs[start as usize..end as usize].to_vec();
                refs.sort_unstable();
                (id, refs)
            })
            .collect();
        out.sort_unstable();
        out
    }

    fn key(i: u64) -> Vec<u8> {
        format!("key{i:010}").into_bytes()
    }

    /// A database in `dir` whose tree "t" holds the keys `key(i * step)`
    /// for `i` below `count`, with values of 60 bytes, committed.
    fn loaded(dir: &std::path::Path, count: u64, step: u64) -> crate::Database {
        let db = crate::Database::open(dir.join("h.ib")).unwrap();
        let mut tx = db.begin_write().unwrap();
        let t = tx.open_tree("t").unwrap();
        for i in 0..count {
            tx.put(&t, &key(i * step), &[1; 60]).unwrap();
        }
        tx.commit().unwrap();
        db
    }

    /// A xorshift generator from `state` (not 0).
    fn xorshift(mut state: u64) -> impl FnMut() -> u64 {
        move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        }
    }

    /// One random change of key `k` by `choice`: a delete one time in
    /// `deletes`, else a put of a 300-byte value (as often) or of a 60-byte
    /// one.
    fn change(tx: &mut crate::WriteTxn<'_>, t: &crate::Tree, k: &[u8], choice: u64, deletes: u64) {
        match choice % deletes {
            0 => {
                tx.delete(t, k).unwrap();
            }
            1 => tx.put(t, k, &[2; 300]).unwrap(),
            _ => tx.put(t, k, &[3; 60]).unwrap(),
        }
    }

    /// Small transactions of puts (splits on the way), deletes (merges)
    /// and savepoint rollbacks (copies of frozen pages): wherever the
    /// parent hints find every page, they find the same pages and
    /// references as the scan of every dirty branch; and a single put
    /// into a tree of three levels is found by its hints.
    #[test]
    fn hints_give_the_scans_placement_or_defer_to_it() {
        let dir = tempfile::tempdir().unwrap();
        let db = loaded(dir.path(), 30_000, 2);
        let mut next = xorshift(7);
        let (mut by_hints, mut scanned) = (0, 0);
        for round in 0..300 {
            let mut tx = db.begin_write().unwrap();
            let t = tx.tree("t").unwrap();
            let ops = 1 + next() % 12;
            let sp = (round % 5 == 0).then(|| tx.savepoint().unwrap());
            for _ in 0..ops {
                let k = key(next() % 60_000);
                let choice = next();
                change(&mut tx, &t, &k, choice, 4);
            }
            if let Some(sp) = sp {
                if round % 10 == 0 {
                    tx.rollback_to(&sp).unwrap();
                    tx.put(&t, &key(next() % 60_000), &[4; 60]).unwrap();
                }
            }
            let mut hinted = Placement::default();
            if tx.dirty.pages.len() <= SMALL_COMMIT_PAGES
                && order_by_hints(&tx.catalog, &tx.dirty, &mut hinted, false).unwrap()
            {
                by_hints += 1;
                let mut scan = Placement::default();
                // The scan alone: as `order_dirty` does when hints fail.
                order_scanning(&tx.catalog, &tx.dirty, &mut scan).unwrap();
                assert_eq!(edges(&hinted), edges(&scan), "round {round}");
                assert_eq!(hinted.blobs.len(), scan.blobs.len(), "round {round}");
            } else {
                scanned += 1;
            }
            tx.commit().unwrap();
        }
        // (Inserts into the loaded leaves, full, split them: those fall
        // back to the scan. 99 of 300 go by hints with this seed.)
        assert!(
            by_hints >= 50,
            "{by_hints} placements by hints, {scanned} scanned"
        );
        db.check().unwrap();
        let mut tx = db.begin_write().unwrap();
        let t = tx.tree("t").unwrap();
        // Longer than an overlay takes: the put copies its path.
        tx.put(&t, &key(1), &[5; MAX_OVERLAY_VALUE + 1]).unwrap();
        assert!(tx.root(&t).unwrap().depth >= 3);
        let mut p = Placement::default();
        assert!(order_by_hints(&tx.catalog, &tx.dirty, &mut p, false).unwrap());
        assert_eq!(p.pages.len(), tx.root(&t).unwrap().depth as usize);
    }

    /// Batches of hundreds of random puts (leaves and branches split),
    /// deletes (merges) and savepoint rollbacks: the parent hints, with a
    /// scan of each branch whose hints fail, find the same pages and
    /// references as the scan of every dirty branch, and find them all in
    /// most batches (a branch's split or a rollback may leave one unfound:
    /// then `order_dirty` scans).
    #[test]
    fn hints_with_branch_scans_give_the_scans_placement_for_large_batches() {
        let dir = tempfile::tempdir().unwrap();
        let db = loaded(dir.path(), 40_000, 3);
        let mut next = xorshift(11);
        let (mut by_hints, mut unfound) = (0, 0);
        for round in 0..60 {
            let mut tx = db.begin_write().unwrap();
            let t = tx.tree("t").unwrap();
            let ops = 100 + next() % 1_500;
            // With a savepoint taken, no put is an overlay's (`txn::overlaid`):
            // every change is a page copied.
            let _copies = tx.savepoint().unwrap();
            let sp = (round % 6 == 0).then(|| tx.savepoint().unwrap());
            for op in 0..ops {
                let k = key(next() % 120_000);
                let choice = next();
                change(&mut tx, &t, &k, choice, 5);
                if op == ops / 2 {
                    if let Some(sp) = &sp {
                        tx.rollback_to(sp).unwrap();
                    }
                }
            }
            assert!(tx.dirty.pages.len() > SMALL_COMMIT_PAGES, "round {round}");
            let mut hinted = Placement::default();
            if order_by_hints(&tx.catalog, &tx.dirty, &mut hinted, true).unwrap() {
                by_hints += 1;
                let mut scan = Placement::default();
                order_scanning(&tx.catalog, &tx.dirty, &mut scan).unwrap();
                assert_eq!(edges(&hinted), edges(&scan), "round {round}");
                assert_eq!(hinted.blobs.len(), scan.blobs.len(), "round {round}");
                assert_eq!(hinted.pages.len(), scan.pages.len(), "round {round}");
            } else {
                unfound += 1;
            }
            tx.commit().unwrap();
        }
        assert!(
            by_hints >= 40,
            "{by_hints} batches placed by hints, {unfound} left to the scan"
        );
        assert!(db.check().unwrap().is_clean());
    }
}
