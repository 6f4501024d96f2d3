//! Migrations on files that already hold data: a file written at schema 1
//! (every job state, finished records, results, an id high-water mark above
//! the live ids, an application view over honker's table) opened by this
//! build comes out with every row intact, the same schema as a new file, and
//! a working queue.

use std::path::Path;

use honker::rusqlite::{params, Connection};
use honker::schema::MIGRATIONS;
use honker::{Database, EnqueueOptions, ErrorKind, Lease};
use serde_json::json;

const NOW: i64 = 1_700_000_000_000;

/// A file at schema `version`, made the way that version's honker made it.
fn file_at(path: &Path, version: i64) -> Connection {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch(
        "PRAGMA journal_mode = WAL;
         CREATE TABLE _honker_schema (
             version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)",
    )
    .unwrap();
    for m in MIGRATIONS.iter().filter(|m| m.version <= version) {
        conn.execute_batch(m.sql).unwrap();
        conn.execute(
            "INSERT INTO _honker_schema VALUES (?1, ?2, ?3)",
            params![m.version, m.name, NOW],
        )
        .unwrap();
    }
    conn
}

/// One job in every live state, dead and completed records, a result, and
/// acked jobs above the highest live id.
fn fill(conn: &Connection) {
    let job = |state: &str, extra_cols: &str, extra_vals: &str| {
        conn.execute_batch(&format!(
            "INSERT INTO _honker_jobs (queue, state, payload, priority, run_at, attempts,
                 max_attempts, backoff_base_ms, backoff_max_ms, backoff_jitter, created_at
                 {extra_cols})
             VALUES ('q', '{state}', '{{\"n\": 1}}', 5, {NOW}, 1, 3, 1000, 60000, 0.25, {NOW}
                 {extra_vals})"
        ))
        .unwrap();
    };
    job(
        "ready",
        ", dedupe_key, expires_at",
        ", 'key-1', 9999999999999",
    );
    job("ready", "", "");
    job("scheduled", ", last_error", ", 'boom (attempt 1)'");
    job(
        "running",
        ", worker_id, lease_token, lease_expires_at",
        &format!(", 'w1', 'tok-running', {}", NOW + 3_600_000),
    );
    conn.execute(
        "INSERT INTO _honker_jobs (queue, state, payload, run_at, max_attempts,
             backoff_base_ms, backoff_max_ms, backoff_jitter, created_at)
         VALUES ('bytes', 'ready', x'00ff10', ?1, 3, 1000, 60000, 0.5, ?1)",
        [NOW],
    )
    .unwrap();
    // Jobs 6..=9 were acked or finished: the high-water mark is above every
    // live id.
    for _ in 6..=9 {
        job("ready", "", "");
    }
    conn.execute_batch(&format!(
        "DELETE FROM _honker_jobs WHERE id >= 6;
         INSERT INTO _honker_finished (id, queue, state, payload, priority, run_at, attempts,
             max_attempts, backoff_base_ms, backoff_max_ms, backoff_jitter, created_at,
             worker_id, last_error, finished_at)
         VALUES (6, 'q', 'dead', '{{}}', 0, {NOW}, 3, 3, 1000, 60000, 0.5, {NOW}, 'w', 'x', {NOW}),
                (7, 'q', 'completed', '[1]', 0, {NOW}, 1, 3, 1000, 60000, 0.5, {NOW}, 'w', NULL, {NOW});
         INSERT INTO _honker_results (job_id, queue, value, created_at)
         VALUES (8, 'q', '\"done\"', {NOW});
         CREATE TABLE orders (id INTEGER PRIMARY KEY, job_id INTEGER);
         CREATE VIEW app_job_counts AS SELECT queue, count(*) AS n FROM _honker_jobs GROUP BY queue;"
    ))
    .unwrap();
}

fn dump(conn: &Connection, sql: &str) -> Vec<Vec<honker::rusqlite::types::Value>> {
    let mut stmt = conn.prepare(sql).unwrap();
    let n = stmt.column_count();
    stmt.query_map([], |r| (0..n).map(|i| r.get(i)).collect())
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn contents(conn: &Connection) -> Vec<Vec<Vec<honker::rusqlite::types::Value>>> {
    vec![
        // Schema 1's columns (later migrations add others, NULL in old rows).
        dump(
            conn,
            "SELECT id, queue, state, payload, priority, run_at, attempts, max_attempts,
                 backoff_base_ms, backoff_max_ms, backoff_jitter, dedupe_key, expires_at,
                 created_at, worker_id, lease_token, lease_expires_at, last_error
             FROM _honker_jobs ORDER BY id",
        ),
        dump(
            conn,
            "SELECT id, queue, state, payload, priority, run_at, attempts, max_attempts,
                 backoff_base_ms, backoff_max_ms, backoff_jitter, dedupe_key, expires_at,
                 created_at, worker_id, last_error, finished_at
             FROM _honker_finished ORDER BY id",
        ),
        dump(
            conn,
            "SELECT job_id, queue, value, created_at FROM _honker_results ORDER BY job_id",
        ),
        dump(
            conn,
            "SELECT seq FROM sqlite_sequence WHERE name = '_honker_jobs'",
        ),
    ]
}

/// Every definition the migrations made, for comparing files (the version
/// table is made by the caller of the migrations, here by [`file_at`]).
fn honker_schema(conn: &Connection) -> Vec<Vec<honker::rusqlite::types::Value>> {
    dump(
        conn,
        "SELECT type, name, tbl_name, sql FROM sqlite_master
         WHERE name LIKE '\\_honker%' ESCAPE '\\' AND name <> '_honker_schema'
         ORDER BY name",
    )
}

/// A filled schema-1 file at `path`; returns its contents.
fn filled_schema_1_file(path: &Path) -> Vec<Vec<Vec<honker::rusqlite::types::Value>>> {
    let conn = file_at(path, 1);
    fill(&conn);
    contents(&conn)
}

#[test]
fn a_schema_1_file_migrates_with_every_row_and_the_id_high_water_mark() {
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("old.db");
    let before = filled_schema_1_file(&old);
    assert_eq!(before[0].len(), 5, "live jobs before");
    assert_eq!(before[3], vec![vec![9i64.into()]], "high-water mark before");

    let db = Database::open(&old).unwrap();
    let conn = Connection::open(&old).unwrap();
    assert_eq!(contents(&conn), before, "rows changed by the migration");
    let version: i64 = conn
        .query_row("SELECT max(version) FROM _honker_schema", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, honker::schema::LATEST);
    let temp_left: i64 = conn
        .query_row("SELECT count(*) FROM temp.sqlite_master", [], |r| r.get(0))
        .unwrap();
    assert_eq!(temp_left, 0);

    // The same definitions as a file made new by this build.
    let fresh = dir.path().join("fresh.db");
    drop(Database::open(&fresh).unwrap());
    assert_eq!(
        honker_schema(&conn),
        honker_schema(&Connection::open(&fresh).unwrap())
    );

    // The application's view still reads honker's table.
    let n: i64 = conn
        .query_row("SELECT n FROM app_job_counts WHERE queue = 'q'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(n, 4);

    // The queue works on the migrated rows: ids continue above the old
    // high-water mark, the lease survives, the dedupe key is still held,
    // claim order is unchanged, and a bad state is still refused.
    let q = db.queue("q").unwrap();
    assert_eq!(
        q.enqueue(json!(1), &EnqueueOptions::default()).unwrap().id,
        10
    );
    let dup = q
        .enqueue(
            json!(2),
            &EnqueueOptions {
                dedupe_key: Some("key-1".into()),
                ..EnqueueOptions::default()
            },
        )
        .unwrap();
    assert_eq!((dup.id, dup.existing), (1, true));
    let stale = Lease {
        job_id: 4,
        token: "not-the-token".into(),
    };
    assert_eq!(
        q.ack(&stale, None).unwrap_err().kind(),
        ErrorKind::LeaseLost
    );
    let lease = Lease {
        job_id: 4,
        token: "tok-running".into(),
    };
    q.ack(&lease, Some(json!("ok").into())).unwrap();
    let ids: Vec<i64> = q.claim("w2", 10).unwrap().iter().map(|j| j.id).collect();
    // Priority 5 first (job 3 was scheduled and is due), then the new job.
    assert_eq!(ids, vec![1, 2, 3, 10]);
    let bytes = db.queue("bytes").unwrap().claim("w2", 1).unwrap();
    assert_eq!(bytes[0].payload.as_bytes(), &[0u8, 0xff, 0x10][..]);
    for (table, state) in [("_honker_jobs", "done"), ("_honker_finished", "ready")] {
        let err = conn
            .execute(&format!("UPDATE {table} SET state = ?1"), [state])
            .unwrap_err();
        assert!(err.to_string().contains("CHECK"), "{table}: {err}");
    }
}

#[test]
fn an_empty_schema_1_file_migrates_without_a_high_water_mark() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.db");
    drop(file_at(&path, 1));
    let db = Database::open(&path).unwrap();
    let q = db.queue("q").unwrap();
    assert_eq!(
        q.enqueue(json!(1), &EnqueueOptions::default()).unwrap().id,
        1
    );
}

#[test]
fn several_openers_racing_on_a_schema_1_file_migrate_it_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("race.db");
    let before = filled_schema_1_file(&path);
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(4));
    let openers: Vec<_> = (0..4)
        .map(|_| {
            let (path, barrier) = (path.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                Database::open(&path).map(drop)
            })
        })
        .collect();
    for o in openers {
        o.join().unwrap().unwrap();
    }
    let conn = Connection::open(&path).unwrap();
    assert_eq!(contents(&conn), before);
    let versions = dump(&conn, "SELECT version FROM _honker_schema ORDER BY version");
    let expected: Vec<_> = MIGRATIONS.iter().map(|m| vec![m.version.into()]).collect();
    assert_eq!(versions, expected, "each migration recorded once");
}
