//! The scheduler (ADR 24) on an injected clock: registering is idempotent,
//! each boundary fires once with its job carrying the boundary, catch-up
//! policies after three days of downtime, overlap policies, pause and
//! resume, start/end and jitter, Honker's SQL contracts (Friday the 13th),
//! maintenance of fire records, typed errors that change nothing, and four
//! processes running the scheduler over a simulated week with kills and
//! restarts: every fire exactly once, few write transactions per fire.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::child::{read_tagged, report, spawn_child, CHILD_ENV};
use common::{code, scalar, sql, test_db, TestDb};
use honker::runtime::ScheduleRunner;
use honker::rusqlite::types::Value;
use honker::schedule::{CatchUp, DayRule, Overlap, Schedule};
use honker::{Clock, Database, ErrorKind, Options, Payload};

const MIN: i64 = 60_000;
const HOUR: i64 = 60 * MIN;
const DAY: i64 = 24 * HOUR;
/// 2027-01-04T00:00:00Z, a Monday.
const T0: i64 = 1_799_020_800_000;

fn at(t: &TestDb, ms: i64) {
    t.clock.set(ms);
}

fn int(v: Value) -> i64 {
    match v {
        Value::Integer(n) => n,
        v => panic!("{v:?}"),
    }
}

/// (schedule, fire_at, job run_at) of every fire, by boundary.
fn fired(db: &Database) -> Vec<(String, i64, i64)> {
    db.query(
        "SELECT f.schedule, f.fire_at, coalesce(j.run_at, x.run_at, -1)
         FROM _honker_schedule_fires f
         LEFT JOIN _honker_jobs j ON j.id = f.job_id
         LEFT JOIN _honker_finished x ON x.id = f.job_id
         WHERE f.job_id IS NOT NULL ORDER BY f.fire_at, f.schedule",
        [],
    )
    .unwrap()
    .rows
    .into_iter()
    .map(|r| {
        let mut it = r.into_iter();
        let name = match it.next().unwrap() {
            Value::Text(s) => s,
            v => panic!("{v:?}"),
        };
        (name, int(it.next().unwrap()), int(it.next().unwrap()))
    })
    .collect()
}

fn every_minute(name: &str) -> Schedule {
    Schedule::cron(name, "* * * * *", "jobs")
}

#[test]
fn registering_is_idempotent_and_fires_carry_their_boundary() {
    let t = test_db();
    at(&t, T0 + 10_000);
    let s = t.db.scheduler();
    let def = Schedule::cron("report", "*/15 * * * *", "reports")
        .payload(Payload::from(serde_json::json!({"kind": "report"})));
    assert!(s.add(&def).unwrap());
    let writes = t.db.write_transaction_count();
    assert!(!s.add(&def).unwrap(), "the same definition changes nothing");
    assert_eq!(t.db.write_transaction_count(), writes, "and writes nothing");
    let info = s.get("report").unwrap().unwrap();
    assert_eq!(info.next_fire_at, Some(T0 + 15 * MIN));
    assert_eq!(info.schedule.time_zone, "UTC");
    assert_eq!(
        s.next_fires("report", 3).unwrap(),
        [T0 + 15 * MIN, T0 + 30 * MIN, T0 + 45 * MIN]
    );
    // Nothing is due yet: a tick writes nothing.
    assert!(s.tick().unwrap().is_empty());
    assert_eq!(t.db.write_transaction_count(), writes);
    // Late by 20 s: the boundary fires, its job due at the boundary.
    at(&t, T0 + 15 * MIN + 20_000);
    let fires = s.tick().unwrap();
    assert_eq!(fires.len(), 1);
    assert_eq!(fires[0].fire_at, T0 + 15 * MIN);
    assert_eq!(
        fired(&t.db),
        [("report".into(), T0 + 15 * MIN, T0 + 15 * MIN)]
    );
    let job =
        t.db.queue("reports")
            .unwrap()
            .claim("w", 1)
            .unwrap()
            .remove(0);
    assert_eq!(job.run_at, T0 + 15 * MIN);
    assert_eq!(job.payload.as_json().unwrap()["kind"], "report");
    // Again at the same time: nothing more.
    assert!(s.tick().unwrap().is_empty());
    let info = s.get("report").unwrap().unwrap();
    assert_eq!((info.fires, info.missed), (1, 0));
    assert_eq!(info.last_fire_at, Some(T0 + 15 * MIN));
    assert_eq!(info.next_fire_at, Some(T0 + 30 * MIN));
    // Re-registered with another payload: the next fire is kept.
    let changed = def.clone().payload(Payload::from(serde_json::json!(2)));
    assert!(s.add(&changed).unwrap());
    assert_eq!(
        s.get("report").unwrap().unwrap().next_fire_at,
        Some(T0 + 30 * MIN)
    );
    // A new rule starts from the first boundary after now.
    let mut hourly = changed.clone();
    hourly.spec = "0 * * * *".into();
    assert!(s.add(&hourly).unwrap());
    assert_eq!(
        s.get("report").unwrap().unwrap().next_fire_at,
        Some(T0 + HOUR)
    );
}

#[test]
fn concurrent_tickers_fire_each_boundary_once() {
    let t = test_db();
    at(&t, T0);
    let s = t.db.scheduler();
    for i in 0..5 {
        s.add(&Schedule::cron(&format!("s{i}"), "* * * * *", "jobs"))
            .unwrap();
    }
    let handles: Vec<Database> = (0..4).map(|_| t.reopen()).collect();
    for minute in 1..=30 {
        at(&t, T0 + minute * MIN);
        std::thread::scope(|scope| {
            for db in &handles {
                scope.spawn(move || db.scheduler().tick().unwrap());
            }
        });
    }
    let fires = fired(&t.db);
    assert_eq!(fires.len(), 5 * 30);
    let mut keys: Vec<_> = fires.iter().map(|f| (f.0.clone(), f.1)).collect();
    keys.dedup();
    assert_eq!(keys.len(), 150, "no boundary twice");
    assert_eq!(t.db.queue("jobs").unwrap().stats().unwrap().ready, 150);
}

fn downtime(policy: CatchUp, window: Duration, down_from: i64, up_at: i64) -> (Vec<i64>, u64) {
    let t = test_db();
    at(&t, down_from);
    let s = t.db.scheduler();
    s.add(
        &Schedule::cron("q", "*/15 * * * *", "jobs")
            .catch_up(policy)
            .catch_up_window(window),
    )
    .unwrap();
    at(&t, up_at);
    s.tick().unwrap();
    let info = s.get("q").unwrap().unwrap();
    assert!(info.next_fire_at.unwrap() > up_at);
    (fired(&t.db).into_iter().map(|f| f.1).collect(), info.missed)
}

#[test]
fn catch_up_policies_after_three_days_down() {
    // Down from T0 (just registered) for 3 days and 7 minutes: 288
    // boundaries passed (T0+15m … T0+3d), none of them on time.
    let up = T0 + 3 * DAY + 7 * MIN;
    let day = Duration::from_secs(86_400);
    let (f, missed) = downtime(CatchUp::Skip, day, T0, up);
    assert_eq!((f.len(), missed), (0, 288));
    let (f, missed) = downtime(CatchUp::Latest, day, T0, up);
    assert_eq!(f, [T0 + 3 * DAY]);
    assert_eq!(missed, 287);
    let (f, missed) = downtime(CatchUp::All, day, T0, up);
    // A day's window holds 96 boundaries; the default bound is 100.
    assert_eq!(f.len(), 96);
    assert_eq!(f[0], up - DAY + 8 * MIN);
    assert!(
        f.windows(2).all(|w| w[1] - w[0] == 15 * MIN),
        "in boundary order"
    );
    assert_eq!(missed, 288 - 96);
    // A 30-minute window: the two boundaries inside it.
    let (f, missed) = downtime(CatchUp::All, Duration::from_secs(1800), T0, up);
    assert_eq!(f, [T0 + 3 * DAY - 15 * MIN, T0 + 3 * DAY]);
    assert_eq!(missed, 286);
    // Back within a minute of a boundary: it is on time under every policy.
    let up = T0 + 3 * DAY + 30_000;
    let (f, missed) = downtime(CatchUp::Skip, day, T0, up);
    assert_eq!((f, missed), (vec![T0 + 3 * DAY], 287));
}

#[test]
fn all_is_bounded_by_catch_up_max() {
    let t = test_db();
    at(&t, T0);
    let s = t.db.scheduler();
    let mut def = every_minute("m").catch_up(CatchUp::All);
    def.catch_up_max = 5;
    s.add(&def).unwrap();
    at(&t, T0 + 10 * MIN + 5 * MIN);
    s.tick().unwrap();
    let f: Vec<i64> = fired(&t.db).into_iter().map(|f| f.1).collect();
    // 15 boundaries: the last one on time plus the latest 5 late ones.
    assert_eq!(f.len(), 6, "{f:?}");
    assert_eq!(*f.last().unwrap(), T0 + 15 * MIN);
    assert_eq!(s.get("m").unwrap().unwrap().missed, 9);
}

#[test]
fn overlap_policies() {
    for (policy, expect_jobs, expect_skipped) in [
        (Overlap::AllowAll, 3, 0),
        (Overlap::Skip, 1, 2),
        (Overlap::BufferOne, 1, 1),
    ] {
        let t = test_db();
        at(&t, T0);
        let s = t.db.scheduler();
        s.add(&every_minute("o").overlap(policy)).unwrap();
        let q = t.db.queue("jobs").unwrap();
        // The first job runs for 2.5 minutes.
        at(&t, T0 + MIN);
        s.tick().unwrap();
        let running = q.claim("w", 1).unwrap().remove(0);
        for m in 2..=3 {
            at(&t, T0 + m * MIN);
            s.tick().unwrap();
        }
        let stats = q.stats().unwrap();
        assert_eq!(
            stats.ready + stats.running,
            expect_jobs,
            "{policy:?}: live jobs"
        );
        let info = s.get("o").unwrap().unwrap();
        assert_eq!(info.overlap_skipped, expect_skipped, "{policy:?}");
        at(&t, T0 + 3 * MIN + 30_000);
        running.ack().unwrap();
        let buffered = s.tick().unwrap();
        if policy == Overlap::BufferOne {
            // The buffered boundary goes once the running job is done.
            assert_eq!(buffered.len(), 1);
            assert_eq!(buffered[0].fire_at, T0 + 2 * MIN);
            assert_eq!(s.get("o").unwrap().unwrap().buffered_at, None);
        } else {
            assert!(buffered.is_empty());
        }
    }
}

#[test]
fn pause_resume_trigger_remove() {
    let t = test_db();
    at(&t, T0);
    let s = t.db.scheduler();
    s.add(&every_minute("p").catch_up(CatchUp::All)).unwrap();
    s.pause("p", Some("maintenance window")).unwrap();
    let info = s.get("p").unwrap().unwrap();
    assert!(info.paused);
    assert_eq!(info.note.as_deref(), Some("maintenance window"));
    at(&t, T0 + 3 * HOUR + 30_000);
    assert!(
        s.tick().unwrap().is_empty(),
        "a paused schedule never fires"
    );
    s.resume("p").unwrap();
    let info = s.get("p").unwrap().unwrap();
    assert_eq!(info.next_fire_at, Some(T0 + 3 * HOUR + MIN));
    assert_eq!(info.missed, 0, "paused boundaries are not missed");
    assert!(s.tick().unwrap().is_empty());
    let id = s.trigger_now("p").unwrap();
    let job = t.db.queue("jobs").unwrap().get_job(id).unwrap();
    assert_eq!(job.run_at, T0 + 3 * HOUR + 30_000);
    assert_eq!(
        s.get("p").unwrap().unwrap().fires,
        0,
        "a trigger is not a scheduled fire"
    );
    assert!(s.remove("p").unwrap());
    assert!(!s.remove("p").unwrap());
    assert_eq!(t.count("_honker_schedule_fires"), 0);
    assert_eq!(
        t.db.queue("jobs").unwrap().stats().unwrap().ready,
        1,
        "its job stays"
    );
    for e in [
        s.pause("nope", None).unwrap_err(),
        s.resume("nope").unwrap_err(),
        s.trigger_now("nope").unwrap_err(),
    ] {
        assert_eq!(e.kind(), ErrorKind::NotFound);
    }
}

#[test]
fn start_end_and_stable_jitter() {
    let t = test_db();
    at(&t, T0);
    let s = t.db.scheduler();
    let mut def = Schedule::cron("j", "@every 10m", "jobs");
    def.start_at = Some(T0 + 5 * MIN);
    def.end_at = Some(T0 + 35 * MIN);
    def.jitter = Duration::from_secs(60);
    s.add(&def).unwrap();
    assert_eq!(
        s.next_fires("j", 10).unwrap(),
        [T0 + 5 * MIN, T0 + 15 * MIN, T0 + 25 * MIN, T0 + 35 * MIN]
    );
    for m in [5, 15, 25, 35, 45] {
        at(&t, T0 + m * MIN);
        s.tick().unwrap();
    }
    let f = fired(&t.db);
    assert_eq!(f.len(), 4);
    for (_, b, run_at) in &f {
        assert!((*b..=b + 60_000).contains(run_at), "jitter within bounds");
    }
    assert!(f.iter().any(|(_, b, r)| r != b), "jitter moves some");
    // The same (schedule, boundary) gets the same jitter in any process.
    let again = test_db();
    at(&again, T0);
    again.db.scheduler().add(&def).unwrap();
    at(&again, T0 + 5 * MIN);
    again.db.scheduler().tick().unwrap();
    assert_eq!(fired(&again.db)[0], f[0]);
    assert_eq!(s.get("j").unwrap().unwrap().next_fire_at, None, "ended");
}

#[test]
fn sync_makes_the_file_hold_exactly_the_list() {
    let t = test_db();
    at(&t, T0);
    let s = t.db.scheduler();
    s.add(&every_minute("old")).unwrap();
    s.add(&every_minute("kept")).unwrap();
    let r = s
        .sync(&[every_minute("kept"), every_minute("new")])
        .unwrap();
    assert_eq!(r.added, ["new"]);
    assert!(r.changed.is_empty());
    assert_eq!(r.removed, ["old"]);
    let names: Vec<String> = s
        .list()
        .unwrap()
        .into_iter()
        .map(|i| i.schedule.name)
        .collect();
    assert_eq!(names, ["kept", "new"]);
    let dup = s.sync(&[every_minute("a"), every_minute("a")]).unwrap_err();
    assert_eq!(dup.kind(), ErrorKind::InvalidArgument);
}

#[test]
fn bad_input_is_invalid_argument_and_changes_nothing() {
    let t = test_db();
    at(&t, T0);
    let s = t.db.scheduler();
    s.add(&every_minute("ok")).unwrap();
    let before = scalar(
        &t.db,
        "SELECT group_concat(name || spec || next_fire_at) FROM _honker_schedules",
    );
    let bad = |def: Schedule, needle: &str| {
        let e = s.add(&def).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{needle}: {e}");
        assert!(e.message().contains(needle), "{needle}: {}", e.message());
    };
    bad(Schedule::cron("x", "61 * * * *", "q"), "field 1 (minute)");
    bad(Schedule::cron("x", "0 0 * * * * *", "q"), "7 fields");
    bad(Schedule::cron("x", "@every 0s", "q"), "@every");
    bad(
        every_minute("x").time_zone("Mars/Olympus"),
        "unknown time zone",
    );
    bad(every_minute(""), "name");
    bad(every_minute(&"n".repeat(300)), "name");
    bad(every_minute("a\0b"), "name");
    bad(Schedule::cron("x", "* * * * *", ""), "queue");
    bad(
        every_minute("x").payload(Payload::Json("{bad".into())),
        "JSON",
    );
    let mut d = every_minute("x");
    d.catch_up_max = 0;
    bad(d, "catch_up_max");
    bad(
        every_minute("x").catch_up_window(Duration::ZERO),
        "catch_up_window",
    );
    let mut d = every_minute("x");
    d.max_attempts = Some(0);
    bad(d, "max_attempts");
    let mut d = every_minute("x");
    d.expires = Some(Duration::ZERO);
    bad(d, "expires");
    let mut d = every_minute("x");
    d.start_at = Some(T0 + DAY);
    d.end_at = Some(T0);
    bad(d, "end_at");
    let mut d = every_minute("x");
    d.start_at = Some(-1);
    bad(d, "start_at");
    let e = s.update("ok", |d| d.name = "other".into()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert_eq!(
        s.update("nope", |_| {}).unwrap_err().kind(),
        ErrorKind::NotFound
    );
    assert_eq!(
        scalar(
            &t.db,
            "SELECT group_concat(name || spec || next_fire_at) FROM _honker_schedules"
        ),
        before
    );
}

#[test]
fn maintenance_prunes_fires_older_than_the_window() {
    let t = test_db();
    at(&t, T0);
    let s = t.db.scheduler();
    s.add(&every_minute("m").catch_up_window(Duration::from_secs(600)))
        .unwrap();
    for m in 1..=30 {
        at(&t, T0 + m * MIN);
        s.tick().unwrap();
    }
    // Maintenance after commits may have pruned some already; a full
    // pass leaves the fires of the last 10 minutes (T0+20m … T0+30m).
    t.db.maintain().unwrap();
    assert_eq!(t.count("_honker_schedule_fires"), 11);
    assert_eq!(
        int(scalar(
            &t.db,
            "SELECT min(fire_at) FROM _honker_schedule_fires"
        )),
        T0 + 20 * MIN
    );
    // Exactly once still holds: the pruned boundaries are behind next_fire_at.
    assert!(s.tick().unwrap().is_empty());
    // A long window keeps fire records a week at most.
    s.add(
        &Schedule::cron("h", "@every 1h", "jobs").catch_up_window(Duration::from_secs(30 * 86_400)),
    )
    .unwrap();
    let start = T0 + 30 * MIN;
    for h in 1..=9 * 24 {
        at(&t, start + h * HOUR);
        s.tick().unwrap();
    }
    t.db.maintain().unwrap();
    let kept = int(scalar(
        &t.db,
        "SELECT count(*) FROM _honker_schedule_fires WHERE schedule = 'h'",
    ));
    assert_eq!(kept, 7 * 24, "the last week's");
}

#[test]
fn sql_functions_ours() {
    let t = test_db();
    at(&t, T0);
    let v = sql(
        &t.db,
        r#"SELECT honker_schedule_add('nightly', 'reports', '30 2 * * *', '{"n":1}',
             '{"time_zone":"America/New_York","catch_up":"all","overlap":"skip"}')"#,
    );
    assert_eq!(v, Value::Integer(1));
    let again = sql(
        &t.db,
        r#"SELECT honker_schedule_add('nightly', 'reports', '30 2 * * *', '{"n":1}',
             '{"time_zone":"America/New_York","catch_up":"all","overlap":"skip"}')"#,
    );
    assert_eq!(again, Value::Integer(0));
    let list: serde_json::Value = match sql(&t.db, "SELECT honker_schedule_list()") {
        Value::Text(s) => serde_json::from_str(&s).unwrap(),
        v => panic!("{v:?}"),
    };
    assert_eq!(list[0]["time_zone"], "America/New_York");
    assert_eq!(list[0]["overlap"], "skip");
    // 2027-01-04 02:30 EST = 07:30Z.
    assert_eq!(list[0]["next_fire_at"], T0 + 7 * HOUR + 30 * MIN);
    assert_eq!(
        int(sql(&t.db, "SELECT honker_schedule_next_due()")),
        T0 + 7 * HOUR + 30 * MIN
    );
    // The spring-forward day, through the pure function.
    let spring = int(sql(
        &t.db,
        "SELECT honker_cron_next('30 2 * * *', 'America/New_York', 1804939200000)",
    ));
    // From 2027-03-13T12:00Z: 02:30 does not exist on the 14th; 03:00 EDT.
    assert_eq!(spring, 1_805_007_600_000); // 2027-03-14T07:00:00Z
    at(&t, T0 + 8 * HOUR);
    let fires: serde_json::Value = match sql(&t.db, "SELECT honker_schedule_tick()") {
        Value::Text(s) => serde_json::from_str(&s).unwrap(),
        v => panic!("{v:?}"),
    };
    assert_eq!(fires[0]["fire_at"], T0 + 7 * HOUR + 30 * MIN);
    let e =
        t.db.transaction()
            .unwrap()
            .query("SELECT honker_schedule_add('x', 'q', '* * *', 'null')", [])
            .unwrap_err();
    assert_eq!(code(&e), "INVALID_ARGUMENT");
    let e =
        t.db.transaction()
            .unwrap()
            .query(
                r#"SELECT honker_schedule_add('x', 'q', '* * * * *', 'null', '{"zone":"UTC"}')"#,
                [],
            )
            .unwrap_err();
    assert!(e.message().contains("unknown key"), "{e}");
    assert_eq!(
        int(sql(&t.db, "SELECT honker_schedule_remove('nightly')")),
        1
    );
}

/// Honker's clients register through `honker_scheduler_register`: their
/// schedules keep Honker's AND day rule (and the process's zone).
#[test]
fn honker_contract_friday_the_13th() {
    let t = test_db();
    at(&t, T0);
    assert_eq!(
        sql(
            &t.db,
            "SELECT honker_scheduler_register('f13', 'luck', '0 9 13 * 5', '\"boo\"', 0, NULL)"
        ),
        Value::Integer(1)
    );
    let info = t.db.scheduler().get("f13").unwrap().unwrap();
    assert_eq!(info.schedule.day_rule, DayRule::And);
    assert_eq!(info.schedule.max_attempts, Some(3));
    let zone = jiff::tz::TimeZone::get(&info.schedule.time_zone).unwrap();
    let s = t.db.scheduler();
    let next = s.next_fires("f13", 6).unwrap();
    for b in &next {
        let local = jiff::Timestamp::from_millisecond(*b)
            .unwrap()
            .to_zoned(zone.clone());
        assert_eq!(local.day(), 13, "{local}");
        assert_eq!(local.weekday(), jiff::civil::Weekday::Friday, "{local}");
        assert_eq!((local.hour(), local.minute()), (9, 0));
    }
    // Ours, with Vixie OR: every 13th and every Friday.
    s.add(&Schedule::cron("or", "0 9 13 * 5", "luck").time_zone(&info.schedule.time_zone))
        .unwrap();
    assert!(s.next_fires("or", 6).unwrap()[0] < next[0]);
    // Honker's tick(now_unix) and its JSON, seconds; soonest; list.
    let first_s = next[0] / 1000;
    assert_eq!(
        int(sql(&t.db, "SELECT honker_scheduler_soonest()")),
        s.next_due().unwrap().unwrap() / 1000
    );
    s.remove("or").unwrap();
    let fires: serde_json::Value =
        match sql(&t.db, &format!("SELECT honker_scheduler_tick({first_s})")) {
            Value::Text(s) => serde_json::from_str(&s).unwrap(),
            v => panic!("{v:?}"),
        };
    assert_eq!(fires[0]["name"], "f13");
    assert_eq!(fires[0]["fire_at"], first_s);
    let job = t.db.queue("luck").unwrap().claim("w", 1).unwrap().remove(0);
    assert_eq!(job.max_attempts, 3);
    let list: serde_json::Value = match sql(&t.db, "SELECT honker_scheduler_list()") {
        Value::Text(s) => serde_json::from_str(&s).unwrap(),
        v => panic!("{v:?}"),
    };
    assert_eq!(list[0]["cron_expr"], "0 9 13 * 5");
    assert_eq!(list[0]["payload"], "\"boo\"");
    assert_eq!(list[0]["enabled"], true);
    assert_eq!(list[0]["next_fire_at"], next[1] / 1000);
    assert_eq!(int(sql(&t.db, "SELECT honker_scheduler_pause('f13')")), 1);
    assert_eq!(int(sql(&t.db, "SELECT honker_scheduler_pause('none')")), 0);
    assert_eq!(int(sql(&t.db, "SELECT honker_scheduler_resume('f13')")), 1);
    assert_eq!(
        int(sql(
            &t.db,
            "SELECT honker_scheduler_update('f13', NULL, NULL, 5, NULL, 0)"
        )),
        1
    );
    assert_eq!(
        int(sql(
            &t.db,
            "SELECT honker_scheduler_update('f13', NULL, NULL, NULL, NULL, 0)"
        )),
        0,
        "nothing to change"
    );
    assert_eq!(
        t.db.scheduler()
            .get("f13")
            .unwrap()
            .unwrap()
            .schedule
            .priority,
        5
    );
    let from = T0 / 1000;
    let n = int(sql(
        &t.db,
        &format!("SELECT honker_cron_next_after('0 9 13 * 5', {from})"),
    ));
    assert_eq!(n, next[0] / 1000);
    assert_eq!(
        int(sql(&t.db, "SELECT honker_scheduler_unregister('f13')")),
        1
    );
    assert_eq!(
        int(sql(&t.db, "SELECT honker_scheduler_unregister('f13')")),
        0
    );
}

// --- Four processes over a simulated week -------------------------------

/// A clock read from a file the test advances: shared by processes.
#[derive(Debug)]
struct FileClock(std::path::PathBuf);

impl Clock for FileClock {
    fn now_ms(&self) -> i64 {
        std::fs::read_to_string(&self.0)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
    }
}

fn set_clock(path: &std::path::Path, ms: i64) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, ms.to_string()).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

#[test]
fn child_process_entry() {
    let Ok(role) = std::env::var(CHILD_ENV) else {
        return;
    };
    assert_eq!(role, "runner");
    let clock = std::env::var("HONKER_TEST_CLOCK").unwrap();
    let options = Options {
        clock: Arc::new(FileClock(clock.into())),
        ..Options::default()
    };
    let db = Database::open_with(std::env::var("HONKER_TEST_DB").unwrap(), options).unwrap();
    // Checking at every commit: the test moves its clock a step at a time.
    let runner = Arc::new(ScheduleRunner::with_min_recheck(&db, Duration::ZERO));
    let stop = Arc::new(AtomicBool::new(false));
    let r = Arc::clone(&runner);
    let st = Arc::clone(&stop);
    // Its counts, kept in a file after each wake-up: a SIGKILLed runner's
    // write transactions still count.
    let stats = std::path::PathBuf::from(std::env::var("HONKER_TEST_STATS").unwrap())
        .join(std::process::id().to_string());
    let loop_thread = std::thread::spawn(move || {
        while !st.load(Ordering::SeqCst) {
            r.next(Duration::from_millis(200)).unwrap();
            let tmp = stats.with_extension("tmp");
            std::fs::write(&tmp, format!("{} {}", r.write_transactions(), r.fires())).unwrap();
            std::fs::rename(&tmp, &stats).unwrap();
        }
    });
    report("ready");
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    stop.store(true, Ordering::SeqCst);
    runner.close();
    loop_thread.join().unwrap();
    report("done");
}

// On Windows other processes' commits are seen by the watcher's timed check
// (every 200 ms, ADR 30), and this week of 10,080 steps waits for one each:
// an hour. Windows's multi-process claims and wake-ups run in
// multiprocess.rs.
#[cfg_attr(
    windows,
    ignore = "a step per cross-process wake-up: an hour on the timed watcher"
)]
#[test]
fn four_processes_over_a_simulated_week_fire_each_boundary_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("week.db");
    let clock_path = dir.path().join("clock");
    set_clock(&clock_path, T0);
    let options = Options {
        clock: Arc::new(FileClock(clock_path.clone())),
        ..Options::default()
    };
    let db = Database::open_with(&path, options).unwrap();
    db.execute("CREATE TABLE tick (n INTEGER)", []).unwrap();
    let s = db.scheduler();
    // Each job's payload names its schedule (fire records are pruned after
    // a day; the jobs stay).
    let named = |name: &str, spec: &str| {
        Schedule::cron(name, spec, "jobs").payload(Payload::from(serde_json::json!(name)))
    };
    s.add(&named("minutely", "@every 1m")).unwrap();
    s.add(&named("quarter", "*/15 * * * *").time_zone("Europe/Berlin"))
        .unwrap();
    s.add(&named("nine", "0 9 * * MON-FRI").time_zone("America/New_York"))
        .unwrap();
    s.add(&named("f13", "30 2 13 * 5").day_rule(DayRule::And))
        .unwrap();
    let stats = dir.path().join("stats");
    std::fs::create_dir(&stats).unwrap();
    let spawn = || {
        let mut c = spawn_child(
            "runner",
            &path,
            &[
                ("HONKER_TEST_CLOCK", clock_path.display().to_string()),
                ("HONKER_TEST_STATS", stats.display().to_string()),
            ],
        );
        assert_eq!(read_tagged(&mut c), "ready");
        c
    };
    let mut children: Vec<_> = (0..4).map(|_| spawn()).collect();
    // A simulated week, a minute a step: the clock moves and a commit wakes
    // every process; the test waits for the step's fires. A runner that did
    // not tick last waits FOLLOWER_DELAY (1–2 s of the clock) before it
    // ticks: when nobody fired within 200 ms (the leader was killed), the
    // clock moves on by half a second at a time.
    let week = 7 * DAY;
    let mut now = T0;
    let mut kills = 0;
    let started = std::time::Instant::now();
    while now < T0 + week {
        now = (now / MIN + 1) * MIN;
        set_clock(&clock_path, now);
        db.execute("INSERT INTO tick VALUES (1)", []).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let mut moved = std::time::Instant::now();
        while s.next_due().unwrap().is_some_and(|d| d <= now) {
            assert!(std::time::Instant::now() < deadline, "stuck at {now}");
            std::thread::sleep(Duration::from_millis(1));
            // Nobody fired for 200 ms of real time (however loaded the
            // machine): the leader is gone; let the clock run for the
            // followers.
            if moved.elapsed() > Duration::from_millis(200) {
                now += 500;
                set_clock(&clock_path, now);
                db.execute("INSERT INTO tick VALUES (1)", []).unwrap();
                moved = std::time::Instant::now();
            }
        }
        // Every 500 minutes, SIGKILL one process and start another.
        if (now - T0) % (500 * MIN) == 0 {
            let i = kills % 4;
            children[i].kill().unwrap();
            children[i].wait().unwrap();
            children[i] = spawn();
            kills += 1;
        }
    }
    for mut c in children {
        use std::io::Write;
        writeln!(c.stdin.as_mut().unwrap()).unwrap();
        assert_eq!(read_tagged(&mut c), "done");
        c.wait().unwrap();
    }
    let mut write_txs = 0u64;
    for e in std::fs::read_dir(&stats).unwrap() {
        let e = e.unwrap();
        if e.path().extension().is_some() {
            continue; // a killed runner's unfinished write
        }
        let text = std::fs::read_to_string(e.path()).unwrap();
        write_txs += text.split(' ').next().unwrap().parse::<u64>().unwrap();
    }
    // Every expected boundary fired once, none else.
    let fires: Vec<(String, i64)> = db
        .query("SELECT payload ->> '$', run_at FROM _honker_jobs", [])
        .unwrap()
        .rows
        .into_iter()
        .map(|r| match (&r[0], &r[1]) {
            (Value::Text(n), Value::Integer(t)) => (n.clone(), *t),
            v => panic!("{v:?}"),
        })
        .collect();
    let mut expected = vec![];
    for name in ["minutely", "quarter", "nine", "f13"] {
        let info = s.get(name).unwrap().unwrap();
        let spec = honker::schedule::Spec::parse(
            &info.schedule.spec,
            &info.schedule.time_zone,
            info.schedule.day_rule,
        )
        .unwrap();
        let mut b = T0;
        while let Some(n) = spec.next_after(b, 0).unwrap() {
            if n > now {
                break;
            }
            expected.push((name.to_string(), n));
            b = n;
        }
    }
    expected.sort_by_key(|e| (e.1, e.0.clone()));
    for i in s.list().unwrap() {
        assert_eq!((i.missed, i.overlap_skipped), (0, 0), "{}", i.schedule.name);
    }
    let mut got = fires;
    got.sort_by_key(|e| (e.1, e.0.clone()));
    assert_eq!(got.len(), expected.len());
    assert_eq!(got, expected);
    let total_fires = got.len() as f64;
    let per_fire = write_txs as f64 / total_fires;
    eprintln!(
        "{} fires, {write_txs} write transactions to tick ({per_fire:.3} per fire), {kills} kills, {:?}",
        got.len(),
        started.elapsed()
    );
    assert!(per_fire <= 1.5, "{per_fire} write transactions per fire");
    assert_eq!(
        int(scalar(&db, "SELECT count(*) FROM _honker_jobs")),
        got.len() as i64
    );
    // Each fired within a few seconds of its boundary (of the clock).
    let late = int(scalar(
        &db,
        "SELECT max(fired_at - fire_at) FROM _honker_schedule_fires",
    ));
    assert!(late <= 3_000, "a fire {late} ms after its boundary");
}

/// The worker runtime runs the scheduler while it runs (the default):
/// a schedule fires into the queue the worker handles, on the real clock;
/// `run_scheduler: false` leaves it out; stopping the worker stops it.
#[test]
fn the_worker_runtime_runs_the_scheduler() {
    use honker::runtime::{HandlerOptions, Outcome, Worker, WorkerOptions};
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("w.db")).unwrap();
    db.scheduler()
        .add(&Schedule::cron("beat", "@every 1s", "beats"))
        .unwrap();
    let quiet = Worker::new(
        &db,
        WorkerOptions {
            run_scheduler: false,
            ..WorkerOptions::default()
        },
    )
    .unwrap();
    quiet
        .register(&db.queue("beats").unwrap(), HandlerOptions::default())
        .unwrap();
    assert!(quiet.next(Duration::from_millis(2_500)).unwrap().is_none());
    assert!(quiet.scheduler_counts().is_none());
    let worker = Worker::new(&db, WorkerOptions::default()).unwrap();
    worker
        .register(&db.queue("beats").unwrap(), HandlerOptions::default())
        .unwrap();
    let task = worker
        .next(Duration::from_secs(5))
        .unwrap()
        .expect("the worker's scheduler fired");
    let job = task.job().unwrap();
    assert_eq!(job.run_at % 1000, 0, "a job at its boundary");
    worker.complete(task, Outcome::Ack(None)).unwrap();
    // The runner counts its fire once its commit returns, which may be
    // after the worker already claimed the job.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while worker.scheduler_counts().unwrap().1 == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the runner counts its fires"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(worker.scheduler_counts().unwrap().2.is_none(), "no error");
    worker.stop();
    assert!(
        worker.scheduler_counts().is_none(),
        "stopped with the worker"
    );
    let before = db.scheduler().get("beat").unwrap().unwrap().fires;
    std::thread::sleep(Duration::from_millis(1_500));
    assert_eq!(db.scheduler().get("beat").unwrap().unwrap().fires, before);
}
