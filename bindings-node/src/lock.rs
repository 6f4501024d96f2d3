//! Locks and rate limits for Node (`honker::lock`, `honker::rate`,
//! `honker::runtime::HeldLock`): every verb once as an operation, exported
//! async and `try*` (errors.rs's `verbs!`); a hold's wait and its loss
//! watch run on tokio's blocking pool. Durations cross as ms.

use std::sync::Arc;

use honker::rate::RateLimit;
use honker::runtime::{Cancel, HeldLock as CoreHeld, OffThreadDrop};
use napi_derive::napi;

use crate::database::{with_tx, Database, Txs};
use napi::bindgen_prelude::AsyncBlock;
use napi::Env;

use crate::errors::{invalid, ms, now, opt_ms, out, pending, verbs, Op, Out};
use crate::records::{LockArgs, LockGrant, LockInfo, RateDecision};

#[napi]
impl Database {
    /// A handle on a named lock (writes nothing).
    #[napi]
    pub fn lock(&self, name: String) -> Out<Lock> {
        out(self.core().lock(&name).map(|l| Lock { l, txs: self.txs() }))
    }

    /// A handle on a rate limiter: `limit` calls per `per` ms, `burst` at
    /// once (1), stored in the file on first use (`update`: for every
    /// process); with neither `limit` nor `per`, the stored limiter.
    #[napi]
    pub fn rate_limiter(
        &self,
        env: Env,
        name: String,
        limit: Option<i64>,
        per: Option<f64>,
        burst: Option<i64>,
        update: bool,
    ) -> napi::Result<AsyncBlock<Out<RateLimiter>>> {
        let (db, txs) = (self.core().clone(), self.txs());
        pending(
            &env,
            Box::new(move || {
                let rl = match (limit, per) {
                (None, None) if burst.is_none() && !update => db.rate_limiter_stored(&name)?,
                (Some(limit), Some(per)) => {
                    let rl = RateLimit {
                        limit,
                        per: ms("per", per)?,
                        burst: burst.unwrap_or(1),
                    };
                    if update {
                        db.rate_limiter_update(&name, rl)?
                    } else {
                        db.rate_limiter(&name, rl)?
                    }
                }
                _ => return Err(invalid(
                    "a rate limiter needs both limit and per (or neither, to open the stored one)",
                )),
            };
                Ok(RateLimiter { rl, txs })
            }),
        )
    }
}

/// A handle on one named lock.
#[napi]
pub struct Lock {
    l: honker::lock::Lock,
    txs: Arc<Txs>,
}

/// Ends a waiting `hold`/`acquire` at once (an AbortSignal aborted).
#[napi]
pub struct LockCancel {
    c: Cancel,
}

#[napi]
impl LockCancel {
    #[napi]
    pub fn cancel(&self) {
        self.c.cancel();
    }
}

impl Lock {
    fn op<T>(
        &self,
        f: impl FnOnce(&honker::lock::Lock) -> honker::Result<T> + Send + 'static,
    ) -> Op<T> {
        let l = self.l.clone();
        Box::new(move || f(&l))
    }

    fn try_acquire_op(
        &self,
        owner: String,
        options: Option<LockArgs>,
        tx: Option<u32>,
    ) -> Op<Option<LockGrant>> {
        let txs = Arc::clone(&self.txs);
        self.op(move |l| {
            let ttl = options.unwrap_or_default().to_core()?.ttl;
            let g = with_tx(&txs, tx, |t| match t {
                Some(t) => l.try_acquire_tx(t, &owner, ttl),
                None => l.try_acquire(&owner, ttl),
            })?;
            Ok(g.map(LockGrant::from))
        })
    }

    fn renew_op(&self, token: i64, ttl: f64) -> Op<i64> {
        self.op(move |l| l.renew(token, ms("ttl", ttl)?))
    }

    fn release_op(&self, token: i64, tx: Option<u32>) -> Op<bool> {
        let txs = Arc::clone(&self.txs);
        self.op(move |l| {
            with_tx(&txs, tx, |t| match t {
                Some(t) => l.release_tx(t, token),
                None => l.release(token),
            })
        })
    }

    fn fence_op(&self, tx: u32, token: i64) -> Op<()> {
        let txs = Arc::clone(&self.txs);
        self.op(move |l| {
            with_tx(&txs, Some(tx), |t| match t {
                Some(t) => l.fence(t, token),
                None => Err(invalid("fence needs the transaction of the guarded write")),
            })
        })
    }

    fn info_op(&self) -> Op<Option<LockInfo>> {
        self.op(|l| Ok(l.info()?.map(LockInfo::from)))
    }
}

verbs! {
    impl Lock;
    #[doc = "A grant for `owner` for `ttl` ms, or null while another owner holds it."]
    try_acquire / try_try_acquire (owner: String, options: Option<LockArgs>, tx: Option<u32>) -> Option<LockGrant> = try_acquire_op;
    #[doc = "Extends the lock held with `token` to `ttl` ms from now; resolves to the new expiry."]
    renew / try_renew (token: i64, ttl: f64) -> i64 = renew_op;
    #[doc = "Releases the lock held with `token`; whether it was held with it."]
    release / try_release (token: i64, tx: Option<u32>) -> bool = release_op;
    #[doc = "LEASE_LOST unless `token` holds the lock, inside the transaction `tx`."]
    fence / try_fence (tx: u32, token: i64) -> () = fence_op;
    info / try_info () -> Option<LockInfo> = info_op;
}

#[napi]
impl Lock {
    #[napi(getter)]
    pub fn name(&self) -> String {
        self.l.name().to_owned()
    }

    /// A token that ends a waiting `acquire`/`hold` when cancelled.
    #[napi]
    pub fn cancel_token(&self) -> LockCancel {
        LockCancel {
            c: Cancel::new(self.l.database()),
        }
    }

    /// A grant, waiting up to `wait` ms for the lock (holding no thread
    /// while it waits: waits.rs); null when the wait ran out or `cancel` was
    /// cancelled (a grant taken as it was is released).
    #[napi]
    pub async fn acquire(
        &self,
        owner: String,
        ttl: f64,
        wait: f64,
        cancel: Option<&LockCancel>,
    ) -> napi::Result<Out<Option<LockGrant>>> {
        let (l, c) = (self.l.clone(), cancel.map(|c| c.c.clone()));
        let r = async move {
            let (ttl, wait) = (ms("ttl", ttl)?, ms("wait", wait)?);
            let taker = l.clone();
            let g = wait_for_lock(&l, &owner, wait, c.as_ref(), move |owner| {
                taker.try_acquire(owner, ttl)
            })
            .await?;
            match g {
                Some(g) if c.as_ref().is_some_and(Cancel::is_cancelled) => {
                    let _ = tokio::task::spawn_blocking(move || l.release(g.token)).await;
                    Ok(None)
                }
                g => Ok(g.map(LockGrant::from)),
            }
        };
        Ok(out(r.await))
    }

    /// Takes the lock (waiting up to `wait` ms, holding no thread while it
    /// waits) and renews it every `every` ms (a third of `ttl`) until
    /// released (core's `HeldLock`); null if it was not free in time or
    /// `cancel` was cancelled.
    #[napi]
    pub async fn hold(
        &self,
        owner: String,
        ttl: f64,
        wait: f64,
        every: Option<f64>,
        cancel: Option<&LockCancel>,
    ) -> napi::Result<Out<Option<HeldLock>>> {
        let (l, c) = (self.l.clone(), cancel.map(|c| c.c.clone()));
        let r = async move {
            let (ttl, wait, every) = (ms("ttl", ttl)?, ms("wait", wait)?, opt_ms("every", every)?);
            let taker = l.clone();
            let h = wait_for_lock(&l, &owner, wait, c.as_ref(), move |owner| {
                CoreHeld::acquire(&taker, owner, ttl, std::time::Duration::ZERO, every, None)
            })
            .await?;
            match h {
                Some(h) if c.as_ref().is_some_and(Cancel::is_cancelled) => {
                    let _ = tokio::task::spawn_blocking(move || h.release()).await;
                    Ok(None)
                }
                h => Ok(h.map(|h| HeldLock {
                    h: OffThreadDrop::new(h),
                })),
            }
        };
        Ok(out(r.await))
    }
}

/// Up to `wait` for `take(owner)` (one try) to get the lock: between tries
/// a sleep until any process commits (a release) or the holder's TTL lapses
/// (waits.rs), ended early by `cancel`.
async fn wait_for_lock<T: Send + 'static>(
    l: &honker::lock::Lock,
    owner: &str,
    wait: std::time::Duration,
    cancel: Option<&Cancel>,
    take: impl Fn(&str) -> honker::Result<Option<T>> + Send + Sync + 'static,
) -> honker::Result<Option<T>> {
    let (looker, owned) = (l.clone(), owner.to_owned());
    let lookup = owned.clone();
    let cancel = cancel.cloned();
    let parts = honker::Parts {
        look: move || looker.free_in(&lookup).map(Some),
        take: move || take(&owned),
    };
    crate::waits::wait(
        l.database(),
        wait,
        true,
        std::sync::Arc::new(parts),
        move || cancel.as_ref().is_some_and(Cancel::is_cancelled),
    )
    .await
}

/// See `Lock.hold`.
#[napi]
pub struct HeldLock {
    h: OffThreadDrop<CoreHeld>,
}

#[napi]
impl HeldLock {
    #[napi(getter)]
    pub fn token(&self) -> i64 {
        self.h.token()
    }

    /// When the lock lapses unless renewed again (ms since the epoch).
    #[napi(getter)]
    pub fn expires_at(&self) -> i64 {
        self.h.expires_at()
    }

    #[napi(getter)]
    pub fn lost(&self) -> bool {
        self.h.lost()
    }

    #[napi(getter)]
    pub fn renewals(&self) -> f64 {
        self.h.renewals() as f64
    }

    #[napi(getter)]
    pub fn released(&self) -> bool {
        self.h.is_released()
    }

    /// Resolves when the lock is lost (true) or the hold ends otherwise
    /// (false): released, or the database closed. Holds no thread while it
    /// waits (core's loss watch is a source: the renewal that finds the loss
    /// and the release poke the file's signal; waits.rs).
    #[napi]
    pub async fn wait_lost(&self) -> napi::Result<Out<bool>> {
        let h = self.h.shared();
        let db = h.lock().database().clone();
        let r = crate::waits::wait(&db, std::time::Duration::MAX, true, h, || false).await;
        Ok(out(r.map(|lost| lost.unwrap_or(false))))
    }

    /// Stops renewing and releases; resolves to whether it was still held.
    #[napi]
    pub fn release(&self, env: Env) -> napi::Result<AsyncBlock<Out<bool>>> {
        let h = self.h.shared();
        pending(&env, Box::new(move || h.release()))
    }
}

/// A handle on one rate limiter.
#[napi]
pub struct RateLimiter {
    rl: honker::rate::RateLimiter,
    txs: Arc<Txs>,
}

/// A limiter's parameters as stored; `per` in ms.
#[napi(object)]
pub struct RateLimitParams {
    pub limit: i64,
    pub per: f64,
    pub burst: i64,
}

impl RateLimiter {
    fn try_acquire_op(&self, key: String, cost: i64, tx: Option<u32>) -> Op<RateDecision> {
        let (rl, txs) = (self.rl.clone(), Arc::clone(&self.txs));
        Box::new(move || {
            let d = with_tx(&txs, tx, |t| match t {
                Some(t) => rl.try_acquire_tx(t, &key, cost),
                None => rl.try_acquire(&key, cost),
            })?;
            Ok(d.into())
        })
    }

    fn params_op(&self) -> Op<RateLimitParams> {
        let rl = self.rl.clone();
        Box::new(move || {
            let p = rl.limit()?;
            Ok(RateLimitParams {
                limit: p.limit,
                per: p.per.as_millis() as f64,
                burst: p.burst,
            })
        })
    }
}

verbs! {
    impl RateLimiter;
    #[doc = "Checks `cost` calls for `key` (0 peeks) and takes them when allowed."]
    try_acquire / try_try_acquire (key: String, cost: i64, tx: Option<u32>) -> RateDecision = try_acquire_op;
    params / try_params () -> RateLimitParams = params_op;
}

#[napi]
impl RateLimiter {
    #[napi(getter)]
    pub fn name(&self) -> String {
        self.rl.name().to_owned()
    }

    /// A cancellation token for `acquire` (an `AbortSignal`'s).
    #[napi]
    pub fn cancel_token(&self) -> LockCancel {
        LockCancel {
            c: Cancel::new(self.rl.database()),
        }
    }

    /// `tryAcquire`, again when the refusal's `retryAfterMs` has passed
    /// while the answer would come within `wait` ms, holding no thread
    /// meanwhile (core's `RateWait`, waits.rs): the
    /// allowed decision, or the last refusal (at once when its time lies
    /// beyond the wait, or `cancel` was cancelled).
    #[napi]
    pub async fn acquire(
        &self,
        key: String,
        cost: i64,
        wait: f64,
        cancel: Option<&LockCancel>,
    ) -> napi::Result<Out<RateDecision>> {
        let (rl, c) = (self.rl.clone(), cancel.map(|c| c.c.clone()));
        let r = async move {
            let wait = ms("wait", wait)?;
            let w = Arc::new(honker::rate::RateWait::new(&rl, &key, cost));
            let stop = move || c.as_ref().is_some_and(Cancel::is_cancelled);
            let got = crate::waits::wait(rl.database(), wait, true, Arc::clone(&w), stop).await?;
            match got {
                Some(d) => Ok(d.into()),
                None => crate::waits::on_pool(move || w.answer())
                    .await
                    .map(Into::into),
            }
        };
        Ok(out(r.await))
    }
}
