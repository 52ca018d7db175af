import type { Client } from "@connectrpc/connect";
import type { TenantLookupService } from "../gen/replay/identity/v1/lookup_pb.js";

/** The fields identity.tenant.upserted carries. */
export type OwnedPlan = {
  serverLimit: bigint;
  storageQuotaBytes: bigint;
  version: bigint;
  retentionDays: number;
  hotDays: number;
};

/** Undefined for a tenant the gateway does not have. */
export type LookupPlan = (tenantId: string, signal?: AbortSignal) => Promise<OwnedPlan | undefined>;

/** For a service whose projection of plans has not heard of the tenant yet. */
export function planOwner(client: Client<typeof TenantLookupService>): LookupPlan {
  return async (tenantId, signal) => {
    const answer = await client.lookupTenantPlan({ tenantId }, { signal });
    if (!answer.found) return undefined;
    const { serverLimit, storageQuotaBytes, version, retentionDays, hotDays } = answer;
    return { serverLimit, storageQuotaBytes, version, retentionDays, hotDays };
  };
}
