//! The C shims of LevelDB, WiredTiger and BerkeleyDB (shims/*.c, built by
//! build.rs against Debian's libraries): their FFI declarations and one
//! engine driver for all three. The only unsafe code of the peers' drivers
//! besides heed's `open` lives here.

use std::ffi::{c_char, c_int, c_void, CString};
use std::os::unix::ffi::OsStrExt;

use crate::engine::{Engine, EngineConfig, Op, Result, Session};

/// `ib_op` of shims/ibshim.h.
#[repr(C)]
struct IbOp {
    key: *const c_char,
    key_len: usize,
    /// Null for a delete.
    value: *const c_char,
    value_len: usize,
}

type OpenFn =
    unsafe extern "C" fn(*const c_char, c_int, u64, *mut *mut c_void, *mut c_char, usize) -> c_int;
type CloseFn = unsafe extern "C" fn(*mut c_void, *mut c_char, usize) -> c_int;
type SessionOpenFn =
    unsafe extern "C" fn(*mut c_void, *mut *mut c_void, *mut c_char, usize) -> c_int;
type SessionCloseFn = unsafe extern "C" fn(*mut c_void);
type WriteFn = unsafe extern "C" fn(*mut c_void, *const IbOp, usize, *mut c_char, usize) -> c_int;
type GetFn = unsafe extern "C" fn(
    *mut c_void,
    *const c_char,
    usize,
    *mut *const c_char,
    *mut usize,
    *mut c_char,
    usize,
) -> c_int;
type ScanStartFn =
    unsafe extern "C" fn(*mut c_void, *const c_char, usize, c_int, *mut c_char, usize) -> c_int;
type ScanNextFn = unsafe extern "C" fn(
    *mut c_void,
    *mut *const c_char,
    *mut usize,
    *mut *const c_char,
    *mut usize,
    *mut c_char,
    usize,
) -> c_int;
type ReleaseFn = unsafe extern "C" fn(*mut c_void);
type SnapshotHoldFn = unsafe extern "C" fn(*mut c_void, *mut c_char, usize) -> c_int;

/// The functions of one shim (the same signatures, a different prefix).
pub struct Api {
    pub name: &'static str,
    open: OpenFn,
    close: CloseFn,
    session_open: SessionOpenFn,
    session_close: SessionCloseFn,
    write: WriteFn,
    get: GetFn,
    scan_start: ScanStartFn,
    scan_next: ScanNextFn,
    release: ReleaseFn,
    snapshot_hold: SnapshotHoldFn,
    snapshot_get: GetFn,
    snapshot_release: ReleaseFn,
}

macro_rules! shim {
    ($feature:literal, $module:ident, $api:ident, $name:literal,
     $open:ident, $close:ident, $session_open:ident, $session_close:ident, $write:ident,
     $get:ident, $scan_start:ident, $scan_next:ident, $release:ident,
     $snapshot_hold:ident, $snapshot_get:ident, $snapshot_release:ident) => {
        #[cfg(feature = $feature)]
        mod $module {
            use super::*;
            extern "C" {
                fn $open(
                    dir: *const c_char,
                    sync: c_int,
                    cache: u64,
                    db: *mut *mut c_void,
                    err: *mut c_char,
                    errlen: usize,
                ) -> c_int;
                fn $close(db: *mut c_void, err: *mut c_char, errlen: usize) -> c_int;
                fn $session_open(
                    db: *mut c_void,
                    s: *mut *mut c_void,
                    err: *mut c_char,
                    errlen: usize,
                ) -> c_int;
                fn $session_close(s: *mut c_void);
                fn $write(
                    s: *mut c_void,
                    ops: *const IbOp,
                    n: usize,
                    err: *mut c_char,
                    errlen: usize,
                ) -> c_int;
                fn $get(
                    s: *mut c_void,
                    k: *const c_char,
                    kl: usize,
                    v: *mut *const c_char,
                    vl: *mut usize,
                    err: *mut c_char,
                    errlen: usize,
                ) -> c_int;
                fn $scan_start(
                    s: *mut c_void,
                    start: *const c_char,
                    sl: usize,
                    reverse: c_int,
                    err: *mut c_char,
                    errlen: usize,
                ) -> c_int;
                fn $scan_next(
                    s: *mut c_void,
                    k: *mut *const c_char,
                    kl: *mut usize,
                    v: *mut *const c_char,
                    vl: *mut usize,
                    err: *mut c_char,
                    errlen: usize,
                ) -> c_int;
                fn $release(s: *mut c_void);
                fn $snapshot_hold(s: *mut c_void, err: *mut c_char, errlen: usize) -> c_int;
                fn $snapshot_get(
                    s: *mut c_void,
                    k: *const c_char,
                    kl: usize,
                    v: *mut *const c_char,
                    vl: *mut usize,
                    err: *mut c_char,
                    errlen: usize,
                ) -> c_int;
                fn $snapshot_release(s: *mut c_void);
            }
            pub static $api: Api = Api {
                name: $name,
                open: $open,
                close: $close,
                session_open: $session_open,
                session_close: $session_close,
                write: $write,
                get: $get,
                scan_start: $scan_start,
                scan_next: $scan_next,
                release: $release,
                snapshot_hold: $snapshot_hold,
                snapshot_get: $snapshot_get,
                snapshot_release: $snapshot_release,
            };
        }
        #[cfg(feature = $feature)]
        pub use $module::$api;
    };
}

shim!(
    "leveldb",
    leveldb_shim,
    LEVELDB,
    "leveldb",
    ldb_open,
    ldb_close,
    ldb_session_open,
    ldb_session_close,
    ldb_write,
    ldb_get,
    ldb_scan_start,
    ldb_scan_next,
    ldb_release,
    ldb_snapshot_hold,
    ldb_snapshot_get,
    ldb_snapshot_release
);
shim!(
    "wiredtiger",
    wiredtiger_shim,
    WIREDTIGER,
    "wiredtiger",
    wt_open,
    wt_close,
    wt_session_open,
    wt_session_close,
    wt_write,
    wt_get,
    wt_scan_start,
    wt_scan_next,
    wt_release,
    wt_snapshot_hold,
    wt_snapshot_get,
    wt_snapshot_release
);
shim!(
    "bdb",
    bdb_shim,
    BDB,
    "bdb",
    bdb_open,
    bdb_close,
    bdb_session_open,
    bdb_session_close,
    bdb_write,
    bdb_get,
    bdb_scan_start,
    bdb_scan_next,
    bdb_release,
    bdb_snapshot_hold,
    bdb_snapshot_get,
    bdb_snapshot_release
);

const ERR_LEN: usize = 512;

fn error(err: &[c_char; ERR_LEN]) -> crate::engine::Error {
    let bytes: Vec<u8> = err
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned().into()
}

/// A database opened through a shim.
pub struct ShimEngine {
    api: &'static Api,
    db: *mut c_void,
}

// SAFETY: the shimmed libraries are thread-safe at the database-handle level
// (LevelDB's DB, WiredTiger's WT_CONNECTION, BerkeleyDB's DB_ENV/DB opened
// with DB_THREAD); all per-thread state lives in sessions, which are never
// shared between threads.
unsafe impl Send for ShimEngine {}
// SAFETY: as above; `&ShimEngine` only opens sessions and reads nothing else.
unsafe impl Sync for ShimEngine {}

pub fn open(api: &'static Api, cfg: &EngineConfig) -> Result<Box<dyn Engine>> {
    let dir = CString::new(cfg.dir.as_os_str().as_bytes())?;
    let mut db: *mut c_void = std::ptr::null_mut();
    let mut err = [0 as c_char; ERR_LEN];
    // SAFETY: `dir` is a valid C string, `db` and `err` are valid for writes
    // of a pointer and ERR_LEN bytes, as the shim's contract requires.
    let rc = unsafe {
        (api.open)(
            dir.as_ptr(),
            c_int::from(cfg.sync),
            cfg.cache_bytes,
            &mut db,
            err.as_mut_ptr(),
            ERR_LEN,
        )
    };
    if rc != 0 || db.is_null() {
        return Err(format!("{}: {}", api.name, error(&err)).into());
    }
    Ok(Box::new(ShimEngine { api, db }))
}

impl Engine for ShimEngine {
    fn session(&self) -> Result<Box<dyn Session + '_>> {
        let mut s: *mut c_void = std::ptr::null_mut();
        let mut err = [0 as c_char; ERR_LEN];
        // SAFETY: `self.db` is the open handle from `open`, valid until
        // `close` consumes the engine (sessions borrow the engine, so they
        // end first); the out-pointers are valid for writes.
        let rc = unsafe { (self.api.session_open)(self.db, &mut s, err.as_mut_ptr(), ERR_LEN) };
        if rc != 0 || s.is_null() {
            return Err(error(&err));
        }
        Ok(Box::new(ShimSession {
            api: self.api,
            s,
            ops: Vec::new(),
            _engine: std::marker::PhantomData,
        }))
    }

    fn close(self: Box<Self>) -> Result<()> {
        let mut err = [0 as c_char; ERR_LEN];
        // SAFETY: every session borrowed the engine and has been dropped;
        // the handle is closed exactly once, here.
        let rc = unsafe { (self.api.close)(self.db, err.as_mut_ptr(), ERR_LEN) };
        if rc != 0 {
            return Err(error(&err));
        }
        Ok(())
    }
}

struct ShimSession<'a> {
    api: &'static Api,
    s: *mut c_void,
    ops: Vec<IbOp>,
    _engine: std::marker::PhantomData<&'a ShimEngine>,
}

impl Drop for ShimSession<'_> {
    fn drop(&mut self) {
        // session_close releases a snapshot still held.
        // SAFETY: `self.s` came from session_open and is closed once, here.
        unsafe { (self.api.session_close)(self.s) }
    }
}

impl ShimSession<'_> {
    /// A point lookup through `get` (the session's `get` or its
    /// `snapshot_get`), which share one contract.
    fn lookup(&mut self, get: GetFn, key: &[u8], f: &mut dyn FnMut(&[u8])) -> Result<bool> {
        let mut v: *const c_char = std::ptr::null();
        let mut vl = 0usize;
        let mut err = [0 as c_char; ERR_LEN];
        // SAFETY: `key` is valid for `key.len()` bytes; out-pointers valid.
        let rc = unsafe {
            get(
                self.s,
                key.as_ptr().cast(),
                key.len(),
                &mut v,
                &mut vl,
                err.as_mut_ptr(),
                ERR_LEN,
            )
        };
        let out = match rc {
            1 => {
                // SAFETY: on 1 the shim points `v` at `vl` bytes that stay
                // valid until the next call on this session (the release below).
                let value = unsafe { std::slice::from_raw_parts(v.cast::<u8>(), vl) };
                f(value);
                Ok(true)
            }
            0 => Ok(false),
            _ => Err(error(&err)),
        };
        // SAFETY: the value slice is no longer used.
        unsafe { (self.api.release)(self.s) };
        out
    }
}

impl Session for ShimSession<'_> {
    fn write(&mut self, ops: &[Op<'_>], _append: bool) -> Result<()> {
        self.ops.clear();
        self.ops.extend(ops.iter().map(|op| match *op {
            Op::Put(k, v) => IbOp {
                key: k.as_ptr().cast(),
                key_len: k.len(),
                value: v.as_ptr().cast(),
                value_len: v.len(),
            },
            Op::Delete(k) => IbOp {
                key: k.as_ptr().cast(),
                key_len: k.len(),
                value: std::ptr::null(),
                value_len: 0,
            },
        }));
        let mut err = [0 as c_char; ERR_LEN];
        // SAFETY: every pointer in `self.ops` borrows from `ops`, which
        // outlives this call; the shim copies what it keeps.
        let rc = unsafe {
            (self.api.write)(
                self.s,
                self.ops.as_ptr(),
                self.ops.len(),
                err.as_mut_ptr(),
                ERR_LEN,
            )
        };
        if rc != 0 {
            return Err(error(&err));
        }
        Ok(())
    }

    fn get(&mut self, key: &[u8], f: &mut dyn FnMut(&[u8])) -> Result<bool> {
        self.lookup(self.api.get, key, f)
    }

    fn hold_snapshot(&mut self) -> Result<bool> {
        let mut err = [0 as c_char; ERR_LEN];
        // SAFETY: `self.s` is this session's live handle; `err` is valid
        // for ERR_LEN bytes.
        match unsafe { (self.api.snapshot_hold)(self.s, err.as_mut_ptr(), ERR_LEN) } {
            1 => Ok(true),
            0 => Ok(false),
            _ => Err(error(&err)),
        }
    }

    fn snapshot_get(&mut self, key: &[u8], f: &mut dyn FnMut(&[u8])) -> Result<bool> {
        self.lookup(self.api.snapshot_get, key, f)
    }

    fn release_snapshot(&mut self) {
        // SAFETY: `self.s` is this session's live handle; releasing when
        // nothing is held is a no-op in every shim.
        unsafe { (self.api.snapshot_release)(self.s) }
    }

    fn scan(
        &mut self,
        start: Option<&[u8]>,
        reverse: bool,
        limit: u64,
        f: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<u64> {
        let mut err = [0 as c_char; ERR_LEN];
        let (sp, sl) = start.map_or((std::ptr::null(), 0), |s| {
            (s.as_ptr().cast::<c_char>(), s.len())
        });
        // SAFETY: `start`, when given, is valid for `sl` bytes during the call.
        let rc = unsafe {
            (self.api.scan_start)(
                self.s,
                sp,
                sl,
                c_int::from(reverse),
                err.as_mut_ptr(),
                ERR_LEN,
            )
        };
        if rc != 0 {
            // SAFETY: ends whatever scan_start set up.
            unsafe { (self.api.release)(self.s) };
            return Err(error(&err));
        }
        let mut n = 0u64;
        let mut result = Ok(());
        while n < limit {
            let (mut k, mut kl, mut v, mut vl) =
                (std::ptr::null(), 0usize, std::ptr::null(), 0usize);
            // SAFETY: out-pointers are valid for writes.
            let rc = unsafe {
                (self.api.scan_next)(
                    self.s,
                    &mut k,
                    &mut kl,
                    &mut v,
                    &mut vl,
                    err.as_mut_ptr(),
                    ERR_LEN,
                )
            };
            match rc {
                1 => {
                    // SAFETY: on 1 both pointers address `kl` / `vl` bytes
                    // valid until the next call on this session.
                    let (key, value) = unsafe {
                        (
                            std::slice::from_raw_parts(k.cast::<u8>(), kl),
                            std::slice::from_raw_parts(v.cast::<u8>(), vl),
                        )
                    };
                    f(key, value);
                    n += 1;
                }
                0 => break,
                _ => {
                    result = Err(error(&err));
                    break;
                }
            }
        }
        // SAFETY: no slice from the scan is used after this point.
        unsafe { (self.api.release)(self.s) };
        result.map(|()| n)
    }
}
