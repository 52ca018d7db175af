import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import {
  type Server,
  type ServersService,
  ServerState,
  ServerStatus,
} from "../../gen/replay/servers/v1/servers_pb.js";
import { newId } from "../../lib/ids.js";
import { requireTenant } from "../../lib/rpc/context.js";
import { parseName } from "./name.js";
import { isOnline } from "./status.js";
import type { ServerRow, ServersStore } from "./store.js";

export type ServersDeps = { store: ServersStore; now: () => Date };

export function toServerMessage(row: ServerRow, now: Date): Omit<Server, "$typeName"> {
  return {
    serverId: row.server_id,
    name: row.name,
    status: isOnline(row.state, row.last_seen_at, now) ? ServerStatus.ONLINE : ServerStatus.OFFLINE,
    lastSeenAt: row.last_seen_at ? timestampFromDate(row.last_seen_at) : undefined,
    pluginVersion: row.plugin_version ?? undefined,
    replayCount: BigInt(row.replay_count),
    categoryId: row.category_id ?? "",
    state: row.state === "deauthorised" ? ServerState.DEAUTHORISED : ServerState.CONNECTED,
  };
}

/**
 * The servers management RPCs. The management writes (pending setups, rename, deauthorise, purge,
 * cancel) land with the servers issue; until then the router answers them Unimplemented, which
 * the gateway renders as 501 NOT_IMPLEMENTED.
 */
export function createServersService(deps: ServersDeps): Partial<ServiceImpl<typeof ServersService>> {
  const { store } = deps;
  return {
    async listServers(_req, ctx) {
      const tenantId = requireTenant(ctx);
      const now = deps.now();
      const rows = await store.listServersByTenant(tenantId);
      return { servers: rows.map((row) => toServerMessage(row, now)) };
    },

    async createCategory(req, ctx) {
      const tenantId = requireTenant(ctx);
      const row = await store.insertCategory({ categoryId: newId(), tenantId, name: parseName(req.name) });
      return { category: { categoryId: row.category_id, name: row.name, createdAt: timestampFromDate(row.created_at) } };
    },

    async getSlotUsage(_req, ctx) {
      const tenantId = requireTenant(ctx);
      const [used, plan] = await Promise.all([store.countSlotsByTenant(tenantId), store.findTenantPlan(tenantId)]);
      return { serversUsed: BigInt(used), serverLimit: BigInt(plan?.server_limit ?? 0) };
    },
  };
}
