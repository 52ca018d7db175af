import type { Consumer } from "../../lib/bus/consumer.js";
import { DEFAULT_HOT_DAYS, DEFAULT_RETENTION_DAYS } from "./recording-service.js";
import * as store from "./store.js";

/** Tenant plans (quota, retention, hot period) and servers' states, which decide whether a server may record. */
export const replaysConsumers: Consumer[] = [
  {
    durable: "replays_tenant_plans",
    handlers: {
      "identity.tenant.upserted": (tx, event) =>
        store.upsertTenantPlan(tx, {
          tenantId: event.tenantId,
          storageQuotaBytes: event.storageQuotaBytes,
          version: event.version,
          // Events from before the plan had them carry neither: the defaults every replay had then.
          retentionDays: event.retentionDays ?? DEFAULT_RETENTION_DAYS,
          hotDays: event.hotDays ?? DEFAULT_HOT_DAYS,
        }),
    },
  },
  {
    durable: "replays_servers",
    handlers: {
      "servers.server.created": (tx, event) =>
        store.upsertServerState(tx, { serverId: event.serverId, tenantId: event.tenantId, state: "pending" }),
      "servers.server.connected": (tx, event) =>
        store.upsertServerState(tx, { serverId: event.serverId, tenantId: event.tenantId, state: "connected" }),
      "servers.server.deauthorised": (tx, event) =>
        store.upsertServerState(tx, { serverId: event.serverId, tenantId: event.tenantId, state: "deauthorised" }),
      "servers.server.purged": (tx, event) => store.deleteServer(tx, event.serverId),
    },
  },
];
