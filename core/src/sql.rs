//! The SQL surface: honker's queue as SQL functions, registered on honker's
//! own connections (so `tx.execute("SELECT honker_enqueue(...)")` works) and,
//! by the loadable extension, on any SQLite connection. One implementation:
//! every function converts its arguments and calls the same `queue::ops` as
//! the Rust API.
//!
//! Conventions (the established Honker SQL API): times are given in seconds
//! (fractions allowed) and returned as INTEGER milliseconds since the Unix
//! epoch, as stored; errors are raised with the stable code first
//! (`LEASE_LOST: ...`). Every function that writes is `SQLITE_DIRECTONLY`, so
//! a view or trigger inside a hostile database file cannot call it; pure ones
//! are `SQLITE_INNOCUOUS`. Registering performs no DDL: `honker_bootstrap()`
//! does.
//!
//! A function that writes does its work in a savepoint of the connection it
//! runs on: inside the caller's transaction it commits with it; outside one it
//! commits on its own.

use std::sync::Arc;
use std::time::Duration;

use rusqlite::functions::{Context, FunctionFlags};
use rusqlite::types::ValueRef;
use rusqlite::Connection;
use serde_json::{json, Value as Json};

use crate::clock::{Clock, SystemClock};
use crate::error::{Error, ErrorKind, Result};
use crate::options::QueueOptions;
use crate::payload::Payload;
use crate::queue::{ops, EnqueueOptions, JobInfo};
use crate::validate;

/// What the functions need from their host.
#[derive(Clone, Debug)]
pub struct SqlConfig {
    /// Time source. Defaults to the system clock.
    pub clock: Arc<dyn Clock>,
    /// Largest payload accepted. Defaults to 1 MiB.
    pub max_payload_bytes: usize,
}

impl Default for SqlConfig {
    fn default() -> SqlConfig {
        SqlConfig {
            clock: Arc::new(SystemClock),
            max_payload_bytes: 1 << 20,
        }
    }
}

/// The functions, with their argument counts (-1: variable).
pub const FUNCTIONS: &[(&str, i32)] = &[
    ("honker_version", 0),
    ("honker_bootstrap", 0),
    ("honker_enqueue", -1),
    ("honker_claim_batch", 4),
    ("honker_ack", -1),
    ("honker_ack_batch", 2),
    ("honker_retry", -1),
    ("honker_fail", -1),
    ("honker_heartbeat", -1),
    ("honker_release", -1),
    ("honker_cancel", -1),
    ("honker_get_job", 1),
    ("honker_queue_stats", 1),
    ("honker_requeue_dead", -1),
    ("honker_purge_dead", -1),
];

/// Registers every honker SQL function on `conn`.
pub fn register(conn: &Connection, config: &SqlConfig) -> Result<()> {
    let pure = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_INNOCUOUS;
    let writes = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DIRECTONLY;
    conn.create_scalar_function(
        "honker_version",
        0,
        pure | FunctionFlags::SQLITE_DETERMINISTIC,
        |_| Ok(env!("CARGO_PKG_VERSION")),
    )?;
    for &(name, n_arg) in FUNCTIONS.iter().filter(|(n, _)| *n != "honker_version") {
        let config = config.clone();
        conn.create_scalar_function(name, n_arg, writes, move |ctx| {
            call(name, ctx, &config).map_err(|e| rusqlite::Error::UserFunctionError(Box::new(e)))
        })?;
    }
    Ok(())
}

fn call(name: &str, ctx: &Context<'_>, config: &SqlConfig) -> Result<rusqlite::types::Value> {
    // SAFETY: the connection reference does not outlive this call and is
    // used only on this thread, inside the function's own invocation.
    let conn = unsafe { ctx.get_connection() }?;
    let now = config.clock.now_ms();
    let args = Args { ctx, name };
    if name == "honker_bootstrap" {
        crate::schema::migrate_nested(&conn, now)?;
        return Ok(crate::schema::LATEST.into());
    }
    in_savepoint(&conn, |conn| dispatch(name, &args, conn, now, config))
}

/// Runs `f` in a savepoint, so a failure part-way changes nothing. Inside a
/// write statement (a trigger) SQLite allows no savepoint (it reports BUSY,
/// the only reason SAVEPOINT can fail so, as it takes no lock); there the
/// enclosing statement is already atomic, and the error this function raises
/// rolls it back whole.
fn in_savepoint<T>(conn: &Connection, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
    match conn.execute_batch("SAVEPOINT honker_nested") {
        Ok(()) => crate::connection::finish_savepoint(conn, f(conn)),
        Err(e) if crate::error::is_busy(&e) => f(conn),
        Err(e) => Err(e.into()),
    }
}

fn dispatch(
    name: &str,
    a: &Args<'_>,
    conn: &Connection,
    now: i64,
    config: &SqlConfig,
) -> Result<rusqlite::types::Value> {
    use rusqlite::types::Value as V;
    Ok(match name {
        "honker_enqueue" => {
            a.count(7, 8)?;
            let queue = a.name(0)?;
            let payload = a.payload(1)?;
            payload.validate(config.max_payload_bytes)?;
            let priority = a.opt_int(4, "priority")?.unwrap_or(0);
            let dedupe = if a.ctx.len() > 7 {
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
            V::Integer(id)
        }
        "honker_claim_batch" => {
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
            V::Text(Json::Array(out).to_string())
        }
        "honker_ack" => {
            a.count(2, 3)?;
            let (queue, token) = a.lease(conn, 0, 1, 2, now)?;
            ops::ack(conn, &queue, a.int(0, "job_id")?, &token, None, false, now)?;
            V::Integer(1)
        }
        "honker_ack_batch" => {
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
            V::Integer(acked)
        }
        "honker_retry" => {
            a.count(4, 5)?;
            let (queue, token) = a.lease(conn, 0, 1, 4, now)?;
            let delay = a.opt_seconds(2, "delay_s")?.map(secs_ms);
            let error = a.opt_text(3, "error")?.map(validate::clip_error);
            let state = ops::retry(conn, &queue, a.int(0, "job_id")?, &token, delay, error, now)?;
            V::Text(state.as_str().into())
        }
        "honker_fail" => {
            a.count(3, 4)?;
            let (queue, token) = a.lease(conn, 0, 1, 3, now)?;
            let error = validate::clip_error(a.opt_text(2, "error")?.unwrap_or("failed"));
            ops::fail(conn, &queue, a.int(0, "job_id")?, &token, error, now)?;
            V::Integer(1)
        }
        "honker_heartbeat" => {
            a.count(3, 4)?;
            let (queue, token) = a.lease(conn, 0, 1, 3, now)?;
            let extend = a
                .opt_seconds(2, "extend_s")?
                .unwrap_or(QueueOptions::default().lease.as_secs_f64());
            let ms = validate::lease(std::time::Duration::from_secs_f64(extend))?;
            V::Integer(ops::heartbeat(
                conn,
                &queue,
                a.int(0, "job_id")?,
                &token,
                ms,
                now,
            )?)
        }
        "honker_release" => {
            a.count(2, 3)?;
            let (queue, token) = a.lease(conn, 0, 1, 2, now)?;
            let state = ops::release(conn, &queue, a.int(0, "job_id")?, &token, None, now)?;
            V::Text(state.as_str().into())
        }
        "honker_cancel" => {
            a.count(1, 2)?;
            let id = validate::job_id(a.int(0, "job_id")?)?;
            let reason = if a.ctx.len() > 1 {
                a.opt_text(1, "reason")?
            } else {
                None
            };
            match ops::job_queue(conn, id)? {
                Some(queue) => V::Integer(i64::from(ops::cancel(
                    conn,
                    &queue,
                    id,
                    reason.map(validate::clip_error),
                    now,
                )?)),
                // Acked (or pruned): already finished.
                None if ops::existed(conn, id)? => V::Integer(0),
                None => return Err(Error::not_found(format!("no job {id}"))),
            }
        }
        "honker_get_job" => {
            let id = validate::job_id(a.int(0, "job_id")?)?;
            let info = match ops::job_queue(conn, id)? {
                Some(queue) => ops::get_job(conn, &queue, id, now)?,
                None => None,
            };
            match info {
                Some(info) => V::Text(job_json(&info).to_string()),
                None => return Err(Error::not_found(format!("no job {id}"))),
            }
        }
        "honker_queue_stats" => {
            let s = ops::stats(conn, a.name(0)?, now)?;
            V::Text(
                json!({
                    "ready": s.ready, "scheduled": s.scheduled, "running": s.running,
                    "lapsed": s.lapsed, "dead": s.dead, "cancelled": s.cancelled,
                    "expired": s.expired, "completed": s.completed,
                    "oldest_ready_age_ms": s.oldest_ready_age_ms,
                })
                .to_string(),
            )
        }
        "honker_requeue_dead" => {
            a.count(1, 2)?;
            let id = if a.ctx.len() > 1 {
                a.opt_int(1, "job_id")?
            } else {
                None
            };
            let id = id.map(validate::job_id).transpose()?;
            V::Integer(ops::requeue_dead(conn, a.name(0)?, id, now)? as i64)
        }
        "honker_purge_dead" => {
            a.count(1, 2)?;
            let age = if a.ctx.len() > 1 {
                a.opt_seconds(1, "older_than_s")?
            } else {
                None
            };
            let before = age.map_or(i64::MAX, |s| now - secs_ms(s));
            V::Integer(ops::purge_dead(conn, a.name(0)?, before)? as i64)
        }
        other => return Err(Error::internal(format!("unknown function {other}"))),
    })
}

fn secs_ms(s: f64) -> i64 {
    (s * 1000.0).round() as i64
}

fn payload_json(p: &Payload) -> Json {
    match p {
        Payload::Json(t) => serde_json::from_str(t).unwrap_or(Json::Null),
        Payload::Bytes(b) => {
            json!({ "bytes_hex": b.iter().map(|x| format!("{x:02x}")).collect::<String>() })
        }
    }
}

fn job_json(j: &JobInfo) -> Json {
    json!({
        "id": j.id, "queue": j.queue, "state": j.state.as_str(), "payload": payload_json(&j.payload),
        "priority": j.priority, "run_at": j.run_at, "attempts": j.attempts,
        "max_attempts": j.max_attempts, "dedupe_key": j.dedupe_key, "expires_at": j.expires_at,
        "created_at": j.created_at, "worker_id": j.worker_id, "last_error": j.last_error,
        "lease_expires_at": j.lease_expires_at, "finished_at": j.finished_at,
    })
}

/// Argument access with coded errors naming the function and argument.
struct Args<'a> {
    ctx: &'a Context<'a>,
    name: &'a str,
}

impl Args<'_> {
    fn count(&self, min: usize, max: usize) -> Result<()> {
        let n = self.ctx.len();
        if n < min || n > max {
            return Err(Error::invalid(format!(
                "{} takes {min} to {max} arguments, got {n}",
                self.name
            )));
        }
        Ok(())
    }

    fn raw(&self, i: usize) -> ValueRef<'_> {
        self.ctx.get_raw(i)
    }

    fn text(&self, i: usize, what: &str) -> Result<&str> {
        self.opt_text(i, what)?
            .ok_or_else(|| Error::invalid(format!("{}: {what} must not be NULL", self.name)))
    }

    fn opt_text(&self, i: usize, what: &str) -> Result<Option<&str>> {
        match self.raw(i) {
            ValueRef::Null => Ok(None),
            ValueRef::Text(t) => std::str::from_utf8(t)
                .map(Some)
                .map_err(|_| Error::invalid(format!("{}: {what} is not UTF-8", self.name))),
            _ => Err(Error::invalid(format!(
                "{}: {what} must be text",
                self.name
            ))),
        }
    }

    fn name(&self, i: usize) -> Result<&str> {
        let q = self.text(i, "queue")?;
        validate::name("queue", q)?;
        Ok(q)
    }

    fn payload(&self, i: usize) -> Result<Payload> {
        match self.raw(i) {
            ValueRef::Text(t) => std::str::from_utf8(t)
                .map(|s| Payload::Json(s.to_owned()))
                .map_err(|_| Error::invalid("payload is not UTF-8")),
            ValueRef::Blob(b) => Ok(Payload::Bytes(b.to_vec())),
            ValueRef::Null => Err(Error::invalid(format!(
                "{}: payload must not be NULL",
                self.name
            ))),
            _ => Err(Error::invalid(format!(
                "{}: payload must be JSON text or a BLOB",
                self.name
            ))),
        }
    }

    fn opt_int(&self, i: usize, what: &str) -> Result<Option<i64>> {
        match self.raw(i) {
            ValueRef::Null => Ok(None),
            ValueRef::Integer(n) => Ok(Some(n)),
            _ => Err(Error::invalid(format!(
                "{}: {what} must be an integer",
                self.name
            ))),
        }
    }

    fn int(&self, i: usize, what: &str) -> Result<i64> {
        self.opt_int(i, what)?
            .ok_or_else(|| Error::invalid(format!("{}: {what} must not be NULL", self.name)))
    }

    fn opt_seconds(&self, i: usize, what: &str) -> Result<Option<f64>> {
        let s = match self.raw(i) {
            ValueRef::Null => return Ok(None),
            ValueRef::Integer(n) => n as f64,
            ValueRef::Real(f) => f,
            _ => {
                return Err(Error::invalid(format!(
                    "{}: {what} must be a number of seconds",
                    self.name
                )))
            }
        };
        validate::seconds(what, s)?;
        Ok(Some(s))
    }

    /// The (queue, token) of the lease on job `id_at` held by the worker at
    /// `worker_at`: fenced by the token at `token_at` when given, else "this
    /// worker holds a live lease".
    fn lease(
        &self,
        conn: &Connection,
        id_at: usize,
        worker_at: usize,
        token_at: usize,
        now: i64,
    ) -> Result<(String, String)> {
        let id = validate::job_id(self.int(id_at, "job_id")?)?;
        let worker = self.text(worker_at, "worker_id")?;
        let token = if self.ctx.len() > token_at {
            self.opt_text(token_at, "token")?
        } else {
            None
        };
        match token {
            Some(t) => ops::lease_by_token(conn, id, t),
            None => ops::lease_by_worker(conn, id, worker, now),
        }
    }
}
