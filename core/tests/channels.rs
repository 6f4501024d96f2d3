//! Notify/listen (ADR 20 rule 4): delivered after commit, in commit order,
//! to every listener listening at commit time; a rolled-back notify is never
//! seen; the window is trimmed without waiting for listeners, and a listener
//! behind it is told `TRIMMED` with the exact count; Honker's `notify(2)` and
//! its `_honker_notifications` readers keep working.

mod common;

use std::time::Duration;

use common::test_db;
use honker::channel::{ChannelRetention, MAX_NOTIFY_BYTES};
use honker::{ErrorKind, Value};
use serde_json::{json, Value as Json};

const NOW: Duration = Duration::ZERO;

fn payloads(l: &honker::runtime::Listener) -> Vec<Json> {
    std::iter::from_fn(|| l.next(NOW).unwrap().map(|m| m.payload.as_json().unwrap())).collect()
}

fn one(t: &common::TestDb, sql: &str) -> honker::Result<Value> {
    let tx = t.db.transaction()?;
    let v = tx.query(sql, [])?.rows.remove(0).remove(0);
    tx.commit()?;
    Ok(v)
}

#[test]
fn listeners_get_what_was_committed_after_they_started_in_order() {
    let t = test_db();
    t.db.notify("c", json!("before")).unwrap();
    let a = t.db.listen("c").unwrap();
    let other = t.db.listen("other").unwrap();
    t.db.notify("c", json!(1)).unwrap();
    assert_eq!(
        a.next(NOW).unwrap().unwrap().payload.as_json().unwrap(),
        json!(1)
    );
    let tx = t.db.transaction().unwrap();
    t.db.notify_tx(&tx, "c", json!("rolled back")).unwrap();
    tx.rollback().unwrap();
    let tx = t.db.transaction().unwrap();
    t.db.notify_tx(&tx, "c", json!(2)).unwrap();
    assert_eq!(a.next(NOW).unwrap(), None, "not before commit");
    tx.commit().unwrap();
    let b = t.db.listen("c").unwrap();
    t.db.notify("c", json!(3)).unwrap();
    assert_eq!(payloads(&a), [json!(2), json!(3)]);
    assert_eq!(payloads(&b), [json!(3)]);
    assert!(payloads(&other).is_empty());
    // Another connection (another process's view) listens the same way.
    let again = t.reopen();
    let c = again.listen("c").unwrap();
    t.db.notify("c", json!(4)).unwrap();
    assert_eq!(payloads(&c), [json!(4)]);
}

#[test]
fn a_waiting_listener_wakes_on_a_notify_and_on_close() {
    let t = test_db();
    let l = std::sync::Arc::new(t.db.listen("c").unwrap());
    let l2 = std::sync::Arc::clone(&l);
    let waiter = std::thread::spawn(move || l2.next(Duration::from_secs(30)).unwrap());
    std::thread::sleep(Duration::from_millis(100));
    let t0 = std::time::Instant::now();
    t.db.notify("c", json!("wake")).unwrap();
    let got = waiter.join().unwrap().unwrap();
    assert_eq!(got.payload.as_json().unwrap(), json!("wake"));
    assert!(t0.elapsed() < Duration::from_secs(5));
    let l2 = std::sync::Arc::clone(&l);
    let waiter = std::thread::spawn(move || l2.next(Duration::from_secs(30)).unwrap());
    std::thread::sleep(Duration::from_millis(100));
    l.close();
    assert_eq!(waiter.join().unwrap(), None);
}

#[test]
fn a_listener_that_keeps_up_never_misses_or_repeats_under_a_burst() {
    let t = test_db();
    let db = t.db.clone();
    let l = t.db.listen("burst").unwrap();
    let producer = std::thread::spawn(move || {
        for chunk in 0..50 {
            let tx = db.transaction().unwrap();
            for i in 0..100 {
                db.notify_tx(&tx, "burst", json!(chunk * 100 + i)).unwrap();
            }
            tx.commit().unwrap();
        }
    });
    let mut got = Vec::new();
    while got.len() < 5000 {
        match l.next(Duration::from_secs(10)).unwrap() {
            Some(m) => got.push(m.payload.as_json().unwrap().as_i64().unwrap()),
            None => panic!("timed out after {}", got.len()),
        }
    }
    producer.join().unwrap();
    assert_eq!(got, (0..5000).collect::<Vec<_>>());
}

#[test]
fn the_window_is_trimmed_without_listeners_and_a_listener_behind_is_told() {
    let t = test_db();
    let ch = t.db.channel("c").unwrap();
    assert_eq!(ch.retention().unwrap(), ChannelRetention::default());
    ch.set_retention(&ChannelRetention {
        max_age: Duration::from_secs(60),
        max_count: 100,
    })
    .unwrap();
    let slow = ch.listen().unwrap();
    for i in 0..1000 {
        ch.notify(json!(i)).unwrap();
    }
    // Trimmed by the notifying transactions themselves, within one slice.
    let kept = t.count("_honker_channel_messages");
    assert!((100..=100 + 256).contains(&kept), "{kept}");
    t.db.maintain().unwrap();
    assert_eq!(t.count("_honker_channel_messages"), 100);
    let err = slow.next(NOW).unwrap_err();
    assert_eq!(
        (err.kind(), err.missed()),
        (ErrorKind::Trimmed, Some(900)),
        "{err}"
    );
    let rest = payloads(&slow);
    assert_eq!(rest, (900..1000).map(|i| json!(i)).collect::<Vec<_>>());
    // By age: an hour later maintenance empties it, and a listener behind
    // an empty window is told too.
    let idle = ch.listen().unwrap();
    ch.notify(json!("x")).unwrap();
    t.clock.advance(Duration::from_secs(120));
    assert_eq!(t.db.maintain().unwrap().notifications, 101);
    let err = idle.next(NOW).unwrap_err();
    assert_eq!(err.missed(), Some(1));
    assert_eq!(idle.next(NOW).unwrap(), None);
    ch.notify(json!("y")).unwrap();
    assert_eq!(payloads(&idle), [json!("y")]);
}

#[test]
fn bad_notifies_are_coded_and_change_nothing() {
    let t = test_db();
    t.db.notify("c", json!(0)).unwrap();
    let before = t.snapshot();
    let big = "x".repeat(MAX_NOTIFY_BYTES);
    for err in [
        t.db.notify("", json!(1)).unwrap_err(),
        t.db.notify("c\0d", json!(1)).unwrap_err(),
        t.db.notify("c", json!(big)).unwrap_err(),
        t.db.notify("c", honker::Payload::Json("{oops".into()))
            .unwrap_err(),
        t.db.channel("c")
            .unwrap()
            .set_retention(&ChannelRetention {
                max_age: Duration::from_millis(5),
                max_count: 10,
            })
            .unwrap_err(),
        t.db.channel("c")
            .unwrap()
            .set_retention(&ChannelRetention {
                max_age: Duration::from_secs(5),
                max_count: 0,
            })
            .unwrap_err(),
    ] {
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    }
    for sql in [
        "SELECT notify('', '1')",
        "SELECT notify(NULL, '1')",
        "SELECT notify('c', NULL)",
        "SELECT honker_notify('c', 5)",
        "SELECT honker_channel_read('c', 0, 0)",
        "SELECT honker_channel_set_retention('c', 0, NULL)",
        "SELECT honker_channel_set_retention('c', NULL, 0)",
    ] {
        let err = one(&t, sql).unwrap_err();
        assert!(err.message().contains("INVALID_ARGUMENT: "), "{sql}: {err}");
    }
    let big_sql = format!("SELECT notify('c', '\"{}\"')", "y".repeat(MAX_NOTIFY_BYTES));
    assert!(one(&t, &big_sql)
        .unwrap_err()
        .message()
        .contains("INVALID_ARGUMENT"));
    assert_eq!(t.snapshot(), before);
}

#[test]
fn honkers_notify_and_its_readers_keep_working() {
    let t = test_db();
    let l = t.db.listen("orders").unwrap();
    // Honker's contract: notify(channel, payload) returns the row id; any
    // text is accepted (non-JSON text is kept as a JSON string).
    let id1 = match one(&t, "SELECT notify('orders', '{\"id\": 7}')").unwrap() {
        Value::Integer(n) => n,
        v => panic!("{v:?}"),
    };
    let id2 = match one(&t, "SELECT honker_notify('orders', 'plain text')").unwrap() {
        Value::Integer(n) => n,
        v => panic!("{v:?}"),
    };
    assert!(id2 > id1);
    assert_eq!(payloads(&l), [json!({"id": 7}), json!("plain text")]);
    // What Honker's listeners run, on the view with Honker's name.
    let tx = t.db.transaction().unwrap();
    let max = tx
        .query(
            "SELECT COALESCE(MAX(id), 0) FROM _honker_notifications WHERE channel = 'orders'",
            [],
        )
        .unwrap();
    assert_eq!(max.rows[0][0], Value::Integer(id2));
    let rows = tx
        .query(
            "SELECT id, channel, payload FROM _honker_notifications \
             WHERE channel = 'orders' AND id > ?1 ORDER BY id",
            [Value::Integer(0)],
        )
        .unwrap();
    assert_eq!(rows.rows.len(), 2);
    assert_eq!(rows.rows[0][2], Value::Text("{\"id\": 7}".into()));
    assert_eq!(rows.rows[1][2], Value::Text("\"plain text\"".into()));
    tx.commit().unwrap();
    // Ours, with ms and the per-channel sequence.
    let tx = t.db.transaction().unwrap();
    let v = tx
        .query("SELECT honker_channel_read('orders', 0, 10)", [])
        .unwrap();
    let Value::Text(s) = &v.rows[0][0] else {
        panic!()
    };
    let got: Json = serde_json::from_str(s).unwrap();
    assert_eq!(got[1]["seq"], json!(2));
    assert_eq!(got[1]["payload"], json!("plain text"));
    assert_eq!(got[0]["created_at"], json!(1_700_000_000_000i64));
    let w = tx
        .query(
            "SELECT honker_channel_set_retention('orders', 5000, NULL)",
            [],
        )
        .unwrap();
    assert_eq!(
        w.rows[0][0],
        Value::Text(json!({"max_age_ms": 5000, "max_count": 100000}).to_string())
    );
    tx.commit().unwrap();
}
