//! The SQL surface: honker's queue as SQL functions, registered on honker's
//! own connections (so `tx.execute("SELECT honker_queue_enqueue(...)")` works) and,
//! by the loadable extension, on any SQLite connection. One implementation:
//! every function converts its arguments and calls the same `queue::ops` as
//! the Rust API.
//!
//! Conventions (ADR 15): Honker's names at Honker's arities keep Honker's
//! contracts (seconds, worker ids, 1/0); our forms (`honker_queue_*`,
//! `honker_job_*`, `honker_dead_*`) take and return INTEGER milliseconds,
//! identify a lease by (id, token) and raise errors with the stable code
//! first (`LEASE_LOST: ...`). Every function that writes is `SQLITE_DIRECTONLY`, so
//! a view or trigger inside a hostile database file cannot call it; pure ones
//! are `SQLITE_INNOCUOUS`. Registering performs no DDL: `honker_bootstrap()`
//! does.
//!
//! A function that writes does its work in a savepoint of the connection it
//! runs on: inside the caller's transaction it commits with it; outside one it
//! commits on its own.

use std::ffi::{c_int, c_void, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use crate::error::{Error, ErrorKind, Result};
use crate::raw::{Conn, StmtCache, ValueRef};
use crate::sqlfn::{atomically, Args, Call, Out, SqlFn, DIRECT_ONLY, PURE};
use libsqlite3_sys as ffi;

mod watch;

pub use crate::sqlfn::SqlConfig;
pub use watch::HostWatch;

/// The functions that belong to no primitive.
const CORE: &[SqlFn] = &[
    SqlFn::plain("honker_version", 0, PURE, |_| {
        Ok(Out::Text(env!("CARGO_PKG_VERSION").into()))
    }),
    SqlFn::atomic("honker_bootstrap", 0, DIRECT_ONLY, |c| {
        crate::schema::migrate_nested(c.conn, c.now)?;
        Ok(Out::Int(crate::schema::LATEST))
    }),
];

/// Every function, table by table: the core's, then each primitive's.
fn tables() -> impl Iterator<Item = &'static SqlFn> {
    CORE.iter()
        .chain(crate::queue::sqlfn::FUNCTIONS)
        .chain(crate::stream::sqlfn::FUNCTIONS)
        .chain(crate::stream::group::sqlfn::FUNCTIONS)
        .chain(crate::channel::sqlfn::FUNCTIONS)
        .chain(crate::lock::sqlfn::FUNCTIONS)
        .chain(crate::rate::sqlfn::FUNCTIONS)
        .chain(crate::schedule::sqlfn::FUNCTIONS)
        .chain(crate::import::FUNCTIONS)
}

/// The name and argument count (-1: variable) of every SQL function (the
/// watcher's are registered by the loadable extension only).
pub fn functions() -> Vec<(&'static str, i32)> {
    tables()
        .chain(watch::FUNCTIONS)
        .map(|f| (f.name, f.n_arg))
        .collect()
}

/// Registers every honker SQL function on a rusqlite connection.
#[cfg(feature = "rusqlite")]
pub fn register(conn: &rusqlite::Connection, config: &SqlConfig) -> Result<()> {
    // SAFETY: the handle is open; without a cache the functions keep no
    // statements between calls, so the connection can close at any time.
    unsafe { register_handle(conn.handle(), config.clone(), None) }
}

/// Registers every honker SQL function on the raw connection `db` (what the
/// loadable extension does with the host's connection).
///
/// # Safety
/// `db` must be an open connection. With a `cache`, the cache must be cleared
/// before the connection is closed.
pub(crate) unsafe fn register_handle(
    db: *mut ffi::sqlite3,
    config: SqlConfig,
    cache: Option<Arc<StmtCache>>,
) -> Result<()> {
    // SAFETY: as this function's.
    unsafe { register_fns(db, tables(), &config, cache.as_ref()) }
}

/// # Safety
/// As [`register_handle`].
unsafe fn register_fns(
    db: *mut ffi::sqlite3,
    fns: impl Iterator<Item = &'static SqlFn>,
    config: &SqlConfig,
    cache: Option<&Arc<StmtCache>>,
) -> Result<()> {
    for f in fns {
        let state = Box::new(FnState {
            f,
            config: config.clone(),
            cache: cache.cloned(),
        });
        let c_name = CString::new(f.name).map_err(|_| Error::internal("function name"))?;
        // SAFETY: `db` is open (contract). Ownership of `state` passes to
        // SQLite, which calls `destroy` when the function is replaced, the
        // connection closes, or registration fails.
        let rc = unsafe {
            ffi::sqlite3_create_function_v2(
                db,
                c_name.as_ptr(),
                f.n_arg,
                f.flags,
                Box::into_raw(state).cast::<c_void>(),
                Some(x_func),
                None,
                None,
                Some(destroy),
            )
        };
        if rc != ffi::SQLITE_OK {
            return Err(crate::raw::sqlite_error(
                rc,
                format!("could not register {}", f.name),
            ));
        }
    }
    Ok(())
}

/// Registers the functions for the loadable extension. The host connection's
/// lifetime is the host's business, so no statements are cached.
///
/// # Safety
/// `db` must be an open connection of the SQLite library whose API the
/// calling crate reaches through libsqlite3-sys.
#[doc(hidden)]
pub unsafe fn register_extension(db: *mut ffi::sqlite3) -> Result<()> {
    watch::host_ready();
    // SAFETY: per the contract; no cache.
    unsafe {
        register_fns(
            db,
            tables().chain(watch::FUNCTIONS),
            &SqlConfig::default(),
            None,
        )
    }
}

/// One registered function: its name and what it needs.
struct FnState {
    f: &'static SqlFn,
    config: SqlConfig,
    cache: Option<Arc<StmtCache>>,
}

unsafe extern "C" fn destroy(p: *mut c_void) {
    // SAFETY: `p` came from `Box::into_raw` in `register_handle`; SQLite
    // calls this once.
    drop(unsafe { Box::from_raw(p.cast::<FnState>()) });
}

unsafe extern "C" fn x_func(
    ctx: *mut ffi::sqlite3_context,
    argc: c_int,
    argv: *mut *mut ffi::sqlite3_value,
) {
    // SAFETY: SQLite passes the user data registered with the function, live
    // until `destroy`, and `argc` protected values valid for this call.
    let (state, db, args) = unsafe {
        let state = &*ffi::sqlite3_user_data(ctx).cast::<FnState>();
        let n = usize::try_from(argc).unwrap_or(0);
        let args: Vec<ValueRef<'_>> = (0..n).map(|i| ValueRef::value(*argv.add(i))).collect();
        (state, ffi::sqlite3_context_db_handle(ctx), args)
    };
    // A panic must not unwind into SQLite: it becomes an INTERNAL error.
    let result = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the host's connection is open and used by this thread for
        // the whole call; the cache (if any) belongs to it.
        let conn = unsafe { Conn::new(db, state.cache.as_deref()) };
        call(state, conn, &args)
    }))
    .unwrap_or_else(|_| Err(Error::internal(format!("{} panicked", state.f.name))));
    // SAFETY: `ctx` is valid for this call; results are copied (TRANSIENT).
    unsafe {
        match result {
            Ok(Out::Int(n)) => ffi::sqlite3_result_int64(ctx, n),
            Ok(Out::Text(t)) => match c_int::try_from(t.len()) {
                Ok(n) => {
                    ffi::sqlite3_result_text(ctx, t.as_ptr().cast(), n, ffi::SQLITE_TRANSIENT())
                }
                Err(_) => ffi::sqlite3_result_error_toobig(ctx),
            },
            Ok(Out::Blob(b)) => match c_int::try_from(b.len()) {
                Ok(n) => {
                    ffi::sqlite3_result_blob(ctx, b.as_ptr().cast(), n, ffi::SQLITE_TRANSIENT())
                }
                Err(_) => ffi::sqlite3_result_error_toobig(ctx),
            },
            Ok(Out::Null) => ffi::sqlite3_result_null(ctx),
            Err(e) => {
                let msg = e.to_string();
                let n = c_int::try_from(msg.len()).unwrap_or(c_int::MAX);
                ffi::sqlite3_result_error(ctx, msg.as_ptr().cast(), n);
                // Keep SQLite's code where there is one (BUSY lets drivers
                // retry); the message set above stays.
                if let Some(code) = e.sqlite_code() {
                    ffi::sqlite3_result_error_code(ctx, code);
                } else if e.kind() == ErrorKind::Busy {
                    ffi::sqlite3_result_error_code(ctx, ffi::SQLITE_BUSY);
                }
            }
        }
    }
}

fn call(state: &FnState, conn: Conn<'_>, args: &[ValueRef<'_>]) -> Result<Out> {
    let f = state.f;
    let c = Call {
        args: Args { args, name: f.name },
        conn,
        now: state.config.clock.now_ms(),
        config: &state.config,
    };
    if f.atomic {
        atomically(conn, || (f.call)(&c))
    } else {
        (f.call)(&c)
    }
}
