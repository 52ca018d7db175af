import type { ServiceImpl } from "@connectrpc/connect";
import type { TenantLookupService } from "../../gen/replay/identity/v1/lookup_pb.js";
import type { Queryable } from "../../lib/db/types.js";
import { parseUuid } from "../../lib/ids.js";
import * as store from "./store.js";

/**
 * Tenants' plans as they are now, for the services whose projection of plans (fed by
 * identity.tenant.upserted) has not caught up yet: the servers service's first setup of a tenant
 * created a moment ago, the replays service's first recording of one.
 */
export function createTenantLookupService(deps: { db: Queryable }): ServiceImpl<typeof TenantLookupService> {
  return {
    async lookupTenantPlan(req) {
      const tenantId = parseUuid(req.tenantId, "INVALID_ARGUMENT", "tenant_id");
      const tenant = await store.findTenantById(deps.db, tenantId);
      if (!tenant) return { found: false };
      return {
        found: true,
        serverLimit: BigInt(tenant.server_limit),
        storageQuotaBytes: BigInt(tenant.storage_quota_bytes),
        version: BigInt(tenant.version),
        retentionDays: tenant.retention_days,
        hotDays: tenant.hot_days,
      };
    },
  };
}
