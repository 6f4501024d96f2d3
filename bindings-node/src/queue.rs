//! `Queue` for Node: every verb of core's `Queue`, with durations in
//! milliseconds, payloads as JSON text or Buffers, and an optional `tx`
//! (a transaction id, see database.rs).
//!
//! Each verb is built once as an operation (`*_op`: arguments converted, a
//! closure over the core call) and exported twice: `verb` runs it on tokio's
//! blocking pool and returns a Promise; `tryVerb` runs it on the JS thread
//! without waiting and reports `WOULD_WAIT` where it would (errors.rs).

use std::sync::Arc;

use honker::{ClaimOptions, Lease, Payload};
use napi_derive::napi;

use crate::database::{with_tx, Txs};
use napi::bindgen_prelude::AsyncBlock;
use napi::Env;

use crate::errors::{invalid, ms, now, opt_ms, out, pending, verbs, Op, Out};
use crate::records::{
    payload_in, payload_out, payloads_in, Cell, ClaimedJob, EnqueueArgs, Enqueued, EnqueuedBatch,
    JobInfo, PayloadIo, Payloads, QueueStats,
};

#[napi(object)]
pub struct ClaimArgs {
    /// Lease length (ms); the queue's by default.
    pub lease: Option<f64>,
    /// How long to wait for work (ms). 0.
    pub wait: Option<f64>,
    pub tx: Option<u32>,
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

pub(crate) fn lease(id: i64, token: String) -> Lease {
    Lease { job_id: id, token }
}

impl Queue {
    /// Enqueues `payloads` and hands core's records to `out`.
    fn enqueue_with<T: 'static>(
        &self,
        payloads: Vec<Payload>,
        options: Option<EnqueueArgs>,
        (tx, traceparent, tracestate): (Option<u32>, Option<String>, Option<String>),
        out: fn(Vec<honker::Enqueued>) -> T,
    ) -> Op<T> {
        let (q, txs) = self.parts();
        let o = options
            .unwrap_or_default()
            .to_core_traced(traceparent.as_deref(), tracestate.as_deref());
        Box::new(move || {
            let done = with_tx(&txs, tx, |tx| q.enqueue_many_in(tx, payloads, &o?))?;
            Ok(out(done))
        })
    }

    fn enqueue_op(
        &self,
        payload: PayloadIo,
        options: Option<EnqueueArgs>,
        tx: Option<u32>,
        traceparent: Option<String>,
        tracestate: Option<String>,
    ) -> Op<Vec<Enqueued>> {
        let payloads = vec![payload_in(payload)];
        self.enqueue_with(payloads, options, (tx, traceparent, tracestate), |done| {
            done.into_iter().map(Enqueued::from).collect()
        })
    }

    fn enqueue_many_op(
        &self,
        payloads: Payloads,
        options: Option<EnqueueArgs>,
        tx: Option<u32>,
        traceparent: Option<String>,
        tracestate: Option<String>,
    ) -> Op<EnqueuedBatch> {
        let payloads = payloads_in(payloads);
        let trace = (tx, traceparent, tracestate);
        self.enqueue_with(payloads, options, trace, EnqueuedBatch::new)
    }

    fn claim_op(&self, worker_id: String, n: i64, options: Option<ClaimArgs>) -> Op<Vec<Cell>> {
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
            let mut cells = Vec::with_capacity(jobs.len() * 10);
            for j in jobs {
                ClaimedJob::from(j).cells(&mut cells);
            }
            Ok(cells)
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

    fn ack_many_op(&self, ids: Vec<i64>, tokens: Vec<String>, tx: Option<u32>) -> Op<u32> {
        let (q, txs) = self.parts();
        if ids.len() != tokens.len() {
            let e = invalid(format!("{} ids but {} tokens", ids.len(), tokens.len()));
            return Box::new(move || Err(e));
        }
        let leases: Vec<Lease> = ids
            .into_iter()
            .zip(tokens)
            .map(|(i, t)| lease(i, t))
            .collect();
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
        Box::new(move || q.get_job(id).map(JobInfo::from))
    }

    fn get_result_op(&self, id: i64) -> Op<Option<PayloadIo>> {
        let q = self.q.clone();
        Box::new(move || q.get_result(id).map(|r| r.map(payload_out)))
    }

    fn set_rate_limit_op(&self, limit: Option<crate::lock::RateLimitParams>) -> Op<()> {
        let q = self.q.clone();
        Box::new(move || {
            let rl = match limit {
                None => None,
                Some(p) => Some(honker::rate::RateLimit {
                    limit: p.limit,
                    per: crate::errors::ms("per", p.per)?,
                    burst: p.burst,
                }),
            };
            q.set_rate_limit(rl)
        })
    }

    fn rate_limit_op(&self) -> Op<Option<crate::lock::RateLimitParams>> {
        let q = self.q.clone();
        Box::new(move || {
            Ok(q.rate_limit()?.map(|p| crate::lock::RateLimitParams {
                limit: p.limit,
                per: p.per.as_millis() as f64,
                burst: p.burst,
            }))
        })
    }

    fn metrics_op(&self) -> Op<String> {
        let q = self.q.clone();
        Box::new(move || q.metrics().map(|m| m.to_json().to_string()))
    }

    fn configure_op(&self, options: crate::records::QueueArgs) -> Op<()> {
        let q = self.q.clone();
        Box::new(move || q.configure(&options.to_core()?))
    }

    fn settings_op(&self) -> Op<crate::database::QueueOptions> {
        let q = self.q.clone();
        Box::new(move || Ok(crate::database::QueueOptions::from_settings(&q.settings()?)))
    }

    fn pause_op(&self, options: crate::records::PauseArgs) -> Op<()> {
        let q = self.q.clone();
        Box::new(move || q.pause(&options.to_core()?))
    }

    fn resume_op(&self) -> Op<bool> {
        let q = self.q.clone();
        Box::new(move || q.resume())
    }

    fn limit_concurrency_op(&self, options: crate::records::ConcurrencyArgs) -> Op<()> {
        let q = self.q.clone();
        Box::new(move || q.limit_concurrency(&options.to_core()?))
    }

    fn set_fairness_op(&self, options: crate::records::FairnessArgs) -> Op<()> {
        let q = self.q.clone();
        Box::new(move || q.set_fairness(&options.to_core()?))
    }

    fn clear_settings_op(&self) -> Op<()> {
        let q = self.q.clone();
        Box::new(move || q.clear_settings())
    }

    fn stats_op(&self) -> Op<QueueStats> {
        let q = self.q.clone();
        Box::new(move || q.stats().map(QueueStats::from))
    }

    fn dead_letters_op(&self, after_id: Option<i64>, limit: Option<u32>) -> Op<Vec<JobInfo>> {
        let q = self.q.clone();
        Box::new(move || {
            q.dead_letters(after_id.unwrap_or(0), limit.unwrap_or(100) as usize)
                .map(|v| v.into_iter().map(JobInfo::from).collect())
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

    /// Waits up to `timeout` ms for the job's result (always async; holding
    /// no thread while it waits: waits.rs).
    #[napi]
    pub async fn wait_result(&self, id: i64, timeout: f64) -> napi::Result<Out<Option<PayloadIo>>> {
        let q = self.q.clone();
        let r = async move {
            let t = ms("timeout", timeout)?;
            let looker = q.clone();
            // A look: the result (or none, the job having finished without
            // one), or nothing yet while the job is live.
            let look = move || match looker.wait_result(id, std::time::Duration::ZERO) {
                Ok(r) => Ok(Some(r)),
                Err(e) if e.kind() == honker::ErrorKind::Timeout => Ok(None),
                Err(e) => Err(e),
            };
            let last = look.clone();
            let parts = honker::Parts {
                look: || Ok(Some(std::time::Duration::ZERO)),
                take: look,
            };
            let got =
                match crate::waits::wait(q.database(), t, true, Arc::new(parts), || false).await? {
                    Some(r) => Some(r),
                    None => crate::waits::on_pool(last).await?,
                };
            match got {
                Some(r) => Ok(r.map(payload_out)),
                None => Err(honker::Error::new(
                    honker::ErrorKind::Timeout,
                    format!("job {id} produced no result within {t:?}"),
                )),
            }
        };
        Ok(out(r.await))
    }
}

verbs! {
    impl Queue;
    #[doc = "Enqueues one payload with `EnqueueArgs` (resolves to one record in a list)."]
    enqueue / try_enqueue (payload: PayloadIo, options: Option<EnqueueArgs>, tx: Option<u32>,
        traceparent: Option<String>, tracestate: Option<String>) -> Vec<Enqueued> = enqueue_op;
    #[doc = "Enqueues a batch: `payloads` as `convert.js`'s `packed` gives them (JSON texts"]
    #[doc = "joined by newlines, or a list); resolves to the ids and which were `existing`."]
    enqueue_many / try_enqueue_many (payloads: Payloads, options: Option<EnqueueArgs>,
        tx: Option<u32>, traceparent: Option<String>, tracestate: Option<String>)
        -> EnqueuedBatch = enqueue_many_op;
    #[doc = "Claims up to `n` jobs, waiting up to `wait` ms for work"]
    #[doc = "(`tryClaim`: its `wait` must be 0): their fields, flat, in the"]
    #[doc = "order of `ClaimedJob` (index.js's `claimedJobAt` reads them)."]
    claim / try_claim (worker_id: String, n: i64, options: Option<ClaimArgs>)
        -> Vec<Cell> = claim_op;
    ack / try_ack (id: i64, token: String, result: Option<PayloadIo>, tx: Option<u32>)
        -> () = ack_op;
    #[doc = "Acks several jobs in one transaction; resolves to how many were held."]
    #[doc = "(Ids and their tokens as two arrays: napi reads an array of"]
    #[doc = "objects field by field, ten times dearer.)"]
    ack_many / try_ack_many (ids: Vec<i64>, tokens: Vec<String>, tx: Option<u32>)
        -> u32 = ack_many_op;
    #[doc = "Resolves to the new state: \"ready\", \"scheduled\" or \"dead\"."]
    retry / try_retry (
        id: i64, token: String, delay: Option<f64>, error: Option<String>, tx: Option<u32>
    ) -> String = retry_op;
    fail / try_fail (id: i64, token: String, error: String, tx: Option<u32>) -> () = fail_op;
    release / try_release (id: i64, token: String, tx: Option<u32>) -> () = release_op;
    snooze / try_snooze (id: i64, token: String, delay: f64, tx: Option<u32>) -> String = snooze_op;
    #[doc = "Extends the lease by `extend` ms (the queue's lease by default);"]
    #[doc = "resolves to the new expiry (ms since the epoch)."]
    heartbeat / try_heartbeat (id: i64, token: String, extend: Option<f64>, tx: Option<u32>)
        -> i64 = heartbeat_op;
    cancel / try_cancel (id: i64, reason: Option<String>, tx: Option<u32>) -> bool = cancel_op;
    get_job / try_get_job (id: i64) -> JobInfo = get_job_op;
    get_result / try_get_result (id: i64) -> Option<PayloadIo> = get_result_op;
    stats / try_stats () -> QueueStats = stats_op;
    #[doc = "Stores the queue's settings in the file for every process; unnamed ones stay."]
    configure / try_configure (options: crate::records::QueueArgs) -> () = configure_op;
    #[doc = "The queue's stored settings (ms), each absent when not set."]
    settings / try_settings () -> crate::database::QueueOptions = settings_op;
    clear_settings / try_clear_settings () -> () = clear_settings_op;
    #[doc = "Pauses the queue for every process (ADR 33)."]
    pause / try_pause (options: crate::records::PauseArgs) -> () = pause_op;
    #[doc = "Lifts the queue's own pause; whether it had one."]
    resume / try_resume () -> bool = resume_op;
    #[doc = "Sets (a cap not given: lifts) the queue's concurrency caps, for every process (ADR 35)."]
    limit_concurrency / try_limit_concurrency (options: crate::records::ConcurrencyArgs) -> () = limit_concurrency_op;

    #[doc = "Sets (an option not given: its default) how the queue shares its claims among its keys (ADR 36)."]
    set_fairness / try_set_fairness (options: crate::records::FairnessArgs) -> () = set_fairness_op;
    #[doc = "The queue's metrics (ADR 27) as core's JSON."]
    metrics_json / try_metrics_json () -> String = metrics_op;
    #[doc = "Sets (null: lifts) the queue's rate limit, for every process."]
    set_rate_limit / try_set_rate_limit (limit: Option<crate::lock::RateLimitParams>) -> () = set_rate_limit_op;
    rate_limit / try_rate_limit () -> Option<crate::lock::RateLimitParams> = rate_limit_op;
    dead_letters / try_dead_letters (after_id: Option<i64>, limit: Option<u32>)
        -> Vec<JobInfo> = dead_letters_op;
    requeue_dead / try_requeue_dead (id: i64) -> bool = requeue_dead_op;
    requeue_all_dead / try_requeue_all_dead () -> u32 = requeue_all_dead_op;
    #[doc = "Deletes dead letters (those that died at least `olderThan` ms ago)."]
    purge_dead / try_purge_dead (older_than: Option<f64>) -> u32 = purge_dead_op;
}
