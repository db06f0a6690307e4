//! Logged commits: a small write transaction appends its redo record to
//! the log (synced under `Durability::Immediate`) and puts its pages in the
//! arena, and writes nothing to the data file. A checkpoint (any commit
//! that is not logged: `commit::write_commit`) later writes every arena
//! page the trees reach to the file, with the pages it changes itself.
//!
//! Invariants:
//! - the log holds, chained from the newest durable file commit `C`, one
//!   record per logged commit after it, each written before its commit is
//!   published; so the file at `C` plus the log is the newest commit;
//! - a logged commit frees no file page: the file pages it stopped using
//!   are remembered (`WriterState::logged_freed`) and freed by the next
//!   checkpoint, so the durable commit `C` stays whole until a durable
//!   commit replaces it;
//! - arena pages are published once and never changed; a superseded one is
//!   retired with the txn that stopped using it (`storage::arena`);
//! - a transaction that may be logged is lent arena slots as dirty page
//!   buffers (`lend`); a logged commit seals its pages in them and
//!   publishes them in place (`to_arena`), copying only the pages that
//!   have heap buffers; any other end leaves them to the next write
//!   transaction to reclaim, unpublished.
//!
//! See docs/design.md, "Logged commits".

use std::sync::Arc;

use crate::btree::page::{
    is_branch_kind, page_kind, set_child, set_overflow, LeafValue, Node, DIRTY_BIT, KIND_LEAF,
};
use std::collections::HashSet;

use crate::btree::page::{is_file_page, Limits, Reads};
use crate::btree::search::{node_at, Root};
use crate::btree::write::{apply_overlay, Finger, TreeWriter};
use crate::catalog::Catalog;
use crate::error::{Error, Result};
use crate::options::Durability;
use crate::pages::{DirtyPages, MapSource, PageSource};
use crate::storage::arena::{Arena, Fresh, ARENA_BIT};
use crate::storage::freespace::Freed;
use crate::storage::memory::memory_limit;
use crate::storage::meta::Meta;
use crate::txn::checkpoint_steps;
use crate::txn::seal::{order_dirty, seal_all, Placement};
use crate::txn::shared::{Shared, Snapshot, WriterState};

/// The least and the most bytes of log after which the next commit
/// checkpoints instead, when `Options::checkpoint_log_bytes` leaves the
/// bound to the data ([`log_bound`]).
pub(crate) const LOG_BOUND_MIN_BYTES: u64 = 64 << 20;
pub(crate) const LOG_BOUND_MAX_BYTES: u64 = 256 << 20;

/// Bytes of log after which the next commit checkpoints instead, for a
/// data file of `page_count` pages at its last checkpoint and
/// `arena_pages` live arena pages: the option, else twice the bytes of
/// those pages within [`LOG_BOUND_MIN_BYTES`, `LOG_BOUND_MAX_BYTES`]. A
/// checkpoint rewrites at most every page of the data, so with a log
/// twice the data the checkpoints write at most half the bytes the log
/// does: 1M single-put overwrites into 1M records (a 124 MiB file) wrote
/// 5.5 times their bytes under a fixed 64 MiB, 5.0 under the file's size
/// and 4.2 under twice it (2.6 once the log grew without writing zeros).
/// The data is the file's pages and the arena's: a tree filled from
/// empty lives in the arena until a checkpoint, and sized by the file
/// alone (53 pages), 1M random inserts in transactions of 1,000
/// checkpointed after 60 MiB of log, twice over the run (its commit
/// p99.9 166 ms), and wrote 4.4 times their bytes; the sum overstates
/// the data at most twofold (an arena page that replaced a file page
/// counts twice). The upper end bounds the replay after a crash.
pub(crate) fn log_bound(shared: &Shared, page_count: u64, arena_pages: u64) -> u64 {
    shared.checkpoint_log_bytes.unwrap_or_else(|| {
        default_log_bound(shared.limits.page_size as u64, page_count, arena_pages)
    })
}

/// [`log_bound`] when the option leaves it to the data.
fn default_log_bound(page_size: u64, page_count: u64, arena_pages: u64) -> u64 {
    let data = page_count
        .saturating_add(arena_pages)
        .saturating_mul(page_size);
    data.saturating_mul(2)
        .clamp(LOG_BOUND_MIN_BYTES, LOG_BOUND_MAX_BYTES)
}

/// A commit is logged only if its dirty pages hold at least this many
/// times the bytes of its record: single puts and scattered updates (a
/// page per few bytes) are, sorted bulk loads (pages full of new data)
/// are not.
const LOG_RATIO: u64 = 2;

/// Records up to this many bytes count their blob pages among the pages
/// their logging spares ([`record_outweighs_pages`]); larger ones do not.
/// Also the size from which a transaction applies the rule as it records
/// (`WriteTxn::check_log_size`).
pub(crate) const SMALL_RECORD_BYTES: u64 = 16 << 10;

/// Whether a redo record of `record` bytes is too large for a commit of
/// `tree_pages` dirty tree pages and `blob_pages` pages of new blobs, that
/// appended to `overlaid` value overlays, to be logged (`LOG_RATIO`); each
/// overlay counts as the leaf it spared (not each value: overwrites of
/// every key of a file leaf by leaf spare one page per leaf, and counted
/// per value made a commit of 1,000 rewritten accounts look like 1,000
/// pages spared). The commit's rule, and the transaction's as it records
/// (`WriteTxn`).
///
/// Logging spares tree pages only: a later checkpoint writes a leaf once
/// for all the commits that changed it meanwhile. A blob's pages are
/// written once whichever way its commit goes (by the commit, or by a
/// checkpoint: a blob takes no later change in), so a logged blob costs
/// its bytes twice, once in the record. Past [`SMALL_RECORD_BYTES`] blob
/// pages therefore count for nothing: a sorted load of values of half a
/// page (2,000 bytes, in blobs until the inline limit rose to half a page
/// in the same session), each in a page of its own, was logged because
/// its half-empty blob pages outweighed its record, and ran at 0.15x
/// LMDB's rate (benchmarks.md, session 51). A smaller transaction counts them, and is
/// logged as before even when it holds a large value: made a file commit,
/// it would write every logged commit before it at once (a checkpoint).
pub(crate) fn record_outweighs_pages(
    record: u64,
    tree_pages: u64,
    blob_pages: u64,
    overlaid: u64,
    ps: u64,
) -> bool {
    let blob_pages = if record <= SMALL_RECORD_BYTES {
        blob_pages
    } else {
        0
    };
    record.saturating_mul(LOG_RATIO) > (tree_pages + blob_pages + overlaid).saturating_mul(ps)
}

/// Retired arena slots worth a scan of the reader table to reuse them.
/// 32, not more: a small transaction that waits for more takes fresh
/// memory meanwhile, which the kernel faults in a page at a time (seed
/// 003's 100 commits: 1,137 minor faults with 256, 933 with 32, and 1.09x
/// the rate; benchmarks.md, session 47), where a retired slot is likely
/// still in cache. A scan reads the reader table once.
const RELEASE_BATCH: u64 = 32;

/// Arena bytes in use after which the next commit checkpoints instead, at
/// least (see [`arena_bound`]): as many bytes of pages as the log may
/// hold bytes of records at most ([`LOG_BOUND_MAX_BYTES`]). A tree filled
/// from empty lives in the arena until its first checkpoint, and each
/// checkpoint of a random fill rewrites nearly all of it: under 64 MiB,
/// 1M random inserts in transactions of 1,000 (a 194 MiB tree)
/// checkpointed twice during the fill, 389 ms of its 1.44 s.
pub(crate) const ARENA_MIN_BOUND_BYTES: u64 = 256 << 20;

/// Arena slots in use after which the next commit checkpoints instead,
/// for a data file of `page_count` pages at its last checkpoint: twice
/// its pages, at least [`ARENA_MIN_BOUND_BYTES`] (memory allowing). The bound sets how often
/// a checkpoint rewrites the pages that changed: rarely, when the arena
/// can hold the whole working set. Twice, because a tree that grows
/// (random inserts) outgrows the file of its last checkpoint: with the
/// file's own size, 1M random inserts in transactions of 1,000 wrote 5.9
/// times their bytes; with twice it, 4.3 times, and the peak memory fell
/// (from 703 to 538 MiB: each checkpoint copies the arena's pages).
///
/// At most an eighth of the memory this process may fill
/// (`storage::memory`), since the arena is anonymous memory that nothing
/// but a checkpoint gives back: with twice the file alone, 200k single-put
/// overwrites into a 3 GiB file (10M records) in a 1 GiB container were
/// killed for lack of memory (LMDB's ran at 19k/s there). An eighth leaves
/// room for the checkpoint's copies and the page cache.
pub(crate) fn arena_bound(page_size: u64, page_count: u64) -> u64 {
    arena_bound_within(page_size, page_count, memory_limit())
}

/// The share of memory the arena may take at most: 1 / this.
const ARENA_MEMORY_SHARE: u64 = 8;

/// Arena slots this process may fill at most, value overlays included
/// (which [`arena_bound`] leaves out): an eighth of its memory.
pub(crate) fn arena_memory_cap(page_size: u64) -> u64 {
    arena_memory_cap_within(page_size, memory_limit())
}

/// Arena slots a process that does not write may fill when it rebuilds
/// logged commits (`follow`): its reservation, within a quarter of its
/// memory, twice a writer's share, since it holds what the writer's arena
/// holds plus the older versions its readers keep. Past it the rebuild
/// fails with `Error::ArenaFull` rather than growing until the system
/// kills the process.
pub(crate) fn follower_arena_slots(arena: &Arena, page_size: usize) -> u64 {
    follower_arena_slots_within(arena.slots(), page_size as u64, memory_limit())
}

fn follower_arena_slots_within(slots: u64, page_size: u64, memory: u64) -> u64 {
    slots.min(arena_memory_cap_within(page_size, memory).saturating_mul(2))
}

/// [`arena_memory_cap`] for a process that may fill `memory` bytes.
fn arena_memory_cap_within(page_size: u64, memory: u64) -> u64 {
    (memory / ARENA_MEMORY_SHARE / page_size).max(1)
}

/// [`arena_bound`] for a process that may fill `memory` bytes.
fn arena_bound_within(page_size: u64, page_count: u64, memory: u64) -> u64 {
    let cap = arena_memory_cap_within(page_size, memory);
    let floor = (ARENA_MIN_BOUND_BYTES / page_size).min(cap);
    page_count.saturating_mul(2).clamp(floor, cap)
}

/// Whether the log or the arena is so near its bound that the next write
/// transaction should checkpoint before it begins (`WriteTxn::begin`): a
/// checkpoint there may go in steps (`txn::checkpoint_steps`), while one a
/// commit falls back to when a bound is passed is written at once, with
/// that commit's pages (and so needs free pages for all of them). Near:
/// within 1/16 of either bound (for the log, at the default bounds, more
/// than the largest record a commit may log).
pub(crate) fn checkpoint_due(shared: &Shared, w: &WriterState, page_count: u64) -> bool {
    if w.checkpoint_catalog.is_none() {
        return false;
    }
    let log_full = w.log.as_ref().is_some_and(|log| {
        let bound = log_bound(shared, page_count, w.arena_space.live_pages());
        log.len_used() > bound - bound / 16
    });
    let ps = shared.limits.page_size as u64;
    let limit = arena_bound(ps, page_count);
    let cap = arena_memory_cap(ps);
    log_full
        || w.arena_space.live_pages() > limit - limit / 16
        || w.arena_space.live_pages_and_overlays() > cap - cap / 16
}

/// Arena slots a write transaction is lent at most (16 MiB of 4 KiB
/// pages): a batch of 1,000 random puts copies more than 1,024 pages (a
/// leaf a put, with their branches), and is logged. A transaction that
/// changes more (most random puts go into overlays, which take no slot
/// of these) takes heap buffers for its further pages, copied into the
/// arena at a logged commit, as before slots were lent.
pub(crate) const LEND_MAX: usize = 4096;

/// Lends arena slots to the dirty pages of a write transaction on `base`
/// that may be logged (`DirtyPages::lend_slots`), so that its pages are
/// copied once, into the slots a logged commit publishes. Slots no reader
/// sees are released first when the free ones run short, by `to_arena`'s
/// rule; the arena's bound for logged commits applies.
pub(crate) fn lend(shared: &Shared, w: &mut WriterState, base: &Snapshot, dirty: &mut DirtyPages) {
    // The base's arena when it has one: the same, without a look-up.
    let Some(arena) = base.source.arena.clone().or_else(|| shared.arena()) else {
        dirty.lend_slots(|_| None);
        return;
    };
    let ps = shared.limits.page_size as u64;
    let limit = arena_bound(ps, base.meta.page_count);
    release_if_short(shared, w, 8);
    let space = &mut w.arena_space;
    dirty.lend_slots(|branch| space.lend(&arena, limit, branch));
}

/// Makes the retired arena slots no reader sees reusable: a scan of the
/// reader table.
fn release_unseen(shared: &Shared, w: &mut WriterState) {
    shared.readers.arena_snapshots(&mut w.snapshots);
    w.arena_space.release(&w.snapshots);
}

/// `release_unseen`, when fewer than `needed` slots are free and enough
/// have retired to make the scan worth it.
fn release_if_short(shared: &Shared, w: &mut WriterState, needed: u64) {
    if w.arena_space.free_slots() < needed && w.arena_space.retired_pages() >= RELEASE_BATCH {
        release_unseen(shared, w);
    }
}

/// What `write` did.
pub(crate) enum Logged {
    /// The commit is logged: publish its snapshot (`publish`).
    Done,
    /// Not logged (nothing changed): the log or the arena is full, or the
    /// commit is better written as pages; write a checkpoint instead.
    No,
    /// The log must restart from `base`, a file commit not yet durable:
    /// make it durable (`commit::sync_published`) and call again.
    SyncFirst,
}

/// Writes a logged commit of these changes on top of `base` (see
/// [`Logged`]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn write(
    shared: &Shared,
    w: &mut WriterState,
    base: &Snapshot,
    catalog: &mut Catalog,
    dirty: &mut DirtyPages,
    freed: &[Freed],
    payload: &[u8],
    overlaid: u64,
    durability: Durability,
) -> Result<Logged> {
    let mut placement = std::mem::take(&mut w.placement);
    let result = write_placed(
        shared,
        w,
        base,
        catalog,
        dirty,
        freed,
        (payload, overlaid),
        durability,
        &mut placement,
    );
    w.placement = placement;
    result
}

/// `write`, with the writer's placement buffers.
#[allow(clippy::too_many_arguments)]
fn write_placed(
    shared: &Shared,
    w: &mut WriterState,
    base: &Snapshot,
    catalog: &mut Catalog,
    dirty: &mut DirtyPages,
    freed: &[Freed],
    (payload, overlaid): (&[u8], u64),
    durability: Durability,
    placement: &mut Placement,
) -> Result<Logged> {
    let txn = base.txn() + 1;
    let Some(arena) = shared.arena_ref() else {
        return Ok(Logged::No);
    };
    let ps = shared.limits.page_size as u64;
    order_dirty(catalog, dirty, placement)?;
    let (tree_pages, blob_pages) = placement.page_counts(dirty, ps as usize);
    if record_outweighs_pages(payload.len() as u64, tree_pages, blob_pages, overlaid, ps) {
        // Its pages are few for its bytes (a sorted load fills new pages):
        // logging would write the bytes twice, the pages once anyway.
        return Ok(Logged::No);
    }
    let Some(log) = w.log.as_mut() else {
        return Ok(Logged::No);
    };
    if log.last_txn() != base.txn() {
        // The log restarts from `base`, which must then be a durable file
        // commit (no logged commit since the last checkpoint).
        if w.checkpoint_catalog.is_some() {
            return Ok(Logged::No);
        }
        if w.durable_txn != base.txn() {
            return Ok(Logged::SyncFirst);
        }
        let log = w.log.as_mut().expect("checked above");
        log.restart(base.txn());
    }
    let bound = log_bound(shared, base.meta.page_count, w.arena_space.live_pages());
    let log = w.log.as_mut().expect("checked above");
    if log.len_used() + payload.len() as u64 > bound {
        return Ok(Logged::No);
    }

    let limit = arena_bound(ps, base.meta.page_count);
    let zeros_before = log.zeros_written();
    let mapped = std::cell::Cell::new(false);
    let placed = to_arena(
        shared,
        w,
        arena,
        catalog,
        dirty,
        placement,
        limit,
        txn,
        Release::Retired,
        |w| {
            let log = w.log.as_mut().expect("checked above");
            let synced = durability == Durability::Immediate;
            mapped.set(log.append_record(txn, payload, synced)?);
            if !synced {
                return Ok(());
            }
            shared
                .counters
                .syncs
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if let Err(e) = log.sync() {
                // As for the data file: the kernel may have dropped the
                // written record, so nothing more can be trusted.
                w.poisoned = true;
                return Err(e);
            }
            if let Some(l) = shared.readers.lock_file() {
                l.header()
                    .log_durable_txn
                    .store(txn, std::sync::atomic::Ordering::Release);
            }
            Ok(())
        },
    )?;
    if !placed {
        return Ok(Logged::No);
    }
    count_record(shared, w, payload.len(), zeros_before, mapped.get());
    shared
        .counters
        .logged_commits
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);

    for f in freed {
        if f.extent.start & ARENA_BIT != 0 {
            w.arena_space.retire(f.extent.start, f.extent.len, txn);
            // A leaf's value overlay goes with it (born when it was).
            if let Some(unit) = arena.overlay_unit(f.extent.start) {
                w.arena_space.retire_overlay(unit, txn);
            }
        } else {
            // So does a file leaf's, though its word stays in the span's
            // table for the snapshots that still see the leaf
            // (`storage::arena::FileOverlays`).
            let files = base.source.file_overlays.as_ref();
            if let Some(unit) = files.and_then(|t| t.unit_of(f.extent.start)) {
                w.arena_space.retire_overlay(unit, txn);
            }
            // Snapshots from `txn` on no longer read it.
            w.logged_freed.push(Freed { left: txn, ..*f });
        }
    }
    if w.checkpoint_catalog.is_none() {
        // `base` is the last file commit: the state chain's catalog.
        w.checkpoint_catalog = Some(base.catalog.clone());
    }
    shared.set_logged_by(crate::txn::readers::ProcessId::current().word());
    Ok(Logged::Done)
}

/// Publishes the snapshot of the logged commit `write` just wrote on top
/// of `base` (its trees in `catalog`, taken), built where it will live
/// (`Shared::publish_built`).
pub(crate) fn publish(
    shared: &Shared,
    w: &mut WriterState,
    base: &Snapshot,
    catalog: &mut Catalog,
) {
    let arena = shared.arena_ref().expect("a logged commit has the arena");
    let txn = base.txn() + 1;
    let meta = Meta { txn, ..base.meta };
    shared.publish_built(w, meta, true, |spare| {
        arena_snapshot(spare, shared, base, txn, arena, catalog)
    });
}

/// Counts a record of `payload_len` bytes just appended to the log
/// (through its map if `mapped`, else with one write call), and the zeros
/// the append grew the log by since `zeros_before`, in one write call.
fn count_record(
    shared: &Shared,
    w: &WriterState,
    payload_len: usize,
    zeros_before: u64,
    mapped: bool,
) {
    use std::sync::atomic::Ordering::Relaxed;
    let c = &shared.counters;
    let record_bytes = (crate::storage::log::HEADER_LEN + payload_len) as u64;
    let grown = w.log.as_ref().map_or(0, |l| l.zeros_written()) - zeros_before;
    if grown > 0 {
        c.write_calls.fetch_add(1, Relaxed);
    }
    c.bytes_written.fetch_add(record_bytes + grown, Relaxed);
    c.log_bytes.fetch_add(record_bytes + grown, Relaxed);
    if mapped {
        c.bytes_mapped.fetch_add(record_bytes, Relaxed);
    } else {
        c.write_calls.fetch_add(1, Relaxed);
    }
}

/// The snapshot of commit `txn`: `base`'s file pages, the arena's, and the
/// trees of `catalog` (taken). Written into `spare` when given (returns
/// `None`), keeping the map, arena and overlay table it shares with
/// `base` (no count changed: six atomic instructions a commit), else
/// made (returned).
fn arena_snapshot(
    spare: Option<&mut Snapshot>,
    shared: &Shared,
    base: &Snapshot,
    txn: u64,
    arena: &Arc<Arena>,
    catalog: &mut Catalog,
) -> Option<Snapshot> {
    let meta = Meta { txn, ..base.meta };
    let Some(spare) = spare else {
        return Some(Snapshot {
            meta,
            source: MapSource {
                map: base.source.map.clone(),
                page_count: meta.page_count,
                page_size: shared.limits.page_size,
                arena: Some(arena.clone()),
                overlay_txn: txn,
                file_overlays: base.source.file_overlays.clone(),
            },
            catalog: std::mem::take(catalog),
        });
    };
    // Every field named, as in the literal above.
    let Snapshot {
        meta: spare_meta,
        source:
            MapSource {
                map,
                page_count,
                page_size,
                arena: spare_arena,
                overlay_txn,
                file_overlays,
            },
        catalog: spare_catalog,
    } = spare;
    *spare_meta = meta;
    if !Arc::ptr_eq(map, &base.source.map) {
        map.clone_from(&base.source.map);
    }
    *page_count = meta.page_count;
    *page_size = shared.limits.page_size;
    if !spare_arena.as_ref().is_some_and(|a| Arc::ptr_eq(a, arena)) {
        *spare_arena = Some(arena.clone());
    }
    *overlay_txn = txn;
    let same_overlays = match (&*file_overlays, &base.source.file_overlays) {
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        (None, None) => true,
        _ => false,
    };
    if !same_overlays {
        file_overlays.clone_from(&base.source.file_overlays);
    }
    *spare_catalog = std::mem::take(catalog);
    None
}

/// Whether `to_arena` may make retired arena slots reusable first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Release {
    /// Those no reader sees any more.
    Retired,
    /// None: a layout published between the steps of a checkpoint, which
    /// plan against the published pages by number
    /// (`checkpoint_steps::TakenPages`): a slot retired during the steps
    /// must not come back as another page.
    None,
}

/// `to_arena` for pages not yet ordered: orders them with the writer's
/// placement (`w.placement`, lent for the call and given back).
#[allow(clippy::too_many_arguments)]
fn order_into_arena(
    shared: &Shared,
    w: &mut WriterState,
    arena: &Arena,
    catalog: &mut Catalog,
    dirty: &mut DirtyPages,
    limit: u64,
    txn: u64,
    release: Release,
    before_publish: impl FnOnce(&mut WriterState) -> Result<()>,
) -> Result<bool> {
    let mut placement = std::mem::take(&mut w.placement);
    let placed = order_dirty(catalog, dirty, &mut placement).and_then(|()| {
        to_arena(
            shared,
            w,
            arena,
            catalog,
            dirty,
            &mut placement,
            limit,
            txn,
            release,
            before_publish,
        )
    });
    w.placement = placement;
    placed
}

/// Puts the dirty pages of commit `txn` into arena slots no reader can
/// reach, sealed with those numbers; `before_publish` runs once the pages
/// are sealed and before they are copied (the log append: a failure there
/// gives the slots back). Returns false, with nothing changed, when the
/// arena cannot hold them even after releasing every slot no reader sees.
#[allow(clippy::too_many_arguments)]
fn to_arena(
    shared: &Shared,
    w: &mut WriterState,
    arena: &Arena,
    catalog: &mut Catalog,
    dirty: &mut DirtyPages,
    placement: &mut Placement,
    limit: u64,
    txn: u64,
    release: Release,
    before_publish: impl FnOnce(&mut WriterState) -> Result<()>,
) -> Result<bool> {
    let ps = shared.limits.page_size as u64;
    // Arena slots no reader can see any more become reusable: looked for
    // (a scan of the reader table) only when the free slots run short and
    // enough have retired to make the scan worth it, or the arena is full.
    let (tree_pages, blob_pages) = placement.page_counts(dirty, ps as usize);
    let needed = tree_pages + blob_pages;
    if release == Release::Retired {
        release_if_short(shared, w, needed);
    }
    // Empty, so unallocated, while every page is in a lent slot.
    let mut fresh: Vec<(u64, Fresh)> = Vec::new();
    let mut released = false;
    loop {
        let runs = placement
            .blobs
            .iter()
            .map(|b| (*b, dirty.get(*b).len() as u64 / ps))
            .chain(placement.pages.iter().map(|id| (*id, 1)));
        let mut full = false;
        for (id, pages) in runs {
            if let Some(pgno) = dirty.slot_pgno(id) {
                // Already in a lent slot: sealed and published in place.
                placement.real[(id & !DIRTY_BIT) as usize] = pgno;
                continue;
            }
            let branch = is_branch_kind(page_kind(dirty.get(id)));
            match w.arena_space.alloc(arena, pages, limit, txn, branch) {
                Some(f) => {
                    placement.real[(id & !DIRTY_BIT) as usize] = f.pgno();
                    fresh.push((id, f));
                }
                None => {
                    full = true;
                    break;
                }
            }
        }
        if !full {
            break;
        }
        for (_, f) in fresh.drain(..) {
            w.arena_space.unalloc(f);
        }
        if released || release == Release::None {
            // Full even with every slot no reader holds.
            return Ok(false);
        }
        release_unseen(shared, w);
        released = true;
    }
    // Sealing edits the dirty pages only; if anything fails from here on,
    // the transaction is gone and its arena slots are given back.
    let written = seal_all(
        dirty,
        catalog,
        placement,
        txn,
        true,
        &mut |_, _| unreachable!("a transaction that spilled pages is not logged"),
        None,
    )
    .and_then(|()| before_publish(w));
    if let Err(e) = written {
        for (_, f) in fresh {
            w.arena_space.unalloc(f);
        }
        return Err(e);
    }
    for (id, f) in &fresh {
        arena.write(f, dirty.get(*id));
    }
    // The pages sealed in lent slots are published as they are: no copy.
    for &id in placement.blobs.iter().chain(&placement.pages) {
        if dirty.slot_pgno(id).is_some() {
            w.arena_space.adopt(dirty.take_slot(id), txn);
        }
    }
    Ok(true)
}

/// For a process that may not write: the snapshot of commit `base.txn() +
/// 1` made of `base`'s pages and `dirty` in this process's arena, of which
/// it is the only user (nothing is logged, and no file page is freed: the
/// writer that logged the commit frees them; the arena pages of `base` it
/// replaced, in `freed`, retire). `Ok(None)` when the arena cannot hold
/// it.
pub(crate) fn follow(
    shared: &Shared,
    w: &mut WriterState,
    base: &Snapshot,
    catalog: &mut Catalog,
    dirty: &mut DirtyPages,
    freed: &[Freed],
) -> Result<Option<Snapshot>> {
    let txn = base.txn() + 1;
    let Some(arena) = shared.arena() else {
        return Ok(None);
    };
    let limit = follower_arena_slots(&arena, shared.limits.page_size);
    let placed = order_into_arena(
        shared,
        w,
        &arena,
        catalog,
        dirty,
        limit,
        txn,
        Release::Retired,
        |_| Ok(()),
    )?;
    if !placed {
        return Ok(None);
    }
    for f in freed.iter().filter(|f| f.extent.start & ARENA_BIT != 0) {
        w.arena_space.retire(f.extent.start, f.extent.len, txn);
    }
    Ok(arena_snapshot(None, shared, base, txn, &arena, catalog))
}

/// Whether arena page `page` (numbered `pgno`) is a leaf that references
/// no arena blob: its seal then changes only its header, so a checkpoint
/// parks it in `dirty` (`DirtyPages::park_arena_leaf`) instead of copying
/// it there: the seal copies it into a scratch page, and from there into
/// the run of pages being written (`commit::SealedRuns`). A checkpoint
/// after random changes holds nearly every leaf of the tree, and copies
/// of all of them made in advance were fresh memory: in the close after
/// 200k overwrites at 10M records, the kernel's zeroing of it took more
/// time than the writes. A tree
/// without blobs (`overflow_pages` 0, exact: `check` verifies it, and a
/// range delete relies on it too) has no leaf to read past its header.
fn is_sealed_as_is(page: &[u8], pgno: u64, tree_has_blobs: bool) -> Result<bool> {
    if page_kind(page) != KIND_LEAF {
        return Ok(false);
    }
    if !tree_has_blobs {
        return Ok(true);
    }
    let node = Node::parse(page, pgno, None)?;
    for i in 0..node.count {
        if let LeafValue::Overflow { pgno, .. } = node.leaf_entry(i)?.1 {
            if pgno & ARENA_BIT != 0 {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

/// Copies every file leaf with a value overlay that the trees of
/// `catalog` still reach into `dirty` with its path, the overlay applied,
/// and records the file pages copied in `freed`: a checkpoint ends the
/// span of logged commits, and its table of file leaf overlays with it
/// (`storage::arena::FileOverlays`). A leaf given one that the trees no
/// longer reach was superseded, by a logged commit (`logged_freed`), by
/// the commit being written (`freed`), or by the merge of another leaf's
/// fold. `before_each` runs before each leaf's fold (to lend the dirty
/// pages arena slots). With `Fold::PathsOnly`, only the branches above
/// each leaf whose overlay deletes nothing are copied, after the folds,
/// in one walk of each tree that holds such leaves
/// (`TreeWriter::copy_branches_above_wanted`): those leaves keep their
/// overlays, for the steps of a checkpoint to fold.
#[allow(clippy::too_many_arguments)]
pub(crate) fn fold_file_overlays(
    catalog: &mut Catalog,
    dirty: &mut DirtyPages,
    freed: &mut Vec<Freed>,
    logged_freed: &[Freed],
    base: &MapSource,
    limits: Limits,
    fold: Fold,
    mut before_each: impl FnMut(&mut DirtyPages),
) -> Result<()> {
    let Some(files) = base.file_overlays.as_ref() else {
        return Ok(());
    };
    let leaves = files.leaves();
    if leaves.is_empty() {
        return Ok(());
    }
    // Each leaf is given an overlay once per span, and a fold frees only
    // its own leaf besides branches: the set holds for the whole loop.
    let superseded: HashSet<u64> = freed
        .iter()
        .chain(logged_freed)
        .map(|f| f.extent.start)
        .collect();
    let mut finger = Finger::default();
    let mut writer = TreeWriter {
        base,
        dirty,
        freed,
        finger: &mut finger,
        limits,
        seal_at_put: None,
    };
    // The leaves whose branches alone are copied, and the trees they were
    // in when given their overlays: walked once each, after the folds.
    let mut paths_only: HashSet<u64> = HashSet::new();
    let mut walked_trees: HashSet<u64> = HashSet::new();
    for leaf in leaves.iter().filter(|l| !superseded.contains(&l.pgno)) {
        // A leaf whose overlay deletes entries is folded here all the same:
        // the fold merges it with a sibling if it is left underfull, which
        // a step's fold cannot (it writes the leaf where it was).
        let whole = fold == Fold::Leaves
            || base
                .overlay_page(leaf.pgno)
                .and_then(|page| page.counts_seen_at(base.overlay_txn))
                .is_none_or(|(tombstones, _)| tombstones > 0);
        if !whole {
            paths_only.insert(leaf.pgno);
            walked_trees.insert(leaf.tree);
            continue;
        }
        before_each(writer.dirty);
        // The tree it was in when it was given the overlay; any tree, if
        // that one is gone (it cannot hold the leaf then: a safety net).
        let named = catalog.trees.iter().position(|t| t.id == leaf.tree);
        let mut folded = false;
        let others = (0..catalog.trees.len()).filter(|&i| Some(i) != named);
        for i in named.into_iter().chain(others) {
            if writer.fold_file_leaf(&mut catalog.trees[i].state, leaf.pgno)? {
                folded = true;
                break;
            }
        }
        // A merge of an earlier fold may have taken it.
        if !folded && !writer.freed.iter().any(|f| f.extent.start == leaf.pgno) {
            return Err(Error::corrupted_page(
                leaf.pgno,
                "a file leaf with a value overlay is in no tree, and was not freed",
            ));
        }
    }
    if paths_only.is_empty() {
        return Ok(());
    }
    // Each such leaf's tree, walked once; every tree if one is gone (a
    // safety net, as above).
    let all = walked_trees
        .iter()
        .any(|id| !catalog.trees.iter().any(|t| t.id == *id));
    let mut found = Vec::with_capacity(paths_only.len());
    for t in catalog.trees.iter_mut() {
        if all || walked_trees.contains(&t.id) {
            let wanted = |pgno: u64| paths_only.contains(&pgno);
            writer.copy_branches_above_wanted(
                &mut t.state,
                &wanted,
                &mut found,
                &mut before_each,
            )?;
        }
    }
    for pgno in &found {
        paths_only.remove(pgno);
    }
    // A merge of a fold above may have taken one.
    for &pgno in &paths_only {
        if !writer.freed.iter().any(|f| f.extent.start == pgno) {
            return Err(Error::corrupted_page(
                pgno,
                "a file leaf with a value overlay is in no tree, and was not freed",
            ));
        }
    }
    Ok(())
}

/// What `fold_file_overlays` copies of each file leaf with a value
/// overlay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fold {
    /// The leaf, its overlay applied, and its path.
    Leaves,
    /// Its path only, if its overlay deletes nothing (else as `Leaves`).
    PathsOnly,
}

/// Before a checkpoint in steps (`txn::checkpoint_steps`), which splices
/// the newest trees onto the last file commit's and would take a file
/// leaf with a value overlay, and every branch above it (the same pages in
/// both), as unchanged: lays the newest commit `T` out again with the
/// branches above each such leaf copied into the arena (`Fold::PathsOnly`),
/// and publishes that as a logged commit of no entries, `T + 1` (its
/// record is empty). The leaves stay in the file with their overlays; the
/// steps fold each into the copy they write, and the last step frees them
/// (`checkpoint_steps::Steps`). The file branches copied are freed by the
/// checkpoint (`logged_freed`), and the arena branches copied retire, at
/// `T + 1`: readers of `T` keep them, readers of `T + 1` do not, so the
/// checkpoint's steps reuse them once the readers of `T` are gone. (Until
/// session 35 the layout was published under `T` itself, so every reader
/// of the newest commit held them until the last step, and the steps took
/// new pages for all they wrote: beside a stream of readers the file grew
/// to 1.7-1.9x LMDB's. Until session 48 the leaves were copied here too,
/// the overlays applied: fresh arena memory for every leaf changed since
/// the last checkpoint, most of the close after many single-put
/// overwrites at 10M records.)
/// Returns false, nothing changed, when the arena cannot hold the copies
/// or there is no log to record the commit in: a whole checkpoint folds
/// them instead.
pub(crate) fn fold_file_overlays_into_arena(shared: &Shared, w: &mut WriterState) -> Result<bool> {
    let newest = shared.published.load_full();
    let (Some(arena), Some(files)) = (&newest.source.arena, &newest.source.file_overlays) else {
        return Ok(true);
    };
    if w.log.as_ref().is_none_or(|l| l.last_txn() != newest.txn()) {
        return Ok(false);
    }
    let txn = newest.txn() + 1;
    let zeros_before = w.log.as_ref().map_or(0, |l| l.zeros_written());
    let mut catalog = newest.catalog.clone();
    let mut dirty = DirtyPages::boxed(w.dirty_spare.take());
    let mut freed = Vec::new();
    let ps = shared.limits.page_size as u64;
    let cap = arena_memory_cap(ps);
    // The copies are made in arena slots, published where they are: a
    // heap buffer each would be fresh memory to fault in, then copied.
    let space = &mut w.arena_space;
    fold_file_overlays(
        &mut catalog,
        &mut dirty,
        &mut freed,
        &w.logged_freed,
        &newest.source,
        shared.limits,
        Fold::PathsOnly,
        |dirty| dirty.lend_slots(|branch| space.lend(arena, cap, branch)),
    )?;
    // `T + 1`'s own table, without the leaves logged commits superseded
    // or this layout folded: the steps free and reuse those pages, and a
    // page written there must not find a stale overlay (the table of `T`
    // keeps them for its readers).
    let gone: HashSet<u64> = w
        .logged_freed
        .iter()
        .chain(&freed)
        .map(|f| f.extent.start)
        .collect();
    let reached = Arc::new(files.without(&gone)?);
    let placed = order_into_arena(
        shared,
        w,
        arena,
        &mut catalog,
        &mut dirty,
        cap,
        txn,
        Release::Retired,
        |w| {
            let log = w.log.as_mut().expect("checked above");
            log.append(txn, &[])
        },
    );
    w.dirty_spare = Some(dirty.emptied(ps as usize));
    if !placed? {
        return Ok(false);
    }
    for f in &freed {
        if f.extent.start & ARENA_BIT != 0 {
            w.arena_space.retire(f.extent.start, f.extent.len, txn);
        } else {
            // A leaf folded here (its overlay deleted entries) or merged;
            // the others stay in `T + 1` with their overlays.
            if let Some(unit) = files.unit_of(f.extent.start) {
                w.arena_space.retire_overlay(unit, txn);
            }
            w.logged_freed.push(Freed { left: txn, ..*f });
        }
    }
    let snapshot = Snapshot {
        meta: Meta { txn, ..newest.meta },
        source: MapSource {
            overlay_txn: txn,
            file_overlays: Some(reached),
            ..newest.source.clone()
        },
        catalog,
    };
    shared.publish(w, snapshot);
    w.state_txn = txn;
    count_record(shared, w, 0, zeros_before, true);
    Ok(true)
}

/// After a step of a checkpoint that is not the last, before its sync
/// (`txn::checkpoint_steps`): publishes the newest commit again, at the
/// step's txn, laid out so that it leads to the folded copies the steps
/// wrote of the file leaves with value overlays they took
/// (`Steps::pending_folds`; each copy found by a key of its leaf in the
/// step's trees), through new arena copies of the branches above them,
/// with a table of file overlays without the folded leaves. The step
/// freed those leaves, as left at its txn: readers from this layout on do
/// not read them, so the next step reuses them. Returns the copies, or
/// `None`, nothing published, when the arena cannot hold the branches
/// without slots retired during the steps (`Release::None`): the next
/// layout leads to them too, and meanwhile the published snapshot, which
/// reads them, protects them (`txn::commit`'s `release`).
pub(crate) fn publish_step_layout(
    shared: &Shared,
    w: &mut WriterState,
) -> Result<Option<Vec<u64>>> {
    let steps = w.checkpoint_steps.as_ref().expect("a step was written");
    let folds: Vec<checkpoint_steps::Fold> = steps.pending_folds().to_vec();
    let (txn, page_count) = (steps.txn, steps.page_count);
    if folds.is_empty() {
        return Ok(Some(Vec::new()));
    }
    let current = shared.published.load_full();
    let Some(arena) = current.source.arena.clone() else {
        return Ok(None);
    };
    let limits = shared.limits;
    let ps = limits.page_size;
    let map = shared.map.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let file = MapSource {
        map: map.clone(),
        page_count,
        page_size: ps,
        arena: None,
        overlay_txn: 0,
        file_overlays: None,
    };
    let source = MapSource {
        map,
        page_count,
        ..current.source.clone()
    };
    // The layout's own table of file leaf overlays, without the leaves the
    // steps folded: the steps free them, and may write other pages there.
    let Some(files) = current.source.file_overlays.as_ref() else {
        return Ok(None);
    };
    let remaining = Arc::new(files.without(steps.folded_leaves())?);
    let step_catalog = w.checkpoint_catalog.as_ref().expect("a step was written");
    let mut catalog = current.catalog.clone();
    // Its own pages, not the writer's spare: that holds the steps' pool.
    let mut dirty = Box::<DirtyPages>::default();
    let mut freed = Vec::new();
    let mut copies = Vec::with_capacity(folds.len());
    let cap = arena_memory_cap(ps as u64);
    let laid_out = (|| -> Result<()> {
        let space = &mut w.arena_space;
        let mut finger = Finger::default();
        let mut writer = TreeWriter {
            base: &source,
            dirty: &mut dirty,
            freed: &mut freed,
            finger: &mut finger,
            limits,
            seal_at_put: None,
        };
        for f in &folds {
            let state = &mut catalog.trees[f.tree].state;
            let not_in_newest = || {
                Error::corrupted_page(
                    f.leaf,
                    "a leaf a checkpoint step folded is not in the newest commit",
                )
            };
            let Some(key) = writer.first_key_of_overlaid_leaf(f.leaf)? else {
                return Err(not_in_newest());
            };
            let (copy, copy_txn, copy_sum) =
                leaf_ref_with_sum(&file, step_catalog.trees[f.tree].state.root, key)?;
            writer
                .dirty
                .lend_slots(|branch| space.lend(&arena, cap, branch));
            match writer.copy_branches_above(state, f.leaf, key)? {
                Some(Some((parent, slot))) => {
                    set_child(writer.dirty.get_mut(parent), slot, copy, copy_txn, copy_sum);
                }
                Some(None) => {
                    state.root.pgno = copy;
                    state.root.txn = copy_txn;
                    state.root.sum = copy_sum;
                }
                None => return Err(not_in_newest()),
            }
            copies.push(copy);
        }
        Ok(())
    })();
    let placed = laid_out.and_then(|()| {
        order_into_arena(
            shared,
            w,
            &arena,
            &mut catalog,
            &mut dirty,
            cap,
            txn,
            Release::None,
            |_| Ok(()),
        )
    });
    drop(dirty);
    if !placed? {
        return Ok(None);
    }
    for f in &freed {
        // The branches above the leaves are the arena's since the
        // relayout before the steps (`fold_file_overlays_into_arena`).
        assert!(
            f.extent.start & ARENA_BIT != 0,
            "a layout frees only arena branches"
        );
        w.arena_space.retire(f.extent.start, f.extent.len, txn);
    }
    let snapshot = Snapshot {
        meta: Meta {
            txn,
            page_count,
            ..current.meta
        },
        source: MapSource {
            overlay_txn: txn,
            file_overlays: Some(remaining),
            ..source
        },
        catalog,
    };
    shared.publish(w, snapshot);
    // The newest txn this process published (`Shared::refresh_writer`).
    w.state_txn = txn;
    Ok(Some(copies))
}

/// The page number, txn and checksum of the leaf of the tree at `root`
/// whose range holds `key`, as its parent records them.
fn leaf_ref_with_sum(src: &MapSource, root: Root, key: &[u8]) -> Result<(u64, u64, u64)> {
    let (mut pgno, mut txn, mut sum) = (root.pgno, root.txn, root.sum);
    for level in (2..=root.depth).rev() {
        let node = node_at(src, pgno, txn, level, Reads::Search)?;
        let i = node.search_branch(key)?;
        (pgno, txn) = node.child(i)?;
        sum = node.child_sum(i)?;
    }
    Ok((pgno, txn, sum))
}

/// Copies every arena page the trees of `catalog` reach (through dirty
/// pages too) into `dirty`, patching the parents, so that the commit being
/// written puts them in the file (a checkpoint); a leaf that needs no
/// patch is parked there instead (`is_sealed_as_is`). So are the file
/// leaves `folds` names (sorted), which have value overlays: a step of a
/// checkpoint took them (`checkpoint_steps`), and writes each copy with
/// its overlay applied.
pub(crate) fn pull_arena(
    catalog: &mut Catalog,
    dirty: &mut DirtyPages,
    base: &MapSource,
    folds: &[u64],
) -> Result<()> {
    let folded = |pgno: u64| is_file_page(pgno) && folds.binary_search(&pgno).is_ok();
    let mut stack = Vec::new();
    let mut refs = Vec::new();
    for t in catalog.trees.iter_mut() {
        let tree_has_blobs = t.state.overflow_pages != 0;
        let root = &mut t.state.root;
        if root.pgno & ARENA_BIT != 0 {
            let arena_pgno = root.pgno;
            root.pgno = dirty.add_copy(base.page(arena_pgno)?);
            if let Some(overlay) = base.arena.as_ref().and_then(|a| a.overlay(arena_pgno)) {
                apply_overlay(dirty.get_mut(root.pgno), root.pgno, &overlay)?;
            }
        } else if folded(root.pgno) {
            root.pgno = copy_folded(dirty, base, root.pgno, root.txn)?;
        }
        if root.pgno & DIRTY_BIT != 0 {
            stack.push(root.pgno);
        }
        while let Some(id) = stack.pop() {
            let node = Node::parse(dirty.get(id), id, None)?;
            refs.clear();
            for i in 0..node.count {
                let target = if node.is_leaf {
                    match node.leaf_entry(i)?.1 {
                        LeafValue::Overflow { pgno, .. } => pgno,
                        LeafValue::Inline(_) => continue,
                    }
                } else {
                    node.child(i)?.0
                };
                if target & (ARENA_BIT | DIRTY_BIT) != 0 {
                    refs.push((i, target, 0));
                } else if !node.is_leaf && folded(target) {
                    refs.push((i, target, node.child(i)?.1));
                }
            }
            let is_leaf = node.is_leaf;
            for &(i, target, txn) in &refs {
                if target & DIRTY_BIT != 0 {
                    if !is_leaf {
                        stack.push(target);
                    }
                    continue;
                }
                if target & ARENA_BIT == 0 {
                    let copy = copy_folded(dirty, base, target, txn)?;
                    set_child(dirty.get_mut(id), i, copy, 0, 0);
                    continue;
                }
                let (copy, parked) = if is_leaf {
                    dirty.blobs_added += 1;
                    (dirty.add_copy(base.blob_run(target)?), false)
                } else {
                    let page = base.page(target)?;
                    // A leaf with a value overlay is copied, the overlay
                    // applied: no page reaches the file with one.
                    let overlay = base.arena.as_ref().and_then(|a| a.overlay(target));
                    match &base.arena {
                        Some(arena)
                            if overlay.is_none()
                                && is_sealed_as_is(page, target, tree_has_blobs)? =>
                        {
                            (dirty.park_arena_leaf(arena, target), true)
                        }
                        _ => {
                            let copy = dirty.add_copy(page);
                            if let Some(overlay) = overlay {
                                apply_overlay(dirty.get_mut(copy), copy, &overlay)?;
                            }
                            (copy, false)
                        }
                    }
                };
                let buf = dirty.get_mut(id);
                if is_leaf {
                    set_overflow(buf, i, copy, 0, 0);
                } else {
                    set_child(buf, i, copy, 0, 0);
                    if !parked {
                        stack.push(copy);
                    }
                }
            }
        }
    }
    Ok(())
}

/// A dirty copy of file leaf `pgno` (written by `txn`, as its parent
/// records) with its value overlay applied. Its checksum was verified when
/// the branches above it were laid out before the steps
/// (`TreeWriter::copy_branches_above_wanted`), so that damage is never sealed
/// under a fresh checksum; its header is checked again here.
fn copy_folded(dirty: &mut DirtyPages, base: &MapSource, pgno: u64, txn: u64) -> Result<u64> {
    let page = base.page(pgno)?;
    Node::parse(page, pgno, Some(txn))?;
    let overlay = base.overlay_page(pgno).ok_or_else(|| {
        Error::corrupted_page(pgno, "a leaf a checkpoint step folds has no overlay")
    })?;
    let copy = dirty.add_copy(page);
    apply_overlay(dirty.get_mut(copy), copy, &overlay)?;
    Ok(copy)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    const PAGE: u64 = 4096;

    /// The arena's bound in MiB for a file of `file_mib` and `memory`.
    fn bound_mib(file_mib: u64, memory: u64) -> u64 {
        arena_bound_within(PAGE, file_mib * MIB / PAGE, memory) * PAGE / MIB
    }

    #[test]
    fn the_arena_takes_twice_the_file_within_an_eighth_of_memory() {
        // Twice the file, at least 256 MiB, when memory is ample.
        assert_eq!(bound_mib(300, 24 * GIB), 600);
        assert_eq!(bound_mib(100, 24 * GIB), 256);
        assert_eq!(bound_mib(10, 24 * GIB), 256);
        // An eighth of memory at most: a 3 GiB file in a 1 GiB container.
        assert_eq!(bound_mib(3 * 1024, GIB), 128);
        assert_eq!(bound_mib(20 * 1024, 24 * GIB), 3 * 1024);
        // In little memory, the eighth wins over the 256 MiB floor.
        assert_eq!(bound_mib(10, 256 * MIB), 32);
        assert_eq!(bound_mib(10, GIB), 128);
        // Never zero slots, whatever the memory.
        assert_eq!(arena_bound_within(PAGE, 1000, 0), 1);
        // Unknown memory lowers nothing.
        assert_eq!(bound_mib(3 * 1024, u64::MAX), 6 * 1024);
    }

    #[test]
    fn the_log_takes_twice_the_data_of_the_file_and_the_arena() {
        let bound_mib = |file_mib: u64, arena_mib: u64| {
            default_log_bound(PAGE, file_mib * MIB / PAGE, arena_mib * MIB / PAGE) / MIB
        };
        // Overwrites of a 100 MiB file, before and after they copied
        // pages into the arena.
        assert_eq!(bound_mib(100, 0), 200);
        assert_eq!(bound_mib(100, 20), 240);
        // A tree filled from empty lives in the arena: its bound grows
        // with it, where the file's size alone kept it at the floor.
        assert_eq!(bound_mib(0, 20), 64);
        assert_eq!(bound_mib(0, 80), 160);
        assert_eq!(bound_mib(0, 190), 256);
        // Within the floor and the ceiling, whatever the sizes.
        assert_eq!(bound_mib(1, 1), 64);
        assert_eq!(bound_mib(10 * 1024, 10 * 1024), 256);
        assert_eq!(default_log_bound(PAGE, u64::MAX, u64::MAX) / MIB, 256);
    }

    #[test]
    fn a_follower_fills_its_reservation_within_a_quarter_of_memory() {
        let slots = |reserved: u64, memory: u64| {
            follower_arena_slots_within(reserved / PAGE, PAGE, memory) * PAGE / MIB
        };
        // The default reservation (16 GiB) within a quarter of 24 GiB.
        assert_eq!(slots(16 * GIB, 24 * GIB), 6 * 1024);
        // A 1 GiB container: 256 MiB, where growing to the reservation
        // would have the process killed instead of told.
        assert_eq!(slots(16 * GIB, GIB), 256);
        // A small reservation is its own bound.
        assert_eq!(slots(MIB, 24 * GIB), 1);
        // Unknown memory lowers nothing; no memory still leaves 2 slots.
        assert_eq!(slots(16 * GIB, u64::MAX), 16 * 1024);
        assert_eq!(follower_arena_slots_within(1000, PAGE, 0), 2);
    }
}
