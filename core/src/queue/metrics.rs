//! Cumulative counters per queue, stored in the file (ADR 27): how many
//! jobs were enqueued, claimed, acked, retried, reclaimed, dead-lettered,
//! expired and cancelled, and a fixed-bucket histogram of claim latency
//! (from when a job was due to when it was claimed). Rates come from
//! readers, as Prometheus computes them; no row is added per job (at most
//! 8 + 17 rows per queue).
//!
//! Counts are made by `queue::ops`, which every surface goes through, in
//! the transaction of the change they count, and reach the file in one of
//! two ways:
//! - **batched** on honker's own writer connection (every binding's
//!   `Database`): kept in memory (`Pending`) until the transaction commits
//!   (SQLite's WAL hook says it did; its rollback hook that it did not, and
//!   a savepoint rolled back takes its counts back with it), then written by
//!   a later write transaction at most every [`Options::metrics_flush_every`]
//!   (1 s by default), by an idle flush that long after the last commit, and
//!   at `close`. A process killed loses at most that long of its counts; one
//!   more row in every small transaction cost up to 23 % on the queue
//!   benchmarks, which this avoids;
//! - **exactly**, in the transaction itself, wherever honker cannot see the
//!   commit: the SQL extension, and the functions registered on an
//!   application's own connection.
//!
//! [`Options::metrics_flush_every`]: crate::Options::metrics_flush_every

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::error::Result;
use crate::raw::{params, Conn};

/// What happened to one of a queue's jobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Event {
    /// Enqueued (a dedupe hit that returned the live job is not).
    Enqueued,
    /// Claimed by a worker (each claim: a job claimed again after a retry or
    /// a lapsed lease counts again).
    Claimed,
    /// Acked.
    Acked,
    /// Given back by its worker for another attempt (`retry`).
    Retried,
    /// Its lease lapsed and it was taken back for another attempt (the
    /// worker died or stalled).
    Reclaimed,
    /// Dead-lettered (failed, out of attempts, or undecodable).
    Dead,
    /// Not started before its expiry.
    Expired,
    /// Cancelled.
    Cancelled,
}

impl Event {
    /// Every event, in the order they are shown.
    pub const ALL: [Event; 8] = [
        Event::Enqueued,
        Event::Claimed,
        Event::Acked,
        Event::Retried,
        Event::Reclaimed,
        Event::Dead,
        Event::Expired,
        Event::Cancelled,
    ];

    /// Its name, as stored and exposed (`event="acked"`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Event::Enqueued => "enqueued",
            Event::Claimed => "claimed",
            Event::Acked => "acked",
            Event::Retried => "retried",
            Event::Reclaimed => "reclaimed",
            Event::Dead => "dead",
            Event::Expired => "expired",
            Event::Cancelled => "cancelled",
        }
    }

    fn parse(s: &str) -> Option<Event> {
        Event::ALL.into_iter().find(|e| e.as_str() == s)
    }
}

/// Upper bounds (ms, inclusive) of the claim-latency buckets; a last bucket
/// holds everything above (Prometheus's `+Inf`).
pub const LATENCY_BUCKETS_MS: [i64; 16] = [
    5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000, 300_000, 900_000,
    3_600_000,
];

/// The bucket a latency of `ms` falls in.
fn bucket(ms: i64) -> usize {
    LATENCY_BUCKETS_MS
        .iter()
        .position(|&le| ms <= le)
        .unwrap_or(LATENCY_BUCKETS_MS.len())
}

const BUMP: &str = "
INSERT INTO _honker_queue_counters (queue, event, bucket, n, sum_ms) VALUES (?1, ?2, ?3, ?4, ?5)
ON CONFLICT (queue, event, bucket) DO UPDATE SET n = n + excluded.n, sum_ms = sum_ms + excluded.sum_ms";

fn add(
    conn: Conn<'_>,
    queue: &str,
    event: Event,
    bucket: usize,
    n: u64,
    sum_ms: i64,
) -> Result<()> {
    if n > 0 {
        conn.prepare_cached(BUMP)?.execute(params![
            queue,
            event.as_str(),
            bucket as i64,
            n as i64,
            sum_ms
        ])?;
    }
    Ok(())
}

/// Counts `n` of `event` in `queue`, in the caller's transaction (batched
/// on honker's own writer, written at once elsewhere: see the module).
pub(crate) fn count(conn: Conn<'_>, queue: &str, event: Event, n: u64) -> Result<()> {
    if n == 0 {
        return Ok(());
    }
    match pending(conn) {
        Some(p) => {
            p.record(queue, event, 0, n, 0);
            Ok(())
        }
        None => add(conn, queue, event, 0, n, 0),
    }
}

/// Counts a claim of jobs that were due `latencies` ms before it: one row
/// per bucket they fall in (one statement for a typical claim).
pub(crate) fn count_claims(
    conn: Conn<'_>,
    queue: &str,
    latencies: impl IntoIterator<Item = i64>,
) -> Result<()> {
    let mut per = [(0u64, 0i64); LATENCY_BUCKETS_MS.len() + 1];
    for ms in latencies {
        let ms = ms.max(0);
        let b = &mut per[bucket(ms)];
        b.0 += 1;
        b.1 = b.1.saturating_add(ms);
    }
    let pending = pending(conn);
    for (i, (n, sum)) in per.into_iter().enumerate() {
        if n == 0 {
            continue;
        }
        match pending {
            Some(p) => p.record(queue, Event::Claimed, i as u8, n, sum),
            None => add(conn, queue, Event::Claimed, i, n, sum)?,
        }
    }
    Ok(())
}

/// The counts batched on `conn` (honker's writer), if they are.
fn pending<'a>(conn: Conn<'a>) -> Option<&'a Pending> {
    conn.batch()
        .and_then(|b| b.as_any().downcast_ref::<Pending>())
}

/// One counter row: queue, event, latency bucket.
type Key = (String, Event, u8);

/// Counts by row, not yet in the file.
#[derive(Debug, Default)]
struct Counts(HashMap<Key, (u64, i64)>);

impl Counts {
    fn add(&mut self, key: Key, n: u64, sum_ms: i64) {
        let e = self.0.entry(key).or_default();
        e.0 = e.0.saturating_add(n);
        e.1 = e.1.saturating_add(sum_ms);
    }

    fn merge(&mut self, other: Counts) {
        for (k, (n, sum)) in other.0 {
            self.add(k, n, sum);
        }
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[derive(Debug, Default)]
struct State {
    /// The open transaction's counts, in order (a savepoint rolled back
    /// truncates them to where it began).
    tx: Vec<(Key, u64, i64)>,
    /// Committed, not yet written to the file.
    committed: Counts,
    /// Written into the open transaction by a flush: gone once it commits,
    /// back into `committed` if it rolls back.
    flushing: Counts,
    /// When `committed` last became non-empty.
    since: Option<Instant>,
    stop: bool,
}

/// The batched counts of one writer connection (see the module): the
/// open transaction's, and those committed but not yet in the file.
#[derive(Debug)]
pub(crate) struct Pending {
    state: Mutex<State>,
    cv: Condvar,
    every: Duration,
}

// The extension counts exactly (it sees no commits): it uses only the
// journal side of this.
#[cfg_attr(not(feature = "rusqlite"), allow(dead_code))]
impl Pending {
    pub(crate) fn new(every: Duration) -> Arc<Pending> {
        Arc::new(Pending {
            state: Mutex::new(State::default()),
            cv: Condvar::new(),
            every,
        })
    }

    fn record(&self, queue: &str, event: Event, bucket: u8, n: u64, sum_ms: i64) {
        self.state
            .lock()
            .tx
            .push(((queue.to_string(), event, bucket), n, sum_ms));
    }

    /// Where the open transaction's counts are now: a savepoint begins.
    pub(crate) fn mark(&self) -> usize {
        self.state.lock().tx.len()
    }

    /// The savepoint that began at `mark` was rolled back.
    pub(crate) fn rewind(&self, mark: usize) {
        self.state.lock().tx.truncate(mark);
    }

    /// The connection committed (SQLite's WAL hook).
    pub(crate) fn committed(&self) {
        let mut st = self.state.lock();
        st.flushing = Counts::default();
        if st.tx.is_empty() {
            return;
        }
        for (k, n, sum) in std::mem::take(&mut st.tx) {
            st.committed.add(k, n, sum);
        }
        if st.since.is_none() {
            st.since = Some(Instant::now());
            self.cv.notify_all();
        }
    }

    /// The connection rolled its transaction back (SQLite's rollback hook).
    pub(crate) fn rolled_back(&self) {
        let mut st = self.state.lock();
        st.tx.clear();
        if !st.flushing.is_empty() {
            let back = std::mem::take(&mut st.flushing);
            st.committed.merge(back);
            // Due at once: these were due when the flush took them.
            st.since = Some(Instant::now() - self.every);
            self.cv.notify_all();
        }
    }

    /// Whether committed counts have waited `every` for a flush.
    pub(crate) fn due(&self) -> bool {
        let st = self.state.lock();
        st.since.is_some_and(|t| t.elapsed() >= self.every)
    }

    /// Whether anything committed is not in the file yet.
    pub(crate) fn has_committed(&self) -> bool {
        !self.state.lock().committed.is_empty()
    }

    /// Writes the committed counts into `conn`'s open write transaction (they
    /// count as written once it commits; they come back if it rolls back).
    pub(crate) fn flush(&self, conn: Conn<'_>) -> Result<()> {
        let batch = {
            let mut st = self.state.lock();
            st.since = None;
            std::mem::take(&mut st.committed)
        };
        let mut written = Counts::default();
        let mut rows = batch.0.into_iter();
        let mut failed = None;
        for ((queue, event, bucket), (n, sum)) in rows.by_ref() {
            match add(conn, &queue, event, usize::from(bucket), n, sum) {
                Ok(()) => written.add((queue, event, bucket), n, sum),
                Err(e) => {
                    failed = Some((e, ((queue, event, bucket), (n, sum))));
                    break;
                }
            }
        }
        let mut st = self.state.lock();
        st.flushing.merge(written);
        match failed {
            None => Ok(()),
            Some((e, (k, (n, sum)))) => {
                st.committed.add(k, n, sum);
                for (k, (n, sum)) in rows {
                    st.committed.add(k, n, sum);
                }
                st.since = Some(Instant::now());
                Err(e)
            }
        }
    }

    /// Starts the idle flush: a thread that, `every` after a commit left
    /// counts unwritten and no write flushed them since, calls `flush_now`
    /// (which runs [`flush`](Self::flush) in a write transaction of its own,
    /// or returns `None` once the database is gone). It ends at
    /// [`stop`](Self::stop); nothing joins it.
    pub(crate) fn start_flusher(
        self: &Arc<Self>,
        flush_now: impl Fn() -> Option<Result<()>> + Send + 'static,
    ) -> Result<()> {
        let me = Arc::clone(self);
        std::thread::Builder::new()
            .name("honker-metrics".into())
            .spawn(move || me.run_flusher(flush_now))
            .map_err(|e| crate::error::Error::internal(format!("start the metrics flush: {e}")))?;
        Ok(())
    }

    fn run_flusher(&self, flush_now: impl Fn() -> Option<Result<()>>) {
        let mut st = self.state.lock();
        while !st.stop {
            match st.since.map(|t| self.every.saturating_sub(t.elapsed())) {
                None => self.cv.wait(&mut st),
                Some(left) if !left.is_zero() => {
                    self.cv.wait_for(&mut st, left);
                }
                Some(_) => {
                    let outcome = parking_lot::MutexGuard::unlocked(&mut st, &flush_now);
                    match outcome {
                        None => return,
                        Some(Ok(())) => {}
                        // Busy for the whole busy timeout, or the disk: try
                        // again a period later, not at once.
                        Some(Err(_)) => {
                            if !st.committed.is_empty() {
                                st.since = Some(Instant::now());
                            }
                        }
                    }
                }
            }
        }
    }

    /// Ends the idle flush thread (the caller flushes what is left).
    pub(crate) fn stop(&self) {
        let mut st = self.state.lock();
        st.stop = true;
        self.cv.notify_all();
    }
}

/// The engine follows the writer's transactions with it.
impl honker_engine::Batch for Pending {
    fn mark(&self) -> usize {
        Pending::mark(self)
    }
    fn rewind(&self, mark: usize) {
        Pending::rewind(self, mark);
    }
    fn committed(&self) {
        Pending::committed(self);
    }
    fn rolled_back(&self) {
        Pending::rolled_back(self);
    }
    fn due(&self) -> bool {
        Pending::due(self)
    }
    fn has_committed(&self) -> bool {
        Pending::has_committed(self)
    }
    fn flush(&self, conn: Conn<'_>) -> Result<()> {
        Pending::flush(self, conn)
    }
    fn stop(&self) {
        Pending::stop(self);
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// The claim latency histogram of a queue.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LatencyHistogram {
    /// Claims per bucket (not cumulative): `counts[i]` for latencies up to
    /// `LATENCY_BUCKETS_MS[i]`, the last for everything above.
    pub counts: [u64; LATENCY_BUCKETS_MS.len() + 1],
    /// The latencies' sum, ms.
    pub sum_ms: u64,
}

impl LatencyHistogram {
    /// How many claims.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Prometheus's cumulative buckets: `(upper bound in seconds or None
    /// for +Inf, claims up to it)`.
    pub fn cumulative(&self) -> Vec<(Option<f64>, u64)> {
        let mut total = 0;
        self.counts
            .iter()
            .enumerate()
            .map(|(i, n)| {
                total += n;
                let le = LATENCY_BUCKETS_MS.get(i).map(|&ms| ms as f64 / 1000.0);
                (le, total)
            })
            .collect()
    }
}

/// A queue's counters since the file was created (or upgraded to schema
/// 10), and its jobs by state now.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueueMetrics {
    /// The queue.
    pub queue: String,
    /// Each event's count, in [`Event::ALL`]'s order.
    pub totals: [u64; 8],
    /// Claim latency.
    pub claim_latency: LatencyHistogram,
    /// Jobs ready now (due, waiting for a worker).
    pub ready: u64,
    /// Jobs scheduled for later.
    pub scheduled: u64,
    /// Jobs leased to a worker.
    pub running: u64,
    /// Dead letters kept.
    pub dead_letters: u64,
}

impl QueueMetrics {
    /// How many of `event`.
    pub fn total(&self, event: Event) -> u64 {
        self.totals[Event::ALL.iter().position(|e| *e == event).unwrap_or(0)]
    }

    /// The JSON every surface reads (`honker metrics --json` prints a list
    /// of them; cli/schemas/metrics.schema.json is its schema): `queue`,
    /// `totals` (each event's count), `claim_latency` (`buckets`:
    /// cumulative `{le_seconds, count}`, `le_seconds` null for +Inf;
    /// `sum_seconds`; `count`) and `jobs` (`ready`, `scheduled`, `running`,
    /// `dead`).
    pub fn to_json(&self) -> serde_json::Value {
        let totals: serde_json::Map<String, serde_json::Value> = Event::ALL
            .iter()
            .map(|e| (e.as_str().to_string(), self.total(*e).into()))
            .collect();
        let buckets: Vec<serde_json::Value> = self
            .claim_latency
            .cumulative()
            .into_iter()
            .map(|(le, n)| serde_json::json!({"le_seconds": le, "count": n}))
            .collect();
        serde_json::json!({
            "queue": self.queue,
            "totals": totals,
            "claim_latency": {
                "buckets": buckets,
                "sum_seconds": self.claim_latency.sum_ms as f64 / 1000.0,
                "count": self.claim_latency.count(),
            },
            "jobs": {"ready": self.ready, "scheduled": self.scheduled,
                     "running": self.running, "dead": self.dead_letters},
        })
    }
}

const COUNTERS: &str = "
SELECT queue, event, bucket, n, sum_ms FROM _honker_queue_counters
WHERE ?1 IS NULL OR queue = ?1 ORDER BY queue";

/// Jobs per state and queue: live ones by their state (a scheduled job that
/// is due is ready), dead letters from the finished records.
pub(crate) const GAUGES: &str = "
SELECT queue,
       sum(state = 'ready' OR (state = 'scheduled' AND run_at <= ?2)),
       sum(state = 'scheduled' AND run_at > ?2),
       sum(state = 'running'), 0,
       min(CASE WHEN state = 'ready' OR (state = 'scheduled' AND run_at <= ?2) THEN run_at END)
FROM _honker_jobs WHERE ?1 IS NULL OR queue = ?1 GROUP BY queue
UNION ALL
SELECT queue, 0, 0, 0, count(*), NULL FROM _honker_finished
WHERE state = 'dead' AND (?1 IS NULL OR queue = ?1) GROUP BY queue";

/// Every queue's metrics (or `queue`'s), read in the caller's transaction,
/// ordered by queue name. A queue appears once anything was counted for it
/// or it holds jobs. Without `counters` (a file older than schema 10, read
/// by `honker metrics` without upgrading it) only the jobs by state are read.
/// The counters of `queue` (or every queue's) in `db`'s file, this
/// process's own written first (a reader sees the file only).
#[cfg(feature = "rusqlite")]
pub(crate) fn read_own(
    db: &crate::database::Inner,
    queue: Option<&str>,
) -> Result<Vec<QueueMetrics>> {
    let _ = db.flush_batch();
    let reader = db.reader()?;
    read(reader.raw(), queue, true, db.now())
}

pub(crate) fn read(
    conn: Conn<'_>,
    queue: Option<&str>,
    counters: bool,
    now: i64,
) -> Result<Vec<QueueMetrics>> {
    let mut out: Vec<QueueMetrics> = Vec::new();
    fn entry(out: &mut Vec<QueueMetrics>, queue: String) -> &mut QueueMetrics {
        let i = match out.iter().position(|m| m.queue == queue) {
            Some(i) => i,
            None => {
                out.push(QueueMetrics {
                    queue,
                    ..QueueMetrics::default()
                });
                out.len() - 1
            }
        };
        &mut out[i]
    }
    let rows = if counters {
        conn.prepare_cached(COUNTERS)?
            .query_map(params![queue], |r| {
                Ok((
                    r.get::<String>(0)?,
                    r.get::<String>(1)?,
                    r.get::<i64>(2)?,
                    r.get::<i64>(3)?,
                    r.get::<i64>(4)?,
                ))
            })?
    } else {
        Vec::new()
    };
    for (q, event, b, n, sum) in rows {
        let m = entry(&mut out, q);
        let (n, sum) = (n.max(0) as u64, sum.max(0) as u64);
        let Some(event) = Event::parse(&event) else {
            continue; // an event a newer build counts
        };
        if event == Event::Claimed {
            let b = usize::try_from(b)
                .unwrap_or(0)
                .min(LATENCY_BUCKETS_MS.len());
            m.claim_latency.counts[b] += n;
            m.claim_latency.sum_ms += sum;
        }
        m.totals[Event::ALL.iter().position(|e| *e == event).unwrap_or(0)] += n;
    }
    let gauges = conn
        .prepare_cached(GAUGES)?
        .query_map(params![queue, now], |r| {
            Ok((
                r.get::<String>(0)?,
                r.get::<i64>(1)?,
                r.get::<i64>(2)?,
                r.get::<i64>(3)?,
                r.get::<i64>(4)?,
            ))
        })?;
    for (q, ready, scheduled, running, dead) in gauges {
        let m = entry(&mut out, q);
        m.ready += ready.max(0) as u64;
        m.scheduled += scheduled.max(0) as u64;
        m.running += running.max(0) as u64;
        m.dead_letters += dead.max(0) as u64;
    }
    out.sort_by(|a, b| a.queue.cmp(&b.queue));
    Ok(out)
}

/// A label value escaped as the text format wants (`\\`, `\"`, `\n`).
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The Prometheus text exposition (version 0.0.4) of `metrics`: for an
/// application's `/metrics` route or node_exporter's textfile collector.
pub fn exposition(metrics: &[QueueMetrics]) -> String {
    let mut out = String::new();
    out += "# HELP honker_jobs_total Jobs by queue and event, counted in the file (since it was created or reached schema 10).\n";
    out += "# TYPE honker_jobs_total counter\n";
    for m in metrics {
        let q = label(&m.queue);
        for (e, n) in Event::ALL.iter().zip(m.totals) {
            out += &format!(
                "honker_jobs_total{{queue=\"{q}\",event=\"{}\"}} {n}\n",
                e.as_str()
            );
        }
    }
    out += "# HELP honker_claim_latency_seconds Time from a job being due to its claim.\n";
    out += "# TYPE honker_claim_latency_seconds histogram\n";
    for m in metrics {
        let q = label(&m.queue);
        for (le, n) in m.claim_latency.cumulative() {
            let le = le.map_or("+Inf".to_string(), |s| format!("{s}"));
            out +=
                &format!("honker_claim_latency_seconds_bucket{{queue=\"{q}\",le=\"{le}\"}} {n}\n");
        }
        out += &format!(
            "honker_claim_latency_seconds_sum{{queue=\"{q}\"}} {}\n",
            m.claim_latency.sum_ms as f64 / 1000.0
        );
        out += &format!(
            "honker_claim_latency_seconds_count{{queue=\"{q}\"}} {}\n",
            m.claim_latency.count()
        );
    }
    out += "# HELP honker_queue_jobs Jobs by queue and state now (dead: dead letters kept).\n";
    out += "# TYPE honker_queue_jobs gauge\n";
    for m in metrics {
        let q = label(&m.queue);
        for (state, n) in [
            ("ready", m.ready),
            ("scheduled", m.scheduled),
            ("running", m.running),
            ("dead", m.dead_letters),
        ] {
            out += &format!("honker_queue_jobs{{queue=\"{q}\",state=\"{state}\"}} {n}\n");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latencies_fall_in_the_first_bucket_that_holds_them() {
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(5), 0);
        assert_eq!(bucket(6), 1);
        assert_eq!(bucket(3_600_000), 15);
        assert_eq!(bucket(3_600_001), 16);
        let h = LatencyHistogram {
            counts: {
                let mut c = [0; 17];
                c[0] = 2;
                c[3] = 1;
                c[16] = 1;
                c
            },
            sum_ms: 4_000_060,
        };
        let cum = h.cumulative();
        assert_eq!(cum[0], (Some(0.005), 2));
        assert_eq!(cum[3], (Some(0.05), 3));
        assert_eq!(cum[15], (Some(3600.0), 3));
        assert_eq!(cum[16], (None, 4));
        assert_eq!(h.count(), 4);
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
