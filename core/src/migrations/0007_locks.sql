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

-- The counter is the row named '' (no lock has that name: names are never
-- empty): its `token` is the last token granted. It lives in the holders'
-- table so that a grant writes the page its holder row is on (a table of
-- its own was a second page in every grant's commit). It never lapses.
INSERT INTO main._honker_lock_holders (name, owner, token, acquired_at, expires_at)
VALUES ('', '', 0, 0, 9223372036854775807);

-- No index on expires_at: every grant and renewal would update it (a second
-- b-tree, a sixth of an acquire + release). Maintenance walks the holders
-- by name in batches instead; there is one row per lock held (or lapsed and
-- not yet taken).
