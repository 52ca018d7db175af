import type { Consumer } from "../../lib/bus/consumer.js";
import * as store from "./store.js";

/** Tenant plans, for plan limits, and each server's replays, for replayCount. */
export const serversConsumers: Consumer[] = [
  {
    durable: "servers_tenant_plans",
    handlers: {
      "identity.tenant.upserted": (tx, event) =>
        store.upsertTenantPlan(tx, {
          tenantId: event.tenantId,
          serverLimit: Number(event.serverLimit),
          version: Number(event.version),
        }),
    },
  },
  {
    durable: "servers_replays",
    handlers: {
      "replays.recording.started": (tx, event) => store.insertReplay(tx, event.replayId, event.serverId),
      "replays.replay.deleted": (tx, event) => store.updateReplayDeleted(tx, event.replayId, event.serverId),
    },
  },
];
