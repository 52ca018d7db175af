-- The markers service's schema: timeline markers, the idempotency records of their
-- creates, and the projections of replays and servers the creates are decided against.

-- Projection of replays.recording.started / finished and replays.replay.deleted: one row per replay
-- any of them named. The flags make the three events commute: a finish seen before its start leaves
-- the replay not recording, a delete seen before its start leaves a tombstone (deleted) that no
-- later event brings back. A create locks the row: existence and the 500 cap (marker_count, kept in
-- the same transactions as the markers) are decided on it, and the delete consumer takes the same
-- lock before it removes the markers, so a create and a delete never interleave.
CREATE TABLE markers.replay (
  replay_id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL,
  server_id uuid NOT NULL,
  started_at timestamptz,
  recording boolean NOT NULL DEFAULT false,
  finished boolean NOT NULL DEFAULT false,
  deleted boolean NOT NULL DEFAULT false,
  marker_count integer NOT NULL DEFAULT 0 CHECK (marker_count >= 0 AND marker_count <= 500)
);
-- A server's recording in progress (create by server id).
CREATE INDEX replay_recording_server_idx ON markers.replay (server_id, started_at DESC) WHERE recording AND NOT deleted;

-- Projection of servers.server.*: a server only moves forward (pending, connected, deauthorised,
-- purged); a purged server's row stays as a tombstone so that a late event cannot bring it back.
CREATE TABLE markers.server (
  server_id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL,
  state text NOT NULL CHECK (state IN ('pending', 'connected', 'deauthorised', 'purged'))
);

CREATE TABLE markers.marker (
  marker_id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL,
  replay_id uuid NOT NULL,
  -- The server id the marker was created by, when it was; never returned (decisions.md §3).
  server_id uuid,
  tick bigint NOT NULL CHECK (tick >= 0 AND tick <= 9007199254740991),
  label text NOT NULL,
  category text,
  colour text,
  icon text,
  actor text,
  created_at timestamptz NOT NULL
);
-- The list order (tick, then created_at, then id) and the cascade of a replay's delete.
CREATE INDEX marker_replay_idx ON markers.marker (replay_id, tick, created_at, marker_id);

-- Idempotency-Key records (decisions.md §3): per tenant, for 24 hours, only for creates that
-- answered 201. The row is inserted first in the create's transaction, so a concurrent create with
-- the same key waits on it and then sees the committed outcome (or takes the key over when the first
-- rolled back). The marker is copied, since the first answer is returned again even after the
-- marker was deleted.
CREATE TABLE markers.idempotency (
  tenant_id uuid NOT NULL,
  idempotency_key text NOT NULL,
  fingerprint text NOT NULL,
  created_at timestamptz NOT NULL,
  marker jsonb,
  PRIMARY KEY (tenant_id, idempotency_key)
);
-- The sweeper removes expired records oldest first.
CREATE INDEX idempotency_created_idx ON markers.idempotency (created_at);
