-- honker schema 1: the job queue.
--
-- Live jobs are rows of _honker_jobs in one of three physical states, each
-- with its own partial index so that claiming is an index seek however many
-- jobs are in flight, delayed or dead:
--   ready      due now; claimed in (priority DESC, run_at, id) order
--   scheduled  run_at in the future; promoted to ready by claim once due
--   running    leased until lease_expires_at; reclaimed by claim once lapsed
-- Finished jobs (dead, cancelled, expired, and completed when retention asks)
-- live in _honker_finished, away from the hot path.
-- All times are INTEGER milliseconds since the Unix epoch.

CREATE TABLE _honker_jobs (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused
    queue            TEXT    NOT NULL,
    state            TEXT    NOT NULL CHECK (state IN ('ready', 'scheduled', 'running')),
    payload                  NOT NULL,                   -- JSON text, or a BLOB
    priority         INTEGER NOT NULL DEFAULT 0,         -- higher runs first
    run_at           INTEGER NOT NULL,
    attempts         INTEGER NOT NULL DEFAULT 0,         -- claims so far
    max_attempts     INTEGER NOT NULL,
    backoff_base_ms  INTEGER NOT NULL,                   -- the producer's retry policy
    backoff_max_ms   INTEGER NOT NULL,
    backoff_jitter   REAL    NOT NULL,
    dedupe_key       TEXT,
    expires_at       INTEGER,                            -- not started by then: expired
    created_at       INTEGER NOT NULL,
    worker_id        TEXT,                               -- running only
    lease_token      TEXT,                               -- running only
    lease_expires_at INTEGER,                            -- running only
    last_error       TEXT
);

CREATE INDEX _honker_jobs_ready
    ON _honker_jobs (queue, priority DESC, run_at, id) WHERE state = 'ready';
CREATE INDEX _honker_jobs_scheduled
    ON _honker_jobs (queue, run_at) WHERE state = 'scheduled';
CREATE INDEX _honker_jobs_running
    ON _honker_jobs (queue, lease_expires_at) WHERE state = 'running';
CREATE INDEX _honker_jobs_expiry
    ON _honker_jobs (queue, expires_at)
    WHERE expires_at IS NOT NULL AND state IN ('ready', 'scheduled');
-- A dedupe key is held while its job is live (ready, scheduled or running).
CREATE UNIQUE INDEX _honker_jobs_dedupe
    ON _honker_jobs (queue, dedupe_key) WHERE dedupe_key IS NOT NULL;

CREATE TABLE _honker_finished (
    id               INTEGER PRIMARY KEY,                -- the job's id
    queue            TEXT    NOT NULL,
    state            TEXT    NOT NULL CHECK (state IN ('dead', 'cancelled', 'expired', 'completed')),
    payload                  NOT NULL,
    priority         INTEGER NOT NULL,
    run_at           INTEGER NOT NULL,
    attempts         INTEGER NOT NULL,
    max_attempts     INTEGER NOT NULL,
    backoff_base_ms  INTEGER NOT NULL,
    backoff_max_ms   INTEGER NOT NULL,
    backoff_jitter   REAL    NOT NULL,
    dedupe_key       TEXT,
    expires_at       INTEGER,
    created_at       INTEGER NOT NULL,
    worker_id        TEXT,                               -- the last worker, if any
    last_error       TEXT,                               -- or the cancel reason
    finished_at      INTEGER NOT NULL
);

CREATE INDEX _honker_finished_queue ON _honker_finished (queue, state, id);
CREATE INDEX _honker_finished_age ON _honker_finished (state, finished_at);

CREATE TABLE _honker_results (
    job_id     INTEGER PRIMARY KEY,
    queue      TEXT    NOT NULL,
    value              NOT NULL,                         -- JSON text, or a BLOB
    created_at INTEGER NOT NULL
);

CREATE INDEX _honker_results_age ON _honker_results (created_at);
