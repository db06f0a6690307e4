//! Point lookups: descend from the root to the leaf that may hold a key.
//! No allocation, no lock, no system call: only page resolution and
//! bounds-checked reads.

use crate::btree::page::{blob_data, prefetch_blob_start, prefetch_page, LeafValue, Node, Reads};
use crate::btree::MAX_DEPTH;
use crate::error::{Error, Result};
use crate::pages::{expected_txn, Inserts, PageSource};
use crate::storage::arena::ARENA_BIT;
use crate::storage::overlay::{Insert, Overlaid, MAX_ENTRIES};

/// Where a tree starts: its root page (0 for an empty tree), the txn that
/// wrote it, its checksum, and the number of levels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) struct Root {
    pub(crate) pgno: u64,
    pub(crate) txn: u64,
    pub(crate) sum: u64,
    pub(crate) depth: u32,
}

impl Root {
    pub(crate) fn is_empty(&self) -> bool {
        self.pgno == 0
    }
}

/// Reads a tree page at the given level (1 = leaf), checking its kind;
/// `reads` says what the caller will read of it.
#[inline(always)]
pub(crate) fn node_at<'a, S: PageSource + ?Sized>(
    src: &'a S,
    pgno: u64,
    txn: u64,
    level: u32,
    reads: Reads,
) -> Result<Node<'a>> {
    let page = src.page(pgno)?;
    // A branch's slot array may be wider than a leaf's.
    let reads = match reads {
        Reads::Search if level > 1 => Reads::Branch,
        other => other,
    };
    prefetch_page(page, reads);
    node_in(page, pgno, txn, level)
}

/// `node_at` of a page already resolved (and asked for).
#[inline(always)]
fn node_in(page: &[u8], pgno: u64, txn: u64, level: u32) -> Result<Node<'_>> {
    let node = Node::parse(page, pgno, expected_txn(pgno, txn))?;
    if node.is_leaf != (level == 1) {
        return Err(Error::corrupted_page(
            pgno,
            format!("page kind does not match its level {level} in the tree"),
        ));
    }
    Ok(node)
}

/// Checks a root before descending from it.
pub(crate) fn check_root(root: Root) -> Result<()> {
    if root.depth == 0 || root.depth as usize > MAX_DEPTH {
        return Err(Error::corrupted_page(
            root.pgno,
            format!("tree depth {} out of range", root.depth),
        ));
    }
    Ok(())
}

/// The leaf that holds `key`'s range.
#[inline]
pub(crate) fn find_leaf<'a, S: PageSource + ?Sized>(
    src: &'a S,
    root: Root,
    key: &[u8],
) -> Result<Node<'a>> {
    let (pgno, txn) = leaf_ref(src, root, key)?;
    // Its overlay's lines, if any, are read after the leaf's search: asked
    // for first, their miss overlaps the leaf's.
    src.prefetch_overlay(pgno);
    node_at(src, pgno, txn, 1, Reads::Search)
}

/// The page number and txn of the leaf that holds `key`'s range, read
/// from its parent (the root itself in a tree of one leaf): the leaf is
/// not read, so that a caller may start other loads it will need with
/// the leaf's (`txn::overlaid`: the leaf's overlay).
#[inline]
pub(crate) fn leaf_ref<S: PageSource + ?Sized>(
    src: &S,
    root: Root,
    key: &[u8],
) -> Result<(u64, u64)> {
    check_root(root)?;
    let (mut pgno, mut txn) = (root.pgno, root.txn);
    for level in (2..=root.depth).rev() {
        let node = node_at(src, pgno, txn, level, Reads::Search)?;
        let i = node.search_branch(key)?;
        ask_for_hinted_child(src, &node, i, level);
        (pgno, txn) = node.child(i)?;
    }
    Ok((pgno, txn))
}

/// Asks for the lines a descent will read first of child `i` of `node`
/// (at `level`), by the page number its slot hints (a hinted branch,
/// `btree::page::KIND_HINTED_BRANCH`): they are then on their way while
/// the branch's cell, which gives the number the descent goes on with, is
/// read. A wrong hint (damage) costs a few useless loads, nothing else.
#[inline(always)]
pub(crate) fn ask_for_hinted_child<S: PageSource + ?Sized>(
    src: &S,
    node: &Node<'_>,
    i: usize,
    level: u32,
) {
    if let Some(page) = node.child_hint(i).and_then(|hint| src.page(hint).ok()) {
        let reads = if level == 2 {
            Reads::Search
        } else {
            Reads::Branch
        };
        prefetch_page(page, reads);
    }
}

/// The most keys whose descents [`prefetch_descents`] walks together: a
/// level of 16 keys has as many misses in flight as the core's fill
/// buffers take (10-16 on x86), and their pages' lines stay well within
/// the L1 and L2 caches until the keys' own descents read them.
pub(crate) const DESCENT_BATCH: usize = 16;

/// Walks the descents of `keys` (at most [`DESCENT_BATCH`]) into the tree
/// at `root` a level at a time, each level for every key before the next,
/// asking for each page a level before it is read (`Reads::Ahead`): the
/// keys' cache misses then overlap, where descents made one after another
/// wait for each in turn. Each leaf's slot array is searched for its key
/// too, to ask for the cell the search will read; `leaf_known` gets each leaf's
/// number as soon as the level above gives it, and `at_leaf` in the
/// leaves' round, so that the caller may ask for what else it will read
/// of the leaf. Sets `leaves[i]` to the (page number, txn) of `keys[i]`'s
/// leaf, as `leaf_ref` would give it, or `None` where a page on the way
/// did not parse (the key's own descent reports the damage). Reads only:
/// what follows is the same with or without it.
pub(crate) fn prefetch_descents<S: PageSource + ?Sized>(
    src: &S,
    root: Root,
    keys: &[&[u8]],
    leaves: &mut [Option<(u64, u64)>],
    leaf_known: impl Fn(u64),
    at_leaf: impl Fn(u64),
) {
    let n = keys.len().min(leaves.len()).min(DESCENT_BATCH);
    leaves[..n].fill(None);
    let Ok(root_page) = check_root(root).and_then(|()| src.page(root.pgno)) else {
        return;
    };
    prefetch_page(root_page, Reads::Search);
    // Each key's next page, resolved once: asked for in one round, read
    // in the next.
    let mut pages = [root_page; DESCENT_BATCH];
    leaves[..n].fill(Some((root.pgno, root.txn)));
    if root.depth == 1 {
        leaf_known(root.pgno);
    }
    for level in (2..=root.depth).rev() {
        for ((key, at), page) in keys[..n].iter().zip(&mut leaves[..n]).zip(&mut pages) {
            let Some((pgno, txn)) = *at else {
                continue;
            };
            let child = node_in(page, pgno, txn, level)
                .and_then(|node| node.child(node.search_branch(key)?));
            *at = None;
            if let Ok((child, child_txn)) = child {
                if let Ok(child_page) = src.page(child) {
                    let reads = if level == 2 {
                        Reads::LeafAhead
                    } else {
                        Reads::Ahead
                    };
                    prefetch_page(child_page, reads);
                    *page = child_page;
                    *at = Some((child, child_txn));
                    if level == 2 {
                        leaf_known(child);
                    }
                }
            }
        }
    }
    for ((key, at), page) in keys[..n].iter().zip(&leaves[..n]).zip(&pages) {
        if let Some((pgno, txn)) = *at {
            at_leaf(pgno);
            if let Ok(leaf) = node_in(page, pgno, txn, 1) {
                leaf.prefetch_search(key);
            }
        }
    }
}

/// The value stored under `key`, borrowed from the source.
pub(crate) fn get<'a, S: PageSource + ?Sized>(
    src: &'a S,
    root: Root,
    key: &[u8],
) -> Result<Option<&'a [u8]>> {
    if root.is_empty() {
        return Ok(None);
    }
    let leaf = find_leaf(src, root, key)?;
    match leaf.search_leaf(key)? {
        Ok(i) => match leaf_entry_seen(src, &leaf, i)? {
            Some((_, value)) => resolve_value(src, value).map(Some),
            None => Ok(None),
        },
        Err(_) => inserted_value(src, &leaf, key),
    }
}

/// Whether the tree holds `key`: `get` without reading the value.
pub(crate) fn contains<S: PageSource + ?Sized>(src: &S, root: Root, key: &[u8]) -> Result<bool> {
    if root.is_empty() {
        return Ok(false);
    }
    let leaf = find_leaf(src, root, key)?;
    match leaf.search_leaf(key)? {
        Ok(i) => Ok(!is_deleted(src, &leaf, i)?),
        Err(_) => Ok(inserted_value(src, &leaf, key)?.is_some()),
    }
}

/// The value `leaf`'s overlay gives `key`, a key its cells lack, if it
/// inserts it (`storage::overlay`): one compare for a leaf that cannot
/// have an overlay, one look at the overlay's first line for one without
/// inserts.
#[inline(always)]
pub(crate) fn inserted_value<'a, S: PageSource + ?Sized>(
    src: &'a S,
    leaf: &Node<'a>,
    key: &[u8],
) -> Result<Option<&'a [u8]>> {
    if !may_be_overlaid(src, leaf.pgno) {
        return Ok(None);
    }
    src.inserted_value(leaf.pgno, key)
}

/// Entry `i` of `leaf` as `src` sees it: the key, and the value a value
/// overlay gives it if its leaf has one (`storage::overlay`), else the
/// cell's; `None` if the overlay deletes
/// the entry.
#[inline(always)]
pub(crate) fn leaf_entry_seen<'a, S: PageSource + ?Sized>(
    src: &'a S,
    leaf: &Node<'a>,
    i: usize,
) -> Result<Option<(&'a [u8], LeafValue<'a>)>> {
    let (key, value) = leaf.leaf_entry(i)?;
    if may_be_overlaid(src, leaf.pgno) {
        match src.overlay(leaf.pgno, i)? {
            Some(Overlaid::Value(v)) => return Ok(Some((key, LeafValue::Inline(v)))),
            Some(Overlaid::Deleted) => return Ok(None),
            None => {}
        }
    }
    Ok(Some((key, value)))
}

/// Whether `src` sees entry `i` of `leaf` deleted by its overlay.
#[inline(always)]
pub(crate) fn is_deleted<S: PageSource + ?Sized>(
    src: &S,
    leaf: &Node<'_>,
    i: usize,
) -> Result<bool> {
    Ok(may_be_overlaid(src, leaf.pgno)
        && matches!(src.overlay(leaf.pgno, i)?, Some(Overlaid::Deleted)))
}

/// Whether committed leaf `pgno` may have a value overlay in `src`: an
/// arena leaf, or a file leaf where the source's span gave any file leaf
/// one (`storage::arena::FileOverlays`). Else a look-up is skipped.
#[inline(always)]
pub(crate) fn may_be_overlaid<S: PageSource + ?Sized>(src: &S, pgno: u64) -> bool {
    pgno & ARENA_BIT != 0 || src.file_leaf_overlays()
}

/// How many entries of `leaf` the source sees: its cell count, less its
/// overlay's deletes, plus its overlay's inserts.
pub(crate) fn live_entries<S: PageSource + ?Sized>(src: &S, leaf: &Node<'_>) -> Result<usize> {
    if !may_be_overlaid(src, leaf.pgno) {
        return Ok(leaf.count);
    }
    let mut inserts: Inserts<'_> = [Insert::default(); MAX_ENTRIES];
    let inserted = src.inserted(leaf.pgno, &mut inserts)?;
    Ok(leaf.count - src.deleted_between(leaf.pgno, 0, leaf.count)? + inserted)
}

/// The bytes of a leaf value, following an overflow reference.
#[inline]
pub(crate) fn resolve_value<'a, S: PageSource + ?Sized>(
    src: &'a S,
    value: LeafValue<'a>,
) -> Result<&'a [u8]> {
    match value {
        LeafValue::Inline(v) => Ok(v),
        LeafValue::Overflow { pgno, txn, len, .. } => {
            let run = src.blob_run(pgno)?;
            // The caller reads the value this returns.
            prefetch_blob_start(run);
            blob_data(run, pgno, expected_txn(pgno, txn), Some(len))
        }
    }
}
