//! The payload of a redo-log record: one write transaction's changes as
//! logical operations, in the order they were made. Replaying them on the
//! commit the transaction began from rebuilds exactly its trees, whatever
//! page layout the replaying engine chooses (see docs/file-format.md, "The
//! redo log").
//!
//! Encoding (little-endian), operations back to back:
//!
//! | op | bytes |
//! |---|---|
//! | put | `7`, varint tree id, varint key length, varint value length, key, value |
//! | delete | `8`, varint tree id, varint key length, key |
//! | create tree | `3`, u64 tree id, u16 name length (low byte) and kind flags (high byte), name (UTF-8) |
//! | drop tree | `4`, u64 tree id |
//! | delete range | `5`, u64 tree id, lower bound, upper bound |
//! | clear tree | `6`, u64 tree id |
//! | put, fixed widths (written until session 46) | `1`, u64 tree id, u16 key length, u32 value length, key, value |
//! | delete, fixed widths (written until session 46) | `2`, u64 tree id, u16 key length, key |
//!
//! A varint is LEB128: seven bits a byte, low bits first, the high bit
//! set on every byte but the last; at most 10 bytes. A bound is `0`
//! (unbounded), or `1` (included) or `2` (excluded) followed by u16 key
//! length and key.
//!
//! Puts and deletes are nearly every operation, and their fixed-width
//! heads (15 and 11 bytes) were 13% of a record of 100 puts of 16-byte
//! keys and 100-byte values; as varints they take 4 and 3 bytes. Ops `1`
//! and `2` are still read: a log written by an earlier build replays.
//!
//! Invariant: decoding never trusts a length: a payload that does not
//! parse to whole operations is an error, never a panic (the record's
//! checksum makes that damage, not data).

use std::ops::Bound;

use crate::error::{Error, Result};
use crate::kind::TreeKind;

const PUT_FIXED: u8 = 1;
const DELETE_FIXED: u8 = 2;
const CREATE: u8 = 3;
const DROP: u8 = 4;
const DELETE_RANGE: u8 = 5;
const CLEAR: u8 = 6;
const PUT: u8 = 7;
const DELETE: u8 = 8;

// The log's sync marker leads a payload whose record vouches for the
// records before it (`storage::log::SYNC_MARKER`): no operation may share
// its byte, so that a build that does not know the marker reports it.
const _: () = assert!(!matches!(
    crate::storage::log::SYNC_MARKER,
    PUT_FIXED | DELETE_FIXED | CREATE | DROP | DELETE_RANGE | CLEAR | PUT | DELETE
));

/// The most bytes of one varint (a u64 in 7-bit groups).
const VARINT_MAX_LEN: usize = 10;

const UNBOUNDED: u8 = 0;
const INCLUDED: u8 = 1;
const EXCLUDED: u8 = 2;

/// A decoded operation, borrowing the payload.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum RedoOp<'a> {
    Put {
        tree: u64,
        key: &'a [u8],
        value: &'a [u8],
    },
    Delete {
        tree: u64,
        key: &'a [u8],
    },
    Create {
        tree: u64,
        name: &'a str,
        kind: TreeKind,
    },
    Drop {
        tree: u64,
    },
    DeleteRange {
        tree: u64,
        lower: Bound<&'a [u8]>,
        upper: Bound<&'a [u8]>,
    },
    Clear {
        tree: u64,
    },
}

/// The most bytes of a put operation before its key and value.
pub(crate) const PUT_HEADER_MAX_LEN: usize = 1 + 3 * VARINT_MAX_LEN;

pub(crate) fn put(out: &mut Vec<u8>, tree: u64, key: &[u8], value: &[u8]) {
    put_head(out, tree, key, value.len());
    out.extend_from_slice(value);
}

/// A put of `len` zeros (a reserved value, filled in later).
pub(crate) fn put_zeros(out: &mut Vec<u8>, tree: u64, key: &[u8], len: usize) {
    put_head(out, tree, key, len);
    out.resize(out.len() + len, 0);
}

fn put_head(out: &mut Vec<u8>, tree: u64, key: &[u8], value_len: usize) {
    assert!(
        u32::try_from(value_len).is_ok(),
        "values are shorter than 4 GiB"
    );
    op_head(out, PUT, &[tree, key.len() as u64, value_len as u64], key);
}

pub(crate) fn delete(out: &mut Vec<u8>, tree: u64, key: &[u8]) {
    op_head(out, DELETE, &[tree, key.len() as u64], key);
}

/// Appends operation `op`'s head, `fields` as varints (the tree id, the
/// key's length and, for a put, the value's), then `key`.
fn op_head(out: &mut Vec<u8>, op: u8, fields: &[u64], key: &[u8]) {
    debug_assert!(fields.len() <= 3, "a put's head has three fields");
    assert!(
        key.len() <= usize::from(u16::MAX),
        "keys are shorter than 64 KiB"
    );
    let mut head = [0u8; PUT_HEADER_MAX_LEN];
    head[0] = op;
    let mut len = 1;
    for &n in fields {
        len += write_varint(&mut head[len..], n);
    }
    out.extend_from_slice(&head[..len]);
    out.extend_from_slice(key);
}

/// Writes `n` as a varint at the start of `out` (which has room for
/// [`VARINT_MAX_LEN`] bytes); returns its length.
fn write_varint(out: &mut [u8], mut n: u64) -> usize {
    let mut len = 0;
    while n >= 0x80 {
        out[len] = n as u8 | 0x80;
        n >>= 7;
        len += 1;
    }
    out[len] = n as u8;
    len + 1
}

pub(crate) fn create(out: &mut Vec<u8>, tree: u64, name: &str, flags: u8) {
    let nlen = u8::try_from(name.len()).expect("tree names are short");
    let nlen = u16::from(flags) << 8 | u16::from(nlen);
    out.push(CREATE);
    out.extend_from_slice(&tree.to_le_bytes());
    out.extend_from_slice(&nlen.to_le_bytes());
    out.extend_from_slice(name.as_bytes());
}

pub(crate) fn drop_tree(out: &mut Vec<u8>, tree: u64) {
    out.push(DROP);
    out.extend_from_slice(&tree.to_le_bytes());
}

/// A `delete_range`: one operation, whatever the range holds (replayed on
/// the same trees, it removes the same entries).
pub(crate) fn delete_range(out: &mut Vec<u8>, tree: u64, lower: Bound<&[u8]>, upper: Bound<&[u8]>) {
    out.push(DELETE_RANGE);
    out.extend_from_slice(&tree.to_le_bytes());
    for bound in [lower, upper] {
        let (kind, key) = match bound {
            Bound::Unbounded => (UNBOUNDED, None),
            Bound::Included(k) => (INCLUDED, Some(k)),
            Bound::Excluded(k) => (EXCLUDED, Some(k)),
        };
        out.push(kind);
        if let Some(k) = key {
            let klen = u16::try_from(k.len()).expect("bounds are keys, shorter than 64 KiB");
            out.extend_from_slice(&klen.to_le_bytes());
            out.extend_from_slice(k);
        }
    }
}

pub(crate) fn clear(out: &mut Vec<u8>, tree: u64) {
    out.push(CLEAR);
    out.extend_from_slice(&tree.to_le_bytes());
}

/// The operations of `payload`, in order.
pub(crate) struct Ops<'a> {
    rest: &'a [u8],
}

pub(crate) fn decode(payload: &[u8]) -> Ops<'_> {
    Ops { rest: payload }
}

fn bad(detail: &str) -> Error {
    Error::Corrupted {
        page: None,
        detail: format!("redo log record: {detail}"),
    }
}

impl<'a> Ops<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.rest.len() < n {
            return Err(bad("operation cut short"));
        }
        let (head, rest) = self.rest.split_at(n);
        self.rest = rest;
        Ok(head)
    }

    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8")))
    }

    /// A varint; one longer than [`VARINT_MAX_LEN`] bytes or above
    /// `u64::MAX` is damage (an error, never a wrapped value).
    fn varint(&mut self) -> Result<u64> {
        let mut n = 0u64;
        for i in 0..VARINT_MAX_LEN {
            let byte = self.take(1)?[0];
            let bits = u64::from(byte & 0x7f);
            if i == VARINT_MAX_LEN - 1 && bits > 1 {
                return Err(bad("varint of 2^64 or more"));
            }
            n |= bits << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(n);
            }
        }
        Err(bad("varint longer than 10 bytes"))
    }

    /// A varint length of at most `max`.
    fn length(&mut self, max: u64, what: &str) -> Result<usize> {
        let n = self.varint()?;
        if n > max {
            return Err(bad(&format!("{what} length {n} above {max}")));
        }
        Ok(n as usize)
    }

    fn u16(&mut self) -> Result<usize> {
        Ok(u16::from_le_bytes(self.take(2)?.try_into().expect("2")) as usize)
    }

    fn bound(&mut self) -> Result<Bound<&'a [u8]>> {
        Ok(match self.take(1)?[0] {
            UNBOUNDED => Bound::Unbounded,
            INCLUDED => {
                let klen = self.u16()?;
                Bound::Included(self.take(klen)?)
            }
            EXCLUDED => {
                let klen = self.u16()?;
                Bound::Excluded(self.take(klen)?)
            }
            other => return Err(bad(&format!("unknown bound kind {other}"))),
        })
    }

    fn next_op(&mut self) -> Result<RedoOp<'a>> {
        let kind = self.take(1)?[0];
        if kind == PUT || kind == DELETE {
            let tree = self.varint()?;
            let klen = self.length(u64::from(u16::MAX), "key")?;
            if kind == DELETE {
                return Ok(RedoOp::Delete {
                    tree,
                    key: self.take(klen)?,
                });
            }
            let vlen = self.length(u64::from(u32::MAX), "value")?;
            return Ok(RedoOp::Put {
                tree,
                key: self.take(klen)?,
                value: self.take(vlen)?,
            });
        }
        let tree = self.u64()?;
        Ok(match kind {
            PUT_FIXED => {
                let klen = self.u16()?;
                let vlen = u32::from_le_bytes(self.take(4)?.try_into().expect("4")) as usize;
                RedoOp::Put {
                    tree,
                    key: self.take(klen)?,
                    value: self.take(vlen)?,
                }
            }
            DELETE_FIXED => {
                let klen = self.u16()?;
                RedoOp::Delete {
                    tree,
                    key: self.take(klen)?,
                }
            }
            CREATE => {
                let field = self.u16()?;
                let kind = TreeKind::from_flags((field >> 8) as u8)
                    .ok_or_else(|| bad(&format!("unknown tree kind flags {:#x}", field >> 8)))?;
                let name = std::str::from_utf8(self.take(field & 0xff)?)
                    .map_err(|_| bad("tree name is not UTF-8"))?;
                RedoOp::Create { tree, name, kind }
            }
            DROP => RedoOp::Drop { tree },
            DELETE_RANGE => RedoOp::DeleteRange {
                tree,
                lower: self.bound()?,
                upper: self.bound()?,
            },
            CLEAR => RedoOp::Clear { tree },
            other => return Err(bad(&format!("unknown operation {other}"))),
        })
    }
}

impl<'a> Iterator for Ops<'a> {
    type Item = Result<RedoOp<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let op = self.next_op();
        if op.is_err() {
            self.rest = &[];
        }
        Some(op)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_round_trip_and_every_truncation_is_an_error() {
        let mut b = Vec::new();
        create(&mut b, 7, "users", 0);
        create(&mut b, 8, "tags", TreeKind::MULTIMAP.flags());
        put(&mut b, 7, b"k", b"value");
        put(&mut b, 7, b"", b"");
        delete(&mut b, 7, b"k");
        delete_range(&mut b, 7, Bound::Included(b"a"), Bound::Excluded(b"q"));
        delete_range(&mut b, 7, Bound::Unbounded, Bound::Included(b""));
        clear(&mut b, 8);
        drop_tree(&mut b, 7);
        let ops: Vec<_> = decode(&b).collect::<Result<_>>().unwrap();
        assert_eq!(
            ops,
            vec![
                RedoOp::Create {
                    tree: 7,
                    name: "users",
                    kind: TreeKind::PLAIN,
                },
                RedoOp::Create {
                    tree: 8,
                    name: "tags",
                    kind: TreeKind::MULTIMAP,
                },
                RedoOp::Put {
                    tree: 7,
                    key: b"k",
                    value: b"value"
                },
                RedoOp::Put {
                    tree: 7,
                    key: b"",
                    value: b""
                },
                RedoOp::Delete { tree: 7, key: b"k" },
                RedoOp::DeleteRange {
                    tree: 7,
                    lower: Bound::Included(b"a"),
                    upper: Bound::Excluded(b"q"),
                },
                RedoOp::DeleteRange {
                    tree: 7,
                    lower: Bound::Unbounded,
                    upper: Bound::Included(b""),
                },
                RedoOp::Clear { tree: 8 },
                RedoOp::Drop { tree: 7 },
            ]
        );
        let ends: Vec<usize> = {
            let mut ends = Vec::new();
            let mut probe = Vec::new();
            create(&mut probe, 7, "users", 0);
            ends.push(probe.len());
            create(&mut probe, 8, "tags", TreeKind::MULTIMAP.flags());
            ends.push(probe.len());
            put(&mut probe, 7, b"k", b"value");
            ends.push(probe.len());
            put(&mut probe, 7, b"", b"");
            ends.push(probe.len());
            delete(&mut probe, 7, b"k");
            ends.push(probe.len());
            delete_range(&mut probe, 7, Bound::Included(b"a"), Bound::Excluded(b"q"));
            ends.push(probe.len());
            delete_range(&mut probe, 7, Bound::Unbounded, Bound::Included(b""));
            ends.push(probe.len());
            clear(&mut probe, 8);
            ends.push(probe.len());
            ends
        };
        for cut in 1..b.len() {
            let parsed: Result<Vec<_>> = decode(&b[..cut]).collect();
            assert_eq!(parsed.is_ok(), ends.contains(&cut), "cut at {cut}");
        }
        // A kind this version does not know.
        let mut unknown = Vec::new();
        create(&mut unknown, 9, "x", 0x80);
        assert!(decode(&unknown).collect::<Result<Vec<_>>>().is_err());
        assert!(decode(&[9, 0, 0, 0, 0, 0, 0, 0, 0])
            .collect::<Result<Vec<_>>>()
            .is_err());
        // A bound of a kind this version does not know.
        assert!(decode(&[5, 7, 0, 0, 0, 0, 0, 0, 0, 3, 0])
            .collect::<Result<Vec<_>>>()
            .is_err());
    }

    /// An operation as builds before session 46 wrote it (`1` and `2`).
    fn fixed(kind: u8, tree: u64, key: &[u8], value: Option<&[u8]>) -> Vec<u8> {
        let mut b = vec![kind];
        b.extend_from_slice(&tree.to_le_bytes());
        b.extend_from_slice(&(key.len() as u16).to_le_bytes());
        if let Some(v) = value {
            b.extend_from_slice(&(v.len() as u32).to_le_bytes());
        }
        b.extend_from_slice(key);
        b.extend_from_slice(value.unwrap_or_default());
        b
    }

    #[test]
    fn fixed_width_puts_and_deletes_of_earlier_logs_still_decode() {
        let mut b = fixed(PUT_FIXED, 7, b"key", Some(b"value"));
        b.extend(fixed(DELETE_FIXED, 1 << 40, b"gone", None));
        put(&mut b, 7, b"new", b"v");
        let ops: Vec<_> = decode(&b).collect::<Result<_>>().unwrap();
        assert_eq!(
            ops,
            vec![
                RedoOp::Put {
                    tree: 7,
                    key: b"key",
                    value: b"value"
                },
                RedoOp::Delete {
                    tree: 1 << 40,
                    key: b"gone"
                },
                RedoOp::Put {
                    tree: 7,
                    key: b"new",
                    value: b"v"
                },
            ]
        );
        for cut in 1..b.len() {
            let parsed: Result<Vec<_>> = decode(&b[..cut]).collect();
            assert!(
                parsed.is_ok() == [23, 23 + 15].contains(&cut),
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn varint_heads_round_trip_at_every_width_and_are_small() {
        let key = vec![0xabu8; usize::from(u16::MAX)];
        let value = vec![0xcdu8; 70_000];
        for tree in [0, 1, 127, 128, 16_383, 16_384, 1 << 35, u64::MAX] {
            for klen in [0, 1, 127, 128, 16_383, 16_384, key.len()] {
                for vlen in [0, 127, 128, 16_384, value.len()] {
                    let mut b = Vec::new();
                    put(&mut b, tree, &key[..klen], &value[..vlen]);
                    delete(&mut b, tree, &key[..klen]);
                    put_zeros(&mut b, tree, &key[..klen], vlen);
                    let ops: Vec<_> = decode(&b).collect::<Result<_>>().unwrap();
                    assert_eq!(ops.len(), 3);
                    assert_eq!(
                        ops[0],
                        RedoOp::Put {
                            tree,
                            key: &key[..klen],
                            value: &value[..vlen]
                        }
                    );
                    assert_eq!(
                        ops[1],
                        RedoOp::Delete {
                            tree,
                            key: &key[..klen]
                        }
                    );
                    match &ops[2] {
                        RedoOp::Put { value, .. } => {
                            assert!(value.len() == vlen && value.iter().all(|&b| b == 0))
                        }
                        other => panic!("not a put: {other:?}"),
                    }
                }
            }
        }
        // The common case: a small tree id, a 16-byte key, a 100-byte value.
        let mut b = Vec::new();
        put(&mut b, 3, &[1; 16], &[2; 100]);
        assert_eq!(b.len(), 4 + 16 + 100);
        b.clear();
        delete(&mut b, 3, &[1; 16]);
        assert_eq!(b.len(), 3 + 16);
    }

    #[test]
    fn damaged_varints_and_lengths_are_errors() {
        let err = |b: &[u8]| decode(b).collect::<Result<Vec<_>>>().is_err();
        // A tree id with 11 bytes of continuation.
        let mut b = vec![PUT];
        b.extend([0x80; 10]);
        b.extend([0, 0, 0]);
        assert!(err(&b));
        // A tenth byte above 1 (the id would pass 2^64).
        let mut b = vec![DELETE];
        b.extend([0xff; 9]);
        b.extend([2, 0]);
        assert!(err(&b));
        // The largest id is fine.
        let mut b = vec![DELETE];
        b.extend([0xff; 9]);
        b.extend([1, 0]);
        assert!(!err(&b));
        // A key longer than a key can be (65,536 bytes), with the bytes there.
        let mut b = vec![DELETE, 1, 0x80, 0x80, 0x04];
        b.extend(vec![0; 1 << 16]);
        assert!(err(&b));
        // A value length above u32 (2^32), with a short payload.
        let mut b = vec![PUT, 1, 0, 0x80, 0x80, 0x80, 0x80, 0x10];
        b.extend([0; 16]);
        assert!(err(&b));
    }
}
