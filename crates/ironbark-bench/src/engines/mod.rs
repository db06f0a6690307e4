//! The engines this build includes, by name.

use crate::engine::{Engine, EngineConfig, Result};

mod ironbark;
mod lmdb;
mod redb;
mod sqlite;

/// Every engine name this build can run, in table order (ironbark first).
pub fn available() -> Vec<&'static str> {
    let mut names = Vec::new();
    names.extend(["ironbark", "lmdb", "redb", "sqlite"]);
    names
}

/// Opens (creating if needed) the database of engine `name` in `cfg.dir`.
pub fn open(name: &str, cfg: &EngineConfig) -> Result<Box<dyn Engine>> {
    std::fs::create_dir_all(&cfg.dir)?;
    match name {
        "ironbark" => ironbark::open(cfg),
        "lmdb" => lmdb::open(cfg),
        "redb" => redb::open(cfg),
        "sqlite" => sqlite::open(cfg),
        other => Err(format!(
            "engine `{other}` is not in this build (built: {})",
            available().join(",")
        )
        .into()),
    }
}
