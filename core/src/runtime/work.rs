//! What a [`Worker`](super::Worker) runs, behind one shape: a queue's jobs
//! or a consumer group's events ([`Source`]), each handed out as a
//! [`Work`] item. Claiming, the read-only probe, lease renewal, release,
//! the timeout's retry and the outcome's write dispatch here, so the
//! worker's slots, reservations, renewal clock and drain are one loop for
//! both.

use std::time::Duration;

use super::outcome::{Finished, Outcome};
use crate::error::{ErrorKind, Result};
use crate::queue::ops::Probe;
use crate::queue::{Job, JobState, Queue, RetryOptions};
use crate::stream::group::{Group, GroupEvent};
use crate::transaction::Transaction;

/// Where a worker's registration takes its work from.
#[derive(Clone, Debug)]
pub(super) enum Source {
    Queue(Queue),
    Group(Group),
}

/// One item of work: a claimed job, or an event delivered to this worker
/// as a member of a group (its member name is the worker id).
#[derive(Clone, Debug)]
pub enum Work {
    /// A queue's job.
    Job(Job),
    /// A consumer group's event, with the group that delivered it.
    Event(Group, GroupEvent),
}

impl Source {
    /// The queue's name, or the group's stream: what reports call `queue`.
    pub(super) fn name(&self) -> &str {
        match self {
            Source::Queue(q) => q.name(),
            Source::Group(g) => g.stream().name(),
        }
    }

    /// The group's name, for a group.
    pub(super) fn group(&self) -> Option<&str> {
        match self {
            Source::Queue(_) => None,
            Source::Group(g) => Some(g.name()),
        }
    }

    pub(super) fn same(&self, other: &Source) -> bool {
        self.name() == other.name() && self.group() == other.group()
    }

    /// Whether there is work now, else when there will be; and the clock's
    /// now. Read-only.
    pub(super) fn probe(&self) -> Result<(Probe, i64)> {
        match self {
            Source::Queue(q) => q.probe(),
            Source::Group(g) => {
                let (p, now) = g.probe_now()?;
                Ok((
                    match p {
                        crate::stream::group::ops::Probe::Claimable => Probe::Claimable,
                        crate::stream::group::ops::Probe::NextAt(t) => Probe::NextAt(t),
                    },
                    now,
                ))
            }
        }
    }

    /// Claims up to `n` for `worker_id`, inside `tx` when given. A group
    /// claim is one bounded step (ADR 21): fewer than `n` with more waiting
    /// behind busy keys is claimed by the worker's next round. Events the
    /// stream's age limit removed before the group handled them are counted
    /// in the group's info, not reported here.
    pub(super) fn claim(
        &self,
        tx: Option<&Transaction>,
        worker_id: &str,
        n: usize,
        lease_ms: i64,
    ) -> Result<Vec<Work>> {
        match self {
            Source::Queue(q) => Ok(q
                .claim_now(tx, worker_id, n, lease_ms)?
                .into_iter()
                .map(Work::Job)
                .collect()),
            Source::Group(g) => {
                let lease = Duration::from_millis(u64::try_from(lease_ms).unwrap_or(0));
                let c = g.claim_in(tx, worker_id, n, Some(lease))?;
                Ok(c.events
                    .into_iter()
                    .map(|e| Work::Event(g.clone(), e))
                    .collect())
            }
        }
    }
}

impl Work {
    /// The job's id, or the event's offset.
    pub fn id(&self) -> i64 {
        match self {
            Work::Job(j) => j.id,
            Work::Event(_, e) => e.offset,
        }
    }

    /// The job's attempts, or the event's deliveries, counting this run.
    pub fn attempts(&self) -> u32 {
        match self {
            Work::Job(j) => j.attempts,
            Work::Event(_, e) => e.deliveries,
        }
    }

    /// Gives it back, no attempt (delivery) spent.
    pub(super) fn release(&self) -> Result<()> {
        match self {
            Work::Job(j) => j.release(),
            Work::Event(g, e) => g.release(e),
        }
    }

    /// Extends the lease by `lease` from now.
    pub(super) fn heartbeat(&self, lease: Duration) -> Result<i64> {
        match self {
            Work::Job(j) => j.heartbeat(Some(lease)),
            Work::Event(g, e) => g.heartbeat(e, Some(lease)),
        }
    }

    /// Retries it as a failure: its handler overran `timeout`. A lost lease
    /// means another worker already has it.
    pub(super) fn time_out(&self, timeout: Option<Duration>, tx: Option<&Transaction>) {
        let error = format!(
            "handler timed out after {} ms",
            timeout.unwrap_or_default().as_millis()
        );
        let _ = match self {
            Work::Job(j) => j
                .queue()
                .retry_in(
                    tx,
                    &j.lease,
                    &RetryOptions {
                        delay: None,
                        error: Some(error),
                    },
                )
                .map(drop),
            Work::Event(g, e) => g.retry_in(tx, e, None, Some(&error)).map(drop),
        };
    }

    /// Records a handler's outcome, inside `tx` when given.
    pub(super) fn finish(&self, outcome: Outcome, tx: Option<&Transaction>) -> Result<Finished> {
        match self {
            Work::Job(j) => super::outcome::finish(j, outcome, tx),
            Work::Event(g, e) => finish_event(g, e, outcome, tx),
        }
    }
}

/// A group event's outcome. A group has no results (an `Ack` result is
/// dropped) and no snooze that spends nothing: `Snooze(delay)` is a retry
/// after `delay`, and counts the delivery.
fn finish_event(
    g: &Group,
    e: &GroupEvent,
    outcome: Outcome,
    tx: Option<&Transaction>,
) -> Result<Finished> {
    let retried = |died: bool, delay: Option<Duration>| {
        if died {
            JobState::Dead
        } else if delay.is_some_and(|d| !d.is_zero()) {
            JobState::Scheduled
        } else {
            JobState::Ready
        }
    };
    match outcome {
        Outcome::Ack(_) => g.ack_in(tx, e).map(|()| Finished::Acked),
        Outcome::Retry { delay, error } => g
            .retry_in(tx, e, delay, Some(&error))
            .map(|died| Finished::Retried(retried(died, delay))),
        Outcome::Permanent(reason) => g.fail_in(tx, e, &reason).map(|()| Finished::Dead),
        Outcome::Snooze(delay) => g
            .retry_in(tx, e, Some(delay), Some("snoozed"))
            .map(|died| Finished::Snoozed(retried(died, Some(delay)))),
        Outcome::Release => g.release_in(tx, e).map(|()| Finished::Released),
        Outcome::Settled => Ok(Finished::Settled),
    }
}

/// Whether a renewal's error means the lease is gone for good.
pub(super) fn lease_gone(kind: ErrorKind) -> bool {
    matches!(kind, ErrorKind::LeaseLost | ErrorKind::NotFound)
}
