-- honker schema 5: notify/listen channels (ADR 20 rule 4).
--
-- A notification is ephemeral: kept for a window (by age and by count per
-- channel) so that a listener that is briefly behind catches up, then
-- trimmed without waiting for anyone. `seq` is dense per channel (from
-- _honker_channels.last_seq, advanced in the notifying transaction), so a
-- listener behind the window knows exactly how many it missed. `id` is
-- global and never reused (AUTOINCREMENT: a fully trimmed table must not
-- hand out an id a Honker listener already passed).

CREATE TABLE main._honker_channels (
    name       TEXT    PRIMARY KEY,
    last_seq   INTEGER NOT NULL,
    created_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

CREATE TABLE main._honker_channel_messages (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    channel    TEXT    NOT NULL,
    seq        INTEGER NOT NULL,
    payload    ANY     NOT NULL,                    -- JSON text, or a BLOB
    created_at INTEGER NOT NULL
) STRICT;

-- A listener reads one channel after an id; trimming walks a channel's
-- oldest messages.
CREATE INDEX main._honker_channel_messages_channel
    ON _honker_channel_messages (channel, id);

-- Honker's listeners read _honker_notifications (id, channel, payload)
-- directly: this read-only view shows honker's messages in Honker's columns
-- (created_at in whole unix seconds). IF NOT EXISTS: a file that still holds
-- Honker's own table keeps it (the importer moves it).
CREATE VIEW IF NOT EXISTS main._honker_notifications AS
SELECT id, channel, payload, created_at / 1000 AS created_at
FROM main._honker_channel_messages;
