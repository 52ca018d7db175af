-- Servers, pending setups and categories (decisions.md §4), and the projections the servers
-- service keeps of other services' data: tenant plans and replays per server.

-- Projection of identity.tenant.upserted: the plan's server limit, newest version wins. Creating a
-- setup locks the tenant's row, which serialises concurrent creates against the limit.
CREATE TABLE servers.tenant_plan (
  tenant_id uuid PRIMARY KEY,
  server_limit bigint NOT NULL,
  version bigint NOT NULL
);

CREATE TABLE servers.category (
  category_id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL,
  name text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX category_tenant_idx ON servers.category (tenant_id);

-- One row per server setup, pending, connected or deauthorised; a purge or a cancel deletes it.
CREATE TABLE servers.server (
  server_id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL,
  name text NOT NULL,
  category_id uuid REFERENCES servers.category (category_id),
  state text NOT NULL CHECK (state IN ('pending', 'connected', 'deauthorised')),
  source_server_id uuid,
  plugin_version text,
  last_seen_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
-- The list order (name, then id) and the per-tenant slot count.
CREATE INDEX server_tenant_name_idx ON servers.server (tenant_id, name, server_id);
CREATE INDEX server_tenant_state_idx ON servers.server (tenant_id, state);

-- Projection of replays.recording.started and replays.replay.deleted: which replays of a server
-- exist. A row per replay (not a counter) makes the two events commute: a delete that arrives
-- before its start still leaves the replay uncounted.
CREATE TABLE servers.replay (
  replay_id uuid PRIMARY KEY,
  server_id uuid NOT NULL,
  deleted boolean NOT NULL DEFAULT false
);
CREATE INDEX replay_server_idx ON servers.replay (server_id) WHERE NOT deleted;
