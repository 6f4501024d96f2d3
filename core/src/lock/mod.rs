//! Named locks with fencing tokens (ADR 22): `db.lock(name)`.
//!
//! A lock is held by an owner until it is released or its TTL lapses. Each
//! grant returns a **fencing token** greater than every earlier grant's (one
//! counter for the file), so a holder that was paused past its TTL wakes up
//! with a stale token. Because the lock lives in the same file as the data
//! it protects, the fence is enforced, not just advised:
//! [`Lock::fence`] (SQL: `honker_lock_fence`) inside the write transaction
//! refuses a stale token with `LEASE_LOST`, and nothing can change the lock
//! before that transaction commits. A lapsed lock that nobody took yet is
//! still its holder's (renew and fence honour it, as leases do: DESIGN §14).

#[cfg(feature = "rusqlite")]
mod handle;
pub(crate) mod ops;
pub(crate) mod sqlfn;
pub mod statements;
mod types;

#[cfg(feature = "rusqlite")]
pub use handle::Lock;
#[cfg(feature = "rusqlite")]
pub(crate) use types::{token as check_token, ttl_ms as check_ttl};
pub use types::{AcquireOptions, LockGrant, LockInfo, MAX_TTL};
