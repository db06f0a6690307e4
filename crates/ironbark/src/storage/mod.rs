//! Storage: the data file, the read-only memory map over it, the two meta
//! pages, the free-space map, the lock file processes share, the redo log
//! beside the data file, the page arena of logged commits, and the spill
//! file of a write transaction larger than memory.
//!
//! Invariant kept by this layer: bytes are only ever written to the file
//! with positioned writes (`pwritev`) by the single writer, and only to pages
//! that no live snapshot and no durable meta page can reach; the redo log is
//! written only past its valid chain, or from its start once a durable
//! checkpoint covers the whole chain.

pub(crate) mod arena;
pub(crate) mod file;
pub(crate) mod freespace;
pub(crate) mod lockfile;
pub(crate) mod log;
pub(crate) mod map;
pub(crate) mod memory;
pub(crate) mod meta;
pub(crate) mod oslock;
pub(crate) mod overlay;
pub(crate) mod spill;
