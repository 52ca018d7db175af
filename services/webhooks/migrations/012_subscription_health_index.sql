-- The subscriptions an alert watches (replay_webhook_subscriptions: failing, disabled), counted at
-- every scrape off this index instead of a scan of every subscription.
CREATE INDEX subscription_unhealthy_idx ON webhooks.subscription (disabled)
  WHERE disabled OR failing_since IS NOT NULL;
