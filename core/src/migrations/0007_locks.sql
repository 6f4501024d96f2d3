-- honker schema 7: named locks with fencing tokens (ADR 22).
--
-- One row per held name (removed at release, and by maintenance once its
-- TTL lapsed). Tokens come from one counter for the whole file, advanced in
-- the granting transaction: every grant's token is greater than every
-- earlier grant's, for any name, across releases, lapses, restarts and
-- VACUUM, so a lock's row can be deleted without its next token ever going
-- back. Honker's `_honker_locks` is not touched (the importer moves it).

CREATE TABLE main._honker_lock_holders (
    name        TEXT    PRIMARY KEY,
    owner       TEXT    NOT NULL,
    token       INTEGER NOT NULL,
    acquired_at INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

-- No index on expires_at: every grant and renewal would update it (a second
-- b-tree, a sixth of an acquire + release). Maintenance walks the holders
-- by name in batches instead; there is one row per lock held (or lapsed and
-- not yet taken).

CREATE TABLE main._honker_lock_tokens (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    last INTEGER NOT NULL
) STRICT;

INSERT INTO main._honker_lock_tokens (id, last) VALUES (1, 0);
