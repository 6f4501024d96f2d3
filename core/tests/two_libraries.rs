//! honker's bundled SQLite and a second SQLite library (the system's, loaded
//! with dlopen, as Python's `sqlite3` module has it) on one file in one
//! process (issue 15 §1, ADR 13): in both orders of opening, concurrent
//! writers of both libraries lose nothing and the file stays sound, and
//! honker's close never pulls the WAL or the shared memory from under the
//! other library's open connection.

// Not in a musl build: its test binaries are static and cannot load the
// system's libsqlite3 (glibc's) as the second library (ADR 30).
#![cfg(all(feature = "bundled", target_os = "linux", not(target_env = "musl")))]

#[path = "common/system_sqlite.rs"]
mod system_sqlite;

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::thread;

use honker::{Database, EnqueueOptions};
use serde_json::json;
use system_sqlite::SystemSqlite;

const THREADS: i64 = 3;
const ROWS: i64 = 300;

fn create_orders(conn: &system_sqlite::SysConn<'_>) {
    conn.exec(
        "PRAGMA journal_mode=WAL; CREATE TABLE IF NOT EXISTS orders(id INTEGER PRIMARY KEY, t INTEGER, n INTEGER)",
    )
    .unwrap();
}

/// What another connection sees once everything in this process is closed:
/// integrity_check, orders, jobs.
fn verdict(lib: &SystemSqlite, path: &Path) -> (String, i64, i64) {
    let conn = lib.open(path);
    let integrity = conn
        .exec("PRAGMA integrity_check")
        .map(|r| r.join("; "))
        .unwrap_or_else(|e| e);
    let count = |sql: &str| {
        conn.exec(sql)
            .ok()
            .and_then(|r| r.first()?.parse().ok())
            .unwrap_or(-1)
    };
    (
        integrity,
        count("SELECT count(*) FROM orders"),
        count("SELECT count(*) FROM _honker_jobs"),
    )
}

/// Descriptors of this process on `path`'s file.
fn descriptors_on(path: &Path) -> usize {
    let meta = std::fs::metadata(path).unwrap();
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::metadata(e.path())
                .is_ok_and(|m| m.dev() == meta.dev() && m.ino() == meta.ino())
        })
        .count()
}

/// The reproduction: a connection of the other library is open
/// before (or after) honker's; three threads of the other library each open a
/// connection, commit rows one by one and close it, while three threads
/// enqueue through honker.
fn concurrent_writers(opened_first: &str) {
    let lib = SystemSqlite::load();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    let mut holder = None;
    if opened_first == "system" {
        let conn = lib.open(&path);
        create_orders(&conn);
        holder = Some(conn);
    }
    let db = Database::open(&path).unwrap();
    if opened_first == "honker" {
        let conn = lib.open(&path);
        create_orders(&conn);
        holder = Some(conn);
    }
    let q = db.queue("work").unwrap();
    thread::scope(|s| {
        for t in 0..THREADS {
            let (lib, path) = (&lib, &path);
            s.spawn(move || {
                let conn = lib.open(path);
                for n in 0..ROWS {
                    conn.exec(&format!("INSERT INTO orders(t, n) VALUES ({t}, {n})"))
                        .unwrap();
                }
            });
            let q = &q;
            s.spawn(move || {
                for n in 0..ROWS {
                    q.enqueue(json!({"t": t, "n": n}), &EnqueueOptions::default())
                        .unwrap();
                }
            });
        }
    });
    db.close().unwrap();
    drop(holder);
    assert_eq!(
        verdict(&lib, &path),
        ("ok".to_string(), THREADS * ROWS, THREADS * ROWS)
    );
}

#[test]
fn concurrent_writers_with_the_other_library_opened_first() {
    for _ in 0..3 {
        concurrent_writers("system");
    }
}

#[test]
fn concurrent_writers_with_the_other_library_opened_second() {
    for _ in 0..3 {
        concurrent_writers("honker");
    }
}

/// The quiet variant: the other library's connection stays open and keeps
/// committing while honker opens and closes the file again and again. Before
/// ADR 13, honker's close deleted `-wal`/`-shm` under it and its later commits
/// were lost.
#[test]
fn honker_closing_leaves_the_other_librarys_connection_whole() {
    let lib = SystemSqlite::load();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    let conn = lib.open(&path);
    create_orders(&conn);
    let mut rows = 0;
    for round in 0..20 {
        let db = Database::open(&path).unwrap();
        db.queue("work")
            .unwrap()
            .enqueue(json!(round), &EnqueueOptions::default())
            .unwrap();
        conn.exec(&format!("INSERT INTO orders(t, n) VALUES (0, {round})"))
            .unwrap();
        rows += 1;
        db.close().unwrap();
        drop(db);
        // honker's close could not take the file's exclusive lock (the other
        // library holds a shared one), so it left the WAL and shm in place.
        assert!(path.with_file_name("app.db-wal").exists(), "round {round}");
        assert!(path.with_file_name("app.db-shm").exists(), "round {round}");
        conn.exec(&format!("INSERT INTO orders(t, n) VALUES (1, {round})"))
            .unwrap();
        rows += 1;
    }
    drop(conn);
    assert_eq!(verdict(&lib, &path), ("ok".to_string(), rows, 20));
}

/// honker's descriptors on a file the other library has open are parked, not
/// closed (a close would drop that library's locks); once it is gone they are
/// closed, and nothing stays open.
#[test]
fn parked_descriptors_close_once_the_other_library_is_gone() {
    assert!(honker::ofd_locks_active(), "this kernel has OFD locks");
    let lib = SystemSqlite::load();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    let conn = lib.open(&path);
    create_orders(&conn);
    assert_eq!(descriptors_on(&path), 1);
    let db = Database::open(&path).unwrap();
    // Every honker connection (writer, readers, checkpointer) shares one.
    db.query("SELECT count(*) FROM orders", []).unwrap();
    assert_eq!(descriptors_on(&path), 2);
    db.close().unwrap();
    drop(db);
    assert_eq!(
        descriptors_on(&path),
        2,
        "parked while the other library has the file open"
    );
    drop(conn);
    // The next open or close of honker's library sweeps the parked ones.
    let other = dir.path().join("other.db");
    Database::open(&other).unwrap().close().unwrap();
    assert_eq!(descriptors_on(&path), 0);
    // And honker reopens the file normally.
    let db = Database::open(&path).unwrap();
    db.queue("q")
        .unwrap()
        .enqueue(json!(1), &EnqueueOptions::default())
        .unwrap();
    db.close().unwrap();
    assert_eq!(descriptors_on(&path), 0);
    assert!(
        !path.with_file_name("app.db-wal").exists(),
        "the last close removes the WAL"
    );
}

/// A forked child closes the descriptors it inherited from honker's library:
/// they share the parent's open file descriptions, and would keep the
/// parent's locks alive after the parent died.
#[test]
fn a_forked_child_keeps_none_of_honkers_descriptors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    let db = Database::open(&path).unwrap();
    assert_eq!(descriptors_on(&path), 1);
    // SAFETY: the child only reads /proc and leaves with _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        let n = descriptors_on(&path);
        unsafe { libc::_exit(i32::try_from(n).unwrap_or(99)) };
    }
    let mut status = 0;
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(libc::WIFEXITED(status), "{status}");
    assert_eq!(
        libc::WEXITSTATUS(status),
        0,
        "descriptors left in the child"
    );
    db.close().unwrap();
}
