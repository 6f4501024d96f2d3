-- honker schema 14: fair tenants inside one queue (issue 56 §3, ADR 36).
--
-- A queue may take its keys in turn (round-robin by `concurrency_key`)
-- and cap how fast each key's jobs start (a rate limit per key, GCRA).
--
-- `turn`: a job's place in its queue's rounds. A queue in round-robin
-- order gives a key's n-th waiting job the turn after its (n-1)-th, and
-- never one before the queue's current turn, so the ready index, which now
-- sorts by priority, then turn, then age, hands out one job of each key
-- per turn: a claim stays one seek of that index. Every other job's turn is
-- NULL, which sorts first and equal, so a queue that takes no turns keeps
-- its order (priority, then age) and its plans; the index's one more field
-- costs every queue about 1 % of instructions per job (ADR 36).
--
-- `_honker_queue_keys`: per queue (`name`) and key, the last turn given
-- (`last_turn`) and the rate limit's theoretical arrival time (`tat_us`,
-- µs). A row whose turn is behind its queue's and whose tat has passed
-- carries nothing, and maintenance removes it. Its columns are named apart
-- from the jobs' (`queue`, `turn`), so that a pick joins it unqualified.
ALTER TABLE main._honker_jobs ADD COLUMN turn INTEGER;

DROP INDEX main._honker_jobs_ready;
CREATE INDEX main._honker_jobs_ready
    ON _honker_jobs (queue, priority DESC, turn, run_at, id) WHERE state = 'ready';

CREATE TABLE main._honker_queue_keys (
    name      TEXT    NOT NULL,
    key       TEXT    NOT NULL,
    last_turn INTEGER,
    tat_us    INTEGER,
    PRIMARY KEY (name, key)
) STRICT, WITHOUT ROWID;
