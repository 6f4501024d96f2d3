//! Honker's stream functions with Honker's contracts
//! (reference/honker-ancestor.md §3, §5.1) on honker's stream tables: a
//! saved offset means "last processed" (ours: "next to read", so the two
//! differ by one), times in seconds, payloads as JSON strings, 1/0. Offsets
//! are per topic (ADR 20): a Honker client only passes back offsets it read.

use serde_json::{json, Value as Json};

use super::super::ops;
use crate::error::{Error, Result};
use crate::payload::Payload;
use crate::sqlfn::{payload_json, Call, Out};
use crate::validate;

fn payload_string(p: &Payload) -> String {
    match p {
        Payload::Json(t) => t.clone(),
        Payload::Bytes(_) => payload_json(p).to_string(),
    }
}

/// `honker_stream_publish(topic, key, payload)` → the event's offset.
pub(super) fn publish(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let topic = super::stream(a, 0)?;
    let key = a.opt_text(1, "key")?;
    if let Some(k) = key {
        validate::key("key", k)?;
    }
    let payload = a.payload(2)?;
    payload.validate(c.config.max_payload_bytes)?;
    let o = crate::stream::PublishOptions {
        key: key.map(str::to_owned),
        ..Default::default()
    };
    let offsets = ops::publish(c.conn, topic, &o, std::slice::from_ref(&payload), c.now)?;
    Ok(Out::Int(offsets[0]))
}

/// `honker_stream_read_since(topic, offset, limit)` → JSON `[{offset, topic,
/// key, payload, created_at}]` with offsets above `offset`, payload as a JSON
/// string, `created_at` in seconds.
pub(super) fn read_since(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let topic = super::stream(a, 0)?;
    let after = a.whole(1, "offset")?.max(0);
    let limit = validate::batch(a.whole(2, "limit")?)?;
    let events: Vec<Json> = ops::read(c.conn, topic, after, limit)?
        .iter()
        .map(|e| {
            json!({"offset": e.offset, "topic": topic, "key": e.key,
                   "payload": payload_string(&e.payload),
                   "created_at": e.created_at.div_euclid(1000)})
        })
        .collect();
    Ok(Out::Text(Json::Array(events).to_string()))
}

/// `honker_stream_save_offset(consumer, topic, offset)` → 1 if the
/// consumer's offset advanced, 0 if it was already there or past it.
/// `offset` is the last event processed.
pub(super) fn save_offset(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let who = super::consumer(a, 0)?;
    let topic = super::stream(a, 1)?;
    let last = a.whole(2, "offset")?;
    if last < 0 {
        return Err(Error::invalid(format!(
            "offset must not be negative, got {last}"
        )));
    }
    let before = ops::position(c.conn, topic, who)?;
    let after = ops::commit(c.conn, topic, who, last + 1, c.now, false)?;
    Ok(Out::Int(i64::from(before != Some(after))))
}

/// `honker_stream_get_offset(consumer, topic)` → the last offset the
/// consumer processed, or 0.
pub(super) fn get_offset(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let who = super::consumer(a, 0)?;
    let topic = super::stream(a, 1)?;
    Ok(Out::Int(
        ops::position(c.conn, topic, who)?.map_or(0, |next| next - 1),
    ))
}
