//! `Readiness::wait` on every platform (a pipe and poll(2) on Unix, a flag
//! and a condvar elsewhere: what Node's waits use on Windows, ADR 30): an
//! armed readiness wakes on another connection's commit and on `wake`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use honker::Database;

#[test]
fn an_armed_readiness_wakes_on_another_connections_commit_and_on_wake() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    let db = Database::open(&path).unwrap();
    let ready = Arc::new(db.readiness().unwrap());
    ready.arm();
    ready.drain();
    assert!(
        !ready.wait(Duration::from_millis(100)),
        "nothing committed yet"
    );
    // A connection honker does not own: only the watcher sees its commit.
    let other = honker::rusqlite::Connection::open(&path).unwrap();
    other
        .execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1)")
        .unwrap();
    let t = Instant::now();
    assert!(ready.wait(Duration::from_secs(5)), "woken by the commit");
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert!(ready.drain(), "a wake-up was pending");
    assert!(!ready.drain(), "drained");
    // Another thread's wake ends a wait at once (a close or a stop).
    let r = Arc::clone(&ready);
    let waker = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        r.wake();
    });
    let t = Instant::now();
    assert!(ready.wait(Duration::from_secs(5)));
    assert!(t.elapsed() < Duration::from_secs(2));
    waker.join().unwrap();
    ready.disarm();
}
