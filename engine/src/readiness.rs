//! A descriptor an event loop can watch (asyncio's `add_reader`, libuv's
//! poll handle): readable once the file may have changed since it was last
//! drained, while it is armed.
//!
//! A reader on an event loop waits for commits through this instead of a
//! thread: the watcher thread writes a byte to each armed descriptor when it
//! bumps the file's signal, and the loop thread wakes straight from its
//! selector. That is one thread hand-off per wake-up instead of three (the
//! watcher to a waiting pool thread, the pool thread to the loop).
//!
//! The protocol, which loses no wake-up: [`arm`](Readiness::arm), then
//! [`drain`](Readiness::drain), then look (a non-waiting `next`); if there
//! was nothing, wait until the descriptor is readable (or a re-check
//! interval passes) and start again from `drain`; [`disarm`](Readiness::disarm)
//! once done waiting. A commit after the drain writes the descriptor, so the
//! wait returns at once. An armed descriptor keeps the watcher thread
//! running (it counts as a waiter); a disarmed one costs nothing.
//!
//! On Unix it is a pipe. Elsewhere (Windows: no pipe an event loop can
//! select on) it is a flag and a condvar with the same protocol, and
//! [`wait`](Readiness::wait) blocks a thread of the caller's on it: Node's
//! waits give each file one such thread, Python's loops fall back to their
//! thread waits (ADR 30).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::watcher::Signal;

#[cfg(unix)]
use std::os::fd::{AsRawFd, RawFd};

/// What the watcher wakes; shared between a [`Readiness`] and the signal's
/// list of readers to wake.
#[derive(Debug)]
pub(crate) struct Pipe {
    armed: AtomicBool,
    #[cfg(unix)]
    fds: unix::Fds,
    #[cfg(not(unix))]
    pending: parking_lot::Mutex<bool>,
    #[cfg(not(unix))]
    cv: parking_lot::Condvar,
}

impl Pipe {
    fn new() -> std::io::Result<Pipe> {
        Ok(Pipe {
            armed: AtomicBool::new(false),
            #[cfg(unix)]
            fds: unix::Fds::new()?,
            #[cfg(not(unix))]
            pending: parking_lot::Mutex::new(false),
            #[cfg(not(unix))]
            cv: parking_lot::Condvar::new(),
        })
    }

    /// The watcher's side: readable (pending) if armed. A full pipe
    /// (EAGAIN) is already readable, which is all a wake-up means.
    pub(crate) fn wake(&self) {
        if self.armed.load(Ordering::SeqCst) {
            #[cfg(unix)]
            self.fds.write_one();
            #[cfg(not(unix))]
            {
                *self.pending.lock() = true;
                self.cv.notify_all();
            }
        }
    }

    fn drain(&self) -> bool {
        #[cfg(unix)]
        return self.fds.drain();
        #[cfg(not(unix))]
        return std::mem::take(&mut *self.pending.lock());
    }

    fn wait(&self, timeout: Duration) -> bool {
        #[cfg(unix)]
        return self.fds.wait_readable(timeout);
        #[cfg(not(unix))]
        {
            let mut pending = self.pending.lock();
            if !*pending {
                self.cv.wait_for(&mut pending, timeout);
            }
            *pending
        }
    }
}

#[cfg(unix)]
mod unix {
    use std::io;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::time::Duration;

    /// A non-blocking, close-on-exec pipe.
    #[derive(Debug)]
    pub(super) struct Fds {
        pub(super) read: OwnedFd,
        write: OwnedFd,
    }

    impl Fds {
        pub(super) fn new() -> io::Result<Fds> {
            let mut fds = [0; 2];
            // SAFETY: `fds` is a valid array of two ints.
            if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: pipe succeeded, so both fds are open and now owned here.
            let (read, write) =
                unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
            for fd in [&read, &write] {
                let raw = fd.as_raw_fd();
                // SAFETY: fcntl on an fd we own, with valid commands and flags.
                let ok = unsafe {
                    let fl = libc::fcntl(raw, libc::F_GETFL);
                    fl >= 0
                        && libc::fcntl(raw, libc::F_SETFL, fl | libc::O_NONBLOCK) == 0
                        && libc::fcntl(raw, libc::F_SETFD, libc::FD_CLOEXEC) == 0
                };
                if !ok {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(Fds { read, write })
        }

        pub(super) fn write_one(&self) {
            let b = 1u8;
            // SAFETY: writes one byte from a valid buffer to an open fd.
            unsafe { libc::write(self.write.as_raw_fd(), std::ptr::addr_of!(b).cast(), 1) };
        }

        pub(super) fn drain(&self) -> bool {
            let mut buf = [0u8; 64];
            let mut any = false;
            loop {
                // SAFETY: reads into a valid buffer of its length from an open fd.
                let n = unsafe {
                    libc::read(self.read.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len())
                };
                if n <= 0 {
                    return any;
                }
                any = true;
            }
        }

        pub(super) fn wait_readable(&self, timeout: Duration) -> bool {
            let mut p = libc::pollfd {
                fd: self.read.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut p, 1, ms) > 0 }
        }
    }
}

/// A descriptor that becomes readable when the database file may have
/// changed, from [`Database::readiness`](crate::Database::readiness): a
/// pipe on Unix, elsewhere a flag to [`wait`](Self::wait) on. Dropping it
/// unregisters it.
#[derive(Debug)]
pub struct Readiness {
    signal: Arc<Signal>,
    pipe: Arc<Pipe>,
}

impl Readiness {
    pub(crate) fn new(signal: Arc<Signal>) -> Result<Readiness> {
        let pipe = Arc::new(
            Pipe::new()
                .map_err(|e| Error::internal(format!("cannot create a readiness pipe: {e}")))?,
        );
        signal.register(&pipe);
        Ok(Readiness { signal, pipe })
    }

    /// The descriptor to watch for readability. Valid while this lives.
    #[cfg(unix)]
    pub fn fd(&self) -> RawFd {
        self.pipe.fds.read.as_raw_fd()
    }

    /// Blocks until it is readable (a change since the last drain, or a
    /// [`wake`](Self::wake)) or `timeout` passes; does not drain. Whether
    /// it is readable. For a thread that waits for an event loop that
    /// cannot select on the descriptor.
    pub fn wait(&self, timeout: Duration) -> bool {
        self.pipe.wait(timeout)
    }

    /// From now on, changes make the descriptor readable (and the watcher
    /// runs). Idempotent.
    pub fn arm(&self) {
        if !self.pipe.armed.swap(true, Ordering::SeqCst) {
            self.signal.add_waiter();
        }
    }

    /// Changes no longer write the descriptor; the watcher may park if
    /// nothing else waits. Idempotent.
    pub fn disarm(&self) {
        if self.pipe.armed.swap(false, Ordering::SeqCst) {
            self.signal.remove_waiter();
        }
    }

    /// Whether it is armed.
    pub fn is_armed(&self) -> bool {
        self.pipe.armed.load(Ordering::SeqCst)
    }

    /// Empties the descriptor (it is not readable after this until the next
    /// change). Returns whether anything was pending.
    pub fn drain(&self) -> bool {
        self.pipe.drain()
    }

    /// Makes the descriptor readable now if armed (a close or stop request
    /// from another thread, so that the loop looks again).
    pub fn wake(&self) {
        self.pipe.wake();
    }
}

impl Drop for Readiness {
    fn drop(&mut self) {
        self.disarm();
        self.signal.unregister(&self.pipe);
    }
}
