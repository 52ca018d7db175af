import type { Bus } from "../../lib/bus/bus.js";
import { decodeEvent } from "../../lib/bus/events.js";
import { handleOnce } from "../../lib/bus/inbox.js";
import type { Db } from "../../lib/db/types.js";
import * as store from "./store.js";

/**
 * The servers service's projections: tenant plans (identity.tenant.upserted), against which plan
 * limits are checked, and the replays of each server (replays.recording.started,
 * replays.replay.deleted), from which replayCount is derived. Each event is applied once (inbox).
 */
export async function startServersConsumers(db: Db, bus: Bus): Promise<(() => Promise<void>)[]> {
  const plans = await bus.subscribe("servers_tenant_plans", ["identity.tenant.upserted"], async (msg) => {
    const event = decodeEvent("identity.tenant.upserted", msg.data);
    await handleOnce(db, "servers_tenant_plans", event.eventId, (tx) =>
      store.upsertTenantPlan(tx, {
        tenantId: event.tenantId,
        serverLimit: Number(event.serverLimit),
        version: Number(event.version),
      }),
    );
  });
  const replays = await bus.subscribe(
    "servers_replays",
    ["replays.recording.started", "replays.replay.deleted"],
    async (msg) => {
      if (msg.subject === "replays.recording.started") {
        const event = decodeEvent("replays.recording.started", msg.data);
        await handleOnce(db, "servers_replays", event.eventId, (tx) =>
          store.insertReplay(tx, event.replayId, event.serverId),
        );
      } else {
        const event = decodeEvent("replays.replay.deleted", msg.data);
        await handleOnce(db, "servers_replays", event.eventId, (tx) =>
          store.updateReplayDeleted(tx, event.replayId, event.serverId),
        );
      }
    },
  );
  return [plans, replays];
}
