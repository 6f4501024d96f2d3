//! The streams' SQL functions: ours (`honker_stream_append`, `_read`,
//! `_commit`, `_seek`, `_position`, `_info`: ms, "next offset to read",
//! coded errors) and Honker's four in [`honker`] (ADR 15, ADR 20).

use serde_json::{json, Map, Value as Json};

use super::ops;
use super::retention::{self, StreamRetention};
use super::PublishOptions;
use crate::error::{Error, Result};
use crate::sqlfn::FromJsonOptions as _;
use crate::sqlfn::{payload_json, Args, Call, Out, SqlFn, DIRECT_ONLY};
use crate::validate;

mod honker;

pub(crate) const FUNCTIONS: &[SqlFn] = &[
    SqlFn::atomic("honker_stream_append", -1, DIRECT_ONLY, append),
    SqlFn::atomic("honker_stream_read", 3, DIRECT_ONLY, read),
    SqlFn::atomic("honker_stream_commit", 3, DIRECT_ONLY, commit),
    SqlFn::atomic("honker_stream_seek", 3, DIRECT_ONLY, seek),
    SqlFn::atomic("honker_stream_position", 2, DIRECT_ONLY, position),
    SqlFn::atomic("honker_stream_info", 1, DIRECT_ONLY, info),
    SqlFn::atomic("honker_stream_retention", 1, DIRECT_ONLY, retention),
    SqlFn::atomic("honker_stream_set_retention", 2, DIRECT_ONLY, set_retention),
    SqlFn::atomic("honker_stream_trim", 1, DIRECT_ONLY, trim),
    // Honker's names at Honker's arities, with Honker's contracts.
    SqlFn::atomic("honker_stream_publish", 3, DIRECT_ONLY, honker::publish),
    SqlFn::atomic(
        "honker_stream_read_since",
        3,
        DIRECT_ONLY,
        honker::read_since,
    ),
    SqlFn::atomic(
        "honker_stream_save_offset",
        3,
        DIRECT_ONLY,
        honker::save_offset,
    ),
    SqlFn::atomic(
        "honker_stream_get_offset",
        2,
        DIRECT_ONLY,
        honker::get_offset,
    ),
];

/// A stream name argument, checked.
fn stream<'a>(a: &'a Args<'_>, i: usize) -> Result<&'a str> {
    let s = a.text(i, "stream")?;
    validate::name("stream", s)?;
    Ok(s)
}

/// A consumer name argument, checked.
fn consumer<'a>(a: &'a Args<'_>, i: usize) -> Result<&'a str> {
    let c = a.text(i, "consumer")?;
    validate::name("consumer", c)?;
    Ok(c)
}

/// `honker_stream_append(stream, payload[, options])` → the event's offset.
/// `options`: a JSON object of `Stream.publish`'s options in core's table
/// (`key`, `idempotency_key`, `priority`, ...), with `traceparent` and
/// `tracestate` (the producer's W3C trace context).
fn append(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    a.count(2, 3)?;
    let name = stream(a, 0)?;
    let payload = a.payload(1)?;
    payload.validate(c.config.max_payload_bytes)?;
    let o = match a
        .has(2)
        .then(|| a.opt_text(2, "options"))
        .transpose()?
        .flatten()
    {
        Some(text) => PublishOptions::from_json_options("honker_stream_append", text)?,
        None => PublishOptions::default(),
    };
    o.check()?;
    let offsets = ops::publish(c.conn, name, &o, std::slice::from_ref(&payload), c.now)?;
    Ok(Out::Int(offsets[0]))
}

/// `honker_stream_read(stream, after, limit)` → a JSON array of events with
/// offsets above `after`: `offset, key, payload, created_at` (ms),
/// `priority`, `trace_context` (the W3C headers' object, or null).
fn read(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let name = stream(a, 0)?;
    let after = a.int(1, "after")?;
    if after < 0 {
        return Err(Error::invalid(format!(
            "after must not be negative, got {after}"
        )));
    }
    let limit = validate::batch(a.int(2, "limit")?)?;
    let events: Vec<Json> = ops::read(c.conn, name, after, limit)?
        .iter()
        .map(|e| {
            json!({"offset": e.offset, "key": e.key, "payload": payload_json(&e.payload),
                   "created_at": e.created_at, "priority": e.priority,
                   "trace_context": crate::sqlfn::trace_json(e.trace_context.as_ref())})
        })
        .collect();
    Ok(Out::Text(Json::Array(events).to_string()))
}

/// `honker_stream_commit(stream, consumer, next_offset)` → the consumer's
/// next offset after it (a commit never moves it back; past the end is
/// `INVALID_ARGUMENT`). Inside the caller's transaction it commits with it.
fn commit(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let (name, who) = (stream(a, 0)?, consumer(a, 1)?);
    let next = a.int(2, "next_offset")?;
    Ok(Out::Int(ops::commit(c.conn, name, who, next, c.now, true)?))
}

/// `honker_stream_seek(stream, consumer, next_offset)` → the offset: moves
/// the consumer either way.
fn seek(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let (name, who) = (stream(a, 0)?, consumer(a, 1)?);
    let next = a.int(2, "next_offset")?;
    ops::seek(c.conn, name, who, next, c.now)?;
    Ok(Out::Int(next))
}

/// `honker_stream_position(stream, consumer)` → its next offset, or NULL if
/// it never committed one.
fn position(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let (name, who) = (stream(a, 0)?, consumer(a, 1)?);
    Ok(ops::position(c.conn, name, who)?.map_or(Out::Null, Out::Int))
}

/// `honker_stream_info(stream)` → JSON `{length, first_offset, last_offset,
/// consumers: [{consumer, next_offset, lag}], groups: [...]}` (each group as
/// `honker_group_info` shows it).
fn info(c: &Call<'_>) -> Result<Out> {
    let i = ops::info(c.conn, stream(&c.args, 0)?, c.now)?;
    let consumers: Vec<Json> = i
        .consumers
        .iter()
        .map(|c| json!({"consumer": c.consumer, "next_offset": c.next_offset, "lag": c.lag}))
        .collect();
    Ok(Out::Text(
        json!({"length": i.length, "first_offset": i.first_offset,
               "last_offset": i.last_offset, "consumers": consumers,
               "groups": i.groups.iter().map(super::group::sqlfn::info_json).collect::<Vec<_>>()})
        .to_string(),
    ))
}

fn retention_json(r: &StreamRetention) -> Out {
    Out::Text(
        json!({"max_age_ms": r.max_age.map(crate::clock::duration_ms),
               "max_count": r.max_count, "trim_passed": r.trim_passed})
        .to_string(),
    )
}

/// `honker_stream_retention(stream)` → JSON `{max_age_ms, max_count,
/// trim_passed}` (null: no such limit).
fn retention(c: &Call<'_>) -> Result<Out> {
    Ok(retention_json(&retention::get(
        c.conn,
        stream(&c.args, 0)?,
    )?))
}

/// `honker_stream_set_retention(stream, options)` → the new retention as
/// JSON. `options`: a JSON object with any of `max_age_ms` (a positive
/// integer, or null: forever), `max_count` (a positive integer, or null: no
/// count limit), `trim_passed` (true/false); keys left out keep their value.
fn set_retention(c: &Call<'_>) -> Result<Out> {
    let a = &c.args;
    let name = stream(a, 0)?;
    let bad = |w: &str| Error::invalid(format!("honker_stream_set_retention: options: {w}"));
    let obj: Map<String, Json> = match serde_json::from_str(a.text(1, "options")?) {
        Ok(Json::Object(m)) => m,
        _ => return Err(bad("must be a JSON object")),
    };
    let mut r = retention::get(c.conn, name)?;
    let positive = |k: &str, v: &Json| -> Result<Option<u64>> {
        match v {
            Json::Null => Ok(None),
            Json::Number(n) => match n.as_u64() {
                Some(n) if n > 0 => Ok(Some(n)),
                _ => Err(bad(&format!("{k} must be a positive integer or null"))),
            },
            _ => Err(bad(&format!("{k} must be a positive integer or null"))),
        }
    };
    for (k, v) in &obj {
        match k.as_str() {
            "max_age_ms" => r.max_age = positive(k, v)?.map(std::time::Duration::from_millis),
            "max_count" => r.max_count = positive(k, v)?,
            "trim_passed" => {
                r.trim_passed = v
                    .as_bool()
                    .ok_or_else(|| bad("trim_passed must be true or false"))?
            }
            other => return Err(bad(&format!("unknown key {other:?}"))),
        }
    }
    r.validate()?;
    retention::set(c.conn, name, &r, c.now)?;
    Ok(retention_json(&r))
}

/// `honker_stream_trim(stream)` → how many events its retention removed now.
fn trim(c: &Call<'_>) -> Result<Out> {
    let name = stream(&c.args, 0)?;
    let mut total = 0;
    loop {
        let n = retention::trim(c.conn, name, c.now, 1000)?;
        total += n;
        if n < 1000 {
            return Ok(Out::Int(total as i64));
        }
    }
}
