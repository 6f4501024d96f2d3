//! `honker._native`: the Python binding's native module. It converts types,
//! maps errors (errors.rs) and releases the GIL around every SQLite call and
//! every wait; all behaviour lives in the `honker` crate, and the idioms
//! (context managers, iterators, `datetime`) in the pure-Python package.
//!
//! Files mirror core: `database.rs` ↔ `core/src/database.rs` (+ the
//! transaction), `queue.rs` ↔ `core/src/queue/`, `stream.rs` ↔ `core/src/stream/` and
//! `core/src/channel/`, `group.rs` ↔ `core/src/stream/group/`, `lock.rs` ↔ `core/src/lock/` and
//! `core/src/rate/`.

mod cli;
mod clock;
mod database;
mod errors;
mod group;
mod import;
mod json;
mod lock;
mod queue;
mod records;
mod runtime;
mod schedule;
mod stream;
mod worker;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add(
        "ERROR_CODES",
        honker::ErrorKind::ALL
            .iter()
            .map(|k| k.code())
            .collect::<Vec<_>>(),
    )?;
    m.add_class::<clock::ManualClock>()?;
    m.add_class::<database::Database>()?;
    m.add_class::<database::Transaction>()?;
    m.add_class::<queue::Queue>()?;
    m.add_class::<runtime::Claimer>()?;
    m.add_class::<runtime::KeepAlive>()?;
    m.add_class::<stream::Stream>()?;
    m.add_class::<stream::Subscription>()?;
    m.add_class::<stream::Listener>()?;
    m.add_class::<group::Group>()?;
    m.add_class::<group::GroupConsumer>()?;
    m.add_class::<lock::Lock>()?;
    m.add_class::<lock::HeldLock>()?;
    m.add_class::<lock::CancelToken>()?;
    m.add_class::<lock::RateLimiter>()?;
    m.add_class::<lock::RateWait>()?;
    m.add_class::<stream::Pace>()?;
    m.add_class::<schedule::Scheduler>()?;
    m.add_class::<schedule::Definition>()?;
    m.add_class::<schedule::ScheduleRunner>()?;
    m.add_function(wrap_pyfunction!(schedule::schedule_definition, m)?)?;
    m.add_function(wrap_pyfunction!(import::import_honker, m)?)?;
    m.add_function(wrap_pyfunction!(cli::cli_main, m)?)?;
    m.add_function(wrap_pyfunction!(database::check_seconds, m)?)?;
    // A finished task's event names (core's `Finished::EVENTS`).
    m.add(
        "FINISHED_EVENTS",
        honker::runtime::Finished::EVENTS.to_vec(),
    )?;
    // How loud each of them (and a handler's start) is: core's
    // `Finished::log_level`.
    let levels: std::collections::HashMap<&str, &str> = ["start"]
        .into_iter()
        .chain(honker::runtime::Finished::EVENTS)
        .filter_map(|e| Some((e, honker::runtime::Finished::log_level(e)?)))
        .collect();
    m.add("EVENT_LEVELS", levels)?;
    #[cfg(unix)]
    m.add_class::<stream::Readiness>()?;
    m.add_class::<worker::Worker>()?;
    m.add_class::<worker::Task>()?;
    Ok(())
}
