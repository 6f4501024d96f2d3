//! A honker transaction held across an `await` while another SQLite library
//! of this process writes to the file on the JS thread (better-sqlite3 is
//! synchronous): that library waits for the write lock the transaction
//! holds, asleep in SQLite's busy handler on the JS thread, so the
//! transaction's own next call can never run. Left alone, the event loop
//! freezes for that library's busy timeout (better-sqlite3's: 5 s), then
//! its write fails with "database is locked" (issue 53 §3).
//!
//! One watch thread per process, asleep while no transaction is open,
//! samples what each database's JS thread is doing
//! (`/proc/self/task/TID/syscall`) every [`EVERY`] while one of its
//! transactions is open and between calls. When it finds that thread
//! asleep in `nanosleep` (SQLite's busy handler: its `usleep`) on
//! [`SAMPLES`] samples running, it rolls the transaction back: the other
//! library's next retry gets the lock, the loop goes on, and the
//! transaction's next call fails `ROLLED_BACK` with a message naming the
//! cause ([`MESSAGE`]). Plain CPU work on the JS thread does not trip it
//! (the thread is running, not asleep), nor does an idle loop (it waits in
//! `epoll_wait`), nor a honker call (the JS thread's own calls never
//! wait). Linux only (where `/proc` tells); elsewhere the freeze stays as
//! documented in docs/orm.md.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};

use crate::database::Txs;

/// How often the watch thread samples while a transaction is open.
pub(crate) const EVERY: std::time::Duration = std::time::Duration::from_millis(50);
/// Samples running that must find the JS thread asleep.
pub(crate) const SAMPLES: u32 = 4;
/// What the transaction's next call says once it was rolled back.
pub(crate) const MESSAGE: &str = "honker rolled this transaction back: it was held across an \
    await while this process's JS thread slept in another SQLite library's busy wait for the \
    write lock it held (a synchronous write to this file, from better-sqlite3 or another \
    binding), which would have frozen the event loop until that library's busy timeout. Nothing \
    of it was committed. Make that write inside this transaction (tx.execute), or before or \
    after it, and keep slow awaits out of transactions (docs/orm.md)";

/// The databases whose transactions the watch thread looks at, and the
/// wake-up of a thread that sleeps while none is open.
struct Watch {
    dbs: Mutex<Vec<Weak<Txs>>>,
    opened: Condvar,
    /// Whether the thread may be asleep on `opened` (set before it looks
    /// for open transactions, under `dbs`): only then does an opening
    /// transaction pay for a wake-up.
    idle: AtomicBool,
}

fn watch() -> &'static Watch {
    static WATCH: std::sync::OnceLock<Watch> = std::sync::OnceLock::new();
    WATCH.get_or_init(|| {
        // No thread where it could not tell anything.
        if cfg!(target_os = "linux") {
            let _ = std::thread::Builder::new()
                .name("honker-stall-watch".into())
                .spawn(run);
        }
        Watch {
            dbs: Mutex::new(Vec::new()),
            opened: Condvar::new(),
            idle: AtomicBool::new(false),
        }
    })
}

/// Watches `txs` from now on (once per database).
pub(crate) fn add(txs: &Arc<Txs>) {
    let w = watch();
    w.dbs
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(Arc::downgrade(txs));
}

/// A transaction of a watched database opened (it is in its registry):
/// wakes the watch thread if it sleeps.
pub(crate) fn opened() {
    let w = watch();
    if w.idle.load(Ordering::SeqCst) {
        let _dbs = w.dbs.lock().unwrap_or_else(|p| p.into_inner());
        w.opened.notify_all();
    }
}

/// The id of the calling thread (the JS thread, where napi calls come).
pub(crate) fn this_thread() -> i64 {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid takes no arguments and cannot fail. (Through
        // syscall: glibc 2.17, the oldest the addon runs on, has no gettid.)
        unsafe { libc::syscall(libc::SYS_gettid) }
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
}

/// Whether thread `tid` of this process is asleep in `nanosleep` now.
#[cfg(target_os = "linux")]
fn asleep(tid: i64) -> bool {
    let Ok(text) = std::fs::read_to_string(format!("/proc/self/task/{tid}/syscall")) else {
        return false;
    };
    let number = text
        .split_whitespace()
        .next()
        .and_then(|n| n.parse::<i64>().ok());
    matches!(number, Some(n) if n == libc::SYS_nanosleep || n == libc::SYS_clock_nanosleep)
}

#[cfg(not(target_os = "linux"))]
fn asleep(_: i64) -> bool {
    false
}

fn run() {
    let w = watch();
    loop {
        let live: Vec<Arc<Txs>> = {
            let mut dbs = w.dbs.lock().unwrap_or_else(|p| p.into_inner());
            dbs.retain(|d| d.strong_count() > 0);
            loop {
                // Before looking: a transaction opened after the look sees
                // it, and wakes this thread once it waits.
                w.idle.store(true, Ordering::SeqCst);
                let (open, closed): (Vec<Arc<Txs>>, Vec<Arc<Txs>>) = dbs
                    .iter()
                    .filter_map(Weak::upgrade)
                    .partition(|t| t.any_open());
                for txs in closed {
                    txs.asleep_samples.store(0, Ordering::Relaxed);
                }
                if !open.is_empty() {
                    w.idle.store(false, Ordering::SeqCst);
                    break open;
                }
                dbs = w.opened.wait(dbs).unwrap_or_else(|p| p.into_inner());
                dbs.retain(|d| d.strong_count() > 0);
            }
        };
        for txs in &live {
            let stuck = txs.js_thread().is_some_and(asleep) && txs.has_idle_open();
            let n = if stuck {
                txs.asleep_samples.load(Ordering::Relaxed) + 1
            } else {
                0
            };
            if n >= SAMPLES {
                txs.roll_back_idle(MESSAGE);
                txs.asleep_samples.store(0, Ordering::Relaxed);
            } else {
                txs.asleep_samples.store(n, Ordering::Relaxed);
            }
        }
        drop(live);
        std::thread::sleep(EVERY);
    }
}
