//! The Rust surface of tests-interop: reads one JSON step per line on stdin,
//! runs it with the `honker` crate, and answers one JSON line on stdout:
//! `{"ok": result}` or `{"error": CODE, "message": ...}`. The step vocabulary
//! is documented in tests-interop/README.md; every driver implements it.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::time::Duration;

use honker::stream::group::GroupOptions;
use honker::stream::Start;
use honker::surface::FromJsonOptions as _;
use honker::{
    ClaimOptions, Database, EnqueueOptions, ErrorKind, Lease, Payload, QueueSettings, RetryOptions,
    Transaction, Value,
};
use serde_json::{json, Value as Json};

struct Driver {
    db: Option<Database>,
    tx: Option<Transaction>,
    listeners: HashMap<String, honker::runtime::Listener>,
}

type Out = Result<Json, honker::Error>;

fn unsupported(what: &str) -> honker::Error {
    honker::Error::new(ErrorKind::InvalidArgument, format!("UNSUPPORTED {what}"))
}

fn s<'a>(step: &'a Json, key: &str) -> &'a str {
    step[key].as_str().unwrap_or_default()
}

/// A duration in ms. A negative one cannot be expressed in Rust (Duration
/// is unsigned): the step is reported unsupported rather than run without it.
fn ms(step: &Json, key: &str) -> honker::Result<Option<Duration>> {
    match &step[key] {
        Json::Null => Ok(None),
        v => match v.as_u64() {
            Some(n) => Ok(Some(Duration::from_millis(n))),
            None => Err(unsupported(&format!(
                "{key} {v}: a Rust Duration is never negative"
            ))),
        },
    }
}

fn lease(step: &Json) -> Lease {
    Lease {
        job_id: step["id"].as_i64().unwrap_or(0),
        token: s(step, "token").to_owned(),
    }
}

fn sql_params(step: &Json) -> Vec<Value> {
    step["params"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|v| match v {
                    Json::Null => Value::Null,
                    Json::Bool(b) => Value::Integer(i64::from(*b)),
                    Json::Number(n) => n
                        .as_i64()
                        .map(Value::Integer)
                        .unwrap_or_else(|| Value::Real(n.as_f64().unwrap_or(0.0))),
                    Json::String(t) => Value::Text(t.clone()),
                    other => Value::Text(other.to_string()),
                })
                .collect()
        })
        .unwrap_or_default()
}

fn value_json(v: &Value) -> Json {
    match v {
        Value::Null => Json::Null,
        Value::Integer(i) => json!(i),
        Value::Real(f) => json!(f),
        Value::Text(t) => json!(t),
        Value::Blob(b) => json!(b),
    }
}

impl Driver {
    fn db(&self) -> Result<&Database, honker::Error> {
        self.db
            .as_ref()
            .ok_or_else(|| honker::Error::new(ErrorKind::InvalidArgument, "open first"))
    }

    fn queue(&self, step: &Json) -> Result<honker::Queue, honker::Error> {
        let name = s(step, "queue");
        // The step's backoff over the queue's stored settings, as every
        // surface's handle takes it.
        let given = QueueSettings {
            backoff_base: ms(step, "backoff_base_ms")?,
            backoff_jitter: step["backoff_jitter"].as_f64(),
            ..QueueSettings::default()
        };
        self.db()?.queue_given(name, &given)
    }

    fn tx(&self, step: &Json) -> Option<&Transaction> {
        if step["in_tx"].as_bool() == Some(true) {
            self.tx.as_ref()
        } else {
            None
        }
    }

    fn events(&mut self, step: &Json) -> Out {
        let wait = ms(step, "wait_ms")?.unwrap_or(Duration::from_secs(1));
        let n = step["n"].as_u64().unwrap_or(1) as usize;
        match s(step, "op") {
            "publish" => {
                let stream = self.db()?.stream(s(step, "stream"))?;
                let o = match step.get("options") {
                    Some(o) => honker::stream::PublishOptions::from_json_options(
                        "publish",
                        &o.to_string(),
                    )?,
                    None => Default::default(),
                };
                let payload = Payload::from(&step["payload"]);
                let offset = match self.tx(step) {
                    Some(tx) => stream.publish_tx(tx, payload, &o)?,
                    None => stream.publish(payload, &o)?,
                };
                Ok(json!(offset))
            }
            "consume" => {
                let stream = self.db()?.stream(s(step, "stream"))?;
                let sub = honker::runtime::Subscription::new(
                    &stream,
                    s(step, "consumer"),
                    honker::stream::Start::Beginning,
                    100,
                    None,
                )?;
                let mut got = Vec::new();
                while got.len() < n {
                    match sub.next(wait)? {
                        Some(e) => got.push(e),
                        None => break,
                    }
                }
                if let Some(last) = got.last() {
                    sub.commit(last)?;
                }
                sub.close()?;
                Ok(Json::Array(
                    got.iter()
                        .map(|e| {
                            json!({"offset": e.offset,
                                   "payload": e.payload.as_json().unwrap_or(Json::Null)})
                        })
                        .collect(),
                ))
            }
            "stream_read" => {
                let events = self.db()?.stream(s(step, "stream"))?.read(0, 100)?;
                Ok(json!(events
                    .iter()
                    .map(|e| json!({"offset": e.offset, "key": e.key, "priority": e.priority}))
                    .collect::<Vec<_>>()))
            }
            "stream_info" => {
                let i = self.db()?.stream(s(step, "stream"))?.info()?;
                let lag: serde_json::Map<String, Json> = i
                    .consumers
                    .iter()
                    .map(|c| (c.consumer.clone(), json!(c.lag)))
                    .collect();
                Ok(json!({"length": i.length, "last_offset": i.last_offset, "lag": lag}))
            }
            "notify" => {
                let (db, channel) = (self.db()?, s(step, "channel"));
                let payload = Payload::from(&step["payload"]);
                let id = match self.tx(step) {
                    Some(tx) => db.notify_tx(tx, channel, payload)?,
                    None => db.notify(channel, payload)?,
                };
                Ok(json!(id))
            }
            "listen" => {
                let l = self.db()?.listen(s(step, "channel"))?;
                self.listeners.insert(s(step, "channel").to_owned(), l);
                Ok(Json::Null)
            }
            _ => {
                let l = self.listeners.get(s(step, "channel")).ok_or_else(|| {
                    honker::Error::new(ErrorKind::InvalidArgument, "listen first")
                })?;
                let mut heard = Vec::new();
                while heard.len() < n {
                    match l.next(wait)? {
                        Some(m) => heard.push(m.payload.as_json().unwrap_or(Json::Null)),
                        None => break,
                    }
                }
                Ok(Json::Array(heard))
            }
        }
    }

    fn group(&mut self, step: &Json) -> Out {
        let g = self
            .db()?
            .stream(s(step, "stream"))?
            .group(s(step, "group"))?;
        let lease = || (step["offset"].as_i64().unwrap_or(0), s(step, "token"));
        match s(step, "op") {
            "group_create" => {
                let d = GroupOptions::default();
                let o = GroupOptions {
                    max_deliveries: step["max_deliveries"]
                        .as_u64()
                        .map_or(d.max_deliveries, |n| n as u32),
                    lease: ms(step, "lease_ms")?.unwrap_or(d.lease),
                    ..d
                };
                Ok(json!(g.create(Start::Beginning, &o)?))
            }
            "group_claim" => {
                let n = honker::validate::batch(step["n"].as_i64().unwrap_or(1))?;
                let c = g.claim_wait(
                    s(step, "member"),
                    n,
                    ms(step, "lease_ms")?,
                    ms(step, "wait_ms")?.unwrap_or_default(),
                )?;
                Ok(json!(c
                    .events
                    .iter()
                    .map(|e| json!({
                        "offset": e.offset,
                        "key": e.key,
                        "deliveries": e.deliveries,
                        "token": e.token,
                        "payload": e.payload.as_json().unwrap_or(Json::Null),
                    }))
                    .collect::<Vec<_>>()))
            }
            "group_ack" => {
                match self.tx(step) {
                    Some(tx) => g.ack_tx(tx, &lease())?,
                    None => g.ack(&lease())?,
                }
                Ok(Json::Null)
            }
            "group_retry" => Ok(json!(g.retry(&lease(), None, step["error"].as_str())?)),
            "group_fail" => {
                g.fail(&lease(), s(step, "error"))?;
                Ok(Json::Null)
            }
            "group_release" => {
                g.release(&lease())?;
                Ok(Json::Null)
            }
            "group_heartbeat" => {
                g.heartbeat(&lease(), None)?;
                Ok(Json::Null)
            }
            "group_remove_member" => Ok(json!(
                g.remove_member(s(step, "member"), step["force"].as_bool().unwrap_or(false))?
            )),
            "group_info" => {
                let i = g.info()?;
                let members: serde_json::Map<String, Json> = i
                    .members
                    .iter()
                    .map(|m| (m.member.clone(), json!(m.holds)))
                    .collect();
                Ok(json!({
                    "next_offset": i.next_offset,
                    "lag": i.lag,
                    "pending": i.pending,
                    "delivered": i.delivered,
                    "dead": i.dead,
                    "members": members,
                }))
            }
            op => Err(honker::Error::new(
                ErrorKind::InvalidArgument,
                format!("not a group op: {op}"),
            )),
        }
    }

    fn locks(&mut self, step: &Json) -> Out {
        let db = self.db()?.clone();
        match s(step, "op") {
            "lock_acquire" => {
                let lock = db.lock(s(step, "name"))?;
                let ttl = ms(step, "ttl_ms")?.unwrap_or_default();
                let wait = ms(step, "wait_ms")?.unwrap_or_default();
                let g = match self.tx(step) {
                    Some(tx) => lock.try_acquire_tx(tx, s(step, "owner"), ttl)?,
                    None => lock.acquire(s(step, "owner"), ttl, wait)?,
                };
                Ok(g.map_or(Json::Null, |g| json!({"token": g.token})))
            }
            "lock_renew" => {
                let lock = db.lock(s(step, "name"))?;
                let ttl = ms(step, "ttl_ms")?.unwrap_or_default();
                lock.renew(step["token"].as_i64().unwrap_or(0), ttl)?;
                Ok(Json::Null)
            }
            "lock_release" => {
                let lock = db.lock(s(step, "name"))?;
                Ok(json!(lock.release(step["token"].as_i64().unwrap_or(0))?))
            }
            "lock_fence" => {
                let lock = db.lock(s(step, "name"))?;
                let tx = self.tx.as_ref().ok_or_else(|| {
                    honker::Error::new(ErrorKind::InvalidArgument, "lock_fence needs begin")
                })?;
                lock.fence(tx, step["token"].as_i64().unwrap_or(0))?;
                Ok(Json::Null)
            }
            "lock_info" => {
                let i = db.lock(s(step, "name"))?.info()?;
                Ok(i.map_or(Json::Null, |i| json!({"owner": i.owner, "token": i.token})))
            }
            "rate_limit_set" => {
                let rl = honker::rate::RateLimit {
                    limit: step["limit"].as_i64().unwrap_or(0),
                    per: ms(step, "per_ms")?.unwrap_or_default(),
                    burst: step["burst"].as_i64().unwrap_or(1),
                };
                if step["update"].as_bool() == Some(false) {
                    db.rate_limiter(s(step, "name"), rl)?;
                } else {
                    db.rate_limiter_update(s(step, "name"), rl)?;
                }
                Ok(Json::Null)
            }
            "rate_limit_params" => match db.rate_limiter_stored(s(step, "name")) {
                Ok(rl) => {
                    let p = rl.limit()?;
                    let per_ms = p.per.as_millis() as u64;
                    Ok(json!({"limit": p.limit, "per_ms": per_ms, "burst": p.burst}))
                }
                Err(e) if e.kind() == ErrorKind::NotFound => Ok(Json::Null),
                Err(e) => Err(e),
            },
            "rate_limit_try" => {
                let rl = db.rate_limiter_stored(s(step, "name"))?;
                let (key, cost) = (s(step, "key"), step["cost"].as_i64().unwrap_or(1));
                let d = match self.tx(step) {
                    Some(tx) => rl.try_acquire_tx(tx, key, cost)?,
                    None => rl.try_acquire(key, cost)?,
                };
                Ok(json!({
                    "allowed": d.allowed,
                    "remaining": d.remaining,
                    "retry_after_ms": d.retry_after.as_micros().div_ceil(1000) as u64,
                }))
            }
            op => Err(honker::Error::new(
                ErrorKind::InvalidArgument,
                format!("not a lock or rate limit op: {op}"),
            )),
        }
    }

    fn schedules(&mut self, step: &Json) -> Out {
        let sched = self.db()?.scheduler();
        let name = s(step, "name");
        match s(step, "op") {
            "schedule_add" => {
                let mut def =
                    honker::schedule::Schedule::cron(name, s(step, "schedule"), s(step, "queue"))
                        .payload(Payload::from(&step["payload"]));
                if let Some(tz) = step["time_zone"].as_str() {
                    def.time_zone = tz.into();
                }
                Ok(json!(sched.add(&def)?))
            }
            "schedule_info" => Ok(sched.get(name)?.map_or(Json::Null, |i| {
                json!({
                    "time_zone": i.schedule.time_zone,
                    "day_rule": i.schedule.day_rule.as_str(),
                    "fires": i.fires,
                    "missed": i.missed,
                })
            })),
            "schedule_run" => {
                // Core's runner, one next() at a time: it stops as soon as
                // the schedule has fired enough.
                let runner = honker::runtime::ScheduleRunner::new(sched.database());
                let wait = ms(step, "wait_ms")?.unwrap_or_default();
                let deadline = std::time::Instant::now() + wait;
                let want = step["fires"].as_u64().unwrap_or(0);
                loop {
                    let fires = sched.get(name)?.map_or(0, |i| i.fires);
                    if fires >= want || std::time::Instant::now() > deadline {
                        return Ok(json!({ "fires": fires, "reached": fires >= want }));
                    }
                    runner.next(std::time::Duration::from_millis(500))?;
                }
            }
            op => Err(honker::Error::new(
                ErrorKind::InvalidArgument,
                format!("not a schedule op: {op}"),
            )),
        }
    }

    fn run(&mut self, step: &Json) -> Out {
        match s(step, "op") {
            "schedule_add" | "schedule_info" | "schedule_run" => self.schedules(step),
            "group_create"
            | "group_claim"
            | "group_ack"
            | "group_retry"
            | "group_fail"
            | "group_release"
            | "group_heartbeat"
            | "group_remove_member"
            | "group_info" => self.group(step),
            "lock_acquire" | "lock_release" | "lock_renew" | "lock_fence" | "lock_info"
            | "rate_limit_set" | "rate_limit_params" | "rate_limit_try" => self.locks(step),
            "open" => {
                self.tx = None;
                self.db = Some(Database::open(s(step, "path"))?);
                Ok(Json::Null)
            }
            "close" => {
                self.tx = None;
                if let Some(db) = self.db.take() {
                    db.close()?;
                }
                Ok(Json::Null)
            }
            "begin" => {
                self.tx = Some(self.db()?.transaction()?);
                Ok(Json::Null)
            }
            "commit" => {
                self.tx.take().map(Transaction::commit).transpose()?;
                Ok(Json::Null)
            }
            "rollback" => {
                self.tx.take().map(Transaction::rollback).transpose()?;
                Ok(Json::Null)
            }
            "exec" => {
                let params = sql_params(step);
                let p = honker::rusqlite::params_from_iter(params.iter());
                let rows = match &self.tx {
                    Some(tx) => tx.query(s(step, "sql"), p)?,
                    None => {
                        self.db()?.execute(s(step, "sql"), p)?;
                        return Ok(Json::Null);
                    }
                };
                Ok(json!(rows
                    .rows
                    .iter()
                    .map(|r| r.iter().map(value_json).collect::<Vec<_>>())
                    .collect::<Vec<_>>()))
            }
            "publish" | "consume" | "stream_info" | "stream_read" | "notify" | "listen"
            | "heard" => self.events(step),
            "pause" => {
                let options = honker::PauseOptions {
                    note: step["note"].as_str().map(str::to_owned),
                };
                match step["all"].as_bool() {
                    Some(true) => self.db()?.pause_all(&options)?,
                    _ => self.queue(step)?.pause(&options)?,
                }
                Ok(Json::Null)
            }
            "resume" => Ok(json!(match step["all"].as_bool() {
                Some(true) => self.db()?.resume_all()?,
                _ => self.queue(step)?.resume()?,
            })),
            "limit_concurrency" => {
                let cap = |k: &str| step[k].as_u64().map(|n| n as u32);
                self.queue(step)?.limit_concurrency(&honker::Concurrency {
                    max_running: cap("max_running"),
                    max_running_per_key: cap("max_running_per_key"),
                })?;
                Ok(Json::Null)
            }
            "set_fairness" => {
                let count = |k: &str| step[k].as_u64().map(|n| n as u32);
                self.queue(step)?.set_fairness(&honker::Fairness {
                    order: step["order"].as_str().map(str::to_owned),
                    key_limit: count("key_limit"),
                    key_per: step["key_per_ms"].as_u64().map(Duration::from_millis),
                    key_burst: count("key_burst"),
                })?;
                Ok(Json::Null)
            }
            "configure" => {
                let name = s(step, "queue");
                self.db()?.queue(name)?.configure(&settings(step)?)?;
                Ok(Json::Null)
            }
            "enqueue" => {
                let q = self.queue(step)?;
                let options = EnqueueOptions {
                    delay: ms(step, "delay_ms")?,
                    priority: step["priority"].as_i64().unwrap_or(0) as i32,
                    max_attempts: step["max_attempts"].as_u64().map(|n| n as u32),
                    dedupe_key: step["dedupe_key"].as_str().map(str::to_owned),
                    dedupe_by_payload: step["dedupe_by_payload"].as_bool().unwrap_or(false),
                    unique: step["unique"].as_str().map(str::to_owned),
                    unique_for: ms(step, "unique_for_ms")?,
                    concurrency_key: step["concurrency_key"].as_str().map(str::to_owned),
                    ..EnqueueOptions::default()
                };
                let payload = Payload::from(&step["payload"]);
                let e = match self.tx(step) {
                    Some(tx) => q.enqueue_tx(tx, payload, &options)?,
                    None => q.enqueue(payload, &options)?,
                };
                let unique = e.unique.map(honker::UniqueMode::as_str);
                Ok(json!({"id": e.id, "existing": e.existing, "unique": unique}))
            }
            "enqueue_traced" => {
                // Rust has no ambient trace context: the producer gives it.
                let q = self.queue(step)?;
                let options = EnqueueOptions {
                    trace_context: honker::TraceContext::from_headers(
                        step["traceparent"].as_str(),
                        step["tracestate"].as_str(),
                    )?,
                    ..EnqueueOptions::default()
                };
                let e = q.enqueue(Payload::from(&step["payload"]), &options)?;
                Ok(json!({"id": e.id}))
            }
            "claim" => {
                let q = self.queue(step)?;
                let n = honker::validate::batch(step["n"].as_i64().unwrap_or(1))?;
                let jobs = q.claim_with(
                    s(step, "worker"),
                    n,
                    &ClaimOptions {
                        lease: ms(step, "lease_ms")?,
                        wait: ms(step, "wait_ms")?.unwrap_or_default(),
                    },
                )?;
                Ok(Json::Array(
                    jobs.iter()
                        .map(|j| {
                            json!({"id": j.id, "token": j.lease.token, "attempts": j.attempts,
                                   "payload": j.payload.as_json().unwrap_or(Json::Null)})
                        })
                        .collect(),
                ))
            }
            "ack" => {
                let q = self.queue(step)?;
                let result = step.get("result").map(Payload::from);
                match self.tx(step) {
                    Some(tx) => q.ack_tx(tx, &lease(step), result)?,
                    None => q.ack(&lease(step), result)?,
                }
                Ok(Json::Null)
            }
            "retry" => {
                let q = self.queue(step)?;
                let o = RetryOptions {
                    delay: ms(step, "delay_ms")?,
                    error: step["error"].as_str().map(str::to_owned),
                };
                Ok(json!(q.retry(&lease(step), &o)?.as_str()))
            }
            "fail" => {
                self.queue(step)?.fail(&lease(step), s(step, "error"))?;
                Ok(Json::Null)
            }
            "release" => {
                self.queue(step)?.release(&lease(step))?;
                Ok(Json::Null)
            }
            "heartbeat" => Ok(json!(self
                .queue(step)?
                .heartbeat(&lease(step), ms(step, "extend_ms")?)?)),
            "requeue_dead" => Ok(json!(self
                .queue(step)?
                .requeue_dead(step["id"].as_i64().unwrap_or(0))?)),
            "requeue_all_dead" => Ok(json!(self.queue(step)?.requeue_all_dead()?)),
            "purge_dead" => Ok(json!(self.queue(step)?.purge_dead(None)?)),
            "get_result" => Ok(self
                .queue(step)?
                .get_result(step["id"].as_i64().unwrap_or(0))?
                .map(|p| p.as_json().unwrap_or(Json::Null))
                .unwrap_or(Json::Null)),
            "cancel" => Ok(json!(self
                .queue(step)?
                .cancel(step["id"].as_i64().unwrap_or(0), step["reason"].as_str())?)),
            "get_job" => {
                let j = self
                    .queue(step)?
                    .get_job(step["id"].as_i64().unwrap_or(0))?;
                Ok(json!({"state": j.state.as_str(), "attempts": j.attempts,
                          "last_error": j.last_error, "run_at_ms": j.run_at,
                          "now_ms": honker::Clock::now_ms(&honker::SystemClock)}))
            }
            "stats" => {
                let st = self.queue(step)?.stats()?;
                Ok(json!({"ready": st.ready, "scheduled": st.scheduled,
                          "running": st.running, "dead": st.dead, "paused": st.paused}))
            }
            "drain" => self.drain(step),
            other => Err(unsupported(other)),
        }
    }

    /// Claims and acks until the queue stays empty; each ack commits with a
    /// row keyed by the job id, so a second processing would fail loudly.
    fn drain(&self, step: &Json) -> Out {
        let q = self.queue(step)?;
        let db = self.db()?;
        let (mut done, mut idle, mut errors) = (0u64, 0, Vec::new());
        while idle < 3 {
            let jobs = match q.claim_with(
                s(step, "worker"),
                16,
                &ClaimOptions {
                    lease: None,
                    wait: Duration::from_millis(300),
                },
            ) {
                Ok(j) => j,
                Err(e) => {
                    errors.push(e.code().to_owned());
                    continue;
                }
            };
            if jobs.is_empty() {
                idle += 1;
                continue;
            }
            idle = 0;
            for job in jobs {
                let r = db.with_transaction(|tx| {
                    tx.execute(
                        &format!(
                            "INSERT INTO {} (job_id, surface) VALUES (?1, 'rust')",
                            s(step, "table")
                        ),
                        [job.id],
                    )?;
                    job.ack_tx(tx, None)
                });
                match r {
                    Ok(()) => done += 1,
                    Err(e) => errors.push(e.code().to_owned()),
                }
            }
        }
        Ok(json!({"done": done, "errors": errors}))
    }
}

/// A `configure` step's settings.
fn settings(step: &Json) -> Result<QueueSettings, honker::Error> {
    Ok(QueueSettings {
        lease: ms(step, "lease_ms")?,
        max_attempts: step["max_attempts"].as_u64().map(|n| n as u32),
        backoff_base: ms(step, "backoff_base_ms")?,
        backoff_jitter: step["backoff_jitter"].as_f64(),
        ..QueueSettings::default()
    })
}

fn main() {
    let mut d = Driver {
        db: None,
        tx: None,
        listeners: HashMap::new(),
    };
    let stdout = std::io::stdout();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let step: Json = match serde_json::from_str(&line) {
            Ok(s) => s,
            Err(e) => json!({"op": format!("bad json: {e}")}),
        };
        let reply = match d.run(&step) {
            Ok(v) => json!({"ok": v}),
            Err(e) if e.message().starts_with("UNSUPPORTED") => json!({"unsupported": e.message()}),
            Err(e) => json!({"error": e.code(), "message": e.message()}),
        };
        let mut out = stdout.lock();
        let _ = writeln!(out, "{reply}");
        let _ = out.flush();
    }
}
