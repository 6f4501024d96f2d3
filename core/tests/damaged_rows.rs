//! A row damaged by hand or by another program (an INTEGER column holding
//! TEXT, REAL or BLOB) never halts its queue: the claim that meets it moves
//! it to the dead letters in the same transaction, with the reason, and goes
//! on to the healthy jobs behind it. Reads that meet it (`get_job`,
//! `dead_letters`, `stats`) fail with `SQLITE` / `SQLITE_CORRUPT` naming the
//! job, never `INTERNAL`.

mod common;

use common::{assert_integrity, scalar, test_db};
use honker::{EnqueueOptions, ErrorKind, Value};
use serde_json::json;

/// The jobs table's INTEGER columns a ready job carries (id, the primary
/// key, cannot hold anything but an integer; the lease columns are NULL
/// until a claim writes them).
const COLUMNS: [&str; 8] = [
    "priority",
    "run_at",
    "attempts",
    "max_attempts",
    "backoff_base_ms",
    "backoff_max_ms",
    "expires_at",
    "created_at",
];

/// A value of each wrong type, and SQLite's name for it (the REAL is not
/// integral, so INTEGER affinity keeps it REAL, and as an expiry it lies in
/// the future, so the job is not simply expired).
const DAMAGE: [(&str, &str); 3] = [
    ("'soon'", "TEXT"),
    ("4102444800000.5", "REAL"),
    ("x'00ff'", "BLOB"),
];

const SQLITE_CORRUPT: i32 = 11;

#[test]
fn a_claim_dead_letters_each_damaged_row_and_claims_the_healthy_ones() {
    for column in COLUMNS {
        for (value, kind) in DAMAGE {
            let t = test_db();
            let q = t.db.queue("q").unwrap();
            let ids: Vec<i64> = (0..3)
                .map(|i| q.enqueue(json!(i), &EnqueueOptions::default()).unwrap().id)
                .collect();
            t.db.execute(
                &format!("UPDATE _honker_jobs SET {column} = {value} WHERE id = ?1"),
                [ids[1]],
            )
            .unwrap();
            let what = format!("{column} = {value}");

            let jobs = q.claim("w", 3).unwrap();
            let claimed: Vec<i64> = jobs.iter().map(|j| j.id).collect();
            assert_eq!(claimed, vec![ids[0], ids[2]], "{what}");
            for j in &jobs {
                j.ack().unwrap();
            }
            let dead = scalar(
                &t.db,
                &format!(
                    "SELECT last_error FROM _honker_finished WHERE id = {} AND state = 'dead'",
                    ids[1]
                ),
            );
            assert_eq!(
                dead,
                Value::Text(format!("undecodable row: {column} holds {kind}")),
                "{what}"
            );
            assert_eq!(t.count("_honker_jobs"), 0, "{what}");

            // Reading it back names the job and SQLite's code where the read
            // meets the damaged column (a job's info has no backoff fields).
            if column.starts_with("backoff_") {
                let info = q.get_job(ids[1]).unwrap();
                assert_eq!(info.state, honker::JobState::Dead, "{what}");
                assert_eq!(q.dead_letters(0, 10).unwrap().len(), 1, "{what}");
            } else {
                assert_damaged(&q.get_job(ids[1]).unwrap_err(), ids[1], &what);
                assert_damaged(&q.dead_letters(0, 10).unwrap_err(), ids[1], &what);
            }
            assert_integrity(&t.db);
        }
    }
}

fn assert_damaged(e: &honker::Error, id: i64, what: &str) {
    assert_eq!(e.kind(), ErrorKind::Sqlite, "{what}: {e}");
    assert_eq!(e.sqlite_code(), Some(SQLITE_CORRUPT), "{what}: {e}");
    assert!(e.message().contains(&format!("job {id}")), "{what}: {e}");
}

/// The damaged row sorts first (a TEXT priority sorts before every integer
/// in the ready index): many claims of one job each still get every
/// healthy job.
#[test]
fn a_damaged_row_at_the_head_of_the_queue_does_not_stop_single_claims() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    for i in 0..5 {
        q.enqueue(json!(i), &EnqueueOptions::default()).unwrap();
    }
    t.db.execute(
        "UPDATE _honker_jobs SET priority = 'urgent' WHERE id = (SELECT min(id) FROM _honker_jobs)",
        [],
    )
    .unwrap();
    let mut got = 0;
    while let Some(job) = q.claim("w", 1).unwrap().pop() {
        job.ack().unwrap();
        got += 1;
    }
    assert_eq!(got, 4);
    assert_eq!(q.stats().unwrap().dead, 1);
}

/// `stats` over a live job whose time is damaged: SQLITE_CORRUPT naming it.
#[test]
fn stats_over_a_damaged_live_row_name_it() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    let id = q.enqueue(json!(1), &EnqueueOptions::default()).unwrap().id;
    t.db.execute(
        "UPDATE _honker_jobs SET run_at = 'later' WHERE id = ?1",
        [id],
    )
    .unwrap();
    let e = q.stats().unwrap_err();
    assert_damaged(&e, id, "stats");
}

/// A scheduled job's `run_at` or a running job's `lease_expires_at` damaged:
/// TEXT and BLOB sort after every number, so the job would never come due nor
/// be reclaimed; the claim's housekeeping dead-letters it. A REAL is a number:
/// it comes due (or lapses) and the pick then meets it. A waiting claim never
/// fails on it meanwhile.
#[test]
fn damaged_times_of_scheduled_and_running_jobs_do_not_stop_the_queue() {
    for (state, column) in [("scheduled", "run_at"), ("running", "lease_expires_at")] {
        for (value, kind) in [
            ("'soon'", "TEXT"),
            ("x'00ff'", "BLOB"),
            ("1699999999999.5", "REAL"),
        ] {
            let what = format!("{state} {column} = {value}");
            let t = test_db();
            let q = t.db.queue("q").unwrap();
            let delayed = EnqueueOptions {
                delay: Some(std::time::Duration::from_secs(60)),
                ..EnqueueOptions::default()
            };
            let id = if state == "scheduled" {
                q.enqueue(json!("damaged"), &delayed).unwrap().id
            } else {
                q.enqueue(json!("damaged"), &EnqueueOptions::default())
                    .unwrap();
                q.claim("w", 1).unwrap()[0].id
            };
            t.db.execute(
                &format!("UPDATE _honker_jobs SET {column} = {value} WHERE id = ?1"),
                [id],
            )
            .unwrap();
            // A waiting claim on a queue holding only the damaged job returns
            // (empty or not) instead of failing.
            let waited = q.claim_with(
                "w",
                1,
                &honker::ClaimOptions {
                    wait: std::time::Duration::from_millis(50),
                    ..Default::default()
                },
            );
            assert!(waited.is_ok(), "{what}: {waited:?}");
            let mut claimed_ids = Vec::new();
            for job in waited.unwrap() {
                claimed_ids.push(job.id);
                job.ack().unwrap();
            }
            let healthy = q
                .enqueue(json!("healthy"), &EnqueueOptions::default())
                .unwrap()
                .id;
            let claimed: Vec<i64> = q.claim("w", 5).unwrap().iter().map(|j| j.id).collect();
            assert!(claimed.contains(&healthy), "{what}: {claimed:?}");
            claimed_ids.extend(claimed);
            let last_error = scalar(
                &t.db,
                &format!(
                    "SELECT coalesce(max(last_error), '') FROM _honker_finished WHERE id = {id}"
                ),
            );
            if kind == "REAL" && state == "running" {
                // A lease that lapsed half a millisecond ago: reclaimed (its
                // lease columns reset) and claimed again like any job.
                assert!(claimed_ids.contains(&id), "{what}: {claimed_ids:?}");
            } else {
                assert_eq!(
                    last_error,
                    Value::Text(format!("undecodable row: {column} holds {kind}")),
                    "{what}"
                );
            }
            assert_integrity(&t.db);
        }
    }
}
