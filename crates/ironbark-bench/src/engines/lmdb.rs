//! LMDB through `heed` (which bundles LMDB's C source).
//!
//! As in Symas' drivers: `MDB_NOSYNC` for non-durable runs, `MDB_APPEND` for
//! sequential fills, `MDB_NORDAHEAD` (the data set fits in memory), one read
//! transaction per lookup. `longreader` keeps one `RoTxn` open in the
//! session; LMDB (without `MDB_NOTLS`) allows one read transaction per
//! thread, so that session must not call `get` or `scan` while it holds it.

use std::ops::Bound;

use heed::types::Bytes;
use heed::{Database, Env, EnvFlags, EnvOpenOptions, PutFlags, RoTxn};

use crate::engine::{Engine, EngineConfig, Op, Result, Session};

pub struct Lmdb {
    env: Env,
    db: Database<Bytes, Bytes>,
    sync: bool,
}

pub fn open(cfg: &EngineConfig) -> Result<Box<dyn Engine>> {
    let mut flags = EnvFlags::NO_READ_AHEAD;
    if !cfg.sync {
        flags |= EnvFlags::NO_SYNC;
    }
    let map = (cfg.map_bytes as usize).next_multiple_of(1 << 20);
    let mut options = EnvOpenOptions::new();
    options.map_size(map).max_dbs(1).max_readers(256);
    // SAFETY: NO_SYNC only weakens durability after an OS crash, which a
    // non-durable benchmark run accepts; NO_READ_AHEAD has no safety impact.
    unsafe {
        options.flags(flags);
    }
    // SAFETY: the directory belongs to this process alone for the whole run
    // (one process per engine and workload), so no one else modifies the
    // memory-mapped file while it is open.
    let env = unsafe { options.open(&cfg.dir)? };
    let mut wtxn = env.write_txn()?;
    let db: Database<Bytes, Bytes> = env.create_database(&mut wtxn, None)?;
    wtxn.commit()?;
    Ok(Box::new(Lmdb {
        env,
        db,
        sync: cfg.sync,
    }))
}

impl Engine for Lmdb {
    fn session(&self) -> Result<Box<dyn Session + '_>> {
        Ok(Box::new(LmdbSession {
            e: self,
            held: None,
        }))
    }

    fn close(self: Box<Self>) -> Result<()> {
        let Lmdb { env, db, sync } = *self;
        let _ = db;
        if !sync {
            env.force_sync()?;
        }
        let closing = env.prepare_for_closing();
        closing.wait();
        Ok(())
    }
}

struct LmdbSession<'a> {
    e: &'a Lmdb,
    /// The snapshot of `longreader`; it borrows the environment, as the
    /// session does.
    held: Option<RoTxn<'a>>,
}

impl Session for LmdbSession<'_> {
    fn write(&mut self, ops: &[Op<'_>], append: bool) -> Result<()> {
        let db = self.e.db;
        let mut wtxn = self.e.env.write_txn()?;
        for op in ops {
            match *op {
                Op::Put(k, v) if append => db.put_with_flags(&mut wtxn, PutFlags::APPEND, k, v)?,
                Op::Put(k, v) => db.put(&mut wtxn, k, v)?,
                Op::Delete(k) => {
                    db.delete(&mut wtxn, k)?;
                }
            }
        }
        wtxn.commit()?;
        Ok(())
    }

    fn delete_range(&mut self, start: &[u8], end: &[u8]) -> Result<Option<u64>> {
        // heed's range delete: a cursor that deletes as it goes.
        let mut wtxn = self.e.env.write_txn()?;
        let range: (Bound<&[u8]>, Bound<&[u8]>) = (Bound::Included(start), Bound::Excluded(end));
        let removed = self.e.db.delete_range(&mut wtxn, &range)?;
        wtxn.commit()?;
        Ok(Some(removed as u64))
    }

    fn hold_snapshot(&mut self) -> Result<bool> {
        self.held = None;
        self.held = Some(self.e.env.read_txn()?);
        Ok(true)
    }

    fn snapshot_get(&mut self, key: &[u8], f: &mut dyn FnMut(&[u8])) -> Result<bool> {
        let rtxn = self.held.as_ref().ok_or("no snapshot is held")?;
        match self.e.db.get(rtxn, key)? {
            Some(v) => {
                f(v);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn release_snapshot(&mut self) {
        self.held = None;
    }

    fn get(&mut self, key: &[u8], f: &mut dyn FnMut(&[u8])) -> Result<bool> {
        let rtxn = self.e.env.read_txn()?;
        match self.e.db.get(&rtxn, key)? {
            Some(v) => {
                f(v);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn scan(
        &mut self,
        start: Option<&[u8]>,
        reverse: bool,
        limit: u64,
        f: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<u64> {
        let rtxn = self.e.env.read_txn()?;
        let db = self.e.db;
        let mut n = 0u64;
        let mut visit = |item: heed::Result<(&[u8], &[u8])>| -> Result<bool> {
            if n >= limit {
                return Ok(false);
            }
            let (k, v) = item?;
            f(k, v);
            n += 1;
            Ok(true)
        };
        match (start, reverse) {
            (None, false) => {
                for item in db.iter(&rtxn)? {
                    if !visit(item)? {
                        break;
                    }
                }
            }
            (None, true) => {
                for item in db.rev_iter(&rtxn)? {
                    if !visit(item)? {
                        break;
                    }
                }
            }
            (Some(s), false) => {
                let range: (Bound<&[u8]>, Bound<&[u8]>) = (Bound::Included(s), Bound::Unbounded);
                for item in db.range(&rtxn, &range)? {
                    if !visit(item)? {
                        break;
                    }
                }
            }
            (Some(s), true) => {
                let range: (Bound<&[u8]>, Bound<&[u8]>) = (Bound::Unbounded, Bound::Included(s));
                for item in db.rev_range(&rtxn, &range)? {
                    if !visit(item)? {
                        break;
                    }
                }
            }
        }
        Ok(n)
    }
}
