//! The queue's lease protocol, driven by a manual clock: claim, ack, retry,
//! fail, release, snooze, heartbeat, dedupe, expiry, priorities, dead letters,
//! results and stats.

mod common;

use std::time::Duration;

use common::{json, test_db};
use honker::{
    Backoff, ClaimOptions, EnqueueOptions, ErrorKind, JobState, Lease, QueueOptions, RetryOptions,
};
use serde_json::json;

fn opts() -> EnqueueOptions {
    EnqueueOptions::default()
}

/// The seed's reference run (shared/seeds, the lease queue).
#[test]
fn seed_reference_run() {
    let t = test_db();
    let q = t.db.queue("jobs").unwrap();
    q.enqueue(json!("send-email"), &opts()).unwrap();
    q.enqueue(json!("resize-image"), &opts()).unwrap();

    let first = q.claim("w", 1).unwrap();
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].payload.as_json().unwrap(), json!("send-email"));
    assert_eq!(first[0].attempts, 1);
    first[0].ack().unwrap();

    let second = q.claim("w", 1).unwrap();
    assert_eq!(second[0].payload.as_json().unwrap(), json!("resize-image"));
    let delayed = RetryOptions {
        delay: Some(Duration::from_secs(60)),
        error: None,
    };
    assert_eq!(second[0].retry(&delayed).unwrap(), JobState::Scheduled);
    assert!(q.claim("w", 1).unwrap().is_empty(), "not due for 60 s");

    // With delay 0, each claim/retry cycle raises attempts by one.
    t.clock.advance(Duration::from_secs(60));
    let now = RetryOptions {
        delay: Some(Duration::ZERO),
        error: None,
    };
    let mut expected = 2;
    let q =
        t.db.queue_with(
            "jobs",
            QueueOptions {
                max_attempts: 3,
                ..QueueOptions::default()
            },
        )
        .unwrap();
    loop {
        let job = q.claim("w", 1).unwrap().pop().expect("job due again");
        assert_eq!(job.attempts, expected);
        if job.attempts == job.max_attempts {
            break;
        }
        assert_eq!(job.retry(&now).unwrap(), JobState::Ready);
        expected += 1;
    }
    assert_eq!(expected, 3, "the job's max_attempts (3) was reached");
}

#[test]
fn lapsed_lease_is_reclaimed_then_dead_lettered() {
    let t = test_db();
    let q =
        t.db.queue_with(
            "q",
            QueueOptions {
                lease: Duration::from_secs(30),
                max_attempts: 2,
                ..QueueOptions::default()
            },
        )
        .unwrap();
    let id = q.enqueue(json!({"n": 1}), &opts()).unwrap().id;

    let a = q.claim("crashy", 1).unwrap().pop().unwrap();
    assert_eq!(a.attempts, 1);
    t.clock.advance(Duration::from_secs(29));
    assert!(q.claim("other", 1).unwrap().is_empty(), "lease still held");
    t.clock.advance(Duration::from_secs(2));
    let b = q.claim("other", 1).unwrap().pop().expect("reclaimed");
    assert_eq!((b.id, b.attempts), (id, 2));
    assert_ne!(a.lease.token, b.lease.token);

    // The first worker's token is stale now.
    assert_eq!(a.ack().unwrap_err().kind(), ErrorKind::LeaseLost);

    // Second (last) attempt lapses too: dead letter, with its last error.
    t.clock.advance(Duration::from_secs(31));
    assert!(q.claim("third", 1).unwrap().is_empty());
    let info = q.get_job(id).unwrap();
    assert_eq!(info.state, JobState::Dead);
    assert_eq!(info.attempts, 2);
    assert_eq!(
        info.last_error.as_deref(),
        Some("max attempts exceeded"),
        "Honker's words"
    );
    assert_eq!(q.stats().unwrap().dead, 1);
}

#[test]
fn stale_token_changes_nothing() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    q.enqueue(json!(1), &opts()).unwrap();
    let job = q.claim("w", 1).unwrap().pop().unwrap();
    let forged = Lease {
        job_id: job.id,
        token: "0".repeat(32),
    };
    let before = t.snapshot();
    let r = RetryOptions::default();
    assert_eq!(
        q.ack(&forged, None).unwrap_err().kind(),
        ErrorKind::LeaseLost
    );
    assert_eq!(
        q.retry(&forged, &r).unwrap_err().kind(),
        ErrorKind::LeaseLost
    );
    assert_eq!(
        q.fail(&forged, "x").unwrap_err().kind(),
        ErrorKind::LeaseLost
    );
    assert_eq!(q.release(&forged).unwrap_err().kind(), ErrorKind::LeaseLost);
    assert_eq!(
        q.heartbeat(&forged, None).unwrap_err().kind(),
        ErrorKind::LeaseLost
    );
    assert_eq!(
        q.snooze(&forged, Duration::from_secs(1))
            .unwrap_err()
            .kind(),
        ErrorKind::LeaseLost
    );
    assert_eq!(t.snapshot(), before);

    // Unknown ids are NOT_FOUND; ids of another queue too.
    let unknown = Lease {
        job_id: 999,
        token: job.lease.token.clone(),
    };
    assert_eq!(
        q.ack(&unknown, None).unwrap_err().kind(),
        ErrorKind::NotFound
    );
    let other = t.db.queue("other").unwrap();
    assert_eq!(
        other.ack(&job.lease, None).unwrap_err().kind(),
        ErrorKind::NotFound
    );
    assert_eq!(t.snapshot(), before);
    job.ack().unwrap();
    // Acked: the token is spent.
    assert_eq!(job.ack().unwrap_err().kind(), ErrorKind::LeaseLost);
}

#[test]
fn retry_uses_the_producers_backoff_and_dead_letters_with_last_error() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    let o = EnqueueOptions {
        max_attempts: Some(3),
        backoff: Some(Backoff {
            base: Duration::from_secs(10),
            max: Duration::from_secs(15),
            jitter: 0.0,
        }),
        ..opts()
    };
    let id = q.enqueue(json!("x"), &o).unwrap().id;
    let err = |s: &str| RetryOptions {
        delay: None,
        error: Some(s.into()),
    };

    let j = q.claim("w", 1).unwrap().pop().unwrap();
    assert_eq!(j.retry(&err("boom 1")).unwrap(), JobState::Scheduled);
    let info = q.get_job(id).unwrap();
    assert_eq!(info.run_at, t.clock_now() + 10_000, "base delay");
    t.clock.advance(Duration::from_millis(9_999));
    assert!(q.claim("w", 1).unwrap().is_empty());
    t.clock.advance(Duration::from_millis(1));

    let j = q.claim("w", 1).unwrap().pop().unwrap();
    assert_eq!(j.attempts, 2);
    j.retry(&err("boom 2")).unwrap();
    assert_eq!(
        q.get_job(id).unwrap().run_at,
        t.clock_now() + 15_000,
        "capped"
    );
    t.clock.advance(Duration::from_secs(15));

    let j = q.claim("w", 1).unwrap().pop().unwrap();
    assert_eq!(j.attempts, 3);
    assert_eq!(j.retry(&err("boom 3")).unwrap(), JobState::Dead);
    let dead = q.dead_letters(0, 10).unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].last_error.as_deref(), Some("boom 3"));
    assert_eq!(dead[0].attempts, 3);
}

#[test]
fn jittered_backoff_stays_within_bounds() {
    let t = test_db();
    let q =
        t.db.queue_with(
            "q",
            QueueOptions {
                max_attempts: 50,
                backoff: Backoff {
                    base: Duration::from_secs(8),
                    max: Duration::from_secs(3600),
                    jitter: 0.5,
                },
                ..QueueOptions::default()
            },
        )
        .unwrap();
    for _ in 0..20 {
        q.enqueue(json!(1), &opts()).unwrap();
    }
    for j in q.claim("w", 20).unwrap() {
        j.retry(&RetryOptions::default()).unwrap();
        let delay = q.get_job(j.id).unwrap().run_at - t.clock_now();
        assert!((4_000..=8_000).contains(&delay), "delay {delay}");
    }
}

#[test]
fn fail_release_snooze_and_heartbeat() {
    let t = test_db();
    let q =
        t.db.queue_with(
            "q",
            QueueOptions {
                lease: Duration::from_secs(10),
                ..QueueOptions::default()
            },
        )
        .unwrap();
    let a = q.enqueue(json!("a"), &opts()).unwrap().id;

    // release: back at once, attempt not consumed.
    let j = q.claim("w", 1).unwrap().pop().unwrap();
    j.release().unwrap();
    let info = q.get_job(a).unwrap();
    assert_eq!((info.state, info.attempts), (JobState::Ready, 0));

    // snooze: later, attempt not consumed.
    let j = q.claim("w", 1).unwrap().pop().unwrap();
    assert_eq!(j.attempts, 1);
    assert_eq!(
        j.snooze(Duration::from_secs(5)).unwrap(),
        JobState::Scheduled
    );
    assert!(q.claim("w", 1).unwrap().is_empty());
    t.clock.advance(Duration::from_secs(5));
    let j = q.claim("w", 1).unwrap().pop().unwrap();
    assert_eq!(j.attempts, 1);

    // heartbeat: the lease outlives its original expiry.
    t.clock.advance(Duration::from_secs(8));
    let until = j.heartbeat(None).unwrap();
    assert_eq!(until, t.clock_now() + 10_000);
    t.clock.advance(Duration::from_secs(8));
    assert!(q.claim("thief", 1).unwrap().is_empty(), "heartbeat kept it");
    assert_eq!(
        q.get_job(a).unwrap().lease_expires_at,
        Some(until),
        "running job shows its lease"
    );

    // fail: dead now, whatever attempts remain.
    j.fail("bad input").unwrap();
    let info = q.get_job(a).unwrap();
    assert_eq!(info.state, JobState::Dead);
    assert_eq!(info.last_error.as_deref(), Some("bad input"));
}

#[test]
fn claims_by_priority_then_oldest() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    let p = |priority| EnqueueOptions { priority, ..opts() };
    let low = q.enqueue(json!("low"), &p(0)).unwrap().id;
    t.clock.advance(Duration::from_millis(1));
    let high1 = q.enqueue(json!("high1"), &p(5)).unwrap().id;
    t.clock.advance(Duration::from_millis(1));
    let high2 = q.enqueue(json!("high2"), &p(5)).unwrap().id;
    let scheduled_high = q
        .enqueue(
            json!("later"),
            &EnqueueOptions {
                delay: Some(Duration::from_secs(1)),
                priority: 9,
                ..opts()
            },
        )
        .unwrap()
        .id;
    let ids: Vec<i64> = q.claim("w", 10).unwrap().iter().map(|j| j.id).collect();
    assert_eq!(ids, vec![high1, high2, low]);
    t.clock.advance(Duration::from_secs(1));
    assert_eq!(q.claim("w", 10).unwrap()[0].id, scheduled_high);
}

#[test]
fn queues_are_isolated() {
    let t = test_db();
    let a = t.db.queue("a").unwrap();
    let b = t.db.queue("b").unwrap();
    a.enqueue(json!(1), &opts()).unwrap();
    assert!(b.claim("w", 1).unwrap().is_empty());
    assert_eq!(a.claim("w", 1).unwrap().len(), 1);
}

#[test]
fn dedupe_key_returns_the_live_job() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    let o = EnqueueOptions {
        dedupe_key: Some("order-42".into()),
        ..opts()
    };
    let first = q.enqueue(json!({"v": 1}), &o).unwrap();
    assert!(!first.existing);
    let again = q.enqueue(json!({"v": 2}), &o).unwrap();
    assert_eq!((again.id, again.existing), (first.id, true));
    assert_eq!(t.count("_honker_jobs"), 1);

    // Still held while running; free once the job is done.
    let j = q.claim("w", 1).unwrap().pop().unwrap();
    assert!(q.enqueue(json!(3), &o).unwrap().existing);
    j.ack().unwrap();
    let fresh = q.enqueue(json!(4), &o).unwrap();
    assert!(!fresh.existing);
    assert_ne!(fresh.id, first.id);

    // The same key in another queue is a different key.
    let other = t.db.queue("other").unwrap();
    assert!(!other.enqueue(json!(5), &o).unwrap().existing);
}

#[test]
fn dedupe_is_race_free_across_connections() {
    let t = test_db();
    let dbs: Vec<_> = (0..4).map(|_| t.reopen()).collect();
    let handles: Vec<_> = dbs
        .into_iter()
        .map(|db| {
            std::thread::spawn(move || {
                let q = db.queue("q").unwrap();
                let o = EnqueueOptions {
                    dedupe_key: Some("k".into()),
                    ..EnqueueOptions::default()
                };
                (0..50)
                    .map(|_| q.enqueue(json!(1), &o).unwrap().id)
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let ids: std::collections::HashSet<i64> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    assert_eq!(ids.len(), 1);
    assert_eq!(t.count("_honker_jobs"), 1);
}

#[test]
fn enqueue_many_is_all_or_nothing() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    let ids = q
        .enqueue_many((0..5).map(|i| json!({ "i": i })), &opts())
        .unwrap();
    assert_eq!(ids.len(), 5);
    assert!(ids.windows(2).all(|w| w[0].id < w[1].id));

    let before = t.snapshot();
    let bad = vec![
        json(json!(1)),
        honker::Payload::Json("{not json".into()),
        json(json!(3)),
    ];
    let err = q.enqueue_many(bad, &opts()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert_eq!(t.snapshot(), before);
}

/// A batch is inserted 32 rows, then 8, then one per statement: every size
/// crosses each path, and each returned id is the job holding that payload
/// with the batch's options (ids are derived from the last row's, so a
/// mismatch would hand out another job's id).
#[test]
fn enqueue_many_hands_each_payload_its_own_id_at_every_batch_size() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    let other = t.db.queue("other").unwrap();
    let o = EnqueueOptions {
        priority: 5,
        delay: Some(Duration::from_secs(10)),
        max_attempts: Some(7),
        expires: Some(Duration::from_secs(3600)),
        ..opts()
    };
    let mut all = Vec::new();
    for (round, n) in [1usize, 7, 8, 9, 32, 33, 45, 77, 1000]
        .into_iter()
        .enumerate()
    {
        // Another queue's job in between, and one acked and gone: ids stay
        // unique and each batch's consecutive.
        other.enqueue(json!({ "between": round }), &opts()).unwrap();
        let done = q
            .enqueue_many((0..n).map(|i| json!({ "round": round, "i": i })), &o)
            .unwrap();
        assert_eq!(done.len(), n);
        for (i, e) in done.iter().enumerate() {
            assert!(!e.existing);
            let info = q.get_job(e.id).unwrap();
            assert_eq!(
                info.payload.as_json().unwrap(),
                json!({ "round": round, "i": i })
            );
            assert_eq!(info.queue, "q");
            assert_eq!(info.state, JobState::Scheduled);
            assert_eq!((info.priority, info.max_attempts), (5, 7));
            assert!(info.expires_at.is_some());
        }
        all.extend(done.iter().map(|e| e.id));
    }
    assert!(
        all.windows(2).all(|w| w[0] < w[1]),
        "ids grow in payload order"
    );
    assert_eq!(q.stats().unwrap().scheduled as usize, all.len());
}

#[test]
fn expired_jobs_never_run() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    let id = q
        .enqueue(
            json!("flash sale"),
            &EnqueueOptions {
                expires: Some(Duration::from_secs(60)),
                ..opts()
            },
        )
        .unwrap()
        .id;
    t.clock.advance(Duration::from_secs(61));
    assert!(q.claim("w", 1).unwrap().is_empty());
    let info = q.get_job(id).unwrap();
    assert_eq!(info.state, JobState::Expired);
    assert_eq!(q.stats().unwrap().expired, 1);

    // An expiry that ends before the job is due is refused.
    let err = q
        .enqueue(
            json!(1),
            &EnqueueOptions {
                delay: Some(Duration::from_secs(10)),
                expires: Some(Duration::from_secs(5)),
                ..opts()
            },
        )
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
}

#[test]
fn cancel_leaves_a_record_and_fences_the_worker() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    let waiting = q
        .enqueue(
            json!(1),
            &EnqueueOptions {
                delay: Some(Duration::from_secs(100)),
                ..opts()
            },
        )
        .unwrap()
        .id;
    assert!(q.cancel(waiting, Some("customer left")).unwrap());
    let info = q.get_job(waiting).unwrap();
    assert_eq!(info.state, JobState::Cancelled);
    assert_eq!(info.last_error.as_deref(), Some("customer left"));
    assert!(!q.cancel(waiting, None).unwrap(), "already finished");

    q.enqueue(json!(2), &opts()).unwrap();
    let running = q.claim("w", 1).unwrap().pop().unwrap();
    assert!(q.cancel(running.id, None).unwrap());
    assert_eq!(running.ack().unwrap_err().kind(), ErrorKind::LeaseLost);

    assert_eq!(
        q.cancel(12345, None).unwrap_err().kind(),
        ErrorKind::NotFound
    );
    assert_eq!(
        t.db.queue("other")
            .unwrap()
            .cancel(waiting, None)
            .unwrap_err()
            .kind(),
        ErrorKind::NotFound
    );
}

#[test]
fn get_job_sees_every_state() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    let ready = q.enqueue(json!(1), &opts()).unwrap().id;
    let d = EnqueueOptions {
        delay: Some(Duration::from_secs(5)),
        ..opts()
    };
    let scheduled = q.enqueue(json!(2), &d).unwrap().id;
    assert_eq!(q.get_job(ready).unwrap().state, JobState::Ready);
    assert_eq!(q.get_job(scheduled).unwrap().state, JobState::Scheduled);
    let running = q.claim("w", 1).unwrap().pop().unwrap();
    let info = q.get_job(running.id).unwrap();
    assert_eq!(info.state, JobState::Running);
    assert_eq!(info.worker_id.as_deref(), Some("w"));
    running.fail("x").unwrap();
    assert_eq!(q.get_job(ready).unwrap().state, JobState::Dead);
    t.clock.advance(Duration::from_secs(5));
    assert_eq!(
        q.get_job(scheduled).unwrap().state,
        JobState::Ready,
        "due scheduled jobs report ready before promotion"
    );
    assert_eq!(q.get_job(999).unwrap_err().kind(), ErrorKind::NotFound);
}

#[test]
fn acked_jobs_are_archived_when_retention_asks() {
    let t = common::test_db_with(honker::Options {
        retention: honker::Retention {
            completed: Duration::from_secs(3600),
            ..honker::Retention::default()
        },
        ..honker::Options::default()
    });
    let q = t.db.queue("q").unwrap();
    let id = q.enqueue(json!(1), &opts()).unwrap().id;
    q.claim("w", 1).unwrap()[0].ack().unwrap();
    let info = q.get_job(id).unwrap();
    assert_eq!(info.state, JobState::Completed);
    assert_eq!(q.stats().unwrap().completed, 1);
}

#[test]
fn dead_letters_page_requeue_and_purge() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    let one = EnqueueOptions {
        max_attempts: Some(1),
        ..opts()
    };
    for i in 0..5 {
        q.enqueue(json!(i), &one).unwrap();
    }
    for j in q.claim("w", 5).unwrap() {
        j.retry(&RetryOptions::default()).unwrap();
    }
    let page1 = q.dead_letters(0, 2).unwrap();
    let page2 = q.dead_letters(page1[1].id, 2).unwrap();
    let page3 = q.dead_letters(page2[1].id, 2).unwrap();
    assert_eq!((page1.len(), page2.len(), page3.len()), (2, 2, 1));

    // Requeue one: attempts reset, claimable again, same id.
    let id = page1[0].id;
    assert!(q.requeue_dead(id).unwrap());
    assert!(!q.requeue_dead(id).unwrap(), "no longer dead");
    let info = q.get_job(id).unwrap();
    assert_eq!((info.state, info.attempts), (JobState::Ready, 0));
    let j = q.claim("w", 1).unwrap().pop().unwrap();
    assert_eq!((j.id, j.attempts), (id, 1));

    // Purge by age, then requeue the rest.
    t.clock.advance(Duration::from_secs(100));
    assert_eq!(q.purge_dead(Some(Duration::from_secs(200))).unwrap(), 0);
    assert_eq!(q.purge_dead(Some(Duration::from_secs(50))).unwrap(), 4);
    assert_eq!(q.requeue_all_dead().unwrap(), 0);
    assert_eq!(q.stats().unwrap().dead, 0);
}

#[test]
fn requeue_all_skips_jobs_whose_key_is_taken() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    let keyed = |k: &str| EnqueueOptions {
        dedupe_key: Some(k.into()),
        max_attempts: Some(1),
        ..opts()
    };
    q.enqueue(json!(1), &keyed("a")).unwrap();
    q.enqueue(json!(2), &keyed("b")).unwrap();
    for j in q.claim("w", 2).unwrap() {
        j.fail("x").unwrap();
    }
    let holder = q.enqueue(json!(3), &keyed("a")).unwrap();
    assert!(!holder.existing);
    assert_eq!(q.requeue_all_dead().unwrap(), 1);
    assert_eq!(q.stats().unwrap().dead, 1, "key a is held: stays dead");
}

#[test]
fn results_are_saved_with_the_ack() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    let id = q.enqueue(json!(2), &opts()).unwrap().id;
    assert_eq!(q.get_result(id).unwrap(), None);
    let j = q.claim("w", 1).unwrap().pop().unwrap();
    j.ack_with_result(json!({"squared": 4})).unwrap();
    assert_eq!(
        q.get_result(id).unwrap().unwrap().as_json().unwrap(),
        json!({"squared": 4})
    );
    assert_eq!(
        q.wait_result(id, Duration::from_secs(1))
            .unwrap()
            .unwrap()
            .as_json()
            .unwrap()["squared"],
        4
    );

    // An oversized result is refused and the job stays leased.
    let big = common::test_db_with(honker::Options {
        max_payload_bytes: 16,
        ..honker::Options::default()
    });
    let bq = big.db.queue("q").unwrap();
    bq.enqueue(json!(1), &opts()).unwrap();
    let j = bq.claim("w", 1).unwrap().pop().unwrap();
    let err = j.ack_with_result(json!("x".repeat(100))).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert_eq!(bq.get_job(j.id).unwrap().state, JobState::Running);
}

/// An ack removes the job and saves its result in one commit; a waiter that
/// reads between them in the wrong order would see "gone, no result".
#[test]
fn wait_result_never_misses_a_result_saved_with_the_ack() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    for i in 0..300 {
        let id = q.enqueue(json!(i), &opts()).unwrap().id;
        let q2 = q.clone();
        let waiter = std::thread::spawn(move || q2.wait_result(id, Duration::from_secs(30)));
        let j = q.claim("w", 1).unwrap().pop().unwrap();
        j.ack_with_result(json!(i)).unwrap();
        let got = waiter.join().unwrap().unwrap();
        assert_eq!(
            got.map(|r| r.as_json().unwrap()),
            Some(json!(i)),
            "round {i}"
        );
    }
}

#[test]
fn wait_result_wakes_on_ack_from_another_thread_and_times_out() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    let id = q.enqueue(json!(1), &opts()).unwrap().id;
    let q2 = q.clone();
    let waiter = std::thread::spawn(move || q2.wait_result(id, Duration::from_secs(30)).unwrap());
    let j = q.claim("w", 1).unwrap().pop().unwrap();
    j.ack_with_result(json!("done")).unwrap();
    assert_eq!(
        waiter.join().unwrap().unwrap().as_json().unwrap(),
        json!("done")
    );

    let other = q.enqueue(json!(2), &opts()).unwrap().id;
    let err = q.wait_result(other, Duration::from_millis(20)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout);
    // A job that finished without a result: None at once.
    let j = q.claim("w", 1).unwrap().pop().unwrap();
    j.fail("x").unwrap();
    assert_eq!(q.wait_result(other, Duration::from_secs(30)).unwrap(), None);
}

#[test]
fn stats_count_every_state() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    for _ in 0..3 {
        q.enqueue(json!(1), &opts()).unwrap();
    }
    let later = EnqueueOptions {
        delay: Some(Duration::from_secs(10)),
        ..opts()
    };
    q.enqueue(json!(1), &later).unwrap();
    t.clock.advance(Duration::from_secs(2));
    let j = q
        .claim_with(
            "w",
            1,
            &ClaimOptions {
                lease: Some(Duration::from_secs(1)),
                ..ClaimOptions::default()
            },
        )
        .unwrap();
    j[0].fail("x").unwrap();
    q.claim("w", 1).unwrap();
    let s = q.stats().unwrap();
    assert_eq!((s.ready, s.scheduled, s.running, s.dead), (1, 1, 1, 1));
    assert_eq!(s.oldest_ready_age_ms, Some(2000));
}

trait ClockNow {
    fn clock_now(&self) -> i64;
}

impl ClockNow for common::TestDb {
    fn clock_now(&self) -> i64 {
        use honker::Clock;
        self.clock.now_ms()
    }
}

#[test]
fn ack_many_acks_held_leases_and_skips_stale_ones() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    q.enqueue_many((0..4).map(|i| json!(i)), &opts()).unwrap();
    let jobs = q.claim("w", 4).unwrap();
    q.cancel(jobs[0].id, None).unwrap();
    let mut leases: Vec<Lease> = jobs.iter().map(|j| j.lease.clone()).collect();
    leases.push(Lease {
        job_id: jobs[1].id,
        token: "stale".into(),
    });
    assert_eq!(q.ack_many(&leases).unwrap(), 3);
    assert_eq!(t.count("_honker_jobs"), 0);
    let unknown = [Lease {
        job_id: 777,
        token: "x".into(),
    }];
    assert_eq!(
        q.ack_many(&unknown).unwrap_err().kind(),
        ErrorKind::NotFound
    );
    assert_eq!(q.ack_many(&[]).unwrap(), 0);
    let too_many = vec![leases[0].clone(); honker::limits::MAX_BATCH + 1];
    assert_eq!(
        q.ack_many(&too_many).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
}

/// A claim leases its jobs 32, then 8, to a statement (then one by one): at
/// every size each job gets its own token and attempt, and `ack_many` acks
/// the held leases, passes over lost ones (cancelled, or a stale token)
/// leaving them as they are, and fails on a job of another queue, changing
/// nothing.
#[test]
fn claims_lease_by_batches_and_ack_many_acks_held_skips_lost_refuses_foreign() {
    for n in [8usize, 9, 31, 32, 33, 41, 77] {
        let t = test_db();
        let q = t.db.queue("q").unwrap();
        q.enqueue_many((0..n).map(|i| json!(i)), &opts()).unwrap();
        let jobs = q.claim("w", n).unwrap();
        // Leased by the claim's batch statements too: each its own token.
        let tokens: std::collections::HashSet<&str> =
            jobs.iter().map(|j| j.lease.token.as_str()).collect();
        assert_eq!((jobs.len(), tokens.len()), (n, n));
        for j in &jobs {
            let info = q.get_job(j.id).unwrap();
            assert_eq!(
                (info.state, info.attempts, j.attempts),
                (JobState::Running, 1, 1)
            );
            assert_eq!(info.worker_id.as_deref(), Some("w"));
            assert_eq!(info.lease_expires_at, Some(j.lease_expires_at));
        }
        let (mut leases, mut lost, mut stale) = (Vec::new(), 0, 0);
        for (i, j) in jobs.iter().enumerate() {
            let mut lease = j.lease.clone();
            if i % 5 == 1 {
                q.cancel(j.id, None).unwrap();
                lost += 1;
            } else if i % 5 == 3 {
                lease.token = "stale".into();
                lost += 1;
                stale += 1;
            }
            leases.push(lease);
        }
        assert_eq!(q.ack_many(&leases).unwrap(), n - lost, "batch of {n}");
        assert_eq!(
            t.count("_honker_jobs") as usize,
            stale,
            "the stale ones still run"
        );
        assert_eq!(q.stats().unwrap().running as usize, stale);

        // Held leases with one job of another queue among them: NOT_FOUND,
        // and none of the held ones is acked.
        let other = t.db.queue("other").unwrap();
        other.enqueue(json!("x"), &opts()).unwrap();
        let foreign = other.claim("w", 1).unwrap().remove(0);
        q.enqueue_many((0..n).map(|i| json!(i)), &opts()).unwrap();
        let mut held: Vec<Lease> = q
            .claim("w", n)
            .unwrap()
            .into_iter()
            .map(|j| j.lease)
            .collect();
        held.insert(n / 2, foreign.lease.clone());
        let before = t.snapshot();
        assert_eq!(q.ack_many(&held).unwrap_err().kind(), ErrorKind::NotFound);
        assert_eq!(t.snapshot(), before, "batch of {n}: nothing changed");
        held.remove(n / 2);
        assert_eq!(q.ack_many(&held).unwrap(), n);
    }
}

/// The hook runs when a wait finds work, before the claim commits: the job is
/// still ready when it runs, and a wait that finds nothing never calls it.
#[test]
fn claim_with_hook_runs_between_finding_work_and_claiming_it() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    let wait = |ms| ClaimOptions {
        wait: Duration::from_millis(ms),
        ..ClaimOptions::default()
    };
    let mut calls = 0;
    let none = q
        .claim_with_hook("w", 1, &wait(50), &mut || calls += 1)
        .unwrap();
    assert!(none.is_empty());
    assert_eq!(calls, 0);

    let producer = {
        let q = q.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            q.enqueue(json!("late"), &opts()).unwrap().id
        })
    };
    let mut ready_at_hook = Vec::new();
    let jobs = q
        .claim_with_hook("w", 1, &wait(5_000), &mut || {
            ready_at_hook.push(q.stats().unwrap().ready);
        })
        .unwrap();
    let id = producer.join().unwrap();
    assert_eq!(jobs.iter().map(|j| j.id).collect::<Vec<_>>(), vec![id]);
    assert_eq!(ready_at_hook, vec![1]);
    jobs[0].ack().unwrap();
}

#[test]
fn a_job_is_rebuilt_from_its_lease_in_another_process() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    let id = q
        .enqueue(
            serde_json::json!({"n": 1}),
            &honker::EnqueueOptions::default(),
        )
        .unwrap()
        .id;
    let claimed = q.claim("w", 1).unwrap().remove(0);
    let other = t.reopen();
    let oq = other.queue("q").unwrap();
    let job = oq.job(claimed.lease.clone()).unwrap();
    assert_eq!(job.id, id);
    assert_eq!(job.payload, claimed.payload);
    assert_eq!(job.attempts, 1);
    assert_eq!(job.worker_id, "w");
    assert_eq!(job.lease_expires_at, claimed.lease_expires_at);
    job.ack().unwrap();
    // Acked and removed, or cancelled (a finished record): not leased, as a
    // verb with the lease would say; never existed: not found; bad input:
    // invalid.
    let err = oq.job(claimed.lease.clone()).unwrap_err();
    assert_eq!(err.kind(), honker::ErrorKind::LeaseLost);
    let id2 = q
        .enqueue(serde_json::json!(2), &honker::EnqueueOptions::default())
        .unwrap()
        .id;
    let second = q.claim("w", 1).unwrap().remove(0);
    assert!(q.cancel(id2, Some("operator")).unwrap());
    let err = oq.job(second.lease.clone()).unwrap_err();
    assert_eq!(err.kind(), honker::ErrorKind::LeaseLost);
    assert!(err.message().contains("cancelled"), "{}", err.message());
    let err = oq
        .job(honker::Lease {
            job_id: id2 + 100,
            token: "t".into(),
        })
        .unwrap_err();
    assert_eq!(err.kind(), honker::ErrorKind::NotFound);
    let err = oq
        .job(honker::Lease {
            job_id: id,
            token: String::new(),
        })
        .unwrap_err();
    assert_eq!(err.kind(), honker::ErrorKind::InvalidArgument);
}

#[test]
fn a_job_rebuilt_with_a_stale_token_changes_nothing() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    q.enqueue(serde_json::json!(1), &honker::EnqueueOptions::default())
        .unwrap();
    let claimed = q.claim("w", 1).unwrap().remove(0);
    let stale = q
        .job(honker::Lease {
            job_id: claimed.id,
            token: "not-the-token".into(),
        })
        .unwrap();
    assert_eq!(
        stale.ack().unwrap_err().kind(),
        honker::ErrorKind::LeaseLost
    );
    assert_eq!(q.stats().unwrap().running, 1);
    claimed.ack().unwrap();
}

/// Issue 53 §4: a lease given to one process's handle was not seen by a
/// worker elsewhere, which claimed with the default 60 s (after a kill -9
/// its jobs stayed running a minute). A queue's settings live in the file:
/// every handle made afterwards, in any process, uses them where it was
/// not given options of its own.
#[test]
fn a_queues_settings_are_stored_in_the_file_for_every_process() {
    let t = common::test_db();
    let emails = t.db.queue("emails").unwrap();
    assert_eq!(emails.settings().unwrap(), honker::QueueSettings::default());
    emails
        .configure(&honker::QueueSettings {
            lease: Some(Duration::from_secs(5)),
            max_attempts: Some(7),
            backoff_base: Some(Duration::from_millis(250)),
            ..Default::default()
        })
        .unwrap();
    // Another process (another open of the file) names only the queue.
    let other = t.reopen();
    let q = other.queue("emails").unwrap();
    assert_eq!(q.options().lease, Duration::from_secs(5));
    assert_eq!(q.options().max_attempts, 7);
    assert_eq!(q.options().backoff.base, Duration::from_millis(250));
    assert_eq!(
        q.options().backoff.max,
        Duration::from_secs(3600),
        "default kept"
    );
    let id = q
        .enqueue(serde_json::json!(1), &Default::default())
        .unwrap()
        .id;
    let job = q.claim("w", 1).unwrap().pop().unwrap();
    assert_eq!(job.id, id);
    assert_eq!(
        job.lease_expires_at,
        honker::Clock::now_ms(&t.clock) + 5_000
    );
    assert_eq!(job.max_attempts, 7);
    // A handle's own option wins over the stored one.
    let given = other
        .queue_given(
            "emails",
            &honker::QueueSettings {
                lease: Some(Duration::from_secs(2)),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(
        (given.options().lease, given.options().max_attempts),
        (Duration::from_secs(2), 7)
    );
    // A later configure keeps what it does not name; bad input changes nothing.
    emails
        .configure(&honker::QueueSettings {
            max_attempts: Some(2),
            ..Default::default()
        })
        .unwrap();
    for bad in [
        honker::QueueSettings {
            lease: Some(Duration::ZERO),
            ..Default::default()
        },
        honker::QueueSettings {
            max_attempts: Some(0),
            ..Default::default()
        },
        honker::QueueSettings {
            backoff_max: Some(Duration::from_millis(100)),
            ..Default::default()
        },
    ] {
        let e = emails.configure(&bad).unwrap_err();
        assert_eq!(e.kind(), honker::ErrorKind::InvalidArgument, "{e}");
    }
    let s = other.queue("emails").unwrap().settings().unwrap();
    assert_eq!(
        (s.lease, s.max_attempts, s.backoff_base, s.backoff_max),
        (
            Some(Duration::from_secs(5)),
            Some(2),
            Some(Duration::from_millis(250)),
            None
        )
    );
    // Other queues are untouched; clearing brings the defaults back.
    assert_eq!(
        other.queue("invoices").unwrap().options().lease,
        Duration::from_secs(60)
    );
    emails.clear_settings().unwrap();
    assert_eq!(
        other.queue("emails").unwrap().options().lease,
        Duration::from_secs(60)
    );
}
