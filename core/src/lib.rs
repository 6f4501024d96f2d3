//! # honker
//!
//! Durable job queues inside your application's own SQLite file. No server:
//! the point is the **transactional outbox** — a job is written in the same
//! SQLite transaction as the business row that caused it, so both commit or
//! neither does.
//!
//! ```
//! # fn main() -> honker::Result<()> {
//! # let dir = tempfile::tempdir().unwrap();
//! use honker::{Database, EnqueueOptions};
//! use serde_json::json;
//!
//! let db = Database::open(dir.path().join("app.db"))?;
//! let emails = db.queue("emails")?;
//! emails.enqueue(json!({"to": "alice@example.com"}), &EnqueueOptions::default())?;
//!
//! for job in emails.claim("mailer-1", 32)? {
//!     // send the email, then:
//!     job.ack()?;
//! }
//! # Ok(()) }
//! ```
//!
//! Semantics are **at-least-once**: a worker that dies after its side effect
//! and before its ack sees the job again once its lease lapses. Make handlers
//! idempotent (dedupe keys, the job id as an idempotency key, or ack inside
//! the transaction that records the effect).
//!
//! Start with [`Database::open`], then [`Database::queue`]. Errors carry a
//! stable [`ErrorKind`] code.

mod clock;
mod connection;
mod database;
mod error;
mod maintenance;
mod options;
mod payload;
mod pool;
pub mod queue;
pub mod schema;
pub mod sql;
mod transaction;
pub mod validate;
mod watcher;

pub use clock::{Clock, ManualClock, SystemClock};
pub use database::{Database, Rows};
pub use error::{Error, ErrorKind, Result};
pub use maintenance::MaintenanceReport;
pub use options::{limits, Backoff, Durability, Options, QueueOptions, Retention};
pub use payload::Payload;
pub use queue::{
    ClaimOptions, EnqueueOptions, Enqueued, Job, JobInfo, JobState, Lease, Queue, QueueStats,
    RetryOptions,
};
pub use transaction::Transaction;

/// The rusqlite version honker is built on, for parameters and values.
pub use rusqlite;
pub use rusqlite::types::Value;

/// The README's Rust examples, compiled and run as doc-tests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;
