//! Core's runtime for Python (`honker::runtime`): the claim stream behind
//! `Queue.claim()`'s iterators and the lease renewal behind
//! `Job.keep_alive()`. Every call that may wait or write runs without the
//! GIL; the last reference is dropped on a thread of its own, never while
//! holding the GIL (a drop releases buffered jobs or joins the renewal
//! thread: writes that may wait for the writer).

use honker::runtime::OffThreadDrop;
use pyo3::prelude::*;
use pyo3::IntoPyObjectExt as _;

use crate::database::secs;
use crate::errors::IntoPyResult as _;
use crate::queue::lease;
use crate::records::ClaimedJob;

/// See `Queue.claimer`.
#[pyclass(module = "honker._native", frozen)]
#[derive(Debug)]
pub struct Claimer {
    // Collected without close(): the release happens off the GIL.
    c: OffThreadDrop<honker::runtime::Claimer>,
}

impl Claimer {
    fn inner(&self) -> &honker::runtime::Claimer {
        &self.c
    }
}

#[pymethods]
impl Claimer {
    /// The next job, waiting up to `wait` seconds for work; None when the
    /// wait ran out or the claimer was closed. `on_claimable` as in
    /// `Queue.claim`.
    #[pyo3(signature = (wait, *, on_claimable = None))]
    fn next(
        &self,
        py: Python<'_>,
        wait: f64,
        on_claimable: Option<Py<PyAny>>,
    ) -> PyResult<Option<ClaimedJob>> {
        let wait = secs("wait", wait)?;
        let c = self.inner();
        let job = py
            .detach(|| {
                c.next_with_hook(wait, &mut || {
                    if let Some(hook) = &on_claimable {
                        Python::attach(|py| {
                            let _ = hook.call0(py);
                        })
                    }
                })
            })
            .py()?;
        Ok(job.map(ClaimedJob::from))
    }

    /// `next(0)` only where it needs no waiting (core's `without_waiting`):
    /// a job, None (nothing now), or False where it would have waited for
    /// the writer (claim on a thread instead). An event loop's claim.
    fn try_next<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let c = self.inner();
        crate::stream::taken::<_, ClaimedJob>(
            py,
            py.detach(|| honker::without_waiting(|| c.next(std::time::Duration::ZERO))),
        )
    }

    /// A job claimed earlier and not handed out yet, if any (no I/O).
    fn take_buffered(&self) -> Option<ClaimedJob> {
        self.inner().take_buffered().map(ClaimedJob::from)
    }

    /// When a claim could find work, without waiting or writing (core's
    /// `Claimer::due_in`): 0.0 now, seconds until the next job may start,
    /// None when only a commit can bring work; False where a reader was not
    /// free at once (claim on a thread, which waits for one).
    fn due_in<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let c = self.inner();
        looked(py, || c.due_in())
    }

    /// Releases the jobs claimed but not handed out and wakes a waiting
    /// `next`; returns how many were released.
    fn close(&self, py: Python<'_>) -> usize {
        let c = self.inner();
        py.detach(|| c.close())
    }

    #[getter]
    fn closed(&self) -> bool {
        self.inner().is_closed()
    }

    #[getter]
    fn buffered(&self) -> usize {
        self.inner().buffered()
    }
}

/// See `Queue.keep_alive`.
#[pyclass(module = "honker._native", frozen)]
#[derive(Debug)]
pub struct KeepAlive {
    k: OffThreadDrop<honker::runtime::KeepAlive>,
}

impl KeepAlive {
    fn inner(&self) -> &honker::runtime::KeepAlive {
        &self.k
    }
}

#[pymethods]
impl KeepAlive {
    /// Whether the lease was lost (renewal stopped).
    #[getter]
    fn lost(&self) -> bool {
        self.inner().lost()
    }

    #[getter]
    fn beats(&self) -> u64 {
        self.inner().beats()
    }

    /// The lease's expiry after the last renewal (ms), if there was one.
    #[getter]
    fn lease_expires_at_ms(&self) -> Option<i64> {
        self.inner().lease_expires_at()
    }

    /// Stops renewing; returns whether the lease was lost meanwhile.
    fn stop(&self, py: Python<'_>) -> bool {
        let k = self.inner();
        py.detach(|| k.stop().lost)
    }
}

/// An event loop's look before it sleeps (`Claimer.due_in`, `Lock.free_in`,
/// `Group.due_in`), run without the GIL and without waiting: seconds until
/// a try may succeed (0.0: now), None when only a commit can change that,
/// False where a reader was not free at once (try on a thread instead).
pub(crate) fn looked<'py>(
    py: Python<'py>,
    look: impl FnOnce() -> honker::Result<Option<std::time::Duration>> + Send,
) -> PyResult<Bound<'py, PyAny>> {
    match py.detach(|| honker::without_waiting(look)) {
        Err(e) if e.kind() == honker::ErrorKind::Busy => false.into_bound_py_any(py),
        r => match r.py()? {
            Some(d) => d.as_secs_f64().into_bound_py_any(py),
            None => Ok(py.None().into_bound(py)),
        },
    }
}

/// `Queue.claimer`: see queue.rs.
pub(crate) fn claimer(
    queue: &honker::Queue,
    worker_id: &str,
    batch: i64,
    lease: Option<f64>,
) -> PyResult<Claimer> {
    let batch = honker::validate::batch(batch).py()?;
    let lease = lease.map(|s| secs("lease", s)).transpose()?;
    let c = honker::runtime::Claimer::new(queue, worker_id, batch, lease).py()?;
    Ok(Claimer {
        c: OffThreadDrop::new(c),
    })
}

/// `Queue.keep_alive`: see queue.rs.
pub(crate) fn keep_alive(
    queue: &honker::Queue,
    job_id: i64,
    token: String,
    length: f64,
    every: Option<f64>,
) -> PyResult<KeepAlive> {
    let length = secs("lease", length)?;
    let every = every.map(|s| secs("every", s)).transpose()?;
    let k = honker::runtime::KeepAlive::start(queue, lease(job_id, token), length, every).py()?;
    Ok(KeepAlive {
        k: OffThreadDrop::new(k),
    })
}
