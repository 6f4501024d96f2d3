//! What `open` and the read-only inspection ask of the file system before
//! SQLite opens anything (DESIGN §6: only `stat`/`access`, nothing opened),
//! per platform, and the URI that opens a file read-only and immutable.
//!
//! On Unix `access(2)` answers for this process's user, groups and mode
//! bits. Windows has no such call: a file's read-only attribute is the one
//! thing readable without opening it, and a directory's attributes say
//! nothing about whether files can be created in it (its ACL decides, which
//! only an open tells). There a writable-directory check answers yes and
//! SQLite's own error ("unable to open database file") stands instead
//! (ADR 30).

use std::path::Path;

/// Whether this process may read and write the existing file `path`.
pub(crate) fn may_read_write(path: &Path) -> bool {
    #[cfg(unix)]
    return unix::access(path, libc::R_OK | libc::W_OK);
    #[cfg(not(unix))]
    return std::fs::metadata(path).is_ok_and(|m| !m.permissions().readonly());
}

/// Whether this process may create files in the directory `dir`.
pub fn may_create_in(dir: &Path) -> bool {
    #[cfg(unix)]
    return unix::access(dir, libc::W_OK | libc::X_OK);
    #[cfg(not(unix))]
    return dir.is_dir();
}

/// The directory a database file's `-wal` and `-shm` go in.
pub fn dir_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// `file:PATH?immutable=1`, with the bytes a URI gives meaning to (and every
/// non-ASCII byte of the path's UTF-8, or on Unix its raw bytes) escaped.
/// On Windows the separators become `/` and an absolute path is written as
/// SQLite's Windows VFS reads one (`file:///C:/dir/app.db`,
/// `file:////server/share/app.db`).
pub fn immutable_uri(path: &Path) -> String {
    #[cfg(unix)]
    let (bytes, prefix) = {
        use std::os::unix::ffi::OsStrExt;
        (path.as_os_str().as_bytes().to_vec(), "file:")
    };
    #[cfg(not(unix))]
    let (bytes, prefix) = {
        let text = path.to_string_lossy().replace('\\', "/");
        let b = text.as_bytes();
        let drive = b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':';
        let prefix = if drive {
            "file:///"
        } else if text.starts_with("//") {
            "file://"
        } else {
            "file:"
        };
        (text.into_bytes(), prefix)
    };
    let mut uri = String::from(prefix);
    for b in bytes {
        match b {
            b'?' | b'#' | b'%' | 0x80..=0xff => uri += &format!("%{b:02X}"),
            _ => uri.push(char::from(b)),
        }
    }
    uri + "?immutable=1"
}

#[cfg(unix)]
mod unix {
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;

    pub(super) fn access(p: &Path, mode: libc::c_int) -> bool {
        let Ok(c) = std::ffi::CString::new(p.as_os_str().as_bytes()) else {
            return false;
        };
        // SAFETY: `c` is a NUL-terminated path that outlives the call.
        unsafe { libc::access(c.as_ptr(), mode) == 0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uri_escapes_what_sqlite_reads() {
        let uri = immutable_uri(Path::new("dir/a?b#c%d é.db"));
        assert_eq!(uri, "file:dir/a%3Fb%23c%25d %C3%A9.db?immutable=1");
    }

    #[cfg(windows)]
    #[test]
    fn windows_paths_become_sqlite_uris() {
        assert_eq!(
            immutable_uri(Path::new(r"C:\data\app.db")),
            "file:///C:/data/app.db?immutable=1"
        );
        assert_eq!(
            immutable_uri(Path::new(r"\\host\share\app.db")),
            "file:////host/share/app.db?immutable=1"
        );
    }

    /// SQLite's Windows VFS opens what `immutable_uri` writes for an
    /// absolute path with non-ASCII characters.
    #[cfg(windows)]
    #[test]
    fn sqlite_opens_the_uri_of_an_absolute_windows_path() {
        use rusqlite::{Connection, OpenFlags};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("é #1.db");
        let c = Connection::open(&path).unwrap();
        c.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (42);")
            .unwrap();
        drop(c);
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI;
        let c = Connection::open_with_flags(immutable_uri(&path), flags).unwrap();
        let x: i64 = c.query_row("SELECT x FROM t", [], |r| r.get(0)).unwrap();
        assert_eq!(x, 42);
    }
}
