//! `Database`, `Transaction` and `ManualClock` for Swift, and the values
//! they exchange (payloads, SQL values, rows). Mirrors `core/src/database.rs`.

use std::sync::{Arc, Mutex};

use crate::errors::{ms, opt_ms, R};
use crate::queue::Queue;
use crate::records::MaintenanceReport;

/// A job payload or result: JSON text, or bytes.
#[derive(Debug, Clone, uniffi::Enum)]
pub enum Payload {
    Json { text: String },
    Bytes { data: Vec<u8> },
}

impl From<Payload> for honker::Payload {
    fn from(p: Payload) -> honker::Payload {
        match p {
            Payload::Json { text } => honker::Payload::Json(text),
            Payload::Bytes { data } => honker::Payload::Bytes(data),
        }
    }
}

impl From<honker::Payload> for Payload {
    fn from(p: honker::Payload) -> Payload {
        match p {
            honker::Payload::Json(text) => Payload::Json { text },
            honker::Payload::Bytes(data) => Payload::Bytes { data },
        }
    }
}

/// An SQL parameter or column value.
#[derive(Debug, Clone, uniffi::Enum)]
pub enum SqlValue {
    Null,
    Integer { value: i64 },
    Real { value: f64 },
    Text { value: String },
    Blob { value: Vec<u8> },
}

type Value = honker::rusqlite::types::Value;

impl From<SqlValue> for Value {
    fn from(v: SqlValue) -> Value {
        match v {
            SqlValue::Null => Value::Null,
            SqlValue::Integer { value } => Value::Integer(value),
            SqlValue::Real { value } => Value::Real(value),
            SqlValue::Text { value } => Value::Text(value),
            SqlValue::Blob { value } => Value::Blob(value),
        }
    }
}

impl From<Value> for SqlValue {
    fn from(v: Value) -> SqlValue {
        match v {
            Value::Null => SqlValue::Null,
            Value::Integer(value) => SqlValue::Integer { value },
            Value::Real(value) => SqlValue::Real { value },
            Value::Text(value) => SqlValue::Text { value },
            Value::Blob(value) => SqlValue::Blob { value },
        }
    }
}

#[derive(Debug, uniffi::Record)]
pub struct Rows {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<SqlValue>>,
}

pub(crate) fn rows(r: honker::Rows) -> Rows {
    Rows {
        columns: r.columns,
        rows: r
            .rows
            .into_iter()
            .map(|row| row.into_iter().map(SqlValue::from).collect())
            .collect(),
    }
}

/// A connection handle passed from Swift as its address.
pub(crate) fn handle_ptr(handle: u64) -> R<*mut honker::rusqlite::ffi::sqlite3> {
    let addr = usize::try_from(handle).map_err(|_| {
        honker::Error::new(
            honker::ErrorKind::InvalidArgument,
            format!("connection handle {handle:#x} is not an address"),
        )
    })?;
    Ok(std::ptr::with_exposed_provenance_mut(addr))
}

pub(crate) fn params(p: Vec<SqlValue>) -> Vec<Value> {
    p.into_iter().map(Value::from).collect()
}

#[derive(Debug, uniffi::Record)]
pub struct OpenOptions {
    /// `"normal"` or `"full"` (fsync every commit). Every field: `None` is
    /// core's default (`OptionsPatch`), written nowhere else.
    #[uniffi(default = None)]
    pub durability: Option<String>,
    /// How long a write waits for another process's lock (ms).
    #[uniffi(default = None)]
    pub busy_timeout_ms: Option<u64>,
    /// Read connections in the pool.
    #[uniffi(default = None)]
    pub readers: Option<u32>,
    /// Largest payload or result (bytes).
    #[uniffi(default = None)]
    pub max_payload_bytes: Option<u64>,
}

/// A queue's stored settings (`Queue::settings`), in ms; `None` where not
/// set (honker's default applies: a 60 s lease, 3 attempts, 1 s doubling to
/// 1 h with jitter 0.5). The settings given go in as `QueueArgs`.
#[derive(Debug, uniffi::Record)]
pub struct QueueOptions {
    #[uniffi(default = None)]
    pub lease_ms: Option<u64>,
    #[uniffi(default = None)]
    pub max_attempts: Option<u32>,
    #[uniffi(default = None)]
    pub backoff_base_ms: Option<u64>,
    #[uniffi(default = None)]
    pub backoff_max_ms: Option<u64>,
    #[uniffi(default = None)]
    pub backoff_jitter: Option<f64>,
}

impl QueueOptions {
    /// Core's settings in ms.
    pub(crate) fn from_settings(s: &honker::QueueSettings) -> QueueOptions {
        let ms = |d: Option<std::time::Duration>| d.map(|d| d.as_millis() as u64);
        QueueOptions {
            lease_ms: ms(s.lease),
            max_attempts: s.max_attempts,
            backoff_base_ms: ms(s.backoff_base),
            backoff_max_ms: ms(s.backoff_max),
            backoff_jitter: s.backoff_jitter,
        }
    }
}

/// An open honker file.
#[derive(Debug, uniffi::Object)]
pub struct Database {
    db: honker::Database,
}

/// A clock that only moves when told to (for tests).
#[derive(Debug, uniffi::Object)]
pub struct ManualClock {
    clock: honker::ManualClock,
}

#[uniffi::export]
impl ManualClock {
    /// Starts at `now_ms` (ms since the Unix epoch).
    #[uniffi::constructor]
    pub fn new(now_ms: i64) -> R<Arc<ManualClock>> {
        Ok(Arc::new(ManualClock {
            clock: honker::ManualClock::checked(now_ms)?,
        }))
    }

    pub fn advance(&self, ms: u64) -> R<()> {
        Ok(self.clock.try_advance(self::ms("ms", ms)?)?)
    }

    pub fn now_ms(&self) -> i64 {
        use honker::Clock as _;
        self.clock.now_ms()
    }
}

fn options(o: OpenOptions) -> R<honker::Options> {
    Ok(honker::OptionsPatch {
        durability: o.durability.as_deref().map(str::parse).transpose()?,
        busy_timeout: opt_ms("busy_timeout", o.busy_timeout_ms)?,
        readers: o.readers.map(|v| v as usize),
        max_payload_bytes: o
            .max_payload_bytes
            .map(|v| usize::try_from(v).unwrap_or(usize::MAX)),
        ..honker::OptionsPatch::default()
    }
    .apply())
}

impl Database {
    pub(crate) fn core(&self) -> &honker::Database {
        &self.db
    }
}

#[uniffi::export]
impl Database {
    /// Opens (creating if needed) the honker file at `path`.
    #[uniffi::constructor]
    pub fn open(path: String, options: OpenOptions) -> R<Arc<Database>> {
        Ok(Arc::new(Database {
            db: honker::Database::open_with(path, self::options(options)?)?,
        }))
    }

    /// Registers honker's SQL functions on a connection to this file that
    /// the app opened itself (GRDB's `sqlite3` handle, as an address): see
    /// core's `Database::register_functions_on`. The handle must stay open
    /// for the call and belong to the system SQLite, which this library is
    /// built on (it has no SQLite of its own).
    pub fn register_functions(&self, handle: u64) -> R<()> {
        let db = handle_ptr(handle)?;
        // SAFETY: the Swift caller passes an open connection of the process's
        // one SQLite library (this library links the system's and defines
        // none), used by no other thread during the call (documented).
        unsafe { self.db.register_functions_on(db)? };
        Ok(())
    }

    /// `open` on a `ManualClock` (tests).
    #[uniffi::constructor]
    pub fn open_with_clock(
        path: String,
        options: OpenOptions,
        clock: Arc<ManualClock>,
    ) -> R<Arc<Database>> {
        let mut o = self::options(options)?;
        o.clock = Arc::new(clock.clock.clone());
        Ok(Arc::new(Database {
            db: honker::Database::open_with(path, o)?,
        }))
    }

    pub fn path(&self) -> String {
        self.db.path().to_string_lossy().into_owned()
    }

    /// A queue handle; each `Some` overrides that default.
    pub fn queue(&self, name: String, options: crate::records::QueueArgs) -> R<Arc<Queue>> {
        let given = options.to_core()?;
        Ok(Arc::new(Queue::new(self.db.queue_given(&name, &given)?)))
    }

    /// Starts a write transaction (`BEGIN IMMEDIATE`).
    pub fn begin(&self) -> R<Arc<Transaction>> {
        Ok(Arc::new(Transaction {
            tx: Mutex::new(Some(self.db.transaction()?)),
        }))
    }

    pub fn execute(&self, sql: String, params: Vec<SqlValue>) -> R<u64> {
        let values = self::params(params);
        Ok(self
            .db
            .execute(&sql, honker::rusqlite::params_from_iter(values.iter()))? as u64)
    }

    pub fn query(&self, sql: String, params: Vec<SqlValue>) -> R<Rows> {
        let values = self::params(params);
        Ok(rows(self.db.query(
            &sql,
            honker::rusqlite::params_from_iter(values.iter()),
        )?))
    }

    /// Every queue's metrics (ADR 27) as core's JSON list.
    pub fn metrics_json(&self) -> R<String> {
        let list = self.db.metrics()?;
        Ok(format!(
            "[{}]",
            list.iter()
                .map(|m| m.to_json().to_string())
                .collect::<Vec<_>>()
                .join(",")
        ))
    }

    /// Every queue's metrics in Prometheus's text format.
    pub fn metrics_text(&self) -> R<String> {
        Ok(self.db.metrics_text()?)
    }

    /// Pauses every queue for every process (core's `Database::pause_all`).
    pub fn pause_all(&self, options: crate::records::PauseArgs) -> R<()> {
        Ok(self.db.pause_all(&options.to_core()?)?)
    }

    /// Lifts the pause of all queues; whether there was one.
    pub fn resume_all(&self) -> R<bool> {
        Ok(self.db.resume_all()?)
    }

    /// Prunes past retention; returns what was removed, by kind.
    pub fn maintain(&self) -> R<MaintenanceReport> {
        Ok(self.db.maintain()?.into())
    }

    pub fn close(&self) -> R<()> {
        Ok(self.db.close()?)
    }
}

/// An open write transaction.
#[derive(Debug, uniffi::Object)]
pub struct Transaction {
    tx: Mutex<Option<honker::Transaction>>,
}

impl Transaction {
    pub(crate) fn with<T>(
        &self,
        f: impl FnOnce(&honker::Transaction) -> honker::Result<T>,
    ) -> R<T> {
        let guard = self.tx.lock().unwrap_or_else(|p| p.into_inner());
        match guard.as_ref() {
            Some(tx) => Ok(f(tx)?),
            None => Err(honker::Error::transaction_finished().into()),
        }
    }

    fn take(&self) -> Option<honker::Transaction> {
        self.tx.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// Runs `f` inside `tx` when one is given, else on its own.
pub(crate) fn in_tx<T>(
    tx: &Option<Arc<Transaction>>,
    f: impl FnOnce(Option<&honker::Transaction>) -> honker::Result<T>,
) -> R<T> {
    match tx {
        Some(t) => t.with(|tx| f(Some(tx))),
        None => Ok(f(None)?),
    }
}

#[uniffi::export]
impl Transaction {
    pub fn execute(&self, sql: String, params: Vec<SqlValue>) -> R<u64> {
        let values = self::params(params);
        self.with(|tx| tx.execute(&sql, honker::rusqlite::params_from_iter(values.iter())))
            .map(|n| n as u64)
    }

    pub fn query(&self, sql: String, params: Vec<SqlValue>) -> R<Rows> {
        let values = self::params(params);
        self.with(|tx| tx.query(&sql, honker::rusqlite::params_from_iter(values.iter())))
            .map(rows)
    }

    pub fn commit(&self) -> R<()> {
        match self.take() {
            Some(tx) => Ok(tx.commit()?),
            None => Err(honker::Error::transaction_finished().into()),
        }
    }

    /// Rolls back; a no-op on a finished transaction.
    pub fn rollback(&self) -> R<()> {
        match self.take() {
            Some(tx) => Ok(tx.rollback()?),
            None => Ok(()),
        }
    }

    pub fn is_open(&self) -> bool {
        self.tx.lock().map(|g| g.is_some()).unwrap_or(false)
    }
}
