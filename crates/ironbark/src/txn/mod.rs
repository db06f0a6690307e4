//! Transactions: the reader table, read snapshots, the write transaction,
//! and the commit protocol.
//!
//! Invariant: any number of read snapshots and at most one write
//! transaction; a reader never waits, and the writer never waits for a
//! reader (it only declines to reuse the pages a reader can see).

pub(crate) mod commit;
pub(crate) mod read;
pub(crate) mod readers;
pub(crate) mod write;

use std::sync::Arc;

/// A handle to a named tree. Cheap to clone; valid in any transaction of
/// the database it came from for as long as the tree exists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tree {
    pub(crate) id: u64,
    pub(crate) name: Arc<str>,
}

impl Tree {
    /// The tree's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}
