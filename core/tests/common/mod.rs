//! Shared helpers for the integration tests: a temp database per test, driven
//! by a manual clock.

#![allow(dead_code)] // each test binary uses a different subset

pub mod child;

use std::path::PathBuf;
use std::sync::Arc;

use honker::{Database, ManualClock, Options, Value};
use tempfile::TempDir;

pub struct TestDb {
    pub db: Database,
    pub clock: ManualClock,
    pub path: PathBuf,
    _dir: TempDir,
}

/// Polls `f` every 2 ms until it holds; fails the test after `timeout`.
pub fn wait_until(what: &str, timeout: std::time::Duration, mut f: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + timeout;
    while !f() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// A fresh database in its own temp dir, on a manual clock.
pub fn test_db() -> TestDb {
    test_db_with(Options::default())
}

pub fn test_db_with(mut options: Options) -> TestDb {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("test.db");
    let clock = ManualClock::new(1_700_000_000_000);
    options.clock = Arc::new(clock.clone());
    let db = Database::open_with(&path, options).expect("open");
    TestDb {
        db,
        clock,
        path,
        _dir: dir,
    }
}

impl TestDb {
    /// Another, independent open of the same file (as another process would).
    pub fn reopen(&self) -> Database {
        let options = Options {
            clock: Arc::new(self.clock.clone()),
            ..Options::default()
        };
        Database::open_with(&self.path, options).expect("reopen")
    }

    /// Row count of one of honker's tables (or any table).
    pub fn count(&self, sql_from_where: &str) -> i64 {
        count(&self.db, sql_from_where)
    }

    /// See [`snapshot`].
    pub fn snapshot(&self) -> String {
        snapshot(&self.db)
    }
}

/// `SELECT count(*) FROM {sql_from_where}`.
pub fn count(db: &Database, sql_from_where: &str) -> i64 {
    match scalar(db, &format!("SELECT count(*) FROM {sql_from_where}")) {
        Value::Integer(n) => n,
        v => panic!("count returned {v:?}"),
    }
}

/// A digest of every honker table's contents, to prove that a failed call
/// changed nothing.
pub fn snapshot(db: &Database) -> String {
    let mut out = String::new();
    for t in [
        "_honker_jobs",
        "_honker_finished",
        "_honker_results",
        "_honker_streams",
        "_honker_stream_events",
        "_honker_stream_offsets",
        "_honker_stream_publish_keys",
        "_honker_unique",
    ] {
        let rows = db
            .query(&format!("SELECT * FROM {t} ORDER BY 1"), [])
            .expect("snapshot");
        out.push_str(&format!("{t}: {:?}\n", rows.rows));
    }
    out
}

pub fn json(v: serde_json::Value) -> honker::Payload {
    honker::Payload::from(v)
}

/// The first column of the first row of a read-only query.
pub fn scalar(db: &Database, sql: &str) -> Value {
    db.query(sql, []).expect("query").rows.remove(0).remove(0)
}

/// `PRAGMA integrity_check` says ok.
pub fn assert_integrity(db: &Database) {
    assert_eq!(
        scalar(db, "PRAGMA integrity_check"),
        Value::Text("ok".into())
    );
}

/// Mounts a tmpfs of `size` at a new directory; unmounts on drop.
pub struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// `None` when this process may not mount (not root): the caller skips,
    /// except under CI, which runs as root and must not skip.
    pub fn mount(size: &str) -> Option<Tmpfs> {
        // A full disk is made with Linux's tmpfs: elsewhere (Windows under
        // Wine) these cases are Linux's only (ADR 30).
        if !cfg!(target_os = "linux") {
            eprintln!("skipped: a small tmpfs is Linux's");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if !ok {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must run the tmpfs tests (as root)"
            );
            eprintln!("skipped: mounting a tmpfs needs root");
            return None;
        }
        Some(Tmpfs { dir })
    }

    pub fn path(&self) -> &std::path::Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    /// Unmounts even when something still holds the file system (a
    /// connection or child process the test leaked, or one still closing):
    /// a few tries, then a lazy unmount, which detaches it now and frees it
    /// when the last holder lets go. A mount left behind would make the temp
    /// directory impossible to remove (scripts/test.sh fails on one).
    fn drop(&mut self) {
        let umount = |lazy: bool| {
            let mut c = std::process::Command::new("umount");
            if lazy {
                c.arg("-l");
            }
            c.arg(self.dir.path())
                .stderr(std::process::Stdio::null())
                .status()
                .map(|s| s.success())
                .unwrap_or(false)
        };
        for _ in 0..5 {
            if umount(false) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        if !umount(true) {
            eprintln!(
                "could not unmount the tmpfs at {}",
                self.dir.path().display()
            );
        }
    }
}

/// Fills the file system under `dir` with one file until a write fails.
pub fn fill(dir: &std::path::Path) -> std::path::PathBuf {
    use std::io::Write;
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).unwrap();
    let block = vec![7_u8; 64 * 1024];
    while f.write_all(&block).is_ok() {}
    let small = [7_u8; 512];
    while f.write_all(&small).is_ok() {}
    let _ = f.sync_all();
    path
}

/// Publish options with a key (events of one key go to a group's members in
/// order, one at a time).
pub fn keyed(k: &str) -> honker::stream::PublishOptions {
    honker::stream::PublishOptions {
        key: Some(k.into()),
        ..honker::stream::PublishOptions::default()
    }
}

/// The code an SQL function's error carries in its message (errors through
/// honker's own connection come back as `Sqlite`, "CODE: message").
pub fn code(e: &honker::Error) -> &str {
    e.message().split(':').next().unwrap_or("")
}

/// The one value of `q`, run in a write transaction of honker's own
/// connection (where the SQL functions that write are registered).
pub fn sql(db: &Database, q: &str) -> Value {
    let tx = db.transaction().unwrap();
    let v = tx.query(q, []).unwrap().rows.remove(0).remove(0);
    tx.commit().unwrap();
    v
}
