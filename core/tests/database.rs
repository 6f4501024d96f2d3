//! Opening files: options, WAL, migrations (including several opens racing
//! on a new file), a schema newer than this build, the reader pool, close.

mod common;

use std::sync::{Arc, Barrier};
use std::time::Duration;

use common::{scalar, test_db};
use honker::{Database, Durability, EnqueueOptions, ErrorKind, Options, Value};
use serde_json::json;

#[test]
fn opens_in_wal_with_honkers_schema_and_leaves_user_version_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    {
        let app = honker::rusqlite::Connection::open(&path).unwrap();
        app.execute_batch("PRAGMA user_version = 7; CREATE TABLE orders (id INTEGER PRIMARY KEY);")
            .unwrap();
    }
    let db = Database::open(&path).unwrap();
    assert_eq!(
        scalar(&db, "PRAGMA journal_mode"),
        Value::Text("wal".into())
    );
    assert_eq!(scalar(&db, "PRAGMA user_version"), Value::Integer(7));
    assert_eq!(
        scalar(&db, "SELECT max(version) FROM _honker_schema"),
        Value::Integer(honker::schema::LATEST)
    );
    let names = db
        .query(
            "SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY name",
            [],
        )
        .unwrap();
    for row in &names.rows {
        let Value::Text(name) = &row[0] else { panic!() };
        assert!(
            name == "orders" || name.starts_with("_honker_"),
            "unexpected object {name}"
        );
    }
}

#[test]
fn durability_full_sets_synchronous_full() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open_with(
        dir.path().join("a.db"),
        Options {
            durability: Durability::Full,
            ..Options::default()
        },
    )
    .unwrap();
    let tx = db.transaction().unwrap();
    // synchronous is per connection: check the writer's.
    let sync = tx.query("PRAGMA synchronous", []).unwrap();
    assert_eq!(sync.rows[0][0], Value::Integer(2));
}

#[test]
fn bad_options_and_paths_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.db");
    let bad = [
        Options {
            readers: 0,
            ..Options::default()
        },
        Options {
            max_payload_bytes: 0,
            ..Options::default()
        },
        Options {
            busy_timeout: Duration::ZERO,
            ..Options::default()
        },
        Options {
            watch_fallback: Duration::from_secs(3600),
            ..Options::default()
        },
    ];
    for o in bad {
        let err = Database::open_with(&path, o).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    }
    assert!(!path.exists(), "nothing created for bad options");
    for p in ["", ":memory:", "file:x.db?mode=memory"] {
        assert_eq!(
            Database::open(p).unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
    }
    let q = QueueOptionsCase::all();
    let db = Database::open(&path).unwrap();
    for o in q {
        assert_eq!(
            db.queue_with("q", o).unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
    }
}

struct QueueOptionsCase;
impl QueueOptionsCase {
    fn all() -> Vec<honker::QueueOptions> {
        use honker::{Backoff, QueueOptions};
        vec![
            QueueOptions {
                max_attempts: 0,
                ..QueueOptions::default()
            },
            QueueOptions {
                lease: Duration::ZERO,
                ..QueueOptions::default()
            },
            QueueOptions {
                backoff: Backoff {
                    jitter: 1.5,
                    ..Backoff::default()
                },
                ..QueueOptions::default()
            },
            QueueOptions {
                backoff: Backoff {
                    base: Duration::from_secs(10),
                    max: Duration::from_secs(1),
                    jitter: 0.0,
                },
                ..QueueOptions::default()
            },
        ]
    }
}

#[test]
fn schema_too_new_is_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.db");
    {
        let db = Database::open(&path).unwrap();
        db.execute(
            "INSERT INTO _honker_schema (version, name, applied_at) VALUES (?1, 'future', 0)",
            [honker::schema::LATEST + 1],
        )
        .unwrap();
        db.close().unwrap();
    }
    let before = std::fs::read(&path).unwrap();
    let err = Database::open(&path).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::SchemaTooNew);
    assert!(err.to_string().starts_with("SCHEMA_TOO_NEW: "));
    assert_eq!(std::fs::read(&path).unwrap(), before, "file unchanged");
}

#[test]
fn many_opens_racing_on_a_new_file_migrate_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = Arc::new(dir.path().join("race.db"));
    let barrier = Arc::new(Barrier::new(8));
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let (path, barrier) = (Arc::clone(&path), Arc::clone(&barrier));
            std::thread::spawn(move || {
                barrier.wait();
                let db = Database::open(&*path).unwrap();
                db.queue("q")
                    .unwrap()
                    .enqueue(json!(i), &EnqueueOptions::default())
                    .unwrap();
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let db = Database::open(&*path).unwrap();
    assert_eq!(
        scalar(&db, "SELECT count(*) FROM _honker_schema"),
        Value::Integer(honker::schema::MIGRATIONS.len() as i64)
    );
    assert_eq!(db.queue("q").unwrap().stats().unwrap().ready, 8);
}

#[test]
fn reads_go_through_read_only_readers() {
    let t = test_db();
    let err = t.db.query("CREATE TABLE x (a)", []).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Sqlite);
    // Reads do not wait for an open write transaction.
    let tx = t.db.transaction().unwrap();
    tx.execute("CREATE TABLE y (a)", []).unwrap();
    let n =
        t.db.query("SELECT count(*) FROM sqlite_master WHERE name = 'y'", []);
    assert_eq!(n.unwrap().rows[0][0], Value::Integer(0));
    tx.commit().unwrap();
}

#[test]
fn query_returns_columns_and_typed_values() {
    let t = test_db();
    let rows =
        t.db.query(
            "SELECT 1 AS a, 'x' AS b, NULL AS c, 2.5 AS d, x'00' AS e",
            [],
        )
        .unwrap();
    assert_eq!(rows.columns, ["a", "b", "c", "d", "e"]);
    assert_eq!(
        rows.rows[0],
        vec![
            Value::Integer(1),
            Value::Text("x".into()),
            Value::Null,
            Value::Real(2.5),
            Value::Blob(vec![0])
        ]
    );
}

#[test]
fn closed_database_refuses_every_call() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    q.enqueue(json!(1), &EnqueueOptions::default()).unwrap();
    let clone = t.db.clone();
    t.db.close().unwrap();
    assert_eq!(
        q.enqueue(json!(1), &EnqueueOptions::default())
            .unwrap_err()
            .kind(),
        ErrorKind::Closed
    );
    assert_eq!(q.claim("w", 1).unwrap_err().kind(), ErrorKind::Closed);
    assert_eq!(q.stats().unwrap_err().kind(), ErrorKind::Closed);
    assert_eq!(clone.transaction().unwrap_err().kind(), ErrorKind::Closed);
    assert_eq!(
        clone.query("SELECT 1", []).unwrap_err().kind(),
        ErrorKind::Closed
    );
    // The job is safely on disk.
    let again = Database::open(&t.path).unwrap();
    assert_eq!(again.queue("q").unwrap().stats().unwrap().ready, 1);
}

#[test]
fn maintain_prunes_past_retention_only() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    let one = EnqueueOptions {
        max_attempts: Some(1),
        ..EnqueueOptions::default()
    };
    for i in 0..3 {
        q.enqueue(json!(i), &one).unwrap();
    }
    let mut jobs = q.claim("w", 3).unwrap();
    jobs.pop().unwrap().fail("dead").unwrap();
    jobs.pop().unwrap().ack_with_result(json!("r")).unwrap();
    q.cancel(jobs.pop().unwrap().id, None).unwrap();

    let r = t.db.maintain().unwrap();
    assert_eq!((r.dead, r.cancelled, r.results), (0, 0, 0));
    t.clock.advance(Duration::from_secs(86_400 + 1));
    let r = t.db.maintain().unwrap();
    assert_eq!(
        (r.dead, r.cancelled, r.results),
        (0, 0, 1),
        "results: 1 day"
    );
    t.clock.advance(Duration::from_secs(6 * 86_400));
    let r = t.db.maintain().unwrap();
    assert_eq!((r.dead, r.cancelled), (1, 1), "dead and cancelled: 7 days");
    assert_eq!(t.count("_honker_finished"), 0);
}

#[test]
fn writes_run_maintenance_automatically_when_due() {
    let t = common::test_db_with(Options {
        auto_maintain_every: Duration::from_secs(60),
        ..Options::default()
    });
    let q = t.db.queue("q").unwrap();
    q.enqueue(json!(1), &EnqueueOptions::default()).unwrap();
    q.claim("w", 1).unwrap()[0].fail("x").unwrap();
    assert_eq!(t.count("_honker_finished"), 1);
    t.clock.advance(Duration::from_secs(8 * 86_400));
    q.enqueue(json!(2), &EnqueueOptions::default()).unwrap();
    assert_eq!(t.count("_honker_finished"), 0, "pruned after a write");
}

#[test]
fn without_waiting_fails_at_once_where_a_call_would_wait_and_changes_nothing() {
    use std::time::{Duration, Instant};
    let t = common::test_db();
    let q = t.db.queue("q").unwrap();
    q.enqueue(serde_json::json!(1), &Default::default())
        .unwrap();
    let before = t.snapshot();

    // Another open of the file (another connection, as another process
    // would have) holds the SQLite write lock.
    let other = t.reopen();
    let held = other.transaction().unwrap();
    let started = Instant::now();
    let err = honker::without_waiting(|| q.enqueue(serde_json::json!(2), &Default::default()))
        .unwrap_err();
    assert_eq!(err.kind(), honker::ErrorKind::Busy);
    assert!(started.elapsed() < Duration::from_millis(500));
    held.rollback().unwrap();

    // A thread of this process holds the writer.
    let tx = t.db.transaction().unwrap();
    let q2 = q.clone();
    let started = Instant::now();
    let err = std::thread::spawn(move || honker::without_waiting(|| q2.claim("w", 1)).unwrap_err())
        .join()
        .unwrap();
    assert_eq!(err.kind(), honker::ErrorKind::Busy);
    assert!(started.elapsed() < Duration::from_millis(500));
    // A transaction open on this very thread (another Swift task's, on a
    // thread of the shared pool): Busy too, so the host waits off-thread;
    // without `without_waiting` it stays the INVALID_ARGUMENT that saves a
    // thread from waiting on itself (issue 53).
    let err = honker::without_waiting(|| q.claim("w", 1)).unwrap_err();
    assert_eq!(err.kind(), honker::ErrorKind::Busy, "{err}");
    let err = q.claim("w", 1).unwrap_err();
    assert_eq!(err.kind(), honker::ErrorKind::InvalidArgument, "{err}");
    drop(tx);
    assert_eq!(t.snapshot(), before);

    // Uncontended, it just runs; calls that wait by design are refused.
    let jobs = honker::without_waiting(|| q.claim("w", 1)).unwrap();
    assert_eq!(jobs.len(), 1);
    let err =
        honker::without_waiting(|| q.wait_result(jobs[0].id, Duration::from_secs(1))).unwrap_err();
    assert_eq!(err.kind(), honker::ErrorKind::InvalidArgument);
}

#[test]
fn an_empty_options_patch_is_cores_defaults_and_durability_parses_in_one_place() {
    let d = honker::Options::default();
    let p = honker::OptionsPatch::default().apply();
    assert_eq!(p.durability, d.durability);
    assert_eq!(p.busy_timeout, d.busy_timeout);
    assert_eq!(p.readers, d.readers);
    assert_eq!(p.max_payload_bytes, d.max_payload_bytes);
    assert_eq!(p.watch_fallback, d.watch_fallback);
    assert_eq!(p.auto_maintain_every, d.auto_maintain_every);
    let given = honker::OptionsPatch {
        readers: Some(2),
        busy_timeout: Some(std::time::Duration::from_millis(250)),
        ..Default::default()
    }
    .apply();
    assert_eq!((given.readers, given.busy_timeout.as_millis()), (2, 250));
    assert_eq!(given.max_payload_bytes, d.max_payload_bytes);
    for d in [honker::Durability::Normal, honker::Durability::Full] {
        assert_eq!(d.as_str().parse::<honker::Durability>().unwrap(), d);
    }
    let err = "fast".parse::<honker::Durability>().unwrap_err();
    assert_eq!(err.kind(), honker::ErrorKind::InvalidArgument);
    assert!(err.message().contains("\"fast\""), "{}", err.message());
}

/// A source for `Database::wait_for`'s loop: it says "now" at every look,
/// gets something at the take numbered `hit` (never when 0), and after a
/// take that got nothing says "now" again.
struct Counting {
    takes: std::sync::atomic::AtomicUsize,
    hit: usize,
}

impl honker::Source for Counting {
    type Item = usize;

    fn look(&self) -> honker::Result<Option<Duration>> {
        Ok(Some(Duration::ZERO))
    }

    fn take(&self) -> honker::Result<Option<usize>> {
        let n = self.takes.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        Ok((n == self.hit).then_some(n))
    }

    fn retry_in(&self) -> Option<Duration> {
        Some(Duration::ZERO)
    }
}

#[test]
fn a_wait_takes_when_its_source_says_now_and_ends_at_its_deadline_even_so() {
    let t = test_db();
    let counting = |hit| Counting {
        takes: Default::default(),
        hit,
    };
    // A look that says now is a take at once.
    let started = std::time::Instant::now();
    assert_eq!(
        t.db.wait_for(&counting(1), Duration::from_secs(30))
            .unwrap(),
        Some(1)
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    // A zero wait is one take.
    let once = counting(2);
    assert_eq!(t.db.wait_for(&once, Duration::ZERO).unwrap(), None);
    assert_eq!(once.takes.load(std::sync::atomic::Ordering::SeqCst), 1);
    // A source that keeps saying "now" and never gets anything still ends
    // at the deadline (no busy loop past it).
    let never = counting(0);
    let started = std::time::Instant::now();
    assert_eq!(
        t.db.wait_for(&never, Duration::from_millis(200)).unwrap(),
        None
    );
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(200) && took < Duration::from_secs(5),
        "{took:?}"
    );
}
