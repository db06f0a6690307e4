//! Partial checkpoints: a checkpoint written as several durable file
//! commits (steps), so that the file needs room for a share of the
//! changed pages at a time rather than for a second copy of all of them.
//!
//! A checkpoint must keep the durable commit `C` whole until a durable
//! commit replaces it, since the log replays onto it after a crash. After
//! random overwrites nearly every leaf is in the arena, so a checkpoint
//! written at once needs as many free pages again as the tree has. Written
//! in steps, step i is a durable commit whose trees are step i-1's with
//! some subtrees replaced by the newest commit `T`'s: every key holds its
//! value at `C` or at `T`. The log's records are blind writes (a put or a
//! delete of a key, whatever it held), so replaying the records after `C`
//! onto such trees gives `T`. A step's meta names `C` as its log base and
//! `T` as the commit the replay must reach (`Meta::log_base`,
//! `Meta::replay_to`); recovery and read-only followers replay from the
//! base. Each step frees the pages of `C` it replaced, which the next step
//! reuses once this one is durable. The last step holds `T` whole and is
//! published as an ordinary checkpoint.
//!
//! Invariants:
//! - a step splices only where the two trees agree on key ranges: a branch
//!   of the last step and the newest commit's branch at the same place and
//!   height, where every separator of the first is one of the second's
//!   (so each child of the first covers what a run of the second's
//!   children covers), make a valid branch of any mix of the first's
//!   children and whole runs of the second's; a tree that grew by splits
//!   since `C` keeps `C`'s separators, so a growing tree goes in steps too.
//!   Where this fails (roots of different heights, a separator the newest
//!   commit lost to a merge), the newest commit's whole subtree is taken;
//! - nothing is published between steps, and no write transaction begins
//!   while steps are pending (`WriteTxn::begin` finishes them first): `T`
//!   stays the newest commit throughout;
//! - a step frees only pages the newest commit does not use: pages of `C`
//!   that logged commits stopped using (`WriterState::logged_freed`, each
//!   entry once), and pages earlier steps wrote (freed as born at `C`, so
//!   that a reader of any snapshot since `C`, or a read-only process
//!   rebuilding `T` on a step, keeps them);
//! - the counters of a step's trees (entries, pages by kind) are exact:
//!   they change by those of the subtrees it replaced;
//! - a file page a step copies (a branch it splices into) is verified
//!   against the checksum its parent records before the copy is sealed,
//!   as the write path does: damage is never laundered.

use std::collections::HashSet;

use crate::btree::page::{
    blob_run_pages, branch_cell, compare_keys, slotted_size, verify_page, LeafValue, Node,
    DIRTY_BIT, HEADER_LEN,
};
use crate::btree::search::Root;
use crate::btree::write::TreeState;
use crate::catalog::Catalog;
use crate::error::Result;
use crate::pages::{DirtyPages, MapSource, PageSource};
use crate::storage::arena::ARENA_BIT;
use crate::storage::freespace::{Extent, Freed};
use crate::storage::meta::Meta;

/// Of a checkpoint that needs more pages than this share of the file (and
/// than the free pages it has), each step writes about that many pages: the
/// file grows by about one step's pages instead of all of them.
pub(crate) const STEP_SHARE: u64 = 64;

/// The fewest pages a step writes, so that small files do not take many
/// steps (each is a sync).
pub(crate) const MIN_STEP_PAGES: u64 = 64;

/// A checkpoint in steps, between its first step and its last (kept by the
/// writer across calls, so that a step that failed, e.g. on a full disk, is
/// taken up again where it stopped).
pub(crate) struct Steps {
    /// The durable file commit the log continues: every step's log base.
    pub(crate) log_base: u64,
    /// The newest commit, which the steps write: every step's replay target.
    pub(crate) replay_to: u64,
    /// The page count of the last step written, or of `log_base`'s commit
    /// before the first: the next step's starts from it.
    pub(crate) page_count: u64,
    /// The txn of the last step written, or `replay_to` before the first:
    /// the next step's is the one after it.
    pub(crate) txn: u64,
    /// Whether a step freed each entry of `WriterState::logged_freed`
    /// (sorted when the steps begin).
    freed_by_step: Vec<bool>,
    /// Pages of the newest commit whose whole subtree a step wrote: the
    /// last step's tree holds a copy of each where the newest has it.
    taken: HashSet<u64>,
}

/// One step, planned: the trees to commit and what they stop using.
pub(crate) struct StepPlan {
    pub(crate) catalog: Catalog,
    pub(crate) dirty: DirtyPages,
    /// Pages the step's trees stop using (all that is left of
    /// `logged_freed` too, for the last step).
    pub(crate) freed: Vec<Freed>,
    /// Whether the step's trees are the newest commit's whole: the last
    /// step.
    pub(crate) complete: bool,
    pub(crate) record: StepRecord,
}

/// What a step changes in `Steps`, recorded once it is durable.
pub(crate) struct StepRecord {
    /// `Steps::freed_by_step` with this step's frees.
    freed_by_step: Vec<bool>,
    /// The subtrees it takes.
    taken: HashSet<u64>,
}

impl Steps {
    /// Begins a checkpoint in steps of the newest commit `replay_to`, whose
    /// logged commits continue the durable file commit `log_base` of
    /// `page_count` pages.
    pub(crate) fn begin(
        log_base: u64,
        page_count: u64,
        replay_to: u64,
        logged_freed: &mut [Freed],
    ) -> Steps {
        logged_freed.sort_unstable_by_key(|f| f.extent.start);
        Steps {
            log_base,
            replay_to,
            page_count,
            txn: replay_to,
            freed_by_step: vec![false; logged_freed.len()],
            taken: HashSet::new(),
        }
    }

    /// Records a durable step.
    pub(crate) fn stepped(&mut self, record: StepRecord, meta: Meta) {
        self.freed_by_step = record.freed_by_step;
        self.taken.extend(record.taken);
        self.txn = meta.txn;
        self.page_count = meta.page_count;
    }
}

/// Whether a checkpoint can go in steps: the last file commit's trees and
/// the newest commit's are the same trees (a tree created or dropped since
/// takes one whole checkpoint).
pub(crate) fn same_trees(last: &Catalog, newest: &Catalog) -> bool {
    last.next_tree_id == newest.next_tree_id
        && last.trees.len() == newest.trees.len()
        && last
            .trees
            .iter()
            .zip(&newest.trees)
            .all(|(a, b)| a.id == b.id && a.name == b.name && a.kind == b.kind)
}

/// Plans the next step: the last step's trees (`last`, read through
/// `file`) with as many of the newest commit's subtrees (`newest`, read
/// through `source`) spliced in as `budget` pages allow.
pub(crate) fn plan(
    steps: &Steps,
    last: &Catalog,
    newest: &Catalog,
    file: &MapSource,
    source: &MapSource,
    budget: u64,
    logged_freed: &[Freed],
) -> Result<StepPlan> {
    debug_assert!(same_trees(last, newest));
    let mut splicer = Splicer {
        steps,
        file,
        source,
        logged_freed,
        dirty: DirtyPages::default(),
        freed: Vec::new(),
        freed_by_step: steps.freed_by_step.clone(),
        taken: HashSet::new(),
        budget: budget as i64,
        cut: false,
        delta: Counts::default(),
    };
    let mut catalog = last.clone();
    for (m, t) in catalog.trees.iter_mut().zip(&newest.trees) {
        if m.state == t.state || splicer.same(m.state.root.pgno, t.state.root.pgno) {
            continue;
        }
        if splicer.budget <= 0 {
            splicer.cut = true;
            break;
        }
        splicer.delta = Counts::default();
        let (mr, tr) = (m.state.root, t.state.root);
        let spliced = if mr.depth == tr.depth {
            splicer.splice(ref_of(mr), ref_of(tr), true)?
        } else {
            // Subtrees of different heights never mix: the whole tree.
            splicer.budget -= splicer.count_taken(ref_of(tr))? as i64;
            Some(Spliced::Taken)
        };
        match spliced {
            None => {}
            Some(Spliced::Taken) => {
                splicer.free_subtree(ref_of(mr))?;
                splicer.taken.insert(tr.pgno);
                m.state = t.state;
            }
            Some(Spliced::Copy(id)) => {
                m.state = TreeState {
                    root: Root {
                        pgno: id,
                        txn: 0,
                        sum: 0,
                        depth: mr.depth,
                    },
                    entries: add(m.state.entries, splicer.delta.entries),
                    branch_pages: add(m.state.branch_pages, splicer.delta.branch_pages),
                    leaf_pages: add(m.state.leaf_pages, splicer.delta.leaf_pages),
                    overflow_pages: add(m.state.overflow_pages, splicer.delta.overflow_pages),
                };
            }
        }
    }
    let complete = !splicer.cut;
    let Splicer {
        dirty,
        mut freed,
        mut freed_by_step,
        taken,
        ..
    } = splicer;
    if complete {
        // The newest trees whole: nothing of `C` the logged commits freed
        // is used any more.
        for (f, done) in logged_freed.iter().zip(freed_by_step.iter_mut()) {
            if !*done {
                freed.push(*f);
                *done = true;
            }
        }
    }
    Ok(StepPlan {
        catalog,
        dirty,
        freed,
        complete,
        record: StepRecord {
            freed_by_step,
            taken,
        },
    })
}

fn add(count: u64, delta: i64) -> u64 {
    count.checked_add_signed(delta).unwrap_or_else(|| {
        debug_assert!(false, "a step's counter went below zero");
        0
    })
}

/// A reference to a page, as a parent records it.
#[derive(Clone, Copy)]
struct PageRef {
    pgno: u64,
    txn: u64,
    sum: u64,
}

fn ref_of(r: Root) -> PageRef {
    PageRef {
        pgno: r.pgno,
        txn: r.txn,
        sum: r.sum,
    }
}

/// What a splice put where the last step's page was.
enum Spliced {
    /// The newest commit's page, with its whole subtree.
    Taken,
    /// A copy of the last step's branch with some children replaced (a
    /// dirty page).
    Copy(u64),
}

/// Where a child of a spliced branch comes from.
#[derive(Clone, Copy)]
enum Source {
    /// The last step's child, unchanged.
    Kept,
    /// The newest commit's children `start..end`, whole subtrees.
    Group(usize, usize),
    /// A spliced copy of the last step's child (a dirty page).
    Copy(u64),
}

/// Entries and pages by kind, as a tree's counters keep them.
#[derive(Default)]
struct Counts {
    entries: i64,
    branch_pages: i64,
    leaf_pages: i64,
    overflow_pages: i64,
}

struct Splicer<'a> {
    steps: &'a Steps,
    /// The file as the last step left it.
    file: &'a MapSource,
    /// The newest commit's pages (arena and file).
    source: &'a MapSource,
    logged_freed: &'a [Freed],
    dirty: DirtyPages,
    freed: Vec<Freed>,
    freed_by_step: Vec<bool>,
    taken: HashSet<u64>,
    /// Pages this step may still write.
    budget: i64,
    /// Set when the budget ran out with pages left to write.
    cut: bool,
    /// How the tree being spliced changes its counters.
    delta: Counts,
}

impl Splicer<'_> {
    /// Whether the last step's page `m` holds the same subtree as the newest
    /// commit's `t`: the same page, or a copy a step took of it.
    fn same(&self, m: u64, t: u64) -> bool {
        m == t || self.steps.taken.contains(&t) || self.taken.contains(&t)
    }

    /// Splices the newest commit's subtree `t` into the last step's `m`
    /// (which differ, and are of the same depth): `None` if the budget
    /// allowed nothing.
    ///
    /// Where the two branches' separators differ, the splice still goes
    /// child by child when every separator of `m` is one of `t`'s (a tree
    /// that grew by splits since `C` keeps `C`'s separators): each child of
    /// `m` then covers the range of a run of `t`'s children, a *group*,
    /// and the new branch holds for each child of `m` either it (spliced,
    /// for a group of one) or its whole group. Its cells are then a subset
    /// of `t`'s in number and size, so it fits a page. Else `t` is taken
    /// whole.
    fn splice(&mut self, m: PageRef, t: PageRef, top: bool) -> Result<Option<Spliced>> {
        if m.pgno == 0 || t.pgno == 0 {
            // An empty tree on either side: only the whole will do.
            debug_assert!(top, "an empty subtree below a root");
            if t.pgno != 0 {
                self.budget -= self.count_taken(t)? as i64;
            }
            return Ok(Some(Spliced::Taken));
        }
        let m_bytes = self.file.page(m.pgno)?;
        let t_bytes = self.source.page(t.pgno)?;
        let mn = Node::parse(m_bytes, m.pgno, Some(m.txn))?;
        let tn = Node::parse(t_bytes, t.pgno, None)?;
        let groups = if mn.is_leaf || tn.is_leaf {
            None
        } else {
            groups_of(&mn, &tn)?
        };
        let Some(groups) = groups else {
            let pages = self.count_taken(t)?;
            self.budget -= pages as i64;
            return Ok(Some(Spliced::Taken));
        };
        // The new branch's children, one entry per child of `m` (a group
        // of `t`'s children where it took one): `None` while nothing
        // changed.
        let mut children: Vec<(usize, Source)> = Vec::with_capacity(mn.count);
        let mut changed = false;
        for j in 0..mn.count {
            let (start, end) = (groups[j], groups.get(j + 1).copied().unwrap_or(tn.count));
            let mc = PageRef {
                pgno: mn.child(j)?.0,
                txn: mn.child(j)?.1,
                sum: mn.child_sum(j)?,
            };
            let t_ref = |i: usize| -> Result<PageRef> {
                let (pgno, txn) = tn.child(i)?;
                Ok(PageRef {
                    pgno,
                    txn,
                    sum: tn.child_sum(i)?,
                })
            };
            if end - start == 1 && self.same(mc.pgno, tn.child(start)?.0) {
                children.push((j, Source::Kept));
                continue;
            }
            if self.budget <= 0 {
                self.cut = true;
                children.push((j, Source::Kept));
                continue;
            }
            if end - start > 1 {
                // The group whole, for the one child it splits into.
                for i in start..end {
                    let tc = t_ref(i)?;
                    self.budget -= self.count_taken(tc)? as i64;
                    self.taken.insert(tc.pgno);
                }
                self.free_subtree(mc)?;
                children.push((j, Source::Group(start, end)));
                changed = true;
                continue;
            }
            let tc = t_ref(start)?;
            let source = match self.splice(mc, tc, false)? {
                None => Source::Kept,
                Some(Spliced::Taken) => {
                    self.free_subtree(mc)?;
                    self.taken.insert(tc.pgno);
                    Source::Group(start, end)
                }
                Some(Spliced::Copy(id)) => Source::Copy(id),
            };
            changed |= !matches!(source, Source::Kept);
            children.push((j, source));
        }
        if !changed {
            return Ok(None);
        }
        // The new branch gets a fresh checksum: damage in either page
        // must not be laundered into it.
        verify_page(m_bytes, m.pgno, m.txn, m.sum)?;
        if children.iter().any(|(_, s)| matches!(s, Source::Group(..))) {
            verify_page(t_bytes, t.pgno, t.txn, t.sum)?;
        }
        let mut cells = Vec::with_capacity(tn.count);
        for &(j, source) in &children {
            match source {
                Source::Kept => {
                    let (pgno, txn) = mn.child(j)?;
                    cells.push(branch_cell(mn.key(j)?, pgno, txn, mn.child_sum(j)?));
                }
                Source::Copy(id) => cells.push(branch_cell(mn.key(j)?, id, 0, 0)),
                Source::Group(start, end) => {
                    for i in start..end {
                        let (pgno, txn) = tn.child(i)?;
                        cells.push(branch_cell(tn.key(i)?, pgno, txn, tn.child_sum(i)?));
                    }
                }
            }
        }
        debug_assert!(
            cells.iter().map(|c| slotted_size(c.len())).sum::<usize>()
                <= m_bytes.len() - HEADER_LEN,
            "a spliced branch holds no more than the newest commit's"
        );
        self.budget -= 1;
        let id = self.dirty.add_page(m_bytes.len(), false, &cells);
        // The new branch replaces the last step's: one branch for one.
        self.free_page(m, 1)?;
        Ok(Some(Spliced::Copy(id)))
    }

    /// The pages a step writes to take the newest commit's subtree `t`
    /// (its arena pages; its file pages stay where they are), counted into
    /// the tree's counters.
    fn count_taken(&mut self, t: PageRef) -> Result<u64> {
        let mut pages = 0;
        let mut stack = vec![t.pgno];
        while let Some(pgno) = stack.pop() {
            if pgno & ARENA_BIT == 0 {
                continue;
            }
            let node = Node::parse(self.source.page(pgno)?, pgno, None)?;
            pages += 1;
            if node.is_leaf {
                self.delta.leaf_pages += 1;
                self.delta.entries += node.count as i64;
                for i in 0..node.count {
                    if let LeafValue::Overflow { pgno: run, .. } = node.leaf_entry(i)?.1 {
                        if run & ARENA_BIT != 0 {
                            let n = blob_run_pages(self.source.page(run)?);
                            pages += n;
                            self.delta.overflow_pages += n as i64;
                        }
                    }
                }
            } else {
                self.delta.branch_pages += 1;
                for i in 0..node.count {
                    stack.push(node.child(i)?.0);
                }
            }
        }
        Ok(pages)
    }

    /// Frees the pages of the last step's subtree `m` that the newest
    /// commit does not use (those it uses, it uses with their whole
    /// subtree), counted out of the tree's counters.
    fn free_subtree(&mut self, m: PageRef) -> Result<()> {
        if m.pgno == 0 {
            return Ok(());
        }
        let mut stack = vec![m];
        while let Some(p) = stack.pop() {
            if !self.free_page(p, 1)? {
                continue;
            }
            let node = Node::parse(self.file.page(p.pgno)?, p.pgno, Some(p.txn))?;
            if node.is_leaf {
                self.delta.leaf_pages -= 1;
                self.delta.entries -= node.count as i64;
                for i in 0..node.count {
                    if let LeafValue::Overflow { pgno, txn, sum, .. } = node.leaf_entry(i)?.1 {
                        let n = blob_run_pages(self.file.page(pgno)?);
                        if self.free_page(PageRef { pgno, txn, sum }, n)? {
                            self.delta.overflow_pages -= n as i64;
                        }
                    }
                }
            } else {
                self.delta.branch_pages -= 1;
                for i in 0..node.count {
                    let (pgno, txn) = node.child(i)?;
                    stack.push(PageRef {
                        pgno,
                        txn,
                        sum: node.child_sum(i)?,
                    });
                }
            }
        }
        Ok(())
    }

    /// Frees the last step's run `p` of `pages` pages if the newest commit
    /// does not use it: a page a step wrote, or one the logged commits
    /// stopped using. Returns whether it did.
    fn free_page(&mut self, p: PageRef, pages: u64) -> Result<bool> {
        debug_assert_eq!(p.pgno & (ARENA_BIT | DIRTY_BIT), 0);
        if p.txn > self.steps.replay_to {
            // Written by a step: born at the log base for the readers'
            // sake (see the module's invariants).
            self.freed.push(Freed {
                extent: Extent {
                    start: p.pgno,
                    len: pages,
                },
                born: self.steps.log_base,
            });
            return Ok(true);
        }
        let Ok(i) = self
            .logged_freed
            .binary_search_by_key(&p.pgno, |f| f.extent.start)
        else {
            // The newest commit uses it.
            return Ok(false);
        };
        if self.freed_by_step[i] {
            debug_assert!(false, "page {} freed twice by checkpoint steps", p.pgno);
            return Ok(false);
        }
        self.freed_by_step[i] = true;
        self.freed.push(self.logged_freed[i]);
        Ok(true)
    }
}

/// For each child of `m`, where its run of `t`'s children starts, when every
/// separator of `m` is one of `t`'s (both branches cover the same range):
/// child `j` of `m` covers what `t`'s children `starts[j]..starts[j + 1]`
/// do. `None` when a separator of `m` is not one of `t`'s.
fn groups_of(m: &Node<'_>, t: &Node<'_>) -> Result<Option<Vec<usize>>> {
    let mut starts = Vec::with_capacity(m.count);
    starts.push(0);
    let mut i = 1;
    for j in 1..m.count {
        let key = m.key(j)?;
        while i < t.count && compare_keys(t.key(i)?, key) == std::cmp::Ordering::Less {
            i += 1;
        }
        if i == t.count || t.key(i)? != key {
            return Ok(None);
        }
        starts.push(i);
        i += 1;
    }
    Ok(Some(starts))
}
