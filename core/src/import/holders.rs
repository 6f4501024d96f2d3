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
///
/// A lock without a pid (an open-file-description lock) is another
/// process's only if this process does not hold it: its own are read from
/// `/proc/self/fdinfo` before and after the kernel's table, and a pid-less
/// lock counts only if three looks 20 ms apart all find it. A connection of
/// this process that was closing (or taking a transient lock) between two
/// reads once made the importer refuse a file nobody else had open; another
/// process's open connection holds its lock on the `-shm` for as long as it
/// is open, so it is in every look.
pub(crate) fn others(path: &Path) -> std::io::Result<Vec<Holder>> {
    let files: HashSet<String> = ["", "-wal", "-shm"]
        .iter()
        .filter_map(|s| file_id(&with_suffix(path, s)))
        .collect();
    if files.is_empty() {
        return Ok(Vec::new());
    }
    let me = i32::try_from(std::process::id()).unwrap_or(-1);
    let mut found = confirmed(3, std::time::Duration::from_millis(20), || {
        let mut own = own_ofd_locks();
        let table = std::fs::read_to_string("/proc/locks")?;
        own.extend(own_ofd_locks());
        Ok(holders_in(&table, &files, &own, me))
    })?;
    // Open-file-description locks (honker's own, ADR 13) carry no pid in
    // the table: name those processes from their descriptors instead.
    if found.iter().any(|h| h.pid.is_none()) {
        let named = openers(path);
        if !named.is_empty() {
            found.retain(|h| h.pid.is_some());
            for (pid, cmd) in named {
                if !found.iter().any(|h| h.pid == Some(pid)) {
                    found.push(Holder {
                        pid: Some(pid),
                        command: Some(cmd).filter(|c| !c.is_empty()),
                    });
                }
            }
        }
    }
    Ok(found)
}

/// The processes (other than this one) with a descriptor on the database,
/// its `-wal` or `-shm`: (pid, command line). What `doctor` lists, and how
/// the holders whose locks carry no pid are named.
pub(crate) fn openers(path: &Path) -> Vec<(i32, String)> {
    let targets: Vec<PathBuf> = ["", "-wal", "-shm"]
        .iter()
        .map(|s| with_suffix(path, s))
        .collect();
    let me = std::process::id().to_string();
    let mut out = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return out;
    };
    for p in procs.flatten() {
        let name = p.file_name().to_string_lossy().into_owned();
        if name == me || !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        if fds
            .flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|t| targets.contains(&t)))
        {
            let pid = name.parse().unwrap_or(0);
            out.push((pid, command(pid).unwrap_or_default()));
        }
    }
    out.sort();
    out
}

/// `look` up to `looks` times, `pause` apart: holders with a pid as soon as
/// one look finds any, and those without only when every look found them.
fn confirmed(
    looks: usize,
    pause: std::time::Duration,
    mut look: impl FnMut() -> std::io::Result<Vec<Holder>>,
) -> std::io::Result<Vec<Holder>> {
    let mut found = look()?;
    for _ in 1..looks {
        if found.is_empty() || found.iter().any(|h| h.pid.is_some()) {
            break;
        }
        std::thread::sleep(pause);
        let again = look()?;
        found.retain(|h| again.contains(h));
        if let Some(p) = again.into_iter().find(|h| h.pid.is_some()) {
            found.push(p);
        }
    }
    Ok(found)
}

/// The holders in one read of the kernel's table, less this process's
/// own locks (`own`: its open-file-description locks; `me`: its pid).
fn holders_in(
    table: &str,
    files: &HashSet<String>,
    own: &HashSet<(String, bool, String, String)>,
    me: i32,
) -> Vec<Holder> {
    let mut own = own.clone();
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
    out
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
    fn a_pid_less_lock_counts_only_when_every_look_finds_it() {
        let unknown = Holder {
            pid: None,
            command: None,
        };
        let known = Holder {
            pid: Some(42),
            command: None,
        };
        let pause = std::time::Duration::ZERO;
        // This process's connection closing between two reads: gone at the
        // next look.
        let mut looks = vec![vec![], vec![unknown.clone()]];
        let got = confirmed(3, pause, || Ok(looks.pop().unwrap_or_default())).unwrap();
        assert_eq!(got, vec![]);
        // Another process's open connection: in every look.
        let mut n = 0;
        let got = confirmed(3, pause, || {
            n += 1;
            Ok(vec![unknown.clone()])
        })
        .unwrap();
        assert_eq!((got, n), (vec![unknown.clone()], 3));
        // A holder with a pid counts at once, and ends the looking.
        let mut n = 0;
        let got = confirmed(3, pause, || {
            n += 1;
            Ok(vec![unknown.clone(), known.clone()])
        })
        .unwrap();
        assert_eq!((got, n), (vec![unknown.clone(), known.clone()], 1));
        let mut looks = vec![vec![known.clone()], vec![unknown.clone()]];
        let got = confirmed(3, pause, || Ok(looks.pop().unwrap_or_default())).unwrap();
        assert_eq!(got, vec![known]);
    }

    #[test]
    fn own_locks_and_other_files_are_not_holders() {
        let files: HashSet<String> = ["08:02:5678".to_string()].into();
        let own: HashSet<_> = [(
            "08:02:5678".to_string(),
            false,
            "128".to_string(),
            "128".to_string(),
        )]
        .into();
        let table = "1: OFDLCK ADVISORY  READ -1 08:02:5678 128 128\n\
                     2: POSIX  ADVISORY  WRITE 77 08:02:5678 0 EOF\n\
                     3: POSIX  ADVISORY  WRITE 78 08:02:9999 0 EOF\n\
                     4: OFDLCK ADVISORY  WRITE -1 08:02:5678 120 120\n";
        let got = holders_in(table, &files, &own, 77);
        assert_eq!(
            got,
            vec![Holder {
                pid: None,
                command: None
            }]
        );
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
