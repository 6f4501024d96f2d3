//! Core's worker runtime for Python (`honker::runtime::Worker`): the package's
//! `honker.Worker` keeps one `next` outstanding on a thread of its own, runs
//! the handlers (threads for sync ones, asyncio tasks for async ones) and
//! hands each outcome back with `complete`. Every call that may wait or write
//! runs without the GIL; a task collected without `complete` releases its job
//! on a thread of its own, never while holding the GIL.

use std::time::{Duration, Instant};

use honker::runtime::{Completion, HandlerOptions, OffThreadDrop, Outcome, WorkerOptions};
use parking_lot::Mutex;
use pyo3::prelude::*;

use crate::database::{secs, Database};
use crate::errors::{invalid, IntoPyResult as _};
use crate::group::Group;
use crate::json::payload_from_py;
use crate::queue::Queue;
use crate::records::{ClaimedJob, GroupEvent};

/// See `honker.Worker`.
#[pyclass(module = "honker._native", frozen)]
#[derive(Debug)]
pub struct Worker {
    w: honker::runtime::Worker,
    /// What `drain` gives running handlers.
    grace: Mutex<Duration>,
}

/// A job handed out by `Worker.next`, until `Worker.complete` takes it.
#[pyclass(module = "honker._native", frozen)]
#[derive(Debug)]
pub struct Task {
    // Taken by `complete`; collected without it, the job is released off
    // the GIL.
    t: OffThreadDrop<Mutex<Option<honker::runtime::Task>>>,
    queue: String,
    group: Option<String>,
    deadline: Option<Instant>,
    /// Core's route: the envelope's task, or why no handler runs it.
    task_name: Option<String>,
    refused: Option<String>,
}

impl Task {
    fn with<R>(&self, f: impl FnOnce(&honker::runtime::Task) -> R) -> PyResult<R> {
        match &*self.t.lock() {
            Some(t) => Ok(f(t)),
            None => Err(invalid("this task was already completed")),
        }
    }
}

#[pymethods]
impl Task {
    /// The job, as `Queue.claim` rows it.
    #[getter]
    fn job(&self) -> PyResult<ClaimedJob> {
        self.with(|t| t.job().cloned().map(ClaimedJob::from))?
            .ok_or_else(|| {
                crate::errors::invalid("a consumer group's task has no job: see `event`")
            })
    }

    /// A consumer group's event, as `Group.claim` rows it (None for a
    /// queue's task).
    #[getter]
    fn event(&self) -> PyResult<Option<GroupEvent>> {
        self.with(|t| t.event().cloned().map(GroupEvent::from))
    }

    /// The job's queue, or the event's stream.
    #[getter]
    fn queue(&self) -> &str {
        &self.queue
    }

    /// The event's group (None for a queue's task).
    #[getter]
    fn group(&self) -> Option<&str> {
        self.group.as_deref()
    }

    /// The task of the queue's envelope whose handler runs it (None: the
    /// queue's handler for every job, or `refused`).
    #[getter]
    fn task_name(&self) -> Option<&str> {
        self.task_name.as_deref()
    }

    /// Why no handler runs it (not an envelope, or a task without a
    /// handler): complete it as `permanent` with this error.
    #[getter]
    fn refused(&self) -> Option<&str> {
        self.refused.as_deref()
    }

    /// Seconds left before the handler's timeout (negative once past), or
    /// None without a timeout.
    #[getter]
    fn remaining(&self) -> Option<f64> {
        self.deadline.map(|d| {
            let now = Instant::now();
            if d >= now {
                (d - now).as_secs_f64()
            } else {
                -(now - d).as_secs_f64()
            }
        })
    }

    /// Whether the handler overran its timeout (its job is already retried).
    #[getter]
    fn timed_out(&self) -> bool {
        self.with(|t| t.timed_out()).unwrap_or(false)
    }

    /// Whether the lease was lost (renewal found another holder).
    #[getter]
    fn lost(&self) -> bool {
        self.with(|t| t.lost()).unwrap_or(false)
    }

    /// Whether the worker no longer waits for this run's outcome (timed
    /// out, lease lost, or released by a shutdown).
    #[getter]
    fn cancelled(&self) -> bool {
        self.with(|t| t.cancelled()).unwrap_or(false)
    }
}

/// `(job_id, queue, attempts, event, state, error, ran_seconds)`, event one
/// of core's `Finished::EVENTS` (`success`, `retry`, `dead`, `snoozed`,
/// `timed_out`, `lease_lost`, `released`, `settled`); with the job's new
/// state for `retry`/`snoozed` (`ready`, `scheduled`, `dead`) and the error
/// recorded with a `retry` or `dead`, else None.
fn task(t: honker::runtime::Task) -> Task {
    let (task_name, refused) = t.route().fields();
    Task {
        queue: t.queue().to_owned(),
        group: t.group().map(str::to_owned),
        deadline: t.deadline(),
        task_name,
        refused,
        t: OffThreadDrop::new(Mutex::new(Some(t))),
    }
}

/// The arguments of `complete`: the task taken out of its Python object,
/// and the outcome.
fn take(
    task: &Task,
    outcome: &str,
    result: Option<&Bound<'_, PyAny>>,
    delay: Option<f64>,
    error: Option<String>,
) -> PyResult<(honker::runtime::Task, Outcome)> {
    let delay = delay.map(|s| secs("delay", s)).transpose()?;
    let result = result.map(payload_from_py).transpose()?;
    let outcome = Outcome::named(outcome, result, delay, error).py()?;
    let t = task
        .t
        .lock()
        .take()
        .ok_or_else(|| invalid("this task was already completed"))?;
    Ok((t, outcome))
}

fn handler_options(
    concurrency: Option<i64>,
    timeout: Option<f64>,
    lease: Option<f64>,
) -> PyResult<HandlerOptions> {
    Ok(HandlerOptions {
        concurrency: concurrency
            .map(|n| honker::validate::batch_named("concurrency", n).py())
            .transpose()?,
        timeout: timeout.map(|s| secs("timeout", s)).transpose()?,
        lease: lease.map(|s| secs("lease", s)).transpose()?,
    })
}

type Report = (
    i64,
    String,
    u32,
    &'static str,
    Option<&'static str>,
    Option<String>,
    f64,
);

fn report(r: honker::runtime::Report) -> Report {
    (
        r.job_id,
        r.queue,
        r.attempts,
        r.finished.event(),
        r.finished.state().map(|s| s.as_str()),
        r.error,
        r.ran.as_secs_f64(),
    )
}

#[pymethods]
impl Worker {
    #[new]
    #[pyo3(signature = (db, *, worker_id, concurrency, grace, run_scheduler = true))]
    fn new(
        db: PyRef<'_, Database>,
        worker_id: String,
        concurrency: i64,
        grace: f64,
        run_scheduler: bool,
    ) -> PyResult<Worker> {
        let concurrency = honker::validate::batch_named("concurrency", concurrency).py()?;
        let grace = Mutex::new(secs("grace", grace)?);
        let w = honker::runtime::Worker::new(
            &db.db,
            WorkerOptions {
                worker_id,
                concurrency,
                run_scheduler,
            },
        )
        .py()?;
        Ok(Worker { w, grace })
    }

    /// Seconds a drain gives running handlers.
    #[getter]
    fn get_grace(&self) -> f64 {
        self.grace.lock().as_secs_f64()
    }

    #[setter]
    fn set_grace(&self, grace: f64) -> PyResult<()> {
        *self.grace.lock() = secs("grace", grace)?;
        Ok(())
    }

    /// Runs `queue`'s jobs (with `task`, those of that task of the
    /// envelope): `concurrency` within the worker's, `timeout` and `lease`
    /// in seconds. Core's rules: one handler per task or one for every
    /// job, the queue's options the same in each registration.
    #[pyo3(signature = (queue, *, task = None, concurrency = None, timeout = None, lease = None))]
    fn register(
        &self,
        queue: PyRef<'_, Queue>,
        task: Option<&str>,
        concurrency: Option<i64>,
        timeout: Option<f64>,
        lease: Option<f64>,
    ) -> PyResult<()> {
        let options = handler_options(concurrency, timeout, lease)?;
        match task {
            None => self.w.register(&queue.queue, options).py(),
            Some(t) => self.w.register_task(&queue.queue, t, options).py(),
        }
    }

    /// Starts the run: `INVALID_ARGUMENT` if it ran before (a Worker runs
    /// once) or has no handler; registrations are refused from then on.
    fn start(&self) -> PyResult<()> {
        self.w.start().py()
    }

    /// Runs `group`'s events, as its member named by the worker id (the
    /// same options as `register`).
    #[pyo3(signature = (group, *, concurrency = None, timeout = None, lease = None))]
    fn register_group(
        &self,
        py: Python<'_>,
        group: PyRef<'_, Group>,
        concurrency: Option<i64>,
        timeout: Option<f64>,
        lease: Option<f64>,
    ) -> PyResult<()> {
        let options = handler_options(concurrency, timeout, lease)?;
        let g = &group.g;
        py.detach(|| self.w.register_group(g, options)).py()
    }

    #[getter]
    fn worker_id(&self) -> &str {
        self.w.worker_id()
    }

    #[getter]
    fn running(&self) -> usize {
        self.w.running()
    }

    #[getter]
    fn stopping(&self) -> bool {
        self.w.is_stopping()
    }

    /// How many times the worker gave up on running tasks so far (core's
    /// `Worker::gave_up_generation`): read before `wait_gave_up`.
    #[getter]
    fn gave_up_generation(&self) -> u64 {
        self.w.gave_up_generation()
    }

    /// Waits up to `wait` seconds for the worker to give up on a running
    /// task (its timeout, a lost lease, a shutdown's release) after `seen`,
    /// or for `wake_gave_up`; the generation then. Its thread waits without
    /// the GIL; the host then cancels the handlers whose task is
    /// `cancelled` (told when it happens, not polled).
    fn wait_gave_up(&self, py: Python<'_>, seen: u64, wait: f64) -> PyResult<u64> {
        let wait = secs("wait", wait)?;
        let w = &self.w;
        Ok(py.detach(|| w.wait_gave_up(seen, wait)))
    }

    /// Ends an outstanding `wait_gave_up` now.
    fn wake_gave_up(&self) {
        self.w.wake_gave_up();
    }

    /// The queues whose due jobs a pause held back at the worker's last look,
    /// with how many looks found that (core's `Worker::paused`).
    #[getter]
    fn paused(&self) -> Vec<(String, u64)> {
        self.w.paused()
    }

    /// The next task, waiting up to `wait` seconds; None when the wait ran
    /// out or the worker is stopping. Renews leases and enforces timeouts
    /// while it waits: keep one call outstanding.
    fn next(&self, py: Python<'_>, wait: f64) -> PyResult<Option<Task>> {
        let wait = secs("wait", wait)?;
        let w = &self.w;
        Ok(py.detach(|| w.next(wait)).py()?.map(task))
    }

    /// A task already claimed, without waiting (core's `try_next`): for
    /// the thread that just completed one. None if there is none.
    fn try_next(&self) -> Option<Task> {
        self.w.try_next().map(task)
    }

    /// Records the outcome (`ack` with `result`, `retry` with `delay` and
    /// `error`, `permanent` with `error`, `snooze` with `delay`, `release`,
    /// `settled`) and frees its slot.
    #[pyo3(signature = (task, outcome, *, result = None, delay = None, error = None))]
    fn complete(
        &self,
        py: Python<'_>,
        task: PyRef<'_, Task>,
        outcome: &str,
        result: Option<&Bound<'_, PyAny>>,
        delay: Option<f64>,
        error: Option<String>,
    ) -> PyResult<Report> {
        let (t, outcome) = take(&task, outcome, result, delay, error)?;
        let w = &self.w;
        py.detach(|| w.complete(t, outcome)).py().map(report)
    }

    /// `complete` without waiting (for the event loop's thread): None,
    /// with the task untouched, where it would wait for the writer; then
    /// call `complete` on a thread.
    #[pyo3(signature = (task, outcome, *, result = None, delay = None, error = None))]
    fn try_complete(
        &self,
        py: Python<'_>,
        task: PyRef<'_, Task>,
        outcome: &str,
        result: Option<&Bound<'_, PyAny>>,
        delay: Option<f64>,
        error: Option<String>,
    ) -> PyResult<Option<Report>> {
        let (t, outcome) = take(&task, outcome, result, delay, error)?;
        let w = &self.w;
        match py.detach(|| w.try_complete(t, outcome)).py()? {
            Completion::Done(r) => Ok(Some(report(r))),
            Completion::WouldWait(t, _) => {
                *task.t.lock() = Some(*t);
                Ok(None)
            }
        }
    }

    /// Stops claiming, without I/O (safe in a signal handler).
    fn stop(&self) {
        self.w.stop()
    }

    /// A shutdown signal (core's policy: the first stops, a later one also
    /// ends the grace); whether it ended the grace. No I/O.
    fn signalled(&self) -> bool {
        self.w.signalled()
    }

    /// Ends a drain's grace period now, without I/O.
    fn end_grace(&self) {
        self.w.end_grace()
    }

    /// Stops claiming; releases the jobs claimed but not handed out and
    /// returns how many.
    fn shutdown(&self, py: Python<'_>) -> usize {
        let w = &self.w;
        py.detach(|| w.shutdown())
    }

    /// After `shutdown`: waits up to the grace period for running tasks,
    /// renewing their leases, then releases the rest; returns how many.
    fn drain(&self, py: Python<'_>) -> PyResult<usize> {
        let grace = *self.grace.lock();
        let w = &self.w;
        py.detach(|| w.drain(grace)).py().map(|r| r.released)
    }
}
