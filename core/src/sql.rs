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

use std::ffi::{c_int, c_void, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Duration;

use libsqlite3_sys as ffi;
use serde_json::{json, Value as Json};

use crate::clock::{Clock, SystemClock};
use crate::error::{Error, ErrorKind, Result};
use crate::options::QueueOptions;
use crate::payload::Payload;
use crate::queue::{ops, EnqueueOptions, JobInfo};
use crate::raw::{Conn, StmtCache, ValueRef};
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

/// Registers every honker SQL function on a rusqlite connection.
#[cfg(feature = "rusqlite")]
pub fn register(conn: &rusqlite::Connection, config: &SqlConfig) -> Result<()> {
    // SAFETY: the handle is open; without a cache the functions keep no
    // statements between calls, so the connection can close at any time.
    unsafe { register_handle(conn.handle(), config.clone(), None) }
}

/// Registers every honker SQL function on the raw connection `db` (what the
/// loadable extension does with the host's connection).
///
/// # Safety
/// `db` must be an open connection. With a `cache`, the cache must be cleared
/// before the connection is closed.
pub(crate) unsafe fn register_handle(
    db: *mut ffi::sqlite3,
    config: SqlConfig,
    cache: Option<Arc<StmtCache>>,
) -> Result<()> {
    for &(name, n_arg) in FUNCTIONS {
        let flags = if name == "honker_version" {
            ffi::SQLITE_UTF8 | ffi::SQLITE_INNOCUOUS | ffi::SQLITE_DETERMINISTIC
        } else {
            ffi::SQLITE_UTF8 | ffi::SQLITE_DIRECTONLY
        };
        let state = Box::new(FnState {
            name,
            config: config.clone(),
            cache: cache.clone(),
        });
        let c_name = CString::new(name).map_err(|_| Error::internal("function name"))?;
        // SAFETY: `db` is open (contract). Ownership of `state` passes to
        // SQLite, which calls `destroy` when the function is replaced, the
        // connection closes, or registration fails.
        let rc = unsafe {
            ffi::sqlite3_create_function_v2(
                db,
                c_name.as_ptr(),
                n_arg,
                flags,
                Box::into_raw(state).cast::<c_void>(),
                Some(x_func),
                None,
                None,
                Some(destroy),
            )
        };
        if rc != ffi::SQLITE_OK {
            return Err(crate::raw::sqlite_error(
                rc,
                format!("could not register {name}"),
            ));
        }
    }
    Ok(())
}

/// Registers the functions for the loadable extension. The host connection's
/// lifetime is the host's business, so no statements are cached.
///
/// # Safety
/// `db` must be an open connection of the SQLite library whose API the
/// calling crate reaches through libsqlite3-sys.
#[doc(hidden)]
pub unsafe fn register_extension(db: *mut ffi::sqlite3) -> Result<()> {
    // SAFETY: per the contract; no cache.
    unsafe { register_handle(db, SqlConfig::default(), None) }
}

/// One registered function: its name and what it needs.
struct FnState {
    name: &'static str,
    config: SqlConfig,
    cache: Option<Arc<StmtCache>>,
}

unsafe extern "C" fn destroy(p: *mut c_void) {
    // SAFETY: `p` came from `Box::into_raw` in `register_handle`; SQLite
    // calls this once.
    drop(unsafe { Box::from_raw(p.cast::<FnState>()) });
}

/// The value a function returns.
enum Out {
    Int(i64),
    Text(String),
}

unsafe extern "C" fn x_func(
    ctx: *mut ffi::sqlite3_context,
    argc: c_int,
    argv: *mut *mut ffi::sqlite3_value,
) {
    // SAFETY: SQLite passes the user data registered with the function, live
    // until `destroy`, and `argc` protected values valid for this call.
    let (state, db, args) = unsafe {
        let state = &*ffi::sqlite3_user_data(ctx).cast::<FnState>();
        let n = usize::try_from(argc).unwrap_or(0);
        let args: Vec<ValueRef<'_>> = (0..n).map(|i| ValueRef::value(*argv.add(i))).collect();
        (state, ffi::sqlite3_context_db_handle(ctx), args)
    };
    // A panic must not unwind into SQLite: it becomes an INTERNAL error.
    let result = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the host's connection is open and used by this thread for
        // the whole call; the cache (if any) belongs to it.
        let conn = unsafe { Conn::new(db, state.cache.as_deref()) };
        call(state, conn, &args)
    }))
    .unwrap_or_else(|_| Err(Error::internal(format!("{} panicked", state.name))));
    // SAFETY: `ctx` is valid for this call; results are copied (TRANSIENT).
    unsafe {
        match result {
            Ok(Out::Int(n)) => ffi::sqlite3_result_int64(ctx, n),
            Ok(Out::Text(t)) => match c_int::try_from(t.len()) {
                Ok(n) => {
                    ffi::sqlite3_result_text(ctx, t.as_ptr().cast(), n, ffi::SQLITE_TRANSIENT())
                }
                Err(_) => ffi::sqlite3_result_error_toobig(ctx),
            },
            Err(e) => {
                let msg = e.to_string();
                let n = c_int::try_from(msg.len()).unwrap_or(c_int::MAX);
                ffi::sqlite3_result_error(ctx, msg.as_ptr().cast(), n);
                // Keep SQLite's code where there is one (BUSY lets drivers
                // retry); the message set above stays.
                if let Some(code) = e.sqlite_code() {
                    ffi::sqlite3_result_error_code(ctx, code);
                } else if e.kind() == ErrorKind::Busy {
                    ffi::sqlite3_result_error_code(ctx, ffi::SQLITE_BUSY);
                }
            }
        }
    }
}

fn call(state: &FnState, conn: Conn<'_>, args: &[ValueRef<'_>]) -> Result<Out> {
    let name = state.name;
    if name == "honker_version" {
        return Ok(Out::Text(env!("CARGO_PKG_VERSION").into()));
    }
    let now = state.config.clock.now_ms();
    let a = Args { args, name };
    if name == "honker_bootstrap" {
        atomically(conn, || crate::schema::migrate_nested(conn, now))?;
        return Ok(Out::Int(crate::schema::LATEST));
    }
    atomically(conn, || dispatch(name, &a, conn, now, &state.config))
}

/// Runs `f` so that a failure part-way changes nothing:
/// - inside a write statement (a trigger, `INSERT ... SELECT honker_...`),
///   directly: the statement is already atomic, SQLite allows no savepoint
///   there, and the error this function raises rolls the statement back;
/// - inside the caller's transaction, in a savepoint, so it commits with it;
/// - otherwise in a `BEGIN IMMEDIATE` transaction of its own, which waits for
///   the write lock under the connection's busy timeout instead of failing
///   on a stale read snapshot.
fn atomically<T>(conn: Conn<'_>, f: impl FnOnce() -> Result<T>) -> Result<T> {
    if conn.write_statement_running() {
        return f();
    }
    if !conn.is_autocommit() {
        return conn.in_savepoint(f);
    }
    conn.execute_batch("BEGIN IMMEDIATE")?;
    match f() {
        Ok(v) => match conn.execute_batch("COMMIT") {
            Ok(()) => Ok(v),
            Err(e) => {
                let _ = conn.execute_batch("ROLLBACK");
                Err(e)
            }
        },
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}

fn dispatch(name: &str, a: &Args<'_>, conn: Conn<'_>, now: i64, config: &SqlConfig) -> Result<Out> {
    Ok(match name {
        "honker_enqueue" => {
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
            Out::Int(id)
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
            Out::Text(Json::Array(out).to_string())
        }
        "honker_ack" => {
            a.count(2, 3)?;
            let (queue, token) = a.lease(conn, 0, 1, 2, now)?;
            ops::ack(conn, &queue, a.int(0, "job_id")?, &token, None, false, now)?;
            Out::Int(1)
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
            Out::Int(acked)
        }
        "honker_retry" => {
            a.count(4, 5)?;
            let (queue, token) = a.lease(conn, 0, 1, 4, now)?;
            let delay = a.opt_seconds(2, "delay_s")?.map(secs_ms);
            let error = a.opt_text(3, "error")?.map(validate::clip_error);
            let state = ops::retry(conn, &queue, a.int(0, "job_id")?, &token, delay, error, now)?;
            Out::Text(state.as_str().into())
        }
        "honker_fail" => {
            a.count(3, 4)?;
            let (queue, token) = a.lease(conn, 0, 1, 3, now)?;
            let error = validate::clip_error(a.opt_text(2, "error")?.unwrap_or("failed"));
            ops::fail(conn, &queue, a.int(0, "job_id")?, &token, error, now)?;
            Out::Int(1)
        }
        "honker_heartbeat" => {
            a.count(3, 4)?;
            let (queue, token) = a.lease(conn, 0, 1, 3, now)?;
            let extend = a
                .opt_seconds(2, "extend_s")?
                .unwrap_or(QueueOptions::default().lease.as_secs_f64());
            let ms = validate::lease(std::time::Duration::from_secs_f64(extend))?;
            Out::Int(ops::heartbeat(
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
            Out::Text(state.as_str().into())
        }
        "honker_cancel" => {
            a.count(1, 2)?;
            let id = validate::job_id(a.int(0, "job_id")?)?;
            let reason = if a.len() > 1 {
                a.opt_text(1, "reason")?
            } else {
                None
            };
            match ops::job_queue(conn, id)? {
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
            }
        }
        "honker_get_job" => {
            let id = validate::job_id(a.int(0, "job_id")?)?;
            let info = match ops::job_queue(conn, id)? {
                Some(queue) => ops::get_job(conn, &queue, id, now)?,
                None => None,
            };
            match info {
                Some(info) => Out::Text(job_json(&info).to_string()),
                None => return Err(Error::not_found(format!("no job {id}"))),
            }
        }
        "honker_queue_stats" => {
            let s = ops::stats(conn, a.name(0)?, now)?;
            Out::Text(
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
            let id = if a.len() > 1 {
                a.opt_int(1, "job_id")?
            } else {
                None
            };
            let id = id.map(validate::job_id).transpose()?;
            Out::Int(ops::requeue_dead(conn, a.name(0)?, id, now)? as i64)
        }
        "honker_purge_dead" => {
            a.count(1, 2)?;
            let age = if a.len() > 1 {
                a.opt_seconds(1, "older_than_s")?
            } else {
                None
            };
            let before = age.map_or(i64::MAX, |s| now - secs_ms(s));
            Out::Int(ops::purge_dead(conn, a.name(0)?, before)? as i64)
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
    args: &'a [ValueRef<'a>],
    name: &'a str,
}

impl Args<'_> {
    fn len(&self) -> usize {
        self.args.len()
    }

    fn count(&self, min: usize, max: usize) -> Result<()> {
        let n = self.len();
        if n < min || n > max {
            return Err(Error::invalid(format!(
                "{} takes {min} to {max} arguments, got {n}",
                self.name
            )));
        }
        Ok(())
    }

    fn raw(&self, i: usize) -> ValueRef<'_> {
        self.args.get(i).copied().unwrap_or(ValueRef::Null)
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
        conn: Conn<'_>,
        id_at: usize,
        worker_at: usize,
        token_at: usize,
        now: i64,
    ) -> Result<(String, String)> {
        let id = validate::job_id(self.int(id_at, "job_id")?)?;
        let worker = self.text(worker_at, "worker_id")?;
        let token = if self.len() > token_at {
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
