-- The trace of the event a delivery carries (the hop that fanned it out, lib/trace.ts): each
-- attempt runs as a hop of it, so a delivery's log lines share the trace id of the request that
-- caused the event.
ALTER TABLE webhooks.delivery ADD COLUMN traceparent text;
