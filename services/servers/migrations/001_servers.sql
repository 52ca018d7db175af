-- Servers, pending setups and categories (decisions.md §4), and the projection of tenant plans.

-- Projection of identity.tenant.upserted: the plan's server limit, newest version wins.
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

-- One row per server setup, pending or connected or deauthorised; a purge deletes the row.
CREATE TABLE servers.server (
  server_id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL,
  name text NOT NULL,
  category_id uuid REFERENCES servers.category (category_id),
  state text NOT NULL CHECK (state IN ('pending', 'connected', 'deauthorised')),
  source_server_id uuid,
  plugin_version text,
  last_seen_at timestamptz,
  replay_count bigint NOT NULL DEFAULT 0 CHECK (replay_count >= 0),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
-- The list order (name, then id) and the per-tenant slot count.
CREATE INDEX server_tenant_name_idx ON servers.server (tenant_id, name, server_id);
CREATE INDEX server_tenant_state_idx ON servers.server (tenant_id, state);
