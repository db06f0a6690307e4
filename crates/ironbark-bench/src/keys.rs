//! Key and value bytes: the same for every engine.
//!
//! Keys are db_bench's: the record index as zero-padded decimal, `key_size`
//! bytes long, so numeric order is byte order. A missing key is an existing
//! key with its last byte replaced by `x`. With `--keys=random` they are
//! random bytes instead (UUID-like), a function of the index: the first 8
//! bytes are a bijection of it (so keys are distinct), the rest a hash; a
//! missing key is an existing key with its last byte's top bit flipped (no
//! other key shares its first 8 bytes). Values are slices of one random
//! buffer, chosen by a hash of the key, so any reader can verify any value
//! (including values of the random keys of `smalltxn`) without a lookup table.

use serde::{Deserialize, Serialize};

/// splitmix64: a small, fast, seedable generator (not for cryptography).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix64(self.0)
    }

    /// Uniform in `0..n` (n > 0), by multiply-shift.
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let bytes = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
    }
}

pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A 64-bit hash of a short byte string.
pub fn hash_bytes(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0x243f_6a88_85a3_08d3 ^ (bytes.len() as u64);
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        h = mix64(h ^ w);
    }
    let mut tail = [0u8; 8];
    let rest = chunks.remainder();
    tail[..rest.len()].copy_from_slice(rest);
    mix64(h ^ u64::from_le_bytes(tail))
}

/// How keys are made from record indexes (`--keys`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyFormat {
    /// db_bench's zero-padded decimal: sorted by index.
    #[default]
    Decimal,
    /// Random bytes (UUID-like), in no order.
    Random,
}

impl KeyFormat {
    /// The shortest key of this format.
    pub fn min_key_size(self) -> usize {
        match self {
            KeyFormat::Decimal => 2,
            // 8 bytes of bijection, and a tail to flip for missing keys.
            KeyFormat::Random => 9,
        }
    }
}

/// Writes the key of record `index` into `out` (`out.len()` is the key size).
pub fn key_into(format: KeyFormat, index: u64, out: &mut [u8]) {
    match format {
        KeyFormat::Decimal => {
            let mut n = index;
            for b in out.iter_mut().rev() {
                *b = b'0' + (n % 10) as u8;
                n /= 10;
            }
        }
        KeyFormat::Random => {
            // mix64 is a bijection of u64: distinct indexes, distinct heads.
            let head = mix64(index ^ 0x5851_f42d_4c95_7f2d);
            let (first, rest) = out.split_at_mut(8);
            first.copy_from_slice(&head.to_be_bytes());
            Rng::new(head).fill(rest);
        }
    }
}

/// Writes a key that is never stored: record `index`'s key ending in `x`
/// (decimal), or with its last byte's top bit flipped (random).
pub fn missing_key_into(format: KeyFormat, index: u64, out: &mut [u8]) {
    key_into(format, index, out);
    if let Some(last) = out.last_mut() {
        *last = match format {
            KeyFormat::Decimal => b'x',
            KeyFormat::Random => *last ^ 0x80,
        };
    }
}

/// The largest record count whose keys are distinct at this key size.
pub fn max_records(format: KeyFormat, key_size: usize) -> u64 {
    if format == KeyFormat::Random || key_size >= 19 {
        u64::MAX
    } else {
        10u64.pow(key_size as u32)
    }
}

/// Overwrites cycle through generations 1..=GENERATIONS.
pub const GENERATIONS: u64 = 3;

/// The value bytes of every key, as slices of one random buffer.
pub struct Values {
    buf: Vec<u8>,
    value_size: usize,
}

impl Values {
    pub fn new(seed: u64, value_size: usize) -> Values {
        let len = (1 << 20).max(4 * value_size) + value_size;
        let mut buf = vec![0u8; len];
        Rng::new(seed ^ 0x005e_ed0f_da7a).fill(&mut buf);
        Values { buf, value_size }
    }

    pub fn value_size(&self) -> usize {
        self.value_size
    }

    /// The value stored under `key` by fills (generation 0).
    pub fn for_key(&self, key: &[u8]) -> &[u8] {
        self.generation(key, 0)
    }

    /// The value of `key` in `generation` (0..=GENERATIONS). Overwrites
    /// store a different generation than the one they replace, so no engine
    /// can skip an overwrite as a no-op (SQLite skips identical rewrites).
    pub fn generation(&self, key: &[u8], generation: u64) -> &[u8] {
        let span = (self.buf.len() - self.value_size + 1) as u64;
        let off = (hash_bytes(key).wrapping_add(generation.wrapping_mul(7919)) % span) as usize;
        &self.buf[off..off + self.value_size]
    }

    /// Whether `value` is a value `key` can hold (any generation).
    pub fn matches(&self, key: &[u8], value: &[u8]) -> bool {
        (0..=GENERATIONS).any(|g| self.generation(key, g) == value)
    }
}

/// A pseudo-random permutation of `0..n` (a 4-round Feistel network over the
/// next even power of two, walking cycles back into range), so random fills
/// and deletes touch every record exactly once without an index table.
#[derive(Clone, Debug)]
pub struct Permutation {
    n: u64,
    half_bits: u32,
    round_keys: [u64; 4],
}

impl Permutation {
    pub fn new(n: u64, seed: u64) -> Permutation {
        let bits = 64 - n.max(2).saturating_sub(1).leading_zeros();
        let half_bits = bits.div_ceil(2).max(1);
        let mut rng = Rng::new(seed ^ 0x0fe1_57e1);
        let round_keys = [
            rng.next_u64(),
            rng.next_u64(),
            rng.next_u64(),
            rng.next_u64(),
        ];
        Permutation {
            n,
            half_bits,
            round_keys,
        }
    }

    fn encrypt(&self, x: u64) -> u64 {
        let mask = (1u64 << self.half_bits) - 1;
        let mut left = x >> self.half_bits;
        let mut right = x & mask;
        for k in self.round_keys {
            let f = mix64(right ^ k) & mask;
            let next = left ^ f;
            left = right;
            right = next;
        }
        (left << self.half_bits) | right
    }

    /// The `i`-th element (i < n).
    pub fn get(&self, i: u64) -> u64 {
        debug_assert!(i < self.n);
        let mut x = self.encrypt(i);
        while x >= self.n {
            x = self.encrypt(x);
        }
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_numerically() {
        let mut a = [0u8; 16];
        let mut b = [0u8; 16];
        key_into(KeyFormat::Decimal, 99, &mut a);
        key_into(KeyFormat::Decimal, 100, &mut b);
        assert!(a < b);
        assert_eq!(&b, b"0000000000000100");
        missing_key_into(KeyFormat::Decimal, 100, &mut b);
        assert_eq!(&b, b"000000000000010x");
    }

    #[test]
    fn random_keys_are_distinct_unordered_and_never_missing_keys() {
        let n = 20_000u64;
        let mut stored = std::collections::HashSet::new();
        let mut k = [0u8; 32];
        let mut ascending = 0;
        let mut previous = [0u8; 32];
        for i in 0..n {
            key_into(KeyFormat::Random, i, &mut k);
            let mut again = [0u8; 32];
            key_into(KeyFormat::Random, i, &mut again);
            assert_eq!(k, again, "a key is a function of its index");
            assert!(stored.insert(k), "key {i} repeats");
            ascending += usize::from(k > previous);
            previous = k;
        }
        // Unordered: about half the neighbours ascend.
        assert!((8_000..12_000).contains(&ascending), "{ascending}");
        for i in 0..n {
            missing_key_into(KeyFormat::Random, i, &mut k);
            assert!(!stored.contains(&k), "missing key {i} is stored");
        }
    }

    #[test]
    fn permutation_is_a_bijection() {
        for n in [1u64, 2, 3, 10, 1000, 4097] {
            let p = Permutation::new(n, 7);
            let mut seen = vec![false; n as usize];
            for i in 0..n {
                let x = p.get(i) as usize;
                assert!(!seen[x]);
                seen[x] = true;
            }
        }
    }

    #[test]
    fn values_depend_on_key_only() {
        let v = Values::new(1, 100);
        assert_eq!(v.for_key(b"abc"), v.for_key(b"abc"));
        assert_eq!(v.for_key(b"abc").len(), 100);
    }
}
