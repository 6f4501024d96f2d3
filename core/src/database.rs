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

use parking_lot::lock_api::ArcMutexGuard;
use parking_lot::{Mutex, RawMutex};
use rusqlite::types::Value;
use rusqlite::{Connection, Params};

use crate::connection::HConn;

use crate::checkpoint::Checkpointer;
use crate::clock::duration_ms;
use crate::connection::{enable_wal, open_writer};
use crate::error::{Error, ErrorKind, Result};
use crate::fork::{self, Live};
use crate::maintenance::{self, MaintenanceReport};
use crate::options::Options;
use crate::pool::{Pool, Reader};
use crate::schema;
use crate::transaction::Transaction;
use crate::watcher::{watcher_for, Signal, Watcher};

pub(crate) type WriterGuard = ArcMutexGuard<RawMutex, Option<HConn>>;

/// An open honker database file. Cheap to clone; clones share connections.
/// `Send + Sync`: share it between threads freely.
///
/// ```
/// # fn main() -> honker::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("app.db");
/// let db = honker::Database::open(&path)?;
/// db.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, status TEXT)", [])?;
/// let emails = db.queue("emails")?;
///
/// // The outbox: the business row and its job commit together, or not at all.
/// let tx = db.transaction()?;
/// tx.execute("INSERT INTO orders (status) VALUES (?1)", ["paid"])?;
/// emails.enqueue_tx(&tx, serde_json::json!({"to": "alice@example.com"}), &Default::default())?;
/// tx.commit()?;
///
/// let jobs = emails.claim("mailer-1", 1)?;
/// assert_eq!(jobs[0].payload.as_json()?["to"], "alice@example.com");
/// jobs[0].ack()?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Database {
    pub(crate) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    path: PathBuf,
    pub(crate) options: Options,
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
    write_transactions: AtomicU64,
    /// Where maintenance's walks over the lock holders and the rate-limit
    /// keys go on from.
    pub(crate) lock_sweep_after: Mutex<String>,
    pub(crate) rate_sweep_after: Mutex<(String, String)>,
    /// Where maintenance's walk over schedules (pruning their fire
    /// records) goes on from.
    pub(crate) fire_sweep_after: Mutex<String>,
    /// The queue counts this process batches (ADR 27), when it does.
    pending: Option<Arc<crate::queue::metrics::Pending>>,
    /// The keep-alives' timer, from the first keep-alive.
    renewals: std::sync::OnceLock<Arc<crate::runtime::Renewals>>,
    /// Starts of rate-limited queues this process reserved ahead (ADR 23
    /// §9).
    pub(crate) blocks: crate::rate::blocks::Blocks,
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
            // Dropped without `close`: what this process counted still
            // goes to the file.
            if !self.closed.load(Ordering::SeqCst) {
                self.flush_metrics_at_close();
            }
            self.checkpointer.stop();
            if let Some(r) = self.renewals.get() {
                r.shutdown();
            }
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
    /// Opens (creating if needed) the honker database at `path` with default
    /// [`Options`]. See [`open_with`](Self::open_with).
    pub fn open(path: impl AsRef<Path>) -> Result<Database> {
        Database::open_with(path, Options::default())
    }

    /// Opens (creating if needed) the database file at `path`: switches it to
    /// WAL mode and applies honker's migrations (safe when several processes
    /// do so at once). The application's own tables and `user_version` are
    /// left alone.
    ///
    /// Fails with `INVALID_ARGUMENT` for bad options or a path that is not a
    /// file on disk (`:memory:`, empty), a directory, a device, a file this
    /// process cannot write, a missing or unwritable directory (each named in
    /// the message), and `SCHEMA_TOO_NEW`, before writing anything, if a
    /// newer honker has already upgraded the file.
    ///
    /// Fails with `UNSAFE`, before any call into SQLite, in a process forked
    /// from one that had honker open (see [`crate::forked_while_open`]); and
    /// with `UNSAFE`, before writing anything, on a file that holds Honker's
    /// tables (import it: [`crate::import::import_honker`]).
    pub fn open_with(path: impl AsRef<Path>, options: Options) -> Result<Database> {
        fork::check_open_allowed()?;
        options.validate()?;
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
        let mut writer = open_writer(path, &options)?;
        #[cfg(all(feature = "bundled", target_os = "linux"))]
        crate::ofd::check_exclusive(path)?;
        schema::check_not_too_new(writer.raw())?;
        // Before anything is written (the journal mode included): a file
        // that holds Honker's tables is for the importer (ADR 25).
        let honker = crate::import::honker_objects(writer.raw())?;
        if !honker.is_empty() {
            return Err(crate::import::honker_file(&honker));
        }
        enable_wal(writer.sql(), options.busy_timeout)?;
        schema::migrate(writer.raw(), options.clock.now_ms())?;
        let config = crate::sql::SqlConfig::of(&options);
        // SAFETY: the handle is open; the functions share the writer's cache,
        // which the writer clears before it closes.
        unsafe {
            crate::sql::register_handle(
                writer.sql().handle(),
                config,
                Some(Arc::clone(writer.cache())),
            )?;
        }
        let path = std::fs::canonicalize(path)
            .map_err(|e| Error::invalid(format!("cannot resolve {}: {e}", path.display())))?;
        let watcher = watcher_for(&path, options.busy_timeout, options.watch_fallback);
        let checkpointer = Checkpointer::new(path.clone(), options.clone());
        writer.install_checkpointer(Arc::clone(&checkpointer));
        // Queue counts batched in this process (ADR 27), unless asked to
        // count in each transaction.
        let pending = (!options.metrics_flush_every.is_zero())
            .then(|| crate::queue::metrics::Pending::new(options.metrics_flush_every));
        if let Some(p) = &pending {
            writer.install_pending(Arc::clone(p));
        }
        let now = options.clock.now_ms();
        let db = Database {
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
                write_transactions: AtomicU64::new(0),
                lock_sweep_after: Mutex::new(String::new()),
                rate_sweep_after: Mutex::new(Default::default()),
                fire_sweep_after: Mutex::new(String::new()),
                pending: pending.clone(),
                renewals: std::sync::OnceLock::new(),
                blocks: Default::default(),
                options,
            }),
        };
        if let Some(p) = pending {
            let weak = Arc::downgrade(&db.inner);
            let flushed = Arc::clone(&p);
            p.start_flusher(move || {
                let inner = weak.upgrade()?;
                if inner.closed.load(Ordering::SeqCst) {
                    return None;
                }
                Some(inner.write(None, |conn, _| flushed.flush(conn.raw())))
            })?;
            flush_at_exit(&db.inner);
        }
        Ok(db)
    }

    /// Registers honker's SQL functions (`honker_enqueue`, `honker_ack`, …:
    /// docs/sql.md) on a connection to this file that the application opened
    /// itself, such as GRDB's, so that its own transactions can call them: the
    /// outbox inside the app's `write { db in … }`. The functions use this
    /// database's clock and payload limit; they stay registered until that
    /// connection closes (SQLite frees them then). A commit on that connection
    /// wakes this process's waiters through the file watcher, as any other
    /// process's commit does.
    ///
    /// The handle must come from the SQLite library honker itself runs on.
    /// In Rust that is always so (one `libsqlite3-sys` per binary: a
    /// rusqlite connection's `handle()` qualifies); the Swift package builds
    /// honker on the system SQLite for this (ADR 18), where GRDB, Core Data
    /// and SQLite.swift live too. A handle to another file fails with
    /// `INVALID_ARGUMENT`, a null one too.
    ///
    /// # Safety
    /// `db` must be an open connection of the SQLite library this process
    /// links (the one honker uses), not used by another thread during the
    /// call.
    pub unsafe fn register_functions_on(&self, db: *mut rusqlite::ffi::sqlite3) -> Result<()> {
        self.inner.check_open()?;
        // SAFETY: per the contract.
        unsafe { self.check_foreign(db)? };
        let config = crate::sql::SqlConfig::of(&self.inner.options);
        // SAFETY: `db` is open (contract); without a cache the functions keep
        // nothing of the connection between calls, so it may close any time.
        unsafe { crate::sql::register_handle(db, config, None) }
    }

    /// Refuses a null foreign connection, or one on another file.
    ///
    /// # Safety
    /// `db` must be null or an open connection (see
    /// [`register_functions_on`](Self::register_functions_on)).
    pub(crate) unsafe fn check_foreign(&self, db: *mut rusqlite::ffi::sqlite3) -> Result<()> {
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

    /// Starts a write transaction (`BEGIN IMMEDIATE`) on the writer
    /// connection. Pass it to honker verbs (`enqueue_tx`, `ack_tx`, ...) to
    /// commit their effects together with your own `tx.execute(...)` work.
    /// Dropping it without [`commit`](Transaction::commit) rolls back.
    ///
    /// While it is open, other writes of this process wait for it (up to
    /// `busy_timeout`); a write from the *same thread* that does not pass the
    /// transaction fails at once with `INVALID_ARGUMENT` instead of
    /// deadlocking.
    pub fn transaction(&self) -> Result<Transaction> {
        self.begin(true)
    }

    /// A [`transaction`](Self::transaction) that belongs to an async task
    /// rather than to the calling thread, for runtimes whose tasks share and
    /// change threads (tokio, Node's event loop, asyncio's thread pool): it
    /// may be held across `.await`, and no thread is refused a write because
    /// of it. Writes of other tasks wait for it under the busy timeout; a
    /// write of the *same* task that does not pass the transaction would wait
    /// for itself, so the caller's runtime must catch that (the Node and
    /// Python bindings do, with AsyncLocalStorage and `contextvars`).
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

    /// Runs `f` inside a [`transaction`](Self::transaction): commits when it
    /// returns `Ok`, rolls back when it returns `Err` or panics, so a
    /// forgotten commit cannot leave the writer held.
    ///
    /// ```
    /// # fn main() -> honker::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = honker::Database::open(dir.path().join("app.db"))?;
    /// db.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, status TEXT)", [])?;
    /// let emails = db.queue("emails")?;
    /// let job = db.with_transaction(|tx| {
    ///     tx.execute("INSERT INTO orders (status) VALUES ('paid')", [])?;
    ///     emails.enqueue_tx(tx, serde_json::json!({"order": 1}), &Default::default())
    /// })?;
    /// assert!(!job.existing);
    /// # Ok(()) }
    /// ```
    pub fn with_transaction<T, E: From<Error>>(
        &self,
        f: impl FnOnce(&Transaction) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        let tx = self.transaction()?;
        let value = f(&tx)?; // an error drops `tx`, which rolls back
        tx.commit()?;
        Ok(value)
    }

    /// Runs one statement of your own in its own write transaction; returns
    /// the number of rows changed.
    pub fn execute(&self, sql: &str, params: impl Params) -> Result<usize> {
        self.inner.write(None, |conn, _| {
            Ok(conn.sql().prepare_cached(sql)?.execute(params)?)
        })
    }

    /// Runs a read-only query on a pooled reader connection (never the
    /// writer, so it does not wait for write transactions).
    pub fn query(&self, sql: &str, params: impl Params) -> Result<Rows> {
        let reader = self.inner.reader()?;
        query_rows(reader.sql(), sql, params)
    }

    /// Prunes everything past its retention ([`crate::Retention`]): finished
    /// jobs by state and age, and results. Work is done in short transactions
    /// so writers are not held up. Writes also run a bounded slice of this
    /// every `Options::auto_maintain_every`.
    pub fn maintain(&self) -> Result<MaintenanceReport> {
        maintenance::run(&self.inner, usize::MAX)
    }

    /// Closes the writer and every reader. Later calls on this database or
    /// any handle made from it fail with `CLOSED`. Waits (up to
    /// `busy_timeout`) for an open transaction to finish.
    ///
    /// In a process forked from the one that opened it, `close` only marks
    /// it closed: the connections belong to the parent.
    pub fn close(&self) -> Result<()> {
        if self.inner.pid != std::process::id() {
            self.inner.closed.store(true, Ordering::SeqCst);
            self.inner.readers.abandon();
            return Ok(());
        }
        if !self.inner.closed.load(Ordering::SeqCst) {
            self.inner.flush_metrics_at_close();
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

    /// How many write transactions this `Database` has begun (its own and
    /// [`transaction`](Self::transaction)s). A diagnostic: an idle waiting
    /// worker should not make it grow when other queues are busy.
    pub fn write_transaction_count(&self) -> u64 {
        self.inner.write_transactions.load(Ordering::Relaxed)
    }

    /// How often a waiter re-checks on its own, without any wake-up: a safety
    /// net (the watcher already re-reads the file every `watch_fallback`), so
    /// ten times that. A loop waiting on a [`crate::Readiness`] passes it
    /// as its timeout.
    pub fn recheck_interval(&self) -> std::time::Duration {
        self.inner.options.watch_fallback * 10
    }

    /// Wakes this process's waiters on the file (they re-check and sleep
    /// again if nothing changed): for a waiter whose own stop flag was set
    /// from another thread.
    pub(crate) fn poke(&self) {
        // A forked copy has no waiters of its own, and the parent's threads
        // may have held the signal's lock at fork time.
        if !self.inner.in_forked_child() {
            self.inner.signal.bump();
        }
    }

    /// A descriptor an event loop can watch for this file's commits (from
    /// any process), with the watcher thread running: see [`Readiness`] for
    /// the protocol. Each reader on a loop takes its own.
    ///
    /// [`Readiness`]: crate::Readiness
    pub fn readiness(&self) -> Result<crate::Readiness> {
        crate::queue::refuse_waiting("Database::readiness")?;
        crate::Readiness::new(self.wait_signal()?)
    }

    /// The file's change signal, with its watcher thread running: for code
    /// about to wait for commits from other processes.
    pub(crate) fn wait_signal(&self) -> Result<Arc<Signal>> {
        self.inner.check_open()?;
        self.inner
            .watcher
            .lock()
            .as_ref()
            .ok_or_else(Error::closed)?
            .ensure_running()?;
        Ok(Arc::clone(&self.inner.signal))
    }
}

/// The open databases of this process that batch queue counts: what the
/// process still holds is written when it exits normally (`exit`, the end
/// of `main`, Node's and Python's exits), also for a handle never closed.
static BATCHING: Mutex<Vec<std::sync::Weak<Inner>>> = parking_lot::const_mutex(Vec::new());

fn flush_at_exit(inner: &Arc<Inner>) {
    static REGISTER: std::sync::Once = std::sync::Once::new();
    REGISTER.call_once(|| {
        // SAFETY: registers a plain function, run once at exit.
        unsafe { libc::atexit(flush_all_at_exit) };
    });
    let mut open = BATCHING.lock();
    open.retain(|w| w.strong_count() > 0);
    open.push(Arc::downgrade(inner));
}

extern "C" fn flush_all_at_exit() {
    let _ = std::panic::catch_unwind(|| {
        // Bounded waits throughout: an exit must not hang on a lock another
        // thread keeps (or a forked child's copy of one). First the drops
        // on threads of their own (a binding's last handle on a database
        // may be one: its drop writes the counts, and it is no longer
        // among the databases below once it has begun).
        crate::runtime::wait_for_drops(std::time::Duration::from_millis(1000));
        let Some(open) = BATCHING.try_lock_for(std::time::Duration::from_millis(100)) else {
            return;
        };
        let open: Vec<_> = open.iter().filter_map(std::sync::Weak::upgrade).collect();
        for inner in open {
            inner.flush_metrics_before_exit();
        }
    });
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

    /// The keep-alives' timer (started with the first).
    pub(crate) fn renewals(&self) -> &Arc<crate::runtime::Renewals> {
        self.renewals.get_or_init(Default::default)
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

    /// Writes this process's batched queue counts to the file now, in a
    /// write transaction of their own, when there are any: before a read of
    /// the counters, so that a process reads its own counts. Skipped on a
    /// thread that holds an open transaction (it would wait for itself).
    fn flush_metrics(&self) -> Result<()> {
        match &self.pending {
            Some(p) if p.has_committed() => {
                if self.tx_owner.load(Ordering::SeqCst) == thread_token() {
                    return Ok(());
                }
                self.write(None, |conn, _| p.flush(conn.raw()))
            }
            _ => Ok(()),
        }
    }

    /// The counters of `queue` (or every queue's), this process's own
    /// written first (a reader sees the file only).
    pub(crate) fn read_metrics(
        &self,
        queue: Option<&str>,
    ) -> Result<Vec<crate::queue::metrics::QueueMetrics>> {
        let _ = self.flush_metrics();
        let reader = self.reader()?;
        crate::queue::metrics::read(reader.raw(), queue, true, self.now())
    }

    /// At exit: [`flush_metrics`](Self::flush_metrics), waiting at most
    /// half a second for this process's writer.
    fn flush_metrics_before_exit(&self) {
        if self.in_forked_child() || self.closed.load(Ordering::SeqCst) {
            return;
        }
        let Some(p) = &self.pending else {
            return;
        };
        if !p.has_committed() {
            return;
        }
        let wait = std::time::Duration::from_millis(500);
        if let Some(guard) = self.writer.try_lock_arc_for(wait) {
            let _ = self.write_locked(guard, |conn, _| p.flush(conn.raw()));
        }
    }

    /// At close (or drop): the idle flush stops, and what is left is
    /// written (a failure leaves it uncounted: said on stderr, never
    /// raised, as the close itself must go on).
    fn flush_metrics_at_close(&self) {
        if let Some(p) = &self.pending {
            p.stop();
            if let Err(e) = self.flush_metrics() {
                eprintln!(
                    "honker: the queue counts of this process were not written at close: {e}"
                );
            }
        }
    }

    pub(crate) fn mark_maintained(&self) {
        self.last_maintain.store(self.now(), Ordering::SeqCst);
    }

    /// Wakes local waiters, and runs a slice of maintenance when it is due.
    pub(crate) fn after_commit(&self, now: i64) {
        self.signal().bump();
        let every = duration_ms(self.options.auto_maintain_every);
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
            // Best effort: a BUSY here is not the caller's problem, and the
            // next slice will catch up.
            let _ = maintenance::run(self, maintenance::AUTO_BATCH);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EnqueueOptions;

    /// Hot statements are prepared once: binding another queue name must not
    /// make SQLite re-prepare them (it does without the query planner
    /// stability guarantee, for parameters compared against the partial
    /// indexes' WHERE clauses).
    #[test]
    fn hot_statements_are_never_re_prepared() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path().join("a.db")).unwrap();
        let queues = [db.queue("a").unwrap(), db.queue("b").unwrap()];
        for q in &queues {
            q.enqueue_many(
                (0..20).map(serde_json::Value::from),
                &EnqueueOptions::default(),
            )
            .unwrap();
        }
        let reprepares = || {
            let guard = db.inner.lock_writer().unwrap();
            guard.as_ref().unwrap().cache().reprepares()
        };
        // Statements prepared before the migrations ran are re-prepared once
        // (a schema change); count from after the first round.
        let mut before = 0;
        for i in 0..20 {
            if i == 2 {
                before = reprepares();
            }
            let q = &queues[i % 2];
            let jobs = q.claim("w", 1).unwrap();
            jobs[0].ack().unwrap();
            q.enqueue(serde_json::json!(i), &EnqueueOptions::default())
                .unwrap();
        }
        assert_eq!(reprepares() - before, 0);
    }
}
