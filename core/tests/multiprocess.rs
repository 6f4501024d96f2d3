//! Several processes on one file: concurrent draining (each job exactly once,
//! no BUSY reaching callers), a worker killed with SIGKILL mid-lease (nothing
//! lost), and waits woken by another process's commit or by time.
//!
//! Child processes are this test binary run again with `HONKER_TEST_CHILD`
//! set; `child_process_entry` dispatches on it and is a no-op otherwise.

mod common;

use std::io::{BufReader, Write};
use std::process::Child;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{assert_integrity, scalar};
use honker::{
    ClaimOptions, Clock, Database, Durability, EnqueueOptions, ManualClock, Options, SystemClock,
    Value,
};
use serde_json::json;

use common::child::{next_tagged, read_tagged, report, spawn_child, CHILD_ENV};

/// The children. Each reports with `@@ ` lines and exits non-zero on any
/// error (a BUSY included).
#[test]
fn child_process_entry() {
    let Ok(role) = std::env::var(CHILD_ENV) else {
        return;
    };
    let path = std::env::var("HONKER_TEST_DB").unwrap();
    if let Ok(at) = std::env::var("HONKER_TEST_START_AT_MS") {
        // Line up with the sibling processes so the opens really race.
        let at: i64 = at.parse().unwrap();
        while SystemClock.now_ms() < at {
            std::hint::spin_loop();
        }
    }
    let durability = match std::env::var("HONKER_TEST_DURABILITY").as_deref() {
        Ok("full") => Durability::Full,
        _ => Durability::Normal,
    };
    let db = Database::open_with(
        &path,
        Options {
            durability,
            ..Options::default()
        },
    )
    .unwrap();
    match role.as_str() {
        "drain" => drain(&db),
        "hold" => hold(&db),
        "produce" => produce(&db),
        "open-and-enqueue" => {
            db.queue("work")
                .unwrap()
                .enqueue(json!(std::process::id()), &EnqueueOptions::default())
                .unwrap();
            report("done");
        }
        "enqueue-on-input" => {
            let q = db.queue("wake").unwrap();
            report("ready");
            let mut line = String::new();
            std::io::stdin().read_line(&mut line).unwrap();
            q.enqueue(json!("from another process"), &EnqueueOptions::default())
                .unwrap();
            report("enqueued");
        }
        other => panic!("unknown child role {other}"),
    }
}

fn drain(db: &Database) {
    let q = db.queue("work").unwrap();
    let worker = format!("drainer-{}", std::process::id());
    let mut acked = 0u64;
    let wait = ClaimOptions {
        lease: Some(Duration::from_secs(60)),
        wait: Duration::from_millis(300),
    };
    loop {
        let jobs = match q.claim_with(&worker, 16, &wait) {
            Ok(jobs) => jobs,
            Err(e) => panic!("claim failed: {e}"),
        };
        if jobs.is_empty() {
            let s = q.stats().unwrap();
            if s.ready + s.scheduled + s.running == 0 {
                break;
            }
            continue;
        }
        for job in jobs {
            // The effect (a row keyed by job id: a duplicate would violate the
            // primary key) and the ack commit together.
            let tx = db.transaction().unwrap();
            tx.execute(
                "INSERT INTO processed (job_id, worker) VALUES (?1, ?2)",
                honker::rusqlite::params![job.id, worker],
            )
            .unwrap();
            job.ack_tx(&tx, None).unwrap();
            tx.commit().unwrap();
            acked += 1;
        }
    }
    report(&acked.to_string());
}

fn hold(db: &Database) {
    let q = db.queue("work").unwrap();
    let jobs = q
        .claim_with(
            "doomed",
            10,
            &ClaimOptions {
                lease: Some(Duration::from_secs(30)),
                ..ClaimOptions::default()
            },
        )
        .unwrap();
    report(&jobs.len().to_string());
    // Wait to be killed.
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    std::process::exit(3);
}

/// Enqueues batches of 1 to 40 jobs (some of several pages) until killed,
/// reporting the last id of each batch once its commit has returned.
fn produce(db: &Database) {
    let q = db.queue("work").unwrap();
    for round in 0u64.. {
        let n = 1 + (round * 7 % 40) as usize;
        let size = (round * 997 % 9_000) as usize;
        let ids = q
            .enqueue_many(
                (0..n).map(|i| json!({"round": round, "i": i, "pad": "p".repeat(size)})),
                &EnqueueOptions::default(),
            )
            .unwrap();
        report(&ids.last().unwrap().id.to_string());
    }
}

/// A thread blocked in a claim that waits up to 30 s for one job.
fn spawn_waiter(q: &honker::Queue) -> std::thread::JoinHandle<Vec<honker::Job>> {
    let q = q.clone();
    std::thread::spawn(move || {
        q.claim_with(
            "w",
            1,
            &ClaimOptions {
                wait: Duration::from_secs(30),
                ..ClaimOptions::default()
            },
        )
        .unwrap()
    })
}

#[test]
fn four_processes_drain_20000_jobs_each_exactly_once() {
    drain_with_four_processes(20_000, "normal");
}

/// With an fsync per commit, locks are held longer: still no BUSY reaches a
/// caller and nothing runs twice (DESIGN §12 saw starvation here with
/// SQLite's default busy handler).
#[test]
fn four_processes_drain_at_full_durability() {
    drain_with_four_processes(4_000, "full");
}

fn drain_with_four_processes(jobs: u64, durability: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("drain.db");
    let db = Database::open(&path).unwrap();
    db.execute(
        "CREATE TABLE processed (job_id INTEGER PRIMARY KEY, worker TEXT NOT NULL)",
        [],
    )
    .unwrap();
    let q = db.queue("work").unwrap();
    for chunk in 0..jobs / 1000 {
        q.enqueue_many(
            (0..1000).map(|i| json!({ "n": chunk * 1000 + i })),
            &EnqueueOptions::default(),
        )
        .unwrap();
    }
    let env = [("HONKER_TEST_DURABILITY", durability.to_string())];
    let mut children: Vec<Child> = (0..4).map(|_| spawn_child("drain", &path, &env)).collect();
    let mut total = 0u64;
    for c in &mut children {
        total += read_tagged(c).parse::<u64>().unwrap();
    }
    for mut c in children {
        assert!(c.wait().unwrap().success(), "a drainer failed");
    }
    assert_eq!(total, jobs);
    assert_eq!(
        scalar(&db, "SELECT count(*) FROM processed"),
        Value::Integer(jobs as i64)
    );
    assert_eq!(
        scalar(&db, "SELECT count(DISTINCT worker) FROM processed"),
        Value::Integer(4),
        "every process took part"
    );
    assert_eq!(
        scalar(&db, "SELECT count(*) FROM _honker_jobs"),
        Value::Integer(0)
    );
    assert_integrity(&db);
}

#[test]
fn processes_racing_to_open_a_new_file_migrate_it_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new.db");
    let start_at = SystemClock.now_ms() + 300;
    let children: Vec<Child> = (0..4)
        .map(|_| {
            spawn_child(
                "open-and-enqueue",
                &path,
                &[("HONKER_TEST_START_AT_MS", start_at.to_string())],
            )
        })
        .collect();
    for mut c in children {
        assert_eq!(read_tagged(&mut c), "done");
        assert!(c.wait().unwrap().success());
    }
    let db = Database::open(&path).unwrap();
    assert_eq!(
        scalar(&db, "SELECT count(*) FROM _honker_schema"),
        Value::Integer(honker::schema::MIGRATIONS.len() as i64)
    );
    assert_eq!(db.queue("work").unwrap().stats().unwrap().ready, 4);
    assert_integrity(&db);
}

#[test]
fn a_worker_killed_mid_lease_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kill.db");
    let db = Database::open(&path).unwrap();
    let q = db.queue("work").unwrap();
    let ids: Vec<i64> = q
        .enqueue_many((0..10).map(|i| json!(i)), &EnqueueOptions::default())
        .unwrap()
        .iter()
        .map(|e| e.id)
        .collect();

    let mut child = spawn_child("hold", &path, &[]);
    assert_eq!(read_tagged(&mut child), "10");
    child.kill().unwrap(); // SIGKILL
    let status = child.wait().unwrap();
    assert!(!status.success());

    // Before the lease ends, nothing is claimable.
    assert!(q.claim("rescuer", 10).unwrap().is_empty());

    // Past the lease (on a clock moved forward, not by sleeping), every job
    // comes back, on its second attempt.
    let clock = ManualClock::new(SystemClock.now_ms() + 31_000);
    let later = Database::open_with(
        &path,
        Options {
            clock: Arc::new(clock),
            ..Options::default()
        },
    )
    .unwrap();
    let lq = later.queue("work").unwrap();
    let mut back = lq.claim("rescuer", 100).unwrap();
    back.sort_by_key(|j| j.id);
    assert_eq!(back.iter().map(|j| j.id).collect::<Vec<_>>(), ids);
    assert!(back.iter().all(|j| j.attempts == 2));
    for j in &back {
        j.ack().unwrap();
    }
    assert_integrity(&later);
}

/// A process killed while it commits as fast as it can: every commit that
/// returned is in the file (the WAL's frames reach it before the commit
/// returns), and the file is whole.
#[test]
fn a_producer_killed_mid_commit_loses_no_committed_job() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("produce.db");
    drop(Database::open(&path).unwrap());
    let mut child = spawn_child("produce", &path, &[]);
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut last = 0_i64;
    for _ in 0..400 {
        last = next_tagged(&mut reader).parse().unwrap();
    }
    child.kill().unwrap(); // SIGKILL, most likely mid-commit
    assert!(!child.wait().unwrap().success());
    let db = Database::open(&path).unwrap();
    let committed = scalar(
        &db,
        &format!("SELECT count(*) FROM _honker_jobs WHERE id <= {last}"),
    );
    assert_eq!(
        committed,
        Value::Integer(last),
        "a job committed before the kill is missing"
    );
    assert_integrity(&db);
}

#[test]
fn a_waiting_claim_wakes_on_another_process_commit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wake.db");
    let db = Database::open(&path).unwrap();
    let q = db.queue("wake").unwrap();
    let mut child = spawn_child("enqueue-on-input", &path, &[]);
    assert_eq!(read_tagged(&mut child), "ready");

    let waiter = spawn_waiter(&q);
    let started = Instant::now();
    child.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    assert_eq!(read_tagged(&mut child), "enqueued");
    let jobs = waiter.join().unwrap();
    assert_eq!(jobs.len(), 1, "woken and claimed");
    assert!(started.elapsed() < Duration::from_secs(30));
    assert!(child.wait().unwrap().success());
}

#[test]
fn a_waiting_claim_wakes_on_a_local_commit_without_polling_the_writer() {
    let t = common::test_db();
    let waiting_db = t.reopen();
    let q = waiting_db.queue("mine").unwrap();
    let before = waiting_db.write_transaction_count();
    let waiter = spawn_waiter(&q);
    // Busy unrelated queue: many commits, none of which concern "mine".
    let other = t.db.queue("theirs").unwrap();
    for i in 0..50 {
        other.enqueue(json!(i), &EnqueueOptions::default()).unwrap();
    }
    t.db.queue("mine")
        .unwrap()
        .enqueue(json!("yours"), &EnqueueOptions::default())
        .unwrap();
    let jobs = waiter.join().unwrap();
    assert_eq!(jobs[0].payload.as_json().unwrap(), json!("yours"));
    assert_eq!(
        waiting_db.write_transaction_count() - before,
        1,
        "only the claim that found work took the write lock"
    );
}

#[test]
fn a_waiting_claim_wakes_when_a_scheduled_job_falls_due() {
    let t = common::test_db();
    let q = t.db.queue("later").unwrap();
    q.enqueue(
        json!("soon"),
        &EnqueueOptions {
            delay: Some(Duration::from_millis(40)),
            ..EnqueueOptions::default()
        },
    )
    .unwrap();
    let waiter = spawn_waiter(&q);
    // No commit happens; only time moves.
    t.clock.advance(Duration::from_millis(40));
    assert_eq!(waiter.join().unwrap().len(), 1);
}

#[test]
fn a_wait_with_nothing_to_do_returns_empty_at_its_deadline() {
    let t = common::test_db();
    let q = t.db.queue("idle").unwrap();
    let started = Instant::now();
    let jobs = q
        .claim_with(
            "w",
            1,
            &ClaimOptions {
                wait: Duration::from_millis(50),
                ..ClaimOptions::default()
            },
        )
        .unwrap();
    assert!(jobs.is_empty());
    assert!(started.elapsed() >= Duration::from_millis(50));
}
