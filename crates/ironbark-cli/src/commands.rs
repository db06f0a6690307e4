//! The subcommands.

use std::fs::{self, File};
use std::io::{self, BufRead, BufReader, BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ironbark::{Database, IntWidth, Options, ReadTxn, ReaderInfo, Stats, TreeStats, WriteTxn};
use serde_json::{json, Value};

use crate::dumpfile::{self, Format, Header, ReadError, Reader};
use crate::error::{
    db_error, db_write_error, io_message, output_error, CliError, Result, EXIT_CANNOT_CHECK,
    EXIT_FAILURE,
};
use crate::progress::{self, Unit};
use crate::MAIN_TREE;

/// Opens an existing database read-only (beside writers in other
/// processes; also without write permission); never creates one.
fn open_existing(path: &Path) -> Result<Database> {
    open_existing_with(path, true, false)
}

/// Opens an existing database, read-only or for writing; never creates one.
/// `salvage`: `Options::salvage_damaged_log`.
fn open_existing_with(path: &Path, read_only: bool, salvage: bool) -> Result<Database> {
    if fs::symlink_metadata(path).is_err() {
        return Err(CliError::new(format!("{}: no such file", path.display())));
    }
    if fs::metadata(path).is_ok_and(|m| m.is_dir()) {
        // A read-only open of a directory would fail later, less clearly.
        return Err(db_error(
            path,
            ironbark::Error::Io(io::Error::from_raw_os_error(EISDIR)),
        ));
    }
    let options = Options {
        salvage_damaged_log: salvage,
        ..existing_options(read_only)
    };
    open_tidy(path, &options).map_err(|e| match e {
        // A read-only open fails with `Locked` only when it cannot use the
        // lock file (no write access to it, and none to create it): then
        // it reads only while no process writes and the redo log holds no
        // commits to replay. Not a write transaction of another process,
        // as `db_error` says for a writer: most often a writer was killed
        // before it closed, and its commits wait in the log.
        ironbark::Error::Locked if read_only => CliError::new(format!(
            "{}: cannot read it without write access to its lock file {}: a process is \
             writing the database, or its redo log {} holds commits that only an open \
             with write access replays (a writer stopped before it closed: open the \
             database once as a user who may write it)",
            path.display(),
            lock_file_of(path).display(),
            log_file_of(path).display()
        )),
        e if !read_only => db_write_error(path, e),
        e => db_error(path, e),
    })
}

/// `Database::open_with`, leaving no lock file behind a foreign file: the
/// engine lays out the lock file before it reads the data file.
fn open_tidy(path: &Path, options: &Options) -> ironbark::Result<Database> {
    let lock_existed = fs::symlink_metadata(lock_file_of(path)).is_ok();
    Database::open_with(path, options).inspect_err(|e| {
        if matches!(e, ironbark::Error::NotAnIronbarkFile) && !lock_existed {
            let _ = fs::remove_file(lock_file_of(path));
        }
    })
}

/// Linux's `EISDIR`, which `db_error` explains.
const EISDIR: i32 = 21;

fn existing_options(read_only: bool) -> Options {
    Options {
        create: false,
        read_only,
        ..Options::default()
    }
}

/// How long `load` and `readers --clear-stale` try for the write lock held
/// by another process before giving up: long enough to slip in between the
/// commits of a busy writer, short enough never to seem to hang behind a
/// long write transaction.
const WRITE_LOCK_PATIENCE: Duration = Duration::from_secs(1);

/// The write transaction: waits for it if `wait`, else tries for
/// [`WRITE_LOCK_PATIENCE`] and then fails with `Locked`.
fn begin_write(db: &Database, wait: bool) -> ironbark::Result<WriteTxn<'_>> {
    if wait {
        return db.begin_write();
    }
    let deadline = Instant::now() + WRITE_LOCK_PATIENCE;
    loop {
        match db.try_begin_write() {
            Err(ironbark::Error::Locked | ironbark::Error::Busy) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            r => return r,
        }
    }
}

/// The lock file the engine keeps beside `db`.
fn lock_file_of(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push("-lock");
    PathBuf::from(name)
}

/// The redo log the engine keeps beside `db`.
fn log_file_of(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push("-log");
    PathBuf::from(name)
}

/// Removes a database this command created (the data file, and its lock
/// file and log unless they were there before).
fn remove_new_database(path: &Path, lock_existed: bool, log_existed: bool) {
    let _ = fs::remove_file(path);
    if !log_existed {
        let _ = fs::remove_file(log_file_of(path));
    }
    if !lock_existed {
        let _ = fs::remove_file(lock_file_of(path));
    }
}

fn stats_of(db: &Database) -> Result<Stats> {
    db.stats().map_err(|e| db_error(db.path(), e))
}

/// "1 tree", "2 trees".
fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A byte count for people: "1.5 MiB".
fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["bytes", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} bytes")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

fn stdout() -> BufWriter<io::StdoutLock<'static>> {
    BufWriter::new(io::stdout().lock())
}

fn print_json(v: &Value) -> Result<()> {
    let mut out = stdout();
    serde_json::to_writer_pretty(&mut out, v)
        .map_err(|e| output_error(io::Error::other(e.to_string())))?;
    writeln!(out).map_err(output_error)?;
    out.flush().map_err(output_error)
}

fn tree_json(t: &TreeStats) -> Value {
    json!({
        "name": t.name,
        "depth": t.depth,
        "entries": t.entries,
        "branch_pages": t.branch_pages,
        "leaf_pages": t.leaf_pages,
        "overflow_pages": t.overflow_pages,
    })
}

/// `ironbark stat`.
pub fn stat(path: &Path, tree: Option<&str>, json: bool) -> Result<()> {
    let db = open_existing(path)?;
    let s = stats_of(&db)?;
    if let Some(name) = tree {
        let Some(t) = s.trees.iter().find(|t| t.name == name) else {
            return Err(no_such_tree(path, name, &s));
        };
        if json {
            return print_json(&tree_json(t));
        }
        let mut out = stdout();
        let w = &mut out;
        (|| -> io::Result<()> {
            writeln!(w, "tree            {}", t.name)?;
            writeln!(w, "depth           {}", t.depth)?;
            writeln!(w, "entries         {}", t.entries)?;
            writeln!(w, "branch pages    {}", t.branch_pages)?;
            writeln!(w, "leaf pages      {}", t.leaf_pages)?;
            writeln!(w, "overflow pages  {}", t.overflow_pages)?;
            w.flush()
        })()
        .map_err(output_error)?;
        return Ok(());
    }
    let used = s.page_count.saturating_sub(s.free_pages);
    if json {
        return print_json(&json!({
            "path": path.display().to_string(),
            "page_size": s.page_size,
            "file_size_bytes": s.file_size_bytes,
            "page_count": s.page_count,
            "used_pages": used,
            "free_pages": s.free_pages,
            "pages_pinned_by_readers": s.pages_pinned_by_readers,
            "last_txn_id": s.last_txn_id,
            "durable_txn_id": s.durable_txn_id,
            "live_readers": s.live_readers,
            "max_readers": s.max_readers,
            "oldest_snapshot": s.oldest_snapshot,
            "trees": s.trees.iter().map(tree_json).collect::<Vec<_>>(),
        }));
    }
    let mut out = stdout();
    let w = &mut out;
    (|| -> io::Result<()> {
        writeln!(w, "database         {}", path.display())?;
        writeln!(w, "page size        {}", s.page_size)?;
        writeln!(
            w,
            "file size        {} ({} bytes)",
            human(s.file_size_bytes),
            s.file_size_bytes
        )?;
        writeln!(
            w,
            "pages            {} ({}): {} used, {} free, {} of them pinned by readers",
            s.page_count,
            human(s.page_count * s.page_size as u64),
            used,
            s.free_pages,
            s.pages_pinned_by_readers
        )?;
        writeln!(
            w,
            "last txn         {} (durable: {})",
            s.last_txn_id, s.durable_txn_id
        )?;
        writeln!(
            w,
            "readers          {} live of {} slots; oldest snapshot: {}",
            s.live_readers,
            s.max_readers,
            s.oldest_snapshot
                .map_or_else(|| "none".to_string(), |t| t.to_string())
        )?;
        writeln!(w, "trees            {}", s.trees.len())?;
        if !s.trees.is_empty() {
            writeln!(w)?;
            let width = s
                .trees
                .iter()
                .map(|t| t.name.chars().count())
                .max()
                .unwrap_or(0)
                .max(4);
            writeln!(
                w,
                "{:<width$}  {:>5}  {:>12}  {:>10}  {:>10}  {:>10}",
                "tree", "depth", "entries", "branch", "leaf", "overflow"
            )?;
            for t in &s.trees {
                writeln!(
                    w,
                    "{:<width$}  {:>5}  {:>12}  {:>10}  {:>10}  {:>10}",
                    t.name, t.depth, t.entries, t.branch_pages, t.leaf_pages, t.overflow_pages
                )?;
            }
        }
        w.flush()
    })()
    .map_err(output_error)
}

fn no_such_tree(path: &Path, name: &str, s: &Stats) -> CliError {
    let names: Vec<&str> = s.trees.iter().map(|t| t.name.as_str()).collect();
    let have = if names.is_empty() {
        "it has no trees".to_string()
    } else {
        format!("its trees: {}", names.join(", "))
    };
    CliError::new(format!(
        "{}: no tree named {name:?} ({have})",
        path.display()
    ))
}

/// The `mapsize=` to tell `mdb_load`: room for the data with a wide margin
/// (LMDB reserves address space, not disk, for it).
fn lmdb_mapsize(s: &Stats) -> u64 {
    const MIB: u64 = 1 << 20;
    let used = s.page_count.saturating_sub(s.free_pages) * s.page_size as u64;
    used.saturating_mul(4).div_ceil(MIB).max(1) * MIB
}

/// LMDB's largest key (`MDB_MAXKEYSIZE` of a default build, as Debian's
/// `lmdb-utils` has): `mdb_load` fails on a longer one.
const LMDB_MAX_KEY: usize = 511;

/// `ironbark dump`.
///
/// Everything that can make the dump fail is checked before its first byte
/// is written: the tree names, and (one verified pass over the snapshot)
/// every page's checksum and, with `lmdb`, every key. So a dump that fails
/// writes nothing, and `ironbark dump --all A | ironbark load B` fails in
/// `load` too (empty input) instead of loading part of A.
pub fn dump(
    path: &Path,
    tree: Option<&str>,
    all: bool,
    print: bool,
    lmdb: bool,
    file: Option<&Path>,
) -> Result<()> {
    if let (Some(f), Ok(db_file)) = (file, fs::canonicalize(path)) {
        if fs::canonicalize(f).is_ok_and(|out| out == db_file) {
            return Err(CliError::new(format!(
                "{}: refusing to dump a database over itself",
                f.display()
            )));
        }
    }
    let db = open_existing(path)?;
    let s = stats_of(&db)?;
    let rx = db.begin_read().map_err(|e| db_error(path, e))?;
    let names: Vec<String> = if all {
        let main_first = s
            .trees
            .iter()
            .filter(|t| t.name == MAIN_TREE && t.entries > 0);
        let others = s.trees.iter().filter(|t| t.name != MAIN_TREE);
        main_first.chain(others).map(|t| t.name.clone()).collect()
    } else {
        let name = tree.unwrap_or(MAIN_TREE);
        if rx.tree_kind(name).is_err() {
            let mut e = no_such_tree(path, name, &s);
            if tree.is_none() {
                e.message = e.message.map(|m| format!("{m}; use --tree NAME or --all"));
            }
            return Err(e);
        }
        vec![name.to_string()]
    };
    let format = if print {
        Format::Print
    } else {
        Format::Bytevalue
    };
    let total: u64 = names
        .iter()
        .map(|n| {
            s.trees
                .iter()
                .find(|t| &t.name == n)
                .map_or(0, |t| t.entries)
        })
        .sum();
    // A bar on a terminal that also shows the dump would garble it.
    let visible = file.is_some() || !io::stdout().is_terminal();
    let pb = progress::bar(Some(total), Unit::Entries, "verifying", visible);
    let checked = preflight(&rx, &names, format, lmdb, &pb);
    pb.finish_and_clear();
    checked.map_err(|m| {
        CliError::new(format!(
            "{}: {m}; nothing was written{}",
            path.display(),
            if lmdb {
                " (checked for LMDB: --lmdb)"
            } else {
                ""
            }
        ))
    })?;
    let pb = progress::bar(Some(total), Unit::Entries, "dumping", visible);
    let result = match file {
        Some(f) => {
            write_file_atomically(f, |out| write_dump(out, path, &rx, &names, format, &s, &pb))
        }
        None => {
            let mut out = BufWriter::with_capacity(1 << 18, io::stdout().lock());
            write_dump(&mut out, path, &rx, &names, format, &s, &pb)
                .and_then(|()| out.flush().map_err(output_error))
        }
    };
    pb.finish_and_clear();
    result
}

/// Checks, before anything is written, what would make the dump fail
/// midway or `mdb_load` refuse it: names the dump format cannot carry,
/// damage (a verified pass over every tree to dump), and with `lmdb` what
/// LMDB cannot take. Returns the first problem, naming the tree and key.
fn preflight(
    rx: &ReadTxn,
    names: &[String],
    format: Format,
    lmdb: bool,
    pb: &indicatif::ProgressBar,
) -> std::result::Result<(), String> {
    for name in names {
        if name.contains('\n') {
            return Err(format!(
                "tree {name:?}: a name with a newline cannot be written in the dump format"
            ));
        }
        if lmdb && name.contains('\0') {
            return Err(format!(
                "tree {name:?}: LMDB cannot take a NUL byte in a database name \
                 (mdb_load cuts the name there)"
            ));
        }
    }
    // LMDB keeps the names of named databases as keys of its main
    // database: a key of `main` equal to one of them cannot be loaded.
    let named: Vec<&str> = names
        .iter()
        .map(String::as_str)
        .filter(|n| *n != MAIN_TREE)
        .collect();
    let mut done = 0u64;
    for name in names {
        let in_tree = |e: ironbark::Error| format!("tree {name:?}: {e}");
        let kind = rx.tree_kind(name).map_err(in_tree)?;
        lmdb_entries(rx, name, in_tree, |k, v| {
            if lmdb {
                lmdb_entry_problem(name, &named, format, k, v)?;
                if kind.multimap && v.len() > LMDB_MAX_KEY {
                    return Err(format!(
                        "tree {name:?}: a value of {} bytes of the key {} is longer than \
                         LMDB's limit of {LMDB_MAX_KEY} bytes for the values of a \
                         database with duplicates (MDB_DUPSORT)",
                        v.len(),
                        show_key(k)
                    ));
                }
            }
            done += 1;
            if done.is_multiple_of(4096) {
                pb.set_position(done);
            }
            Ok(())
        })?;
    }
    Ok(())
}

/// Calls `f` with each entry of the tree `name` as LMDB holds it, in
/// LMDB's order, verified as it is read: a plain tree's entries; each
/// (key, value) pair of a multimap (a key once per value, as `mdb_dump`
/// writes it); an integer-key tree's keys as native-endian integers of
/// the tree's width. `err` turns an engine error into the caller's.
fn lmdb_entries<E>(
    rx: &ReadTxn,
    name: &str,
    err: impl Fn(ironbark::Error) -> E,
    mut f: impl FnMut(&[u8], &[u8]) -> std::result::Result<(), E>,
) -> std::result::Result<(), E> {
    let kind = rx.tree_kind(name).map_err(&err)?;
    match kind.integer_key {
        None if !kind.multimap => {
            let tree = rx.tree(name).map_err(&err)?;
            for entry in rx.iter_verified(&tree).map_err(&err)? {
                let (k, v) = entry.map_err(&err)?;
                f(k, v)?;
            }
        }
        int_key if kind.multimap => {
            let m = rx.multimap(name).map_err(&err)?;
            for pair in rx.multimap_iter_verified(&m).map_err(&err)? {
                let (k, v) = pair.map_err(&err)?;
                match int_key {
                    // The API's big-endian bytes, LMDB's native-endian.
                    Some(_) => f(&big_to_native(&k), v)?,
                    None => f(&k, v)?,
                }
            }
        }
        _ => {
            let t = rx.int_tree(name).map_err(&err)?;
            for entry in rx.int_iter_verified(&t).map_err(&err)? {
                let (n, v) = entry.map_err(&err)?;
                f(&int_to_native(n, t.width()), v)?;
            }
        }
    }
    Ok(())
}

/// The native-endian bytes of `n` at `width`, as LMDB's `MDB_INTEGERKEY`
/// keys are.
fn int_to_native(n: u64, width: IntWidth) -> Vec<u8> {
    match width {
        IntWidth::U32 => (n as u32).to_ne_bytes().to_vec(),
        IntWidth::U64 => n.to_ne_bytes().to_vec(),
    }
}

/// Big-endian integer bytes (4 or 8 of them) as native-endian ones.
fn big_to_native(b: &[u8]) -> Vec<u8> {
    let mut v = b.to_vec();
    if cfg!(target_endian = "little") {
        v.reverse();
    }
    v
}

/// What LMDB's `mdb_load` cannot take in one entry of the tree `name`.
fn lmdb_entry_problem(
    name: &str,
    named: &[&str],
    format: Format,
    k: &[u8],
    v: &[u8],
) -> std::result::Result<(), String> {
    if k.is_empty() {
        return Err(format!("tree {name:?}: LMDB cannot take an empty key"));
    }
    if k.len() > LMDB_MAX_KEY {
        return Err(format!(
            "tree {name:?}: key {} of {} bytes is longer than LMDB's limit of \
             {LMDB_MAX_KEY} bytes",
            show_key(k),
            k.len()
        ));
    }
    if name == MAIN_TREE {
        if let Some(n) = named.iter().find(|n| n.as_bytes() == k) {
            return Err(format!(
                "tree {name:?}: key {} is also the name of the tree {n:?}, and LMDB \
                 keeps the names of named databases as keys of its main database",
                show_key(k)
            ));
        }
    }
    if format == Format::Print && (k.contains(&b'\\') || v.contains(&b'\\')) {
        return Err(format!(
            "tree {name:?}: the entry with key {} holds a backslash, which the \
             mdb_load of LMDB 0.9 can misread in format=print: dump without -p",
            show_key(k)
        ));
    }
    Ok(())
}

/// A key in a message: quoted when it is short printable text, else its
/// first bytes in hex.
fn show_key(k: &[u8]) -> String {
    const SHOWN: usize = 24;
    if k.len() <= 64 && k.iter().all(|b| (0x20..0x7f).contains(b)) {
        return format!("{:?}", String::from_utf8_lossy(k));
    }
    let hex: String = k.iter().take(SHOWN).map(|b| format!("{b:02x}")).collect();
    if k.len() > SHOWN {
        format!("0x{hex}...")
    } else {
        format!("0x{hex}")
    }
}

/// Writes `f` through `write`: into a temporary file beside it, synced and
/// then renamed over `f`, so that a failed dump leaves neither a partial
/// file nor a damaged earlier one.
fn write_file_atomically(
    f: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> Result<()>,
) -> Result<()> {
    let cannot =
        |e: io::Error| CliError::new(format!("cannot write {}: {}", f.display(), io_message(&e)));
    let name = f
        .file_name()
        .ok_or_else(|| CliError::new(format!("{}: not a file name", f.display())))?;
    let tmp = f.with_file_name(format!(
        ".{}.ironbark-dump-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let out = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(|e| CliError::new(format!("cannot create {}: {}", f.display(), io_message(&e))))?;
    let mut out = BufWriter::with_capacity(1 << 18, out);
    let result = write(&mut out)
        .and_then(|()| out.flush().map_err(cannot))
        .and_then(|()| out.get_ref().sync_all().map_err(cannot))
        .and_then(|()| fs::rename(&tmp, f).map_err(cannot));
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

fn write_dump(
    out: &mut impl Write,
    path: &Path,
    rx: &ReadTxn,
    names: &[String],
    format: Format,
    s: &Stats,
    pb: &indicatif::ProgressBar,
) -> Result<()> {
    let mut line = Vec::with_capacity(1 << 12);
    let mut done = 0u64;
    for name in names {
        let in_tree =
            |e: ironbark::Error| CliError::new(format!("{}: tree {name:?}: {e}", path.display()));
        let kind = rx.tree_kind(name).map_err(in_tree)?;
        let header = Header {
            format,
            database: (name != MAIN_TREE).then(|| name.clone()),
            mapsize: Some(lmdb_mapsize(s)),
            maxreaders: Some(s.max_readers as u64),
            pagesize: Some(s.page_size as u64),
            dupsort: kind.multimap,
            integerkey: kind.integer_key.is_some(),
            line: 0,
        };
        dumpfile::write_header(out, &header).map_err(output_error)?;
        // Verified again as it is written (the check pass was not this
        // pass): a section cut short has no DATA=END, which load refuses.
        lmdb_entries(rx, name, in_tree, |k, v| {
            line.clear();
            dumpfile::encode_line(format, k, &mut line);
            dumpfile::encode_line(format, v, &mut line);
            out.write_all(&line).map_err(output_error)?;
            done += 1;
            if done.is_multiple_of(4096) {
                pb.set_position(done);
            }
            Ok(())
        })?;
        dumpfile::write_footer(out).map_err(output_error)?;
    }
    pb.set_position(done);
    Ok(())
}

/// `ironbark load`.
pub fn load(
    path: &Path,
    file: Option<&Path>,
    tree: Option<&str>,
    append: bool,
    wait: bool,
) -> Result<()> {
    let (input, source, len): (Box<dyn BufRead>, String, Option<u64>) = match file {
        Some(f) => {
            let opened = File::open(f).map_err(|e| {
                if e.kind() == io::ErrorKind::NotFound {
                    CliError::new(format!("{}: no such file", f.display()))
                } else {
                    CliError::new(format!("cannot read {}: {}", f.display(), io_message(&e)))
                }
            })?;
            let len = opened.metadata().ok().map(|m| m.len());
            (
                Box::new(BufReader::with_capacity(1 << 18, opened)),
                f.display().to_string(),
                len,
            )
        }
        None if io::stdin().is_terminal() => {
            return Err(CliError::new(
                "no input: pipe a dump into ironbark load, or give -f FILE \
                 (see ironbark load --help)",
            ))
        }
        None => (
            Box::new(BufReader::with_capacity(1 << 18, io::stdin().lock())),
            "stdin".to_string(),
            None,
        ),
    };
    let existed = fs::symlink_metadata(path).is_ok();
    let lock_existed = fs::symlink_metadata(lock_file_of(path)).is_ok();
    let log_existed = fs::symlink_metadata(log_file_of(path)).is_ok();
    // The first section header is read before the database is opened (and
    // perhaps created): an empty input, or one that is not a dump at all,
    // creates nothing. Empty input is refused: it is what a failed
    // `ironbark dump` or an `mdb_dump -a` of a main-database-only LMDB
    // environment sends down a pipe, never a request to load nothing.
    let mut reader = Reader::new(input);
    let nothing = "nothing was loaded";
    let first = match reader.next_section() {
        Ok(Some(header)) => header,
        Ok(None) => {
            return Err(CliError::new(format!(
                "{source}: the input holds no dump sections; {nothing} (an upstream \
                 dump that failed writes nothing; `mdb_dump -a` writes nothing for an \
                 LMDB environment with only a main database: dump that with `mdb_dump \
                 ENV`, without -a)"
            )))
        }
        Err(e) => return Err(read_error(&source, e, nothing)),
    };
    let db = match open_tidy(path, &Options::default()) {
        Ok(db) => db,
        Err(e) => {
            if !existed {
                remove_new_database(path, lock_existed, log_existed);
            }
            return Err(db_write_error(path, e));
        }
    };
    let pb = progress::bar(len, Unit::Bytes, "loading", true);
    let result = load_into(&db, reader, first, &source, tree, append, wait, &pb);
    pb.finish_and_clear();
    drop(db);
    match result {
        Ok(summary) => {
            let mut out = stdout();
            writeln!(out, "{}: {summary}", path.display()).map_err(output_error)?;
            out.flush().map_err(output_error)
        }
        Err(e) => {
            if !existed {
                // Leave no empty database (nor its lock file or log)
                // behind a failed load.
                remove_new_database(path, lock_existed, log_existed);
            }
            Err(e)
        }
    }
}

/// A problem reading the dump text, as one line.
fn read_error(source: &str, e: ReadError, nothing: &str) -> CliError {
    match e {
        ReadError::Io(e) => CliError::new(format!(
            "cannot read {source}: {}; {nothing}",
            io_message(&e)
        )),
        ReadError::Parse(p) => CliError::new(format!("{source}: {p}; {nothing}")),
    }
}

/// Loads every section, from `first` (already read) to the end of the
/// input, in one write transaction.
#[allow(clippy::too_many_arguments)]
fn load_into(
    db: &Database,
    mut reader: Reader<Box<dyn BufRead>>,
    first: Header,
    source: &str,
    tree_override: Option<&str>,
    append: bool,
    wait: bool,
    pb: &indicatif::ProgressBar,
) -> Result<String> {
    let path = db.path().to_path_buf();
    let nothing = "nothing was loaded";
    let read_error = |e: ReadError| read_error(source, e, nothing);
    let mut tx = begin_write(db, wait).map_err(|e| {
        let locked = matches!(e, ironbark::Error::Locked);
        let mut e = db_error(&path, e);
        if locked {
            e.message = e
                .message
                .map(|m| format!("{m}; {nothing} (use --wait to wait for it)"));
        }
        e
    })?;
    let (mut key, mut value) = (Vec::new(), Vec::new());
    let mut entries = 0u64;
    let mut trees: Vec<String> = Vec::new();
    let mut next = Some(first);
    while let Some(header) = next {
        for w in reader.take_warnings() {
            eprintln!("ironbark: warning: {source}: {w}");
        }
        let name = tree_override
            .map(str::to_string)
            .or(header.database)
            .unwrap_or_else(|| MAIN_TREE.to_string());
        let at = |line: u64, msg: String| {
            CliError::new(format!("{source}: line {line}: {msg}; {nothing}"))
        };
        if !trees.contains(&name) {
            trees.push(name.clone());
        }
        // An integer-key tree is opened at its first key, whose length is
        // the width (or as it exists already): until then, `None`.
        let mut target = None;
        if !header.integerkey {
            target = Some(
                open_target(
                    &mut tx,
                    &name,
                    (header.dupsort, header.integerkey),
                    key.len(),
                )
                .map_err(|e| at(header.line, format!("cannot open tree {name:?}: {e}")))?,
            );
        }
        while reader
            .next_entry(header.format, &mut key, &mut value)
            .map_err(read_error)?
        {
            let key_line = reader.line() - 1;
            let t = match &target {
                Some(t) => t,
                None => target.insert(
                    open_target(
                        &mut tx,
                        &name,
                        (header.dupsort, header.integerkey),
                        key.len(),
                    )
                    .map_err(|e| at(key_line, format!("cannot open tree {name:?}: {e}")))?,
                ),
            };
            let stored = match t {
                Target::Plain(t) if append => tx.append(t, &key, &value),
                Target::Plain(t) => tx.put(t, &key, &value),
                Target::Multi(m, None) => tx.put_dup(m, &key, &value).map(drop),
                Target::Multi(m, Some(w)) => native_int(&key, *w, &name).and_then(|n| {
                    // The API's integer keys are big-endian.
                    tx.put_dup(m, &n.to_be_bytes()[8 - w.bytes()..], &value)
                        .map(drop)
                }),
                Target::Int(t) => {
                    native_int(&key, t.width(), &name).and_then(|n| tx.put_int(t, n, &value))
                }
            };
            stored.map_err(|e| match e {
                ironbark::Error::KeyOutOfOrder(_) => at(
                    key_line,
                    format!(
                        "key out of order for --append in tree {name:?} (keys must be \
                         ascending and after the keys already in the tree)"
                    ),
                ),
                e => at(
                    key_line,
                    format!("cannot store the entry in tree {name:?}: {e}"),
                ),
            })?;
            entries += 1;
            if entries.is_multiple_of(4096) {
                pb.set_position(reader.bytes_read());
            }
        }
        if target.is_none() {
            open_target(&mut tx, &name, (header.dupsort, header.integerkey), 8)
                .map_err(|e| at(header.line, format!("cannot open tree {name:?}: {e}")))?;
        }
        next = reader.next_section().map_err(read_error)?;
    }
    tx.commit().map_err(|e| db_error(&path, e))?;
    let shown: Vec<&str> = trees.iter().take(8).map(String::as_str).collect();
    let more = if trees.len() > shown.len() {
        format!(", and {} more", trees.len() - shown.len())
    } else {
        String::new()
    };
    // At least one section: `load` refuses an input without any.
    Ok(format!(
        "loaded {} into {} ({}{more})",
        plural(entries, "entry", "entries"),
        plural(trees.len() as u64, "tree", "trees"),
        shown.join(", ")
    ))
}

/// The tree a section of a dump loads into.
enum Target {
    Plain(ironbark::Tree),
    /// With the width of its integer keys, if they are.
    Multi(ironbark::Multimap, Option<IntWidth>),
    Int(ironbark::IntTree),
}

/// Opens (or creates) the tree `name` of the kind a section's header asks
/// for (`dupsort=1`, `integerkey=1`). The width of integer keys is that of the tree if it exists,
/// else `key_len` (the first key's length).
fn open_target(
    tx: &mut WriteTxn<'_>,
    name: &str,
    (dupsort, integerkey): (bool, bool),
    key_len: usize,
) -> ironbark::Result<Target> {
    let width = if integerkey {
        let existing = tx.tree_kind(name).ok().and_then(|k| k.integer_key);
        match existing.or(IntWidth::of_len(key_len)) {
            Some(w) => Some(w),
            None => {
                return Err(ironbark::Error::IntegerKeySize {
                    name: name.to_string(),
                    width: key_len,
                    detail: format!(
                        "integerkey=1 needs keys of 4 or 8 bytes; a key of {key_len} bytes"
                    ),
                })
            }
        }
    } else {
        None
    };
    Ok(match (dupsort, width) {
        (false, None) => Target::Plain(tx.open_tree(name)?),
        (true, None) => Target::Multi(tx.open_multimap(name)?, None),
        (true, Some(w)) => Target::Multi(tx.open_int_multimap(name, w)?, Some(w)),
        (false, Some(w)) => Target::Int(tx.open_int_tree(name, w)?),
    })
}

/// A native-endian integer key of an `integerkey=1` section, of `width`.
fn native_int(key: &[u8], width: IntWidth, name: &str) -> ironbark::Result<u64> {
    let wrong = || ironbark::Error::IntegerKeySize {
        name: name.to_string(),
        width: width.bytes(),
        detail: format!("a key of {} bytes", key.len()),
    };
    match width {
        IntWidth::U32 => key
            .try_into()
            .map(|b| u64::from(u32::from_ne_bytes(b)))
            .map_err(|_| wrong()),
        IntWidth::U64 => key.try_into().map(u64::from_ne_bytes).map_err(|_| wrong()),
    }
}

/// `ironbark copy`.
///
/// Both kinds of copy verify every page of the snapshot against its
/// checksum before (page for page) or as (compacting) they copy it: damage
/// fails the copy, naming the page, and no file is created. A compacting
/// copy would otherwise give damaged data fresh, valid checksums.
pub fn copy(src: &Path, dst: &Path, compact: bool, salvage: bool) -> Result<()> {
    if fs::symlink_metadata(dst).is_ok() {
        return Err(CliError::new(format!(
            "{}: already exists (copy never overwrites a file)",
            dst.display()
        )));
    }
    let db = open_existing_with(src, true, salvage)?;
    let rx = db.begin_read().map_err(|e| db_error(src, e))?;
    let txn = rx.txn_id();
    // Damage is the source's; anything else (space, permissions) the
    // destination's.
    let blame = |e: ironbark::Error| match e {
        e @ ironbark::Error::Corrupted { .. } => {
            let mut e = db_error(src, e);
            e.message = e.message.map(|m| {
                format!(
                    "{m}; nothing was copied (`ironbark check {}` lists the damage)",
                    src.display()
                )
            });
            e
        }
        e => db_error(dst, e),
    };
    let compacted = |why: &str| -> Result<String> {
        let pb = progress::bar(None, Unit::Nothing, "compacting", true);
        let r = rx.compact_to(dst).map_err(blame);
        pb.finish_and_clear();
        let done = r?;
        Ok(format!(
            ", compacted{why}: {}, {}",
            plural(done.trees as u64, "tree", "trees"),
            plural(done.entries, "entry", "entries")
        ))
    };
    let summary = if compact {
        compacted("")?
    } else {
        let pb = progress::bar(None, Unit::Nothing, "copying", true);
        let r = rx.copy_to_verified(dst);
        pb.finish_and_clear();
        match r {
            Ok(()) => String::new(),
            // The snapshot's newest commits are logged commits another
            // process holds in memory (and its log): no page-for-page copy
            // of the file holds them, a compacting copy does.
            Err(ironbark::Error::InvalidOption(_)) => {
                compacted(" (its newest commits were in the redo log)")?
            }
            Err(e) => return Err(blame(e)),
        }
    };
    let size = fs::metadata(dst).map(|m| m.len()).unwrap_or(0);
    let mut out = stdout();
    writeln!(
        out,
        "copied {} (txn {txn}) to {}{summary}, {}",
        src.display(),
        dst.display(),
        human(size)
    )
    .map_err(output_error)?;
    out.flush().map_err(output_error)
}

/// `ironbark check`.
pub fn check(path: &Path, json: bool) -> Result<()> {
    let cannot = |e: CliError| e.with_code(EXIT_CANNOT_CHECK);
    let db = match open_existing(path) {
        Ok(db) => db,
        Err(e) => {
            // A file too damaged to open is a finding, not a failure to run.
            if fs::symlink_metadata(path).is_ok() {
                if let Err(ironbark::Error::Corrupted { page, detail }) =
                    open_tidy(path, &existing_options(true))
                {
                    return problems(
                        path,
                        json,
                        None,
                        &[(page, format!("cannot open: {detail}"))],
                    );
                }
            }
            return Err(cannot(e));
        }
    };
    let r = db.check_report().map_err(|e| cannot(db_error(path, e)))?;
    if !r.is_clean() {
        return problems(path, json, Some(&r), &r.problems);
    }
    if json {
        return print_json(&json!({
            "path": path.display().to_string(),
            "ok": true,
            "page_count": r.page_count,
            "pages_in_use": r.pages_in_use,
            "free_pages": r.free_pages,
            "trees": r.trees,
            "entries": r.entries,
            "problems": [],
        }));
    }
    let mut out = stdout();
    writeln!(
        out,
        "{}: ok: {} pages ({} in use, {} free), {}, {}",
        path.display(),
        r.page_count,
        r.pages_in_use,
        r.free_pages,
        plural(r.trees as u64, "tree", "trees"),
        plural(r.entries, "entry", "entries")
    )
    .and_then(|()| out.flush())
    .map_err(output_error)
}

/// The problems `check` found: one line each on stdout (or JSON), then the
/// error that makes the exit status 1.
fn problems(
    path: &Path,
    json: bool,
    report: Option<&ironbark::CheckReport>,
    found: &[(Option<u64>, String)],
) -> Result<()> {
    if json {
        let mut v = json!({
            "path": path.display().to_string(),
            "ok": false,
        });
        if let Some(r) = report {
            v["page_count"] = json!(r.page_count);
            v["trees"] = json!(r.trees);
        }
        v["problems"] = found
            .iter()
            .map(|(page, detail)| json!({ "page": page, "detail": one_line(detail) }))
            .collect();
        print_json(&v)?;
    } else {
        let mut out = stdout();
        (|| -> io::Result<()> {
            for (page, detail) in found {
                let detail = one_line(detail);
                match page {
                    Some(p) => writeln!(out, "{}: page {p}: {detail}", path.display())?,
                    None => writeln!(out, "{}: {detail}", path.display())?,
                }
            }
            out.flush()
        })()
        .map_err(output_error)?;
    }
    Err(CliError::new(format!(
        "{}: the integrity check found {}",
        path.display(),
        plural(found.len() as u64, "problem", "problems")
    ))
    .with_code(EXIT_FAILURE))
}

/// `text` on one line.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `ironbark readers`.
pub fn readers(path: &Path, clear_stale: bool, json: bool) -> Result<()> {
    let dead = |list: &[ReaderInfo]| list.iter().filter(|r| !r.alive).count();
    let mut cleared = None;
    let db = if clear_stale {
        // A read-only open sees the stale slots as they are; a writable
        // open clears them itself (when no other process is writing).
        let before = {
            let db = open_existing(path)?;
            let list = db.readers().map_err(|e| db_error(path, e))?;
            dead(&list)
        };
        let db = open_existing_with(path, false, false)?;
        let tx = begin_write(&db, false).map_err(|e| {
            let locked = matches!(e, ironbark::Error::Locked);
            let mut e = db_error(path, e);
            if locked {
                e.message = e.message.map(|m| {
                    format!(
                        "{m}; stale reader slots were not cleared (that writer clears them \
                         by itself when it needs their space; or try again)"
                    )
                });
            }
            e
        })?;
        drop(tx);
        db.clear_stale_readers().map_err(|e| db_error(path, e))?;
        let after = dead(&db.readers().map_err(|e| db_error(path, e))?);
        cleared = Some(before.saturating_sub(after));
        db
    } else {
        open_existing(path)?
    };
    let s = stats_of(&db)?;
    let mut list = db.readers().map_err(|e| db_error(path, e))?;
    list.sort_by_key(|r| (r.snapshot_txn, r.pid));
    let page_size = s.page_size as u64;
    let oldest = list.iter().map(|r| r.snapshot_txn).min();
    let pinned = list.iter().map(|r| r.pinned_pages).max().unwrap_or(0);
    let stale = dead(&list);
    if json {
        return print_json(&json!({
            "path": path.display().to_string(),
            "live_readers": list.len(),
            "stale_readers": stale,
            "max_readers": s.max_readers,
            "oldest_snapshot": oldest,
            "pages_pinned_by_readers": pinned,
            "bytes_pinned_by_readers": pinned * page_size,
            "last_txn_id": s.last_txn_id,
            "readers": list.iter().map(|r| json!({
                "pid": r.pid,
                "snapshot_txn": r.snapshot_txn,
                "alive": r.alive,
                "pinned_pages": r.pinned_pages,
                "pinned_bytes": r.pinned_pages * page_size,
            })).collect::<Vec<_>>(),
            "cleared_stale": cleared,
        }));
    }
    let mut out = stdout();
    let w = &mut out;
    (|| -> io::Result<()> {
        if let Some(n) = cleared {
            writeln!(
                w,
                "cleared {} of dead processes",
                plural(n as u64, "stale reader slot", "stale reader slots")
            )?;
        }
        let of_dead = if stale > 0 {
            format!(" ({stale} of dead processes: clear with --clear-stale)")
        } else {
            String::new()
        };
        writeln!(
            w,
            "live readers     {} of {} slots{of_dead}",
            list.len(),
            s.max_readers
        )?;
        writeln!(
            w,
            "oldest snapshot  {}",
            oldest.map_or_else(|| "none".to_string(), |t| format!("txn {t}"))
        )?;
        writeln!(
            w,
            "pinned pages     {} ({})",
            pinned,
            human(pinned * page_size)
        )?;
        writeln!(w, "last txn         {}", s.last_txn_id)?;
        if !list.is_empty() {
            writeln!(w)?;
            writeln!(
                w,
                "{:>10}  {:>12}  {:<5}  {:>12}  pinned",
                "pid", "snapshot txn", "state", "pinned pages"
            )?;
            for r in &list {
                writeln!(
                    w,
                    "{:>10}  {:>12}  {:<5}  {:>12}  {}",
                    r.pid,
                    r.snapshot_txn,
                    if r.alive { "alive" } else { "dead" },
                    r.pinned_pages,
                    human(r.pinned_pages * page_size)
                )?;
            }
        }
        w.flush()
    })()
    .map_err(output_error)
}
