//! Random sequences of queue operations (fixed seeds, so failures replay),
//! with the protocol's invariants checked after every step:
//! - a job is never lost: every enqueued id is live, finished, or was acked by
//!   the test;
//! - a job is in exactly one place, and only running rows carry a lease;
//! - a claim never hands out a job whose lease another holder still has;
//! - stale leases change nothing; `stats` agrees with the tables.

mod common;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use common::{scalar, test_db_with};
use honker::{
    ClaimOptions, EnqueueOptions, ErrorKind, Lease, Options, QueueOptions, Retention, RetryOptions,
    Value,
};
use serde_json::json;

const SEEDS: u64 = 12;
const STEPS: usize = 400;

#[derive(Default)]
struct Model {
    enqueued: HashSet<i64>,
    acked: HashSet<i64>,
    /// Leases the test holds: job id -> (lease, expiry ms).
    held: HashMap<i64, (Lease, i64)>,
    /// Leases that must be stale (the job was finished or reclaimed).
    stale: Vec<Lease>,
}

fn int(v: Value) -> i64 {
    match v {
        Value::Integer(n) => n,
        other => panic!("expected an integer, got {other:?}"),
    }
}

#[test]
fn random_operations_keep_the_invariants() {
    for seed in 0..SEEDS {
        run(seed);
    }
}

fn run(seed: u64) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let t = test_db_with(Options {
        retention: Retention {
            completed: Duration::ZERO,
            ..Retention::default()
        },
        ..Options::default()
    });
    let q =
        t.db.queue_with(
            "q",
            QueueOptions {
                lease: Duration::from_secs(10),
                max_attempts: 3,
                ..QueueOptions::default()
            },
        )
        .unwrap();
    let mut m = Model::default();
    for step in 0..STEPS {
        let ctx = format!("seed {seed}, step {step}");
        let now = t.clock_now();
        match rng.u8(0..100) {
            0..=24 => {
                let o = EnqueueOptions {
                    delay: rng
                        .bool()
                        .then(|| Duration::from_millis(rng.u64(0..20_000))),
                    priority: rng.i32(-2..3),
                    dedupe_key: (rng.u8(0..4) == 0).then(|| format!("k{}", rng.u8(0..3))),
                    expires: (rng.u8(0..8) == 0)
                        .then(|| Duration::from_millis(rng.u64(20_001..60_000))),
                    ..EnqueueOptions::default()
                };
                let e = q.enqueue(json!({ "step": step }), &o).unwrap();
                if e.existing {
                    assert!(
                        m.enqueued.contains(&e.id),
                        "{ctx}: dedupe returned an unknown id"
                    );
                }
                m.enqueued.insert(e.id);
            }
            25..=44 => {
                let jobs = q
                    .claim_with(
                        "w",
                        rng.usize(1..5),
                        &ClaimOptions {
                            lease: Some(Duration::from_millis(rng.u64(1_000..15_000))),
                            ..ClaimOptions::default()
                        },
                    )
                    .unwrap();
                for j in jobs {
                    if let Some((old, until)) = m.held.remove(&j.id) {
                        assert!(
                            until <= now,
                            "{ctx}: job {} claimed while its lease was live",
                            j.id
                        );
                        m.stale.push(old);
                    }
                    assert!(j.attempts >= 1 && j.attempts <= j.max_attempts, "{ctx}");
                    m.held.insert(j.id, (j.lease.clone(), j.lease_expires_at));
                }
            }
            45..=74 if !m.held.is_empty() => {
                let ids: Vec<i64> = m.held.keys().copied().collect();
                let id = ids[rng.usize(0..ids.len())];
                let (lease, until) = m.held.remove(&id).unwrap();
                let result = match rng.u8(0..6) {
                    0 | 1 => q.ack(&lease, None).map(|()| {
                        m.acked.insert(id);
                        true
                    }),
                    2 => q
                        .retry(
                            &lease,
                            &RetryOptions {
                                delay: Some(Duration::from_millis(rng.u64(0..5_000))),
                                error: Some("random".into()),
                            },
                        )
                        .map(|_| true),
                    3 => q.fail(&lease, "random").map(|()| true),
                    4 => q.release(&lease).map(|()| true),
                    _ => q.heartbeat(&lease, None).map(|until| {
                        m.held.insert(id, (lease.clone(), until));
                        false
                    }),
                };
                match result {
                    Ok(finished_lease) => {
                        if finished_lease {
                            m.stale.push(lease);
                        }
                    }
                    // The lease lapsed and a claim reclaimed (or dead-lettered) the job.
                    Err(e) if e.kind() == ErrorKind::LeaseLost => {
                        assert!(until <= now, "{ctx}: live lease refused: {e}");
                        m.stale.push(lease);
                    }
                    Err(e) => panic!("{ctx}: {e}"),
                }
            }
            75..=82 if !m.stale.is_empty() => {
                let lease = m.stale[rng.usize(0..m.stale.len())].clone();
                if m.held.values().any(|(l, _)| l == &lease) {
                    continue;
                }
                let before = t.snapshot();
                let err = q.ack(&lease, None).unwrap_err();
                assert_eq!(err.kind(), ErrorKind::LeaseLost, "{ctx}");
                assert_eq!(t.snapshot(), before, "{ctx}: a stale ack changed something");
            }
            83..=86 if !m.enqueued.is_empty() => {
                let ids: Vec<i64> = m.enqueued.iter().copied().collect();
                let id = ids[rng.usize(0..ids.len())];
                if q.cancel(id, Some("random")).unwrap() {
                    if let Some((lease, _)) = m.held.remove(&id) {
                        m.stale.push(lease);
                    }
                }
            }
            87..=89 => {
                q.requeue_all_dead().unwrap();
            }
            _ => t.clock.advance(Duration::from_millis(rng.u64(0..8_000))),
        }
        check(&t, &q, &m, &ctx);
    }
}

fn check(t: &common::TestDb, q: &honker::Queue, m: &Model, ctx: &str) {
    let live = int(scalar(&t.db, "SELECT count(*) FROM _honker_jobs"));
    let finished = int(scalar(&t.db, "SELECT count(*) FROM _honker_finished"));
    let both = int(scalar(
        &t.db,
        "SELECT count(*) FROM _honker_jobs j JOIN _honker_finished f ON f.id = j.id",
    ));
    assert_eq!(both, 0, "{ctx}: a job is both live and finished");
    let acked_still_there = m.acked.iter().filter(|id| q.get_job(**id).is_ok()).count();
    assert_eq!(acked_still_there, 0, "{ctx}: an acked job is still there");
    let accounted = live + finished + m.acked.len() as i64;
    assert_eq!(
        accounted,
        m.enqueued.len() as i64,
        "{ctx}: jobs lost or invented (live {live}, finished {finished}, acked {})",
        m.acked.len()
    );
    let bad_leases = int(scalar(
        &t.db,
        "SELECT count(*) FROM _honker_jobs WHERE
           (state = 'running') <> (lease_token IS NOT NULL AND lease_expires_at IS NOT NULL
                                   AND worker_id IS NOT NULL)",
    ));
    assert_eq!(bad_leases, 0, "{ctx}: lease columns disagree with state");
    let bad_attempts = int(scalar(
        &t.db,
        "SELECT count(*) FROM _honker_jobs WHERE attempts < 0 OR attempts > max_attempts",
    ));
    assert_eq!(bad_attempts, 0, "{ctx}: attempts out of range");
    let s = q.stats().unwrap();
    assert_eq!(
        (s.ready + s.scheduled + s.running) as i64,
        live,
        "{ctx}: stats disagree with the live table"
    );
    assert_eq!(
        (s.dead + s.cancelled + s.expired + s.completed) as i64,
        finished,
        "{ctx}: stats disagree with the finished table"
    );
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
