//! Markdown tables in the seeds' columns.

use std::fmt::Write;

use crate::result::RunResult;

pub fn si(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{:.2}G", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

pub fn mib(bytes: u64) -> String {
    let m = bytes as f64 / (1 << 20) as f64;
    if m >= 100.0 {
        format!("{m:.0}")
    } else {
        format!("{m:.1}")
    }
}

fn us(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 && a > 0.0 {
        format!("{:.2}x", a / b)
    } else {
        "-".into()
    }
}

/// The headline rate of a run (reads for readwhilewriting).
pub fn rate(r: &RunResult) -> f64 {
    r.ops_per_sec
}

/// Groups results of one step by benchmark, thread count and allocator, in
/// the order they ran.
pub fn groups(results: &[RunResult]) -> Vec<Vec<&RunResult>> {
    let mut out: Vec<Vec<&RunResult>> = Vec::new();
    for r in results {
        match out.iter_mut().find(|g| table_key(g[0]) == table_key(r)) {
            Some(g) => g.push(r),
            None => out.push(vec![r]),
        }
    }
    out
}

/// Results of `--repeat` rounds reduced to one run per engine, benchmark,
/// thread count and allocator of a step: the median round by throughput
/// (of an even count, the lower of the middle two), in the order the runs
/// first appeared; and a markdown list of every round's rate for each run
/// that had more than one (empty when none had).
pub fn medians(results: &[RunResult]) -> (Vec<RunResult>, String) {
    let key = |x: &RunResult| (x.preset.clone(), x.engine.clone(), table_key(x));
    let mut rounds: Vec<Vec<&RunResult>> = Vec::new();
    for r in results {
        match rounds.iter_mut().find(|g| key(g[0]) == key(r)) {
            Some(g) => g.push(r),
            None => rounds.push(vec![r]),
        }
    }
    let mut out = Vec::with_capacity(rounds.len());
    let mut list = String::new();
    for mut g in rounds {
        let in_order: Vec<String> = g.iter().map(|r| si(rate(r))).collect();
        g.sort_by(|a, b| rate(a).total_cmp(&rate(b)));
        let median = g[(g.len() - 1) / 2];
        if g.len() > 1 {
            let _ = writeln!(
                list,
                "- {} {} (t={}, {}): rounds {}; median {}",
                median.engine,
                median.benchmark,
                median.threads,
                median.allocator,
                in_order.join(", "),
                si(rate(median))
            );
        }
        out.push(median.clone());
    }
    (out, list)
}

/// What the runs of one table share: step, benchmark, thread count,
/// allocator and the data's shape.
type TableKey = (String, String, usize, String, u64, usize, bool);

fn table_key(x: &RunResult) -> TableKey {
    (
        x.step.clone(),
        x.benchmark.clone(),
        x.threads,
        x.allocator.clone(),
        x.num,
        x.value_size,
        x.sync,
    )
}

/// One table per group; rows are engines.
pub fn markdown(results: &[RunResult]) -> String {
    let mut s = String::new();
    for g in groups(results) {
        let first = g[0];
        let _ = writeln!(
            s,
            "\n### {} — N={} ({}-byte keys, {}-byte values), {} thread{}{}{}, batch {}\n",
            first.benchmark,
            si(first.num as f64),
            first.key_size,
            first.value_size,
            first.threads,
            if first.threads == 1 { "" } else { "s" },
            if first.allocator != "glibc" {
                format!(", {}", first.allocator)
            } else {
                String::new()
            },
            if first.sync { ", durable" } else { "" },
            first.batch_size,
        );
        let rww = first.benchmark == "readwhilewriting";
        let long = first.benchmark == "longreader";
        let txn = first.benchmark == "smalltxn" || first.benchmark == "fillsync" || long;
        let mut head = vec![
            "engine", "ops/sec", "vs lmdb", "MB/s", "usec/op", "p50", "p75", "p99", "p99.9",
            "p99.99",
        ];
        if rww {
            head.extend(["reads/s", "writes/s", "write p99"]);
        }
        head.extend([
            "wall s",
            "user s",
            "sys s",
            "CPU %",
            "vol cs",
            "invol cs",
            "peak RSS MiB",
            "end RSS MiB",
            "disk MiB",
        ]);
        if long {
            // After the last commit, the snapshot still held.
            head.push("held MiB");
        }
        head.extend(["written MiB", "W-Amp"]);
        if txn || rww {
            head.extend(["KiB/commit", "writes/commit"]);
        }
        head.extend(["close ms", "found"]);
        let _ = writeln!(s, "| {} |", head.join(" | "));
        let _ = writeln!(s, "|{}", "---|".repeat(head.len()));
        let lmdb = g.iter().find(|r| r.engine == "lmdb").map(|r| rate(r));
        for r in &g {
            let mut row = vec![
                r.engine.clone(),
                si(r.ops_per_sec),
                lmdb.map_or("-".into(), |l| ratio(rate(r), l)),
                format!("{:.1}", r.mb_per_sec),
                us(r.usec_per_op),
                us(r.p50_us),
                us(r.p75_us),
                us(r.p99_us),
                us(r.p999_us),
                us(r.p9999_us),
            ];
            if rww {
                row.extend([
                    si(r.read_ops_per_sec),
                    si(r.write_ops_per_sec),
                    us(r.write_p99_us),
                ]);
            }
            row.extend([
                format!("{:.2}", r.wall_s),
                format!("{:.2}", r.user_s),
                format!("{:.2}", r.sys_s),
                format!("{:.0}", r.cpu_pct),
                r.voluntary_cs.to_string(),
                r.involuntary_cs.to_string(),
                mib(r.peak_rss_bytes),
                mib(r.end_rss_bytes),
                mib(r.disk_bytes),
            ]);
            if long {
                row.push(r.held_disk_bytes.map_or("-".into(), mib));
            }
            row.extend([
                mib(r.bytes_written),
                if r.write_amp > 0.0 {
                    format!("{:.1}", r.write_amp)
                } else {
                    "-".into()
                },
            ]);
            if txn || rww {
                row.extend([
                    format!("{:.1}", r.bytes_per_commit / 1024.0),
                    format!("{:.1}", r.write_calls_per_commit),
                ]);
            }
            let found = if long {
                // Values the held snapshot read back unchanged.
                format!("{}/{}", r.found, r.expected_found)
            } else if r.read_ops > 0 {
                format!("{}/{}", r.found, r.read_ops)
            } else {
                "-".into()
            };
            row.extend([format!("{:.1}", r.close_s * 1e3), found]);
            let _ = writeln!(s, "| {} |", row.join(" | "));
        }
        if let Some(ours) = g.iter().find(|r| r.engine == "ironbark") {
            let best_peer = g
                .iter()
                .filter(|r| r.engine != "ironbark")
                .max_by(|a, b| rate(a).total_cmp(&rate(b)));
            if let Some(peer) = best_peer {
                let verdict = if rate(ours) >= rate(peer) {
                    "ironbark wins"
                } else {
                    "the peer wins"
                };
                let _ = writeln!(
                    s,
                    "\nironbark vs the best peer ({}): {} — {}.",
                    peer.engine,
                    ratio(rate(ours), rate(peer)),
                    verdict
                );
            }
        }
    }
    s.push_str(&per_engine_readwhilewriting(results));
    s
}

/// Seed 000's layout of readwhilewriting: one table per engine (and
/// allocator), one row per reader-thread count, with the writer's and the
/// readers' rates and the process's costs. Empty unless some engine ran
/// readwhilewriting with more than one thread count.
pub fn per_engine_readwhilewriting(results: &[RunResult]) -> String {
    let rww: Vec<&RunResult> = results
        .iter()
        .filter(|r| r.benchmark == "readwhilewriting")
        .collect();
    let mut keys: Vec<(&str, &str)> = Vec::new();
    for r in &rww {
        let k = (r.engine.as_str(), r.allocator.as_str());
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let mut s = String::new();
    for (engine, allocator) in keys {
        let rows: Vec<&&RunResult> = rww
            .iter()
            .filter(|r| r.engine == engine && r.allocator == allocator)
            .collect();
        if rows.len() < 2 {
            continue;
        }
        let alloc = if allocator == "glibc" {
            String::new()
        } else {
            format!(", {allocator}")
        };
        let _ = writeln!(
            s,
            "\n### {engine}{alloc}: readwhilewriting by reader threads\n"
        );
        let _ = writeln!(
            s,
            "| readers | writes/s | reads/s | reads/s per reader | read p99 us | wall s | user s | sys s | CPU % | DB MiB | peak RSS MiB | vol cs | invol cs |"
        );
        let _ = writeln!(s, "|{}", "---|".repeat(13));
        for r in rows {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {:.2} | {:.2} | {:.2} | {:.0} | {} | {} | {} | {} |",
                r.threads,
                si(r.write_ops_per_sec),
                si(r.read_ops_per_sec),
                si(r.read_ops_per_sec / r.threads.max(1) as f64),
                us(r.p99_us),
                r.wall_s,
                r.user_s,
                r.sys_s,
                r.cpu_pct,
                mib(r.disk_bytes),
                mib(r.peak_rss_bytes),
                r.voluntary_cs,
                r.involuntary_cs,
            );
        }
    }
    s
}

/// The (preset, step) pairs of `results`, in the order they ran.
pub fn steps(results: &[RunResult]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for r in results {
        let k = (r.preset.clone(), r.step.clone());
        if !out.contains(&k) {
            out.push(k);
        }
    }
    out
}

/// A summary row's label: the benchmark, plus whatever tells its group apart
/// from the other groups of the same benchmark (threads, allocator, size,
/// durability), e.g. `readwhilewriting t2`.
fn summary_label(g: &[&RunResult], all: &[Vec<&RunResult>]) -> String {
    let first = g[0];
    let same: Vec<&RunResult> = all
        .iter()
        .map(|x| x[0])
        .filter(|x| x.benchmark == first.benchmark)
        .collect();
    let varies = |f: &dyn Fn(&RunResult) -> String| same.iter().any(|x| f(x) != f(first));
    let mut label = first.benchmark.clone();
    if varies(&|x| x.threads.to_string()) {
        label.push_str(&format!(" t{}", first.threads));
    }
    if varies(&|x| x.allocator.clone()) {
        label.push_str(&format!(" {}", first.allocator));
    }
    if varies(&|x| x.num.to_string()) {
        label.push_str(&format!(" N={}", si(first.num as f64)));
    }
    if varies(&|x| x.value_size.to_string()) {
        label.push_str(&format!(" {}B values", first.value_size));
    }
    if varies(&|x| x.sync.to_string()) {
        label.push_str(if first.sync { " durable" } else { " no sync" });
    }
    label
}

/// One row of the summary: a value per engine (None when the engine did not
/// run it), the best in bold and ironbark's ratio to lmdb and the best peer.
fn summary_row(
    label: &str,
    engines: &[String],
    value: &dyn Fn(&str) -> Option<f64>,
    lower_is_better: bool,
    fmt: &dyn Fn(f64) -> String,
) -> String {
    let values: Vec<Option<f64>> = engines.iter().map(|e| value(e)).collect();
    let better = |a: f64, b: f64| if lower_is_better { a < b } else { a > b };
    let best =
        values
            .iter()
            .flatten()
            .copied()
            .filter(|v| *v > 0.0)
            .fold(None, |acc: Option<f64>, v| match acc {
                Some(b) if !better(v, b) => Some(b),
                _ => Some(v),
            });
    // Cells that read the same as the best are bold too.
    let best = best.map(fmt);
    let mut cells = vec![label.to_string()];
    for v in &values {
        cells.push(match v {
            Some(v) if Some(fmt(*v)) == best => format!("**{}**", fmt(*v)),
            Some(v) => fmt(*v),
            None => "-".into(),
        });
    }
    let ours = value("ironbark");
    let lmdb = value("lmdb");
    let best_peer = engines
        .iter()
        .filter(|e| *e != "ironbark")
        .filter_map(|e| value(e))
        .filter(|v| *v > 0.0)
        .fold(None, |acc: Option<f64>, v| match acc {
            Some(b) if !better(v, b) => Some(b),
            _ => Some(v),
        });
    let vs = |other: Option<f64>| match (ours, other) {
        (Some(a), Some(b)) => ratio(a, b),
        _ => "-".into(),
    };
    cells.push(vs(lmdb));
    cells.push(vs(best_peer));
    format!("| {} |", cells.join(" | "))
}

/// The headline summary: for each preset step, one table with a row per
/// workload and a column per engine (ops/s; reads/s and writes/s for
/// readwhilewriting; KiB and write calls per commit for smalltxn; the
/// database size with the snapshot held and after close for longreader), the best
/// of each row in bold, then ironbark's ratio to lmdb and to the best peer.
pub fn summary(results: &[RunResult]) -> String {
    let mut s = String::from(
        "\n## Summary\n\nOps/s per engine (reads/s for readwhilewriting), best in bold; \
         per-commit costs: lowest in bold. Ratios are ironbark's value over the other's.\n",
    );
    for (preset, step) in steps(results) {
        let rs: Vec<RunResult> = results
            .iter()
            .filter(|r| r.preset == preset && r.step == step)
            .cloned()
            .collect();
        let mut engines: Vec<String> = Vec::new();
        for r in &rs {
            if !engines.contains(&r.engine) {
                engines.push(r.engine.clone());
            }
        }
        let _ = writeln!(s, "\n### {preset}: {step}\n");
        let mut head = vec!["workload".to_string()];
        head.extend(engines.iter().cloned());
        head.extend(["ironbark / lmdb".into(), "ironbark / best peer".into()]);
        let _ = writeln!(s, "| {} |", head.join(" | "));
        let _ = writeln!(s, "|{}", "---|".repeat(head.len()));
        let gs = groups(&rs);
        for g in &gs {
            let label = summary_label(g, &gs);
            let pick = |e: &str| g.iter().copied().find(|r| r.engine == e);
            let bench = g[0].benchmark.as_str();
            if bench == "readwhilewriting" {
                let reads = |e: &str| pick(e).map(|r| r.read_ops_per_sec);
                let writes = |e: &str| pick(e).map(|r| r.write_ops_per_sec);
                let _ = writeln!(s, "{}", summary_row(&label, &engines, &reads, false, &si));
                let label = format!("{label}: writes");
                let _ = writeln!(s, "{}", summary_row(&label, &engines, &writes, false, &si));
            } else {
                let ops = |e: &str| pick(e).map(rate);
                let _ = writeln!(s, "{}", summary_row(&label, &engines, &ops, false, &si));
            }
            if bench == "smalltxn" {
                let committed = |e: &str| pick(e).filter(|r| r.commits > 0);
                let kib = |e: &str| committed(e).map(|r| r.bytes_per_commit / 1024.0);
                let calls = |e: &str| committed(e).map(|r| r.write_calls_per_commit);
                let one = |v: f64| format!("{v:.1}");
                let two = |v: f64| format!("{v:.2}");
                let l = format!("{label}: KiB written per commit");
                let _ = writeln!(s, "{}", summary_row(&l, &engines, &kib, true, &one));
                // An engine that reports its log's bytes (ironbark's redo
                // log): those apart from the rest (checkpoints, file commits).
                let log = |e: &str| {
                    committed(e).and_then(|r| {
                        let log = *r.engine_counters.get("log_bytes")?;
                        Some(log as f64 / r.commits as f64 / 1024.0)
                    })
                };
                let pages = |e: &str| Some(kib(e)? - log(e)?);
                if engines.iter().any(|e| log(e).is_some()) {
                    let l = format!("{label}: of which log KiB per commit");
                    let _ = writeln!(s, "{}", summary_row(&l, &engines, &log, true, &one));
                    let l = format!("{label}: of which data-file KiB per commit");
                    let _ = writeln!(s, "{}", summary_row(&l, &engines, &pages, true, &one));
                }
                let l = format!("{label}: write calls per commit");
                let _ = writeln!(s, "{}", summary_row(&l, &engines, &calls, true, &two));
            }
            if bench == "longreader" {
                // What the workload is for: how far the file grew behind
                // the reader.
                let to_mib = |b: u64| b as f64 / (1u64 << 20) as f64;
                let held = |e: &str| pick(e).and_then(|r| r.held_disk_bytes).map(to_mib);
                let closed = |e: &str| pick(e).map(|r| to_mib(r.disk_bytes));
                let one = |v: f64| format!("{v:.1}");
                let l = format!("{label}: MiB on disk, snapshot held");
                let _ = writeln!(s, "{}", summary_row(&l, &engines, &held, true, &one));
                let l = format!("{label}: MiB on disk after close");
                let _ = writeln!(s, "{}", summary_row(&l, &engines, &closed, true, &one));
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(engine: &str, ops_per_sec: f64, round: u32) -> RunResult {
        RunResult {
            engine: engine.into(),
            benchmark: "overwrite".into(),
            threads: 1,
            allocator: "glibc".into(),
            ops_per_sec,
            round,
            ..RunResult::default()
        }
    }

    #[test]
    fn medians_pick_the_middle_round_of_each_engine() {
        let runs = [
            run("ironbark", 300.0, 0),
            run("lmdb", 90.0, 0),
            run("ironbark", 100.0, 1),
            run("lmdb", 70.0, 1),
            run("ironbark", 200.0, 2),
            run("lmdb", 80.0, 2),
            run("fjall", 50.0, 0),
        ];
        let (shown, list) = medians(&runs);
        let picked: Vec<(&str, f64, u32)> = shown
            .iter()
            .map(|r| (r.engine.as_str(), r.ops_per_sec, r.round))
            .collect();
        assert_eq!(
            picked,
            [
                ("ironbark", 200.0, 2),
                ("lmdb", 80.0, 2),
                ("fjall", 50.0, 0)
            ]
        );
        // Rounds in the order run; a single run is not listed.
        assert!(
            list.contains("- ironbark overwrite (t=1, glibc): rounds 300, 100, 200; median 200")
        );
        assert!(!list.contains("fjall"));
        // Of an even count, the lower middle.
        let (shown, _) = medians(&runs[..4]);
        assert_eq!(shown[0].ops_per_sec, 100.0);
        assert_eq!(shown[1].ops_per_sec, 70.0);
    }
}
