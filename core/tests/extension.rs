//! The loadable extension (`extension/`, `libhonker_ext`) in the SQLite that
//! users' systems ship: Debian 12's `sqlite3` shell and `/usr/bin/python3`'s
//! stdlib `sqlite3` (both 3.40.1 here), each in its own process, on a file
//! that this process opens with the Rust API.
//!
//! `HONKER_EXT` names the built extension (scripts/test.sh builds it and sets
//! it); without it the test builds the extension itself. `HONKER_PYTHON` and
//! `HONKER_SQLITE3` override the interpreter and the shell.

// The Linux build of the extension in Debian's shell and Python: the Windows
// `.dll` is built and its exports checked by scripts/release.sh.
#![cfg(unix)]

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use common::{count, snapshot};
use honker::{Database, EnqueueOptions, ErrorKind};
use serde_json::{json, Value as Json};

fn extension() -> &'static Path {
    static EXT: OnceLock<PathBuf> = OnceLock::new();
    EXT.get_or_init(|| {
        if let Some(p) = std::env::var_os("HONKER_EXT") {
            return PathBuf::from(p);
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join("target"));
        let status = Command::new(env!("CARGO"))
            .args(["build", "--release", "--locked", "--manifest-path"])
            .arg(root.join("extension/Cargo.toml"))
            .arg("--target-dir")
            .arg(&target)
            .status()
            .expect("run cargo to build the extension");
        assert!(status.success(), "building the extension failed");
        target.join("release/libhonker_ext")
    })
}

fn python() -> String {
    std::env::var("HONKER_PYTHON").unwrap_or_else(|_| "/usr/bin/python3".into())
}

/// Runs `cmd` with `input` on its stdin; returns what it printed.
fn pipe(mut cmd: Command, input: &str) -> std::process::Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// Runs `steps` through stdlib `sqlite3` in a child process (see
/// `extension/tests/sqlrun.py`); one result per step.
fn sql(path: &Path, steps: Json) -> Vec<Json> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../extension/tests/sqlrun.py");
    let mut cmd = Command::new(python());
    cmd.arg(script).arg(path).arg(extension());
    let out = pipe(cmd, &steps.to_string());
    assert!(
        out.status.success(),
        "sqlrun.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("sqlrun.py prints JSON")
}

/// The single value a step returned, or panics with the step's error.
fn one(result: &Json) -> &Json {
    match result.get("rows") {
        Some(rows) => &rows[0][0],
        None => panic!("step failed: {result}"),
    }
}

fn error(result: &Json) -> &str {
    result["error"]
        .as_str()
        .unwrap_or_else(|| panic!("expected an error, got {result}"))
}

struct File {
    path: PathBuf,
    _dir: tempfile::TempDir,
}

fn file() -> File {
    let dir = tempfile::tempdir().unwrap();
    File {
        path: dir.path().join("app.db"),
        _dir: dir,
    }
}

#[test]
fn the_seed_sql_runs_as_written_in_the_sqlite3_shell() {
    let f = file();
    let shell = std::env::var("HONKER_SQLITE3").unwrap_or_else(|_| "sqlite3".into());
    let run = |script: String| -> String {
        let mut cmd = Command::new(&shell); // Debian's package sqlite3
        cmd.arg(&f.path);
        let out = pipe(cmd, &script);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && stderr.is_empty(), "shell: {stderr}");
        String::from_utf8(out.stdout).unwrap()
    };
    // `.load ./libhonker_ext`, as the seed writes it: from the directory
    // that holds the library.
    let ext = extension();
    let load = format!(
        ".cd {}\n.load ./{}\n",
        ext.parent().unwrap().display(),
        ext.file_name().unwrap().to_string_lossy()
    );
    let out = run(format!(
        "{load}\
         SELECT honker_bootstrap();\n\
         CREATE TABLE orders (id INTEGER PRIMARY KEY, user_id INTEGER, status TEXT);\n\
         BEGIN;\n\
         INSERT INTO orders (user_id, status) VALUES (42, 'paid');\n\
         SELECT honker_enqueue('emails', '{{\"to\":\"alice@example.com\"}}', NULL, NULL, 0, 3, NULL);\n\
         COMMIT;\n\
         SELECT honker_claim_batch('emails', 'mailer-1', 32, 300);\n"
    ));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], honker::schema::LATEST.to_string());
    let id: i64 = lines[1].parse().expect("honker_enqueue returns the id");
    let jobs: Json = serde_json::from_str(lines[2]).unwrap();
    assert_eq!(jobs.as_array().unwrap().len(), 1);
    assert_eq!(jobs[0]["id"], id);
    // Honker's rows: the payload as a JSON string, the lease in seconds.
    assert_eq!(jobs[0]["payload"], r#"{"to":"alice@example.com"}"#);
    assert_eq!(jobs[0]["worker_id"], "mailer-1");
    assert!(jobs[0]["claim_expires_at"].as_i64().unwrap() > 1_700_000_000);

    let out = run(format!(
        "{load}SELECT honker_ack_batch('[{id}]', 'mailer-1');\n"
    ));
    assert_eq!(out.trim(), "1");

    // The Rust API sees the same file: the order, and no job left.
    let db = Database::open(&f.path).unwrap();
    assert_eq!(count(&db, "orders"), 1);
    let stats = db.queue("emails").unwrap().stats().unwrap();
    assert_eq!((stats.ready, stats.running, stats.dead), (0, 0, 0));
    common::assert_integrity(&db);
}

#[test]
fn stdlib_sqlite3_outbox_rolls_back_and_commits_with_the_business_row() {
    let f = file();
    let enqueue = "SELECT honker_enqueue('emails', ?, NULL, NULL, 0, 3, NULL)";
    let r = sql(
        &f.path,
        json!([
            // Loading the extension created nothing; bootstrap does.
            "SELECT count(*) FROM sqlite_master",
            "SELECT honker_bootstrap()",
            "SELECT count(*) > 0 FROM sqlite_master WHERE name = '_honker_jobs'",
            "CREATE TABLE orders (id INTEGER PRIMARY KEY, user_id INTEGER, status TEXT)",
            "BEGIN",
            "INSERT INTO orders (user_id, status) VALUES (1, 'paid')",
            [enqueue, ["{\"order\": 1}"]],
            "ROLLBACK",
            "BEGIN",
            "INSERT INTO orders (user_id, status) VALUES (2, 'paid')",
            [enqueue, ["{\"order\": 2}"]],
            "COMMIT",
        ]),
    );
    for (i, step) in r.iter().enumerate() {
        assert!(step.get("rows").is_some(), "step {i}: {step}");
    }
    assert_eq!(one(&r[0]), 0, "loading the extension must perform no DDL");
    assert_eq!(one(&r[2]), 1);

    let db = Database::open(&f.path).unwrap();
    assert_eq!(count(&db, "orders"), 1);
    let jobs = db.queue("emails").unwrap().claim("rust-1", 10).unwrap();
    assert_eq!(jobs.len(), 1, "the rolled-back job must not exist");
    assert_eq!(jobs[0].payload.as_json().unwrap()["order"], 2);
    jobs[0].ack().unwrap();
    common::assert_integrity(&db);
}

/// `honker_bootstrap()` migrates an older file from inside a function call,
/// in the host's transaction: rolled back, the file is untouched; committed,
/// the rows survive the table rebuild of migration 2.
#[test]
fn bootstrap_migrates_a_schema_1_file_inside_the_hosts_transaction() {
    let f = file();
    {
        let conn = honker::rusqlite::Connection::open(&f.path).unwrap();
        let m1 = &honker::schema::MIGRATIONS[0];
        conn.execute_batch(&format!(
            "CREATE TABLE _honker_schema (version INTEGER PRIMARY KEY, name TEXT NOT NULL,
                 applied_at INTEGER NOT NULL);
             {}
             INSERT INTO _honker_schema VALUES (1, '{}', 0);
             INSERT INTO _honker_jobs (queue, state, payload, run_at, max_attempts,
                 backoff_base_ms, backoff_max_ms, backoff_jitter, created_at)
             VALUES ('emails', 'ready', '{{\"n\": 1}}', 1, 3, 1000, 60000, 0.5, 1);",
            m1.sql, m1.name
        ))
        .unwrap();
    }
    let version = "SELECT max(version) FROM _honker_schema";
    let r = sql(
        &f.path,
        json!([
            "BEGIN",
            "SELECT honker_bootstrap()",
            "ROLLBACK",
            version,
            "BEGIN",
            "SELECT honker_bootstrap()",
            "COMMIT",
            version,
            "SELECT count(*) FROM temp.sqlite_master",
        ]),
    );
    for (i, step) in r.iter().enumerate() {
        assert!(step.get("rows").is_some(), "step {i}: {step}");
    }
    let latest = honker::schema::LATEST;
    assert_eq!(one(&r[1]), latest);
    assert_eq!(one(&r[3]), 1, "a rolled-back bootstrap leaves schema 1");
    assert_eq!(one(&r[7]), latest);
    assert_eq!(one(&r[8]), 0, "the migration's TEMP copies are gone");

    let db = Database::open(&f.path).unwrap();
    let jobs = db.queue("emails").unwrap().claim("rust-1", 10).unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(
        (jobs[0].id, jobs[0].payload.as_json().unwrap()),
        (1, json!({"n": 1}))
    );
    jobs[0].ack().unwrap();
    common::assert_integrity(&db);
}

#[test]
fn a_job_enqueued_through_rust_is_claimed_and_acked_through_sql() {
    let f = file();
    let db = Database::open(&f.path).unwrap();
    let q = db.queue("emails").unwrap();
    let a = q
        .enqueue(json!({"n": 1}), &EnqueueOptions::default())
        .unwrap()
        .id;
    let b = q
        .enqueue(json!({"n": 2}), &EnqueueOptions::default())
        .unwrap()
        .id;

    let r = sql(
        &f.path,
        json!(["SELECT honker_queue_claim('emails', 'sql-1', 10, 60000)"]),
    );
    let jobs: Json = serde_json::from_str(one(&r[0]).as_str().unwrap()).unwrap();
    assert_eq!(jobs.as_array().unwrap().len(), 2);
    assert_eq!(jobs[0]["id"], a);
    assert_eq!(jobs[1]["id"], b);
    let token_b = jobs[1]["lease_token"].as_str().unwrap();

    let r = sql(
        &f.path,
        json!([
            // A stale token is fenced: LEASE_LOST, nothing changes.
            ["SELECT honker_job_ack('emails', ?, ?)", [b, "0".repeat(32)]],
            // Honker's form: another worker does not hold the lease (0).
            ["SELECT honker_ack(?, 'sql-2')", [a]],
            // The holder acks one by worker id (Honker's form), the other
            // with its token (ours).
            ["SELECT honker_ack(?, 'sql-1')", [a]],
            [
                "SELECT honker_job_ack_many('emails', ?)",
                [json!([[b, token_b]]).to_string()]
            ],
        ]),
    );
    assert!(error(&r[0]).starts_with("LEASE_LOST: "), "{}", r[0]);
    assert_eq!(one(&r[1]), 0);
    assert_eq!(one(&r[2]), 1);
    assert_eq!(one(&r[3]), 1);

    let s = q.stats().unwrap();
    assert_eq!((s.ready, s.running), (0, 0));
    assert_eq!(q.get_job(a).unwrap_err().kind(), ErrorKind::NotFound);
    // The SQL surface counts into the file's metrics like every other
    // (ADR 27): the refused ack counts nothing.
    use honker::queue::metrics::Event;
    let m = q.metrics().unwrap();
    let counted: Vec<u64> = [Event::Enqueued, Event::Claimed, Event::Acked]
        .iter()
        .map(|e| m.total(*e))
        .collect();
    assert_eq!(counted, [2, 2, 2]);
    let r = sql(
        &f.path,
        json!([
            "SELECT honker_queue_metrics('emails')",
            "SELECT honker_queue_metrics_text()"
        ]),
    );
    let from_sql: Json = serde_json::from_str(one(&r[0]).as_str().unwrap()).unwrap();
    assert_eq!(from_sql, m.to_json());
    assert_eq!(one(&r[1]).as_str().unwrap(), db.metrics_text().unwrap());
    common::assert_integrity(&db);
}

#[test]
fn a_hostile_file_cannot_make_a_connection_call_the_writers() {
    let f = file();
    {
        let db = Database::open(&f.path).unwrap();
        db.execute(
            "CREATE TABLE orders (id INTEGER PRIMARY KEY, status TEXT)",
            [],
        )
        .unwrap();
        // Stored in the file, as an attacker who controls the file would.
        db.execute(
            "CREATE VIEW evil AS \
             SELECT honker_enqueue('x', '{}', NULL, NULL, 0, 3, NULL) AS id",
            [],
        )
        .unwrap();
        db.execute(
            "CREATE TRIGGER evil_trigger AFTER INSERT ON orders BEGIN \
             SELECT honker_enqueue('x', '{}', NULL, NULL, 0, 3, NULL); END",
            [],
        )
        .unwrap();
        db.close().unwrap();
    }
    let r = sql(
        &f.path,
        json!([
            "SELECT * FROM evil",
            "INSERT INTO orders (status) VALUES ('paid')",
            // The connection's own TEMP trigger is the user's code: allowed.
            "CREATE TEMP TRIGGER mine AFTER UPDATE ON orders BEGIN \
             SELECT honker_enqueue('mine', json_object('order', new.id), NULL, NULL, 0, 3, NULL); END",
            "DROP TRIGGER evil_trigger",
            "INSERT INTO orders (status) VALUES ('paid')",
            "UPDATE orders SET status = 'shipped'",
        ]),
    );
    assert!(
        error(&r[0]).contains("unsafe use of honker_enqueue"),
        "{}",
        r[0]
    );
    assert!(
        error(&r[1]).contains("unsafe use of honker_enqueue"),
        "{}",
        r[1]
    );
    for step in &r[2..] {
        assert!(step.get("rows").is_some(), "{step}");
    }
    let db = Database::open(&f.path).unwrap();
    assert_eq!(db.queue("x").unwrap().stats().unwrap().ready, 0);
    assert_eq!(db.queue("mine").unwrap().stats().unwrap().ready, 1);
    assert_eq!(count(&db, "orders"), 1);
}

#[test]
fn bad_arguments_give_coded_errors_and_change_nothing() {
    let f = file();
    let db = Database::open(&f.path).unwrap();
    let q = db.queue("emails").unwrap();
    let id = q.enqueue(json!({}), &EnqueueOptions::default()).unwrap().id;
    let before = snapshot(&db);
    let big = format!("\"{}\"", "x".repeat(2 << 20));
    let r = sql(
        &f.path,
        json!([
            "SELECT honker_enqueue(NULL, '{}', NULL, NULL, 0, 3, NULL)",
            "SELECT honker_enqueue('emails', '{not json', NULL, NULL, 0, 3, NULL)",
            "SELECT honker_enqueue('emails', '{}', NULL, -1, 0, 3, NULL)",
            "SELECT honker_enqueue('emails', '{}', NULL, NULL, 'high', 3, NULL)",
            "SELECT honker_enqueue('emails', '{}', NULL, NULL, 0, 0, NULL)",
            [
                "SELECT honker_enqueue('emails', ?, NULL, NULL, 0, 3, NULL)",
                [big]
            ],
            "SELECT honker_queue_enqueue('emails')",
            "SELECT honker_claim_batch('emails', 'w', -1, 60)",
            "SELECT honker_claim_batch('emails', NULL, 1, 60)",
            "SELECT honker_claim_batch('emails', 'w', 1, -5)",
            "SELECT honker_job_ack('emails', 999, 'tok')",
            ["SELECT honker_job_ack('emails', ?, 'tok')", [id]],
            "SELECT honker_ack_batch('not json', 'w')",
            "SELECT honker_job_retry('emails', 999, 'tok', 1000, 'boom')",
            "SELECT honker_job_get('emails', 999)",
            "SELECT honker_cancel(-3)",
            "SELECT honker_queue_stats('')",
        ]),
    );
    let codes: Vec<&str> = r
        .iter()
        .map(|step| error(step).split(':').next().unwrap())
        .collect();
    assert_eq!(
        codes,
        [
            "INVALID_ARGUMENT",
            "INVALID_ARGUMENT",
            "INVALID_ARGUMENT",
            "INVALID_ARGUMENT",
            "INVALID_ARGUMENT",
            "INVALID_ARGUMENT",
            "INVALID_ARGUMENT",
            "INVALID_ARGUMENT",
            "INVALID_ARGUMENT",
            "INVALID_ARGUMENT",
            "NOT_FOUND",
            "LEASE_LOST",
            "INVALID_ARGUMENT",
            "NOT_FOUND",
            "NOT_FOUND",
            "INVALID_ARGUMENT",
            "INVALID_ARGUMENT",
        ]
    );
    for kind in &codes {
        assert!(ErrorKind::from_code(kind).is_some());
    }
    assert_eq!(snapshot(&db), before, "a failed call changed something");
}

#[test]
fn sql_workers_in_autocommit_mode_share_a_queue_without_busy_errors() {
    // Each call outside a transaction runs in BEGIN IMMEDIATE under the
    // host's busy timeout, so concurrent SQL workers queue for the lock
    // instead of failing on a stale snapshot. (Called from inside a query
    // that reads tables, a write can still meet a stale snapshot: BUSY.)
    let f = file();
    let db = Database::open(&f.path).unwrap();
    let q = db.queue("work").unwrap();
    let payloads: Vec<honker::Payload> = (0..600).map(|i| json!({ "i": i }).into()).collect();
    q.enqueue_many(payloads, &EnqueueOptions::default())
        .unwrap();
    let worker = |name: &str| -> Vec<Json> {
        let steps: Vec<Json> = (0..80)
            .flat_map(|_| {
                [
                    json!(["SELECT honker_claim_batch('work', ?, 8, 60)", [name]]),
                    json!(["SELECT honker_ack_batch(?, ?)", ["$ids", name]]),
                ]
            })
            .collect();
        sql(&f.path, Json::Array(steps))
    };
    let results: Vec<Vec<Json>> = std::thread::scope(|s| {
        let a = s.spawn(|| worker("sql-a"));
        let b = s.spawn(|| worker("sql-b"));
        vec![a.join().unwrap(), b.join().unwrap()]
    });
    let mut acked = 0;
    for r in results.iter().flatten() {
        if let Some(n) = one(r).as_i64() {
            acked += n;
        }
    }
    assert_eq!(acked, 600, "every job acked exactly once, no step failed");
    assert_eq!(q.stats().unwrap().ready, 0);
    common::assert_integrity(&db);
}

/// A host program linked with another SQLite (`old` or `bundled`), built
/// once by scripts/sqlite-host.sh and cached outside the repository; runs
/// `load-extension DB EXT SQL` and returns what it printed.
fn other_host(which: &str, db: &Path, sql: &str) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/sqlite-host.sh");
    let built = Command::new("bash")
        .arg(script)
        .arg(which)
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "sqlite-host.sh {which}: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    let host = String::from_utf8(built.stdout).unwrap();
    let out = Command::new(host.trim())
        .arg(db)
        .arg(extension())
        .arg(sql)
        .output()
        .unwrap();
    assert!(out.status.success(), "the host crashed: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn a_host_older_than_3_40_1_gets_a_clear_message_and_no_crash() {
    let f = file();
    let text = other_host("old", &f.path, "SELECT honker_bootstrap()");
    assert!(text.starts_with("sqlite 3.38.2\n"), "{text}");
    assert!(
        text.contains("honker_ext needs SQLite 3.40.1 or newer; this host's SQLite is 3.38.2"),
        "{text}"
    );
    // The load failed, so the SQL never ran: nothing was written.
    assert!(!text.contains("exec rc"), "{text}");
    let db = Database::open(&f.path).unwrap();
    assert_eq!(count(&db, "_honker_jobs"), 0);
}

#[test]
fn the_extension_loads_into_the_sqlite_the_bindings_bundle() {
    let f = file();
    let text = other_host(
        "bundled",
        &f.path,
        "SELECT honker_bootstrap(); \
         SELECT honker_enqueue('emails', '{\"to\":\"alice@example.com\"}', NULL, NULL, 0, 3, NULL); \
         SELECT honker_claim_batch('emails', 'mailer-1', 32, 300); \
         SELECT honker_ack_batch('[1]', 'mailer-1');",
    );
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0] > "sqlite 3.40.1", "{text}");
    assert_eq!(lines[1], "load rc=0: ok", "{text}");
    assert_eq!(lines[3], "1", "{text}");
    let jobs: Json = serde_json::from_str(lines[4]).unwrap();
    assert_eq!(jobs[0]["payload"], r#"{"to":"alice@example.com"}"#);
    assert_eq!(lines[5], "1", "{text}");
    assert_eq!(lines[6], "exec rc=0: ok", "{text}");
    let db = Database::open(&f.path).unwrap();
    assert_eq!(count(&db, "_honker_jobs"), 0);
    common::assert_integrity(&db);
}

/// `extension/tests/watcher_client.c`, Honker's non-Rust bindings' use of the
/// watcher C ABI, built against the system's libsqlite3.so.0 (once per run).
fn watcher_client() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let bin = Path::new(env!("CARGO_TARGET_TMPDIR")).join("watcher_client");
        let out = Command::new("cc")
            .args(["-O2", "-Wall", "-Werror", "-o"])
            .arg(&bin)
            .arg("-I")
            .arg(root.join("extension/sqlite3"))
            .arg(root.join("extension/tests/watcher_client.c"))
            .arg("/usr/lib/x86_64-linux-gnu/libsqlite3.so.0")
            .arg("-ldl")
            .output()
            .expect("cc");
        assert!(
            out.status.success(),
            "cc: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        bin
    })
}

fn run_watcher_client(db: &Path, mode: &str) -> String {
    let out = Command::new(watcher_client())
        .arg(extension())
        .arg(db)
        .arg(mode)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "watcher_client {mode}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn field<'a>(out: &'a str, key: &str) -> Vec<&'a str> {
    out.lines()
        .find_map(|l| l.strip_prefix(&format!("{key} ")))
        .unwrap_or_else(|| panic!("no {key} in {out}"))
        .split(' ')
        .collect()
}

/// The watcher C ABI as Honker's Go, Bun, .NET and C++ bindings call it: a
/// commit by another process wakes a 10 s wait well before its timeout, a
/// wait with nothing committed returns 0 at its timeout, bad arguments are
/// refused with a message, and a call before the extension is loaded into any
/// connection returns NULL with the reason instead of crashing.
#[test]
fn the_watcher_c_abi_wakes_on_another_process_commit_and_times_out() {
    let f = file();
    let out = run_watcher_client(&f.path, "wake");
    let timeout = field(&out, "timeout");
    assert_eq!(timeout[0], "0", "{out}");
    let after: f64 = timeout[2].parse().unwrap();
    assert!((280.0..5_000.0).contains(&after), "{out}");
    let woke = field(&out, "woke");
    assert_eq!(woke[0], "1", "{out}");
    // The commit came 500 ms after the wait began; the wait ended after it
    // (the row is there) and long before its 10 s timeout.
    let after: f64 = woke[2].parse().unwrap();
    assert!((490.0..5_000.0).contains(&after), "{out}");
    assert_eq!(
        woke[6], "1",
        "the woken client sees the committed row: {out}"
    );
    assert_eq!(
        field(&out, "watcher_threads"),
        ["1"],
        "the C ABI and the SQL functions share the process's one watcher per file: {out}"
    );
    assert!(field(&out, "bad_backend")
        .join(" ")
        .starts_with("INVALID_ARGUMENT: unknown watcher backend"));
    assert!(field(&out, "bad_poll")
        .join(" ")
        .starts_with("INVALID_ARGUMENT: watcher poll interval"));

    let g = file();
    let out = run_watcher_client(&g.path, "before");
    assert_eq!(field(&out, "open"), ["NULL"], "{out}");
    assert!(
        field(&out, "error")
            .join(" ")
            .starts_with("CLOSED: honker_ext is not loaded"),
        "{out}"
    );
    assert_eq!(field(&out, "wait_null"), ["-1"], "{out}");
}

/// Honker's (name, arity) pairs for the queue, results, streams and the watcher
/// (reference/honker-ancestor.md §3 and its later fenced arities) are all
/// registered in the extension, at exactly those arities (a probe of
/// `pragma_function_list`, as Honker's bindings make, finds them); none of
/// Honker's names exists at another arity, and ours never take one of
/// Honker's names (ADR 15). Pub/sub, the scheduler, locks and rate limits
/// bring theirs with their primitives (issues 22–25).
#[test]
fn honkers_names_are_registered_at_honkers_arities_only() {
    let honkers: &[(&str, &[i64])] = &[
        ("honker_bootstrap", &[0]),
        ("honker_enqueue", &[7]),
        ("honker_claim_batch", &[4]),
        ("honker_ack", &[2, 3]),
        ("honker_ack_batch", &[2]),
        ("honker_retry", &[4, 5]),
        ("honker_fail", &[3, 4]),
        ("honker_heartbeat", &[3, 4]),
        ("honker_cancel", &[1, 2]),
        ("honker_get_job", &[1]),
        ("honker_queue_next_claim_at", &[1]),
        ("honker_sweep_expired", &[1]),
        ("honker_result_save", &[3]),
        ("honker_result_get", &[1]),
        ("honker_result_sweep", &[0]),
        ("honker_update_watcher_open", &[2, 3]),
        ("honker_update_watcher_wait", &[2]),
        ("honker_update_watcher_close", &[1]),
        ("honker_stream_publish", &[3]),
        ("honker_stream_read_since", &[3]),
        ("honker_stream_save_offset", &[3]),
        ("honker_stream_get_offset", &[2]),
        ("honker_notify", &[2]),
        ("notify", &[2]),
        ("honker_lock_acquire", &[3]),
        ("honker_lock_release", &[2]),
        ("honker_lock_renew", &[3]),
        ("honker_rate_limit_try", &[3]),
        ("honker_rate_limit_sweep", &[1]),
        ("honker_scheduler_register", &[6, 7]),
        ("honker_scheduler_unregister", &[1]),
        ("honker_scheduler_tick", &[1]),
        ("honker_scheduler_soonest", &[0]),
        ("honker_scheduler_pause", &[1]),
        ("honker_scheduler_resume", &[1]),
        ("honker_scheduler_list", &[0]),
        ("honker_scheduler_update", &[6, 8]),
        ("honker_cron_next_after", &[2]),
    ];
    let shell = std::env::var("HONKER_SQLITE3").unwrap_or_else(|_| "sqlite3".into());
    let out = Command::new(shell)
        .arg(":memory:")
        .arg(format!(".load {}", extension().display()))
        .arg(
            "SELECT name || ' ' || narg FROM pragma_function_list \
             WHERE name LIKE 'honker%' OR name = 'notify'",
        )
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let registered: Vec<(String, i64)> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (name, n) = l.split_once(' ').unwrap();
            (name.to_owned(), n.parse().unwrap())
        })
        .collect();
    for (name, arities) in honkers {
        let mut found: Vec<i64> = registered
            .iter()
            .filter(|(n, _)| n == name)
            .map(|&(_, a)| a)
            .collect();
        found.sort();
        assert_eq!(&found, arities, "{name}");
    }
    // Every other name is ours: honker_version, and our nouns (ADR 15). A
    // name in Honker's list is Honker's, at exactly its arities (above).
    for (name, _) in &registered {
        let ours = [
            "honker_queue_",
            "honker_job_",
            "honker_dead_",
            "honker_stream_",
            "honker_channel_",
            "honker_group_",
            "honker_lock_",
            "honker_rate_limit_",
            "honker_schedule_",
        ]
        .iter()
        .any(|p| name.starts_with(p))
            || name == "honker_version"
            || name == "honker_cron_next"
            || name == "honker_import_honker";
        let honker = honkers.iter().any(|(n, _)| n == name);
        assert!(
            ours || honker,
            "{name} is neither Honker's nor under our nouns"
        );
    }
}

#[test]
fn a_honker_file_is_refused_by_bootstrap_and_imported_through_sql() {
    let f = file();
    {
        let conn = honker::rusqlite::Connection::open(&f.path).unwrap();
        conn.execute_batch(
            "PRAGMA journal_mode = WAL;
             CREATE TABLE _honker_live (id INTEGER PRIMARY KEY AUTOINCREMENT, queue TEXT NOT NULL,
               payload TEXT NOT NULL, state TEXT NOT NULL DEFAULT 'pending',
               priority INTEGER NOT NULL DEFAULT 0, run_at INTEGER NOT NULL DEFAULT (unixepoch()),
               worker_id TEXT, claim_expires_at INTEGER, attempts INTEGER NOT NULL DEFAULT 0,
               max_attempts INTEGER NOT NULL DEFAULT 3,
               created_at INTEGER NOT NULL DEFAULT (unixepoch()), expires_at INTEGER);
             CREATE TABLE _honker_results (job_id INTEGER PRIMARY KEY, value TEXT,
               created_at INTEGER NOT NULL DEFAULT (unixepoch()), expires_at INTEGER);
             INSERT INTO _honker_live (id, queue, payload) VALUES (41, 'emails', '{\"n\": 1}');",
        )
        .unwrap();
    }
    let r = sql(
        &f.path,
        json!([
            "SELECT honker_bootstrap()",
            "SELECT honker_import_honker('{\"dry_run\": true}')",
            "SELECT count(*) FROM sqlite_master WHERE name = '_honker_schema'",
            "BEGIN",
            "SELECT honker_import_honker()",
            "ROLLBACK",
            "SELECT count(*) FROM sqlite_master WHERE name = '_honker_schema'",
            "SELECT honker_import_honker()",
            "SELECT honker_import_honker()",
            "SELECT honker_bootstrap()",
            "SELECT honker_claim_batch('emails', 'w', 10, 60)",
        ]),
    );
    assert!(error(&r[0]).starts_with("UNSAFE: "), "{}", r[0]);
    assert!(error(&r[0]).contains("honker_import_honker"), "{}", r[0]);
    let dry: Json = serde_json::from_str(one(&r[1]).as_str().unwrap()).unwrap();
    assert_eq!(
        (dry["dry_run"].clone(), dry["jobs"]["ready"].clone()),
        (json!(true), json!(1))
    );
    assert_eq!(one(&r[2]), 0, "a dry run leaves no schema behind");
    assert_eq!(
        one(&r[6]),
        0,
        "an import inside a rolled-back transaction leaves nothing"
    );
    let done: Json = serde_json::from_str(one(&r[7]).as_str().unwrap()).unwrap();
    assert_eq!(done["jobs"]["ready"], 1, "{done}");
    assert_eq!(done["process_check"], "proc-locks", "{done}");
    let again: Json = serde_json::from_str(one(&r[8]).as_str().unwrap()).unwrap();
    assert_eq!(again["found"], json!([]), "{again}");
    assert_eq!(one(&r[9]), honker::schema::LATEST);
    let jobs: Json = serde_json::from_str(one(&r[10]).as_str().unwrap()).unwrap();
    assert_eq!(jobs[0]["id"], 41, "{jobs}");
}
