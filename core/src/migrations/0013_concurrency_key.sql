-- honker schema 13: a job's concurrency key (an enqueue option, ADR 35).
--
-- A queue's `max_running_per_key` caps how many jobs of one key run at
-- once, for every process. NULL (every job enqueued before, and any that
-- names no key) is no key: such a job counts against the queue's cap only.
-- A finished job keeps its key.
--
-- No index: a claim under a per-key cap counts each key's running jobs
-- from the running index, whose range it reads anyway, and an index of
-- keyed jobs cost every enqueue, claim and ack 2.5 to 3.5 % more
-- instructions, keyed or not (ADR 35).
ALTER TABLE main._honker_jobs ADD COLUMN concurrency_key TEXT;
ALTER TABLE main._honker_finished ADD COLUMN concurrency_key TEXT;
