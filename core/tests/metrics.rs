//! Queue metrics (ADR 27): every event is counted once; claim latency
//! lands in the right bucket; a rolled-back change (or savepoint) counts
//! nothing; a process's batched counts reach the file within its flush
//! period, at close, and (killed) lose at most that period; the Prometheus
//! exposition is well formed.

mod common;

use std::io::BufReader;
use std::sync::Arc;
use std::time::{Duration, Instant};

use honker::queue::metrics::{Event, QueueMetrics};
use honker::queue::{ClaimOptions, EnqueueOptions, RetryOptions};
use honker::{Clock, Database, ManualClock, Options, SystemClock};
use serde_json::json;

use common::child::{next_tagged, read_tagged, report, spawn_child, CHILD_ENV};

const T0: i64 = 1_700_000_000_000;

fn open(path: &std::path::Path, clock: &Arc<ManualClock>) -> Database {
    Database::open_with(
        path,
        Options {
            clock: clock.clone(),
            ..Options::default()
        },
    )
    .unwrap()
}

fn totals(m: &QueueMetrics) -> Vec<(&'static str, u64)> {
    Event::ALL
        .iter()
        .map(|e| (e.as_str(), m.total(*e)))
        .filter(|(_, n)| *n > 0)
        .collect()
}

#[test]
fn every_event_is_counted_once_and_a_rollback_counts_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    let clock = Arc::new(ManualClock::new(T0));
    let db = open(&path, &clock);
    let q = db.queue("emails").unwrap();
    let plain = EnqueueOptions::default();
    // 4 enqueued; the dedupe hit returns the live job and counts nothing.
    let keyed = EnqueueOptions {
        dedupe_key: Some("k".into()),
        ..EnqueueOptions::default()
    };
    q.enqueue(json!(1), &keyed).unwrap();
    assert!(q.enqueue(json!(1), &keyed).unwrap().existing);
    q.enqueue(json!(2), &plain).unwrap();
    q.enqueue(json!(3), &plain).unwrap();
    let short = EnqueueOptions {
        expires: Some(Duration::from_secs(1)),
        priority: -5,
        ..EnqueueOptions::default()
    };
    let expiring = q.enqueue(json!(4), &short).unwrap().id;
    // Rolled back: neither the job nor its count.
    let tx = db.transaction().unwrap();
    q.enqueue_tx(&tx, json!(5), &plain).unwrap();
    tx.rollback().unwrap();
    assert_eq!(totals(&q.metrics().unwrap()), [("enqueued", 4)]);

    // Claimed 30 ms after they were due: the 50 ms bucket.
    clock.advance(Duration::from_millis(30));
    let lease = ClaimOptions {
        lease: Some(Duration::from_secs(10)),
        ..ClaimOptions::default()
    };
    let jobs = q.claim_with("w", 3, &lease).unwrap();
    assert_eq!(jobs.len(), 3);
    jobs[0].ack().unwrap();
    jobs[1]
        .retry(&RetryOptions {
            delay: Some(Duration::from_millis(1)),
            error: Some("451".into()),
        })
        .unwrap();
    jobs[2].fail("550").unwrap();
    let m = q.metrics().unwrap();
    assert_eq!(
        totals(&m),
        [
            ("enqueued", 4),
            ("claimed", 3),
            ("acked", 1),
            ("retried", 1),
            ("dead", 1)
        ]
    );
    let cum = m.claim_latency.cumulative();
    assert_eq!(cum[2], (Some(0.025), 0));
    assert_eq!(cum[3], (Some(0.05), 3));
    assert_eq!(m.claim_latency.sum_ms, 90);

    // The retried job is claimed again 2 s after it was due, and its lease
    // lapses (the worker died): reclaimed, then claimed a third time and
    // cancelled; the expiring job expired before it started.
    clock.advance(Duration::from_secs(2));
    let again = q.claim_with("w", 1, &lease).unwrap();
    assert_eq!(again.len(), 1);
    assert_ne!(again[0].id, expiring);
    clock.advance(Duration::from_secs(11));
    let third = q.claim_with("w2", 1, &lease).unwrap();
    assert_eq!(third[0].id, again[0].id);
    assert!(q.cancel(third[0].id, Some("typo")).unwrap());
    let m = q.metrics().unwrap();
    assert_eq!(
        totals(&m),
        [
            ("enqueued", 4),
            ("claimed", 5),
            ("acked", 1),
            ("retried", 1),
            ("reclaimed", 1),
            ("dead", 1),
            ("expired", 1),
            ("cancelled", 1)
        ]
    );
    assert_eq!(m.claim_latency.count(), 5);
    assert_eq!((m.ready, m.running, m.dead_letters), (0, 0, 1));

    // Counts are the file's: another handle sees the same, and so does a
    // read-only reader (what `honker metrics` uses).
    db.close().unwrap();
    let other = open(&path, &clock);
    assert_eq!(other.queue("emails").unwrap().metrics().unwrap(), m);
    other.close().unwrap();
    let read = honker::inspect::metrics(&path, clock_now(&clock)).unwrap();
    assert_eq!(read, [m]);
}

fn clock_now(clock: &ManualClock) -> i64 {
    honker::Clock::now_ms(clock)
}

#[test]
fn a_kept_completed_job_counts_as_acked_and_ack_many_counts_each() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let db = Database::open_with(
        dir.path().join("app.db"),
        Options {
            clock: clock.clone(),
            retention: honker::Retention {
                completed: Duration::from_secs(60),
                ..honker::Retention::default()
            },
            ..Options::default()
        },
    )
    .unwrap();
    let q = db.queue("q").unwrap();
    q.enqueue_many((0..5).map(|n| json!(n)), &EnqueueOptions::default())
        .unwrap();
    let jobs = q.claim("w", 5).unwrap();
    jobs[0].ack().unwrap();
    let leases: Vec<_> = jobs[1..].iter().map(|j| j.lease.clone()).collect();
    assert_eq!(q.ack_many(&leases).unwrap(), 4);
    let m = q.metrics().unwrap();
    assert_eq!(totals(&m), [("enqueued", 5), ("claimed", 5), ("acked", 5)]);
}

#[test]
fn the_exposition_is_prometheus_text() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let db = open(&dir.path().join("app.db"), &clock);
    for name in ["emails", "odd \"name\"\\"] {
        let q = db.queue(name).unwrap();
        q.enqueue(json!(1), &EnqueueOptions::default()).unwrap();
        clock.advance(Duration::from_millis(700));
        q.claim("w", 1).unwrap()[0].ack().unwrap();
    }
    db.queue("later")
        .unwrap()
        .enqueue(
            json!(1),
            &EnqueueOptions {
                delay: Some(Duration::from_secs(60)),
                ..EnqueueOptions::default()
            },
        )
        .unwrap();
    let text = db.metrics_text().unwrap();
    let mut families = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            families.push(rest.to_string());
            continue;
        }
        if line.starts_with("# HELP ") {
            continue;
        }
        // name{labels} value
        let (series, value) = line.rsplit_once(' ').unwrap();
        value.parse::<f64>().unwrap();
        let (name, labels) = series.split_once('{').unwrap();
        assert!(labels.ends_with('}'), "{line}");
        assert!(
            name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "{line}"
        );
    }
    assert_eq!(
        families,
        [
            "honker_jobs_total counter",
            "honker_claim_latency_seconds histogram",
            "honker_queue_jobs gauge"
        ]
    );
    assert!(text.contains("honker_jobs_total{queue=\"emails\",event=\"acked\"} 1\n"));
    assert!(text.contains("honker_claim_latency_seconds_bucket{queue=\"emails\",le=\"0.5\"} 0\n"));
    assert!(text.contains("honker_claim_latency_seconds_bucket{queue=\"emails\",le=\"1\"} 1\n"));
    assert!(text.contains("honker_claim_latency_seconds_bucket{queue=\"emails\",le=\"+Inf\"} 1\n"));
    assert!(text.contains("honker_claim_latency_seconds_sum{queue=\"emails\"} 0.7\n"));
    assert!(text.contains("honker_queue_jobs{queue=\"later\",state=\"scheduled\"} 1\n"));
    assert!(text.contains(r#"queue="odd \"name\"\\""#), "{text}");
}

/// The children: `enqueue-loop` enqueues one job per transaction until it
/// is killed, reporting `@@ N MS` (jobs committed, when) every 20 jobs.
#[test]
fn child_process_entry() {
    let Ok(role) = std::env::var(CHILD_ENV) else {
        return;
    };
    let path = std::env::var("HONKER_TEST_DB").unwrap();
    let db = Database::open_with(
        &path,
        Options {
            metrics_flush_every: Duration::from_millis(200),
            ..Options::default()
        },
    )
    .unwrap();
    match role.as_str() {
        "enqueue-loop" => {
            let q = db.queue("work").unwrap();
            report("ready");
            for n in 1u64.. {
                q.enqueue(json!(n), &EnqueueOptions::default()).unwrap();
                if n % 20 == 0 {
                    report(&format!("{n} {}", SystemClock.now_ms()));
                }
            }
        }
        other => panic!("unknown child role {other}"),
    }
}

fn enqueued_in_file(path: &std::path::Path) -> u64 {
    honker::inspect::metrics(path, SystemClock.now_ms())
        .unwrap()
        .iter()
        .map(|m| m.total(Event::Enqueued))
        .sum()
}

#[test]
fn batched_counts_reach_the_file_within_the_period_and_at_close() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    let every = Duration::from_millis(300);
    let db = Database::open_with(
        &path,
        Options {
            metrics_flush_every: every,
            ..Options::default()
        },
    )
    .unwrap();
    let q = db.queue("q").unwrap();
    q.enqueue_many((0..3).map(|n| json!(n)), &EnqueueOptions::default())
        .unwrap();
    // Committed, not yet in the file: another reader does not see them.
    assert_eq!(enqueued_in_file(&path), 0);
    // The idle flush writes them about a period later, with no other write.
    let start = Instant::now();
    while enqueued_in_file(&path) < 3 {
        assert!(start.elapsed() < Duration::from_secs(10), "never flushed");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(start.elapsed() >= every / 2, "{:?}", start.elapsed());
    // This process reads its own counts at once (a read flushes first).
    q.enqueue(json!(4), &EnqueueOptions::default()).unwrap();
    assert_eq!(q.metrics().unwrap().total(Event::Enqueued), 4);
    assert_eq!(enqueued_in_file(&path), 4);
    // Close writes what is left.
    q.enqueue(json!(5), &EnqueueOptions::default()).unwrap();
    db.close().unwrap();
    assert_eq!(enqueued_in_file(&path), 5);
    // And so does dropping the last handle without close.
    let db = Database::open(&path).unwrap();
    db.queue("q")
        .unwrap()
        .enqueue(json!(6), &EnqueueOptions::default())
        .unwrap();
    drop(db);
    assert_eq!(enqueued_in_file(&path), 6);
}

#[test]
fn counting_in_each_transaction_is_in_the_file_at_commit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    let db = Database::open_with(
        &path,
        Options {
            metrics_flush_every: Duration::ZERO,
            ..Options::default()
        },
    )
    .unwrap();
    let q = db.queue("q").unwrap();
    q.enqueue(json!(1), &EnqueueOptions::default()).unwrap();
    assert_eq!(enqueued_in_file(&path), 1);
    db.close().unwrap();
}

#[test]
fn a_savepoint_rolled_back_takes_its_counts_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    let db = Database::open(&path).unwrap();
    let q = db.queue("q").unwrap();
    let tx = db.transaction().unwrap();
    q.enqueue_tx(&tx, json!(1), &EnqueueOptions::default())
        .unwrap();
    tx.execute("SAVEPOINT inner_work", []).unwrap();
    q.enqueue_tx(&tx, json!(2), &EnqueueOptions::default())
        .unwrap();
    tx.execute("SAVEPOINT deeper", []).unwrap();
    q.enqueue_tx(&tx, json!(3), &EnqueueOptions::default())
        .unwrap();
    tx.execute("ROLLBACK TO inner_work", []).unwrap();
    q.enqueue_tx(&tx, json!(4), &EnqueueOptions::default())
        .unwrap();
    tx.execute("RELEASE inner_work", []).unwrap();
    tx.commit().unwrap();
    let jobs = q.stats().unwrap().ready;
    assert_eq!(jobs, 2);
    assert_eq!(q.metrics().unwrap().total(Event::Enqueued), 2);
    // A verb that fails inside a transaction counts nothing, and the
    // transaction goes on (its savepoint is rolled back): a second ack.
    let claimed = q.claim("w", 1).unwrap();
    let tx = db.transaction().unwrap();
    q.enqueue_tx(&tx, json!(5), &EnqueueOptions::default())
        .unwrap();
    claimed[0].ack_tx(&tx, None).unwrap();
    assert!(claimed[0].ack_tx(&tx, None).is_err());
    tx.commit().unwrap();
    let m = q.metrics().unwrap();
    assert_eq!((m.total(Event::Enqueued), m.total(Event::Acked)), (3, 1));
    db.close().unwrap();
}

/// A process SIGKILLed while it enqueues loses at most its last flush
/// period of counts (200 ms here; the bound allows a loaded machine 1 s
/// more), never more than it committed, and nothing committed of the jobs.
#[test]
fn a_killed_process_loses_at_most_its_last_period_of_counts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    Database::open(&path).unwrap().close().unwrap();
    let mut child = spawn_child("enqueue-loop", &path, &[]);
    assert_eq!(read_tagged(&mut child), "ready");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut progress: Vec<(u64, i64)> = Vec::new();
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(2_500) {
        let line = next_tagged(&mut out);
        let (n, ms) = line.split_once(' ').unwrap();
        progress.push((n.parse().unwrap(), ms.parse().unwrap()));
    }
    let killed_at = SystemClock.now_ms();
    child.kill().unwrap();
    child.wait().unwrap();
    let db = Database::open(&path).unwrap();
    let jobs = db.queue("work").unwrap().stats().unwrap().ready;
    db.close().unwrap();
    let counted = enqueued_in_file(&path);
    // Committed at least this many 1.2 s before the kill.
    let before = progress
        .iter()
        .rev()
        .find(|(_, ms)| *ms <= killed_at - 1_200)
        .map_or(0, |(n, _)| *n);
    assert!(before > 0, "the child committed too little: {progress:?}");
    eprintln!("killed: {jobs} jobs, {counted} counted, {before} committed 1.2 s before the kill");
    assert!(
        counted >= before && counted <= jobs,
        "counted {counted}, jobs {jobs}, committed 1.2 s before the kill {before}"
    );
}
