//! Progress bars on stderr, shown only when stderr is a terminal.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// What a bar counts.
#[derive(Clone, Copy)]
pub enum Unit {
    Entries,
    Bytes,
    /// Nothing to count (the work reports no progress): a spinner and the
    /// time elapsed.
    Nothing,
}

/// A bar of `len` steps (a spinner when `len` is unknown), hidden unless
/// stderr is a terminal and `visible` holds.
pub fn bar(len: Option<u64>, unit: Unit, message: &str, visible: bool) -> ProgressBar {
    if !visible || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let (count, rate) = match unit {
        Unit::Entries => ("{human_pos}/{human_len} entries", ""),
        Unit::Bytes => ("{bytes}/{total_bytes}", " {binary_bytes_per_sec}"),
        Unit::Nothing => ("", ""),
    };
    let pb = match len {
        Some(len) => {
            let template = format!("{{msg}} [{{wide_bar}}] {count}{rate} eta {{eta}}");
            let pb = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
            if let Ok(style) = ProgressStyle::with_template(&template) {
                pb.set_style(style.progress_chars("=> "));
            }
            pb
        }
        None => {
            let count = match unit {
                Unit::Entries => "{human_pos} entries",
                Unit::Bytes => "{binary_bytes}",
                Unit::Nothing => "",
            };
            let template = format!("{{spinner}} {{msg}} {count}{rate} {{elapsed}}");
            let pb = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            if let Ok(style) = ProgressStyle::with_template(&template) {
                pb.set_style(style);
            }
            pb
        }
    };
    pb.set_message(message.to_string());
    pb.enable_steady_tick(Duration::from_millis(200));
    pb
}
