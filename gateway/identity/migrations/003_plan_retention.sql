-- The plan's retention: how many days a replay is kept after its recording started
-- (its retention_until) and how many of them a finished replay stays in the hot tier. Existing
-- tenants get what every replay had before: 90 days, 30 of them hot.
ALTER TABLE identity.tenant
  ADD COLUMN retention_days integer NOT NULL DEFAULT 90 CHECK (retention_days BETWEEN 1 AND 3650),
  ADD COLUMN hot_days integer NOT NULL DEFAULT 30 CHECK (hot_days >= 0),
  ADD CONSTRAINT tenant_hot_within_retention CHECK (hot_days <= retention_days);
