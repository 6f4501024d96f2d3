//! Streams and channels for Python (`honker::stream`, `honker::channel`,
//! `honker::runtime::{Subscription, Listener}`): events and notifications
//! cross as the tuples of core's records table; the package wraps them.
//! Every call that may wait or write runs without the GIL; subscriptions and
//! listeners are dropped off the GIL (a subscription's drop commits).

use honker::runtime::OffThreadDrop;
use honker::stream::{Start, StreamRetention};
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::IntoPyObjectExt as _;

use crate::database::{in_tx, secs, Transaction};
use crate::errors::{invalid, IntoPyResult as _};
use crate::group::{info_tuple, Group, InfoTuple};
use crate::json::payload_from_py;
use crate::records::{ConsumerInfo, Notification, PublishArgs, PublishManyArgs, StreamEvent};

/// A fast path's result as Python sees it: the item; None when there is
/// nothing now (wait for a wake-up: `Database.readiness`, or `next` on a
/// thread); False where it would have waited for a lock (`BUSY` under
/// `without_waiting`: call `next` on a thread, which waits for it).
pub(crate) fn taken<'py, T, R>(
    py: Python<'py>,
    r: honker::Result<Option<T>>,
) -> PyResult<Bound<'py, PyAny>>
where
    R: IntoPyObject<'py> + From<T>,
{
    match r {
        Err(e) if e.kind() == honker::ErrorKind::Busy => false.into_bound_py_any(py),
        r => match r.py()? {
            Some(item) => R::from(item).into_bound_py_any(py),
            None => Ok(py.None().into_bound(py)),
        },
    }
}

/// `start`: "beginning", "latest", an offset (int), or a time in ms
/// (`("time", ms)`; the package converts datetimes).
pub(crate) fn start_from_py(start: &Bound<'_, PyAny>) -> PyResult<Start> {
    if let Ok(s) = start.extract::<String>() {
        return match s.as_str() {
            "beginning" => Ok(Start::Beginning),
            "latest" => Ok(Start::Latest),
            other => Err(invalid(format!(
                "start must be 'beginning', 'latest', an offset or a datetime, got {other:?}"
            ))),
        };
    }
    if let Ok((kind, ms)) = start.extract::<(String, i64)>() {
        if kind == "time" {
            return Ok(Start::Time(ms));
        }
    }
    match start.extract::<i64>() {
        Ok(n) => Ok(Start::Offset(n)),
        Err(_) => Err(invalid(
            "start must be 'beginning', 'latest', an offset or a datetime",
        )),
    }
}

/// A handle on one stream (see `Database.stream`).
#[pyclass(module = "honker._native", frozen)]
#[derive(Debug)]
pub struct Stream {
    pub(crate) stream: honker::stream::Stream,
}

#[pymethods]
impl Stream {
    #[getter]
    fn name(&self) -> &str {
        self.stream.name()
    }

    /// Appends one event; returns its offset. `options` is core's
    /// `PublishArgs` as a tuple (the package's generated `publish` builds it).
    #[pyo3(signature = (payload, options, *, tx = None, traceparent = None, tracestate = None))]
    fn publish(
        &self,
        py: Python<'_>,
        payload: &Bound<'_, PyAny>,
        options: PublishArgs,
        tx: Option<PyRef<'_, Transaction>>,
        traceparent: Option<&str>,
        tracestate: Option<&str>,
    ) -> PyResult<i64> {
        let payload = payload_from_py(payload)?;
        let o = options.to_core_traced(traceparent, tracestate).py()?;
        let s = &self.stream;
        let tx = tx.as_deref();
        py.detach(|| {
            in_tx(tx, |t| match t {
                Some(t) => s.publish_tx(t, payload, &o),
                None => s.publish(payload, &o),
            })
        })
        .py()
    }

    /// Appends events in one transaction; returns their offsets. `options`
    /// is core's `PublishManyArgs` as a tuple.
    #[pyo3(signature = (payloads, options, *, tx = None, traceparent = None, tracestate = None))]
    fn publish_many(
        &self,
        py: Python<'_>,
        payloads: Vec<Bound<'_, PyAny>>,
        options: PublishManyArgs,
        tx: Option<PyRef<'_, Transaction>>,
        traceparent: Option<&str>,
        tracestate: Option<&str>,
    ) -> PyResult<Vec<i64>> {
        let o = options.to_core_traced(traceparent, tracestate).py()?;
        let payloads = payloads
            .iter()
            .map(payload_from_py)
            .collect::<PyResult<Vec<_>>>()?;
        let s = &self.stream;
        let tx = tx.as_deref();
        py.detach(|| in_tx(tx, |t| s.publish_many_with(t, payloads, &o)))
            .py()
    }

    /// Up to `limit` events with offsets above `after`.
    fn read(&self, py: Python<'_>, after: i64, limit: usize) -> PyResult<Vec<StreamEvent>> {
        let s = &self.stream;
        let events = py.detach(|| s.read(after, limit)).py()?;
        Ok(events.into_iter().map(StreamEvent::from).collect())
    }

    /// Commits `next_offset` for `consumer`; returns its next offset after.
    #[pyo3(signature = (consumer, next_offset, *, tx = None))]
    fn commit(
        &self,
        py: Python<'_>,
        consumer: &str,
        next_offset: i64,
        tx: Option<PyRef<'_, Transaction>>,
    ) -> PyResult<i64> {
        let s = &self.stream;
        let tx = tx.as_deref();
        py.detach(|| {
            in_tx(tx, |t| match t {
                Some(t) => s.commit_tx(t, consumer, next_offset),
                None => s.commit(consumer, next_offset),
            })
        })
        .py()
    }

    fn seek(&self, py: Python<'_>, consumer: &str, next_offset: i64) -> PyResult<()> {
        let s = &self.stream;
        py.detach(|| s.seek(consumer, next_offset)).py()
    }

    fn position(&self, py: Python<'_>, consumer: &str) -> PyResult<Option<i64>> {
        let s = &self.stream;
        py.detach(|| s.position(consumer)).py()
    }

    /// `(length, first_offset, last_offset, [consumer tuples], [group
    /// info tuples])`.
    #[allow(clippy::type_complexity)] // the tuple the package unpacks
    fn info(
        &self,
        py: Python<'_>,
    ) -> PyResult<(i64, Option<i64>, i64, Vec<ConsumerInfo>, Vec<InfoTuple>)> {
        let s = &self.stream;
        let i = py.detach(|| s.info()).py()?;
        Ok((
            i.length,
            i.first_offset,
            i.last_offset,
            i.consumers.into_iter().map(ConsumerInfo::from).collect(),
            i.groups.into_iter().map(info_tuple).collect(),
        ))
    }

    /// A handle on the consumer group `name` (writes nothing).
    fn group(&self, name: &str) -> PyResult<Group> {
        Ok(Group {
            g: self.stream.group(name).py()?,
        })
    }

    /// `(max_age_s or None, max_count or None, trim_passed)`.
    fn retention(&self, py: Python<'_>) -> PyResult<(Option<f64>, Option<u64>, bool)> {
        let s = &self.stream;
        let r = py.detach(|| s.retention()).py()?;
        Ok((
            r.max_age.map(|d| d.as_secs_f64()),
            r.max_count,
            r.trim_passed,
        ))
    }

    #[pyo3(signature = (max_age, max_count, trim_passed))]
    fn set_retention(
        &self,
        py: Python<'_>,
        max_age: Option<f64>,
        max_count: Option<i64>,
        trim_passed: bool,
    ) -> PyResult<()> {
        let max_age = max_age.map(|s| secs("max_age", s)).transpose()?;
        let max_count = max_count
            .map(|n| honker::validate::count("max_count", n))
            .transpose()
            .py()?;
        let r = StreamRetention {
            max_age,
            max_count,
            trim_passed,
        };
        let s = &self.stream;
        py.detach(|| s.set_retention(&r)).py()
    }

    fn trim(&self, py: Python<'_>) -> PyResult<usize> {
        let s = &self.stream;
        py.detach(|| s.trim()).py()
    }

    /// An independent consumer; `auto_commit`: `(every, interval_s)` or None.
    #[pyo3(signature = (consumer, start, *, batch = 100, auto_commit = None))]
    fn subscribe(
        &self,
        py: Python<'_>,
        consumer: &str,
        start: &Bound<'_, PyAny>,
        batch: usize,
        auto_commit: Option<(usize, f64)>,
    ) -> PyResult<Subscription> {
        let start = start_from_py(start)?;
        let auto = match auto_commit {
            None => None,
            Some((every, interval)) => Some(honker::runtime::AutoCommit {
                every,
                interval: secs("auto_commit interval", interval)?,
            }),
        };
        let s = &self.stream;
        let sub = py
            .detach(|| honker::runtime::Subscription::new(s, consumer, start, batch, auto))
            .py()?;
        Ok(Subscription {
            s: OffThreadDrop::new(sub),
        })
    }
}

/// See `Stream.subscribe`.
#[pyclass(module = "honker._native", frozen)]
#[derive(Debug)]
pub struct Subscription {
    s: OffThreadDrop<honker::runtime::Subscription>,
}

#[pymethods]
impl Subscription {
    /// The next event, waiting up to `wait` seconds; None when the wait ran
    /// out or the subscription was closed. `TRIMMED` (once) when retention
    /// removed events it had not read.
    fn next(&self, py: Python<'_>, wait: f64) -> PyResult<Option<StreamEvent>> {
        let wait = secs("wait", wait)?;
        let s: &honker::runtime::Subscription = &self.s;
        let e = py.detach(|| s.next(wait)).py()?;
        Ok(e.map(StreamEvent::from))
    }

    /// The next event if one is there without waiting for anything (a
    /// lock, a wake-up): the asyncio iterator's fast path. None: nothing
    /// now; False: a lock is held, wait with `next` on a thread.
    fn try_next<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let s: &honker::runtime::Subscription = &self.s;
        taken::<_, StreamEvent>(
            py,
            py.detach(|| honker::without_waiting(|| s.next(Duration::ZERO))),
        )
    }

    /// Commits the place after the event at `offset`.
    #[pyo3(signature = (offset, *, tx = None))]
    fn commit(
        &self,
        py: Python<'_>,
        offset: i64,
        tx: Option<PyRef<'_, Transaction>>,
    ) -> PyResult<()> {
        let s: &honker::runtime::Subscription = &self.s;
        let tx = tx.as_deref();
        py.detach(|| in_tx(tx, |t| s.commit_offset(t, offset))).py()
    }

    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let s: &honker::runtime::Subscription = &self.s;
        py.detach(|| s.close()).py()
    }

    #[getter]
    fn closed(&self) -> bool {
        self.s.is_closed()
    }

    #[getter]
    fn consumer(&self) -> String {
        self.s.consumer().to_owned()
    }
}

/// See `Database.listen`.
#[pyclass(module = "honker._native", frozen)]
#[derive(Debug)]
pub struct Listener {
    l: OffThreadDrop<honker::runtime::Listener>,
}

#[pymethods]
impl Listener {
    /// The next notification, waiting up to `wait` seconds; None when the
    /// wait ran out or the listener was closed. `TRIMMED` (once) when the
    /// channel's window moved past notifications it had not read.
    fn next(&self, py: Python<'_>, wait: f64) -> PyResult<Option<Notification>> {
        let wait = secs("wait", wait)?;
        let l: &honker::runtime::Listener = &self.l;
        let n = py.detach(|| l.next(wait)).py()?;
        Ok(n.map(Notification::from))
    }

    /// See `Subscription.try_next`.
    fn try_next<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let l: &honker::runtime::Listener = &self.l;
        taken::<_, Notification>(
            py,
            py.detach(|| honker::without_waiting(|| l.next(Duration::ZERO))),
        )
    }

    fn close(&self) {
        self.l.close();
    }

    #[getter]
    fn closed(&self) -> bool {
        self.l.is_closed()
    }

    #[getter]
    fn channel(&self) -> String {
        self.l.channel().to_owned()
    }
}

/// `Database.notify`.
pub(crate) fn notify(
    py: Python<'_>,
    db: &honker::Database,
    channel: &str,
    payload: &Bound<'_, PyAny>,
    tx: Option<&Transaction>,
) -> PyResult<i64> {
    let payload = payload_from_py(payload)?;
    py.detach(|| {
        in_tx(tx, |t| match t {
            Some(t) => db.notify_tx(t, channel, payload),
            None => db.notify(channel, payload),
        })
    })
    .py()
}

/// `Database.listen`.
pub(crate) fn listen(py: Python<'_>, db: &honker::Database, channel: &str) -> PyResult<Listener> {
    let l = py.detach(|| db.listen(channel)).py()?;
    Ok(Listener {
        l: OffThreadDrop::new(l),
    })
}

/// `Database.channel_retention` / `set_channel_retention`.
pub(crate) fn channel_retention(
    py: Python<'_>,
    db: &honker::Database,
    channel: &str,
    set: Option<(f64, u64)>,
) -> PyResult<(f64, u64)> {
    let ch = db.channel(channel).py()?;
    if let Some((age, count)) = set {
        let r = honker::channel::ChannelRetention {
            max_age: secs("max_age", age)?,
            max_count: count,
        };
        py.detach(|| ch.set_retention(&r)).py()?;
    }
    let r = py.detach(|| ch.retention()).py()?;
    Ok((r.max_age.as_secs_f64(), r.max_count))
}

/// See `Database.readiness`: a pipe the watcher writes while armed, for
/// asyncio's `add_reader` (core's `Readiness`, whose protocol the package's
/// readers follow). Unix only.
#[cfg(unix)]
#[pyclass(module = "honker._native", frozen)]
#[derive(Debug)]
pub struct Readiness {
    r: honker::Readiness,
}

#[cfg(unix)]
impl Readiness {
    pub(crate) fn new(r: honker::Readiness) -> Readiness {
        Readiness { r }
    }
}

#[cfg(unix)]
#[pymethods]
impl Readiness {
    fn fileno(&self) -> i32 {
        self.r.fd()
    }

    fn arm(&self) {
        self.r.arm();
    }

    fn disarm(&self) {
        self.r.disarm();
    }

    /// Empties the pipe; whether a wake-up was pending.
    fn drain(&self) -> bool {
        self.r.drain()
    }

    #[getter]
    fn armed(&self) -> bool {
        self.r.is_armed()
    }
}

/// Core's rules of a wait (`honker::Pace`), for the package's waits on the
/// event loop (`_loopwait.poll`): how long to sleep before looking again.
#[pyclass(module = "honker._native", frozen)]
#[derive(Debug)]
pub struct Pace {
    p: honker::Pace,
}

#[pymethods]
impl Pace {
    /// A wait of `wait` seconds from now, re-checking at least every
    /// `recheck`; `ends_early`: it ends when the next chance lies beyond it.
    #[new]
    fn new(wait: f64, recheck: f64, ends_early: bool) -> PyResult<Pace> {
        let (wait, recheck) = (
            crate::database::secs("wait", wait)?,
            crate::database::secs("recheck", recheck)?,
        );
        Ok(Pace {
            p: honker::Pace::new(wait, recheck, ends_early),
        })
    }

    /// Seconds to sleep before looking again when the next chance comes in
    /// `due` seconds (None: at a commit); None when the wait is over.
    fn nap(&self, due: Option<f64>) -> PyResult<Option<f64>> {
        let due = due.map(|d| crate::database::secs("due", d)).transpose()?;
        Ok(self
            .p
            .nap(due, std::time::Instant::now())
            .map(|d| d.as_secs_f64()))
    }
}
