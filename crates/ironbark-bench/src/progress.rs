//! A one-line progress display on stderr, only when stderr is a terminal.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

static DONE: AtomicU64 = AtomicU64::new(0);

/// Workers report progress in chunks of this many operations.
pub const CHUNK: u64 = 1024;

pub fn add(n: u64) {
    DONE.fetch_add(n, Ordering::Relaxed);
}

/// Shows `label`, operations done out of `total` (0 = unknown) and the rate
/// until the returned guard is dropped.
pub struct Bar {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Bar {
    pub fn start(label: String, total: u64) -> Bar {
        DONE.store(0, Ordering::Relaxed);
        let stop = Arc::new(AtomicBool::new(false));
        if !std::io::stderr().is_terminal() {
            return Bar { stop, handle: None };
        }
        let flag = Arc::clone(&stop);
        let handle = std::thread::spawn(move || {
            let t0 = Instant::now();
            while !flag.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(250));
                let done = DONE.load(Ordering::Relaxed);
                let secs = t0.elapsed().as_secs_f64().max(1e-9);
                let pct = if total > 0 {
                    format!("{:5.1}%", 100.0 * done as f64 / total as f64)
                } else {
                    String::new()
                };
                let mut err = std::io::stderr().lock();
                let _ = write!(
                    err,
                    "\r\x1b[2K  {label} {pct} {done} ops {:.0} ops/s {secs:.0}s",
                    done as f64 / secs
                );
                let _ = err.flush();
            }
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
        });
        Bar {
            stop,
            handle: Some(handle),
        }
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
