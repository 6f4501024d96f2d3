//! [`TaskTable`]: a worker's handed-out [`Task`]s kept by key, for hosts
//! that hold a number per job instead of a native object (Node's JS side,
//! Swift's): the key crosses the FFI, the task stays here until
//! [`take`](TaskTable::take) hands it to [`Worker::complete`].
//!
//! Keys are never reused within a table (a `u64` counter), so a late call
//! with the key of a finished task finds nothing instead of another task.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use super::{Finished, Task};
use crate::error::{Error, Result};

#[cfg(doc)]
use super::Worker;

/// See the module docs.
#[derive(Debug)]
pub struct TaskTable {
    tasks: Mutex<HashMap<u64, Task>>,
    next_key: AtomicU64,
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
        self.tasks.lock().insert(key, task);
        out
    }

    /// Takes task `key` out (to complete it); `INVALID_ARGUMENT` if no task
    /// has that key (never handed out, or already taken).
    pub fn take(&self, key: u64) -> Result<Task> {
        self.tasks
            .lock()
            .remove(&key)
            .ok_or_else(|| Error::invalid(format!("no running task {key}")))
    }

    /// Puts a taken task back under its key (a completion that would have
    /// waited: [`Completion::WouldWait`](super::Completion::WouldWait)).
    pub fn put_back(&self, key: u64, task: Task) {
        self.tasks.lock().insert(key, task);
    }

    /// Why the worker gave up on task `key` ([`Task::gave_up`]); `None` if
    /// it did not, or there is no such task.
    pub fn gave_up(&self, key: u64) -> Option<Finished> {
        self.tasks.lock().get(&key)?.gave_up()
    }
}
