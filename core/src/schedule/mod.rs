//! The scheduler (ADR 24): cron and `@every` schedules that put jobs on
//! queues, each fire exactly once however many processes run it.
//!
//! Schedules are rows in the file (`_honker_schedules`), evaluated in their
//! own IANA time zone ([`spec`]). A tick fires each due boundary in one
//! write transaction with a unique key per (schedule, boundary), so any
//! number of processes may tick; [`crate::runtime::ScheduleRunner`] sleeps
//! until the next boundary or a change and, in the common case, lets one
//! process (the last that ticked) take the write lock for a due fire.

#[cfg(feature = "rusqlite")]
mod handle;
pub(crate) mod ops;
pub mod spec;
pub(crate) mod sqlfn;
pub mod statements;
mod types;

#[cfg(feature = "rusqlite")]
pub use handle::Scheduler;
pub use spec::{DayRule, Spec};
pub use types::{
    CatchUp, Fire, Overlap, Schedule, ScheduleInfo, ScheduleOptions, DEFAULT_CATCH_UP_MAX,
    DEFAULT_CATCH_UP_WINDOW, MAX_CATCH_UP_MAX, MAX_COUNTED, ON_TIME,
};
