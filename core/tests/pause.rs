//! Pausing a queue, or all queues (ADR 33): no claim returns a paused
//! queue's jobs, by any handle or process, while enqueues go on; a waiting
//! claim keeps waiting and wakes on the resume's commit; the pause is kept
//! in the file; the SQL functions pause inside the caller's transaction.

mod common;

use std::time::{Duration, Instant};

use common::{code, sql, test_db};
use honker::{ClaimOptions, Database, EnqueueOptions, ErrorKind, PauseOptions};
use serde_json::json;

fn note(n: &str) -> PauseOptions {
    PauseOptions {
        note: Some(n.into()),
    }
}

#[test]
fn a_paused_queue_hands_out_nothing_and_keeps_taking_jobs() {
    let t = test_db();
    let q = t.db.queue("emails").unwrap();
    let other = t.db.queue("images").unwrap();
    q.enqueue(json!(1), &EnqueueOptions::default()).unwrap();
    other.enqueue(json!(2), &EnqueueOptions::default()).unwrap();
    q.pause(&note("deploy")).unwrap();

    // Enqueues go on; claims by this handle and another open find nothing.
    q.enqueue(json!(3), &EnqueueOptions::default()).unwrap();
    assert!(q.claim("w", 10).unwrap().is_empty());
    let elsewhere = t.reopen();
    assert!(elsewhere
        .queue("emails")
        .unwrap()
        .claim("w", 10)
        .unwrap()
        .is_empty());
    let stats = q.stats().unwrap();
    assert_eq!((stats.ready, stats.paused), (2, true));
    // Another queue runs.
    assert_eq!(other.claim("w", 10).unwrap().len(), 1);
    assert!(!other.stats().unwrap().paused);

    let pauses = q.pauses().unwrap();
    assert_eq!(pauses.len(), 1);
    assert_eq!(pauses[0].note.as_deref(), Some("deploy"));
    assert!(!pauses[0].all);
    let since = pauses[0].since;

    // Pausing again takes the note and keeps the time.
    t.clock.advance(Duration::from_secs(5));
    q.pause(&PauseOptions::default()).unwrap();
    let again = q.pauses().unwrap();
    assert_eq!((again[0].note.as_deref(), again[0].since), (None, since));

    assert!(q.resume().unwrap());
    assert!(!q.resume().unwrap(), "nothing left to resume");
    assert_eq!(q.claim("w", 10).unwrap().len(), 2);
    assert!(!q.stats().unwrap().paused);
}

#[test]
fn running_jobs_finish_while_their_queue_is_paused() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    q.enqueue(json!(1), &EnqueueOptions::default()).unwrap();
    let job = q.claim("w", 1).unwrap().remove(0);
    q.pause(&PauseOptions::default()).unwrap();
    q.heartbeat(&job.lease, None).unwrap();
    q.ack(&job.lease, None).unwrap();
    assert_eq!(t.count("_honker_jobs"), 0);
}

#[test]
fn pausing_all_queues_is_apart_from_a_queue_s_own_pause() {
    let t = test_db();
    let (a, b) = (t.db.queue("a").unwrap(), t.db.queue("b").unwrap());
    for q in [&a, &b] {
        q.enqueue(json!(1), &EnqueueOptions::default()).unwrap();
    }
    a.pause(&note("broken upstream")).unwrap();
    t.db.pause_all(&note("migration")).unwrap();
    assert!(a.claim("w", 1).unwrap().is_empty());
    assert!(b.claim("w", 1).unwrap().is_empty());
    assert!(b.stats().unwrap().paused);
    // A queue's pauses: its own first, then all queues'.
    let notes: Vec<_> = a
        .pauses()
        .unwrap()
        .into_iter()
        .map(|p| (p.all, p.note))
        .collect();
    assert_eq!(
        notes,
        [
            (false, Some("broken upstream".into())),
            (true, Some("migration".into()))
        ]
    );
    assert_eq!(
        t.db.paused_all().unwrap().unwrap().note.as_deref(),
        Some("migration")
    );

    // Resuming one queue leaves it held by all queues' pause.
    assert!(!b.resume().unwrap());
    assert!(b.claim("w", 1).unwrap().is_empty());
    // Resuming all leaves a queue's own pause.
    assert!(t.db.resume_all().unwrap());
    assert!(!t.db.resume_all().unwrap());
    assert!(t.db.paused_all().unwrap().is_none());
    assert_eq!(b.claim("w", 1).unwrap().len(), 1);
    assert!(a.claim("w", 1).unwrap().is_empty());
    assert!(a.resume().unwrap());
    assert_eq!(a.claim("w", 1).unwrap().len(), 1);
}

#[test]
fn a_pause_survives_reopening_the_file() {
    let t = test_db();
    t.db.queue("q").unwrap().pause(&note("n")).unwrap();
    t.db.pause_all(&PauseOptions::default()).unwrap();
    let path = t.path.clone();
    drop(t.db);
    let db = Database::open(&path).unwrap();
    assert_eq!(db.queue("q").unwrap().pauses().unwrap().len(), 2);
    assert!(db.paused_all().unwrap().is_some());
}

#[test]
fn a_bad_note_is_refused_and_changes_nothing() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    let long = "x".repeat(513);
    for bad in [note(&long), note(&"é".repeat(257))] {
        let e = q.pause(&bad).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
        assert!(e.message().contains("pause note"), "{e}");
        let e = t.db.pause_all(&bad).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    }
    assert!(q.pauses().unwrap().is_empty());
    assert_eq!(t.count("_honker_settings WHERE scope = 'queue_paused'"), 0);
}

#[test]
fn a_rate_limited_queue_keeps_its_limit_through_a_pause() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    q.set_rate_limit(Some(honker::rate::RateLimit {
        limit: 2,
        per: Duration::from_secs(60),
        burst: 2,
    }))
    .unwrap();
    for i in 0..5 {
        q.enqueue(json!(i), &EnqueueOptions::default()).unwrap();
    }
    q.pause(&PauseOptions::default()).unwrap();
    assert!(q.claim("w", 5).unwrap().is_empty());
    q.resume().unwrap();
    assert_eq!(q.claim("w", 5).unwrap().len(), 2, "the limit's burst");
    assert!(q.claim("w", 5).unwrap().is_empty());
}

#[test]
fn the_sql_functions_pause_with_the_callers_transaction() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    q.enqueue(json!(1), &EnqueueOptions::default()).unwrap();

    // Rolled back with the transaction: not paused.
    let tx = t.db.transaction().unwrap();
    tx.query("SELECT honker_queue_pause('q', 'oops')", [])
        .unwrap();
    tx.rollback().unwrap();
    assert!(q.pauses().unwrap().is_empty());

    assert_eq!(
        sql(&t.db, "SELECT honker_queue_pause('q', 'by sql')"),
        honker::rusqlite::types::Value::Integer(1)
    );
    let stats = sql(&t.db, "SELECT honker_queue_stats('q')");
    let honker::rusqlite::types::Value::Text(stats) = stats else {
        panic!("{stats:?}")
    };
    assert!(stats.contains("\"paused\":true"), "{stats}");
    let claimed = sql(&t.db, "SELECT honker_queue_claim('q', 'w', 1, 1000)");
    assert_eq!(claimed, honker::rusqlite::types::Value::Text("[]".into()));
    assert_eq!(
        sql(&t.db, "SELECT honker_queue_resume('q')"),
        honker::rusqlite::types::Value::Integer(1)
    );
    assert_eq!(
        sql(&t.db, "SELECT honker_queue_resume('q')"),
        honker::rusqlite::types::Value::Integer(0)
    );
    sql(&t.db, "SELECT honker_queue_pause_all()");
    assert!(q.claim("w", 1).unwrap().is_empty());
    assert_eq!(
        sql(&t.db, "SELECT honker_queue_resume_all()"),
        honker::rusqlite::types::Value::Integer(1)
    );
    assert_eq!(q.claim("w", 1).unwrap().len(), 1);

    // Bad input: a typed error, nothing paused.
    let tx = t.db.transaction().unwrap();
    let e = tx
        .query("SELECT honker_queue_pause('q', ?1)", [&"y".repeat(600)])
        .unwrap_err();
    assert_eq!(code(&e), "INVALID_ARGUMENT", "{e}");
    let e = tx
        .query("SELECT honker_queue_pause('q', 'a', 'b')", [])
        .unwrap_err();
    assert_eq!(code(&e), "INVALID_ARGUMENT", "{e}");
    tx.rollback().unwrap();
    assert!(q.pauses().unwrap().is_empty());
}

/// A file on the system clock (the waits below are real time) whose queue
/// `q` is paused.
fn paused_on_the_system_clock() -> (tempfile::TempDir, std::path::PathBuf, honker::Queue) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.db");
    let q = Database::open(&path).unwrap().queue("q").unwrap();
    q.pause(&PauseOptions::default()).unwrap();
    (dir, path, q)
}

/// A claim waiting when the queue is paused keeps waiting through the
/// enqueue's commit, and the resume's commit, from another open of the
/// file, wakes it.
#[test]
fn a_waiting_claim_waits_through_a_pause_and_wakes_on_the_resume() {
    let (_dir, path, q) = paused_on_the_system_clock();
    let waiter = std::thread::spawn(move || {
        let wait = ClaimOptions {
            wait: Duration::from_secs(30),
            ..ClaimOptions::default()
        };
        let jobs = q.claim_with("w", 1, &wait).unwrap();
        (jobs.len(), Instant::now())
    });
    let other = Database::open(&path).unwrap();
    let oq = other.queue("q").unwrap();
    oq.enqueue(json!("x"), &EnqueueOptions::default()).unwrap();
    // A broken pause hands the job out within a moment of the enqueue;
    // this gives it that moment, and the check below sees it if it did.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(oq.stats().unwrap().ready, 1, "claimed while paused");
    let resumed = Instant::now();
    assert!(oq.resume().unwrap());
    let (n, at) = waiter.join().unwrap();
    assert_eq!(n, 1);
    assert!(at >= resumed);
    eprintln!("woke {:?} after the resume", at - resumed);
}

/// A worker (no scheduler thread) with `q`'s handler.
fn worker_on(q: &honker::Queue) -> honker::runtime::Worker {
    let options = honker::runtime::WorkerOptions {
        run_scheduler: false,
        ..Default::default()
    };
    let worker = honker::runtime::Worker::new(q.database(), options).unwrap();
    worker
        .register(q, honker::runtime::HandlerOptions::default())
        .unwrap();
    worker
}

#[test]
fn a_worker_claims_nothing_from_a_paused_queue_until_it_resumes() {
    let (_dir, _path, q) = paused_on_the_system_clock();
    for i in 0..3 {
        q.enqueue(json!(i), &EnqueueOptions::default()).unwrap();
    }
    let worker = worker_on(&q);
    assert!(worker.next(Duration::from_millis(200)).unwrap().is_none());
    // The worker reports the queue whose due work the pause held back.
    let paused = worker.paused();
    assert_eq!(paused.len(), 1, "{paused:?}");
    assert_eq!(paused[0].0, "q");
    assert!(paused[0].1 >= 1, "{paused:?}");
    q.resume().unwrap();
    let mut done = 0;
    while done < 3 {
        let task = worker
            .next(Duration::from_secs(10))
            .unwrap()
            .expect("a task after the resume");
        worker
            .complete(task, honker::runtime::Outcome::Ack(None))
            .unwrap();
        done += 1;
    }
    assert_eq!(q.stats().unwrap().ready, 0);
    assert!(worker.paused().is_empty(), "running again");
}

/// A worker on a paused queue with nothing due reports nothing held.
#[test]
fn a_worker_reports_a_pause_only_when_it_holds_work_back() {
    let (_dir, _path, q) = paused_on_the_system_clock();
    let worker = worker_on(&q);
    assert!(worker.next(Duration::from_millis(50)).unwrap().is_none());
    assert!(worker.paused().is_empty());
}
