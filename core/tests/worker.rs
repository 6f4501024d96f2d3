//! The worker runtime (`runtime::Worker`): limits, outcomes, renewals,
//! timeouts and the graceful shutdown, driven the way a binding drives it
//! (one loop in `next`, handlers on other threads).

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::test_db;
use honker::runtime::{
    Completion, Finished, HandlerOptions, Outcome, Route, TaskTable, Worker, WorkerOptions,
};
use honker::{Backoff, Database, EnqueueOptions, ErrorKind, JobState, Payload, QueueOptions};
use serde_json::json;

/// A database on the real clock (leases lapse in real time).
fn real_db() -> (Database, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("w.db")).unwrap();
    (db, dir)
}

fn worker(db: &Database, concurrency: usize) -> Worker {
    Worker::new(
        db,
        WorkerOptions {
            worker_id: "w1".into(),
            concurrency,
            ..WorkerOptions::default()
        },
    )
    .unwrap()
}

fn enqueue(db: &Database, queue: &str, n: usize) {
    let q = db.queue(queue).unwrap();
    q.enqueue_many((0..n).map(|i| json!(i)), &EnqueueOptions::default())
        .unwrap();
}

fn with_limit(n: usize) -> HandlerOptions {
    HandlerOptions {
        concurrency: Some(n),
        ..HandlerOptions::default()
    }
}

#[test]
fn concurrency_limits_hold_per_queue_and_over_all_queues() {
    let (db, _dir) = real_db();
    enqueue(&db, "a", 30);
    enqueue(&db, "b", 30);
    let w = worker(&db, 4);
    w.register(&db.queue("a").unwrap(), with_limit(2)).unwrap();
    w.register(&db.queue("b").unwrap(), with_limit(3)).unwrap();
    let now = Arc::new(Mutex::new((0usize, 0usize, 0usize))); // a, b, total
    let peak = Arc::new(Mutex::new((0usize, 0usize, 0usize)));
    let acked = Arc::new(AtomicUsize::new(0));
    let mut handlers = Vec::new();
    while acked.load(Ordering::SeqCst) + w.running() < 60 || w.running() > 0 {
        let Some(task) = w.next(Duration::from_millis(200)).unwrap() else {
            continue;
        };
        let is_a = task.queue() == "a";
        {
            let mut n = now.lock().unwrap();
            if is_a {
                n.0 += 1
            } else {
                n.1 += 1
            }
            n.2 += 1;
            let mut p = peak.lock().unwrap();
            *p = (p.0.max(n.0), p.1.max(n.1), p.2.max(n.2));
        }
        let (w2, now2, acked2) = (w.clone(), Arc::clone(&now), Arc::clone(&acked));
        handlers.push(thread::spawn(move || {
            thread::sleep(Duration::from_millis(10 + fastrand::u64(0..10)));
            {
                let mut n = now2.lock().unwrap();
                if is_a {
                    n.0 -= 1
                } else {
                    n.1 -= 1
                }
                n.2 -= 1;
            }
            let r = w2.complete(task, Outcome::Ack(None)).unwrap();
            assert_eq!(r.finished, Finished::Acked);
            acked2.fetch_add(1, Ordering::SeqCst);
        }));
    }
    for h in handlers {
        h.join().unwrap();
    }
    let p = *peak.lock().unwrap();
    assert!(
        p.0 <= 2 && p.1 <= 3 && p.2 <= 4,
        "peaks (a, b, total) {p:?}"
    );
    assert_eq!(p.2, 4, "the worker should have used its slots");
    assert_eq!(acked.load(Ordering::SeqCst), 60);
    for q in ["a", "b"] {
        let s = db.queue(q).unwrap().stats().unwrap();
        assert_eq!((s.ready, s.running), (0, 0));
    }
}

#[test]
fn each_outcome_does_what_it_says() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    q.enqueue_many((0..4).map(|i| json!(i)), &EnqueueOptions::default())
        .unwrap();
    let w = worker(&t.db, 4);
    w.register(&t.db.queue("q").unwrap(), HandlerOptions::default())
        .unwrap();
    let mut tasks: Vec<_> = (0..4)
        .map(|_| w.next(Duration::ZERO).unwrap().unwrap())
        .collect();
    assert!(
        w.next(Duration::ZERO).unwrap().is_none(),
        "all four slots are taken"
    );
    let ids: Vec<i64> = tasks.iter().map(|t| t.job().unwrap().id).collect();

    let r = w
        .complete(
            tasks.remove(0),
            Outcome::Ack(Some(Payload::Json("\"sent\"".into()))),
        )
        .unwrap();
    assert_eq!(
        (r.finished, r.attempts, r.queue.as_str()),
        (Finished::Acked, 1, "q")
    );
    assert_eq!(
        q.get_result(ids[0]).unwrap(),
        Some(Payload::Json("\"sent\"".into()))
    );

    let r = w
        .complete(
            tasks.remove(0),
            Outcome::Retry {
                delay: Some(Duration::from_secs(5)),
                error: "429".into(),
            },
        )
        .unwrap();
    assert_eq!(r.finished, Finished::Retried(JobState::Scheduled));
    let info = q.get_job(ids[1]).unwrap();
    assert_eq!(
        (info.attempts, info.last_error.as_deref()),
        (1, Some("429"))
    );

    let r = w
        .complete(
            tasks.remove(0),
            Outcome::Permanent("invalid address".into()),
        )
        .unwrap();
    assert_eq!(r.finished, Finished::Dead);
    let info = q.get_job(ids[2]).unwrap();
    assert_eq!(
        (info.state, info.last_error.as_deref()),
        (JobState::Dead, Some("invalid address"))
    );

    let r = w
        .complete(tasks.remove(0), Outcome::Snooze(Duration::from_secs(60)))
        .unwrap();
    assert_eq!(r.finished, Finished::Snoozed(JobState::Scheduled));
    assert_eq!(
        q.get_job(ids[3]).unwrap().attempts,
        0,
        "a snooze spends no attempt"
    );
    assert_eq!(w.running(), 0);
}

#[test]
fn a_handler_running_five_times_its_lease_keeps_its_job() {
    let (db, _dir) = real_db();
    enqueue(&db, "q", 1);
    let w = worker(&db, 2);
    let lease = Duration::from_millis(300);
    w.register(
        &db.queue("q").unwrap(),
        HandlerOptions {
            lease: Some(lease),
            ..HandlerOptions::default()
        },
    )
    .unwrap();
    let task = w.next(Duration::from_secs(1)).unwrap().unwrap();
    let id = task.job().unwrap().id;
    let w2 = w.clone();
    let handler = thread::spawn(move || {
        thread::sleep(lease * 5);
        w2.complete(task, Outcome::Ack(None)).unwrap()
    });
    // Another process tries to take it all along.
    let other = db.queue("q").unwrap();
    let start = Instant::now();
    while !handler.is_finished() {
        assert!(w.next(Duration::from_millis(50)).unwrap().is_none());
        assert!(
            other.claim("thief", 1).unwrap().is_empty(),
            "claimed at {:?}",
            start.elapsed()
        );
    }
    let r = handler.join().unwrap();
    assert_eq!((r.job_id, r.finished, r.attempts), (id, Finished::Acked, 1));
    assert!(r.ran >= lease * 5);
    let s = other.stats().unwrap();
    assert_eq!((s.ready, s.running), (0, 0));
}

#[test]
fn a_lapsed_lease_is_reported_and_the_late_outcome_refused() {
    let t = test_db();
    enqueue(&t.db, "q", 1);
    let w = worker(&t.db, 1);
    w.register(&t.db.queue("q").unwrap(), HandlerOptions::default())
        .unwrap();
    let task = w.next(Duration::ZERO).unwrap().unwrap();
    // The process stood still (SIGSTOP) past its lease: nothing renewed it.
    t.clock.advance(Duration::from_secs(61));
    let stolen = t.db.queue("q").unwrap().claim("other", 1).unwrap();
    assert_eq!(stolen.len(), 1);
    let r = w.complete(task, Outcome::Ack(None)).unwrap();
    assert_eq!(r.finished, Finished::LeaseLost);
    stolen[0].ack().unwrap();
}

#[test]
fn a_handler_past_its_timeout_has_its_job_retried_and_its_outcome_discarded() {
    let (db, _dir) = real_db();
    let q = db
        .queue_with(
            "q",
            QueueOptions {
                backoff: Backoff {
                    base: Duration::from_secs(30),
                    jitter: 0.0,
                    ..Backoff::default()
                },
                ..QueueOptions::default()
            },
        )
        .unwrap();
    enqueue(&db, "q", 1);
    let w = worker(&db, 1);
    w.register(
        &q,
        HandlerOptions {
            timeout: Some(Duration::from_millis(100)),
            ..HandlerOptions::default()
        },
    )
    .unwrap();
    let task = w.next(Duration::from_secs(1)).unwrap().unwrap();
    let id = task.job().unwrap().id;
    assert!(task.deadline().is_some());
    let w2 = w.clone();
    let handler = thread::spawn(move || {
        let give_up = Instant::now() + Duration::from_secs(2);
        assert_eq!(task.gave_up(), None);
        while !task.timed_out() && Instant::now() < give_up {
            thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(task.gave_up(), Some(Finished::TimedOut));
        thread::sleep(Duration::from_millis(50)); // a sync handler finishes late
        w2.complete(task, Outcome::Ack(None)).unwrap()
    });
    // The slot stays taken until the handler returns: nothing is handed out.
    while !handler.is_finished() {
        assert!(w.next(Duration::from_millis(30)).unwrap().is_none());
    }
    assert_eq!(handler.join().unwrap().finished, Finished::TimedOut);
    let info = db.queue("q").unwrap().get_job(id).unwrap();
    assert_eq!(info.state, JobState::Scheduled);
    assert_eq!(
        info.last_error.as_deref(),
        Some("handler timed out after 100 ms")
    );
    assert_eq!(info.attempts, 1);
}

#[test]
fn shutdown_stops_claiming_releases_the_buffer_and_drain_releases_what_outlives_the_grace() {
    let (db, _dir) = real_db();
    enqueue(&db, "q", 6);
    let w = worker(&db, 4);
    w.register(&db.queue("q").unwrap(), HandlerOptions::default())
        .unwrap();
    let short1 = w.next(Duration::from_secs(1)).unwrap().unwrap();
    let short2 = w.next(Duration::from_secs(1)).unwrap().unwrap();
    let long = w.next(Duration::from_secs(1)).unwrap().unwrap();
    let long_id = long.job().unwrap().id;
    // One more is claimed (four slots) but not handed out.
    assert_eq!(w.running(), 4);
    assert_eq!(w.shutdown(), 1, "the buffered job is given back");
    assert!(
        w.next(Duration::from_secs(5)).unwrap().is_none(),
        "no claim after shutdown"
    );
    let mut handlers = Vec::new();
    for (task, ms) in [(short1, 20u64), (short2, 40), (long, 1500)] {
        let w2 = w.clone();
        handlers.push(thread::spawn(move || {
            thread::sleep(Duration::from_millis(ms));
            let told = task.gave_up();
            let finished = w2.complete(task, Outcome::Ack(None)).unwrap().finished;
            assert_eq!(told, (finished == Finished::Released).then_some(finished));
            finished
        }));
    }
    let start = Instant::now();
    let drained = w.drain(Duration::from_millis(300)).unwrap();
    assert!(start.elapsed() < Duration::from_millis(1000));
    assert_eq!(drained.released, 1);
    let q = db.queue("q").unwrap();
    let info = q.get_job(long_id).unwrap();
    assert_eq!(
        (info.state, info.attempts),
        (JobState::Ready, 0),
        "released, no attempt spent"
    );
    let outcomes: Vec<Finished> = handlers.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(
        outcomes,
        [Finished::Acked, Finished::Acked, Finished::Released]
    );
    assert_eq!(q.stats().unwrap().ready, 4);
}

#[test]
fn a_dropped_task_gives_its_job_back() {
    let t = test_db();
    enqueue(&t.db, "q", 1);
    let w = worker(&t.db, 1);
    w.register(&t.db.queue("q").unwrap(), HandlerOptions::default())
        .unwrap();
    let task = w.next(Duration::ZERO).unwrap().unwrap();
    let id = task.job().unwrap().id;
    drop(task); // a handler that panicked
    assert_eq!(w.running(), 0);
    let info = t.db.queue("q").unwrap().get_job(id).unwrap();
    assert_eq!((info.state, info.attempts), (JobState::Ready, 0));
    assert!(w.next(Duration::ZERO).unwrap().is_some());
}

#[test]
fn a_waiting_next_wakes_for_work_from_another_connection() {
    let (db, dir) = real_db();
    let w = worker(&db, 1);
    w.register(&db.queue("q").unwrap(), HandlerOptions::default())
        .unwrap();
    let producer = thread::spawn(move || {
        thread::sleep(Duration::from_millis(100));
        let other = Database::open(dir.path().join("w.db")).unwrap();
        enqueue(&other, "q", 1);
        dir
    });
    let start = Instant::now();
    let task = w
        .next(Duration::from_secs(10))
        .unwrap()
        .expect("woken by the commit");
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
    w.complete(task, Outcome::Ack(None)).unwrap();
    drop(producer.join().unwrap());
}

#[test]
fn bad_registrations_are_invalid_and_change_nothing() {
    let t = test_db();
    let w = worker(&t.db, 2);
    w.register(&t.db.queue("q").unwrap(), HandlerOptions::default())
        .unwrap();
    let again = w
        .register(&t.db.queue("q").unwrap(), HandlerOptions::default())
        .unwrap_err();
    assert_eq!(again.kind(), ErrorKind::InvalidArgument);
    for bad in [
        HandlerOptions {
            concurrency: Some(0),
            ..HandlerOptions::default()
        },
        HandlerOptions {
            timeout: Some(Duration::ZERO),
            ..HandlerOptions::default()
        },
        HandlerOptions {
            lease: Some(Duration::ZERO),
            ..HandlerOptions::default()
        },
    ] {
        assert_eq!(
            w.register(&t.db.queue("r").unwrap(), bad)
                .unwrap_err()
                .kind(),
            ErrorKind::InvalidArgument
        );
    }
    assert_eq!(
        t.db.queue("").unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    let bad = Worker::new(
        &t.db,
        WorkerOptions {
            worker_id: String::new(),
            concurrency: 1,
            ..WorkerOptions::default()
        },
    );
    assert_eq!(bad.unwrap_err().kind(), ErrorKind::InvalidArgument);
    w.register(&t.db.queue("r").unwrap(), HandlerOptions::default())
        .unwrap();
}

#[test]
fn release_settled_and_a_refused_result_are_outcomes_too() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    q.enqueue_many((0..3).map(|i| json!(i)), &EnqueueOptions::default())
        .unwrap();
    let w = worker(&t.db, 3);
    w.register(&q, HandlerOptions::default()).unwrap();
    let mut tasks: Vec<_> = (0..3)
        .map(|_| w.next(Duration::ZERO).unwrap().unwrap())
        .collect();
    let ids: Vec<i64> = tasks.iter().map(|t| t.job().unwrap().id).collect();

    // Cancelled by its host: back at once, no attempt spent.
    let r = w.complete(tasks.remove(0), Outcome::Release).unwrap();
    assert_eq!(r.finished, Finished::Released);
    let info = q.get_job(ids[0]).unwrap();
    assert_eq!((info.state, info.attempts), (JobState::Ready, 0));

    // The handler acked it inside its own transaction: only the slot frees.
    let task = tasks.remove(0);
    let tx = t.db.transaction().unwrap();
    q.ack_tx(&tx, &task.job().unwrap().lease, None).unwrap();
    tx.commit().unwrap();
    let r = w.complete(task, Outcome::Settled).unwrap();
    assert_eq!(r.finished, Finished::Settled);
    assert_eq!(
        q.get_job(ids[1]).unwrap_err().kind(),
        ErrorKind::NotFound,
        "acked (completed jobs are not retained by default)"
    );

    // A result over the payload limit is refused: the job is retried with
    // the reason, not left running until its lease lapses.
    let big = Payload::Json(format!("\"{}\"", "x".repeat(2 << 20)));
    let r = w
        .complete(tasks.remove(0), Outcome::Ack(Some(big)))
        .unwrap();
    assert!(matches!(r.finished, Finished::Retried(_)), "{r:?}");
    let info = q.get_job(ids[2]).unwrap();
    assert!(
        info.last_error
            .as_deref()
            .is_some_and(|e| e.starts_with("the handler's result was refused")),
        "{info:?}"
    );
    // That completion refilled its slot: the released job is claimed.
    assert_eq!(w.running(), 1);
    let task = w.next(Duration::ZERO).unwrap().unwrap();
    assert_eq!(
        (task.job().unwrap().id, task.job().unwrap().attempts),
        (ids[0], 1)
    );
}

#[test]
fn a_completion_claims_the_next_job_in_its_own_transaction() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    let ids: Vec<i64> = q
        .enqueue_many((0..3).map(|i| json!(i)), &EnqueueOptions::default())
        .unwrap()
        .iter()
        .map(|e| e.id)
        .collect();
    let w = worker(&t.db, 1);
    w.register(&q, HandlerOptions::default()).unwrap();
    let task = w.next(Duration::ZERO).unwrap().unwrap();
    assert_eq!(task.job().unwrap().id, ids[0]);
    assert_eq!(q.get_job(ids[1]).unwrap().state, JobState::Ready);
    let r = w.complete(task, Outcome::Ack(None)).unwrap();
    assert_eq!(r.finished, Finished::Acked);
    // Acked, and the next job already claimed for the freed slot, before
    // any `next`; the limit of 1 holds (the third stays ready).
    assert_eq!(q.get_job(ids[0]).unwrap_err().kind(), ErrorKind::NotFound);
    let info = q.get_job(ids[1]).unwrap();
    assert_eq!((info.state, info.attempts), (JobState::Running, 1));
    assert_eq!(q.get_job(ids[2]).unwrap().state, JobState::Ready);
    assert_eq!(w.running(), 1);
    let task = w.next(Duration::ZERO).unwrap().unwrap();
    assert_eq!(task.job().unwrap().id, ids[1]);
    // A lost lease (the job cancelled under its handler) refills too.
    assert!(q.cancel(ids[1], None).unwrap());
    let r = w
        .complete(
            task,
            Outcome::Retry {
                delay: None,
                error: "e".into(),
            },
        )
        .unwrap();
    assert_eq!(r.finished, Finished::LeaseLost);
    assert_eq!(q.get_job(ids[2]).unwrap().state, JobState::Running);
    // Once stopping, a completion claims nothing.
    let task = w.next(Duration::ZERO).unwrap().unwrap();
    w.stop();
    w.complete(task, Outcome::Ack(None)).unwrap();
    assert_eq!(w.running(), 0);
    let s = q.stats().unwrap();
    assert_eq!((s.running, s.ready, s.cancelled), (0, 0, 1), "{s:?}");
}

#[test]
fn refills_take_turns_over_the_queues() {
    let t = test_db();
    enqueue(&t.db, "a", 4);
    enqueue(&t.db, "b", 4);
    let w = worker(&t.db, 1);
    w.register(&t.db.queue("a").unwrap(), HandlerOptions::default())
        .unwrap();
    w.register(&t.db.queue("b").unwrap(), HandlerOptions::default())
        .unwrap();
    let mut order = String::new();
    while let Some(task) = w.next(Duration::ZERO).unwrap() {
        order.push_str(task.queue());
        w.complete(task, Outcome::Ack(None)).unwrap();
    }
    assert_eq!(order, "abababab");
}

#[test]
fn a_first_signal_stops_without_io_and_a_second_cuts_a_drain_short() {
    let (db, _dir) = real_db();
    enqueue(&db, "q", 3);
    let w = worker(&db, 1);
    w.register(&db.queue("q").unwrap(), HandlerOptions::default())
        .unwrap();
    let long = w.next(Duration::from_secs(1)).unwrap().unwrap();
    let id = long.job().unwrap().id;
    // A `next` waiting for a free slot returns None once stopped.
    let w2 = w.clone();
    let waiting = thread::spawn(move || w2.next(Duration::from_secs(30)).unwrap().is_none());
    thread::sleep(Duration::from_millis(100));
    assert!(!w.signalled(), "the first signal only stops");
    assert!(w.is_stopping());
    let t0 = Instant::now();
    assert!(waiting.join().unwrap(), "a waiting next returns None");
    assert!(t0.elapsed() < Duration::from_secs(5));
    assert!(w.next(Duration::from_secs(5)).unwrap().is_none());

    let w3 = w.clone();
    let drain = thread::spawn(move || w3.drain(Duration::from_secs(60)).unwrap());
    thread::sleep(Duration::from_millis(200));
    let t1 = Instant::now();
    assert!(w.signalled(), "a second Ctrl-C ends the grace");
    let report = drain.join().unwrap();
    assert!(
        t1.elapsed() < Duration::from_secs(5),
        "the grace ended early"
    );
    assert_eq!(report.released, 1);
    let q = db.queue("q").unwrap();
    let info = q.get_job(id).unwrap();
    assert_eq!((info.state, info.attempts), (JobState::Ready, 0));
    assert_eq!(
        w.complete(long, Outcome::Ack(None)).unwrap().finished,
        Finished::Released
    );
    assert_eq!(q.stats().unwrap().ready, 3);
}

#[test]
fn an_outcome_after_the_deadline_is_a_timeout_even_before_the_clock_saw_it() {
    let (db, _dir) = real_db();
    enqueue(&db, "q", 1);
    let w = worker(&db, 1);
    let q = db.queue("q").unwrap();
    w.register(
        &q,
        HandlerOptions {
            timeout: Some(Duration::from_millis(50)),
            ..HandlerOptions::default()
        },
    )
    .unwrap();
    let task = w.next(Duration::from_secs(1)).unwrap().unwrap();
    let id = task.job().unwrap().id;
    // No `next` is outstanding, so the clock does not tick.
    thread::sleep(Duration::from_millis(80));
    // A host that cancelled its handler at the deadline reports a failure.
    let r = w
        .complete(
            task,
            Outcome::Retry {
                delay: None,
                error: "cancelled".into(),
            },
        )
        .unwrap();
    assert_eq!(r.finished, Finished::TimedOut);
    let info = q.get_job(id).unwrap();
    assert_eq!(
        info.last_error.as_deref(),
        Some("handler timed out after 50 ms")
    );
}

#[test]
fn outcomes_and_reports_have_one_vocabulary_for_every_binding() {
    let o = Outcome::named(
        "retry",
        None,
        Some(Duration::from_secs(2)),
        Some("429".into()),
    );
    assert!(
        matches!(o, Ok(Outcome::Retry { delay: Some(d), ref error }) if d.as_secs() == 2 && error == "429")
    );
    assert!(matches!(
        Outcome::named("snooze", None, None, None),
        Ok(Outcome::Snooze(d)) if d.is_zero()
    ));
    let e = Outcome::named("done", None, None, None).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.message().contains("unknown outcome \"done\""), "{e}");
    assert_eq!(Finished::TimedOut.name(), "timed_out");
    assert_eq!(
        Finished::Retried(JobState::Scheduled).state(),
        Some(JobState::Scheduled)
    );
    assert_eq!(Finished::Acked.state(), None);
}

#[test]
fn try_complete_never_waits_and_changes_nothing_when_it_would() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    q.enqueue_many((0..3).map(|i| json!(i)), &EnqueueOptions::default())
        .unwrap();
    let w = worker(&t.db, 2);
    w.register(&q, HandlerOptions::default()).unwrap();
    let (a, b) = (
        w.next(Duration::ZERO).unwrap().unwrap(),
        w.next(Duration::ZERO).unwrap().unwrap(),
    );
    let (id_a, id_b) = (a.job().unwrap().id, b.job().unwrap().id);
    // Another thread holds the writer: the outcome would wait.
    let (held, release) = (
        Arc::new(std::sync::Barrier::new(2)),
        Arc::new(std::sync::Barrier::new(2)),
    );
    let holder = {
        let (db, held, release) = (t.db.clone(), Arc::clone(&held), Arc::clone(&release));
        thread::spawn(move || {
            let tx = db.transaction().unwrap();
            held.wait();
            release.wait();
            tx.commit().unwrap();
        })
    };
    held.wait();
    let started = Instant::now();
    let Completion::WouldWait(a, outcome) = w.try_complete(a, Outcome::Ack(None)).unwrap() else {
        panic!("completed while another thread held the writer");
    };
    assert!(started.elapsed() < Duration::from_secs(1), "it waited");
    assert!(matches!(outcome, Outcome::Ack(None)));
    assert_eq!(q.get_job(id_a).unwrap().state, JobState::Running);
    assert_eq!(w.running(), 2, "the slot stays taken");
    // An outcome that writes nothing needs no writer.
    let Completion::Done(r) = w.try_complete(b, Outcome::Settled).unwrap() else {
        panic!("a settled task needs no writer");
    };
    assert_eq!(r.finished, Finished::Settled);
    release.wait();
    holder.join().unwrap();
    let Completion::Done(r) = w.try_complete(*a, outcome).unwrap() else {
        panic!("would wait with the writer free");
    };
    assert_eq!(r.finished, Finished::Acked);
    assert_eq!(q.get_job(id_a).unwrap_err().kind(), ErrorKind::NotFound);
    // Settled left the job to its handler, still running (its lease lapses).
    assert_eq!(q.get_job(id_b).unwrap().state, JobState::Running);
    // The ack refilled a slot with the third job.
    assert_eq!(w.running(), 1);
}

#[test]
fn try_complete_leaves_an_fsync_to_a_thread() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open_with(
        dir.path().join("full.db"),
        honker::Options {
            durability: honker::Durability::Full,
            ..honker::Options::default()
        },
    )
    .unwrap();
    enqueue(&db, "q", 1);
    let w = worker(&db, 1);
    w.register(&db.queue("q").unwrap(), HandlerOptions::default())
        .unwrap();
    let task = w.next(Duration::ZERO).unwrap().unwrap();
    let Completion::WouldWait(task, outcome) = w.try_complete(task, Outcome::Ack(None)).unwrap()
    else {
        panic!("committed (an fsync) without being allowed to wait");
    };
    assert_eq!(w.running(), 1);
    let r = w.complete(*task, outcome).unwrap();
    assert_eq!(r.finished, Finished::Acked);
}

#[test]
fn a_task_table_keeps_tasks_by_keys_it_never_reuses() {
    let t = test_db();
    enqueue(&t.db, "q", 3);
    let w = worker(&t.db, 2);
    w.register(&t.db.queue("q").unwrap(), HandlerOptions::default())
        .unwrap();
    let table = TaskTable::default();
    let a = table.keep(w.next(Duration::ZERO).unwrap().unwrap(), |k, t| {
        (k, t.job().unwrap().id)
    });
    let b = table.keep(w.next(Duration::ZERO).unwrap().unwrap(), |k, _| k);
    assert_ne!(a.0, b);
    assert_eq!(table.gave_up(a.0), None);
    let task = table.take(a.0).unwrap();
    assert_eq!(task.job().unwrap().id, a.1);
    assert_eq!(
        table.take(a.0).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(table.gave_up(a.0), None, "a taken task is not there");
    table.put_back(a.0, task);
    w.complete(table.take(a.0).unwrap(), Outcome::Ack(None))
        .unwrap();
    let c = table.keep(w.next(Duration::ZERO).unwrap().unwrap(), |k, _| k);
    assert!(c > b, "keys are never reused");
}

#[test]
fn an_outcome_that_cannot_be_written_frees_the_slot_and_leaves_the_lease_to_lapse() {
    let (db, dir) = real_db();
    enqueue(&db, "q", 1);
    let w = worker(&db, 1);
    w.register(&db.queue("q").unwrap(), HandlerOptions::default())
        .unwrap();
    let task = w.next(Duration::ZERO).unwrap().unwrap();
    let id = task.job().unwrap().id;
    db.close().unwrap();
    let e = w.complete(task, Outcome::Ack(None)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Closed);
    assert_eq!(w.running(), 0, "the slot is free");
    let db = Database::open(dir.path().join("w.db")).unwrap();
    let info = db.queue("q").unwrap().get_job(id).unwrap();
    assert_eq!(
        (info.state, info.attempts),
        (JobState::Running, 1),
        "not released: its handler ran, so it waits for the lease to lapse"
    );
}

/// Once `drain` returns, every outcome recorded meanwhile is in the file:
/// the task leaves the running set only after its transaction commits (it
/// used to leave before, so a drain, and `run()` returning in Python, could
/// come a moment before the last ack: a job still `running` right after).
/// Durability `full` makes each commit an fsync, widening that moment.
#[test]
fn drain_returns_only_after_the_outcomes_being_recorded_have_committed() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open_with(
        dir.path().join("w.db"),
        honker::Options {
            durability: honker::Durability::Full,
            ..honker::Options::default()
        },
    )
    .unwrap();
    let q = db.queue("q").unwrap();
    for round in 0..30 {
        q.enqueue(json!(round), &EnqueueOptions::default()).unwrap();
        let w = worker(&db, 1);
        w.register(&q, HandlerOptions::default()).unwrap();
        let task = w.next(Duration::from_secs(5)).unwrap().unwrap();
        let id = task.job().unwrap().id;
        let w2 = w.clone();
        let handler = thread::spawn(move || w2.complete(task, Outcome::Ack(None)).unwrap());
        // Drain as the completion goes in (start together).
        let drained = w.drain(Duration::from_secs(30)).unwrap();
        assert_eq!(drained.released, 0);
        let st = q.stats().unwrap();
        assert_eq!(
            (st.ready, st.running),
            (0, 0),
            "round {round}: drain returned before job {id}'s ack was in the file"
        );
        assert_eq!(handler.join().unwrap().finished, Finished::Acked);
    }
}

/// A worker running queue `q` with `options`, `jobs` jobs enqueued (and as
/// many slots).
fn registered(db: &Database, jobs: usize, options: HandlerOptions) -> (Worker, honker::Queue) {
    let q = db.queue("q").unwrap();
    enqueue(db, "q", jobs);
    let w = worker(db, jobs.max(2));
    w.register(&q, options).unwrap();
    (w, q)
}

/// A host's one outstanding `TaskTable::wait_gave_up` (Node's and Swift's
/// workers cancel handlers with it): returns when the worker gives up on a
/// task, not when its wait runs out, and reports each task once.
#[test]
fn the_task_table_is_told_when_the_worker_gives_up_on_a_task() {
    let (db, _dir) = real_db();
    let (w, _q) = registered(
        &db,
        1,
        HandlerOptions {
            timeout: Some(Duration::from_millis(100)),
            ..HandlerOptions::default()
        },
    );
    let table = Arc::new(TaskTable::default());
    let key = table.keep(w.next(Duration::from_secs(1)).unwrap().unwrap(), |k, _| k);
    // The host's claim loop, which is where the worker gives up.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let looping = {
        let (w, stop) = (w.clone(), Arc::clone(&stop));
        thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                assert!(w.next(Duration::from_millis(20)).unwrap().is_none());
            }
        })
    };
    let start = Instant::now();
    let told = table.wait_gave_up(&w, w.gave_up_generation(), Duration::from_secs(30));
    assert_eq!(told, vec![(key, Finished::TimedOut)]);
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "told by its wait running out ({:?}), not when the worker gave up",
        start.elapsed()
    );
    // Told once; another wait ends at `wake_gave_up`, empty.
    let waker = {
        let w = w.clone();
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(100));
            w.wake_gave_up();
        })
    };
    let start = Instant::now();
    assert_eq!(
        table.wait_gave_up(&w, w.gave_up_generation(), Duration::from_secs(30)),
        vec![]
    );
    assert!(start.elapsed() < Duration::from_secs(5), "not woken");
    waker.join().unwrap();
    stop.store(true, Ordering::SeqCst);
    looping.join().unwrap();
    let r = w
        .complete(table.take(key).unwrap(), Outcome::Ack(None))
        .unwrap();
    assert_eq!(r.finished, Finished::TimedOut);
}

#[test]
fn a_lost_lease_and_a_shutdowns_release_are_told_to_the_task_table() {
    let (db, _dir) = real_db();
    let (w, q) = registered(
        &db,
        3,
        HandlerOptions {
            lease: Some(Duration::from_millis(300)),
            ..HandlerOptions::default()
        },
    );
    let table = TaskTable::default();
    // One claim takes all three: one handed out, two waiting claimed.
    let a = w.next(Duration::from_secs(1)).unwrap().unwrap();
    let a_id = a.job().unwrap().id;
    let a = table.keep(a, |k, _| k);
    // The waiting ones' jobs are cancelled elsewhere; their renewal (due
    // after a third of the lease) finds them gone while they wait.
    let ids: Vec<i64> = (1..=3).filter(|id| *id != a_id).collect();
    assert_eq!(ids.len(), 2);
    q.cancel(ids[0], None).unwrap();
    thread::sleep(Duration::from_millis(150));
    let b = w.next(Duration::from_secs(1)).unwrap().unwrap();
    assert_eq!(b.job().unwrap().id, ids[0]);
    assert!(b.given_up_early(), "lost before it was handed out");
    let b = table.keep(b, |k, _| k);
    assert_eq!(
        table.wait_gave_up(&w, w.gave_up_generation(), Duration::from_secs(30)),
        vec![(b, Finished::LeaseLost)]
    );
    let c = table.keep(w.next(Duration::from_secs(1)).unwrap().unwrap(), |k, _| k);
    // A shutdown whose grace runs out releases what still runs.
    let report = w.drain(Duration::from_millis(50)).unwrap();
    assert_eq!(report.released, 2);
    assert_eq!(
        table.wait_gave_up(&w, w.gave_up_generation(), Duration::from_secs(30)),
        vec![(a, Finished::Released), (c, Finished::Released)]
    );
    for key in [a, b, c] {
        w.complete(table.take(key).unwrap(), Outcome::Ack(None))
            .unwrap();
    }
}

/// The registration rules every host's worker has (Python's `register`,
/// Node's `handle`, Swift's `handle`): one handler per task of a queue's
/// envelope or one for every job, the queue's options named once, and a
/// run that starts once.
#[test]
fn task_handlers_are_registered_once_each_with_the_queues_options_and_routed_by_envelope() {
    let t = test_db();
    let q = t.db.queue("jobs").unwrap();
    let w = worker(&t.db, 4);
    let invalid = |r: honker::Result<()>| {
        let e = r.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        e.to_string()
    };
    assert!(invalid(w.start()).contains("no handler is registered"));
    let opts = HandlerOptions {
        concurrency: Some(2),
        ..HandlerOptions::default()
    };
    w.register_task(&q, "resize", opts.clone()).unwrap();
    // The same options, or none, for the queue's other tasks.
    w.register_task(&q, "thumb", HandlerOptions::default())
        .unwrap();
    w.register_task(&q, "crop", opts.clone()).unwrap();
    let other = HandlerOptions {
        concurrency: Some(3),
        ..HandlerOptions::default()
    };
    assert!(invalid(w.register_task(&q, "rotate", other))
        .contains(r#"queue "jobs" is already registered with other options"#));
    assert!(
        invalid(w.register_task(&q, "resize", HandlerOptions::default()))
            .contains(r#"queue "jobs" already has a handler for resize"#)
    );
    assert!(invalid(w.register(&q, HandlerOptions::default()))
        .contains(r#"queue "jobs" already has a handler for every job"#));
    assert!(invalid(w.register_task(&q, "", HandlerOptions::default())).contains("empty"));
    let whole = t.db.queue("whole").unwrap();
    w.register(&whole, HandlerOptions::default()).unwrap();
    assert!(
        invalid(w.register_task(&whole, "resize", HandlerOptions::default()))
            .contains(r#"queue "whole" already has a handler for every job"#)
    );

    for p in [
        json!({"task": "resize", "args": [1]}),
        json!({"task": "transcode", "args": null}),
        json!("raw"),
        json!({"task": 7}),
    ] {
        q.enqueue(
            Payload::from_serialize(&p).unwrap(),
            &EnqueueOptions::default(),
        )
        .unwrap();
    }
    q.enqueue(Payload::Bytes(vec![1, 2]), &EnqueueOptions::default())
        .unwrap();
    enqueue(&t.db, "whole", 1);
    w.start().unwrap();
    assert!(invalid(w.start()).contains("a Worker runs once"));
    assert!(
        invalid(w.register_task(&q, "late", HandlerOptions::default()))
            .contains("register handlers before the worker runs")
    );
    let mut routes = Vec::new();
    while let Some(task) = w.next(Duration::ZERO).unwrap() {
        routes.push((task.queue().to_owned(), task.route().clone()));
        w.complete(task, Outcome::Ack(None)).unwrap();
    }
    routes.sort_by(|a, b| a.0.cmp(&b.0));
    let not_envelope = Route::Refused(
        r#"not a task envelope ({"task": name, "args": ...}), and queue "jobs" has handlers only for tasks"#
            .into(),
    );
    assert_eq!(
        routes,
        vec![
            ("jobs".into(), Route::Task("resize".into())),
            (
                "jobs".into(),
                Route::Refused("no handler for task transcode".into())
            ),
            ("jobs".into(), not_envelope.clone()),
            ("jobs".into(), not_envelope.clone()),
            ("jobs".into(), not_envelope),
            ("whole".into(), Route::Every),
        ]
    );
}

#[test]
fn finished_tasks_have_one_event_name_and_an_unstorable_result_is_a_retry() {
    use honker::runtime::{Finished, Outcome};
    let every = [
        Finished::Acked,
        Finished::Retried(JobState::Ready),
        Finished::Dead,
        Finished::Snoozed(JobState::Scheduled),
        Finished::TimedOut,
        Finished::LeaseLost,
        Finished::Released,
        Finished::Settled,
    ];
    assert_eq!(every.map(Finished::event), Finished::EVENTS);
    // Every event, and a handler's start, has its log level.
    for e in Finished::EVENTS.iter().chain(&["start"]) {
        assert!(Finished::log_level(e).is_some(), "{e} has no log level");
    }
    assert_eq!(Finished::log_level("dead"), Some("error"));
    assert_eq!(Finished::log_level("acked"), None);
    let error = Some("TypeError: Object of type set is not JSON serializable".to_owned());
    match Outcome::named("unstorable", None, None, error).unwrap() {
        Outcome::Retry { delay: None, error } => assert_eq!(
            error,
            "the handler's result could not be stored: TypeError: Object of type set is not JSON serializable"
        ),
        other => panic!("{other:?}"),
    }
}
