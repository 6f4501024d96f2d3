//! honker's schema: numbered migrations (`migrations/NNNN_*.sql`) recorded in
//! honker's own version table `_honker_schema`.
//!
//! Invariants:
//! - honker never reads or writes `PRAGMA user_version`; it belongs to the
//!   application;
//! - all pending migrations apply in one `BEGIN IMMEDIATE` transaction, and the
//!   version is re-read after the lock is taken, so several processes (of any
//!   language or version) opening a new file at once apply each migration once;
//! - a file whose version is newer than [`LATEST`] is refused before anything
//!   is written ([`ErrorKind::SchemaTooNew`]);
//! - a file that holds Honker's tables is refused before anything is written
//!   (`UNSAFE`, naming the importer: [`crate::import`]);
//! - schema SQL stays within what SQLite 3.40 understands (the extension loads
//!   into Debian 12's SQLite).

use crate::raw::{params, Conn};

use crate::error::{Error, ErrorKind, Result};

/// One migration: its number, a short name and its SQL.
#[derive(Debug)]
pub struct Migration {
    /// Sequence number, starting at 1, without gaps.
    pub version: i64,
    /// Short description.
    pub name: &'static str,
    /// The DDL.
    pub sql: &'static str,
}

/// Every migration, in order.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "queue",
        sql: include_str!("migrations/0001_queue.sql"),
    },
    Migration {
        version: 2,
        name: "state checks",
        sql: include_str!("migrations/0002_state_checks.sql"),
    },
    Migration {
        version: 3,
        name: "honker names",
        sql: include_str!("migrations/0003_honker_names.sql"),
    },
    Migration {
        version: 4,
        name: "streams",
        sql: include_str!("migrations/0004_streams.sql"),
    },
    Migration {
        version: 5,
        name: "channels",
        sql: include_str!("migrations/0005_channels.sql"),
    },
    Migration {
        version: 6,
        name: "groups",
        sql: include_str!("migrations/0006_groups.sql"),
    },
    Migration {
        version: 7,
        name: "locks",
        sql: include_str!("migrations/0007_locks.sql"),
    },
    Migration {
        version: 8,
        name: "rate limits",
        sql: include_str!("migrations/0008_rate_limits.sql"),
    },
    Migration {
        version: 9,
        name: "schedules",
        sql: include_str!("migrations/0009_schedules.sql"),
    },
    Migration {
        version: 10,
        name: "queue counters",
        sql: include_str!("migrations/0010_queue_counters.sql"),
    },
    Migration {
        version: 11,
        name: "trace context",
        sql: include_str!("migrations/0011_trace_context.sql"),
    },
];

/// The schema version this build writes.
pub const LATEST: i64 = MIGRATIONS[MIGRATIONS.len() - 1].version;

const CREATE_VERSION_TABLE: &str = "CREATE TABLE IF NOT EXISTS _honker_schema (
    version    INTEGER PRIMARY KEY,
    name       TEXT    NOT NULL,
    applied_at INTEGER NOT NULL
)";

const VERSION_TABLE_EXISTS: &str =
    "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = '_honker_schema'";

const CURRENT_VERSION: &str = "SELECT coalesce(max(version), 0) FROM _honker_schema";

const RECORD_VERSION: &str =
    "INSERT INTO _honker_schema (version, name, applied_at) VALUES (?1, ?2, ?3)";

/// The honker schema version of the file `conn` is open on (0 when honker has
/// never touched it). A read; takes no write lock.
pub(crate) fn current_version(conn: Conn<'_>) -> Result<i64> {
    let exists: i64 = conn
        .prepare_cached(VERSION_TABLE_EXISTS)?
        .query_one(params![], |r| r.get(0))?;
    if exists == 0 {
        return Ok(0);
    }
    conn.prepare_cached(CURRENT_VERSION)?
        .query_one(params![], |r| r.get(0))
}

fn too_new(found: i64) -> Error {
    Error::new(
        ErrorKind::SchemaTooNew,
        format!(
            "this file has honker schema version {found}, but this build of honker knows \
             versions up to {LATEST}; upgrade honker (nothing was written)"
        ),
    )
}

/// Fails with `SCHEMA_TOO_NEW` if the file's schema is newer than this build.
pub(crate) fn check_not_too_new(conn: Conn<'_>) -> Result<i64> {
    let v = current_version(conn)?;
    if v > LATEST {
        return Err(too_new(v));
    }
    Ok(v)
}

/// Brings the schema up to [`LATEST`]. Cheap (one read) when it already is.
/// `now_ms` is recorded as the migration time. Returns the number of
/// migrations applied by this call.
pub(crate) fn migrate(conn: Conn<'_>, now_ms: i64) -> Result<usize> {
    if check_not_too_new(conn)? == LATEST {
        return Ok(0);
    }
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let result = apply_pending(conn, now_ms);
    match result {
        Ok(n) => {
            conn.execute_batch("COMMIT")?;
            Ok(n)
        }
        Err(e) => {
            // The transaction may already be gone (e.g. after SQLITE_FULL).
            let _ = conn.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}

/// [`migrate`] for a connection that may already be inside a transaction
/// (the SQL function `honker_bootstrap()`): uses a savepoint instead of
/// `BEGIN IMMEDIATE`, and so commits with the caller's transaction.
pub(crate) fn migrate_nested(conn: Conn<'_>, now_ms: i64) -> Result<usize> {
    if check_not_too_new(conn)? == LATEST {
        return Ok(0);
    }
    conn.in_savepoint(|| apply_pending(conn, now_ms))
}

fn apply_pending(conn: Conn<'_>, now_ms: i64) -> Result<usize> {
    conn.execute_batch(CREATE_VERSION_TABLE)?;
    // Re-read under the write lock: another process may have migrated while
    // this one waited for it.
    let from = check_not_too_new(conn)?;
    // Honker's tables are never touched on open: the importer moves them.
    let honker = crate::import::honker_objects(conn)?;
    if !honker.is_empty() {
        return Err(crate::import::honker_file(&honker));
    }
    let mut applied = 0;
    for m in MIGRATIONS.iter().filter(|m| m.version > from) {
        conn.execute_batch(m.sql)?;
        conn.prepare_cached(RECORD_VERSION)?
            .execute(params![m.version, m.name, now_ms])?;
        applied += 1;
    }
    Ok(applied)
}

#[cfg(all(test, feature = "rusqlite"))]
mod tests {
    use super::*;
    use crate::raw::params;

    fn with_memory_db(f: impl FnOnce(Conn<'_>)) {
        let owner = rusqlite::Connection::open_in_memory().unwrap();
        // SAFETY: `owner` is open and outlives the borrowed handle.
        f(unsafe { Conn::new(owner.handle(), None) });
    }

    #[test]
    fn migrations_are_numbered_without_gaps() {
        for (i, m) in MIGRATIONS.iter().enumerate() {
            assert_eq!(m.version, i as i64 + 1, "migration {} out of order", m.name);
        }
    }

    #[test]
    fn migrate_is_idempotent_and_leaves_user_version_alone() {
        with_memory_db(|conn| {
            conn.execute_batch("PRAGMA user_version = 42").unwrap();
            assert_eq!(migrate(conn, 1).unwrap(), MIGRATIONS.len());
            assert_eq!(migrate(conn, 2).unwrap(), 0);
            assert_eq!(current_version(conn).unwrap(), LATEST);
            let uv: i64 = conn
                .prepare_cached("PRAGMA user_version")
                .unwrap()
                .query_one(params![], |r| r.get(0))
                .unwrap();
            assert_eq!(uv, 42);
        });
    }

    #[test]
    fn newer_schema_is_refused() {
        with_memory_db(|conn| {
            migrate(conn, 1).unwrap();
            conn.prepare_cached(RECORD_VERSION)
                .unwrap()
                .execute(params![LATEST + 1, "future", 3])
                .unwrap();
            let err = migrate(conn, 4).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::SchemaTooNew);
        });
    }
}
