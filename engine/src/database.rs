//! [`Database`]: an open honker file. Owns the one writer connection, the
//! reader pool, the checkpointer (`crate::checkpoint`) and a reference to the
//! file's shared watcher, and runs every write through [`Inner::write`].
//!
//! Invariants:
//! - one writer connection per `Database`; every write transaction is
//!   `BEGIN IMMEDIATE`, so a transaction never upgrades from read to write
//!   (no `SQLITE_BUSY_SNAPSHOT` surprises) and writers of this process queue
//!   on an in-process mutex instead of spinning on SQLite's lock;
//! - a honker verb run inside a caller's [`Transaction`] is wrapped in a
//!   savepoint: if it fails, it changes nothing, and the caller's own work in
//!   that transaction is untouched;
//! - after each commit, waiters in this process are woken directly;
//! - `close` (or the last drop) joins the checkpoint thread before the writer
//!   closes;
//! - a `Database` belongs to the process that opened it: after `fork()`, the
//!   child's copy refuses every call (`CLOSED`) and, when dropped, abandons
//!   its copies of the connections without closing them, which would touch
//!   the parent's file state (SQLite forbids carrying a connection across
//!   `fork()`); and the child opens no file at all (`crate::fork`).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::lock_api::ArcMutexGuard;
use parking_lot::{Mutex, RawMutex};
use rusqlite::types::Value;
use rusqlite::{Connection, Params};

use crate::checkpoint::Checkpointer;
use crate::clock::duration_ms;
use crate::connection::{enable_wal, open_writer, Batch, HConn};
use crate::error::{Error, ErrorKind, Result};
use crate::fork::{self, Live};
use crate::migrate::{self, Schema};
pub use crate::options::{Durability, Options};
use crate::pool::{Pool, Reader};
use crate::transaction::Transaction;
use crate::watcher::{watcher_for, Signal, Watcher};

pub(crate) type WriterGuard = ArcMutexGuard<RawMutex, Option<HConn>>;

/// What the layers above bring to [`Database::open`].
pub struct Setup<'a> {
    /// The tables to migrate to, and the files to refuse before writing.
    pub schema: &'a Schema,
    /// Run on the writer once it is migrated and before anyone else uses
    /// it (honker's SQL functions are registered here).
    pub on_writer: &'a dyn Fn(&HConn) -> Result<()>,
    /// Counts that follow the writer's transactions (see [`Batch`]).
    pub batch: Option<Arc<dyn Batch>>,
}

impl std::fmt::Debug for Setup<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Setup")
            .field("schema", &self.schema)
            .field("batch", &self.batch.is_some())
            .finish_non_exhaustive()
    }
}

/// Called after a commit of this database's writer when `every` has passed
/// since the last call (or since [`Database::mark_maintained`]): the
/// layers above run a slice of maintenance there.
struct AfterCommit {
    every: i64,
    run: Box<dyn Fn() + Send + Sync>,
}

impl std::fmt::Debug for AfterCommit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AfterCommit")
            .field("every", &self.every)
            .finish_non_exhaustive()
    }
}

/// An open honker database file: the engine's handle. Cheap to clone;
/// clones share connections. `Send + Sync`. Applications use
/// `honker::Database`, which wraps it.
#[derive(Clone, Debug)]
pub struct Database {
    inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    path: PathBuf,
    options: Options,
    writer: Arc<Mutex<Option<HConn>>>,
    readers: Pool,
    /// The file's watcher, given back by `close` (its thread stops with the
    /// last open of the file in this process).
    watcher: Mutex<Option<Arc<Watcher>>>,
    signal: Arc<Signal>,
    /// Counts this database as open for `crate::fork` until `close`.
    live: Mutex<Option<Live>>,
    pub(crate) checkpointer: Arc<Checkpointer>,
    closed: AtomicBool,
    /// The process that opened it.
    pid: u32,
    /// Token of the thread that holds an open [`Transaction`], or 0.
    tx_owner: AtomicU64,
    last_maintain: AtomicI64,
    after_commit: std::sync::OnceLock<AfterCommit>,
    write_transactions: AtomicU64,
    /// What the layers above keep per open database, one value per type.
    slots: Mutex<Vec<Arc<dyn std::any::Any + Send + Sync>>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if self.pid != std::process::id() {
            // A forked copy: closing would checkpoint or unlock the parent's
            // file through descriptors the two processes share. Leak them.
            // (`try_lock`: a forgotten transaction's guard may hold it.)
            if let Some(mut w) = self.writer.try_lock() {
                std::mem::forget(w.take());
            }
            self.readers.abandon();
        } else {
            self.checkpointer.stop();
        }
    }
}

/// Rows returned by [`Database::query`] and [`Transaction::query`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Rows {
    /// Column names, in order.
    pub columns: Vec<String>,
    /// One `Vec` of values per row, in column order.
    pub rows: Vec<Vec<Value>>,
}

/// What SQLite would only report as "unable to open database file", or as a
/// failure at the first write, named at `open`: the file must be a regular
/// file (or not exist yet) that this process can read and write, in an
/// existing directory it can write (SQLite creates `-wal` and `-shm` there)
/// unless both are already there and writable.
/// Only `stat(2)`/`access(2)`: nothing is opened (DESIGN §6); on Windows
/// only the read-only attribute (`crate::fsaccess`).
fn check_path(path: &Path) -> Result<()> {
    use crate::fsaccess::{dir_of, may_create_in, may_read_write};
    let cannot = |why: String| {
        Err(Error::invalid(format!(
            "cannot open {}: {why}",
            path.display()
        )))
    };
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => {
            return cannot("it is a directory; give a file path such as app.db".into())
        }
        Ok(m) if !m.is_file() => {
            return cannot("it is not a regular file (a device, pipe or socket)".into())
        }
        Ok(_) if !may_read_write(path) => {
            return cannot(
                "the file is read-only for this process (honker writes to every file it \
                 opens; check its owner and mode)"
                    .into(),
            )
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return cannot(e.to_string()),
    }
    let dir = dir_of(path);
    if !dir.is_dir() {
        return cannot(format!("its directory {} does not exist", dir.display()));
    }
    // An unwritable directory works when the -wal and -shm files are already
    // there and writable (SQLite then only cannot remove them at close).
    let beside = |suffix: &str| {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        may_read_write(Path::new(&p))
    };
    let writable_dir = may_create_in(dir);
    if !(writable_dir || beside("-wal") && beside("-shm")) {
        return cannot(format!(
            "its directory {} is not writable by this process, and SQLite creates the \
             -wal and -shm files next to the database",
            dir.display()
        ));
    }
    Ok(())
}

impl Database {
    /// Opens (creating if needed) the database file at `path`: switches it to
    /// WAL mode and applies `setup`'s migrations (safe when several processes
    /// do so at once). The application's own tables and `user_version` are
    /// left alone. `options` are already validated (`honker::Options`).
    ///
    /// Fails with `INVALID_ARGUMENT` for a path that is not a file on disk
    /// (`:memory:`, empty), a directory, a device, a file this process cannot
    /// write, a missing or unwritable directory (each named in the message),
    /// and `SCHEMA_TOO_NEW`, before writing anything, if a newer honker has
    /// already upgraded the file; with `UNSAFE`, before any call into SQLite,
    /// in a process forked from one that had honker open
    /// ([`crate::fork::forked_while_open`]), and with whatever the schema's
    /// `refuse` says of the file before anything is written.
    pub fn open(path: impl AsRef<Path>, options: Options, setup: Setup<'_>) -> Result<Database> {
        fork::check_open_allowed()?;
        let path = path.as_ref();
        let text = path.as_os_str().to_string_lossy();
        if text.is_empty() || text == ":memory:" || text.starts_with("file:") {
            return Err(Error::invalid(format!(
                "honker needs a database file on a local disk, got {text:?} \
                 (no :memory: or URI filenames: other processes must be able to open it)"
            )));
        }
        check_path(path)?;
        // Linux's lock layer keeps another SQLite library in the process
        // apart (ADR 13); other Unixes refuse a file one has open (ADR 30).
        #[cfg(all(unix, not(target_os = "linux"), feature = "bundled"))]
        crate::exclusive::check(path)?;
        let live = Live::new();
        let mut writer = open_writer(path, options.busy_timeout, options.durability)?;
        #[cfg(all(feature = "bundled", target_os = "linux"))]
        crate::ofd::check_exclusive(path)?;
        migrate::check_not_too_new(writer.raw(), setup.schema)?;
        // Before anything is written (the journal mode included).
        (setup.schema.refuse)(writer.raw())?;
        enable_wal(writer.sql(), options.busy_timeout)?;
        migrate::migrate(writer.raw(), setup.schema, options.clock.now_ms())?;
        (setup.on_writer)(&writer)?;
        let path = std::fs::canonicalize(path)
            .map_err(|e| Error::invalid(format!("cannot resolve {}: {e}", path.display())))?;
        let watcher = watcher_for(&path, options.busy_timeout, options.watch_fallback);
        let checkpointer =
            Checkpointer::new(path.clone(), options.busy_timeout, options.durability);
        writer.install_checkpointer(Arc::clone(&checkpointer));
        if let Some(batch) = setup.batch {
            writer.install_batch(batch);
        }
        let now = options.clock.now_ms();
        Ok(Database {
            inner: Arc::new(Inner {
                readers: Pool::new(path.clone(), options.readers, options.busy_timeout),
                path,
                writer: Arc::new(Mutex::new(Some(writer))),
                signal: Arc::clone(watcher.signal()),
                watcher: Mutex::new(Some(watcher)),
                live: Mutex::new(Some(live)),
                checkpointer,
                closed: AtomicBool::new(false),
                pid: std::process::id(),
                tx_owner: AtomicU64::new(0),
                last_maintain: AtomicI64::new(now),
                after_commit: std::sync::OnceLock::new(),
                write_transactions: AtomicU64::new(0),
                slots: Mutex::new(Vec::new()),
                options,
            }),
        })
    }

    /// After a commit of this database, once `every` has passed since the
    /// last run (or [`mark_maintained`](Self::mark_maintained)): `run`. Set
    /// once; a zero `every` never runs it.
    #[doc(hidden)]
    pub fn after_commits(&self, every: Duration, run: Box<dyn Fn() + Send + Sync>) {
        let _ = self.inner.after_commit.set(AfterCommit {
            every: duration_ms(every),
            run,
        });
    }

    /// This database's value of type `T` (made by `init` the first time):
    /// what a layer above keeps per open database without the engine naming
    /// it (a rate limiter's reserved starts, the keep-alives' timer).
    pub fn slot<T: std::any::Any + Send + Sync>(&self, init: impl FnOnce() -> T) -> Arc<T> {
        let mut slots = self.inner.slots.lock();
        if let Some(found) = slots.iter().find(|s| (***s).is::<T>()) {
            if let Ok(found) = Arc::clone(found).downcast::<T>() {
                return found;
            }
        }
        let made = Arc::new(init());
        slots.push(Arc::clone(&made) as Arc<dyn std::any::Any + Send + Sync>);
        made
    }

    /// Refuses a null foreign connection, or one on another file.
    ///
    /// # Safety
    /// `db` must be null or an open connection (see
    /// `honker::Database::register_functions_on`).
    pub unsafe fn check_foreign(&self, db: *mut rusqlite::ffi::sqlite3) -> Result<()> {
        if db.is_null() {
            return Err(Error::invalid("the connection handle is null"));
        }
        // SAFETY: `db` is an open connection (contract); "main" is its main
        // database, whose file name SQLite keeps for the connection's life.
        let name = unsafe { rusqlite::ffi::sqlite3_db_filename(db, c"main".as_ptr()) };
        let file = if name.is_null() {
            String::new()
        } else {
            // SAFETY: a NUL-terminated string owned by the connection.
            unsafe { std::ffi::CStr::from_ptr(name) }
                .to_string_lossy()
                .into_owned()
        };
        let same =
            !file.is_empty() && std::fs::canonicalize(&file).is_ok_and(|p| p == self.inner.path);
        if !same {
            return Err(Error::invalid(format!(
                "the connection is on {file:?}, not on this database's file {}",
                self.inner.path.display()
            )));
        }
        Ok(())
    }

    /// The canonical path of the database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The options this database was opened with.
    pub fn options(&self) -> &Options {
        &self.inner.options
    }

    /// A write transaction owned by this thread (`honker::Database::transaction`).
    pub fn transaction(&self) -> Result<Transaction> {
        self.begin(true)
    }

    /// A write transaction owned by an async task
    /// (`honker::Database::transaction_detached`).
    pub fn transaction_detached(&self) -> Result<Transaction> {
        self.begin(false)
    }

    fn begin(&self, owned_by_thread: bool) -> Result<Transaction> {
        let guard = self.inner.lock_writer()?;
        self.inner
            .begin_immediate(guard.as_ref().ok_or_else(Error::closed)?)?;
        Ok(Transaction::new(
            Arc::clone(&self.inner),
            guard,
            owned_by_thread,
        ))
    }

    /// Runs `f` in a [`transaction`](Self::transaction): commits on `Ok`,
    /// rolls back on `Err` or a panic.
    pub fn with_transaction<T, E: From<Error>>(
        &self,
        f: impl FnOnce(&Transaction) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        let tx = self.transaction()?;
        let value = f(&tx)?; // an error drops `tx`, which rolls back
        tx.commit()?;
        Ok(value)
    }

    /// One statement of the application's in a write transaction of its own.
    pub fn execute(&self, sql: &str, params: impl Params) -> Result<usize> {
        self.write(None, |conn, _| {
            Ok(conn.sql().prepare_cached(sql)?.execute(params)?)
        })
    }

    /// A read-only query on a pooled reader.
    pub fn query(&self, sql: &str, params: impl Params) -> Result<Rows> {
        let reader = self.reader()?;
        query_rows(reader.sql(), sql, params)
    }

    /// Closes the writer and every reader; later calls fail with `CLOSED`.
    /// Waits (up to `busy_timeout`) for an open transaction to finish. In a
    /// forked child it only marks the database closed.
    pub fn close(&self) -> Result<()> {
        if self.inner.pid != std::process::id() {
            self.inner.closed.store(true, Ordering::SeqCst);
            self.inner.readers.abandon();
            return Ok(());
        }
        self.inner.closed.store(true, Ordering::SeqCst);
        self.inner.readers.close();
        self.inner.checkpointer.stop();
        let mut guard = self
            .inner
            .writer
            .try_lock_for(self.inner.options.busy_timeout)
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::Busy,
                    "close: a transaction stayed open for the whole busy timeout",
                )
            })?;
        if let Some(conn) = guard.take() {
            conn.close()?;
        }
        drop(guard);
        self.inner.watcher.lock().take();
        self.inner.live.lock().take();
        Ok(())
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::SeqCst)
    }

    /// How many write transactions this database has begun.
    pub fn write_transaction_count(&self) -> u64 {
        self.inner.write_transactions.load(Ordering::Relaxed)
    }

    /// How often a waiter re-checks on its own: ten times `watch_fallback`.
    pub fn recheck_interval(&self) -> Duration {
        self.inner.options.watch_fallback * 10
    }

    /// Wakes this process's waiters on the file (they re-check and sleep
    /// again if nothing changed): for a waiter whose own stop flag was set
    /// from another thread.
    pub fn poke(&self) {
        // A forked copy has no waiters of its own, and the parent's threads
        // may have held the signal's lock at fork time.
        if !self.inner.in_forked_child() {
            self.inner.signal.bump();
        }
    }

    /// A descriptor an event loop can watch for this file's commits (from
    /// any process), with the watcher thread running: see [`Readiness`].
    ///
    /// [`Readiness`]: crate::Readiness
    pub fn readiness(&self) -> Result<crate::Readiness> {
        crate::connection::refuse_waiting("Database::readiness")?;
        crate::Readiness::new(self.wait_signal()?)
    }

    /// The file's change signal, with its watcher thread running: for code
    /// about to wait for commits from other processes.
    pub fn wait_signal(&self) -> Result<Arc<Signal>> {
        self.inner.check_open()?;
        self.inner
            .watcher
            .lock()
            .as_ref()
            .ok_or_else(Error::closed)?
            .ensure_running()?;
        Ok(Arc::clone(&self.inner.signal))
    }

    /// The clock's now, in ms since the epoch.
    pub fn now(&self) -> i64 {
        self.inner.now()
    }

    /// `CLOSED` after close, `UNSAFE` in a forked child.
    pub fn check_open(&self) -> Result<()> {
        self.inner.check_open()
    }

    /// A reader from the pool.
    pub fn reader(&self) -> Result<Reader<'_>> {
        self.inner.reader()
    }

    /// Whether this process is a fork of the one that opened the database.
    pub fn in_forked_child(&self) -> bool {
        self.inner.in_forked_child()
    }

    /// Whether this thread holds this database's open [`Transaction`].
    pub fn held_by_this_thread(&self) -> bool {
        self.inner.tx_owner.load(Ordering::SeqCst) == thread_token()
    }

    /// Runs `f(conn, now_ms)` as one atomic unit: inside `tx` (in a savepoint,
    /// so a failure leaves the caller's transaction as it was), or else in a
    /// write transaction of its own that commits when `f` succeeds.
    pub fn write<R>(
        &self,
        tx: Option<&Transaction>,
        f: impl FnOnce(&HConn, i64) -> Result<R>,
    ) -> Result<R> {
        self.inner.write(tx, f)
    }

    /// [`write`](Self::write) in a transaction of its own, waiting at most
    /// `wait` for this process's writer (`None` when it stayed busy).
    pub fn write_within<R>(
        &self,
        wait: Duration,
        f: impl FnOnce(&HConn, i64) -> Result<R>,
    ) -> Option<Result<R>> {
        let guard = self.inner.writer.try_lock_arc_for(wait)?;
        Some(self.inner.write_locked(guard, f))
    }

    /// Maintenance ran now: the next after-commit run is `every` from now.
    pub fn mark_maintained(&self) {
        self.inner
            .last_maintain
            .store(self.inner.now(), Ordering::SeqCst);
    }

    /// The writer's statement-cache re-prepare count (a test's probe).
    #[doc(hidden)]
    pub fn writer_reprepares(&self) -> Result<i64> {
        let guard = self.inner.lock_writer()?;
        Ok(guard
            .as_ref()
            .ok_or_else(Error::closed)?
            .cache()
            .reprepares())
    }
}

thread_local! {
    static THREAD_TOKEN: u64 = {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        NEXT.fetch_add(1, Ordering::Relaxed)
    };
}

fn thread_token() -> u64 {
    THREAD_TOKEN.with(|t| *t)
}

impl Inner {
    pub(crate) fn now(&self) -> i64 {
        self.options.clock.now_ms()
    }

    pub(crate) fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(Error::closed());
        }
        if self.pid != std::process::id() {
            return Err(Error::forked_handle());
        }
        Ok(())
    }

    pub(crate) fn reader(&self) -> Result<Reader<'_>> {
        self.check_open()?;
        self.readers.get()
    }

    pub(crate) fn signal(&self) -> &Signal {
        &self.signal
    }

    /// Whether this process is a fork of the one that opened the database.
    pub(crate) fn in_forked_child(&self) -> bool {
        self.pid != std::process::id()
    }

    pub(crate) fn lock_writer(&self) -> Result<WriterGuard> {
        self.check_open()?;
        if self.tx_owner.load(Ordering::SeqCst) == thread_token() {
            // Under `without_waiting` (a host's inline attempt before it
            // goes off-thread) the open transaction may be another task's
            // that ran on this thread (Swift's tasks share the cooperative
            // pool's threads): the call would wait, so it says Busy and the
            // host waits for the writer on a thread of its own, as it does
            // for any other holder (issue 53: 11 of 12 such calls failed
            // with a false INVALID_ARGUMENT).
            if crate::connection::waiting_forbidden() {
                return Err(Error::new(
                    ErrorKind::Busy,
                    "the writer is held by a transaction opened on this thread",
                ));
            }
            return Err(Error::invalid(
                "this thread has an open honker transaction on this database: pass it to \
                 the call (the `_tx` variant / `tx=`), or commit it first",
            ));
        }
        let wait = if crate::connection::waiting_forbidden() {
            std::time::Duration::ZERO
        } else {
            self.options.busy_timeout
        };
        let guard = self.writer.try_lock_arc_for(wait).ok_or_else(|| {
            Error::new(
                ErrorKind::Busy,
                "another thread of this process held the writer for the whole busy timeout",
            )
        })?;
        if guard.is_none() {
            return Err(Error::closed());
        }
        Ok(guard)
    }

    fn begin_immediate(&self, conn: &HConn) -> Result<()> {
        conn.raw().prepare_cached("BEGIN IMMEDIATE")?.execute(&[])?;
        self.write_transactions.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    pub(crate) fn set_tx_owner(&self, owned: bool) {
        let v = if owned { thread_token() } else { 0 };
        self.tx_owner.store(v, Ordering::SeqCst);
    }

    /// Runs `f(conn, now_ms)` as one atomic unit: inside `tx` (in a savepoint,
    /// so a failure leaves the caller's transaction as it was), or else in a
    /// write transaction of its own that commits when `f` succeeds.
    pub(crate) fn write<R>(
        &self,
        tx: Option<&Transaction>,
        f: impl FnOnce(&HConn, i64) -> Result<R>,
    ) -> Result<R> {
        if let Some(tx) = tx {
            return tx.run_for(self, |conn| conn.raw().in_savepoint(|| f(conn, self.now())));
        }
        self.write_locked(self.lock_writer()?, f)
    }

    /// [`write`](Self::write)'s own transaction, with the writer `guard`
    /// already held.
    fn write_locked<R>(
        &self,
        guard: WriterGuard,
        f: impl FnOnce(&HConn, i64) -> Result<R>,
    ) -> Result<R> {
        let conn = guard.as_ref().ok_or_else(Error::closed)?;
        self.begin_immediate(conn)?;
        // Time is read once the write lock is held, so that the order of
        // timestamps matches the order of commits.
        let now = self.now();
        let result = f(conn, now).and_then(|r| {
            conn.flush_counts_if_due();
            conn.raw().prepare_cached("COMMIT")?.execute(&[])?;
            Ok(r)
        });
        if result.is_err() && !conn.raw().is_autocommit() {
            let _ = conn.raw().execute_batch("ROLLBACK");
        }
        drop(guard);
        if result.is_ok() {
            self.after_commit(now);
        }
        result
    }

    /// Wakes local waiters, and runs the after-commit hook (a slice of
    /// maintenance) when it is due.
    pub(crate) fn after_commit(&self, now: i64) {
        self.signal().bump();
        let Some(hook) = self.after_commit.get() else {
            return;
        };
        let every = hook.every;
        if every == 0 {
            return;
        }
        let last = self.last_maintain.load(Ordering::Relaxed);
        if now.saturating_sub(last) >= every
            && self
                .last_maintain
                .compare_exchange(last, now, Ordering::SeqCst, Ordering::Relaxed)
                .is_ok()
        {
            (hook.run)();
        }
    }
}

pub(crate) fn query_rows(conn: &Connection, sql: &str, params: impl Params) -> Result<Rows> {
    let mut stmt = conn.prepare_cached(sql)?;
    let columns: Vec<String> = stmt.column_names().map(str::to_owned).collect();
    let n = columns.len();
    let mut rows = Vec::new();
    let mut cursor = stmt.query(params)?;
    while let Some(row) = cursor.next()? {
        let mut values = Vec::with_capacity(n);
        for i in 0..n {
            values.push(row.get::<_, Value>(i)?);
        }
        rows.push(values);
    }
    Ok(Rows { columns, rows })
}

/// A database with no schema of its own and nothing on top: the engine's
/// tests.
#[cfg(test)]
pub fn open_plain(path: &Path) -> Database {
    open_plain_with(path, Options::default())
}

/// [`open_plain`] with `options`.
#[cfg(test)]
pub fn open_plain_with(path: &Path, options: Options) -> Database {
    const NONE: Schema = Schema {
        migrations: &[],
        refuse: |_| Ok(()),
    };
    Database::open(
        path,
        options,
        Setup {
            schema: &NONE,
            on_writer: &|_| Ok(()),
            batch: None,
        },
    )
    .unwrap()
}

#[cfg(test)]
impl Database {
    pub(crate) fn inner(&self) -> &Inner {
        &self.inner
    }
}
