//! Runs every workload against every engine of this build at a tiny size and
//! checks the JSON lines: every field present, every lookup found its key.

use std::process::Command;

const BENCHMARKS: &[&str] = &[
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
    "readwhilewriting",
    "fillsync",
    "smalltxn",
];

const FIELDS: &[&str] = &[
    "preset",
    "step",
    "engine",
    "benchmark",
    "threads",
    "allocator",
    "num",
    "key_size",
    "value_size",
    "batch_size",
    "sync",
    "ops",
    "found",
    "missing",
    "expected_found",
    "wall_s",
    "ops_per_sec",
    "mb_per_sec",
    "usec_per_op",
    "p50_us",
    "p75_us",
    "p99_us",
    "p999_us",
    "p9999_us",
    "max_us",
    "read_ops",
    "read_ops_per_sec",
    "write_ops",
    "write_ops_per_sec",
    "write_p50_us",
    "write_p99_us",
    "user_s",
    "sys_s",
    "cpu_pct",
    "voluntary_cs",
    "involuntary_cs",
    "peak_rss_bytes",
    "end_rss_bytes",
    "disk_bytes",
    "disk_apparent_bytes",
    "bytes_written",
    "write_calls",
    "storage_bytes_written",
    "user_bytes_written",
    "write_amp",
    "commits",
    "bytes_per_commit",
    "write_calls_per_commit",
    "fsyncs",
    "open_s",
    "warm_s",
    "close_s",
    "engine_counters",
    "unix_time",
];

fn bench_exe() -> &'static str {
    env!("CARGO_BIN_EXE_ironbark-bench")
}

fn built_engines() -> Vec<String> {
    let out = Command::new(bench_exe())
        .arg("list")
        .output()
        .expect("run list");
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("engines in this build: "))
        .expect("engine line");
    line.split(", ").map(String::from).collect()
}

/// Runs `cmd` (the benchmark), asserts it succeeded, and returns its stdout.
fn run_ok(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run ironbark-bench");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "ironbark-bench failed:\n{stderr}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The JSON lines of a results file.
fn json_rows(path: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .expect("json file")
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect()
}

#[test]
fn every_workload_on_every_engine() {
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("results.jsonl");
    let engines = built_engines();
    for e in ["ironbark", "lmdb", "redb", "fjall", "sqlite"] {
        assert!(
            engines.iter().any(|b| b == e),
            "the default build has {e}: {engines:?}"
        );
    }
    let stdout = run_ok(
        Command::new(bench_exe())
            .arg(format!("--benchmarks={}", BENCHMARKS.join(",")))
            .arg("--num=3000")
            .arg("--reads=1000")
            .arg("--writes=300")
            .arg("--txns=5")
            .arg("--seek_nexts=5")
            .arg("--threads=1,2")
            .arg(format!("--db={}", dir.path().join("db").display()))
            .arg(format!("--json={}", json.display())),
    );
    assert!(
        stdout.contains("| engine | ops/sec |"),
        "no table:\n{stdout}"
    );

    let rows = json_rows(&json);
    for engine in &engines {
        for bench in BENCHMARKS {
            let threads: &[u64] = match *bench {
                "readrandom" | "readmissing" | "readseq" | "readreverse" | "seekrandom"
                | "readwhilewriting" => &[1, 2],
                _ => &[1],
            };
            for &t in threads {
                let row = rows
                    .iter()
                    .find(|r| {
                        r["engine"] == engine.as_str()
                            && r["benchmark"] == *bench
                            && r["threads"] == t
                    })
                    .unwrap_or_else(|| panic!("no result for {engine} {bench} threads={t}"));
                let obj = row.as_object().expect("object");
                for f in FIELDS {
                    assert!(obj.contains_key(*f), "{engine} {bench}: missing field {f}");
                }
                let ops = row["ops"].as_u64().unwrap();
                assert!(ops > 0, "{engine} {bench}: no operations");
                assert_eq!(
                    row["found"], row["expected_found"],
                    "{engine} {bench} t={t}: lookups did not find every key"
                );
                if *bench == "readmissing" {
                    assert_eq!(row["found"], 0, "{engine}: readmissing found keys");
                    assert_eq!(row["missing"], row["ops"]);
                }
                if ["readrandom", "readseq", "readreverse", "seekrandom"].contains(bench) {
                    assert_eq!(row["missing"], 0, "{engine} {bench}: keys missing");
                    assert_eq!(row["found"], row["ops"]);
                }
                if *bench == "readseq" || *bench == "readreverse" {
                    assert_eq!(ops, 1000 * t, "{engine} {bench}: scan length");
                }
                if *bench == "readwhilewriting" {
                    assert!(
                        row["write_ops"].as_u64().unwrap() > 0,
                        "{engine}: the writer wrote nothing"
                    );
                }
                assert!(row["ops_per_sec"].as_f64().unwrap() > 0.0);
            }
        }
    }

    // The report: markdown, plus SVG and PNG charts when a font is installed.
    let report_dir = dir.path().join("report");
    let out = Command::new(bench_exe())
        .arg("report")
        .arg(&json)
        .arg("--out")
        .arg(&report_dir)
        .output()
        .expect("run report");
    assert!(
        out.status.success(),
        "report failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let md = std::fs::read_to_string(report_dir.join("report.md")).expect("report.md");
    assert!(md.contains("| engine | ops/sec |"));
    if md.contains("### Charts") {
        assert!(md.contains(".svg)"));
    }
}

/// longreader at a tiny size on every engine of the build: the engines that
/// can hold a snapshot report the commits, a size measured with the snapshot
/// held and one after close, and the snapshot read its values back unchanged;
/// the others are skipped as unsupported without failing the run.
#[test]
fn longreader_holds_a_snapshot_over_the_commits() {
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("results.jsonl");
    let engines = built_engines();
    let stdout = run_ok(
        Command::new(bench_exe())
            .arg("--benchmarks=longreader")
            .arg("--num=500")
            .arg("--txns=40")
            .arg(format!("--db={}", dir.path().join("db").display()))
            .arg(format!("--json={}", json.display())),
    );
    assert!(
        stdout.contains("| held MiB |"),
        "no held-size column:\n{stdout}"
    );

    let rows = json_rows(&json);
    // Every engine but BerkeleyDB holds a snapshot (see shims/bdb.c).
    let holders = [
        "ironbark",
        "lmdb",
        "redb",
        "fjall",
        "sqlite",
        "rocksdb",
        "rocksdb-tuned",
        "leveldb",
        "wiredtiger",
    ];
    for engine in &engines {
        let row = rows
            .iter()
            .find(|r| r["engine"] == engine.as_str() && r["benchmark"] == "longreader");
        let Some(row) = row else {
            assert!(
                !holders.contains(&engine.as_str()),
                "no longreader result for {engine}"
            );
            assert!(
                stdout.contains(&format!("Skipped: {engine} cannot hold a read snapshot")),
                "{engine}: neither a result nor a skip:\n{stdout}"
            );
            continue;
        };
        // The workload's own batch default (10), the given sizes.
        assert_eq!(row["num"], 500, "{engine}");
        assert_eq!(row["batch_size"], 10, "{engine}");
        assert_eq!(row["commits"], 40, "{engine}: commits");
        assert_eq!(row["write_ops"], 400, "{engine}: overwrites");
        assert_eq!(row["ops"], 400, "{engine}: ops");
        assert!(row["ops_per_sec"].as_f64().unwrap() > 0.0, "{engine}");
        // Every probe read through the held snapshot returned its old value.
        assert_eq!(row["expected_found"], 16, "{engine}: probes");
        assert_eq!(row["found"], row["expected_found"], "{engine}: probes");
        let held = row["held_disk_bytes"].as_u64().expect("held size");
        assert!(held > 0, "{engine}: no size while the snapshot was held");
        assert!(row["disk_bytes"].as_u64().unwrap() > 0, "{engine}: no size");
        assert!(
            row["bytes_written"].as_u64().unwrap() > 0,
            "{engine}: nothing written"
        );
    }
    for e in ["ironbark", "lmdb"] {
        assert!(
            rows.iter()
                .any(|r| r["engine"] == e && r["benchmark"] == "longreader"),
            "no longreader result for {e}"
        );
    }
}

/// `--repeat=3`: each engine runs three rounds, the engines taking turns;
/// every round is a JSON line with its number, and the table shows the
/// median round, with every round's rate listed under it.
#[test]
fn repeat_runs_rounds_and_shows_the_median() {
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("results.jsonl");
    let stdout = run_ok(
        Command::new(bench_exe())
            .arg("--engines=ironbark,lmdb")
            .arg("--benchmarks=fillrandbatch")
            .arg("--num=2000")
            .arg("--repeat=3")
            .arg(format!("--db={}", dir.path().join("db").display()))
            .arg(format!("--json={}", json.display())),
    );
    assert!(stdout.contains("Median of 3 rounds"), "{stdout}");

    let rows = json_rows(&json);
    let order: Vec<(String, u64)> = rows
        .iter()
        .map(|r| {
            (
                r["engine"].as_str().unwrap().to_string(),
                r["round"].as_u64().unwrap(),
            )
        })
        .collect();
    let expected: Vec<(String, u64)> = (0..3)
        .flat_map(|round| [("ironbark".to_string(), round), ("lmdb".to_string(), round)])
        .collect();
    assert_eq!(order, expected, "the engines take turns, round by round");

    // The table row of each engine is its median round's rate.
    for engine in ["ironbark", "lmdb"] {
        let mut rates: Vec<f64> = rows
            .iter()
            .filter(|r| r["engine"] == engine)
            .map(|r| r["ops_per_sec"].as_f64().unwrap())
            .collect();
        rates.sort_by(f64::total_cmp);
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&format!("- {engine} fillrandbatch")))
            .unwrap_or_else(|| panic!("no rounds line for {engine}:\n{stdout}"));
        assert_eq!(
            line.matches(", ").count(),
            3,
            "three rounds and the allocator: {line}"
        );
        let row = stdout
            .lines()
            .find(|l| l.starts_with(&format!("| {engine} |")))
            .unwrap_or_else(|| panic!("no table row for {engine}:\n{stdout}"));
        let median = row.split('|').nth(2).unwrap().trim().to_string();
        assert!(
            line.ends_with(&format!("median {median}")),
            "row {row} against rounds {line} (sorted {rates:?})"
        );
        let rows_shown = stdout
            .lines()
            .filter(|l| l.starts_with(&format!("| {engine} |")))
            .count();
        assert_eq!(rows_shown, 1, "one row per engine, not one per round");
    }

    // The report of those JSON lines shows the medians too.
    let report_dir = dir.path().join("report");
    run_ok(
        Command::new(bench_exe())
            .arg("report")
            .arg(&json)
            .arg("--out")
            .arg(&report_dir),
    );
    let md = std::fs::read_to_string(report_dir.join("report.md")).expect("report.md");
    assert!(md.contains("median round"), "{md}");
    let ironbark_rows = md.lines().filter(|l| l.starts_with("| ironbark |")).count();
    assert_eq!(ironbark_rows, 1, "{md}");
}

/// The warm-up before the first timed step: an untimed load of twice
/// `--num` records by the first engine, in a directory of its own that is
/// gone afterwards, with no result line; `--warmup=0` skips it.
#[test]
fn the_warm_up_is_untimed_and_leaves_nothing_behind() {
    for (flag, warms) in [(None, true), (Some("--warmup=0"), false)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let json = dir.path().join("results.jsonl");
        let db = dir.path().join("db");
        let mut cmd = Command::new(bench_exe());
        cmd.arg("--engines=lmdb,ironbark")
            .arg("--benchmarks=fillrandbatch")
            .arg("--num=1500")
            .arg(format!("--db={}", db.display()))
            .arg(format!("--json={}", json.display()));
        if let Some(flag) = flag {
            cmd.arg(flag);
        }
        let out = cmd.output().expect("run ironbark-bench");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "ironbark-bench failed:\n{stderr}");
        assert_eq!(
            stderr.contains("warm-up: lmdb loaded 3000 records, untimed"),
            warms,
            "{stderr}"
        );
        assert!(
            !db.join(".warmup").exists(),
            "the warm-up's directory is deleted"
        );
        let engines: Vec<String> = json_rows(&json)
            .iter()
            .map(|r| r["engine"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(engines, ["lmdb", "ironbark"], "one line per timed step");
    }
}
