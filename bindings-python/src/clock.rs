//! `ManualClock` for Python: a clock that tests move by hand, given to
//! `honker.open(path, clock=...)` (core's `ManualClock`).

use pyo3::prelude::*;

use crate::database::secs;

/// A clock that only moves when told to.
#[pyclass(module = "honker._native", frozen)]
#[derive(Debug, Clone)]
pub struct ManualClock {
    pub(crate) clock: honker::ManualClock,
}

#[pymethods]
impl ManualClock {
    /// Starts at `now` (seconds since the Unix epoch; default: the real time).
    #[new]
    #[pyo3(signature = (now = None))]
    fn new(now: Option<f64>) -> PyResult<ManualClock> {
        let clock = match now {
            Some(s) => honker::ManualClock::checked(secs("now", s)?.as_millis() as i64)
                .map_err(crate::errors::to_py)?,
            None => honker::ManualClock::starting_now(),
        };
        Ok(ManualClock { clock })
    }

    /// Moves time forward by `seconds`.
    fn advance(&self, seconds: f64) -> PyResult<()> {
        self.clock
            .try_advance(secs("seconds", seconds)?)
            .map_err(crate::errors::to_py)
    }

    /// The clock's time in seconds since the Unix epoch.
    fn now(&self) -> f64 {
        use honker::Clock as _;
        self.clock.now_ms() as f64 / 1000.0
    }
}
