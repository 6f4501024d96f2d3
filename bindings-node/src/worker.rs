//! Core's worker runtime for Node (`honker::runtime::Worker`): `index.js`'s
//! `Worker` keeps one `next` outstanding (on tokio's blocking pool, never
//! libuv's), runs each handler with an `AbortSignal`, and hands its outcome
//! back with `complete`. Tasks stay here, keyed by a number the JS side
//! holds; the worker's last reference is dropped off the JS thread (tasks
//! never completed are released then: writes that may wait).

use std::sync::Arc;
use std::time::Instant;

use honker::runtime::{
    Completion, HandlerOptions, OffThreadDrop, Outcome, TaskTable, WorkerOptions,
};
use napi_derive::napi;

use crate::database::Database;
use napi::bindgen_prelude::AsyncBlock;
use napi::Env;

use crate::errors::{ms, now, opt_ms, out, pending, Out};
use crate::group::Group;
use crate::queue::Queue;
use crate::records::{payload_in, ClaimedJob, GroupEvent, PayloadIo};

struct Shared {
    w: honker::runtime::Worker,
    tasks: TaskTable,
}

/// Dropping it shuts the worker down: always off the caller's thread.
impl honker::runtime::QuickDrop for Shared {}

/// See `Worker` in index.js.
#[napi]
pub struct Worker {
    s: OffThreadDrop<Shared>,
}

/// A job (or a consumer group's event) handed out by `next`, until
/// `complete` takes it by `key`.
#[napi(object)]
pub struct TaskOut {
    pub key: i64,
    /// The job's queue, or the event's stream.
    pub queue: String,
    /// The event's group, for a group's task.
    pub group: Option<String>,
    pub job: Option<ClaimedJob>,
    pub event: Option<GroupEvent>,
    /// Milliseconds left before the handler's timeout, if its queue has one.
    pub remaining_ms: Option<f64>,
    /// The task of the queue's envelope whose handler runs it (null: the
    /// queue's handler for every job, or `refused`).
    pub task: Option<String>,
    /// Why no handler runs it: complete it as `permanent` with this error.
    pub refused: Option<String>,
}

/// A task the worker gave up on (`waitCancelled`).
#[napi(object)]
pub struct CancelledTask {
    pub key: i64,
    /// `timed_out`, `lease_lost` or `released`.
    pub why: String,
}

/// A finished task, for the hooks.
#[napi(object)]
pub struct TaskReport {
    /// The job's id, or the event's offset.
    pub job_id: i64,
    pub queue: String,
    pub group: Option<String>,
    pub attempts: u32,
    /// Its event's name (core's `Finished::event`): `success`, `retry`,
    /// `dead`, `snoozed`, `timed_out`, `lease_lost`, `released` or `settled`.
    pub event: String,
    /// The job's new state after `retry`/`snoozed`.
    pub state: Option<String>,
    /// The error recorded with a `retry` or `dead`.
    pub error: Option<String>,
    pub ran_ms: f64,
}

fn report(r: honker::runtime::Report) -> TaskReport {
    TaskReport {
        job_id: r.job_id,
        queue: r.queue,
        group: r.group,
        attempts: r.attempts,
        event: r.finished.event().to_owned(),
        state: r.finished.state().map(|s| s.as_str().to_owned()),
        error: r.error,
        ran_ms: r.ran.as_secs_f64() * 1000.0,
    }
}

/// The names of a finished task's events (core's `Finished::EVENTS`).
#[napi]
pub fn finished_events() -> Vec<String> {
    honker::runtime::Finished::EVENTS
        .iter()
        .map(|e| (*e).to_owned())
        .collect()
}

/// A worker on `db` (core's `runtime::Worker`).
#[napi]
pub fn new_worker(
    db: &Database,
    worker_id: String,
    concurrency: u32,
    run_scheduler: bool,
) -> Out<Worker> {
    out((|| {
        let w = honker::runtime::Worker::new(
            db.core(),
            WorkerOptions {
                worker_id,
                concurrency: honker::validate::batch_named("concurrency", i64::from(concurrency))?,
                run_scheduler,
            },
        )?;
        Ok(Worker {
            s: OffThreadDrop::new(Shared {
                w,
                tasks: TaskTable::default(),
            }),
        })
    })())
}

impl Worker {
    fn shared(&self) -> Arc<Shared> {
        self.s.shared()
    }
}

impl Shared {
    /// Keeps `t` until `complete` takes it by the returned key.
    fn keep(&self, t: honker::runtime::Task) -> TaskOut {
        self.tasks.keep(t, |key, t| TaskOut {
            key: js_key(key),
            queue: t.queue().to_owned(),
            group: t.group().map(str::to_owned),
            job: t.job().cloned().map(ClaimedJob::from),
            event: t.event().cloned().map(GroupEvent::from),
            remaining_ms: t
                .deadline()
                .map(|d| d.saturating_duration_since(Instant::now()).as_secs_f64() * 1000.0),
            task: t.route().fields().0,
            refused: t.route().fields().1,
        })
    }

    /// Task `key` and its outcome, for `complete`.
    fn take(
        &self,
        key: i64,
        outcome: &str,
        result: Option<honker::Payload>,
        delay: Option<std::time::Duration>,
        error: Option<String>,
    ) -> honker::Result<(honker::runtime::Task, Outcome)> {
        let outcome = Outcome::named(outcome, result, delay, error)?;
        Ok((self.tasks.take(core_key(key))?, outcome))
    }
}

fn handler_options(
    concurrency: Option<u32>,
    timeout: Option<f64>,
    lease: Option<f64>,
) -> honker::Result<HandlerOptions> {
    Ok(HandlerOptions {
        concurrency: concurrency
            .map(|n| honker::validate::batch_named("concurrency", i64::from(n)))
            .transpose()?,
        timeout: opt_ms("timeout", timeout)?,
        lease: opt_ms("lease", lease)?,
    })
}

/// A task's key as JS holds it: a number, exact below 2^53 (a worker
/// hands out far fewer tasks).
fn js_key(key: u64) -> i64 {
    i64::try_from(key).unwrap_or(i64::MAX)
}

/// A key from JS (a negative one names no task).
fn core_key(key: i64) -> u64 {
    u64::try_from(key).unwrap_or(u64::MAX)
}

#[napi]
impl Worker {
    /// Runs `queue`'s jobs: `concurrency` within the worker's, `timeout`
    /// and `lease` in ms.
    #[napi]
    pub fn register(
        &self,
        queue: &Queue,
        concurrency: Option<u32>,
        timeout: Option<f64>,
        lease: Option<f64>,
        task: Option<String>,
    ) -> Out<()> {
        out(
            handler_options(concurrency, timeout, lease).and_then(|options| match task {
                None => self.s.w.register(queue.core(), options),
                Some(t) => self.s.w.register_task(queue.core(), &t, options),
            }),
        )
    }

    /// Starts the run: `INVALID_ARGUMENT` if it ran before (a Worker runs
    /// once) or has no handler; registrations are refused from then on.
    #[napi]
    pub fn start(&self) -> Out<()> {
        out(self.s.w.start())
    }

    /// Whether `start` was called.
    #[napi(getter)]
    pub fn started(&self) -> bool {
        self.s.w.is_started()
    }

    /// Runs `group`'s events as its member named by the worker id (the
    /// same options as `register`); the group must exist.
    #[napi]
    pub fn register_group(
        &self,
        env: Env,
        group: &Group,
        concurrency: Option<u32>,
        timeout: Option<f64>,
        lease: Option<f64>,
    ) -> napi::Result<AsyncBlock<Out<()>>> {
        let (s, g) = (self.shared(), group.core().clone());
        pending(
            &env,
            Box::new(move || {
                s.w.register_group(&g, handler_options(concurrency, timeout, lease)?)
            }),
        )
    }

    #[napi(getter)]
    pub fn running(&self) -> u32 {
        self.s.w.running() as u32
    }

    #[napi(getter)]
    pub fn stopping(&self) -> bool {
        self.s.w.is_stopping()
    }

    /// The queues whose due jobs a pause held back at the last look, with
    /// how many looks found that (core's `Worker::paused`).
    #[napi(getter)]
    pub fn paused(&self) -> std::collections::HashMap<String, f64> {
        self.s
            .w
            .paused()
            .into_iter()
            .map(|(q, n)| (q, n as f64))
            .collect()
    }

    /// The next task, waiting up to `wait` ms; null when the wait ran out or
    /// the worker is stopping. Renews leases and enforces timeouts while it
    /// waits: keep one call outstanding.
    #[napi]
    pub fn next(&self, env: Env, wait: f64) -> napi::Result<AsyncBlock<Out<Option<TaskOut>>>> {
        let s = self.shared();
        pending(
            &env,
            Box::new(move || Ok(s.w.next(ms("wait", wait)?)?.map(|t| s.keep(t)))),
        )
    }

    /// A task already claimed (by a completion's refill), without waiting;
    /// null if there is none. For the JS side right after a completion.
    #[napi]
    pub fn try_next(&self) -> Option<TaskOut> {
        self.s.w.try_next().map(|t| self.s.keep(t))
    }

    /// The running tasks the worker gave up on (`timed_out`, `lease_lost`,
    /// or `released` by a shutdown), each once, waiting up to `wait` ms for
    /// one: told when it happens (core's `TaskTable::wait_gave_up`), and
    /// their handlers' signals abort then. Empty when the wait ran out or
    /// `wakeCancelled` ended it (after `cancelledGeneration` read `seen`). Keep one call outstanding while the worker
    /// runs (it holds one blocking thread, as `next` does).
    #[napi]
    pub fn wait_cancelled(
        &self,
        env: Env,
        seen: i64,
        wait: f64,
    ) -> napi::Result<AsyncBlock<Out<Vec<CancelledTask>>>> {
        let s = self.shared();
        pending(
            &env,
            Box::new(move || {
                let wait = ms("wait", wait)?;
                Ok(s.tasks
                    .wait_gave_up(&s.w, core_key(seen), wait)
                    .into_iter()
                    .map(|(key, why)| CancelledTask {
                        key: js_key(key),
                        why: why.name().to_owned(),
                    })
                    .collect())
            }),
        )
    }

    /// How many times the worker gave up on tasks so far: read it on the
    /// JS thread before deciding to call `waitCancelled`, which returns
    /// when it moves past.
    #[napi]
    pub fn cancelled_generation(&self) -> i64 {
        js_key(self.s.w.gave_up_generation())
    }

    /// Ends an outstanding `waitCancelled` now (it returns empty).
    #[napi]
    pub fn wake_cancelled(&self) {
        self.s.w.wake_gave_up();
    }

    /// Records task `key`'s outcome (`ack` with `result`, `retry` with
    /// `delay` and `error`, `permanent` with `error`, `snooze` with `delay`,
    /// `release`, `settled`) and frees its slot.
    #[napi]
    pub fn complete(
        &self,
        env: Env,
        key: i64,
        outcome: String,
        result: Option<PayloadIo>,
        delay: Option<f64>,
        error: Option<String>,
    ) -> napi::Result<AsyncBlock<Out<TaskReport>>> {
        let s = self.shared();
        let result = result.map(payload_in);
        let delay = opt_ms("delay", delay);
        pending(
            &env,
            Box::new(move || {
                let (t, outcome) = s.take(key, &outcome, result, delay?, error)?;
                s.w.complete(t, outcome).map(report)
            }),
        )
    }

    /// `complete` right here, without waiting (`WOULD_WAIT`, with the task
    /// kept, where it would wait: then call `complete`).
    #[napi]
    pub fn try_complete(
        &self,
        key: i64,
        outcome: String,
        result: Option<PayloadIo>,
        delay: Option<f64>,
        error: Option<String>,
    ) -> Out<TaskReport> {
        let s = &self.s;
        now(|| {
            let delay = opt_ms("delay", delay)?;
            let (t, outcome) = s.take(key, &outcome, result.map(payload_in), delay, error)?;
            match s.w.try_complete(t, outcome)? {
                Completion::Done(r) => Ok(report(r)),
                Completion::WouldWait(t, _) => {
                    s.tasks.put_back(core_key(key), *t);
                    Err(honker::Error::new(
                        honker::ErrorKind::Busy,
                        "recording the outcome would wait for the writer",
                    ))
                }
            }
        })
    }

    /// Stops claiming, without I/O.
    #[napi]
    pub fn stop(&self) {
        self.s.w.stop()
    }

    /// A shutdown signal (core's policy: the first stops, a later one also
    /// ends the grace); whether it ended the grace. No I/O.
    #[napi]
    pub fn signalled(&self) -> bool {
        self.s.w.signalled()
    }

    /// Ends a drain's grace period now, without I/O.
    #[napi]
    pub fn end_grace(&self) {
        self.s.w.end_grace()
    }

    /// Stops claiming and releases the jobs claimed but not handed out;
    /// resolves to how many.
    #[napi]
    pub fn shutdown(&self, env: Env) -> napi::Result<AsyncBlock<Out<u32>>> {
        let s = self.shared();
        pending(&env, Box::new(move || Ok(s.w.shutdown() as u32)))
    }

    /// After `shutdown`: waits up to `grace` ms for running tasks, renewing
    /// their leases, then releases the rest; resolves to how many.
    #[napi]
    pub fn drain(&self, env: Env, grace: f64) -> napi::Result<AsyncBlock<Out<u32>>> {
        let s = self.shared();
        pending(
            &env,
            Box::new(move || Ok(s.w.drain(ms("grace", grace)?)?.released as u32)),
        )
    }
}
