import type { Consumer } from "../../lib/bus/consumer.js";
import * as store from "./store.js";

/**
 * The servers service's projections: tenant plans (identity.tenant.upserted), against which plan
 * limits are checked, and the replays of each server (replays.recording.started,
 * replays.replay.deleted), from which replayCount is derived. The consumer runner applies each
 * event once (inbox) in the transaction that records it.
 */
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
