//! honker's schema: numbered migrations (`migrations/NNNN_*.sql`) recorded in
//! honker's own version table `_honker_schema` by the engine's runner
//! (`honker_engine::migrate`, whose invariants hold: `user_version` is the
//! application's, pending migrations apply in one `BEGIN IMMEDIATE`
//! transaction, a newer file is refused with [`ErrorKind::SchemaTooNew`]
//! before anything is written).
//!
//! What honker adds: a file that holds Honker's tables is refused before
//! anything is written (`UNSAFE`, naming the importer: [`crate::import`]);
//! schema SQL stays within what SQLite 3.40 understands (the extension loads
//! into Debian 12's SQLite).

use crate::raw::{params, Conn};

use crate::error::{Error, ErrorKind, Result};
pub use honker_engine::migrate::{current_version, Migration};

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
    Migration {
        version: 12,
        name: "event priority",
        sql: include_str!("migrations/0012_event_priority.sql"),
    },
    Migration {
        version: 13,
        name: "concurrency key",
        sql: include_str!("migrations/0013_concurrency_key.sql"),
    },
    Migration {
        version: 14,
        name: "fair turns",
        sql: include_str!("migrations/0014_fair_turns.sql"),
    },
    Migration {
        version: 15,
        name: "unique holds",
        sql: include_str!("migrations/0015_unique_holds.sql"),
    },
];

/// The schema version this build writes.
pub const LATEST: i64 = SCHEMA.latest();

/// honker's migrations, and Honker's file refused (the importer moves it).
pub(crate) const SCHEMA: honker_engine::Schema = honker_engine::Schema {
    migrations: MIGRATIONS,
    refuse: refuse_honker_file,
};

fn refuse_honker_file(conn: Conn<'_>) -> Result<()> {
    let honker = honker_objects(conn)?;
    if !honker.is_empty() {
        return Err(honker_file(&honker));
    }
    Ok(())
}

/// Honker's objects present in the file: its tables (by name), the view
/// its Python client creates, and a `_honker_results` without our `queue`
/// column. Rows: (name, type).
const HONKER_OBJECTS: &str = "
SELECT name, type FROM main.sqlite_master
WHERE (type = 'table' AND name IN ('_honker_live', '_honker_dead', '_honker_locks',
        '_honker_rate_limits', '_honker_scheduler_tasks', '_honker_stream',
        '_honker_stream_consumers', '_honker_notifications'))
   OR (type = 'view' AND name = '_honker_jobs')
   OR (type = 'table' AND name = '_honker_results'
       AND NOT EXISTS (SELECT 1 FROM pragma_table_info('_honker_results') WHERE name = 'queue'))
ORDER BY name";

/// Honker's objects in the file `conn` is open on (see
/// [`HONKER_OBJECTS`]): `name (type)`.
pub(crate) fn honker_objects(conn: Conn<'_>) -> Result<Vec<String>> {
    conn.prepare_cached(HONKER_OBJECTS)?
        .query_map(params![], |r| {
            Ok(format!("{} ({})", r.get::<String>(0)?, r.get::<String>(1)?))
        })
}

/// The error `Database::open` and `honker_bootstrap()` give on a Honker
/// file.
pub(crate) fn honker_file(found: &[String]) -> Error {
    Error::new(
        ErrorKind::Unsafe,
        format!(
            "this file holds Honker's tables ({}); honker does not change them on open. \
             Stop every Honker process, then import them: SELECT honker_import_honker(); \
             (or honker.import_honker(path) in Python) — see docs/switching-from-honker.md. \
             Nothing was written",
            found.join(", ")
        ),
    )
}

/// The file's version, or `SCHEMA_TOO_NEW` past [`LATEST`].
pub(crate) fn check_not_too_new(conn: Conn<'_>) -> Result<i64> {
    honker_engine::migrate::check_not_too_new(conn, &SCHEMA)
}

/// Applies honker's pending migrations (`BEGIN IMMEDIATE`; `open` runs
/// the engine's with [`SCHEMA`]).
#[cfg(test)]
pub(crate) fn migrate(conn: Conn<'_>, now_ms: i64) -> Result<usize> {
    honker_engine::migrate::migrate(conn, &SCHEMA, now_ms)
}

/// [`migrate`] inside the caller's transaction (a savepoint).
pub(crate) fn migrate_nested(conn: Conn<'_>, now_ms: i64) -> Result<usize> {
    honker_engine::migrate::migrate_nested(conn, &SCHEMA, now_ms)
}

#[cfg(all(test, feature = "rusqlite"))]
mod tests {
    use super::*;
    use crate::ErrorKind;

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

    /// honker's own migrations apply, once, on a new file (the runner's
    /// rules are tested in honker_engine::migrate); a Honker file is refused
    /// with nothing written.
    #[test]
    fn honkers_migrations_apply_once_and_a_honker_file_is_refused() {
        with_memory_db(|conn| {
            assert_eq!(migrate(conn, 1).unwrap(), MIGRATIONS.len());
            assert_eq!(migrate(conn, 2).unwrap(), 0);
            assert_eq!(current_version(conn).unwrap(), LATEST);
        });
        with_memory_db(|conn| {
            conn.execute_batch("CREATE TABLE _honker_live (id INTEGER)")
                .unwrap();
            let err = migrate(conn, 1).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Unsafe, "{err}");
            assert_eq!(current_version(conn).unwrap(), 0);
        });
    }
}
