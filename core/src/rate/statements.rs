//! Every SQL statement the rate limits run, by name. `EXPLAIN QUERY PLAN`
//! tests pin them to their keys.

/// ?1 name, ?2 key. The key's theoretical arrival time (µs).
pub const GET: &str = "
SELECT tat_us FROM _honker_rate_limit_keys WHERE name = ?1 AND key = ?2";

/// ?1 name, ?2 key, ?3 now (µs), ?4 cost × interval (µs), ?5 tolerance
/// (µs). The GCRA step in one statement: the key's new tat when the call is
/// allowed (a new key always is: a cost is at most the burst), no row when
/// it is not (nothing changes).
pub const TAKE: &str = "
INSERT INTO _honker_rate_limit_keys (name, key, tat_us) VALUES (?1, ?2, ?3 + ?4)
ON CONFLICT (name, key) DO UPDATE SET tat_us = max(tat_us, ?3) + ?4
    WHERE max(tat_us, ?3) + ?4 <= ?3 + ?5
RETURNING tat_us";

/// ?1 name, ?2 key (the last seen), ?3 batch. The next keys in key order,
/// for maintenance's walk.
pub const WALK: &str = "
SELECT name, key, tat_us FROM _honker_rate_limit_keys
WHERE (name, key) > (?1, ?2) ORDER BY name, key LIMIT ?3";

/// ?1 name, ?2 key, ?3 cutoff (µs). Removes the key if it is refilled by
/// the cutoff (a check may have used it since the walk read it).
pub const SWEEP_ONE: &str = "
DELETE FROM _honker_rate_limit_keys WHERE name = ?1 AND key = ?2 AND tat_us <= ?3";

/// ?1 cutoff (µs). Honker's sweep: every key refilled by the cutoff (one
/// pass over the keys).
pub const SWEEP_ALL: &str = "
DELETE FROM _honker_rate_limit_keys WHERE tat_us <= ?1";

/// ?1 scope (`rate_limit`, or `queue_rate_limit` for a queue's), ?2 name.
/// A limiter's stored parameters: rows `limit`, `per_ms`, `burst` (and a
/// queue's state, `tat_us`), with when each was written.
pub const PARAMS: &str = "
SELECT key, value, updated_at FROM _honker_settings WHERE scope = ?1 AND name = ?2";

/// ?1 queue. Lifts a queue's rate limit, with its state; the queue's
/// concurrency caps, stored beside it (ADR 35), stay.
pub const CLEAR_QUEUE_LIMIT: &str = "
DELETE FROM _honker_settings
WHERE scope = 'queue_rate_limit' AND name = ?1 AND key <> 'max_running'
  AND key <> 'max_running_per_key'";
