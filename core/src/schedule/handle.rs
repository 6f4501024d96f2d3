//! The [`Scheduler`] handle (`db.scheduler()`): schedules as rows of the
//! file, registered idempotently, and the tick that fires them.

use super::ops::{self, Upserted};
use super::types::{Fire, Schedule, ScheduleInfo};
use crate::database::Database;
use crate::error::{Error, Result};
use crate::transaction::Transaction;
use crate::validate;

impl Database {
    /// The scheduler of this file: its schedules, and the tick that fires
    /// them ([`crate::runtime::ScheduleRunner`] runs it in a loop).
    pub fn scheduler(&self) -> Scheduler {
        Scheduler { db: self.clone() }
    }
}

/// What [`Scheduler::sync`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SyncReport {
    /// Schedules registered for the first time.
    pub added: Vec<String>,
    /// Schedules whose definition changed.
    pub changed: Vec<String>,
    /// Schedules removed (absent from the list).
    pub removed: Vec<String>,
}

/// The schedules of one file. Cheap to clone, `Send + Sync`.
///
/// ```no_run
/// # fn main() -> honker::Result<()> {
/// use honker::schedule::Schedule;
/// let db = honker::Database::open("app.db")?;
/// let s = db.scheduler();
/// s.add(&Schedule::cron("nightly", "0 2 * * *", "reports").time_zone("Europe/Berlin"))?;
/// for info in s.list()? {
///     println!("{} next at {:?}", info.schedule.name, info.next_fire_at);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Scheduler {
    db: Database,
}

fn not_found(name: &str) -> Error {
    Error::not_found(format!("no schedule {name:?}"))
}

impl Scheduler {
    /// Registers `schedule`, or replaces the definition of the schedule of
    /// that name (an upsert: a process that starts with its schedule list
    /// registers it every time). An identical definition changes nothing;
    /// one with the same rule keeps its next fire; a new rule starts from
    /// the first boundary after now. Returns whether anything changed.
    pub fn add(&self, schedule: &Schedule) -> Result<bool> {
        self.add_in(None, schedule)
    }

    /// [`add`](Self::add) inside the caller's transaction.
    pub fn add_tx(&self, tx: &Transaction, schedule: &Schedule) -> Result<bool> {
        self.add_in(Some(tx), schedule)
    }

    fn add_in(&self, tx: Option<&Transaction>, schedule: &Schedule) -> Result<bool> {
        let (s, spec) = self.checked(schedule)?;
        let anchor = s.start_at.unwrap_or(0);
        if tx.is_none() {
            // The usual case at start-up (registered before): a read.
            let reader = self.db.inner.reader()?;
            if let Some(old) = ops::get(reader.raw(), &s.name)? {
                if old.info.schedule == s && old.anchor_ms == anchor {
                    return Ok(false);
                }
            }
        }
        let what = self.db.inner.write(tx, |conn, now| {
            ops::upsert(conn.raw(), &s, &spec, anchor, now)
        })?;
        Ok(what != Upserted::Unchanged)
    }

    fn checked(&self, schedule: &Schedule) -> Result<(Schedule, super::Spec)> {
        let spec = schedule.check(self.db.inner.options.max_payload_bytes)?;
        let mut s = schedule.clone();
        s.time_zone = spec.zone_name().to_string();
        Ok((s, spec))
    }

    /// Changes the stored definition of `name` with `change` (`NOT_FOUND`
    /// if there is none), as [`add`](Self::add) would register it.
    pub fn update(&self, name: &str, change: impl FnOnce(&mut Schedule)) -> Result<bool> {
        validate::name("schedule", name)?;
        let mut s = self.get(name)?.ok_or_else(|| not_found(name))?.schedule;
        change(&mut s);
        if s.name != name {
            return Err(Error::invalid("update cannot rename a schedule"));
        }
        self.add(&s)
    }

    /// Registers every schedule of `list` and removes every other one: the
    /// file's schedules become exactly the list (all in one transaction).
    pub fn sync(&self, list: &[Schedule]) -> Result<SyncReport> {
        let mut checked = Vec::with_capacity(list.len());
        for s in list {
            if checked
                .iter()
                .any(|(c, _): &(Schedule, _)| c.name == s.name)
            {
                return Err(Error::invalid(format!(
                    "schedule {:?} appears twice in the list",
                    s.name
                )));
            }
            checked.push(self.checked(s)?);
        }
        self.db.inner.write(None, |conn, now| {
            let mut r = SyncReport::default();
            for old in ops::list(conn.raw())? {
                let name = &old.info.schedule.name;
                if !checked.iter().any(|(s, _)| &s.name == name) {
                    ops::remove(conn.raw(), name)?;
                    r.removed.push(name.clone());
                }
            }
            for (s, spec) in &checked {
                let anchor = s.start_at.unwrap_or(0);
                match ops::upsert(conn.raw(), s, spec, anchor, now)? {
                    Upserted::Added => r.added.push(s.name.clone()),
                    Upserted::Changed => r.changed.push(s.name.clone()),
                    Upserted::Unchanged => {}
                }
            }
            Ok(r)
        })
    }

    /// Removes `name` and its fire records (its jobs already on the queue
    /// stay); false if there was none.
    pub fn remove(&self, name: &str) -> Result<bool> {
        validate::name("schedule", name)?;
        self.db
            .inner
            .write(None, |conn, _| ops::remove(conn.raw(), name))
    }

    /// Pauses `name` with an optional note (shown by `list`): its
    /// boundaries are neither fired nor counted as missed until it resumes.
    pub fn pause(&self, name: &str, note: Option<&str>) -> Result<()> {
        validate::name("schedule", name)?;
        if let Some(n) = note {
            validate::key_or_empty("a pause note", n)?;
        }
        let found = self
            .db
            .inner
            .write(None, |conn, now| ops::pause(conn.raw(), name, note, now))?;
        found.then_some(()).ok_or_else(|| not_found(name))
    }

    /// Resumes `name` from its first boundary after now.
    pub fn resume(&self, name: &str) -> Result<()> {
        validate::name("schedule", name)?;
        let found = self
            .db
            .inner
            .write(None, |conn, now| ops::resume(conn.raw(), name, now))?;
        found.then_some(()).ok_or_else(|| not_found(name))
    }

    /// Fires `name` now, whatever its rule says (its overlap policy does
    /// not apply): the job's id.
    pub fn trigger_now(&self, name: &str) -> Result<i64> {
        validate::name("schedule", name)?;
        self.db
            .inner
            .write(None, |conn, now| ops::trigger(conn.raw(), name, now))
    }

    /// One schedule with its state.
    pub fn get(&self, name: &str) -> Result<Option<ScheduleInfo>> {
        validate::name("schedule", name)?;
        let reader = self.db.inner.reader()?;
        Ok(ops::get(reader.raw(), name)?.map(|s| s.info))
    }

    /// Every schedule with its state, by name.
    pub fn list(&self) -> Result<Vec<ScheduleInfo>> {
        let reader = self.db.inner.reader()?;
        Ok(ops::list(reader.raw())?
            .into_iter()
            .map(|s| s.info)
            .collect())
    }

    /// The next `n` boundaries of `name` from its next fire (none once it
    /// has ended, or while it is paused from now).
    pub fn next_fires(&self, name: &str, n: usize) -> Result<Vec<i64>> {
        validate::name("schedule", name)?;
        let n = validate::batch_usize(n)?;
        let stored = {
            let reader = self.db.inner.reader()?;
            ops::get(reader.raw(), name)?.ok_or_else(|| not_found(name))?
        };
        let s = &stored.info.schedule;
        let spec = ops::spec_of(s)?;
        let mut next = if stored.info.paused {
            ops::next_boundary(&spec, s, stored.anchor_ms, self.db.inner.now())?
        } else {
            stored.info.next_fire_at
        };
        let mut out = Vec::with_capacity(n);
        while let Some(b) = next {
            if out.len() == n {
                break;
            }
            out.push(b);
            next = ops::next_boundary(&spec, s, stored.anchor_ms, b)?;
        }
        Ok(out)
    }

    /// The earliest boundary due among schedules not paused.
    pub fn next_due(&self) -> Result<Option<i64>> {
        let reader = self.db.inner.reader()?;
        ops::next_due(reader.raw())
    }

    /// Fires what is due now, in one write transaction (none when nothing
    /// is due: a read decides). Safe to call from any number of processes:
    /// each boundary fires once.
    pub fn tick(&self) -> Result<Vec<Fire>> {
        let due = {
            let reader = self.db.inner.reader()?;
            let now = self.db.inner.now();
            ops::next_due(reader.raw())?.is_some_and(|b| b <= now)
                || !ops::buffered_ready(reader.raw())?.is_empty()
        };
        if !due {
            return Ok(vec![]);
        }
        self.tick_now()
    }

    /// [`tick`](Self::tick) without the read first.
    pub(crate) fn tick_now(&self) -> Result<Vec<Fire>> {
        self.db.inner.write(None, |conn, now| {
            ops::tick(conn.raw(), now, ops::TICK_BATCH)
        })
    }

    /// The database of these schedules.
    pub fn database(&self) -> &Database {
        &self.db
    }
}
