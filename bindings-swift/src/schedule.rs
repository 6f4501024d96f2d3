//! The scheduler for Swift (`honker::schedule`, `honker::runtime::ScheduleRunner`),
//! with durations and instants in milliseconds. The idiomatic layer
//! (`Sources/Honker/Scheduler.swift`) runs every call off the caller's
//! thread and ends `run()` when its task is cancelled.

use std::sync::Arc;

use honker::schedule::{Schedule, ScheduleOptions};

use crate::database::{Database, Payload};
use crate::errors::{ms, opt_ms, R};
use crate::records::{Fire, ScheduleInfo};

/// A schedule's definition: options left nil take core's defaults
/// (`Schedule::cron`).
#[derive(Debug, uniffi::Record)]
pub struct ScheduleDef {
    pub name: String,
    pub spec: String,
    pub queue: String,
    pub payload: Option<Payload>,
    pub time_zone: Option<String>,
    pub day_rule: Option<String>,
    pub priority: Option<i32>,
    pub max_attempts: Option<u32>,
    pub expires_ms: Option<u64>,
    pub catch_up: Option<String>,
    pub catch_up_window_ms: Option<u64>,
    pub catch_up_max: Option<u32>,
    pub overlap: Option<String>,
    pub jitter_ms: Option<u64>,
    pub start_at_ms: Option<i64>,
    pub end_at_ms: Option<i64>,
}

fn definition(d: ScheduleDef) -> R<Schedule> {
    let mut s = Schedule::cron(&d.name, &d.spec, &d.queue);
    ScheduleOptions {
        payload: d.payload.map(Into::into),
        time_zone: d.time_zone,
        day_rule: d.day_rule,
        priority: d.priority,
        max_attempts: d.max_attempts,
        expires: opt_ms("expires", d.expires_ms)?,
        catch_up: d.catch_up,
        catch_up_window: opt_ms("catchUpWindow", d.catch_up_window_ms)?,
        catch_up_max: d.catch_up_max,
        overlap: d.overlap,
        jitter: opt_ms("jitter", d.jitter_ms)?,
        start_at: d.start_at_ms,
        end_at: d.end_at_ms,
    }
    .apply(&mut s)?;
    Ok(s)
}

/// What `sync` did, by schedule name.
#[derive(Debug, uniffi::Record)]
pub struct SyncReportRecord {
    pub added: Vec<String>,
    pub changed: Vec<String>,
    pub removed: Vec<String>,
}

#[uniffi::export]
impl Database {
    /// The file's schedules (writes nothing).
    pub fn scheduler(&self) -> Arc<Scheduler> {
        Arc::new(Scheduler {
            s: self.core().scheduler(),
        })
    }
}

/// The schedules of one file.
#[derive(Debug, uniffi::Object)]
pub struct Scheduler {
    s: honker::schedule::Scheduler,
}

#[uniffi::export]
impl Scheduler {
    /// Registers (upserts) a schedule; whether anything changed.
    pub fn add(&self, def: ScheduleDef) -> R<bool> {
        Ok(self.s.add(&definition(def)?)?)
    }

    /// Makes the file hold exactly these schedules.
    pub fn sync(&self, defs: Vec<ScheduleDef>) -> R<SyncReportRecord> {
        let list = defs.into_iter().map(definition).collect::<R<Vec<_>>>()?;
        let r = self.s.sync(&list)?;
        Ok(SyncReportRecord {
            added: r.added,
            changed: r.changed,
            removed: r.removed,
        })
    }

    /// Removes a schedule and its fire records; whether there was one.
    pub fn remove(&self, name: String) -> R<bool> {
        Ok(self.s.remove(&name)?)
    }

    /// Pauses a schedule, with a note.
    pub fn pause(&self, name: String, note: Option<String>) -> R<()> {
        Ok(self.s.pause(&name, note.as_deref())?)
    }

    /// Resumes a schedule from its first boundary after now.
    pub fn resume(&self, name: String) -> R<()> {
        Ok(self.s.resume(&name)?)
    }

    /// Fires a schedule now: the job's id.
    pub fn trigger_now(&self, name: String) -> R<i64> {
        Ok(self.s.trigger_now(&name)?)
    }

    pub fn get(&self, name: String) -> R<Option<ScheduleInfo>> {
        Ok(self.s.get(&name)?.map(Into::into))
    }

    pub fn list(&self) -> R<Vec<ScheduleInfo>> {
        Ok(self.s.list()?.into_iter().map(Into::into).collect())
    }

    /// The next `n` boundaries of a schedule (ms).
    pub fn next_fires(&self, name: String, n: u32) -> R<Vec<i64>> {
        Ok(self.s.next_fires(&name, n as usize)?)
    }

    /// Fires what is due now.
    pub fn tick(&self) -> R<Vec<Fire>> {
        Ok(self.s.tick()?.into_iter().map(Into::into).collect())
    }

    /// A runner of this file's schedules.
    pub fn runner(&self) -> Arc<ScheduleRunner> {
        Arc::new(ScheduleRunner {
            r: honker::runtime::ScheduleRunner::new(self.s.database()),
        })
    }
}

/// The scheduler's loop (`runtime::ScheduleRunner`).
#[derive(Debug, uniffi::Object)]
pub struct ScheduleRunner {
    r: honker::runtime::ScheduleRunner,
}

#[uniffi::export]
impl ScheduleRunner {
    /// Waits up to `wait_ms` for due boundaries and fires them.
    pub fn next(&self, wait_ms: u64) -> R<Vec<Fire>> {
        let wait = ms("wait", wait_ms)?;
        Ok(self.r.next(wait)?.into_iter().map(Into::into).collect())
    }

    /// Stops the runner and wakes a waiting `next`.
    pub fn close(&self) {
        self.r.close();
    }

    pub fn is_closed(&self) -> bool {
        self.r.is_closed()
    }
}
