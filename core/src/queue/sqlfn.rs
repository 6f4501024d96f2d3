//! The queue's SQL functions (the SQL surface of `queue::ops`): one row per
//! (name, arity) in [`FUNCTIONS`], registered by `crate::sql` with the flags
//! of its row. Two contracts over the same `ops` (ADR 15, docs/sql.md):
//! ours here (`honker_queue_*`, `honker_job_*`, `honker_dead_*`: ms,
//! `(id, token)`, coded errors) and Honker's in [`honker`] (Honker's names
//! and arities: seconds, worker ids, 1/0).

use serde_json::{json, Map, Value as Json};

use super::JobInfo;
use super::{ops, EnqueueOptions};
use crate::error::{Error, ErrorKind, Result};
use crate::options::Backoff;
use crate::sqlfn::{payload_json, trace_json, Args, Call, Out, SqlFn, DIRECT_ONLY};
use crate::validate;

mod honker;

/// The queue's functions: name, argument count (-1: variable, the call
/// checks), flags, call.
pub(crate) const FUNCTIONS: &[SqlFn] = &[
    SqlFn::atomic("honker_queue_enqueue", -1, DIRECT_ONLY, queue_enqueue),
    SqlFn::atomic(
        "honker_queue_enqueue_record",
        -1,
        DIRECT_ONLY,
        queue_enqueue_record,
    ),
    SqlFn::atomic("honker_queue_claim", 4, DIRECT_ONLY, queue_claim),
    SqlFn::atomic("honker_queue_stats", 1, DIRECT_ONLY, queue_stats),
    SqlFn::atomic("honker_queue_metrics", 1, DIRECT_ONLY, queue_metrics),
    SqlFn::atomic("honker_queue_metrics_text", 0, DIRECT_ONLY, metrics_text),
    SqlFn::atomic("honker_queue_pause", -1, DIRECT_ONLY, queue_pause),
    SqlFn::atomic("honker_queue_resume", 1, DIRECT_ONLY, queue_resume),
    SqlFn::atomic("honker_queue_pause_all", -1, DIRECT_ONLY, queue_pause_all),
    SqlFn::atomic("honker_queue_resume_all", 0, DIRECT_ONLY, queue_resume_all),
    SqlFn::atomic(
        "honker_queue_limit_concurrency",
        3,
        DIRECT_ONLY,
        queue_limit_concurrency,
    ),
    SqlFn::atomic(
        "honker_queue_set_fairness",
        5,
        DIRECT_ONLY,
        queue_set_fairness,
    ),
    SqlFn::atomic("honker_job_ack", -1, DIRECT_ONLY, job_ack),
    SqlFn::atomic("honker_job_ack_many", 2, DIRECT_ONLY, job_ack_many),
    SqlFn::atomic("honker_job_retry", 5, DIRECT_ONLY, job_retry),
    SqlFn::atomic("honker_job_fail", 4, DIRECT_ONLY, job_fail),
    SqlFn::atomic("honker_job_release", 3, DIRECT_ONLY, job_release),
    SqlFn::atomic("honker_job_snooze", 4, DIRECT_ONLY, job_snooze),
    SqlFn::atomic("honker_job_heartbeat", 4, DIRECT_ONLY, job_heartbeat),
    SqlFn::atomic("honker_job_cancel", -1, DIRECT_ONLY, job_cancel),
    SqlFn::atomic("honker_job_get", 2, DIRECT_ONLY, job_get),
    SqlFn::atomic("honker_dead_requeue", -1, DIRECT_ONLY, dead_requeue),
    SqlFn::atomic("honker_dead_purge", -1, DIRECT_ONLY, dead_purge),
    // Honker's names at Honker's arities, with Honker's contracts.
    SqlFn::atomic("honker_enqueue", 7, DIRECT_ONLY, honker::enqueue),
    SqlFn::atomic("honker_claim_batch", 4, DIRECT_ONLY, honker::claim_batch),
    SqlFn::atomic("honker_ack", 2, DIRECT_ONLY, honker::ack),
    SqlFn::atomic("honker_ack", 3, DIRECT_ONLY, honker::ack),
    SqlFn::atomic("honker_ack_batch", 2, DIRECT_ONLY, honker::ack_batch),
    SqlFn::atomic("honker_retry", 4, DIRECT_ONLY, honker::retry),
    SqlFn::atomic("honker_retry", 5, DIRECT_ONLY, honker::retry),
    SqlFn::atomic("honker_fail", 3, DIRECT_ONLY, honker::fail),
    SqlFn::atomic("honker_fail", 4, DIRECT_ONLY, honker::fail),
    SqlFn::atomic("honker_heartbeat", 3, DIRECT_ONLY, honker::heartbeat),
    SqlFn::atomic("honker_heartbeat", 4, DIRECT_ONLY, honker::heartbeat),
    SqlFn::atomic("honker_cancel", 1, DIRECT_ONLY, honker::cancel),
    SqlFn::atomic("honker_cancel", 2, DIRECT_ONLY, honker::cancel),
    SqlFn::atomic("honker_get_job", 1, DIRECT_ONLY, honker::get_job),
    SqlFn::atomic(
        "honker_queue_next_claim_at",
        1,
        DIRECT_ONLY,
        honker::next_claim_at,
    ),
    SqlFn::atomic(
        "honker_sweep_expired",
        1,
        DIRECT_ONLY,
        honker::sweep_expired,
    ),
    SqlFn::atomic("honker_result_save", 3, DIRECT_ONLY, honker::result_save),
    SqlFn::atomic("honker_result_get", 1, DIRECT_ONLY, honker::result_get),
    SqlFn::atomic("honker_result_sweep", 0, DIRECT_ONLY, honker::result_sweep),
];

/// `honker_queue_enqueue(queue, payload[, options])` → the job's id (the
/// holder's id when its dedupe key was held). `options` is a JSON
/// object: `run_at` (ms since the epoch) or `delay_ms`, `priority`,
/// `max_attempts`, `dedupe_key`, `dedupe_by_payload` (true/false), `unique`
/// (`"live"`, `"period"`, `"throttle"`, `"debounce"`), `unique_for_ms`,
/// `concurrency_key`, `expires_ms`, `backoff`
/// (`base_ms`, `max_ms`, `jitter`), `traceparent` and `tracestate` (the producer's W3C
/// trace context, stored beside the job).
fn queue_enqueue(c: &Call<'_>) -> Result<Out> {
    enqueue_call(c).map(|(id, _)| Out::Int(id))
}

/// `honker_queue_enqueue_record(queue, payload[, options])` → what the
/// enqueue did, as the bindings' `Enqueued` record in JSON: `{"id",
/// "existing", "unique"}` (`unique`: the mode that acted when nothing was
/// added, else null).
fn queue_enqueue_record(c: &Call<'_>) -> Result<Out> {
    let (id, unique) = enqueue_call(c)?;
    Ok(Out::Text(
        json!({
            "id": id,
            "existing": unique.is_some(),
            "unique": unique.map(crate::UniqueMode::as_str),
        })
        .to_string(),
    ))
}

/// The enqueue of both functions: the job's id, and the mode that acted
/// when nothing was added.
fn enqueue_call(c: &Call<'_>) -> Result<(i64, Option<crate::UniqueMode>)> {
    let a = &c.args;
    a.count(2, 3)?;
    let queue = a.name(0)?;
    let payload = a.payload(1)?;
    payload.validate(c.config.max_payload_bytes)?;
    let options = if a.has(2) {
        enqueue_options(a.opt_text(2, "options")?)?
    } else {
        EnqueueOptions::default()
    };
    options.check()?;
    let job = options.resolve(&super::stored_options(c.conn, queue)?, c.now)?;
    Ok(ops::enqueue(c.conn, queue, &job, std::slice::from_ref(&payload), c.now)?[0])
}

/// The options object of `honker_queue_enqueue`; an unknown key or a value
/// of the wrong type is `INVALID_ARGUMENT`.
fn enqueue_options(text: Option<&str>) -> Result<EnqueueOptions> {
    let mut o = EnqueueOptions::default();
    let Some(text) = text else { return Ok(o) };
    let (mut parent, mut state) = (None, None);
    let bad = |what: &str| Error::invalid(format!("honker_queue_enqueue: options: {what}"));
    let obj: Map<String, Json> = match serde_json::from_str(text) {
        Ok(Json::Object(m)) => m,
        _ => return Err(bad("must be a JSON object")),
    };
    let int = |k: &str, v: &Json| {
        v.as_i64()
            .ok_or_else(|| bad(&format!("{k} must be an integer")))
    };
    let ms = |k: &str, v: &Json| -> Result<std::time::Duration> {
        let n = v
            .as_f64()
            .ok_or_else(|| bad(&format!("{k} must be a number of ms")))?;
        validate::millis(k, n)
    };
    for (k, v) in &obj {
        match k.as_str() {
            "run_at" => o.run_at = Some(int(k, v)?),
            "delay_ms" => o.delay = Some(ms(k, v)?),
            "priority" => {
                o.priority =
                    i32::try_from(int(k, v)?).map_err(|_| bad("priority is out of range"))?;
            }
            "max_attempts" => o.max_attempts = Some(u32::try_from(int(k, v)?).unwrap_or(0)),
            "dedupe_key" => {
                o.dedupe_key = Some(
                    v.as_str()
                        .ok_or_else(|| bad("dedupe_key must be text"))?
                        .into(),
                );
            }
            "dedupe_by_payload" => {
                o.dedupe_by_payload = v
                    .as_bool()
                    .ok_or_else(|| bad("dedupe_by_payload must be true or false"))?;
            }
            "unique" => {
                o.unique = Some(v.as_str().ok_or_else(|| bad("unique must be text"))?.into());
            }
            "unique_for_ms" => o.unique_for = Some(ms(k, v)?),
            "concurrency_key" => {
                o.concurrency_key = Some(
                    v.as_str()
                        .ok_or_else(|| bad("concurrency_key must be text"))?
                        .into(),
                );
            }
            "expires_ms" => o.expires = Some(ms(k, v)?),
            "traceparent" => {
                parent = Some(v.as_str().ok_or_else(|| bad("traceparent must be text"))?)
            }
            "tracestate" => state = Some(v.as_str().ok_or_else(|| bad("tracestate must be text"))?),
            "backoff" => {
                let b = v
                    .as_object()
                    .ok_or_else(|| bad("backoff must be an object"))?;
                let mut backoff = Backoff::default();
                for (bk, bv) in b {
                    match bk.as_str() {
                        "base_ms" => backoff.base = ms(bk, bv)?,
                        "max_ms" => backoff.max = ms(bk, bv)?,
                        "jitter" => {
                            backoff.jitter =
                                bv.as_f64().ok_or_else(|| bad("jitter must be a number"))?;
                        }
                        other => return Err(bad(&format!("unknown backoff key {other:?}"))),
                    }
                }
                o.backoff = Some(backoff);
            }
            other => return Err(bad(&format!("unknown key {other:?}"))),
        }
    }
    o.trace_context = crate::TraceContext::from_headers(parent, state)?;
    Ok(o)
}

/// `honker_queue_claim(queue, worker, n, lease_ms)` → a JSON array of jobs
/// with our fields (`lease_token`, ms times).
fn queue_claim(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let queue = a.name(0)?;
    let worker = a.text(1, "worker_id")?;
    validate::key("worker id", worker)?;
    let n = validate::batch(a.int(2, "n")?)?;
    let lease = match a.opt_ms(3, "lease_ms")? {
        Some(l) => l,
        None => super::stored_options(c.conn, queue)?.lease,
    };
    let lease_ms = validate::lease(lease)?;
    let jobs = ops::claim(c.conn, queue, worker, n, lease_ms, c.now)?;
    let out: Vec<Json> = jobs
        .iter()
        .map(|j| {
            json!({
                "id": j.id, "queue": queue, "payload": payload_json(&j.payload),
                "attempts": j.attempts, "max_attempts": j.max_attempts,
                "priority": j.priority, "run_at": j.run_at, "created_at": j.created_at,
                "worker_id": worker, "lease_token": j.lease_token,
                "lease_expires_at": j.lease_expires_at,
                "trace_context": crate::sqlfn::trace_json(j.trace_context.as_ref()),
            })
        })
        .collect();
    Ok(Out::Text(Json::Array(out).to_string()))
}

/// The (queue, id, token) a `honker_job_*` call names, checked.
fn held<'a>(a: &'a Args<'_>) -> Result<(&'a str, i64, &'a str)> {
    Ok((
        a.name(0)?,
        validate::job_id(a.int(1, "job_id")?)?,
        a.text(2, "lease_token")?,
    ))
}

/// `honker_job_ack(queue, id, token[, result])` → 1; `LEASE_LOST` when the
/// token no longer holds the job. The result (JSON text or a BLOB) is saved
/// in the same transaction.
fn job_ack(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    a.count(3, 4)?;
    let (queue, id, token) = held(a)?;
    let result = match a.raw(3) {
        crate::raw::ValueRef::Null => None,
        _ => {
            let p = a.payload(3)?;
            p.validate(c.config.max_payload_bytes)?;
            Some(p)
        }
    };
    ops::ack(c.conn, queue, id, token, result.as_ref(), false, c.now)?;
    Ok(Out::Int(1))
}

/// `honker_job_ack_many(queue, '[[id, token], …]')` → how many were acked
/// (a pair whose lease was lost is skipped).
fn job_ack_many(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let queue = a.name(0)?;
    let bad = || Error::invalid("honker_job_ack_many expects a JSON array of [id, token] pairs");
    let list: Json = serde_json::from_str(a.text(1, "pairs")?).map_err(|_| bad())?;
    let items = list.as_array().ok_or_else(bad)?;
    validate::batch(i64::try_from(items.len()).unwrap_or(i64::MAX).max(1))?;
    let pairs = items
        .iter()
        .map(|item| match item.as_array().map(Vec::as_slice) {
            Some([id, token]) => match (id.as_i64(), token.as_str()) {
                (Some(id), Some(token)) => Ok((validate::job_id(id)?, token)),
                _ => Err(bad()),
            },
            _ => Err(bad()),
        })
        .collect::<Result<Vec<_>>>()?;
    let acked = ops::ack_many(c.conn, queue, pairs, false, c.now, |e| {
        matches!(e.kind(), ErrorKind::LeaseLost | ErrorKind::NotFound)
    })?;
    Ok(Out::Int(acked as i64))
}

/// `honker_job_retry(queue, id, token, delay_ms, error)` → the state it went
/// to (`ready`, `scheduled`, `dead`); a NULL delay uses the job's backoff.
fn job_retry(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let (queue, id, token) = held(a)?;
    let delay = a.opt_ms(3, "delay_ms")?.map(crate::clock::duration_ms);
    let error = a.opt_text(4, "error")?.map(validate::clip_error);
    let state = ops::retry(c.conn, queue, id, token, delay, error, c.now)?;
    Ok(Out::Text(state.as_str().into()))
}

/// `honker_job_fail(queue, id, token, error)` → 1 (dead-lettered).
fn job_fail(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let (queue, id, token) = held(a)?;
    let error = validate::clip_error(a.opt_text(3, "error")?.unwrap_or("failed"));
    ops::fail(c.conn, queue, id, token, error, c.now)?;
    Ok(Out::Int(1))
}

/// `honker_job_release(queue, id, token)` → the state it went back to; the
/// attempt is not counted.
fn job_release(c: &Call<'_>) -> Result<Out> {
    let (queue, id, token) = held(&c.args)?;
    let state = ops::release(c.conn, queue, id, token, None, c.now)?;
    Ok(Out::Text(state.as_str().into()))
}

/// `honker_job_snooze(queue, id, token, delay_ms)` → the state it went back
/// to; the attempt is not counted.
fn job_snooze(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let (queue, id, token) = held(a)?;
    let delay = a
        .opt_ms(3, "delay_ms")?
        .ok_or_else(|| Error::invalid("honker_job_snooze: delay_ms must not be NULL"))?;
    let delay = validate::delay("delay_ms", delay)?;
    let state = ops::release(c.conn, queue, id, token, Some(delay), c.now)?;
    Ok(Out::Text(state.as_str().into()))
}

/// `honker_job_heartbeat(queue, id, token, extend_ms)` → the new lease
/// expiry (ms).
fn job_heartbeat(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let (queue, id, token) = held(a)?;
    let extend = match a.opt_ms(3, "extend_ms")? {
        Some(e) => e,
        None => super::stored_options(c.conn, queue)?.lease,
    };
    let ms = validate::lease(extend)?;
    Ok(Out::Int(ops::heartbeat(
        c.conn, queue, id, token, ms, c.now,
    )?))
}

/// `honker_job_cancel(queue, id[, reason])` → 1, or 0 when the job had
/// already finished; `NOT_FOUND` when it never existed in `queue`.
fn job_cancel(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    a.count(2, 3)?;
    let queue = a.name(0)?;
    let id = validate::job_id(a.int(1, "job_id")?)?;
    let reason = if a.has(2) {
        a.opt_text(2, "reason")?
    } else {
        None
    };
    let cancelled = ops::cancel(c.conn, queue, id, reason.map(validate::clip_error), c.now)?;
    Ok(Out::Int(i64::from(cancelled)))
}

/// `honker_job_get(queue, id)` → the job as a JSON object, in any state
/// until retention removes it; `NOT_FOUND` otherwise.
fn job_get(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let queue = a.name(0)?;
    let id = validate::job_id(a.int(1, "job_id")?)?;
    match ops::get_job(c.conn, queue, id, c.now)? {
        Some(info) => Ok(Out::Text(job_json(&info).to_string())),
        None => Err(Error::not_found(format!("no job {id} in queue {queue:?}"))),
    }
}

fn queue_stats(c: &Call<'_>) -> Result<Out> {
    let s = ops::stats(c.conn, c.args.name(0)?, c.now)?;
    Ok(Out::Text(
        json!({
            "ready": s.ready, "scheduled": s.scheduled, "running": s.running,
            "lapsed": s.lapsed, "dead": s.dead, "cancelled": s.cancelled,
            "expired": s.expired, "completed": s.completed,
            "oldest_ready_age_ms": s.oldest_ready_age_ms, "paused": s.paused,
            "max_running": s.max_running, "max_running_per_key": s.max_running_per_key,
            "round_robin": s.round_robin, "key_limit": s.key_limit, "key_per_ms": s.key_per_ms,
        })
        .to_string(),
    ))
}

/// `honker_queue_pause(queue[, note])` → 1: pauses the queue for every
/// process (ADR 33), with your transaction when inside one.
fn queue_pause(c: &Call<'_>) -> Result<Out> {
    c.args.count(1, 2)?;
    pause_with_note(c, c.args.name(0)?, 1)
}

/// `honker_queue_pause_all([note])` → 1: pauses every queue.
fn queue_pause_all(c: &Call<'_>) -> Result<Out> {
    c.args.count(0, 1)?;
    pause_with_note(c, "", 0)
}

/// Pauses `queue` (`""`: all) with the note in argument `at`, if given.
fn pause_with_note(c: &Call<'_>, queue: &str, at: usize) -> Result<Out> {
    let note = if c.args.has(at) {
        c.args.opt_text(at, "note")?
    } else {
        None
    };
    ops::pause(c.conn, queue, note, c.now)?;
    Ok(Out::Int(1))
}

/// `honker_queue_resume(queue)` → 1 if the queue had a pause of its own
/// (now lifted), else 0.
fn queue_resume(c: &Call<'_>) -> Result<Out> {
    Ok(Out::Int(i64::from(ops::resume(c.conn, c.args.name(0)?)?)))
}

/// `honker_queue_limit_concurrency(queue, max_running, max_running_per_key)`
/// → 1: sets the queue's concurrency caps for every process (ADR 35), with
/// your transaction when inside one; a NULL cap is lifted.
fn queue_limit_concurrency(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let cap = |i: usize, what: &str| -> Result<Option<u32>> {
        a.opt_int(i, what)?
            .map(|n| {
                u32::try_from(n).map_err(|_| {
                    Error::invalid(format!(
                        "{what} must be between 1 and {}, got {n}",
                        super::Concurrency::MAX
                    ))
                })
            })
            .transpose()
    };
    let caps = super::Concurrency {
        max_running: cap(1, "max_running")?,
        max_running_per_key: cap(2, "max_running_per_key")?,
    };
    ops::limit_concurrency(c.conn, a.name(0)?, &caps, c.now)?;
    Ok(Out::Int(1))
}

/// `honker_queue_set_fairness(queue, order, key_limit, key_per_ms,
/// key_burst)` → 1. `order` is 'priority' or 'round_robin' (NULL:
/// priority); the rate limit per key is NULLs for none (ADR 36). Sets it
/// with the caller's transaction.
fn queue_set_fairness(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let count = |i: usize, what: &str| -> Result<Option<u32>> {
        a.opt_int(i, what)?
            .map(|n| {
                u32::try_from(n).map_err(|_| {
                    Error::invalid(format!("{what} must be between 1 and 1000000000, got {n}"))
                })
            })
            .transpose()
    };
    let fairness = super::Fairness {
        order: a.opt_text(1, "order")?.map(str::to_owned),
        key_limit: count(2, "key_limit")?,
        key_per: a.opt_ms(3, "key_per_ms")?,
        key_burst: count(4, "key_burst")?,
    };
    ops::set_fairness(c.conn, a.name(0)?, &fairness, c.now)?;
    Ok(Out::Int(1))
}

/// `honker_queue_resume_all()` → 1 if all queues were paused, else 0.
fn queue_resume_all(c: &Call<'_>) -> Result<Out> {
    Ok(Out::Int(i64::from(ops::resume(c.conn, "")?)))
}

/// `honker_queue_metrics(queue)` → the queue's metrics as JSON (ADR 27;
/// the shape `honker metrics --json` prints for each queue).
fn queue_metrics(c: &Call<'_>) -> Result<Out> {
    let queue = c.args.name(0)?;
    let m = super::metrics::read(c.conn, Some(queue), true, c.now)?
        .into_iter()
        .next()
        .unwrap_or_else(|| super::metrics::QueueMetrics {
            queue: queue.to_string(),
            ..Default::default()
        });
    Ok(Out::Text(m.to_json().to_string()))
}

/// `honker_queue_metrics_text()` → every queue's metrics in Prometheus's text
/// format.
fn metrics_text(c: &Call<'_>) -> Result<Out> {
    let all = super::metrics::read(c.conn, None, true, c.now)?;
    Ok(Out::Text(super::metrics::exposition(&all)))
}

/// `honker_dead_requeue(queue[, id])` → how many dead letters went back.
fn dead_requeue(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    a.count(1, 2)?;
    let id = if a.has(1) {
        a.opt_int(1, "job_id")?
    } else {
        None
    };
    let id = id.map(validate::job_id).transpose()?;
    Ok(Out::Int(
        ops::requeue_dead(c.conn, a.name(0)?, id, c.now)? as i64
    ))
}

/// `honker_dead_purge(queue[, older_than_ms])` → how many were deleted.
fn dead_purge(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    a.count(1, 2)?;
    let age = if a.has(1) {
        a.opt_ms(1, "older_than_ms")?
    } else {
        None
    };
    let before = age.map_or(i64::MAX, |d| c.now - crate::clock::duration_ms(d));
    Ok(Out::Int(ops::purge_dead(c.conn, a.name(0)?, before)? as i64))
}

fn job_json(j: &JobInfo) -> Json {
    json!({
        "id": j.id, "queue": j.queue, "state": j.state.as_str(), "payload": payload_json(&j.payload),
        "priority": j.priority, "run_at": j.run_at, "attempts": j.attempts,
        "max_attempts": j.max_attempts, "dedupe_key": j.dedupe_key, "expires_at": j.expires_at,
        "created_at": j.created_at, "worker_id": j.worker_id, "last_error": j.last_error,
        "lease_expires_at": j.lease_expires_at, "finished_at": j.finished_at,
        "trace_context": trace_json(j.trace_context.as_ref()),
        "concurrency_key": j.concurrency_key,
    })
}
