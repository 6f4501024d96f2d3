//! The locks' SQL functions. Honker's `honker_lock_acquire(name, owner,
//! ttl_s)`, `honker_lock_release(name, owner)` and `honker_lock_renew(name,
//! owner, ttl_s)` keep Honker's contracts (seconds, by owner, 1/0), on our
//! table with tokens granted as ours are. Ours (ADR 15 rule 2: ms, tokens,
//! coded errors): `honker_lock_take`, `_extend`, `_drop`, `_fence`,
//! `_held`, `_info`.

use serde_json::json;

use super::ops::{self, Reenter, Taken};
use super::types;
use crate::error::{Error, Result};
use crate::sqlfn::{Args, Call, Out, SqlFn, DIRECT_ONLY};
use crate::validate;

pub(crate) const FUNCTIONS: &[SqlFn] = &[
    SqlFn::atomic("honker_lock_acquire", 3, DIRECT_ONLY, honker_acquire),
    SqlFn::atomic("honker_lock_release", 2, DIRECT_ONLY, honker_release),
    SqlFn::atomic("honker_lock_renew", 3, DIRECT_ONLY, honker_renew),
    SqlFn::atomic("honker_lock_take", 3, DIRECT_ONLY, take),
    SqlFn::atomic("honker_lock_extend", 3, DIRECT_ONLY, extend),
    SqlFn::atomic("honker_lock_drop", 2, DIRECT_ONLY, drop_lock),
    // Reads: in the caller's transaction (or statement) as it stands, so a
    // fence sees what that transaction sees, and a check takes no lock.
    SqlFn::plain("honker_lock_fence", 2, DIRECT_ONLY, fence),
    SqlFn::plain("honker_lock_held", 2, DIRECT_ONLY, held),
    SqlFn::plain("honker_lock_info", 1, DIRECT_ONLY, info),
];

fn name<'a>(a: &'a Args<'_>) -> Result<&'a str> {
    let n = a.text(0, "name")?;
    validate::name("lock", n)?;
    Ok(n)
}

fn owner<'a>(a: &'a Args<'_>) -> Result<&'a str> {
    let o = a.text(1, "owner")?;
    validate::name("owner", o)?;
    Ok(o)
}

fn token(a: &Args<'_>) -> Result<i64> {
    types::token(a.int(1, "token")?)
}

/// Honker's TTL in seconds (fractions allowed), positive.
fn ttl_seconds(a: &Args<'_>) -> Result<i64> {
    let s = a
        .opt_seconds(2, "ttl_s")?
        .ok_or_else(|| Error::invalid("ttl_s must not be NULL"))?;
    types::ttl_ms(std::time::Duration::from_secs_f64(s))
}

fn ttl_millis(a: &Args<'_>) -> Result<i64> {
    let ttl = a
        .opt_ms(2, "ttl_ms")?
        .ok_or_else(|| Error::invalid("ttl_ms must not be NULL"))?;
    types::ttl_ms(ttl)
}

/// `honker_lock_acquire(name, owner, ttl_s)` → 1 if `owner` holds the lock
/// now (taken, or already its own: then its TTL is not refreshed, as in
/// Honker), else 0.
fn honker_acquire(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let (n, o, ttl) = (name(a)?, owner(a)?, ttl_seconds(a)?);
    Ok(Out::Int(
        match ops::take(c.conn, n, o, ttl, Reenter::Honker, c.now)? {
            Taken::Granted(_) | Taken::Mine(_) => 1,
            Taken::Held => 0,
        },
    ))
}

/// `honker_lock_release(name, owner)` → 1 if `owner` held it, else 0.
fn honker_release(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let n = ops::release_by_owner(c.conn, name(a)?, owner(a)?)?;
    Ok(Out::Int(i64::from(n > 0)))
}

/// `honker_lock_renew(name, owner, ttl_s)` → 1 if `owner` still holds it
/// (also after its TTL lapsed, if nobody took it), now until now + ttl;
/// else 0.
fn honker_renew(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let (n, o, ttl) = (name(a)?, owner(a)?, ttl_seconds(a)?);
    let changed = ops::renew_by_owner(c.conn, n, o, ttl, c.now)?;
    Ok(Out::Int(i64::from(changed > 0)))
}

/// `honker_lock_take(name, owner, ttl_ms)` → JSON `{token, expires_at}`
/// (ms) of a new grant when the lock is free or lapsed, NULL while any
/// holder has it (one with the same owner name too: every take is its own
/// holder; extend a grant with `honker_lock_extend`).
fn take(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let (n, o, ttl) = (name(a)?, owner(a)?, ttl_millis(a)?);
    Ok(match ops::take(c.conn, n, o, ttl, Reenter::No, c.now)? {
        Taken::Granted(g) | Taken::Mine(g) => {
            Out::Text(json!({"token": g.token, "expires_at": g.expires_at}).to_string())
        }
        Taken::Held => Out::Null,
    })
}

/// `honker_lock_extend(name, token, ttl_ms)` → the new expiry (ms);
/// `LEASE_LOST` if the token no longer holds the lock.
fn extend(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let (n, t, ttl) = (name(a)?, token(a)?, ttl_millis(a)?);
    Ok(Out::Int(ops::renew(c.conn, n, t, ttl, c.now)?))
}

/// `honker_lock_drop(name, token)` → 1 if the token held it, else 0.
fn drop_lock(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    Ok(Out::Int(i64::from(ops::release(
        c.conn,
        name(a)?,
        token(a)?,
    )?)))
}

/// `honker_lock_fence(name, token)` → 1 while the token holds the lock;
/// else `LEASE_LOST`, failing the statement (call it in the transaction
/// that makes the guarded write, and roll back on the error).
fn fence(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    ops::fence(c.conn, name(a)?, token(a)?)?;
    Ok(Out::Int(1))
}

/// `honker_lock_held(name, token)` → 1 while the token holds the lock, else
/// 0: a predicate for the guarded write itself (`UPDATE … WHERE … AND
/// honker_lock_held('x', 7)` changes nothing once the token is stale).
fn held(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    Ok(Out::Int(i64::from(ops::holds(
        c.conn,
        name(a)?,
        token(a)?,
    )?)))
}

/// `honker_lock_info(name)` → JSON `{name, owner, token, acquired_at,
/// expires_at}` (ms) of its holder (lapsed or not), or NULL.
fn info(c: &Call<'_>) -> Result<Out> {
    Ok(match ops::get(c.conn, name(&c.args)?)? {
        Some(h) => Out::Text(
            json!({"name": h.name, "owner": h.owner, "token": h.token,
                   "acquired_at": h.acquired_at, "expires_at": h.expires_at})
            .to_string(),
        ),
        None => Out::Null,
    })
}
