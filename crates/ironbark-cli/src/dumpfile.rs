//! The text format of LMDB's `mdb_dump` / `mdb_load` (the Berkeley DB
//! `db_dump` format, VERSION=3), written and read as a stream.
//!
//! A dump is one or more sections. Each section is a header (`KEY=VALUE`
//! lines up to `HEADER=END`) followed by data lines up to `DATA=END`. Every
//! data line starts with one space; lines alternate key, value. In
//! `format=bytevalue` a line is lowercase hex pairs; in `format=print`
//! printable bytes stand for themselves, `\\` is a backslash and `\xx` is
//! the byte with hex value `xx`.
//!
//! The reader is strict about what would lose or corrupt data (bad hex, an
//! odd number of digits, a key without a value, a missing `DATA=END`,
//! duplicate values ordered as integers or in reverse) and names the line
//! of each problem; header
//! keywords it has no use for (`mapsize`, `maxreaders`, `db_pagesize`, ...)
//! are accepted and ignored, as `mdb_load` does.

use std::fmt;
use std::io::{self, BufRead, Write};

/// How data lines are encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Hex pairs (`format=bytevalue`, `mdb_dump`'s default).
    Bytevalue,
    /// Printable characters with `\\` and `\xx` escapes (`format=print`, `-p`).
    Print,
}

impl Format {
    fn name(self) -> &'static str {
        match self {
            Format::Bytevalue => "bytevalue",
            Format::Print => "print",
        }
    }
}

/// What a section header says (writing), or the part of it that matters
/// (reading).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// Encoding of the data lines.
    pub format: Format,
    /// `database=NAME`: a named database; `None` is LMDB's main database.
    pub database: Option<String>,
    /// `mapsize=`, written for `mdb_load`'s benefit; ignored when read.
    pub mapsize: Option<u64>,
    /// `maxreaders=`; ignored when read.
    pub maxreaders: Option<u64>,
    /// `db_pagesize=`; ignored when read.
    pub pagesize: Option<u64>,
    /// `duplicates=1` / `dupsort=1`: a database with sorted duplicate
    /// values (LMDB's `MDB_DUPSORT`; an ironbark multimap).
    pub dupsort: bool,
    /// `integerkey=1`: native-endian unsigned keys of 4 or 8 bytes, in
    /// numeric order (LMDB's `MDB_INTEGERKEY`; an ironbark integer-key
    /// tree).
    pub integerkey: bool,
    /// The line number of the section's first line (reading only).
    pub line: u64,
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Writes a section header, in the order `mdb_dump` writes it.
pub fn write_header(w: &mut impl Write, h: &Header) -> io::Result<()> {
    writeln!(w, "VERSION=3")?;
    writeln!(w, "format={}", h.format.name())?;
    if let Some(name) = &h.database {
        writeln!(w, "database={name}")?;
    }
    writeln!(w, "type=btree")?;
    if let Some(m) = h.mapsize {
        writeln!(w, "mapsize={m}")?;
    }
    if let Some(m) = h.maxreaders {
        writeln!(w, "maxreaders={m}")?;
    }
    // As mdb_dump writes them (its mdb_load reads `dupsort`; db_dump's
    // readers read `duplicates`).
    if h.dupsort {
        writeln!(w, "duplicates=1")?;
        writeln!(w, "dupsort=1")?;
    }
    if h.integerkey {
        writeln!(w, "integerkey=1")?;
    }
    if let Some(p) = h.pagesize {
        writeln!(w, "db_pagesize={p}")?;
    }
    writeln!(w, "HEADER=END")
}

/// Writes the end of a section.
pub fn write_footer(w: &mut impl Write) -> io::Result<()> {
    writeln!(w, "DATA=END")
}

/// Appends one encoded data line (leading space and newline included) to
/// `out`.
pub fn encode_line(format: Format, bytes: &[u8], out: &mut Vec<u8>) {
    out.push(b' ');
    match format {
        Format::Bytevalue => {
            for &b in bytes {
                out.push(HEX[(b >> 4) as usize]);
                out.push(HEX[(b & 15) as usize]);
            }
        }
        Format::Print => {
            for &b in bytes {
                if b == b'\\' {
                    out.extend_from_slice(b"\\\\");
                } else if (0x20..0x7f).contains(&b) {
                    out.push(b);
                } else {
                    out.push(b'\\');
                    out.push(HEX[(b >> 4) as usize]);
                    out.push(HEX[(b & 15) as usize]);
                }
            }
        }
    }
    out.push(b'\n');
}

/// A problem in the dump text, at a line (1-based).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// The line of the problem.
    pub line: u64,
    /// What is wrong there.
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// Errors of the reader: the input could not be read, or it is malformed.
#[derive(Debug)]
pub enum ReadError {
    /// Reading the input failed.
    Io(io::Error),
    /// The text is not a valid dump.
    Parse(ParseError),
}

impl From<io::Error> for ReadError {
    fn from(e: io::Error) -> ReadError {
        ReadError::Io(e)
    }
}

/// A streaming reader of dump text.
pub struct Reader<R> {
    input: R,
    /// The number of the line last read.
    line: u64,
    /// Bytes consumed so far (for progress).
    bytes: u64,
    buf: Vec<u8>,
    /// Non-fatal remarks about headers, for the user.
    warnings: Vec<String>,
}

fn hex_val(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Shows a byte of the input in a message.
fn show(c: u8) -> String {
    if (0x20..0x7f).contains(&c) {
        format!("'{}'", c as char)
    } else {
        format!("byte 0x{c:02x}")
    }
}

impl<R: BufRead> Reader<R> {
    /// A reader of `input`.
    pub fn new(input: R) -> Reader<R> {
        Reader {
            input,
            line: 0,
            bytes: 0,
            buf: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// Bytes of input consumed so far.
    pub fn bytes_read(&self) -> u64 {
        self.bytes
    }

    /// Takes the warnings gathered so far.
    pub fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    fn error<T>(&self, line: u64, message: impl Into<String>) -> Result<T, ReadError> {
        Err(ReadError::Parse(ParseError {
            line,
            message: message.into(),
        }))
    }

    /// Reads the next line into `self.buf`, without its newline. Returns
    /// false at the end of the input.
    fn next_line(&mut self) -> io::Result<bool> {
        self.buf.clear();
        let n = self.input.read_until(b'\n', &mut self.buf)?;
        if n == 0 {
            return Ok(false);
        }
        self.bytes += n as u64;
        self.line += 1;
        if self.buf.last() == Some(&b'\n') {
            self.buf.pop();
        }
        Ok(true)
    }

    /// Reads the next section's header, up to and including `HEADER=END`.
    /// Returns `None` at the end of the input (blank lines between and
    /// after sections are skipped).
    pub fn next_section(&mut self) -> Result<Option<Header>, ReadError> {
        let mut header = Header {
            format: Format::Bytevalue,
            database: None,
            mapsize: None,
            maxreaders: None,
            pagesize: None,
            dupsort: false,
            integerkey: false,
            line: 0,
        };
        loop {
            if !self.next_line()? {
                if header.line == 0 {
                    return Ok(None);
                }
                return self.error(
                    self.line + 1,
                    "unexpected end of input in a header (no HEADER=END)",
                );
            }
            let line = self.line;
            if self.buf.iter().all(|c| c.is_ascii_whitespace()) {
                continue;
            }
            if header.line == 0 {
                header.line = line;
            }
            if self.buf == b"HEADER=END" {
                return Ok(Some(header));
            }
            let Some(eq) = self.buf.iter().position(|&c| c == b'=') else {
                if self.buf.first() == Some(&b' ') {
                    return self.error(line, "data line before HEADER=END");
                }
                return self.error(line, "expected a header line KEY=VALUE or HEADER=END");
            };
            let key = String::from_utf8_lossy(&self.buf[..eq]).into_owned();
            let value = &self.buf[eq + 1..];
            let text = String::from_utf8_lossy(value).into_owned();
            match key.as_str() {
                "VERSION" => match text.trim().parse::<u32>() {
                    Ok(v) if (1..=3).contains(&v) => {}
                    _ => return self.error(line, format!("unsupported VERSION {text:?} (1 to 3)")),
                },
                "format" => {
                    header.format = match text.as_str() {
                        "bytevalue" => Format::Bytevalue,
                        "print" => Format::Print,
                        _ => {
                            return self.error(
                                line,
                                format!("unsupported format {text:?} (bytevalue or print)"),
                            )
                        }
                    }
                }
                "database" | "subdatabase" => {
                    let Ok(name) = String::from_utf8(value.to_vec()) else {
                        return self.error(line, "database name is not valid UTF-8");
                    };
                    header.database = Some(name);
                }
                "type" => {
                    if text != "btree" {
                        return self.error(line, format!("unsupported type {text:?} (only btree)"));
                    }
                }
                "mapsize" => header.mapsize = text.parse().ok(),
                "maxreaders" => header.maxreaders = text.parse().ok(),
                "db_pagesize" => header.pagesize = text.parse().ok(),
                "mapaddr" => {}
                "duplicates" | "dupsort" => header.dupsort = text != "0",
                "integerkey" => header.integerkey = text != "0",
                "reversekey" => {
                    if text != "0" {
                        self.warnings.push(format!(
                            "line {line}: {key}={text}: ironbark orders keys bytewise, so \
                             this database's keys will be in a different order"
                        ));
                    }
                }
                "dupfixed" => {
                    if text != "0" {
                        self.warnings.push(format!(
                            "line {line}: {key}={text}: loaded as a multimap whose values \
                             may differ in size (ironbark does not keep this flag)"
                        ));
                    }
                }
                "integerdup" | "reversedup" => {
                    if text != "0" {
                        return self.error(
                            line,
                            format!(
                                "{key}={text}: duplicate values ordered {} (MDB_{}) are not \
                                 supported by ironbark, whose multimaps order values bytewise",
                                if key == "integerdup" {
                                    "as integers"
                                } else {
                                    "in reverse"
                                },
                                key.to_uppercase()
                            ),
                        );
                    }
                }
                _ => self.warnings.push(format!(
                    "line {line}: unrecognized header keyword ignored: {key}"
                )),
            }
        }
    }

    /// Decodes the current line (after its leading space) into `out`.
    fn decode(&self, format: Format, out: &mut Vec<u8>) -> Result<(), ReadError> {
        out.clear();
        let data = &self.buf[1..];
        let line = self.line;
        match format {
            Format::Bytevalue => {
                if data.len() % 2 == 1 {
                    return self.error(line, "odd number of hex digits");
                }
                for (i, pair) in data.chunks_exact(2).enumerate() {
                    match (hex_val(pair[0]), hex_val(pair[1])) {
                        (Some(h), Some(l)) => out.push(h << 4 | l),
                        (h, _) => {
                            let (col, c) = if h.is_none() {
                                (2 * i, pair[0])
                            } else {
                                (2 * i + 1, pair[1])
                            };
                            return self.error(
                                line,
                                format!("invalid hex digit {} at column {}", show(c), col + 2),
                            );
                        }
                    }
                }
            }
            Format::Print => {
                let mut i = 0;
                while i < data.len() {
                    let c = data[i];
                    if c != b'\\' {
                        out.push(c);
                        i += 1;
                        continue;
                    }
                    if data.get(i + 1) == Some(&b'\\') {
                        out.push(b'\\');
                        i += 2;
                        continue;
                    }
                    match (
                        data.get(i + 1).copied().and_then(hex_val),
                        data.get(i + 2).copied().and_then(hex_val),
                    ) {
                        (Some(h), Some(l)) => {
                            out.push(h << 4 | l);
                            i += 3;
                        }
                        _ => {
                            return self.error(
                                line,
                                format!(
                                    "invalid escape at column {} (expected \\\\ or \\ and two hex digits)",
                                    i + 2
                                ),
                            )
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Reads the next entry of the current section into `key` and `value`.
    /// Returns false at `DATA=END`.
    pub fn next_entry(
        &mut self,
        format: Format,
        key: &mut Vec<u8>,
        value: &mut Vec<u8>,
    ) -> Result<bool, ReadError> {
        if !self.next_line()? {
            return self.error(self.line + 1, "unexpected end of input (no DATA=END)");
        }
        if self.buf == b"DATA=END" {
            return Ok(false);
        }
        if self.buf.first() != Some(&b' ') {
            return self.error(
                self.line,
                "expected a data line (starting with a space) or DATA=END",
            );
        }
        self.decode(format, key)?;
        let key_line = self.line;
        if !self.next_line()? {
            return self.error(
                self.line + 1,
                format!("unexpected end of input: the key on line {key_line} has no value"),
            );
        }
        if self.buf.first() != Some(&b' ') {
            return self.error(
                self.line,
                format!(
                    "expected the value of the key on line {key_line} (a line starting with a space)"
                ),
            );
        }
        self.decode(format, value)?;
        Ok(true)
    }

    /// The number of the line last read.
    pub fn line(&self) -> u64 {
        self.line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Sections = Vec<(Header, Vec<(Vec<u8>, Vec<u8>)>)>;

    fn parse(text: &str) -> Result<Sections, ParseError> {
        let mut r = Reader::new(text.as_bytes());
        let mut out = Vec::new();
        loop {
            let h = match r.next_section() {
                Ok(Some(h)) => h,
                Ok(None) => return Ok(out),
                Err(ReadError::Parse(e)) => return Err(e),
                Err(ReadError::Io(e)) => panic!("{e}"),
            };
            let mut entries = Vec::new();
            let (mut k, mut v) = (Vec::new(), Vec::new());
            loop {
                match r.next_entry(h.format, &mut k, &mut v) {
                    Ok(true) => entries.push((k.clone(), v.clone())),
                    Ok(false) => break,
                    Err(ReadError::Parse(e)) => return Err(e),
                    Err(ReadError::Io(e)) => panic!("{e}"),
                }
            }
            out.push((h, entries));
        }
    }

    fn line(format: Format, bytes: &[u8]) -> String {
        let mut out = Vec::new();
        encode_line(format, bytes, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn encodes_like_mdb_dump() {
        assert_eq!(line(Format::Bytevalue, b"\x00\xffAb"), " 00ff4162\n");
        assert_eq!(
            line(Format::Print, b"a b\\\x00\x7f~"),
            " a b\\\\\\00\\7f~\n"
        );
        assert_eq!(line(Format::Print, b""), " \n");
    }

    #[test]
    fn all_bytes_round_trip_in_both_formats() {
        let all: Vec<u8> = (0..=255).collect();
        for format in [Format::Bytevalue, Format::Print] {
            let mut text = Vec::new();
            write_header(
                &mut text,
                &Header {
                    format,
                    database: Some("db".into()),
                    mapsize: Some(1048576),
                    maxreaders: Some(126),
                    pagesize: Some(4096),
                    dupsort: false,
                    integerkey: false,
                    line: 0,
                },
            )
            .unwrap();
            encode_line(format, &all, &mut text);
            encode_line(format, b"", &mut text);
            write_footer(&mut text).unwrap();
            let parsed = parse(std::str::from_utf8(&text).unwrap()).unwrap();
            assert_eq!(parsed.len(), 1);
            assert_eq!(parsed[0].0.format, format);
            assert_eq!(parsed[0].0.database.as_deref(), Some("db"));
            assert_eq!(parsed[0].1, vec![(all.clone(), Vec::new())]);
        }
    }

    #[test]
    fn several_sections_and_ignored_headers() {
        let text = "VERSION=3\nformat=bytevalue\ntype=btree\nmapsize=1048576\nmaxreaders=126\n\
                    db_pagesize=4096\nHEADER=END\n 61\n 62\nDATA=END\n\
                    VERSION=3\nformat=print\ndatabase=x y\nHEADER=END\n k\n \\41\\\\\nDATA=END\n\n";
        let parsed = parse(text).unwrap();
        assert_eq!(parsed.len(), 2);
        assert_eq!(parsed[0].0.database, None);
        assert_eq!(parsed[0].1, vec![(b"a".to_vec(), b"b".to_vec())]);
        assert_eq!(parsed[1].0.database.as_deref(), Some("x y"));
        assert_eq!(parsed[1].0.line, 11);
        assert_eq!(parsed[1].1, vec![(b"k".to_vec(), b"A\\".to_vec())]);
    }

    #[test]
    fn errors_name_the_line() {
        let head = "VERSION=3\nformat=bytevalue\nHEADER=END\n";
        let cases = [
            (format!("{head} 6\n 62\nDATA=END\n"), 4, "odd number"),
            (
                format!("{head} 61\n 6g\nDATA=END\n"),
                5,
                "invalid hex digit 'g' at column 3",
            ),
            (
                format!("{head} 61\nDATA=END\n"),
                5,
                "value of the key on line 4",
            ),
            (format!("{head} 61\n 62\n"), 6, "no DATA=END"),
            (format!("{head} 61\n 62\nxyz\n"), 6, "expected a data line"),
            (
                "VERSION=3\nformat=hex\nHEADER=END\n".to_string(),
                2,
                "unsupported format",
            ),
            (
                "VERSION=4\nHEADER=END\n".to_string(),
                1,
                "unsupported VERSION",
            ),
            (
                "VERSION=3\ntype=hash\nHEADER=END\n".to_string(),
                2,
                "unsupported type",
            ),
            (
                "VERSION=3\nduplicates=1\nintegerdup=1\nHEADER=END\n".to_string(),
                3,
                "ordered as integers (MDB_INTEGERDUP) are not supported",
            ),
            (
                "VERSION=3\ndupsort=1\nreversedup=1\nHEADER=END\n".to_string(),
                3,
                "ordered in reverse (MDB_REVERSEDUP)",
            ),
            ("hello world\n".to_string(), 1, "expected a header line"),
            ("VERSION=3\nformat=print\n".to_string(), 3, "no HEADER=END"),
            (
                "VERSION=3\nformat=print\nHEADER=END\n a\\x1\n b\nDATA=END\n".to_string(),
                4,
                "invalid escape at column 3",
            ),
        ];
        for (text, line, msg) in cases {
            let e = parse(&text).unwrap_err();
            assert_eq!(e.line, line, "{text:?}: {e}");
            assert!(e.message.contains(msg), "{text:?}: {e}");
        }
    }

    #[test]
    fn missing_final_newline_and_uppercase_hex() {
        let parsed = parse("VERSION=3\nHEADER=END\n 4A\n 4b\nDATA=END").unwrap();
        assert_eq!(parsed[0].1, vec![(b"J".to_vec(), b"K".to_vec())]);
    }

    #[test]
    fn kind_flags_are_read_and_written_as_mdb_dump_writes_them() {
        let text = "VERSION=3\nformat=bytevalue\ndatabase=d\ntype=btree\nmapsize=1048576\n\
                    maxreaders=126\nduplicates=1\ndupsort=1\nintegerkey=1\n\
                    db_pagesize=4096\nHEADER=END\nDATA=END\n";
        let parsed = parse(text).unwrap();
        let h = &parsed[0].0;
        assert!(h.dupsort && h.integerkey);
        let mut out = Vec::new();
        write_header(&mut out, h).unwrap();
        write_footer(&mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), text);
        for (text, dupsort, integerkey) in [
            ("dupsort=1\n", true, false),
            ("duplicates=1\n", true, false),
            ("dupsort=0\nintegerkey=1\n", false, true),
            ("", false, false),
        ] {
            let parsed = parse(&format!("VERSION=3\n{text}HEADER=END\nDATA=END\n")).unwrap();
            assert_eq!(
                (parsed[0].0.dupsort, parsed[0].0.integerkey),
                (dupsort, integerkey),
                "{text}"
            );
        }
    }

    #[test]
    fn unknown_keywords_warn() {
        let mut r = Reader::new("VERSION=3\nfoo=bar\nHEADER=END\nDATA=END\n".as_bytes());
        assert!(r.next_section().unwrap().is_some());
        let w = r.take_warnings();
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("line 2") && w[0].contains("foo"));
    }
}
