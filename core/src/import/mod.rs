//! Switching from Honker: a file that holds Honker's tables is refused by
//! `Database::open` and `honker_bootstrap()` (`UNSAFE`, naming the
//! importer), and imported in place by [`import_honker`] /
//! `honker_import_honker()` (ADR 25).
//!
//! The import is one transaction: Honker's tables are renamed aside
//! (`_honker_import_*`), honker's schema is created, every live job, dead
//! letter, result, stream event, consumer offset, schedule and held lock is
//! copied (by `INSERT … SELECT` inside SQLite, stream events a page of 1,000
//! at a time as they are renumbered: memory stays bounded however many rows
//! there are; schedules and locks, which are few, row by row), and
//! the aside tables are dropped. A failure anywhere changes nothing. Job ids
//! are kept and ours continue after Honker's last. A second import finds no
//! Honker table and changes nothing.
//!
//! Every Honker process must be stopped first: on Linux the importer reads
//! the kernel's lock table and refuses while another process has the file
//! open (see `holders`). A Honker process started afterwards fails on its
//! first statement (its tables are gone; honker's views take three of their
//! names and refuse writes), so nothing it does can be lost silently.

#[cfg(target_os = "linux")]
mod holders;
// doctor's list of the processes that have the file open.
#[cfg(all(target_os = "linux", feature = "rusqlite"))]
pub(crate) use holders::openers;
mod statements;

use std::path::Path;

use serde_json::{json, Map, Value as Json};

use crate::error::{Error, ErrorKind, Result};
use crate::lock::statements as lock_st;
use crate::options::{limits, Backoff};
use crate::payload::Payload;
use crate::raw::{params, Conn, ToSql};
use crate::schedule::{ops as schedule_ops, spec};
use crate::sqlfn::{Call, Out, SqlFn, DIRECT_ONLY};
use crate::validate;
use statements as st;

/// Honker's scheduler's leader lock: not imported (honker's scheduler
/// elects its leader its own way).
const HONKER_LEADER_LOCK: &str = "honker-scheduler";

/// How to import.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImportOptions {
    /// Do everything, report it, then roll it all back.
    pub dry_run: bool,
    /// The IANA zone Honker's schedules are evaluated in from now on.
    /// Honker evaluated them in the local zone of whichever process ran its
    /// scheduler; by default the importing process's local zone.
    pub time_zone: Option<String>,
    /// Do not look for other processes that have the file open (for
    /// platforms where honker cannot see them; the caller has stopped
    /// them).
    pub skip_process_check: bool,
}

impl ImportOptions {
    /// Parses the SQL function's JSON options: `dry_run`, `time_zone`,
    /// `skip_process_check`.
    pub fn from_json(text: &str) -> Result<ImportOptions> {
        let bad = |what: &str| Error::invalid(format!("honker_import_honker: options: {what}"));
        let obj: Map<String, Json> = match serde_json::from_str(text) {
            Ok(Json::Object(m)) => m,
            _ => return Err(bad("must be a JSON object")),
        };
        let flag = |k: &str, v: &Json| {
            v.as_bool()
                .ok_or_else(|| bad(&format!("{k} must be true or false")))
        };
        let mut o = ImportOptions::default();
        for (k, v) in obj.iter().filter(|(_, v)| !v.is_null()) {
            match k.as_str() {
                "dry_run" => o.dry_run = flag(k, v)?,
                "skip_process_check" => o.skip_process_check = flag(k, v)?,
                "time_zone" => {
                    o.time_zone = Some(
                        v.as_str()
                            .ok_or_else(|| bad("time_zone must be text"))?
                            .to_string(),
                    )
                }
                other => {
                    return Err(bad(&format!(
                        "unknown option {other:?} (dry_run, time_zone, skip_process_check)"
                    )))
                }
            }
        }
        Ok(o)
    }
}

/// Something the import did not move, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotImported {
    /// What (`notifications`, `rate limit windows`, …).
    pub what: String,
    /// How many rows.
    pub count: i64,
    /// Why.
    pub why: String,
}

/// A schedule whose meaning differs from what the same expression means
/// to honker's own API (or differs from what Honker did).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleNote {
    /// The schedule.
    pub name: String,
    /// Its expression.
    pub cron_expr: String,
    /// What differs.
    pub note: String,
}

/// What an import did (or, in a dry run, would do).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImportReport {
    /// Honker's objects found (empty: nothing to import, nothing changed).
    pub found: Vec<String>,
    /// Whether everything was rolled back (a dry run).
    pub dry_run: bool,
    /// How other processes were looked for: `proc-locks`, `skipped`.
    pub process_check: String,
    /// Other processes found holding the file (a dry run reports them; an
    /// import refuses).
    pub holders: Vec<String>,
    /// Live jobs, by our state.
    pub ready: i64,
    /// Pending jobs due later.
    pub scheduled: i64,
    /// Jobs a Honker worker held: running until the lease Honker gave
    /// them lapses, then reclaimed.
    pub running: i64,
    /// Dead letters (failed, exhausted).
    pub dead: i64,
    /// Dead letters Honker expired.
    pub expired: i64,
    /// Results.
    pub results: i64,
    /// Streams.
    pub streams: i64,
    /// Stream events.
    pub events: i64,
    /// Consumer offsets.
    pub consumers: i64,
    /// Schedules.
    pub schedules: i64,
    /// Held locks.
    pub locks: i64,
    /// Payloads and results that were not JSON text, imported as bytes.
    pub payloads_as_bytes: i64,
    /// The zone imported schedules are evaluated in.
    pub time_zone: String,
    /// What was not moved.
    pub not_imported: Vec<NotImported>,
    /// Schedules whose meaning a reader should check.
    pub schedule_notes: Vec<ScheduleNote>,
}

impl ImportReport {
    /// The report as a JSON object (what `honker_import_honker()` returns).
    pub fn to_json(&self) -> Json {
        json!({
            "found": self.found, "dry_run": self.dry_run,
            "process_check": self.process_check, "holders": self.holders,
            "jobs": {"ready": self.ready, "scheduled": self.scheduled, "running": self.running},
            "dead": self.dead, "expired": self.expired, "results": self.results,
            "streams": self.streams, "events": self.events, "consumers": self.consumers,
            "schedules": self.schedules, "locks": self.locks,
            "payloads_as_bytes": self.payloads_as_bytes, "time_zone": self.time_zone,
            "not_imported": self.not_imported.iter().map(|n| json!({
                "what": n.what, "count": n.count, "why": n.why})).collect::<Vec<_>>(),
            "schedule_notes": self.schedule_notes.iter().map(|n| json!({
                "name": n.name, "cron_expr": n.cron_expr, "note": n.note})).collect::<Vec<_>>(),
        })
    }
}

/// The other processes holding a lock on the database at `path` (or its
/// `-wal`/`-shm`), described (`pid 12 (python worker.py)`): what the
/// importer and `honker restore` refuse on.
#[cfg(target_os = "linux")]
pub(crate) fn others_holding(path: &Path) -> std::io::Result<Vec<String>> {
    Ok(holders::others(path)?
        .iter()
        .map(ToString::to_string)
        .collect())
}

/// Looks for other processes that have the file open; `Err` (`UNSAFE`)
/// when there are some, unless `report_only` (a dry run).
fn check_holders(
    path: Option<&Path>,
    o: &ImportOptions,
    report: &mut ImportReport,
    report_only: bool,
) -> Result<()> {
    if o.skip_process_check {
        report.process_check = "skipped".into();
        return Ok(());
    }
    let Some(path) = path else {
        // A temporary or in-memory database: no other process can see it.
        report.process_check = "private".into();
        return Ok(());
    };
    #[cfg(target_os = "linux")]
    {
        let found = holders::others(path).map_err(|e| {
            Error::new(
                ErrorKind::Unsafe,
                format!(
                    "cannot read /proc/locks to see whether a Honker process has {} open ({e}); \
                     stop every process that uses the file and pass skip_process_check",
                    path.display()
                ),
            )
        })?;
        report.process_check = "proc-locks".into();
        report.holders = found.iter().map(ToString::to_string).collect();
        if !found.is_empty() && !report_only {
            return Err(Error::new(
                ErrorKind::Unsafe,
                format!(
                    "another process has {} open: {}; stop every Honker process (and anything \
                     else using the file) and import again. Nothing was changed",
                    path.display(),
                    report.holders.join("; ")
                ),
            ));
        }
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = report_only;
        Err(Error::new(
            ErrorKind::Unsafe,
            format!(
                "honker cannot see other processes' locks on this platform, so it cannot \
                 check that no Honker process has {} open; stop them all and pass \
                 skip_process_check",
                path.display()
            ),
        ))
    }
}

/// Imports on `conn`, which is inside a write transaction (or a savepoint
/// of one). `path` is the file, for the process check (`None`: a private
/// database).
pub(crate) fn import_in(
    conn: Conn<'_>,
    path: Option<&Path>,
    o: &ImportOptions,
    now: i64,
    max_payload: usize,
) -> Result<ImportReport> {
    let mut report = ImportReport {
        dry_run: o.dry_run,
        time_zone: spec::zone(o.time_zone.as_deref().unwrap_or(&spec::local_zone_name()))?.1,
        ..ImportReport::default()
    };
    report.found = crate::schema::honker_objects(conn)?;
    if report.found.is_empty() {
        report.process_check = "not needed".into();
        return Ok(report);
    }
    check_holders(path, o, &mut report, o.dry_run)?;
    conn.execute_batch("SAVEPOINT honker_import")?;
    let result = copy(conn, &mut report, now, max_payload);
    let end = if result.is_err() || o.dry_run {
        "ROLLBACK TO honker_import; RELEASE honker_import"
    } else {
        "RELEASE honker_import"
    };
    let ended = conn.execute_batch(end);
    result?;
    ended?;
    Ok(report)
}

/// Honker's tables, each with the name it is moved to.
const MOVES: &[(&str, &str)] = &[
    ("_honker_live", "_honker_import_live"),
    ("_honker_dead", "_honker_import_dead"),
    ("_honker_locks", "_honker_import_locks"),
    ("_honker_rate_limits", "_honker_import_rate_limits"),
    ("_honker_scheduler_tasks", "_honker_import_scheduler_tasks"),
    ("_honker_results", "_honker_import_results"),
    ("_honker_stream", "_honker_import_stream"),
    (
        "_honker_stream_consumers",
        "_honker_import_stream_consumers",
    ),
    ("_honker_notifications", "_honker_import_notifications"),
];

fn count(conn: Conn<'_>, sql: &'static str, p: &[&dyn ToSql]) -> Result<i64> {
    conn.prepare_cached(sql)?.query_one(p, |r| r.get(0))
}

fn copy(conn: Conn<'_>, r: &mut ImportReport, now: i64, max_payload: usize) -> Result<()> {
    // Aside: the view Honker's Python client made goes (it holds no data);
    // the tables are renamed, so honker's schema can take the names.
    for found in &r.found {
        if found.starts_with("_honker_jobs ") {
            conn.execute_batch("DROP VIEW main._honker_jobs")?;
        }
    }
    for (from, to) in MOVES {
        if r.found.iter().any(|f| f == &format!("{from} (table)")) {
            conn.execute_batch(&format!("ALTER TABLE main.{from} RENAME TO {to}"))?;
        }
    }
    conn.execute_batch(st::NORMALIZE)?;
    for (table, column, def) in st::ADD_COLUMNS {
        if count(conn, st::HAS_COLUMN, params![table, column])? == 0 {
            conn.execute_batch(&format!(
                "ALTER TABLE main.{table} ADD COLUMN {column} {def}"
            ))?;
        }
    }
    crate::schema::migrate_nested(conn, now)?;
    check_rows(conn)?;

    r.payloads_as_bytes = count(conn, st::NOT_JSON, params![])?;
    let b = Backoff::default();
    let (base, max) = (
        crate::clock::duration_ms(b.base),
        crate::clock::duration_ms(b.max),
    );
    conn.prepare_cached(st::COPY_JOBS)?
        .execute(params![now, base, max, b.jitter])?;
    for (state, n) in conn
        .prepare_cached(st::JOB_STATES)?
        .query_map(params![], |row| {
            Ok((row.get::<String>(0)?, row.get::<i64>(1)?))
        })?
    {
        match state.as_str() {
            "ready" => r.ready = n,
            "scheduled" => r.scheduled = n,
            _ => r.running = n,
        }
    }
    conn.prepare_cached(st::COPY_DEAD)?
        .execute(params![base, max, b.jitter])?;
    r.expired = count(
        conn,
        "SELECT count(*) FROM main._honker_import_dead WHERE last_error = 'expired'",
        params![],
    )?;
    r.dead = count(
        conn,
        "SELECT count(*) FROM main._honker_import_dead",
        params![],
    )? - r.expired;
    r.results = conn
        .prepare_cached(st::COPY_RESULTS)?
        .execute(params![now])? as i64;
    let expired_results = count(conn, st::EXPIRED_RESULTS, params![now])?;
    r.streams = conn
        .prepare_cached(st::COPY_STREAMS)?
        .execute(params![now])? as i64;
    r.events = copy_events(conn)?;
    r.consumers = conn
        .prepare_cached(st::COPY_CONSUMERS)?
        .execute(params![now])? as i64;
    let (expired_locks, leader) = copy_locks(conn, r, now)?;
    copy_schedules(conn, r, now, max_payload)?;
    let last_id = count(conn, st::HONKER_LAST_ID, params![])?;
    conn.prepare_cached(st::BUMP_SEQUENCE)?.execute(params![])?;
    conn.prepare_cached(st::SET_SEQUENCE)?
        .execute(params![last_id])?;

    let (notifications, windows) = conn
        .prepare_cached(st::NOT_IMPORTED)?
        .query_one(params![], |row| {
            Ok((row.get::<i64>(0)?, row.get::<i64>(1)?))
        })?;
    let mut skip = |what: &str, count: i64, why: &str| {
        if count > 0 {
            r.not_imported.push(NotImported {
                what: what.into(),
                count,
                why: why.into(),
            });
        }
    };
    skip(
        "notifications",
        notifications,
        "ephemeral: a listener only sees notifications sent while it listens",
    );
    skip(
        "rate limit windows",
        windows,
        "Honker's fixed-window counters; honker's limiters keep their own state (a limit starts full)",
    );
    skip("results past their lifetime", expired_results, "expired");
    skip(
        "locks past their lifetime",
        expired_locks,
        "expired: nobody holds them",
    );
    skip(
        "Honker's scheduler leader lock",
        leader,
        "honker's schedulers elect their own leader",
    );
    conn.execute_batch(st::DROP_ASIDE)?;
    Ok(())
}

/// Honker's events, numbered 1, 2, … per topic in Honker's order, a page
/// at a time.
fn copy_events(conn: Conn<'_>) -> Result<i64> {
    const PAGE: i64 = 1000;
    type Row = (String, i64, Option<String>, Payload, i64);
    let (mut topic, mut after, mut n, mut total) = (String::new(), i64::MIN, 0i64, 0i64);
    loop {
        let rows: Vec<Row> = conn.prepare_cached(st::EVENTS_PAGE)?.query_map(
            params![topic, after, PAGE],
            |row| {
                Ok((
                    row.get(0)?,
                    row.get(1)?,
                    row.get(2)?,
                    row.get(3)?,
                    row.get(4)?,
                ))
            },
        )?;
        let last_page = (rows.len() as i64) < PAGE;
        let mut insert = conn.prepare_cached(st::INSERT_EVENT)?;
        for (t, offset, key, payload, created_at) in rows {
            if t != topic {
                topic = t;
                n = 0;
            }
            n += 1;
            after = offset;
            insert.execute(params![topic, n, key, payload, created_at])?;
            total += 1;
        }
        if last_page {
            return Ok(total);
        }
    }
}

/// Refuses, before anything is copied, rows that honker's own API would
/// refuse: names it does not accept, keys too long, ids or streams that a
/// honker schema already in the file uses. The message lists them all.
fn check_rows(conn: Conn<'_>) -> Result<()> {
    let mut problems = Vec::new();
    let mut names = |sql: &'static str, what: &str| -> Result<()> {
        for n in conn
            .prepare_cached(sql)?
            .query_map(params![], |r| r.get::<String>(0))?
        {
            if let Err(e) = validate::name(what, &n) {
                problems.push(format!("{what} {n:?}: {}", e.message()));
            }
        }
        Ok(())
    };
    names(st::QUEUE_NAMES, "queue")?;
    names(st::STREAM_NAMES, "stream")?;
    names(st::CONSUMER_NAMES, "consumer")?;
    for (offset, len) in conn
        .prepare_cached(st::LONG_KEYS)?
        .query_map(params![limits::MAX_KEY as i64], |r| {
            Ok((r.get::<i64>(0)?, r.get::<i64>(1)?))
        })?
    {
        problems.push(format!(
            "stream event {offset}: its key is {len} bytes, over the limit of {}",
            limits::MAX_KEY
        ));
    }
    for id in conn
        .prepare_cached(st::TAKEN_IDS)?
        .query_map(params![], |r| r.get::<i64>(0))?
    {
        problems.push(format!(
            "job {id}: honker's tables in this file already use that id"
        ));
    }
    for s in conn
        .prepare_cached(st::TAKEN_STREAMS)?
        .query_map(params![], |r| r.get::<String>(0))?
    {
        problems.push(format!(
            "stream {s:?}: honker's tables in this file already hold it"
        ));
    }
    if problems.is_empty() {
        return Ok(());
    }
    Err(Error::invalid(format!(
        "Honker's data cannot be imported as it is: {}. Fix these rows in Honker's tables \
         (or remove them) and import again; nothing was changed",
        problems.join("; ")
    )))
}

/// Held locks, each with a fencing token from honker's counter (1, 2, …
/// in a new file); returns (expired locks, leader locks) not imported.
fn copy_locks(conn: Conn<'_>, r: &mut ImportReport, now: i64) -> Result<(i64, i64)> {
    let rows = conn
        .prepare_cached(st::LOCKS)?
        .query_map(params![now], |row| {
            Ok((
                row.get::<String>(0)?,
                row.get::<String>(1)?,
                row.get::<i64>(2)?,
                row.get::<bool>(3)?,
            ))
        })?;
    let (mut expired, mut leader) = (0, 0);
    for (name, owner, expires_s, live) in rows {
        if name == HONKER_LEADER_LOCK {
            leader += 1;
            continue;
        }
        if !live {
            expired += 1;
            continue;
        }
        validate::name("lock", &name)
            .and_then(|()| validate::name("owner", &owner))
            .map_err(|e| {
                Error::invalid(format!(
                    "lock {name:?}: {}; nothing was changed",
                    e.message()
                ))
            })?;
        let token: i64 = conn
            .prepare_cached(lock_st::NEXT_TOKEN)?
            .query_one(params![], |row| row.get(0))?;
        conn.prepare_cached(lock_st::PUT)?.execute(params![
            name,
            owner,
            token,
            now,
            expires_s.saturating_mul(1000)
        ])?;
        r.locks += 1;
    }
    Ok((expired, leader))
}

/// Schedules, with Honker's meaning (its zone, its AND of the day fields,
/// its catch-up) and Honker's next fire kept.
fn copy_schedules(
    conn: Conn<'_>,
    r: &mut ImportReport,
    now: i64,
    max_payload: usize,
) -> Result<()> {
    type Row = (
        String,
        String,
        String,
        Payload,
        i64,
        Option<i64>,
        i64,
        i64,
        i64,
    );
    let rows: Vec<Row> = conn
        .prepare_cached(st::SCHEDULES)?
        .query_map(params![], |row| {
            Ok((
                row.get(0)?,
                row.get(1)?,
                row.get(2)?,
                row.get(3)?,
                row.get(4)?,
                row.get(5)?,
                row.get(6)?,
                row.get(7)?,
                row.get(8)?,
            ))
        })?;
    for (name, queue, expr, payload, priority, expires_s, next_s, enabled, max_attempts) in rows {
        let bad = |e: Error| {
            Error::invalid(format!(
                "schedule {name:?} ({expr:?}): {}; nothing was changed",
                e.message()
            ))
        };
        let mut s = crate::schedule::sqlfn::honker_schedule(
            &name,
            &queue,
            &expr,
            payload,
            priority,
            expires_s.filter(|e| *e > 0).map(|e| e as f64),
            max_attempts,
        )
        .map_err(bad)?;
        s.time_zone = r.time_zone.clone();
        let spec = s.check(max_payload).map_err(bad)?;
        let next = next_s.saturating_mul(1000);
        let anchor = if spec.is_every() { next } else { 0 };
        schedule_ops::upsert(conn, &s, &spec, anchor, now)?;
        conn.prepare_cached(st::KEEP_NEXT_FIRE)?.execute(params![
            name,
            next,
            i64::from(enabled == 0),
            anchor
        ])?;
        r.schedules += 1;
        for note in notes(&expr, &r.time_zone) {
            r.schedule_notes.push(ScheduleNote {
                name: name.clone(),
                cron_expr: expr.clone(),
                note,
            });
        }
    }
    Ok(())
}

/// What a reader of an imported schedule should know: where the same
/// expression means something else to honker's own API, or where honker
/// does what Honker meant rather than what it did.
fn notes(expr: &str, zone: &str) -> Vec<String> {
    let fields: Vec<&str> = expr.split_whitespace().collect();
    if expr.trim_start().starts_with('@') || !(5..=6).contains(&fields.len()) {
        return Vec::new();
    }
    let f = &fields[fields.len() - 5..];
    let mut out = Vec::new();
    let restricted = |s: &str| s != "*" && s != "?";
    if restricted(f[2]) && restricted(f[4]) {
        out.push(format!(
            "day-of-month {:?} AND day-of-week {:?} (Honker's rule, kept); added through \
             honker's API the same expression fires when EITHER matches (Vixie cron)",
            f[2], f[4]
        ));
    }
    if fields
        .iter()
        .any(|x| x.split(',').any(|p| p.contains('/') && !p.starts_with('*')))
    {
        out.push(
            "a field N/step: Honker 0.2.4 fired only at N; honker fires at N, N+step, … \
             (what the expression means in every other cron)"
                .into(),
        );
    }
    if zone != "UTC" {
        out.push(format!(
            "evaluated in {zone} (Honker used the local zone of the process that ran its \
             scheduler); added through honker's API without a time_zone it would run in UTC"
        ));
    }
    out
}

/// `honker_import_honker([options])` → a JSON report. See [`import_in`].
fn import_fn(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    a.count(0, 1)?;
    let o = match a.opt_text(0, "options")? {
        Some(t) if a.has(0) => ImportOptions::from_json(t)?,
        _ => ImportOptions::default(),
    };
    let file = c.conn.filename();
    let path = file.as_deref().filter(|f| !f.is_empty()).map(Path::new);
    let report = import_in(c.conn, path, &o, c.now, c.config.max_payload_bytes)?;
    Ok(Out::Text(report.to_json().to_string()))
}

/// The importer's SQL function.
pub(crate) const FUNCTIONS: &[SqlFn] = &[
    SqlFn::atomic("honker_import_honker", 0, DIRECT_ONLY, import_fn),
    SqlFn::atomic("honker_import_honker", 1, DIRECT_ONLY, import_fn),
];

/// Imports the Honker file at `path` in place (see the module docs): the
/// file must exist; every Honker process must be stopped (checked on
/// Linux: `UNSAFE` otherwise). Returns what was moved and what was not.
#[cfg(feature = "rusqlite")]
pub fn import_honker(path: impl AsRef<Path>, options: &ImportOptions) -> Result<ImportReport> {
    crate::fork::check_open_allowed()?;
    let path = path.as_ref();
    if !path.is_file() {
        return Err(Error::invalid(format!(
            "{} is not a database file (the importer never creates one)",
            path.display()
        )));
    }
    // Before honker opens it: no lock of this process is on it yet.
    let mut early = ImportReport::default();
    check_holders(Some(path), options, &mut early, options.dry_run)?;
    let opts = crate::Options::default();
    let writer = crate::connection::open_writer(path, opts.busy_timeout, opts.durability)?;
    crate::schema::check_not_too_new(writer.raw())?;
    let now = opts.clock.now_ms();
    let result = crate::sqlfn::atomically(writer.raw(), || {
        import_in(
            writer.raw(),
            Some(path),
            options,
            now,
            opts.max_payload_bytes,
        )
    });
    let closed = writer.close();
    let report = result?;
    closed?;
    Ok(report)
}
