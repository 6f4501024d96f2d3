-- honker schema 12: a stream event's priority (a publish option, ADR 32).
--
-- Stored with the event and handed to its readers; reads stay in offset
-- order. 0 for every event published before (and for any publish that does
-- not give one), so the column costs an existing file nothing to add.
ALTER TABLE main._honker_stream_events ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
