//! Value overlays of file leaves (docs/design.md, "Value overlays"): a
//! same-size overwrite or a delete whose leaf is still a page of the data
//! file (its first change since the open or the last checkpoint) goes
//! into an overlay beside the leaf, in the span's table
//! (`storage::arena::FileOverlays`), instead of a copy of the leaf and
//! its path. What is checked: such changes are overlaid (the counter
//! moves); every snapshot, held across checkpoints, sees exactly its own
//! values; a checkpoint folds the overlays into copies (including one
//! that a large, unlogged transaction writes, and one whose own changes
//! copy an overlaid leaf); an aborted transaction that made the span's
//! table leaves nothing; and a second writing process, which replays the
//! log, frees those file pages and reuses them, never meets an overlay
//! of this process's span. `check` passes throughout, and reopens agree.

mod common;

use std::collections::BTreeMap;
use std::io::{BufReader, Write};
use std::path::Path;

use common::{hear, temp_db, Rng};
use ironbark::{Database, Durability, Options, ReadTxn};

type Entries = BTreeMap<Vec<u8>, Vec<u8>>;

const KEYS: u32 = 5_000;
const VALUE_LEN: usize = 40;

fn key(i: u32) -> Vec<u8> {
    i.to_be_bytes().to_vec()
}

fn options() -> Options {
    Options {
        durability: Durability::None,
        ..Options::default()
    }
}

fn overlaid(db: &Database) -> u64 {
    db.counters().values_overlaid
}

/// Tree `t` of `KEYS` keys in one transaction, then a checkpoint: every
/// leaf is a file page.
fn loaded(path: &Path) -> (Database, Entries) {
    loaded_with(path, &options())
}

/// `loaded`, opened with `options`.
fn loaded_with(path: &Path, options: &Options) -> (Database, Entries) {
    let db = Database::open_with(path, options).unwrap();
    let model = load_tree(&db, "t", KEYS, VALUE_LEN);
    (db, model)
}

/// `n` single-change commits: a same-size overwrite of a random key, or
/// one in four a delete of one, recorded in `model`.
fn single_changes(db: &Database, model: &mut Entries, rng: &mut Rng, n: usize) {
    for _ in 0..n {
        let i = rng.below(model.len() as u64) as usize;
        let k = model.keys().nth(i).unwrap().clone();
        let mut tx = db.begin_write().unwrap();
        let t = tx.tree("t").unwrap();
        if rng.chance(25) {
            assert!(tx.delete(&t, &k).unwrap());
            model.remove(&k);
        } else {
            let v = rng.bytes(VALUE_LEN);
            tx.put(&t, &k, &v).unwrap();
            model.insert(k, v);
        }
        tx.commit().unwrap();
    }
}

/// `rx` sees exactly `model` in tree `t`: by `get` of every key (and of
/// every key deleted), by scans both ways, and by its count.
fn assert_sees(rx: &ReadTxn, model: &Entries, what: &str) {
    let t = rx.tree("t").unwrap();
    for i in 0..KEYS {
        let k = key(i);
        assert_eq!(
            rx.get(&t, &k).unwrap(),
            model.get(&k).map(|v| &v[..]),
            "{what}: get of key {i}"
        );
    }
    let forward: Entries = rx
        .iter(&t)
        .unwrap()
        .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
        .collect();
    assert!(forward == *model, "{what}: forward scan");
    let backward: Vec<Vec<u8>> = rx
        .iter(&t)
        .unwrap()
        .rev()
        .map(|e| e.unwrap().0.to_vec())
        .collect();
    assert!(
        backward.iter().rev().eq(model.keys()),
        "{what}: backward scan"
    );
    assert_eq!(rx.len(&t).unwrap(), model.len() as u64, "{what}: len");
}

fn assert_clean(db: &Database, model: &Entries) {
    let report = db.check().unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    assert_eq!(report.entries, model.len() as u64);
}

/// Tree `name` of keys `0..n` with `value_len`-byte values (key `i`'s
/// bytes all `i % 251`) in one transaction, then a checkpoint: its leaves
/// are file pages.
fn load_tree(db: &Database, name: &str, n: u32, value_len: usize) -> Entries {
    let mut tx = db.begin_write().unwrap();
    let w = tx.open_tree(name).unwrap();
    let mut model = Entries::new();
    for i in 0..n {
        let v = vec![(i % 251) as u8; value_len];
        tx.put(&w, &key(i), &v).unwrap();
        model.insert(key(i), v);
    }
    tx.commit().unwrap();
    db.checkpoint().unwrap();
    model
}

/// `rx` sees exactly `model` in tree `w`, by a scan and by `get` of each
/// key.
fn sees_w(rx: &ReadTxn, model: &Entries, what: &str) {
    let w = rx.tree("w").unwrap();
    let got: Entries = rx
        .iter(&w)
        .unwrap()
        .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
        .collect();
    assert!(got == *model, "{what}");
    for (k, v) in model {
        assert_eq!(rx.get(&w, k).unwrap(), Some(&v[..]), "{what}");
    }
}

/// The end of a test of tree `w`: `db` checks clean, checkpoints, and each
/// of `held` (a snapshot and what it saw) and a new snapshot still see
/// their own entries; then reopened (with `options`), `db` sees `model`
/// and checks clean.
fn through_checkpoint_and_reopen(
    db: Database,
    path: &Path,
    options: &Options,
    held: Vec<(ReadTxn, Entries, &str)>,
    model: &Entries,
) {
    let report = db.check().unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    db.checkpoint().unwrap();
    for (rx, m, name) in &held {
        sees_w(rx, m, &format!("{name}, checkpointed"));
    }
    sees_w(&db.begin_read().unwrap(), model, "checkpointed");
    drop(held);
    drop(db);
    let db = Database::open_with(path, options).unwrap();
    sees_w(&db.begin_read().unwrap(), model, "reopened");
    assert!(db.check().unwrap().is_clean());
}

#[test]
fn changes_in_file_leaves_are_overlaid_and_each_snapshot_keeps_its_values() {
    let t = temp_db("file.ib");
    let (db, mut model) = loaded(&t.path);
    let mut rng = Rng::new(7);
    let mut held: Vec<(ReadTxn, Entries)> = vec![(db.begin_read().unwrap(), model.clone())];
    for round in 0..4 {
        let before = overlaid(&db);
        single_changes(&db, &mut model, &mut rng, 300);
        // Nearly every change is overlaid: each leaf's first change since
        // the checkpoint too (a delete declines only where it would leave
        // its leaf with no entry, never here).
        let n = overlaid(&db) - before;
        assert!(n >= 290, "round {round}: {n} of 300 changes overlaid");
        held.push((db.begin_read().unwrap(), model.clone()));
        for (j, (rx, m)) in held.iter().enumerate() {
            assert_sees(rx, m, &format!("round {round}, held {j}"));
        }
        // The checkpoint folds the overlays into copies of their leaves;
        // the snapshots held keep theirs.
        db.checkpoint().unwrap();
        for (j, (rx, m)) in held.iter().enumerate() {
            assert_sees(rx, m, &format!("round {round}, held {j}, checkpointed"));
        }
        assert_sees(&db.begin_read().unwrap(), &model, "after the checkpoint");
        held.remove(0);
    }
    drop(held);
    assert_clean(&db, &model);
    // Changes not yet checkpointed at the close.
    single_changes(&db, &mut model, &mut rng, 100);
    drop(db);
    let db = Database::open_with(&t.path, &options()).unwrap();
    assert_sees(&db.begin_read().unwrap(), &model, "reopened");
    assert_clean(&db, &model);
}

/// At the smallest page size (1 KiB) a file leaf's overlay starts in 256
/// bytes: two 40-byte values or seven tombstones, then it moves to a whole
/// slot of 1 KiB, which fills too and copies the leaf. Through all of it
/// most changes stay overlaid, snapshots held from the start and from the
/// middle each keep their own values, and a checkpoint and a reopen agree.
#[test]
fn overlays_at_the_smallest_page_size_move_and_keep_every_value() {
    let t = temp_db("small.ib");
    let small = Options {
        page_size: 1024,
        ..options()
    };
    let (db, mut model) = loaded_with(&t.path, &small);
    let mut rng = Rng::new(31);
    let before = overlaid(&db);
    let first = (db.begin_read().unwrap(), model.clone());
    single_changes(&db, &mut model, &mut rng, 1500);
    let middle = (db.begin_read().unwrap(), model.clone());
    single_changes(&db, &mut model, &mut rng, 1500);
    let n = overlaid(&db) - before;
    assert!(n >= 2500, "{n} of 3000 changes overlaid");
    assert_sees(&first.0, &first.1, "held from the start");
    assert_sees(&middle.0, &middle.1, "held from the middle");
    assert_sees(&db.begin_read().unwrap(), &model, "newest");
    assert_clean(&db, &model);
    db.checkpoint().unwrap();
    assert_sees(&middle.0, &middle.1, "held from the middle, checkpointed");
    drop((first, middle));
    drop(db);
    let db = Database::open_with(&t.path, &small).unwrap();
    assert_sees(&db.begin_read().unwrap(), &model, "reopened");
    assert_clean(&db, &model);
}

#[test]
fn a_transaction_too_large_to_log_folds_the_file_leaf_overlays() {
    let t = temp_db("large.ib");
    let (db, mut model) = loaded(&t.path);
    let mut rng = Rng::new(11);
    single_changes(&db, &mut model, &mut rng, 200);
    let held = (db.begin_read().unwrap(), model.clone());
    // One transaction: a change of length in an overlaid leaf (its copy
    // takes the overlay), a same-size overwrite, and enough new keys that
    // it is written as pages, not logged: its commit is a checkpoint.
    let logged_before = db.counters().logged_commits;
    let mut tx = db.begin_write().unwrap();
    let tr = tx.tree("t").unwrap();
    let some = model.keys().nth(17).unwrap().clone();
    tx.put(&tr, &some, b"another length").unwrap();
    model.insert(some, b"another length".to_vec());
    let other = model.keys().nth(2_000).unwrap().clone();
    let v = rng.bytes(VALUE_LEN);
    tx.put(&tr, &other, &v).unwrap();
    model.insert(other, v);
    for i in 0..20_000u32 {
        let k = format!("new{i:08}").into_bytes();
        tx.put(&tr, &k, &[9u8; 100]).unwrap();
        model.insert(k, vec![9u8; 100]);
    }
    tx.commit().unwrap();
    assert_eq!(
        db.counters().logged_commits,
        logged_before,
        "the large transaction was logged"
    );
    assert_sees(&held.0, &held.1, "held across the large commit");
    drop(held);
    let rx = db.begin_read().unwrap();
    let tr = rx.tree("t").unwrap();
    let all: Entries = rx
        .iter(&tr)
        .unwrap()
        .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
        .collect();
    assert!(all == model, "after the large commit");
    drop(rx);
    assert_clean(&db, &model);
    drop(db);
    let db = Database::open_with(&t.path, &options()).unwrap();
    let rx = db.begin_read().unwrap();
    let tr = rx.tree("t").unwrap();
    assert_eq!(rx.len(&tr).unwrap(), model.len() as u64);
    drop(rx);
    assert_clean(&db, &model);
}

#[test]
fn an_aborted_first_overlay_of_a_span_leaves_nothing() {
    let t = temp_db("abort.ib");
    let (db, mut model) = loaded(&t.path);
    let k = key(1234);
    let old = model[&k].clone();
    // A commit of another length (which copies its leaf); then the span's
    // first overlay, in a transaction that does not commit.
    let mut tx = db.begin_write().unwrap();
    let tr = tx.tree("t").unwrap();
    tx.put(&tr, &key(4_000), b"first").unwrap();
    tx.commit().unwrap();
    model.insert(key(4_000), b"first".to_vec());
    let before = overlaid(&db);
    let mut tx = db.begin_write().unwrap();
    let tr = tx.tree("t").unwrap();
    tx.put(&tr, &k, &[5u8; VALUE_LEN]).unwrap();
    assert!(tx.delete(&tr, &key(1235)).unwrap());
    assert_eq!(tx.get(&tr, &k).unwrap(), Some(&[5u8; VALUE_LEN][..]));
    assert_eq!(tx.get(&tr, &key(1235)).unwrap(), None);
    tx.abort();
    assert_eq!(overlaid(&db), before, "an aborted overlay counted");
    let rx = db.begin_read().unwrap();
    assert_eq!(rx.get(&rx.tree("t").unwrap(), &k).unwrap(), Some(&old[..]));
    assert!(rx
        .get(&rx.tree("t").unwrap(), &key(1235))
        .unwrap()
        .is_some());
    drop(rx);
    // The same leaf again, committed this time; then a failed commit's
    // worth of changes dropped with its transaction.
    let mut tx = db.begin_write().unwrap();
    let tr = tx.tree("t").unwrap();
    tx.put(&tr, &k, &[6u8; VALUE_LEN]).unwrap();
    tx.commit().unwrap();
    model.insert(k.clone(), vec![6u8; VALUE_LEN]);
    assert_eq!(overlaid(&db), before + 1);
    let mut tx = db.begin_write().unwrap();
    let tr = tx.tree("t").unwrap();
    tx.put(&tr, &key(1236), &[7u8; VALUE_LEN]).unwrap();
    drop(tx);
    assert_sees(&db.begin_read().unwrap(), &model, "after the aborts");
    db.checkpoint().unwrap();
    assert_sees(&db.begin_read().unwrap(), &model, "checkpointed");
    assert_clean(&db, &model);
}

const ROLE_ENV: &str = "IRONBARK_FLO_ROLE";
const PATH_ENV: &str = "IRONBARK_FLO_PATH";

/// Commit `n` of the second writer: three changes of random keys, a put
/// of another length (which copies its leaf), a delete, and a same-size
/// overwrite.
fn second_writer_ops(n: u64) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    let mut rng = Rng::new(1_000 + n);
    vec![
        (
            key(rng.below(u64::from(KEYS)) as u32),
            Some(vec![n as u8; 70]),
        ),
        (key(rng.below(u64::from(KEYS)) as u32), None),
        (
            key(rng.below(u64::from(KEYS)) as u32),
            Some(vec![n as u8; VALUE_LEN]),
        ),
    ]
}

fn apply(model: &mut Entries, ops: &[(Vec<u8>, Option<Vec<u8>>)]) {
    for (k, v) in ops {
        match v {
            Some(v) => model.insert(k.clone(), v.clone()),
            None => model.remove(k),
        };
    }
}

/// The second writing process: commits `second_writer_ops(n)` for the
/// ranges it is told, one commit each, and says when it is done.
fn second_writer(path: &str) {
    let db = Database::open_with(path, &options()).unwrap();
    println!("FLO open");
    std::io::stdout().flush().unwrap();
    let mut line = String::new();
    while {
        line.clear();
        std::io::stdin().read_line(&mut line).unwrap() > 0
    } {
        let mut words = line.split_whitespace();
        let (Some(from), Some(to)) = (words.next(), words.next()) else {
            break;
        };
        let (from, to): (u64, u64) = (from.parse().unwrap(), to.parse().unwrap());
        for n in from..to {
            let mut tx = db.begin_write().unwrap();
            let t = tx.tree("t").unwrap();
            for (k, v) in second_writer_ops(n) {
                match v {
                    Some(v) => tx.put(&t, &k, &v).unwrap(),
                    None => {
                        tx.delete(&t, &k).unwrap();
                    }
                }
            }
            tx.commit().unwrap();
        }
        println!("FLO done {to}");
        std::io::stdout().flush().unwrap();
    }
    drop(db);
    std::process::exit(0);
}

const TWO_WRITERS: &str = "a_second_writing_process_reuses_pages_this_span_overlaid";

/// This process overlays file leaves in logged commits; a second process
/// that opens the database for writing replays the log into its own
/// commits (file commits: with two writers nothing is logged), which free
/// the overlaid leaves and, once no reader holds them, reuse their pages
/// for other leaves. This process's snapshots of its span keep their
/// values; its snapshots of the other's commits, and its own commits
/// after them, never read its old overlays on the reused pages.
#[test]
fn a_second_writing_process_reuses_pages_this_span_overlaid() {
    if std::env::var(ROLE_ENV).as_deref() == Ok("second-writer") {
        return second_writer(&std::env::var(PATH_ENV).unwrap());
    }
    let t = temp_db("two.ib");
    let (db, mut model) = loaded(&t.path);
    let mut rng = Rng::new(3);
    let before = overlaid(&db);
    single_changes(&db, &mut model, &mut rng, 400);
    assert!(overlaid(&db) - before >= 390, "file leaves not overlaid");
    let held = (db.begin_read().unwrap(), model.clone());

    let mut child = common::role_command(TWO_WRITERS, ROLE_ENV, "second-writer", PATH_ENV, &t.path)
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut to_child = child.stdin.take().unwrap();
    hear(&mut out, "FLO open");
    let mut done = 0;
    let mut run = |more: u64, model: &mut Entries| {
        let to = done + more;
        writeln!(to_child, "{done} {to}").unwrap();
        to_child.flush().unwrap();
        assert_eq!(hear(&mut out, "FLO done "), to.to_string());
        for n in done..to {
            apply(model, &second_writer_ops(n));
        }
        done = to;
    };
    // While this process holds a snapshot of its span, the pages stay.
    run(60, &mut model);
    assert_sees(&held.0, &held.1, "held through the other's commits");
    assert_sees(&db.begin_read().unwrap(), &model, "the other's commits");
    drop(held);
    // Now the freed pages are reused by the other's commits, and by this
    // process's own (file commits too, while both write).
    for round in 0..3 {
        run(80, &mut model);
        assert_sees(
            &db.begin_read().unwrap(),
            &model,
            &format!("round {round}: reused pages"),
        );
        single_changes(&db, &mut model, &mut rng, 20);
        assert_sees(
            &db.begin_read().unwrap(),
            &model,
            &format!("round {round}: own commits"),
        );
    }
    drop(to_child);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    assert!(child.wait().unwrap().success());
    // Alone again: logged commits, overlays of file leaves in a new span.
    let before = overlaid(&db);
    single_changes(&db, &mut model, &mut rng, 200);
    assert!(overlaid(&db) > before, "no overlay in the new span");
    assert_sees(&db.begin_read().unwrap(), &model, "alone again");
    assert_clean(&db, &model);
    drop(db);
    let db = Database::open_with(&t.path, &options()).unwrap();
    assert_sees(&db.begin_read().unwrap(), &model, "reopened");
    assert_clean(&db, &model);
}

/// A file leaf's overlay starts in an eighth of an arena slot, which
/// holds 3 values of 100 bytes; the 4th change moves it to a quarter (7
/// values) and the 8th to a whole slot (`Arena::move_file_overlay`)
/// instead of copying the leaf: every change stays overlaid, a
/// transaction given up after either move leaves nothing in the moved
/// overlay, and snapshots held in each size of unit each keep their
/// values, through a checkpoint and a reopen.
#[test]
fn a_file_leaf_changed_past_its_overlay_unit_moves_to_larger_ones() {
    const LONG: usize = 100;
    let t = temp_db("moved.ib");
    let db = Database::open_with(&t.path, &options()).unwrap();
    let mut model = load_tree(&db, "w", 200, LONG);
    let change = |n: u32, model: &mut Entries| {
        let (k, v) = (key(n % 4), vec![(n + 1) as u8; LONG]);
        let mut tx = db.begin_write().unwrap();
        let w = tx.tree("w").unwrap();
        tx.put(&w, &k, &v).unwrap();
        tx.commit().unwrap();
        model.insert(k, v);
    };
    // A change that fills the unit, and another after the move: given up.
    let aborted_move = |model: &Entries, what: &str| {
        let mut tx = db.begin_write().unwrap();
        let wt = tx.tree("w").unwrap();
        tx.put(&wt, &key(1), &[0xee; LONG]).unwrap();
        tx.put(&wt, &key(2), &[0xef; LONG]).unwrap();
        tx.abort();
        sees_w(&db.begin_read().unwrap(), model, what);
    };
    let before = overlaid(&db);
    for n in 0..3 {
        change(n, &mut model);
    }
    let held_in_eighth = (db.begin_read().unwrap(), model.clone());
    aborted_move(&model, "after the aborted move to a quarter");
    for n in 3..7 {
        change(n, &mut model);
    }
    let held_in_quarter = (db.begin_read().unwrap(), model.clone());
    aborted_move(&model, "after the aborted move to a whole slot");
    for n in 7..30 {
        change(n, &mut model);
    }
    assert_eq!(
        overlaid(&db) - before,
        30,
        "every change overlaid, none copied the leaf"
    );
    let held_in_whole = (db.begin_read().unwrap(), model.clone());
    let held = [
        (held_in_eighth, "held in the eighth"),
        (held_in_quarter, "held in the quarter"),
        (held_in_whole, "held in the whole slot"),
    ];
    let held: Vec<_> = held
        .into_iter()
        .map(|((rx, m), name)| (rx, m, name))
        .collect();
    for (rx, m, name) in &held {
        sees_w(rx, m, name);
    }
    through_checkpoint_and_reopen(db, &t.path, &options(), held, &model);
}

/// An overlay holds 31 entries at most, however small, moved or not:
/// 40-byte values fill an eighth at 6 and a quarter at 15 and move to a
/// whole slot, which holds no more than 31 either (a quarter full of 31
/// entries, such as tombstones, is not moved). The 32nd change copies the leaf, and is not
/// counted as overlaid.
#[test]
fn an_overlay_full_of_entries_copies_its_leaf() {
    let t = temp_db("entries.ib");
    let (db, mut model) = loaded(&t.path);
    let before = overlaid(&db);
    for n in 0..32u32 {
        let (k, v) = (key(n % 20), vec![n as u8; VALUE_LEN]);
        let mut tx = db.begin_write().unwrap();
        let tree = tx.tree("t").unwrap();
        tx.put(&tree, &k, &v).unwrap();
        tx.commit().unwrap();
        model.insert(k, v);
    }
    assert_eq!(overlaid(&db) - before, 31, "31 entries, then a copy");
    assert_sees(&db.begin_read().unwrap(), &model, "after the copy");
    assert_clean(&db, &model);
}

/// One transaction moves a file leaf's overlay through every size: 25
/// overwrites of 40-byte values in a one-leaf tree fill the eighth at 6
/// and the quarter at 15, and go on in a whole slot. Given up, it leaves
/// every old value; committed, every change is overlaid (none copies the
/// leaf), and a snapshot from before and the newest each see their own
/// values, through a checkpoint and a reopen.
#[test]
fn one_transaction_moves_an_overlay_through_every_size() {
    const N: u32 = 30;
    let t = temp_db("every_size.ib");
    let db = Database::open_with(&t.path, &options()).unwrap();
    let mut model = load_tree(&db, "w", N, VALUE_LEN);
    let before = overlaid(&db);
    let overwrite_all = |n: u32, fill: u8| {
        let mut tx = db.begin_write().unwrap();
        let wt = tx.tree("w").unwrap();
        for i in 0..n {
            tx.put(&wt, &key(i), &[fill.wrapping_add(i as u8); VALUE_LEN])
                .unwrap();
        }
        tx
    };
    overwrite_all(N, 0xa0).abort();
    sees_w(
        &db.begin_read().unwrap(),
        &model,
        "after the transaction given up",
    );
    assert_eq!(overlaid(&db), before, "nothing of it counted");
    let held = (db.begin_read().unwrap(), model.clone());
    overwrite_all(25, 0x40).commit().unwrap();
    for i in 0..25u32 {
        model.insert(key(i), vec![0x40u8.wrapping_add(i as u8); VALUE_LEN]);
    }
    assert_eq!(
        overlaid(&db) - before,
        25,
        "every change overlaid, none copied the leaf"
    );
    sees_w(&db.begin_read().unwrap(), &model, "committed");
    sees_w(&held.0, &held.1, "held from before");
    let held = vec![(held.0, held.1, "held from before")];
    through_checkpoint_and_reopen(db, &t.path, &options(), held, &model);
}

/// At 1 KiB pages a 200-byte value fits neither an eighth nor a quarter
/// (a quarter holds the overlay's 64-byte head and 192 bytes more): a
/// leaf's first change takes a quarter and moves it to a whole slot in
/// the same put. Single changes, some given up, keep every value for the
/// newest snapshot and one held from the start, through a checkpoint and
/// a reopen.
#[test]
fn a_value_too_long_for_a_new_quarter_moves_it_at_once() {
    const LONG: usize = 200;
    const KEYS_HERE: u32 = 400;
    let t = temp_db("long_small.ib");
    let small = Options {
        page_size: 1024,
        ..options()
    };
    let db = Database::open_with(&t.path, &small).unwrap();
    let mut model = load_tree(&db, "w", KEYS_HERE, LONG);
    let first = (db.begin_read().unwrap(), model.clone());
    let before = overlaid(&db);
    let mut rng = Rng::new(32);
    for n in 0..300u32 {
        let k = key(rng.below(u64::from(KEYS_HERE)) as u32);
        let v = rng.bytes(LONG);
        let mut tx = db.begin_write().unwrap();
        let wt = tx.tree("w").unwrap();
        tx.put(&wt, &k, &v).unwrap();
        if n % 7 == 0 {
            tx.abort();
            continue;
        }
        tx.commit().unwrap();
        model.insert(k, v);
    }
    let n = overlaid(&db) - before;
    assert!(n >= 200, "{n} of 257 committed changes overlaid");
    sees_w(&first.0, &first.1, "held from the start");
    sees_w(&db.begin_read().unwrap(), &model, "newest");
    let held = vec![(first.0, first.1, "held from the start")];
    through_checkpoint_and_reopen(db, &t.path, &small, held, &model);
}
