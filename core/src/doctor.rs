//! `honker doctor`: the hazards an operator should know about, checked
//! without changing anything and without opening the database, `-wal` or
//! `-shm` outside SQLite (DESIGN §6: a stray descriptor's close would drop
//! this process's locks): the file system (`statfs` of the directory), the
//! journal mode and schema through a read-only SQLite connection, the WAL's
//! size (`stat`), lapsed leases, and from `/proc` the processes that have
//! the file open and any that map more than one SQLite library.

use std::path::Path;

use crate::error::{Error, Result};

/// How a check came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// Fine.
    Ok,
    /// Worth knowing; not wrong.
    Info,
    /// Likely to hurt.
    Warn,
    /// Unsafe: fix before trusting the file.
    Fail,
}

impl Level {
    /// `ok`, `info`, `warn` or `fail`.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Ok => "ok",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Fail => "fail",
        }
    }
}

/// One check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Check {
    /// What was checked (`file system`, `journal mode`, …).
    pub name: &'static str,
    /// How it came out.
    pub level: Level,
    /// What was found, and what to do.
    pub detail: String,
}

/// The file system types SQLite's locking and WAL shared memory are not
/// reliable on (by `statfs` magic number), with their names.
const NETWORK: &[(i64, &str)] = &[
    (0x6969, "NFS"),
    (0x517B, "SMB"),
    (0xFF53_4D42, "CIFS"),
    (0xFE53_4D42, "SMB2"),
    (0x6573_5546, "FUSE"),
    (0x0102_1997, "9p"),
    (0x00C3_6400, "Ceph"),
    (0x5346_414F, "AFS"),
    (0x0116_1970, "GFS2"),
    (0x7461_636F, "OCFS2"),
];

/// Local file systems by magic number (the rest are named by number).
const LOCAL: &[(i64, &str)] = &[
    (0xEF53, "ext2/3/4"),
    (0x5846_5342, "XFS"),
    (0x9123_683E, "Btrfs"),
    (0x0102_1994, "tmpfs"),
    (0x794C_7630, "overlayfs"),
    (0x2FC1_2FC1, "ZFS"),
    (0xF2F5_2010, "F2FS"),
    (0x4D44, "FAT"),
    (0x5346_544E, "NTFS"),
];

/// A file system's name by its `statfs` magic, and whether it is a
/// network (or FUSE) file system.
pub fn classify(magic: i64) -> (String, bool) {
    if let Some((_, n)) = NETWORK.iter().find(|(m, _)| *m == magic) {
        return ((*n).to_string(), true);
    }
    if let Some((_, n)) = LOCAL.iter().find(|(m, _)| *m == magic) {
        return ((*n).to_string(), false);
    }
    (format!("type {magic:#x}"), false)
}

#[cfg(target_os = "linux")]
fn fs_magic(dir: &Path) -> Option<i64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: a NUL-terminated path and a zeroed out-struct.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above; statfs opens nothing.
    let rc = unsafe { libc::statfs(c.as_ptr(), &mut st) };
    #[allow(clippy::unnecessary_cast)]
    (rc == 0).then_some(st.f_type as i64)
}

#[cfg(not(target_os = "linux"))]
fn fs_magic(_dir: &Path) -> Option<i64> {
    None
}

/// The SQLite libraries a process maps, from its `/proc/PID/maps` text:
/// the system's `libsqlite3`, and the libraries known to bundle their own
/// (honker's Python and Node modules, better-sqlite3). A copy compiled into
/// another module (a Python built with a static `_sqlite3`) is not seen.
pub fn sqlite_libraries(maps: &str) -> Vec<String> {
    let mut libs: Vec<String> = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter(|path| {
            let file = path.rsplit('/').next().unwrap_or(path);
            file.starts_with("libsqlite3") || file == "better_sqlite3.node" || is_honkers(path)
        })
        .map(str::to_string)
        .collect();
    libs.sort();
    libs.dedup();
    libs
}

/// Whether a library [`sqlite_libraries`] lists is honker's own bundled
/// copy (the Python, Node or Swift binding), which guards itself (ADR 13).
fn is_honkers(path: &str) -> bool {
    let file = path.rsplit('/').next().unwrap_or(path);
    file.starts_with("honker.") && file.ends_with(".node")
        || file.starts_with("_native.") && path.contains("/honker/")
        || file.starts_with("libhonker_swift")
}

/// Whether the SQLite libraries one process maps exclude each other: each
/// honker copy locks with OFD locks (where the kernel has them), which
/// conflict with every other lock on the file even within the process, so
/// honker's copies and at most one other library are safe together; two
/// libraries that are not honker's lock past each other.
pub fn guarded_layout(libs: &[String], ofd: bool) -> bool {
    libs.len() < 2 || ofd && libs.iter().filter(|l| !is_honkers(l)).count() <= 1
}

/// Runs every check on the database at `path` at `now` (ms).
pub fn diagnose(path: impl AsRef<Path>, now: i64) -> Result<Vec<Check>> {
    let path = path.as_ref();
    if !path.is_file() {
        return Err(Error::invalid(format!(
            "{} is not a database file",
            path.display()
        )));
    }
    let path = std::fs::canonicalize(path)
        .map_err(|e| Error::invalid(format!("cannot resolve {}: {e}", path.display())))?;
    let mut out = Vec::new();
    let dir = path.parent().unwrap_or(Path::new("/"));
    out.push(match fs_magic(dir) {
        Some(m) => {
            let (name, network) = classify(m);
            if network {
                Check {
                    name: "file system",
                    level: Level::Fail,
                    detail: format!(
                        "{} is on {name}: SQLite's locks and WAL shared memory are not reliable \
                         on network or FUSE file systems; move it to a local disk",
                        path.display()
                    ),
                }
            } else {
                Check {
                    name: "file system",
                    level: Level::Ok,
                    detail: format!("{name} (local)"),
                }
            }
        }
        None => Check {
            name: "file system",
            level: Level::Info,
            detail: "not checked on this platform".into(),
        },
    });

    let c = crate::inspect::open_read_only(&path, std::time::Duration::from_secs(5))?;
    let mode: String = c
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .map_err(Error::from)?;
    drop(c);
    out.push(if crate::inspect::read_immutable(&path)? {
        Check {
            name: "journal mode",
            level: Level::Info,
            detail: "not checked: this user may not create the file's -shm, so it was read \
                     as an immutable file (no -wal holds commits); run doctor as a user who \
                     may write its directory"
                .into(),
        }
    } else if mode.eq_ignore_ascii_case("wal") {
        Check {
            name: "journal mode",
            level: Level::Ok,
            detail: "wal".into(),
        }
    } else {
        Check {
            name: "journal mode",
            level: Level::Warn,
            detail: format!(
                "{mode}: honker switches the file to WAL when it opens it; until then readers \
                 block writers and wake-ups are slower"
            ),
        }
    });

    let status = crate::inspect::status(&path, now);
    out.push(match &status {
        Ok(s) if !s.honker_objects.is_empty() => Check {
            name: "schema",
            level: Level::Warn,
            detail: format!(
                "holds Honker's tables ({}): import them (honker import)",
                s.honker_objects.join(", ")
            ),
        },
        Ok(s) if s.schema_version < s.latest => Check {
            name: "schema",
            level: Level::Info,
            detail: format!(
                "version {} of {}; the next honker open applies {}",
                s.schema_version,
                s.latest,
                s.pending_migrations.join(", ")
            ),
        },
        Ok(s) => Check {
            name: "schema",
            level: Level::Ok,
            detail: format!("version {}", s.schema_version),
        },
        Err(e) => Check {
            name: "schema",
            level: Level::Fail,
            detail: e.to_string(),
        },
    });

    let wal = std::fs::metadata(crate::inspect::with_suffix(&path, "-wal")).map_or(0, |m| m.len());
    out.push(Check {
        name: "WAL size",
        level: if wal > 256 << 20 {
            Level::Warn
        } else {
            Level::Ok
        },
        detail: if wal > 256 << 20 {
            format!(
                "{} MB: checkpoints cannot keep up (a long-running reader holds them back?)",
                wal >> 20
            )
        } else {
            format!("{} KB", wal >> 10)
        },
    });

    if status.is_ok() {
        let stale = crate::inspect::jobs(&path, None, Some("running"), 10_000, now)?
            .iter()
            .filter(|j| j.lease_expires_at.is_some_and(|t| t < now))
            .count();
        out.push(Check {
            name: "leases",
            level: if stale > 0 { Level::Warn } else { Level::Ok },
            detail: if stale > 0 {
                format!(
                    "{stale} running jobs' leases have lapsed: their workers died or stalled; \
                     the next claim on their queue takes them again"
                )
            } else {
                "no lapsed leases".into()
            },
        });
    }

    #[cfg(target_os = "linux")]
    {
        let procs = crate::import::openers(&path);
        out.push(Check {
            name: "processes",
            level: Level::Info,
            detail: if procs.is_empty() {
                "no other process has the file open".into()
            } else {
                procs
                    .iter()
                    .map(|(p, c)| format!("pid {p} ({c})"))
                    .collect::<Vec<_>>()
                    .join("; ")
            },
        });
        // The kernel's OFD locks, probed by honker's own lock layer (built
        // with the bundled SQLite, as every binding is).
        #[cfg(feature = "bundled")]
        let ofd = crate::ofd::kernel_has_ofd_locks();
        #[cfg(not(feature = "bundled"))]
        let ofd = false;
        let mut guarded = Vec::new();
        let mut unguarded = Vec::new();
        for (p, _) in &procs {
            let Ok(maps) = std::fs::read_to_string(format!("/proc/{p}/maps")) else {
                continue;
            };
            let libs = sqlite_libraries(&maps);
            if libs.len() < 2 {
                continue;
            }
            let line = format!("pid {p}: {}", libs.join(", "));
            if guarded_layout(&libs, ofd) {
                guarded.push(line);
            } else {
                unguarded.push(line);
            }
        }
        out.push(Check {
            name: "SQLite libraries",
            level: if unguarded.is_empty() {
                Level::Ok
            } else {
                Level::Warn
            },
            detail: if !unguarded.is_empty() {
                format!(
                    "{}: two SQLite libraries in one process that lock with plain POSIX locks \
                     can corrupt the file (honker's guard, ADR 13, needs honker's own copy \
                     beside at most one other and a kernel with OFD locks); keep one of them \
                     out of that process",
                    unguarded.join("; ")
                )
            } else if !guarded.is_empty() {
                format!(
                    "{}: guarded, honker's copy locks with open-file-description locks, so the \
                     libraries exclude each other as two processes would (ADR 13)",
                    guarded.join("; ")
                )
            } else {
                "each process maps one SQLite library".into()
            },
        });
    }
    // Elsewhere there is no /proc to read (ADR 30): said, not skipped.
    #[cfg(not(target_os = "linux"))]
    for name in ["processes", "SQLite libraries"] {
        out.push(Check {
            name,
            level: Level::Info,
            detail: "not checked on this platform (Linux reads them from /proc)".into(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn network_file_systems_are_named_and_flagged() {
        for (magic, name) in NETWORK {
            assert_eq!(classify(*magic), ((*name).to_string(), true));
        }
        assert_eq!(classify(0xEF53), ("ext2/3/4".to_string(), false));
        assert_eq!(classify(0x0102_1994), ("tmpfs".to_string(), false));
        assert_eq!(classify(0x1234), ("type 0x1234".to_string(), false));
    }

    #[test]
    fn the_sqlite_libraries_a_process_maps() {
        let maps = "\
7f00-7f01 r-xp 00000000 08:02 1 /usr/lib/x86_64-linux-gnu/libsqlite3.so.0.8.6
7f01-7f02 r--p 00001000 08:02 1 /usr/lib/x86_64-linux-gnu/libsqlite3.so.0.8.6
7f02-7f03 r-xp 00000000 08:02 2 /venv/lib/python3.11/site-packages/honker/_native.abi3.so
7f03-7f04 r-xp 00000000 08:02 3 /usr/lib/libc.so.6
7f04-7f05 rw-p 00000000 00:00 0
";
        assert_eq!(
            sqlite_libraries(maps),
            vec![
                "/usr/lib/x86_64-linux-gnu/libsqlite3.so.0.8.6".to_string(),
                "/venv/lib/python3.11/site-packages/honker/_native.abi3.so".to_string()
            ]
        );
        assert!(sqlite_libraries("7f00-7f01 r-xp 0 08:02 3 /usr/lib/libc.so.6\n").is_empty());
    }

    #[test]
    fn honkers_copy_beside_one_other_library_is_guarded_two_others_are_not() {
        let libs = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let stdlib = "/usr/lib/x86_64-linux-gnu/libsqlite3.so.0.8.6";
        let python = "/venv/lib/python3.11/site-packages/honker/_native.abi3.so";
        let node = "/app/node_modules/honker/honker.linux-x64-gnu.node";
        let better = "/app/node_modules/better-sqlite3/build/Release/better_sqlite3.node";
        let swift = "/app/.build/debug/libhonker_swift.so";
        assert!(guarded_layout(&libs(&[stdlib, python]), true));
        assert!(guarded_layout(&libs(&[better, node]), true));
        assert!(guarded_layout(&libs(&[swift, stdlib]), true));
        assert!(guarded_layout(&libs(&[stdlib, python, node]), true));
        assert!(
            !guarded_layout(&libs(&[stdlib, python]), false),
            "no OFD locks"
        );
        assert!(!guarded_layout(&libs(&[stdlib, better, node]), true));
        assert!(!guarded_layout(&libs(&[stdlib, better]), true));
        assert!(guarded_layout(&libs(&[stdlib]), false));
    }

    #[test]
    fn the_file_systems_here_are_classified() {
        // Whatever /tmp is on this machine (tmpfs, ext4, overlayfs), it is
        // local: doctor must not cry wolf.
        let m = fs_magic(Path::new("/tmp"));
        #[cfg(target_os = "linux")]
        assert!(!classify(m.unwrap()).1, "{m:?}");
        let _ = m;
    }
}
