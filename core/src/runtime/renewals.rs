//! The timer behind every [`KeepAlive`](super::KeepAlive) of one
//! `Database`: a renewal that is not due yet costs no thread.
//!
//! Most holds are short — a lock held by a block that ends in
//! milliseconds, a job that finishes long before a third of its lease —
//! and starting and joining a thread for each was most of the cost of
//! `with lock.hold()`. So a keep-alive is first only an entry here, keyed
//! by when its first renewal is due; one thread per database sleeps until
//! the earliest. When a keep-alive's first renewal comes due, that thread
//! gives it a thread of its own, which renews it from then on exactly as
//! before (so one renewal waiting for the writer never delays another's).
//! The timer thread never calls into SQLite. Stopping a keep-alive that is
//! still waiting removes its entry; nothing else happens.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, Result};

/// A keep-alive's first renewal, as the timer sees it.
/// The keep-alives' timer of `db`, made with its first keep-alive and shut
/// down when the database is dropped.
pub(crate) fn of(db: &crate::Database) -> Arc<Renewals> {
    /// Shuts the timer down with the database that holds it.
    struct Slot(Arc<Renewals>);
    impl Drop for Slot {
        fn drop(&mut self) {
            self.0.shutdown();
        }
    }
    Arc::clone(&db.inner.engine.slot(|| Slot(Arc::default())).0)
}

pub(crate) trait Due: Send + Sync {
    /// Called on the timer thread when the first renewal is due; starts
    /// the renewals (returns quickly: it must not wait for the database).
    fn start_renewing(self: Arc<Self>);
}

/// One database's timer (created at the first keep-alive, stopped when the
/// database is dropped).
#[derive(Default)]
pub(crate) struct Renewals {
    state: Mutex<State>,
    cv: Condvar,
}

impl std::fmt::Debug for Renewals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.state.lock();
        f.debug_struct("Renewals")
            .field("waiting", &s.waiting.len())
            .field("running", &s.running)
            .finish()
    }
}

#[derive(Default)]
struct State {
    /// Waiting keep-alives by (first renewal due, registration number).
    waiting: BTreeMap<(Instant, u64), Arc<dyn Due>>,
    next_id: u64,
    running: bool,
    /// What the timer thread is doing, so `add` wakes it only when it
    /// must: a hold that ends within a third of its TTL (most) then costs
    /// the timer nothing.
    sleep: Sleep,
    shutdown: bool,
}

#[derive(Clone, Copy, Default, PartialEq)]
enum Sleep {
    /// Looking at the entries (it sees a new one before it sleeps).
    #[default]
    Awake,
    /// Asleep until then.
    Until(Instant),
    /// Asleep until woken (idle for a while).
    Forever,
}

/// While no keep-alive waits, the timer naps this long at a time for
/// [`IDLE_NAPS`] before it sleeps until woken: keep-alives filed at a high
/// rate then never wake it (each due later than its nap ends), and an idle
/// process sees no wake-ups after that.
const NAP: Duration = Duration::from_secs(1);
const IDLE_NAPS: u32 = 10;

/// An entry's place in the timer, to take it out again.
pub(crate) type Key = (Instant, u64);

impl Renewals {
    /// Files `due` to start renewing at `at`; starts the timer thread if
    /// it is not running.
    pub(crate) fn add(self: &Arc<Self>, at: Instant, due: Arc<dyn Due>) -> Result<Key> {
        let mut s = self.state.lock();
        if s.shutdown {
            return Err(Error::closed());
        }
        s.next_id += 1;
        let key = (at, s.next_id);
        let wake = match s.sleep {
            Sleep::Awake => false,
            Sleep::Until(until) => at < until,
            Sleep::Forever => true,
        };
        s.waiting.insert(key, due);
        if !s.running {
            let me = Arc::clone(self);
            std::thread::Builder::new()
                .name("honker-renewals".into())
                .spawn(move || me.run())
                .map_err(|e| {
                    s.waiting.remove(&key);
                    Error::internal(format!("cannot start the renewal timer: {e}"))
                })?;
            s.running = true;
        } else if wake {
            s.sleep = Sleep::Awake;
            self.cv.notify_one();
        }
        Ok(key)
    }

    /// Takes a waiting entry out; `false` if the timer already handed it
    /// to [`Due::start_renewing`] (or is doing so).
    pub(crate) fn remove(&self, key: &Key) -> bool {
        self.state.lock().waiting.remove(key).is_some()
    }

    /// Ends the timer thread (the database is being dropped: no keep-alive
    /// of it is left, since each holds the database).
    pub(crate) fn shutdown(&self) {
        let mut s = self.state.lock();
        s.shutdown = true;
        s.sleep = Sleep::Awake;
        self.cv.notify_all();
    }

    fn run(&self) {
        let mut s = self.state.lock();
        let mut naps = 0;
        loop {
            s.sleep = Sleep::Awake;
            if s.shutdown {
                s.running = false;
                return;
            }
            let now = Instant::now();
            let Some((&key, _)) = s.waiting.first_key_value() else {
                if naps < IDLE_NAPS {
                    naps += 1;
                    let until = now + NAP;
                    s.sleep = Sleep::Until(until);
                    self.cv.wait_until(&mut s, until);
                } else {
                    s.sleep = Sleep::Forever;
                    self.cv.wait(&mut s);
                }
                continue;
            };
            naps = 0;
            if now < key.0 {
                s.sleep = Sleep::Until(key.0);
                self.cv.wait_until(&mut s, key.0);
                continue;
            }
            let due = s.waiting.remove(&key).expect("the first entry");
            drop(s);
            due.start_renewing();
            s = self.state.lock();
        }
    }
}

/// How long after its start a keep-alive renewing every `every` is first
/// due (`Instant` arithmetic that cannot overflow).
pub(crate) fn first_due(every: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(every)
        .unwrap_or_else(|| now + Duration::from_secs(86_400 * 365))
}
