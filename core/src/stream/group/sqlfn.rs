//! The groups' SQL functions (`honker_group_*`, ADR 15's rule 2: ms, (offset,
//! token) for a held lease, coded errors). Honker has no groups.

use std::time::Duration;

use serde_json::{json, Map, Value as Json};

use super::{ops, GroupInfo, GroupOptions};
use crate::clock::duration_ms;
use crate::error::{Error, Result};
use crate::sqlfn::{payload_json, Args, Call, Out, SqlFn, DIRECT_ONLY};
use crate::stream::Start;
use crate::validate;

pub(crate) const FUNCTIONS: &[SqlFn] = &[
    SqlFn::atomic("honker_group_create", -1, DIRECT_ONLY, create),
    SqlFn::atomic("honker_group_delete", 2, DIRECT_ONLY, delete),
    SqlFn::atomic("honker_group_claim", 5, DIRECT_ONLY, claim),
    SqlFn::atomic("honker_group_ack", 4, DIRECT_ONLY, ack),
    SqlFn::atomic("honker_group_retry", 6, DIRECT_ONLY, retry),
    SqlFn::atomic("honker_group_fail", 5, DIRECT_ONLY, fail),
    SqlFn::atomic("honker_group_release", 4, DIRECT_ONLY, release),
    SqlFn::atomic("honker_group_heartbeat", 5, DIRECT_ONLY, heartbeat),
    SqlFn::atomic("honker_group_remove_member", 4, DIRECT_ONLY, remove_member),
    SqlFn::atomic("honker_group_dead", 4, DIRECT_ONLY, dead),
    SqlFn::atomic("honker_group_redrive", -1, DIRECT_ONLY, redrive),
    SqlFn::atomic("honker_group_info", 2, DIRECT_ONLY, info),
];

/// The stream and group arguments (0 and 1), checked.
fn names<'a>(a: &'a Args<'_>) -> Result<(&'a str, &'a str)> {
    let s = a.text(0, "stream")?;
    validate::name("stream", s)?;
    let g = a.text(1, "group")?;
    validate::name("group", g)?;
    Ok((s, g))
}

fn token<'a>(a: &'a Args<'_>, i: usize) -> Result<&'a str> {
    a.text(i, "lease_token")
}

/// `honker_group_create(stream, group[, options])` → the group's next
/// offset. `options`: a JSON object with `start` (`"beginning"`, the
/// default, or `"latest"`), `start_offset`, `start_time_ms`,
/// `max_deliveries`, `lease_ms`, `member_idle_ms`. An existing group keeps
/// its place and takes the options.
fn create(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    a.count(2, 3)?;
    let (s, g) = names(a)?;
    let mut start = Start::Beginning;
    let mut o = GroupOptions::default();
    if let Some(text) = if a.has(2) {
        a.opt_text(2, "options")?
    } else {
        None
    } {
        let bad = |w: &str| Error::invalid(format!("honker_group_create: options: {w}"));
        let obj: Map<String, Json> = match serde_json::from_str(text) {
            Ok(Json::Object(m)) => m,
            _ => return Err(bad("must be a JSON object")),
        };
        let int = |k: &str, v: &Json| {
            v.as_i64()
                .ok_or_else(|| bad(&format!("{k} must be an integer")))
        };
        let ms = |k: &str, v: &Json| -> Result<Duration> {
            match v.as_i64() {
                Some(n) if n >= 0 => Ok(Duration::from_millis(n as u64)),
                _ => Err(bad(&format!("{k} must be a non-negative integer"))),
            }
        };
        for (k, v) in &obj {
            match k.as_str() {
                "start" => {
                    start = match v.as_str() {
                        Some("beginning") => Start::Beginning,
                        Some("latest") => Start::Latest,
                        _ => return Err(bad("start must be \"beginning\" or \"latest\"")),
                    }
                }
                "start_offset" => start = Start::Offset(int(k, v)?),
                "start_time_ms" => start = Start::Time(int(k, v)?),
                "max_deliveries" => {
                    o.max_deliveries = u32::try_from(int(k, v)?)
                        .map_err(|_| bad("max_deliveries must be between 1 and 1000"))?
                }
                "lease_ms" => o.lease = ms(k, v)?,
                "member_idle_ms" => o.member_idle = ms(k, v)?,
                other => return Err(bad(&format!("unknown key {other:?}"))),
            }
        }
    }
    o.validate()?;
    Ok(Out::Int(ops::create(c.conn, s, g, start, &o, c.now)?))
}

/// `honker_group_delete(stream, group)` → 1 if it existed, else 0.
fn delete(c: &Call<'_>) -> Result<Out> {
    let (s, g) = names(&c.args)?;
    Ok(Out::Int(i64::from(ops::drop_group(c.conn, s, g)?)))
}

/// `honker_group_claim(stream, group, member, n, lease_ms)` → JSON
/// `{events: [{offset, key, payload, created_at, deliveries, lease_token,
/// lease_expires_at}], missed, more}`; `lease_ms` NULL: the group's. One
/// bounded step: `more` is true when it stopped taking in events waiting
/// behind a busy key (claim again).
fn claim(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let (s, g) = names(a)?;
    let member = a.text(2, "member")?;
    validate::name("member", member)?;
    let n = validate::batch(a.int(3, "n")?)?;
    let lease = a.opt_ms(4, "lease_ms")?;
    if lease.is_some_and(|l| l.is_zero() || l > super::MAX_LEASE) {
        return Err(Error::invalid(format!(
            "lease_ms must be between 1 and {}",
            duration_ms(super::MAX_LEASE)
        )));
    }
    let got = ops::claim(c.conn, s, g, member, n, lease.map(duration_ms), c.now)?;
    let events: Vec<Json> = got
        .events
        .iter()
        .map(|e| {
            json!({"offset": e.offset, "key": e.key, "payload": payload_json(&e.payload),
                   "created_at": e.created_at, "deliveries": e.deliveries,
                   "lease_token": e.token, "lease_expires_at": e.lease_expires_at,
                   "priority": e.priority, "trace_context": crate::sqlfn::trace_json(e.trace_context.as_ref())})
        })
        .collect();
    Ok(Out::Text(
        json!({"events": events, "missed": got.missed, "more": got.more}).to_string(),
    ))
}

/// `honker_group_ack(stream, group, offset, lease_token)` → 1;
/// `LEASE_LOST` when the token no longer holds the event.
fn ack(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let (s, g) = names(a)?;
    ops::ack(c.conn, s, g, a.int(2, "offset")?, token(a, 3)?, c.now)?;
    Ok(Out::Int(1))
}

/// `honker_group_retry(stream, group, offset, lease_token, delay_ms, error)`
/// → `'ready'`, or `'dead'` when that was its last delivery.
fn retry(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let (s, g) = names(a)?;
    let delay = match a.opt_ms(4, "delay_ms")? {
        Some(d) => validate::delay("retry delay", d)?,
        None => 0,
    };
    let held = (a.int(2, "offset")?, token(a, 3)?);
    let died = ops::retry(c.conn, s, g, held, (delay, a.opt_text(5, "error")?), c.now)?;
    Ok(Out::Text(if died { "dead" } else { "ready" }.into()))
}

/// `honker_group_fail(stream, group, offset, lease_token, error)` → 1: to
/// the dead letters now.
fn fail(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let (s, g) = names(a)?;
    let error = a.text(4, "error")?;
    ops::fail(
        c.conn,
        s,
        g,
        a.int(2, "offset")?,
        token(a, 3)?,
        error,
        c.now,
    )?;
    Ok(Out::Int(1))
}

/// `honker_group_release(stream, group, offset, lease_token)` → 1:
/// claimable at once, the delivery not counted.
fn release(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let (s, g) = names(a)?;
    ops::release(c.conn, s, g, a.int(2, "offset")?, token(a, 3)?, c.now)?;
    Ok(Out::Int(1))
}

/// `honker_group_heartbeat(stream, group, offset, lease_token, extend_ms)`
/// → the lease's new end (ms); `extend_ms` NULL: the group's lease.
fn heartbeat(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let (s, g) = names(a)?;
    let extend = match a.opt_ms(4, "extend_ms")? {
        Some(d) if d.is_zero() || d > super::MAX_LEASE => {
            return Err(Error::invalid(format!(
                "extend_ms must be between 1 and {}",
                duration_ms(super::MAX_LEASE)
            )))
        }
        Some(d) => duration_ms(d),
        None => duration_ms(ops::get(c.conn, s, g)?.options.lease),
    };
    Ok(Out::Int(ops::heartbeat(
        c.conn,
        s,
        g,
        a.int(2, "offset")?,
        token(a, 3)?,
        extend,
        c.now,
    )?))
}

/// `honker_group_remove_member(stream, group, member, force)` → how many
/// events it held (claimable at once); one that holds events without
/// `force` is `INVALID_ARGUMENT`.
fn remove_member(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let (s, g) = names(a)?;
    let member = a.text(2, "member")?;
    validate::name("member", member)?;
    let force = a.int(3, "force")? != 0;
    Ok(Out::Int(ops::remove_member(
        c.conn, s, g, member, force, c.now,
    )?))
}

/// `honker_group_dead(stream, group, after, limit)` → JSON array of dead
/// letters above offset `after`: `offset, key, payload, created_at,
/// deliveries, last_error, died_at`.
fn dead(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let (s, g) = names(a)?;
    let limit = validate::batch(a.int(3, "limit")?)?;
    let rows: Vec<Json> = ops::dead(c.conn, s, g, a.int(2, "after")?, limit)?
        .iter()
        .map(|d| {
            json!({"offset": d.offset, "key": d.key,
                   "payload": payload_json(&d.payload),
                   "created_at": d.created_at, "deliveries": d.deliveries,
                   "last_error": d.last_error, "died_at": d.died_at})
        })
        .collect();
    Ok(Out::Text(Json::Array(rows).to_string()))
}

/// `honker_group_redrive(stream, group[, offset])` → how many dead letters
/// were re-driven (all, up to 1,000 per call, without `offset`).
fn redrive(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    a.count(2, 3)?;
    let (s, g) = names(a)?;
    match if a.has(2) {
        a.opt_int(2, "offset")?
    } else {
        None
    } {
        Some(o) => {
            ops::redrive(c.conn, s, g, o, c.now)?;
            Ok(Out::Int(1))
        }
        None => Ok(Out::Int(ops::redrive_all(c.conn, s, g, 1000, c.now)? as i64)),
    }
}

pub(crate) fn info_json(i: &GroupInfo) -> Json {
    let members: Vec<Json> = i
        .members
        .iter()
        .map(|m| {
            json!({"member": m.member, "joined_at": m.joined_at, "seen_at": m.seen_at,
                   "holds": m.holds})
        })
        .collect();
    json!({"group": i.group, "next_offset": i.next_offset, "lag": i.lag,
           "pending": i.pending, "delivered": i.delivered, "dead": i.dead,
           "oldest_pending_age_ms": i.oldest_pending_age_ms, "members": members,
           "max_deliveries": i.options.max_deliveries,
           "lease_ms": duration_ms(i.options.lease),
           "member_idle_ms": duration_ms(i.options.member_idle)})
}

/// `honker_group_info(stream, group)` → JSON `{group, next_offset, lag,
/// pending, delivered, dead, oldest_pending_age_ms, members: [{member,
/// joined_at, seen_at, holds}], max_deliveries, lease_ms, member_idle_ms}`.
fn info(c: &Call<'_>) -> Result<Out> {
    let (s, g) = names(&c.args)?;
    Ok(Out::Text(
        info_json(&ops::info(c.conn, s, g, c.now)?).to_string(),
    ))
}
