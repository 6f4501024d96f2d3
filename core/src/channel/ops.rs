//! The channel operations on a connection already inside a write transaction
//! (or a read, for the readers). Nothing here validates names or reads the
//! clock; the callers did.

use std::time::Duration;

use super::statements;
use super::types::{ChannelRetention, Notification, MAX_NOTIFY_BYTES};
use crate::clock::duration_ms;
use crate::error::{Error, Result};
use crate::payload::Payload;
use crate::raw::{params, Conn};
use crate::settings;

const SCOPE: &str = "channel";

/// Every this many notifications of a channel, the notifying transaction
/// trims up to [`TRIM_SLICE`] of its oldest messages that are outside the
/// window: more than it adds, so a channel never grows past its window by
/// more than a slice, and no notify pays for more than a slice.
const TRIM_EVERY: i64 = 64;
const TRIM_SLICE: usize = 256;

/// Checks a notification payload: valid, and within [`MAX_NOTIFY_BYTES`].
pub(crate) fn check_payload(p: &Payload) -> Result<()> {
    if p.len() > MAX_NOTIFY_BYTES {
        return Err(Error::invalid(format!(
            "a notification payload is at most {MAX_NOTIFY_BYTES} bytes, got {} (publish \
             large data to a stream and notify its offset)",
            p.len()
        )));
    }
    p.validate(MAX_NOTIFY_BYTES)
}

/// Writes a notification to `channel`; returns its id and sequence number.
pub(crate) fn notify(
    conn: Conn<'_>,
    channel: &str,
    payload: &Payload,
    now: i64,
) -> Result<(i64, i64)> {
    conn.prepare_cached(statements::ENSURE_CHANNEL)?
        .execute(params![channel, now])?;
    let seq: i64 = conn
        .prepare_cached(statements::ADVANCE)?
        .query_one(params![channel], |r| r.get(0))?;
    conn.prepare_cached(statements::INSERT)?
        .execute(params![channel, seq, payload, now])?;
    let id = conn.last_insert_rowid();
    if seq % TRIM_EVERY == 0 {
        trim(conn, channel, seq, now, TRIM_SLICE)?;
    }
    Ok((id, seq))
}

/// Removes up to `batch` of `channel`'s oldest messages outside its window
/// (`last_seq`: the channel's last sequence number).
pub(crate) fn trim(
    conn: Conn<'_>,
    channel: &str,
    last_seq: i64,
    now: i64,
    batch: usize,
) -> Result<usize> {
    let r = retention(conn, channel)?;
    let keep_from = last_seq.saturating_sub(r.max_count as i64) + 1;
    let cutoff = now.saturating_sub(duration_ms(r.max_age));
    conn.prepare_cached(statements::TRIM)?.execute(params![
        channel,
        keep_from,
        cutoff,
        batch as i64
    ])
}

/// The channel's last sequence number (0: never notified).
pub(crate) fn last_seq(conn: Conn<'_>, channel: &str) -> Result<i64> {
    Ok(head(conn, channel)?.0)
}

/// In one snapshot: the last sequence number and the newest message's id.
pub(crate) fn head(conn: Conn<'_>, channel: &str) -> Result<(i64, Option<i64>)> {
    Ok(conn
        .prepare_cached(statements::HEAD)?
        .query_row(params![channel], |r| Ok((r.get(0)?, r.get(1)?)))?
        .unwrap_or((0, None)))
}

/// In one snapshot: the last sequence number, and whether a message after
/// `after_id` exists.
pub(crate) fn head_after(conn: Conn<'_>, channel: &str, after_id: i64) -> Result<(i64, bool)> {
    Ok(conn
        .prepare_cached(statements::HEAD_AFTER)?
        .query_row(params![channel, after_id], |r| Ok((r.get(0)?, r.get(1)?)))?
        .unwrap_or((0, false)))
}

/// Up to `limit` messages of `channel` after `after_id`, in commit order.
pub(crate) fn read(
    conn: Conn<'_>,
    channel: &str,
    after_id: i64,
    limit: usize,
) -> Result<Vec<Notification>> {
    conn.prepare_cached(statements::READ_AFTER)?.query_map(
        params![channel, after_id, limit as i64],
        |r| {
            Ok(Notification {
                id: r.get(0)?,
                seq: r.get(1)?,
                payload: r.get(2)?,
                created_at: r.get(3)?,
            })
        },
    )
}

/// The channel's window (the defaults where none was set).
pub(crate) fn retention(conn: Conn<'_>, channel: &str) -> Result<ChannelRetention> {
    let d = ChannelRetention::default();
    let age = settings::get_int(conn, SCOPE, channel, "max_age_ms")?
        .flatten()
        .map_or(d.max_age, |ms| Duration::from_millis(ms.max(1000) as u64));
    let count = settings::get_int(conn, SCOPE, channel, "max_count")?
        .flatten()
        .map_or(d.max_count, |n| n.max(1) as u64);
    Ok(ChannelRetention {
        max_age: age,
        max_count: count,
    })
}

/// Stores the channel's window (checked by the caller).
pub(crate) fn set_retention(
    conn: Conn<'_>,
    channel: &str,
    r: &ChannelRetention,
    now: i64,
) -> Result<()> {
    settings::set_int(
        conn,
        SCOPE,
        channel,
        "max_age_ms",
        Some(duration_ms(r.max_age)),
        now,
    )?;
    settings::set_int(
        conn,
        SCOPE,
        channel,
        "max_count",
        Some(r.max_count as i64),
        now,
    )
}

/// Every channel's name.
pub(crate) fn names(conn: Conn<'_>) -> Result<Vec<String>> {
    conn.prepare_cached(statements::NAMES)?
        .query_map(params![], |r| r.get(0))
}
