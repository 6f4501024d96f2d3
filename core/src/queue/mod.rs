//! [`Queue`]: a durable job queue with leases, retries and dead letters.
//!
//! Semantics are **at-least-once**: a worker that dies after its side effect
//! and before its ack sees the job again once the lease lapses. Make handlers
//! idempotent (dedupe keys, stable job ids, or ack inside the transaction that
//! records the effect with [`Queue::ack_tx`]).
//!
//! Every write verb has a `_tx` twin that runs inside a caller's
//! [`Transaction`](crate::Transaction); the plain form runs in a transaction of its own. Input is
//! validated before anything is written, and a verb that fails changes
//! nothing.

#[cfg(feature = "rusqlite")]
mod handle;
pub mod metrics;
pub(crate) mod ops;
#[cfg(feature = "rusqlite")]
pub(crate) mod retention;
pub(crate) mod sqlfn;
pub mod statements;
mod types;

#[cfg(feature = "rusqlite")]
pub use handle::Queue;
pub(crate) use ops::stored_options;
#[cfg(feature = "rusqlite")]
pub use types::Job;
pub(crate) use types::Unique;
pub use types::{
    ClaimOptions, Concurrency, EnqueueOptions, Enqueued, Fairness, JobInfo, JobState, Lease, Pause,
    PauseOptions, QueueStats, RetryNow, RetryOptions, UniqueMode,
};
