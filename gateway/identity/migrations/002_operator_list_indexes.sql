-- The operator lists (replayctl tenant/key/member list) page in (created_at, id) order, per
-- tenant where they are tenant-scoped: each page is an index range scan, not a sort of the table.
-- A key's hash lookup keeps its UNIQUE index; keys had no tenant index at all before.
CREATE INDEX tenant_created_idx ON identity.tenant (created_at, tenant_id);
CREATE INDEX api_key_tenant_created_idx ON identity.api_key (tenant_id, created_at, key_id);
CREATE INDEX member_tenant_created_idx ON identity.member (tenant_id, created_at, member_id);
DROP INDEX identity.member_tenant_idx;
