-- The delivery tables' integrity kept by the statements that write them instead of by per-row
-- triggers and a second unique index (npm run bench webhooks: the database's time per delivery in
-- the fan-out and the attempt record fell by about a third, 62 -> 43 and 65 -> 44 us, pg_stat_statements).
--
-- - attempt -> delivery: an attempt is only ever inserted by the statement that updates its delivery
--   (queue-store.ts recordAttempts, a claim's takeover, a release), so the delivery exists and is
--   locked; the retention's pruning and a subscription's delete remove the attempts with their
--   deliveries (retention-store.ts, store.ts deleteSubscription). The foreign key checked each
--   insert again with a query of its own and cascaded deletes one delivery at a time.
-- - delivery -> subscription: the fan-out locks the subscriptions it writes to (FOR KEY SHARE, once
--   each, where the key checked each delivery) and a subscription's delete takes its deliveries with it.
-- - (subscription_id, event_id) unique: an event fans out once through the inbox, recorded in the
--   fan-out's own transaction (lib/bus/inbox.ts), and events older than the inbox's window are not
--   applied; the index was one of the four entries a delivery wrote at its fan-out and again at
--   each change of state that is not a heap-only update.
ALTER TABLE webhooks.attempt DROP CONSTRAINT attempt_delivery_id_fkey;
ALTER TABLE webhooks.delivery DROP CONSTRAINT delivery_subscription_id_fkey;
ALTER TABLE webhooks.delivery DROP CONSTRAINT delivery_subscription_id_event_id_key;
