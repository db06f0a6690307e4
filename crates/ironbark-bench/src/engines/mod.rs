//! The engines this build includes, by name.

use crate::engine::{Engine, EngineConfig, Result};

#[cfg(any(feature = "leveldb", feature = "wiredtiger", feature = "bdb"))]
mod cshim;
mod fjall;
mod ironbark;
mod lmdb;
mod redb;
#[cfg(feature = "rocksdb")]
mod rocksdb;
mod sqlite;

/// Every engine name this build can run, in table order (ironbark first).
pub fn available() -> Vec<&'static str> {
    let mut names = Vec::new();
    names.extend([
        "ironbark",
        "ironbark-files",
        "lmdb",
        "redb",
        "fjall",
        "sqlite",
    ]);
    #[cfg(feature = "rocksdb")]
    names.extend(["rocksdb", "rocksdb-tuned"]);
    #[cfg(feature = "leveldb")]
    names.push("leveldb");
    #[cfg(feature = "wiredtiger")]
    names.push("wiredtiger");
    #[cfg(feature = "bdb")]
    names.push("bdb");
    names
}

/// Opens (creating if needed) the database of engine `name` in `cfg.dir`.
pub fn open(name: &str, cfg: &EngineConfig) -> Result<Box<dyn Engine>> {
    std::fs::create_dir_all(&cfg.dir)?;
    match name {
        "ironbark" => ironbark::open(cfg, false),
        "ironbark-files" => ironbark::open(cfg, true),
        "lmdb" => lmdb::open(cfg),
        "redb" => redb::open(cfg),
        "fjall" => fjall::open(cfg),
        "sqlite" => sqlite::open(cfg),
        #[cfg(feature = "rocksdb")]
        "rocksdb" => rocksdb::open(cfg, false),
        #[cfg(feature = "rocksdb")]
        "rocksdb-tuned" => rocksdb::open(cfg, true),
        #[cfg(feature = "leveldb")]
        "leveldb" => cshim::open(&cshim::LEVELDB, cfg),
        #[cfg(feature = "wiredtiger")]
        "wiredtiger" => cshim::open(&cshim::WIREDTIGER, cfg),
        #[cfg(feature = "bdb")]
        "bdb" => cshim::open(&cshim::BDB, cfg),
        other => Err(format!(
            "engine `{other}` is not in this build (built: {})",
            available().join(",")
        )
        .into()),
    }
}
