//! Every SQL statement the consumer groups run, by name. `EXPLAIN QUERY
//! PLAN` tests (`tests/query_plans.rs`) pin the hot ones to their indexes.

/// ?1 stream, ?2 group, ?3 next offset, ?4 max_deliveries, ?5 lease_ms,
/// ?6 member_idle_ms, ?7 now. Makes the group; an existing one keeps its
/// position and takes the new options.
pub const CREATE: &str = "
INSERT INTO _honker_stream_groups
    (stream, grp, next_offset, max_deliveries, lease_ms, member_idle_ms, created_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
ON CONFLICT (stream, grp) DO UPDATE
SET max_deliveries = excluded.max_deliveries, lease_ms = excluded.lease_ms,
    member_idle_ms = excluded.member_idle_ms";

/// ?1 stream, ?2 group. Its cursor and options.
pub const GET: &str = "
SELECT next_offset, max_deliveries, lease_ms, member_idle_ms FROM _honker_stream_groups
WHERE stream = ?1 AND grp = ?2";

/// ?1 stream. Every group of the stream.
pub const OF_STREAM: &str = "
SELECT grp, next_offset FROM _honker_stream_groups WHERE stream = ?1 ORDER BY grp";

/// ?1 stream, ?2 group, ?3 next offset.
pub const ADVANCE: &str = "
UPDATE _honker_stream_groups SET next_offset = ?3 WHERE stream = ?1 AND grp = ?2";

/// ?1 stream, ?2 group. Deletes the group (its events and members follow).
pub const DROP_GROUP: &str = "DELETE FROM _honker_stream_groups WHERE stream = ?1 AND grp = ?2";

/// ?1 stream, ?2 group.
pub const DROP_EVENTS: &str = "
DELETE FROM _honker_stream_group_events WHERE stream = ?1 AND grp = ?2";

/// ?1 stream, ?2 group.
pub const DROP_MEMBERS: &str = "
DELETE FROM _honker_stream_group_members WHERE stream = ?1 AND grp = ?2";

/// ?1 stream, ?2 group, ?3 member, ?4 now. A member seen now (joined if new).
pub const TOUCH_MEMBER: &str = "
INSERT INTO _honker_stream_group_members (stream, grp, member, joined_at, seen_at)
VALUES (?1, ?2, ?3, ?4, ?4)
ON CONFLICT (stream, grp, member) DO UPDATE SET seen_at = excluded.seen_at";

/// ?1 stream, ?2 group, ?3 now, ?4 n. The claim's pick among the events
/// taken in: what may be claimed now, oldest idle first (a lapsed lease
/// since its end, a released or unblocked event since then).
pub const PICK: &str = "
SELECT offset, key, state, deliveries, member FROM _honker_stream_group_events
WHERE stream = ?1 AND grp = ?2 AND avail_at <= ?3
ORDER BY avail_at, offset LIMIT ?4";

/// ?1 stream, ?2 from offset, ?3 n. Events the group has not taken in.
pub const INCOMING: &str = "
SELECT offset, key, payload, created_at, trace_context, priority FROM _honker_stream_events
WHERE stream = ?1 AND offset >= ?2 ORDER BY offset LIMIT ?3";

/// ?1 stream, ?2 group, ?3 key. Whether the key has an unfinished event.
/// Forced (like the next): without statistics the planner would rather
/// filter the primary key's range, every event the group holds.
pub const KEY_BUSY: &str = "
SELECT 1 FROM _honker_stream_group_events INDEXED BY _honker_stream_group_events_key
WHERE stream = ?1 AND grp = ?2 AND key = ?3 AND state != 'dead' LIMIT 1";

/// ?1 stream, ?2 group, ?3 key. The key's first unfinished event and its state.
pub const KEY_HEAD: &str = "
SELECT offset, state FROM _honker_stream_group_events INDEXED BY _honker_stream_group_events_key
WHERE stream = ?1 AND grp = ?2 AND key = ?3 AND state != 'dead'
ORDER BY offset LIMIT 1";

/// ?1 stream, ?2 group, ?3 offset, ?4 key, ?5 state, ?6 deliveries,
/// ?7 member, ?8 token, ?9 avail_at, ?10 now. An event taken in.
pub const TAKE_IN: &str = "
INSERT INTO _honker_stream_group_events
    (stream, grp, offset, key, state, deliveries, member, token, avail_at, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)";

/// ?1 stream, ?2 group, ?3 offset, ?4 member, ?5 token, ?6 lease end, ?7 now.
pub const DELIVER: &str = "
UPDATE _honker_stream_group_events
SET state = 'delivered', deliveries = deliveries + 1, member = ?4, token = ?5,
    avail_at = ?6, updated_at = ?7
WHERE stream = ?1 AND grp = ?2 AND offset = ?3";

/// ?1 stream, ?2 offset. An event's payload, time, trace context and
/// priority, if retained.
pub const EVENT: &str = "
SELECT payload, created_at, trace_context, priority FROM _honker_stream_events
WHERE stream = ?1 AND offset = ?2";

/// ?1 stream, ?2 group, ?3 offset, ?4 token. A delivered event's key and
/// deliveries, if the token still holds it.
pub const HELD: &str = "
SELECT key, deliveries, member FROM _honker_stream_group_events
WHERE stream = ?1 AND grp = ?2 AND offset = ?3 AND token = ?4 AND state = 'delivered'";

/// ?1 stream, ?2 group, ?3 offset.
pub const FINISH: &str = "
DELETE FROM _honker_stream_group_events WHERE stream = ?1 AND grp = ?2 AND offset = ?3";

/// ?1 stream, ?2 group, ?3 offset, ?4 available at, ?5 deliveries to give
/// back (1: release), ?6 error (NULL keeps the last), ?7 now. Back to ready.
pub const REQUEUE: &str = "
UPDATE _honker_stream_group_events
SET state = 'ready', avail_at = ?4, deliveries = deliveries - ?5,
    last_error = coalesce(?6, last_error), member = NULL, token = NULL, updated_at = ?7
WHERE stream = ?1 AND grp = ?2 AND offset = ?3";

/// ?1 stream, ?2 group, ?3 offset, ?4 error, ?5 now. To the dead letters.
pub const BURY: &str = "
UPDATE _honker_stream_group_events
SET state = 'dead', avail_at = NULL, last_error = coalesce(?4, last_error),
    member = NULL, token = NULL, updated_at = ?5
WHERE stream = ?1 AND grp = ?2 AND offset = ?3";

/// ?1 stream, ?2 group, ?3 offset, ?4 now. A waiting event's turn.
pub const UNBLOCK: &str = "
UPDATE _honker_stream_group_events SET state = 'ready', avail_at = ?4, updated_at = ?4
WHERE stream = ?1 AND grp = ?2 AND offset = ?3 AND state = 'waiting'";

/// ?1 stream, ?2 group, ?3 offset, ?4 token, ?5 lease end, ?6 now.
pub const HEARTBEAT: &str = "
UPDATE _honker_stream_group_events SET avail_at = ?5, updated_at = ?6
WHERE stream = ?1 AND grp = ?2 AND offset = ?3 AND token = ?4 AND state = 'delivered'";

/// ?1 stream, ?2 group, ?3 member. How many events the member holds.
pub const HOLDS: &str = "
SELECT count(*) FROM _honker_stream_group_events
WHERE stream = ?1 AND grp = ?2 AND member = ?3";

/// ?1 stream, ?2 group, ?3 member, ?4 now. A removed member's events,
/// claimable at once (their deliveries counted). Forced: it sets the
/// column it seeks by, and the planner would rather filter the primary key.
pub const DISOWN: &str = "
UPDATE _honker_stream_group_events INDEXED BY _honker_stream_group_events_member
SET state = 'ready', avail_at = ?4, member = NULL, token = NULL, updated_at = ?4,
    last_error = 'member ' || ?3 || ' removed'
WHERE stream = ?1 AND grp = ?2 AND member = ?3";

/// ?1 stream, ?2 group, ?3 member.
pub const REMOVE_MEMBER: &str = "
DELETE FROM _honker_stream_group_members WHERE stream = ?1 AND grp = ?2 AND member = ?3";

/// ?1 stream, ?2 group. Every member, its last sign of life and what it holds.
pub const MEMBERS: &str = "
SELECT m.member, m.joined_at, m.seen_at,
       (SELECT count(*) FROM _honker_stream_group_events e
        WHERE e.stream = m.stream AND e.grp = m.grp AND e.member = m.member)
FROM _honker_stream_group_members m
WHERE m.stream = ?1 AND m.grp = ?2 ORDER BY m.member";

/// ?1 cutoff is per group: members idle since before their group's
/// `member_idle_ms` and holding nothing, up to ?2 (maintenance).
pub const IDLE_MEMBERS: &str = "
SELECT m.stream, m.grp, m.member FROM _honker_stream_group_members m
JOIN _honker_stream_groups g ON g.stream = m.stream AND g.grp = m.grp
WHERE m.seen_at < ?1 - g.member_idle_ms
  AND NOT EXISTS (SELECT 1 FROM _honker_stream_group_events e
                  WHERE e.stream = m.stream AND e.grp = m.grp AND e.member = m.member)
LIMIT ?2";

/// ?1 stream, ?2 group, ?3 after offset, ?4 limit. Dead letters in order
/// (forced: the primary key's range would walk every pending event).
pub const DEAD: &str = "
SELECT e.offset, e.key, e.deliveries, e.last_error, e.updated_at, v.payload, v.created_at
FROM _honker_stream_group_events e INDEXED BY _honker_stream_group_events_dead
JOIN _honker_stream_events v ON v.stream = e.stream AND v.offset = e.offset
WHERE e.stream = ?1 AND e.grp = ?2 AND e.state = 'dead' AND e.offset > ?3
ORDER BY e.offset LIMIT ?4";

/// ?1 stream, ?2 group, ?3 offset. A dead event's key.
pub const DEAD_KEY: &str = "
SELECT key FROM _honker_stream_group_events
WHERE stream = ?1 AND grp = ?2 AND offset = ?3 AND state = 'dead'";

/// ?1 stream, ?2 group, ?3 offset, ?4 state ('ready'|'waiting'), ?5 avail_at,
/// ?6 now. Re-drives a dead event: its deliveries start again.
pub const REDRIVE: &str = "
UPDATE _honker_stream_group_events
SET state = ?4, avail_at = ?5, deliveries = 0, updated_at = ?6
WHERE stream = ?1 AND grp = ?2 AND offset = ?3 AND state = 'dead'";

/// ?1 stream, ?2 group. Counts by state, and the oldest unfinished offset.
pub const PENDING: &str = "
SELECT count(*) FILTER (WHERE state != 'dead'),
       count(*) FILTER (WHERE state = 'delivered'),
       count(*) FILTER (WHERE state = 'dead')
FROM _honker_stream_group_events WHERE stream = ?1 AND grp = ?2";

/// ?1 stream, ?2 group. The first offset the group still holds (dead
/// letters included: retention keeps their events).
pub const FIRST_HELD: &str = "
SELECT offset FROM _honker_stream_group_events
WHERE stream = ?1 AND grp = ?2 ORDER BY offset LIMIT 1";

/// ?1 stream, ?2 group. The oldest unfinished event's publish time.
pub const OLDEST_PENDING: &str = "
SELECT v.created_at FROM _honker_stream_group_events e
JOIN _honker_stream_events v ON v.stream = e.stream AND v.offset = e.offset
WHERE e.stream = ?1 AND e.grp = ?2 AND e.state != 'dead' ORDER BY e.offset LIMIT 1";

/// ?1 stream, ?2 group, ?3 below offset. Held events whose stream events
/// were trimmed (by age), and their keys.
pub const TRIMMED_KEYS: &str = "
SELECT offset, key FROM _honker_stream_group_events
WHERE stream = ?1 AND grp = ?2 AND offset < ?3";

/// ?1 stream, ?2 group, ?3 below offset. Deletes those.
pub const TRIMMED_HELD: &str = "
DELETE FROM _honker_stream_group_events
WHERE stream = ?1 AND grp = ?2 AND offset < ?3";

/// ?1 stream, ?2 group. A waiting claim's read-only check: whether events
/// wait to be taken in, and the earliest moment an event the group holds
/// may be claimed (NULL: none). No row: no such group.
pub const PROBE: &str = "
SELECT g.next_offset <= coalesce((SELECT s.last_offset FROM _honker_streams s
                                  WHERE s.name = ?1), 0),
       (SELECT e.avail_at FROM _honker_stream_group_events e
        WHERE e.stream = ?1 AND e.grp = ?2 AND e.avail_at IS NOT NULL
        ORDER BY e.avail_at LIMIT 1)
FROM _honker_stream_groups g WHERE g.stream = ?1 AND g.grp = ?2";
