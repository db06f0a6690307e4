//! The two meta pages (pages 0 and 1): the root of everything a commit made.
//!
//! Invariant: the writer never overwrites the meta slot that holds the
//! newest *durable* commit, so whatever a crash does to the other slot, one
//! valid meta describing a fully durable commit survives. Open takes the
//! newest valid meta whose commit verifies (see `db::open`).
//!
//! Layout (little-endian), at the start of the page; the rest is zero:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `IRONBARK` |
//! | 8 | 4 | format version |
//! | 12 | 4 | page size |
//! | 16 | 8 | txn id of the commit |
//! | 24 | 8 | page count (pages in use, meta pages included) |
//! | 32 | 8 | first page of the state chain's newest blob (catalog + free space, `state.rs`) |
//! | 40 | 8 | txn id that wrote it |
//! | 48 | 8 | newest txn id known durable before this meta was written |
//! | 56 | 8 | XXH3-64 checksum of that blob (as in its header) |
//! | 64 | 8 | log base: the txn after which the redo log's records apply to this commit's trees (its own txn, except for the steps of a partial checkpoint) |
//! | 72 | 8 | replay to: the txn the log's records must reach to complete this commit (its own txn, except for those steps) |
//! | 80 | 8 | XXH3-64 of bytes 0..80 |
//!
//! After it, the list of branch regions (`encode_zones`): a placement
//! hint for the next writer, which no reader reads and which an open
//! ignores if it fails its checks (`decode_zones`).
//!
//! Format 4 had neither log field (its checksum at 64 covered bytes
//! 0..64); such a meta reads as one whose log base and replay target are
//! its txn. Format 5 is this layout, written by builds that kept values
//! inline in their leaves only up to a third of a page: their pages read
//! alike, but such a build would split a leaf of this one's larger cells
//! wrongly, so it refuses a format 6 file. Format 6 is this layout too,
//! its branch pages all of plain slots: format 7 adds branch pages whose
//! slots hint at their children (`btree::page::KIND_HINTED_BRANCH`),
//! which a format 6 build would take for damage, so it refuses a format 7
//! file. The next commit writes format 7; the branches of an older file
//! stay as they are until a change rewrites them.

use crate::checksum::checksum;
use crate::error::{Error, Result};
use crate::storage::file::DataFile;

pub(crate) const MAGIC: [u8; 8] = *b"IRONBARK";
pub(crate) const FORMAT_VERSION: u32 = 7;
/// The format before branch pages with child hints in their slots: the
/// same layout otherwise, read as this one.
const FORMAT_VERSION_PLAIN_BRANCHES: u32 = 6;
/// The format before leaves kept values of up to half a page inline
/// (`btree::page::Limits`): the same layout, read as this one.
const FORMAT_VERSION_THIRD_INLINE: u32 = 5;
/// The format before the meta had a log base; read as one whose log base
/// is its txn (pages are laid out alike in both).
const FORMAT_VERSION_WITHOUT_LOG_BASE: u32 = 4;
/// Bytes of a meta page that carry data.
pub(crate) const META_LEN: usize = 88;
/// Pages 0 and 1 are the meta slots.
pub(crate) const META_SLOTS: u64 = 2;
pub(crate) const MIN_PAGE_SIZE: usize = 1024;
pub(crate) const MAX_PAGE_SIZE: usize = 65536;

/// Where a meta page's list of branch regions starts: right after the
/// meta proper.
const ZONES_AT: usize = META_LEN;

/// The most branch regions a meta page of `page_size` bytes names.
pub(crate) fn max_zones(page_size: usize) -> usize {
    (page_size - ZONES_AT - 16) / 8
}

/// The list of branch regions a commit writes after its meta (a hint for
/// the next writer's placement, read by no reader): region size in pages
/// (u32), count (u32), each region's first page (u64), and the XXH3-64 of
/// those bytes. `zones` must hold at most `max_zones` regions.
pub(crate) fn encode_zones(region_pages: u64, zones: impl Iterator<Item = u64>, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&(region_pages as u32).to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    let mut n = 0u32;
    for z in zones {
        out.extend_from_slice(&z.to_le_bytes());
        n += 1;
    }
    out[4..8].copy_from_slice(&n.to_le_bytes());
    let sum = checksum(out);
    out.extend_from_slice(&sum.to_le_bytes());
}

/// The branch regions named after the meta in `page` (a whole meta page),
/// if the list is whole, of regions of `region_pages` pages, each aligned
/// and within `page_count`; else none. Being a hint, a damaged or foreign
/// list is ignored, never an error.
pub(crate) fn decode_zones(page: &[u8], region_pages: u64, page_count: u64) -> Vec<u64> {
    let none = Vec::new();
    let Some(head) = page.get(ZONES_AT..ZONES_AT + 8) else {
        return none;
    };
    let n = u32_at(head, 4) as usize;
    if u32_at(head, 0) as u64 != region_pages || region_pages == 0 || n > max_zones(page.len()) {
        return none;
    }
    let end = ZONES_AT + 8 + 8 * n;
    if checksum(&page[ZONES_AT..end]) != u64_at(page, end) {
        return none;
    }
    let zones: Vec<u64> = (0..n).map(|i| u64_at(page, ZONES_AT + 8 + 8 * i)).collect();
    let fits = |&z: &u64| {
        z % region_pages == 0 && z.checked_add(region_pages).is_some_and(|e| e <= page_count)
    };
    if zones.iter().all(fits) && zones.windows(2).all(|w| w[0] < w[1]) {
        zones
    } else {
        none
    }
}

/// The branch regions named after the meta of commit `meta` in the
/// file's meta slots (either: a clean close writes both), for regions of
/// `region_pages` pages. A hint: an unreadable or damaged list is none.
pub(crate) fn read_zones(file: &DataFile, meta: &Meta, region_pages: u64) -> Vec<u64> {
    if region_pages == 0 {
        return Vec::new();
    }
    let ps = meta.page_size as usize;
    let mut page = vec![0u8; ps];
    for slot in 0..META_SLOTS {
        if file.read_exact_at(&mut page, slot * ps as u64).is_err() {
            continue;
        }
        if Meta::decode(&page, slot).is_ok_and(|m| m.txn == meta.txn) {
            return decode_zones(&page, region_pages, meta.page_count);
        }
    }
    Vec::new()
}

/// A decoded, checksum-verified meta page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Meta {
    pub(crate) page_size: u32,
    pub(crate) txn: u64,
    pub(crate) page_count: u64,
    pub(crate) state_pgno: u64,
    pub(crate) state_txn: u64,
    pub(crate) state_sum: u64,
    pub(crate) last_synced_txn: u64,
    /// The redo log's records after this txn, applied in order to this
    /// commit's trees, give the newest commit. Equal to `txn` for every
    /// commit but the steps of a partial checkpoint, whose trees hold each
    /// key's value at some commit between the log base and the newest
    /// (`txn::checkpoint_steps`).
    pub(crate) log_base: u64,
    /// The newest commit, whose log record a replay from `log_base` must
    /// reach: a log that ends before it cannot complete these trees.
    /// Equal to `txn` but for the steps of a partial checkpoint.
    pub(crate) replay_to: u64,
}

pub(crate) fn page_size_is_valid(size: u64) -> bool {
    size.is_power_of_two() && (MIN_PAGE_SIZE as u64..=MAX_PAGE_SIZE as u64).contains(&size)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

impl Meta {
    /// Whether this is a step of a partial checkpoint: its trees are the
    /// newest commit only once the log's records after `log_base` (up to
    /// `replay_to`) are applied to them.
    pub(crate) fn is_partial(&self) -> bool {
        self.log_base < self.txn
    }

    /// From the txn of the redo log's last record (`None`: no record), the
    /// one up to which the log must be replayed on this commit, if any:
    /// records past the commit, or a step of a partial checkpoint, whose
    /// log must reach the commit it completes (else `Corrupted`: the log
    /// that would finish it is damaged or gone).
    pub(crate) fn replay_end(&self, log_end: Option<u64>) -> Result<Option<u64>> {
        if !self.is_partial() {
            return Ok(log_end.filter(|&end| end > self.txn));
        }
        match log_end {
            Some(end) if end >= self.replay_to => Ok(Some(end)),
            _ => Err(Error::Corrupted {
                page: None,
                detail: format!(
                    "the durable commit {} is a step of a checkpoint that the redo log \
                     completes, and the log ends at {}, before commit {}",
                    self.txn,
                    log_end.map_or("its start".to_string(), |e| format!("commit {e}")),
                    self.replay_to
                ),
            }),
        }
    }

    pub(crate) fn encode(&self) -> [u8; META_LEN] {
        let mut b = [0u8; META_LEN];
        b[0..8].copy_from_slice(&MAGIC);
        b[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        b[12..16].copy_from_slice(&self.page_size.to_le_bytes());
        b[16..24].copy_from_slice(&self.txn.to_le_bytes());
        b[24..32].copy_from_slice(&self.page_count.to_le_bytes());
        b[32..40].copy_from_slice(&self.state_pgno.to_le_bytes());
        b[40..48].copy_from_slice(&self.state_txn.to_le_bytes());
        b[48..56].copy_from_slice(&self.last_synced_txn.to_le_bytes());
        b[56..64].copy_from_slice(&self.state_sum.to_le_bytes());
        b[64..72].copy_from_slice(&self.log_base.to_le_bytes());
        b[72..80].copy_from_slice(&self.replay_to.to_le_bytes());
        let sum = checksum(&b[0..80]);
        b[80..88].copy_from_slice(&sum.to_le_bytes());
        b
    }

    /// Decodes and verifies the meta in `slot` (0 or 1) from its first
    /// `META_LEN` bytes. Errors: `NotAnIronbarkFile` (wrong magic),
    /// `IncompatibleVersion`, `InvalidPageSize`, `Corrupted`.
    pub(crate) fn decode(b: &[u8], slot: u64) -> Result<Meta> {
        if b.len() < META_LEN || b[0..8] != MAGIC {
            return Err(Error::NotAnIronbarkFile);
        }
        let version = u32_at(b, 8);
        let summed_ok = |len: usize| checksum(&b[0..len]) == u64_at(b, len);
        let summed = match version {
            FORMAT_VERSION | FORMAT_VERSION_PLAIN_BRANCHES | FORMAT_VERSION_THIRD_INLINE => 80,
            FORMAT_VERSION_WITHOUT_LOG_BASE => 64,
            // A damaged version field is damage (the other slot is tried);
            // a whole meta of another version is another format.
            _ if !summed_ok(64) && !summed_ok(80) => 0,
            _ => {
                return Err(Error::IncompatibleVersion {
                    found: version,
                    supported: FORMAT_VERSION,
                })
            }
        };
        if summed == 0 || !summed_ok(summed) {
            return Err(Error::corrupted_page(slot, "meta page checksum mismatch"));
        }
        let page_size = u32_at(b, 12);
        if !page_size_is_valid(page_size as u64) {
            return Err(Error::InvalidPageSize(page_size as u64));
        }
        let meta = Meta {
            page_size,
            txn: u64_at(b, 16),
            page_count: u64_at(b, 24),
            state_pgno: u64_at(b, 32),
            state_txn: u64_at(b, 40),
            last_synced_txn: u64_at(b, 48),
            state_sum: u64_at(b, 56),
            log_base: if summed == 80 {
                u64_at(b, 64)
            } else {
                u64_at(b, 16)
            },
            replay_to: if summed == 80 {
                u64_at(b, 72)
            } else {
                u64_at(b, 16)
            },
        };
        let bad = |d: &str| Err(Error::corrupted_page(slot, d.to_string()));
        if meta.txn == 0 {
            return bad("meta txn id is zero");
        }
        if meta.page_count <= META_SLOTS || meta.page_count > (u64::MAX >> 1) / page_size as u64 {
            return bad("meta page count out of range");
        }
        if meta.state_pgno < META_SLOTS || meta.state_pgno >= meta.page_count {
            return bad("meta state page out of range");
        }
        if meta.state_txn > meta.txn
            || meta.last_synced_txn > meta.txn
            || meta.log_base > meta.replay_to
            || meta.replay_to > meta.txn
        {
            return bad("meta txn ids out of order");
        }
        Ok(meta)
    }
}
