//! Named locks with fencing tokens (ADR 22): grants, tokens that only grow
//! (across releases, lapses, reopening and VACUUM), the fence inside the
//! guarded write's transaction, renewal, waiters woken by another process's
//! release, Honker's SQL contracts on our table, maintenance, and typed
//! errors that change nothing.

mod common;

use std::time::{Duration, Instant};

#[cfg(unix)]
use common::child::next_tagged;
use common::child::{read_tagged, report, spawn_child, CHILD_ENV};
use common::{code, sql, test_db};
use honker::runtime::HeldLock;
use honker::rusqlite::types::Value;
use honker::{Database, ErrorKind, Options};

const TTL: Duration = Duration::from_secs(10);

fn holders(db: &Database) -> Vec<Vec<Value>> {
    // The row named '' is the token counter, not a holder.
    db.query(
        "SELECT * FROM _honker_lock_holders WHERE name != '' ORDER BY name",
        [],
    )
    .unwrap()
    .rows
}

#[test]
fn one_owner_at_a_time_and_every_grant_gets_a_greater_token() {
    let t = test_db();
    let lock = t.db.lock("reindex").unwrap();
    let a = lock.try_acquire("a", TTL).unwrap().unwrap();
    assert!(lock.try_acquire("b", TTL).unwrap().is_none());
    // The same owner again is another holder: excluded, nothing changed
    // (two handlers of one worker name must not both get in: issue 53).
    t.clock.advance(Duration::from_secs(3));
    assert!(lock.try_acquire("a", TTL).unwrap().is_none());
    assert_eq!(lock.info().unwrap().unwrap().expires_at, a.expires_at);
    assert_eq!(lock.free_in("a").unwrap(), TTL - Duration::from_secs(3));
    let info = lock.info().unwrap().unwrap();
    assert_eq!((info.owner.as_str(), info.token), ("a", a.token));
    assert!(lock.release(a.token).unwrap());
    assert!(!lock.release(a.token).unwrap(), "released once");
    let b = lock.try_acquire("b", TTL).unwrap().unwrap();
    assert!(b.token > a.token);
    // A lapsed holder is replaced, with a greater token.
    t.clock.advance(TTL + Duration::from_millis(1));
    let c = lock.try_acquire("c", TTL).unwrap().unwrap();
    assert!(c.token > b.token);
    // Tokens grow across names too (one counter for the file).
    let other =
        t.db.lock("other")
            .unwrap()
            .try_acquire("a", TTL)
            .unwrap()
            .unwrap();
    assert!(other.token > c.token);
}

#[test]
fn the_fence_refuses_a_paused_holders_write_and_lets_the_new_holders_through() {
    let t = test_db();
    t.db.execute("CREATE TABLE acct (id INTEGER PRIMARY KEY, owner TEXT)", [])
        .unwrap();
    t.db.execute("INSERT INTO acct VALUES (1, 'nobody')", [])
        .unwrap();
    let lock = t.db.lock("x").unwrap();
    let a = lock.try_acquire("a", TTL).unwrap().unwrap();
    // A's lease lapsed while it was paused; B takes the lock.
    t.clock.advance(TTL * 2);
    let b = lock.try_acquire("b", TTL).unwrap().unwrap();
    let tx = t.db.transaction().unwrap();
    let err = lock.fence(&tx, a.token).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LeaseLost);
    tx.rollback().unwrap();
    // The SQL forms: a predicate in the guarded write, and the fence.
    let tx = t.db.transaction().unwrap();
    let n = tx
        .execute(
            &format!(
                "UPDATE acct SET owner = 'a' WHERE id = 1 AND honker_lock_held('x', {})",
                a.token
            ),
            [],
        )
        .unwrap();
    assert_eq!(n, 0);
    let err = tx
        .query(&format!("SELECT honker_lock_fence('x', {})", a.token), [])
        .unwrap_err();
    assert_eq!(code(&err), "LEASE_LOST", "{err}");
    tx.rollback().unwrap();
    let tx = t.db.transaction().unwrap();
    lock.fence(&tx, b.token).unwrap();
    tx.execute("UPDATE acct SET owner = 'b' WHERE id = 1", [])
        .unwrap();
    tx.commit().unwrap();
    assert_eq!(
        sql(&t.db, "SELECT owner FROM acct"),
        Value::Text("b".into())
    );
    // A lapsed lock nobody took is still its holder's: renew and fence pass.
    t.clock.advance(TTL * 2);
    let tx = t.db.transaction().unwrap();
    lock.fence(&tx, b.token).unwrap();
    tx.rollback().unwrap();
    let end = lock.renew(b.token, TTL).unwrap();
    assert_eq!(end, lock.info().unwrap().unwrap().expires_at);
    assert_eq!(
        lock.renew(a.token, TTL).unwrap_err().kind(),
        ErrorKind::LeaseLost
    );
}

#[test]
fn a_grant_inside_a_transaction_holds_only_if_it_commits() {
    let t = test_db();
    let lock = t.db.lock("x").unwrap();
    let tx = t.db.transaction().unwrap();
    let g = lock.try_acquire_tx(&tx, "a", TTL).unwrap().unwrap();
    tx.rollback().unwrap();
    assert!(lock.info().unwrap().is_none());
    let tx = t.db.transaction().unwrap();
    let g2 = lock.try_acquire_tx(&tx, "a", TTL).unwrap().unwrap();
    tx.commit().unwrap();
    assert_eq!(lock.info().unwrap().unwrap().token, g2.token);
    // The rolled-back grant's token is never handed out again... or it may
    // be: the counter rolled back with it, and nobody ever saw that token
    // hold the lock.
    assert!(g2.token >= g.token);
}

#[test]
fn tokens_keep_growing_after_reopening_and_vacuum() {
    let t = test_db();
    let last = {
        let lock = t.db.lock("x").unwrap();
        let g = lock.try_acquire("a", TTL).unwrap().unwrap();
        lock.release(g.token).unwrap();
        g.token
    };
    // VACUUM on a connection of its own (the same SQLite library).
    honker::rusqlite::Connection::open(&t.path)
        .unwrap()
        .execute_batch("VACUUM")
        .unwrap();
    let db = Database::open(&t.path).unwrap();
    let g = db
        .lock("x")
        .unwrap()
        .try_acquire("b", TTL)
        .unwrap()
        .unwrap();
    assert!(g.token > last);
}

#[test]
fn maintenance_removes_lapsed_holders_and_keeps_live_ones() {
    let t = test_db();
    for i in 0..2500 {
        t.db.lock(&format!("k{i}"))
            .unwrap()
            .try_acquire("a", Duration::from_secs(1))
            .unwrap();
    }
    let live =
        t.db.lock("live")
            .unwrap()
            .try_acquire("a", TTL * 100)
            .unwrap()
            .unwrap();
    t.clock.advance(Duration::from_secs(2));
    let report = t.db.maintain().unwrap();
    assert_eq!(report.locks, 2500);
    let left = holders(&t.db);
    assert_eq!(left.len(), 1);
    assert_eq!(left[0][2], Value::Integer(live.token));
}

#[test]
fn honkers_lock_functions_keep_their_contracts() {
    let t = test_db();
    let int = |q: &str| match sql(&t.db, q) {
        Value::Integer(n) => n,
        v => panic!("{q}: {v:?}"),
    };
    assert_eq!(int("SELECT honker_lock_acquire('leader', 'p1', 60)"), 1);
    assert_eq!(int("SELECT honker_lock_acquire('leader', 'p2', 60)"), 0);
    // Same owner again: 1, and its TTL is not refreshed (Honker's rule).
    let before = t.db.lock("leader").unwrap().info().unwrap().unwrap();
    t.clock.advance(Duration::from_secs(30));
    assert_eq!(int("SELECT honker_lock_acquire('leader', 'p1', 60)"), 1);
    let after = t.db.lock("leader").unwrap().info().unwrap().unwrap();
    assert_eq!(after.expires_at, before.expires_at);
    assert_eq!(int("SELECT honker_lock_renew('leader', 'p2', 60)"), 0);
    assert_eq!(int("SELECT honker_lock_renew('leader', 'p1', 60)"), 1);
    assert_eq!(
        t.db.lock("leader")
            .unwrap()
            .info()
            .unwrap()
            .unwrap()
            .expires_at,
        honker::Clock::now_ms(&t.clock) + 60_000
    );
    // Renew works after a lapse nobody took advantage of.
    t.clock.advance(Duration::from_secs(120));
    assert_eq!(int("SELECT honker_lock_renew('leader', 'p1', 0.5)"), 1);
    assert_eq!(int("SELECT honker_lock_release('leader', 'p2')"), 0);
    assert_eq!(int("SELECT honker_lock_release('leader', 'p1')"), 1);
    assert_eq!(int("SELECT honker_lock_acquire('leader', 'p2', 60)"), 1);
    // Ours: a grant as JSON with its token, NULL while another holds it.
    let taken = match sql(&t.db, "SELECT honker_lock_take('job', 'w1', 30000)") {
        Value::Text(s) => serde_json::from_str::<serde_json::Value>(&s).unwrap(),
        v => panic!("{v:?}"),
    };
    let token = taken["token"].as_i64().unwrap();
    // NULL while held, also for the same owner name (its own holder).
    for owner in ["w2", "w1"] {
        assert_eq!(
            sql(
                &t.db,
                &format!("SELECT honker_lock_take('job', '{owner}', 30000)")
            ),
            Value::Null
        );
    }
    assert_eq!(
        int(&format!("SELECT honker_lock_extend('job', {token}, 60000)")),
        honker::Clock::now_ms(&t.clock) + 60_000
    );
    assert_eq!(int(&format!("SELECT honker_lock_held('job', {token})")), 1);
    assert_eq!(int(&format!("SELECT honker_lock_fence('job', {token})")), 1);
    assert!(matches!(
        sql(&t.db, "SELECT honker_lock_info('job')"),
        Value::Text(_)
    ));
    assert_eq!(int(&format!("SELECT honker_lock_drop('job', {token})")), 1);
    assert_eq!(int(&format!("SELECT honker_lock_held('job', {token})")), 0);
    assert_eq!(sql(&t.db, "SELECT honker_lock_info('job')"), Value::Null);
}

#[test]
fn bad_input_is_a_typed_error_and_changes_nothing() {
    let t = test_db();
    let lock = t.db.lock("x").unwrap();
    let g = lock.try_acquire("a", TTL).unwrap().unwrap();
    let before = holders(&t.db);
    for name in ["", "nul\0", &"x".repeat(1000)] {
        assert_eq!(
            t.db.lock(name).unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
        assert_eq!(
            lock.try_acquire(name, TTL).unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
    }
    for ttl in [Duration::ZERO, Duration::from_secs(31 * 86_400)] {
        assert_eq!(
            lock.try_acquire("b", ttl).unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
        assert_eq!(
            lock.renew(g.token, ttl).unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
    }
    for token in [0, -1] {
        assert_eq!(
            lock.renew(token, TTL).unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
        assert_eq!(
            lock.release(token).unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
    }
    for q in [
        "SELECT honker_lock_acquire('x', 'b', 0)",
        "SELECT honker_lock_acquire('x', 'b', -5)",
        "SELECT honker_lock_acquire('', 'b', 5)",
        "SELECT honker_lock_acquire('x', NULL, 5)",
        "SELECT honker_lock_renew('x', 'a', 0)",
        "SELECT honker_lock_take('x', 'b', 'soon')",
        "SELECT honker_lock_extend('x', 0, 1000)",
        "SELECT honker_lock_fence('x', NULL)",
    ] {
        let tx = t.db.transaction().unwrap();
        let err = tx.query(q, []).unwrap_err();
        assert_eq!(code(&err), "INVALID_ARGUMENT", "{q}: {err}");
        tx.rollback().unwrap();
    }
    assert_eq!(holders(&t.db), before);
}

#[test]
fn a_held_lock_is_renewed_while_held_and_released_at_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("held.db")).unwrap();
    let lock = db.lock("job").unwrap();
    let ttl = Duration::from_millis(300);
    let held = HeldLock::acquire(&lock, "a", ttl, Duration::ZERO, None, None)
        .unwrap()
        .unwrap();
    // Three TTLs later it is still held: renewed, not lapsed.
    std::thread::sleep(ttl * 3);
    assert!(lock.try_acquire("b", ttl).unwrap().is_none());
    assert!(held.renewals() >= 3, "{} renewals", held.renewals());
    assert!(!held.lost());
    let tx = db.transaction().unwrap();
    held.fence(&tx).unwrap();
    tx.rollback().unwrap();
    assert!(held.release().unwrap());
    assert!(!held.release().unwrap(), "released once");
    assert!(lock.info().unwrap().is_none());
    // Dropping a hold releases it too.
    let again = HeldLock::acquire(&lock, "a", ttl, Duration::ZERO, None, None)
        .unwrap()
        .unwrap();
    assert!(again.token() > held.token());
    drop(again);
    assert!(lock.info().unwrap().is_none());
}

/// Issue 53: a worker with concurrency > 1 (or two requests of one web
/// process) names one owner; its holds must still exclude each other, each
/// with its own token, and the first to leave must not release the other.
#[test]
fn holds_that_share_an_owner_name_exclude_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("same-owner.db")).unwrap();
    let lock = db.lock("nightly").unwrap();
    let inside = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let overlaps = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let tokens = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (lock, inside, overlaps, tokens) = (
                lock.clone(),
                inside.clone(),
                overlaps.clone(),
                tokens.clone(),
            );
            std::thread::spawn(move || {
                for _ in 0..5 {
                    let held = HeldLock::acquire(
                        &lock,
                        "worker-1",
                        Duration::from_secs(30),
                        Duration::from_secs(30),
                        None,
                        None,
                    )
                    .unwrap()
                    .expect("acquired within the wait");
                    if inside.fetch_add(1, std::sync::atomic::Ordering::SeqCst) != 0 {
                        overlaps.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                    tokens.lock().unwrap().push(held.token());
                    std::thread::sleep(Duration::from_millis(5));
                    inside.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                    assert!(held.release().unwrap(), "released its own grant");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(overlaps.load(std::sync::atomic::Ordering::SeqCst), 0);
    let mut tokens = tokens.lock().unwrap().clone();
    tokens.sort_unstable();
    tokens.dedup();
    assert_eq!(tokens.len(), 20, "every hold its own token");
    assert!(lock.info().unwrap().is_none());
}

#[test]
fn a_held_lock_taken_by_another_after_a_pause_is_lost_and_its_fence_fails() {
    let t = test_db();
    let lock = t.db.lock("job").unwrap();
    // Renewal every second of real time; the TTL passes on the test clock.
    let held = HeldLock::acquire(
        &lock,
        "a",
        TTL,
        Duration::ZERO,
        Some(Duration::from_secs(1)),
        None,
    )
    .unwrap()
    .unwrap();
    assert!(!held.wait_lost(Duration::from_millis(50)));
    t.clock.advance(TTL * 2);
    let b = lock.try_acquire("b", TTL).unwrap().unwrap();
    assert!(
        held.wait_lost(Duration::from_secs(10)),
        "the renewal saw the loss"
    );
    assert!(held.lost());
    let tx = t.db.transaction().unwrap();
    assert_eq!(held.fence(&tx).unwrap_err().kind(), ErrorKind::LeaseLost);
    drop(tx);
    // Releasing a lost hold releases nothing: B keeps it.
    assert!(!held.release().unwrap());
    assert_eq!(lock.info().unwrap().unwrap().token, b.token);
}

#[test]
fn a_loss_watch_on_the_signal_wakes_at_the_loss_and_at_the_release() {
    // Re-checks on their own only every 100 s: only the renewal's and the
    // release's pokes can end these waits in time.
    let t = common::test_db_with(Options {
        watch_fallback: Duration::from_secs(10),
        ..Options::default()
    });
    let lock = t.db.lock("job").unwrap();
    let every = Some(Duration::from_millis(200));
    let held = HeldLock::acquire(&lock, "a", TTL, Duration::ZERO, every, None)
        .unwrap()
        .unwrap();
    assert_eq!(held.renew_every(), Duration::from_millis(200));
    let watch = |h: &HeldLock| {
        let started = std::time::Instant::now();
        let got = t.db.wait_for(h, Duration::from_secs(60)).unwrap();
        (got, started.elapsed())
    };
    std::thread::scope(|s| {
        let w = s.spawn(|| watch(&held));
        std::thread::sleep(Duration::from_millis(300));
        t.clock.advance(TTL * 2);
        lock.try_acquire("b", TTL).unwrap().unwrap();
        let (got, took) = w.join().unwrap();
        assert_eq!(got, Some(true), "lost");
        assert!(took < Duration::from_secs(5), "{took:?}");
    });
    let other = t.db.lock("other").unwrap();
    let held = HeldLock::acquire(&other, "a", TTL, Duration::ZERO, None, None)
        .unwrap()
        .unwrap();
    std::thread::scope(|s| {
        let w = s.spawn(|| watch(&held));
        std::thread::sleep(Duration::from_millis(300));
        assert!(held.release().unwrap());
        let (got, took) = w.join().unwrap();
        assert_eq!(got, Some(false), "released, not lost");
        assert!(took < Duration::from_secs(5), "{took:?}");
    });
}

#[test]
fn a_cancelled_acquire_gives_up_at_once_and_holds_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("cancel.db")).unwrap();
    let lock = db.lock("job").unwrap();
    let a = lock.try_acquire("a", TTL).unwrap().unwrap();
    let cancel = honker::runtime::Cancel::new(&db);
    let waiter = {
        let (lock, cancel) = (lock.clone(), cancel.clone());
        std::thread::spawn(move || {
            HeldLock::acquire(
                &lock,
                "b",
                TTL,
                Duration::from_secs(60),
                None,
                Some(&cancel),
            )
            .map(|h| h.is_some())
        })
    };
    std::thread::sleep(Duration::from_millis(100));
    let cancelled = Instant::now();
    cancel.cancel();
    assert!(!waiter.join().unwrap().unwrap());
    assert!(cancelled.elapsed() < Duration::from_secs(5));
    assert_eq!(lock.info().unwrap().unwrap().token, a.token);
    // A bad period is refused before anything is taken.
    assert!(lock.release(a.token).unwrap());
    let err = HeldLock::acquire(&lock, "b", TTL, Duration::ZERO, Some(TTL), None).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(lock.info().unwrap().is_none());
}

/// SIGSTOP: a holder paused past its TTL loses the lock to a new holder in
/// another process; when it resumes, its renewal reports the loss and its
/// fenced write is refused.
#[cfg(unix)]
#[test]
fn a_holder_stopped_past_its_ttl_loses_and_its_fenced_write_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("locks.db");
    let db = Database::open(&path).unwrap();
    db.execute("CREATE TABLE work (who TEXT)", []).unwrap();
    let mut child = spawn_child("paused", &path, &[]);
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let held = next_tagged(&mut out);
    let token: i64 = held.strip_prefix("held ").unwrap().parse().unwrap();
    let pid = child.id() as i32;
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    let lock = db.lock("shared").unwrap();
    let mine = lock
        .acquire("me", TTL, Duration::from_secs(10))
        .unwrap()
        .expect("the stopped holder's TTL lapses");
    assert!(mine.token > token);
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
    assert_eq!(next_tagged(&mut out), "lost");
    assert_eq!(next_tagged(&mut out), "refused LeaseLost");
    child.wait().unwrap();
    let rows = db.query("SELECT who FROM work", []).unwrap().rows;
    assert!(rows.is_empty(), "the stale holder wrote {rows:?}");
    assert_eq!(lock.info().unwrap().unwrap().token, mine.token);
}

/// The child: takes the lock, reports, then releases when told (a line on
/// stdin) or never (it is killed). As "paused", it holds the lock with a
/// short TTL and renewal, waits to learn it was lost (the parent stops it
/// past the TTL and takes the lock), then tries a fenced write.
#[test]
fn child_process_entry() {
    let Ok(role) = std::env::var(CHILD_ENV) else {
        return;
    };
    let db = Database::open(std::env::var("HONKER_TEST_DB").unwrap()).unwrap();
    let lock = db.lock("shared").unwrap();
    if role == "paused" {
        let ttl = Duration::from_millis(500);
        let held = HeldLock::acquire(&lock, &role, ttl, Duration::ZERO, None, None)
            .unwrap()
            .unwrap();
        report(&format!("held {}", held.token()));
        assert!(held.wait_lost(Duration::from_secs(60)));
        report("lost");
        let tx = db.transaction().unwrap();
        let refused = held
            .fence(&tx)
            .and_then(|()| tx.execute("INSERT INTO work VALUES ('stale')", []))
            .unwrap_err();
        drop(tx);
        report(&format!("refused {:?}", refused.kind()));
        return;
    }
    let g = lock
        .try_acquire(&role, TTL)
        .unwrap()
        .expect("the child takes the lock");
    report(&format!("held {}", g.token));
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    assert!(lock.release(g.token).unwrap());
    report("released");
}

#[test]
fn a_waiter_is_woken_by_another_processs_release() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("locks.db");
    let db = Database::open(&path).unwrap();
    let mut child = spawn_child("holder", &path, &[]);
    let held = read_tagged(&mut child);
    let token: i64 = held.strip_prefix("held ").unwrap().parse().unwrap();
    let lock = db.lock("shared").unwrap();
    assert!(lock.try_acquire("me", TTL).unwrap().is_none());
    let waiter = {
        let lock = lock.clone();
        std::thread::spawn(move || {
            let started = Instant::now();
            (lock.acquire("me", TTL, Duration::from_secs(30)), started)
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    let told = Instant::now();
    {
        use std::io::Write;
        writeln!(child.stdin.as_mut().unwrap()).unwrap();
    }
    assert_eq!(read_tagged(&mut child), "released");
    let (got, _) = waiter.join().unwrap();
    let g = got.unwrap().expect("the waiter takes the lock");
    assert!(g.token > token);
    // Woken by the commit, not by its 30 s wait running out.
    assert!(
        told.elapsed() < Duration::from_secs(10),
        "{:?}",
        told.elapsed()
    );
    child.wait().unwrap();
}

#[test]
fn a_killed_holders_lock_is_taken_once_its_ttl_lapses() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("locks.db");
    let db = Database::open(&path).unwrap();
    let mut child = spawn_child("doomed", &path, &[]);
    let _ = read_tagged(&mut child);
    child.kill().unwrap();
    child.wait().unwrap();
    let lock = db.lock("shared").unwrap();
    // Held until its TTL (10 s on the real clock) lapses: a short wait fails.
    assert!(lock
        .acquire("me", TTL, Duration::from_millis(100))
        .unwrap()
        .is_none());
    assert_eq!(lock.info().unwrap().unwrap().owner, "doomed");
}

#[test]
fn free_in_says_how_long_until_an_owner_could_take_the_lock() {
    let t = test_db();
    let lock = t.db.lock("l").unwrap();
    assert_eq!(lock.free_in("a").unwrap(), Duration::ZERO);
    let g = lock.try_acquire("a", TTL).unwrap().unwrap();
    assert_eq!(lock.free_in("b").unwrap(), TTL);
    // Its own owner name waits too: every acquire is its own holder.
    assert_eq!(lock.free_in("a").unwrap(), TTL);
    t.clock.advance(Duration::from_secs(4));
    assert_eq!(lock.free_in("b").unwrap(), TTL - Duration::from_secs(4));
    assert_eq!(
        honker::without_waiting(|| lock.free_in("b")).unwrap(),
        TTL - Duration::from_secs(4)
    );
    // It only looked: the holder still holds it.
    assert_eq!(lock.info().unwrap().unwrap().token, g.token);
    lock.release(g.token).unwrap();
    assert_eq!(lock.free_in("b").unwrap(), Duration::ZERO);
    let g = lock.try_acquire("a", TTL).unwrap().unwrap();
    t.clock.advance(TTL);
    assert_eq!(lock.free_in("b").unwrap(), Duration::ZERO, "lapsed");
    assert_eq!(lock.info().unwrap().unwrap().token, g.token);
    assert_eq!(
        lock.free_in("").unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
}
