//! Retention: removing finished jobs and results once they are past their
//! lifetime ([`crate::Retention`]), stream events past their stream's
//! retention, publish keys past their window, notifications past their
//! channel's window, lock holders past their TTL, rate limit keys once
//! refilled, and schedules' fire records past their catch-up window. One entry point, [`run`], used by
//! `Database::maintain` (everything) and after commits (a bounded slice).
//!
//! Work is done in batches of [`BATCH`] rows, each in its own short write
//! transaction, so maintenance never holds the write lock for long.

use crate::raw::Conn;

use crate::clock::duration_ms;
use crate::database::{Database, Inner};
use crate::error::Result;
use crate::queue::retention;

impl Database {
    /// Prunes everything past its retention ([`crate::Retention`]): finished
    /// jobs by state and age, and results. Work is done in short transactions
    /// so writers are not held up. Writes also run a bounded slice of this
    /// every `Options::auto_maintain_every`.
    pub fn maintain(&self) -> Result<MaintenanceReport> {
        run(&self.inner, usize::MAX)
    }
}

/// Where the walks over the lock holders, the rate-limit keys and the
/// schedules' fire records go on from (per database).
#[derive(Debug, Default)]
struct Sweeps {
    locks: parking_lot::Mutex<String>,
    rate_keys: parking_lot::Mutex<(String, String)>,
    fires: parking_lot::Mutex<String>,
}

pub(crate) use crate::database::BATCH;
/// Batches per table when maintenance runs automatically after a commit.
pub(crate) const AUTO_BATCH: usize = 1;

/// What [`Database::maintain`](crate::Database::maintain) removed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MaintenanceReport {
    /// Dead letters removed.
    pub dead: usize,
    /// Cancelled and expired records removed.
    pub cancelled: usize,
    /// Completed records removed.
    pub completed: usize,
    /// Results removed.
    pub results: usize,
    /// Stream events removed by their streams' retention.
    pub stream_events: usize,
    /// Idempotency keys of publishes forgotten after their window.
    pub publish_keys: usize,
    /// Notifications removed after their channels' window.
    pub notifications: usize,
    /// Consumer group members removed after their group's idle time
    /// (holding nothing).
    pub group_members: usize,
    /// Lock holders removed after their TTL lapsed.
    pub locks: usize,
    /// Rate limit keys removed once fully refilled (idle).
    pub rate_limit_keys: usize,
    /// Queues' key rows (ADR 36) that carried nothing any more: their rate
    /// limit refilled, their last turn behind their queue's.
    pub queue_keys: usize,
    /// Unique holds (ADR 37) that held nothing any more: their period
    /// over, or their job gone without completing.
    pub unique_holds: usize,
    /// Schedule fire records removed once older than their schedule's
    /// catch-up window.
    pub schedule_fires: usize,
}

/// Prunes up to `max_batches` batches per kind of record.
pub(crate) fn run(db: &Inner, max_batches: usize) -> Result<MaintenanceReport> {
    // Counts as this process's latest maintenance, so the commits below do
    // not start another slice from `after_commit`.
    db.mark_maintained();
    let r = &db.options.retention;
    let sweeps = db.engine.slot(Sweeps::default);
    let mut report = MaintenanceReport::default();
    for state in retention::FINISHED {
        let keep = duration_ms(match state {
            "dead" => r.dead,
            "completed" => r.completed,
            _ => r.cancelled, // cancelled and expired
        });
        let n = batches(db, max_batches, |conn, now| {
            retention::prune_finished(conn, state, now.saturating_sub(keep), BATCH)
        })?;
        match state {
            "dead" => report.dead += n,
            "completed" => report.completed += n,
            _ => report.cancelled += n,
        }
    }
    let keep = duration_ms(r.results);
    report.results = batches(db, max_batches, |conn, now| {
        retention::prune_results(conn, now.saturating_sub(keep), now, BATCH)
    })?;
    let streams = {
        let reader = db.reader()?;
        crate::stream::retention::names(reader.raw())?
    };
    for name in &streams {
        report.stream_events += batches(db, max_batches, |conn, now| {
            crate::stream::retention::trim(conn, name, now, BATCH)
        })?;
    }
    report.publish_keys = batches(db, max_batches, |conn, now| {
        crate::stream::retention::sweep_keys(conn, now, BATCH)
    })?;
    report.group_members = batches(db, max_batches, |conn, now| {
        crate::stream::group::ops::sweep_members(conn, now, BATCH)
    })?;
    report.locks = walk(db, &sweeps.locks, max_batches, |conn, after, now| {
        crate::lock::ops::sweep(conn, after, now, BATCH)
    })?;
    report.rate_limit_keys = walk(db, &sweeps.rate_keys, max_batches, |conn, after, now| {
        crate::rate::ops::sweep(conn, after, now, BATCH)
    })?;
    report.queue_keys = batches(db, max_batches, |conn, now| {
        crate::queue::ops::sweep_keys(conn, now, BATCH)
    })?;
    report.unique_holds = batches(db, max_batches, |conn, now| {
        crate::queue::ops::sweep_holds(conn, now, BATCH)
    })?;
    report.schedule_fires = walk(db, &sweeps.fires, max_batches, |conn, after, now| {
        crate::schedule::ops::sweep_fires(conn, after, now, BATCH)
    })?;
    let channels = {
        let reader = db.reader()?;
        crate::channel::ops::names(reader.raw())?
    };
    for name in &channels {
        report.notifications += batches(db, max_batches, |conn, now| {
            let last = crate::channel::ops::last_seq(conn, name)?;
            crate::channel::ops::trim(conn, name, last, now, BATCH)
        })?;
    }
    Ok(report)
}

/// Walks a table in key order, `BATCH` rows a transaction, removing what
/// is past its time (lock holders, rate-limit keys: tables whose time
/// column every write changes, so they have no index on it). A full pass
/// (`maintain`) walks from the first key; a slice after a commit goes on
/// from where the last one stopped (`cursor`), so every row is reached in
/// turn. `step` returns (removed, the last key seen or `None` at the end).
fn walk<C: Clone + Default>(
    db: &Inner,
    cursor: &parking_lot::Mutex<C>,
    max_batches: usize,
    step: impl Fn(Conn<'_>, &C, i64) -> Result<(usize, Option<C>)>,
) -> Result<usize> {
    let mut after = if max_batches == usize::MAX {
        C::default()
    } else {
        cursor.lock().clone()
    };
    let mut total = 0;
    for _ in 0..max_batches {
        let (n, last) = db.write(None, |w, now| step(w.raw(), &after, now))?;
        total += n;
        match last {
            Some(l) => after = l,
            None => {
                after = C::default();
                break;
            }
        }
    }
    *cursor.lock() = after;
    Ok(total)
}

fn batches(
    db: &Inner,
    max_batches: usize,
    step: impl Fn(Conn<'_>, i64) -> Result<usize>,
) -> Result<usize> {
    let mut total = 0;
    for _ in 0..max_batches {
        let n = db.write(None, |w, now| step(w.raw(), now))?;
        total += n;
        if n < BATCH {
            break;
        }
    }
    Ok(total)
}
