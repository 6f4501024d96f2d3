//! `open` as an unprivileged user (DESIGN §10: CI runs as root, which
//! bypasses file permissions): a read-only file and an unwritable directory
//! are named at `open`. The test forks and drops to `nobody` in the child;
//! alone in its binary, so nothing of honker is open at the fork. Needs root
//! to switch users: skipped otherwise, except in CI, where it must run.

#![cfg(target_os = "linux")]

use std::io::{Read, Write};
use std::os::fd::FromRawFd;
use std::os::unix::fs::PermissionsExt;

use honker::Database;

#[test]
fn a_read_only_file_and_an_unwritable_directory_are_named_at_open() {
    if unsafe { libc::geteuid() } != 0 {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs this test as root"
        );
        eprintln!("skipped: needs root to run the child as nobody");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // A database nobody may read but not write (root's, mode 0644), in a
    // directory nobody cannot write.
    let file = dir.path().join("ro.db");
    Database::open(&file).unwrap().close().unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let new_file = dir.path().join("new.db");
    // A database nobody may write, with its -wal and -shm present and
    // writable, in the same unwritable directory: that one works.
    let shared = dir.path().join("shared.db");
    Database::open(&shared).unwrap().close().unwrap();
    for f in ["shared.db", "shared.db-wal", "shared.db-shm"] {
        let p = dir.path().join(f);
        // The closer removed the WAL and shm files: SQLite accepts empty ones.
        if !p.exists() {
            std::fs::File::create(&p).unwrap();
        }
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o666)).unwrap();
    }
    let mut fds = [0; 2];
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: the child drops privileges, opens, reports through the pipe
    // and leaves with _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        unsafe {
            libc::close(fds[0]);
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setgid(65534) != 0
                || libc::setuid(65534) != 0
            {
                libc::_exit(3);
            }
        }
        let mut out = unsafe { std::fs::File::from_raw_fd(fds[1]) };
        for p in [&file, &new_file, &shared] {
            let line = match Database::open(p).and_then(|db| {
                db.queue("q")?
                    .enqueue(serde_json::json!("from nobody"), &Default::default())?;
                db.close()
            }) {
                Ok(()) => "opened and wrote".to_string(),
                Err(e) => e.to_string(),
            };
            let _ = writeln!(out, "{line}");
        }
        drop(out);
        unsafe { libc::_exit(0) };
    }
    unsafe { libc::close(fds[1]) };
    let mut text = String::new();
    unsafe { std::fs::File::from_raw_fd(fds[0]) }
        .read_to_string(&mut text)
        .unwrap();
    let mut status = 0;
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{status}"
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert_eq!(lines[2], "opened and wrote", "{text}");
    let db = Database::open(&shared).unwrap();
    let n = db.query("SELECT count(*) FROM _honker_jobs", []).unwrap();
    assert_eq!(format!("{:?}", n.rows), "[[Integer(1)]]");
    db.close().unwrap();
    assert!(lines[0].starts_with("INVALID_ARGUMENT: "), "{}", lines[0]);
    assert!(
        lines[0].contains("the file is read-only for this process"),
        "{}",
        lines[0]
    );
    assert!(lines[1].starts_with("INVALID_ARGUMENT: "), "{}", lines[1]);
    assert!(
        lines[1].contains("is not writable by this process"),
        "{}",
        lines[1]
    );
    assert!(!new_file.exists(), "nothing was created");
}
