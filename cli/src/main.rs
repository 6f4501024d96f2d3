//! `honker`: the operator's command (issue 27; this is its first part:
//! `status`, `import`, `completions`). Every behaviour lives in core; this
//! file parses arguments and prints.
//!
//! Exit codes: 0 success; 1 the command failed (stderr starts with
//! `honker: CODE:`, the error's stable code); 2 bad usage.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use clap::{CommandFactory, Parser, Subcommand};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use serde_json::{json, Value as Json};

use honker::import::{import_honker, ImportOptions};
use honker::inspect::{status, FileStatus};

#[derive(Parser)]
#[command(name = "honker", version, about = "Look after a honker database file")]
struct Cli {
    #[command(subcommand)]
    command: Command,
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
    /// Print a shell completion script.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Workers run in your application's language (see below).
    #[command(disable_help_flag = true)]
    Worker {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
        rest: Vec<String>,
    },
}

fn now_ms() -> i64 {
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
        })).collect::<Vec<_>>(),
        "streams": s.streams.iter().map(|st| json!({
            "name": st.name, "last_offset": st.last_offset,
            "consumers": st.consumers.iter().map(|c| json!({
                "name": c.name, "next_offset": c.next_offset, "lag": c.lag})).collect::<Vec<_>>(),
            "groups": st.groups.iter().map(|g| json!({
                "name": g.name, "next_offset": g.next_offset, "lag": g.lag,
                "pending": g.pending, "dead": g.dead})).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "schedules": s.schedules.iter().map(|c| json!({
            "name": c.name, "queue": c.queue, "spec": c.spec, "time_zone": c.time_zone,
            "paused": c.paused, "next_fire_at": c.next_fire_at, "missed": c.missed,
        })).collect::<Vec<_>>(),
        "locks": s.locks.iter().map(|l| json!({
            "name": l.name, "owner": l.owner, "token": l.token, "expires_at": l.expires_at,
        })).collect::<Vec<_>>(),
    })
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
    ]);
    for x in &s.queues {
        q.add_row(vec![
            x.name.clone(),
            x.ready.to_string(),
            x.scheduled.to_string(),
            x.running.to_string(),
            x.dead.to_string(),
            x.oldest_ready_at.map_or("-".into(), |t| span(now - t)),
        ]);
    }
    out += &format!("\nqueues\n{q}\n");
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
    out += &format!("\nstreams\n{st}\n");
    let mut sc = table(&["schedule", "queue", "rule", "zone", "next fire", "missed"]);
    for x in &s.schedules {
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
    out += &format!("\nschedules\n{sc}\n");
    let mut lk = table(&["lock", "holder", "token", "expires"]);
    for x in &s.locks {
        lk.add_row(vec![
            x.name.clone(),
            x.owner.clone(),
            x.token.to_string(),
            format!("in {}", span(x.expires_at - now)),
        ]);
    }
    out += &format!("\nlocks\n{lk}\n");
    out
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
        Command::Completions { shell } => {
            let mut buf = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "honker", &mut buf);
            Ok(String::from_utf8_lossy(&buf).into_owned())
        }
        Command::Worker { .. } => unreachable!("handled in main"),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::Worker { .. } = cli.command {
        eprintln!(
            "honker: workers run inside your application, in its language:\n  \
             python -m honker worker app.tasks   (Python: honker.Worker)\n  \
             new Worker(db, ...) in Node          (npm honker)\n  \
             Worker(db) in Swift                  (package Honker)\n\
             See README.md, \"Workers\"."
        );
        return ExitCode::from(2);
    }
    match run(cli) {
        Ok(text) => {
            let _ = std::io::stdout().write_all(text.as_bytes());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("honker: {e}");
            ExitCode::from(1)
        }
    }
}
