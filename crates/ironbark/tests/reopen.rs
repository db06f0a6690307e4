//! Opening and closing one file from many threads of one process: handles
//! share one instance while any is open, and a close racing an open never
//! makes the open fail with `Locked`.

use std::sync::Arc;

use ironbark::Database;

#[test]
fn threads_open_and_close_the_same_file_without_spurious_locked() {
    let dir = tempfile::tempdir().unwrap();
    let path = Arc::new(dir.path().join("shared.ib"));
    Database::open(&*path).unwrap();
    let threads: Vec<_> = (0..4u32)
        .map(|t| {
            let path = path.clone();
            std::thread::spawn(move || {
                for i in 0..200u32 {
                    let db = Database::open(&*path)
                        .unwrap_or_else(|e| panic!("thread {t} open {i}: {e}"));
                    let mut tx = db.begin_write().unwrap();
                    let tree = tx.open_tree("t").unwrap();
                    tx.put(&tree, format!("{t}-{i}").as_bytes(), b"v").unwrap();
                    tx.commit().unwrap();
                    drop(db);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let db = Database::open(&*path).unwrap();
    let rx = db.begin_read().unwrap();
    assert_eq!(rx.len(&rx.tree("t").unwrap()).unwrap(), 800);
    db.check().unwrap();
}
