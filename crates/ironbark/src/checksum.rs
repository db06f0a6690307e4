//! The one checksum function of the file format: XXH3-64, unseeded for
//! pages and meta, seeded for the redo log's chained records (`log.rs`).
//!
//! Invariant: one hash function everywhere.

/// The checksum of `bytes`.
#[inline]
pub(crate) fn checksum(bytes: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(bytes)
}

/// The checksum of `bytes` with `seed` (the redo log chains each record to
/// the one before by seeding with its checksum).
#[inline]
pub(crate) fn checksum_seeded(bytes: &[u8], seed: u64) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(bytes, seed)
}
