//! The data of savepoints: the token a caller holds ([`Savepoint`]) and the
//! stack of marks a write transaction keeps (`Savepoints`), apart from the
//! operations on the transaction (`txn/savepoint.rs`), so that the write
//! transaction can hold its stack without importing those operations.
//!
//! Invariant: the stack is ordered by when the savepoints were taken, and
//! a token names its transaction by a tag never reused in the process.

use std::sync::atomic::AtomicU64;

use crate::catalog::Catalog;
use crate::error::{Error, Result};

/// Savepoint ids and transaction tags, never reused in the process, so
/// that a token is recognised by its transaction alone.
pub(super) static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A point inside a write transaction to roll back to, from
/// [`WriteTxn::savepoint`](crate::WriteTxn::savepoint). It is a token: it holds nothing of the
/// transaction (no borrow), and dropping it without
/// [`WriteTxn::release`](crate::WriteTxn::release) is harmless (the transaction keeps the mark until
/// it ends, or until a rollback or release of an outer savepoint).
///
/// ```
/// # fn main() -> ironbark::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
/// let mut tx = db.begin_write()?;
/// let t = tx.open_tree("t")?;
/// tx.put(&t, b"kept", b"1")?;
/// let sp = tx.savepoint()?;
/// tx.put(&t, b"undone", b"2")?;
/// tx.rollback_to(&sp)?;
/// assert_eq!(tx.get(&t, b"undone")?, None);
/// assert_eq!(tx.get(&t, b"kept")?, Some(&b"1"[..]));
/// tx.commit()?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Savepoint {
    /// The tag of the transaction that took it.
    pub(super) owner: u64,
    pub(super) id: u64,
}

/// What a savepoint restores.
pub(super) struct Mark {
    pub(super) id: u64,
    pub(super) catalog: Catalog,
    pub(super) dirty_len: usize,
    pub(super) graveyard_len: usize,
    pub(super) freed_len: usize,
    pub(super) redo_len: usize,
    pub(super) changed: bool,
}

/// A write transaction's savepoints, outermost first.
#[derive(Default)]
pub(crate) struct Savepoints {
    /// This transaction's tag (0 until its first savepoint).
    pub(super) owner: u64,
    pub(super) stack: Vec<Mark>,
}

impl Savepoints {
    /// Whether no savepoint is taken.
    pub(crate) fn is_empty(&self) -> bool {
        self.stack.is_empty()
    }

    /// Where the savepoint `sp` is on the stack, or why it cannot be used.
    pub(super) fn find(&self, sp: &Savepoint) -> Result<usize> {
        if sp.owner != self.owner {
            return Err(Error::InvalidSavepoint(
                "the savepoint belongs to another write transaction".into(),
            ));
        }
        self.stack
            .iter()
            .rposition(|m| m.id == sp.id)
            .ok_or_else(|| {
                Error::InvalidSavepoint(
                    "the savepoint was released, or rolled back past (a rollback to an \
                     outer savepoint discards the savepoints taken after it)"
                        .into(),
                )
            })
    }
}
