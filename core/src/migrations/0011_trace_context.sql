-- honker schema 11: W3C trace context beside jobs and stream events (ADR 28).
--
-- The producer's trace context, as the JSON object of the W3C headers
-- ({"traceparent": "00-…", "tracestate": "…"}), in its own column: never
-- inside the payload. NULL when the producer had none. A finished job keeps
-- it (a dead letter requeued later still continues its trace).
ALTER TABLE main._honker_jobs ADD COLUMN trace_context TEXT;
ALTER TABLE main._honker_finished ADD COLUMN trace_context TEXT;
ALTER TABLE main._honker_stream_events ADD COLUMN trace_context TEXT;
