-- honker schema 2: the state CHECK constraints as OR chains.
--
-- Schema 1 wrote `CHECK (state IN ('ready', 'scheduled', 'running'))`. SQLite
-- evaluates a constant IN list of three or more values through an ephemeral
-- table, opened for every row written: a third of the cost of a bulk enqueue
-- and of a per-row claim (bench/python/w3_schema.py measures it). An OR chain
-- checks the same thing with plain comparisons.
--
-- SQLite cannot alter a CHECK constraint, so both tables are rebuilt: rows go
-- to TEMP copies, the tables are dropped (with their indexes) and created
-- again, and the rows come back with their ids. The AUTOINCREMENT high-water
-- mark of _honker_jobs is carried over, so ids are never reused. No RENAME is
-- used, so views and triggers elsewhere in the file are neither rewritten nor
-- required to be valid. One pass over the rows, once, under the migration's
-- write lock.

CREATE TEMP TABLE _honker_m2_jobs AS SELECT * FROM main._honker_jobs;
CREATE TEMP TABLE _honker_m2_finished AS SELECT * FROM main._honker_finished;
CREATE TEMP TABLE _honker_m2_seq AS
    SELECT seq FROM main.sqlite_sequence WHERE name = '_honker_jobs';

DROP TABLE main._honker_jobs;
DROP TABLE main._honker_finished;

CREATE TABLE main._honker_jobs (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused
    queue            TEXT    NOT NULL,
    state            TEXT    NOT NULL
        CHECK (state = 'ready' OR state = 'scheduled' OR state = 'running'),
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

CREATE INDEX main._honker_jobs_ready
    ON _honker_jobs (queue, priority DESC, run_at, id) WHERE state = 'ready';
CREATE INDEX main._honker_jobs_scheduled
    ON _honker_jobs (queue, run_at) WHERE state = 'scheduled';
CREATE INDEX main._honker_jobs_running
    ON _honker_jobs (queue, lease_expires_at) WHERE state = 'running';
CREATE INDEX main._honker_jobs_expiry
    ON _honker_jobs (queue, expires_at)
    WHERE expires_at IS NOT NULL AND state IN ('ready', 'scheduled');
-- A dedupe key is held while its job is live (ready, scheduled or running).
CREATE UNIQUE INDEX main._honker_jobs_dedupe
    ON _honker_jobs (queue, dedupe_key) WHERE dedupe_key IS NOT NULL;

CREATE TABLE main._honker_finished (
    id               INTEGER PRIMARY KEY,                -- the job's id
    queue            TEXT    NOT NULL,
    state            TEXT    NOT NULL
        CHECK (state = 'dead' OR state = 'cancelled' OR state = 'expired'
               OR state = 'completed'),
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

CREATE INDEX main._honker_finished_queue ON _honker_finished (queue, state, id);
CREATE INDEX main._honker_finished_age ON _honker_finished (state, finished_at);

INSERT INTO main._honker_jobs (id, queue, state, payload, priority, run_at, attempts,
    max_attempts, backoff_base_ms, backoff_max_ms, backoff_jitter, dedupe_key, expires_at,
    created_at, worker_id, lease_token, lease_expires_at, last_error)
SELECT id, queue, state, payload, priority, run_at, attempts,
    max_attempts, backoff_base_ms, backoff_max_ms, backoff_jitter, dedupe_key, expires_at,
    created_at, worker_id, lease_token, lease_expires_at, last_error
FROM temp._honker_m2_jobs ORDER BY id;

INSERT INTO main._honker_finished (id, queue, state, payload, priority, run_at, attempts,
    max_attempts, backoff_base_ms, backoff_max_ms, backoff_jitter, dedupe_key, expires_at,
    created_at, worker_id, last_error, finished_at)
SELECT id, queue, state, payload, priority, run_at, attempts,
    max_attempts, backoff_base_ms, backoff_max_ms, backoff_jitter, dedupe_key, expires_at,
    created_at, worker_id, last_error, finished_at
FROM temp._honker_m2_finished ORDER BY id;

-- The copy-back set the high-water mark to the largest live id; restore the
-- old one, which may be higher (acked and finished jobs left the table).
DELETE FROM main.sqlite_sequence WHERE name = '_honker_jobs';
INSERT INTO main.sqlite_sequence (name, seq)
SELECT '_honker_jobs', max(seq) FROM (
    SELECT seq FROM temp._honker_m2_seq
    UNION ALL SELECT max(id) FROM main._honker_jobs
    UNION ALL SELECT max(id) FROM main._honker_finished
) HAVING max(seq) IS NOT NULL;

DROP TABLE temp._honker_m2_jobs;
DROP TABLE temp._honker_m2_finished;
DROP TABLE temp._honker_m2_seq;
