//! The `honker` binary against real files: `status` (table and JSON) leaves
//! the file byte-identical, also on an old schema, and refuses a newer one;
//! `import` on a Honker file; `worker` and `completions`; exit codes.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use honker::lock::Lock;
use honker::schedule::Schedule;
use honker::stream::Start;
use honker::Database;
use serde_json::{json, Value as Json};

mod common;
use common::{bytes, conforms, honker, schema_errors, stdout};

/// Another process with the file open in WAL mode and idle, as a worker
/// between jobs (Debian's python3 on the system SQLite); it exits when its
/// stdin closes.
fn idle_holder(path: &Path) -> std::process::Child {
    let mut holder = Command::new("/usr/bin/python3")
        .arg("-c")
        .arg(
            "import sqlite3, sys\n\
             c = sqlite3.connect(sys.argv[1])\n\
             c.execute('SELECT count(*) FROM _honker_jobs').fetchall()\n\
             print('ready', flush=True)\n\
             sys.stdin.read()\n",
        )
        .arg(path)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(holder.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "ready");
    holder
}

/// Records a schema version newer than this build knows in the file.
fn schema_from_a_newer_build(path: &Path) {
    let c = honker::rusqlite::Connection::open(path).unwrap();
    c.execute(
        "INSERT INTO _honker_schema VALUES (?1, 'future', 0)",
        [honker::schema::LATEST + 1],
    )
    .unwrap();
}

/// A temporary directory holding `app.db`, written by [`busy_file`].
fn busy_dir() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    busy_file(&path);
    (dir, path)
}

/// A file with something of everything, written through core's API.
fn busy_file(path: &Path) {
    let db = Database::open(path).unwrap();
    let q = db.queue("emails").unwrap();
    for n in 0..3 {
        q.enqueue(json!({ "n": n }), &Default::default()).unwrap();
    }
    let later = honker::queue::EnqueueOptions {
        delay: Some(Duration::from_secs(3600)),
        ..Default::default()
    };
    q.enqueue(json!({"n": 9}), &later).unwrap();
    let jobs = q.claim("w1", 2).unwrap();
    q.fail(&jobs[0].lease, "boom").unwrap();
    let s = db.stream("orders").unwrap();
    for n in 0..5 {
        s.publish(json!({ "n": n }), &Default::default()).unwrap();
    }
    s.commit("billing", 3).unwrap();
    s.group("invoices")
        .unwrap()
        .create(Start::Beginning, &Default::default())
        .unwrap();
    db.scheduler()
        .add(&Schedule::cron("nightly", "0 3 * * *", "reports").time_zone("Europe/Berlin"))
        .unwrap();
    let lock: Lock = db.lock("reindex").unwrap();
    lock.try_acquire("node-a", Duration::from_secs(600))
        .unwrap();
    db.close().unwrap();
}

#[test]
fn status_shows_everything_and_changes_nothing() {
    let (_dir, path) = busy_dir();
    let p = path.to_str().unwrap();
    let before = bytes(&path);
    let j: Json = serde_json::from_str(&stdout(&honker(&["status", p, "--json"]))).unwrap();
    assert_eq!(j["schema"]["version"], j["schema"]["latest"]);
    assert_eq!(j["schema"]["pending_migrations"], json!([]));
    assert_eq!(j["honker_objects"], json!([]));
    let q = &j["queues"][0];
    assert_eq!(
        (
            &q["name"],
            &q["ready"],
            &q["scheduled"],
            &q["running"],
            &q["dead"]
        ),
        (&json!("emails"), &json!(1), &json!(1), &json!(1), &json!(1)),
        "{j:#}"
    );
    assert!(q["oldest_ready_age_ms"].as_i64().unwrap() >= 0);
    let st = &j["streams"][0];
    assert_eq!(st["last_offset"], 5);
    assert_eq!(
        st["consumers"],
        json!([{"name": "billing", "next_offset": 3, "lag": 3}])
    );
    assert_eq!(st["groups"][0]["name"], "invoices");
    assert_eq!(st["groups"][0]["lag"], 5);
    let sc = &j["schedules"][0];
    assert_eq!(
        (&sc["name"], &sc["time_zone"], &sc["paused"]),
        (&json!("nightly"), &json!("Europe/Berlin"), &json!(false))
    );
    assert_eq!(j["locks"][0]["owner"], "node-a");
    assert_eq!(j["locks"][0]["token"], 1);

    let text = stdout(&honker(&["status", p]));
    for needle in [
        "emails", "orders", "billing", "invoices", "nightly", "node-a",
    ] {
        assert!(text.contains(needle), "{needle} missing from:\n{text}");
    }
    assert_eq!(bytes(&path), before, "status changed the file");
}

#[test]
fn status_reports_an_old_schema_without_upgrading_and_refuses_a_newer_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    {
        let c = honker::rusqlite::Connection::open(&path).unwrap();
        let m1 = &honker::schema::MIGRATIONS[0];
        c.execute_batch(&format!(
            "CREATE TABLE _honker_schema (version INTEGER PRIMARY KEY, name TEXT NOT NULL,
                 applied_at INTEGER NOT NULL);
             {}
             INSERT INTO _honker_schema VALUES (1, '{}', 0);",
            m1.sql, m1.name
        ))
        .unwrap();
    }
    let p = path.to_str().unwrap();
    let before = bytes(&path);
    let j: Json = serde_json::from_str(&stdout(&honker(&["status", p, "--json"]))).unwrap();
    assert_eq!(j["schema"]["version"], 1);
    let pending = j["schema"]["pending_migrations"].as_array().unwrap();
    assert_eq!(pending.len() as i64, honker::schema::LATEST - 1);
    assert!(stdout(&honker(&["status", p])).contains("an upgrade"));
    assert_eq!(bytes(&path), before, "status upgraded the file");

    schema_from_a_newer_build(&path);
    let o = honker(&["status", p]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr).starts_with("honker: SCHEMA_TOO_NEW: "),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = honker(&["status", dir.path().join("missing.db").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).starts_with("honker: INVALID_ARGUMENT: "));
    assert!(!dir.path().join("missing.db").exists());
}

#[test]
fn import_moves_a_honker_file_and_status_sees_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    {
        let c = honker::rusqlite::Connection::open(&path).unwrap();
        c.execute_batch(
            "PRAGMA journal_mode = WAL;
             CREATE TABLE _honker_live (id INTEGER PRIMARY KEY AUTOINCREMENT, queue TEXT NOT NULL,
               payload TEXT NOT NULL, state TEXT NOT NULL DEFAULT 'pending',
               priority INTEGER NOT NULL DEFAULT 0, run_at INTEGER NOT NULL DEFAULT (unixepoch()),
               worker_id TEXT, claim_expires_at INTEGER, attempts INTEGER NOT NULL DEFAULT 0,
               max_attempts INTEGER NOT NULL DEFAULT 3,
               created_at INTEGER NOT NULL DEFAULT (unixepoch()), expires_at INTEGER);
             INSERT INTO _honker_live (id, queue, payload) VALUES (5, 'emails', '{}');",
        )
        .unwrap();
    }
    let p = path.to_str().unwrap();
    let j: Json = serde_json::from_str(&stdout(&honker(&["status", p, "--json"]))).unwrap();
    assert_eq!(j["schema"]["version"], 0);
    assert_eq!(j["honker_objects"], json!(["_honker_live (table)"]));
    assert!(stdout(&honker(&["status", p])).contains("honker import"));

    let dry = stdout(&honker(&["import", p, "--dry-run"]));
    assert!(
        dry.starts_with("would import (dry run, nothing changed): 1 ready"),
        "{dry}"
    );
    let r: Json = serde_json::from_str(&stdout(&honker(&["import", p, "--json"]))).unwrap();
    assert_eq!(r["jobs"]["ready"], 1);
    let again = stdout(&honker(&["import", p]));
    assert!(again.starts_with("nothing to import"), "{again}");
    let j: Json = serde_json::from_str(&stdout(&honker(&["status", p, "--json"]))).unwrap();
    assert_eq!(j["queues"][0]["ready"], 1);
    assert_eq!(j["honker_objects"], json!([]));
}

#[test]
fn worker_explains_and_completions_print() {
    let o = honker(&["worker", "app.tasks", "--concurrency", "4"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("python -m honker worker"));
    let bash = stdout(&honker(&["completions", "bash"]));
    assert!(bash.contains("honker") && bash.contains("status"), "{bash}");
    let o = honker(&["nonsense"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn dead_schedules_locks_and_maintain() {
    let (_dir, path) = busy_dir();
    let p = path.to_str().unwrap();

    // Read commands leave the file as it was.
    let before = bytes(&path);
    let dead: Json =
        serde_json::from_str(&stdout(&honker(&["dead", "list", p, "--json"]))).unwrap();
    assert_eq!(dead.as_array().unwrap().len(), 1, "{dead:#}");
    assert_eq!(
        (
            &dead[0]["queue"],
            &dead[0]["last_error"],
            &dead[0]["attempts"]
        ),
        (&json!("emails"), &json!("boom"), &json!(1))
    );
    let none: Json = serde_json::from_str(&stdout(&honker(&[
        "dead", "list", p, "--queue", "other", "--json",
    ])))
    .unwrap();
    assert_eq!(none, json!([]));
    assert!(stdout(&honker(&["dead", "list", p])).contains("boom"));
    let list: Json =
        serde_json::from_str(&stdout(&honker(&["schedules", "list", p, "--json"]))).unwrap();
    assert_eq!(list[0]["name"], "nightly");
    let locks: Json = serde_json::from_str(&stdout(&honker(&["locks", p, "--json"]))).unwrap();
    assert_eq!(
        (&locks[0]["name"], &locks[0]["token"]),
        (&json!("reindex"), &json!(1))
    );
    assert!(stdout(&honker(&["locks", p])).contains("node-a"));
    assert_eq!(bytes(&path), before, "a read command changed the file");

    // Dead letters back on their queue; a missing one is NOT_FOUND.
    let id = dead[0]["id"].as_i64().unwrap().to_string();
    assert!(stdout(&honker(&["dead", "requeue", p, "emails", &id])).contains("requeued job"));
    let o = honker(&["dead", "requeue", p, "emails", &id]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).starts_with("honker: NOT_FOUND: "));
    let o = honker(&["dead", "requeue", p, "emails"]);
    assert_eq!(o.status.code(), Some(2), "an id or --all is required");
    let s: Json = serde_json::from_str(&stdout(&honker(&["status", p, "--json"]))).unwrap();
    assert_eq!(
        (&s["queues"][0]["ready"], &s["queues"][0]["dead"]),
        (&json!(2), &json!(0))
    );
    assert!(stdout(&honker(&["dead", "purge", p, "emails"])).starts_with("purged 0"));

    // Schedules: pause, resume, trigger.
    stdout(&honker(&[
        "schedules",
        "pause",
        p,
        "nightly",
        "--note",
        "maintenance",
    ]));
    let list: Json =
        serde_json::from_str(&stdout(&honker(&["schedules", "list", p, "--json"]))).unwrap();
    assert_eq!(list[0]["paused"], true);
    assert!(stdout(&honker(&["schedules", "list", p])).contains("paused"));
    stdout(&honker(&["schedules", "resume", p, "nightly"]));
    let fired = stdout(&honker(&["schedules", "trigger", p, "nightly"]));
    assert!(fired.starts_with("fired nightly: job "), "{fired}");
    let s: Json = serde_json::from_str(&stdout(&honker(&["status", p, "--json"]))).unwrap();
    let reports = status_queue(&s, "reports");
    assert_eq!(reports["ready"], 1);
    let o = honker(&["schedules", "pause", p, "nope"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).starts_with("honker: NOT_FOUND: "));

    let m: Json = serde_json::from_str(&stdout(&honker(&["maintain", p, "--json"]))).unwrap();
    assert!(
        m["dead"].is_number() && m["schedule_fires"].is_number(),
        "{m:#}"
    );
    assert!(stdout(&honker(&["maintain", p])).starts_with("maintenance removed: "));
}

#[test]
fn jobs_enqueue_and_publish() {
    let (_dir, path) = busy_dir();
    let p = path.to_str().unwrap();
    let before = bytes(&path);
    let all: Json = serde_json::from_str(&stdout(&honker(&["jobs", "list", p, "--json"]))).unwrap();
    let states: Vec<&str> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["dead", "running", "ready", "scheduled"], "{all:#}");
    let ready: Json = serde_json::from_str(&stdout(&honker(&[
        "jobs", "list", p, "--state", "ready", "--json",
    ])))
    .unwrap();
    assert_eq!(ready[0]["payload"], json!({"n": 2}));
    let one: Json =
        serde_json::from_str(&stdout(&honker(&["jobs", "show", p, "2", "--json"]))).unwrap();
    assert_eq!(
        (&one["state"], &one["worker_id"]),
        (&json!("running"), &json!("w1"))
    );
    assert!(stdout(&honker(&["jobs", "list", p])).contains("scheduled"));
    let shown = stdout(&honker(&["jobs", "show", p, "1"]));
    assert!(shown.contains("boom"));
    // Times read as times (issue 53: raw epoch ms), with how long ago.
    let run_at = shown
        .lines()
        .find(|l| l.trim_start().starts_with("run_at:"))
        .unwrap();
    assert!(
        run_at.contains("-")
            && run_at.contains("T")
            && run_at.contains("Z (")
            && run_at.ends_with("ago)"),
        "{run_at}"
    );
    assert_eq!(bytes(&path), before, "a read command changed the file");
    let o = honker(&["jobs", "list", p, "--state", "sleeping"]);
    assert!(String::from_utf8_lossy(&o.stderr).starts_with("honker: INVALID_ARGUMENT: "));
    let o = honker(&["jobs", "show", p, "99"]);
    assert!(String::from_utf8_lossy(&o.stderr).starts_with("honker: NOT_FOUND: "));

    let id: i64 = stdout(&honker(&[
        "enqueue",
        p,
        "emails",
        r#"{"to":"z"}"#,
        "--priority",
        "7",
    ]))
    .trim()
    .parse()
    .unwrap();
    let job = job_json(p, id);
    assert_eq!(
        (&job["priority"], &job["payload"]),
        (&json!(7), &json!({"to": "z"}))
    );
    // Every option of core's table is a flag (seconds; a time since 1970).
    let later = |extra: &[&str]| {
        let mut args = vec!["enqueue", p, "emails", "{}", "--dedupe-key", "k"];
        args.extend_from_slice(extra);
        honker(&args)
    };
    let o = later(&["--delay", "90.5", "--max-attempts", "2", "--expires", "600"]);
    let later_id: i64 = stdout(&o).trim().parse().unwrap();
    let job = job_json(p, later_id);
    assert_eq!(
        (&job["state"], &job["max_attempts"]),
        (&json!("scheduled"), &json!(2))
    );
    let again = stdout(&later(&["--run-at", "0"]))
        .trim()
        .parse::<i64>()
        .unwrap();
    assert_eq!(again, later_id, "a live job holds the dedupe key");
    // The unique modes (ADR 37): the id on stdout, the mode on stderr.
    let throttled = |payload: &str| {
        honker(&[
            "enqueue",
            p,
            "sync",
            payload,
            "--dedupe-key",
            "s",
            "--unique",
            "throttle",
            "--unique-for",
            "3600",
        ])
    };
    let first: i64 = stdout(&throttled("1")).trim().parse().unwrap();
    let o = throttled("2");
    assert_eq!(stdout(&o).trim().parse::<i64>().unwrap(), first);
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!("honker: nothing added: job {first} holds the dedupe key (throttle)\n")
    );
    let by_payload = |payload: &str| {
        let o = honker(&[
            "enqueue",
            p,
            "hashed",
            payload,
            "--dedupe-by-payload",
            "true",
        ]);
        stdout(&o).trim().parse::<i64>().unwrap()
    };
    assert_eq!(
        by_payload(r#"{"a":1,"b":2}"#),
        by_payload(r#"{"b": 2, "a": 1.0}"#)
    );
    let o = honker(&[
        "enqueue",
        p,
        "sync",
        "1",
        "--dedupe-key",
        "s",
        "--unique",
        "period",
    ]);
    assert!(String::from_utf8_lossy(&o.stderr).starts_with("honker: INVALID_ARGUMENT: "));
    for bad in [
        &["--delay=-1"][..],
        &["--delay", "1", "--run-at", "1"],
        &["--max-attempts", "0"],
        &["--run-at=-5"],
    ] {
        let o = later(bad);
        assert!(
            String::from_utf8_lossy(&o.stderr).starts_with("honker: INVALID_ARGUMENT: "),
            "{bad:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let o = honker(&["enqueue", p, "emails", "{not json"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).starts_with("honker: INVALID_ARGUMENT: "));
    assert!(stdout(&honker(&[
        "jobs",
        "cancel",
        p,
        "emails",
        &id.to_string(),
        "--reason",
        "typo"
    ]))
    .starts_with("cancelled job"));
    let job = job_json(p, id);
    assert_eq!(job["state"], "cancelled");

    let offset = stdout(&honker(&[
        "publish",
        p,
        "orders",
        r#"{"n":5}"#,
        "--key",
        "o1",
    ]));
    assert_eq!(offset.trim(), "6");
    let s: Json = serde_json::from_str(&stdout(&honker(&["status", p, "--json"]))).unwrap();
    assert_eq!(s["streams"][0]["last_offset"], 6);
}

fn job_json(p: &str, id: i64) -> Json {
    serde_json::from_str(&stdout(&honker(&[
        "jobs",
        "show",
        p,
        &id.to_string(),
        "--json",
    ])))
    .unwrap()
}

#[test]
fn jobs_retry_runs_a_scheduled_or_dead_job_now_and_leaves_the_rest() {
    let (_dir, path) = busy_dir();
    let p = path.to_str().unwrap();
    // A job waiting out a retry's backoff: it keeps its attempt.
    let backing_off = {
        let db = Database::open(&path).unwrap();
        let q = db.queue("emails").unwrap();
        let id = q.enqueue(json!({"n": 10}), &Default::default()).unwrap().id;
        let claimed = q.claim("w2", 5).unwrap();
        let job = claimed.iter().find(|j| j.id == id).unwrap();
        let later = honker::queue::RetryOptions {
            delay: Some(Duration::from_secs(3600)),
            error: Some("smtp 451".into()),
        };
        job.retry(&later).unwrap();
        for other in claimed.iter().filter(|j| j.id != id) {
            other.release().unwrap();
        }
        db.close().unwrap();
        id
    };
    let retry = |id: i64| honker(&["jobs", "retry", p, "emails", &id.to_string()]);
    assert_eq!(job_json(p, backing_off)["state"], "scheduled");
    assert_eq!(
        stdout(&retry(backing_off)),
        format!("job {backing_off} is ready now\n")
    );
    let j = job_json(p, backing_off);
    assert_eq!(
        (&j["state"], &j["attempts"]),
        (&json!("ready"), &json!(1)),
        "{j:#}"
    );

    // Job 4 was delayed an hour; job 1 is dead after one attempt.
    // The job's id alone, as `jobs show` takes it (issue 53: retry and
    // cancel wanted the queue too).
    assert_eq!(
        stdout(&honker(&["jobs", "retry", p, "4"])),
        "job 4 is ready now\n"
    );
    assert_eq!(job_json(p, 4)["state"], "ready");
    assert_eq!(stdout(&retry(1)), "requeued dead job 1, attempts reset\n");
    let j = job_json(p, 1);
    assert_eq!(
        (&j["state"], &j["attempts"]),
        (&json!("ready"), &json!(0)),
        "{j:#}"
    );
    assert_eq!(stdout(&retry(3)), "job 3 was ready already\n");

    // Refused, and nothing changes: running (its worker decides), finished,
    // unknown, another queue's.
    let o = retry(2);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with("honker: INVALID_ARGUMENT: job 2 is running"),
        "{err}"
    );
    assert_eq!(job_json(p, 2)["state"], "running");
    assert!(stdout(&honker(&["jobs", "cancel", p, "emails", "3"])).starts_with("cancelled"));
    let err = String::from_utf8_lossy(&retry(3).stderr).into_owned();
    assert!(err.contains("job 3 is cancelled"), "{err}");
    assert_eq!(job_json(p, 3)["state"], "cancelled");
    let o = retry(99);
    assert!(String::from_utf8_lossy(&o.stderr).starts_with("honker: NOT_FOUND: "));
    let o = honker(&["jobs", "retry", p, "invoices", "4"]);
    assert!(String::from_utf8_lossy(&o.stderr).starts_with("honker: NOT_FOUND: "));
    let o = honker(&["jobs", "retry", p, "emails", "0"]);
    assert!(String::from_utf8_lossy(&o.stderr).starts_with("honker: INVALID_ARGUMENT: "));
    let o = honker(&["jobs", "cancel", p, "99"]);
    assert!(String::from_utf8_lossy(&o.stderr).starts_with("honker: NOT_FOUND: no job 99"));
    let o = honker(&["jobs", "retry", p, "four"]);
    assert!(String::from_utf8_lossy(&o.stderr).starts_with("honker: INVALID_ARGUMENT: "));
}

#[cfg(unix)]
fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A copy of the binary in `dir`, and a runner that runs it as a user who
/// may read `dir` but not write it: `nobody`, through util-linux's setpriv,
/// when the tests run as root (as CI does, where chmod stops nothing);
/// else this user, with `dir` and its files made read-only.
#[cfg(unix)]
fn read_only_runner(dir: &Path) -> impl Fn(&[&str]) -> std::process::Output {
    let root = String::from_utf8(Command::new("id").arg("-u").output().unwrap().stdout)
        .unwrap()
        .trim()
        == "0";
    // The checkout may sit in a directory `nobody` cannot enter.
    let bin = dir.join("honker-bin");
    std::fs::copy(env!("CARGO_BIN_EXE_honker"), &bin).unwrap();
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        chmod(&p, if root { 0o755 } else { 0o555 });
    }
    chmod(dir, if root { 0o755 } else { 0o555 });
    move |args: &[&str]| {
        let mut c = if root {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .arg(&bin);
            c
        } else {
            Command::new(&bin)
        };
        c.args(args).output().expect("run honker")
    }
}

#[cfg(unix)]
#[test]
fn read_commands_work_on_a_file_this_user_may_not_write() {
    let (dir, path) = busy_dir();
    let p = path.to_str().unwrap();
    let run = read_only_runner(dir.path());
    let before = bytes(&path);
    let listing = || {
        let mut names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        names
    };
    let files = listing();
    let reads: [&[&str]; 11] = [
        &["metrics", p],
        &["status", p],
        &["status", p, "--json"],
        &["jobs", "list", p],
        &["jobs", "show", p, "2"],
        &["dead", "list", p],
        &["schedules", "list", p],
        &["locks", p],
        &["tail", p, "orders"],
        &["backup", p, "/dev/null/never"],
        &["doctor", p],
    ];
    for args in reads {
        let o = run(args);
        let err = String::from_utf8_lossy(&o.stderr);
        if args[0] == "backup" {
            // Reads the file, then cannot write where it was told to.
            assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
            assert!(!err.contains("readonly database"), "{err}");
            continue;
        }
        assert_eq!(o.status.code(), Some(0), "{args:?}: {err}");
    }
    let status: Json = serde_json::from_slice(&run(&["status", p, "--json"]).stdout).unwrap();
    assert_eq!(status["queues"][0]["ready"], 1, "{status:#}");
    assert!(String::from_utf8_lossy(&run(&["tail", p, "orders"]).stdout).contains(r#"{"n":4}"#));
    let doctor = String::from_utf8_lossy(&run(&["doctor", p]).stdout).into_owned();
    assert!(doctor.contains("read as an immutable file"), "{doctor}");
    // A write is refused with SQLite's reason, and changes nothing.
    let o = run(&["enqueue", p, "emails", "{}"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(bytes(&path), before, "a command changed the file");
    assert_eq!(listing(), files, "a command left a file behind");

    // Commits in a -wal without a -shm cannot be read without creating one:
    // refused, saying so, rather than read without those commits.
    let live = tempfile::tempdir().unwrap();
    let db = Database::open(live.path().join("app.db")).unwrap();
    db.queue("emails")
        .unwrap()
        .enqueue(json!({"n": 1}), &Default::default())
        .unwrap();
    let copy = tempfile::tempdir().unwrap();
    for name in ["app.db", "app.db-wal"] {
        std::fs::copy(live.path().join(name), copy.path().join(name)).unwrap();
    }
    drop(db);
    assert!(
        std::fs::metadata(copy.path().join("app.db-wal"))
            .unwrap()
            .len()
            > 0
    );
    let run = read_only_runner(copy.path());
    let o = run(&["status", copy.path().join("app.db").to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.starts_with("honker: UNSAFE: ") && err.contains("no -shm"),
        "{err}"
    );
}

/// Enqueues in a loop from another process until killed.
fn writer(db: &str) -> std::process::Child {
    Command::new("bash")
        .arg("-c")
        .arg(format!(
            "while true; do '{}' enqueue '{db}' load '{{\"w\": 1}}' >/dev/null || exit 1; done",
            env!("CARGO_BIN_EXE_honker")
        ))
        .spawn()
        .unwrap()
}

fn max_id(path: &Path) -> i64 {
    let c = honker::rusqlite::Connection::open(path).unwrap();
    c.query_row("SELECT coalesce(max(id), 0) FROM _honker_jobs", [], |r| {
        r.get(0)
    })
    .unwrap()
}

#[test]
fn backup_under_load_then_restore_and_drain_loses_nothing_committed_before_it() {
    let (dir, path) = busy_dir();
    let p = path.to_str().unwrap();
    let dest = dir.path().join("backup.db");
    let d = dest.to_str().unwrap();
    let mut writers = [writer(p), writer(p)];
    while max_id(&path) < 40 {
        std::thread::sleep(Duration::from_millis(20));
    }
    let before = max_id(&path);
    let o = honker(&["backup", p, d, "--progress"]);
    let out = stdout(&o);
    assert!(out.starts_with("backed up to"), "{out}");
    // A line when the copy begins and one when it is complete (more in
    // between when it takes longer than a quarter of a second).
    let progress = String::from_utf8_lossy(&o.stderr).into_owned();
    let lines: Vec<&str> = progress.lines().collect();
    assert!(lines.len() >= 2, "{progress}");
    assert!(
        lines[0].starts_with("honker: backup   0% (0.0 MB of "),
        "{progress}"
    );
    assert!(
        lines[lines.len() - 1].starts_with("honker: backup 100% ("),
        "{progress}"
    );
    // The writers were (and are still) committing around it.
    let mut waited = 0;
    while max_id(&path) <= before && waited < 250 {
        std::thread::sleep(Duration::from_millis(20));
        waited += 1;
    }
    assert!(max_id(&path) > before, "the writers stopped");
    let o = honker(&["backup", p, d]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "an existing destination needs --force"
    );
    assert!(String::from_utf8_lossy(&o.stderr).starts_with("honker: INVALID_ARGUMENT: "));
    let backed_up = max_id(&dest);
    assert!(backed_up >= before);

    for w in &mut writers {
        w.kill().unwrap();
        w.wait().unwrap();
    }
    // Restore is refused while any process has the file open: an idle one
    // (Debian's python3, in WAL mode, as a worker between jobs).
    let mut holder = idle_holder(&path);
    let o = honker(&["restore", d, p]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(err.starts_with("honker: UNSAFE: "), "{err}");
    assert!(err.contains(&format!("pid {}", holder.id())), "{err}");
    drop(holder.stdin.take());
    holder.wait().unwrap();
    let out = honker(&["restore", d, p]);
    assert!(stdout(&out).starts_with("restored"));
    assert!(!dir.path().join("app.db-wal").exists());

    // The drill: drain the restored file; every job committed before the
    // backup began is there (the queue's, and the load's 1..=before).
    let db = Database::open(&path).unwrap();
    let load = db.queue("load").unwrap();
    let mut ids = Vec::new();
    loop {
        let got = load.claim("drain", 1000).unwrap();
        if got.is_empty() {
            break;
        }
        for j in &got {
            ids.push(j.id);
            load.ack(&j.lease, None).unwrap();
        }
    }
    let emails: Vec<i64> = db
        .queue("emails")
        .unwrap()
        .claim("drain", 10)
        .unwrap()
        .iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(emails, vec![3], "the busy file's ready job");
    ids.sort_unstable();
    let expected: Vec<i64> = (5..=backed_up).collect();
    assert_eq!(
        ids, expected,
        "a job committed before the backup is missing"
    );
    db.close().unwrap();

    // A damaged backup is refused before anything is replaced.
    let bad = dir.path().join("bad.db");
    std::fs::write(&bad, b"not a database at all, not even close").unwrap();
    let o = honker(&["restore", bad.to_str().unwrap(), p]);
    assert_eq!(o.status.code(), Some(1));
    assert!(path.exists());
    let s: Json = serde_json::from_str(&stdout(&honker(&["status", p, "--json"]))).unwrap();
    assert_eq!(s["schema"]["version"], s["schema"]["latest"]);
}

/// Issue 53: `top` on a terminal ignored q. Run on a pseudo-terminal
/// (util-linux's `script`), q ends it at once; another key does not.
#[test]
fn top_on_a_terminal_ends_on_q() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    Database::open(&path).unwrap().close().unwrap();
    let cmd = format!(
        "{} top {} --interval-ms 200",
        env!("CARGO_BIN_EXE_honker"),
        path.display()
    );
    let mut child = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("util-linux's script");
    let mut keys = child.stdin.take().unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    keys.write_all(b"x").unwrap();
    keys.flush().unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    assert!(child.try_wait().unwrap().is_none(), "another key ended it");
    keys.write_all(b"q").unwrap();
    keys.flush().unwrap();
    let pressed = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            pressed.elapsed() < Duration::from_secs(3),
            "q did not end it"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    drop(keys);
    assert!(status.success(), "{status:?}");
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut out).unwrap();
    assert!(out.contains("q ends"), "{out}");
}

/// Issue 53: a backup that fails on a full disk left
/// `<dest>.honker-tmp-<pid>-journal` behind on every attempt. The disk is
/// "full" through the file-size limit (writes past it fail with EFBIG;
/// SIGXFSZ ignored, as an ignored signal stays ignored across exec).
#[test]
fn a_backup_that_fails_for_space_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    let db = Database::open(&path).unwrap();
    let pad = "x".repeat(4000);
    let many: Vec<_> = (0..100).map(|n| json!({ "n": n, "pad": pad })).collect();
    db.queue("big")
        .unwrap()
        .enqueue_many(many, &Default::default())
        .unwrap();
    db.close().unwrap();
    let dest = dir.path().join("backup.db");
    for _ in 0..2 {
        let o = Command::new("bash")
            .arg("-c")
            .arg("trap '' XFSZ; ulimit -f 128; exec \"$0\" backup \"$1\" \"$2\"")
            .arg(env!("CARGO_BIN_EXE_honker"))
            .arg(&path)
            .arg(&dest)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{o:?}");
    }
    let mut left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    // The source's own -wal/-shm may be there (the read-only connection
    // that copied it made them); nothing of the backup's.
    left.retain(|f| !f.starts_with("app.db"));
    assert!(left.is_empty(), "a failed backup left {left:?} behind");
}

/// Issue 53: `restore` rewound the locks' fencing-token counter, so a token
/// granted before it (and kept outside the file) was granted again; and
/// the restored file was in rollback-journal mode until honker opened it.
#[test]
fn restore_keeps_fencing_tokens_growing_and_the_file_in_wal_mode() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    let (p, d) = (path.to_str().unwrap(), dir.path().join("b.db"));
    let db = Database::open(&path).unwrap();
    let lock = db.lock("nightly").unwrap();
    let first = lock
        .try_acquire("a", Duration::from_secs(60))
        .unwrap()
        .unwrap();
    lock.release(first.token).unwrap();
    db.close().unwrap();
    stdout(&honker(&["backup", p, d.to_str().unwrap()]));
    let db = Database::open(&path).unwrap();
    let lock = db.lock("nightly").unwrap();
    let mut last = 0;
    for _ in 0..5 {
        let g = lock
            .try_acquire("a", Duration::from_secs(60))
            .unwrap()
            .unwrap();
        lock.release(g.token).unwrap();
        last = g.token;
    }
    db.close().unwrap();
    // Refused while a honker process has the file open, and named: its
    // open-file-description locks carry no pid in /proc/locks, so the
    // refusal said it could not tell which process it was.
    let mut listener = Command::new(env!("CARGO_BIN_EXE_honker"))
        .args(["listen", p, "changes"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let refused = (0..200).find_map(|_| {
        std::thread::sleep(Duration::from_millis(20));
        let o = honker(&["restore", d.to_str().unwrap(), p]);
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        (o.status.code() == Some(1) && err.contains("UNSAFE")).then_some(err)
    });
    listener.kill().unwrap();
    listener.wait().unwrap();
    let refused = refused.expect("restore was refused while honker listen had the file");
    assert!(
        refused.contains(&format!("pid {}", listener.id())),
        "{refused}"
    );
    stdout(&honker(&["restore", d.to_str().unwrap(), p]));
    let c = honker::rusqlite::Connection::open(&path).unwrap();
    let mode: String = c
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    drop(c);
    let checks: Json = serde_json::from_str(&stdout(&honker(&["doctor", p, "--json"]))).unwrap();
    assert_eq!(check_named(&checks, "journal mode")["detail"], "wal");
    let db = Database::open(&path).unwrap();
    let next = db
        .lock("nightly")
        .unwrap()
        .try_acquire("b", Duration::from_secs(60))
        .unwrap()
        .unwrap();
    assert!(
        next.token > last,
        "token {} granted again after the restore (last before it: {last})",
        next.token
    );
    db.close().unwrap();
}

#[test]
fn doctor_names_the_hazards_it_finds_and_changes_nothing() {
    let (_dir, path) = busy_dir();
    {
        // A job whose worker "died": its 1 ms lease has lapsed.
        let db = Database::open(&path).unwrap();
        let opts = honker::queue::ClaimOptions {
            lease: Some(Duration::from_millis(1)),
            ..Default::default()
        };
        let got = db
            .queue("emails")
            .unwrap()
            .claim_with("gone", 1, &opts)
            .unwrap();
        assert_eq!(got.len(), 1);
        db.close().unwrap();
    }
    std::thread::sleep(Duration::from_millis(20));
    let p = path.to_str().unwrap();
    // An idle process with the file open.
    let mut holder = idle_holder(&path);
    let before = bytes(&path);
    let checks: Json = serde_json::from_str(&stdout(&honker(&["doctor", p, "--json"]))).unwrap();
    let by = |name: &str| check_named(&checks, name);
    assert_eq!(by("file system")["level"], "ok", "{checks:#}");
    assert_eq!(by("journal mode")["detail"], "wal");
    assert_eq!(by("schema")["level"], "ok");
    assert_eq!(by("leases")["level"], "warn");
    assert!(by("leases")["detail"]
        .as_str()
        .unwrap()
        .starts_with("1 running"));
    assert!(by("processes")["detail"]
        .as_str()
        .unwrap()
        .contains(&format!("pid {}", holder.id())));
    assert_eq!(by("SQLite libraries")["level"], "ok");
    assert!(stdout(&honker(&["doctor", p])).contains("lapsed"));
    assert_eq!(bytes(&path), before, "doctor changed the file");
    drop(holder.stdin.take());
    holder.wait().unwrap();

    // A newer schema is a failing check: exit 3.
    schema_from_a_newer_build(&path);
    let o = honker(&["doctor", p]);
    assert_eq!(o.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&o.stdout).contains("SCHEMA_TOO_NEW"));

    // A file in rollback-journal mode, and a WAL that checkpoints cannot keep
    // small (a sparse 300 MB one: its zero header makes SQLite ignore it).
    let (dir, path) = busy_dir();
    let c = honker::rusqlite::Connection::open(&path).unwrap();
    c.pragma_update(None, "journal_mode", "DELETE").unwrap();
    drop(c);
    let p = path.to_str().unwrap();
    let journal = doctor_check(p, "journal mode");
    assert_eq!(journal["level"], "warn", "{journal:#}");
    assert!(journal["detail"].as_str().unwrap().starts_with("delete:"));
    let c = honker::rusqlite::Connection::open(&path).unwrap();
    c.pragma_update(None, "journal_mode", "WAL").unwrap();
    drop(c);
    std::fs::File::create(dir.path().join("app.db-wal"))
        .unwrap()
        .set_len(300 << 20)
        .unwrap();
    let wal = doctor_check(p, "WAL size");
    assert_eq!(wal["level"], "warn", "{wal:#}");
    assert!(wal["detail"]
        .as_str()
        .unwrap()
        .starts_with("300 MB: checkpoints cannot keep up"));
}

/// `honker doctor DB --json`'s check `name`.
fn doctor_check(db: &str, name: &str) -> Json {
    let checks: Json = serde_json::from_str(&stdout(&honker(&["doctor", db, "--json"]))).unwrap();
    check_named(&checks, name)
}

/// The queue `name` in `status --json`'s output (the test fails without it).
fn status_queue(status: &Json, name: &str) -> Json {
    item_where(&status["queues"], "name", name)
}

/// The check `name` in doctor's JSON.
fn check_named(checks: &Json, name: &str) -> Json {
    item_where(checks, "check", name)
}

/// The item of the JSON array `list` whose `field` is `value` (the test
/// fails, showing the list, without one).
fn item_where(list: &Json, field: &str, value: &str) -> Json {
    list.as_array()
        .unwrap_or_else(|| panic!("not a list: {list:#}"))
        .iter()
        .find(|item| item[field] == value)
        .unwrap_or_else(|| panic!("no {field} {value:?} in {list:#}"))
        .clone()
}

/// Reads one line from a child's stdout, or panics after `secs`.
fn line_within(reader: &mut std::io::BufReader<std::process::ChildStdout>, secs: u64) -> String {
    use std::io::BufRead;
    let (tx, rx) = std::sync::mpsc::channel();
    let mut line = String::new();
    // The read blocks; the test waits on the channel with a deadline.
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut l = String::new();
            let _ = reader.read_line(&mut l);
            let _ = tx.send(l);
        });
        line = rx
            .recv_timeout(Duration::from_secs(secs))
            .expect("a line in time");
    });
    line
}

#[test]
fn tail_follows_a_stream_and_listen_prints_notifications() {
    let (_dir, path) = busy_dir();
    let p = path.to_str().unwrap();
    let before = bytes(&path);
    let last2 = stdout(&honker(&["tail", p, "orders", "--lines", "2"]));
    assert_eq!(last2, "4 {\"n\":3}\n5 {\"n\":4}\n");
    let from = stdout(&honker(&["tail", p, "orders", "--after", "3", "--json"]));
    let first: Json = serde_json::from_str(from.lines().next().unwrap()).unwrap();
    assert_eq!(
        (&first["offset"], &first["payload"]),
        (&json!(4), &json!({"n": 3}))
    );
    assert_eq!(bytes(&path), before, "tail changed the file");

    let mut follow = Command::new(env!("CARGO_BIN_EXE_honker"))
        .args(["tail", p, "orders", "--after", "5", "--follow", "--json"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut listen = Command::new(env!("CARGO_BIN_EXE_honker"))
        .args(["listen", p, "deploys", "--count", "1", "--timeout", "30"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // listen says when it is listening (what is sent before is not its).
    let mut err = std::io::BufReader::new(listen.stderr.take().unwrap());
    let ready = {
        let mut l = String::new();
        std::io::BufRead::read_line(&mut err, &mut l).unwrap();
        l
    };
    assert_eq!(ready, "honker: listening on \"deploys\"\n");
    let db = Database::open(&path).unwrap();
    db.stream("orders")
        .unwrap()
        .publish(json!({"n": 99}), &Default::default())
        .unwrap();
    db.notify("deploys", json!({"v": 2})).unwrap();
    let mut out = std::io::BufReader::new(follow.stdout.take().unwrap());
    let e: Json = serde_json::from_str(&line_within(&mut out, 10)).unwrap();
    assert_eq!(
        (&e["offset"], &e["payload"]),
        (&json!(6), &json!({"n": 99}))
    );
    follow.kill().unwrap();
    follow.wait().unwrap();
    let got = listen.wait_with_output().unwrap();
    assert!(got.status.success());
    assert!(
        String::from_utf8_lossy(&got.stdout).ends_with("{\"v\":2}\n"),
        "{}",
        String::from_utf8_lossy(&got.stdout)
    );
    db.close().unwrap();
}

/// Checks `v` against the subset of JSON Schema that cli/schemas uses
/// (`type` with null unions, `enum`, `properties`, `required`,
/// `additionalProperties: false`, `items`); the errors, with their paths.
fn json_of(args: &[&str]) -> Json {
    serde_json::from_str(&stdout(&honker(args))).unwrap()
}

#[test]
fn every_json_output_matches_its_schema() {
    // The checker itself catches drift: a new field, a wrong type.
    let mut errors = Vec::new();
    let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}},
                        "required": ["a"], "additionalProperties": false});
    schema_errors(&schema, &json!({"a": "1", "b": 2}), "$", &mut errors);
    assert_eq!(errors.len(), 2, "{errors:?}");

    let (_dir, path) = busy_dir();
    let p = path.to_str().unwrap();
    {
        let db = Database::open(&path).unwrap();
        db.notify("deploys", json!(1)).unwrap();
        db.close().unwrap();
    }
    let status = json_of(&["status", p, "--json"]);
    assert!(!status["streams"][0]["groups"]
        .as_array()
        .unwrap()
        .is_empty());
    conforms("status", &status);
    let jobs = json_of(&["jobs", "list", p, "--json"]);
    assert_eq!(jobs.as_array().unwrap().len(), 4);
    conforms("jobs-list", &jobs);
    conforms("jobs-show", &json_of(&["jobs", "show", p, "2", "--json"]));
    let dead = json_of(&["dead", "list", p, "--json"]);
    assert_eq!(dead.as_array().unwrap().len(), 1);
    conforms("dead-list", &dead);
    conforms(
        "schedules-list",
        &json_of(&["schedules", "list", p, "--json"]),
    );
    conforms("locks", &json_of(&["locks", p, "--json"]));
    let metrics = json_of(&["metrics", p, "--json"]);
    conforms("metrics", &metrics);
    // busy_file: 4 enqueued on emails, 2 claimed, one of them failed.
    let emails = &metrics[0];
    assert_eq!(
        (
            &emails["totals"]["enqueued"],
            &emails["totals"]["claimed"],
            &emails["totals"]["dead"],
            &emails["jobs"]["running"]
        ),
        (&json!(4), &json!(2), &json!(1), &json!(1)),
        "{metrics:#}"
    );
    let text = stdout(&honker(&["metrics", p]));
    assert!(
        text.contains("honker_jobs_total{queue=\"emails\",event=\"enqueued\"} 4\n"),
        "{text}"
    );
    assert!(
        text.contains("honker_claim_latency_seconds_count{queue=\"emails\"} 2\n"),
        "{text}"
    );
    let tail = stdout(&honker(&["tail", p, "orders", "--json"]));
    assert_eq!(tail.lines().count(), 5);
    for line in tail.lines() {
        conforms("tail", &serde_json::from_str(line).unwrap());
    }
    let doctor = json_of(&["doctor", p, "--json"]);
    conforms("doctor", &doctor);
    conforms("maintain", &json_of(&["maintain", p, "--json"]));
    conforms("import", &json_of(&["import", p, "--json"]));
    let mut listen = Command::new(env!("CARGO_BIN_EXE_honker"))
        .args([
            "listen",
            p,
            "deploys",
            "--count",
            "1",
            "--timeout",
            "30",
            "--json",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(listen.stderr.take().unwrap());
    let mut ready = String::new();
    std::io::BufRead::read_line(&mut err, &mut ready).unwrap();
    let db = Database::open(&path).unwrap();
    db.notify("deploys", json!({"v": 3})).unwrap();
    let out = listen.wait_with_output().unwrap();
    let m: Json = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(m["payload"], json!({"v": 3}));
    conforms("listen", &m);
    db.close().unwrap();
}

#[test]
fn top_redraws_when_another_process_commits_with_rates() {
    let (_dir, path) = busy_dir();
    let p = path.to_str().unwrap();
    let mut top = Command::new(env!("CARGO_BIN_EXE_honker"))
        .args(["top", p, "--count", "2", "--interval-ms", "0"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(top.stdout.take().unwrap());
    // The first frame: title, then the table down to its last rule.
    let mut first = String::new();
    while !first.contains('└') {
        std::io::BufRead::read_line(&mut out, &mut first).unwrap();
    }
    assert!(first.contains("emails"), "{first}");
    let started = std::time::Instant::now();
    // Counting in the transaction: the commit that wakes top carries its
    // counts (a Database batches them for up to a second, ADR 27).
    let db = Database::open_with(
        &path,
        honker::Options {
            metrics_flush_every: Duration::ZERO,
            ..honker::Options::default()
        },
    )
    .unwrap();
    let q = db.queue("emails").unwrap();
    q.enqueue_many((0..50).map(|n| json!(n)), &Default::default())
        .unwrap();
    let mut second = String::new();
    std::io::Read::read_to_string(&mut out, &mut second).unwrap();
    assert!(top.wait().unwrap().success());
    // Woken by the commit, not by its 5 s timer.
    assert!(started.elapsed() < Duration::from_secs(4), "{second}");
    let emails = second.lines().find(|l| l.contains("emails")).unwrap();
    let enqueued_per_s: f64 = emails.split('┆').nth(1).unwrap().trim().parse().unwrap();
    assert!(enqueued_per_s > 0.0, "{second}");
    db.close().unwrap();
}

#[test]
fn queues_limit_caps_running_jobs_for_every_process() {
    let (_dir, path) = busy_dir();
    let p = path.to_str().unwrap();
    // emails has one job running (busy_file): a cap of one leaves no room.
    let out = stdout(&honker(&[
        "queues",
        "limit",
        p,
        "emails",
        "--max-running",
        "1",
        "--max-running-per-key",
        "3",
    ]));
    assert_eq!(out, "emails: at most 1, 3/key running\n");
    let s = json_of(&["status", p, "--json"]);
    conforms("status", &s);
    let emails = status_queue(&s, "emails");
    assert_eq!(
        (
            emails["max_running"].clone(),
            emails["max_running_per_key"].clone()
        ),
        (json!(1), json!(3))
    );
    assert!(stdout(&honker(&["status", p])).contains("1, 3/key"));
    let claim = || {
        let db = Database::open(&path).unwrap();
        let n = db.queue("emails").unwrap().claim("w", 5).unwrap().len();
        db.close().unwrap();
        n
    };
    assert_eq!(claim(), 0);

    // Bad input: a typed error, the caps unchanged.
    let o = honker(&["queues", "limit", p, "emails", "--max-running", "0"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).starts_with("honker: INVALID_ARGUMENT: "));
    assert_eq!(claim(), 0);

    // A capped queue with no job yet is listed too.
    stdout(&honker(&[
        "queues",
        "limit",
        p,
        "later",
        "--max-running",
        "2",
    ]));
    let s = json_of(&["status", p, "--json"]);
    conforms("status", &s);
    let later = status_queue(&s, "later");
    assert_eq!(
        (later["max_running"].clone(), later["ready"].clone()),
        (json!(2), json!(0))
    );

    // Neither option: lifted.
    let out = stdout(&honker(&["queues", "limit", p, "emails"]));
    assert_eq!(out, "emails: no concurrency caps\n");
    assert_eq!(claim(), 1);
    let s = json_of(&["status", p, "--json"]);
    conforms("status", &s);
}

/// `honker queues fair` (ADR 36): round-robin order and a rate limit per
/// key for every process, shown by `status` (text and JSON); bad input
/// changes nothing; no option: the defaults again.
#[test]
fn queues_fair_shares_claims_among_keys_for_every_process() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fair.db");
    let p = path.to_str().unwrap();
    {
        let db = Database::open(&path).unwrap();
        let q = db.queue("jobs").unwrap();
        for key in ["big", "big", "big", "small"] {
            let o = honker::EnqueueOptions {
                concurrency_key: Some(key.into()),
                ..Default::default()
            };
            q.enqueue(json!(key), &o).unwrap();
        }
        db.close().unwrap();
    }
    let out = stdout(&honker(&[
        "queues",
        "fair",
        p,
        "jobs",
        "--order",
        "round_robin",
        "--key-limit",
        "2",
        "--key-per",
        "5",
    ]));
    assert_eq!(out, "jobs: round robin, 2/key per 5s\n");
    let s = json_of(&["status", p, "--json"]);
    conforms("status", &s);
    let jobs = status_queue(&s, "jobs");
    assert_eq!(
        (
            jobs["round_robin"].clone(),
            jobs["key_limit"].clone(),
            jobs["key_per_ms"].clone()
        ),
        (json!(true), json!(2), json!(5000))
    );
    assert!(stdout(&honker(&["status", p])).contains("round robin, 2/key per 5s"));
    // Enqueued before the order was set: no turns yet, but the limit per
    // key holds: one of each key, then nothing until a key's limit allows.
    let keys = || {
        let db = Database::open(&path).unwrap();
        let q = db.queue("jobs").unwrap();
        let jobs = q.claim("w", 10).unwrap();
        let keys: Vec<String> = jobs
            .iter()
            .map(|j| q.get_job(j.id).unwrap().concurrency_key.unwrap())
            .collect();
        db.close().unwrap();
        keys
    };
    assert_eq!(keys(), ["big", "small"]);
    assert!(keys().is_empty());

    // Bad input: a typed error, nothing changed.
    for bad in [
        &["--order", "fifo"][..],
        &["--key-limit", "2"][..],
        &["--key-limit", "0", "--key-per", "1"][..],
    ] {
        let o = honker(&[&["queues", "fair", p, "jobs"][..], bad].concat());
        assert_eq!(o.status.code(), Some(1), "{bad:?}");
        assert!(String::from_utf8_lossy(&o.stderr).starts_with("honker: INVALID_ARGUMENT: "));
    }
    assert_eq!(
        json_of(&["status", p, "--json"])["queues"][0]["key_limit"],
        json!(2)
    );

    let out = stdout(&honker(&["queues", "fair", p, "jobs"]));
    assert_eq!(out, "jobs: priority order, no limit per key\n");
    // A fair queue with no job yet is listed too.
    stdout(&honker(&[
        "queues",
        "fair",
        p,
        "later",
        "--order",
        "round_robin",
    ]));
    let s = json_of(&["status", p, "--json"]);
    conforms("status", &s);
    assert_eq!(status_queue(&s, "later")["round_robin"], json!(true));
    let s = json_of(&["status", p, "--json"]);
    conforms("status", &s);
    assert_eq!(s["queues"][0]["round_robin"], json!(false));
    assert_eq!(keys(), ["big", "big"]);
}

#[test]
fn queues_pause_and_resume_one_or_all() {
    let (_dir, path) = busy_dir();
    let p = path.to_str().unwrap();
    let out = stdout(&honker(&[
        "queues",
        "pause",
        p,
        "emails",
        "--note",
        "smtp down",
    ]));
    assert_eq!(out, "paused emails\n");
    // A queue with no job yet can be paused, and status lists it.
    stdout(&honker(&["queues", "pause", p, "later"]));
    let s = json_of(&["status", p, "--json"]);
    conforms("status", &s);
    let queue = |name: &str| status_queue(&s, name);
    assert_eq!(queue("emails")["paused"]["note"], "smtp down");
    assert_eq!(queue("emails")["paused"]["all"], false);
    assert_eq!(queue("later")["paused"]["note"], Json::Null);
    assert_eq!(s["paused_all"], Json::Null);
    let text = stdout(&honker(&["status", p]));
    assert!(text.contains("smtp down"), "{text}");
    {
        let db = Database::open(&path).unwrap();
        assert!(db
            .queue("emails")
            .unwrap()
            .claim("w", 5)
            .unwrap()
            .is_empty());
        db.close().unwrap();
    }

    stdout(&honker(&[
        "queues", "pause", p, "--all", "--note", "deploy",
    ]));
    let s = json_of(&["status", p, "--json"]);
    conforms("status", &s);
    assert_eq!(s["paused_all"]["note"], "deploy");
    assert!(stdout(&honker(&["status", p])).contains("all queues paused"));
    let resumed = stdout(&honker(&["queues", "resume", p, "emails"]));
    assert!(
        resumed.contains("stays paused while all queues are"),
        "{resumed}"
    );
    assert_eq!(
        stdout(&honker(&["queues", "resume", p, "--all"])),
        "resumed all queues\n"
    );
    assert_eq!(
        stdout(&honker(&["queues", "resume", p, "--all"])),
        "all queues were not paused\n"
    );
    {
        let db = Database::open(&path).unwrap();
        assert_eq!(db.queue("emails").unwrap().claim("w", 5).unwrap().len(), 1);
        assert!(db.queue("later").unwrap().stats().unwrap().paused);
        db.close().unwrap();
    }

    // Bad input: a typed error or a usage error, nothing changed.
    let o = honker(&["queues", "pause", p]);
    assert_eq!(o.status.code(), Some(2), "a queue or --all is required");
    let long = "n".repeat(600);
    let o = honker(&["queues", "pause", p, "emails", "--note", &long]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).starts_with("honker: INVALID_ARGUMENT: "));
    let s = json_of(&["status", p, "--json"]);
    let emails = status_queue(&s, "emails");
    assert_eq!(emails["paused"], Json::Null);
}
