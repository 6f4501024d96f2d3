//! WAL checkpoints off the commit path.
//!
//! SQLite's default is that the commit which takes the WAL past 1,000 frames
//! checkpoints before its call returns: it copies the WAL into the database
//! file and, at `synchronous` NORMAL or FULL, fsyncs both, about 4 MiB each
//! time. The write lock is already released, but the committing thread waits
//! for the disk, and so does every writer of this process queued behind it
//! on the writer mutex (a quarter of the claim-and-ack benchmarks' time on
//! the development machine, bench W4/W5).
//!
//! Here the writer connection's WAL hook hands that work to a background
//! thread with a connection of its own, and the commit returns at once. One
//! catch: SQLite restarts the WAL from its beginning only when a write
//! transaction begins with *every* frame copied, which a checkpoint racing a
//! busy writer rarely achieves, so the WAL would keep growing. So once the
//! background pass has left at most [`CATCH_UP`] frames behind, the hook
//! copies that remainder itself, with the writer mutex still held (a short
//! copy and two small fsyncs), and the next write transaction restarts the
//! WAL. If the background thread falls behind (or cannot run at all), the
//! hook checkpoints inline from [`HARD_LIMIT`] frames on, as SQLite would,
//! first waiting for a background pass in progress (a second checkpoint
//! would be BUSY while the thread, starved of CPU say, takes its time): the
//! WAL stays bounded either way.
//!
//! All checkpoints are `PASSIVE`: they never wait for, or block, readers and
//! writers of any process. Durability is unchanged: the same checkpoint with
//! the same fsyncs runs, only on another thread.
//!
//! Invariants:
//! - the hook's context (this struct) lives as long as the writer connection
//!   (the connection holds an `Arc` to it);
//! - the thread is started on first need and stopped (joined) before the
//!   writer closes; a forked child never touches it (the thread does not
//!   exist there, and its mutex may be held).

use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use libsqlite3_sys as ffi;
use parking_lot::{Condvar, Mutex};
use rusqlite::Connection;

use crate::connection::open_checkpointer;
use crate::options::Durability;
use crate::raw::Batch;

/// WAL size (frames) at which a checkpoint is started: SQLite's default
/// `wal_autocheckpoint`.
pub(crate) const THRESHOLD: u32 = 1_000;
/// The remainder (frames) the hook copies itself once the background thread
/// has done the rest.
pub(crate) const CATCH_UP: u32 = 128;
/// WAL size (frames) from which the hook checkpoints inline whatever the
/// background thread is doing. 4,000 frames stay within the first hash table
/// of the WAL index (4,062 frames), so readers' page lookups stay as cheap.
pub(crate) const HARD_LIMIT: u32 = 4_000;

/// Counters, for tests and diagnostics.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    /// Checkpoints run by the background thread.
    pub background: AtomicU64,
    /// Checkpoints run by the hook on the committing thread.
    pub inline: AtomicU64,
    /// Frames the inline checkpoints found still to copy, summed.
    pub inline_frames: AtomicU64,
}

#[derive(Debug, Default)]
struct State {
    /// A background pass is wanted.
    requested: bool,
    /// A background pass is running.
    running: bool,
    stop: bool,
    thread: Option<JoinHandle<()>>,
    /// The thread could not start or open its connection: checkpoint inline.
    unavailable: bool,
    /// Frames copied into the database file, as the last checkpoint reported
    /// (SQLite's `nBackfill`). Stale once the WAL restarts.
    backfilled: u32,
    /// The WAL size the hook saw last; a smaller one means it restarted.
    last_frames: u32,
}

#[derive(Debug)]
pub(crate) struct Checkpointer {
    path: PathBuf,
    busy_timeout: std::time::Duration,
    durability: Durability,
    state: Mutex<State>,
    cv: Condvar,
    pub(crate) stats: Stats,
    /// The writer's [`Batch`], told of each commit first.
    batch: std::sync::OnceLock<Arc<dyn Batch>>,
}

impl Checkpointer {
    pub(crate) fn new(
        path: PathBuf,
        busy_timeout: std::time::Duration,
        durability: Durability,
    ) -> Arc<Checkpointer> {
        Arc::new(Checkpointer {
            path,
            busy_timeout,
            durability,
            state: Mutex::new(State::default()),
            cv: Condvar::new(),
            stats: Stats::default(),
            batch: std::sync::OnceLock::new(),
        })
    }

    /// Tells `batch` of every commit of the writer (from the WAL hook:
    /// SQLite calls it once a commit is in the WAL).
    pub(crate) fn count_into(&self, batch: Arc<dyn Batch>) {
        let _ = self.batch.set(batch);
    }

    /// Installs the hook on `conn` (the writer), replacing SQLite's automatic
    /// checkpoints there. The caller keeps `self` alive as long as `conn`.
    pub(crate) fn install(self: &Arc<Self>, conn: &Connection) {
        // SAFETY: the handle is open; the context pointer stays valid while
        // the connection lives (the caller's invariant).
        unsafe {
            ffi::sqlite3_wal_hook(
                conn.handle(),
                Some(wal_hook),
                Arc::as_ptr(self).cast_mut().cast(),
            );
        }
    }

    /// Stops the thread and waits for a pass in progress to finish. Later
    /// commits checkpoint inline.
    pub(crate) fn stop(&self) {
        let thread = {
            let mut st = self.state.lock();
            st.stop = true;
            self.cv.notify_all();
            st.thread.take()
        };
        if let Some(t) = thread {
            let _ = t.join();
        }
    }

    /// After a commit on the writer, with `frames` in the WAL: nothing, a
    /// request to the background thread, or a checkpoint right here.
    fn after_commit(self: &Arc<Self>, db: *mut ffi::sqlite3, schema: *const c_char, frames: u32) {
        let remainder = {
            let mut st = self.state.lock();
            if frames < st.last_frames || frames < st.backfilled {
                st.backfilled = 0; // the WAL restarted since
            }
            st.last_frames = frames;
            if frames < THRESHOLD {
                return;
            }
            let inline = if st.stop || st.unavailable {
                true
            } else if frames >= HARD_LIMIT {
                // A background pass in progress would make this one BUSY,
                // and the WAL grow on while its thread is slow (starved of
                // CPU, say): wait for it, then copy the rest here. At most
                // the busy timeout, as for any lock: a pass that never ends
                // leaves this commit SQLite's behaviour (BUSY, and on).
                let until = std::time::Instant::now() + self.busy_timeout;
                while st.running && !st.stop {
                    if self.cv.wait_until(&mut st, until).timed_out() {
                        break;
                    }
                }
                true
            } else if st.running {
                false // it will be asked again after the next commit
            } else if frames - st.backfilled <= CATCH_UP {
                true
            } else if st.thread.is_none() && !self.start(&mut st) {
                st.unavailable = true;
                true
            } else {
                st.requested = true;
                self.cv.notify_one();
                false
            };
            if !inline {
                return;
            }
            frames.saturating_sub(st.backfilled)
        };
        let (rc, copied) = checkpoint(db, schema);
        if rc == ffi::SQLITE_OK {
            self.stats.inline.fetch_add(1, Ordering::Relaxed);
            self.stats
                .inline_frames
                .fetch_add(u64::from(remainder), Ordering::Relaxed);
            self.state.lock().backfilled = copied;
        }
    }

    fn start(self: &Arc<Self>, st: &mut State) -> bool {
        let me = Arc::clone(self);
        // Counted from before the spawn, so a fork() racing it is refused too.
        let live = crate::fork::Live::new();
        match std::thread::Builder::new()
            .name("honker-ckpt".into())
            .spawn(move || {
                let _live = live;
                me.run()
            }) {
            Ok(t) => {
                st.thread = Some(t);
                true
            }
            Err(_) => false,
        }
    }

    fn run(&self) {
        let conn = match open_checkpointer(&self.path, self.busy_timeout, self.durability) {
            Ok(c) => c,
            Err(_) => {
                self.state.lock().unavailable = true;
                return;
            }
        };
        let mut st = self.state.lock();
        loop {
            while !st.requested && !st.stop {
                self.cv.wait(&mut st);
            }
            if st.stop {
                return;
            }
            st.requested = false;
            st.running = true;
            drop(st);
            // SAFETY: the connection is open and used by this thread only.
            let db = unsafe { conn.sql().handle() };
            let (rc, copied) = checkpoint(db, c"main".as_ptr());
            st = self.state.lock();
            st.running = false;
            if rc == ffi::SQLITE_OK {
                st.backfilled = copied;
                self.stats.background.fetch_add(1, Ordering::Relaxed);
            }
            // A commit past the hard limit may be waiting for this pass.
            self.cv.notify_all();
        }
    }
}

/// A `PASSIVE` checkpoint of `schema` on `db`: (result code, frames copied
/// into the database file so far). BUSY (another checkpoint running) is
/// harmless.
fn checkpoint(db: *mut ffi::sqlite3, schema: *const c_char) -> (c_int, u32) {
    let (mut log, mut copied) = (0, 0);
    // SAFETY: `db` is an open connection used by this thread only for the
    // duration of the call; `schema` is a NUL-terminated name.
    let rc = unsafe {
        ffi::sqlite3_wal_checkpoint_v2(
            db,
            schema,
            ffi::SQLITE_CHECKPOINT_PASSIVE,
            &mut log,
            &mut copied,
        )
    };
    (rc, u32::try_from(copied).unwrap_or(0))
}

unsafe extern "C" fn wal_hook(
    ctx: *mut c_void,
    db: *mut ffi::sqlite3,
    schema: *const c_char,
    frames: c_int,
) -> c_int {
    let frames = u32::try_from(frames).unwrap_or(0);
    // SAFETY: SQLite passes a NUL-terminated schema name.
    if unsafe { CStr::from_ptr(schema) }.to_bytes() != b"main" {
        // A database the application attached: SQLite's own behaviour.
        if frames >= THRESHOLD {
            checkpoint(db, schema);
        }
        return ffi::SQLITE_OK;
    }
    // SAFETY: `ctx` is the `Checkpointer` installed with the hook, alive
    // while the connection is (see `install`). Borrowed: never dropped here.
    let me = std::mem::ManuallyDrop::new(unsafe { Arc::from_raw(ctx as *const Checkpointer) });
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if let Some(b) = me.batch.get() {
            b.committed();
        }
        me.after_commit(db, schema, frames);
    }));
    ffi::SQLITE_OK
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::database::open_plain as open;
    use crate::Database;
    use std::time::{Duration, Instant};

    /// Commits `rows` rows of about one page each in one transaction: about
    /// `rows` WAL frames.
    fn commit_pages(db: &Database, rows: usize) {
        let big = "x".repeat(3_500);
        db.with_transaction(|tx| {
            tx.execute("CREATE TABLE IF NOT EXISTS bulk (v TEXT)", [])?;
            for _ in 0..rows {
                tx.execute("INSERT INTO bulk (v) VALUES (?1)", [&big])?;
            }
            Ok::<_, crate::Error>(())
        })
        .unwrap();
    }

    /// Commits until the hook has seen `frames` WAL frames.
    fn commit_until(db: &Database, frames: u32, per_commit: usize) {
        for _ in 0..1_000 {
            if frames_seen(db) >= frames {
                return;
            }
            commit_pages(db, per_commit);
        }
        panic!("the WAL hook never saw {frames} frames");
    }

    fn frames_seen(db: &Database) -> u32 {
        db.inner().checkpointer.state.lock().last_frames
    }

    /// Commits one page and checks that the WAL started over (the next write
    /// transaction restarts a WAL that was copied whole).
    fn assert_restarted(db: &Database) {
        commit_pages(db, 1);
        assert!(
            frames_seen(db) < 10,
            "no restart: {} frames",
            frames_seen(db)
        );
    }

    fn wait_for(what: &str, f: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !f() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// The commit that takes the WAL past the threshold returns without
    /// checkpointing and the background thread copies the WAL; with nothing
    /// written meanwhile, the next write transaction restarts it.
    #[test]
    fn the_threshold_commit_hands_the_checkpoint_to_the_thread() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(&dir.path().join("a.db"));
        let cp = Arc::clone(&db.inner().checkpointer);
        commit_until(&db, THRESHOLD, 50);
        assert!(frames_seen(&db) < HARD_LIMIT);
        wait_for("the background checkpoint", || {
            cp.stats.background.load(Ordering::Relaxed) == 1 && !cp.state.lock().running
        });
        assert_eq!(cp.stats.inline.load(Ordering::Relaxed), 0);
        assert_restarted(&db);
        assert_eq!(cp.stats.inline.load(Ordering::Relaxed), 0);
    }

    /// When commits went on while the background thread copied, the commit
    /// after it copies the small remainder itself, so the WAL restarts.
    #[test]
    fn a_small_remainder_is_copied_by_the_next_commit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.db");
        let db = open(&path);
        let cp = Arc::clone(&db.inner().checkpointer);
        commit_until(&db, THRESHOLD - 100, 50);
        // A reader holding a snapshot: no checkpoint copies past it, as if
        // the frames after it were written during the background pass.
        let reader = rusqlite::Connection::open(&path).unwrap();
        reader.execute_batch("BEGIN").unwrap();
        let _: i64 = reader
            .query_row("SELECT count(*) FROM bulk", [], |r| r.get(0))
            .unwrap();
        let pinned = frames_seen(&db);
        commit_until(&db, THRESHOLD, 20);
        assert!(frames_seen(&db) - pinned <= CATCH_UP - 10);
        wait_for("the background checkpoint", || {
            cp.stats.background.load(Ordering::Relaxed) == 1 && !cp.state.lock().running
        });
        assert_eq!(cp.state.lock().backfilled, pinned);
        reader.execute_batch("COMMIT").unwrap();
        assert_eq!(cp.stats.inline.load(Ordering::Relaxed), 0);
        commit_pages(&db, 1);
        assert_eq!(cp.stats.inline.load(Ordering::Relaxed), 1);
        let copied = cp.stats.inline_frames.load(Ordering::Relaxed);
        assert!(
            copied <= u64::from(CATCH_UP),
            "{copied} frames copied inline"
        );
        assert_restarted(&db);
    }

    /// Writing without pause, the WAL stays bounded: the background thread
    /// keeps up, or the commits past the hard limit checkpoint themselves.
    #[test]
    fn the_wal_stays_bounded_under_continuous_writes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.db");
        let db = open(&path);
        let wal = dir.path().join("a.db-wal");
        let frame = 4096 + 24;
        let mut largest = 0;
        let mut written = 0;
        while written < 6 * HARD_LIMIT {
            commit_pages(&db, 40);
            written += 40;
            largest = largest.max(std::fs::metadata(&wal).unwrap().len());
        }
        assert!(
            largest <= 2 * u64::from(HARD_LIMIT) * frame,
            "the WAL grew to {largest} bytes"
        );
        let cp = &db.inner().checkpointer;
        assert!(cp.stats.background.load(Ordering::Relaxed) >= 1);
    }

    /// A background pass that never ends (its state says it runs; there is no
    /// thread) holds the commit past the hard limit for the busy timeout at
    /// most; that commit then checkpoints inline, and the WAL restarts.
    #[test]
    fn a_pass_that_never_ends_holds_the_commit_past_the_hard_limit_for_the_busy_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let busy = Duration::from_millis(300);
        let options = crate::Options {
            busy_timeout: busy,
            ..crate::Options::default()
        };
        let db = crate::database::open_plain_with(&dir.path().join("a.db"), options);
        let cp = &db.inner().checkpointer;
        cp.state.lock().running = true;
        commit_until(&db, HARD_LIMIT - 100, 40);
        assert_eq!(cp.stats.inline.load(Ordering::Relaxed), 0);
        let started = Instant::now();
        commit_until(&db, HARD_LIMIT, 40);
        let took = started.elapsed();
        assert!(took >= busy, "the commit past the limit took {took:?}");
        assert!(took < busy * 20, "the commit past the limit took {took:?}");
        assert_eq!(cp.stats.inline.load(Ordering::Relaxed), 1);
        assert_restarted(&db);
    }

    /// After `stop` (close), commits checkpoint inline as SQLite would; close
    /// joins the thread.
    #[test]
    fn close_joins_the_thread_and_stop_falls_back_to_inline() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(&dir.path().join("a.db"));
        let cp = Arc::clone(&db.inner().checkpointer);
        commit_until(&db, THRESHOLD, 50);
        wait_for("the background checkpoint", || {
            cp.stats.background.load(Ordering::Relaxed) == 1
        });
        cp.stop();
        assert!(cp.state.lock().thread.is_none());
        loop {
            let inline = cp.stats.inline.load(Ordering::Relaxed);
            commit_pages(&db, 50);
            if frames_seen(&db) >= THRESHOLD {
                assert_eq!(cp.stats.inline.load(Ordering::Relaxed), inline + 1);
                break;
            }
        }
        db.close().unwrap();
        // Only the test's reference is left: the thread's and the writer
        // connection's are gone.
        drop(db);
        assert_eq!(Arc::strong_count(&cp), 1);
    }
}
