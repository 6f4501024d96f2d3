//! Which other processes have a database file open, read from the kernel's
//! lock table (`/proc/locks`) without opening the file: opening and closing
//! a descriptor of it would drop this process's POSIX locks on it (the
//! hazard ADR 13 is about).
//!
//! Every SQLite connection in WAL mode holds a shared lock on the `-shm`
//! file's DMS byte for as long as it is open, idle or not; a connection in
//! a transaction also locks the database file. Honker always uses WAL, so
//! a running Honker process shows up here; a connection in rollback-journal
//! mode that is idle holds no lock and cannot be seen.
//!
//! Locks of this process are not counted: POSIX locks carry its pid; its
//! open-file-description locks (honker's own connections, ADR 13) are
//! listed in `/proc/self/fdinfo`.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// A process that has the file open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    /// Its pid, when the kernel says (open-file-description locks carry
    /// none).
    pub pid: Option<i32>,
    /// Its command line, when readable.
    pub command: Option<String>,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.pid, &self.command) {
            (Some(p), Some(c)) => write!(f, "pid {p} ({c})"),
            (Some(p), None) => write!(f, "pid {p}"),
            (None, _) => f.write_str("a process whose pid the kernel does not show"),
        }
    }
}

/// One lock of the kernel's table.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Lock {
    kind: String,
    write: bool,
    pid: i32,
    file: String,
    start: String,
    end: String,
    waiting: bool,
}

/// Parses a line of `/proc/locks` (or an fdinfo `lock:` line without its
/// prefix): `1: POSIX  ADVISORY  READ 1234 08:02:5678 128 128`, with `->`
/// after the number for a waiter.
fn parse(line: &str) -> Option<Lock> {
    let mut t = line.split_whitespace();
    t.next()?;
    let mut kind = t.next()?;
    let waiting = kind == "->";
    if waiting {
        kind = t.next()?;
    }
    let _mode = t.next()?;
    let rw = t.next()?;
    let pid = t.next()?.parse().ok()?;
    let file = t.next()?.to_string();
    let start = t.next()?.to_string();
    let end = t.next()?.to_string();
    Some(Lock {
        kind: kind.to_string(),
        write: rw == "WRITE",
        pid,
        file,
        start,
        end,
        waiting,
    })
}

/// `major:minor:inode` as the kernel's table writes a file.
fn file_id(path: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    let dev = m.dev();
    Some(format!(
        "{:02x}:{:02x}:{}",
        libc::major(dev),
        libc::minor(dev),
        m.ino()
    ))
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_os_string();
    s.push(suffix);
    PathBuf::from(s)
}

fn command(pid: i32) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let text: String = String::from_utf8_lossy(&raw)
        .split('\0')
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    (!text.is_empty()).then(|| text.chars().take(120).collect())
}

/// This process's open-file-description locks.
fn own_ofd_locks() -> HashSet<(String, bool, String, String)> {
    let mut own = HashSet::new();
    let Ok(dir) = std::fs::read_dir("/proc/self/fdinfo") else {
        return own;
    };
    for entry in dir.flatten() {
        let Ok(text) = std::fs::read_to_string(entry.path()) else {
            continue;
        };
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("lock:") {
                if let Some(l) = parse(rest) {
                    own.insert((l.file, l.write, l.start, l.end));
                }
            }
        }
    }
    own
}

/// The other processes that hold a lock on the database at `path` (or its
/// `-wal`/`-shm` files), or wait for one. Each pid once.
pub(crate) fn others(path: &Path) -> std::io::Result<Vec<Holder>> {
    let files: HashSet<String> = ["", "-wal", "-shm"]
        .iter()
        .filter_map(|s| file_id(&with_suffix(path, s)))
        .collect();
    if files.is_empty() {
        return Ok(Vec::new());
    }
    let table = std::fs::read_to_string("/proc/locks")?;
    let me = i32::try_from(std::process::id()).unwrap_or(-1);
    let mut own = own_ofd_locks();
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for l in table.lines().filter_map(parse) {
        if !files.contains(&l.file) {
            continue;
        }
        if l.kind == "OFDLCK" && !l.waiting {
            let key = (l.file.clone(), l.write, l.start.clone(), l.end.clone());
            if own.remove(&key) {
                continue;
            }
        } else if l.pid == me {
            continue;
        }
        let pid = (l.pid > 0).then_some(l.pid);
        if seen.insert(pid) {
            out.push(Holder {
                pid,
                command: pid.and_then(command),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_kernels_lines() {
        let l = parse("1: POSIX  ADVISORY  READ 1234 08:02:5678 128 128").unwrap();
        assert_eq!(
            (l.kind.as_str(), l.write, l.pid, l.file.as_str(), l.waiting),
            ("POSIX", false, 1234, "08:02:5678", false)
        );
        let w = parse("2: -> OFDLCK ADVISORY  WRITE -1 fd:01:99 0 EOF").unwrap();
        assert_eq!(
            (w.kind.as_str(), w.write, w.pid, w.end.as_str(), w.waiting),
            ("OFDLCK", true, -1, "EOF", true)
        );
        assert!(parse("garbage").is_none());
    }

    #[test]
    fn a_file_nobody_has_open_has_no_holders() {
        let dir = std::env::temp_dir().join(format!("honker-holders-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("x.db");
        std::fs::write(&f, b"").unwrap();
        assert_eq!(others(&f).unwrap(), Vec::new());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
