//! Honker's wait for hosts of the loadable extension: the watcher C ABI
//! (`honker_watcher_open`, `_open_v2`, `_wait`, `_close`, exported by
//! `libhonker_ext`) and the SQL functions `honker_update_watcher_open`,
//! `_wait`, `_close`, with Honker's return codes, so that Honker's clients in
//! Go, Ruby, Bun, .NET, C++ and Elixir can sleep until another connection or
//! process commits (reference/honker-ancestor.md §3, §5.3).
//!
//! Both run on the process's one watcher per file (`crate::watcher`, as
//! honker's own databases do), here over the host's SQLite: its private
//! connection is opened through the host's function table, and it opens
//! nothing else on the file (inotify watches the directory). A handle is a
//! subscription: the watcher's generation it last reported. A commit made
//! after `open` or after the last `wait` returned makes the next `wait`
//! return 1 at once, so a client's "claim, else wait" loop never sleeps
//! through a commit that landed in between. A wake is a hint (a checkpoint
//! or an unrelated write can cause one): re-check, then wait again.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::{Call, Out, SqlFn, DIRECT_ONLY};
use crate::error::{Error, ErrorKind, Result};
use crate::watcher::{watcher_for, Watcher};

/// Set once the extension is loaded into a connection (the host's function
/// table is installed): before that, no SQLite call can be made.
static HOST_READY: AtomicBool = AtomicBool::new(false);

/// Records that the host's SQLite can be called (the extension's entry point
/// ran).
pub(crate) fn host_ready() {
    HOST_READY.store(true, Ordering::SeqCst);
}

/// How the watcher's private connection waits on a lock (it only reads
/// `PRAGMA data_version`; a busy read counts as a change).
const BUSY: Duration = Duration::from_millis(100);
/// The watcher's timed re-check while someone waits (inotify wakes it on
/// every write; this covers a missed event).
const FALLBACK: Duration = Duration::from_millis(100);

/// One client's wait on a file.
#[derive(Debug)]
pub struct HostWatch {
    watcher: Arc<Watcher>,
    seen: u64,
}

/// Honker's backend names. honker has one mechanism (kernel file events
/// with a timed fallback), so every name Honker accepts selects it.
const BACKENDS: &[&str] = &[
    "polling",
    "poll",
    "kernel",
    "kernel-watcher",
    "shm",
    "shm-fast-path",
];

impl HostWatch {
    /// Opens a wait on the database at `path` (which must exist).
    /// `poll_ms`, Honker's polling cadence, must be positive when given; it
    /// sets nothing (honker does not poll: the watcher sleeps on file events).
    pub fn open(path: &str, backend: Option<&str>, poll_ms: Option<i64>) -> Result<HostWatch> {
        if !HOST_READY.load(Ordering::SeqCst) {
            return Err(Error::new(
                ErrorKind::Closed,
                "honker_ext is not loaded into any SQLite connection of this process: load \
                 it (sqlite3_load_extension or your driver's loadExtension) before opening a \
                 watcher",
            ));
        }
        match backend.filter(|b| !b.is_empty()) {
            None => {}
            Some(b) if BACKENDS.contains(&b) => {}
            Some(other) => {
                return Err(Error::invalid(format!(
                    "unknown watcher backend {other:?}; valid: NULL, 'polling', 'kernel', 'shm'"
                )))
            }
        }
        if poll_ms.is_some_and(|ms| ms <= 0) {
            return Err(Error::invalid("watcher poll interval must be positive"));
        }
        if path.is_empty() {
            return Err(Error::invalid("db_path must not be empty"));
        }
        let file: PathBuf = std::fs::canonicalize(path)
            .map_err(|e| Error::new(ErrorKind::NotFound, format!("cannot watch {path:?}: {e}")))?;
        let watcher = watcher_for(&file, BUSY, FALLBACK);
        watcher.ensure_running()?;
        let seen = watcher.signal().generation();
        Ok(HostWatch { watcher, seen })
    }

    /// Waits up to `timeout` for a commit since the last wait (or the open):
    /// true if one came (at once if it already had), false at the timeout.
    pub fn wait(&mut self, timeout: Duration) -> bool {
        let signal = self.watcher.signal();
        let now = Instant::now();
        let deadline = now
            .checked_add(timeout)
            .unwrap_or(now + Duration::from_secs(86_400 * 365));
        let changed = signal.wait_past(self.seen, deadline);
        if changed {
            self.seen = signal.generation();
        }
        changed
    }
}

/// The SQL functions' handles by id (Honker's: a process-wide map). `None`:
/// taken by a statement that is waiting on it.
fn handles() -> &'static Mutex<HashMap<i64, Option<HostWatch>>> {
    static HANDLES: OnceLock<Mutex<HashMap<i64, Option<HostWatch>>>> = OnceLock::new();
    HANDLES.get_or_init(Default::default)
}

static NEXT_ID: AtomicI64 = AtomicI64::new(1);

/// The watcher functions, registered by the extension only (a wait blocks
/// the calling statement: on honker's own connections, the bindings' waits
/// are the way). Not atomic: a wait must never hold a transaction.
pub(crate) const FUNCTIONS: &[SqlFn] = &[
    SqlFn::plain("honker_update_watcher_open", 2, DIRECT_ONLY, sql_open),
    SqlFn::plain("honker_update_watcher_open", 3, DIRECT_ONLY, sql_open),
    SqlFn::plain("honker_update_watcher_wait", 2, DIRECT_ONLY, sql_wait),
    SqlFn::plain("honker_update_watcher_close", 1, DIRECT_ONLY, sql_close),
];

/// `honker_update_watcher_open(db_path, backend[, poll_ms])` → a handle id.
fn sql_open(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let path = a.text(0, "db_path")?;
    let backend = a.opt_text(1, "backend")?;
    let poll = if a.has(2) {
        a.opt_whole(2, "poll_ms")?
    } else {
        None
    };
    let watch = HostWatch::open(path, backend, poll)?;
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    handles().lock().insert(id, Some(watch));
    Ok(Out::Int(id))
}

/// `honker_update_watcher_wait(id, timeout_ms)` → 1 (a commit), 0 (timeout)
/// or -1 (no such handle: never opened, closed, or being waited on by
/// another statement).
fn sql_wait(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let id = a.whole(0, "handle")?;
    let timeout = a.whole(1, "timeout_ms")?.max(0);
    // Taken out while waiting (as Honker does), so the map is not held.
    let taken = handles().lock().get_mut(&id).and_then(Option::take);
    let Some(mut watch) = taken else {
        return Ok(Out::Int(-1));
    };
    let woke = watch.wait(Duration::from_millis(timeout as u64));
    // Put back unless it was closed meanwhile (then it is dropped here).
    if let Some(slot) = handles().lock().get_mut(&id) {
        *slot = Some(watch);
    }
    Ok(Out::Int(i64::from(woke)))
}

/// `honker_update_watcher_close(id)` → 1 (closing twice is harmless).
fn sql_close(c: &Call<'_>) -> Result<Out> {
    let id = c.args.whole(0, "handle")?;
    handles().lock().remove(&id);
    Ok(Out::Int(1))
}
