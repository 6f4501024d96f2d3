//! Streams through SQL on honker's own connection (ADR 20): dense per-stream
//! offsets that a rollback leaves without a gap, idempotent publishes,
//! consumer offsets as "the next to read" that commit with the caller's
//! transaction, info with exact lag, Honker's four stream functions with
//! Honker's contracts, and coded errors that change nothing.

mod common;

use std::time::Duration;

use common::test_db;
use honker::Value;
use serde_json::{json, Value as Json};

fn one(t: &common::TestDb, sql: &str) -> honker::Result<Value> {
    let tx = t.db.transaction()?;
    let v = tx.query(sql, [])?.rows.remove(0).remove(0);
    tx.commit()?;
    Ok(v)
}

fn int(t: &common::TestDb, sql: &str) -> i64 {
    match one(t, sql).unwrap() {
        Value::Integer(n) => n,
        v => panic!("{sql}: {v:?}"),
    }
}

fn json_of(t: &common::TestDb, sql: &str) -> Json {
    match one(t, sql).unwrap() {
        Value::Text(s) => serde_json::from_str(&s).unwrap(),
        v => panic!("{sql}: {v:?}"),
    }
}

#[test]
fn offsets_are_dense_per_stream_and_a_rollback_leaves_no_gap() {
    let t = test_db();
    assert_eq!(
        int(&t, "SELECT honker_stream_append('orders', '{\"n\":1}')"),
        1
    );
    assert_eq!(
        int(&t, "SELECT honker_stream_append('orders', '{\"n\":2}')"),
        2
    );
    assert_eq!(
        int(&t, "SELECT honker_stream_append('audit', '\"a\"')"),
        1,
        "per stream"
    );
    // Published inside a transaction that rolls back: no event, no gap.
    let tx = t.db.transaction().unwrap();
    tx.query(
        "SELECT honker_stream_append('orders', '{\"n\":\"rolled back\"}')",
        [],
    )
    .unwrap();
    tx.rollback().unwrap();
    assert_eq!(
        int(
            &t,
            "SELECT honker_stream_append('orders', '{\"n\":3}', '{\"key\":\"user-7\"}')"
        ),
        3
    );
    let events = json_of(&t, "SELECT honker_stream_read('orders', 0, 10)");
    assert_eq!(
        events,
        json!([
            {"offset": 1, "key": null, "payload": {"n": 1}, "created_at": 1_700_000_000_000i64,
             "priority": 0, "trace_context": null},
            {"offset": 2, "key": null, "payload": {"n": 2}, "created_at": 1_700_000_000_000i64,
             "priority": 0, "trace_context": null},
            {"offset": 3, "key": "user-7", "payload": {"n": 3}, "created_at": 1_700_000_000_000i64,
             "priority": 0, "trace_context": null},
        ])
    );
    assert_eq!(
        json_of(&t, "SELECT honker_stream_read('orders', 2, 10)")[0]["offset"],
        3
    );
    assert_eq!(
        json_of(&t, "SELECT honker_stream_read('orders', 0, 1)")
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        json_of(&t, "SELECT honker_stream_read('none', 0, 10)"),
        json!([])
    );
}

#[test]
fn an_idempotent_publish_returns_the_original_offset_within_its_window() {
    let t = test_db();
    let sql =
        "SELECT honker_stream_append('s', '{\"order\":9}', '{\"idempotency_key\":\"order-9\"}')";
    assert_eq!(int(&t, sql), 1);
    // The producer that died after commit retries: the same offset, nothing new.
    assert_eq!(int(&t, sql), 1);
    assert_eq!(json_of(&t, "SELECT honker_stream_info('s')")["length"], 1);
    // The same key for another payload is a mistake, and changes nothing.
    let before = t.snapshot();
    let err = one(
        &t,
        "SELECT honker_stream_append('s', '{\"order\":10}', '{\"idempotency_key\":\"order-9\"}')",
    )
    .unwrap_err();
    assert!(
        err.message()
            .starts_with("INVALID_ARGUMENT: idempotency key"),
        "{err}"
    );
    assert_eq!(t.snapshot(), before);
    // The same value in another encoder's text (keys reordered, spaces, a
    // whole number as a float) is the same payload; another value is not.
    let retry = |payload: &str| {
        one(
            &t,
            &format!(
                "SELECT honker_stream_append('s', '{payload}', '{{\"idempotency_key\":\"order-9\"}}')"
            ),
        )
    };
    assert_eq!(retry("{ \"order\": 9.0 }").unwrap(), Value::Integer(1));
    assert!(retry("{\"order\":9.5}").is_err());
    assert!(retry("{\"order\":9,\"x\":null}").is_err());
    let pair = |payload: &str| {
        one(
            &t,
            &format!(
                "SELECT honker_stream_append('p', '{payload}', '{{\"idempotency_key\":\"k\"}}')"
            ),
        )
    };
    let first = pair("{\"b\":[1,{\"d\":1,\"c\":2}],\"a\":\"x\"}").unwrap();
    assert_eq!(
        pair("{\"a\":\"x\", \"b\":[1.0,{\"c\":2,\"d\":1}]}").unwrap(),
        first
    );
    assert!(pair("{\"a\":\"x\",\"b\":[{\"c\":2,\"d\":1},1]}").is_err());
    // After the 24 h window the key is free again.
    t.clock.advance(Duration::from_secs(24 * 3600 + 1));
    assert_eq!(int(&t, sql), 2);
}

#[test]
fn a_consumer_offset_is_the_next_to_read_and_commits_with_the_callers_transaction() {
    let t = test_db();
    for i in 0..5 {
        int(&t, &format!("SELECT honker_stream_append('s', '{i}')"));
    }
    assert_eq!(
        one(&t, "SELECT honker_stream_position('s', 'proj')").unwrap(),
        Value::Null
    );
    // The projection and its offset in one transaction that rolls back: both gone.
    t.db.execute("CREATE TABLE projection (n INTEGER)", [])
        .unwrap();
    let tx = t.db.transaction().unwrap();
    tx.execute("INSERT INTO projection VALUES (0)", []).unwrap();
    tx.query("SELECT honker_stream_commit('s', 'proj', 2)", [])
        .unwrap();
    tx.rollback().unwrap();
    assert_eq!(
        one(&t, "SELECT honker_stream_position('s', 'proj')").unwrap(),
        Value::Null
    );
    // Committed with the rows: both there.
    let tx = t.db.transaction().unwrap();
    tx.execute("INSERT INTO projection VALUES (0), (1)", [])
        .unwrap();
    tx.query("SELECT honker_stream_commit('s', 'proj', 3)", [])
        .unwrap();
    tx.commit().unwrap();
    assert_eq!(int(&t, "SELECT honker_stream_position('s', 'proj')"), 3);
    // A commit never moves back; seek does, explicitly.
    assert_eq!(int(&t, "SELECT honker_stream_commit('s', 'proj', 2)"), 3);
    assert_eq!(int(&t, "SELECT honker_stream_seek('s', 'proj', 1)"), 1);
    assert_eq!(
        int(&t, "SELECT honker_stream_commit('s', 'proj', 6)"),
        6,
        "one past the end"
    );
    int(&t, "SELECT honker_stream_commit('s', 'slow', 2)");
    let info = json_of(&t, "SELECT honker_stream_info('s')");
    assert_eq!(
        info,
        json!({"length": 5, "first_offset": 1, "last_offset": 5, "consumers": [
            {"consumer": "proj", "next_offset": 6, "lag": 0},
            {"consumer": "slow", "next_offset": 2, "lag": 4},
        ], "groups": []})
    );
    // An idle consumer's offset never expires.
    t.clock.advance(Duration::from_secs(90 * 86_400));
    assert_eq!(int(&t, "SELECT honker_stream_position('s', 'slow')"), 2);
}

#[test]
fn honkers_stream_functions_keep_honkers_contracts() {
    let t = test_db();
    assert_eq!(
        int(
            &t,
            "SELECT honker_stream_publish('orders', NULL, '{\"n\":1}')"
        ),
        1
    );
    assert_eq!(
        int(
            &t,
            "SELECT honker_stream_publish('orders', 'k', '{\"n\":2}')"
        ),
        2
    );
    // read_since: offsets above x, payload a JSON string, seconds, the topic.
    assert_eq!(
        json_of(&t, "SELECT honker_stream_read_since('orders', 0, 10)"),
        json!([
            {"offset": 1, "topic": "orders", "key": null, "payload": "{\"n\":1}", "created_at": 1_700_000_000},
            {"offset": 2, "topic": "orders", "key": "k", "payload": "{\"n\":2}", "created_at": 1_700_000_000},
        ])
    );
    assert_eq!(
        json_of(&t, "SELECT honker_stream_read_since('orders', 1, 10.0)")[0]["offset"],
        2
    );
    // Offsets: Honker's is "last processed"; it only advances (1/0).
    assert_eq!(int(&t, "SELECT honker_stream_get_offset('c', 'orders')"), 0);
    assert_eq!(
        int(&t, "SELECT honker_stream_save_offset('c', 'orders', 1)"),
        1
    );
    assert_eq!(int(&t, "SELECT honker_stream_get_offset('c', 'orders')"), 1);
    assert_eq!(
        int(&t, "SELECT honker_stream_save_offset('c', 'orders', 1)"),
        0
    );
    assert_eq!(
        int(&t, "SELECT honker_stream_save_offset('c', 'orders', 0)"),
        0,
        "never back"
    );
    // Ours sees the same place as "next to read".
    assert_eq!(int(&t, "SELECT honker_stream_position('orders', 'c')"), 2);
    assert_eq!(
        int(&t, "SELECT honker_stream_save_offset('c', 'orders', 2)"),
        1
    );
    assert_eq!(
        json_of(&t, "SELECT honker_stream_info('orders')")["consumers"][0]["lag"],
        0
    );
}

#[test]
fn bad_stream_calls_are_coded_and_change_nothing() {
    let t = test_db();
    int(&t, "SELECT honker_stream_append('s', '1')");
    let before = t.snapshot();
    for (sql, code) in [
        ("SELECT honker_stream_append('', '1')", "INVALID_ARGUMENT"),
        ("SELECT honker_stream_append(NULL, '1')", "INVALID_ARGUMENT"),
        (
            "SELECT honker_stream_append('s', '{oops')",
            "INVALID_ARGUMENT",
        ),
        ("SELECT honker_stream_append('s', NULL)", "INVALID_ARGUMENT"),
        ("SELECT honker_stream_append('s')", "INVALID_ARGUMENT"),
        (
            "SELECT honker_stream_append('s', '1', '{\"nope\":\"x\"}')",
            "INVALID_ARGUMENT",
        ),
        (
            "SELECT honker_stream_append('s', '1', '{\"key\":5}')",
            "INVALID_ARGUMENT",
        ),
        (
            "SELECT honker_stream_append('s', '1', '{\"key\":\"\"}')",
            "INVALID_ARGUMENT",
        ),
        (
            "SELECT honker_stream_append('s', '1', 'not json')",
            "INVALID_ARGUMENT",
        ),
        ("SELECT honker_stream_read('s', -1, 10)", "INVALID_ARGUMENT"),
        ("SELECT honker_stream_read('s', 0, 0)", "INVALID_ARGUMENT"),
        (
            "SELECT honker_stream_read('s', 0, 100000)",
            "INVALID_ARGUMENT",
        ),
        (
            "SELECT honker_stream_commit('s', 'c', 0)",
            "INVALID_ARGUMENT",
        ),
        (
            "SELECT honker_stream_commit('s', 'c', 3)",
            "INVALID_ARGUMENT",
        ),
        (
            "SELECT honker_stream_commit('s', '', 1)",
            "INVALID_ARGUMENT",
        ),
        ("SELECT honker_stream_seek('s', 'c', 9)", "INVALID_ARGUMENT"),
        (
            "SELECT honker_stream_publish('s', NULL, '{oops')",
            "INVALID_ARGUMENT",
        ),
        (
            "SELECT honker_stream_save_offset('c', 's', -1)",
            "INVALID_ARGUMENT",
        ),
        (
            "SELECT honker_stream_read_since('s', 0, -1)",
            "INVALID_ARGUMENT",
        ),
    ] {
        let err = one(&t, sql).unwrap_err();
        assert!(err.message().contains(&format!("{code}: ")), "{sql}: {err}");
    }
    assert_eq!(t.snapshot(), before);
}

// ----- the Rust handle and subscriptions ------------------------------------

use honker::runtime::{AutoCommit, Subscription};
use honker::stream::{PublishOptions, Start, StreamRetention};

#[test]
fn a_priority_is_stored_with_the_event_and_read_back_everywhere_in_offset_order() {
    let t = test_db();
    let s = t.db.stream("orders").unwrap();
    let urgent = PublishOptions {
        priority: 7,
        ..PublishOptions::default()
    };
    s.publish(json!("plain"), &PublishOptions::default())
        .unwrap();
    s.publish(json!("urgent"), &urgent).unwrap();
    s.publish_many_with(
        None,
        [json!("b1"), json!("b2")],
        &PublishOptions {
            priority: -3,
            ..urgent.clone()
        },
    )
    .unwrap();
    // Through SQL (the table's options, read by name) and read back by both.
    int(
        &t,
        "SELECT honker_stream_append('orders', '\"sql\"', '{\"priority\": 2147483647}')",
    );
    let events = s.read(0, 10).unwrap();
    assert_eq!(
        events
            .iter()
            .map(|e| (e.offset, e.priority))
            .collect::<Vec<_>>(),
        [(1, 0), (2, 7), (3, -3), (4, -3), (5, i32::MAX)]
    );
    let rows = json_of(&t, "SELECT honker_stream_read('orders', 0, 10)");
    let got: Vec<i64> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["priority"].as_i64().unwrap())
        .collect();
    assert_eq!(got, [0, 7, -3, -3, i64::from(i32::MAX)]);
    // Not an integer of 32 bits: refused, nothing written.
    let before = t.snapshot();
    for bad in ["2147483648", "1.5", "\"high\""] {
        let sql = format!("SELECT honker_stream_append('orders', '1', '{{\"priority\": {bad}}}')");
        let err = one(&t, &sql).unwrap_err();
        assert!(
            err.message()
                .contains("priority must be an integer of 32 bits"),
            "{err}"
        );
    }
    assert_eq!(t.snapshot(), before);
}

#[test]
fn the_stream_handle_publishes_inside_the_callers_transaction() {
    let t = test_db();
    let s = t.db.stream("orders").unwrap();
    assert_eq!(
        s.publish(json!({"n": 1}), &PublishOptions::default())
            .unwrap(),
        1
    );
    let tx = t.db.transaction().unwrap();
    s.publish_tx(&tx, json!({"n": "gone"}), &PublishOptions::default())
        .unwrap();
    tx.rollback().unwrap();
    assert_eq!(
        s.publish_many([json!(2), json!(3)], Some("batch")).unwrap(),
        vec![2, 3]
    );
    let retry = PublishOptions {
        idempotency_key: Some("order-4".into()),
        ..PublishOptions::default()
    };
    assert_eq!(s.publish(json!(4), &retry).unwrap(), 4);
    assert_eq!(s.publish(json!(4), &retry).unwrap(), 4);
    let events = s.read(0, 10).unwrap();
    assert_eq!(
        events.iter().map(|e| e.offset).collect::<Vec<_>>(),
        [1, 2, 3, 4]
    );
    assert_eq!(events[1].key.as_deref(), Some("batch"));
    assert_eq!(events[3].payload.as_json().unwrap(), json!(4));
    let info = s.info().unwrap();
    assert_eq!(
        (info.length, info.first_offset, info.last_offset),
        (4, Some(1), 4)
    );
    assert!(t.db.stream("").is_err());
    assert!(s.read(-1, 10).is_err());
    assert!(s.publish_many(Vec::<Json>::new(), None).unwrap().is_empty());
}

#[test]
fn a_subscription_hands_out_each_event_once_and_resumes_where_it_committed() {
    let t = test_db();
    let s = t.db.stream("s").unwrap();
    s.publish_many((1..=5).map(|i| json!(i)), None).unwrap();
    let sub = s.subscribe("proj", Start::Beginning).unwrap();
    let w = Duration::ZERO;
    let got: Vec<i64> = (0..3)
        .map(|_| sub.next(w).unwrap().unwrap().offset)
        .collect();
    assert_eq!(got, [1, 2, 3]);
    // Closing commits what was passed: events 1 and 2 (3 was handed out but
    // `next` was not called again, so it is not known to be processed).
    sub.close().unwrap();
    assert_eq!(s.position("proj").unwrap(), Some(3));
    assert_eq!(sub.next(w).unwrap(), None, "closed");
    let sub = s.subscribe("proj", Start::Latest).unwrap();
    let rest: Vec<i64> = std::iter::from_fn(|| sub.next(w).unwrap().map(|e| e.offset)).collect();
    assert_eq!(
        rest,
        [3, 4, 5],
        "a stored offset wins over the start position"
    );
    drop(sub);
    assert_eq!(s.position("proj").unwrap(), Some(6), "dropped: committed");
    assert_eq!(s.info().unwrap().consumers[0].lag, 0);
}

#[test]
fn start_positions_apply_only_without_a_committed_offset() {
    let t = test_db();
    let s = t.db.stream("s").unwrap();
    s.publish_many((1..=3).map(|i| json!(i)), None).unwrap();
    t.clock.advance(Duration::from_secs(10));
    let later = 1_700_000_010_000i64;
    s.publish_many((4..=5).map(|i| json!(i)), None).unwrap();
    assert_eq!(s.start("a", Start::Beginning).unwrap(), 1);
    assert_eq!(s.start("b", Start::Latest).unwrap(), 6);
    assert_eq!(s.start("c", Start::Offset(4)).unwrap(), 4);
    assert_eq!(s.start("d", Start::Time(later)).unwrap(), 4);
    assert_eq!(s.start("e", Start::Time(later + 1)).unwrap(), 6);
    // Stored at once: a restart with another start changes nothing.
    assert_eq!(s.start("b", Start::Beginning).unwrap(), 6);
    let err = s.start("f", Start::Offset(7)).unwrap_err();
    assert_eq!(err.kind(), honker::ErrorKind::InvalidArgument);
    assert_eq!(
        s.position("f").unwrap(),
        None,
        "a refused start stores nothing"
    );
}

#[test]
fn a_subscription_commit_inside_a_rolled_back_transaction_leaves_the_offset() {
    let t = test_db();
    let s = t.db.stream("s").unwrap();
    s.publish_many((1..=2).map(|i| json!(i)), None).unwrap();
    let sub = Subscription::new(&s, "proj", Start::Beginning, 10, None).unwrap();
    let e = sub.next(Duration::ZERO).unwrap().unwrap();
    let tx = t.db.transaction().unwrap();
    sub.commit_tx(&tx, &e).unwrap();
    tx.rollback().unwrap();
    assert_eq!(s.position("proj").unwrap(), Some(1));
    let tx = t.db.transaction().unwrap();
    sub.commit_tx(&tx, &e).unwrap();
    tx.commit().unwrap();
    assert_eq!(s.position("proj").unwrap(), Some(2));
    // Without auto-commit, close commits nothing more.
    sub.next(Duration::ZERO).unwrap().unwrap();
    sub.next(Duration::ZERO).unwrap();
    sub.close().unwrap();
    assert_eq!(s.position("proj").unwrap(), Some(2));
}

#[test]
fn a_waiting_subscription_wakes_on_a_publish_and_auto_commits_every_n() {
    let t = test_db();
    let s = t.db.stream("s").unwrap();
    let sub = Subscription::new(
        &s,
        "live",
        Start::Latest,
        10,
        Some(AutoCommit {
            every: 2,
            interval: Duration::from_secs(3600),
        }),
    )
    .unwrap();
    let started = std::time::Instant::now();
    let got = std::thread::scope(|scope| {
        let waiter = scope.spawn(|| sub.next(Duration::from_secs(10)).unwrap());
        std::thread::sleep(Duration::from_millis(100));
        s.publish(json!("hello"), &PublishOptions::default())
            .unwrap();
        waiter.join().unwrap()
    });
    assert_eq!(got.unwrap().payload.as_json().unwrap(), json!("hello"));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "woken, not timed out"
    );
    s.publish_many((0..3).map(|i| json!(i)), None).unwrap();
    // This `next` passes event 1: one passed, not committed yet.
    assert_eq!(sub.next(Duration::ZERO).unwrap().unwrap().offset, 2);
    assert_eq!(s.position("live").unwrap(), Some(1), "one passed: not yet");
    // Two passed (1, 2): committed "next = 3".
    assert_eq!(sub.next(Duration::ZERO).unwrap().unwrap().offset, 3);
    assert_eq!(s.position("live").unwrap(), Some(3));
    assert_eq!(sub.next(Duration::ZERO).unwrap().unwrap().offset, 4);
    assert_eq!(s.position("live").unwrap(), Some(3));
    // A closed subscription's waiting `next` returns at once.
    let sub = std::sync::Arc::new(sub);
    let s2 = std::sync::Arc::clone(&sub);
    let waiter = std::thread::spawn(move || {
        // Drain what is left, then wait.
        while s2.next(Duration::ZERO).unwrap().is_some() {}
        s2.next(Duration::from_secs(30)).unwrap()
    });
    std::thread::sleep(Duration::from_millis(100));
    let t0 = std::time::Instant::now();
    sub.close().unwrap();
    assert_eq!(waiter.join().unwrap(), None);
    assert!(t0.elapsed() < Duration::from_secs(2));
    assert_eq!(
        s.position("live").unwrap(),
        Some(5),
        "all four passed and committed"
    );
}

#[test]
fn retention_by_count_and_passed_never_drops_what_a_consumer_still_needs() {
    let t = test_db();
    let s = t.db.stream("s").unwrap();
    assert_eq!(s.retention().unwrap(), StreamRetention::default());
    s.publish_many((1..=10).map(|i| json!(i)), None).unwrap();
    s.start("slow", Start::Offset(3)).unwrap();
    s.start("fast", Start::Offset(9)).unwrap();
    s.set_retention(&StreamRetention {
        max_age: None,
        max_count: Some(2),
        trim_passed: false,
    })
    .unwrap();
    // The count limit says "keep 9 and 10", but "slow" still needs 3.
    assert_eq!(s.trim().unwrap(), 2);
    assert_eq!(s.info().unwrap().first_offset, Some(3));
    s.commit("slow", 6).unwrap();
    assert_eq!(t.db.maintain().unwrap().stream_events, 3, "3, 4, 5");
    assert_eq!(s.info().unwrap().first_offset, Some(6));
    // trim_passed: everything both consumers passed (below 6) is gone
    // already; with slow at 9 too, 6..8 go.
    s.set_retention(&StreamRetention {
        max_age: None,
        max_count: None,
        trim_passed: true,
    })
    .unwrap();
    s.commit("slow", 9).unwrap();
    assert_eq!(s.trim().unwrap(), 3);
    let info = s.info().unwrap();
    assert_eq!((info.first_offset, info.length), (Some(9), 2));
    // Offsets continue after a trim; nobody saw a TRIMMED.
    assert_eq!(
        s.publish(json!(11), &PublishOptions::default()).unwrap(),
        11
    );
    let sub = s.subscribe("slow", Start::Beginning).unwrap();
    let got: Vec<i64> =
        std::iter::from_fn(|| sub.next(Duration::ZERO).unwrap().map(|e| e.offset)).collect();
    assert_eq!(got, [9, 10, 11]);
}

#[test]
fn the_age_limit_trims_unread_events_and_the_consumer_is_told_how_many() {
    let t = test_db();
    let s = t.db.stream("s").unwrap();
    s.publish_many((1..=5).map(|i| json!(i)), None).unwrap();
    let sub = Subscription::new(&s, "c", Start::Beginning, 2, None).unwrap();
    assert_eq!(sub.next(Duration::ZERO).unwrap().unwrap().offset, 1);
    // 8 days later (the default age limit is 7 days), 2 more events.
    t.clock.advance(Duration::from_secs(8 * 86_400));
    s.publish_many((6..=7).map(|i| json!(i)), None).unwrap();
    // The subscription holds 2 in its buffer; events 1-5 are trimmed (by
    // the slice of maintenance that follows a commit, or by this call).
    t.db.maintain().unwrap();
    assert_eq!(s.info().unwrap().first_offset, Some(6));
    assert_eq!(
        sub.next(Duration::ZERO).unwrap().unwrap().offset,
        2,
        "buffered"
    );
    let err = sub.next(Duration::ZERO).unwrap_err();
    assert_eq!(err.kind(), honker::ErrorKind::Trimmed);
    assert_eq!(err.missed(), Some(3), "{err}");
    assert_eq!(sub.next(Duration::ZERO).unwrap().unwrap().offset, 6);
    assert_eq!(sub.next(Duration::ZERO).unwrap().unwrap().offset, 7);
    assert_eq!(sub.next(Duration::ZERO).unwrap(), None);
    // A consumer whose committed place was trimmed: TRIMMED on its first read.
    s.start("late", Start::Offset(6)).unwrap();
    t.clock.advance(Duration::from_secs(8 * 86_400));
    assert_eq!(s.trim().unwrap(), 2);
    s.publish(json!(8), &PublishOptions::default()).unwrap();
    let late = s.subscribe("late", Start::Beginning).unwrap();
    let err = late.next(Duration::ZERO).unwrap_err();
    assert_eq!(
        (err.kind(), err.missed()),
        (honker::ErrorKind::Trimmed, Some(2))
    );
    assert_eq!(late.next(Duration::ZERO).unwrap().unwrap().offset, 8);
    late.close().unwrap();
    assert_eq!(
        s.position("late").unwrap(),
        Some(8),
        "the missed count as passed"
    );
    // Everything trimmed and nothing new: a consumer behind is told too.
    s.start("idle", Start::Offset(8)).unwrap();
    t.clock.advance(Duration::from_secs(8 * 86_400));
    s.trim().unwrap();
    let idle = Subscription::new(&s, "idle", Start::Beginning, 10, None).unwrap();
    let err = idle.next(Duration::ZERO).unwrap_err();
    assert_eq!(err.missed(), Some(1));
    assert_eq!(idle.next(Duration::ZERO).unwrap(), None);
    // A start before the first retained event is TRIMMED and stores nothing.
    s.publish(json!(9), &PublishOptions::default()).unwrap();
    let err = s.start("new", Start::Offset(2)).unwrap_err();
    assert_eq!(
        (err.kind(), err.missed()),
        (honker::ErrorKind::Trimmed, Some(7))
    );
    assert_eq!(s.position("new").unwrap(), None);
}

#[test]
fn retention_settings_are_checked_shared_and_reachable_from_sql() {
    let t = test_db();
    let s = t.db.stream("s").unwrap();
    let before = t.snapshot();
    for bad in [
        StreamRetention {
            max_age: Some(Duration::from_millis(10)),
            ..StreamRetention::default()
        },
        StreamRetention {
            max_count: Some(0),
            ..StreamRetention::default()
        },
    ] {
        let err = s.set_retention(&bad).unwrap_err();
        assert_eq!(err.kind(), honker::ErrorKind::InvalidArgument, "{bad:?}");
    }
    for sql in [
        "SELECT honker_stream_set_retention('s', '{\"max_count\": 0}')",
        "SELECT honker_stream_set_retention('s', '{\"max_age_ms\": -5}')",
        "SELECT honker_stream_set_retention('s', '{\"bogus\": 1}')",
        "SELECT honker_stream_set_retention('s', '[]')",
        "SELECT honker_stream_set_retention('s', '{\"trim_passed\": 1}')",
    ] {
        let err = one(&t, sql).unwrap_err();
        assert!(err.message().contains("INVALID_ARGUMENT: "), "{sql}: {err}");
    }
    assert_eq!(t.snapshot(), before, "nothing changed");
    assert_eq!(
        json_of(&t, "SELECT honker_stream_retention('s')"),
        json!({"max_age_ms": 604_800_000, "max_count": null, "trim_passed": false})
    );
    assert_eq!(
        json_of(
            &t,
            "SELECT honker_stream_set_retention('s', '{\"max_age_ms\": null, \"max_count\": 3}')"
        ),
        json!({"max_age_ms": null, "max_count": 3, "trim_passed": false})
    );
    // Another connection (another process) sees it.
    let other = t.reopen();
    assert_eq!(
        other.stream("s").unwrap().retention().unwrap(),
        StreamRetention {
            max_age: None,
            max_count: Some(3),
            trim_passed: false
        }
    );
    s.publish_many((1..=5).map(|i| json!(i)), None).unwrap();
    assert_eq!(int(&t, "SELECT honker_stream_trim('s')"), 2);
    assert_eq!(int(&t, "SELECT honker_stream_trim('s')"), 0);
}

#[test]
fn publish_keys_are_forgotten_after_their_window() {
    let t = test_db();
    let s = t.db.stream("s").unwrap();
    let o = PublishOptions {
        idempotency_key: Some("k".into()),
        ..PublishOptions::default()
    };
    assert_eq!(s.publish(json!(1), &o).unwrap(), 1);
    assert_eq!(t.db.maintain().unwrap().publish_keys, 0);
    t.clock.advance(Duration::from_secs(25 * 3600));
    assert_eq!(t.db.maintain().unwrap().publish_keys, 1);
    assert_eq!(t.count("_honker_stream_publish_keys"), 0);
    assert_eq!(s.publish(json!(2), &o).unwrap(), 2, "a new event");
}

#[test]
fn a_temp_trigger_publishes_on_insert_and_a_stored_one_cannot() {
    let t = test_db();
    let tx = t.db.transaction().unwrap();
    tx.execute(
        "CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER)",
        [],
    )
    .unwrap();
    tx.execute(
        "CREATE TEMP TRIGGER orders_cdc AFTER INSERT ON orders BEGIN \
         SELECT honker_stream_append('orders', json_object('id', NEW.id, 'total', NEW.total)); END",
        [],
    )
    .unwrap();
    tx.execute("INSERT INTO orders (total) VALUES (10), (20)", [])
        .unwrap();
    tx.commit().unwrap();
    let events = t.db.stream("orders").unwrap().read(0, 10).unwrap();
    let payloads: Vec<Json> = events
        .iter()
        .map(|e| e.payload.as_json().unwrap())
        .collect();
    assert_eq!(
        payloads,
        [json!({"id": 1, "total": 10}), json!({"id": 2, "total": 20})]
    );
    // A trigger stored in the file cannot call it (DIRECTONLY).
    let tx = t.db.transaction().unwrap();
    tx.execute(
        "CREATE TRIGGER stored AFTER INSERT ON orders BEGIN \
         SELECT honker_stream_append('orders', '1'); END",
        [],
    )
    .unwrap();
    let err = tx
        .execute("INSERT INTO orders (total) VALUES (30)", [])
        .unwrap_err();
    assert!(err.to_string().contains("unsafe use"), "{err}");
    drop(tx);
    assert_eq!(
        t.db.stream("orders").unwrap().info().unwrap().last_offset,
        2
    );
}

#[test]
fn a_cancel_token_ends_a_waiting_subscription_and_listener_and_loses_nothing() {
    let t = test_db();
    let s = t.db.stream("orders").unwrap();
    let sub = std::sync::Arc::new(
        honker::runtime::Subscription::new(&s, "c", honker::stream::Start::Beginning, 10, None)
            .unwrap(),
    );
    let listener = std::sync::Arc::new(t.db.listen("ch").unwrap());
    let cancel = honker::runtime::Cancel::new(&t.db);
    let (sub2, l2, c2) = (sub.clone(), listener.clone(), cancel.clone());
    let waiter = std::thread::spawn(move || {
        let started = std::time::Instant::now();
        let e = c2.next(&*sub2, Duration::from_secs(30)).unwrap();
        let n = c2.next(&*l2, Duration::from_secs(30)).unwrap();
        (e.is_none(), n.is_none(), started.elapsed())
    });
    std::thread::sleep(Duration::from_millis(200));
    cancel.cancel();
    let (no_event, no_note, took) = waiter.join().unwrap();
    assert!(no_event && no_note);
    assert!(took < Duration::from_secs(10), "{took:?}");
    // Both stay open: what comes next is still handed out, once.
    assert!(!sub.is_closed() && !listener.is_closed());
    s.publish(json!(1), &Default::default()).unwrap();
    t.db.notify("ch", json!("n")).unwrap();
    assert_eq!(sub.next(Duration::ZERO).unwrap().unwrap().offset, 1);
    assert_eq!(listener.next(Duration::ZERO).unwrap().unwrap().seq, 1);
    // A cancelled token ends later waits before they start.
    assert!(cancel
        .next(&*sub, Duration::from_secs(30))
        .unwrap()
        .is_none());
}
