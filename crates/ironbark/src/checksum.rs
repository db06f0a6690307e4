//! The one checksum function of the file format: XXH3-64, unseeded for
//! pages and meta, seeded for the redo log's chained records (`log.rs`).
//!
//! Invariant: one hash function everywhere.
//!
//! The implementation picks AVX2 at run time where the CPU has it (SSE2,
//! NEON or scalar code otherwise; every one gives the same value): hashing
//! the pages of a commit is most of a load of large values' work, and
//! AVX2 hashes a page in about half the instructions of SSE2.

/// The checksum of `bytes`.
#[inline]
pub(crate) fn checksum(bytes: &[u8]) -> u64 {
    twox_hash::XxHash3_64::oneshot(bytes)
}

/// The checksum of `bytes` with `seed` (the redo log chains each record to
/// the one before by seeding with its checksum).
#[inline]
pub(crate) fn checksum_seeded(bytes: &[u8], seed: u64) -> u64 {
    twox_hash::XxHash3_64::oneshot_with_seed(seed, bytes)
}

/// [`checksum_seeded`] of `head` and `body` back to back, without making
/// them one buffer (the redo log hashes a record's header and its payload
/// where they lie).
///
/// Up to XXH3's short-input bound the two are copied into one stack
/// buffer and hashed at once, which costs less than streaming (the
/// streaming hasher derives a secret from the seed first, as XXH3 does for
/// long inputs only). Longer ones are streamed, the hasher's state (that
/// secret and its stripe buffer) on the stack: a commit's log record
/// allocates nothing either way.
#[inline]
pub(crate) fn checksum_seeded_pair(head: &[u8], body: &[u8], seed: u64) -> u64 {
    use std::hash::Hasher;
    use twox_hash::xxhash3_64::{RawHasher, SecretBuffer, DEFAULT_SECRET_LENGTH};
    const SHORT: usize = 240;
    let len = head.len() + body.len();
    if len <= SHORT {
        let mut joined = [0u8; SHORT];
        joined[..head.len()].copy_from_slice(head);
        joined[head.len()..len].copy_from_slice(body);
        return checksum_seeded(&joined[..len], seed);
    }
    let secret = SecretBuffer::with_seed(seed, [0u8; DEFAULT_SECRET_LENGTH])
        .unwrap_or_else(|_| unreachable!("a secret of the default length takes a seed"));
    let mut hasher = RawHasher::new(secret);
    hasher.write(head);
    hasher.write(body);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The values are XXH3-64's, as an independent implementation computes
    /// them, for every length class the algorithm treats apart (empty,
    /// 1-3, 4-8, 9-16, 17-128, 129-240 bytes, and the long loop with and
    /// without a partial stripe and block), seeded and unseeded: a file
    /// written by one build must verify under another.
    #[test]
    fn matches_the_reference_xxh3() {
        let data: Vec<u8> = (0..20_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for len in [
            0, 1, 3, 4, 8, 9, 16, 17, 128, 129, 240, 241, 1024, 1025, 4064, 4088, 4096, 8192,
            19_999,
        ] {
            let bytes = &data[..len];
            assert_eq!(
                checksum(bytes),
                xxhash_rust::xxh3::xxh3_64(bytes),
                "length {len}"
            );
            for seed in [0, 1, 0x9e37_79b9_7f4a_7c15] {
                assert_eq!(
                    checksum_seeded(bytes, seed),
                    xxhash_rust::xxh3::xxh3_64_with_seed(bytes, seed),
                    "length {len}, seed {seed}"
                );
            }
        }
    }

    /// A record's header and payload hashed where they lie give the
    /// checksum of the two made one buffer, for every length class and
    /// every place the cut can fall (the log hashes 24 bytes of header).
    #[test]
    fn a_pair_hashes_as_its_concatenation() {
        let data: Vec<u8> = (0..20_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
            .collect();
        for len in [0, 1, 16, 24, 25, 100, 240, 241, 256, 1025, 4096, 19_999] {
            let bytes = &data[..len];
            for cut in [0, 1.min(len), 24.min(len), len / 2, len] {
                let (head, body) = bytes.split_at(cut);
                for seed in [0, 7, 0x9e37_79b9_7f4a_7c15] {
                    assert_eq!(
                        checksum_seeded_pair(head, body, seed),
                        xxhash_rust::xxh3::xxh3_64_with_seed(bytes, seed),
                        "length {len}, cut {cut}, seed {seed}"
                    );
                }
            }
        }
    }
}
