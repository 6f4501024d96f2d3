//! On a kernel without open-file-description locks (forced here with
//! `HONKER_TEST_NO_OFD_LOCKS`, read once at the first open of the process, so
//! this is the only test in its binary), honker cannot be kept apart from a
//! second SQLite library in the process: `Database::open` refuses a file that
//! library already has open with `UNSAFE`, and opens it normally otherwise
//! (ADR 13).

// Not in a musl build: its test binaries are static and cannot load the
// system's libsqlite3 (glibc's) as the second library (ADR 30).
#![cfg(all(feature = "bundled", target_os = "linux", not(target_env = "musl")))]

#[path = "common/system_sqlite.rs"]
mod system_sqlite;

use honker::{Database, EnqueueOptions, ErrorKind};
use serde_json::json;

#[test]
fn open_refuses_a_file_another_library_has_open() {
    // SAFETY: no other thread of this test binary reads the environment.
    unsafe { std::env::set_var("HONKER_TEST_NO_OFD_LOCKS", "1") };
    let lib = system_sqlite::SystemSqlite::load();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");

    // Alone, and twice in one process (one library): opens normally.
    let db = Database::open(&path).unwrap();
    assert!(!honker::ofd_locks_active());
    let again = Database::open(&path).unwrap();
    again
        .queue("q")
        .unwrap()
        .enqueue(json!(1), &EnqueueOptions::default())
        .unwrap();
    again.close().unwrap();
    db.close().unwrap();

    // The other library has it open: refused before anything is written.
    let conn = lib.open(&path);
    conn.exec("SELECT 1").unwrap();
    let err = Database::open(&path).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unsafe, "{err}");
    assert!(err.to_string().contains("libhonker_ext"), "{err}");
    assert_eq!(
        conn.exec("SELECT count(*) FROM _honker_jobs").unwrap(),
        ["1"]
    );
    drop(conn);

    // Gone again: opens.
    let db = Database::open(&path).unwrap();
    db.queue("q")
        .unwrap()
        .enqueue(json!(2), &EnqueueOptions::default())
        .unwrap();
    db.close().unwrap();
}
