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
