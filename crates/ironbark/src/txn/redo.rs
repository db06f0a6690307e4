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
//! | put | `1`, u64 tree id, u16 key length, u32 value length, key, value |
//! | delete | `2`, u64 tree id, u16 key length, key |
//! | create tree | `3`, u64 tree id, u16 name length (low byte) and kind flags (high byte), name (UTF-8) |
//! | drop tree | `4`, u64 tree id |
//! | delete range | `5`, u64 tree id, lower bound, upper bound |
//! | clear tree | `6`, u64 tree id |
//!
//! A bound is `0` (unbounded), or `1` (included) or `2` (excluded)
//! followed by u16 key length and key.
//!
//! Invariant: decoding never trusts a length: a payload that does not
//! parse to whole operations is an error, never a panic (the record's
//! checksum makes that damage, not data).

use std::ops::Bound;

use crate::error::{Error, Result};
use crate::kind::TreeKind;

const PUT: u8 = 1;
const DELETE: u8 = 2;
const CREATE: u8 = 3;
const DROP: u8 = 4;
const DELETE_RANGE: u8 = 5;
const CLEAR: u8 = 6;

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

/// Bytes of a put record before its key and value.
pub(crate) const PUT_HEADER_LEN: usize = 1 + 8 + 2 + 4;

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
    let klen = u16::try_from(key.len()).expect("keys are shorter than 64 KiB");
    let vlen = u32::try_from(value_len).expect("values are shorter than 4 GiB");
    out.push(PUT);
    out.extend_from_slice(&tree.to_le_bytes());
    out.extend_from_slice(&klen.to_le_bytes());
    out.extend_from_slice(&vlen.to_le_bytes());
    out.extend_from_slice(key);
}

pub(crate) fn delete(out: &mut Vec<u8>, tree: u64, key: &[u8]) {
    let klen = u16::try_from(key.len()).expect("keys are shorter than 64 KiB");
    out.push(DELETE);
    out.extend_from_slice(&tree.to_le_bytes());
    out.extend_from_slice(&klen.to_le_bytes());
    out.extend_from_slice(key);
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
        let tree = self.u64()?;
        Ok(match kind {
            PUT => {
                let klen = self.u16()?;
                let vlen = u32::from_le_bytes(self.take(4)?.try_into().expect("4")) as usize;
                RedoOp::Put {
                    tree,
                    key: self.take(klen)?,
                    value: self.take(vlen)?,
                }
            }
            DELETE => {
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
}
