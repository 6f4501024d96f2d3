//! Every SQL statement the scheduler runs, by name. `EXPLAIN QUERY PLAN`
//! tests pin the hot ones to their indexes.

/// The columns of a schedule row, in the order `ops::row` reads them.
macro_rules! columns {
    () => {
        "name, queue, spec, time_zone, day_rule, payload, priority, max_attempts, expires_ms, \
         catch_up, catch_up_window_ms, catch_up_max, overlap, jitter_ms, start_at, end_at, \
         anchor_ms, paused, note, next_fire_at, last_fire_at, last_job_id, buffered_at, fires, \
         missed, overlap_skipped"
    };
}

/// ?1 name. One schedule.
pub const GET: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM _honker_schedules WHERE name = ?1"
);

/// Every schedule, by name.
pub const LIST: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM _honker_schedules ORDER BY name"
);

/// ?1 now, ?2 limit. The schedules due, earliest first (the partial index
/// `_honker_schedules_due`: a range, however many schedules there are).
pub const DUE: &str = "
SELECT name FROM _honker_schedules
WHERE paused = 0 AND next_fire_at <= ?1 ORDER BY next_fire_at LIMIT ?2";

/// The earliest boundary due (one seek on `_honker_schedules_due`).
pub const NEXT_DUE: &str = "
SELECT next_fire_at FROM _honker_schedules
WHERE paused = 0 AND next_fire_at IS NOT NULL ORDER BY next_fire_at LIMIT 1";

/// Schedules holding a buffered fire whose previous job is no longer live
/// (`_honker_schedules_buffered`: usually empty).
pub const BUFFERED_READY: &str = "
SELECT s.name FROM _honker_schedules AS s
WHERE s.buffered_at IS NOT NULL AND s.paused = 0
  AND NOT EXISTS (SELECT 1 FROM _honker_jobs AS j WHERE j.id = s.last_job_id)";

/// ?1 name … ?16: the definition, ?17 anchor, ?18 next_fire_at, ?19 now.
/// Registers a schedule, or replaces its definition (state kept; the
/// caller passes the next boundary to keep or recompute).
pub const UPSERT: &str = "
INSERT INTO _honker_schedules (name, queue, spec, time_zone, day_rule, payload, priority,
    max_attempts, expires_ms, catch_up, catch_up_window_ms, catch_up_max, overlap, jitter_ms,
    start_at, end_at, anchor_ms, next_fire_at, created_at, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?19)
ON CONFLICT (name) DO UPDATE SET queue = ?2, spec = ?3, time_zone = ?4, day_rule = ?5,
    payload = ?6, priority = ?7, max_attempts = ?8, expires_ms = ?9, catch_up = ?10,
    catch_up_window_ms = ?11, catch_up_max = ?12, overlap = ?13, jitter_ms = ?14,
    start_at = ?15, end_at = ?16, anchor_ms = ?17, next_fire_at = ?18, updated_at = ?19";

/// ?1 name.
pub const DELETE: &str = "DELETE FROM _honker_schedules WHERE name = ?1";

/// ?1 name. Its fire records.
pub const DELETE_FIRES: &str = "DELETE FROM _honker_schedule_fires WHERE schedule = ?1";

/// ?1 name, ?2 note, ?3 now.
pub const PAUSE: &str = "
UPDATE _honker_schedules SET paused = 1, note = ?2, updated_at = ?3 WHERE name = ?1";

/// ?1 name, ?2 next_fire_at, ?3 now.
pub const RESUME: &str = "
UPDATE _honker_schedules SET paused = 0, note = NULL, next_fire_at = ?2, updated_at = ?3
WHERE name = ?1";

/// ?1 name, ?2 next_fire_at, ?3 last_fire_at, ?4 last_job_id, ?5 buffered_at,
/// ?6 fires added, ?7 missed added, ?8 overlap_skipped added.
pub const AFTER_TICK: &str = "
UPDATE _honker_schedules SET next_fire_at = ?2, last_fire_at = ?3, last_job_id = ?4,
    buffered_at = ?5, fires = fires + ?6, missed = missed + ?7,
    overlap_skipped = overlap_skipped + ?8
WHERE name = ?1";

/// ?1 job id. Whether the job is live (ready, scheduled or running).
pub const JOB_LIVE: &str = "SELECT 1 FROM _honker_jobs WHERE id = ?1";

/// ?1 schedule, ?2 fire_at, ?3 now, ?4 manual. The fire's key: no row
/// inserted means the boundary has fired already.
pub const CLAIM_FIRE: &str = "
INSERT OR IGNORE INTO _honker_schedule_fires (schedule, fire_at, fired_at, manual)
VALUES (?1, ?2, ?3, ?4)";

/// ?1 schedule, ?2 fire_at, ?3 job id.
pub const FIRE_JOB: &str = "
UPDATE _honker_schedule_fires SET job_id = ?3 WHERE schedule = ?1 AND fire_at = ?2";

/// ?1 schedule, ?2 limit. Its latest fires, newest first.
pub const RECENT_FIRES: &str = "
SELECT fire_at, job_id, manual FROM _honker_schedule_fires WHERE schedule = ?1
ORDER BY fire_at DESC LIMIT ?2";

/// ?1 name (the last seen), ?2 batch. The next schedules by name, for
/// maintenance's walk.
pub const WALK: &str = "
SELECT name, catch_up_window_ms FROM _honker_schedules WHERE name > ?1 ORDER BY name LIMIT ?2";

/// ?1 schedule, ?2 cutoff. Fire records older than the catch-up window.
pub const PRUNE_FIRES: &str = "
DELETE FROM _honker_schedule_fires WHERE schedule = ?1 AND fire_at < ?2";
