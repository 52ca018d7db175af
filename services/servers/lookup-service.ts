import type { ServiceImpl } from "@connectrpc/connect";
import { ServerLifecycle, type ServerLookupService } from "../../gen/replay/servers/v1/lookup_pb.js";
import type { Db } from "../../lib/db/types.js";
import { parseUuid } from "../../lib/ids.js";
import * as store from "./store.js";

const lifecycles = {
  pending: ServerLifecycle.PENDING,
  connected: ServerLifecycle.CONNECTED,
  deauthorised: ServerLifecycle.DEAUTHORISED,
} as const;

/** For services whose projections may not have caught up yet; a purged or cancelled server is not found. */
export function createServerLookupService(deps: { db: Db }): ServiceImpl<typeof ServerLookupService> {
  return {
    async lookupServer(req) {
      const serverId = parseUuid(req.serverId, "INVALID_SERVER_ID", "server_id");
      const server = await store.findServerState(deps.db, serverId);
      if (!server) return { found: false };
      return { found: true, tenantId: server.tenant_id, lifecycle: lifecycles[server.state] };
    },
  };
}
