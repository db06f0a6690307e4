//! The copy-on-write B+tree: page format, search, cursors, and the
//! mutations (insert with split, delete with merge) of the write path.
//!
//! Invariants of every tree (checked by `check`):
//! - keys are unique and in byte-wise order within and across pages;
//! - every leaf is at the same depth; a branch with `n` cells has `n`
//!   children, and cell 0's key is empty (it stands for "below cell 1");
//! - every key under child `i` of a branch is `>= key[i]` and `< key[i+1]`;
//! - a branch cell records the txn id that wrote the child, and the child's
//!   header carries the same id (this catches stale or misdirected pages).

pub(crate) mod cursor;
pub(crate) mod leaf_split;
pub(crate) mod page;
pub(crate) mod search;
pub(crate) mod write;

/// The deepest tree the engine will walk. A tree is at most this deep
/// because every page holds at least 3 cells; deeper means a damaged file.
pub(crate) const MAX_DEPTH: usize = 48;
