import { WEBHOOK_EVENTS } from "../../lib/vocabulary.js";
import { provisionTenant } from "../http.js";
import { adminClient, type SystemHandle } from "../system.js";
import type { Api, Tenant } from "./api.js";
import type { Model } from "./model.js";
import type { SoakReceiver } from "./receiver.js";
import type { Rng } from "./rng.js";

/** Subscriptions a tenant may hold; together they cover every event the replays service emits. */
const subscriptionSets: string[][] = [
  [...WEBHOOK_EVENTS],
  ["collection.finalized", "collection.released", "collection.revoked"],
  ["asset.processing", "asset.ready", "asset.failed"],
];

/**
 * The soak's tenants, made before any fault: each with a generous plan (the soak looks for drift,
 * not for limits) and 2 or 3 webhook subscriptions to the receiver.
 */
export async function setUpTenants(deps: {
  internalUrl: string;
  api: Api;
  receiver: SoakReceiver;
  model: Model;
  rng: Rng;
  count: number;
}): Promise<Tenant[]> {
  // provisionTenant needs only the admin client of a system handle.
  const sys = { admin: adminClient(deps.internalUrl) } as unknown as SystemHandle;
  const tenants: Tenant[] = [];
  for (let i = 0; i < deps.count; i++) {
    const t = await provisionTenant(sys, {
      rateLimitRps: 5000,
      rateLimitBurst: 5000,
      serverLimit: 100_000n,
      storageQuotaBytes: 1n << 40n,
    });
    const tenant: Tenant = { tenantId: t.tenantId, bearer: t.bearer(), signer: t.signer };
    tenants.push(tenant);
    const sets = deps.rng.chance(0.5) ? subscriptionSets : subscriptionSets.slice(0, 2);
    for (const events of sets) {
      const { path, url } = deps.receiver.newSubscriptionUrl();
      const res = await deps.api.createSubscription(tenant, url, events);
      if (res.value?.status !== 201) throw new Error(`subscription not created: ${res.value?.text}`);
      deps.model.subscriptions.push({ tenantId: tenant.tenantId, id: res.value.body.id, path, events });
    }
  }
  return tenants;
}
