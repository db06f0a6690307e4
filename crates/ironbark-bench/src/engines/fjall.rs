//! fjall: a log-structured (LSM) engine in pure Rust, the `fjall` crate.
//!
//! One keyspace with one partition, built without the `lz4` feature and
//! opened with `CompressionType::None`, a block cache of the cache budget.
//! Every write is one atomic `WriteBatch`: durable runs (`--sync`,
//! `fillsync`) commit with `PersistMode::SyncAll` (the journal is fsynced
//! before the commit returns); other runs with `PersistMode::Buffer` (the
//! journal reaches the OS, no sync), as RocksDB without `sync`. Close
//! persists the journal with `SyncAll`. Lookups read the latest committed
//! state; each scan iterates its own snapshot. Flushes and compactions run on
//! fjall's background threads, as they do for RocksDB. `longreader` keeps one
//! partition snapshot open in the session, which holds back garbage
//! collection of the versions it can see.

use fjall::{
    CompressionType, Config, Keyspace, PartitionCreateOptions, PartitionHandle, PersistMode,
};

use crate::engine::{Engine, EngineConfig, Op, Result, Session};

const PARTITION: &str = "bench";

pub struct Fjall {
    keyspace: Keyspace,
    partition: PartitionHandle,
    persist: PersistMode,
}

pub fn open(cfg: &EngineConfig) -> Result<Box<dyn Engine>> {
    let keyspace = Config::new(cfg.dir.join("fjall"))
        .cache_size(cfg.cache_bytes)
        .open()?;
    let partition = keyspace.open_partition(
        PARTITION,
        PartitionCreateOptions::default().compression(CompressionType::None),
    )?;
    Ok(Box::new(Fjall {
        keyspace,
        partition,
        persist: if cfg.sync {
            PersistMode::SyncAll
        } else {
            PersistMode::Buffer
        },
    }))
}

impl Engine for Fjall {
    fn session(&self) -> Result<Box<dyn Session + '_>> {
        Ok(Box::new(FjallSession {
            e: self,
            held: None,
        }))
    }

    fn counters(&self) -> Vec<(String, u64)> {
        vec![
            ("flushes".into(), self.keyspace.flushes_completed() as u64),
            (
                "compactions".into(),
                self.keyspace.compactions_completed() as u64,
            ),
        ]
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.keyspace.persist(PersistMode::SyncAll)?;
        // Dropping the keyspace stops and joins the background workers.
        drop(self);
        Ok(())
    }
}

/// fjall asserts (panics) on keys that are empty or longer than 65535 bytes
/// and on values of 4 GiB or more: refuse them with an error instead.
fn check_sizes(key: &[u8], value_len: usize) -> Result<()> {
    if key.is_empty() || key.len() > usize::from(u16::MAX) {
        return Err(format!(
            "fjall: key of {} bytes is outside its limits (1 to 65535)",
            key.len()
        )
        .into());
    }
    if u32::try_from(value_len).is_err() {
        return Err(format!("fjall: value of {value_len} bytes is larger than 2^32 - 1").into());
    }
    Ok(())
}

struct FjallSession<'a> {
    e: &'a Fjall,
    /// The snapshot of `longreader`.
    held: Option<fjall::Snapshot>,
}

impl Session for FjallSession<'_> {
    fn write(&mut self, ops: &[Op<'_>], _append: bool) -> Result<()> {
        let p = &self.e.partition;
        let mut batch = self.e.keyspace.batch().durability(Some(self.e.persist));
        for op in ops {
            match *op {
                Op::Put(k, v) => {
                    check_sizes(k, v.len())?;
                    batch.insert(p, k, v)
                }
                Op::Delete(k) => {
                    check_sizes(k, 0)?;
                    batch.remove(p, k)
                }
            }
        }
        batch.commit()?;
        Ok(())
    }

    fn hold_snapshot(&mut self) -> Result<bool> {
        self.held = Some(self.e.partition.snapshot());
        Ok(true)
    }

    fn snapshot_get(&mut self, key: &[u8], f: &mut dyn FnMut(&[u8])) -> Result<bool> {
        let snap = self.held.as_ref().ok_or("no snapshot is held")?;
        match snap.get(key)? {
            Some(v) => {
                f(&v);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn release_snapshot(&mut self) {
        self.held = None;
    }

    fn get(&mut self, key: &[u8], f: &mut dyn FnMut(&[u8])) -> Result<bool> {
        match self.e.partition.get(key)? {
            Some(v) => {
                f(&v);
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
        let p = &self.e.partition;
        let mut n = 0u64;
        let mut visit = |item: fjall::Result<fjall::KvPair>| -> Result<bool> {
            if n >= limit {
                return Ok(false);
            }
            let (k, v) = item?;
            f(&k, &v);
            n += 1;
            Ok(true)
        };
        match (start, reverse) {
            (None, false) => {
                for item in p.iter() {
                    if !visit(item)? {
                        break;
                    }
                }
            }
            (None, true) => {
                for item in p.iter().rev() {
                    if !visit(item)? {
                        break;
                    }
                }
            }
            (Some(s), false) => {
                for item in p.range(s..) {
                    if !visit(item)? {
                        break;
                    }
                }
            }
            (Some(s), true) => {
                for item in p.range(..=s).rev() {
                    if !visit(item)? {
                        break;
                    }
                }
            }
        }
        Ok(n)
    }
}
