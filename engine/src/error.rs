//! Errors: one public [`ErrorKind`] with stable string codes, and one [`Error`]
//! type that carries the kind, a human message and (when there is one) the
//! underlying SQLite error as its `source()`.
//!
//! Invariants:
//! - every error has exactly one kind, and the kind's [`ErrorKind::code`] never
//!   changes once released: bindings, the SQL surface and tests match on codes,
//!   never on message text;
//! - messages name ids, queues and limits but never include payload contents.

use std::fmt;

/// The stable category of an [`Error`]. Bindings map these one-to-one onto their
/// own error types (a Python exception class, a JS `err.code`, a Swift enum case).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The database stayed locked by another writer for longer than the busy
    /// timeout. Safe to retry.
    Busy,
    /// The lease token presented no longer owns the job: the lease lapsed and
    /// another worker claimed it, or the job was acked, failed or cancelled.
    /// Nothing was changed.
    LeaseLost,
    /// No job (or result, or other object) with that id exists.
    NotFound,
    /// An argument was rejected before anything was written.
    InvalidArgument,
    /// The file's honker schema is newer than this build understands.
    SchemaTooNew,
    /// The database (or handle) was closed.
    Closed,
    /// A wait ended at its deadline without the awaited event.
    Timeout,
    /// A rate limit refused the call.
    RateLimited,
    /// SQLite reported an error for a statement (typically application SQL
    /// passed to `execute`/`query`: a syntax error, a constraint violation),
    /// or an I/O error.
    Sqlite,
    /// A broken invariant inside honker. Please report it.
    Internal,
    /// The call is refused because it cannot be done safely here: this
    /// process was forked from one that had honker open, or another SQLite
    /// library has the same file open. The message names the safe route.
    Unsafe,
    /// SQLite itself ended the transaction (`INSERT OR ROLLBACK`,
    /// `RAISE(ROLLBACK)`, a full disk or I/O error without a statement
    /// journal, an interrupt): nothing of it was committed, and every later
    /// call on it fails with this code until it is rolled back or dropped.
    RolledBack,
    /// A reader asked for stream events (or notifications) that retention
    /// already removed; the message says how many were missed. The reader
    /// goes on from the oldest retained one.
    Trimmed,
}

impl ErrorKind {
    /// Every kind, in declaration order (used by bindings to check that their
    /// mapping is total).
    pub const ALL: [ErrorKind; 13] = [
        ErrorKind::Busy,
        ErrorKind::LeaseLost,
        ErrorKind::NotFound,
        ErrorKind::InvalidArgument,
        ErrorKind::SchemaTooNew,
        ErrorKind::Closed,
        ErrorKind::Timeout,
        ErrorKind::RateLimited,
        ErrorKind::Sqlite,
        ErrorKind::Internal,
        ErrorKind::Unsafe,
        ErrorKind::RolledBack,
        ErrorKind::Trimmed,
    ];

    /// The stable, upper-case code for this kind, e.g. `"LEASE_LOST"`.
    pub const fn code(self) -> &'static str {
        match self {
            ErrorKind::Busy => "BUSY",
            ErrorKind::LeaseLost => "LEASE_LOST",
            ErrorKind::NotFound => "NOT_FOUND",
            ErrorKind::InvalidArgument => "INVALID_ARGUMENT",
            ErrorKind::SchemaTooNew => "SCHEMA_TOO_NEW",
            ErrorKind::Closed => "CLOSED",
            ErrorKind::Timeout => "TIMEOUT",
            ErrorKind::RateLimited => "RATE_LIMITED",
            ErrorKind::Sqlite => "SQLITE",
            ErrorKind::Internal => "INTERNAL",
            ErrorKind::Unsafe => "UNSAFE",
            ErrorKind::RolledBack => "ROLLED_BACK",
            ErrorKind::Trimmed => "TRIMMED",
        }
    }

    /// The kind whose [`code`](Self::code) is `code`, if any.
    pub fn from_code(code: &str) -> Option<ErrorKind> {
        ErrorKind::ALL.into_iter().find(|k| k.code() == code)
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// The error type of every fallible honker operation.
///
/// `Display` renders as `CODE: message`, the same text the SQL functions raise.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    /// The SQLite (extended) result code, for errors that came from SQLite.
    sqlite_code: Option<i32>,
    /// For `TRIMMED`: how many events (or notifications) the reader missed.
    missed: Option<u64>,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

/// `Result<T, honker::Error>`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An error of `kind` with a human-readable message.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
            sqlite_code: None,
            missed: None,
            source: None,
        }
    }

    pub(crate) fn with_sqlite_code(kind: ErrorKind, message: String, code: i32) -> Error {
        Error {
            kind,
            message,
            sqlite_code: Some(code),
            missed: None,
            source: None,
        }
    }

    /// The SQLite extended result code, when the error came from SQLite
    /// (for example 2067, `SQLITE_CONSTRAINT_UNIQUE`).
    pub fn sqlite_code(&self) -> Option<i32> {
        self.sqlite_code
    }

    /// For `TRIMMED`: how many events (or notifications) retention removed
    /// before the reader got to them.
    pub fn missed(&self) -> Option<u64> {
        self.missed
    }

    /// `TRIMMED`: `missed` items of `what` were removed before the reader
    /// read them; it goes on from `resumes_at`.
    pub fn trimmed(what: &str, missed: u64, resumes_at: i64) -> Error {
        let mut e = Error::new(
            ErrorKind::Trimmed,
            format!(
                "{what}: retention removed {missed} not yet read; reading goes on from                  {resumes_at}, the oldest retained"
            ),
        );
        e.missed = Some(missed);
        e
    }

    /// The stable category.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// Shorthand for `self.kind().code()`.
    pub fn code(&self) -> &'static str {
        self.kind.code()
    }

    /// The message without the code prefix.
    pub fn message(&self) -> &str {
        &self.message
    }

    pub fn invalid(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::InvalidArgument, message)
    }

    pub fn not_found(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::NotFound, message)
    }

    pub fn lease_lost(job_id: i64) -> Error {
        Error::new(
            ErrorKind::LeaseLost,
            format!("job {job_id}: the lease token no longer owns this job (lease lapsed and was reclaimed, or the job already finished)"),
        )
    }

    /// `INVALID_ARGUMENT` for a call on a transaction that was already
    /// committed or rolled back (bindings keep transactions of their own and
    /// report it the same way).
    pub fn transaction_finished() -> Error {
        Error::invalid("the transaction has already finished (committed or rolled back)")
    }

    /// The error of a cancelled wait (`TIMEOUT`).
    pub fn cancelled() -> Error {
        Error::new(ErrorKind::Timeout, "the wait was cancelled")
    }

    pub fn closed() -> Error {
        Error::new(ErrorKind::Closed, "the database has been closed")
    }

    /// `CLOSED` for a handle used in a process forked from the one that
    /// opened it.
    pub(crate) fn forked_handle() -> Error {
        Error::new(
            ErrorKind::Closed,
            "this handle belongs to the process this one was forked from; a forked child \
             cannot use honker (start workers with the spawn or forkserver method, or fork \
             before opening)",
        )
    }

    /// `ROLLED_BACK`: SQLite ended the transaction after `cause`.
    pub(crate) fn rolled_back(cause: &str) -> Error {
        Error::new(
            ErrorKind::RolledBack,
            format!(
                "SQLite rolled this transaction back after {cause}; nothing of it was \
                 committed (roll it back or drop it, then start a new one)"
            ),
        )
    }

    /// The same error, its message prefixed with the job it is about.
    pub fn for_job(mut self, id: i64) -> Error {
        self.message = format!("job {id}: {}", self.message);
        self
    }

    pub fn internal(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Internal, message)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind.code(), self.message)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// Whether a SQLite error means "another connection holds the lock".
#[cfg(feature = "rusqlite")]
pub(crate) fn is_busy(err: &rusqlite::Error) -> bool {
    matches!(
        err.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

#[cfg(feature = "rusqlite")]
impl From<rusqlite::Error> for Error {
    fn from(err: rusqlite::Error) -> Error {
        let kind = if is_busy(&err) {
            ErrorKind::Busy
        } else {
            match err {
                rusqlite::Error::InvalidParameterCount(..)
                | rusqlite::Error::InvalidParameterName(_)
                | rusqlite::Error::MultipleStatement
                | rusqlite::Error::ToSqlConversionFailure(_) => ErrorKind::InvalidArgument,
                _ => ErrorKind::Sqlite,
            }
        };
        Error {
            kind,
            message: err.to_string(),
            sqlite_code: err.sqlite_error().map(|e| e.extended_code),
            missed: None,
            source: Some(Box::new(err)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_round_trip() {
        let mut seen = std::collections::HashSet::new();
        for kind in ErrorKind::ALL {
            assert!(seen.insert(kind.code()), "duplicate code {}", kind.code());
            assert_eq!(ErrorKind::from_code(kind.code()), Some(kind));
        }
        assert_eq!(ErrorKind::from_code("NOPE"), None);
    }

    #[test]
    fn display_starts_with_code() {
        let e = Error::lease_lost(7);
        assert!(e.to_string().starts_with("LEASE_LOST: job 7"));
        assert_eq!(e.kind(), ErrorKind::LeaseLost);
    }
}
