//! Every SQL statement the channels run, by name. `EXPLAIN QUERY PLAN` tests
//! pin them to their keys.

/// ?1 channel, ?2 now. The channel's row, made on its first notify.
pub const ENSURE_CHANNEL: &str = "
INSERT INTO _honker_channels (name, last_seq, created_at) VALUES (?1, 0, ?2)
ON CONFLICT (name) DO NOTHING";

/// ?1 channel. Takes the next sequence number, inside the notifying write
/// transaction (dense per channel, in commit order).
pub const ADVANCE: &str = "
UPDATE _honker_channels SET last_seq = last_seq + 1 WHERE name = ?1 RETURNING last_seq";

/// ?1 channel, ?2 seq, ?3 payload, ?4 created_at.
pub const INSERT: &str = "
INSERT INTO _honker_channel_messages (channel, seq, payload, created_at)
VALUES (?1, ?2, ?3, ?4)";

/// ?1 channel, ?2 after id, ?3 limit. Messages after ?2, in commit order.
pub const READ_AFTER: &str = "
SELECT id, seq, payload, created_at FROM _honker_channel_messages
WHERE channel = ?1 AND id > ?2 ORDER BY id LIMIT ?3";

/// ?1 channel. In one snapshot: the last sequence number and the newest
/// message's id (where a new listener starts).
pub const HEAD: &str = "
SELECT c.last_seq,
       (SELECT max(m.id) FROM _honker_channel_messages m WHERE m.channel = ?1)
FROM _honker_channels c WHERE c.name = ?1";

/// ?1 channel, ?2 after id. In one snapshot: the last sequence number, and
/// whether a message after ?2 exists.
pub const HEAD_AFTER: &str = "
SELECT c.last_seq,
       EXISTS (SELECT 1 FROM _honker_channel_messages m WHERE m.channel = ?1 AND m.id > ?2)
FROM _honker_channels c WHERE c.name = ?1";

/// ?1 channel, ?2 keep from seq, ?3 cutoff time, ?4 limit. Removes up to ?4
/// of the channel's oldest messages that are outside the window (below the
/// count limit's seq, or older than the cutoff).
pub const TRIM: &str = "
DELETE FROM _honker_channel_messages WHERE id IN (
    SELECT id FROM _honker_channel_messages WHERE channel = ?1 ORDER BY id LIMIT ?4)
AND (seq < ?2 OR created_at < ?3)";

/// Every channel's name.
pub const NAMES: &str = "SELECT name FROM _honker_channels ORDER BY name";
