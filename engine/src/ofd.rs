//! Two SQLite libraries in one process, on one file, without corrupting it
//! (ADR 13). Linux only; honker's own, bundled SQLite only.
//!
//! SQLite's unix VFS locks with POSIX record locks, which belong to the
//! *process*: two SQLite libraries in one process (honker's bundled copy
//! next to the system library under Python's `sqlite3`, better-sqlite3 or
//! `node:sqlite`) see each other's locks as their own, so neither excludes
//! the other, and closing *any* descriptor of a file drops every POSIX lock
//! the process holds on it, the other library's included. Their writers then
//! overwrite each other.
//!
//! This module replaces three entries of the unix VFS's system-call table
//! (`open`, `close`, `fcntl`; `sqlite3_vfs.xSetSystemCall`, SQLite's own
//! hook for this) in honker's library, before its first connection opens:
//!
//! - **One open file description per file.** `open` of a regular file that
//!   this library already has open returns the same descriptor again, with a
//!   reference count; `close` drops a reference. Every connection of this
//!   library to a file (writer, readers, watcher, checkpointer) then locks
//!   through one description.
//! - **Open-file-description locks.** `fcntl`'s `F_SETLK`/`F_SETLKW`/
//!   `F_GETLK` on those descriptors become `F_OFD_*`. OFD locks belong to the
//!   description, not the process: within this library they behave exactly as
//!   SQLite expects POSIX locks to (one owner, SQLite's in-process lock
//!   counting on top), while against every other library in the process they
//!   conflict as another process's locks would (Linux: OFD and POSIX locks
//!   conflict even within one process), and no other library's `close`
//!   drops them.
//! - **Never a `close` that drops another library's locks.** When the last
//!   reference goes, honker releases its own locks explicitly and closes the
//!   descriptor only if no other descriptor in the process refers to the
//!   file (found through `/proc/self/fd` links and `stat(2)`: nothing is ever
//!   opened); otherwise the descriptor is parked — kept open, lock-free —
//!   reused by the next open of that file and closed once the other
//!   library's descriptors are gone (checked at each open and close).
//!
//! The other library keeps its POSIX locks and its own close discipline
//! (SQLite defers a close while its connections hold locks), so both sides
//! are safe in either order of opening. Descriptors this library opened
//! before [`install`] ran (a Rust application's own rusqlite connections
//! opened before its first `Database::open`) keep POSIX locks.
//!
//! Where the kernel has no OFD locks (Linux < 3.15) only the shared
//! descriptors are installed and [`active`] is false:
//! [`Database::open`](crate::Database::open) then refuses a file that another
//! descriptor of the process has open ([`check_exclusive`]).

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Once;

use parking_lot::Mutex;

use crate::error::{Error, ErrorKind, Result};

/// A file, as the kernel names it.
type Inode = (u64, u64);

/// A descriptor this library shares among its connections to one file.
#[derive(Debug)]
struct Shared {
    fd: c_int,
    /// Opens not yet closed; 0 means parked.
    refs: usize,
    /// Opened read-write (a read-only open may reuse it; a read-write open
    /// may not reuse a read-only one).
    writable: bool,
}

#[derive(Debug, Default)]
struct Table {
    /// The process the descriptors belong to: a forked child forgets the
    /// parent's (without closing them: see [`table`]).
    pid: u32,
    by_inode: HashMap<Inode, Shared>,
    inode_of: HashMap<c_int, Inode>,
}

static TABLE: Mutex<Option<Table>> = Mutex::new(None);

/// Bit `fd` set: `fd` is a shared descriptor (the lock path's lookup, without
/// the mutex). Descriptors beyond the bitmap are looked up in [`TABLE`].
static OURS: [AtomicU64; BITMAP_WORDS] = [const { AtomicU64::new(0) }; BITMAP_WORDS];
const BITMAP_WORDS: usize = 1024;

/// The shared descriptors are installed.
static INSTALLED: AtomicBool = AtomicBool::new(false);
/// ... with OFD locks.
static ACTIVE: AtomicBool = AtomicBool::new(false);

fn mark(fd: c_int, on: bool) {
    let Ok(i) = usize::try_from(fd) else { return };
    if let Some(word) = OURS.get(i / 64) {
        let bit = 1u64 << (i % 64);
        if on {
            word.fetch_or(bit, Ordering::SeqCst);
        } else {
            word.fetch_and(!bit, Ordering::SeqCst);
        }
    }
}

fn is_ours(fd: c_int) -> bool {
    let Ok(i) = usize::try_from(fd) else {
        return false;
    };
    match OURS.get(i / 64) {
        Some(word) => word.load(Ordering::SeqCst) & (1u64 << (i % 64)) != 0,
        None => {
            let mut guard = TABLE.lock();
            table(&mut guard).inode_of.contains_key(&fd)
        }
    }
}

/// The table of this process. In a forked child the parent's entries are
/// forgotten (their descriptors were closed by [`close_inherited`]).
fn table(guard: &mut Option<Table>) -> &mut Table {
    let pid = std::process::id();
    let t = guard.get_or_insert_with(|| Table {
        pid,
        ..Table::default()
    });
    if t.pid != pid {
        for fd in t.inode_of.keys() {
            mark(*fd, false);
        }
        *t = Table {
            pid,
            ..Table::default()
        };
    }
    t
}

/// In a forked child, from [`crate::fork`]'s `pthread_atfork` handler
/// (async-signal-safe: atomics and `close`): closes the shared descriptors
/// inherited from the parent. The child shares their open file descriptions,
/// so keeping them would keep the parent's OFD locks alive after the parent
/// died; closing them is harmless, as the child holds no POSIX locks yet
/// and uses no inherited connection ([`crate::fork`]).
pub(crate) fn close_inherited() {
    for (w, word) in OURS.iter().enumerate() {
        let mut bits = word.swap(0, Ordering::SeqCst);
        while bits != 0 {
            let fd = w * 64 + bits.trailing_zeros() as usize;
            bits &= bits - 1;
            // SAFETY: a descriptor honker's library opened, unused in the child.
            unsafe { libc::close(fd as c_int) };
        }
    }
}

fn stat_of(st: &libc::stat) -> Inode {
    (st.st_dev, st.st_ino)
}

/// Whether a descriptor of this process other than `own` refers to `inode`
/// (read from `/proc/self/fd`'s links with `stat(2)`; nothing is opened but
/// the directory listing). When the listing cannot be read, assumes so.
fn others_have_open(inode: Inode, own: Option<c_int>) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return true;
    };
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(fd) = name.to_str().and_then(|n| n.parse::<c_int>().ok()) else {
            continue;
        };
        if Some(fd) == own {
            continue;
        }
        // SAFETY: fstat on a descriptor number that may have been closed
        // since the listing: then it fails (EBADF) or describes whatever
        // took the number, and either way only its identity is compared.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstat(fd, &mut st) } == 0 && stat_of(&st) == inode {
            return true;
        }
    }
    false
}

/// Releases every lock honker's library holds through `fd`.
fn unlock_all(fd: c_int) {
    // SAFETY: a plain fcntl on a descriptor this module owns.
    unsafe {
        let mut fl: libc::flock = std::mem::zeroed();
        fl.l_type = libc::F_UNLCK as libc::c_short;
        fl.l_whence = libc::SEEK_SET as libc::c_short;
        libc::fcntl(fd, libc::F_OFD_SETLK, &mut fl);
    }
}

impl Table {
    /// Closes parked descriptors whose files no other descriptor refers to.
    fn sweep(&mut self) {
        let parked: Vec<(Inode, c_int)> = self
            .by_inode
            .iter()
            .filter(|(_, s)| s.refs == 0)
            .map(|(k, s)| (*k, s.fd))
            .collect();
        for (inode, fd) in parked {
            if !others_have_open(inode, Some(fd)) {
                self.forget(inode, fd);
                // SAFETY: our descriptor, no longer used by any connection.
                unsafe { libc::close(fd) };
            }
        }
    }

    fn forget(&mut self, inode: Inode, fd: c_int) {
        self.by_inode.remove(&inode);
        self.inode_of.remove(&fd);
        mark(fd, false);
    }
}

unsafe extern "C" fn ofd_open(path: *const c_char, flags: c_int, mode: c_int) -> c_int {
    let access = flags & libc::O_ACCMODE;
    // Exclusive creation, truncation and write-only opens are never shared
    // (SQLite's temporary files, and nothing else it opens, use them).
    let shareable = access != libc::O_WRONLY && flags & (libc::O_EXCL | libc::O_TRUNC) == 0;
    if !shareable {
        // SAFETY: the caller's arguments, passed on.
        return unsafe { libc::open(path, flags, mode as libc::c_uint) };
    }
    let mut guard = TABLE.lock();
    let table = table(&mut guard);
    if table.by_inode.values().any(|s| s.refs == 0) {
        table.sweep();
    }
    // SAFETY: `path` is SQLite's NUL-terminated file name; `st` is written
    // by (l)stat.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let found = unsafe {
        if flags & libc::O_NOFOLLOW != 0 {
            libc::lstat(path, &mut st)
        } else {
            libc::stat(path, &mut st)
        }
    } == 0;
    if found && st.st_mode & libc::S_IFMT == libc::S_IFREG {
        if let Some(shared) = table.by_inode.get_mut(&stat_of(&st)) {
            if shared.writable || access == libc::O_RDONLY {
                shared.refs += 1;
                return shared.fd;
            }
        }
    }
    // SAFETY: the caller's arguments, passed on.
    let fd = unsafe { libc::open(path, flags, mode as libc::c_uint) };
    if fd < 0 {
        return fd;
    }
    // SAFETY: fstat on the descriptor just opened.
    if unsafe { libc::fstat(fd, &mut st) } == 0 && st.st_mode & libc::S_IFMT == libc::S_IFREG {
        let inode = stat_of(&st);
        // Another path to a file this library has open (a rename between
        // the stat and the open): left unshared, with POSIX locks.
        if let std::collections::hash_map::Entry::Vacant(slot) = table.by_inode.entry(inode) {
            slot.insert(Shared {
                fd,
                refs: 1,
                writable: access == libc::O_RDWR,
            });
            table.inode_of.insert(fd, inode);
            mark(fd, true);
        }
    }
    fd
}

unsafe extern "C" fn ofd_close(fd: c_int) -> c_int {
    if is_ours(fd) {
        let mut guard = TABLE.lock();
        let table = table(&mut guard);
        if let Some(&inode) = table.inode_of.get(&fd) {
            let shared = table
                .by_inode
                .get_mut(&inode)
                .expect("inode_of and by_inode agree");
            shared.refs = shared.refs.saturating_sub(1);
            if shared.refs > 0 {
                return 0;
            }
            // No connection of this library uses the file any more: give up
            // its locks (SQLite leaves the shm's DMS lock to the close), then
            // close only if no other library's locks could go with it.
            if active() {
                unlock_all(fd);
            }
            if others_have_open(inode, Some(fd)) {
                return 0;
            }
            table.forget(inode, fd);
            // Other parked descriptors may be closable now too.
            if table.by_inode.values().any(|s| s.refs == 0) {
                table.sweep();
            }
        }
    }
    // SAFETY: the caller's descriptor, passed on.
    unsafe { libc::close(fd) }
}

/// `fcntl` for SQLite's unix VFS: lock commands on shared descriptors become
/// open-file-description locks; everything else passes through. Called by
/// the C trampoline in `csrc/ofd_fcntl.c`.
#[no_mangle]
unsafe extern "C" fn honker_ofd_fcntl_impl(fd: c_int, cmd: c_int, arg: *mut c_void) -> c_int {
    let ofd = match cmd {
        libc::F_GETLK => libc::F_OFD_GETLK,
        libc::F_SETLK => libc::F_OFD_SETLK,
        libc::F_SETLKW => libc::F_OFD_SETLKW,
        // SAFETY: the caller's arguments, passed on.
        _ => return unsafe { libc::fcntl(fd, cmd, arg) },
    };
    if !is_ours(fd) {
        // SAFETY: as above.
        return unsafe { libc::fcntl(fd, cmd, arg) };
    }
    // SAFETY: for the lock commands SQLite passes a `struct flock *`; the
    // OFD commands require `l_pid` to be 0, which SQLite does not set.
    unsafe {
        let caller = arg.cast::<libc::flock>();
        let mut fl = *caller;
        fl.l_pid = 0;
        let rc = libc::fcntl(fd, ofd, &mut fl);
        if cmd == libc::F_GETLK && rc == 0 {
            *caller = fl;
        }
        rc
    }
}

extern "C" {
    fn honker_ofd_fcntl(fd: c_int, cmd: c_int, ...) -> c_int;
}

/// Whether the kernel supports OFD locks (probed on an anonymous memory file,
/// never on a database).
pub fn kernel_has_ofd_locks() -> bool {
    if std::env::var_os("HONKER_TEST_NO_OFD_LOCKS").is_some() {
        return false;
    }
    // SAFETY: creates, queries and closes a descriptor of our own. The raw
    // syscall, not glibc's memfd_create (2.27): the wheel targets glibc 2.17.
    // Without memfd (Linux < 3.17) the probe reads the running executable.
    unsafe {
        let mut fd = libc::syscall(
            libc::SYS_memfd_create,
            c"honker-ofd-probe".as_ptr(),
            libc::MFD_CLOEXEC,
        ) as c_int;
        if fd < 0 {
            fd = libc::open(c"/proc/self/exe".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        }
        if fd < 0 {
            return false;
        }
        let mut fl: libc::flock = std::mem::zeroed();
        fl.l_type = libc::F_RDLCK as libc::c_short;
        fl.l_whence = libc::SEEK_SET as libc::c_short;
        let ok = libc::fcntl(fd, libc::F_OFD_GETLK, &mut fl) == 0;
        libc::close(fd);
        ok
    }
}

/// Installs the lock layer into honker's SQLite, once, before its first
/// connection (called by every open). Shared descriptors always; OFD locks
/// where the kernel has them ([`active`]).
pub(crate) fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let ofd = kernel_has_ofd_locks();
        type Syscall = libsqlite3_sys::sqlite3_syscall_ptr;
        // SAFETY: the unix VFS is SQLite's built-in one; the replacements
        // have the signatures SQLite calls them with (`open`/`close` as in
        // its table, `fcntl` variadic, through the C trampoline). No
        // connection of this library is open yet when honker is its only
        // user (Python, Node, Swift); see the module docs otherwise.
        unsafe {
            libsqlite3_sys::sqlite3_initialize();
            let vfs = libsqlite3_sys::sqlite3_vfs_find(c"unix".as_ptr());
            let Some(set) = vfs.as_ref().and_then(|v| v.xSetSystemCall) else {
                return;
            };
            let open: Syscall = Some(std::mem::transmute::<
                unsafe extern "C" fn(*const c_char, c_int, c_int) -> c_int,
                unsafe extern "C" fn(),
            >(ofd_open));
            let close: Syscall = Some(std::mem::transmute::<
                unsafe extern "C" fn(c_int) -> c_int,
                unsafe extern "C" fn(),
            >(ofd_close));
            let fcntl: Syscall = Some(std::mem::transmute::<
                unsafe extern "C" fn(c_int, c_int, ...) -> c_int,
                unsafe extern "C" fn(),
            >(honker_ofd_fcntl));
            let mut names: Vec<(&CStr, Syscall)> = vec![(c"open", open), (c"close", close)];
            if ofd {
                names.push((c"fcntl", fcntl));
            }
            for (name, f) in &names {
                if set(vfs, name.as_ptr(), *f) != libsqlite3_sys::SQLITE_OK {
                    // Undo: a partial layer would mix lock kinds.
                    for (name, _) in &names {
                        set(vfs, name.as_ptr(), None);
                    }
                    return;
                }
            }
            INSTALLED.store(true, Ordering::SeqCst);
            ACTIVE.store(ofd, Ordering::SeqCst);
        }
    });
}

/// Whether honker's SQLite locks with open-file-description locks, making it
/// safe next to another SQLite library in the same process.
pub fn active() -> bool {
    ACTIVE.load(Ordering::SeqCst)
}

/// Without OFD locks: `UNSAFE` if a descriptor of this process that honker's
/// library did not open refers to the database file (another SQLite library
/// has it open). Called by `Database::open` once its writer has the file
/// open, before any write. A library that opens the file later is not
/// caught on such kernels (ADR 13).
pub(crate) fn check_exclusive(path: &Path) -> Result<()> {
    if active() || !INSTALLED.load(Ordering::SeqCst) {
        return Ok(());
    }
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(());
    };
    let inode = (meta.dev(), meta.ino());
    let own = {
        let mut guard = TABLE.lock();
        table(&mut guard).by_inode.get(&inode).map(|s| s.fd)
    };
    if others_have_open(inode, own) {
        return Err(unsafe_error(path));
    }
    Ok(())
}

fn unsafe_error(path: &Path) -> Error {
    Error::new(
        ErrorKind::Unsafe,
        format!(
            "{} is open through another SQLite library in this process, and this kernel has \
             no open-file-description locks to keep the two apart (Linux >= 3.15 has): load \
             libhonker_ext into that library's connection and use honker's SQL functions \
             there, or use honker's connection for everything",
            path.display()
        ),
    )
}
