//! Every SQL statement the queue runs, by name. Parameters are numbered; the
//! comment above each says what they are. `EXPLAIN QUERY PLAN` tests
//! (`tests/query_plans.rs`) pin the hot ones to their partial indexes.

/// ?1 queue, ?2 state ('ready'|'scheduled'), ?3 payload, ?4 priority,
/// ?5 run_at, ?6 max_attempts, ?7 backoff_base_ms, ?8 backoff_max_ms,
/// ?9 backoff_jitter, ?10 dedupe_key, ?11 expires_at, ?12 created_at,
/// ?13 trace_context (JSON, or NULL), ?14 concurrency_key.
/// Inserts nothing when a live job holds the dedupe key.
pub const ENQUEUE: &str = "
INSERT INTO _honker_jobs (queue, state, payload, priority, run_at, max_attempts,
    backoff_base_ms, backoff_max_ms, backoff_jitter, dedupe_key, expires_at, created_at,
    trace_context, concurrency_key)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)
ON CONFLICT (queue, dedupe_key) WHERE dedupe_key IS NOT NULL DO NOTHING";

/// [`ENQUEUE`] for `n` jobs in one statement, without a dedupe key (several
/// jobs never share one, so no conflict clause): the same ?1 to ?14, the
/// first job's payload ?3, the others' ?15 on, in order. One statement for
/// many rows binds the shared values once and writes the AUTOINCREMENT
/// sequence once, not per job (ADR 29: W2's instructions per job halved).
/// The rows get consecutive ids (AUTOINCREMENT gives each the next; the
/// writer excludes every other).
fn enqueue_rows(n: usize) -> String {
    let mut sql = String::from(
        "INSERT INTO _honker_jobs (queue, state, payload, priority, run_at, max_attempts,
    backoff_base_ms, backoff_max_ms, backoff_jitter, dedupe_key, expires_at, created_at,
    trace_context, concurrency_key)
VALUES ",
    );
    for i in 0..n {
        let payload = if i == 0 { 3 } else { 14 + i };
        if i > 0 {
            sql.push_str(", ");
        }
        sql.push_str(&format!(
            "(?1, ?2, ?{payload}, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"
        ));
    }
    sql
}

/// `enqueue_rows` of 32 and of 8: a batch goes by 32s, then 8s, then one
/// by one ([`ENQUEUE`]). 32 is where a larger statement stopped paying.
pub static ENQUEUE_32: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| enqueue_rows(32));
pub static ENQUEUE_8: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| enqueue_rows(8));

/// ?1 queue, ?2 dedupe_key.
pub const FIND_BY_DEDUPE: &str = "SELECT id FROM _honker_jobs WHERE queue = ?1 AND dedupe_key = ?2";

/// The `until` of a `period` hold whose job is still live (its ack writes
/// the end).
pub const HELD_WHILE_LIVE: i64 = i64::MAX;

/// ?1 queue, ?2 key, ?3 now. The job and mode of a hold that outlives its
/// job (`period` after completion, `throttle`) and still holds; a hold of a
/// live job is the live index's to answer.
pub const HOLD: &str = "
SELECT job_id, mode FROM _honker_unique
WHERE queue = ?1 AND key = ?2 AND until > ?3 AND until < 9223372036854775807";

/// ?1 queue, ?2 key. The key's hold, whatever it holds: the holder when
/// [`TAKE_HOLD`] kept a hold that [`HOLD`] did not answer for (on an engine
/// where another writer can come between the two).
pub const HOLD_ANY: &str = "
SELECT job_id, mode FROM _honker_unique WHERE queue = ?1 AND key = ?2";

/// ?1 queue, ?2 key, ?3 job id, ?4 mode, ?5 period_ms, ?6 until, ?7 now.
/// Takes the key's hold for a job just added under its dedupe key. The
/// primary key decides: a hold that still holds is kept (and nothing
/// changes), one that ended, or whose job left live without completing
/// (dead, cancelled, expired; its `until` is still the live mark), is
/// taken over.
pub const TAKE_HOLD: &str = "
INSERT INTO _honker_unique (queue, key, job_id, mode, period_ms, until)
VALUES (?1, ?2, ?3, ?4, ?5, ?6)
ON CONFLICT (queue, key) DO UPDATE
SET job_id = excluded.job_id, mode = excluded.mode, period_ms = excluded.period_ms,
    until = excluded.until
WHERE until <= ?7
   OR (until = 9223372036854775807
       AND NOT EXISTS (SELECT 1 FROM _honker_jobs j WHERE j.id = _honker_unique.job_id))";

/// ?1 queue, ?2 key, ?3 job id, ?4 now. An acked job's `period` hold
/// starts counting: it holds for its period from now.
pub const END_HOLD: &str = "
UPDATE _honker_unique SET until = ?4 + period_ms
WHERE queue = ?1 AND key = ?2 AND job_id = ?3 AND until = 9223372036854775807";

/// ?1 queue, ?2 dedupe_key, ?3 payload, ?4 state ('ready'|'scheduled'),
/// ?5 run_at, ?6 priority, ?7 expires_at, ?8 trace_context. `debounce`:
/// the pending job holding the key takes the newer enqueue's payload, run
/// time, priority, expiry and trace context, and gives up its turn (a
/// replaced job goes to the back of its key's turns).
pub const REPLACE_PENDING: &str = "
UPDATE _honker_jobs
SET payload = ?3, state = ?4, run_at = ?5, priority = ?6, expires_at = ?7, trace_context = ?8,
    turn = NULL
WHERE queue = ?1 AND dedupe_key = ?2 AND state IN ('ready', 'scheduled')
RETURNING id, concurrency_key";

/// ?1 queue, ?2 dedupe_key. `debounce` meeting a running job: it keeps
/// running with the payload it read, and gives its key to the new job
/// ([`DROP_LIVE_HOLD`] too).
pub const DETACH_RUNNING: &str = "
UPDATE _honker_jobs SET dedupe_key = NULL
WHERE queue = ?1 AND dedupe_key = ?2 AND state = 'running'";

/// ?1 queue, ?2 key. A `period` hold of a job that gave its key away: its
/// ack will not count a period for a key it no longer holds.
pub const DROP_LIVE_HOLD: &str = "
DELETE FROM _honker_unique WHERE queue = ?1 AND key = ?2 AND until = 9223372036854775807";

/// ?1 id, ?2 queue, ?3 token. The dedupe key of a leased job (an ack of a
/// job with one ends its hold's first part).
pub const LEASED_KEY: &str = "
SELECT dedupe_key FROM _honker_jobs
WHERE id = ?1 AND queue = ?2 AND lease_token = ?3 AND state = 'running'";

/// ?1 now, ?2 batch. Holds that hold nothing: ended, or of a job that left
/// live without completing. A scan of the holds, which outlive their jobs
/// by one period at most.
pub const SWEEP_HOLDS: &str = "
DELETE FROM _honker_unique
WHERE (queue, key) IN (
    SELECT queue, key FROM _honker_unique u
    WHERE until <= ?1
       OR (until = 9223372036854775807
           AND NOT EXISTS (SELECT 1 FROM _honker_jobs j WHERE j.id = u.job_id))
    LIMIT ?2)";

/// ?1 queue, ?2 now. Whether any of [`DUE_EXPIRED`], [`PROMOTE`],
/// [`LAPSED_EXHAUSTED`], [`RECLAIM`] or [`DAMAGED_TIMES`] has work (claim
/// skips them if not).
pub const HOUSEKEEPING_DUE: &str = "
SELECT EXISTS (SELECT 1 FROM _honker_jobs
               WHERE queue = ?1 AND expires_at <= ?2 AND state IN ('ready', 'scheduled'))
    OR EXISTS (SELECT 1 FROM _honker_jobs
               WHERE queue = ?1 AND state = 'scheduled' AND run_at <= ?2)
    OR EXISTS (SELECT 1 FROM _honker_jobs
               WHERE queue = ?1 AND state = 'running' AND lease_expires_at <= ?2)
    OR EXISTS (SELECT 1 FROM _honker_jobs
               WHERE queue = ?1 AND state = 'scheduled' AND run_at > 9223372036854775807)
    OR EXISTS (SELECT 1 FROM _honker_jobs
               WHERE queue = ?1 AND state = 'running'
                 AND lease_expires_at > 9223372036854775807)";

/// ?1 queue. Scheduled and running jobs whose time is TEXT or a BLOB (a row
/// damaged by hand: those sort after every number, so they would never come
/// due): (id, column, SQLite's type name). Ends of the scheduled and running
/// indexes.
pub const DAMAGED_TIMES: &str = "
SELECT id, 'run_at', upper(typeof(run_at)) FROM _honker_jobs
WHERE queue = ?1 AND state = 'scheduled' AND run_at > 9223372036854775807
UNION ALL
SELECT id, 'lease_expires_at', upper(typeof(lease_expires_at)) FROM _honker_jobs
WHERE queue = ?1 AND state = 'running' AND lease_expires_at > 9223372036854775807";

/// ?1 queue, ?2 now. Ready or scheduled jobs past their expiry.
pub const DUE_EXPIRED: &str = "
SELECT id FROM _honker_jobs
WHERE queue = ?1 AND expires_at <= ?2 AND state IN ('ready', 'scheduled')";

/// ?1 queue, ?2 now. Honker's `honker_queue_next_claim_at`: the earliest
/// moment after now at which a job becomes claimable, ignoring what will not
/// be (an expired job, a lapsing lease on its last attempt). Each arm walks
/// its partial index in order and stops at the first match.
pub const NEXT_CLAIM_AT: &str = "
SELECT min(t) FROM (
  SELECT * FROM (SELECT run_at AS t FROM _honker_jobs
                 WHERE queue = ?1 AND state = 'scheduled' AND run_at > ?2
                   AND (expires_at IS NULL OR expires_at > ?2)
                 ORDER BY run_at LIMIT 1)
  UNION ALL
  SELECT * FROM (SELECT lease_expires_at AS t FROM _honker_jobs
                 WHERE queue = ?1 AND state = 'running' AND lease_expires_at > ?2
                   AND attempts < max_attempts
                 ORDER BY lease_expires_at LIMIT 1))";

/// ?1 queue, ?2 now. Makes due scheduled jobs ready.
pub const PROMOTE: &str = "
UPDATE _honker_jobs SET state = 'ready'
WHERE queue = ?1 AND state = 'scheduled' AND run_at <= ?2";

/// ?1 queue, ?2 now. Running jobs whose lease lapsed on their last attempt.
pub const LAPSED_EXHAUSTED: &str = "
SELECT id FROM _honker_jobs
WHERE queue = ?1 AND state = 'running' AND lease_expires_at <= ?2
  AND attempts >= max_attempts";

/// ?1 queue, ?2 now. Gives lapsed leases back (their `run_at` is kept, so they
/// are first in line among equal priorities).
pub const RECLAIM: &str = "
UPDATE _honker_jobs
SET state = 'ready', last_error = 'lease expired (worker ' || coalesce(worker_id, '?') || ')',
    worker_id = NULL, lease_token = NULL, lease_expires_at = NULL
WHERE queue = ?1 AND state = 'running' AND lease_expires_at <= ?2";

/// The SQL of "a pause holds queue ?1" (its own, or all queues': name
/// ''), written out in [`PICK`] and [`PROBE`] (ADR 33; a test keeps the
/// three alike: the statements stay plain literals, which
/// `bench/python/w3_schema.py` reads): constant subqueries SQLite
/// evaluates once per statement, and while no queue of the file is
/// paused only the first (one seek of the settings' primary key: the AND
/// stops there). Measured on core's W3 (bench/instr): +1.3 % instructions
/// per job; a statement of its own cost +4 %, and `name IN (?1, '')` or a
/// range on ?1 +22 % (the IN list's ephemeral table; the range made the
/// statement costlier to run at each new binding).
pub const PAUSED: &str = "(EXISTS (SELECT 1 FROM _honker_settings WHERE scope = 'queue_paused')
     AND (EXISTS (SELECT 1 FROM _honker_settings
                  WHERE scope = 'queue_paused' AND name = ?1 AND key = 'paused')
          OR EXISTS (SELECT 1 FROM _honker_settings
                     WHERE scope = 'queue_paused' AND name = '' AND key = 'paused')))";

/// ?1 queue, ?2 n. The claim's first half: up to n ready jobs in claim order
/// (priority, then oldest), read through the ready index. [`LEASE_32`],
/// [`LEASE_8`] and [`LEASE`] follow, in the same write transaction.
///
/// Claim is a pick and updates rather than one
/// `UPDATE ... WHERE id IN (SELECT ...) RETURNING`: that form opens ephemeral
/// tables for the IN list and for RETURNING on every call, which cost more
/// than the rest of a one-job claim together (bench/python/w3_schema.py). A
/// claim of one job updates with [`LEASE`]; a larger one names its ids in
/// one statement per 8 or 32, where the IN list's table costs less than the
/// statements it saves.
///
/// The columns after `created_at` are read only to check their types: a row
/// damaged by hand is dead-lettered by the claim that meets it, so that a
/// later retry or listing does not trip on it instead.
pub const PICK: &str = "
SELECT id, payload, attempts, max_attempts, priority, run_at, created_at,
    backoff_base_ms, backoff_max_ms, backoff_jitter, expires_at, trace_context
FROM _honker_jobs
WHERE queue = ?1 AND state = 'ready' AND NOT (EXISTS (SELECT 1 FROM _honker_settings WHERE scope = 'queue_paused')
     AND (EXISTS (SELECT 1 FROM _honker_settings
                  WHERE scope = 'queue_paused' AND name = ?1 AND key = 'paused')
          OR EXISTS (SELECT 1 FROM _honker_settings
                     WHERE scope = 'queue_paused' AND name = '' AND key = 'paused')))
ORDER BY priority DESC, turn, run_at, id
LIMIT ?2";

/// ?1 queue, ?2 n, ?3 the keys at their cap (a JSON array of text).
/// [`PICK_KEYS`] in a queue with a `max_running_per_key` (ADR 35) once a key
/// is full: it steps over the ready jobs of those keys.
pub static PICK_KEYED: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    PICK_KEYS.replacen(
        "\nORDER BY",
        "\n  AND (concurrency_key IS NULL OR concurrency_key NOT IN (SELECT value FROM json_each(?3)))\nORDER BY",
        1,
    )
});

/// ?1 queue, ?2 now. What a claim obeys besides a pause, in one statement:
/// the queue's settings rows of its rate limit and its caps (ADR 23, 35):
/// key, value, updated_at, and on a cap's row the counts the caps need:
/// how many of the queue's jobs hold an unexpired lease times 2³², plus
/// how many of those have a key (none: no key can be full, and
/// [`RUNNING_KEYS`] is not read). One subquery, not correlated, so SQLite
/// runs it once for both caps' rows (the range of keys between the two cap
/// keys holds just them). A queue with neither cap has no such row, and
/// one with no setting at all none: the claim pays this one read, which
/// the rate limit's check made already.
pub const CLAIM_CONTROLS: &str = "
SELECT key, value, updated_at,
  CASE WHEN key >= 'max_running' AND key <= 'max_running_per_key' THEN
    (SELECT count(*) * 4294967296 + count(concurrency_key) FROM _honker_jobs
     WHERE queue = ?1 AND state = 'running' AND lease_expires_at > ?2)
  END
FROM _honker_settings WHERE scope = 'queue_rate_limit' AND name = ?1";

/// ?1 queue, ?2 n. [`PICK`] with each job's key (column 12), in a queue with
/// a `max_running_per_key` none of whose keys is full yet (ADR 35): the
/// claim counts the keys it takes.
pub static PICK_KEYS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    PICK.replacen(
        "trace_context\nFROM",
        "trace_context,\n    concurrency_key\nFROM",
        1,
    )
});

/// The exclusion of the keys a claim steps over (?3, a JSON array): at
/// their cap, or out of starts in this claim. Only in the picks that have
/// keys to step over: `NOT IN` a JSON array builds an ephemeral table per
/// statement, which cost a one-job claim half again (ADR 36).
const SKIP_KEYS: &str =
    "\n  AND (concurrency_key IS NULL OR concurrency_key NOT IN (SELECT value FROM json_each(?3)))";

/// The keys at their rate limit (ADR 36): ?4 is the `tat_us` above which a
/// key can start nothing now. The pick reads each job's key's row by one
/// seek of `_honker_queue_keys` ([`KEY_ROWS`]).
const HELD_KEYS: &str = "\n  AND (tat_us IS NULL OR tat_us <= ?4)";

/// The join of each job's key's row (a LEFT JOIN: a key without a row is
/// at no limit), one seek of its primary key per job read. Named apart
/// from the jobs' columns, the pick's text stays unqualified.
const KEY_ROWS: &str =
    "FROM _honker_jobs\n  LEFT JOIN _honker_queue_keys ON name = ?1 AND key = concurrency_key\nWHERE";

/// What a fair pick reads and steps over (ADR 36), as bits: [`FAIR_TURN`],
/// [`FAIR_KEY`], [`FAIR_LIMITED`], [`FAIR_SKIP`].
pub const FAIR_TURN: usize = 1;
/// Each job's key (a per-key cap or limit counts it).
pub const FAIR_KEY: usize = 2;
/// Each job's key's `tat_us`, and the keys at their rate limit stepped over
/// (`HELD_KEYS`; implies [`FAIR_KEY`]).
pub const FAIR_LIMITED: usize = 4;
/// The keys of `SKIP_KEYS` stepped over (implies [`FAIR_KEY`]).
pub const FAIR_SKIP: usize = 8;

/// [`PICK`] reading, after its own columns, in this order: the turn (with
/// [`FAIR_TURN`]), the key (with [`FAIR_KEY`]), the key's `tat_us` (with
/// [`FAIR_LIMITED`]), and stepping over [`SKIP_KEYS`] (with [`FAIR_SKIP`])
/// and [`HELD_KEYS`] (with [`FAIR_LIMITED`]). ?1 queue, ?2 n, ?3 the keys
/// stepped over, ?4 the `tat_us` above which a key can start nothing now
/// (each bound only where used). A round-robin queue's ready index sorts
/// by turn after priority, so each is one walk of it from its start.
fn pick_fair(bits: usize) -> String {
    let mut cols = String::new();
    if bits & FAIR_TURN != 0 {
        cols.push_str(",\n    turn");
    }
    if bits & (FAIR_KEY | FAIR_LIMITED | FAIR_SKIP) != 0 {
        cols.push_str(",\n    concurrency_key");
    }
    if bits & FAIR_LIMITED != 0 {
        cols.push_str(",\n    tat_us");
    }
    let mut filters = String::new();
    if bits & FAIR_SKIP != 0 {
        filters.push_str(SKIP_KEYS);
    }
    if bits & FAIR_LIMITED != 0 {
        filters.push_str(HELD_KEYS);
    }
    let pick = PICK
        .replacen(
            "trace_context\nFROM",
            &format!("trace_context{cols}\nFROM"),
            1,
        )
        .replacen("\nORDER BY", &format!("{filters}\nORDER BY"), 1);
    if bits & FAIR_LIMITED != 0 {
        pick.replacen("FROM _honker_jobs\nWHERE", KEY_ROWS, 1)
    } else {
        pick
    }
}

/// The pick of each combination of [`FAIR_TURN`], [`FAIR_KEY`],
/// [`FAIR_LIMITED`] and [`FAIR_SKIP`] (`pick_fair`), made once.
pub static PICK_FAIR: std::sync::LazyLock<Vec<String>> =
    std::sync::LazyLock::new(|| (0..16).map(pick_fair).collect());

/// ?1 queue, ?2 key, ?3 n. Gives `n` turns to key ?2 of a round-robin
/// queue (ADR 36), when the queue is one (its settings row `round_robin`,
/// whose value is its current turn; else writes nothing): the key's last
/// turn becomes `max(last + n, current + n - 1)`, so its first new turn is
/// the one after its last and never before the queue's current turn (a key
/// that idled gets no credit). [`KEY_TURN`] reads it back.
pub const GIVE_TURNS: &str = "
INSERT INTO _honker_queue_keys (name, key, last_turn)
SELECT ?1, ?2, coalesce(value, 0) + ?3 - 1 FROM _honker_settings
WHERE scope = 'queue_rate_limit' AND name = ?1 AND key = 'round_robin'
ON CONFLICT (name, key) DO UPDATE
SET last_turn = max(coalesce(last_turn, 0) + ?3, excluded.last_turn)";

/// ?1 queue, ?2 key. Its last turn given.
pub const KEY_TURN: &str = "
SELECT last_turn FROM _honker_queue_keys WHERE name = ?1 AND key = ?2";

/// ?1 first id, ?2 last id, ?3 the first's turn: consecutive jobs of one
/// key take consecutive turns.
pub const SET_TURNS: &str = "
UPDATE _honker_jobs SET turn = ?3 + (id - ?1) WHERE id BETWEEN ?1 AND ?2";

/// ?1 queue, ?2 now. In a round-robin queue, its due scheduled jobs with a
/// key and no turn yet (a delayed job takes its turns when it comes due,
/// so a key that schedules many for later does not push back its jobs of
/// now), oldest first. A range of the scheduled index.
pub const DUE_UNTURNED: &str = "
SELECT id, concurrency_key FROM _honker_jobs
WHERE queue = ?1 AND state = 'scheduled' AND run_at <= ?2
  AND turn IS NULL AND concurrency_key IS NOT NULL
ORDER BY run_at, id";

/// ?1 queue, ?2 key, ?3 its `tat_us` after this claim's starts.
pub const SET_KEY_TAT: &str = "
INSERT INTO _honker_queue_keys (name, key, tat_us) VALUES (?1, ?2, ?3)
ON CONFLICT (name, key) DO UPDATE SET tat_us = excluded.tat_us";

/// ?1 queue. A queue that leaves round-robin order forgets its turns:
/// its jobs sort by priority and age again.
pub const CLEAR_TURNS: &str = "
UPDATE _honker_jobs SET turn = NULL WHERE queue = ?1 AND turn IS NOT NULL";

/// ?1 queue. [`CLEAR_TURNS`] for its keys' last turns.
pub const CLEAR_KEY_TURNS: &str = "
UPDATE _honker_queue_keys SET last_turn = NULL WHERE name = ?1 AND last_turn IS NOT NULL";

/// ?1 queue, ?2 the keys stepped over (a JSON array), ?3 the `tat_us`
/// above which a key can start nothing now. Whether a ready job is there
/// that a claim could take under the queue's caps and rate limit per key.
pub const READY_OPEN: &str = "
SELECT EXISTS (SELECT 1 FROM _honker_jobs
               WHERE queue = ?1 AND state = 'ready'
                 AND (concurrency_key IS NULL
                      OR (concurrency_key NOT IN (SELECT value FROM json_each(?2))
                          AND NOT EXISTS (SELECT 1 FROM _honker_queue_keys k
                                          WHERE k.name = ?1
                                            AND k.key = _honker_jobs.concurrency_key
                                            AND k.tat_us > ?3))))";

/// ?1 queue, ?2 the `tat_us` above which a key can start nothing now. The
/// earliest such `tat_us` among the queue's keys: the first key to open.
pub const FIRST_HELD_KEY: &str = "
SELECT min(tat_us) FROM _honker_queue_keys WHERE name = ?1 AND tat_us > ?2";

/// ?1 now (µs), ?2 how many at most. Keys' rows that carry nothing any
/// more: their rate limit's tat has passed (or they have none) and their
/// last turn is behind their queue's current turn (or they have none): the
/// key's next job would take the queue's current turn without the row.
pub const SWEEP_KEYS: &str = "
DELETE FROM _honker_queue_keys WHERE (name, key) IN (
  SELECT name, key FROM _honker_queue_keys
  WHERE (tat_us IS NULL OR tat_us <= ?1)
    AND (last_turn IS NULL
         OR last_turn < coalesce((SELECT value FROM _honker_settings s
                                  WHERE s.scope = 'queue_rate_limit'
                                    AND s.name = _honker_queue_keys.name
                                    AND s.key = 'round_robin'), 0))
  LIMIT ?2)";

/// ?1 queue, ?2 now. The key of each job holding an unexpired lease (the
/// caller counts them): what `max_running_per_key` caps. A range of the
/// running index, so linear in the queue's running jobs, which its caps
/// and its workers' slots bound; no index of keys is kept (ADR 35).
pub const RUNNING_KEYS: &str = "
SELECT concurrency_key FROM _honker_jobs
WHERE queue = ?1 AND state = 'running' AND lease_expires_at > ?2
  AND concurrency_key IS NOT NULL";

/// ?1 queue, ?2 the keys at their cap (a JSON array). Whether a ready job
/// is there that a claim could take under `max_running_per_key`.
pub const READY_UNCAPPED: &str = "
SELECT EXISTS (SELECT 1 FROM _honker_jobs
               WHERE queue = ?1 AND state = 'ready'
                 AND (concurrency_key IS NULL
                      OR concurrency_key NOT IN (SELECT value FROM json_each(?2))))";

/// The queues with a concurrency cap (ADR 35) or a fairness (ADR 36), by
/// name.
pub const CAPPED_QUEUES: &str = "
SELECT DISTINCT name FROM _honker_settings
WHERE scope = 'queue_rate_limit'
  AND (key >= 'max_running' AND key <= 'max_running_per_key'
       OR key = 'round_robin' OR key = 'key_limit')
ORDER BY name";

/// ?1 queue, ?2 key. Removes one of the queue's claim settings beside its
/// rate limit: a cap (`max_running`, `max_running_per_key`; ADR 35) or a
/// row of its fairness (ADR 36).
pub const CLEAR_CAP: &str = "
DELETE FROM _honker_settings WHERE scope = 'queue_rate_limit' AND name = ?1 AND key = ?2";

/// ?1 id, ?2 worker_id, ?3 lease token, ?4 lease_expires_at. Leases one job
/// picked by [`PICK`].
pub const LEASE: &str = "
UPDATE _honker_jobs
SET state = 'running', attempts = attempts + 1, worker_id = ?2,
    lease_token = ?3, lease_expires_at = ?4
WHERE id = ?1 AND state = 'ready'";

/// [`LEASE`] for `n` picked jobs in one statement: ?1 worker_id, ?2
/// lease_expires_at, then each job's id and lease token (?3 and ?4, ?5 and
/// ?6, ...). With one statement per row, finishing statements
/// (`sqlite3VdbeHalt`, freeing their registers) was a sixth of W4's
/// instructions; an IN list of 8 or 32 ids costs its ephemeral table once
/// (ADR 29). Changes as many rows as it names, all picked as ready by this
/// transaction.
fn lease_rows(n: usize) -> String {
    let ids: Vec<String> = (0..n).map(|i| format!("?{}", 3 + 2 * i)).collect();
    let tokens: String = (0..n)
        .map(|i| format!(" WHEN ?{} THEN ?{}", 3 + 2 * i, 4 + 2 * i))
        .collect();
    format!(
        "UPDATE _honker_jobs
SET state = 'running', attempts = attempts + 1, worker_id = ?1, lease_expires_at = ?2,
    lease_token = CASE id{tokens} END
WHERE id IN ({}) AND state = 'ready'",
        ids.join(", ")
    )
}

/// `lease_rows` of 32 and of 8: a claim's jobs are leased by 32s, then 8s,
/// then one by one ([`LEASE`]).
pub static LEASE_32: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| lease_rows(32));
pub static LEASE_8: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| lease_rows(8));

/// ?1 id, ?2 queue, ?3 token. Deletes an acked job without a dedupe key
/// (one with a key may hold it on: [`LEASED_KEY`], [`END_HOLD`]).
pub const ACK: &str = "
DELETE FROM _honker_jobs
WHERE id = ?1 AND queue = ?2 AND lease_token = ?3 AND state = 'running'
  AND dedupe_key IS NULL";

/// ?1 id, ?2 worker_id, ?3 attempt (NULL: any). Queue, token and lease
/// expiry of the worker's lease (Honker's ownership rule: worker id, and the
/// claim's attempt number when fenced). A lapsed lease that nobody reclaimed
/// is still the worker's (DESIGN §14).
pub const LEASE_BY_WORKER: &str = "
SELECT queue, lease_token, lease_expires_at FROM _honker_jobs
WHERE id = ?1 AND worker_id = ?2 AND state = 'running' AND (?3 IS NULL OR attempts = ?3)";

/// ?1 id, ?2 queue, ?3 token. The leased job's retry state.
pub const LEASED: &str = "
SELECT attempts, max_attempts, run_at, backoff_base_ms, backoff_max_ms, backoff_jitter
FROM _honker_jobs
WHERE id = ?1 AND queue = ?2 AND lease_token = ?3 AND state = 'running'";

/// ?1 id, ?2 new state ('ready'|'scheduled'), ?3 run_at, ?4 attempts to give
/// back (0 for retry, 1 for release/snooze), ?5 error (NULL keeps the last).
pub const RESCHEDULE: &str = "
UPDATE _honker_jobs
SET state = ?2, run_at = ?3, attempts = attempts - ?4, last_error = coalesce(?5, last_error),
    worker_id = NULL, lease_token = NULL, lease_expires_at = NULL
WHERE id = ?1";

/// ?1 id, ?2 queue, ?3 token, ?4 new lease expiry.
pub const HEARTBEAT: &str = "
UPDATE _honker_jobs SET lease_expires_at = ?4
WHERE id = ?1 AND queue = ?2 AND lease_token = ?3 AND state = 'running'";

/// ?1 id, ?2 finished state, ?3 error or reason (NULL keeps the last error),
/// ?4 now. Copies a live job into the finished records; [`DELETE_JOB`]
/// follows.
pub const ARCHIVE: &str = "
INSERT INTO _honker_finished (id, queue, state, payload, priority, run_at, attempts,
    max_attempts, backoff_base_ms, backoff_max_ms, backoff_jitter, dedupe_key,
    expires_at, created_at, worker_id, last_error, finished_at, trace_context,
    concurrency_key)
SELECT id, queue, ?2, payload, priority, run_at, attempts,
    max_attempts, backoff_base_ms, backoff_max_ms, backoff_jitter, dedupe_key,
    expires_at, created_at, worker_id, coalesce(?3, last_error), ?4, trace_context,
    concurrency_key
FROM _honker_jobs WHERE id = ?1";

/// ?1 id.
pub const DELETE_JOB: &str = "DELETE FROM _honker_jobs WHERE id = ?1";

/// ?1 job id, ?2 queue, ?3 value, ?4 now, ?5 expires_at (NULL: kept until
/// retention).
pub const SAVE_RESULT: &str = "
INSERT OR REPLACE INTO _honker_results (job_id, queue, value, created_at, expires_at)
VALUES (?1, ?2, ?3, ?4, ?5)";

/// ?1 job id, ?2 queue, ?3 now. A result that has not expired, saved
/// under the queue or under none ('': a result Honker's
/// `honker_result_save` or the importer filed for a job honker never saw).
pub const GET_RESULT: &str = "
SELECT value FROM _honker_results
WHERE job_id = ?1 AND queue IN (?2, '') AND (expires_at IS NULL OR expires_at > ?3)";

/// ?1 job id, ?2 now. Honker's `honker_result_get`: by id alone.
pub const GET_RESULT_BY_ID: &str = "
SELECT value FROM _honker_results
WHERE job_id = ?1 AND (expires_at IS NULL OR expires_at > ?2)";

/// ?1 now. Honker's `honker_result_sweep`: every expired result.
pub const SWEEP_RESULTS: &str = "DELETE FROM _honker_results WHERE expires_at <= ?1";

/// ?1 id. Which queue holds the live job, if any.
pub const LIVE_QUEUE: &str = "SELECT queue FROM _honker_jobs WHERE id = ?1";

/// ?1 id. Which queue holds the finished record, if any.
pub const FINISHED_QUEUE: &str = "SELECT queue FROM _honker_finished WHERE id = ?1";

/// The highest job id ever handed out (AUTOINCREMENT never reuses ids).
pub const MAX_ID: &str = "SELECT seq FROM sqlite_sequence WHERE name = '_honker_jobs'";

/// Columns shared by [`GET_LIVE`] and [`GET_FINISHED`], read by
/// `JobInfo::from_row`.
macro_rules! info_columns {
    () => {
        "id, queue, state, payload, priority, run_at, attempts, max_attempts, dedupe_key, \
         expires_at, created_at, worker_id, last_error, trace_context, concurrency_key"
    };
}

/// ?1 id, ?2 queue.
pub const GET_LIVE: &str = concat!(
    "SELECT ",
    info_columns!(),
    ", lease_expires_at, NULL FROM _honker_jobs WHERE id = ?1 AND queue = ?2"
);

/// ?1 id, ?2 queue.
pub const GET_FINISHED: &str = concat!(
    "SELECT ",
    info_columns!(),
    ", NULL, finished_at FROM _honker_finished WHERE id = ?1 AND queue = ?2"
);

/// ?1 queue, ?2 after id, ?3 limit. A page of dead letters, oldest id first.
pub const LIST_DEAD: &str = concat!(
    "SELECT ",
    info_columns!(),
    ", NULL, finished_at FROM _honker_finished \
     WHERE queue = ?1 AND state = 'dead' AND id > ?2 ORDER BY id LIMIT ?3"
);

/// ?1 queue, ?2 now, ?3 id (NULL: every dead letter of the queue). Puts dead
/// letters back as ready jobs with attempts reset (and no expiry). A job whose
/// dedupe key is held by a live job is skipped.
pub const REQUEUE_DEAD: &str = "
INSERT INTO _honker_jobs (id, queue, state, payload, priority, run_at, attempts,
    max_attempts, backoff_base_ms, backoff_max_ms, backoff_jitter, dedupe_key,
    expires_at, created_at, last_error, trace_context, concurrency_key)
SELECT id, queue, 'ready', payload, priority, ?2, 0,
    max_attempts, backoff_base_ms, backoff_max_ms, backoff_jitter, dedupe_key,
    NULL, created_at, last_error, trace_context, concurrency_key
FROM _honker_finished
WHERE queue = ?1 AND state = 'dead' AND (?3 IS NULL OR id = ?3)
ON CONFLICT DO NOTHING";

/// ?1 id, ?2 queue, ?3 now. A scheduled job (delayed, or waiting out a
/// retry's backoff) becomes ready now, its attempts kept.
pub const RUN_NOW: &str = "
UPDATE _honker_jobs SET state = 'ready', run_at = min(run_at, ?3)
WHERE id = ?1 AND queue = ?2 AND state = 'scheduled'";

/// ?1 queue, ?2 id (NULL: all). Removes the finished records of requeued jobs.
pub const DELETE_REQUEUED: &str = "
DELETE FROM _honker_finished
WHERE queue = ?1 AND state = 'dead' AND (?2 IS NULL OR id = ?2)
  AND id IN (SELECT id FROM _honker_jobs WHERE queue = ?1)";

/// ?1 queue, ?2 finished before (ms; purge everything older).
pub const PURGE_DEAD: &str = "
DELETE FROM _honker_finished WHERE queue = ?1 AND state = 'dead' AND finished_at < ?2";

/// ?1 queue. What a waiting claimer needs to know, read-only: is a job
/// ready, when is the next scheduled job due, when does the first lease
/// lapse, and is the queue paused.
///
/// The times are cast to INTEGER: a damaged one (REAL, TEXT, BLOB) reads as
/// a number, a TEXT or BLOB as 0 (due now), so that the claim that follows
/// dead-letters it instead of the wait failing (see [`DAMAGED_TIMES`]).
pub const PROBE: &str = "
SELECT
  EXISTS (SELECT 1 FROM _honker_jobs WHERE queue = ?1 AND state = 'ready'),
  CAST((SELECT min(run_at) FROM _honker_jobs WHERE queue = ?1 AND state = 'scheduled')
       AS INTEGER),
  CAST((SELECT min(lease_expires_at) FROM _honker_jobs WHERE queue = ?1 AND state = 'running')
       AS INTEGER),
  (EXISTS (SELECT 1 FROM _honker_settings WHERE scope = 'queue_paused')
     AND (EXISTS (SELECT 1 FROM _honker_settings
                  WHERE scope = 'queue_paused' AND name = ?1 AND key = 'paused')
          OR EXISTS (SELECT 1 FROM _honker_settings
                     WHERE scope = 'queue_paused' AND name = '' AND key = 'paused')))";

/// ?1 queue ('' for all queues), ?2 note (or NULL), ?3 now. Pauses: a
/// queue paused already keeps the time it was paused and takes the note.
pub const PAUSE: &str = "
INSERT INTO _honker_settings (scope, name, key, value, updated_at)
VALUES ('queue_paused', ?1, 'paused', ?2, ?3)
ON CONFLICT (scope, name, key) DO UPDATE SET value = excluded.value";

/// ?1 queue ('' for all queues). Lifts that pause (not the other one).
pub const RESUME: &str = "
DELETE FROM _honker_settings WHERE scope = 'queue_paused' AND name = ?1 AND key = 'paused'";

/// ?1 queue. The pauses that cover it: (name, note, since), its own first.
pub const PAUSES: &str = "
SELECT name, value, updated_at FROM _honker_settings
WHERE scope = 'queue_paused' AND name IN (?1, '') AND key = 'paused'
ORDER BY name DESC";

/// The queues paused by a pause of their own, by name: (name, note, since).
pub const PAUSED_QUEUES: &str = "
SELECT name, value, updated_at FROM _honker_settings
WHERE scope = 'queue_paused' AND key = 'paused' AND name <> '' ORDER BY name";

/// ?1 queue. A live job whose times are not integers (a row damaged by
/// hand), to name in the error when a read of those times fails.
pub const DAMAGED_LIVE: &str = "
SELECT id FROM _honker_jobs
WHERE queue = ?1 AND (typeof(run_at) <> 'integer'
    OR typeof(lease_expires_at) NOT IN ('integer', 'null'))
LIMIT 1";

/// ?1 queue, ?2 now. Live counts and the oldest due job.
pub const LIVE_STATS: &str = "
SELECT
  (SELECT count(*) FROM _honker_jobs WHERE queue = ?1 AND state = 'ready'),
  (SELECT count(*) FROM _honker_jobs WHERE queue = ?1 AND state = 'scheduled' AND run_at <= ?2),
  (SELECT count(*) FROM _honker_jobs WHERE queue = ?1 AND state = 'scheduled' AND run_at > ?2),
  (SELECT count(*) FROM _honker_jobs WHERE queue = ?1 AND state = 'running'),
  (SELECT count(*) FROM _honker_jobs WHERE queue = ?1 AND state = 'running'
                                         AND lease_expires_at <= ?2),
  (SELECT min(run_at) FROM _honker_jobs WHERE queue = ?1 AND state = 'ready'),
  (SELECT min(run_at) FROM _honker_jobs WHERE queue = ?1 AND state = 'scheduled')";

/// ?1 queue. Finished counts by state.
pub const FINISHED_STATS: &str = "
SELECT state, count(*) FROM _honker_finished WHERE queue = ?1 GROUP BY state";

/// Retention (`Database::maintain`): ?1 state, ?2 finished before, ?3 limit.
pub const PRUNE_FINISHED: &str = "
DELETE FROM _honker_finished WHERE id IN (
    SELECT id FROM _honker_finished WHERE state = ?1 AND finished_at < ?2 LIMIT ?3)";

/// ?1 created before, ?2 limit, ?3 now. Results past the retention age, and
/// expired ones.
pub const PRUNE_RESULTS: &str = "
DELETE FROM _honker_results WHERE job_id IN (
    SELECT job_id FROM _honker_results WHERE created_at < ?1 LIMIT ?2)
 OR job_id IN (
    SELECT job_id FROM _honker_results WHERE expires_at <= ?3 LIMIT ?2)";

#[cfg(test)]
mod tests {
    /// The claim's pick and the waiting claimer's look check a pause alike.
    #[test]
    fn pick_and_probe_carry_the_pause_check() {
        assert!(super::PICK.contains(super::PAUSED));
        assert!(super::PROBE.contains(super::PAUSED));
        assert!(super::PICK_KEYED.contains(super::PAUSED));
        assert!(super::PICK_KEYS.contains(super::PAUSED));
        assert!(super::PICK_KEYS.contains("concurrency_key\nFROM"));
        assert!(super::PICK_KEYED.contains("json_each(?3)"));
    }
}
