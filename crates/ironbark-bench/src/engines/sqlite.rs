//! SQLite (bundled) as a key/value table: `WITHOUT ROWID`, WAL mode, one
//! connection per thread. `synchronous=OFF` for non-durable runs, `FULL`
//! (an fsync per commit) for durable ones. `longreader` holds its snapshot
//! on a second connection of the session: a read transaction (`BEGIN` and a
//! `SELECT`), which keeps checkpoints from recycling the WAL behind it.

use std::path::PathBuf;

use rusqlite::{params, Connection, OpenFlags};

use crate::engine::{Engine, EngineConfig, Op, Result, Session};

pub struct Sqlite {
    path: PathBuf,
    sync: bool,
    cache_kib: u64,
    main: Connection,
}

// A `Connection` is Send but not Sync; the main connection is only used by
// `close`, which takes the engine by value, so sharing `&Sqlite` between
// threads never touches it concurrently. Wrapping it in a Mutex keeps that
// true without unsafe code.
pub struct SqliteShared(std::sync::Mutex<Sqlite>);

fn connect(path: &PathBuf, sync: bool, cache_kib: u64) -> Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(std::time::Duration::from_secs(60))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", if sync { "FULL" } else { "OFF" })?;
    conn.pragma_update(None, "cache_size", -(cache_kib as i64))?;
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    Ok(conn)
}

pub fn open(cfg: &EngineConfig) -> Result<Box<dyn Engine>> {
    let path = cfg.dir.join("data.sqlite");
    let cache_kib = (cfg.cache_bytes / 1024).max(2048);
    let main = connect(&path, cfg.sync, cache_kib)?;
    main.execute_batch(
        "CREATE TABLE IF NOT EXISTS kv (k BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID;",
    )?;
    Ok(Box::new(SqliteShared(std::sync::Mutex::new(Sqlite {
        path,
        sync: cfg.sync,
        cache_kib,
        main,
    }))))
}

impl Engine for SqliteShared {
    fn session(&self) -> Result<Box<dyn Session + '_>> {
        let (path, sync, cache_kib) = {
            let s = self.0.lock().map_err(|_| "sqlite engine lock poisoned")?;
            (s.path.clone(), s.sync, s.cache_kib)
        };
        Ok(Box::new(SqliteSession {
            conn: connect(&path, sync, cache_kib)?,
            path,
            sync,
            cache_kib,
            held: None,
        }))
    }

    fn close(self: Box<Self>) -> Result<()> {
        let s = self
            .0
            .into_inner()
            .map_err(|_| "sqlite engine lock poisoned")?;
        s.main
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        s.main.close().map_err(|(_, e)| e)?;
        Ok(())
    }
}

struct SqliteSession {
    conn: Connection,
    path: PathBuf,
    sync: bool,
    cache_kib: u64,
    /// The connection whose open read transaction is `longreader`'s
    /// snapshot (a connection cannot read in one transaction and commit in
    /// others).
    held: Option<Connection>,
}

impl Session for SqliteSession {
    fn write(&mut self, ops: &[Op<'_>], _append: bool) -> Result<()> {
        let tx = self.conn.transaction()?;
        {
            let mut put = tx.prepare_cached("INSERT OR REPLACE INTO kv (k, v) VALUES (?1, ?2)")?;
            let mut del = tx.prepare_cached("DELETE FROM kv WHERE k = ?1")?;
            for op in ops {
                match *op {
                    Op::Put(k, v) => {
                        put.execute(params![k, v])?;
                    }
                    Op::Delete(k) => {
                        del.execute(params![k])?;
                    }
                }
            }
        }
        tx.commit()?;
        Ok(())
    }

    fn delete_range(&mut self, start: &[u8], end: &[u8]) -> Result<Option<u64>> {
        let tx = self.conn.transaction()?;
        let removed = tx.execute(
            "DELETE FROM kv WHERE k >= ?1 AND k < ?2",
            params![start, end],
        )?;
        tx.commit()?;
        Ok(Some(removed as u64))
    }

    fn hold_snapshot(&mut self) -> Result<bool> {
        self.release_snapshot();
        let conn = connect(&self.path, self.sync, self.cache_kib)?;
        // A deferred BEGIN takes its snapshot at the first read.
        conn.execute_batch("BEGIN")?;
        conn.query_row(
            "SELECT count(*) FROM (SELECT 1 FROM kv LIMIT 1)",
            [],
            |_| Ok(()),
        )?;
        self.held = Some(conn);
        Ok(true)
    }

    fn snapshot_get(&mut self, key: &[u8], f: &mut dyn FnMut(&[u8])) -> Result<bool> {
        let conn = self.held.as_ref().ok_or("no snapshot is held")?;
        let mut stmt = conn.prepare_cached("SELECT v FROM kv WHERE k = ?1")?;
        let mut rows = stmt.query(params![key])?;
        match rows.next()? {
            Some(row) => {
                f(row.get_ref(0)?.as_blob()?);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn release_snapshot(&mut self) {
        if let Some(conn) = self.held.take() {
            // Ending the read transaction cannot lose data; closing the
            // connection ends it in any case.
            let _ = conn.execute_batch("COMMIT");
        }
    }

    fn get(&mut self, key: &[u8], f: &mut dyn FnMut(&[u8])) -> Result<bool> {
        let mut stmt = self.conn.prepare_cached("SELECT v FROM kv WHERE k = ?1")?;
        let mut rows = stmt.query(params![key])?;
        match rows.next()? {
            Some(row) => {
                f(row.get_ref(0)?.as_blob()?);
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
        let sql = match (start.is_some(), reverse) {
            (false, false) => "SELECT k, v FROM kv ORDER BY k ASC LIMIT ?1",
            (false, true) => "SELECT k, v FROM kv ORDER BY k DESC LIMIT ?1",
            (true, false) => "SELECT k, v FROM kv WHERE k >= ?2 ORDER BY k ASC LIMIT ?1",
            (true, true) => "SELECT k, v FROM kv WHERE k <= ?2 ORDER BY k DESC LIMIT ?1",
        };
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut stmt = self.conn.prepare_cached(sql)?;
        let mut rows = match start {
            Some(s) => stmt.query(params![limit, s])?,
            None => stmt.query(params![limit])?,
        };
        let mut n = 0u64;
        while let Some(row) = rows.next()? {
            f(row.get_ref(0)?.as_blob()?, row.get_ref(1)?.as_blob()?);
            n += 1;
        }
        Ok(n)
    }
}
