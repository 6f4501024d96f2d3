//! Bad input gets a clear, coded error and changes nothing.

mod common;

use std::time::Duration;

use common::test_db;
use honker::{ClaimOptions, EnqueueOptions, Error, ErrorKind, Payload, QueueOptions, RetryOptions};
use serde_json::json;

fn assert_invalid<T: std::fmt::Debug>(r: Result<T, Error>) {
    let err = r.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(err.to_string().starts_with("INVALID_ARGUMENT: "));
}

#[test]
fn bad_enqueues_change_nothing() {
    let t = common::test_db_with(honker::Options {
        max_payload_bytes: 64,
        ..honker::Options::default()
    });
    let q = t.db.queue("q").unwrap();
    let before = t.snapshot();
    let ok = EnqueueOptions::default;
    assert_invalid(q.enqueue(Payload::Json("{\"a\":".into()), &ok()));
    assert_invalid(q.enqueue(Payload::Json("".into()), &ok()));
    assert_invalid(q.enqueue(json!("x".repeat(100)), &ok()));
    assert_invalid(q.enqueue(Payload::Bytes(vec![0; 65]), &ok()));
    let cases = [
        EnqueueOptions {
            delay: Some(Duration::from_secs(1)),
            run_at: Some(1),
            ..ok()
        },
        EnqueueOptions {
            run_at: Some(-5),
            ..ok()
        },
        EnqueueOptions {
            delay: Some(Duration::from_secs(u64::MAX / 4)),
            ..ok()
        },
        EnqueueOptions {
            max_attempts: Some(0),
            ..ok()
        },
        EnqueueOptions {
            dedupe_key: Some(String::new()),
            ..ok()
        },
        EnqueueOptions {
            dedupe_key: Some("k".repeat(600)),
            ..ok()
        },
        EnqueueOptions {
            backoff: Some(honker::Backoff {
                jitter: f64::NAN,
                ..honker::Backoff::default()
            }),
            ..ok()
        },
    ];
    for o in &cases {
        assert_invalid(q.enqueue(json!(1), o));
    }
    assert_eq!(t.snapshot(), before);
}

#[test]
fn bad_queue_names() {
    let t = test_db();
    assert_invalid(t.db.queue(""));
    assert_invalid(t.db.queue(&"q".repeat(129)));
    assert_invalid(t.db.queue("tab\there"));
    assert_invalid(t.db.queue_with(
        "q",
        QueueOptions {
            max_attempts: 1001,
            ..QueueOptions::default()
        },
    ));
}

#[test]
fn bad_claims_change_nothing() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    q.enqueue(json!(1), &EnqueueOptions::default()).unwrap();
    let before = t.snapshot();
    assert_invalid(q.claim("w", 0));
    assert_invalid(q.claim("w", 10_001));
    assert_invalid(q.claim("", 1));
    assert_invalid(q.claim_with(
        "w",
        1,
        &ClaimOptions {
            lease: Some(Duration::ZERO),
            ..ClaimOptions::default()
        },
    ));
    assert_invalid(q.claim_with(
        "w",
        1,
        &ClaimOptions {
            lease: Some(Duration::from_secs(86_401)),
            ..ClaimOptions::default()
        },
    ));
    assert_eq!(t.snapshot(), before);
}

#[test]
fn bad_ids_and_durations() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    q.enqueue(json!(1), &EnqueueOptions::default()).unwrap();
    let job = q.claim("w", 1).unwrap().pop().unwrap();
    let before = t.snapshot();
    assert_invalid(q.get_job(0));
    assert_invalid(q.get_job(-3));
    assert_invalid(q.cancel(-1, None));
    assert_invalid(q.get_result(0));
    assert_invalid(q.dead_letters(0, 0));
    assert_invalid(job.heartbeat(Some(Duration::ZERO)));
    assert_invalid(job.snooze(Duration::from_secs(u64::MAX / 4)));
    assert_invalid(job.retry(&RetryOptions {
        delay: Some(Duration::from_secs(u64::MAX / 4)),
        error: None,
    }));
    assert_eq!(q.get_job(424242).unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(t.snapshot(), before);
}

#[test]
fn the_binding_helpers_reject_what_rust_types_cannot_express() {
    use honker::validate;
    assert_invalid(validate::batch(-1));
    assert_invalid(validate::seconds("delay", f64::NAN));
    assert_invalid(validate::seconds("delay", -1.0));
    assert_invalid(validate::timestamp_ms("run_at", -1));
    // The ms form (Node, Swift) keeps the same rules and says ms.
    assert_eq!(
        validate::millis("delay", 1500.0).unwrap(),
        Duration::from_millis(1500)
    );
    for bad in [f64::NAN, f64::INFINITY, -1.0, 1e15] {
        let e = validate::millis("delay", bad).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(
            e.to_string().contains("ms") || e.to_string().contains("milliseconds"),
            "{e}"
        );
    }
    let max = honker::limits::MAX_DELAY;
    assert_eq!(
        validate::millis("d", max.as_secs_f64() * 1000.0).unwrap(),
        max
    );
    assert_eq!(validate::seconds("d", max.as_secs_f64()).unwrap(), max);
}

#[test]
fn long_errors_are_clipped_not_refused() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    q.enqueue(json!(1), &EnqueueOptions::default()).unwrap();
    let job = q.claim("w", 1).unwrap().pop().unwrap();
    job.fail(&"e".repeat(10_000)).unwrap();
    let info = q.get_job(job.id).unwrap();
    assert_eq!(info.last_error.unwrap().len(), honker::limits::MAX_ERROR);
}
