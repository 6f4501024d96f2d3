//! Core's runtime for Node (`honker::runtime`): the claim stream behind
//! `queue.claim()`'s async iterator and the lease renewal behind
//! `job.keepAlive()`. Their blocking calls run on tokio's blocking pool;
//! their last reference is dropped there too, never on the JS thread (a
//! drop releases buffered jobs or joins the renewal thread: writes that may
//! wait for the writer).

use std::sync::Arc;

use honker::runtime::OffThreadDrop;
use napi_derive::napi;

use napi::bindgen_prelude::AsyncBlock;
use napi::Env;

use crate::errors::{ms, now, opt_ms, out, pending, Out};
use crate::queue::{lease, Queue};
use crate::records::ClaimedJob;

/// See `Queue.claimer`.
#[napi]
pub struct Claimer {
    // Garbage-collected without close(): the release happens off the JS thread.
    c: OffThreadDrop<honker::runtime::Claimer>,
    db: honker::Database,
}

impl Claimer {
    fn inner(&self) -> Arc<honker::runtime::Claimer> {
        self.c.shared()
    }
}

#[napi]
impl Claimer {
    /// The next job, waiting up to `wait` ms for work; null when the wait ran
    /// out or the claimer was closed.
    #[napi]
    pub async fn next(&self, wait: f64) -> napi::Result<Out<Option<ClaimedJob>>> {
        // Holding no thread while it waits (waits.rs): a look, then a claim
        // on the blocking pool only when the look found work.
        let job = crate::waits::next(
            self.db.clone(),
            wait,
            self.inner(),
            honker::runtime::Claimer::is_closed,
        )
        .await;
        Ok(out(job.map(|j| j.map(ClaimedJob::from))))
    }

    /// A job already claimed and not handed out yet, if any (no I/O).
    #[napi]
    pub fn take_buffered(&self) -> Option<ClaimedJob> {
        self.inner().take_buffered().map(ClaimedJob::from)
    }

    /// Releases the jobs claimed but not handed out and wakes a waiting
    /// `next`; resolves to how many were released.
    #[napi]
    pub fn close(&self, env: Env) -> napi::Result<AsyncBlock<Out<u32>>> {
        let c = self.inner();
        pending(&env, Box::new(move || Ok(c.close() as u32)))
    }

    #[napi(getter)]
    pub fn closed(&self) -> bool {
        self.inner().is_closed()
    }

    #[napi(getter)]
    pub fn buffered(&self) -> u32 {
        self.inner().buffered() as u32
    }
}

/// See `Queue.keepAlive`.
#[napi]
pub struct KeepAlive {
    k: OffThreadDrop<honker::runtime::KeepAlive>,
}

impl KeepAlive {
    fn inner(&self) -> Arc<honker::runtime::KeepAlive> {
        self.k.shared()
    }
}

#[napi]
impl KeepAlive {
    /// Whether the lease was lost (renewal stopped).
    #[napi(getter)]
    pub fn lost(&self) -> bool {
        self.inner().lost()
    }

    #[napi(getter)]
    pub fn beats(&self) -> f64 {
        self.inner().beats() as f64
    }

    /// The lease's expiry after the last renewal (ms), if there was one.
    #[napi(getter)]
    pub fn lease_expires_at(&self) -> Option<i64> {
        self.inner().lease_expires_at()
    }

    /// Stops renewing; resolves to whether the lease was lost meanwhile.
    #[napi]
    pub fn stop(&self, env: Env) -> napi::Result<AsyncBlock<Out<bool>>> {
        let k = self.inner();
        pending(&env, Box::new(move || Ok(k.stop().lost)))
    }
}

/// A job rebuilt from its lease: see `Queue.job`.
#[napi(object)]
pub struct Rebuilt {
    pub job: ClaimedJob,
    pub worker_id: String,
}

fn rebuild(q: &honker::Queue, id: i64, token: String) -> honker::Result<Rebuilt> {
    let j = q.job(lease(id, token))?;
    let worker_id = j.worker_id.clone();
    Ok(Rebuilt {
        job: j.into(),
        worker_id,
    })
}

#[napi]
impl Queue {
    /// The running job that `(id, token)` leases, rebuilt (core's
    /// `Queue::job`).
    #[napi]
    pub fn job(&self, env: Env, id: i64, token: String) -> napi::Result<AsyncBlock<Out<Rebuilt>>> {
        let q = self.core().clone();
        pending(&env, Box::new(move || rebuild(&q, id, token)))
    }

    /// `job` without waiting.
    #[napi]
    pub fn try_job(&self, id: i64, token: String) -> Out<Rebuilt> {
        now(|| rebuild(self.core(), id, token))
    }

    /// The claim stream (core's `runtime::Claimer`) for `worker_id`,
    /// claiming `batch` jobs at a time, leased for `lease` ms (default: the
    /// queue's).
    #[napi]
    pub fn claimer(&self, worker_id: String, batch: u32, lease: Option<f64>) -> Out<Claimer> {
        out((|| {
            let lease = opt_ms("lease", lease)?;
            let c = honker::runtime::Claimer::new(self.core(), &worker_id, batch as usize, lease)?;
            Ok(Claimer {
                c: OffThreadDrop::new(c),
                db: self.core().database().clone(),
            })
        })())
    }

    /// Renews job `id`'s lease to `lease_ms` every `every` ms (default: a
    /// third of it) until stopped; stops and reports when the lease is lost
    /// (core's `runtime::KeepAlive`).
    #[napi]
    pub fn keep_alive(
        &self,
        id: i64,
        token: String,
        lease_ms: f64,
        every: Option<f64>,
    ) -> Out<KeepAlive> {
        out((|| {
            let length = ms("lease", lease_ms)?;
            let every = opt_ms("every", every)?;
            let k =
                honker::runtime::KeepAlive::start(self.core(), lease(id, token), length, every)?;
            Ok(KeepAlive {
                k: OffThreadDrop::new(k),
            })
        })())
    }
}
