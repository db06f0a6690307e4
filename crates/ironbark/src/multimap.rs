//! Multimaps: trees that keep a sorted set of values per key (LMDB's
//! `MDB_DUPSORT`, redb's multimap tables).
//!
//! Each (key, value) pair is one key of an ordinary B+tree, with an empty
//! stored value, so every page, search, cursor, commit and redo path works
//! on them unchanged. The stored key is
//!
//! ```text
//! escape(key) 0x00 0x00 value      where escape doubles 0x00 as 0x00 0xff
//! ```
//!
//! Invariant: the encoding is injective and preserves the order of pairs:
//! `(k1, v1) < (k2, v2)` (key first, then value, both bytewise) if and
//! only if `encode(k1, v1) < encode(k2, v2)` bytewise. Why: the escaped key
//! is followed by `0x00 0x00`, and inside an escaped key a `0x00` is always
//! followed by `0xff`. So where two escaped keys first differ, either both
//! have the key bytes that differ (a zero byte, `00 ff`, against a byte
//! `b >= 1`: `00 < b`, the order of the keys), or one key ended (its
//! terminator `00 00` against the other's `00 ff` or a byte `>= 1`: the
//! shorter key, a prefix, sorts first). If the keys are equal the values
//! compare as they are. Each stored key therefore starts with exactly one
//! key's encoding and `00 00`: decoding is unique, and bytes that do not
//! decode (a `0x00` followed by anything but `0x00` or `0xff`, or no
//! terminator) are damage, an `Err`, never a panic.
//!
//! The values of one key are the stored keys with the prefix
//! `escape(key) 00 00`; the keys greater than `key` start at
//! `escape(key) 00 01`.

use std::borrow::Cow;
use std::ops::Bound;

use crate::bounds::KeyRange;
use crate::btree::cursor::Range;
use crate::error::{Error, Result};
use crate::kind::{IntWidth, TreeKind};
use crate::txn::read::ReadTxn;
use crate::txn::write::WriteTxn;
use crate::txn::Tree;

/// A handle to a multimap: a tree that keeps a sorted set of values for
/// each key (LMDB's `MDB_DUPSORT`). Made by [`WriteTxn::open_multimap`],
/// [`WriteTxn::open_int_multimap`] or `multimap` on either transaction;
/// valid like a [`Tree`] handle (same database, as long as the tree
/// exists). A plain `put` cannot be applied to it: it is another type.
///
/// Each pair is stored as one key of the tree, so a key and a value
/// together are limited to about [`crate::Database::max_key_len`] bytes
/// ([`Error::PairTooLarge`]); the values of a multimap are not meant to be
/// large (store large values in a plain tree and their keys here).
///
/// ```
/// # fn main() -> ironbark::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
/// let mut tx = db.begin_write()?;
/// let tags = tx.open_multimap("tags")?;
/// tx.put_dup(&tags, b"post-1", b"rust")?;
/// tx.put_dup(&tags, b"post-1", b"db")?;
/// tx.put_dup(&tags, b"post-2", b"rust")?;
/// tx.commit()?;
///
/// let rx = db.begin_read()?;
/// let tags = rx.multimap("tags")?;
/// let values: Vec<&[u8]> = rx.get_dups(&tags, b"post-1")?.collect::<ironbark::Result<_>>()?;
/// assert_eq!(values, [&b"db"[..], &b"rust"[..]]);
/// assert_eq!(rx.multimap_len(&tags)?, 3);
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Multimap {
    tree: Tree,
    int_key: Option<IntWidth>,
}

impl Multimap {
    /// The tree's name.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// assert_eq!(tx.open_multimap("tags")?.name(), "tags");
    /// # Ok(())
    /// # }
    /// ```
    pub fn name(&self) -> &str {
        self.tree.name()
    }

    /// The tree's kind: [`TreeKind::MULTIMAP`], or an integer-key multimap.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// use ironbark::{IntWidth, TreeKind};
    /// let mut tx = db.begin_write()?;
    /// let m = tx.open_int_multimap("m", IntWidth::U32)?;
    /// assert_eq!(m.kind(), TreeKind::int_multimap(IntWidth::U32));
    /// # Ok(())
    /// # }
    /// ```
    pub fn kind(&self) -> TreeKind {
        TreeKind {
            multimap: true,
            integer_key: self.int_key,
        }
    }

    /// Checks a key given to this multimap: in an integer-key multimap,
    /// it must be the big-endian bytes of the tree's width.
    fn check_key(&self, key: &[u8]) -> Result<()> {
        match self.int_key {
            Some(w) if key.len() != w.bytes() => Err(Error::IntegerKeySize {
                name: self.tree.name().to_string(),
                width: w.bytes(),
                detail: format!("a key of {} bytes", key.len()),
            }),
            _ => Ok(()),
        }
    }
}

pub(crate) use crate::kind::{decode_pair, encode_key, encode_pair};

/// Corruption: a stored key of the multimap `name` that is not a pair.
fn not_a_pair(name: &str, stored: &[u8]) -> Error {
    Error::Corrupted {
        page: None,
        detail: format!(
            "multimap {name:?} holds a key of {} bytes that is not a (key, value) pair",
            stored.len()
        ),
    }
}

/// The bounds of the stored keys of the pairs whose keys are in
/// (`lower`, `upper`).
fn pair_bounds(lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    // Pairs of `k` start at `escape(k) 00 00`; keys above `k` at
    // `escape(k) 00 01` (see the module doc).
    let at = |k: &[u8], last: u8| {
        let mut b = Vec::with_capacity(k.len() + 2);
        encode_key(k, &mut b);
        *b.last_mut().expect("two bytes") = last;
        b
    };
    let lower = match lower {
        Bound::Included(k) => Bound::Included(at(k, 0)),
        Bound::Excluded(k) => Bound::Included(at(k, 1)),
        Bound::Unbounded => Bound::Unbounded,
    };
    let upper = match upper {
        Bound::Included(k) => Bound::Excluded(at(k, 1)),
        Bound::Excluded(k) => Bound::Excluded(at(k, 0)),
        Bound::Unbounded => Bound::Unbounded,
    };
    (lower, upper)
}

/// The stored keys of the pairs of `key`: from `escape(key) 00 00`
/// (included) to `escape(key) 00 01` (excluded).
fn pairs_of_key(key: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let mut lower = Vec::with_capacity(key.len() + 2);
    encode_key(key, &mut lower);
    let mut upper = lower.clone();
    *upper.last_mut().expect("two bytes") = 1;
    (lower, upper)
}

/// The values of one key of a multimap, in order (`.rev()` for reverse):
/// see `get_dups` on [`ReadTxn::get_dups`] and [`WriteTxn::get_dups`].
pub struct Dups<'a> {
    inner: Range<'a>,
    prefix_len: usize,
    name: &'a str,
}

impl<'a> Dups<'a> {
    fn value(&self, item: Result<(&'a [u8], &'a [u8])>) -> Result<&'a [u8]> {
        let (stored, rest) = item?;
        match stored.get(self.prefix_len..) {
            Some(value) if rest.is_empty() => Ok(value),
            _ => Err(not_a_pair(self.name, stored)),
        }
    }
}

impl<'a> Iterator for Dups<'a> {
    type Item = Result<&'a [u8]>;

    fn next(&mut self) -> Option<Self::Item> {
        let item = self.inner.next()?;
        Some(self.value(item))
    }
}

impl DoubleEndedIterator for Dups<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        let item = self.inner.next_back()?;
        Some(self.value(item))
    }
}

/// The (key, value) pairs of a multimap, in (key, value) order (`.rev()`
/// for reverse): see [`ReadTxn::multimap_range`]. The key is borrowed
/// from the map unless it holds zero bytes (then it is decoded into a
/// `Vec`); the value is always borrowed.
pub struct Pairs<'a> {
    inner: Range<'a>,
    name: &'a str,
}

/// A (key, value) pair of a multimap.
pub type Pair<'a> = (Cow<'a, [u8]>, &'a [u8]);

impl<'a> Pairs<'a> {
    fn pair(&self, item: Result<(&'a [u8], &'a [u8])>) -> Result<Pair<'a>> {
        let (stored, rest) = item?;
        match decode_pair(stored) {
            Some(pair) if rest.is_empty() => Ok(pair),
            _ => Err(not_a_pair(self.name, stored)),
        }
    }
}

impl<'a> Iterator for Pairs<'a> {
    type Item = Result<Pair<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        let item = self.inner.next()?;
        Some(self.pair(item))
    }
}

impl DoubleEndedIterator for Pairs<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        let item = self.inner.next_back()?;
        Some(self.pair(item))
    }
}

/// The reads of a multimap, the same on both kinds of transaction.
macro_rules! multimap_reads {
    () => {
        /// A handle to the existing multimap `name` (with byte or integer
        /// keys); `NoSuchTree`, or `WrongTreeKind` if it is not a multimap.
        ///
        /// ```
        /// # fn main() -> ironbark::Result<()> {
        /// # let dir = tempfile::tempdir().unwrap();
        /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
        /// let mut tx = db.begin_write()?;
        /// tx.open_multimap("m")?;
        /// tx.open_tree("plain")?;
        /// tx.commit()?;
        /// let rx = db.begin_read()?;
        /// assert_eq!(rx.multimap("m")?.name(), "m");
        /// assert!(matches!(rx.multimap("plain"), Err(ironbark::Error::WrongTreeKind { .. })));
        /// # Ok(())
        /// # }
        /// ```
        pub fn multimap(&self, name: &str) -> Result<Multimap> {
            let kind = self.tree_kind(name)?;
            let wanted = TreeKind {
                multimap: true,
                ..kind
            };
            Ok(Multimap {
                tree: self.tree_of_kind(name, wanted)?,
                int_key: kind.integer_key,
            })
        }

        /// The values of `key`, in order (`.rev()` for reverse); none if
        /// the key has none.
        ///
        /// ```
        /// # fn main() -> ironbark::Result<()> {
        /// # let dir = tempfile::tempdir().unwrap();
        /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
        /// let mut tx = db.begin_write()?;
        /// let m = tx.open_multimap("m")?;
        /// for v in [&b"b"[..], b"a", b"c"] {
        ///     tx.put_dup(&m, b"k", v)?;
        /// }
        /// let last: Vec<&[u8]> = tx.get_dups(&m, b"k")?.rev().take(1).collect::<ironbark::Result<_>>()?;
        /// assert_eq!(last, [&b"c"[..]]);
        /// assert_eq!(tx.get_dups(&m, b"other")?.count(), 0);
        /// # Ok(())
        /// # }
        /// ```
        pub fn get_dups<'a>(&'a self, m: &'a Multimap, key: &[u8]) -> Result<Dups<'a>> {
            let mut prefix = Vec::with_capacity(key.len() + 2);
            encode_key(key, &mut prefix);
            Ok(Dups {
                inner: self.prefix(&m.tree, &prefix)?,
                prefix_len: prefix.len(),
                name: m.name(),
            })
        }

        /// The number of values of `key`. It counts whole leaves by their
        /// entry counts, reading no value: O(leaf pages the key's values
        /// fill), not O(values).
        ///
        /// ```
        /// # fn main() -> ironbark::Result<()> {
        /// # let dir = tempfile::tempdir().unwrap();
        /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
        /// let mut tx = db.begin_write()?;
        /// let m = tx.open_multimap("m")?;
        /// tx.put_dup(&m, b"k", b"1")?;
        /// tx.put_dup(&m, b"k", b"2")?;
        /// tx.put_dup(&m, b"k", b"2")?; // stored once
        /// assert_eq!(tx.count_dups(&m, b"k")?, 2);
        /// # Ok(())
        /// # }
        /// ```
        pub fn count_dups(&self, m: &Multimap, key: &[u8]) -> Result<u64> {
            let (lower, upper) = pairs_of_key(key);
            self.count_between(&m.tree, &lower, &upper)
        }

        /// Whether the pair (`key`, `value`) is in the multimap.
        ///
        /// ```
        /// # fn main() -> ironbark::Result<()> {
        /// # let dir = tempfile::tempdir().unwrap();
        /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
        /// let mut tx = db.begin_write()?;
        /// let m = tx.open_multimap("m")?;
        /// tx.put_dup(&m, b"k", b"v")?;
        /// assert!(tx.contains_dup(&m, b"k", b"v")?);
        /// assert!(!tx.contains_dup(&m, b"k", b"w")?);
        /// # Ok(())
        /// # }
        /// ```
        pub fn contains_dup(&self, m: &Multimap, key: &[u8], value: &[u8]) -> Result<bool> {
            Ok(self.get(&m.tree, &encode_pair(key, value))?.is_some())
        }

        /// The smallest value of `key`, or `None` if it has none.
        ///
        /// ```
        /// # fn main() -> ironbark::Result<()> {
        /// # let dir = tempfile::tempdir().unwrap();
        /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
        /// let mut tx = db.begin_write()?;
        /// let m = tx.open_multimap("m")?;
        /// tx.put_dup(&m, b"k", b"2")?;
        /// tx.put_dup(&m, b"k", b"1")?;
        /// assert_eq!(tx.first_dup(&m, b"k")?, Some(&b"1"[..]));
        /// assert_eq!(tx.first_dup(&m, b"x")?, None);
        /// # Ok(())
        /// # }
        /// ```
        pub fn first_dup<'a>(&'a self, m: &'a Multimap, key: &[u8]) -> Result<Option<&'a [u8]>> {
            self.get_dups(m, key)?.next().transpose()
        }

        /// The largest value of `key`, or `None` if it has none.
        ///
        /// ```
        /// # fn main() -> ironbark::Result<()> {
        /// # let dir = tempfile::tempdir().unwrap();
        /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
        /// let mut tx = db.begin_write()?;
        /// let m = tx.open_multimap("m")?;
        /// tx.put_dup(&m, b"k", b"2")?;
        /// tx.put_dup(&m, b"k", b"1")?;
        /// assert_eq!(tx.last_dup(&m, b"k")?, Some(&b"2"[..]));
        /// # Ok(())
        /// # }
        /// ```
        pub fn last_dup<'a>(&'a self, m: &'a Multimap, key: &[u8]) -> Result<Option<&'a [u8]>> {
            self.get_dups(m, key)?.next_back().transpose()
        }

        /// The pairs whose keys are in `range`, in (key, value) order
        /// (`.rev()` for reverse).
        ///
        /// ```
        /// # fn main() -> ironbark::Result<()> {
        /// # let dir = tempfile::tempdir().unwrap();
        /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
        /// let mut tx = db.begin_write()?;
        /// let m = tx.open_multimap("m")?;
        /// tx.put_dup(&m, b"a", b"1")?;
        /// tx.put_dup(&m, b"b", b"2")?;
        /// tx.put_dup(&m, b"b", b"3")?;
        /// tx.put_dup(&m, b"c", b"4")?;
        /// let pairs: Vec<(Vec<u8>, Vec<u8>)> = tx
        ///     .multimap_range(&m, &b"b"[..]..)?
        ///     .map(|p| p.map(|(k, v)| (k.into_owned(), v.to_vec())))
        ///     .collect::<ironbark::Result<_>>()?;
        /// assert_eq!(pairs.len(), 3);
        /// assert_eq!(pairs[0], (b"b".to_vec(), b"2".to_vec()));
        /// # Ok(())
        /// # }
        /// ```
        pub fn multimap_range<'a, R: KeyRange>(
            &'a self,
            m: &'a Multimap,
            range: R,
        ) -> Result<Pairs<'a>> {
            let (lower, upper) = range.key_bounds();
            Ok(Pairs {
                inner: self.range(&m.tree, pair_bounds(lower, upper))?,
                name: m.name(),
            })
        }

        /// Every pair of the multimap, in (key, value) order.
        ///
        /// ```
        /// # fn main() -> ironbark::Result<()> {
        /// # let dir = tempfile::tempdir().unwrap();
        /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
        /// let mut tx = db.begin_write()?;
        /// let m = tx.open_multimap("m")?;
        /// tx.put_dup(&m, b"k\0", b"v")?;
        /// let (k, v) = tx.multimap_iter(&m)?.next().unwrap()?;
        /// assert_eq!((&k[..], v), (&b"k\0"[..], &b"v"[..]));
        /// # Ok(())
        /// # }
        /// ```
        pub fn multimap_iter<'a>(&'a self, m: &'a Multimap) -> Result<Pairs<'a>> {
            self.multimap_range(m, ..)
        }

        /// The number of pairs in the multimap.
        ///
        /// ```
        /// # fn main() -> ironbark::Result<()> {
        /// # let dir = tempfile::tempdir().unwrap();
        /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
        /// let mut tx = db.begin_write()?;
        /// let m = tx.open_multimap("m")?;
        /// tx.put_dup(&m, b"a", b"1")?;
        /// tx.put_dup(&m, b"a", b"2")?;
        /// assert_eq!(tx.multimap_len(&m)?, 2);
        /// # Ok(())
        /// # }
        /// ```
        pub fn multimap_len(&self, m: &Multimap) -> Result<u64> {
            self.len(&m.tree)
        }
    };
}

impl ReadTxn {
    multimap_reads!();

    /// Every pair of the multimap, verified as it is read (see
    /// [`ReadTxn::range_verified`]): damage is an `Err`, never a wrong
    /// pair.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// # let mut tx = db.begin_write()?;
    /// # let m = tx.open_multimap("m")?;
    /// # tx.put_dup(&m, b"a", b"1")?;
    /// # tx.commit()?;
    /// let rx = db.begin_read()?;
    /// let m = rx.multimap("m")?;
    /// assert_eq!(rx.multimap_iter_verified(&m)?.count(), 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn multimap_iter_verified<'a>(&'a self, m: &'a Multimap) -> Result<Pairs<'a>> {
        Ok(Pairs {
            inner: self.iter_verified(&m.tree)?,
            name: m.name(),
        })
    }
}

impl<'db> WriteTxn<'db> {
    multimap_reads!();

    fn open_multimap_kind(&mut self, name: &str, int_key: Option<IntWidth>) -> Result<Multimap> {
        let kind = TreeKind {
            multimap: true,
            integer_key: int_key,
        };
        Ok(Multimap {
            tree: self.open_tree_kind(name, kind)?,
            int_key,
        })
    }

    /// Opens the multimap `name` (byte keys), creating it if it does not
    /// exist; a tree of that name of another kind is
    /// [`Error::WrongTreeKind`].
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let m = tx.open_multimap("followers")?;
    /// tx.put_dup(&m, b"alice", b"bob")?;
    /// tx.open_tree("plain")?;
    /// assert!(tx.open_multimap("plain").is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub fn open_multimap(&mut self, name: &str) -> Result<Multimap> {
        self.open_multimap_kind(name, None)
    }

    /// Opens the integer-key multimap `name` (LMDB's `MDB_DUPSORT |
    /// MDB_INTEGERKEY`), creating it if it does not exist. Its keys are
    /// given and returned as the big-endian bytes of `width`
    /// (`n.to_be_bytes()`), so that they sort numerically; a key of
    /// another length is [`Error::IntegerKeySize`].
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let m = tx.open_int_multimap("by_id", ironbark::IntWidth::U32)?;
    /// tx.put_dup(&m, &7u32.to_be_bytes(), b"x")?;
    /// assert!(tx.put_dup(&m, b"seven", b"x").is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub fn open_int_multimap(&mut self, name: &str, width: IntWidth) -> Result<Multimap> {
        self.open_multimap_kind(name, Some(width))
    }

    /// Adds the pair (`key`, `value`); returns `false` if it was there
    /// already (a pair is stored once, as in LMDB). Any key and value
    /// bytes may be used, empty ones included, as long as the encoded
    /// pair fits ([`Error::PairTooLarge`], which changes nothing).
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let m = tx.open_multimap("m")?;
    /// assert!(tx.put_dup(&m, b"k", b"v")?);
    /// assert!(!tx.put_dup(&m, b"k", b"v")?);
    /// let too_long = vec![1u8; db.max_key_len()];
    /// assert!(matches!(
    ///     tx.put_dup(&m, b"k", &too_long),
    ///     Err(ironbark::Error::PairTooLarge { .. })
    /// ));
    /// # Ok(())
    /// # }
    /// ```
    pub fn put_dup(&mut self, m: &Multimap, key: &[u8], value: &[u8]) -> Result<bool> {
        m.check_key(key)?;
        let stored = encode_pair(key, value);
        let max = self.shared.limits.max_key;
        if stored.len() > max {
            return Err(Error::PairTooLarge {
                len: stored.len(),
                max,
            });
        }
        if self.get(&m.tree, &stored)?.is_some() {
            return Ok(false);
        }
        self.put(&m.tree, &stored, b"")?;
        Ok(true)
    }

    /// Removes the pair (`key`, `value`); returns whether it was there.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let m = tx.open_multimap("m")?;
    /// tx.put_dup(&m, b"k", b"1")?;
    /// tx.put_dup(&m, b"k", b"2")?;
    /// assert!(tx.delete_dup(&m, b"k", b"1")?);
    /// assert!(!tx.delete_dup(&m, b"k", b"1")?);
    /// assert_eq!(tx.count_dups(&m, b"k")?, 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn delete_dup(&mut self, m: &Multimap, key: &[u8], value: &[u8]) -> Result<bool> {
        m.check_key(key)?;
        let stored = encode_pair(key, value);
        if stored.len() > self.shared.limits.max_key {
            return Ok(false); // never stored
        }
        self.delete(&m.tree, &stored)
    }

    /// Removes every value of `key`; returns how many there were.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let m = tx.open_multimap("m")?;
    /// tx.put_dup(&m, b"k", b"1")?;
    /// tx.put_dup(&m, b"k", b"2")?;
    /// tx.put_dup(&m, b"k2", b"3")?;
    /// assert_eq!(tx.delete_all(&m, b"k")?, 2);
    /// assert_eq!(tx.multimap_len(&m)?, 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn delete_all(&mut self, m: &Multimap, key: &[u8]) -> Result<u64> {
        m.check_key(key)?;
        let bounds = pair_bounds(Bound::Included(key), Bound::Included(key));
        self.delete_range(&m.tree, bounds)
    }

    /// Removes every pair of the multimap (its pages are freed; the tree
    /// and its handles stay); returns how many there were.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let m = tx.open_multimap("m")?;
    /// tx.put_dup(&m, b"k", b"1")?;
    /// assert_eq!(tx.clear_multimap(&m)?, 1);
    /// assert_eq!(tx.multimap_len(&m)?, 0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn clear_multimap(&mut self, m: &Multimap) -> Result<u64> {
        self.clear(&m.tree)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_round_trip_and_keep_their_order() {
        let parts: [&[u8]; 9] = [
            b"", b"\0", b"\0\0", b"\0\xff", b"\xff", b"\xff\0", b"a", b"a\0", b"a\0b",
        ];
        let mut pairs = Vec::new();
        for k in parts {
            for v in parts {
                pairs.push((k, v));
            }
        }
        for &(k, v) in &pairs {
            let stored = encode_pair(k, v);
            let (dk, dv) = decode_pair(&stored).expect("decodes");
            assert_eq!((&dk[..], dv), (k, v));
        }
        for &a in &pairs {
            for &b in &pairs {
                assert_eq!(
                    a.cmp(&b),
                    encode_pair(a.0, a.1).cmp(&encode_pair(b.0, b.1)),
                    "{a:?} {b:?}"
                );
            }
        }
    }

    #[test]
    fn stored_keys_that_are_no_pair_or_no_integer_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let db = crate::Database::open(dir.path().join("bad.ib")).unwrap();
        let mut tx = db.begin_write().unwrap();
        // Written past the API, as damage that checksums cannot see would be.
        let raw = tx.open_tree_kind("m", TreeKind::MULTIMAP).unwrap();
        tx.put(&raw, b"k\0\x01", b"").unwrap();
        tx.put(&raw, b"z\0\0v", b"not empty").unwrap();
        let m = tx.multimap("m").unwrap();
        let all: Vec<_> = tx.multimap_iter(&m).unwrap().collect();
        assert_eq!(all.len(), 2);
        assert!(all
            .iter()
            .all(|p| matches!(p, Err(Error::Corrupted { .. }))));
        let dups: Vec<_> = tx.get_dups(&m, b"z").unwrap().collect();
        assert!(matches!(dups[..], [Err(Error::Corrupted { .. })]));
        let int_kind = TreeKind::int_keys(IntWidth::U32);
        let raw = tx.open_tree_kind("i", int_kind).unwrap();
        tx.put(&raw, b"12345", b"v").unwrap();
        let t = tx.int_tree("i").unwrap();
        let entries: Vec<_> = tx.int_iter(&t).unwrap().collect();
        assert!(matches!(entries[..], [Err(Error::Corrupted { .. })]));
        // Well-formed trees of each kind beside them check clean.
        let good = tx.open_int_multimap("good", IntWidth::U64).unwrap();
        tx.put_dup(&good, &7u64.to_be_bytes(), b"\0\xff").unwrap();
        let ints = tx.open_int_tree("ints", IntWidth::U32).unwrap();
        tx.put_int(&ints, 9, b"v").unwrap();
        tx.commit().unwrap();
        // `check` finds each bad entry, in the walk's order (trees by name).
        let report = db.check_report().unwrap();
        let details: Vec<&str> = report.problems.iter().map(|(_, d)| d.as_str()).collect();
        assert_eq!(details.len(), 3, "{details:?}");
        assert!(details[0].contains("integer key of 5 bytes in a tree of 4-byte keys"));
        assert!(details[1].contains("not a pair's encoding"));
        assert!(details[2].contains("holds a value of 9 bytes"));
        assert!(matches!(db.check(), Err(Error::Corrupted { .. })));
    }

    #[test]
    fn bytes_that_are_no_pair_do_not_decode() {
        for bad in [
            &b""[..],
            b"abc",
            b"a\0",
            b"a\0\x01",
            b"\0\xfe\0\0",
            b"\0\xff",
        ] {
            assert!(decode_pair(bad).is_none(), "{bad:?}");
        }
    }
}
