//! The `honker` command on files the tests-interop scenarios wrote, every
//! surface taking every role (Python, Node, Rust, SQL and, in CI, Swift):
//! `tests-interop/run.py --keep DIR` leaves a copy of each play's file, and
//! this test (ignored by default; scripts/test.sh runs it after the
//! scenarios, with `HONKER_INTEROP_FILES=DIR`) runs every read command on
//! each one:
//!
//! - the human output, with its times and column widths normalised, is the
//!   scenario's snapshot in cli/tests/snapshots/SCENARIO.txt, whichever
//!   surfaces played it (`HONKER_UPDATE_SNAPSHOTS=1` writes the snapshots);
//! - every `--json` output matches its schema;
//! - the metrics' counts are the same whichever surfaces played (each
//!   counts into the file, ADR 27);
//! - the file is byte-identical afterwards.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value as Json;

mod common;
use common::{bytes, conforms, honker, stdout};

/// `3s ago`, `in 1d 2h 3m 4s`: each run of duration words becomes `<span>`,
/// and one within 5 s of now, whichever side (`in 0s`, `1s ago`, `due 2s
/// ago`), becomes `<now>`: a play's last steps take longer on one surface
/// than another. Runs of spaces and of table rules become one, so that
/// column widths do not matter.
fn normalise(text: &str) -> String {
    let seconds = |w: &str| -> Option<u64> {
        let unit = w.chars().last()?;
        let n: u64 = w[..w.len() - unit.len_utf8()].parse().ok()?;
        Some(match unit {
            'd' => n * 86_400,
            'h' => n * 3600,
            'm' => n * 60,
            's' => n,
            _ => return None,
        })
    };
    let mut out = String::new();
    for line in text.lines() {
        let mut words: Vec<String> = Vec::new();
        let mut span: Option<u64> = None;
        let close = |span: &mut Option<u64>, words: &mut Vec<String>| {
            if let Some(total) = span.take() {
                words.push(if total < 5 { "<now>" } else { "<span>" }.into());
            }
        };
        for w in line.split(' ').filter(|w| !w.is_empty()) {
            match seconds(w) {
                Some(n) => span = Some(span.unwrap_or(0) + n),
                None => {
                    close(&mut span, &mut words);
                    words.push(w.into());
                }
            }
        }
        close(&mut span, &mut words);
        let joined = words
            .join(" ")
            .replace("due <now> ago", "<now>")
            .replace("in <now>", "<now>")
            .replace("<now> ago", "<now>");
        let mut l = String::new();
        let mut prev = None;
        for c in joined.chars() {
            if matches!(c, '─' | '═') && prev == Some(c) {
                continue;
            }
            l.push(c);
            prev = Some(c);
        }
        out += l.trim_end();
        out.push('\n');
    }
    out
}

/// Every read command's human output on `file`, normalised, the JSON ones
/// checked against their schemas. Times are shown as of the moment
/// run.py copied the file (`FILE.now`), so that what a play left (a
/// 60-second lock, a job backing off for a minute) looks the same however
/// long ago it ran.
fn read_everything(file: &Path) -> String {
    let p = file.to_str().unwrap();
    let at = std::fs::read_to_string(format!("{p}.now")).expect("FILE.now beside each file");
    let at = at.trim();
    let honker = |args: &[&str]| honker(&[args, &["--now-ms", at]].concat());
    let status: Json = serde_json::from_str(&stdout(&honker(&["status", p, "--json"]))).unwrap();
    conforms("status", &status);
    let mut out = String::new();
    let mut section = |title: String, args: &[&str]| {
        out += &format!("$ honker {title}\n{}\n", normalise(&stdout(&honker(args))));
    };
    section("status".into(), &["status", p]);
    section("jobs list".into(), &["jobs", "list", p]);
    section("dead list".into(), &["dead", "list", p]);
    section("schedules list".into(), &["schedules", "list", p]);
    section("locks".into(), &["locks", p]);
    for s in status["streams"].as_array().unwrap() {
        let name = s["name"].as_str().unwrap();
        section(format!("tail {name}"), &["tail", p, name, "--lines", "100"]);
        let tail = stdout(&honker(&["tail", p, name, "--lines", "100", "--json"]));
        for line in tail.lines() {
            conforms("tail", &serde_json::from_str(line).unwrap());
        }
    }
    // The counters (not the latencies, which vary with each surface's
    // speed): every surface counts the same events into the file.
    let metrics = stdout(&honker(&["metrics", p]));
    let counted: String = metrics
        .lines()
        .filter(|l| {
            l.starts_with("honker_jobs_total")
                || l.starts_with("honker_queue_jobs{")
                || l.starts_with("honker_claim_latency_seconds_count")
        })
        .map(|l| format!("{l}\n"))
        .collect();
    out += &format!("$ honker metrics (counts)\n{counted}\n");
    let jobs: Json =
        serde_json::from_str(&stdout(&honker(&["jobs", "list", p, "--json"]))).unwrap();
    conforms("jobs-list", &jobs);
    for j in jobs.as_array().unwrap() {
        let id = j["id"].to_string();
        let one: Json =
            serde_json::from_str(&stdout(&honker(&["jobs", "show", p, &id, "--json"]))).unwrap();
        conforms("jobs-show", &one);
    }
    for (schema, args) in [
        ("dead-list", ["dead", "list", p, "--json"].as_slice()),
        ("schedules-list", &["schedules", "list", p, "--json"]),
        ("locks", &["locks", p, "--json"]),
        ("metrics", &["metrics", p, "--json"]),
        ("doctor", &["doctor", p, "--json"]),
    ] {
        conforms(
            schema,
            &serde_json::from_str(&stdout(&honker(args))).unwrap(),
        );
    }
    out
}

#[test]
fn normalising_hides_times_and_widths_only() {
    assert_eq!(
        normalise("│ a  ┆ 30s ago ┆ in 1d 2h 3m 4s ┆ 15 ┆ 3x ┆ 0 ┆ s │\n├──────┤"),
        "│ a ┆ <span> ago ┆ in <span> ┆ 15 ┆ 3x ┆ 0 ┆ s │\n├─┤\n"
    );
    assert_eq!(
        normalise("in 0s ┆ 1s ago ┆ due 4s ago ┆ due 5s ago ┆ in 1m 1s"),
        "<now> ┆ <now> ┆ <now> ┆ due <span> ago ┆ in <span>\n"
    );
}

#[test]
#[ignore = "needs the files tests-interop/run.py --keep writes (scripts/test.sh runs it)"]
fn every_read_command_on_every_interop_file() {
    let dir = PathBuf::from(
        std::env::var_os("HONKER_INTEROP_FILES")
            .expect("HONKER_INTEROP_FILES: the directory tests-interop/run.py --keep wrote"),
    );
    let update = std::env::var_os("HONKER_UPDATE_SNAPSHOTS").is_some();
    let snapshots = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots");
    let mut files: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    let mut surfaces = BTreeSet::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "db") {
            continue; // the -wal and -shm a reader leaves beside a file
        }
        let name = path.file_stem().unwrap().to_str().unwrap().to_string();
        let (scenario, roles) = name.split_once("--").expect("SCENARIO--ROLES.db");
        surfaces.extend(
            roles
                .split(',')
                .map(|r| r.split('=').nth(1).unwrap().to_string()),
        );
        files.entry(scenario.to_string()).or_default().push(path);
    }
    let mut want: BTreeSet<String> = ["python", "node", "rust", "sql"].map(String::from).into();
    if std::env::var_os("HONKER_SWIFT_ROOT").is_some() {
        want.insert("swift".into());
    }
    assert!(
        surfaces.is_superset(&want),
        "files by {surfaces:?}, want {want:?}"
    );
    let mut failures = Vec::new();
    for (scenario, mut paths) in files {
        paths.sort();
        let snapshot = snapshots.join(format!("{scenario}.txt"));
        for path in &paths {
            let before = bytes(path);
            let got = read_everything(path);
            assert_eq!(
                bytes(path),
                before,
                "a read command changed {}",
                path.display()
            );
            if update && !snapshot.exists() {
                std::fs::write(&snapshot, &got).unwrap();
            }
            let expected = std::fs::read_to_string(&snapshot).unwrap_or_else(|_| {
                panic!(
                    "no snapshot {} (HONKER_UPDATE_SNAPSHOTS=1 writes it)",
                    snapshot.display()
                )
            });
            if got != expected {
                failures.push(format!(
                    "{} differs from {}:\n{got}",
                    path.display(),
                    snapshot.display()
                ));
            }
        }
    }
    // A snapshot no scenario file matches is stale.
    for entry in std::fs::read_dir(&snapshots).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        let scenario = name.trim_end_matches(".txt");
        let played = std::fs::read_dir(&dir).unwrap().any(|e| {
            e.unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with(&format!("{scenario}--"))
        });
        if !played {
            failures.push(format!("{name}: no interop file of that scenario"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
