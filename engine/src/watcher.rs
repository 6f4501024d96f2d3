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
//!   wakes when the `-wal` file is written; on Apple platforms in `kevent(2)`
//!   on vnode events of the `-wal` file and the directory (untested here:
//!   compiled by CI, never run); elsewhere (or without either, or with
//!   `HONKER_WATCHER=portable`, which Linux's tests use to take this path)
//!   it checks every `max(watch_fallback, 200 ms)`: 5 wake-ups a second, not
//!   the 1 ms poll that made 915. With notifications it also re-checks every
//!   `watch_fallback` (the timed fallback).
//! - **Nobody waiting, no wake-ups**: the thread sleeps on a condvar while
//!   no thread waits (an app that has the file open with no consumer, or
//!   between claims), so it costs nothing idle; the first waiter wakes it,
//!   and a commit made meanwhile shows at once as a changed `data_version`.
//!
//! Invariants:
//! - no file descriptor is ever opened on the database file or its `-shm`
//!   file outside SQLite (closing one would drop this process's POSIX locks):
//!   inotify watches the *directory* by path, kqueue the directory and the
//!   `-wal` file, on which SQLite takes no locks;
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

use crate::error::{Error, Result};
use crate::raw::{params, Conn};

/// The watcher's private connection, which only reads `PRAGMA data_version`:
/// one of honker's own readers, or (in the loadable extension, which has no
/// rusqlite) a connection opened on the host's SQLite through its function
/// table.
#[cfg(feature = "rusqlite")]
type Reader = crate::connection::HConn;
#[cfg(not(feature = "rusqlite"))]
type Reader = crate::raw::OwnedDb;

fn open_private(path: &Path, busy_timeout: Duration) -> Result<Reader> {
    #[cfg(feature = "rusqlite")]
    return crate::connection::open_reader(path, busy_timeout);
    #[cfg(not(feature = "rusqlite"))]
    return crate::raw::OwnedDb::open(path, busy_timeout);
}

/// A generation counter that threads can wait on.
#[derive(Debug, Default)]
pub struct Signal {
    generation: AtomicU64,
    waiters: AtomicUsize,
    lock: Mutex<()>,
    cv: Condvar,
    /// Where the watcher thread sleeps while nobody waits (no wake-ups, no
    /// polling: what an idle app on battery needs), woken by the first
    /// waiter and by a stop request.
    idle: Condvar,
    /// Event loops' descriptors ([`crate::Readiness`]), written on a bump
    /// while armed.
    #[cfg(feature = "rusqlite")]
    pipes: Mutex<Vec<Arc<crate::readiness::Pipe>>>,
}

impl Signal {
    /// The current generation; pass it to [`wait_past`](Self::wait_past).
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// Something may have changed: wake every waiter.
    pub(crate) fn bump(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        if self.waiters.load(Ordering::SeqCst) > 0 {
            #[cfg(feature = "rusqlite")]
            for pipe in self.pipes.lock().iter() {
                pipe.wake();
            }
            let _guard = self.lock.lock();
            self.cv.notify_all();
        }
    }

    #[cfg(feature = "rusqlite")]
    pub(crate) fn register(&self, pipe: &Arc<crate::readiness::Pipe>) {
        self.pipes.lock().push(Arc::clone(pipe));
    }

    #[cfg(feature = "rusqlite")]
    pub(crate) fn unregister(&self, pipe: &Arc<crate::readiness::Pipe>) {
        self.pipes.lock().retain(|p| !Arc::ptr_eq(p, pipe));
    }

    /// One more waiter that does not sleep here (an armed readiness
    /// descriptor): the watcher runs until [`remove_waiter`](Self::remove_waiter).
    #[cfg(feature = "rusqlite")]
    pub(crate) fn add_waiter(&self) {
        let _guard = self.lock.lock();
        if self.waiters.fetch_add(1, Ordering::SeqCst) == 0 {
            self.idle.notify_all();
        }
    }

    #[cfg(feature = "rusqlite")]
    pub(crate) fn remove_waiter(&self) {
        self.waiters.fetch_sub(1, Ordering::SeqCst);
    }

    /// Blocks until the generation differs from `seen` or `deadline` passes.
    /// Returns whether it changed.
    pub fn wait_past(&self, seen: u64, deadline: Instant) -> bool {
        let mut guard = self.lock.lock();
        if self.waiters.fetch_add(1, Ordering::SeqCst) == 0 {
            self.idle.notify_all();
        }
        let changed = loop {
            if self.generation() != seen {
                break true;
            }
            if self.cv.wait_until(&mut guard, deadline).timed_out() {
                break self.generation() != seen;
            }
        };
        self.waiters.fetch_sub(1, Ordering::SeqCst);
        drop(guard);
        changed
    }

    /// The watcher's side: sleeps while no thread waits and no stop is
    /// requested. Returns at once (false) if someone waits; true if it slept.
    fn park_while_idle(&self, stop: &Stop) -> bool {
        let mut guard = self.lock.lock();
        let mut parked = false;
        while self.waiters.load(Ordering::SeqCst) == 0 && !stop.requested() {
            parked = true;
            PARKS.fetch_add(1, Ordering::Relaxed);
            self.idle.wait(&mut guard);
        }
        parked
    }

    /// Wakes a parked watcher (after a stop request).
    fn unpark(&self) {
        let _guard = self.lock.lock();
        self.idle.notify_all();
    }
}

/// How many times a watcher thread of this process went to sleep because
/// nobody waited (tests: the watcher stops when its last waiter goes).
static PARKS: AtomicU64 = AtomicU64::new(0);

/// [`PARKS`], for the tests.
#[doc(hidden)]
pub fn watcher_parks() -> u64 {
    PARKS.load(Ordering::Relaxed)
}

/// Context switches so far of this process's watcher threads, as the kernel
/// counts them (each a wake-up of a sleeping thread, or a preemption):
/// Linux only (`/proc/self/task`), 0 elsewhere. For the tests and bench W8.
#[doc(hidden)]
pub fn watcher_context_switches() -> u64 {
    let mut total = 0;
    let tasks = std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten();
    for task in tasks {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim() != "honker-watcher" {
            continue;
        }
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        for line in status.lines() {
            if let Some(v) = line
                .strip_prefix("voluntary_ctxt_switches:")
                .or_else(|| line.strip_prefix("nonvoluntary_ctxt_switches:"))
            {
                total += v.trim().parse::<u64>().unwrap_or(0);
            }
        }
    }
    total
}

/// The per-file watcher. Its thread starts on the first wait
/// ([`ensure_running`](Self::ensure_running)), so processes that only write
/// never pay for it; dropping the last `Arc` stops it.
#[derive(Debug)]
pub struct Watcher {
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
    pub fn signal(&self) -> &Arc<Signal> {
        &self.signal
    }

    /// Starts the watching thread if it is not running yet.
    pub fn ensure_running(&self) -> Result<()> {
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
            self.signal.unpark();
            let _ = r.thread.join();
        }
    }
}

type Registry = Mutex<HashMap<(u32, PathBuf), Weak<Watcher>>>;

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(Default::default)
}

/// Whether a `Database` of this process has the file at `path` (canonical)
/// open: its watcher is alive.
#[cfg(all(unix, feature = "bundled"))]
#[cfg_attr(target_os = "linux", allow(dead_code))]
pub(crate) fn open_in_this_process(path: &Path) -> bool {
    let key = (std::process::id(), path.to_path_buf());
    registry()
        .lock()
        .get(&key)
        .is_some_and(|w| w.strong_count() > 0)
}

/// The watcher for the file at `path` (canonical), shared by every open of
/// that file in this process. `busy_timeout` and `fallback` apply only when
/// this call creates it.
pub fn watcher_for(path: &Path, busy_timeout: Duration, fallback: Duration) -> Arc<Watcher> {
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
    let conn = open_private(path, busy_timeout)?;
    // The version every later commit is told apart from, read before this
    // returns: a commit made right after is seen even if the thread has not
    // started yet.
    let last = data_version(conn.raw());
    let stop = Arc::new(Stop::new()?);
    let notifier = Notifier::new(path, &stop);
    let (sig, st) = (Arc::clone(signal), Arc::clone(&stop));
    // Counted from before the spawn, so a fork() racing it is refused too.
    #[cfg(feature = "rusqlite")]
    let live = crate::fork::Live::new();
    let thread = std::thread::Builder::new()
        .name("honker-watcher".into())
        .spawn(move || {
            #[cfg(feature = "rusqlite")]
            let _live = live;
            run(conn, last, notifier, &sig, &st, fallback)
        })
        .map_err(|e| Error::internal(format!("cannot start the watcher thread: {e}")))?;
    Ok(Running { stop, thread })
}

const DATA_VERSION: &str = "PRAGMA data_version";

fn data_version(conn: Conn<'_>) -> Option<i64> {
    conn.prepare_cached(DATA_VERSION)
        .and_then(|mut s| s.query_one(params![], |r| r.get(0)))
        .ok()
}

/// How long to keep re-checking after the WAL was written but no commit is
/// visible yet. A commit writes its frames first, then publishes them in the
/// shared-memory index (with `synchronous=FULL` an fsync sits in between), and
/// that last step makes no file event; but a write seen here may also belong
/// to a commit already counted, or to a checkpoint, and never show a change.
const SETTLE: Duration = Duration::from_millis(50);

/// The first pause of those re-checks, after a few yields; each next one is
/// four times longer, up to 1 ms. A commit publishes microseconds after its
/// last write, so the first pause usually sees it; the growth keeps a write
/// that shows nothing (a checkpoint, a commit already counted) to a few
/// wake-ups.
const FIRST_PAUSE: Duration = Duration::from_micros(50);

/// Reads `data_version`; on a change (or an unreadable version: a spurious
/// wake is cheap, a missed one is not) bumps the signal and returns true.
fn check(conn: Conn<'_>, last: &mut Option<i64>, signal: &Signal) -> bool {
    let now = data_version(conn);
    if now != *last || now.is_none() {
        *last = now;
        signal.bump();
        return true;
    }
    false
}

fn run(
    reader: Reader,
    mut last: Option<i64>,
    mut notifier: Notifier,
    signal: &Signal,
    stop: &Stop,
    fallback: Duration,
) {
    let conn = reader.raw();
    loop {
        // Nobody waits: sleep until somebody does. `last` is from before,
        // so a commit made meanwhile shows as a change at once after.
        let parked = signal.park_while_idle(stop);
        if stop.requested() {
            return;
        }
        if parked && check(conn, &mut last, signal) {
            continue;
        }
        let wake = notifier.wait(stop, fallback);
        if stop.requested() {
            return;
        }
        if check(conn, &mut last, signal) || wake != Wake::FileWritten {
            continue;
        }
        // Written but not visible yet: look again soon. The pauses are waits
        // on the notifier, so a further write (the next commit) cuts them
        // short instead of waiting out a sleep, and starts the pauses over at
        // the first: that commit is publishing now, and a pause grown long on the
        // last one (up to 1 ms) would delay it by as much. (Not the yields:
        // a long run of writes, a bulk load in another process, would spin
        // through them at every write.)
        let mut started = Instant::now();
        let mut pause = FIRST_PAUSE;
        for round in 0u32.. {
            let mut written = false;
            if round < 16 {
                std::thread::yield_now();
            } else {
                written = notifier.wait(stop, pause) == Wake::FileWritten;
                pause = (pause * 4).min(Duration::from_millis(1));
            }
            if stop.requested() {
                return;
            }
            if written {
                started = Instant::now();
                pause = FIRST_PAUSE;
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

/// Stop request: a flag plus, on Linux, a pipe the watcher polls (on Apple
/// platforms, a user event of the watcher's kqueue; elsewhere a condvar).
#[derive(Debug)]
struct Stop {
    flag: AtomicBool,
    #[cfg(target_os = "linux")]
    pipe: linux::Pipe,
    #[cfg(target_vendor = "apple")]
    kqueue: apple::Kqueue,
    #[cfg(not(any(target_os = "linux", target_vendor = "apple")))]
    cv: (Mutex<()>, Condvar),
}

impl Stop {
    fn new() -> Result<Stop> {
        Ok(Stop {
            flag: AtomicBool::new(false),
            #[cfg(target_os = "linux")]
            pipe: linux::Pipe::new()
                .map_err(|e| Error::internal(format!("cannot create the watcher's pipe: {e}")))?,
            #[cfg(target_vendor = "apple")]
            kqueue: apple::Kqueue::new()
                .map_err(|e| Error::internal(format!("cannot create the watcher's kqueue: {e}")))?,
            #[cfg(not(any(target_os = "linux", target_vendor = "apple")))]
            cv: (Mutex::new(()), Condvar::new()),
        })
    }

    fn request(&self) {
        self.flag.store(true, Ordering::SeqCst);
        #[cfg(target_os = "linux")]
        self.pipe.wake();
        #[cfg(target_vendor = "apple")]
        self.kqueue.wake();
        #[cfg(not(any(target_os = "linux", target_vendor = "apple")))]
        {
            let _g = self.cv.0.lock();
            self.cv.1.notify_all();
        }
    }

    fn requested(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }

    /// Sleeps until a stop request or `timeout`.
    fn sleep(&self, timeout: Duration) {
        #[cfg(target_os = "linux")]
        {
            let _ = self.pipe.wait_readable(timeout);
        }
        #[cfg(target_vendor = "apple")]
        self.kqueue.wait_stop(timeout);
        #[cfg(not(any(target_os = "linux", target_vendor = "apple")))]
        {
            let mut g = self.cv.0.lock();
            if !self.requested() {
                self.cv.1.wait_for(&mut g, timeout);
            }
        }
    }
}

/// Waits for a file notification, the stop request or the fallback interval.
#[derive(Debug)]
enum Notifier {
    /// Linux: inotify on the file's directory.
    #[cfg(target_os = "linux")]
    Inotify(linux::Inotify),
    /// Apple platforms: kqueue vnode events on the `-wal` file and the
    /// directory (no descriptor on the database file or `-shm`).
    #[cfg(target_vendor = "apple")]
    Kqueue(apple::Files),
    /// No file notifications (or `HONKER_WATCHER=portable`, which forces
    /// this path for tests): a slow timed check. Commits of this process
    /// still wake its waiters at once; other processes' within a tick.
    Timed,
}

/// `HONKER_WATCHER=portable`: the watcher takes the path of a platform
/// without file notifications, so that Linux can test it (the bench's idle
/// wake-ups, the forced-path tests).
fn portable_forced() -> bool {
    std::env::var_os("HONKER_WATCHER").is_some_and(|v| v == "portable")
}

impl Notifier {
    fn new(path: &Path, stop: &Stop) -> Notifier {
        let _ = (path, stop);
        if portable_forced() {
            return Notifier::Timed;
        }
        #[cfg(target_os = "linux")]
        if let Ok(n) = linux::Inotify::new(path) {
            return Notifier::Inotify(n);
        }
        #[cfg(target_vendor = "apple")]
        if let Ok(n) = apple::Files::new(&stop.kqueue, path) {
            return Notifier::Kqueue(n);
        }
        Notifier::Timed
    }

    fn wait(&mut self, stop: &Stop, fallback: Duration) -> Wake {
        match self {
            #[cfg(target_os = "linux")]
            Notifier::Inotify(n) => n.wait(&stop.pipe, fallback),
            #[cfg(target_vendor = "apple")]
            Notifier::Kqueue(n) => n.wait(&stop.kqueue, fallback),
            Notifier::Timed => {
                stop.sleep(fallback.max(TIMED_TICK));
                Wake::Other
            }
        }
    }
}

/// The timed path's interval, at least: 5 wake-ups a second while someone
/// waits, none while nobody does (Apple flags apps above 150 a second; the
/// old 1 ms poll made 915).
const TIMED_TICK: Duration = Duration::from_millis(200);

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

    /// `poll(2)` for `timeout`, to the microsecond (`ppoll`): the settle
    /// loop's pauses are tens of microseconds, and `poll`'s whole
    /// milliseconds made each a full millisecond. Never less than 10 µs,
    /// so no caller spins.
    fn poll(fds: &mut [libc::pollfd], timeout: Duration) -> i32 {
        let timeout = timeout.max(Duration::from_micros(10));
        // `c_long` is i32 on 32-bit targets; nanoseconds (< 10^9) fit.
        #[allow(clippy::unnecessary_fallible_conversions)]
        let nanos = libc::c_long::try_from(timeout.subsec_nanos()).unwrap_or(0);
        // The libc crate marks musl's `time_t` deprecated ahead of its move
        // to 64 bits; `try_from` fits either width.
        #[allow(deprecated)]
        let ts = libc::timespec {
            tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
            tv_nsec: nanos,
        };
        // SAFETY: `fds` is a valid, correctly sized slice of pollfd; `ts`
        // outlives the call; a null signal mask leaves the mask as it is.
        unsafe {
            libc::ppoll(
                fds.as_mut_ptr(),
                fds.len() as libc::nfds_t,
                &ts,
                std::ptr::null(),
            )
        }
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

#[cfg(target_vendor = "apple")]
mod apple {
    //! kqueue, through libc: vnode events on the `-wal` file (every commit
    //! in WAL mode writes it, from any process) and on the directory (the
    //! `-wal` file created or replaced), and a user event for the stop
    //! request. Never a descriptor on the database file or its `-shm`
    //! (closing one would drop this process's POSIX locks on it); SQLite
    //! takes no locks on the `-wal` file. Not built or run in this
    //! repository's CI beyond `cargo clippy --target aarch64-apple-ios`
    //! (DESIGN §14): Linux tests the timed path in its place.

    use std::ffi::{CString, OsStr};
    use std::io;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;
    use std::time::Duration;

    use super::Wake;

    /// The user event that a stop request triggers.
    const STOP: usize = usize::MAX;

    #[derive(Debug)]
    pub(super) struct Kqueue {
        fd: OwnedFd,
    }

    fn timespec(d: Duration) -> libc::timespec {
        libc::timespec {
            tv_sec: libc::time_t::try_from(d.as_secs()).unwrap_or(libc::time_t::MAX),
            tv_nsec: libc::c_long::from(d.subsec_nanos() as i32),
        }
    }

    impl Kqueue {
        pub(super) fn new() -> io::Result<Kqueue> {
            // SAFETY: plain syscall without pointers.
            let fd = unsafe { libc::kqueue() };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: kqueue returned a new descriptor that we now own.
            let kq = Kqueue {
                fd: unsafe { OwnedFd::from_raw_fd(fd) },
            };
            // SAFETY: fcntl on our own open descriptor.
            unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
            kq.change(STOP, libc::EVFILT_USER, libc::EV_ADD | libc::EV_CLEAR, 0)?;
            Ok(kq)
        }

        fn change(&self, ident: usize, filter: i16, flags: u16, fflags: u32) -> io::Result<()> {
            let ev = libc::kevent {
                ident,
                filter,
                flags,
                fflags,
                data: 0,
                udata: std::ptr::null_mut(),
            };
            // SAFETY: one valid change, no event list.
            let rc = unsafe {
                libc::kevent(
                    self.fd.as_raw_fd(),
                    &ev,
                    1,
                    std::ptr::null_mut(),
                    0,
                    std::ptr::null(),
                )
            };
            if rc < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        }

        pub(super) fn wake(&self) {
            let _ = self.change(STOP, libc::EVFILT_USER, 0, libc::NOTE_TRIGGER);
        }

        /// Waits up to `timeout` for events; returns them.
        fn events(&self, timeout: Duration) -> Vec<libc::kevent> {
            let mut out: [libc::kevent; 8] = unsafe {
                // SAFETY: kevent is plain old data; zeroes are a valid value.
                std::mem::zeroed()
            };
            let ts = timespec(timeout);
            // SAFETY: no changes; `out` has room for its length of events.
            let n = unsafe {
                libc::kevent(
                    self.fd.as_raw_fd(),
                    std::ptr::null(),
                    0,
                    out.as_mut_ptr(),
                    out.len() as libc::c_int,
                    &ts,
                )
            };
            out[..usize::try_from(n).unwrap_or(0)].to_vec()
        }

        /// The timed path's sleep: until a stop request or `timeout`.
        pub(super) fn wait_stop(&self, timeout: Duration) {
            let _ = self.events(timeout);
        }
    }

    /// The watched files.
    #[derive(Debug)]
    pub(super) struct Files {
        dir: OwnedFd,
        wal: Option<OwnedFd>,
        wal_path: CString,
    }

    const FILE_EVENTS: u32 =
        libc::NOTE_WRITE | libc::NOTE_EXTEND | libc::NOTE_DELETE | libc::NOTE_RENAME;

    fn open_for_events(path: &CString) -> io::Result<OwnedFd> {
        // SAFETY: a valid NUL-terminated path; O_EVTONLY opens for event
        // notification only (no reads, no writes, no locks).
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_EVTONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: open returned a new descriptor that we now own.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    fn ident(fd: RawFd) -> usize {
        usize::try_from(fd).unwrap_or(usize::MAX - 1)
    }

    impl Files {
        pub(super) fn new(kq: &Kqueue, db: &Path) -> io::Result<Files> {
            let dir = db.parent().unwrap_or(Path::new("."));
            let mut wal = db.file_name().unwrap_or(OsStr::new("")).as_bytes().to_vec();
            wal.extend_from_slice(b"-wal");
            let wal_path = CString::new(dir.join(OsStr::from_bytes(&wal)).as_os_str().as_bytes())?;
            let dir = open_for_events(&CString::new(dir.as_os_str().as_bytes())?)?;
            kq.change(
                ident(dir.as_raw_fd()),
                libc::EVFILT_VNODE,
                libc::EV_ADD | libc::EV_CLEAR,
                libc::NOTE_WRITE,
            )?;
            let mut files = Files {
                dir,
                wal: None,
                wal_path,
            };
            files.watch_wal(kq);
            Ok(files)
        }

        /// Opens and registers the `-wal` file if it exists and is not
        /// watched yet.
        fn watch_wal(&mut self, kq: &Kqueue) {
            if self.wal.is_some() {
                return;
            }
            if let Ok(fd) = open_for_events(&self.wal_path) {
                let added = kq.change(
                    ident(fd.as_raw_fd()),
                    libc::EVFILT_VNODE,
                    libc::EV_ADD | libc::EV_CLEAR,
                    FILE_EVENTS,
                );
                if added.is_ok() {
                    self.wal = Some(fd);
                }
            }
        }

        pub(super) fn wait(&mut self, kq: &Kqueue, timeout: Duration) -> Wake {
            let mut wake = Wake::Other;
            for ev in kq.events(timeout) {
                if ev.filter != libc::EVFILT_VNODE {
                    continue; // the stop event: the caller checks the flag
                }
                wake = Wake::FileWritten;
                let wal = self.wal.as_ref().map(|f| ident(f.as_raw_fd()));
                if Some(ev.ident) == wal && ev.fflags & (libc::NOTE_DELETE | libc::NOTE_RENAME) != 0
                {
                    // Closing the descriptor removes its event too.
                    self.wal = None;
                }
            }
            let _ = &self.dir;
            // A new `-wal` file (or a first one) is watched from now on.
            self.watch_wal(kq);
            wake
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
