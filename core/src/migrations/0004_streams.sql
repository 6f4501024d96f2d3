-- honker schema 4: durable streams with independent consumers (ADR 20), and
-- the settings table every process reads (ADR 15 rule 6).
--
-- Offsets are per stream, dense and gap-free from 1: _honker_streams holds
-- each stream's last offset, advanced in the publishing transaction. A
-- consumer's offset is the next event it reads (Kafka's rule). Times in ms.

CREATE TABLE main._honker_streams (
    name        TEXT    PRIMARY KEY,
    last_offset INTEGER NOT NULL,
    created_at  INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

-- A rowid table: payloads are up to the payload limit, and a WITHOUT ROWID
-- table would keep whole rows in its b-tree.
CREATE TABLE main._honker_stream_events (
    id         INTEGER PRIMARY KEY,
    stream     TEXT    NOT NULL,
    offset     INTEGER NOT NULL,
    key        TEXT,
    payload    ANY     NOT NULL,                    -- JSON text, or a BLOB
    created_at INTEGER NOT NULL
) STRICT;

CREATE UNIQUE INDEX main._honker_stream_events_offset
    ON _honker_stream_events (stream, offset);
-- Start positions by time, and retention by age.
CREATE INDEX main._honker_stream_events_time
    ON _honker_stream_events (stream, created_at);

CREATE TABLE main._honker_stream_offsets (
    stream      TEXT    NOT NULL,
    consumer    TEXT    NOT NULL,
    next_offset INTEGER NOT NULL,                   -- the next event to read
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (stream, consumer)
) STRICT, WITHOUT ROWID;

-- The idempotency window: a retried publish with the same key gets its
-- original offset back.
CREATE TABLE main._honker_stream_publish_keys (
    stream     TEXT    NOT NULL,
    key        TEXT    NOT NULL,
    offset     INTEGER NOT NULL,
    digest     INTEGER NOT NULL,                    -- of the payload (FNV-1a 64)
    created_at INTEGER NOT NULL,
    PRIMARY KEY (stream, key)
) STRICT, WITHOUT ROWID;

CREATE INDEX main._honker_stream_publish_keys_age
    ON _honker_stream_publish_keys (created_at);

CREATE TABLE main._honker_settings (
    scope      TEXT    NOT NULL,
    name       TEXT    NOT NULL,
    key        TEXT    NOT NULL,
    value      ANY,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (scope, name, key)
) STRICT, WITHOUT ROWID;
