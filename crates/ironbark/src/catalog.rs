//! The catalog: the named trees of a snapshot (name, id, root, counters),
//! kept sorted by name. How it is persisted is `state.rs`'s job.
//!
//! Invariant: names are unique and sorted; ids are unique and below
//! `next_tree_id`.

use std::sync::Arc;

use smallvec::SmallVec;

use crate::btree::write::TreeState;
use crate::kind::TreeKind;

/// One named tree in a snapshot.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct TreeEntry {
    pub(crate) id: u64,
    pub(crate) name: Arc<str>,
    pub(crate) state: TreeState,
    /// Fixed when the tree is created (`kind.rs`).
    pub(crate) kind: TreeKind,
}

impl Clone for TreeEntry {
    fn clone(&self) -> TreeEntry {
        TreeEntry {
            id: self.id,
            name: self.name.clone(),
            state: self.state,
            kind: self.kind,
        }
    }

    /// Keeps `self`'s name when it is the very allocation `source` has
    /// (the usual case when a write transaction copies its base's catalog
    /// into a spare one): two atomic count changes fewer per tree.
    fn clone_from(&mut self, source: &TreeEntry) {
        // Every field named, so that a new one cannot be left out.
        let TreeEntry {
            id,
            name,
            state,
            kind,
        } = source;
        self.id = *id;
        if !Arc::ptr_eq(&self.name, name) {
            self.name = name.clone();
        }
        self.state = *state;
        self.kind = *kind;
    }
}

/// How many trees a catalog holds in itself before it moves them all to
/// the heap.
pub(crate) const INLINE_TREES: usize = 2;

/// A catalog's trees: the first [`INLINE_TREES`] in the catalog itself.
pub(crate) type Trees = SmallVec<[TreeEntry; INLINE_TREES]>;

/// The named trees of a snapshot, sorted by name.
///
/// Up to [`INLINE_TREES`] trees live inside the catalog, so inside the
/// snapshot: a reader beside a writer finds its tree's root on lines whose
/// addresses it knows from the snapshot's, and loads them in parallel
/// with the snapshot's other lines. With a vector, the entry's address is
/// on the snapshot's line, so its miss came after that line's: the writer
/// rewrites both at every commit (it fills a lent snapshot), so both were
/// misses for a reader on another core.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Catalog {
    pub(crate) next_tree_id: u64,
    pub(crate) trees: Trees,
}

impl Clone for Catalog {
    fn clone(&self) -> Catalog {
        Catalog {
            next_tree_id: self.next_tree_id,
            trees: self.trees.clone(),
        }
    }

    /// Reuses `self`'s vector: a write transaction copies its base's
    /// catalog into the spare snapshot's, allocating nothing when it has
    /// room (a tree's name is shared, not copied).
    fn clone_from(&mut self, source: &Catalog) {
        self.next_tree_id = source.next_tree_id;
        self.trees.clone_from(&source.trees);
    }
}

impl Catalog {
    pub(crate) fn find(&self, name: &str) -> Option<&TreeEntry> {
        self.position(name).map(|i| &self.trees[i])
    }

    /// Where the tree `name` is in `trees`.
    pub(crate) fn position(&self, name: &str) -> Option<usize> {
        self.trees.binary_search_by(|t| (*t.name).cmp(name)).ok()
    }

    /// `find` for a name a handle holds: the handle's name is mostly the
    /// very allocation the catalog shares from commit to commit, so an
    /// address compare finds it without comparing bytes (a call to
    /// `memcmp` on every lookup).
    #[inline]
    pub(crate) fn find_shared(&self, name: &Arc<str>) -> Option<&TreeEntry> {
        self.trees
            .binary_search_by(|t| match Arc::ptr_eq(&t.name, name) {
                true => std::cmp::Ordering::Equal,
                false => (*t.name).cmp(name),
            })
            .ok()
            .map(|i| &self.trees[i])
    }

    /// The names of all trees, in order.
    pub(crate) fn names(&self) -> Vec<String> {
        self.trees.iter().map(|t| t.name.to_string()).collect()
    }

    /// Inserts or replaces the tree named `entry.name`.
    pub(crate) fn upsert(&mut self, entry: TreeEntry) {
        match self.trees.binary_search_by(|t| t.name.cmp(&entry.name)) {
            Ok(i) => self.trees[i] = entry,
            Err(i) => self.trees.insert(i, entry),
        }
    }

    /// Removes the tree `name`; `false` if there is none.
    pub(crate) fn remove(&mut self, name: &str) -> bool {
        match self.trees.binary_search_by(|t| (*t.name).cmp(name)) {
            Ok(i) => {
                self.trees.remove(i);
                true
            }
            Err(_) => false,
        }
    }

    /// What changed from `old` to `self`: the trees created or changed, and
    /// the names of the trees dropped (a merge of the two sorted lists).
    pub(crate) fn changes_since<'a>(
        &'a self,
        old: &'a Catalog,
        upserts: &mut Vec<&'a TreeEntry>,
        drops: &mut Vec<&'a str>,
    ) {
        let (mut i, mut j) = (0, 0);
        while i < self.trees.len() || j < old.trees.len() {
            match (self.trees.get(i), old.trees.get(j)) {
                (Some(n), Some(o)) if n.name == o.name => {
                    if n != o {
                        upserts.push(n);
                    }
                    i += 1;
                    j += 1;
                }
                (Some(n), Some(o)) if n.name < o.name => {
                    upserts.push(n);
                    i += 1;
                }
                (Some(n), None) => {
                    upserts.push(n);
                    i += 1;
                }
                (_, Some(o)) => {
                    drops.push(&o.name);
                    j += 1;
                }
                (None, None) => unreachable!(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A catalog copied into another keeps each name that is the same
    /// allocation (no count changed) and shares the source's otherwise;
    /// either way the copy equals the source.
    #[test]
    fn a_copied_catalog_keeps_a_name_it_shares() {
        let entry = |id: u64, name: &Arc<str>| TreeEntry {
            id,
            name: name.clone(),
            state: TreeState {
                entries: id * 10,
                ..TreeState::default()
            },
            kind: TreeKind::default(),
        };
        let (a, b): (Arc<str>, Arc<str>) = (Arc::from("a"), Arc::from("b"));
        let mut source = Catalog::default();
        source.upsert(entry(1, &a));
        source.upsert(entry(2, &b));
        source.next_tree_id = 3;
        let mut copy = Catalog::default();
        let other_b: Arc<str> = Arc::from("b");
        copy.upsert(entry(7, &a));
        copy.upsert(entry(8, &other_b));
        let counts = (Arc::strong_count(&a), Arc::strong_count(&b));
        copy.clone_from(&source);
        assert_eq!(copy, source);
        assert!(Arc::ptr_eq(&copy.trees[0].name, &a));
        assert!(Arc::ptr_eq(&copy.trees[1].name, &b), "the source's name");
        assert_eq!(
            Arc::strong_count(&a),
            counts.0,
            "a kept name is not counted again"
        );
        assert_eq!(Arc::strong_count(&b), counts.1 + 1);
        assert_eq!(Arc::strong_count(&other_b), 1, "the replaced name dropped");
    }

    /// A name found by address (the catalog's own allocation) or, held in
    /// another allocation (a handle from before the catalog was loaded
    /// again), by its bytes; a missing name, neither.
    #[test]
    fn find_shared_finds_by_address_or_by_bytes() {
        let mut catalog = Catalog::default();
        for (id, name) in ["alpha", "beta", "delta", "gamma"].into_iter().enumerate() {
            catalog.upsert(TreeEntry {
                id: id as u64,
                name: Arc::from(name),
                state: TreeState::default(),
                kind: TreeKind::default(),
            });
        }
        for entry in &catalog.trees {
            let shared = entry.name.clone();
            assert_eq!(catalog.find_shared(&shared).map(|e| e.id), Some(entry.id));
            let copy: Arc<str> = Arc::from(&*entry.name);
            assert!(!Arc::ptr_eq(&copy, &entry.name));
            assert_eq!(catalog.find_shared(&copy).map(|e| e.id), Some(entry.id));
        }
        for missing in ["", "aaa", "beta2", "zeta"] {
            assert!(
                catalog.find_shared(&Arc::from(missing)).is_none(),
                "{missing}"
            );
        }
    }
}
