//! Consumer groups for Python (`honker::stream::group`,
//! `honker::runtime::GroupConsumer`): events cross as the tuples of core's
//! records table; the package wraps them (`honker.group`). Every call that
//! may wait or write runs without the GIL; a consumer is dropped off the GIL
//! (its drop releases what it buffered).

use std::time::Duration;

use honker::runtime::OffThreadDrop;
use honker::stream::group::GroupOptions;
use pyo3::prelude::*;

use crate::database::{in_tx, secs, Transaction};
use crate::errors::IntoPyResult as _;
use crate::records::{GroupArgs, GroupDeadLetter, GroupEvent, GroupMember};
use crate::stream::{start_from_py, taken};

/// `(group, next_offset, lag, pending, delivered, dead, oldest_pending_age_ms,
/// [member tuples], (max_deliveries, lease_s, member_idle_s))`.
pub(crate) type InfoTuple = (
    String,
    i64,
    i64,
    i64,
    i64,
    i64,
    Option<i64>,
    Vec<GroupMember>,
    (u32, f64, f64),
);

pub(crate) fn info_tuple(i: honker::stream::group::GroupInfo) -> InfoTuple {
    (
        i.group,
        i.next_offset,
        i.lag,
        i.pending,
        i.delivered,
        i.dead,
        i.oldest_pending_age_ms,
        i.members.into_iter().map(GroupMember::from).collect(),
        (
            i.options.max_deliveries,
            i.options.lease.as_secs_f64(),
            i.options.member_idle.as_secs_f64(),
        ),
    )
}

fn opt_secs(what: &str, s: Option<f64>) -> PyResult<Option<Duration>> {
    s.map(|s| secs(what, s)).transpose()
}

/// A handle on one consumer group of a stream (see `Stream.group`).
#[pyclass(module = "honker._native", frozen)]
#[derive(Debug)]
pub struct Group {
    pub(crate) g: honker::stream::group::Group,
}

#[pymethods]
impl Group {
    #[getter]
    fn name(&self) -> &str {
        self.g.name()
    }

    /// Creates the group (or updates its options, keeping its place);
    /// returns its next offset. `GroupArgs` as a tuple (the package's
    /// generated `create` builds it); a field not given is core's default.
    fn create(
        &self,
        py: Python<'_>,
        start: &Bound<'_, PyAny>,
        options: GroupArgs,
    ) -> PyResult<i64> {
        let start = start_from_py(start)?;
        let o = GroupOptions::from(options.to_core().py()?);
        let g = &self.g;
        py.detach(|| g.create(start, &o)).py()
    }

    fn delete(&self, py: Python<'_>) -> PyResult<bool> {
        let g = &self.g;
        py.detach(|| g.delete()).py()
    }

    /// Up to `n` events for `member`, waiting up to `wait` seconds (0: not
    /// at all); `(events, missed)`.
    #[pyo3(signature = (member, n, *, lease = None, wait = 0.0))]
    fn claim(
        &self,
        py: Python<'_>,
        member: &str,
        n: usize,
        lease: Option<f64>,
        wait: f64,
    ) -> PyResult<(Vec<GroupEvent>, u64)> {
        let lease = opt_secs("lease", lease)?;
        let wait = secs("wait", wait)?;
        let g = &self.g;
        let c = py.detach(|| g.claim_wait(member, n, lease, wait)).py()?;
        Ok((
            c.events.into_iter().map(GroupEvent::from).collect(),
            c.missed,
        ))
    }

    /// When a claim could hand something out, found without waiting:
    /// seconds (0.0: now), None (only a commit can bring something), or
    /// False where a reader was not free at once.
    fn due_in<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let g = &self.g;
        crate::runtime::looked(py, || g.due_in())
    }

    #[pyo3(signature = (offset, token, *, tx = None))]
    fn ack(
        &self,
        py: Python<'_>,
        offset: i64,
        token: String,
        tx: Option<PyRef<'_, Transaction>>,
    ) -> PyResult<()> {
        let g = &self.g;
        let tx = tx.as_deref();
        py.detach(|| {
            in_tx(tx, |t| match t {
                Some(t) => g.ack_tx(t, &(offset, token)),
                None => g.ack(&(offset, token)),
            })
        })
        .py()
    }

    /// Acks `(offset, token)` pairs in one transaction: all or none.
    fn ack_many(&self, py: Python<'_>, events: Vec<(i64, String)>) -> PyResult<()> {
        let g = &self.g;
        py.detach(|| g.ack_many(&events)).py()
    }

    /// Returns whether the event died (its deliveries were spent).
    #[pyo3(signature = (offset, token, *, delay = None, error = None))]
    fn retry(
        &self,
        py: Python<'_>,
        offset: i64,
        token: String,
        delay: Option<f64>,
        error: Option<String>,
    ) -> PyResult<bool> {
        let delay = opt_secs("delay", delay)?;
        let g = &self.g;
        py.detach(|| g.retry(&(offset, token), delay, error.as_deref()))
            .py()
    }

    fn fail(&self, py: Python<'_>, offset: i64, token: String, error: &str) -> PyResult<()> {
        let g = &self.g;
        py.detach(|| g.fail(&(offset, token), error)).py()
    }

    fn release(&self, py: Python<'_>, offset: i64, token: String) -> PyResult<()> {
        let g = &self.g;
        py.detach(|| g.release(&(offset, token))).py()
    }

    /// Extends the lease (by the group's lease when `extend` is None);
    /// returns its new end in ms.
    #[pyo3(signature = (offset, token, *, extend = None))]
    fn heartbeat(
        &self,
        py: Python<'_>,
        offset: i64,
        token: String,
        extend: Option<f64>,
    ) -> PyResult<i64> {
        let extend = opt_secs("extend", extend)?;
        let g = &self.g;
        py.detach(|| g.heartbeat(&(offset, token), extend)).py()
    }

    #[pyo3(signature = (member, *, force = false))]
    fn remove_member(&self, py: Python<'_>, member: &str, force: bool) -> PyResult<i64> {
        let g = &self.g;
        py.detach(|| g.remove_member(member, force)).py()
    }

    fn dead(&self, py: Python<'_>, after: i64, limit: usize) -> PyResult<Vec<GroupDeadLetter>> {
        let g = &self.g;
        let dead = py.detach(|| g.dead(after, limit)).py()?;
        Ok(dead.into_iter().map(GroupDeadLetter::from).collect())
    }

    fn redrive(&self, py: Python<'_>, offset: i64) -> PyResult<()> {
        let g = &self.g;
        py.detach(|| g.redrive(offset)).py()
    }

    fn redrive_all(&self, py: Python<'_>) -> PyResult<usize> {
        let g = &self.g;
        py.detach(|| g.redrive_all()).py()
    }

    fn info(&self, py: Python<'_>) -> PyResult<InfoTuple> {
        let g = &self.g;
        Ok(info_tuple(py.detach(|| g.info()).py()?))
    }

    /// A member as a stream of events (`runtime::GroupConsumer`).
    #[pyo3(signature = (member, *, batch = 10, lease = None))]
    fn consume(&self, member: &str, batch: usize, lease: Option<f64>) -> PyResult<GroupConsumer> {
        let lease = opt_secs("lease", lease)?;
        let c = honker::runtime::GroupConsumer::new(&self.g, member, batch, lease).py()?;
        Ok(GroupConsumer {
            c: OffThreadDrop::new(c),
        })
    }
}

/// See `Group.consume`.
#[pyclass(module = "honker._native", frozen)]
#[derive(Debug)]
pub struct GroupConsumer {
    c: OffThreadDrop<honker::runtime::GroupConsumer>,
}

#[pymethods]
impl GroupConsumer {
    /// The next event, waiting up to `wait` seconds; None when the wait ran
    /// out or the consumer was closed. `TRIMMED` when the stream's age limit
    /// removed events before the group handled them.
    fn next(&self, py: Python<'_>, wait: f64) -> PyResult<Option<GroupEvent>> {
        let wait = secs("wait", wait)?;
        let c: &honker::runtime::GroupConsumer = &self.c;
        let e = py.detach(|| c.next(wait)).py()?;
        Ok(e.map(GroupEvent::from))
    }

    /// See `Subscription.try_next`.
    fn try_next<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let c: &honker::runtime::GroupConsumer = &self.c;
        taken::<_, GroupEvent>(
            py,
            py.detach(|| honker::without_waiting(|| c.next(Duration::ZERO))),
        )
    }

    /// Stops: releases the events claimed and not handed out; returns how
    /// many.
    fn close(&self, py: Python<'_>) -> usize {
        let c: &honker::runtime::GroupConsumer = &self.c;
        py.detach(|| c.close())
    }

    #[getter]
    fn closed(&self) -> bool {
        self.c.is_closed()
    }

    #[getter]
    fn member(&self) -> String {
        self.c.member().to_owned()
    }

    #[getter]
    fn buffered(&self) -> usize {
        self.c.buffered()
    }
}
