//! The lock's records and bounds.

use std::time::Duration;

use crate::error::{Error, Result};

/// The longest TTL (30 days); the shortest is 1 ms.
pub const MAX_TTL: Duration = Duration::from_secs(30 * 86_400);

/// Checks a TTL: 1 ms to [`MAX_TTL`]; returns it in ms.
pub(crate) fn ttl_ms(ttl: Duration) -> Result<i64> {
    if ttl < Duration::from_millis(1) || ttl > MAX_TTL {
        return Err(Error::invalid(format!(
            "a lock's ttl must be between 1 ms and {} days, got {} ms",
            MAX_TTL.as_secs() / 86_400,
            ttl.as_millis()
        )));
    }
    Ok(ttl.as_millis() as i64)
}

/// Checks a fencing token: positive.
pub(crate) fn token(token: i64) -> Result<i64> {
    if token <= 0 {
        return Err(Error::invalid(format!(
            "a fencing token is positive, got {token}"
        )));
    }
    Ok(token)
}

/// What an acquire takes besides its owner (the options table's
/// `LockArgs`, `Lock.try_acquire` in every binding).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AcquireOptions {
    /// How long the grant lasts unless renewed (1 ms to [`MAX_TTL`]).
    pub ttl: Duration,
}

impl Default for AcquireOptions {
    fn default() -> AcquireOptions {
        AcquireOptions {
            ttl: crate::defaults::LOCK_TTL,
        }
    }
}

/// What an acquire granted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LockGrant {
    /// The fencing token: greater than every earlier grant's, for any name.
    pub token: i64,
    /// When the lock lapses unless renewed (ms since the epoch).
    pub expires_at: i64,
}

/// A lock's holder, as [`Lock::info`](crate::lock::Lock::info) reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockInfo {
    /// The lock's name.
    pub name: String,
    /// Who holds it.
    pub owner: String,
    /// The holder's fencing token.
    pub token: i64,
    /// When it was granted (ms since the epoch).
    pub acquired_at: i64,
    /// When it lapses unless renewed (ms; in the past: lapsed, and free to
    /// take, though still its holder's until someone does).
    pub expires_at: i64,
}
