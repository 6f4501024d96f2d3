//! Unique jobs with modes (issue 56 §4, ADR 37): a dedupe key held while
//! its job is live (`live`, as before), for a period after it completed
//! (`period`), for a window after the enqueue that added it (`throttle`),
//! or replaced while pending (`debounce`); keys made of the payload's
//! digest; each enqueue says which mode acted and names the holder; bad
//! input changes nothing; the SQL function takes the same options;
//! maintenance forgets holds that hold nothing.

mod common;

use std::time::Duration;

use common::{sql, test_db};
use honker::rusqlite::types::Value;
use honker::{EnqueueOptions, ErrorKind, JobState, UniqueMode};
use serde_json::json;

fn unique(key: &str, mode: &str, period: Option<Duration>) -> EnqueueOptions {
    EnqueueOptions {
        dedupe_key: Some(key.into()),
        unique: Some(mode.into()),
        unique_for: period,
        ..Default::default()
    }
}

const HOUR: Duration = Duration::from_secs(3600);

#[test]
fn live_is_the_default_and_says_so() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    let first = q.enqueue(json!(1), &unique("k", "live", None)).unwrap();
    assert_eq!((first.existing, first.unique), (false, None));
    let again = q
        .enqueue(
            json!(2),
            &EnqueueOptions {
                dedupe_key: Some("k".into()),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(
        (again.id, again.existing, again.unique),
        (first.id, true, Some(UniqueMode::Live))
    );
    // Acked, the key is free at once.
    q.claim("w", 1).unwrap().pop().unwrap().ack().unwrap();
    let next = q.enqueue(json!(3), &unique("k", "live", None)).unwrap();
    assert!(!next.existing && next.id != first.id);
}

#[test]
fn period_holds_the_key_after_the_job_completed() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    let o = unique("welcome:1", "period", Some(HOUR));
    let first = q.enqueue(json!({"user": 1}), &o).unwrap();
    // While live: the live index answers.
    let live = q.enqueue(json!({"user": 1}), &o).unwrap();
    assert_eq!((live.id, live.unique), (first.id, Some(UniqueMode::Live)));
    t.clock.advance(Duration::from_secs(600));
    q.claim("w", 1).unwrap().pop().unwrap().ack().unwrap();
    // An hour from the ack, not from the enqueue.
    t.clock.advance(Duration::from_secs(3599));
    let held = q.enqueue(json!({"user": 1}), &o).unwrap();
    assert_eq!(
        (held.id, held.existing, held.unique),
        (first.id, true, Some(UniqueMode::Period))
    );
    assert_eq!(t.count("_honker_jobs"), 0, "nothing was added");
    t.clock.advance(Duration::from_secs(1));
    let after = q.enqueue(json!({"user": 1}), &o).unwrap();
    assert_eq!((after.existing, after.unique), (false, None));
    assert_ne!(after.id, first.id);
    // The new job holds it now; its own ack starts a new hour.
    q.claim("w", 1).unwrap().pop().unwrap().ack().unwrap();
    let again = q.enqueue(json!({"user": 1}), &o).unwrap();
    assert_eq!(
        (again.id, again.unique),
        (after.id, Some(UniqueMode::Period))
    );
}

#[test]
fn period_holds_after_an_ack_that_keeps_the_completed_record() {
    let t = common::test_db_with(honker::Options {
        retention: honker::Retention {
            completed: HOUR,
            ..Default::default()
        },
        ..Default::default()
    });
    let q = t.db.queue("q").unwrap();
    let o = unique("k", "period", Some(HOUR));
    let first = q.enqueue(json!(1), &o).unwrap();
    q.claim("w", 1).unwrap().pop().unwrap().ack().unwrap();
    assert_eq!(q.get_job(first.id).unwrap().state, JobState::Completed);
    let held = q.enqueue(json!(1), &o).unwrap();
    assert_eq!((held.id, held.unique), (first.id, Some(UniqueMode::Period)));
}

#[test]
fn period_frees_the_key_when_the_job_did_not_complete() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    let o = EnqueueOptions {
        max_attempts: Some(1),
        ..unique("k", "period", Some(HOUR))
    };
    let dead = q.enqueue(json!(1), &o).unwrap();
    q.claim("w", 1)
        .unwrap()
        .pop()
        .unwrap()
        .fail("boom")
        .unwrap();
    assert_eq!(q.get_job(dead.id).unwrap().state, JobState::Dead);
    let next = q.enqueue(json!(1), &o).unwrap();
    assert!(!next.existing, "a dead job holds nothing");
    // A cancelled one neither.
    assert!(q.cancel(next.id, Some("not now")).unwrap());
    let third = q.enqueue(json!(1), &o).unwrap();
    assert!(!third.existing);
    // A failed ack (another token) starts no period.
    let job = q.claim("w", 1).unwrap().pop().unwrap();
    let stale = honker::Lease {
        job_id: job.id,
        token: "not-the-token".into(),
    };
    assert_eq!(
        q.ack(&stale, None).unwrap_err().kind(),
        ErrorKind::LeaseLost
    );
    let until: Value = common::scalar(&t.db, "SELECT until FROM _honker_unique");
    assert_eq!(until, Value::Integer(i64::MAX));
}

#[test]
fn throttle_drops_enqueues_within_the_window_of_the_one_it_took() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    let o = unique("reindex", "throttle", Some(Duration::from_secs(60)));
    let first = q.enqueue(json!(1), &o).unwrap();
    q.claim("w", 1).unwrap().pop().unwrap().ack().unwrap();
    // Done at once, and still held for the minute from the enqueue.
    t.clock.advance(Duration::from_secs(59));
    let dropped = q.enqueue(json!(2), &o).unwrap();
    assert_eq!(
        (dropped.id, dropped.existing, dropped.unique),
        (first.id, true, Some(UniqueMode::Throttle))
    );
    t.clock.advance(Duration::from_secs(1));
    let second = q.enqueue(json!(3), &o).unwrap();
    assert!(!second.existing);
    // Past its window but still live: the live job holds it.
    t.clock.advance(Duration::from_secs(120));
    let live = q.enqueue(json!(4), &o).unwrap();
    assert_eq!((live.id, live.unique), (second.id, Some(UniqueMode::Live)));
    assert_eq!(t.count("_honker_jobs"), 1);
}

#[test]
fn debounce_replaces_the_pending_job_and_detaches_a_running_one() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    let o = |delay: u64| EnqueueOptions {
        delay: Some(Duration::from_secs(delay)),
        priority: delay as i32,
        ..unique("doc:7", "debounce", None)
    };
    let first = q.enqueue(json!({"v": 1}), &o(5)).unwrap();
    t.clock.advance(Duration::from_secs(3));
    let again = q.enqueue(json!({"v": 2}), &o(5)).unwrap();
    assert_eq!(
        (again.id, again.existing, again.unique),
        (first.id, true, Some(UniqueMode::Debounce))
    );
    let job = q.get_job(first.id).unwrap();
    assert_eq!(job.payload, json!({"v": 2}).into());
    assert_eq!(job.run_at, 1_700_000_000_000 + 8_000, "its run time moved");
    assert_eq!(t.count("_honker_jobs"), 1);
    // Not due yet at the first enqueue's time.
    t.clock.advance(Duration::from_secs(3));
    assert!(q.claim("w", 1).unwrap().is_empty());
    // A debounce to now makes it ready.
    let now = q.enqueue(json!({"v": 3}), &o(0)).unwrap();
    assert_eq!(now.unique, Some(UniqueMode::Debounce));
    let running = q.claim("w", 1).unwrap().pop().unwrap();
    assert_eq!(running.payload, json!({"v": 3}).into());
    assert_eq!(running.priority, 0);
    // Meeting it running: a new job, which takes the key.
    let fresh = q.enqueue(json!({"v": 4}), &o(0)).unwrap();
    assert_eq!((fresh.existing, fresh.unique), (false, None));
    assert_eq!(q.get_job(running.id).unwrap().dedupe_key, None);
    assert_eq!(
        q.get_job(fresh.id).unwrap().dedupe_key.as_deref(),
        Some("doc:7")
    );
    running.ack().unwrap();
    let last = q.enqueue(json!({"v": 5}), &o(0)).unwrap();
    assert_eq!(
        (last.id, last.unique),
        (fresh.id, Some(UniqueMode::Debounce))
    );
}

#[test]
fn a_debounce_takes_a_running_period_jobs_key_whole() {
    // A period job running; a debounce takes its key for a new job, which
    // completes: the key is free (the running job gave it away, with its
    // period), and the running job's ack counts no period for it.
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    let period = unique("k", "period", Some(HOUR));
    q.enqueue(json!("a"), &period).unwrap();
    let running = q.claim("w", 1).unwrap().pop().unwrap();
    let b = q
        .enqueue(json!("b"), &unique("k", "debounce", None))
        .unwrap();
    assert!(!b.existing);
    q.claim("w", 1).unwrap().pop().unwrap().ack().unwrap();
    let c = q.enqueue(json!("c"), &period).unwrap();
    assert_eq!((c.existing, c.unique), (false, None));
    running.ack().unwrap();
    let d = q.enqueue(json!("d"), &period).unwrap();
    assert_eq!((d.id, d.unique), (c.id, Some(UniqueMode::Live)));
}

#[test]
fn payload_keys_compare_json_values() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    let by_payload = EnqueueOptions {
        dedupe_by_payload: true,
        ..Default::default()
    };
    let a = q
        .enqueue(
            honker::Payload::Json(r#"{"a": 1, "b": [1, 2]}"#.into()),
            &by_payload,
        )
        .unwrap();
    let same = q
        .enqueue(
            honker::Payload::Json(r#"{"b":[1,2.0],"a":1.0}"#.into()),
            &by_payload,
        )
        .unwrap();
    assert_eq!((same.id, same.unique), (a.id, Some(UniqueMode::Live)));
    let other = q
        .enqueue(json!({"a": 2, "b": [1, 2]}), &by_payload)
        .unwrap();
    assert!(!other.existing);
    let bytes = q
        .enqueue(honker::Payload::Bytes(vec![1, 2, 3]), &by_payload)
        .unwrap();
    let bytes_again = q
        .enqueue(honker::Payload::Bytes(vec![1, 2, 3]), &by_payload)
        .unwrap();
    assert_eq!(bytes_again.id, bytes.id);
    // A batch: each payload its own key.
    let batch = q
        .enqueue_many(
            [
                json!({"x": 1}),
                json!({"x": 2}),
                json!({"x": 1}),
                json!({"a": 1, "b": [1, 2]}),
            ],
            &by_payload,
        )
        .unwrap();
    let ids: Vec<(bool, Option<UniqueMode>)> =
        batch.iter().map(|e| (e.existing, e.unique)).collect();
    assert_eq!(
        ids,
        [
            (false, None),
            (false, None),
            (true, Some(UniqueMode::Live)),
            (true, Some(UniqueMode::Live))
        ]
    );
    assert_eq!((batch[2].id, batch[3].id), (batch[0].id, a.id));
    // With a key too: the key and the digest.
    let keyed = EnqueueOptions {
        dedupe_key: Some("tenant-1".into()),
        ..by_payload.clone()
    };
    let k = q.enqueue(json!({"x": 1}), &keyed).unwrap();
    assert!(!k.existing, "another key than the payload's alone");
    let stored = q.get_job(k.id).unwrap().dedupe_key.unwrap();
    assert!(stored.starts_with("tenant-1|payload:"), "{stored}");
    // A payload key under period holds after completion.
    let period = EnqueueOptions {
        unique: Some("period".into()),
        unique_for: Some(HOUR),
        ..by_payload.clone()
    };
    let p = q.enqueue(json!({"once": true}), &period).unwrap();
    let job = q
        .claim("w", 10)
        .unwrap()
        .into_iter()
        .find(|j| j.id == p.id)
        .unwrap();
    job.ack().unwrap();
    let held = q.enqueue(json!({"once": true}), &period).unwrap();
    assert_eq!((held.id, held.unique), (p.id, Some(UniqueMode::Period)));
}

#[test]
fn bad_unique_options_change_nothing() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    q.enqueue(json!(1), &unique("k", "period", Some(HOUR)))
        .unwrap();
    let before = t.snapshot();
    let cases = [
        EnqueueOptions {
            unique: Some("period".into()),
            unique_for: Some(HOUR),
            ..Default::default()
        },
        unique("k", "period", None),
        unique("k", "throttle", None),
        unique("k", "live", Some(HOUR)),
        unique("k", "debounce", Some(HOUR)),
        unique("k", "sometimes", None),
        unique("k", "period", Some(Duration::ZERO)),
        unique("k", "period", Some(Duration::from_secs(400 * 86_400))),
        EnqueueOptions {
            unique_for: Some(HOUR),
            dedupe_key: Some("k".into()),
            ..Default::default()
        },
    ];
    for o in &cases {
        let e = q.enqueue(json!(2), o).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{o:?}: {e}");
    }
    let e = q
        .enqueue_many([json!(1), json!(2)], &unique("k", "live", None))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert_eq!(t.snapshot(), before);
}

#[test]
fn the_sql_function_takes_the_modes() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    let enqueue = |payload: &str, options: &str| -> i64 {
        match sql(
            &t.db,
            &format!("SELECT honker_queue_enqueue('q', '{payload}', '{options}')"),
        ) {
            Value::Integer(id) => id,
            v => panic!("{v:?}"),
        }
    };
    let period = r#"{"dedupe_key": "k", "unique": "period", "unique_for_ms": 60000}"#;
    let first = enqueue("1", period);
    q.claim("w", 1).unwrap().pop().unwrap().ack().unwrap();
    assert_eq!(enqueue("1", period), first, "held for the minute");
    t.clock.advance(Duration::from_secs(60));
    assert_ne!(enqueue("1", period), first);
    q.claim("w", 1).unwrap().pop().unwrap().ack().unwrap();
    let record = |options: &str| -> serde_json::Value {
        match sql(
            &t.db,
            &format!("SELECT honker_queue_enqueue_record('q', '1', '{options}')"),
        ) {
            Value::Text(j) => serde_json::from_str(&j).unwrap(),
            v => panic!("{v:?}"),
        }
    };
    let last = enqueue("1", period);
    assert_eq!(
        record(period),
        json!({"id": last, "existing": true, "unique": "period"})
    );
    let added = record("{}");
    assert_eq!(
        (&added["existing"], &added["unique"]),
        (&json!(false), &json!(null))
    );
    let by_payload = r#"{"dedupe_by_payload": true}"#;
    let a = enqueue(r#"{"a":1,"b":2}"#, by_payload);
    assert_eq!(enqueue(r#"{"b":2,"a":1}"#, by_payload), a);
    for bad in [
        r#"{"unique": "period", "dedupe_key": "k"}"#,
        r#"{"unique": 3, "dedupe_key": "k"}"#,
        r#"{"dedupe_by_payload": "yes"}"#,
        r#"{"unique": "debounce"}"#,
    ] {
        let tx = t.db.transaction().unwrap();
        let e = tx
            .query(
                &format!("SELECT honker_queue_enqueue('q', '1', '{bad}')"),
                [],
            )
            .unwrap_err();
        drop(tx);
        assert!(e.to_string().contains("INVALID_ARGUMENT"), "{bad}: {e}");
    }
}

#[test]
fn maintenance_forgets_holds_that_hold_nothing() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    // One period hold over, one throttle window over, one of a dead job,
    // one still holding.
    q.enqueue(json!(1), &unique("a", "period", Some(HOUR)))
        .unwrap();
    q.claim("w", 1).unwrap().pop().unwrap().ack().unwrap();
    q.enqueue(json!(2), &unique("b", "throttle", Some(HOUR)))
        .unwrap();
    let dead = q
        .enqueue(
            json!(3),
            &EnqueueOptions {
                max_attempts: Some(1),
                ..unique("c", "period", Some(HOUR))
            },
        )
        .unwrap();
    q.enqueue(json!(4), &unique("d", "throttle", Some(3 * HOUR)))
        .unwrap();
    let jobs = q.claim("w", 10).unwrap();
    jobs.into_iter()
        .find(|j| j.id == dead.id)
        .unwrap()
        .fail("boom")
        .unwrap();
    assert_eq!(t.count("_honker_unique"), 4);
    assert_eq!(t.db.maintain().unwrap().unique_holds, 1, "the dead job's");
    t.clock.advance(HOUR);
    assert_eq!(t.db.maintain().unwrap().unique_holds, 2);
    let left: Value = common::scalar(&t.db, "SELECT key FROM _honker_unique");
    assert_eq!(left, Value::Text("d".into()));
}
