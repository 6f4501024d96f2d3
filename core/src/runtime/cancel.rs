//! A cancellation token for one waiting call (a claim with a wait,
//! `wait_result`): a host whose task is cancelled (Swift's task
//! cancellation, an `AbortSignal`) sets it from any thread, and the wait
//! ends at once instead of when its time runs out.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::error::Result;
use crate::payload::Payload;
use crate::queue::{ClaimOptions, Job, Queue};
use crate::Database;

/// See the module docs. Cheap to clone; every clone is the same token.
#[derive(Clone, Debug)]
pub struct Cancel {
    flag: Arc<AtomicBool>,
    db: Database,
}

impl Cancel {
    /// A token for waits on `db`'s file.
    pub fn new(db: &Database) -> Cancel {
        Cancel {
            flag: Arc::new(AtomicBool::new(false)),
            db: db.clone(),
        }
    }

    /// Ends the waits that take this token, now and later. Idempotent.
    pub fn cancel(&self) {
        self.flag.store(true, Ordering::SeqCst);
        self.db.poke();
    }

    /// Whether [`cancel`](Self::cancel) was called.
    pub fn is_cancelled(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }

    /// [`Queue::claim_with`] that returns early, with no jobs, once
    /// cancelled (also if cancelled before it starts). Jobs it claimed as
    /// the token was set are released (no attempt spent), not returned.
    pub fn claim(
        &self,
        queue: &Queue,
        worker_id: &str,
        n: usize,
        options: &ClaimOptions,
    ) -> Result<Vec<Job>> {
        if self.is_cancelled() {
            return Ok(Vec::new());
        }
        let jobs = queue.claim_until(
            worker_id,
            n,
            options.lease,
            options.wait,
            &mut || {},
            &|| self.is_cancelled(),
        )?;
        if self.is_cancelled() {
            for j in jobs {
                let _ = j.release();
            }
            return Ok(Vec::new());
        }
        Ok(jobs)
    }

    /// [`Reader::next_until`](super::Reader::next_until) that returns
    /// `None` once cancelled (also if cancelled before it starts): a
    /// claimer's, subscription's, listener's or group consumer's next. The
    /// reader stays open and loses nothing: an item taken as the token was
    /// set is returned, the rest stay buffered for the next call (or
    /// `close`).
    pub fn next<R: super::Reader>(&self, reader: &R, wait: Duration) -> Result<Option<R::Item>> {
        if self.is_cancelled() {
            return Ok(None);
        }
        reader.next_until(wait, &|| self.is_cancelled())
    }

    /// [`Group::claim_wait`](crate::stream::group::Group::claim_wait) that
    /// returns early, with no events, once cancelled (also if cancelled
    /// before it starts). Events it claimed as the token was set are
    /// released (no attempt spent), not returned.
    pub fn claim_group(
        &self,
        group: &crate::stream::group::Group,
        member: &str,
        n: usize,
        lease: Option<Duration>,
        wait: Duration,
    ) -> Result<crate::stream::group::GroupClaim> {
        if self.is_cancelled() {
            return Ok(Default::default());
        }
        let got = group.claim_until(member, n, lease, wait, &|| self.is_cancelled())?;
        if self.is_cancelled() {
            for e in &got.events {
                let _ = group.release(e);
            }
            return Ok(Default::default());
        }
        Ok(got)
    }

    /// [`Lock::acquire`](crate::lock::Lock::acquire) that returns `None`
    /// once cancelled. A grant taken as the token was set is released, not
    /// returned (nobody is left to hold it).
    pub fn acquire_lock(
        &self,
        lock: &crate::lock::Lock,
        owner: &str,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Option<crate::lock::LockGrant>> {
        if self.is_cancelled() {
            return Ok(None);
        }
        let grant = lock.acquire_until(owner, ttl, wait, &|| self.is_cancelled())?;
        match grant {
            Some(g) if self.is_cancelled() => {
                lock.release(g.token)?;
                Ok(None)
            }
            other => Ok(other),
        }
    }

    /// [`RateLimiter::acquire`](crate::rate::RateLimiter::acquire) that
    /// returns `None` once cancelled (calls taken as the token was set stay
    /// taken: a rate limit has nothing to give back).
    pub fn acquire_rate(
        &self,
        limiter: &crate::rate::RateLimiter,
        key: &str,
        cost: i64,
        wait: Duration,
    ) -> Result<Option<crate::rate::RateDecision>> {
        limiter.acquire_until(key, cost, wait, &|| self.is_cancelled())
    }

    /// [`Queue::wait_result`] that fails at once with `TIMEOUT` ("cancelled")
    /// once cancelled.
    pub fn wait_result(
        &self,
        queue: &Queue,
        id: i64,
        timeout: Duration,
    ) -> Result<Option<Payload>> {
        queue.wait_result_until(id, timeout, &|| self.is_cancelled())
    }
}
