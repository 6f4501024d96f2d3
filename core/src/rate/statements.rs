//! Every SQL statement the rate limits run, by name. `EXPLAIN QUERY PLAN`
//! tests pin them to their keys.

/// ?1 name, ?2 key. The key's theoretical arrival time (µs).
pub const GET: &str = "
SELECT tat_us FROM _honker_rate_limit_keys WHERE name = ?1 AND key = ?2";

/// ?1 name, ?2 key, ?3 tat (µs). Stores a granted call's new tat.
pub const PUT: &str = "
INSERT INTO _honker_rate_limit_keys (name, key, tat_us) VALUES (?1, ?2, ?3)
ON CONFLICT (name, key) DO UPDATE SET tat_us = excluded.tat_us";

/// ?1 cutoff (µs), ?2 batch. Removes up to ?2 keys refilled by the cutoff,
/// oldest first.
pub const SWEEP: &str = "
DELETE FROM _honker_rate_limit_keys WHERE (name, key) IN (
    SELECT name, key FROM _honker_rate_limit_keys INDEXED BY _honker_rate_limit_keys_tat
    WHERE tat_us <= ?1 ORDER BY tat_us LIMIT ?2)";

/// ?1 cutoff (µs). Honker's sweep: every key refilled by the cutoff.
pub const SWEEP_ALL: &str = "
DELETE FROM _honker_rate_limit_keys WHERE tat_us <= ?1";

/// ?1 scope (`rate_limit`, or `queue_rate_limit` for a queue's), ?2 name.
/// A limiter's stored parameters: rows `limit`, `per_ms`, `burst` (and a
/// queue's state, `tat_us`).
pub const PARAMS: &str = "
SELECT key, value FROM _honker_settings WHERE scope = ?1 AND name = ?2";

/// ?1 scope, ?2 name. Removes a limiter's settings (a queue's limit lifted,
/// with its state).
pub const CLEAR_PARAMS: &str = "
DELETE FROM _honker_settings WHERE scope = ?1 AND name = ?2";
