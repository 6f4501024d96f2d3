//! The scheduler's operations on a connection already inside a write
//! transaction (or a read, for `get`, `list`, `next_due`). Callers
//! validated definitions and read the clock.
//!
//! A tick fires every due boundary of every due schedule in one write
//! transaction: each fire inserts its key `(schedule, fire_at)` into
//! `_honker_schedule_fires` (a fire already there is not repeated) and its
//! job, and the schedule's `next_fire_at` moves past `now` in the same
//! commit. So however many processes tick, each boundary fires once.

use std::time::Duration;

use super::spec::{DayRule, Spec};
use super::statements as st;
use super::types::{
    CatchUp, Fire, Overlap, Schedule, ScheduleInfo, MAX_COUNTED, MAX_FIRE_RECORD_AGE, ON_TIME,
};
use crate::clock::duration_ms;
use crate::error::{Error, Result};
use crate::payload::Payload;
use crate::queue::ops::{self as qops, NewJob};
use crate::raw::{params, Conn, Row};

/// Schedules handled per tick (the rest in the next one, at once).
pub(crate) const TICK_BATCH: usize = 1000;

/// A schedule row with what the tick needs beyond [`ScheduleInfo`].
#[derive(Clone, Debug)]
pub(crate) struct Stored {
    pub info: ScheduleInfo,
    pub anchor_ms: i64,
}

fn row(r: &Row<'_>) -> Result<Stored> {
    let text = |i: usize| -> Result<String> { r.get::<String>(i) };
    let schedule = Schedule {
        name: text(0)?,
        queue: text(1)?,
        spec: text(2)?,
        time_zone: text(3)?,
        day_rule: DayRule::parse(&text(4)?)?,
        payload: r.get::<Payload>(5)?,
        priority: r.get::<i32>(6)?,
        max_attempts: r.get::<Option<u32>>(7)?,
        expires: r.get::<Option<i64>>(8)?.map(ms_duration),
        catch_up: CatchUp::parse(&text(9)?)?,
        catch_up_window: ms_duration(r.get::<i64>(10)?),
        catch_up_max: r.get::<u32>(11)?,
        overlap: Overlap::parse(&text(12)?)?,
        jitter: ms_duration(r.get::<i64>(13)?),
        start_at: r.get::<Option<i64>>(14)?,
        end_at: r.get::<Option<i64>>(15)?,
    };
    Ok(Stored {
        anchor_ms: r.get::<i64>(16)?,
        info: ScheduleInfo {
            schedule,
            paused: r.get::<bool>(17)?,
            note: r.get::<Option<String>>(18)?,
            next_fire_at: r.get::<Option<i64>>(19)?,
            last_fire_at: r.get::<Option<i64>>(20)?,
            last_job_id: r.get::<Option<i64>>(21)?,
            buffered_at: r.get::<Option<i64>>(22)?,
            fires: r.get::<i64>(23)?.max(0) as u64,
            missed: r.get::<i64>(24)?.max(0) as u64,
            overlap_skipped: r.get::<i64>(25)?.max(0) as u64,
        },
    })
}

fn ms_duration(ms: i64) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// One schedule, if it exists.
pub(crate) fn get(conn: Conn<'_>, name: &str) -> Result<Option<Stored>> {
    conn.prepare_cached(st::GET)?.query_row(params![name], row)
}

/// Every schedule, by name.
pub(crate) fn list(conn: Conn<'_>) -> Result<Vec<Stored>> {
    conn.prepare_cached(st::LIST)?.query_map(params![], row)
}

/// The stored rule of a schedule, parsed.
pub(crate) fn spec_of(s: &Schedule) -> Result<Spec> {
    Spec::parse(&s.spec, &s.time_zone, s.day_rule).map_err(|e| {
        Error::internal(format!(
            "schedule {:?}'s stored rule no longer parses (written by hand?): {}",
            s.name,
            e.message()
        ))
    })
}

/// The first boundary strictly after `after` that the schedule's bounds
/// allow; `None` once past `end_at`.
pub(crate) fn next_boundary(
    spec: &Spec,
    s: &Schedule,
    anchor: i64,
    after: i64,
) -> Result<Option<i64>> {
    let after = match s.start_at {
        Some(start) => after.max(start - 1),
        None => after,
    };
    Ok(spec
        .next_after(after, anchor)?
        .filter(|b| s.end_at.is_none_or(|end| *b <= end)))
}

/// Whether two definitions fire at the same boundaries (the rule, its
/// zone and day rule, its bounds and anchor).
fn same_boundaries(a: &Schedule, b: &Schedule) -> bool {
    a.spec == b.spec
        && a.time_zone == b.time_zone
        && a.day_rule == b.day_rule
        && a.start_at == b.start_at
        && a.end_at == b.end_at
}

/// What [`upsert`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Upserted {
    Added,
    Changed,
    Unchanged,
}

/// Registers `s` (its time zone already canonical), or replaces the
/// definition of the schedule of that name: an identical definition
/// changes nothing; one that fires at the same boundaries keeps the next
/// fire; a new rule starts from the first boundary after `now`. `anchor`
/// aligns `@every` (the start, the epoch, or Honker's registration time).
pub(crate) fn upsert(
    conn: Conn<'_>,
    s: &Schedule,
    spec: &Spec,
    anchor: i64,
    now: i64,
) -> Result<Upserted> {
    let old = get(conn, &s.name)?;
    let (next, what) = match &old {
        Some(o) if o.info.schedule == *s && o.anchor_ms == anchor => {
            return Ok(Upserted::Unchanged)
        }
        Some(o) if same_boundaries(&o.info.schedule, s) && o.anchor_ms == anchor => {
            (o.info.next_fire_at, Upserted::Changed)
        }
        Some(_) => (next_boundary(spec, s, anchor, now)?, Upserted::Changed),
        None => (next_boundary(spec, s, anchor, now)?, Upserted::Added),
    };
    conn.prepare_cached(st::UPSERT)?.execute(params![
        s.name,
        s.queue,
        s.spec,
        s.time_zone,
        s.day_rule.as_str(),
        s.payload,
        s.priority,
        s.max_attempts,
        s.expires_ms(),
        s.catch_up.as_str(),
        duration_ms(s.catch_up_window),
        s.catch_up_max,
        s.overlap.as_str(),
        duration_ms(s.jitter),
        s.start_at,
        s.end_at,
        anchor,
        next,
        now
    ])?;
    Ok(what)
}

/// Removes a schedule and its fire records; false if there was none.
pub(crate) fn remove(conn: Conn<'_>, name: &str) -> Result<bool> {
    let n = conn.prepare_cached(st::DELETE)?.execute(params![name])?;
    conn.prepare_cached(st::DELETE_FIRES)?
        .execute(params![name])?;
    Ok(n > 0)
}

/// Pauses a schedule (its boundaries are neither fired nor counted as
/// missed until it resumes); false if there is none.
pub(crate) fn pause(conn: Conn<'_>, name: &str, note: Option<&str>, now: i64) -> Result<bool> {
    Ok(conn
        .prepare_cached(st::PAUSE)?
        .execute(params![name, note, now])?
        > 0)
}

/// Resumes a paused schedule from its first boundary after `now`; false if
/// there is none. Resuming one that is not paused changes nothing.
pub(crate) fn resume(conn: Conn<'_>, name: &str, now: i64) -> Result<bool> {
    let Some(s) = get(conn, name)? else {
        return Ok(false);
    };
    if !s.info.paused {
        return Ok(true);
    }
    let spec = spec_of(&s.info.schedule)?;
    let next = next_boundary(&spec, &s.info.schedule, s.anchor_ms, now)?;
    conn.prepare_cached(st::RESUME)?
        .execute(params![name, next, now])?;
    Ok(true)
}

/// The earliest boundary due among schedules not paused.
pub(crate) fn next_due(conn: Conn<'_>) -> Result<Option<i64>> {
    conn.prepare_cached(st::NEXT_DUE)?
        .query_row(params![], |r| r.get::<i64>(0))
}

/// Whether a buffered fire can go (its previous job is no longer live).
pub(crate) fn buffered_ready(conn: Conn<'_>) -> Result<Vec<String>> {
    conn.prepare_cached(st::BUFFERED_READY)?
        .query_map(params![], |r| r.get::<String>(0))
}

fn job_live(conn: Conn<'_>, id: Option<i64>) -> Result<bool> {
    let Some(id) = id else { return Ok(false) };
    Ok(conn
        .prepare_cached(st::JOB_LIVE)?
        .query_row(params![id], |r| r.get::<i64>(0))?
        .is_some())
}

/// A delay in `[0, jitter]` stable for (schedule, boundary): every process
/// computes the same one (FNV-1a).
pub(crate) fn jitter_ms(name: &str, fire_at: i64, jitter: i64) -> i64 {
    if jitter <= 0 {
        return 0;
    }
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes().chain(fire_at.to_le_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h % (jitter as u64 + 1)) as i64
}

/// Puts the job of boundary `fire_at` on the queue, if the boundary has
/// not fired yet: its key and its job commit together. The job runs at
/// the boundary (plus the schedule's stable jitter).
fn fire(
    conn: Conn<'_>,
    s: &Schedule,
    fire_at: i64,
    run_at: i64,
    manual: bool,
    now: i64,
) -> Result<Option<i64>> {
    let claimed = conn.prepare_cached(st::CLAIM_FIRE)?.execute(params![
        s.name,
        fire_at,
        now,
        i64::from(manual)
    ])?;
    if claimed == 0 {
        return Ok(None);
    }
    // The queue's stored settings, as a handle made now would have them.
    let defaults = crate::queue::stored_options(conn, &s.queue)?;
    let job = NewJob {
        priority: s.priority,
        run_at,
        max_attempts: s.max_attempts.unwrap_or(defaults.max_attempts),
        backoff_base_ms: duration_ms(defaults.backoff.base),
        backoff_max_ms: duration_ms(defaults.backoff.max),
        backoff_jitter: defaults.backoff.jitter,
        dedupe_key: None,
        dedupe_by_payload: false,
        unique: crate::queue::Unique::Live,
        concurrency_key: None,
        expires_at: s.expires_ms().map(|e| run_at.saturating_add(e)),
        trace_context: None,
    };
    let (id, _) = qops::enqueue(conn, &s.queue, &job, std::slice::from_ref(&s.payload), now)?[0];
    conn.prepare_cached(st::FIRE_JOB)?
        .execute(params![s.name, fire_at, id])?;
    Ok(Some(id))
}

/// Records a boundary that the overlap policy skipped (its key is used:
/// it never fires later).
fn skip(conn: Conn<'_>, s: &Schedule, fire_at: i64, now: i64) -> Result<bool> {
    Ok(conn
        .prepare_cached(st::CLAIM_FIRE)?
        .execute(params![s.name, fire_at, now, 0i64])?
        > 0)
}

/// Fires schedule `name` now, whatever its rule says (the overlap policy
/// does not apply; catch-up counters are untouched): the job's id.
pub(crate) fn trigger(conn: Conn<'_>, name: &str, now: i64) -> Result<i64> {
    let s = get(conn, name)?.ok_or_else(|| Error::not_found(format!("no schedule {name:?}")))?;
    // A boundary or another trigger may hold this millisecond's key.
    for key in now..now + 1000 {
        if let Some(id) = fire(conn, &s.info.schedule, key, now, true, now)? {
            return Ok(id);
        }
    }
    Err(Error::internal("no free fire key for a manual trigger"))
}

/// The boundaries of one due schedule at `now`, sorted: what fires and
/// what is missed under its catch-up policy, and the next boundary.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Plan {
    pub fire: Vec<i64>,
    pub missed: u64,
    pub next: Option<i64>,
}

pub(crate) fn plan(spec: &Spec, stored: &Stored, now: i64) -> Result<Plan> {
    let s = &stored.info.schedule;
    let anchor = stored.anchor_ms;
    let window = duration_ms(s.catch_up_window);
    let window_start = now.saturating_sub(window);
    let on_time_from = now.saturating_sub(window.min(duration_ms(ON_TIME)));
    let mut p = Plan::default();
    let mut b = stored.info.next_fire_at;
    // Boundaries older than the window are only counted.
    if let Some(first) = b.filter(|x| *x < window_start) {
        let until = match s.end_at {
            Some(end) => end.min(window_start - 1),
            None => window_start - 1,
        };
        let (n, _) = spec.count_between(first - 1, until, anchor, MAX_COUNTED)?;
        p.missed += n;
        b = next_boundary(spec, s, anchor, window_start - 1)?;
    }
    let mut late: Vec<i64> = vec![];
    let mut steps = 0u64;
    while let Some(x) = b.filter(|x| *x <= now) {
        if x > on_time_from {
            p.fire.push(x);
        } else {
            match s.catch_up {
                CatchUp::Skip => p.missed += 1,
                CatchUp::Latest => {
                    p.missed += late.len() as u64;
                    late.clear();
                    late.push(x);
                }
                CatchUp::All => {
                    late.push(x);
                    if late.len() > s.catch_up_max as usize {
                        late.remove(0);
                        p.missed += 1;
                    }
                }
            }
        }
        steps += 1;
        b = if steps >= MAX_COUNTED && x < on_time_from {
            // A per-second rule after a long outage: stop enumerating.
            next_boundary(spec, s, anchor, on_time_from - 1)?
        } else {
            next_boundary(spec, s, anchor, x)?
        };
    }
    if s.catch_up == CatchUp::Latest && !p.fire.is_empty() {
        // An on-time fire is the latest: the late one is missed.
        p.missed += late.len() as u64;
        late.clear();
    }
    late.extend(p.fire);
    p.fire = late;
    p.next = b;
    Ok(p)
}

/// What one schedule's tick changed.
struct Outcome {
    fires: Vec<Fire>,
    last_fire_at: Option<i64>,
    last_job_id: Option<i64>,
    buffered_at: Option<i64>,
    fired: i64,
    skipped: i64,
}

/// Applies the overlap policy to `boundaries` of `s` in order, firing
/// what it lets through.
fn fire_all(conn: Conn<'_>, stored: &Stored, boundaries: &[i64], now: i64) -> Result<Outcome> {
    let s = &stored.info.schedule;
    let mut o = Outcome {
        fires: vec![],
        last_fire_at: stored.info.last_fire_at,
        last_job_id: stored.info.last_job_id,
        buffered_at: stored.info.buffered_at,
        fired: 0,
        skipped: 0,
    };
    let jitter = duration_ms(s.jitter);
    for &b in boundaries {
        let live = s.overlap != Overlap::AllowAll && job_live(conn, o.last_job_id)?;
        let job = match (s.overlap, live) {
            (Overlap::Skip, true) => {
                if skip(conn, s, b, now)? {
                    o.skipped += 1;
                }
                continue;
            }
            (Overlap::BufferOne, true) => {
                if o.buffered_at.is_none() {
                    o.buffered_at = Some(b);
                } else if skip(conn, s, b, now)? {
                    o.skipped += 1;
                }
                continue;
            }
            _ => fire(conn, s, b, b + jitter_ms(&s.name, b, jitter), false, now)?,
        };
        if let Some(id) = job {
            o.fired += 1;
            o.last_job_id = Some(id);
            o.last_fire_at = Some(o.last_fire_at.map_or(b, |l| l.max(b)));
            o.fires.push(Fire {
                schedule: s.name.clone(),
                queue: s.queue.clone(),
                fire_at: b,
                job_id: Some(id),
            });
        }
    }
    Ok(o)
}

/// Fires every due boundary of up to `limit` due schedules (and the
/// buffered fires whose previous job is done), in one transaction the
/// caller holds. Returns the fires, in schedule then boundary order.
pub(crate) fn tick(conn: Conn<'_>, now: i64, limit: usize) -> Result<Vec<Fire>> {
    let mut names: Vec<String> = conn
        .prepare_cached(st::DUE)?
        .query_map(params![now, limit as i64], |r| r.get::<String>(0))?;
    for n in buffered_ready(conn)? {
        if !names.contains(&n) {
            names.push(n);
        }
    }
    let mut fires = vec![];
    for name in names {
        let Some(mut stored) = get(conn, &name)? else {
            continue;
        };
        if stored.info.paused {
            continue;
        }
        let s = stored.info.schedule.clone();
        // A buffered fire goes first, once its previous job is done.
        let mut buffered_fired = 0i64;
        if let Some(b) = stored.info.buffered_at {
            if !job_live(conn, stored.info.last_job_id)? {
                stored.info.buffered_at = None;
                if let Some(id) = fire(conn, &s, b, b.max(now), false, now)? {
                    stored.info.last_job_id = Some(id);
                    stored.info.last_fire_at =
                        Some(stored.info.last_fire_at.map_or(b, |l| l.max(b)));
                    buffered_fired = 1;
                    fires.push(Fire {
                        schedule: s.name.clone(),
                        queue: s.queue.clone(),
                        fire_at: b,
                        job_id: Some(id),
                    });
                }
            }
        }
        let due = stored.info.next_fire_at.is_some_and(|b| b <= now);
        let (plan, o) = if due {
            let spec = spec_of(&s)?;
            let plan = plan(&spec, &stored, now)?;
            let o = fire_all(conn, &stored, &plan.fire, now)?;
            (plan, o)
        } else {
            let o = fire_all(conn, &stored, &[], now)?;
            (
                Plan {
                    next: stored.info.next_fire_at,
                    ..Plan::default()
                },
                o,
            )
        };
        conn.prepare_cached(st::AFTER_TICK)?.execute(params![
            s.name,
            plan.next,
            o.last_fire_at,
            o.last_job_id,
            o.buffered_at,
            o.fired + buffered_fired,
            plan.missed as i64,
            o.skipped
        ])?;
        fires.extend(o.fires);
    }
    Ok(fires)
}

/// Removes fire records older than their schedule's catch-up window (at
/// most [`MAX_FIRE_RECORD_AGE`]), for
/// up to `batch` schedules after `after` (by name): (records removed, the
/// last schedule seen, or `None` at the end).
pub(crate) fn sweep_fires(
    conn: Conn<'_>,
    after: &str,
    now: i64,
    batch: usize,
) -> Result<(usize, Option<String>)> {
    let rows: Vec<(String, i64)> = conn
        .prepare_cached(st::WALK)?
        .query_map(params![after, batch as i64], |r| {
            Ok((r.get::<String>(0)?, r.get::<i64>(1)?))
        })?;
    let mut removed = 0;
    let mut prune = conn.prepare_cached(st::PRUNE_FIRES)?;
    for (name, window) in &rows {
        let keep = (*window).min(duration_ms(MAX_FIRE_RECORD_AGE));
        removed += prune.execute(params![name, now.saturating_sub(keep)])?;
    }
    let last = (rows.len() == batch)
        .then(|| rows.last().map(|r| r.0.clone()))
        .flatten();
    Ok((removed, last))
}
