//! redb: copy-on-write B-trees with its own page cache.
//!
//! Non-durable runs commit with `Durability::None`; close makes one durable
//! commit so the next process sees the data. `longreader` keeps one
//! `ReadTransaction` open in the session.

use redb::{Database, Durability, ReadTransaction, ReadableTable, TableDefinition};

use crate::engine::{Engine, EngineConfig, Op, Result, Session};

const TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("bench");

pub struct Redb {
    db: Database,
    sync: bool,
}

pub fn open(cfg: &EngineConfig) -> Result<Box<dyn Engine>> {
    let db = Database::builder()
        .set_cache_size(cfg.cache_bytes as usize)
        .create(cfg.dir.join("data.redb"))?;
    let tx = db.begin_write()?;
    tx.open_table(TABLE)?;
    tx.commit()?;
    Ok(Box::new(Redb { db, sync: cfg.sync }))
}

impl Engine for Redb {
    fn session(&self) -> Result<Box<dyn Session + '_>> {
        Ok(Box::new(RedbSession {
            e: self,
            held: None,
        }))
    }

    fn close(self: Box<Self>) -> Result<()> {
        let mut tx = self.db.begin_write()?;
        tx.set_durability(Durability::Immediate);
        tx.commit()?;
        drop(self);
        Ok(())
    }
}

struct RedbSession<'a> {
    e: &'a Redb,
    /// The snapshot of `longreader`.
    held: Option<ReadTransaction>,
}

impl Session for RedbSession<'_> {
    fn write(&mut self, ops: &[Op<'_>], _append: bool) -> Result<()> {
        let mut tx = self.e.db.begin_write()?;
        if !self.e.sync {
            tx.set_durability(Durability::None);
        }
        {
            let mut t = tx.open_table(TABLE)?;
            for op in ops {
                match *op {
                    Op::Put(k, v) => {
                        t.insert(k, v)?;
                    }
                    Op::Delete(k) => {
                        t.remove(k)?;
                    }
                }
            }
        }
        tx.commit()?;
        Ok(())
    }

    fn hold_snapshot(&mut self) -> Result<bool> {
        self.held = Some(self.e.db.begin_read()?);
        Ok(true)
    }

    fn snapshot_get(&mut self, key: &[u8], f: &mut dyn FnMut(&[u8])) -> Result<bool> {
        let rx = self.held.as_ref().ok_or("no snapshot is held")?;
        let t = rx.open_table(TABLE)?;
        match t.get(key)? {
            Some(v) => {
                f(v.value());
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
        let t = rx.open_table(TABLE)?;
        match t.get(key)? {
            Some(v) => {
                f(v.value());
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
        let t = rx.open_table(TABLE)?;
        let range = match (start, reverse) {
            (None, _) => t.iter()?,
            (Some(s), false) => t.range::<&[u8]>(s..)?,
            (Some(s), true) => t.range::<&[u8]>(..=s)?,
        };
        let mut n = 0u64;
        let mut visit = |item: std::result::Result<_, redb::StorageError>| -> Result<bool> {
            if n >= limit {
                return Ok(false);
            }
            let (k, v): (redb::AccessGuard<&[u8]>, redb::AccessGuard<&[u8]>) = item?;
            f(k.value(), v.value());
            n += 1;
            Ok(true)
        };
        if reverse {
            for item in range.rev() {
                if !visit(item)? {
                    break;
                }
            }
        } else {
            for item in range {
                if !visit(item)? {
                    break;
                }
            }
        }
        Ok(n)
    }
}
