//! `ironbark-bench report RESULTS.jsonl --out DIR`: a markdown report with
//! the seeds' charts as SVG and PNG: read rate against reader threads, write
//! rates, latency percentiles and bytes written per commit, after a summary
//! table per preset step (engines side by side, ironbark's ratios).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use plotters::prelude::*;

use crate::engine::Result;
use crate::result::RunResult;
use crate::tables;

pub fn read_results(path: &Path) -> Result<Vec<RunResult>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let r: RunResult =
            serde_json::from_str(line).map_err(|e| format!("{}:{}: {e}", path.display(), i + 1))?;
        out.push(r);
    }
    Ok(out)
}

/// Registers a system sans-serif font for text in charts; false when none
/// is installed (Debian: fonts-dejavu-core).
fn register_font() -> bool {
    let candidates = [
        "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/TTF/DejaVuSans.ttf",
        "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    ];
    for c in candidates {
        if let Ok(bytes) = std::fs::read(c) {
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                return true;
            }
        }
    }
    false
}

const COLORS: &[RGBColor] = &[
    RGBColor(0x1b, 0x5e, 0x20), // ironbark first: dark green
    RGBColor(0x15, 0x65, 0xc0),
    RGBColor(0xc6, 0x28, 0x28),
    RGBColor(0xef, 0x6c, 0x00),
    RGBColor(0x6a, 0x1b, 0x9a),
    RGBColor(0x00, 0x83, 0x8f),
    RGBColor(0x5d, 0x40, 0x37),
    RGBColor(0xad, 0x14, 0x57),
    RGBColor(0x45, 0x5a, 0x64),
    RGBColor(0x9e, 0x9d, 0x24),
];

fn color(i: usize) -> RGBColor {
    COLORS[i % COLORS.len()]
}

type Series = Vec<(String, Vec<(f64, f64)>)>;

enum Chart {
    /// One bar per label.
    Bars {
        labels: Vec<String>,
        values: Vec<f64>,
    },
    /// Lines over numeric x (x labels given for categorical axes).
    Lines {
        series: Series,
        x_labels: Option<Vec<String>>,
        log_y: bool,
    },
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    y_label: &str,
    x_label: &str,
    chart: &Chart,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    match chart {
        Chart::Bars { labels, values } => {
            let max = values.iter().copied().fold(0.0f64, f64::max).max(1e-9) * 1.15;
            let n = labels.len();
            let mut c = ChartBuilder::on(&root)
                .caption(title, ("sans-serif", 22))
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(70)
                .build_cartesian_2d(0.0..n as f64, 0.0..max)
                .map_err(|e| e.to_string())?;
            let labels_for_axis = labels.clone();
            c.configure_mesh()
                .disable_x_mesh()
                .x_labels(n.max(1) * 2 + 1)
                .x_label_formatter(&|x| {
                    let i = x.floor() as usize;
                    if (x - i as f64 - 0.5).abs() < 0.26 {
                        labels_for_axis.get(i).cloned().unwrap_or_default()
                    } else {
                        String::new()
                    }
                })
                .y_label_formatter(&|y| tables::si(*y))
                .y_desc(y_label)
                .x_desc(x_label)
                .draw()
                .map_err(|e| e.to_string())?;
            c.draw_series(values.iter().enumerate().map(|(i, v)| {
                let x0 = i as f64 + 0.15;
                let x1 = i as f64 + 0.85;
                Rectangle::new([(x0, 0.0), (x1, *v)], color(i).filled())
            }))
            .map_err(|e| e.to_string())?;
            c.draw_series(values.iter().enumerate().map(|(i, v)| {
                Text::new(
                    tables::si(*v),
                    (i as f64 + 0.3, *v + max * 0.02),
                    ("sans-serif", 14),
                )
            }))
            .map_err(|e| e.to_string())?;
        }
        Chart::Lines {
            series,
            x_labels,
            log_y,
        } => {
            let xs = series.iter().flat_map(|(_, p)| p.iter().map(|(x, _)| *x));
            let ys = series.iter().flat_map(|(_, p)| p.iter().map(|(_, y)| *y));
            let (x0, x1) = xs.fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(x), b.max(x)));
            let (y0, y1) = ys.fold((f64::MAX, f64::MIN), |(a, b), y| (a.min(y), b.max(y)));
            let (x0, x1) = if x0 >= x1 {
                (x0 - 1.0, x0 + 1.0)
            } else {
                (x0, x1)
            };
            let pad = (x1 - x0) * 0.05;
            let xr = (x0 - pad)..(x1 + pad);
            let labels_for_axis = x_labels.clone();
            let x_fmt = move |x: &f64| match &labels_for_axis {
                Some(l) => {
                    let i = x.round();
                    if (x - i).abs() < 0.01 && i >= 0.0 {
                        l.get(i as usize).cloned().unwrap_or_default()
                    } else {
                        String::new()
                    }
                }
                None => {
                    if (x - x.round()).abs() < 0.01 {
                        format!("{x:.0}")
                    } else {
                        String::new()
                    }
                }
            };
            let n_x = x_labels.as_ref().map_or(10, |l| l.len() * 4);
            if *log_y {
                let y0 = (y0.max(1e-3)) / 1.5;
                let y1 = (y1.max(y0 * 2.0)) * 1.5;
                let mut c = ChartBuilder::on(&root)
                    .caption(title, ("sans-serif", 22))
                    .margin(12)
                    .x_label_area_size(40)
                    .y_label_area_size(70)
                    .build_cartesian_2d(xr, (y0..y1).log_scale())
                    .map_err(|e| e.to_string())?;
                c.configure_mesh()
                    .x_labels(n_x)
                    .x_label_formatter(&x_fmt)
                    .y_label_formatter(&|y| tables::si(*y))
                    .y_desc(y_label)
                    .x_desc(x_label)
                    .draw()
                    .map_err(|e| e.to_string())?;
                for (i, (name, pts)) in series.iter().enumerate() {
                    let col = color(i);
                    c.draw_series(LineSeries::new(pts.iter().copied(), col.stroke_width(2)))
                        .map_err(|e| e.to_string())?
                        .label(name.clone())
                        .legend(move |(x, y)| {
                            PathElement::new([(x, y), (x + 18, y)], col.stroke_width(2))
                        });
                    c.draw_series(pts.iter().map(|p| Circle::new(*p, 3, col.filled())))
                        .map_err(|e| e.to_string())?;
                }
                c.configure_series_labels()
                    .background_style(WHITE.mix(0.85))
                    .border_style(BLACK)
                    .position(SeriesLabelPosition::UpperLeft)
                    .draw()
                    .map_err(|e| e.to_string())?;
            } else {
                let y1 = y1.max(1e-9) * 1.15;
                let mut c = ChartBuilder::on(&root)
                    .caption(title, ("sans-serif", 22))
                    .margin(12)
                    .x_label_area_size(40)
                    .y_label_area_size(70)
                    .build_cartesian_2d(xr, 0.0..y1)
                    .map_err(|e| e.to_string())?;
                c.configure_mesh()
                    .x_labels(n_x)
                    .x_label_formatter(&x_fmt)
                    .y_label_formatter(&|y| tables::si(*y))
                    .y_desc(y_label)
                    .x_desc(x_label)
                    .draw()
                    .map_err(|e| e.to_string())?;
                for (i, (name, pts)) in series.iter().enumerate() {
                    let col = color(i);
                    c.draw_series(LineSeries::new(pts.iter().copied(), col.stroke_width(2)))
                        .map_err(|e| e.to_string())?
                        .label(name.clone())
                        .legend(move |(x, y)| {
                            PathElement::new([(x, y), (x + 18, y)], col.stroke_width(2))
                        });
                    c.draw_series(pts.iter().map(|p| Circle::new(*p, 3, col.filled())))
                        .map_err(|e| e.to_string())?;
                }
                c.configure_series_labels()
                    .background_style(WHITE.mix(0.85))
                    .border_style(BLACK)
                    .position(SeriesLabelPosition::UpperLeft)
                    .draw()
                    .map_err(|e| e.to_string())?;
            }
        }
    }
    root.present().map_err(|e| e.to_string())?;
    Ok(())
}

/// Writes `<stem>.svg` and `<stem>.png` in `dir`; returns the SVG's file name.
fn render(
    dir: &Path,
    stem: &str,
    title: &str,
    y_label: &str,
    x_label: &str,
    chart: &Chart,
) -> Result<String> {
    let size = (900, 520);
    let svg = dir.join(format!("{stem}.svg"));
    draw(
        SVGBackend::new(&svg, size).into_drawing_area(),
        title,
        y_label,
        x_label,
        chart,
    )?;
    let png = dir.join(format!("{stem}.png"));
    draw(
        BitMapBackend::new(&png, size).into_drawing_area(),
        title,
        y_label,
        x_label,
        chart,
    )?;
    Ok(format!("{stem}.svg"))
}

fn slug(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect::<String>()
        .split('-')
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("-")
}

/// Engines in the order they first appear (ironbark first when present).
fn engine_order(results: &[&RunResult]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for r in results {
        if !names.contains(&r.engine) {
            names.push(r.engine.clone());
        }
    }
    names.sort_by_key(|n| n != "ironbark");
    names
}

/// Builds every chart of `results` into `dir`; returns markdown snippets.
fn charts(results: &[RunResult], dir: &Path) -> Result<Vec<String>> {
    let mut md = Vec::new();
    // 1. Read rate against threads, per (step, benchmark) with several thread counts.
    let mut by_bench: BTreeMap<(String, String, String), Vec<&RunResult>> = BTreeMap::new();
    for r in results {
        by_bench
            .entry((r.step.clone(), r.benchmark.clone(), r.allocator.clone()))
            .or_default()
            .push(r);
    }
    for ((step, bench, alloc), rs) in &by_bench {
        let threads: Vec<usize> = {
            let mut t: Vec<usize> = rs.iter().map(|r| r.threads).collect();
            t.sort_unstable();
            t.dedup();
            t
        };
        let engines = engine_order(rs);
        let suffix = if alloc == "glibc" {
            String::new()
        } else {
            format!(", {alloc}")
        };
        if threads.len() > 1 && rs.iter().any(|r| r.read_ops > 0) {
            let series: Series = engines
                .iter()
                .map(|e| {
                    let mut pts: Vec<(f64, f64)> = rs
                        .iter()
                        .filter(|r| &r.engine == e)
                        .map(|r| (r.threads as f64, r.read_ops_per_sec))
                        .collect();
                    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                    (e.clone(), pts)
                })
                .collect();
            let stem = slug(&format!("{step} {bench} {alloc} reads vs threads"));
            let title = format!("{bench}: reads/s vs reader threads{suffix}");
            let file = render(
                dir,
                &stem,
                &title,
                "reads/s",
                "reader threads",
                &Chart::Lines {
                    series,
                    x_labels: None,
                    log_y: false,
                },
            )?;
            md.push(format!("![{title}]({file})"));
            if bench == "readwhilewriting" {
                let series: Series = engines
                    .iter()
                    .map(|e| {
                        let mut pts: Vec<(f64, f64)> = rs
                            .iter()
                            .filter(|r| &r.engine == e)
                            .map(|r| (r.threads as f64, r.write_ops_per_sec))
                            .collect();
                        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                        (e.clone(), pts)
                    })
                    .collect();
                let stem = slug(&format!("{step} {bench} {alloc} writes vs threads"));
                let title = format!("{bench}: writes/s vs reader threads{suffix}");
                let file = render(
                    dir,
                    &stem,
                    &title,
                    "writes/s",
                    "reader threads",
                    &Chart::Lines {
                        series,
                        x_labels: None,
                        log_y: false,
                    },
                )?;
                md.push(format!("![{title}]({file})"));
            }
        }
        // 2. Rate per engine (bars) and 3. latency percentiles, at each thread count.
        for &t in &threads {
            let at: Vec<&RunResult> = rs.iter().copied().filter(|r| r.threads == t).collect();
            let engines = engine_order(&at);
            let pick = |e: &String| at.iter().copied().find(|r| &r.engine == e);
            let tsuffix = if uses_threads_label(bench) {
                format!(", {t} thread(s)")
            } else {
                String::new()
            };
            let values: Vec<f64> = engines
                .iter()
                .map(|e| pick(e).map_or(0.0, |r| r.ops_per_sec))
                .collect();
            let stem = slug(&format!("{step} {bench} {alloc} t{t} ops"));
            let title = format!("{bench}: ops/s{tsuffix}{suffix}");
            let file = render(
                dir,
                &stem,
                &title,
                "ops/s",
                "",
                &Chart::Bars {
                    labels: engines.clone(),
                    values,
                },
            )?;
            md.push(format!("![{title}]({file})"));
            if bench == "readwhilewriting" {
                let values: Vec<f64> = engines
                    .iter()
                    .map(|e| pick(e).map_or(0.0, |r| r.write_ops_per_sec))
                    .collect();
                let stem = slug(&format!("{step} {bench} {alloc} t{t} writes"));
                let title = format!("{bench}: writes/s{tsuffix}{suffix}");
                let file = render(
                    dir,
                    &stem,
                    &title,
                    "writes/s",
                    "",
                    &Chart::Bars {
                        labels: engines.clone(),
                        values,
                    },
                )?;
                md.push(format!("![{title}]({file})"));
            }
            let pct_labels: Vec<String> = ["p50", "p75", "p99", "p99.9", "p99.99"]
                .iter()
                .map(|s| s.to_string())
                .collect();
            let series: Series = engines
                .iter()
                .filter_map(&pick)
                .map(|r| {
                    let v = [r.p50_us, r.p75_us, r.p99_us, r.p999_us, r.p9999_us];
                    (
                        r.engine.clone(),
                        v.iter()
                            .enumerate()
                            .map(|(i, y)| (i as f64, y.max(1e-3)))
                            .collect(),
                    )
                })
                .collect();
            let stem = slug(&format!("{step} {bench} {alloc} t{t} latency"));
            let title = format!("{bench}: latency percentiles (us){tsuffix}{suffix}");
            let file = render(
                dir,
                &stem,
                &title,
                "usec",
                "percentile",
                &Chart::Lines {
                    series,
                    x_labels: Some(pct_labels),
                    log_y: true,
                },
            )?;
            md.push(format!("![{title}]({file})"));
            if at.iter().any(|r| r.commits > 0)
                && (bench == "smalltxn" || bench == "fillsync" || bench == "overwrite")
            {
                let values: Vec<f64> = engines
                    .iter()
                    .map(|e| pick(e).map_or(0.0, |r| r.bytes_per_commit))
                    .collect();
                let stem = slug(&format!("{step} {bench} {alloc} bytes per commit"));
                let title = format!("{bench}: bytes written per commit{suffix}");
                let file = render(
                    dir,
                    &stem,
                    &title,
                    "bytes",
                    "",
                    &Chart::Bars {
                        labels: engines.clone(),
                        values,
                    },
                )?;
                md.push(format!("![{title}]({file})"));
            }
        }
    }
    Ok(md)
}

fn uses_threads_label(bench: &str) -> bool {
    crate::workload::uses_threads(bench)
}

pub fn main(args: &[String]) -> Result<()> {
    let mut input: Option<PathBuf> = None;
    let mut out_dir = PathBuf::from("bench-results/report");
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if let Some(v) = a.strip_prefix("--out=") {
            out_dir = PathBuf::from(v);
        } else if a == "--out" {
            i += 1;
            out_dir = PathBuf::from(args.get(i).ok_or("--out needs a directory")?);
        } else if input.is_none() && !a.starts_with("--") {
            input = Some(PathBuf::from(a));
        } else {
            return Err(format!("unexpected argument `{a}`").into());
        }
        i += 1;
    }
    let input = input.ok_or("usage: ironbark-bench report RESULTS.jsonl --out DIR")?;
    let runs = read_results(&input)?;
    // Runs of `--repeat` rounds are reported by their median round.
    let (results, rounds) = tables::medians(&runs);
    if results.is_empty() {
        return Err(format!("{}: no results to report", input.display()).into());
    }
    std::fs::create_dir_all(&out_dir)?;
    let mut md = format!(
        "# ironbark-bench report\n\nFrom `{}`: {} runs.\n",
        input.display(),
        runs.len()
    );
    if !rounds.is_empty() {
        md.push_str(&format!(
            "\nRuns repeated in rounds are shown by their median round by throughput; every round:\n\n{rounds}"
        ));
    }
    md.push_str(&tables::summary(&results));
    let steps = tables::steps(&results);
    let fonts = register_font();
    for (preset, step) in &steps {
        let rs: Vec<RunResult> = results
            .iter()
            .filter(|r| &r.preset == preset && &r.step == step)
            .cloned()
            .collect();
        md.push_str(&format!("\n## {preset}: {step}\n"));
        md.push_str(&tables::markdown(&rs));
        if fonts {
            let dir = out_dir.join(slug(&format!("{preset} {step}")));
            std::fs::create_dir_all(&dir)?;
            md.push_str("\n### Charts\n\n");
            for m in charts(&rs, &dir)? {
                let rel = m.replacen(
                    "](",
                    &format!("]({}/", slug(&format!("{preset} {step}"))),
                    1,
                );
                md.push_str(&rel);
                md.push_str("\n\n");
            }
        }
    }
    if !fonts {
        md.push_str("\n(No charts: no TrueType font found; install fonts-dejavu-core.)\n");
    }
    let path = out_dir.join("report.md");
    std::fs::write(&path, md)?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(engine: &str, bench: &str, threads: usize, ops: f64) -> RunResult {
        RunResult {
            preset: "quick".into(),
            step: "core workloads".into(),
            engine: engine.into(),
            benchmark: bench.into(),
            threads,
            allocator: "glibc".into(),
            num: 1000,
            ops_per_sec: ops,
            ..Default::default()
        }
    }

    /// A readwhilewriting run with `reads` and `writes` per second.
    fn rww(engine: &str, threads: usize, reads: f64, writes: f64) -> RunResult {
        let mut r = run(engine, "readwhilewriting", threads, reads);
        r.read_ops_per_sec = reads;
        r.write_ops_per_sec = writes;
        r
    }

    /// The summary row whose first cell is `label`, split into cells.
    fn row(md: &str, label: &str) -> Vec<String> {
        let line = md
            .lines()
            .find(|l| l.starts_with(&format!("| {label} |")))
            .unwrap_or_else(|| panic!("no row `{label}` in\n{md}"));
        line.trim_matches('|')
            .split('|')
            .map(|c| c.trim().to_string())
            .collect()
    }

    #[test]
    fn readwhilewriting_gets_a_table_per_engine_by_reader_threads() {
        let mut rs = Vec::new();
        for (e, t, reads, writes) in [
            ("ironbark", 1, 300_000.0, 1_000.0),
            ("ironbark", 2, 500_000.0, 800.0),
            ("lmdb", 1, 200_000.0, 4_000.0),
            ("redb", 1, 100_000.0, 500.0),
            ("redb", 2, 150_000.0, 400.0),
        ] {
            rs.push(rww(e, t, reads, writes));
        }
        let md = tables::markdown(&rs);
        assert!(md.contains("### ironbark: readwhilewriting by reader threads"));
        assert!(md.contains("### redb: readwhilewriting by reader threads"));
        // One thread count only: no table of its own.
        assert!(!md.contains("### lmdb: readwhilewriting by reader threads"));
        let ours = &md[md.find("### ironbark: readwhilewriting").unwrap()..];
        // Readers 2: 800 writes/s, 500k reads/s, 250k per reader.
        assert_eq!(&row(ours, "2")[..4], ["2", "800", "500k", "250k"]);
        // Nothing of the kind without readwhilewriting.
        let md = tables::markdown(&[run("lmdb", "readrandom", 1, 1.0)]);
        assert!(!md.contains("by reader threads"));
    }

    #[test]
    fn summary_bolds_the_best_and_gives_ratios() {
        let mut rs = vec![
            run("ironbark", "readrandom", 1, 113_000.0),
            run("lmdb", "readrandom", 1, 100_000.0),
            run("redb", "readrandom", 1, 50_000.0),
        ];
        for (e, t, reads, writes) in [
            ("ironbark", 1, 300_000.0, 1_000.0),
            ("ironbark", 2, 500_000.0, 800.0),
            ("lmdb", 1, 200_000.0, 4_000.0),
            ("lmdb", 2, 600_000.0, 3_000.0),
            ("redb", 1, 100_000.0, 500.0),
        ] {
            rs.push(rww(e, t, reads, writes));
        }
        for (e, ops, bytes, calls) in [
            ("ironbark", 50_000.0, 4096.0, 2.0),
            ("lmdb", 150_000.0, 8192.0, 4.0),
            ("redb", 60_000.0, 2048.0, 2.0),
        ] {
            let mut r = run(e, "smalltxn", 1, ops);
            r.commits = 10;
            r.bytes_per_commit = bytes;
            r.write_calls_per_commit = calls;
            rs.push(r);
        }
        // Through the JSONL reader, as `report` reads them.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        let text: Vec<String> = rs
            .iter()
            .map(|r| serde_json::to_string(r).unwrap())
            .collect();
        std::fs::write(&path, text.join("\n")).unwrap();
        let md = tables::summary(&read_results(&path).unwrap());

        assert!(md.contains("### quick: core workloads"), "{md}");
        assert_eq!(
            row(&md, "workload"),
            [
                "workload",
                "ironbark",
                "lmdb",
                "redb",
                "ironbark / lmdb",
                "ironbark / best peer"
            ]
        );
        assert_eq!(
            row(&md, "readrandom"),
            ["readrandom", "**113k**", "100k", "50k", "1.13x", "1.13x"]
        );
        // One thread count only: no `t1`; two: the thread count in the label.
        assert_eq!(
            row(&md, "readwhilewriting t2"),
            [
                "readwhilewriting t2",
                "500k",
                "**600k**",
                "-",
                "0.83x",
                "0.83x"
            ]
        );
        assert_eq!(
            row(&md, "readwhilewriting t1: writes"),
            [
                "readwhilewriting t1: writes",
                "1.0k",
                "**4.0k**",
                "500",
                "0.25x",
                "0.25x"
            ]
        );
        assert_eq!(
            row(&md, "smalltxn"),
            ["smalltxn", "50k", "**150k**", "60k", "0.33x", "0.33x"]
        );
        // Per-commit costs: the lowest is best.
        assert_eq!(
            row(&md, "smalltxn: KiB written per commit"),
            [
                "smalltxn: KiB written per commit",
                "4.0",
                "8.0",
                "**2.0**",
                "0.50x",
                "2.00x"
            ]
        );
        // A tie for the best: both bold.
        assert_eq!(
            row(&md, "smalltxn: write calls per commit"),
            [
                "smalltxn: write calls per commit",
                "**2.00**",
                "4.00",
                "**2.00**",
                "0.50x",
                "1.00x"
            ]
        );
    }

    #[test]
    fn longreader_shows_the_size_held_and_after_close() {
        let mut rs = Vec::new();
        for (e, held, closed) in [
            ("ironbark", 3u64 << 20, 2u64 << 20),
            ("lmdb", 6 << 20, 6 << 20),
        ] {
            let mut r = run(e, "longreader", 1, 1000.0);
            r.held_disk_bytes = Some(held);
            r.disk_bytes = closed;
            rs.push(r);
        }
        let md = crate::tables::summary(&rs);
        let label = "longreader: MiB on disk, snapshot held";
        assert_eq!(row(&md, label), [label, "**3.0**", "6.0", "0.50x", "0.50x"]);
        let label = "longreader: MiB on disk after close";
        assert_eq!(row(&md, label), [label, "**2.0**", "6.0", "0.33x", "0.33x"]);
        let table = crate::tables::markdown(&rs);
        assert!(table.contains("| disk MiB | held MiB |"), "{table}");
        // A result written before the field existed still reads.
        let mut v: serde_json::Value = serde_json::to_value(RunResult::default()).unwrap();
        v.as_object_mut().unwrap().remove("held_disk_bytes");
        let r: RunResult = serde_json::from_value(v).unwrap();
        assert_eq!(r.held_disk_bytes, None);
    }
}
