//! Durable streams with independent consumers (ADR 20): an append-only log
//! per stream with dense, gap-free offsets from 1, published inside the
//! caller's transaction (the outbox for events), and each consumer's place
//! ("the next offset to read", never expiring).
//!
//! The storage, the operations, the [`Stream`] handle (`db.stream(..)`),
//! [`Subscription`](crate::runtime::Subscription), retention ([`StreamRetention`]) and the SQL
//! surface (Honker's four stream functions with Honker's contracts, and
//! ours).
//!
//! Semantics are at-least-once for a consumer that commits after handling an
//! event; committing the offset in the transaction that records the event's
//! effect makes a local projection effectively exactly-once.

pub mod group;
#[cfg(feature = "rusqlite")]
mod handle;
pub(crate) mod ops;
pub(crate) mod retention;
pub(crate) mod sqlfn;
pub mod statements;
mod types;

#[cfg(feature = "rusqlite")]
pub use handle::Stream;
pub use retention::StreamRetention;
pub use types::{ConsumerInfo, Event, PublishOptions, Start, StreamInfo};
