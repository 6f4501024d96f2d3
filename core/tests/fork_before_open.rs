//! A process forked while it had nothing of honker open (no database, no
//! honker thread) opens files normally: the fork refusal is about inherited
//! state, not about being a child. Alone in its test binary, so no other
//! test has a database open at the moment of the fork.

#![cfg(unix)]

mod common;

use honker::{Database, EnqueueOptions};
use serde_json::json;

#[test]
fn a_child_forked_with_nothing_open_opens_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.db");
    // Opened and closed before the fork: nothing is live any more.
    let db = Database::open(&path).unwrap();
    db.close().unwrap();
    drop(db);
    // SAFETY: the child uses honker and leaves with _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        let ok = (|| -> honker::Result<()> {
            let db = Database::open(&path)?;
            db.queue("q")?
                .enqueue(json!("from the child"), &EnqueueOptions::default())?;
            db.close()
        })();
        unsafe { libc::_exit(i32::from(ok.is_err() || honker::forked_while_open())) };
    }
    let mut status = 0;
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{status}"
    );
    let db = Database::open(&path).unwrap();
    assert_eq!(common::count(&db, "_honker_jobs"), 1);
}
