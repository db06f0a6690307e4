//! A cursor of the write transaction that can delete or replace the entry
//! it is on, for edits decided entry by entry (expire, rewrite, migrate)
//! that a `retain` closure cannot express, without copying keys out in
//! batches first.
//!
//! Why it is cheap: a step reads the next slot of the leaf it is on, with
//! no descent; it descends only to reach the next leaf, or after an edit,
//! since an edit may move entries (a split, a merge) and its copy-on-write
//! gives the leaf another page. An edit is a `delete` or a `put` of the
//! current key: it costs what they cost (the descent and the copy of the
//! path), and reaches the redo log as they do.
//!
//! Invariant: the cursor holds the transaction mutably, so its pages change
//! only through the cursor's own edits, which drop the remembered leaf.

use crate::btree::cursor::{Cursor, Landed};
use crate::btree::page::Node;
use crate::btree::search::{is_deleted, leaf_entry_seen, resolve_value};
use crate::error::Result;
use crate::pages::PageSource;
use crate::txn::write::WriteTxn;
use crate::txn::Tree;

/// Where the cursor is, relative to `CursorMut::key`.
#[derive(Clone, Copy, Debug)]
enum Position {
    /// Before the first entry at or after the key.
    Before,
    /// On the key, which is in the tree; in the leaf at this page and slot
    /// unless an edit has happened since.
    On(Option<(u64, usize)>),
    /// The key was deleted: the next entry is the first after it.
    Deleted,
    /// Past the last entry.
    End,
}

/// A cursor over one tree of a [`WriteTxn`] that can delete or replace
/// the entry it is on (see [`WriteTxn::cursor_mut`]). `next` is not
/// `Iterator::next`: each entry borrows the cursor, until its next call.
///
/// ```
/// # fn main() -> ironbark::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
/// let mut tx = db.begin_write()?;
/// let t = tx.open_tree("t")?;
/// for i in 0..100u8 {
///     tx.put(&t, &[i], &[i])?;
/// }
/// // Keep the even values, doubled.
/// let mut cursor = tx.cursor_mut(&t)?;
/// while let Some((_, value)) = cursor.next()? {
///     if value[0] % 2 == 1 {
///         cursor.delete_current()?;
///     } else {
///         let doubled = [value[0] * 2];
///         cursor.replace_current(&doubled)?;
///     }
/// }
/// drop(cursor);
/// assert_eq!(tx.len(&t)?, 50);
/// assert_eq!(tx.get(&t, &[10])?, Some(&[20u8][..]));
/// # Ok(())
/// # }
/// ```
pub struct CursorMut<'t, 'db> {
    txn: &'t mut WriteTxn<'db>,
    tree: Tree,
    /// The current key (or the key to start at), copied: an edit may free
    /// the page it was read from.
    key: Vec<u8>,
    position: Position,
}

impl std::fmt::Debug for CursorMut<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CursorMut")
            .field("tree", &self.tree.name())
            .field("key", &self.key)
            .field("position", &self.position)
            .finish()
    }
}

impl<'t, 'db> CursorMut<'t, 'db> {
    pub(crate) fn new(txn: &'t mut WriteTxn<'db>, tree: &Tree) -> Result<CursorMut<'t, 'db>> {
        // Resolves the handle now, so that a bad one fails here.
        txn.root(tree)?;
        Ok(CursorMut {
            txn,
            tree: tree.clone(),
            key: Vec::new(),
            position: Position::Before,
        })
    }

    /// Moves to the next entry and returns it (the first entry on the
    /// first call, or the first at or after the key given to `seek`), or
    /// `None` past the last one.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// for k in [b"a", b"b", b"c"] {
    ///     tx.put(&t, k, b"v")?;
    /// }
    /// let mut cursor = tx.cursor_mut(&t)?;
    /// assert_eq!(cursor.next()?, Some((&b"a"[..], &b"v"[..])));
    /// assert_eq!(cursor.next()?.map(|(k, _)| k.to_vec()), Some(b"b".to_vec()));
    /// # Ok(())
    /// # }
    /// ```
    // Not `Iterator::next`: the entry borrows the cursor (whose edits
    // change the pages), which `Iterator` cannot express.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<(&[u8], &[u8])>> {
        let src: &WriteTxn<'db> = self.txn;
        let found = match self.position {
            Position::End => return Ok(None),
            Position::On(Some((pgno, slot))) => {
                let node = Node::parse(src.page(pgno)?, pgno, None)?;
                // The next cell, unless the leaf's overlay inserts keys
                // (one may lie between): then a seek, which merges them.
                if slot + 1 < node.count
                    && !is_deleted(src, &node, slot + 1)?
                    && !src.has_inserts(pgno)
                {
                    Some(Landed::Cell(node, slot + 1))
                } else {
                    seek(src, &self.tree, &self.key, true)?
                }
            }
            Position::On(None) | Position::Deleted => seek(src, &self.tree, &self.key, true)?,
            Position::Before => seek(src, &self.tree, &self.key, false)?,
        };
        let (node, slot) = match found {
            None => {
                self.position = Position::End;
                return Ok(None);
            }
            Some(Landed::Inserted(key, value)) => {
                self.key.clear();
                self.key.extend_from_slice(key);
                // No cell to step on from: the next step seeks past the key.
                self.position = Position::On(None);
                return Ok(Some((key, value)));
            }
            Some(Landed::Cell(node, slot)) => (node, slot),
        };
        let Some((key, value)) = leaf_entry_seen(src, &node, slot)? else {
            // `seek` lands on live entries only.
            return Err(crate::error::Error::Corrupted {
                page: Some(node.pgno),
                detail: "a write cursor stopped on a deleted entry".into(),
            });
        };
        let value = resolve_value(src, value)?;
        self.key.clear();
        self.key.extend_from_slice(key);
        self.position = Position::On(Some((node.pgno, slot)));
        Ok(Some((key, value)))
    }

    /// Positions the cursor so that `next` returns the first entry with a
    /// key `>= key`.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// for k in [b"a", b"b", b"c"] {
    ///     tx.put(&t, k, b"v")?;
    /// }
    /// let mut cursor = tx.cursor_mut(&t)?;
    /// cursor.seek(b"b");
    /// assert_eq!(cursor.next()?.map(|(k, _)| k.to_vec()), Some(b"b".to_vec()));
    /// # Ok(())
    /// # }
    /// ```
    pub fn seek(&mut self, key: &[u8]) {
        self.key.clear();
        self.key.extend_from_slice(key);
        self.position = Position::Before;
    }

    /// The key of the current entry, if the cursor is on one.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// for k in [b"a", b"b", b"c"] {
    ///     tx.put(&t, k, b"v")?;
    /// }
    /// let mut cursor = tx.cursor_mut(&t)?;
    /// assert_eq!(cursor.key(), None);
    /// cursor.next()?;
    /// assert_eq!(cursor.key(), Some(&b"a"[..]));
    /// # Ok(())
    /// # }
    /// ```
    pub fn key(&self) -> Option<&[u8]> {
        matches!(self.position, Position::On(_)).then_some(&self.key[..])
    }

    /// Removes the current entry; `next` then returns the one after it.
    /// `false`, with nothing changed, when the cursor is on no entry
    /// (before the first `next`, past the end, or after a delete).
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// for k in [b"a", b"b", b"c"] {
    ///     tx.put(&t, k, b"v")?;
    /// }
    /// let mut cursor = tx.cursor_mut(&t)?;
    /// cursor.seek(b"b");
    /// cursor.next()?;
    /// assert!(cursor.delete_current()?);
    /// assert!(!cursor.delete_current()?); // already gone
    /// assert_eq!(cursor.next()?.map(|(k, _)| k.to_vec()), Some(b"c".to_vec()));
    /// drop(cursor);
    /// assert_eq!(tx.get(&t, b"b")?, None);
    /// # Ok(())
    /// # }
    /// ```
    pub fn delete_current(&mut self) -> Result<bool> {
        if !matches!(self.position, Position::On(_)) {
            return Ok(false);
        }
        // On an error the transaction cannot commit (`TxnFailed`); the
        // cursor descends again from the key.
        self.position = Position::On(None);
        let removed = self.txn.delete(&self.tree, &self.key)?;
        self.position = Position::Deleted;
        Ok(removed)
    }

    /// Replaces the value of the current entry; the cursor stays on it.
    /// `false`, with nothing changed, when the cursor is on no entry.
    /// Size errors (`ValueTooLarge`) change nothing.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// for k in [b"a", b"b", b"c"] {
    ///     tx.put(&t, k, b"v")?;
    /// }
    /// let mut cursor = tx.cursor_mut(&t)?;
    /// assert!(!cursor.replace_current(b"w")?); // not on an entry yet
    /// cursor.next()?;
    /// assert!(cursor.replace_current(b"new")?);
    /// drop(cursor);
    /// assert_eq!(tx.get(&t, b"a")?, Some(&b"new"[..]));
    /// # Ok(())
    /// # }
    /// ```
    pub fn replace_current(&mut self, value: &[u8]) -> Result<bool> {
        if !matches!(self.position, Position::On(_)) {
            return Ok(false);
        }
        self.position = Position::On(None);
        self.txn.put(&self.tree, &self.key, value)?;
        Ok(true)
    }
}

/// Where the first entry `>= key` (`> key` with `after`) is.
fn seek<'a>(
    src: &'a WriteTxn<'_>,
    tree: &Tree,
    key: &[u8],
    after: bool,
) -> Result<Option<Landed<'a>>> {
    let mut cursor = Cursor::new(src, src.root(tree)?);
    cursor.seek_ge(key)?;
    if after && cursor.is_valid() && cursor.key()? == key {
        cursor.step_forward()?;
    }
    cursor.landed()
}

// Defined here, not in `write.rs`, so that the write transaction does not
// depend on its cursor (the cursor depends on it).
impl<'db> WriteTxn<'db> {
    /// A cursor over `tree` that can delete or replace the entry it is on,
    /// starting before the first entry (or wherever [`CursorMut::seek`]
    /// puts it). A step reads the next slot of the current leaf; an edit
    /// costs what a `delete` or `put` costs, and the step after it
    /// descends once. It holds the transaction until dropped.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let sessions = tx.open_tree("sessions")?;
    /// for (user, age) in [(&b"ann"[..], 5u8), (b"bob", 90), (b"cyd", 40)] {
    ///     tx.put(&sessions, user, &[age])?;
    /// }
    /// let mut cursor = tx.cursor_mut(&sessions)?;
    /// while let Some((_user, value)) = cursor.next()? {
    ///     match value[0] {
    ///         age if age > 60 => cursor.delete_current()?,       // expired
    ///         age => cursor.replace_current(&[age + 1])?,         // one older
    ///     };
    /// }
    /// drop(cursor);
    /// assert_eq!(tx.get(&sessions, b"bob")?, None);
    /// assert_eq!(tx.get(&sessions, b"cyd")?, Some(&[41u8][..]));
    /// tx.commit()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn cursor_mut<'t>(&'t mut self, tree: &Tree) -> Result<CursorMut<'t, 'db>> {
        CursorMut::new(self, tree)
    }
}
