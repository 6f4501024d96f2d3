//! Looking at a honker file without changing it: what the operator's
//! `honker status` shows. The file is opened read-only (SQLite's
//! `SQLITE_OPEN_READONLY`: no migration, no bootstrap, no maintenance, no
//! journal-mode switch); an older schema is reported with the migrations an
//! upgrade would apply, a newer one refused (`SCHEMA_TOO_NEW`), a Honker
//! file reported with its objects (import it first).

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, OptionalExtension};

use crate::error::{Error, ErrorKind, Result};
use crate::raw::Conn;
use crate::schema::{LATEST, MIGRATIONS};

/// A queue at a glance.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueueStatus {
    /// Its name.
    pub name: String,
    /// Due now.
    pub ready: i64,
    /// Due later.
    pub scheduled: i64,
    /// Claimed, under a lease.
    pub running: i64,
    /// Dead letters.
    pub dead: i64,
    /// When the oldest due job became due (ms), if any is due.
    pub oldest_ready_at: Option<i64>,
    /// The pause that holds it (its own, else all queues'), if paused.
    pub pause: Option<crate::queue::Pause>,
    /// Its concurrency caps (ADR 35).
    pub caps: crate::queue::Concurrency,
    /// How it shares its claims among its keys (ADR 36).
    pub fairness: crate::queue::Fairness,
}

/// A stream consumer's or group's place.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReaderStatus {
    /// The consumer's or group's name.
    pub name: String,
    /// The next offset it reads.
    pub next_offset: i64,
    /// Events published that it has not read yet.
    pub lag: i64,
    /// A group's events handed out and not yet acked (0 for a consumer).
    pub pending: i64,
    /// A group's dead letters (0 for a consumer).
    pub dead: i64,
}

/// A stream at a glance.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamStatus {
    /// Its name.
    pub name: String,
    /// The last offset published.
    pub last_offset: i64,
    /// Independent consumers.
    pub consumers: Vec<ReaderStatus>,
    /// Consumer groups.
    pub groups: Vec<ReaderStatus>,
}

/// A schedule at a glance.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScheduleStatus {
    /// Its name.
    pub name: String,
    /// The queue it fires into.
    pub queue: String,
    /// Its rule.
    pub spec: String,
    /// Its IANA zone.
    pub time_zone: String,
    /// Whether it is paused.
    pub paused: bool,
    /// Its next boundary (ms), if it fires again.
    pub next_fire_at: Option<i64>,
    /// Boundaries missed outside the catch-up window.
    pub missed: i64,
}

/// A held lock.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LockStatus {
    /// Its name.
    pub name: String,
    /// Who holds it.
    pub owner: String,
    /// The holder's fencing token.
    pub token: i64,
    /// When the hold lapses (ms).
    pub expires_at: i64,
}

/// Everything at a glance.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileStatus {
    /// The file's honker schema version (0: honker never migrated it).
    pub schema_version: i64,
    /// The version this build writes.
    pub latest: i64,
    /// The migrations an upgrade (any honker open) would apply.
    pub pending_migrations: Vec<String>,
    /// Honker's objects, if the file holds them (import it first).
    pub honker_objects: Vec<String>,
    /// The pause of all queues, if they are paused.
    pub paused_all: Option<crate::queue::Pause>,
    /// Queues, by name (a paused queue with no jobs too).
    pub queues: Vec<QueueStatus>,
    /// Streams, by name.
    pub streams: Vec<StreamStatus>,
    /// Schedules, by name.
    pub schedules: Vec<ScheduleStatus>,
    /// Held locks (lapsed holds left out), by name.
    pub locks: Vec<LockStatus>,
}

fn sql_err(e: rusqlite::Error) -> Error {
    Error::from(e)
}

/// A dead letter, as `honker dead list` shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeadLetter {
    /// The job's id.
    pub id: i64,
    /// Its queue.
    pub queue: String,
    /// Claims it had.
    pub attempts: i64,
    /// Its last error.
    pub last_error: Option<String>,
    /// When it died (ms).
    pub died_at: i64,
}

/// A job in any state, as `honker jobs` shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobRow {
    /// Its id.
    pub id: i64,
    /// Its queue.
    pub queue: String,
    /// `ready`, `scheduled`, `running`, `dead`, `cancelled`, `expired` or
    /// `completed` (a scheduled job that is due is `ready`).
    pub state: String,
    /// Its priority.
    pub priority: i64,
    /// When it is (or was) due (ms).
    pub run_at: i64,
    /// Claims so far.
    pub attempts: i64,
    /// Its attempt budget.
    pub max_attempts: i64,
    /// The worker holding it (running), or the last one.
    pub worker_id: Option<String>,
    /// When a running job's lease lapses (ms).
    pub lease_expires_at: Option<i64>,
    /// Its last error (or cancel reason).
    pub last_error: Option<String>,
    /// Its payload: JSON text, or `None` for bytes.
    pub payload_json: Option<String>,
    /// Its payload's size in bytes.
    pub payload_bytes: i64,
}

/// ?1 queue or NULL, ?2 state or NULL, ?3 now, ?4 limit, ?5 id or NULL.
const JOBS: &str = "
SELECT * FROM (
  SELECT id, queue,
         CASE WHEN state = 'scheduled' AND run_at <= ?3 THEN 'ready' ELSE state END AS st,
         priority, run_at, attempts, max_attempts, worker_id, lease_expires_at, last_error,
         CASE WHEN typeof(payload) = 'text' THEN payload END, length(CAST(payload AS BLOB))
  FROM _honker_jobs
  UNION ALL
  SELECT id, queue, state, priority, run_at, attempts, max_attempts, worker_id, NULL,
         last_error, CASE WHEN typeof(payload) = 'text' THEN payload END,
         length(CAST(payload AS BLOB))
  FROM _honker_finished)
WHERE (?1 IS NULL OR queue = ?1) AND (?2 IS NULL OR st = ?2) AND (?5 IS NULL OR id = ?5)
ORDER BY id LIMIT ?4";

/// `path` with `suffix` appended (`-wal`, `-shm`).
pub(crate) fn with_suffix(path: &Path, suffix: &str) -> std::path::PathBuf {
    let mut s = path.as_os_str().to_os_string();
    s.push(suffix);
    s.into()
}

/// A read-only connection to `path` (which must exist), for the operator's
/// read commands, `doctor` and `backup`; it never writes the file.
///
/// A WAL-mode file is read through its `-shm` index, which a read-only
/// connection must still create when it is missing. Where this process may
/// not create it (a read-only mount, a directory of another user's), the
/// file is opened `immutable` if no `-wal` holds commits (the last
/// connection checkpointed and removed it, so the file alone is the whole
/// database, and no writer can be running, since a writer needs the `-shm`
/// too); with commits in a `-wal` and no `-shm`, reading is refused with
/// what to do.
///
/// A writer holding the lock is waited for up to `busy`. (Through the
/// `busy_timeout` pragma: rusqlite's `busy_timeout` also records client data,
/// which SQLite before 3.44 lacks, and the system SQLite the Swift package
/// runs on may be older.)
pub(crate) fn open_read_only(path: &Path, busy: Duration) -> Result<Connection> {
    if !path.is_file() {
        return Err(Error::invalid(format!(
            "{} is not a database file",
            path.display()
        )));
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = if read_immutable(path)? {
        Connection::open_with_flags(
            crate::fsaccess::immutable_uri(path),
            flags | OpenFlags::SQLITE_OPEN_URI,
        )
    } else {
        Connection::open_with_flags(path, flags)
    }
    .map_err(sql_err)?;
    conn.execute_batch(&format!("PRAGMA busy_timeout = {}", busy.as_millis()))
        .map_err(sql_err)?;
    Ok(conn)
}

/// Whether [`open_read_only`] opens `path` `immutable` (no `-shm`, and this
/// process may not create one); `UNSAFE` when it cannot be read at all.
pub(crate) fn read_immutable(path: &Path) -> Result<bool> {
    if with_suffix(path, "-shm").exists()
        || crate::fsaccess::may_create_in(crate::fsaccess::dir_of(path))
    {
        return Ok(false);
    }
    let wal = std::fs::metadata(with_suffix(path, "-wal")).map_or(0, |m| m.len());
    if wal > 0 {
        return Err(Error::new(
            ErrorKind::Unsafe,
            format!(
                "{} has commits in its -wal but no -shm, and this user may not create one in \
                 its directory: read it as a user who may, or let honker open it once (its \
                 last connection checkpoints the -wal into the file)",
                path.display()
            ),
        ));
    }
    Ok(true)
}

/// Runs `f` in one read transaction of a read-only connection to `path`
/// (which must exist), after checking that this build understands the
/// file's schema; `f` gets the schema version.
fn read_only<T>(path: &Path, f: impl FnOnce(&Connection, i64) -> Result<T>) -> Result<T> {
    let conn = open_read_only(path, Duration::from_secs(5))?;
    conn.execute_batch("BEGIN").map_err(sql_err)?;
    let out = version(&conn).and_then(|v| f(&conn, v));
    let _ = conn.execute_batch("COMMIT");
    out
}

fn version(conn: &Connection) -> Result<i64> {
    // SAFETY: `conn` is open and used by this thread only while `raw` lives.
    let raw = unsafe { Conn::new(conn.handle(), None) };
    let version = crate::schema::current_version(raw)?;
    if version > LATEST {
        return Err(Error::new(
            ErrorKind::SchemaTooNew,
            format!(
                "this file has honker schema version {version}, but this build knows versions \
                 up to {LATEST}; use a newer honker"
            ),
        ));
    }
    Ok(version)
}

/// Every row of `sql` with `params`, each made by `row` (statements are
/// cached on the connection).
fn rows<T, P: rusqlite::Params>(
    conn: &Connection,
    sql: &str,
    params: P,
    row: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> Result<Vec<T>> {
    conn.prepare_cached(sql)
        .map_err(sql_err)?
        .query_map(params, row)
        .map_err(sql_err)?
        .collect::<rusqlite::Result<_>>()
        .map_err(sql_err)
}

fn has(conn: &Connection, table: &str) -> Result<bool> {
    conn.query_row(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1",
        [table],
        |_| Ok(()),
    )
    .optional()
    .map(|o| o.is_some())
    .map_err(sql_err)
}

/// Every queue's counters and jobs by state (ADR 27), read-only: what
/// `honker metrics` exposes. A file older than schema 10 has no counters yet
/// (they start when it is upgraded): only its jobs by state are read.
pub fn metrics(
    path: impl AsRef<Path>,
    now: i64,
) -> Result<Vec<crate::queue::metrics::QueueMetrics>> {
    read_only(path.as_ref(), |conn, _| {
        if !has(conn, "_honker_jobs")? || !has(conn, "_honker_finished")? {
            return Ok(Vec::new());
        }
        let counters = has(conn, "_honker_queue_counters")?;
        // SAFETY: `conn` is open and used by this thread only while `raw` lives.
        let raw = unsafe { Conn::new(conn.handle(), None) };
        crate::queue::metrics::read(raw, None, counters, now)
    })
}

/// Opens `path` read-only (it must exist) and reads its status at `now`
/// (ms).
pub fn status(path: impl AsRef<Path>, now: i64) -> Result<FileStatus> {
    read_only(path.as_ref(), |conn, version| read(conn, version, now))
}

/// Up to `limit` dead letters (of `queue`, or of every queue), oldest id
/// first, read-only.
pub fn dead_letters(
    path: impl AsRef<Path>,
    queue: Option<&str>,
    limit: usize,
) -> Result<Vec<DeadLetter>> {
    let limit = crate::validate::batch_usize(limit)? as i64;
    read_only(path.as_ref(), |conn, _| {
        if !has(conn, "_honker_finished")? {
            return Ok(Vec::new());
        }
        rows(
            conn,
            "SELECT id, queue, attempts, last_error, finished_at FROM _honker_finished
             WHERE state = 'dead' AND (?1 IS NULL OR queue = ?1) ORDER BY id LIMIT ?2",
            rusqlite::params![queue, limit],
            |r| {
                Ok(DeadLetter {
                    id: r.get(0)?,
                    queue: r.get(1)?,
                    attempts: r.get(2)?,
                    last_error: r.get(3)?,
                    died_at: r.get(4)?,
                })
            },
        )
    })
}

/// Up to `limit` jobs in any state (of `queue`, in `state`, if given),
/// oldest id first, read-only.
pub fn jobs(
    path: impl AsRef<Path>,
    queue: Option<&str>,
    state: Option<&str>,
    limit: usize,
    now: i64,
) -> Result<Vec<JobRow>> {
    if let Some(s) = state {
        if crate::queue::JobState::parse(s).is_none() {
            return Err(Error::invalid(format!(
                "unknown job state {s:?} (ready, scheduled, running, dead, cancelled, \
                 expired, completed)"
            )));
        }
    }
    let limit = crate::validate::batch_usize(limit)? as i64;
    read_only(path.as_ref(), |conn, _| {
        job_rows(conn, queue, state, limit, None, now)
    })
}

/// The job `id` in any state, read-only.
pub fn job(path: impl AsRef<Path>, id: i64, now: i64) -> Result<Option<JobRow>> {
    crate::validate::job_id(id)?;
    read_only(path.as_ref(), |conn, _| {
        Ok(job_rows(conn, None, None, 1, Some(id), now)?.pop())
    })
}

fn job_rows(
    conn: &Connection,
    queue: Option<&str>,
    state: Option<&str>,
    limit: i64,
    id: Option<i64>,
    now: i64,
) -> Result<Vec<JobRow>> {
    if !has(conn, "_honker_jobs")? || !has(conn, "_honker_finished")? {
        return Ok(Vec::new());
    }
    rows(
        conn,
        JOBS,
        rusqlite::params![queue, state, now, limit, id],
        |r| {
            Ok(JobRow {
                id: r.get(0)?,
                queue: r.get(1)?,
                state: r.get(2)?,
                priority: r.get(3)?,
                run_at: r.get(4)?,
                attempts: r.get(5)?,
                max_attempts: r.get(6)?,
                worker_id: r.get(7)?,
                lease_expires_at: r.get(8)?,
                last_error: r.get(9)?,
                payload_json: r.get(10)?,
                payload_bytes: r.get(11)?,
            })
        },
    )
}

fn read(conn: &Connection, version: i64, now: i64) -> Result<FileStatus> {
    // SAFETY: `conn` is open and used by this thread only while `raw` lives.
    let raw = unsafe { Conn::new(conn.handle(), None) };
    let mut s = FileStatus {
        schema_version: version,
        latest: LATEST,
        pending_migrations: MIGRATIONS
            .iter()
            .filter(|m| m.version > version)
            .map(|m| format!("{} {}", m.version, m.name))
            .collect(),
        honker_objects: crate::schema::honker_objects(raw)?,
        ..FileStatus::default()
    };
    let has = |table: &str| has(conn, table);
    if has("_honker_jobs")? && has("_honker_finished")? {
        s.queues = queues(conn, now)?;
    }
    if has("_honker_settings")? {
        use crate::queue::ops;
        s.paused_all = ops::pauses(raw, "")?.into_iter().next();
        let mut own: std::collections::HashMap<_, _> =
            ops::paused_queues(raw)?.into_iter().collect();
        for q in &mut s.queues {
            q.pause = own.remove(&q.name).or_else(|| s.paused_all.clone());
        }
        // A paused queue with no job yet is listed too, and so is a capped one.
        for (name, pause) in own {
            s.queues.push(QueueStatus {
                name,
                pause: Some(pause),
                ..QueueStatus::default()
            });
        }
        for name in ops::capped_queues(raw)? {
            if !s.queues.iter().any(|q| q.name == name) {
                s.queues.push(QueueStatus {
                    name,
                    pause: s.paused_all.clone(),
                    ..QueueStatus::default()
                });
            }
        }
        s.queues.sort_by(|a, b| a.name.cmp(&b.name));
        for q in &mut s.queues {
            let (_, caps, fair) = crate::rate::ops::queue_controls(raw, &q.name)?;
            q.caps = caps;
            q.fairness = fair.map(|f| f.public()).unwrap_or_default();
        }
    }
    if has("_honker_streams")? && has("_honker_stream_groups")? {
        s.streams = streams(conn)?;
    }
    if has("_honker_schedules")? {
        s.schedules = schedules(conn)?;
    }
    if has("_honker_lock_holders")? {
        s.locks = locks(conn, now)?;
    }
    Ok(s)
}

fn queues(conn: &Connection, now: i64) -> Result<Vec<QueueStatus>> {
    let mut st = conn
        .prepare(
            "SELECT queue,
                    sum(state = 'ready' OR (state = 'scheduled' AND run_at <= ?1)),
                    sum(state = 'scheduled' AND run_at > ?1),
                    sum(state = 'running'), 0,
                    min(CASE WHEN state = 'ready' OR (state = 'scheduled' AND run_at <= ?1)
                             THEN run_at END)
             FROM _honker_jobs GROUP BY queue
             UNION ALL
             SELECT queue, 0, 0, 0, count(*), NULL FROM _honker_finished
             WHERE state = 'dead' GROUP BY queue",
        )
        .map_err(sql_err)?;
    let rows = st
        .query_map([now], |r| {
            Ok(QueueStatus {
                name: r.get(0)?,
                ready: r.get(1)?,
                scheduled: r.get(2)?,
                running: r.get(3)?,
                dead: r.get(4)?,
                oldest_ready_at: r.get(5)?,
                pause: None,
                caps: crate::queue::Concurrency::default(),
                fairness: crate::queue::Fairness::default(),
            })
        })
        .map_err(sql_err)?;
    let mut out: Vec<QueueStatus> = Vec::new();
    for row in rows {
        let q = row.map_err(sql_err)?;
        match out.iter_mut().find(|o| o.name == q.name) {
            Some(o) => {
                o.ready += q.ready;
                o.scheduled += q.scheduled;
                o.running += q.running;
                o.dead += q.dead;
                o.oldest_ready_at = o.oldest_ready_at.or(q.oldest_ready_at);
            }
            None => out.push(q),
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

fn streams(conn: &Connection) -> Result<Vec<StreamStatus>> {
    let mut out: Vec<StreamStatus> = rows(
        conn,
        "SELECT name, last_offset FROM _honker_streams ORDER BY name",
        [],
        |r| {
            Ok(StreamStatus {
                name: r.get(0)?,
                last_offset: r.get(1)?,
                ..StreamStatus::default()
            })
        },
    )?;
    for s in &mut out {
        let last = s.last_offset;
        s.consumers = rows(
            conn,
            "SELECT consumer, next_offset FROM _honker_stream_offsets
             WHERE stream = ?1 ORDER BY consumer",
            [&s.name],
            |r| {
                let next: i64 = r.get(1)?;
                Ok(ReaderStatus {
                    name: r.get(0)?,
                    next_offset: next,
                    lag: (last + 1 - next).max(0),
                    ..ReaderStatus::default()
                })
            },
        )?;
        s.groups = rows(
            conn,
            "SELECT g.grp, g.next_offset,
                    (SELECT count(*) FROM _honker_stream_group_events e
                     WHERE e.stream = g.stream AND e.grp = g.grp AND e.state = 'delivered'),
                    (SELECT count(*) FROM _honker_stream_group_events e
                     WHERE e.stream = g.stream AND e.grp = g.grp AND e.state = 'dead')
             FROM _honker_stream_groups g WHERE g.stream = ?1 ORDER BY g.grp",
            [&s.name],
            |r| {
                let next: i64 = r.get(1)?;
                Ok(ReaderStatus {
                    name: r.get(0)?,
                    next_offset: next,
                    lag: (last + 1 - next).max(0),
                    pending: r.get(2)?,
                    dead: r.get(3)?,
                })
            },
        )?;
    }
    Ok(out)
}

fn schedules(conn: &Connection) -> Result<Vec<ScheduleStatus>> {
    rows(
        conn,
        "SELECT name, queue, spec, time_zone, paused, next_fire_at, missed
         FROM _honker_schedules ORDER BY name",
        [],
        |r| {
            Ok(ScheduleStatus {
                name: r.get(0)?,
                queue: r.get(1)?,
                spec: r.get(2)?,
                time_zone: r.get(3)?,
                paused: r.get::<_, i64>(4)? != 0,
                next_fire_at: r.get(5)?,
                missed: r.get(6)?,
            })
        },
    )
}

fn locks(conn: &Connection, now: i64) -> Result<Vec<LockStatus>> {
    rows(
        conn,
        "SELECT name, owner, token, expires_at FROM _honker_lock_holders
         WHERE name <> '' AND expires_at > ?1 ORDER BY name",
        [now],
        |r| {
            Ok(LockStatus {
                name: r.get(0)?,
                owner: r.get(1)?,
                token: r.get(2)?,
                expires_at: r.get(3)?,
            })
        },
    )
}

/// A stream event or a channel message, as `honker tail` and `honker
/// listen` print it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Message {
    /// The event's offset in its stream, or the message's id.
    pub offset: i64,
    /// The event's key.
    pub key: Option<String>,
    /// The payload as JSON text, or `None` for bytes.
    pub payload_json: Option<String>,
    /// The payload's size in bytes.
    pub payload_bytes: i64,
    /// When it was published (ms).
    pub created_at: i64,
}

fn messages(
    conn: &Connection,
    table: &str,
    sql: &str,
    p: &[&dyn rusqlite::ToSql],
) -> Result<Vec<Message>> {
    if !has(conn, table)? {
        return Ok(Vec::new());
    }
    rows(conn, sql, p, |r| {
        Ok(Message {
            offset: r.get(0)?,
            key: r.get(1)?,
            payload_json: r.get(2)?,
            payload_bytes: r.get(3)?,
            created_at: r.get(4)?,
        })
    })
}

/// Up to `limit` events of `stream` after offset `after`, read-only.
pub fn events(
    path: impl AsRef<Path>,
    stream: &str,
    after: i64,
    limit: usize,
) -> Result<Vec<Message>> {
    crate::validate::name("stream", stream)?;
    let limit = crate::validate::batch_usize(limit)? as i64;
    read_only(path.as_ref(), |conn, _| {
        messages(
            conn,
            "_honker_stream_events",
            "SELECT offset, key, CASE WHEN typeof(payload) = 'text' THEN payload END,
                    length(CAST(payload AS BLOB)), created_at
             FROM _honker_stream_events WHERE stream = ?1 AND offset > ?2
             ORDER BY offset LIMIT ?3",
            rusqlite::params![stream, after, limit],
        )
    })
}

/// The last offset of `stream` (0: none), read-only.
pub fn last_offset(path: impl AsRef<Path>, stream: &str) -> Result<i64> {
    read_only(path.as_ref(), |conn, _| {
        if !has(conn, "_honker_streams")? {
            return Ok(0);
        }
        Ok(conn
            .query_row(
                "SELECT last_offset FROM _honker_streams WHERE name = ?1",
                [stream],
                |r| r.get(0),
            )
            .optional()
            .map_err(sql_err)?
            .unwrap_or(0))
    })
}

/// Up to `limit` messages of `channel` with ids above `after` (`None`:
/// the last id now, and no messages), read-only: (messages, last id).
pub fn channel_messages(
    path: impl AsRef<Path>,
    channel: &str,
    after: Option<i64>,
    limit: usize,
) -> Result<(Vec<Message>, i64)> {
    crate::validate::name("channel", channel)?;
    let limit = crate::validate::batch_usize(limit)? as i64;
    read_only(path.as_ref(), |conn, _| {
        if !has(conn, "_honker_channel_messages")? {
            return Ok((Vec::new(), after.unwrap_or(0)));
        }
        let Some(after) = after else {
            let last: i64 = conn
                .query_row(
                    "SELECT coalesce(max(id), 0) FROM _honker_channel_messages",
                    [],
                    |r| r.get(0),
                )
                .map_err(sql_err)?;
            return Ok((Vec::new(), last));
        };
        let m = messages(
            conn,
            "_honker_channel_messages",
            "SELECT id, NULL, CASE WHEN typeof(payload) = 'text' THEN payload END,
                    length(CAST(payload AS BLOB)), created_at
             FROM _honker_channel_messages WHERE channel = ?1 AND id > ?2
             ORDER BY id LIMIT ?3",
            rusqlite::params![channel, after, limit],
        )?;
        let last = m.last().map_or(after, |x| x.offset);
        Ok((m, last))
    })
}

/// Waits for commits to a file from any process without changing it (the
/// watcher, on its private read connection): what `honker tail --follow`
/// and `honker listen` sleep on instead of polling.
#[derive(Debug)]
pub struct Follower {
    watcher: std::sync::Arc<crate::watcher::Watcher>,
}

impl Follower {
    /// Starts watching `path`.
    pub fn new(path: impl AsRef<Path>) -> Result<Follower> {
        let path = std::fs::canonicalize(path.as_ref()).map_err(|e| {
            Error::invalid(format!("cannot resolve {}: {e}", path.as_ref().display()))
        })?;
        let watcher =
            crate::watcher::watcher_for(&path, Duration::from_secs(5), Duration::from_secs(5));
        watcher.ensure_running()?;
        Ok(Follower { watcher })
    }

    /// A mark to pass to [`wait_past`](Self::wait_past): take it before
    /// reading, so a commit right after the read is not missed.
    pub fn mark(&self) -> u64 {
        self.watcher.signal().generation()
    }

    /// Sleeps until something may have been committed since `mark`, or
    /// `timeout` passes. True if something may have changed.
    pub fn wait_past(&self, mark: u64, timeout: Duration) -> bool {
        self.watcher
            .signal()
            .wait_past(mark, std::time::Instant::now() + timeout)
    }
}
