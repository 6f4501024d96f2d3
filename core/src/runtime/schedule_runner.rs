//! [`ScheduleRunner`]: the scheduler's loop, safe to run in every process.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::database::Database;
use crate::error::Result;
use crate::raw::Conn;
use crate::schedule::{ops, Fire, Scheduler};
use crate::validate;

/// How long after a boundary a process that did not make the last tick
/// waits before it ticks itself (plus up to as much again, fixed per
/// runner, so that followers do not all wake at once): the last ticker
/// ("the leader") usually fires first and the others, woken by its
/// commit, find nothing due and never take the write lock. Correctness
/// does not depend on it: any process may tick at any time.
pub const FOLLOWER_DELAY: Duration = Duration::from_millis(1000);

/// The shortest time between two checks of one runner (the default of
/// [`ScheduleRunner::new`]): a commit wakes it, but a busy file's commits
/// cost it at most one read-only check per this long. A boundary is never
/// noticed later than this, plus the follower delay.
pub const MIN_RECHECK: Duration = Duration::from_millis(25);

const SCOPE: &str = "scheduler";
const LEADER: &str = "leader";

/// Fires schedules when they are due, in a loop a host runs on a thread of
/// its own (every surface's `scheduler.run()` is this). Any number of
/// runners in any number of processes share a file: each boundary fires
/// exactly once (its key commits with its job), and in the common case
/// only one of them takes the write lock for a due fire.
///
/// It sleeps until the earliest boundary due or a commit to the file
/// (which may add or change a schedule); each wake-up re-checks with one
/// read-only index seek. Thread-safe: `close` may come from another thread
/// while `next` waits.
#[derive(Debug)]
pub struct ScheduleRunner {
    scheduler: Scheduler,
    id: i64,
    follower_delay_ms: i64,
    closed: AtomicBool,
    min_recheck: Duration,
    last_check: Mutex<Option<Instant>>,
    /// When this runner first saw a buffered fire ready, as a follower.
    buffered_seen: Mutex<Option<i64>>,
    write_transactions: AtomicU64,
    fires: AtomicU64,
}

impl ScheduleRunner {
    /// A runner on `db`'s schedules, checking at most every
    /// [`MIN_RECHECK`].
    pub fn new(db: &Database) -> ScheduleRunner {
        Self::with_min_recheck(db, MIN_RECHECK)
    }

    /// A runner that checks at most every `min_recheck` (zero: at every
    /// commit to the file).
    pub fn with_min_recheck(db: &Database, min_recheck: Duration) -> ScheduleRunner {
        let id = loop {
            let id = fastrand::i64(1..i64::MAX);
            if id != 0 {
                break id;
            }
        };
        let base = crate::clock::duration_ms(FOLLOWER_DELAY);
        ScheduleRunner {
            scheduler: db.scheduler(),
            id,
            follower_delay_ms: base + fastrand::i64(0..=base),
            closed: AtomicBool::new(false),
            min_recheck,
            last_check: Mutex::new(None),
            buffered_seen: Mutex::new(None),
            write_transactions: AtomicU64::new(0),
            fires: AtomicU64::new(0),
        }
    }

    /// This runner's id, stored as the leader's when it ticks.
    pub fn id(&self) -> i64 {
        self.id
    }

    /// Write transactions this runner took to tick (some find nothing to
    /// fire: another process fired it first).
    pub fn write_transactions(&self) -> u64 {
        self.write_transactions.load(Ordering::Relaxed)
    }

    /// Fires this runner made.
    pub fn fires(&self) -> u64 {
        self.fires.load(Ordering::Relaxed)
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Stops the runner and wakes a waiting `next`. Idempotent.
    pub fn close(&self) {
        if !self.closed.swap(true, Ordering::SeqCst) {
            self.scheduler.database().poke();
        }
    }

    /// Waits up to `wait` for due boundaries and fires them: the fires
    /// made (empty when the wait ran out, or the runner was closed).
    /// Call it in a loop.
    pub fn next(&self, wait: Duration) -> Result<Vec<Fire>> {
        self.next_until(wait, &|| false)
    }

    /// [`next`](Self::next) that also returns once `stop` says so (checked
    /// at each wake-up).
    pub fn next_until(&self, wait: Duration, stop: &dyn Fn() -> bool) -> Result<Vec<Fire>> {
        validate::delay("wait", wait)?;
        let db = self.scheduler.database();
        let pace = crate::Pace::new(wait, db.recheck_interval(), false);
        let signal = db.wait_signal()?;
        loop {
            if self.is_closed() || stop() {
                return Ok(vec![]);
            }
            let seen = signal.generation();
            let last = *self.last_check.lock();
            if let Some(ready) = last.map(|t| t + self.min_recheck) {
                let now = Instant::now();
                if now < ready {
                    std::thread::sleep(ready - now);
                    if self.is_closed() || stop() {
                        return Ok(vec![]);
                    }
                }
            }
            *self.last_check.lock() = Some(Instant::now());
            let (due_at, buffered, leader) = {
                let reader = db.inner.reader()?;
                let r = reader.raw();
                (
                    ops::next_due(r)?,
                    !ops::buffered_ready(r)?.is_empty(),
                    leader(r)?,
                )
            };
            let now = db.inner.now();
            let lag = if leader.is_none_or(|l| l == self.id) {
                0
            } else {
                self.follower_delay_ms
            };
            let buffered_at = if buffered {
                Some(*self.buffered_seen.lock().get_or_insert(now))
            } else {
                *self.buffered_seen.lock() = None;
                None
            };
            let wake_at = [due_at, buffered_at]
                .into_iter()
                .flatten()
                .min()
                .map(|t| t.saturating_add(lag));
            if wake_at.is_some_and(|t| t <= now) {
                let fires = self.tick()?;
                *self.buffered_seen.lock() = None;
                if !fires.is_empty() {
                    return Ok(fires);
                }
                continue;
            }
            let start = Instant::now();
            let due = wake_at.map(|t| crate::clock::ms_until(t, now));
            let Some(nap) = pace.nap(due, start) else {
                return Ok(vec![]);
            };
            crate::connection::refuse_waiting("ScheduleRunner::next")?;
            signal.wait_past(seen, start + nap);
        }
    }

    /// One tick in a write transaction, recording this runner as the
    /// leader.
    fn tick(&self) -> Result<Vec<Fire>> {
        let id = self.id;
        let fires = self.scheduler.database().inner.write(None, |conn, now| {
            let c = conn.raw();
            if leader(c)? != Some(id) {
                crate::settings::set_int(c, SCOPE, "", LEADER, Some(id), now)?;
            }
            ops::tick(c, now, ops::TICK_BATCH)
        })?;
        self.write_transactions.fetch_add(1, Ordering::Relaxed);
        self.fires.fetch_add(fires.len() as u64, Ordering::Relaxed);
        Ok(fires)
    }
}

impl Drop for ScheduleRunner {
    fn drop(&mut self) {
        self.closed.store(true, Ordering::SeqCst);
    }
}

fn leader(conn: Conn<'_>) -> Result<Option<i64>> {
    Ok(crate::settings::get_int(conn, SCOPE, "", LEADER)?.flatten())
}

/// A [`ScheduleRunner`] on a thread of its own (`honker-scheduler`), until
/// [`stop`](Self::stop) or drop: what the worker runtime runs in every
/// process by default. A failed tick (the file busy past its timeout) is
/// tried again a second later; the last error is kept for the host.
#[derive(Debug)]
pub struct ScheduleThread {
    runner: Arc<ScheduleRunner>,
    last_error: Arc<Mutex<Option<(crate::ErrorKind, String)>>>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl ScheduleThread {
    /// Starts a runner on `db` on a new thread.
    pub fn start(db: &Database) -> Result<ScheduleThread> {
        // The watcher must run before the thread waits on it.
        db.wait_signal()?;
        let runner = Arc::new(ScheduleRunner::new(db));
        let last_error = Arc::new(Mutex::new(None));
        let (r, e) = (Arc::clone(&runner), Arc::clone(&last_error));
        let thread = std::thread::Builder::new()
            .name("honker-scheduler".into())
            .spawn(move || {
                while !r.is_closed() {
                    match r.next(Duration::from_secs(3600)) {
                        Ok(_) => {}
                        Err(err) if err.kind() == crate::ErrorKind::Closed => break,
                        Err(err) => {
                            *e.lock() = Some((err.kind(), err.message().to_string()));
                            std::thread::sleep(Duration::from_secs(1));
                        }
                    }
                }
            })
            .map_err(|err| {
                crate::Error::internal(format!("cannot start the scheduler thread: {err}"))
            })?;
        Ok(ScheduleThread {
            runner,
            last_error,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// The runner (its counts).
    pub fn runner(&self) -> &ScheduleRunner {
        &self.runner
    }

    /// The last error a tick met, if any.
    pub fn last_error(&self) -> Option<crate::Error> {
        self.last_error
            .lock()
            .as_ref()
            .map(|(k, m)| crate::Error::new(*k, m.clone()))
    }

    /// Stops the runner without waiting for its thread (which ends at once,
    /// or after the tick under way). Idempotent.
    pub fn close(&self) {
        self.runner.close();
    }

    /// Stops the runner and waits for its thread. Idempotent.
    pub fn stop(&self) {
        self.runner.close();
        if let Some(t) = self.thread.lock().take() {
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
    }
}

impl Drop for ScheduleThread {
    fn drop(&mut self) {
        self.stop();
    }
}
