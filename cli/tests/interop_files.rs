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
//! - the file is byte-identical afterwards.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value as Json;

mod common;
use common::{bytes, conforms, honker, stdout};

/// `3s ago`, `in 1d 2h 3m 4s`: each run of duration words becomes `<span>`;
/// runs of spaces and of table rules become one, so that column widths do
/// not matter.
fn normalise(text: &str) -> String {
    let is_span = |w: &str| {
        let digits = w.trim_end_matches(['d', 'h', 'm', 's']);
        !digits.is_empty()
            && digits.len() + 1 == w.len()
            && digits.bytes().all(|b| b.is_ascii_digit())
    };
    let mut out = String::new();
    for line in text.lines() {
        let mut words: Vec<&str> = Vec::new();
        for w in line.split(' ').filter(|w| !w.is_empty()) {
            if is_span(w) {
                if words.last() != Some(&"<span>") {
                    words.push("<span>");
                }
            } else {
                words.push(w);
            }
        }
        let mut l = String::new();
        let mut prev = None;
        for c in words.join(" ").chars() {
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
/// checked against their schemas.
fn read_everything(file: &Path) -> String {
    let p = file.to_str().unwrap();
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
        normalise("│ a  ┆ 3s ago ┆ in 1d 2h 3m 4s ┆ 15 ┆ 3x │\n├──────┤"),
        "│ a ┆ <span> ago ┆ in <span> ┆ 15 ┆ 3x │\n├─┤\n"
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
