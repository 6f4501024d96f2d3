//! [`Transaction`]: an open `BEGIN IMMEDIATE` write transaction on the
//! writer connection, for the outbox pattern: the application's own rows and
//! honker's jobs commit together or not at all.
//!
//! Invariants:
//! - it owns the writer lock until `commit`, `rollback` or drop, and drop
//!   always rolls back what was not committed;
//! - it is `'static` and `Send` (bindings keep it in a language object), and
//!   can only be used with handles of the database that opened it;
//! - nothing ever runs in autocommit on its behalf: every statement run
//!   through it (its own `execute`/`query`, every `_tx` verb, SQL functions
//!   inside them) checks that SQLite still has the transaction open before
//!   and after. Once SQLite has ended it (`INSERT OR ROLLBACK`,
//!   `RAISE(ROLLBACK)`, `SQLITE_FULL`/`IOERR` without a statement journal,
//!   an interrupt) it is dead: every later call and `commit` fail with
//!   `ROLLED_BACK`, and `rollback` succeeds;
//! - statements that would end the transaction behind its back (`BEGIN`,
//!   `COMMIT`, `END`, `ROLLBACK` without `TO`, `RELEASE` of a savepoint the
//!   application did not open in it) are refused with `INVALID_ARGUMENT`;
//! - in a process forked from the one that opened it, every call fails with
//!   `CLOSED`, and dropping it calls nothing in SQLite.

use std::sync::Arc;

use parking_lot::Mutex;
use rusqlite::{Connection, Params};

use crate::connection::HConn;

use crate::database::{query_rows, Inner, Rows, WriterGuard};
use crate::error::{Error, Result};

/// A write transaction. See [`Database::transaction`](crate::Database::transaction).
pub struct Transaction {
    db: Arc<Inner>,
    /// Marked as the calling thread's ([`Database::transaction`]), not
    /// [`detached`](crate::Database::transaction_detached).
    owned_by_thread: bool,
    guard: Option<WriterGuard>,
    /// What made SQLite end the transaction, once it has.
    dead: Mutex<Option<String>>,
    /// Savepoints the application opened through `execute`, innermost last,
    /// with where the writer's batched counts were when each began (a
    /// `ROLLBACK TO` takes back the counts made since).
    savepoints: Mutex<Vec<(String, usize)>>,
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
    pub(crate) fn new(db: Arc<Inner>, guard: WriterGuard, owned_by_thread: bool) -> Transaction {
        if owned_by_thread {
            db.set_tx_owner(true);
        }
        Transaction {
            db,
            owned_by_thread,
            guard: Some(guard),
            dead: Mutex::new(None),
            savepoints: Mutex::new(Vec::new()),
        }
    }

    /// The connection, once the transaction is known to be still open in
    /// SQLite.
    fn conn(&self) -> Result<&HConn> {
        if self.db.in_forked_child() {
            return Err(Error::forked_handle());
        }
        let conn = self
            .guard
            .as_ref()
            .and_then(|g| g.as_ref())
            .ok_or_else(Error::transaction_finished)?;
        if let Some(cause) = &*self.dead.lock() {
            return Err(Error::rolled_back(cause));
        }
        if conn.raw().is_autocommit() {
            return Err(self.died("a statement run on its connection outside honker"));
        }
        Ok(conn)
    }

    /// Records that SQLite ended the transaction after `cause`.
    fn died(&self, cause: &str) -> Error {
        *self.dead.lock() = Some(cause.to_string());
        Error::rolled_back(cause)
    }

    /// Runs `f` on the connection: refused if SQLite has already ended the
    /// transaction, and turned into `ROLLED_BACK` if `f` made it end it.
    pub(crate) fn run<T>(&self, f: impl FnOnce(&HConn) -> Result<T>) -> Result<T> {
        let conn = self.conn()?;
        let result = f(conn);
        if conn.raw().is_autocommit() {
            let cause = match &result {
                Err(e) => e.to_string(),
                Ok(_) => "a statement that ended it".to_string(),
            };
            return Err(self.died(&cause));
        }
        result
    }

    /// `run(f)`, once the transaction is checked to belong to `db`.
    pub(crate) fn run_for<T>(&self, db: &Inner, f: impl FnOnce(&HConn) -> Result<T>) -> Result<T> {
        if !std::ptr::eq(Arc::as_ptr(&self.db), db) {
            return Err(Error::invalid(
                "this transaction belongs to another Database (or another open of the file); \
                 use a handle from the database that opened it",
            ));
        }
        self.run(f)
    }

    /// Runs one statement of your own (`INSERT`, `UPDATE`, DDL, ...) inside
    /// the transaction; returns the number of rows changed.
    ///
    /// Transaction control that would end it behind honker's back is refused
    /// with `INVALID_ARGUMENT`: `BEGIN`, `COMMIT`, `END`, `ROLLBACK` (use
    /// [`rollback`](Self::rollback); `ROLLBACK TO` a savepoint is fine) and
    /// `RELEASE` of a savepoint not opened through this transaction.
    pub fn execute(&self, sql: &str, params: impl Params) -> Result<usize> {
        let (control, mark) = self.check_control(sql)?;
        let changed = self.run(|conn| Ok(conn.sql().prepare_cached(sql)?.execute(params)?))?;
        self.track(control, mark);
        Ok(changed)
    }

    /// Runs a query inside the transaction (it sees the transaction's own
    /// uncommitted writes). Refuses transaction control as
    /// [`execute`](Self::execute) does.
    pub fn query(&self, sql: &str, params: impl Params) -> Result<Rows> {
        let (control, mark) = self.check_control(sql)?;
        let rows = self.run(|conn| query_rows(conn.sql(), sql, params))?;
        self.track(control, mark);
        Ok(rows)
    }

    /// What `sql` does to the transaction, refused when it would end it;
    /// for a `SAVEPOINT`, also where the writer's batched counts are before it
    /// runs (0 otherwise, or when they are not batched).
    fn check_control(&self, sql: &str) -> Result<(Control, usize)> {
        let control = Control::of(sql);
        let refused = match &control {
            Control::Ends(word) => Some(format!(
                "{word} would end the transaction behind honker's back: use commit() or \
                 rollback() on the transaction"
            )),
            Control::Release(name) if !self.savepoints.lock().iter().any(|(n, _)| n == name) => {
                Some(format!(
                    "RELEASE {name}: no savepoint of that name was opened through this transaction"
                ))
            }
            _ => None,
        };
        if let Some(message) = refused {
            return Err(Error::invalid(message));
        }
        let mark = match control {
            Control::Savepoint(_) => self.counts().map_or(0, |p| p.mark()),
            _ => 0,
        };
        Ok((control, mark))
    }

    /// The [`Batch`](crate::Batch) that follows this transaction's
    /// connection, if one does.
    fn counts(&self) -> Option<&dyn crate::Batch> {
        self.conn().ok().and_then(HConn::batch)
    }

    /// Keeps the application's savepoints in step after a statement ran
    /// (`mark`: where the counts were before it).
    fn track(&self, control: Control, mark: usize) {
        let mut open = self.savepoints.lock();
        match control {
            Control::Savepoint(name) => open.push((name, mark)),
            Control::Release(name) => {
                if let Some(at) = open.iter().rposition(|(n, _)| *n == name) {
                    open.truncate(at);
                }
            }
            Control::RollbackTo(name) => {
                // The savepoint stays open; those opened inside it are gone,
                // and so are the counts made since it began.
                if let Some(at) = open.iter().rposition(|(n, _)| *n == name) {
                    let began = open[at].1;
                    open.truncate(at + 1);
                    if let Some(p) = self.counts() {
                        p.rewind(began);
                    }
                }
            }
            _ => {}
        }
    }

    /// The underlying rusqlite connection, for what `execute`/`query` do not
    /// cover. Do not run `COMMIT`/`ROLLBACK`/`BEGIN` on it.
    pub fn connection(&self) -> Result<&Connection> {
        self.conn().map(HConn::sql)
    }

    /// Commits. On failure the transaction is rolled back and nothing of it
    /// persists. Fails with `ROLLED_BACK` if SQLite already ended it.
    pub fn commit(mut self) -> Result<()> {
        self.finish(true)
    }

    /// Rolls back everything done in the transaction (also fine after
    /// SQLite ended it).
    pub fn rollback(mut self) -> Result<()> {
        self.finish(false)
    }

    fn finish(&mut self, commit: bool) -> Result<()> {
        let Some(guard) = self.guard.take() else {
            return Ok(());
        };
        if self.owned_by_thread {
            self.db.set_tx_owner(false);
        }
        if self.db.in_forked_child() {
            // The connection is the parent's: no ROLLBACK, no SQLite call at
            // all; unlocking this copy's mutex is all there is to do.
            drop(guard);
            return if commit {
                Err(Error::forked_handle())
            } else {
                Ok(())
            };
        }
        let Some(conn) = guard.as_ref() else {
            return Err(Error::closed());
        };
        let raw = conn.raw();
        let dead = self.dead.lock().clone().or_else(|| {
            raw.is_autocommit()
                .then(|| "a statement run on its connection outside honker".to_string())
        });
        let result = match (&dead, commit) {
            (Some(cause), true) => Err(Error::rolled_back(cause)),
            (_, true) => {
                conn.flush_counts_if_due();
                raw.prepare_cached("COMMIT")
                    .and_then(|mut s| s.execute(&[]))
                    .map(drop)
            }
            (_, false) => Ok(()),
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

/// What a statement does to the transaction, judged from its first words.
#[derive(Debug, PartialEq)]
enum Control {
    /// `BEGIN`, `COMMIT`, `END`, `ROLLBACK` (not `ROLLBACK TO`).
    Ends(&'static str),
    /// `SAVEPOINT name`.
    Savepoint(String),
    /// `RELEASE [SAVEPOINT] name`.
    Release(String),
    /// `ROLLBACK [TRANSACTION] TO [SAVEPOINT] name`.
    RollbackTo(String),
    /// Anything else.
    Other,
}

impl Control {
    fn of(sql: &str) -> Control {
        let mut words = Words { rest: sql };
        let Some(first) = words.next() else {
            return Control::Other;
        };
        let first = first.to_ascii_uppercase();
        match first.as_str() {
            "BEGIN" => Control::Ends("BEGIN"),
            "COMMIT" => Control::Ends("COMMIT"),
            "END" => Control::Ends("END"),
            "ROLLBACK" => {
                let mut next = words.next().map(|w| w.to_ascii_uppercase());
                if next.as_deref() == Some("TRANSACTION") {
                    next = words.next().map(|w| w.to_ascii_uppercase());
                }
                if next.as_deref() == Some("TO") {
                    let mut name = words.next();
                    if name.is_some_and(|w| w.eq_ignore_ascii_case("SAVEPOINT")) {
                        name = words.next();
                    }
                    Control::RollbackTo(name.map(unquote).unwrap_or_default())
                } else {
                    Control::Ends("ROLLBACK")
                }
            }
            "SAVEPOINT" => words
                .next()
                .map_or(Control::Other, |n| Control::Savepoint(unquote(n))),
            "RELEASE" => {
                let mut name = words.next();
                if name.is_some_and(|w| w.eq_ignore_ascii_case("SAVEPOINT")) {
                    name = words.next();
                }
                Control::Release(name.map(unquote).unwrap_or_default())
            }
            _ => Control::Other,
        }
    }
}

/// SQL words, skipping whitespace and comments; a quoted name is one word.
struct Words<'a> {
    rest: &'a str,
}

impl<'a> Iterator for Words<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        loop {
            self.rest = self.rest.trim_start();
            if let Some(r) = self.rest.strip_prefix("--") {
                self.rest = r.find('\n').map_or("", |i| &r[i..]);
            } else if let Some(r) = self.rest.strip_prefix("/*") {
                self.rest = r.find("*/").map_or("", |i| &r[i + 2..]);
            } else {
                break;
            }
        }
        let s = self.rest;
        let close = match s.chars().next()? {
            '"' => Some('"'),
            '`' => Some('`'),
            '[' => Some(']'),
            '\'' => Some('\''),
            _ => None,
        };
        let end = match close {
            Some(c) => s[1..].find(c).map_or(s.len(), |i| i + 2),
            None => s
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
                .unwrap_or(s.len())
                .max(1),
        };
        self.rest = &s[end..];
        Some(&s[..end])
    }
}

/// A savepoint name as SQLite compares it: unquoted, case-insensitive.
fn unquote(word: &str) -> String {
    let inner = if word.len() >= 2
        && matches!(
            (word.as_bytes()[0], word.as_bytes()[word.len() - 1]),
            (b'"', b'"') | (b'`', b'`') | (b'[', b']') | (b'\'', b'\'')
        ) {
        &word[1..word.len() - 1]
    } else {
        word
    };
    inner.to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::Control;

    #[test]
    fn transaction_control_is_recognised_through_comments_and_case() {
        assert_eq!(Control::of("commit"), Control::Ends("COMMIT"));
        assert_eq!(
            Control::of("  /* x */ -- y\n End Transaction"),
            Control::Ends("END")
        );
        assert_eq!(Control::of("BEGIN IMMEDIATE"), Control::Ends("BEGIN"));
        assert_eq!(Control::of("ROLLBACK"), Control::Ends("ROLLBACK"));
        assert_eq!(
            Control::of("rollback transaction"),
            Control::Ends("ROLLBACK")
        );
        assert_eq!(
            Control::of("ROLLBACK TO sp"),
            Control::RollbackTo("sp".into())
        );
        assert_eq!(
            Control::of("ROLLBACK TRANSACTION TO SAVEPOINT [Sp]"),
            Control::RollbackTo("sp".into())
        );
        assert_eq!(
            Control::of("SAVEPOINT \"My SP\""),
            Control::Savepoint("my sp".into())
        );
        assert_eq!(
            Control::of("release savepoint [My SP]"),
            Control::Release("my sp".into())
        );
        assert_eq!(Control::of("RELEASE a"), Control::Release("a".into()));
        assert_eq!(Control::of("INSERT INTO t VALUES (1)"), Control::Other);
        assert_eq!(Control::of("committed"), Control::Other);
        assert_eq!(Control::of(""), Control::Other);
    }
}
