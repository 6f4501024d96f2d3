//! The baseline: the same operations as raw rusqlite prepared statements on
//! honker's own tables, with nothing honker adds (no validation, no
//! housekeeping, no wake-ups).

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use honker::Durability;
use rusqlite::{params, Connection};

pub struct Raw {
    conn: Connection,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

const INSERT: &str = "INSERT INTO _honker_jobs (queue, state, payload, priority, run_at,
    max_attempts, backoff_base_ms, backoff_max_ms, backoff_jitter, created_at)
    VALUES ('emails', 'ready', ?1, 0, ?2, 3, 1000, 3600000, 0.5, ?2)";

const CLAIM: &str = "UPDATE _honker_jobs
    SET state = 'running', attempts = attempts + 1, worker_id = 'raw',
        lease_token = lower(hex(randomblob(16))), lease_expires_at = ?2
    WHERE id IN (SELECT id FROM _honker_jobs WHERE queue = ?1 AND state = 'ready'
                 ORDER BY priority DESC, run_at, id LIMIT ?3)
    RETURNING id, lease_token";

const ACK: &str = "DELETE FROM _honker_jobs WHERE id = ?1 AND lease_token = ?2";

impl Raw {
    pub fn open(path: &Path, durability: Durability) -> Raw {
        // The same open flags as honker's connections (no SQLite mutex: one
        // thread uses the connection), so the baseline is the real floor.
        let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE
            | rusqlite::OpenFlags::SQLITE_OPEN_CREATE
            | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).expect("open raw");
        let sync = match durability {
            Durability::Normal => "NORMAL",
            Durability::Full => "FULL",
        };
        conn.execute_batch(&format!(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = {sync}; PRAGMA busy_timeout = 10000;"
        ))
        .expect("pragmas");
        Raw { conn }
    }

    fn tx<T>(&self, f: impl FnOnce(&Connection) -> T) -> T {
        self.conn
            .prepare_cached("BEGIN IMMEDIATE")
            .and_then(|mut s| s.execute([]))
            .expect("begin");
        let v = f(&self.conn);
        self.conn
            .prepare_cached("COMMIT")
            .and_then(|mut s| s.execute([]))
            .expect("commit");
        v
    }

    /// Inserts the payloads in one transaction.
    pub fn enqueue_tx(&self, payloads: &[String]) {
        let now = now_ms();
        self.tx(|c| {
            let mut stmt = c.prepare_cached(INSERT).expect("prepare");
            for p in payloads {
                stmt.execute(params![p, now]).expect("insert");
            }
        });
    }

    /// Leases up to `n` ready jobs; returns (id, token) pairs.
    pub fn claim(&self, queue: &str, n: usize) -> Vec<(i64, String)> {
        let lease = now_ms() + 60_000;
        self.tx(|c| {
            let mut stmt = c.prepare_cached(CLAIM).expect("prepare");
            stmt.query_map(params![queue, lease, n as i64], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .expect("claim")
            .map(|r| r.expect("row"))
            .collect()
        })
    }

    /// Deletes the jobs in one transaction.
    pub fn ack(&self, jobs: &[(i64, String)]) {
        self.tx(|c| {
            let mut stmt = c.prepare_cached(ACK).expect("prepare");
            for (id, token) in jobs {
                assert_eq!(stmt.execute(params![id, token]).expect("ack"), 1);
            }
        });
    }
}

/// Adds 100k running (leases far in the future), 100k scheduled (far in the
/// future) and 100k dead rows to queue `emails`, for W7.
pub fn fill_100k_each(path: &Path) {
    let conn = Connection::open(path).expect("open");
    let now = now_ms();
    let far = now + 86_400_000;
    conn.execute_batch(&format!(
        "BEGIN;
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000)
         INSERT INTO _honker_jobs (queue, state, payload, run_at, attempts, max_attempts,
             backoff_base_ms, backoff_max_ms, backoff_jitter, created_at,
             worker_id, lease_token, lease_expires_at)
         SELECT 'emails', 'running', '{{}}', {now}, 1, 3, 1000, 3600000, 0.5, {now},
             'busy', hex(randomblob(16)), {far} + i FROM n;
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000)
         INSERT INTO _honker_jobs (queue, state, payload, run_at, max_attempts,
             backoff_base_ms, backoff_max_ms, backoff_jitter, created_at)
         SELECT 'emails', 'scheduled', '{{}}', {far} + i, 3, 1000, 3600000, 0.5, {now} FROM n;
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000)
         INSERT INTO _honker_finished (id, queue, state, payload, priority, run_at, attempts,
             max_attempts, backoff_base_ms, backoff_max_ms, backoff_jitter, created_at,
             last_error, finished_at)
         SELECT 100000000 + i, 'emails', 'dead', '{{}}', 0, {now}, 3, 3, 1000, 3600000, 0.5,
             {now}, 'boom', {now} FROM n;
         COMMIT;"
    ))
    .expect("fill");
}
