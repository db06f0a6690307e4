//! The split of a committed leaf by a put, in one pass: the two halves
//! are written straight from the leaf's cells, its value overlay's
//! entries (`storage::overlay`) and the new key's cell.
//!
//! The usual way copies the leaf into a dirty page, applies the overlay
//! to the copy (each insert a search and a move of the slots after it),
//! finds that the new key does not fit, copies the page again to read it
//! back, and fills the halves: about 21,000 instructions in seed 003's
//! small transactions, whose splits hold some 32 cells, about 20 of them
//! the overlay's inserts, against 15,000 here (docs/benchmarks.md,
//! session 43). This path lists the cells in key order once and fills
//! each half from where their bytes lie.
//!
//! Invariant: the halves hold exactly the cells the usual way's halves
//! would (the leaf's cells with the overlay's newest values, less its
//! tombstoned cells, plus its inserts and the new key, in order), split
//! at the same place (by bytes, in the middle). Anything the usual way
//! would report as damage (an entry that does not fit its leaf, an
//! insert of a key the leaf holds) is left to it: this path then changes
//! nothing and says so.

use std::cell::RefCell;
use std::cmp::Ordering;

use crate::btree::page::{
    compare_keys, leaf_cell_header, slotted_size, split_point, CellParts, LeafValue, Node,
    HEADER_LEN, LEAF_CELL_HEADER, OVERFLOW_REF_LEN,
};
use crate::error::Result;
use crate::pages::DirtyPages;
use crate::storage::overlay::{Insert, Overlaid, OverlayPage, MAX_ENTRIES};

/// One cell of the leaf being rebuilt, in key order.
#[derive(Clone, Copy, Debug)]
struct Listed {
    /// `FROM_LEAF` (a cell of the committed leaf) or the index of an
    /// insert (the overlay's, or the new key's) in the sorted list.
    source: u8,
    /// A leaf cell's newest overlaid value: its index in the list of
    /// newest entries, or `NO_VALUE` (the cell as it is).
    value: u8,
    /// A leaf cell's offset in the page, and the bytes of its header and
    /// key.
    offset: u16,
    head: u16,
    /// The cell's bytes.
    len: u16,
}

const FROM_LEAF: u8 = u8::MAX;
const NO_VALUE: u8 = u8::MAX;

thread_local! {
    /// The listed cells of the split in progress (no buffer per split).
    static LISTED: RefCell<Vec<Listed>> = const { RefCell::new(Vec::new()) };
}

/// The halves of a split: the left one (which takes the leaf's place in
/// its parent), the separator key, and the right one.
pub(crate) struct Halves {
    pub(crate) left: u64,
    pub(crate) separator: Vec<u8>,
    pub(crate) right: u64,
}

/// Splits committed leaf `leaf` (its overlay `overlay`, if it has one)
/// while putting the new `key` with the inline `value`, into two new
/// dirty pages of `page_size` bytes. `None`, with nothing changed, when
/// the usual way should take the put: the key is in the leaf's cells or
/// among the overlay's inserts, everything fits one page, or an entry
/// does not fit the leaf (damage, which the usual way reports).
pub(crate) fn split_committed_leaf<'a>(
    leaf: &Node<'a>,
    overlay: Option<&OverlayPage<'a>>,
    key: &[u8],
    value: &[u8],
    dirty: &mut DirtyPages,
    page_size: usize,
) -> Result<Option<Halves>> {
    debug_assert!(leaf.is_leaf);
    // The overlay's newest value or tombstone of each cell, by index.
    let mut newest = [(0u16, Overlaid::Deleted); MAX_ENTRIES];
    let mut n_newest = 0;
    // Its inserts and the new key, sorted by key.
    let mut inserts = [Insert::default(); MAX_ENTRIES + 1];
    let mut n_inserts = 0;
    if let Some(overlay) = overlay {
        n_newest = overlay.newest_entries(u64::MAX, &mut newest)?;
        let mut overlaid = [Insert::default(); MAX_ENTRIES];
        n_inserts = overlay.inserts(u64::MAX, &mut overlaid)?;
        inserts[..n_inserts].copy_from_slice(&overlaid[..n_inserts]);
    }
    inserts[n_inserts] = Insert {
        entry: FROM_LEAF,
        key,
        value,
    };
    n_inserts += 1;
    let newest = &mut newest[..n_newest];
    newest.sort_unstable_by_key(|e| e.0);
    let inserts = &mut inserts[..n_inserts];
    // Insertion sort: a few dozen at most, mostly in order.
    for i in 1..inserts.len() {
        let mut j = i;
        while j > 0 && compare_keys(inserts[j - 1].key, inserts[j].key) == Ordering::Greater {
            inserts.swap(j - 1, j);
            j -= 1;
        }
    }
    let mut headers = [[0u8; LEAF_CELL_HEADER]; MAX_ENTRIES + 1];
    for (h, insert) in headers.iter_mut().zip(inserts.iter()) {
        *h = leaf_cell_header(insert.key.len(), insert.value.len() as u64, false);
    }

    LISTED.with(|listed| {
        let mut listed = listed.borrow_mut();
        listed.clear();
        if !list_cells(leaf, newest, inserts, &mut listed)? {
            return Ok(None);
        }
        let total: usize = listed.iter().map(|c| slotted_size(c.len.into())).sum();
        if HEADER_LEN + total <= page_size {
            return Ok(None);
        }
        let n = listed.len();
        debug_assert!(n >= 2, "a page that overflows holds two cells");
        // Split by bytes in the middle, as `TreeWriter::split` does: both
        // halves fit (`split_point`).
        let k = split_point(
            n,
            |i| slotted_size(listed[i].len.into()),
            total,
            page_size - HEADER_LEN,
        );
        let bytes = leaf.bytes;
        let parts = |c: &Listed| -> CellParts<'_> {
            let (offset, head, len) = (
                usize::from(c.offset),
                usize::from(c.head),
                usize::from(c.len),
            );
            match (c.source, c.value) {
                (FROM_LEAF, NO_VALUE) => [&bytes[offset..offset + len], &[], &[]],
                (FROM_LEAF, v) => match newest[usize::from(v)].1 {
                    Overlaid::Value(v) => [&bytes[offset..offset + head], v, &[]],
                    Overlaid::Deleted => unreachable!("a tombstoned cell is not listed"),
                },
                (i, _) => {
                    let i = usize::from(i);
                    [&headers[i][..], inserts[i].key, inserts[i].value]
                }
            }
        };
        let key_of = |c: &Listed| -> &[u8] {
            match c.source {
                FROM_LEAF => {
                    let at = usize::from(c.offset) + LEAF_CELL_HEADER;
                    &bytes[at..usize::from(c.offset) + usize::from(c.head)]
                }
                i => inserts[usize::from(i)].key,
            }
        };
        let separator = shortest_separator(key_of(&listed[k - 1]), key_of(&listed[k])).to_vec();
        let right = dirty.add_page_parts(page_size, true, n - k, |i| parts(&listed[k + i]));
        let left = dirty.add_page_parts(page_size, true, k, |i| parts(&listed[i]));
        Ok(Some(Halves {
            left,
            separator,
            right,
        }))
    })
}

/// Lists the cells of `leaf` with the overlay's `newest` entries (sorted
/// by index) applied and its `inserts` (with the new key, sorted by key)
/// merged in, in key order. `false` where the usual way must take the
/// put: an entry for a cell the leaf lacks or of another length, a
/// tombstone for every cell, or two cells of one key.
fn list_cells(
    leaf: &Node<'_>,
    newest: &[(u16, Overlaid<'_>)],
    inserts: &[Insert<'_>],
    listed: &mut Vec<Listed>,
) -> Result<bool> {
    let base = leaf.bytes.as_ptr() as usize;
    let mut next_entry = newest.iter().enumerate().peekable();
    let mut next_insert = 0;
    let mut deleted = 0;
    let mut push_inserts_below = |cell_key: Option<&[u8]>, listed: &mut Vec<Listed>| {
        while let Some(insert) = inserts.get(next_insert) {
            let order = cell_key.map_or(Ordering::Less, |k| compare_keys(insert.key, k));
            if order == Ordering::Greater {
                break;
            }
            let repeated = next_insert > 0 && inserts[next_insert - 1].key == insert.key;
            if order == Ordering::Equal || repeated {
                return false;
            }
            listed.push(Listed {
                source: next_insert as u8,
                value: NO_VALUE,
                offset: 0,
                head: 0,
                len: (LEAF_CELL_HEADER + insert.key.len() + insert.value.len()) as u16,
            });
            next_insert += 1;
        }
        true
    };
    for i in 0..leaf.count {
        let (key, stored) = leaf.leaf_entry(i)?;
        if !push_inserts_below(Some(key), listed) {
            return Ok(false);
        }
        // The cell is its header, its key and its body, back to back.
        let body = match stored {
            LeafValue::Inline(v) => v.len(),
            LeafValue::Overflow { .. } => OVERFLOW_REF_LEN,
        };
        let head = LEAF_CELL_HEADER + key.len();
        let offset = key.as_ptr() as usize - LEAF_CELL_HEADER - base;
        let len = head + body;
        let mut value = NO_VALUE;
        if let Some(&(e, &(index, what))) = next_entry.peek() {
            if usize::from(index) < i {
                // An entry for an index listed already: two of one index
                // (`newest_entries` gives one each), or out of order.
                return Ok(false);
            }
            if usize::from(index) == i {
                next_entry.next();
                match (stored, what) {
                    (LeafValue::Inline(old), Overlaid::Value(v)) if old.len() == v.len() => {
                        value = e as u8;
                    }
                    (LeafValue::Inline(_), Overlaid::Deleted) => {
                        deleted += 1;
                        continue;
                    }
                    _ => return Ok(false),
                }
            }
        }
        listed.push(Listed {
            source: FROM_LEAF,
            value,
            offset: offset as u16,
            head: head as u16,
            len: len as u16,
        });
    }
    if next_entry.next().is_some() || (deleted >= leaf.count && leaf.count > 0) {
        // An entry past the leaf's cells, or tombstones for all of them.
        return Ok(false);
    }
    Ok(push_inserts_below(None, listed))
}

/// The shortest key `s` with `left < s <= right` (`left < right`): a
/// separator between two halves that keeps branches small.
pub(crate) fn shortest_separator<'k>(left: &[u8], right: &'k [u8]) -> &'k [u8] {
    debug_assert!(left < right);
    let common = left.iter().zip(right).take_while(|(a, b)| a == b).count();
    &right[..(common + 1).min(right.len())]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btree::page::tests::Rng;
    use crate::btree::page::{fill_page, leaf_cell_inline, DIRTY_BIT};
    use crate::btree::write::apply_overlay;
    use crate::storage::arena::{Arena, ArenaSpace};

    const PAGE: usize = 4096;

    /// 1 to `max` random bytes.
    fn bytes(rng: &mut Rng, max: u64) -> Vec<u8> {
        let len = 1 + rng.below(max) as usize;
        exactly(rng, len)
    }

    fn exactly(rng: &mut Rng, len: usize) -> Vec<u8> {
        (0..len).map(|_| rng.below(256) as u8).collect()
    }

    fn key(i: u64) -> Vec<u8> {
        format!("k{i:05}").into_bytes()
    }

    fn cells_of_page(page: &[u8]) -> Vec<Vec<u8>> {
        let node = Node::parse(page, DIRTY_BIT, None).unwrap();
        (0..node.count)
            .map(|i| node.cell(i).unwrap().to_vec())
            .collect()
    }

    /// Random leaves with random overlays (same-length values, tombstones,
    /// inserts that fit beside the cells) and a new key: the one-pass
    /// split's halves hold, in order, exactly the cells that a copy of the
    /// leaf with the overlay applied would hold with the new key's cell,
    /// split where `TreeWriter::split` splits them (by bytes, in the
    /// middle), with a separator between the halves; a leaf with room for
    /// the key, or a key the leaf or its overlay holds, is declined.
    #[test]
    fn a_split_in_one_pass_holds_the_cells_a_copy_would() {
        let arena = Arena::new(PAGE, 64 * PAGE).unwrap();
        let mut space = ArenaSpace::default();
        let leaf = space.alloc(&arena, 1, u64::MAX, 1, false).unwrap().pgno();
        let unit = space.alloc_overlay(&arena, leaf, 0, 0, u64::MAX).unwrap();
        let overlay = arena.attach_overlay(leaf, unit);
        let empty = overlay.mark();
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let (mut splits, mut declined) = (0, 0);
        for case in 0..2_000 {
            // Cells of even keys, 60-100% of the page.
            let mut cells = Vec::new();
            let mut used = HEADER_LEN;
            let mut next = rng.below(50);
            let fill = PAGE * (75 + rng.below(26) as usize) / 100;
            loop {
                let value = bytes(&mut rng, 120);
                let cell = leaf_cell_inline(&key(2 * next), &value);
                if used + cell.len() + 6 > fill {
                    break;
                }
                used += cell.len() + 6;
                cells.push(cell);
                next += 1 + rng.below(3);
            }
            let mut page = vec![0u8; PAGE];
            fill_page(&mut page, true, &cells);
            let node = Node::parse(&page, 7, None).unwrap();
            let keys: Vec<Vec<u8>> = (0..node.count)
                .map(|i| node.key(i).unwrap().to_vec())
                .collect();
            // The overlay: values and tombstones of random cells, inserts of
            // odd keys, as long as the inserts fit beside the cells.
            overlay.cut(empty);
            let (mut deleted, mut inserted) = (0, Vec::new());
            let mut room = used;
            for _ in 0..10 + rng.below(30) {
                match rng.below(10) {
                    0 | 1 => {
                        let i = rng.below(node.count as u64) as usize;
                        let LeafValue::Inline(old) = node.leaf_entry(i).unwrap().1 else {
                            unreachable!()
                        };
                        let v = exactly(&mut rng, old.len());
                        if !overlay.append(i as u16, Overlaid::Value(&v), 1) {
                            break;
                        }
                    }
                    2 if deleted + 2 < node.count => {
                        let i = rng.below(node.count as u64) as u16;
                        let mut newest = [(0u16, Overlaid::Deleted); MAX_ENTRIES];
                        let n = overlay.newest_entries(u64::MAX, &mut newest).unwrap();
                        if newest[..n].iter().any(|e| e.0 == i) {
                            continue;
                        }
                        if !overlay.append(i, Overlaid::Deleted, 1) {
                            break;
                        }
                        deleted += 1;
                    }
                    _ => {
                        let k = key(2 * rng.below(next + 2) + 1);
                        let v = bytes(&mut rng, 100);
                        let cell_room = LEAF_CELL_HEADER + k.len() + v.len() + 6;
                        if inserted.contains(&k) || room + cell_room > PAGE {
                            continue;
                        }
                        if !overlay.append_insert(&k, &v, 1) {
                            break;
                        }
                        room += cell_room;
                        inserted.push(k);
                    }
                }
            }
            // The usual way's cells: a copy with the overlay applied, and
            // the new key's cell in its place.
            let mut copy = page.clone();
            apply_overlay(&mut copy, DIRTY_BIT, &overlay).unwrap();
            let mut expected = cells_of_page(&copy);
            let new_key = loop {
                let k = key(2 * rng.below(next + 2) + 1);
                if !inserted.contains(&k) {
                    break k;
                }
            };
            // Large, so that most cases split.
            let len = 90 + rng.below(31) as usize;
            let value = exactly(&mut rng, len);
            let at =
                expected.partition_point(|c| c[LEAF_CELL_HEADER..][..new_key.len()] < new_key[..]);
            expected.insert(at, leaf_cell_inline(&new_key, &value));
            let total: usize = expected.iter().map(|c| slotted_size(c.len())).sum();

            let mut dirty = DirtyPages::boxed(None);
            let got =
                split_committed_leaf(&node, Some(&overlay), &new_key, &value, &mut dirty, PAGE)
                    .unwrap();
            if HEADER_LEN + total <= PAGE {
                assert!(got.is_none(), "case {case}: a leaf with room was split");
                declined += 1;
                continue;
            }
            let halves = got.unwrap_or_else(|| panic!("case {case}: not split"));
            let (left, right) = (
                cells_of_page(dirty.get(halves.left)),
                cells_of_page(dirty.get(halves.right)),
            );
            let mut acc = 0;
            let k = expected
                .iter()
                .position(|c| {
                    acc += slotted_size(c.len());
                    acc >= total / 2
                })
                .map_or(expected.len() - 1, |i| (i + 1).clamp(1, expected.len() - 1));
            assert_eq!(left, expected[..k], "case {case}: left half");
            assert_eq!(right, expected[k..], "case {case}: right half");
            let key_of = |c: &[u8]| c[LEAF_CELL_HEADER..][..new_key.len()].to_vec();
            let sep = &halves.separator[..];
            assert!(&key_of(&left[k - 1])[..] < sep && sep <= &key_of(&right[0])[..]);
            splits += 1;
            // A key the leaf holds, or its overlay inserted, goes the usual way.
            for held in [keys.first(), inserted.first()].into_iter().flatten() {
                let r = split_committed_leaf(&node, Some(&overlay), held, &value, &mut dirty, PAGE);
                assert!(r.unwrap().is_none(), "case {case}: a held key was split in");
            }
        }
        assert!(
            splits > 500 && declined > 100,
            "{splits} splits, {declined} declined"
        );
    }

    /// An overlay entry that does not fit its leaf (a value of another
    /// length, an index past its cells) is left to the usual way, which
    /// reports it: nothing is split.
    #[test]
    fn a_misfit_entry_is_left_to_the_usual_way() {
        let arena = Arena::new(PAGE, 64 * PAGE).unwrap();
        let mut space = ArenaSpace::default();
        let leaf = space.alloc(&arena, 1, u64::MAX, 1, false).unwrap().pgno();
        let unit = space.alloc_overlay(&arena, leaf, 0, 0, u64::MAX).unwrap();
        let overlay = arena.attach_overlay(leaf, unit);
        let cells: Vec<Vec<u8>> = (0..29)
            .map(|i| leaf_cell_inline(&key(2 * i), &[7; 120]))
            .collect();
        let mut page = vec![0u8; PAGE];
        fill_page(&mut page, true, &cells);
        let node = Node::parse(&page, 7, None).unwrap();
        let mut dirty = DirtyPages::boxed(None);
        let value = [1u8; 120];
        let split = |dirty: &mut DirtyPages| {
            split_committed_leaf(&node, Some(&overlay), &key(7), &value, dirty, PAGE).unwrap()
        };
        assert!(split(&mut dirty).is_some(), "a full leaf splits");
        for (index, bad) in [(29u16, &[1u8; 120][..]), (3, &[1u8; 5][..])] {
            let mark = overlay.mark();
            assert!(overlay.append(index, Overlaid::Value(bad), 1));
            assert!(
                split(&mut dirty).is_none(),
                "entry {index} of {} bytes",
                bad.len()
            );
            overlay.cut(mark);
        }
    }
}
