//! The native addon of the npm package `honker`. It converts types, reports
//! errors as data (errors.rs) and runs every SQLite call and wait on tokio's
//! blocking pool, so nothing blocks Node's event loop or starves its libuv
//! pool. All behaviour lives in the `honker` crate; the idioms (options
//! objects, `for await`, `Date`, error classes) in `index.js`.
//!
//! Files mirror core: `database.rs` ↔ `core/src/database.rs` (+ the
//! transaction), `queue.rs` ↔ `core/src/queue/`, `stream.rs` ↔
//! `core/src/stream/` and `core/src/channel/`, `group.rs` ↔
//! `core/src/stream/group/`, `lock.rs` ↔ `core/src/lock/` and `core/src/rate/`.
//!
//! Durations cross as milliseconds (Node's unit: `setTimeout`, BullMQ), times
//! as milliseconds since the Unix epoch.

// The #[napi] types exist only to cross into JS (several hold Buffers,
// which have no Debug); nothing prints them on the Rust side.
#![allow(missing_debug_implementations)]
// napi-derive registers the exports only outside `cfg(test)` builds
// (clippy --all-targets makes one), where they would all look unused.
#![cfg_attr(test, allow(dead_code))]

mod database;
mod errors;
mod group;
mod lock;
mod queue;
mod records;
mod runtime;
mod schedule;
mod stall;
mod stream;
mod waits;
mod worker;

use napi_derive::napi;

/// The library version.
#[napi]
pub fn version() -> String {
    env!("CARGO_PKG_VERSION").to_owned()
}

/// The `honker` command (`cli.js`): runs the command line `argv` (the
/// program's name first) of the operator's command (the `honker-cli`
/// crate) on the calling thread and returns its exit status. It prints to
/// the process's stdout and stderr itself and may wait (`tail --follow`,
/// `listen`): it is the whole process, so blocking the loop is intended.
#[napi]
pub fn cli_main(argv: Vec<String>) -> u32 {
    u32::from(honker_cli::main_from(argv))
}

/// Every stable error code, for the JS layer's error classes.
#[napi]
pub fn error_codes() -> Vec<String> {
    honker::ErrorKind::ALL
        .iter()
        .map(|k| k.code().to_owned())
        .collect()
}
