//! A small statement layer over the raw SQLite C API, for the protocol code
//! (migrations, the primitives' operations, the SQL functions).
//!
//! Why not rusqlite here: the same protocol code runs inside the loadable
//! extension, where SQLite is the *host's* library reached through its
//! function table (libsqlite3-sys `loadable_extension`), and rusqlite cannot
//! be built against Debian 12's SQLite 3.40 (it calls 3.41+/3.44+ APIs; see
//! ADR 7). Everything here uses only calls that SQLite has had since 3.20, so
//! one implementation serves honker's own (bundled) connections and any host
//! connection the extension is loaded into.
//!
//! Invariants:
//! - a [`Stmt`] is reset and its bindings cleared before any call that bound
//!   parameters returns, so parameters may be bound without copying
//!   (`SQLITE_STATIC`) and no statement keeps a read transaction open;
//! - statements are keyed by the address of their `&'static str` SQL; a
//!   cached statement is taken out of the cache while in use, so a re-entrant
//!   use of the same SQL (a TEMP trigger calling a honker function while a
//!   honker statement runs) prepares a fresh one instead of sharing;
//! - a [`StmtCache`] must be cleared before its connection is closed (the
//!   owner does this; `sqlite3_close` refuses to close with live statements).

use std::collections::HashMap;
use std::ffi::{c_char, c_int, CStr, CString};
use std::ptr;

use libsqlite3_sys as ffi;
use parking_lot::Mutex;

use crate::error::{Error, ErrorKind, Result};
use crate::payload::Payload;

/// Compile-time guard (DESIGN §12): the `rusqlite` build links a real SQLite.
/// If libsqlite3-sys's `loadable_extension` feature were unified into it, every
/// call would go through an extension function table that no host installed,
/// and the first SQLite call would panic at run time. `sqlite3_initialize` is
/// not part of the extension API, so such a build fails here instead.
#[cfg(feature = "rusqlite")]
const _LINKED_SQLITE: unsafe extern "C" fn() -> c_int = ffi::sqlite3_initialize;

thread_local! {
    static VM_STEPS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The SQLite virtual-machine steps honker's own statements ran on this
/// thread so far: what tests use to bound the rows an operation visits
/// (a count that grows with a table's size means a walk).
#[doc(hidden)]
pub fn vm_steps_on_this_thread() -> u64 {
    VM_STEPS.with(std::cell::Cell::get)
}

/// A fresh lease token: 16 bytes from SQLite's PRNG (ChaCha20, seeded from
/// the OS) as 32 lowercase hex digits, the same as SQL's
/// `lower(hex(randomblob(16)))`. A forked child does not repeat its parent's
/// tokens: SQLite's unix VFS reseeds the PRNG when a process with a new pid
/// opens a file, and a child must open its own connection before it claims.
pub fn random_token() -> String {
    let mut bytes = [0u8; 16];
    // SAFETY: `sqlite3_randomness` writes exactly 16 bytes to the buffer; it
    // is thread-safe.
    unsafe { ffi::sqlite3_randomness(16, bytes.as_mut_ptr().cast()) };
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut token = String::with_capacity(32);
    for b in bytes {
        token.push(HEX[usize::from(b >> 4)] as char);
        token.push(HEX[usize::from(b & 15)] as char);
    }
    token
}

/// `[&dyn ToSql]` for a statement's parameters, in order.
#[macro_export]
#[doc(hidden)]
macro_rules! params {
    ($($p:expr),* $(,)?) => {
        &[$(&$p as &dyn $crate::raw::ToSql),*] as &[&dyn $crate::raw::ToSql]
    };
}
pub use crate::params;

/// Counts that follow the writer's transactions: made inside one, kept when
/// it commits, taken back when it (or a savepoint in it) rolls back, and
/// written to the file now and then with a commit of honker's. The queue
/// counters (ADR 27) are one; the engine does not know what they count.
pub trait Batch: Send + Sync + std::fmt::Debug {
    /// Where the counts are now (before a savepoint).
    fn mark(&self) -> usize;
    /// Takes back the counts made since `mark` (a savepoint rolled back).
    fn rewind(&self, mark: usize);
    /// The writer committed: the counts made so far are the file's.
    fn committed(&self);
    /// The writer rolled back: the uncommitted counts are gone.
    fn rolled_back(&self);
    /// Whether committed counts are due to be written.
    fn due(&self) -> bool;
    /// Whether committed counts wait to be written at all.
    fn has_committed(&self) -> bool;
    /// The database is closing: stop any timer of the batch's own.
    fn stop(&self);
    /// The batch itself, for the layer that records into it.
    fn as_any(&self) -> &dyn std::any::Any;
    /// Writes the committed counts on `conn`, inside its transaction.
    fn flush(&self, conn: Conn<'_>) -> Result<()>;
}

/// Prepared statements of one connection, reused across calls.
#[derive(Debug, Default)]
pub struct StmtCache {
    idle: Mutex<HashMap<(usize, usize), Vec<StmtPtr>>>,
    /// The [`Batch`] that follows this connection's transactions (honker's
    /// own writer: it sees the commits); none elsewhere, where counts are
    /// written in the transaction itself.
    pub batch: std::sync::OnceLock<std::sync::Arc<dyn Batch>>,
}

#[derive(Debug)]
struct StmtPtr(*mut ffi::sqlite3_stmt);

// SAFETY: a statement is used by one thread at a time: it is either idle in
// the cache (behind the mutex) or checked out by the thread that holds its
// connection (honker serialises each connection's use).
unsafe impl Send for StmtPtr {}

impl StmtCache {
    /// Finalizes every idle statement. Call before closing the connection.
    pub(crate) fn clear(&self) {
        for (_, stmts) in self.idle.lock().drain() {
            for s in stmts {
                // SAFETY: idle statements are owned by the cache alone.
                unsafe { ffi::sqlite3_finalize(s.0) };
            }
        }
    }
}

impl StmtCache {
    /// How many times the idle statements were re-prepared, all together
    /// (a test's probe).
    #[doc(hidden)]
    pub(crate) fn reprepares(&self) -> i64 {
        let idle = self.idle.lock();
        idle.values()
            .flatten()
            // SAFETY: idle statements are live and owned by the cache.
            .map(|s| unsafe {
                i64::from(ffi::sqlite3_stmt_status(
                    s.0,
                    ffi::SQLITE_STMTSTATUS_REPREPARE,
                    0,
                ))
            })
            .sum()
    }
}

impl Drop for StmtCache {
    fn drop(&mut self) {
        self.clear();
    }
}

/// A connection as the protocol code sees it: a handle plus, optionally, a
/// statement cache. Cheap to copy; borrows both.
#[derive(Clone, Copy, Debug)]
pub struct Conn<'a> {
    db: *mut ffi::sqlite3,
    cache: Option<&'a StmtCache>,
}

impl<'a> Conn<'a> {
    /// # Safety
    /// `db` must be an open connection, used only by this thread while the
    /// returned value (and anything made from it) lives; `cache` must hold
    /// statements of `db` only.
    pub unsafe fn new(db: *mut ffi::sqlite3, cache: Option<&'a StmtCache>) -> Conn<'a> {
        Conn { db, cache }
    }

    /// The statement for `sql`, from the cache when there is one.
    pub fn prepare_cached(&self, sql: &'static str) -> Result<Stmt<'a>> {
        let key = (sql.as_ptr() as usize, sql.len());
        if let Some(cache) = self.cache {
            if let Some(s) = cache.idle.lock().get_mut(&key).and_then(Vec::pop) {
                return Ok(Stmt {
                    conn: *self,
                    stmt: s.0,
                    key: Some(key),
                });
            }
        }
        let stmt = self.prepare_raw(sql)?;
        Ok(Stmt {
            conn: *self,
            stmt,
            key: self.cache.map(|_| key),
        })
    }

    fn prepare_raw(&self, sql: &str) -> Result<*mut ffi::sqlite3_stmt> {
        let len = c_int::try_from(sql.len()).map_err(|_| Error::invalid("SQL text too long"))?;
        let mut stmt = ptr::null_mut();
        // SAFETY: `sql` outlives the call; the length excludes any NUL.
        let rc = unsafe {
            ffi::sqlite3_prepare_v2(
                self.db,
                sql.as_ptr().cast::<c_char>(),
                len,
                &mut stmt,
                ptr::null_mut(),
            )
        };
        if rc != ffi::SQLITE_OK {
            return Err(self.error(rc));
        }
        if stmt.is_null() {
            return Err(Error::internal("empty SQL statement"));
        }
        Ok(stmt)
    }

    /// Runs one or more statements without parameters or results.
    pub fn execute_batch(&self, sql: &str) -> Result<()> {
        let text = CString::new(sql).map_err(|_| Error::invalid("SQL text contains NUL"))?;
        let mut msg: *mut c_char = ptr::null_mut();
        // SAFETY: `text` is NUL-terminated and outlives the call; the error
        // message is owned by SQLite's allocator and freed below.
        let rc =
            unsafe { ffi::sqlite3_exec(self.db, text.as_ptr(), None, ptr::null_mut(), &mut msg) };
        if rc == ffi::SQLITE_OK {
            return Ok(());
        }
        let text = if msg.is_null() {
            None
        } else {
            // SAFETY: non-null messages from sqlite3_exec are NUL-terminated.
            let s = unsafe { CStr::from_ptr(msg) }
                .to_string_lossy()
                .into_owned();
            unsafe { ffi::sqlite3_free(msg.cast()) };
            Some(s)
        };
        Err(sqlite_error(rc, text.unwrap_or_else(|| self.errmsg())))
    }

    /// The main database's file name (empty for a temporary or in-memory
    /// database), if SQLite knows one.
    pub fn filename(&self) -> Option<String> {
        // SAFETY: `db` is open; "main" always exists; the name is owned by
        // the connection and copied before this returns.
        let name = unsafe { ffi::sqlite3_db_filename(self.db, c"main".as_ptr()) };
        if name.is_null() {
            return None;
        }
        // SAFETY: a NUL-terminated string owned by the connection.
        Some(
            unsafe { CStr::from_ptr(name) }
                .to_string_lossy()
                .into_owned(),
        )
    }

    pub fn last_insert_rowid(&self) -> i64 {
        // SAFETY: `db` is open (constructor contract).
        unsafe { ffi::sqlite3_last_insert_rowid(self.db) }
    }

    /// The main database's data version on this connection
    /// (`SQLITE_FCNTL_DATA_VERSION`, the pager's counter): it goes up by one
    /// at each commit on this connection, and again whenever the connection
    /// finds that another one changed the file (at the start of its next
    /// transaction). `None` if SQLite cannot say.
    pub fn data_version(&self) -> Option<u32> {
        let mut version: std::ffi::c_uint = 0;
        // SAFETY: `db` is open (constructor contract); the opcode writes
        // one unsigned int to the pointer it is given.
        let rc = unsafe {
            ffi::sqlite3_file_control(
                self.db,
                c"main".as_ptr(),
                ffi::SQLITE_FCNTL_DATA_VERSION,
                (&raw mut version).cast(),
            )
        };
        (rc == ffi::SQLITE_OK).then_some(version)
    }

    pub fn is_autocommit(&self) -> bool {
        // SAFETY: as above.
        unsafe { ffi::sqlite3_get_autocommit(self.db) != 0 }
    }

    /// Whether a statement that writes is running on this connection (so
    /// this call runs inside it: a trigger or `INSERT ... SELECT f()`).
    pub fn write_statement_running(&self) -> bool {
        let mut stmt = ptr::null_mut();
        loop {
            // SAFETY: iterating the connection's statements on its own
            // thread; each pointer is only inspected.
            unsafe {
                stmt = ffi::sqlite3_next_stmt(self.db, stmt);
                if stmt.is_null() {
                    return false;
                }
                if ffi::sqlite3_stmt_busy(stmt) != 0 && ffi::sqlite3_stmt_readonly(stmt) == 0 {
                    return true;
                }
            }
        }
    }

    fn errmsg(&self) -> String {
        // SAFETY: sqlite3_errmsg returns a NUL-terminated string owned by the
        // connection, valid until the next call on it; copied at once.
        unsafe {
            let p = ffi::sqlite3_errmsg(self.db);
            if p.is_null() {
                String::from("unknown SQLite error")
            } else {
                CStr::from_ptr(p).to_string_lossy().into_owned()
            }
        }
    }

    fn error(&self, rc: c_int) -> Error {
        // SAFETY: as above.
        let code = unsafe { ffi::sqlite3_extended_errcode(self.db) };
        let code = if code & 0xff == rc & 0xff { code } else { rc };
        sqlite_error(code, self.errmsg())
    }

    /// Runs `f` in the savepoint `honker_nested`: released when `f`
    /// succeeds, rolled back (and released) when it fails, the batched counts
    /// it made with it.
    pub fn in_savepoint<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        self.prepare_cached("SAVEPOINT honker_nested")?
            .execute(&[])?;
        let mark = self.batch().map(|b| (b, b.mark()));
        let result = f();
        if let (Err(_), Some((p, mark))) = (&result, mark) {
            p.rewind(mark);
        }
        self.finish_savepoint(result)
    }

    /// The [`Batch`] that follows this
    /// connection's transactions, if one does.
    pub fn batch(&self) -> Option<&'a dyn Batch> {
        self.cache.and_then(|c| c.batch.get()).map(|b| &**b)
    }

    /// Ends the savepoint `honker_nested` according to `result`.
    pub(crate) fn finish_savepoint<T>(&self, result: Result<T>) -> Result<T> {
        match result {
            Ok(v) => {
                self.prepare_cached("RELEASE honker_nested")?.execute(&[])?;
                Ok(v)
            }
            Err(e) => {
                let _ = self.execute_batch("ROLLBACK TO honker_nested; RELEASE honker_nested");
                Err(e)
            }
        }
    }
}

/// A connection honker opens and owns on whatever SQLite this build reaches:
/// in the loadable extension, the host's library through its function table
/// (the watcher's private reader there, DESIGN §6: the watcher opens nothing
/// but an SQLite connection). Read-write without create: a missing file is an
/// error, not a new empty database.
#[cfg(not(feature = "rusqlite"))]
#[derive(Debug)]
pub(crate) struct OwnedDb {
    db: *mut ffi::sqlite3,
    cache: StmtCache,
}

// SAFETY: the connection is opened NOMUTEX and used by one thread at a time
// (its owner); it moves between threads only whole.
#[cfg(not(feature = "rusqlite"))]
unsafe impl Send for OwnedDb {}

#[cfg(not(feature = "rusqlite"))]
impl OwnedDb {
    pub fn open(path: &std::path::Path, busy_timeout: std::time::Duration) -> Result<OwnedDb> {
        // SQLite takes UTF-8 names everywhere (its Windows VFS converts them
        // to UTF-16); on Unix a name is the path's bytes, whatever they are.
        #[cfg(unix)]
        let bytes = {
            use std::os::unix::ffi::OsStrExt;
            path.as_os_str().as_bytes()
        };
        #[cfg(not(unix))]
        let bytes = path
            .to_str()
            .ok_or_else(|| Error::invalid("a database path must be valid Unicode"))?
            .as_bytes();
        let c_path = CString::new(bytes)
            .map_err(|_| Error::invalid("a database path must not contain NUL"))?;
        let mut db = ptr::null_mut();
        let flags = ffi::SQLITE_OPEN_READWRITE | ffi::SQLITE_OPEN_NOMUTEX;
        // SAFETY: a NUL-terminated path and an out-pointer; on failure SQLite
        // may still hand back a handle, which is closed below.
        let rc = unsafe { ffi::sqlite3_open_v2(c_path.as_ptr(), &mut db, flags, ptr::null()) };
        let owned = OwnedDb {
            db,
            cache: StmtCache::default(),
        };
        if rc != ffi::SQLITE_OK {
            let message = if db.is_null() {
                String::from("out of memory")
            } else {
                owned.raw().errmsg()
            };
            return Err(sqlite_error(
                rc,
                format!("cannot open {}: {message}", path.display()),
            ));
        }
        let ms = c_int::try_from(busy_timeout.as_millis()).unwrap_or(c_int::MAX);
        // SAFETY: the connection is open.
        unsafe { ffi::sqlite3_busy_timeout(db, ms) };
        Ok(owned)
    }

    pub(crate) fn raw(&self) -> Conn<'_> {
        // SAFETY: open, owned by `self`, used by its owner's thread; the
        // cache holds its statements only.
        unsafe { Conn::new(self.db, Some(&self.cache)) }
    }
}

#[cfg(not(feature = "rusqlite"))]
impl Drop for OwnedDb {
    fn drop(&mut self) {
        self.cache.clear();
        if !self.db.is_null() {
            // SAFETY: no statement is live (the cache was cleared, and none
            // is checked out while `self` is being dropped).
            unsafe { ffi::sqlite3_close(self.db) };
        }
    }
}

/// The error for SQLite result code `code` (extended codes allowed).
pub fn sqlite_error(code: c_int, message: String) -> Error {
    let kind = match code & 0xff {
        ffi::SQLITE_BUSY | ffi::SQLITE_LOCKED => ErrorKind::Busy,
        _ => ErrorKind::Sqlite,
    };
    Error::with_sqlite_code(kind, message, code)
}

/// A prepared statement checked out of its connection's cache (or owned).
#[derive(Debug)]
pub struct Stmt<'a> {
    conn: Conn<'a>,
    stmt: *mut ffi::sqlite3_stmt,
    /// The cache key to return the statement under; `None`: finalize on drop.
    key: Option<(usize, usize)>,
}

impl Drop for Stmt<'_> {
    fn drop(&mut self) {
        // SAFETY: the statement is owned by this value until here.
        unsafe {
            ffi::sqlite3_reset(self.stmt);
            match (self.key, self.conn.cache) {
                (Some(key), Some(cache)) => cache
                    .idle
                    .lock()
                    .entry(key)
                    .or_default()
                    .push(StmtPtr(self.stmt)),
                _ => {
                    ffi::sqlite3_finalize(self.stmt);
                }
            }
        }
    }
}

impl Stmt<'_> {
    fn bind(&mut self, params: &[&dyn ToSql]) -> Result<()> {
        // SAFETY: the statement is live.
        let expected = unsafe { ffi::sqlite3_bind_parameter_count(self.stmt) };
        if usize::try_from(expected).ok() != Some(params.len()) {
            return Err(Error::internal(format!(
                "statement takes {expected} parameters, {} given",
                params.len()
            )));
        }
        for (i, p) in params.iter().enumerate() {
            let idx = c_int::try_from(i + 1).unwrap_or(c_int::MAX);
            // SAFETY: values bound with SQLITE_STATIC outlive every step: the
            // caller's `params` borrow lasts the whole call, and `finish`
            // clears the bindings before it returns.
            let rc = unsafe { p.to_sql().bind(self.stmt, idx) };
            if rc != ffi::SQLITE_OK {
                return Err(self.conn.error(rc));
            }
        }
        Ok(())
    }

    /// One step: `true` when a row is available.
    fn step(&mut self) -> Result<bool> {
        // SAFETY: the statement is live.
        match unsafe { ffi::sqlite3_step(self.stmt) } {
            ffi::SQLITE_ROW => Ok(true),
            ffi::SQLITE_DONE => Ok(false),
            rc => Err(self.conn.error(rc)),
        }
    }

    fn finish(&mut self) {
        // SAFETY: the statement is live.
        let steps = unsafe {
            let steps = ffi::sqlite3_stmt_status(self.stmt, ffi::SQLITE_STMTSTATUS_VM_STEP, 1);
            ffi::sqlite3_reset(self.stmt);
            ffi::sqlite3_clear_bindings(self.stmt);
            steps
        };
        VM_STEPS.with(|c| c.set(c.get() + u64::try_from(steps).unwrap_or(0)));
    }

    /// Runs the statement to completion; returns the rows it changed.
    pub fn execute(&mut self, params: &[&dyn ToSql]) -> Result<usize> {
        let result = self.bind(params).and_then(|()| {
            while self.step()? {}
            // SAFETY: the connection is open.
            Ok(unsafe { ffi::sqlite3_changes(self.conn.db) })
        });
        self.finish();
        Ok(usize::try_from(result?).unwrap_or(0))
    }

    /// The first row mapped by `f`, if there is one.
    pub fn query_row<T>(
        &mut self,
        params: &[&dyn ToSql],
        f: impl FnOnce(&Row<'_>) -> Result<T>,
    ) -> Result<Option<T>> {
        let result = self.bind(params).and_then(|()| {
            if self.step()? {
                f(&Row::new(self.stmt)).map(Some)
            } else {
                Ok(None)
            }
        });
        self.finish();
        result
    }

    /// The first row mapped by `f`, for queries that always return one.
    pub fn query_one<T>(
        &mut self,
        params: &[&dyn ToSql],
        f: impl FnOnce(&Row<'_>) -> Result<T>,
    ) -> Result<T> {
        self.query_row(params, f)?
            .ok_or_else(|| Error::internal("a query that always returns a row returned none"))
    }

    /// Every row mapped by `f`.
    pub fn query_map<T>(
        &mut self,
        params: &[&dyn ToSql],
        mut f: impl FnMut(&Row<'_>) -> Result<T>,
    ) -> Result<Vec<T>> {
        let result = self.bind(params).and_then(|()| {
            let mut out = Vec::new();
            while self.step()? {
                out.push(f(&Row::new(self.stmt))?);
            }
            Ok(out)
        });
        self.finish();
        result
    }
}

/// The current row of a statement.
#[derive(Debug)]
pub struct Row<'s> {
    stmt: *mut ffi::sqlite3_stmt,
    _life: std::marker::PhantomData<&'s ()>,
}

impl Row<'_> {
    fn new<'s>(stmt: *mut ffi::sqlite3_stmt) -> Row<'s> {
        Row {
            stmt,
            _life: std::marker::PhantomData,
        }
    }

    /// Column `i` converted to `T`. A value of the wrong type (a row
    /// damaged by hand or by another program) is `SQLITE` with
    /// `SQLITE_CORRUPT`, naming the column.
    pub fn get<T: FromSql>(&self, i: usize) -> Result<T> {
        self.decode(i).map_err(Damage::into_error)
    }

    /// Column `i` converted to `T`, or what is wrong with it.
    pub fn decode<T: FromSql>(&self, i: usize) -> std::result::Result<T, Damage> {
        let idx = c_int::try_from(i).unwrap_or(c_int::MAX);
        // SAFETY: the statement is positioned on a row; the borrowed value is
        // converted before the next step.
        let value = unsafe { ValueRef::column(self.stmt, idx) };
        T::from_sql(value).map_err(|expected| Damage {
            // SAFETY: as above; the name is copied at once.
            column: unsafe {
                let name = ffi::sqlite3_column_name(self.stmt, idx);
                if name.is_null() {
                    format!("column {i}")
                } else {
                    CStr::from_ptr(name).to_string_lossy().into_owned()
                }
            },
            found: value.kind(),
            expected,
        })
    }
}

/// A stored value of the wrong type for its column.
#[derive(Debug)]
pub struct Damage {
    pub column: String,
    /// SQLite's name of the type found (`TEXT`, `REAL`, ...).
    pub found: &'static str,
    pub expected: &'static str,
}

impl Damage {
    pub(crate) fn into_error(self) -> Error {
        Error::with_sqlite_code(
            ErrorKind::Sqlite,
            format!(
                "damaged row: {} holds {}, expected {}",
                self.column, self.found, self.expected
            ),
            ffi::SQLITE_CORRUPT,
        )
    }
}

/// A value read from SQLite, borrowed until the next step.
#[derive(Clone, Copy, Debug)]
pub enum ValueRef<'v> {
    Null,
    Integer(i64),
    Real(f64),
    Text(&'v [u8]),
    Blob(&'v [u8]),
}

impl ValueRef<'_> {
    /// # Safety
    /// `stmt` must be positioned on a row with column `i`.
    unsafe fn column<'v>(stmt: *mut ffi::sqlite3_stmt, i: c_int) -> ValueRef<'v> {
        // SAFETY: per the contract; text/blob pointers stay valid until the
        // statement steps, resets or the column is converted again.
        unsafe {
            match ffi::sqlite3_column_type(stmt, i) {
                ffi::SQLITE_INTEGER => ValueRef::Integer(ffi::sqlite3_column_int64(stmt, i)),
                ffi::SQLITE_FLOAT => ValueRef::Real(ffi::sqlite3_column_double(stmt, i)),
                ffi::SQLITE_TEXT => {
                    let p = ffi::sqlite3_column_text(stmt, i);
                    let n = ffi::sqlite3_column_bytes(stmt, i);
                    ValueRef::Text(bytes(p.cast(), n))
                }
                ffi::SQLITE_BLOB => {
                    let p = ffi::sqlite3_column_blob(stmt, i);
                    let n = ffi::sqlite3_column_bytes(stmt, i);
                    ValueRef::Blob(bytes(p.cast(), n))
                }
                _ => ValueRef::Null,
            }
        }
    }

    /// # Safety
    /// `v` must be a protected value valid for `'v` (a function argument).
    pub unsafe fn value<'v>(v: *mut ffi::sqlite3_value) -> ValueRef<'v> {
        // SAFETY: per the contract.
        unsafe {
            match ffi::sqlite3_value_type(v) {
                ffi::SQLITE_INTEGER => ValueRef::Integer(ffi::sqlite3_value_int64(v)),
                ffi::SQLITE_FLOAT => ValueRef::Real(ffi::sqlite3_value_double(v)),
                ffi::SQLITE_TEXT => {
                    let p = ffi::sqlite3_value_text(v);
                    let n = ffi::sqlite3_value_bytes(v);
                    ValueRef::Text(bytes(p.cast(), n))
                }
                ffi::SQLITE_BLOB => {
                    let p = ffi::sqlite3_value_blob(v);
                    let n = ffi::sqlite3_value_bytes(v);
                    ValueRef::Blob(bytes(p.cast(), n))
                }
                _ => ValueRef::Null,
            }
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            ValueRef::Null => "NULL",
            ValueRef::Integer(_) => "INTEGER",
            ValueRef::Real(_) => "REAL",
            ValueRef::Text(_) => "TEXT",
            ValueRef::Blob(_) => "BLOB",
        }
    }

    /// Binds this value as parameter `idx`.
    ///
    /// # Safety
    /// Text and blob bytes are bound without copying: they must stay valid
    /// until the statement is reset or rebound.
    unsafe fn bind(self, stmt: *mut ffi::sqlite3_stmt, idx: c_int) -> c_int {
        // SAFETY: per the contract.
        unsafe {
            match self {
                ValueRef::Null => ffi::sqlite3_bind_null(stmt, idx),
                ValueRef::Integer(n) => ffi::sqlite3_bind_int64(stmt, idx, n),
                ValueRef::Real(f) => ffi::sqlite3_bind_double(stmt, idx, f),
                ValueRef::Text(t) => match c_int::try_from(t.len()) {
                    Ok(n) => ffi::sqlite3_bind_text(
                        stmt,
                        idx,
                        t.as_ptr().cast(),
                        n,
                        ffi::SQLITE_STATIC(),
                    ),
                    Err(_) => ffi::SQLITE_TOOBIG,
                },
                ValueRef::Blob(b) => match c_int::try_from(b.len()) {
                    Ok(n) => ffi::sqlite3_bind_blob(
                        stmt,
                        idx,
                        b.as_ptr().cast(),
                        n,
                        ffi::SQLITE_STATIC(),
                    ),
                    Err(_) => ffi::SQLITE_TOOBIG,
                },
            }
        }
    }
}

/// # Safety
/// `p` must point to `n` readable bytes valid for `'v` (or be null/empty).
unsafe fn bytes<'v>(p: *const u8, n: c_int) -> &'v [u8] {
    match usize::try_from(n) {
        // SAFETY: per the contract.
        Ok(n) if n > 0 && !p.is_null() => unsafe { std::slice::from_raw_parts(p, n) },
        _ => &[],
    }
}

/// A Rust value that can be bound as a parameter.
pub trait ToSql {
    fn to_sql(&self) -> ValueRef<'_>;
}

impl ToSql for i64 {
    fn to_sql(&self) -> ValueRef<'_> {
        ValueRef::Integer(*self)
    }
}

impl ToSql for i32 {
    fn to_sql(&self) -> ValueRef<'_> {
        ValueRef::Integer(i64::from(*self))
    }
}

impl ToSql for u32 {
    fn to_sql(&self) -> ValueRef<'_> {
        ValueRef::Integer(i64::from(*self))
    }
}

impl ToSql for f64 {
    fn to_sql(&self) -> ValueRef<'_> {
        ValueRef::Real(*self)
    }
}

impl ToSql for str {
    fn to_sql(&self) -> ValueRef<'_> {
        ValueRef::Text(self.as_bytes())
    }
}

impl ToSql for String {
    fn to_sql(&self) -> ValueRef<'_> {
        ValueRef::Text(self.as_bytes())
    }
}

impl ToSql for Payload {
    fn to_sql(&self) -> ValueRef<'_> {
        match self {
            Payload::Json(s) => ValueRef::Text(s.as_bytes()),
            Payload::Bytes(b) => ValueRef::Blob(b),
        }
    }
}

impl<T: ToSql + ?Sized> ToSql for &T {
    fn to_sql(&self) -> ValueRef<'_> {
        (**self).to_sql()
    }
}

impl<T: ToSql> ToSql for Option<T> {
    fn to_sql(&self) -> ValueRef<'_> {
        match self {
            Some(v) => v.to_sql(),
            None => ValueRef::Null,
        }
    }
}

/// A Rust value that can be read from a column; the error names what was
/// expected.
pub trait FromSql: Sized {
    fn from_sql(v: ValueRef<'_>) -> Result<Self, &'static str>;
}

impl FromSql for i64 {
    fn from_sql(v: ValueRef<'_>) -> Result<i64, &'static str> {
        match v {
            ValueRef::Integer(n) => Ok(n),
            _ => Err("INTEGER"),
        }
    }
}

impl FromSql for i32 {
    fn from_sql(v: ValueRef<'_>) -> Result<i32, &'static str> {
        i64::from_sql(v).and_then(|n| i32::try_from(n).map_err(|_| "a 32-bit INTEGER"))
    }
}

impl FromSql for u32 {
    fn from_sql(v: ValueRef<'_>) -> Result<u32, &'static str> {
        i64::from_sql(v).and_then(|n| u32::try_from(n).map_err(|_| "an unsigned 32-bit INTEGER"))
    }
}

impl FromSql for bool {
    fn from_sql(v: ValueRef<'_>) -> Result<bool, &'static str> {
        i64::from_sql(v).map(|n| n != 0)
    }
}

impl FromSql for f64 {
    fn from_sql(v: ValueRef<'_>) -> Result<f64, &'static str> {
        match v {
            ValueRef::Real(f) => Ok(f),
            ValueRef::Integer(n) => Ok(n as f64),
            _ => Err("REAL"),
        }
    }
}

impl FromSql for String {
    fn from_sql(v: ValueRef<'_>) -> Result<String, &'static str> {
        match v {
            ValueRef::Text(t) => std::str::from_utf8(t)
                .map(str::to_owned)
                .map_err(|_| "UTF-8 TEXT"),
            _ => Err("TEXT"),
        }
    }
}

impl FromSql for Payload {
    fn from_sql(v: ValueRef<'_>) -> Result<Payload, &'static str> {
        Ok(match v {
            ValueRef::Text(t) => {
                Payload::Json(std::str::from_utf8(t).map_err(|_| "UTF-8 TEXT")?.to_owned())
            }
            ValueRef::Blob(b) => Payload::Bytes(b.to_vec()),
            // Written by hand through SQL: keep the number as JSON.
            ValueRef::Integer(i) => Payload::Json(i.to_string()),
            ValueRef::Real(f) => Payload::Json(f.to_string()),
            ValueRef::Null => Payload::Json("null".into()),
        })
    }
}

impl<T: FromSql> FromSql for Option<T> {
    fn from_sql(v: ValueRef<'_>) -> Result<Option<T>, &'static str> {
        match v {
            ValueRef::Null => Ok(None),
            v => T::from_sql(v).map(Some),
        }
    }
}
