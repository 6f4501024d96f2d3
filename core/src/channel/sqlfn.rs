//! The channels' SQL functions: Honker's `notify(channel, payload)` (and its
//! `honker_notify` alias) with Honker's contract (returns the id; any text),
//! and ours: `honker_channel_read`, `honker_channel_retention`,
//! `honker_channel_set_retention` (ms, coded errors).

use std::time::Duration;

use serde_json::{json, Value as Json};

use super::ops;
use super::types::ChannelRetention;
use crate::error::{Error, Result};
use crate::payload::Payload;
use crate::sqlfn::{payload_json, Args, Call, Out, SqlFn, DIRECT_ONLY};
use crate::validate;

pub(crate) const FUNCTIONS: &[SqlFn] = &[
    SqlFn::atomic("notify", 2, DIRECT_ONLY, notify),
    SqlFn::atomic("honker_notify", 2, DIRECT_ONLY, notify),
    SqlFn::atomic("honker_channel_read", 3, DIRECT_ONLY, read),
    SqlFn::atomic("honker_channel_retention", 1, DIRECT_ONLY, retention),
    SqlFn::atomic(
        "honker_channel_set_retention",
        3,
        DIRECT_ONLY,
        set_retention,
    ),
];

fn channel<'a>(a: &'a Args<'_>, i: usize) -> Result<&'a str> {
    let s = a.text(i, "channel")?;
    validate::name("channel", s)?;
    Ok(s)
}

/// `notify(channel, payload)` → the notification's id (Honker's contract).
/// JSON text is stored as it is; other text as a JSON string (Honker stored
/// any text, and its readers parse JSON); a BLOB as bytes.
fn notify(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let name = channel(a, 0)?;
    let mut payload = a.payload(1)?;
    if let Payload::Json(t) = &payload {
        if serde_json::from_str::<serde::de::IgnoredAny>(t).is_err() {
            payload = Payload::Json(Json::String(t.clone()).to_string());
        }
    }
    ops::check_payload(&payload)?;
    let (id, _) = ops::notify(c.conn, name, &payload, c.now)?;
    Ok(Out::Int(id))
}

/// `honker_channel_read(channel, after_id, limit)` → JSON `[{id, seq,
/// payload, created_at}]` of the notifications after `after_id` still in
/// the window (created_at in ms).
fn read(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let name = channel(a, 0)?;
    let after = a.int(1, "after_id")?.max(0);
    let limit = validate::batch(a.int(2, "limit")?)?;
    let rows: Vec<Json> = ops::read(c.conn, name, after, limit)?
        .iter()
        .map(|m| {
            json!({"id": m.id, "seq": m.seq, "payload": payload_json(&m.payload),
                   "created_at": m.created_at})
        })
        .collect();
    Ok(Out::Text(Json::Array(rows).to_string()))
}

fn window_json(r: &ChannelRetention) -> Out {
    Out::Text(
        json!({"max_age_ms": crate::clock::duration_ms(r.max_age), "max_count": r.max_count})
            .to_string(),
    )
}

/// `honker_channel_retention(channel)` → JSON `{max_age_ms, max_count}`.
fn retention(c: &Call<'_>) -> Result<Out> {
    Ok(window_json(&ops::retention(c.conn, channel(&c.args, 0)?)?))
}

/// `honker_channel_set_retention(channel, max_age_ms, max_count)` → the new
/// window as JSON; NULL keeps that limit as it is.
fn set_retention(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let name = channel(a, 0)?;
    let mut r = ops::retention(c.conn, name)?;
    if let Some(ms) = a.opt_int(1, "max_age_ms")? {
        if ms <= 0 {
            return Err(Error::invalid(format!(
                "max_age_ms must be positive, got {ms}"
            )));
        }
        r.max_age = Duration::from_millis(ms as u64);
    }
    if let Some(n) = a.opt_int(2, "max_count")? {
        r.max_count = u64::try_from(n).unwrap_or(0);
    }
    r.validate()?;
    ops::set_retention(c.conn, name, &r, c.now)?;
    Ok(window_json(&r))
}
