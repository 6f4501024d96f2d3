//! The SQL functions on honker's own connection: the seed's SQL as written,
//! SQL and Rust interleaved on one queue, coded errors that change nothing,
//! and SQLITE_DIRECTONLY (a file's views and triggers cannot call writers;
//! the connection's own TEMP triggers can).

mod common;

use common::test_db;
use honker::{EnqueueOptions, ErrorKind, JobState, Value};
use serde_json::{json, Value as Json};

/// Runs one SELECT in a transaction of its own and returns its single value.
fn select(t: &common::TestDb, sql: &str) -> honker::Result<Value> {
    let tx = t.db.transaction()?;
    let v = tx.query(sql, [])?.rows.remove(0).remove(0);
    tx.commit()?;
    Ok(v)
}

fn text(v: Value) -> String {
    match v {
        Value::Text(s) => s,
        other => panic!("expected text, got {other:?}"),
    }
}

#[test]
fn the_seeds_sql_runs_as_written() {
    let t = test_db();
    assert_eq!(
        select(&t, "SELECT honker_bootstrap()").unwrap(),
        Value::Integer(honker::schema::LATEST)
    );
    t.db.execute(
        "CREATE TABLE orders (id INTEGER PRIMARY KEY, user_id INTEGER, status TEXT)",
        [],
    )
    .unwrap();
    let tx = t.db.transaction().unwrap();
    tx.execute(
        "INSERT INTO orders (user_id, status) VALUES (42, 'paid')",
        [],
    )
    .unwrap();
    let id = tx
        .query(
            r#"SELECT honker_enqueue('emails', '{"to":"alice@example.com"}', NULL, NULL, 0, 3, NULL)"#,
            [],
        )
        .unwrap()
        .rows[0][0]
        .clone();
    tx.commit().unwrap();
    let Value::Integer(id) = id else { panic!() };

    let batch: Json = serde_json::from_str(&text(
        select(
            &t,
            "SELECT honker_claim_batch('emails', 'mailer-1', 32, 300)",
        )
        .unwrap(),
    ))
    .unwrap();
    let jobs = batch.as_array().unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0]["id"], id);
    assert_eq!(jobs[0]["payload"]["to"], "alice@example.com");
    assert_eq!(jobs[0]["attempts"], 1);
    assert_eq!(jobs[0]["lease_token"].as_str().unwrap().len(), 32);

    let acked = select(
        &t,
        &format!("SELECT honker_ack_batch('[{id}]', 'mailer-1')"),
    )
    .unwrap();
    assert_eq!(acked, Value::Integer(1));
    assert_eq!(t.count("_honker_jobs"), 0);
}

#[test]
fn a_rolled_back_sql_enqueue_never_exists() {
    let t = test_db();
    let tx = t.db.transaction().unwrap();
    tx.query(
        "SELECT honker_enqueue('emails', '{}', NULL, NULL, 0, 3, NULL)",
        [],
    )
    .unwrap();
    tx.rollback().unwrap();
    assert_eq!(t.count("_honker_jobs"), 0);
}

#[test]
fn rust_and_sql_share_the_protocol() {
    let t = test_db();
    let q = t.db.queue("emails").unwrap();
    let id = q
        .enqueue(json!({"n": 1}), &EnqueueOptions::default())
        .unwrap()
        .id;

    // Claimed through SQL, fenced by its token in SQL, seen by Rust.
    let batch: Json = serde_json::from_str(&text(
        select(
            &t,
            "SELECT honker_claim_batch('emails', 'sql-worker', 1, 30)",
        )
        .unwrap(),
    ))
    .unwrap();
    let token = batch[0]["lease_token"].as_str().unwrap().to_owned();
    assert_eq!(q.get_job(id).unwrap().state, JobState::Running);

    // Another worker (no token) cannot touch it; a wrong token is refused.
    let err = select(&t, &format!("SELECT honker_ack({id}, 'intruder')")).unwrap_err();
    assert!(err.to_string().contains("LEASE_LOST: "), "{err}");
    // A call without a token hears about the worker, not about a token.
    assert!(
        err.to_string().contains(&format!(
            "job {id} holds no live lease of worker \"intruder\""
        )),
        "{err}"
    );
    assert!(!err.to_string().contains("token"), "{err}");
    let err = select(&t, &format!("SELECT honker_ack({id}, 'sql-worker', 'bad')")).unwrap_err();
    assert!(err.to_string().contains("LEASE_LOST: "), "{err}");

    let until = select(
        &t,
        &format!("SELECT honker_heartbeat({id}, 'sql-worker', 60, '{token}')"),
    )
    .unwrap();
    assert_eq!(
        Some(match until {
            Value::Integer(n) => n,
            _ => 0,
        }),
        q.get_job(id).unwrap().lease_expires_at
    );
    let state = select(
        &t,
        &format!("SELECT honker_retry({id}, 'sql-worker', 0, 'flaky', '{token}')"),
    )
    .unwrap();
    assert_eq!(text(state), "ready");
    let info = q.get_job(id).unwrap();
    assert_eq!(info.last_error.as_deref(), Some("flaky"));

    // Claimed through Rust, acked through SQL by worker id alone.
    let job = q.claim("rust-worker", 1).unwrap().pop().unwrap();
    assert_eq!(job.attempts, 2);
    assert_eq!(
        select(&t, &format!("SELECT honker_ack({id}, 'rust-worker')")).unwrap(),
        Value::Integer(1)
    );
    assert_eq!(job.ack().unwrap_err().kind(), ErrorKind::LeaseLost);
}

#[test]
fn inspection_and_dead_letters_in_sql() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    let id = q.enqueue(json!(1), &EnqueueOptions::default()).unwrap().id;
    q.claim("w", 1).unwrap();
    let failed = select(&t, &format!("SELECT honker_fail({id}, 'w', 'bad')")).unwrap();
    assert_eq!(failed, Value::Integer(1));

    let job: Json = serde_json::from_str(&text(
        select(&t, &format!("SELECT honker_get_job({id})")).unwrap(),
    ))
    .unwrap();
    assert_eq!(
        (job["state"].as_str(), job["last_error"].as_str()),
        (Some("dead"), Some("bad"))
    );
    let stats: Json =
        serde_json::from_str(&text(select(&t, "SELECT honker_queue_stats('q')").unwrap())).unwrap();
    assert_eq!(stats["dead"], 1);

    assert_eq!(
        select(&t, "SELECT honker_requeue_dead('q')").unwrap(),
        Value::Integer(1)
    );
    assert_eq!(q.get_job(id).unwrap().state, JobState::Ready);
    assert_eq!(
        select(
            &t,
            &format!("SELECT honker_cancel({id}, 'no longer needed')")
        )
        .unwrap(),
        Value::Integer(1)
    );
    assert_eq!(q.get_job(id).unwrap().state, JobState::Cancelled);
    assert_eq!(
        select(&t, &format!("SELECT honker_cancel({id})")).unwrap(),
        Value::Integer(0),
        "already finished"
    );
    assert_eq!(
        text(select(&t, "SELECT honker_version()").unwrap()),
        env!("CARGO_PKG_VERSION")
    );
}

#[test]
fn bad_sql_calls_are_coded_and_change_nothing() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    q.enqueue(json!(1), &EnqueueOptions::default()).unwrap();
    let before = t.snapshot();
    for (sql, code) in [
        (
            "SELECT honker_enqueue(NULL, '{}', NULL, NULL, 0, 3, NULL)",
            "INVALID_ARGUMENT",
        ),
        (
            "SELECT honker_enqueue('q', '{oops', NULL, NULL, 0, 3, NULL)",
            "INVALID_ARGUMENT",
        ),
        (
            "SELECT honker_enqueue('q', '{}', NULL, -1, 0, 3, NULL)",
            "INVALID_ARGUMENT",
        ),
        (
            "SELECT honker_enqueue('q', '{}', NULL, NULL, 0, 0, NULL)",
            "INVALID_ARGUMENT",
        ),
        ("SELECT honker_enqueue('q', '{}')", "INVALID_ARGUMENT"),
        (
            "SELECT honker_claim_batch('q', 'w', -1, 30)",
            "INVALID_ARGUMENT",
        ),
        (
            "SELECT honker_claim_batch('q', 'w', 1, 'soon')",
            "INVALID_ARGUMENT",
        ),
        ("SELECT honker_ack(424242, 'w')", "NOT_FOUND"),
        ("SELECT honker_ack(-1, 'w')", "INVALID_ARGUMENT"),
        ("SELECT honker_get_job(424242)", "NOT_FOUND"),
        (
            "SELECT honker_ack_batch('not json', 'w')",
            "INVALID_ARGUMENT",
        ),
        ("SELECT honker_queue_next_claim_at('')", "INVALID_ARGUMENT"),
        (
            "SELECT honker_queue_next_claim_at(NULL)",
            "INVALID_ARGUMENT",
        ),
        ("SELECT honker_sweep_expired(NULL)", "INVALID_ARGUMENT"),
        ("SELECT honker_sweep_expired(7)", "INVALID_ARGUMENT"),
    ] {
        let err = select(&t, sql).unwrap_err();
        assert!(
            err.message().contains(&format!("{code}: ")),
            "{sql}: expected {code}, got {err}"
        );
    }
    assert_eq!(t.snapshot(), before);
}

#[test]
fn writers_are_direct_only_but_temp_triggers_may_call_them() {
    let t = test_db();
    t.db.execute(
        "CREATE TABLE orders (id INTEGER PRIMARY KEY, email TEXT)",
        [],
    )
    .unwrap();
    // A trigger stored in the file (as a hostile file could ship) is refused.
    t.db.execute(
        "CREATE TRIGGER stored AFTER INSERT ON orders BEGIN
             SELECT honker_enqueue('emails', json_object('to', NEW.email), NULL, NULL, 0, 3, NULL);
         END",
        [],
    )
    .unwrap();
    let err =
        t.db.execute("INSERT INTO orders (email) VALUES ('a@example.com')", [])
            .unwrap_err();
    assert!(err.to_string().contains("unsafe use of"), "{err}");
    t.db.execute("DROP TRIGGER stored", []).unwrap();
    t.db.execute(
        "CREATE VIEW sneaky AS SELECT honker_enqueue('emails', '{}', NULL, NULL, 0, 3, NULL)",
        [],
    )
    .unwrap();
    assert!(select(&t, "SELECT * FROM sneaky").is_err());
    assert_eq!(t.count("_honker_jobs"), 0);

    // The application's own TEMP trigger, on its own connection, may.
    let tx = t.db.transaction().unwrap();
    tx.execute(
        "CREATE TEMP TRIGGER outbox AFTER INSERT ON orders BEGIN
             SELECT honker_enqueue('emails', json_object('to', NEW.email), NULL, NULL, 0, 3, NULL);
         END",
        [],
    )
    .unwrap();
    tx.execute("INSERT INTO orders (email) VALUES ('b@example.com')", [])
        .unwrap();
    tx.commit().unwrap();
    let job =
        t.db.queue("emails")
            .unwrap()
            .claim("w", 1)
            .unwrap()
            .pop()
            .unwrap();
    assert_eq!(job.payload.as_json().unwrap()["to"], "b@example.com");
}

#[test]
fn a_trigger_enqueue_rolls_back_with_its_statement() {
    let t = test_db();
    t.db.execute(
        "CREATE TABLE orders (id INTEGER PRIMARY KEY, email TEXT, cents INTEGER)",
        [],
    )
    .unwrap();
    let tx = t.db.transaction().unwrap();
    tx.execute(
        "CREATE TEMP TRIGGER outbox AFTER INSERT ON orders BEGIN
             SELECT honker_enqueue('emails', json_object('to', NEW.email), NULL, NULL, 0, 3, NULL);
             SELECT RAISE(ABORT, 'refused') WHERE NEW.cents <= 0;
         END",
        [],
    )
    .unwrap();
    tx.execute(
        "INSERT INTO orders (email, cents) VALUES ('ok@example.com', 5)",
        [],
    )
    .unwrap();
    let err = tx
        .execute(
            "INSERT INTO orders (email, cents) VALUES ('no@example.com', 0)",
            [],
        )
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Sqlite);
    tx.commit().unwrap();
    assert_eq!(t.count("orders"), 1);
    assert_eq!(
        t.count("_honker_jobs"),
        1,
        "the refused order's job is gone too"
    );
}

#[test]
fn every_registered_function_is_documented_in_docs_sql_md() {
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/sql.md"))
        .expect("docs/sql.md");
    let names: Vec<_> = honker::sql::functions();
    assert!(names.len() >= 15, "{names:?}");
    for (name, _) in names {
        assert!(
            docs.contains(&format!("{name}(")),
            "docs/sql.md does not document {name}"
        );
    }
}

/// Honker's `honker_queue_next_claim_at(queue)` and `honker_sweep_expired(queue)`
/// (reference/honker-ancestor.md §3) keep Honker's contracts: unix seconds (0
/// when nothing is coming) and a count.
#[test]
fn honkers_next_claim_at_and_sweep_expired_keep_honkers_contract() {
    use std::time::Duration;
    let t = test_db();
    let now_s = 1_700_000_000;
    let next = |t: &common::TestDb| select(t, "SELECT honker_queue_next_claim_at('q')").unwrap();
    let q = t.db.queue("q").unwrap();
    assert_eq!(
        next(&t),
        Value::Integer(0),
        "an empty queue: nothing is coming"
    );
    let at = |secs: f64| EnqueueOptions {
        delay: Some(Duration::from_secs_f64(secs)),
        ..EnqueueOptions::default()
    };
    // A job due in 90.5 s: claimable from the second after (rounded up).
    q.enqueue(json!("later"), &at(90.5)).unwrap();
    assert_eq!(next(&t), Value::Integer(now_s + 91));
    // A ready job is claimable now, not "next"; its lease of 30 s is.
    let ready = q
        .enqueue(json!("now"), &EnqueueOptions::default())
        .unwrap()
        .id;
    assert_eq!(
        next(&t),
        Value::Integer(now_s + 91),
        "only future times count"
    );
    let claimed = q
        .claim_with(
            "w",
            1,
            &honker::ClaimOptions {
                lease: Some(Duration::from_secs(30)),
                wait: Duration::ZERO,
            },
        )
        .unwrap();
    assert_eq!(claimed[0].id, ready);
    assert_eq!(
        next(&t),
        Value::Integer(now_s + 30),
        "the lease lapses first"
    );
    // What will not be claimable is ignored: a job that expires before it is
    // due, and a lease on its last attempt (dead-lettered, not reclaimed).
    // (Our enqueue refuses an expiry before the due time; Honker's enqueue
    // accepts it: written here by hand.)
    let first = q.enqueue(json!("expires first"), &at(5.0)).unwrap().id;
    let tx = t.db.transaction().unwrap();
    let expiry = 1_700_000_002_000i64;
    tx.execute(
        &format!("UPDATE _honker_jobs SET expires_at = {expiry} WHERE id = {first}"),
        [],
    )
    .unwrap();
    tx.commit().unwrap();
    t.clock.advance(Duration::from_secs(3));
    assert_eq!(next(&t), Value::Integer(now_s + 30));
    let last = q
        .enqueue(
            json!("last attempt"),
            &EnqueueOptions {
                max_attempts: Some(1),
                ..EnqueueOptions::default()
            },
        )
        .unwrap()
        .id;
    t.clock.advance(Duration::from_secs(1));
    let mut got = q
        .claim_with(
            "w",
            1,
            &honker::ClaimOptions {
                lease: Some(Duration::from_secs(10)),
                wait: Duration::ZERO,
            },
        )
        .unwrap();
    assert_eq!(got.pop().map(|j| j.id), Some(last));
    assert_eq!(
        next(&t),
        Value::Integer(now_s + 30),
        "not the last attempt's lapse at +14 s"
    );

    // honker_sweep_expired: the count of jobs that expired before they
    // started (the claim above already finished the first one).
    let stats: Json =
        serde_json::from_str(&text(select(&t, "SELECT honker_queue_stats('q')").unwrap())).unwrap();
    assert_eq!(stats["expired"], 1);
    q.enqueue(
        json!("expires"),
        &EnqueueOptions {
            expires: Some(Duration::from_secs(1)),
            ..EnqueueOptions::default()
        },
    )
    .unwrap();
    t.clock.advance(Duration::from_secs(2));
    assert_eq!(
        select(&t, "SELECT honker_sweep_expired('q')").unwrap(),
        Value::Integer(1)
    );
    assert_eq!(
        select(&t, "SELECT honker_sweep_expired('q')").unwrap(),
        Value::Integer(0),
        "already swept"
    );
    let stats: Json =
        serde_json::from_str(&text(select(&t, "SELECT honker_queue_stats('q')").unwrap())).unwrap();
    assert_eq!(stats["expired"], 2);
    assert_eq!(
        select(&t, "SELECT honker_sweep_expired('other')").unwrap(),
        Value::Integer(0)
    );
}
