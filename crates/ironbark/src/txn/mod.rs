//! Transactions: the reader table, read snapshots, the write transaction,
//! its redo record, and the commit protocol.
//!
//! Invariant: any number of read snapshots and at most one write
//! transaction; a reader never waits, and the writer never waits for a
//! reader (it only declines to reuse the pages a reader can see). A tree
//! handle is only resolved in the database it came from, and only to the
//! tree it was made for (its id), never to a later tree of the same name.

pub(crate) mod checkpoint_steps;
pub(crate) mod commit;
pub(crate) mod cursor_mut;
pub(crate) mod leaf_hints;
pub(crate) mod logged;
pub(crate) mod overlaid;
pub(crate) mod overlay_undo;
pub(crate) mod read;
pub(crate) mod reader_stripes;
pub(crate) mod readers;
pub(crate) mod recovery;
pub(crate) mod redo;
pub(crate) mod savepoint;
pub(crate) mod savepoint_stack;
pub(crate) mod seal;
pub(crate) mod shared;
pub(crate) mod snapshot_lender;
pub(crate) mod stream;
pub(crate) mod tree_kind;
pub(crate) mod write;

use std::sync::Arc;

use crate::catalog::{Catalog, TreeEntry};
use crate::error::{Error, Result};

/// A handle to a named tree. Cheap to clone; valid in any transaction of
/// the database (the file) it came from, in this process, for as long as
/// the tree exists. Using it with another database is
/// [`Error::ForeignTree`]; after its tree was dropped,
/// [`Error::TreeDropped`] (in the dropping transaction) or
/// [`Error::StaleTree`] (later, even if a tree of the same name was
/// created since).
///
/// Handles compare equal when they name the same tree of the same
/// database; they hash accordingly (as map keys) and order by name, then
/// by creation (a later tree of the same name sorts after), then by
/// database.
#[derive(Clone, Debug)]
pub struct Tree {
    pub(crate) id: u64,
    pub(crate) name: Arc<str>,
    /// The database it came from (`db::Shared::db_id`), so that one compare
    /// tells a foreign handle apart.
    pub(crate) db: u64,
    /// Where the tree was in the catalog the handle came from: a lookup
    /// looks there first, and finds its tree with one compare of ids while
    /// no tree was created or dropped before it (else by name). A hint
    /// only: not part of the handle's identity.
    pub(crate) slot: usize,
}

impl PartialEq for Tree {
    fn eq(&self, other: &Tree) -> bool {
        (self.id, &self.name, self.db) == (other.id, &other.name, other.db)
    }
}

impl Eq for Tree {}

impl std::hash::Hash for Tree {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (self.id, &self.name, self.db).hash(state);
    }
}

impl Ord for Tree {
    fn cmp(&self, other: &Tree) -> std::cmp::Ordering {
        (&self.name, self.id, self.db).cmp(&(&other.name, other.id, other.db))
    }
}

impl PartialOrd for Tree {
    fn partial_cmp(&self, other: &Tree) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Tree {
    /// The tree's name.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("users")?;
    /// assert_eq!(t.name(), "users");
    /// assert_eq!(tx.list_trees(), [t.name()]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A handle to the plain tree `name` of `catalog`, in the database
    /// `db`; `NoSuchTree`, or `WrongTreeKind` for a multimap or an
    /// integer-key tree.
    pub(crate) fn find(catalog: &Catalog, name: &str, db: u64) -> Result<Tree> {
        Tree::find_of_kind(catalog, name, crate::kind::TreeKind::PLAIN, db)
    }

    /// [`Tree::find`] for a tree of `kind`.
    pub(crate) fn find_of_kind(
        catalog: &Catalog,
        name: &str,
        kind: crate::kind::TreeKind,
        db: u64,
    ) -> Result<Tree> {
        let slot = catalog
            .position(name)
            .ok_or_else(|| Error::NoSuchTree(name.to_string()))?;
        Tree::of_kind(catalog, slot, kind, db)
    }

    /// A handle to the tree at `slot` of `catalog`, of the database `db`,
    /// if it is of `kind` (`WrongTreeKind` otherwise).
    pub(crate) fn of_kind(
        catalog: &Catalog,
        slot: usize,
        kind: crate::kind::TreeKind,
        db: u64,
    ) -> Result<Tree> {
        let e = &catalog.trees[slot];
        if e.kind != kind {
            return Err(Error::WrongTreeKind {
                name: e.name.to_string(),
                expected: kind,
                found: e.kind,
            });
        }
        Ok(Tree {
            id: e.id,
            name: e.name.clone(),
            db,
            slot,
        })
    }

    /// The entry of this handle's tree in `catalog` (of the database
    /// `db`), if it is there: at the handle's slot, or else by name.
    #[inline]
    pub(crate) fn entry_in<'c>(&self, catalog: &'c Catalog, db: u64) -> Option<&'c TreeEntry> {
        if self.db != db {
            return None;
        }
        // Ids are never reused (a tree dropped and created again gets a
        // new one), so an entry with this id is this tree.
        match catalog.trees.get(self.slot) {
            Some(e) if e.id == self.id => Some(e),
            _ => catalog.find_shared(&self.name).filter(|e| e.id == self.id),
        }
    }

    /// Why this handle does not resolve in `catalog` (of the database
    /// `db`). `before` is the catalog the transaction began from, for a
    /// write transaction (a tree there was dropped in this transaction).
    /// Only on the error path: lookups compare the id and database first.
    pub(crate) fn unresolved(&self, db: u64, catalog: &Catalog, before: Option<&Catalog>) -> Error {
        let name = || self.name.to_string();
        if self.db != db {
            return Error::ForeignTree(name());
        }
        if before
            .and_then(|c| c.find(&self.name))
            .is_some_and(|e| e.id == self.id)
        {
            return Error::TreeDropped(name());
        }
        // Tree ids only grow: a handle at or past the snapshot's next id
        // names a tree created after the snapshot, which it cannot see.
        if self.id >= catalog.next_tree_id {
            return Error::NoSuchTree(name());
        }
        Error::StaleTree(name())
    }
}
