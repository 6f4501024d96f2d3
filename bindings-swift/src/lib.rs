//! honker for Swift: the core exported through UniFFI proc-macros (no UDL).
//! The generated Swift (`Sources/HonkerNative`) wraps these objects; the
//! idiomatic layer (`Sources/Honker`: `Encodable` payloads, `async`,
//! `AsyncSequence`) sits on top and runs every call here off the caller's
//! thread.
//!
//! Conversions only: durations cross as milliseconds, times as milliseconds
//! since the Unix epoch, payloads as JSON text or bytes; every error becomes
//! the `HonkerError` enum, one case per stable code.

use std::sync::{Arc, Mutex};
use std::time::Duration;

uniffi::setup_scaffolding!();

// ----- errors ---------------------------------------------------------------

/// Every error, by stable code (`LEASE_LOST` is `LeaseLost`, ...).
#[derive(Debug, uniffi::Error)]
pub enum HonkerError {
    Busy { message: String },
    LeaseLost { message: String },
    NotFound { message: String },
    InvalidArgument { message: String },
    SchemaTooNew { message: String },
    Closed { message: String },
    Timeout { message: String },
    RateLimited { message: String },
    Sqlite { message: String },
    Internal { message: String },
}

impl std::fmt::Display for HonkerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (code, message) = self.parts();
        write!(f, "{code}: {message}")
    }
}

impl std::error::Error for HonkerError {}

impl HonkerError {
    fn parts(&self) -> (&'static str, &str) {
        use HonkerError as E;
        match self {
            E::Busy { message } => ("BUSY", message),
            E::LeaseLost { message } => ("LEASE_LOST", message),
            E::NotFound { message } => ("NOT_FOUND", message),
            E::InvalidArgument { message } => ("INVALID_ARGUMENT", message),
            E::SchemaTooNew { message } => ("SCHEMA_TOO_NEW", message),
            E::Closed { message } => ("CLOSED", message),
            E::Timeout { message } => ("TIMEOUT", message),
            E::RateLimited { message } => ("RATE_LIMITED", message),
            E::Sqlite { message } => ("SQLITE", message),
            E::Internal { message } => ("INTERNAL", message),
        }
    }
}

impl From<honker::Error> for HonkerError {
    fn from(e: honker::Error) -> HonkerError {
        use honker::ErrorKind as K;
        let message = e.message().to_owned();
        match e.kind() {
            K::Busy => HonkerError::Busy { message },
            K::LeaseLost => HonkerError::LeaseLost { message },
            K::NotFound => HonkerError::NotFound { message },
            K::InvalidArgument => HonkerError::InvalidArgument { message },
            K::SchemaTooNew => HonkerError::SchemaTooNew { message },
            K::Closed => HonkerError::Closed { message },
            K::Timeout => HonkerError::Timeout { message },
            K::RateLimited => HonkerError::RateLimited { message },
            K::Sqlite => HonkerError::Sqlite { message },
            _ => HonkerError::Internal { message },
        }
    }
}

type R<T> = Result<T, HonkerError>;

/// The stable code of an error (`"LEASE_LOST"`, ...).
#[uniffi::export]
pub fn error_code(error: &HonkerError) -> String {
    error.parts().0.to_owned()
}

/// Every stable error code, in core's order.
#[uniffi::export]
pub fn error_codes() -> Vec<String> {
    honker::ErrorKind::ALL
        .iter()
        .map(|k| k.code().to_owned())
        .collect()
}

/// The library version.
#[uniffi::export]
pub fn version() -> String {
    env!("CARGO_PKG_VERSION").to_owned()
}

fn ms(what: &str, v: u64) -> R<Duration> {
    Ok(honker::validate::seconds(what, v as f64 / 1000.0)?)
}

fn opt_ms(what: &str, v: Option<u64>) -> R<Option<Duration>> {
    v.map(|v| ms(what, v)).transpose()
}

// ----- values ---------------------------------------------------------------

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

fn rows(r: honker::Rows) -> Rows {
    Rows {
        columns: r.columns,
        rows: r
            .rows
            .into_iter()
            .map(|row| row.into_iter().map(SqlValue::from).collect())
            .collect(),
    }
}

fn params(p: Vec<SqlValue>) -> Vec<Value> {
    p.into_iter().map(Value::from).collect()
}

// ----- database and transaction --------------------------------------------

#[derive(Debug, uniffi::Record)]
pub struct OpenOptions {
    /// Fsync every commit (`synchronous=FULL`); default NORMAL.
    #[uniffi(default = false)]
    pub durability_full: bool,
    /// How long a write waits for another process's lock (ms).
    #[uniffi(default = 10000)]
    pub busy_timeout_ms: u64,
    #[uniffi(default = 4)]
    pub readers: u32,
    #[uniffi(default = 1048576)]
    pub max_payload_bytes: u64,
}

/// Per-queue defaults; `None` keeps honker's (60 s lease, 3 attempts, 1 s
/// doubling to 1 h with jitter 0.5).
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
    pub fn new(now_ms: i64) -> Arc<ManualClock> {
        Arc::new(ManualClock {
            clock: honker::ManualClock::new(now_ms),
        })
    }

    pub fn advance(&self, ms: u64) -> R<()> {
        self.clock.advance(self::ms("ms", ms)?);
        Ok(())
    }

    pub fn now_ms(&self) -> i64 {
        use honker::Clock as _;
        self.clock.now_ms()
    }
}

fn options(o: OpenOptions) -> R<honker::Options> {
    Ok(honker::Options {
        durability: if o.durability_full {
            honker::Durability::Full
        } else {
            honker::Durability::Normal
        },
        busy_timeout: ms("busy_timeout", o.busy_timeout_ms)?,
        readers: o.readers as usize,
        max_payload_bytes: usize::try_from(o.max_payload_bytes).unwrap_or(usize::MAX),
        ..honker::Options::default()
    })
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
    pub fn queue(&self, name: String, options: QueueOptions) -> R<Arc<Queue>> {
        let mut o = honker::QueueOptions::default();
        if let Some(l) = opt_ms("lease", options.lease_ms)? {
            o.lease = l;
        }
        if let Some(n) = options.max_attempts {
            o.max_attempts = n;
        }
        if let Some(b) = opt_ms("backoff_base", options.backoff_base_ms)? {
            o.backoff.base = b;
        }
        if let Some(b) = opt_ms("backoff_max", options.backoff_max_ms)? {
            o.backoff.max = b;
        }
        if let Some(j) = options.backoff_jitter {
            o.backoff.jitter = j;
        }
        Ok(Arc::new(Queue {
            q: self.db.queue_with(&name, o)?,
        }))
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
    fn with<T>(&self, f: impl FnOnce(&honker::Transaction) -> honker::Result<T>) -> R<T> {
        let guard = self.tx.lock().unwrap_or_else(|p| p.into_inner());
        match guard.as_ref() {
            Some(tx) => Ok(f(tx)?),
            None => Err(finished()),
        }
    }

    fn take(&self) -> Option<honker::Transaction> {
        self.tx.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

fn finished() -> HonkerError {
    HonkerError::InvalidArgument {
        message: "the transaction has already finished (committed or rolled back)".into(),
    }
}

/// Runs `f` inside `tx` when one is given, else on its own.
fn in_tx<T>(
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
            None => Err(finished()),
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

// ----- queue ------------------------------------------------------------------

#[derive(Debug, uniffi::Record)]
pub struct EnqueueOptions {
    #[uniffi(default = None)]
    pub delay_ms: Option<u64>,
    #[uniffi(default = None)]
    pub run_at_ms: Option<i64>,
    #[uniffi(default = 0)]
    pub priority: i32,
    #[uniffi(default = None)]
    pub max_attempts: Option<u32>,
    #[uniffi(default = None)]
    pub dedupe_key: Option<String>,
    #[uniffi(default = None)]
    pub expires_ms: Option<u64>,
}

#[derive(Debug, uniffi::Record)]
pub struct Enqueued {
    pub id: i64,
    pub existing: bool,
}

#[derive(Debug, uniffi::Record)]
pub struct ClaimedJob {
    pub id: i64,
    pub payload: Payload,
    pub attempts: u32,
    pub max_attempts: u32,
    pub priority: i32,
    pub run_at_ms: i64,
    pub created_at_ms: i64,
    pub lease_expires_at_ms: i64,
    pub token: String,
}

#[derive(Debug, uniffi::Record)]
pub struct LeaseRecord {
    pub id: i64,
    pub token: String,
}

#[derive(Debug, uniffi::Record)]
pub struct JobInfo {
    pub id: i64,
    pub queue: String,
    pub state: String,
    pub payload: Payload,
    pub priority: i32,
    pub run_at_ms: i64,
    pub attempts: u32,
    pub max_attempts: u32,
    pub dedupe_key: Option<String>,
    pub expires_at_ms: Option<i64>,
    pub created_at_ms: i64,
    pub worker_id: Option<String>,
    pub last_error: Option<String>,
    pub lease_expires_at_ms: Option<i64>,
    pub finished_at_ms: Option<i64>,
}

fn info(j: honker::JobInfo) -> JobInfo {
    JobInfo {
        id: j.id,
        queue: j.queue,
        state: j.state.as_str().to_owned(),
        payload: j.payload.into(),
        priority: j.priority,
        run_at_ms: j.run_at,
        attempts: j.attempts,
        max_attempts: j.max_attempts,
        dedupe_key: j.dedupe_key,
        expires_at_ms: j.expires_at,
        created_at_ms: j.created_at,
        worker_id: j.worker_id,
        last_error: j.last_error,
        lease_expires_at_ms: j.lease_expires_at,
        finished_at_ms: j.finished_at,
    }
}

#[derive(Debug, uniffi::Record)]
pub struct QueueStats {
    pub ready: u64,
    pub scheduled: u64,
    pub running: u64,
    pub lapsed: u64,
    pub dead: u64,
    pub cancelled: u64,
    pub expired: u64,
    pub completed: u64,
    pub oldest_ready_age_ms: Option<i64>,
}

/// A handle on one queue.
#[derive(Debug, uniffi::Object)]
pub struct Queue {
    q: honker::Queue,
}

fn lease(id: i64, token: String) -> honker::Lease {
    honker::Lease { job_id: id, token }
}

#[uniffi::export]
impl Queue {
    pub fn name(&self) -> String {
        self.q.name().to_owned()
    }

    /// The default lease (ms).
    pub fn lease_ms(&self) -> u64 {
        self.q.options().lease.as_millis() as u64
    }

    pub fn enqueue_many(
        &self,
        payloads: Vec<Payload>,
        options: EnqueueOptions,
        tx: Option<Arc<Transaction>>,
    ) -> R<Vec<Enqueued>> {
        let o = honker::EnqueueOptions {
            delay: opt_ms("delay", options.delay_ms)?,
            run_at: options.run_at_ms,
            priority: options.priority,
            max_attempts: options.max_attempts,
            dedupe_key: options.dedupe_key,
            expires: opt_ms("expires", options.expires_ms)?,
            backoff: None,
        };
        let payloads: Vec<honker::Payload> = payloads.into_iter().map(Into::into).collect();
        let done = in_tx(&tx, |tx| match tx {
            Some(tx) => self.q.enqueue_many_tx(tx, payloads, &o),
            None => self.q.enqueue_many(payloads, &o),
        })?;
        Ok(done
            .into_iter()
            .map(|e| Enqueued {
                id: e.id,
                existing: e.existing,
            })
            .collect())
    }

    /// Claims up to `n` jobs, waiting up to `wait_ms` for work.
    pub fn claim(
        &self,
        worker_id: String,
        n: u32,
        lease_ms: Option<u64>,
        wait_ms: u64,
        tx: Option<Arc<Transaction>>,
    ) -> R<Vec<ClaimedJob>> {
        let n = honker::validate::batch(i64::from(n))?;
        let lease = opt_ms("lease", lease_ms)?;
        let wait = ms("wait", wait_ms)?;
        let jobs = in_tx(&tx, |tx| match tx {
            Some(tx) => self.q.claim_tx(tx, &worker_id, n, lease),
            None => self
                .q
                .claim_with(&worker_id, n, &honker::ClaimOptions { lease, wait }),
        })?;
        Ok(jobs
            .into_iter()
            .map(|j| ClaimedJob {
                id: j.id,
                payload: j.payload.into(),
                attempts: j.attempts,
                max_attempts: j.max_attempts,
                priority: j.priority,
                run_at_ms: j.run_at,
                created_at_ms: j.created_at,
                lease_expires_at_ms: j.lease_expires_at,
                token: j.lease.token,
            })
            .collect())
    }

    pub fn ack(
        &self,
        id: i64,
        token: String,
        result: Option<Payload>,
        tx: Option<Arc<Transaction>>,
    ) -> R<()> {
        let l = lease(id, token);
        let result = result.map(Into::into);
        in_tx(&tx, |tx| match tx {
            Some(tx) => self.q.ack_tx(tx, &l, result),
            None => self.q.ack(&l, result),
        })
    }

    pub fn ack_many(&self, leases: Vec<LeaseRecord>, tx: Option<Arc<Transaction>>) -> R<u64> {
        let leases: Vec<honker::Lease> = leases.into_iter().map(|l| lease(l.id, l.token)).collect();
        in_tx(&tx, |tx| match tx {
            Some(tx) => self.q.ack_many_tx(tx, &leases),
            None => self.q.ack_many(&leases),
        })
        .map(|n| n as u64)
    }

    /// The new state: "ready", "scheduled" or "dead".
    pub fn retry(
        &self,
        id: i64,
        token: String,
        delay_ms: Option<u64>,
        error: Option<String>,
        tx: Option<Arc<Transaction>>,
    ) -> R<String> {
        let o = honker::RetryOptions {
            delay: opt_ms("delay", delay_ms)?,
            error,
        };
        let l = lease(id, token);
        in_tx(&tx, |tx| match tx {
            Some(tx) => self.q.retry_tx(tx, &l, &o),
            None => self.q.retry(&l, &o),
        })
        .map(|s| s.as_str().to_owned())
    }

    pub fn fail(
        &self,
        id: i64,
        token: String,
        error: String,
        tx: Option<Arc<Transaction>>,
    ) -> R<()> {
        let l = lease(id, token);
        in_tx(&tx, |tx| match tx {
            Some(tx) => self.q.fail_tx(tx, &l, &error),
            None => self.q.fail(&l, &error),
        })
    }

    pub fn release(&self, id: i64, token: String, tx: Option<Arc<Transaction>>) -> R<()> {
        let l = lease(id, token);
        in_tx(&tx, |tx| match tx {
            Some(tx) => self.q.release_tx(tx, &l),
            None => self.q.release(&l),
        })
    }

    pub fn snooze(
        &self,
        id: i64,
        token: String,
        delay_ms: u64,
        tx: Option<Arc<Transaction>>,
    ) -> R<String> {
        let d = ms("delay", delay_ms)?;
        let l = lease(id, token);
        in_tx(&tx, |tx| match tx {
            Some(tx) => self.q.snooze_tx(tx, &l, d),
            None => self.q.snooze(&l, d),
        })
        .map(|s| s.as_str().to_owned())
    }

    /// The new lease expiry (ms since the epoch).
    pub fn heartbeat(&self, id: i64, token: String, extend_ms: Option<u64>) -> R<i64> {
        let extend = opt_ms("extend", extend_ms)?;
        Ok(self.q.heartbeat(&lease(id, token), extend)?)
    }

    pub fn cancel(&self, id: i64, reason: Option<String>, tx: Option<Arc<Transaction>>) -> R<bool> {
        in_tx(&tx, |tx| match tx {
            Some(tx) => self.q.cancel_tx(tx, id, reason.as_deref()),
            None => self.q.cancel(id, reason.as_deref()),
        })
    }

    pub fn get_job(&self, id: i64) -> R<JobInfo> {
        Ok(info(self.q.get_job(id)?))
    }

    pub fn get_result(&self, id: i64) -> R<Option<Payload>> {
        Ok(self.q.get_result(id)?.map(Into::into))
    }

    pub fn wait_result(&self, id: i64, timeout_ms: u64) -> R<Option<Payload>> {
        let t = ms("timeout", timeout_ms)?;
        Ok(self.q.wait_result(id, t)?.map(Into::into))
    }

    pub fn stats(&self) -> R<QueueStats> {
        let s = self.q.stats()?;
        Ok(QueueStats {
            ready: s.ready,
            scheduled: s.scheduled,
            running: s.running,
            lapsed: s.lapsed,
            dead: s.dead,
            cancelled: s.cancelled,
            expired: s.expired,
            completed: s.completed,
            oldest_ready_age_ms: s.oldest_ready_age_ms,
        })
    }

    pub fn dead_letters(&self, after_id: i64, limit: u32) -> R<Vec<JobInfo>> {
        Ok(self
            .q
            .dead_letters(after_id, limit as usize)?
            .into_iter()
            .map(info)
            .collect())
    }

    pub fn requeue_dead(&self, id: i64) -> R<bool> {
        Ok(self.q.requeue_dead(id)?)
    }

    pub fn requeue_all_dead(&self) -> R<u64> {
        Ok(self.q.requeue_all_dead()? as u64)
    }

    pub fn purge_dead(&self, older_than_ms: Option<u64>) -> R<u64> {
        let older = opt_ms("older_than", older_than_ms)?;
        Ok(self.q.purge_dead(older)? as u64)
    }
}
