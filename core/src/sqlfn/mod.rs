//! What every primitive's SQL-function table (its `sqlfn.rs`) is made of:
//! the row type ([`SqlFn`]: name, arity, flags, call), one call's
//! arguments with coded errors ([`Args`]), the value returned ([`Out`]),
//! the host's configuration ([`SqlConfig`]) and [`atomically`]. `sql/`
//! registers the tables; this layer sits below the primitives, so that a
//! primitive's table does not import the registry that names it.

use std::ffi::c_int;
use std::sync::Arc;

use libsqlite3_sys as ffi;
use serde_json::{json, Value as Json};

use crate::clock::{Clock, SystemClock};
use crate::error::Result;
use crate::payload::Payload;
use crate::raw::Conn;

mod args;
mod json_options;
pub use json_options::{FromJsonOptions, JsonOption};

pub(crate) use args::Args;

/// What the functions need from their host.
#[derive(Clone, Debug)]
pub struct SqlConfig {
    /// Time source. Defaults to the system clock.
    pub clock: Arc<dyn Clock>,
    /// Largest payload accepted. Defaults to 1 MiB.
    pub max_payload_bytes: usize,
}

impl SqlConfig {
    /// What a database opened with `options` gives its functions.
    #[cfg(feature = "rusqlite")]
    pub(crate) fn of(options: &crate::Options) -> SqlConfig {
        SqlConfig {
            clock: Arc::clone(&options.clock),
            max_payload_bytes: options.max_payload_bytes,
        }
    }
}

impl Default for SqlConfig {
    fn default() -> SqlConfig {
        SqlConfig {
            clock: Arc::new(SystemClock),
            max_payload_bytes: 1 << 20,
        }
    }
}

/// Flags of a function that must not run from a view or trigger of the
/// database file (every function that reads or writes honker's tables).
pub(crate) const DIRECT_ONLY: c_int = ffi::SQLITE_UTF8 | ffi::SQLITE_DIRECTONLY;
/// Flags of a pure function (same result for the same arguments, no I/O).
pub(crate) const PURE: c_int = ffi::SQLITE_UTF8 | ffi::SQLITE_INNOCUOUS | ffi::SQLITE_DETERMINISTIC;

/// One SQL function: a row of a primitive's table (the sqlite-vec way:
/// name, argument count, flags, call), registered by [`register_handle`].
#[derive(Debug)]
pub(crate) struct SqlFn {
    pub(crate) name: &'static str,
    /// -1: any number (the call checks).
    pub(crate) n_arg: i32,
    pub(crate) flags: c_int,
    /// Runs in a savepoint or transaction of its own ([`atomically`]).
    pub(crate) atomic: bool,
    pub(crate) call: fn(&Call<'_>) -> Result<Out>,
}

impl SqlFn {
    /// A function whose work must change all or nothing.
    pub(crate) const fn atomic(
        name: &'static str,
        n_arg: i32,
        flags: c_int,
        call: fn(&Call<'_>) -> Result<Out>,
    ) -> SqlFn {
        SqlFn {
            name,
            n_arg,
            flags,
            atomic: true,
            call,
        }
    }

    /// A function that touches no table.
    pub(crate) const fn plain(
        name: &'static str,
        n_arg: i32,
        flags: c_int,
        call: fn(&Call<'_>) -> Result<Out>,
    ) -> SqlFn {
        SqlFn {
            name,
            n_arg,
            flags,
            atomic: false,
            call,
        }
    }
}

/// One call of a function: its arguments, the connection it runs on, the
/// time, the host's configuration.
pub(crate) struct Call<'a> {
    pub(crate) args: Args<'a>,
    pub(crate) conn: Conn<'a>,
    pub(crate) now: i64,
    pub(crate) config: &'a SqlConfig,
}

/// The value a function returns.
pub(crate) enum Out {
    Int(i64),
    Text(String),
    Blob(Vec<u8>),
    Null,
}

/// Runs `f` so that a failure part-way changes nothing:
/// - inside a write statement (a trigger, `INSERT ... SELECT honker_...`),
///   directly: the statement is already atomic, SQLite allows no savepoint
///   there, and the error this function raises rolls the statement back;
/// - inside the caller's transaction, in a savepoint, so it commits with it;
/// - otherwise in a `BEGIN IMMEDIATE` transaction of its own, which waits for
///   the write lock under the connection's busy timeout instead of failing
///   on a stale read snapshot.
pub(crate) fn atomically<T>(conn: Conn<'_>, f: impl FnOnce() -> Result<T>) -> Result<T> {
    if conn.write_statement_running() {
        return f();
    }
    if !conn.is_autocommit() {
        return conn.in_savepoint(f);
    }
    conn.execute_batch("BEGIN IMMEDIATE")?;
    match f() {
        Ok(v) => match conn.execute_batch("COMMIT") {
            Ok(()) => Ok(v),
            Err(e) => {
                let _ = conn.execute_batch("ROLLBACK");
                Err(e)
            }
        },
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}

pub(crate) fn secs_ms(s: f64) -> i64 {
    (s * 1000.0).round() as i64
}

/// Milliseconds as Honker's whole seconds, rounded up: the first second at
/// or after `ms` (a time in Honker's contract is "from then on").
pub(crate) fn ms_secs_up(ms: i64) -> i64 {
    ms.div_euclid(1000) + i64::from(ms.rem_euclid(1000) != 0)
}

pub(crate) fn payload_json(p: &Payload) -> Json {
    match p {
        Payload::Json(t) => serde_json::from_str(t).unwrap_or(Json::Null),
        Payload::Bytes(b) => {
            json!({ "bytes_hex": b.iter().map(|x| format!("{x:02x}")).collect::<String>() })
        }
    }
}

/// A trace context in a SQL function's JSON: the object of its W3C headers,
/// or null.
pub(crate) fn trace_json(t: Option<&crate::TraceContext>) -> Json {
    t.map_or(Json::Null, crate::TraceContext::to_value)
}
