//! The WAL stays whole around the writer's transactions: what other
//! connections see, what a crash right after a commit recovers, and the two
//! paths that once corrupted files (issue 13 §1 and §2):
//!
//! - a transaction bigger than the page cache spills frames, then rolls back;
//!   another writer commits before honker writes again;
//! - a spill write fails with ENOSPC inside a statement that has a statement
//!   journal; the application catches the error and commits.
//!
//! After each, every commit that returned OK is there, nothing else is, and
//! `integrity_check` is ok, in this process and in a fresh one.

mod common;

use std::path::Path;

use common::{assert_integrity, count, fill, Tmpfs};
use honker::rusqlite::Connection;
use honker::{Database, EnqueueOptions, ErrorKind};
use serde_json::json;

/// Another connection on the file, as another library or process would open it.
fn plain(path: &Path) -> Connection {
    Connection::open(path).unwrap()
}

/// The file at `path` alone (after its last close), checked whole, holding
/// `rows` rows in `t`.
fn assert_recovered(path: &Path, rows: i64) {
    let after = plain(path);
    plain_integrity(&after);
    let n: i64 = after
        .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, rows);
}

fn plain_integrity(c: &Connection) {
    let ok: String = c
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok");
}

/// A new honker file in a temp dir with table `t (id INTEGER PRIMARY KEY, v
/// <v_type>)`.
fn with_table(v_type: &str) -> (tempfile::TempDir, std::path::PathBuf, Database) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.db");
    let db = Database::open(&path).unwrap();
    db.execute(
        &format!("CREATE TABLE t (id INTEGER PRIMARY KEY, v {v_type})"),
        [],
    )
    .unwrap();
    (dir, path, db)
}

/// Every commit is in the file before any other connection can see it.
#[test]
fn other_connections_read_every_commit_at_once() {
    let (_dir, path, db) = with_table("TEXT");
    let other = plain(&path);
    for i in 0..300_i64 {
        let v = format!("{i}-{}", "y".repeat((i as usize * 37) % 3_000));
        db.execute("INSERT INTO t (id, v) VALUES (?1, ?2)", (i, &v))
            .unwrap();
        let got: String = other
            .query_row("SELECT v FROM t WHERE id = ?1", [i], |r| r.get(0))
            .unwrap();
        assert_eq!(got, v);
    }
    plain_integrity(&other);
}

/// A transaction bigger than the page cache spills frames before its
/// commit, overwrites some and rewrites their checksums at commit; a copy of
/// the files taken right after the commit (a crash now) recovers all of it.
#[test]
fn a_spilled_and_rewritten_transaction_recovers_whole_after_a_crash() {
    let (dir, path, db) = with_table("BLOB");
    db.execute("PRAGMA cache_size = 8", []).unwrap();
    let tx = db.transaction().unwrap();
    for i in 0..400_i64 {
        tx.execute("INSERT INTO t (id, v) VALUES (?1, zeroblob(900))", [i])
            .unwrap();
    }
    for i in 0..400_i64 {
        tx.execute("UPDATE t SET v = randomblob(900) WHERE id = ?1", [i])
            .unwrap();
    }
    tx.commit().unwrap();
    let sum = |c: &Connection| -> (i64, String) {
        c.query_row(
            "SELECT count(*), group_concat(hex(substr(v, 1, 8)) || hex(substr(v, -8)), ',') \
             FROM (SELECT v FROM t ORDER BY id)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap()
    };
    let live = sum(&plain(&path));
    assert_eq!(live.0, 400);
    // Copy in another process: closing a descriptor on the file here would
    // drop this process's locks on it.
    let copy = dir.path().join("copy");
    std::fs::create_dir(&copy).unwrap();
    #[cfg(unix)]
    {
        let status = std::process::Command::new("cp")
            .arg(&path)
            .arg(dir.path().join("a.db-wal"))
            .arg(&copy)
            .status()
            .unwrap();
        assert!(status.success());
    }
    // Windows has no POSIX locks to drop: a copy in this process.
    #[cfg(not(unix))]
    for name in ["a.db", "a.db-wal"] {
        std::fs::copy(dir.path().join(name), copy.join(name)).unwrap();
    }
    let recovered = plain(&copy.join("a.db"));
    assert_eq!(sum(&recovered), live);
    plain_integrity(&recovered);
}

/// §1: the first transaction after open spills a few MB and rolls back;
/// another writer (here a plain connection, as the stdlib module or another
/// process would be) commits; then honker writes again. The other writer's
/// commits and honker's next one must all be there, the file whole.
#[test]
fn a_spilled_rollback_never_overwrites_another_writers_commits() {
    for rows in [600_i64, 2_500, 6_000] {
        let (_dir, path, setup) = with_table("BLOB");
        setup.close().unwrap();
        // The first write transaction after open, as reported.
        let db = Database::open(&path).unwrap();
        let q = db.queue("q").unwrap();
        let tx = db.transaction().unwrap();
        for i in 0..rows {
            tx.execute("INSERT INTO t (id, v) VALUES (?1, randomblob(1000))", [i])
                .unwrap();
        }
        tx.rollback().unwrap();

        let other = plain(&path);
        for i in 0..30_i64 {
            other
                .execute(
                    "INSERT INTO t (id, v) VALUES (?1, randomblob(200))",
                    [1_000_000 + i],
                )
                .unwrap();
        }
        q.enqueue(json!({"after": "rollback"}), &EnqueueOptions::default())
            .unwrap();

        assert_eq!(count(&db, "t"), 30, "{rows} rows rolled back");
        assert_eq!(count(&db, "_honker_jobs"), 1);
        assert_integrity(&db);
        plain_integrity(&other);
        drop(other);
        db.close().unwrap();
        // The files alone, after the close-time checkpoint.
        assert_recovered(&path, 30);
    }
}

/// §2: a spill write fails (disk full) inside a statement with a statement
/// journal; the application catches the error, space comes back, it goes on
/// and commits. Either the commit fails and nothing of the transaction
/// exists, or it succeeds and all of what the application kept does; the
/// file is whole either way, now and after a reopen.
///
/// Two sizes: the reproduction (an UPDATE of 3 KB values, which met
/// the buffered frames' late write error) and one whose new overflow pages
/// meet the full disk themselves.
#[test]
fn a_failed_spill_write_never_commits_frames_that_were_not_written() {
    let mut met_full_disk = false;
    for update_bytes in [3_000, 9_000] {
        let Some(fs) = Tmpfs::mount("8m") else { return };
        met_full_disk |= full_disk_mid_transaction(fs.path(), update_bytes);
    }
    // The scenario must really have met the full disk.
    assert!(met_full_disk, "no UPDATE met the full disk");
}

/// The tmpfs these tests mount is unmounted even while something still
/// holds it (a connection or child a test leaked): a mount left behind made
/// the test command's temp dir impossible to remove on a new machine.
#[test]
fn a_tmpfs_still_held_is_unmounted_and_removed() {
    let Some(fs) = Tmpfs::mount("1m") else { return };
    let dir = fs.path().to_path_buf();
    let held = std::fs::File::create(dir.join("held")).unwrap();
    let mounted = |d: &Path| {
        std::fs::read_to_string("/proc/self/mounts")
            .unwrap()
            .lines()
            .any(|l| l.split(' ').nth(1) == d.to_str())
    };
    assert!(mounted(&dir));
    drop(fs);
    assert!(!mounted(&dir), "{} is still mounted", dir.display());
    assert!(!dir.exists(), "{} was not removed", dir.display());
    drop(held);
}

/// Runs the scenario in `dir`; returns whether the UPDATE failed.
fn full_disk_mid_transaction(dir: &Path, update_bytes: i64) -> bool {
    let path = dir.join("a.db");
    let db = Database::open(&path).unwrap();
    db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)", [])
        .unwrap();
    db.execute("INSERT INTO t (id, v) VALUES (0, 'committed before')", [])
        .unwrap();
    db.execute("PRAGMA cache_size = 10", []).unwrap();
    let tx = db.transaction().unwrap();
    for i in 1..=80_i64 {
        tx.execute("INSERT INTO t (id, v) VALUES (?1, randomblob(3000))", [i])
            .unwrap();
    }
    let filler = fill(dir);
    // A multi-row UPDATE: it has a statement journal, so SQLite rolls back
    // only this statement on SQLITE_FULL, if the write error reaches it.
    let update = tx.execute(
        "UPDATE t SET v = randomblob(?1) WHERE id < 10",
        [update_bytes],
    );
    if let Err(e) = &update {
        assert!(
            matches!(e.kind(), ErrorKind::Sqlite | ErrorKind::RolledBack),
            "{e}"
        );
    }
    std::fs::remove_file(&filler).unwrap();
    let later = tx.execute("INSERT INTO t (id, v) VALUES (1000, 'later')", []);
    let committed = match later {
        Ok(_) => tx.commit().is_ok(),
        Err(e) => {
            // The transaction is dead (ROLLED_BACK) or the application gives
            // up on it: either way nothing of it may persist.
            assert_eq!(e.kind(), ErrorKind::RolledBack, "{e}");
            tx.rollback().unwrap();
            false
        }
    };
    let expect_rows = if committed { 82 } else { 1 };
    assert_eq!(count(&db, "t"), expect_rows, "committed: {committed}");
    assert_integrity(&db);
    db.close().unwrap();
    assert_recovered(&path, expect_rows);
    update.is_err()
}
