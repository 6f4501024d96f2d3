//! [`HeldLock`]: a lock held by a block of work, renewed while it runs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::{Cancel, KeepAlive};
use crate::error::Result;
use crate::lock::{Lock, LockGrant};
use crate::transaction::Transaction;

/// A lock held for a block of work: the grant, its renewal (a
/// [`KeepAlive`]: every third of the TTL unless told), and the release at
/// the end. Every surface's idiom (`with lock.hold(...)`, `await using`,
/// `withLock`) is this object, so the meaning is the same everywhere:
///
/// - while the block runs, the lock is renewed; a transient failure is
///   tried again at the next beat;
/// - if the lock is lost (the holder was paused past its TTL and another
///   owner took it; it was released elsewhere), renewal stops,
///   [`lost`](Self::lost) turns true and [`wait_lost`](Self::wait_lost)
///   returns: the host tells the block (Python's `lost`, a cancelled task,
///   an aborted `AbortSignal`), and the block's fenced writes fail with
///   `LEASE_LOST` whatever it does;
/// - [`release`](Self::release) (and dropping it) stops the renewal and
///   releases the lock if the token still holds it.
#[derive(Debug)]
pub struct HeldLock {
    lock: Lock,
    grant: LockGrant,
    keep: KeepAlive,
    released: AtomicBool,
    /// A host watches for the loss as a [`Source`](crate::Source) (on its
    /// event loop, woken by the file's signal): `release` pokes the signal
    /// so that the watch ends with the hold.
    watched: AtomicBool,
}

impl HeldLock {
    /// Takes `lock` for `owner` (waiting up to `wait` for it to come free;
    /// `wait` zero tries once) and starts renewing it to `ttl` every `every`
    /// (default a third of `ttl`,
    /// [`RENEW_DIVISOR`](crate::defaults::RENEW_DIVISOR)). `None` if it was
    /// not free in time, or `cancel` was set meanwhile.
    pub fn acquire(
        lock: &Lock,
        owner: &str,
        ttl: Duration,
        wait: Duration,
        every: Option<Duration>,
        cancel: Option<&Cancel>,
    ) -> Result<Option<HeldLock>> {
        // Checked before taking the lock, so a bad `every` takes nothing.
        if every.is_some() {
            crate::lock::check_ttl(ttl)?;
            super::keepalive::every_within(ttl, every)?;
        }
        let grant = match cancel {
            Some(c) => c.acquire_lock(lock, owner, ttl, wait)?,
            None => lock.acquire(owner, ttl, wait)?,
        };
        let Some(grant) = grant else {
            return Ok(None);
        };
        match KeepAlive::start_lock(lock, grant.token, ttl, every) {
            Ok(keep) => Ok(Some(HeldLock {
                lock: lock.clone(),
                grant,
                keep,
                released: AtomicBool::new(false),
                watched: AtomicBool::new(false),
            })),
            Err(e) => {
                let _ = lock.release(grant.token);
                Err(e)
            }
        }
    }

    /// The lock.
    pub fn lock(&self) -> &Lock {
        &self.lock
    }

    /// The fencing token of this hold.
    pub fn token(&self) -> i64 {
        self.grant.token
    }

    /// When the lock lapses unless renewed again (ms): the grant's expiry,
    /// or the last renewal's.
    pub fn expires_at(&self) -> i64 {
        self.keep
            .lease_expires_at()
            .unwrap_or(self.grant.expires_at)
    }

    /// Whether the lock was lost while held (renewal found another holder).
    pub fn lost(&self) -> bool {
        self.keep.lost()
    }

    /// Renewals that succeeded.
    pub fn renewals(&self) -> u64 {
        self.keep.beats()
    }

    /// How often the lock is renewed: a loss can be found no sooner than
    /// this after the hold began (a host that watches on a thread of its
    /// own starts the watch then).
    pub fn renew_every(&self) -> Duration {
        self.keep.every()
    }

    /// Blocks until the lock is lost (`true`), or the hold ends otherwise —
    /// released, a closed database — or `timeout` passes (`false`). Hosts
    /// wait here, off their event loop, to tell the block.
    pub fn wait_lost(&self, timeout: Duration) -> bool {
        self.keep.wait_end(timeout) && self.keep.lost()
    }

    /// [`Lock::fence`] with this hold's token: inside the write transaction
    /// `tx`, `LEASE_LOST` once the lock is no longer this hold's.
    pub fn fence(&self, tx: &Transaction) -> Result<()> {
        self.lock.fence(tx, self.grant.token)
    }

    /// Stops the renewal and releases the lock; whether this hold still held
    /// it (false once lost). Idempotent: a second call releases nothing.
    pub fn release(&self) -> Result<bool> {
        if self.released.swap(true, Ordering::SeqCst) {
            return Ok(false);
        }
        let report = self.keep.stop();
        if self.watched.load(Ordering::SeqCst) {
            self.lock.database().poke(); // the loss watch ends with the hold
        }
        if report.lost {
            return Ok(false);
        }
        self.lock.release(self.grant.token)
    }

    /// Whether [`release`](Self::release) was called.
    pub fn is_released(&self) -> bool {
        self.released.load(Ordering::SeqCst)
    }
}

impl HeldLock {
    /// Lost (set before the renewal pokes the signal), released, or its
    /// renewals ended otherwise (a closed database).
    fn has_ended(&self) -> bool {
        self.lost() || self.is_released() || self.keep.wait_end(Duration::ZERO)
    }
}

/// The loss watch that holds no thread: the look is now once the hold has
/// ended (lost, released, or its database closed), else at a commit (the
/// renewal that finds the loss pokes the file's signal, and so does
/// `release` once a watch began); the take says whether it was lost.
impl crate::Source for HeldLock {
    type Item = bool;

    fn look(&self) -> Result<Option<Duration>> {
        self.watched.store(true, Ordering::SeqCst);
        Ok(self.has_ended().then_some(Duration::ZERO))
    }

    fn take(&self) -> Result<Option<bool>> {
        Ok(self.has_ended().then(|| self.lost()))
    }
}

impl Drop for HeldLock {
    /// Releases the lock if nobody did (in a forked child the database
    /// refuses to be used, `UNSAFE`, so the parent's hold is left alone).
    fn drop(&mut self) {
        if !self.is_released() {
            let _ = self.release();
        }
    }
}

impl super::QuickDrop for HeldLock {
    /// Released: nothing is left to write or join.
    fn drops_quickly(&self) -> bool {
        self.is_released() && self.keep.drops_quickly()
    }
}
