-- replayctl category list pages a tenant's categories in (created_at, category_id) order.
CREATE INDEX category_tenant_created_idx ON servers.category (tenant_id, created_at, category_id);
DROP INDEX servers.category_tenant_idx;
