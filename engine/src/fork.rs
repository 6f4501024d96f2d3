//! `fork()` safety: a child of a process that had honker open refuses to
//! open any file, decided before any call into SQLite.
//!
//! A forked child inherits SQLite's process-wide state: the in-memory table
//! of POSIX locks it believes it holds (the child holds none: `fcntl` locks
//! are not inherited), and its global mutexes, possibly held by a parent
//! thread that does not exist in the child. A new connection in the child
//! then takes no real lock (its commits are lost when the parent closes and
//! unlinks the WAL) or deadlocks at its first allocation. Nothing the child
//! can do makes that state sound again, so:
//!
//! - every open `Database` and every running honker thread (watcher,
//!   checkpointer) holds a [`Live`] guard while it can have SQLite state;
//! - a `pthread_atfork` child handler, registered at the first open, records
//!   whether any guard was alive at the moment of the fork;
//! - [`check_open_allowed`] refuses every open in such a child with `UNSAFE`.
//!
//! A process forked while nothing was open (fork before opening, or after
//! closing every database) opens files normally. The inherited handles
//! themselves refuse every call (`CLOSED`, see `Inner::check_open`) and
//! forget their connections without calling into SQLite.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::error::{Error, ErrorKind, Result};

/// Open databases and running honker threads in this process.
static LIVE: AtomicUsize = AtomicUsize::new(0);
/// This process was forked while `LIVE` was not zero (here or in an
/// ancestor: the count is inherited, so a grandchild is refused too).
static FORKED_WHILE_LIVE: AtomicBool = AtomicBool::new(false);

#[cfg(unix)]
extern "C" fn in_child() {
    // Async-signal-safe: atomics, and `close` of inherited descriptors.
    if LIVE.load(Ordering::SeqCst) > 0 {
        FORKED_WHILE_LIVE.store(true, Ordering::SeqCst);
    }
    #[cfg(all(feature = "bundled", target_os = "linux"))]
    crate::ofd::close_inherited();
}

/// Windows has no `fork`: nothing to register.
#[cfg(not(unix))]
fn register() {}

#[cfg(unix)]
fn register() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: registers a handler that only touches atomics.
        let rc = unsafe { libc::pthread_atfork(None, None, Some(in_child)) };
        // ENOMEM is the only failure; without the handler a forked child
        // would not know, so fail loudly rather than run unsafe.
        assert_eq!(rc, 0, "pthread_atfork failed");
    });
}

/// Held by every open database and every running honker thread.
#[derive(Debug)]
pub(crate) struct Live(());

impl Live {
    pub(crate) fn new() -> Live {
        register();
        LIVE.fetch_add(1, Ordering::SeqCst);
        Live(())
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Whether this process was forked from one that had honker open (a
/// database, or a honker thread): then no honker file may be opened here.
pub fn forked_while_open() -> bool {
    FORKED_WHILE_LIVE.load(Ordering::SeqCst)
}

/// `UNSAFE` in a process forked from one using honker; called first thing
/// by every open, before any call into SQLite.
pub fn check_open_allowed() -> Result<()> {
    if forked_while_open() {
        return Err(Error::new(
            ErrorKind::Unsafe,
            "this process was forked from one using honker: SQLite's state inherited from \
             the parent is unsound here, so honker opens no file in it. Use the spawn or \
             forkserver start method, or fork before opening any honker file",
        ));
    }
    Ok(())
}
