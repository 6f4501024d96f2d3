//! W3C trace context beside jobs and stream events (ADR 28): stored in its
//! own column, never in the payload; handed to every claim of the job
//! (retries, dead letters requeued) and to every reader of the event; a
//! damaged stored value reads as none and blocks nothing.

mod common;

use common::{json, keyed, test_db};
use honker::stream::{PublishOptions, Start};
use honker::{EnqueueOptions, ErrorKind, RetryOptions, TraceContext};
use serde_json::json;

const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

fn traced() -> TraceContext {
    TraceContext::new(PARENT, Some("congo=t61rcWkgMzE")).unwrap()
}

#[test]
fn a_job_carries_its_producers_context_through_every_claim() {
    let t = test_db();
    let q = t.db.queue("mail").unwrap();
    let o = EnqueueOptions {
        trace_context: Some(traced()),
        ..Default::default()
    };
    let id = q
        .enqueue(json(json!({"to": "a@example.com"})), &o)
        .unwrap()
        .id;
    let plain = q
        .enqueue(
            json(json!({"to": "b@example.com"})),
            &EnqueueOptions::default(),
        )
        .unwrap()
        .id;

    // Its own column, as the W3C headers' JSON; the payload is untouched.
    let stored = common::scalar(
        &t.db,
        &format!("SELECT trace_context || '|' || payload FROM _honker_jobs WHERE id = {id}"),
    );
    assert_eq!(
        stored,
        honker::Value::Text(format!(
            r#"{{"traceparent":"{PARENT}","tracestate":"congo=t61rcWkgMzE"}}|{{"to":"a@example.com"}}"#
        ))
    );

    let jobs = q.claim("w", 2).unwrap();
    let by_id = |id: i64| jobs.iter().find(|j| j.id == id).unwrap();
    assert_eq!(by_id(id).trace_context, Some(traced()));
    assert_eq!(by_id(plain).trace_context, None);
    assert_eq!(q.get_job(id).unwrap().trace_context, Some(traced()));
    assert_eq!(
        q.job(by_id(id).lease.clone()).unwrap().trace_context,
        Some(traced())
    );
    by_id(plain).ack().unwrap();

    // A retry, then death, then a requeue: the context stays.
    by_id(id)
        .retry(&RetryOptions {
            delay: Some(std::time::Duration::ZERO),
            error: None,
        })
        .unwrap();
    let again = q.claim("w", 1).unwrap().remove(0);
    assert_eq!(
        (again.id, again.trace_context.clone()),
        (id, Some(traced()))
    );
    again.fail("boom").unwrap();
    assert_eq!(
        q.dead_letters(0, 10).unwrap()[0].trace_context,
        Some(traced())
    );
    assert!(q.requeue_dead(id).unwrap());
    let revived = q.claim("w", 1).unwrap().remove(0);
    assert_eq!(revived.trace_context, Some(traced()));
    assert_eq!(
        revived.trace_context.as_ref().unwrap().trace_id(),
        "4bf92f3577b34da6a3ce929d0e0e4736"
    );
}

#[test]
fn a_damaged_stored_context_reads_as_none_and_the_job_still_runs() {
    let t = test_db();
    let q = t.db.queue("mail").unwrap();
    let ids: Vec<i64> = (0..3)
        .map(|_| {
            q.enqueue(json(json!(1)), &EnqueueOptions::default())
                .unwrap()
                .id
        })
        .collect();
    let tx = t.db.transaction().unwrap();
    tx.execute(
        &format!(
            "UPDATE _honker_jobs SET trace_context = CASE id WHEN {} THEN 'not json' \
             WHEN {} THEN x'00ff' ELSE '{{\"traceparent\":\"00-zz\"}}' END",
            ids[0], ids[1]
        ),
        [],
    )
    .unwrap();
    tx.commit().unwrap();
    let jobs = q.claim("w", 3).unwrap();
    assert_eq!(jobs.len(), 3);
    assert!(jobs.iter().all(|j| j.trace_context.is_none()));
    assert!(q.dead_letters(0, 10).unwrap().is_empty());
}

#[test]
fn a_bad_context_is_refused_before_anything_is_written() {
    let e = TraceContext::new("00-abc", None).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.message().contains("traceparent"), "{}", e.message());
}

#[test]
fn an_event_carries_its_producers_context_to_readers_and_groups() {
    let t = test_db();
    let s = t.db.stream("orders").unwrap();
    let o = PublishOptions {
        trace_context: Some(traced()),
        ..keyed("k")
    };
    s.publish(json(json!({"n": 1})), &o).unwrap();
    s.publish(json(json!({"n": 2})), &PublishOptions::default())
        .unwrap();
    let batch = PublishOptions {
        trace_context: Some(traced()),
        ..Default::default()
    };
    s.publish_many_with(None, [json(json!(3)), json(json!(4))], &batch)
        .unwrap();
    let with_key = PublishOptions {
        idempotency_key: Some("once".into()),
        ..batch.clone()
    };
    let e = s
        .publish_many_with(None, [json(json!(5))], &with_key)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);

    let read: Vec<_> = s
        .read(0, 10)
        .unwrap()
        .into_iter()
        .map(|e| e.trace_context)
        .collect();
    assert_eq!(
        read,
        vec![Some(traced()), None, Some(traced()), Some(traced())]
    );

    let g = s.group("billing").unwrap();
    g.create(Start::Beginning, &Default::default()).unwrap();
    let first = g.claim("m", 10, None).unwrap();
    let got: Vec<_> = first
        .events
        .iter()
        .map(|e| (e.offset, e.trace_context.clone()))
        .collect();
    assert_eq!(
        got,
        vec![
            (1, Some(traced())),
            (2, None),
            (3, Some(traced())),
            (4, Some(traced()))
        ]
    );
    // A redelivery (released) reads it again from the event.
    g.release(&first.events[0]).unwrap();
    let again = g.claim("m", 1, None).unwrap();
    assert_eq!(again.events[0].trace_context, Some(traced()));
}

#[test]
fn the_sql_functions_take_and_show_it() {
    let t = test_db();
    let opts = format!(r#"{{"traceparent": "{PARENT}", "tracestate": "congo=t61rcWkgMzE"}}"#);
    common::sql(
        &t.db,
        &format!("SELECT honker_queue_enqueue('mail', '1', '{opts}')"),
    );
    common::sql(
        &t.db,
        &format!("SELECT honker_stream_append('orders', '1', '{opts}')"),
    );
    let want = json!({"traceparent": PARENT, "tracestate": "congo=t61rcWkgMzE"});
    let text = |v: honker::Value| match v {
        honker::Value::Text(s) => serde_json::from_str::<serde_json::Value>(&s).unwrap(),
        other => panic!("not text: {other:?}"),
    };
    let claimed = text(common::sql(
        &t.db,
        "SELECT honker_queue_claim('mail', 'w', 1, NULL)",
    ));
    assert_eq!(claimed[0]["trace_context"], want);
    let job = text(common::sql(
        &t.db,
        &format!("SELECT honker_job_get('mail', {})", claimed[0]["id"]),
    ));
    assert_eq!(job["trace_context"], want);
    let events = text(common::sql(
        &t.db,
        "SELECT honker_stream_read('orders', 0, 10)",
    ));
    assert_eq!(events[0]["trace_context"], want);

    // Bad headers are refused and write nothing.
    let before = (t.snapshot(), t.count("_honker_stream_events"));
    for bad in [
        r#"{"traceparent": "00-nope"}"#,
        r#"{"tracestate": "a=b"}"#,
        r#"{"traceparent": 7}"#,
    ] {
        for call in [
            format!("SELECT honker_queue_enqueue('mail', '2', '{bad}')"),
            format!("SELECT honker_stream_append('orders', '2', '{bad}')"),
        ] {
            let tx = t.db.transaction().unwrap();
            let e = tx.query(&call, []).unwrap_err();
            assert_eq!(common::code(&e), "INVALID_ARGUMENT", "{call}: {e}");
        }
    }
    assert_eq!((t.snapshot(), t.count("_honker_stream_events")), before);
}
