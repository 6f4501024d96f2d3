//! Rate limits (ADR 23): `db.rate_limiter(name, limit)`.
//!
//! GCRA: one row per key in use (its theoretical arrival time), one check
//! per call in one write transaction, no window rows piling up, µs inside
//! and ms outside. `limit` calls per `per`, `burst` of them at once after a
//! key idled; in every half-open window of length `per` a key admits at
//! most `limit + burst − 1` calls (with the default `burst` 1, exactly
//! `limit`: no doubling at a window's edge). A limiter's parameters are
//! settings rows, shared by every process and language. A check inside a
//! transaction that rolls back refunds itself. Keys fully refilled are
//! removed by maintenance in batches.

pub(crate) mod blocks;
#[cfg(feature = "rusqlite")]
mod handle;
pub(crate) mod ops;
pub(crate) mod sqlfn;
pub mod statements;
mod types;

#[cfg(feature = "rusqlite")]
pub use handle::{RateLimiter, RateWait};
pub use types::{RateDecision, RateLimit, MAX_COUNT, MAX_PER};
