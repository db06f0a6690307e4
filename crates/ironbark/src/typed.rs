//! Typed access: a thin, optional codec layer over the byte-string API, in
//! the manner of heed's `Database<K, V>` and redb's `TableDefinition<K, V>`.
//! A [`TypedTree<K, V>`] wraps a [`Tree`] handle and two codecs: keys and
//! values go in as Rust values, are encoded to bytes for the engine, and
//! come back decoded. It is built on the public API alone; the engine never
//! sees a type, only bytes, so a typed and an untyped handle to one tree
//! read and write the same entries.
//!
//! Invariant: every key codec (every implementation of [`Key`]) preserves
//! order: for any two keys `a` and `b`, `encode(a) < encode(b)` bytewise
//! if and only if `a < b`. So the tree's byte order is the keys' order, and
//! `first`, `last`, the nearest-key lookups and ranges answer in the typed
//! order. That is why integers are big-endian, signed ones with the sign
//! bit flipped (so that `-1`, `0xff..ff` in two's complement, sorts below
//! `0`), and why only fixed-width integers make tuple keys (a concatenation
//! of variable-length parts would not keep the order).
//!
//! Decoding never trusts the bytes: a value of the wrong length, a string
//! that is not UTF-8, bytes another program wrote, all decode to
//! [`Error::Codec`], never a panic.
//!
//! ```
//! # fn main() -> ironbark::Result<()> {
//! # let dir = tempfile::tempdir().unwrap();
//! # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
//! use ironbark::typed::TypedTree;
//!
//! let mut tx = db.begin_write()?;
//! let ages: TypedTree<&str, u32> = TypedTree::open(&mut tx, "ages")?;
//! ages.put(&mut tx, "bob", &25)?;
//! ages.put(&mut tx, "alice", &30)?;
//! tx.commit()?;
//!
//! let rx = db.begin_read()?;
//! assert_eq!(ages.get(&rx, "alice")?, Some(30));
//! let names: Vec<&str> = ages
//!     .iter(&rx)?
//!     .map(|entry| entry.map(|(name, _age)| name))
//!     .collect::<ironbark::Result<_>>()?;
//! assert_eq!(names, ["alice", "bob"]); // borrowed from the snapshot
//! # Ok(())
//! # }
//! ```

use std::borrow::Borrow;
use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};

use crate::btree::cursor::Range;
use crate::error::{Error, Result};
use crate::txn::read::ReadTxn;
use crate::txn::write::WriteTxn;
use crate::txn::Tree;

/// A codec for values: how a Rust value becomes the bytes stored and how
/// stored bytes become a value again. Every [`Key`] codec is one too.
///
/// The codec is a type of its own, often the type it encodes (`u64`,
/// `String`), sometimes a marker (`&str`, whose decoded values borrow the
/// transaction; `SerdeBincode<T>` with the `serde` feature).
///
/// A codec of one's own:
///
/// ```
/// use ironbark::typed::{Value, codec_error};
///
/// /// A temperature in tenths of a degree, stored as two bytes.
/// struct Tenths;
///
/// impl Value for Tenths {
///     type Input = i16;
///     type Bytes<'a> = [u8; 2];
///     type Decoded<'a> = i16;
///     type Owned = i16;
///     fn encode(value: &i16) -> ironbark::Result<[u8; 2]> {
///         Ok(value.to_le_bytes())
///     }
///     fn decode(bytes: &[u8]) -> ironbark::Result<i16> {
///         let bytes: [u8; 2] = bytes
///             .try_into()
///             .map_err(|_| codec_error("Tenths", format!("{} bytes, not 2", bytes.len())))?;
///         Ok(i16::from_le_bytes(bytes))
///     }
///     fn decode_owned(bytes: Vec<u8>) -> ironbark::Result<i16> {
///         Self::decode(&bytes)
///     }
/// }
///
/// assert_eq!(Tenths::decode(&Tenths::encode(&-15)?)?, -15);
/// assert!(Tenths::decode(b"abc").is_err());
/// # Ok::<(), ironbark::Error>(())
/// ```
pub trait Value {
    /// What a write takes, by reference: `u64` for `u64`, `str` for `&str`
    /// and `String`, `[u8]` for `&[u8]` and `Vec<u8>`.
    type Input: ?Sized;
    /// The encoded bytes of an input: an array for an integer, the input's
    /// own bytes for a string or a slice (no copy).
    type Bytes<'a>: AsRef<[u8]>;
    /// What a read returns, borrowing the transaction where the type
    /// allows (`&str`, `&[u8]`).
    type Decoded<'a>;
    /// What a call that removes or replaces an entry returns: the pages it
    /// was read from may be freed, so it cannot borrow them.
    type Owned;
    /// The bytes to store for `value`.
    fn encode(value: &Self::Input) -> Result<Self::Bytes<'_>>;
    /// The value stored as `bytes`; [`Error::Codec`] if they are not an
    /// encoding of one.
    fn decode(bytes: &[u8]) -> Result<Self::Decoded<'_>>;
    /// The value stored as `bytes`, taking them (so a string or a byte
    /// vector needs no copy); [`Error::Codec`] as for `decode`.
    fn decode_owned(bytes: Vec<u8>) -> Result<Self::Owned>;
}

/// A codec for keys: a [`Value`] codec whose encoding preserves order
/// (`encode(a) < encode(b)` bytewise if and only if `a < b`), so that the
/// tree's order is the keys' order. Implement it only for such a codec:
/// ranges, `first`/`last` and the nearest-key lookups rely on it.
///
/// ```
/// use ironbark::typed::{Key, Value};
/// fn encoded<K: Key>(key: &K::Input) -> Vec<u8> {
///     K::encode(key).unwrap().as_ref().to_vec()
/// }
/// assert!(encoded::<i32>(&-1) < encoded::<i32>(&0));
/// assert!(encoded::<&str>("ab") < encoded::<&str>("b"));
/// assert!(encoded::<(u16, i8)>(&(1, 5)) < encoded::<(u16, i8)>(&(2, -5)));
/// ```
pub trait Key: Value {}

/// The [`Error::Codec`] of the codec named `codec` (bytes it cannot
/// decode, or a value it cannot encode), for codecs written outside this
/// crate.
///
/// ```
/// let e = ironbark::typed::codec_error("u64", "3 bytes, not 8");
/// assert!(matches!(e, ironbark::Error::Codec { codec: "u64", .. }));
/// assert_eq!(e.to_string(), "u64 codec: 3 bytes, not 8");
/// ```
pub fn codec_error(codec: &'static str, detail: impl Into<String>) -> Error {
    Error::Codec {
        codec,
        detail: detail.into(),
    }
}

/// `bytes` as an array of `N`, or a codec error naming `codec`.
fn exact<const N: usize>(codec: &'static str, bytes: &[u8]) -> Result<[u8; N]> {
    bytes.try_into().map_err(|_| {
        codec_error(
            codec,
            format!(
                "expected {N} bytes, found {} (not written by this codec?)",
                bytes.len()
            ),
        )
    })
}

/// Big-endian, so that the byte order is the numeric order.
macro_rules! unsigned_codec {
    ($($t:ty),*) => {$(
        impl Value for $t {
            type Input = $t;
            type Bytes<'a> = [u8; std::mem::size_of::<$t>()];
            type Decoded<'a> = $t;
            type Owned = $t;
            fn encode(value: &$t) -> Result<Self::Bytes<'_>> {
                Ok(value.to_be_bytes())
            }
            fn decode(bytes: &[u8]) -> Result<$t> {
                Ok(<$t>::from_be_bytes(exact(stringify!($t), bytes)?))
            }
            fn decode_owned(bytes: Vec<u8>) -> Result<$t> {
                Self::decode(&bytes)
            }
        }
        impl Key for $t {}
        impl sealed::FixedWidthCodec for $t {}
        impl FixedWidth for $t {
            const WIDTH: usize = std::mem::size_of::<$t>();
        }
    )*};
}

/// Big-endian with the sign bit flipped (`x ^ MIN`): two's complement
/// puts negative numbers above positive ones bytewise; the flip maps
/// `MIN..=MAX` onto `0..=unsigned MAX` in order.
macro_rules! signed_codec {
    ($($t:ty),*) => {$(
        impl Value for $t {
            type Input = $t;
            type Bytes<'a> = [u8; std::mem::size_of::<$t>()];
            type Decoded<'a> = $t;
            type Owned = $t;
            fn encode(value: &$t) -> Result<Self::Bytes<'_>> {
                Ok((value ^ <$t>::MIN).to_be_bytes())
            }
            fn decode(bytes: &[u8]) -> Result<$t> {
                Ok(<$t>::from_be_bytes(exact(stringify!($t), bytes)?) ^ <$t>::MIN)
            }
            fn decode_owned(bytes: Vec<u8>) -> Result<$t> {
                Self::decode(&bytes)
            }
        }
        impl Key for $t {}
        impl sealed::FixedWidthCodec for $t {}
        impl FixedWidth for $t {
            const WIDTH: usize = std::mem::size_of::<$t>();
        }
    )*};
}

unsigned_codec!(u8, u16, u32, u64, u128);
signed_codec!(i8, i16, i32, i64, i128);

/// UTF-8 bytes, as they are (bytewise order is the order of `str`);
/// decoded values borrow the transaction.
impl Value for &str {
    type Input = str;
    type Bytes<'a> = &'a [u8];
    type Decoded<'a> = &'a str;
    type Owned = String;
    fn encode(value: &str) -> Result<&[u8]> {
        Ok(value.as_bytes())
    }
    fn decode(bytes: &[u8]) -> Result<&str> {
        std::str::from_utf8(bytes).map_err(|e| codec_error("str", format!("not UTF-8: {e}")))
    }
    fn decode_owned(bytes: Vec<u8>) -> Result<String> {
        String::from_utf8(bytes).map_err(|e| codec_error("str", format!("not UTF-8: {e}")))
    }
}
impl Key for &str {}

/// UTF-8 bytes, as `&str`, decoded into an owned `String`.
impl Value for String {
    type Input = str;
    type Bytes<'a> = &'a [u8];
    type Decoded<'a> = String;
    type Owned = String;
    fn encode(value: &str) -> Result<&[u8]> {
        Ok(value.as_bytes())
    }
    fn decode(bytes: &[u8]) -> Result<String> {
        <&str>::decode(bytes).map(str::to_owned)
    }
    fn decode_owned(bytes: Vec<u8>) -> Result<String> {
        <&str>::decode_owned(bytes)
    }
}
impl Key for String {}

/// The bytes as they are; decoded values borrow the transaction.
impl Value for &[u8] {
    type Input = [u8];
    type Bytes<'a> = &'a [u8];
    type Decoded<'a> = &'a [u8];
    type Owned = Vec<u8>;
    fn encode(value: &[u8]) -> Result<&[u8]> {
        Ok(value)
    }
    fn decode(bytes: &[u8]) -> Result<&[u8]> {
        Ok(bytes)
    }
    fn decode_owned(bytes: Vec<u8>) -> Result<Vec<u8>> {
        Ok(bytes)
    }
}
impl Key for &[u8] {}

/// The bytes as they are, decoded into an owned `Vec<u8>`.
impl Value for Vec<u8> {
    type Input = [u8];
    type Bytes<'a> = &'a [u8];
    type Decoded<'a> = Vec<u8>;
    type Owned = Vec<u8>;
    fn encode(value: &[u8]) -> Result<&[u8]> {
        Ok(value)
    }
    fn decode(bytes: &[u8]) -> Result<Vec<u8>> {
        Ok(bytes.to_vec())
    }
    fn decode_owned(bytes: Vec<u8>) -> Result<Vec<u8>> {
        Ok(bytes)
    }
}
impl Key for Vec<u8> {}

/// Exactly `N` bytes; any other length does not decode.
impl<const N: usize> Value for [u8; N] {
    type Input = [u8; N];
    type Bytes<'a> = &'a [u8];
    type Decoded<'a> = [u8; N];
    type Owned = [u8; N];
    fn encode(value: &[u8; N]) -> Result<&[u8]> {
        Ok(value)
    }
    fn decode(bytes: &[u8]) -> Result<[u8; N]> {
        exact("[u8; N]", bytes)
    }
    fn decode_owned(bytes: Vec<u8>) -> Result<[u8; N]> {
        Self::decode(&bytes)
    }
}
impl<const N: usize> Key for [u8; N] {}

/// No bytes: for trees that are sets of keys. Anything but the empty value
/// does not decode.
impl Value for () {
    type Input = ();
    type Bytes<'a> = [u8; 0];
    type Decoded<'a> = ();
    type Owned = ();
    fn encode(_: &()) -> Result<[u8; 0]> {
        Ok([])
    }
    fn decode(bytes: &[u8]) -> Result<()> {
        exact::<0>("()", bytes).map(|_| ())
    }
    fn decode_owned(bytes: Vec<u8>) -> Result<()> {
        Self::decode(&bytes)
    }
}

/// A key codec of a fixed number of bytes, which is what lets a tuple of
/// them be encoded by concatenation and keep the order (the parts of two
/// tuples line up byte for byte). Sealed: the integer codecs.
pub trait FixedWidth:
    Key + for<'a> Value<Input = Self, Decoded<'a> = Self> + Sized + sealed::FixedWidthCodec
{
    /// The encoded length, in bytes.
    #[doc(hidden)]
    const WIDTH: usize;
}

/// The next `width` bytes of `rest`, moving `rest` past them.
fn take_part<'b>(rest: &mut &'b [u8], width: usize) -> Result<&'b [u8]> {
    let (part, tail) = rest
        .split_at_checked(width)
        .ok_or_else(|| codec_error("tuple", "too few bytes for its parts"))?;
    *rest = tail;
    Ok(part)
}

macro_rules! tuple_codec {
    ($($name:ident)+) => {
        /// The parts' encodings one after another: the order is the
        /// tuple's (lexicographic, part by part). Decoding checks the
        /// total length.
        impl<$($name: FixedWidth),+> Value for ($($name,)+) {
            type Input = ($($name,)+);
            type Bytes<'a> = Vec<u8>;
            type Decoded<'a> = ($($name,)+);
            type Owned = ($($name,)+);
            #[allow(non_snake_case)]
            fn encode(value: &Self::Input) -> Result<Vec<u8>> {
                let ($($name,)+) = value;
                let mut out = Vec::with_capacity(0 $(+ $name::WIDTH)+);
                $(out.extend_from_slice($name::encode($name)?.as_ref());)+
                Ok(out)
            }
            fn decode(bytes: &[u8]) -> Result<Self::Decoded<'_>> {
                let width = 0 $(+ $name::WIDTH)+;
                if bytes.len() != width {
                    return Err(codec_error(
                        "tuple",
                        format!("expected {width} bytes, found {} (not written by this codec?)", bytes.len()),
                    ));
                }
                let mut rest = bytes;
                Ok(($($name::decode(take_part(&mut rest, $name::WIDTH)?)?,)+))
            }
            fn decode_owned(bytes: Vec<u8>) -> Result<Self::Owned> {
                Self::decode(&bytes)
            }
        }
        impl<$($name: FixedWidth),+> Key for ($($name,)+) {}
    };
}

tuple_codec!(A B);
tuple_codec!(A B C);
tuple_codec!(A B C D);

#[cfg(feature = "serde")]
pub use serde_codec::SerdeBincode;

#[cfg(feature = "serde")]
mod serde_codec {
    use super::{codec_error, Value};
    use crate::error::Result;
    use bincode::Options;
    use std::marker::PhantomData;

    /// Values of any serde type, encoded with bincode (variable-length
    /// integers, little-endian, no trailing bytes allowed). A value codec
    /// only: bincode's bytes do not sort in the values' order, so it is no
    /// [`Key`](super::Key). Needs the `serde` feature.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// use ironbark::typed::{SerdeBincode, TypedTree};
    ///
    /// #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    /// struct User {
    ///     name: String,
    ///     age: u32,
    /// }
    ///
    /// let mut tx = db.begin_write()?;
    /// let users: TypedTree<u64, SerdeBincode<User>> = TypedTree::open(&mut tx, "users")?;
    /// let alice = User { name: "alice".into(), age: 30 };
    /// users.put(&mut tx, &1, &alice)?;
    /// assert_eq!(users.get(&tx, &1)?, Some(alice));
    /// # Ok(())
    /// # }
    /// ```
    pub struct SerdeBincode<T>(PhantomData<fn() -> T>);

    /// The one configuration both directions use. The limit keeps a length
    /// prefix in foreign bytes from asking for more than the bytes hold.
    fn options(limit: usize) -> impl Options {
        bincode::DefaultOptions::new().with_limit(limit as u64)
    }

    impl<T: serde::Serialize + serde::de::DeserializeOwned> Value for SerdeBincode<T> {
        type Input = T;
        type Bytes<'a> = Vec<u8>;
        type Decoded<'a> = T;
        type Owned = T;
        fn encode(value: &T) -> Result<Vec<u8>> {
            options(crate::MAX_VALUE_LEN)
                .serialize(value)
                .map_err(|e| codec_error(std::any::type_name::<T>(), format!("cannot encode: {e}")))
        }
        fn decode(bytes: &[u8]) -> Result<T> {
            options(bytes.len())
                .deserialize(bytes)
                .map_err(|e| codec_error(std::any::type_name::<T>(), format!("cannot decode: {e}")))
        }
        fn decode_owned(bytes: Vec<u8>) -> Result<T> {
            Self::decode(&bytes)
        }
    }
}

mod sealed {
    use super::*;

    /// The reads a [`TypedTree`] makes, the same on both kinds of
    /// transaction. In a private module, so the public [`ReadableTxn`]
    /// cannot be implemented, nor its methods called, outside this crate.
    pub trait RawReads {
        fn tree(&self, name: &str) -> Result<Tree>;
        fn len(&self, tree: &Tree) -> Result<u64>;
        fn get(&self, tree: &Tree, key: &[u8]) -> Result<Option<&[u8]>>;
        fn contains_key(&self, tree: &Tree, key: &[u8]) -> Result<bool>;
        fn first(&self, tree: &Tree) -> Result<Option<(&[u8], &[u8])>>;
        fn last(&self, tree: &Tree) -> Result<Option<(&[u8], &[u8])>>;
        fn nearest(
            &self,
            tree: &Tree,
            key: &[u8],
            which: Nearest,
        ) -> Result<Option<(&[u8], &[u8])>>;
        fn range(&self, tree: &Tree, lower: Bound<&[u8]>, upper: Bound<&[u8]>)
            -> Result<Range<'_>>;
    }

    /// What keeps [`FixedWidth`] to this crate's integer codecs, whose
    /// widths it vouches for.
    pub trait FixedWidthCodec {}

    #[derive(Clone, Copy)]
    pub enum Nearest {
        Ge,
        Gt,
        Le,
        Lt,
    }

    macro_rules! raw_reads {
        ($t:ty) => {
            impl RawReads for $t {
                fn tree(&self, name: &str) -> Result<Tree> {
                    <$t>::tree(self, name)
                }
                fn len(&self, tree: &Tree) -> Result<u64> {
                    <$t>::len(self, tree)
                }
                fn get(&self, tree: &Tree, key: &[u8]) -> Result<Option<&[u8]>> {
                    <$t>::get(self, tree, key)
                }
                fn contains_key(&self, tree: &Tree, key: &[u8]) -> Result<bool> {
                    <$t>::contains_key(self, tree, key)
                }
                fn first(&self, tree: &Tree) -> Result<Option<(&[u8], &[u8])>> {
                    <$t>::first(self, tree)
                }
                fn last(&self, tree: &Tree) -> Result<Option<(&[u8], &[u8])>> {
                    <$t>::last(self, tree)
                }
                fn nearest(
                    &self,
                    tree: &Tree,
                    key: &[u8],
                    which: Nearest,
                ) -> Result<Option<(&[u8], &[u8])>> {
                    match which {
                        Nearest::Ge => <$t>::get_ge(self, tree, key),
                        Nearest::Gt => <$t>::get_gt(self, tree, key),
                        Nearest::Le => <$t>::get_le(self, tree, key),
                        Nearest::Lt => <$t>::get_lt(self, tree, key),
                    }
                }
                fn range(
                    &self,
                    tree: &Tree,
                    lower: Bound<&[u8]>,
                    upper: Bound<&[u8]>,
                ) -> Result<Range<'_>> {
                    <$t>::range(self, tree, (lower, upper))
                }
            }
        };
    }

    raw_reads!(ReadTxn);
    raw_reads!(WriteTxn<'_>);
}

use sealed::{Nearest, RawReads};

/// A transaction a [`TypedTree`] reads through: a [`ReadTxn`] or a
/// [`WriteTxn`] (which sees its own uncommitted changes). Sealed.
///
/// ```
/// use ironbark::typed::{ReadableTxn, TypedTree};
/// fn total<T: ReadableTxn>(txn: &T, counts: &TypedTree<&str, u64>) -> ironbark::Result<u64> {
///     counts.iter(txn)?.map(|e| e.map(|(_, n)| n)).sum()
/// }
/// # fn main() -> ironbark::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
/// let mut tx = db.begin_write()?;
/// let counts = TypedTree::<&str, u64>::open(&mut tx, "counts")?;
/// counts.put(&mut tx, "a", &2)?;
/// counts.put(&mut tx, "b", &3)?;
/// assert_eq!(total(&tx, &counts)?, 5);
/// tx.commit()?;
/// assert_eq!(total(&db.begin_read()?, &counts)?, 5);
/// # Ok(())
/// # }
/// ```
pub trait ReadableTxn: RawReads {}
impl ReadableTxn for ReadTxn {}
impl ReadableTxn for WriteTxn<'_> {}

/// A tree with typed keys and values: a [`Tree`] handle and the codecs `K`
/// (a [`Key`]) and `V` (a [`Value`]). Like the handle, it is valid in any
/// transaction of its database; reads take either kind of transaction,
/// writes a [`WriteTxn`]. The codecs are not recorded in the file: opening
/// a tree with other codecs than it was written with gives
/// [`Error::Codec`] on the reads whose bytes do not decode (or values that
/// are decoded wrongly, when the bytes happen to fit).
///
/// ```
/// # fn main() -> ironbark::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
/// use ironbark::typed::TypedTree;
/// let mut tx = db.begin_write()?;
/// let raw = tx.open_tree("temps")?;
/// let temps: TypedTree<i16, &str> = TypedTree::new(raw.clone());
/// temps.put(&mut tx, &-5, "cold")?;
/// temps.put(&mut tx, &20, "mild")?;
/// assert_eq!(temps.first(&tx)?, Some((-5, "cold")));
/// assert_eq!(tx.len(temps.raw())?, 2); // the same tree, untyped
/// # Ok(())
/// # }
/// ```
pub struct TypedTree<K: Key, V: Value> {
    tree: Tree,
    codecs: PhantomData<fn() -> (K, V)>,
}

impl<K: Key, V: Value> Clone for TypedTree<K, V> {
    fn clone(&self) -> Self {
        TypedTree::new(self.tree.clone())
    }
}

impl<K: Key, V: Value> std::fmt::Debug for TypedTree<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TypedTree")
            .field("tree", &self.tree.name())
            .field("key", &std::any::type_name::<K>())
            .field("value", &std::any::type_name::<V>())
            .finish()
    }
}

/// The lower and upper bound of a range, encoded.
type EncodedBounds<'q, K> = (
    Bound<<K as Value>::Bytes<'q>>,
    Bound<<K as Value>::Bytes<'q>>,
);

/// The bounds of `range`, encoded with the key codec `K`.
fn encode_bounds<'q, K: Key, Q: Borrow<K::Input> + 'q, R: RangeBounds<Q>>(
    range: &'q R,
) -> Result<EncodedBounds<'q, K>>
where
    K::Input: 'q,
{
    Ok((
        encode_bound::<K, Q>(range.start_bound())?,
        encode_bound::<K, Q>(range.end_bound())?,
    ))
}

fn encode_bound<'q, K: Key, Q: Borrow<K::Input>>(bound: Bound<&'q Q>) -> Result<Bound<K::Bytes<'q>>>
where
    K::Input: 'q,
{
    Ok(match bound {
        Bound::Included(k) => Bound::Included(K::encode(k.borrow())?),
        Bound::Excluded(k) => Bound::Excluded(K::encode(k.borrow())?),
        Bound::Unbounded => Bound::Unbounded,
    })
}

/// A decoded entry: a key and its value.
type Entry<'t, K, V> = (<K as Value>::Decoded<'t>, <V as Value>::Decoded<'t>);

/// Both halves of an entry of raw bytes, decoded.
fn decode_pair<'t, K: Key, V: Value>(
    (key, value): (&'t [u8], &'t [u8]),
) -> Result<Entry<'t, K, V>> {
    Ok((K::decode(key)?, V::decode(value)?))
}

/// A lookup's entry, if any, decoded.
fn decode_entry<'t, K: Key, V: Value>(
    entry: Option<(&'t [u8], &'t [u8])>,
) -> Result<Option<Entry<'t, K, V>>> {
    entry.map(decode_pair::<K, V>).transpose()
}

impl<K: Key, V: Value> TypedTree<K, V> {
    /// The typed view of the tree `tree`; the codecs are the caller's
    /// word, not checked against the tree's contents.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let tree = tx.open_tree("ids")?;
    /// let ids = ironbark::typed::TypedTree::<u64, ()>::new(tree);
    /// ids.put(&mut tx, &7, &())?;
    /// assert!(ids.contains_key(&tx, &7)?);
    /// # Ok(())
    /// # }
    /// ```
    pub fn new(tree: Tree) -> Self {
        TypedTree {
            tree,
            codecs: PhantomData,
        }
    }

    /// Opens the tree `name`, creating it if missing (as
    /// [`WriteTxn::open_tree`]), with the codecs `K` and `V`.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// use ironbark::typed::TypedTree;
    /// let mut tx = db.begin_write()?;
    /// let scores = TypedTree::<String, i64>::open(&mut tx, "scores")?;
    /// scores.put(&mut tx, "carol", &-3)?;
    /// assert_eq!(scores.get(&tx, "carol")?, Some(-3));
    /// # Ok(())
    /// # }
    /// ```
    pub fn open(txn: &mut WriteTxn<'_>, name: &str) -> Result<Self> {
        Ok(TypedTree::new(txn.open_tree(name)?))
    }

    /// The existing tree `name` (as [`ReadTxn::tree`]: `NoSuchTree` if
    /// missing), with the codecs `K` and `V`.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// use ironbark::typed::TypedTree;
    /// let mut tx = db.begin_write()?;
    /// TypedTree::<u8, u8>::open(&mut tx, "small")?.put(&mut tx, &1, &2)?;
    /// tx.commit()?;
    /// let rx = db.begin_read()?;
    /// let small = TypedTree::<u8, u8>::find(&rx, "small")?;
    /// assert_eq!(small.get(&rx, &1)?, Some(2));
    /// assert!(TypedTree::<u8, u8>::find(&rx, "missing").is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub fn find<T: ReadableTxn>(txn: &T, name: &str) -> Result<Self> {
        Ok(TypedTree::new(txn.tree(name)?))
    }

    /// The untyped handle, for the byte-string API.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// use ironbark::typed::TypedTree;
    /// let mut tx = db.begin_write()?;
    /// let t = TypedTree::<u16, &str>::open(&mut tx, "t")?;
    /// t.put(&mut tx, &0x0102, "x")?;
    /// assert_eq!(tx.get(t.raw(), &[1, 2])?, Some(&b"x"[..]));
    /// # Ok(())
    /// # }
    /// ```
    pub fn raw(&self) -> &Tree {
        &self.tree
    }

    /// The untyped handle, taking this one.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = ironbark::typed::TypedTree::<u8, u8>::open(&mut tx, "t")?;
    /// assert_eq!(t.into_raw().name(), "t");
    /// # Ok(())
    /// # }
    /// ```
    pub fn into_raw(self) -> Tree {
        self.tree
    }

    /// The number of entries.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = ironbark::typed::TypedTree::<u32, ()>::open(&mut tx, "t")?;
    /// t.put(&mut tx, &1, &())?;
    /// assert_eq!(t.len(&tx)?, 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn len<T: ReadableTxn>(&self, txn: &T) -> Result<u64> {
        RawReads::len(txn, &self.tree)
    }

    /// Whether the tree has no entries.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = ironbark::typed::TypedTree::<u32, ()>::open(&mut tx, "t")?;
    /// assert!(t.is_empty(&tx)?);
    /// # Ok(())
    /// # }
    /// ```
    pub fn is_empty<T: ReadableTxn>(&self, txn: &T) -> Result<bool> {
        Ok(self.len(txn)? == 0)
    }

    /// The value under `key`, decoded (borrowing the transaction where the
    /// codec allows).
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = ironbark::typed::TypedTree::<u64, &[u8]>::open(&mut tx, "t")?;
    /// t.put(&mut tx, &1, b"one")?;
    /// assert_eq!(t.get(&tx, &1)?, Some(&b"one"[..]));
    /// assert_eq!(t.get(&tx, &2)?, None);
    /// # Ok(())
    /// # }
    /// ```
    pub fn get<'t, T: ReadableTxn>(
        &self,
        txn: &'t T,
        key: &K::Input,
    ) -> Result<Option<V::Decoded<'t>>> {
        let key = K::encode(key)?;
        RawReads::get(txn, &self.tree, key.as_ref())?
            .map(V::decode)
            .transpose()
    }

    /// Whether the tree holds `key` (its value is not read, nor decoded).
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = ironbark::typed::TypedTree::<&str, ()>::open(&mut tx, "tags")?;
    /// t.put(&mut tx, "rust", &())?;
    /// assert!(t.contains_key(&tx, "rust")?);
    /// assert!(!t.contains_key(&tx, "go")?);
    /// # Ok(())
    /// # }
    /// ```
    pub fn contains_key<T: ReadableTxn>(&self, txn: &T, key: &K::Input) -> Result<bool> {
        let key = K::encode(key)?;
        RawReads::contains_key(txn, &self.tree, key.as_ref())
    }

    /// The entry with the smallest key, or `None` if the tree is empty.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = ironbark::typed::TypedTree::<i32, u8>::open(&mut tx, "t")?;
    /// for k in [3, -7, 0] {
    ///     t.put(&mut tx, &k, &1)?;
    /// }
    /// assert_eq!(t.first(&tx)?, Some((-7, 1)));
    /// # Ok(())
    /// # }
    /// ```
    pub fn first<'t, T: ReadableTxn>(&self, txn: &'t T) -> Result<Option<Entry<'t, K, V>>> {
        decode_entry::<K, V>(RawReads::first(txn, &self.tree)?)
    }

    /// The entry with the largest key, or `None` if the tree is empty.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = ironbark::typed::TypedTree::<i32, u8>::open(&mut tx, "t")?;
    /// for k in [3, -7, 0] {
    ///     t.put(&mut tx, &k, &1)?;
    /// }
    /// assert_eq!(t.last(&tx)?, Some((3, 1)));
    /// # Ok(())
    /// # }
    /// ```
    pub fn last<'t, T: ReadableTxn>(&self, txn: &'t T) -> Result<Option<Entry<'t, K, V>>> {
        decode_entry::<K, V>(RawReads::last(txn, &self.tree)?)
    }

    fn nearest<'t, T: ReadableTxn>(
        &self,
        txn: &'t T,
        key: &K::Input,
        which: Nearest,
    ) -> Result<Option<Entry<'t, K, V>>> {
        let key = K::encode(key)?;
        decode_entry::<K, V>(RawReads::nearest(txn, &self.tree, key.as_ref(), which)?)
    }

    /// The entry with the smallest key `>= key`.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = ironbark::typed::TypedTree::<i64, &str>::open(&mut tx, "t")?;
    /// t.put(&mut tx, &-10, "a")?;
    /// t.put(&mut tx, &10, "b")?;
    /// assert_eq!(t.get_ge(&tx, &-10)?, Some((-10, "a")));
    /// assert_eq!(t.get_ge(&tx, &-9)?, Some((10, "b")));
    /// assert_eq!(t.get_ge(&tx, &11)?, None);
    /// # Ok(())
    /// # }
    /// ```
    pub fn get_ge<'t, T: ReadableTxn>(
        &self,
        txn: &'t T,
        key: &K::Input,
    ) -> Result<Option<Entry<'t, K, V>>> {
        self.nearest(txn, key, Nearest::Ge)
    }

    /// The entry with the smallest key `> key`.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = ironbark::typed::TypedTree::<i64, &str>::open(&mut tx, "t")?;
    /// t.put(&mut tx, &-10, "a")?;
    /// t.put(&mut tx, &10, "b")?;
    /// assert_eq!(t.get_gt(&tx, &-10)?, Some((10, "b")));
    /// assert_eq!(t.get_gt(&tx, &10)?, None);
    /// # Ok(())
    /// # }
    /// ```
    pub fn get_gt<'t, T: ReadableTxn>(
        &self,
        txn: &'t T,
        key: &K::Input,
    ) -> Result<Option<Entry<'t, K, V>>> {
        self.nearest(txn, key, Nearest::Gt)
    }

    /// The entry with the largest key `<= key`.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = ironbark::typed::TypedTree::<i64, &str>::open(&mut tx, "t")?;
    /// t.put(&mut tx, &-10, "a")?;
    /// t.put(&mut tx, &10, "b")?;
    /// assert_eq!(t.get_le(&tx, &9)?, Some((-10, "a")));
    /// assert_eq!(t.get_le(&tx, &-11)?, None);
    /// # Ok(())
    /// # }
    /// ```
    pub fn get_le<'t, T: ReadableTxn>(
        &self,
        txn: &'t T,
        key: &K::Input,
    ) -> Result<Option<Entry<'t, K, V>>> {
        self.nearest(txn, key, Nearest::Le)
    }

    /// The entry with the largest key `< key`.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = ironbark::typed::TypedTree::<i64, &str>::open(&mut tx, "t")?;
    /// t.put(&mut tx, &-10, "a")?;
    /// t.put(&mut tx, &10, "b")?;
    /// assert_eq!(t.get_lt(&tx, &10)?, Some((-10, "a")));
    /// assert_eq!(t.get_lt(&tx, &-10)?, None);
    /// # Ok(())
    /// # }
    /// ```
    pub fn get_lt<'t, T: ReadableTxn>(
        &self,
        txn: &'t T,
        key: &K::Input,
    ) -> Result<Option<Entry<'t, K, V>>> {
        self.nearest(txn, key, Nearest::Lt)
    }

    /// The entries with keys in `range`, in key order (`.rev()` for
    /// reverse), decoded as they are read. The bounds are anything that
    /// borrows as the key's input: `5..10` for `u64` keys, `"a".."m"` for
    /// `&str` keys, a pair of [`Bound`]s. They are encoded (and copied) at
    /// the call, so the entries borrow the transaction only.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = ironbark::typed::TypedTree::<i8, ()>::open(&mut tx, "t")?;
    /// for k in [-3, -2, -1, 0, 1, 2] {
    ///     t.put(&mut tx, &k, &())?;
    /// }
    /// fn keys(r: impl Iterator<Item = ironbark::Result<(i8, ())>>) -> ironbark::Result<Vec<i8>> {
    ///     r.map(|e| e.map(|(k, ())| k)).collect()
    /// }
    /// assert_eq!(keys(t.range(&tx, -2..1)?)?, [-2, -1, 0]);
    /// assert_eq!(keys(t.range(&tx, ..=-2)?)?, [-3, -2]);
    /// assert_eq!(keys(t.range(&tx, 1..)?.rev())?, [2, 1]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn range<'t, T: ReadableTxn, Q: Borrow<K::Input>, R: RangeBounds<Q>>(
        &self,
        txn: &'t T,
        range: R,
    ) -> Result<TypedRange<'t, K, V>> {
        let (lower, upper) = encode_bounds::<K, Q, R>(&range)?;
        let raw = RawReads::range(
            txn,
            &self.tree,
            lower.as_ref().map(AsRef::as_ref),
            upper.as_ref().map(AsRef::as_ref),
        )?;
        Ok(TypedRange::new(raw))
    }

    /// All entries, in key order.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = ironbark::typed::TypedTree::<u16, String>::open(&mut tx, "t")?;
    /// t.put(&mut tx, &2, "two")?;
    /// t.put(&mut tx, &1, "one")?;
    /// let all = t.iter(&tx)?.collect::<ironbark::Result<Vec<_>>>()?;
    /// assert_eq!(all, [(1, "one".to_string()), (2, "two".to_string())]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn iter<'t, T: ReadableTxn>(&self, txn: &'t T) -> Result<TypedRange<'t, K, V>> {
        let raw = RawReads::range(txn, &self.tree, Bound::Unbounded, Bound::Unbounded)?;
        Ok(TypedRange::new(raw))
    }

    /// Stores `value` under `key`, replacing any value there (as
    /// [`WriteTxn::put`]).
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = ironbark::typed::TypedTree::<[u8; 4], u64>::open(&mut tx, "t")?;
    /// t.put(&mut tx, b"abcd", &1)?;
    /// t.put(&mut tx, b"abcd", &2)?;
    /// assert_eq!(t.get(&tx, b"abcd")?, Some(2));
    /// # Ok(())
    /// # }
    /// ```
    pub fn put(&self, txn: &mut WriteTxn<'_>, key: &K::Input, value: &V::Input) -> Result<()> {
        let (key, value) = (K::encode(key)?, V::encode(value)?);
        txn.put(&self.tree, key.as_ref(), value.as_ref())
    }

    /// Stores `value` under `key`, which must be greater than every key of
    /// the tree, in the typed order (as [`WriteTxn::append`]: a sorted
    /// load; [`Error::KeyOutOfOrder`] otherwise, changing nothing).
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = ironbark::typed::TypedTree::<i32, ()>::open(&mut tx, "t")?;
    /// for k in -100..100 {
    ///     t.append(&mut tx, &k, &())?;
    /// }
    /// let late = t.append(&mut tx, &-1000, &());
    /// assert!(matches!(late, Err(ironbark::Error::KeyOutOfOrder(_))));
    /// assert_eq!(t.len(&tx)?, 200);
    /// # Ok(())
    /// # }
    /// ```
    pub fn append(&self, txn: &mut WriteTxn<'_>, key: &K::Input, value: &V::Input) -> Result<()> {
        let (key, value) = (K::encode(key)?, V::encode(value)?);
        txn.append(&self.tree, key.as_ref(), value.as_ref())
    }

    /// Stores `value` under `key` and returns the value it replaced,
    /// decoded (as [`WriteTxn::insert`]). If the replaced value's bytes do
    /// not decode, the call fails with [`Error::Codec`] and stores nothing.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = ironbark::typed::TypedTree::<u8, &str>::open(&mut tx, "t")?;
    /// assert_eq!(t.insert(&mut tx, &1, "old")?, None);
    /// assert_eq!(t.insert(&mut tx, &1, "new")?, Some("old".to_string()));
    /// # Ok(())
    /// # }
    /// ```
    pub fn insert(
        &self,
        txn: &mut WriteTxn<'_>,
        key: &K::Input,
        value: &V::Input,
    ) -> Result<Option<V::Owned>> {
        let (key, value) = (K::encode(key)?, V::encode(value)?);
        // The old value is decoded before the put, so that bytes this
        // codec cannot read are reported without being overwritten.
        let old = txn
            .get(&self.tree, key.as_ref())?
            .map(|old| V::decode_owned(old.to_vec()))
            .transpose()?;
        txn.put(&self.tree, key.as_ref(), value.as_ref())?;
        Ok(old)
    }

    /// The value under `key`, decoded, after storing `value` there if
    /// `key` was missing (as [`WriteTxn::get_or_insert`]).
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = ironbark::typed::TypedTree::<&str, u32>::open(&mut tx, "t")?;
    /// assert_eq!(t.get_or_insert(&mut tx, "k", &1)?, 1);
    /// assert_eq!(t.get_or_insert(&mut tx, "k", &2)?, 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn get_or_insert<'t>(
        &self,
        txn: &'t mut WriteTxn<'_>,
        key: &K::Input,
        value: &V::Input,
    ) -> Result<V::Decoded<'t>> {
        let (key, value) = (K::encode(key)?, V::encode(value)?);
        V::decode(txn.get_or_insert(&self.tree, key.as_ref(), value.as_ref())?)
    }

    /// Removes `key`; whether it was there (as [`WriteTxn::delete`]).
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = ironbark::typed::TypedTree::<u64, ()>::open(&mut tx, "t")?;
    /// t.put(&mut tx, &9, &())?;
    /// assert!(t.delete(&mut tx, &9)?);
    /// assert!(!t.delete(&mut tx, &9)?);
    /// # Ok(())
    /// # }
    /// ```
    pub fn delete(&self, txn: &mut WriteTxn<'_>, key: &K::Input) -> Result<bool> {
        let key = K::encode(key)?;
        txn.delete(&self.tree, key.as_ref())
    }

    /// Removes the entry with the smallest key and returns it, decoded and
    /// owned (as [`WriteTxn::pop_first`]). An entry that does not decode is
    /// left in place and the call fails with [`Error::Codec`].
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let jobs = ironbark::typed::TypedTree::<u64, &str>::open(&mut tx, "jobs")?;
    /// jobs.put(&mut tx, &2, "second")?;
    /// jobs.put(&mut tx, &1, "first")?;
    /// assert_eq!(jobs.pop_first(&mut tx)?, Some((1, "first".to_string())));
    /// assert_eq!(jobs.len(&tx)?, 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn pop_first(&self, txn: &mut WriteTxn<'_>) -> Result<Option<(K::Owned, V::Owned)>> {
        self.pop(txn, false)
    }

    /// Removes the entry with the largest key and returns it, decoded and
    /// owned (as [`WriteTxn::pop_last`]); as [`TypedTree::pop_first`] for
    /// an entry that does not decode.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let stack = ironbark::typed::TypedTree::<u64, &str>::open(&mut tx, "stack")?;
    /// stack.put(&mut tx, &1, "bottom")?;
    /// stack.put(&mut tx, &2, "top")?;
    /// assert_eq!(stack.pop_last(&mut tx)?, Some((2, "top".to_string())));
    /// # Ok(())
    /// # }
    /// ```
    pub fn pop_last(&self, txn: &mut WriteTxn<'_>) -> Result<Option<(K::Owned, V::Owned)>> {
        self.pop(txn, true)
    }

    fn pop(&self, txn: &mut WriteTxn<'_>, last: bool) -> Result<Option<(K::Owned, V::Owned)>> {
        // Decoded before the removal, so that an entry this codec cannot
        // read stays where it is.
        let edge = if last {
            txn.last(&self.tree)?
        } else {
            txn.first(&self.tree)?
        };
        let Some((key, value)) = edge else {
            return Ok(None);
        };
        let key_bytes = key.to_vec();
        let entry = (
            K::decode_owned(key.to_vec())?,
            V::decode_owned(value.to_vec())?,
        );
        txn.delete(&self.tree, &key_bytes)?;
        Ok(Some(entry))
    }

    /// Removes every entry and returns how many there were (as
    /// [`WriteTxn::clear`]).
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = ironbark::typed::TypedTree::<u32, ()>::open(&mut tx, "t")?;
    /// for k in 0..10 {
    ///     t.put(&mut tx, &k, &())?;
    /// }
    /// assert_eq!(t.clear(&mut tx)?, 10);
    /// assert!(t.is_empty(&tx)?);
    /// # Ok(())
    /// # }
    /// ```
    pub fn clear(&self, txn: &mut WriteTxn<'_>) -> Result<u64> {
        txn.clear(&self.tree)
    }

    /// Removes the entries with keys in `range` (bounds as for
    /// [`TypedTree::range`]) and returns how many (as
    /// [`WriteTxn::delete_range`]).
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = ironbark::typed::TypedTree::<i16, ()>::open(&mut tx, "t")?;
    /// for k in -5..5 {
    ///     t.put(&mut tx, &k, &())?;
    /// }
    /// assert_eq!(t.delete_range(&mut tx, -2..=2)?, 5);
    /// assert_eq!(t.first(&tx)?, Some((-5, ())));
    /// assert_eq!(t.get_ge(&tx, &-2)?, Some((3, ())));
    /// # Ok(())
    /// # }
    /// ```
    pub fn delete_range<Q: Borrow<K::Input>, R: RangeBounds<Q>>(
        &self,
        txn: &mut WriteTxn<'_>,
        range: R,
    ) -> Result<u64> {
        let (lower, upper) = encode_bounds::<K, Q, R>(&range)?;
        txn.delete_range(
            &self.tree,
            (
                lower.as_ref().map(AsRef::as_ref),
                upper.as_ref().map(AsRef::as_ref),
            ),
        )
    }
}

/// The entries of a [`TypedTree::range`] or [`TypedTree::iter`], decoded
/// as they are read: a [`Range`] with codecs. An entry whose bytes do not
/// decode is an `Err` item; the iteration may go on past it.
///
/// ```
/// # fn main() -> ironbark::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
/// let mut tx = db.begin_write()?;
/// let t = ironbark::typed::TypedTree::<u8, u8>::open(&mut tx, "t")?;
/// t.put(&mut tx, &1, &10)?;
/// tx.put(t.raw(), &[2], b"not a u8")?; // written untyped
/// let mut entries = t.iter(&tx)?;
/// assert_eq!(entries.next().transpose()?, Some((1, 10)));
/// assert!(matches!(entries.next(), Some(Err(ironbark::Error::Codec { .. }))));
/// assert!(entries.next().is_none());
/// # Ok(())
/// # }
/// ```
pub struct TypedRange<'t, K: Key, V: Value> {
    raw: Range<'t>,
    codecs: PhantomData<fn() -> (K, V)>,
}

impl<'t, K: Key, V: Value> TypedRange<'t, K, V> {
    fn new(raw: Range<'t>) -> Self {
        TypedRange {
            raw,
            codecs: PhantomData,
        }
    }

    /// The untyped iterator, for the entries' bytes.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = ironbark::typed::TypedTree::<u16, ()>::open(&mut tx, "t")?;
    /// t.put(&mut tx, &0x0102, &())?;
    /// let (key, _) = t.iter(&tx)?.into_raw().next().transpose()?.unwrap();
    /// assert_eq!(key, [1, 2]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn into_raw(self) -> Range<'t> {
        self.raw
    }
}

impl<K: Key, V: Value> std::fmt::Debug for TypedRange<'_, K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TypedRange")
            .field("key", &std::any::type_name::<K>())
            .field("value", &std::any::type_name::<V>())
            .finish_non_exhaustive()
    }
}

impl<'t, K: Key, V: Value> Iterator for TypedRange<'t, K, V> {
    type Item = Result<Entry<'t, K, V>>;

    fn next(&mut self) -> Option<Self::Item> {
        Some(self.raw.next()?.and_then(decode_pair::<K, V>))
    }
}

impl<K: Key, V: Value> DoubleEndedIterator for TypedRange<'_, K, V> {
    fn next_back(&mut self) -> Option<Self::Item> {
        Some(self.raw.next_back()?.and_then(decode_pair::<K, V>))
    }
}
