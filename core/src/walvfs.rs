//! A VFS for the writer connection that writes each commit's WAL frames in
//! one system call.
//!
//! SQLite writes a WAL frame as two `write` calls (the 24-byte frame header,
//! then the page), and a frame straddles two kernel pages: a claim or ack of
//! 32 jobs is about 14 writes of each kind. Collected into one buffer and
//! written with a single `pwrite`, the same bytes cost less than half
//! (bench W4). The file's content and every ordering guarantee are unchanged:
//!
//! - only appended frames are collected: a run starts with a frame header
//!   (or the WAL header at offset 0) and grows only with writes that follow
//!   it exactly. Anything else (overwriting a frame of the same transaction,
//!   rewriting checksums) is written through at once, after the run;
//! - the run is written before anything else touches the file (read, sync,
//!   truncate, size, lock, close, file control, memory map), so SQLite reads
//!   what it wrote, and a `synchronous=FULL` sync covers every frame;
//! - the run is written as soon as a commit frame's page joins it: a commit
//!   frame is always the last frame SQLite appends before it publishes the
//!   commit in the WAL index, so other connections and processes never see a
//!   commit whose frames are not in the file, and a failed write fails the
//!   commit as it would without this VFS.
//!
//! A frame header rewritten after a read of the same frame (checksum
//! recomputation) never starts a run, so it cannot wait in one. The only
//! file wrapped is the WAL of connections opened with this VFS; the database
//! file and its `-shm` are the plain `unix` VFS's, so locking is SQLite's
//! own and other processes (any library) share the file as usual.
//!
//! Invariants:
//! - registered once per process, under [`NAME`], on top of the `unix` VFS;
//!   if there is none (not a unix platform) honker opens connections without
//!   it;
//! - a WAL file's buffer is owned by its `WalFile` and freed in `xClose`.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::ptr;
use std::sync::OnceLock;

use libsqlite3_sys as ffi;

/// The VFS's registered name.
pub(crate) const NAME: &CStr = c"honker-wal";

/// WAL frame header size.
const FRAME_HEADER: usize = 24;
/// WAL file header size.
const WAL_HEADER: usize = 32;
/// A run longer than this is written out even before its commit frame (a
/// large transaction), bounding the buffer.
const MAX_RUN: usize = 1 << 20;
/// The most one write passes to the unix VFS, which writes at most
/// 128 KiB minus one byte per call (it masks larger amounts: SQLite's own
/// writes are never more than one 64 KiB page).
const MAX_WRITE: usize = 124 * 1024;

/// The VFS name to open writer connections with, registering it on first
/// use; `None` where there is no `unix` VFS to build on.
pub(crate) fn name() -> Option<&'static CStr> {
    BASE.get_or_init(register).as_ref().map(|_| NAME)
}

struct Vfs(*mut ffi::sqlite3_vfs);
// SAFETY: the VFS object is immutable once registered and lives forever.
unsafe impl Send for Vfs {}
unsafe impl Sync for Vfs {}

/// The `unix` VFS this one delegates to, once this one is registered.
static BASE: OnceLock<Option<Vfs>> = OnceLock::new();

fn base() -> *mut ffi::sqlite3_vfs {
    match BASE.get() {
        Some(Some(unix)) => unix.0,
        _ => unreachable!("files are opened through this VFS only once it is registered"),
    }
}

/// Registers this VFS; returns the `unix` VFS it builds on.
fn register() -> Option<Vfs> {
    // SAFETY: plain SQLite calls; the VFS object is leaked, so it outlives
    // every connection, as SQLite requires.
    unsafe {
        if ffi::sqlite3_initialize() != ffi::SQLITE_OK {
            return None;
        }
        let unix = ffi::sqlite3_vfs_find(c"unix".as_ptr());
        if unix.is_null() || !ffi::sqlite3_vfs_find(NAME.as_ptr()).is_null() {
            return None;
        }
        // Every method but xOpen is the unix VFS's own; those never use the
        // VFS argument (xOpen, which reads its app data, is called with the
        // unix VFS itself below).
        let mut vfs: ffi::sqlite3_vfs = *unix;
        vfs.zName = NAME.as_ptr();
        vfs.pNext = ptr::null_mut();
        vfs.szOsFile = (*unix).szOsFile + HEADER as c_int;
        vfs.xOpen = Some(open);
        let vfs = Box::into_raw(Box::new(vfs));
        (ffi::sqlite3_vfs_register(vfs, 0) == ffi::SQLITE_OK).then_some(Vfs(unix))
    }
}

/// A WAL file: our header, then (at [`HEADER`]) the unix VFS's file object.
#[repr(C)]
struct WalFile {
    /// `pMethods` points to [`WAL_METHODS`]; must come first.
    base: ffi::sqlite3_file,
    run: *mut Run,
}

/// Bytes before the unix file object, keeping its alignment.
const HEADER: usize = std::mem::size_of::<WalFile>().next_multiple_of(16);

/// The unix file object inside `file` (a `WalFile`'s memory).
///
/// # Safety
/// `file` points to memory of this VFS's `szOsFile` bytes.
unsafe fn real(file: *mut ffi::sqlite3_file) -> *mut ffi::sqlite3_file {
    unsafe { file.cast::<u8>().add(HEADER).cast() }
}

#[derive(Default)]
struct Run {
    /// File offset of `buf[0]`.
    start: i64,
    buf: Vec<u8>,
    /// A commit frame's header is in the run: write it out with the page
    /// that follows.
    commit_pending: bool,
    /// Offset of a read not yet followed by a write: a frame header written
    /// there is a rewrite.
    last_read: Option<i64>,
}

impl Run {
    fn end(&self) -> i64 {
        self.start + self.buf.len() as i64
    }
}

#[cfg(test)]
thread_local! {
    /// Writes SQLite asked for, writes passed to the unix VFS, and how many
    /// of those were written through outside a run, on this thread.
    static COUNTS: std::cell::Cell<[u64; 3]> = const { std::cell::Cell::new([0; 3]) };
}

fn count(_i: usize) {
    #[cfg(test)]
    COUNTS.with(|c| {
        let mut v = c.get();
        v[_i] += 1;
        c.set(v);
    });
}

unsafe extern "C" fn open(
    _vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    let unix = base();
    // SAFETY: the unix VFS's xOpen, with memory SQLite sized for it
    // (`szOsFile` covers the header plus the unix object).
    unsafe {
        let x_open = (*unix).xOpen.expect("the unix VFS opens files");
        if flags & ffi::SQLITE_OPEN_WAL == 0 {
            return x_open(unix, name, file, flags, out_flags);
        }
        let wal = file.cast::<WalFile>();
        let real = real(file);
        (*real).pMethods = ptr::null();
        let rc = x_open(unix, name, real, flags, out_flags);
        if rc != ffi::SQLITE_OK || (*real).pMethods.is_null() {
            if !(*real).pMethods.is_null() {
                if let Some(close) = (*(*real).pMethods).xClose {
                    close(real);
                }
            }
            (*wal).base.pMethods = ptr::null();
            return if rc == ffi::SQLITE_OK {
                ffi::SQLITE_CANTOPEN
            } else {
                rc
            };
        }
        (*wal).run = Box::into_raw(Box::default());
        (*wal).base.pMethods = &WAL_METHODS;
        ffi::SQLITE_OK
    }
}

/// The file's unix object and run.
///
/// # Safety
/// `file` is a `WalFile` opened by [`open`] and not yet closed, used by one
/// thread at a time (SQLite's contract for file objects).
unsafe fn parts<'a>(file: *mut ffi::sqlite3_file) -> (*mut ffi::sqlite3_file, &'a mut Run) {
    let wal = file.cast::<WalFile>();
    unsafe { (real(file), &mut *(*wal).run) }
}

/// The unix file's method table.
///
/// # Safety
/// `real` is an open unix file object.
unsafe fn methods<'a>(real: *mut ffi::sqlite3_file) -> &'a ffi::sqlite3_io_methods {
    unsafe { &*(*real).pMethods }
}

/// Writes the run out and empties it: one write per [`MAX_WRITE`] bytes.
///
/// # Safety
/// As [`parts`].
unsafe fn flush(real: *mut ffi::sqlite3_file, run: &mut Run) -> c_int {
    run.commit_pending = false;
    let mut rc = ffi::SQLITE_OK;
    let mut offset = run.start;
    for chunk in run.buf.chunks(MAX_WRITE) {
        count(1);
        // SAFETY: the unix xWrite with our own buffer.
        rc = unsafe {
            methods(real).xWrite.expect("xWrite")(
                real,
                chunk.as_ptr().cast(),
                chunk.len() as c_int,
                offset,
            )
        };
        if rc != ffi::SQLITE_OK {
            break;
        }
        offset += chunk.len() as i64;
    }
    run.buf.clear();
    rc
}

/// Writes the run out, then runs `f` on the unix file.
///
/// # Safety
/// As [`parts`].
unsafe fn flushed(
    file: *mut ffi::sqlite3_file,
    f: impl FnOnce(*mut ffi::sqlite3_file, &ffi::sqlite3_io_methods) -> c_int,
) -> c_int {
    unsafe {
        let (real, run) = parts(file);
        let rc = flush(real, run);
        if rc != ffi::SQLITE_OK {
            return rc;
        }
        f(real, methods(real))
    }
}

unsafe extern "C" fn x_close(file: *mut ffi::sqlite3_file) -> c_int {
    unsafe {
        let (real, run) = parts(file);
        let rc = flush(real, run);
        let closed = methods(real).xClose.expect("xClose")(real);
        let wal = file.cast::<WalFile>();
        drop(Box::from_raw((*wal).run));
        (*wal).run = ptr::null_mut();
        if rc != ffi::SQLITE_OK {
            rc
        } else {
            closed
        }
    }
}

unsafe extern "C" fn x_read(
    file: *mut ffi::sqlite3_file,
    buf: *mut c_void,
    amt: c_int,
    offset: i64,
) -> c_int {
    unsafe {
        parts(file).1.last_read = Some(offset);
        flushed(file, |real, m| {
            m.xRead.expect("xRead")(real, buf, amt, offset)
        })
    }
}

unsafe extern "C" fn x_write(
    file: *mut ffi::sqlite3_file,
    buf: *const c_void,
    amt: c_int,
    offset: i64,
) -> c_int {
    unsafe {
        let (real, run) = parts(file);
        count(0);
        let len = usize::try_from(amt).unwrap_or(0);
        let data = std::slice::from_raw_parts(buf.cast::<u8>(), len);
        let follows = !run.buf.is_empty() && offset == run.end();
        let rewrite = run.last_read.take() == Some(offset);
        if !follows {
            let rc = flush(real, run);
            if rc != ffi::SQLITE_OK {
                return rc;
            }
            let starts_run =
                (len == FRAME_HEADER && !rewrite) || (len == WAL_HEADER && offset == 0);
            if !starts_run {
                count(1);
                count(2);
                return methods(real).xWrite.expect("xWrite")(real, buf, amt, offset);
            }
            run.start = offset;
        }
        let completes_commit = run.commit_pending && len != FRAME_HEADER;
        run.buf.extend_from_slice(data);
        if len == FRAME_HEADER && data[4..8] != [0, 0, 0, 0] {
            run.commit_pending = true; // nTruncate set: a commit frame
        }
        if completes_commit || run.buf.len() >= MAX_RUN {
            return flush(real, run);
        }
        ffi::SQLITE_OK
    }
}

unsafe extern "C" fn x_truncate(file: *mut ffi::sqlite3_file, size: i64) -> c_int {
    unsafe { flushed(file, |real, m| m.xTruncate.expect("xTruncate")(real, size)) }
}

unsafe extern "C" fn x_sync(file: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
    unsafe { flushed(file, |real, m| m.xSync.expect("xSync")(real, flags)) }
}

unsafe extern "C" fn x_file_size(file: *mut ffi::sqlite3_file, size: *mut i64) -> c_int {
    unsafe { flushed(file, |real, m| m.xFileSize.expect("xFileSize")(real, size)) }
}

unsafe extern "C" fn x_lock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    unsafe { flushed(file, |real, m| m.xLock.expect("xLock")(real, level)) }
}

unsafe extern "C" fn x_unlock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    unsafe { flushed(file, |real, m| m.xUnlock.expect("xUnlock")(real, level)) }
}

unsafe extern "C" fn x_check_reserved_lock(file: *mut ffi::sqlite3_file, out: *mut c_int) -> c_int {
    unsafe {
        flushed(file, |real, m| {
            m.xCheckReservedLock.expect("xCheckReservedLock")(real, out)
        })
    }
}

unsafe extern "C" fn x_file_control(
    file: *mut ffi::sqlite3_file,
    op: c_int,
    arg: *mut c_void,
) -> c_int {
    unsafe {
        flushed(file, |real, m| {
            m.xFileControl.expect("xFileControl")(real, op, arg)
        })
    }
}

unsafe extern "C" fn x_sector_size(file: *mut ffi::sqlite3_file) -> c_int {
    unsafe {
        let real = real(file);
        methods(real).xSectorSize.expect("xSectorSize")(real)
    }
}

unsafe extern "C" fn x_device_characteristics(file: *mut ffi::sqlite3_file) -> c_int {
    unsafe {
        let real = real(file);
        methods(real)
            .xDeviceCharacteristics
            .expect("xDeviceCharacteristics")(real)
    }
}

unsafe extern "C" fn x_shm_map(
    file: *mut ffi::sqlite3_file,
    region: c_int,
    size: c_int,
    extend: c_int,
    out: *mut *mut c_void,
) -> c_int {
    unsafe {
        flushed(file, |real, m| match m.xShmMap {
            Some(f) => f(real, region, size, extend, out),
            None => ffi::SQLITE_IOERR_SHMMAP,
        })
    }
}

unsafe extern "C" fn x_shm_lock(
    file: *mut ffi::sqlite3_file,
    offset: c_int,
    n: c_int,
    flags: c_int,
) -> c_int {
    unsafe {
        flushed(file, |real, m| match m.xShmLock {
            Some(f) => f(real, offset, n, flags),
            None => ffi::SQLITE_IOERR_SHMLOCK,
        })
    }
}

unsafe extern "C" fn x_shm_barrier(file: *mut ffi::sqlite3_file) {
    unsafe {
        let real = real(file);
        if let Some(f) = methods(real).xShmBarrier {
            f(real);
        }
    }
}

unsafe extern "C" fn x_shm_unmap(file: *mut ffi::sqlite3_file, delete: c_int) -> c_int {
    unsafe {
        flushed(file, |real, m| match m.xShmUnmap {
            Some(f) => f(real, delete),
            None => ffi::SQLITE_OK,
        })
    }
}

unsafe extern "C" fn x_fetch(
    file: *mut ffi::sqlite3_file,
    offset: i64,
    amt: c_int,
    out: *mut *mut c_void,
) -> c_int {
    unsafe {
        flushed(file, |real, m| match m.xFetch {
            Some(f) => f(real, offset, amt, out),
            None => {
                *out = ptr::null_mut();
                ffi::SQLITE_OK
            }
        })
    }
}

unsafe extern "C" fn x_unfetch(file: *mut ffi::sqlite3_file, offset: i64, p: *mut c_void) -> c_int {
    unsafe {
        let real = real(file);
        match methods(real).xUnfetch {
            Some(f) => f(real, offset, p),
            None => ffi::SQLITE_OK,
        }
    }
}

static WAL_METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 3,
    xClose: Some(x_close),
    xRead: Some(x_read),
    xWrite: Some(x_write),
    xTruncate: Some(x_truncate),
    xSync: Some(x_sync),
    xFileSize: Some(x_file_size),
    xLock: Some(x_lock),
    xUnlock: Some(x_unlock),
    xCheckReservedLock: Some(x_check_reserved_lock),
    xFileControl: Some(x_file_control),
    xSectorSize: Some(x_sector_size),
    xDeviceCharacteristics: Some(x_device_characteristics),
    xShmMap: Some(x_shm_map),
    xShmLock: Some(x_shm_lock),
    xShmBarrier: Some(x_shm_barrier),
    xShmUnmap: Some(x_shm_unmap),
    xFetch: Some(x_fetch),
    xUnfetch: Some(x_unfetch),
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Database, EnqueueOptions};
    use rusqlite::Connection;

    fn counts() -> [u64; 3] {
        COUNTS.with(std::cell::Cell::get)
    }

    fn since(before: [u64; 3]) -> [u64; 3] {
        let now = counts();
        [now[0] - before[0], now[1] - before[1], now[2] - before[2]]
    }

    /// Another connection (plain unix VFS) reading the file now.
    fn plain(path: &std::path::Path) -> Connection {
        Connection::open(path).unwrap()
    }

    fn assert_integrity(c: &Connection) {
        let ok: String = c
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(ok, "ok");
    }

    #[test]
    fn a_commit_reaches_the_file_in_one_write() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path().join("a.db")).unwrap();
        let q = db.queue("q").unwrap();
        let big = "x".repeat(1_500);
        q.enqueue(serde_json::json!(1), &EnqueueOptions::default())
            .unwrap();
        let before = counts();
        q.enqueue_many(
            (0..32).map(|_| serde_json::json!(big)),
            &EnqueueOptions::default(),
        )
        .unwrap();
        let [asked, written, through] = since(before);
        assert!(asked >= 2 * 12, "{asked} writes asked for");
        assert_eq!((written, through), (1, 0));
    }

    /// Every commit is in the file before any other connection can see it.
    #[test]
    fn other_connections_read_every_commit_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.db");
        let db = Database::open(&path).unwrap();
        db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)", [])
            .unwrap();
        let other = plain(&path);
        for i in 0..300_i64 {
            let v = format!("{i}-{}", "y".repeat((i as usize * 37) % 3_000));
            db.execute("INSERT INTO t (id, v) VALUES (?1, ?2)", (i, &v))
                .unwrap();
            let got: String = other
                .query_row("SELECT v FROM t WHERE id = ?1", [i], |r| r.get(0))
                .unwrap();
            assert_eq!(got, v);
        }
        assert_integrity(&other);
    }

    /// A transaction bigger than the page cache spills frames before its
    /// commit, overwrites some of them and rewrites their checksums at
    /// commit: those writes go through outside a run, SQLite reads the
    /// frames back, and a copy of the files taken right after the commit (a
    /// crash now) recovers the whole transaction.
    #[test]
    fn spilled_and_rewritten_frames_are_in_the_file_at_commit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.db");
        let db = Database::open(&path).unwrap();
        db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)", [])
            .unwrap();
        db.execute("PRAGMA cache_size = 8", []).unwrap();
        let before = counts();
        let tx = db.transaction().unwrap();
        for i in 0..400_i64 {
            tx.execute("INSERT INTO t (id, v) VALUES (?1, zeroblob(900))", [i])
                .unwrap();
        }
        for i in 0..400_i64 {
            tx.execute("UPDATE t SET v = randomblob(900) WHERE id = ?1", [i])
                .unwrap();
        }
        tx.commit().unwrap();
        assert!(since(before)[2] > 0, "no frame was overwritten");
        let sum = |c: &Connection| -> (i64, String) {
            c.query_row(
                "SELECT count(*), group_concat(hex(substr(v, 1, 8)) || hex(substr(v, -8)), ',') \
                 FROM (SELECT v FROM t ORDER BY id)",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap()
        };
        let live = sum(&plain(&path));
        assert_eq!(live.0, 400);
        // Copy in another process: closing a descriptor on the file here
        // would drop this process's locks on it.
        let copy = dir.path().join("copy");
        std::fs::create_dir(&copy).unwrap();
        let status = std::process::Command::new("cp")
            .arg(&path)
            .arg(dir.path().join("a.db-wal"))
            .arg(&copy)
            .status()
            .unwrap();
        assert!(status.success());
        let recovered = plain(&copy.join("a.db"));
        assert_eq!(sum(&recovered), live);
        assert_integrity(&recovered);
    }
}
