//! Waits that hold no thread (ADR 14's addendum).
//!
//! A wait run as one blocking core call holds one of tokio's blocking
//! threads for as long as it waits, and short calls that would wait for a
//! lock go to the same pool: past its 512 threads, idle consumers, lock
//! waiters and result waiters left every such call (and every further wait)
//! queued until one of them ran out.
//!
//! So a wait here is a loop on the runtime itself: note the generation, look
//! (one read, never waiting: core's `due_in`/`free_in`), take on the
//! blocking pool only when the look found something (a short call), and
//! otherwise sleep until the generation moves (any process's commit), the
//! time looked, or the re-check interval. The commits arrive through one
//! readiness pipe per database file (core's, written by the watcher thread
//! while armed) under tokio's reactor, shared by every wait on that file;
//! whoever drains it moves the generation, which ends every other wait's
//! sleep, so none misses a commit that came while it looked or took.
//!
//! Windows has no pipe for the reactor: there one thread per database file
//! (not per wait) blocks in the readiness's `wait` and moves the generation
//! (core's readiness.rs, ADR 30).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::watch;

#[cfg(unix)]
mod fd {
    use std::os::fd::{AsRawFd, RawFd};

    /// The readiness pipe's read end, as tokio's reactor takes it (the pipe
    /// itself belongs to the `Readiness`).
    pub(super) struct Fd(pub(super) RawFd);

    impl AsRawFd for Fd {
        fn as_raw_fd(&self) -> RawFd {
            self.0
        }
    }
}

/// The waits on one database file. Field order is drop order: the reactor
/// lets go of the descriptor before the pipe closes.
struct Waits {
    #[cfg(unix)]
    fd: tokio::io::unix::AsyncFd<fd::Fd>,
    ready: Arc<honker::Readiness>,
    generation: Arc<watch::Sender<u64>>,
    /// Windows: the thread that waits on `ready`, told to end at drop.
    #[cfg(not(unix))]
    done: Arc<std::sync::atomic::AtomicBool>,
}

impl Waits {
    /// Until the pipe is readable (then drained: the generation moves), the
    /// generation moved since `rx` last looked, or `nap` passed.
    #[cfg(unix)]
    async fn sleep(&self, rx: &mut watch::Receiver<u64>, nap: Duration) {
        tokio::select! {
            r = self.fd.readable() => {
                if let Ok(mut guard) = r {
                    if self.ready.drain() {
                        self.generation.send_modify(|g| *g = g.wrapping_add(1));
                    }
                    guard.clear_ready();
                }
            }
            _ = rx.changed() => {}
            () = tokio::time::sleep(nap) => {}
        }
    }

    /// Until the file's waiting thread moves the generation (or it moved
    /// since `rx` last looked), or `nap` passed.
    #[cfg(not(unix))]
    async fn sleep(&self, rx: &mut watch::Receiver<u64>, nap: Duration) {
        tokio::select! {
            _ = rx.changed() => {}
            () = tokio::time::sleep(nap) => {}
        }
    }
}

impl Drop for Waits {
    fn drop(&mut self) {
        #[cfg(not(unix))]
        {
            self.done.store(true, std::sync::atomic::Ordering::SeqCst);
            self.ready.wake();
        }
        self.ready.disarm();
    }
}

/// The waits of every file some wait is on now; gone when the last ends.
static WAITS: Mutex<Option<HashMap<PathBuf, Weak<Waits>>>> = Mutex::new(None);

fn waits(db: &honker::Database) -> honker::Result<Arc<Waits>> {
    let mut all = WAITS.lock();
    let all = all.get_or_insert_with(HashMap::new);
    if let Some(w) = all.get(db.path()).and_then(Weak::upgrade) {
        return Ok(w);
    }
    all.retain(|_, w| w.strong_count() > 0);
    let ready = Arc::new(db.readiness()?);
    ready.arm();
    let generation = Arc::new(watch::Sender::new(0u64));
    #[cfg(unix)]
    // SAFETY: the descriptor is the read end of `ready`'s pipe, which stays
    // open, the same description, for as long as this `AsyncFd` lives: both
    // belong to one `Waits`, whose field order drops the `AsyncFd` first
    // (and no other holder of `ready` outlives it: only Windows's thread).
    let fd = unsafe {
        tokio::io::unix::AsyncFd::register_with_interest(
            fd::Fd(ready.fd()),
            tokio::io::Interest::READABLE,
        )
    }
    .map_err(|e| internal(format!("cannot watch the readiness pipe: {e}")))?;
    #[cfg(not(unix))]
    let done = {
        use std::sync::atomic::{AtomicBool, Ordering};
        let done = Arc::new(AtomicBool::new(false));
        let (r, g, d) = (
            Arc::clone(&ready),
            Arc::clone(&generation),
            Arc::clone(&done),
        );
        std::thread::Builder::new()
            .name("honker-waits".into())
            .spawn(move || {
                while !d.load(Ordering::SeqCst) {
                    // Woken at once by a change or by the drop's wake; the
                    // interval only bounds a lost stop.
                    if r.wait(Duration::from_secs(1)) && r.drain() {
                        g.send_modify(|n| *n = n.wrapping_add(1));
                    }
                }
            })
            .map_err(|e| internal(format!("cannot start the waits thread: {e}")))?;
        done
    };
    let w = Arc::new(Waits {
        #[cfg(unix)]
        fd,
        ready,
        generation,
        #[cfg(not(unix))]
        done,
    });
    all.insert(db.path().to_owned(), Arc::downgrade(&w));
    Ok(w)
}

/// Up to `wait` for what `source` takes (`None`: the wait ran out, ended
/// early, or `stop` said so), with core's rules of a wait ([`honker::Pace`]):
/// a look here without waiting (a reader not free at once is taken as
/// "now"), a take right here where it needs no waiting (when `inline`, and
/// not under durability full), else on the blocking pool; between them a
/// sleep until any process's commit or the time the pace gives.
pub(crate) async fn wait<S>(
    db: &honker::Database,
    wait: Duration,
    inline: bool,
    source: Arc<S>,
    stop: impl Fn() -> bool,
) -> honker::Result<Option<S::Item>>
where
    S: honker::Source + Send + Sync + 'static,
    S::Item: Send + 'static,
{
    if wait.is_zero() {
        return on_pool(move || source.take()).await;
    }
    let waits = waits(db)?;
    let inline = inline && db.options().durability != honker::Durability::Full;
    let mut rx = waits.generation.subscribe();
    let pace = honker::Pace::new(wait, db.recheck_interval(), source.ends_early());
    loop {
        rx.borrow_and_update();
        if stop() {
            return Ok(None);
        }
        let mut due = match honker::without_waiting(|| source.look()) {
            Err(e) if e.kind() == honker::ErrorKind::Busy => Some(Duration::ZERO),
            r => r?,
        };
        if due == Some(Duration::ZERO) {
            // Right here when the take needs no waiting (tens of µs, one
            // hand-off fewer; not under durability full, where each commit
            // fsyncs), else on the blocking pool.
            let here = match inline {
                true => match honker::without_waiting(|| source.take()) {
                    Err(e) if e.kind() == honker::ErrorKind::Busy => None,
                    r => Some(r),
                },
                false => None,
            };
            let got = match here {
                Some(r) => r?,
                None => {
                    let s = Arc::clone(&source);
                    on_pool(move || s.take()).await?
                }
            };
            if got.is_some() || stop() {
                return Ok(got);
            }
            due = source.retry_in(); // none: another was first, or refused
        }
        let Some(nap) = pace.nap(due, std::time::Instant::now()) else {
            return Ok(None);
        };
        waits.sleep(&mut rx, nap).await;
    }
}

/// A reader's `next(wait)` (a claimer, subscription, listener or group
/// consumer: core's sources) as a wait that holds no thread, ending when
/// the reader is closed.
pub(crate) async fn next<R>(
    db: honker::Database,
    wait: f64,
    r: Arc<R>,
    closed: fn(&R) -> bool,
) -> honker::Result<Option<R::Item>>
where
    R: honker::Source + Send + Sync + 'static,
    R::Item: Send + 'static,
{
    let wait = crate::errors::ms("wait", wait)?;
    let reader = Arc::clone(&r);
    self::wait(&db, wait, true, r, move || closed(&reader)).await
}

/// `f` on tokio's blocking pool; a panic there is `INTERNAL`.
pub(crate) async fn on_pool<T: Send + 'static>(
    f: impl FnOnce() -> honker::Result<T> + Send + 'static,
) -> honker::Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| internal(format!("a honker call panicked: {e}")))?
}

pub(crate) fn internal(message: String) -> honker::Error {
    honker::Error::new(honker::ErrorKind::Internal, message)
}
