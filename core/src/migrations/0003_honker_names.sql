-- honker schema 3: result expiry, and Honker's table names as read-only views.
--
-- Honker's honker_result_save(job_id, value, ttl_s) gives a result a lifetime;
-- a result past it reads as missing and honker_result_sweep() (or retention)
-- deletes it. Times are ms, as everywhere in honker's tables.
ALTER TABLE main._honker_results ADD COLUMN expires_at INTEGER;

CREATE INDEX main._honker_results_expiry
    ON _honker_results (expires_at) WHERE expires_at IS NOT NULL;

-- Honker's operators and clients read _honker_live and _honker_dead directly
-- (counts by state, a dead letter's error). These views show honker's rows in
-- Honker's columns and units: states 'pending' (ready or scheduled) and
-- 'processing' (running), times in whole unix seconds (rounded down). They
-- are read-only and cost the hot path nothing (a view is not maintained on
-- write). IF NOT EXISTS: a file that still holds Honker's own tables keeps
-- them (the importer moves them). Honker's Python client's view _honker_jobs
-- cannot exist: honker's job table has that name.
CREATE VIEW IF NOT EXISTS main._honker_live AS
SELECT id, queue, payload,
       CASE state WHEN 'running' THEN 'processing' ELSE 'pending' END AS state,
       priority, run_at / 1000 AS run_at, worker_id,
       lease_expires_at / 1000 AS claim_expires_at, attempts, max_attempts,
       created_at / 1000 AS created_at, expires_at / 1000 AS expires_at
FROM main._honker_jobs;

-- Honker's dead letters are failed, exhausted and expired jobs (a cancelled
-- job is deleted in Honker; a completed one is gone).
CREATE VIEW IF NOT EXISTS main._honker_dead AS
SELECT id, queue, payload, priority, run_at / 1000 AS run_at, attempts, max_attempts,
       CASE state WHEN 'expired' THEN 'expired' ELSE last_error END AS last_error,
       created_at / 1000 AS created_at, finished_at / 1000 AS died_at
FROM main._honker_finished
WHERE state = 'dead' OR state = 'expired';
