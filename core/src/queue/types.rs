//! The queue's value types: options for each verb, the [`Job`] a claim hands
//! out, and what inspection returns ([`JobInfo`], [`QueueStats`]).

use std::time::Duration;

use crate::clock::duration_ms;
use crate::error::{Error, Result};
use crate::options::{check_attempts, Backoff, QueueOptions};
use crate::payload::Payload;
use crate::trace::TraceContext;
#[cfg(feature = "rusqlite")]
use crate::transaction::Transaction;
use crate::validate;

use super::ops::NewJob;
#[cfg(feature = "rusqlite")]
use super::Queue;

/// Options for [`Queue::enqueue`]. Every field defaults to "not set", which
/// means: run now, priority 0, the queue's `max_attempts` and backoff, no
/// dedupe key, never expires.
///
/// ```
/// # fn main() -> honker::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = honker::Database::open(dir.path().join("app.db"))?;
/// use honker::EnqueueOptions;
/// use std::time::Duration;
///
/// let q = db.queue("invoices")?;
/// let once = EnqueueOptions {
///     dedupe_key: Some("invoice-2026-11".into()),
///     delay: Some(Duration::from_secs(3600)),
///     priority: 10,
///     ..Default::default()
/// };
/// let first = q.enqueue(serde_json::json!({"month": "2026-11"}), &once)?;
/// let again = q.enqueue(serde_json::json!({"month": "2026-11"}), &once)?;
/// assert_eq!((again.id, again.existing), (first.id, true));
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EnqueueOptions {
    /// Run no earlier than this long from now. Exclusive with `run_at`.
    pub delay: Option<Duration>,
    /// Run no earlier than this time (ms since the Unix epoch; a past time
    /// means now). Exclusive with `delay`.
    pub run_at: Option<i64>,
    /// Higher runs first among due jobs. Defaults to 0.
    pub priority: i32,
    /// Overrides the queue's `max_attempts`.
    pub max_attempts: Option<u32>,
    /// While a live (ready, scheduled or running) job of this queue holds the
    /// same key, enqueue returns that job's id with `existing = true` instead
    /// of adding a duplicate. Enforced by a unique index, so it is race-free
    /// across processes. Up to 512 bytes. `unique` says how long it holds.
    pub dedupe_key: Option<String>,
    /// The dedupe key is the payload's digest (of its JSON value: keys in
    /// any order, any spacing, `10` and `10.0` alike; of its bytes
    /// otherwise), after `dedupe_key` when both are given: the same payload
    /// is one job. The digest (128-bit FNV-1a) tells payloads apart, but is
    /// not made to resist a producer that crafts collisions.
    pub dedupe_by_payload: bool,
    /// How the dedupe key holds (ADR 37): `"live"` (the default: while its
    /// job is live), `"period"` (also for `unique_for` after its job
    /// completed), `"throttle"` (also for `unique_for` after the enqueue
    /// that added the job, whatever the job does), `"debounce"` (an enqueue
    /// meeting a pending job replaces its payload, run time, priority,
    /// expiry and trace context; one meeting a running job adds a new job,
    /// which takes the key). [`Enqueued::unique`] says which one acted.
    pub unique: Option<String>,
    /// The period of `unique = "period"` or `"throttle"` (1 ms to 366 days).
    pub unique_for: Option<Duration>,
    /// If the job has not started this long after enqueue, it is moved to the
    /// finished records as `expired` and never runs. Must end after `run_at`.
    pub expires: Option<Duration>,
    /// Overrides the queue's retry backoff for this job.
    pub backoff: Option<Backoff>,
    /// The job's key for the queue's `max_running_per_key` (ADR 35): at most
    /// that many jobs of one key run at once, across every process. A job
    /// without one counts against the queue's `max_running` only. Up to 512
    /// bytes.
    pub concurrency_key: Option<String>,
    /// The producer's W3C trace context, stored beside the job (never in its
    /// payload) and handed to its handler ([`Job::trace_context`]). Python
    /// and Node fill it from the active OpenTelemetry span.
    pub trace_context: Option<TraceContext>,
}

impl EnqueueOptions {
    /// The checks that do not depend on the time (every surface runs them
    /// before writing).
    pub(crate) fn check(&self) -> Result<()> {
        if self.delay.is_some() && self.run_at.is_some() {
            return Err(Error::invalid("give either delay or run_at, not both"));
        }
        if let Some(d) = self.delay {
            validate::delay("delay", d)?;
        }
        if let Some(t) = self.run_at {
            validate::timestamp_ms("run_at", t)?;
        }
        if let Some(e) = self.expires {
            validate::delay("expires", e)?;
        }
        if let Some(n) = self.max_attempts {
            check_attempts(n)?;
        }
        if let Some(k) = &self.dedupe_key {
            validate::key("dedupe key", k)?;
        }
        self.unique_mode()?;
        if let Some(k) = &self.concurrency_key {
            validate::key("concurrency key", k)?;
        }
        if let Some(b) = &self.backoff {
            b.validate()?;
        }
        Ok(())
    }

    /// The mode of `unique` with its period, checked against the key options.
    fn unique_mode(&self) -> Result<Unique> {
        let mode = match self.unique.as_deref() {
            None => None,
            Some(m) => Some(UniqueMode::parse(m)?),
        };
        let keyed = self.dedupe_key.is_some() || self.dedupe_by_payload;
        if mode.is_some() && !keyed {
            return Err(Error::invalid(
                "unique needs a key to hold: give dedupe_key or dedupe_by_payload",
            ));
        }
        let period = match self.unique_for {
            Some(d) => {
                let max = crate::rate::MAX_PER;
                if d < Duration::from_millis(1) || d > max {
                    return Err(Error::invalid(format!(
                        "unique_for must be between 1 ms and {} days, got {}",
                        max.as_secs() / 86_400,
                        crate::options::human(d)
                    )));
                }
                Some(duration_ms(d))
            }
            None => None,
        };
        match (mode.unwrap_or(UniqueMode::Live), period) {
            (UniqueMode::Period, Some(ms)) => Ok(Unique::Period(ms)),
            (UniqueMode::Throttle, Some(ms)) => Ok(Unique::Throttle(ms)),
            (m @ (UniqueMode::Period | UniqueMode::Throttle), None) => {
                Err(Error::invalid(format!(
                    "unique = {:?} needs unique_for (how long the key holds)",
                    m.as_str()
                )))
            }
            (UniqueMode::Live, None) => Ok(Unique::Live),
            (UniqueMode::Debounce, None) => Ok(Unique::Debounce),
            (m, Some(_)) => Err(Error::invalid(format!(
                "unique_for is the period of unique = \"period\" or \"throttle\", not of {:?}",
                m.as_str()
            ))),
        }
    }

    /// The row to insert at `now`, with `defaults` filling what is not set.
    pub(crate) fn resolve(&self, defaults: &QueueOptions, now: i64) -> Result<NewJob<'_>> {
        let run_at = match (self.run_at, self.delay) {
            (Some(t), _) => t,
            (None, Some(d)) => now.saturating_add(duration_ms(d)),
            (None, None) => now,
        };
        let expires_at = self.expires.map(|e| now.saturating_add(duration_ms(e)));
        if expires_at.is_some_and(|e| e <= run_at) {
            return Err(Error::invalid(
                "expires must end after the job is due (it would never run)",
            ));
        }
        let backoff = self.backoff.unwrap_or(defaults.backoff);
        Ok(NewJob {
            priority: self.priority,
            run_at,
            max_attempts: self.max_attempts.unwrap_or(defaults.max_attempts),
            backoff_base_ms: duration_ms(backoff.base),
            backoff_max_ms: duration_ms(backoff.max),
            backoff_jitter: backoff.jitter,
            dedupe_key: self.dedupe_key.as_deref(),
            dedupe_by_payload: self.dedupe_by_payload,
            unique: self.unique_mode()?,
            concurrency_key: self.concurrency_key.as_deref(),
            expires_at,
            trace_context: self.trace_context.as_ref().map(TraceContext::to_json),
        })
    }
}

/// What [`Queue::enqueue`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Enqueued {
    /// The job's id (the existing job's, when deduplicated).
    pub id: i64,
    /// True when the dedupe key was held and nothing was added: `id` names
    /// the job that holds it (live, or finished under `period` or
    /// `throttle`), which `debounce` may have updated.
    pub existing: bool,
    /// Which mode acted when nothing was added (`None` when a job was).
    pub unique: Option<UniqueMode>,
}

/// How a dedupe key holds (`EnqueueOptions::unique`, ADR 37).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UniqueMode {
    /// While its job is live (ready, scheduled or running).
    Live,
    /// While its job is live, and for a period after it completed.
    Period,
    /// While its job is live, and for a period after the enqueue that added it.
    Throttle,
    /// While its job is live; an enqueue meeting it pending replaces it.
    Debounce,
}

impl UniqueMode {
    /// Every mode, in the order of their codes (0 to 3).
    pub const ALL: [UniqueMode; 4] = [
        UniqueMode::Live,
        UniqueMode::Period,
        UniqueMode::Throttle,
        UniqueMode::Debounce,
    ];

    /// Its name (`"live"`, `"period"`, `"throttle"`, `"debounce"`).
    pub fn as_str(self) -> &'static str {
        match self {
            UniqueMode::Live => "live",
            UniqueMode::Period => "period",
            UniqueMode::Throttle => "throttle",
            UniqueMode::Debounce => "debounce",
        }
    }

    /// The mode named `name`.
    pub fn parse(name: &str) -> Result<UniqueMode> {
        UniqueMode::ALL
            .into_iter()
            .find(|m| m.as_str() == name)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "unique must be \"live\", \"period\", \"throttle\" or \"debounce\", got {name:?}"
                ))
            })
    }
}

/// A resolved `unique` with its period (ms).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unique {
    Live,
    Period(i64),
    Throttle(i64),
    Debounce,
}

/// A pause of one queue, or of all (ADR 33).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pause {
    /// Whether it is the pause of all queues (`Database::pause_all`).
    pub all: bool,
    /// The note given with it, if any.
    pub note: Option<String>,
    /// When it was paused (ms since the Unix epoch).
    pub since: i64,
}

/// Options for [`Queue::pause`](crate::Queue::pause) and
/// [`Database::pause_all`](crate::Database::pause_all).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PauseOptions {
    /// A note shown with the pause (`honker status`, `queues list`): why,
    /// who, until when. Up to 512 bytes.
    pub note: Option<String>,
}

/// A queue's concurrency caps (ADR 35), for every process and language:
/// set by [`Queue::limit_concurrency`](crate::Queue::limit_concurrency),
/// shown in [`QueueStats`]. Each claim counts, in its own transaction, the
/// jobs holding an unexpired lease, so no claim takes a job past a cap. A
/// holder whose lease lapsed may still be running (a lapsed lease is
/// honoured until a claim reclaims it): its slot is free from the moment
/// the lease ends, which is also when a killed holder's slot comes back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Concurrency {
    /// At most this many of the queue's jobs run at once (1 to 1,000,000;
    /// `None`: no cap).
    pub max_running: Option<u32>,
    /// At most this many jobs of one `concurrency_key` (an enqueue option)
    /// run at once (1 to 1,000,000; `None`: no cap). Jobs without a key are
    /// not counted here.
    pub max_running_per_key: Option<u32>,
}

impl Concurrency {
    /// Most a cap may be.
    pub const MAX: u32 = 1_000_000;

    /// Checks both caps.
    pub(crate) fn check(&self) -> Result<()> {
        for (what, cap) in [
            ("max_running", self.max_running),
            ("max_running_per_key", self.max_running_per_key),
        ] {
            if let Some(n) = cap {
                if n == 0 || n > Self::MAX {
                    return Err(Error::invalid(format!(
                        "{what} must be between 1 and {} (pause the queue to run none), got {n}",
                        Self::MAX
                    )));
                }
            }
        }
        Ok(())
    }
}

/// How a queue shares its claims among its `concurrency_key`s (issue 56
/// §3, ADR 36), for every process and language: set by
/// [`Queue::set_fairness`](crate::Queue::set_fairness), shown in
/// [`QueueStats`]. A field not given is its default: priority order, no
/// limit per key.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Fairness {
    /// The claim order: `"priority"` (the default: priority, then age) or
    /// `"round_robin"` (priority, then each key in turn, then age: a key
    /// with 10,000 waiting jobs takes one turn per round like a key with
    /// one). Jobs without a key take no turn: they go first among their
    /// priority.
    pub order: Option<String>,
    /// At most this many of one key's jobs start per `key_per` (a rate
    /// limit per key, GCRA like the queue's): a claim steps over a key at
    /// its limit and takes the next key's job. 1 to 10⁹.
    pub key_limit: Option<u32>,
    /// The period of `key_limit` (1 ms to 366 days, whole milliseconds).
    pub key_per: Option<Duration>,
    /// How many of one key's jobs may start at once after it idled (1 by
    /// default; 1 to 10⁹).
    pub key_burst: Option<u32>,
}

impl Fairness {
    /// The order's stored value.
    pub(crate) const ROUND_ROBIN: &'static str = "round_robin";
    const PRIORITY: &'static str = "priority";

    /// Checked: whether it takes turns, and its rate limit per key.
    pub(crate) fn parse(&self) -> Result<(bool, Option<crate::rate::RateLimit>)> {
        let round_robin = match self.order.as_deref() {
            None | Some(Self::PRIORITY) => false,
            Some(Self::ROUND_ROBIN) => true,
            Some(other) => {
                return Err(Error::invalid(format!(
                    "order must be \"priority\" or \"round_robin\", got {other:?}"
                )))
            }
        };
        let limit = match (self.key_limit, self.key_per) {
            (None, None) if self.key_burst.is_none() => None,
            (Some(limit), Some(per)) => {
                let l = crate::rate::RateLimit::new(i64::from(limit), per)
                    .burst(i64::from(self.key_burst.unwrap_or(1)));
                l.check()?;
                Some(l)
            }
            _ => return Err(Error::invalid(
                "a rate limit per key takes key_limit and key_per (and key_burst only with them)",
            )),
        };
        Ok((round_robin, limit))
    }
}

/// Options for [`Queue::claim_with`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClaimOptions {
    /// Lease length. Defaults to the queue's `lease`.
    pub lease: Option<Duration>,
    /// How long to wait for work when none is claimable. Defaults to zero
    /// (return at once, possibly empty). While waiting, the claimer sleeps
    /// until a commit from any process or the next scheduled job makes work
    /// claimable, and only then takes the write lock.
    pub wait: Duration,
}

/// Options for [`Queue::retry`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RetryOptions {
    /// Exact delay before the next attempt. Defaults to the job's backoff
    /// (exponential with jitter).
    pub delay: Option<Duration>,
    /// The error to record (shown in dead letters). At most 4 KiB are kept.
    pub error: Option<String>,
}

/// Proof of a lease: the job id and the token its claim handed out. Every
/// write on a claimed job presents one; a stale one gets `LEASE_LOST`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Lease {
    /// The job's id.
    pub job_id: i64,
    /// The claim's random token.
    pub token: String,
}

/// A claimed job, leased to the claimer until `lease_expires_at`.
///
/// Its methods act on the job through the queue it came from, presenting its
/// lease token.
#[cfg(feature = "rusqlite")]
#[derive(Clone, Debug)]
pub struct Job {
    /// Unique, never reused.
    pub id: i64,
    /// What the producer enqueued.
    pub payload: Payload,
    /// Claims so far, including this one (1 on the first run).
    pub attempts: u32,
    /// Attempts allowed before the job is dead-lettered.
    pub max_attempts: u32,
    /// The job's priority.
    pub priority: i32,
    /// When the job became due (ms).
    pub run_at: i64,
    /// When the job was enqueued (ms).
    pub created_at: i64,
    /// When the lease lapses unless extended (ms).
    pub lease_expires_at: i64,
    /// The worker id given to the claim.
    pub worker_id: String,
    /// The lease.
    pub lease: Lease,
    /// The producer's W3C trace context, if it had one: continue the trace
    /// from it (the worker runtimes of Python and Node do so around the
    /// handler).
    pub trace_context: Option<TraceContext>,
    pub(crate) queue: Queue,
}

#[cfg(feature = "rusqlite")]
impl Job {
    /// The queue the job came from.
    pub fn queue(&self) -> &Queue {
        &self.queue
    }

    /// Completes the job (see [`Queue::ack`]).
    pub fn ack(&self) -> Result<()> {
        self.queue.ack(&self.lease, None)
    }

    /// Completes the job and saves `result` with it atomically.
    pub fn ack_with_result(&self, result: impl Into<Payload>) -> Result<()> {
        self.queue.ack(&self.lease, Some(result.into()))
    }

    /// Completes the job inside `tx`, so its effects and its completion commit
    /// together.
    pub fn ack_tx(&self, tx: &Transaction, result: Option<Payload>) -> Result<()> {
        self.queue.ack_tx(tx, &self.lease, result)
    }

    /// See [`Queue::retry`].
    pub fn retry(&self, options: &RetryOptions) -> Result<JobState> {
        self.queue.retry(&self.lease, options)
    }

    /// See [`Queue::fail`].
    pub fn fail(&self, error: &str) -> Result<()> {
        self.queue.fail(&self.lease, error)
    }

    /// See [`Queue::release`].
    pub fn release(&self) -> Result<()> {
        self.queue.release(&self.lease)
    }

    /// See [`Queue::heartbeat`]. Returns the new lease expiry (ms).
    pub fn heartbeat(&self, extend: Option<Duration>) -> Result<i64> {
        self.queue.heartbeat(&self.lease, extend)
    }

    /// See [`Queue::snooze`].
    pub fn snooze(&self, delay: Duration) -> Result<JobState> {
        self.queue.snooze(&self.lease, delay)
    }
}

/// Where a job is in its life (`docs/state-machines.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum JobState {
    /// Due now, waiting for a worker.
    Ready,
    /// Waiting for its `run_at`.
    Scheduled,
    /// Leased to a worker.
    Running,
    /// Attempts exhausted, failed, or lease lapsed on the last attempt.
    Dead,
    /// Cancelled before it finished.
    Cancelled,
    /// Not started before its expiry.
    Expired,
    /// Acked (only kept when `Retention::completed` is positive).
    Completed,
}

impl JobState {
    /// Lower-case name, as stored and shown by every surface.
    pub const fn as_str(self) -> &'static str {
        match self {
            JobState::Ready => "ready",
            JobState::Scheduled => "scheduled",
            JobState::Running => "running",
            JobState::Dead => "dead",
            JobState::Cancelled => "cancelled",
            JobState::Expired => "expired",
            JobState::Completed => "completed",
        }
    }

    /// Every state, live ones first.
    pub const ALL: [JobState; 7] = [
        JobState::Ready,
        JobState::Scheduled,
        JobState::Running,
        JobState::Dead,
        JobState::Cancelled,
        JobState::Expired,
        JobState::Completed,
    ];

    /// The state named `s`.
    pub fn parse(s: &str) -> Option<JobState> {
        JobState::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// Whether the job is done for good (no further run without a requeue).
    pub fn is_finished(self) -> bool {
        !matches!(
            self,
            JobState::Ready | JobState::Scheduled | JobState::Running
        )
    }
}

/// What [`Queue::retry_now`] did with a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryNow {
    /// It was scheduled (delayed, or waiting out a retry's backoff) and is
    /// ready now, its attempts kept.
    MadeReady,
    /// It was a dead letter and is ready again, its attempts reset.
    Requeued,
    /// Nothing changed; the job is in this state: `Ready` (ready already),
    /// `Running` (its worker decides), `Dead` (a live job holds its dedupe
    /// key), or finished (`Cancelled`, `Expired`, `Completed`).
    Unchanged(JobState),
}

/// Everything known about a job, in any state ([`Queue::get_job`],
/// [`Queue::dead_letters`]). The lease token is not included.
#[derive(Clone, Debug, PartialEq)]
pub struct JobInfo {
    /// The job's id.
    pub id: i64,
    /// Its queue.
    pub queue: String,
    /// Its logical state (a scheduled job that is due reports `Ready`).
    pub state: JobState,
    /// Its payload.
    pub payload: Payload,
    /// Its priority.
    pub priority: i32,
    /// When it is (or was) due (ms).
    pub run_at: i64,
    /// Claims so far.
    pub attempts: u32,
    /// Attempts allowed.
    pub max_attempts: u32,
    /// Its dedupe key, if any.
    pub dedupe_key: Option<String>,
    /// Its expiry (ms), if any.
    pub expires_at: Option<i64>,
    /// When it was enqueued (ms).
    pub created_at: i64,
    /// The worker holding (or that last held) it.
    pub worker_id: Option<String>,
    /// The last error, or the cancel reason.
    pub last_error: Option<String>,
    /// The producer's W3C trace context, if it had one.
    pub trace_context: Option<TraceContext>,
    /// Its concurrency key, if any (ADR 35).
    pub concurrency_key: Option<String>,
    /// When the current lease lapses (running jobs only).
    pub lease_expires_at: Option<i64>,
    /// When it finished (finished jobs only).
    pub finished_at: Option<i64>,
}

impl JobInfo {
    /// A row of `info_columns!`; a damaged one is `SQLITE_CORRUPT` naming
    /// the job.
    pub(crate) fn from_row(r: &crate::raw::Row<'_>, now: i64) -> Result<JobInfo> {
        let id: i64 = r.get(0)?; // INTEGER PRIMARY KEY: always an integer
        Self::decode(r, now).map_err(|e| e.for_job(id))
    }

    fn decode(r: &crate::raw::Row<'_>, now: i64) -> Result<JobInfo> {
        let stored: String = r.get(2)?;
        let run_at: i64 = r.get(5)?;
        let state = match JobState::parse(&stored) {
            Some(JobState::Scheduled) if run_at <= now => JobState::Ready,
            Some(s) => s,
            None => return Err(Error::internal(format!("unknown job state {stored:?}"))),
        };
        Ok(JobInfo {
            id: r.get(0)?,
            queue: r.get(1)?,
            state,
            payload: r.get(3)?,
            priority: r.get(4)?,
            run_at,
            attempts: r.get(6)?,
            max_attempts: r.get(7)?,
            dedupe_key: r.get(8)?,
            expires_at: r.get(9)?,
            created_at: r.get(10)?,
            worker_id: r.get(11)?,
            last_error: r.get(12)?,
            trace_context: r.get::<crate::trace::Stored>(13)?.0,
            concurrency_key: r.get(14)?,
            lease_expires_at: r.get(15)?,
            finished_at: r.get(16)?,
        })
    }
}

/// Counts for one queue ([`Queue::stats`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Due and waiting for a worker.
    pub ready: u64,
    /// Waiting for a future `run_at`.
    pub scheduled: u64,
    /// Leased to a worker (including `lapsed`).
    pub running: u64,
    /// Running jobs whose lease has lapsed (the next claim reclaims them).
    pub lapsed: u64,
    /// Dead letters.
    pub dead: u64,
    /// Cancelled jobs still retained.
    pub cancelled: u64,
    /// Expired jobs still retained.
    pub expired: u64,
    /// Completed jobs still retained (only with `Retention::completed`).
    pub completed: u64,
    /// How long the oldest due job has waited (ms), if any is due.
    pub oldest_ready_age_ms: Option<i64>,
    /// Paused (by its own pause or all queues'): no claim returns its jobs.
    pub paused: bool,
    /// Its cap on running jobs, if any ([`Concurrency`]).
    pub max_running: Option<u32>,
    /// Its cap on running jobs per concurrency key, if any.
    pub max_running_per_key: Option<u32>,
    /// Its claims take its keys in turn ([`Fairness`]'s `round_robin`).
    pub round_robin: bool,
    /// Its rate limit per concurrency key, if any: starts per `key_per_ms`.
    pub key_limit: Option<u32>,
    /// The period of `key_limit` (ms).
    pub key_per_ms: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::JobState;

    /// `docs/state-machines.md` draws every state the code has.
    #[test]
    fn the_state_machine_doc_names_every_state() {
        let doc = include_str!("../../../docs/state-machines.md");
        for s in JobState::ALL {
            assert!(doc.contains(s.as_str()), "state {} missing", s.as_str());
            assert_eq!(JobState::parse(s.as_str()), Some(s));
        }
        for verb in [
            "claim",
            "ack",
            "retry",
            "fail",
            "release",
            "snooze",
            "cancel",
            "requeue_dead",
            "heartbeat",
        ] {
            assert!(doc.contains(verb), "verb {verb} missing");
        }
    }
}
