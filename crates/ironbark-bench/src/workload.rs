//! The one workload driver: runs one benchmark against one engine inside the
//! child process and measures it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::config::Config;
use crate::engine::{Engine, EngineConfig, Op, Result, Session};
use crate::keys::{self, Permutation, Rng, Values};
use crate::metrics;
use crate::progress;
use crate::result::{RunResult, Unsupported};

/// What the parent asks one child process to do.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Job {
    pub config: Config,
    pub engine: String,
    pub benchmark: String,
    pub threads: usize,
    pub allocator: String,
    pub preset: String,
    pub step: String,
}

/// How a benchmark relates to the database it finds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Starts from an empty database.
    Fill,
    /// Needs the full database (records 0..num) and reads it.
    Read,
    /// Needs the full database and changes it.
    Update,
}

pub fn kind(benchmark: &str) -> Kind {
    match benchmark {
        "fillseq" | "fillrandom" | "fillseqbatch" | "fillrandbatch" | "fillsync" => Kind::Fill,
        "overwrite" | "deleterandom" | "deleterange" | "smalltxn" | "readwhilewriting"
        | "longreader" => Kind::Update,
        _ => Kind::Read,
    }
}

/// Whether the database still holds exactly records 0..num with their values
/// after `benchmark` ran.
pub fn leaves_full_db(benchmark: &str) -> bool {
    matches!(
        benchmark,
        "fillseq"
            | "fillrandom"
            | "fillseqbatch"
            | "fillrandbatch"
            | "overwrite"
            | "readwhilewriting"
            | "longreader"
    ) || kind(benchmark) == Kind::Read
}

/// Whether `--threads` applies (reader threads).
pub fn uses_threads(benchmark: &str) -> bool {
    matches!(
        benchmark,
        "readrandom"
            | "readmissing"
            | "readseq"
            | "readreverse"
            | "seekrandom"
            | "readwhilewriting"
    )
}

pub fn engine_dir(config: &Config, engine: &str) -> std::path::PathBuf {
    config.db.join(engine)
}

fn engine_config(config: &Config, engine: &str, benchmark: &str) -> EngineConfig {
    EngineConfig {
        dir: engine_dir(config, engine),
        sync: config.sync || benchmark == "fillsync",
        cache_bytes: config.cache_bytes(),
        map_bytes: config.map_bytes(),
    }
}

fn new_hist() -> Histogram<u64> {
    // 1 ns .. 100 s at 3 significant digits.
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("valid histogram bounds")
}

/// Counts of one thread (or of all threads, merged).
struct Tally {
    ops: u64,
    found: u64,
    missing: u64,
    user_bytes: u64,
    commits: u64,
    hist: Histogram<u64>,
}

impl Tally {
    fn new() -> Tally {
        Tally {
            ops: 0,
            found: 0,
            missing: 0,
            user_bytes: 0,
            commits: 0,
            hist: new_hist(),
        }
    }

    fn merge(&mut self, other: Tally) -> Result<()> {
        self.ops += other.ops;
        self.found += other.found;
        self.missing += other.missing;
        self.user_bytes += other.user_bytes;
        self.commits += other.commits;
        self.hist.add(other.hist)?;
        Ok(())
    }
}

/// When a loop stops: after a number of operations or at a deadline, and in
/// any case when `stop` is raised.
#[derive(Clone, Copy)]
struct Limit<'a> {
    count: u64,
    deadline: Option<Instant>,
    stop: Option<&'a AtomicBool>,
}

impl Limit<'_> {
    fn done(&self, ops: u64) -> bool {
        if let Some(stop) = self.stop {
            if stop.load(Ordering::Relaxed) {
                return true;
            }
        }
        match self.deadline {
            Some(d) => ops.is_multiple_of(64) && Instant::now() >= d,
            None => ops >= self.count,
        }
    }
}

struct Ctx<'a> {
    cfg: &'a Config,
    values: &'a Values,
}

fn wrong_value(key: &[u8]) -> crate::engine::Error {
    format!(
        "wrong value read for key {:?}",
        String::from_utf8_lossy(key)
    )
    .into()
}

/// Random point lookups (of existing or of missing keys), verifying values.
fn read_random(
    ctx: &Ctx<'_>,
    s: &mut dyn Session,
    seed: u64,
    limit: Limit<'_>,
    missing_keys: bool,
) -> Result<Tally> {
    let mut t = Tally::new();
    let mut rng = Rng::new(seed);
    let mut key = vec![0u8; ctx.cfg.key_size];
    while !limit.done(t.ops) {
        let i = rng.below(ctx.cfg.num);
        if missing_keys {
            keys::missing_key_into(ctx.cfg.keys, i, &mut key);
        } else {
            keys::key_into(ctx.cfg.keys, i, &mut key);
        }
        let values = ctx.values;
        let mut good = true;
        let t0 = Instant::now();
        let hit = s.get(&key, &mut |v| good = values.matches(&key, v))?;
        t.hist.saturating_record(t0.elapsed().as_nanos() as u64);
        if hit {
            if !good {
                return Err(wrong_value(&key));
            }
            t.found += 1;
        } else {
            t.missing += 1;
        }
        t.ops += 1;
        if t.ops.is_multiple_of(progress::CHUNK) {
            progress::add(progress::CHUNK);
        }
    }
    Ok(t)
}

/// A scan of up to `limit` entries from the first (or last) key, verifying
/// every value; latency is recorded per entry batch of 1024.
fn read_seq(ctx: &Ctx<'_>, s: &mut dyn Session, reverse: bool, count: u64) -> Result<Tally> {
    let mut t = Tally::new();
    let mut bad: Option<Vec<u8>> = None;
    let mut last = Instant::now();
    let mut n = 0u64;
    let hist = &mut t.hist;
    let visited = s.scan(None, reverse, count, &mut |k, v| {
        if bad.is_none() && !ctx.values.matches(k, v) {
            bad = Some(k.to_vec());
        }
        n += 1;
        if n.is_multiple_of(progress::CHUNK) {
            progress::add(progress::CHUNK);
            let now = Instant::now();
            hist.saturating_record((now - last).as_nanos() as u64 / progress::CHUNK);
            last = now;
        }
    })?;
    if let Some(k) = bad {
        return Err(wrong_value(&k));
    }
    t.ops = visited;
    t.found = visited;
    Ok(t)
}

/// Random seeks, each followed by `seek_nexts` entries. Never inlined, so
/// that callgrind can collect exactly this loop
/// (`--toggle-collect='*workload::seek_random'`, without a trailing `*`,
/// which would also match the entry callback and toggle collection off in
/// it); with one caller it was inlined into the thread's closure.
#[inline(never)]
fn seek_random(ctx: &Ctx<'_>, s: &mut dyn Session, seed: u64, limit: Limit<'_>) -> Result<Tally> {
    let mut t = Tally::new();
    let mut rng = Rng::new(seed);
    let mut key = vec![0u8; ctx.cfg.key_size];
    let want = ctx.cfg.seek_nexts + 1;
    while !limit.done(t.ops) {
        keys::key_into(ctx.cfg.keys, rng.below(ctx.cfg.num), &mut key);
        let mut first = true;
        let mut exact = false;
        let mut bad: Option<Vec<u8>> = None;
        let t0 = Instant::now();
        s.scan(Some(&key), false, want, &mut |k, v| {
            if first {
                exact = k == key.as_slice();
                first = false;
            }
            if bad.is_none() && !ctx.values.matches(k, v) {
                bad = Some(k.to_vec());
            }
        })?;
        t.hist.saturating_record(t0.elapsed().as_nanos() as u64);
        if let Some(k) = bad {
            return Err(wrong_value(&k));
        }
        if exact {
            t.found += 1;
        } else {
            t.missing += 1;
        }
        t.ops += 1;
        if t.ops.is_multiple_of(progress::CHUNK) {
            progress::add(progress::CHUNK);
        }
    }
    Ok(t)
}

/// What a write loop does to each key.
#[derive(Clone, Copy, PartialEq, Eq)]
enum WriteKind {
    /// Puts generation 0 (a fill).
    Insert,
    /// Puts another generation than before.
    Overwrite,
    Delete,
}

/// Which keys a write loop touches.
enum Order {
    Sequential,
    Permuted(Permutation),
    Uniform(Rng),
    /// Random `key_size`-byte keys (UUID-like), as in seed 003.
    RandomBytes(Rng),
}

/// A write loop: which keys, how many per transaction, until when.
struct WritePlan<'a> {
    order: Order,
    batch: u64,
    limit: Limit<'a>,
    write: WriteKind,
    /// Keys ascend past every stored key (sequential fills).
    append: bool,
    /// Operations per second, at most.
    rate: Option<u64>,
}

/// Writes until `plan.limit`, `plan.batch` operations per transaction.
fn write_loop(ctx: &Ctx<'_>, s: &mut dyn Session, plan: WritePlan<'_>) -> Result<Tally> {
    let WritePlan {
        mut order,
        batch,
        limit,
        write,
        append,
        rate,
    } = plan;
    let delete = write == WriteKind::Delete;
    let ks = ctx.cfg.key_size;
    let batch = batch.max(1);
    let mut t = Tally::new();
    let mut keybuf = vec![0u8; ks * batch as usize];
    // The operations' vector, kept across commits: a `malloc` and `free`
    // per commit were most of a single-put run's allocations.
    let mut spare: Vec<Op<'static>> = Vec::with_capacity(batch as usize);
    let mut next = 0u64;
    let mut generation = 0u64;
    let start = Instant::now();
    // A writer stopped by its readers still commits at least once.
    while (limit.stop.is_some() && t.commits == 0) || !limit.done(t.ops) {
        let n = if limit.deadline.is_some() || limit.stop.is_some() {
            batch
        } else {
            batch.min(limit.count - t.ops)
        };
        for slot in keybuf.chunks_mut(ks).take(n as usize) {
            match &mut order {
                Order::Sequential => keys::key_into(ctx.cfg.keys, next, slot),
                Order::Permuted(p) => keys::key_into(ctx.cfg.keys, p.get(next), slot),
                Order::Uniform(rng) => keys::key_into(ctx.cfg.keys, rng.below(ctx.cfg.num), slot),
                Order::RandomBytes(rng) => rng.fill(slot),
            }
            next += 1;
        }
        let mut ops = recycle(std::mem::take(&mut spare));
        ops.extend(keybuf.chunks(ks).take(n as usize).map(|k| match write {
            WriteKind::Delete => Op::Delete(k),
            WriteKind::Insert => Op::Put(k, ctx.values.for_key(k)),
            WriteKind::Overwrite => {
                generation = generation % keys::GENERATIONS + 1;
                Op::Put(k, ctx.values.generation(k, generation))
            }
        }));
        let t0 = Instant::now();
        s.write(&ops, append)?;
        t.hist.saturating_record(t0.elapsed().as_nanos() as u64);
        spare = recycle(ops);
        t.commits += 1;
        t.ops += n;
        t.user_bytes += n * (ks + if delete { 0 } else { ctx.values.value_size() }) as u64;
        progress::add(n);
        if let Some(r) = rate {
            let due = start + Duration::from_secs_f64(t.ops as f64 / r.max(1) as f64);
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
        }
    }
    Ok(t)
}

/// Empties `ops` and gives its allocation back for operations that borrow
/// other keys (the collect reuses a vector in place when the element types
/// have one layout, as these do).
fn recycle<'b>(mut ops: Vec<Op<'_>>) -> Vec<Op<'b>> {
    ops.clear();
    ops.into_iter().map(|_| unreachable!("emptied")).collect()
}

/// How many keys longreader reads through its snapshot, before and after
/// the commits.
const PROBES: usize = 16;

/// longreader: takes a snapshot, runs `txns` commits of `batch` random
/// overwrites while holding it, measures the database's size, checks that
/// the snapshot still reads what it read at the start, then releases it.
/// Returns the write tally (its `found` counts the probes that passed) and
/// the size measured while the snapshot was held.
fn long_reader(
    ctx: &Ctx<'_>,
    engine: &dyn Engine,
    engine_name: &str,
    seed: u64,
    batch: u64,
) -> Result<(Tally, u64)> {
    let cfg = ctx.cfg;
    let mut s = engine.session()?;
    if !s.hold_snapshot()? {
        return Err(Box::new(Unsupported(format!(
            "{engine_name} cannot hold a read snapshot in this benchmark (longreader unsupported)"
        ))));
    }
    // The probes are the first keys the writer overwrites (it draws from
    // the same generator), so each one is rewritten under the snapshot
    // (with another value, unless an earlier run left that very one).
    let mut rng = Rng::new(seed);
    let probes: Vec<Vec<u8>> = (0..PROBES)
        .map(|_| key_of(cfg, rng.below(cfg.num)))
        .collect();
    let mut seen = Vec::with_capacity(probes.len());
    for k in &probes {
        let mut v = None;
        s.snapshot_get(k, &mut |x| v = Some(x.to_vec()))?;
        match v {
            Some(v) if ctx.values.matches(k, &v) => seen.push(v),
            Some(_) => return Err(wrong_value(k)),
            None => return Err(format!("{engine_name}: the snapshot misses a loaded key").into()),
        }
    }
    let plan = WritePlan {
        order: Order::Uniform(Rng::new(seed)),
        batch,
        limit: Limit {
            count: cfg.txns.saturating_mul(batch),
            deadline: None,
            stop: None,
        },
        write: WriteKind::Overwrite,
        append: false,
        rate: None,
    };
    let mut t = write_loop(ctx, s.as_mut(), plan)?;
    let held_disk = metrics::allocated_bytes(&engine_dir(cfg, engine_name));
    for (k, before) in probes.iter().zip(&seen) {
        let mut now = None;
        s.snapshot_get(k, &mut |x| now = Some(x.to_vec()))?;
        if now.as_ref() != Some(before) {
            return Err(format!(
                "{engine_name}: the held snapshot reads a different value for key {:?} \
                 after the commits",
                String::from_utf8_lossy(k)
            )
            .into());
        }
        t.found += 1;
    }
    s.release_snapshot();
    Ok((t, held_disk))
}

/// The records `deleterange` removes.
fn range_records(cfg: &Config) -> u64 {
    cfg.writes.unwrap_or(cfg.num / 2).min(cfg.num)
}

/// The first record `deleterange` removes: its range is the middle one.
fn range_first(cfg: &Config) -> u64 {
    (cfg.num - range_records(cfg)) / 2
}

/// Key number `index` of `cfg`'s key format.
fn key_of(cfg: &Config, index: u64) -> Vec<u8> {
    let mut k = vec![0u8; cfg.key_size];
    keys::key_into(cfg.keys, index, &mut k);
    k
}

/// `deleterange`: removes the middle records in one transaction, as one
/// key range (checked afterwards, untimed: `check_range_removed`).
fn delete_range(ctx: &Ctx<'_>, s: &mut dyn Session) -> Result<Tally> {
    let cfg = ctx.cfg;
    let (first, count) = (range_first(cfg), range_records(cfg));
    let (start_key, end_key) = (key_of(cfg, first), key_of(cfg, first + count));
    let mut t = Tally::new();
    let start = Instant::now();
    let removed = s.delete_range(&start_key, &end_key)?;
    t.hist.record(start.elapsed().as_nanos().max(1) as u64)?;
    t.ops = count;
    t.commits = 1;
    t.user_bytes = count * cfg.key_size as u64;
    // A range tombstone does not count: its engine is checked by lookups
    // only.
    t.found = removed.unwrap_or(count);
    if t.found != count {
        return Err(format!("deleterange removed {} records, not {count}", t.found).into());
    }
    Ok(t)
}

/// After `deleterange`, outside its timed phase: the records on both sides
/// of the range are there, and the range's own first and last are gone.
fn check_range_removed(cfg: &Config, engine: &dyn Engine) -> Result<()> {
    let (first, count) = (range_first(cfg), range_records(cfg));
    let mut s = engine.session()?;
    let mut present = |index: u64| s.get(&key_of(cfg, index), &mut |_| {});
    let outside = [
        first.checked_sub(1),
        Some(first + count).filter(|&i| i < cfg.num),
    ];
    for index in outside.into_iter().flatten() {
        if !present(index)? {
            return Err(format!("deleterange removed record {index}, outside its range").into());
        }
    }
    if count > 0 {
        for index in [first, first + count - 1] {
            if present(index)? {
                return Err(format!("deleterange left record {index}, inside its range").into());
            }
        }
    }
    Ok(())
}

/// A full forward scan: pages the database in before timed reads (this
/// machine pages out idle memory), and checks the record count.
fn warm(engine: &dyn Engine) -> Result<u64> {
    let mut s = engine.session()?;
    s.scan(None, false, u64::MAX, &mut |_, _| {})
}

fn thread_seed(cfg: &Config, benchmark: &str, thread: usize) -> u64 {
    keys::hash_bytes(benchmark.as_bytes())
        ^ cfg.seed.wrapping_mul(0x1000_0000_01b3)
        ^ (thread as u64 + 1)
}

/// What the timed phase measured.
struct Measured {
    main: Tally,
    writes: Option<Tally>,
    /// Wall time of the timed phase.
    wall: Duration,
    /// Lookups that had to find their key.
    expected_found: u64,
    /// longreader: database size while the snapshot was held.
    held_disk_bytes: Option<u64>,
}

fn run_benchmark(job: &Job, engine: &dyn Engine, values: &Values) -> Result<Measured> {
    let cfg = &job.config;
    let ctx = Ctx { cfg, values };
    let b = job.benchmark.as_str();
    let threads = if uses_threads(b) {
        job.threads.max(1)
    } else {
        1
    };
    let reads = cfg.reads.unwrap_or(cfg.num);
    let deadline = cfg
        .duration
        .map(|d| Instant::now() + Duration::from_secs_f64(d));
    let count_limit = |count: u64| Limit {
        count,
        deadline,
        stop: None,
    };
    let seed = |t: usize| thread_seed(cfg, b, t);
    let batch_default = |d: u64| cfg.batch_size.unwrap_or(d);
    let mut held_disk_bytes = None;
    let t0 = Instant::now();
    let single =
        |order: Order, count: u64, batch: u64, write: WriteKind, append: bool| -> Result<Tally> {
            let mut s = engine.session()?;
            let limit = Limit {
                count,
                deadline: None,
                stop: None,
            };
            let plan = WritePlan {
                order,
                batch,
                limit,
                write,
                append,
                rate: None,
            };
            write_loop(&ctx, s.as_mut(), plan)
        };
    let (main, writes, expected_found) = match b {
        "fillseq" | "fillseqbatch" => {
            let batch = batch_default(if b == "fillseq" { 1 } else { 1000 });
            (
                single(Order::Sequential, cfg.num, batch, WriteKind::Insert, true)?,
                None,
                0,
            )
        }
        "fillrandom" | "fillrandbatch" => {
            let batch = batch_default(if b == "fillrandom" { 1 } else { 1000 });
            let p = Permutation::new(cfg.num, seed(0));
            (
                single(Order::Permuted(p), cfg.num, batch, WriteKind::Insert, false)?,
                None,
                0,
            )
        }
        "fillsync" => {
            let count = (cfg.num / 1000).max(1);
            let p = Permutation::new(cfg.num, seed(0));
            (
                single(Order::Permuted(p), count, 1, WriteKind::Insert, false)?,
                None,
                0,
            )
        }
        "overwrite" => {
            let count = cfg.writes.unwrap_or(cfg.num);
            let order = Order::Uniform(Rng::new(seed(0)));
            (
                single(order, count, batch_default(1), WriteKind::Overwrite, false)?,
                None,
                0,
            )
        }
        "deleterandom" => {
            let count = cfg.writes.unwrap_or(cfg.num).min(cfg.num);
            let p = Permutation::new(cfg.num, seed(0));
            (
                single(
                    Order::Permuted(p),
                    count,
                    batch_default(1),
                    WriteKind::Delete,
                    false,
                )?,
                None,
                0,
            )
        }
        "smalltxn" => {
            let batch = batch_default(100);
            let order = Order::RandomBytes(Rng::new(seed(0)));
            (
                single(order, cfg.txns * batch, batch, WriteKind::Insert, false)?,
                None,
                0,
            )
        }
        "readrandom" | "readmissing" | "seekrandom" | "readseq" | "readreverse" => {
            let mut total = Tally::new();
            let results: Vec<Result<Tally>> = std::thread::scope(|scope| {
                let handles: Vec<_> = (0..threads)
                    .map(|t| {
                        let ctx = &ctx;
                        scope.spawn(move || -> Result<Tally> {
                            let mut s = engine.session()?;
                            let limit = count_limit(reads);
                            match b {
                                "readrandom" => read_random(ctx, s.as_mut(), seed(t), limit, false),
                                "readmissing" => read_random(ctx, s.as_mut(), seed(t), limit, true),
                                "seekrandom" => seek_random(ctx, s.as_mut(), seed(t), limit),
                                _ => read_seq(ctx, s.as_mut(), b == "readreverse", reads),
                            }
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| {
                        h.join()
                            .unwrap_or_else(|_| Err("reader thread panicked".into()))
                    })
                    .collect()
            });
            for r in results {
                total.merge(r?)?;
            }
            let expected = match b {
                "readmissing" => 0,
                "readseq" | "readreverse" => total.ops.min(cfg.num),
                _ => total.ops,
            };
            (total, None, expected)
        }
        "readwhilewriting" => {
            let stop = AtomicBool::new(false);
            let (readers, writer): (Vec<Result<Tally>>, Result<Tally>) =
                std::thread::scope(|scope| {
                    let ctx = &ctx;
                    let stop = &stop;
                    let writer = scope.spawn(move || -> Result<Tally> {
                        let mut s = engine.session()?;
                        let limit = Limit {
                            count: u64::MAX,
                            deadline: None,
                            stop: Some(stop),
                        };
                        let order = Order::Uniform(Rng::new(seed(usize::MAX >> 1)));
                        let batch = cfg.batch_size.unwrap_or(1);
                        let plan = WritePlan {
                            order,
                            batch,
                            limit,
                            write: WriteKind::Overwrite,
                            append: false,
                            rate: cfg.writes_per_second,
                        };
                        write_loop(ctx, s.as_mut(), plan)
                    });
                    let handles: Vec<_> = (0..threads)
                        .map(|t| {
                            scope.spawn(move || -> Result<Tally> {
                                let mut s = engine.session()?;
                                read_random(ctx, s.as_mut(), seed(t), count_limit(reads), false)
                            })
                        })
                        .collect();
                    let readers: Vec<Result<Tally>> = handles
                        .into_iter()
                        .map(|h| {
                            h.join()
                                .unwrap_or_else(|_| Err("reader thread panicked".into()))
                        })
                        .collect();
                    stop.store(true, Ordering::Relaxed);
                    let w = writer
                        .join()
                        .unwrap_or_else(|_| Err("writer thread panicked".into()));
                    (readers, w)
                });
            let mut total = Tally::new();
            for r in readers {
                total.merge(r?)?;
            }
            let expected = total.ops;
            (total, Some(writer?), expected)
        }
        "deleterange" => {
            let mut s = engine.session()?;
            (delete_range(&ctx, s.as_mut())?, None, range_records(cfg))
        }
        "longreader" => {
            let (t, held) = long_reader(&ctx, engine, &job.engine, seed(0), batch_default(10))?;
            held_disk_bytes = Some(held);
            (t, None, PROBES as u64)
        }
        other => return Err(format!("unknown benchmark `{other}`").into()),
    };
    Ok(Measured {
        main,
        writes,
        wall: t0.elapsed(),
        expected_found,
        held_disk_bytes,
    })
}

fn us(hist: &Histogram<u64>, q: f64) -> f64 {
    if hist.is_empty() {
        0.0
    } else {
        hist.value_at_quantile(q) as f64 / 1000.0
    }
}

/// Runs one job in this process: open, (warm), timed phase, close.
pub fn run_child(job: &Job) -> Result<RunResult> {
    let cfg = &job.config;
    let b = job.benchmark.as_str();
    let ecfg = engine_config(cfg, &job.engine, b);
    if kind(b) == Kind::Fill && ecfg.dir.exists() {
        std::fs::remove_dir_all(&ecfg.dir)?;
    }
    let values = Values::new(cfg.seed, cfg.value_size);

    let t_open = Instant::now();
    let engine = crate::engines::open(&job.engine, &ecfg)?;
    let open_s = t_open.elapsed().as_secs_f64();

    let mut warm_s = 0.0;
    if kind(b) != Kind::Fill {
        let t_warm = Instant::now();
        let n = warm(engine.as_ref())?;
        warm_s = t_warm.elapsed().as_secs_f64();
        if n < cfg.num {
            return Err(format!(
                "{}: the database holds {n} records, expected {} (rebuild it: drop --use_existing_db)",
                job.engine, cfg.num
            )
            .into());
        }
    }

    let counters0: BTreeMap<String, u64> = engine.counters().into_iter().collect();
    metrics::reset_peak_rss();
    let u0 = metrics::usage();
    let io0 = metrics::io();
    let total_hint = match b {
        "readrandom" | "readmissing" | "seekrandom" | "readseq" | "readreverse"
        | "readwhilewriting" => cfg.reads.unwrap_or(cfg.num) * job.threads.max(1) as u64,
        "smalltxn" => cfg.txns * cfg.batch_size.unwrap_or(100),
        "longreader" => cfg.txns * cfg.batch_size.unwrap_or(10),
        "fillsync" => (cfg.num / 1000).max(1),
        "overwrite" | "deleterandom" => cfg.writes.unwrap_or(cfg.num),
        "deleterange" => range_records(cfg),
        _ => cfg.num,
    };
    let bar = progress::Bar::start(format!("{} {}", job.engine, b), total_hint);
    let measured = run_benchmark(job, engine.as_ref(), &values);
    drop(bar);
    let measured = measured?;
    let u1 = metrics::usage();
    let (end_rss, peak_rss) = metrics::rss();
    if b == "deleterange" {
        check_range_removed(cfg, engine.as_ref())?;
    }
    let counters1: BTreeMap<String, u64> = engine.counters().into_iter().collect();

    let t_close = Instant::now();
    engine.close()?;
    let close_s = t_close.elapsed().as_secs_f64();
    let io1 = metrics::io();
    let disk_bytes = metrics::allocated_bytes(&ecfg.dir);
    let disk_apparent_bytes = metrics::apparent_bytes(&ecfg.dir);

    let mut engine_counters = BTreeMap::new();
    for (name, v1) in &counters1 {
        let v0 = counters0.get(name).copied().unwrap_or(0);
        engine_counters.insert(name.clone(), v1.saturating_sub(v0));
    }
    let fsyncs = engine_counters.get("syncs").copied();

    let Measured {
        main,
        writes,
        wall,
        expected_found,
        held_disk_bytes,
    } = measured;
    let wall_s = wall.as_secs_f64().max(1e-9);
    let user_s = u1.user_s - u0.user_s;
    let sys_s = u1.sys_s - u0.sys_s;
    let (write_tally, read_tally) = match (&writes, kind(b)) {
        (Some(w), _) => (Some(w), Some(&main)),
        (None, Kind::Fill | Kind::Update) => (Some(&main), None),
        (None, Kind::Read) => (None, Some(&main)),
    };
    let user_bytes = write_tally.map_or(0, |w| w.user_bytes);
    let commits = write_tally.map_or(0, |w| w.commits);
    // An engine that stores bytes through a writable map (ironbark's log)
    // makes no write call for them: `wchar` alone would miss them.
    let bytes_written = io1.wchar.saturating_sub(io0.wchar)
        + engine_counters.get("bytes_mapped").copied().unwrap_or(0);
    let write_calls = io1.syscw.saturating_sub(io0.syscw);
    let per_op_bytes = match b {
        "deleterandom" | "deleterange" | "readmissing" => cfg.key_size as f64,
        _ => (cfg.key_size + cfg.value_size) as f64,
    };
    let ops_per_sec = main.ops as f64 / wall_s;
    let threads_used = if uses_threads(b) {
        job.threads.max(1)
    } else {
        1
    };
    let result = RunResult {
        preset: job.preset.clone(),
        step: job.step.clone(),
        engine: job.engine.clone(),
        benchmark: b.to_string(),
        threads: threads_used,
        allocator: job.allocator.clone(),
        num: cfg.num,
        key_size: cfg.key_size,
        keys: cfg.keys,
        value_size: cfg.value_size,
        batch_size: match write_tally {
            Some(w) if w.commits > 0 => (w.ops + w.commits / 2) / w.commits,
            _ => cfg.batch_size.unwrap_or(1),
        },
        sync: ecfg.sync,
        ops: main.ops,
        found: main.found,
        missing: main.missing,
        expected_found,
        wall_s,
        ops_per_sec,
        mb_per_sec: ops_per_sec * per_op_bytes / 1e6,
        usec_per_op: if main.ops > 0 {
            wall_s * 1e6 * threads_used as f64 / main.ops as f64
        } else {
            0.0
        },
        p50_us: us(&main.hist, 0.50),
        p75_us: us(&main.hist, 0.75),
        p99_us: us(&main.hist, 0.99),
        p999_us: us(&main.hist, 0.999),
        p9999_us: us(&main.hist, 0.9999),
        max_us: if main.hist.is_empty() {
            0.0
        } else {
            main.hist.max() as f64 / 1000.0
        },
        read_ops: read_tally.map_or(0, |r| r.ops),
        read_ops_per_sec: read_tally.map_or(0.0, |r| r.ops as f64 / wall_s),
        write_ops: write_tally.map_or(0, |w| w.ops),
        write_ops_per_sec: write_tally.map_or(0.0, |w| w.ops as f64 / wall_s),
        write_p50_us: write_tally.map_or(0.0, |w| us(&w.hist, 0.5)),
        write_p99_us: write_tally.map_or(0.0, |w| us(&w.hist, 0.99)),
        user_s,
        sys_s,
        cpu_pct: 100.0 * (user_s + sys_s) / wall_s,
        voluntary_cs: u1.voluntary_cs.saturating_sub(u0.voluntary_cs),
        involuntary_cs: u1.involuntary_cs.saturating_sub(u0.involuntary_cs),
        peak_rss_bytes: peak_rss,
        end_rss_bytes: end_rss,
        disk_bytes,
        disk_apparent_bytes,
        held_disk_bytes,
        bytes_written,
        write_calls,
        storage_bytes_written: io1.write_bytes.saturating_sub(io0.write_bytes),
        user_bytes_written: user_bytes,
        write_amp: if user_bytes > 0 {
            bytes_written as f64 / user_bytes as f64
        } else {
            0.0
        },
        commits,
        bytes_per_commit: if commits > 0 {
            bytes_written as f64 / commits as f64
        } else {
            0.0
        },
        write_calls_per_commit: if commits > 0 {
            write_calls as f64 / commits as f64
        } else {
            0.0
        },
        fsyncs,
        open_s,
        warm_s,
        close_s,
        engine_counters,
        unix_time: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        // Set by the parent, which knows the round.
        round: 0,
    };
    Ok(result)
}
