-- honker schema 15: unique jobs with modes (issue 56 §4, ADR 37).
--
-- A dedupe key is held while its job is live by `_honker_jobs_dedupe`, as
-- before. Two modes hold it longer, each by a row here, whose primary key
-- is the one place that decides who holds a key (never a read and then a
-- write): `period` (the key stays held for `period_ms` after its job
-- completed) and `throttle` (for `period_ms` after the enqueue that took
-- it, whatever the job does). `until` is when the hold ends (ms since the
-- Unix epoch); a `period` row whose job is still live holds until
-- 9223372036854775807, and its job's ack writes its end. Such a row whose
-- job left without completing (dead, cancelled, expired) holds nothing.
-- Maintenance removes rows that hold nothing.
CREATE TABLE main._honker_unique (
    queue     TEXT    NOT NULL,
    key       TEXT    NOT NULL,
    job_id    INTEGER NOT NULL,
    mode      TEXT    NOT NULL CHECK (mode IN ('period', 'throttle')),
    period_ms INTEGER NOT NULL CHECK (period_ms > 0),
    until     INTEGER NOT NULL,
    PRIMARY KEY (queue, key)
) STRICT, WITHOUT ROWID;
