//! Wake-ups: one watcher per database file per process, shared by every
//! `Database` and handle on that file, that turns commits from *any* process
//! into a bump of a generation counter that waiters block on.
//!
//! How a commit is noticed:
//! - commits through this process's own connections bump the counter directly
//!   ([`Signal::bump`], called after every honker write commit);
//! - commits from other processes are seen by a thread that reads
//!   `PRAGMA data_version` on a private read-only connection. On Linux the
//!   thread sleeps in `poll(2)` on an inotify watch of the file's directory and
//!   wakes when the `-wal` file is written; elsewhere (or if inotify is
//!   unavailable) it polls. Either way it also re-checks every
//!   `watch_fallback` (the timed fallback).
//!
//! Invariants:
//! - no file descriptor is ever opened on the database file or its `-shm`
//!   file outside SQLite (closing one would drop this process's POSIX locks):
//!   inotify watches the *directory* by path;
//! - a wake is only a hint: waiters re-check their own queue with a read
//!   before taking the write lock, and correctness never depends on a wake
//!   arriving (every wait has a deadline);
//! - after `fork()` a child never reuses its parent's watcher thread (which
//!   does not exist in the child): the registry is keyed by process id too.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use rusqlite::Connection;

use crate::connection::HConn;

use crate::connection::open_reader;
use crate::error::{Error, Result};

/// A generation counter that threads can wait on.
#[derive(Debug, Default)]
pub(crate) struct Signal {
    generation: AtomicU64,
    waiters: AtomicUsize,
    lock: Mutex<()>,
    cv: Condvar,
}

impl Signal {
    /// The current generation; pass it to [`wait_past`](Self::wait_past).
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// Something may have changed: wake every waiter.
    pub(crate) fn bump(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        if self.waiters.load(Ordering::SeqCst) > 0 {
            let _guard = self.lock.lock();
            self.cv.notify_all();
        }
    }

    /// Blocks until the generation differs from `seen` or `deadline` passes.
    /// Returns whether it changed.
    pub(crate) fn wait_past(&self, seen: u64, deadline: Instant) -> bool {
        self.waiters.fetch_add(1, Ordering::SeqCst);
        let mut guard = self.lock.lock();
        let changed = loop {
            if self.generation() != seen {
                break true;
            }
            if self.cv.wait_until(&mut guard, deadline).timed_out() {
                break self.generation() != seen;
            }
        };
        drop(guard);
        self.waiters.fetch_sub(1, Ordering::SeqCst);
        changed
    }
}

/// The per-file watcher. Its thread starts on the first wait
/// ([`ensure_running`](Self::ensure_running)), so processes that only write
/// never pay for it; dropping the last `Arc` stops it.
#[derive(Debug)]
pub(crate) struct Watcher {
    signal: Arc<Signal>,
    path: PathBuf,
    busy_timeout: Duration,
    fallback: Duration,
    thread: Mutex<Option<Running>>,
    /// The process that created it: a forked copy has no watching thread.
    pid: u32,
}

#[derive(Debug)]
struct Running {
    stop: Arc<Stop>,
    thread: JoinHandle<()>,
}

impl Watcher {
    pub(crate) fn signal(&self) -> &Arc<Signal> {
        &self.signal
    }

    /// Starts the watching thread if it is not running yet.
    pub(crate) fn ensure_running(&self) -> Result<()> {
        let mut slot = self.thread.lock();
        if slot.is_none() {
            *slot = Some(start(
                &self.path,
                self.busy_timeout,
                self.fallback,
                &self.signal,
            )?);
        }
        Ok(())
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        if self.pid != std::process::id() {
            // fork() copied the handle but not the thread: nothing to join.
            std::mem::forget(self.thread.get_mut().take());
            return;
        }
        if let Some(r) = self.thread.get_mut().take() {
            r.stop.request();
            let _ = r.thread.join();
        }
    }
}

type Registry = Mutex<HashMap<(u32, PathBuf), Weak<Watcher>>>;

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(Default::default)
}

/// The watcher for the file at `path` (canonical), shared by every open of
/// that file in this process. `busy_timeout` and `fallback` apply only when
/// this call creates it.
pub(crate) fn watcher_for(path: &Path, busy_timeout: Duration, fallback: Duration) -> Arc<Watcher> {
    let key = (std::process::id(), path.to_path_buf());
    let mut map = registry().lock();
    map.retain(|_, w| w.strong_count() > 0);
    if let Some(w) = map.get(&key).and_then(Weak::upgrade) {
        return w;
    }
    let w = Arc::new(Watcher {
        signal: Arc::new(Signal::default()),
        path: path.to_path_buf(),
        busy_timeout,
        fallback,
        thread: Mutex::new(None),
        pid: std::process::id(),
    });
    map.insert(key, Arc::downgrade(&w));
    w
}

fn start(
    path: &Path,
    busy_timeout: Duration,
    fallback: Duration,
    signal: &Arc<Signal>,
) -> Result<Running> {
    let conn = open_reader(path, busy_timeout)?;
    let stop = Arc::new(Stop::new()?);
    let notifier = Notifier::new(path, &stop);
    let (sig, st) = (Arc::clone(signal), Arc::clone(&stop));
    // Counted from before the spawn, so a fork() racing it is refused too.
    let live = crate::fork::Live::new();
    let thread = std::thread::Builder::new()
        .name("honker-watcher".into())
        .spawn(move || {
            let _live = live;
            run(conn, notifier, &sig, &st, fallback)
        })
        .map_err(|e| Error::internal(format!("cannot start the watcher thread: {e}")))?;
    Ok(Running { stop, thread })
}

fn data_version(conn: &Connection) -> Option<i64> {
    conn.prepare_cached("PRAGMA data_version")
        .and_then(|mut s| s.query_row([], |r| r.get(0)))
        .ok()
}

/// How long to keep re-checking after the WAL was written but no commit is
/// visible yet. A commit writes its frames first, then publishes them in the
/// shared-memory index (with `synchronous=FULL` an fsync sits in between), and
/// that last step makes no file event; but a write seen here may also belong
/// to a commit already counted, or to a checkpoint, and never show a change.
const SETTLE: Duration = Duration::from_millis(50);

/// Reads `data_version`; on a change (or an unreadable version: a spurious
/// wake is cheap, a missed one is not) bumps the signal and returns true.
fn check(conn: &Connection, last: &mut Option<i64>, signal: &Signal) -> bool {
    let now = data_version(conn);
    if now != *last || now.is_none() {
        *last = now;
        signal.bump();
        return true;
    }
    false
}

fn run(conn: HConn, mut notifier: Notifier, signal: &Signal, stop: &Stop, fallback: Duration) {
    let conn = conn.sql();
    let mut last = data_version(conn);
    loop {
        let wake = notifier.wait(stop, fallback);
        if stop.requested() {
            return;
        }
        if check(conn, &mut last, signal) || wake != Wake::FileWritten {
            continue;
        }
        // Written but not visible yet: look again soon. The pauses are waits
        // on the notifier, so a further write (the next commit) cuts them
        // short instead of waiting out a sleep.
        let started = Instant::now();
        let mut pause = Duration::from_micros(20);
        for round in 0u32.. {
            if round < 16 {
                std::thread::yield_now();
            } else {
                notifier.wait(stop, pause);
                pause = (pause * 2).min(Duration::from_millis(1));
            }
            if stop.requested() {
                return;
            }
            if check(conn, &mut last, signal) || started.elapsed() >= SETTLE {
                break;
            }
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Wake {
    /// The database or its WAL was written.
    FileWritten,
    /// The fallback interval passed, or something unrelated happened.
    Other,
}

/// Stop request: a flag plus, on Linux, a pipe the watcher polls.
#[derive(Debug)]
struct Stop {
    flag: AtomicBool,
    #[cfg(target_os = "linux")]
    pipe: linux::Pipe,
    #[cfg(not(target_os = "linux"))]
    cv: (Mutex<()>, Condvar),
}

impl Stop {
    fn new() -> Result<Stop> {
        Ok(Stop {
            flag: AtomicBool::new(false),
            #[cfg(target_os = "linux")]
            pipe: linux::Pipe::new()
                .map_err(|e| Error::internal(format!("cannot create the watcher's pipe: {e}")))?,
            #[cfg(not(target_os = "linux"))]
            cv: (Mutex::new(()), Condvar::new()),
        })
    }

    fn request(&self) {
        self.flag.store(true, Ordering::SeqCst);
        #[cfg(target_os = "linux")]
        self.pipe.wake();
        #[cfg(not(target_os = "linux"))]
        {
            let _g = self.cv.0.lock();
            self.cv.1.notify_all();
        }
    }

    fn requested(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }
}

/// Waits for a file notification, the stop request or the fallback interval.
#[derive(Debug)]
enum Notifier {
    #[cfg(target_os = "linux")]
    Inotify(linux::Inotify),
    Poll,
}

impl Notifier {
    fn new(path: &Path, _stop: &Stop) -> Notifier {
        #[cfg(target_os = "linux")]
        if let Ok(n) = linux::Inotify::new(path) {
            return Notifier::Inotify(n);
        }
        let _ = path;
        Notifier::Poll
    }

    fn wait(&mut self, stop: &Stop, fallback: Duration) -> Wake {
        match self {
            #[cfg(target_os = "linux")]
            Notifier::Inotify(n) => n.wait(&stop.pipe, fallback),
            Notifier::Poll => {
                // Without OS notifications, poll often: the cost is one
                // shared-memory read per tick.
                let tick = fallback.min(POLL_TICK);
                #[cfg(target_os = "linux")]
                {
                    let _ = stop.pipe.wait_readable(tick);
                }
                #[cfg(not(target_os = "linux"))]
                {
                    let mut g = stop.cv.0.lock();
                    if !stop.requested() {
                        stop.cv.1.wait_for(&mut g, tick);
                    }
                }
                Wake::Other
            }
        }
    }
}

/// Polling interval where no file notifications are available.
const POLL_TICK: Duration = Duration::from_millis(1);

#[cfg(target_os = "linux")]
mod linux {
    //! inotify and a self-pipe, through libc.

    use std::ffi::{CString, OsStr};
    use std::io;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;
    use std::time::Duration;

    use super::Wake;

    #[derive(Debug)]
    pub(super) struct Pipe {
        read: OwnedFd,
        write: OwnedFd,
    }

    impl Pipe {
        pub(super) fn new() -> io::Result<Pipe> {
            let mut fds = [0; 2];
            // SAFETY: `fds` is a valid array of two ints.
            let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) };
            if rc != 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: pipe2 succeeded, so both fds are open and owned by us.
            Ok(unsafe {
                Pipe {
                    read: OwnedFd::from_raw_fd(fds[0]),
                    write: OwnedFd::from_raw_fd(fds[1]),
                }
            })
        }

        pub(super) fn wake(&self) {
            let b = 1u8;
            // SAFETY: writes one byte from a valid buffer to an open fd. A full
            // pipe (EAGAIN) already means "woken".
            unsafe { libc::write(self.write.as_raw_fd(), std::ptr::addr_of!(b).cast(), 1) };
        }

        /// Sleeps until the pipe is readable (stop) or `timeout` passes.
        pub(super) fn wait_readable(&self, timeout: Duration) -> bool {
            let mut fds = [libc::pollfd {
                fd: self.read.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            }];
            poll(&mut fds, timeout) > 0
        }
    }

    fn poll(fds: &mut [libc::pollfd], timeout: Duration) -> i32 {
        let ms = i32::try_from(timeout.as_millis())
            .unwrap_or(i32::MAX)
            .max(1);
        // SAFETY: `fds` is a valid, correctly sized slice of pollfd.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) }
    }

    #[derive(Debug)]
    pub(super) struct Inotify {
        fd: OwnedFd,
        /// File names (within the watched directory) whose writes matter.
        names: [Vec<u8>; 2],
        buf: Vec<u8>,
    }

    impl Inotify {
        /// Watches the directory holding `db` for writes to `db` or `db-wal`.
        pub(super) fn new(db: &Path) -> io::Result<Inotify> {
            let dir = db.parent().unwrap_or(Path::new("."));
            let name = db.file_name().unwrap_or(OsStr::new("")).as_bytes().to_vec();
            let mut wal = name.clone();
            wal.extend_from_slice(b"-wal");
            // SAFETY: plain syscall without pointers.
            let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC | libc::IN_NONBLOCK) };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: inotify_init1 returned a new fd that we now own.
            let fd = unsafe { OwnedFd::from_raw_fd(fd) };
            let dir = CString::new(dir.as_os_str().as_bytes())?;
            let mask = libc::IN_MODIFY | libc::IN_CREATE | libc::IN_MOVED_TO;
            // SAFETY: `dir` is a valid NUL-terminated path; `fd` is open.
            let wd = unsafe { libc::inotify_add_watch(fd.as_raw_fd(), dir.as_ptr(), mask) };
            if wd < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(Inotify {
                fd,
                names: [name, wal],
                buf: vec![0; 64 * 1024],
            })
        }

        pub(super) fn wait(&mut self, stop: &super::linux::Pipe, timeout: Duration) -> Wake {
            let mut fds = [
                libc::pollfd {
                    fd: self.fd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: stop.read.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            if poll(&mut fds, timeout) <= 0 || fds[0].revents == 0 {
                return Wake::Other;
            }
            if self.drain() {
                Wake::FileWritten
            } else {
                Wake::Other
            }
        }

        /// Reads every pending event; true if any concerns our files (or the
        /// queue overflowed, so we cannot tell).
        fn drain(&mut self) -> bool {
            let mut relevant = false;
            loop {
                // SAFETY: reads into our own buffer of the stated length.
                let n = unsafe {
                    libc::read(
                        self.fd.as_raw_fd(),
                        self.buf.as_mut_ptr().cast(),
                        self.buf.len(),
                    )
                };
                let Ok(n) = usize::try_from(n) else {
                    return relevant; // EAGAIN: drained
                };
                if n == 0 {
                    return relevant;
                }
                let header = std::mem::size_of::<libc::inotify_event>();
                let mut at = 0;
                while at + header <= n {
                    // SAFETY: the kernel wrote a whole event header at `at`;
                    // read_unaligned copes with the byte buffer's alignment.
                    let ev: libc::inotify_event =
                        unsafe { std::ptr::read_unaligned(self.buf.as_ptr().add(at).cast()) };
                    let len = ev.len as usize;
                    let name = &self.buf[at + header..(at + header + len).min(n)];
                    let name = name.split(|&b| b == 0).next().unwrap_or(&[]);
                    if ev.mask & libc::IN_Q_OVERFLOW != 0 || self.names.iter().any(|x| x == name) {
                        relevant = true;
                    }
                    at += header + len;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_wakes_waiter_and_times_out() {
        let s = Arc::new(Signal::default());
        let seen = s.generation();
        assert!(!s.wait_past(seen, Instant::now() + Duration::from_millis(5)));
        let s2 = Arc::clone(&s);
        let t = std::thread::spawn(move || {
            s2.wait_past(seen, Instant::now() + Duration::from_secs(30))
        });
        s.bump();
        assert!(t.join().unwrap());
        assert!(s.wait_past(seen, Instant::now()));
    }
}
