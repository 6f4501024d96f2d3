//! `honker`: the operator's command (ADR 26). Read commands (`status`,
//! `jobs list|show`, `dead list`, `tail`, `listen`, `schedules list`,
//! `locks`, `doctor`) open the file read-only and never migrate it; the
//! others open it as every honker process does. Every behaviour lives in
//! core; this file parses arguments and prints. [`main_from`] is the whole
//! command: the `honker` binary and the Python and Node packages' `honker`
//! commands call it.
//!
//! Exit codes: 0 success; 1 the command failed (stderr starts with
//! `honker: CODE:`, the error's stable code); 2 bad usage; 3 `doctor`
//! found a check that fails.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::{CommandFactory, Parser, Subcommand};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use serde_json::{json, Value as Json};

use honker::import::{import_honker, ImportOptions};
use honker::inspect::{self, dead_letters, status, FileStatus, JobRow};
use honker::{Database, ErrorKind, Payload};

// The verbs' options of core's table as flags (`--idempotency-key`): a
// command that runs a verb flattens its record.
macro_rules! option_args {
    ($($table:tt)*) => {
        honker::option_structs! { [#[derive(Debug, clap::Args)]] [#[arg(long)]] seconds $($table)* }
    };
}
honker::options!(option_args);

#[derive(Parser)]
#[command(name = "honker", version, about = "Look after a honker database file")]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Show times (ages, what is due, which leases and locks have lapsed)
    /// as of this instant, in ms since the epoch, instead of now. Only
    /// what is printed changes; the snapshot tests use it to see a file as
    /// it was when it was written.
    #[arg(long, global = true, hide = true)]
    now_ms: Option<i64>,
}

thread_local! {
    /// `--now-ms`, for the command running on this thread.
    static NOW_MS: std::cell::Cell<Option<i64>> = const { std::cell::Cell::new(None) };
}

#[derive(Subcommand)]
enum Command {
    /// Queues, streams, schedules and locks at a glance. Opens the file
    /// read-only: never migrates, bootstraps or maintains it.
    Status {
        /// The database file.
        db: PathBuf,
        /// Print JSON instead of tables.
        #[arg(long)]
        json: bool,
    },
    /// Import a Honker file in place (docs/switching-from-honker.md); every
    /// Honker process must be stopped.
    Import {
        /// The database file.
        db: PathBuf,
        /// Do everything, report it, roll it back.
        #[arg(long)]
        dry_run: bool,
        /// The IANA zone imported schedules run in (default: this
        /// machine's local zone, which Honker used).
        #[arg(long)]
        time_zone: Option<String>,
        /// Do not look for other processes holding the file.
        #[arg(long)]
        skip_process_check: bool,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Jobs in any state: list and show (read-only), retry, cancel.
    Jobs {
        #[command(subcommand)]
        action: JobsAction,
    },
    /// Put a job on a queue; prints its id. Durations are in seconds, times
    /// in seconds since the Unix epoch.
    Enqueue {
        /// The database file.
        db: PathBuf,
        /// The queue.
        queue: String,
        /// The payload, as JSON text.
        payload: String,
        #[command(flatten)]
        options: EnqueueArgs,
    },
    /// Publish an event to a stream; prints its offset.
    Publish {
        /// The database file.
        db: PathBuf,
        /// The stream.
        stream: String,
        /// The payload, as JSON text.
        payload: String,
        #[command(flatten)]
        options: PublishArgs,
    },
    /// Print a stream's events: the last few, then (with --follow) each new
    /// one as it is committed. Read-only.
    Tail {
        /// The database file.
        db: PathBuf,
        /// The stream.
        stream: String,
        /// Start after this offset instead of showing the last --lines.
        #[arg(long)]
        after: Option<i64>,
        /// How many of the last events to show first.
        #[arg(long, default_value_t = 10)]
        lines: i64,
        /// Keep printing new events (woken by commits, no polling).
        #[arg(long, short)]
        follow: bool,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Print a channel's notifications sent from now on. Read-only.
    Listen {
        /// The database file.
        db: PathBuf,
        /// The channel.
        channel: String,
        /// Exit after this many.
        #[arg(long)]
        count: Option<usize>,
        /// Exit after this many seconds.
        #[arg(long)]
        timeout: Option<u64>,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Dead letters: list (read-only), requeue, purge.
    Dead {
        #[command(subcommand)]
        action: DeadAction,
    },
    /// Queues: pause and resume, one or all (ADR 33).
    Queues {
        #[command(subcommand)]
        action: QueuesAction,
    },
    /// Schedules: list (read-only), pause, resume, trigger.
    Schedules {
        #[command(subcommand)]
        action: ScheduleAction,
    },
    /// Every queue's counters (enqueued, claimed, acked, retried, reclaimed,
    /// dead, expired, cancelled), claim latency histogram and jobs by state,
    /// in Prometheus's text format (for node_exporter's textfile
    /// collector). Read-only.
    Metrics {
        /// The database file.
        db: PathBuf,
        /// Print JSON instead.
        #[arg(long)]
        json: bool,
    },
    /// A live view of every queue: rates (per second, from the file's
    /// counters), jobs by state and claim latency, redrawn when another
    /// process commits (woken by the watcher, no polling) and at least every
    /// few seconds. Read-only. Ctrl-C ends it.
    Top {
        /// The database file.
        db: PathBuf,
        /// At most one redraw per this many milliseconds.
        #[arg(long, default_value_t = 500)]
        interval_ms: u64,
        /// Exit after this many redraws.
        #[arg(long)]
        count: Option<u64>,
    },
    /// Held locks, with holder and fencing token (read-only).
    Locks {
        /// The database file.
        db: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run maintenance now (retention, expiry, pruning) and report what it
    /// removed.
    Maintain {
        /// The database file.
        db: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// A consistent, checked copy of the database, taken while other
    /// processes keep writing (VACUUM INTO a temporary name, integrity and
    /// schema checked, then renamed to DEST).
    Backup {
        /// The database file.
        db: PathBuf,
        /// Where the copy goes.
        dest: PathBuf,
        /// Replace DEST if it exists.
        #[arg(long)]
        force: bool,
        /// Show progress on stderr, a line each (the default on a terminal,
        /// where one line is updated).
        #[arg(long)]
        progress: bool,
    },
    /// Replace the database with a backup: SRC is checked first; refused
    /// while any process has DB open. Jobs leased at backup time come back
    /// after their lease; jobs finished after the backup run again.
    Restore {
        /// The backup.
        src: PathBuf,
        /// The database file to replace.
        db: PathBuf,
    },
    /// Check for hazards: a network file system, the journal mode, the
    /// schema, the WAL's size, lapsed leases, the processes that have the
    /// file open and any mapping two SQLite libraries. Changes nothing.
    /// Exits 3 when a check fails.
    Doctor {
        /// The database file.
        db: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print a shell completion script.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Workers run in your application's language: prints how to run them.
    #[command(disable_help_flag = true)]
    Worker {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
        rest: Vec<String>,
    },
}

#[derive(Subcommand)]
enum JobsAction {
    /// Jobs, oldest id first (read-only).
    List {
        /// The database file.
        db: PathBuf,
        /// Only this queue's.
        #[arg(long)]
        queue: Option<String>,
        /// Only jobs in this state: ready, scheduled, running, dead, cancelled,
        /// expired, completed.
        #[arg(long)]
        state: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// One job, with its payload (read-only).
    Show {
        /// The database file.
        db: PathBuf,
        /// The job's id.
        id: i64,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run a job as soon as a worker is free: a scheduled job (delayed, or
    /// waiting out a retry's backoff) becomes ready now with its attempts
    /// kept; a dead letter is requeued with its attempts reset. A running
    /// job is left to its worker.
    Retry {
        /// The database file.
        db: PathBuf,
        /// The job's id, as `jobs show` takes it; `QUEUE ID` (the older
        /// form) works too.
        #[arg(num_args = 1..=2, value_names = ["QUEUE", "ID"], required = true)]
        job: Vec<String>,
    },
    /// Cancel a job that has not finished: a ready or scheduled one never
    /// runs; a running one's handler is told at its worker's next lease
    /// renewal (a third of the lease) and its outcome is refused. The job
    /// ends cancelled, with the reason as its last error.
    Cancel {
        /// The database file.
        db: PathBuf,
        /// The job's id, as `jobs show` takes it; `QUEUE ID` (the older
        /// form) works too.
        #[arg(num_args = 1..=2, value_names = ["QUEUE", "ID"], required = true)]
        job: Vec<String>,
        /// Why (kept as its last error).
        #[arg(long)]
        reason: Option<String>,
    },
}

#[derive(Subcommand)]
enum DeadAction {
    /// Dead letters, oldest first (read-only).
    List {
        /// The database file.
        db: PathBuf,
        /// Only this queue's.
        #[arg(long)]
        queue: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Put a dead letter (or, with --all, every one of the queue's) back on
    /// its queue, ready, with its attempts reset.
    Requeue {
        /// The database file.
        db: PathBuf,
        /// The queue.
        queue: String,
        /// The job's id.
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        id: Option<i64>,
        /// Every dead letter of the queue.
        #[arg(long)]
        all: bool,
    },
    /// Delete the queue's dead letters (those older than --older-than
    /// seconds, if given).
    Purge {
        /// The database file.
        db: PathBuf,
        /// The queue.
        queue: String,
        /// Only those dead longer than this many seconds.
        #[arg(long)]
        older_than: Option<u64>,
    },
}

#[derive(Subcommand)]
enum QueuesAction {
    /// Stop every process claiming the queue's jobs (or, with --all, every
    /// queue's) until it is resumed. Running jobs finish; enqueues and
    /// schedules go on, so jobs accumulate. Kept in the file.
    Pause {
        /// The database file.
        db: PathBuf,
        /// The queue.
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        queue: Option<String>,
        /// Every queue (a queue's own pause is apart).
        #[arg(long)]
        all: bool,
        #[command(flatten)]
        options: PauseArgs,
    },
    /// Let the queue's jobs be claimed again (or, with --all, lift the
    /// pause of every queue, leaving queues paused on their own paused).
    Resume {
        /// The database file.
        db: PathBuf,
        /// The queue.
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        queue: Option<String>,
        /// The pause of every queue.
        #[arg(long)]
        all: bool,
    },
    /// Cap how many of the queue's jobs run at once, across every process
    /// (ADR 35): with neither option, the caps are lifted. Claims count
    /// unexpired leases; a killed worker's slot comes back when its lease
    /// ends.
    Limit {
        /// The database file.
        db: PathBuf,
        /// The queue.
        queue: String,
        #[command(flatten)]
        options: ConcurrencyArgs,
    },
    /// Share the queue's claims among its concurrency keys, across every
    /// process (ADR 36): --order round_robin takes each key with ready jobs
    /// once per turn; --key-limit N --key-per SECONDS caps how fast one
    /// key's jobs start. An option not given is its default (priority
    /// order, no limit per key).
    Fair {
        /// The database file.
        db: PathBuf,
        /// The queue.
        queue: String,
        #[command(flatten)]
        options: FairnessArgs,
    },
}

#[derive(Subcommand)]
enum ScheduleAction {
    /// Every schedule with its next fire (read-only).
    List {
        /// The database file.
        db: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Stop a schedule firing until it is resumed.
    Pause {
        /// The database file.
        db: PathBuf,
        /// The schedule.
        name: String,
        /// Why (shown by list).
        #[arg(long)]
        note: Option<String>,
    },
    /// Let a paused schedule fire again, from its next boundary.
    Resume {
        /// The database file.
        db: PathBuf,
        /// The schedule.
        name: String,
    },
    /// Fire a schedule now (its job goes on its queue); prints the job id.
    Trigger {
        /// The database file.
        db: PathBuf,
        /// The schedule.
        name: String,
    },
}

/// `12345678` bytes as `12.3 MB`.
fn megabytes(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

fn now_ms() -> i64 {
    if let Some(t) = NOW_MS.get() {
        return t;
    }
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// `90061000` ms as `1d 1h 1m 1s`.
fn span(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    let (d, h, m, sec) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    let parts: Vec<String> = [(d, "d"), (h, "h"), (m, "m"), (sec, "s")]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, u)| format!("{n}{u}"))
        .collect();
    if parts.is_empty() {
        "0s".into()
    } else {
        parts.join(" ")
    }
}

fn status_json(s: &FileStatus, now: i64) -> Json {
    json!({
        "schema": {"version": s.schema_version, "latest": s.latest,
                   "pending_migrations": s.pending_migrations},
        "honker_objects": s.honker_objects,
        "queues": s.queues.iter().map(|q| json!({
            "name": q.name, "ready": q.ready, "scheduled": q.scheduled, "running": q.running,
            "dead": q.dead, "oldest_ready_age_ms": q.oldest_ready_at.map(|t| (now - t).max(0)),
            "paused": q.pause.as_ref().map(pause_json),
            "max_running": q.caps.max_running,
            "max_running_per_key": q.caps.max_running_per_key,
            "round_robin": q.fairness.order.is_some(),
            "key_limit": q.fairness.key_limit,
            "key_per_ms": q.fairness.key_per.map(|d| d.as_millis() as i64),
        })).collect::<Vec<_>>(),
        "paused_all": s.paused_all.as_ref().map(pause_json),
        "streams": s.streams.iter().map(|st| json!({
            "name": st.name, "last_offset": st.last_offset,
            "consumers": st.consumers.iter().map(|c| json!({
                "name": c.name, "next_offset": c.next_offset, "lag": c.lag})).collect::<Vec<_>>(),
            "groups": st.groups.iter().map(|g| json!({
                "name": g.name, "next_offset": g.next_offset, "lag": g.lag,
                "pending": g.pending, "dead": g.dead})).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "schedules": schedules_json(&s.schedules),
        "locks": locks_json(&s.locks),
    })
}

/// A queue's concurrency caps as `status` shows them: `4` (at most four
/// running), `2/key`, both, or `-`; with its fairness (ADR 36): `round
/// robin`, `10/key per 1s`.
fn caps_text(c: &honker::Concurrency, f: &honker::Fairness) -> String {
    let parts: Vec<String> = [
        c.max_running.map(|n| n.to_string()),
        c.max_running_per_key.map(|n| format!("{n}/key")),
        f.order.as_ref().map(|_| "round robin".to_owned()),
        f.key_limit
            .zip(f.key_per)
            .map(|(n, per)| match per.as_millis() as i64 {
                ms if ms % 1000 != 0 => format!("{n}/key per {ms}ms"),
                ms => format!("{n}/key per {}", span(ms)),
            }),
    ]
    .into_iter()
    .flatten()
    .collect();
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(", ")
    }
}

/// A pause as `status --json` shows it.
fn pause_json(p: &honker::Pause) -> Json {
    json!({"all": p.all, "note": p.note, "since": p.since})
}

/// A pause as `status` shows it: for how long, and its note.
fn pause_text(p: &honker::Pause, now: i64) -> String {
    let note = p
        .note
        .as_deref()
        .map_or(String::new(), |n| format!(": {n}"));
    format!("{}{note}", span(now - p.since))
}

fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED)
        .set_header(header.to_vec());
    t
}

fn status_text(s: &FileStatus, now: i64) -> String {
    let mut out = String::new();
    out += &format!(
        "schema: version {} (this build: {})\n",
        s.schema_version, s.latest
    );
    if !s.pending_migrations.is_empty() {
        out += &format!(
            "  an upgrade (any honker open) would apply: {}\n",
            s.pending_migrations.join(", ")
        );
    }
    if !s.honker_objects.is_empty() {
        out += &format!(
            "Honker's tables: {}\n  import them with `honker import DB` (every Honker process stopped)\n",
            s.honker_objects.join(", ")
        );
    }
    let mut q = table(&[
        "queue",
        "ready",
        "scheduled",
        "running",
        "dead",
        "oldest ready",
        "caps",
        "paused",
    ]);
    for x in &s.queues {
        q.add_row(vec![
            x.name.clone(),
            x.ready.to_string(),
            x.scheduled.to_string(),
            x.running.to_string(),
            x.dead.to_string(),
            x.oldest_ready_at.map_or("-".into(), |t| span(now - t)),
            caps_text(&x.caps, &x.fairness),
            x.pause.as_ref().map_or("-".into(), |p| match p.all {
                true => format!("all queues, {}", pause_text(p, now)),
                false => pause_text(p, now),
            }),
        ]);
    }
    if let Some(p) = &s.paused_all {
        out += &format!("\nall queues paused for {}\n", pause_text(p, now));
    }
    out += &section("queues", s.queues.is_empty(), &q);
    let mut st = table(&[
        "stream",
        "reader",
        "kind",
        "next offset",
        "lag",
        "pending",
        "dead",
    ]);
    for x in &s.streams {
        st.add_row(vec![
            x.name.clone(),
            String::new(),
            format!("last offset {}", x.last_offset),
        ]);
        for c in &x.consumers {
            st.add_row(vec![
                String::new(),
                c.name.clone(),
                "consumer".into(),
                c.next_offset.to_string(),
                c.lag.to_string(),
                "-".into(),
                "-".into(),
            ]);
        }
        for g in &x.groups {
            st.add_row(vec![
                String::new(),
                g.name.clone(),
                "group".into(),
                g.next_offset.to_string(),
                g.lag.to_string(),
                g.pending.to_string(),
                g.dead.to_string(),
            ]);
        }
    }
    out += &section("streams", s.streams.is_empty(), &st);
    out += &section(
        "schedules",
        s.schedules.is_empty(),
        &schedules_table(&s.schedules, now),
    );
    out += &section("locks", s.locks.is_empty(), &locks_table(&s.locks, now));
    out
}

/// A titled table of `status`, or a line saying there is none.
fn section(title: &str, empty: bool, t: &Table) -> String {
    if empty {
        format!("\n{title}: none\n")
    } else {
        format!("\n{title}\n{t}\n")
    }
}

fn schedules_json(list: &[honker::inspect::ScheduleStatus]) -> Json {
    Json::Array(
        list.iter()
            .map(|c| {
                json!({
                    "name": c.name, "queue": c.queue, "spec": c.spec, "time_zone": c.time_zone,
                    "paused": c.paused, "next_fire_at": c.next_fire_at, "missed": c.missed,
                })
            })
            .collect(),
    )
}

fn locks_json(list: &[honker::inspect::LockStatus]) -> Json {
    Json::Array(
        list.iter()
            .map(|l| {
                json!({
                    "name": l.name, "owner": l.owner, "token": l.token, "expires_at": l.expires_at,
                })
            })
            .collect(),
    )
}

fn schedules_table(list: &[honker::inspect::ScheduleStatus], now: i64) -> Table {
    let mut sc = table(&["schedule", "queue", "rule", "zone", "next fire", "missed"]);
    for x in list {
        let next = match (x.paused, x.next_fire_at) {
            (true, _) => "paused".into(),
            (false, None) => "ended".into(),
            (false, Some(t)) if t <= now => format!("due {} ago", span(now - t)),
            (false, Some(t)) => format!("in {}", span(t - now)),
        };
        sc.add_row(vec![
            x.name.clone(),
            x.queue.clone(),
            x.spec.clone(),
            x.time_zone.clone(),
            next,
            x.missed.to_string(),
        ]);
    }
    sc
}

fn locks_table(list: &[honker::inspect::LockStatus], now: i64) -> Table {
    let mut lk = table(&["lock", "holder", "token", "expires"]);
    for x in list {
        lk.add_row(vec![
            x.name.clone(),
            x.owner.clone(),
            x.token.to_string(),
            format!("in {}", span(x.expires_at - now)),
        ]);
    }
    lk
}

fn json_text(j: &Json) -> String {
    format!("{j:#}\n")
}

fn run(cli: Cli) -> Result<String, honker::Error> {
    match cli.command {
        Command::Status { db, json } => {
            let now = now_ms();
            let s = status(&db, now)?;
            Ok(if json {
                format!("{:#}\n", status_json(&s, now))
            } else {
                status_text(&s, now)
            })
        }
        Command::Import {
            db,
            dry_run,
            time_zone,
            skip_process_check,
            json,
        } => {
            let r = import_honker(
                &db,
                &ImportOptions {
                    dry_run,
                    time_zone,
                    skip_process_check,
                },
            )?;
            let j = r.to_json();
            if json {
                return Ok(format!("{j:#}\n"));
            }
            if r.found.is_empty() {
                return Ok("nothing to import: the file holds none of Honker's tables\n".into());
            }
            let mut out = format!(
                "{}: {} ready, {} scheduled, {} running jobs; {} dead, {} expired; {} results; \
                 {} streams, {} events, {} consumers; {} schedules ({}); {} locks\n",
                if dry_run {
                    "would import (dry run, nothing changed)"
                } else {
                    "imported"
                },
                r.ready,
                r.scheduled,
                r.running,
                r.dead,
                r.expired,
                r.results,
                r.streams,
                r.events,
                r.consumers,
                r.schedules,
                r.time_zone,
                r.locks
            );
            for n in &r.not_imported {
                out += &format!("not imported: {} {} ({})\n", n.count, n.what, n.why);
            }
            for n in &r.schedule_notes {
                out += &format!("check schedule {} ({}): {}\n", n.name, n.cron_expr, n.note);
            }
            for h in &r.holders {
                out += &format!("holds the file: {h}\n");
            }
            Ok(out)
        }
        Command::Jobs { action } => jobs(action),
        Command::Enqueue {
            db,
            queue,
            payload,
            options,
        } => {
            let payload = Payload::json_text(payload)?;
            let e = Database::open(&db)?
                .queue(&queue)?
                .enqueue(payload, &options.to_core()?)?;
            if let Some(mode) = e.unique {
                // stdout stays the id: scripts read it.
                eprintln!(
                    "honker: nothing added: job {} holds the dedupe key ({})",
                    e.id,
                    mode.as_str()
                );
            }
            Ok(format!("{}\n", e.id))
        }
        Command::Publish {
            db,
            stream,
            payload,
            options,
        } => {
            let payload = Payload::json_text(payload)?;
            let options = options.to_core()?;
            let offset = Database::open(&db)?
                .stream(&stream)?
                .publish(payload, &options)?;
            Ok(format!("{offset}\n"))
        }
        Command::Dead { action } => dead(action),
        Command::Queues { action } => queues(action),
        Command::Schedules { action } => schedules(action),
        Command::Metrics { db, json } => {
            let list = inspect::metrics(&db, now_ms())?;
            Ok(if json {
                json_text(&Json::Array(list.iter().map(|m| m.to_json()).collect()))
            } else {
                honker::queue::metrics::exposition(&list)
            })
        }
        Command::Locks { db, json } => {
            let now = now_ms();
            let s = status(&db, now)?;
            Ok(if json {
                json_text(&locks_json(&s.locks))
            } else {
                format!("{}\n", locks_table(&s.locks, now))
            })
        }
        Command::Maintain { db, json } => {
            let r = Database::open(&db)?.maintain()?;
            let j = json!({
                "dead": r.dead, "cancelled": r.cancelled, "completed": r.completed,
                "results": r.results, "stream_events": r.stream_events,
                "publish_keys": r.publish_keys, "notifications": r.notifications,
                "group_members": r.group_members, "locks": r.locks,
                "rate_limit_keys": r.rate_limit_keys, "schedule_fires": r.schedule_fires,
                "queue_keys": r.queue_keys, "unique_holds": r.unique_holds,
            });
            Ok(if json {
                json_text(&j)
            } else {
                let parts: Vec<String> = j
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| format!("{k} {v}"))
                    .collect();
                format!("maintenance removed: {}\n", parts.join(", "))
            })
        }
        Command::Backup {
            db,
            dest,
            force,
            progress,
        } => {
            use std::io::IsTerminal;
            let terminal = std::io::stderr().is_terminal();
            let show = progress || terminal;
            let every = if show {
                Duration::from_millis(250)
            } else {
                Duration::MAX
            };
            let mut report = |p: honker::backup::BackupProgress| {
                if show {
                    let pct = (p.written * 100).checked_div(p.total).unwrap_or(100);
                    let line = format!(
                        "honker: backup {pct:>3}% ({} of {})",
                        megabytes(p.written),
                        megabytes(p.total)
                    );
                    let mut err = std::io::stderr().lock();
                    let _ = if terminal {
                        write!(err, "\r{line}")
                    } else {
                        writeln!(err, "{line}")
                    };
                }
            };
            let r = honker::backup::backup_with_progress(&db, &dest, force, every, &mut report);
            if terminal {
                eprintln!();
            }
            let r = r?;
            Ok(format!(
                "backed up to {} ({} bytes, schema {}; integrity checked)\n",
                r.path.display(),
                r.bytes,
                r.schema_version
            ))
        }
        Command::Restore { src, db } => {
            let r = honker::backup::restore(&src, &db)?;
            Ok(format!(
                "restored {} from {} ({} bytes, schema {})\n",
                r.path.display(),
                src.display(),
                r.bytes,
                r.schema_version
            ))
        }
        Command::Completions { shell } => {
            let mut buf = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "honker", &mut buf);
            Ok(String::from_utf8_lossy(&buf).into_owned())
        }
        Command::Worker { .. }
        | Command::Doctor { .. }
        | Command::Tail { .. }
        | Command::Listen { .. }
        | Command::Top { .. } => unreachable!("handled in main"),
    }
}

fn job_json(j: &JobRow) -> Json {
    let payload = match &j.payload_json {
        Some(t) => serde_json::from_str(t).unwrap_or(Json::Null),
        None => json!({ "bytes": j.payload_bytes }),
    };
    json!({
        "id": j.id, "queue": j.queue, "state": j.state, "priority": j.priority,
        "run_at": j.run_at, "attempts": j.attempts, "max_attempts": j.max_attempts,
        "worker_id": j.worker_id, "lease_expires_at": j.lease_expires_at,
        "last_error": j.last_error, "payload": payload,
    })
}

/// A job named as `ID` (its queue read from the file) or `QUEUE ID`.
fn job_target(db: &Path, args: &[String], now: i64) -> Result<(String, i64), honker::Error> {
    let id_of = |s: &str| {
        s.parse::<i64>().map_err(|_| {
            honker::Error::new(
                ErrorKind::InvalidArgument,
                format!("a job id is a whole number, got {s:?}"),
            )
        })
    };
    match args {
        [queue, id] => Ok((queue.clone(), id_of(id)?)),
        [id] => {
            let id = id_of(id)?;
            let j = inspect::job(db, id, now)?.ok_or_else(|| {
                honker::Error::new(honker::ErrorKind::NotFound, format!("no job {id}"))
            })?;
            Ok((j.queue, id))
        }
        _ => Err(honker::Error::new(
            ErrorKind::InvalidArgument,
            "give the job's id (or its queue and id)",
        )),
    }
}

/// `t` (ms since the epoch) as an RFC 3339 UTC time, to the millisecond.
fn utc(t: i64) -> String {
    jiff::Timestamp::from_millisecond(t).map_or_else(|_| format!("{t} ms"), |ts| format!("{ts:.3}"))
}

fn when(t: i64, now: i64) -> String {
    if t <= now {
        format!("{} ago", span(now - t))
    } else {
        format!("in {}", span(t - now))
    }
}

fn jobs(action: JobsAction) -> Result<String, honker::Error> {
    let now = now_ms();
    match action {
        JobsAction::List {
            db,
            queue,
            state,
            limit,
            json,
        } => {
            let list = inspect::jobs(&db, queue.as_deref(), state.as_deref(), limit, now)?;
            if json {
                return Ok(json_text(&Json::Array(list.iter().map(job_json).collect())));
            }
            let mut t = table(&[
                "id",
                "queue",
                "state",
                "due",
                "attempts",
                "worker",
                "last error",
            ]);
            for j in &list {
                t.add_row(vec![
                    j.id.to_string(),
                    j.queue.clone(),
                    j.state.clone(),
                    when(j.run_at, now),
                    format!("{}/{}", j.attempts, j.max_attempts),
                    j.worker_id.clone().unwrap_or_default(),
                    j.last_error.clone().unwrap_or_default(),
                ]);
            }
            Ok(format!("{t}\n"))
        }
        JobsAction::Show { db, id, json } => {
            let j = inspect::job(&db, id, now)?.ok_or_else(|| {
                honker::Error::new(honker::ErrorKind::NotFound, format!("no job {id}"))
            })?;
            let v = job_json(&j);
            if json {
                return Ok(json_text(&v));
            }
            let mut out = String::new();
            for (k, x) in v.as_object().into_iter().flatten() {
                // Times as a person reads them (they were raw epoch ms);
                // --json keeps the numbers.
                let shown = match (k.ends_with("_at"), x.as_i64()) {
                    (true, Some(t)) => format!("{} ({})", utc(t), when(t, now)),
                    _ => x.to_string(),
                };
                out += &format!("{k:>16}: {shown}\n");
            }
            Ok(out)
        }
        JobsAction::Retry { db, job } => {
            use honker::queue::{JobState, RetryNow};
            let (queue, id) = job_target(&db, &job, now)?;
            let refused = |why: String| Err(honker::Error::new(ErrorKind::InvalidArgument, why));
            match Database::open(&db)?.queue(&queue)?.retry_now(id)? {
                RetryNow::MadeReady => Ok(format!("job {id} is ready now\n")),
                RetryNow::Requeued => Ok(format!("requeued dead job {id}, attempts reset\n")),
                RetryNow::Unchanged(JobState::Ready) => Ok(format!("job {id} was ready already\n")),
                RetryNow::Unchanged(JobState::Running) => refused(format!(
                    "job {id} is running: its worker acks or retries it \
                     (`honker jobs cancel` stops it)"
                )),
                RetryNow::Unchanged(JobState::Dead) => refused(format!(
                    "dead job {id} stays dead: a live job holds its dedupe key"
                )),
                RetryNow::Unchanged(state) => refused(format!(
                    "job {id} is {}: only scheduled and dead jobs can be retried",
                    state.as_str()
                )),
            }
        }
        JobsAction::Cancel { db, job, reason } => {
            let (queue, id) = job_target(&db, &job, now)?;
            if Database::open(&db)?
                .queue(&queue)?
                .cancel(id, reason.as_deref())?
            {
                Ok(format!("cancelled job {id}\n"))
            } else {
                Err(honker::Error::new(
                    honker::ErrorKind::NotFound,
                    format!("job {id} on queue {queue:?} has already finished"),
                ))
            }
        }
    }
}

fn dead(action: DeadAction) -> Result<String, honker::Error> {
    match action {
        DeadAction::List {
            db,
            queue,
            limit,
            json,
        } => {
            let list = dead_letters(&db, queue.as_deref(), limit)?;
            if json {
                return Ok(json_text(&Json::Array(
                    list.iter()
                        .map(|d| {
                            json!({"id": d.id, "queue": d.queue, "attempts": d.attempts,
                                   "last_error": d.last_error, "died_at": d.died_at})
                        })
                        .collect(),
                )));
            }
            let now = now_ms();
            let mut t = table(&["id", "queue", "attempts", "died", "last error"]);
            for d in &list {
                t.add_row(vec![
                    d.id.to_string(),
                    d.queue.clone(),
                    d.attempts.to_string(),
                    format!("{} ago", span(now - d.died_at)),
                    d.last_error.clone().unwrap_or_default(),
                ]);
            }
            Ok(format!("{t}\n"))
        }
        DeadAction::Requeue { db, queue, id, all } => {
            let q = Database::open(&db)?.queue(&queue)?;
            match (id, all) {
                (Some(id), _) => {
                    if q.requeue_dead(id)? {
                        Ok(format!("requeued job {id} on {queue}\n"))
                    } else {
                        Err(honker::Error::new(
                            honker::ErrorKind::NotFound,
                            format!("no dead letter {id} on queue {queue:?}"),
                        ))
                    }
                }
                (None, _) => Ok(format!(
                    "requeued {} dead letters on {queue}\n",
                    q.requeue_all_dead()?
                )),
            }
        }
        DeadAction::Purge {
            db,
            queue,
            older_than,
        } => {
            let n = Database::open(&db)?
                .queue(&queue)?
                .purge_dead(older_than.map(Duration::from_secs))?;
            Ok(format!("purged {n} dead letters from {queue}\n"))
        }
    }
}

fn queues(action: QueuesAction) -> Result<String, honker::Error> {
    match action {
        QueuesAction::Pause {
            db,
            queue,
            all: _,
            options,
        } => {
            let db = Database::open(&db)?;
            let options = options.to_core()?;
            Ok(match queue {
                Some(q) => {
                    db.queue(&q)?.pause(&options)?;
                    format!("paused {q}\n")
                }
                None => {
                    db.pause_all(&options)?;
                    "paused all queues\n".into()
                }
            })
        }
        QueuesAction::Resume { db, queue, all: _ } => {
            let db = Database::open(&db)?;
            Ok(match queue {
                Some(q) => {
                    let was = db.queue(&q)?.resume()?;
                    let all = db.paused_all()?.is_some();
                    match (was, all) {
                        (true, false) => format!("resumed {q}\n"),
                        (true, true) => format!(
                            "resumed {q}; it stays paused while all queues are \
                             (`honker queues resume DB --all`)\n"
                        ),
                        (false, _) => format!("{q} was not paused on its own\n"),
                    }
                }
                None => {
                    if db.resume_all()? {
                        "resumed all queues\n".into()
                    } else {
                        "all queues were not paused\n".into()
                    }
                }
            })
        }
        QueuesAction::Limit { db, queue, options } => {
            let caps = options.to_core()?;
            Database::open(&db)?
                .queue(&queue)?
                .limit_concurrency(&caps)?;
            Ok(
                match caps_text(&caps, &honker::Fairness::default()).as_str() {
                    "-" => format!("{queue}: no concurrency caps\n"),
                    c => format!("{queue}: at most {c} running\n"),
                },
            )
        }
        QueuesAction::Fair { db, queue, options } => {
            let fairness = options.to_core()?;
            Database::open(&db)?
                .queue(&queue)?
                .set_fairness(&fairness)?;
            Ok(
                match caps_text(&honker::Concurrency::default(), &fairness).as_str() {
                    "-" => format!("{queue}: priority order, no limit per key\n"),
                    c => format!("{queue}: {c}\n"),
                },
            )
        }
    }
}

fn schedules(action: ScheduleAction) -> Result<String, honker::Error> {
    match action {
        ScheduleAction::List { db, json } => {
            let now = now_ms();
            let s = status(&db, now)?;
            Ok(if json {
                json_text(&schedules_json(&s.schedules))
            } else {
                format!("{}\n", schedules_table(&s.schedules, now))
            })
        }
        ScheduleAction::Pause { db, name, note } => {
            Database::open(&db)?
                .scheduler()
                .pause(&name, note.as_deref())?;
            Ok(format!("paused {name}\n"))
        }
        ScheduleAction::Resume { db, name } => {
            Database::open(&db)?.scheduler().resume(&name)?;
            Ok(format!("resumed {name}\n"))
        }
        ScheduleAction::Trigger { db, name } => {
            let id = Database::open(&db)?.scheduler().trigger_now(&name)?;
            Ok(format!("fired {name}: job {id}\n"))
        }
    }
}

fn message_line(m: &inspect::Message, json: bool) -> String {
    let payload = match &m.payload_json {
        Some(t) => serde_json::from_str(t).unwrap_or(Json::Null),
        None => json!({ "bytes": m.payload_bytes }),
    };
    if json {
        format!(
            "{}\n",
            json!({"offset": m.offset, "key": m.key, "payload": payload, "created_at": m.created_at})
        )
    } else {
        match &m.key {
            Some(k) => format!("{} [{k}] {payload}\n", m.offset),
            None => format!("{} {payload}\n", m.offset),
        }
    }
}

fn print(text: &str) -> Result<(), honker::Error> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| honker::Error::new(honker::ErrorKind::Closed, format!("stdout: {e}")))
}

/// `honker tail`: prints as it goes.
fn tail(
    db: &Path,
    stream: &str,
    after: Option<i64>,
    lines: i64,
    follow: bool,
    json: bool,
) -> Result<(), honker::Error> {
    let follower = if follow {
        Some(inspect::Follower::new(db)?)
    } else {
        None
    };
    let mut after = match after {
        Some(a) => a,
        None => (inspect::last_offset(db, stream)? - lines.max(0)).max(0),
    };
    loop {
        let mark = follower.as_ref().map(inspect::Follower::mark);
        let page = inspect::events(db, stream, after, 1000)?;
        for m in &page {
            print(&message_line(m, json))?;
            after = m.offset;
        }
        match (&follower, mark) {
            (Some(f), Some(mark)) if page.is_empty() => {
                f.wait_past(mark, Duration::from_secs(5));
            }
            (Some(_), _) => {}
            (None, _) if page.len() == 1000 => {}
            (None, _) => return Ok(()),
        }
    }
}

/// `honker listen`: prints each notification sent after it starts.
fn listen(
    db: &Path,
    channel: &str,
    count: Option<usize>,
    timeout: Option<u64>,
    json: bool,
) -> Result<(), honker::Error> {
    let follower = inspect::Follower::new(db)?;
    let deadline = timeout.map(|t| std::time::Instant::now() + Duration::from_secs(t));
    let (_, mut after) = inspect::channel_messages(db, channel, None, 1)?;
    // On stderr, so that stdout holds only messages: from here on nothing
    // sent is missed.
    eprintln!("honker: listening on {channel:?}");
    let mut seen = 0;
    loop {
        let mark = follower.mark();
        let (page, last) = inspect::channel_messages(db, channel, Some(after), 1000)?;
        after = last;
        for m in &page {
            print(&message_line(m, json))?;
            seen += 1;
            if count.is_some_and(|c| seen >= c) {
                return Ok(());
            }
        }
        let wait = match deadline {
            Some(d) => {
                let now = std::time::Instant::now();
                if now >= d {
                    return Ok(());
                }
                (d - now).min(Duration::from_secs(5))
            }
            None => Duration::from_secs(5),
        };
        if page.is_empty() {
            follower.wait_past(mark, wait);
        }
    }
}

/// `honker top`: redraws the queues' rates and states when the file
/// changes (and at least every 5 s), until Ctrl-C or `count` redraws.
fn top(db: &Path, interval: Duration, count: Option<u64>) -> Result<(), honker::Error> {
    use honker::queue::metrics::{Event, QueueMetrics};
    use std::io::IsTerminal;
    let follower = inspect::Follower::new(db)?;
    let terminal = std::io::stdout().is_terminal();
    // On a terminal, q (or Ctrl-C) ends it, the terminal restored (issue
    // 53: q was ignored).
    let keys = if terminal { Keys::start() } else { None };
    let quit = || keys.as_ref().is_some_and(Keys::quit);
    // Readings of the last RATE_WINDOW and one before: a rate is taken over
    // the window, not since the last redraw, because each process writes its
    // counts about once a second (ADR 27) and a shorter span would jump
    // between nothing and twice the rate.
    const RATE_WINDOW: Duration = Duration::from_secs(5);
    let mut readings: std::collections::VecDeque<(std::time::Instant, Vec<QueueMetrics>)> =
        std::collections::VecDeque::new();
    let mut drawn = 0u64;
    loop {
        let mark = follower.mark();
        let now = std::time::Instant::now();
        let list = inspect::metrics(db, now_ms())?;
        let mut t = table(&[
            "queue",
            "enqueued/s",
            "claimed/s",
            "acked/s",
            "retried/s",
            "dead/s",
            "ready",
            "running",
            "dead",
            "mean claim latency",
        ]);
        while readings.len() > 1 && now.duration_since(readings[1].0) >= RATE_WINDOW {
            readings.pop_front();
        }
        let last = readings.front();
        for m in &list {
            let before = last.and_then(|(_, l)| l.iter().find(|b| b.queue == m.queue));
            let secs = last.map_or(0.0, |(at, _)| now.duration_since(*at).as_secs_f64());
            let rate = |e: Event| match before {
                Some(b) if secs > 0.0 => {
                    format!("{:.1}", m.total(e).saturating_sub(b.total(e)) as f64 / secs)
                }
                _ => "-".into(),
            };
            let lat = &m.claim_latency;
            t.add_row(vec![
                m.queue.clone(),
                rate(Event::Enqueued),
                rate(Event::Claimed),
                rate(Event::Acked),
                rate(Event::Retried),
                rate(Event::Dead),
                m.ready.to_string(),
                m.running.to_string(),
                m.dead_letters.to_string(),
                match lat.count() {
                    0 => "-".into(),
                    n => format!("{} ms", lat.sum_ms / n),
                },
            ]);
        }
        let screen = if terminal { "\x1b[H\x1b[2J" } else { "" };
        let ends = if keys.is_some() {
            "q ends"
        } else {
            "Ctrl-C ends"
        };
        print(&format!(
            "{screen}honker top {} (rates over the last 5 s; {ends})\n{t}\n",
            db.display()
        ))?;
        drawn += 1;
        if count.is_some_and(|c| drawn >= c) {
            return Ok(());
        }
        readings.push_back((now, list));
        // A change, 5 s, or a key: looked at every 100 ms.
        const SLICE: Duration = Duration::from_millis(100);
        let until = now + Duration::from_secs(5);
        while !quit() && std::time::Instant::now() < until && !follower.wait_past(mark, SLICE) {}
        while !quit() && now.elapsed() < interval {
            std::thread::sleep(interval.saturating_sub(now.elapsed()).min(SLICE));
        }
        if quit() {
            return Ok(());
        }
    }
}

/// Single keys from a terminal for `honker top`: stdin out of canonical
/// mode, without echo and with Ctrl-C read as a key (so the terminal is
/// restored on the way out, whichever key ends it), read on a thread.
#[cfg(unix)]
struct Keys {
    saved: libc::termios,
    quit: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

#[cfg(unix)]
impl Keys {
    fn start() -> Option<Keys> {
        use std::io::{IsTerminal, Read};
        if !std::io::stdin().is_terminal() {
            return None;
        }
        // SAFETY: termios is plain data; tcgetattr fills it for fd 0, a
        // terminal (checked above).
        let mut saved: libc::termios = unsafe { std::mem::zeroed() };
        if unsafe { libc::tcgetattr(0, &mut saved) } != 0 {
            return None;
        }
        let mut raw = saved;
        raw.c_lflag &= !(libc::ICANON | libc::ECHO | libc::ISIG);
        raw.c_cc[libc::VMIN] = 1;
        raw.c_cc[libc::VTIME] = 0;
        // SAFETY: as above; the saved settings are put back in Drop.
        if unsafe { libc::tcsetattr(0, libc::TCSANOW, &raw) } != 0 {
            return None;
        }
        let quit = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = quit.clone();
        std::thread::spawn(move || {
            let mut b = [0u8; 1];
            // q, Q, Ctrl-C, Ctrl-D; end of input too.
            while std::io::stdin().read(&mut b).is_ok_and(|n| n == 1) {
                if matches!(b[0], b'q' | b'Q' | 3 | 4) {
                    break;
                }
            }
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        Some(Keys { saved, quit })
    }

    fn quit(&self) -> bool {
        self.quit.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// No terminal modes here: Ctrl-C ends `top`.
#[cfg(not(unix))]
struct Keys;

#[cfg(not(unix))]
impl Keys {
    fn start() -> Option<Keys> {
        None
    }

    fn quit(&self) -> bool {
        false
    }
}

#[cfg(unix)]
impl Drop for Keys {
    fn drop(&mut self) {
        // SAFETY: restores what tcgetattr read for fd 0.
        unsafe { libc::tcsetattr(0, libc::TCSANOW, &self.saved) };
    }
}

/// `honker doctor`: its report and whether a check failed.
fn doctor(db: &Path, json: bool) -> Result<(String, bool), honker::Error> {
    let checks = honker::doctor::diagnose(db, now_ms())?;
    let failed = checks
        .iter()
        .any(|c| c.level == honker::doctor::Level::Fail);
    let text = if json {
        json_text(&Json::Array(
            checks
                .iter()
                .map(|c| json!({"check": c.name, "level": c.level.as_str(), "detail": c.detail}))
                .collect(),
        ))
    } else {
        let mut t = table(&["check", "", "detail"]);
        for c in &checks {
            t.add_row(vec![
                c.name.to_string(),
                c.level.as_str().to_string(),
                c.detail.clone(),
            ]);
        }
        format!("{t}\n")
    };
    Ok((text, failed))
}

/// Runs the command line `args` (the program's name first, as
/// `std::env::args_os` gives it) and returns the exit status. The `honker`
/// binary calls it, and so do the Python and Node packages' `honker`
/// commands, which run it inside their native module.
pub fn main_from<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version print to stdout and succeed; usage
            // errors print to stderr and exit 2.
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    NOW_MS.set(cli.now_ms);
    let streamed = match &cli.command {
        Command::Tail {
            db,
            stream,
            after,
            lines,
            follow,
            json,
        } => Some(tail(db, stream, *after, *lines, *follow, *json)),
        Command::Listen {
            db,
            channel,
            count,
            timeout,
            json,
        } => Some(listen(db, channel, *count, *timeout, *json)),
        Command::Top {
            db,
            interval_ms,
            count,
        } => Some(top(db, Duration::from_millis(*interval_ms), *count)),
        _ => None,
    };
    if let Some(r) = streamed {
        return match r {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("honker: {e}");
                1
            }
        };
    }
    if let Command::Doctor { db, json } = &cli.command {
        return match doctor(db, *json) {
            Ok((text, failed)) => {
                let _ = std::io::stdout().write_all(text.as_bytes());
                if failed {
                    3
                } else {
                    0
                }
            }
            Err(e) => {
                eprintln!("honker: {e}");
                1
            }
        };
    }
    if let Command::Worker { .. } = cli.command {
        eprintln!(
            "honker: workers run inside your application, in its language:\n  \
             python -m honker worker app.tasks:worker   (Python: MODULE:ATTR, a honker.Worker)\n  \
             new Worker(db, ...) in Node          (npm honker)\n  \
             Worker(db) in Swift                  (package Honker)\n\
             See README.md, \"Workers\"."
        );
        return 2;
    }
    match run(cli) {
        Ok(text) => {
            let _ = std::io::stdout().write_all(text.as_bytes());
            0
        }
        Err(e) => {
            eprintln!("honker: {e}");
            1
        }
    }
}
