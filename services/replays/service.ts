import type { ServiceImpl } from "@connectrpc/connect";
import { ReplayListRoute, type ReplaysService } from "../../gen/replay/replays/v1/replays_pb.js";
import { parseUuid } from "../../lib/ids.js";
import { pageSizeOf } from "../../lib/page/size.js";
import type { PageTokens } from "../../lib/page/token.js";
import { requireTenant } from "../../lib/rpc/context.js";

export type ReplaysDeps = { pageTokens: PageTokens };

const routeNames: Partial<Record<ReplayListRoute, string>> = {
  [ReplayListRoute.SIGNED]: "signed",
  [ReplayListRoute.API]: "api",
};

/**
 * The replays read API. Until the recording lifecycle lands (its own issue) no replay can exist,
 * so a tenant's list is always its empty first page: a page token can only have been issued for
 * another list (or forged), and is refused. The other RPCs answer Unimplemented (the gateway's 501).
 */
export function createReplaysService(deps: ReplaysDeps): Partial<ServiceImpl<typeof ReplaysService>> {
  return {
    async listReplays(req, ctx) {
      const tenantId = requireTenant(ctx);
      const pageSize = pageSizeOf(req.pageSize);
      const route = routeNames[req.route];
      if (route === undefined) throw new Error(`listReplays without a route (${req.route})`);
      const serverId =
        req.serverId === undefined ? undefined : parseUuid(req.serverId, "INVALID_SERVER_ID", "server_id");
      const binding = { tenantId, route, filters: { server_id: serverId, integration: req.integration } };
      if (req.pageToken !== "") deps.pageTokens.read(binding, req.pageToken);
      return { results: [], nextPageToken: "", pageSize };
    },
    async getStorageUsage(_req, ctx) {
      requireTenant(ctx);
      return { storageUsedBytes: 0n, storageQuotaBytes: 0n };
    },
  };
}
