//! The one checksum function of the file format: XXH3-64.

/// The checksum of `bytes`.
#[inline]
pub(crate) fn checksum(bytes: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(bytes)
}
