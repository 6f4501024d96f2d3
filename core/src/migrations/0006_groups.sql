-- honker schema 6: consumer groups on streams (ADR 21).
--
-- A group's members share a stream: each event is handled by one of them,
-- under a lease and a token, like a job. The group takes events in from its
-- cursor (`next_offset`, the next event it has not taken in); from then until
-- it is acked, an event has a row in _honker_stream_group_events. Events with
-- the same key are handed out in offset order, one at a time: a keyed event
-- taken in while an earlier one of its key is unfinished waits ('waiting'),
-- and the ack (or the death) of the earlier one makes the next ready. Times
-- in ms.

CREATE TABLE main._honker_stream_groups (
    stream         TEXT    NOT NULL,
    grp            TEXT    NOT NULL,
    next_offset    INTEGER NOT NULL,               -- the next event to take in
    max_deliveries INTEGER NOT NULL,
    lease_ms       INTEGER NOT NULL,
    member_idle_ms INTEGER NOT NULL,
    created_at     INTEGER NOT NULL,
    PRIMARY KEY (stream, grp)
) STRICT, WITHOUT ROWID;

-- An event the group took in and has not finished. `avail_at`: when it may
-- be claimed (its lease's end while delivered; since when while ready); NULL
-- while waiting for its key, and once dead.
CREATE TABLE main._honker_stream_group_events (
    stream     TEXT    NOT NULL,
    grp        TEXT    NOT NULL,
    offset     INTEGER NOT NULL,
    key        TEXT,
    state      TEXT    NOT NULL
               CHECK (state IN ('waiting', 'ready', 'delivered', 'dead')),
    deliveries INTEGER NOT NULL,
    member     TEXT,
    token      TEXT,
    avail_at   INTEGER,
    last_error TEXT,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (stream, grp, offset)
) STRICT, WITHOUT ROWID;

-- The claim's pick: what may be claimed now, oldest idle first.
CREATE INDEX main._honker_stream_group_events_avail
    ON _honker_stream_group_events (stream, grp, avail_at, offset)
    WHERE avail_at IS NOT NULL;
-- A key's unfinished events in offset order: whether a new one must wait,
-- and which one an ack makes ready.
CREATE INDEX main._honker_stream_group_events_key
    ON _honker_stream_group_events (stream, grp, key, offset)
    WHERE key IS NOT NULL AND state != 'dead';
-- What a member holds (its removal).
CREATE INDEX main._honker_stream_group_events_member
    ON _honker_stream_group_events (stream, grp, member)
    WHERE member IS NOT NULL;
-- The dead letters, oldest first.
CREATE INDEX main._honker_stream_group_events_dead
    ON _honker_stream_group_events (stream, grp, offset)
    WHERE state = 'dead';

CREATE TABLE main._honker_stream_group_members (
    stream    TEXT    NOT NULL,
    grp       TEXT    NOT NULL,
    member    TEXT    NOT NULL,
    joined_at INTEGER NOT NULL,
    seen_at   INTEGER NOT NULL,                    -- its last claim or heartbeat
    PRIMARY KEY (stream, grp, member)
) STRICT, WITHOUT ROWID;
