//! `Database` and `Transaction` for Python: open options, the application's
//! own SQL (`execute`/`query`) and the outbox transaction.
//!
//! Invariants: arguments are converted while holding the GIL, then every
//! SQLite call runs with the GIL released; a `Transaction` is shared by
//! reference between threads and used under its own mutex, taken only after
//! the GIL is released (so a thread waiting for it never holds the GIL).

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use honker::rusqlite::types::Value;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

use crate::clock::ManualClock;
use crate::errors::{invalid, IntoPyResult as _};
use crate::queue::Queue;
use crate::records::MaintenanceReport;

/// Evaluates `$body` with `$p` bound to `$params` as rusqlite parameters
/// (positional or named: two types, hence a macro).
macro_rules! with_params {
    ($params:expr, |$p:ident| $body:expr) => {
        match $params {
            Params::Positional(values) => {
                let $p = honker::rusqlite::params_from_iter(values.iter());
                $body
            }
            Params::Named(named) => {
                let pairs: Vec<(&str, &dyn honker::rusqlite::ToSql)> = named
                    .iter()
                    .map(|(k, v)| (k.as_str(), v as &dyn honker::rusqlite::ToSql))
                    .collect();
                let $p = pairs.as_slice();
                $body
            }
        }
    };
}

/// An open honker file (see `honker.open`).
#[pyclass(module = "honker._native", frozen)]
#[derive(Debug)]
pub struct Database {
    pub(crate) db: honker::Database,
}

/// Seconds from Python as a `Duration`, checked like every binding does.
pub(crate) fn secs(what: &str, s: f64) -> PyResult<Duration> {
    honker::validate::seconds(what, s).py()
}

/// `what` of `s` seconds checked by core's rule for every duration (finite,
/// not negative, at most 100 years): `s`, or `InvalidArgument`. For
/// durations Python keeps before any native call (`Retry(delay=)`,
/// `Snooze(delay)`), so a bad one fails where it is written.
#[pyfunction]
pub fn check_seconds(what: &str, s: f64) -> PyResult<f64> {
    secs(what, s).map(|_| s)
}

#[pymethods]
impl Database {
    #[new]
    /// Every option is optional: `None` is core's default (`OptionsPatch`),
    /// so no default is written here.
    #[pyo3(signature = (path, *, durability = None, busy_timeout = None, readers = None,
                        max_payload_bytes = None, watch_fallback = None,
                        auto_maintain_every = None, clock = None))]
    #[allow(clippy::too_many_arguments)] // Python keyword arguments
    fn new(
        py: Python<'_>,
        path: PathBuf,
        durability: Option<&str>,
        busy_timeout: Option<f64>,
        readers: Option<usize>,
        max_payload_bytes: Option<usize>,
        watch_fallback: Option<f64>,
        auto_maintain_every: Option<f64>,
        clock: Option<PyRef<'_, ManualClock>>,
    ) -> PyResult<Database> {
        let opt_secs = |what, v: Option<f64>| v.map(|s| secs(what, s)).transpose();
        let options = honker::OptionsPatch {
            durability: durability.map(str::parse).transpose().py()?,
            busy_timeout: opt_secs("busy_timeout", busy_timeout)?,
            readers,
            max_payload_bytes,
            watch_fallback: opt_secs("watch_fallback", watch_fallback)?,
            auto_maintain_every: opt_secs("auto_maintain_every", auto_maintain_every)?,
            // Not offered here: the default (1 s batches, ADR 27).
            metrics_flush_every: None,
            clock: clock.map(|c| std::sync::Arc::new(c.clock.clone()) as _),
        }
        .apply();
        let db = py
            .detach(|| honker::Database::open_with(&path, options))
            .py()?;
        Ok(Database { db })
    }

    /// The busy timeout in effect (seconds).
    #[getter]
    fn busy_timeout(&self) -> f64 {
        self.db.options().busy_timeout.as_secs_f64()
    }

    /// A pipe that becomes readable, while armed, when the file may have
    /// changed (any process's commit): what an asyncio reader waits on.
    /// Unix only (the package falls back to threads where it is missing).
    #[cfg(unix)]
    fn readiness(&self) -> PyResult<crate::stream::Readiness> {
        Ok(crate::stream::Readiness::new(self.db.readiness().py()?))
    }

    /// How often a waiter looks again without a wake-up (seconds): the
    /// timeout of a wait on `readiness`.
    #[getter]
    fn recheck_interval(&self) -> f64 {
        self.db.recheck_interval().as_secs_f64()
    }

    /// The canonical path of the file.
    #[getter]
    fn path(&self) -> PathBuf {
        self.db.path().to_path_buf()
    }

    /// The file's schedules.
    fn scheduler(&self) -> crate::schedule::Scheduler {
        crate::schedule::Scheduler {
            s: self.db.scheduler(),
        }
    }

    /// A handle on the stream `name`.
    fn lock(&self, name: &str) -> PyResult<crate::lock::Lock> {
        Ok(crate::lock::Lock {
            lock: self.db.lock(name).py()?,
        })
    }

    #[pyo3(signature = (name, *, limit = None, per = None, burst = None, update = false))]
    fn rate_limiter(
        &self,
        py: Python<'_>,
        name: &str,
        limit: Option<i64>,
        per: Option<f64>,
        burst: Option<i64>,
        update: bool,
    ) -> PyResult<crate::lock::RateLimiter> {
        let db = &self.db;
        py.detach(|| crate::lock::rate_limiter(db, name, limit, per, burst, update))
    }

    fn stream(&self, name: &str) -> PyResult<crate::stream::Stream> {
        Ok(crate::stream::Stream {
            stream: self.db.stream(name).py()?,
        })
    }

    /// Sends a notification (inside `tx` if given); returns its id.
    #[pyo3(signature = (channel, payload, *, tx = None))]
    fn notify(
        &self,
        py: Python<'_>,
        channel: &str,
        payload: &Bound<'_, PyAny>,
        tx: Option<PyRef<'_, Transaction>>,
    ) -> PyResult<i64> {
        crate::stream::notify(py, &self.db, channel, payload, tx.as_deref())
    }

    /// Listens on `channel` from now on.
    fn listen(&self, py: Python<'_>, channel: &str) -> PyResult<crate::stream::Listener> {
        crate::stream::listen(py, &self.db, channel)
    }

    /// The channel's window `(max_age_s, max_count)`, after setting it to
    /// `set` if given.
    #[pyo3(signature = (channel, set = None))]
    fn channel_retention(
        &self,
        py: Python<'_>,
        channel: &str,
        set: Option<(f64, u64)>,
    ) -> PyResult<(f64, u64)> {
        crate::stream::channel_retention(py, &self.db, channel, set)
    }

    fn queue(&self, name: &str, options: crate::records::QueueArgs) -> PyResult<Queue> {
        let given = options.to_core().py()?;
        let queue = self.db.queue_given(name, &given).py()?;
        Ok(Queue { queue })
    }

    fn transaction(&self, py: Python<'_>) -> PyResult<Transaction> {
        let tx = py.detach(|| self.db.transaction_detached()).py()?;
        Ok(Transaction {
            tx: Mutex::new(Some(tx)),
        })
    }

    #[pyo3(signature = (sql, params = None))]
    fn execute(
        &self,
        py: Python<'_>,
        sql: &str,
        params: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<usize> {
        let params = Params::from_py(params)?;
        py.detach(|| with_params!(&params, |p| self.db.execute(sql, p)))
            .py()
    }

    /// `(columns, rows)`: column names and one tuple per row.
    #[pyo3(signature = (sql, params = None))]
    fn query(
        &self,
        py: Python<'_>,
        sql: &str,
        params: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<(Vec<String>, Py<PyList>)> {
        let params = Params::from_py(params)?;
        let rows = py
            .detach(|| with_params!(&params, |p| self.db.query(sql, p)))
            .py()?;
        rows_to_py(py, rows)
    }

    /// Every queue's metrics (ADR 27) as core's JSON list.
    fn metrics_json(&self, py: Python<'_>) -> PyResult<String> {
        let list = py.detach(|| self.db.metrics()).py()?;
        Ok(serde_json::Value::Array(list.iter().map(|m| m.to_json()).collect()).to_string())
    }

    /// The Prometheus text exposition of every queue's metrics.
    fn metrics_text(&self, py: Python<'_>) -> PyResult<String> {
        py.detach(|| self.db.metrics_text()).py()
    }

    /// Pauses every queue for every process (core's `Database::pause_all`).
    fn pause_all(&self, py: Python<'_>, options: crate::records::PauseArgs) -> PyResult<()> {
        let o = options.to_core().py()?;
        py.detach(|| self.db.pause_all(&o)).py()
    }

    /// Lifts the pause of all queues; whether there was one.
    fn resume_all(&self, py: Python<'_>) -> PyResult<bool> {
        py.detach(|| self.db.resume_all()).py()
    }

    /// Prunes past retention; returns what was removed, by kind.
    fn maintain(&self, py: Python<'_>) -> PyResult<MaintenanceReport> {
        py.detach(|| self.db.maintain())
            .py()
            .map(MaintenanceReport::from)
    }

    fn close(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.db.close()).py()
    }
}

/// An open write transaction (see `Database.transaction`).
#[pyclass(module = "honker._native", frozen)]
#[derive(Debug)]
pub struct Transaction {
    tx: Mutex<Option<honker::Transaction>>,
}

impl Transaction {
    /// Runs `f` on the open transaction. Call with the GIL released.
    pub(crate) fn with<R>(
        &self,
        f: impl FnOnce(&honker::Transaction) -> honker::Result<R>,
    ) -> honker::Result<R> {
        let guard = self.tx.lock().unwrap_or_else(|p| p.into_inner());
        match guard.as_ref() {
            Some(tx) => f(tx),
            None => Err(honker::Error::transaction_finished()),
        }
    }

    fn take(&self) -> Option<honker::Transaction> {
        self.tx.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// Runs `f` inside `tx` when one is given, else on its own (every verb that
/// takes `tx=`). Call with the GIL released.
pub(crate) fn in_tx<R>(
    tx: Option<&Transaction>,
    f: impl FnOnce(Option<&honker::Transaction>) -> honker::Result<R>,
) -> honker::Result<R> {
    match tx {
        Some(t) => t.with(|tx| f(Some(tx))),
        None => f(None),
    }
}

#[pymethods]
impl Transaction {
    #[pyo3(signature = (sql, params = None))]
    fn execute(
        &self,
        py: Python<'_>,
        sql: &str,
        params: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<usize> {
        let params = Params::from_py(params)?;
        py.detach(|| self.with(|tx| with_params!(&params, |p| tx.execute(sql, p))))
            .py()
    }

    #[pyo3(signature = (sql, params = None))]
    fn query(
        &self,
        py: Python<'_>,
        sql: &str,
        params: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<(Vec<String>, Py<PyList>)> {
        let params = Params::from_py(params)?;
        let rows = py
            .detach(|| self.with(|tx| with_params!(&params, |p| tx.query(sql, p))))
            .py()?;
        rows_to_py(py, rows)
    }

    /// Commits. Committing a finished transaction is an error.
    fn commit(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| match self.take() {
            Some(tx) => tx.commit(),
            None => Err(honker::Error::transaction_finished()),
        })
        .py()
    }

    /// Rolls back; a no-op on a finished transaction.
    fn rollback(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| match self.take() {
            Some(tx) => tx.rollback(),
            None => Ok(()),
        })
        .py()
    }

    #[getter]
    fn is_open(&self) -> bool {
        self.tx.lock().map(|g| g.is_some()).unwrap_or(false)
    }
}

/// Statement parameters converted from Python: positional or named.
enum Params {
    Positional(Vec<Value>),
    Named(Vec<(String, Value)>),
}

impl Params {
    fn from_py(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Params> {
        let Some(obj) = obj.filter(|o| !o.is_none()) else {
            return Ok(Params::Positional(Vec::new()));
        };
        if let Ok(d) = obj.cast::<PyDict>() {
            let mut named = Vec::with_capacity(d.len());
            for (k, v) in d.iter() {
                let k: String = k.extract()?;
                let k = if k.starts_with([':', '@', '$']) {
                    k
                } else {
                    format!(":{k}")
                };
                named.push((k, value_from_py(&v)?));
            }
            return Ok(Params::Named(named));
        }
        if obj.is_instance_of::<pyo3::types::PyString>() || obj.is_instance_of::<PyBytes>() {
            return Err(invalid(
                "params must be a sequence or a dict, not a str or bytes",
            ));
        }
        let mut values = Vec::new();
        for v in obj.try_iter()? {
            values.push(value_from_py(&v?)?);
        }
        Ok(Params::Positional(values))
    }
}

fn value_from_py(v: &Bound<'_, PyAny>) -> PyResult<Value> {
    if v.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = v.cast::<pyo3::types::PyBool>() {
        return Ok(Value::Integer(i64::from(b.is_true())));
    }
    if let Ok(i) = v.extract::<i64>() {
        return Ok(Value::Integer(i));
    }
    if let Ok(f) = v.cast::<pyo3::types::PyFloat>() {
        return Ok(Value::Real(f.value()));
    }
    if let Ok(s) = v.cast::<pyo3::types::PyString>() {
        return Ok(Value::Text(s.to_cow()?.into_owned()));
    }
    if let Ok(b) = v.cast::<PyBytes>() {
        return Ok(Value::Blob(b.as_bytes().to_vec()));
    }
    Err(invalid(format!(
        "cannot bind a {} as an SQL parameter (use None, int, float, str or bytes)",
        v.get_type().name()?
    )))
}

pub(crate) fn value_to_py(py: Python<'_>, v: Value) -> PyResult<Py<PyAny>> {
    Ok(match v {
        Value::Null => py.None(),
        Value::Integer(i) => i.into_pyobject(py)?.into_any().unbind(),
        Value::Real(f) => f.into_pyobject(py)?.into_any().unbind(),
        Value::Text(s) => s.into_pyobject(py)?.into_any().unbind(),
        Value::Blob(b) => PyBytes::new(py, &b).into_any().unbind(),
    })
}

fn rows_to_py(py: Python<'_>, rows: honker::Rows) -> PyResult<(Vec<String>, Py<PyList>)> {
    let list = PyList::empty(py);
    for row in rows.rows {
        let values = row
            .into_iter()
            .map(|v| value_to_py(py, v))
            .collect::<PyResult<Vec<_>>>()?;
        list.append(PyTuple::new(py, values)?)?;
    }
    Ok((rows.columns, list.unbind()))
}
