//! What a handler decided ([`Outcome`]), what became of its task
//! ([`Finished`], [`Report`], [`Completion`], [`DrainReport`]), and how an
//! outcome is written: the vocabulary every binding's worker adapter shares
//! with [`Worker`](super::Worker).

use std::time::Duration;

use super::worker::Task;
#[cfg(doc)]
use super::Worker;
use crate::error::{Error, ErrorKind, Result};
use crate::payload::Payload;
use crate::queue::{Job, JobState, RetryOptions};
use crate::transaction::Transaction;

/// What a handler decided.
#[derive(Debug)]
pub enum Outcome {
    /// Done: ack, with a result when given.
    Ack(Option<Payload>),
    /// A transient failure: retried after `delay` (default: the queue's
    /// backoff), or dead-lettered when attempts are spent.
    Retry {
        /// Overrides the backoff.
        delay: Option<Duration>,
        /// Recorded as the job's last error.
        error: String,
    },
    /// A failure no retry can fix (an invalid address): dead-lettered now.
    Permanent(String),
    /// Not now: run again after `delay`, no attempt spent.
    Snooze(Duration),
    /// Give the job back now, no attempt spent (the handler was cancelled
    /// by its host, not by a failure of the job).
    Release,
    /// The handler finished the job itself (acked it inside its own
    /// transaction, with the effect it recorded): only the slot is freed.
    Settled,
}

impl Outcome {
    /// The outcome a language adapter names: `ack` (with `result`),
    /// `retry` (`delay`, `error`), `permanent` (`error`), `snooze`
    /// (`delay`), `release`, `settled` or `unstorable` (the handler's
    /// result could not be encoded, `error` says why: a retry); the one
    /// vocabulary of every binding. Anything else is `InvalidArgument`.
    pub fn named(
        kind: &str,
        result: Option<Payload>,
        delay: Option<Duration>,
        error: Option<String>,
    ) -> Result<Outcome> {
        Ok(match kind {
            "ack" => Outcome::Ack(result),
            "retry" => Outcome::Retry {
                delay,
                error: error.unwrap_or_default(),
            },
            "permanent" => Outcome::Permanent(error.unwrap_or_default()),
            "snooze" => Outcome::Snooze(delay.unwrap_or(Duration::ZERO)),
            "release" => Outcome::Release,
            "settled" => Outcome::Settled,
            // The handler returned, but what it returned cannot be stored
            // as the job's result (not JSON): the job was not done, so it
            // runs again; `error` says why the host could not encode it.
            "unstorable" => Outcome::Retry {
                delay: None,
                error: format!(
                    "the handler's result could not be stored: {}",
                    error.unwrap_or_default()
                ),
            },
            other => {
                return Err(Error::invalid(format!(
                    "unknown outcome {other:?}: ack, retry, permanent, snooze, release, settled or unstorable"
                )))
            }
        })
    }
}

impl Outcome {
    /// Whether recording it writes (all but [`Outcome::Settled`]).
    pub(super) fn writes(&self) -> bool {
        !matches!(self, Outcome::Settled)
    }
}

/// What [`Worker::try_complete`](super::Worker::try_complete) did.
#[derive(Debug)]
pub enum Completion {
    /// Recorded, as [`Worker::complete`] reports it.
    Done(Report),
    /// Recording would have waited: nothing changed; complete the task on
    /// a thread that may wait.
    WouldWait(Box<Task>, Outcome),
}

/// What became of a task ([`Report::finished`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finished {
    /// Acked.
    Acked,
    /// Retried: the job's new state (`Ready`, `Scheduled`, or `Dead` when
    /// its attempts were spent).
    Retried(JobState),
    /// Dead-lettered by a permanent error.
    Dead,
    /// Snoozed: the job's new state.
    Snoozed(JobState),
    /// The handler overran its timeout: the job was retried then, and this
    /// outcome was discarded.
    TimedOut,
    /// The lease was lost (it lapsed and another worker holds the job, or
    /// the job was cancelled): the outcome was refused.
    LeaseLost,
    /// The job was released (no attempt spent): the task outlived a
    /// shutdown's grace period (and this outcome was discarded), or the
    /// outcome was [`Outcome::Release`].
    Released,
    /// The handler finished the job itself ([`Outcome::Settled`]).
    Settled,
}

impl Finished {
    /// Its name in every binding's reports: `acked`, `retried`, `dead`,
    /// `snoozed`, `timed_out`, `lease_lost`, `released` or `settled`.
    pub fn name(self) -> &'static str {
        match self {
            Finished::Acked => "acked",
            Finished::Retried(_) => "retried",
            Finished::Dead => "dead",
            Finished::Snoozed(_) => "snoozed",
            Finished::TimedOut => "timed_out",
            Finished::LeaseLost => "lease_lost",
            Finished::Released => "released",
            Finished::Settled => "settled",
        }
    }

    /// Its name in the workers' events (`worker.on(kind, …)` on every
    /// surface): `success`, `retry`, `dead`, `snoozed`, `timed_out`,
    /// `lease_lost`, `released` or `settled`.
    pub fn event(self) -> &'static str {
        match self {
            Finished::Acked => "success",
            Finished::Retried(_) => "retry",
            other => other.name(),
        }
    }

    /// Every [`event`](Self::event) name, in the order hosts list them.
    pub const EVENTS: [&'static str; 8] = [
        "success",
        "retry",
        "dead",
        "snoozed",
        "timed_out",
        "lease_lost",
        "released",
        "settled",
    ];

    /// How loud a worker event is in a host's log, by its name: `start` (a
    /// handler began) and each of [`EVENTS`](Self::EVENTS). A retry, a
    /// timeout and a lost lease are `warning`, a dead job `error`, a release
    /// `info`, the rest `debug`; `None` for a name that is no event.
    pub fn log_level(event: &str) -> Option<&'static str> {
        Some(match event {
            "retry" | "timed_out" | "lease_lost" => "warning",
            "dead" => "error",
            "released" => "info",
            "start" | "success" | "snoozed" | "settled" => "debug",
            _ => return None,
        })
    }

    /// The job's new state, for `Retried` and `Snoozed`.
    pub fn state(self) -> Option<JobState> {
        match self {
            Finished::Retried(s) | Finished::Snoozed(s) => Some(s),
            _ => None,
        }
    }
}

/// A finished task, for logs and metrics.
#[derive(Clone, Debug)]
pub struct Report {
    /// The job's id (a group's event: its offset).
    pub job_id: i64,
    /// Its queue (for a consumer group's task: the event's stream).
    pub queue: String,
    /// The consumer group, for a group's task (`job_id` is then the
    /// event's offset and `attempts` its deliveries).
    pub group: Option<String>,
    /// Its attempts, counting this run.
    pub attempts: u32,
    /// What became of it.
    pub finished: Finished,
    /// The error recorded with it: the outcome's, when it was retried or
    /// dead-lettered (hosts' `retry` and `dead` events carry it).
    pub error: Option<String>,
    /// How long the handler ran (hand-out to completion).
    pub ran: Duration,
}

/// What [`Worker::drain`] saw.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DrainReport {
    /// Tasks still running when the grace period ended, whose jobs were
    /// released.
    pub released: usize,
}

/// Records a handler's outcome, inside `tx` when given.
pub(super) fn finish(job: &Job, outcome: Outcome, tx: Option<&Transaction>) -> Result<Finished> {
    let (q, lease) = (job.queue(), &job.lease);
    match outcome {
        Outcome::Ack(result) => match q.ack_in(tx, lease, result) {
            // A result the database refuses (too large): the job is not
            // done, and its next run may return something storable.
            Err(e) if e.kind() == ErrorKind::InvalidArgument => q
                .retry_in(
                    tx,
                    lease,
                    &RetryOptions {
                        delay: None,
                        error: Some(format!("the handler's result was refused: {e}")),
                    },
                )
                .map(Finished::Retried),
            done => done.map(|()| Finished::Acked),
        },
        Outcome::Retry { delay, error } => q
            .retry_in(
                tx,
                lease,
                &RetryOptions {
                    delay,
                    error: Some(error),
                },
            )
            .map(Finished::Retried),
        Outcome::Permanent(reason) => q.fail_in(tx, lease, &reason).map(|()| Finished::Dead),
        Outcome::Snooze(delay) => q.snooze_in(tx, lease, delay).map(Finished::Snoozed),
        Outcome::Release => q.release_in(tx, lease).map(|()| Finished::Released),
        Outcome::Settled => Ok(Finished::Settled),
    }
}
