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
//!
//! Both leave a file in WAL mode (a `VACUUM INTO` copy is a rollback-journal
//! file, which `doctor` flags until honker opens it), and a restore never
//! rewinds the locks' fencing-token counter: the restored file's counter is
//! raised to the replaced file's, so a token granted before the restore and
//! kept outside the file (the point of fencing) is never granted again
//! (ADR 22: tokens only grow).

use std::ffi::{c_int, c_void};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::Connection;

use crate::error::{Error, ErrorKind, Result};
use crate::raw::Conn;
use crate::schema::LATEST;

/// How far a backup's copy is ([`backup_with_progress`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BackupProgress {
    /// Bytes written to the copy so far.
    pub written: u64,
    /// The source's size in bytes when the copy began (the copy is at most
    /// this size: `VACUUM INTO` leaves free pages out).
    pub total: u64,
}

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
    crate::inspect::open_read_only(path, Duration::from_secs(10))
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

/// Flushes the file at `path` to the disk. Opened for writing: Windows's
/// `FlushFileBuffers` refuses a handle without write access.
fn sync_file(path: &Path) -> Result<()> {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|f| f.sync_all())
        .map_err(|e| Error::invalid(format!("cannot sync {}: {e}", path.display())))
}

/// A temporary name next to `dest`, unique to this process.
fn temporary(dest: &Path) -> PathBuf {
    crate::inspect::with_suffix(dest, &format!(".honker-tmp-{}", std::process::id()))
}

/// Removes a temporary copy and the journal files SQLite may have left
/// beside it (a `VACUUM INTO` that failed on a full disk leaves its
/// `-journal`).
fn remove_temporary(tmp: &Path) {
    let _ = std::fs::remove_file(tmp);
    for s in ["-journal", "-wal", "-shm"] {
        let _ = std::fs::remove_file(crate::inspect::with_suffix(tmp, s));
    }
}

/// The locks' fencing-token counter of the database at `path`, if it is one
/// honker has used (read-only; `None` when there is no file or no counter).
fn token_counter(path: &Path) -> Option<i64> {
    if !path.is_file() {
        return None;
    }
    let c = open_read_only(path).ok()?;
    c.query_row(
        "SELECT token FROM _honker_lock_holders WHERE name = ''",
        [],
        |r| r.get(0),
    )
    .ok()
}

/// Makes the copy at `tmp` (no other connection has it) a WAL-mode file,
/// and raises its fencing-token counter to at least `floor`.
fn finish_copy(tmp: &Path, floor: Option<i64>) -> Result<()> {
    let c = Connection::open(tmp).map_err(sql_err)?;
    if let Some(floor) = floor {
        c.execute(
            "UPDATE _honker_lock_holders SET token = ?1 WHERE name = '' AND token < ?1",
            [floor],
        )
        .map_err(sql_err)?;
    }
    let mode: String = c
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .map_err(sql_err)?;
    // Closing the only connection checkpoints and removes `-wal`/`-shm`.
    c.close().map_err(|(_, e)| sql_err(e))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(Error::invalid(format!(
            "cannot put {} in WAL mode (journal mode {mode})",
            tmp.display()
        )));
    }
    Ok(())
}

/// Backs the database at `src` up into `dest` (see the module docs).
pub fn backup(src: impl AsRef<Path>, dest: impl AsRef<Path>, force: bool) -> Result<BackupReport> {
    backup_with_progress(src, dest, force, Duration::MAX, &mut |_| {})
}

/// [`backup`], calling `report` while the copy is written: when it begins,
/// at most every `every` from SQLite's progress callback (it sizes the
/// copy on disk), and once it is complete (`written == total`), before the
/// copy is checked.
pub fn backup_with_progress(
    src: impl AsRef<Path>,
    dest: impl AsRef<Path>,
    force: bool,
    every: Duration,
    report: &mut dyn FnMut(BackupProgress),
) -> Result<BackupReport> {
    let (src, dest) = (src.as_ref(), dest.as_ref());
    if dest.exists() && !force {
        return Err(Error::invalid(format!(
            "{} exists; pass --force to replace it",
            dest.display()
        )));
    }
    let tmp = temporary(dest);
    remove_temporary(&tmp);
    let result = (|| {
        let c = open_read_only(src)?;
        let text = tmp
            .to_str()
            .ok_or_else(|| Error::invalid("the destination path is not UTF-8"))?;
        let total: i64 = c
            .query_row(
                "SELECT page_count * page_size FROM pragma_page_count, pragma_page_size",
                [],
                |r| r.get(0),
            )
            .map_err(sql_err)?;
        let total = u64::try_from(total).unwrap_or(0);
        report(BackupProgress { written: 0, total });
        vacuum_into(&c, text, &tmp, total, every, report)?;
        drop(c);
        let done = std::fs::metadata(&tmp).map_or(0, |m| m.len());
        report(BackupProgress {
            written: done,
            total: done,
        });
        // Checked while still a rollback-journal file: a read-only
        // connection to a WAL file leaves `-wal`/`-shm` it cannot remove.
        let v = verify(&tmp)?;
        finish_copy(&tmp, None)?;
        sync_file(&tmp)?;
        put_in_place(&tmp, dest, v)
    })();
    if result.is_err() {
        remove_temporary(&tmp);
    }
    result
}

/// What SQLite's progress callback needs while `VACUUM INTO` runs.
struct Ticker<'a> {
    tmp: &'a Path,
    total: u64,
    every: Duration,
    last: Instant,
    report: &'a mut dyn FnMut(BackupProgress),
}

/// SQLite's progress callback: reports the copy's size on disk at most
/// every `every`. Never interrupts (returns 0).
unsafe extern "C" fn tick(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the `Ticker` that `vacuum_into` installed; it
    // outlives the statement, and the handler is removed before it is
    // dropped. SQLite calls this on the thread running the statement.
    let t = unsafe { &mut *arg.cast::<Ticker<'_>>() };
    if t.last.elapsed() >= t.every {
        t.last = Instant::now();
        let written = std::fs::metadata(t.tmp).map_or(0, |m| m.len());
        let progress = BackupProgress {
            written,
            total: t.total.max(written),
        };
        // A panic must not unwind into SQLite.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (t.report)(progress)));
    }
    0
}

/// `VACUUM INTO tmp` on `c`, reporting progress through [`tick`].
fn vacuum_into(
    c: &Connection,
    text: &str,
    tmp: &Path,
    total: u64,
    every: Duration,
    report: &mut dyn FnMut(BackupProgress),
) -> Result<()> {
    let mut ticker = Ticker {
        tmp,
        total,
        every,
        last: Instant::now(),
        report,
    };
    // SAFETY: the handle is `c`'s, open for this call; the callback's
    // argument (`ticker`) lives until the handler is removed below, on
    // every path.
    unsafe {
        libsqlite3_sys::sqlite3_progress_handler(
            c.handle(),
            10_000,
            Some(tick),
            std::ptr::from_mut(&mut ticker).cast(),
        );
    }
    let out = c.execute("VACUUM INTO ?1", [text]).map_err(sql_err);
    // SAFETY: as above; removes the handler before `ticker` is dropped.
    unsafe { libsqlite3_sys::sqlite3_progress_handler(c.handle(), 0, None, std::ptr::null_mut()) };
    out.map(|_| ())
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
    let floor = token_counter(dest);
    {
        let tmp = temporary(dest);
        remove_temporary(&tmp);
        let result = (|| {
            std::fs::copy(src, &tmp)
                .map_err(|e| Error::invalid(format!("cannot copy {}: {e}", src.display())))?;
            finish_copy(&tmp, floor)?;
            sync_file(&tmp)?;
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
            remove_temporary(&tmp);
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 53: a backup that failed on a full disk left its temporary
    /// copy's `-journal` behind, on every attempt; one left by an earlier
    /// attempt of the same pid would even be rolled into the next copy as a
    /// hot journal. Whatever SQLite leaves, a backup leaves nothing.
    #[test]
    fn a_failed_backup_leaves_no_temporary_files() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("app.db");
        crate::Database::open(&src).unwrap().close().unwrap();
        let dest = dir.path().join("copy.db");
        let tmp = temporary(&dest);
        for s in ["-journal", "-wal", "-shm"] {
            std::fs::write(
                crate::inspect::with_suffix(&tmp, s),
                b"left by a failed attempt",
            )
            .unwrap();
        }
        // A source that is not a database: the copy fails.
        let bad = dir.path().join("bad.db");
        std::fs::write(&bad, vec![7u8; 8192]).unwrap();
        backup(&bad, &dest, false).unwrap_err();
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|f| f.contains("honker-tmp") || f.starts_with("copy"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
        // A good backup after it is a WAL file with nothing beside it.
        backup(&src, &dest, false).unwrap();
        let c = Connection::open(&dest).unwrap();
        let mode: String = c
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
    }

    #[test]
    fn progress_is_reported_while_the_copy_grows_then_complete() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("app.db");
        let db = crate::Database::open(&src).unwrap();
        let q = db.queue("big").unwrap();
        let pad = "x".repeat(2000);
        let many: Vec<_> = (0..3000)
            .map(|n| serde_json::json!({ "n": n, "pad": pad }))
            .collect();
        q.enqueue_many(many, &Default::default()).unwrap();
        let mut seen = Vec::new();
        let dest = dir.path().join("copy.db");
        let r = backup_with_progress(&src, &dest, false, Duration::ZERO, &mut |p| seen.push(p))
            .unwrap();
        db.close().unwrap();
        assert!(r.bytes > 5_000_000, "{r:?}");
        assert_eq!(seen[0].written, 0);
        assert!(seen[0].total >= r.bytes, "{:?}", seen[0]);
        let last = *seen.last().unwrap();
        assert_eq!((last.written, last.total), (r.bytes, r.bytes));
        assert!(
            seen.windows(2).all(|w| w[0].written <= w[1].written),
            "{seen:?}"
        );
        let partial = seen
            .iter()
            .filter(|p| p.written > 0 && p.written < r.bytes)
            .count();
        assert!(
            partial > 0,
            "no report while the copy was written: {seen:?}"
        );
    }
}
