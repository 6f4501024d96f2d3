//! The migrations runner: numbered migrations recorded in honker's own
//! version table `_honker_schema`. Which migrations, and which files to
//! refuse, are the caller's ([`Schema`]: honker's is `honker::schema`).
//!
//! Invariants:
//! - the runner never reads or writes `PRAGMA user_version`; it belongs to
//!   the application;
//! - all pending migrations apply in one `BEGIN IMMEDIATE` transaction, and the
//!   version is re-read after the lock is taken, so several processes (of any
//!   language or version) opening a new file at once apply each migration once;
//! - a file whose version is newer than the schema's latest is refused before
//!   anything is written ([`ErrorKind::SchemaTooNew`]);
//! - a file the schema's `refuse` objects to is refused before anything is
//!   written, and again under the write lock.

use crate::raw::{params, Conn};

use crate::error::{Error, ErrorKind, Result};

/// One numbered migration.
#[derive(Debug)]
pub struct Migration {
    pub version: i64,
    pub name: &'static str,
    pub sql: &'static str,
}

/// A schema: its migrations, numbered 1, 2, … without gaps, and what to
/// refuse before writing to a file (`Ok` for a file it may migrate).
#[derive(Debug)]
pub struct Schema {
    pub migrations: &'static [Migration],
    pub refuse: fn(Conn<'_>) -> Result<()>,
}

impl Schema {
    /// The newest version this schema knows (0 with no migrations).
    pub const fn latest(&self) -> i64 {
        match self.migrations.last() {
            Some(m) => m.version,
            None => 0,
        }
    }
}

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

/// The file's schema version (0 before the first migration).
pub fn current_version(conn: Conn<'_>) -> Result<i64> {
    let exists: i64 = conn
        .prepare_cached(VERSION_TABLE_EXISTS)?
        .query_one(params![], |r| r.get(0))?;
    if exists == 0 {
        return Ok(0);
    }
    conn.prepare_cached(CURRENT_VERSION)?
        .query_one(params![], |r| r.get(0))
}

fn too_new(found: i64, latest: i64) -> Error {
    Error::new(
        ErrorKind::SchemaTooNew,
        format!(
            "this file has honker schema version {found}, but this build of honker knows \
             versions up to {latest}; upgrade honker (nothing was written)"
        ),
    )
}

/// The file's version, or `SCHEMA_TOO_NEW` when it is newer than `schema`'s.
pub fn check_not_too_new(conn: Conn<'_>, schema: &Schema) -> Result<i64> {
    let v = current_version(conn)?;
    if v > schema.latest() {
        return Err(too_new(v, schema.latest()));
    }
    Ok(v)
}

/// Applies `schema`'s pending migrations in one `BEGIN IMMEDIATE`
/// transaction; returns how many it applied.
pub fn migrate(conn: Conn<'_>, schema: &Schema, now_ms: i64) -> Result<usize> {
    if check_not_too_new(conn, schema)? == schema.latest() {
        return Ok(0);
    }
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let result = apply_pending(conn, schema, now_ms);
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
pub fn migrate_nested(conn: Conn<'_>, schema: &Schema, now_ms: i64) -> Result<usize> {
    if check_not_too_new(conn, schema)? == schema.latest() {
        return Ok(0);
    }
    conn.in_savepoint(|| apply_pending(conn, schema, now_ms))
}

fn apply_pending(conn: Conn<'_>, schema: &Schema, now_ms: i64) -> Result<usize> {
    conn.execute_batch(CREATE_VERSION_TABLE)?;
    // Re-read under the write lock: another process may have migrated while
    // this one waited for it.
    let from = check_not_too_new(conn, schema)?;
    (schema.refuse)(conn)?;
    let mut applied = 0;
    for m in schema.migrations.iter().filter(|m| m.version > from) {
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

    const TWO: Schema = Schema {
        migrations: &[
            Migration {
                version: 1,
                name: "a",
                sql: "CREATE TABLE a (x)",
            },
            Migration {
                version: 2,
                name: "b",
                sql: "CREATE TABLE b (x)",
            },
        ],
        refuse: |conn| {
            let c: i64 = conn
                .prepare_cached("SELECT count(*) FROM sqlite_master WHERE name = 'alien'")?
                .query_one(params![], |r| r.get(0))?;
            if c > 0 {
                return Err(Error::new(ErrorKind::Unsafe, "a foreign file"));
            }
            Ok(())
        },
    };

    fn with_memory_db(f: impl FnOnce(Conn<'_>)) {
        let owner = rusqlite::Connection::open_in_memory().unwrap();
        // SAFETY: `owner` is open and outlives the borrowed handle.
        f(unsafe { Conn::new(owner.handle(), None) });
    }

    #[test]
    fn migrate_is_idempotent_and_leaves_user_version_alone() {
        with_memory_db(|conn| {
            conn.execute_batch("PRAGMA user_version = 42").unwrap();
            assert_eq!(migrate(conn, &TWO, 1).unwrap(), 2);
            assert_eq!(migrate(conn, &TWO, 2).unwrap(), 0);
            assert_eq!(current_version(conn).unwrap(), 2);
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
            migrate(conn, &TWO, 1).unwrap();
            conn.prepare_cached(RECORD_VERSION)
                .unwrap()
                .execute(params![3, "future", 3])
                .unwrap();
            let err = migrate(conn, &TWO, 4).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::SchemaTooNew);
        });
    }

    #[test]
    fn a_refused_file_is_left_unwritten() {
        with_memory_db(|conn| {
            conn.execute_batch("CREATE TABLE alien (x)").unwrap();
            let err = migrate(conn, &TWO, 1).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Unsafe);
            assert_eq!(current_version(conn).unwrap(), 0);
        });
    }
}
