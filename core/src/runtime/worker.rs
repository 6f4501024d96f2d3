//! [`Worker`]: the claim–run–finish loop every user would otherwise write,
//! with concurrency limits, lease renewal, handler timeouts and a graceful
//! shutdown. Pull-style (ADR 14): core hands out [`Task`]s and takes back
//! an [`Outcome`]; the host only runs handlers, so core never calls into
//! Python, JavaScript or Swift from its own threads.
//!
//! The host keeps one call to [`Worker::next`] outstanding (a loop on one
//! thread, or a blocking-pool task in an async runtime). That call is the
//! worker's clock: while it waits it renews the leases of running tasks and
//! retries the jobs of handlers that overran their timeout, so the worker
//! needs no thread of its own. After [`Worker::shutdown`], [`Worker::drain`]
//! plays that part for the grace period, then releases what still runs.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::outcome::{Completion, DrainReport, Finished, Outcome, Report};
use super::work::{lease_gone, Source, Work};
use crate::database::Database;
use crate::defaults::RENEW_DIVISOR;
use crate::error::{Error, ErrorKind, Result};
use crate::queue::ops::Probe;
use crate::queue::{Job, Queue};
use crate::stream::group::{Group, GroupEvent};
use crate::transaction::Transaction;
use crate::validate;

/// Options for a [`Worker`].
#[derive(Clone, Debug)]
pub struct WorkerOptions {
    /// The worker id its claims record (`worker_id` of each job).
    pub worker_id: String,
    /// Tasks running (or claimed and about to run) at once, over all
    /// queues. Claims never take more jobs than there are free slots.
    pub concurrency: usize,
    /// Runs the file's scheduler on a thread of its own while the worker
    /// runs (a [`ScheduleThread`](super::ScheduleThread)), so that every
    /// worker process fires the schedules: safe, each boundary fires once.
    /// Defaults to true.
    pub run_scheduler: bool,
}

impl Default for WorkerOptions {
    fn default() -> WorkerOptions {
        WorkerOptions {
            worker_id: format!("worker-{}", std::process::id()),
            concurrency: crate::defaults::WORKER_CONCURRENCY as usize,
            run_scheduler: true,
        }
    }
}

/// How one queue's jobs run ([`Worker::register`]).
#[derive(Clone, Debug, Default)]
pub struct HandlerOptions {
    /// This queue's limit, within the worker's (default: the worker's).
    pub concurrency: Option<usize>,
    /// How long a handler may run. When it overruns, the job is retried
    /// (with the queue's backoff, as a failure) and the handler's own
    /// outcome, whenever it comes, is discarded: its lease token is stale.
    /// Its slot stays taken until the host completes the task.
    pub timeout: Option<Duration>,
    /// The lease each claim takes (default: the queue's); renewed every
    /// third of it while the handler runs.
    pub lease: Option<Duration>,
}

/// The handler that runs a [`Task`] ([`Task::route`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// The handler for every job of its queue (or every event of its
    /// group): [`Worker::register`], [`Worker::register_group`].
    Every,
    /// The handler of this task of the queue's envelope
    /// `{"task": name, "args": ...}` ([`Worker::register_task`]).
    Task(String),
    /// No handler runs it: the job is not an envelope, or names a task
    /// without one. The host completes it with [`Outcome::Permanent`] and
    /// this reason (dead-lettered, not retried).
    Refused(String),
}

/// The envelope's key that names the task, as documented.
pub const ENVELOPE_TASK: &str = "task";
/// The envelope's key of the task's arguments.
pub const ENVELOPE_ARGS: &str = "args";

impl Route {
    /// As a host's record has it: the task's name ([`Route::Task`]) and
    /// the refusal's reason ([`Route::Refused`]); both `None` for
    /// [`Route::Every`].
    pub fn fields(&self) -> (Option<String>, Option<String>) {
        match self {
            Route::Every => (None, None),
            Route::Task(name) => (Some(name.clone()), None),
            Route::Refused(why) => (None, Some(why.clone())),
        }
    }

    /// Which of `tasks` (a queue's registered tasks) runs `work`.
    fn of(work: &Work, queue: &str, tasks: &BTreeSet<String>) -> Route {
        #[derive(serde::Deserialize)]
        struct Envelope<'a> {
            #[serde(borrow, default)]
            task: Option<std::borrow::Cow<'a, str>>,
        }
        let name = match work {
            Work::Job(job) => match &job.payload {
                crate::Payload::Json(text) => serde_json::from_str::<Envelope<'_>>(text)
                    .ok()
                    .and_then(|e| e.task),
                crate::Payload::Bytes(_) => None,
            },
            Work::Event(..) => None,
        };
        match name {
            None => Route::Refused(format!(
                "not a task envelope ({{\"{ENVELOPE_TASK}\": name, \"{ENVELOPE_ARGS}\": ...}}), \
                 and queue {queue:?} has handlers only for tasks"
            )),
            Some(n) if tasks.contains(n.as_ref()) => Route::Task(n.into_owned()),
            Some(n) => Route::Refused(format!("no handler for task {n}")),
        }
    }
}

/// A job (or a group's event) handed to the host to run. Complete it with
/// [`Worker::complete`]; dropped without that, its job is released.
#[derive(Debug)]
pub struct Task {
    work: Work,
    key: u64,
    queue_name: String,
    group_name: Option<String>,
    deadline: Option<Instant>,
    started: Instant,
    worker: Arc<Inner>,
    done: bool,
    /// The worker had given up on it before it was handed out.
    given_up_early: bool,
    route: Route,
}

impl Task {
    /// What it runs: a job, or a group's event.
    pub fn work(&self) -> &Work {
        &self.work
    }

    /// The job, for a queue's task.
    pub fn job(&self) -> Option<&Job> {
        match &self.work {
            Work::Job(j) => Some(j),
            Work::Event(..) => None,
        }
    }

    /// Which handler runs it (for a queue with task handlers, from the
    /// job's envelope).
    pub fn route(&self) -> &Route {
        &self.route
    }

    /// The event, for a consumer group's task.
    pub fn event(&self) -> Option<&GroupEvent> {
        match &self.work {
            Work::Job(_) => None,
            Work::Event(_, e) => Some(e),
        }
    }

    /// The job's queue, or the event's stream.
    pub fn queue(&self) -> &str {
        &self.queue_name
    }

    /// The event's group, for a consumer group's task.
    pub fn group(&self) -> Option<&str> {
        self.group_name.as_deref()
    }

    /// When the handler's time runs out, if its queue has a timeout (for
    /// adapters that can cancel: a task, an `AbortSignal`).
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Whether the handler overran its timeout (its job is already
    /// retried): a sync handler that checks it can stop early.
    pub fn timed_out(&self) -> bool {
        self.worker.flag(self.key, |r| r.timed_out)
    }

    /// Whether the lease was lost (renewal found another holder).
    pub fn lost(&self) -> bool {
        self.worker.flag(self.key, |r| r.lost)
    }

    /// Whether the worker no longer waits for this run's outcome: it timed
    /// out, lost its lease, or outlived a shutdown's grace period (its job
    /// was released). A handler that checks it can stop early.
    pub fn cancelled(&self) -> bool {
        self.worker.flag(self.key, |r| !r.live())
    }

    /// Why the worker no longer waits for this run's outcome, if it does
    /// not: [`Finished::TimedOut`], [`Finished::LeaseLost`] or
    /// [`Finished::Released`] (a shutdown's grace ended), what
    /// [`Worker::complete`] will report. Adapters cancel the handler then.
    pub fn gave_up(&self) -> Option<Finished> {
        let st = self.worker.state.lock();
        let r = st.running.get(&self.key)?;
        if r.timed_out {
            Some(Finished::TimedOut)
        } else if r.lost {
            Some(Finished::LeaseLost)
        } else if r.released {
            Some(Finished::Released)
        } else {
            None
        }
    }

    /// Whether the worker had given up on it already when it was handed
    /// out (its lease lost while it waited claimed): a host that keeps it
    /// where a waiter of [`Worker::wait_gave_up`] looks tells that waiter
    /// with [`Worker::wake_gave_up`], as the giving up did before the task
    /// was there to be found.
    pub fn given_up_early(&self) -> bool {
        self.given_up_early
    }

    /// The worker it came from.
    pub fn worker(&self) -> Worker {
        Worker {
            inner: Arc::clone(&self.worker),
        }
    }
}

impl Drop for Task {
    fn drop(&mut self) {
        if !self.done {
            // A handler that panicked or was abandoned: give the job back.
            if let Some(r) = self.worker.remove(self.key) {
                if !(r.timed_out || r.lost || r.released) {
                    let _ = self.work.release();
                }
            }
        }
    }
}

impl super::QuickDrop for Task {
    /// Finished: nothing to give back.
    fn drops_quickly(&self) -> bool {
        self.done
    }
}

/// Runs handlers for registered queues; see the module docs. Cheap to
/// clone; clones share the worker.
///
/// ```no_run
/// # fn main() -> honker::Result<()> {
/// use honker::runtime::{HandlerOptions, Outcome, Worker, WorkerOptions};
/// use honker::Database;
/// use std::time::Duration;
///
/// let db = Database::open("app.db")?;
/// let worker = Worker::new(&db, WorkerOptions::default())?;
/// worker.register(&db.queue("emails")?, HandlerOptions::default())?;
/// while let Some(task) = worker.next(Duration::from_secs(30))? {
///     // run the handler (on a thread of a pool, for concurrency), then:
///     worker.complete(task, Outcome::Ack(None))?;
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Worker {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    db: Database,
    worker_id: String,
    limit: usize,
    stopping: AtomicBool,
    /// [`Worker::end_grace`] was called.
    hurry: AtomicBool,
    /// One `next` at a time: capacity is read, then claimed.
    next_lock: Mutex<()>,
    state: Mutex<State>,
    run_scheduler: bool,
    /// Started by the first `next`, stopped by `stop`.
    scheduler: Mutex<Option<super::ScheduleThread>>,
    /// Moves each time the worker gives up on running tasks.
    gave_up: GaveUp,
    /// [`Worker::start`] was called.
    started: AtomicBool,
}

/// The times a worker gave up on running tasks (timed out, lease lost,
/// released by a shutdown), for a host that cancels their handlers as soon
/// as it happens ([`Worker::wait_gave_up`]): pushed, not polled.
#[derive(Debug, Default)]
struct GaveUp {
    generation: Mutex<u64>,
    moved: Condvar,
}

#[derive(Debug, Default)]
struct State {
    queues: Vec<Registered>,
    running: HashMap<u64, Running>,
    /// Claimed, not handed out yet (their slots are taken).
    buffered: VecDeque<u64>,
    /// Slots set aside for claims in flight ([`Reservation`]).
    reserved: usize,
    /// Outcomes taken out of `running` whose transaction has not committed
    /// yet: `drain` waits for them too, so that once it returns every
    /// outcome is in the file (not a moment later).
    recording: usize,
    next_key: u64,
    /// Where the next claim round starts, so no queue starves another.
    round: usize,
    /// The queues whose due work a pause held back at this worker's last
    /// look (ADR 33), with how many looks in a row found it so; a look
    /// that does not (the queue running again, or nothing due) removes it.
    paused: std::collections::BTreeMap<String, u64>,
}

/// See [`Inner::start_recording`].
struct Recording<'a>(&'a Inner);

impl Drop for Recording<'_> {
    fn drop(&mut self) {
        self.0.state.lock().recording -= 1;
        self.0.db.poke();
    }
}

#[derive(Debug)]
struct Registered {
    source: Source,
    /// A handler takes every job (always, for a group).
    every: bool,
    /// The tasks of the envelope that have handlers (a queue's only).
    tasks: BTreeSet<String>,
    /// The options as registered (another registration must name the same
    /// or none).
    given: (Option<usize>, Option<Duration>, Option<Duration>),
    limit: usize,
    timeout: Option<Duration>,
    lease: Duration,
    /// `lease` as claims take it, checked once at registration.
    lease_ms: i64,
    running: usize,
    /// This queue's share of [`State::reserved`].
    reserved: usize,
}

#[derive(Debug)]
struct Running {
    slot: usize,
    work: Work,
    lease: Duration,
    renew_at: Instant,
    deadline: Option<Instant>,
    /// The queue's handler timeout (for its error message).
    timeout: Option<Duration>,
    timed_out: bool,
    lost: bool,
    released: bool,
}

impl Running {
    fn live(&self) -> bool {
        !(self.timed_out || self.lost || self.released)
    }
}

/// Slots set aside for a claim in flight, so that two claims (`next`'s
/// and a completion's refill) never take the same free slot. Given back
/// when dropped, unless [`Inner::buffer`] filled them.
struct Reservation<'a> {
    inner: &'a Inner,
    slot: usize,
    n: usize,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if self.n > 0 {
            self.inner.state.lock().unreserve(self.slot, self.n);
            self.inner.db.poke(); // free again: wake `next`
        }
    }
}

/// A renewal that failed for a reason other than a lost lease is retried
/// this soon (within the lease: it has two thirds left).
const RENEW_RETRY: Duration = Duration::from_millis(250);

impl Worker {
    /// A worker on `db`; register queues, then call [`next`](Self::next).
    pub fn new(db: &Database, options: WorkerOptions) -> Result<Worker> {
        validate::key("worker id", &options.worker_id)?;
        let limit = validate::batch_named_usize("concurrency", options.concurrency)?;
        Ok(Worker {
            inner: Arc::new(Inner {
                db: db.clone(),
                worker_id: options.worker_id,
                limit,
                stopping: AtomicBool::new(false),
                hurry: AtomicBool::new(false),
                next_lock: Mutex::new(()),
                state: Mutex::new(State::default()),
                run_scheduler: options.run_scheduler,
                scheduler: Mutex::new(None),
                gave_up: GaveUp::default(),
                started: AtomicBool::new(false),
            }),
        })
    }

    /// Runs `queue`'s jobs with `options`; the handle's own options (lease,
    /// attempts, backoff: [`Database::queue_with`]) apply to its claims and
    /// retries. Every task of the queue goes to this one handler
    /// ([`Route::Every`]). A second registration of the queue is
    /// `INVALID_ARGUMENT`, and so is one after [`start`](Self::start).
    pub fn register(&self, queue: &Queue, options: HandlerOptions) -> Result<()> {
        let lease = options.lease.unwrap_or(queue.options().lease);
        self.add(Source::Queue(queue.clone()), lease, options, None)
    }

    /// Runs the jobs of `queue` whose payload is the task envelope
    /// `{"task": task, "args": ...}` ([`Route::Task`]); a queue may have a
    /// handler for each of several tasks. A job of the queue that is not
    /// an envelope, or names a task without a handler, is
    /// [`Route::Refused`]. Every registration of the queue names the same
    /// `options` or none (concurrency, timeout and lease are the
    /// queue's); `INVALID_ARGUMENT` for other options, a task registered
    /// twice, a queue that has a handler for every job, an empty `task`,
    /// or after [`start`](Self::start).
    pub fn register_task(&self, queue: &Queue, task: &str, options: HandlerOptions) -> Result<()> {
        if task.is_empty() {
            return Err(Error::invalid("a task name must not be empty"));
        }
        let lease = options.lease.unwrap_or(queue.options().lease);
        self.add(Source::Queue(queue.clone()), lease, options, Some(task))
    }

    /// Starts the worker's run, for a host's `run`: `INVALID_ARGUMENT` if
    /// it started before (a Worker runs once) or has no handler. From then
    /// on registrations are refused. ([`next`](Self::next) does not need
    /// it: a Rust caller may drive the worker without.)
    pub fn start(&self) -> Result<()> {
        // Under the state lock, which registrations check `started` under.
        let st = self.inner.state.lock();
        if self.is_started() {
            return Err(Error::invalid(
                "this worker already ran (a Worker runs once)",
            ));
        }
        if st.queues.is_empty() {
            return Err(Error::invalid("no handler is registered"));
        }
        self.inner.started.store(true, Ordering::SeqCst);
        Ok(())
    }

    /// Whether [`start`](Self::start) was called.
    pub fn is_started(&self) -> bool {
        self.inner.started.load(Ordering::SeqCst)
    }

    /// Runs `group`'s events as its member named by the worker id: each
    /// event is handed out as a [`Task`] whose [`Task::event`] it is, under
    /// the group's lease (or `options.lease`), renewed while the handler
    /// runs. Outcomes map to the group's verbs: `Ack` acks (a result is
    /// dropped: groups keep none), `Retry` and `Permanent` retry and fail,
    /// `Release` releases, and `Snooze(delay)` is a retry after `delay`
    /// (a group has no snooze that spends no delivery). The group must
    /// exist ([`Group::create`]). At-least-once, as for jobs.
    pub fn register_group(&self, group: &Group, options: HandlerOptions) -> Result<()> {
        let lease = match options.lease {
            Some(l) => l,
            None => group.info()?.options.lease,
        };
        validate::name("member", &self.inner.worker_id)?;
        self.add(Source::Group(group.clone()), lease, options, None)
    }

    fn add(
        &self,
        source: Source,
        lease: Duration,
        options: HandlerOptions,
        task: Option<&str>,
    ) -> Result<()> {
        let given = (options.concurrency, options.timeout, options.lease);
        {
            let mut st = self.inner.state.lock();
            if self.is_started() {
                return Err(Error::invalid("register handlers before the worker runs"));
            }
            if let (Source::Queue(_), Some(r)) = (
                &source,
                st.queues.iter_mut().find(|r| r.source.same(&source)),
            ) {
                let name = source.name();
                if given != (None, None, None) && given != r.given {
                    return Err(Error::invalid(format!(
                        "queue {name:?} is already registered with other options \
                         (concurrency, timeout and lease are the queue's)"
                    )));
                }
                match task {
                    Some(t) if !r.every && !r.tasks.contains(t) => {
                        r.tasks.insert(t.to_owned());
                        return Ok(());
                    }
                    _ => {
                        let taken = match task {
                            Some(t) if !r.every => t,
                            _ => "every job",
                        };
                        return Err(Error::invalid(format!(
                            "queue {name:?} already has a handler for {taken}"
                        )));
                    }
                }
            }
        }
        let limit = match options.concurrency {
            Some(n) => validate::batch_named_usize("concurrency", n)?.min(self.inner.limit),
            None => self.inner.limit,
        };
        if let Some(t) = options.timeout {
            if t.is_zero() {
                return Err(Error::invalid("a handler timeout must be positive"));
            }
            validate::delay("timeout", t)?;
        }
        let lease_ms = validate::lease(lease)?;
        let mut st = self.inner.state.lock();
        if st.queues.iter().any(|r| r.source.same(&source)) {
            return Err(Error::invalid(match source.group() {
                None => format!(
                    "queue {:?} is already registered with this worker",
                    source.name()
                ),
                Some(g) => format!(
                    "group {g:?} of stream {:?} already has a handler",
                    source.name()
                ),
            }));
        }
        st.queues.push(Registered {
            source,
            every: task.is_none(),
            tasks: task.map(str::to_owned).into_iter().collect(),
            given,
            limit,
            timeout: options.timeout,
            lease,
            lease_ms,
            running: 0,
            reserved: 0,
        });
        Ok(())
    }

    /// The worker id its claims record.
    pub fn worker_id(&self) -> &str {
        &self.inner.worker_id
    }

    /// The queues this worker serves whose due jobs a pause held back at
    /// its last look (ADR 33), by name, each with how many of its looks
    /// (one at each wake-up: a commit by any process, a due time) found
    /// that. A queue leaves the list when a look finds it running again,
    /// or with nothing due.
    /// Each host reports it (`worker.paused`).
    pub fn paused(&self) -> Vec<(String, u64)> {
        let st = self.inner.state.lock();
        st.paused.iter().map(|(q, n)| (q.clone(), *n)).collect()
    }

    /// Tasks running or claimed and about to be handed out.
    pub fn running(&self) -> usize {
        self.inner.state.lock().running.len()
    }

    /// Whether [`shutdown`](Self::shutdown) was called.
    pub fn is_stopping(&self) -> bool {
        self.inner.stopping.load(Ordering::SeqCst)
    }

    /// The next task, waiting up to `wait` for a free slot and a job
    /// (claiming as many jobs as there are free slots, round-robin over
    /// the queues, sleeping on wake-ups, never polling faster than the
    /// database's recheck interval). `None` when the wait ran out or the
    /// worker is stopping. Meanwhile it renews running tasks' leases and
    /// retries the jobs of handlers past their timeout.
    pub fn next(&self, wait: Duration) -> Result<Option<Task>> {
        let inner = &self.inner;
        validate::delay("wait", wait)?;
        crate::connection::refuse_waiting("a worker's next")?;
        if inner.run_scheduler {
            // Under the lock `stop` takes it with, so that a stop between
            // the check and the start cannot miss the thread.
            let mut s = inner.scheduler.lock();
            if s.is_none() && !inner.stopping.load(Ordering::SeqCst) {
                *s = Some(super::ScheduleThread::start(&inner.db)?);
            }
        }
        let _one = inner.next_lock.lock();
        let pace = crate::Pace::new(wait, inner.db.recheck_interval(), false);
        let signal = inner.db.wait_signal()?;
        loop {
            let seen = signal.generation();
            if self.is_stopping() {
                return Ok(None);
            }
            let due = inner.tick();
            if let Some(task) = self.hand_out() {
                return Ok(Some(task));
            }
            let mut next_at: Option<Instant> = None;
            for slot in inner.free_slots() {
                let (source, lease_ms) = inner.claim_args(slot);
                let (probe, now) = source.probe()?;
                inner.saw_held(slot, matches!(probe, Probe::Paused { held: true }));
                match probe {
                    Probe::Claimable => {
                        // Taken meanwhile by a completion's refill: next queue.
                        let Some(r) = inner.reserve(slot) else {
                            continue;
                        };
                        let jobs = source.claim(None, &inner.worker_id, r.n, lease_ms)?;
                        if !jobs.is_empty() {
                            if !inner.buffer(r, jobs) {
                                return Ok(None); // stopping: released
                            }
                            if let Some(task) = self.hand_out() {
                                return Ok(Some(task));
                            }
                        }
                    }
                    Probe::NextAt(Some(t)) => {
                        let at = Instant::now() + crate::clock::ms_until(t, now);
                        next_at = Some(next_at.map_or(at, |n| n.min(at)));
                    }
                    Probe::NextAt(None) => {}
                    Probe::Paused { .. } => {}
                }
            }
            let start = Instant::now();
            let due = [due, next_at].into_iter().flatten().min();
            let Some(nap) = pace.nap(due.map(|t| t.saturating_duration_since(start)), start) else {
                return Ok(None);
            };
            signal.wait_past(seen, start + nap);
        }
    }

    /// Records `outcome` for `task` and frees its slot. A task that timed
    /// out, lost its lease or was released by a shutdown reports that, and
    /// its outcome changes nothing. Errors other than a lost lease (the
    /// database busy or closed) are returned; the slot is free either way,
    /// and the job's lease lapses if nothing else holds it.
    ///
    /// The freed slot is refilled in the outcome's own transaction (one
    /// write per job where a separate claim would be a second): the next
    /// job, round-robin over the queues, waits claimed for
    /// [`next`](Self::next) or [`try_next`](Self::try_next).
    pub fn complete(&self, task: Task, outcome: Outcome) -> Result<Report> {
        match self.begin(&outcome) {
            Ok(tx) => self.record(task, outcome, tx),
            Err(e) => {
                self.abandon(task);
                Err(e)
            }
        }
    }

    /// [`complete`](Self::complete) without waiting, for a host that calls
    /// it on its event loop: where recording the outcome would wait (the
    /// writer held in this process, another process's write lock, or the
    /// disk: with [`Durability::Full`](crate::Durability::Full) every
    /// commit is an fsync), nothing changes and the task and outcome come
    /// back, to be completed on a thread that may wait.
    pub fn try_complete(&self, task: Task, outcome: Outcome) -> Result<Completion> {
        let fsyncs = self.inner.db.options().durability == crate::Durability::Full;
        if fsyncs && outcome.writes() {
            return Ok(Completion::WouldWait(Box::new(task), outcome));
        }
        crate::without_waiting(|| match self.begin(&outcome) {
            Ok(tx) => self.record(task, outcome, tx).map(Completion::Done),
            Err(e) if e.kind() == ErrorKind::Busy => {
                Ok(Completion::WouldWait(Box::new(task), outcome))
            }
            Err(e) => {
                self.abandon(task);
                Err(e)
            }
        })
    }

    /// The write transaction `outcome` is recorded in, if it writes.
    fn begin(&self, outcome: &Outcome) -> Result<Option<Transaction>> {
        if outcome.writes() {
            self.inner.db.transaction_detached().map(Some)
        } else {
            Ok(None)
        }
    }

    /// Frees the slot of a task whose outcome could not be recorded: its
    /// job's lease lapses (it is not released: its handler did run).
    fn abandon(&self, mut task: Task) {
        task.done = true;
        self.inner.remove(task.key);
        self.inner.db.poke();
    }

    /// `complete` once the write transaction (when the outcome writes) is
    /// open: nothing from here on waits for a lock.
    fn record(&self, mut task: Task, outcome: Outcome, tx: Option<Transaction>) -> Result<Report> {
        task.done = true;
        let ran = task.started.elapsed();
        let inner = &self.inner;
        let (state, _recording) = inner.start_recording(task.key);
        let work = &task.work;
        let error = match &outcome {
            Outcome::Retry { error, .. } | Outcome::Permanent(error) => Some(error.clone()),
            _ => None,
        };
        let report = |finished| Report {
            job_id: work.id(),
            queue: task.queue_name.clone(),
            group: task.group_name.clone(),
            attempts: work.attempts(),
            finished,
            error: match finished {
                Finished::Retried(_) | Finished::Dead => error,
                _ => None,
            },
            ran,
        };
        let early = match &state {
            Some(r) if r.timed_out => Some(Finished::TimedOut),
            Some(r) if r.released => Some(Finished::Released),
            // Past its deadline before the clock saw it (a host that
            // cancelled the handler at the deadline): timed out all the same.
            Some(r) if r.live() && r.deadline.is_some_and(|d| d <= Instant::now()) => {
                work.time_out(r.timeout, tx.as_ref());
                Some(Finished::TimedOut)
            }
            _ => None,
        };
        let refill = match &tx {
            // Not for a release: its host is cancelling handlers, not
            // running more.
            Some(_)
                if state.is_some()
                    && !self.is_stopping()
                    && !matches!(outcome, Outcome::Release) =>
            {
                inner.reserve_next()
            }
            _ => None,
        };
        let done = match early {
            Some(finished) => Ok(finished),
            None => work.finish(outcome, tx.as_ref()),
        };
        let done = match done {
            Err(e) if e.kind() == ErrorKind::LeaseLost => Ok(Finished::LeaseLost),
            done => done,
        };
        if let (Some(tx), Ok(_)) = (tx, &done) {
            // A claim that fails leaves the outcome to commit alone; `next`
            // claims later.
            let jobs = match &refill {
                Some(r) => {
                    let (source, lease_ms) = inner.claim_args(r.slot);
                    source
                        .claim(Some(&tx), &inner.worker_id, r.n, lease_ms)
                        .unwrap_or_default()
                }
                None => Vec::new(),
            };
            tx.commit()?;
            if let Some(r) = refill {
                inner.buffer(r, jobs);
            }
        }
        // A free slot, or a claimed job: wake `next` (the commit woke it
        // before the job was buffered).
        inner.db.poke();
        done.map(report)
    }

    /// Stops claiming at once, without I/O (a signal handler may call
    /// it): a waiting [`next`](Self::next) returns `None`, and so does
    /// every later one. The jobs claimed but not handed out stay claimed
    /// until [`shutdown`](Self::shutdown). Idempotent.
    pub fn stop(&self) {
        self.inner.stopping.store(true, Ordering::SeqCst);
        // Closed, not joined: `stop` must not block (a host calls it from
        // its event loop); the thread ends at once and is joined on drop.
        if let Some(s) = self.inner.scheduler.lock().as_ref() {
            s.close();
        }
        self.inner.db.poke();
    }

    /// The scheduler this worker runs (`run_scheduler`, started by the
    /// first `next`, stopped by `stop`): its write transactions, its fires
    /// and its last error; `None` while it does not run.
    pub fn scheduler_counts(&self) -> Option<(u64, u64, Option<crate::Error>)> {
        let s = self.inner.scheduler.lock();
        s.as_ref().filter(|s| !s.runner().is_closed()).map(|s| {
            (
                s.runner().write_transactions(),
                s.runner().fires(),
                s.last_error(),
            )
        })
    }

    /// A shutdown signal (SIGTERM, SIGINT, or the host's own), the policy
    /// of every surface: the first begins a graceful shutdown
    /// ([`stop`](Self::stop)); one that comes while the worker is already
    /// stopping also ends the grace period at once
    /// ([`end_grace`](Self::end_grace)). Returns whether it did that (a
    /// second signal). No I/O: a signal handler may call it.
    pub fn signalled(&self) -> bool {
        let again = self.is_stopping();
        if again {
            self.end_grace();
        }
        self.stop();
        again
    }

    /// Ends the grace period of a running (or later) [`drain`](Self::drain)
    /// now, without I/O: a second Ctrl-C.
    pub fn end_grace(&self) {
        self.inner.hurry.store(true, Ordering::SeqCst);
        self.inner.db.poke();
    }

    /// How many times the worker has given up on running tasks so far
    /// (a generation: pass it to [`wait_gave_up`](Self::wait_gave_up)).
    pub fn gave_up_generation(&self) -> u64 {
        *self.inner.gave_up.generation.lock()
    }

    /// Waits up to `timeout` for the generation to move past `seen`: the
    /// worker gave up on a running task (its timeout, a lost lease, a
    /// shutdown's release; see [`Task::gave_up`]) or
    /// [`wake_gave_up`](Self::wake_gave_up) was called. Returns the
    /// generation then. The host looks at its running tasks after each
    /// return and cancels their handlers: told when it happens, where a
    /// poll of each task would learn it late. The giving up itself happens
    /// in [`next`](Self::next) and [`drain`](Self::drain), which the host
    /// keeps calling. [`TaskTable::wait_gave_up`](super::TaskTable::wait_gave_up)
    /// is this with the look.
    pub fn wait_gave_up(&self, seen: u64, timeout: Duration) -> u64 {
        let g = &self.inner.gave_up;
        let end = Instant::now() + timeout;
        let mut generation = g.generation.lock();
        while *generation == seen {
            if g.moved.wait_until(&mut generation, end).timed_out() {
                break;
            }
        }
        *generation
    }

    /// Moves the generation, so that every [`wait_gave_up`](Self::wait_gave_up)
    /// returns now (a host ending its wait, or one that kept a task
    /// [`given_up_early`](Task::given_up_early)).
    pub fn wake_gave_up(&self) {
        self.inner.gave_up_now();
    }

    /// [`stop`](Self::stop), and releases the jobs claimed but not handed
    /// out (no attempt spent). Running tasks go on; see
    /// [`drain`](Self::drain). Returns how many jobs were released.
    /// Idempotent.
    pub fn shutdown(&self) -> usize {
        self.stop();
        let jobs: Vec<Work> = {
            let mut st = self.inner.state.lock();
            let keys: Vec<u64> = st.buffered.drain(..).collect();
            keys.into_iter()
                .filter_map(|k| st.take(k))
                .map(|r| r.work)
                .collect()
        };
        jobs.into_iter().filter(|j| j.release().is_ok()).count()
    }

    /// After [`shutdown`](Self::shutdown): waits up to `grace` for the
    /// running tasks to complete, renewing their leases meanwhile, then
    /// releases the jobs of those still running (no attempt spent) so
    /// another process takes them at once; their outcomes, when they come,
    /// are discarded (`Finished::Released`). Their handlers may still be
    /// running when the job runs again elsewhere: at-least-once.
    pub fn drain(&self, grace: Duration) -> Result<DrainReport> {
        let inner = &self.inner;
        self.shutdown();
        validate::delay("grace", grace)?;
        let end = Instant::now() + grace;
        let signal = inner.db.wait_signal()?;
        loop {
            let seen = signal.generation();
            let due = inner.tick();
            {
                let st = inner.state.lock();
                if st.recording == 0 && !st.running.values().any(Running::live) {
                    return Ok(DrainReport::default());
                }
            }
            let now = Instant::now();
            if now >= end || inner.hurry.load(Ordering::SeqCst) {
                break;
            }
            let wake = due.map_or(end, |d| d.min(end));
            signal.wait_past(seen, wake.max(now));
        }
        let jobs: Vec<Work> = {
            let mut st = inner.state.lock();
            st.running
                .values_mut()
                .filter(|r| r.live())
                .map(|r| {
                    r.released = true;
                    r.work.clone()
                })
                .collect()
        };
        if !jobs.is_empty() {
            inner.gave_up_now();
        }
        let released = jobs.iter().filter(|j| j.release().is_ok()).count();
        Ok(DrainReport { released })
    }

    /// A task already claimed (a completion's refill), without waiting and
    /// without the one outstanding [`next`](Self::next): for the host
    /// thread that just completed a task, so it starts the next one itself
    /// instead of waiting for `next`'s thread to hand it over. `None` when
    /// nothing is claimed or the worker is stopping.
    pub fn try_next(&self) -> Option<Task> {
        if self.is_stopping() {
            return None;
        }
        self.hand_out()
    }

    fn hand_out(&self) -> Option<Task> {
        let mut st = self.inner.state.lock();
        let key = st.buffered.pop_front()?;
        let slot = st.running[&key].slot;
        let timeout = st.queues[slot].timeout;
        let name = st.queues[slot].source.name().to_owned();
        let group_name = st.queues[slot].source.group().map(str::to_owned);
        let route = if st.queues[slot].every {
            Route::Every
        } else {
            Route::of(&st.running[&key].work, &name, &st.queues[slot].tasks)
        };
        let now = Instant::now();
        let r = st
            .running
            .get_mut(&key)
            .expect("a buffered task is running");
        r.deadline = timeout.map(|t| now + t);
        let given_up_early = !r.live();
        Some(Task {
            work: r.work.clone(),
            key,
            queue_name: name,
            group_name,
            deadline: r.deadline,
            started: now,
            worker: Arc::clone(&self.inner),
            done: false,
            given_up_early,
            route,
        })
    }
}

impl State {
    fn take(&mut self, key: u64) -> Option<Running> {
        let r = self.running.remove(&key)?;
        self.queues[r.slot].running -= 1;
        Some(r)
    }

    /// How many jobs a claim for `slot` may take now, within the
    /// worker's `limit` and the queue's.
    fn free(&self, limit: usize, slot: usize) -> usize {
        let q = &self.queues[slot];
        let global = limit.saturating_sub(self.running.len() + self.reserved);
        global.min(q.limit.saturating_sub(q.running + q.reserved))
    }

    /// The queues' slots, from where the last claim round stopped.
    fn in_turn(&self) -> impl Iterator<Item = usize> + '_ {
        let n = self.queues.len();
        (0..n).map(move |i| (self.round + i) % n)
    }

    fn unreserve(&mut self, slot: usize, n: usize) {
        self.reserved -= n;
        self.queues[slot].reserved -= n;
    }
}

impl Inner {
    /// Moves [`GaveUp`]'s generation and wakes its waiters.
    fn gave_up_now(&self) {
        *self.gave_up.generation.lock() += 1;
        self.gave_up.moved.notify_all();
    }

    fn flag(&self, key: u64, f: impl Fn(&Running) -> bool) -> bool {
        self.state.lock().running.get(&key).is_some_and(f)
    }

    fn remove(&self, key: u64) -> Option<Running> {
        let mut st = self.state.lock();
        st.buffered.retain(|k| *k != key);
        st.take(key)
    }

    /// [`remove`](Self::remove) for an outcome being recorded: counted in
    /// `State::recording` until the returned guard drops (after the commit,
    /// or on any error), under the same lock, so `drain` never sees the task
    /// gone before its outcome is in the file.
    fn start_recording(&self, key: u64) -> (Option<Running>, Recording<'_>) {
        let mut st = self.state.lock();
        st.buffered.retain(|k| *k != key);
        st.recording += 1;
        (st.take(key), Recording(self))
    }

    /// Queues with room, from where the last round stopped.
    fn free_slots(&self) -> Vec<usize> {
        let st = self.state.lock();
        st.in_turn()
            .filter(|&slot| st.free(self.limit, slot) > 0)
            .collect()
    }

    /// Sets aside what a claim for `slot` may take now; None if nothing.
    fn reserve(&self, slot: usize) -> Option<Reservation<'_>> {
        let mut st = self.state.lock();
        self.reserve_in(&mut st, slot)
    }

    /// [`reserve`](Self::reserve) for the first queue with room, from where
    /// the last round stopped (a completion's refill), under one lock.
    fn reserve_next(&self) -> Option<Reservation<'_>> {
        let mut st = self.state.lock();
        let slot = st.in_turn().find(|&slot| st.free(self.limit, slot) > 0)?;
        self.reserve_in(&mut st, slot)
    }

    fn reserve_in(&self, st: &mut State, slot: usize) -> Option<Reservation<'_>> {
        let n = st.free(self.limit, slot);
        if n == 0 {
            return None;
        }
        st.reserved += n;
        st.queues[slot].reserved += n;
        Some(Reservation {
            inner: self,
            slot,
            n,
        })
    }

    /// A look at `slot`'s queue: `held` when a pause held its due work
    /// back (counted), else the queue leaves [`Worker::paused`].
    fn saw_held(&self, slot: usize, held: bool) {
        let mut st = self.state.lock();
        if held {
            let name = st.queues[slot].source.name().to_owned();
            *st.paused.entry(name).or_insert(0) += 1;
        } else if !st.paused.is_empty() {
            let name = st.queues[slot].source.name().to_owned();
            st.paused.remove(&name);
        }
    }

    /// What a claim for `slot` needs: the source and its lease.
    fn claim_args(&self, slot: usize) -> (Source, i64) {
        let st = self.state.lock();
        (st.queues[slot].source.clone(), st.queues[slot].lease_ms)
    }

    /// Takes claimed jobs into the reserved slots; false (after releasing
    /// them) if the worker began stopping meanwhile.
    fn buffer(&self, mut r: Reservation<'_>, jobs: Vec<Work>) -> bool {
        let slot = r.slot;
        let mut st = self.state.lock();
        st.unreserve(slot, std::mem::take(&mut r.n));
        if self.stopping.load(Ordering::SeqCst) {
            drop(st);
            for j in jobs {
                let _ = j.release();
            }
            return false;
        }
        let (lease, timeout) = (st.queues[slot].lease, st.queues[slot].timeout);
        let now = Instant::now();
        st.round = slot + 1;
        for work in jobs {
            let key = st.next_key;
            st.next_key += 1;
            st.queues[slot].running += 1;
            st.buffered.push_back(key);
            st.running.insert(
                key,
                Running {
                    slot,
                    work,
                    lease,
                    renew_at: now + lease / RENEW_DIVISOR,
                    deadline: None,
                    timeout,
                    timed_out: false,
                    lost: false,
                    released: false,
                },
            );
        }
        true
    }

    /// Renews the leases that are due and retries the jobs of handlers
    /// past their deadline; returns when it next has something to do.
    fn tick(&self) -> Option<Instant> {
        let now = Instant::now();
        let mut lost = false;
        let (renew, expired) = {
            let mut st = self.state.lock();
            let mut renew = Vec::new();
            let mut expired: Vec<(Work, Option<Duration>)> = Vec::new();
            for (key, r) in st.running.iter_mut().filter(|(_, r)| r.live()) {
                if r.deadline.is_some_and(|d| d <= now) {
                    r.timed_out = true;
                    expired.push((r.work.clone(), r.timeout));
                } else if r.renew_at <= now {
                    renew.push((*key, r.work.clone(), r.lease));
                }
            }
            (renew, expired)
        };
        // Told before the retry is written: the handler's outcome no
        // longer counts either way.
        if !expired.is_empty() {
            self.gave_up_now();
        }
        for (work, timeout) in expired {
            work.time_out(timeout, None);
        }
        for (key, work, lease) in renew {
            let result = work.heartbeat(lease);
            let mut st = self.state.lock();
            if let Some(r) = st.running.get_mut(&key) {
                match result {
                    Ok(_) => r.renew_at = Instant::now() + lease / RENEW_DIVISOR,
                    Err(e) if lease_gone(e.kind()) => {
                        r.lost = true;
                        lost = true;
                    }
                    Err(_) => r.renew_at = Instant::now() + RENEW_RETRY.min(lease / RENEW_DIVISOR),
                }
            }
        }
        if lost {
            self.gave_up_now();
        }
        let st = self.state.lock();
        st.running
            .values()
            .filter(|r| r.live())
            .flat_map(|r| [Some(r.renew_at), r.deadline])
            .flatten()
            .min()
    }
}
