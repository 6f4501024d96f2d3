//! The importer's SQL. Honker's tables are read under the names the
//! importer moves them to (`_honker_import_*`), after
//! [`NORMALIZE`] has given every one of them the columns of Honker's newest
//! schema, so one statement serves every Honker version. Honker's times are
//! whole seconds, ours milliseconds.

/// Every Honker table the importer reads, as Honker 0.2.4 creates it (the
/// columns later versions added come from [`ADD_COLUMNS`]); created empty
/// when the file lacks one, so that the copy statements need no variants.
pub const NORMALIZE: &str = "
CREATE TABLE IF NOT EXISTS main._honker_import_live (
  id INTEGER PRIMARY KEY AUTOINCREMENT, queue TEXT NOT NULL, payload TEXT NOT NULL,
  state TEXT NOT NULL DEFAULT 'pending', priority INTEGER NOT NULL DEFAULT 0,
  run_at INTEGER NOT NULL DEFAULT 0, worker_id TEXT, claim_expires_at INTEGER,
  attempts INTEGER NOT NULL DEFAULT 0, max_attempts INTEGER NOT NULL DEFAULT 3,
  created_at INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS main._honker_import_dead (
  id INTEGER PRIMARY KEY, queue TEXT NOT NULL, payload TEXT NOT NULL,
  priority INTEGER NOT NULL DEFAULT 0, run_at INTEGER NOT NULL DEFAULT 0,
  attempts INTEGER NOT NULL DEFAULT 0, max_attempts INTEGER NOT NULL DEFAULT 0,
  last_error TEXT, created_at INTEGER NOT NULL DEFAULT 0, died_at INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS main._honker_import_locks (
  name TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS main._honker_import_rate_limits (
  name TEXT NOT NULL, window_start INTEGER NOT NULL, count INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS main._honker_import_scheduler_tasks (
  name TEXT PRIMARY KEY, queue TEXT NOT NULL, cron_expr TEXT NOT NULL, payload TEXT NOT NULL,
  priority INTEGER NOT NULL DEFAULT 0, next_fire_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS main._honker_import_results (
  job_id INTEGER PRIMARY KEY, value TEXT, created_at INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS main._honker_import_stream (
  offset INTEGER PRIMARY KEY AUTOINCREMENT, topic TEXT NOT NULL, key TEXT,
  payload TEXT NOT NULL, created_at INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS main._honker_import_stream_consumers (
  name TEXT NOT NULL, topic TEXT NOT NULL, offset INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (name, topic));
CREATE TABLE IF NOT EXISTS main._honker_import_notifications (
  id INTEGER PRIMARY KEY AUTOINCREMENT, channel TEXT NOT NULL, payload TEXT NOT NULL,
  created_at INTEGER NOT NULL DEFAULT 0);";

/// Columns some Honker versions lack: (table, column, definition).
pub const ADD_COLUMNS: &[(&str, &str, &str)] = &[
    ("_honker_import_live", "expires_at", "INTEGER"),
    ("_honker_import_results", "expires_at", "INTEGER"),
    ("_honker_import_scheduler_tasks", "expires_s", "INTEGER"),
    (
        "_honker_import_scheduler_tasks",
        "enabled",
        "INTEGER NOT NULL DEFAULT 1",
    ),
    (
        "_honker_import_scheduler_tasks",
        "max_attempts",
        "INTEGER NOT NULL DEFAULT 3",
    ),
];

/// ?1 table, ?2 column: 1 if the table has the column.
pub const HAS_COLUMN: &str = "SELECT count(*) FROM pragma_table_info(?1) WHERE name = ?2";

/// Every moved table, dropped once copied.
pub const DROP_ASIDE: &str = "
DROP TABLE main._honker_import_live;
DROP TABLE main._honker_import_dead;
DROP TABLE main._honker_import_locks;
DROP TABLE main._honker_import_rate_limits;
DROP TABLE main._honker_import_scheduler_tasks;
DROP TABLE main._honker_import_results;
DROP TABLE main._honker_import_stream;
DROP TABLE main._honker_import_stream_consumers;
DROP TABLE main._honker_import_notifications;";

/// A Honker payload as ours: JSON text stays text; anything else (text
/// that is not JSON, a BLOB) becomes bytes, unchanged.
macro_rules! payload {
    ($col:literal) => {
        concat!(
            "CASE WHEN typeof(",
            $col,
            ") IN ('text', 'integer', 'real') AND json_valid(CAST(",
            $col,
            " AS TEXT)) THEN CAST(",
            $col,
            " AS TEXT) ELSE CAST(",
            $col,
            " AS BLOB) END"
        )
    };
}

/// Honker's priority within ours (a 32-bit integer).
macro_rules! priority {
    () => {
        "max(min(priority, 2147483647), -2147483648)"
    };
}

/// Payloads that are not JSON text (imported as bytes), in every table.
pub const NOT_JSON: &str = concat!(
    "SELECT (SELECT count(*) FROM main._honker_import_live WHERE ",
    payload!("payload"),
    " IS NOT CAST(payload AS TEXT)) + (SELECT count(*) FROM main._honker_import_dead WHERE ",
    payload!("payload"),
    " IS NOT CAST(payload AS TEXT)) + (SELECT count(*) FROM main._honker_import_stream WHERE ",
    payload!("payload"),
    " IS NOT CAST(payload AS TEXT)) + (SELECT count(*) FROM main._honker_import_results WHERE ",
    payload!("value"),
    " IS NOT CAST(value AS TEXT))"
);

/// Distinct queue names of jobs, dead letters and schedules.
pub const QUEUE_NAMES: &str = "
SELECT queue FROM main._honker_import_live UNION SELECT queue FROM main._honker_import_dead
UNION SELECT queue FROM main._honker_import_scheduler_tasks";

/// Distinct stream names.
pub const STREAM_NAMES: &str = "
SELECT topic FROM main._honker_import_stream
UNION SELECT topic FROM main._honker_import_stream_consumers";

/// Distinct consumer names.
pub const CONSUMER_NAMES: &str = "SELECT DISTINCT name FROM main._honker_import_stream_consumers";

/// ?1 largest key. Events whose key is too long for ours: (offset, bytes).
pub const LONG_KEYS: &str = "
SELECT offset, length(CAST(key AS BLOB)) FROM main._honker_import_stream
WHERE length(CAST(key AS BLOB)) > ?1 LIMIT 5";

/// Ids that ours already use (a file honker had opened before): first few.
pub const TAKEN_IDS: &str = "
SELECT id FROM main._honker_import_live WHERE id IN (SELECT id FROM main._honker_jobs)
   OR id IN (SELECT id FROM main._honker_finished)
UNION SELECT id FROM main._honker_import_dead WHERE id IN (SELECT id FROM main._honker_jobs)
   OR id IN (SELECT id FROM main._honker_finished)
UNION SELECT job_id FROM main._honker_import_results
   WHERE job_id IN (SELECT job_id FROM main._honker_results)
LIMIT 5";

/// Streams that ours already have: first few.
pub const TAKEN_STREAMS: &str = "
SELECT name FROM main._honker_streams WHERE name IN (SELECT topic FROM main._honker_import_stream)
LIMIT 5";

/// ?1 now, ?2..?4 the default backoff (base ms, max ms, jitter). Live jobs
/// keep their ids; a pending job is ready or scheduled by its run time; a
/// processing one stays running under a new lease token until the lease
/// Honker gave it lapses (then it is reclaimed as any lapsed lease).
pub const COPY_JOBS: &str = concat!(
    "INSERT INTO main._honker_jobs (id, queue, state, payload, priority, run_at, attempts,
    max_attempts, backoff_base_ms, backoff_max_ms, backoff_jitter, dedupe_key, expires_at,
    created_at, worker_id, lease_token, lease_expires_at, last_error)
SELECT id, queue,
    CASE WHEN state = 'processing' THEN 'running'
         WHEN run_at * 1000 > ?1 THEN 'scheduled' ELSE 'ready' END,
    ",
    payload!("payload"),
    ", ",
    priority!(),
    ", run_at * 1000, attempts, max(min(max_attempts, 1000), 1), ?2, ?3, ?4, NULL,
    expires_at * 1000, created_at * 1000,
    CASE WHEN state = 'processing' THEN coalesce(worker_id, 'honker') END,
    CASE WHEN state = 'processing' THEN lower(hex(randomblob(16))) END,
    CASE WHEN state = 'processing' THEN coalesce(claim_expires_at * 1000, ?1) END,
    NULL
FROM main._honker_import_live ORDER BY id"
);

/// Imported jobs by our state: (state, count).
pub const JOB_STATES: &str = "
SELECT state, count(*) FROM main._honker_jobs
WHERE id IN (SELECT id FROM main._honker_import_live) GROUP BY state";

/// ?1..?3 the default backoff. Dead letters: Honker's `'expired'` ones are
/// ours expired, the rest dead, with their error.
pub const COPY_DEAD: &str = concat!(
    "INSERT INTO main._honker_finished (id, queue, state, payload, priority, run_at, attempts,
    max_attempts, backoff_base_ms, backoff_max_ms, backoff_jitter, dedupe_key, expires_at,
    created_at, worker_id, last_error, finished_at)
SELECT id, queue, CASE WHEN last_error = 'expired' THEN 'expired' ELSE 'dead' END, ",
    payload!("payload"),
    ", ",
    priority!(),
    ", run_at * 1000, attempts, max(min(max_attempts, 1000), 1), ?1, ?2, ?3, NULL, NULL,
    created_at * 1000, NULL, last_error, died_at * 1000
FROM main._honker_import_dead ORDER BY id"
);

/// ?1 now. Unexpired results, under their job's queue when the job is
/// still there (Honker deletes a completed job: then the queue is empty
/// and the result is read by id, as Honker's `honker_result_get` does).
pub const COPY_RESULTS: &str = concat!(
    "INSERT INTO main._honker_results (job_id, queue, value, created_at, expires_at)
SELECT r.job_id,
    coalesce((SELECT queue FROM main._honker_import_live WHERE id = r.job_id),
             (SELECT queue FROM main._honker_import_dead WHERE id = r.job_id), ''),
    CASE WHEN r.value IS NULL THEN 'null' ELSE ",
    payload!("r.value"),
    " END, r.created_at * 1000, r.expires_at * 1000
FROM main._honker_import_results r
WHERE r.expires_at IS NULL OR r.expires_at * 1000 > ?1 ORDER BY r.job_id"
);

/// ?1 now. Results past their lifetime (not imported).
pub const EXPIRED_RESULTS: &str = "
SELECT count(*) FROM main._honker_import_results
WHERE expires_at IS NOT NULL AND expires_at * 1000 <= ?1";

/// ?1 now. A stream per topic (also a topic that only a consumer names),
/// its last offset the number of its events.
pub const COPY_STREAMS: &str = "
INSERT INTO main._honker_streams (name, last_offset, created_at)
SELECT topic, sum(n), coalesce(min(t), ?1) FROM (
    SELECT topic, count(*) AS n, min(created_at) * 1000 AS t
    FROM main._honker_import_stream GROUP BY topic
    UNION ALL
    SELECT DISTINCT topic, 0, NULL FROM main._honker_import_stream_consumers)
GROUP BY topic ORDER BY topic";

/// ?1 topic, ?2 Honker offset (the last row of the previous page), ?3 page
/// size. Events in (topic, offset) order, a page at a time (the importer
/// numbers them 1, 2, … per topic as it goes: memory stays one page however
/// long a stream is).
pub const EVENTS_PAGE: &str = concat!(
    "SELECT topic, offset, nullif(CAST(key AS TEXT), ''), ",
    payload!("payload"),
    ", created_at * 1000
FROM main._honker_import_stream WHERE (topic, offset) > (?1, ?2)
ORDER BY topic, offset LIMIT ?3"
);

/// ?1 stream, ?2 offset, ?3 key, ?4 payload, ?5 created_at.
pub const INSERT_EVENT: &str = "
INSERT INTO main._honker_stream_events (stream, offset, key, payload, created_at)
VALUES (?1, ?2, ?3, ?4, ?5)";

/// ?1 now. A consumer's position: Honker's saved offset is the last event
/// processed (global); ours is the next to read in its stream, so the
/// number of the topic's events up to the old offset, plus one.
pub const COPY_CONSUMERS: &str = "
INSERT INTO main._honker_stream_offsets (stream, consumer, next_offset, updated_at)
SELECT c.topic, c.name,
    1 + (SELECT count(*) FROM main._honker_import_stream s
         WHERE s.topic = c.topic AND s.offset <= c.offset), ?1
FROM main._honker_import_stream_consumers c ORDER BY c.topic, c.name";

/// Rows of the tables that are not imported: (notifications, rate-limit
/// windows).
pub const NOT_IMPORTED: &str = "
SELECT (SELECT count(*) FROM main._honker_import_notifications),
       (SELECT count(*) FROM main._honker_import_rate_limits)";

/// ?1 now. Locks: (name, owner, expires_at s, live).
pub const LOCKS: &str = "
SELECT name, owner, expires_at, expires_at * 1000 > ?1
FROM main._honker_import_locks ORDER BY name";

/// Schedules: (name, queue, cron_expr, payload, priority, expires_s,
/// next_fire_at s, enabled, max_attempts).
pub const SCHEDULES: &str = concat!(
    "SELECT name, queue, cron_expr, ",
    payload!("payload"),
    ", priority, expires_s, next_fire_at, enabled, max_attempts
FROM main._honker_import_scheduler_tasks ORDER BY name"
);

/// ?1 name, ?2 next fire (ms), ?3 paused, ?4 anchor. Honker's next fire
/// and state, kept.
pub const KEEP_NEXT_FIRE: &str = "
UPDATE main._honker_schedules SET next_fire_at = ?2, paused = ?3, anchor_ms = ?4
WHERE name = ?1";

/// The largest job id Honker handed out (its sequence, its dead letters,
/// its results): ours continue after it.
pub const HONKER_LAST_ID: &str = "
SELECT max(coalesce((SELECT seq FROM main.sqlite_sequence WHERE name IN ('_honker_import_live', '_honker_live')), 0),
           coalesce((SELECT max(id) FROM main._honker_import_live), 0),
           coalesce((SELECT max(id) FROM main._honker_import_dead), 0),
           coalesce((SELECT max(job_id) FROM main._honker_import_results), 0))";

/// Ours continue after Honker's last id: a sequence row for our table.
pub const BUMP_SEQUENCE: &str = "
INSERT INTO main.sqlite_sequence (name, seq)
SELECT '_honker_jobs', 0
WHERE NOT EXISTS (SELECT 1 FROM main.sqlite_sequence WHERE name = '_honker_jobs')";

/// ?1 the last id: ours never hand out an id at or below it.
pub const SET_SEQUENCE: &str = "
UPDATE main.sqlite_sequence SET seq = max(seq, ?1) WHERE name = '_honker_jobs'";
