//! A connection the application opened itself (GRDB's, in a Swift app;
//! here a plain rusqlite connection, which in Rust is always of honker's own
//! SQLite library): honker's SQL functions registered on it, and the typed
//! enqueue on it, commit or roll back with the application's row, and a
//! honker consumer in the same process claims the job. Run by scripts/test.sh
//! on the bundled SQLite and again on the system one (Debian 12: 3.40.1),
//! the Swift package's mode.

use std::time::{Duration, Instant};

use honker::rusqlite::{params, Connection};
use honker::{ClaimOptions, Database, EnqueueOptions, ErrorKind};
use serde_json::json;

fn app_connection(path: &std::path::Path) -> Connection {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, who TEXT NOT NULL)",
    )
    .unwrap();
    conn
}

fn waiting_claim(db: &Database) -> std::thread::JoinHandle<(Vec<String>, Duration)> {
    let q = db.queue("emails").unwrap();
    std::thread::spawn(move || {
        let started = Instant::now();
        let jobs = q
            .claim_with(
                "consumer",
                10,
                &ClaimOptions {
                    lease: None,
                    wait: Duration::from_secs(10),
                },
            )
            .unwrap();
        let got = jobs
            .iter()
            .map(|j| j.payload.as_json_text().unwrap().to_string())
            .collect();
        for j in &jobs {
            j.ack().unwrap();
        }
        (got, started.elapsed())
    })
}

#[test]
fn sql_functions_on_the_apps_connection_commit_and_roll_back_with_its_rows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    let db = Database::open(&path).unwrap();
    let mut app = app_connection(&path);
    // SAFETY: an open connection of this binary's one SQLite library, used by
    // this thread only.
    unsafe { db.register_functions_on(app.handle()).unwrap() };

    // Rolled back with the order: no job, no order.
    let tx = app.transaction().unwrap();
    tx.execute("INSERT INTO orders (who) VALUES ('mallory')", [])
        .unwrap();
    let id: i64 = tx
        .query_row(
            "SELECT honker_enqueue('emails', ?1, NULL, NULL, 0, NULL, NULL)",
            params![r#"{"to":"mallory"}"#],
            |r| r.get(0),
        )
        .unwrap();
    assert!(id > 0);
    drop(tx);
    let q = db.queue("emails").unwrap();
    assert_eq!(q.stats().unwrap().ready, 0, "the rollback took the job too");

    // Committed with the order: a consumer already waiting in this process
    // wakes and claims it (the commit is the app's, seen by the watcher).
    let consumer = waiting_claim(&db);
    std::thread::sleep(Duration::from_millis(100));
    let tx = app.transaction().unwrap();
    tx.execute("INSERT INTO orders (who) VALUES ('carol')", [])
        .unwrap();
    tx.query_row(
        "SELECT honker_enqueue('emails', ?1, NULL, NULL, 0, NULL, NULL)",
        params![r#"{"to":"carol"}"#],
        |r| r.get::<_, i64>(0),
    )
    .unwrap();
    tx.commit().unwrap();
    let (got, waited) = consumer.join().unwrap();
    assert_eq!(got, vec![r#"{"to":"carol"}"#.to_string()]);
    assert!(
        waited < Duration::from_secs(5),
        "woken, not timed out: {waited:?}"
    );
    let orders: i64 = app
        .query_row("SELECT count(*) FROM orders", [], |r| r.get(0))
        .unwrap();
    assert_eq!(orders, 1);
}

#[test]
fn the_typed_enqueue_on_the_apps_connection_joins_its_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    let db = Database::open(&path).unwrap();
    let mut app = app_connection(&path);
    let q = db.queue("emails").unwrap();

    let tx = app.transaction().unwrap();
    tx.execute("INSERT INTO orders (who) VALUES ('mallory')", [])
        .unwrap();
    // SAFETY: as above.
    let done = unsafe {
        q.enqueue_many_on(
            tx.handle(),
            [json!({"to": "mallory"})],
            &EnqueueOptions::default(),
        )
    }
    .unwrap();
    assert_eq!(done.len(), 1);
    drop(tx);
    assert_eq!(q.stats().unwrap().ready, 0);

    let consumer = waiting_claim(&db);
    std::thread::sleep(Duration::from_millis(100));
    let tx = app.transaction().unwrap();
    tx.execute("INSERT INTO orders (who) VALUES ('carol')", [])
        .unwrap();
    // SAFETY: as above.
    unsafe {
        q.enqueue_many_on(
            tx.handle(),
            [json!({"to": "carol"})],
            &EnqueueOptions::default(),
        )
    }
    .unwrap();
    tx.commit().unwrap();
    let (got, waited) = consumer.join().unwrap();
    assert_eq!(got, vec![r#"{"to":"carol"}"#.to_string()]);
    assert!(waited < Duration::from_secs(5), "{waited:?}");

    // Autocommit: the call is its own transaction, and wakes at once.
    let consumer = waiting_claim(&db);
    std::thread::sleep(Duration::from_millis(100));
    // SAFETY: as above.
    unsafe {
        q.enqueue_many_on(
            app.handle(),
            [json!({"to": "dave"})],
            &EnqueueOptions::default(),
        )
    }
    .unwrap();
    let (got, _) = consumer.join().unwrap();
    assert_eq!(got, vec![r#"{"to":"dave"}"#.to_string()]);
}

#[test]
fn a_foreign_connection_on_another_file_or_null_is_refused_and_nothing_changes() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("app.db")).unwrap();
    let other = app_connection(&dir.path().join("other.db"));
    let q = db.queue("emails").unwrap();
    // SAFETY: open connections of this library, or null (refused).
    unsafe {
        let e = db.register_functions_on(other.handle()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
        assert!(e.message().contains("other.db"), "{e}");
        let e = db.register_functions_on(std::ptr::null_mut()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
        let e = q
            .enqueue_many_on(other.handle(), [json!(1)], &EnqueueOptions::default())
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    }
    assert!(other
        .query_row("SELECT honker_version()", [], |r| r.get::<_, String>(0))
        .is_err());
    // Too large a payload on the right file: a typed error, the app's transaction intact.
    let mut app = app_connection(&dir.path().join("app.db"));
    let tx = app.transaction().unwrap();
    tx.execute("INSERT INTO orders (who) VALUES ('erin')", [])
        .unwrap();
    // SAFETY: as above.
    let e = unsafe {
        q.enqueue_many_on(
            tx.handle(),
            [json!("x".repeat(2 << 20))],
            &EnqueueOptions::default(),
        )
    }
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    tx.commit().unwrap();
    let orders: i64 = app
        .query_row("SELECT count(*) FROM orders", [], |r| r.get(0))
        .unwrap();
    assert_eq!(orders, 1);
    assert_eq!(q.stats().unwrap().ready, 0);
}

/// Which SQLite this binary runs on: the system's shared library without
/// the `bundled` feature (so one library serves honker and the app), none
/// mapped with it.
#[cfg(target_os = "linux")]
#[test]
fn the_build_mode_decides_the_library_this_process_runs_on() {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let shared = maps.contains("libsqlite3.so");
    assert_eq!(
        shared,
        !cfg!(feature = "bundled"),
        "{}",
        honker::rusqlite::version()
    );
    if shared {
        eprintln!("system SQLite {}", honker::rusqlite::version());
    }
}
