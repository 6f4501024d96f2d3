//! Core's worker runtime for Swift (`honker::runtime::Worker`): the
//! `Worker` of Honker.swift keeps one `next` outstanding on a background
//! thread, runs each handler in its own `Task`, and hands its outcome back
//! with `complete`. Tasks stay here, keyed by a number the Swift side
//! holds; the worker's last reference is dropped off the caller's thread
//! (tasks never completed are released then: writes that may wait).

use std::sync::Arc;

use honker::runtime::{HandlerOptions, OffThreadDrop, Outcome, TaskTable, WorkerOptions};

use crate::database::{Database, Payload};
use crate::errors::{ms, opt_ms, R};
use crate::group::Group;
use crate::queue::Queue;
use crate::records::{ClaimedJob, GroupEvent};

struct Shared {
    w: honker::runtime::Worker,
    tasks: TaskTable,
}

/// Dropping it shuts the worker down: always off the caller's thread.
impl honker::runtime::QuickDrop for Shared {}

/// See `Worker` in Honker.swift.
#[derive(uniffi::Object)]
pub struct Worker {
    s: OffThreadDrop<Shared>,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("worker_id", &self.s.w.worker_id())
            .finish_non_exhaustive()
    }
}

/// A job (or a consumer group's event) handed out by `next`, until
/// `complete` takes it by `key`.
#[derive(Debug, uniffi::Record)]
pub struct WorkerTask {
    pub key: u64,
    /// The job's queue, or the event's stream.
    pub queue: String,
    /// The event's group, for a group's task.
    pub group: Option<String>,
    pub job: Option<ClaimedJob>,
    pub event: Option<GroupEvent>,
    /// The task of the queue's envelope whose handler runs it (`nil`: the
    /// queue's handler for every job, or `refused`).
    pub task: Option<String>,
    /// Why no handler runs it: complete it as `permanent` with this error.
    pub refused: Option<String>,
}

/// A finished task, for the hooks.
/// A task the worker gave up on (`wait_cancelled`).
#[derive(Debug, uniffi::Record)]
pub struct CancelledTask {
    pub key: u64,
    /// `timed_out`, `lease_lost` or `released`.
    pub why: String,
}

#[derive(Debug, uniffi::Record)]
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

fn handler_options(
    concurrency: Option<u32>,
    timeout_ms: Option<u64>,
    lease_ms: Option<u64>,
) -> R<HandlerOptions> {
    Ok(HandlerOptions {
        concurrency: concurrency
            .map(|n| honker::validate::batch_named("concurrency", i64::from(n)))
            .transpose()?,
        timeout: opt_ms("timeout", timeout_ms)?,
        lease: opt_ms("lease", lease_ms)?,
    })
}

/// The names of a finished task's events (core's `Finished::EVENTS`).
#[uniffi::export]
pub fn finished_events() -> Vec<String> {
    honker::runtime::Finished::EVENTS
        .iter()
        .map(|e| (*e).to_owned())
        .collect()
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

#[uniffi::export]
impl Worker {
    /// A worker on `db` running at most `concurrency` tasks at once.
    #[uniffi::constructor]
    pub fn new(
        db: Arc<Database>,
        worker_id: String,
        concurrency: u32,
        run_scheduler: bool,
    ) -> R<Arc<Worker>> {
        let w = honker::runtime::Worker::new(
            db.core(),
            WorkerOptions {
                worker_id,
                concurrency: honker::validate::batch_named("concurrency", i64::from(concurrency))?,
                run_scheduler,
            },
        )?;
        Ok(Arc::new(Worker {
            s: OffThreadDrop::new(Shared {
                w,
                tasks: TaskTable::default(),
            }),
        }))
    }

    /// Runs `queue`'s jobs: `concurrency` within the worker's, `timeout_ms`
    /// and `lease_ms` per task.
    pub fn register(
        &self,
        queue: Arc<Queue>,
        task: Option<String>,
        concurrency: Option<u32>,
        timeout_ms: Option<u64>,
        lease_ms: Option<u64>,
    ) -> R<()> {
        let options = handler_options(concurrency, timeout_ms, lease_ms)?;
        match task {
            None => self.s.w.register(queue.core(), options)?,
            Some(t) => self.s.w.register_task(queue.core(), &t, options)?,
        }
        Ok(())
    }

    /// Starts the run: `INVALID_ARGUMENT` if it ran before (a Worker runs
    /// once) or has no handler; registrations are refused from then on.
    pub fn start(&self) -> R<()> {
        Ok(self.s.w.start()?)
    }

    /// Runs `group`'s events as its member named by the worker id (the
    /// same options as `register`); the group must exist.
    pub fn register_group(
        &self,
        group: Arc<Group>,
        concurrency: Option<u32>,
        timeout_ms: Option<u64>,
        lease_ms: Option<u64>,
    ) -> R<()> {
        let options = handler_options(concurrency, timeout_ms, lease_ms)?;
        Ok(self.s.w.register_group(group.core(), options)?)
    }

    pub fn worker_id(&self) -> String {
        self.s.w.worker_id().to_owned()
    }

    pub fn running(&self) -> u32 {
        self.s.w.running() as u32
    }

    pub fn is_stopping(&self) -> bool {
        self.s.w.is_stopping()
    }

    /// The queues whose due jobs a pause held back at the last look, with
    /// how many looks found that (core's `Worker::paused`).
    pub fn paused(&self) -> std::collections::HashMap<String, u64> {
        self.s.w.paused().into_iter().collect()
    }

    /// The next task, waiting up to `wait_ms`; `None` when the wait ran out
    /// or the worker is stopping. Renews leases and enforces timeouts while
    /// it waits: keep one call outstanding.
    pub fn next(&self, wait_ms: u64) -> R<Option<WorkerTask>> {
        let s = &self.s;
        let Some(t) = s.w.next(ms("wait", wait_ms)?)? else {
            return Ok(None);
        };
        Ok(Some(s.tasks.keep(t, |key, t| WorkerTask {
            key,
            queue: t.queue().to_owned(),
            group: t.group().map(str::to_owned),
            job: t.job().cloned().map(ClaimedJob::from),
            event: t.event().cloned().map(GroupEvent::from),
            task: t.route().fields().0,
            refused: t.route().fields().1,
        })))
    }

    /// The running tasks the worker gave up on (`timed_out`, `lease_lost`,
    /// or `released` by a shutdown), each once, waiting up to `wait_ms`
    /// for one: told when it happens (core's `TaskTable::wait_gave_up`),
    /// and their handlers' Tasks are cancelled then. Empty when the wait
    /// ran out or `wake_cancelled` ended it (after `cancelled_generation`
    /// read `seen`). Keep one call outstanding (on a wait thread) while the
    /// worker runs.
    pub fn wait_cancelled(&self, seen: u64, wait_ms: u64) -> R<Vec<CancelledTask>> {
        let wait = ms("wait", wait_ms)?;
        Ok(self
            .s
            .tasks
            .wait_gave_up(&self.s.w, seen, wait)
            .into_iter()
            .map(|(key, why)| CancelledTask {
                key,
                why: why.name().to_owned(),
            })
            .collect())
    }

    /// How many times the worker gave up on tasks so far: read it before
    /// deciding to call `wait_cancelled`, which returns when it moves past.
    pub fn cancelled_generation(&self) -> u64 {
        self.s.w.gave_up_generation()
    }

    /// Ends an outstanding `wait_cancelled` now (it returns empty).
    pub fn wake_cancelled(&self) {
        self.s.w.wake_gave_up();
    }

    /// Records task `key`'s outcome (`ack` with `result`, `retry` with
    /// `delay_ms` and `error`, `permanent` with `error`, `snooze` with
    /// `delay_ms`, `release`, `settled`) and frees its slot.
    pub fn complete(
        &self,
        key: u64,
        outcome: String,
        result: Option<Payload>,
        delay_ms: Option<u64>,
        error: Option<String>,
    ) -> R<TaskReport> {
        let delay = opt_ms("delay", delay_ms)?;
        let outcome = Outcome::named(&outcome, result.map(Into::into), delay, error)?;
        let t = self.s.tasks.take(key)?;
        Ok(report(self.s.w.complete(t, outcome)?))
    }

    /// Stops claiming, without I/O.
    pub fn stop(&self) {
        self.s.w.stop()
    }

    /// A shutdown signal (core's policy: the first stops, a later one also
    /// ends the grace); whether it ended the grace. No I/O.
    pub fn signalled(&self) -> bool {
        self.s.w.signalled()
    }

    /// Ends a drain's grace period now, without I/O.
    pub fn end_grace(&self) {
        self.s.w.end_grace()
    }

    /// Stops claiming and releases the jobs claimed but not handed out;
    /// returns how many.
    pub fn shutdown(&self) -> u32 {
        self.s.w.shutdown() as u32
    }

    /// After `shutdown`: waits up to `grace_ms` for running tasks, renewing
    /// their leases, then releases the rest; returns how many.
    pub fn drain(&self, grace_ms: u64) -> R<u32> {
        Ok(self.s.w.drain(ms("grace", grace_ms)?)?.released as u32)
    }
}
