//! The reader pool: up to `Options::readers` read-only connections, opened on
//! demand and reused. Reads (`query`, `get_job`, `stats`, wake-up checks)
//! never touch the writer, so they never wait behind a write transaction (WAL).

use std::ops::Deref;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::connection::{open_reader, HConn};
use crate::error::{Error, ErrorKind, Result};
use parking_lot::{Condvar, Mutex};

#[derive(Debug)]
struct State {
    idle: Vec<HConn>,
    open: usize,
    closed: bool,
}

#[derive(Debug)]
pub(crate) struct Pool {
    path: PathBuf,
    max: usize,
    busy_timeout: Duration,
    state: Mutex<State>,
    cv: Condvar,
}

impl Pool {
    pub(crate) fn new(path: PathBuf, max: usize, busy_timeout: Duration) -> Pool {
        Pool {
            path,
            max,
            busy_timeout,
            state: Mutex::new(State {
                idle: Vec::new(),
                open: 0,
                closed: false,
            }),
            cv: Condvar::new(),
        }
    }

    /// Checks out a reader, opening one if none is idle and the pool is not
    /// full; otherwise waits up to the busy timeout for one to come back.
    pub(crate) fn get(&self) -> Result<Reader<'_>> {
        let deadline = Instant::now() + self.busy_timeout;
        let mut st = self.state.lock();
        loop {
            if st.closed {
                return Err(Error::closed());
            }
            if let Some(conn) = st.idle.pop() {
                return Ok(Reader {
                    pool: self,
                    conn: Some(conn),
                });
            }
            if st.open < self.max {
                st.open += 1;
                drop(st);
                return match open_reader(&self.path, self.busy_timeout) {
                    Ok(conn) => Ok(Reader {
                        pool: self,
                        conn: Some(conn),
                    }),
                    Err(e) => {
                        self.state.lock().open -= 1;
                        self.cv.notify_one();
                        Err(e)
                    }
                };
            }
            if crate::connection::waiting_forbidden()
                || self.cv.wait_until(&mut st, deadline).timed_out()
            {
                return Err(Error::new(
                    ErrorKind::Busy,
                    format!("all {} reader connections stayed in use", self.max),
                ));
            }
        }
    }

    /// Closes idle readers now and the others as they come back.
    /// Forgets every idle connection without closing it (a forked copy of
    /// the pool: see `Database`'s invariants).
    pub(crate) fn abandon(&self) {
        let mut st = self.state.lock();
        st.closed = true;
        for conn in st.idle.drain(..) {
            std::mem::forget(conn);
        }
    }

    pub(crate) fn close(&self) {
        let mut st = self.state.lock();
        st.closed = true;
        let n = st.idle.len();
        st.open -= n;
        st.idle.clear();
        self.cv.notify_all();
    }
}

/// A checked-out reader; returns to the pool on drop.
#[derive(Debug)]
pub struct Reader<'p> {
    pool: &'p Pool,
    conn: Option<HConn>,
}

impl Deref for Reader<'_> {
    type Target = HConn;
    fn deref(&self) -> &HConn {
        self.conn.as_ref().expect("reader present until drop")
    }
}

impl Drop for Reader<'_> {
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else { return };
        let mut st = self.pool.state.lock();
        // A reader left inside a transaction (a panic mid-read) is discarded.
        if st.closed || !conn.raw().is_autocommit() {
            st.open -= 1;
        } else {
            st.idle.push(conn);
        }
        drop(st);
        self.pool.cv.notify_one();
    }
}
