//! The scheduler for Python (`honker::schedule`, `honker::runtime::ScheduleRunner`):
//! definitions cross as keyword arguments, schedules and fires as the
//! tuples of core's records table; the package wraps them. Every call that
//! may wait or write runs without the GIL.

use std::sync::Arc;

use honker::schedule::{Schedule, ScheduleOptions};
use pyo3::prelude::*;

use crate::database::secs;
use crate::errors::IntoPyResult as _;
use crate::json::payload_from_py;
use crate::records::{Fire, ScheduleInfo};

/// The schedules of one file (see `Database.scheduler`).
#[pyclass(module = "honker._native", frozen)]
#[derive(Debug)]
pub struct Scheduler {
    pub(crate) s: honker::schedule::Scheduler,
}

/// A schedule's definition from the package's keyword arguments (times in
/// seconds, instants in ms); those left `None` take core's defaults
/// (`Schedule::cron`).
#[allow(clippy::too_many_arguments)]
#[pyfunction]
#[pyo3(signature = (name, spec, queue, payload, *, time_zone = None, day_rule = None,
                    priority = None, max_attempts = None, expires = None, catch_up = None,
                    catch_up_window = None, catch_up_max = None, overlap = None, jitter = None,
                    start_at_ms = None, end_at_ms = None))]
pub(crate) fn schedule_definition(
    name: &str,
    spec: &str,
    queue: &str,
    payload: &Bound<'_, PyAny>,
    time_zone: Option<&str>,
    day_rule: Option<&str>,
    priority: Option<i32>,
    max_attempts: Option<u32>,
    expires: Option<f64>,
    catch_up: Option<&str>,
    catch_up_window: Option<f64>,
    catch_up_max: Option<u32>,
    overlap: Option<&str>,
    jitter: Option<f64>,
    start_at_ms: Option<i64>,
    end_at_ms: Option<i64>,
) -> PyResult<Definition> {
    let base = Definition(Schedule::cron(name, spec, queue));
    let mut d = base.with_changes(
        None,
        None,
        None,
        time_zone,
        day_rule,
        priority,
        max_attempts,
        expires,
        catch_up,
        catch_up_window,
        catch_up_max,
        overlap,
        jitter,
        start_at_ms,
        end_at_ms,
        Vec::new(),
    )?;
    if !payload.is_none() {
        d.0.payload = payload_from_py(payload)?;
    }
    Ok(d)
}

/// A schedule's definition, built by `schedule_definition`.
#[pyclass(module = "honker._native", frozen)]
#[derive(Debug, Clone)]
pub struct Definition(pub(crate) Schedule);

#[pymethods]
impl Scheduler {
    /// Registers (upserts) a definition; whether anything changed.
    fn add(&self, py: Python<'_>, d: PyRef<'_, Definition>) -> PyResult<bool> {
        let (s, d) = (&self.s, &d.0);
        py.detach(|| s.add(d)).py()
    }

    /// Makes the file hold exactly these definitions: (added, changed,
    /// removed) names.
    fn sync(
        &self,
        py: Python<'_>,
        list: Vec<PyRef<'_, Definition>>,
    ) -> PyResult<(Vec<String>, Vec<String>, Vec<String>)> {
        let list: Vec<Schedule> = list.iter().map(|d| d.0.clone()).collect();
        let s = &self.s;
        let r = py.detach(|| s.sync(&list)).py()?;
        Ok((r.added, r.changed, r.removed))
    }

    fn remove(&self, py: Python<'_>, name: &str) -> PyResult<bool> {
        let s = &self.s;
        py.detach(|| s.remove(name)).py()
    }

    #[pyo3(signature = (name, note = None))]
    fn pause(&self, py: Python<'_>, name: &str, note: Option<&str>) -> PyResult<()> {
        let s = &self.s;
        py.detach(|| s.pause(name, note)).py()
    }

    fn resume(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        let s = &self.s;
        py.detach(|| s.resume(name)).py()
    }

    fn trigger_now(&self, py: Python<'_>, name: &str) -> PyResult<i64> {
        let s = &self.s;
        py.detach(|| s.trigger_now(name)).py()
    }

    fn get(&self, py: Python<'_>, name: &str) -> PyResult<Option<ScheduleInfo>> {
        let s = &self.s;
        Ok(py.detach(|| s.get(name)).py()?.map(Into::into))
    }

    /// The stored definition of `name` (for `update`); `NotFound` if none.
    fn definition(&self, py: Python<'_>, name: &str) -> PyResult<Definition> {
        let s = &self.s;
        let info = py.detach(|| s.get(name)).py()?.ok_or_else(|| {
            honker::Error::new(honker::ErrorKind::NotFound, format!("no schedule {name:?}"))
        });
        Ok(Definition(info.py()?.schedule))
    }

    fn list(&self, py: Python<'_>) -> PyResult<Vec<ScheduleInfo>> {
        let s = &self.s;
        Ok(py
            .detach(|| s.list())
            .py()?
            .into_iter()
            .map(Into::into)
            .collect())
    }

    fn next_fires(&self, py: Python<'_>, name: &str, n: usize) -> PyResult<Vec<i64>> {
        let s = &self.s;
        py.detach(|| s.next_fires(name, n)).py()
    }

    fn next_due(&self, py: Python<'_>) -> PyResult<Option<i64>> {
        let s = &self.s;
        py.detach(|| s.next_due()).py()
    }

    fn tick(&self, py: Python<'_>) -> PyResult<Vec<Fire>> {
        let s = &self.s;
        Ok(py
            .detach(|| s.tick())
            .py()?
            .into_iter()
            .map(Into::into)
            .collect())
    }

    /// A runner of this file's schedules (`runtime::ScheduleRunner`).
    fn runner(&self) -> ScheduleRunner {
        ScheduleRunner {
            r: Arc::new(honker::runtime::ScheduleRunner::new(self.s.database())),
        }
    }
}

#[pymethods]
impl Definition {
    /// The definition with keyword changes applied (`update`): the same
    /// names as `schedule_definition`; None leaves a field alone except
    /// where `clear` names it.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (*, spec = None, queue = None, payload = None, time_zone = None,
                        day_rule = None, priority = None, max_attempts = None, expires = None,
                        catch_up = None, catch_up_window = None, catch_up_max = None,
                        overlap = None, jitter = None, start_at_ms = None, end_at_ms = None,
                        clear = Vec::new()))]
    fn with_changes(
        &self,
        spec: Option<&str>,
        queue: Option<&str>,
        payload: Option<&Bound<'_, PyAny>>,
        time_zone: Option<&str>,
        day_rule: Option<&str>,
        priority: Option<i32>,
        max_attempts: Option<u32>,
        expires: Option<f64>,
        catch_up: Option<&str>,
        catch_up_window: Option<f64>,
        catch_up_max: Option<u32>,
        overlap: Option<&str>,
        jitter: Option<f64>,
        start_at_ms: Option<i64>,
        end_at_ms: Option<i64>,
        clear: Vec<String>,
    ) -> PyResult<Definition> {
        let mut s = self.0.clone();
        if let Some(v) = spec {
            s.spec = v.into();
        }
        if let Some(v) = queue {
            s.queue = v.into();
        }
        let opt_secs = |what: &str, v: Option<f64>| v.map(|v| secs(what, v)).transpose();
        ScheduleOptions {
            payload: payload.map(payload_from_py).transpose()?,
            time_zone: time_zone.map(Into::into),
            day_rule: day_rule.map(Into::into),
            priority,
            max_attempts,
            expires: opt_secs("expires", expires)?,
            catch_up: catch_up.map(Into::into),
            catch_up_window: opt_secs("catch_up_window", catch_up_window)?,
            catch_up_max,
            overlap: overlap.map(Into::into),
            jitter: opt_secs("jitter", jitter)?,
            start_at: start_at_ms,
            end_at: end_at_ms,
        }
        .apply(&mut s)
        .py()?;
        for c in &clear {
            match c.as_str() {
                "max_attempts" => s.max_attempts = None,
                "expires" => s.expires = None,
                "start_at" => s.start_at = None,
                "end_at" => s.end_at = None,
                other => return Err(crate::errors::invalid(format!("{other} cannot be cleared"))),
            }
        }
        Ok(Definition(s))
    }

    #[getter]
    fn name(&self) -> &str {
        &self.0.name
    }
}

/// The scheduler's loop (`runtime::ScheduleRunner`), run on a thread of
/// the package's.
#[pyclass(module = "honker._native", frozen)]
#[derive(Debug)]
pub struct ScheduleRunner {
    r: Arc<honker::runtime::ScheduleRunner>,
}

#[pymethods]
impl ScheduleRunner {
    /// Waits up to `wait` seconds for due boundaries and fires them.
    fn next(&self, py: Python<'_>, wait: f64) -> PyResult<Vec<Fire>> {
        let wait = secs("wait", wait)?;
        let r = &self.r;
        Ok(py
            .detach(|| r.next(wait))
            .py()?
            .into_iter()
            .map(Into::into)
            .collect())
    }

    /// Stops the runner and wakes a waiting `next`.
    fn close(&self) {
        self.r.close();
    }

    #[getter]
    fn closed(&self) -> bool {
        self.r.is_closed()
    }

    /// (write transactions taken to tick, fires made).
    fn counts(&self) -> (u64, u64) {
        (self.r.write_transactions(), self.r.fires())
    }
}
