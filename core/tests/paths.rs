//! Paths users have: non-ASCII characters and spaces in directory and file
//! names, and on Windows backslashes, drive letters and the read-only
//! attribute (issue 54). Everything that takes a path: open, the queue,
//! read-only inspection, backup and restore.

use honker::{Database, EnqueueOptions};
use serde_json::json;

fn round_trip(path: &std::path::Path) {
    let db = Database::open(path).unwrap();
    let q = db.queue("mails").unwrap();
    q.enqueue(json!({"to": "zoë"}), &EnqueueOptions::default())
        .unwrap();
    let job = q.claim("w", 1).unwrap().pop().expect("the job");
    assert_eq!(job.payload.as_json().unwrap(), json!({"to": "zoë"}));
    job.ack().unwrap();
    q.enqueue(json!("second"), &EnqueueOptions::default())
        .unwrap();
    let status = honker::inspect::status(path, 0).unwrap();
    assert_eq!(status.queues.len(), 1, "{status:?}");
    assert_eq!(status.queues[0].name, "mails");
    let rows = honker::inspect::jobs(path, Some("mails"), None, 10, 0).unwrap();
    assert_eq!(rows.len(), 1, "the acked job is gone, the second waits");
    drop(db);
}

#[test]
fn non_ascii_and_spaces_in_every_part_of_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("données d'été").join("日本語 dir");
    std::fs::create_dir_all(&sub).unwrap();
    let path = sub.join("app é #1.db");
    round_trip(&path);
    let copy = sub.join("копия.db");
    let report = honker::backup::backup(&path, &copy, false).unwrap();
    assert_eq!(report.path, copy);
    let rows = honker::inspect::jobs(&copy, Some("mails"), None, 10, 0).unwrap();
    assert_eq!(rows.len(), 1, "the backup holds the waiting job");
}

#[cfg(windows)]
#[test]
fn backslashes_and_a_drive_letter() {
    let dir = tempfile::tempdir().unwrap();
    let abs = dir.path().canonicalize().unwrap();
    // canonicalize gives \\?\C:\...; users write C:\... with backslashes.
    let text = abs
        .to_string_lossy()
        .trim_start_matches(r"\\?\")
        .to_string();
    assert!(text.as_bytes()[1] == b':' && text.contains('\\'), "{text}");
    let path = std::path::PathBuf::from(format!(r"{text}\sub dir\app.db"));
    std::fs::create_dir(path.parent().unwrap()).unwrap();
    round_trip(&path);
}

#[cfg(windows)]
#[test]
fn a_read_only_file_is_named_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    drop(Database::open(&path).unwrap());
    let before = std::fs::read(&path).unwrap();
    let mut perms = std::fs::metadata(&path).unwrap().permissions();
    perms.set_readonly(true);
    std::fs::set_permissions(&path, perms).unwrap();
    let err = Database::open(&path).unwrap_err();
    assert_eq!(err.kind(), honker::ErrorKind::InvalidArgument, "{err}");
    assert!(
        err.to_string().contains("read-only for this process"),
        "{err}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), before, "nothing was written");
}

/// doctor says what it cannot check where there is no /proc (ADR 30).
#[cfg(not(target_os = "linux"))]
#[test]
fn doctor_names_what_it_cannot_check_here() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    drop(Database::open(&path).unwrap());
    let checks = honker::doctor::diagnose(&path, 0).unwrap();
    for name in ["file system", "processes", "SQLite libraries"] {
        let c = checks
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("{name}: {checks:?}"));
        assert!(c.detail.contains("not checked on this platform"), "{c:?}");
    }
}
