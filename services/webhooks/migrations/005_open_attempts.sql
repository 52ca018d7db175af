-- An attempt is logged before its request is sent (every POST sent is in the log): its
-- row is opened when the delivery is claimed (or leased by its fan-out), with no duration yet, and
-- closed with the outcome when the attempt ends. A row left open by a sender that stopped (killed,
-- or its request cut short at shutdown) is closed by the next claim of its delivery, as a failed
-- attempt whose answer is unknown. The delivery log lists closed attempts only.
ALTER TABLE webhooks.attempt ALTER COLUMN duration_ms DROP NOT NULL;
-- Each attempt row is written twice (opened, then closed): room on its page lets the second write
-- be a heap-only update, with no new index entry.
ALTER TABLE webhooks.attempt SET (fillfactor = 60);
