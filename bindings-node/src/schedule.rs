//! The scheduler for Node (`honker::schedule`, `honker::runtime::ScheduleRunner`):
//! every verb once as an operation, exported async and `try*` (errors.rs's
//! `verbs!`); the runner's wait runs on tokio's blocking pool. Durations
//! and instants cross as ms.

use std::sync::Arc;

use honker::schedule::{Schedule, ScheduleOptions};
use napi_derive::napi;

use crate::database::Database;
use napi::bindgen_prelude::AsyncBlock;
use napi::Env;

use crate::errors::{invalid, ms, now, opt_ms, out, pending, verbs, Op, Out};
use crate::records::{payload_in, Fire, PayloadIo, ScheduleInfo};

/// A schedule's definition as the package passes it: options left out
/// take core's defaults (`Schedule::cron`); ms durations, ms instants.
#[napi(object)]
pub struct ScheduleDef {
    pub name: String,
    pub spec: String,
    pub queue: String,
    pub payload: Option<PayloadIo>,
    pub time_zone: Option<String>,
    pub day_rule: Option<String>,
    pub priority: Option<i32>,
    pub max_attempts: Option<u32>,
    pub expires: Option<f64>,
    pub catch_up: Option<String>,
    pub catch_up_window: Option<f64>,
    pub catch_up_max: Option<u32>,
    pub overlap: Option<String>,
    pub jitter: Option<f64>,
    pub start_at: Option<f64>,
    pub end_at: Option<f64>,
}

fn instant(what: &str, v: Option<f64>) -> honker::Result<Option<i64>> {
    match v {
        None => Ok(None),
        Some(t) if t.is_finite() && t.fract() == 0.0 => Ok(Some(t as i64)),
        Some(t) => Err(invalid(format!(
            "{what} must be a whole number of ms since the epoch (or a Date), got {t}"
        ))),
    }
}

fn definition(d: ScheduleDef) -> honker::Result<Schedule> {
    let mut s = Schedule::cron(&d.name, &d.spec, &d.queue);
    ScheduleOptions {
        payload: d.payload.map(payload_in),
        time_zone: d.time_zone,
        day_rule: d.day_rule,
        priority: d.priority,
        max_attempts: d.max_attempts,
        expires: opt_ms("expires", d.expires)?,
        catch_up: d.catch_up,
        catch_up_window: opt_ms("catchUpWindow", d.catch_up_window)?,
        catch_up_max: d.catch_up_max,
        overlap: d.overlap,
        jitter: opt_ms("jitter", d.jitter)?,
        start_at: instant("startAt", d.start_at)?,
        end_at: instant("endAt", d.end_at)?,
    }
    .apply(&mut s)?;
    Ok(s)
}

#[napi]
impl Database {
    /// The file's schedules (writes nothing).
    #[napi]
    pub fn scheduler(&self) -> Scheduler {
        Scheduler {
            s: self.core().scheduler(),
        }
    }
}

/// The schedules of one file.
#[napi]
pub struct Scheduler {
    s: honker::schedule::Scheduler,
}

/// What `sync` did, by schedule name.
#[napi(object)]
pub struct SyncReport {
    pub added: Vec<String>,
    pub changed: Vec<String>,
    pub removed: Vec<String>,
}

impl Scheduler {
    fn add_op(&self, def: ScheduleDef) -> Op<bool> {
        let s = self.s.clone();
        Box::new(move || s.add(&definition(def)?))
    }

    fn sync_op(&self, defs: Vec<ScheduleDef>) -> Op<SyncReport> {
        let s = self.s.clone();
        Box::new(move || {
            let list = defs
                .into_iter()
                .map(definition)
                .collect::<honker::Result<Vec<_>>>()?;
            let r = s.sync(&list)?;
            Ok(SyncReport {
                added: r.added,
                changed: r.changed,
                removed: r.removed,
            })
        })
    }

    fn remove_op(&self, name: String) -> Op<bool> {
        let s = self.s.clone();
        Box::new(move || s.remove(&name))
    }

    fn pause_op(&self, name: String, note: Option<String>) -> Op<()> {
        let s = self.s.clone();
        Box::new(move || s.pause(&name, note.as_deref()))
    }

    fn resume_op(&self, name: String) -> Op<()> {
        let s = self.s.clone();
        Box::new(move || s.resume(&name))
    }

    fn trigger_now_op(&self, name: String) -> Op<i64> {
        let s = self.s.clone();
        Box::new(move || s.trigger_now(&name))
    }

    fn get_op(&self, name: String) -> Op<Option<ScheduleInfo>> {
        let s = self.s.clone();
        Box::new(move || Ok(s.get(&name)?.map(Into::into)))
    }

    fn list_op(&self) -> Op<Vec<ScheduleInfo>> {
        let s = self.s.clone();
        Box::new(move || Ok(s.list()?.into_iter().map(Into::into).collect()))
    }

    fn next_fires_op(&self, name: String, n: u32) -> Op<Vec<i64>> {
        let s = self.s.clone();
        Box::new(move || s.next_fires(&name, n as usize))
    }

    fn tick_op(&self) -> Op<Vec<Fire>> {
        let s = self.s.clone();
        Box::new(move || Ok(s.tick()?.into_iter().map(Into::into).collect()))
    }
}

verbs! {
    impl Scheduler;
    #[doc = "Registers (upserts) a schedule; whether anything changed."]
    add / try_add (def: ScheduleDef) -> bool = add_op;
    #[doc = "Makes the file hold exactly these schedules."]
    sync / try_sync (defs: Vec<ScheduleDef>) -> SyncReport = sync_op;
    #[doc = "Removes a schedule and its fire records; whether there was one."]
    remove / try_remove (name: String) -> bool = remove_op;
    #[doc = "Pauses a schedule, with a note."]
    pause / try_pause (name: String, note: Option<String>) -> () = pause_op;
    #[doc = "Resumes a schedule from its first boundary after now."]
    resume / try_resume (name: String) -> () = resume_op;
    #[doc = "Fires a schedule now: the job's id."]
    trigger_now / try_trigger_now (name: String) -> i64 = trigger_now_op;
    #[doc = "One schedule with its state, or null."]
    get / try_get (name: String) -> Option<ScheduleInfo> = get_op;
    #[doc = "Every schedule with its state, by name."]
    list / try_list () -> Vec<ScheduleInfo> = list_op;
    #[doc = "The next `n` boundaries of a schedule (ms)."]
    next_fires / try_next_fires (name: String, n: u32) -> Vec<i64> = next_fires_op;
    #[doc = "Fires what is due now."]
    tick / try_tick () -> Vec<Fire> = tick_op;
}

#[napi]
impl Scheduler {
    /// The stored definition of `name` (for `update`); NOT_FOUND if none.
    #[napi]
    pub fn try_definition(&self, name: String) -> Out<ScheduleDef> {
        out(self.s.get(&name).and_then(|i| {
            let i = i.ok_or_else(|| {
                honker::Error::new(honker::ErrorKind::NotFound, format!("no schedule {name:?}"))
            })?;
            let d = i.schedule;
            Ok(ScheduleDef {
                name: d.name,
                spec: d.spec,
                queue: d.queue,
                payload: Some(crate::records::payload_out(d.payload)),
                time_zone: Some(d.time_zone),
                day_rule: Some(d.day_rule.as_str().into()),
                priority: Some(d.priority),
                max_attempts: d.max_attempts,
                expires: d.expires.map(|e| e.as_millis() as f64),
                catch_up: Some(d.catch_up.as_str().into()),
                catch_up_window: Some(d.catch_up_window.as_millis() as f64),
                catch_up_max: Some(d.catch_up_max),
                overlap: Some(d.overlap.as_str().into()),
                jitter: Some(d.jitter.as_millis() as f64),
                start_at: d.start_at.map(|t| t as f64),
                end_at: d.end_at.map(|t| t as f64),
            })
        }))
    }

    /// A runner of this file's schedules.
    #[napi]
    pub fn runner(&self) -> ScheduleRunner {
        ScheduleRunner {
            r: Arc::new(honker::runtime::ScheduleRunner::new(self.s.database())),
        }
    }
}

/// The scheduler's loop (`runtime::ScheduleRunner`).
#[napi]
pub struct ScheduleRunner {
    r: Arc<honker::runtime::ScheduleRunner>,
}

#[napi]
impl ScheduleRunner {
    /// Waits up to `wait` ms for due boundaries and fires them.
    #[napi]
    pub fn next(&self, env: Env, wait: f64) -> napi::Result<AsyncBlock<Out<Vec<Fire>>>> {
        let r = Arc::clone(&self.r);
        pending(
            &env,
            Box::new(move || {
                let wait = ms("wait", wait)?;
                Ok(r.next(wait)?.into_iter().map(Into::into).collect())
            }),
        )
    }

    /// Stops the runner and wakes a waiting `next`.
    #[napi]
    pub fn close(&self) {
        self.r.close();
    }

    #[napi(getter)]
    pub fn closed(&self) -> bool {
        self.r.is_closed()
    }

    /// [write transactions taken to tick, fires made].
    #[napi]
    pub fn counts(&self) -> Vec<f64> {
        vec![self.r.write_transactions() as f64, self.r.fires() as f64]
    }
}
