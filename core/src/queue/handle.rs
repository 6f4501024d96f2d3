//! The [`Queue`] handle: each verb validates, then runs `ops` in a write
//! transaction (its own or the caller's).

use std::sync::Arc;
use std::time::Duration;

use super::metrics::{self, QueueMetrics};
use super::ops;
use super::types::{
    ClaimOptions, EnqueueOptions, Enqueued, Job, JobInfo, JobState, Lease, PauseOptions,
    QueueStats, RetryNow, RetryOptions,
};

use crate::database::Database;
use crate::error::{Error, ErrorKind, Result};
use crate::options::{QueueOptions, QueueSettings};
use crate::payload::Payload;
use crate::transaction::Transaction;
use crate::validate;

impl Database {
    /// A handle on the queue `name` with the queue's settings, as any
    /// process stored them ([`Queue::configure`]), else the defaults of
    /// [`QueueOptions`]. Creating a handle writes nothing (one read), so it
    /// is fine inside a transaction.
    pub fn queue(&self, name: &str) -> Result<Queue> {
        self.queue_given(name, &QueueSettings::default())
    }

    /// A handle on the queue `name` with the options given here; the ones
    /// not given come from the queue's stored settings, then the defaults.
    /// A handle reads the settings when it is made: a later `configure`
    /// reaches handles made after it.
    pub fn queue_given(&self, name: &str, given: &QueueSettings) -> Result<Queue> {
        validate::name("queue", name)?;
        let stored = {
            let reader = self.inner.reader()?;
            super::ops::settings_of(reader.raw(), name)?
        };
        let options = given.or(&stored).over(&QueueOptions::default());
        Queue::new(self.clone(), name, options)
    }

    /// A handle on the queue `name` with exactly these per-queue defaults
    /// (the stored settings are not read).
    pub fn queue_with(&self, name: &str, options: QueueOptions) -> Result<Queue> {
        Queue::new(self.clone(), name, options)
    }

    /// Pauses every queue (ADR 33): no claim in any process returns a job
    /// of any queue until [`resume_all`](Self::resume_all). A queue's own
    /// pause ([`Queue::pause`]) is apart: resuming all leaves it paused.
    pub fn pause_all(&self, options: &PauseOptions) -> Result<()> {
        pause_in(self, "", options)
    }

    /// Lifts the pause of all queues (not a queue's own); whether there was
    /// one. Waiting claims in every process wake on its commit.
    pub fn resume_all(&self) -> Result<bool> {
        self.inner
            .write(None, |conn, _| ops::resume(conn.raw(), ""))
    }

    /// The pause of all queues, if they are paused.
    pub fn paused_all(&self) -> Result<Option<super::types::Pause>> {
        let reader = self.inner.reader()?;
        Ok(ops::pauses(reader.raw(), "")?.into_iter().find(|p| p.all))
    }

    /// Every queue's counters and jobs by state (ADR 27), ordered by name:
    /// counted in the file by every process, so they are the whole file's.
    /// A read.
    pub fn metrics(&self) -> Result<Vec<QueueMetrics>> {
        super::metrics::read_own(&self.inner, None)
    }

    /// [`metrics`](Self::metrics) in Prometheus's text format, for an
    /// application's `/metrics` route (`honker metrics DB` prints the same
    /// for node_exporter's textfile collector).
    pub fn metrics_text(&self) -> Result<String> {
        Ok(metrics::exposition(&self.metrics()?))
    }
}

/// A handle on one named queue. Cheap to clone, `Send + Sync`.
#[derive(Clone, Debug)]
pub struct Queue {
    db: Database,
    name: Arc<str>,
    options: QueueOptions,
    /// This database's reserved starts of rate-limited queues (ADR 23 §9).
    blocks: Arc<crate::rate::blocks::Blocks>,
    /// And of keys under a queue's rate limit per key (ADR 36).
    key_blocks: Arc<crate::rate::blocks::KeyBlocks>,
}

impl Queue {
    pub(crate) fn new(db: Database, name: &str, options: QueueOptions) -> Result<Queue> {
        validate::name("queue", name)?;
        options.validate()?;
        Ok(Queue {
            blocks: db.inner.engine.slot(crate::rate::blocks::Blocks::default),
            key_blocks: db
                .inner
                .engine
                .slot(crate::rate::blocks::KeyBlocks::default),
            db,
            name: name.into(),
            options,
        })
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The per-queue defaults.
    pub fn options(&self) -> &QueueOptions {
        &self.options
    }

    /// Stores `settings` for the queue in the file, for every process and
    /// language (issue 53: a lease given to one process's handle was not
    /// seen by a worker elsewhere, which claimed with the default 60 s):
    /// handles made afterwards ([`Database::queue`]) use them where they
    /// were not given options of their own. Fields left `None` keep what is
    /// stored. Checked as a handle's options are; bad input changes nothing.
    pub fn configure(&self, settings: &QueueSettings) -> Result<()> {
        self.write(None, |conn, now| {
            // Checked as they will be read: over what is stored.
            let stored = super::ops::settings_of(conn, &self.name)?;
            settings
                .or(&stored)
                .over(&QueueOptions::default())
                .validate()?;
            let ms = |d: Option<Duration>| d.map(crate::clock::duration_ms);
            for (key, value) in [
                ("lease_ms", ms(settings.lease)),
                ("max_attempts", settings.max_attempts.map(i64::from)),
                ("backoff_base_ms", ms(settings.backoff_base)),
                ("backoff_max_ms", ms(settings.backoff_max)),
                (
                    "backoff_jitter_ppm",
                    settings.backoff_jitter.map(|j| (j * 1e6).round() as i64),
                ),
            ] {
                if value.is_some() {
                    crate::settings::set_int(
                        conn,
                        super::ops::SETTINGS_SCOPE,
                        &self.name,
                        key,
                        value,
                        now,
                    )?;
                }
            }
            Ok(())
        })
    }

    /// The queue's stored settings (`None`: not set, the default applies).
    pub fn settings(&self) -> Result<QueueSettings> {
        let reader = self.db.inner.reader()?;
        super::ops::settings_of(reader.raw(), &self.name)
    }

    /// Forgets the queue's stored settings: handles made afterwards use
    /// the defaults (or their own options).
    pub fn clear_settings(&self) -> Result<()> {
        self.write(None, |conn, _| {
            crate::settings::clear(conn, super::ops::SETTINGS_SCOPE, &self.name)
        })
    }

    /// Sets the queue's concurrency caps (ADR 35) for every process and
    /// language: at most `max_running` of its jobs run at once, and at most
    /// `max_running_per_key` of one `concurrency_key`. A cap given as
    /// `None` is lifted. Claims count unexpired leases in their own
    /// transaction; see [`Concurrency`](super::Concurrency) for what a
    /// lapsed lease means for a cap. Bad input changes nothing.
    pub fn limit_concurrency(&self, caps: &super::Concurrency) -> Result<()> {
        self.write(None, |conn, now| {
            ops::limit_concurrency(conn, &self.name, caps, now)
        })
    }

    /// Sets how the queue shares its claims among its `concurrency_key`s
    /// (ADR 36), for every process and language: round-robin order (each
    /// key with ready jobs takes one per turn, so one key's flood does not
    /// hold up another's few) and a rate limit per key (a claim steps over
    /// a key at its limit). A field not given is its default (priority
    /// order, no limit per key). Bad input changes nothing.
    pub fn set_fairness(&self, fairness: &super::Fairness) -> Result<()> {
        self.write(None, |conn, now| {
            ops::set_fairness(conn, &self.name, fairness, now)
        })
    }

    /// The queue's concurrency caps (none set: both `None`).
    pub fn concurrency(&self) -> Result<super::Concurrency> {
        let reader = self.db.inner.reader()?;
        Ok(crate::rate::ops::queue_controls(reader.raw(), &self.name)?.1)
    }

    /// Pauses the queue (ADR 33), for every process and language, until
    /// [`resume`](Self::resume): no claim returns a job of it (waiting
    /// claims and workers keep waiting), running jobs finish, enqueues and
    /// the scheduler go on (jobs accumulate). Stored in the file: it
    /// survives restarts. Pausing a paused queue keeps the time it was
    /// paused and takes the new note.
    pub fn pause(&self, options: &PauseOptions) -> Result<()> {
        pause_in(&self.db, &self.name, options)
    }

    /// Lifts the queue's own pause; whether it had one. Waiting claims in
    /// every process wake on its commit. While all queues are paused
    /// ([`Database::pause_all`]) it stays paused by that one.
    pub fn resume(&self) -> Result<bool> {
        self.write(None, |conn, _| ops::resume(conn, &self.name))
    }

    /// The pauses that hold the queue: its own first, then all queues'.
    /// Empty while it runs.
    pub fn pauses(&self) -> Result<Vec<super::types::Pause>> {
        let reader = self.db.inner.reader()?;
        ops::pauses(reader.raw(), &self.name)
    }

    /// The database the queue lives in.
    pub fn database(&self) -> &Database {
        &self.db
    }

    fn write<R>(
        &self,
        tx: Option<&Transaction>,
        f: impl FnOnce(crate::raw::Conn<'_>, i64) -> Result<R>,
    ) -> Result<R> {
        self.db.inner.write(tx, |conn, now| f(conn.raw(), now))
    }

    // ----- enqueue -------------------------------------------------------

    /// Adds a job. See [`EnqueueOptions`] for scheduling, priority, retries,
    /// deduplication and expiry. The payload must be valid JSON (or bytes)
    /// no larger than `Options::max_payload_bytes`.
    pub fn enqueue(
        &self,
        payload: impl Into<Payload>,
        options: &EnqueueOptions,
    ) -> Result<Enqueued> {
        self.enqueue_many_in(None, [payload], options)
            .map(|mut v| v.remove(0))
    }

    /// [`enqueue`](Self::enqueue) inside `tx`: the job exists exactly when
    /// the transaction commits.
    pub fn enqueue_tx(
        &self,
        tx: &Transaction,
        payload: impl Into<Payload>,
        options: &EnqueueOptions,
    ) -> Result<Enqueued> {
        self.enqueue_many_in(Some(tx), [payload], options)
            .map(|mut v| v.remove(0))
    }

    /// Adds several jobs with the same options in one transaction; all or
    /// none are added. Returns one [`Enqueued`] per payload, in order.
    pub fn enqueue_many<P: Into<Payload>>(
        &self,
        payloads: impl IntoIterator<Item = P>,
        options: &EnqueueOptions,
    ) -> Result<Vec<Enqueued>> {
        self.enqueue_many_in(None, payloads, options)
    }

    /// [`enqueue_many`](Self::enqueue_many) inside `tx`.
    pub fn enqueue_many_tx<P: Into<Payload>>(
        &self,
        tx: &Transaction,
        payloads: impl IntoIterator<Item = P>,
        options: &EnqueueOptions,
    ) -> Result<Vec<Enqueued>> {
        self.enqueue_many_in(Some(tx), payloads, options)
    }

    /// The form of [`enqueue_many`](Self::enqueue_many) that bindings call: inside `tx` when
    /// one is given, else in a transaction of its own.
    pub fn enqueue_many_in<P: Into<Payload>>(
        &self,
        tx: Option<&Transaction>,
        payloads: impl IntoIterator<Item = P>,
        options: &EnqueueOptions,
    ) -> Result<Vec<Enqueued>> {
        let payloads = self.checked_payloads(payloads, options)?;
        if payloads.is_empty() {
            return Ok(Vec::new());
        }
        self.write(tx, |conn, now| self.insert(conn, &payloads, options, now))
    }

    /// The payloads of an enqueue, each checked, and its options (once).
    fn checked_payloads<P: Into<Payload>>(
        &self,
        payloads: impl IntoIterator<Item = P>,
        options: &EnqueueOptions,
    ) -> Result<Vec<Payload>> {
        let payloads: Vec<Payload> = payloads.into_iter().map(Into::into).collect();
        if options.dedupe_key.is_some() && payloads.len() > 1 {
            return Err(Error::invalid(
                "enqueue_many: one dedupe key cannot cover several jobs; enqueue them one by one",
            ));
        }
        options.check()?;
        let max = self.db.options().max_payload_bytes;
        for p in &payloads {
            p.validate(max)?;
        }
        Ok(payloads)
    }

    /// [`enqueue_many_in`](Self::enqueue_many_in) on a connection to this
    /// file that the application opened itself (GRDB's, say), inside
    /// whatever transaction it has open there: the jobs commit or roll back
    /// with the application's own writes on it. In autocommit mode the call
    /// is its own transaction. The queue's defaults apply, as for any
    /// enqueue. The same build requirement and checks as
    /// [`Database::register_functions_on`](crate::Database::register_functions_on).
    ///
    /// # Safety
    /// As for [`Database::register_functions_on`](crate::Database::register_functions_on).
    pub unsafe fn enqueue_many_on<P: Into<Payload>>(
        &self,
        db: *mut libsqlite3_sys::sqlite3,
        payloads: impl IntoIterator<Item = P>,
        options: &EnqueueOptions,
    ) -> Result<Vec<Enqueued>> {
        self.db.inner.check_open()?;
        // SAFETY: per the contract.
        unsafe { self.db.inner.engine.check_foreign(db)? };
        let payloads = self.checked_payloads(payloads, options)?;
        if payloads.is_empty() {
            return Ok(Vec::new());
        }
        // SAFETY: open (checked above, and the contract), used by this thread
        // for the call; no cache.
        let conn = unsafe { crate::raw::Conn::new(db, None) };
        let autocommit = conn.is_autocommit();
        let now = self.db.inner.now();
        let done = crate::sqlfn::atomically(conn, || self.insert(conn, &payloads, options, now))?;
        if autocommit {
            // Committed by itself: this process's waiters wake at once.
            self.db.poke();
        }
        Ok(done)
    }

    fn insert(
        &self,
        conn: crate::raw::Conn<'_>,
        payloads: &[Payload],
        o: &EnqueueOptions,
        now: i64,
    ) -> Result<Vec<Enqueued>> {
        let job = o.resolve(&self.options, now)?;
        Ok(ops::enqueue(conn, &self.name, &job, payloads, now)?
            .into_iter()
            .map(|(id, unique)| Enqueued {
                id,
                existing: unique.is_some(),
                unique,
            })
            .collect())
    }

    // ----- claim ---------------------------------------------------------

    /// Leases up to `n` due jobs (highest priority, then oldest) to
    /// `worker_id` for the queue's lease length. Returns at once, possibly
    /// with no jobs. One write transaction, which also promotes due scheduled
    /// jobs, reclaims lapsed leases and expires stale jobs.
    pub fn claim(&self, worker_id: &str, n: usize) -> Result<Vec<Job>> {
        self.claim_with(worker_id, n, &ClaimOptions::default())
    }

    /// [`claim`](Self::claim) with a lease length and/or a wait: with
    /// `wait > 0`, if nothing is claimable the call sleeps until a commit from
    /// any process (or the next scheduled job, or a lapsing lease) makes work
    /// claimable, and returns as soon as it has claimed some, or empty at the
    /// deadline. Only a read-only check runs on each wake-up; the write lock
    /// is taken only when this queue has work.
    ///
    /// ```no_run
    /// # fn main() -> honker::Result<()> {
    /// use honker::{ClaimOptions, Database};
    /// use std::time::Duration;
    ///
    /// let db = Database::open("app.db")?;
    /// let emails = db.queue("emails")?;
    /// let wait = ClaimOptions { wait: Duration::from_secs(30), ..Default::default() };
    /// loop {
    ///     for job in emails.claim_with("mailer-1", 16, &wait)? {
    ///         // ... send it; then
    ///         job.ack()?;
    ///     }
    /// }
    /// # }
    /// ```
    pub fn claim_with(
        &self,
        worker_id: &str,
        n: usize,
        options: &ClaimOptions,
    ) -> Result<Vec<Job>> {
        self.claim_with_hook(worker_id, n, options, &mut || {})
    }

    /// [`claim_with`](Self::claim_with), calling `on_claimable` each time
    /// the read-only check finds work, just before the write transaction that
    /// claims it. A binding that hands jobs to another thread (Python's
    /// asyncio loop) wakes that thread there, so its wake-up overlaps the
    /// claim instead of following it. A claim can still find nothing (another
    /// worker was first) and wait again.
    pub fn claim_with_hook(
        &self,
        worker_id: &str,
        n: usize,
        options: &ClaimOptions,
        on_claimable: &mut dyn FnMut(),
    ) -> Result<Vec<Job>> {
        self.claim_until(
            worker_id,
            n,
            options.lease,
            options.wait,
            on_claimable,
            &|| false,
        )
    }

    /// The waiting claim, ending early (empty) once `stop()` says so; a
    /// caller that sets its stop flag pokes the database's signal so the
    /// wait notices at once ([`runtime::Claimer::close`](crate::runtime::Claimer::close)).
    pub(crate) fn claim_until(
        &self,
        worker_id: &str,
        n: usize,
        lease: Option<Duration>,
        wait: Duration,
        on_claimable: &mut dyn FnMut(),
        stop: &dyn Fn() -> bool,
    ) -> Result<Vec<Job>> {
        validate::key("worker id", worker_id)?;
        let n = validate::batch_usize(n)?;
        let lease_ms = validate::lease(lease.unwrap_or(self.options.lease))?;
        validate::delay("wait", wait)?;
        let claim = Claim {
            queue: self,
            worker_id,
            n,
            lease_ms,
            on_claimable: std::cell::RefCell::new(on_claimable),
        };
        let jobs = self
            .db
            .inner
            .wait_for(&claim, wait, stop, "a claim with a wait")?;
        Ok(jobs.unwrap_or_default())
    }

    /// The read-only check a waiting claim makes on each wake-up: whether
    /// this queue has work now, else when it will (its clock's now too).
    pub(crate) fn probe(&self) -> Result<(ops::Probe, i64)> {
        let now = self.db.inner.now();
        let reader = self.db.inner.reader()?;
        Ok((ops::probe(reader.raw(), &self.name, now)?, now))
    }

    /// [`probe`](Self::probe) as a wait's look: `Some(ZERO)` when a claim
    /// may find work now, `Some(d)` in `d`, `None` when only a commit can
    /// bring work.
    pub(crate) fn due_in(&self) -> Result<Option<Duration>> {
        let (probe, now) = self.probe()?;
        Ok(match probe {
            ops::Probe::Claimable => Some(Duration::ZERO),
            ops::Probe::NextAt(t) => t.map(|t| crate::clock::look_again_in(t, now)),
            ops::Probe::Paused { .. } => None,
        })
    }

    /// The form of [`claim_with`](Self::claim_with) that bindings call:
    /// inside `tx` when one is given (which cannot wait: the transaction holds
    /// the write lock, so no process could commit work meanwhile; a `wait`
    /// there is `INVALID_ARGUMENT`), else as `claim_with`.
    pub fn claim_in(
        &self,
        tx: Option<&Transaction>,
        worker_id: &str,
        n: usize,
        options: &ClaimOptions,
    ) -> Result<Vec<Job>> {
        self.claim_with_hook_in(tx, worker_id, n, options, &mut || {})
    }

    /// [`claim_in`](Self::claim_in) with [`claim_with_hook`](Self::claim_with_hook)'s
    /// `on_claimable` (called only by a claim outside a transaction: one inside
    /// cannot wait).
    pub fn claim_with_hook_in(
        &self,
        tx: Option<&Transaction>,
        worker_id: &str,
        n: usize,
        options: &ClaimOptions,
        on_claimable: &mut dyn FnMut(),
    ) -> Result<Vec<Job>> {
        match tx {
            None => self.claim_with_hook(worker_id, n, options, on_claimable),
            Some(_) if !options.wait.is_zero() => Err(Error::invalid(
                "a claim inside a transaction cannot wait: the transaction holds the write \
                 lock, so no process could commit work meanwhile",
            )),
            Some(tx) => self.claim_tx(tx, worker_id, n, options.lease),
        }
    }

    /// [`claim`](Self::claim) inside `tx` (no waiting).
    pub fn claim_tx(
        &self,
        tx: &Transaction,
        worker_id: &str,
        n: usize,
        lease: Option<Duration>,
    ) -> Result<Vec<Job>> {
        validate::key("worker id", worker_id)?;
        let n = validate::batch_usize(n)?;
        let lease_ms = validate::lease(lease.unwrap_or(self.options.lease))?;
        self.claim_now(Some(tx), worker_id, n, lease_ms)
    }

    pub(crate) fn claim_now(
        &self,
        tx: Option<&Transaction>,
        worker_id: &str,
        n: usize,
        lease_ms: i64,
    ) -> Result<Vec<Job>> {
        // Only a claim in a transaction of its own may reserve a block of a
        // limited queue's starts: it is installed once its write committed.
        let blocks = ops::ClaimBlocks {
            queues: &self.blocks,
            keys: &self.key_blocks,
            own: tx.is_none(),
        };
        let (claimed, reserved) = self.write(tx, |conn, now| {
            ops::claim_limited(conn, &self.name, worker_id, n, lease_ms, now, Some(blocks))
        })?;
        if let Some(b) = reserved.queue {
            blocks.queues.install(&self.name, b);
        }
        for (name, b) in reserved.keys {
            blocks.keys.0.install(&name, b);
        }
        Ok(claimed
            .into_iter()
            .map(|c| Job {
                id: c.id,
                payload: c.payload,
                attempts: c.attempts,
                max_attempts: c.max_attempts,
                priority: c.priority,
                run_at: c.run_at,
                created_at: c.created_at,
                lease_expires_at: c.lease_expires_at,
                worker_id: worker_id.to_owned(),
                lease: Lease {
                    job_id: c.id,
                    token: c.lease_token,
                },
                trace_context: c.trace_context,
                queue: self.clone(),
            })
            .collect())
    }

    // ----- verbs on a leased job -----------------------------------------

    /// Completes a leased job: removes it (or archives it, see
    /// `Retention::completed`) and saves `result`, atomically. A stale lease
    /// gets `LEASE_LOST` and changes nothing. A lease that lapsed but was not
    /// yet reclaimed by another worker is still honoured.
    pub fn ack(&self, lease: &Lease, result: Option<Payload>) -> Result<()> {
        self.ack_in(None, lease, result)
    }

    /// [`ack`](Self::ack) inside `tx`: the job's local effects and its
    /// completion commit together.
    pub fn ack_tx(&self, tx: &Transaction, lease: &Lease, result: Option<Payload>) -> Result<()> {
        self.ack_in(Some(tx), lease, result)
    }

    /// The form of [`ack`](Self::ack) that bindings call: inside `tx` when
    /// one is given, else in a transaction of its own.
    pub fn ack_in(
        &self,
        tx: Option<&Transaction>,
        lease: &Lease,
        result: Option<Payload>,
    ) -> Result<()> {
        if let Some(r) = &result {
            r.validate(self.db.options().max_payload_bytes)?;
        }
        let keep = !self.db.options().retention.completed.is_zero();
        self.write(tx, |conn, now| {
            ops::ack(
                conn,
                &self.name,
                lease.job_id,
                &lease.token,
                result.as_ref(),
                keep,
                now,
            )
        })
    }

    /// Acks several leased jobs in one transaction; returns how many were
    /// acked. Leases that are no longer held are skipped (not an error), so a
    /// batch is never blocked by one job that another worker reclaimed.
    pub fn ack_many(&self, leases: &[Lease]) -> Result<usize> {
        self.ack_many_in(None, leases)
    }

    /// [`ack_many`](Self::ack_many) inside `tx`.
    pub fn ack_many_tx(&self, tx: &Transaction, leases: &[Lease]) -> Result<usize> {
        self.ack_many_in(Some(tx), leases)
    }

    /// The form of [`ack_many`](Self::ack_many) that bindings call: inside `tx` when
    /// one is given, else in a transaction of its own.
    pub fn ack_many_in(&self, tx: Option<&Transaction>, leases: &[Lease]) -> Result<usize> {
        if leases.is_empty() {
            return Ok(0);
        }
        validate::batch_usize(leases.len())?;
        let keep = !self.db.options().retention.completed.is_zero();
        self.write(tx, |conn, now| {
            let pairs = leases.iter().map(|l| (l.job_id, l.token.as_str()));
            ops::ack_many(conn, &self.name, pairs, keep, now, |e| {
                e.kind() == ErrorKind::LeaseLost
            })
        })
    }

    /// Gives a failed attempt back: the job runs again after `options.delay`
    /// or its backoff (exponential with jitter, as chosen at enqueue). If this
    /// was its last attempt it becomes a dead letter with `options.error`.
    /// Returns the state it is now in.
    pub fn retry(&self, lease: &Lease, options: &RetryOptions) -> Result<JobState> {
        self.retry_in(None, lease, options)
    }

    /// [`retry`](Self::retry) inside `tx`.
    pub fn retry_tx(
        &self,
        tx: &Transaction,
        lease: &Lease,
        options: &RetryOptions,
    ) -> Result<JobState> {
        self.retry_in(Some(tx), lease, options)
    }

    /// The form of [`retry`](Self::retry) that bindings call: inside `tx` when
    /// one is given, else in a transaction of its own.
    pub fn retry_in(
        &self,
        tx: Option<&Transaction>,
        lease: &Lease,
        o: &RetryOptions,
    ) -> Result<JobState> {
        let delay = o.delay.map(|d| validate::delay("delay", d)).transpose()?;
        let error = o.error.as_deref().map(validate::clip_error);
        self.write(tx, |conn, now| {
            ops::retry(
                conn,
                &self.name,
                lease.job_id,
                &lease.token,
                delay,
                error,
                now,
            )
        })
    }

    /// Dead-letters a leased job now with `error` (no more attempts).
    pub fn fail(&self, lease: &Lease, error: &str) -> Result<()> {
        self.fail_in(None, lease, error)
    }

    /// [`fail`](Self::fail) inside `tx`.
    pub fn fail_tx(&self, tx: &Transaction, lease: &Lease, error: &str) -> Result<()> {
        self.fail_in(Some(tx), lease, error)
    }

    /// The form of [`fail`](Self::fail) that bindings call: inside `tx` when
    /// one is given, else in a transaction of its own.
    pub fn fail_in(&self, tx: Option<&Transaction>, lease: &Lease, error: &str) -> Result<()> {
        let error = validate::clip_error(error);
        self.write(tx, |conn, now| {
            ops::fail(conn, &self.name, lease.job_id, &lease.token, error, now)
        })
    }

    /// Gives a leased job back at once without consuming an attempt (for a
    /// graceful shutdown).
    pub fn release(&self, lease: &Lease) -> Result<()> {
        self.give_back_in(None, lease, None).map(drop)
    }

    /// [`release`](Self::release) inside `tx`.
    pub fn release_tx(&self, tx: &Transaction, lease: &Lease) -> Result<()> {
        self.give_back_in(Some(tx), lease, None).map(drop)
    }

    /// The form of [`release`](Self::release) that bindings call: inside `tx`
    /// when one is given, else in a transaction of its own.
    pub fn release_in(&self, tx: Option<&Transaction>, lease: &Lease) -> Result<()> {
        self.give_back_in(tx, lease, None).map(drop)
    }

    /// The form of [`snooze`](Self::snooze) that bindings call: inside `tx`
    /// when one is given, else in a transaction of its own.
    pub fn snooze_in(
        &self,
        tx: Option<&Transaction>,
        lease: &Lease,
        delay: Duration,
    ) -> Result<JobState> {
        self.give_back_in(tx, lease, Some(delay))
    }

    /// Puts a leased job off for `delay` without consuming an attempt.
    pub fn snooze(&self, lease: &Lease, delay: Duration) -> Result<JobState> {
        self.give_back_in(None, lease, Some(delay))
    }

    /// [`snooze`](Self::snooze) inside `tx`.
    pub fn snooze_tx(&self, tx: &Transaction, lease: &Lease, delay: Duration) -> Result<JobState> {
        self.give_back_in(Some(tx), lease, Some(delay))
    }

    fn give_back_in(
        &self,
        tx: Option<&Transaction>,
        lease: &Lease,
        delay: Option<Duration>,
    ) -> Result<JobState> {
        let delay = delay.map(|d| validate::delay("delay", d)).transpose()?;
        self.write(tx, |conn, now| {
            ops::release(conn, &self.name, lease.job_id, &lease.token, delay, now)
        })
    }

    /// Extends a lease to `extend` (default: the queue's lease) from now.
    /// Returns the new expiry (ms).
    pub fn heartbeat(&self, lease: &Lease, extend: Option<Duration>) -> Result<i64> {
        self.heartbeat_in(None, lease, extend)
    }

    /// [`heartbeat`](Self::heartbeat) inside `tx`.
    pub fn heartbeat_tx(
        &self,
        tx: &Transaction,
        lease: &Lease,
        extend: Option<Duration>,
    ) -> Result<i64> {
        self.heartbeat_in(Some(tx), lease, extend)
    }

    /// The form of [`heartbeat`](Self::heartbeat) that bindings call: inside `tx` when
    /// one is given, else in a transaction of its own.
    pub fn heartbeat_in(
        &self,
        tx: Option<&Transaction>,
        lease: &Lease,
        extend: Option<Duration>,
    ) -> Result<i64> {
        let ms = validate::lease(extend.unwrap_or(self.options.lease))?;
        self.write(tx, |conn, now| {
            ops::heartbeat(conn, &self.name, lease.job_id, &lease.token, ms, now)
        })
    }

    // ----- by id ---------------------------------------------------------

    /// The job that `lease` holds, rebuilt from its id and token: for a
    /// process that was handed a lease by another one (a webhook that
    /// completes a job later, another language's worker). A read. Errors
    /// are the ones a verb presenting the lease would get: `LEASE_LOST` if
    /// the job is not running (also when it finished and is gone),
    /// `NOT_FOUND` if it never existed in this queue. The token is checked by
    /// each verb, which fails with `LEASE_LOST` if another claim holds the
    /// job now.
    pub fn job(&self, lease: Lease) -> Result<Job> {
        validate::job_id(lease.job_id)?;
        validate::key("token", &lease.token)?;
        let info = {
            let reader = self.db.inner.reader()?;
            let found = ops::get_job(reader.raw(), &self.name, lease.job_id, self.db.inner.now())?;
            match found {
                Some(info) => info,
                // Gone: the same code a verb with this lease would get.
                None => return Err(ops::lease_error(reader.raw(), &self.name, lease.job_id)),
            }
        };
        let (JobState::Running, Some(lease_expires_at)) = (info.state, info.lease_expires_at)
        else {
            return Err(Error::new(
                ErrorKind::LeaseLost,
                format!(
                    "job {} in queue {:?} is {}, not leased",
                    info.id,
                    &*self.name,
                    info.state.as_str()
                ),
            ));
        };
        Ok(Job {
            id: info.id,
            payload: info.payload,
            attempts: info.attempts,
            max_attempts: info.max_attempts,
            priority: info.priority,
            run_at: info.run_at,
            created_at: info.created_at,
            lease_expires_at,
            worker_id: info.worker_id.unwrap_or_default(),
            lease,
            trace_context: info.trace_context,
            queue: self.clone(),
        })
    }

    /// Cancels job `id` in any live state, leaving a finished record with
    /// `reason`. A worker holding it gets `LEASE_LOST` on its next call.
    /// Returns `false` if the job had already finished; `NOT_FOUND` if it
    /// never existed in this queue.
    pub fn cancel(&self, id: i64, reason: Option<&str>) -> Result<bool> {
        self.cancel_in(None, id, reason)
    }

    /// [`cancel`](Self::cancel) inside `tx`.
    pub fn cancel_tx(&self, tx: &Transaction, id: i64, reason: Option<&str>) -> Result<bool> {
        self.cancel_in(Some(tx), id, reason)
    }

    /// The form of [`cancel`](Self::cancel) that bindings call: inside `tx` when
    /// one is given, else in a transaction of its own.
    pub fn cancel_in(
        &self,
        tx: Option<&Transaction>,
        id: i64,
        reason: Option<&str>,
    ) -> Result<bool> {
        validate::job_id(id)?;
        let reason = reason.map(validate::clip_error);
        self.write(tx, |conn, now| {
            ops::cancel(conn, &self.name, id, reason, now)
        })
    }

    /// Finds job `id` in any state until retention removes it; `NOT_FOUND`
    /// otherwise (an acked job is gone unless `Retention::completed` keeps
    /// it).
    pub fn get_job(&self, id: i64) -> Result<JobInfo> {
        validate::job_id(id)?;
        let reader = self.db.inner.reader()?;
        ops::get_job(reader.raw(), &self.name, id, self.db.inner.now())?
            .ok_or_else(|| Error::not_found(format!("no job {id} in queue {:?}", &*self.name)))
    }

    /// The result saved when job `id` was acked, if any.
    pub fn get_result(&self, id: i64) -> Result<Option<Payload>> {
        validate::job_id(id)?;
        let reader = self.db.inner.reader()?;
        ops::get_result(reader.raw(), &self.name, id, self.db.inner.now())
    }

    /// Waits up to `timeout` for job `id`'s result. Returns `Some(result)` as
    /// soon as it is saved (by any process), `None` if the job finished
    /// without one (or does not exist), and `TIMEOUT` if it is still live at
    /// the deadline.
    pub fn wait_result(&self, id: i64, timeout: Duration) -> Result<Option<Payload>> {
        self.wait_result_until(id, timeout, &|| false)
    }

    /// [`wait_result`](Self::wait_result) that fails with `TIMEOUT` as soon
    /// as `stop()` says so (its setter pokes the database's signal).
    pub(crate) fn wait_result_until(
        &self,
        id: i64,
        timeout: Duration,
        stop: &dyn Fn() -> bool,
    ) -> Result<Option<Payload>> {
        validate::job_id(id)?;
        validate::delay("timeout", timeout)?;
        let result = crate::Reads(|| self.result_now(id));
        match self
            .db
            .inner
            .wait_for(&result, timeout, stop, "wait_result")?
        {
            Some(r) => Ok(r),
            None if stop() => Err(Error::cancelled()),
            None => Err(Error::new(
                ErrorKind::Timeout,
                format!("job {id} produced no result within {timeout:?}"),
            )),
        }
    }

    /// A result wait's read: `Some` once the job has finished (its result,
    /// if any), `None` while it is live.
    fn result_now(&self, id: i64) -> Result<Option<Option<Payload>>> {
        // Liveness first, then the result: an ack removes the job and saves
        // its result in one commit, so once a read finds the job gone, a
        // later read finds the result if there is one. (The other order can
        // read "no result yet" and then "gone".)
        let reader = self.db.inner.reader()?;
        let now = self.db.inner.now();
        let live = ops::get_job(reader.raw(), &self.name, id, now)?
            .is_some_and(|j| !j.state.is_finished());
        if live {
            return Ok(None);
        }
        ops::get_result(reader.raw(), &self.name, id, now).map(Some)
    }

    // ----- dead letters and stats ----------------------------------------

    /// A page of at most `limit` dead letters with ids above `after_id` (0
    /// for the first page), oldest first.
    pub fn dead_letters(&self, after_id: i64, limit: usize) -> Result<Vec<JobInfo>> {
        let limit = validate::batch_usize(limit)?;
        let reader = self.db.inner.reader()?;
        ops::list_dead(
            reader.raw(),
            &self.name,
            after_id,
            limit,
            self.db.inner.now(),
        )
    }

    /// Puts dead letter `id` back as a ready job with attempts reset. `false`
    /// if it is not a dead letter of this queue, or if its dedupe key is now
    /// held by a live job.
    pub fn requeue_dead(&self, id: i64) -> Result<bool> {
        validate::job_id(id)?;
        self.write(None, |conn, now| {
            Ok(ops::requeue_dead(conn, &self.name, Some(id), now)? == 1)
        })
    }

    /// Requeues every dead letter of the queue; returns how many.
    pub fn requeue_all_dead(&self) -> Result<usize> {
        self.write(None, |conn, now| {
            ops::requeue_dead(conn, &self.name, None, now)
        })
    }

    /// Makes job `id` run as soon as a worker is free (the operator's
    /// `honker jobs retry`): a scheduled job (delayed, or waiting out a
    /// retry's backoff) becomes ready now with its attempts kept; a dead
    /// letter is requeued as by [`requeue_dead`](Self::requeue_dead). A
    /// ready, running or finished job is left as it is, and the answer says
    /// which. `NOT_FOUND` if no record of the job is left in this queue.
    pub fn retry_now(&self, id: i64) -> Result<RetryNow> {
        validate::job_id(id)?;
        self.write(None, |conn, now| ops::retry_now(conn, &self.name, id, now))
    }

    /// Deletes dead letters that died more than `older_than` ago (all of
    /// them when `None`); returns how many.
    pub fn purge_dead(&self, older_than: Option<Duration>) -> Result<usize> {
        let age = older_than
            .map(|d| validate::delay("older_than", d))
            .transpose()?;
        self.write(None, |conn, now| {
            let before = age.map_or(i64::MAX, |a| now.saturating_sub(a));
            ops::purge_dead(conn, &self.name, before)
        })
    }

    /// This queue's counters since the file was created (enqueued,
    /// claimed, acked, retried, reclaimed, dead, expired, cancelled), its
    /// claim latency histogram and its jobs by state (ADR 27). A read.
    pub fn metrics(&self) -> Result<QueueMetrics> {
        let found = super::metrics::read_own(&self.db.inner, Some(&self.name))?;
        Ok(found.into_iter().next().unwrap_or_else(|| QueueMetrics {
            queue: self.name.to_string(),
            ..QueueMetrics::default()
        }))
    }

    /// Counts per state, and the age of the oldest due job. A read.
    pub fn stats(&self) -> Result<QueueStats> {
        let reader = self.db.inner.reader()?;
        ops::stats(reader.raw(), &self.name, self.db.inner.now())
    }

    /// Limits how many of this queue's jobs start, for every worker of
    /// every process together ("at most 10 emails a second"): stored in the
    /// file, enforced inside each claim's transaction (ADR 23). A claim of
    /// n takes what the limit allows now; the rest keep waiting with their
    /// attempts untouched, and waiting workers sleep until the limit lets
    /// the next one start. In any window of `per`, at most `limit + burst
    /// − 1` jobs start (with the default burst of 1, exactly `limit`);
    /// while the limit is less than half used, a `Database` takes its
    /// starts from blocks it reserved ahead, which keep that bound and
    /// save a write per claim (ADR 23 §9). `None` lifts the limit.
    pub fn set_rate_limit(&self, limit: Option<crate::rate::RateLimit>) -> Result<()> {
        if let Some(l) = &limit {
            l.check()?;
        }
        self.db.inner.write(None, |conn, now| {
            crate::rate::ops::set_queue_limit(conn.raw(), &self.name, limit.as_ref(), now)
        })
    }

    /// The queue's rate limit, if it has one (set by any process).
    pub fn rate_limit(&self) -> Result<Option<crate::rate::RateLimit>> {
        let reader = self.db.inner.reader()?;
        crate::rate::ops::queue_limit(reader.raw(), &self.name)
    }
}

/// A claim with a wait, as the wait sees it: a look is the read-only probe
/// (calling `on_claimable` when it finds work), a take the claim (`None`
/// when another was first).
struct Claim<'a, 'h> {
    queue: &'a Queue,
    worker_id: &'a str,
    n: usize,
    lease_ms: i64,
    on_claimable: std::cell::RefCell<&'h mut dyn FnMut()>,
}

impl crate::Source for Claim<'_, '_> {
    type Item = Vec<Job>;

    fn look(&self) -> Result<Option<Duration>> {
        let due = self.queue.due_in()?;
        if due == Some(Duration::ZERO) {
            (self.on_claimable.borrow_mut())();
        }
        Ok(due)
    }

    fn take(&self) -> Result<Option<Vec<Job>>> {
        let jobs = self
            .queue
            .claim_now(None, self.worker_id, self.n, self.lease_ms)?;
        Ok((!jobs.is_empty()).then_some(jobs))
    }
}

/// Pauses `queue` (`""`: all queues) with the options' note.
fn pause_in(db: &Database, queue: &str, options: &PauseOptions) -> Result<()> {
    db.inner.write(None, |conn, now| {
        ops::pause(conn.raw(), queue, options.note.as_deref(), now)
    })
}
