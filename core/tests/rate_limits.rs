//! Rate limits (ADR 23): GCRA on an injected clock (burst at once, then one
//! call per interval, retry/reset answers), the sliding-window bound
//! `limit + burst − 1` (and Honker's fixed window failing it), cost and
//! peek, refunds on rollback, parameters shared through the file, Honker's
//! SQL contracts, maintenance in bounded batches, four processes on one
//! key, and typed errors that change nothing.

mod common;

use std::cell::Cell;
use std::sync::Arc;
use std::time::Duration;

use common::child::{read_tagged, report, spawn_child, CHILD_ENV};
use common::{code, scalar, sql, test_db, TestDb};
use honker::rate::{RateDecision, RateLimit, RateLimiter};
use honker::rusqlite::types::Value;
use honker::{Clock, Database, ErrorKind, Options};

const MS: Duration = Duration::from_millis(1);

fn limiter(t: &TestDb, name: &str, limit: i64, per: Duration, burst: i64) -> RateLimiter {
    t.db.rate_limiter(name, RateLimit::new(limit, per).burst(burst))
        .unwrap()
}

fn keys(db: &Database) -> i64 {
    match scalar(db, "SELECT count(*) FROM _honker_rate_limit_keys") {
        Value::Integer(n) => n,
        v => panic!("{v:?}"),
    }
}

#[test]
fn burst_at_once_then_one_call_per_interval_with_exact_answers() {
    let t = test_db();
    let rl = limiter(&t, "api", 10, Duration::from_secs(1), 6);
    for i in 0..6 {
        let d = rl.try_acquire("k", 1).unwrap();
        assert!(d.allowed, "call {i}");
        assert_eq!(d.remaining, 5 - i);
        assert_eq!(d.limit, 10);
        assert_eq!(d.retry_after, Duration::ZERO);
        assert_eq!(d.reset_after, 100 * MS * (i as u32 + 1));
    }
    let seventh = rl.try_acquire("k", 1).unwrap();
    assert_eq!(
        seventh,
        RateDecision {
            allowed: false,
            limit: 10,
            remaining: 0,
            retry_after: 100 * MS,
            reset_after: 600 * MS,
        }
    );
    // Refused calls take nothing: 99 ms later still refused, 100 ms allowed.
    t.clock.advance(99 * MS);
    assert_eq!(rl.try_acquire("k", 1).unwrap().retry_after, MS);
    t.clock.advance(MS);
    assert!(rl.try_acquire("k", 1).unwrap().allowed);
    // Keys are independent.
    assert!(rl.try_acquire("other", 1).unwrap().allowed);
    // A steady 10/s for 60 s is all allowed; 4 per second works (250 ms).
    for _ in 0..600 {
        t.clock.advance(100 * MS);
        assert!(rl.try_acquire("k", 1).unwrap().allowed);
    }
    let four = limiter(&t, "four", 4, Duration::from_secs(1), 1);
    assert!(four.try_acquire("", 1).unwrap().allowed);
    t.clock.advance(249 * MS);
    assert!(!four.try_acquire("", 1).unwrap().allowed);
    t.clock.advance(MS);
    assert!(four.try_acquire("", 1).unwrap().allowed);
}

/// Every half-open window of length `per` holds at most `limit + burst − 1`
/// grants: checked at every grant of a ragged call pattern.
fn max_in_window(grants: &[i64], per_ms: i64) -> usize {
    let mut best = 0;
    let mut j = 0;
    for i in 0..grants.len() {
        while j < grants.len() && grants[j] < grants[i] + per_ms {
            j += 1;
        }
        best = best.max(j - i);
    }
    best
}

fn ragged_grants(t: &TestDb, rl: &RateLimiter, steps: usize) -> Vec<i64> {
    // A deterministic ragged pattern: bursts of calls, pauses, 1–37 ms steps.
    let mut grants = Vec::new();
    let mut x: u64 = 12345;
    for _ in 0..steps {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let step = (x >> 33) % 37 + 1;
        let pause = if (x >> 20).is_multiple_of(50) {
            1500
        } else {
            0
        };
        t.clock.advance(Duration::from_millis(step + pause));
        for _ in 0..(x >> 40) % 4 {
            if rl.try_acquire("k", 1).unwrap().allowed {
                grants.push(t.clock.now_ms());
            }
        }
    }
    grants
}

#[test]
fn no_window_of_length_per_holds_more_than_limit_plus_burst_minus_one() {
    let t = test_db();
    for (limit, burst) in [(10, 1), (10, 6), (7, 3), (100, 1)] {
        let name = format!("w{limit}-{burst}");
        let rl = limiter(&t, &name, limit, Duration::from_secs(1), burst);
        let grants = ragged_grants(&t, &rl, 20_000);
        let most = max_in_window(&grants, 1000) as i64;
        let bound = limit + burst - 1;
        assert!(most <= bound, "{name}: {most} grants in one window");
        // The calls outpace the limit, so the bound is reached: the limiter
        // is not merely stricter than it says.
        if limit <= 10 {
            assert_eq!(most, bound, "{name}");
        }
    }
    // Honker's fixed window (a count per aligned window, reset at its edge)
    // on calls at 999 ms and 1000 ms: the same check catches its doubling.
    let mut fixed = Vec::new();
    let mut window = (0, 0);
    for at in [999; 15].into_iter().chain([1000; 15]) {
        let start = at / 1000 * 1000;
        if window.0 != start {
            window = (start, 0);
        }
        if window.1 < 10 {
            window.1 += 1;
            fixed.push(at);
        }
    }
    assert_eq!(max_in_window(&fixed, 1000), 20);
}

#[test]
fn cost_takes_that_many_a_peek_takes_nothing_and_too_much_is_refused() {
    let t = test_db();
    let rl = limiter(&t, "cost", 10, Duration::from_secs(1), 5);
    let d = rl.try_acquire("k", 3).unwrap();
    assert!(d.allowed);
    assert_eq!(d.remaining, 2);
    let peek = rl.try_acquire("k", 0).unwrap();
    assert!(peek.allowed);
    assert_eq!((peek.remaining, peek.reset_after), (2, 300 * MS));
    assert_eq!(
        rl.try_acquire("k", 0).unwrap(),
        peek,
        "a peek changed nothing"
    );
    let before = common::snapshot(&t.db);
    let err = rl.try_acquire("k", 6).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.message().contains("never be allowed"), "{err}");
    assert_eq!(
        rl.try_acquire("k", -1).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(common::snapshot(&t.db), before);
    let three = rl.try_acquire("k", 3).unwrap();
    assert!(!three.allowed);
    assert_eq!(three.retry_after, 100 * MS);
}

#[test]
fn a_check_in_a_transaction_that_rolls_back_refunds_itself() {
    let t = test_db();
    let rl = limiter(&t, "refund", 1, Duration::from_secs(60), 1);
    let tx = t.db.transaction().unwrap();
    assert!(rl.try_acquire_tx(&tx, "k", 1).unwrap().allowed);
    assert!(!rl.try_acquire_tx(&tx, "k", 1).unwrap().allowed);
    tx.rollback().unwrap();
    assert_eq!(keys(&t.db), 0);
    let tx = t.db.transaction().unwrap();
    assert!(rl.try_acquire_tx(&tx, "k", 1).unwrap().allowed);
    tx.commit().unwrap();
    assert!(!rl.try_acquire("k", 1).unwrap().allowed);
}

#[test]
fn parameters_are_shared_through_the_file() {
    let t = test_db();
    let other = t.reopen();
    let ten = RateLimit::new(10, Duration::from_secs(1)).burst(2);
    let rl = t.db.rate_limiter("mail", ten).unwrap();
    // The same values: fine; other values: refused, nothing changes.
    other.rate_limiter("mail", ten).unwrap();
    let before = common::snapshot(&t.db);
    let err = other
        .rate_limiter("mail", RateLimit::new(20, Duration::from_secs(1)))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.message().contains("update"), "{err}");
    assert_eq!(common::snapshot(&t.db), before);
    // A process that knows only the name uses what is stored.
    let stored = other.rate_limiter_stored("mail").unwrap();
    assert_eq!(stored.limit().unwrap(), ten);
    assert_eq!(
        other.rate_limiter_stored("nope").unwrap_err().kind(),
        ErrorKind::NotFound
    );
    // An update reaches every handle, in every process.
    let twenty = RateLimit::new(20, Duration::from_secs(1)).burst(3);
    other.rate_limiter_update("mail", twenty).unwrap();
    assert_eq!(rl.limit().unwrap(), twenty);
    for _ in 0..3 {
        assert!(rl.try_acquire("", 1).unwrap().allowed);
    }
    let d = rl.try_acquire("", 1).unwrap();
    assert_eq!((d.allowed, d.limit, d.retry_after), (false, 20, 50 * MS));
}

/// A handle remembers the stored parameters from one check to the next
/// while nothing else commits (a repeated check is one statement), and reads
/// them again after any other commit: another connection's update, this
/// connection's own through SQL, anything at all another process writes.
#[test]
fn a_handle_reads_the_parameters_again_after_any_other_commit() {
    let t = test_db();
    let other = t.reopen();
    let rl = limiter(&t, "mail", 1_000, Duration::from_secs(1), 1_000);
    let check = || {
        let before = honker::vm_steps_on_this_thread();
        let d = rl.try_acquire("k", 1).unwrap();
        assert!(d.allowed);
        (d.limit, honker::vm_steps_on_this_thread() - before)
    };
    check(); // the key's first check inserts it
    let (_, remembered) = check();
    assert_eq!(check().1, remembered);
    // Another process writes something else: read again, then remembered.
    other
        .queue("q")
        .unwrap()
        .enqueue(serde_json::json!(1), &Default::default())
        .unwrap();
    let (_, read) = check();
    assert!(
        remembered < read,
        "{remembered} steps, not fewer than {read}"
    );
    assert_eq!(check().1, remembered);
    // Another process updates the parameters: the next check uses them.
    other
        .rate_limiter_update(
            "mail",
            RateLimit::new(900, Duration::from_secs(1)).burst(900),
        )
        .unwrap();
    assert_eq!(check().0, 900);
    // This connection updates them through SQL (not through this handle).
    sql(
        &t.db,
        "SELECT honker_rate_limit_set('mail', 800, 1000, 800)",
    );
    assert_eq!(check().0, 800);
    // A transaction that changed them and rolled back changes nothing.
    let tx = t.db.transaction().unwrap();
    tx.query("SELECT honker_rate_limit_set('mail', 700, 1000, 700)", [])
        .unwrap();
    assert_eq!(rl.try_acquire_tx(&tx, "k", 1).unwrap().limit, 700);
    tx.rollback().unwrap();
    assert_eq!(check().0, 800);
    assert_eq!(rl.limit().unwrap().limit, 800);
}

#[test]
fn bad_parameters_and_keys_are_typed_errors_and_change_nothing() {
    let t = test_db();
    let before = common::snapshot(&t.db);
    let s = Duration::from_secs(1);
    for bad in [
        RateLimit::new(0, s),
        RateLimit::new(-1, s),
        RateLimit::new(1, Duration::ZERO),
        RateLimit::new(1, Duration::from_micros(1500)),
        RateLimit::new(1, Duration::from_secs(367 * 86_400)),
        RateLimit::new(1, s).burst(0),
        RateLimit::new(1_000_000_001, s),
    ] {
        let err = t.db.rate_limiter("x", bad).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{bad:?}");
    }
    assert_eq!(
        t.db.rate_limiter("", RateLimit::new(1, s))
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(common::snapshot(&t.db), before);
    let rl = limiter(&t, "x", 1, s, 1);
    let long = "k".repeat(513);
    assert_eq!(
        rl.try_acquire(&long, 1).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(keys(&t.db), 0);
}

#[test]
fn acquire_sleeps_retry_after_and_gives_up_when_it_lies_beyond_the_wait() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("wait.db")).unwrap();
    let rl = db
        .rate_limiter("w", RateLimit::new(10, Duration::from_secs(1)))
        .unwrap();
    assert!(rl.try_acquire("", 1).unwrap().allowed);
    let started = std::time::Instant::now();
    assert!(rl.acquire("", 1, Duration::from_secs(5)).unwrap().allowed);
    let waited = started.elapsed();
    assert!(
        waited >= 90 * MS && waited < Duration::from_secs(2),
        "{waited:?}"
    );
    let started = std::time::Instant::now();
    let d = rl.acquire("", 1, 10 * MS).unwrap();
    assert!(!d.allowed);
    assert!(started.elapsed() < 50 * MS, "no sleep when it cannot help");
}

#[test]
fn a_rate_wait_looks_without_io_and_answers_its_last_refusal() {
    use honker::rate::RateWait;
    use honker::Source;
    let t = test_db();
    let rl = limiter(&t, "w", 1, Duration::from_secs(10), 1);
    let w = RateWait::new(&rl, "k", 1);
    assert!(w.ends_early());
    assert_eq!(w.look().unwrap(), Some(Duration::ZERO), "no try yet: now");
    assert!(w.take().unwrap().unwrap().allowed);
    assert_eq!(w.take().unwrap(), None, "refused");
    let again = w.retry_in().unwrap();
    assert!(
        again > Duration::from_secs(9) && again <= Duration::from_secs(10),
        "{again:?}"
    );
    let looked = w.look().unwrap().unwrap();
    assert!(
        looked <= again && looked > Duration::from_secs(9),
        "{looked:?}"
    );
    let d = w.answer().unwrap();
    assert!(
        !d.allowed && d.retry_after == Duration::from_secs(10),
        "{d:?}"
    );
    assert_eq!(keys(&t.db), 1, "a look and an answer write nothing");
    // The wait ends at once: the refusal's time lies beyond it.
    let started = std::time::Instant::now();
    assert!(!rl.acquire("k", 1, Duration::from_secs(5)).unwrap().allowed);
    assert!(started.elapsed() < Duration::from_secs(1));
}

#[test]
fn a_cancelled_rate_acquire_ends_at_once_with_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("cancel.db")).unwrap();
    let rl = db
        .rate_limiter("w", RateLimit::new(1, Duration::from_secs(3)))
        .unwrap();
    assert!(rl.try_acquire("", 1).unwrap().allowed);
    let cancel = honker::runtime::Cancel::new(&db);
    let started = std::time::Instant::now();
    let d = std::thread::scope(|s| {
        let waiter = s.spawn(|| cancel.acquire_rate(&rl, "", 1, Duration::from_secs(10)));
        std::thread::sleep(Duration::from_millis(100));
        cancel.cancel();
        waiter.join().unwrap()
    });
    assert_eq!(d.unwrap(), None);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    // Cancelled before it starts: nothing is tried.
    assert_eq!(
        cancel
            .acquire_rate(&rl, "other", 1, Duration::from_secs(1))
            .unwrap(),
        None
    );
    assert!(rl.try_acquire("other", 1).unwrap().allowed);
}

#[test]
fn honkers_rate_limit_functions_keep_their_contracts() {
    let t = test_db();
    let got: Vec<Value> = (0..5)
        .map(|_| sql(&t.db, "SELECT honker_rate_limit_try('h', 3, 60)"))
        .collect();
    assert_eq!(
        got,
        [1, 1, 1, 0, 0].map(Value::Integer).to_vec(),
        "five calls on (3, 60)"
    );
    // Refills at limit per period: one call every 20 s.
    t.clock.advance(Duration::from_secs(20));
    assert_eq!(
        sql(&t.db, "SELECT honker_rate_limit_try('h', 3, 60)"),
        Value::Integer(1)
    );
    assert_eq!(
        sql(&t.db, "SELECT honker_rate_limit_try('h', 3, 60)"),
        Value::Integer(0)
    );
    let tx = t.db.transaction().unwrap();
    let err = tx
        .query("SELECT honker_rate_limit_try('h', 0, 60)", [])
        .unwrap_err();
    assert_eq!(code(&err), "INVALID_ARGUMENT", "{err}");
    drop(tx);
    // Sweep: keys refilled at least that long ago.
    assert_eq!(
        sql(&t.db, "SELECT honker_rate_limit_sweep(1)"),
        Value::Integer(0)
    );
    t.clock.advance(Duration::from_secs(61));
    assert_eq!(
        sql(&t.db, "SELECT honker_rate_limit_sweep(30)"),
        Value::Integer(0)
    );
    t.clock.advance(Duration::from_secs(30));
    assert_eq!(
        sql(&t.db, "SELECT honker_rate_limit_sweep(30)"),
        Value::Integer(1)
    );
    assert_eq!(keys(&t.db), 0);
}

#[test]
fn our_sql_functions_share_the_stored_limiter() {
    let t = test_db();
    assert_eq!(
        sql(&t.db, "SELECT honker_rate_limit_set('api', 10, 1000, 6)"),
        Value::Integer(1)
    );
    assert_eq!(
        sql(&t.db, "SELECT honker_rate_limit_info('api')"),
        Value::Text(r#"{"burst":6,"limit":10,"per_ms":1000}"#.into())
    );
    let rl = t.db.rate_limiter_stored("api").unwrap();
    for _ in 0..5 {
        assert!(rl.try_acquire("c", 1).unwrap().allowed);
    }
    let v = sql(&t.db, "SELECT honker_rate_limit_check('api', 'c', 1)");
    let Value::Text(j) = v else { panic!() };
    let j: serde_json::Value = serde_json::from_str(&j).unwrap();
    assert_eq!(
        j,
        serde_json::json!({"allowed": true, "limit": 10, "remaining": 0,
                           "retry_after": 0, "reset_after": 600})
    );
    let Value::Text(j) = sql(&t.db, "SELECT honker_rate_limit_check('api', 'c', 1)") else {
        panic!()
    };
    assert!(
        j.contains(r#""allowed":false"#) && j.contains(r#""retry_after":100"#),
        "{j}"
    );
    let tx = t.db.transaction().unwrap();
    for (q, want) in [
        (
            "SELECT honker_rate_limit_check('nope', 'c', 1)",
            "NOT_FOUND",
        ),
        (
            "SELECT honker_rate_limit_check('api', 'c', 7)",
            "INVALID_ARGUMENT",
        ),
        (
            "SELECT honker_rate_limit_set('api', 10, 0, 1)",
            "INVALID_ARGUMENT",
        ),
    ] {
        let err = tx.query(q, []).unwrap_err();
        assert_eq!(code(&err), want, "{q}: {err}");
    }
    drop(tx);
    assert_eq!(
        sql(&t.db, "SELECT honker_rate_limit_info('nope')"),
        Value::Null
    );
}

#[test]
fn maintenance_removes_a_million_idle_keys_in_bounded_batches() {
    let t = test_db();
    let rl = limiter(&t, "many", 1, Duration::from_secs(60), 1);
    let tx = t.db.transaction().unwrap();
    // 1,000 keys used once through the API; 999,000 more written as such a
    // check leaves them (their tat one interval, 60 s, from now), which in
    // a debug build takes a second instead of half a minute.
    for i in 0..1_000 {
        assert!(rl.try_acquire_tx(&tx, &i.to_string(), 1).unwrap().allowed);
    }
    let tat = (t.clock.now_ms() + 60_000) * 1000;
    let left = tx
        .query(
            "SELECT count(*) FROM _honker_rate_limit_keys WHERE tat_us = ?1",
            [tat],
        )
        .unwrap();
    assert_eq!(
        left.rows[0][0],
        Value::Integer(1_000),
        "the API leaves that tat"
    );
    tx.execute(
        "WITH RECURSIVE n(i) AS (SELECT 1000 UNION ALL SELECT i + 1 FROM n WHERE i < 999999)
         INSERT INTO _honker_rate_limit_keys (name, key, tat_us) SELECT 'many', i, ?1 FROM n",
        [tat],
    )
    .unwrap();
    tx.commit().unwrap();
    assert_eq!(keys(&t.db), 1_000_000);
    // Not yet refilled: kept.
    t.clock.advance(Duration::from_secs(59));
    assert_eq!(t.db.maintain().unwrap().rate_limit_keys, 0);
    // A key used now, then the rest refilled.
    t.clock.advance(Duration::from_secs(1));
    assert!(rl.try_acquire("busy", 1).unwrap().allowed);
    let before = t.db.write_transaction_count();
    let report = t.db.maintain().unwrap();
    assert_eq!(report.rate_limit_keys, 1_000_000);
    // In bounded batches: a thousand keys a transaction at most.
    let writes = t.db.write_transaction_count() - before;
    assert!(writes >= 1000, "{writes} write transactions");
    assert_eq!(keys(&t.db), 1);
    assert!(
        !rl.try_acquire("busy", 1).unwrap().allowed,
        "a live key is kept"
    );
}

/// A clock that remembers, per thread, the last time it handed out: the
/// `now` a check on this thread used.
#[derive(Debug)]
struct Recording;

thread_local! {
    static LAST: Cell<i64> = const { Cell::new(0) };
}

impl Clock for Recording {
    fn now_ms(&self) -> i64 {
        let now = honker::SystemClock.now_ms();
        LAST.with(|l| l.set(now));
        now
    }
}

/// The child: 10,000 checks on one key, each granted one recorded in the
/// same transaction with the time the check used.
#[test]
fn child_process_entry() {
    let Ok(_role) = std::env::var(CHILD_ENV) else {
        return;
    };
    let options = Options {
        clock: Arc::new(Recording),
        ..Options::default()
    };
    let db = Database::open_with(std::env::var("HONKER_TEST_DB").unwrap(), options).unwrap();
    let rl = db.rate_limiter_stored("shared").unwrap();
    report("ready");
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    let mut granted = 0;
    for _ in 0..10_000 {
        let tx = db.transaction().unwrap();
        if rl.try_acquire_tx(&tx, "one", 1).unwrap().allowed {
            let at = LAST.with(Cell::get);
            tx.execute("INSERT INTO audit (at) VALUES (?1)", [at])
                .unwrap();
            granted += 1;
        }
        tx.commit().unwrap();
    }
    report(&format!("granted {granted}"));
}

#[test]
fn four_processes_on_one_key_keep_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.db");
    let db = Database::open(&path).unwrap();
    db.execute("CREATE TABLE audit (at INTEGER NOT NULL)", [])
        .unwrap();
    let (limit, burst) = (50, 5);
    db.rate_limiter(
        "shared",
        RateLimit::new(limit, Duration::from_millis(500)).burst(burst),
    )
    .unwrap();
    let mut children: Vec<_> = (0..4)
        .map(|i| spawn_child(&format!("p{i}"), &path, &[]))
        .collect();
    for c in &mut children {
        assert_eq!(read_tagged(c), "ready");
    }
    for c in &mut children {
        use std::io::Write;
        writeln!(c.stdin.as_mut().unwrap()).unwrap();
    }
    let mut total = 0;
    for c in &mut children {
        let r = read_tagged(c);
        total += r.strip_prefix("granted ").unwrap().parse::<i64>().unwrap();
        assert!(c.wait().unwrap().success());
    }
    let grants: Vec<i64> = db
        .query("SELECT at FROM audit ORDER BY at", [])
        .unwrap()
        .rows
        .into_iter()
        .map(|r| match r[0] {
            Value::Integer(n) => n,
            ref v => panic!("{v:?}"),
        })
        .collect();
    assert_eq!(grants.len() as i64, total);
    assert!(total > limit, "the run spanned several periods: {total}");
    let most = max_in_window(&grants, 500) as i64;
    let bound = limit + burst - 1;
    assert!(most <= bound, "{most} grants in one 500 ms window");
}

// ----- queue rate limits ----------------------------------------------------

fn attempts(db: &Database, queue: &str) -> Vec<i64> {
    db.query(
        "SELECT attempts FROM _honker_jobs WHERE queue = ?1 AND state = 'ready' ORDER BY id",
        [queue],
    )
    .unwrap()
    .rows
    .into_iter()
    .map(|r| match r[0] {
        Value::Integer(n) => n,
        ref v => panic!("{v:?}"),
    })
    .collect()
}

#[test]
fn a_limited_queues_claim_takes_what_the_limit_allows_and_leaves_the_rest_untouched() {
    let t = test_db();
    let q = t.db.queue("mail").unwrap();
    q.enqueue_many(
        (0..20).map(|i| serde_json::json!(i)),
        &honker::EnqueueOptions::default(),
    )
    .unwrap();
    let limit = RateLimit::new(10, Duration::from_secs(1)).burst(3);
    q.set_rate_limit(Some(limit)).unwrap();
    assert_eq!(
        t.db.queue("mail").unwrap().rate_limit().unwrap(),
        Some(limit)
    );
    assert_eq!(q.claim("w", 10).unwrap().len(), 3, "the burst");
    assert!(q.claim("w", 10).unwrap().is_empty(), "then nothing");
    assert_eq!(
        attempts(&t.db, "mail"),
        vec![0; 17],
        "over-limit jobs keep their attempts"
    );
    t.clock.advance(99 * MS);
    assert!(q.claim("w", 10).unwrap().is_empty());
    t.clock.advance(MS);
    assert_eq!(
        q.claim("w", 10).unwrap().len(),
        1,
        "one interval later, one"
    );
    // Honker's SQL claim obeys the same limit.
    let Value::Text(batch) = sql(&t.db, "SELECT honker_claim_batch('mail', 'sql', 5, 60)") else {
        panic!()
    };
    assert_eq!(batch, "[]");
    t.clock.advance(200 * MS);
    let Value::Text(batch) = sql(&t.db, "SELECT honker_claim_batch('mail', 'sql', 5, 60)") else {
        panic!()
    };
    assert_eq!(
        serde_json::from_str::<Vec<serde_json::Value>>(&batch)
            .unwrap()
            .len(),
        2
    );
    // SQL sets and reads the same setting; NULL lifts it.
    assert_eq!(
        sql(&t.db, "SELECT honker_queue_rate_limit_info('mail')"),
        Value::Text(r#"{"burst":3,"limit":10,"per_ms":1000}"#.into())
    );
    sql(
        &t.db,
        "SELECT honker_queue_rate_limit('mail', NULL, NULL, NULL)",
    );
    assert_eq!(q.rate_limit().unwrap(), None);
    assert_eq!(q.claim("w", 100).unwrap().len(), 14, "unlimited again");
    let err = q
        .set_rate_limit(Some(RateLimit::new(0, Duration::from_secs(1))))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert_eq!(q.rate_limit().unwrap(), None);
}

/// 1,000 ready jobs on a queue limited to 5 a second, four workers (each
/// its own connection, as processes are) claiming with waits: no second
/// starts more than 5, and a worker that gets nothing sleeps until the limit
/// allows the next start instead of spinning (at most 2 empty claim
/// transactions a second; 4 under Wine).
#[test]
fn four_workers_on_a_queue_limited_to_5_a_second_never_start_more() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("limited.db");
    let db = limited_file(&path, 1000, RateLimit::new(5, Duration::from_secs(1)));
    let lease = Duration::from_secs(60);
    let run_for = Duration::from_secs(3);
    let workers: Vec<_> = (0..4)
        .map(|i| {
            let path = path.clone();
            std::thread::spawn(move || {
                let db = Database::open(&path).unwrap();
                let q = db.queue("mail").unwrap();
                let options = honker::ClaimOptions {
                    lease: Some(lease),
                    wait: Duration::from_millis(500),
                };
                let started = std::time::Instant::now();
                let mut starts = Vec::new();
                while started.elapsed() < run_for {
                    for job in q.claim_with(&format!("w{i}"), 3, &options).unwrap() {
                        // The claim's own clock: the lease runs from it.
                        starts.push(job.lease_expires_at - lease.as_millis() as i64);
                        job.ack().unwrap();
                    }
                }
                let writes = db.write_transaction_count();
                (starts, writes, started.elapsed())
            })
        })
        .collect();
    let mut all = Vec::new();
    for w in workers {
        let (starts, writes, took) = w.join().unwrap();
        // Each start is one claim and one ack; the rest claimed nothing. A
        // worker that spun would make hundreds. The workers' wake-ups are
        // spread (a jitter of up to 25 ms) so that few lose a race for a
        // start: at most 2 a second here. Under Wine a claim transaction is
        // slow enough that more wake-ups fall inside another's claim (8 and
        // 11 in 3 s in two fresh-clone runs, 2 a second in every run alone):
        // the bound there is 4 a second, which still tells a sleep from a
        // spin.
        let per_second = if cfg!(windows) { 4.0 } else { 2.0 };
        let empty = writes as f64 - 2.0 * starts.len() as f64;
        assert!(
            empty <= per_second * took.as_secs_f64() + 1.0,
            "{empty} empty claim transactions in {took:?}"
        );
        all.extend(starts);
    }
    all.sort();
    let most = max_in_window(&all, 1000);
    assert!(most <= 5, "{most} starts in one second");
    assert!(
        all.len() >= 10,
        "the limit, not the workers, bound it: {} starts",
        all.len()
    );
    assert!(attempts(&db, "mail").iter().all(|&a| a == 0));
}

#[test]
fn the_worker_runtime_sleeps_until_a_limited_queue_lets_the_next_job_start() {
    use honker::runtime::{HandlerOptions, Outcome, Worker, WorkerOptions};
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("w.db")).unwrap();
    let q = db.queue("mail").unwrap();
    q.enqueue_many(
        (0..200).map(|i| serde_json::json!(i)),
        &honker::EnqueueOptions::default(),
    )
    .unwrap();
    q.set_rate_limit(Some(RateLimit::new(4, Duration::from_secs(1))))
        .unwrap();
    let w = Worker::new(
        &db,
        WorkerOptions {
            worker_id: "w1".into(),
            concurrency: 4,
            ..WorkerOptions::default()
        },
    )
    .unwrap();
    w.register(&q, HandlerOptions::default()).unwrap();
    let before = db.write_transaction_count();
    let started = std::time::Instant::now();
    let mut starts = Vec::new();
    while started.elapsed() < Duration::from_millis(2500) {
        if let Some(task) = w.next(Duration::from_millis(200)).unwrap() {
            starts.push(honker::SystemClock.now_ms());
            w.complete(task, Outcome::Ack(None)).unwrap();
        }
    }
    let took = started.elapsed().as_secs_f64();
    let writes = (db.write_transaction_count() - before) as f64;
    assert!(max_in_window(&starts, 1000) <= 4 + 1, "{starts:?}");
    assert!(
        (8..=12).contains(&starts.len()),
        "{} starts in {took} s",
        starts.len()
    );
    // A claim and an ack per job (the ack may refill in its own
    // transaction); the waiting adds at most 2 a second.
    assert!(
        writes <= 2.0 * starts.len() as f64 + 2.0 * took + 1.0,
        "{writes} write transactions for {} jobs in {took} s",
        starts.len()
    );
    w.shutdown();
}

// ----- blocks of starts reserved ahead (ADR 23 §9) --------------------------

/// The queue's stored `tat` (µs), as another connection sees it.
fn stored_tat(db: &Database, queue: &str) -> Option<i64> {
    match db
        .query(
            "SELECT value FROM _honker_settings \
             WHERE scope = 'queue_rate_limit' AND name = ?1 AND key = 'tat_us'",
            [queue],
        )
        .unwrap()
        .rows
        .pop()
        .map(|mut r| r.remove(0))
    {
        Some(Value::Integer(n)) => Some(n),
        None => None,
        v => panic!("{v:?}"),
    }
}

/// Queue `mail` of `db` with `jobs` ready jobs and `limit`.
fn limited_queue_of(db: &Database, jobs: usize, limit: RateLimit) -> honker::Queue {
    let q = db.queue("mail").unwrap();
    q.enqueue_many(
        (0..jobs).map(|i| serde_json::json!(i)),
        &honker::EnqueueOptions::default(),
    )
    .unwrap();
    q.set_rate_limit(Some(limit)).unwrap();
    q
}

fn limited_queue(t: &TestDb, jobs: usize, limit: RateLimit) -> honker::Queue {
    limited_queue_of(&t.db, jobs, limit)
}

/// A file at `path` (on the system clock) whose queue `mail` has `jobs`
/// ready jobs and `limit`.
fn limited_file(path: &std::path::Path, jobs: usize, limit: RateLimit) -> Database {
    let db = Database::open(path).unwrap();
    limited_queue_of(&db, jobs, limit);
    db
}

/// A limit that never binds: the first claim writes the queue's state with
/// a block of 256 starts reserved after its 100 ms validity; the next 256
/// claims write nothing for the limit; then, or once the validity passed,
/// a claim writes again.
#[test]
fn a_limit_that_does_not_bind_writes_its_state_once_per_block_of_starts() {
    let t = test_db();
    let never = RateLimit::new(1_000_000_000, Duration::from_secs(1)).burst(1_000_000);
    let q = limited_queue(&t, 1000, never);
    let now_us = t.clock.now_ms() * 1000;
    assert_eq!(q.claim("w", 1).unwrap().len(), 1);
    let block = stored_tat(&t.db, "mail").unwrap();
    assert_eq!(
        block,
        now_us + 100_000 + 256,
        "256 slots of 1 µs after 100 ms"
    );
    for _ in 0..256 {
        assert_eq!(q.claim("w", 1).unwrap().len(), 1);
        assert_eq!(stored_tat(&t.db, "mail"), Some(block), "no write");
    }
    assert_eq!(q.claim("w", 1).unwrap().len(), 1);
    let next = stored_tat(&t.db, "mail").unwrap();
    assert!(next > block, "the block ran out: a write (and a new block)");
    q.claim("w", 1).unwrap();
    assert_eq!(stored_tat(&t.db, "mail"), Some(next));
    t.clock.advance(101 * MS);
    q.claim("w", 1).unwrap();
    assert!(
        stored_tat(&t.db, "mail").unwrap() > next,
        "its validity passed"
    );
    // A batch takes its starts from a block too: a claim of 32 reserves
    // max(256, 4 × 32) starts.
    t.clock.advance(101 * MS);
    assert_eq!(q.claim("w", 32).unwrap().len(), 32);
    let batch = stored_tat(&t.db, "mail").unwrap();
    for _ in 0..3 {
        assert_eq!(q.claim("w", 32).unwrap().len(), 32);
    }
    assert_eq!(stored_tat(&t.db, "mail"), Some(batch));
}

/// Claims inside the caller's transaction take starts from a block but
/// never reserve one (the block would outlive a rollback); a claim that
/// finds fewer jobs than it asked for leaves the rest in the block.
#[test]
fn only_a_claim_in_its_own_transaction_reserves_a_block() {
    let t = test_db();
    let never = RateLimit::new(1_000_000_000, Duration::from_secs(1)).burst(1_000_000);
    let q = limited_queue(&t, 300, never);
    let now_us = t.clock.now_ms() * 1000;
    let tx = t.db.transaction().unwrap();
    assert_eq!(q.claim_tx(&tx, "w", 1, None).unwrap().len(), 1);
    tx.commit().unwrap();
    assert_eq!(stored_tat(&t.db, "mail"), Some(now_us + 1), "exact");
    let tx = t.db.transaction().unwrap();
    q.claim_tx(&tx, "w", 1, None).unwrap();
    tx.rollback().unwrap();
    assert_eq!(stored_tat(&t.db, "mail"), Some(now_us + 1), "rolled back");
    q.claim("w", 1).unwrap();
    let block = stored_tat(&t.db, "mail").unwrap();
    assert_eq!(block, now_us + 100_000 + 256);
    let tx = t.db.transaction().unwrap();
    assert_eq!(q.claim_tx(&tx, "w", 1, None).unwrap().len(), 1);
    tx.commit().unwrap();
    assert_eq!(stored_tat(&t.db, "mail"), Some(block), "from the block");
    // 297 jobs left: the block's 255 starts, then exact claims.
    assert_eq!(q.claim("w", 255).unwrap().len(), 255);
    assert_eq!(stored_tat(&t.db, "mail"), Some(block));
    assert_eq!(q.claim("w", 100).unwrap().len(), 42);
    assert!(stored_tat(&t.db, "mail").unwrap() > block);
    q.enqueue(serde_json::json!(1), &honker::EnqueueOptions::default())
        .unwrap();
    let short = stored_tat(&t.db, "mail").unwrap();
    assert_eq!(q.claim("w", 1).unwrap().len(), 1);
    assert!(
        stored_tat(&t.db, "mail").unwrap() > short,
        "a claim that found fewer than it asked reserved no block"
    );
}

/// A block never outlives the limit it was reserved under: another
/// process's stricter limit applies at the next claim, and a limit lifted
/// and set again (its state reset) is decided afresh.
#[test]
fn a_block_is_dropped_when_the_limit_changes_or_is_reset() {
    let t = test_db();
    let never = RateLimit::new(1_000_000_000, Duration::from_secs(1)).burst(1_000_000);
    let q = limited_queue(&t, 100, never);
    let other = t.reopen();
    let oq = other.queue("mail").unwrap();
    q.claim("w", 1).unwrap();
    let block = stored_tat(&t.db, "mail").unwrap();
    q.claim("w", 1).unwrap();
    assert_eq!(stored_tat(&t.db, "mail"), Some(block), "the block serves");
    // Another process lifts the limit and sets it again, in the same
    // millisecond: the state starts over, and the block (reserved in the
    // old state, not counted in the new) is not used.
    oq.set_rate_limit(None).unwrap();
    oq.set_rate_limit(Some(never)).unwrap();
    assert_eq!(stored_tat(&t.db, "mail"), None);
    let now_us = t.clock.now_ms() * 1000;
    assert_eq!(q.claim("w", 1).unwrap().len(), 1);
    assert_eq!(
        stored_tat(&t.db, "mail"),
        Some(now_us + 100_000 + 256),
        "decided afresh: a new block"
    );
    // Another process: at most one an hour (the state kept: the block's
    // slots lie ahead, so nothing may start for an hour).
    q.claim("w", 1).unwrap();
    let hourly = RateLimit::new(1, Duration::from_secs(3600));
    oq.set_rate_limit(Some(hourly)).unwrap();
    assert!(
        q.claim("w", 1).unwrap().is_empty(),
        "the new limit, at once"
    );
}

/// Four handles (each its own connection and blocks, as processes are)
/// claiming flat out on a queue limited to 1,000 a second with a burst of
/// 400 — where blocks are reserved while the limit is less than half used
/// and claims are exact once it binds: no window of one second holds more
/// than `limit + burst − 1` starts. (The limit is one the slowest place
/// this runs can outrun, core's tests under Wine on a loaded machine:
/// 5,000 a second did not bind there, ~2,000 starts a second.)
#[test]
fn four_handles_with_blocks_of_starts_keep_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("blocks.db");
    let (limit, burst) = (1_000, 400);
    let rate = RateLimit::new(limit, Duration::from_secs(1)).burst(burst);
    let _db = limited_file(&path, 5_000, rate);
    let lease = Duration::from_secs(600);
    let workers: Vec<_> = (0..4)
        .map(|i| {
            let path = path.clone();
            std::thread::spawn(move || {
                let db = Database::open(&path).unwrap();
                let q = db.queue("mail").unwrap();
                let started = std::time::Instant::now();
                let mut starts = Vec::new();
                let options = honker::ClaimOptions {
                    lease: Some(lease),
                    wait: Duration::ZERO,
                };
                let mut n = 0;
                while started.elapsed() < Duration::from_millis(1500) {
                    n = n % 8 + 1;
                    for job in q.claim_with(&format!("w{i}"), n, &options).unwrap() {
                        starts.push(job.lease_expires_at - lease.as_millis() as i64);
                    }
                }
                starts
            })
        })
        .collect();
    let mut all: Vec<i64> = workers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    all.sort();
    let most = max_in_window(&all, 1000) as i64;
    let bound = limit + burst - 1;
    assert!(most <= bound, "{most} starts in one second");
    assert!(
        all.len() as i64 > burst + limit / 2,
        "the limit bound the run: {} starts",
        all.len()
    );
}
