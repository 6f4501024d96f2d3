//! `open` names what is wrong with a path, before SQLite's "unable to open
//! database file" or a failure at the first write (issue 16 §2). Cases that
//! depend on permissions are in `open_permissions.rs` (run unprivileged).

use honker::{Database, ErrorKind};

fn refused(path: &std::path::Path) -> String {
    let err = Database::open(path).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    err.to_string()
}

#[test]
fn a_directory_is_named() {
    let dir = tempfile::tempdir().unwrap();
    assert!(refused(dir.path()).contains("it is a directory"));
}

#[test]
fn a_missing_directory_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("no-such-dir").join("app.db");
    let msg = refused(&path);
    assert!(msg.contains("no-such-dir does not exist"), "{msg}");
    assert!(!path.parent().unwrap().exists(), "nothing was created");
}

#[cfg(unix)]
#[test]
fn a_device_is_named() {
    let msg = refused(std::path::Path::new("/dev/null"));
    assert!(msg.contains("not a regular file"), "{msg}");
}

#[test]
fn a_relative_path_in_the_current_directory_opens() {
    let dir = tempfile::tempdir().unwrap();
    std::env::set_current_dir(dir.path()).unwrap();
    Database::open("app.db").unwrap().close().unwrap();
    assert!(dir.path().join("app.db").exists());
}
