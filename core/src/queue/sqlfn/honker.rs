//! Honker's queue and results functions with Honker's contracts
//! (reference/honker-ancestor.md §3 and §4.10; ADR 15 rule 1), on honker's
//! tables and through the same `ops` as our forms. What differs is only the
//! conversion: seconds in and out (times out rounded down, except
//! `honker_queue_next_claim_at`, rounded up), a claim identified by its worker
//! id (and, in the fenced arities, the attempt number its claim returned),
//! `1`/`0` where Honker returns them, Honker's JSON with payloads as JSON
//! strings. Bad input (a NULL queue, a payload that is not JSON, a negative
//! count) is still a coded error that changes nothing.

use std::time::Duration;

use serde_json::{json, Value as Json};

use crate::error::{Error, ErrorKind, Result};
use crate::payload::Payload;
use crate::queue::ops::{self, WorkerLease};
use crate::queue::{EnqueueOptions, JobState};
use crate::raw::Conn;
use crate::sqlfn::{ms_secs_up, payload_json, secs_ms, Args, Call, Out};
use crate::validate;

/// Honker's whole seconds for a time in ms (rounded down).
fn secs(ms: i64) -> i64 {
    ms.div_euclid(1000)
}

/// A payload as Honker's JSON string field: the JSON text itself (a BLOB
/// payload as our `{"bytes_hex": …}` object's text).
fn payload_string(p: &Payload) -> String {
    match p {
        Payload::Json(t) => t.clone(),
        Payload::Bytes(_) => payload_json(p).to_string(),
    }
}

/// `honker_enqueue(queue, payload, run_at, delay_s, priority, max_attempts,
/// expires_s)` → the new id. Honker's rules: `delay_s` wins over `run_at`
/// (unix seconds); `expires_s` counts from now, and a value ≤ 0 (or an
/// expiry before the job is due) makes a job that is born expired: it never
/// runs and `honker_sweep_expired` (or the next claim) finishes it.
pub(super) fn enqueue(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let queue = a.name(0)?;
    let payload = a.payload(1)?;
    payload.validate(c.config.max_payload_bytes)?;
    let priority = a.opt_whole(4, "priority")?.unwrap_or(0);
    let mut options = EnqueueOptions {
        priority: i32::try_from(priority)
            .map_err(|_| Error::invalid(format!("priority {priority} is out of range")))?,
        // Out-of-range values become 0, which the check refuses.
        max_attempts: a
            .opt_whole(5, "max_attempts")?
            .map(|n| u32::try_from(n).unwrap_or(0)),
        ..EnqueueOptions::default()
    };
    match a.opt_seconds(3, "delay_s")? {
        Some(d) => options.delay = Some(Duration::from_secs_f64(d)),
        None => options.run_at = a.opt_seconds(2, "run_at")?.map(secs_ms),
    }
    let expires = a.opt_number(6, "expires_s")?;
    options.check()?;
    let mut job = options.resolve(&super::super::stored_options(c.conn, queue)?, c.now)?;
    if let Some(e) = expires {
        let limit = crate::options::limits::MAX_DELAY.as_secs_f64();
        if e.abs() > limit {
            return Err(Error::invalid(format!(
                "honker_enqueue: expires_s of {e} is over the limit of {limit} s"
            )));
        }
        job.expires_at = Some(c.now.saturating_add(secs_ms(e)));
    }
    let (id, _) = ops::enqueue(c.conn, queue, &job, std::slice::from_ref(&payload), c.now)?[0];
    Ok(Out::Int(id))
}

/// `honker_claim_batch(queue, worker_id, n, visibility_s)` → Honker's rows
/// `[{id, queue, payload, worker_id, attempts, claim_expires_at}]`, the
/// payload as a JSON string. A job with no attempt left is dead-lettered
/// (`max attempts exceeded`), never handed out.
pub(super) fn claim_batch(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let queue = a.name(0)?;
    let worker = a.text(1, "worker_id")?;
    validate::key("worker id", worker)?;
    let n = validate::batch(a.whole(2, "n")?)?;
    let lease = match a.opt_seconds(3, "visibility_s")? {
        Some(s) => Duration::from_secs_f64(s),
        None => super::super::stored_options(c.conn, queue)?.lease,
    };
    let lease_ms = validate::lease(lease)?;
    let jobs = ops::claim(c.conn, queue, worker, n, lease_ms, c.now)?;
    let out: Vec<Json> = jobs
        .iter()
        .map(|j| {
            json!({
                "id": j.id, "queue": queue, "payload": payload_string(&j.payload),
                "worker_id": worker, "attempts": j.attempts,
                "claim_expires_at": secs(j.lease_expires_at),
            })
        })
        .collect();
    Ok(Out::Text(Json::Array(out).to_string()))
}

/// The lease a Honker call names: job id at 0, worker id at 1, and the
/// fenced arities' attempt at `attempt_at`. `None`: not this worker's.
fn named_lease(
    a: &Args<'_>,
    conn: Conn<'_>,
    attempt_at: usize,
) -> Result<Option<(i64, WorkerLease)>> {
    let id = validate::job_id(a.whole(0, "job_id")?)?;
    let worker = a.text(1, "worker_id")?;
    let attempt = if a.has(attempt_at) {
        a.opt_whole(attempt_at, "attempt")?
    } else {
        None
    };
    Ok(ops::lease_by_worker(conn, id, worker, attempt)?.map(|l| (id, l)))
}

/// 1 for done, 0 for "not your claim" (Honker's answer to a lost lease).
fn one_or_zero(r: Result<()>) -> Result<Out> {
    match r {
        Ok(()) => Ok(Out::Int(1)),
        Err(e) if matches!(e.kind(), ErrorKind::LeaseLost | ErrorKind::NotFound) => Ok(Out::Int(0)),
        Err(e) => Err(e),
    }
}

/// `honker_ack(job_id, worker_id[, attempt])` → 1, or 0 when the worker
/// does not hold the job. A lease that lapsed but that nobody reclaimed is
/// still the worker's (DESIGN §14; Honker's fenced arity does the same).
pub(super) fn ack(c: &Call<'_>) -> Result<Out> {
    let Some((id, l)) = named_lease(&c.args, c.conn, 2)? else {
        return Ok(Out::Int(0));
    };
    one_or_zero(ops::ack(c.conn, &l.queue, id, &l.token, None, false, c.now))
}

/// `honker_ack_batch(json, worker_id)` → how many were acked; the JSON
/// array holds job ids or (Honker's fenced form) `[id, attempt]` pairs.
pub(super) fn ack_batch(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let bad =
        || Error::invalid("honker_ack_batch expects a JSON array of ids or [id, attempt] pairs");
    let list: Json = serde_json::from_str(a.text(0, "job ids")?).map_err(|_| bad())?;
    let items = list.as_array().ok_or_else(bad)?;
    validate::batch(i64::try_from(items.len()).unwrap_or(i64::MAX).max(1))?;
    let worker = a.text(1, "worker_id")?;
    let whole = |v: &Json| {
        v.as_i64()
            .or_else(|| v.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64))
    };
    let named = items
        .iter()
        .map(|item| match item {
            Json::Array(pair) if pair.len() == 2 => match (whole(&pair[0]), whole(&pair[1])) {
                (Some(id), Some(attempt)) => Ok((validate::job_id(id)?, Some(attempt))),
                _ => Err(bad()),
            },
            v => whole(v)
                .ok_or_else(bad)
                .and_then(|id| Ok((validate::job_id(id)?, None))),
        })
        .collect::<Result<Vec<_>>>()?;
    let mut acked = 0;
    for (id, attempt) in named {
        if let Some(l) = ops::lease_by_worker(c.conn, id, worker, attempt)? {
            if let Out::Int(n) =
                one_or_zero(ops::ack(c.conn, &l.queue, id, &l.token, None, false, c.now))?
            {
                acked += n;
            }
        }
    }
    Ok(Out::Int(acked))
}

/// `honker_retry(job_id, worker_id, delay_s, error[, attempt])` → 1 (back
/// to pending after `delay_s`, or dead with `error` when its attempts are
/// used up), or 0 when the worker does not hold the job.
pub(super) fn retry(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let delay = a.opt_seconds(2, "delay_s")?.map_or(0, secs_ms);
    let error = a.opt_text(3, "error")?.map(validate::clip_error);
    let Some((id, l)) = named_lease(a, c.conn, 4)? else {
        return Ok(Out::Int(0));
    };
    one_or_zero(ops::retry(c.conn, &l.queue, id, &l.token, Some(delay), error, c.now).map(|_| ()))
}

/// `honker_fail(job_id, worker_id, error[, attempt])` → 1 (dead with
/// `error`), or 0 when the worker does not hold the job.
pub(super) fn fail(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let error = validate::clip_error(a.opt_text(2, "error")?.unwrap_or("failed"));
    let Some((id, l)) = named_lease(a, c.conn, 3)? else {
        return Ok(Out::Int(0));
    };
    one_or_zero(ops::fail(c.conn, &l.queue, id, &l.token, error, c.now))
}

/// `honker_heartbeat(job_id, worker_id, extend_s[, attempt])` → 1 (the
/// lease now ends `extend_s` from now), or 0 when the worker does not hold
/// a live lease: after a lapse Honker's clients stop, so a late heartbeat
/// cannot take a job back from a reclaimer.
pub(super) fn heartbeat(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    // A given extension is checked before the lease is looked up.
    let given = a
        .opt_seconds(2, "extend_s")?
        .map(|s| validate::lease(Duration::from_secs_f64(s)))
        .transpose()?;
    match named_lease(a, c.conn, 3)? {
        Some((id, l)) if l.expires_at > c.now => {
            let ms = match given {
                Some(ms) => ms,
                None => validate::lease(super::super::stored_options(c.conn, &l.queue)?.lease)?,
            };
            one_or_zero(ops::heartbeat(c.conn, &l.queue, id, &l.token, ms, c.now).map(|_| ()))
        }
        _ => Ok(Out::Int(0)),
    }
}

/// `honker_cancel(job_id)` (any queue) or `honker_cancel(queue, job_id)` →
/// 1 when a live job was cancelled, 0 when there was none (finished, never
/// existed, or in another queue).
pub(super) fn cancel(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let (queue, id) = if a.len() == 2 {
        (Some(a.name(0)?), a.whole(1, "job_id")?)
    } else {
        (None, a.whole(0, "job_id")?)
    };
    let id = validate::job_id(id)?;
    let Some(holder) = ops::job_queue(c.conn, id)? else {
        return Ok(Out::Int(0));
    };
    if queue.is_some_and(|q| q != holder) {
        return Ok(Out::Int(0));
    }
    Ok(Out::Int(i64::from(ops::cancel(
        c.conn, &holder, id, None, c.now,
    )?)))
}

/// `honker_get_job(job_id)` → Honker's JSON object for a live job (state
/// `pending` or `processing`, times in seconds, payload as a JSON string),
/// or `''` when there is none (finished or never existed).
pub(super) fn get_job(c: &Call<'_>) -> Result<Out> {
    let id = validate::job_id(c.args.whole(0, "job_id")?)?;
    let info = match ops::job_queue(c.conn, id)? {
        Some(q) => ops::get_job(c.conn, &q, id, c.now)?,
        None => None,
    };
    let Some(j) = info.filter(|j| !j.state.is_finished()) else {
        return Ok(Out::Text(String::new()));
    };
    let state = if j.state == JobState::Running {
        "processing"
    } else {
        "pending"
    };
    Ok(Out::Text(
        json!({
            "id": j.id, "queue": j.queue, "payload": payload_string(&j.payload),
            "state": state, "priority": j.priority, "run_at": secs(j.run_at),
            "worker_id": j.worker_id, "claim_expires_at": j.lease_expires_at.map(secs),
            "attempts": j.attempts, "max_attempts": j.max_attempts,
            "created_at": secs(j.created_at), "expires_at": j.expires_at.map(secs),
        })
        .to_string(),
    ))
}

/// `honker_queue_next_claim_at(queue)`: the unix second from which a job of
/// `queue` is next claimable (rounded up, so that a worker asleep until then
/// finds it), or 0 when nothing is coming.
pub(super) fn next_claim_at(c: &Call<'_>) -> Result<Out> {
    let queue = c.args.name(0)?;
    let next = ops::next_claim_at(c.conn, queue, c.now)?;
    Ok(Out::Int(next.map_or(0, ms_secs_up)))
}

/// `honker_sweep_expired(queue)`: finishes (`expired`) the jobs of `queue`
/// whose expiry passed before they started; how many.
pub(super) fn sweep_expired(c: &Call<'_>) -> Result<Out> {
    let queue = c.args.name(0)?;
    Ok(Out::Int(ops::expire(c.conn, queue, c.now)? as i64))
}

/// `honker_result_save(job_id, value, ttl_s)` → 1. Honker's results are
/// keyed by job id alone and hold any text: the value is kept as given (a
/// BLOB as a BLOB), under the job's queue when honker knows the job (so the
/// bindings' `get_result` finds it), and for `ttl_s` seconds (≤ 0 or NULL:
/// until retention).
pub(super) fn result_save(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let id = validate::job_id(a.whole(0, "job_id")?)?;
    let value = a.payload(1)?;
    if value.len() > c.config.max_payload_bytes {
        return Err(Error::invalid(format!(
            "honker_result_save: the value is {} bytes, over the limit of {}",
            value.len(),
            c.config.max_payload_bytes
        )));
    }
    let ttl = a.opt_number(2, "ttl_s")?;
    let expires_at = ttl
        .filter(|&t| t > 0.0)
        .map(|t| c.now.saturating_add(secs_ms(t)));
    let queue = ops::job_queue(c.conn, id)?.unwrap_or_default();
    ops::save_result(c.conn, &queue, id, &value, expires_at, c.now)?;
    Ok(Out::Int(1))
}

/// `honker_result_get(job_id)` → the saved value, or NULL when there is none
/// or it expired.
pub(super) fn result_get(c: &Call<'_>) -> Result<Out> {
    let id = validate::job_id(c.args.whole(0, "job_id")?)?;
    Ok(match ops::get_result_by_id(c.conn, id, c.now)? {
        Some(Payload::Json(t)) => Out::Text(t),
        Some(Payload::Bytes(b)) => Out::Blob(b),
        None => Out::Null,
    })
}

/// `honker_result_sweep()` → how many expired results were deleted.
pub(super) fn result_sweep(c: &Call<'_>) -> Result<Out> {
    Ok(Out::Int(ops::sweep_results(c.conn, c.now)? as i64))
}
