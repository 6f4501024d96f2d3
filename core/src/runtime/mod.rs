//! Behaviour the language bindings must not re-implement (DESIGN §2): each
//! binding wraps these once, in its own idiom, instead of re-writing them
//! with its own meaning.
//!
//! - [`Claimer`]: the subscription shape. `next(wait)` hands out one job,
//!   claiming a batch when none is buffered and sleeping until work arrives;
//!   `close()` gives back what was claimed but not handed out, and wakes a
//!   `next` that is waiting. Dropping it closes it, so a loop that stops
//!   early (Swift's `for try await … break`, Python's bare `for … break`, a
//!   JavaScript `for await` that returns) never leaves jobs to lapse.
//! - [`Cancel`]: ends one waiting call (a claim, `wait_result`) at once
//!   when the host's task is cancelled.
//! - [`KeepAlive`]: lease renewal with one meaning on every surface: renew
//!   every third of the lease (or as told), retry after a transient error,
//!   and stop and report when the lease is lost.
//! - [`HeldLock`]: a named lock held by a block of work — acquired (with a
//!   wait, cancellable), renewed by a [`KeepAlive`], released at the end;
//!   `lost`/`wait_lost` tell the host when another owner took it.
//!
//! - [`Worker`]: the claim–run–finish loop, pull-style: it hands out
//!   [`Task`]s within per-queue and global concurrency limits and takes
//!   back an [`Outcome`]; renews leases and enforces handler timeouts
//!   while the host waits in `next`; `shutdown` and `drain` stop it
//!   gracefully, releasing what outlives the grace period. [`TaskTable`]
//!   keeps its tasks by key for hosts that hold a number per job, and
//!   tells them which it gave up on when it does (`wait_gave_up`: the
//!   host cancels those handlers; nothing polls).
//!
//! - [`ScheduleRunner`]: the scheduler's loop, safe in every process: it
//!   sleeps until the next boundary or a commit and fires what is due,
//!   each boundary once.
//!
//! [`Subscription`] (a stream's independent consumer) and [`Listener`] (a
//! channel's) take the same shape. [`OffThreadDrop`] is how a binding holds
//! them when its wrapper is dropped on a thread that must not wait.

mod cancel;
mod claimer;
mod group_consumer;
mod held_lock;
mod keepalive;
mod listener;
mod off_thread;
mod outcome;
mod renewals;
mod schedule_runner;
mod subscription;
mod task_table;
mod work;
mod worker;

pub use cancel::Cancel;
pub use claimer::Claimer;
pub use group_consumer::GroupConsumer;
pub use held_lock::HeldLock;
pub use keepalive::{KeepAlive, KeepAliveReport, STOP_WAIT};
pub use listener::Listener;
pub(crate) use off_thread::wait_for_drops;
pub use off_thread::{OffThreadDrop, QuickDrop};
pub use outcome::{Completion, DrainReport, Finished, Outcome, Report};
pub use schedule_runner::{ScheduleRunner, ScheduleThread, FOLLOWER_DELAY, MIN_RECHECK};
pub use subscription::{AutoCommit, Subscription};
pub use task_table::TaskTable;
pub use work::Work;
pub use worker::{
    HandlerOptions, Route, Task, Worker, WorkerOptions, ENVELOPE_ARGS, ENVELOPE_TASK,
};

use std::time::Duration;

use crate::error::Result;

/// What a host iterates: a [`Claimer`]'s jobs, a [`Subscription`]'s or a
/// [`Listener`]'s items, a [`GroupConsumer`]'s events. Each is also a
/// [`Source`](crate::Source) (a look without I/O and a short take), which
/// is how a host waits on its own event loop; this is the blocking half,
/// and [`Cancel::next`] its cancellable form. A host wraps this once
/// (Python's `_Reader`, JavaScript's `Reader`, Swift's `Reading`).
pub trait Reader: crate::Source {
    /// The next item, waiting up to `wait`; `None` when the wait ran out,
    /// the reader was closed, or `stop` said so at a wake-up (whoever sets
    /// what `stop` reads pokes the file's signal, as [`Cancel`] does). An
    /// item taken as `stop` turned is still returned (a claimer's or a
    /// group consumer's others stay buffered for the next call or
    /// `close`), so a cancellation loses nothing.
    fn next_until(&self, wait: Duration, stop: &dyn Fn() -> bool) -> Result<Option<Self::Item>>;

    /// Whether it was closed.
    fn is_closed(&self) -> bool;
}
