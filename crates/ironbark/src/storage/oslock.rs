//! Byte-range locks that belong to an open file description (Linux "OFD"
//! locks, `F_OFD_SETLK`): the kernel drops them when the last descriptor of
//! the description is closed, which includes the death of the process. They
//! are how processes sharing a database find out who is alive and who
//! writes (see `storage::lockfile`).
//!
//! Unlike classic `fcntl` locks, closing some other descriptor of the same
//! file does not drop them, and unlike `flock`, converting a lock from
//! exclusive to shared is atomic.

use std::fs::File;
use std::io;
use std::os::unix::io::AsRawFd;

/// Shared or exclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LockKind {
    Shared,
    Exclusive,
    Unlock,
}

/// Locks (or unlocks) byte `byte` of `file`. With `wait`, blocks until the
/// lock is granted; without, returns `Ok(false)` if another description
/// holds a conflicting lock.
pub(crate) fn lock_byte(file: &File, byte: u64, kind: LockKind, wait: bool) -> io::Result<bool> {
    let l_type = match kind {
        LockKind::Shared => libc::F_RDLCK,
        LockKind::Exclusive => libc::F_WRLCK,
        LockKind::Unlock => libc::F_UNLCK,
    };
    let start = libc::off_t::try_from(byte).map_err(|_| io::Error::other("lock offset"))?;
    // SAFETY: an all-zero `flock` is a valid value (l_pid must be 0 for OFD
    // locks); every field we rely on is set below.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = l_type as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = start;
    fl.l_len = 1;
    let cmd = if wait {
        libc::F_OFD_SETLKW
    } else {
        libc::F_OFD_SETLK
    };
    loop {
        // SAFETY: fcntl on a descriptor we own with a pointer to a live,
        // initialised `flock`; the kernel only reads it for SETLK(W).
        let rc = unsafe { libc::fcntl(file.as_raw_fd(), cmd, &fl as *const libc::flock) };
        if rc == 0 {
            return Ok(true);
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EAGAIN) | Some(libc::EACCES) if !wait => return Ok(false),
            _ => return Err(err),
        }
    }
}

/// The kind of a lock another description holds on byte `byte` of `file`
/// that conflicts with an exclusive lock, if any (`F_OFD_GETLK`). Only a
/// hint: the holder may change right after.
pub(crate) fn conflicting_lock(file: &File, byte: u64) -> io::Result<Option<LockKind>> {
    let start = libc::off_t::try_from(byte).map_err(|_| io::Error::other("lock offset"))?;
    // SAFETY: as in `lock_byte`.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = libc::F_WRLCK as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = start;
    fl.l_len = 1;
    // SAFETY: fcntl on a descriptor we own with a pointer to a live,
    // initialised `flock`, which F_OFD_GETLK overwrites with the result.
    let rc = unsafe {
        libc::fcntl(
            file.as_raw_fd(),
            libc::F_OFD_GETLK,
            &mut fl as *mut libc::flock,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(match i32::from(fl.l_type) {
        libc::F_RDLCK => Some(LockKind::Shared),
        libc::F_WRLCK => Some(LockKind::Exclusive),
        _ => None,
    })
}
