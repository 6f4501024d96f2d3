//! [`TaskTable`]: a worker's handed-out [`Task`]s kept by key, for hosts
//! that hold a number per job instead of a native object (Node's JS side,
//! Swift's): the key crosses the FFI, the task stays here until
//! [`take`](TaskTable::take) hands it to [`Worker::complete`].
//!
//! Keys are never reused within a table (a `u64` counter), so a late call
//! with the key of a finished task finds nothing instead of another task.
//!
//! [`wait_gave_up`](TaskTable::wait_gave_up) tells the host which of its
//! tasks the worker gave up on (their handlers to cancel) when it happens:
//! one outstanding call, woken by the worker, where a poll of every task
//! would learn it late.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use super::{Finished, Task, Worker};
use crate::error::{Error, Result};

/// See the module docs.
#[derive(Debug)]
pub struct TaskTable {
    tasks: Mutex<HashMap<u64, Kept>>,
    next_key: AtomicU64,
}

#[derive(Debug)]
struct Kept {
    task: Task,
    /// `wait_gave_up` has reported it.
    told: bool,
}

impl Default for TaskTable {
    fn default() -> TaskTable {
        TaskTable {
            tasks: Mutex::new(HashMap::new()),
            next_key: AtomicU64::new(1),
        }
    }
}

impl TaskTable {
    /// Keeps `task` under a new key; `describe` builds the host's record of
    /// it (key, queue, job) before it goes in.
    pub fn keep<R>(&self, task: Task, describe: impl FnOnce(u64, &Task) -> R) -> R {
        let key = self.next_key.fetch_add(1, Ordering::Relaxed);
        let out = describe(key, &task);
        let early = task.given_up_early().then(|| task.worker());
        self.tasks.lock().insert(key, Kept { task, told: false });
        if let Some(worker) = early {
            // Given up on before it was here to be found: look again.
            worker.wake_gave_up();
        }
        out
    }

    /// Takes task `key` out (to complete it); `INVALID_ARGUMENT` if no task
    /// has that key (never handed out, or already taken).
    pub fn take(&self, key: u64) -> Result<Task> {
        self.tasks
            .lock()
            .remove(&key)
            .map(|k| k.task)
            .ok_or_else(|| Error::invalid(format!("no running task {key}")))
    }

    /// Puts a taken task back under its key (a completion that would have
    /// waited: [`Completion::WouldWait`](super::Completion::WouldWait)).
    pub fn put_back(&self, key: u64, task: Task) {
        self.tasks.lock().insert(key, Kept { task, told: false });
    }

    /// Why the worker gave up on task `key` ([`Task::gave_up`]); `None` if
    /// it did not, or there is no such task.
    pub fn gave_up(&self, key: u64) -> Option<Finished> {
        self.tasks.lock().get(&key)?.task.gave_up()
    }

    /// The tasks `worker` gave up on (timed out, lease lost, released by a
    /// shutdown) that this table holds and has not reported yet, each with
    /// why, waiting up to `wait` for one: returns at once when there are
    /// some, else when the worker's [`gave_up_generation`] moves past
    /// `seen` (it gave up on a task, or [`Worker::wake_gave_up`] was
    /// called: then possibly empty), or when `wait` ran out. Each task is
    /// reported once.
    ///
    /// Read `seen` on the host's own thread before it decides to wait, and
    /// end the wait with `wake_gave_up` after it decided to stop: then a
    /// wake between the two cannot be missed (the wait itself may start
    /// later, on another thread).
    ///
    /// [`gave_up_generation`]: Worker::gave_up_generation
    pub fn wait_gave_up(&self, worker: &Worker, seen: u64, wait: Duration) -> Vec<(u64, Finished)> {
        let told = self.take_gave_up();
        if !told.is_empty() || worker.wait_gave_up(seen, wait) == seen {
            return told;
        }
        self.take_gave_up()
    }

    /// The tasks given up on and not reported yet, marked reported.
    fn take_gave_up(&self) -> Vec<(u64, Finished)> {
        let mut tasks = self.tasks.lock();
        let mut out: Vec<(u64, Finished)> = tasks
            .iter_mut()
            .filter(|(_, k)| !k.told)
            .filter_map(|(key, k)| {
                let why = k.task.gave_up()?;
                k.told = true;
                Some((*key, why))
            })
            .collect();
        out.sort_unstable_by_key(|(key, _)| *key);
        out
    }
}
