//! Consumer groups (ADR 21): competing members on a stream under leases and
//! tokens, dead letters after `max_deliveries`, per-key order, member
//! removal, several groups on one stream, retention that respects groups,
//! and typed errors that change nothing.

mod common;

use std::time::Duration;

use common::{code, json, keyed, test_db};
use honker::stream::group::{GroupEvent, GroupOptions};
use honker::stream::{PublishOptions, Start};
use honker::ErrorKind;

fn offsets(events: &[GroupEvent]) -> Vec<i64> {
    events.iter().map(|e| e.offset).collect()
}

fn opts(max_deliveries: u32, lease_ms: u64) -> GroupOptions {
    GroupOptions {
        max_deliveries,
        lease: Duration::from_millis(lease_ms),
        ..GroupOptions::default()
    }
}

#[test]
fn each_event_goes_to_one_member_and_a_stale_ack_is_refused() {
    let t = test_db();
    let s = t.db.stream("orders").unwrap();
    for i in 0..6 {
        s.publish(
            json(serde_json::json!({ "i": i })),
            &PublishOptions::default(),
        )
        .unwrap();
    }
    let g = s.group("mailers").unwrap();
    assert_eq!(g.create(Start::Beginning, &opts(5, 1000)).unwrap(), 1);
    let a = g.claim("a", 2, None).unwrap().events;
    let b = g.claim("b", 10, None).unwrap().events;
    assert_eq!(offsets(&a), vec![1, 2]);
    assert_eq!(offsets(&b), vec![3, 4, 5, 6]);
    assert!(g.claim("c", 10, None).unwrap().events.is_empty());
    assert_eq!(a[0].deliveries, 1);
    assert_eq!(a[0].payload, json(serde_json::json!({ "i": 0 })));

    // a's lease lapses; c reclaims event 1 (delivery 2); a's late ack is
    // refused and changes nothing; c's ack succeeds.
    g.ack(&a[1]).unwrap();
    t.clock.advance(Duration::from_millis(1001));
    for e in &b {
        g.heartbeat(e, Some(Duration::from_secs(60))).unwrap();
    }
    let c = g.claim("c", 10, None).unwrap().events;
    assert_eq!(offsets(&c), vec![1]);
    assert_eq!(c[0].deliveries, 2);
    let before = t.snapshot();
    let err = g.ack(&a[0]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LeaseLost, "{err}");
    assert!(g.heartbeat(&a[0], None).is_err());
    assert!(g.release(&a[0]).is_err());
    assert_eq!(t.snapshot(), before, "a refused outcome changed the file");
    g.ack(&c[0]).unwrap();
    for e in &b {
        g.ack(e).unwrap();
    }
    let info = g.info().unwrap();
    assert_eq!(
        (info.next_offset, info.lag, info.pending, info.dead),
        (7, 0, 0, 0)
    );
    assert_eq!(
        info.members
            .iter()
            .map(|m| m.member.as_str())
            .collect::<Vec<_>>(),
        ["a", "b", "c"]
    );
}

#[test]
fn a_lapsed_lease_that_nobody_reclaimed_is_still_honoured() {
    let t = test_db();
    let s = t.db.stream("s").unwrap();
    s.publish(json(serde_json::json!(1)), &PublishOptions::default())
        .unwrap();
    let g = s.group("g").unwrap();
    g.create(Start::Beginning, &opts(5, 100)).unwrap();
    let e = g.claim("a", 1, None).unwrap().events.remove(0);
    t.clock.advance(Duration::from_secs(10));
    g.ack(&e).unwrap();
    assert!(g.claim("b", 1, None).unwrap().events.is_empty());
}

#[test]
fn a_group_hands_out_each_events_priority_on_first_delivery_and_redelivery() {
    let t = test_db();
    let s = t.db.stream("s").unwrap();
    for priority in [0, 4, -2] {
        let o = PublishOptions {
            priority,
            ..PublishOptions::default()
        };
        s.publish(json(serde_json::json!(priority)), &o).unwrap();
    }
    let g = s.group("g").unwrap();
    g.create(Start::Beginning, &opts(5, 100)).unwrap();
    let first = g.claim("a", 3, None).unwrap().events;
    assert_eq!(
        first.iter().map(|e| e.priority).collect::<Vec<_>>(),
        [0, 4, -2]
    );
    // Redelivered after the lease lapses (read again from the events table).
    t.clock.advance(Duration::from_millis(101));
    let again = g.claim("b", 3, None).unwrap().events;
    assert_eq!(
        again
            .iter()
            .map(|e| (e.deliveries, e.priority))
            .collect::<Vec<_>>(),
        [(2, 0), (2, 4), (2, -2)]
    );
}

#[test]
fn reclaimed_events_come_first_oldest_idle_first_with_their_delivery_count() {
    let t = test_db();
    let s = t.db.stream("s").unwrap();
    for i in 0..5 {
        s.publish(json(serde_json::json!(i)), &PublishOptions::default())
            .unwrap();
    }
    let g = s.group("g").unwrap();
    g.create(Start::Beginning, &opts(5, 1000)).unwrap();
    let first = g
        .claim("a", 1, Some(Duration::from_millis(500)))
        .unwrap()
        .events;
    let second = g
        .claim("a", 1, Some(Duration::from_millis(200)))
        .unwrap()
        .events;
    assert_eq!((first[0].offset, second[0].offset), (1, 2));
    t.clock.advance(Duration::from_millis(600));
    // Event 2's lease ended first (at 200 ms): it has been idle longest.
    let got = g.claim("b", 3, None).unwrap().events;
    assert_eq!(offsets(&got), vec![2, 1, 3]);
    assert_eq!(
        got.iter().map(|e| e.deliveries).collect::<Vec<_>>(),
        vec![2, 2, 1]
    );
}

#[test]
fn a_poison_event_dies_after_max_deliveries_and_can_be_redriven() {
    let t = test_db();
    let s = t.db.stream("s").unwrap();
    for i in 0..3 {
        s.publish(json(serde_json::json!(i)), &PublishOptions::default())
            .unwrap();
    }
    let g = s.group("g").unwrap();
    g.create(Start::Beginning, &opts(3, 1000)).unwrap();
    // Event 1 fails each time; the others flow meanwhile.
    let mut acked = vec![];
    for round in 1..=3 {
        let got = g.claim("a", 10, None).unwrap().events;
        for e in got {
            if e.offset == 1 {
                assert_eq!(e.deliveries, round);
                let died = g.retry(&e, None, Some("boom")).unwrap();
                assert_eq!(died, round == 3);
            } else {
                g.ack(&e).unwrap();
                acked.push(e.offset);
            }
        }
    }
    assert_eq!(acked, vec![2, 3]);
    assert!(g.claim("a", 10, None).unwrap().events.is_empty());
    let dead = g.dead(0, 10).unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(
        (
            dead[0].offset,
            dead[0].deliveries,
            dead[0].last_error.as_deref()
        ),
        (1, 3, Some("boom"))
    );
    assert_eq!(dead[0].payload, json(serde_json::json!(0)));
    assert_eq!(g.info().unwrap().dead, 1);

    // A lapse on the last delivery is a death too.
    s.publish(
        json(serde_json::json!("lapses")),
        &PublishOptions::default(),
    )
    .unwrap();
    for _ in 0..3 {
        let got = g.claim("a", 10, None).unwrap().events;
        assert_eq!(offsets(&got), vec![4]);
        t.clock.advance(Duration::from_millis(1001));
    }
    assert!(g.claim("b", 10, None).unwrap().events.is_empty());
    let dead = g.dead(0, 10).unwrap();
    assert_eq!(offsets_dead(&dead), vec![1, 4]);
    assert!(dead[1]
        .last_error
        .as_deref()
        .unwrap()
        .contains("lease expired (member a)"));

    // Re-driven: deliveries start again.
    g.redrive(1).unwrap();
    assert_eq!(g.redrive(1).unwrap_err().kind(), ErrorKind::NotFound);
    let got = g.claim("b", 10, None).unwrap().events;
    assert_eq!((got[0].offset, got[0].deliveries), (1, 1));
    g.ack(&got[0]).unwrap();
    assert_eq!(g.redrive_all().unwrap(), 1);
    let got = g.claim("b", 10, None).unwrap().events;
    assert_eq!(offsets(&got), vec![4]);
    // fail: dead at once.
    g.fail(&got[0], "invalid address").unwrap();
    assert_eq!(
        g.dead(0, 10).unwrap()[0].last_error.as_deref(),
        Some("invalid address")
    );
}

fn offsets_dead(d: &[honker::stream::group::DeadEvent]) -> Vec<i64> {
    d.iter().map(|e| e.offset).collect()
}

#[test]
fn events_of_one_key_go_in_order_and_one_at_a_time() {
    let t = test_db();
    let s = t.db.stream("s").unwrap();
    // k1: 1, 3, 5; k2: 2, 6; no key: 4, 7.
    for (i, k) in ["k1", "k2", "k1", "", "k1", "k2", ""].iter().enumerate() {
        let o = if k.is_empty() {
            PublishOptions::default()
        } else {
            keyed(k)
        };
        s.publish(json(serde_json::json!(i + 1)), &o).unwrap();
    }
    let g = s.group("g").unwrap();
    g.create(Start::Beginning, &opts(5, 1000)).unwrap();
    let a = g.claim("a", 10, None).unwrap().events;
    assert_eq!(
        offsets(&a),
        vec![1, 2, 4, 7],
        "one per key, every keyless one"
    );
    assert!(g.claim("b", 10, None).unwrap().events.is_empty());
    // A retried head keeps its key: 3 still waits.
    let e1 = &a[0];
    g.retry(e1, Some(Duration::from_millis(50)), Some("later"))
        .unwrap();
    assert!(g.claim("b", 10, None).unwrap().events.is_empty());
    t.clock.advance(Duration::from_millis(50));
    let again = g.claim("b", 10, None).unwrap().events;
    assert_eq!(offsets(&again), vec![1]);
    g.ack(&again[0]).unwrap();
    // Its ack gives 3 its turn; acking 2 gives 6.
    g.ack(&a[1]).unwrap();
    let b = g.claim("b", 10, None).unwrap().events;
    assert_eq!(offsets(&b), vec![3, 6]);
    // A dead head frees its key too.
    g.fail(&b[0], "poison").unwrap();
    let c = g.claim("c", 10, None).unwrap().events;
    assert_eq!(offsets(&c), vec![5]);
    // Re-driven while its key is busy, the dead one waits for it.
    g.redrive(3).unwrap();
    assert!(g.claim("c", 10, None).unwrap().events.is_empty());
    g.ack(&c[0]).unwrap();
    assert_eq!(offsets(&g.claim("c", 10, None).unwrap().events), vec![3]);
}

#[test]
fn removing_a_member_that_holds_events_needs_force_and_frees_them_at_once() {
    let t = test_db();
    let s = t.db.stream("s").unwrap();
    for i in 0..2 {
        s.publish(json(serde_json::json!(i)), &PublishOptions::default())
            .unwrap();
    }
    let g = s.group("g").unwrap();
    g.create(Start::Beginning, &opts(5, 60_000)).unwrap();
    let held = g.claim("a", 2, None).unwrap().events;
    let before = t.snapshot();
    let err = g.remove_member("a", false).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert_eq!(t.snapshot(), before);
    assert_eq!(g.remove_member("a", true).unwrap(), 2);
    let got = g.claim("b", 2, None).unwrap().events;
    assert_eq!(offsets(&got), vec![1, 2], "claimable at once");
    assert_eq!(got[0].deliveries, 2);
    assert_eq!(g.ack(&held[0]).unwrap_err().kind(), ErrorKind::LeaseLost);
    assert_eq!(
        g.remove_member("nobody", false).unwrap_err().kind(),
        ErrorKind::NotFound
    );
}

#[test]
fn groups_on_one_stream_are_independent_and_start_where_told() {
    let t = test_db();
    let s = t.db.stream("s").unwrap();
    for i in 0..4 {
        s.publish(json(serde_json::json!(i)), &PublishOptions::default())
            .unwrap();
    }
    let all = s.group("all").unwrap();
    let new = s.group("new").unwrap();
    let mid = s.group("mid").unwrap();
    all.create(Start::Beginning, &GroupOptions::default())
        .unwrap();
    assert_eq!(
        new.create(Start::Latest, &GroupOptions::default()).unwrap(),
        5
    );
    assert_eq!(
        mid.create(Start::Offset(3), &GroupOptions::default())
            .unwrap(),
        3
    );
    // Registering again keeps the place, takes the options.
    all.claim("x", 1, None).unwrap();
    assert_eq!(all.create(Start::Latest, &opts(2, 5)).unwrap(), 2);
    assert_eq!(all.info().unwrap().options, opts(2, 5));
    s.publish(json(serde_json::json!(4)), &PublishOptions::default())
        .unwrap();
    assert_eq!(
        offsets(&all.claim("x", 10, None).unwrap().events),
        vec![2, 3, 4, 5]
    );
    assert_eq!(offsets(&new.claim("x", 10, None).unwrap().events), vec![5]);
    assert_eq!(
        offsets(&mid.claim("x", 10, None).unwrap().events),
        vec![3, 4, 5]
    );
    assert!(mid.delete().unwrap());
    assert_eq!(
        mid.claim("x", 1, None).unwrap_err().kind(),
        ErrorKind::NotFound
    );
    assert_eq!(t.count("_honker_stream_group_events WHERE grp = 'mid'"), 0);
}

#[test]
fn retention_keeps_what_a_group_needs_and_an_age_trim_is_reported() {
    let t = test_db();
    let s = t.db.stream("s").unwrap();
    for i in 0..10 {
        s.publish(json(serde_json::json!(i)), &PublishOptions::default())
            .unwrap();
    }
    let g = s.group("g").unwrap();
    g.create(Start::Beginning, &opts(1, 60_000)).unwrap();
    // Delivered 1..3; 1 dies; 2 acked; 3 pending; cursor at 4.
    let got = g.claim("a", 3, None).unwrap().events;
    g.fail(&got[0], "x").unwrap();
    g.ack(&got[1]).unwrap();
    s.set_retention(&honker::stream::StreamRetention {
        max_age: None,
        max_count: Some(1),
        trim_passed: true,
    })
    .unwrap();
    assert_eq!(s.trim().unwrap(), 0, "the dead letter at 1 is kept");
    g.redrive(1).unwrap();
    let again = g.claim("a", 1, None).unwrap().events;
    g.ack(&again[0]).unwrap();
    assert_eq!(s.trim().unwrap(), 2, "up to the pending event 3");
    assert_eq!(s.info().unwrap().first_offset, Some(3));

    // The age limit trims regardless; the next claim reports what the group
    // lost: event 3 (held) and 4..10 (not taken in).
    s.set_retention(&honker::stream::StreamRetention {
        max_age: Some(Duration::from_secs(1)),
        max_count: None,
        trim_passed: false,
    })
    .unwrap();
    t.clock.advance(Duration::from_secs(2));
    assert_eq!(s.trim().unwrap(), 8);
    s.publish(json(serde_json::json!("new")), &PublishOptions::default())
        .unwrap();
    let c = g.claim("a", 10, None).unwrap();
    assert_eq!(c.missed, 8);
    assert_eq!(offsets(&c.events), vec![11]);
    assert_eq!(g.ack(&got[2]).unwrap_err().kind(), ErrorKind::LeaseLost);
}

#[test]
fn info_reports_lag_pending_and_the_oldest_pending_age() {
    let t = test_db();
    let s = t.db.stream("s").unwrap();
    let g = s.group("g").unwrap();
    g.create(Start::Beginning, &GroupOptions::default())
        .unwrap();
    for i in 0..5 {
        s.publish(json(serde_json::json!(i)), &keyed("k")).unwrap();
    }
    t.clock.advance(Duration::from_secs(3));
    let got = g.claim("a", 5, None).unwrap().events;
    assert_eq!(offsets(&got), vec![1], "one at a time for key k");
    let i = g.info().unwrap();
    assert_eq!((i.next_offset, i.lag, i.pending, i.delivered), (6, 5, 5, 1));
    assert_eq!(i.oldest_pending_age_ms, Some(3000));
    assert_eq!(i.members[0].holds, 1);
}

#[test]
fn maintenance_removes_idle_members_that_hold_nothing() {
    let t = test_db();
    let s = t.db.stream("s").unwrap();
    s.publish(json(serde_json::json!(1)), &PublishOptions::default())
        .unwrap();
    let g = s.group("g").unwrap();
    g.create(
        Start::Beginning,
        &GroupOptions {
            member_idle: Duration::from_secs(10),
            lease: Duration::from_secs(3600),
            ..GroupOptions::default()
        },
    )
    .unwrap();
    let held = g.claim("holder", 1, None).unwrap().events;
    g.claim("idle", 1, None).unwrap();
    t.clock.advance(Duration::from_secs(11));
    g.claim("fresh", 1, None).unwrap();
    assert_eq!(t.db.maintain().unwrap().group_members, 1);
    let names: Vec<String> = g
        .info()
        .unwrap()
        .members
        .into_iter()
        .map(|m| m.member)
        .collect();
    assert_eq!(names, ["fresh", "holder"]);
    g.ack(&held[0]).unwrap();
}

#[test]
fn bad_input_is_a_typed_error_and_changes_nothing() {
    let t = test_db();
    let s = t.db.stream("s").unwrap();
    s.publish(json(serde_json::json!(1)), &PublishOptions::default())
        .unwrap();
    assert_eq!(s.group("").unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert_eq!(
        s.group("a\0b").unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    let g = s.group("g").unwrap();
    let before = t.snapshot();
    assert_eq!(
        g.claim("m", 1, None).unwrap_err().kind(),
        ErrorKind::NotFound
    );
    for o in [
        opts(0, 1000),
        opts(1001, 1000),
        opts(5, 0),
        opts(5, 86_400_001),
        GroupOptions {
            member_idle: Duration::from_millis(999),
            ..GroupOptions::default()
        },
    ] {
        assert_eq!(
            g.create(Start::Beginning, &o).unwrap_err().kind(),
            ErrorKind::InvalidArgument,
            "{o:?}"
        );
    }
    assert_eq!(
        g.create(Start::Offset(5), &GroupOptions::default())
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(t.snapshot(), before);
    g.create(Start::Beginning, &GroupOptions::default())
        .unwrap();
    let before = t.snapshot();
    for n in [0, 10_001] {
        assert_eq!(
            g.claim("m", n, None).unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
    }
    assert_eq!(
        g.claim("", 1, None).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        g.claim("m", 1, Some(Duration::ZERO)).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        g.ack(&(1, "nope")).unwrap_err().kind(),
        ErrorKind::LeaseLost
    );
    assert_eq!(g.redrive(1).unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(t.snapshot(), before);
}

#[test]
fn a_claim_in_a_transaction_that_rolls_back_claims_nothing() {
    let t = test_db();
    let s = t.db.stream("s").unwrap();
    s.publish(json(serde_json::json!(1)), &PublishOptions::default())
        .unwrap();
    let g = s.group("g").unwrap();
    g.create(Start::Beginning, &GroupOptions::default())
        .unwrap();
    let tx = t.db.transaction().unwrap();
    assert_eq!(g.claim_tx(&tx, "a", 1, None).unwrap().events.len(), 1);
    tx.rollback().unwrap();
    let e = g.claim("b", 1, None).unwrap().events.remove(0);
    assert_eq!(e.deliveries, 1);
    // An ack in the caller's transaction commits with its writes.
    t.db.execute("CREATE TABLE done (o INTEGER)", []).unwrap();
    let tx = t.db.transaction().unwrap();
    tx.execute("INSERT INTO done VALUES (?1)", [e.offset])
        .unwrap();
    g.ack_tx(&tx, &e).unwrap();
    tx.rollback().unwrap();
    assert_eq!(t.count("done"), 0);
    assert_eq!(
        g.info().unwrap().delivered,
        1,
        "the rolled-back ack left it held"
    );
    g.ack(&e).unwrap();
}

#[test]
fn events_waiting_behind_a_busy_key_are_taken_in_in_bounded_steps() {
    let t = test_db();
    let s = t.db.stream("s").unwrap();
    s.publish_many((0..5000).map(|i| json(serde_json::json!(i))), Some("hot"))
        .unwrap();
    s.publish(json(serde_json::json!("free")), &PublishOptions::default())
        .unwrap();
    let g = s.group("g").unwrap();
    g.create(Start::Beginning, &GroupOptions::default())
        .unwrap();
    let head = g.claim("a", 1, None).unwrap().events;
    assert_eq!(offsets(&head), vec![1]);
    // One bounded step per transaction: `more` until the free one is reached.
    let tx = t.db.transaction().unwrap();
    let step = g.claim_tx(&tx, "b", 1, None).unwrap();
    tx.commit().unwrap();
    assert!(step.events.is_empty() && step.more);
    assert_eq!(
        t.count("_honker_stream_group_events WHERE state = 'waiting'") as usize,
        honker::stream::group::INTAKE + 1
    );
    // claim() goes on by itself.
    let free = g.claim("b", 1, None).unwrap().events;
    assert_eq!(offsets(&free), vec![5001]);
    // Every later claim finds nothing without walking the 4,999 waiting.
    assert!(g.claim("b", 1, None).unwrap().events.is_empty());
    g.ack(&head[0]).unwrap();
    let next = g.claim("b", 10, None).unwrap().events;
    assert_eq!(offsets(&next), vec![2]);
}

fn sql(t: &common::TestDb, q: &str) -> honker::Result<honker::Value> {
    let tx = t.db.transaction()?;
    let v = tx.query(q, [])?.rows.remove(0).remove(0);
    tx.commit()?;
    Ok(v)
}

fn sql_json(t: &common::TestDb, q: &str) -> serde_json::Value {
    match sql(t, q).unwrap() {
        honker::Value::Text(s) => serde_json::from_str(&s).unwrap(),
        v => panic!("{q}: {v:?}"),
    }
}

#[test]
fn the_sql_functions_claim_ack_and_refuse_a_stale_token() {
    let t = test_db();
    for k in ["a", "a", "b"] {
        sql(
            &t,
            &format!("SELECT honker_stream_append('s', '{{}}', '{{\"key\": \"{k}\"}}')"),
        )
        .unwrap();
    }
    assert_eq!(
        sql(
            &t,
            "SELECT honker_group_create('s', 'g', '{\"max_deliveries\": 2, \"lease_ms\": 100}')"
        )
        .unwrap(),
        honker::Value::Integer(1)
    );
    let c = sql_json(&t, "SELECT honker_group_claim('s', 'g', 'w1', 10, NULL)");
    let events = c["events"].as_array().unwrap();
    assert_eq!(events.len(), 2, "{c}");
    assert_eq!(
        (events[0]["offset"].as_i64(), events[1]["offset"].as_i64()),
        (Some(1), Some(3))
    );
    assert_eq!(c["missed"], 0);
    assert_eq!(c["more"], false);
    let token = events[0]["lease_token"].as_str().unwrap().to_owned();
    t.clock.advance(Duration::from_millis(101));
    let c2 = sql_json(&t, "SELECT honker_group_claim('s', 'g', 'w2', 1, 5000)");
    assert_eq!(c2["events"][0]["offset"], 1);
    assert_eq!(c2["events"][0]["deliveries"], 2);
    let err = sql(
        &t,
        &format!("SELECT honker_group_ack('s', 'g', 1, '{token}')"),
    )
    .unwrap_err();
    assert_eq!(code(&err), "LEASE_LOST", "{err}");
    let t2 = c2["events"][0]["lease_token"].as_str().unwrap().to_owned();
    assert_eq!(
        sql(
            &t,
            &format!("SELECT honker_group_retry('s', 'g', 1, '{t2}', 0, 'boom')")
        )
        .unwrap(),
        honker::Value::Text("dead".into())
    );
    let dead = sql_json(&t, "SELECT honker_group_dead('s', 'g', 0, 10)");
    assert_eq!(dead[0]["last_error"], "boom");
    // Its death gave key a's next event its turn, after event 3 (idle
    // longer: its lease lapsed before).
    let c3 = sql_json(&t, "SELECT honker_group_claim('s', 'g', 'w2', 10, NULL)");
    assert_eq!(c3["events"][0]["offset"], 3);
    assert_eq!(c3["events"][1]["offset"], 2);
    let info = sql_json(&t, "SELECT honker_group_info('s', 'g')");
    assert_eq!(
        (info["pending"].as_i64(), info["dead"].as_i64()),
        (Some(2), Some(1))
    );
    let stream_info = sql_json(&t, "SELECT honker_stream_info('s')");
    assert_eq!(stream_info["groups"][0]["group"], "g");
    assert_eq!(
        sql(&t, "SELECT honker_group_redrive('s', 'g')").unwrap(),
        honker::Value::Integer(1)
    );
    for bad in [
        "SELECT honker_group_claim('s', 'g', 'w', 0, NULL)",
        "SELECT honker_group_claim('s', 'g', '', 1, NULL)",
        "SELECT honker_group_claim('s', 'g', 'w', 1, 0)",
        "SELECT honker_group_create('s', 'h', '{\"max_deliveries\": 0}')",
        "SELECT honker_group_create('s', 'h', '{\"nope\": 1}')",
        "SELECT honker_group_create('s', 'h', '[]')",
        "SELECT honker_group_remove_member('s', 'g', 'w2', 0)",
    ] {
        let before = t.snapshot();
        let err = sql(&t, bad).unwrap_err();
        assert_eq!(code(&err), "INVALID_ARGUMENT", "{bad}: {err}");
        assert_eq!(t.snapshot(), before, "{bad}");
    }
    let err = sql(&t, "SELECT honker_group_claim('s', 'nope', 'w', 1, NULL)").unwrap_err();
    assert_eq!(code(&err), "NOT_FOUND", "{err}");
    assert_eq!(
        sql(&t, "SELECT honker_group_remove_member('s', 'g', 'w2', 1)").unwrap(),
        honker::Value::Integer(2)
    );
    assert_eq!(
        sql(&t, "SELECT honker_group_delete('s', 'g')").unwrap(),
        honker::Value::Integer(1)
    );
}

#[test]
fn a_waiting_claim_wakes_on_a_publish_and_returns_empty_at_its_deadline() {
    let t = test_db();
    let s = t.db.stream("s").unwrap();
    let g = s.group("g").unwrap();
    g.create(Start::Beginning, &GroupOptions::default())
        .unwrap();
    let start = std::time::Instant::now();
    assert!(g
        .claim_wait("a", 1, None, Duration::from_millis(100))
        .unwrap()
        .events
        .is_empty());
    assert!(start.elapsed() >= Duration::from_millis(100));
    // Another open of the file publishes while the claim waits.
    let other = t.reopen();
    let waiter = {
        let g = g.clone();
        std::thread::spawn(move || g.claim_wait("a", 1, None, Duration::from_secs(30)))
    };
    std::thread::sleep(Duration::from_millis(50));
    let published = std::time::Instant::now();
    other
        .stream("s")
        .unwrap()
        .publish(json(serde_json::json!("hi")), &PublishOptions::default())
        .unwrap();
    let got = waiter.join().unwrap().unwrap();
    assert_eq!(offsets(&got.events), vec![1]);
    assert!(
        published.elapsed() < Duration::from_secs(5),
        "woke by the deadline, not the publish"
    );
    let missing = s.group("missing").unwrap();
    assert_eq!(
        missing
            .claim_wait("a", 1, None, Duration::from_millis(10))
            .unwrap_err()
            .kind(),
        ErrorKind::NotFound
    );
}

#[test]
fn ack_many_acks_all_or_none() {
    let t = test_db();
    let s = t.db.stream("s").unwrap();
    s.publish_many((0..3).map(|i| json(serde_json::json!(i))), None)
        .unwrap();
    let g = s.group("g").unwrap();
    g.create(Start::Beginning, &GroupOptions::default())
        .unwrap();
    let mut got = g.claim("a", 3, None).unwrap().events;
    let good = got[0].clone();
    got[0].token = "stale".into();
    let before = t.snapshot();
    assert_eq!(g.ack_many(&got).unwrap_err().kind(), ErrorKind::LeaseLost);
    assert_eq!(t.snapshot(), before);
    got[0] = good;
    g.ack_many(&got).unwrap();
    assert_eq!(g.info().unwrap().pending, 0);
}

/// The SQLite VM steps one claim + ack of a keyless event takes.
fn steps_per_claim(g: &honker::stream::group::Group, rounds: usize) -> u64 {
    let before = honker::vm_steps_on_this_thread();
    for _ in 0..rounds {
        let e = g.claim("m", 1, None).unwrap().events.remove(0);
        assert_eq!(e.key, None);
        g.ack(&e).unwrap();
    }
    (honker::vm_steps_on_this_thread() - before) / rounds as u64
}

#[test]
fn a_claim_visits_no_more_rows_with_20000_waiting_on_a_key() {
    let hot = 20_000;
    let setup = |hot: usize| {
        let t = test_db();
        let s = t.db.stream("s").unwrap();
        for chunk in (0..hot).collect::<Vec<_>>().chunks(1000) {
            s.publish_many(
                chunk.iter().map(|&i| json(serde_json::json!(i))),
                Some("hot"),
            )
            .unwrap();
        }
        s.publish_many((0..200).map(|i| json(serde_json::json!(i))), None)
            .unwrap();
        let g = s.group("g").unwrap();
        g.create(Start::Beginning, &GroupOptions::default())
            .unwrap();
        (t, g)
    };
    let (_t, plain) = setup(0);
    let base = steps_per_claim(&plain, 100);
    let (t, busy) = setup(hot);
    let head = busy.claim("holder", 1, None).unwrap().events;
    assert_eq!(head[0].key.as_deref(), Some("hot"));
    // Taking the waiting events in is paid once, in bounded steps.
    let e = busy.claim("m", 1, None).unwrap().events.remove(0);
    busy.ack(&e).unwrap();
    assert_eq!(
        t.count("_honker_stream_group_events WHERE state = 'waiting'"),
        hot as i64 - 1
    );
    let with = steps_per_claim(&busy, 100);
    assert!(
        with <= base * 2,
        "a claim behind {hot} waiting events ran {with} VM steps, {base} without"
    );
    eprintln!("VM steps per claim + ack: {with} with {hot} waiting, {base} without");
}

#[test]
fn a_group_consumer_hands_out_in_order_and_close_releases_its_buffer() {
    let t = test_db();
    let s = t.db.stream("s").unwrap();
    s.publish_many((0..5).map(|i| json(serde_json::json!(i))), None)
        .unwrap();
    let g = s.group("g").unwrap();
    g.create(Start::Beginning, &GroupOptions::default())
        .unwrap();
    let c = honker::runtime::GroupConsumer::new(&g, "a", 3, None).unwrap();
    let first = c.next(Duration::ZERO).unwrap().unwrap();
    assert_eq!(first.offset, 1);
    assert_eq!(c.buffered(), 2);
    g.ack(&first).unwrap();
    // Closing gives the two buffered back at once, their delivery uncounted.
    assert_eq!(c.close(), 2);
    assert!(c.next(Duration::ZERO).unwrap().is_none());
    let other = g.claim("b", 10, None).unwrap().events;
    assert_eq!(offsets(&other), vec![2, 3, 4, 5]);
    assert!(other.iter().all(|e| e.deliveries == 1));
    // A waiting next returns None once closed from another thread.
    let c = std::sync::Arc::new(honker::runtime::GroupConsumer::new(&g, "c", 1, None).unwrap());
    let waiter = {
        let c = c.clone();
        std::thread::spawn(move || c.next(Duration::from_secs(30)))
    };
    std::thread::sleep(Duration::from_millis(50));
    c.close();
    assert!(waiter.join().unwrap().unwrap().is_none());
}

#[test]
fn a_group_consumer_behind_an_age_trim_is_told_once_then_goes_on() {
    let t = test_db();
    let s = t.db.stream("s").unwrap();
    s.publish_many((0..3).map(|i| json(serde_json::json!(i))), None)
        .unwrap();
    let g = s.group("g").unwrap();
    g.create(Start::Beginning, &GroupOptions::default())
        .unwrap();
    s.set_retention(&honker::stream::StreamRetention {
        max_age: Some(Duration::from_secs(1)),
        max_count: None,
        trim_passed: false,
    })
    .unwrap();
    t.clock.advance(Duration::from_secs(2));
    s.trim().unwrap();
    s.publish(json(serde_json::json!("new")), &PublishOptions::default())
        .unwrap();
    let c = honker::runtime::GroupConsumer::new(&g, "a", 10, None).unwrap();
    let err = c.next(Duration::ZERO).unwrap_err();
    assert_eq!((err.kind(), err.missed()), (ErrorKind::Trimmed, Some(3)));
    assert_eq!(c.next(Duration::ZERO).unwrap().unwrap().offset, 4);
}

#[test]
fn an_idle_group_consumer_polls_without_the_write_lock_and_a_cancel_ends_its_wait() {
    let t = test_db();
    let s = t.db.stream("s").unwrap();
    let g = s.group("g").unwrap();
    g.create(Start::Beginning, &GroupOptions::default())
        .unwrap();
    let c = honker::runtime::GroupConsumer::new(&g, "a", 10, None).unwrap();
    // Another connection holds the write lock: an idle poll answers from a
    // read-only check, neither waiting for the lock nor failing with BUSY.
    let other = honker::Database::open(&t.path).unwrap();
    let held = other.transaction().unwrap();
    let polled = honker::without_waiting(|| c.next(Duration::ZERO));
    assert!(matches!(polled, Ok(None)), "{polled:?}");
    held.rollback().unwrap();
    // A waiting next ends at once once its token is cancelled (Swift's
    // Task cancellation), and the consumer stays open.
    let cancel = honker::runtime::Cancel::new(&t.db);
    let c = std::sync::Arc::new(c);
    let waiter = {
        let (c, cancel) = (c.clone(), cancel.clone());
        std::thread::spawn(move || {
            let started = std::time::Instant::now();
            (cancel.next(&*c, Duration::from_secs(30)), started.elapsed())
        })
    };
    std::thread::sleep(Duration::from_millis(50));
    cancel.cancel();
    let (got, took) = waiter.join().unwrap();
    assert!(got.unwrap().is_none());
    assert!(took < Duration::from_secs(10), "the wait ran on: {took:?}");
    assert!(!c.is_closed());
    s.publish(json(serde_json::json!("after")), &PublishOptions::default())
        .unwrap();
    assert_eq!(c.next(Duration::ZERO).unwrap().unwrap().offset, 1);
}

#[test]
fn due_in_says_when_a_claim_could_hand_something_out_without_claiming() {
    let t = test_db();
    let s = t.db.stream("s").unwrap();
    let g = s.group("g").unwrap();
    g.create(Start::Beginning, &opts(5, 1000)).unwrap();
    assert_eq!(g.due_in().unwrap(), None);
    s.publish(json(serde_json::json!(1)), &PublishOptions::default())
        .unwrap();
    assert_eq!(g.due_in().unwrap(), Some(Duration::ZERO));
    let got = g.claim("m", 1, None).unwrap();
    assert_eq!(got.events.len(), 1);
    // In flight: due again when its lease (1 s) lapses.
    assert_eq!(g.due_in().unwrap(), Some(Duration::from_secs(1)));
    t.clock.advance(Duration::from_millis(400));
    assert_eq!(g.due_in().unwrap(), Some(Duration::from_millis(600)));
    g.ack(&got.events[0]).unwrap();
    assert_eq!(g.due_in().unwrap(), None);
}
