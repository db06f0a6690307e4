//! Helpers shared by the integration tests: a seeded RNG (tests are
//! reproducible: no clock seeds), temp databases, and the images of a
//! database's two files (the data file and its redo log).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ironbark::{Database, Durability, Options, ReadTxn, WriteTxn};

/// Every tree's entries.
pub type Model = BTreeMap<String, BTreeMap<Vec<u8>, Vec<u8>>>;

/// SplitMix64: small, fast, deterministic.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(len + 8);
        while v.len() < len {
            v.extend_from_slice(&self.next_u64().to_le_bytes());
        }
        v.truncate(len);
        v
    }
}

pub struct TempDb {
    pub dir: tempfile::TempDir,
    pub path: PathBuf,
}

pub fn temp_db(name: &str) -> TempDb {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(name);
    TempDb { dir, path }
}

/// The redo log's path for the data file `path`: `<data file>-log`.
pub fn log_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap().to_os_string();
    name.push("-log");
    path.with_file_name(name)
}

/// Where each record of the redo log's chain from offset 0 starts
/// (docs/file-format.md, "The redo log"): the records of one epoch with
/// consecutive txn ids, up to whatever follows them.
pub fn chain_starts(log: &[u8]) -> Vec<usize> {
    let u64_at = |at: usize| u64::from_le_bytes(log[at..at + 8].try_into().unwrap());
    let mut starts = Vec::new();
    let mut at = 0;
    while at + 32 <= log.len() && log[at + 8..at + 12] == *b"IBLG" {
        let (txn, epoch) = (u64_at(at + 16), u64_at(at + 24));
        if starts.first().is_some_and(|&s| u64_at(s + 24) != epoch)
            || starts.last().is_some_and(|&s| u64_at(s + 16) + 1 != txn)
        {
            break;
        }
        starts.push(at);
        let len = u32::from_le_bytes(log[at + 12..at + 16].try_into().unwrap()) as usize;
        at += (32 + len).next_multiple_of(8);
    }
    starts
}

/// A file's bytes, or none if it is missing.
pub fn read_or_empty(path: &Path) -> Vec<u8> {
    match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => panic!("{}: {e}", path.display()),
    }
}

/// The two files of a database: the data file and its redo log. With
/// logged commits (the default) the commits since the last checkpoint are
/// only in the log, so a copy of the database, or a crash image of it, is
/// both files. A missing log reads as empty, and an empty log holds no
/// record, so `write` of it gives the same database.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Images {
    pub data: Vec<u8>,
    pub log: Vec<u8>,
}

impl Images {
    pub fn read(path: &Path) -> Images {
        Images {
            data: std::fs::read(path).unwrap(),
            log: read_or_empty(&log_path(path)),
        }
    }
    pub fn write(&self, path: &Path) {
        std::fs::write(path, &self.data).unwrap();
        std::fs::write(log_path(path), &self.log).unwrap();
    }
}

/// The newest commit's txn id and every tree's entries, by full scans.
pub fn read_model(db: &Database) -> ironbark::Result<(u64, Model)> {
    let rx = db.begin_read()?;
    Ok((rx.txn_id(), model_of(&rx)?))
}

/// Every tree's entries in the snapshot of `rx`.
pub fn model_of(rx: &ReadTxn) -> ironbark::Result<Model> {
    let mut model = Model::new();
    for name in rx.list_trees() {
        let tree = rx.tree(&name)?;
        let mut entries = BTreeMap::new();
        for e in rx.iter(&tree)? {
            let (k, v) = e?;
            entries.insert(k.to_vec(), v.to_vec());
        }
        model.insert(name, entries);
    }
    Ok(model)
}

/// The process's peak resident memory (VmHWM), in bytes.
pub fn peak_rss() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .expect("VmHWM in /proc/self/status");
    let kib: usize = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .expect("VmHWM in kB");
    kib << 10
}

/// The kill tests' child: commits `n` (key `n{n}`, a value of 0, 900 or
/// 1800 bytes, and the counter) one per `Immediate` transaction, deleting
/// `n{n-50}`, calls `extra` inside each transaction, and prints `n` after
/// each commit returns. Never returns.
pub fn counting_child(db: &Database, mut extra: impl FnMut(&mut WriteTxn<'_>, u64)) {
    let start = {
        let rx = db.begin_read().unwrap();
        match rx.tree("t") {
            Ok(t) => rx
                .get(&t, b"counter")
                .unwrap()
                .map(|v| u64::from_le_bytes(v.try_into().unwrap()) + 1)
                .unwrap_or(0),
            Err(_) => 0,
        }
    };
    let mut out = std::io::stdout().lock();
    let mut rng = Rng::new(start);
    for n in start.. {
        let mut tx = db.begin_write().unwrap();
        tx.set_durability(Durability::Immediate);
        let t = tx.open_tree("t").unwrap();
        let len = rng.below(3) as usize * 900;
        tx.put(&t, format!("n{n:08}").as_bytes(), &rng.bytes(len))
            .unwrap();
        tx.put(&t, b"counter", &n.to_le_bytes()).unwrap();
        // Churn so that pages are freed and reused across kills.
        if n >= 50 {
            tx.delete(&t, format!("n{:08}", n - 50).as_bytes()).unwrap();
        }
        extra(&mut tx, n);
        tx.commit().unwrap();
        writeln!(out, "{n}").unwrap();
        out.flush().unwrap();
    }
}

/// Runs this test binary's `test` as a `counting_child` (its environment
/// `env` set to `path`), SIGKILLs it after `delay`, and returns the last
/// commit it reported.
pub fn run_and_kill(test: &str, env: &str, path: &Path, delay: Duration) -> Option<u64> {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture"])
        .env(env, path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    // Read reports on a thread; kill after the delay.
    let reader = std::thread::spawn(move || {
        let mut last = None;
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Ok(n) = line.trim().parse::<u64>() {
                last = Some(n);
            }
        }
        last
    });
    let started = Instant::now();
    while started.elapsed() < delay {
        std::thread::sleep(Duration::from_micros(500));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    reader.join().unwrap()
}

/// After kill number `kill`: `db` holds every commit of a `counting_child`
/// up to `last` reported, and the 50 before its counter.
pub fn assert_reported_commits_hold(db: &Database, last: u64, kill: u64) {
    let rx = db.begin_read().unwrap();
    let tree = rx.tree("t").unwrap();
    let counter = u64::from_le_bytes(
        rx.get(&tree, b"counter")
            .unwrap()
            .unwrap()
            .try_into()
            .unwrap(),
    );
    assert!(
        counter >= last,
        "kill {kill}: commit {last} was reported but the file holds {counter}"
    );
    for n in counter.saturating_sub(49)..=counter {
        assert!(
            rx.get(&tree, format!("n{n:08}").as_bytes())
                .unwrap()
                .is_some(),
            "kill {kill}: commit {n} lost"
        );
    }
}

/// The next line of a child process's `out` that holds `tag`, from just
/// after the tag, trimmed.
pub fn hear(out: &mut impl BufRead, tag: &str) -> String {
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "the child said nothing"
        );
        if let Some(at) = line.find(tag) {
            return line[at + tag.len()..].trim().to_string();
        }
    }
}

/// Options of a read-only open.
pub fn read_only() -> Options {
    Options {
        read_only: true,
        ..Options::default()
    }
}

/// The entries of one tree.
pub type Entries = BTreeMap<Vec<u8>, Vec<u8>>;

/// Key `k` of the read-only tests' tree `t`: 4 bytes, big-endian.
pub fn t_key(k: u64) -> Vec<u8> {
    (k as u32).to_be_bytes().to_vec()
}

/// Tree `t` of keys `0..keys` with 100-byte values, in one transaction,
/// then a checkpoint, so that what follows is logged.
pub fn load_t(db: &Database, keys: u64) {
    let mut tx = db.begin_write().unwrap();
    let t = tx.open_tree("t").unwrap();
    for k in 0..keys {
        tx.put(&t, &t_key(k), &[1u8; 100]).unwrap();
    }
    tx.commit().unwrap();
    db.checkpoint().unwrap();
}

/// Workload commit `n` of the read-only tests (of `seed`): it sets
/// `counter` to `n`, and puts or deletes `changes` random keys of the
/// first `span` and a tenth more (a fifth of them deletes, 3% values of
/// 3,000-6,000 bytes, which take overflow pages).
pub fn t_ops(seed: u64, n: u64, changes: u64, span: u64) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    let mut rng = Rng::new(seed ^ n.wrapping_mul(0x9e37_79b9));
    let mut out = vec![(b"counter".to_vec(), Some(n.to_le_bytes().to_vec()))];
    for _ in 0..changes {
        let k = t_key(rng.below(span + span / 10));
        let op = match rng.below(100) {
            0..=19 => None,
            20..=22 => {
                let len = 3000 + rng.below(3000) as usize;
                Some(rng.bytes(len))
            }
            _ => Some(vec![n as u8; 20 + rng.below(100) as usize]),
        };
        out.push((k, op));
    }
    out
}

/// What tree `t` holds after `load_t(keys)` and the workload commits
/// `ops(0)`, `ops(1)`, ... `ops(commits - 1)`.
pub fn t_model(
    keys: u64,
    commits: u64,
    ops: impl Fn(u64) -> Vec<(Vec<u8>, Option<Vec<u8>>)>,
) -> Entries {
    let mut m: Entries = (0..keys).map(|k| (t_key(k), vec![1u8; 100])).collect();
    for n in 0..commits {
        for (k, v) in ops(n) {
            match v {
                Some(v) => m.insert(k, v),
                None => m.remove(&k),
            };
        }
    }
    m
}

/// Commits `ops` (a put of the value, or a delete for `None`) to tree `t`
/// in one write transaction: a workload commit of the read-only tests.
pub fn commit_to_t(db: &Database, ops: Vec<(Vec<u8>, Option<Vec<u8>>)>) {
    let mut tx = db.begin_write().unwrap();
    let t = tx.tree("t").unwrap();
    for (k, v) in ops {
        match v {
            Some(v) => tx.put(&t, &k, &v).unwrap(),
            None => {
                tx.delete(&t, &k).unwrap();
            }
        }
    }
    tx.commit().unwrap();
}

/// The value of key `counter` of tree `t` (the number of the last workload
/// commit `rx` holds, in the read-only tests).
pub fn counter(rx: &ReadTxn) -> u64 {
    let t = rx.tree("t").unwrap();
    u64::from_le_bytes(rx.get(&t, b"counter").unwrap().unwrap().try_into().unwrap())
}

/// Tree `t` of `rx`, scanned forward, verified (every page against the
/// checksum its parent records, arena pages against their stamps).
pub fn dump_t(rx: &ReadTxn) -> Entries {
    let t = rx.tree("t").unwrap();
    rx.iter_verified(&t)
        .unwrap()
        .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect::<ironbark::Result<_>>()
        .unwrap()
}

/// `check` finds no problem and `entries` entries.
pub fn assert_clean(db: &Database, entries: usize) {
    let report = db.check().unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    assert_eq!(report.entries, entries as u64);
}

/// Test `test` of this test binary run again in a child process, with
/// `role_env` set to `role` and `path_env` to `path`, stdin and stdout
/// piped: how the multi-process tests start a writer or a reader that
/// talks to the test over lines.
pub fn role_command(
    test: &str,
    role_env: &str,
    role: &str,
    path_env: &str,
    path: &Path,
) -> Command {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["--exact", test, "--nocapture"])
        .env(role_env, role)
        .env(path_env, path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    c
}

/// Deletes `lo..hi` from `tree` in `tx` and from `staged`, the model of
/// what `tx` sees, asserting that both deleted the same number of keys.
pub fn delete_range_in_both(
    tx: &mut WriteTxn<'_>,
    tree: &ironbark::Tree,
    staged: &mut BTreeMap<Vec<u8>, Vec<u8>>,
    lo: &[u8],
    hi: &[u8],
    what: &str,
) {
    let doomed: Vec<Vec<u8>> = staged
        .range(lo.to_vec()..hi.to_vec())
        .map(|(k, _)| k.clone())
        .collect();
    for d in &doomed {
        staged.remove(d);
    }
    assert_eq!(
        tx.delete_range(tree, lo..hi).unwrap(),
        doomed.len() as u64,
        "{what}: delete_range"
    );
}

/// Every way a reader reaches entries, checked against `model`: full
/// scans both ways, `len`, `first`, `last`; `get` and `contains_key` of
/// `key_of(i)` for every `i` below `span`; then, `rounds` times from a
/// random such key, the four nearest-key lookups, ranges to another
/// random key with either end included, both ways and from both ends at
/// once, and the prefix of the key less its last byte.
#[allow(clippy::too_many_arguments)]
pub fn assert_reads_agree(
    rx: &ReadTxn,
    tree: &ironbark::Tree,
    model: &Entries,
    key_of: impl Fn(u64) -> Vec<u8>,
    span: u64,
    rounds: usize,
    rng: &mut Rng,
    what: &str,
) {
    use std::ops::Bound::{self, Excluded, Included, Unbounded};
    fn entries<'a>(
        r: impl Iterator<Item = ironbark::Result<(&'a [u8], &'a [u8])>>,
    ) -> Vec<(Vec<u8>, Vec<u8>)> {
        r.map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
            .collect()
    }
    let all: Vec<(Vec<u8>, Vec<u8>)> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(entries(rx.iter(tree).unwrap()), all, "{what}: forward scan");
    let mut back = entries(rx.iter(tree).unwrap().rev());
    back.reverse();
    assert_eq!(back, all, "{what}: backward scan");
    assert_eq!(rx.len(tree).unwrap(), model.len() as u64, "{what}: len");
    let pair = |e: Option<(&[u8], &[u8])>| e.map(|(k, v)| (k.to_vec(), v.to_vec()));
    let owned = |e: Option<(&Vec<u8>, &Vec<u8>)>| e.map(|(k, v)| (k.clone(), v.clone()));
    assert_eq!(
        pair(rx.first(tree).unwrap()),
        owned(model.iter().next()),
        "{what}: first"
    );
    assert_eq!(
        pair(rx.last(tree).unwrap()),
        owned(model.iter().next_back()),
        "{what}: last"
    );
    for i in 0..span {
        let k = key_of(i);
        assert_eq!(
            rx.get(tree, &k).unwrap(),
            model.get(&k).map(|v| &v[..]),
            "{what}: get {i}"
        );
        assert_eq!(
            rx.contains_key(tree, &k).unwrap(),
            model.contains_key(&k),
            "{what}: contains {i}"
        );
    }
    for _ in 0..rounds {
        let k = key_of(rng.below(span));
        assert_eq!(
            pair(rx.get_ge(tree, &k).unwrap()),
            owned(model.range(k.clone()..).next()),
            "{what}: ge"
        );
        assert_eq!(
            pair(rx.get_gt(tree, &k).unwrap()),
            owned(model.range((Excluded(k.clone()), Unbounded)).next()),
            "{what}: gt"
        );
        assert_eq!(
            pair(rx.get_le(tree, &k).unwrap()),
            owned(model.range(..=k.clone()).next_back()),
            "{what}: le"
        );
        assert_eq!(
            pair(rx.get_lt(tree, &k).unwrap()),
            owned(model.range(..k.clone()).next_back()),
            "{what}: lt"
        );
        let hi = key_of(rng.below(span));
        if hi >= k {
            type Ends<'k> = (Bound<&'k [u8]>, Bound<&'k [u8]>);
            let ends: [Ends<'_>; 2] = [
                (Included(&k[..]), Excluded(&hi[..])),
                (Excluded(&k[..]), Included(&hi[..])),
            ];
            for range in ends {
                let expected: Vec<(Vec<u8>, Vec<u8>)> = model
                    .range::<[u8], _>(range)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                assert_eq!(
                    entries(rx.range(tree, range).unwrap()),
                    expected,
                    "{what}: range {range:?}"
                );
                let mut back = entries(rx.range(tree, range).unwrap().rev());
                back.reverse();
                assert_eq!(back, expected, "{what}: range {range:?} backward");
                // Forward and backward at once, meeting in the middle.
                let mut r = rx.range(tree, range).unwrap();
                let mut met = Vec::new();
                let mut tail = Vec::new();
                while let Some(e) = r.next() {
                    met.push(e.map(|(k, _)| k.to_vec()).unwrap());
                    match r.next_back() {
                        Some(e) => tail.push(e.map(|(k, _)| k.to_vec()).unwrap()),
                        None => break,
                    }
                }
                tail.reverse();
                met.extend(tail);
                let keys: Vec<Vec<u8>> = expected.into_iter().map(|(k, _)| k).collect();
                assert_eq!(met, keys, "{what}: range {range:?} from both ends");
            }
        }
        let prefix = &k[..k.len() - 1];
        let expected: Vec<Vec<u8>> = model
            .range(prefix.to_vec()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, _)| k.clone())
            .collect();
        let got: Vec<Vec<u8>> = rx
            .prefix(tree, prefix)
            .unwrap()
            .map(|e| e.map(|(k, _)| k.to_vec()).unwrap())
            .collect();
        assert_eq!(got, expected, "{what}: prefix");
    }
}
