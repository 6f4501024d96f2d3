//! A consumer group shared by three processes over 10,000 keyed events, one
//! of them SIGKILLed midway: each event's effect is recorded exactly once
//! (its row and its ack commit together), events of one key are handled in
//! offset order, a poison event goes to the dead letters after
//! `max_deliveries` while the rest flows (its key's later events too), a
//! late ack with a stale token is refused, and a removed member's events
//! are claimable at once.
//!
//! Children are this test binary run again (see `common::child`).

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::assert_integrity;
use common::child::{read_tagged, report, spawn_child, CHILD_ENV};
use honker::stream::group::GroupOptions;
use honker::stream::{PublishOptions, Start};
use honker::{Database, ErrorKind, Payload, Value};
use serde_json::json;

const EVENTS: i64 = 10_000;
const KEYS: i64 = 97;
const POISON: i64 = 4_321;

#[test]
fn child_process_entry() {
    let Ok(role) = std::env::var(CHILD_ENV) else {
        return;
    };
    let path = std::env::var("HONKER_TEST_DB").unwrap();
    let db = Database::open(&path).unwrap();
    match role.as_str() {
        "member" => member(&db, &std::env::var("HONKER_TEST_MEMBER").unwrap()),
        other => panic!("unknown child role {other}"),
    }
}

/// Claims batches of random size until the group has nothing left; each
/// event's row and its ack in one transaction. A poison event is retried.
fn member(db: &Database, name: &str) {
    let g = db.stream("orders").unwrap().group("billing").unwrap();
    let mut seed = u64::from(std::process::id());
    let mut handled = 0;
    report("ready");
    loop {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        let n = 1 + (seed >> 33) as usize % 16;
        let got = g.claim(name, n, None).unwrap();
        if got.events.is_empty() {
            let info = g.info().unwrap();
            if info.lag == 0 {
                report(&format!("done {handled}"));
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
            continue;
        }
        for e in got.events {
            let body: serde_json::Value = match &e.payload {
                Payload::Json(t) => serde_json::from_str(t).unwrap(),
                Payload::Bytes(_) => panic!("bytes"),
            };
            if body["poison"] == json!(true) {
                g.retry(&e, None, Some("poison")).unwrap();
                continue;
            }
            let tx = db.transaction().unwrap();
            tx.execute(
                "INSERT INTO handled (offset, key, member, deliveries) VALUES (?1, ?2, ?3, ?4)",
                (e.offset, e.key.clone(), name, i64::from(e.deliveries)),
            )
            .unwrap();
            match g.ack_tx(&tx, &e) {
                Ok(()) => {
                    tx.commit().unwrap();
                    handled += 1;
                }
                // Too slow: another member has it now; nothing recorded.
                Err(err) if err.kind() == ErrorKind::LeaseLost => tx.rollback().unwrap(),
                Err(err) => panic!("{err}"),
            }
        }
    }
}

fn key_of(i: i64) -> String {
    // Not round-robin: runs of one key, and keys of very different sizes.
    format!("k{}", (i * i / 7 + i / 13) % KEYS)
}

#[test]
fn three_processes_share_a_group_with_per_key_order_and_a_kill() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("groups.db");
    let db = Database::open(&path).unwrap();
    db.execute(
        "CREATE TABLE handled (offset INTEGER, key TEXT, member TEXT, deliveries INTEGER)",
        [],
    )
    .unwrap();
    let s = db.stream("orders").unwrap();
    let g = s.group("billing").unwrap();
    g.create(
        Start::Beginning,
        &GroupOptions {
            max_deliveries: 3,
            lease: Duration::from_millis(1500),
            ..GroupOptions::default()
        },
    )
    .unwrap();
    let tx = db.transaction().unwrap();
    for i in 1..=EVENTS {
        let body = if i == POISON {
            json!({"i": i, "poison": true})
        } else {
            json!({ "i": i })
        };
        s.publish_tx(
            &tx,
            Payload::Json(body.to_string()),
            &PublishOptions {
                key: Some(key_of(i)),
                ..PublishOptions::default()
            },
        )
        .unwrap();
    }
    tx.commit().unwrap();

    // Before the members start: a claim whose lease will lapse (its late ack
    // must be refused), and one by a member that is then removed by force.
    let stale = g
        .claim("stale", 1, Some(Duration::from_millis(50)))
        .unwrap()
        .events
        .remove(0);
    let parked = g
        .claim("parked", 5, Some(Duration::from_secs(3600)))
        .unwrap()
        .events;
    assert_eq!(parked.len(), 5);
    let err = g.remove_member("parked", false).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert_eq!(g.remove_member("parked", true).unwrap(), 5);

    let mut members: Vec<_> = ["m1", "m2", "victim"]
        .iter()
        .map(|m| spawn_child("member", &path, &[("HONKER_TEST_MEMBER", (*m).to_string())]))
        .collect();
    for c in &mut members {
        assert_eq!(read_tagged(c), "ready");
    }
    // Kill the victim once it has done some work (holding a batch, likely).
    let start = Instant::now();
    loop {
        let n = common::count(&db, "handled WHERE member = 'victim'");
        if n >= 1000 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the victim did no work"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    let mut victim = members.pop().unwrap();
    victim.kill().unwrap();
    victim.wait().unwrap();
    for mut c in members {
        let line = read_tagged(&mut c);
        assert!(line.starts_with("done "), "{line}");
        assert!(c.wait().unwrap().success());
    }

    // The stale claim's lease lapsed and another member handled the event.
    let err = g.ack(&stale).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LeaseLost, "{err}");
    for p in &parked {
        assert_eq!(g.ack(p).unwrap_err().kind(), ErrorKind::LeaseLost);
    }

    // Every event but the poison one recorded exactly once.
    let int = |v: &Value| match v {
        Value::Integer(n) => *n,
        v => panic!("{v:?}"),
    };
    let text = |v: &Value| match v {
        Value::Text(t) => t.clone(),
        v => panic!("{v:?}"),
    };
    let rows: Vec<(i64, String, String, i64)> = db
        .query(
            "SELECT offset, key, member, deliveries FROM handled ORDER BY rowid",
            [],
        )
        .unwrap()
        .rows
        .iter()
        .map(|r| (int(&r[0]), text(&r[1]), text(&r[2]), int(&r[3])))
        .collect();
    let mut seen: HashMap<i64, usize> = HashMap::new();
    for (o, ..) in &rows {
        *seen.entry(*o).or_default() += 1;
    }
    assert_eq!(rows.len() as i64, EVENTS - 1, "lost or duplicated effects");
    assert!(seen.values().all(|&n| n == 1));
    assert!(!seen.contains_key(&POISON));
    // Per key, in commit order, offsets only go up.
    let mut last: HashMap<&str, i64> = HashMap::new();
    for (o, k, ..) in &rows {
        assert_eq!(*k, key_of(*o));
        if let Some(prev) = last.insert(k.as_str(), *o) {
            assert!(prev < *o, "key {k}: {o} handled after {prev}");
        }
    }
    // The poison event's key flowed after it died.
    let poison_key = key_of(POISON);
    assert!(rows
        .iter()
        .any(|(o, k, ..)| *k == poison_key && *o > POISON));
    // Redeliveries happened (the kill, the stale and parked claims).
    assert!(rows.iter().any(|r| r.3 > 1));
    let dead = g.dead(0, 10).unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(
        (
            dead[0].offset,
            dead[0].deliveries,
            dead[0].last_error.as_deref()
        ),
        (POISON, 3, Some("poison"))
    );
    let info = g.info().unwrap();
    assert_eq!((info.lag, info.pending, info.dead), (0, 0, 1));
    assert_integrity(&db);
}
