//! Time. Every timestamp honker stores is INTEGER milliseconds since the Unix
//! epoch, read from a [`Clock`] given in [`Options`](crate::Options), so tests
//! move time with a [`ManualClock`] instead of sleeping.
//!
//! Invariant: logic never calls `SystemTime::now()` directly; only
//! [`SystemClock`] does.

use std::fmt;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A source of wall-clock time in milliseconds since the Unix epoch.
pub trait Clock: Send + Sync + fmt::Debug {
    /// Milliseconds since 1970-01-01T00:00:00Z.
    fn now_ms(&self) -> i64;
}

/// The real clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0)
    }
}

/// A clock that only moves when told to. Clones share the same time.
///
/// ```
/// use honker_engine::{Clock, ManualClock};
/// use std::time::Duration;
/// let clock = ManualClock::new(1_000);
/// clock.advance(Duration::from_secs(2));
/// assert_eq!(clock.now_ms(), 3_000);
/// ```
#[derive(Clone, Debug, Default)]
pub struct ManualClock {
    now: Arc<AtomicI64>,
}

impl ManualClock {
    /// A clock reading `now_ms`.
    pub fn new(now_ms: i64) -> ManualClock {
        ManualClock {
            now: Arc::new(AtomicI64::new(now_ms)),
        }
    }

    /// A clock starting at the real current time.
    pub fn starting_now() -> ManualClock {
        ManualClock::new(SystemClock.now_ms())
    }

    /// The latest time a clock given by a binding may read: the last
    /// millisecond of the year 9999. Every expiry honker computes (now plus
    /// a lease, a TTL of up to 30 days, a delay of up to 100 years) then
    /// stays far inside `i64`; a clock near `i64::MAX` made them saturate,
    /// so a lock granted for 60 s had lapsed at once.
    pub const MAX_MS: i64 = 253_402_300_799_999;

    /// [`ManualClock::new`] for a time from outside (a binding's test
    /// clock): `INVALID_ARGUMENT` unless 0 ≤ `now_ms` ≤ [`MAX_MS`](Self::MAX_MS).
    pub fn checked(now_ms: i64) -> crate::Result<ManualClock> {
        Self::check("a ManualClock's time", now_ms)?;
        Ok(ManualClock::new(now_ms))
    }

    /// [`set`](Self::set) for a time from outside: `INVALID_ARGUMENT`, and
    /// the clock unchanged, unless 0 ≤ `now_ms` ≤ [`MAX_MS`](Self::MAX_MS).
    pub fn try_set(&self, now_ms: i64) -> crate::Result<()> {
        Self::check("a ManualClock's time", now_ms)?;
        self.set(now_ms);
        Ok(())
    }

    fn check(what: &str, ms: i64) -> crate::Result<i64> {
        if !(0..=Self::MAX_MS).contains(&ms) {
            return Err(crate::Error::invalid(format!(
                "{what} must be between 1970 and the end of 9999 (0 to {} ms since the Unix \
                 epoch), got {ms} ms",
                Self::MAX_MS
            )));
        }
        Ok(ms)
    }

    /// Move time forward by `by`.
    pub fn advance(&self, by: Duration) {
        self.now.fetch_add(duration_ms(by), Ordering::SeqCst);
    }

    /// [`advance`](Self::advance) for a binding: `INVALID_ARGUMENT`, and
    /// the clock unchanged, if it would pass [`MAX_MS`](Self::MAX_MS).
    pub fn try_advance(&self, by: Duration) -> crate::Result<()> {
        let by = duration_ms(by);
        self.now
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |now| {
                let next = now.saturating_add(by);
                (next <= Self::MAX_MS).then_some(next)
            })
            .map(|_| ())
            .map_err(|now| {
                crate::Error::invalid(format!(
                    "advancing a ManualClock at {now} ms by {by} ms passes the end of 9999 \
                     ({} ms)",
                    Self::MAX_MS
                ))
            })
    }

    /// Set the time to `now_ms` (may go backwards, to test clock skew).
    pub fn set(&self, now_ms: i64) {
        self.now.store(now_ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.now.load(Ordering::SeqCst)
    }
}

/// From `now` to `t` (both ms since the epoch); zero once `t` has come.
pub fn ms_until(t: i64, now: i64) -> Duration {
    Duration::from_millis(u64::try_from(t.saturating_sub(now)).unwrap_or(0))
}

/// How long a look that found nothing now waits for the time `t` it found
/// (a job's due time, a rate limit's next start): at least a millisecond,
/// never "now". A time at or before `now` (a rate limit's next start
/// rounded down to the millisecond) means "look again", not "take": a take
/// there would be an empty write transaction.
pub fn look_again_in(t: i64, now: i64) -> Duration {
    ms_until(t, now).max(Duration::from_millis(1))
}

/// A duration in whole milliseconds, saturating at `i64::MAX`.
pub fn duration_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bindings_clock_stays_between_1970_and_9999() {
        assert!(ManualClock::checked(-1).is_err());
        assert!(ManualClock::checked(i64::MAX).is_err());
        assert!(ManualClock::checked(ManualClock::MAX_MS + 1).is_err());
        let c = ManualClock::checked(ManualClock::MAX_MS - 10).unwrap();
        c.try_advance(Duration::from_millis(10)).unwrap();
        assert_eq!(c.now_ms(), ManualClock::MAX_MS);
        let e = c.try_advance(Duration::from_millis(1)).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument);
        assert_eq!(c.now_ms(), ManualClock::MAX_MS, "unchanged");
        assert!(c.try_advance(Duration::MAX).is_err());
        assert!(c.try_set(-1).is_err() && c.try_set(i64::MAX).is_err());
        assert_eq!(c.now_ms(), ManualClock::MAX_MS, "unchanged");
        c.try_set(5).unwrap();
        assert_eq!(c.now_ms(), 5);
    }
}
