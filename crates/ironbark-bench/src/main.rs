//! ironbark-bench: the seeds' benchmarks, run against ironbark and its peers.
//!
//! `cargo run --release -p ironbark-bench` runs the `quick` preset and prints
//! markdown tables; see `--help` and docs/benchmarks.md.

mod config;
mod engine;
mod engines;
mod keys;
mod metrics;
mod presets;
mod progress;
mod report;
mod result;
mod runner;
mod tables;
mod workload;

use std::process::ExitCode;

fn list() {
    println!("engines in this build: {}", engines::available().join(", "));
    println!("benchmarks: {}", config::BENCHMARKS.join(", "));
    println!("presets:");
    for p in presets::PRESETS {
        println!("  {:<10} {}", p.name, p.about);
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let outcome = match args.first().map(String::as_str) {
        Some(runner::CHILD_SUBCOMMAND) => match args.get(1) {
            Some(job) => runner::child_main(job),
            None => Err("missing job".into()),
        },
        Some("report") => report::main(&args[1..]),
        Some("list") => {
            list();
            Ok(())
        }
        Some("help" | "--help" | "-h") => {
            print!("{}", config::HELP);
            Ok(())
        }
        _ => runner::run(&args).map(|_| ()),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ironbark-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
