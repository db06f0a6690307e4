//! Flags, db_bench style: `--name=value` or `--name value`.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::engine::Result;

/// Every workload, in db_bench's names.
pub const BENCHMARKS: &[&str] = &[
    "fillseq",
    "fillrandom",
    "fillseqbatch",
    "fillrandbatch",
    "overwrite",
    "readrandom",
    "readmissing",
    "readseq",
    "readreverse",
    "seekrandom",
    "deleterandom",
    "deleterange",
    "readwhilewriting",
    "fillsync",
    "smalltxn",
    "longreader",
];

pub const HELP: &str = "\
ironbark-bench: db_bench workloads against ironbark and its peers, one process per engine and workload.

USAGE:
    ironbark-bench [FLAGS]                 run a preset (default: quick) or the given benchmarks
    ironbark-bench report RESULTS.jsonl --out DIR
                                           markdown report with SVG/PNG charts from JSON lines
    ironbark-bench list                    engines in this build, benchmarks and presets

BENCHMARKS (besides db_bench's fill*, overwrite, read*, seekrandom, deleterandom,
readwhilewriting, fillsync):
    smalltxn               --txns transactions of --batch_size random new keys
    deleterange            one transaction that removes the middle --writes records
                           (default: half of them) as one key range: the engine's range
                           delete where it has one (ironbark, LMDB through heed, RocksDB's
                           range tombstone, SQLite's DELETE ... WHERE), else a scan for
                           the keys and a delete of each; ops/s counts records removed
    longreader             one read snapshot held while --txns commits of --batch_size
                           random overwrites of loaded keys run, then released; measures
                           how far the file grows behind a long-lived reader. Unless
                           given, --num=10000, --txns=10000, --batch_size=10. `disk MiB`
                           is measured after close (snapshot released), `held MiB`
                           after the last commit while the snapshot is still held. The
                           snapshot must still read the values it saw when taken, or
                           the run fails. bdb cannot hold a snapshot next to its own
                           writes and is reported as unsupported (skipped).

FLAGS (db_bench names; `--flag=value` or `--flag value`):
    --preset=NAME          quick (default), inmem, malloc, rocksdb, smalltxn, readscale,
                           longreader
    --engines=a,b          engines to run (default: every engine in this build)
    --benchmarks=a,b       workloads, run in order (a non-preset run when given)
    --num=N                records in the database (default 1000000; longreader 10000)
    --reads=N              operations per reader thread (default: num)
    --writes=N             operations of overwrite and deleterandom (default: num), records
                           deleterange removes (default: num/2);
                           fillsync always does num/1000 durable commits
    --key_size=N           bytes per key (default 16)
    --keys=decimal|random  db_bench's zero-padded decimal keys (default), or random bytes
                           (UUID-like; --key_size at least 9; no fillseq*)
    --value_size=N         bytes per value (default 100)
    --batch_size=N         puts per transaction (default 1; *batch fills 1000; smalltxn 100;
                           longreader 10)
    --threads=1,2,4        reader threads; a list runs each count in turn
    --duration=SECS        run reads (and readwhilewriting) for this long instead of a count
    --writes_per_second=N  rate limit of the readwhilewriting writer (default: none)
    --seek_nexts=N         entries read after each seek in seekrandom (default 10)
    --txns=N               transactions of smalltxn (default 100) and longreader (10000)
    --sync                 durable commits (fsync) in every write benchmark
    --use_existing_db      do not rebuild; the databases in --db hold --num records
    --db=DIR               where the databases live (default: $TMPDIR/ironbark-bench)
    --seed=N               seed of every key and value choice (default 301)
    --json=FILE            JSON-lines output (default: bench-results/<preset>-<time>.jsonl)
    --cache_mb=N           cache of engines that have one (default: 2x the data + 64 MiB)
    --malloc=a,b           allocators: glibc, jemalloc, tcmalloc (LD_PRELOAD of Debian's)
    --repeat=N             rounds (default 1): every engine runs each step N times, the
                           engines taking turns, so that a noisy machine slows all of them;
                           tables show each engine's median round by throughput, and every
                           round's rate is listed under them (each round is a JSON line)
    --warmup=0             skip the untimed warm-up: before the first timed step, the first
                           engine loads 2x --num records (at most 1M) into <db>/.warmup,
                           which is then deleted (default: on; a machine idle for a few
                           seconds runs its next step slower, whichever engine that is)
";

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Config {
    pub engines: Vec<String>,
    pub benchmarks: Vec<String>,
    pub num: u64,
    pub reads: Option<u64>,
    pub writes: Option<u64>,
    pub key_size: usize,
    pub keys: crate::keys::KeyFormat,
    pub value_size: usize,
    pub batch_size: Option<u64>,
    pub threads: Vec<usize>,
    pub duration: Option<f64>,
    pub writes_per_second: Option<u64>,
    pub seek_nexts: u64,
    pub txns: u64,
    pub sync: bool,
    pub use_existing_db: bool,
    pub db: PathBuf,
    pub seed: u64,
    pub json: Option<PathBuf>,
    pub preset: Option<String>,
    pub cache_mb: Option<u64>,
    pub malloc: Vec<String>,
    /// Rounds of each step (`--repeat`).
    #[serde(default = "one")]
    pub repeat: u32,
    /// Whether an untimed load runs before the first timed step
    /// (`--warmup`).
    #[serde(default = "yes")]
    pub warmup: bool,
    /// The flags set explicitly (by the user or a preset step), so that a
    /// workload's own defaults apply only to the others.
    #[serde(default)]
    pub given: Vec<String>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            engines: crate::engines::available()
                .into_iter()
                .map(String::from)
                .collect(),
            benchmarks: vec!["fillrandbatch".into(), "readrandom".into()],
            num: 1_000_000,
            reads: None,
            writes: None,
            key_size: 16,
            keys: crate::keys::KeyFormat::Decimal,
            value_size: 100,
            batch_size: None,
            threads: vec![1],
            duration: None,
            writes_per_second: None,
            seek_nexts: 10,
            txns: 100,
            sync: false,
            use_existing_db: false,
            db: std::env::temp_dir().join("ironbark-bench"),
            seed: 301,
            json: None,
            preset: None,
            cache_mb: None,
            malloc: vec!["glibc".into()],
            repeat: 1,
            warmup: true,
            given: Vec::new(),
        }
    }
}

fn one() -> u32 {
    1
}

fn yes() -> bool {
    true
}

fn list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

fn number<T: std::str::FromStr>(name: &str, value: &str) -> Result<T> {
    let cleaned: String = value.chars().filter(|c| *c != '_').collect();
    cleaned
        .parse()
        .map_err(|_| format!("--{name}: `{value}` is not a number").into())
}

fn flag_bool(value: &str) -> Result<bool> {
    match value {
        "" | "1" | "true" | "yes" => Ok(true),
        "0" | "false" | "no" => Ok(false),
        other => Err(format!("expected true or false, got `{other}`").into()),
    }
}

/// Flags that take no value when written alone.
const SWITCHES: &[&str] = &["sync", "use_existing_db"];

/// Splits `--a=b --c d --sync` into (name, value) pairs.
pub fn split_flags(args: &[String]) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        let Some(body) = arg.strip_prefix("--") else {
            return Err(format!("unexpected argument `{arg}` (try --help)").into());
        };
        if let Some((name, value)) = body.split_once('=') {
            out.push((name.replace('-', "_"), value.to_string()));
        } else {
            let name = body.replace('-', "_");
            let takes_value = !SWITCHES.contains(&name.as_str()) && name != "help";
            if takes_value && i + 1 < args.len() && !args[i + 1].starts_with("--") {
                out.push((name, args[i + 1].clone()));
                i += 1;
            } else {
                out.push((name, String::new()));
            }
        }
        i += 1;
    }
    Ok(out)
}

impl Config {
    pub fn apply(&mut self, name: &str, value: &str) -> Result<()> {
        match name {
            "engines" => self.engines = list(value),
            "benchmarks" => self.benchmarks = list(value),
            "num" => self.num = number(name, value)?,
            "reads" => self.reads = Some(number(name, value)?),
            "writes" => self.writes = Some(number(name, value)?),
            "key_size" => self.key_size = number(name, value)?,
            "keys" => {
                self.keys = match value {
                    "decimal" => crate::keys::KeyFormat::Decimal,
                    "random" => crate::keys::KeyFormat::Random,
                    _ => return Err(format!("--keys={value}: decimal or random").into()),
                }
            }
            "value_size" => self.value_size = number(name, value)?,
            "batch_size" => self.batch_size = Some(number(name, value)?),
            "threads" => {
                self.threads = list(value)
                    .iter()
                    .map(|t| number(name, t))
                    .collect::<Result<_>>()?
            }
            "duration" => self.duration = Some(number(name, value)?),
            "writes_per_second" => self.writes_per_second = Some(number(name, value)?),
            "seek_nexts" => self.seek_nexts = number(name, value)?,
            "txns" => self.txns = number(name, value)?,
            "sync" => self.sync = flag_bool(value)?,
            "use_existing_db" => self.use_existing_db = flag_bool(value)?,
            "db" => self.db = PathBuf::from(value),
            "seed" => self.seed = number(name, value)?,
            "json" => self.json = Some(PathBuf::from(value)),
            "preset" => self.preset = Some(value.to_string()),
            "cache_mb" => self.cache_mb = Some(number(name, value)?),
            "malloc" => self.malloc = list(value),
            "repeat" => self.repeat = number(name, value)?,
            "warmup" => self.warmup = flag_bool(value)?,
            other => return Err(format!("unknown flag --{other} (try --help)").into()),
        }
        if !self.given.iter().any(|g| g == name) {
            self.given.push(name.to_string());
        }
        Ok(())
    }

    fn is_given(&self, name: &str) -> bool {
        self.given.iter().any(|g| g == name)
    }

    /// The configuration `benchmark` runs with: this one, with the
    /// workload's own defaults for the flags nobody set. longreader's
    /// defaults are the workload: 10,000 records, 10,000 commits of
    /// 10 overwrites. With --use_existing_db the databases hold --num
    /// records, so --num stays as it is.
    pub fn for_benchmark(&self, benchmark: &str) -> Config {
        let mut c = self.clone();
        if benchmark == "longreader" {
            if !c.is_given("num") && !c.use_existing_db {
                c.num = 10_000;
            }
            if !c.is_given("txns") {
                c.txns = 10_000;
            }
            if !c.is_given("batch_size") {
                c.batch_size = Some(10);
            }
        }
        c
    }

    pub fn validate(&self) -> Result<()> {
        if self.key_size < self.keys.min_key_size() {
            return Err(format!(
                "--key_size must be at least {} with --keys={:?}",
                self.keys.min_key_size(),
                self.keys
            )
            .into());
        }
        if self.keys == crate::keys::KeyFormat::Random {
            if let Some(b) = self.benchmarks.iter().find(|b| b.starts_with("fillseq")) {
                return Err(format!(
                    "{b} loads keys in sorted order: with --keys=random, use fillrandom or fillrandbatch"
                )
                .into());
            }
            if self.benchmarks.iter().any(|b| b == "deleterange") {
                return Err(
                    "deleterange removes consecutive records: it needs --keys=decimal".into(),
                );
            }
        }
        if self.repeat == 0 {
            return Err("--repeat must be at least 1".into());
        }
        if self.num == 0 {
            return Err("--num must be at least 1".into());
        }
        if self.num > crate::keys::max_records(self.keys, self.key_size) {
            return Err(format!(
                "--num={} does not fit in {}-byte keys",
                self.num, self.key_size
            )
            .into());
        }
        if self.threads.is_empty() || self.threads.contains(&0) {
            return Err("--threads needs counts of at least 1".into());
        }
        for b in &self.benchmarks {
            if !BENCHMARKS.contains(&b.as_str()) {
                return Err(
                    format!("unknown benchmark `{b}`; known: {}", BENCHMARKS.join(",")).into(),
                );
            }
        }
        let built = crate::engines::available();
        for e in &self.engines {
            if !built.contains(&e.as_str()) {
                return Err(format!(
                    "engine `{e}` is not in this build (built: {}; see the cargo features)",
                    built.join(",")
                )
                .into());
            }
        }
        for m in &self.malloc {
            if !["glibc", "jemalloc", "tcmalloc"].contains(&m.as_str()) {
                return Err(format!("unknown allocator `{m}` (glibc, jemalloc, tcmalloc)").into());
            }
        }
        Ok(())
    }

    /// Cache budget in bytes: the data twice over plus 64 MiB, unless given.
    pub fn cache_bytes(&self) -> u64 {
        match self.cache_mb {
            Some(mb) => mb << 20,
            None => {
                let data = self
                    .num
                    .saturating_mul((self.key_size + self.value_size) as u64);
                data.saturating_mul(2)
                    .saturating_add(64 << 20)
                    .min(16 << 30)
            }
        }
    }

    /// LMDB's map size: room for the data many times over (address space
    /// only; the file grows as needed).
    pub fn map_bytes(&self) -> u64 {
        let data = self
            .num
            .saturating_mul((self.key_size + self.value_size) as u64 + 64);
        data.saturating_mul(8).max(4 << 30)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(flags: &[&str]) -> Config {
        let owned: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
        let mut c = Config::default();
        for (n, v) in split_flags(&owned).unwrap() {
            c.apply(&n, &v).unwrap();
        }
        c
    }

    #[test]
    fn longreader_has_its_own_defaults_for_flags_not_given() {
        let c = config(&["--benchmarks=longreader"]).for_benchmark("longreader");
        assert_eq!((c.num, c.txns, c.batch_size), (10_000, 10_000, Some(10)));
        // Other workloads keep the global defaults.
        let c = config(&[]).for_benchmark("smalltxn");
        assert_eq!((c.num, c.txns, c.batch_size), (1_000_000, 100, None));
    }

    #[test]
    fn flags_given_win_over_longreader_defaults() {
        let c = config(&["--num=500", "--txns=7", "--batch_size=3"]).for_benchmark("longreader");
        assert_eq!((c.num, c.txns, c.batch_size), (500, 7, Some(3)));
        // An existing database holds --num records: the default is kept.
        let c = config(&["--use_existing_db"]).for_benchmark("longreader");
        assert_eq!(c.num, 1_000_000);
    }
}
