//! The worker runtime running a consumer group's events
//! (`Worker::register_group`): the same slots, renewal, timeouts and drain
//! as for jobs; per-key order holds under concurrency; outcomes map to the
//! group's verbs; a queue and a group share one worker.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use common::{json, keyed, test_db};
use honker::runtime::{Finished, HandlerOptions, Outcome, Work, Worker, WorkerOptions};
use honker::stream::group::GroupOptions;
use honker::stream::{PublishOptions, Start};
use honker::{Database, EnqueueOptions, JobState};

fn worker(db: &Database, concurrency: usize) -> Worker {
    Worker::new(
        db,
        WorkerOptions {
            worker_id: "member-1".into(),
            concurrency,
            ..WorkerOptions::default()
        },
    )
    .unwrap()
}

#[test]
fn a_worker_runs_a_groups_events_in_key_order_under_concurrency() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("w.db")).unwrap();
    let s = db.stream("orders").unwrap();
    // 4 keys x 10 events, interleaved, plus 10 without a key.
    for i in 0..40 {
        s.publish(json(serde_json::json!(i)), &keyed(&format!("k{}", i % 4)))
            .unwrap();
    }
    s.publish_many((40..50).map(|i| json(serde_json::json!(i))), None)
        .unwrap();
    let g = s.group("g").unwrap();
    g.create(Start::Beginning, &GroupOptions::default())
        .unwrap();
    let w = worker(&db, 8);
    w.register_group(&g, HandlerOptions::default()).unwrap();
    // Per key: the offsets handled, in order; and whether two of a key ever
    // ran at once.
    let seen: Arc<Mutex<HashMap<String, Vec<i64>>>> = Arc::default();
    let running: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let overlap = Arc::new(Mutex::new(false));
    let mut handlers = Vec::new();
    let mut handed = 0;
    while handed < 50 {
        let Some(task) = w.next(Duration::from_millis(500)).unwrap() else {
            continue;
        };
        handed += 1;
        assert_eq!((task.queue(), task.group()), ("orders", Some("g")));
        assert!(task.job().is_none());
        let e = task.event().unwrap().clone();
        let key = e
            .key
            .clone()
            .unwrap_or_else(|| format!("none-{}", e.offset));
        {
            let mut r = running.lock().unwrap();
            let n = r.entry(key.clone()).or_default();
            *n += 1;
            if *n > 1 {
                *overlap.lock().unwrap() = true;
            }
        }
        let (w2, seen2, running2) = (w.clone(), Arc::clone(&seen), Arc::clone(&running));
        handlers.push(thread::spawn(move || {
            thread::sleep(Duration::from_millis(fastrand::u64(1..8)));
            seen2
                .lock()
                .unwrap()
                .entry(key.clone())
                .or_default()
                .push(e.offset);
            *running2.lock().unwrap().get_mut(&key).unwrap() -= 1;
            let r = w2.complete(task, Outcome::Ack(None)).unwrap();
            assert_eq!(
                (r.finished, r.job_id, r.group.as_deref()),
                (Finished::Acked, e.offset, Some("g"))
            );
        }));
    }
    for h in handlers {
        h.join().unwrap();
    }
    assert!(
        !*overlap.lock().unwrap(),
        "two events of one key ran at once"
    );
    let seen = seen.lock().unwrap();
    for k in 0..4 {
        let offsets = &seen[&format!("k{k}")];
        let want: Vec<i64> = (0..10).map(|i| 1 + k + 4 * i).collect();
        assert_eq!(offsets, &want, "key k{k} out of order");
    }
    let info = g.info().unwrap();
    assert_eq!((info.pending, info.lag, info.dead), (0, 0, 0));
    assert_eq!(info.members[0].member, "member-1");
}

#[test]
fn outcomes_map_to_the_groups_verbs() {
    let t = test_db();
    let s = t.db.stream("s").unwrap();
    s.publish_many((0..5).map(|i| json(serde_json::json!(i))), None)
        .unwrap();
    let g = s.group("g").unwrap();
    g.create(
        Start::Beginning,
        &GroupOptions {
            max_deliveries: 2,
            ..GroupOptions::default()
        },
    )
    .unwrap();
    let w = worker(&t.db, 5);
    w.register_group(&g, HandlerOptions::default()).unwrap();
    let tasks: Vec<_> = (0..5)
        .map(|_| w.next(Duration::ZERO).unwrap().unwrap())
        .collect();
    let offsets: Vec<i64> = tasks.iter().map(|t| t.work().id()).collect();
    assert_eq!(offsets, vec![1, 2, 3, 4, 5]);
    assert!(tasks.iter().all(|t| t.work().attempts() == 1));
    let mut it = tasks.into_iter();
    let r = w.complete(it.next().unwrap(), Outcome::Ack(None)).unwrap();
    assert_eq!(r.finished, Finished::Acked);
    let r = w
        .complete(
            it.next().unwrap(),
            Outcome::Retry {
                delay: None,
                error: "flaky".into(),
            },
        )
        .unwrap();
    assert_eq!(r.finished, Finished::Retried(JobState::Ready));
    let r = w
        .complete(it.next().unwrap(), Outcome::Permanent("poison".into()))
        .unwrap();
    assert_eq!(r.finished, Finished::Dead);
    let r = w.complete(it.next().unwrap(), Outcome::Release).unwrap();
    assert_eq!(r.finished, Finished::Released);
    let r = w
        .complete(it.next().unwrap(), Outcome::Snooze(Duration::from_secs(60)))
        .unwrap();
    assert_eq!(r.finished, Finished::Snoozed(JobState::Scheduled));
    let dead = g.dead(0, 10).unwrap();
    assert_eq!(
        (dead.len(), dead[0].offset, dead[0].last_error.as_deref()),
        (1, 3, Some("poison"))
    );
    // The retried (2) and released (4) events come back at once, released
    // one's delivery uncounted; the snoozed one (5) after its delay.
    let mut back: Vec<(i64, u32)> = Vec::new();
    while let Some(task) = w.next(Duration::ZERO).unwrap() {
        back.push((task.work().id(), task.work().attempts()));
        w.complete(task, Outcome::Ack(None)).unwrap();
    }
    back.sort();
    assert_eq!(back, vec![(2, 2), (4, 1)]);
    t.clock.advance(Duration::from_secs(61));
    let task = w.next(Duration::ZERO).unwrap().unwrap();
    assert_eq!((task.work().id(), task.work().attempts()), (5, 2));
    // Its second delivery was its last: a failure now is dead.
    let r = w
        .complete(
            task,
            Outcome::Retry {
                delay: None,
                error: "again".into(),
            },
        )
        .unwrap();
    assert_eq!(r.finished, Finished::Retried(JobState::Dead));
}

#[test]
fn a_queue_and_a_group_share_one_worker_and_its_drain_releases_both() {
    let t = test_db();
    let q = t.db.queue("jobs").unwrap();
    q.enqueue_many(
        (0..3).map(|i| serde_json::json!(i)),
        &EnqueueOptions::default(),
    )
    .unwrap();
    let s = t.db.stream("s").unwrap();
    s.publish_many((0..3).map(|i| json(serde_json::json!(i))), None)
        .unwrap();
    let g = s.group("g").unwrap();
    g.create(Start::Beginning, &GroupOptions::default())
        .unwrap();
    let w = worker(&t.db, 4);
    w.register(&q, HandlerOptions::default()).unwrap();
    w.register_group(&g, HandlerOptions::default()).unwrap();
    let err = w.register_group(&g, HandlerOptions::default()).unwrap_err();
    assert_eq!(err.kind(), honker::ErrorKind::InvalidArgument);
    let tasks: Vec<_> = (0..4)
        .map(|_| w.next(Duration::ZERO).unwrap().unwrap())
        .collect();
    let kinds: Vec<bool> = tasks
        .iter()
        .map(|t| matches!(t.work(), Work::Event(..)))
        .collect();
    assert!(kinds.contains(&true) && kinds.contains(&false), "{kinds:?}");
    // Shutdown releases what was claimed and not handed out; drain with no
    // grace releases what still runs: nothing is lost, no delivery counted.
    let report = w.drain(Duration::ZERO).unwrap();
    assert_eq!(report.released, 4);
    for task in tasks {
        assert_eq!(
            w.complete(task, Outcome::Ack(None)).unwrap().finished,
            Finished::Released
        );
    }
    assert_eq!(g.info().unwrap().delivered, 0);
    let again = g.claim("other", 10, None).unwrap().events;
    assert_eq!(again.len(), 3);
    assert!(again.iter().all(|e| e.deliveries == 1));
    assert_eq!(q.stats().unwrap().ready, 3);
}

#[test]
fn a_running_events_lease_is_renewed_while_its_handler_runs() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("w.db")).unwrap();
    let s = db.stream("s").unwrap();
    s.publish(json(serde_json::json!("slow")), &PublishOptions::default())
        .unwrap();
    let g = s.group("g").unwrap();
    g.create(Start::Beginning, &GroupOptions::default())
        .unwrap();
    let w = worker(&db, 1);
    w.register_group(
        &g,
        HandlerOptions {
            lease: Some(Duration::from_millis(300)),
            ..HandlerOptions::default()
        },
    )
    .unwrap();
    let task = w.next(Duration::ZERO).unwrap().unwrap();
    // The handler runs for four leases; `next` (the worker's clock) renews.
    let until = std::time::Instant::now() + Duration::from_millis(1200);
    while std::time::Instant::now() < until {
        assert!(w.next(Duration::from_millis(50)).unwrap().is_none());
        assert!(
            g.claim("thief", 1, None).unwrap().events.is_empty(),
            "the lease lapsed while the handler ran"
        );
    }
    assert_eq!(
        w.complete(task, Outcome::Ack(None)).unwrap().finished,
        Finished::Acked
    );
    assert_eq!(g.info().unwrap().pending, 0);
}

#[test]
fn registering_a_group_that_does_not_exist_is_not_found() {
    let t = test_db();
    let g = t.db.stream("s").unwrap().group("nope").unwrap();
    let err = worker(&t.db, 1)
        .register_group(&g, HandlerOptions::default())
        .unwrap_err();
    assert_eq!(err.kind(), honker::ErrorKind::NotFound);
}
