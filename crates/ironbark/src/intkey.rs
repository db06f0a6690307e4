//! Integer-key trees: unsigned integer keys of one width (4 or 8 bytes),
//! in numeric order (LMDB's `MDB_INTEGERKEY`).
//!
//! A key is stored as its big-endian bytes, so that the B+tree's bytewise
//! order is the numeric order and every page, search and cursor path works
//! unchanged. (LMDB stores them native-endian and compares them as
//! integers; `ironbark dump` and `load` convert.)
//!
//! Invariant: every stored key of an integer-key tree is exactly its
//! width long; a stored key of another length is damage, an `Err` when
//! read, never a panic.

use std::ops::{Bound, RangeBounds};

use crate::btree::cursor::Range;
use crate::error::{Error, Result};
use crate::kind::{IntWidth, TreeKind};
use crate::txn::read::ReadTxn;
use crate::txn::write::WriteTxn;
use crate::txn::Tree;

/// A handle to an integer-key tree: keys are unsigned integers of one
/// width ([`IntWidth`]), in numeric order. Made by
/// [`WriteTxn::open_int_tree`] or `int_tree` on either transaction; valid
/// like a [`Tree`] handle.
///
/// ```
/// # fn main() -> ironbark::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
/// let mut tx = db.begin_write()?;
/// let t = tx.open_int_tree("ids", ironbark::IntWidth::U64)?;
/// for n in [65536, 1, 256, 2] {
///     tx.put_int(&t, n, b"v")?;
/// }
/// let keys: Vec<u64> = tx.int_iter(&t)?.map(|e| e.map(|(k, _)| k)).collect::<ironbark::Result<_>>()?;
/// assert_eq!(keys, [1, 2, 256, 65536]);
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IntTree {
    tree: Tree,
    width: IntWidth,
}

impl IntTree {
    /// The tree's name.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// assert_eq!(tx.open_int_tree("ids", ironbark::IntWidth::U32)?.name(), "ids");
    /// # Ok(())
    /// # }
    /// ```
    pub fn name(&self) -> &str {
        self.tree.name()
    }

    /// The width of the tree's keys.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// use ironbark::IntWidth;
    /// let mut tx = db.begin_write()?;
    /// assert_eq!(tx.open_int_tree("ids", IntWidth::U32)?.width(), IntWidth::U32);
    /// # Ok(())
    /// # }
    /// ```
    pub fn width(&self) -> IntWidth {
        self.width
    }

    /// The stored bytes of `n`, or `IntegerKeySize` if it does not fit.
    fn encode(&self, n: u64) -> Result<([u8; 8], usize)> {
        if n > self.width.max() {
            return Err(Error::IntegerKeySize {
                name: self.tree.name().to_string(),
                width: self.width.bytes(),
                detail: format!("the key {n}"),
            });
        }
        let skip = 8 - self.width.bytes();
        Ok((n.to_be_bytes(), skip))
    }
}

/// The key of stored bytes of `width`, or `None` for another length.
fn decode(width: IntWidth, stored: &[u8]) -> Option<u64> {
    match width {
        IntWidth::U32 => stored
            .try_into()
            .ok()
            .map(u32::from_be_bytes)
            .map(u64::from),
        IntWidth::U64 => stored.try_into().ok().map(u64::from_be_bytes),
    }
}

fn bad_key(name: &str, width: IntWidth, stored: &[u8]) -> Error {
    Error::Corrupted {
        page: None,
        detail: format!(
            "integer-key tree {name:?} of {}-byte keys holds a key of {} bytes",
            width.bytes(),
            stored.len()
        ),
    }
}

/// The stored bounds of the keys in `range`, for keys of `width`: a bound
/// beyond the width's largest key clamps (`..=u64::MAX` in a tree of
/// 4-byte keys is every key).
fn stored_bounds(
    width: IntWidth,
    range: &impl RangeBounds<u64>,
) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let bytes = |n: u64| n.to_be_bytes()[8 - width.bytes()..].to_vec();
    let max = width.max();
    let lower = match range.start_bound() {
        Bound::Included(&n) if n > max => Bound::Excluded(bytes(max)),
        Bound::Excluded(&n) if n >= max => Bound::Excluded(bytes(max)),
        Bound::Included(&n) => Bound::Included(bytes(n)),
        Bound::Excluded(&n) => Bound::Excluded(bytes(n)),
        Bound::Unbounded => Bound::Unbounded,
    };
    let upper = match range.end_bound() {
        Bound::Included(&n) | Bound::Excluded(&n) if n > max => Bound::Unbounded,
        Bound::Included(&n) => Bound::Included(bytes(n)),
        Bound::Excluded(&n) => Bound::Excluded(bytes(n)),
        Bound::Unbounded => Bound::Unbounded,
    };
    (lower, upper)
}

/// The entries of an integer-key tree, in numeric key order (`.rev()`
/// for reverse): see [`ReadTxn::int_range`].
pub struct IntRange<'a> {
    inner: Range<'a>,
    width: IntWidth,
    name: &'a str,
}

impl<'a> IntRange<'a> {
    fn entry(&self, item: Result<(&'a [u8], &'a [u8])>) -> Result<(u64, &'a [u8])> {
        let (stored, value) = item?;
        let key =
            decode(self.width, stored).ok_or_else(|| bad_key(self.name, self.width, stored))?;
        Ok((key, value))
    }
}

impl<'a> Iterator for IntRange<'a> {
    type Item = Result<(u64, &'a [u8])>;

    fn next(&mut self) -> Option<Self::Item> {
        let item = self.inner.next()?;
        Some(self.entry(item))
    }
}

impl DoubleEndedIterator for IntRange<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        let item = self.inner.next_back()?;
        Some(self.entry(item))
    }
}

/// The reads of an integer-key tree, the same on both kinds of
/// transaction.
macro_rules! int_reads {
    () => {
        /// A handle to the existing integer-key tree `name` (of either
        /// width); `NoSuchTree`, or `WrongTreeKind` if it is not one (a
        /// plain tree, a multimap).
        ///
        /// ```
        /// # fn main() -> ironbark::Result<()> {
        /// # let dir = tempfile::tempdir().unwrap();
        /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
        /// use ironbark::IntWidth;
        /// let mut tx = db.begin_write()?;
        /// tx.open_int_tree("ids", IntWidth::U32)?;
        /// tx.commit()?;
        /// let rx = db.begin_read()?;
        /// assert_eq!(rx.int_tree("ids")?.width(), IntWidth::U32);
        /// # Ok(())
        /// # }
        /// ```
        pub fn int_tree(&self, name: &str) -> Result<IntTree> {
            let kind = self.tree_kind(name)?;
            let width = match kind.integer_key {
                Some(w) if !kind.multimap => w,
                _ => IntWidth::U64,
            };
            Ok(IntTree {
                tree: self.tree_of_kind(name, TreeKind::int_keys(width))?,
                width,
            })
        }

        /// The value stored under the integer `key` (`None` also for a key
        /// too large for the tree's width, which cannot be stored).
        ///
        /// ```
        /// # fn main() -> ironbark::Result<()> {
        /// # let dir = tempfile::tempdir().unwrap();
        /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
        /// let mut tx = db.begin_write()?;
        /// let t = tx.open_int_tree("ids", ironbark::IntWidth::U32)?;
        /// tx.put_int(&t, 42, b"answer")?;
        /// assert_eq!(tx.get_int(&t, 42)?, Some(&b"answer"[..]));
        /// assert_eq!(tx.get_int(&t, u64::MAX)?, None);
        /// # Ok(())
        /// # }
        /// ```
        pub fn get_int<'a>(&'a self, t: &IntTree, key: u64) -> Result<Option<&'a [u8]>> {
            match t.encode(key) {
                Ok((bytes, skip)) => self.get(&t.tree, &bytes[skip..]),
                Err(_) => Ok(None),
            }
        }

        /// The entries with keys in `range`, in numeric order (`.rev()` for
        /// reverse).
        ///
        /// ```
        /// # fn main() -> ironbark::Result<()> {
        /// # let dir = tempfile::tempdir().unwrap();
        /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
        /// let mut tx = db.begin_write()?;
        /// let t = tx.open_int_tree("ids", ironbark::IntWidth::U64)?;
        /// for n in [1, 2, 256, 65536] {
        ///     tx.put_int(&t, n, b"v")?;
        /// }
        /// let keys: Vec<u64> = tx
        ///     .int_range(&t, 2..=256)?
        ///     .map(|e| e.map(|(k, _)| k))
        ///     .collect::<ironbark::Result<_>>()?;
        /// assert_eq!(keys, [2, 256]);
        /// # Ok(())
        /// # }
        /// ```
        pub fn int_range<'a, R: RangeBounds<u64>>(
            &'a self,
            t: &'a IntTree,
            range: R,
        ) -> Result<IntRange<'a>> {
            Ok(IntRange {
                inner: self.range(&t.tree, stored_bounds(t.width, &range))?,
                width: t.width,
                name: t.name(),
            })
        }

        /// Every entry of the tree, in numeric key order.
        ///
        /// ```
        /// # fn main() -> ironbark::Result<()> {
        /// # let dir = tempfile::tempdir().unwrap();
        /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
        /// let mut tx = db.begin_write()?;
        /// let t = tx.open_int_tree("ids", ironbark::IntWidth::U32)?;
        /// tx.put_int(&t, 300, b"b")?;
        /// tx.put_int(&t, 5, b"a")?;
        /// assert_eq!(tx.int_iter(&t)?.next().transpose()?, Some((5, &b"a"[..])));
        /// # Ok(())
        /// # }
        /// ```
        pub fn int_iter<'a>(&'a self, t: &'a IntTree) -> Result<IntRange<'a>> {
            self.int_range(t, ..)
        }

        /// The number of entries of the tree.
        ///
        /// ```
        /// # fn main() -> ironbark::Result<()> {
        /// # let dir = tempfile::tempdir().unwrap();
        /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
        /// let mut tx = db.begin_write()?;
        /// let t = tx.open_int_tree("ids", ironbark::IntWidth::U32)?;
        /// tx.put_int(&t, 1, b"a")?;
        /// assert_eq!(tx.int_len(&t)?, 1);
        /// # Ok(())
        /// # }
        /// ```
        pub fn int_len(&self, t: &IntTree) -> Result<u64> {
            self.len(&t.tree)
        }
    };
}

impl ReadTxn {
    int_reads!();

    /// Every entry of the tree, verified as it is read (see
    /// [`ReadTxn::range_verified`]).
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// # let mut tx = db.begin_write()?;
    /// # let t = tx.open_int_tree("ids", ironbark::IntWidth::U32)?;
    /// # tx.put_int(&t, 1, b"a")?;
    /// # tx.commit()?;
    /// let rx = db.begin_read()?;
    /// let t = rx.int_tree("ids")?;
    /// assert_eq!(rx.int_iter_verified(&t)?.count(), 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn int_iter_verified<'a>(&'a self, t: &'a IntTree) -> Result<IntRange<'a>> {
        Ok(IntRange {
            inner: self.iter_verified(&t.tree)?,
            width: t.width,
            name: t.name(),
        })
    }
}

impl<'db> WriteTxn<'db> {
    int_reads!();

    /// Opens the integer-key tree `name` with keys of `width`, creating it
    /// if it does not exist; a tree of that name of another kind or width
    /// is [`Error::WrongTreeKind`].
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// use ironbark::IntWidth;
    /// let mut tx = db.begin_write()?;
    /// tx.open_int_tree("ids", IntWidth::U32)?;
    /// assert!(matches!(
    ///     tx.open_int_tree("ids", IntWidth::U64),
    ///     Err(ironbark::Error::WrongTreeKind { .. })
    /// ));
    /// # Ok(())
    /// # }
    /// ```
    pub fn open_int_tree(&mut self, name: &str, width: IntWidth) -> Result<IntTree> {
        Ok(IntTree {
            tree: self.open_tree_kind(name, TreeKind::int_keys(width))?,
            width,
        })
    }

    /// Stores `value` under the integer `key`, replacing any value there.
    /// A key above the width's largest is [`Error::IntegerKeySize`] and
    /// changes nothing; otherwise the errors are [`WriteTxn::put`]'s.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_int_tree("ids", ironbark::IntWidth::U32)?;
    /// tx.put_int(&t, u64::from(u32::MAX), b"largest")?;
    /// assert!(matches!(
    ///     tx.put_int(&t, 1 << 32, b"too large"),
    ///     Err(ironbark::Error::IntegerKeySize { .. })
    /// ));
    /// # Ok(())
    /// # }
    /// ```
    pub fn put_int(&mut self, t: &IntTree, key: u64, value: &[u8]) -> Result<()> {
        let (bytes, skip) = t.encode(key)?;
        self.put(&t.tree, &bytes[skip..], value)
    }

    /// Removes the integer `key`; returns whether it was there.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_int_tree("ids", ironbark::IntWidth::U64)?;
    /// tx.put_int(&t, 7, b"v")?;
    /// assert!(tx.delete_int(&t, 7)?);
    /// assert!(!tx.delete_int(&t, 7)?);
    /// # Ok(())
    /// # }
    /// ```
    pub fn delete_int(&mut self, t: &IntTree, key: u64) -> Result<bool> {
        match t.encode(key) {
            Ok((bytes, skip)) => self.delete(&t.tree, &bytes[skip..]),
            Err(_) => Ok(false),
        }
    }
}
