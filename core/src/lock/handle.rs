//! The [`Lock`] handle (`db.lock(name)`): each verb validates, then runs
//! `ops` in a write transaction (its own or the caller's) or on a reader.

use std::sync::Arc;
use std::time::Duration;

use super::ops::{self, Reenter, Taken};
use super::types::{self, LockGrant, LockInfo};
use crate::database::Database;
use crate::error::Result;
use crate::transaction::Transaction;
use crate::validate;

impl Database {
    /// A handle on the named lock `name`. Creating the handle writes
    /// nothing.
    pub fn lock(&self, name: &str) -> Result<Lock> {
        validate::name("lock", name)?;
        Ok(Lock {
            db: self.clone(),
            name: name.into(),
        })
    }
}

/// A handle on one named lock. Cheap to clone, `Send + Sync`.
///
/// ```no_run
/// # fn main() -> honker::Result<()> {
/// use std::time::Duration;
/// let db = honker::Database::open("app.db")?;
/// let lock = db.lock("reindex")?;
/// if let Some(grant) = lock.try_acquire("worker-1", Duration::from_secs(30))? {
///     let tx = db.transaction()?;
///     lock.fence(&tx, grant.token)?; // LEASE_LOST once another holds it
///     tx.execute("UPDATE search_state SET done = 1", [])?;
///     tx.commit()?;
///     lock.release(grant.token)?;
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Lock {
    db: Database,
    name: Arc<str>,
}

impl Lock {
    /// The lock's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The database the lock lives in.
    pub fn database(&self) -> &Database {
        &self.db
    }

    /// Takes the lock for `owner` for `ttl` (1 ms to 30 days) if it is free
    /// or its holder's TTL lapsed: a grant with a new fencing token. `None`
    /// while any holder has it, one with the same owner name too: every
    /// acquire is its own holder, so two handlers or requests that name
    /// the same owner exclude each other (extend a grant with
    /// [`renew`](Self::renew)). `owner` is who the holder says it is, for
    /// operators ([`info`](Self::info), `honker locks`).
    pub fn try_acquire(&self, owner: &str, ttl: Duration) -> Result<Option<LockGrant>> {
        self.try_acquire_in(None, owner, ttl)
    }

    /// [`try_acquire`](Self::try_acquire) inside the caller's transaction:
    /// held only if it commits.
    pub fn try_acquire_tx(
        &self,
        tx: &Transaction,
        owner: &str,
        ttl: Duration,
    ) -> Result<Option<LockGrant>> {
        self.try_acquire_in(Some(tx), owner, ttl)
    }

    fn try_acquire_in(
        &self,
        tx: Option<&Transaction>,
        owner: &str,
        ttl: Duration,
    ) -> Result<Option<LockGrant>> {
        validate::name("owner", owner)?;
        let ttl = types::ttl_ms(ttl)?;
        let taken = self.db.inner.write(tx, |conn, now| {
            ops::take(conn.raw(), &self.name, owner, ttl, Reenter::No, now)
        })?;
        Ok(match taken {
            Taken::Granted(g) | Taken::Mine(g) => Some(g),
            Taken::Held => None,
        })
    }

    /// [`try_acquire`](Self::try_acquire), waiting up to `wait` for the lock
    /// to come free: it sleeps on the process's watcher (a release by any
    /// process wakes it) until then, or until the holder's TTL lapses, and
    /// checks read-only before taking the write lock. `None` when the wait
    /// ran out.
    pub fn acquire(&self, owner: &str, ttl: Duration, wait: Duration) -> Result<Option<LockGrant>> {
        self.acquire_until(owner, ttl, wait, &|| false)
    }

    /// [`acquire`](Self::acquire) that gives up (`None`) as soon as `stop`
    /// says so; `stop` is asked at each wake-up (a host's cancellation pokes
    /// the watcher: [`Cancel::acquire_lock`](crate::runtime::Cancel::acquire_lock)).
    pub(crate) fn acquire_until(
        &self,
        owner: &str,
        ttl: Duration,
        wait: Duration,
        stop: &dyn Fn() -> bool,
    ) -> Result<Option<LockGrant>> {
        validate::name("owner", owner)?;
        types::ttl_ms(ttl)?;
        validate::delay("wait", wait)?;
        let take = Take {
            lock: self,
            owner,
            ttl,
        };
        self.db
            .inner
            .wait_for(&take, wait, stop, "a lock's acquire with a wait")
    }

    /// Extends the lock held with `token` to now + `ttl`; returns the new
    /// expiry (ms). `LEASE_LOST` if that token no longer holds it (released,
    /// or taken by another after its TTL lapsed; a lapsed lock nobody took
    /// is still renewed).
    pub fn renew(&self, token: i64, ttl: Duration) -> Result<i64> {
        let token = types::token(token)?;
        let ttl = types::ttl_ms(ttl)?;
        self.db.inner.write(None, |conn, now| {
            ops::renew(conn.raw(), &self.name, token, ttl, now)
        })
    }

    /// Releases the lock held with `token`; whether it was held with it (a
    /// stale token releases nothing).
    pub fn release(&self, token: i64) -> Result<bool> {
        self.release_in(None, token)
    }

    /// [`release`](Self::release) inside the caller's transaction.
    pub fn release_tx(&self, tx: &Transaction, token: i64) -> Result<bool> {
        self.release_in(Some(tx), token)
    }

    fn release_in(&self, tx: Option<&Transaction>, token: i64) -> Result<bool> {
        let token = types::token(token)?;
        self.db
            .inner
            .write(tx, |conn, _| ops::release(conn.raw(), &self.name, token))
    }

    /// The fence: inside the write transaction `tx` that makes the guarded
    /// write, `Ok` while `token` holds the lock, else `LEASE_LOST` (roll the
    /// transaction back: a holder paused past its TTL must not clobber the
    /// new holder's work). Nothing can change the lock before `tx` commits.
    pub fn fence(&self, tx: &Transaction, token: i64) -> Result<()> {
        let token = types::token(token)?;
        self.db.inner.write(Some(tx), |conn, _| {
            ops::fence(conn.raw(), &self.name, token)
        })
    }

    /// How long until `owner` could take the lock, found with one read and
    /// no waiting: zero when it is free or lapsed, else
    /// until its holder's TTL lapses (a release by any process may come
    /// sooner). An event loop's wait: look, try on a thread when zero, else
    /// sleep on [`Database::readiness`](crate::Database::readiness) until a
    /// commit or that long. A reader not free at once is `BUSY` under
    /// [`without_waiting`](crate::without_waiting).
    pub fn free_in(&self, owner: &str) -> Result<Duration> {
        validate::name("owner", owner)?;
        let (free_at, now) = self.free_at()?;
        Ok(free_at.map_or(Duration::ZERO, |t| crate::clock::ms_until(t, now)))
    }

    /// When the holder's unlapsed TTL ends (`None`: free now), and the
    /// clock's now.
    fn free_at(&self) -> Result<(Option<i64>, i64)> {
        let now = self.db.inner.now();
        let free_at = match self.info()? {
            Some(h) if h.expires_at > now => Some(h.expires_at),
            _ => None,
        };
        Ok((free_at, now))
    }

    /// The holder, if any (lapsed or not).
    pub fn info(&self) -> Result<Option<LockInfo>> {
        let reader = self.db.inner.reader()?;
        ops::get(reader.raw(), &self.name)
    }
}

/// A lock's acquire with a wait, as the wait sees it: a look is when the
/// holder's TTL lapses (now when free), a take one try.
struct Take<'a> {
    lock: &'a Lock,
    owner: &'a str,
    ttl: Duration,
}

impl crate::Source for Take<'_> {
    type Item = LockGrant;

    fn look(&self) -> Result<Option<Duration>> {
        self.lock.free_in(self.owner).map(Some)
    }

    fn take(&self) -> Result<Option<LockGrant>> {
        self.lock.try_acquire(self.owner, self.ttl)
    }
}
