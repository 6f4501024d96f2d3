//! A keep-alive costs no thread until its first renewal is due: short
//! holds (`with lock.hold()`, a job that finishes quickly) only file an
//! entry in their database's timer. One test in its own binary, since it
//! counts this process's threads by name (Linux's `/proc/self/task`).
#![cfg(target_os = "linux")]

mod common;

use std::time::Duration;

use common::{test_db, wait_until};
use honker::runtime::{HeldLock, KeepAlive};

/// Threads of this process whose name starts with `prefix` (the kernel
/// keeps 15 bytes of a name).
fn threads(prefix: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim_end().starts_with(prefix))
        .count()
}

const LONG: Duration = Duration::from_secs(10);

#[test]
fn a_keep_alive_gets_a_thread_only_when_its_first_renewal_is_due() {
    let t = test_db();
    let ttl = Duration::from_secs(60);
    assert_eq!(threads("honker-renewals"), 0);

    // Short holds: none ever starts a renewal thread; one timer serves all.
    let lock = t.db.lock("short").unwrap();
    for _ in 0..200 {
        let held = HeldLock::acquire(&lock, "a", ttl, Duration::ZERO, None, None)
            .unwrap()
            .expect("free");
        assert_eq!(threads("honker-keepaliv"), 0);
        assert!(held.release().unwrap());
    }
    // A thread takes its name once it runs, which under load can be after
    // the holds are done.
    wait_until("the timer thread", LONG, || threads("honker-renewals") >= 1);
    assert_eq!(threads("honker-renewals"), 1);
    assert!(lock.info().unwrap().is_none(), "released");

    // Two waiting at once, the later filed first: each renews at its own
    // time, on a thread of its own from then on.
    let (slow_lock, fast_lock) = (t.db.lock("slow").unwrap(), t.db.lock("fast").unwrap());
    let slow_grant = slow_lock.try_acquire("a", ttl).unwrap().unwrap();
    let fast_grant = fast_lock.try_acquire("a", ttl).unwrap().unwrap();
    let slow = KeepAlive::start_lock(
        &slow_lock,
        slow_grant.token,
        ttl,
        Some(Duration::from_secs(20)),
    )
    .unwrap();
    // Past the idle timer's 1 s nap: it now sleeps until the slow one is
    // due in 20 s, so the fast one (due in 30 ms) must wake it.
    std::thread::sleep(Duration::from_millis(1300));
    let fast = KeepAlive::start_lock(
        &fast_lock,
        fast_grant.token,
        ttl,
        Some(Duration::from_millis(30)),
    )
    .unwrap();
    assert_eq!(threads("honker-keepaliv"), 0);
    wait_until("the fast one's renewals", LONG, || fast.beats() >= 3);
    assert_eq!(slow.beats(), 0, "not due for 20 s");
    assert_eq!(threads("honker-keepaliv"), 1);
    assert!(fast.lease_expires_at().is_some());

    // Stopping the waiting one ends it at once, renewing nothing; stopping
    // the running one joins its thread.
    let report = slow.stop();
    assert_eq!(
        (report.lost, report.beats, report.ended_by),
        (false, 0, None)
    );
    assert!(slow.wait_end(Duration::ZERO));
    let report = fast.stop();
    assert!(!report.lost && report.beats >= 3, "{report:?}");
    assert!(fast.wait_end(Duration::ZERO));
    assert_eq!(threads("honker-keepaliv"), 0);
    assert!(slow_lock.release(slow_grant.token).unwrap());

    // The timer ends with its database.
    drop((slow, fast, lock, slow_lock, fast_lock));
    t.db.close().unwrap();
    drop(t);
    wait_until("the timer thread to end", LONG, || {
        threads("honker-renewals") == 0
    });
}
