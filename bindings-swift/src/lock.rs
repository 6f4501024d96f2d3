//! Locks and rate limits for Swift (`honker::lock`, `honker::rate`,
//! `honker::runtime::HeldLock`), with durations in milliseconds. The
//! idiomatic layer (`Sources/Honker/Lock.swift`) runs every call off the
//! caller's thread and holds a lock with `withLock`, cancelling the body's
//! task when the lock is lost.

use std::sync::Arc;
use std::time::Duration;

use honker::rate::RateLimit;
use honker::runtime::{HeldLock as CoreHeld, OffThreadDrop};

use crate::database::{in_tx, Database, Transaction};
use crate::errors::{ms, opt_ms, R};
use crate::queue::CancelToken;
use crate::records::{LockArgs, LockGrant, LockInfo, RateDecision};

/// A rate limiter's parameters as stored.
#[derive(Debug, uniffi::Record)]
pub struct RateLimitRecord {
    pub limit: i64,
    pub per_ms: u64,
    pub burst: i64,
}

#[uniffi::export]
impl Database {
    /// A handle on a named lock (writes nothing).
    pub fn lock(&self, name: String) -> R<Arc<Lock>> {
        Ok(Arc::new(Lock {
            l: self.core().lock(&name)?,
        }))
    }

    /// A handle on a rate limiter: `limit` calls per `per_ms`, `burst` at
    /// once, stored in the file on first use (`update`: for every process).
    pub fn rate_limiter(
        &self,
        name: String,
        limit: i64,
        per_ms: u64,
        burst: i64,
        update: bool,
    ) -> R<Arc<RateLimiter>> {
        let rl = RateLimit {
            limit,
            per: ms("per", per_ms)?,
            burst,
        };
        let rl = if update {
            self.core().rate_limiter_update(&name, rl)?
        } else {
            self.core().rate_limiter(&name, rl)?
        };
        Ok(Arc::new(RateLimiter { rl }))
    }

    /// The rate limiter `name` as stored in the file (NOT_FOUND if none).
    pub fn stored_rate_limiter(&self, name: String) -> R<Arc<RateLimiter>> {
        Ok(Arc::new(RateLimiter {
            rl: self.core().rate_limiter_stored(&name)?,
        }))
    }
}

/// A handle on one named lock.
#[derive(Debug, uniffi::Object)]
pub struct Lock {
    l: honker::lock::Lock,
}

#[uniffi::export]
impl Lock {
    pub fn name(&self) -> String {
        self.l.name().to_owned()
    }

    /// A grant for `owner`, or `None` while another owner holds it
    /// (`LockArgs` from the generated `tryAcquire` overloads, in seconds).
    pub fn try_acquire(
        &self,
        owner: String,
        options: LockArgs,
        tx: Option<Arc<Transaction>>,
    ) -> R<Option<LockGrant>> {
        let ttl = options.to_core()?.ttl;
        let g = in_tx(&tx, |t| match t {
            Some(t) => self.l.try_acquire_tx(t, &owner, ttl),
            None => self.l.try_acquire(&owner, ttl),
        })?;
        Ok(g.map(LockGrant::from))
    }

    /// A grant, waiting up to `wait_ms`; `None` when the wait ran out or
    /// `cancel` was cancelled (a grant taken as it was is released).
    pub fn acquire(
        &self,
        owner: String,
        ttl_ms: u64,
        wait_ms: u64,
        cancel: Option<Arc<CancelToken>>,
    ) -> R<Option<LockGrant>> {
        let (ttl, wait) = (ms("ttl", ttl_ms)?, ms("wait", wait_ms)?);
        let g = match cancel {
            Some(c) => c.core().acquire_lock(&self.l, &owner, ttl, wait)?,
            None => self.l.acquire(&owner, ttl, wait)?,
        };
        Ok(g.map(LockGrant::from))
    }

    /// Extends the lock held with `token`; returns the new expiry (ms).
    pub fn renew(&self, token: i64, ttl_ms: u64) -> R<i64> {
        Ok(self.l.renew(token, ms("ttl", ttl_ms)?)?)
    }

    /// Releases the lock held with `token`; whether it was held with it.
    pub fn release(&self, token: i64, tx: Option<Arc<Transaction>>) -> R<bool> {
        in_tx(&tx, |t| match t {
            Some(t) => self.l.release_tx(t, token),
            None => self.l.release(token),
        })
    }

    /// LEASE_LOST unless `token` holds the lock, inside `tx`.
    pub fn fence(&self, tx: Arc<Transaction>, token: i64) -> R<()> {
        tx.with(|t| self.l.fence(t, token))
    }

    pub fn info(&self) -> R<Option<LockInfo>> {
        Ok(self.l.info()?.map(LockInfo::from))
    }

    /// A token for this lock's file that ends a waiting `acquire`/`hold`.
    pub fn cancel_token(&self) -> Arc<CancelToken> {
        CancelToken::for_core(self.l.database())
    }

    /// Takes the lock (waiting up to `wait_ms`) and renews it every
    /// `every_ms` (a third of the TTL) until released; `None` if it was not
    /// free in time or `cancel` was cancelled.
    pub fn hold(
        &self,
        owner: String,
        ttl_ms: u64,
        wait_ms: u64,
        every_ms: Option<u64>,
        cancel: Option<Arc<CancelToken>>,
    ) -> R<Option<Arc<HeldLock>>> {
        let (ttl, wait, every) = (
            ms("ttl", ttl_ms)?,
            ms("wait", wait_ms)?,
            opt_ms("every", every_ms)?,
        );
        let h = CoreHeld::acquire(
            &self.l,
            &owner,
            ttl,
            wait,
            every,
            cancel.as_deref().map(CancelToken::core),
        )?;
        Ok(h.map(|h| {
            Arc::new(HeldLock {
                h: OffThreadDrop::new(h),
            })
        }))
    }
}

/// See `Lock::hold`. Its last reference is dropped on another thread (the
/// drop releases the lock: a write that may wait).
#[derive(Debug, uniffi::Object)]
pub struct HeldLock {
    h: OffThreadDrop<CoreHeld>,
}

#[uniffi::export]
impl HeldLock {
    pub fn token(&self) -> i64 {
        self.h.token()
    }

    /// When the lock lapses unless renewed again (ms since the epoch).
    pub fn expires_at(&self) -> i64 {
        self.h.expires_at()
    }

    pub fn is_lost(&self) -> bool {
        self.h.lost()
    }

    pub fn renewals(&self) -> u64 {
        self.h.renewals()
    }

    pub fn is_released(&self) -> bool {
        self.h.is_released()
    }

    /// How often the lock is renewed (ms): the earliest a loss is found.
    pub fn renew_every_ms(&self) -> u64 {
        self.h.renew_every().as_millis() as u64
    }

    /// Blocks until the lock is lost (true) or the hold ends otherwise or
    /// `timeout_ms` passes (false).
    pub fn wait_lost(&self, timeout_ms: u64) -> bool {
        self.h.wait_lost(Duration::from_millis(timeout_ms))
    }

    pub fn fence(&self, tx: Arc<Transaction>) -> R<()> {
        tx.with(|t| self.h.fence(t))
    }

    /// Stops renewing and releases; whether it was still held.
    pub fn release(&self) -> R<bool> {
        Ok(self.h.release()?)
    }
}

/// A handle on one rate limiter.
#[derive(Debug, uniffi::Object)]
pub struct RateLimiter {
    rl: honker::rate::RateLimiter,
}

#[uniffi::export]
impl RateLimiter {
    pub fn name(&self) -> String {
        self.rl.name().to_owned()
    }

    pub fn params(&self) -> R<RateLimitRecord> {
        let p = self.rl.limit()?;
        Ok(RateLimitRecord {
            limit: p.limit,
            per_ms: p.per.as_millis() as u64,
            burst: p.burst,
        })
    }

    /// `try_acquire`, again when the refusal's time has passed while the
    /// answer would come within `wait_ms` (core's `RateWait`): the allowed
    /// decision, or the last refusal (at once when its time lies beyond the
    /// wait); `None` once `cancel` is cancelled.
    pub fn acquire(
        &self,
        key: String,
        cost: i64,
        wait_ms: u64,
        cancel: Arc<CancelToken>,
    ) -> R<Option<RateDecision>> {
        let wait = ms("wait", wait_ms)?;
        let d = cancel.core().acquire_rate(&self.rl, &key, cost, wait)?;
        Ok(d.map(RateDecision::from))
    }

    /// A token for this limiter's file that ends a waiting `acquire`.
    pub fn cancel_token(&self) -> Arc<CancelToken> {
        CancelToken::for_core(self.rl.database())
    }

    /// Checks `cost` calls for `key` (0 peeks) and takes them when allowed.
    pub fn try_acquire(
        &self,
        key: String,
        cost: i64,
        tx: Option<Arc<Transaction>>,
    ) -> R<RateDecision> {
        let d = in_tx(&tx, |t| match t {
            Some(t) => self.rl.try_acquire_tx(t, &key, cost),
            None => self.rl.try_acquire(&key, cost),
        })?;
        Ok(d.into())
    }
}
