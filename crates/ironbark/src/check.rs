//! Integrity verification: the full `Database::check`, and the partial check
//! of the pages written since the last durable commit that `open` runs
//! after an unclean shutdown.
//!
//! Full check invariants verified: every page's checksum and self-number;
//! header txn equal to the parent's record; page kind matching its level;
//! keys strictly increasing and within the parent's bounds; catalog counters
//! equal to what the walk counts; every page in `[2, page_count)` in use
//! exactly once or free exactly once.

use crate::btree::page::{self, blob_data, LeafValue, Node};
use crate::btree::search::{check_root, Root};
use crate::btree::write::TreeState;
use crate::catalog::Catalog;
use crate::error::{Error, Result};
use crate::pages::{MapSource, PageSource};
use crate::storage::freespace::Extent;
use crate::storage::meta::{Meta, META_SLOTS};

/// What `Database::check` verified.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CheckReport {
    /// Pages in use by the commit (meta pages included).
    pub page_count: u64,
    /// Pages walked in trees, blobs and the state blob.
    pub pages_in_use: u64,
    /// Pages free (reusable or pending).
    pub free_pages: u64,
    /// Named trees.
    pub trees: usize,
    /// Entries over all trees.
    pub entries: u64,
}

pub(crate) struct Checker<'a> {
    src: &'a MapSource,
    meta: Meta,
    /// Full check: one mark per page. Partial check: empty.
    marks: Vec<bool>,
    full: bool,
    /// Partial check: only pages written by txns above this.
    min_txn: u64,
}

#[derive(Default)]
struct Counts {
    entries: u64,
    branch_pages: u64,
    leaf_pages: u64,
    overflow_pages: u64,
}

/// Verifies the pages of `meta`'s commit written after its last durable
/// commit. Errors mean the commit did not reach the disk whole.
pub(crate) fn verify_commit(src: &MapSource, meta: &Meta, catalog: &Catalog) -> Result<()> {
    let mut c = Checker {
        src,
        meta: *meta,
        marks: Vec::new(),
        full: false,
        min_txn: meta.last_synced_txn,
    };
    for t in &catalog.trees {
        c.tree(&t.name, &t.state)?;
    }
    Ok(())
}

impl<'a> Checker<'a> {
    pub(crate) fn new(src: &'a MapSource, meta: Meta) -> Checker<'a> {
        Checker {
            src,
            meta,
            marks: vec![false; meta.page_count as usize],
            full: true,
            min_txn: 0,
        }
    }

    fn mark(&mut self, start: u64, len: u64, what: &str) -> Result<()> {
        if !self.full {
            return Ok(());
        }
        for p in start..start + len {
            let m = self
                .marks
                .get_mut(p as usize)
                .ok_or_else(|| Error::corrupted_page(p, format!("{what} beyond the page count")))?;
            if *m {
                return Err(Error::corrupted_page(
                    p,
                    format!("{what} page is used twice"),
                ));
            }
            *m = true;
        }
        Ok(())
    }

    pub(crate) fn check_all(mut self, catalog: &Catalog, free: &[Extent]) -> Result<CheckReport> {
        let run = self.src.blob_run(self.meta.state_pgno)?;
        self.mark(
            self.meta.state_pgno,
            (run.len() / self.src.page_size) as u64,
            "state blob",
        )?;
        let mut entries = 0;
        for t in &catalog.trees {
            self.tree(&t.name, &t.state)?;
            entries += t.state.entries;
        }
        let in_use = self.marks.iter().filter(|m| **m).count() as u64;
        let mut free_pages = 0;
        for e in free {
            self.mark(e.start, e.len, "free")?;
            free_pages += e.len;
        }
        if let Some(p) = (META_SLOTS as usize..self.marks.len()).find(|&p| !self.marks[p]) {
            return Err(Error::corrupted_page(
                p as u64,
                "page neither in use nor free (leaked)",
            ));
        }
        Ok(CheckReport {
            page_count: self.meta.page_count,
            pages_in_use: in_use,
            free_pages,
            trees: catalog.trees.len(),
            entries,
        })
    }

    fn tree(&mut self, name: &str, state: &TreeState) -> Result<()> {
        let root = state.root;
        if root.is_empty() || root.txn <= self.min_txn {
            return Ok(());
        }
        check_root(root)?;
        let mut counts = Counts::default();
        self.walk(root, None, None, &mut counts, true)?;
        if self.full {
            let found = (
                counts.entries,
                counts.branch_pages,
                counts.leaf_pages,
                counts.overflow_pages,
            );
            let recorded = (
                state.entries,
                state.branch_pages,
                state.leaf_pages,
                state.overflow_pages,
            );
            if found != recorded {
                return Err(Error::Corrupted {
                    page: Some(root.pgno),
                    detail: format!(
                        "tree {name:?}: catalog records (entries, branch, leaf, overflow) = {recorded:?}, walk found {found:?}"
                    ),
                });
            }
        }
        Ok(())
    }

    /// A tree page, verified against its own checksum and the checksum
    /// its parent (or the catalog) recorded.
    fn page(&self, pgno: u64, txn: u64, sum: u64) -> Result<&'a [u8]> {
        let b = self.src.page(pgno)?;
        if !page::checksum_ok(b) {
            return Err(Error::corrupted_page(pgno, "page checksum mismatch"));
        }
        if page::stored_sum(b) != sum {
            return Err(Error::corrupted_page(
                pgno,
                "page checksum differs from its parent's record (a stale page)",
            ));
        }
        if page::u64_at(b, 24) != pgno {
            return Err(Error::corrupted_page(
                pgno,
                "page records another page number",
            ));
        }
        if page::page_txn(b) != txn {
            return Err(Error::corrupted_page(
                pgno,
                "page txn does not match its parent's record",
            ));
        }
        Ok(b)
    }

    fn walk(
        &mut self,
        at: Root,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
        counts: &mut Counts,
        is_root: bool,
    ) -> Result<()> {
        let bytes = self.page(at.pgno, at.txn, at.sum)?;
        let node = Node::parse(bytes, at.pgno, Some(at.txn))?;
        let bad = |d: &str| Err(Error::corrupted_page(at.pgno, d.to_string()));
        if node.is_leaf != (at.depth == 1) {
            return bad("page kind does not match its level");
        }
        if node.count == 0 && !is_root {
            return bad("empty page below the root");
        }
        self.mark(at.pgno, 1, "tree")?;
        let mut prev: Option<&[u8]> = None;
        let first_keyed = if node.is_leaf { 0 } else { 1 };
        if !node.is_leaf && !node.key(0)?.is_empty() {
            return bad("first branch key is not empty");
        }
        for i in first_keyed..node.count {
            let k = node.key(i)?;
            if prev.is_some_and(|p| p >= k) {
                return bad("keys out of order");
            }
            if lower.is_some_and(|l| k < l) || upper.is_some_and(|u| k >= u) {
                return bad("key outside the range its parent gives");
            }
            prev = Some(k);
        }
        if node.is_leaf {
            counts.leaf_pages += 1;
            counts.entries += node.count as u64;
            for i in 0..node.count {
                if let (
                    _,
                    LeafValue::Overflow {
                        pgno,
                        txn,
                        len,
                        sum,
                    },
                ) = node.leaf_entry(i)?
                {
                    let run = self.src.blob_run(pgno)?;
                    counts.overflow_pages += (run.len() / self.src.page_size) as u64;
                    if txn <= self.min_txn {
                        continue;
                    }
                    if !page::checksum_ok(run)
                        || page::stored_sum(run) != sum
                        || page::u64_at(run, 24) != pgno
                    {
                        return Err(Error::corrupted_page(
                            pgno,
                            "overflow blob checksum mismatch",
                        ));
                    }
                    blob_data(run, pgno, Some(txn), Some(len))?;
                    self.mark(pgno, (run.len() / self.src.page_size) as u64, "overflow")?;
                }
            }
            return Ok(());
        }
        counts.branch_pages += 1;
        for i in 0..node.count {
            let (child, txn) = node.child(i)?;
            let lo = if i == 0 { lower } else { Some(node.key(i)?) };
            let hi = if i + 1 < node.count {
                Some(node.key(i + 1)?)
            } else {
                upper
            };
            if txn > self.meta.txn {
                return Err(Error::corrupted_page(
                    at.pgno,
                    "child txn is newer than the commit",
                ));
            }
            if !self.full && txn <= self.min_txn {
                continue;
            }
            let child_root = Root {
                pgno: child,
                txn,
                sum: node.child_sum(i)?,
                depth: at.depth - 1,
            };
            self.walk(child_root, lo, hi, counts, false)?;
        }
        Ok(())
    }
}
