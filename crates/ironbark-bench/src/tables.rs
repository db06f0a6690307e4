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
        let key = |x: &RunResult| {
            (
                x.step.clone(),
                x.benchmark.clone(),
                x.threads,
                x.allocator.clone(),
                x.num,
                x.value_size,
                x.sync,
            )
        };
        match out.iter_mut().find(|g| key(g[0]) == key(r)) {
            Some(g) => g.push(r),
            None => out.push(vec![r]),
        }
    }
    out
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
        let txn = first.benchmark == "smalltxn" || first.benchmark == "fillsync";
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
            "written MiB",
            "W-Amp",
        ]);
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
            let found = if r.read_ops > 0 {
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
    s
}
