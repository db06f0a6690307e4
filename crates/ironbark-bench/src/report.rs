//! `ironbark-bench report RESULTS.jsonl --out DIR`: a markdown report.

use std::path::PathBuf;

use crate::engine::Result;
use crate::result::RunResult;
use crate::tables;

pub fn read_results(path: &std::path::Path) -> Result<Vec<RunResult>> {
    let text = std::fs::read_to_string(path)?;
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
        } else if input.is_none() {
            input = Some(PathBuf::from(a));
        } else {
            return Err(format!("unexpected argument `{a}`").into());
        }
        i += 1;
    }
    let input = input.ok_or("usage: ironbark-bench report RESULTS.jsonl --out DIR")?;
    let results = read_results(&input)?;
    std::fs::create_dir_all(&out_dir)?;
    let mut md = format!("# ironbark-bench report\n\nFrom `{}`.\n", input.display());
    md.push_str(&tables::markdown(&results));
    let path = out_dir.join("report.md");
    std::fs::write(&path, md)?;
    eprintln!("wrote {}", path.display());
    Ok(())
}
