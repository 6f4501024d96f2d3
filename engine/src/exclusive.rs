//! Two SQLite libraries in one process where there are no open-file-
//! description locks (macOS, and the other Unixes): `open` refuses a file
//! that another descriptor of this process has open (ADR 30).
//!
//! On Linux honker's lock layer keeps its bundled SQLite apart from another
//! library in the process (ADR 13, `ofd.rs`). Elsewhere on Unix POSIX locks
//! belong to the process: the other library's close would drop honker's
//! locks and the two would not exclude each other. So honker's bundled
//! SQLite opens a file only when no descriptor of the process refers to it
//! already, the rule Linux applies on kernels without OFD locks
//! (`ofd::check_exclusive`). Descriptors are listed from `/dev/fd` (macOS's
//! fdescfs, Linux's procfs link) with `fstat`: nothing is opened. A file
//! honker itself has open already (another `Database` on it) was checked
//! at that first open. A library that opens the file *after* honker is not
//! seen (and not safe): docs/orm.md says to keep honker's worker in its own
//! process there, or to use the extension on the other library's connection.
//! Windows needs none of this: its locks belong to the file handle.

use std::path::Path;

use crate::error::{Error, ErrorKind, Result};

/// Whether a descriptor of this process refers to the file `(dev, ino)`.
fn held(dev: u64, ino: u64) -> bool {
    let fds: Vec<i32> = match std::fs::read_dir("/dev/fd") {
        Ok(dir) => dir
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect(),
        // No /dev/fd: the low descriptors, where a library's files are.
        Err(_) => (0..4096).collect(),
    };
    fds.into_iter().any(|fd| {
        // SAFETY: fstat on any integer only reads; a closed one fails.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        #[allow(clippy::unnecessary_cast)]
        let same = unsafe { libc::fstat(fd, &mut st) } == 0
            && st.st_dev as u64 == dev
            && st.st_ino as u64 == ino;
        same
    })
}

/// `UNSAFE` when another descriptor of this process has the file at `path`
/// open and honker does not (called by `open` before SQLite opens it).
pub(crate) fn check(path: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(()); // not there yet: nobody has it open
    };
    if let Ok(canonical) = std::fs::canonicalize(path) {
        if crate::watcher::open_in_this_process(&canonical) {
            return Ok(());
        }
    }
    if !held(meta.dev(), meta.ino()) {
        return Ok(());
    }
    Err(Error::new(
        ErrorKind::Unsafe,
        format!(
            "{} is open through another SQLite library in this process, and this platform \
             has no open-file-description locks to keep the two apart (POSIX locks belong \
             to the process: one library's close drops the other's): run honker in another \
             process, or load libhonker_ext into that library's connection and use honker's \
             SQL functions there (docs/orm.md)",
            path.display()
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_descriptor_of_another_library_is_seen_and_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("app.db");
        std::fs::write(&path, b"").unwrap();
        check(&path).unwrap();
        // Another library's descriptor, as a plain open stands in for one.
        let other = std::fs::File::open(&path).unwrap();
        let err = check(&path).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unsafe, "{err}");
        assert!(err.to_string().contains("another SQLite library"), "{err}");
        drop(other);
        check(&path).unwrap();
    }

    #[test]
    fn honkers_own_open_is_not_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("app.db");
        let db = crate::database::open_plain(&path);
        // honker's own connections have it open: the first open checked.
        check(&path).unwrap();
        drop(db);
        check(&path).unwrap();
    }

    #[test]
    fn a_missing_file_is_nobodys() {
        let dir = tempfile::tempdir().unwrap();
        check(&dir.path().join("new.db")).unwrap();
    }
}
