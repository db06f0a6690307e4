//! The commit protocol, in one place.
//!
//! 1. Pending pages that no protector (live reader, durable commit) can
//!    read become reusable.
//! 2. Every dirty page gets its real page number, chosen so the commit's
//!    pages are as contiguous as possible (one best-fit run if one exists).
//! 3. Parents are patched with their children's numbers and txn ids; every
//!    page is stamped with its number and txn and checksummed.
//! 4. Pages this commit stopped using become *pending*, tagged with the txn
//!    that wrote them and this txn; the commit's record of what it changed
//!    goes to the state chain (`state.rs`), after its own allocation.
//! 5. The pages go to the file sorted by page number, coalesced into as few
//!    `pwritev` calls as possible; then the meta page, into the slot that
//!    does *not* hold the newest durable commit.
//! 6. With `Durability::Immediate`, one `fdatasync`. If power fails before
//!    it completes, the new meta may be on disk while some pages are not;
//!    open verifies every page written since the last durable commit
//!    (checksums plus the txn ids recorded by parents) and falls back to the
//!    other slot, which this protocol never overwrote.
//!
//! See docs/design.md for the full argument.

use crate::sync::Ordering;

use crate::btree::page::DIRTY_BIT;
use crate::btree::page::{new_blob, seal};
use crate::catalog::Catalog;
use crate::error::Result;
use crate::options::{BrokenProtocol, Durability};
use crate::pages::{DirtyPages, MapSource};
use crate::state::{self, BlobRef, Chain, Plan};
use crate::storage::arena::ARENA_BIT;
use crate::storage::file::DataFile;
use crate::storage::freespace::{Allocator, Extent, FreeSpace, Freed, Pending, Protector};
use crate::storage::meta::{encode_zones, max_zones, Meta};
use crate::txn::checkpoint_steps::{self, StepPlan, Steps};
use crate::txn::logged::{self, Logged};
use crate::txn::seal::{order_dirty, seal_all};
use crate::txn::shared::{Shared, Snapshot, WriterGuard, WriterState, THOROUGH_INTERVAL};

/// Bytes of pages held back only for crash safety (under
/// `Durability::None`: pages the last durable commit can read) above which
/// a commit first syncs, so they can be reused. A fixed budget, not a share
/// of the file, so the file cannot feed its own growth; the held pages can
/// never exceed one copy of the durable commit's data either. Large enough
/// that the sync is rare: the page cache absorbs rewrites of the same pages
/// between two syncs (at 1M records, one sync per ~10,000 single-put
/// commits), where a 4 MiB budget made single-put overwrites 2x slower and
/// synced after every 1000-put commit.
const HELD_BYTES: u64 = 64 << 20;

/// The smallest step by which the file grows.
const GROWTH_MIN_BYTES: u64 = 1 << 20;

/// What a write transaction changed, handed to the commit.
pub(crate) struct Changes<'db> {
    pub(crate) catalog: Box<Catalog>,
    pub(crate) dirty: Box<DirtyPages>,
    /// Committed pages (file pages, or arena pages) it stopped using.
    pub(crate) freed: Vec<Freed>,
    /// Its redo record, whole if `loggable`; the buffer goes back to the
    /// writer either way, so that the next transaction's record does not
    /// grow a new one.
    pub(crate) redo: Vec<u8>,
    /// Whether it recorded its whole redo record (small enough to log).
    pub(crate) loggable: bool,
    /// Its value overlay entries (`storage::overlay`), cut off (when this
    /// drops, before the writer lock is released) unless the commit
    /// succeeds.
    pub(crate) overlays: crate::txn::overlay_undo::OverlayUndo<'db>,
}

/// Commits a write transaction's changes (the caller checked that there
/// are some and that no mutation failed part-way): logged (the redo
/// record to the log, the pages to the arena) when that is possible, else
/// as a checkpoint (every page to the file).
pub(crate) fn commit(
    shared: &Shared,
    mut writer: WriterGuard<'_>,
    base: &Snapshot,
    changes: Changes,
    durability: Durability,
) -> Result<()> {
    let w = &mut *writer;
    if w.poisoned {
        return Err(crate::Error::Poisoned);
    }
    let Changes {
        mut catalog,
        mut dirty,
        mut freed,
        redo,
        loggable,
        mut overlays,
    } = changes;
    if loggable {
        // Blobs are sealed at put only once a transaction stopped logging.
        assert!(
            w.taken_ahead.is_empty(),
            "a logged transaction with blobs sealed at put"
        );
        let payload = &redo;
        let mut attempts = 0;
        while shared.may_log(w) && attempts < 2 {
            attempts += 1;
            let logged = logged::write(
                shared,
                w,
                base,
                &mut catalog,
                &mut dirty,
                &freed,
                payload,
                overlays.leaves(),
                durability,
            );
            match logged {
                Ok(Logged::SyncFirst) => {
                    // The log restarts from `base`, which must be durable.
                    let synced = sync_published(shared, w);
                    shared.save_durable(w);
                    if let Err(e) = synced {
                        w.dirty_spare = Some(dirty.emptied(shared.limits.page_size));
                        return Err(e);
                    }
                }
                Ok(Logged::Done) => {
                    let inserted = overlays.inserted;
                    let kept = overlays.keep();
                    w.overlay_marks = overlays.take_buffer();
                    shared
                        .counters
                        .values_overlaid
                        .fetch_add(kept, Ordering::Relaxed);
                    shared
                        .counters
                        .inserts_overlaid
                        .fetch_add(inserted, Ordering::Relaxed);
                    w.dirty_spare = Some(dirty.emptied(shared.limits.page_size));
                    w.redo_buffer = redo;
                    w.freed_buffer = freed;
                    logged::publish(shared, w, base, &mut catalog);
                    w.catalog_spare = Some(catalog);
                    w.state_txn = base.txn() + 1;
                    shared.counters.commits.fetch_add(1, Ordering::Relaxed);
                    return Ok(());
                }
                Ok(Logged::No) => break,
                Err(e) => {
                    w.dirty_spare = Some(dirty.emptied(shared.limits.page_size));
                    return Err(e);
                }
            }
        }
    }
    w.redo_buffer = redo;
    // The blobs sealed as they were put have their pages already.
    let ahead = &mut w.taken_ahead;
    let mut space = SpaceLog {
        freed: std::mem::take(&mut freed),
        taken: std::mem::take(&mut ahead.taken),
        shrink: false,
        ahead_runs: std::mem::take(&mut ahead.runs),
        file_end: std::mem::take(&mut ahead.file_end),
    };
    let result = write_commit(
        shared,
        w,
        base,
        &mut catalog,
        &mut dirty,
        &mut space,
        durability,
        Part::Whole,
    );
    w.dirty_spare = Some(dirty.emptied(shared.limits.page_size));
    let published = finish(
        shared,
        w,
        base,
        std::mem::take(&mut *catalog),
        &space,
        result,
    );
    w.catalog_spare = Some(catalog);
    if published.is_ok() {
        let inserted = overlays.inserted;
        let kept = overlays.keep();
        w.overlay_marks = overlays.take_buffer();
        shared
            .counters
            .values_overlaid
            .fetch_add(kept, Ordering::Relaxed);
        shared
            .counters
            .inserts_overlaid
            .fetch_add(inserted, Ordering::Relaxed);
    }
    published
}

/// Publishes a written commit, or gives back what a failed one took.
fn finish(
    shared: &Shared,
    w: &mut WriterState,
    base: &Snapshot,
    catalog: Catalog,
    space: &SpaceLog,
    result: Result<(Meta, Chain)>,
) -> Result<()> {
    let outcome = match result {
        Ok((meta, chain)) => {
            w.chain = chain;
            // Every page of the logged commits is in the file now.
            w.arena_space.retire_all(meta.txn);
            w.logged_freed.clear();
            w.checkpoint_catalog = None;
            w.checkpoint_steps = None;
            shared.set_logged_by(0);
            let map = shared.map.lock().unwrap_or_else(|e| e.into_inner()).clone();
            shared.publish(
                w,
                Snapshot {
                    meta,
                    source: MapSource {
                        map,
                        page_count: meta.page_count,
                        page_size: shared.limits.page_size,
                        arena: None,
                        overlay_txn: 0,
                        file_overlays: None,
                    },
                    catalog,
                },
            );
            w.state_txn = meta.txn;
            shared.counters.commits.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
        Err(e) => {
            // Nothing was published: the pages written went to free space,
            // which gets them back; the pages this commit freed are in use.
            w.free.roll_back(base.txn() + 1, &space.taken);
            // And the branch regions it started lie past the file.
            w.free.forget_zones_from(base.meta.page_count);
            Err(e)
        }
    };
    shared.save_durable(w);
    outcome
}

/// Gives the free pages at the end of the file back to the filesystem
/// (`Database::shrink_to_fit`); returns the bytes released.
///
/// 1. A sync, so every free page no reader can see is reusable.
/// 2. A durable commit that writes a new base of the state chain without
///    the free tail and with the smaller page count.
/// 3. The same meta into the other slot, synced, so that both metas (the
///    one `open` tries first and its fallback) fit in the shorter file.
/// 4. Only then the file is cut: a crash at any step leaves metas that
///    both fit in the file as it is.
pub(crate) fn shrink(shared: &Shared, w: &mut WriterState) -> Result<u64> {
    if w.poisoned {
        return Err(crate::Error::Poisoned);
    }
    // Twice at most: the chain's blobs may sit at the end of the file, and
    // the first new base moves them down (their pages are free once it is
    // durable).
    for _ in 0..2 {
        sync_published(shared, w)?;
        release(shared, w);
        let base = shared.published.load_full();
        let end = base.meta.page_count;
        let chain_at_end = w.chain.blobs().any(|b| b.extent.end() == end);
        if w.free.reusable_tail(end).is_none() && !chain_at_end {
            break;
        }
        commit_of_newest(shared, w, true, Durability::Immediate)?;
    }
    let snap = shared.published.load_full();
    write_clean_mark(shared, w, &snap.meta)?;
    let ps = shared.limits.page_size as u64;
    let old_len = w.file_len.max(shared.file.len()?);
    let new_len = snap.meta.page_count * ps;
    if new_len >= old_len {
        return Ok(0);
    }
    shared.file.set_len(new_len)?;
    w.file_len = new_len;
    w.allocated_to = w.allocated_to.min(new_len);
    Ok(old_len - new_len)
}

/// What a commit does to free space: the pages it stops using, the free
/// extents it takes (given back if it fails), and whether it gives the free
/// tail of the file back (`shrink`).
struct SpaceLog {
    freed: Vec<Freed>,
    taken: Vec<Extent>,
    shrink: bool,
    /// The runs the transaction's blobs took as they were put
    /// (`TakenAhead`): those from free space are in `taken` already.
    ahead_runs: Vec<Extent>,
    /// The file's end after those runs (0: none took it).
    file_end: u64,
}

/// What `write_commit` writes.
#[derive(Clone, Copy)]
enum Part<'a> {
    /// The newest trees whole (a commit, or a checkpoint at once): the file
    /// pages the logged commits stopped using are freed with it.
    Whole,
    /// A step of a checkpoint (`txn::checkpoint_steps`), which chose what
    /// it frees; its meta names the log's records it needs. `folds`: the
    /// file leaves with value overlays it took, sorted, each written as a
    /// copy with its overlay applied. `sync_later`: written, not synced
    /// (the caller publishes a layout first, then syncs).
    Step {
        log_base: u64,
        replay_to: u64,
        folds: &'a [u64],
        sync_later: bool,
    },
}

/// Pages sealed on a copy (spilled or parked: `DirtyPages::seal_with`),
/// gathered into runs of consecutive page numbers and written a run per
/// call. The seal goes from the last page of a commit to the first, so a
/// run grows downwards, from the end of the buffer. At most
/// [`SEALED_RUN_BYTES`] are held: a checkpoint of the whole arena holds no
/// second copy of it, and a larger blob run (a spilled value of a large
/// transaction) is written as it comes, from the seal's copy.
struct SealedRuns {
    page_size: u64,
    /// Empty until the first page.
    buf: Vec<u8>,
    /// Where the run held starts in `buf` (`buf.len()`: none held).
    start: usize,
    /// The page number of the run's first page.
    first: u64,
    calls: u64,
    bytes: u64,
}

/// The most a commit holds of the pages it seals on copies.
const SEALED_RUN_BYTES: usize = 1 << 20;

impl SealedRuns {
    fn new(page_size: usize) -> SealedRuns {
        SealedRuns {
            page_size: page_size as u64,
            buf: Vec::new(),
            start: 0,
            first: 0,
            calls: 0,
            bytes: 0,
        }
    }

    /// Takes sealed page (or blob run) `sealed`, which goes at page `pgno`.
    fn push(&mut self, file: &DataFile, pgno: u64, sealed: &[u8]) -> Result<()> {
        if self.buf.is_empty() {
            self.buf = vec![0u8; SEALED_RUN_BYTES];
            self.start = self.buf.len();
        }
        let held = self.start < self.buf.len();
        let just_below = pgno * self.page_size + sealed.len() as u64 == self.first * self.page_size;
        if held && !(just_below && sealed.len() <= self.start) {
            self.flush(file)?;
        }
        if sealed.len() > self.start {
            self.calls += file.write_vectored_at(&[sealed], pgno * self.page_size)?;
            self.bytes += sealed.len() as u64;
            return Ok(());
        }
        self.start -= sealed.len();
        self.buf[self.start..self.start + sealed.len()].copy_from_slice(sealed);
        self.first = pgno;
        Ok(())
    }

    /// Writes the run held, if any.
    fn flush(&mut self, file: &DataFile) -> Result<()> {
        if self.start < self.buf.len() {
            let run = &self.buf[self.start..];
            self.calls += file.write_vectored_at(&[run], self.first * self.page_size)?;
            self.bytes += run.len() as u64;
            self.start = self.buf.len();
        }
        Ok(())
    }
}

/// Writes `writes` (page number, sealed bytes), sorted by page number,
/// with one `pwritev` per run of consecutive pages (`bufs` gathers each
/// run: a step writes thousands of runs where it reuses scattered free
/// pages). Returns the write calls made and the bytes written.
fn write_runs<'b>(
    file: &DataFile,
    ps: usize,
    writes: &[(u64, &'b [u8])],
    bufs: &mut Vec<&'b [u8]>,
) -> Result<(u64, u64)> {
    debug_assert!(writes.is_sorted_by_key(|w| w.0));
    let (mut calls, mut bytes) = (0, 0);
    let mut group_start = 0;
    for i in 1..=writes.len() {
        let contiguous = i < writes.len()
            && writes[i - 1].0 + (writes[i - 1].1.len() / ps) as u64 == writes[i].0;
        if !contiguous {
            bufs.clear();
            bufs.extend(writes[group_start..i].iter().map(|w| w.1));
            calls += file.write_vectored_at(bufs, writes[group_start].0 * ps as u64)?;
            bytes += bufs.iter().map(|b| b.len() as u64).sum::<u64>();
            group_start = i;
        }
    }
    Ok((calls, bytes))
}

#[allow(clippy::too_many_arguments)]
fn write_commit(
    shared: &Shared,
    w: &mut WriterState,
    base: &Snapshot,
    catalog: &mut Catalog,
    dirty: &mut DirtyPages,
    space: &mut SpaceLog,
    durability: Durability,
    part: Part,
) -> Result<(Meta, Chain)> {
    let limits = shared.limits;
    let ps = limits.page_size;
    let txn = base.txn() + 1;

    // 1. Free space: what no protector can read becomes reusable.
    release_space(shared, w, durability, base.txn(), dirty.pages.len() as u64)?;

    // A checkpoint: the pages of logged commits join this commit's dirty
    // pages, and the file pages those commits stopped using are freed here
    // (as if by this commit, which only makes their reuse wait longer).
    // First the file leaves with value overlays are copied, so that no
    // page reaches the file with one; a step never has any
    // (`wants_steps`).
    match part {
        Part::Whole => logged::fold_file_overlays(
            catalog,
            dirty,
            &mut space.freed,
            &w.logged_freed,
            &base.source,
            limits,
            logged::Fold::Leaves,
            |_| {},
        )?,
        Part::Step { .. } => {}
    }
    let folds = match part {
        Part::Whole => &[][..],
        Part::Step { folds, .. } => folds,
    };
    if w.arena_space.live_pages() > 0 || !folds.is_empty() {
        logged::pull_arena(catalog, dirty, &base.source, folds)?;
    }
    space.freed.retain(|f| f.extent.start & ARENA_BIT == 0);
    if let Part::Whole = part {
        space.freed.extend_from_slice(&w.logged_freed);
    }

    // 2. Page numbers. A shrinking commit first takes the free tail off
    // the end of the file (given back if the commit fails).
    let mut page_count = base.meta.page_count.max(space.file_end);
    if space.shrink {
        if let Some(tail) = w.free.take_reusable_tail(page_count) {
            space.taken.push(tail);
            page_count = tail.start;
        }
    }
    let mut placement = std::mem::take(&mut w.placement);
    order_dirty(catalog, dirty, &mut placement)?;
    free_unreached(
        dirty,
        &placement.blobs,
        &space.ahead_runs,
        base.txn(),
        &mut space.taken,
        &mut w.free,
        &mut space.freed,
    );
    let (order, blobs, real) = (&placement.pages, &placement.blobs, &mut placement.real);
    // A shrinking commit gives the regions up, so that their free pages
    // at the file's end go too; the next commit starts new ones.
    let region_pages = if space.shrink {
        0
    } else {
        (shared.branch_region_bytes / ps) as u64
    };
    if w.free.region_pages() != region_pages {
        w.free.set_region_pages(region_pages);
    }
    let mut alloc = Allocator {
        free: &mut w.free,
        page_count,
        taken: &mut space.taken,
    };
    for &b in blobs {
        real[(b & !DIRTY_BIT) as usize] = match dirty.sealed_at_put(b) {
            Some((pgno, _)) => pgno,
            None => alloc.run((dirty.get(b).len() / ps) as u64),
        };
    }
    // Branches go to branch regions (`FreeSpace::add_zone`), apart from
    // the leaves, so that a lookup's upper levels lie in a few 2 MiB
    // regions, each one folio of the page cache, mapped by one TLB entry.
    // A file too small for regions, even after this commit, keeps every
    // page in one order (pre-order: leaves in key order, each branch
    // before its children).
    let mut new_regions = Vec::new();
    let mut unused = Vec::new();
    let regions = alloc.may_place_regions(order.len() as u64);
    let branches = if regions {
        order.iter().filter(|&&id| dirty.is_branch(id)).count() as u64
    } else {
        0
    };
    // Leaves first: the file's size after them decides whether it is
    // large enough for regions (a checkpoint of a new file's first logged
    // commits).
    let runs = alloc.pages(order.len() as u64 - branches);
    let branch_runs = alloc.branch_pages(branches, max_zones(ps), &mut new_regions, &mut unused);
    let mut next = runs.iter().flat_map(|e| e.start..e.end());
    let mut next_branch = branch_runs.iter().flat_map(|e| e.start..e.end());
    for &id in order {
        real[(id & !DIRTY_BIT) as usize] = if regions && dirty.is_branch(id) {
            next_branch.next()
        } else {
            next.next()
        }
        .expect("enough pages allocated");
    }
    for e in unused {
        space.freed.push(Freed::new(e, base.txn()));
    }
    // The file covers the pages written before step 5 (which covers the
    // rest; a commit with neither new regions nor blobs looks once,
    // there). A new region is written whole first: a write of an aligned
    // 2 MiB makes one folio of it in the page cache, which the map then
    // maps with one entry; the branches written into it later keep that
    // folio.
    if !new_regions.is_empty() || !placement.blobs.is_empty() {
        ensure_file_len(
            shared,
            &mut w.file_len,
            &mut w.allocated_to,
            alloc.page_count,
        )?;
    }
    let (mut region_calls, mut region_bytes) = (0, 0);
    if !new_regions.is_empty() {
        let rp = alloc.free.region_pages();
        let zeros = vec![0u8; (rp as usize) * ps];
        for &start in &new_regions {
            region_calls += shared
                .file
                .write_vectored_at(&[&zeros], start * ps as u64)?;
            region_bytes += zeros.len() as u64;
        }
    }

    // 3. Patch, stamp, checksum. A spilled or parked page is written as it
    // is sealed (from a copy: the spill file or the arena keeps it
    // unsealed), gathered into runs of consecutive pages (`SealedRuns`);
    // so are the blobs in memory, a chunk at a time (`seal_all`), so that
    // the write reads what the checksum just read; step 5 writes the
    // rest. Writing these pages first is safe for the reason the rest
    // are: they are free in every durable commit and every snapshot, and
    // the meta that makes them reachable is written last.
    let mut sealed_runs = SealedRuns::new(ps);
    let (mut blob_calls, mut blob_bytes) = (0, 0);
    seal_all(
        dirty,
        catalog,
        &mut placement,
        txn,
        false,
        &mut |pgno, sealed| sealed_runs.push(&shared.file, pgno, sealed),
        Some(&mut |dirty, blobs, real| {
            let mut blob_writes: Vec<(u64, &[u8])> = blobs
                .iter()
                .filter(|&&id| !dirty.is_spilled(id))
                .map(|&id| (real[(id & !DIRTY_BIT) as usize], dirty.get(id)))
                .collect();
            blob_writes.sort_unstable_by_key(|w| w.0);
            let (calls, bytes) = write_runs(&shared.file, ps, &blob_writes, &mut Vec::new())?;
            blob_calls += calls;
            blob_bytes += bytes;
            Ok(())
        }),
    )?;
    sealed_runs.flush(&shared.file)?;
    // Written already: the spilled and parked pages, and the blobs.
    let (early_calls, early_bytes) = (
        sealed_runs.calls + blob_calls + region_calls,
        sealed_runs.bytes + blob_bytes + region_bytes,
    );
    let (order, real) = (&placement.pages, &placement.real);

    // 4. The state chain: this commit's record of what it changed (or a new
    // base), after its own allocation, so it describes exactly the free
    // space that remains.
    let freed = merge_freed(&mut space.freed);
    // The state chain describes file commits: after logged commits, this
    // record's catalog changes are those since the last file commit.
    let chain_catalog = w.checkpoint_catalog.as_ref().unwrap_or(&base.catalog);
    let mut record = Vec::new();
    state::encode_record(
        &mut record,
        txn,
        catalog,
        chain_catalog,
        &freed,
        &alloc.taken[..],
    );
    // Room for the extent the state blob itself takes.
    let plan = if space.shrink {
        Plan::Compact
    } else {
        w.chain.plan(record.len() + 24, ps)
    };
    let mut freed = freed;
    for b in w.chain.freed_by(plan) {
        freed.push(Freed::new(b.extent, b.txn));
    }
    freed.sort_unstable();
    for f in &freed {
        alloc.free.add_pending(Pending {
            extent: f.extent,
            born: f.born,
            left: f.left.min(txn),
            freed: txn,
        });
    }
    let mut state_pages = match plan {
        Plan::Compact => limits.blob_pages(w.chain.base_bytes),
        _ => limits.blob_pages(state::DELTA_HEADER_LEN + record.len()),
    };
    let (state_pgno, state_data) = loop {
        let start = alloc.run(state_pages);
        let data = match plan {
            Plan::Compact => state::encode_base(catalog, alloc.free),
            _ => {
                record.clear();
                state::encode_record(
                    &mut record,
                    txn,
                    catalog,
                    chain_catalog,
                    &freed,
                    &alloc.taken[..],
                );
                w.chain.delta_data(plan, &record)
            }
        };
        if limits.blob_pages(data.len()) <= state_pages {
            break (start, data);
        }
        alloc.give_back(Extent {
            start,
            len: state_pages,
        });
        state_pages += 1;
    };
    let page_count = alloc.page_count;
    let mut state_blob = new_blob(ps, &state_data, state_pages as usize);
    let state_sum = seal(&mut state_blob, state_pgno, txn);
    let chain = w.chain.after(
        plan,
        BlobRef {
            extent: Extent {
                start: state_pgno,
                len: state_pages,
            },
            txn,
            sum: state_sum,
        },
        &state_data,
    );

    // 5. Write.
    ensure_file_len(shared, &mut w.file_len, &mut w.allocated_to, page_count)?;
    let spilled = dirty.has_spilled();
    let mut writes: Vec<(u64, &[u8])> = order
        .iter()
        .filter(|&&id| !(spilled && dirty.is_spilled(id)))
        .map(|&id| (real[(id & !DIRTY_BIT) as usize], dirty.get(id)))
        .collect();
    writes.push((state_pgno, &state_blob));
    writes.sort_unstable_by_key(|w| w.0);
    w.placement = placement;
    let (calls, bytes) = write_runs(&shared.file, ps, &writes, &mut Vec::new())?;
    let mut calls = calls + early_calls;
    let bytes = bytes + early_bytes;
    let slot = next_meta_slot(shared, w);
    let meta = Meta {
        page_size: ps as u32,
        txn,
        page_count,
        state_pgno,
        state_txn: txn,
        state_sum,
        last_synced_txn: w.durable_txn,
        log_base: txn,
        replay_to: txn,
    };
    let meta = match part {
        Part::Whole => meta,
        Part::Step {
            log_base,
            replay_to,
            ..
        } => Meta {
            log_base,
            replay_to,
            ..meta
        },
    };
    let meta_bytes = meta.encode();
    encode_zones(w.free.region_pages(), w.free.zones(), &mut w.zone_list);
    calls += shared
        .file
        .write_vectored_at(&[&meta_bytes, &w.zone_list], slot * ps as u64)?;
    let c = &shared.counters;
    c.write_calls.fetch_add(calls, Ordering::Relaxed);
    c.bytes_written.fetch_add(
        bytes + (meta_bytes.len() + w.zone_list.len()) as u64,
        Ordering::Relaxed,
    );
    c.pages_written
        .fetch_add(bytes / ps as u64 + 1, Ordering::Relaxed);
    match plan {
        Plan::Compact => c.state_bases.fetch_add(1, Ordering::Relaxed),
        Plan::Seal => c.state_seals.fetch_add(1, Ordering::Relaxed),
        Plan::Append => 0,
    };

    // 6. Sync.
    let sync_later = matches!(
        part,
        Part::Step {
            sync_later: true,
            ..
        }
    );
    if durability == Durability::Immediate && !sync_later {
        sync_file(shared, w)?;
        w.durable_txn = txn;
        w.durable_slot = slot;
    }
    Ok((meta, chain))
}

/// Frees the runs blobs took as they were put (`ahead`) that no blob of
/// the commit holds (`blobs`): the transaction replaced or deleted its own
/// new value, or rolled a savepoint back over it. A run from free space
/// goes back to it, as if never taken (`taken`); one past the base's end
/// becomes pending, as if written by the base (a pending extent is older
/// than the commit that frees it): no snapshot has it, so it is reusable
/// after the commit.
fn free_unreached(
    dirty: &DirtyPages,
    blobs: &[u64],
    ahead: &[Extent],
    base_txn: u64,
    taken: &mut Vec<Extent>,
    free: &mut FreeSpace,
    freed: &mut Vec<Freed>,
) {
    if ahead.is_empty() {
        return;
    }
    // Each blob sealed at put took one run of its own: counted first, as
    // nearly every commit holds all of them.
    let held = blobs
        .iter()
        .filter(|&&b| dirty.sealed_at_put(b).is_some())
        .count();
    assert!(
        held <= ahead.len(),
        "blobs sealed at put on pages never taken for them"
    );
    if held == ahead.len() {
        return;
    }
    let mut reached: Vec<u64> = blobs
        .iter()
        .filter_map(|&b| dirty.sealed_at_put(b).map(|(pgno, _)| pgno))
        .collect();
    reached.sort_unstable();
    for run in ahead {
        if reached.binary_search(&run.start).is_ok() {
            continue;
        }
        match taken.iter().position(|t| t == run) {
            Some(i) => {
                taken.remove(i);
                free.add_reusable(*run);
            }
            None => freed.push(Freed::new(*run, base_txn)),
        }
    }
}

/// The meta slot the next commit writes: the one not holding the durable
/// commit.
fn next_meta_slot(shared: &Shared, w: &WriterState) -> u64 {
    if shared.broken_protocol == Some(BrokenProtocol::OneMetaSlot) {
        0
    } else {
        1 - w.durable_slot
    }
}

/// Sorts the pages a commit stopped using and merges neighbours (keeping
/// the oldest writer's txn and the newest commit that left them, which
/// only makes reuse wait longer).
fn merge_freed(freed: &mut [Freed]) -> Vec<Freed> {
    freed.sort_unstable();
    let mut merged: Vec<Freed> = Vec::with_capacity(freed.len());
    for &f in freed.iter() {
        match merged.last_mut() {
            Some(last) if last.extent.end() == f.extent.start => {
                last.extent.len += f.extent.len;
                last.born = last.born.min(f.born);
                last.left = last.left.max(f.left);
            }
            _ => merged.push(f),
        }
    }
    merged
}

/// Step 1 of a commit: makes reusable the pending pages that no protector
/// (live reader or durable commit) can read. Under `Durability::None`, when
/// the pages held back only by the durable commit pass a fixed budget, one
/// sync of the commits so far releases them; when the file would grow
/// while readers hold pages back, slots of dead processes are cleared.
fn release_space(
    shared: &Shared,
    w: &mut WriterState,
    durability: Durability,
    base_txn: u64,
    needed: u64,
) -> Result<()> {
    release(shared, w);
    let held_budget = HELD_BYTES / shared.limits.page_size as u64;
    if durability == Durability::None && w.durable_txn < base_txn {
        let held = w.free.held_by(Protector::replay(w.durable_txn));
        if held > held_budget {
            sync_published(shared, w)?;
            release(shared, w);
        } else if held > held_budget / 2 && w.writeback_for != w.durable_txn {
            // Half way: let the disk work while we go on, so the sync at
            // the budget mostly waits for writes already done.
            shared.file.start_writeback();
            w.writeback_for = w.durable_txn;
        }
    }
    // Readers of dead processes pin their snapshot's pages until cleared:
    // look for them when the file would grow, and every so often anyway.
    // Only a reader's snapshot counts: the durable commit is a protector
    // too (under `Durability::None` one older than the base), and a scan
    // of the table at every commit of a growing file because of it cost a
    // sorted load a miss per slot per commit.
    let readers_hold = w
        .protectors
        .iter()
        .take_while(|p| p.txn() < base_txn)
        .any(|&p| p != Protector::replay(w.durable_txn));
    let due = w
        .stale_checked
        .is_none_or(|t| t.elapsed() >= THOROUGH_INTERVAL);
    if readers_hold && (due || w.free.reusable_pages() < needed) && shared.clear_stale(w, false) > 0
    {
        release(shared, w);
    }
    Ok(())
}

/// Releases with the current protectors: every live reader's snapshot and,
/// unless the protocol is broken on purpose for tests, the durable commit,
/// which a crash's recovery replays the log onto.
pub(crate) fn release(shared: &Shared, w: &mut WriterState) {
    shared.readers.protectors(&mut w.protectors);
    if w.checkpoint_steps.is_some() {
        // Between steps the published snapshot may be one that still
        // reads leaves a step folded and freed (its layout could not be
        // published: `checkpoint_steps::Steps::after_layout`); a reader
        // that has loaded it but not yet shown itself in the table must
        // find them whole.
        let published = Protector::reader(shared.published.load_full().txn());
        if let Err(i) = w.protectors.binary_search(&published) {
            w.protectors.insert(i, published);
        }
    }
    if shared.broken_protocol != Some(BrokenProtocol::ReuseBeforeDurable) {
        let durable = Protector::replay(w.durable_txn);
        if let Err(i) = w.protectors.binary_search(&durable) {
            w.protectors.insert(i, durable);
        }
    }
    let protectors = std::mem::take(&mut w.protectors);
    w.free.release(&protectors);
    w.protectors = protectors;
}

/// Blocks allocated ahead of the pages written: enough that a commit
/// rarely makes the call, little enough that the disk space taken ahead
/// of the data stays small whatever the file's size.
const ALLOCATE_AHEAD_BYTES: u64 = 4 << 20;

/// Grows the file (in chunks, as a hole) and the map to hold `page_count`
/// pages, and allocates the blocks of those pages, and some ahead
/// (`ALLOCATE_AHEAD_BYTES`), before they are written: pages written into a
/// hole cost ext4 a delayed allocation each, a fifth of a load of large
/// values (docs/design.md, "The file grows by itself", also for what
/// moves to the writeback). Where the disk has
/// no room for the blocks ahead, the pages' own blocks are enough; where
/// it has none for those, the commit fails here, before it writes.
/// `file_len` and `allocated_to` are the writer's (`WriterState`), passed
/// apart so that a commit may call this while its allocator holds the
/// writer's free space.
fn ensure_file_len(
    shared: &Shared,
    file_len: &mut u64,
    allocated_to: &mut u64,
    page_count: u64,
) -> Result<()> {
    let ps = shared.limits.page_size as u64;
    let needed = page_count * ps;
    if needed > *file_len {
        // Another process's writer may have grown it already; never shrink.
        *file_len = (*file_len).max(shared.file.len()?);
    }
    if needed > *file_len {
        let grown = needed
            .max(*file_len + *file_len / 8)
            .max(*file_len + GROWTH_MIN_BYTES)
            .next_multiple_of(ps);
        shared.file.set_len(grown)?;
        *file_len = grown;
    }
    if needed > *allocated_to {
        let from = *allocated_to;
        let ahead = (needed + ALLOCATE_AHEAD_BYTES).min(*file_len);
        let (to, allocated) = match shared.file.allocate_within(from, ahead) {
            Err(_) if needed < ahead => (needed, shared.file.allocate_within(from, needed)?),
            other => (ahead, other?),
        };
        *allocated_to = if allocated { to } else { u64::MAX };
    }
    shared.map_covering(page_count)?;
    Ok(())
}

/// One `fdatasync`; a failure poisons the instance.
fn sync_file(shared: &Shared, w: &mut WriterState) -> Result<()> {
    shared.counters.syncs.fetch_add(1, Ordering::Relaxed);
    if let Err(e) = shared.file.sync_data() {
        w.poisoned = true;
        return Err(e);
    }
    Ok(())
}

/// Makes the newest commit durable in the file (`Database::sync`): by a
/// checkpoint if logged commits are pending.
pub(crate) fn sync_published(shared: &Shared, w: &mut WriterState) -> Result<()> {
    if w.poisoned {
        return Err(crate::Error::Poisoned);
    }
    if w.checkpoint_catalog.is_some() {
        return commit_of_newest(shared, w, false, Durability::Immediate);
    }
    let txn = shared.readers.published_txn();
    if w.durable_txn < txn {
        sync_file(shared, w)?;
        w.durable_txn = txn;
        // Every commit since the last durable one wrote the other slot.
        w.durable_slot = 1 - w.durable_slot;
    }
    Ok(())
}

/// Writes the pages of the pending logged commits, if any, to the file in
/// one commit with `durability` (changing nothing else): so that the
/// file's accounting describes the newest commit (`stats`, `check`), or at
/// close.
pub(crate) fn checkpoint(
    shared: &Shared,
    w: &mut WriterState,
    durability: Durability,
) -> Result<()> {
    if w.checkpoint_catalog.is_none() {
        return Ok(());
    }
    if w.poisoned {
        return Err(crate::Error::Poisoned);
    }
    commit_of_newest(shared, w, false, durability)
}

/// A commit of the newest snapshot with no changes of its own: it writes
/// the pages of pending logged commits (a checkpoint) and, if `shrink`,
/// gives the free tail of the file back.
fn commit_of_newest(
    shared: &Shared,
    w: &mut WriterState,
    shrink: bool,
    durability: Durability,
) -> Result<()> {
    // The steps would take a file leaf with a value overlay as unchanged:
    // the newest commit is laid out again without any first, or, if the
    // arena cannot hold that, the checkpoint is written whole.
    if !shrink
        && wants_steps(shared, w)
        && (w.checkpoint_steps.is_some()
            || !has_file_overlays(&shared.published.load_full())
            || logged::fold_file_overlays_into_arena(shared, w)?)
    {
        return checkpoint_in_steps(shared, w);
    }
    let base = shared.published.load_full();
    let mut catalog = base.catalog.clone();
    let mut space = SpaceLog {
        freed: Vec::new(),
        taken: Vec::new(),
        shrink,
        ahead_runs: Vec::new(),
        file_end: 0,
    };
    let result = write_commit(
        shared,
        w,
        &base,
        &mut catalog,
        &mut DirtyPages::default(),
        &mut space,
        durability,
        Part::Whole,
    );
    finish(shared, w, &base, catalog, &space, result)
}

/// The pages a step of a checkpoint may write in a file of `page_count`
/// pages (more if that many are free).
fn step_pages(shared: &Shared, page_count: u64) -> u64 {
    shared
        .checkpoint_step_pages
        .unwrap_or_else(|| {
            (page_count / checkpoint_steps::STEP_SHARE).max(checkpoint_steps::MIN_STEP_PAGES)
        })
        .max(1)
}

/// Whether the pending checkpoint goes in steps: one is under way, or the
/// pages of the logged commits (file leaves with value overlays among
/// them) do not fit in the free pages and a step's
/// share of the file (the file would grow by nearly all of them), and the
/// trees are the same as at the last file commit.
fn wants_steps(shared: &Shared, w: &mut WriterState) -> bool {
    if w.checkpoint_steps.is_some() {
        return true;
    }
    let Some(last) = w.checkpoint_catalog.as_ref() else {
        return false;
    };
    let newest = shared.published.load_full();
    if w.log.is_none() || !checkpoint_steps::same_trees(last, &newest.catalog) {
        return false;
    }
    release(shared, w);
    // A file leaf with an overlay is a page the checkpoint writes too.
    let overlaid = newest
        .source
        .file_overlays
        .as_ref()
        .map_or(0, |f| f.leaf_count());
    w.arena_space.live_pages() + overlaid
        > w.free.reusable_pages() + step_pages(shared, newest.meta.page_count)
}

/// Whether any file leaf was given a value overlay in the span of logged
/// commits `snapshot` ends (`storage::arena::FileOverlays`).
fn has_file_overlays(snapshot: &Snapshot) -> bool {
    snapshot
        .source
        .file_overlays
        .as_ref()
        .is_some_and(|f| f.leaf_count() > 0)
}

/// Writes the pending checkpoint in steps (`txn::checkpoint_steps`), each
/// a durable file commit; the last, which holds the newest trees whole, is
/// published as the checkpoint. A step that fails leaves the steps before
/// it durable, and the next call goes on from there.
fn checkpoint_in_steps(shared: &Shared, w: &mut WriterState) -> Result<()> {
    if w.checkpoint_steps.is_none() {
        let newest = shared.published.load_full();
        let log = w.log.as_mut().expect("logged commits have a log");
        // A step's trees are a commit only with the log's records: those
        // must be durable before any step is.
        shared.counters.syncs.fetch_add(1, Ordering::Relaxed);
        if let Err(e) = log.sync() {
            w.poisoned = true;
            return Err(e);
        }
        let log_base = log.epoch();
        debug_assert_eq!(
            log_base, w.durable_txn,
            "the log continues the durable commit"
        );
        // A logged commit's meta is its base file commit's, but for its txn.
        w.checkpoint_steps = Some(Steps::begin(
            log_base,
            newest.meta.page_count,
            newest.txn(),
            &mut w.logged_freed,
        ));
    }
    let ps = shared.limits.page_size;
    loop {
        release(shared, w);
        // The newest commit, or the layout of it published after the last
        // step (`logged::publish_step_layout`): the same entries, and the
        // pages each step plans against.
        let newest = shared.published.load_full();
        let steps = w.checkpoint_steps.as_ref().expect("begun above");
        let page_count = steps.page_count;
        let budget = w.free.reusable_pages().max(step_pages(shared, page_count));
        let file = MapSource {
            map: shared.map.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            page_count,
            page_size: ps,
            arena: None,
            overlay_txn: 0,
            file_overlays: None,
        };
        let last_catalog = w
            .checkpoint_catalog
            .as_ref()
            .expect("logged commits pending");
        let spare = *DirtyPages::boxed(w.dirty_spare.take());
        let plan = checkpoint_steps::plan(
            steps,
            last_catalog,
            &newest.catalog,
            &file,
            &newest.source,
            budget,
            &w.logged_freed,
            spare,
        )?;
        let txn = steps.txn + 1;
        let StepPlan {
            mut catalog,
            mut dirty,
            freed,
            complete,
            record,
            splices,
            folds,
        } = plan;
        let part = if complete {
            Part::Step {
                log_base: txn,
                replay_to: txn,
                folds: &folds,
                sync_later: false,
            }
        } else {
            Part::Step {
                log_base: steps.log_base,
                replay_to: steps.replay_to,
                folds: &folds,
                sync_later: true,
            }
        };
        // The meta slot the step writes (`write_commit`), for its sync.
        let slot = next_meta_slot(shared, w);
        let base = Snapshot {
            meta: Meta {
                txn: txn - 1,
                page_count,
                ..newest.meta
            },
            source: MapSource {
                page_count,
                ..newest.source.clone()
            },
            catalog: Catalog::default(),
        };
        let mut space = SpaceLog {
            freed,
            taken: Vec::new(),
            shrink: false,
            ahead_runs: Vec::new(),
            file_end: 0,
        };
        let result = write_commit(
            shared,
            w,
            &base,
            &mut catalog,
            &mut dirty,
            &mut space,
            Durability::Immediate,
            part,
        );
        if result.is_ok() {
            let c = &shared.counters;
            c.checkpoint_runs_spliced
                .fetch_add(splices.runs, Ordering::Relaxed);
            c.checkpoint_roots_grown
                .fetch_add(splices.grown_roots, Ordering::Relaxed);
            c.checkpoint_leaves_folded
                .fetch_add(folds.len() as u64, Ordering::Relaxed);
        }
        // The step's buffers, kept for the next step (a step's worth of
        // them; the last step's go back to the usual bound).
        let keep = if complete { 0 } else { budget as usize };
        w.dirty_spare = Some(Box::new(dirty).emptied_keeping(ps, keep.max(crate::pages::POOL_MAX)));
        // The last step is published as the checkpoint; a failed step,
        // like a failed commit, gives back what it took.
        let (meta, chain) = match result {
            Ok(written) if !complete => written,
            _ => return finish(shared, w, &base, catalog, &space, result),
        };
        w.chain = chain;
        w.checkpoint_catalog = Some(catalog);
        w.checkpoint_steps
            .as_mut()
            .expect("begun above")
            .stepped(record, meta);
        // The newest commit again, leading to the leaves this step folded,
        // which it freed: published before the step's sync, so that a
        // reader that begins meanwhile does not hold them (the next step
        // reuses them). If the sync fails, the writer is poisoned, and
        // nothing reuses the pages the layout leads to.
        let layout = logged::publish_step_layout(shared, w);
        let steps = w.checkpoint_steps.as_mut().expect("begun above");
        let layout = match layout {
            Ok(copies) => {
                if copies.is_none() {
                    shared
                        .counters
                        .checkpoint_layouts_deferred
                        .fetch_add(1, Ordering::Relaxed);
                }
                steps.after_layout(copies.as_deref());
                Ok(())
            }
            Err(e) => {
                steps.after_layout(None);
                Err(e)
            }
        };
        sync_file(shared, w)?;
        w.durable_txn = meta.txn;
        w.durable_slot = slot;
        layout?;
        shared
            .counters
            .checkpoint_steps
            .fetch_add(1, Ordering::Relaxed);
        shared.save_durable(w);
    }
}

/// At close: writes the pending logged commits to the file (a checkpoint);
/// then, if this is the last process and the newest commit is durable,
/// records that in the other meta slot, so the next open need not verify
/// the commit's pages, and empties the log, so it need not read it.
pub(crate) fn close(shared: &Shared, alone: bool) -> Result<()> {
    // Not alone, this process cannot have logged commits pending (a
    // writable process joining replays them), unless a read-only one
    // joined: never wait for another process's writer then.
    let mut w = shared.lock_writer(alone)?;
    if shared.foreign_logged() {
        // Another process's logged commits are the newest: its close (or a
        // writer of any other process) writes them; this one has none.
        return Ok(());
    }
    if w.checkpoint_catalog.is_some() && !w.poisoned {
        checkpoint(shared, &mut w, Durability::Immediate)?;
        shared.save_durable(&w);
    }
    if !alone {
        return Ok(());
    }
    let snap = shared.published.load_full();
    if !w.poisoned && w.durable_txn == snap.txn() {
        if let Some(log) = w.log.as_mut() {
            log.clear(snap.txn())?;
        }
    }
    if w.poisoned || w.durable_txn != snap.txn() || snap.meta.last_synced_txn == snap.txn() {
        return Ok(());
    }
    write_clean_mark(shared, &mut w, &snap.meta)
}

/// Writes `meta` (of the newest commit, durable) into the other slot,
/// recording that it is durable, and syncs: then both slots hold it.
fn write_clean_mark(shared: &Shared, w: &mut WriterState, meta: &Meta) -> Result<()> {
    assert_eq!(
        w.durable_txn, meta.txn,
        "clean mark of a commit not durable"
    );
    let meta = Meta {
        last_synced_txn: meta.txn,
        ..*meta
    };
    let slot = 1 - w.durable_slot;
    let ps = shared.limits.page_size as u64;
    encode_zones(w.free.region_pages(), w.free.zones(), &mut w.zone_list);
    shared
        .file
        .write_vectored_at(&[&meta.encode(), &w.zone_list], slot * ps)?;
    sync_file(shared, w)?;
    w.durable_slot = slot;
    shared.save_durable(w);
    Ok(())
}

/// Closing the last instance of any process records a clean shutdown
/// (`close`): part of the commit protocol, so it lives here.
impl Drop for Shared {
    fn drop(&mut self) {
        let Some(lock) = self.readers.lock_file() else {
            return;
        };
        // Under the gate, so no process joins meanwhile: the last process
        // to close records that the newest commit is durable, so the next
        // open need not verify its pages. A failure here only means the
        // next open verifies them, as after a crash.
        if lock.take_gate().is_ok() {
            lock.header().processes.fetch_sub(1, Ordering::SeqCst);
            if !self.read_only {
                lock.header().writers.fetch_sub(1, Ordering::SeqCst);
                let _ = close(self, lock.alone().unwrap_or(false));
            }
        }
        // Dropping the lock file (with the table) releases both locks.
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pages sealed from the last to the first are written as runs of
    /// consecutive pages, one call each, and nothing is held past the
    /// flush; a gap ends a run; a run larger than the buffer is written as
    /// it comes; every byte lands at its page.
    #[test]
    fn sealed_pages_are_written_in_runs_of_consecutive_pages() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runs.ib");
        std::fs::write(&path, b"").unwrap();
        let file = DataFile::open(&path, true, None).unwrap();
        let ps = 4096usize;
        let page = |pgno: u64, pages: usize| vec![pgno as u8; pages * ps];
        let mut runs = SealedRuns::new(ps);
        // Pages 10..=1 downwards, but 6 (a gap): runs 7..=10 and 1..=5.
        for pgno in (1..=10u64).rev().filter(|&p| p != 6) {
            runs.push(&file, pgno, &page(pgno, 1)).unwrap();
        }
        runs.flush(&file).unwrap();
        assert_eq!(runs.calls, 2, "two runs, one call each");
        assert_eq!(runs.bytes, 9 * ps as u64);
        // A blob run larger than the buffer, then a page held and flushed.
        let big = SEALED_RUN_BYTES / ps + 1;
        runs.push(&file, 20, &page(20, big)).unwrap();
        runs.push(&file, 19, &page(19, 1)).unwrap();
        assert_eq!(runs.calls, 3, "the large run written as it came");
        runs.flush(&file).unwrap();
        runs.flush(&file).unwrap();
        assert_eq!(runs.calls, 4, "a flush with nothing held writes nothing");
        let bytes = std::fs::read(&path).unwrap();
        for pgno in (1..=10u64).filter(|&p| p != 6).chain([19, 20]) {
            let at = pgno as usize * ps;
            assert!(
                bytes[at..at + ps].iter().all(|&b| b == pgno as u8),
                "page {pgno}"
            );
        }
        assert!(
            bytes[6 * ps..7 * ps].iter().all(|&b| b == 0),
            "the gap unwritten"
        );
        assert_eq!(bytes.len(), (20 + big) * ps);
    }
}
