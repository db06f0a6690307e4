//! Savepoints: marks inside a write transaction that it can roll back to,
//! undoing the changes made since while keeping those made before (SQL's
//! `SAVEPOINT`, `ROLLBACK TO` and `RELEASE`).
//!
//! How: a savepoint records the lengths of the transaction's append-only
//! logs (dirty pages, the freed list, the redo record, the graveyard of
//! frozen pages) and a copy of its catalog (roots and counters of every
//! tree), and freezes the dirty pages that exist (`DirtyPages::freeze`:
//! one number, no page is copied). After that the write path copies a
//! frozen page before changing it, as it copies a committed page, and a
//! frozen page that is freed or superseded keeps its buffer (the
//! graveyard). A rollback truncates the logs, brings the graveyard's pages
//! back and restores the catalog: the trees are exactly as they were.
//!
//! Invariant: while a savepoint is on the stack, the dirty pages it saw
//! (`dirty_len`) are frozen and hold its state, in `pages` or in the
//! graveyard; the stack is ordered by when the savepoints were taken, and
//! the frozen count is the innermost one's `dirty_len`.

use std::sync::atomic::Ordering;

use crate::error::Result;
use crate::txn::savepoint_stack::{Mark, Savepoint, NEXT_ID};
use crate::txn::write::WriteTxn;

impl WriteTxn<'_> {
    /// Takes a savepoint: [`WriteTxn::rollback_to`] it later undoes every
    /// change made after it (puts, deletes, clears, trees created or
    /// dropped) and keeps those made before. Savepoints nest: rolling back
    /// to one discards those taken after it. Taking one copies no page (it
    /// freezes the transaction's pages: a later change of one copies it
    /// first, as a change of a committed page does) and costs a copy of
    /// the list of trees.
    ///
    /// A transaction that failed part-way ([`Error::TxnFailed`](crate::Error::TxnFailed)) takes
    /// none.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let accounts = tx.open_tree("accounts")?;
    /// tx.put(&accounts, b"alice", b"100")?;
    /// let outer = tx.savepoint()?;
    /// tx.put(&accounts, b"bob", b"50")?;
    /// let inner = tx.savepoint()?;
    /// tx.delete(&accounts, b"alice")?;
    /// tx.rollback_to(&inner)?; // alice is back
    /// assert_eq!(tx.len(&accounts)?, 2);
    /// tx.rollback_to(&outer)?; // bob is gone too, and `inner` with it
    /// assert_eq!(tx.len(&accounts)?, 1);
    /// assert!(tx.rollback_to(&inner).is_err());
    /// tx.commit()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn savepoint(&mut self) -> Result<Savepoint> {
        self.usable()?;
        // The value `put_reserve` handed out last is final now (the call
        // ended its borrow): into the redo record, which the mark measures.
        self.flush_reserved();
        if self.savepoints.owner == 0 {
            self.savepoints.owner = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        }
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let dirty_len = self.dirty.pages.len();
        self.savepoints.stack.push(Mark {
            id,
            catalog: crate::catalog::Catalog::clone(&self.catalog),
            dirty_len,
            graveyard_len: self.dirty.graveyard.len(),
            freed_len: self.freed.len(),
            redo_len: self.redo.len(),
            changed: self.changed,
        });
        self.dirty.freeze(dirty_len);
        // The finger's leaf is frozen now: no put may edit it in place.
        self.finger = Default::default();
        Ok(Savepoint {
            owner: self.savepoints.owner,
            id,
        })
    }

    /// Rolls back to `sp`: the trees are as they were when it was taken,
    /// and the savepoints taken after it are discarded. `sp` stays, so it
    /// can be rolled back to again (as SQL's `ROLLBACK TO`). Handles of
    /// trees created since are stale.
    ///
    /// A logged commit (see `Options::logged_commits`) records only the
    /// changes that were kept. A savepoint of another transaction, or one
    /// released or discarded, is [`Error::InvalidSavepoint`](crate::Error::InvalidSavepoint) (nothing
    /// changes); a transaction that failed part-way stays failed
    /// ([`Error::TxnFailed`](crate::Error::TxnFailed)).
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// let sp = tx.savepoint()?;
    /// for attempt in 0..3u8 {
    ///     tx.put(&t, b"try", &[attempt])?;
    ///     tx.rollback_to(&sp)?; // the same savepoint, each time
    /// }
    /// assert!(tx.is_empty(&t)?);
    /// # Ok(())
    /// # }
    /// ```
    pub fn rollback_to(&mut self, sp: &Savepoint) -> Result<()> {
        let at = self.savepoints.find(sp)?;
        self.usable()?;
        self.savepoints.stack.truncate(at + 1);
        let mark = &self.savepoints.stack[at];
        // A reservation made since is undone with its put; one made before
        // was flushed when the savepoint was taken.
        self.reserved = None;
        self.dirty.roll_back(mark.dirty_len, mark.graveyard_len);
        self.dirty.freeze(mark.dirty_len);
        self.freed.truncate(mark.freed_len);
        // Tree ids are not given back: a handle of a tree created since
        // must not resolve to a later tree that would reuse its id.
        let next_tree_id = self.catalog.next_tree_id;
        crate::catalog::Catalog::clone_from(&mut self.catalog, &mark.catalog);
        self.catalog.next_tree_id = next_tree_id;
        if self.logging {
            if next_tree_id != mark.catalog.next_tree_id {
                // Replay gives a created tree the next id: with ids
                // skipped, the record no longer replays. The commit
                // writes its pages instead.
                self.logging = false;
                self.redo.clear();
            } else {
                // Logging never restarts, so it was on at the savepoint
                // too and the record then is a prefix of this one.
                self.redo.truncate(mark.redo_len);
            }
        }
        self.changed = mark.changed;
        self.finger = Default::default();
        Ok(())
    }

    /// Forgets `sp` and the savepoints taken after it (as SQL's
    /// `RELEASE`): their changes stay, and can no longer be rolled back
    /// to them (an outer savepoint still undoes them). Pages frozen only
    /// for them can be changed in place again. An unknown savepoint is
    /// [`Error::InvalidSavepoint`](crate::Error::InvalidSavepoint).
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// let sp = tx.savepoint()?;
    /// tx.put(&t, b"k", b"v")?;
    /// tx.release(sp)?;
    /// assert_eq!(tx.get(&t, b"k")?, Some(&b"v"[..]));
    /// # Ok(())
    /// # }
    /// ```
    pub fn release(&mut self, sp: Savepoint) -> Result<()> {
        let at = self.savepoints.find(&sp)?;
        self.savepoints.stack.truncate(at);
        let frozen = self.savepoints.stack.last().map_or(0, |m| m.dirty_len);
        self.dirty.freeze(frozen);
        self.dirty.bury(frozen);
        Ok(())
    }
}
