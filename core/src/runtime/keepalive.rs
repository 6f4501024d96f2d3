//! [`KeepAlive`]: lease renewal while long work runs (a job's lease, or a
//! lock held with its fencing token).

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::renewals::{first_due, Due, Key, Renewals};
use crate::database::Database;
use crate::error::{Error, ErrorKind, Result};
use crate::lock::Lock;
use crate::queue::{Lease, Queue};
use crate::validate;

/// Renews one lease (a job's, or a lock's) until stopped: every `every`
/// (default: a third of the lease) it extends the lease to its full length
/// from now. Until its first renewal is due it is only an entry in its
/// database's timer; from then on it renews on a thread of its own. One
/// meaning on every surface:
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
    entry: Arc<Entry>,
    /// The process that started it: a forked copy has no renewal thread.
    pid: u32,
}

/// A keep-alive's state, shared by its handle, the database's timer
/// ([`Renewals`]: until the first renewal is due) and then its own thread.
struct Entry {
    shared: Shared,
    renew: Box<dyn Fn() -> Result<i64> + Send + Sync>,
    /// Told after a renewal found the lease lost (and `lost` is set): a
    /// held lock pokes the file's signal, so that a host's loss watch on an
    /// event loop wakes.
    on_loss: Option<Box<dyn Fn() + Send + Sync>>,
    every: Duration,
    renewals: Arc<Renewals>,
    phase: Mutex<Phase>,
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeepAlive")
            .field("every", &self.every)
            .field("shared", &self.shared)
            .finish_non_exhaustive()
    }
}

enum Phase {
    /// Filed in the timer under this key; no thread yet.
    Waiting(Option<Key>),
    /// Renewing on its own thread (taken by `stop` to join it).
    Running(Option<JoinHandle<()>>),
    Stopped,
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
    /// from now every `every` (default: a third of `length`,
    /// [`RENEW_DIVISOR`](crate::defaults::RENEW_DIVISOR)). `every` must be
    /// shorter than `length`.
    pub fn start(
        queue: &Queue,
        lease: Lease,
        length: Duration,
        every: Option<Duration>,
    ) -> Result<KeepAlive> {
        validate::lease(length)?;
        let every = every_within(length, every)?;
        let db = queue.database().clone();
        let queue = queue.clone();
        Self::spawn(&db, every, None, move || {
            queue.heartbeat(&lease, Some(length))
        })
    }

    /// Starts renewing the lock `lock` held with fencing token `token`,
    /// extending it to `ttl` from now every `every` (default: a third of
    /// `ttl`, [`RENEW_DIVISOR`](crate::defaults::RENEW_DIVISOR)).
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
        let db = lock.database().clone();
        let (lock, poked) = (lock.clone(), db.clone());
        let poke: Box<dyn Fn() + Send + Sync> = Box::new(move || poked.poke());
        Self::spawn(&db, every, Some(poke), move || lock.renew(token, ttl))
    }

    /// Files the keep-alive in the database's timer, due `every` from now:
    /// no thread runs for it unless it lives that long.
    fn spawn(
        db: &Database,
        every: Duration,
        on_loss: Option<Box<dyn Fn() + Send + Sync>>,
        renew: impl Fn() -> Result<i64> + Send + Sync + 'static,
    ) -> Result<KeepAlive> {
        if let Err(e) = db.inner.check_open() {
            // Closed, or a forked child's copy (whose timer must not be
            // touched): a keep-alive that has already ended, as its first
            // renewal would end it.
            let entry = Arc::new(Entry {
                shared: Shared::default(),
                renew: Box::new(renew),
                on_loss,
                every,
                renewals: Arc::default(),
                phase: Mutex::new(Phase::Stopped),
            });
            entry.shared.end(Some(e.kind()));
            return Ok(KeepAlive {
                entry,
                pid: std::process::id(),
            });
        }
        let renewals = &super::renewals::of(db);
        let entry = Arc::new(Entry {
            shared: Shared::default(),
            renew: Box::new(renew),
            on_loss,
            every,
            renewals: Arc::clone(renewals),
            phase: Mutex::new(Phase::Waiting(None)),
        });
        {
            // Held while filing it, so the timer (which takes this lock to
            // start it) sees the key in place.
            let mut phase = entry.phase.lock();
            let key = renewals.add(first_due(every), Arc::clone(&entry) as Arc<dyn Due>)?;
            *phase = Phase::Waiting(Some(key));
        }
        Ok(KeepAlive {
            entry,
            pid: std::process::id(),
        })
    }

    /// How often it renews (the first renewal is due this long after the
    /// start): the earliest a loss can be found.
    pub fn every(&self) -> Duration {
        self.entry.every
    }

    /// Whether the lease was lost (renewal stopped).
    pub fn lost(&self) -> bool {
        self.entry.shared.lost.load(Ordering::SeqCst)
    }

    /// Renewals that succeeded so far.
    pub fn beats(&self) -> u64 {
        self.entry.shared.beats.load(Ordering::SeqCst)
    }

    /// When the lease lapses after the last renewal (ms), if there was one:
    /// bindings show it as their job's lease expiry.
    pub fn lease_expires_at(&self) -> Option<i64> {
        match self.entry.shared.expires_at.load(Ordering::SeqCst) {
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
        let mut ended = self.entry.shared.ended.lock();
        while ended.is_none() {
            match deadline {
                Some(d) => {
                    if self
                        .entry
                        .shared
                        .ended_cv
                        .wait_until(&mut ended, d)
                        .timed_out()
                    {
                        return ended.is_some();
                    }
                }
                None => self.entry.shared.ended_cv.wait(&mut ended),
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
            if let Some(mut phase) = self.entry.phase.try_lock() {
                if let Phase::Running(t) = &mut *phase {
                    std::mem::forget(t.take());
                }
            }
            return self.report(None);
        }
        let shared = &self.entry.shared;
        {
            let mut stopped = shared.stopped.lock();
            *stopped = true;
            shared.wake.notify_all();
        }
        let was = std::mem::replace(&mut *self.entry.phase.lock(), Phase::Stopped);
        match was {
            Phase::Waiting(key) => {
                if let Some(key) = key {
                    self.entry.renewals.remove(&key);
                }
                shared.end(None);
            }
            Phase::Running(Some(t)) => {
                if self.wait_end(STOP_WAIT) {
                    let _ = t.join();
                } // else: detached; it ends after its renewal
            }
            Phase::Running(None) => {
                // Renewing on the timer's thread (no thread to be had).
                self.wait_end(STOP_WAIT);
            }
            Phase::Stopped => {}
        }
        self.report(self.entry.shared.ended.lock().flatten())
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

impl super::QuickDrop for KeepAlive {
    /// Stopped, or never past the timer: no renewal thread to wait for.
    fn drops_quickly(&self) -> bool {
        self.pid == std::process::id()
            && self
                .entry
                .phase
                .try_lock()
                .is_some_and(|p| matches!(*p, Phase::Waiting(_) | Phase::Stopped))
    }
}

/// The renewal period: `every` (default: a third of `length`), positive and
/// shorter than `length`.
pub(crate) fn every_within(length: Duration, every: Option<Duration>) -> Result<Duration> {
    let every = every.unwrap_or(length / crate::defaults::RENEW_DIVISOR);
    if every.is_zero() || every >= length {
        return Err(Error::invalid(format!(
            "every must be positive and shorter than the lease ({length:?}), got {every:?}"
        )));
    }
    Ok(every)
}

impl Due for Entry {
    fn start_renewing(self: Arc<Self>) {
        let mut phase = self.phase.lock();
        if !matches!(*phase, Phase::Waiting(_)) {
            return; // stopped meanwhile
        }
        let me = Arc::clone(&self);
        match std::thread::Builder::new()
            .name("honker-keepalive".into())
            .spawn(move || me.beat())
        {
            Ok(t) => *phase = Phase::Running(Some(t)),
            Err(_) => {
                // No thread to be had: renew here, and wait again.
                *phase = Phase::Running(None);
                drop(phase);
                let ended = self.renew_once();
                let mut phase = self.phase.lock();
                if !matches!(*phase, Phase::Running(None)) {
                    // Stopped meanwhile (`stop` waits for this end).
                    self.shared.end(ended.flatten());
                    return;
                }
                let again = match ended {
                    Some(ended_by) => Err(ended_by),
                    None => self
                        .renewals
                        .add(first_due(self.every), Arc::clone(&self) as Arc<dyn Due>)
                        .map_err(|e| Some(e.kind())),
                };
                match again {
                    Ok(key) => *phase = Phase::Waiting(Some(key)),
                    Err(ended_by) => {
                        *phase = Phase::Stopped;
                        self.shared.end(ended_by);
                    }
                }
            }
        }
    }
}

impl Entry {
    /// Renews now and then every `every` until stopped or ended.
    fn beat(&self) {
        let shared = &self.shared;
        let mut next = Instant::now();
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
            next = Instant::now() + self.every;
            if let Some(ended_by) = self.renew_once() {
                break ended_by;
            }
        };
        shared.end(ended_by);
    }

    /// One renewal; `Some(why)` if the renewals end here (`why` the error).
    fn renew_once(&self) -> Option<Option<ErrorKind>> {
        let shared = &self.shared;
        match (self.renew)() {
            Ok(expires_at) => {
                shared.expires_at.store(expires_at, Ordering::SeqCst);
                shared.beats.fetch_add(1, Ordering::SeqCst);
                None
            }
            Err(e) => match e.kind() {
                ErrorKind::LeaseLost | ErrorKind::NotFound => {
                    shared.lost.store(true, Ordering::SeqCst);
                    if let Some(tell) = &self.on_loss {
                        tell();
                    }
                    Some(Some(e.kind()))
                }
                ErrorKind::Closed | ErrorKind::Unsafe => Some(Some(e.kind())),
                // BUSY and the like: the next beat tries again.
                _ => None,
            },
        }
    }
}

impl Shared {
    /// Records how the renewals ended (the first end wins) and wakes
    /// `wait_end`.
    fn end(&self, ended_by: Option<ErrorKind>) {
        let mut ended = self.ended.lock();
        if ended.is_none() {
            *ended = Some(ended_by);
        }
        self.ended_cv.notify_all();
    }
}
