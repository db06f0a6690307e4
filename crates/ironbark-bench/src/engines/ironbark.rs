//! ironbark, the engine this benchmark exists for.
//!
//! Non-durable runs open with `Durability::None`; durable runs commit with
//! one fdatasync each. Sorted loads use `WriteTxn::append`, as LMDB's
//! driver uses `MDB_APPEND`. One read transaction per lookup; `longreader`
//! keeps one more `ReadTxn` open in the session while it commits.

use ironbark::{Database, Durability, Options, ReadTxn, Tree};

use crate::engine::{Engine, EngineConfig, Op, Result, Session};

const TREE: &str = "bench";

pub struct Ironbark {
    db: Database,
    tree: Tree,
}

/// Opens the database with the default options (logged commits on), or
/// with `file_commits`, every commit written to the data file (logged
/// commits off: the `ironbark-files` engine).
pub fn open(cfg: &EngineConfig, file_commits: bool) -> Result<Box<dyn Engine>> {
    let options = Options {
        logged_commits: !file_commits,
        durability: if cfg.sync {
            Durability::Immediate
        } else {
            Durability::None
        },
        max_readers: 1024,
        // The address space LMDB's map gets (it reserves no memory): a
        // 64 GiB reservation is refused under valgrind.
        map_reservation: cfg.map_bytes,
        ..Default::default()
    };
    let db = Database::open_with(cfg.dir.join("data.ib"), &options)?;
    let mut tx = db.begin_write()?;
    let tree = tx.open_tree(TREE)?;
    tx.commit()?;
    Ok(Box::new(Ironbark { db, tree }))
}

impl Engine for Ironbark {
    fn session(&self) -> Result<Box<dyn Session + '_>> {
        Ok(Box::new(IronbarkSession {
            e: self,
            held: None,
        }))
    }

    fn counters(&self) -> Vec<(String, u64)> {
        // Not `stats()`: that checkpoints the logged commits, which would
        // do the close's work outside the timed close.
        let c = self.db.counters();
        vec![
            ("commits".into(), c.commits),
            ("pages_written".into(), c.pages_written),
            ("write_calls".into(), c.write_calls),
            ("bytes_written".into(), c.bytes_written),
            ("bytes_mapped".into(), c.bytes_mapped),
            ("log_bytes".into(), c.log_bytes),
            ("syncs".into(), c.syncs),
            ("checkpoint_steps".into(), c.checkpoint_steps),
            ("checkpoint_runs_spliced".into(), c.checkpoint_runs_spliced),
            ("checkpoint_roots_grown".into(), c.checkpoint_roots_grown),
            (
                "checkpoint_leaves_folded".into(),
                c.checkpoint_leaves_folded,
            ),
            (
                "checkpoint_layouts_deferred".into(),
                c.checkpoint_layouts_deferred,
            ),
            ("values_overlaid".into(), c.values_overlaid),
            ("inserts_overlaid".into(), c.inserts_overlaid),
        ]
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.db.sync()?;
        drop(self);
        Ok(())
    }
}

struct IronbarkSession<'a> {
    e: &'a Ironbark,
    /// The snapshot of `longreader`; its reader slot pins its commit.
    held: Option<ReadTxn>,
}

impl Session for IronbarkSession<'_> {
    fn write(&mut self, ops: &[Op<'_>], append: bool) -> Result<()> {
        let t = &self.e.tree;
        let mut tx = self.e.db.begin_write()?;
        fn puts<'o>(op: &Op<'o>) -> Option<(&'o [u8], &'o [u8])> {
            match *op {
                Op::Put(k, v) => Some((k, v)),
                Op::Delete(_) => None,
            }
        }
        if !append && ops.len() > 1 && ops.iter().all(|op| puts(op).is_some()) {
            // A batch of puts, as the LSM engines take theirs in a
            // `WriteBatch`: `put_many` walks their paths together.
            tx.put_many(t, ops.iter().filter_map(puts))?;
        } else {
            for op in ops {
                match *op {
                    Op::Put(k, v) if append => tx.append(t, k, v)?,
                    Op::Put(k, v) => tx.put(t, k, v)?,
                    Op::Delete(k) => {
                        tx.delete(t, k)?;
                    }
                }
            }
        }
        tx.commit()?;
        Ok(())
    }

    fn delete_range(&mut self, start: &[u8], end: &[u8]) -> Result<Option<u64>> {
        let mut tx = self.e.db.begin_write()?;
        let removed = tx.delete_range(&self.e.tree, start..end)?;
        tx.commit()?;
        Ok(Some(removed))
    }

    fn hold_snapshot(&mut self) -> Result<bool> {
        self.held = Some(self.e.db.begin_read()?);
        Ok(true)
    }

    fn snapshot_get(&mut self, key: &[u8], f: &mut dyn FnMut(&[u8])) -> Result<bool> {
        let rx = self.held.as_ref().ok_or("no snapshot is held")?;
        match rx.get(&self.e.tree, key)? {
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
        let rx = self.e.db.begin_read()?;
        match rx.get(&self.e.tree, key)? {
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
        let rx = self.e.db.begin_read()?;
        let t = &self.e.tree;
        let mut n = 0u64;
        let mut visit = |item: ironbark::Result<(&[u8], &[u8])>| -> Result<bool> {
            if n >= limit {
                return Ok(false);
            }
            let (k, v) = item?;
            f(k, v);
            n += 1;
            Ok(true)
        };
        // One loop per kind of range, as in the LMDB adapter: each range is
        // iterated where it is made, not moved out of a `match` first (a
        // range holds two cursors, about 1 KB).
        match (start, reverse) {
            (None, false) => {
                for item in rx.iter(t)? {
                    if !visit(item)? {
                        break;
                    }
                }
            }
            (None, true) => {
                for item in rx.iter(t)?.rev() {
                    if !visit(item)? {
                        break;
                    }
                }
            }
            (Some(s), false) => {
                for item in rx.range(t, s..)? {
                    if !visit(item)? {
                        break;
                    }
                }
            }
            (Some(s), true) => {
                for item in rx.range(t, ..=s)?.rev() {
                    if !visit(item)? {
                        break;
                    }
                }
            }
        }
        Ok(n)
    }
}
