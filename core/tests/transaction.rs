//! The outbox: jobs written in the caller's transaction commit (or vanish)
//! with the caller's own rows.

mod common;

use std::time::Duration;

use common::test_db;
use honker::{EnqueueOptions, ErrorKind, Value};
use serde_json::json;

fn orders_table(t: &common::TestDb) {
    t.db.execute(
        "CREATE TABLE orders (id INTEGER PRIMARY KEY, user_id INTEGER, status TEXT)",
        [],
    )
    .unwrap();
}

#[test]
fn rolled_back_enqueue_never_exists() {
    let t = test_db();
    orders_table(&t);
    let q = t.db.queue("emails").unwrap();

    let tx = t.db.transaction().unwrap();
    tx.execute(
        "INSERT INTO orders (user_id, status) VALUES (1, 'paid')",
        [],
    )
    .unwrap();
    q.enqueue_tx(
        &tx,
        json!({"to": "a@example.com"}),
        &EnqueueOptions::default(),
    )
    .unwrap();
    tx.rollback().unwrap();

    {
        let tx = t.db.transaction().unwrap();
        tx.execute(
            "INSERT INTO orders (user_id, status) VALUES (2, 'paid')",
            [],
        )
        .unwrap();
        q.enqueue_tx(
            &tx,
            json!({"to": "b@example.com"}),
            &EnqueueOptions::default(),
        )
        .unwrap();
        // dropped without commit: rolls back
    }

    assert_eq!(t.count("orders"), 0);
    assert_eq!(t.count("_honker_jobs"), 0);
    assert!(q.claim("w", 10).unwrap().is_empty());
}

#[test]
fn job_becomes_visible_exactly_when_the_row_does() {
    let t = test_db();
    orders_table(&t);
    let q = t.db.queue("emails").unwrap();
    // Another open of the file: a separate writer and readers, as another
    // process would have.
    let other = t.reopen();
    let other_q = other.queue("emails").unwrap();

    let tx = t.db.transaction().unwrap();
    tx.execute(
        "INSERT INTO orders (user_id, status) VALUES (7, 'paid')",
        [],
    )
    .unwrap();
    let id = q
        .enqueue_tx(&tx, json!({"order": 7}), &EnqueueOptions::default())
        .unwrap()
        .id;
    // Inside the transaction both are visible to it...
    let inside = tx.query("SELECT count(*) FROM _honker_jobs", []).unwrap();
    assert_eq!(inside.rows[0][0], Value::Integer(1));
    // ...and to nobody else.
    assert_eq!(
        other.query("SELECT count(*) FROM orders", []).unwrap().rows[0][0],
        Value::Integer(0)
    );
    assert_eq!(other_q.stats().unwrap().ready, 0);
    tx.commit().unwrap();

    assert_eq!(
        other.query("SELECT count(*) FROM orders", []).unwrap().rows[0][0],
        Value::Integer(1)
    );
    let jobs = other_q.claim("w", 1).unwrap();
    assert_eq!(jobs[0].id, id);
}

#[test]
fn ack_in_the_transaction_that_records_the_effect() {
    let t = test_db();
    t.db.execute("CREATE TABLE sent (job_id INTEGER PRIMARY KEY)", [])
        .unwrap();
    let q = t.db.queue("emails").unwrap();
    q.enqueue(json!(1), &EnqueueOptions::default()).unwrap();
    let job = q.claim("w", 1).unwrap().pop().unwrap();

    // Effect and ack roll back together...
    let tx = t.db.transaction().unwrap();
    tx.execute("INSERT INTO sent (job_id) VALUES (?1)", [job.id])
        .unwrap();
    job.ack_tx(&tx, None).unwrap();
    tx.rollback().unwrap();
    assert_eq!(t.count("sent"), 0);
    assert_eq!(t.count("_honker_jobs WHERE state = 'running'"), 1);

    // ...and commit together.
    let tx = t.db.transaction().unwrap();
    tx.execute("INSERT INTO sent (job_id) VALUES (?1)", [job.id])
        .unwrap();
    job.ack_tx(&tx, Some(honker::Payload::from(json!("ok"))))
        .unwrap();
    tx.commit().unwrap();
    assert_eq!(t.count("sent"), 1);
    assert_eq!(t.count("_honker_jobs"), 0);
    assert_eq!(t.count("_honker_results"), 1);
}

#[test]
fn a_failed_verb_leaves_the_callers_transaction_intact() {
    let t = test_db();
    orders_table(&t);
    let q = t.db.queue("emails").unwrap();
    q.enqueue(json!(1), &EnqueueOptions::default()).unwrap();
    let job = q.claim("w", 1).unwrap().pop().unwrap();
    let stale = honker::Lease {
        job_id: job.id,
        token: "stale".into(),
    };

    let tx = t.db.transaction().unwrap();
    tx.execute(
        "INSERT INTO orders (user_id, status) VALUES (1, 'paid')",
        [],
    )
    .unwrap();
    let err = q.ack_tx(&tx, &stale, None).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LeaseLost);
    let err = q
        .enqueue_tx(
            &tx,
            honker::Payload::Json("{".into()),
            &EnqueueOptions::default(),
        )
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    q.enqueue_tx(&tx, json!(2), &EnqueueOptions::default())
        .unwrap();
    tx.commit().unwrap();
    assert_eq!(t.count("orders"), 1);
    assert_eq!(t.count("_honker_jobs"), 2);
}

#[test]
fn application_sql_errors_are_coded_and_roll_back_with_the_transaction() {
    let t = test_db();
    orders_table(&t);
    let q = t.db.queue("emails").unwrap();
    let tx = t.db.transaction().unwrap();
    q.enqueue_tx(&tx, json!(1), &EnqueueOptions::default())
        .unwrap();
    let err = tx.execute("INSERT INTO nope VALUES (1)", []).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Sqlite);
    let err = tx.execute("SELECT 1; SELECT 2", []).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    drop(tx);
    assert_eq!(t.count("_honker_jobs"), 0);
}

#[test]
fn same_thread_write_without_tx_fails_fast_instead_of_deadlocking() {
    let t = test_db();
    let q = t.db.queue("emails").unwrap();
    let tx = t.db.transaction().unwrap();
    let started = std::time::Instant::now();
    let err = q.enqueue(json!(1), &EnqueueOptions::default()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(
        t.db.transaction().unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    tx.commit().unwrap();
    q.enqueue(json!(1), &EnqueueOptions::default()).unwrap();
}

#[test]
fn other_threads_wait_for_the_open_transaction() {
    let t = test_db();
    let q = t.db.queue("emails").unwrap();
    let tx = t.db.transaction().unwrap();
    q.enqueue_tx(&tx, json!("first"), &EnqueueOptions::default())
        .unwrap();
    let q2 = q.clone();
    let (sent, started) = std::sync::mpsc::channel();
    let other = std::thread::spawn(move || {
        sent.send(()).unwrap();
        q2.enqueue(json!("second"), &EnqueueOptions::default())
            .unwrap()
            .id
    });
    started.recv().unwrap();
    tx.commit().unwrap();
    let second = other.join().unwrap();
    let jobs = q.claim("w", 2).unwrap();
    assert_eq!(jobs.len(), 2);
    assert_eq!(jobs[1].id, second);
}

#[test]
fn a_transaction_only_works_with_its_own_database() {
    let t = test_db();
    let other = t.reopen();
    let q = other.queue("emails").unwrap();
    let tx = t.db.transaction().unwrap();
    let err = q
        .enqueue_tx(&tx, json!(1), &EnqueueOptions::default())
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
}

#[test]
fn claim_inside_a_transaction() {
    let t = test_db();
    let q = t.db.queue("emails").unwrap();
    q.enqueue(json!(1), &EnqueueOptions::default()).unwrap();
    let tx = t.db.transaction().unwrap();
    let jobs = q.claim_tx(&tx, "w", 1, None).unwrap();
    assert_eq!(jobs.len(), 1);
    tx.rollback().unwrap();
    assert_eq!(q.claim("w", 1).unwrap()[0].attempts, 1, "claim rolled back");
}

#[test]
fn with_transaction_commits_on_ok_and_rolls_back_on_err() {
    let t = test_db();
    orders_table(&t);
    let q = t.db.queue("emails").unwrap();
    let err =
        t.db.with_transaction(|tx| {
            tx.execute(
                "INSERT INTO orders (user_id, status) VALUES (1, 'paid')",
                [],
            )?;
            q.enqueue_tx(tx, json!(1), &EnqueueOptions::default())?;
            tx.execute("INSERT INTO orders (nope) VALUES (1)", [])
        })
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Sqlite);
    assert_eq!(t.count("orders"), 0);
    assert_eq!(t.count("_honker_jobs"), 0);

    let id =
        t.db.with_transaction(|tx| {
            tx.execute(
                "INSERT INTO orders (user_id, status) VALUES (1, 'paid')",
                [],
            )?;
            q.enqueue_tx(tx, json!(1), &EnqueueOptions::default())
        })
        .unwrap()
        .id;
    assert_eq!(t.count("orders"), 1);
    assert_eq!(q.claim("w", 1).unwrap()[0].id, id);

    // A panic inside rolls back too, and leaves the writer usable.
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = t.db.with_transaction(|tx| -> honker::Result<()> {
            tx.execute(
                "INSERT INTO orders (user_id, status) VALUES (2, 'paid')",
                [],
            )?;
            panic!("handler bug");
        });
    }));
    assert!(result.is_err());
    assert_eq!(t.count("orders"), 1);
    q.enqueue(json!(2), &EnqueueOptions::default()).unwrap();
}

// ----- SQLite ends the transaction: it is dead, nothing autocommits -------

/// After SQLite rolled the transaction back on its own, every later call on
/// it and `commit` fail with `ROLLED_BACK`, nothing runs in autocommit on its
/// behalf (neither the application's rows nor honker's jobs), `rollback`
/// succeeds, and the writer is free again.
fn assert_dead_and_nothing_committed(
    t: &common::TestDb,
    q: &honker::Queue,
    tx: honker::Transaction,
    expect_orders: i64,
) {
    let later = tx.execute("INSERT INTO orders (id, status) VALUES (500, 'late')", []);
    assert_eq!(later.unwrap_err().kind(), ErrorKind::RolledBack);
    let job = q.enqueue_tx(&tx, json!({"late": true}), &EnqueueOptions::default());
    assert_eq!(job.unwrap_err().kind(), ErrorKind::RolledBack);
    let sql = tx.query(
        "SELECT honker_enqueue('emails', '{\"sql\":1}', NULL, NULL, 0, 3, NULL)",
        [],
    );
    assert_eq!(sql.unwrap_err().kind(), ErrorKind::RolledBack);
    let claim = q.claim_tx(&tx, "w", 1, None);
    assert_eq!(claim.unwrap_err().kind(), ErrorKind::RolledBack);
    assert_eq!(tx.commit().unwrap_err().kind(), ErrorKind::RolledBack);
    assert_eq!(t.count("orders"), expect_orders);
    assert_eq!(t.count("_honker_jobs"), 0);
    common::assert_integrity(&t.db);
    // The writer is free: a new transaction works.
    t.db.execute("INSERT INTO orders (id, status) VALUES (900, 'next')", [])
        .unwrap();
}

/// A transaction holding order 2 and its job, not yet committed.
fn paid_order(t: &common::TestDb, q: &honker::Queue) -> honker::Transaction {
    let tx = t.db.transaction().unwrap();
    tx.execute("INSERT INTO orders (id, status) VALUES (2, 'paid')", [])
        .unwrap();
    q.enqueue_tx(&tx, json!({"order": 2}), &EnqueueOptions::default())
        .unwrap();
    tx
}

fn seeded() -> (common::TestDb, honker::Queue) {
    let t = test_db();
    orders_table(&t);
    t.db.execute("INSERT INTO orders (id, status) VALUES (1, 'before')", [])
        .unwrap();
    let q = t.db.queue("emails").unwrap();
    (t, q)
}

#[test]
fn insert_or_rollback_kills_the_transaction() {
    let (t, q) = seeded();
    let tx = paid_order(&t, &q);
    let e = tx
        .execute(
            "INSERT OR ROLLBACK INTO orders (id, status) VALUES (1, 'dup')",
            [],
        )
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::RolledBack, "{e}");
    assert_dead_and_nothing_committed(&t, &q, tx, 1);
}

#[test]
fn raise_rollback_in_a_temp_trigger_kills_the_transaction() {
    let (t, q) = seeded();
    t.db.execute(
        "CREATE TEMP TRIGGER no_refunds BEFORE INSERT ON orders WHEN NEW.status = 'refund' \
         BEGIN SELECT RAISE(ROLLBACK, 'no refunds'); END",
        [],
    )
    .unwrap();
    let tx = t.db.transaction().unwrap();
    q.enqueue_tx(&tx, json!({"order": 3}), &EnqueueOptions::default())
        .unwrap();
    let e = tx
        .execute("INSERT INTO orders (id, status) VALUES (3, 'refund')", [])
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::RolledBack, "{e}");
    assert_dead_and_nothing_committed(&t, &q, tx, 1);
}

#[test]
fn a_rollback_after_death_succeeds_and_a_drop_is_quiet() {
    let (t, q) = seeded();
    let tx = t.db.transaction().unwrap();
    let _ = tx.execute(
        "INSERT OR ROLLBACK INTO orders (id, status) VALUES (1, 'dup')",
        [],
    );
    tx.rollback().unwrap();
    let tx = t.db.transaction().unwrap();
    let _ = tx.execute(
        "INSERT OR ROLLBACK INTO orders (id, status) VALUES (1, 'dup')",
        [],
    );
    drop(tx);
    q.enqueue(json!(1), &EnqueueOptions::default()).unwrap();
    assert_eq!(t.count("_honker_jobs"), 1);
}

/// `SQLITE_FULL` without a statement journal (a single-row INSERT whose
/// pages spill while the disk is full) rolls the whole transaction back.
#[test]
fn a_full_disk_without_a_statement_journal_kills_the_transaction() {
    let Some(fs) = common::Tmpfs::mount("8m") else {
        return;
    };
    let path = fs.path().join("full.db");
    let db = honker::Database::open(&path).unwrap();
    db.execute(
        "CREATE TABLE orders (id INTEGER PRIMARY KEY, status TEXT, v BLOB)",
        [],
    )
    .unwrap();
    db.execute("INSERT INTO orders (id, status) VALUES (1, 'before')", [])
        .unwrap();
    db.execute("PRAGMA cache_size = 10", []).unwrap();
    let q = db.queue("emails").unwrap();
    let tx = db.transaction().unwrap();
    q.enqueue_tx(&tx, json!({"order": 4}), &EnqueueOptions::default())
        .unwrap();
    let filler = common::fill(fs.path());
    let e = tx
        .execute(
            "INSERT INTO orders (id, status, v) VALUES (4, 'big', randomblob(3000000))",
            [],
        )
        .unwrap_err();
    std::fs::remove_file(filler).unwrap();
    assert_eq!(e.kind(), ErrorKind::RolledBack, "{e}");
    let later = tx.execute("INSERT INTO orders (id, status) VALUES (5, 'late')", []);
    assert_eq!(later.unwrap_err().kind(), ErrorKind::RolledBack);
    assert_eq!(tx.commit().unwrap_err().kind(), ErrorKind::RolledBack);
    assert_eq!(common::count(&db, "orders"), 1);
    assert_eq!(common::count(&db, "_honker_jobs"), 0);
    common::assert_integrity(&db);
    db.close().unwrap();
}

/// An interrupt (`sqlite3_interrupt`, as a request timeout would send)
/// during a write rolls the whole transaction back.
#[test]
fn an_interrupt_kills_the_transaction() {
    let (t, q) = seeded();
    t.db.execute("CREATE TABLE big (x INTEGER)", []).unwrap();
    let tx = t.db.transaction().unwrap();
    q.enqueue_tx(&tx, json!({"order": 6}), &EnqueueOptions::default())
        .unwrap();
    let handle = tx.connection().unwrap().get_interrupt_handle();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop = std::sync::Arc::clone(&done);
    // Interrupts are only seen by running statements: keep sending until
    // the statement has ended.
    let interrupter = std::thread::spawn(move || {
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            handle.interrupt();
            std::thread::sleep(Duration::from_millis(2));
        }
    });
    // An interrupt that lands as the statement starts, before it has
    // written anything, fails it without ending the transaction (SQLite
    // checks for one on entry): then the statement runs again, until an
    // interrupt lands mid-write, which ends the transaction.
    let mut e = None;
    for _ in 0..100 {
        let err = tx
            .execute(
                "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) \
                 INSERT INTO big SELECT x FROM c",
                [],
            )
            .unwrap_err();
        let before_start = err.kind() == ErrorKind::Sqlite && err.message().contains("interrupted");
        e = Some(err);
        if !before_start {
            break;
        }
    }
    let e = e.unwrap();
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    interrupter.join().unwrap();
    assert_eq!(e.kind(), ErrorKind::RolledBack, "{e}");
    assert_dead_and_nothing_committed(&t, &q, tx, 1);
    assert_eq!(t.count("big"), 0);
}

#[test]
fn transaction_control_through_execute_is_refused_and_changes_nothing() {
    let (t, q) = seeded();
    let tx = paid_order(&t, &q);
    for sql in [
        "COMMIT",
        "end",
        "  -- a comment\n ROLLBACK",
        "ROLLBACK TRANSACTION",
        "BEGIN",
        "RELEASE never_opened",
        "RELEASE SAVEPOINT honker_nested",
    ] {
        let e = tx.execute(sql, []).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{sql}: {e}");
        let e = tx.query(sql, []).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{sql}: {e}");
    }
    // The application's own savepoints work as SQLite's do.
    tx.execute("SAVEPOINT mine", []).unwrap();
    tx.execute("INSERT INTO orders (id, status) VALUES (3, 'undone')", [])
        .unwrap();
    tx.execute("ROLLBACK TO mine", []).unwrap();
    tx.execute("RELEASE mine", []).unwrap();
    assert_eq!(
        tx.execute("RELEASE mine", []).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    // Nothing was committed behind the transaction's back.
    assert_eq!(t.count("orders"), 1);
    tx.commit().unwrap();
    assert_eq!(t.count("orders"), 2);
    assert_eq!(t.count("_honker_jobs"), 1);
}

/// A detached transaction belongs to an async task, not to the thread: it can
/// be committed from another thread, and a write from the thread that began
/// it is not refused — it waits for the writer like any other (here from a
/// second thread, while the first still holds it).
#[test]
fn a_detached_transaction_is_not_tied_to_its_thread() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    let tx = t.db.transaction_detached().unwrap();
    q.enqueue_tx(&tx, json!("in tx"), &EnqueueOptions::default())
        .unwrap();
    let db = t.db.clone();
    let waiter = std::thread::spawn(move || {
        db.queue("q")
            .unwrap()
            .enqueue(json!("after"), &EnqueueOptions::default())
            .map(|e| e.id)
    });
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        !waiter.is_finished(),
        "the other write waits for the writer"
    );
    // Committed from another thread than the one that began it.
    std::thread::spawn(move || tx.commit())
        .join()
        .unwrap()
        .unwrap();
    waiter.join().unwrap().unwrap();
    // The beginning thread writes normally afterwards.
    q.enqueue(json!("last"), &EnqueueOptions::default())
        .unwrap();
    assert_eq!(t.count("_honker_jobs"), 3);
}

#[test]
fn the_in_forms_run_inside_the_transaction_given_or_on_their_own() {
    let t = common::test_db();
    let q = t.db.queue("q").unwrap();
    let o = honker::EnqueueOptions::default();
    // Inside a transaction that rolls back: nothing stays.
    let tx = t.db.transaction().unwrap();
    q.enqueue_many_in(Some(&tx), [serde_json::json!(1)], &o)
        .unwrap();
    tx.rollback().unwrap();
    assert_eq!(q.stats().unwrap().ready, 0);
    // On their own: committed.
    q.enqueue_many_in(None, [serde_json::json!(2)], &o).unwrap();
    let job = q
        .claim_in(None, "w", 1, &honker::ClaimOptions::default())
        .unwrap()
        .remove(0);
    let tx = t.db.transaction().unwrap();
    q.ack_in(Some(&tx), &job.lease, None).unwrap();
    tx.rollback().unwrap();
    assert_eq!(
        q.stats().unwrap().running,
        1,
        "the ack rolled back with its transaction"
    );
    q.ack_in(None, &job.lease, None).unwrap();
    assert_eq!(q.stats().unwrap().running, 0);
}

#[test]
fn a_claim_inside_a_transaction_cannot_wait() {
    let t = common::test_db();
    let q = t.db.queue("q").unwrap();
    q.enqueue(serde_json::json!(1), &honker::EnqueueOptions::default())
        .unwrap();
    let tx = t.db.transaction().unwrap();
    let waiting = honker::ClaimOptions {
        wait: std::time::Duration::from_millis(10),
        ..Default::default()
    };
    let err = q.claim_in(Some(&tx), "w", 1, &waiting).unwrap_err();
    assert_eq!(err.kind(), honker::ErrorKind::InvalidArgument);
    let claimed = q
        .claim_in(Some(&tx), "w", 1, &honker::ClaimOptions::default())
        .unwrap();
    assert_eq!(claimed.len(), 1);
    tx.commit().unwrap();
    assert_eq!(q.stats().unwrap().running, 1);
}
