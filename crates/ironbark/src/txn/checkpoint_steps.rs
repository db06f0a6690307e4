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
//! A file leaf with a value overlay (`storage::arena::FileOverlays`) is
//! the same page in `C` and `T`, its entries not: a step that takes one
//! writes a copy with the overlay applied (a *fold*, `logged::pull_arena`)
//! and frees the leaf, left at its own txn. `T` would still read the leaf,
//! so after each step (but the last), before its sync, the writer
//! publishes `T` again at the step's txn, laid out over the folded copies
//! (a *layout*: new arena copies of the branches above them, and a table
//! of overlays without them; `logged::publish_step_layout`): readers from
//! then on do not read the folded leaves, and the next step reuses them.
//! Each step plans against the published layout (the same entries as `T`).
//!
//! Invariants:
//! - a step splices only where the two trees agree on key ranges: a
//!   subtree of the last step and the run of the newest commit's subtrees
//!   of its height that covers the same keys (one subtree, or several
//!   where it split), when every separator of the first is one of those a
//!   level below the run. Each child of the first then covers what a run
//!   one level down covers, and is kept or spliced into that run in turn;
//!   the run's subtrees are rebuilt as new branches holding the results,
//!   each a subset of its original's cells, so it fits a page. A tree
//!   that grew by splits since `C` keeps `C`'s separators at every level,
//!   so a growing tree goes in steps too, across one root split as well
//!   (the step takes the new root's height). Where the ranges disagree
//!   (leaves, a separator the newest commit lost to a merge, roots more
//!   than a level apart), the newest commit's whole run is taken; a child
//!   whose range spans two new branches cannot be kept, so it is spliced
//!   whatever the step's budget (at most one per boundary, per level);
//! - nothing but layouts of `T` is published between steps, and no write
//!   transaction begins while steps are pending (`WriteTxn::begin`
//!   finishes them first): `T`'s entries stay the newest throughout;
//! - a step frees only pages the layout published after it does not use:
//!   pages of `C` that logged commits stopped using
//!   (`WriterState::logged_freed`, each entry once, with the logged commit
//!   that left it: readers of this process's snapshots from then on do not
//!   hold it, replays do), the leaves it folds (each once, left at its
//!   txn: readers of earlier layouts hold them; until a layout is
//!   published the writer counts the published snapshot as a protector),
//!   and pages earlier steps wrote but the folded copies a layout leads to
//!   (freed as born and left at `C`: no reader reads a step, but a
//!   read-only process rebuilding `T` on a step, a replay registered at
//!   `T` or above, keeps them; `storage::freespace`);
//! - the pages a layout's arena copies take were never retired during the
//!   steps (`logged::Release::None`), so a page number the steps took
//!   (`TakenPages`) never comes back as another page;
//! - the counters of a step's trees (entries, pages by kind) are exact:
//!   they change by those of the subtrees it replaced and of the branches
//!   it rebuilt (a run of branches for one, a new root);
//! - every page whose cells a step copies into a new branch (of the last
//!   step, or of the newest commit) is verified against the checksum its
//!   parent records before the new branch is sealed, as the write path
//!   does: damage is never laundered.

use std::collections::HashSet;

use crate::btree::page::{
    compare_keys, is_file_page, push_branch_cell, slotted_size, value_run_pages, verify_page,
    LeafValue, Node, DIRTY_BIT, HEADER_LEN,
};
use crate::btree::search::{live_entries, Root};
use crate::btree::write::TreeState;
use crate::catalog::Catalog;
use crate::error::Result;
use crate::pages::{DirtyPages, MapSource, PageSource};
use crate::storage::arena::ARENA_BIT;
use crate::storage::freespace::{Extent, Freed};
use crate::storage::meta::Meta;

/// `live_entries` of leaf `node` of the newest commit, for the writer at a
/// checkpoint, when no overlay holds an entry newer than that commit: its
/// overlay's counts of tombstones and inserts (one line), not its lists.
fn live_entries_at_checkpoint(src: &MapSource, node: &Node<'_>) -> Result<usize> {
    if let Some((tombstones, inserts)) = src
        .overlay_page(node.pgno)
        .and_then(|page| page.counts_seen_at(src.overlay_txn))
    {
        return (node.count + inserts)
            .checked_sub(tombstones)
            .ok_or_else(|| crate::error::Error::Corrupted {
                page: Some(node.pgno),
                detail: "an overlay deletes more entries than its leaf holds".into(),
            });
    }
    live_entries(src, node)
}

/// Of a checkpoint that needs more pages than this share of the file (and
/// than the free pages it has), each step writes about that many pages: the
/// file grows by about one step's pages instead of all of them. 16: a
/// random fill of 1M records then ends 0.98x LMDB's file and its close
/// takes 25 syncs (1/64: 0.96x, 89 syncs, a close 35% longer; session 16,
/// docs/benchmarks.md).
pub(crate) const STEP_SHARE: u64 = 16;

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
    taken: TakenPages,
    /// Every file leaf with a value overlay a step wrote folded: the step
    /// that folds one frees it, once (a step that takes it again, in a run
    /// of a layout that could not be published, writes it again).
    folded_leaves: HashSet<u64>,
    /// Folds no published layout leads to yet (`after_layout`).
    pending: Vec<Fold>,
    /// The folded copies that published layouts lead to: the newest
    /// commit's pages now, which no step frees (a step that takes a run
    /// holding one keeps it, as it keeps the file commit's pages).
    copies: HashSet<u64>,
}

/// A file leaf with a value overlay that a step takes, writing a copy of
/// it with the overlay applied.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fold {
    /// Its tree's index in the catalog.
    pub(crate) tree: usize,
    pub(crate) leaf: u64,
    /// The txn that wrote it.
    pub(crate) txn: u64,
    /// Whether no earlier step folded it.
    pub(crate) first: bool,
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
    /// What the step spliced, for the counters.
    pub(crate) splices: SpliceCounts,
    /// The file leaves with value overlays the step takes, sorted: it
    /// writes a copy of each with the overlay applied
    /// (`logged::pull_arena`).
    pub(crate) folds: Vec<u64>,
}

/// Splices of one step that took more than a subtree for a subtree.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SpliceCounts {
    /// Branches rebuilt over a run of two or more subtrees.
    pub(crate) runs: u64,
    /// Trees spliced across a root split.
    pub(crate) grown_roots: u64,
}

/// What a step changes in `Steps`, recorded once it is durable.
pub(crate) struct StepRecord {
    /// `Steps::freed_by_step` with this step's frees.
    freed_by_step: Vec<bool>,
    /// The subtrees it takes.
    taken: TakenPages,
    /// The file leaves with value overlays it takes.
    folded: Vec<Fold>,
}

/// Page numbers of the newest commit whose subtrees steps took: a bitmap
/// by slot for arena pages (nearly all of them: a checkpoint's subtrees
/// are the logged commits', and the arena's slots are few and dense, so
/// the map stays in the cache where a hash set of a checkpoint of 10M
/// records missed it on most of its lookups), a set for file pages.
#[derive(Default)]
pub(crate) struct TakenPages {
    arena: Vec<u64>,
    file: HashSet<u64>,
}

impl TakenPages {
    fn insert(&mut self, pgno: u64) {
        if pgno & ARENA_BIT == 0 {
            self.file.insert(pgno);
            return;
        }
        let slot = pgno & !ARENA_BIT;
        let word = usize::try_from(slot / 64).expect("arena slots fit in memory");
        if self.arena.len() <= word {
            self.arena.resize(word + 1, 0);
        }
        self.arena[word] |= 1 << (slot % 64);
    }

    fn contains(&self, pgno: u64) -> bool {
        if pgno & ARENA_BIT == 0 {
            return self.file.contains(&pgno);
        }
        let slot = pgno & !ARENA_BIT;
        usize::try_from(slot / 64)
            .ok()
            .and_then(|w| self.arena.get(w))
            .is_some_and(|w| w & (1 << (slot % 64)) != 0)
    }

    fn extend(&mut self, other: &TakenPages) {
        if self.arena.len() < other.arena.len() {
            self.arena.resize(other.arena.len(), 0);
        }
        for (w, o) in self.arena.iter_mut().zip(&other.arena) {
            *w |= o;
        }
        self.file.extend(&other.file);
    }
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
            taken: TakenPages::default(),
            folded_leaves: HashSet::new(),
            pending: Vec::new(),
            copies: HashSet::new(),
        }
    }

    /// Records a durable step.
    pub(crate) fn stepped(&mut self, record: StepRecord, meta: Meta) {
        self.freed_by_step = record.freed_by_step;
        self.taken.extend(&record.taken);
        self.folded_leaves
            .extend(record.folded.iter().map(|f| f.leaf));
        if self.pending.is_empty() {
            // The usual case: the layout after the last step was published.
            self.pending = record.folded;
        } else {
            // A leaf folded again (in a run taken again) once, with its
            // newest fold.
            self.pending.extend(record.folded);
            let mut seen = HashSet::new();
            let mut kept: Vec<Fold> = self
                .pending
                .drain(..)
                .rev()
                .filter(|f| seen.insert(f.leaf))
                .collect();
            kept.reverse();
            self.pending = kept;
        }
        self.txn = meta.txn;
        self.page_count = meta.page_count;
    }

    /// Every leaf a step has folded so far.
    pub(crate) fn folded_leaves(&self) -> &HashSet<u64> {
        &self.folded_leaves
    }

    /// The folds no published layout leads to yet, for the layout after
    /// the last step (`logged::publish_step_layout`).
    pub(crate) fn pending_folds(&self) -> &[Fold] {
        &self.pending
    }

    /// After the last step: `copies` (of `pending_folds`, in order) if a
    /// layout of the newest commit leading to them was published at the
    /// step's txn, else `None` (the next layout leads to them too). Each
    /// step frees the leaves it folds as left at its txn
    /// (`plan`): readers of the layouts before it keep them; the layout
    /// published after it, and every reader from then on, does not read
    /// them. Until a layout is published the published snapshot still
    /// reads them, and the writer counts it among the protectors while
    /// steps are pending (`txn::commit`'s `release`).
    pub(crate) fn after_layout(&mut self, copies: Option<&[u64]>) {
        if let Some(copies) = copies {
            debug_assert_eq!(copies.len(), self.pending.len());
            self.copies.extend(copies);
            self.pending.clear();
        }
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
/// through `source`) spliced in as `budget` pages allow, in `dirty`
/// (emptied: its pooled buffers the last step's, `DirtyPages::emptied_keeping`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn plan(
    steps: &Steps,
    last: &Catalog,
    newest: &Catalog,
    file: &MapSource,
    source: &MapSource,
    budget: u64,
    logged_freed: &[Freed],
    dirty: DirtyPages,
) -> Result<StepPlan> {
    debug_assert!(same_trees(last, newest));
    let mut splicer = Splicer {
        steps,
        file,
        source,
        logged_freed,
        dirty,
        freed: Vec::new(),
        freed_by_step: steps.freed_by_step.clone(),
        taken: TakenPages::default(),
        budget: budget as i64,
        cut: false,
        delta: Counts::default(),
        splices: SpliceCounts::default(),
        cells: CellStack::default(),
        walk: Vec::new(),
        newest_has_blobs: true,
        last_has_blobs: true,
        folded: Vec::new(),
        tree: 0,
    };
    let mut catalog = last.clone();
    for (tree, (m, t)) in catalog.trees.iter_mut().zip(&newest.trees).enumerate() {
        splicer.tree = tree;
        // A root that is a file leaf with an overlay is the same page in
        // both, and may hold as many entries (overwrites only).
        if (m.state == t.state && !splicer.has_file_overlay(t.state.root.pgno))
            || splicer.same(m.state.root.pgno, t.state.root.pgno)
        {
            continue;
        }
        if splicer.budget <= 0 {
            splicer.cut = true;
            break;
        }
        splicer.delta = Counts::default();
        splicer.newest_has_blobs = t.state.overflow_pages != 0;
        splicer.last_has_blobs = m.state.overflow_pages != 0;
        let (mr, tr) = (m.state.root, t.state.root);
        let spliced = if mr.pgno != 0 && tr.pgno != 0 && mr.depth == tr.depth {
            splicer.splice(ref_of(mr), ref_of(tr))?
        } else if mr.pgno != 0 && tr.depth == mr.depth + 1 && mr.depth >= 2 {
            splicer.splice_grown_root(ref_of(mr), ref_of(tr))?
        } else {
            // An empty tree on either side, or roots of heights that never
            // mix: the whole tree.
            if tr.pgno != 0 {
                splicer.budget -= splicer.count_taken(ref_of(tr))? as i64;
            }
            splicer.free_subtree(ref_of(mr))?;
            splicer.taken.insert(tr.pgno);
            Some(Spliced::Taken)
        };
        match spliced {
            None => {}
            Some(Spliced::Taken) => m.state = t.state,
            Some(Spliced::Copy(id)) => {
                m.state = TreeState {
                    root: Root {
                        pgno: id,
                        txn: 0,
                        sum: 0,
                        depth: tr.depth,
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
        splices,
        folded,
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
    // The leaves this step folds (the first time): no snapshot from the
    // layout published after it, or the checkpoint, reads them.
    let left = if complete {
        Freed::LEFT_WHEN_FREED
    } else {
        steps.txn + 1
    };
    freed.extend(folded.iter().filter(|f| f.first).map(|f| Freed {
        extent: Extent {
            start: f.leaf,
            len: 1,
        },
        born: f.txn,
        left,
    }));
    let mut folds: Vec<u64> = folded.iter().map(|f| f.leaf).collect();
    folds.sort_unstable();

    Ok(StepPlan {
        catalog,
        dirty,
        freed,
        complete,
        record: StepRecord {
            freed_by_step,
            taken,
            folded,
        },
        splices,
        folds,
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
    /// A new branch (a dirty page) for the last step's: its children
    /// kept, spliced or replaced by the newest commit's (`splice_run`), or
    /// a new root over such branches (`splice_grown_root`).
    Copy(u64),
}

/// A subtree of the newest commit in a run of them, with the separator
/// before it.
#[derive(Clone, Copy)]
struct Sub<'a> {
    key: &'a [u8],
    page: PageRef,
}

/// The cells of the new branches that a step's splices build, encoded
/// back to back. A stack: a splice gathers its cells while the splices of
/// its children gather and build theirs above them, and each splice takes
/// its own off once its branches are built, so a step allocates nothing
/// per cell (the buffers grow to the deepest path's and are kept). Until
/// session 35 each cell was a `Vec` of its own: a `malloc` beside
/// `readwhilewriting` caught 2,873 in 4 s, nearly all here.
#[derive(Default)]
struct CellStack {
    bytes: Vec<u8>,
    /// Each cell's end in `bytes`, and the new branch (of the splice that
    /// pushed it) it belongs to.
    cells: Vec<(usize, usize)>,
}

/// Where a splice's cells start on the stack.
#[derive(Clone, Copy)]
struct CellMark {
    bytes: usize,
    cells: usize,
}

impl CellStack {
    fn mark(&self) -> CellMark {
        CellMark {
            bytes: self.bytes.len(),
            cells: self.cells.len(),
        }
    }

    /// Appends a child to the cells of new branch `branch` of the splice
    /// at `mark`, whose branches take cells in order (its first cell
    /// keeps no key, as every branch's first).
    fn push(&mut self, mark: CellMark, branch: usize, key: &[u8], child: PageRef) {
        let last = self.cells[mark.cells..].last().map(|&(_, b)| b);
        debug_assert!(last.is_none_or(|b| b <= branch), "cells out of order");
        let key = if last == Some(branch) { key } else { &[][..] };
        push_branch_cell(&mut self.bytes, key, child.pgno, child.txn, child.sum);
        self.cells.push((self.bytes.len(), branch));
    }

    /// How many cells from the `i`-th on belong to `branch`.
    fn run_of(&self, i: usize, branch: usize) -> usize {
        self.cells[i..]
            .iter()
            .take_while(|&&(_, b)| b == branch)
            .count()
    }

    /// The `i`-th cell on the stack.
    fn cell(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.cells[i - 1].0 };
        &self.bytes[start..self.cells[i].0]
    }

    /// Takes off every cell pushed since `mark`.
    fn pop_to(&mut self, mark: CellMark) {
        self.bytes.truncate(mark.bytes);
        self.cells.truncate(mark.cells);
    }
}

/// What replaces a subtree of the last step: the run of the newest
/// commit's subtrees itself, or new branches over parts of it (one per
/// subtree of the run).
enum RunRefs {
    Taken,
    Built(Vec<PageRef>),
}

impl RunRefs {
    /// The reference that replaces subtree `i` of `run`.
    fn get(&self, run: &[Sub<'_>], i: usize) -> PageRef {
        match self {
            RunRefs::Taken => run[i].page,
            RunRefs::Built(built) => built[i],
        }
    }
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
    taken: TakenPages,
    /// Pages this step may still write.
    budget: i64,
    /// Set when the budget ran out with pages left to write.
    cut: bool,
    /// How the tree being spliced changes its counters.
    delta: Counts,
    splices: SpliceCounts,
    cells: CellStack,
    /// The pages left to visit in a walk of a subtree (`count_taken`,
    /// `free_subtree`): a buffer kept across walks.
    walk: Vec<PageRef>,
    /// Whether the tree being spliced has overflow values in the newest
    /// commit, and in the last step: a walk reads a leaf's cells for
    /// their blob runs only where its tree has any (its exact counter
    /// says so), as `pull_arena` does, instead of decoding every cell.
    newest_has_blobs: bool,
    last_has_blobs: bool,
    /// The file leaves with value overlays this step takes.
    folded: Vec<Fold>,
    /// The index of the tree being spliced.
    tree: usize,
}

impl<'a> Splicer<'a> {
    /// Builds new branch pages of `page_size` from the cells pushed since
    /// `mark`, one per branch `0..branches`, takes those cells off, and
    /// returns the pages' references (dirty).
    fn build_branches(
        &mut self,
        mark: CellMark,
        branches: usize,
        page_size: usize,
    ) -> Vec<PageRef> {
        let mut refs = Vec::with_capacity(branches);
        let mut at = mark.cells;
        for branch in 0..branches {
            let count = self.cells.run_of(at, branch);
            let cells = &self.cells;
            debug_assert!(
                (at..at + count)
                    .map(|i| slotted_size(cells.cell(i).len()))
                    .sum::<usize>()
                    <= page_size - HEADER_LEN,
                "a spliced branch holds no more than the newest commit's"
            );
            let id = self
                .dirty
                .add_page_from(page_size, false, count, |i| cells.cell(at + i));
            refs.push(PageRef {
                pgno: id,
                txn: 0,
                sum: 0,
            });
            at += count;
        }
        debug_assert_eq!(at, self.cells.cells.len(), "every cell in a branch");
        self.cells.pop_to(mark);
        refs
    }

    /// Whether the last step's page `m` holds the same subtree as the newest
    /// commit's `t`: the same page (but a file leaf with a value overlay,
    /// whose entries differ), or a copy a step took of it.
    fn same(&self, m: u64, t: u64) -> bool {
        (m == t && !self.has_file_overlay(t))
            || self.steps.taken.contains(t)
            || self.taken.contains(t)
    }

    /// Whether `pgno` is a file leaf with a value overlay in the newest
    /// commit (`logged::fold_file_overlays_into_arena` left them there,
    /// with copies of the branches above them).
    fn has_file_overlay(&self, pgno: u64) -> bool {
        is_file_page(pgno)
            && self
                .source
                .file_overlays
                .as_ref()
                .is_some_and(|files| files.unit_of(pgno).is_some())
    }

    /// Splices the newest commit's subtree `t` into the last step's `m`
    /// (which differ, and are of the same height): `None` if the budget
    /// allowed nothing.
    fn splice(&mut self, m: PageRef, t: PageRef) -> Result<Option<Spliced>> {
        let run = [Sub { key: &[], page: t }];
        Ok(self.splice_run(m, &run)?.map(|refs| match refs {
            RunRefs::Taken => Spliced::Taken,
            RunRefs::Built(built) => Spliced::Copy(built[0].pgno),
        }))
    }

    /// Splices the newest commit's root `t`, one level higher than the last
    /// step's root `m` (the root split since): the step's tree takes `t`'s
    /// height, a copy of `t`'s root over what `splice_run` makes of `m`
    /// against `t`'s children.
    fn splice_grown_root(&mut self, m: PageRef, t: PageRef) -> Result<Option<Spliced>> {
        let t_bytes = self.source.page(t.pgno)?;
        let tn = Node::parse(t_bytes, t.pgno, None)?;
        let mut run = Vec::with_capacity(tn.count);
        if !tn.is_leaf {
            for k in 0..tn.count {
                let (pgno, txn) = tn.child(k)?;
                let page = PageRef {
                    pgno,
                    txn,
                    sum: tn.child_sum(k)?,
                };
                run.push(Sub {
                    key: tn.key(k)?,
                    page,
                });
            }
        }
        if run.len() < 2 {
            self.budget -= self.count_taken(t)? as i64;
            self.free_subtree(m)?;
            self.taken.insert(t.pgno);
            return Ok(Some(Spliced::Taken));
        }
        let refs = self
            .splice_run(m, &run)?
            .expect("a run of two or more is always replaced");
        verify_page(t_bytes, t.pgno, t.txn, t.sum)?;
        let mark = self.cells.mark();
        for k in 0..run.len() {
            self.cells.push(mark, 0, tn.key(k)?, refs.get(&run, k));
        }
        let root = self.build_branches(mark, 1, t_bytes.len())[0].pgno;
        // The new root is a level `m` did not have.
        self.budget -= 1;
        self.delta.branch_pages += 1;
        self.splices.grown_roots += 1;
        Ok(Some(Spliced::Copy(root)))
    }

    /// Replaces the last step's subtree `m` by what covers the same keys in
    /// the newest commit: the run of subtrees `run`, each of `m`'s height,
    /// in key order (each with the separator before it; the first's is
    /// never read). Returns what replaces `m` (`RunRefs`), or `None`
    /// when `m` stays (a run of one that the budget or sameness leaves).
    ///
    /// Where every separator of `m` is one of those one level below the run
    /// (its subtrees' separators and the run's own between them), each
    /// child of `m` covers a run one level down, and is kept (the same
    /// page, or one the budget leaves) or spliced into that run,
    /// recursively. A child whose range spans two subtrees of `run` cannot
    /// be kept, so it is spliced whatever the budget: at most one per
    /// boundary between them, on each level.
    /// A tree that grew by splits since `C` keeps `C`'s separators at every
    /// level, so this holds for random inserts. The run's subtrees are then
    /// rebuilt as new branches holding those results: each holds a subset
    /// of its original's cells in number and size, so it fits a page. Where
    /// it does not hold (leaves; a separator `T` lost to a merge), the run
    /// is taken whole, whatever the budget when it is longer than one.
    fn splice_run(&mut self, m: PageRef, run: &[Sub<'a>]) -> Result<Option<RunRefs>> {
        debug_assert!(!run.is_empty());
        let m_bytes = self.file.page(m.pgno)?;
        let mn = Node::parse(m_bytes, m.pgno, Some(m.txn))?;
        if mn.is_leaf {
            return self.take_run(m, run).map(Some);
        }
        let mut nodes = Vec::with_capacity(run.len());
        for sub in run {
            let bytes = self.source.page(sub.page.pgno)?;
            nodes.push((bytes, Node::parse(bytes, sub.page.pgno, None)?));
        }
        // The subtrees one level below the run, with the run entry each is
        // under.
        let mut below: Vec<Sub<'a>> = Vec::new();
        let mut owner: Vec<usize> = Vec::new();
        let mut runs = None;
        if nodes.iter().all(|(_, n)| !n.is_leaf) {
            for (i, (_, node)) in nodes.iter().enumerate() {
                for c in 0..node.count {
                    let (pgno, txn) = node.child(c)?;
                    below.push(Sub {
                        key: if c == 0 { run[i].key } else { node.key(c)? },
                        page: PageRef {
                            pgno,
                            txn,
                            sum: node.child_sum(c)?,
                        },
                    });
                    owner.push(i);
                }
            }
            runs = runs_of(&mn, below.len(), |g| Ok(below[g].key))?;
        }
        let Some(runs) = runs else {
            return self.take_run(m, run).map(Some);
        };
        // The cells of each new branch, one per run entry, in order.
        let mark = self.cells.mark();
        let mut changed = run.len() > 1;
        for j in 0..mn.count {
            let (start, end) = (runs[j], runs.get(j + 1).copied().unwrap_or(below.len()));
            let (pgno, txn) = mn.child(j)?;
            let mc = PageRef {
                pgno,
                txn,
                sum: mn.child_sum(j)?,
            };
            // A child of `m` can stay as it is unless its range spans two
            // of the new branches.
            let fits_one_branch = owner[start] == owner[end - 1];
            let spliced = if end - start == 1 && self.same(mc.pgno, below[start].page.pgno) {
                None
            } else if fits_one_branch && self.budget <= 0 {
                self.cut = true;
                None
            } else {
                self.splice_run(mc, &below[start..end])?
            };
            match spliced {
                None => self.cells.push(mark, owner[start], below[start].key, mc),
                Some(refs) => {
                    changed = true;
                    for g in start..end {
                        let r = refs.get(&below[start..end], g - start);
                        self.cells.push(mark, owner[g], below[g].key, r);
                    }
                }
            }
        }
        if !changed {
            self.cells.pop_to(mark);
            return Ok(None);
        }
        // The new branches get fresh checksums: damage in the pages their
        // cells come from must not be laundered into them.
        verify_page(m_bytes, m.pgno, m.txn, m.sum)?;
        for (sub, (bytes, _)) in run.iter().zip(&nodes) {
            verify_page(bytes, sub.page.pgno, sub.page.txn, sub.page.sum)?;
        }
        let refs = self.build_branches(mark, run.len(), m_bytes.len());
        // The run's branches for the last step's one.
        self.budget -= run.len() as i64;
        self.delta.branch_pages += run.len() as i64 - 1;
        if run.len() > 1 {
            self.splices.runs += 1;
        }
        self.free_page(m, 1)?;
        Ok(Some(RunRefs::Built(refs)))
    }

    /// Replaces the last step's subtree `m` by the run whole.
    fn take_run(&mut self, m: PageRef, run: &[Sub<'a>]) -> Result<RunRefs> {
        for sub in run {
            self.budget -= self.count_taken(sub.page)? as i64;
            self.taken.insert(sub.page.pgno);
        }
        self.free_subtree(m)?;
        Ok(RunRefs::Taken)
    }

    /// The pages a step writes to take the newest commit's subtree `t`
    /// (its arena pages and its file leaves with value overlays, folded;
    /// its other file pages stay where they are), counted into the tree's
    /// counters.
    fn count_taken(&mut self, t: PageRef) -> Result<u64> {
        let mut pages = 0;
        let mut stack = std::mem::take(&mut self.walk);
        stack.clear();
        stack.push(t);
        while let Some(PageRef { pgno, txn, .. }) = stack.pop() {
            if pgno & ARENA_BIT == 0 {
                if self.has_file_overlay(pgno) {
                    // Counted in whole, as `free_subtree` counts out the
                    // last step's (this leaf, or an earlier step's copy
                    // when no layout was published after it).
                    let node = Node::parse(self.source.page(pgno)?, pgno, Some(txn))?;
                    self.delta.leaf_pages += 1;
                    self.delta.entries += live_entries_at_checkpoint(self.source, &node)? as i64;
                    self.taken.insert(pgno);
                    self.folded.push(Fold {
                        tree: self.tree,
                        leaf: pgno,
                        txn,
                        first: !self.steps.folded_leaves.contains(&pgno),
                    });
                    pages += 1;
                }
                continue;
            }
            let node = Node::parse(self.source.page(pgno)?, pgno, None)?;
            pages += 1;
            // Every arena page of the run, not just its root: a layout
            // published after this step copies the branches above the
            // leaves it folded, and the next step then meets the pages
            // below them, which are this step's.
            self.taken.insert(pgno);
            if node.is_leaf {
                self.delta.leaf_pages += 1;
                // Its overlay's deletes leave the file with its copy.
                self.delta.entries += live_entries_at_checkpoint(self.source, &node)? as i64;
                let cells = if self.newest_has_blobs { node.count } else { 0 };
                for i in 0..cells {
                    if let LeafValue::Overflow { pgno: run, len, .. } = node.leaf_entry(i)?.1 {
                        if run & ARENA_BIT != 0 {
                            let page = self.source.page(run)?;
                            let n = value_run_pages(page, run, len, page.len())?;
                            pages += n;
                            self.delta.overflow_pages += n as i64;
                        }
                    }
                }
            } else {
                self.delta.branch_pages += 1;
                for i in 0..node.count {
                    let (pgno, txn) = node.child(i)?;
                    stack.push(PageRef { pgno, txn, sum: 0 });
                }
            }
        }
        self.walk = stack;
        Ok(pages)
    }

    /// Frees the pages of the last step's subtree `m` that the newest
    /// commit does not use (those it uses, it uses with their whole
    /// subtree), counted out of the tree's counters.
    fn free_subtree(&mut self, m: PageRef) -> Result<()> {
        if m.pgno == 0 {
            return Ok(());
        }
        let mut stack = std::mem::take(&mut self.walk);
        stack.clear();
        stack.push(m);
        while let Some(p) = stack.pop() {
            if !self.free_page(p, 1)? {
                if self.has_file_overlay(p.pgno) {
                    // A leaf with an overlay, which the newest commit reads
                    // until a layout or the checkpoint replaces it
                    // (`Steps::after_layout`), and which its taker counts
                    // in whole (`count_taken`).
                    let node = Node::parse(self.file.page(p.pgno)?, p.pgno, Some(p.txn))?;
                    self.delta.leaf_pages -= 1;
                    self.delta.entries -= node.count as i64;
                }
                continue;
            }
            let node = Node::parse(self.file.page(p.pgno)?, p.pgno, Some(p.txn))?;
            if node.is_leaf {
                self.delta.leaf_pages -= 1;
                self.delta.entries -= node.count as i64;
                let cells = if self.last_has_blobs { node.count } else { 0 };
                for i in 0..cells {
                    if let LeafValue::Overflow {
                        pgno,
                        txn,
                        sum,
                        len,
                        ..
                    } = node.leaf_entry(i)?.1
                    {
                        // A run whose header and cell disagree (damage,
                        // which `check` reports) stays allocated: freeing
                        // by either might free pages other values hold, and
                        // failing here would fail every checkpoint after.
                        let page = self.file.page(pgno)?;
                        if let Ok(n) = value_run_pages(page, pgno, len, page.len()) {
                            if self.free_page(PageRef { pgno, txn, sum }, n)? {
                                self.delta.overflow_pages -= n as i64;
                            }
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
        self.walk = stack;
        Ok(())
    }

    /// Frees the last step's run `p` of `pages` pages if the newest commit
    /// does not use it: a page a step wrote, or one the logged commits
    /// stopped using. Returns whether it did.
    fn free_page(&mut self, p: PageRef, pages: u64) -> Result<bool> {
        debug_assert_eq!(p.pgno & (ARENA_BIT | DIRTY_BIT), 0);
        if p.txn > self.steps.replay_to {
            // Written by a step: born at the log base for the replays'
            // sake (see the module's invariants); left there too, since
            // no reader of this process reads a step. But a folded leaf a
            // published layout leads to is the newest commit's page.
            if self.steps.copies.contains(&p.pgno) {
                return Ok(false);
            }
            self.freed.push(Freed {
                extent: Extent {
                    start: p.pgno,
                    len: pages,
                },
                born: self.steps.log_base,
                left: self.steps.log_base,
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

/// For each child of `m`, where its run of `count` subtrees (whose
/// separators `key` gives; the first's is never read) starts, when every
/// separator of `m` is one of theirs (both cover the same range): child
/// `j` of `m` covers what subtrees `starts[j]..starts[j + 1]` do. `None`
/// when a separator of `m` is not one of theirs.
fn runs_of<'k>(
    m: &Node<'_>,
    count: usize,
    key: impl Fn(usize) -> Result<&'k [u8]>,
) -> Result<Option<Vec<usize>>> {
    let mut starts = Vec::with_capacity(m.count);
    starts.push(0);
    let mut i = 1;
    for j in 1..m.count {
        let separator = m.key(j)?;
        while i < count && compare_keys(key(i)?, separator) == std::cmp::Ordering::Less {
            i += 1;
        }
        if i == count || key(i)? != separator {
            return Ok(None);
        }
        starts.push(i);
        i += 1;
    }
    Ok(Some(starts))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn taken_pages_hold_arena_and_file_page_numbers_apart() {
        let mut step = TakenPages::default();
        for pgno in [
            ARENA_BIT,
            ARENA_BIT | 63,
            ARENA_BIT | 64,
            ARENA_BIT | 100_000,
            5,
            64,
        ] {
            assert!(!step.contains(pgno));
            step.insert(pgno);
            assert!(step.contains(pgno));
        }
        assert!(!step.contains(ARENA_BIT | 1), "a neighbour's bit");
        assert!(!step.contains(ARENA_BIT | 5), "file page 5 is not slot 5");
        assert!(!step.contains(63), "slot 63 is not file page 63");
        assert!(!step.contains(ARENA_BIT | (1 << 40)), "past the map");
        let mut all = TakenPages::default();
        all.insert(ARENA_BIT | 7);
        all.extend(&step);
        for pgno in [ARENA_BIT | 7, ARENA_BIT | 100_000, 5, 64, ARENA_BIT] {
            assert!(all.contains(pgno), "{pgno:#x} after extend");
        }
        assert!(!all.contains(ARENA_BIT | 8));
    }
}
