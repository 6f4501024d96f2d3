//! [`OffThreadDrop`]: a runtime object held by a host language's wrapper.

use std::ops::Deref;
use std::sync::Arc;

/// Holds a runtime object (a [`Claimer`](super::Claimer), a
/// [`KeepAlive`](super::KeepAlive)) for a binding whose wrapper is dropped
/// on a thread that must not wait: the JS event loop, a thread holding
/// Python's GIL. Their drop may wait for the writer (a claimer releases its
/// buffered jobs, a keep-alive joins its thread), which there could stall
/// the very transaction being waited for; so the last drop happens on a
/// thread of its own — unless the object says its drop returns at once
/// ([`QuickDrop`]: closed, released, stopped), as it does after the
/// normal end of its use (a thread per `with lock.hold()` was most of
/// its cost). Clones share the object.
#[derive(Debug)]
pub struct OffThreadDrop<T: QuickDrop + Send + Sync + 'static>(Option<Arc<T>>);

/// Whether dropping a runtime object now returns at once: nothing left to
/// give back, no thread to join, no write to wait for. The default says
/// no, so [`OffThreadDrop`] drops it on a thread of its own.
pub trait QuickDrop {
    fn drops_quickly(&self) -> bool {
        false
    }
}

impl<T: QuickDrop> QuickDrop for parking_lot::Mutex<Option<T>> {
    /// Empty (taken), or holding something that drops quickly; not when
    /// another thread holds the mutex.
    fn drops_quickly(&self) -> bool {
        self.try_lock()
            .is_some_and(|v| v.as_ref().is_none_or(QuickDrop::drops_quickly))
    }
}

impl<T: QuickDrop + Send + Sync + 'static> OffThreadDrop<T> {
    pub fn new(value: T) -> OffThreadDrop<T> {
        OffThreadDrop(Some(Arc::new(value)))
    }

    /// A reference to move into blocking work (a call on another thread).
    pub fn shared(&self) -> Arc<T> {
        Arc::clone(self.0.as_ref().expect("held until dropped"))
    }
}

impl<T: QuickDrop + Send + Sync + 'static> Deref for OffThreadDrop<T> {
    type Target = T;

    fn deref(&self) -> &T {
        self.0.as_deref().expect("held until dropped")
    }
}

impl<T: QuickDrop + Send + Sync + 'static> Drop for OffThreadDrop<T> {
    fn drop(&mut self) {
        let Some(value) = self.0.take() else { return };
        // Shared with a call still running elsewhere: that thread (one
        // that may wait) drops it last.
        let Some(value) = Arc::into_inner(value) else {
            return;
        };
        if !value.drops_quickly() {
            IN_FLIGHT.start();
            std::thread::spawn(move || {
                drop(value);
                IN_FLIGHT.end();
            });
        }
    }
}

/// Drops running on threads of their own. At exit the process waits for
/// them (briefly): one of them may be the last owner of a database, whose
/// drop writes this process's last queue counts, and the exit's own flush
/// no longer sees a database being dropped.
static IN_FLIGHT: InFlight = InFlight {
    count: parking_lot::const_mutex((0, 0)),
    done: parking_lot::Condvar::new(),
};

struct InFlight {
    /// (the process whose threads these are, how many run): a forked
    /// child inherits the count but none of the threads.
    count: parking_lot::Mutex<(u32, usize)>,
    done: parking_lot::Condvar,
}

impl InFlight {
    fn start(&self) {
        let mut c = self.count.lock();
        let pid = std::process::id();
        if c.0 != pid {
            *c = (pid, 0);
        }
        c.1 += 1;
    }

    fn end(&self) {
        let mut c = self.count.lock();
        c.1 = c.1.saturating_sub(1);
        if c.1 == 0 {
            self.done.notify_all();
        }
    }

    fn wait(&self, timeout: std::time::Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        let Some(mut c) = self.count.try_lock_for(timeout) else {
            return false;
        };
        let pid = std::process::id();
        while c.0 == pid && c.1 > 0 {
            if self.done.wait_until(&mut c, deadline).timed_out() {
                return c.1 == 0;
            }
        }
        true
    }
}

/// Waits up to `timeout` for the drops running on threads of their own to
/// end; whether they all did.
pub(crate) fn wait_for_drops(timeout: std::time::Duration) -> bool {
    IN_FLIGHT.wait(timeout)
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::thread::{self, ThreadId};
    use std::time::Duration;

    use super::*;

    struct Probe {
        quick: bool,
        dropped_on: mpsc::Sender<ThreadId>,
    }

    impl QuickDrop for Probe {
        fn drops_quickly(&self) -> bool {
            self.quick
        }
    }

    impl Drop for Probe {
        fn drop(&mut self) {
            let _ = self.dropped_on.send(thread::current().id());
        }
    }

    fn probe(quick: bool) -> (OffThreadDrop<Probe>, mpsc::Receiver<ThreadId>) {
        let (tx, rx) = mpsc::channel();
        let value = OffThreadDrop::new(Probe {
            quick,
            dropped_on: tx,
        });
        (value, rx)
    }

    #[test]
    fn a_value_that_drops_quickly_is_dropped_here_and_another_on_a_thread_of_its_own() {
        let here = thread::current().id();
        let (quick, rx) = probe(true);
        drop(quick);
        assert_eq!(rx.try_recv().unwrap(), here);
        let (slow, rx) = probe(false);
        drop(slow);
        let on = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_ne!(on, here);
    }

    #[test]
    fn the_exit_can_wait_for_a_drop_on_its_own_thread() {
        struct Slow(mpsc::Sender<()>);
        impl QuickDrop for Slow {}
        impl Drop for Slow {
            fn drop(&mut self) {
                thread::sleep(Duration::from_millis(200));
                let _ = self.0.send(());
            }
        }
        let (tx, rx) = mpsc::channel();
        drop(OffThreadDrop::new(Slow(tx)));
        assert!(wait_for_drops(Duration::from_secs(10)), "the drop ended");
        assert!(rx.try_recv().is_ok(), "done when the wait returned");
    }

    #[test]
    fn a_value_shared_with_a_running_call_is_dropped_by_the_call() {
        let (value, rx) = probe(true);
        let shared = value.shared();
        drop(value);
        assert!(rx.try_recv().is_err(), "still in use");
        let call = thread::spawn(move || {
            drop(shared);
            thread::current().id()
        });
        let on = call.join().unwrap();
        assert_eq!(rx.try_recv().unwrap(), on);
    }

    #[test]
    fn a_taken_task_drops_quickly_and_one_still_in_use_or_locked_does_not() {
        let (tx, _rx) = mpsc::channel();
        let slot = parking_lot::Mutex::new(Some(Probe {
            quick: false,
            dropped_on: tx,
        }));
        assert!(
            !slot.drops_quickly(),
            "holds a value that must not drop here"
        );
        let taken = slot.lock().take();
        assert!(slot.drops_quickly(), "taken");
        let guard = slot.lock();
        assert!(!slot.drops_quickly(), "locked by another user");
        drop((guard, taken));
    }
}
