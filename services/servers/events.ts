import type { Bus } from "../../lib/bus/bus.js";
import { decodeEvent } from "../../lib/bus/events.js";
import { handleOnce } from "../../lib/bus/inbox.js";
import type { ServersStore } from "./store.js";

/** Keeps the projection of tenant plans (identity.tenant.upserted) that plan limits are checked against. */
export async function startServersConsumers(store: ServersStore, bus: Bus): Promise<(() => Promise<void>)[]> {
  const onTenantUpserted = await bus.subscribe("servers_tenant_plans", ["identity.tenant.upserted"], async (msg) => {
    const event = decodeEvent("identity.tenant.upserted", msg.data);
    await handleOnce(store.db, "servers_tenant_plans", event.eventId, (tx) =>
      store.upsertTenantPlan(tx, {
        tenantId: event.tenantId,
        serverLimit: Number(event.serverLimit),
        version: Number(event.version),
      }),
    );
  });
  return [onTenantUpserted];
}
