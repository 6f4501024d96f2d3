//! The runtime every binding wraps (DESIGN §2): the claim subscription
//! (`Claimer`: next / close, release on close and on drop) and lease
//! keep-alive (`KeepAlive`: renew, stop and report on loss).

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{test_db, wait_until};
use honker::runtime::{Claimer, KeepAlive};
use honker::{EnqueueOptions, ErrorKind, JobState};
use serde_json::json;

fn enqueue(q: &honker::Queue, n: usize) -> Vec<i64> {
    (0..n)
        .map(|i| {
            q.enqueue(json!({ "i": i }), &EnqueueOptions::default())
                .unwrap()
                .id
        })
        .collect()
}

/// A keep-alive on `job`'s lease: 30 s long, renewed every 10 ms.
fn renewing(q: &honker::Queue, job: &honker::Job) -> KeepAlive {
    KeepAlive::start(
        q,
        job.lease.clone(),
        Duration::from_secs(30),
        Some(Duration::from_millis(10)),
    )
    .unwrap()
}

#[test]
fn a_claimer_hands_out_a_batch_one_job_at_a_time_in_order() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    let ids = enqueue(&q, 5);
    let c = Claimer::new(&q, "w", 3, None).unwrap();
    let mut got = Vec::new();
    while let Some(job) = c.next(Duration::ZERO).unwrap() {
        got.push(job.id);
        job.ack().unwrap();
    }
    assert_eq!(got, ids);
    assert_eq!(q.stats().unwrap().ready, 0);
}

#[test]
fn close_releases_the_jobs_claimed_but_not_handed_out() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    let ids = enqueue(&q, 4);
    let c = Claimer::new(&q, "w", 4, None).unwrap();
    let first = c.next(Duration::ZERO).unwrap().unwrap();
    assert_eq!(c.buffered(), 3);
    let second = c.take_buffered().expect("a buffered job, without a claim");
    assert_eq!(second.id, ids[1]);
    second.release().unwrap();
    assert_eq!(c.buffered(), 2);
    assert_eq!(c.close(), 2);
    assert!(c.take_buffered().is_none());
    assert!(c.is_closed());
    assert_eq!(c.next(Duration::from_secs(5)).unwrap().map(|j| j.id), None);
    // The three are ready again, with the attempt they did not use given back;
    // the one handed out stays leased to its holder.
    for id in &ids[1..] {
        let info = q.get_job(*id).unwrap();
        assert_eq!(info.state, JobState::Ready, "job {id}");
    }
    assert_eq!(q.get_job(first.id).unwrap().state, JobState::Running);
    first.ack().unwrap();
    assert_eq!(c.close(), 0, "close is idempotent");
}

#[test]
fn dropping_a_claimer_releases_its_buffer() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    enqueue(&q, 3);
    {
        let c = Claimer::new(&q, "w", 3, None).unwrap();
        let job = c.next(Duration::ZERO).unwrap().unwrap();
        job.ack().unwrap();
        // The loop stops here (a `break`): two jobs were never handed out.
    }
    let stats = q.stats().unwrap();
    assert_eq!((stats.ready, stats.running), (2, 0));
}

#[test]
fn close_from_another_thread_wakes_a_waiting_next() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    let c = Arc::new(Claimer::new(&q, "w", 1, None).unwrap());
    let waiting = {
        let c = Arc::clone(&c);
        std::thread::spawn(move || {
            let start = Instant::now();
            let got = c.next(Duration::from_secs(30)).unwrap();
            (got.map(|j| j.id), start.elapsed())
        })
    };
    std::thread::sleep(Duration::from_millis(100));
    c.close();
    let (got, took) = waiting.join().unwrap();
    assert_eq!(got, None);
    assert!(
        took < Duration::from_secs(5),
        "next waited {took:?} after close"
    );
    // Work that arrives after close is not claimed by it.
    enqueue(&q, 1);
    assert_eq!(c.next(Duration::ZERO).unwrap().map(|j| j.id), None);
    assert_eq!(q.stats().unwrap().ready, 1);
}

#[test]
fn a_waiting_next_wakes_for_work_from_another_connection() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    let c = Claimer::new(&q, "w", 1, None).unwrap();
    let other = t.reopen();
    let producer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        other
            .queue("q")
            .unwrap()
            .enqueue(json!(1), &EnqueueOptions::default())
            .unwrap()
            .id
    });
    let job = c.next(Duration::from_secs(30)).unwrap().expect("a job");
    assert_eq!(job.id, producer.join().unwrap());
}

#[test]
fn a_claimer_checks_its_arguments() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    for bad in [
        Claimer::new(&q, "", 1, None),
        Claimer::new(&q, "w", 0, None),
        Claimer::new(&q, "w", 1, Some(Duration::ZERO)),
    ] {
        assert_eq!(bad.unwrap_err().kind(), ErrorKind::InvalidArgument);
    }
}

#[test]
fn keep_alive_renews_the_lease_while_it_runs() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    enqueue(&q, 1);
    let lease = Duration::from_secs(30);
    let job = q
        .claim_with(
            "w",
            1,
            &honker::ClaimOptions {
                lease: Some(lease),
                ..Default::default()
            },
        )
        .unwrap()
        .remove(0);
    let ka = KeepAlive::start(
        &q,
        job.lease.clone(),
        lease,
        Some(Duration::from_millis(20)),
    )
    .unwrap();
    // Twice 20 s of the database's clock: past the first lease, renewed.
    for _ in 0..2 {
        let before = ka.beats();
        t.clock.advance(Duration::from_secs(20));
        wait_until("a renewal", Duration::from_secs(10), || ka.beats() > before);
        assert!(
            q.claim("thief", 1).unwrap().is_empty(),
            "the renewed lease was reclaimed"
        );
    }
    let report = ka.stop();
    assert!(!report.lost);
    assert!(report.beats >= 2);
    assert_eq!(report.ended_by, None);
    job.ack().unwrap();
}

#[test]
fn keep_alive_stops_and_reports_when_the_lease_is_lost() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    let id = enqueue(&q, 1)[0];
    let job = q.claim("w", 1).unwrap().remove(0);
    let ka = renewing(&q, &job);
    assert!(q.cancel(id, Some("operator")).unwrap());
    assert!(
        ka.wait_end(Duration::from_secs(10)),
        "the renewal did not end"
    );
    assert!(ka.lost());
    let beats = ka.beats();
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(ka.beats(), beats, "it kept beating after the loss");
    let report = ka.stop();
    assert!(report.lost);
    assert_eq!(report.ended_by, Some(ErrorKind::LeaseLost));
}

#[test]
fn a_keep_alive_on_a_closed_database_has_ended_already() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    enqueue(&q, 1);
    let job = q.claim("w", 1).unwrap().remove(0);
    t.db.close().unwrap();
    let ka = renewing(&q, &job);
    assert!(ka.wait_end(Duration::ZERO), "ended at once, quietly");
    let report = ka.stop();
    assert_eq!((report.lost, report.beats), (false, 0));
    assert_eq!(report.ended_by, Some(ErrorKind::Closed));
}

#[test]
fn keep_alive_keeps_trying_while_the_file_is_busy() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    enqueue(&q, 1);
    let job = q.claim("w", 1).unwrap().remove(0);
    // Another connection holds the write lock for a while; its short busy
    // timeout makes beats fail with BUSY meanwhile.
    let options = honker::Options {
        busy_timeout: Duration::from_millis(5),
        ..Default::default()
    };
    let other = honker::Database::open_with(&t.path, options).unwrap();
    let blocker = t.reopen();
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let holder = std::thread::spawn(move || {
        let tx = blocker.transaction().unwrap();
        tx.execute("CREATE TABLE IF NOT EXISTS hold (x)", [])
            .unwrap();
        held_tx.send(()).unwrap();
        go_rx.recv().unwrap();
        tx.commit().unwrap();
    });
    held_rx.recv().unwrap();
    let q2 = other.queue("q").unwrap();
    let ka = renewing(&q2, &job);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(ka.beats(), 0, "beats went through a held write lock");
    assert!(!ka.wait_end(Duration::ZERO), "BUSY ended the renewal");
    go_tx.send(()).unwrap();
    holder.join().unwrap();
    wait_until(
        "a renewal after the lock was freed",
        Duration::from_secs(10),
        || ka.beats() > 0,
    );
    assert!(!ka.stop().lost);
}

#[test]
fn keep_alive_checks_its_interval() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    enqueue(&q, 1);
    let job = q.claim("w", 1).unwrap().remove(0);
    let lease = Duration::from_secs(30);
    for every in [Duration::ZERO, lease, Duration::from_secs(31)] {
        let err = KeepAlive::start(&q, job.lease.clone(), lease, Some(every)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{every:?}");
    }
    let err = KeepAlive::start(&q, job.lease.clone(), Duration::ZERO, None).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
}

#[test]
fn off_thread_drop_never_makes_the_dropping_thread_wait() {
    use std::sync::atomic::{AtomicBool, Ordering};
    struct Slow(Arc<AtomicBool>);
    impl Drop for Slow {
        fn drop(&mut self) {
            std::thread::sleep(Duration::from_millis(300)); // a release waiting for the writer
            self.0.store(true, Ordering::SeqCst);
        }
    }
    // It does not say it drops quickly (the default).
    impl honker::runtime::QuickDrop for Slow {}
    let dropped = Arc::new(AtomicBool::new(false));
    let held = honker::runtime::OffThreadDrop::new(Slow(Arc::clone(&dropped)));
    let start = Instant::now();
    drop(held);
    assert!(
        start.elapsed() < Duration::from_millis(100),
        "the drop waited"
    );
    wait_until(
        "the value's own drop, on a thread of its own",
        Duration::from_secs(5),
        || dropped.load(Ordering::SeqCst),
    );
    let dropped = Arc::new(AtomicBool::new(false));
    let held = honker::runtime::OffThreadDrop::new(Slow(Arc::clone(&dropped)));
    let shared = held.shared(); // a call still running elsewhere
    let start = Instant::now();
    drop(held);
    assert!(
        start.elapsed() < Duration::from_millis(100),
        "the drop waited"
    );
    // The call's thread (one that may wait) drops it last.
    std::thread::spawn(move || drop(shared));
    wait_until(
        "the value's own drop, elsewhere",
        Duration::from_secs(5),
        || dropped.load(Ordering::SeqCst),
    );
}

#[test]
fn stopping_a_keep_alive_does_not_wait_for_a_renewal_stuck_behind_the_callers_transaction() {
    // `with db.transaction(): with job.keep_alive(): ...`: the renewal waits
    // for the writer that the caller's own transaction holds.
    let options = honker::Options {
        busy_timeout: Duration::from_secs(3),
        ..Default::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let db = honker::Database::open_with(dir.path().join("t.db"), options).unwrap();
    let q = db.queue("q").unwrap();
    enqueue(&q, 1);
    let job = q.claim("w", 1).unwrap().remove(0);
    let tx = db.transaction().unwrap();
    let ka = renewing(&q, &job);
    std::thread::sleep(Duration::from_millis(100)); // a renewal is now waiting for the writer
    let start = Instant::now();
    let report = ka.stop();
    let took = start.elapsed();
    assert!(
        took < honker::runtime::STOP_WAIT + Duration::from_millis(500),
        "stop waited {took:?} for a renewal stuck behind the caller's transaction"
    );
    assert!(!report.lost);
    q.ack_tx(&tx, &job.lease, None).unwrap();
    tx.commit().unwrap();
    assert_eq!(q.stats().unwrap().running, 0);
}

#[test]
fn a_cancel_token_ends_a_waiting_claim_and_a_result_wait_at_once() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    let cancel = honker::runtime::Cancel::new(&t.db);
    let (q2, c2) = (q.clone(), cancel.clone());
    let waiter = std::thread::spawn(move || {
        let started = Instant::now();
        let jobs = c2
            .claim(
                &q2,
                "w",
                4,
                &honker::ClaimOptions {
                    lease: None,
                    wait: Duration::from_secs(30),
                },
            )
            .unwrap();
        (jobs.len(), started.elapsed())
    });
    std::thread::sleep(Duration::from_millis(200));
    cancel.cancel();
    let (n, took) = waiter.join().unwrap();
    assert_eq!(n, 0);
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert!(cancel.is_cancelled());
    // A cancelled token ends later waits before they start.
    let e = q.enqueue(json!(1), &EnqueueOptions::default()).unwrap();
    let err = cancel
        .wait_result(&q, e.id, Duration::from_secs(30))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
    assert!(err.message().contains("cancelled"), "{err}");
    assert!(cancel
        .claim(&q, "w", 1, &honker::ClaimOptions::default())
        .unwrap()
        .is_empty());
    assert_eq!(q.stats().unwrap().ready, 1, "the job was left alone");
}

#[test]
fn a_cancel_token_ends_a_claimers_waiting_next_and_the_claimer_loses_nothing() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    let c = std::sync::Arc::new(Claimer::new(&q, "w", 3, None).unwrap());
    let cancel = honker::runtime::Cancel::new(&t.db);
    let waiter = {
        let (c, cancel) = (c.clone(), cancel.clone());
        std::thread::spawn(move || {
            let started = Instant::now();
            let job = cancel.next(&*c, Duration::from_secs(30)).unwrap();
            (job.is_none(), started.elapsed())
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    cancel.cancel();
    let (none, took) = waiter.join().unwrap();
    assert!(none);
    assert!(took < Duration::from_secs(10), "{took:?}");
    // Still open: the next claim hands out one job and keeps the rest.
    assert!(!c.is_closed());
    enqueue(&q, 3);
    assert!(c.next(Duration::ZERO).unwrap().is_some());
    assert_eq!(c.buffered(), 2);
    // A cancelled token ends a later wait before it starts, even with jobs
    // buffered: they stay for the next call.
    assert!(cancel.next(&*c, Duration::from_secs(30)).unwrap().is_none());
    assert_eq!(c.buffered(), 2);
    let other = honker::runtime::Cancel::new(&t.db);
    assert!(other.next(&*c, Duration::ZERO).unwrap().is_some());
    assert_eq!(c.close(), 1, "the last buffered job goes back on close");
    assert_eq!(q.stats().unwrap().ready, 1);
}

#[test]
fn due_in_says_when_a_claim_could_find_work_without_claiming() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    let c = Claimer::new(&q, "w", 2, None).unwrap();
    // Nothing: only a commit can bring work.
    assert_eq!(c.due_in().unwrap(), None);
    let later = EnqueueOptions {
        delay: Some(Duration::from_secs(5)),
        ..EnqueueOptions::default()
    };
    q.enqueue(json!({}), &later).unwrap();
    assert_eq!(c.due_in().unwrap(), Some(Duration::from_secs(5)));
    t.clock.advance(Duration::from_secs(2));
    assert_eq!(c.due_in().unwrap(), Some(Duration::from_secs(3)));
    enqueue(&q, 2);
    assert_eq!(c.due_in().unwrap(), Some(Duration::ZERO));
    // It only looked: nothing is leased, and the look waits for nothing.
    assert_eq!(q.stats().unwrap().ready, 2);
    assert_eq!(
        honker::without_waiting(|| c.due_in()).unwrap(),
        Some(Duration::ZERO)
    );
    // A buffered job is work at hand.
    let first = c.next(Duration::ZERO).unwrap().unwrap();
    assert_eq!(c.buffered(), 1);
    assert_eq!(c.due_in().unwrap(), Some(Duration::ZERO));
    first.ack().unwrap();
    c.take_buffered().unwrap().ack().unwrap();
    assert_eq!(c.due_in().unwrap(), Some(Duration::from_secs(3)));
    // A lapsing lease is work too, when it lapses.
    t.clock.advance(Duration::from_secs(3));
    let lease = honker::ClaimOptions {
        lease: Some(Duration::from_secs(7)),
        ..honker::ClaimOptions::default()
    };
    let job = q.claim_with("other", 1, &lease).unwrap();
    assert_eq!(job.len(), 1);
    assert_eq!(c.due_in().unwrap(), Some(Duration::from_secs(7)));
}
