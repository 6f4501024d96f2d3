//! The scheduler's SQL functions. Ours (ADR 15 rule 2: ms, JSON, coded
//! errors): `honker_schedule_*` and `honker_cron_next`. Honker's
//! `honker_scheduler_*` and `honker_cron_next_after` keep Honker's
//! contracts (seconds, 1/0, its JSON shapes), so Honker's clients run
//! unchanged, and schedules registered through them keep Honker's meaning:
//! evaluated in the registering process's local time zone (stored on the
//! schedule) with both day fields required to match (Honker's AND), a
//! catch-up of up to 64 fires, `@every` counted from registration.

use std::time::Duration;

use serde_json::{json, Map, Value as Json};

use super::ops::{self, Stored};
use super::spec::{self, DayRule, Spec};
use super::types::{CatchUp, Schedule, ScheduleOptions};
use crate::error::{Error, Result};
use crate::options::limits;
use crate::payload::Payload;
use crate::sqlfn::{ms_secs_up, payload_json, Args, Call, Out, SqlFn, DIRECT_ONLY, PURE};
use crate::validate;

pub(crate) const FUNCTIONS: &[SqlFn] = &[
    SqlFn::atomic("honker_schedule_add", -1, DIRECT_ONLY, add),
    SqlFn::atomic("honker_schedule_remove", 1, DIRECT_ONLY, remove),
    SqlFn::atomic("honker_schedule_pause", 2, DIRECT_ONLY, pause),
    SqlFn::atomic("honker_schedule_resume", 1, DIRECT_ONLY, resume),
    SqlFn::atomic("honker_schedule_trigger", 1, DIRECT_ONLY, trigger),
    SqlFn::plain("honker_schedule_list", 0, DIRECT_ONLY, list),
    SqlFn::atomic("honker_schedule_tick", 0, DIRECT_ONLY, tick),
    SqlFn::plain("honker_schedule_next_due", 0, DIRECT_ONLY, next_due),
    SqlFn::plain("honker_cron_next", 3, PURE, cron_next),
    // Honker's names at Honker's arities, with Honker's contracts.
    SqlFn::atomic("honker_scheduler_register", 6, DIRECT_ONLY, honker_register),
    SqlFn::atomic("honker_scheduler_register", 7, DIRECT_ONLY, honker_register),
    SqlFn::atomic(
        "honker_scheduler_unregister",
        1,
        DIRECT_ONLY,
        honker_unregister,
    ),
    SqlFn::atomic("honker_scheduler_tick", 1, DIRECT_ONLY, honker_tick),
    SqlFn::plain("honker_scheduler_soonest", 0, DIRECT_ONLY, honker_soonest),
    SqlFn::atomic("honker_scheduler_pause", 1, DIRECT_ONLY, honker_pause),
    SqlFn::atomic("honker_scheduler_resume", 1, DIRECT_ONLY, honker_resume),
    SqlFn::plain("honker_scheduler_list", 0, DIRECT_ONLY, honker_list),
    SqlFn::atomic("honker_scheduler_update", 6, DIRECT_ONLY, honker_update),
    SqlFn::atomic("honker_scheduler_update", 8, DIRECT_ONLY, honker_update),
    SqlFn::plain("honker_cron_next_after", 2, PURE, honker_cron_next_after),
];

fn name<'a>(a: &'a Args<'_>) -> Result<&'a str> {
    let n = a.text(0, "name")?;
    validate::name("schedule", n)?;
    Ok(n)
}

fn not_found(n: &str) -> Error {
    Error::not_found(format!("no schedule {n:?}"))
}

/// Checks `s` and stores it (an upsert), `@every` aligned to `anchor`:
/// whether anything changed.
fn store(c: &Call<'_>, mut s: Schedule, anchor: Option<i64>) -> Result<bool> {
    let spec = s.check(c.config.max_payload_bytes)?;
    s.time_zone = spec.zone_name().to_string();
    let anchor = anchor.unwrap_or(s.start_at.unwrap_or(0));
    Ok(ops::upsert(c.conn, &s, &spec, anchor, c.now)? != ops::Upserted::Unchanged)
}

/// `honker_schedule_add(name, queue, spec, payload[, options])` → 1 if the
/// schedule was added or changed, 0 if it was already registered so.
/// `options` is a JSON object: `time_zone` (IANA, default `UTC`),
/// `day_rule` (`or`/`and`), `priority`, `max_attempts`, `expires_ms`,
/// `catch_up` (`skip`/`latest`/`all`), `catch_up_window_ms`,
/// `catch_up_max`, `overlap` (`allow`/`skip`/`buffer_one`), `jitter_ms`,
/// `start_at`, `end_at`.
fn add(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    a.count(4, 5)?;
    let n = name(a)?;
    let queue = a.name(1)?;
    let mut s = Schedule::cron(n, a.text(2, "spec")?, queue);
    s.payload = a.payload(3)?;
    if a.has(4) {
        options(&mut s, a.opt_text(4, "options")?)?;
    }
    Ok(Out::Int(i64::from(store(c, s, None)?)))
}

fn options(s: &mut Schedule, text: Option<&str>) -> Result<()> {
    let Some(text) = text else { return Ok(()) };
    let bad = |what: &str| Error::invalid(format!("honker_schedule_add: options: {what}"));
    let obj: Map<String, Json> = match serde_json::from_str(text) {
        Ok(Json::Object(m)) => m,
        _ => return Err(bad("must be a JSON object")),
    };
    // JSON null is "not given" (the default), as a missing key.
    let int = |k: &str, v: &Json| {
        v.as_i64()
            .ok_or_else(|| bad(&format!("{k} must be an integer")))
    };
    let word = |k: &str, v: &Json| -> Result<String> {
        Ok(v.as_str()
            .ok_or_else(|| bad(&format!("{k} must be text")))?
            .to_string())
    };
    let ms = |k: &str, v: &Json| -> Result<Duration> {
        let n = v
            .as_f64()
            .ok_or_else(|| bad(&format!("{k} must be a number of ms")))?;
        validate::millis(k, n)
    };
    let mut o = ScheduleOptions::default();
    for (k, v) in obj.iter().filter(|(_, v)| !v.is_null()) {
        match k.as_str() {
            "time_zone" => o.time_zone = Some(word(k, v)?),
            "day_rule" => o.day_rule = Some(word(k, v)?),
            "priority" => {
                o.priority =
                    Some(i32::try_from(int(k, v)?).map_err(|_| bad("priority is out of range"))?);
            }
            "max_attempts" => o.max_attempts = Some(u32::try_from(int(k, v)?).unwrap_or(0)),
            "expires_ms" => o.expires = Some(ms(k, v)?),
            "catch_up" => o.catch_up = Some(word(k, v)?),
            "catch_up_window_ms" => o.catch_up_window = Some(ms(k, v)?),
            "catch_up_max" => o.catch_up_max = Some(u32::try_from(int(k, v)?).unwrap_or(0)),
            "overlap" => o.overlap = Some(word(k, v)?),
            "jitter_ms" => o.jitter = Some(ms(k, v)?),
            "start_at" => o.start_at = Some(int(k, v)?),
            "end_at" => o.end_at = Some(int(k, v)?),
            other => return Err(bad(&format!("unknown key {other:?}"))),
        }
    }
    o.apply(s)
}

/// `honker_schedule_remove(name)` → 1, or 0 if there was none.
fn remove(c: &Call<'_>) -> Result<Out> {
    Ok(Out::Int(i64::from(ops::remove(c.conn, name(&c.args)?)?)))
}

/// `honker_schedule_pause(name, note)` → 1; `NOT_FOUND` if there is none.
fn pause(c: &Call<'_>) -> Result<Out> {
    let n = name(&c.args)?;
    let note = c.args.opt_text(1, "note")?;
    if let Some(t) = note {
        validate::key_or_empty("a pause note", t)?;
    }
    if !ops::pause(c.conn, n, note, c.now)? {
        return Err(not_found(n));
    }
    Ok(Out::Int(1))
}

/// `honker_schedule_resume(name)` → 1, from the first boundary after now.
fn resume(c: &Call<'_>) -> Result<Out> {
    let n = name(&c.args)?;
    if !ops::resume(c.conn, n, c.now)? {
        return Err(not_found(n));
    }
    Ok(Out::Int(1))
}

/// `honker_schedule_trigger(name)` → the id of the job fired now.
fn trigger(c: &Call<'_>) -> Result<Out> {
    Ok(Out::Int(ops::trigger(c.conn, name(&c.args)?, c.now)?))
}

fn info_json(s: &Stored) -> Json {
    let i = &s.info;
    let d = &i.schedule;
    json!({
        "name": d.name, "queue": d.queue, "spec": d.spec, "time_zone": d.time_zone,
        "day_rule": d.day_rule.as_str(), "payload": payload_json(&d.payload),
        "priority": d.priority, "max_attempts": d.max_attempts,
        "expires_ms": d.expires_ms(), "catch_up": d.catch_up.as_str(),
        "catch_up_window_ms": crate::clock::duration_ms(d.catch_up_window),
        "catch_up_max": d.catch_up_max, "overlap": d.overlap.as_str(),
        "jitter_ms": crate::clock::duration_ms(d.jitter), "start_at": d.start_at,
        "end_at": d.end_at, "paused": i.paused, "note": i.note,
        "next_fire_at": i.next_fire_at, "last_fire_at": i.last_fire_at,
        "last_job_id": i.last_job_id, "buffered_at": i.buffered_at, "fires": i.fires,
        "missed": i.missed, "overlap_skipped": i.overlap_skipped,
    })
}

/// `honker_schedule_list()` → a JSON array of every schedule with its
/// state, by name.
fn list(c: &Call<'_>) -> Result<Out> {
    let all: Vec<Json> = ops::list(c.conn)?.iter().map(info_json).collect();
    Ok(Out::Text(Json::Array(all).to_string()))
}

/// `honker_schedule_tick()` → a JSON array of the fires it made:
/// `{schedule, queue, fire_at, job_id}` (ms).
fn tick(c: &Call<'_>) -> Result<Out> {
    let fires = ops::tick(c.conn, c.now, ops::TICK_BATCH)?;
    let out: Vec<Json> = fires
        .iter()
        .map(|f| json!({"schedule": f.schedule, "queue": f.queue, "fire_at": f.fire_at, "job_id": f.job_id}))
        .collect();
    Ok(Out::Text(Json::Array(out).to_string()))
}

/// `honker_schedule_next_due()` → the earliest boundary due (ms), or NULL.
fn next_due(c: &Call<'_>) -> Result<Out> {
    Ok(ops::next_due(c.conn)?.map_or(Out::Null, Out::Int))
}

/// `honker_cron_next(spec, time_zone, after_ms)` → the first fire strictly
/// after `after_ms` (ms), or NULL if it never fires again; Vixie's day
/// rule, `@every` aligned to the epoch.
fn cron_next(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let spec = Spec::parse(a.text(0, "spec")?, a.text(1, "time_zone")?, DayRule::Or)?;
    let after = a.whole(2, "after_ms")?;
    Ok(spec.next_after(after, 0)?.map_or(Out::Null, Out::Int))
}

// --- Honker's contracts -------------------------------------------------

/// Honker's catch-up: up to 64 fires per schedule per tick.
const HONKER_CATCH_UP_MAX: u32 = 64;
/// Honker's `max_attempts` when not given.
const HONKER_MAX_ATTEMPTS: i64 = 3;

pub(crate) fn honker_schedule(
    n: &str,
    queue: &str,
    expr: &str,
    payload: Payload,
    priority: i64,
    expires_s: Option<f64>,
    max_attempts: i64,
) -> Result<Schedule> {
    let mut s = Schedule::cron(n, expr, queue);
    s.payload = payload;
    s.time_zone = spec::local_zone_name();
    s.day_rule = DayRule::And;
    s.priority = i32::try_from(priority)
        .map_err(|_| Error::invalid(format!("priority {priority} is out of range")))?;
    s.max_attempts = Some(u32::try_from(max_attempts.clamp(1, i64::from(u32::MAX))).unwrap_or(1));
    s.expires = honker_expires(expires_s)?;
    s.catch_up = CatchUp::All;
    s.catch_up_max = HONKER_CATCH_UP_MAX;
    s.catch_up_window = limits::MAX_DELAY;
    Ok(s)
}

fn honker_expires(expires_s: Option<f64>) -> Result<Option<Duration>> {
    match expires_s {
        None => Ok(None),
        Some(e) if e <= 0.0 => Err(Error::invalid(format!(
            "expires_s must be positive or NULL, got {e}"
        ))),
        Some(e) => Ok(Some(validate::seconds("expires_s", e)?)),
    }
}

/// The anchor Honker's `@every` counts from: its registration.
fn honker_anchor(expr: &str, now: i64) -> Option<i64> {
    expr.trim()
        .to_ascii_lowercase()
        .starts_with("@every")
        .then_some(now)
}

/// `honker_scheduler_register(name, queue, cron_expr, payload, priority,
/// expires_s[, max_attempts])` → 1. Registered again with the same
/// definition, the schedule keeps its next fire.
fn honker_register(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let n = name(a)?;
    let queue = a.name(1)?;
    let expr = a.text(2, "cron_expr")?;
    let max_attempts = if a.has(6) {
        a.whole(6, "max_attempts")?
    } else {
        HONKER_MAX_ATTEMPTS
    };
    let s = honker_schedule(
        n,
        queue,
        expr,
        a.payload(3)?,
        a.whole(4, "priority")?,
        a.opt_seconds(5, "expires_s")?,
        max_attempts,
    )?;
    let anchor = match ops::get(c.conn, n)? {
        // A re-registration of the same @every keeps its phase.
        Some(old) if old.info.schedule.spec == s.spec => old.anchor_ms,
        _ => honker_anchor(expr, c.now).unwrap_or(0),
    };
    store(c, s, Some(anchor))?;
    Ok(Out::Int(1))
}

/// `honker_scheduler_unregister(name)` → rows deleted (0 or 1).
fn honker_unregister(c: &Call<'_>) -> Result<Out> {
    remove(c)
}

/// `honker_scheduler_tick(now_unix)` → a JSON array of the fires:
/// `{name, queue, fire_at, job_id}`, `fire_at` in seconds.
fn honker_tick(c: &Call<'_>) -> Result<Out> {
    let now_s = c.args.whole(0, "now_unix")?;
    let now = now_s
        .checked_mul(1000)
        .ok_or_else(|| Error::invalid("now_unix is out of range"))?;
    let fires = ops::tick(c.conn, now, ops::TICK_BATCH)?;
    let out: Vec<Json> = fires
        .iter()
        .map(|f| {
            json!({"name": f.schedule, "queue": f.queue,
                   "fire_at": f.fire_at.div_euclid(1000), "job_id": f.job_id})
        })
        .collect();
    Ok(Out::Text(Json::Array(out).to_string()))
}

/// `honker_scheduler_soonest()` → the earliest next fire (seconds,
/// rounded up), or 0 when nothing is scheduled.
fn honker_soonest(c: &Call<'_>) -> Result<Out> {
    Ok(Out::Int(ops::next_due(c.conn)?.map_or(0, ms_secs_up)))
}

/// `honker_scheduler_pause(name)` → 1, or 0 if there is none.
fn honker_pause(c: &Call<'_>) -> Result<Out> {
    Ok(Out::Int(i64::from(ops::pause(
        c.conn,
        name(&c.args)?,
        None,
        c.now,
    )?)))
}

/// `honker_scheduler_resume(name)` → 1, or 0 if there is none.
fn honker_resume(c: &Call<'_>) -> Result<Out> {
    Ok(Out::Int(i64::from(ops::resume(
        c.conn,
        name(&c.args)?,
        c.now,
    )?)))
}

fn honker_payload_text(p: &Payload) -> String {
    match p {
        Payload::Json(t) => t.clone(),
        Payload::Bytes(_) => payload_json(p).to_string(),
    }
}

/// `honker_scheduler_list()` → Honker's JSON array: `{name, queue,
/// cron_expr, payload, priority, expires_s, next_fire_at, enabled,
/// max_attempts}` (seconds; `payload` as its text).
fn honker_list(c: &Call<'_>) -> Result<Out> {
    let all: Vec<Json> = ops::list(c.conn)?
        .iter()
        .map(|s| {
            let d = &s.info.schedule;
            json!({
                "name": d.name, "queue": d.queue, "cron_expr": d.spec,
                "payload": honker_payload_text(&d.payload), "priority": d.priority,
                "expires_s": d.expires.map(|e| e.as_secs()),
                "next_fire_at": s.info.next_fire_at.map_or(0, ms_secs_up),
                "enabled": !s.info.paused,
                "max_attempts": d.max_attempts.map_or(HONKER_MAX_ATTEMPTS, i64::from),
            })
        })
        .collect();
    Ok(Out::Text(Json::Array(all).to_string()))
}

/// `honker_scheduler_update(name, cron_expr, payload, priority, expires_s,
/// touch_expires[, max_attempts, touch_max_attempts])` → 1 if the schedule
/// was updated, 0 if there is none or nothing to change. NULL leaves a
/// field alone; `touch_*` set `expires_s`/`max_attempts` even to NULL. A
/// new cron starts from its first boundary after now.
fn honker_update(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let n = name(a)?;
    let Some(old) = ops::get(c.conn, n)? else {
        return Ok(Out::Int(0));
    };
    let mut s = old.info.schedule.clone();
    let mut any = false;
    if let Some(expr) = a.opt_text(1, "cron_expr")? {
        s.spec = expr.to_string();
        any = true;
    }
    if !matches!(a.raw(2), crate::raw::ValueRef::Null) {
        s.payload = a.payload(2)?;
        any = true;
    }
    if let Some(p) = a.opt_whole(3, "priority")? {
        s.priority = i32::try_from(p)
            .map_err(|_| Error::invalid(format!("priority {p} is out of range")))?;
        any = true;
    }
    if a.whole(5, "touch_expires")? != 0 {
        s.expires = honker_expires(a.opt_seconds(4, "expires_s")?)?;
        any = true;
    }
    if a.has(6) && a.whole(7, "touch_max_attempts")? != 0 {
        let m = a
            .opt_whole(6, "max_attempts")?
            .unwrap_or(HONKER_MAX_ATTEMPTS);
        s.max_attempts = Some(u32::try_from(m.clamp(1, i64::from(u32::MAX))).unwrap_or(1));
        any = true;
    }
    if !any {
        return Ok(Out::Int(0));
    }
    let anchor = if s.spec == old.info.schedule.spec {
        old.anchor_ms
    } else {
        honker_anchor(&s.spec, c.now).unwrap_or(0)
    };
    store(c, s, Some(anchor))?;
    Ok(Out::Int(1))
}

/// `honker_cron_next_after(expr, from_unix)` → the next boundary strictly
/// after `from_unix` (seconds), in this process's local time zone with
/// Honker's AND day rule.
fn honker_cron_next_after(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let expr = a.text(0, "cron_expr")?;
    let from = a.whole(1, "from_unix")?;
    let spec = Spec::parse(expr, &spec::local_zone_name(), DayRule::And)?;
    let after = from
        .checked_mul(1000)
        .ok_or_else(|| Error::invalid("from_unix is out of range"))?;
    let anchor = honker_anchor(expr, after).unwrap_or(0);
    let next = spec
        .next_after(after, anchor)?
        .ok_or_else(|| Error::invalid(format!("cron {expr:?} never fires again")))?;
    Ok(Out::Int(next.div_euclid(1000)))
}
