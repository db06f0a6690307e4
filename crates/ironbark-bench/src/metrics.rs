//! Process measurements: CPU and context switches (getrusage), I/O
//! (/proc/self/io), memory (/proc/self/status) and size on disk.

use std::path::Path;

#[derive(Clone, Copy, Debug, Default)]
pub struct Usage {
    pub user_s: f64,
    pub sys_s: f64,
    pub voluntary_cs: u64,
    pub involuntary_cs: u64,
}

pub fn usage() -> Usage {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a complete `rusage` into the pointer it is
    // given; the zeroed buffer is valid for that and read only after success.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr()) };
    if rc != 0 {
        return Usage::default();
    }
    // SAFETY: getrusage returned 0, so the struct is initialized.
    let ru = unsafe { ru.assume_init() };
    let secs = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    Usage {
        user_s: secs(ru.ru_utime),
        sys_s: secs(ru.ru_stime),
        voluntary_cs: ru.ru_nvcsw as u64,
        involuntary_cs: ru.ru_nivcsw as u64,
    }
}

/// Counters of /proc/self/io.
#[derive(Clone, Copy, Debug, Default)]
pub struct Io {
    /// Bytes passed to write-like system calls.
    pub wchar: u64,
    /// Number of write-like system calls.
    pub syscw: u64,
    /// Bytes this process caused to be sent to the storage layer.
    pub write_bytes: u64,
    pub rchar: u64,
    pub read_bytes: u64,
}

pub fn io() -> Io {
    let mut out = Io::default();
    let Ok(text) = std::fs::read_to_string("/proc/self/io") else {
        return out;
    };
    for line in text.lines() {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let v: u64 = value.trim().parse().unwrap_or(0);
        match name {
            "wchar" => out.wchar = v,
            "syscw" => out.syscw = v,
            "write_bytes" => out.write_bytes = v,
            "rchar" => out.rchar = v,
            "read_bytes" => out.read_bytes = v,
            _ => {}
        }
    }
    out
}

/// (current RSS, peak RSS) in bytes, from /proc/self/status.
pub fn rss() -> (u64, u64) {
    let Ok(text) = std::fs::read_to_string("/proc/self/status") else {
        return (0, 0);
    };
    let field = |name: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|kb| kb.parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Resets the peak RSS to the current RSS (Linux >= 4.0), so the peak of a
/// timed phase excludes setup.
pub fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// Allocated bytes (st_blocks * 512) of every file under `path`.
pub fn allocated_bytes(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    if meta.is_dir() {
        let Ok(entries) = std::fs::read_dir(path) else {
            return 0;
        };
        entries
            .filter_map(|e| e.ok())
            .map(|e| allocated_bytes(&e.path()))
            .sum()
    } else {
        meta.blocks() * 512
    }
}

/// Apparent size (st_size) of every file under `path`.
pub fn apparent_bytes(path: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    if meta.is_dir() {
        let Ok(entries) = std::fs::read_dir(path) else {
            return 0;
        };
        entries
            .filter_map(|e| e.ok())
            .map(|e| apparent_bytes(&e.path()))
            .sum()
    } else {
        meta.len()
    }
}
