//! The rate-limit operations on a connection already inside a write
//! transaction (or a read, for `params` and `peek`). Callers validated
//! names, keys, parameters and costs, and read the clock.
//!
//! GCRA (ADR 23): a key stores its theoretical arrival time `tat`; with
//! emission interval `T = per / limit` and tolerance `τ = burst × T`, a call
//! of cost `c` at `now` is allowed iff `max(tat, now) + c·T ≤ now + τ`, and
//! then `tat` becomes that. Times are µs: `T` is rounded up, so the limit is
//! never looser than asked.

use std::time::Duration;

use super::blocks::QueueLimit;
use super::statements as st;
use super::types::{RateDecision, RateLimit};
use crate::error::{Error, Result};
use crate::raw::{params, Conn};
use crate::settings;

const SCOPE: &str = "rate_limit";
/// The settings scope of queues' rate limits (`name` = the queue); a
/// queue's state is its row `tat_us` there, and its concurrency caps are
/// the rows [`CAP_KEYS`] (ADR 35): the rows every claim reads, in one
/// statement.
pub(crate) const QUEUE_SCOPE: &str = "queue_rate_limit";

/// The keys of a queue's concurrency caps among its claim's settings rows.
pub(crate) const CAP_KEYS: [&str; 2] = ["max_running", "max_running_per_key"];

/// The keys of a queue's fairness among its claim's settings rows (ADR
/// 36), as few rows as it takes (each row a claim returns costs it about
/// 3 k instructions): `round_robin`, present when its claims take keys in
/// turn, whose value is its current turn (its state: about the latest
/// turn a claim took; a key's next job never takes an earlier one);
/// `key_limit`, its rate limit per key (`limit | burst << 32`); and
/// `key_per_ms`, that limit's period.
pub(crate) const FAIR_KEYS: [&str; 3] = ["round_robin", "key_limit", "key_per_ms"];

/// Whether a queue's settings row `key` is not part of its rate limit.
fn beside_limit(key: &str) -> bool {
    key == "tat_us" || CAP_KEYS.contains(&key) || FAIR_KEYS.contains(&key)
}

/// `key_limit`'s value: the limit and the burst (each at most 10⁹ < 2³²).
pub(crate) fn pack_key_limit(limit: &RateLimit) -> i64 {
    limit.limit | (limit.burst << 32)
}

/// The limiter's stored parameters, if any.
pub(crate) fn params(conn: Conn<'_>, name: &str) -> Result<Option<RateLimit>> {
    scoped_params(conn, SCOPE, name)
}

fn scoped_params(conn: Conn<'_>, scope: &str, name: &str) -> Result<Option<RateLimit>> {
    parse(name, &stored(conn, scope, name)?)
}

/// A limiter's settings row: key, value, when it was written (ms).
pub(crate) type Setting = (String, Option<i64>, i64);

/// The row `key` among a limiter's settings rows.
fn row<'r>(rows: &'r [Setting], key: &str) -> Option<&'r Setting> {
    rows.iter().find(|(k, _, _)| k == key)
}

/// The value of the row `key`, if it is there with one.
fn int(rows: &[Setting], key: &str) -> Option<i64> {
    row(rows, key).and_then(|(_, v, _)| *v)
}

/// A limiter's settings rows (parameters, and a queue's state).
fn stored(conn: Conn<'_>, scope: &str, name: &str) -> Result<Vec<Setting>> {
    conn.prepare_cached(st::PARAMS)?
        .query_map(params![scope, name], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
}

/// Parameters from their settings rows (other rows, a queue's `tat_us`,
/// are left alone).
fn parse(name: &str, rows: &[Setting]) -> Result<Option<RateLimit>> {
    if rows.iter().all(|(k, _, _)| beside_limit(k)) {
        return Ok(None);
    }
    let get = |k: &str| {
        int(rows, k).ok_or_else(|| {
            Error::internal(format!(
                "rate limiter {name:?}'s settings lack a {k} (written by hand?)"
            ))
        })
    };
    let limit = RateLimit {
        limit: get("limit")?,
        per: Duration::from_millis(u64::try_from(get("per_ms")?).unwrap_or(0)),
        burst: get("burst")?,
    };
    limit.check().map_err(|e| {
        Error::internal(format!(
            "rate limiter {name:?}'s stored settings are out of bounds: {}",
            e.message()
        ))
    })?;
    Ok(Some(limit))
}

/// Stores the limiter's parameters for every process.
pub(crate) fn set_params(conn: Conn<'_>, name: &str, limit: &RateLimit, now: i64) -> Result<()> {
    set_scoped(conn, SCOPE, name, limit, now)
}

fn set_scoped(conn: Conn<'_>, scope: &str, name: &str, limit: &RateLimit, now: i64) -> Result<()> {
    settings::set_int(conn, scope, name, "limit", Some(limit.limit), now)?;
    settings::set_int(conn, scope, name, "per_ms", Some(limit.per_ms()), now)?;
    settings::set_int(conn, scope, name, "burst", Some(limit.burst), now)
}

/// A queue's rate limit, if it has one.
pub(crate) fn queue_limit(conn: Conn<'_>, queue: &str) -> Result<Option<RateLimit>> {
    Ok(queue_state(conn, queue)?.map(|s| s.limit))
}

/// A queue's rate limit, its theoretical arrival time (µs) and when the
/// limit was set, read in one statement: the queue's state is a settings
/// row beside its parameters (`tat_us`), so the check in every claim reads
/// and writes one page that the parameters' read already brought in, and
/// adds no index to update.
pub(crate) fn queue_state(conn: Conn<'_>, queue: &str) -> Result<Option<QueueLimit>> {
    Ok(queue_controls(conn, queue)?.0)
}

/// What a claim of `queue` obeys besides a pause: its rate limit with its
/// state ([`queue_state`]) and its concurrency caps (ADR 35), from one read
/// of its settings rows; a queue with neither costs that one read.
pub(crate) fn queue_controls(
    conn: Conn<'_>,
    queue: &str,
) -> Result<(Option<QueueLimit>, crate::queue::Concurrency, Option<Fair>)> {
    let rows = stored(conn, QUEUE_SCOPE, queue)?;
    Ok((
        queue_limit_of(queue, &rows)?,
        caps_of(&rows),
        fairness_of(queue, &rows)?,
    ))
}

/// A queue's rate limit and its state from its settings rows.
pub(crate) fn queue_limit_of(queue: &str, rows: &[Setting]) -> Result<Option<QueueLimit>> {
    Ok(parse(queue, rows)?.map(|limit| QueueLimit {
        limit,
        tat: int(rows, "tat_us"),
        set_at: row(rows, "limit").map_or(0, |(_, _, at)| *at),
    }))
}

/// A queue's fairness from its settings rows (ADR 36): `None` when it
/// has neither turns nor a limit per key.
pub(crate) fn fairness_of(queue: &str, rows: &[Setting]) -> Result<Option<Fair>> {
    // The order's row is there (its value the current turn) or not.
    let turn = row(rows, FAIR_KEYS[0]).map(|(_, v, _)| v.unwrap_or(0));
    let key_limit = match (int(rows, FAIR_KEYS[1]), int(rows, FAIR_KEYS[2])) {
        (Some(packed), Some(per_ms)) => {
            let l = RateLimit {
                limit: packed & 0xffff_ffff,
                per: Duration::from_millis(u64::try_from(per_ms).unwrap_or(0)),
                burst: packed >> 32,
            };
            l.check().map_err(|e| {
                Error::internal(format!(
                    "queue {queue:?}'s stored rate limit per key is out of bounds: {}",
                    e.message()
                ))
            })?;
            Some(l)
        }
        _ => None,
    };
    if turn.is_none() && key_limit.is_none() {
        return Ok(None);
    }
    let set_at = |k| row(rows, k).map_or(0, |(_, _, at)| *at);
    Ok(Some(Fair {
        round_robin: turn.is_some(),
        key_limit,
        turn: turn.unwrap_or(0),
        key_set_at: set_at(FAIR_KEYS[1]).max(set_at(FAIR_KEYS[2])),
    }))
}

/// How a queue shares its claims among its keys, as its claim reads it.
#[derive(Clone, Debug)]
pub(crate) struct Fair {
    /// Its claims take keys in turn.
    pub round_robin: bool,
    /// Its rate limit per key.
    pub key_limit: Option<RateLimit>,
    /// Its current turn.
    pub turn: i64,
    /// When its rate limit per key was last set (ms; the rows'
    /// `updated_at`): a block of a key's starts serves only the limit it
    /// was reserved under.
    pub key_set_at: i64,
}

impl Fair {
    /// As [`Fairness`](crate::queue::Fairness) states it.
    pub(crate) fn public(&self) -> crate::queue::Fairness {
        crate::queue::Fairness {
            order: self
                .round_robin
                .then(|| crate::queue::Fairness::ROUND_ROBIN.to_owned()),
            key_limit: self.key_limit.as_ref().map(|l| l.limit as u32),
            key_per: self.key_limit.as_ref().map(|l| l.per),
            key_burst: self.key_limit.as_ref().map(|l| l.burst as u32),
        }
    }
}

/// The `tat_us` above which a key under `limit` can start no job at
/// `now_ms` (GCRA: one more start needs `max(tat, now) + T ≤ now + τ`).
pub(crate) fn key_blocked_above(limit: &RateLimit, now_ms: i64) -> i64 {
    now_ms
        .saturating_mul(1000)
        .saturating_add(limit.tolerance_us())
        .saturating_sub(limit.interval_us())
}

/// A queue's concurrency caps from its settings rows.
pub(crate) fn caps_of(rows: &[Setting]) -> crate::queue::Concurrency {
    let cap = |key: &str| int(rows, key).and_then(|v| u32::try_from(v).ok());
    crate::queue::Concurrency {
        max_running: cap(CAP_KEYS[0]),
        max_running_per_key: cap(CAP_KEYS[1]),
    }
}

/// Sets (or, with `None`, lifts) a queue's rate limit for every process.
/// Lifting it forgets the queue's state too.
pub(crate) fn set_queue_limit(
    conn: Conn<'_>,
    queue: &str,
    limit: Option<&RateLimit>,
    now: i64,
) -> Result<()> {
    match limit {
        Some(l) => set_scoped(conn, QUEUE_SCOPE, queue, l, now),
        None => {
            conn.prepare_cached(st::CLEAR_QUEUE_LIMIT)?
                .execute(params![queue])?;
            Ok(())
        }
    }
}

/// How many jobs a queue's limit lets start at `now_ms` (up to `want`),
/// and when the next one may if that is none (ms, rounded up).
pub(crate) fn queue_allowance(
    limit: &RateLimit,
    tat: Option<i64>,
    want: i64,
    now_ms: i64,
) -> (i64, i64) {
    let now = now_ms.saturating_mul(1000);
    let (t, tau) = (limit.interval_us(), limit.tolerance_us());
    let tat = tat.unwrap_or(now).max(now);
    let room = now.saturating_add(tau).saturating_sub(tat);
    let n = (room / t).clamp(0, want);
    // The next start: when tat − τ + T has come (one interval freed).
    let next_us = tat.saturating_sub(tau).saturating_add(t);
    let next_ms = next_us.div_euclid(1000) + i64::from(next_us.rem_euclid(1000) != 0);
    (n, next_ms.max(now_ms))
}

/// The queue's `tat` (µs) once `k` more of its jobs started at `now_ms`.
pub(crate) fn queue_tat_after(limit: &RateLimit, tat: Option<i64>, k: i64, now_ms: i64) -> i64 {
    let now = now_ms.saturating_mul(1000);
    let tat = tat.unwrap_or(now).max(now);
    tat.saturating_add(k.saturating_mul(limit.interval_us()))
}

/// Stores a queue's `tat` (µs).
pub(crate) fn set_queue_tat(conn: Conn<'_>, queue: &str, tat: i64, now_ms: i64) -> Result<()> {
    settings::set_int(conn, QUEUE_SCOPE, queue, "tat_us", Some(tat), now_ms)
}

/// How a handle's parameters meet the stored ones.
pub(crate) fn adopt(
    conn: Conn<'_>,
    name: &str,
    limit: &RateLimit,
    update: bool,
    now: i64,
) -> Result<()> {
    match params(conn, name)? {
        Some(stored) if stored == *limit => Ok(()),
        Some(stored) if !update => Err(Error::invalid(format!(
            "rate limiter {name:?} is stored with limit {}, per {} ms, burst {}; this handle \
             asks for limit {}, per {} ms, burst {} (ask to update them for every process, \
             or open it with the stored values)",
            stored.limit,
            stored.per_ms(),
            stored.burst,
            limit.limit,
            limit.per_ms(),
            limit.burst
        ))),
        _ => set_params(conn, name, limit, now),
    }
}

fn tat(conn: Conn<'_>, name: &str, key: &str) -> Result<Option<i64>> {
    conn.prepare_cached(st::GET)?
        .query_row(params![name, key], |r| r.get(0))
}

/// Checks (and, when allowed with a cost, takes) `cost` calls of `key`:
/// one statement when allowed; a refusal reads the key for its answer.
pub(crate) fn check(
    conn: Conn<'_>,
    name: &str,
    key: &str,
    limit: &RateLimit,
    cost: i64,
    now_ms: i64,
) -> Result<RateDecision> {
    let now = now_ms.saturating_mul(1000);
    if cost > 0 {
        let step = cost.saturating_mul(limit.interval_us());
        let taken: Option<i64> = conn
            .prepare_cached(st::TAKE)?
            .query_row(params![name, key, now, step, limit.tolerance_us()], |r| {
                r.get(0)
            })?;
        if let Some(new_tat) = taken {
            return Ok(granted(limit, new_tat, now));
        }
    }
    Ok(decide(tat(conn, name, key)?, limit, cost, now))
}

/// The answer to an allowed call whose key's tat is now `new_tat`.
fn granted(limit: &RateLimit, new_tat: i64, now: i64) -> RateDecision {
    let allow_until = now.saturating_add(limit.tolerance_us());
    RateDecision {
        allowed: true,
        limit: limit.limit,
        remaining: (allow_until - new_tat).max(0) / limit.interval_us(),
        retry_after: Duration::ZERO,
        reset_after: Duration::from_micros(u64::try_from(new_tat - now).unwrap_or(0)),
    }
}

/// The GCRA step without taking anything: the answer for `cost` calls
/// against a key whose stored tat is `stored` (a peek, or a refusal).
pub(crate) fn decide(stored: Option<i64>, limit: &RateLimit, cost: i64, now: i64) -> RateDecision {
    let t = limit.interval_us();
    let tat = stored.unwrap_or(now).max(now);
    let new_tat = tat.saturating_add(cost.saturating_mul(t));
    let allow_until = now.saturating_add(limit.tolerance_us());
    let us = |v: i64| Duration::from_micros(u64::try_from(v).unwrap_or(0));
    if new_tat <= allow_until {
        granted(limit, new_tat, now)
    } else {
        RateDecision {
            allowed: false,
            limit: limit.limit,
            remaining: (allow_until - tat).max(0) / t,
            retry_after: us(new_tat - allow_until),
            reset_after: us(tat - now),
        }
    }
}

/// Walks up to `batch` keys after `after` (in key order), removing those
/// refilled by `now` (ms): (removed, the last key seen, or `None` at the
/// end of the keys).
#[allow(clippy::type_complexity)]
pub(crate) fn sweep(
    conn: Conn<'_>,
    after: &(String, String),
    now_ms: i64,
    batch: usize,
) -> Result<(usize, Option<(String, String)>)> {
    let cutoff = now_ms.saturating_mul(1000);
    let keys: Vec<(String, String, i64)> = conn
        .prepare_cached(st::WALK)?
        .query_map(params![after.0, after.1, batch as i64], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })?;
    let mut removed = 0;
    let mut delete = conn.prepare_cached(st::SWEEP_ONE)?;
    for (name, key, tat) in &keys {
        if *tat <= cutoff {
            removed += delete.execute(params![name, key, cutoff])?;
        }
    }
    let last = if keys.len() < batch {
        None
    } else {
        keys.last().map(|(n, k, _)| (n.clone(), k.clone()))
    };
    Ok((removed, last))
}

/// Honker's sweep: every key refilled at least `older_than_ms` ago.
pub(crate) fn sweep_all(conn: Conn<'_>, now_ms: i64, older_than_ms: i64) -> Result<usize> {
    let cutoff = now_ms.saturating_sub(older_than_ms).saturating_mul(1000);
    conn.prepare_cached(st::SWEEP_ALL)?.execute(params![cutoff])
}
