//! [`Claimer`]: a queue as a stream of claimed jobs.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use crate::error::Result;
use crate::queue::{Job, Queue};
use crate::validate;

/// Hands out a queue's jobs one at a time, claiming `batch` at once and
/// sleeping until work arrives from any process. Thread-safe: `close` may
/// come from another thread while `next` waits.
///
/// ```no_run
/// # fn main() -> honker::Result<()> {
/// use honker::{runtime::Claimer, Database};
/// use std::time::Duration;
///
/// let db = Database::open("app.db")?;
/// let claimer = Claimer::new(&db.queue("emails")?, "mailer-1", 16, None)?;
/// while let Some(job) = claimer.next(Duration::from_secs(30))? {
///     // ... send it; then
///     job.ack()?;
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Claimer {
    queue: Queue,
    worker_id: String,
    batch: usize,
    lease: Option<Duration>,
    buffer: Mutex<VecDeque<Job>>,
    closed: AtomicBool,
    /// The process that made it: in a forked copy the buffered jobs are
    /// the parent's.
    pid: u32,
}

impl Claimer {
    /// A claimer for `queue`, claiming up to `batch` jobs at a time for
    /// `worker_id`, leased for `lease` (default: the queue's lease).
    pub fn new(
        queue: &Queue,
        worker_id: &str,
        batch: usize,
        lease: Option<Duration>,
    ) -> Result<Claimer> {
        validate::key("worker id", worker_id)?;
        let batch = validate::batch_usize(batch)?;
        if let Some(l) = lease {
            validate::lease(l)?;
        }
        Ok(Claimer {
            queue: queue.clone(),
            worker_id: worker_id.to_owned(),
            batch,
            lease,
            buffer: Mutex::new(VecDeque::new()),
            closed: AtomicBool::new(false),
            pid: std::process::id(),
        })
    }

    /// The next job: a buffered one, or the first of a new claim, waiting up
    /// to `wait` for work. `None` when the wait ran out or the claimer was
    /// closed (also while this call waited).
    pub fn next(&self, wait: Duration) -> Result<Option<Job>> {
        self.next_with_hook(wait, &mut || {})
    }

    /// [`next`](Self::next), calling `on_claimable` when a wait finds work,
    /// just before the claim (see [`Queue::claim_with_hook`]).
    pub fn next_with_hook(
        &self,
        wait: Duration,
        on_claimable: &mut dyn FnMut(),
    ) -> Result<Option<Job>> {
        self.next_inner(wait, on_claimable, &|| false)
    }

    fn next_inner(
        &self,
        wait: Duration,
        on_claimable: &mut dyn FnMut(),
        stop: &dyn Fn() -> bool,
    ) -> Result<Option<Job>> {
        if self.is_closed() {
            return Ok(None);
        }
        if let Some(job) = self.buffer.lock().pop_front() {
            return Ok(Some(job));
        }
        let stop = || self.is_closed() || stop();
        let jobs = self.queue.claim_until(
            &self.worker_id,
            self.batch,
            self.lease,
            wait,
            on_claimable,
            &stop,
        )?;
        // Checked under the buffer's lock, which `close` takes after setting
        // the flag: either this sees the flag, or `close` sees these jobs.
        let mut buffer = self.buffer.lock();
        if self.is_closed() {
            drop(buffer);
            // Claimed for nobody: give them back now, not at lease lapse.
            release_all(jobs);
            return Ok(None);
        }
        buffer.extend(jobs);
        Ok(buffer.pop_front())
    }

    /// A job claimed earlier and not handed out yet, if any: no claim, no
    /// waiting, no I/O (a binding's fast path before a `next` that may wait).
    pub fn take_buffered(&self) -> Option<Job> {
        if self.is_closed() {
            return None;
        }
        self.buffer.lock().pop_front()
    }

    /// When a claim could find work, found without waiting for anything
    /// and without writing (one read): `Some(ZERO)` now (a job is buffered,
    /// or one is ready), `Some(d)` in `d` (the next scheduled job comes due,
    /// a lease lapses, or the queue's rate limit lets one start), `None`
    /// when nothing is known (only a commit can bring work). An event
    /// loop's wait: check, claim (`next(ZERO)`: on the loop itself under
    /// [`without_waiting`](crate::without_waiting), on a thread when that
    /// says `BUSY` or the commit waits for a disk flush) when due, else
    /// sleep on [`Database::readiness`](crate::Database::readiness) until a
    /// commit or the time given. A reader that is not free at once is `BUSY`
    /// under [`without_waiting`](crate::without_waiting).
    pub fn due_in(&self) -> Result<Option<Duration>> {
        if self.is_closed() || !self.buffer.lock().is_empty() {
            return Ok(Some(Duration::ZERO));
        }
        self.queue.due_in()
    }

    /// Jobs claimed but not handed out yet.
    pub fn buffered(&self) -> usize {
        self.buffer.lock().len()
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Stops the stream: releases the jobs claimed but not handed out (a
    /// release that fails, because the lease lapsed meanwhile or the
    /// database closed, leaves that job to its lease) and wakes a `next`
    /// that is waiting, which returns `None`. Returns how many were
    /// released. Jobs already handed out stay leased to their holder.
    /// Idempotent. In a process forked from the one that made it, it only
    /// stops the stream: the buffered jobs are the parent's to give back.
    pub fn close(&self) -> usize {
        self.closed.store(true, Ordering::SeqCst);
        if self.pid != std::process::id() {
            return 0;
        }
        self.queue.database().poke();
        let jobs: Vec<Job> = self.buffer.lock().drain(..).collect();
        release_all(jobs)
    }
}

impl super::Reader for Claimer {
    fn next_until(&self, wait: Duration, stop: &dyn Fn() -> bool) -> Result<Option<Job>> {
        self.next_inner(wait, &mut || {}, stop)
    }

    fn is_closed(&self) -> bool {
        Claimer::is_closed(self)
    }
}

/// A host's wait that holds no thread: the look is
/// [`due_in`](Claimer::due_in), the take `next(ZERO)`.
impl crate::Source for Claimer {
    type Item = Job;

    fn look(&self) -> Result<Option<Duration>> {
        self.due_in()
    }

    fn take(&self) -> Result<Option<Job>> {
        self.next(Duration::ZERO)
    }
}

impl Drop for Claimer {
    fn drop(&mut self) {
        self.close();
    }
}

impl super::QuickDrop for Claimer {
    /// Closed: its buffer is given back already.
    fn drops_quickly(&self) -> bool {
        self.is_closed()
    }
}

fn release_all(jobs: Vec<Job>) -> usize {
    // A release that fails (lapsed and reclaimed, or the database is gone)
    // leaves that job to its lease: not ours any more.
    jobs.into_iter().filter(|job| job.release().is_ok()).count()
}
