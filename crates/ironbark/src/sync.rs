//! The atomics the lock-free parts of the engine use: `std`'s, or `loom`'s
//! when the crate is built with `--cfg loom` for model checking
//! (`RUSTFLAGS="--cfg loom" cargo test -p ironbark --lib --release loom`).

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicPtr, AtomicU64, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::{Mutex, MutexGuard};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, AtomicPtr, AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::{Mutex, MutexGuard};

/// A value on cache lines of its own (two, for the adjacent-line
/// prefetcher): one a thread changes, kept apart from fields that other
/// threads read on every lookup, so that neither thread's access costs the
/// other a cache miss.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct OwnLines<T>(pub(crate) T);

impl<T> std::ops::Deref for OwnLines<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}
