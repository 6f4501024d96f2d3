//! Switching from Honker (ADR 25): a file in Honker's schema is refused on
//! open, imported in one transaction with ids, states, results, dead
//! letters, stream positions, schedules and held locks kept; a second
//! import, a dry run and an import of bad rows change nothing; an import
//! while another process has the file open is refused. Honker 0.2.4
//! itself writes the file in bindings-python/tests/test_import_honker.py;
//! here the file is written with Honker's DDL (reference/honker-ancestor.md
//! §2) so every state can be set exactly.

// The importer's check that no Honker process has the file open reads
// Linux's lock table; elsewhere it refuses without skip_process_check (ADR 30).
#![cfg(target_os = "linux")]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use honker::import::{import_honker, ImportOptions};
use honker::rusqlite::{self, types::Value, Connection};
use honker::{Database, ErrorKind};

/// Honker 0.2.4's schema, and its Python client's view.
const HONKER_SCHEMA: &str = "
PRAGMA journal_mode = WAL;
CREATE TABLE _honker_live (id INTEGER PRIMARY KEY AUTOINCREMENT, queue TEXT NOT NULL,
  payload TEXT NOT NULL, state TEXT NOT NULL DEFAULT 'pending', priority INTEGER NOT NULL DEFAULT 0,
  run_at INTEGER NOT NULL DEFAULT (unixepoch()), worker_id TEXT, claim_expires_at INTEGER,
  attempts INTEGER NOT NULL DEFAULT 0, max_attempts INTEGER NOT NULL DEFAULT 3,
  created_at INTEGER NOT NULL DEFAULT (unixepoch()), expires_at INTEGER);
CREATE INDEX _honker_live_claim ON _honker_live(queue, priority DESC, run_at, id)
  WHERE state IN ('pending', 'processing');
CREATE TABLE _honker_dead (id INTEGER PRIMARY KEY, queue TEXT NOT NULL, payload TEXT NOT NULL,
  priority INTEGER NOT NULL DEFAULT 0, run_at INTEGER NOT NULL DEFAULT 0,
  attempts INTEGER NOT NULL DEFAULT 0, max_attempts INTEGER NOT NULL DEFAULT 0, last_error TEXT,
  created_at INTEGER NOT NULL DEFAULT (unixepoch()), died_at INTEGER NOT NULL DEFAULT (unixepoch()));
CREATE TABLE _honker_locks (name TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at INTEGER NOT NULL);
CREATE TABLE _honker_rate_limits (name TEXT NOT NULL, window_start INTEGER NOT NULL,
  count INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (name, window_start));
CREATE TABLE _honker_scheduler_tasks (name TEXT PRIMARY KEY, queue TEXT NOT NULL,
  cron_expr TEXT NOT NULL, payload TEXT NOT NULL, priority INTEGER NOT NULL DEFAULT 0,
  expires_s INTEGER, next_fire_at INTEGER NOT NULL, enabled INTEGER NOT NULL DEFAULT 1);
CREATE TABLE _honker_results (job_id INTEGER PRIMARY KEY, value TEXT,
  created_at INTEGER NOT NULL DEFAULT (unixepoch()), expires_at INTEGER);
CREATE TABLE _honker_stream (offset INTEGER PRIMARY KEY AUTOINCREMENT, topic TEXT NOT NULL,
  key TEXT, payload TEXT NOT NULL, created_at INTEGER NOT NULL DEFAULT (unixepoch()));
CREATE INDEX _honker_stream_topic ON _honker_stream(topic, offset);
CREATE TABLE _honker_stream_consumers (name TEXT NOT NULL, topic TEXT NOT NULL,
  offset INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (name, topic));
CREATE TABLE _honker_notifications (id INTEGER PRIMARY KEY AUTOINCREMENT, channel TEXT NOT NULL,
  payload TEXT NOT NULL, created_at INTEGER NOT NULL DEFAULT (unixepoch()));
CREATE VIEW _honker_jobs AS
  SELECT id, queue, payload, state, priority, run_at, worker_id, claim_expires_at, attempts,
         max_attempts, created_at, expires_at, NULL AS last_error, NULL AS died_at FROM _honker_live
  UNION ALL
  SELECT id, queue, payload, 'dead', priority, run_at, NULL, NULL, attempts, max_attempts,
         created_at, NULL, last_error, died_at FROM _honker_dead;";

fn now_s() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// A Honker file with something in every table: jobs in every state,
/// completed jobs (only the sequence and a result remember them), dead
/// letters, results, two topics interleaved with two consumers, schedules,
/// locks, notifications and rate-limit windows. Returns the time (s) its
/// times are relative to.
fn honker_file(path: &Path) -> i64 {
    let t = now_s();
    let c = Connection::open(path).unwrap();
    c.execute_batch(HONKER_SCHEMA).unwrap();
    c.execute_batch(&format!(
        "INSERT INTO _honker_live (id, queue, payload, state, priority, run_at, attempts, created_at)
           VALUES (1, 'emails', '{{\"to\":\"a@x\"}}', 'pending', 5, {past}, 0, {past});
         INSERT INTO _honker_live (id, queue, payload, state, run_at, attempts, created_at, expires_at)
           VALUES (2, 'emails', '{{\"to\":\"b@x\"}}', 'pending', {future}, 1, {past}, {far});
         INSERT INTO _honker_live (id, queue, payload, state, run_at, worker_id, claim_expires_at,
                                   attempts, created_at)
           VALUES (3, 'emails', '{{\"to\":\"c@x\"}}', 'processing', {past}, 'w1', {future}, 1, {past});
         INSERT INTO _honker_live (id, queue, payload, run_at, created_at)
           VALUES (7, 'raw', 'not json', {past}, {past});
         INSERT INTO _honker_dead (id, queue, payload, attempts, max_attempts, last_error, died_at)
           VALUES (4, 'emails', '{{\"to\":\"d@x\"}}', 3, 3, 'smtp 550', {past});
         INSERT INTO _honker_dead (id, queue, payload, attempts, max_attempts, last_error, died_at)
           VALUES (5, 'emails', '{{\"to\":\"e@x\"}}', 0, 3, 'expired', {past});
         UPDATE sqlite_sequence SET seq = 120 WHERE name = '_honker_live';
         INSERT INTO _honker_results (job_id, value, created_at) VALUES (3, '{{\"ok\":1}}', {past});
         INSERT INTO _honker_results (job_id, value, created_at) VALUES (99, '\"sent\"', {past});
         INSERT INTO _honker_results (job_id, value, created_at, expires_at)
           VALUES (98, '1', {past}, {past});
         INSERT INTO _honker_stream (offset, topic, key, payload) VALUES
           (1, 'orders', 'o1', '{{\"n\":1}}'), (2, 'audit', NULL, '{{\"a\":1}}'),
           (3, 'orders', 'o2', '{{\"n\":2}}'), (4, 'audit', '', '{{\"a\":2}}'),
           (5, 'orders', 'o1', '{{\"n\":3}}'), (6, 'orders', NULL, '{{\"n\":4}}');
         INSERT INTO _honker_stream_consumers (name, topic, offset) VALUES
           ('billing', 'orders', 3), ('search', 'orders', 0), ('billing', 'audit', 4);
         INSERT INTO _honker_scheduler_tasks (name, queue, cron_expr, payload, next_fire_at, enabled)
           VALUES ('friday13', 'reports', '0 9 13 * 5', '{{}}', {sched}, 1),
                  ('minutely', 'pings', '@every 60s', 'null', {sched}, 0),
                  ('steps', 'pings', '5/15 * * * *', '1', {sched}, 1);
         INSERT INTO _honker_locks VALUES ('reindex', 'node-a', {future}),
           ('old', 'node-b', {past}), ('honker-scheduler', 'leader', {future});
         INSERT INTO _honker_notifications (channel, payload) VALUES ('c', 'x'), ('c', 'y');
         INSERT INTO _honker_rate_limits VALUES ('mail', {past}, 3);",
        past = t - 100,
        future = t + 3600,
        far = t + 86_400,
        sched = t + 7200,
    ))
    .unwrap();
    t
}

/// Every object and every row of the file, to compare before and after.
fn dump(path: &Path) -> Vec<String> {
    let c = Connection::open(path).unwrap();
    let mut out = Vec::new();
    let objects: Vec<(String, String, Option<String>)> = c
        .prepare("SELECT type, name, sql FROM sqlite_master ORDER BY name")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    for (ty, name, sql) in objects {
        out.push(format!("{ty} {name} {sql:?}"));
        if ty == "table" {
            let mut s = c.prepare(&format!("SELECT * FROM \"{name}\"")).unwrap();
            let n = s.column_count();
            let mut rows: Vec<String> = s
                .query_map([], |r| {
                    Ok((0..n)
                        .map(|i| format!("{:?}", r.get::<_, Value>(i).unwrap()))
                        .collect::<Vec<_>>()
                        .join("|"))
                })
                .unwrap()
                .map(Result::unwrap)
                .collect();
            rows.sort();
            out.extend(rows);
        }
    }
    out
}

/// Rows of `sql` on the writer (where honker's SQL functions are).
fn rows(db: &Database, sql: &str) -> Vec<Vec<Value>> {
    let tx = db.transaction().unwrap();
    let rows = tx.query(sql, []).unwrap().rows;
    tx.rollback().unwrap();
    rows
}

fn ints(db: &Database, sql: &str) -> Vec<i64> {
    rows(db, sql)
        .into_iter()
        .map(|r| match &r[0] {
            Value::Integer(n) => *n,
            v => panic!("{v:?}"),
        })
        .collect()
}

fn texts(db: &Database, sql: &str) -> Vec<String> {
    rows(db, sql)
        .into_iter()
        .map(|r| match &r[0] {
            Value::Text(s) => s.clone(),
            Value::Null => "NULL".into(),
            v => format!("{v:?}"),
        })
        .collect()
}

#[test]
fn open_and_bootstrap_refuse_a_honker_file_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    honker_file(&path);
    let before = dump(&path);
    let err = Database::open(&path).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unsafe, "{err}");
    assert!(err.message().contains("honker_import_honker"), "{err}");
    assert!(err.message().contains("_honker_live (table)"), "{err}");
    assert!(err.message().contains("_honker_jobs (view)"), "{err}");
    // honker_bootstrap() on any connection: the same refusal.
    let c = Connection::open(&path).unwrap();
    honker::sql::register(&c, &honker::sql::SqlConfig::default()).unwrap();
    let e = c
        .query_row("SELECT honker_bootstrap()", [], |r| r.get::<_, i64>(0))
        .unwrap_err();
    assert!(e.to_string().starts_with("UNSAFE: "), "{e}");
    drop(c);
    assert_eq!(dump(&path), before);

    // In rollback-journal mode: refused before the journal mode changes.
    let rollback = dir.path().join("rollback.db");
    let c = Connection::open(&rollback).unwrap();
    c.execute_batch(&HONKER_SCHEMA.replace("PRAGMA journal_mode = WAL;", ""))
        .unwrap();
    drop(c);
    let err = Database::open(&rollback).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unsafe, "{err}");
    let c = Connection::open(&rollback).unwrap();
    let mode: String = c
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "delete");
    drop(c);

    // Only the notifications table Honker's extension creates on load.
    let lone = dir.path().join("lone.db");
    let c = Connection::open(&lone).unwrap();
    c.execute_batch(
        "CREATE TABLE _honker_notifications (id INTEGER PRIMARY KEY AUTOINCREMENT,
           channel TEXT NOT NULL, payload TEXT NOT NULL, created_at INTEGER NOT NULL)",
    )
    .unwrap();
    drop(c);
    let err = Database::open(&lone).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unsafe, "{err}");
    let r = import_honker(&lone, &ImportOptions::default()).unwrap();
    assert_eq!(r.found, vec!["_honker_notifications (table)".to_string()]);
    Database::open(&lone).unwrap();
}

#[test]
fn import_moves_everything_and_keeps_ids_positions_and_next_fires() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    // The file's own time: a second may pass between writing it and here.
    let t = honker_file(&path);
    let options = ImportOptions {
        time_zone: Some("Europe/Berlin".into()),
        ..ImportOptions::default()
    };
    let r = import_honker(&path, &options).unwrap();
    assert_eq!(r.found.len(), 10, "{:?}", r.found);
    assert_eq!(r.process_check, "proc-locks");
    assert_eq!((r.ready, r.scheduled, r.running), (2, 1, 1));
    assert_eq!((r.dead, r.expired, r.results), (1, 1, 2));
    assert_eq!((r.streams, r.events, r.consumers), (2, 6, 3));
    assert_eq!((r.schedules, r.locks, r.payloads_as_bytes), (3, 1, 1));
    assert_eq!(r.time_zone, "Europe/Berlin");
    let skipped: Vec<(&str, i64)> = r
        .not_imported
        .iter()
        .map(|n| (n.what.as_str(), n.count))
        .collect();
    assert_eq!(
        skipped,
        vec![
            ("notifications", 2),
            ("rate limit windows", 1),
            ("results past their lifetime", 1),
            ("locks past their lifetime", 1),
            ("Honker's scheduler leader lock", 1)
        ]
    );
    let noted: Vec<(&str, bool)> = r
        .schedule_notes
        .iter()
        .map(|n| (n.name.as_str(), n.note.contains("AND")))
        .collect();
    assert!(noted.contains(&("friday13", true)), "{noted:?}");
    assert!(
        r.schedule_notes
            .iter()
            .any(|n| n.name == "steps" && n.note.contains("N/step")),
        "{:?}",
        r.schedule_notes
    );
    let json = r.to_json();
    assert_eq!(json["jobs"]["ready"], 2);

    // No Honker table is left; honker opens the file.
    let db = Database::open(&path).unwrap();
    assert_eq!(
        texts(
            &db,
            "SELECT name FROM sqlite_master WHERE name LIKE '\\_honker\\_import%' ESCAPE '\\'
             OR (type = 'table' AND name IN ('_honker_live', '_honker_stream', '_honker_locks'))"
        ),
        Vec::<String>::new()
    );
    // Jobs: ids and states kept; the claim order honours the priority.
    assert_eq!(
        texts(
            &db,
            "SELECT id || ' ' || state FROM _honker_jobs ORDER BY id"
        ),
        vec!["1 ready", "2 scheduled", "3 running", "7 ready"]
    );
    assert_eq!(
        ints(
            &db,
            "SELECT lease_expires_at FROM _honker_jobs WHERE id = 3"
        ),
        vec![(t + 3600) * 1000]
    );
    assert_eq!(
        ints(&db, "SELECT expires_at FROM _honker_jobs WHERE id = 2"),
        vec![(t + 86_400) * 1000]
    );
    let q = db.queue("emails").unwrap();
    let jobs = q.claim("us", 10).unwrap();
    assert_eq!(jobs.iter().map(|j| j.id).collect::<Vec<_>>(), vec![1]);
    assert_eq!(jobs[0].payload.as_json_text(), Some("{\"to\":\"a@x\"}"));
    q.ack(&jobs[0].lease, None).unwrap();
    // A payload that was not JSON is its bytes.
    let raw = db.queue("raw").unwrap().claim("us", 1).unwrap();
    assert_eq!(raw[0].payload.as_bytes(), b"not json");
    assert!(raw[0].payload.as_json_text().is_none());
    // A new job's id continues after Honker's last (its sequence: 120).
    let id = q
        .enqueue(serde_json::json!({}), &Default::default())
        .unwrap()
        .id;
    assert_eq!(id, 121);
    // Dead letters, with their errors.
    assert_eq!(
        texts(
            &db,
            "SELECT id || ' ' || state || ' ' || last_error FROM _honker_finished
             WHERE id IN (4, 5) ORDER BY id"
        ),
        vec!["4 dead smtp 550", "5 expired expired"]
    );
    // Results: by id through Honker's function; under the job's queue when known.
    assert_eq!(
        texts(
            &db,
            "SELECT honker_result_get(3) UNION ALL SELECT honker_result_get(99)
             UNION ALL SELECT honker_result_get(98)"
        ),
        vec!["{\"ok\":1}", "\"sent\"", "NULL"]
    );
    assert_eq!(
        texts(&db, "SELECT queue FROM _honker_results ORDER BY job_id"),
        vec!["emails", ""]
    );
    // Streams: per-topic offsets; each consumer resumes at its next event.
    let orders = db.stream("orders").unwrap();
    let all: Vec<(i64, Option<String>)> = orders
        .read(0, 100)
        .unwrap()
        .into_iter()
        .map(|e| (e.offset, e.key))
        .collect();
    assert_eq!(
        all,
        vec![
            (1, Some("o1".into())),
            (2, Some("o2".into())),
            (3, Some("o1".into())),
            (4, None)
        ]
    );
    // billing had processed global offset 3 (orders' 2nd event): next is 3.
    assert_eq!(orders.position("billing").unwrap(), Some(3));
    assert_eq!(orders.position("search").unwrap(), Some(1));
    let audit = db.stream("audit").unwrap();
    assert_eq!(audit.position("billing").unwrap(), Some(3));
    assert_eq!(audit.read(0, 10).unwrap()[1].key, None);
    // Honker's own stream function sees the same positions.
    assert_eq!(
        ints(&db, "SELECT honker_stream_get_offset('billing', 'orders')"),
        vec![2]
    );
    // Schedules: Honker's next fire and meaning kept.
    assert_eq!(
        texts(
            &db,
            "SELECT name || ' ' || next_fire_at || ' ' || paused || ' ' || day_rule || ' '
                    || time_zone || ' ' || catch_up || ' ' || catch_up_max
             FROM _honker_schedules ORDER BY name"
        ),
        vec![
            format!("friday13 {} 0 and Europe/Berlin all 64", (t + 7200) * 1000),
            format!("minutely {} 1 and Europe/Berlin all 64", (t + 7200) * 1000),
            format!("steps {} 0 and Europe/Berlin all 64", (t + 7200) * 1000),
        ]
    );
    // The held lock: its owner, Honker's expiry, fencing token 1.
    assert_eq!(
        texts(
            &db,
            "SELECT name || ' ' || owner || ' ' || token || ' ' || expires_at
             FROM _honker_lock_holders WHERE name <> ''"
        ),
        vec![format!("reindex node-a 1 {}", (t + 3600) * 1000)]
    );
    // Honker's lock function: held by node-a, not by someone else.
    assert_eq!(
        ints(&db, "SELECT honker_lock_acquire('reindex', 'intruder', 60)"),
        vec![0]
    );
    db.close().unwrap();

    // A second import finds nothing and changes nothing.
    let before = dump(&path);
    let again = import_honker(&path, &ImportOptions::default()).unwrap();
    assert!(again.found.is_empty());
    assert_eq!(again.to_json()["jobs"]["ready"], 0);
    assert_eq!(dump(&path), before);
}

#[test]
fn a_dry_run_reports_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    honker_file(&path);
    let before = dump(&path);
    let r = import_honker(
        &path,
        &ImportOptions {
            dry_run: true,
            ..ImportOptions::default()
        },
    )
    .unwrap();
    assert!(r.dry_run);
    assert_eq!((r.ready, r.events, r.schedules), (2, 6, 3));
    assert_eq!(dump(&path), before);
}

#[test]
fn rows_honker_cannot_hold_are_listed_and_nothing_changes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    honker_file(&path);
    let c = Connection::open(&path).unwrap();
    c.execute_batch(&format!(
        "INSERT INTO _honker_live (queue, payload) VALUES ('', '1');
         INSERT INTO _honker_stream (topic, key, payload) VALUES ('orders', '{}', '1');
         UPDATE _honker_scheduler_tasks SET cron_expr = '61 * * * *' WHERE name = 'steps';",
        "k".repeat(600)
    ))
    .unwrap();
    drop(c);
    let before = dump(&path);
    let err = import_honker(&path, &ImportOptions::default()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(err.message().contains("queue \"\""), "{err}");
    assert!(err.message().contains("600 bytes"), "{err}");
    assert!(err.message().contains("nothing was changed"), "{err}");
    assert_eq!(dump(&path), before);
    // The schedule is checked after the names are fixed.
    let c = Connection::open(&path).unwrap();
    c.execute_batch("DELETE FROM _honker_live WHERE queue = ''; DELETE FROM _honker_stream WHERE length(key) > 512")
        .unwrap();
    drop(c);
    let before = dump(&path);
    let err = import_honker(&path, &ImportOptions::default()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(err.message().contains("schedule \"steps\""), "{err}");
    assert_eq!(dump(&path), before);
    // Bad options.
    let err = import_honker(
        &path,
        &ImportOptions {
            time_zone: Some("Mars/Olympus".into()),
            ..ImportOptions::default()
        },
    )
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    let err = import_honker(dir.path().join("missing.db"), &ImportOptions::default()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(!dir.path().join("missing.db").exists());
    assert_eq!(dump(&path), before);
}

#[test]
fn an_import_while_another_process_has_the_file_open_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    honker_file(&path);
    // Another process with the file open in WAL mode, idle (as a Honker
    // process between jobs): Debian's python3 on the system SQLite.
    let mut child = Command::new("/usr/bin/python3")
        .arg("-c")
        .arg(
            "import sqlite3, sys, time\n\
             c = sqlite3.connect(sys.argv[1])\n\
             c.execute('SELECT count(*) FROM _honker_live').fetchall()\n\
             print('ready', flush=True)\n\
             sys.stdin.read()\n",
        )
        .arg(&path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready");
    let before = dump(&path);
    let err = import_honker(&path, &ImportOptions::default()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unsafe, "{err}");
    assert!(
        err.message().contains(&format!("pid {}", child.id())),
        "{err}"
    );
    assert!(err.message().contains("python3"), "{err}");
    // Through SQL too, from a connection of this process.
    let c = Connection::open(&path).unwrap();
    honker::sql::register(&c, &honker::sql::SqlConfig::default()).unwrap();
    let e = c
        .query_row("SELECT honker_import_honker()", [], |r| {
            r.get::<_, String>(0)
        })
        .unwrap_err();
    assert!(e.to_string().starts_with("UNSAFE: "), "{e}");
    // A dry run names the holder and changes nothing.
    let report: String = c
        .query_row(
            "SELECT honker_import_honker('{\"dry_run\": true}')",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(report.contains(&format!("pid {}", child.id())), "{report}");
    drop(c);
    assert_eq!(dump(&path), before);
    drop(child.stdin.take());
    child.wait().unwrap();
    // Once it is gone, the SQL function imports (its own connection's
    // locks do not count).
    let c = Connection::open(&path).unwrap();
    honker::sql::register(&c, &honker::sql::SqlConfig::default()).unwrap();
    let report: String = c
        .query_row("SELECT honker_import_honker()", [], |r| r.get(0))
        .unwrap();
    let report: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert_eq!(report["jobs"]["ready"], 2, "{report}");
    let e = c
        .query_row("SELECT honker_import_honker('{\"nope\": 1}')", [], |r| {
            r.get::<_, String>(0)
        })
        .unwrap_err();
    assert!(e.to_string().starts_with("INVALID_ARGUMENT: "), "{e}");
    drop(c);
    let _ = rusqlite::Connection::open(&path);
    Database::open(&path).unwrap();
}

#[test]
fn long_streams_are_numbered_per_stream_across_pages() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    honker_file(&path);
    let c = Connection::open(&path).unwrap();
    // 2,500 more events, alternating between two topics, keys every third.
    c.execute_batch(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2500)
         INSERT INTO _honker_stream (topic, key, payload)
         SELECT CASE i % 2 WHEN 0 THEN 'orders' ELSE 'audit' END,
                CASE WHEN i % 3 = 0 THEN 'k' || i END, json_object('i', i) FROM n;
         UPDATE _honker_stream_consumers SET offset = 1006 WHERE name = 'search';",
    )
    .unwrap();
    drop(c);
    let r = import_honker(&path, &ImportOptions::default()).unwrap();
    assert_eq!(r.events, 2506);
    let db = Database::open(&path).unwrap();
    let orders = db.stream("orders").unwrap();
    let mut all = Vec::new();
    let mut after = 0;
    loop {
        let page = orders.read(after, 500).unwrap();
        if page.is_empty() {
            break;
        }
        after = page.last().unwrap().offset;
        all.extend(page);
    }
    // orders: its 4 events, then i = 2, 4, …, 2500 in order, numbered densely.
    assert_eq!(all.len(), 4 + 1250);
    assert!(all
        .iter()
        .enumerate()
        .all(|(k, e)| e.offset == k as i64 + 1));
    let is: Vec<i64> = all[4..]
        .iter()
        .map(|e| e.payload.as_json().unwrap()["i"].as_i64().unwrap())
        .collect();
    assert_eq!(is, (1..=1250).map(|k| 2 * k).collect::<Vec<_>>());
    assert_eq!(all[4 + 2].key.as_deref(), Some("k6"));
    // search had processed Honker's offset 1006 (global: events 7… are the
    // new ones, 1006 is i = 1000, an orders event, orders' 4 + 500th).
    assert_eq!(orders.position("search").unwrap(), Some(4 + 500 + 1));
    let audit = db.stream("audit").unwrap();
    assert_eq!(audit.info().unwrap().last_offset, 2 + 1250);
}
