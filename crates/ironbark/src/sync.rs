//! The atomics the lock-free parts of the engine use: `std`'s, or `loom`'s
//! when the crate is built with `--cfg loom` for model checking
//! (`RUSTFLAGS="--cfg loom" cargo test -p ironbark --lib --release loom`);
//! values on cache lines of their own; and `ArcCell`, an `Arc` one thread
//! replaces while others take copies.

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

/// An `Arc<T>` that a writer replaces while other threads take copies of
/// it: the pointer behind a reader-writer lock, held only to copy or swap
/// it (a few instructions), so a replace costs two atomic instructions
/// whatever the number of threads.
///
/// It holds `Shared::published`, which every commit replaces; read
/// transactions read it only off their fast path (the writer, recovery
/// and `check` read it too, none of them per lookup). It replaced an
/// `arc_swap::ArcSwap`, whose replace runs `Debt::pay_all`: a locked
/// `cmpxchg` on each of the nine debt slots of every thread that ever
/// loaded from any `ArcSwap` of the process, at every commit, even with no
/// debt to pay. Those were about 450 of a single-put commit's 7,000
/// instructions with two such threads (session 37), and more with each
/// thread that ever read off the fast path.
#[derive(Debug)]
pub(crate) struct ArcCell<T>(std::sync::RwLock<std::sync::Arc<T>>);

impl<T> ArcCell<T> {
    pub(crate) fn from_pointee(value: T) -> ArcCell<T> {
        ArcCell(std::sync::RwLock::new(std::sync::Arc::new(value)))
    }

    /// A copy of the current `Arc`.
    #[inline]
    pub(crate) fn load_full(&self) -> std::sync::Arc<T> {
        // Nothing panics while the lock is held: a poisoned one is intact.
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Replaces the `Arc`, returning the one it held (dropped by the
    /// caller, after the lock is released).
    #[inline]
    pub(crate) fn swap(&self, new: std::sync::Arc<T>) -> std::sync::Arc<T> {
        let mut held = self.0.write().unwrap_or_else(|e| e.into_inner());
        std::mem::replace(&mut *held, new)
    }

    /// Replaces the `Arc`.
    pub(crate) fn store(&self, new: std::sync::Arc<T>) {
        drop(self.swap(new));
    }

    /// Replaces the `Arc` by what `f` makes of it, with no replace by
    /// another thread between the two (`f` runs once, under the lock).
    pub(crate) fn update(&self, f: impl FnOnce(&std::sync::Arc<T>) -> std::sync::Arc<T>) {
        let mut held = self.0.write().unwrap_or_else(|e| e.into_inner());
        let new = f(&held);
        let old = std::mem::replace(&mut *held, new);
        drop(held);
        drop(old);
    }
}

#[cfg(test)]
mod tests {
    use super::ArcCell;
    use std::sync::Arc;

    /// Copies are the value stored last; a replaced value lives on in the
    /// copies taken before, and is freed with the last of them.
    #[test]
    fn an_arc_cell_gives_the_newest_and_keeps_what_was_copied() {
        let cell = ArcCell::from_pointee(1u64);
        let first = cell.load_full();
        cell.store(Arc::new(2));
        assert_eq!((*first, *cell.load_full()), (1, 2));
        let old = cell.swap(Arc::new(3));
        assert_eq!((*old, *cell.load_full()), (2, 3));
        cell.update(|now| Arc::new(**now + 10));
        assert_eq!(*cell.load_full(), 13);
        let weak = Arc::downgrade(&first);
        drop(first);
        assert!(weak.upgrade().is_none(), "the last copy frees it");
        // Threads copying while one replaces see only stored values, in
        // the order stored.
        let cell = Arc::new(ArcCell::from_pointee(0u64));
        let reader = {
            let cell = cell.clone();
            std::thread::spawn(move || {
                let mut last = 0;
                for _ in 0..100_000 {
                    let now = *cell.load_full();
                    assert!(now >= last && now <= 1_000);
                    last = now;
                }
            })
        };
        for i in 1..=1_000u64 {
            cell.store(Arc::new(i));
        }
        reader.join().expect("reader");
        assert_eq!(*cell.load_full(), 1_000);
    }
}
