//! Streamed values: a value written in pieces straight into its place in
//! the write transaction's dirty pages ([`ValueWriter`]), and a value read
//! in pieces, with seeks, from where it lies ([`ValueReader`]), so that a
//! value of N bytes never needs more than N bytes of memory (its dirty
//! blob) to be written, nor any copy to be read.
//!
//! Invariant: a streamed value is committed only whole. The put happens
//! when the writer is made (the value all zeros); a writer that ends with
//! fewer bytes written than it promised, or that was offered more, marks
//! the transaction failed, so its commit returns [`Error::TxnFailed`] and
//! nothing of it is visible. See docs/design.md, "Streamed values".

use std::io::{self, BufRead, Read, Seek, SeekFrom};

use crate::error::{Error, Result};
use crate::txn::read::ReadTxn;
use crate::txn::write::WriteTxn;
use crate::txn::Tree;

/// A value being written into its place in a write transaction's pages:
/// see [`WriteTxn::put_writer`]. It implements [`io::Write`]; call
/// [`ValueWriter::finish`] when the last byte is written.
///
/// Dropped before all of its `len` bytes were written (or after a write
/// was refused for going past them), it marks the transaction failed:
/// the commit returns [`Error::TxnFailed`], so a half-written value is
/// never committed.
pub struct ValueWriter<'t, 'db> {
    txn: &'t mut WriteTxn<'db>,
    /// The dirty page (the blob, or the leaf of a short value) and the
    /// offset of the value in it.
    page: u64,
    at: usize,
    len: usize,
    written: usize,
    /// A write offered bytes past `len`.
    overran: bool,
    /// `finish` ran (the transaction is marked failed already if it had to be).
    finished: bool,
}

impl std::fmt::Debug for ValueWriter<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ValueWriter")
            .field("len", &self.len)
            .field("written", &self.written)
            .finish_non_exhaustive()
    }
}

impl<'db> WriteTxn<'db> {
    /// Stores a value of `len` bytes under `key` whose bytes the caller
    /// then writes in pieces through the returned [`ValueWriter`] (an
    /// [`io::Write`]: `io::copy` from a file or a socket works), straight
    /// into the value's place in the transaction's pages. Writing a value
    /// of N bytes takes N bytes of memory (its pages, which the commit
    /// writes out as they are) plus whatever buffer the caller writes
    /// from, never a second copy: a 1 GiB value streamed from a file in
    /// 1 MiB pieces needs about 1 GiB, not 2.
    ///
    /// The put is made at once, with the value zeroed; the writer must then
    /// be given exactly `len` bytes and [`ValueWriter::finish`]ed. Fewer
    /// bytes (`finish` is `Err`, or the writer is dropped early), or a
    /// write past `len` (that write is an `io::Error`), and the transaction
    /// is failed: its commit returns [`Error::TxnFailed`] and changes
    /// nothing, so no partial value is ever committed.
    ///
    /// A logged commit (`Options::logged_commits`) records the value as a
    /// put, copied into its record when the writer finishes; a value too
    /// large for the log (past 16 MiB of record) makes this commit write
    /// its pages instead, without the value ever being copied into the
    /// record. Errors on the put itself are [`WriteTxn::put`]'s
    /// (`KeyTooLarge`, `ValueTooLarge`) and leave the tree unchanged.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// use std::io::Write;
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("files")?;
    /// let chunk = [7u8; 1000];
    /// let mut w = tx.put_writer(&t, b"big", 3000)?;
    /// for _ in 0..3 {
    ///     w.write_all(&chunk)?;
    /// }
    /// w.finish()?;
    /// tx.commit()?;
    /// let rx = db.begin_read()?;
    /// assert_eq!(rx.get(&t, b"big")?, Some(&[7u8; 3000][..]));
    /// # Ok(())
    /// # }
    /// ```
    pub fn put_writer<'t>(
        &'t mut self,
        tree: &Tree,
        key: &[u8],
        len: usize,
    ) -> Result<ValueWriter<'t, 'db>> {
        let (page, at) = self.reserve(tree, key, len)?;
        Ok(ValueWriter {
            txn: self,
            page,
            at,
            len,
            written: 0,
            overran: false,
            finished: false,
        })
    }

    /// The value under `key` as this transaction sees it, as a reader
    /// ([`io::Read`] + [`io::Seek`] + [`io::BufRead`]) over the bytes
    /// where they lie: see [`ReadTxn::get_reader`].
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// use std::io::Read;
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// tx.put(&t, b"k", b"hello")?;
    /// let mut text = String::new();
    /// tx.get_reader(&t, b"k")?.unwrap().read_to_string(&mut text)?;
    /// assert_eq!(text, "hello");
    /// # Ok(())
    /// # }
    /// ```
    pub fn get_reader(&self, tree: &Tree, key: &[u8]) -> Result<Option<ValueReader<'_>>> {
        Ok(self.get(tree, key)?.map(ValueReader::new))
    }
}

impl ReadTxn {
    /// The value under `key`, as a reader ([`io::Read`] + [`io::Seek`] +
    /// [`io::BufRead`]) over the bytes where they lie in the memory map:
    /// nothing is copied but what the caller reads, and the value is not
    /// read into memory: only the pages the reads and seeks touch are
    /// (paged in by the kernel, which may evict them again), so a 1 GiB
    /// value read in 1 MiB pieces takes 1 MiB of buffer. The lookup checks
    /// exactly what [`ReadTxn::get`] checks (the value's blob header: its
    /// kind, txn and length against the leaf's reference), since it is
    /// `get`; the reader borrows the transaction as `get`'s slice does.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// use std::io::{Read, Seek, SeekFrom};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// let value: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
    /// tx.put(&t, b"big", &value)?;
    /// tx.commit()?;
    ///
    /// let rx = db.begin_read()?;
    /// let mut r = rx.get_reader(&t, b"big")?.expect("stored");
    /// assert_eq!(r.len(), 100_000);
    /// r.seek(SeekFrom::Start(99_990))?;
    /// let mut tail = Vec::new();
    /// r.read_to_end(&mut tail)?;
    /// assert_eq!(tail, &value[99_990..]);
    /// assert!(rx.get_reader(&t, b"missing")?.is_none());
    /// # Ok(())
    /// # }
    /// ```
    pub fn get_reader(&self, tree: &Tree, key: &[u8]) -> Result<Option<ValueReader<'_>>> {
        Ok(self.get(tree, key)?.map(ValueReader::new))
    }
}

impl ValueWriter<'_, '_> {
    /// The value's length, as promised to [`WriteTxn::put_writer`].
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// let w = tx.put_writer(&t, b"k", 0)?;
    /// assert_eq!(w.len(), 0);
    /// w.finish()?; // an empty value is complete at once
    /// # Ok(())
    /// # }
    /// ```
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// The bytes written so far.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// use std::io::Write;
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// let mut w = tx.put_writer(&t, b"k", 10)?;
    /// w.write_all(b"abcd")?;
    /// assert_eq!((w.written(), w.remaining()), (4, 6));
    /// w.write_all(b"efghij")?;
    /// w.finish()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn written(&self) -> usize {
        self.written
    }

    /// The bytes still to write.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// let mut w = tx.put_writer(&t, b"k", 3)?;
    /// assert_eq!(w.remaining(), 3);
    /// std::io::copy(&mut &b"xyz"[..], &mut w)?;
    /// assert_eq!(w.remaining(), 0);
    /// w.finish()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn remaining(&self) -> usize {
        self.len - self.written
    }

    /// Ends the value: `Ok` if exactly its `len` bytes were written. If
    /// fewer were (or a write offered more), it is [`Error::TxnFailed`]
    /// and the transaction is failed: its commit returns that error and
    /// changes nothing (see [`WriteTxn::put_writer`]).
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// use std::io::Write;
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// let mut w = tx.put_writer(&t, b"k", 10)?;
    /// w.write_all(b"short")?;
    /// assert!(matches!(w.finish(), Err(ironbark::Error::TxnFailed(_))));
    /// assert!(tx.commit().is_err()); // nothing of it is committed
    /// # Ok(())
    /// # }
    /// ```
    pub fn finish(mut self) -> Result<()> {
        self.finished = true;
        match self.incomplete() {
            Some(why) => {
                self.txn.failed.get_or_insert_with(|| why.clone());
                Err(Error::TxnFailed(why))
            }
            None => {
                // The value is whole: into its put record now.
                self.txn.flush_reserved();
                Ok(())
            }
        }
    }

    /// Why the value is not whole, if it is not.
    fn incomplete(&self) -> Option<String> {
        if self.overran {
            Some(format!(
                "a streamed value was offered more than its {} bytes",
                self.len
            ))
        } else if self.written < self.len {
            Some(format!(
                "a streamed value got {} of its {} bytes",
                self.written, self.len
            ))
        } else {
            None
        }
    }
}

impl io::Write for ValueWriter<'_, '_> {
    /// Copies as much of `buf` as the value has room for into its place;
    /// a write with no room left (the value is whole) is an
    /// `InvalidInput` error, and fails the transaction.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let n = buf.len().min(self.remaining());
        if n == 0 {
            self.overran = true;
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "the streamed value is {} bytes and all were written",
                    self.len
                ),
            ));
        }
        let start = self.at + self.written;
        self.txn.dirty.get_mut(self.page)[start..start + n].copy_from_slice(&buf[..n]);
        self.written += n;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for ValueWriter<'_, '_> {
    fn drop(&mut self) {
        if !self.finished {
            if let Some(why) = self.incomplete() {
                self.txn.failed.get_or_insert(why);
            }
        }
    }
}

/// A value read in place: see [`ReadTxn::get_reader`]. It implements
/// [`io::Read`], [`io::BufRead`] and [`io::Seek`] over the value's bytes,
/// which it borrows from the transaction (no copy); seeking past the end
/// is allowed (reads there return nothing), before the start is an error.
#[derive(Clone, Debug)]
pub struct ValueReader<'a> {
    inner: io::Cursor<&'a [u8]>,
}

impl<'a> ValueReader<'a> {
    fn new(bytes: &'a [u8]) -> ValueReader<'a> {
        ValueReader {
            inner: io::Cursor::new(bytes),
        }
    }

    /// The value's length in bytes.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// tx.put(&t, b"k", b"")?;
    /// let r = tx.get_reader(&t, b"k")?.unwrap();
    /// assert_eq!((r.len(), r.is_empty()), (0, true));
    /// # Ok(())
    /// # }
    /// ```
    pub fn len(&self) -> u64 {
        self.inner.get_ref().len() as u64
    }

    /// Whether the value is empty.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// tx.put(&t, b"k", b"v")?;
    /// assert!(!tx.get_reader(&t, b"k")?.unwrap().is_empty());
    /// # Ok(())
    /// # }
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The position of the next byte read.
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// use std::io::Read;
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// tx.put(&t, b"k", b"abcdef")?;
    /// let mut r = tx.get_reader(&t, b"k")?.unwrap();
    /// r.read_exact(&mut [0u8; 4])?;
    /// assert_eq!(r.position(), 4);
    /// # Ok(())
    /// # }
    /// ```
    pub fn position(&self) -> u64 {
        self.inner.position()
    }

    /// The whole value, borrowed (what [`ReadTxn::get`] returns).
    ///
    /// ```
    /// # fn main() -> ironbark::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = ironbark::Database::open(dir.path().join("data.ib"))?;
    /// let mut tx = db.begin_write()?;
    /// let t = tx.open_tree("t")?;
    /// tx.put(&t, b"k", b"abc")?;
    /// assert_eq!(tx.get_reader(&t, b"k")?.unwrap().as_bytes(), b"abc");
    /// # Ok(())
    /// # }
    /// ```
    pub fn as_bytes(&self) -> &'a [u8] {
        self.inner.get_ref()
    }
}

impl Read for ValueReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read(buf)
    }

    fn read_exact(&mut self, buf: &mut [u8]) -> io::Result<()> {
        self.inner.read_exact(buf)
    }
}

impl BufRead for ValueReader<'_> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.inner.fill_buf()
    }

    fn consume(&mut self, amt: usize) {
        self.inner.consume(amt)
    }
}

impl Seek for ValueReader<'_> {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        self.inner.seek(pos)
    }

    fn stream_position(&mut self) -> io::Result<u64> {
        Ok(self.inner.position())
    }
}
