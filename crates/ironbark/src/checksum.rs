//! The one checksum function of the file format: XXH3-64, unseeded for
//! pages and meta, seeded for the redo log's chained records (`log.rs`).
//!
//! Invariant: one hash function everywhere, so a checksum computed over
//! parts equals the one over the same bytes joined.

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

/// [`checksum_seeded`] of `parts` joined back to back, without joining
/// them.
pub(crate) fn checksum_seeded_parts(parts: &[&[u8]], seed: u64) -> u64 {
    let mut h = xxhash_rust::xxh3::Xxh3::with_seed(seed);
    for part in parts {
        h.update(part);
    }
    h.digest()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The streaming hash over parts equals the one-shot hash over the
    /// joined bytes, for lengths either side of XXH3's internal thresholds
    /// (16, 128, 240 bytes, its 256-byte buffer and 1 KiB stripes).
    #[test]
    fn parts_hash_as_the_joined_bytes() {
        let bytes: Vec<u8> = (0..5000u32).map(|i| (i * 31 % 251) as u8).collect();
        for len in [
            0, 1, 15, 16, 17, 128, 129, 240, 241, 256, 257, 1024, 1025, 5000,
        ] {
            for cut in [0, len / 3, len / 2, len] {
                let (a, b) = bytes[..len].split_at(cut);
                for seed in [0, 1, u64::MAX] {
                    assert_eq!(
                        checksum_seeded_parts(&[a, &[], b], seed),
                        checksum_seeded(&bytes[..len], seed),
                        "len {len} cut {cut} seed {seed}"
                    );
                }
            }
        }
    }
}
