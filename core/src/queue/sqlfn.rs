//! The queue's SQL functions (the SQL surface of `queue::ops`): one row per
//! function in [`FUNCTIONS`], registered by `crate::sql` with the flags of
//! its row. Conventions: docs/sql.md and ADR 15.

use std::time::Duration;

use serde_json::{json, Value as Json};

use super::{ops, EnqueueOptions};
use crate::error::{Error, ErrorKind, Result};
use crate::options::QueueOptions;
use crate::raw::Conn;
use crate::sql::{
    job_json, ms_secs_up, payload_json, secs_ms, Args, Call, Out, SqlFn, DIRECT_ONLY,
};
use crate::validate;

/// The queue's functions: name, argument count (-1: variable), flags, call.
pub(crate) const FUNCTIONS: &[SqlFn] = &[
    SqlFn::atomic("honker_enqueue", -1, DIRECT_ONLY, enqueue),
    SqlFn::atomic("honker_claim_batch", 4, DIRECT_ONLY, claim_batch),
    SqlFn::atomic("honker_ack", -1, DIRECT_ONLY, ack),
    SqlFn::atomic("honker_ack_batch", 2, DIRECT_ONLY, ack_batch),
    SqlFn::atomic("honker_retry", -1, DIRECT_ONLY, retry),
    SqlFn::atomic("honker_fail", -1, DIRECT_ONLY, fail),
    SqlFn::atomic("honker_heartbeat", -1, DIRECT_ONLY, heartbeat),
    SqlFn::atomic("honker_release", -1, DIRECT_ONLY, release),
    SqlFn::atomic("honker_cancel", -1, DIRECT_ONLY, cancel),
    SqlFn::atomic("honker_get_job", 1, DIRECT_ONLY, get_job),
    SqlFn::atomic("honker_queue_stats", 1, DIRECT_ONLY, queue_stats),
    SqlFn::atomic("honker_requeue_dead", -1, DIRECT_ONLY, requeue_dead),
    SqlFn::atomic("honker_purge_dead", -1, DIRECT_ONLY, purge_dead),
    // Honker's contracts (ADR 15): seconds, counts.
    SqlFn::atomic("honker_queue_next_claim_at", 1, DIRECT_ONLY, next_claim_at),
    SqlFn::atomic("honker_sweep_expired", 1, DIRECT_ONLY, sweep_expired),
];

/// Honker's `honker_queue_next_claim_at(queue)`: the unix second from which
/// a job of `queue` is next claimable (rounded up, so that a worker asleep
/// until then finds it), or 0 when nothing is coming.
fn next_claim_at(c: &Call<'_>) -> Result<Out> {
    let queue = c.args.name(0)?;
    let next = ops::next_claim_at(c.conn, queue, c.now)?;
    Ok(Out::Int(next.map_or(0, ms_secs_up)))
}

/// Honker's `honker_sweep_expired(queue)`: finishes (`expired`) the jobs of
/// `queue` whose expiry passed before they started; how many.
fn sweep_expired(c: &Call<'_>) -> Result<Out> {
    let queue = c.args.name(0)?;
    Ok(Out::Int(ops::expire(c.conn, queue, c.now)? as i64))
}

fn enqueue(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let conn = c.conn;
    let now = c.now;
    let config = c.config;
    a.count(7, 8)?;
    let queue = a.name(0)?;
    let payload = a.payload(1)?;
    payload.validate(config.max_payload_bytes)?;
    let priority = a.opt_int(4, "priority")?.unwrap_or(0);
    let dedupe = if a.len() > 7 {
        a.opt_text(7, "dedupe_key")?
    } else {
        None
    };
    let options = EnqueueOptions {
        run_at: a.opt_seconds(2, "run_at")?.map(secs_ms),
        delay: a.opt_seconds(3, "delay_s")?.map(Duration::from_secs_f64),
        priority: i32::try_from(priority)
            .map_err(|_| Error::invalid(format!("priority {priority} is out of range")))?,
        // Out-of-range values become 0, which the check refuses.
        max_attempts: a
            .opt_int(5, "max_attempts")?
            .map(|n| u32::try_from(n).unwrap_or(0)),
        expires: a.opt_seconds(6, "expires_s")?.map(Duration::from_secs_f64),
        dedupe_key: dedupe.map(str::to_owned),
        backoff: None,
    };
    options.check()?;
    let job = options.resolve(&QueueOptions::default(), now)?;
    let (id, _) = ops::enqueue(conn, queue, &job, std::slice::from_ref(&payload), now)?[0];
    Ok(Out::Int(id))
}

fn claim_batch(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let conn = c.conn;
    let now = c.now;
    let queue = a.name(0)?;
    let worker = a.text(1, "worker_id")?;
    validate::key("worker id", worker)?;
    let n = validate::batch(a.int(2, "n")?)?;
    let lease = a
        .opt_seconds(3, "visibility_s")?
        .unwrap_or(QueueOptions::default().lease.as_secs_f64());
    let lease_ms = validate::lease(std::time::Duration::from_secs_f64(lease))?;
    let jobs = ops::claim(conn, queue, worker, n, lease_ms, now)?;
    let out: Vec<Json> = jobs
        .iter()
        .map(|j| {
            json!({
                "id": j.id, "queue": queue, "payload": payload_json(&j.payload),
                "attempts": j.attempts, "max_attempts": j.max_attempts,
                "priority": j.priority, "run_at": j.run_at, "created_at": j.created_at,
                "worker_id": worker, "lease_token": j.lease_token,
                "lease_expires_at": j.lease_expires_at,
            })
        })
        .collect();
    Ok(Out::Text(Json::Array(out).to_string()))
}

fn ack(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let conn = c.conn;
    let now = c.now;
    a.count(2, 3)?;
    let (queue, token) = lease(a, conn, 0, 1, 2, now)?;
    ops::ack(conn, &queue, a.int(0, "job_id")?, &token, None, false, now)?;
    Ok(Out::Int(1))
}

fn ack_batch(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let conn = c.conn;
    let now = c.now;
    let list: Json = serde_json::from_str(a.text(0, "job ids")?).map_err(|_| {
        Error::invalid("honker_ack_batch expects a JSON array of ids or [id, token] pairs")
    })?;
    let items = list
        .as_array()
        .ok_or_else(|| Error::invalid("honker_ack_batch expects a JSON array"))?;
    validate::batch(i64::try_from(items.len()).unwrap_or(i64::MAX).max(1))?;
    let worker = a.text(1, "worker_id")?;
    let mut acked = 0i64;
    for item in items {
        let (id, token) = match item {
            Json::Number(n) => (n.as_i64(), None),
            Json::Array(pair) if pair.len() == 2 => (pair[0].as_i64(), pair[1].as_str()),
            _ => (None, None),
        };
        let id = id.ok_or_else(|| Error::invalid("job ids must be integers"))?;
        let resolved = match token {
            Some(t) => ops::lease_by_token(conn, id, t),
            None => ops::lease_by_worker(conn, id, worker, now),
        };
        match resolved.and_then(|(q, t)| ops::ack(conn, &q, id, &t, None, false, now)) {
            Ok(()) => acked += 1,
            Err(e) if matches!(e.kind(), ErrorKind::LeaseLost | ErrorKind::NotFound) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Out::Int(acked))
}

fn retry(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let conn = c.conn;
    let now = c.now;
    a.count(4, 5)?;
    let (queue, token) = lease(a, conn, 0, 1, 4, now)?;
    let delay = a.opt_seconds(2, "delay_s")?.map(secs_ms);
    let error = a.opt_text(3, "error")?.map(validate::clip_error);
    let state = ops::retry(conn, &queue, a.int(0, "job_id")?, &token, delay, error, now)?;
    Ok(Out::Text(state.as_str().into()))
}

fn fail(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let conn = c.conn;
    let now = c.now;
    a.count(3, 4)?;
    let (queue, token) = lease(a, conn, 0, 1, 3, now)?;
    let error = validate::clip_error(a.opt_text(2, "error")?.unwrap_or("failed"));
    ops::fail(conn, &queue, a.int(0, "job_id")?, &token, error, now)?;
    Ok(Out::Int(1))
}

fn heartbeat(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let conn = c.conn;
    let now = c.now;
    a.count(3, 4)?;
    let (queue, token) = lease(a, conn, 0, 1, 3, now)?;
    let extend = a
        .opt_seconds(2, "extend_s")?
        .unwrap_or(QueueOptions::default().lease.as_secs_f64());
    let ms = validate::lease(std::time::Duration::from_secs_f64(extend))?;
    Ok(Out::Int(ops::heartbeat(
        conn,
        &queue,
        a.int(0, "job_id")?,
        &token,
        ms,
        now,
    )?))
}

fn release(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let conn = c.conn;
    let now = c.now;
    a.count(2, 3)?;
    let (queue, token) = lease(a, conn, 0, 1, 2, now)?;
    let state = ops::release(conn, &queue, a.int(0, "job_id")?, &token, None, now)?;
    Ok(Out::Text(state.as_str().into()))
}

fn cancel(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let conn = c.conn;
    let now = c.now;
    a.count(1, 2)?;
    let id = validate::job_id(a.int(0, "job_id")?)?;
    let reason = if a.len() > 1 {
        a.opt_text(1, "reason")?
    } else {
        None
    };
    Ok(match ops::job_queue(conn, id)? {
        Some(queue) => Out::Int(i64::from(ops::cancel(
            conn,
            &queue,
            id,
            reason.map(validate::clip_error),
            now,
        )?)),
        // Acked (or pruned): already finished.
        None if ops::existed(conn, id)? => Out::Int(0),
        None => return Err(Error::not_found(format!("no job {id}"))),
    })
}

fn get_job(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let conn = c.conn;
    let now = c.now;
    let id = validate::job_id(a.int(0, "job_id")?)?;
    let info = match ops::job_queue(conn, id)? {
        Some(queue) => ops::get_job(conn, &queue, id, now)?,
        None => None,
    };
    Ok(match info {
        Some(info) => Out::Text(job_json(&info).to_string()),
        None => return Err(Error::not_found(format!("no job {id}"))),
    })
}

fn queue_stats(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let conn = c.conn;
    let now = c.now;
    let s = ops::stats(conn, a.name(0)?, now)?;
    Ok(Out::Text(
        json!({
            "ready": s.ready, "scheduled": s.scheduled, "running": s.running,
            "lapsed": s.lapsed, "dead": s.dead, "cancelled": s.cancelled,
            "expired": s.expired, "completed": s.completed,
            "oldest_ready_age_ms": s.oldest_ready_age_ms,
        })
        .to_string(),
    ))
}

fn requeue_dead(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let conn = c.conn;
    let now = c.now;
    a.count(1, 2)?;
    let id = if a.len() > 1 {
        a.opt_int(1, "job_id")?
    } else {
        None
    };
    let id = id.map(validate::job_id).transpose()?;
    Ok(Out::Int(
        ops::requeue_dead(conn, a.name(0)?, id, now)? as i64
    ))
}

fn purge_dead(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let conn = c.conn;
    let now = c.now;
    a.count(1, 2)?;
    let age = if a.len() > 1 {
        a.opt_seconds(1, "older_than_s")?
    } else {
        None
    };
    let before = age.map_or(i64::MAX, |s| now - secs_ms(s));
    Ok(Out::Int(ops::purge_dead(conn, a.name(0)?, before)? as i64))
}

/// The (queue, token) of the lease on job `id_at` held by the worker at
/// `worker_at`: fenced by the token at `token_at` when given, else "this
/// worker holds a live lease".
fn lease(
    a: &Args<'_>,
    conn: Conn<'_>,
    id_at: usize,
    worker_at: usize,
    token_at: usize,
    now: i64,
) -> Result<(String, String)> {
    let id = validate::job_id(a.int(id_at, "job_id")?)?;
    let worker = a.text(worker_at, "worker_id")?;
    let token = if a.len() > token_at {
        a.opt_text(token_at, "token")?
    } else {
        None
    };
    match token {
        Some(t) => ops::lease_by_token(conn, id, t),
        None => ops::lease_by_worker(conn, id, worker, now),
    }
}
