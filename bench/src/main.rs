//! honker's core benchmark: each workload through the `honker` API next to
//! the same operation done with raw rusqlite prepared statements on the same
//! schema (the physical limit), in one run, printed with the ratio.
//!
//! ```text
//! cargo run --release -p honker-bench            # everything
//! cargo run --release -p honker-bench -- W3 W6   # some workloads
//! cargo run --release -p honker-bench -- --quick # smaller counts
//! cargo run --release -p honker-bench --no-default-features -- W2 W4
//!                                     # on the system SQLite (ADR 18)
//! ```
//!
//! W1 enqueue 1/tx · W2 enqueue 1,000/tx · W3 claim 1 + ack 1 · W4 claim 32 +
//! ack 32 · W5 4 processes draining 20,000 (NORMAL and FULL) · W6 wake latency
//! from a producer process's commit to a waiting consumer process's claim,
//! and the idle consumer's CPU · W7 claim latency with 0 vs 100k
//! running/scheduled/dead rows · W8 idle wake-ups of the watcher thread, on
//! the inotify path and the timed one (`HONKER_WATCHER=portable`) · W9 a
//! consumer group's claim 1 + ack 1 and claim 32 + ack 32 next to the
//! queue's (W3, W4) in the same run, and its claim+ack with 100,000 events
//! of one key waiting behind an in-flight one next to the same without ·
//! W10 W3 and W4 on a queue with a rate limit that never binds, next to the
//! same without one (the cost of the limit's check in every claim) · W11
//! W3 and W4 on a queue with concurrency caps that never bind (ADR 35): a
//! queue cap on unkeyed jobs, and both caps on jobs with 16 keys, each next
//! to the same without caps · W12 W3 and W4 on jobs of 16 keys in
//! round-robin order, and under a rate limit per key that never binds (ADR
//! 36), each next to the same jobs in priority order · W13 unique modes
//! (ADR 37): W1 with each mode's key (distinct keys: every enqueue adds its
//! job), and W3 on jobs holding `period` keys, each next to the same
//! without a key.
//!
//! Timing goals are reported here, never asserted in tests.

mod raw;
mod w6;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use honker::{Database, Durability, EnqueueOptions, Lease, Options};
use serde_json::json;

struct Scale {
    w1: usize,
    w2_batches: usize,
    w3: usize,
    w4_batches: usize,
    w5: usize,
    w6: usize,
    w7: usize,
    w9: usize,
}

const FULL: Scale = Scale {
    w1: 5_000,
    w2_batches: 50,
    w3: 5_000,
    w4_batches: 300,
    w5: 20_000,
    w6: 300,
    w7: 3_000,
    w9: 5_000,
};

const QUICK: Scale = Scale {
    w1: 500,
    w2_batches: 5,
    w3: 500,
    w4_batches: 30,
    w5: 2_000,
    w6: 50,
    w7: 300,
    w9: 500,
};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("child") {
        return child(&args[1..]);
    }
    let scale = if args.iter().any(|a| a == "--quick") {
        &QUICK
    } else {
        &FULL
    };
    let only: Vec<&str> = args
        .iter()
        .filter(|a| a.starts_with('W'))
        .map(String::as_str)
        .collect();
    let run = |w: &str| only.is_empty() || only.contains(&w);
    let dir = tempfile::tempdir().expect("temp dir");
    println!(
        "honker core benchmark ({} mode, SQLite {}{}); temp dir {}",
        if std::ptr::eq(scale, &QUICK) {
            "quick"
        } else {
            "full"
        },
        rusqlite::version(),
        if cfg!(feature = "bundled") {
            ", bundled"
        } else {
            ", the system's"
        },
        dir.path().display()
    );
    println!(
        "{:<44} {:>14} {:>14} {:>7}",
        "workload", "honker", "raw rusqlite", "ratio"
    );
    if run("W1") {
        w1(dir.path(), scale.w1);
    }
    if run("W2") {
        w2(dir.path(), scale.w2_batches);
    }
    if run("W3") {
        w3(dir.path(), scale.w3);
    }
    if run("W4") {
        w4(dir.path(), scale.w4_batches);
    }
    if run("W5") {
        w5(dir.path(), scale.w5, Durability::Normal);
        w5(dir.path(), scale.w5, Durability::Full);
    }
    if run("W6") {
        w6::run(dir.path(), scale.w6);
    }
    if run("W7") {
        w7(dir.path(), scale.w7);
    }
    if run("W8") {
        w6::idle_wakeups(dir.path());
    }
    if run("W9") {
        w9(dir.path(), scale.w9);
    }
    if run("W10") {
        w10(dir.path(), scale.w3, scale.w4_batches);
    }
    if run("W11") {
        w11(dir.path(), scale.w3, scale.w4_batches);
    }
    if run("W12") {
        w12(dir.path(), scale.w3, scale.w4_batches);
    }
    if run("W13") {
        w13(dir.path(), scale.w1, scale.w3);
    }
}

/// A fresh database file named `name` in `dir`, opened through honker (so
/// the schema exists for the raw side too).
fn fresh(dir: &Path, name: &str, durability: Durability) -> (Database, PathBuf) {
    let path = dir.join(format!("{name}.db"));
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    let db = Database::open_with(
        &path,
        Options {
            durability,
            ..Options::default()
        },
    )
    .expect("open");
    (db, path)
}

fn payload(i: usize) -> serde_json::Value {
    json!({"to": format!("user{i}@example.com"), "template": "order-confirmed"})
}

/// Prints one line: throughput of both and honker's ratio to raw.
fn report_rate(name: &str, ops: usize, honker: Duration, raw: Duration, target: f64) {
    let h = ops as f64 / honker.as_secs_f64();
    let r = ops as f64 / raw.as_secs_f64();
    let ratio = h / r;
    println!(
        "{name:<44} {:>12.0}/s {:>12.0}/s {ratio:>6.2}x  (target >= {target}x{})",
        h,
        r,
        if ratio >= target { "" } else { ", MISSED" }
    );
    // For other benchmarks that compare against these figures in the same
    // run (bench/python): one machine-readable line per workload.
    if std::env::var_os("HONKER_BENCH_JSON").is_some() {
        println!(
            "@json {}",
            json!({"workload": name.split(' ').next(), "name": name, "honker": h, "raw": r})
        );
    }
}

fn time<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let t = Instant::now();
    let v = f();
    (v, t.elapsed())
}

fn w1(dir: &Path, n: usize) {
    let (db, _) = fresh(dir, "w1-honker", Durability::Normal);
    let q = db.queue("emails").unwrap();
    let o = EnqueueOptions::default();
    let ((), th) = time(|| {
        for i in 0..n {
            q.enqueue(payload(i), &o).unwrap();
        }
    });
    let (_db, path) = fresh(dir, "w1-raw", Durability::Normal);
    let raw = raw::Raw::open(&path, Durability::Normal);
    let ((), tr) = time(|| {
        for i in 0..n {
            raw.enqueue_tx(&[payload(i).to_string()]);
        }
    });
    report_rate("W1 enqueue, 1 job per transaction", n, th, tr, 0.8);
}

fn w2(dir: &Path, batches: usize) {
    let n = batches * 1000;
    let (db, _) = fresh(dir, "w2-honker", Durability::Normal);
    let q = db.queue("emails").unwrap();
    let o = EnqueueOptions::default();
    let ((), th) = time(|| {
        for b in 0..batches {
            q.enqueue_many((0..1000).map(|i| payload(b * 1000 + i)), &o)
                .unwrap();
        }
    });
    let (_db, path) = fresh(dir, "w2-raw", Durability::Normal);
    let raw = raw::Raw::open(&path, Durability::Normal);
    let ((), tr) = time(|| {
        for b in 0..batches {
            let batch: Vec<String> = (0..1000)
                .map(|i| payload(b * 1000 + i).to_string())
                .collect();
            raw.enqueue_tx(&batch);
        }
    });
    report_rate("W2 enqueue, 1,000 jobs per transaction", n, th, tr, 0.8);
}

fn prefill(db: &Database, n: usize) {
    let q = db.queue("emails").unwrap();
    for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
        q.enqueue_many(
            chunk.iter().map(|&i| payload(i)),
            &EnqueueOptions::default(),
        )
        .unwrap();
    }
}

fn claim_ack_honker(db: &Database, batch: usize, rounds: usize) -> Duration {
    let q = db.queue("emails").unwrap();
    let ((), t) = time(|| {
        for _ in 0..rounds {
            let jobs = q.claim("bench", batch).unwrap();
            assert_eq!(jobs.len(), batch);
            if batch == 1 {
                jobs[0].ack().unwrap();
            } else {
                let leases: Vec<Lease> = jobs.iter().map(|j| j.lease.clone()).collect();
                assert_eq!(q.ack_many(&leases).unwrap(), batch);
            }
        }
    });
    t
}

fn claim_ack_raw(path: &Path, batch: usize, rounds: usize) -> Duration {
    let raw = raw::Raw::open(path, Durability::Normal);
    let ((), t) = time(|| {
        for _ in 0..rounds {
            let jobs = raw.claim("emails", batch);
            assert_eq!(jobs.len(), batch);
            raw.ack(&jobs);
        }
    });
    t
}

fn w3(dir: &Path, n: usize) {
    let (db, _) = fresh(dir, "w3-honker", Durability::Normal);
    prefill(&db, n);
    let th = claim_ack_honker(&db, 1, n);
    let (db2, path) = fresh(dir, "w3-raw", Durability::Normal);
    prefill(&db2, n);
    let tr = claim_ack_raw(&path, 1, n);
    report_rate("W3 claim 1 + ack 1 (jobs/s)", n, th, tr, 0.8);
}

fn w4(dir: &Path, batches: usize) {
    let n = batches * 32;
    let (db, _) = fresh(dir, "w4-honker", Durability::Normal);
    prefill(&db, n);
    let th = claim_ack_honker(&db, 32, batches);
    let (db2, path) = fresh(dir, "w4-raw", Durability::Normal);
    prefill(&db2, n);
    let tr = claim_ack_raw(&path, 32, batches);
    report_rate("W4 claim 32 + ack 32 (jobs/s)", n, th, tr, 0.8);
}

/// Spawns 4 child processes draining `n` jobs; returns the wall time.
fn drain_with_children(path: &Path, mode: &str, durability: Durability) -> Duration {
    let d = match durability {
        Durability::Normal => "normal",
        Durability::Full => "full",
    };
    let start = Instant::now();
    let children: Vec<_> = (0..4)
        .map(|_| {
            Command::new(std::env::current_exe().unwrap())
                .args(["child", mode, &path.to_string_lossy(), d])
                .stdout(Stdio::piped())
                .spawn()
                .expect("spawn")
        })
        .collect();
    let mut total = 0usize;
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success(), "a {mode} drainer failed");
        total += String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse::<usize>()
            .unwrap();
    }
    let t = start.elapsed();
    assert!(total >= 1, "nothing drained");
    t
}

fn w5(dir: &Path, n: usize, durability: Durability) {
    let label = match durability {
        Durability::Normal => "W5 4 processes drain 20k, NORMAL (jobs/s)",
        Durability::Full => "W5 4 processes drain 20k, FULL (jobs/s)",
    };
    // Short runs with process start-up in them are noisy: alternate the two
    // sides three times and keep each side's median.
    let mut th = Vec::new();
    let mut tr = Vec::new();
    for _ in 0..3 {
        for (mode, times) in [("drain-honker", &mut th), ("drain-raw", &mut tr)] {
            let (db, path) = fresh(dir, mode, durability);
            prefill(&db, n);
            drop(db);
            times.push(drain_with_children(&path, mode, durability));
        }
    }
    th.sort();
    tr.sort();
    report_rate(label, n, th[1], tr[1], 0.8);
}

fn child(args: &[String]) {
    let mode = args[0].as_str();
    let path = Path::new(&args[1]);
    let durability = match args.get(2).map(String::as_str) {
        Some("full") => Durability::Full,
        _ => Durability::Normal,
    };
    match mode {
        "drain-honker" => {
            let db = Database::open_with(
                path,
                Options {
                    durability,
                    ..Options::default()
                },
            )
            .unwrap();
            let q = db.queue("emails").unwrap();
            let mut done = 0;
            loop {
                let jobs = q.claim("drainer", 16).unwrap();
                if jobs.is_empty() {
                    break;
                }
                let leases: Vec<Lease> = jobs.iter().map(|j| j.lease.clone()).collect();
                done += q.ack_many(&leases).unwrap();
            }
            println!("{done}");
        }
        "drain-raw" => {
            let raw = raw::Raw::open(path, durability);
            let mut done = 0;
            loop {
                let jobs = raw.claim("emails", 16);
                if jobs.is_empty() {
                    break;
                }
                raw.ack(&jobs);
                done += jobs.len();
            }
            println!("{done}");
        }
        // The instruction-count check (bench/instr): setup, not measured...
        "instr-fill" => {
            let db = Database::open(path).unwrap();
            let n: usize = args[2].parse().unwrap();
            // A round-robin queue gives its keyed jobs turns as they come.
            if let Some(f) = instr_fairness() {
                db.queue("emails").unwrap().set_fairness(&f).unwrap();
            }
            // Jobs over 16 keys, for the per-key cap (and its baseline).
            match std::env::var_os("HONKER_INSTR_KEYED") {
                Some(_) => keyed_fill(&db, n, 16),
                None => prefill(&db, n),
            }
        }
        // ...and one workload of `n` jobs, honker's side only, measured.
        "instr" => instr(path, &args[2], args[3].parse().unwrap()),
        "w6-consumer" => w6::consumer(path, &args[2..]),
        "w8-idle" => w6::idle_consumer(path),
        other => panic!("unknown child mode {other}"),
    }
}

/// One workload through honker for `n` jobs on the file at `path`
/// (`instr-fill` filled it for W3/W4), for bench/instr/check.py: run under
/// callgrind at n and 2n, the difference over n is the instructions per job.
/// `HONKER_INSTR_EXTRA=1` adds one statement per job (a point read of the
/// jobs table, the cheapest statement honker's own verbs run): the check
/// must fail then (its self-test). `HONKER_INSTR_CAPS=queue` (a queue cap)
/// or `=both` (both caps) measures caps that never bind (ADR 35), next to a
/// run without; `HONKER_INSTR_KEYED=1` fills jobs of 16 concurrency keys.
/// `HONKER_INSTR_FAIR=rr` (round-robin order), `=limit` (a rate limit per
/// key that never binds) or `=both` measures the fairness of ADR 36.
fn instr(path: &Path, workload: &str, n: usize) {
    let db = Database::open(path).unwrap();
    let q = db.queue("emails").unwrap();
    if let Some(caps) = instr_caps() {
        q.limit_concurrency(&caps).unwrap();
    }
    if let Some(f) = instr_fairness() {
        q.set_fairness(&f).unwrap();
    }
    let o = EnqueueOptions::default();
    if std::env::var_os("HONKER_INSTR_EXTRA").is_some() {
        for i in 0..n {
            db.query("SELECT state FROM _honker_jobs WHERE id = ?1", [i as i64])
                .unwrap();
        }
    }
    match workload {
        "W1" => (0..n).for_each(|i| {
            q.enqueue(payload(i), &o).unwrap();
        }),
        "W2" => (0..n / 1000).for_each(|b| {
            q.enqueue_many((0..1000).map(|i| payload(b * 1000 + i)), &o)
                .unwrap();
        }),
        "W3" => {
            claim_ack_honker(&db, 1, n);
        }
        "W4" => {
            claim_ack_honker(&db, 32, n / 32);
        }
        other => panic!("unknown workload {other}"),
    }
}

/// The caps `HONKER_INSTR_CAPS` names (see [`instr`]), never binding.
fn instr_caps() -> Option<honker::Concurrency> {
    let both = match std::env::var("HONKER_INSTR_CAPS").ok()?.as_str() {
        "queue" => false,
        "both" => true,
        other => panic!("HONKER_INSTR_CAPS={other}: queue or both"),
    };
    Some(honker::Concurrency {
        max_running: Some(1_000_000),
        max_running_per_key: both.then_some(1_000_000),
    })
}

/// The fairness `HONKER_INSTR_FAIR` names (see [`instr`]); a limit per key
/// that never binds (10⁹ starts a second, as many at once).
fn instr_fairness() -> Option<honker::Fairness> {
    let (rr, limit) = match std::env::var("HONKER_INSTR_FAIR").ok()?.as_str() {
        "rr" => (true, false),
        "limit" => (false, true),
        "both" => (true, true),
        other => panic!("HONKER_INSTR_FAIR={other}: rr, limit or both"),
    };
    Some(honker::Fairness {
        order: rr.then(|| "round_robin".to_owned()),
        key_limit: limit.then_some(1_000_000_000),
        key_per: limit.then_some(Duration::from_secs(1)),
        key_burst: limit.then_some(1_000_000_000),
    })
}

/// `n` jobs in chunks of 1,000, each chunk on one of `keys` concurrency keys.
fn keyed_fill(db: &Database, n: usize, keys: usize) {
    let q = db.queue("emails").unwrap();
    for start in (0..n).step_by(1000) {
        let options = EnqueueOptions {
            concurrency_key: Some(format!("tenant-{}", start / 1000 % keys)),
            ..EnqueueOptions::default()
        };
        q.enqueue_many((start..(start + 1000).min(n)).map(payload), &options)
            .unwrap();
    }
}

fn w7(dir: &Path, n: usize) {
    let (empty, _) = fresh(dir, "w7-empty", Durability::Normal);
    prefill(&empty, n);
    let t_empty = claim_ack_honker(&empty, 1, n);
    let (full, path) = fresh(dir, "w7-loaded", Durability::Normal);
    drop(full);
    raw::fill_100k_each(&path);
    let full = Database::open(&path).unwrap();
    prefill(&full, n);
    let t_full = claim_ack_honker(&full, 1, n);
    let per = |t: Duration| t.as_secs_f64() * 1e6 / n as f64;
    let ratio = per(t_full) / per(t_empty);
    println!(
        "{:<44} {:>10.1} us {:>11.1} us {ratio:>6.2}x  (loaded/empty; target <= 1.3x{})",
        "W7 claim+ack latency, 100k rows vs empty",
        per(t_full),
        per(t_empty),
        if ratio <= 1.3 { "" } else { ", MISSED" }
    );
}

/// A stream of `n` keyless events after `hot` events of key "hot", with a
/// group at its beginning.
fn group_stream(
    dir: &Path,
    name: &str,
    hot: usize,
    n: usize,
) -> (Database, honker::stream::group::Group) {
    use honker::stream::{group::GroupOptions, Start};
    let (db, _) = fresh(dir, name, Durability::Normal);
    let s = db.stream("orders").unwrap();
    for chunk in (0..hot).collect::<Vec<_>>().chunks(1000) {
        s.publish_many(chunk.iter().map(|&i| payload(i)), Some("hot"))
            .unwrap();
    }
    for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
        s.publish_many(chunk.iter().map(|&i| payload(i)), None)
            .unwrap();
    }
    let g = s.group("billing").unwrap();
    g.create(Start::Beginning, &GroupOptions::default())
        .unwrap();
    (db, g)
}

fn group_claim_ack(g: &honker::stream::group::Group, batch: usize, rounds: usize) -> Duration {
    let ((), t) = time(|| {
        for _ in 0..rounds {
            let got = g.claim("bench", batch, None).unwrap().events;
            assert_eq!(got.len(), batch);
            if batch == 1 {
                g.ack(&got[0]).unwrap();
            } else {
                g.ack_many(&got).unwrap();
            }
        }
    });
    t
}

/// Prints a group line against its queue (or no-key) baseline.
fn report_against(
    name: &str,
    ops: usize,
    t: Duration,
    base: Duration,
    base_name: &str,
    target: f64,
) {
    let h = ops as f64 / t.as_secs_f64();
    let b = ops as f64 / base.as_secs_f64();
    let ratio = h / b;
    // A target of 0 is none: the ratio is reported, not judged.
    let judged = match (target > 0.0, ratio >= target) {
        (false, _) => String::new(),
        (true, true) => format!("; target >= {target}x"),
        (true, false) => format!("; target >= {target}x, MISSED"),
    };
    println!("{name:<44} {h:>12.0}/s {b:>12.0}/s {ratio:>6.2}x  ({base_name}{judged})");
}

/// W3 and W4 with a queue rate limit that never binds (10⁹ a second, a
/// burst of 10⁶) next to the same without a limit, alternating four times
/// so that neither side always runs on a colder machine.
fn w10(dir: &Path, n: usize, batches: usize) {
    let limit =
        honker::rate::RateLimit::new(1_000_000_000, Duration::from_secs(1)).burst(1_000_000);
    let run = |name: &str, batch: usize, rounds: usize, limited: bool| {
        let (db, _) = fresh(dir, name, Durability::Normal);
        prefill(&db, batch * rounds);
        if limited {
            db.queue("emails")
                .unwrap()
                .set_rate_limit(Some(limit))
                .unwrap();
        }
        claim_ack_honker(&db, batch, rounds)
    };
    for (label, batch, rounds) in [
        ("W10 W3 with a queue limit", 1, n),
        ("W10 W4 with a queue limit", 32, batches),
    ] {
        let mut with = Duration::ZERO;
        let mut without = Duration::ZERO;
        for i in 0..4 {
            without += run(&format!("w10-{batch}-plain-{i}"), batch, rounds, false);
            with += run(&format!("w10-{batch}-limited-{i}"), batch, rounds, true);
        }
        report_against(
            &format!("{label} (jobs/s)"),
            4 * batch * rounds,
            with,
            without,
            "vs no limit; target: cost <= 5%",
            0.95,
        );
    }
}

/// W3 and W4 with concurrency caps that never bind (ADR 35), next to the
/// same jobs without caps, alternating four times: `max_running` of 10⁶ on
/// unkeyed jobs, then both caps (10⁶ each) on jobs spread over 16 keys.
fn w11(dir: &Path, n: usize, batches: usize) {
    let run = |name: &str, batch: usize, rounds: usize, keyed: bool, capped: bool| {
        let (db, _) = fresh(dir, name, Durability::Normal);
        let q = db.queue("emails").unwrap();
        match keyed {
            true => keyed_fill(&db, batch * rounds, 16),
            false => prefill(&db, batch * rounds),
        }
        if capped {
            let caps = honker::Concurrency {
                max_running: Some(1_000_000),
                max_running_per_key: keyed.then_some(1_000_000),
            };
            q.limit_concurrency(&caps).unwrap();
        }
        claim_ack_honker(&db, batch, rounds)
    };
    for (label, keyed) in [("a queue cap", false), ("both caps, 16 keys", true)] {
        for (w, batch, rounds) in [("W3", 1, n), ("W4", 32, batches)] {
            let mut with = Duration::ZERO;
            let mut without = Duration::ZERO;
            for i in 0..4 {
                let tag = format!("w11-{batch}-{keyed}-{i}");
                without += run(&format!("{tag}-plain"), batch, rounds, keyed, false);
                with += run(&format!("{tag}-capped"), batch, rounds, keyed, true);
            }
            report_against(
                &format!("W11 {w} with {label} (jobs/s)"),
                4 * batch * rounds,
                with,
                without,
                "vs no caps; target: cost <= 5%",
                0.95,
            );
        }
    }
}

fn w12(dir: &Path, n: usize, batches: usize) {
    let run = |name: &str, batch: usize, rounds: usize, fairness: Option<&honker::Fairness>| {
        let (db, _) = fresh(dir, name, Durability::Normal);
        if let Some(f) = fairness {
            db.queue("emails").unwrap().set_fairness(f).unwrap();
        }
        keyed_fill(&db, batch * rounds, 16);
        claim_ack_honker(&db, batch, rounds)
    };
    let round_robin = honker::Fairness {
        order: Some("round_robin".into()),
        ..Default::default()
    };
    let limited = honker::Fairness {
        key_limit: Some(1_000_000_000),
        key_per: Some(Duration::from_secs(1)),
        key_burst: Some(1_000_000_000),
        ..Default::default()
    };
    for (label, f) in [
        ("round-robin order", &round_robin),
        ("a limit per key", &limited),
    ] {
        for (w, batch, rounds) in [("W3", 1, n), ("W4", 32, batches)] {
            let mut with = Duration::ZERO;
            let mut without = Duration::ZERO;
            for i in 0..4 {
                let tag = format!("w12-{batch}-{}-{i}", label.len());
                without += run(&format!("{tag}-plain"), batch, rounds, None);
                with += run(&format!("{tag}-fair"), batch, rounds, Some(f));
            }
            report_against(
                &format!("W12 {w} with {label}, 16 keys (jobs/s)"),
                4 * batch * rounds,
                with,
                without,
                "vs priority order; target: cost <= 5%",
                0.95,
            );
        }
    }
}

/// Unique modes (ADR 37), each next to the same without a key, alternating
/// four times: W1 (enqueue 1/tx) with a distinct key per job in each mode
/// (so the mode's writes happen and every enqueue adds its job), and W3
/// (claim 1 + ack 1) on jobs holding `period` keys (the ack reads the key
/// and starts the period).
fn w13(dir: &Path, n1: usize, n3: usize) {
    let hour = Some(Duration::from_secs(3600));
    let modes: [(&str, Option<&str>, Option<Duration>, bool); 5] = [
        ("a live key", Some("live"), None, false),
        ("a period key", Some("period"), hour, false),
        ("a throttle key", Some("throttle"), hour, false),
        ("a debounce key", Some("debounce"), None, false),
        ("a payload key", None, None, true),
    ];
    let options =
        |i: usize, mode: Option<&str>, period: Option<Duration>, by_payload: bool| EnqueueOptions {
            dedupe_key: (!by_payload).then(|| format!("key-{i}")),
            dedupe_by_payload: by_payload,
            unique: mode.map(str::to_owned),
            unique_for: period,
            ..EnqueueOptions::default()
        };
    for (label, mode, period, by_payload) in modes {
        let run = |name: &str, keyed: bool| {
            let (db, _) = fresh(dir, name, Durability::Normal);
            let q = db.queue("emails").unwrap();
            let plain = EnqueueOptions::default();
            let start = Instant::now();
            for i in 0..n1 {
                let o = if keyed {
                    &options(i, mode, period, by_payload)
                } else {
                    &plain
                };
                assert!(!q.enqueue(payload(i), o).unwrap().existing);
            }
            start.elapsed()
        };
        let (mut with, mut without) = (Duration::ZERO, Duration::ZERO);
        for i in 0..4 {
            without += run(&format!("w13-1-{}-{i}-plain", label.len()), false);
            with += run(&format!("w13-1-{}-{i}-keyed", label.len()), true);
        }
        report_against(
            &format!("W13 W1 with {label} (jobs/s)"),
            4 * n1,
            with,
            without,
            "vs no key: what keeping a key costs",
            0.0,
        );
    }
    let run = |name: &str, keyed: bool| {
        let (db, _) = fresh(dir, name, Durability::Normal);
        let q = db.queue("emails").unwrap();
        for start in (0..n3).step_by(1000) {
            let batch: Vec<_> = (start..(start + 1000).min(n3)).collect();
            let tx = db.transaction().unwrap();
            for &i in &batch {
                let o = match keyed {
                    true => options(i, Some("period"), hour, false),
                    false => EnqueueOptions::default(),
                };
                q.enqueue_tx(&tx, payload(i), &o).unwrap();
            }
            tx.commit().unwrap();
        }
        claim_ack_honker(&db, 1, n3)
    };
    let (mut with, mut without) = (Duration::ZERO, Duration::ZERO);
    for i in 0..4 {
        without += run(&format!("w13-3-{i}-plain"), false);
        with += run(&format!("w13-3-{i}-keyed"), true);
    }
    report_against(
        "W13 W3 on jobs with period keys (jobs/s)",
        4 * n3,
        with,
        without,
        "vs no key",
        0.0,
    );
}

fn w9(dir: &Path, n: usize) {
    println!(
        "{:<44} {:>14} {:>14}",
        "  consumer groups", "group", "baseline"
    );
    let (db, _) = fresh(dir, "w9-queue1", Durability::Normal);
    prefill(&db, n);
    let q1 = claim_ack_honker(&db, 1, n);
    let (_db, g) = group_stream(dir, "w9-group1", 0, n);
    let g1 = group_claim_ack(&g, 1, n);
    report_against(
        "W9 group claim 1 + ack 1 (events/s)",
        n,
        g1,
        q1,
        "vs W3, the queue",
        0.5,
    );

    let batches = n / 32 * 2;
    let (db, _) = fresh(dir, "w9-queue32", Durability::Normal);
    prefill(&db, batches * 32);
    let q32 = claim_ack_honker(&db, 32, batches);
    let (_db, g) = group_stream(dir, "w9-group32", 0, batches * 32);
    let g32 = group_claim_ack(&g, 32, batches);
    report_against(
        "W9 group claim 32 + ack 32 (events/s)",
        batches * 32,
        g32,
        q32,
        "vs W4, the queue",
        0.5,
    );

    // 100,000 events of one key wait behind its in-flight first: taken in
    // once (untimed), then claims of the keyless events after them.
    let hot = 100_000;
    let (_db, g) = group_stream(dir, "w9-hot", hot + 1, n + 1);
    let head = g.claim("holder", 1, None).unwrap().events;
    assert_eq!(head[0].key.as_deref(), Some("hot"));
    let first = g.claim("warm", 1, None).unwrap().events;
    assert_eq!(first[0].key, None);
    g.ack(&first[0]).unwrap();
    let th = group_claim_ack(&g, 1, n);
    let (_db, g) = group_stream(dir, "w9-cold", 0, n);
    let tc = group_claim_ack(&g, 1, n);
    report_against(
        "W9 claim 1 + ack 1, 100k waiting on a key",
        n,
        th,
        tc,
        "vs no key; target: within 2x",
        0.5,
    );
}
