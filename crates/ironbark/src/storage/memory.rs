//! How much memory this process may fill: the machine's physical memory,
//! or its cgroup's limit when that is lower (a container). The engine
//! sizes what it keeps in memory by it: the map is read at random once the
//! file is larger (`map.rs`), and the page arena of logged commits takes at
//! most a share of it (`txn::logged`).
//!
//! Invariant: read once per process; an unknown size is `u64::MAX`, which
//! changes nothing (no file is larger, no bound is lowered).

use std::sync::OnceLock;

/// The memory this process may fill, in bytes: the machine's physical
/// memory, or its cgroup's limit when that is lower, as in a container.
/// `u64::MAX` if neither is known.
pub(crate) fn memory_limit() -> u64 {
    static MEMORY: OnceLock<u64> = OnceLock::new();
    *MEMORY.get_or_init(|| {
        machine_memory()
            .unwrap_or(u64::MAX)
            .min(cgroup_memory_limit().unwrap_or(u64::MAX))
    })
}

/// The machine's physical memory in bytes.
fn machine_memory() -> Option<u64> {
    // SAFETY: sysconf reads system configuration; no memory is touched.
    let (pages, page_size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    match (u64::try_from(pages), u64::try_from(page_size)) {
        (Ok(p), Ok(s)) if p > 0 && s > 0 => Some(p.saturating_mul(s)),
        _ => None,
    }
}

/// This process's cgroup memory limit, if it has one. `/proc/self/cgroup`
/// names the group: `0::/path` under cgroup v2, whose `memory.max` is a
/// number of bytes or `max`; `N:memory:/path` under v1, whose
/// `memory.limit_in_bytes` is a number (near `i64::MAX` when unlimited).
fn cgroup_memory_limit() -> Option<u64> {
    let groups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    limit_of_groups(&groups, |file| std::fs::read_to_string(file).ok())
}

/// [`cgroup_memory_limit`] from the text of `/proc/self/cgroup`, reading
/// the limit files through `read`: the lower of the v1 and v2 limits found,
/// if any (an unreadable or unparsable file, `max` among them, is none).
fn limit_of_groups(groups: &str, read: impl Fn(&str) -> Option<String>) -> Option<u64> {
    let limit_at = |file: String| -> Option<u64> { read(&file)?.trim().parse().ok() };
    let v1 = groups
        .lines()
        .find_map(|l| l.split_once(":memory:").map(|(_, path)| path))
        .and_then(|path| limit_at(format!("/sys/fs/cgroup/memory{path}/memory.limit_in_bytes")));
    let v2 = groups
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .and_then(|path| limit_at(format!("/sys/fs/cgroup{path}/memory.max")));
    match (v1, v2) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_is_the_machine_or_a_lower_cgroup_limit() {
        let machine = machine_memory().expect("Linux reports its memory");
        assert!(machine >= 64 << 20, "{machine} bytes of memory");
        let expected = match cgroup_memory_limit() {
            Some(cgroup) => machine.min(cgroup),
            None => machine,
        };
        assert_eq!(memory_limit(), expected);
    }

    #[test]
    fn cgroup_limits_are_read_for_v1_and_v2_and_max_is_none() {
        /// A reader of the files in `entries` (path, content).
        fn files<'a>(entries: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
            move |file| {
                entries
                    .iter()
                    .find(|(f, _)| *f == file)
                    .map(|(_, v)| v.to_string())
            }
        }
        let v1 = "4:memory:/box\n0::/\n";
        let v1_file = "/sys/fs/cgroup/memory/box/memory.limit_in_bytes";
        assert_eq!(
            limit_of_groups(v1, files(&[(v1_file, "1073741824\n")])),
            Some(1 << 30)
        );
        let v2 = "0::/user.slice/box\n";
        let v2_file = "/sys/fs/cgroup/user.slice/box/memory.max";
        assert_eq!(
            limit_of_groups(v2, files(&[(v2_file, "536870912\n")])),
            Some(1 << 29)
        );
        // Unlimited under v2 is the word `max`; a missing or garbled file
        // is no limit; both versions present: the lower.
        assert_eq!(limit_of_groups(v2, files(&[(v2_file, "max\n")])), None);
        assert_eq!(limit_of_groups(v2, files(&[])), None);
        assert_eq!(limit_of_groups(v1, files(&[(v1_file, "12x")])), None);
        assert_eq!(limit_of_groups("", files(&[])), None);
        let both = "4:memory:/box\n0::/user.slice/box\n";
        assert_eq!(
            limit_of_groups(
                both,
                files(&[(v1_file, "1073741824"), (v2_file, "536870912")])
            ),
            Some(1 << 29)
        );
    }
}
