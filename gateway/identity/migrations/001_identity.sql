-- Tenants with their plan, members and their grants, API keys (hashed), signing keys, and the
-- nonces of signed requests (decisions.md §2). Owned by the gateway.
CREATE TABLE identity.tenant (
  tenant_id uuid PRIMARY KEY,
  name text NOT NULL DEFAULT '',
  server_limit bigint NOT NULL CHECK (server_limit >= 0),
  storage_quota_bytes bigint NOT NULL CHECK (storage_quota_bytes >= 0),
  rate_limit_rps integer NOT NULL CHECK (rate_limit_rps >= 1),
  rate_limit_burst integer NOT NULL CHECK (rate_limit_burst >= 1),
  -- Rises with every change; carried by identity.tenant.upserted so projections ignore stale events.
  version bigint NOT NULL DEFAULT 1,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE identity.member (
  member_id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL REFERENCES identity.tenant (tenant_id),
  role text NOT NULL CHECK (role IN ('owner', 'admin', 'member', 'viewer')),
  instance_settings boolean NOT NULL,
  -- A removed member stays, so that keys bound to it answer ACTOR_REMOVED rather than losing their binding.
  removed_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX member_tenant_idx ON identity.member (tenant_id);

CREATE TABLE identity.member_grant (
  member_id uuid NOT NULL REFERENCES identity.member (member_id),
  category_id uuid,
  server_id uuid,
  created_at timestamptz NOT NULL DEFAULT now(),
  CHECK ((category_id IS NULL) <> (server_id IS NULL))
);
CREATE UNIQUE INDEX member_grant_category_idx ON identity.member_grant (member_id, category_id) WHERE category_id IS NOT NULL;
CREATE UNIQUE INDEX member_grant_server_idx ON identity.member_grant (member_id, server_id) WHERE server_id IS NOT NULL;

CREATE TABLE identity.api_key (
  key_id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL REFERENCES identity.tenant (tenant_id),
  -- NULL for a key minted before member binding (ACTOR_BINDING_REQUIRED on servers writes).
  member_id uuid REFERENCES identity.member (member_id),
  -- SHA-256 hex of the plain key; the plain key is shown once and never stored.
  key_hash text NOT NULL UNIQUE,
  scopes text[] NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  revoked_at timestamptz
);

CREATE TABLE identity.signing_key (
  kid text PRIMARY KEY,
  tenant_id uuid NOT NULL REFERENCES identity.tenant (tenant_id),
  -- HMAC needs the secret itself to verify, so it is kept, and shown only when minted.
  secret text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  revoked_at timestamptz
);

-- A nonce is remembered until its request's ts leaves the 300 s window, after which the request
-- would be REQUEST_EXPIRED anyway; the primary key makes "first use wins" hold across replicas.
CREATE TABLE identity.nonce (
  kid text NOT NULL,
  nonce text NOT NULL,
  expires_at timestamptz NOT NULL,
  PRIMARY KEY (kid, nonce)
);
CREATE INDEX nonce_expires_idx ON identity.nonce (expires_at);
