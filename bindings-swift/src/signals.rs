//! SIGTERM and SIGINT for Swift's `Worker.run(signals: true)`, by a
//! self-pipe: the handler installed here only writes the signal's number to
//! a pipe (all a signal handler may safely do); Swift reads the other end
//! with a dispatch source and tells its running workers.
//!
//! libdispatch's own signal sources did not do on Linux: a source is
//! registered asynchronously after the caller sets the disposition to
//! `SIG_IGN`, so a signal sent in between was ignored (a worker stopped just
//! after its first claim, resumed and sent SIGTERM at once, ran on); and
//! libdispatch installs its handler only for the first source of a signal in
//! a process, so a second worker's source never received SIGTERM.

use crate::errors::R;

/// The signals relayed.
#[cfg(unix)]
const SIGNALS: [libc::c_int; 2] = [libc::SIGTERM, libc::SIGINT];

#[cfg(unix)]
mod imp {
    use super::SIGNALS;
    use crate::errors::{HonkerError, R};
    use parking_lot::Mutex;
    use std::sync::atomic::{AtomicI32, Ordering};

    /// The pipe's write end, for the handler (an atomic: no lock in a
    /// signal handler). Set once, before any handler is installed.
    static WRITE_FD: AtomicI32 = AtomicI32::new(-1);

    struct State {
        /// The read end; the pipe lives as long as the process (Swift's
        /// read source stays on it).
        read_fd: i32,
        /// The dispositions the relay replaced, while it is installed.
        previous: Option<[libc::sigaction; 2]>,
    }

    static STATE: Mutex<State> = Mutex::new(State {
        read_fd: -1,
        previous: None,
    });

    extern "C" fn relay(sig: libc::c_int) {
        let fd = WRITE_FD.load(Ordering::Relaxed);
        if fd < 0 {
            return;
        }
        // A failed write (a full pipe) must not change what the
        // interrupted code sees in errno.
        let saved = errno();
        let byte = sig as u8;
        // SAFETY: write(2) is async-signal-safe; the buffer is one local byte.
        unsafe { libc::write(fd, (&byte as *const u8).cast(), 1) };
        set_errno(saved);
    }

    fn errno() -> i32 {
        std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
    }

    fn set_errno(v: i32) {
        // SAFETY: the calling thread's errno location.
        #[cfg(any(target_os = "linux", target_os = "android"))]
        unsafe {
            *libc::__errno_location() = v;
        }
        #[cfg(any(target_vendor = "apple", target_os = "freebsd"))]
        unsafe {
            *libc::__error() = v;
        }
        #[cfg(not(any(
            target_os = "linux",
            target_os = "android",
            target_vendor = "apple",
            target_os = "freebsd"
        )))]
        let _ = v;
    }

    fn os_error(what: &str) -> HonkerError {
        HonkerError::Internal {
            message: format!("{what}: {}", std::io::Error::last_os_error()),
        }
    }

    fn pipe() -> R<(i32, i32)> {
        let mut fds = [0; 2];
        // SAFETY: fds has room for the two descriptors.
        if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
            return Err(os_error("the signal relay's pipe"));
        }
        for fd in fds {
            // SAFETY: descriptors just created, owned here.
            unsafe {
                let fl = libc::fcntl(fd, libc::F_GETFL);
                libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK);
                libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
            }
        }
        Ok((fds[0], fds[1]))
    }

    /// Reads what the pipe holds, discarding it.
    fn drain(fd: i32) {
        let mut buf = [0u8; 64];
        // SAFETY: reads into a local buffer of its length.
        while unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) } > 0 {}
    }

    pub(super) fn install() -> R<i32> {
        let mut st = STATE.lock();
        if st.previous.is_some() {
            return Err(HonkerError::InvalidArgument {
                message: "the signal relay is installed already".into(),
            });
        }
        if st.read_fd < 0 {
            let (r, w) = pipe()?;
            WRITE_FD.store(w, Ordering::SeqCst);
            st.read_fd = r;
        }
        // A signal relayed before this install was someone else's.
        drain(st.read_fd);
        // SAFETY: sigaction is plain data; all zero is a valid value.
        let mut previous: [libc::sigaction; 2] = unsafe { std::mem::zeroed() };
        for (i, sig) in SIGNALS.iter().enumerate() {
            // SAFETY: as above; the handler is an extern "C" fn(c_int).
            let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
            action.sa_sigaction = relay as extern "C" fn(libc::c_int) as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            // SAFETY: valid pointers to local values.
            let ok = unsafe {
                libc::sigemptyset(&mut action.sa_mask);
                libc::sigaction(*sig, &action, &mut previous[i]) == 0
            };
            if !ok {
                let e = os_error("installing the SIGTERM/SIGINT handler");
                for (sig, p) in SIGNALS.iter().zip(&previous).take(i) {
                    // SAFETY: restores a disposition read just above.
                    unsafe { libc::sigaction(*sig, p, std::ptr::null_mut()) };
                }
                return Err(e);
            }
        }
        st.previous = Some(previous);
        Ok(st.read_fd)
    }

    #[cfg(test)]
    pub(super) fn write_fd() -> i32 {
        WRITE_FD.load(Ordering::SeqCst)
    }

    pub(super) fn uninstall() {
        let mut st = STATE.lock();
        if let Some(previous) = st.previous.take() {
            for (sig, p) in SIGNALS.iter().zip(&previous) {
                // SAFETY: restores the disposition install replaced.
                unsafe { libc::sigaction(*sig, p, std::ptr::null_mut()) };
            }
        }
    }
}

#[cfg(not(unix))]
mod imp {
    use crate::errors::{HonkerError, R};

    pub(super) fn install() -> R<i32> {
        Err(HonkerError::InvalidArgument {
            message: "signals are relayed on Unix only".into(),
        })
    }

    pub(super) fn uninstall() {}
}

/// Installs the relay's SIGTERM and SIGINT handler (saving the process's
/// own, which [`signal_relay_uninstall`] restores) and returns the read end
/// of its pipe: one byte, the signal's number, per signal received. The
/// same descriptor each time; what it held before is discarded. Fails if
/// already installed.
#[uniffi::export]
pub fn signal_relay_install() -> R<i32> {
    imp::install()
}

/// Puts back the SIGTERM and SIGINT dispositions that
/// [`signal_relay_install`] replaced. Idempotent.
#[uniffi::export]
pub fn signal_relay_uninstall() {
    imp::uninstall();
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use crate::errors::HonkerError;

    fn disposition(sig: libc::c_int) -> libc::sighandler_t {
        // SAFETY: queries into a zeroed local.
        unsafe {
            let mut now: libc::sigaction = std::mem::zeroed();
            libc::sigaction(sig, std::ptr::null(), &mut now);
            now.sa_sigaction
        }
    }

    fn read_all(fd: i32) -> Vec<u8> {
        let mut buf = [0u8; 16];
        // SAFETY: reads into a local buffer of its length.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        buf[..n.max(0) as usize].to_vec()
    }

    #[test]
    fn relays_each_signal_then_restores_the_process_handlers() {
        let before = SIGNALS.map(disposition);
        let fd = signal_relay_install().unwrap();
        assert!(matches!(
            signal_relay_install(),
            Err(HonkerError::InvalidArgument { .. })
        ));
        // SAFETY: the relay handles both signals now.
        unsafe {
            libc::raise(libc::SIGTERM);
            libc::raise(libc::SIGINT);
            libc::raise(libc::SIGTERM);
        }
        let t = libc::SIGTERM as u8;
        assert_eq!(read_all(fd), vec![t, libc::SIGINT as u8, t]);
        assert!(read_all(fd).is_empty(), "one byte per signal");
        signal_relay_uninstall();
        assert_eq!(SIGNALS.map(disposition), before);
        signal_relay_uninstall();

        // Installed again: the same pipe, emptied of what came before.
        // SAFETY: the handler's write end is the pipe's; a byte as a signal would.
        unsafe {
            let w = imp::write_fd();
            libc::write(w, [9u8].as_ptr().cast(), 1);
        }
        assert_eq!(signal_relay_install().unwrap(), fd);
        assert!(read_all(fd).is_empty(), "a stale byte survived install");
        // SAFETY: as above.
        unsafe { libc::raise(libc::SIGTERM) };
        assert_eq!(read_all(fd), vec![t]);
        signal_relay_uninstall();
        assert_eq!(SIGNALS.map(disposition), before);
    }
}
