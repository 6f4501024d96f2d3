//! honker for Swift: the core exported through UniFFI proc-macros (no UDL).
//! The generated Swift (`Sources/HonkerNative`) wraps these objects; the
//! idiomatic layer (`Sources/Honker`: `Encodable` payloads, `async`,
//! `AsyncSequence`) sits on top and runs every call here off the caller's
//! thread.
//!
//! Conversions only: durations cross as milliseconds, times as milliseconds
//! since the Unix epoch, payloads as JSON text or bytes; every error becomes
//! the `HonkerError` enum, one case per stable code.

mod database;
mod errors;
mod group;
mod lock;
mod packed;
mod queue;
mod records;
mod schedule;
mod signals;
mod stream;
mod worker;

uniffi::setup_scaffolding!();
