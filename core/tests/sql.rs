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
    // Honker's rows: the payload as a JSON string, the lease in seconds.
    let jobs = batch.as_array().unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0]["id"], id);
    assert_eq!(jobs[0]["payload"], r#"{"to":"alice@example.com"}"#);
    assert_eq!(jobs[0]["attempts"], 1);
    assert_eq!(jobs[0]["worker_id"], "mailer-1");
    assert_eq!(jobs[0]["claim_expires_at"], 1_700_000_000 + 300);
    assert!(jobs[0].get("lease_token").is_none(), "{batch}");

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

    // Claimed through our SQL form, fenced by its token, seen by Rust.
    let batch: Json = serde_json::from_str(&text(
        select(
            &t,
            "SELECT honker_queue_claim('emails', 'sql-worker', 1, 30000)",
        )
        .unwrap(),
    ))
    .unwrap();
    assert_eq!(batch[0]["payload"]["n"], 1);
    assert_eq!(batch[0]["lease_expires_at"], 1_700_000_030_000i64);
    let token = batch[0]["lease_token"].as_str().unwrap().to_owned();
    assert_eq!(token.len(), 32);
    assert_eq!(q.get_job(id).unwrap().state, JobState::Running);

    // A wrong token is refused with a code; the wrong queue is NOT_FOUND.
    let err = select(&t, &format!("SELECT honker_job_ack('emails', {id}, 'bad')")).unwrap_err();
    assert!(err.to_string().contains("LEASE_LOST: "), "{err}");
    let err = select(
        &t,
        &format!("SELECT honker_job_ack('other', {id}, '{token}')"),
    )
    .unwrap_err();
    assert!(err.to_string().contains("NOT_FOUND: "), "{err}");

    let until = select(
        &t,
        &format!("SELECT honker_job_heartbeat('emails', {id}, '{token}', 60000)"),
    )
    .unwrap();
    assert_eq!(until, Value::Integer(1_700_000_060_000));
    assert_eq!(
        q.get_job(id).unwrap().lease_expires_at,
        Some(1_700_000_060_000)
    );
    let state = select(
        &t,
        &format!("SELECT honker_job_retry('emails', {id}, '{token}', 0, 'flaky')"),
    )
    .unwrap();
    assert_eq!(text(state), "ready");
    let info = q.get_job(id).unwrap();
    assert_eq!(info.last_error.as_deref(), Some("flaky"));

    // Claimed through Rust, acked through SQL with its token and a result.
    let job = q.claim("rust-worker", 1).unwrap().pop().unwrap();
    assert_eq!(job.attempts, 2);
    assert_eq!(
        select(
            &t,
            &format!(
                "SELECT honker_job_ack('emails', {id}, '{}', '{{\"sent\":true}}')",
                job.lease.token
            )
        )
        .unwrap(),
        Value::Integer(1)
    );
    assert_eq!(
        q.get_result(id).unwrap().unwrap().as_json().unwrap(),
        json!({"sent": true})
    );
    assert_eq!(job.ack().unwrap_err().kind(), ErrorKind::LeaseLost);

    // Release and snooze give the attempt back; ack_many skips a lost pair.
    let id2 = q.enqueue(json!(2), &EnqueueOptions::default()).unwrap().id;
    let job = q.claim("w", 1).unwrap().pop().unwrap();
    let state = select(
        &t,
        &format!(
            "SELECT honker_job_snooze('emails', {id2}, '{}', 5000)",
            job.lease.token
        ),
    )
    .unwrap();
    assert_eq!(text(state), "scheduled");
    assert_eq!(q.get_job(id2).unwrap().attempts, 0);
    t.clock.advance(std::time::Duration::from_secs(5));
    let job = q.claim("w", 1).unwrap().pop().unwrap();
    assert_eq!(
        select(
            &t,
            &format!(
                "SELECT honker_job_ack_many('emails', '[[{id2}, \"{}\"], [{id2}, \"stale\"]]')",
                job.lease.token
            )
        )
        .unwrap(),
        Value::Integer(1)
    );
}

#[test]
fn inspection_and_dead_letters_in_sql() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    let id = q.enqueue(json!(1), &EnqueueOptions::default()).unwrap().id;
    let job = q.claim("w", 1).unwrap().pop().unwrap();
    let failed = select(
        &t,
        &format!(
            "SELECT honker_job_fail('q', {id}, '{}', 'bad')",
            job.lease.token
        ),
    )
    .unwrap();
    assert_eq!(failed, Value::Integer(1));

    let job: Json = serde_json::from_str(&text(
        select(&t, &format!("SELECT honker_job_get('q', {id})")).unwrap(),
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
        select(&t, "SELECT honker_dead_requeue('q')").unwrap(),
        Value::Integer(1)
    );
    assert_eq!(q.get_job(id).unwrap().state, JobState::Ready);
    assert_eq!(
        select(
            &t,
            &format!("SELECT honker_job_cancel('q', {id}, 'no longer needed')")
        )
        .unwrap(),
        Value::Integer(1)
    );
    let info = q.get_job(id).unwrap();
    assert_eq!(info.state, JobState::Cancelled);
    assert_eq!(info.last_error.as_deref(), Some("no longer needed"));
    assert_eq!(
        select(&t, &format!("SELECT honker_job_cancel('q', {id})")).unwrap(),
        Value::Integer(0),
        "already finished"
    );
    // Purge by age: a dead letter younger than the age stays.
    let id3 = q.enqueue(json!(3), &EnqueueOptions::default()).unwrap().id;
    let job = q.claim("w", 1).unwrap().pop().unwrap();
    job.fail("no").unwrap();
    t.clock.advance(std::time::Duration::from_secs(10));
    assert_eq!(
        select(&t, "SELECT honker_dead_purge('q', 20000)").unwrap(),
        Value::Integer(0)
    );
    assert_eq!(
        select(&t, "SELECT honker_dead_purge('q', 5000)").unwrap(),
        Value::Integer(1)
    );
    assert!(q.get_job(id3).is_err());
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
        (
            "SELECT honker_claim_batch('q', 'w', -1, 30)",
            "INVALID_ARGUMENT",
        ),
        (
            "SELECT honker_claim_batch('q', 'w', 1, 'soon')",
            "INVALID_ARGUMENT",
        ),
        ("SELECT honker_ack(-1, 'w')", "INVALID_ARGUMENT"),
        ("SELECT honker_ack(1, NULL)", "INVALID_ARGUMENT"),
        ("SELECT honker_ack(1, 'w', 'one')", "INVALID_ARGUMENT"),
        (
            "SELECT honker_ack_batch('not json', 'w')",
            "INVALID_ARGUMENT",
        ),
        (
            "SELECT honker_ack_batch('[[1, \"token\"]]', 'w')",
            "INVALID_ARGUMENT",
        ),
        ("SELECT honker_retry(1, 'w', -5, 'e')", "INVALID_ARGUMENT"),
        ("SELECT honker_heartbeat(1, 'w', 0)", "INVALID_ARGUMENT"),
        ("SELECT honker_cancel('', 1)", "INVALID_ARGUMENT"),
        ("SELECT honker_get_job('x')", "INVALID_ARGUMENT"),
        (
            "SELECT honker_result_save(NULL, '1', 0)",
            "INVALID_ARGUMENT",
        ),
        ("SELECT honker_result_save(1, NULL, 0)", "INVALID_ARGUMENT"),
        (
            "SELECT honker_result_save(1, '1', 'soon')",
            "INVALID_ARGUMENT",
        ),
        ("SELECT honker_result_get(0)", "INVALID_ARGUMENT"),
        // Our forms.
        ("SELECT honker_queue_enqueue('q')", "INVALID_ARGUMENT"),
        ("SELECT honker_queue_enqueue('', '{}')", "INVALID_ARGUMENT"),
        (
            "SELECT honker_queue_enqueue('q', '{oops')",
            "INVALID_ARGUMENT",
        ),
        (
            "SELECT honker_queue_enqueue('q', '{}', 'not json')",
            "INVALID_ARGUMENT",
        ),
        (
            "SELECT honker_queue_enqueue('q', '{}', '{\"nope\": 1}')",
            "INVALID_ARGUMENT",
        ),
        (
            "SELECT honker_queue_enqueue('q', '{}', '{\"delay_ms\": 5, \"run_at\": 5}')",
            "INVALID_ARGUMENT",
        ),
        (
            "SELECT honker_queue_enqueue('q', '{}', '{\"expires_ms\": -1}')",
            "INVALID_ARGUMENT",
        ),
        (
            "SELECT honker_queue_enqueue('q', '{}', '{\"backoff\": {\"base\": 1}}')",
            "INVALID_ARGUMENT",
        ),
        (
            "SELECT honker_queue_enqueue('q', '{}', '{\"max_attempts\": 0}')",
            "INVALID_ARGUMENT",
        ),
        (
            "SELECT honker_queue_claim('q', 'w', 1, 0)",
            "INVALID_ARGUMENT",
        ),
        (
            "SELECT honker_queue_claim('q', 'w', 0, 1000)",
            "INVALID_ARGUMENT",
        ),
        ("SELECT honker_job_ack('q', 424242, 'tok')", "NOT_FOUND"),
        ("SELECT honker_job_ack('q', 1, NULL)", "INVALID_ARGUMENT"),
        (
            "SELECT honker_job_ack('q', 1, 'tok', 'not json')",
            "INVALID_ARGUMENT",
        ),
        ("SELECT honker_job_get('q', 424242)", "NOT_FOUND"),
        ("SELECT honker_job_cancel('q', 424242)", "NOT_FOUND"),
        (
            "SELECT honker_job_ack_many('q', '[[1]]')",
            "INVALID_ARGUMENT",
        ),
        ("SELECT honker_job_ack_many('q', '[1]')", "INVALID_ARGUMENT"),
        (
            "SELECT honker_job_snooze('q', 1, 'tok', NULL)",
            "INVALID_ARGUMENT",
        ),
        (
            "SELECT honker_job_heartbeat('q', 1, 'tok', 0)",
            "INVALID_ARGUMENT",
        ),
        ("SELECT honker_dead_purge('q', -1)", "INVALID_ARGUMENT"),
        ("SELECT honker_dead_requeue('q', 0)", "INVALID_ARGUMENT"),
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
    // Honker's names exist at Honker's arities only: SQLite refuses others.
    for sql in [
        "SELECT honker_enqueue('q', '{}')",
        "SELECT honker_enqueue('q', '{}', NULL, NULL, 0, 3, NULL, 'dedupe')",
        "SELECT honker_ack(1)",
    ] {
        let err = select(&t, sql).unwrap_err();
        assert!(
            err.message().contains("wrong number of arguments"),
            "{sql}: {err}"
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

/// Honker's queue and results functions keep Honker's contracts
/// (reference/honker-ancestor.md §3, §4): seconds, worker ids (fenced by the
/// attempt number in the later arities), 1/0 results, Honker's JSON.
#[test]
fn honkers_queue_functions_keep_honkers_contracts() {
    use std::time::Duration;
    let t = test_db();
    let now_s = 1_700_000_000i64;
    let int = |sql: &str| match select(&t, sql).unwrap() {
        Value::Integer(n) => n,
        other => panic!("{sql}: {other:?}"),
    };
    let json_of =
        |sql: &str| -> Json { serde_json::from_str(&text(select(&t, sql).unwrap())).unwrap() };
    let q = t.db.queue("q").unwrap();

    // Enqueue: delay wins over run_at; priority orders the claim.
    let a = int("SELECT honker_enqueue('q', '{\"n\":1}', NULL, NULL, 0, 3, NULL)");
    let b = int("SELECT honker_enqueue('q', '{\"n\":2}', NULL, NULL, 5, 3, NULL)");
    let later = int(&format!(
        "SELECT honker_enqueue('q', '3', {}, 60, 0, 3, NULL)",
        now_s - 100
    ));
    assert_eq!(
        q.get_job(later).unwrap().run_at,
        (now_s + 60) * 1000,
        "delay wins"
    );
    let at = int(&format!(
        "SELECT honker_enqueue('q', '4', {}, NULL, 0, 3, NULL)",
        now_s + 30
    ));
    assert_eq!(q.get_job(at).unwrap().state, JobState::Scheduled);
    // Expires <= 0: born expired, never handed out, swept.
    let born = int("SELECT honker_enqueue('q', '5', NULL, NULL, 9, 3, 0)");
    let born2 = int("SELECT honker_enqueue('q', '6', NULL, NULL, 9, 3, -10)");
    assert_eq!(int("SELECT honker_sweep_expired('q')"), 2);
    assert_eq!(q.get_job(born).unwrap().state, JobState::Expired);
    assert_eq!(q.get_job(born2).unwrap().state, JobState::Expired);
    // JavaScript drivers bind numbers as REAL: whole REALs are integers.
    let real = int("SELECT honker_enqueue('r', '{}', NULL, NULL, 1.0, 2.0, NULL)");
    assert_eq!(
        t.db.queue("r").unwrap().get_job(real).unwrap().max_attempts,
        2
    );

    // Claim: Honker's rows, priority first, payload a JSON string.
    let rows = json_of("SELECT honker_claim_batch('q', 'w1', 1, 30)");
    assert_eq!(
        rows,
        json!([{"id": b, "queue": "q", "payload": "{\"n\":2}", "worker_id": "w1",
                "attempts": 1, "claim_expires_at": now_s + 30}])
    );
    // get_job: Honker's object for a live job, '' otherwise.
    let job = json_of(&format!("SELECT honker_get_job({b})"));
    assert_eq!(job["state"], "processing");
    assert_eq!(job["claim_expires_at"], now_s + 30);
    assert_eq!(job["payload"], "{\"n\":2}");
    assert_eq!(
        json_of(&format!("SELECT honker_get_job({a})"))["state"],
        "pending"
    );
    assert_eq!(
        text(select(&t, "SELECT honker_get_job(424242)").unwrap()),
        ""
    );
    assert_eq!(
        text(select(&t, &format!("SELECT honker_get_job({born})")).unwrap()),
        ""
    );

    // Ownership by worker id: another worker gets 0 from everything.
    for sql in [
        format!("SELECT honker_ack({b}, 'w2')"),
        format!("SELECT honker_retry({b}, 'w2', 0, 'e')"),
        format!("SELECT honker_fail({b}, 'w2', 'e')"),
        format!("SELECT honker_heartbeat({b}, 'w2', 30)"),
        format!("SELECT honker_ack({b}, 'w1', 2)"),
        "SELECT honker_ack(424242, 'w1')".into(),
        "SELECT honker_cancel(424242)".into(),
        format!("SELECT honker_cancel('other', {b})"),
    ] {
        assert_eq!(int(&sql), 0, "{sql}");
    }
    assert_eq!(q.get_job(b).unwrap().state, JobState::Running);
    // Heartbeat while live: 1, and the lease moves.
    assert_eq!(
        int(&format!("SELECT honker_heartbeat({b}, 'w1', 100, 1)")),
        1
    );
    assert_eq!(
        q.get_job(b).unwrap().lease_expires_at,
        Some((now_s + 100) * 1000)
    );
    // After the lease lapses (not yet reclaimed): heartbeat 0, ack still 1.
    t.clock.advance(Duration::from_secs(101));
    assert_eq!(int(&format!("SELECT honker_heartbeat({b}, 'w1', 100)")), 0);
    assert_eq!(int(&format!("SELECT honker_ack({b}, 'w1', 1)")), 1);
    assert!(q.get_job(b).is_err(), "acked and gone");
    assert_eq!(int(&format!("SELECT honker_ack({b}, 'w1')")), 0, "twice");

    // Retry: back to pending after the delay, then dead with the error when
    // the attempts are used up; fenced by the attempt number.
    let r = int("SELECT honker_enqueue('retry', '{}', NULL, NULL, 0, 2, NULL)");
    let rows = json_of("SELECT honker_claim_batch('retry', 'w', 10, 30)");
    assert_eq!(rows[0]["attempts"], 1);
    assert_eq!(
        int(&format!("SELECT honker_retry({r}, 'w', 0, 'flaky', 2)")),
        0,
        "stale attempt"
    );
    assert_eq!(
        int(&format!("SELECT honker_retry({r}, 'w', 10, 'flaky', 1)")),
        1
    );
    let rq = t.db.queue("retry").unwrap();
    let info = rq.get_job(r).unwrap();
    assert_eq!(
        (info.state, info.run_at),
        (JobState::Scheduled, (now_s + 101 + 10) * 1000)
    );
    t.clock.advance(Duration::from_secs(10));
    let rows = json_of("SELECT honker_claim_batch('retry', 'w', 10, 30)");
    assert_eq!(rows[0]["attempts"], 2);
    assert_eq!(
        int(&format!("SELECT honker_retry({r}, 'w', 0, 'gave up')")),
        1
    );
    let info = rq.get_job(r).unwrap();
    assert_eq!(
        (info.state, info.last_error.as_deref()),
        (JobState::Dead, Some("gave up"))
    );

    // Fail: dead now, with the error (fenced arity too).
    let f = int("SELECT honker_enqueue('fail', '{}', NULL, NULL, 0, 3, NULL)");
    json_of("SELECT honker_claim_batch('fail', 'w', 1, 30)");
    assert_eq!(
        int(&format!("SELECT honker_fail({f}, 'w', 'broken', 1)")),
        1
    );
    let fq = t.db.queue("fail").unwrap();
    assert_eq!(fq.get_job(f).unwrap().last_error.as_deref(), Some("broken"));

    // A lease that lapses on the last attempt dies with Honker's words.
    let l = int("SELECT honker_enqueue('lapse', '{}', NULL, NULL, 0, 1, NULL)");
    json_of("SELECT honker_claim_batch('lapse', 'w', 1, 1)");
    t.clock.advance(Duration::from_secs(2));
    assert_eq!(
        json_of("SELECT honker_claim_batch('lapse', 'w', 1, 1)"),
        json!([])
    );
    let lq = t.db.queue("lapse").unwrap();
    let info = lq.get_job(l).unwrap();
    assert_eq!(
        (info.state, info.last_error.as_deref()),
        (JobState::Dead, Some("max attempts exceeded"))
    );
    // A ready job that has used all its attempts is dead-lettered at claim,
    // not handed out (a row written by hand, or imported from Honker).
    let x = int("SELECT honker_enqueue('exhausted', '{}', NULL, NULL, 0, 2, NULL)");
    let y = int("SELECT honker_enqueue('exhausted', '{}', NULL, NULL, 0, 2, NULL)");
    let tx = t.db.transaction().unwrap();
    tx.execute(
        &format!("UPDATE _honker_jobs SET attempts = 2 WHERE id = {x}"),
        [],
    )
    .unwrap();
    tx.commit().unwrap();
    let rows = json_of("SELECT honker_claim_batch('exhausted', 'w', 5, 30)");
    assert_eq!(rows.as_array().unwrap().len(), 1);
    assert_eq!(rows[0]["id"], y);
    let eq = t.db.queue("exhausted").unwrap();
    let info = eq.get_job(x).unwrap();
    assert_eq!(
        (info.state, info.last_error.as_deref()),
        (JobState::Dead, Some("max attempts exceeded"))
    );

    // ack_batch: ids, or [id, attempt] pairs; only this worker's count.
    let ids: Vec<i64> = (0..3)
        .map(|i| {
            int(&format!(
                "SELECT honker_enqueue('batch', '{i}', NULL, NULL, 0, 3, NULL)"
            ))
        })
        .collect();
    json_of("SELECT honker_claim_batch('batch', 'w', 3, 30)");
    assert_eq!(
        int(&format!(
            "SELECT honker_ack_batch('[{}, [{}, 1], [{}, 9], 424242]', 'w')",
            ids[0], ids[1], ids[2]
        )),
        2
    );
    assert_eq!(
        int(&format!("SELECT honker_ack_batch('[{}]', 'other')", ids[2])),
        0
    );
    assert_eq!(
        int(&format!("SELECT honker_ack_batch('[{}.0]', 'w')", ids[2])),
        1
    );

    // Cancel: any queue (1), or scoped to its queue (2); 0 once finished.
    let c1 = int("SELECT honker_enqueue('c', '{}', NULL, NULL, 0, 3, NULL)");
    let c2 = int("SELECT honker_enqueue('c', '{}', NULL, NULL, 0, 3, NULL)");
    assert_eq!(int(&format!("SELECT honker_cancel({c1})")), 1);
    assert_eq!(int(&format!("SELECT honker_cancel({c1})")), 0);
    assert_eq!(int(&format!("SELECT honker_cancel('other', {c2})")), 0);
    assert_eq!(int(&format!("SELECT honker_cancel('c', {c2})")), 1);

    // Results: keyed by job id, any text, with a lifetime in seconds.
    assert_eq!(
        int(&format!(
            "SELECT honker_result_save({a}, '{{\"ok\":true}}', 60)"
        )),
        1
    );
    assert_eq!(
        int("SELECT honker_result_save(777, 'val', 0)"),
        1,
        "an id honker never saw"
    );
    assert_eq!(
        text(select(&t, &format!("SELECT honker_result_get({a})")).unwrap()),
        "{\"ok\":true}"
    );
    assert_eq!(
        text(select(&t, "SELECT honker_result_get(777)").unwrap()),
        "val"
    );
    assert_eq!(
        select(&t, "SELECT honker_result_get(778)").unwrap(),
        Value::Null
    );
    // Under the job's queue: the Rust API finds it too, until it expires.
    assert_eq!(
        q.get_result(a).unwrap().unwrap().as_json().unwrap(),
        json!({"ok": true})
    );
    assert_eq!(
        int(&format!("SELECT honker_result_save({a}, '2', 1)")),
        1,
        "replaces"
    );
    assert_eq!(
        text(select(&t, &format!("SELECT honker_result_get({a})")).unwrap()),
        "2"
    );
    t.clock.advance(Duration::from_secs(1));
    assert_eq!(
        select(&t, &format!("SELECT honker_result_get({a})")).unwrap(),
        Value::Null
    );
    assert_eq!(q.get_result(a).unwrap(), None);
    assert_eq!(int("SELECT honker_result_sweep()"), 1);
    assert_eq!(int("SELECT honker_result_sweep()"), 0);
    assert_eq!(
        text(select(&t, "SELECT honker_result_get(777)").unwrap()),
        "val",
        "no ttl"
    );
}

/// `_honker_live` and `_honker_dead` read honker's rows in Honker's columns
/// and units, for Honker's operators and clients that query them directly.
#[test]
fn honkers_table_names_are_read_only_views() {
    let t = test_db();
    let now_s = 1_700_000_000i64;
    let q = t.db.queue("q").unwrap();
    let ready = q
        .enqueue(json!({"n": 1}), &EnqueueOptions::default())
        .unwrap()
        .id;
    let running = q.enqueue(json!(2), &EnqueueOptions::default()).unwrap().id;
    let dead = q.enqueue(json!(3), &EnqueueOptions::default()).unwrap().id;
    let tx = t.db.transaction().unwrap();
    let rows = tx
        .query(
            "SELECT id, state, worker_id, claim_expires_at, run_at, payload FROM _honker_live \
             WHERE queue = 'q' ORDER BY id",
            [],
        )
        .unwrap()
        .rows;
    tx.commit().unwrap();
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[0][1], Value::Text("pending".into()));
    assert_eq!(rows[0][4], Value::Integer(now_s));
    assert_eq!(rows[0][5], Value::Text("{\"n\":1}".into()));
    let mut jobs = q.claim("w", 2).unwrap();
    // Claim order is id order at equal priority: `ready` is first.
    let first = jobs.remove(0);
    assert_eq!(first.id, ready);
    first.ack().unwrap();
    let second = jobs.remove(0);
    assert_eq!(second.id, running);
    let tx = t.db.transaction().unwrap();
    let rows = tx
        .query(
            &format!(
                "SELECT state, worker_id, claim_expires_at FROM _honker_live WHERE id = {running}"
            ),
            [],
        )
        .unwrap()
        .rows;
    tx.commit().unwrap();
    assert_eq!(
        rows[0],
        vec![
            Value::Text("processing".into()),
            Value::Text("w".into()),
            Value::Integer(now_s + 60)
        ],
        "the default lease is 60 s"
    );
    let job = q.claim("w", 1).unwrap().pop().unwrap();
    assert_eq!(job.id, dead);
    job.fail("broken").unwrap();
    let tx = t.db.transaction().unwrap();
    let rows = tx
        .query(
            "SELECT id, last_error, died_at FROM _honker_dead WHERE queue = 'q'",
            [],
        )
        .unwrap()
        .rows;
    assert_eq!(
        rows,
        vec![vec![
            Value::Integer(dead),
            Value::Text("broken".into()),
            Value::Integer(now_s)
        ]]
    );
    // Read-only: a write through the view is refused.
    let err = tx.execute("DELETE FROM _honker_live", []).unwrap_err();
    assert!(
        err.to_string().contains("cannot modify _honker_live"),
        "{err}"
    );
    tx.rollback().unwrap();
}

/// A queue's stored settings (`Queue::configure`, any process) are what the
/// SQL functions and the scheduler use where a call names none, as a handle
/// made now would: they make no handle, and used honker's defaults (a job
/// enqueued by an ORM helper got 3 attempts and claims a 60 s lease on a
/// queue configured for 7 and 5 s).
#[test]
fn sql_functions_and_the_scheduler_use_the_queues_stored_settings() {
    let t = test_db();
    let q = t.db.queue("emails").unwrap();
    q.configure(&honker::QueueSettings {
        lease: Some(std::time::Duration::from_secs(5)),
        max_attempts: Some(7),
        ..Default::default()
    })
    .unwrap();
    let now = honker::Clock::now_ms(&t.clock);
    // honker's own functions: enqueue, claim, heartbeat.
    let Value::Integer(id) = select(&t, "SELECT honker_queue_enqueue('emails', '{}')").unwrap()
    else {
        panic!()
    };
    assert_eq!(q.get_job(id).unwrap().max_attempts, 7);
    let claimed: Json = serde_json::from_str(&text(
        select(&t, "SELECT honker_queue_claim('emails', 'w', 1, NULL)").unwrap(),
    ))
    .unwrap();
    assert_eq!(claimed[0]["lease_expires_at"], json!(now + 5_000));
    let token = claimed[0]["lease_token"].as_str().unwrap().to_owned();
    t.clock.advance(std::time::Duration::from_secs(1));
    let sql = format!("SELECT honker_job_heartbeat('emails', {id}, '{token}', NULL)");
    assert_eq!(select(&t, &sql).unwrap(), Value::Integer(now + 6_000));
    // Honker's contract functions: a named visibility still wins.
    let Value::Integer(h) = select(
        &t,
        "SELECT honker_enqueue('emails', '{}', NULL, NULL, 0, NULL, NULL)",
    )
    .unwrap() else {
        panic!()
    };
    assert_eq!(q.get_job(h).unwrap().max_attempts, 7);
    let rows: Json = serde_json::from_str(&text(
        select(&t, "SELECT honker_claim_batch('emails', 'h', 1, NULL)").unwrap(),
    ))
    .unwrap();
    assert_eq!(
        rows[0]["claim_expires_at"],
        json!((now + 6_000).div_euclid(1000))
    );
    // A scheduled fire: the queue's attempts, not the default 3.
    let s = t.db.scheduler();
    s.add(&honker::schedule::Schedule::cron(
        "digest",
        "0 * * * *",
        "emails",
    ))
    .unwrap();
    let fired = s.trigger_now("digest").unwrap();
    assert_eq!(q.get_job(fired).unwrap().max_attempts, 7);
    // A queue with no settings keeps the defaults.
    let Value::Integer(other) =
        select(&t, "SELECT honker_queue_enqueue('invoices', '{}')").unwrap()
    else {
        panic!()
    };
    assert_eq!(
        t.db.queue("invoices")
            .unwrap()
            .get_job(other)
            .unwrap()
            .max_attempts,
        3
    );
}
