//! `libhonker_ext`: honker's queue as SQL functions for any SQLite
//! connection — the `sqlite3` shell (`.load ./libhonker_ext`), Python's
//! stdlib `sqlite3`, Go, Ruby, ORMs.
//!
//! Everything is in core (`honker::sql`): this crate only provides the entry
//! point SQLite looks for and reaches the host's SQLite through its function
//! table. Loading performs no DDL; `SELECT honker_bootstrap();` creates
//! honker's tables.
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
        Ok(Ok(())) => ffi::SQLITE_OK,
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
