//! Every SQL statement the streams run, by name. `EXPLAIN QUERY PLAN` tests
//! (`tests/query_plans.rs`) pin them to their keys.

/// ?1 stream, ?2 now. The stream's row, made on its first publish.
pub const ENSURE_STREAM: &str = "
INSERT INTO _honker_streams (name, last_offset, created_at) VALUES (?1, 0, ?2)
ON CONFLICT (name) DO NOTHING";

/// ?1 stream, ?2 how many offsets to take. Inside the publishing write
/// transaction: the single writer makes the offsets dense and in commit order.
pub const ADVANCE: &str = "
UPDATE _honker_streams SET last_offset = last_offset + ?2 WHERE name = ?1";

/// ?1 stream.
pub const LAST_OFFSET: &str = "SELECT last_offset FROM _honker_streams WHERE name = ?1";

/// ?1 stream, ?2 offset, ?3 key, ?4 payload, ?5 created_at, ?6 trace
/// context (JSON, or NULL), ?7 priority.
pub const INSERT_EVENT: &str = "
INSERT INTO _honker_stream_events (stream, offset, key, payload, created_at, trace_context, priority)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";

/// ?1 stream, ?2 after offset, ?3 limit. Events with offsets above ?2, in order.
pub const READ_AFTER: &str = "
SELECT offset, key, payload, created_at, trace_context, priority FROM _honker_stream_events
WHERE stream = ?1 AND offset > ?2 ORDER BY offset LIMIT ?3";

/// ?1 stream. The first retained offset, if any.
pub const FIRST_OFFSET: &str = "
SELECT offset FROM _honker_stream_events WHERE stream = ?1 ORDER BY offset LIMIT 1";

/// ?1 stream, ?2 consumer. Its next offset.
pub const GET_POSITION: &str = "
SELECT next_offset FROM _honker_stream_offsets WHERE stream = ?1 AND consumer = ?2";

/// ?1 stream, ?2 consumer, ?3 next offset, ?4 now. Moves forward only.
pub const COMMIT: &str = "
INSERT INTO _honker_stream_offsets (stream, consumer, next_offset, updated_at)
VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (stream, consumer) DO UPDATE
SET next_offset = excluded.next_offset, updated_at = excluded.updated_at
WHERE excluded.next_offset > _honker_stream_offsets.next_offset";

/// ?1 stream, ?2 consumer, ?3 next offset, ?4 now. Moves either way.
pub const SEEK: &str = "
INSERT INTO _honker_stream_offsets (stream, consumer, next_offset, updated_at)
VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (stream, consumer) DO UPDATE
SET next_offset = excluded.next_offset, updated_at = excluded.updated_at";

/// ?1 stream. Every consumer's next offset.
pub const CONSUMERS: &str = "
SELECT consumer, next_offset FROM _honker_stream_offsets WHERE stream = ?1 ORDER BY consumer";

/// ?1 stream. How many events are retained.
pub const LENGTH: &str = "SELECT count(*) FROM _honker_stream_events WHERE stream = ?1";

/// ?1 stream, ?2 key. A publish key's offset, digest and age.
pub const FIND_KEY: &str = "
SELECT offset, digest, created_at FROM _honker_stream_publish_keys
WHERE stream = ?1 AND key = ?2";

/// ?1 stream, ?2 key, ?3 offset, ?4 digest, ?5 now.
pub const SAVE_KEY: &str = "
INSERT OR REPLACE INTO _honker_stream_publish_keys (stream, key, offset, digest, created_at)
VALUES (?1, ?2, ?3, ?4, ?5)";

/// ?1 stream, ?2 time (ms). The first event published at or after it: the
/// first entry of the time index from there (ties in insertion order, which
/// is offset order). Forced: the planner would rather walk the offset index
/// and filter, which reads the whole stream for a recent time.
pub const FIRST_AT: &str = "
SELECT offset FROM _honker_stream_events INDEXED BY _honker_stream_events_time
WHERE stream = ?1 AND created_at >= ?2 ORDER BY created_at LIMIT 1";

/// ?1 stream, ?2 consumer, ?3 next offset, ?4 now. A consumer's first place;
/// a stored one wins.
pub const START: &str = "
INSERT INTO _honker_stream_offsets (stream, consumer, next_offset, updated_at)
VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (stream, consumer) DO NOTHING";

/// ?1 stream. The lowest next offset of its consumers (NULL: none).
pub const MIN_CONSUMER: &str = "
SELECT min(next_offset) FROM _honker_stream_offsets WHERE stream = ?1";

/// ?1 stream, ?2 offset. Trims the events below ?2 (the caller bounds the
/// range to one batch).
pub const TRIM_BELOW: &str = "
DELETE FROM _honker_stream_events WHERE stream = ?1 AND offset < ?2";

/// ?1 stream, ?2 offset. In one snapshot: the last offset, and the first
/// event at or above ?2 (NULL: none) — a reader with nothing to read tells
/// "nothing new" from "trimmed past me".
pub const HEAD_FROM: &str = "
SELECT s.last_offset,
       (SELECT e.offset FROM _honker_stream_events e
        WHERE e.stream = ?1 AND e.offset >= ?2 ORDER BY e.offset LIMIT 1)
FROM _honker_streams s WHERE s.name = ?1";

/// Every stream's name.
pub const NAMES: &str = "SELECT name FROM _honker_streams ORDER BY name";

/// ?1 cutoff, ?2 limit. Forgets idempotency keys older than the window.
pub const SWEEP_KEYS: &str = "
DELETE FROM _honker_stream_publish_keys WHERE (stream, key) IN (
    SELECT stream, key FROM _honker_stream_publish_keys WHERE created_at < ?1 LIMIT ?2)";
