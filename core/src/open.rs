//! Opening a honker file: the engine's open (`honker_engine::Database`)
//! with honker's schema (its migrations, Honker's file refused), honker's
//! SQL functions on the writer, the queue counters batched on it (ADR 27)
//! and maintenance after commits. The one place that names them together.

use std::path::Path;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::database::{Database, Inner};
use crate::error::Result;
use crate::maintenance;
use crate::options::Options;

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
        crate::fork::check_open_allowed()?;
        options.validate()?;
        // Queue counts batched in this process (ADR 27), unless asked to
        // count in each transaction.
        let pending = (!options.metrics_flush_every.is_zero())
            .then(|| crate::queue::metrics::Pending::new(options.metrics_flush_every));
        let batch = pending.clone().map(|p| p as Arc<dyn honker_engine::Batch>);
        let config = crate::sql::SqlConfig::of(&options);
        let register = |writer: &crate::connection::HConn| {
            // SAFETY: the handle is open; the functions share the writer's
            // cache, which the writer clears before it closes.
            unsafe {
                crate::sql::register_handle(
                    writer.sql().handle(),
                    config.clone(),
                    Some(Arc::clone(writer.cache())),
                )
            }
        };
        let engine = honker_engine::Database::open(
            path,
            options.engine(),
            honker_engine::Setup {
                schema: &crate::schema::SCHEMA,
                on_writer: &register,
                batch: batch.clone(),
            },
        )?;
        let db = Database {
            inner: Arc::new(Inner {
                engine,
                batch,
                options,
            }),
        };
        let weak = Arc::downgrade(&db.inner);
        db.inner.engine.after_commits(
            db.inner.options.auto_maintain_every,
            Box::new(move || {
                if let Some(inner) = weak.upgrade() {
                    // Best effort: a BUSY here is not the caller's problem,
                    // and the next slice will catch up.
                    let _ = maintenance::run(&inner, maintenance::AUTO_BATCH);
                }
            }),
        );
        if let Some(p) = pending {
            let weak = Arc::downgrade(&db.inner);
            let flushed = Arc::clone(&p);
            p.start_flusher(move || {
                let inner = weak.upgrade()?;
                if inner.engine.is_closed() {
                    return None;
                }
                Some(
                    inner
                        .engine
                        .write(None, |conn, _| flushed.flush(conn.raw())),
                )
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
        unsafe { self.inner.engine.check_foreign(db)? };
        let config = crate::sql::SqlConfig::of(&self.inner.options);
        // SAFETY: `db` is open (contract); without a cache the functions keep
        // nothing of the connection between calls, so it may close any time.
        unsafe { crate::sql::register_handle(db, config, None) }
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
            inner.flush_batch_before_exit();
        }
    });
}
