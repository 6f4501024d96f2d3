//! A limiter's parameters, bounds and answers.

use std::time::Duration;

use crate::error::{Error, Result};

/// The largest `limit` and `burst`.
pub const MAX_COUNT: i64 = 1_000_000_000;
/// The longest `per` (366 days); the shortest is 1 ms.
pub const MAX_PER: Duration = Duration::from_secs(366 * 86_400);

/// A limiter's parameters: at most `limit` calls per `per`, of which up to
/// `burst` at once after a key idled (GCRA: one call refills every
/// `per / limit`). In every half-open window of length `per`, a key admits
/// at most `limit + burst − 1` calls; with the default `burst = 1`, at
/// most `limit`, with no doubling at any window's edge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimit {
    /// Calls per `per`, sustained.
    pub limit: i64,
    /// The period.
    pub per: Duration,
    /// Calls a key admits at once after idling (the most one call may
    /// cost). Default 1.
    pub burst: i64,
}

impl RateLimit {
    /// `limit` calls per `per`, `burst` 1.
    pub fn new(limit: i64, per: Duration) -> RateLimit {
        RateLimit {
            limit,
            per,
            burst: 1,
        }
    }

    /// With `burst` calls at once after idling.
    pub fn burst(self, burst: i64) -> RateLimit {
        RateLimit { burst, ..self }
    }

    /// Checks the bounds: `limit` and `burst` 1 to 10⁹, `per` 1 ms to 366
    /// days, whole milliseconds.
    pub fn check(&self) -> Result<()> {
        if !(1..=MAX_COUNT).contains(&self.limit) {
            return Err(Error::invalid(format!(
                "a rate limit's limit must be between 1 and {MAX_COUNT}, got {}",
                self.limit
            )));
        }
        if !(1..=MAX_COUNT).contains(&self.burst) {
            return Err(Error::invalid(format!(
                "a rate limit's burst must be between 1 and {MAX_COUNT}, got {}",
                self.burst
            )));
        }
        if self.per < Duration::from_millis(1) || self.per > MAX_PER {
            return Err(Error::invalid(format!(
                "a rate limit's per must be between 1 ms and {} days, got {} ms",
                MAX_PER.as_secs() / 86_400,
                self.per.as_millis()
            )));
        }
        if !self.per.subsec_nanos().is_multiple_of(1_000_000) {
            return Err(Error::invalid(format!(
                "a rate limit's per is whole milliseconds, got {:?}",
                self.per
            )));
        }
        Ok(())
    }

    /// The period in ms.
    pub(crate) fn per_ms(&self) -> i64 {
        self.per.as_millis() as i64
    }

    /// The emission interval `per / limit` in µs, rounded up (a limit a
    /// fraction of a µs stricter than asked, never looser).
    pub(crate) fn interval_us(&self) -> i64 {
        let per_us = i128::from(self.per_ms()) * 1000;
        let limit = i128::from(self.limit);
        ((per_us + limit - 1) / limit) as i64
    }

    /// The delay tolerance `burst × interval` in µs, saturated at about
    /// 73,000 years (a `burst` of 10⁹ on a 366-day `per` with `limit` 1).
    pub(crate) fn tolerance_us(&self) -> i64 {
        (i128::from(self.burst) * i128::from(self.interval_us())).min(i128::from(i64::MAX / 4))
            as i64
    }
}

/// Checks a call's cost: 0 (a peek) up to the limiter's `burst`.
pub(crate) fn cost(cost: i64, limit: &RateLimit) -> Result<i64> {
    if cost < 0 || cost > limit.burst {
        return Err(Error::invalid(format!(
            "a call's cost must be between 0 and the limiter's burst ({}), got {cost}{}",
            limit.burst,
            if cost > limit.burst {
                ": it could never be allowed"
            } else {
                ""
            }
        )));
    }
    Ok(cost)
}

/// The full answer to a check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateDecision {
    /// Whether the call is allowed (and its cost taken).
    pub allowed: bool,
    /// The limiter's `limit`.
    pub limit: i64,
    /// Calls of cost 1 the key would admit now, after this one.
    pub remaining: i64,
    /// How long until this call would be allowed (zero when allowed).
    pub retry_after: Duration,
    /// How long until the key is fully refilled (`burst` calls at once).
    pub reset_after: Duration,
}
