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
/// use honker::{Clock, ManualClock};
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

    /// Move time forward by `by`.
    pub fn advance(&self, by: Duration) {
        self.now.fetch_add(duration_ms(by), Ordering::SeqCst);
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
pub(crate) fn ms_until(t: i64, now: i64) -> Duration {
    Duration::from_millis(u64::try_from(t.saturating_sub(now)).unwrap_or(0))
}

/// A duration in whole milliseconds, saturating at `i64::MAX`.
pub(crate) fn duration_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}
