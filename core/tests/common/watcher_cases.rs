// The cases of watcher_idle.rs (inotify) and watcher_timed.rs (the timed
// path), included by both; `FORCE_TIMED_PATH` says which.

use std::time::{Duration, Instant};

use honker::rusqlite::Connection;
use honker::{ClaimOptions, Database, EnqueueOptions};
use serde_json::json;

/// The watcher counters are the process's: one test at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn open(dir: &tempfile::TempDir) -> Database {
    if FORCE_TIMED_PATH {
        // Before the first watcher of this process starts (every test sets
        // the same value, so the order of tests does not matter).
        std::env::set_var("HONKER_WATCHER", "portable");
    }
    Database::open(dir.path().join("app.db")).unwrap()
}

fn claim_in_thread(db: &Database, wait: Duration) -> std::thread::JoinHandle<(usize, Duration)> {
    let q = db.queue("q").unwrap();
    std::thread::spawn(move || {
        let t = Instant::now();
        let jobs = q
            .claim_with("w", 10, &ClaimOptions { lease: None, wait })
            .unwrap();
        for j in &jobs {
            j.ack().unwrap();
        }
        (jobs.len(), t.elapsed())
    })
}

/// Another connection's commit (here the app's own, through honker's SQL
/// functions: nothing tells this process's waiters but the watcher).
fn commit_elsewhere(dir: &tempfile::TempDir, db: &Database) {
    let app = Connection::open(dir.path().join("app.db")).unwrap();
    // SAFETY: an open connection of this binary's SQLite, this thread's.
    unsafe { db.register_functions_on(app.handle()).unwrap() };
    app.query_row(
        "SELECT honker_enqueue('q', '{}', NULL, NULL, 0, NULL, NULL)",
        [],
        |r| r.get::<_, i64>(0),
    )
    .unwrap();
}

#[test]
fn a_waiting_claim_is_woken_by_another_connections_commit() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let waiter = claim_in_thread(&db, Duration::from_secs(20));
    std::thread::sleep(Duration::from_millis(300));
    commit_elsewhere(&dir, &db);
    let (got, waited) = waiter.join().unwrap();
    assert_eq!(got, 1);
    // Woken by the watcher, not by the claim's own re-check (every 10 ×
    // the 100 ms fallback = 1 s on inotify) or its wait running out.
    assert!(waited < Duration::from_secs(10), "{waited:?}");
}

#[test]
fn the_watcher_sleeps_while_nobody_waits_and_catches_up_when_someone_does() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let q = db.queue("q").unwrap();
    // A first wait starts the watcher thread.
    let short = ClaimOptions {
        lease: None,
        wait: Duration::from_millis(50),
    };
    assert!(q.claim_with("w", 1, &short).unwrap().is_empty());
    assert!(watcher::watcher_threads() >= 1);
    // Nobody waits now: the watcher parks and stays asleep, through other
    // connections' commits too.
    std::thread::sleep(Duration::from_millis(500));
    let (parks, switches) = (honker::watcher_parks(), honker::watcher_context_switches());
    commit_elsewhere(&dir, &db);
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(honker::watcher_parks(), parks, "still asleep: not woken even once");
    assert!(
        honker::watcher_context_switches() - switches <= 1,
        "the parked watcher ran {} times in 0.7 s",
        honker::watcher_context_switches() - switches
    );
    // A waiter comes: the job committed meanwhile is claimable at once, and
    // a later commit elsewhere wakes it.
    let got = q.claim_with("w", 1, &short).unwrap();
    assert_eq!(got.len(), 1);
    got[0].ack().unwrap();
    let waiter = claim_in_thread(&db, Duration::from_secs(20));
    std::thread::sleep(Duration::from_millis(300));
    commit_elsewhere(&dir, &db);
    assert_eq!(waiter.join().unwrap().0, 1);
    // Its wait over, the watcher parks again.
    std::thread::sleep(Duration::from_millis(400));
    assert!(honker::watcher_parks() > parks);
}

#[test]
fn this_processs_own_commit_wakes_a_waiting_claim_without_the_watcher() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let waiter = claim_in_thread(&db, Duration::from_secs(20));
    std::thread::sleep(Duration::from_millis(300));
    db.queue("q")
        .unwrap()
        .enqueue(json!({}), &EnqueueOptions::default())
        .unwrap();
    let (got, waited) = waiter.join().unwrap();
    assert_eq!(got, 1);
    assert!(waited < Duration::from_secs(10), "{waited:?}");
}

/// Whether `fd` becomes readable within `within`.
fn readable(fd: std::os::fd::RawFd, within: Duration) -> bool {
    let mut fds = [libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }];
    // SAFETY: a valid one-element pollfd array.
    unsafe { libc::poll(fds.as_mut_ptr(), 1, within.as_millis() as i32) > 0 }
}

#[test]
fn an_armed_readiness_descriptor_becomes_readable_on_another_connections_commit() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let ready = db.readiness().unwrap();
    ready.arm();
    ready.drain();
    assert!(!readable(ready.fd(), Duration::from_millis(200)), "nothing committed yet");
    let t = Instant::now();
    commit_elsewhere(&dir, &db);
    assert!(readable(ready.fd(), Duration::from_secs(5)));
    // Woken by the watcher (inotify at once; the timed path within a tick).
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert!(ready.drain(), "a wake-up was pending");
    assert!(!readable(ready.fd(), Duration::ZERO), "drained");
    // Disarmed: commits leave it alone, and the watcher may park (nobody
    // else waits).
    ready.disarm();
    assert!(!ready.is_armed());
    std::thread::sleep(Duration::from_millis(300));
    let parks = honker::watcher_parks();
    commit_elsewhere(&dir, &db);
    assert!(!readable(ready.fd(), Duration::from_millis(500)));
    assert_eq!(honker::watcher_parks(), parks, "the parked watcher stayed asleep");
    // Armed again: the commit made meanwhile is not a wake-up of its own
    // (the reader looks after arming anyway); the next commit is.
    ready.arm();
    ready.arm(); // idempotent: one waiter
    commit_elsewhere(&dir, &db);
    assert!(readable(ready.fd(), Duration::from_secs(5)));
    // wake() from another thread (a close request) makes it readable too.
    ready.drain();
    std::thread::sleep(Duration::from_millis(300));
    ready.drain();
    ready.wake();
    assert!(readable(ready.fd(), Duration::ZERO));
    ready.disarm();
    ready.disarm();
    // Dropped: unregistered and disarmed; the watcher parks again.
    drop(ready);
    std::thread::sleep(Duration::from_millis(400));
    assert!(honker::watcher_parks() > parks);
}

#[test]
fn readiness_is_refused_on_a_closed_database_and_inside_without_waiting() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let e = honker::without_waiting(|| db.readiness().map(drop)).unwrap_err();
    assert_eq!(e.kind(), honker::ErrorKind::InvalidArgument, "{e}");
    db.close().unwrap();
    assert_eq!(db.readiness().unwrap_err().kind(), honker::ErrorKind::Closed);
}
