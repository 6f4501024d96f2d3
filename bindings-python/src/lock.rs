//! Locks and rate limits for Python (`honker::lock`, `honker::rate`,
//! `honker::runtime::HeldLock`): grants, holders and decisions cross as the
//! tuples of core's records table; the package wraps them (`with`,
//! `async with`, `lost`). Every call that may wait or write runs without
//! the GIL.

use std::time::Duration;

use honker::rate::RateLimit;
use honker::runtime::{Cancel, HeldLock as CoreHeld, OffThreadDrop};
use pyo3::prelude::*;

use crate::database::{in_tx, secs, Transaction};
use crate::errors::IntoPyResult as _;
use crate::records::{LockArgs, LockGrant, LockInfo, RateDecision};

/// A handle on one named lock (see `Database.lock`).
#[pyclass(module = "honker._native", frozen)]
#[derive(Debug)]
pub struct Lock {
    pub(crate) lock: honker::lock::Lock,
}

/// Ends a waiting `hold` at once (an asyncio task cancelled).
#[pyclass(module = "honker._native", frozen)]
#[derive(Debug)]
pub struct CancelToken {
    pub(crate) c: Cancel,
}

#[pymethods]
impl CancelToken {
    fn cancel(&self) {
        self.c.cancel();
    }
}

#[pymethods]
impl Lock {
    #[getter]
    fn name(&self) -> &str {
        self.lock.name()
    }

    /// A grant, or None while another owner holds it. `LockArgs` as a
    /// tuple (the package's generated `try_acquire` builds it).
    #[pyo3(signature = (owner, options, *, tx = None))]
    fn try_acquire(
        &self,
        py: Python<'_>,
        owner: &str,
        options: LockArgs,
        tx: Option<PyRef<'_, Transaction>>,
    ) -> PyResult<Option<LockGrant>> {
        let ttl = options.to_core().py()?.ttl;
        let (l, tx) = (&self.lock, tx.as_deref());
        let g = py
            .detach(|| {
                in_tx(tx, |t| match t {
                    Some(t) => l.try_acquire_tx(t, owner, ttl),
                    None => l.try_acquire(owner, ttl),
                })
            })
            .py()?;
        Ok(g.map(LockGrant::from))
    }

    /// A grant, waiting up to `wait` seconds for the lock; None if it ran
    /// out or `cancel` was set (a grant taken as it was set is released).
    #[pyo3(signature = (owner, ttl, wait, *, cancel = None))]
    fn acquire(
        &self,
        py: Python<'_>,
        owner: &str,
        ttl: f64,
        wait: f64,
        cancel: Option<PyRef<'_, CancelToken>>,
    ) -> PyResult<Option<LockGrant>> {
        let (ttl, wait) = (secs("ttl", ttl)?, secs("wait", wait)?);
        let (l, c) = (&self.lock, cancel.as_deref().map(|c| &c.c));
        let g = py
            .detach(|| match c {
                Some(c) => c.acquire_lock(l, owner, ttl, wait),
                None => l.acquire(owner, ttl, wait),
            })
            .py()?;
        Ok(g.map(LockGrant::from))
    }

    /// The new expiry (ms); LeaseLost once the token no longer holds it.
    fn renew(&self, py: Python<'_>, token: i64, ttl: f64) -> PyResult<i64> {
        let ttl = secs("ttl", ttl)?;
        let l = &self.lock;
        py.detach(|| l.renew(token, ttl)).py()
    }

    #[pyo3(signature = (token, *, tx = None))]
    fn release(
        &self,
        py: Python<'_>,
        token: i64,
        tx: Option<PyRef<'_, Transaction>>,
    ) -> PyResult<bool> {
        let (l, tx) = (&self.lock, tx.as_deref());
        py.detach(|| {
            in_tx(tx, |t| match t {
                Some(t) => l.release_tx(t, token),
                None => l.release(token),
            })
        })
        .py()
    }

    fn fence(&self, py: Python<'_>, tx: PyRef<'_, Transaction>, token: i64) -> PyResult<()> {
        let (l, tx) = (&self.lock, &*tx);
        py.detach(|| tx.with(|t| l.fence(t, token))).py()
    }

    fn info(&self, py: Python<'_>) -> PyResult<Option<LockInfo>> {
        let l = &self.lock;
        Ok(py.detach(|| l.info()).py()?.map(LockInfo::from))
    }

    /// Seconds until `owner` could take it (0.0: try now), found without
    /// waiting; False where a reader was not free at once.
    fn free_in<'py>(&self, py: Python<'py>, owner: &str) -> PyResult<Bound<'py, PyAny>> {
        let l = &self.lock;
        crate::runtime::looked(py, || l.free_in(owner).map(Some))
    }

    /// A token for `hold`'s wait.
    fn cancel_token(&self) -> PyResult<CancelToken> {
        Ok(CancelToken {
            c: Cancel::new(self.lock.database()),
        })
    }

    /// Takes the lock and renews it until released (core's `HeldLock`);
    /// None if it was not free within `wait` or `cancel` was set.
    #[pyo3(signature = (owner, ttl, wait, *, every = None, cancel = None))]
    fn hold(
        &self,
        py: Python<'_>,
        owner: &str,
        ttl: f64,
        wait: f64,
        every: Option<f64>,
        cancel: Option<PyRef<'_, CancelToken>>,
    ) -> PyResult<Option<HeldLock>> {
        let (ttl, wait) = (secs("ttl", ttl)?, secs("wait", wait)?);
        let every = every.map(|s| secs("every", s)).transpose()?;
        let (l, c) = (&self.lock, cancel.as_deref().map(|c| &c.c));
        let held = py
            .detach(|| CoreHeld::acquire(l, owner, ttl, wait, every, c))
            .py()?;
        Ok(held.map(|h| HeldLock {
            h: OffThreadDrop::new(h),
        }))
    }
}

/// See `Lock.hold`.
#[pyclass(module = "honker._native", frozen)]
#[derive(Debug)]
pub struct HeldLock {
    h: OffThreadDrop<CoreHeld>,
}

#[pymethods]
impl HeldLock {
    #[getter]
    fn token(&self) -> i64 {
        self.h.token()
    }

    #[getter]
    fn expires_at_ms(&self) -> i64 {
        self.h.expires_at()
    }

    #[getter]
    fn lost(&self) -> bool {
        self.h.lost()
    }

    #[getter]
    fn renewals(&self) -> u64 {
        self.h.renewals()
    }

    #[getter]
    fn released(&self) -> bool {
        self.h.is_released()
    }

    /// Blocks (without the GIL) until the lock is lost (True) or the hold
    /// ends otherwise or `timeout` passes (False).
    fn wait_lost(&self, py: Python<'_>, timeout: f64) -> PyResult<bool> {
        let timeout = Duration::from_secs_f64(timeout.clamp(0.0, 1e9));
        let h = self.h.shared();
        Ok(py.detach(|| h.wait_lost(timeout)))
    }

    /// How often the lock is renewed (seconds): the earliest a loss can be
    /// found (a watch on a thread starts then).
    #[getter]
    fn renew_every(&self) -> f64 {
        self.h.renew_every().as_secs_f64()
    }

    /// The loss watch's look on the event loop (core's source): 0.0 once
    /// the hold has ended, None until then (the renewal that finds the loss
    /// and the release wake the file's readiness). No I/O.
    fn loss_look(&self) -> PyResult<Option<f64>> {
        use honker::Source as _;
        Ok(self.h.look().py()?.map(|d| d.as_secs_f64()))
    }

    /// The loss watch's take: whether the lock was lost, once the hold has
    /// ended; None before.
    fn loss_take(&self) -> PyResult<Option<bool>> {
        use honker::Source as _;
        self.h.take().py()
    }

    fn fence(&self, py: Python<'_>, tx: PyRef<'_, Transaction>) -> PyResult<()> {
        let (h, tx) = (&self.h, &*tx);
        py.detach(|| tx.with(|t| h.fence(t))).py()
    }

    /// Stops renewing and releases; whether it was still held.
    fn release(&self, py: Python<'_>) -> PyResult<bool> {
        let h = &self.h;
        py.detach(|| h.release()).py()
    }
}

/// A handle on one rate limiter (see `Database.rate_limiter`).
#[pyclass(module = "honker._native", frozen)]
#[derive(Debug)]
pub struct RateLimiter {
    pub(crate) rl: honker::rate::RateLimiter,
}

/// `Database.rate_limiter`: `limit` calls per `per` seconds, `burst` at
/// once; `update` stores them for every process; with `limit` None, the
/// stored limiter.
pub(crate) fn rate_limiter(
    db: &honker::Database,
    name: &str,
    limit: Option<i64>,
    per: Option<f64>,
    burst: Option<i64>,
    update: bool,
) -> PyResult<RateLimiter> {
    let rl = match (limit, per) {
        (None, None) if burst.is_none() && !update => db.rate_limiter_stored(name),
        (Some(limit), Some(per)) => {
            let per = secs("per", per)?;
            let rl = RateLimit {
                limit,
                per,
                burst: burst.unwrap_or(1),
            };
            if update {
                db.rate_limiter_update(name, rl)
            } else {
                db.rate_limiter(name, rl)
            }
        }
        _ => {
            return Err(crate::errors::invalid(
                "a rate limiter needs both limit and per (or neither, to open the stored one)",
            ))
        }
    };
    Ok(RateLimiter { rl: rl.py()? })
}

#[pymethods]
impl RateLimiter {
    #[getter]
    fn name(&self) -> &str {
        self.rl.name()
    }

    /// (limit, per_ms, burst) as stored in the file.
    fn params(&self, py: Python<'_>) -> PyResult<(i64, i64, i64)> {
        let rl = &self.rl;
        let p = py.detach(|| rl.limit()).py()?;
        Ok((p.limit, p.per.as_millis() as i64, p.burst))
    }

    #[pyo3(signature = (key, cost, *, tx = None))]
    fn try_acquire(
        &self,
        py: Python<'_>,
        key: &str,
        cost: i64,
        tx: Option<PyRef<'_, Transaction>>,
    ) -> PyResult<RateDecision> {
        let (rl, tx) = (&self.rl, tx.as_deref());
        let d = py
            .detach(|| {
                in_tx(tx, |t| match t {
                    Some(t) => rl.try_acquire_tx(t, key, cost),
                    None => rl.try_acquire(key, cost),
                })
            })
            .py()?;
        Ok(d.into())
    }

    fn acquire(&self, py: Python<'_>, key: &str, cost: i64, wait: f64) -> PyResult<RateDecision> {
        let wait = secs("wait", wait)?;
        let rl = &self.rl;
        Ok(py.detach(|| rl.acquire(key, cost, wait)).py()?.into())
    }

    /// An acquire as the event loop waits for it (core's `RateWait`).
    fn waiting(&self, key: &str, cost: i64) -> RateWait {
        RateWait {
            w: honker::rate::RateWait::new(&self.rl, key, cost),
        }
    }
}

/// A rate limiter's acquire as a look and a take (core's `RateWait`): the
/// package's `acquire_async` runs it on the event loop.
#[pyclass(module = "honker._native", frozen)]
#[derive(Debug)]
pub struct RateWait {
    w: honker::rate::RateWait,
}

#[pymethods]
impl RateWait {
    /// Seconds until a take may be allowed (0.0: now); no I/O.
    fn look(&self) -> PyResult<Option<f64>> {
        use honker::Source as _;
        Ok(self.w.look().py()?.map(|d| d.as_secs_f64()))
    }

    /// One try: the allowed decision, or None (refused: see `retry_in`).
    fn take(&self, py: Python<'_>) -> PyResult<Option<RateDecision>> {
        use honker::Source as _;
        let w = &self.w;
        Ok(py.detach(|| w.take()).py()?.map(Into::into))
    }

    /// Seconds until the last refusal's time has passed.
    fn retry_in(&self) -> Option<f64> {
        use honker::Source as _;
        self.w.retry_in().map(|d| d.as_secs_f64())
    }

    /// The answer of an acquire whose wait got nothing: the last refusal.
    fn answer(&self, py: Python<'_>) -> PyResult<RateDecision> {
        let w = &self.w;
        Ok(py.detach(|| w.answer()).py()?.into())
    }
}
