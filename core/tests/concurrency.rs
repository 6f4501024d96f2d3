//! Concurrency caps (ADR 35): a queue's `max_running` and
//! `max_running_per_key` hold for every handle and process, counted in the
//! claim's own transaction as unexpired leases; a lapsed lease frees its
//! slot; a waiting claim on a capped queue wakes on the commit that frees a
//! slot, or when a lease ends; bad input changes nothing; the SQL functions
//! set the caps inside the caller's transaction. The multi-process proof
//! (four processes in three languages, SIGKILLs, a checker sampling the
//! leases) is the interop scenario `caps`.

mod common;

use std::time::{Duration, Instant};

use common::{code, sql, test_db};
use honker::rusqlite::types::Value;
use honker::{ClaimOptions, Concurrency, Database, EnqueueOptions, ErrorKind};
use serde_json::json;

fn keyed(k: &str) -> EnqueueOptions {
    EnqueueOptions {
        concurrency_key: Some(k.into()),
        ..Default::default()
    }
}

fn caps(max_running: Option<u32>, per_key: Option<u32>) -> Concurrency {
    Concurrency {
        max_running,
        max_running_per_key: per_key,
    }
}

fn keys_of(q: &honker::Queue, jobs: &[honker::Job]) -> Vec<Option<String>> {
    jobs.iter()
        .map(|j| q.get_job(j.id).unwrap().concurrency_key)
        .collect()
}

#[test]
fn a_queue_cap_holds_across_handles_and_frees_on_ack() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    for i in 0..6 {
        q.enqueue(json!(i), &EnqueueOptions::default()).unwrap();
    }
    q.limit_concurrency(&caps(Some(2), None)).unwrap();
    assert_eq!(q.concurrency().unwrap(), caps(Some(2), None));

    let first = q.claim("w", 10).unwrap();
    assert_eq!(first.len(), 2, "a batch claim stops at the cap");
    let elsewhere = t.reopen();
    let other = elsewhere.queue("q").unwrap();
    assert!(
        other.claim("w2", 10).unwrap().is_empty(),
        "another open sees it"
    );

    q.ack(&first[0].lease, None).unwrap();
    assert_eq!(other.claim("w2", 10).unwrap().len(), 1);
    assert!(q.claim("w", 10).unwrap().is_empty());

    let stats = q.stats().unwrap();
    assert_eq!((stats.running, stats.ready), (2, 3));
    assert_eq!(
        (stats.max_running, stats.max_running_per_key),
        (Some(2), None)
    );

    // Lifted: the rest start.
    q.limit_concurrency(&Concurrency::default()).unwrap();
    assert_eq!(q.claim("w", 10).unwrap().len(), 3);
    assert_eq!(q.stats().unwrap().max_running, None);
}

#[test]
fn a_lapsed_lease_frees_its_slot() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    for i in 0..4 {
        q.enqueue(json!(i), &EnqueueOptions::default()).unwrap();
    }
    q.limit_concurrency(&caps(Some(1), None)).unwrap();
    let lease = ClaimOptions {
        lease: Some(Duration::from_secs(10)),
        ..Default::default()
    };
    let held = q.claim_with("killed", 1, &lease).unwrap();
    assert_eq!(held.len(), 1);
    t.clock.advance(Duration::from_secs(9));
    assert!(q.claim_with("w", 1, &lease).unwrap().is_empty());
    // Its holder never comes back (killed): the slot is free when the lease
    // ends, and the claim that takes it reclaims the lapsed job too.
    t.clock.advance(Duration::from_secs(1));
    let next = q.claim_with("w", 1, &lease).unwrap();
    assert_eq!(next.len(), 1);
    assert!(q.claim_with("w", 1, &lease).unwrap().is_empty());
    assert_eq!(q.stats().unwrap().running, 1);
    assert_eq!(
        q.ack(&held[0].lease, None).unwrap_err().kind(),
        ErrorKind::LeaseLost
    );
}

#[test]
fn a_per_key_cap_skips_a_full_key_and_takes_the_others() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    for k in ["a", "a", "a", "b", "b"] {
        q.enqueue(json!(k), &keyed(k)).unwrap();
    }
    q.enqueue(json!("none"), &EnqueueOptions::default())
        .unwrap();
    q.limit_concurrency(&caps(None, Some(2))).unwrap();

    // One batch claim: two of a, two of b, and the job without a key.
    let jobs = q.claim("w", 10).unwrap();
    let mut keys = keys_of(&q, &jobs);
    keys.sort();
    assert_eq!(
        keys,
        [
            None,
            Some("a".into()),
            Some("a".into()),
            Some("b".into()),
            Some("b".into())
        ]
    );
    assert!(q.claim("w", 10).unwrap().is_empty());

    // An ack of a frees one slot of a, and only of a.
    let a = jobs
        .iter()
        .find(|j| q.get_job(j.id).unwrap().concurrency_key.as_deref() == Some("a"))
        .unwrap();
    q.ack(&a.lease, None).unwrap();
    let next = q.claim("w", 10).unwrap();
    assert_eq!(keys_of(&q, &next), [Some("a".into())]);
}

#[test]
fn both_caps_bind_together() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    for k in ["a", "a", "b", "b", "c", "c"] {
        q.enqueue(json!(k), &keyed(k)).unwrap();
    }
    q.limit_concurrency(&caps(Some(2), Some(1))).unwrap();
    let jobs = q.claim("w", 10).unwrap();
    assert_eq!(keys_of(&q, &jobs), [Some("a".into()), Some("b".into())]);
    q.ack(&jobs[0].lease, None).unwrap();
    let next = q.claim("w", 10).unwrap();
    assert_eq!(
        keys_of(&q, &next),
        [Some("a".into())],
        "a is free, c waits for the queue's cap"
    );
}

/// The fairness proof of issue 56 for caps: one key floods 10,000 jobs,
/// ten keys enqueue 10 each after it; with a per-key cap of 2, every small
/// key's first job starts within the first 50 claims. Claims of one job
/// each, none acked (workers holding their jobs): the flood's third job
/// waits for a slot of its key, and the claims go on to the small keys.
#[test]
fn a_flooding_key_under_its_cap_does_not_hold_up_the_others() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    let flood: Vec<honker::Payload> = (0..10_000).map(|i| json!(i).into()).collect();
    q.enqueue_many(flood, &keyed("big")).unwrap();
    for k in 0..10 {
        let small: Vec<honker::Payload> = (0..10).map(|i| json!(i).into()).collect();
        q.enqueue_many(small, &keyed(&format!("small-{k}")))
            .unwrap();
    }
    q.limit_concurrency(&caps(None, Some(2))).unwrap();
    let mut first_start = std::collections::HashMap::new();
    let mut claims = 0;
    while let Some(job) = q.claim("w", 1).unwrap().pop() {
        claims += 1;
        let key = q.get_job(job.id).unwrap().concurrency_key.unwrap();
        first_start.entry(key).or_insert(claims);
        assert!(claims <= 50, "claims went on past 50");
    }
    assert_eq!(claims, 22, "two of each key, then every key is full");
    assert_eq!(first_start["big"], 1);
    for k in 0..10 {
        let at = first_start.get(&format!("small-{k}"));
        assert!(at.is_some_and(|&n| n <= 50), "small-{k} started at {at:?}");
    }
}

#[test]
fn bad_caps_and_keys_are_refused_and_change_nothing() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    q.limit_concurrency(&caps(Some(3), Some(2))).unwrap();
    for bad in [
        caps(Some(0), None),
        caps(None, Some(0)),
        caps(Some(Concurrency::MAX + 1), None),
        caps(Some(5), Some(0)),
    ] {
        let e = q.limit_concurrency(&bad).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    }
    assert_eq!(q.concurrency().unwrap(), caps(Some(3), Some(2)));
    for bad in ["", &"k".repeat(513)] {
        let e = q.enqueue(json!(1), &keyed(bad)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    }
    assert_eq!(t.count("_honker_jobs"), 0);
    for bad in [
        "SELECT honker_queue_limit_concurrency('q', 0, NULL)",
        "SELECT honker_queue_limit_concurrency('q', -1, NULL)",
        "SELECT honker_queue_limit_concurrency('q', NULL, 'two')",
        "SELECT honker_queue_enqueue('q', '{}', '{\"concurrency_key\": 5}')",
    ] {
        let e = t.db.transaction().unwrap().query(bad, []).unwrap_err();
        assert_eq!(code(&e), "INVALID_ARGUMENT", "{bad}: {e}");
    }
    assert_eq!(q.concurrency().unwrap(), caps(Some(3), Some(2)));
}

#[test]
fn caps_and_a_rate_limit_are_set_and_lifted_apart() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    let limit = honker::rate::RateLimit {
        limit: 100,
        per: Duration::from_secs(1),
        burst: 100,
    };
    q.set_rate_limit(Some(limit)).unwrap();
    q.limit_concurrency(&caps(Some(1), Some(1))).unwrap();
    q.set_rate_limit(None).unwrap();
    assert_eq!(q.concurrency().unwrap(), caps(Some(1), Some(1)));
    q.set_rate_limit(Some(limit)).unwrap();
    q.limit_concurrency(&caps(None, Some(4))).unwrap();
    assert_eq!(q.rate_limit().unwrap(), Some(limit));
    assert_eq!(q.concurrency().unwrap(), caps(None, Some(4)));

    // Both bind in one claim.
    for i in 0..3 {
        q.enqueue(json!(i), &keyed("k")).unwrap();
    }
    q.limit_concurrency(&caps(Some(1), None)).unwrap();
    assert_eq!(q.claim("w", 3).unwrap().len(), 1);
}

#[test]
fn the_sql_functions_cap_with_the_callers_transaction_and_keep_the_key() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    let tx = t.db.transaction().unwrap();
    tx.query("SELECT honker_queue_limit_concurrency('q', 1, 1)", [])
        .unwrap();
    tx.rollback().unwrap();
    assert_eq!(q.concurrency().unwrap(), Concurrency::default());

    assert_eq!(
        sql(&t.db, "SELECT honker_queue_limit_concurrency('q', NULL, 1)"),
        Value::Integer(1)
    );
    for _ in 0..2 {
        sql(
            &t.db,
            "SELECT honker_queue_enqueue('q', '{}', '{\"concurrency_key\": \"tenant-1\"}')",
        );
    }
    let Value::Text(claimed) = sql(&t.db, "SELECT honker_queue_claim('q', 'w', 5, 1000)") else {
        panic!()
    };
    let claimed: serde_json::Value = serde_json::from_str(&claimed).unwrap();
    assert_eq!(claimed.as_array().unwrap().len(), 1, "{claimed}");
    let id = claimed[0]["id"].as_i64().unwrap();
    let Value::Text(job) = sql(&t.db, &format!("SELECT honker_job_get('q', {id})")) else {
        panic!()
    };
    assert!(job.contains("\"concurrency_key\":\"tenant-1\""), "{job}");
    let Value::Text(stats) = sql(&t.db, "SELECT honker_queue_stats('q')") else {
        panic!()
    };
    assert!(
        stats.contains("\"max_running\":null") && stats.contains("\"max_running_per_key\":1"),
        "{stats}"
    );
}

#[test]
fn a_finished_job_keeps_its_key_and_a_requeued_one_counts_again() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    let job = q
        .enqueue(
            json!(1),
            &EnqueueOptions {
                max_attempts: Some(1),
                ..keyed("k")
            },
        )
        .unwrap();
    let claimed = q.claim("w", 1).unwrap().remove(0);
    q.fail(&claimed.lease, "boom").unwrap();
    assert_eq!(
        q.get_job(job.id).unwrap().concurrency_key.as_deref(),
        Some("k")
    );
    q.requeue_dead(job.id).unwrap();
    q.enqueue(json!(2), &keyed("k")).unwrap();
    q.limit_concurrency(&caps(None, Some(1))).unwrap();
    assert_eq!(q.claim("w", 5).unwrap().len(), 1);
}

/// A capped queue on the system clock, its one slot held (lease 400 ms).
fn held_on_the_system_clock() -> (tempfile::TempDir, Database, honker::Queue, honker::Job) {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("t.db")).unwrap();
    let q = db.queue("q").unwrap();
    q.limit_concurrency(&caps(Some(1), None)).unwrap();
    q.enqueue(json!(1), &EnqueueOptions::default()).unwrap();
    q.enqueue(json!(2), &EnqueueOptions::default()).unwrap();
    let lease = ClaimOptions {
        lease: Some(Duration::from_millis(400)),
        ..Default::default()
    };
    let held = q.claim_with("holder", 1, &lease).unwrap().remove(0);
    (dir, db, q, held)
}

#[test]
fn a_waiting_claim_on_a_capped_queue_wakes_on_the_ack() {
    let (_dir, db, q, held) = held_on_the_system_clock();
    let waiter = std::thread::spawn(move || {
        let wait = ClaimOptions {
            wait: Duration::from_secs(30),
            ..Default::default()
        };
        let started = Instant::now();
        let got = db.queue("q").unwrap().claim_with("w", 1, &wait).unwrap();
        (got.len(), started.elapsed())
    });
    std::thread::sleep(Duration::from_millis(100));
    q.ack(&held.lease, None).unwrap();
    let (n, took) = waiter.join().unwrap();
    assert_eq!(n, 1);
    assert!(
        took < Duration::from_millis(390),
        "woken by the ack, took {took:?}"
    );
}

#[test]
fn a_waiting_claim_on_a_capped_queue_wakes_when_the_lease_ends() {
    let (_dir, _db, q, _held) = held_on_the_system_clock();
    let wait = ClaimOptions {
        wait: Duration::from_secs(30),
        ..Default::default()
    };
    let started = Instant::now();
    let got = q.claim_with("w", 1, &wait).unwrap();
    // The holder never acks: the slot is free when its lease ends, and a
    // claim at that moment reclaims the lapsed job and may take either.
    assert_eq!(got.len(), 1);
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(5),
        "{took:?}"
    );
}
