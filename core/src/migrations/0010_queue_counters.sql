-- honker schema 10: cumulative counters per queue (ADR 27).
--
-- One row per (queue, event) and, for claims, per latency bucket: how many
-- times it happened and (claims) the latencies' sum in ms, by every surface
-- (a Database writes its counts up to a second after they commit, the SQL
-- extension in the transaction itself: queue/metrics.rs); nothing grows per
-- job. Counting starts when the file reaches this version.

CREATE TABLE main._honker_queue_counters (
    queue  TEXT    NOT NULL,
    event  TEXT    NOT NULL,
    bucket INTEGER NOT NULL,   -- claims: the latency bucket; 0 otherwise
    n      INTEGER NOT NULL,
    sum_ms INTEGER NOT NULL,   -- claims: the latencies' sum; 0 otherwise
    PRIMARY KEY (queue, event, bucket)
) STRICT, WITHOUT ROWID;
