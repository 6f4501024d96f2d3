//! The group operations on a connection already inside a write transaction
//! (or a read, for `info` and `dead`). Names and options were validated by
//! the callers; `now` comes from their clock.
//!
//! Every outcome matches the event's offset and its lease token, and only a
//! delivered event: a late outcome from a member whose lease lapsed and was
//! reclaimed is `LEASE_LOST` and changes nothing. A lapsed lease nobody
//! reclaimed yet is still honoured (DESIGN §14).

use std::time::Duration;

use super::statements as st;
use super::{DeadEvent, GroupClaim, GroupEvent, GroupInfo, GroupOptions, MemberInfo};
use crate::clock::duration_ms;
use crate::error::{Error, Result};
use crate::payload::Payload;
use crate::raw::{params, Conn};
use crate::stream::ops as stream_ops;
use crate::stream::Start;
use crate::trace::Stored;

/// New events one claim takes in at most (beyond those it hands out):
/// events waiting behind a busy key are taken in once, in bounded steps,
/// and never walked again.
pub const INTAKE: usize = 1000;

/// A group's cursor and options.
pub(crate) struct Row {
    pub next_offset: i64,
    pub options: GroupOptions,
}

fn lost(stream: &str, group: &str, offset: i64) -> Error {
    Error::new(
        crate::ErrorKind::LeaseLost,
        format!(
            "event {offset} of stream {stream:?} is no longer yours in group {group:?} (its \
             lease lapsed and it was claimed again, or it was acked, released or removed)"
        ),
    )
}

/// A row of the claim's pick.
struct Picked {
    offset: i64,
    key: Option<String>,
    state: String,
    deliveries: i64,
    holder: Option<String>,
}

/// The group's row; `NOT_FOUND` if it was never created.
pub(crate) fn get(conn: Conn<'_>, stream: &str, group: &str) -> Result<Row> {
    conn.prepare_cached(st::GET)?
        .query_row(params![stream, group], |r| {
            Ok(Row {
                next_offset: r.get(0)?,
                options: GroupOptions {
                    max_deliveries: r.get::<i64>(1)?.clamp(1, i64::from(u32::MAX)) as u32,
                    lease: Duration::from_millis(r.get::<i64>(2)?.max(1) as u64),
                    member_idle: Duration::from_millis(r.get::<i64>(3)?.max(1) as u64),
                },
            })
        })?
        .ok_or_else(|| {
            Error::not_found(format!(
                "no group {group:?} on stream {stream:?} (create it first)"
            ))
        })
}

/// Creates the group at `start` (resolved now), or updates an existing
/// one's options (its position stays). Returns its next offset.
pub(crate) fn create(
    conn: Conn<'_>,
    stream: &str,
    group: &str,
    start: Start,
    o: &GroupOptions,
    now: i64,
) -> Result<i64> {
    let next = match get(conn, stream, group) {
        Ok(row) => row.next_offset,
        Err(e) if e.kind() == crate::ErrorKind::NotFound => {
            stream_ops::resolve(conn, stream, start)?
        }
        Err(e) => return Err(e),
    };
    conn.prepare_cached(st::CREATE)?.execute(params![
        stream,
        group,
        next,
        i64::from(o.max_deliveries),
        duration_ms(o.lease),
        duration_ms(o.member_idle),
        now
    ])?;
    Ok(next)
}

/// Deletes the group with its pending events, dead letters and members.
/// Returns whether it existed.
pub(crate) fn drop_group(conn: Conn<'_>, stream: &str, group: &str) -> Result<bool> {
    conn.prepare_cached(st::DROP_EVENTS)?
        .execute(params![stream, group])?;
    conn.prepare_cached(st::DROP_MEMBERS)?
        .execute(params![stream, group])?;
    Ok(conn
        .prepare_cached(st::DROP_GROUP)?
        .execute(params![stream, group])?
        > 0)
}

fn touch(conn: Conn<'_>, stream: &str, group: &str, member: &str, now: i64) -> Result<()> {
    conn.prepare_cached(st::TOUCH_MEMBER)?
        .execute(params![stream, group, member, now])?;
    Ok(())
}

/// The key's next event gets its turn: the first unfinished one, if it
/// waits.
fn release_key(conn: Conn<'_>, stream: &str, group: &str, key: &str, now: i64) -> Result<()> {
    let head: Option<(i64, String)> = conn
        .prepare_cached(st::KEY_HEAD)?
        .query_row(params![stream, group, key], |r| Ok((r.get(0)?, r.get(1)?)))?;
    if let Some((offset, state)) = head {
        if state == "waiting" {
            conn.prepare_cached(st::UNBLOCK)?
                .execute(params![stream, group, offset, now])?;
        }
    }
    Ok(())
}

fn bury(
    conn: Conn<'_>,
    stream: &str,
    group: &str,
    offset: i64,
    key: Option<&str>,
    error: Option<&str>,
    now: i64,
) -> Result<()> {
    conn.prepare_cached(st::BURY)?
        .execute(params![stream, group, offset, error, now])?;
    if let Some(k) = key {
        release_key(conn, stream, group, k, now)?;
    }
    Ok(())
}

fn finish(
    conn: Conn<'_>,
    stream: &str,
    group: &str,
    offset: i64,
    key: Option<&str>,
    now: i64,
) -> Result<()> {
    conn.prepare_cached(st::FINISH)?
        .execute(params![stream, group, offset])?;
    if let Some(k) = key {
        release_key(conn, stream, group, k, now)?;
    }
    Ok(())
}

/// Drops what the group held below the stream's first retained event (the
/// age limit removed those events) and moves its cursor up to it. Returns
/// how many events the group lost.
fn catch_up(conn: Conn<'_>, stream: &str, group: &str, row: &mut Row, now: i64) -> Result<u64> {
    let first = match stream_ops::first_offset(conn, stream)? {
        Some(f) => f,
        None => stream_ops::last_offset(conn, stream)? + 1,
    };
    let mut missed = 0u64;
    let held: Option<i64> = conn
        .prepare_cached(st::FIRST_HELD)?
        .query_row(params![stream, group], |r| r.get(0))?;
    if held.is_some_and(|h| h < first) {
        // Their keys' next events must not wait for them.
        let gone: Vec<(i64, Option<String>)> = conn
            .prepare_cached(st::TRIMMED_KEYS)?
            .query_map(params![stream, group, first], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })?;
        conn.prepare_cached(st::TRIMMED_HELD)?
            .execute(params![stream, group, first])?;
        for (_, key) in &gone {
            if let Some(k) = key {
                release_key(conn, stream, group, k, now)?;
            }
        }
        missed += gone.len() as u64;
    }
    if row.next_offset < first {
        missed += (first - row.next_offset) as u64;
        row.next_offset = first;
        conn.prepare_cached(st::ADVANCE)?
            .execute(params![stream, group, first])?;
    }
    Ok(missed)
}

/// Up to `n` events for `member`, leased for `lease_ms` (the group's lease
/// when `None`): first those waiting in the group (a lapsed lease, a
/// release, an event whose key came free), oldest idle first; then new
/// events from the group's cursor. An event whose last delivery lapsed
/// goes to the dead letters here.
pub(crate) fn claim(
    conn: Conn<'_>,
    stream: &str,
    group: &str,
    member: &str,
    n: usize,
    lease_ms: Option<i64>,
    now: i64,
) -> Result<GroupClaim> {
    let mut row = get(conn, stream, group)?;
    touch(conn, stream, group, member, now)?;
    let max = i64::from(row.options.max_deliveries);
    let lease_end = now.saturating_add(lease_ms.unwrap_or(duration_ms(row.options.lease)));
    let mut out = GroupClaim {
        missed: catch_up(conn, stream, group, &mut row, now)?,
        ..GroupClaim::default()
    };
    // What waits in the group.
    loop {
        let want = n - out.events.len();
        if want == 0 {
            break;
        }
        let picked: Vec<Picked> = conn.prepare_cached(st::PICK)?.query_map(
            params![stream, group, now, want as i64],
            |r| {
                Ok(Picked {
                    offset: r.get(0)?,
                    key: r.get(1)?,
                    state: r.get(2)?,
                    deliveries: r.get(3)?,
                    holder: r.get(4)?,
                })
            },
        )?;
        if picked.is_empty() {
            break;
        }
        let mut skipped = 0;
        for Picked {
            offset,
            key,
            state,
            deliveries,
            holder,
        } in picked
        {
            if deliveries >= max {
                // Its last delivery's lease lapsed (or its member was
                // removed): a poison event must not go round forever.
                let why = if state == "delivered" {
                    format!(
                        "lease expired (member {}) on delivery {deliveries} of {max}",
                        holder.as_deref().unwrap_or("?")
                    )
                } else {
                    format!("given back on delivery {deliveries} of {max}")
                };
                bury(conn, stream, group, offset, key.as_deref(), Some(&why), now)?;
                skipped += 1;
                continue;
            }
            let ev: Option<(Payload, i64, Stored, i32)> = conn
                .prepare_cached(st::EVENT)?
                .query_row(params![stream, offset], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
                })?;
            let Some((payload, created_at, trace, priority)) = ev else {
                finish(conn, stream, group, offset, key.as_deref(), now)?;
                out.missed += 1;
                skipped += 1;
                continue;
            };
            let e = delivered(
                offset,
                key,
                deliveries + 1,
                (payload, created_at, trace, priority),
                lease_end,
            );
            conn.prepare_cached(st::DELIVER)?.execute(params![
                stream, group, offset, member, e.token, lease_end, now
            ])?;
            out.events.push(e);
        }
        if skipped == 0 {
            break;
        }
    }

    // New events from the cursor.
    let mut next = row.next_offset;
    let mut visited = 0usize;
    while out.events.len() < n {
        if visited >= INTAKE + n {
            out.more = true;
            break;
        }
        let chunk = (n - out.events.len()).min(INTAKE + n - visited).max(1);
        let rows: Vec<(i64, Option<String>, Retained)> = conn
            .prepare_cached(st::INCOMING)?
            .query_map(params![stream, next, chunk as i64], |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    (r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?),
                ))
            })?;
        if rows.is_empty() {
            break;
        }
        for (offset, key, retained) in rows {
            visited += 1;
            next = offset + 1;
            let busy = match &key {
                Some(k) => conn
                    .prepare_cached(st::KEY_BUSY)?
                    .query_row(params![stream, group, k], |_| Ok(()))?
                    .is_some(),
                None => false,
            };
            if busy {
                conn.prepare_cached(st::TAKE_IN)?.execute(params![
                    stream,
                    group,
                    offset,
                    key,
                    "waiting",
                    0i64,
                    None::<String>,
                    None::<String>,
                    None::<i64>,
                    now
                ])?;
                continue;
            }
            let e = delivered(offset, key, 1, retained, lease_end);
            conn.prepare_cached(st::TAKE_IN)?.execute(params![
                stream,
                group,
                offset,
                e.key,
                "delivered",
                1i64,
                member,
                e.token,
                lease_end,
                now
            ])?;
            out.events.push(e);
        }
    }
    if next != row.next_offset {
        conn.prepare_cached(st::ADVANCE)?
            .execute(params![stream, group, next])?;
    }
    Ok(out)
}

/// What the events table keeps of a delivered event: its payload, when it
/// was published, its trace context and its priority.
type Retained = (Payload, i64, Stored, i32);

fn delivered(
    offset: i64,
    key: Option<String>,
    deliveries: i64,
    (payload, created_at, trace, priority): Retained,
    lease_end: i64,
) -> GroupEvent {
    GroupEvent {
        offset,
        key,
        payload,
        created_at,
        priority,
        deliveries: deliveries.clamp(0, i64::from(u32::MAX)) as u32,
        token: crate::raw::random_token(),
        lease_expires_at: lease_end,
        trace_context: trace.0,
    }
}

/// The delivered event's key, deliveries and member, if `token` holds it.
fn held(
    conn: Conn<'_>,
    stream: &str,
    group: &str,
    offset: i64,
    token: &str,
) -> Result<(Option<String>, i64, Option<String>)> {
    conn.prepare_cached(st::HELD)?
        .query_row(params![stream, group, offset, token], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })?
        .ok_or_else(|| lost(stream, group, offset))
}

/// Finishes a delivered event: the group is done with it, and its key's
/// next event gets its turn.
pub(crate) fn ack(
    conn: Conn<'_>,
    stream: &str,
    group: &str,
    offset: i64,
    token: &str,
    now: i64,
) -> Result<()> {
    let (key, _, _) = held(conn, stream, group, offset, token)?;
    finish(conn, stream, group, offset, key.as_deref(), now)
}

/// A failed delivery: ready again after `delay` (its key stays held), or
/// dead when it was the last one. Returns whether it died.
pub(crate) fn retry(
    conn: Conn<'_>,
    stream: &str,
    group: &str,
    (offset, token): (i64, &str),
    (delay_ms, error): (i64, Option<&str>),
    now: i64,
) -> Result<bool> {
    let row = get(conn, stream, group)?;
    let (key, deliveries, _) = held(conn, stream, group, offset, token)?;
    if deliveries >= i64::from(row.options.max_deliveries) {
        bury(conn, stream, group, offset, key.as_deref(), error, now)?;
        return Ok(true);
    }
    conn.prepare_cached(st::REQUEUE)?.execute(params![
        stream,
        group,
        offset,
        now.saturating_add(delay_ms),
        0i64,
        error,
        now
    ])?;
    Ok(false)
}

/// Sends a delivered event to the dead letters now (a failure no retry can
/// fix); its key's next event gets its turn.
pub(crate) fn fail(
    conn: Conn<'_>,
    stream: &str,
    group: &str,
    offset: i64,
    token: &str,
    error: &str,
    now: i64,
) -> Result<()> {
    let (key, _, _) = held(conn, stream, group, offset, token)?;
    bury(
        conn,
        stream,
        group,
        offset,
        key.as_deref(),
        Some(error),
        now,
    )
}

/// Gives a delivered event back, claimable at once, its delivery not
/// counted (a shutdown); its key stays held.
pub(crate) fn release(
    conn: Conn<'_>,
    stream: &str,
    group: &str,
    offset: i64,
    token: &str,
    now: i64,
) -> Result<()> {
    held(conn, stream, group, offset, token)?;
    conn.prepare_cached(st::REQUEUE)?.execute(params![
        stream,
        group,
        offset,
        now,
        1i64,
        None::<String>,
        now
    ])?;
    Ok(())
}

/// Extends a delivered event's lease to `now + extend_ms`; returns the new
/// end. The member counts as seen.
pub(crate) fn heartbeat(
    conn: Conn<'_>,
    stream: &str,
    group: &str,
    offset: i64,
    token: &str,
    extend_ms: i64,
    now: i64,
) -> Result<i64> {
    let (_, _, member) = held(conn, stream, group, offset, token)?;
    let until = now.saturating_add(extend_ms);
    conn.prepare_cached(st::HEARTBEAT)?
        .execute(params![stream, group, offset, token, until, now])?;
    if let Some(m) = member {
        touch(conn, stream, group, &m, now)?;
    }
    Ok(until)
}

/// Removes a member. One that holds events is refused unless `force`, and
/// then its events are claimable at once. Returns how many it held.
pub(crate) fn remove_member(
    conn: Conn<'_>,
    stream: &str,
    group: &str,
    member: &str,
    force: bool,
    now: i64,
) -> Result<i64> {
    get(conn, stream, group)?;
    let holds: i64 = conn
        .prepare_cached(st::HOLDS)?
        .query_one(params![stream, group, member], |r| r.get(0))?;
    if holds > 0 && !force {
        return Err(Error::invalid(format!(
            "member {member:?} of group {group:?} holds {holds} events: ack or release them, \
             or remove it with force (they become claimable at once)"
        )));
    }
    if holds > 0 {
        conn.prepare_cached(st::DISOWN)?
            .execute(params![stream, group, member, now])?;
    }
    let removed = conn
        .prepare_cached(st::REMOVE_MEMBER)?
        .execute(params![stream, group, member])?;
    if removed == 0 && holds == 0 {
        return Err(Error::not_found(format!(
            "no member {member:?} in group {group:?} of stream {stream:?}"
        )));
    }
    Ok(holds)
}

/// Up to `limit` dead letters after `after`, in offset order.
pub(crate) fn dead(
    conn: Conn<'_>,
    stream: &str,
    group: &str,
    after: i64,
    limit: usize,
) -> Result<Vec<DeadEvent>> {
    conn.prepare_cached(st::DEAD)?
        .query_map(params![stream, group, after, limit as i64], |r| {
            Ok(DeadEvent {
                offset: r.get(0)?,
                key: r.get(1)?,
                deliveries: r.get::<i64>(2)?.clamp(0, i64::from(u32::MAX)) as u32,
                last_error: r.get(3)?,
                died_at: r.get(4)?,
                payload: r.get(5)?,
                created_at: r.get(6)?,
            })
        })
}

/// Re-drives a dead event: claimable again with its deliveries from zero
/// (after its key's unfinished events, if any, as the key's next).
pub(crate) fn redrive(
    conn: Conn<'_>,
    stream: &str,
    group: &str,
    offset: i64,
    now: i64,
) -> Result<()> {
    let key: Option<Option<String>> = conn
        .prepare_cached(st::DEAD_KEY)?
        .query_row(params![stream, group, offset], |r| r.get(0))?;
    let Some(key) = key else {
        return Err(Error::not_found(format!(
            "event {offset} is not a dead letter of group {group:?} on stream {stream:?}"
        )));
    };
    let busy = match &key {
        Some(k) => conn
            .prepare_cached(st::KEY_BUSY)?
            .query_row(params![stream, group, k], |_| Ok(()))?
            .is_some(),
        None => false,
    };
    let (state, avail) = if busy {
        ("waiting", None)
    } else {
        ("ready", Some(now))
    };
    conn.prepare_cached(st::REDRIVE)?
        .execute(params![stream, group, offset, state, avail, now])?;
    Ok(())
}

/// Re-drives up to `limit` dead letters, oldest first; returns how many.
pub(crate) fn redrive_all(
    conn: Conn<'_>,
    stream: &str,
    group: &str,
    limit: usize,
    now: i64,
) -> Result<usize> {
    let offsets: Vec<i64> = dead(conn, stream, group, 0, limit)?
        .into_iter()
        .map(|d| d.offset)
        .collect();
    for &o in &offsets {
        redrive(conn, stream, group, o, now)?;
    }
    Ok(offsets.len())
}

/// The group's position, lag, pending and dead counts, and members.
pub(crate) fn info(conn: Conn<'_>, stream: &str, group: &str, now: i64) -> Result<GroupInfo> {
    let row = get(conn, stream, group)?;
    let last = stream_ops::last_offset(conn, stream)?;
    let (pending, delivered, dead): (i64, i64, i64) = conn
        .prepare_cached(st::PENDING)?
        .query_one(params![stream, group], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })?;
    let oldest: Option<i64> = conn
        .prepare_cached(st::OLDEST_PENDING)?
        .query_row(params![stream, group], |r| r.get(0))?;
    let members = conn
        .prepare_cached(st::MEMBERS)?
        .query_map(params![stream, group], |r| {
            Ok(MemberInfo {
                member: r.get(0)?,
                joined_at: r.get(1)?,
                seen_at: r.get(2)?,
                holds: r.get(3)?,
            })
        })?;
    Ok(GroupInfo {
        group: group.to_owned(),
        next_offset: row.next_offset,
        lag: (last - row.next_offset + 1).max(0) + pending,
        pending,
        delivered,
        dead,
        oldest_pending_age_ms: oldest.map(|t| (now - t).max(0)),
        members,
        options: row.options,
    })
}

/// Every group of `stream` with its cursor.
pub(crate) fn of_stream(conn: Conn<'_>, stream: &str) -> Result<Vec<(String, i64)>> {
    conn.prepare_cached(st::OF_STREAM)?
        .query_map(params![stream], |r| Ok((r.get(0)?, r.get(1)?)))
}

/// The lowest offset any group of `stream` still needs (its cursor, or an
/// event it holds, dead letters included), if it has groups.
pub(crate) fn min_needed(conn: Conn<'_>, stream: &str) -> Result<Option<i64>> {
    let mut min: Option<i64> = None;
    for (group, next) in of_stream(conn, stream)? {
        let held: Option<i64> = conn
            .prepare_cached(st::FIRST_HELD)?
            .query_row(params![stream, &group], |r| r.get(0))?;
        let m = held.map_or(next, |h| h.min(next));
        min = Some(min.map_or(m, |x: i64| x.min(m)));
    }
    Ok(min)
}

/// Removes up to `batch` members idle past their group's `member_idle`
/// that hold nothing (maintenance); returns how many.
pub(crate) fn sweep_members(conn: Conn<'_>, now: i64, batch: usize) -> Result<usize> {
    let idle: Vec<(String, String, String)> = conn
        .prepare_cached(st::IDLE_MEMBERS)?
        .query_map(params![now, batch as i64], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })?;
    for (s, g, m) in &idle {
        conn.prepare_cached(st::REMOVE_MEMBER)?
            .execute(params![s, g, m])?;
    }
    Ok(idle.len())
}

/// What a waiting claim's check found.
pub(crate) enum Probe {
    /// A claim now may hand something out.
    Claimable,
    /// Nothing before this moment (ms; `None`: until something is published
    /// or given back).
    NextAt(Option<i64>),
}

/// The read-only check a waiting claim makes on each wake-up.
pub(crate) fn probe(conn: Conn<'_>, stream: &str, group: &str, now: i64) -> Result<Probe> {
    let row: Option<(bool, Option<i64>)> = conn
        .prepare_cached(st::PROBE)?
        .query_row(params![stream, group], |r| Ok((r.get(0)?, r.get(1)?)))?;
    let Some((incoming, avail)) = row else {
        return Err(Error::not_found(format!(
            "no group {group:?} on stream {stream:?} (create it first)"
        )));
    };
    Ok(match avail {
        _ if incoming => Probe::Claimable,
        Some(t) if t <= now => Probe::Claimable,
        other => Probe::NextAt(other),
    })
}
