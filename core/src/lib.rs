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
//! Start with [`Database::open`], then [`Database::queue`]. The other
//! primitives open the same way: [`Database::stream`] (durable streams with
//! consumer offsets and consumer groups), [`Database::notify`] and
//! [`Database::listen`] (pub/sub), [`Database::lock`] (locks with fencing
//! tokens), [`Database::rate_limiter`] and [`Database::scheduler`]; the loops
//! that wait, renew and run handlers are in [`runtime`], the worker runtime
//! among them. Errors carry a stable [`ErrorKind`] code.

//! ## Threads and async runtimes
//!
//! Every call blocks its thread (SQLite does). With tokio, run honker calls
//! in `spawn_blocking`. [`Database::transaction`] belongs to the calling
//! thread: another write on that thread that does not pass it fails at once
//! with `INVALID_ARGUMENT` instead of waiting for itself. A transaction held
//! by an async task across `.await` (a payment API call between two writes)
//! is [`Database::transaction_detached`]: it is `Send`, its calls run in
//! `spawn_blocking` like any other, other tasks' writes wait for it (each on
//! its blocking thread) up to the busy timeout, and a write of the same task
//! that forgets to pass it waits for itself until the busy timeout, then
//! fails with `BUSY`: pass the transaction.
//!
//! ## Features
//!
//! - `bundled` (default): honker's own SQLite compiled in, with (on Linux)
//!   the lock layer that lets it share a file with another SQLite library in
//!   the process (ADR 13). Implies `rusqlite`.
//! - `rusqlite`: the [`Database`] API, on connections that honker opens
//!   itself. Alone (`default-features = false, features = ["rusqlite"]`) it
//!   links the system's `libsqlite3` (3.39 or newer) and shares it with the
//!   rest of the process: the Swift package's mode (ADR 18). Without either,
//!   the crate is only the protocol and the SQL functions over the raw
//!   SQLite API: what the loadable extension (`extension/`) builds on.

// In the protocol-only build (the extension) parts of the protocol serve
// only the Database API.
#![cfg_attr(not(feature = "rusqlite"), allow(dead_code))]

#[cfg(feature = "rusqlite")]
pub mod backup;
pub mod channel;
#[cfg(feature = "rusqlite")]
mod database;
pub mod defaults;
#[cfg(feature = "rusqlite")]
pub mod doctor;
pub mod import;
#[cfg(feature = "rusqlite")]
pub mod inspect;
pub mod lock;
#[cfg(feature = "rusqlite")]
mod maintenance;
#[cfg(feature = "rusqlite")]
mod open;
mod options;
pub mod queue;
pub mod rate;
#[cfg(feature = "rusqlite")]
pub mod runtime;
pub mod schedule;
pub mod schema;
pub mod sql;
mod sqlfn;
pub mod stream;
pub mod surface;
mod trace;
pub mod validate;

// The engine's modules, under the paths the layers above use
// (`crate::raw::Conn`, `crate::transaction::Transaction`, …).
#[cfg(all(feature = "bundled", target_os = "linux"))]
use honker_engine::ofd;
use honker_engine::{clock, error, payload, raw, settings, watcher};
#[cfg(feature = "rusqlite")]
use honker_engine::{connection, fork, fsaccess, readiness, transaction};

pub use clock::{Clock, ManualClock, SystemClock};
#[cfg(feature = "rusqlite")]
pub use connection::{set_waiting_forbidden, waiting_forbidden, without_waiting};
#[cfg(feature = "rusqlite")]
pub use database::Database;
pub use error::{Error, ErrorKind, Result};
#[cfg(feature = "rusqlite")]
pub use fork::forked_while_open;
/// One way to wait: a [`Source`]'s look and take, paced by [`Pace`]
/// ([`Database::wait_for`](honker_engine::Database::wait_for) blocks; the
/// hosts' event loops run the same steps).
pub use honker_engine::wait::{Pace, Parts, Reads, Source};
#[cfg(feature = "rusqlite")]
pub use honker_engine::Rows;
#[cfg(feature = "rusqlite")]
pub use maintenance::MaintenanceReport;
#[cfg(all(feature = "bundled", target_os = "linux"))]
pub use ofd::active as ofd_locks_active;
pub use options::{
    limits, Backoff, Durability, Options, OptionsPatch, QueueOptions, QueueSettings, Retention,
};
pub use payload::Payload;
pub use queue::{
    ClaimOptions, Concurrency, EnqueueOptions, Enqueued, Fairness, JobInfo, JobState, Lease, Pause,
    PauseOptions, QueueStats, RetryOptions, UniqueMode,
};
#[cfg(feature = "rusqlite")]
pub use queue::{Job, Queue};
#[doc(hidden)]
pub use raw::vm_steps_on_this_thread;
#[cfg(feature = "rusqlite")]
pub use readiness::Readiness;
pub use trace::{TraceContext, MAX_TRACESTATE};
#[cfg(feature = "rusqlite")]
pub use transaction::Transaction;
#[cfg(feature = "rusqlite")]
#[doc(hidden)]
pub use watcher::{watcher_context_switches, watcher_parks};

/// The rusqlite version honker is built on, for parameters and values.
#[cfg(feature = "rusqlite")]
pub use rusqlite;
#[cfg(feature = "rusqlite")]
pub use rusqlite::types::Value;

/// The README's Rust examples, compiled and run as doc-tests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;
