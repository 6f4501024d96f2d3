//! [`Database`]: an open honker file. The engine's database
//! (`honker_engine::Database`: the writer, the readers, transactions, the
//! watcher, checkpoints) with honker's [`Options`] and the counts that
//! follow its transactions (a [`Batch`]: the queue counters, ADR 27).
//! Opening it (`open.rs`) brings honker's schema and SQL functions; each
//! primitive adds its handle (`impl Database { fn queue }` in
//! `queue/handle.rs`, …), so this file imports no primitive.
//!
//! Invariants (the engine's, see `honker_engine::database`):
//! - one writer connection per `Database`; every write transaction is
//!   `BEGIN IMMEDIATE`;
//! - a honker verb run inside a caller's [`Transaction`] is wrapped in a
//!   savepoint: if it fails, it changes nothing, and the caller's own work in
//!   that transaction is untouched;
//! - after each commit, waiters in this process are woken directly;
//! - a `Database` belongs to the process that opened it: after `fork()`, the
//!   child's copy refuses every call (`CLOSED`) and leaks its connections
//!   rather than closing them (`crate::fork`).

use std::ops::Deref;
use std::path::Path;
use std::sync::Arc;

use rusqlite::Params;

use honker_engine::{Batch, Rows};

use crate::error::Result;
use crate::options::Options;
use crate::transaction::Transaction;

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

/// Rows per write transaction of honker's bulk work (maintenance's
/// deletes, a stream's trim, a group's redrive), so that it never holds the
/// write lock for long.
pub(crate) const BATCH: usize = 1000;

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) engine: honker_engine::Database,
    pub(crate) options: Options,
    /// The counts that follow the writer's transactions (the queue
    /// counters, ADR 27), when this process batches them.
    pub(crate) batch: Option<Arc<dyn Batch>>,
}

/// The engine's calls (`write`, `reader`, `now`, `check_open`, …) on
/// `db.inner`.
impl Deref for Inner {
    type Target = honker_engine::Database;
    fn deref(&self) -> &honker_engine::Database {
        &self.engine
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Dropped without `close`: what this process counted still goes to
        // the file (not from a forked copy: the connections are the parent's).
        if !self.engine.in_forked_child() && !self.engine.is_closed() {
            self.flush_batch_at_close();
        }
    }
}

impl Database {
    /// The options this database was opened with.
    pub fn options(&self) -> &Options {
        &self.inner.options
    }

    /// The canonical path of the database file.
    pub fn path(&self) -> &Path {
        self.inner.engine.path()
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
        self.inner.engine.transaction()
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
        self.inner.engine.transaction_detached()
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
    pub fn with_transaction<T, E: From<crate::Error>>(
        &self,
        f: impl FnOnce(&Transaction) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        self.inner.engine.with_transaction(f)
    }

    /// Runs one statement of your own in its own write transaction; returns
    /// the number of rows changed.
    pub fn execute(&self, sql: &str, params: impl Params) -> Result<usize> {
        self.inner.engine.execute(sql, params)
    }

    /// Runs a read-only query on a pooled reader connection (never the
    /// writer, so it does not wait for write transactions).
    pub fn query(&self, sql: &str, params: impl Params) -> Result<Rows> {
        self.inner.engine.query(sql, params)
    }

    /// Closes the writer and every reader. Later calls on this database or
    /// any handle made from it fail with `CLOSED`. Waits (up to
    /// `busy_timeout`) for an open transaction to finish.
    ///
    /// In a process forked from the one that opened it, `close` only marks
    /// it closed: the connections belong to the parent.
    pub fn close(&self) -> Result<()> {
        if !self.inner.engine.in_forked_child() && !self.inner.engine.is_closed() {
            self.inner.flush_batch_at_close();
        }
        self.inner.engine.close()
    }

    /// How many write transactions this `Database` has begun (its own and
    /// [`transaction`](Self::transaction)s). A diagnostic: an idle waiting
    /// worker should not make it grow when other queues are busy.
    pub fn write_transaction_count(&self) -> u64 {
        self.inner.engine.write_transaction_count()
    }

    /// How often a waiter re-checks on its own, without any wake-up: a safety
    /// net (the watcher already re-reads the file every `watch_fallback`), so
    /// ten times that. A loop waiting on a [`crate::Readiness`] passes it
    /// as its timeout.
    pub fn recheck_interval(&self) -> std::time::Duration {
        self.inner.engine.recheck_interval()
    }

    /// Up to `wait` for what `source` takes (a [`Source`](crate::Source):
    /// a look without waiting, a take), blocking this thread between looks
    /// until any process's commit, the time the look named or the re-check
    /// interval ([`Pace`](crate::Pace)'s rules); `None` when the wait ran
    /// out. A zero wait is one take.
    pub fn wait_for<S: crate::Source + ?Sized>(
        &self,
        source: &S,
        wait: std::time::Duration,
    ) -> Result<Option<S::Item>> {
        self.inner
            .engine
            .wait_for(source, wait, &|| false, "Database::wait_for")
    }

    /// A descriptor an event loop can watch for this file's commits (from
    /// any process), with the watcher thread running: see [`Readiness`] for
    /// the protocol. Each reader on a loop takes its own.
    ///
    /// [`Readiness`]: crate::Readiness
    pub fn readiness(&self) -> Result<crate::Readiness> {
        self.inner.engine.readiness()
    }

    /// Wakes this process's waiters on the file (they re-check and sleep
    /// again if nothing changed): for a waiter whose own stop flag was set
    /// from another thread.
    pub(crate) fn poke(&self) {
        self.inner.engine.poke();
    }

    /// The file's change signal, with its watcher thread running: for code
    /// about to wait for commits from other processes.
    pub(crate) fn wait_signal(&self) -> Result<Arc<crate::watcher::Signal>> {
        self.inner.engine.wait_signal()
    }
}

impl Inner {
    /// Writes this process's batched counts to the file now, in a write
    /// transaction of their own, when there are any: before a read of the
    /// counters, so that a process reads its own counts. Skipped on a thread
    /// that holds an open transaction (it would wait for itself).
    pub(crate) fn flush_batch(&self) -> Result<()> {
        match &self.batch {
            Some(b) if b.has_committed() => {
                if self.engine.held_by_this_thread() {
                    return Ok(());
                }
                self.engine.write(None, |conn, _| b.flush(conn.raw()))
            }
            _ => Ok(()),
        }
    }

    /// At exit: [`flush_batch`](Self::flush_batch), waiting at most half a
    /// second for this process's writer.
    pub(crate) fn flush_batch_before_exit(&self) {
        if self.engine.in_forked_child() || self.engine.is_closed() {
            return;
        }
        let Some(b) = &self.batch else {
            return;
        };
        if !b.has_committed() {
            return;
        }
        let wait = std::time::Duration::from_millis(500);
        let _ = self
            .engine
            .write_within(wait, |conn, _| b.flush(conn.raw()));
    }

    /// At close (or drop): the batch's own timer stops, and what is left is
    /// written (a failure leaves it uncounted: said on stderr, never raised,
    /// as the close itself must go on).
    fn flush_batch_at_close(&self) {
        if let Some(b) = &self.batch {
            b.stop();
            if let Err(e) = self.flush_batch() {
                eprintln!(
                    "honker: the queue counts of this process were not written at close: {e}"
                );
            }
        }
    }
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
        let reprepares = || db.inner.engine.writer_reprepares().unwrap();
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
