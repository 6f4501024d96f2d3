-- honker schema 9: the scheduler (ADR 24).
--
-- A schedule is a row: its rule (a cron expression or `@every`, in an IANA
-- time zone, with Vixie's or Honker's day rule), the job it puts on a queue,
-- its catch-up and overlap policies, and its state: the next boundary due
-- (`next_fire_at`, NULL once it has ended), the last fire and job, a fire
-- held back by `buffer_one`, and counters an operator reads.
-- Honker's `_honker_scheduler_tasks` is not touched (the importer moves it).

CREATE TABLE main._honker_schedules (
    name              TEXT    PRIMARY KEY,
    queue             TEXT    NOT NULL,
    spec              TEXT    NOT NULL,   -- cron, a macro, or '@every 90s'
    time_zone         TEXT    NOT NULL,   -- IANA name
    day_rule          TEXT    NOT NULL CHECK (day_rule IN ('or', 'and')),
    payload           ANY     NOT NULL,   -- JSON text, or a BLOB
    priority          INTEGER NOT NULL,
    max_attempts      INTEGER,            -- NULL: the queue's default
    expires_ms        INTEGER,            -- a fired job not started by then expires
    catch_up          TEXT    NOT NULL CHECK (catch_up IN ('skip', 'latest', 'all')),
    catch_up_window_ms INTEGER NOT NULL,
    catch_up_max      INTEGER NOT NULL,
    overlap           TEXT    NOT NULL CHECK (overlap IN ('allow', 'skip', 'buffer_one')),
    jitter_ms         INTEGER NOT NULL,
    start_at          INTEGER,
    end_at            INTEGER,
    anchor_ms         INTEGER NOT NULL,   -- @every's alignment
    paused            INTEGER NOT NULL DEFAULT 0,
    note              TEXT,
    next_fire_at      INTEGER,
    last_fire_at      INTEGER,
    last_job_id       INTEGER,
    buffered_at       INTEGER,            -- buffer_one: a boundary waiting for the last job
    fires             INTEGER NOT NULL DEFAULT 0,
    missed            INTEGER NOT NULL DEFAULT 0,
    overlap_skipped   INTEGER NOT NULL DEFAULT 0,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL
) STRICT;

-- What is due: one seek for the earliest, one range for the due ones.
CREATE INDEX main._honker_schedules_due
    ON _honker_schedules (next_fire_at) WHERE paused = 0;
-- Schedules holding a buffered fire (usually none).
CREATE INDEX main._honker_schedules_buffered
    ON _honker_schedules (buffered_at) WHERE buffered_at IS NOT NULL;

-- One row per fire: the key that makes a second fire of the same boundary
-- impossible, committed with its job. `job_id` is NULL for a boundary the
-- overlap policy skipped. Pruned by maintenance once older than the
-- schedule's catch-up window.
CREATE TABLE main._honker_schedule_fires (
    schedule TEXT    NOT NULL,
    fire_at  INTEGER NOT NULL,
    job_id   INTEGER,
    fired_at INTEGER NOT NULL,
    manual   INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (schedule, fire_at)
) STRICT, WITHOUT ROWID;
