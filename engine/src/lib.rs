//! # honker-engine
//!
//! The part of honker that knows one SQLite file and nothing built on it:
//! honker's connections (the one writer, the readers) with their pragmas and
//! busy handler, the raw statement layer the protocol runs on, transactions,
//! background checkpoints, the watcher that turns commits into wake-ups, the
//! readiness descriptor, the migrations runner, the settings table, fork
//! safety and the lock layer that keeps two SQLite libraries apart.
//!
//! It imports no primitive (queues, streams, locks, ...): a crate of its own,
//! so that such an import fails to compile. What a primitive hangs on an open
//! database goes through what [`Database`] offers: a [`Batch`] that follows
//! the writer's transactions (the queue counters), a hook after commits
//! (maintenance), the [`Setup`] of `open` (migrations, a foreign file's
//! refusal, the SQL functions) and typed slots ([`Database::slot`]).
//! Applications use the crate `honker`, which re-exports what they need.

// The modules' documentation describes their internals too: it is
// honker's own crate, read by honker's developers.
#![allow(rustdoc::private_intra_doc_links)]
// In the protocol-only build (the extension) parts serve only the Database API.
#![cfg_attr(not(feature = "rusqlite"), allow(dead_code))]

#[cfg(feature = "rusqlite")]
pub mod checkpoint;
pub mod clock;
#[cfg(feature = "rusqlite")]
pub mod connection;
#[cfg(feature = "rusqlite")]
pub mod database;
pub mod error;
// Open calls it on Unixes without OFD locks; on Linux only its tests do.
#[cfg(all(unix, feature = "bundled"))]
#[cfg_attr(target_os = "linux", allow(dead_code))]
pub mod exclusive;
#[cfg(feature = "rusqlite")]
pub mod fork;
#[cfg(feature = "rusqlite")]
pub mod fsaccess;
pub mod migrate;
#[cfg(all(feature = "bundled", target_os = "linux"))]
pub mod ofd;
pub mod options;
pub mod payload;
#[cfg(feature = "rusqlite")]
pub mod pool;
pub mod raw;
#[cfg(feature = "rusqlite")]
pub mod readiness;
pub mod settings;
#[cfg(feature = "rusqlite")]
pub mod transaction;
pub mod wait;
pub mod watcher;

pub use clock::{Clock, ManualClock, SystemClock};
#[cfg(feature = "rusqlite")]
pub use connection::{set_waiting_forbidden, waiting_forbidden, without_waiting};
#[cfg(feature = "rusqlite")]
pub use database::{Database, Rows, Setup};
pub use error::{Error, ErrorKind, Result};
pub use migrate::{Migration, Schema};
pub use options::{Durability, Options};
pub use payload::Payload;
pub use raw::Batch;
#[cfg(feature = "rusqlite")]
pub use readiness::Readiness;
#[cfg(feature = "rusqlite")]
pub use transaction::Transaction;
pub use wait::{Pace, Parts, Reads, Source};

/// The rusqlite version the engine is built on.
#[cfg(feature = "rusqlite")]
pub use rusqlite;
