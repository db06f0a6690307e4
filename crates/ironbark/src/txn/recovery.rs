//! Recovery: replaying the redo log into a checkpoint, when the newest
//! commits are logged commits this process cannot read: after a crash (the
//! first process to open finds records past the file's newest commit), or
//! when another process's arena holds them (a process joining, or taking
//! over from a writer that died between its log write and its publish).
//!
//! Invariant: the file's durable commit `C` plus the log records after it,
//! applied in txn order, is the newest commit (`txn::logged`); the replay
//! applies exactly those, stops at the first torn or damaged record (the
//! log's scan), and writes the result as one durable checkpoint whose txn
//! is above every txn any reader may have seen. A damaged record that a
//! later one proves was durable fails the replay instead, changing
//! nothing, unless the options salvage it ([`checked_chain_end`]): a
//! commit reported durable is never dropped without a word.

use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::options::Durability;
use crate::state;
use crate::storage::log::{log_path, RedoLog, Scan};
use crate::storage::meta::{read_zones, Meta, META_LEN};
use crate::txn::shared::{Following, Shared, Snapshot, WriterGuard, WriterState};
use crate::txn::write::WriteTxn;

/// Replays the log on the durable file commit and commits the result as a
/// durable checkpoint (which releases the write lock), with the txn id of
/// the last record replayed when that is above every published one.
pub(crate) fn replay_log(shared: &Shared, mut w: WriterGuard<'_>) -> Result<()> {
    let (meta, slot, file_len) = durable_meta(shared, &w)?;
    let other_log;
    let log = match w.log.as_ref() {
        Some(log) => log,
        // This instance keeps no log (logged commits off, and there was
        // none at its open): read the one the other process made.
        None => match RedoLog::open_read_only(&log_path(&shared.path))? {
            Some(log) => {
                other_log = log;
                &other_log
            }
            None => {
                return Err(Error::Corrupted {
                    page: None,
                    detail: "the newest commits were logged, and the redo log is gone".into(),
                })
            }
        },
    };
    let scan = log.scan()?;
    checked_chain_end(
        log,
        &scan,
        meta.txn,
        shared.salvage_damaged_log,
        &shared.path,
    )?;
    if !scan.records.is_empty() && scan.epoch > meta.log_base {
        return Err(Error::Corrupted {
            page: None,
            detail: format!(
                "the redo log continues commit {}, the file's durable commit is {}",
                scan.epoch, meta.txn
            ),
        });
    }
    meta.replay_end(scan.records.last().map(|r| r.txn))?;
    let records: Vec<_> = scan
        .records
        .into_iter()
        .filter(|r| r.txn > meta.log_base)
        .collect();
    let source = shared.file_source(&meta)?;
    let loaded = state::load(&source, &meta, true)?;
    // The checkpoint's txn: that of the last record replayed (it holds
    // exactly that commit), but above anything a live writer published, so
    // that the reader table's txn moves on and every process's writer
    // reloads. After a crash, the txn published is the log's last record
    // (set by the first open), which no writer state holds: only read-only
    // processes may have read it, rebuilt from the same records.
    let published = shared.readers.published_txn();
    let crashed = shared.readers.lock_file().is_some_and(|l| {
        l.header()
            .logged_by
            .load(std::sync::atomic::Ordering::Acquire)
            == u64::MAX
    });
    let commit_txn = (published + u64::from(!crashed))
        .max(records.last().map_or(0, |r| r.txn))
        .max(meta.txn + 1);
    let top = commit_txn - 1;
    // Given back when the lock was taken (`Shared::lock_writer`).
    assert!(w.taken_ahead.is_empty(), "pages taken ahead at a replay");
    w.free = loaded.free;
    let region_pages = (shared.branch_region_bytes / shared.limits.page_size) as u64;
    w.free
        .adopt_zones(region_pages, &read_zones(&shared.file, &meta, region_pages));
    w.chain = loaded.chain;
    w.state_txn = top;
    w.durable_txn = meta.txn;
    w.durable_slot = slot;
    w.file_len = file_len;
    w.allocated_to = w.allocated_to.min(file_len);
    w.poisoned |= shared.readers.lock_file().is_some_and(|l| {
        l.header()
            .poisoned
            .load(std::sync::atomic::Ordering::Acquire)
            != 0
    });
    w.arena_space.retire_all(commit_txn);
    w.logged_freed.clear();
    w.checkpoint_catalog = None;
    w.checkpoint_steps = None;
    let previous = shared.published.load_full();
    shared.set_published(Arc::new(Snapshot {
        meta: Meta { txn: top, ..meta },
        source,
        catalog: loaded.catalog,
    }));
    let result = (|| {
        let mut txn = WriteTxn::begin(shared, w, Durability::Immediate)?;
        txn.logging = false;
        txn.seal_blobs_at_put = false;
        txn.apply_redo(records.iter().map(|r| &r.payload[..]))?;
        // Even with nothing to replay, a checkpoint above `top` is what
        // readers of this process can load.
        txn.changed = true;
        txn.commit()
    })();
    if result.is_err() {
        shared.update_published(|now| {
            if now.txn() == top {
                previous.clone()
            } else {
                now.clone()
            }
        });
    }
    result
}

/// The txn of the last record of the chain `scan` found in `log` (`None`:
/// no record), once no record past the chain's end vouches for a commit
/// the replay would drop (`RedoLog::vouched_past`): one of a txn above
/// both that record's and `durable`'s (the data file's durable commit)
/// plus one proves the chain's end is a durable record damaged, not a
/// torn write, and is `Corrupted`, unless `salvage`
/// (`Options::salvage_damaged_log`), which replays up to the damage.
pub(crate) fn checked_chain_end(
    log: &RedoLog,
    scan: &Scan,
    durable: u64,
    salvage: bool,
    data_path: &Path,
) -> Result<Option<u64>> {
    let last = scan.records.last().map(|r| r.txn);
    if salvage {
        return Ok(last);
    }
    let replayed = last.unwrap_or(0).max(durable);
    match log.vouched_past(scan.end, replayed)? {
        None => Ok(last),
        Some(voucher) => Err(Error::Corrupted {
            page: None,
            detail: format!(
                "the redo log's record of commit {} (at byte {} of {}) is damaged, and the \
                 intact record of commit {voucher} after it was written once every record \
                 before it was durable: commits {} to {} were durable and would be lost \
                 (Options::salvage_damaged_log opens at commit {replayed} instead)",
                replayed + 1,
                scan.end,
                log_path(data_path).display(),
                replayed + 1,
                voucher - 1,
            ),
        }),
    }
}

/// The file's durable commit (its meta, its slot) and the file's length,
/// as the lock file (or, without one, this writer) says.
fn durable_meta(shared: &Shared, w: &WriterState) -> Result<(Meta, u64, u64)> {
    let ps = shared.limits.page_size;
    let (durable_txn, slot) = match shared.readers.lock_file() {
        Some(l) => {
            let h = l.header();
            (
                h.durable_txn.load(std::sync::atomic::Ordering::Acquire),
                h.durable_slot.load(std::sync::atomic::Ordering::Acquire),
            )
        }
        None => (w.durable_txn, w.durable_slot),
    };
    let mut bytes = [0u8; META_LEN];
    shared.file.read_exact_at(&mut bytes, slot * ps as u64)?;
    let meta = Meta::decode(&bytes, slot)?;
    if meta.txn != durable_txn {
        return Err(Error::Corrupted {
            page: Some(slot),
            detail: format!(
                "meta slot {slot} holds txn {}, the durable commit is {durable_txn}",
                meta.txn
            ),
        });
    }
    let file_len = shared.file.len()?;
    if meta.page_count.saturating_mul(ps as u64) > file_len {
        return Err(Error::Corrupted {
            page: Some(slot),
            detail: "the durable commit needs more pages than the file has".into(),
        });
    }
    Ok((meta, slot, file_len))
}

/// For a read-only process: the snapshot of logged commit `txn` (the
/// newest, which another process holds in its arena or a crashed one held),
/// built in this process's own arena from the log's records, and cached as
/// this process's newest. The file is not touched. When this process
/// rebuilt the commit before `txn` and the log still continues it, only the
/// records appended since are read and applied on it; otherwise the log's
/// records after the file's durable commit are applied on that commit.
/// `Ok(None)` when the log no longer holds exactly the commits up to `txn`
/// (a checkpoint moved on meanwhile: the caller looks at the newest commit
/// again).
///
/// `slot` is the caller's reader slot. Before any page is read it is
/// registered as a replay of the durable commit the rebuild reads
/// (`protect_build`), which keeps every page of that commit until the
/// commit that frees it, whether that comes before `txn` (a step of a
/// checkpoint frees the pages of the step before it at its own txn, and
/// publishes the newest commit again at that txn before its sync) or after
/// it (a checkpoint, or the steps of the checkpoint of `txn`, numbered
/// above it). The snapshot's readers register the same
/// (`read::protector`); this process's arena keeps its versions for its
/// own readers' snapshots (`ReaderTable::arena_snapshots`). A cached
/// rebuild whose durable commit is durable no more is rebuilt, not
/// returned (`stale`). (Until session 59 the slot showed `txn`, or
/// the step's txn, and a step could reuse pages under a rebuild.)
pub(crate) fn follow_log(shared: &Shared, txn: u64, slot: usize) -> Result<Option<Arc<Snapshot>>> {
    let mut w = shared.lock_follower();
    let cached = shared.published.load_full();
    if cached.txn() > txn || (cached.txn() == txn && !stale(shared, &cached)) {
        // Another thread rebuilt it (or a newer one) meanwhile.
        return Ok((cached.txn() == txn).then_some(cached));
    }
    if let Some(following) = w.following.take() {
        if following.at.last_txn == cached.txn()
            && cached.source.arena.is_some()
            && !stale(shared, &cached)
        {
            // Built on what `cached` was built on: its pages kept first.
            if !protect_build(shared, slot, cached.meta.state_txn, txn) {
                return Ok(None);
            }
            let scan = following.log.scan_from(Some(following.at), txn)?;
            if scan.records.last().is_some_and(|r| r.txn == txn) {
                let at = scan.chain_end(Some(following.at)).expect("records");
                let base = Snapshot {
                    meta: Meta {
                        txn: txn - 1,
                        ..cached.meta
                    },
                    source: cached.source.clone(),
                    catalog: cached.catalog.clone(),
                };
                let log = following.log;
                return match apply_records(shared, w, base, &scan.records, Following { log, at }) {
                    // No room beside the versions of earlier rebuilds: the
                    // rebuild from the file (where this process's place in
                    // the log, now forgotten, sends the call) lets go of
                    // every one no reader holds, and of the slots' order
                    // (a blob takes consecutive slots), so it may fit.
                    // (Until session 27 the caller got the error, though
                    // no snapshot was held and its retry fit.)
                    Err(Error::ArenaFull { .. }) => follow_log(shared, txn, slot),
                    other => other.map(Some),
                };
            }
        }
    }
    let (meta, _, _) = match durable_meta(shared, &w) {
        Ok(found) => found,
        // The durable commit moved between reading its slot and its meta.
        Err(Error::Corrupted { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    if meta.log_base >= txn {
        return Ok(None);
    }
    if meta.state_txn != meta.txn {
        // Every file commit writes its state; a rebuild's readers register
        // at the state's txn as the durable commit's (`read::protector`).
        return Err(Error::Corrupted {
            page: None,
            detail: format!(
                "the durable commit {} names the state of commit {}",
                meta.txn, meta.state_txn
            ),
        });
    }
    // The durable commit's pages kept before any is read.
    if !protect_build(shared, slot, meta.txn, txn) {
        return Ok(None);
    }
    let Some(log) = RedoLog::open_read_only(&log_path(&shared.path))? else {
        return Ok(None);
    };
    let scan = log.scan_from(None, txn)?;
    let last = scan.records.last().map(|r| r.txn);
    // Between the steps of a checkpoint the writer publishes the commit the
    // steps write (`replay_to`, the log's last record) again, laid out
    // over the pages they wrote (`logged::publish_step_layout`), at the
    // txn of the step it follows, which may not be durable yet: the same
    // entries, rebuilt here at that txn.
    let layout = meta.log_base < meta.txn
        && last == Some(meta.replay_to)
        && meta.replay_to < txn
        && txn <= meta.txn + 1;
    if scan.epoch > meta.log_base || txn < meta.replay_to {
        return Ok(None);
    }
    if last != Some(txn) && !layout {
        return short_chain(shared, &log, &meta, &scan, txn).map(|()| None);
    }
    let at = scan.chain_end(None).expect("records");
    let records: Vec<_> = scan
        .records
        .into_iter()
        .filter(|r| r.txn > meta.log_base)
        .collect();
    let source = shared.file_source(&meta)?;
    let loaded = state::load(&source, &meta, false)?;
    // This rebuild starts over from the file: every version an earlier one
    // put in the arena is superseded at `txn` (readers of those keep them),
    // or, when an earlier one built `txn` itself on a durable commit that
    // is durable no more (`stale`), just after it: its readers, at
    // `txn`, keep its versions too.
    let superseded = if cached.txn() == txn { txn + 1 } else { txn };
    w.arena_space.retire_all(superseded);
    // One transaction applies every record; numbered so that it commits
    // as `txn`.
    let base = Snapshot {
        meta: Meta {
            txn: txn - 1,
            ..meta
        },
        source,
        catalog: loaded.catalog,
    };
    apply_records(shared, w, base, &records, Following { log, at }).map(Some)
}

/// Registers `slot` (a reader of the published commit `txn`) as a replay
/// of the durable commit `durable`, which a rebuild is about to read;
/// true if that holds: `txn` is still the newest commit and `durable`
/// still the durable one, read after the registration. The writer saves a
/// newer durable commit before it looks at the readers for the pages the
/// older one's successors free, so from then on those pages stay
/// (`read::protector`).
fn protect_build(shared: &Shared, slot: usize, durable: u64, txn: u64) -> bool {
    shared.readers.try_register_protecting(slot, durable, txn)
        && shared.durable_txn_shown() == Some(durable)
}

/// Whether `snap` is a read-only process's rebuild of a logged commit on
/// the durable commit `snap.meta.state_txn`: in a read-only process,
/// only rebuilds have pages in its arena.
pub(crate) fn is_rebuilt(shared: &Shared, snap: &Snapshot) -> bool {
    shared.read_only && snap.source.arena.is_some()
}

/// Whether `snap` is a rebuild on a durable commit that is no longer the
/// durable one: once a newer one is durable, the writer may free and
/// reuse its pages as soon as no replay registered at it holds them, so
/// a reader that registers now may come too late. Such a snapshot is
/// rebuilt, not taken.
pub(crate) fn stale(shared: &Shared, snap: &Snapshot) -> bool {
    is_rebuilt(shared, snap) && shared.durable_txn_shown() != Some(snap.meta.state_txn)
}

/// What a follower's scan of `log` that ended before the record of the
/// published commit `txn` means, the chain continuing the durable commit
/// `meta`: `Corrupted` when the chain provably goes on past its end
/// (`RedoLog::continued_past`: a record there claims the next txn, or a
/// later record of the chain is chained to the one before it) and the
/// durable commit did not move meanwhile (read again after that look);
/// otherwise `Ok(())`, look at the newest commit again.
///
/// Why that is damage: the writer appends a record before it publishes
/// its commit, and begins a new chain only on a durable commit newer than
/// `meta`, so with the durable commit where it was, the chain was only
/// appended to, and a record of it at or past the end was written whole
/// before the scan began; every later look would stop at the same place,
/// however many commits the writer publishes meanwhile. A short chain is
/// not by itself damage: a checkpoint in steps publishes the newest
/// commit again at a step's txn, which no record holds, before the step
/// is durable. (Until session 59 the reader looked again in every case,
/// and spun for as long as the writer made no checkpoint.) Not salvaged:
/// a reader reads the newest commit or none. What no later record proves
/// (damage to the header of the newest record) is still looked at again.
fn short_chain(shared: &Shared, log: &RedoLog, meta: &Meta, scan: &Scan, txn: u64) -> Result<()> {
    let (reached, epoch) = match scan.records.last() {
        Some(r) => (r.txn, scan.epoch),
        None => (meta.log_base, meta.log_base),
    };
    let continued = log.continued_past(scan.end, reached, epoch)?;
    if shared.durable_txn_shown() != Some(meta.txn) || !continued {
        return Ok(());
    }
    Err(Error::Corrupted {
        page: None,
        detail: format!(
            "the redo log's record of commit {} (at byte {} of {}) is damaged: commits {} to \
             {txn}, which the process that logged them published, cannot be rebuilt from it",
            reached + 1,
            scan.end,
            log_path(&shared.path).display(),
            reached + 1,
        ),
    })
}

/// Applies `records` (which end with the commit of `base.txn() + 1`) on
/// `base` in one transaction placed in this process's arena, caches the
/// result as this process's newest snapshot, and remembers `following`.
fn apply_records(
    shared: &Shared,
    w: WriterGuard<'_>,
    base: Snapshot,
    records: &[crate::storage::log::LogRecord],
    following: Following,
) -> Result<Arc<Snapshot>> {
    let base = Arc::new(base);
    let mut t = WriteTxn::begin_on(shared, w, base.clone(), Durability::None)?;
    t.logging = false;
    t.seal_blobs_at_put = false;
    t.apply_redo(records.iter().map(|r| &r.payload[..]))?;
    let WriteTxn {
        mut writer,
        mut catalog,
        mut dirty,
        freed,
        ..
    } = t;
    // The rebuild is placed whole in the arena, which takes no spilled
    // page (`logged::to_arena`); a rebuild past `Options::max_dirty_bytes`
    // spilled some, as any write transaction does: they come back into
    // memory, the arena bounding the rebuild instead. (Until session 26 a
    // read-only process's rebuild past that bound panicked there.)
    dirty.unspill_all();
    let built =
        crate::txn::logged::follow(shared, &mut writer, &base, &mut catalog, &mut dirty, &freed);
    writer.dirty_spare = Some(dirty.emptied(shared.limits.page_size));
    let Some(snapshot) = built? else {
        let pages = shared.arena().map_or(0, |a| {
            crate::txn::logged::follower_arena_slots(&a, shared.limits.page_size)
        });
        return Err(Error::ArenaFull { pages });
    };
    writer.following = Some(following);
    let snapshot = Arc::new(snapshot);
    shared.cache_if_newer(&snapshot);
    Ok(snapshot)
}

/// Takes the write lock (see `Shared::lock_writer`) with the writer state
/// up to date: if the newest commits are logged commits this process
/// cannot read, replays them into a checkpoint first.
pub(crate) fn lock_writer(shared: &Shared, wait: bool) -> Result<WriterGuard<'_>> {
    loop {
        let w = shared.lock_writer(wait)?;
        if !shared.foreign_logged() {
            return Ok(w);
        }
        // The checkpoint's commit releases the lock: take it again.
        replay_log(shared, w)?;
    }
}
