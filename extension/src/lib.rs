//! `libhonker_ext`: honker's queue as SQL functions for any SQLite
//! connection — the `sqlite3` shell (`.load ./libhonker_ext`), Python's
//! stdlib `sqlite3`, Go, Ruby, ORMs.
//!
//! Everything is in core (`honker::sql`): this crate only provides the entry
//! point SQLite looks for and reaches the host's SQLite through its function
//! table. Loading performs no DDL; `SELECT honker_bootstrap();` creates
//! honker's tables.
//!
//! It also exports Honker's watcher C ABI (`honker_watcher_open`, `_open_v2`,
//! `_wait`, `_close`) for clients that wait for commits (docs/sql.md).
//!
//! A host older than the SQLite whose headers the extension was built
//! against (3.40.1 on Debian 12) is refused with a message naming the
//! version needed; loading never crashes the host.

use std::ffi::{c_char, c_int};
use std::panic::{catch_unwind, AssertUnwindSafe};

use libsqlite3_sys as ffi;

/// The entry point SQLite derives from the file name `libhonker_ext`.
///
/// # Safety
/// Called by SQLite's extension loader with a valid connection, error-message
/// slot and API table.
#[no_mangle]
pub unsafe extern "C" fn sqlite3_honkerext_init(
    db: *mut ffi::sqlite3,
    err_msg: *mut *mut c_char,
    api: *mut ffi::sqlite3_api_routines,
) -> c_int {
    // SAFETY: `api` is the host's table. On a host that is too old this
    // stores nothing but the allocator (used for the message below) and
    // reports the mismatch.
    if let Err(e) = unsafe { ffi::rusqlite_extension_init2(api) } {
        let message = match e {
            ffi::InitError::VersionMismatch {
                compile_time,
                runtime,
            } => format!(
                "honker_ext needs SQLite {} or newer; this host's SQLite is {}",
                version(compile_time),
                version(runtime)
            ),
            other => format!("honker_ext cannot load: {other}"),
        };
        // SAFETY: `err_msg` is the loader's slot; the allocator is set.
        unsafe { set_error(err_msg, &message) };
        return ffi::SQLITE_ERROR;
    }
    // SAFETY: the API table is installed and `db` is the host's connection.
    let result = catch_unwind(AssertUnwindSafe(|| unsafe {
        honker::sql::register_extension(db)
    }));
    match result {
        // Never unloaded when the connection that loaded it closes: the
        // watcher's thread runs this library's code, and its handles must
        // outlive any one connection (Honker's extension does the same).
        Ok(Ok(())) => ffi::SQLITE_OK_LOAD_PERMANENTLY as c_int,
        Ok(Err(e)) => {
            // SAFETY: as above.
            unsafe { set_error(err_msg, &e.to_string()) };
            ffi::SQLITE_ERROR
        }
        Err(_) => {
            // SAFETY: as above.
            unsafe { set_error(err_msg, "INTERNAL: honker_ext panicked while loading") };
            ffi::SQLITE_ERROR
        }
    }
}

/// `3040001` → `3.40.1`.
fn version(n: c_int) -> String {
    format!("{}.{}.{}", n / 1_000_000, n / 1000 % 1000, n % 1000)
}

/// Hands `message` to the loader, allocated with SQLite's allocator as it
/// requires.
///
/// # Safety
/// `slot` must be null or the loader's error slot; `sqlite3_malloc` must be
/// usable through the API table.
unsafe fn set_error(slot: *mut *mut c_char, message: &str) {
    if slot.is_null() {
        return;
    }
    let Ok(n) = c_int::try_from(message.len() + 1) else {
        return;
    };
    // SAFETY: a fresh allocation of `n` bytes, filled and NUL-terminated.
    unsafe {
        let p = ffi::sqlite3_malloc(n).cast::<u8>();
        if p.is_null() {
            return;
        }
        std::ptr::copy_nonoverlapping(message.as_ptr(), p, message.len());
        *p.add(message.len()) = 0;
        *slot = p.cast();
    }
}

// ----- Honker's watcher C ABI ------------------------------------------------
//
// What Honker's non-Rust clients (Go, Ruby, Bun, .NET, C++) look up in the
// extension to sleep until a commit: open a watcher on the database file,
// wait with a timeout, close. Same symbols, signatures and return codes as
// Honker's `honker-extension`; the watcher underneath is honker's one watcher
// per file per process, over the host's SQLite (`honker::sql::HostWatch`).
// Every entry point catches panics; none may be called before the extension
// was loaded into a connection of the process (then `open` returns NULL with
// the reason in `err_buf`).

/// An open watcher: what `honker_watcher_open` hands out.
pub struct HonkerWatcherHandle(honker::sql::HostWatch);

/// Copies `message` into the caller's buffer of `len` bytes, cut to fit and
/// NUL-terminated.
///
/// # Safety
/// `buf` must be null or valid for `len` bytes.
unsafe fn write_error(buf: *mut c_char, len: usize, message: &str) {
    if buf.is_null() || len == 0 {
        return;
    }
    let n = message.len().min(len - 1);
    // SAFETY: `buf` holds `len` bytes (contract); n + 1 <= len.
    unsafe {
        std::ptr::copy_nonoverlapping(message.as_ptr().cast::<c_char>(), buf, n);
        *buf.add(n) = 0;
    }
}

/// A C string argument: `None` for NULL or empty.
///
/// # Safety
/// `p` must be null or a NUL-terminated string.
unsafe fn text<'a>(p: *const c_char, what: &str) -> Result<Option<&'a str>, String> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: NUL-terminated (contract).
    let s = unsafe { std::ffi::CStr::from_ptr(p) }
        .to_str()
        .map_err(|_| format!("{what} is not UTF-8"))?;
    Ok(Some(s).filter(|s| !s.is_empty()))
}

/// # Safety
/// As [`honker_watcher_open_v2`].
unsafe fn open(
    db_path: *const c_char,
    backend: *const c_char,
    poll_ms: Option<u64>,
    err_buf: *mut c_char,
    err_len: usize,
) -> *mut HonkerWatcherHandle {
    let opened = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the caller passes NUL-terminated strings or NULL.
        let path = unsafe { text(db_path, "db_path") }?.ok_or("db_path is null")?;
        // SAFETY: as above.
        let backend = unsafe { text(backend, "backend") }?;
        let poll = poll_ms.map(|ms| i64::try_from(ms).unwrap_or(i64::MAX));
        honker::sql::HostWatch::open(path, backend, poll).map_err(|e| e.to_string())
    }));
    let message = match opened {
        Ok(Ok(watch)) => return Box::into_raw(Box::new(HonkerWatcherHandle(watch))),
        Ok(Err(message)) => message,
        Err(_) => "INTERNAL: honker_watcher_open panicked".to_owned(),
    };
    // SAFETY: the caller's buffer (contract).
    unsafe { write_error(err_buf, err_len, &message) };
    std::ptr::null_mut()
}

/// Opens a watcher on the database file at `db_path` (which must exist).
/// `backend` is NULL, empty or one of Honker's names (`polling`, `kernel`,
/// `shm`): honker has one mechanism, file events with a timed fallback.
/// Returns NULL on error, with a NUL-terminated message in `err_buf`.
///
/// # Safety
/// `db_path` and `backend` must be NULL or NUL-terminated strings; `err_buf`
/// NULL or valid for `err_buf_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn honker_watcher_open(
    db_path: *const c_char,
    backend: *const c_char,
    err_buf: *mut c_char,
    err_buf_len: usize,
) -> *mut HonkerWatcherHandle {
    // SAFETY: the same contract.
    unsafe { open(db_path, backend, None, err_buf, err_buf_len) }
}

/// [`honker_watcher_open`] with Honker's polling cadence, which must be
/// positive (honker validates it and does not poll).
///
/// # Safety
/// As [`honker_watcher_open`].
#[no_mangle]
pub unsafe extern "C" fn honker_watcher_open_v2(
    db_path: *const c_char,
    backend: *const c_char,
    watcher_poll_interval_ms: u64,
    err_buf: *mut c_char,
    err_buf_len: usize,
) -> *mut HonkerWatcherHandle {
    // SAFETY: the same contract.
    unsafe {
        open(
            db_path,
            backend,
            Some(watcher_poll_interval_ms),
            err_buf,
            err_buf_len,
        )
    }
}

/// Waits up to `timeout_ms` for a commit to the file since the last wait (or
/// the open): `1` a commit (at once if one already came), `0` the timeout,
/// `-1` a NULL handle, `-2` an internal panic.
///
/// # Safety
/// `handle` must be NULL or from `honker_watcher_open*`, not yet closed, and
/// not waited on by two threads at once.
#[no_mangle]
pub unsafe extern "C" fn honker_watcher_wait(
    handle: *mut HonkerWatcherHandle,
    timeout_ms: u64,
) -> c_int {
    if handle.is_null() {
        return -1;
    }
    catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: a live handle used by this thread alone (contract).
        let watch = unsafe { &mut (*handle).0 };
        c_int::from(watch.wait(std::time::Duration::from_millis(timeout_ms)))
    }))
    .unwrap_or(-2)
}

/// Closes a watcher (NULL is ignored). The process's watcher thread stops
/// when its last user goes.
///
/// # Safety
/// `handle` must be NULL or from `honker_watcher_open*`, closed once.
#[no_mangle]
pub unsafe extern "C" fn honker_watcher_close(handle: *mut HonkerWatcherHandle) {
    if handle.is_null() {
        return;
    }
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: from Box::into_raw in `open`, closed once (contract).
        drop(unsafe { Box::from_raw(handle) });
    }));
}
