-- When each subscription may next have a delivery to claim: the worker's claim and its
-- next-due read start here, so their cost follows the subscriptions with work due, not every
-- subscription in the system (the claim used to probe delivery_due_idx once per subscription: 40 ms
-- a claim, idle, at 50 000 subscriptions).
--
-- `due_at` is a lower bound: no pending delivery of the subscription can be claimed before it (its
-- due time, or its lease's end while another attempt holds it). 'infinity': nothing pending. A row
-- is made by the first delivery of its subscription and goes with the subscription. Every write
-- that makes a delivery due sooner (a fan-out, an attempt that failed with a retry scheduled, a
-- manual replay) lowers `due_at` in its own transaction, holding the subscription's due lock
-- (queue-store.ts DUE_LOCK) until it commits; only the claim raises it (refreshDue), from a fresh
-- snapshot, where it could take that lock: so a raise never misses a delivery committed, or about
-- to be, by a writer, and writers never wait for one another.
CREATE TABLE webhooks.subscription_due (
  subscription_id uuid PRIMARY KEY REFERENCES webhooks.subscription ON DELETE CASCADE,
  due_at timestamptz NOT NULL
);
-- The claim reads the subscriptions due now, soonest first; the worker's sleep reads the first one
-- after now.
CREATE INDEX subscription_due_at_idx ON webhooks.subscription_due (due_at);

INSERT INTO webhooks.subscription_due (subscription_id, due_at)
SELECT subscription_id,
       COALESCE(min(CASE WHEN manual_queued > 0 THEN '-infinity'::timestamptz ELSE next_attempt_at END), 'infinity')
  FROM webhooks.delivery
 WHERE status = 'pending'
 GROUP BY subscription_id;
