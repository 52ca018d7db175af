-- The webhooks service's schema: subscriptions, one delivery per event and subscription,
-- and every attempt of each delivery.

-- A tenant's subscriptions. The secret signs every delivery (HMAC needs it in the clear, so it is
-- kept, unlike API keys); it is returned once, by the create.
CREATE TABLE webhooks.subscription (
  subscription_id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL,
  url text NOT NULL,
  events text[] NOT NULL,
  secret text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
-- The list order, and the fan-out's lookup of a tenant's subscriptions.
CREATE INDEX subscription_tenant_idx ON webhooks.subscription (tenant_id, created_at, subscription_id);

-- One event's delivery to one subscription. `body` is the JSON exactly as every attempt sends and
-- signs it, so a manual replay sends the same bytes. The automatic schedule is `next_attempt_at`
-- (null when none is due); manual replays queue `manual_queued` attempts that run at once and leave
-- the schedule as it was. Work is claimed through leases (lib/worker/lease.ts), so replicas never
-- send one delivery twice at once and a replica that dies only delays its deliveries.
CREATE TABLE webhooks.delivery (
  delivery_id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL,
  subscription_id uuid NOT NULL REFERENCES webhooks.subscription ON DELETE CASCADE,
  event_id uuid NOT NULL,
  event text NOT NULL,
  body text NOT NULL,
  status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'succeeded', 'failed')),
  retry_count integer NOT NULL DEFAULT 0,
  attempt_count integer NOT NULL DEFAULT 0,
  automatic_attempts integer NOT NULL DEFAULT 0,
  manual_queued integer NOT NULL DEFAULT 0 CHECK (manual_queued >= 0),
  last_status_code integer,
  last_error text,
  next_attempt_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  lease_owner text,
  lease_expires_at timestamptz,
  -- An event redelivered by the bus fans out once.
  UNIQUE (subscription_id, event_id)
);
-- The delivery log: one subscription's deliveries, newest first.
CREATE INDEX delivery_log_idx ON webhooks.delivery (subscription_id, created_at DESC, delivery_id DESC);
-- What the worker claims, per subscription: deliveries with an attempt due, soonest first (a queued
-- manual attempt is due at once). The expression is store.ts's dueAt, word for word.
CREATE INDEX delivery_due_idx ON webhooks.delivery
  (subscription_id, (CASE WHEN manual_queued > 0 THEN '-infinity'::timestamptz ELSE next_attempt_at END))
  WHERE status = 'pending';
-- When the next attempt anywhere falls due, so the worker sleeps exactly until then.
CREATE INDEX delivery_next_due_idx ON webhooks.delivery
  ((CASE WHEN manual_queued > 0 THEN '-infinity'::timestamptz ELSE next_attempt_at END))
  WHERE status = 'pending';
-- Deliveries in flight, counted per subscription so one receiver cannot take every slot.
CREATE INDEX delivery_leased_idx ON webhooks.delivery (subscription_id) WHERE lease_owner IS NOT NULL;

CREATE TABLE webhooks.attempt (
  delivery_id uuid NOT NULL REFERENCES webhooks.delivery ON DELETE CASCADE,
  attempt integer NOT NULL,
  trigger text NOT NULL CHECK (trigger IN ('automatic', 'manual')),
  started_at timestamptz NOT NULL,
  duration_ms integer NOT NULL,
  status_code integer,
  error text,
  PRIMARY KEY (delivery_id, attempt)
);
