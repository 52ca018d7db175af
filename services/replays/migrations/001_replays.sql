-- The replays service's schema. Collection id = replay id (decisions.md §7): a replay row
-- is the collection, its archive the asset.

-- The tenants' plans as identity publishes them (identity.tenant.upserted, applied when `plan_version`
-- is newer), and each tenant's storage usage: the sum of size_bytes of its replays that still hold
-- an archive (decisions.md §5), kept in the transaction of every change to it.
CREATE TABLE replays.tenant (
  tenant_id uuid PRIMARY KEY,
  storage_quota_bytes bigint NOT NULL CHECK (storage_quota_bytes >= 0),
  plan_version bigint NOT NULL,
  storage_used_bytes bigint NOT NULL DEFAULT 0 CHECK (storage_used_bytes >= 0)
);

-- The servers as the servers service's events tell (created, connected, deauthorised); a purged
-- server's row is deleted, so it is unknown here as there.
CREATE TABLE replays.server (
  server_id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL,
  state text NOT NULL CHECK (state IN ('pending', 'connected', 'deauthorised'))
);

CREATE TABLE replays.replay (
  replay_id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL,
  server_id uuid NOT NULL,
  integration text NOT NULL,
  quality text NOT NULL CHECK (quality IN ('standard', 'hd')),
  -- recording -> processing (finished) -> ready | failed; expired once the reaper removed the archive.
  status text NOT NULL CHECK (status IN ('recording', 'processing', 'ready', 'failed', 'expired')),
  -- The asset pipeline of a finished recording: not started, started (asset.processing), ended.
  pipeline text NOT NULL DEFAULT 'none' CHECK (pipeline IN ('none', 'started', 'ended')),
  started_at timestamptz NOT NULL,
  ended_at timestamptz,
  duration_ms bigint CHECK (duration_ms >= 0),
  size_bytes bigint CHECK (size_bytes >= 0),
  format_version integer,
  storage_tier text NOT NULL DEFAULT 'hot' CHECK (storage_tier IN ('hot', 'cold')),
  retention_until timestamptz NOT NULL,
  visibility text NOT NULL DEFAULT 'staff' CHECK (visibility IN ('staff', 'public')),
  -- A revoked collection stays staff for good (collection release refused).
  revoked boolean NOT NULL DEFAULT false,
  -- The archive's key in the blob store, while the replay holds one.
  archive_key text,
  created_at timestamptz NOT NULL DEFAULT now(),
  CHECK (ended_at IS NULL OR ended_at >= started_at)
);

-- Every list is per tenant, newest first (started_at desc, then id desc: decisions.md §5), with
-- either filter or both: each page is an index range scan from the page token's position.
CREATE INDEX replay_tenant_started_idx ON replays.replay (tenant_id, started_at DESC, replay_id DESC);
CREATE INDEX replay_tenant_server_started_idx ON replays.replay (tenant_id, server_id, started_at DESC, replay_id DESC);
CREATE INDEX replay_tenant_integration_started_idx
  ON replays.replay (tenant_id, integration, started_at DESC, replay_id DESC);
-- At most one recording in progress per server (RECORDING_IN_PROGRESS), whatever races.
CREATE UNIQUE INDEX replay_recording_server_idx ON replays.replay (server_id) WHERE status = 'recording';
-- The retention reaper's work: finished replays by when they go cold or expire.
CREATE INDEX replay_retention_idx ON replays.replay (retention_until) WHERE status <> 'expired' AND status <> 'recording';

-- Archives to remove from the blob store: queued in the transaction that deletes or expires the
-- metadata, removed by a worker that retries until the store confirms, so a crash between the two
-- leaves no orphan for ever.
CREATE TABLE replays.blob_deletion (
  archive_key text PRIMARY KEY,
  queued_at timestamptz NOT NULL DEFAULT now(),
  attempts integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX blob_deletion_due_idx ON replays.blob_deletion (next_attempt_at);
