//! The redo log (`<data file>-log`): one record per logged commit, appended
//! and synced instead of writing the commit's pages; the data file catches
//! up only at checkpoints, after which the log restarts from offset 0.
//!
//! Invariant: [`RedoLog::scan`] returns exactly the chain of records the
//! last [`RedoLog::restart`] began, up to the first record that is not
//! wholly and validly on disk, and nothing after it. Each record names the
//! chain (its epoch: the txn id of the checkpoint the chain starts from),
//! carries the next txn id, and is checksummed with the previous record's
//! checksum as the seed (the epoch for the first record), so a record
//! counts only if every record before it does.
//!
//! Layout (little-endian): records back to back from offset 0, each at a
//! multiple of 8:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | XXH3-64 of bytes 8..(32 + payload length), seeded with the previous record's checksum (the first record of a chain: with the epoch) |
//! | 8 | 4 | magic `IBLG` |
//! | 12 | 4 | payload length in bytes (at most [`MAX_PAYLOAD`]) |
//! | 16 | 8 | txn id of the commit (the first record: epoch + 1; then the previous one's + 1) |
//! | 24 | 8 | epoch: the txn id of the checkpoint the chain starts from |
//! | 32 | len | payload, which starts with the byte [`SYNC_MARKER`] when every earlier record of the chain was durable before this one was written |
//! | 32 + len | 0-7 | zeros, to a multiple of 8 (checked by the scan, not checksummed) |
//!
//! Damage against a torn write: a crash tears only records not yet
//! synced, and with no sync between them the kernel may write their pages
//! in any order, so a chain that ends at a bad record followed by good
//! ones is what a crash may leave, and the chain up to it is the state to
//! recover. But a good record that carries the marker was written after a
//! sync of every record before it: a bad record before it is damage to a
//! durable commit (the medium, a misdirected write), which recovery
//! reports instead of dropping the commits silently
//! ([`RedoLog::vouched_past`]). The last durable record has no later one to
//! vouch for it: its damage reads as a torn write.
//!
//! Recycling: after `restart(E)` the new chain overwrites the old one from
//! offset 0, and the old chain's bytes after the new chain's end stay in
//! the file. They can never continue the new chain: the old records carry
//! an older epoch and txn ids at most E (the checkpoint E covers every
//! commit logged before it), while the new chain wants epoch E and txn ids
//! above E; a record torn in the middle of the file fails its checksum
//! just the same. So the scan stops at the new chain's end.
//!
//! The one continuation the checks cannot rule out is a record of the
//! *same* chain left past the end after a crash, when the process that
//! resumed the chain then wrote a record byte for byte identical to the
//! one the old record was chained to (same txn id, same payload): the
//! chain is then the same history as before, and the old record is a
//! commit the crashed process made on exactly that state.
//!
//! The file only grows, by allocated blocks that read as zeros
//! (`fallocate`, or written zeros where the filesystem cannot; never
//! holes), and is reused from offset 0 by every restart: in steady state
//! an append overwrites written blocks, so the `fdatasync` of a record has
//! no file metadata to write (the first pass over an allocated block
//! marks it written, once).

use std::io;
use std::path::Path;

use crate::checksum::{checksum_seeded, checksum_seeded_pair};
use crate::error::{Error, Result};
use crate::storage::file::{DataFile, IoHookHandle};
use crate::storage::map::WriteMap;

/// The magic of every record.
pub(crate) const MAGIC: [u8; 4] = *b"IBLG";
/// Bytes of a record before its payload.
pub(crate) const HEADER_LEN: usize = 32;
/// The largest payload of one record (64 MiB). A commit whose payload is
/// larger is not logged (the caller checkpoints it instead); the scan
/// takes a larger length for garbage.
pub(crate) const MAX_PAYLOAD: usize = 64 << 20;
/// Every record starts at a multiple of this.
const ALIGN: usize = 8;
/// The first byte of a record's payload when every record before it in
/// its chain was durable before it was written (the log was synced through
/// them): the record vouches for them. The scan strips it
/// ([`LogRecord::after_sync`]); a later record that vouches for a damaged
/// one proves that damage is not a torn write
/// ([`RedoLog::vouched_past`]). 9 is no operation of the redo payload
/// (`txn::redo`): a build older than the marker reports such a record as
/// damage and opens nothing, rather than replaying part of it.
pub(crate) const SYNC_MARKER: u8 = 9;
/// The least the file grows by at a time (unless a quarter of its length
/// is more): growth is rare and the log is recycled, so it pays to grow
/// in big steps.
const GROW_MIN: u64 = 1 << 20;
/// Zeros for padding and for growing the file; the file grows to a
/// multiple of its length.
static ZEROS: [u8; 64 * 1024] = [0; 64 * 1024];
/// Records of at least this many bytes are written with `pwrite`, not
/// through the map, synced or not ([`RedoLog::append_record`]): through
/// the map, each page of the log an append reaches first takes two faults'
/// work (a read fault that fills the page with the zeros of its allocated
/// block, then the write fault that dirties it), where a `pwrite` that
/// covers whole pages fills them with the record itself. A record of a
/// page or more reaches at least one new page, and one system call costs
/// less than that page's faults: a random fill's commits of 1,000 puts
/// (130 KiB records) ran 1.01-1.10x in six pairs (benchmarks.md, session
/// 43). A smaller record (a single put's, some 150 bytes) reaches a new
/// page once in many commits, and goes through the map with no system
/// call.
pub(crate) const WRITTEN_RECORD_BYTES: usize = 4096;
/// Cache lines of the log asked for past a record appended through the
/// map, where the next record goes (a single put's is some 150 bytes):
/// the next append stores to lines already in cache instead of waiting
/// for each to be read in, a miss per commit that was a twentieth of
/// single-put overwrites at 1M records (session 48).
const NEXT_RECORD_LINES: usize = 3;
/// How much the scan reads at a time (more for a larger record).
const SCAN_CHUNK: usize = 1 << 20;

/// The redo log, open for appending. Keeps, for the chain being written,
/// where the next record goes and what it chains to; the file itself is
/// only read by [`RedoLog::scan`].
#[derive(Debug)]
pub(crate) struct RedoLog {
    /// The log file (a [`DataFile`] of kind log: the hooks see it apart).
    file: DataFile,
    /// The file's length: appends below it overwrite written blocks, and
    /// the file is grown (with zeros) before an append past it.
    file_len: u64,
    /// Where the next record goes: the end of the chain's last record.
    next: u64,
    /// The seed of the next record: the chain's last checksum, or the
    /// epoch before the chain's first record.
    last_sum: u64,
    /// The chain's epoch.
    epoch: u64,
    /// The chain's last txn id, or the epoch before its first record.
    last_txn: u64,
    /// The chain's last txn whose record a sync made durable, or the epoch
    /// when none has been: the next record vouches for the chain
    /// ([`SYNC_MARKER`]) when this is `last_txn`.
    synced_through: u64,
    /// A writable map of the file's first `file_len` bytes, through which
    /// records are appended; made at the first append after the file grew
    /// (never for a log that is only read).
    map: Option<WriteMap>,
    /// See [`RedoLog::zeros_written`].
    zeros_written: u64,
    /// Tests only: grow by written zeros even where the filesystem can
    /// allocate, to run the fallback's path.
    #[cfg(test)]
    zeros_only: bool,
}

/// One record of the log: the commit of `txn`, and what it logged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LogRecord {
    /// The txn id of the commit.
    pub(crate) txn: u64,
    /// What the commit logged (opaque here), less a leading
    /// [`SYNC_MARKER`].
    pub(crate) payload: Vec<u8>,
    /// The record carried the [`SYNC_MARKER`]: every record before it in
    /// the chain was durable when it was written.
    pub(crate) after_sync: bool,
}

/// The valid chain found at the start of the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Scan {
    /// The chain's epoch (the checkpoint it starts from); 0 when there are
    /// no records.
    pub(crate) epoch: u64,
    /// The chain's records, in order: txn ids epoch + 1, epoch + 2, ...
    pub(crate) records: Vec<LogRecord>,
    /// The offset after the last valid record (0 when there is none).
    pub(crate) end: u64,
    /// The last valid record's checksum (the epoch when there is none):
    /// the seed of the record that continues the chain.
    pub(crate) last_sum: u64,
}

impl Scan {
    /// Where the chain stands after this scan, for continuing it
    /// ([`RedoLog::scan_from`]); `None` when it found no record and did not
    /// continue one (nothing to continue).
    pub(crate) fn chain_end(&self, from: Option<ChainEnd>) -> Option<ChainEnd> {
        let last_txn = match self.records.last() {
            Some(r) => r.txn,
            None => from?.last_txn,
        };
        Some(ChainEnd {
            end: self.end,
            last_sum: self.last_sum,
            last_txn,
            epoch: self.epoch,
        })
    }
}

/// Where a chain stands: the offset after its last record, that record's
/// checksum and txn id, and the chain's epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ChainEnd {
    pub(crate) end: u64,
    pub(crate) last_sum: u64,
    pub(crate) last_txn: u64,
    pub(crate) epoch: u64,
}

/// The log's path for the data file `data`: `<data file>-log`.
pub(crate) fn log_path(data: &Path) -> std::path::PathBuf {
    let mut name = data.file_name().unwrap_or_default().to_os_string();
    name.push("-log");
    data.with_file_name(name)
}

impl RedoLog {
    /// Restarts the chain after the durable checkpoint `epoch` and empties
    /// the file, giving its blocks back (a clean close of the last process:
    /// the log holds nothing the file does not, and an empty log is found
    /// empty without reading). Not synced: if the truncation is lost, the
    /// next open reads the old records and skips them, as the checkpoint
    /// covers them. Only with no other handle on the file (a process
    /// reading it through a map would fault).
    pub(crate) fn clear(&mut self, epoch: u64) -> Result<()> {
        self.restart(epoch);
        if self.file_len > 0 {
            // The map covers bytes that are about to go.
            self.map = None;
            self.file.set_len(0)?;
            self.file_len = 0;
        }
        Ok(())
    }

    /// Opens the log at `path` for reading only (a read-only process checks
    /// whether it holds records); `None` if there is no log.
    pub(crate) fn open_read_only(path: &Path) -> Result<Option<RedoLog>> {
        match DataFile::open_log_read_only(path).map_err(|e| Error::file(path, "log file", e))? {
            Some(file) => RedoLog::over(file).map(Some),
            None => Ok(None),
        }
    }

    /// Gives the log the data file's permission bits and group (see
    /// `DataFile::match_owner`).
    pub(crate) fn match_owner(&self, data: &std::fs::Metadata) {
        self.file.match_owner(data);
    }

    /// Opens (creating if missing) the log at `path`. The log is then as
    /// after `restart(0)`: call [`RedoLog::scan`] and then
    /// [`RedoLog::resume`] or [`RedoLog::restart`] before appending.
    pub(crate) fn open(path: &Path, hook: Option<IoHookHandle>) -> Result<RedoLog> {
        let file = DataFile::open_log(path, hook).map_err(|e| Error::file(path, "log file", e))?;
        RedoLog::over(file)
    }

    /// The log in `file`, as after `restart(0)`.
    fn over(file: DataFile) -> Result<RedoLog> {
        let file_len = file.len()?;
        Ok(RedoLog {
            file,
            file_len,
            next: 0,
            last_sum: 0,
            epoch: 0,
            last_txn: 0,
            synced_through: 0,
            map: None,
            zeros_written: 0,
            #[cfg(test)]
            zeros_only: false,
        })
    }

    /// Reads the valid chain from offset 0: the first record fixes the
    /// epoch E and must have txn E + 1; each next record must have the same
    /// epoch and the next txn id; every record must have the magic, a
    /// length at most [`MAX_PAYLOAD`] that fits in the file, the checksum
    /// seeded with the previous record's (with E for the first), and zero
    /// padding. Stops, without error, at the first record that fails any
    /// check: torn tails, zeros, garbage and the stale records of an older
    /// chain all end the chain. Never panics on any file content; an empty
    /// or all-zero file gives no records. Errors only when reading fails.
    /// A record's [`SYNC_MARKER`] is taken off its payload
    /// ([`LogRecord::after_sync`]).
    ///
    /// The records may include commits the data file already holds (a
    /// checkpoint newer than the chain's epoch, written before the restart's
    /// first append): the caller skips those by txn id.
    pub(crate) fn scan(&self) -> Result<Scan> {
        self.scan_from(None, u64::MAX)
    }

    /// Like [`RedoLog::scan`], but continues the chain at `from` (the end
    /// of an earlier scan of this chain: a process following the log reads
    /// only what was appended since) or, with `None`, reads it from offset
    /// 0; and stops after the record of txn `upto`. If the log was
    /// restarted since `from`, what lies there is another chain's (another
    /// epoch, or a seed that does not match) or an old record the new chain
    /// has not overwritten yet, which continues `from`'s chain truly: either
    /// way the result is a prefix of `from`'s chain.
    pub(crate) fn scan_from(&self, from: Option<ChainEnd>, upto: u64) -> Result<Scan> {
        let mut window = self.window()?;
        let mut scan = Scan {
            epoch: from.map_or(0, |f| f.epoch),
            records: Vec::new(),
            end: from.map_or(0, |f| f.end),
            last_sum: from.map_or(0, |f| f.last_sum),
        };
        // The seed and txn the next record continues, once the chain's
        // epoch is known.
        let mut prev = from.map(|f| (f.last_sum, f.last_txn));
        loop {
            let at = scan.end;
            let Some(h) = window.get(at, HEADER_LEN)? else {
                break;
            };
            let sum = u64_at(h, 0);
            let magic_ok = h[8..12] == MAGIC;
            let payload_len = u32_at(h, 12) as usize;
            let txn = u64_at(h, 16);
            let epoch = u64_at(h, 24);
            if !magic_ok || payload_len > MAX_PAYLOAD {
                break;
            }
            let (seed, prev_txn) = match prev {
                None => (epoch, epoch),
                Some(p) if epoch == scan.epoch => p,
                Some(_) => break,
            };
            if prev_txn.checked_add(1) != Some(txn) || txn > upto {
                break;
            }
            let body_end = HEADER_LEN + payload_len;
            let Some(rec) = window.get(at, padded(payload_len))? else {
                break;
            };
            if checksum_seeded(&rec[8..body_end], seed) != sum
                || rec[body_end..].iter().any(|&b| b != 0)
            {
                break;
            }
            let stored = &rec[HEADER_LEN..body_end];
            let after_sync = stored.first() == Some(&SYNC_MARKER);
            scan.records.push(LogRecord {
                txn,
                payload: stored[usize::from(after_sync)..].to_vec(),
                after_sync,
            });
            scan.epoch = epoch;
            scan.last_sum = sum;
            prev = Some((sum, txn));
            // Cannot overflow: the record lies within the file.
            scan.end = at + rec.len() as u64;
        }
        Ok(scan)
    }

    /// Looks past `end`, where a scan's chain ended, for a record that
    /// vouches for commits past `through` (the newest commit the caller
    /// holds without the log): a valid record of a txn above
    /// `through + 1`, carrying the [`SYNC_MARKER`], chained to the record
    /// that lies just before it (whose stored checksum seeds its own, so
    /// garbage or a stale record of an older chain passes with chance
    /// 2^-64). Its txn, if there is one: every record of the chain before
    /// it was durable when it was written, so the chain's end at `end` is
    /// damage to a durable record (of txn `through + 1`), not a torn write,
    /// and replaying the chain up to `end` would drop durable commits.
    /// `None` otherwise: nothing past `end`, records that vouch for none
    /// (commits not yet synced, which a crash may tear in any order), or
    /// stale records of an older chain (every txn of one is at most the
    /// newer chain's epoch, so at most `through`). Reads the file from
    /// `end` to its length; never panics on any content.
    pub(crate) fn vouched_past(&self, end: u64, through: u64) -> Result<Option<u64>> {
        let Some(least) = through.checked_add(1) else {
            return Ok(None);
        };
        self.chained_past(end, least, None, true)
    }

    /// Whether chain `epoch`, whose scan ended at `end` after the record of
    /// txn `last`, provably goes on past `end`: a record of it claims txn
    /// `last + 1` at `end` (its header whole; the scan rejected the rest),
    /// or a valid record of it past `end`, of a txn above `last + 1`, is
    /// chained to the record just before it (as in
    /// [`RedoLog::vouched_past`], the marker not asked for). For a process
    /// following a live writer's log (`recovery::follow_log`): a record
    /// the writer published was wholly written before, so when a record
    /// that continues the chain lies there or past it, the chain's end is
    /// damage. Reads the file from `end` to its length; never panics on
    /// any content.
    pub(crate) fn continued_past(&self, end: u64, last: u64, epoch: u64) -> Result<bool> {
        let Some(next) = last.checked_add(1) else {
            return Ok(false);
        };
        let mut window = self.window()?;
        if let Some(h) = window.get(end, HEADER_LEN)? {
            if h[8..12] == MAGIC
                && u32_at(h, 12) as usize <= MAX_PAYLOAD
                && u64_at(h, 16) == next
                && u64_at(h, 24) == epoch
            {
                return Ok(true);
            }
        }
        Ok(self.chained_past(end, next, Some(epoch), false)?.is_some())
    }

    /// The txn of the first valid record past `end` (of chain `epoch`, if
    /// given; carrying the [`SYNC_MARKER`], if `marked`) that is chained to
    /// the record just before it, of a txn of at least `least`.
    fn chained_past(
        &self,
        end: u64,
        least: u64,
        epoch: Option<u64>,
        marked: bool,
    ) -> Result<Option<u64>> {
        let mut window = self.window()?;
        let mut at = end.next_multiple_of(ALIGN as u64);
        while let Some(h) = window.get(at, HEADER_LEN)? {
            // A record that may be the one before a chained one, whose txn
            // is this one's + 1.
            let (sum, stored_len) = (u64_at(h, 0), u32_at(h, 12));
            let (txn, its_epoch) = (u64_at(h, 16), u64_at(h, 24));
            if h[8..12] == MAGIC
                && stored_len as usize <= MAX_PAYLOAD
                && txn >= least
                && epoch.is_none_or(|e| e == its_epoch)
            {
                let next = at + padded(stored_len as usize) as u64;
                if let Some(chained) = txn.checked_add(1) {
                    if window.chained(next, sum, chained, its_epoch, marked)? {
                        return Ok(Some(chained));
                    }
                }
            }
            at += ALIGN as u64;
        }
        Ok(None)
    }

    /// A window over the whole file as it is now, for one scan.
    fn window(&self) -> Result<Window<'_>> {
        Ok(Window {
            file: &self.file,
            len: self.file.len()?,
            start: 0,
            buf: Vec::new(),
        })
    }

    /// Starts a new chain after the checkpoint of txn `epoch`: the next
    /// append writes at offset 0, and must be of txn `epoch + 1`. No I/O.
    ///
    /// The checkpoint must be durable before that append, which overwrites
    /// the old chain; and it must cover every commit the log holds (so
    /// `epoch` is at least the last txn appended), which is what keeps the
    /// old chain's leftovers out of the new chain (see the module header).
    pub(crate) fn restart(&mut self, epoch: u64) {
        assert!(
            epoch >= self.last_txn,
            "log restarted at checkpoint {epoch} behind its last record {}",
            self.last_txn
        );
        self.next = 0;
        self.last_sum = epoch;
        self.epoch = epoch;
        self.last_txn = epoch;
        self.synced_through = epoch;
    }

    #[cfg(test)]
    /// Continues the chain `scan` found (a scan of this log): the next
    /// append goes at `scan.end`, over whatever torn or stale bytes follow
    /// the chain. Resuming a scan without records is `restart(scan.epoch)`.
    /// No I/O.
    pub(crate) fn resume(&mut self, scan: &Scan) {
        self.next = scan.end;
        self.epoch = scan.epoch;
        // Whether the records found were ever synced is not known.
        self.synced_through = scan.epoch;
        match scan.records.last() {
            Some(last) => {
                self.last_sum = scan.last_sum;
                self.last_txn = last.txn;
            }
            None => {
                self.last_sum = scan.epoch;
                self.last_txn = scan.epoch;
            }
        }
    }

    /// Appends the record of `txn` with `payload`, after growing the file
    /// (`grow_to`) if the record passes its end. The record is copied
    /// into the page cache through a writable map of the file, which is as
    /// safe from a process crash as a `write` and costs no system call
    /// (docs/design.md, "The redo log is written through a map"). Does not
    /// sync. On error the chain is as before (the file may have grown): the
    /// same txn can be appended again, at the same offset.
    /// Refuses a payload over [`MAX_PAYLOAD`], the marker counted (an
    /// `InvalidInput` I/O error).
    ///
    /// Panics unless `txn` is the last txn + 1, or if `payload` starts with
    /// [`SYNC_MARKER`] (bugs in the caller: a payload starts with an operation).
    pub(crate) fn append(&mut self, txn: u64, payload: &[u8]) -> Result<()> {
        let (head, head_len, end, sum) = self.encode(txn, payload)?;
        let padding = &ZEROS[..(end - self.next) as usize - head_len - payload.len()];
        let map = match &mut self.map {
            Some(map) => map,
            none => none.insert(self.file.map_writable(self.file_len)?),
        };
        debug_assert!(end <= map.len(), "the map covers the grown file");
        self.file
            .write_mapped(map, &[&head[..head_len], payload, padding], self.next)?;
        map.prefetch_after(end, NEXT_RECORD_LINES);
        self.advance(txn, end, sum);
        Ok(())
    }

    /// Appends the record of `txn` the way that costs it least; returns
    /// whether it went through the map. Through the map ([`RedoLog::append`],
    /// no system call) unless the caller syncs it at once (`synced`) or it
    /// takes a page or more; then with `pwrite` ([`RedoLog::append_written`]).
    #[inline]
    pub(crate) fn append_record(&mut self, txn: u64, payload: &[u8], synced: bool) -> Result<bool> {
        if synced || HEADER_LEN + payload.len() >= WRITTEN_RECORD_BYTES {
            self.append_written(txn, payload)?;
            return Ok(false);
        }
        self.append(txn, payload)?;
        Ok(true)
    }

    /// [`RedoLog::append`] with `pwrite` instead of through the map, for a
    /// record the caller syncs at once (`Durability::Immediate`), or of
    /// [`WRITTEN_RECORD_BYTES`] or more. A record to sync: the store after
    /// a sync takes a fault (until session 34 a write fault on the page
    /// the sync write-protected; now the sync unmaps the log, so a new map
    /// and its fault), and the sync of a page dirtied through a map cost
    /// more than the `pwrite` saved (durable single-put commits into 200k
    /// records: 2.8-3.1k/s through the map, 7.9-8.8k/s with `pwrite`,
    /// measured before session 34). A large record: see
    /// [`WRITTEN_RECORD_BYTES`].
    pub(crate) fn append_written(&mut self, txn: u64, payload: &[u8]) -> Result<()> {
        let (head, head_len, end, sum) = self.encode(txn, payload)?;
        let padding = &ZEROS[..(end - self.next) as usize - head_len - payload.len()];
        self.file
            .write_vectored_at(&[&head[..head_len], payload, padding], self.next)?;
        self.advance(txn, end, sum);
        Ok(())
    }

    /// Checks and encodes the header of the record of `txn` with
    /// `payload`, growing the file to hold the record; returns the header
    /// (with the [`SYNC_MARKER`] after it when every record before this one
    /// is durable) and its length, where the record ends and its checksum.
    /// Nothing is appended yet: the caller writes the header, the payload
    /// and the padding to the record's length back to back, so the payload
    /// is copied once, from where the commit built it into the file.
    fn encode(
        &mut self,
        txn: u64,
        payload: &[u8],
    ) -> Result<([u8; HEADER_LEN + 1], usize, u64, u64)> {
        assert_eq!(
            self.last_txn.checked_add(1),
            Some(txn),
            "log record out of order"
        );
        assert_ne!(
            payload.first(),
            Some(&SYNC_MARKER),
            "a payload starts with an operation, never with the sync marker"
        );
        // The first record of a chain has none before it to vouch for.
        let vouches = self.last_txn > self.epoch && self.synced_through == self.last_txn;
        let head_len = HEADER_LEN + usize::from(vouches);
        let stored_len = payload.len() + usize::from(vouches);
        if stored_len > MAX_PAYLOAD {
            return Err(Error::Io(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "log record of {} bytes is larger than the limit of {MAX_PAYLOAD}",
                    payload.len()
                ),
            )));
        }
        let total = padded(stored_len);
        assert!(
            total - HEADER_LEN - stored_len < ALIGN,
            "padding within ZEROS"
        );
        let end = self.next + total as u64;
        self.grow_to(end)?;
        let mut head = [0u8; HEADER_LEN + 1];
        head[8..12].copy_from_slice(&MAGIC);
        head[12..16].copy_from_slice(&(stored_len as u32).to_le_bytes());
        head[16..24].copy_from_slice(&txn.to_le_bytes());
        head[24..32].copy_from_slice(&self.epoch.to_le_bytes());
        head[HEADER_LEN] = SYNC_MARKER;
        let sum = checksum_seeded_pair(&head[8..head_len], payload, self.last_sum);
        head[..8].copy_from_slice(&sum.to_le_bytes());
        Ok((head, head_len, end, sum))
    }

    /// The record encoded last (ending at `end`, with checksum `sum`) is
    /// appended: the chain ends after it.
    fn advance(&mut self, txn: u64, end: u64, sum: u64) {
        self.next = end;
        self.last_sum = sum;
        self.last_txn = txn;
    }

    /// Makes every record appended so far durable (`fdatasync` of the log).
    ///
    /// The writable map goes first (the next append maps the file again).
    /// Writeback write-protects each page it writes in every map of the
    /// file, and on x86 that is one TLB shootdown per page, an interrupt of
    /// every CPU running a thread of this process: a reader beside the
    /// writer took about a thousand a second, each a few microseconds (its
    /// p99.9) on this VM (docs/design.md, "The redo log is written through
    /// a map"). Unmapping flushes the whole range once, and the sync then
    /// finds no page mapped. The pages the records went to stay in the page
    /// cache, dirty, so nothing is lost: unmapping a shared map moves the
    /// dirty bits of its entries to the pages.
    pub(crate) fn sync(&mut self) -> Result<()> {
        self.map = None;
        self.file.sync_data()?;
        self.synced_through = self.last_txn;
        Ok(())
    }

    /// Bytes of records since the last restart (the caller checkpoints
    /// when this passes its bound).
    pub(crate) fn len_used(&self) -> u64 {
        self.next
    }

    /// The last txn appended (or resumed), or the epoch right after a
    /// restart.
    pub(crate) fn last_txn(&self) -> u64 {
        self.last_txn
    }

    /// The epoch of the chain being written: the durable file commit its
    /// records continue.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch
    }

    #[cfg(test)]
    /// The log file's length (grown ahead of the records, never shrunk).
    pub(crate) fn file_len(&self) -> u64 {
        self.file_len
    }

    /// Grows the file to hold `end` bytes, if it does not, in one step of
    /// at least [`GROW_MIN`] or a quarter of its length: with blocks
    /// allocated and not written (`fallocate`), or, where the filesystem
    /// cannot, with written zeros. Either way the new bytes read as zeros
    /// and a store into them needs no block allocated; allocating writes
    /// none of them (a log as large as its bound would otherwise write that
    /// many zeros once, as many bytes as its records). On error the length
    /// is left as known: what was written is zeros past every record,
    /// written again on the next try.
    fn grow_to(&mut self, end: u64) -> Result<()> {
        if end <= self.file_len {
            return Ok(());
        }
        let step = GROW_MIN.max(self.file_len / 4);
        let least = end.next_multiple_of(ZEROS.len() as u64);
        let target = least.max(
            self.file_len
                .saturating_add(step)
                .next_multiple_of(ZEROS.len() as u64),
        );
        // A disk without room for the whole step may still hold the
        // record: the step is slack, not a need.
        match self.grow_once(target) {
            Err(_) if least < target => self.grow_once(least),
            other => other,
        }
    }

    /// Grows the file to `target` bytes (`grow_to`).
    fn grow_once(&mut self, target: u64) -> Result<()> {
        // The map covers the old length only.
        self.map = None;
        #[cfg(test)]
        let allocated = if self.zeros_only {
            Ok(false)
        } else {
            self.file.allocate(self.file_len, target)
        };
        #[cfg(not(test))]
        let allocated = self.file.allocate(self.file_len, target);
        let grown = match allocated {
            Ok(true) => Ok(()),
            Ok(false) => self.write_zeros(target),
            Err(e) => Err(e),
        };
        if let Err(e) = grown {
            // A growth that failed part-way (a full disk) gives back what it
            // wrote: a checkpoint, which makes room in the log, needs it.
            let _ = self.file.set_len(self.file_len);
            return Err(e);
        }
        self.file_len = target;
        Ok(())
    }

    /// Writes zeros from the file's end to `target`.
    fn write_zeros(&mut self, target: u64) -> Result<()> {
        let mut bufs: Vec<&[u8]> = Vec::new();
        let mut left = target - self.file_len;
        while left > 0 {
            let n = left.min(ZEROS.len() as u64);
            bufs.push(&ZEROS[..n as usize]);
            left -= n;
        }
        self.file.write_vectored_at(&bufs, self.file_len)?;
        self.zeros_written += target - self.file_len;
        Ok(())
    }

    /// Bytes of zeros written to grow the file, in all (none where the
    /// filesystem allocates blocks without writing them).
    pub(crate) fn zeros_written(&self) -> u64 {
        self.zeros_written
    }
}

/// The bytes a record with a payload of `payload_len` takes: header,
/// payload and padding to [`ALIGN`]. At most `HEADER_LEN + MAX_PAYLOAD`
/// for lengths the format allows.
fn padded(payload_len: usize) -> usize {
    (HEADER_LEN + payload_len).next_multiple_of(ALIGN)
}

/// A window of the file for the scan: reads ahead in chunks, so a scan of
/// many small records makes few reads.
struct Window<'a> {
    file: &'a DataFile,
    /// The file's length when the scan began.
    len: u64,
    /// The file offset of `buf[0]`.
    start: u64,
    buf: Vec<u8>,
}

impl Window<'_> {
    /// The `n` bytes at `offset`, or `None` if they pass the file's end.
    fn get(&mut self, offset: u64, n: usize) -> Result<Option<&[u8]>> {
        let Some(end) = offset.checked_add(n as u64).filter(|&e| e <= self.len) else {
            return Ok(None);
        };
        if offset < self.start || end > self.start + self.buf.len() as u64 {
            // Within the file, so it fits in a usize as `n` does.
            let want = (self.len - offset).min(n.max(SCAN_CHUNK) as u64) as usize;
            self.buf.resize(want, 0);
            self.file.read_exact_at(&mut self.buf, offset)?;
            self.start = offset;
        }
        let at = (offset - self.start) as usize;
        Ok(Some(&self.buf[at..at + n]))
    }

    /// Whether a valid record of `txn` in chain `epoch` lies at `at`,
    /// checksummed with `seed` and, if `marked`, carrying the
    /// [`SYNC_MARKER`].
    fn chained(&mut self, at: u64, seed: u64, txn: u64, epoch: u64, marked: bool) -> Result<bool> {
        let Some(h) = self.get(at, HEADER_LEN)? else {
            return Ok(false);
        };
        let (sum, stored_len) = (u64_at(h, 0), u32_at(h, 12) as usize);
        if h[8..12] != MAGIC
            || stored_len == 0
            || stored_len > MAX_PAYLOAD
            || u64_at(h, 16) != txn
            || u64_at(h, 24) != epoch
        {
            return Ok(false);
        }
        let Some(rec) = self.get(at, padded(stored_len))? else {
            return Ok(false);
        };
        let body_end = HEADER_LEN + stored_len;
        Ok((!marked || rec[HEADER_LEN] == SYNC_MARKER)
            && rec[body_end..].iter().all(|&b| b == 0)
            && checksum_seeded(&rec[8..body_end], seed) == sum)
    }
}

/// The little-endian u32 at `at` of `b` (in bounds: a header's field).
fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

/// The little-endian u64 at `at` of `b` (in bounds: a header's field).
fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::file::IoHook;
    use std::fs;
    use std::os::unix::fs::{FileExt, MetadataExt};
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    /// A deterministic payload of `len` bytes for record `txn`.
    /// Never starts with the sync marker, as no redo payload does.
    fn payload(txn: u64, len: usize) -> Vec<u8> {
        let mut p: Vec<u8> = (0..len)
            .map(|i| (txn as usize * 131 + i * 7 + 1) as u8)
            .collect();
        if p.first() == Some(&SYNC_MARKER) {
            p[0] = 0;
        }
        p
    }

    /// xorshift64*: reproducible garbage.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn bytes(&mut self, n: usize) -> Vec<u8> {
            (0..n).map(|_| self.next() as u8).collect()
        }
    }

    fn temp_log() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.ib-log");
        (dir, path)
    }

    fn scan_of(path: &Path) -> Scan {
        RedoLog::open(path, None).unwrap().scan().unwrap()
    }

    /// Writes a chain after checkpoint `epoch` with payloads of `sizes`;
    /// returns the records and the offset each one starts at.
    fn write_chain(log: &mut RedoLog, epoch: u64, sizes: &[usize]) -> (Vec<LogRecord>, Vec<u64>) {
        log.restart(epoch);
        let mut records = Vec::new();
        let mut starts = Vec::new();
        for (i, &len) in sizes.iter().enumerate() {
            let txn = epoch + 1 + i as u64;
            let p = payload(txn, len);
            starts.push(log.len_used());
            log.append(txn, &p).unwrap();
            records.push(LogRecord {
                txn,
                payload: p,
                after_sync: false,
            });
        }
        log.sync().unwrap();
        (records, starts)
    }

    #[test]
    fn a_follower_reads_only_what_was_appended_and_never_another_chain() {
        let (_dir, path) = temp_log();
        let mut log = RedoLog::open(&path, None).unwrap();
        let (records, _) = write_chain(&mut log, 7, &[10, 300, 5, 70, 1]);
        let reader = RedoLog::open_read_only(&path).unwrap().unwrap();
        let first = reader.scan_from(None, 9).unwrap();
        assert_eq!(first.records, records[..2], "stops after txn 9");
        let at = first.chain_end(None).unwrap();
        assert_eq!((at.last_txn, at.epoch), (9, 7));
        let rest = reader.scan_from(Some(at), u64::MAX).unwrap();
        assert_eq!(rest.records, records[2..], "continues after txn 9");
        let end = rest.chain_end(Some(at)).unwrap();
        assert_eq!(end.last_txn, 12);
        let none = reader.scan_from(Some(end), u64::MAX).unwrap();
        assert!(none.records.is_empty());
        assert_eq!(none.chain_end(Some(end)), Some(end));
        // One more record: only it is read.
        log.append(13, &payload(13, 40)).unwrap();
        let more = reader.scan_from(Some(end), u64::MAX).unwrap();
        assert_eq!(more.records.len(), 1);
        assert_eq!(more.records[0].txn, 13);
        // A restart overwrites the chain from offset 0 with a longer one: a
        // follower of the old chain at txn 9 reads nothing of the new one.
        write_chain(&mut log, 20, &[2000, 2000]);
        let after = reader.scan_from(Some(at), u64::MAX).unwrap();
        assert!(after.records.is_empty(), "a follower read another chain");
    }

    /// Records appended through the map and with `pwrite` (for a sync)
    /// are one chain, byte for byte the same records, across the file's
    /// growth (which remaps).
    #[test]
    fn mapped_and_written_appends_make_one_chain() {
        let (_dir, path) = temp_log();
        let mut log = RedoLog::open(&path, None).unwrap();
        log.restart(7);
        let mut want = Vec::new();
        for txn in 8..400u64 {
            let p = payload(txn, (txn as usize * 977) % 20_000);
            if txn % 3 == 0 {
                log.append_written(txn, &p).unwrap();
            } else {
                log.append(txn, &p).unwrap();
            }
            want.push(LogRecord {
                txn,
                payload: p,
                after_sync: false,
            });
        }
        assert!(log.file_len() > GROW_MIN, "the file grew past one step");
        let scan = scan_of(&path);
        assert_eq!(scan.epoch, 7);
        assert_eq!(scan.records, want);
        assert_eq!(scan.end, log.len_used());
    }

    /// Whether this process maps the file at `path` (`/proc/self/maps`).
    fn is_mapped(path: &Path) -> bool {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let name = path.canonicalize().unwrap();
        maps.lines().any(|l| l.ends_with(name.to_str().unwrap()))
    }

    /// A sync leaves no page of the log mapped (writeback would
    /// write-protect each mapped page, a TLB shootdown of every thread's
    /// CPU per page: `RedoLog::sync`), and the appends after it map the
    /// file again and continue the chain.
    #[test]
    fn a_sync_unmaps_the_log_and_appends_go_on_after_it() {
        let (_dir, path) = temp_log();
        let mapped = || is_mapped(&path);
        let mut log = RedoLog::open(&path, None).unwrap();
        log.restart(7);
        let mut want = Vec::new();
        for round in 0..3u64 {
            for txn in 8 + round * 50..8 + (round + 1) * 50 {
                let p = payload(txn, (txn as usize * 331) % 3_000);
                log.append(txn, &p).unwrap();
                // The first record after a sync vouches for those before.
                let after_sync = round > 0 && txn == 8 + round * 50;
                want.push(LogRecord {
                    txn,
                    payload: p,
                    after_sync,
                });
            }
            assert!(mapped(), "appends go through a map of the log");
            log.sync().unwrap();
            assert!(!mapped(), "the sync left the log mapped");
        }
        let scan = scan_of(&path);
        assert_eq!(scan.records, want);
        assert_eq!(scan.end, log.len_used());
    }

    /// `append_record` writes a record of a page or more, or one to be
    /// synced, with `pwrite` (no map of the log made), a smaller one
    /// through the map; the records read back as one chain either way.
    #[test]
    fn large_or_synced_records_are_written_and_small_ones_mapped() {
        let (_dir, path) = temp_log();
        let mapped = || is_mapped(&path);
        let mut log = RedoLog::open(&path, None).unwrap();
        log.restart(7);
        let mut want = Vec::new();
        let large = WRITTEN_RECORD_BYTES - HEADER_LEN;
        for (txn, len, synced, by_map) in [
            (8, large, false, false),
            (9, large + 5_000, false, false),
            (10, 100, true, false),
            (11, large - 1, false, true),
            (12, 150, false, true),
            (13, large, false, false),
        ] {
            let p = payload(txn, len);
            assert_eq!(
                log.append_record(txn, &p, synced).unwrap(),
                by_map,
                "txn {txn}"
            );
            assert_eq!(mapped(), txn >= 11, "txn {txn}: a map of the log");
            want.push(LogRecord {
                txn,
                payload: p,
                after_sync: false,
            });
        }
        let scan = scan_of(&path);
        assert_eq!(scan.records, want);
        assert_eq!(scan.end, log.len_used());
    }

    #[test]
    fn records_round_trip_through_reopen_and_resume() {
        let (_dir, path) = temp_log();
        let sizes = [0, 1, 7, 8, 9, 24, 25, 100 * 1024, 3, 0];
        let mut log = RedoLog::open(&path, None).unwrap();
        assert_eq!(log.scan().unwrap().records, vec![]);
        let (mut records, _) = write_chain(&mut log, 41, &sizes);
        let used = log.len_used();
        let expect: u64 = sizes.iter().map(|&s| padded(s) as u64).sum();
        assert_eq!(used, expect);
        assert_eq!(log.last_txn(), 41 + sizes.len() as u64);
        drop(log);

        let mut log = RedoLog::open(&path, None).unwrap();
        let scan = log.scan().unwrap();
        assert_eq!(scan.epoch, 41);
        assert_eq!(scan.end, used);
        assert_eq!(scan.records, records);

        // Resume the chain, then an empty payload.
        log.resume(&scan);
        assert_eq!(log.last_txn(), 51);
        assert_eq!(log.epoch(), 41);
        log.append(52, b"abcde").unwrap();
        log.append(53, &[]).unwrap();
        log.sync().unwrap();
        records.push(LogRecord {
            txn: 52,
            payload: b"abcde".to_vec(),
            after_sync: false,
        });
        records.push(LogRecord {
            txn: 53,
            payload: vec![],
            after_sync: false,
        });
        let scan = scan_of(&path);
        assert_eq!(scan.records, records);
        assert_eq!(scan.end, log.len_used());
        assert_eq!(scan.end % 8, 0);
    }

    /// Appends records `epoch + 1 ..= epoch + n` (payloads of a few
    /// sizes), each synced before the next when `synced` (a durable
    /// commit's); returns where each starts.
    fn append_chain(log: &mut RedoLog, epoch: u64, n: u64, synced: bool) -> Vec<u64> {
        log.restart(epoch);
        let mut starts = Vec::new();
        for txn in epoch + 1..=epoch + n {
            starts.push(log.len_used());
            log.append_written(txn, &payload(txn, (txn as usize * 37) % 300))
                .unwrap();
            if synced {
                log.sync().unwrap();
            }
        }
        starts
    }

    /// Writes `intact` to `path` with the byte at `at` flipped, and scans it.
    fn flipped(path: &Path, intact: &[u8], at: usize) -> Scan {
        let mut bad = intact.to_vec();
        bad[at] ^= 0x41;
        fs::write(path, &bad).unwrap();
        scan_of(path)
    }

    /// What a process following a live writer's log takes for proof that
    /// its chain goes on past where a scan ended (`continued_past`): the
    /// next record's header there (whatever else of it is damaged), or a
    /// later record of the chain chained to the one before it, synced or
    /// not; never the chain's true end, zeros, garbage, or an older
    /// chain's records.
    #[test]
    fn a_chain_continued_past_its_scan_is_told_from_its_end() {
        let (_dir, path) = temp_log();
        let mut log = RedoLog::open(&path, None).unwrap();
        let starts = append_chain(&mut log, 7, 13, false);
        let intact = fs::read(&path).unwrap();
        let scan = scan_of(&path);
        assert_eq!(scan.records.len(), 13);
        assert!(!log.continued_past(scan.end, 20, 7).unwrap(), "the end");
        // Record 12 (the fifth) damaged anywhere: the chain goes on.
        let at = starts[4] as usize;
        for (offset, what) in [
            (3, "checksum"),
            (17, "txn"),
            (13, "length"),
            (40, "payload"),
        ] {
            let scan = flipped(&path, &intact, at + offset);
            assert_eq!(scan.records.len(), 4, "{what}");
            assert!(log.continued_past(scan.end, 11, 7).unwrap(), "{what}");
            // Another chain's epoch: nothing of it goes on.
            assert!(!log.continued_past(scan.end, 11, 8).unwrap(), "{what}");
        }
        // The last record's payload damaged: its header says so.
        let scan = flipped(&path, &intact, starts[12] as usize + 40);
        assert_eq!(scan.records.len(), 12);
        assert!(log.continued_past(scan.end, 19, 7).unwrap());
        // Its magic damaged: nothing proves it (the caller looks again).
        let scan = flipped(&path, &intact, starts[12] as usize + 9);
        assert_eq!(scan.records.len(), 12);
        assert!(!log.continued_past(scan.end, 19, 7).unwrap());

        // A short chain over an older, longer one: the old records past
        // the new chain's end are of another epoch and at most its own.
        append_chain(&mut log, 100, 40, false);
        append_chain(&mut log, 140, 3, false);
        let scan = scan_of(&path);
        assert_eq!((scan.epoch, scan.records.len()), (140, 3));
        assert!(!log.continued_past(scan.end, 143, 140).unwrap());
        let mut bad = fs::read(&path).unwrap();
        let mut rng = Rng(7);
        for b in &mut bad[scan.end as usize..] {
            *b = rng.next() as u8;
        }
        fs::write(&path, &bad).unwrap();
        assert!(!log.continued_past(scan.end, 143, 140).unwrap());
    }

    /// A record written after a sync of every record before it vouches for
    /// them: a damaged record with an intact voucher after it is found
    /// (wherever in it the damage lies), and a torn last record, records
    /// never synced, stale records of an older chain and garbage vouch
    /// for nothing.
    #[test]
    fn a_damaged_durable_record_is_told_from_a_torn_one() {
        let (_dir, path) = temp_log();
        let mut log = RedoLog::open(&path, None).unwrap();
        let starts = append_chain(&mut log, 7, 13, true);
        let intact = fs::read(&path).unwrap();
        let scan = scan_of(&path);
        assert_eq!(scan.records.len(), 13);
        for r in &scan.records {
            assert_eq!(r.after_sync, r.txn > 8, "txn {}", r.txn);
            assert_eq!(r.payload, payload(r.txn, (r.txn as usize * 37) % 300));
        }
        assert_eq!(log.vouched_past(scan.end, 20).unwrap(), None);
        // Record 12 (the fifth) damaged in its checksum, its txn, its
        // length or its payload: the chain ends at 11, and a later record
        // vouches for 12.
        let at = starts[4] as usize;
        for (offset, what) in [
            (3, "checksum"),
            (17, "txn"),
            (13, "length"),
            (40, "payload"),
        ] {
            let mut bad = intact.clone();
            bad[at + offset] ^= 0x41;
            fs::write(&path, &bad).unwrap();
            let scan = scan_of(&path);
            assert_eq!(scan.records.len(), 4, "{what}");
            assert_eq!(scan.end, starts[4]);
            let voucher = log.vouched_past(scan.end, 11).unwrap();
            assert!(
                voucher.is_some_and(|v| v >= 13),
                "damaged {what}: {voucher:?}"
            );
            // A caller that holds commit 20 without the log loses nothing.
            assert_eq!(log.vouched_past(scan.end, 20).unwrap(), None, "{what}");
        }
        // The last record damaged: nothing after it vouches for it.
        let mut bad = intact.clone();
        bad[starts[12] as usize + 40] ^= 0x41;
        fs::write(&path, &bad).unwrap();
        let scan = scan_of(&path);
        assert_eq!(scan.records.len(), 12);
        assert_eq!(log.vouched_past(scan.end, 19).unwrap(), None);

        // Records never synced vouch for nothing: a crash may have torn
        // any of them.
        let starts = append_chain(&mut log, 30, 13, false);
        let mut bad = fs::read(&path).unwrap();
        bad[starts[4] as usize + 40] ^= 0x41;
        fs::write(&path, &bad).unwrap();
        let scan = scan_of(&path);
        assert_eq!(scan.records.len(), 4);
        assert!(scan.records.iter().all(|r| !r.after_sync));
        assert_eq!(log.vouched_past(scan.end, 34).unwrap(), None);

        // A short chain over an older, longer one whose records vouch for
        // each other: the old ones past the new chain's end are at most its
        // epoch, and vouch for nothing the caller lacks.
        append_chain(&mut log, 100, 40, true);
        append_chain(&mut log, 140, 3, true);
        let scan = scan_of(&path);
        assert_eq!(scan.epoch, 140);
        assert_eq!(scan.records.len(), 3);
        assert_eq!(log.vouched_past(scan.end, 143).unwrap(), None);
        // The same with garbage after the new chain's end.
        let mut bad = fs::read(&path).unwrap();
        let mut rng = Rng(99);
        for b in &mut bad[scan.end as usize..] {
            *b = rng.next() as u8;
        }
        fs::write(&path, &bad).unwrap();
        assert_eq!(log.vouched_past(scan.end, 143).unwrap(), None);
    }

    #[test]
    fn a_restart_hides_the_old_chain() {
        let (_dir, path) = temp_log();
        let mut log = RedoLog::open(&path, None).unwrap();
        let (a, _) = write_chain(&mut log, 1000, &[20_000; 50]);
        assert_eq!(scan_of(&path).records, a);
        let a_end = log.len_used();

        // A restart alone writes nothing: the old chain is still there,
        // and the caller skips it by txn id (all at most the checkpoint).
        log.restart(1050);
        assert_eq!(log.len_used(), 0);
        assert_eq!(log.last_txn(), 1050);
        assert_eq!(scan_of(&path).records, a);

        let (b, _) = write_chain(&mut log, 1050, &[10, 0, 33]);
        let scan = scan_of(&path);
        assert_eq!(scan.epoch, 1050);
        assert_eq!(scan.records, b);
        assert_eq!(scan.end, log.len_used());
        assert!(scan.end < a_end);
        // Recycled: no growth past what chain A needed.
        assert_eq!(fs::metadata(&path).unwrap().len(), log.file_len());

        // A third chain whose records line up with B's offsets exactly
        // (same sizes): B's leftovers past it are still no part of it.
        let (c, _) = write_chain(&mut log, 1053, &[10]);
        assert_eq!(scan_of(&path).records, c);
    }

    #[test]
    #[should_panic(expected = "behind its last record")]
    fn a_restart_behind_the_log_is_a_bug() {
        let (_dir, path) = temp_log();
        let mut log = RedoLog::open(&path, None).unwrap();
        write_chain(&mut log, 10, &[1, 2]);
        log.restart(11);
    }

    #[test]
    #[should_panic(expected = "out of order")]
    fn an_append_out_of_order_is_a_bug() {
        let (_dir, path) = temp_log();
        let mut log = RedoLog::open(&path, None).unwrap();
        log.restart(10);
        let _ = log.append(12, b"x");
    }

    #[test]
    fn a_torn_last_record_ends_the_chain_at_every_cut() {
        let (_dir, path) = temp_log();
        let mut log = RedoLog::open(&path, None).unwrap();
        let (records, starts) = write_chain(&mut log, 5, &[5, 40, 13, 100]);
        let end = log.len_used() as usize;
        let last = starts[3] as usize;
        drop(log);
        let original = fs::read(&path).unwrap();
        for cut in last..end {
            // Truncated at the cut.
            fs::write(&path, &original[..cut]).unwrap();
            let scan = scan_of(&path);
            assert_eq!(scan.records, records[..3], "truncated at {cut}");
            assert_eq!(scan.end, last as u64);
            // Written up to the cut, the rest of the record as it was
            // before (anything but the record's bytes).
            let mut torn = original.clone();
            for b in &mut torn[cut..end] {
                *b = !*b;
            }
            fs::write(&path, &torn).unwrap();
            assert_eq!(scan_of(&path).records, records[..3], "garbled from {cut}");
        }
        fs::write(&path, &original).unwrap();
        assert_eq!(scan_of(&path).records, records);

        // Resuming after a torn tail overwrites it.
        fs::write(&path, &original[..end - 1]).unwrap();
        let mut log = RedoLog::open(&path, None).unwrap();
        let scan = log.scan().unwrap();
        log.resume(&scan);
        assert_eq!(log.last_txn(), 8);
        log.append(9, b"again").unwrap();
        let scan = scan_of(&path);
        assert_eq!(scan.records.len(), 4);
        assert_eq!(scan.records[3].payload, b"again");
    }

    #[test]
    fn any_flipped_byte_ends_the_chain_at_its_record() {
        let (_dir, path) = temp_log();
        let mut log = RedoLog::open(&path, None).unwrap();
        let (records, starts) = write_chain(&mut log, 77, &[0, 3, 9, 17, 8]);
        let end = log.len_used();
        drop(log);
        let file = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        for pos in 0..end {
            let record = starts.iter().rposition(|&s| s <= pos).unwrap();
            let mut byte = [0u8];
            file.read_exact_at(&mut byte, pos).unwrap();
            for flip in [0x01u8, 0x80, 0xff] {
                file.write_all_at(&[byte[0] ^ flip], pos).unwrap();
                let scan = scan_of(&path);
                // Every byte counts (the padding is checked for zeros):
                // the chain ends exactly before the damaged record.
                assert_eq!(scan.records, records[..record], "byte {pos} ^ {flip:#x}");
                assert_eq!(scan.end, starts[record]);
            }
            file.write_all_at(&byte, pos).unwrap();
        }
        assert_eq!(scan_of(&path).records, records);
    }

    #[test]
    fn garbage_zeros_and_short_files_hold_no_records() {
        let (_dir, path) = temp_log();
        let check = |bytes: &[u8], what: &str| {
            fs::write(&path, bytes).unwrap();
            let scan = scan_of(&path);
            assert_eq!(scan.records, vec![], "{what}");
            assert_eq!(scan.end, 0, "{what}");
        };
        check(&[], "empty");
        for len in [8, 31, 32, 33, 4096, 3 << 20] {
            check(&vec![0; len], "zeros");
        }
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for i in 0..200 {
            let len = (rng.next() % 4096) as usize;
            check(&rng.bytes(len), &format!("random #{i}"));
        }
        check(&rng.bytes(2 << 20), "random 2 MiB");
        check(&[b'I'; 5000], "text");

        // Every prefix of a valid record shorter than it.
        let mut log = RedoLog::open(&path, None).unwrap();
        log.restart(3);
        log.append(4, b"0123456789").unwrap();
        drop(log);
        let whole = fs::read(&path).unwrap();
        for cut in 0..padded(10) {
            check(&whole[..cut], &format!("prefix {cut}"));
        }

        // Headers that pass the magic but lie: lengths past the limit or
        // the file, a txn id that overflows, a wrong first txn.
        let header = |sum: u64, len: u32, txn: u64, epoch: u64| {
            let mut h = vec![0u8; 64];
            h[..8].copy_from_slice(&sum.to_le_bytes());
            h[8..12].copy_from_slice(&MAGIC);
            h[12..16].copy_from_slice(&len.to_le_bytes());
            h[16..24].copy_from_slice(&txn.to_le_bytes());
            h[24..32].copy_from_slice(&epoch.to_le_bytes());
            h
        };
        check(&header(0, u32::MAX, 1, 0), "length u32::MAX");
        check(
            &header(0, MAX_PAYLOAD as u32 + 1, 1, 0),
            "length over the limit",
        );
        check(&header(0, 33, 1, 0), "length past the file");
        check(&header(0, 0, 0, u64::MAX), "txn overflow");
        check(&header(0, 0, 1, u64::MAX), "txn wrapped");
        check(&header(0, 0, 3, 1), "not the first txn");
        // The same header with the right checksum is a record: the checks
        // above fail for the reason named, not the checksum alone.
        let mut ok = header(0, 0, 2, 1);
        let sum = checksum_seeded(&ok[8..32], 1);
        ok[..8].copy_from_slice(&sum.to_le_bytes());
        fs::write(&path, &ok).unwrap();
        assert_eq!(scan_of(&path).records.len(), 1);
    }

    /// Where the filesystem cannot allocate, the file grows by written
    /// zeros: counted, every block allocated, records read back.
    #[test]
    fn without_allocation_the_file_grows_by_written_zeros() {
        let (_dir, path) = temp_log();
        let mut log = RedoLog::open(&path, None).unwrap();
        log.zeros_only = true;
        log.restart(0);
        let chunk = vec![7u8; 100 * 1024];
        for txn in 1..=30 {
            log.append(txn, &chunk).unwrap();
        }
        assert!(log.file_len() >= log.len_used() && log.file_len() >= 3 << 20);
        assert_eq!(
            log.zeros_written(),
            log.file_len(),
            "every growth wrote zeros"
        );
        assert_eq!(fs::metadata(&path).unwrap().len(), log.file_len());
        assert_allocated_and_zero_past_records(&path, &log);
        assert_eq!(scan_of(&path).records.len(), 30);
    }

    /// Every block of the log at `path` is allocated (no holes), and the
    /// bytes past `log`'s records read as zeros.
    fn assert_allocated_and_zero_past_records(path: &Path, log: &RedoLog) {
        let meta = fs::metadata(path).unwrap();
        assert!(
            meta.blocks() * 512 >= meta.len(),
            "{} blocks",
            meta.blocks()
        );
        assert!(fs::read(path).unwrap()[log.len_used() as usize..]
            .iter()
            .all(|&b| b == 0));
    }

    #[test]
    fn the_file_grows_by_allocated_blocks_in_big_steps() {
        let (_dir, path) = temp_log();
        let mut log = RedoLog::open(&path, None).unwrap();
        assert_eq!(log.file_len(), 0);
        log.restart(0);
        let chunk = vec![7u8; 100 * 1024];
        let mut lengths = vec![0u64];
        let mut txn = 0;
        while log.len_used() < 6 << 20 {
            txn += 1;
            log.append(txn, &chunk).unwrap();
            let len = fs::metadata(&path).unwrap().len();
            assert_eq!(len, log.file_len());
            assert!(len >= log.len_used());
            if len != *lengths.last().unwrap() {
                lengths.push(len);
            }
        }
        // 1 MiB steps until a quarter of the length is more.
        let mib = 1u64 << 20;
        assert_eq!(
            lengths,
            [
                0,
                mib,
                2 * mib,
                3 * mib,
                4 * mib,
                5 * mib,
                5 * mib + 5 * mib / 4
            ]
        );
        // Allocated, not written: the filesystem of the test's directory
        // (ext4, xfs, btrfs or tmpfs on Linux) allocates without writing.
        assert_eq!(log.zeros_written(), 0, "the growth wrote zeros");
        assert_allocated_and_zero_past_records(&path, &log);

        // A record bigger than a step grows the file past it at once.
        let big = vec![1u8; 9 << 20];
        txn += 1;
        log.append(txn, &big).unwrap();
        assert!(log.file_len() >= log.len_used());
        assert_eq!(log.file_len() % ZEROS.len() as u64, 0);
        assert_eq!(scan_of(&path).records.len(), txn as usize);

        // Recycled after a restart: no growth.
        let len = log.file_len();
        log.restart(txn);
        for _ in 0..50 {
            txn += 1;
            log.append(txn, &chunk).unwrap();
        }
        assert_eq!(fs::metadata(&path).unwrap().len(), len);
    }

    #[test]
    fn a_payload_over_the_limit_is_refused() {
        let (_dir, path) = temp_log();
        let mut log = RedoLog::open(&path, None).unwrap();
        log.restart(0);
        let over = vec![0u8; MAX_PAYLOAD + 1];
        let err = log.append(1, &over).unwrap_err();
        assert!(
            matches!(&err, Error::Io(e) if e.kind() == io::ErrorKind::InvalidInput),
            "{err}"
        );
        assert_eq!((log.len_used(), log.last_txn(), log.file_len()), (0, 0, 0));
        log.append(1, b"fits").unwrap();
        assert_eq!(scan_of(&path).records.len(), 1);
    }

    /// Counts the hook calls of each kind, and fails log write number
    /// `fail_write` (from 1), log sync number `fail_sync` and log length
    /// change number `fail_set_len`.
    #[derive(Default)]
    struct Counter {
        writes: AtomicU64,
        syncs: AtomicU64,
        log_writes: AtomicU64,
        log_syncs: AtomicU64,
        log_set_lens: AtomicU64,
        fail_write: u64,
        fail_sync: u64,
        fail_set_len: u64,
    }

    impl IoHook for Counter {
        fn on_write(&self, _: u64, _: &[&[u8]]) -> io::Result<()> {
            self.writes.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
        fn on_sync(&self) -> io::Result<()> {
            self.syncs.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
        fn on_log_write(&self, _: u64, _: &[&[u8]]) -> io::Result<()> {
            let n = self.log_writes.fetch_add(1, Ordering::SeqCst) + 1;
            if n == self.fail_write {
                return Err(io::Error::from_raw_os_error(libc::ENOSPC));
            }
            Ok(())
        }
        fn on_log_sync(&self) -> io::Result<()> {
            let n = self.log_syncs.fetch_add(1, Ordering::SeqCst) + 1;
            if n == self.fail_sync {
                return Err(io::Error::from_raw_os_error(libc::EIO));
            }
            Ok(())
        }
        fn on_log_set_len(&self, _: u64) -> io::Result<()> {
            let n = self.log_set_lens.fetch_add(1, Ordering::SeqCst) + 1;
            if n == self.fail_set_len {
                return Err(io::Error::from_raw_os_error(libc::ENOSPC));
            }
            Ok(())
        }
    }

    #[test]
    fn a_failed_write_can_be_retried() {
        // The growth is a length change (the allocation), write 1 is the
        // first record, write 2 the second; each fails in one run.
        for (fail_set_len, fail_write) in [(1, 0), (0, 1), (0, 2)] {
            let (_dir, path) = temp_log();
            let hook = Arc::new(Counter {
                fail_write,
                fail_set_len,
                ..Counter::default()
            });
            let mut log = RedoLog::open(&path, Some(IoHookHandle(hook.clone()))).unwrap();
            log.restart(7);
            for txn in [8, 9] {
                let before = (log.len_used(), log.last_txn());
                match log.append(txn, &payload(txn, 20)) {
                    Ok(()) => {}
                    // The chain is as before (a growth that succeeded
                    // before the record's write failed stays: zeros).
                    Err(Error::Io(e)) if e.raw_os_error() == Some(libc::ENOSPC) => {
                        assert_eq!((log.len_used(), log.last_txn()), before);
                        log.append(txn, &payload(txn, 20)).unwrap();
                    }
                    Err(e) => panic!("{e}"),
                }
            }
            log.sync().unwrap();
            let scan = log.scan().unwrap();
            let txns: Vec<u64> = scan.records.iter().map(|r| r.txn).collect();
            assert_eq!(txns, [8, 9], "failing write {fail_write}");
            assert_eq!(scan.records[1].payload, payload(9, 20));
            let retried = u64::from(fail_write > 0);
            assert_eq!(hook.log_writes.load(Ordering::SeqCst), 2 + retried);
            // A failed growth gives its length back (a second change).
            assert_eq!(
                hook.log_set_lens.load(Ordering::SeqCst),
                1 + 2 * (1 - retried)
            );
        }
    }

    #[test]
    fn the_log_calls_its_own_hooks_and_the_data_file_its_own() {
        let (dir, path) = temp_log();
        let hook = Arc::new(Counter {
            fail_sync: 1,
            ..Counter::default()
        });
        let handle = IoHookHandle(hook.clone());
        let mut log = RedoLog::open(&path, Some(handle.clone())).unwrap();
        log.restart(0);
        log.append(1, b"x").unwrap();
        assert!(matches!(log.sync(), Err(Error::Io(_))));
        log.sync().unwrap();
        let log_file = DataFile::open_log(&path, Some(handle.clone())).unwrap();
        log_file.set_len(4096).unwrap();
        // The growth (an allocation) and the `set_len` are length changes;
        // the record is the one write.
        assert_eq!(hook.log_writes.load(Ordering::SeqCst), 1);
        assert_eq!(hook.log_syncs.load(Ordering::SeqCst), 2);
        assert_eq!(hook.log_set_lens.load(Ordering::SeqCst), 2);
        assert_eq!(hook.writes.load(Ordering::SeqCst), 0);
        assert_eq!(hook.syncs.load(Ordering::SeqCst), 0);

        let data_path = dir.path().join("db.ib");
        fs::write(&data_path, [0u8; 16]).unwrap();
        let data = DataFile::open(&data_path, true, Some(handle)).unwrap();
        data.write_vectored_at(&[b"ab"], 0).unwrap();
        data.sync_data().unwrap();
        assert_eq!(hook.writes.load(Ordering::SeqCst), 1);
        assert_eq!(hook.syncs.load(Ordering::SeqCst), 1);
        assert_eq!(hook.log_writes.load(Ordering::SeqCst), 1);
        assert_eq!(hook.log_syncs.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn the_log_is_created_private() {
        let (_dir, path) = temp_log();
        RedoLog::open(&path, None).unwrap();
        let mode = fs::metadata(&path).unwrap().mode() & 0o777;
        assert_eq!(mode & !0o600, 0, "mode {mode:o}");
    }
}
