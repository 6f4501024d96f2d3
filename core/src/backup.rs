//! Backups an operator can trust (`honker backup`, `honker restore`).
//!
//! A backup is `VACUUM INTO` a temporary name next to the destination, from
//! a read-only connection in one read transaction: a consistent snapshot of
//! everything committed before it began, which completes however busy
//! other processes keep the file (a step-wise backup restarts whenever
//! another connection writes). The copy is checked (`integrity_check`,
//! honker's schema version) before it is renamed into place; an existing
//! destination is refused unless `force`.
//!
//! A restore checks the source the same way, refuses while any process has
//! the database open (Linux: the kernel's lock table, as the importer), then
//! copies the source next to it, removes the database's `-wal` and `-shm`
//! (a stale WAL replayed onto the restored file would corrupt it) and
//! renames the copy into place.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::Connection;

use crate::error::{Error, ErrorKind, Result};
use crate::raw::Conn;
use crate::schema::LATEST;

/// What a backup or restore wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackupReport {
    /// The file written.
    pub path: PathBuf,
    /// Its size in bytes.
    pub bytes: u64,
    /// Its honker schema version.
    pub schema_version: i64,
}

fn sql_err(e: rusqlite::Error) -> Error {
    Error::from(e)
}

fn open_read_only(path: &Path) -> Result<Connection> {
    let c = crate::inspect::open_read_only(path)?;
    c.busy_timeout(Duration::from_secs(10)).map_err(sql_err)?;
    Ok(c)
}

/// Checks a copy: SQLite's `integrity_check`, and a honker schema this
/// build understands. Returns the schema version.
pub fn verify(path: impl AsRef<Path>) -> Result<i64> {
    let path = path.as_ref();
    let c = open_read_only(path)?;
    let problems: Vec<String> = c
        .prepare("PRAGMA integrity_check")
        .map_err(sql_err)?
        .query_map([], |r| r.get(0))
        .map_err(sql_err)?
        .collect::<rusqlite::Result<_>>()
        .map_err(sql_err)?;
    if problems != ["ok"] {
        return Err(Error::new(
            ErrorKind::Sqlite,
            format!(
                "{} fails SQLite's integrity check: {}",
                path.display(),
                problems.join("; ")
            ),
        ));
    }
    // SAFETY: `c` is open and used by this thread only while `raw` lives.
    let raw = unsafe { Conn::new(c.handle(), None) };
    let v = crate::schema::current_version(raw)?;
    if v > LATEST {
        return Err(Error::new(
            ErrorKind::SchemaTooNew,
            format!(
                "{} has honker schema version {v}; this build knows up to {LATEST}",
                path.display()
            ),
        ));
    }
    if v == 0 {
        return Err(Error::invalid(format!(
            "{} holds no honker schema",
            path.display()
        )));
    }
    Ok(v)
}

fn sync_dir(path: &Path) {
    if let Some(dir) = path.parent() {
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
}

/// A temporary name next to `dest`, unique to this process.
fn temporary(dest: &Path) -> PathBuf {
    crate::inspect::with_suffix(dest, &format!(".honker-tmp-{}", std::process::id()))
}

/// Backs the database at `src` up into `dest` (see the module docs).
pub fn backup(src: impl AsRef<Path>, dest: impl AsRef<Path>, force: bool) -> Result<BackupReport> {
    let (src, dest) = (src.as_ref(), dest.as_ref());
    if dest.exists() && !force {
        return Err(Error::invalid(format!(
            "{} exists; pass --force to replace it",
            dest.display()
        )));
    }
    let tmp = temporary(dest);
    let _ = std::fs::remove_file(&tmp);
    let result = (|| {
        let c = open_read_only(src)?;
        let text = tmp
            .to_str()
            .ok_or_else(|| Error::invalid("the destination path is not UTF-8"))?;
        c.execute("VACUUM INTO ?1", [text]).map_err(sql_err)?;
        drop(c);
        std::fs::File::open(&tmp)
            .and_then(|f| f.sync_all())
            .map_err(|e| Error::invalid(format!("cannot sync {}: {e}", tmp.display())))?;
        let v = verify(&tmp)?;
        put_in_place(&tmp, dest, v)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Renames the checked copy `tmp` over `dest` and syncs the directory.
fn put_in_place(tmp: &Path, dest: &Path, schema_version: i64) -> Result<BackupReport> {
    std::fs::rename(tmp, dest)
        .map_err(|e| Error::invalid(format!("cannot rename into {}: {e}", dest.display())))?;
    sync_dir(dest);
    Ok(BackupReport {
        path: dest.to_path_buf(),
        bytes: std::fs::metadata(dest).map(|m| m.len()).unwrap_or(0),
        schema_version,
    })
}

/// `UNSAFE` while another process has `dest` open.
#[cfg(target_os = "linux")]
fn refuse_if_held(dest: &Path) -> Result<()> {
    let holders = crate::import::others_holding(dest).map_err(|e| {
        Error::new(
            ErrorKind::Unsafe,
            format!(
                "cannot read /proc/locks to check who has {} open: {e}",
                dest.display()
            ),
        )
    })?;
    if holders.is_empty() {
        return Ok(());
    }
    Err(Error::new(
        ErrorKind::Unsafe,
        format!(
            "{} is open in another process: {}; stop every process using it and restore \
             again. Nothing was changed",
            dest.display(),
            holders.join("; ")
        ),
    ))
}

/// `UNSAFE`: this platform cannot tell.
#[cfg(not(target_os = "linux"))]
fn refuse_if_held(_dest: &Path) -> Result<()> {
    Err(Error::new(
        ErrorKind::Unsafe,
        "honker cannot see other processes' locks on this platform; restore by hand with \
         every process stopped",
    ))
}

/// Replaces the database at `dest` with the backup at `src` (see the
/// module docs).
pub fn restore(src: impl AsRef<Path>, dest: impl AsRef<Path>) -> Result<BackupReport> {
    let (src, dest) = (src.as_ref(), dest.as_ref());
    let v = verify(src)?;
    refuse_if_held(dest)?;
    {
        let tmp = temporary(dest);
        let result = (|| {
            std::fs::copy(src, &tmp)
                .and_then(|_| std::fs::File::open(&tmp)?.sync_all())
                .map_err(|e| Error::invalid(format!("cannot copy {}: {e}", src.display())))?;
            for s in ["-wal", "-shm", "-journal"] {
                let p = crate::inspect::with_suffix(dest, s);
                match std::fs::remove_file(&p) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => {
                        return Err(Error::invalid(format!(
                            "cannot remove {}: {e}",
                            p.display()
                        )))
                    }
                }
            }
            put_in_place(&tmp, dest, v)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result
    }
}
