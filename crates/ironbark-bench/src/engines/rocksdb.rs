//! RocksDB through the `rocksdb` crate linked to Debian's librocksdb (7.8).
//!
//! `rocksdb`: defaults, compression off, a block cache of the cache budget,
//! WAL on, sync only when durable. `rocksdb-tuned`: seed 000's "RocksDBpfx"
//! db_bench options that the API still has (num_levels 6, 4 KiB blocks,
//! 128 MiB write buffers x2, L0 triggers 8/16/24, 128 MiB target files,
//! 1 GiB level base, 4 background jobs, 10-bit bloom filters with locality 1,
//! mmap reads, unlimited open files). Its plain table and prefix-hash
//! memtable are left out: they give up total-order iteration, which
//! readseq and seekrandom need. `longreader` keeps one `Snapshot` in the
//! session, which keeps compaction from dropping the versions it can see.

use rocksdb::{
    BlockBasedOptions, Cache, DBCompressionType, Options, Snapshot, WriteBatch, WriteOptions, DB,
};

use crate::engine::{Engine, EngineConfig, Op, Result, Session};

pub struct Rocks {
    db: DB,
    write_options: WriteOptions,
    // Kept alive as long as the database uses it.
    _cache: Cache,
}

pub fn open(cfg: &EngineConfig, tuned: bool) -> Result<Box<dyn Engine>> {
    let cache = Cache::new_lru_cache(cfg.cache_bytes as usize)?;
    let mut table = BlockBasedOptions::default();
    table.set_block_cache(&cache);
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.set_compression_type(DBCompressionType::None);
    if tuned {
        table.set_block_size(4096);
        table.set_bloom_filter(10.0, false);
        opts.set_num_levels(6);
        opts.set_write_buffer_size(128 << 20);
        opts.set_max_write_buffer_number(2);
        opts.set_level_zero_file_num_compaction_trigger(8);
        opts.set_level_zero_slowdown_writes_trigger(16);
        opts.set_level_zero_stop_writes_trigger(24);
        opts.set_target_file_size_base(128 << 20);
        opts.set_max_bytes_for_level_base(1 << 30);
        opts.set_max_background_jobs(4);
        opts.set_bloom_locality(1);
        opts.set_allow_mmap_reads(true);
        opts.set_max_open_files(-1);
    }
    opts.set_block_based_table_factory(&table);
    let db = DB::open(&opts, &cfg.dir)?;
    let mut write_options = WriteOptions::default();
    write_options.set_sync(cfg.sync);
    Ok(Box::new(Rocks {
        db,
        write_options,
        _cache: cache,
    }))
}

impl Engine for Rocks {
    fn session(&self) -> Result<Box<dyn Session + '_>> {
        Ok(Box::new(RocksSession {
            e: self,
            held: None,
        }))
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.db.flush_wal(true)?;
        drop(self);
        Ok(())
    }
}

struct RocksSession<'a> {
    e: &'a Rocks,
    /// The snapshot of `longreader`; it borrows the database, as the
    /// session does.
    held: Option<Snapshot<'a>>,
}

impl Session for RocksSession<'_> {
    fn write(&mut self, ops: &[Op<'_>], _append: bool) -> Result<()> {
        let mut batch = WriteBatch::default();
        for op in ops {
            match *op {
                Op::Put(k, v) => batch.put(k, v),
                Op::Delete(k) => batch.delete(k),
            }
        }
        self.e.db.write_opt(batch, &self.e.write_options)?;
        Ok(())
    }

    fn delete_range(&mut self, start: &[u8], end: &[u8]) -> Result<Option<u64>> {
        // A range tombstone: it does not count what it covers.
        let mut batch = WriteBatch::default();
        batch.delete_range(start, end);
        self.e.db.write_opt(batch, &self.e.write_options)?;
        Ok(None)
    }

    fn hold_snapshot(&mut self) -> Result<bool> {
        self.held = Some(self.e.db.snapshot());
        Ok(true)
    }

    fn snapshot_get(&mut self, key: &[u8], f: &mut dyn FnMut(&[u8])) -> Result<bool> {
        let snap = self.held.as_ref().ok_or("no snapshot is held")?;
        match snap.get_pinned(key)? {
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
        match self.e.db.get_pinned(key)? {
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
        let mut it = self.e.db.raw_iterator();
        match (start, reverse) {
            (None, false) => it.seek_to_first(),
            (None, true) => it.seek_to_last(),
            (Some(s), false) => it.seek(s),
            (Some(s), true) => it.seek_for_prev(s),
        }
        let mut n = 0u64;
        while n < limit && it.valid() {
            if let (Some(k), Some(v)) = (it.key(), it.value()) {
                f(k, v);
                n += 1;
            }
            if reverse {
                it.prev();
            } else {
                it.next();
            }
        }
        it.status()?;
        Ok(n)
    }
}
