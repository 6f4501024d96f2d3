//! A stream's retention (ADR 20 rule 3): per stream, in `_honker_settings`
//! (scope `stream`), by age and by count, and optionally "everything every
//! consumer has passed". Trimming runs from maintenance in bounded batches.
//!
//! The rules, in one place:
//! - `max_age` (default 7 days; `None`: forever) removes older events even
//!   if a consumer has not read them: that consumer is told `TRIMMED` with
//!   the number it missed.
//! - `max_count` (default none) keeps the newest N events, but never removes
//!   one a consumer still needs (only the age limit may).
//! - `trim_passed` (default off) also removes every event all consumers have
//!   passed (a stream with no consumer keeps its events).
//! - A consumer group counts as a consumer at the lowest of its cursor and
//!   the events it holds (pending and dead): `max_count` and `trim_passed`
//!   never remove those; the age limit does, and the group's next claim
//!   reports them as missed (`TRIMMED`).

use std::time::Duration;

use super::statements;
use crate::clock::duration_ms;
use crate::error::{Error, Result};
use crate::raw::{params, Conn};
use crate::settings;

const SCOPE: &str = "stream";

/// Longest `max_age` (100 years).
pub const MAX_AGE: Duration = Duration::from_secs(86_400 * 365 * 100);
/// Largest `max_count`.
pub const MAX_COUNT: u64 = 1_000_000_000_000;

/// How long a stream keeps its events; see the module docs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamRetention {
    /// Events older than this are removed, read or not (default 7 days;
    /// `None`: kept forever). 1 s to 100 years.
    pub max_age: Option<Duration>,
    /// Keep at most this many newest events, never removing one a consumer
    /// has not passed (default `None`: no count limit). 1 to 10^12.
    pub max_count: Option<u64>,
    /// Also remove every event all consumers have passed (default false).
    pub trim_passed: bool,
}

impl Default for StreamRetention {
    fn default() -> StreamRetention {
        StreamRetention {
            max_age: Some(Duration::from_secs(7 * 86_400)),
            max_count: None,
            trim_passed: false,
        }
    }
}

impl StreamRetention {
    /// Checks the bounds.
    pub fn validate(&self) -> Result<()> {
        if let Some(a) = self.max_age {
            crate::options::in_range("stream max_age", a, Duration::from_secs(1), MAX_AGE)?;
        }
        if let Some(n) = self.max_count {
            if n == 0 || n > MAX_COUNT {
                return Err(Error::invalid(format!(
                    "stream max_count must be between 1 and {MAX_COUNT}, got {n}"
                )));
            }
        }
        Ok(())
    }
}

/// The retention of `stream` (the defaults where nothing is set).
pub(crate) fn get(conn: Conn<'_>, stream: &str) -> Result<StreamRetention> {
    let d = StreamRetention::default();
    let age = match settings::get_int(conn, SCOPE, stream, "max_age_ms")? {
        None => d.max_age,
        Some(v) => v.map(|ms| Duration::from_millis(ms.max(0) as u64)),
    };
    let count = match settings::get_int(conn, SCOPE, stream, "max_count")? {
        None => d.max_count,
        Some(v) => v.map(|n| n.max(1) as u64),
    };
    let passed = match settings::get_int(conn, SCOPE, stream, "trim_passed")? {
        None | Some(None) => d.trim_passed,
        Some(Some(v)) => v != 0,
    };
    Ok(StreamRetention {
        max_age: age,
        max_count: count,
        trim_passed: passed,
    })
}

/// Stores `r` for `stream` (checked by the caller).
pub(crate) fn set(conn: Conn<'_>, stream: &str, r: &StreamRetention, now: i64) -> Result<()> {
    let age = r.max_age.map(duration_ms);
    let count = r.max_count.map(|n| n as i64);
    settings::set_int(conn, SCOPE, stream, "max_age_ms", age, now)?;
    settings::set_int(conn, SCOPE, stream, "max_count", count, now)?;
    settings::set_int(
        conn,
        SCOPE,
        stream,
        "trim_passed",
        Some(i64::from(r.trim_passed)),
        now,
    )
}

/// The offset below which `stream`'s events may go now.
fn cut(conn: Conn<'_>, stream: &str, r: &StreamRetention, now: i64) -> Result<i64> {
    let last = super::ops::last_offset(conn, stream)?;
    let consumers: Option<i64> = conn
        .prepare_cached(statements::MIN_CONSUMER)?
        .query_one(params![stream], |r| r.get(0))?;
    // Every group's cursor and every event a group holds (dead letters
    // included) count as a consumer's place.
    let groups = super::group::ops::min_needed(conn, stream)?;
    let min_next = match (consumers, groups) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let mut cut = 0;
    if let Some(age) = r.max_age {
        let cutoff = now.saturating_sub(duration_ms(age));
        cut = conn
            .prepare_cached(statements::FIRST_AT)?
            .query_row(params![stream, cutoff], |r| r.get::<i64>(0))?
            .unwrap_or(last + 1);
    }
    if let Some(n) = r.max_count {
        let by_count = last.saturating_sub(n as i64) + 1;
        cut = cut.max(min_next.map_or(by_count, |m| by_count.min(m)));
    }
    if r.trim_passed {
        if let Some(m) = min_next {
            cut = cut.max(m);
        }
    }
    Ok(cut.min(last + 1))
}

/// Removes up to `batch` events of `stream` that its retention lets go;
/// returns how many.
pub(crate) fn trim(conn: Conn<'_>, stream: &str, now: i64, batch: usize) -> Result<usize> {
    let r = get(conn, stream)?;
    let Some(first) = super::ops::first_offset(conn, stream)? else {
        return Ok(0);
    };
    let cut = cut(conn, stream, &r, now)?;
    if cut <= first {
        return Ok(0);
    }
    let upto = cut.min(first.saturating_add(batch as i64));
    conn.prepare_cached(statements::TRIM_BELOW)?
        .execute(params![stream, upto])
}

/// Every stream's name.
pub(crate) fn names(conn: Conn<'_>) -> Result<Vec<String>> {
    conn.prepare_cached(statements::NAMES)?
        .query_map(params![], |r| r.get(0))
}

/// Forgets up to `batch` idempotency keys past their window.
pub(crate) fn sweep_keys(conn: Conn<'_>, now: i64, batch: usize) -> Result<usize> {
    conn.prepare_cached(statements::SWEEP_KEYS)?
        .execute(params![
            now.saturating_sub(super::ops::IDEMPOTENCY_WINDOW_MS),
            batch as i64
        ])
}
