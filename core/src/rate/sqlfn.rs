//! The rate limits' SQL functions. Honker's `honker_rate_limit_try(name,
//! limit, per_s)` and `honker_rate_limit_sweep(older_than_s)` keep Honker's
//! contracts (seconds, 1/0, a count) on our table, with GCRA instead of a
//! fixed window (burst = limit: five calls on (3, 60) return 1, 1, 1, 0, 0,
//! and no doubling at a window's edge). Ours (ADR 15 rule 2: ms, JSON,
//! coded errors): `honker_rate_limit_set`, `_check`, `_info`.

use std::time::Duration;

use serde_json::json;

use super::ops;
use super::types::{self, RateDecision, RateLimit};
use crate::error::{Error, Result};
use crate::sqlfn::{secs_ms, Args, Call, Out, SqlFn, DIRECT_ONLY};
use crate::validate;

pub(crate) const FUNCTIONS: &[SqlFn] = &[
    SqlFn::atomic("honker_rate_limit_try", 3, DIRECT_ONLY, honker_try),
    SqlFn::atomic("honker_rate_limit_sweep", 1, DIRECT_ONLY, honker_sweep),
    SqlFn::atomic("honker_rate_limit_set", 4, DIRECT_ONLY, set),
    SqlFn::atomic("honker_rate_limit_check", 3, DIRECT_ONLY, check),
    SqlFn::plain("honker_rate_limit_info", 1, DIRECT_ONLY, info),
    SqlFn::atomic("honker_queue_rate_limit", 4, DIRECT_ONLY, queue_set),
    SqlFn::plain("honker_queue_rate_limit_info", 1, DIRECT_ONLY, queue_info),
];

fn name<'a>(a: &'a Args<'_>) -> Result<&'a str> {
    let n = a.text(0, "name")?;
    validate::name("rate limiter", n)?;
    Ok(n)
}

/// `honker_rate_limit_try(name, limit, per_s)` → 1 if the call is allowed
/// (and taken), else 0: `limit` calls per `per_s` seconds, all of them at
/// once after idling (burst = limit), as Honker's window allowed.
fn honker_try(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let n = name(a)?;
    let limit = a.whole(1, "limit")?;
    let per_s = a
        .opt_seconds(2, "per_s")?
        .ok_or_else(|| Error::invalid("per_s must not be NULL"))?;
    let per_ms = secs_ms(per_s);
    if limit <= 0 || per_ms <= 0 {
        return Err(Error::invalid(format!(
            "limit and per_s must be positive, got {limit} and {per_s}"
        )));
    }
    let rl = RateLimit {
        limit,
        per: Duration::from_millis(per_ms as u64),
        burst: limit,
    };
    rl.check()?;
    let d = ops::check(c.conn, n, "", &rl, 1, c.now)?;
    Ok(Out::Int(i64::from(d.allowed)))
}

/// `honker_rate_limit_sweep(older_than_s)` → how many keys were removed:
/// those fully refilled at least `older_than_s` seconds ago.
fn honker_sweep(c: &Call<'_>) -> Result<Out> {
    let s = c
        .args
        .opt_seconds(0, "older_than_s")?
        .ok_or_else(|| Error::invalid("older_than_s must not be NULL"))?;
    Ok(Out::Int(
        ops::sweep_all(c.conn, c.now, secs_ms(s).max(0))? as i64
    ))
}

/// `honker_rate_limit_set(name, limit, per_ms, burst)` → 1: stores the
/// limiter's parameters for every process (replacing what was stored).
fn set(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let n = name(a)?;
    let per = a
        .opt_ms(2, "per_ms")?
        .ok_or_else(|| Error::invalid("per_ms must not be NULL"))?;
    let rl = RateLimit {
        limit: a.whole(1, "limit")?,
        per,
        burst: a.whole(3, "burst")?,
    };
    rl.check()?;
    ops::adopt(c.conn, n, &rl, true, c.now)?;
    Ok(Out::Int(1))
}

/// `honker_rate_limit_check(name, key, cost)` → JSON `{allowed, limit,
/// remaining, retry_after, reset_after}` (ms) against the stored
/// parameters; the cost is taken when allowed (0 peeks). `NOT_FOUND` for
/// a limiter never set; a cost above its burst is `INVALID_ARGUMENT`.
fn check(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let n = name(a)?;
    let key = a.text(1, "key")?;
    validate::key_or_empty("a rate limit key", key)?;
    let rl = ops::params(c.conn, n)?.ok_or_else(|| {
        Error::not_found(format!("rate limiter {n:?} has no parameters in this file"))
    })?;
    let cost = types::cost(a.whole(2, "cost")?, &rl)?;
    Ok(Out::Text(decision_json(&ops::check(
        c.conn, n, key, &rl, cost, c.now,
    )?)))
}

pub(crate) fn decision_json(d: &RateDecision) -> String {
    json!({
        "allowed": d.allowed,
        "limit": d.limit,
        "remaining": d.remaining,
        "retry_after": ms_up(d.retry_after),
        "reset_after": ms_up(d.reset_after),
    })
    .to_string()
}

/// A wait in whole ms, rounded up (waiting that long is enough).
fn ms_up(d: Duration) -> i64 {
    d.as_micros().div_ceil(1000) as i64
}

/// `honker_rate_limit_info(name)` → JSON `{limit, per_ms, burst}` as
/// stored, or NULL.
fn info(c: &Call<'_>) -> Result<Out> {
    Ok(match ops::params(c.conn, name(&c.args)?)? {
        Some(rl) => Out::Text(
            json!({"limit": rl.limit, "per_ms": rl.per_ms(), "burst": rl.burst}).to_string(),
        ),
        None => Out::Null,
    })
}

fn queue_name<'a>(a: &'a Args<'_>) -> Result<&'a str> {
    let q = a.text(0, "queue")?;
    validate::name("queue", q)?;
    Ok(q)
}

/// `honker_queue_rate_limit(queue, limit, per_ms, burst)` → 1: limits how
/// many of the queue's jobs start, for every worker of every process
/// (enforced in each claim). `limit` NULL lifts it (then `per_ms` and
/// `burst` are ignored).
fn queue_set(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let q = queue_name(a)?;
    let limit = match a.opt_whole(1, "limit")? {
        None => None,
        Some(limit) => {
            let per = a
                .opt_ms(2, "per_ms")?
                .ok_or_else(|| Error::invalid("per_ms must not be NULL"))?;
            let rl = RateLimit {
                limit,
                per,
                burst: a.whole(3, "burst")?,
            };
            rl.check()?;
            Some(rl)
        }
    };
    ops::set_queue_limit(c.conn, q, limit.as_ref(), c.now)?;
    Ok(Out::Int(1))
}

/// `honker_queue_rate_limit_info(queue)` → JSON `{limit, per_ms, burst}`,
/// or NULL when the queue has no rate limit.
fn queue_info(c: &Call<'_>) -> Result<Out> {
    Ok(match ops::queue_limit(c.conn, queue_name(&c.args)?)? {
        Some(rl) => Out::Text(
            json!({"limit": rl.limit, "per_ms": rl.per_ms(), "burst": rl.burst}).to_string(),
        ),
        None => Out::Null,
    })
}
