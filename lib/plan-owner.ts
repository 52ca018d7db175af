import type { Client } from "@connectrpc/connect";
import type { TenantLookupService } from "../gen/replay/identity/v1/lookup_pb.js";
import { ownerUnavailable, PEER_TIMEOUT_MS } from "./rpc/peers.js";

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
 * The gateway's answer for a tenant's plan (TenantLookupService on its internal port), within
 * PEER_TIMEOUT_MS, for a service whose projection of plans has not heard of the tenant yet. A
 * failed call is SERVICE_UNAVAILABLE.
 */
export function planOwner(client: Client<typeof TenantLookupService>): LookupPlan {
  return async (tenantId, signal) => {
    const answer = await client
      .lookupTenantPlan({ tenantId }, { timeoutMs: PEER_TIMEOUT_MS, signal })
      .catch((err: unknown) => {
        throw ownerUnavailable("gateway", err);
      });
    if (!answer.found) return undefined;
    const { serverLimit, storageQuotaBytes, version, retentionDays, hotDays } = answer;
    return { serverLimit, storageQuotaBytes, version, retentionDays, hotDays };
  };
}
