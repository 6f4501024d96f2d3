//! The lock operations on a connection already inside a write transaction
//! (or a read, for `get`). Callers validated names, owners, TTLs and tokens
//! and read the clock.

use super::statements as st;
use super::types::{LockGrant, LockInfo};
use crate::error::{Error, ErrorKind, Result};
use crate::raw::{params, Conn};

/// The holder of `name`, if any (lapsed or not).
pub(crate) fn get(conn: Conn<'_>, name: &str) -> Result<Option<LockInfo>> {
    conn.prepare_cached(st::GET)?.query_row(params![name], |r| {
        Ok(LockInfo {
            name: name.to_owned(),
            owner: r.get(0)?,
            token: r.get(1)?,
            acquired_at: r.get(2)?,
            expires_at: r.get(3)?,
        })
    })
}

/// What an acquire found.
pub(crate) enum Taken {
    /// Granted now, with a new token.
    Granted(LockGrant),
    /// Already held by this owner (not lapsed): its grant, unchanged. Only
    /// Honker's `honker_lock_acquire` re-enters ([`Reenter::Honker`]).
    Mine(LockGrant),
    /// Held by another holder.
    Held,
}

/// What an acquire does when the unlapsed holder has the same owner name.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reenter {
    /// Nothing: every acquire is its own holder with its own token, so two
    /// handlers or requests that share an owner name exclude each other
    /// (ADR 22 §5, amended by issue 53).
    No,
    /// Honker's SQL contract: the same owner holds it already (1), its TTL
    /// not refreshed.
    Honker,
}

/// Takes `name` for `owner` if it is free or lapsed: a new grant with a new
/// token. An unlapsed holder keeps it, whatever its owner's name, except
/// under Honker's rule ([`Reenter::Honker`]), where the same owner finds its
/// own grant.
pub(crate) fn take(
    conn: Conn<'_>,
    name: &str,
    owner: &str,
    ttl_ms: i64,
    reenter: Reenter,
    now: i64,
) -> Result<Taken> {
    let expires_at = now.saturating_add(ttl_ms);
    if let Some(h) = get(conn, name)? {
        if h.expires_at > now {
            if reenter == Reenter::Honker && h.owner == owner {
                return Ok(Taken::Mine(LockGrant {
                    token: h.token,
                    expires_at: h.expires_at,
                }));
            }
            return Ok(Taken::Held);
        }
    }
    let token: i64 = conn
        .prepare_cached(st::NEXT_TOKEN)?
        .query_one(params![], |r| r.get(0))?;
    conn.prepare_cached(st::PUT)?
        .execute(params![name, owner, token, now, expires_at])?;
    Ok(Taken::Granted(LockGrant { token, expires_at }))
}

fn lost(name: &str, token: i64) -> Error {
    Error::new(
        ErrorKind::LeaseLost,
        format!(
        "lock {name:?} is not held with token {token} (released, or taken by another after its ttl)"
    ),
    )
}

/// Extends the lock held with `token` to now + `ttl_ms`; `LEASE_LOST` if
/// that token no longer holds it.
pub(crate) fn renew(conn: Conn<'_>, name: &str, token: i64, ttl_ms: i64, now: i64) -> Result<i64> {
    let expires_at = now.saturating_add(ttl_ms);
    let n = conn
        .prepare_cached(st::RENEW)?
        .execute(params![name, token, expires_at])?;
    if n == 0 {
        return Err(lost(name, token));
    }
    Ok(expires_at)
}

/// Releases the lock held with `token`; whether it was.
pub(crate) fn release(conn: Conn<'_>, name: &str, token: i64) -> Result<bool> {
    Ok(conn
        .prepare_cached(st::RELEASE)?
        .execute(params![name, token])?
        > 0)
}

/// The fence: `Ok` while `token` holds `name` (a lapsed holder nobody
/// replaced still does), else `LEASE_LOST`. Inside the caller's write
/// transaction, nothing can change the lock before it commits.
pub(crate) fn fence(conn: Conn<'_>, name: &str, token: i64) -> Result<()> {
    if holds(conn, name, token)? {
        Ok(())
    } else {
        Err(lost(name, token))
    }
}

/// Whether `token` holds `name` (the fence's test, as a value).
pub(crate) fn holds(conn: Conn<'_>, name: &str, token: i64) -> Result<bool> {
    Ok(get(conn, name)?.is_some_and(|h| h.token == token))
}

/// Honker's renewal and release, by owner: rows changed.
pub(crate) fn renew_by_owner(
    conn: Conn<'_>,
    name: &str,
    owner: &str,
    ttl_ms: i64,
    now: i64,
) -> Result<usize> {
    conn.prepare_cached(st::RENEW_BY_OWNER)?.execute(params![
        name,
        owner,
        now.saturating_add(ttl_ms)
    ])
}

pub(crate) fn release_by_owner(conn: Conn<'_>, name: &str, owner: &str) -> Result<usize> {
    conn.prepare_cached(st::RELEASE_BY_OWNER)?
        .execute(params![name, owner])
}

/// Walks up to `batch` holders after the name `after`, removing those whose
/// TTL lapsed: (removed, the last name seen, or `None` at the end).
pub(crate) fn sweep(
    conn: Conn<'_>,
    after: &String,
    now: i64,
    batch: usize,
) -> Result<(usize, Option<String>)> {
    let holders: Vec<(String, i64)> = conn
        .prepare_cached(st::WALK)?
        .query_map(params![after, batch as i64], |r| Ok((r.get(0)?, r.get(1)?)))?;
    let mut removed = 0;
    let mut delete = conn.prepare_cached(st::SWEEP_ONE)?;
    for (name, expires_at) in &holders {
        if *expires_at <= now {
            removed += delete.execute(params![name, now])?;
        }
    }
    let last = if holders.len() < batch {
        None
    } else {
        holders.last().map(|(n, _)| n.clone())
    };
    Ok((removed, last))
}
