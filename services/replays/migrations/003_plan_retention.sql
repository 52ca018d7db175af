-- Per-plan retention: the tenant's plan now carries its retention and hot period, in
-- days, projected from identity.tenant.upserted; a tenant whose plan has not arrived yet keeps
-- the defaults (90 and 30 days). Each replay gets both when its recording starts: retention_until
-- (as before) and hot_until, when the retention worker moves it from hot to cold. A plan change
-- applies to recordings started after it.
ALTER TABLE replays.tenant
  ADD COLUMN retention_days integer NOT NULL DEFAULT 90,
  ADD COLUMN hot_days integer NOT NULL DEFAULT 30;

ALTER TABLE replays.replay ADD COLUMN hot_until timestamptz;
-- Replays from before kept the fixed hot period of 30 days.
UPDATE replays.replay SET hot_until = started_at + interval '30 days';
ALTER TABLE replays.replay ALTER COLUMN hot_until SET NOT NULL;

-- The retention worker's cooling: finished hot replays by when they go cold.
CREATE INDEX replay_hot_until_idx ON replays.replay (hot_until)
  WHERE storage_tier = 'hot' AND status <> 'expired' AND status <> 'recording';
