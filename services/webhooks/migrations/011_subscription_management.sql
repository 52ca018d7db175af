-- Managing a subscription (decisions.md §6.1): disabled by hand or for failing, a rate limit, and a
-- secret rotated with an overlap (the previous secret still signs X-FV-Signature until it expires).
-- `failing_since` is the first failed attempt since the last success: the automatic disable's clock.
ALTER TABLE webhooks.subscription
  ADD COLUMN disabled boolean NOT NULL DEFAULT false,
  ADD COLUMN disabled_reason text CHECK (disabled_reason IN ('manual', 'failing')),
  ADD COLUMN disabled_at timestamptz,
  ADD COLUMN rate_limit_per_second integer CHECK (rate_limit_per_second BETWEEN 1 AND 10000),
  ADD COLUMN previous_secret text,
  ADD COLUMN previous_secret_expires_at timestamptz,
  ADD COLUMN failing_since timestamptz;

-- Deliveries due at the same time (a recover's manual attempts, a backlog released when the
-- subscription is enabled again) go oldest first: delivery ids are time-ordered (migration 009).
CREATE INDEX delivery_due_order_idx ON webhooks.delivery
  (subscription_id, (CASE WHEN manual_queued > 0 THEN '-infinity'::timestamptz ELSE next_attempt_at END), delivery_id)
  WHERE status = 'pending';
DROP INDEX webhooks.delivery_due_idx;
ALTER INDEX webhooks.delivery_due_order_idx RENAME TO delivery_due_idx;

-- A rate-limited subscription's attempts started in the current second of the database's clock, by
-- every replica's claims: `rate_second` (unix seconds) and `rate_used` in it; `rate_granted` is what
-- the last claim took (the claim's statement reads it back).
ALTER TABLE webhooks.subscription_due
  ADD COLUMN rate_second bigint,
  ADD COLUMN rate_used integer NOT NULL DEFAULT 0,
  ADD COLUMN rate_granted integer NOT NULL DEFAULT 0;

-- Finished attempts by subscription, hour and outcome: GET /v1/webhooks/{id}/stats reads at most
-- 168 rows, whatever the log holds. Rows older than eight days are pruned with the delivery log.
CREATE TABLE webhooks.attempt_hourly (
  subscription_id uuid NOT NULL REFERENCES webhooks.subscription ON DELETE CASCADE,
  hour timestamptz NOT NULL,
  succeeded integer NOT NULL DEFAULT 0,
  failed integer NOT NULL DEFAULT 0,
  PRIMARY KEY (subscription_id, hour)
);
