//! Key bounds of ranges, for any byte-slice-like key type, so that
//! `range(&t, b"a"..b"m")`, `range(&t, start_vec..)` or a pair of
//! `Bound`s need no `.as_slice()` at the call. The iterators copy the
//! bounds, so their entries borrow the transaction only, never the
//! caller's keys (a range can outlive the `Vec` its bound came from).

use std::ops::{Bound, RangeBounds};

/// Key bounds that `range`, `range_verified` and `delete_range` take: the
/// standard ranges (`a..b`, `a..=b`, `a..`, `..b`, `..=b`, `..`) and pairs
/// of [`Bound`]s, over any key type that is a byte slice (`&[u8]`,
/// `&[u8; N]`, `Vec<u8>`, `&Vec<u8>`, `Box<[u8]>`, `&str`...). Both ends of
/// a range have one type, as the standard ranges require: `b"a"..b"mm"`
/// mixes `&[u8; 1]` and `&[u8; 2]`, so write `&b"a"[..]..&b"mm"[..]`.
///
/// Sealed: implemented for those types only.
///
/// ```
/// # fn main() -> ironbark::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
/// use std::ops::Bound;
/// let mut tx = db.begin_write()?;
/// let t = tx.open_tree("t")?;
/// for k in [b"a", b"b", b"c", b"d"] {
///     tx.put(&t, k, b"v")?;
/// }
/// assert_eq!(tx.range(&t, b"b"..b"d")?.count(), 2);
/// assert_eq!(tx.range(&t, b"b".to_vec()..)?.count(), 3);
/// let end = b"c".to_vec();
/// assert_eq!(tx.range(&t, ..=&end)?.count(), 3);
/// assert_eq!(tx.range(&t, (Bound::Excluded("a"), Bound::Unbounded))?.count(), 3);
/// assert_eq!(tx.range(&t, ..)?.count(), 4);
/// # Ok(())
/// # }
/// ```
pub trait KeyRange: sealed::Sealed {
    /// The lower and the upper bound, as byte slices.
    ///
    /// ```
    /// use ironbark::KeyRange;
    /// use std::ops::Bound;
    /// assert_eq!(
    ///     (b"a"..=b"z").key_bounds(),
    ///     (Bound::Included(&b"a"[..]), Bound::Included(&b"z"[..]))
    /// );
    /// ```
    fn key_bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>);
}

mod sealed {
    pub trait Sealed {}
}

/// The bounds of a `RangeBounds<K>` as byte slices.
fn of<'a, K: AsRef<[u8]> + 'a, R: RangeBounds<K>>(r: &'a R) -> (Bound<&'a [u8]>, Bound<&'a [u8]>) {
    (
        r.start_bound().map(AsRef::as_ref),
        r.end_bound().map(AsRef::as_ref),
    )
}

macro_rules! key_range {
    ($($t:ty),*) => {$(
        impl<K: AsRef<[u8]>> sealed::Sealed for $t {}
        impl<K: AsRef<[u8]>> KeyRange for $t {
            fn key_bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
                of(self)
            }
        }
    )*};
}

key_range!(
    std::ops::Range<K>,
    std::ops::RangeInclusive<K>,
    std::ops::RangeFrom<K>,
    std::ops::RangeTo<K>,
    std::ops::RangeToInclusive<K>,
    (Bound<K>, Bound<K>)
);

impl sealed::Sealed for std::ops::RangeFull {}
impl KeyRange for std::ops::RangeFull {
    fn key_bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
        (Bound::Unbounded, Bound::Unbounded)
    }
}
