//! `fork()` with honker open: the child opens no file (`UNSAFE`, decided
//! before any call into SQLite), its inherited handles refuse every call
//! (`CLOSED`), and dropping them there touches nothing of the parent's.
//!
//! Children run a few lines and leave with `_exit`, reporting through their
//! exit status: 0 is what the test expects, anything else says what went
//! wrong. A child that hangs is killed and fails the test.

#![cfg(unix)]

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{assert_integrity, test_db};
use honker::{Database, EnqueueOptions, ErrorKind};
use serde_json::json;

/// Forks; the child runs `child` and exits with its status. Returns the
/// child's pid.
fn fork_child(child: impl FnOnce() -> i32) -> libc::pid_t {
    // SAFETY: the child runs only `child` and `_exit`s; honker's open path
    // refuses before any lock or SQLite call that another thread may hold.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(child)).unwrap_or(99);
        unsafe { libc::_exit(code) };
    }
    pid
}

/// The child's exit status, or `None` if it did not exit within `timeout`
/// (it is then killed).
fn wait_child(pid: libc::pid_t, timeout: Duration) -> Option<i32> {
    let deadline = Instant::now() + timeout;
    loop {
        let mut status = 0;
        // SAFETY: plain waitpid on our own child.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            return Some(if libc::WIFEXITED(status) {
                libc::WEXITSTATUS(status)
            } else {
                128 + libc::WTERMSIG(status)
            });
        }
        if Instant::now() >= deadline {
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            return None;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn kind_code(r: honker::Result<impl Sized>, want: ErrorKind) -> i32 {
    match r {
        Err(e) if e.kind() == want => 0,
        Err(_) => 2,
        Ok(_) => 3,
    }
}

#[test]
fn a_child_of_a_process_with_honker_open_opens_no_file() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    q.enqueue(json!(1), &EnqueueOptions::default()).unwrap();
    let other = t.path.with_file_name("other.db");
    let (same, other2) = (t.path.clone(), other.clone());
    let pid = fork_child(move || {
        // The same file ("open it again in the child" used to lose its
        // commits when the parent closed) and any other file: refused.
        let a = kind_code(Database::open(&same), ErrorKind::Unsafe);
        let b = kind_code(Database::open(&other2), ErrorKind::Unsafe);
        if a != 0 {
            return 10 + a;
        }
        if b != 0 {
            return 20 + b;
        }
        i32::from(!honker::forked_while_open())
    });
    assert_eq!(wait_child(pid, Duration::from_secs(10)), Some(0));
    assert!(!other.exists(), "the child created a file");
    // The parent goes on and closes; nothing of its was touched.
    q.enqueue(json!(2), &EnqueueOptions::default()).unwrap();
    assert_eq!(t.count("_honker_jobs"), 2);
    assert_integrity(&t.db);
}

#[test]
fn inherited_handles_refuse_every_call_in_the_child() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    q.enqueue(json!(1), &EnqueueOptions::default()).unwrap();
    let jobs = q.claim("w", 1).unwrap();
    let (db, q2) = (t.db.clone(), q.clone());
    let pid = fork_child(move || {
        let checks = [
            kind_code(
                q2.enqueue(json!(2), &EnqueueOptions::default()),
                ErrorKind::Closed,
            ),
            kind_code(q2.claim("w", 1), ErrorKind::Closed),
            kind_code(jobs[0].ack(), ErrorKind::Closed),
            kind_code(q2.stats(), ErrorKind::Closed),
            kind_code(db.query("SELECT 1", []), ErrorKind::Closed),
            kind_code(db.execute("SELECT 1", []), ErrorKind::Closed),
            kind_code(db.transaction(), ErrorKind::Closed),
        ];
        match checks.iter().position(|&c| c != 0) {
            Some(i) => 10 * (i as i32 + 1) + checks[i],
            None => 0,
        }
    });
    assert_eq!(wait_child(pid, Duration::from_secs(10)), Some(0));
    assert_eq!(t.count("_honker_jobs"), 1);
}

/// A child that drops the parent's open transaction (or just exits) must not
/// run ROLLBACK on the parent's connection state nor touch the shared
/// `-shm`: the parent's transaction then commits, the file whole.
#[test]
fn a_child_dropping_an_inherited_transaction_leaves_the_parents_alone() {
    let t = test_db();
    t.db.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, v BLOB)", [])
        .unwrap();
    let q = t.db.queue("q").unwrap();
    let tx = t.db.transaction().unwrap();
    for i in 0..200_i64 {
        tx.execute(
            "INSERT INTO orders (id, v) VALUES (?1, randomblob(2000))",
            [i],
        )
        .unwrap();
    }
    q.enqueue_tx(&tx, json!({"order": 1}), &EnqueueOptions::default())
        .unwrap();
    // SAFETY: the child only drops the transaction and a database handle.
    let tx_ptr: *const honker::Transaction = &tx;
    let db = t.db.clone();
    let pid = fork_child(move || {
        // Dropping the child's copy of the transaction, as a child exiting
        // normally would (the value is the parent's, copied by fork).
        let copy = unsafe { std::ptr::read(tx_ptr) };
        let commit = kind_code(copy.commit(), ErrorKind::Closed);
        drop(db);
        commit
    });
    assert_eq!(wait_child(pid, Duration::from_secs(10)), Some(0));
    tx.execute("INSERT INTO orders (id, v) VALUES (1000, 'after fork')", [])
        .unwrap();
    tx.commit().unwrap();
    assert_eq!(t.count("orders"), 201);
    assert_eq!(t.count("_honker_jobs"), 1);
    assert_integrity(&t.db);
}

/// Forks while a parent thread commits back to back (so the child may be
/// born with SQLite's mutexes held): every child is refused at once, none
/// hangs, and no commit of the parent's is lost.
#[test]
fn thirty_forks_while_the_parent_commits_never_hang() {
    let t = test_db();
    let q = t.db.queue("q").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let (q2, stop2) = (q.clone(), Arc::clone(&stop));
    let committer = std::thread::spawn(move || {
        let mut n = 0_i64;
        while !stop2.load(Ordering::SeqCst) {
            q2.enqueue(json!(n), &EnqueueOptions::default()).unwrap();
            n += 1;
        }
        n
    });
    let path = t.path.clone();
    let mut outcomes = Vec::new();
    for _ in 0..30 {
        let p = path.clone();
        let pid = fork_child(move || kind_code(Database::open(&p), ErrorKind::Unsafe));
        outcomes.push(wait_child(pid, Duration::from_secs(10)));
    }
    stop.store(true, Ordering::SeqCst);
    let committed = committer.join().unwrap();
    assert!(outcomes.iter().all(|o| *o == Some(0)), "{outcomes:?}");
    assert_eq!(t.count("_honker_jobs"), committed);
    assert_integrity(&t.db);
}
