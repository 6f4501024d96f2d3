//! The [`RateLimiter`] handle (`db.rate_limiter(name, limit)`): each check
//! reads the limiter's stored parameters and updates its key in one write
//! transaction (its own or the caller's). A handle remembers the parameters
//! it read until the file changes under it ([`Remembered`]), so a check
//! made again and again runs one statement.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::ops;
use super::types::{self, RateDecision, RateLimit};
use crate::database::Database;
use crate::error::{Error, Result};
use crate::transaction::Transaction;
use crate::validate;

impl Database {
    /// A handle on the rate limiter `name` with parameters `limit`, stored
    /// in the file for every process on first use. If the file holds other
    /// parameters for `name`, `INVALID_ARGUMENT` (nothing changes): open it
    /// with the stored values ([`rate_limiter_stored`](Self::rate_limiter_stored)),
    /// or update them for every process ([`rate_limiter_update`](Self::rate_limiter_update)).
    pub fn rate_limiter(&self, name: &str, limit: RateLimit) -> Result<RateLimiter> {
        self.rate_limiter_with(name, limit, false)
    }

    /// [`rate_limiter`](Self::rate_limiter) that stores `limit` for every
    /// process, replacing what was stored (keys keep their state: a key
    /// that used its burst is not refilled by the change).
    pub fn rate_limiter_update(&self, name: &str, limit: RateLimit) -> Result<RateLimiter> {
        self.rate_limiter_with(name, limit, true)
    }

    /// A handle on the rate limiter `name` as stored in the file (by any
    /// process); `NOT_FOUND` if it was never opened with parameters.
    pub fn rate_limiter_stored(&self, name: &str) -> Result<RateLimiter> {
        validate::name("rate limiter", name)?;
        let reader = self.inner.reader()?;
        if ops::params(reader.raw(), name)?.is_none() {
            return Err(not_found(name));
        }
        Ok(RateLimiter::new(self, name))
    }

    fn rate_limiter_with(&self, name: &str, limit: RateLimit, update: bool) -> Result<RateLimiter> {
        validate::name("rate limiter", name)?;
        limit.check()?;
        // The usual case (stored and equal) is a read; a write only to store.
        let stored = {
            let reader = self.inner.reader()?;
            ops::params(reader.raw(), name)?
        };
        if stored != Some(limit) {
            self.inner.write(None, |conn, now| {
                ops::adopt(conn.raw(), name, &limit, update, now)
            })?;
        }
        Ok(RateLimiter::new(self, name))
    }
}

fn not_found(name: &str) -> Error {
    Error::not_found(format!(
        "rate limiter {name:?} has no parameters in this file (open it with a limit first)"
    ))
}

/// A handle on one rate limiter (GCRA, ADR 23). Cheap to clone, `Send +
/// Sync`. Keys are independent (one limit per customer, per address…);
/// the empty key is the limiter's own. A check inside a transaction that
/// rolls back refunds itself.
///
/// ```no_run
/// # fn main() -> honker::Result<()> {
/// use std::time::Duration;
/// use honker::rate::RateLimit;
/// let db = honker::Database::open("app.db")?;
/// let mail = db.rate_limiter("mail", RateLimit::new(100, Duration::from_secs(60)).burst(10))?;
/// let d = mail.try_acquire("customer-42", 1)?;
/// if !d.allowed {
///     println!("try again in {:?}", d.retry_after);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct RateLimiter {
    db: Database,
    name: Arc<str>,
    remembered: Arc<Mutex<Option<Remembered>>>,
}

/// The parameters a check read, and the writer connection's data version
/// they stay valid for: the version that check's own commit left. Any
/// other commit since — another connection's (seen when the next
/// transaction begins), or this connection's own (a parameter update
/// through SQL, any other write) — moves the version past it, and the next
/// check reads them again. Kept only after a check that wrote its key in
/// its own transaction: that commit is known to move the version by one.
#[derive(Clone, Copy, Debug)]
struct Remembered {
    version: u32,
    limit: RateLimit,
}

impl RateLimiter {
    fn new(db: &Database, name: &str) -> RateLimiter {
        RateLimiter {
            db: db.clone(),
            name: name.into(),
            remembered: Arc::default(),
        }
    }

    /// The limiter's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The database it is on.
    pub fn database(&self) -> &Database {
        &self.db
    }

    /// The parameters stored in the file (which every check uses).
    pub fn limit(&self) -> Result<RateLimit> {
        let reader = self.db.inner.reader()?;
        self.params(reader.raw(), false)
    }

    /// Checks `cost` calls (0 peeks: nothing is taken) for `key`; when
    /// allowed, they are taken. `cost` above the limiter's `burst` is
    /// `INVALID_ARGUMENT` (it could never be allowed).
    pub fn try_acquire(&self, key: &str, cost: i64) -> Result<RateDecision> {
        self.check_in(None, key, cost)
    }

    /// [`try_acquire`](Self::try_acquire) inside the caller's transaction:
    /// taken only if it commits (a rollback refunds it).
    pub fn try_acquire_tx(&self, tx: &Transaction, key: &str, cost: i64) -> Result<RateDecision> {
        self.check_in(Some(tx), key, cost)
    }

    fn check_in(&self, tx: Option<&Transaction>, k: &str, cost: i64) -> Result<RateDecision> {
        validate::key_or_empty("a rate limit key", k)?;
        if cost == 0 && tx.is_none() {
            // A peek writes nothing: a reader answers it.
            let reader = self.db.inner.reader()?;
            let conn = reader.raw();
            let limit = self.params(conn, false)?;
            types::cost(cost, &limit)?;
            return ops::check(conn, &self.name, k, &limit, cost, self.db.inner.now());
        }
        let own = tx.is_none();
        self.db.inner.write(tx, |conn, now| {
            let conn = conn.raw();
            let limit = self.params(conn, own)?;
            let cost = types::cost(cost, &limit)?;
            let d = ops::check(conn, &self.name, k, &limit, cost, now)?;
            // Its own commit moves the version by one, when it wrote.
            *self.remembered.lock() = (own && d.allowed && cost > 0)
                .then(|| conn.data_version())
                .flatten()
                .map(|v| Remembered {
                    version: v.wrapping_add(1),
                    limit,
                });
            Ok(d)
        })
    }

    /// The stored parameters: as remembered when nothing has changed the
    /// file since (in a check's own transaction), else read.
    fn params(&self, conn: crate::raw::Conn<'_>, own: bool) -> Result<RateLimit> {
        if own {
            let remembered = *self.remembered.lock();
            if let Some(r) = remembered {
                if conn.data_version() == Some(r.version) {
                    return Ok(r.limit);
                }
            }
        }
        ops::params(conn, &self.name)?.ok_or_else(|| not_found(&self.name))
    }

    /// [`try_acquire`](Self::try_acquire), checking again when its
    /// `retry_after` has passed while the answer would come within `wait`:
    /// the allowed decision, or the last refusal (at once when its
    /// `retry_after` lies beyond `wait`). A [`RateWait`], waited for as
    /// hosts' event loops wait for it.
    pub fn acquire(&self, key: &str, cost: i64, wait: Duration) -> Result<RateDecision> {
        match self.acquire_until(key, cost, wait, &|| false)? {
            Some(d) => Ok(d),
            None => self.try_acquire(key, cost), // unreached: nothing stops it
        }
    }

    /// [`acquire`](Self::acquire) that gives up (`None`) as soon as `stop`
    /// says so (asked at each wake-up: [`Cancel::acquire_rate`](crate::runtime::Cancel::acquire_rate)).
    pub(crate) fn acquire_until(
        &self,
        key: &str,
        cost: i64,
        wait: Duration,
        stop: &dyn Fn() -> bool,
    ) -> Result<Option<RateDecision>> {
        validate::delay("wait", wait)?;
        let w = RateWait::new(self, key, cost);
        let what = "a rate limiter's acquire with a wait";
        match self.db.inner.wait_for(&w, wait, stop, what)? {
            Some(d) => Ok(Some(d)),
            None if stop() => Ok(None),
            None => w.answer().map(Some),
        }
    }
}

/// A rate limiter's acquire with a wait, as a [`Source`](crate::Source):
/// a take is one [`try_acquire`](RateLimiter::try_acquire) (`None` when
/// refused), a look the time until the last refusal's `retry_after` has
/// passed. It ends early: a wait that could not last until then ends at
/// once. When it ends with nothing, [`answer`](Self::answer) is the acquire's
/// answer: the last refusal.
#[derive(Debug)]
pub struct RateWait {
    limiter: RateLimiter,
    key: String,
    cost: i64,
    /// The last refusal and when it came.
    refused: Mutex<Option<(RateDecision, Instant)>>,
}

impl RateWait {
    /// An acquire of `cost` calls for `key` (checked at the first take).
    pub fn new(limiter: &RateLimiter, key: &str, cost: i64) -> RateWait {
        RateWait {
            limiter: limiter.clone(),
            key: key.to_owned(),
            cost,
            refused: Mutex::new(None),
        }
    }

    /// What an acquire whose wait got nothing answers: the last take's
    /// refusal, or one try now when it made none (stopped before it could).
    pub fn answer(&self) -> Result<RateDecision> {
        let refused = *self.refused.lock();
        match refused {
            Some((d, _)) => Ok(d),
            None => self.limiter.try_acquire(&self.key, self.cost),
        }
    }
}

impl crate::Source for RateWait {
    type Item = RateDecision;

    fn look(&self) -> Result<Option<Duration>> {
        Ok(Some(self.retry_in().unwrap_or(Duration::ZERO)))
    }

    fn take(&self) -> Result<Option<RateDecision>> {
        let d = self.limiter.try_acquire(&self.key, self.cost)?;
        if d.allowed {
            return Ok(Some(d));
        }
        *self.refused.lock() = Some((d, Instant::now()));
        Ok(None)
    }

    fn retry_in(&self) -> Option<Duration> {
        let refused = *self.refused.lock();
        refused.map(|(d, at)| d.retry_after.saturating_sub(at.elapsed()))
    }

    fn ends_early(&self) -> bool {
        true
    }
}
