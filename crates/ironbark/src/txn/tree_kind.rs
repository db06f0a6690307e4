//! The kind-aware lookups of trees, for both kinds of transaction: the
//! kind of a tree by name, and a handle made only for a tree of the kind
//! asked for (so that the byte encodings of multimap and integer keys are
//! never read or written through the wrong API; `kind.rs` defines the
//! kinds themselves and knows nothing of transactions).

use crate::error::{Error, Result};
use crate::kind::TreeKind;
use crate::txn::read::ReadTxn;
use crate::txn::write::WriteTxn;
use crate::txn::Tree;

impl ReadTxn {
    /// The kind of the tree `name`, or `NoSuchTree`.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// tx.open_tree("plain")?;
    /// tx.commit()?;
    /// let rx = db.begin_read()?;
    /// assert_eq!(rx.tree_kind("plain")?, ironbark::TreeKind::PLAIN);
    /// assert!(rx.tree_kind("missing").is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub fn tree_kind(&self, name: &str) -> Result<TreeKind> {
        self.snapshot()
            .catalog
            .find(name)
            .map(|e| e.kind)
            .ok_or_else(|| Error::NoSuchTree(name.to_string()))
    }

    /// A handle to the existing tree `name` if it is of `kind`.
    pub(crate) fn tree_of_kind(&self, name: &str, kind: TreeKind) -> Result<Tree> {
        Tree::find_of_kind(&self.snapshot().catalog, name, kind, self.shared().db_id)
    }
}

impl WriteTxn<'_> {
    /// The kind of the tree `name`, as this transaction sees it, or
    /// `NoSuchTree`.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// use ironbark::{IntWidth, TreeKind};
    /// let mut tx = db.begin_write()?;
    /// tx.open_int_tree("ids", IntWidth::U64)?;
    /// assert_eq!(tx.tree_kind("ids")?, TreeKind::int_keys(IntWidth::U64));
    /// # Ok(())
    /// # }
    /// ```
    pub fn tree_kind(&self, name: &str) -> Result<TreeKind> {
        self.catalog
            .find(name)
            .map(|e| e.kind)
            .ok_or_else(|| Error::NoSuchTree(name.to_string()))
    }

    /// A handle to the existing tree `name` if it is of `kind`.
    pub(crate) fn tree_of_kind(&self, name: &str, kind: TreeKind) -> Result<Tree> {
        Tree::find_of_kind(&self.catalog, name, kind, self.shared.db_id)
    }
}
