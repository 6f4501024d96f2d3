-- honker schema 8: rate limits (GCRA, ADR 23).
--
-- One row per key in use: its theoretical arrival time (µs since the
-- epoch). A key whose tat is in the past is fully refilled, carries no
-- information, and is removed by maintenance, which walks the keys in
-- batches. No index on tat: every allowed check updates it, and a second
-- b-tree to update cost a third of a check.
-- A limiter's parameters are settings rows (scope 'rate_limit'), so every
-- process and language checks against the same limit. Honker's
-- `_honker_rate_limits` (a row per fixed window) is not touched.

CREATE TABLE main._honker_rate_limit_keys (
    name   TEXT    NOT NULL,
    key    TEXT    NOT NULL,
    tat_us INTEGER NOT NULL,
    PRIMARY KEY (name, key)
) STRICT, WITHOUT ROWID;
