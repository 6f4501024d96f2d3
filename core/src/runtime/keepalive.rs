//! [`KeepAlive`]: lease renewal while long work runs (a job's lease, or a
//! lock held with its fencing token).

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, ErrorKind, Result};
use crate::lock::Lock;
use crate::queue::{Lease, Queue};
use crate::validate;

/// Renews one lease (a job's, or a lock's) on a thread of its own until
/// stopped: every `every` (default: a third of the lease) it extends the
/// lease to its full length from now. One meaning on every surface:
///
/// - a lost lease (`LEASE_LOST`: reclaimed, cancelled or finished elsewhere;
///   `NOT_FOUND`) stops the renewal and is reported ([`lost`](Self::lost),
///   [`wait_end`](Self::wait_end)); the holder should stop its work, whose
///   outcome can no longer be recorded;
/// - a database that is closed (or unusable in a forked child) stops it too;
/// - anything else (`BUSY` while another writer holds the file) is tried
///   again at the next beat.
#[derive(Debug)]
pub struct KeepAlive {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// The process that started it: a forked copy has no renewal thread.
    pid: u32,
}

/// What a [`KeepAlive`] did, from [`KeepAlive::stop`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeepAliveReport {
    /// The lease was lost while it ran.
    pub lost: bool,
    /// Renewals that succeeded.
    pub beats: u64,
    /// When the lease lapses after the last renewal (ms), if there was one.
    pub lease_expires_at: Option<i64>,
    /// The error that ended it early (the loss, or a closed database).
    pub ended_by: Option<ErrorKind>,
}

#[derive(Debug, Default)]
struct Shared {
    stopped: Mutex<bool>,
    wake: Condvar,
    ended: Mutex<Option<Option<ErrorKind>>>,
    ended_cv: Condvar,
    lost: AtomicBool,
    beats: AtomicU64,
    /// The last renewal's new expiry (ms); 0 before the first.
    expires_at: AtomicI64,
}

impl KeepAlive {
    /// Starts renewing `lease` of a job in `queue`, extending it to `length`
    /// from now every `every` (default: `length / 3`). `every` must be
    /// shorter than `length`.
    pub fn start(
        queue: &Queue,
        lease: Lease,
        length: Duration,
        every: Option<Duration>,
    ) -> Result<KeepAlive> {
        validate::lease(length)?;
        let every = every_within(length, every)?;
        let queue = queue.clone();
        Self::spawn(every, move || queue.heartbeat(&lease, Some(length)))
    }

    /// Starts renewing the lock `lock` held with fencing token `token`,
    /// extending it to `ttl` from now every `every` (default: `ttl / 3`).
    /// A lock taken by another owner after a lapse, or released, is lost
    /// (`LEASE_LOST`): the holder's fenced writes fail from then on.
    pub fn start_lock(
        lock: &Lock,
        token: i64,
        ttl: Duration,
        every: Option<Duration>,
    ) -> Result<KeepAlive> {
        crate::lock::check_ttl(ttl)?;
        let token = crate::lock::check_token(token)?;
        let every = every_within(ttl, every)?;
        let lock = lock.clone();
        Self::spawn(every, move || lock.renew(token, ttl))
    }

    fn spawn(
        every: Duration,
        renew: impl Fn() -> Result<i64> + Send + 'static,
    ) -> Result<KeepAlive> {
        let shared = Arc::new(Shared::default());
        let thread = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("honker-keepalive".into())
                .spawn(move || beat(&renew, every, &shared))
                .map_err(|e| Error::internal(format!("cannot start a keep-alive thread: {e}")))?
        };
        Ok(KeepAlive {
            shared,
            thread: Mutex::new(Some(thread)),
            pid: std::process::id(),
        })
    }

    /// Whether the lease was lost (renewal stopped).
    pub fn lost(&self) -> bool {
        self.shared.lost.load(Ordering::SeqCst)
    }

    /// Renewals that succeeded so far.
    pub fn beats(&self) -> u64 {
        self.shared.beats.load(Ordering::SeqCst)
    }

    /// When the lease lapses after the last renewal (ms), if there was one:
    /// bindings show it as their job's lease expiry.
    pub fn lease_expires_at(&self) -> Option<i64> {
        match self.shared.expires_at.load(Ordering::SeqCst) {
            0 => None,
            ms => Some(ms),
        }
    }

    /// Blocks until the renewal ends (stopped, or ended by a lost lease or a
    /// closed database) or `timeout` passes; returns whether it ended.
    /// Bindings wait here off their event loop to cancel work whose lease
    /// is gone.
    pub fn wait_end(&self, timeout: Duration) -> bool {
        if self.pid != std::process::id() {
            return true; // a forked copy: nothing runs here
        }
        let deadline = Instant::now().checked_add(timeout);
        let mut ended = self.shared.ended.lock();
        while ended.is_none() {
            match deadline {
                Some(d) => {
                    if self.shared.ended_cv.wait_until(&mut ended, d).timed_out() {
                        return ended.is_some();
                    }
                }
                None => self.shared.ended_cv.wait(&mut ended),
            }
        }
        true
    }

    /// Stops renewing and says what happened. Idempotent. A renewal in
    /// progress is waited for briefly ([`STOP_WAIT`]), not to its end: it may
    /// be waiting for the writer, held perhaps by the caller's own
    /// transaction (`with db.transaction(): with job.keep_alive(): ...`),
    /// and then finishes on its own thread, changing nothing that matters
    /// (a renewal of a lease that is gone fails). In a process forked from
    /// the one that started it, there is no renewal thread (fork copies only
    /// the caller's) and its locks may have been held at fork time: it
    /// touches neither, and reports what the copied counters say.
    pub fn stop(&self) -> KeepAliveReport {
        if self.pid != std::process::id() {
            if let Some(t) = self.thread.try_lock().and_then(|mut t| t.take()) {
                std::mem::forget(t);
            }
            return self.report(None);
        }
        {
            let mut stopped = self.shared.stopped.lock();
            *stopped = true;
            self.shared.wake.notify_all();
        }
        let thread = self.thread.lock().take();
        if let Some(t) = thread {
            if self.wait_end(STOP_WAIT) {
                let _ = t.join();
            } // else: detached; it ends after its renewal
        }
        self.report(self.shared.ended.lock().flatten())
    }

    fn report(&self, ended_by: Option<ErrorKind>) -> KeepAliveReport {
        KeepAliveReport {
            lost: self.lost(),
            beats: self.beats(),
            lease_expires_at: self.lease_expires_at(),
            ended_by,
        }
    }
}

/// How long [`KeepAlive::stop`] waits for a renewal in progress.
pub const STOP_WAIT: Duration = Duration::from_millis(250);

impl Drop for KeepAlive {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The renewal period: `every` (default: a third of `length`), positive and
/// shorter than `length`.
pub(crate) fn every_within(length: Duration, every: Option<Duration>) -> Result<Duration> {
    let every = every.unwrap_or(length / 3);
    if every.is_zero() || every >= length {
        return Err(Error::invalid(format!(
            "every must be positive and shorter than the lease ({length:?}), got {every:?}"
        )));
    }
    Ok(every)
}

fn beat(renew: &dyn Fn() -> Result<i64>, every: Duration, shared: &Shared) {
    let mut next = Instant::now() + every;
    let ended_by = loop {
        {
            let mut stopped = shared.stopped.lock();
            while !*stopped && Instant::now() < next {
                shared.wake.wait_until(&mut stopped, next);
            }
            if *stopped {
                break None;
            }
        }
        next = Instant::now() + every;
        match renew() {
            Ok(expires_at) => {
                shared.expires_at.store(expires_at, Ordering::SeqCst);
                shared.beats.fetch_add(1, Ordering::SeqCst);
            }
            Err(e) => match e.kind() {
                ErrorKind::LeaseLost | ErrorKind::NotFound => {
                    shared.lost.store(true, Ordering::SeqCst);
                    break Some(e.kind());
                }
                ErrorKind::Closed | ErrorKind::Unsafe => break Some(e.kind()),
                // BUSY and the like: the next beat tries again.
                _ => {}
            },
        }
    };
    *shared.ended.lock() = Some(ended_by);
    shared.ended_cv.notify_all();
}
