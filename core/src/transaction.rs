//! [`Transaction`]: an open `BEGIN IMMEDIATE` write transaction on the
//! writer connection, for the outbox pattern: the application's own rows and
//! honker's jobs commit together or not at all.
//!
//! Invariants:
//! - it owns the writer lock until `commit`, `rollback` or drop, and drop
//!   always rolls back what was not committed;
//! - it is `'static` and `Send` (bindings keep it in a language object), and
//!   can only be used with handles of the database that opened it.

use std::sync::Arc;

use rusqlite::{Connection, Params};

use crate::connection::HConn;

use crate::database::{query_rows, Inner, Rows, WriterGuard};
use crate::error::{Error, Result};

/// A write transaction. See [`Database::transaction`](crate::Database::transaction).
pub struct Transaction {
    db: Arc<Inner>,
    guard: Option<WriterGuard>,
}

// The writer guard is Send thanks to parking_lot's `send_guard` feature.

impl std::fmt::Debug for Transaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transaction")
            .field("open", &self.guard.is_some())
            .finish_non_exhaustive()
    }
}

impl Transaction {
    pub(crate) fn new(db: Arc<Inner>, guard: WriterGuard) -> Transaction {
        db.set_tx_owner(true);
        Transaction {
            db,
            guard: Some(guard),
        }
    }

    fn conn(&self) -> Result<&HConn> {
        self.guard
            .as_ref()
            .and_then(|g| g.as_ref())
            .ok_or_else(Error::transaction_finished)
    }

    /// The connection, checked to belong to `db`.
    pub(crate) fn connection_for(&self, db: &Inner) -> Result<&HConn> {
        if !std::ptr::eq(Arc::as_ptr(&self.db), db) {
            return Err(Error::invalid(
                "this transaction belongs to another Database (or another open of the file); \
                 use a handle from the database that opened it",
            ));
        }
        self.conn()
    }

    /// Runs one statement of your own (`INSERT`, `UPDATE`, DDL, ...) inside
    /// the transaction; returns the number of rows changed.
    pub fn execute(&self, sql: &str, params: impl Params) -> Result<usize> {
        Ok(self.conn()?.sql().prepare_cached(sql)?.execute(params)?)
    }

    /// Runs a query inside the transaction (it sees the transaction's own
    /// uncommitted writes).
    pub fn query(&self, sql: &str, params: impl Params) -> Result<Rows> {
        query_rows(self.conn()?.sql(), sql, params)
    }

    /// The underlying rusqlite connection, for what `execute`/`query` do not
    /// cover. Do not run `COMMIT`/`ROLLBACK`/`BEGIN` on it.
    pub fn connection(&self) -> Result<&Connection> {
        self.conn().map(HConn::sql)
    }

    /// Commits. On failure the transaction is rolled back and nothing of it
    /// persists.
    pub fn commit(mut self) -> Result<()> {
        self.finish(true)
    }

    /// Rolls back everything done in the transaction.
    pub fn rollback(mut self) -> Result<()> {
        self.finish(false)
    }

    fn finish(&mut self, commit: bool) -> Result<()> {
        let Some(guard) = self.guard.take() else {
            return Ok(());
        };
        self.db.set_tx_owner(false);
        let Some(conn) = guard.as_ref() else {
            return Err(Error::closed());
        };
        let raw = conn.raw();
        let result = if commit {
            raw.prepare_cached("COMMIT")
                .and_then(|mut s| s.execute(&[]))
                .map(drop)
        } else {
            Ok(())
        };
        if !raw.is_autocommit() {
            // Not committed (rollback asked, or COMMIT failed): undo it all.
            let _ = raw.execute_batch("ROLLBACK");
        }
        drop(guard);
        if commit && result.is_ok() {
            let now = self.db.now();
            // Every commit wakes local waiters: application SQL can make jobs
            // claimable too (`SELECT honker_enqueue(...)`, a trigger).
            self.db.after_commit(now);
        }
        result
    }
}

impl Drop for Transaction {
    fn drop(&mut self) {
        let _ = self.finish(false);
    }
}
