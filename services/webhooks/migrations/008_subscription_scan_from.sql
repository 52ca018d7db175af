-- Where a claim starts reading a subscription's deliveries (queue-store.ts): a lower bound of the
-- due time of every pending delivery it has, leased or not. Without it each claim read the
-- subscription's index range from its start, past the entries of every delivery sent since the
-- table's last vacuum (10 subscriptions with 5 000 sent each: 100 000 buffers a claim; under a held
-- snapshot none of them can be marked dead, and it only grows). Kept as due_at is: brought forward
-- by every write that makes a delivery due, moved on only by a claim's refresh, from a snapshot
-- taken after the row's lock. '-infinity' bounds anything.
ALTER TABLE webhooks.subscription_due ADD COLUMN scan_from timestamptz NOT NULL DEFAULT '-infinity';
