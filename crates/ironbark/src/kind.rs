//! Tree kinds: what the keys of a tree mean. A *plain* tree maps byte keys
//! to values; a *multimap* keeps a sorted set of values per key (LMDB's
//! `MDB_DUPSORT`, see `multimap.rs`); an *integer-key* tree has unsigned
//! integer keys of one width, in numeric order (LMDB's `MDB_INTEGERKEY`,
//! see `intkey.rs`). Both can be combined.
//!
//! The kind is fixed when the tree is created and persisted in its catalog
//! record (one flag byte, see docs/file-format.md); a handle of one kind is
//! only made for a tree of that kind, so the byte encodings of multimap and
//! integer keys are never read or written through the wrong API.
//!
//! Invariant: `TreeKind::from_flags(k.flags()) == Some(k)` for every kind,
//! and every flag byte that is not a kind's decodes to `None` (a file of a
//! newer version, or damage), never to a guess.

use std::borrow::Cow;
use std::fmt;

/// The width of the keys of an integer-key tree: LMDB's `MDB_INTEGERKEY`
/// keys are `unsigned int` (4 bytes) or `size_t` (8 bytes), one width per
/// database.
///
/// ```
/// use ironbark::IntWidth;
/// assert_eq!(IntWidth::U32.bytes(), 4);
/// assert_eq!(IntWidth::U64.max(), u64::MAX);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IntWidth {
    /// 4-byte keys, `0..=u32::MAX`.
    U32,
    /// 8-byte keys, `0..=u64::MAX`.
    U64,
}

impl IntWidth {
    /// The width in bytes: 4 or 8.
    ///
    /// ```
    /// assert_eq!(ironbark::IntWidth::U64.bytes(), 8);
    /// ```
    pub fn bytes(self) -> usize {
        match self {
            IntWidth::U32 => 4,
            IntWidth::U64 => 8,
        }
    }

    /// The largest key of this width.
    ///
    /// ```
    /// assert_eq!(ironbark::IntWidth::U32.max(), u64::from(u32::MAX));
    /// ```
    pub fn max(self) -> u64 {
        match self {
            IntWidth::U32 => u64::from(u32::MAX),
            IntWidth::U64 => u64::MAX,
        }
    }

    /// The width of `len`-byte keys, if it is one (4 or 8).
    ///
    /// ```
    /// use ironbark::IntWidth;
    /// assert_eq!(IntWidth::of_len(4), Some(IntWidth::U32));
    /// assert_eq!(IntWidth::of_len(2), None);
    /// ```
    pub fn of_len(len: usize) -> Option<IntWidth> {
        match len {
            4 => Some(IntWidth::U32),
            8 => Some(IntWidth::U64),
            _ => None,
        }
    }
}

/// What the keys of a tree mean, fixed when the tree is created: a plain
/// tree ([`TreeKind::PLAIN`], made by [`WriteTxn::open_tree`](crate::WriteTxn::open_tree)), a multimap
/// ([`WriteTxn::open_multimap`](crate::WriteTxn::open_multimap)), an integer-key tree
/// ([`WriteTxn::open_int_tree`](crate::WriteTxn::open_int_tree)), or an integer-key multimap
/// ([`WriteTxn::open_int_multimap`](crate::WriteTxn::open_int_multimap)). Opening a tree as another kind than
/// it was created as is [`Error::WrongTreeKind`](crate::Error::WrongTreeKind).
///
/// ```
/// # fn main() -> ironbark::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
/// use ironbark::{IntWidth, TreeKind};
/// let mut tx = db.begin_write()?;
/// tx.open_multimap("tags")?;
/// assert_eq!(tx.tree_kind("tags")?, TreeKind::MULTIMAP);
/// assert!(matches!(tx.open_tree("tags"), Err(ironbark::Error::WrongTreeKind { .. })));
/// assert_eq!(TreeKind::int_keys(IntWidth::U32).integer_key, Some(IntWidth::U32));
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct TreeKind {
    /// Each key holds a sorted set of values (LMDB's `MDB_DUPSORT`).
    pub multimap: bool,
    /// The keys are unsigned integers of this width, in numeric order
    /// (LMDB's `MDB_INTEGERKEY`).
    pub integer_key: Option<IntWidth>,
}

/// Flag bits of a tree record (docs/file-format.md, "Tree record").
const FLAG_MULTIMAP: u8 = 0x01;
const FLAG_INT_U32: u8 = 0x02;
const FLAG_INT_U64: u8 = 0x04;

impl TreeKind {
    /// A plain tree: byte keys, one value each, in byte order.
    pub const PLAIN: TreeKind = TreeKind {
        multimap: false,
        integer_key: None,
    };

    /// A multimap with byte keys.
    pub const MULTIMAP: TreeKind = TreeKind {
        multimap: true,
        integer_key: None,
    };

    /// An integer-key tree of keys of `width`.
    ///
    /// ```
    /// use ironbark::{IntWidth, TreeKind};
    /// assert!(!TreeKind::int_keys(IntWidth::U64).multimap);
    /// ```
    pub const fn int_keys(width: IntWidth) -> TreeKind {
        TreeKind {
            multimap: false,
            integer_key: Some(width),
        }
    }

    /// An integer-key multimap of keys of `width`.
    ///
    /// ```
    /// use ironbark::{IntWidth, TreeKind};
    /// assert!(TreeKind::int_multimap(IntWidth::U32).multimap);
    /// ```
    pub const fn int_multimap(width: IntWidth) -> TreeKind {
        TreeKind {
            multimap: true,
            integer_key: Some(width),
        }
    }

    /// The flag byte of a tree record.
    pub(crate) fn flags(self) -> u8 {
        let int = match self.integer_key {
            None => 0,
            Some(IntWidth::U32) => FLAG_INT_U32,
            Some(IntWidth::U64) => FLAG_INT_U64,
        };
        int | if self.multimap { FLAG_MULTIMAP } else { 0 }
    }

    /// The kind of a flag byte, or `None` for bits this version does not
    /// know (or both widths at once).
    pub(crate) fn from_flags(flags: u8) -> Option<TreeKind> {
        let integer_key = match flags & !FLAG_MULTIMAP {
            0 => None,
            FLAG_INT_U32 => Some(IntWidth::U32),
            FLAG_INT_U64 => Some(IntWidth::U64),
            _ => return None,
        };
        Some(TreeKind {
            multimap: flags & FLAG_MULTIMAP != 0,
            integer_key,
        })
    }
}

impl TreeKind {
    /// Why a leaf entry of a tree of this kind is not one such a tree
    /// stores (`None` if it is): an integer key of another width than the
    /// tree's, a multimap key that is not a pair's encoding, or a multimap
    /// entry with a value (pairs are stored as keys alone). `check` reports
    /// these; reads already refuse them one at a time.
    pub(crate) fn entry_problem(self, key: &[u8], value_len: u64) -> Option<String> {
        if self.multimap {
            if value_len != 0 {
                return Some(format!("multimap entry holds a value of {value_len} bytes"));
            }
            let Some((k, _)) = decode_pair(key) else {
                return Some("multimap key is not a pair's encoding".to_string());
            };
            if let Some(w) = self.integer_key {
                if k.len() != w.bytes() {
                    return Some(format!(
                        "integer key of {} bytes in a tree of {}-byte keys",
                        k.len(),
                        w.bytes()
                    ));
                }
            }
            return None;
        }
        match self.integer_key {
            Some(w) if key.len() != w.bytes() => Some(format!(
                "integer key of {} bytes in a tree of {}-byte keys",
                key.len(),
                w.bytes()
            )),
            _ => None,
        }
    }
}

impl fmt::Display for TreeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = if self.multimap { "multimap" } else { "tree" };
        match self.integer_key {
            None if !self.multimap => write!(f, "plain tree"),
            None => write!(f, "{what}"),
            Some(IntWidth::U32) => write!(f, "integer-key {what} (u32 keys)"),
            Some(IntWidth::U64) => write!(f, "integer-key {what} (u64 keys)"),
        }
    }
}

// The multimap pair encoding: pure functions on bytes, here at the bottom
// so that `check.rs` can verify stored pairs without importing the
// transactions (`multimap.rs` argues the encoding: it preserves the order
// of (key, value) and is injective).

/// Appends `escape(key) 00 00` to `out`: the prefix of every pair of `key`.
pub(crate) fn encode_key(key: &[u8], out: &mut Vec<u8>) {
    for &b in key {
        out.push(b);
        if b == 0 {
            out.push(0xff);
        }
    }
    out.extend_from_slice(&[0, 0]);
}

/// The stored key of the pair `(key, value)`.
pub(crate) fn encode_pair(key: &[u8], value: &[u8]) -> Vec<u8> {
    let zeros = key.iter().filter(|&&b| b == 0).count();
    let mut out = Vec::with_capacity(key.len() + zeros + 2 + value.len());
    encode_key(key, &mut out);
    out.extend_from_slice(value);
    out
}

/// The pair a stored key encodes, or `None` if it is not an encoding. The
/// key is borrowed unless it holds zero bytes.
pub(crate) fn decode_pair(stored: &[u8]) -> Option<(Cow<'_, [u8]>, &[u8])> {
    let mut i = 0;
    let mut escaped = false;
    loop {
        let z = i + stored.get(i..)?.iter().position(|&b| b == 0)?;
        match stored.get(z + 1)? {
            0 => {
                let key = &stored[..z];
                let value = &stored[z + 2..];
                if !escaped {
                    return Some((Cow::Borrowed(key), value));
                }
                let mut out = Vec::with_capacity(key.len());
                let mut j = 0;
                while j < key.len() {
                    out.push(key[j]);
                    // Every zero byte before the terminator is escaped.
                    j += if key[j] == 0 { 2 } else { 1 };
                }
                return Some((Cow::Owned(out), value));
            }
            0xff => {
                escaped = true;
                i = z + 2;
            }
            _ => return None,
        }
    }
}
