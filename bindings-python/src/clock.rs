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
    fn new(now: Option<&Bound<'_, PyAny>>) -> PyResult<ManualClock> {
        let clock = match now {
            Some(s) => {
                honker::ManualClock::checked(secs("now", number("now", s)?)?.as_millis() as i64)
                    .map_err(crate::errors::to_py)?
            }
            None => honker::ManualClock::starting_now(),
        };
        Ok(ManualClock { clock })
    }

    /// Moves time forward by `seconds`.
    fn advance(&self, seconds: &Bound<'_, PyAny>) -> PyResult<()> {
        self.clock
            .try_advance(secs("seconds", number("seconds", seconds)?)?)
            .map_err(crate::errors::to_py)
    }

    /// The clock's time in seconds since the Unix epoch.
    fn now(&self) -> f64 {
        use honker::Clock as _;
        self.clock.now_ms() as f64 / 1000.0
    }
}

/// A number of seconds from Python (an int or a float, not a bool):
/// `InvalidArgument` otherwise, not the conversion's `TypeError`.
fn number(what: &str, v: &Bound<'_, PyAny>) -> PyResult<f64> {
    if v.is_instance_of::<pyo3::types::PyBool>() {
        return Err(bad(what, v));
    }
    v.extract::<f64>().map_err(|_| bad(what, v))
}

fn bad(what: &str, v: &Bound<'_, PyAny>) -> PyErr {
    let ty = v
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_default();
    crate::errors::to_py(honker::Error::new(
        honker::ErrorKind::InvalidArgument,
        format!("{what} must be a number of seconds, got a {ty}"),
    ))
}
