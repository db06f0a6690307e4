//! The parent process: expands presets into runs, starts one child process
//! per engine x benchmark x thread count x allocator, collects the JSON
//! result lines and prints the tables.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::config::{split_flags, Config};
use crate::engine::Result;
use crate::presets;
use crate::result::{RunResult, Unsupported, RESULT_PREFIX, UNSUPPORTED_PREFIX};
use crate::tables;
use crate::workload::{self, Job, Kind};

pub const CHILD_SUBCOMMAND: &str = "__child";

/// Shared library preloaded for `--malloc` and the Debian package that
/// ships it, or `None` for glibc's own malloc.
fn allocator_library(allocator: &str) -> Option<(&'static str, &'static str)> {
    match allocator {
        "jemalloc" => Some(("libjemalloc.so.2", "libjemalloc2")),
        "tcmalloc" => Some(("libtcmalloc_minimal.so.4", "libtcmalloc-minimal4")),
        _ => None,
    }
}

/// The libraries to put in LD_PRELOAD for `allocator` (Debian's multiarch
/// paths), or why it cannot run.
fn preload(allocator: &str) -> std::result::Result<Vec<PathBuf>, String> {
    let Some((name, package)) = allocator_library(allocator) else {
        return Ok(Vec::new());
    };
    let dirs = [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib64",
        "/usr/lib",
    ];
    match dirs
        .iter()
        .map(|d| Path::new(d).join(name))
        .find(|p| p.exists())
    {
        Some(path) => Ok(vec![path]),
        None => Err(format!(
            "allocator {allocator}: {name} not found in {} (Debian package {package}; \
             scripts/install-peers.sh installs it)",
            dirs.join(", ")
        )),
    }
}

/// Checks, in the child, that the allocator it was started with is loaded.
fn check_allocator_loaded(allocator: &str) -> Result<()> {
    let Some((name, _)) = allocator_library(allocator) else {
        return Ok(());
    };
    let maps = std::fs::read_to_string("/proc/self/maps")?;
    if maps.contains(name) {
        Ok(())
    } else {
        Err(format!("allocator {allocator}: LD_PRELOAD of {name} did not take effect").into())
    }
}

/// Runs one job in a child process of this same executable.
pub fn spawn_child(job: &Job) -> Result<RunResult> {
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(exe);
    cmd.arg(CHILD_SUBCOMMAND)
        .arg(serde_json::to_string(job)?)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let libs = preload(&job.allocator)?;
    if !libs.is_empty() {
        let list: Vec<String> = libs.iter().map(|p| p.display().to_string()).collect();
        cmd.env("LD_PRELOAD", list.join(":"));
    }
    let out = cmd.output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if let Some(why) = stdout
        .lines()
        .find_map(|l| l.strip_prefix(UNSUPPORTED_PREFIX))
    {
        return Err(Box::new(Unsupported(why.to_string())));
    }
    let line = stdout.lines().find_map(|l| l.strip_prefix(RESULT_PREFIX));
    match (out.status.success(), line) {
        (true, Some(json)) => Ok(serde_json::from_str(json)?),
        _ => Err(format!(
            "{} {} (threads {}) failed: {}",
            job.engine, job.benchmark, job.threads, out.status
        )
        .into()),
    }
}

/// Entry point of the hidden child subcommand: prints one result line.
pub fn child_main(job_json: &str) -> Result<()> {
    let job: Job = serde_json::from_str(job_json)?;
    check_allocator_loaded(&job.allocator)?;
    let result = match workload::run_child(&job) {
        Ok(r) => r,
        Err(e) => match e.downcast_ref::<Unsupported>() {
            Some(why) => {
                println!("{UNSUPPORTED_PREFIX}{why}");
                return Ok(());
            }
            None => return Err(e),
        },
    };
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{RESULT_PREFIX}{}", serde_json::to_string(&result)?)?;
    stdout.flush()?;
    Ok(())
}

/// Most records the warm-up loads: it loads twice the run's `--num`, up
/// to this.
const WARMUP_RECORDS: u64 = 1_000_000;

/// An untimed load before the first timed step, into a directory of its
/// own that is deleted after it. On a machine that sat idle for a few
/// seconds (a VM whose host reclaims idle memory and CPU, as ours does)
/// the next step ran 35-45% slower than the same step run right after
/// another (200k-record loads: about 4M puts/s against 6.5-7.6M, LMDB and
/// ironbark alike). Without it the first step of every run, which is the
/// first engine's, would measure the machine waking up. A load of as many
/// records as the step's left it 3-8% behind the steps after it; twice as
/// many, level with them. A failure here
/// only means no warm-up: the timed steps report their own.
fn warm_up(plan: &Plan) {
    let Some(engine) = plan.config.engines.first() else {
        return;
    };
    let mut config = plan.config.clone();
    config.db = config.db.join(".warmup");
    config.num = config.num.saturating_mul(2).min(WARMUP_RECORDS);
    config.keys = crate::keys::KeyFormat::Decimal;
    config.batch_size = Some(1000);
    config.sync = false;
    config.use_existing_db = false;
    let dir = config.db.clone();
    let job = Job {
        config,
        engine: engine.clone(),
        benchmark: "fillseqbatch".into(),
        threads: 1,
        allocator: "glibc".into(),
        preset: plan.preset.clone(),
        step: "warm-up".into(),
    };
    match spawn_child(&job) {
        Ok(_) => eprintln!(
            "  warm-up: {} loaded {} records, untimed (--warmup=0 skips it)",
            job.engine, job.config.num
        ),
        Err(e) => eprintln!("  warm-up skipped: {e}"),
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// One step of a preset, resolved against the user's flags.
struct Plan {
    preset: String,
    title: String,
    note: String,
    config: Config,
    command: String,
}

fn plans(
    user_flags: &[(String, String)],
    raw_args: &[String],
) -> Result<(Vec<Plan>, Option<PathBuf>)> {
    let mut base = Config::default();
    for (n, v) in user_flags {
        if n == "preset" || n == "json" {
            base.apply(n, v)?;
        }
    }
    let explicit_benchmarks = user_flags.iter().any(|(n, _)| n == "benchmarks");
    let preset_name = match (&base.preset, explicit_benchmarks) {
        (Some(p), _) => Some(p.clone()),
        (None, true) => None,
        (None, false) => Some("quick".to_string()),
    };
    let user_cmd = if raw_args.is_empty() {
        String::new()
    } else {
        format!(" {}", raw_args.join(" "))
    };
    let mut out = Vec::new();
    match preset_name {
        Some(name) => {
            let preset = presets::find(&name).ok_or_else(|| {
                let names: Vec<&str> = presets::PRESETS.iter().map(|p| p.name).collect();
                format!("unknown preset `{name}` (known: {})", names.join(", "))
            })?;
            for step in preset.steps {
                let mut config = Config::default();
                let owned: Vec<String> = step.flags.iter().map(|s| s.to_string()).collect();
                for (n, v) in split_flags(&owned)?.iter().chain(user_flags) {
                    config.apply(n, v)?;
                }
                config.validate()?;
                out.push(Plan {
                    preset: name.clone(),
                    title: step.title.to_string(),
                    note: step.note.to_string(),
                    config,
                    command: format!("cargo run --release -p ironbark-bench --{user_cmd}"),
                });
            }
        }
        None => {
            let mut config = Config::default();
            for (n, v) in user_flags {
                config.apply(n, v)?;
            }
            config.validate()?;
            out.push(Plan {
                preset: "custom".into(),
                title: "custom run".into(),
                note: String::new(),
                config,
                command: format!("cargo run --release -p ironbark-bench --{user_cmd}"),
            });
        }
    }
    Ok((out, base.json))
}

fn default_json_path(preset: &str) -> PathBuf {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    PathBuf::from("bench-results").join(format!("{preset}-{secs}.jsonl"))
}

/// Runs the benchmarks the flags describe; returns the results.
pub fn run(raw_args: &[String]) -> Result<Vec<RunResult>> {
    let user_flags = split_flags(raw_args)?;
    let (plans, json_path) = plans(&user_flags, raw_args)?;
    let json_path = json_path.unwrap_or_else(|| default_json_path(&plans[0].preset));
    if let Some(parent) = json_path.parent() {
        if !parent.as_os_str().is_empty() {
            std::fs::create_dir_all(parent)?;
        }
    }
    let mut json = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&json_path)?;
    eprintln!("ironbark-bench: results go to {}", json_path.display());

    let mut all = Vec::new();
    let mut failures = Vec::new();
    // Number of records each engine's database holds intact, when known.
    let mut full: HashMap<String, Option<u64>> = HashMap::new();
    let use_existing = plans.iter().any(|p| p.config.use_existing_db);
    let first = &plans[0];
    println!("# ironbark-bench: preset `{}`\n", first.preset);
    println!("Command: `{}`\n", first.command);
    println!("Engines: {}\n", first.config.engines.join(", "));
    if first.config.warmup {
        warm_up(first);
    }
    for plan in &plans {
        let cfg = &plan.config;
        let mut step_results = Vec::new();
        // An allocator whose library is missing is skipped with its reason,
        // not counted as a failed run.
        let mut allocators = Vec::new();
        let mut skipped = Vec::new();
        for a in &cfg.malloc {
            match preload(a) {
                Ok(_) => allocators.push(a.clone()),
                Err(why) => {
                    eprintln!("ironbark-bench: skipping {why}");
                    skipped.push(why);
                }
            }
        }
        // Rounds of `--repeat`: the engines take turns within each, so that
        // a slow spell of the machine falls on every engine alike.
        for round in 0..cfg.repeat {
            for engine in &cfg.engines {
                let state = full.entry(engine.clone()).or_insert(if use_existing {
                    Some(cfg.num)
                } else {
                    None
                });
                for bench in &cfg.benchmarks {
                    // Flags the workload has its own defaults for (longreader).
                    let cfg = &cfg.for_benchmark(bench);
                    let threads: Vec<usize> = if workload::uses_threads(bench) {
                        cfg.threads.clone()
                    } else {
                        vec![1]
                    };
                    for &t in &threads {
                        for allocator in &allocators {
                            if workload::kind(bench) != Kind::Fill && *state != Some(cfg.num) {
                                let prep = Job {
                                    config: cfg.clone(),
                                    engine: engine.clone(),
                                    benchmark: "fillseqbatch".into(),
                                    threads: 1,
                                    allocator: "glibc".into(),
                                    preset: plan.preset.clone(),
                                    step: "prep".into(),
                                };
                                let mut prep_cfg = prep.config.clone();
                                prep_cfg.batch_size = Some(1000);
                                prep_cfg.sync = false;
                                let prep = Job {
                                    config: prep_cfg,
                                    ..prep
                                };
                                eprintln!("  {engine}: loading {} records for {bench}", cfg.num);
                                if let Err(e) = spawn_child(&prep) {
                                    // The run that needed the load cannot run;
                                    // the others go on.
                                    eprintln!("  error: loading for {engine} {bench}: {e}");
                                    failures.push(format!("loading for {engine} {bench}: {e}"));
                                    *state = None;
                                    continue;
                                }
                                *state = Some(cfg.num);
                            }
                            let job = Job {
                                config: cfg.clone(),
                                engine: engine.clone(),
                                benchmark: bench.clone(),
                                threads: t,
                                allocator: allocator.clone(),
                                preset: plan.preset.clone(),
                                step: plan.title.clone(),
                            };
                            match spawn_child(&job) {
                                Ok(mut r) => {
                                    r.round = round;
                                    eprintln!(
                                    "  {:<10} {:<16} t={:<2} {:>10} ops/s {:>9.2} us/op  found {}/{}",
                                    r.engine,
                                    r.benchmark,
                                    r.threads,
                                    tables::si(r.ops_per_sec),
                                    r.usec_per_op,
                                    r.found,
                                    // longreader's lookups are its probes.
                                    if r.benchmark == "longreader" {
                                        r.expected_found
                                    } else {
                                        r.ops
                                    }
                                );
                                    writeln!(json, "{}", serde_json::to_string(&r)?)?;
                                    json.flush()?;
                                    step_results.push(r);
                                    *state = if workload::leaves_full_db(bench) {
                                        Some(cfg.num)
                                    } else {
                                        None
                                    };
                                }
                                Err(e) if e.downcast_ref::<Unsupported>().is_some() => {
                                    // The run failed before changing the
                                    // database: the engine is skipped, not failed.
                                    eprintln!("  skipped: {e}");
                                    skipped.push(e.to_string());
                                }
                                Err(e) => {
                                    eprintln!("  error: {e}");
                                    failures.push(e.to_string());
                                    *state = None;
                                }
                            }
                        }
                    }
                }
            }
        }
        println!("## {}: {}\n", plan.preset, plan.title);
        if !plan.note.is_empty() {
            println!("{}\n", plan.note);
        }
        for why in &skipped {
            println!("Skipped: {why}.\n");
        }
        let (shown, rounds) = tables::medians(&step_results);
        if cfg.repeat > 1 {
            println!(
                "Median of {} rounds by throughput (the engines took turns in each round).\n",
                cfg.repeat
            );
        }
        println!("{}", tables::markdown(&shown));
        if !rounds.is_empty() {
            println!("Every round, ops/s in the order run:\n\n{rounds}");
        }
        all.extend(step_results);
    }
    if !all.is_empty() {
        println!("{}", tables::summary(&tables::medians(&all).0));
    }
    if !use_existing {
        for engine in &first.config.engines {
            let _ = std::fs::remove_dir_all(workload::engine_dir(&first.config, engine));
        }
    }
    eprintln!(
        "ironbark-bench: {} results in {}",
        all.len(),
        json_path.display()
    );
    if !failures.is_empty() {
        return Err(format!("{} runs failed: {}", failures.len(), failures.join("; ")).into());
    }
    Ok(all)
}
