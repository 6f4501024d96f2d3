//! `Queue` for Node: every verb of core's `Queue`, with durations in
//! milliseconds, payloads as JSON text or Buffers, and an optional `tx`
//! (a transaction id, see database.rs).
//!
//! Each verb is built once as an operation (`*_op`: arguments converted, a
//! closure over the core call) and exported twice: `verb` runs it on tokio's
//! blocking pool and returns a Promise; `tryVerb` runs it on the JS thread
//! without waiting and reports `WOULD_WAIT` where it would (errors.rs).

use std::sync::Arc;

use honker::{ClaimOptions, EnqueueOptions as CoreEnqueue, JobInfo as CoreInfo, Lease, Payload};
use napi::bindgen_prelude::{Buffer, Either};
use napi_derive::napi;

use crate::database::{with_tx, Txs};
use crate::errors::{blocking, invalid, ms, now, opt_ms, Out};

/// A payload: JSON text or bytes.
pub type PayloadIo = Either<String, Buffer>;

fn payload_in(p: PayloadIo) -> Payload {
    match p {
        Either::A(s) => Payload::Json(s),
        Either::B(b) => Payload::Bytes(b.to_vec()),
    }
}

fn payload_out(p: Payload) -> PayloadIo {
    match p {
        Payload::Json(s) => Either::A(s),
        Payload::Bytes(b) => Either::B(b.into()),
    }
}

#[napi(object)]
pub struct EnqueueOptions {
    /// Run no earlier than this many ms from now.
    pub delay: Option<f64>,
    /// Run no earlier than this time (ms since the Unix epoch).
    pub run_at: Option<f64>,
    pub priority: Option<i32>,
    pub max_attempts: Option<u32>,
    pub dedupe_key: Option<String>,
    /// Expire if not started this many ms after enqueue.
    pub expires: Option<f64>,
    pub tx: Option<u32>,
}

#[napi(object)]
pub struct Enqueued {
    pub id: i64,
    pub existing: bool,
}

#[napi(object)]
pub struct ClaimArgs {
    /// Lease length (ms); the queue's by default.
    pub lease: Option<f64>,
    /// How long to wait for work (ms). 0.
    pub wait: Option<f64>,
    pub tx: Option<u32>,
}

#[napi(object)]
pub struct Claimed {
    pub id: i64,
    pub payload: PayloadIo,
    pub attempts: u32,
    pub max_attempts: u32,
    pub priority: i32,
    pub run_at: i64,
    pub created_at: i64,
    pub lease_expires_at: i64,
    pub token: String,
}

#[napi(object)]
pub struct LeaseArg {
    pub id: i64,
    pub token: String,
}

#[napi(object)]
pub struct JobInfo {
    pub id: i64,
    pub queue: String,
    pub state: String,
    pub payload: PayloadIo,
    pub priority: i32,
    pub run_at: i64,
    pub attempts: u32,
    pub max_attempts: u32,
    pub dedupe_key: Option<String>,
    pub expires_at: Option<i64>,
    pub created_at: i64,
    pub worker_id: Option<String>,
    pub last_error: Option<String>,
    pub lease_expires_at: Option<i64>,
    pub finished_at: Option<i64>,
}

fn info_out(j: CoreInfo) -> JobInfo {
    JobInfo {
        id: j.id,
        queue: j.queue,
        state: j.state.as_str().to_owned(),
        payload: payload_out(j.payload),
        priority: j.priority,
        run_at: j.run_at,
        attempts: j.attempts,
        max_attempts: j.max_attempts,
        dedupe_key: j.dedupe_key,
        expires_at: j.expires_at,
        created_at: j.created_at,
        worker_id: j.worker_id,
        last_error: j.last_error,
        lease_expires_at: j.lease_expires_at,
        finished_at: j.finished_at,
    }
}

#[napi(object)]
pub struct QueueStats {
    pub ready: u32,
    pub scheduled: u32,
    pub running: u32,
    pub lapsed: u32,
    pub dead: u32,
    pub cancelled: u32,
    pub expired: u32,
    pub completed: u32,
    pub oldest_ready_age_ms: Option<i64>,
}

/// A handle on one queue.
#[napi]
pub struct Queue {
    q: honker::Queue,
    txs: Arc<Txs>,
}

impl Queue {
    pub(crate) fn new(q: honker::Queue, txs: Arc<Txs>) -> Queue {
        Queue { q, txs }
    }

    pub(crate) fn core(&self) -> &honker::Queue {
        &self.q
    }

    fn parts(&self) -> (honker::Queue, Arc<Txs>) {
        (self.q.clone(), Arc::clone(&self.txs))
    }
}

pub(crate) fn claimed(j: honker::Job) -> Claimed {
    Claimed {
        id: j.id,
        payload: payload_out(j.payload),
        attempts: j.attempts,
        max_attempts: j.max_attempts,
        priority: j.priority,
        run_at: j.run_at,
        created_at: j.created_at,
        lease_expires_at: j.lease_expires_at,
        token: j.lease.token,
    }
}

pub(crate) fn lease(id: i64, token: String) -> Lease {
    Lease { job_id: id, token }
}

/// A blocking core call with its arguments, ready to run on any thread.
type Op<T> = Box<dyn FnOnce() -> honker::Result<T> + Send>;

impl Queue {
    fn enqueue_op(
        &self,
        payloads: Vec<PayloadIo>,
        options: Option<EnqueueOptions>,
    ) -> Op<Vec<Enqueued>> {
        let (q, txs) = self.parts();
        let payloads: Vec<Payload> = payloads.into_iter().map(payload_in).collect();
        Box::new(move || {
            let o = options.unwrap_or(EnqueueOptions {
                delay: None,
                run_at: None,
                priority: None,
                max_attempts: None,
                dedupe_key: None,
                expires: None,
                tx: None,
            });
            let run_at = match o.run_at {
                Some(t) if t.is_finite() => Some(t.round() as i64),
                Some(t) => return Err(invalid(format!("runAt must be a time, got {t}"))),
                None => None,
            };
            let options = CoreEnqueue {
                delay: opt_ms("delay", o.delay)?,
                run_at,
                priority: o.priority.unwrap_or(0),
                max_attempts: o.max_attempts,
                dedupe_key: o.dedupe_key,
                expires: opt_ms("expires", o.expires)?,
                backoff: None,
            };
            let done = with_tx(&txs, o.tx, |tx| q.enqueue_many_in(tx, payloads, &options))?;
            Ok(done
                .into_iter()
                .map(|e| Enqueued {
                    id: e.id,
                    existing: e.existing,
                })
                .collect())
        })
    }

    fn claim_op(&self, worker_id: String, n: i64, options: Option<ClaimArgs>) -> Op<Vec<Claimed>> {
        let (q, txs) = self.parts();
        Box::new(move || {
            let n = honker::validate::batch(n)?;
            let (lease, wait, tx) = match options {
                Some(o) => (opt_ms("lease", o.lease)?, o.wait, o.tx),
                None => (None, None, None),
            };
            let wait = ms("wait", wait.unwrap_or(0.0))?;
            let jobs = with_tx(&txs, tx, |tx| {
                q.claim_in(tx, &worker_id, n, &ClaimOptions { lease, wait })
            })?;
            Ok(jobs.into_iter().map(claimed).collect())
        })
    }

    fn ack_op(&self, id: i64, token: String, result: Option<PayloadIo>, tx: Option<u32>) -> Op<()> {
        let (q, txs) = self.parts();
        let result = result.map(payload_in);
        Box::new(move || {
            let l = lease(id, token);
            with_tx(&txs, tx, |tx| q.ack_in(tx, &l, result))
        })
    }

    fn ack_many_op(&self, leases: Vec<LeaseArg>, tx: Option<u32>) -> Op<u32> {
        let (q, txs) = self.parts();
        let leases: Vec<Lease> = leases.into_iter().map(|l| lease(l.id, l.token)).collect();
        Box::new(move || with_tx(&txs, tx, |tx| q.ack_many_in(tx, &leases)).map(|n| n as u32))
    }

    fn retry_op(
        &self,
        id: i64,
        token: String,
        delay: Option<f64>,
        error: Option<String>,
        tx: Option<u32>,
    ) -> Op<String> {
        let (q, txs) = self.parts();
        Box::new(move || {
            let options = honker::RetryOptions {
                delay: opt_ms("delay", delay)?,
                error,
            };
            let l = lease(id, token);
            with_tx(&txs, tx, |tx| q.retry_in(tx, &l, &options)).map(|s| s.as_str().to_owned())
        })
    }

    fn fail_op(&self, id: i64, token: String, error: String, tx: Option<u32>) -> Op<()> {
        let (q, txs) = self.parts();
        Box::new(move || {
            let l = lease(id, token);
            with_tx(&txs, tx, |tx| q.fail_in(tx, &l, &error))
        })
    }

    fn release_op(&self, id: i64, token: String, tx: Option<u32>) -> Op<()> {
        let (q, txs) = self.parts();
        Box::new(move || {
            let l = lease(id, token);
            with_tx(&txs, tx, |tx| q.release_in(tx, &l))
        })
    }

    fn snooze_op(&self, id: i64, token: String, delay: f64, tx: Option<u32>) -> Op<String> {
        let (q, txs) = self.parts();
        Box::new(move || {
            let d = ms("delay", delay)?;
            let l = lease(id, token);
            with_tx(&txs, tx, |tx| q.snooze_in(tx, &l, d)).map(|s| s.as_str().to_owned())
        })
    }

    fn heartbeat_op(
        &self,
        id: i64,
        token: String,
        extend: Option<f64>,
        tx: Option<u32>,
    ) -> Op<i64> {
        let (q, txs) = self.parts();
        Box::new(move || {
            let extend = opt_ms("extend", extend)?;
            let l = lease(id, token);
            with_tx(&txs, tx, |tx| q.heartbeat_in(tx, &l, extend))
        })
    }

    fn cancel_op(&self, id: i64, reason: Option<String>, tx: Option<u32>) -> Op<bool> {
        let (q, txs) = self.parts();
        Box::new(move || with_tx(&txs, tx, |tx| q.cancel_in(tx, id, reason.as_deref())))
    }

    fn get_job_op(&self, id: i64) -> Op<JobInfo> {
        let q = self.q.clone();
        Box::new(move || q.get_job(id).map(info_out))
    }

    fn get_result_op(&self, id: i64) -> Op<Option<PayloadIo>> {
        let q = self.q.clone();
        Box::new(move || q.get_result(id).map(|r| r.map(payload_out)))
    }

    fn stats_op(&self) -> Op<QueueStats> {
        let q = self.q.clone();
        Box::new(move || {
            q.stats().map(|s| QueueStats {
                ready: s.ready as u32,
                scheduled: s.scheduled as u32,
                running: s.running as u32,
                lapsed: s.lapsed as u32,
                dead: s.dead as u32,
                cancelled: s.cancelled as u32,
                expired: s.expired as u32,
                completed: s.completed as u32,
                oldest_ready_age_ms: s.oldest_ready_age_ms,
            })
        })
    }

    fn dead_letters_op(&self, after_id: Option<i64>, limit: Option<u32>) -> Op<Vec<JobInfo>> {
        let q = self.q.clone();
        Box::new(move || {
            q.dead_letters(after_id.unwrap_or(0), limit.unwrap_or(100) as usize)
                .map(|v| v.into_iter().map(info_out).collect())
        })
    }

    fn requeue_dead_op(&self, id: i64) -> Op<bool> {
        let q = self.q.clone();
        Box::new(move || q.requeue_dead(id))
    }

    fn requeue_all_dead_op(&self) -> Op<u32> {
        let q = self.q.clone();
        Box::new(move || q.requeue_all_dead().map(|n| n as u32))
    }

    fn purge_dead_op(&self, older_than: Option<f64>) -> Op<u32> {
        let q = self.q.clone();
        Box::new(move || {
            let older = opt_ms("olderThan", older_than)?;
            q.purge_dead(older).map(|n| n as u32)
        })
    }
}

#[napi]
impl Queue {
    #[napi(getter)]
    pub fn name(&self) -> String {
        self.q.name().to_owned()
    }

    /// The queue's default lease (ms).
    #[napi(getter)]
    pub fn lease(&self) -> f64 {
        self.q.options().lease.as_secs_f64() * 1000.0
    }

    #[napi]
    pub async fn enqueue_many(
        &self,
        payloads: Vec<PayloadIo>,
        options: Option<EnqueueOptions>,
    ) -> napi::Result<Out<Vec<Enqueued>>> {
        blocking(self.enqueue_op(payloads, options)).await
    }

    #[napi]
    pub fn try_enqueue_many(
        &self,
        payloads: Vec<PayloadIo>,
        options: Option<EnqueueOptions>,
    ) -> Out<Vec<Enqueued>> {
        now(self.enqueue_op(payloads, options))
    }

    /// Claims up to `n` jobs, waiting up to `wait` ms for work.
    #[napi]
    pub async fn claim(
        &self,
        worker_id: String,
        n: i64,
        options: Option<ClaimArgs>,
    ) -> napi::Result<Out<Vec<Claimed>>> {
        blocking(self.claim_op(worker_id, n, options)).await
    }

    /// `claim` without waiting (its `wait` must be 0).
    #[napi]
    pub fn try_claim(
        &self,
        worker_id: String,
        n: i64,
        options: Option<ClaimArgs>,
    ) -> Out<Vec<Claimed>> {
        now(self.claim_op(worker_id, n, options))
    }

    #[napi]
    pub async fn ack(
        &self,
        id: i64,
        token: String,
        result: Option<PayloadIo>,
        tx: Option<u32>,
    ) -> napi::Result<Out<()>> {
        blocking(self.ack_op(id, token, result, tx)).await
    }

    #[napi]
    pub fn try_ack(
        &self,
        id: i64,
        token: String,
        result: Option<PayloadIo>,
        tx: Option<u32>,
    ) -> Out<()> {
        now(self.ack_op(id, token, result, tx))
    }

    /// Acks several jobs in one transaction; resolves to how many were held.
    #[napi]
    pub async fn ack_many(&self, leases: Vec<LeaseArg>, tx: Option<u32>) -> napi::Result<Out<u32>> {
        blocking(self.ack_many_op(leases, tx)).await
    }

    #[napi]
    pub fn try_ack_many(&self, leases: Vec<LeaseArg>, tx: Option<u32>) -> Out<u32> {
        now(self.ack_many_op(leases, tx))
    }

    /// Resolves to the new state: "ready", "scheduled" or "dead".
    #[napi]
    pub async fn retry(
        &self,
        id: i64,
        token: String,
        delay: Option<f64>,
        error: Option<String>,
        tx: Option<u32>,
    ) -> napi::Result<Out<String>> {
        blocking(self.retry_op(id, token, delay, error, tx)).await
    }

    #[napi]
    pub fn try_retry(
        &self,
        id: i64,
        token: String,
        delay: Option<f64>,
        error: Option<String>,
        tx: Option<u32>,
    ) -> Out<String> {
        now(self.retry_op(id, token, delay, error, tx))
    }

    #[napi]
    pub async fn fail(
        &self,
        id: i64,
        token: String,
        error: String,
        tx: Option<u32>,
    ) -> napi::Result<Out<()>> {
        blocking(self.fail_op(id, token, error, tx)).await
    }

    #[napi]
    pub fn try_fail(&self, id: i64, token: String, error: String, tx: Option<u32>) -> Out<()> {
        now(self.fail_op(id, token, error, tx))
    }

    #[napi]
    pub async fn release(&self, id: i64, token: String, tx: Option<u32>) -> napi::Result<Out<()>> {
        blocking(self.release_op(id, token, tx)).await
    }

    #[napi]
    pub fn try_release(&self, id: i64, token: String, tx: Option<u32>) -> Out<()> {
        now(self.release_op(id, token, tx))
    }

    #[napi]
    pub async fn snooze(
        &self,
        id: i64,
        token: String,
        delay: f64,
        tx: Option<u32>,
    ) -> napi::Result<Out<String>> {
        blocking(self.snooze_op(id, token, delay, tx)).await
    }

    #[napi]
    pub fn try_snooze(&self, id: i64, token: String, delay: f64, tx: Option<u32>) -> Out<String> {
        now(self.snooze_op(id, token, delay, tx))
    }

    /// Extends the lease by `extend` ms (the queue's lease by default);
    /// resolves to the new expiry (ms since the epoch).
    #[napi]
    pub async fn heartbeat(
        &self,
        id: i64,
        token: String,
        extend: Option<f64>,
        tx: Option<u32>,
    ) -> napi::Result<Out<i64>> {
        blocking(self.heartbeat_op(id, token, extend, tx)).await
    }

    #[napi]
    pub fn try_heartbeat(
        &self,
        id: i64,
        token: String,
        extend: Option<f64>,
        tx: Option<u32>,
    ) -> Out<i64> {
        now(self.heartbeat_op(id, token, extend, tx))
    }

    #[napi]
    pub async fn cancel(
        &self,
        id: i64,
        reason: Option<String>,
        tx: Option<u32>,
    ) -> napi::Result<Out<bool>> {
        blocking(self.cancel_op(id, reason, tx)).await
    }

    #[napi]
    pub fn try_cancel(&self, id: i64, reason: Option<String>, tx: Option<u32>) -> Out<bool> {
        now(self.cancel_op(id, reason, tx))
    }

    #[napi]
    pub async fn get_job(&self, id: i64) -> napi::Result<Out<JobInfo>> {
        blocking(self.get_job_op(id)).await
    }

    #[napi]
    pub fn try_get_job(&self, id: i64) -> Out<JobInfo> {
        now(self.get_job_op(id))
    }

    #[napi]
    pub async fn get_result(&self, id: i64) -> napi::Result<Out<Option<PayloadIo>>> {
        blocking(self.get_result_op(id)).await
    }

    #[napi]
    pub fn try_get_result(&self, id: i64) -> Out<Option<PayloadIo>> {
        now(self.get_result_op(id))
    }

    /// Waits up to `timeout` ms for the job's result (always async).
    #[napi]
    pub async fn wait_result(&self, id: i64, timeout: f64) -> napi::Result<Out<Option<PayloadIo>>> {
        let q = self.q.clone();
        blocking(move || {
            let t = ms("timeout", timeout)?;
            q.wait_result(id, t).map(|r| r.map(payload_out))
        })
        .await
    }

    #[napi]
    pub async fn stats(&self) -> napi::Result<Out<QueueStats>> {
        blocking(self.stats_op()).await
    }

    #[napi]
    pub fn try_stats(&self) -> Out<QueueStats> {
        now(self.stats_op())
    }

    #[napi]
    pub async fn dead_letters(
        &self,
        after_id: Option<i64>,
        limit: Option<u32>,
    ) -> napi::Result<Out<Vec<JobInfo>>> {
        blocking(self.dead_letters_op(after_id, limit)).await
    }

    #[napi]
    pub fn try_dead_letters(&self, after_id: Option<i64>, limit: Option<u32>) -> Out<Vec<JobInfo>> {
        now(self.dead_letters_op(after_id, limit))
    }

    #[napi]
    pub async fn requeue_dead(&self, id: i64) -> napi::Result<Out<bool>> {
        blocking(self.requeue_dead_op(id)).await
    }

    #[napi]
    pub fn try_requeue_dead(&self, id: i64) -> Out<bool> {
        now(self.requeue_dead_op(id))
    }

    #[napi]
    pub async fn requeue_all_dead(&self) -> napi::Result<Out<u32>> {
        blocking(self.requeue_all_dead_op()).await
    }

    #[napi]
    pub fn try_requeue_all_dead(&self) -> Out<u32> {
        now(self.requeue_all_dead_op())
    }

    /// Deletes dead letters (those that died at least `olderThan` ms ago).
    #[napi]
    pub async fn purge_dead(&self, older_than: Option<f64>) -> napi::Result<Out<u32>> {
        blocking(self.purge_dead_op(older_than)).await
    }

    #[napi]
    pub fn try_purge_dead(&self, older_than: Option<f64>) -> Out<u32> {
        now(self.purge_dead_op(older_than))
    }
}
