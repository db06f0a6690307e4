//! The one interface every engine is driven through.

use std::path::PathBuf;

pub type Error = Box<dyn std::error::Error + Send + Sync>;
pub type Result<T> = std::result::Result<T, Error>;

/// How an engine is opened for one run.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// A directory that belongs to this engine alone.
    pub dir: PathBuf,
    /// Every commit is durable (fsync) when true; otherwise no syncs at all.
    pub sync: bool,
    /// Cache budget for engines that have their own cache.
    pub cache_bytes: u64,
    /// Upper bound on the database size, for engines that need one (LMDB).
    pub map_bytes: u64,
}

/// One operation of a write transaction.
#[derive(Clone, Copy, Debug)]
pub enum Op<'a> {
    Put(&'a [u8], &'a [u8]),
    Delete(&'a [u8]),
}

/// An open database. Shared by all threads of a run; each thread opens its
/// own [`Session`].
pub trait Engine: Send + Sync {
    /// A per-thread handle (SQLite needs a connection per thread, WiredTiger
    /// a session per thread).
    fn session(&self) -> Result<Box<dyn Session + '_>>;

    /// Engine-reported counters (name, cumulative value), sampled before and
    /// after the timed phase.
    fn counters(&self) -> Vec<(String, u64)> {
        Vec::new()
    }

    /// Makes everything written so far durable and closes the database. Its
    /// duration is reported as the time to close ("cleanup time").
    fn close(self: Box<Self>) -> Result<()>;
}

pub trait Session {
    /// Applies `ops` in one transaction. `append` is set when every key is
    /// greater than every key already stored and `ops` is ascending.
    fn write(&mut self, ops: &[Op<'_>], append: bool) -> Result<()>;

    /// Point lookup in its own read transaction; calls `f` with the value
    /// when the key exists.
    fn get(&mut self, key: &[u8], f: &mut dyn FnMut(&[u8])) -> Result<bool>;

    /// In one read transaction, visits up to `limit` entries starting at the
    /// first key >= `start` (ascending) or the last key <= `start`
    /// (descending); `None` starts at the first or last key. Returns the
    /// number of entries visited.
    fn scan(
        &mut self,
        start: Option<&[u8]>,
        reverse: bool,
        limit: u64,
        f: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<u64>;

    /// In one write transaction, removes every key in `start..end` and
    /// returns how many it removed (`None` from an engine whose range
    /// delete does not count them: a range tombstone): `deleterange`.
    /// This default is what a user of an engine without a range delete
    /// does: it reads the keys (a scan, in chunks), then deletes them one
    /// by one in one transaction. Engines with a range delete of their own
    /// override it.
    fn delete_range(&mut self, start: &[u8], end: &[u8]) -> Result<Option<u64>> {
        const CHUNK: u64 = 4096;
        let mut keys: Vec<Vec<u8>> = Vec::new();
        let mut from = start.to_vec();
        loop {
            // Each chunk after the first starts at the last key taken.
            let resumed = !keys.is_empty();
            let mut past_end = false;
            let seen = self.scan(Some(&from), false, CHUNK, &mut |k, _| {
                if k >= end {
                    past_end = true;
                } else if !(resumed && k == from.as_slice()) {
                    keys.push(k.to_vec());
                }
            })?;
            if past_end || seen < CHUNK {
                break;
            }
            from.clone_from(keys.last().expect("a full chunk took keys"));
        }
        let ops: Vec<Op<'_>> = keys.iter().map(|k| Op::Delete(k)).collect();
        self.write(&ops, false)?;
        Ok(Some(keys.len() as u64))
    }

    /// Opens a read snapshot and keeps it open until
    /// [`Session::release_snapshot`], while this session goes on writing:
    /// the long-lived reader of `longreader`, which pins the pages (or
    /// versions) of its commit. Returns `Ok(false)` when the engine cannot
    /// hold one through this interface; `longreader` then reports the engine
    /// as unsupported instead of measuring something else.
    fn hold_snapshot(&mut self) -> Result<bool> {
        Ok(false)
    }

    /// Point lookup through the held snapshot: sees the data as it was when
    /// [`Session::hold_snapshot`] ran, whatever was committed since.
    fn snapshot_get(&mut self, _key: &[u8], _f: &mut dyn FnMut(&[u8])) -> Result<bool> {
        Err("no snapshot is held".into())
    }

    /// Ends the held snapshot (no-op when none is held).
    fn release_snapshot(&mut self) {}
}
