//! `Queue` for Python: every verb of core's `Queue`, with times in seconds,
//! payloads as JSON text (`str`) or `bytes`, and an optional `tx`.
//!
//! Claimed jobs cross as tuples
//! `(id, payload, attempts, max_attempts, priority, run_at_ms, created_at_ms,
//! lease_expires_at_ms, token)`; the Python package wraps them in `Job`.

use std::time::Duration;

use honker::{ClaimOptions, Lease, RetryOptions};
use pyo3::prelude::*;

use crate::database::{in_tx, secs, Transaction};
use crate::errors::IntoPyResult as _;
use crate::json::payload_from_py;
use crate::records::{ClaimedJob, EnqueueArgs, Enqueued, JobInfo, Payload, QueueArgs, QueueStats};

/// A handle on one queue (see `Database.queue`).
#[pyclass(module = "honker._native", frozen)]
#[derive(Debug)]
pub struct Queue {
    pub(crate) queue: honker::Queue,
}

pub(crate) fn lease(job_id: i64, token: String) -> Lease {
    Lease { job_id, token }
}

#[pymethods]
impl Queue {
    #[getter]
    fn name(&self) -> &str {
        self.queue.name()
    }

    /// The queue's default lease, in seconds.
    #[getter]
    fn lease(&self) -> f64 {
        self.queue.options().lease.as_secs_f64()
    }

    /// Enqueues one payload; returns `(id, existing)`. `options` is core's
    /// `EnqueueArgs` as a tuple (the package's generated `enqueue` builds
    /// it). Positional only: keywords cost more (ADR 29).
    #[pyo3(signature = (payload, options, tx, traceparent, tracestate))]
    fn enqueue(
        &self,
        py: Python<'_>,
        payload: &Bound<'_, PyAny>,
        options: EnqueueArgs,
        tx: Option<PyRef<'_, Transaction>>,
        traceparent: Option<&str>,
        tracestate: Option<&str>,
    ) -> PyResult<Enqueued> {
        let payload = payload_from_py(payload)?;
        let options = options.to_core_traced(traceparent, tracestate).py()?;
        let tx = tx.as_deref();
        let mut out = py
            .detach(|| {
                in_tx(tx, |tx| {
                    self.queue.enqueue_many_in(tx, vec![payload], &options)
                })
            })
            .py()?;
        Ok(out.remove(0).into())
    }

    /// Enqueues each payload with the same options, all in one transaction
    /// (the caller's `tx` if given); returns `(id, existing)` per payload.
    /// `options` is `enqueue`'s.
    #[pyo3(signature = (payloads, options, tx, traceparent, tracestate))]
    fn enqueue_many(
        &self,
        py: Python<'_>,
        payloads: Vec<Bound<'_, PyAny>>,
        options: EnqueueArgs,
        tx: Option<PyRef<'_, Transaction>>,
        traceparent: Option<&str>,
        tracestate: Option<&str>,
    ) -> PyResult<Vec<Enqueued>> {
        let payloads = payloads
            .iter()
            .map(payload_from_py)
            .collect::<PyResult<Vec<_>>>()?;
        let options = options.to_core_traced(traceparent, tracestate).py()?;
        let tx = tx.as_deref();
        let out = py
            .detach(|| in_tx(tx, |tx| self.queue.enqueue_many_in(tx, payloads, &options)))
            .py()?;
        Ok(out.into_iter().map(Enqueued::from).collect())
    }

    /// Claims up to `n` jobs, waiting up to `wait` seconds for work.
    /// `on_claimable` (no arguments; errors ignored) is called, with the GIL,
    /// each time a wait finds work, just before the claim (asyncio wakes its
    /// loop with it; see `Queue::claim_with_hook`).
    #[pyo3(signature = (worker_id, n, lease = None, wait = 0.0, tx = None, on_claimable = None))]
    #[allow(clippy::too_many_arguments)] // Python keyword arguments
    fn claim(
        &self,
        py: Python<'_>,
        worker_id: &str,
        n: i64,
        lease: Option<f64>,
        wait: f64,
        tx: Option<PyRef<'_, Transaction>>,
        on_claimable: Option<Py<PyAny>>,
    ) -> PyResult<Vec<ClaimedJob>> {
        let n = honker::validate::batch(n).py()?;
        let options = ClaimOptions {
            lease: lease.map(|s| secs("lease", s)).transpose()?,
            wait: secs("wait", wait)?,
        };
        let tx = tx.as_deref();
        let jobs = py
            .detach(|| {
                in_tx(tx, |tx| {
                    self.queue
                        .claim_with_hook_in(tx, worker_id, n, &options, &mut || {
                            if let Some(hook) = &on_claimable {
                                Python::attach(|py| {
                                    let _ = hook.call0(py);
                                })
                            }
                        })
                })
            })
            .py()?;
        Ok(jobs.into_iter().map(ClaimedJob::from).collect())
    }

    /// The claim stream (core's `runtime::Claimer`) for `worker_id`,
    /// claiming `batch` jobs at a time, leased for `lease` seconds (default:
    /// the queue's).
    #[pyo3(signature = (worker_id, batch, *, lease = None))]
    fn claimer(
        &self,
        worker_id: &str,
        batch: i64,
        lease: Option<f64>,
    ) -> PyResult<crate::runtime::Claimer> {
        crate::runtime::claimer(&self.queue, worker_id, batch, lease)
    }

    /// Renews job `job_id`'s lease to `lease` seconds every `every` seconds
    /// (default: a third of it) until stopped; stops and reports when the
    /// lease is lost (core's `runtime::KeepAlive`).
    #[pyo3(signature = (job_id, token, lease, *, every = None))]
    fn keep_alive(
        &self,
        job_id: i64,
        token: String,
        lease: f64,
        every: Option<f64>,
    ) -> PyResult<crate::runtime::KeepAlive> {
        crate::runtime::keep_alive(&self.queue, job_id, token, lease, every)
    }

    #[pyo3(signature = (job_id, token, result = None, tx = None))]
    fn ack(
        &self,
        py: Python<'_>,
        job_id: i64,
        token: String,
        result: Option<&Bound<'_, PyAny>>,
        tx: Option<PyRef<'_, Transaction>>,
    ) -> PyResult<()> {
        let result = result.map(payload_from_py).transpose()?;
        let l = lease(job_id, token);
        let tx = tx.as_deref();
        py.detach(|| in_tx(tx, |tx| self.queue.ack_in(tx, &l, result)))
            .py()
    }

    /// Acks `[(id, token), ...]` in one transaction; returns how many were
    /// still held.
    #[pyo3(signature = (leases, tx = None))]
    fn ack_many(
        &self,
        py: Python<'_>,
        leases: Vec<(i64, String)>,
        tx: Option<PyRef<'_, Transaction>>,
    ) -> PyResult<usize> {
        let leases: Vec<Lease> = leases.into_iter().map(|(i, t)| lease(i, t)).collect();
        let tx = tx.as_deref();
        py.detach(|| in_tx(tx, |tx| self.queue.ack_many_in(tx, &leases)))
            .py()
    }

    /// Returns the new state: "ready", "scheduled" or "dead".
    #[pyo3(signature = (job_id, token, *, delay = None, error = None, tx = None))]
    fn retry(
        &self,
        py: Python<'_>,
        job_id: i64,
        token: String,
        delay: Option<f64>,
        error: Option<String>,
        tx: Option<PyRef<'_, Transaction>>,
    ) -> PyResult<&'static str> {
        let options = RetryOptions {
            delay: delay.map(|s| secs("delay", s)).transpose()?,
            error,
        };
        let l = lease(job_id, token);
        let tx = tx.as_deref();
        let state = py
            .detach(|| in_tx(tx, |tx| self.queue.retry_in(tx, &l, &options)))
            .py()?;
        Ok(state.as_str())
    }

    #[pyo3(signature = (job_id, token, error, *, tx = None))]
    fn fail(
        &self,
        py: Python<'_>,
        job_id: i64,
        token: String,
        error: &str,
        tx: Option<PyRef<'_, Transaction>>,
    ) -> PyResult<()> {
        let l = lease(job_id, token);
        let tx = tx.as_deref();
        py.detach(|| in_tx(tx, |tx| self.queue.fail_in(tx, &l, error)))
            .py()
    }

    #[pyo3(signature = (job_id, token, *, tx = None))]
    fn release(
        &self,
        py: Python<'_>,
        job_id: i64,
        token: String,
        tx: Option<PyRef<'_, Transaction>>,
    ) -> PyResult<()> {
        let l = lease(job_id, token);
        let tx = tx.as_deref();
        py.detach(|| in_tx(tx, |tx| self.queue.release_in(tx, &l)))
            .py()
    }

    #[pyo3(signature = (job_id, token, delay, *, tx = None))]
    fn snooze(
        &self,
        py: Python<'_>,
        job_id: i64,
        token: String,
        delay: f64,
        tx: Option<PyRef<'_, Transaction>>,
    ) -> PyResult<&'static str> {
        let delay = secs("delay", delay)?;
        let l = lease(job_id, token);
        let tx = tx.as_deref();
        let state = py
            .detach(|| in_tx(tx, |tx| self.queue.snooze_in(tx, &l, delay)))
            .py()?;
        Ok(state.as_str())
    }

    /// Extends the lease by `extend` seconds (default: the queue's lease);
    /// returns the new expiry in ms.
    #[pyo3(signature = (job_id, token, *, extend = None, tx = None))]
    fn heartbeat(
        &self,
        py: Python<'_>,
        job_id: i64,
        token: String,
        extend: Option<f64>,
        tx: Option<PyRef<'_, Transaction>>,
    ) -> PyResult<i64> {
        let extend = extend.map(|s| secs("extend", s)).transpose()?;
        let l = lease(job_id, token);
        let tx = tx.as_deref();
        py.detach(|| in_tx(tx, |tx| self.queue.heartbeat_in(tx, &l, extend)))
            .py()
    }

    #[pyo3(signature = (job_id, *, reason = None, tx = None))]
    fn cancel(
        &self,
        py: Python<'_>,
        job_id: i64,
        reason: Option<String>,
        tx: Option<PyRef<'_, Transaction>>,
    ) -> PyResult<bool> {
        let tx = tx.as_deref();
        py.detach(|| in_tx(tx, |tx| self.queue.cancel_in(tx, job_id, reason.as_deref())))
            .py()
    }

    /// The running job that `(job_id, token)` leases, rebuilt (core's
    /// `Queue::job`): its claimed tuple and its worker id.
    fn job(&self, py: Python<'_>, job_id: i64, token: String) -> PyResult<(ClaimedJob, String)> {
        let job = py.detach(|| self.queue.job(lease(job_id, token))).py()?;
        let worker = job.worker_id.clone();
        Ok((job.into(), worker))
    }

    fn get_job(&self, py: Python<'_>, job_id: i64) -> PyResult<JobInfo> {
        py.detach(|| self.queue.get_job(job_id))
            .py()
            .map(JobInfo::from)
    }

    fn get_result(&self, py: Python<'_>, job_id: i64) -> PyResult<Option<Payload>> {
        let r = py.detach(|| self.queue.get_result(job_id)).py()?;
        Ok(r.map(Payload::from))
    }

    /// Waits up to `timeout` seconds for the job's result; None if the job
    /// finished without one.
    fn wait_result(&self, py: Python<'_>, job_id: i64, timeout: f64) -> PyResult<Option<Payload>> {
        let timeout: Duration = secs("timeout", timeout)?;
        let r = py.detach(|| self.queue.wait_result(job_id, timeout)).py()?;
        Ok(r.map(Payload::from))
    }

    /// The queue's metrics (ADR 27) as core's JSON.
    fn metrics_json(&self, py: Python<'_>) -> PyResult<String> {
        let m = py.detach(|| self.queue.metrics()).py()?;
        Ok(m.to_json().to_string())
    }

    fn stats(&self, py: Python<'_>) -> PyResult<QueueStats> {
        py.detach(|| self.queue.stats()).py().map(QueueStats::from)
    }

    /// Stores the queue's settings in the file for every process (core's
    /// `Queue::configure`); a field not given keeps what is stored.
    fn configure(&self, py: Python<'_>, options: QueueArgs) -> PyResult<()> {
        let s = options.to_core().py()?;
        py.detach(|| self.queue.configure(&s)).py()
    }

    /// Pauses the queue for every process (core's `Queue::pause`).
    fn pause(&self, py: Python<'_>, options: crate::records::PauseArgs) -> PyResult<()> {
        let o = options.to_core().py()?;
        py.detach(|| self.queue.pause(&o)).py()
    }

    /// Lifts the queue's own pause; whether it had one.
    fn resume(&self, py: Python<'_>) -> PyResult<bool> {
        py.detach(|| self.queue.resume()).py()
    }

    /// Sets (a cap not given: lifts) the queue's concurrency caps for every
    /// process (core's `Queue::limit_concurrency`).
    fn limit_concurrency(
        &self,
        py: Python<'_>,
        options: crate::records::ConcurrencyArgs,
    ) -> PyResult<()> {
        let o = options.to_core().py()?;
        py.detach(|| self.queue.limit_concurrency(&o)).py()
    }

    /// Sets (an option not given: its default) how the queue shares its
    /// claims among its keys, for every process (core's
    /// `Queue::set_fairness`).
    fn set_fairness(&self, py: Python<'_>, options: crate::records::FairnessArgs) -> PyResult<()> {
        let o = options.to_core().py()?;
        py.detach(|| self.queue.set_fairness(&o)).py()
    }

    /// The stored settings: (lease s, max_attempts, backoff base s, max s,
    /// jitter), each None when not set.
    #[allow(clippy::type_complexity)]
    fn settings(
        &self,
        py: Python<'_>,
    ) -> PyResult<(
        Option<f64>,
        Option<u32>,
        Option<f64>,
        Option<f64>,
        Option<f64>,
    )> {
        let s = py.detach(|| self.queue.settings()).py()?;
        let f = |d: Option<Duration>| d.map(|d| d.as_secs_f64());
        Ok((
            f(s.lease),
            s.max_attempts,
            f(s.backoff_base),
            f(s.backoff_max),
            s.backoff_jitter,
        ))
    }

    fn clear_settings(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.queue.clear_settings()).py()
    }

    /// Sets (or with `limit` None lifts) the queue's rate limit: `limit`
    /// starts per `per` seconds, `burst` at once, for every process.
    #[pyo3(signature = (limit, per, burst))]
    fn set_rate_limit(
        &self,
        py: Python<'_>,
        limit: Option<i64>,
        per: Option<f64>,
        burst: i64,
    ) -> PyResult<()> {
        let rl = match (limit, per) {
            (Some(limit), Some(per)) => Some(honker::rate::RateLimit {
                limit,
                per: crate::database::secs("per", per)?,
                burst,
            }),
            (None, _) => None,
            (Some(_), None) => return Err(crate::errors::invalid("a rate limit needs per")),
        };
        let q = &self.queue;
        py.detach(|| q.set_rate_limit(rl)).py()
    }

    /// (limit, per_ms, burst), or None.
    fn rate_limit(&self, py: Python<'_>) -> PyResult<Option<(i64, i64, i64)>> {
        let q = &self.queue;
        let rl = py.detach(|| q.rate_limit()).py()?;
        Ok(rl.map(|r| (r.limit, r.per.as_millis() as i64, r.burst)))
    }

    #[pyo3(signature = (*, after_id = 0, limit = 100))]
    fn dead_letters(&self, py: Python<'_>, after_id: i64, limit: usize) -> PyResult<Vec<JobInfo>> {
        let jobs = py
            .detach(|| self.queue.dead_letters(after_id, limit))
            .py()?;
        Ok(jobs.into_iter().map(JobInfo::from).collect())
    }

    fn requeue_dead(&self, py: Python<'_>, job_id: i64) -> PyResult<bool> {
        py.detach(|| self.queue.requeue_dead(job_id)).py()
    }

    fn requeue_all_dead(&self, py: Python<'_>) -> PyResult<usize> {
        py.detach(|| self.queue.requeue_all_dead()).py()
    }

    #[pyo3(signature = (*, older_than = None))]
    fn purge_dead(&self, py: Python<'_>, older_than: Option<f64>) -> PyResult<usize> {
        let older = older_than.map(|s| secs("older_than", s)).transpose()?;
        py.detach(|| self.queue.purge_dead(older)).py()
    }
}
