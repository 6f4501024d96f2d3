//! Opening SQLite connections the one way honker uses them: the pragmas, in one
//! commented place, and a busy handler that waits fairly.
//!
//! Invariants:
//! - every connection to a honker file (writer, readers, the watcher's, the
//!   checkpointer's) is opened here, so they all share the same settings;
//! - readers and the watcher's connection are `query_only`: they cannot write
//!   even by mistake.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rusqlite::config::DbConfig;
use rusqlite::{Connection, OpenFlags};

use crate::checkpoint::Checkpointer;
use crate::options::Durability;
use crate::raw::{Conn, StmtCache};

use crate::error::{is_busy, Error, Result};

pub use crate::raw::Batch;

/// Pragmas applied once to a database file and to every writer connection.
///
/// - `journal_mode=WAL`: readers never block the writer nor the writer
///   readers; required for the change watcher (`data_version`) to be cheap.
/// - `synchronous`: NORMAL (the default; survives process crashes, may lose
///   the last commits on power loss) or FULL (fsync per commit). See
///   [`Durability`].
/// - `foreign_keys=ON`: applications running their own SQL through
///   `tx.execute` get the foreign-key enforcement they declared. honker's own
///   tables declare none.
/// - `journal_size_limit`: after a checkpoint the WAL file is truncated back to
///   64 MiB instead of keeping the size of its largest burst.
/// - no `wal_autocheckpoint`: the writer's WAL hook replaces it and runs
///   checkpoints on a background thread ([`crate::checkpoint`]).
fn writer_pragmas(durability: Durability) -> String {
    let sync = match durability {
        Durability::Normal => "NORMAL",
        Durability::Full => "FULL",
    };
    format!(
        "PRAGMA synchronous = {sync};
         PRAGMA foreign_keys = ON;
         PRAGMA journal_size_limit = 67108864;"
    )
}

/// Opens the connection that runs background checkpoints
/// ([`crate::checkpoint`]): the writer's `synchronous`, which decides the
/// checkpoint's fsyncs.
pub fn open_checkpointer(
    path: &Path,
    busy_timeout: Duration,
    durability: Durability,
) -> Result<HConn> {
    let conn = open_raw(path, busy_timeout)?;
    conn.execute_batch(&writer_pragmas(durability))?;
    Ok(HConn::new(conn))
}

/// Pragmas for read-only connections (readers, watcher).
const READER_PRAGMAS: &str = "PRAGMA query_only = ON;";

/// Opens the writer connection. Does not switch the file to WAL: that is a
/// write, done by [`enable_wal`] after the schema version has been checked.
///
/// Every connection uses the process's default VFS, so an application's
/// encrypting or custom VFS covers honker's writes too (ADR 10 says why the
/// writer no longer has a VFS of its own).
pub fn open_writer(path: &Path, busy_timeout: Duration, durability: Durability) -> Result<HConn> {
    let conn = open_raw(path, busy_timeout)?;
    conn.execute_batch(&writer_pragmas(durability))?;
    Ok(HConn::new(conn))
}

/// Opens a read-only connection on an existing honker file.
pub(crate) fn open_reader(path: &Path, busy_timeout: Duration) -> Result<HConn> {
    let conn = open_raw(path, busy_timeout)?;
    conn.execute_batch(READER_PRAGMAS)?;
    Ok(HConn::new(conn))
}

/// One of honker's own connections: rusqlite for the application's SQL, and
/// the statement cache the protocol code (`raw`) uses on the same handle.
#[derive(Debug)]
pub struct HConn {
    cache: Arc<StmtCache>,
    /// `None` only after [`HConn::close`].
    conn: Option<Connection>,
    /// The writer's checkpointer: the context of its WAL hook, so it lives
    /// as long as the connection (dropped after `conn`).
    checkpointer: Option<Arc<Checkpointer>>,
    /// The writer's [`Batch`]: the context of its rollback hook (boxed, so
    /// that the hook's context is one thin pointer; dropped after `conn`).
    batch: Option<Box<Arc<dyn Batch>>>,
}

impl HConn {
    fn new(conn: Connection) -> HConn {
        HConn {
            cache: Arc::new(StmtCache::default()),
            conn: Some(conn),
            checkpointer: None,
            batch: None,
        }
    }

    /// Follows this (writer) connection's transactions with `batch`:
    /// SQLite's WAL hook (the checkpointer's, installed first) tells it of
    /// each commit, its rollback hook of each rollback.
    pub fn install_batch(&mut self, batch: Arc<dyn Batch>) {
        let Some(checkpointer) = &self.checkpointer else {
            return; // no commit hook: counts stay exact
        };
        checkpointer.count_into(Arc::clone(&batch));
        let _ = self.cache.batch.set(Arc::clone(&batch));
        let boxed = Box::new(batch);
        // SAFETY: the handle is open; the context (the box's content) stays
        // valid while the connection lives (`self.batch`, dropped after
        // `conn`).
        unsafe {
            rusqlite::ffi::sqlite3_rollback_hook(
                self.sql().handle(),
                Some(rolled_back),
                std::ptr::from_ref::<Arc<dyn Batch>>(&*boxed)
                    .cast_mut()
                    .cast(),
            );
        }
        self.batch = Some(boxed);
    }

    /// The writer's [`Batch`], if one follows it.
    pub fn batch(&self) -> Option<&dyn Batch> {
        self.batch.as_deref().map(|b| &**b)
    }

    /// Before a COMMIT of honker's: the batch's committed counts, when they
    /// are due, go with it (a failure leaves them for the next).
    pub(crate) fn flush_counts_if_due(&self) {
        if let Some(b) = self.batch().filter(|b| b.due()) {
            let _ = b.flush(self.raw());
        }
    }

    /// Hands this (writer) connection's checkpoints to `checkpointer`.
    pub(crate) fn install_checkpointer(&mut self, checkpointer: Arc<Checkpointer>) {
        checkpointer.install(self.sql());
        self.checkpointer = Some(checkpointer);
    }

    /// The connection, for SQL the application wrote.
    pub fn sql(&self) -> &Connection {
        self.conn.as_ref().expect("connection present until closed")
    }

    /// The connection as the protocol code sees it.
    pub fn raw(&self) -> Conn<'_> {
        // SAFETY: the handle is open while `self` lives, and the cache holds
        // statements of this connection only.
        unsafe { Conn::new(self.sql().handle(), Some(&self.cache)) }
    }

    /// The statement cache, shared with the SQL functions on this connection.
    pub fn cache(&self) -> &Arc<StmtCache> {
        &self.cache
    }

    /// Finalizes cached statements, then closes the connection.
    pub fn close(mut self) -> Result<()> {
        self.cache.clear();
        match self.conn.take() {
            Some(conn) => conn.close().map_err(|(_, e)| Error::from(e)),
            None => Ok(()),
        }
    }
}

unsafe extern "C" fn rolled_back(ctx: *mut std::ffi::c_void) {
    // SAFETY: `ctx` is the boxed `Arc<dyn Batch>` installed with the hook,
    // alive while the connection is (see `install_batch`); borrowed.
    let batch = unsafe { &*(ctx as *const Arc<dyn Batch>) };
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| batch.rolled_back()));
}

impl Drop for HConn {
    fn drop(&mut self) {
        // Before the connection (dropped after this body) is closed.
        self.cache.clear();
    }
}

/// The oldest SQLite honker runs on (`STRICT` tables need 3.37,
/// `sqlite3_db_name` 3.39): what a build on the system library (without the
/// `bundled` feature) can meet. Tested here on 3.40.1 (Debian 12), 3.46.1
/// (Debian 13, the Swift chroot) and the bundled copy.
pub(crate) const MIN_SQLITE: i32 = 3_039_000;

/// Checks the library this process runs: a coded error, never a failure on
/// the first statement that needs a newer SQLite.
pub(crate) fn check_sqlite_version(number: i32) -> Result<()> {
    if number >= MIN_SQLITE {
        return Ok(());
    }
    let v = |n: i32| format!("{}.{}.{}", n / 1_000_000, n / 1000 % 1000, n % 1000);
    Err(Error::new(
        crate::error::ErrorKind::Sqlite,
        format!(
            "honker needs SQLite {} or newer; this process's SQLite library is {}",
            v(MIN_SQLITE),
            v(number)
        ),
    ))
}

fn open_raw(path: &Path, busy_timeout: Duration) -> Result<Connection> {
    check_sqlite_version(rusqlite::version_number())?;
    // Before the first connection: honker's SQLite next to another SQLite
    // library in the process (ADR 13).
    #[cfg(all(feature = "bundled", target_os = "linux"))]
    crate::ofd::install();
    // NO_MUTEX: every connection is used by one thread at a time (behind a
    // mutex or checked out of the pool), so SQLite's own mutex is redundant.
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let mut conn = Connection::open_with_flags(path, flags)?;
    // The query planner stability guarantee: plans never depend on bound
    // values. Without it, SQLite checks parameters against the partial
    // indexes' WHERE clauses and then re-prepares the statement every time
    // such a parameter is bound again (every claim re-prepared its PICK).
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
    install_busy_handler(&mut conn, busy_timeout)?;
    conn.set_prepared_statement_cache_capacity(64);
    Ok(conn)
}

/// Switches the file to WAL mode. Changing the journal mode needs a moment of
/// exclusive access, which SQLite reports as BUSY without calling the busy
/// handler, so several processes opening a new file at once retry here.
pub(crate) fn enable_wal(conn: &Connection, busy_timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + busy_timeout;
    let mut backoff = Backoff::new();
    loop {
        match conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0)) {
            Ok(mode) if mode.eq_ignore_ascii_case("wal") => return Ok(()),
            Ok(mode) => {
                return Err(Error::invalid(format!(
                    "the file cannot use WAL journaling (journal_mode stayed {mode}); \
                     honker needs a file on a local disk, not :memory: or a temporary database"
                )))
            }
            Err(e) if is_busy(&e) && Instant::now() < deadline => backoff.sleep(),
            Err(e) => return Err(e.into()),
        }
    }
}

/// SQLite's default busy handler sleeps 1, 2, 5, ... up to 100 ms between
/// tries, so a waiter that has slept long loses the lock to newcomers again and
/// again (on a slow disk, for seconds). This one retries after jittered sleeps
/// of 0.5 ms doubling to at most 4 ms, until `timeout` has passed since the
/// first try, so no waiter falls far behind. Shorter first sleeps were
/// measured (bench W5, 4 processes on 2 cores) to lose a quarter of the
/// throughput to wake-ups; these match or beat the default handler.
fn install_busy_handler(conn: &mut Connection, timeout: Duration) -> Result<()> {
    // The timeout travels in the handler's argument (an integer, never
    // dereferenced) and the episode's start in a thread-local: no state to
    // own or free. SQLite's own API, not rusqlite's `busy_handler`, which
    // needs `sqlite3_set_clientdata` (3.44) and so a newer SQLite than the
    // system libraries honker must also run on (Debian 12's 3.40, Apple's).
    let ms = usize::try_from(timeout.as_millis()).unwrap_or(usize::MAX);
    // SAFETY: the handle is open and owned by `conn`; `busy_wait` never
    // dereferences its argument.
    let rc = unsafe {
        rusqlite::ffi::sqlite3_busy_handler(
            conn.handle(),
            Some(busy_wait),
            std::ptr::without_provenance_mut(ms),
        )
    };
    if rc != rusqlite::ffi::SQLITE_OK {
        return Err(crate::raw::sqlite_error(
            rc,
            "could not set the busy handler".into(),
        ));
    }
    Ok(())
}

thread_local! {
    /// When this thread's current busy episode began, and its backoff.
    static BUSY: std::cell::RefCell<(Instant, Backoff)> =
        std::cell::RefCell::new((Instant::now(), Backoff::new()));
}

/// SQLite's busy handler: true (non-zero) to try the lock again. `count` is 0
/// at the first call of each episode; `arg` is the timeout in ms.
unsafe extern "C" fn busy_wait(
    arg: *mut std::ffi::c_void,
    count: std::ffi::c_int,
) -> std::ffi::c_int {
    if waiting_forbidden() {
        return 0;
    }
    let timeout = Duration::from_millis(u64::try_from(arg.addr()).unwrap_or(u64::MAX));
    BUSY.with(|b| {
        let mut b = b.borrow_mut();
        if count == 0 {
            *b = (Instant::now(), Backoff::new());
        }
        if b.0.elapsed() >= timeout {
            return 0;
        }
        b.1.sleep();
        1
    })
}

thread_local! {
    static NO_WAIT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` on this thread without waiting for any lock: where a call would
/// wait (for this process's writer, another process's write lock, or a free
/// reader) it fails at once with `BUSY` instead, having changed nothing.
///
/// For bindings whose callers must never block (Node's event loop): they try
/// a short call this way on the caller's thread and, on `BUSY`, run it again
/// on a thread that may wait. Calls that wait by design (a claim with
/// `ClaimOptions::wait`, `wait_result`) must not be made this way.
pub fn without_waiting<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            NO_WAIT.with(|w| w.set(self.0));
        }
    }
    let _reset = Reset(NO_WAIT.with(|w| w.replace(true)));
    f()
}

/// [`without_waiting`] for a host that cannot pass a closure through its
/// FFI (Swift, through UniFFI): sets this thread's flag and returns the one
/// it replaces, which the caller must restore on the same thread after its
/// call (before anything else runs there).
pub fn set_waiting_forbidden(forbidden: bool) -> bool {
    NO_WAIT.with(|w| w.replace(forbidden))
}

/// Refuses, with `INVALID_ARGUMENT`, a call that waits by design (`what`)
/// inside [`without_waiting`].
pub fn refuse_waiting(what: &str) -> Result<()> {
    if waiting_forbidden() {
        return Err(Error::invalid(format!(
            "{what} waits by design: it cannot run inside without_waiting"
        )));
    }
    Ok(())
}

/// Whether this thread is inside [`without_waiting`] (for bindings that keep
/// locks of their own and must not wait on them there either).
pub fn waiting_forbidden() -> bool {
    NO_WAIT.with(std::cell::Cell::get)
}

#[derive(Debug)]
pub(crate) struct Backoff {
    next_us: u64,
}

impl Backoff {
    const FIRST_US: u64 = 500;
    const MAX_US: u64 = 4_000;

    pub(crate) fn new() -> Backoff {
        Backoff {
            next_us: Self::FIRST_US,
        }
    }

    pub(crate) fn sleep(&mut self) {
        let us = self.next_us / 2 + fastrand::u64(0..=self.next_us / 2);
        std::thread::sleep(Duration::from_micros(us));
        self.next_us = (self.next_us * 2).min(Self::MAX_US);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_sqlite_older_than_the_minimum_is_refused_with_both_versions_named() {
        let e = check_sqlite_version(3_036_000).unwrap_err();
        assert_eq!(e.code(), "SQLITE");
        assert!(
            e.message().contains("needs SQLite 3.39.0 or newer")
                && e.message().contains("library is 3.36.0"),
            "{e}"
        );
        check_sqlite_version(MIN_SQLITE).unwrap();
        check_sqlite_version(rusqlite::version_number()).unwrap();
    }
}
