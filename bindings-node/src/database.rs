//! `Database` and `Transaction` for Node: open options, the application's
//! own SQL (`execute`/`query`) and the outbox transaction.
//!
//! A transaction lives in its database's registry under a numeric id; the
//! JS layer passes that id as `tx` to queue calls. (Async napi methods cannot
//! borrow another JS object across an await; an id can cross any thread.)

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use honker::rusqlite::types::Value;
use napi::bindgen_prelude::{Buffer, Either4};
use napi_derive::napi;

use napi::bindgen_prelude::AsyncBlock;
use napi::Env;

use crate::errors::{invalid, ms, now, opt_ms, out, pending, verbs, Op, Out};
use crate::queue::Queue;
use crate::records::MaintenanceReport;

/// An SQL parameter from JS: `null`/`undefined`, a boolean, a number, a
/// string or a Buffer.
pub type SqlIn = Option<Either4<bool, f64, String, Buffer>>;
/// A value from SQL: `null`, an integer, a float, a string or a Buffer.
pub type SqlOut = Option<Either4<i64, f64, String, Buffer>>;

#[napi(object)]
pub struct OpenOptions {
    /// "normal" (default) or "full".
    pub durability: Option<String>,
    /// How long a write waits for another process's lock (ms). 10,000.
    pub busy_timeout: Option<f64>,
    /// Reader connections. 4.
    pub readers: Option<u32>,
    /// Largest payload, in bytes. 1 MiB.
    pub max_payload_bytes: Option<u32>,
    /// The watcher's timed re-check (ms). 100.
    pub watch_fallback: Option<f64>,
    /// How often writes also prune past retention (ms; 0 disables). 300,000.
    pub auto_maintain_every: Option<f64>,
}

/// A queue's stored settings (`queue.settings()`), durations in ms; a
/// field absent where not set. The settings given go in as `QueueArgs`.
#[napi(object)]
pub struct QueueOptions {
    /// Lease length (ms). 60,000.
    pub lease: Option<f64>,
    /// Attempts before a job is dead-lettered. 3.
    pub max_attempts: Option<u32>,
    /// Retry backoff: first delay (ms). 1,000.
    pub backoff_base: Option<f64>,
    /// Retry backoff: largest delay (ms). 3,600,000.
    pub backoff_max: Option<f64>,
    /// Retry backoff: jitter, 0 to 1. 0.5.
    pub backoff_jitter: Option<f64>,
}

impl QueueOptions {
    /// Core's settings as JS options (durations in ms).
    pub(crate) fn from_settings(s: &honker::QueueSettings) -> QueueOptions {
        let ms = |d: Option<std::time::Duration>| d.map(|d| d.as_secs_f64() * 1000.0);
        QueueOptions {
            lease: ms(s.lease),
            max_attempts: s.max_attempts,
            backoff_base: ms(s.backoff_base),
            backoff_max: ms(s.backoff_max),
            backoff_jitter: s.backoff_jitter,
        }
    }
}

#[napi(object)]
pub struct Rows {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<SqlOut>>,
}

/// Open transactions of one database, by id.
#[derive(Default)]
pub(crate) struct Txs {
    next: AtomicU32,
    open: Mutex<HashMap<u32, Slot>>,
    /// The JS thread's id, from its first `begin` (0: not yet; see stall.rs).
    js_thread: AtomicI64,
    /// Transactions stall.rs rolled back, with why: their next call says it.
    rolled_back: Mutex<HashMap<u32, &'static str>>,
    /// stall.rs's samples running that found the JS thread asleep with a
    /// transaction between calls (only its watch thread touches it).
    pub(crate) asleep_samples: AtomicU32,
}

type Slot = Arc<Mutex<Option<honker::Transaction>>>;

impl Txs {
    /// A new database's registry, watched by stall.rs.
    fn new() -> Arc<Txs> {
        let txs = Arc::new(Txs::default());
        crate::stall::add(&txs);
        txs
    }

    fn insert(&self, tx: honker::Transaction) -> u32 {
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        self.lock().insert(id, Arc::new(Mutex::new(Some(tx))));
        crate::stall::opened();
        id
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u32, Slot>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn take(&self, id: u32) -> Option<honker::Transaction> {
        let slot = self.lock().remove(&id)?;
        let tx = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
        tx
    }

    /// Notes the calling thread as the JS thread (a napi call's).
    fn on_js_thread(&self) {
        if self.js_thread.load(Ordering::Relaxed) == 0 {
            self.js_thread
                .store(crate::stall::this_thread(), Ordering::Relaxed);
        }
    }

    pub(crate) fn js_thread(&self) -> Option<i64> {
        Some(self.js_thread.load(Ordering::Relaxed)).filter(|&t| t != 0)
    }

    pub(crate) fn any_open(&self) -> bool {
        !self.lock().is_empty()
    }

    /// The open transactions' slots, taken out of the registry's lock.
    fn slots(&self) -> Vec<(u32, Slot)> {
        self.lock()
            .iter()
            .map(|(id, s)| (*id, Arc::clone(s)))
            .collect()
    }

    /// Whether an open transaction is between calls (none is using it).
    pub(crate) fn has_idle_open(&self) -> bool {
        self.slots()
            .iter()
            .any(|(_, slot)| slot.try_lock().is_ok_and(|g| g.is_some()))
    }

    /// Rolls back the open transactions no call is using now; their next
    /// call fails `ROLLED_BACK` with `why`.
    pub(crate) fn roll_back_idle(&self, why: &'static str) {
        let open = self.slots();
        for (id, slot) in open {
            let Ok(mut guard) = slot.try_lock() else {
                continue;
            };
            if let Some(tx) = guard.take() {
                self.rolled_back
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(id, why);
                self.lock().remove(&id);
                drop(guard);
                let _ = tx.rollback();
            }
        }
    }

    /// Why transaction `id` is gone: `ROLLED_BACK` if stall.rs rolled it
    /// back (`forget`: and no later call needs to know), else finished.
    fn gone(&self, id: u32, forget: bool) -> honker::Error {
        let mut rolled = self.rolled_back.lock().unwrap_or_else(|p| p.into_inner());
        let why = if forget {
            rolled.remove(&id)
        } else {
            rolled.get(&id).copied()
        };
        match why {
            Some(why) => honker::Error::new(honker::ErrorKind::RolledBack, why),
            None => honker::Error::transaction_finished(),
        }
    }
}

/// Runs `f` inside transaction `id` when one is given, else on its own.
/// Call on a blocking thread.
pub(crate) fn with_tx<R>(
    txs: &Txs,
    id: Option<u32>,
    f: impl FnOnce(Option<&honker::Transaction>) -> honker::Result<R>,
) -> honker::Result<R> {
    let Some(id) = id else { return f(None) };
    let slot = txs.lock().get(&id).cloned();
    let finished = || txs.gone(id, false);
    let slot = slot.ok_or_else(finished)?;
    // Without waiting (the JS thread's fast path), a transaction still busy
    // with an earlier async call is BUSY: the caller retries asynchronously.
    let guard = if honker::waiting_forbidden() {
        match slot.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => {
                return Err(honker::Error::new(
                    honker::ErrorKind::Busy,
                    "the transaction is busy with another call",
                ))
            }
        }
    } else {
        slot.lock().unwrap_or_else(|p| p.into_inner())
    };
    match guard.as_ref() {
        Some(tx) => f(Some(tx)),
        None => Err(finished()),
    }
}

fn params(values: Option<Vec<SqlIn>>) -> Vec<Value> {
    values
        .unwrap_or_default()
        .into_iter()
        .map(|v| match v {
            None => Value::Null,
            Some(Either4::A(b)) => Value::Integer(i64::from(b)),
            Some(Either4::B(n)) if n.fract() == 0.0 && n.abs() < 9.007_199_254_740_992e15 => {
                Value::Integer(n as i64)
            }
            Some(Either4::B(n)) => Value::Real(n),
            Some(Either4::C(s)) => Value::Text(s),
            Some(Either4::D(b)) => Value::Blob(b.to_vec()),
        })
        .collect()
}

fn rows_out(rows: honker::Rows) -> Rows {
    Rows {
        columns: rows.columns,
        rows: rows
            .rows
            .into_iter()
            .map(|r| {
                r.into_iter()
                    .map(|v| match v {
                        Value::Null => None,
                        Value::Integer(i) => Some(Either4::A(i)),
                        Value::Real(f) => Some(Either4::B(f)),
                        Value::Text(s) => Some(Either4::C(s)),
                        Value::Blob(b) => Some(Either4::D(b.into())),
                    })
                    .collect()
            })
            .collect(),
    }
}

/// The caller's options over core's defaults (`OptionsPatch`: no default is
/// written here).
fn open_options(o: Option<OpenOptions>) -> honker::Result<honker::Options> {
    let Some(o) = o else {
        return Ok(honker::OptionsPatch::default().apply());
    };
    Ok(honker::OptionsPatch {
        durability: o.durability.as_deref().map(str::parse).transpose()?,
        busy_timeout: opt_ms("busyTimeout", o.busy_timeout)?,
        readers: o.readers.map(|v| v as usize),
        max_payload_bytes: o.max_payload_bytes.map(|v| v as usize),
        watch_fallback: opt_ms("watchFallback", o.watch_fallback)?,
        auto_maintain_every: opt_ms("autoMaintainEvery", o.auto_maintain_every)?,
        // Not offered here: the default (1 s batches, ADR 27).
        metrics_flush_every: None,
        clock: None,
    }
    .apply())
}

/// Opens (creating if needed) the honker file at `path`.
#[napi]
pub fn open(
    env: Env,
    path: String,
    options: Option<OpenOptions>,
) -> napi::Result<AsyncBlock<Out<Database>>> {
    pending(
        &env,
        Box::new(move || {
            let options = open_options(options)?;
            Ok(Database {
                db: honker::Database::open_with(&path, options)?,
                txs: Txs::new(),
            })
        }),
    )
}

/// An open honker file.
#[napi]
pub struct Database {
    db: honker::Database,
    txs: Arc<Txs>,
}

impl Database {
    pub(crate) fn core(&self) -> &honker::Database {
        &self.db
    }

    pub(crate) fn txs(&self) -> Arc<Txs> {
        Arc::clone(&self.txs)
    }

    fn opened(&self, r: Out<honker::Transaction>) -> Out<Transaction> {
        match r {
            napi::Either::A(tx) => napi::Either::A(Transaction {
                id: self.txs.insert(tx),
                txs: Arc::clone(&self.txs),
            }),
            napi::Either::B(f) => napi::Either::B(f),
        }
    }

    fn pause_all_op(&self, options: crate::records::PauseArgs) -> Op<()> {
        let db = self.db.clone();
        Box::new(move || db.pause_all(&options.to_core()?))
    }

    fn resume_all_op(&self) -> Op<bool> {
        let db = self.db.clone();
        Box::new(move || db.resume_all())
    }

    fn execute_op(&self, sql: String, params: Option<Vec<SqlIn>>) -> Op<i64> {
        let db = self.db.clone();
        let values = self::params(params);
        Box::new(move || {
            db.execute(&sql, honker::rusqlite::params_from_iter(values.iter()))
                .map(|n| n as i64)
        })
    }

    fn query_op(&self, sql: String, params: Option<Vec<SqlIn>>) -> Op<Rows> {
        let db = self.db.clone();
        let values = self::params(params);
        Box::new(move || {
            db.query(&sql, honker::rusqlite::params_from_iter(values.iter()))
                .map(rows_out)
        })
    }
}

#[napi]
impl Database {
    /// The canonical path of the file.
    #[napi(getter)]
    pub fn path(&self) -> String {
        self.db.path().to_string_lossy().into_owned()
    }

    /// The busy timeout in ms: how long a write waits for the writer (the
    /// JS layer's queue of this process's writers uses it too).
    #[napi(getter)]
    pub fn busy_timeout(&self) -> f64 {
        self.db.options().busy_timeout.as_secs_f64() * 1000.0
    }

    /// A handle on a queue (writes nothing, so it is synchronous).
    #[napi]
    pub fn queue(&self, name: String, options: Option<crate::records::QueueArgs>) -> Out<Queue> {
        out((|| {
            let given = options.unwrap_or_default().to_core()?;
            let q = self.db.queue_given(&name, &given)?;
            Ok(Queue::new(q, Arc::clone(&self.txs)))
        })())
    }

    /// Starts a write transaction (`BEGIN IMMEDIATE`).
    #[napi]
    pub fn begin(&self, env: Env) -> napi::Result<AsyncBlock<Out<Transaction>>> {
        self.txs.on_js_thread();
        let (db, txs) = (self.db.clone(), Arc::clone(&self.txs));
        pending(
            &env,
            Box::new(move || {
                let tx = db.transaction_detached()?;
                Ok(Transaction {
                    id: txs.insert(tx),
                    txs,
                })
            }),
        )
    }

    #[napi]
    pub fn try_begin(&self) -> Out<Transaction> {
        self.txs.on_js_thread();
        let db = self.db.clone();
        self.opened(now(move || db.transaction_detached()))
    }

    /// Every queue's metrics (ADR 27) as core's JSON list.
    #[napi]
    pub fn metrics_json(&self, env: Env) -> napi::Result<AsyncBlock<Out<String>>> {
        let db = self.db.clone();
        pending(
            &env,
            Box::new(move || {
                db.metrics().map(|list| {
                    serde_json::Value::Array(list.iter().map(|m| m.to_json()).collect()).to_string()
                })
            }),
        )
    }

    /// Every queue's metrics in Prometheus's text format.
    #[napi]
    pub fn metrics_text(&self, env: Env) -> napi::Result<AsyncBlock<Out<String>>> {
        let db = self.db.clone();
        pending(&env, Box::new(move || db.metrics_text()))
    }

    /// Prunes past retention.
    #[napi]
    pub fn maintain(&self, env: Env) -> napi::Result<AsyncBlock<Out<MaintenanceReport>>> {
        let db = self.db.clone();
        pending(
            &env,
            Box::new(move || db.maintain().map(MaintenanceReport::from)),
        )
    }

    #[napi]
    pub fn close(&self, env: Env) -> napi::Result<AsyncBlock<Out<()>>> {
        let db = self.db.clone();
        pending(&env, Box::new(move || db.close()))
    }
}

verbs! {
    impl Database;
    #[doc = "Runs one statement in its own transaction; resolves to rows changed."]
    execute / try_execute (sql: String, params: Option<Vec<SqlIn>>) -> i64 = execute_op;
    #[doc = "Runs a read-only query on a reader connection."]
    query / try_query (sql: String, params: Option<Vec<SqlIn>>) -> Rows = query_op;
    #[doc = "Pauses every queue for every process (ADR 33)."]
    pause_all / try_pause_all (options: crate::records::PauseArgs) -> () = pause_all_op;
    #[doc = "Lifts the pause of all queues; whether there was one."]
    resume_all / try_resume_all () -> bool = resume_all_op;
}

/// An open write transaction, known to queue calls by `id`.
#[napi]
pub struct Transaction {
    id: u32,
    txs: Arc<Txs>,
}

verbs! {
    impl Transaction;
    execute / try_execute (sql: String, params: Option<Vec<SqlIn>>) -> i64 = execute_op;
    query / try_query (sql: String, params: Option<Vec<SqlIn>>) -> Rows = query_op;
}

impl Transaction {
    fn execute_op(&self, sql: String, params: Option<Vec<SqlIn>>) -> Op<i64> {
        let (txs, id) = (Arc::clone(&self.txs), self.id);
        let values = self::params(params);
        Box::new(move || {
            with_tx(&txs, Some(id), |tx| {
                let tx = tx.expect("with an id");
                tx.execute(&sql, honker::rusqlite::params_from_iter(values.iter()))
                    .map(|n| n as i64)
            })
        })
    }

    fn query_op(&self, sql: String, params: Option<Vec<SqlIn>>) -> Op<Rows> {
        let (txs, id) = (Arc::clone(&self.txs), self.id);
        let values = self::params(params);
        Box::new(move || {
            with_tx(&txs, Some(id), |tx| {
                let tx = tx.expect("with an id");
                tx.query(&sql, honker::rusqlite::params_from_iter(values.iter()))
                    .map(rows_out)
            })
        })
    }

    fn finish_op(&self, commit: bool) -> Op<()> {
        let (txs, id) = (Arc::clone(&self.txs), self.id);
        Box::new(move || match (txs.take(id), commit) {
            (Some(tx), true) => tx.commit(),
            (Some(tx), false) => tx.rollback(),
            (None, true) => Err(txs.gone(id, true)),
            (None, false) => {
                txs.gone(id, true);
                Ok(())
            }
        })
    }
}

#[napi]
impl Transaction {
    #[napi(getter)]
    pub fn id(&self) -> u32 {
        self.id
    }

    #[napi]
    pub fn commit(&self, env: Env) -> napi::Result<AsyncBlock<Out<()>>> {
        pending(&env, self.finish_op(true))
    }

    /// Commit waits for no lock (the transaction holds the writer), so it
    /// runs here directly; a BUSY from it is a real error, not a retry.
    #[napi]
    pub fn try_commit(&self) -> Out<()> {
        out(self.finish_op(true)())
    }

    /// Rolls back; a no-op on a finished transaction.
    #[napi]
    pub fn rollback(&self, env: Env) -> napi::Result<AsyncBlock<Out<()>>> {
        pending(&env, self.finish_op(false))
    }

    #[napi]
    pub fn try_rollback(&self) -> Out<()> {
        out(self.finish_op(false)())
    }
}

/// A clock that only moves when told to (tests: `new ManualClock(ms)`).
#[napi]
pub struct ManualClock {
    clock: honker::ManualClock,
}

#[napi]
impl ManualClock {
    /// Starts at the real time; index.js's `ManualClock` sets its time
    /// with `startAt` (checked) before anyone sees it.
    #[napi(constructor)]
    pub fn new() -> ManualClock {
        ManualClock {
            clock: honker::ManualClock::starting_now(),
        }
    }

    /// Sets the time of a clock nobody uses yet to `nowMs` (ms since the
    /// Unix epoch, whole): `INVALID_ARGUMENT` unless a time core accepts.
    #[napi]
    pub fn start_at(&self, now_ms: f64) -> Out<()> {
        let checked = if now_ms.is_finite() && now_ms.fract() == 0.0 {
            self.clock.try_set(now_ms as i64)
        } else {
            Err(invalid(format!(
                "a ManualClock's time must be a whole number of ms since the Unix epoch, got {now_ms}"
            )))
        };
        out(checked)
    }

    /// Moves time forward by `ms`.
    #[napi]
    pub fn advance(&self, ms: f64) -> Out<()> {
        out(self::ms("ms", ms).and_then(|d| self.clock.try_advance(d)))
    }

    /// The clock's time (ms since the Unix epoch).
    #[napi]
    pub fn now(&self) -> f64 {
        use honker::Clock as _;
        self.clock.now_ms() as f64
    }
}

/// `open` on a `ManualClock`, for tests. Synchronous: it may block the event
/// loop while the file is migrated.
#[napi]
pub fn open_with_clock(
    path: String,
    options: Option<OpenOptions>,
    clock: &ManualClock,
) -> Out<Database> {
    out(open_options(options).and_then(|mut o| {
        o.clock = Arc::new(clock.clock.clone());
        honker::Database::open_with(&path, o).map(|db| Database {
            db,
            txs: Txs::new(),
        })
    }))
}
