//! Integrity verification: the full `Database::check`, the partial check
//! of the pages written since the last durable commit that `open` runs
//! after an unclean shutdown, the whole-snapshot check of the page for page
//! copy, and the page and blob verification that verified cursors share.
//!
//! Full check invariants verified: every page's checksum and self-number;
//! header txn equal to the parent's record; page kind matching its level;
//! keys strictly increasing and within the parent's bounds; catalog counters
//! equal to what the walk counts; every page in `[2, page_count)` in use
//! exactly once or free exactly once.
//!
//! The full check does not stop at the first problem: a damaged page is
//! recorded and its subtree skipped, and the walk goes on with its sibling
//! subtrees and the other trees, up to `MAX_PROBLEMS`. Checks whose
//! answer a skipped subtree would falsify (the catalog counters of that
//! tree, pages neither in use nor free) are left out then. The partial
//! check at open stops at the first problem.

use crate::btree::page::{blob_data, verify_blob, verify_page, LeafValue, Node};
use crate::btree::search::{check_root, Root};
use crate::btree::write::TreeState;
use crate::catalog::Catalog;
use crate::error::{Error, Result};
use crate::kind::TreeKind;
use crate::pages::{MapSource, PageSource};
use crate::state::State;
use crate::storage::meta::{Meta, META_SLOTS};
use crate::storage::overlay::{Insert, Overlaid, INSERTED, MAX_ENTRIES};

/// The most problems one check lists; past it, one last entry says how
/// many more were found.
pub(crate) const MAX_PROBLEMS: usize = 1000;

/// What `Database::check` verified, and with `Database::check_report`, every
/// problem it found.
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
    /// Every problem found, in the order found: the page to blame (when one
    /// is) and what is wrong, one sentence each. Empty when the database is
    /// clean. At most 1000, plus one entry counting the rest.
    /// `Database::check` returns the first as `Error::Corrupted` instead.
    pub problems: Vec<(Option<u64>, String)>,
}

impl CheckReport {
    /// Whether no problem was found.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// assert!(db.check_report()?.is_clean());
    /// let mut report = ironbark::CheckReport::default();
    /// report.problems.push((Some(7), "bad checksum".to_string()));
    /// assert!(!report.is_clean());
    /// # Ok::<(), ironbark::Error>(())
    /// ```
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }

    /// The first problem as `Error::Corrupted` (its detail says how many
    /// more there are), or the report when clean.
    fn into_result(self) -> Result<CheckReport> {
        let more = self.problems.len().saturating_sub(1);
        match self.problems.first().cloned() {
            None => Ok(self),
            Some((page, detail)) => Err(Error::Corrupted {
                page,
                detail: match more {
                    0 => detail,
                    1 => format!("{detail} (and 1 more problem)"),
                    n => format!("{detail} (and {n} more problems)"),
                },
            }),
        }
    }
}

pub(crate) struct Checker<'a> {
    src: &'a MapSource,
    meta: Meta,
    /// Full check: one mark per page. Partial check: empty.
    marks: Vec<bool>,
    full: bool,
    /// Partial check: only pages written by txns above this.
    min_txn: u64,
    /// Full check: the problems found so far (at most `MAX_PROBLEMS`).
    problems: Vec<(Option<u64>, String)>,
    /// Full check: problems found past `MAX_PROBLEMS`.
    unlisted: u64,
    /// Full check: subtrees (or overflow values) not walked because of a
    /// problem, so the pages below them were not marked.
    skipped: u64,
    /// The kind of the tree being walked: its leaf entries must be of it.
    kind: TreeKind,
    /// Whether the pages walked are marked: not while a full check walks
    /// the newest trees of logged commits (see `collect`).
    marking: bool,
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
    verify_written_after(src, meta, catalog, meta.last_synced_txn)
}

/// Verifies every page of every tree of a snapshot (checksums against the
/// parents' records, page headers, key order, overflow runs), stopping at
/// the first problem: what a bulk reader runs before it trusts a whole
/// snapshot that it does not read through a verified cursor (the page for
/// page copy).
pub(crate) fn verify_trees(src: &MapSource, meta: &Meta, catalog: &Catalog) -> Result<()> {
    verify_written_after(src, meta, catalog, 0)
}

/// The partial check: the tree pages and overflow runs written by txns
/// above `min_txn`, failing with the first problem.
fn verify_written_after(
    src: &MapSource,
    meta: &Meta,
    catalog: &Catalog,
    min_txn: u64,
) -> Result<()> {
    let mut c = Checker {
        src,
        meta: *meta,
        marks: Vec::new(),
        full: false,
        min_txn,
        problems: Vec::new(),
        unlisted: 0,
        skipped: 0,
        kind: TreeKind::PLAIN,
        marking: true,
    };
    for t in &catalog.trees {
        c.kind = t.kind;
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
            problems: Vec::new(),
            unlisted: 0,
            skipped: 0,
            kind: TreeKind::PLAIN,
            marking: true,
        }
    }

    /// A problem found: the partial check fails with it; the full check
    /// records it and goes on. Errors other than damage (I/O) end both.
    fn problem(&mut self, e: Error) -> Result<()> {
        if !self.full {
            return Err(e);
        }
        match e {
            Error::Corrupted { page, detail } => {
                if self.problems.len() < MAX_PROBLEMS {
                    self.problems.push((page, detail));
                } else {
                    self.unlisted += 1;
                }
                Ok(())
            }
            e => Err(e),
        }
    }

    /// Records the problem `result` holds, if any, as one that kept part of
    /// the file from being walked.
    fn skip_on(&mut self, result: Result<()>) -> Result<()> {
        match result {
            Ok(()) => Ok(()),
            Err(e) => {
                self.skipped += 1;
                self.problem(e)
            }
        }
    }

    /// Marks `len` pages from `start` as used by `what`. Marks every page
    /// of the range it can, and then fails with the first conflict: a page
    /// already marked, or pages beyond the page count.
    fn mark(&mut self, start: u64, len: u64, what: &str) -> Result<()> {
        if !self.full || !self.marking {
            return Ok(());
        }
        let end = start.saturating_add(len);
        let count = self.marks.len() as u64;
        let (mut twice, mut first_twice) = (0u64, None);
        for p in start..end.min(count) {
            let m = &mut self.marks[p as usize];
            if *m {
                twice += 1;
                first_twice.get_or_insert(p);
            }
            *m = true;
        }
        if let Some(p) = first_twice {
            return Err(Error::corrupted_page(
                p,
                match twice {
                    1 => format!("{what} page is used twice"),
                    n => format!("{what} page is used twice ({n} pages of the run from {start})"),
                },
            ));
        }
        if end > count {
            let p = start.max(count);
            return Err(Error::corrupted_page(
                p,
                format!("{what} beyond the page count ({count})"),
            ));
        }
        Ok(())
    }

    /// The full check, failing with the first problem (and how many more
    /// were found): `Database::check`.
    pub(crate) fn check_all(self, catalog: &Catalog, state: &State) -> Result<CheckReport> {
        self.collect(catalog, state)?.into_result()
    }

    /// The full check, listing every problem: `Database::check_report`.
    /// `catalog` is the snapshot's; `state` the file's, loaded with its
    /// free pages. When the snapshot's newest commits are logged commits
    /// (pages in the arena: a read-only process rebuilds them in its own
    /// memory), the file's accounting is that of the last checkpoint, whose
    /// trees (`state.catalog`) are walked and marked; the snapshot's trees
    /// are then walked for everything but the marks. (Marking an arena
    /// page reported "tree beyond the page count" until session 25.)
    pub(crate) fn collect(mut self, catalog: &Catalog, state: &State) -> Result<CheckReport> {
        // The chain was read and verified whole by `load_state`.
        for b in state.chain.blobs() {
            let r = self.mark(b.extent.start, b.extent.len, "state blob");
            self.problem_of(r)?;
        }
        if self.src.arena.is_some() {
            for t in &state.catalog.trees {
                self.kind = t.kind;
                self.tree(&t.name, &t.state)?;
            }
            self.marking = false;
        }
        let mut entries = 0;
        for t in &catalog.trees {
            self.kind = t.kind;
            self.tree(&t.name, &t.state)?;
            entries += t.state.entries;
        }
        self.marking = true;
        let free = state.free.all_merged();
        let free = &free[..];
        let in_use = self.marks.iter().filter(|m| **m).count() as u64;
        let mut free_pages = 0;
        for e in free {
            let r = self.mark(e.start, e.len, "free");
            self.problem_of(r)?;
            free_pages += e.len;
        }
        if self.skipped == 0 {
            // Pages neither in use nor free, one problem per run of them.
            // (Not when part of the file was skipped: its pages would all
            // show up here.)
            let mut p = META_SLOTS as usize;
            while p < self.marks.len() {
                if self.marks[p] {
                    p += 1;
                    continue;
                }
                let start = p;
                while p < self.marks.len() && !self.marks[p] {
                    p += 1;
                }
                let detail = match p - start {
                    1 => "page neither in use nor free (leaked)".to_string(),
                    n => format!(
                        "{n} pages ({start} to {}) neither in use nor free (leaked)",
                        p - 1
                    ),
                };
                self.problem(Error::corrupted_page(start as u64, detail))?;
            }
        }
        if self.unlisted > 0 {
            self.problems.push((
                None,
                format!(
                    "{} more problems not listed (a check lists at most {MAX_PROBLEMS})",
                    self.unlisted
                ),
            ));
        }
        Ok(CheckReport {
            page_count: self.meta.page_count,
            pages_in_use: in_use,
            free_pages,
            trees: catalog.trees.len(),
            entries,
            problems: self.problems,
        })
    }

    /// The newest txn a page of the snapshot may carry: its own, or that
    /// of the file commit it was built on (`state_txn`: every file commit
    /// writes its state), which is newer when a read-only process rebuilt
    /// logged commit `T` on a step of a partial checkpoint, since the
    /// steps of `T`'s checkpoint are numbered above `T`
    /// (`txn::checkpoint_steps`). Until session 26 such a check reported
    /// "child txn is newer than the commit".
    fn newest_txn(&self) -> u64 {
        self.meta.txn.max(self.meta.state_txn)
    }

    /// Records the problem `result` holds, if any.
    fn problem_of(&mut self, result: Result<()>) -> Result<()> {
        match result {
            Ok(()) => Ok(()),
            Err(e) => self.problem(e),
        }
    }

    fn tree(&mut self, name: &str, state: &TreeState) -> Result<()> {
        let root = state.root;
        if root.is_empty() || root.txn <= self.min_txn {
            return Ok(());
        }
        if let Err(e) = check_root(root) {
            return self.skip_on(Err(e));
        }
        let mut counts = Counts::default();
        let skipped = self.skipped;
        self.walk(root, None, None, &mut counts, true)?;
        // A skipped subtree leaves the counts short: not a problem of its own.
        if self.full && self.skipped == skipped {
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
                return self.problem(Error::Corrupted {
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
        verify_page(b, pgno, txn, sum)?;
        Ok(b)
    }

    /// Walks the subtree at `at`. In the full check a problem with a page
    /// is recorded and its subtree skipped; the caller goes on.
    fn walk(
        &mut self,
        at: Root,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
        counts: &mut Counts,
        is_root: bool,
    ) -> Result<()> {
        let r = self.walk_page(at, lower, upper, counts, is_root);
        self.skip_on(r)
    }

    fn walk_page(
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
        node.check_cells()?;
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
            let overlay = self.src.overlay_page(at.pgno);
            let mut deleted = 0;
            if let Some(overlay) = &overlay {
                // Each overlaid value replaces an inline value of its
                // length, each tombstone deletes an inline value, and at
                // least one entry stays (`storage::overlay`).
                let r = overlay.visit(self.meta.txn, |i, what| {
                    if i == INSERTED {
                        // Checked below, with the leaf's keys.
                        return Ok(());
                    }
                    let i = usize::from(i);
                    match (i < node.count).then(|| node.leaf_entry(i)).transpose()? {
                        Some((_, LeafValue::Inline(old))) => match what {
                            Overlaid::Value(v) if old.len() == v.len() => Ok(()),
                            Overlaid::Deleted => Ok(()),
                            Overlaid::Value(_) => Err(Error::corrupted_page(
                                at.pgno,
                                format!("value overlay entry for slot {i} does not fit it"),
                            )),
                        },
                        _ => Err(Error::corrupted_page(
                            at.pgno,
                            format!("value overlay entry for slot {i} does not fit it"),
                        )),
                    }
                });
                let r = r.and_then(|()| overlay.deleted_between(self.meta.txn, 0, node.count));
                match r {
                    Ok(n) if n == 0 || n < node.count => deleted = n,
                    Ok(_) => self.problem(Error::corrupted_page(
                        at.pgno,
                        "value overlay deletes every entry of its leaf",
                    ))?,
                    Err(e) => self.problem(e)?,
                }
            }
            counts.entries += (node.count - deleted) as u64;
            if let Some(overlay) = overlay {
                // Each insert adds a key the cells lack, within the range
                // the parent gives, once, of an entry this kind may hold.
                let mut inserts = [Insert::default(); MAX_ENTRIES];
                let r = overlay.inserts(self.meta.txn, &mut inserts);
                match r {
                    Ok(n) => {
                        let inserts = &inserts[..n];
                        for (j, insert) in inserts.iter().enumerate() {
                            let k = insert.key;
                            let problem =
                                if lower.is_some_and(|l| k < l) || upper.is_some_and(|u| k >= u) {
                                    Some(
                                    "an overlay's insert lies outside the range its parent gives"
                                        .to_string(),
                                )
                                } else if node.search_leaf(k)?.is_ok() {
                                    Some("an overlay inserts a key its leaf holds".to_string())
                                } else if inserts[..j].iter().any(|other| other.key == k) {
                                    Some("an overlay inserts a key twice".to_string())
                                } else {
                                    self.kind.entry_problem(k, insert.value.len() as u64)
                                };
                            match problem {
                                Some(detail) => {
                                    self.problem(Error::corrupted_page(at.pgno, detail))?
                                }
                                None => counts.entries += 1,
                            }
                        }
                    }
                    Err(e) => self.problem(e)?,
                }
            }
            if self.kind != TreeKind::PLAIN {
                for i in 0..node.count {
                    let (key, value) = node.leaf_entry(i)?;
                    let value_len = match value {
                        LeafValue::Inline(v) => v.len() as u64,
                        LeafValue::Overflow { len, .. } => len,
                    };
                    if let Some(detail) = self.kind.entry_problem(key, value_len) {
                        self.problem(Error::corrupted_page(
                            at.pgno,
                            format!("slot {i}: {detail}"),
                        ))?;
                    }
                }
            }
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
                    let r = self.overflow(pgno, txn, len, sum, counts);
                    self.skip_on(r)?;
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
            if txn > self.newest_txn() {
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

    /// One overflow value: its run's checksum and header.
    fn overflow(
        &mut self,
        pgno: u64,
        txn: u64,
        len: u64,
        sum: u64,
        counts: &mut Counts,
    ) -> Result<()> {
        let run = self.src.blob_run(pgno)?;
        let pages = (run.len() / self.src.page_size) as u64;
        counts.overflow_pages += pages;
        if txn <= self.min_txn {
            return Ok(());
        }
        if let Err(e) = verify_blob(run, pgno, sum) {
            // Its pages are still the value's: mark them, so that they do
            // not show up as leaked too.
            let _ = self.mark(pgno, pages, "overflow");
            return Err(e);
        }
        blob_data(run, pgno, Some(txn), Some(len))?;
        self.mark(pgno, pages, "overflow")
    }
}
