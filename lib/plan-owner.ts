import type { Client } from "@connectrpc/connect";
import type { TenantLookupService } from "../gen/replay/identity/v1/lookup_pb.js";

/** A tenant's plan as its owner, the gateway, knows it now: the fields identity.tenant.upserted carries. */
export type OwnedPlan = {
  serverLimit: bigint;
  storageQuotaBytes: bigint;
  version: bigint;
  retentionDays: number;
  hotDays: number;
};

/** Looks a tenant's plan up at the gateway; undefined for a tenant it does not have. */
export type LookupPlan = (tenantId: string, signal?: AbortSignal) => Promise<OwnedPlan | undefined>;

/**
 * The gateway's answer for a tenant's plan (TenantLookupService on its internal port), for a
 * service whose projection of plans has not heard of the tenant yet (the client comes from
 * lib/rpc/peers.ts: its deadline, and SERVICE_UNAVAILABLE when it fails).
 */
export function planOwner(client: Client<typeof TenantLookupService>): LookupPlan {
  return async (tenantId, signal) => {
    const answer = await client.lookupTenantPlan({ tenantId }, { signal });
    if (!answer.found) return undefined;
    const { serverLimit, storageQuotaBytes, version, retentionDays, hotDays } = answer;
    return { serverLimit, storageQuotaBytes, version, retentionDays, hotDays };
  };
}
