//! A second SQLite library in this process: the system's `libsqlite3.so.0`,
//! loaded with `dlopen` (what Python's `sqlite3`, better-sqlite3 or
//! `node:sqlite` are to honker's bundled copy), for the two-libraries tests.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::Path;

type Db = *mut c_void;

#[allow(clippy::type_complexity)]
pub struct SystemSqlite {
    open_v2: unsafe extern "C" fn(*const c_char, *mut Db, c_int, *const c_char) -> c_int,
    close_v2: unsafe extern "C" fn(Db) -> c_int,
    exec: unsafe extern "C" fn(
        Db,
        *const c_char,
        Option<
            unsafe extern "C" fn(*mut c_void, c_int, *mut *mut c_char, *mut *mut c_char) -> c_int,
        >,
        *mut c_void,
        *mut *mut c_char,
    ) -> c_int,
    busy_timeout: unsafe extern "C" fn(Db, c_int) -> c_int,
    errmsg: unsafe extern "C" fn(Db) -> *const c_char,
    pub version: String,
}

// SAFETY: function pointers into a library that stays loaded.
unsafe impl Send for SystemSqlite {}
unsafe impl Sync for SystemSqlite {}

impl std::fmt::Debug for SystemSqlite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SystemSqlite({})", self.version)
    }
}

unsafe fn sym<T>(lib: *mut c_void, name: &CStr) -> T {
    // SAFETY: the caller names a symbol of type T.
    unsafe {
        let p = libc::dlsym(lib, name.as_ptr());
        assert!(!p.is_null(), "libsqlite3.so.0 has no {name:?}");
        std::mem::transmute_copy(&p)
    }
}

impl SystemSqlite {
    /// The system library, or a panic naming what is missing.
    pub fn load() -> SystemSqlite {
        // SAFETY: dlopen/dlsym of SQLite's public C API.
        unsafe {
            let lib = libc::dlopen(
                c"libsqlite3.so.0".as_ptr(),
                libc::RTLD_NOW | libc::RTLD_LOCAL,
            );
            assert!(
                !lib.is_null(),
                "the system's libsqlite3.so.0 is needed (Debian: libsqlite3-0)"
            );
            let libversion: unsafe extern "C" fn() -> *const c_char =
                sym(lib, c"sqlite3_libversion");
            SystemSqlite {
                open_v2: sym(lib, c"sqlite3_open_v2"),
                close_v2: sym(lib, c"sqlite3_close_v2"),
                exec: sym(lib, c"sqlite3_exec"),
                busy_timeout: sym(lib, c"sqlite3_busy_timeout"),
                errmsg: sym(lib, c"sqlite3_errmsg"),
                version: CStr::from_ptr(libversion()).to_string_lossy().into_owned(),
            }
        }
    }

    pub fn open<'a>(&'a self, path: &Path) -> SysConn<'a> {
        let c = CString::new(path.to_str().unwrap()).unwrap();
        let mut db: Db = std::ptr::null_mut();
        // SAFETY: SQLite's documented calling conventions.
        unsafe {
            let rc = (self.open_v2)(c.as_ptr(), &mut db, 0x2 | 0x4, std::ptr::null());
            assert_eq!(rc, 0, "sqlite3_open_v2 failed");
            (self.busy_timeout)(db, 30_000);
        }
        SysConn { lib: self, db }
    }
}

/// One connection of the system library.
pub struct SysConn<'a> {
    lib: &'a SystemSqlite,
    db: Db,
}

// SAFETY: the system library is built thread-safe (serialized) on Debian.
unsafe impl Send for SysConn<'_> {}

unsafe extern "C" fn first_column(
    out: *mut c_void,
    n: c_int,
    values: *mut *mut c_char,
    _names: *mut *mut c_char,
) -> c_int {
    // SAFETY: `out` is the `Vec<String>` passed to exec; SQLite passes `n`
    // values.
    unsafe {
        let out = &mut *out.cast::<Vec<String>>();
        if n > 0 && !(*values).is_null() {
            out.push(CStr::from_ptr(*values).to_string_lossy().into_owned());
        }
    }
    0
}

impl SysConn<'_> {
    /// Runs `sql`; the first column of every row, as text.
    pub fn exec(&self, sql: &str) -> Result<Vec<String>, String> {
        let c = CString::new(sql).unwrap();
        let mut rows: Vec<String> = Vec::new();
        // SAFETY: SQLite's documented calling conventions.
        unsafe {
            let rc = (self.lib.exec)(
                self.db,
                c.as_ptr(),
                Some(first_column),
                (&mut rows as *mut Vec<String>).cast(),
                std::ptr::null_mut(),
            );
            if rc != 0 {
                return Err(CStr::from_ptr((self.lib.errmsg)(self.db))
                    .to_string_lossy()
                    .into_owned());
            }
        }
        Ok(rows)
    }
}

impl Drop for SysConn<'_> {
    fn drop(&mut self) {
        // SAFETY: closes the connection this value owns.
        unsafe { (self.lib.close_v2)(self.db) };
    }
}
