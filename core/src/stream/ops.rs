//! The stream operations on a connection already inside a write transaction
//! (or a read, for the readers). Nothing here validates names or reads the
//! clock; the callers did.

use super::statements;
use super::PublishOptions;
use crate::error::{Error, Result};
use crate::payload::Payload;
use crate::raw::{params, Conn};

/// How long a publish's idempotency key keeps returning its original offset.
pub(crate) const IDEMPOTENCY_WINDOW_MS: i64 = 24 * 3600 * 1000;

/// One event as read.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Event {
    pub offset: i64,
    pub key: Option<String>,
    pub payload: Payload,
    pub created_at: i64,
    pub trace_context: Option<crate::TraceContext>,
    pub priority: i32,
}

/// A payload's digest for its idempotency key, to tell a retried publish
/// from a key reused for another payload: of JSON's value, not its text
/// (keys in any order, any spacing, `10` and `10.0` alike), so that a retry
/// through another language's encoder matches; of the bytes otherwise.
fn digest(p: &Payload) -> i64 {
    match p.canonical() {
        Some((tag, bytes)) => fnv(tag, &bytes),
        None => text_digest(p),
    }
}

/// The digest earlier versions stored (of JSON's text as given): a key they
/// stored still matches a retry of the same text within its window.
fn text_digest(p: &Payload) -> i64 {
    match p {
        Payload::Json(t) => fnv(b'j', t.as_bytes()),
        Payload::Bytes(b) => fnv(b'b', b),
    }
}

/// FNV-1a, 64 bits, over the kind's tag and then the bytes: the same in
/// every process, language and version.
fn fnv(tag: u8, bytes: &[u8]) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in std::iter::once(&tag).chain(bytes) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h as i64
}

/// Appends `payloads` to `stream` with the options `o` (checked by the
/// caller), returning their offsets, consecutive. Every event of the batch
/// keeps the key (a label) and the producer's trace context. With an
/// idempotency key (one payload only): a publish with the same key and
/// payload within the window returns the first one's offset and appends
/// nothing; the same key with another payload is `INVALID_ARGUMENT`.
pub(crate) fn publish(
    conn: Conn<'_>,
    stream: &str,
    o: &PublishOptions,
    payloads: &[Payload],
    now: i64,
) -> Result<Vec<i64>> {
    let (key, idempotency) = (o.key.as_deref(), o.idempotency_key.as_deref());
    let trace = o.trace_context.as_ref().map(crate::TraceContext::to_json);
    let n = payloads.len() as i64;
    if n == 0 {
        return Ok(Vec::new());
    }
    if let Some(k) = idempotency {
        if n != 1 {
            return Err(Error::invalid(
                "an idempotency key names one event, not a batch",
            ));
        }
        let found: Option<(i64, i64, i64)> = conn
            .prepare_cached(statements::FIND_KEY)?
            .query_row(params![stream, k], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })?;
        if let Some((offset, d, at)) = found {
            if at > now - IDEMPOTENCY_WINDOW_MS {
                if d == digest(&payloads[0]) || d == text_digest(&payloads[0]) {
                    return Ok(vec![offset]);
                }
                return Err(Error::invalid(format!(
                    "idempotency key {k:?} was used for another payload in stream {stream:?} \
                     (offset {offset})"
                )));
            }
        }
    }
    conn.prepare_cached(statements::ENSURE_STREAM)?
        .execute(params![stream, now])?;
    conn.prepare_cached(statements::ADVANCE)?
        .execute(params![stream, n])?;
    let last = last_offset(conn, stream)?;
    let first = last - n + 1;
    let mut insert = conn.prepare_cached(statements::INSERT_EVENT)?;
    for (i, p) in payloads.iter().enumerate() {
        insert.execute(params![
            stream,
            first + i as i64,
            key,
            p,
            now,
            trace,
            o.priority
        ])?;
    }
    if let Some(k) = idempotency {
        conn.prepare_cached(statements::SAVE_KEY)?.execute(params![
            stream,
            k,
            first,
            digest(&payloads[0]),
            now
        ])?;
    }
    Ok((first..=last).collect())
}

/// Up to `limit` events of `stream` with offsets above `after`, in order.
pub(crate) fn read(conn: Conn<'_>, stream: &str, after: i64, limit: usize) -> Result<Vec<Event>> {
    conn.prepare_cached(statements::READ_AFTER)?.query_map(
        params![stream, after, limit as i64],
        |r| {
            Ok(Event {
                offset: r.get(0)?,
                key: r.get(1)?,
                payload: r.get(2)?,
                created_at: r.get(3)?,
                trace_context: r.get::<crate::trace::Stored>(4)?.0,
                priority: r.get(5)?,
            })
        },
    )
}

/// The last offset published to `stream` (0: none yet).
pub(crate) fn last_offset(conn: Conn<'_>, stream: &str) -> Result<i64> {
    Ok(conn
        .prepare_cached(statements::LAST_OFFSET)?
        .query_row(params![stream], |r| r.get(0))?
        .unwrap_or(0))
}

/// The first retained offset of `stream`, if it holds any event.
pub(crate) fn first_offset(conn: Conn<'_>, stream: &str) -> Result<Option<i64>> {
    conn.prepare_cached(statements::FIRST_OFFSET)?
        .query_row(params![stream], |r| r.get(0))
}

/// In one snapshot: the stream's last offset and its first event at or above
/// `from`, if any (see [`statements::HEAD_FROM`]).
pub(crate) fn head_from(conn: Conn<'_>, stream: &str, from: i64) -> Result<(i64, Option<i64>)> {
    Ok(conn
        .prepare_cached(statements::HEAD_FROM)?
        .query_row(params![stream, from], |r| Ok((r.get(0)?, r.get(1)?)))?
        .unwrap_or((0, None)))
}

/// A consumer's next offset, if it ever committed one.
pub(crate) fn position(conn: Conn<'_>, stream: &str, consumer: &str) -> Result<Option<i64>> {
    conn.prepare_cached(statements::GET_POSITION)?
        .query_row(params![stream, consumer], |r| r.get(0))
}

/// Checks that `next` is a place a consumer can be: from 1 to one past the
/// last event.
fn check_next(conn: Conn<'_>, stream: &str, next: i64) -> Result<()> {
    let last = last_offset(conn, stream)?;
    if next < 1 || next > last + 1 {
        return Err(Error::invalid(format!(
            "offset {next} is outside stream {stream:?} (its next offset to read is between 1 \
             and {})",
            last + 1
        )));
    }
    Ok(())
}

/// Commits "the next offset to read" for `consumer`; never moves it back.
/// Returns the consumer's next offset after the commit. `checked`: refuse an
/// offset past the end (Honker's form accepts any).
pub(crate) fn commit(
    conn: Conn<'_>,
    stream: &str,
    consumer: &str,
    next: i64,
    now: i64,
    checked: bool,
) -> Result<i64> {
    if checked {
        check_next(conn, stream, next)?;
    }
    conn.prepare_cached(statements::COMMIT)?
        .execute(params![stream, consumer, next, now])?;
    Ok(position(conn, stream, consumer)?.unwrap_or(next))
}

/// Moves `consumer` to `next`, either way (an explicit rewind or skip).
pub(crate) fn seek(
    conn: Conn<'_>,
    stream: &str,
    consumer: &str,
    next: i64,
    now: i64,
) -> Result<()> {
    check_next(conn, stream, next)?;
    conn.prepare_cached(statements::SEEK)?
        .execute(params![stream, consumer, next, now])?;
    Ok(())
}

/// A consumer's place and how far behind it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConsumerInfo {
    pub consumer: String,
    pub next_offset: i64,
    pub lag: i64,
}

/// What `info` reports of a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Info {
    pub length: i64,
    pub first_offset: Option<i64>,
    pub last_offset: i64,
    pub consumers: Vec<ConsumerInfo>,
    pub groups: Vec<super::group::GroupInfo>,
}

/// The stream's length, offsets and every consumer's position and lag
/// (events published and not yet passed: exact, offsets being dense), and
/// every consumer group's.
pub(crate) fn info(conn: Conn<'_>, stream: &str, now: i64) -> Result<Info> {
    let last = last_offset(conn, stream)?;
    let consumers =
        conn.prepare_cached(statements::CONSUMERS)?
            .query_map(params![stream], |r| {
                let next: i64 = r.get(1)?;
                Ok(ConsumerInfo {
                    consumer: r.get(0)?,
                    next_offset: next,
                    lag: (last - (next - 1)).max(0),
                })
            })?;
    Ok(Info {
        length: conn
            .prepare_cached(statements::LENGTH)?
            .query_one(params![stream], |r| r.get(0))?,
        first_offset: first_offset(conn, stream)?,
        last_offset: last,
        consumers,
        groups: super::group::ops::of_stream(conn, stream)?
            .into_iter()
            .map(|(g, _)| super::group::ops::info(conn, stream, &g, now))
            .collect::<Result<_>>()?,
    })
}

/// Where a consumer starts: its committed offset if it has one, else `start`
/// resolved now and stored (so that a consumer killed before its first
/// commit resumes there, not at a new "latest").
pub(crate) fn start(
    conn: Conn<'_>,
    stream: &str,
    consumer: &str,
    start: super::Start,
    now: i64,
) -> Result<i64> {
    if let Some(next) = position(conn, stream, consumer)? {
        return Ok(next);
    }
    let next = resolve(conn, stream, start)?;
    conn.prepare_cached(statements::START)?
        .execute(params![stream, consumer, next, now])?;
    Ok(position(conn, stream, consumer)?.unwrap_or(next))
}

/// The next offset to read that `start` names now (a consumer's or a
/// group's first place). An offset below the first retained event is
/// `TRIMMED`.
pub(crate) fn resolve(conn: Conn<'_>, stream: &str, start: super::Start) -> Result<i64> {
    let last = last_offset(conn, stream)?;
    let first = first_offset(conn, stream)?;
    Ok(match start {
        super::Start::Beginning => first.unwrap_or(last + 1),
        super::Start::Latest => last + 1,
        super::Start::Offset(n) => {
            check_next(conn, stream, n)?;
            let retained = first.unwrap_or(last + 1);
            if n < retained {
                return Err(Error::trimmed(
                    &format!("stream {stream:?} from offset {n}"),
                    (retained - n) as u64,
                    retained,
                ));
            }
            n
        }
        super::Start::Time(t) => conn
            .prepare_cached(statements::FIRST_AT)?
            .query_row(params![stream, t], |r| r.get::<i64>(0))?
            .unwrap_or(last + 1),
    })
}
