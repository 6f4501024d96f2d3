//! Every SQL statement the locks run, by name. `EXPLAIN QUERY PLAN` tests
//! pin them to their keys.

/// ?1 name. The holder's row.
pub const GET: &str = "
SELECT owner, token, acquired_at, expires_at FROM _honker_lock_holders WHERE name = ?1";

/// The next fencing token, inside the granting transaction (the counter is
/// the holders' row named '').
pub const NEXT_TOKEN: &str = "
UPDATE _honker_lock_holders SET token = token + 1 WHERE name = '' RETURNING token";

/// ?1 name, ?2 owner, ?3 token, ?4 now, ?5 expires_at. A grant: replaces a
/// lapsed holder (the caller checked).
pub const PUT: &str = "
INSERT INTO _honker_lock_holders (name, owner, token, acquired_at, expires_at)
VALUES (?1, ?2, ?3, ?4, ?5)
ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, token = excluded.token,
    acquired_at = excluded.acquired_at, expires_at = excluded.expires_at";

/// ?1 name, ?2 token, ?3 expires_at. A renewal by the holder's token.
pub const RENEW: &str = "
UPDATE _honker_lock_holders SET expires_at = ?3 WHERE name = ?1 AND token = ?2";

/// ?1 name, ?2 owner, ?3 expires_at. Honker's renewal, by owner.
pub const RENEW_BY_OWNER: &str = "
UPDATE _honker_lock_holders SET expires_at = ?3 WHERE name = ?1 AND owner = ?2";

/// ?1 name, ?2 token. A release by the holder's token.
pub const RELEASE: &str = "
DELETE FROM _honker_lock_holders WHERE name = ?1 AND token = ?2";

/// ?1 name, ?2 owner. Honker's release, by owner.
pub const RELEASE_BY_OWNER: &str = "
DELETE FROM _honker_lock_holders WHERE name = ?1 AND owner = ?2";

/// ?1 name (the last seen), ?2 batch. The next holders by name, for
/// maintenance's walk (after '': the counter is never walked).
pub const WALK: &str = "
SELECT name, expires_at FROM _honker_lock_holders WHERE name > ?1 ORDER BY name LIMIT ?2";

/// ?1 name, ?2 now. Removes the holder if its TTL lapsed (a renewal may
/// have come since the walk read it; its token is never handed out again:
/// the counter only grows).
pub const SWEEP_ONE: &str = "
DELETE FROM _honker_lock_holders WHERE name = ?1 AND expires_at <= ?2";
