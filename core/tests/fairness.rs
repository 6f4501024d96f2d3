//! Fair tenants inside one queue (issue 56 §3, ADR 36): round-robin order
//! by `concurrency_key` (each key with ready jobs takes one per turn), a
//! rate limit per key (a claim steps over a key at its limit and takes the
//! next key's job), both stored in the file for every process; delayed jobs
//! take their turns when they come due; a key that idled gets no credit;
//! bad input changes nothing; the SQL function sets it in the caller's
//! transaction; maintenance forgets key rows that carry nothing.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::{sql, test_db};
use honker::rusqlite::types::Value;
use honker::{ClaimOptions, EnqueueOptions, ErrorKind, Fairness};
use serde_json::json;

fn keyed(k: &str) -> EnqueueOptions {
    EnqueueOptions {
        concurrency_key: Some(k.into()),
        ..Default::default()
    }
}

fn round_robin() -> Fairness {
    Fairness {
        order: Some("round_robin".into()),
        ..Default::default()
    }
}

fn per_key(limit: u32, per: Duration) -> Fairness {
    Fairness {
        key_limit: Some(limit),
        key_per: Some(per),
        ..Default::default()
    }
}

fn payloads(n: usize) -> Vec<honker::Payload> {
    (0..n).map(|i| json!(i).into()).collect()
}

/// Claims one job at a time (acking none) until none is left or `max`;
/// the key of each, in order.
fn drain(q: &honker::Queue, max: usize) -> Vec<String> {
    let mut keys = Vec::new();
    while keys.len() < max {
        let Some(job) = q.claim("w", 1).unwrap().pop() else {
            break;
        };
        keys.push(
            q.get_job(job.id)
                .unwrap()
                .concurrency_key
                .unwrap_or_default(),
        );
    }
    keys
}

/// The proof: one key floods 10,000 jobs, ten keys enqueue 10 each
/// after it; in round-robin order every small key's first job starts
/// within the first 50 claims (here: within the first 11).
#[test]
fn a_flood_does_not_hold_up_ten_small_keys_in_round_robin_order() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    q.set_fairness(&round_robin()).unwrap();
    q.enqueue_many(payloads(10_000), &keyed("big")).unwrap();
    for k in 0..10 {
        q.enqueue_many(payloads(10), &keyed(&format!("small-{k}")))
            .unwrap();
    }
    let order = drain(&q, 200);
    let mut first = HashMap::new();
    for (i, key) in order.iter().enumerate() {
        first.entry(key.clone()).or_insert(i + 1);
    }
    for k in 0..10 {
        let at = first[&format!("small-{k}")];
        assert!(at <= 11, "small-{k}'s first job started at claim {at}");
    }
    // Each turn takes every key once: the 110 small jobs are done within
    // the first 10 turns of 11 keys, and the flood goes on alone after.
    let small_done = order.iter().rposition(|k| k != "big").unwrap() + 1;
    assert_eq!(small_done, 110, "{:?}", &order[..120]);
    assert!(order[110..].iter().all(|k| k == "big"));
    // In priority order (the default) the flood goes first.
    let t2 = test_db();
    let q2 = t2.db.queue("q").unwrap();
    q2.enqueue_many(payloads(100), &keyed("big")).unwrap();
    q2.enqueue(json!(0), &keyed("small")).unwrap();
    assert!(drain(&q2, 100).iter().all(|k| k == "big"));
}

/// Turns are taken once per key per round, a key's jobs enqueued one by one
/// interleave as a batch's do, a key that idled gets little credit for it
/// (the queue's turn is stored every 8 turns: at most 8), and priority
/// still comes first.
#[test]
fn turns_interleave_keys_give_no_credit_and_yield_to_priority() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    q.set_fairness(&round_robin()).unwrap();
    for _ in 0..3 {
        q.enqueue(json!(0), &keyed("a")).unwrap();
    }
    q.enqueue_many(payloads(3), &keyed("b")).unwrap();
    assert_eq!(drain(&q, 3), ["a", "b", "a"]);
    // "c" comes late: it joins the queue's stored turn (0 here, within
    // the 8 it may lag), so one turn of credit.
    q.enqueue_many(payloads(2), &keyed("c")).unwrap();
    assert_eq!(drain(&q, 10), ["c", "b", "c", "a", "b"]);

    // "a" ran 100 jobs while "b" idled; then both enqueue 20: were "b"'s
    // turns to go on from its last one (2), its 20 would all come first.
    q.enqueue_many(payloads(100), &keyed("a")).unwrap();
    assert_eq!(drain(&q, 100).len(), 100);
    q.enqueue_many(payloads(20), &keyed("a")).unwrap();
    q.enqueue_many(payloads(20), &keyed("b")).unwrap();
    let first = drain(&q, 20);
    let b = first.iter().filter(|k| *k == "b").count();
    assert!(
        (10..=14).contains(&b),
        "{b} of b in the first 20: {first:?}"
    );
    assert_eq!(drain(&q, 100).len(), 20);

    // Higher priority first, whatever its turn; jobs without a key take no
    // turn and go first among their priority.
    q.enqueue_many(payloads(3), &keyed("a")).unwrap();
    let urgent = EnqueueOptions {
        priority: 5,
        ..keyed("b")
    };
    q.enqueue(json!(0), &urgent).unwrap();
    q.enqueue(json!(0), &EnqueueOptions::default()).unwrap();
    assert_eq!(drain(&q, 10), ["b", "", "a", "a", "a"]);
}

/// A delayed job takes its turn when it comes due: a key that schedules
/// many for later does not push back its jobs of now, and its delayed jobs,
/// once due, take turns like the others.
#[test]
fn delayed_jobs_take_their_turns_when_due() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    q.set_fairness(&round_robin()).unwrap();
    let later = EnqueueOptions {
        delay: Some(Duration::from_secs(30)),
        ..keyed("a")
    };
    q.enqueue_many(payloads(5), &later).unwrap();
    q.enqueue(json!(0), &keyed("a")).unwrap();
    q.enqueue(json!(0), &keyed("b")).unwrap();
    assert_eq!(drain(&q, 10), ["a", "b"]);
    t.clock.advance(Duration::from_secs(31));
    q.enqueue_many(payloads(2), &keyed("b")).unwrap();
    // The claim promotes "a"'s five, which take turns from the current
    // one on: they interleave with "b"'s two (older, so first in a turn).
    assert_eq!(drain(&q, 10), ["a", "b", "a", "b", "a", "a", "a"]);
}

/// A retried job keeps its turn; a lapsed lease's job too: both run first
/// when due again.
#[test]
fn a_retried_job_keeps_its_turn() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    q.set_fairness(&round_robin()).unwrap();
    q.enqueue_many(payloads(3), &keyed("a")).unwrap();
    q.enqueue_many(payloads(3), &keyed("b")).unwrap();
    let job = q.claim("w", 1).unwrap().pop().unwrap();
    q.release(&job.lease).unwrap();
    assert_eq!(drain(&q, 10), ["a", "b", "a", "b", "a", "b"]);
}

/// A rate limit per key: a claim steps over a key at its limit (no
/// head-of-line blocking) and takes the next key's jobs; the key starts
/// again when its limit lets it; a batch claim takes each key's allowance.
#[test]
fn a_rate_limit_per_key_steps_over_a_key_at_its_limit() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    q.set_fairness(&per_key(2, Duration::from_secs(10)))
        .unwrap();
    q.enqueue_many(payloads(100), &keyed("big")).unwrap();
    q.enqueue_many(payloads(3), &keyed("small")).unwrap();
    q.enqueue(json!(0), &EnqueueOptions::default()).unwrap();
    // Burst 1: one start of a key per 5 s.
    assert_eq!(drain(&q, 10), ["big", "small", ""]);
    let elsewhere = t.reopen();
    assert!(
        elsewhere
            .queue("q")
            .unwrap()
            .claim("w2", 10)
            .unwrap()
            .is_empty(),
        "another open sees the keys' limits"
    );
    t.clock.advance(Duration::from_secs(5));
    let batch = q.claim("w", 10).unwrap();
    assert_eq!(batch.len(), 2, "one of each key");
    // With a burst of 3: a batch takes three of each key at once.
    let mut f = per_key(2, Duration::from_secs(10));
    f.key_burst = Some(3);
    q.set_fairness(&f).unwrap();
    // (Within the 60 s lease of the jobs claimed above.)
    t.clock.advance(Duration::from_secs(20));
    let batch = q.claim("w", 50).unwrap();
    let big = batch
        .iter()
        .filter(|j| q.get_job(j.id).unwrap().concurrency_key.as_deref() == Some("big"))
        .count();
    assert_eq!((batch.len(), big), (4, 3), "3 of big, the last of small");
    let s = q.stats().unwrap();
    assert_eq!(
        (s.key_limit, s.key_per_ms, s.round_robin),
        (Some(2), Some(10_000), false)
    );
}

/// Round-robin order and a rate limit per key together: a key at its limit
/// is stepped over within its turn, and the others go on.
#[test]
fn turns_and_a_rate_limit_per_key_together() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    let mut f = per_key(1, Duration::from_secs(20));
    f.order = Some("round_robin".into());
    q.set_fairness(&f).unwrap();
    q.enqueue_many(payloads(50), &keyed("big")).unwrap();
    for k in ["x", "y", "z"] {
        q.enqueue_many(payloads(2), &keyed(k)).unwrap();
    }
    assert_eq!(drain(&q, 10), ["big", "x", "y", "z"]);
    t.clock.advance(Duration::from_secs(20));
    assert_eq!(drain(&q, 10), ["big", "x", "y", "z"]);
    t.clock.advance(Duration::from_secs(20));
    assert_eq!(drain(&q, 10), ["big"]);
}

/// A waiting claim whose ready jobs all belong to keys at their limit
/// sleeps until the first key may start again, then takes it.
#[test]
fn a_waiting_claim_wakes_when_a_key_may_start_again() {
    let dir = tempfile::tempdir().unwrap();
    let db = honker::Database::open(dir.path().join("t.db")).unwrap();
    let q = db.queue("q").unwrap();
    q.set_fairness(&per_key(1, Duration::from_millis(300)))
        .unwrap();
    q.enqueue_many(payloads(2), &keyed("a")).unwrap();
    assert_eq!(q.claim("w", 5).unwrap().len(), 1);
    let started = std::time::Instant::now();
    let wait = ClaimOptions {
        wait: Duration::from_secs(5),
        ..Default::default()
    };
    let next = q.claim_with("w", 1, &wait).unwrap();
    let waited = started.elapsed();
    assert_eq!(next.len(), 1);
    assert!(
        waited >= Duration::from_millis(250) && waited < Duration::from_secs(3),
        "waited {waited:?}"
    );
}

#[test]
fn bad_fairness_is_refused_and_changes_nothing() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    let mut good = per_key(5, Duration::from_secs(1));
    good.order = Some("round_robin".into());
    q.set_fairness(&good).unwrap();
    for bad in [
        Fairness {
            order: Some("fifo".into()),
            ..Default::default()
        },
        Fairness {
            key_limit: Some(5),
            ..Default::default()
        },
        Fairness {
            key_per: Some(Duration::from_secs(1)),
            ..Default::default()
        },
        Fairness {
            key_burst: Some(2),
            ..Default::default()
        },
        per_key(0, Duration::from_secs(1)),
        per_key(5, Duration::ZERO),
    ] {
        let e = q.set_fairness(&bad).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{bad:?}: {e}");
    }
    let s = q.stats().unwrap();
    assert_eq!(
        (s.round_robin, s.key_limit, s.key_per_ms),
        (true, Some(5), Some(1000))
    );
    // Lifting: priority order again, the turns forgotten.
    q.enqueue_many(payloads(3), &keyed("a")).unwrap();
    q.set_fairness(&Fairness::default()).unwrap();
    let s = q.stats().unwrap();
    assert_eq!((s.round_robin, s.key_limit), (false, None));
    assert_eq!(t.count("_honker_jobs WHERE turn IS NOT NULL"), 0);
}

/// The SQL function sets the fairness with the caller's transaction, and
/// the stats JSON carries it.
#[test]
fn the_sql_function_sets_fairness_in_the_callers_transaction() {
    let t = test_db();
    let tx = t.db.transaction().unwrap();
    tx.query(
        "SELECT honker_queue_set_fairness('q', 'round_robin', 3, 1000, NULL)",
        [],
    )
    .unwrap();
    tx.rollback().unwrap();
    assert!(!t.db.queue("q").unwrap().stats().unwrap().round_robin);
    assert_eq!(
        sql(
            &t.db,
            "SELECT honker_queue_set_fairness('q', 'round_robin', 3, 1000, NULL)"
        ),
        Value::Integer(1)
    );
    let stats = sql(&t.db, "SELECT honker_queue_stats('q')");
    let Value::Text(stats) = stats else {
        panic!("{stats:?}")
    };
    let v: serde_json::Value = serde_json::from_str(&stats).unwrap();
    assert_eq!(v["round_robin"], true);
    assert_eq!(v["key_limit"], 3);
    assert_eq!(v["key_per_ms"], 1000);
    let tx = t.db.transaction().unwrap();
    let e = tx
        .query(
            "SELECT honker_queue_set_fairness('q', 'sideways', NULL, NULL, NULL)",
            [],
        )
        .unwrap_err();
    assert!(e.to_string().contains("order must be"), "{e}");
}

/// Maintenance removes the key rows that carry nothing: a refilled limit
/// and a turn behind the queue's.
#[test]
fn maintenance_forgets_idle_keys() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    let mut f = per_key(1000, Duration::from_secs(1));
    f.key_burst = Some(1000);
    f.order = Some("round_robin".into());
    q.set_fairness(&f).unwrap();
    for k in ["a", "b", "c"] {
        q.enqueue(json!(0), &keyed(k)).unwrap();
    }
    assert_eq!(drain(&q, 10).len(), 3);
    assert_eq!(t.count("_honker_queue_keys"), 3);
    // "a" goes on alone: the queue's turn moves past the others' last.
    q.enqueue_many(payloads(12), &keyed("a")).unwrap();
    assert_eq!(drain(&q, 20).len(), 12);
    assert_eq!(
        t.db.maintain().unwrap().queue_keys,
        0,
        "the limits' tats are ahead"
    );
    t.clock.advance(Duration::from_secs(2));
    let r = t.db.maintain().unwrap();
    assert_eq!(
        r.queue_keys, 2,
        "b and c idle; a's turn is ahead of the queue's"
    );
    assert_eq!(t.count("_honker_queue_keys"), 1);
    // A forgotten key comes back at the queue's turn.
    q.enqueue(json!(0), &keyed("b")).unwrap();
    q.enqueue(json!(0), &keyed("a")).unwrap();
    assert_eq!(drain(&q, 10), ["b", "a"]);
}

fn key_tat(t: &common::TestDb, key: &str) -> Value {
    common::scalar(
        &t.db,
        &format!("SELECT tat_us FROM _honker_queue_keys WHERE key = '{key}'"),
    )
}

/// A rate limit per key that does not bind reserves blocks of a key's
/// starts (ADR 23 §9, per key): claims of this database take them without
/// writing the key's tat; another database's exact starts go after the
/// block's slots, and the block still serves; a limit set again drops it.
#[test]
fn a_limit_per_key_that_does_not_bind_writes_once_per_block() {
    let t = test_db();
    let other = t.reopen();
    let q = t.db.queue("q").unwrap();
    let fair = Fairness {
        key_limit: Some(1_000_000),
        key_per: Some(Duration::from_secs(1)),
        key_burst: Some(1_000_000),
        ..Default::default()
    };
    q.set_fairness(&fair).unwrap();
    q.enqueue_many(payloads(100), &keyed("a")).unwrap();
    assert_eq!(q.claim("w", 1).unwrap().len(), 1);
    let reserved = key_tat(&t, "a");
    let Value::Integer(at) = reserved else {
        panic!("{reserved:?}")
    };
    // The block's slots begin after its validity (100 ms from now).
    assert!(at > (1_700_000_000_000 + 100) * 1000, "{at}");
    for _ in 0..20 {
        assert_eq!(q.claim("w", 1).unwrap().len(), 1);
    }
    assert_eq!(
        key_tat(&t, "a"),
        reserved,
        "starts from the block write nothing"
    );
    // Another process starts exactly, after the block's slots.
    assert_eq!(other.queue("q").unwrap().claim("w", 1).unwrap().len(), 1);
    let Value::Integer(after) = key_tat(&t, "a") else {
        panic!()
    };
    assert!(after > at);
    assert_eq!(q.claim("w", 1).unwrap().len(), 1);
    assert_eq!(
        key_tat(&t, "a"),
        Value::Integer(after),
        "the block still serves"
    );
    // Past its validity the next claim starts exactly (and reserves again).
    t.clock.advance(Duration::from_millis(101));
    assert_eq!(q.claim("w", 1).unwrap().len(), 1);
    assert_ne!(key_tat(&t, "a"), Value::Integer(after));
    let renewed = key_tat(&t, "a");
    // A limit set again (here or elsewhere) drops the block.
    t.clock.advance(Duration::from_millis(1));
    other.queue("q").unwrap().set_fairness(&fair).unwrap();
    assert_eq!(q.claim("w", 1).unwrap().len(), 1);
    assert_ne!(key_tat(&t, "a"), renewed, "a new limit: an exact start");
}

/// Blocks of a key's starts never let it exceed its bound: two processes
/// claim as fast as they can under a limit per key that blocks can serve
/// (100 per 100 ms, a burst of 20), one millisecond at a time for 800 ms;
/// no window of 100 ms holds more than `limit + burst - 1` starts of one
/// key, and both processes start jobs.
#[test]
fn blocks_of_a_keys_starts_keep_its_bound_across_processes() {
    let t = test_db();
    let other = t.reopen();
    let (qa, qb) = (t.db.queue("q").unwrap(), other.queue("q").unwrap());
    qa.set_fairness(&Fairness {
        key_limit: Some(100),
        key_per: Some(Duration::from_millis(100)),
        key_burst: Some(20),
        ..Default::default()
    })
    .unwrap();
    for key in ["k", "j"] {
        let named: Vec<honker::Payload> = (0..2000).map(|_| json!(key).into()).collect();
        qa.enqueue_many(named, &keyed(key)).unwrap();
    }
    let mut starts: HashMap<String, Vec<i64>> = HashMap::new();
    let (mut by_a, mut by_b) = (0, 0);
    let t0 = 1_700_000_000_000_i64;
    for ms in 0..800 {
        for (q, n, count) in [(&qa, 3, &mut by_a), (&qb, 2, &mut by_b)] {
            for job in q.claim("w", n).unwrap() {
                *count += 1;
                let key: String = job.payload.deserialize().unwrap();
                starts.entry(key).or_default().push(t0 + ms);
            }
        }
        t.clock.advance(Duration::from_millis(1));
    }
    assert!(by_a > 0 && by_b > 0, "both processes start: {by_a} {by_b}");
    for (key, times) in &starts {
        let most = (0..times.len())
            .map(|i| times[i..].partition_point(|&s| s < times[i] + 100))
            .max()
            .unwrap();
        assert!(most <= 119, "key {key}: {most} starts within 100 ms");
        assert!(times.len() > 400, "key {key}: only {} starts", times.len());
    }
}
