//! One measured run: a JSON object with every column named.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The result of one engine x benchmark x thread count (x allocator).
/// Latencies are per operation (per transaction for batched writes).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RunResult {
    pub preset: String,
    pub step: String,
    pub engine: String,
    pub benchmark: String,
    pub threads: usize,
    pub allocator: String,
    pub num: u64,
    pub key_size: usize,
    /// How keys were made (absent in older results: decimal).
    #[serde(default)]
    pub keys: crate::keys::KeyFormat,
    pub value_size: usize,
    pub batch_size: u64,
    pub sync: bool,

    /// Operations timed (reads for readwhilewriting; puts for fills).
    pub ops: u64,
    pub found: u64,
    pub missing: u64,
    /// How many lookups had to find their key (0 for readmissing).
    pub expected_found: u64,

    pub wall_s: f64,
    pub ops_per_sec: f64,
    pub mb_per_sec: f64,
    pub usec_per_op: f64,
    pub p50_us: f64,
    pub p75_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub p9999_us: f64,
    pub max_us: f64,

    pub read_ops: u64,
    pub read_ops_per_sec: f64,
    pub write_ops: u64,
    pub write_ops_per_sec: f64,
    pub write_p50_us: f64,
    pub write_p99_us: f64,

    pub user_s: f64,
    pub sys_s: f64,
    pub cpu_pct: f64,
    pub voluntary_cs: u64,
    pub involuntary_cs: u64,

    pub peak_rss_bytes: u64,
    pub end_rss_bytes: u64,
    pub disk_bytes: u64,
    pub disk_apparent_bytes: u64,
    /// longreader: allocated bytes of the database after the last commit,
    /// while the snapshot is still held (`disk_bytes` is after close).
    #[serde(default)]
    pub held_disk_bytes: Option<u64>,

    /// `wchar` of /proc/self/io from the start of the timed phase through
    /// close, plus the bytes the engine reports it stored through a
    /// writable map (its `bytes_mapped` counter), which no write call carries.
    pub bytes_written: u64,
    /// `syscw`: write-like system calls over the same span.
    pub write_calls: u64,
    /// `write_bytes`: bytes sent to the storage layer over the same span.
    pub storage_bytes_written: u64,
    /// Bytes of keys and values passed to put (keys only for deletes).
    pub user_bytes_written: u64,
    /// bytes_written / user_bytes_written (0 when nothing was put).
    pub write_amp: f64,
    pub commits: u64,
    pub bytes_per_commit: f64,
    pub write_calls_per_commit: f64,
    /// Syncs reported by the engine itself, when it reports them.
    pub fsyncs: Option<u64>,

    pub open_s: f64,
    pub warm_s: f64,
    pub close_s: f64,
    /// The engine's own counters over the timed phase and close.
    pub engine_counters: BTreeMap<String, u64>,
    pub unix_time: u64,
    /// Which round of `--repeat` this run was, from 0 (absent in older
    /// results: 0).
    #[serde(default)]
    pub round: u32,
}

pub const RESULT_PREFIX: &str = "IRONBARK-BENCH-RESULT ";

/// The line a child prints instead of a result when the engine cannot run
/// the workload at all (followed by the reason).
pub const UNSUPPORTED_PREFIX: &str = "IRONBARK-BENCH-UNSUPPORTED ";

/// An engine that cannot run a workload: reported and skipped, not a
/// failed run.
#[derive(Debug)]
pub struct Unsupported(pub String);

impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unsupported {}
