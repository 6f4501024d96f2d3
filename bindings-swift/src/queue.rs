//! `Queue` for Swift: every verb of core's `Queue`, with durations in
//! milliseconds and an optional transaction. Mirrors `core/src/queue/`.

use std::sync::Arc;

use crate::database::{in_tx, Payload, Transaction};
use crate::errors::{ms, opt_ms, R};
use crate::packed;
use crate::records::{ClaimedJob, EnqueueArgs, JobInfo, QueueStats};

/// A job rebuilt from its lease: see `Queue::job`.
#[derive(Debug, uniffi::Record)]
pub struct RebuiltJob {
    pub job: ClaimedJob,
    pub worker_id: String,
}

#[derive(Debug, uniffi::Record)]
pub struct LeaseRecord {
    pub id: i64,
    pub token: String,
}

/// A handle on one queue.
#[derive(Debug, uniffi::Object)]
pub struct Queue {
    q: honker::Queue,
}

impl Queue {
    pub(crate) fn new(q: honker::Queue) -> Queue {
        Queue { q }
    }

    pub(crate) fn core(&self) -> &honker::Queue {
        &self.q
    }
}

/// Ends one waiting call at once (core's `runtime::Cancel`): Swift's task
/// cancellation handler calls `cancel()`.
#[derive(Debug, uniffi::Object)]
pub struct CancelToken {
    c: honker::runtime::Cancel,
}

#[uniffi::export]
impl CancelToken {
    /// A token for waits on `queue`'s file.
    #[uniffi::constructor]
    pub fn new(queue: Arc<Queue>) -> Arc<CancelToken> {
        Arc::new(CancelToken {
            c: honker::runtime::Cancel::new(queue.q.database()),
        })
    }

    /// A token for waits on `db`'s file (a subscription's, a listener's).
    #[uniffi::constructor]
    pub fn for_database(db: Arc<crate::database::Database>) -> Arc<CancelToken> {
        Arc::new(CancelToken {
            c: honker::runtime::Cancel::new(db.core()),
        })
    }

    pub fn cancel(&self) {
        self.c.cancel();
    }
}

impl CancelToken {
    pub(crate) fn core(&self) -> &honker::runtime::Cancel {
        &self.c
    }

    /// A token for waits on `db`'s file.
    pub(crate) fn for_core(db: &honker::Database) -> Arc<CancelToken> {
        Arc::new(CancelToken {
            c: honker::runtime::Cancel::new(db),
        })
    }
}

/// See `Queue::claimer`.
#[derive(Debug, uniffi::Object)]
pub struct Claimer {
    c: honker::runtime::Claimer,
}

#[uniffi::export]
impl Claimer {
    /// The next job, waiting up to `wait_ms` for work; `None` when the wait
    /// ran out or the claimer is closed.
    pub fn next(&self, wait_ms: u64) -> R<Option<ClaimedJob>> {
        let wait = ms("wait", wait_ms)?;
        Ok(self.c.next(wait)?.map(ClaimedJob::from))
    }

    /// `next` that returns `None` at once when `cancel` is cancelled (Swift's
    /// task cancellation); the claimer stays open and loses nothing.
    pub fn next_cancellable(
        &self,
        wait_ms: u64,
        cancel: Arc<CancelToken>,
    ) -> R<Option<ClaimedJob>> {
        let job = cancel.core().next(&self.c, ms("wait", wait_ms)?)?;
        Ok(job.map(ClaimedJob::from))
    }

    /// Releases the jobs claimed but not handed out and wakes a waiting
    /// `next`; returns how many were released.
    pub fn close(&self) -> u64 {
        self.c.close() as u64
    }

    pub fn is_closed(&self) -> bool {
        self.c.is_closed()
    }

    pub fn buffered(&self) -> u64 {
        self.c.buffered() as u64
    }
}

/// See `Queue::keep_alive`.
#[derive(Debug, uniffi::Object)]
pub struct KeepAlive {
    k: honker::runtime::KeepAlive,
}

#[uniffi::export]
impl KeepAlive {
    /// Whether the lease was lost (renewal stopped).
    pub fn lost(&self) -> bool {
        self.k.lost()
    }

    pub fn beats(&self) -> u64 {
        self.k.beats()
    }

    /// The lease's expiry after the last renewal (ms), if there was one.
    pub fn lease_expires_at_ms(&self) -> Option<i64> {
        self.k.lease_expires_at()
    }

    /// Stops renewing; returns whether the lease was lost meanwhile.
    pub fn stop(&self) -> bool {
        self.k.stop().lost
    }
}

fn lease(id: i64, token: String) -> honker::Lease {
    honker::Lease { job_id: id, token }
}

#[uniffi::export]
impl Queue {
    pub fn name(&self) -> String {
        self.q.name().to_owned()
    }

    /// The default lease (ms).
    pub fn lease_ms(&self) -> u64 {
        self.q.options().lease.as_millis() as u64
    }

    /// Enqueues packed payloads, passed by address (packed.rs), all in one
    /// transaction; returns the packed results, one per payload in order.
    /// `options` is core's `EnqueueArgs` (the package's generated `enqueue`
    /// and `enqueueMany` build it; Swift has no ambient trace context honker
    /// could capture, ADR 28).
    ///
    /// # Safety
    ///
    /// As for `packed::borrowed`: the address must be a live buffer of
    /// that length. Not an `unsafe fn` only because UniFFI exports none;
    /// Packed.swift is its one caller (as `handle_ptr`'s callers, for a
    /// connection's address).
    pub fn enqueue(
        &self,
        payloads_address: u64,
        payloads_len: u64,
        options: EnqueueArgs,
        tx: Option<Arc<Transaction>>,
    ) -> R<Vec<u8>> {
        let o = options.to_core()?;
        // SAFETY: the caller's contract above.
        let payloads =
            packed::unpack_payloads(unsafe { packed::borrowed(payloads_address, payloads_len)? })?;
        let done = in_tx(&tx, |tx| self.q.enqueue_many_in(tx, payloads, &o))?;
        Ok(packed::pack_enqueued(done))
    }

    /// `enqueue` on a connection to this file that the app opened itself
    /// (GRDB's handle, as an address), inside whatever transaction it has
    /// open there: core's `Queue::enqueue_many_on`.
    pub fn enqueue_on(
        &self,
        handle: u64,
        payloads_address: u64,
        payloads_len: u64,
        options: EnqueueArgs,
    ) -> R<Vec<u8>> {
        let db = crate::database::handle_ptr(handle)?;
        let o = options.to_core()?;
        // SAFETY: as for `enqueue`.
        let payloads =
            packed::unpack_payloads(unsafe { packed::borrowed(payloads_address, payloads_len)? })?;
        // SAFETY: as for `Database::register_functions`.
        let done = unsafe { self.q.enqueue_many_on(db, payloads, &o)? };
        Ok(packed::pack_enqueued(done))
    }

    /// Claims up to `n` jobs, waiting up to `wait_ms` for work; the jobs
    /// packed (packed.rs).
    pub fn claim(
        &self,
        worker_id: String,
        n: u32,
        lease_ms: Option<u64>,
        wait_ms: u64,
        tx: Option<Arc<Transaction>>,
    ) -> R<Vec<u8>> {
        let n = honker::validate::batch(i64::from(n))?;
        let lease = opt_ms("lease", lease_ms)?;
        let wait = ms("wait", wait_ms)?;
        let jobs = in_tx(&tx, |tx| {
            self.q
                .claim_in(tx, &worker_id, n, &honker::ClaimOptions { lease, wait })
        })?;
        Ok(packed::pack_claimed(jobs))
    }

    /// `claim` (outside a transaction) that `cancel` ends at once, with no
    /// jobs (core's `Cancel::claim`: jobs claimed as it was cancelled are
    /// released, not returned).
    pub fn claim_cancellable(
        &self,
        worker_id: String,
        n: u32,
        lease_ms: Option<u64>,
        wait_ms: u64,
        cancel: Arc<CancelToken>,
    ) -> R<Vec<u8>> {
        let n = honker::validate::batch(i64::from(n))?;
        let lease = opt_ms("lease", lease_ms)?;
        let wait = ms("wait", wait_ms)?;
        let jobs = cancel.c.claim(
            &self.q,
            &worker_id,
            n,
            &honker::ClaimOptions { lease, wait },
        )?;
        Ok(packed::pack_claimed(jobs))
    }

    /// `wait_result` that `cancel` ends at once (`TIMEOUT`).
    pub fn wait_result_cancellable(
        &self,
        id: i64,
        timeout_ms: u64,
        cancel: Arc<CancelToken>,
    ) -> R<Option<Payload>> {
        let t = ms("timeout", timeout_ms)?;
        Ok(cancel.c.wait_result(&self.q, id, t)?.map(Into::into))
    }

    /// The running job that `(id, token)` leases, rebuilt (core's
    /// `Queue::job`).
    pub fn job(&self, id: i64, token: String) -> R<RebuiltJob> {
        let j = self.q.job(lease(id, token))?;
        let worker_id = j.worker_id.clone();
        Ok(RebuiltJob {
            job: j.into(),
            worker_id,
        })
    }

    /// The claim stream (core's `runtime::Claimer`): `next(wait_ms)` hands
    /// out one job at a time; `close()`, or dropping it, releases the jobs
    /// claimed but not handed out.
    pub fn claimer(&self, worker_id: String, batch: u32, lease_ms: Option<u64>) -> R<Arc<Claimer>> {
        let lease = opt_ms("lease", lease_ms)?;
        let c = honker::runtime::Claimer::new(&self.q, &worker_id, batch as usize, lease)?;
        Ok(Arc::new(Claimer { c }))
    }

    /// Renews the lease of job `id` (core's `runtime::KeepAlive`): extends it
    /// to `lease_ms` every `every_ms` (default: a third of it) until stopped;
    /// stops and reports when the lease is lost.
    pub fn keep_alive(
        &self,
        id: i64,
        token: String,
        lease_ms: u64,
        every_ms: Option<u64>,
    ) -> R<Arc<KeepAlive>> {
        let length = ms("lease", lease_ms)?;
        let every = opt_ms("every", every_ms)?;
        let k = honker::runtime::KeepAlive::start(&self.q, lease(id, token), length, every)?;
        Ok(Arc::new(KeepAlive { k }))
    }

    pub fn ack(
        &self,
        id: i64,
        token: String,
        result: Option<Payload>,
        tx: Option<Arc<Transaction>>,
    ) -> R<()> {
        let l = lease(id, token);
        let result = result.map(Into::into);
        in_tx(&tx, |tx| self.q.ack_in(tx, &l, result))
    }

    pub fn ack_many(&self, leases: Vec<LeaseRecord>, tx: Option<Arc<Transaction>>) -> R<u64> {
        let leases: Vec<honker::Lease> = leases.into_iter().map(|l| lease(l.id, l.token)).collect();
        in_tx(&tx, |tx| self.q.ack_many_in(tx, &leases)).map(|n| n as u64)
    }

    /// The new state: "ready", "scheduled" or "dead".
    pub fn retry(
        &self,
        id: i64,
        token: String,
        delay_ms: Option<u64>,
        error: Option<String>,
        tx: Option<Arc<Transaction>>,
    ) -> R<String> {
        let o = honker::RetryOptions {
            delay: opt_ms("delay", delay_ms)?,
            error,
        };
        let l = lease(id, token);
        in_tx(&tx, |tx| self.q.retry_in(tx, &l, &o)).map(|s| s.as_str().to_owned())
    }

    pub fn fail(
        &self,
        id: i64,
        token: String,
        error: String,
        tx: Option<Arc<Transaction>>,
    ) -> R<()> {
        let l = lease(id, token);
        in_tx(&tx, |tx| self.q.fail_in(tx, &l, &error))
    }

    pub fn release(&self, id: i64, token: String, tx: Option<Arc<Transaction>>) -> R<()> {
        let l = lease(id, token);
        in_tx(&tx, |tx| self.q.release_in(tx, &l))
    }

    pub fn snooze(
        &self,
        id: i64,
        token: String,
        delay_ms: u64,
        tx: Option<Arc<Transaction>>,
    ) -> R<String> {
        let d = ms("delay", delay_ms)?;
        let l = lease(id, token);
        in_tx(&tx, |tx| self.q.snooze_in(tx, &l, d)).map(|s| s.as_str().to_owned())
    }

    /// The new lease expiry (ms since the epoch).
    pub fn heartbeat(&self, id: i64, token: String, extend_ms: Option<u64>) -> R<i64> {
        let extend = opt_ms("extend", extend_ms)?;
        Ok(self.q.heartbeat(&lease(id, token), extend)?)
    }

    pub fn cancel(&self, id: i64, reason: Option<String>, tx: Option<Arc<Transaction>>) -> R<bool> {
        in_tx(&tx, |tx| self.q.cancel_in(tx, id, reason.as_deref()))
    }

    pub fn get_job(&self, id: i64) -> R<JobInfo> {
        Ok(self.q.get_job(id)?.into())
    }

    pub fn get_result(&self, id: i64) -> R<Option<Payload>> {
        Ok(self.q.get_result(id)?.map(Into::into))
    }

    pub fn wait_result(&self, id: i64, timeout_ms: u64) -> R<Option<Payload>> {
        let t = ms("timeout", timeout_ms)?;
        Ok(self.q.wait_result(id, t)?.map(Into::into))
    }

    pub fn stats(&self) -> R<QueueStats> {
        Ok(self.q.stats()?.into())
    }

    /// Stores the queue's settings in the file for every process (core's
    /// `Queue::configure`); the ones not given stay as stored.
    pub fn configure(&self, options: crate::records::QueueArgs) -> R<()> {
        Ok(self.q.configure(&options.to_core()?)?)
    }

    /// The queue's stored settings (ms), each nil when not set.
    pub fn settings(&self) -> R<crate::database::QueueOptions> {
        Ok(crate::database::QueueOptions::from_settings(
            &self.q.settings()?,
        ))
    }

    /// Forgets the queue's stored settings.
    pub fn clear_settings(&self) -> R<()> {
        Ok(self.q.clear_settings()?)
    }

    /// Pauses the queue for every process (core's `Queue::pause`).
    pub fn pause(&self, options: crate::records::PauseArgs) -> R<()> {
        Ok(self.q.pause(&options.to_core()?)?)
    }

    /// Lifts the queue's own pause; whether it had one.
    pub fn resume(&self) -> R<bool> {
        Ok(self.q.resume()?)
    }

    /// Sets (a cap not given: lifts) the queue's concurrency caps for every
    /// process (core's `Queue::limit_concurrency`).
    pub fn limit_concurrency(&self, options: crate::records::ConcurrencyArgs) -> R<()> {
        Ok(self.q.limit_concurrency(&options.to_core()?)?)
    }

    /// Sets (an option not given: its default) how the queue shares its
    /// claims among its keys, for every process (core's
    /// `Queue::set_fairness`).
    pub fn set_fairness(&self, options: crate::records::FairnessArgs) -> R<()> {
        Ok(self.q.set_fairness(&options.to_core()?)?)
    }

    /// The queue's metrics (ADR 27) as core's JSON.
    pub fn metrics_json(&self) -> R<String> {
        Ok(self.q.metrics()?.to_json().to_string())
    }

    /// Sets (`None`: lifts) the queue's rate limit, for every process.
    pub fn set_rate_limit(&self, limit: Option<crate::lock::RateLimitRecord>) -> R<()> {
        let rl = match limit {
            None => None,
            Some(p) => Some(honker::rate::RateLimit {
                limit: p.limit,
                per: ms("per", p.per_ms)?,
                burst: p.burst,
            }),
        };
        Ok(self.q.set_rate_limit(rl)?)
    }

    pub fn rate_limit(&self) -> R<Option<crate::lock::RateLimitRecord>> {
        Ok(self.q.rate_limit()?.map(|p| crate::lock::RateLimitRecord {
            limit: p.limit,
            per_ms: p.per.as_millis() as u64,
            burst: p.burst,
        }))
    }

    pub fn dead_letters(&self, after_id: i64, limit: u32) -> R<Vec<JobInfo>> {
        Ok(self
            .q
            .dead_letters(after_id, limit as usize)?
            .into_iter()
            .map(JobInfo::from)
            .collect())
    }

    pub fn requeue_dead(&self, id: i64) -> R<bool> {
        Ok(self.q.requeue_dead(id)?)
    }

    pub fn requeue_all_dead(&self) -> R<u64> {
        Ok(self.q.requeue_all_dead()? as u64)
    }

    pub fn purge_dead(&self, older_than_ms: Option<u64>) -> R<u64> {
        let older = opt_ms("older_than", older_than_ms)?;
        Ok(self.q.purge_dead(older)? as u64)
    }
}
