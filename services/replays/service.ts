import type { ServiceImpl } from "@connectrpc/connect";
import type { ReplaysService } from "../../gen/replay/replays/v1/replays_pb.js";
import { DomainError } from "../../lib/errors.js";
import { requireTenant } from "../../lib/rpc/context.js";
import { parsePageSize } from "./page.js";

/**
 * The replays read API. Until the recording lifecycle lands (its own issue) no replay can exist,
 * so a tenant's list is always its empty first page and no page token has ever been issued; the
 * other RPCs answer Unimplemented (the gateway's 501).
 */
export function createReplaysService(): Partial<ServiceImpl<typeof ReplaysService>> {
  return {
    async listReplays(req, ctx) {
      requireTenant(ctx);
      const pageSize = parsePageSize(req.pageSize);
      if (req.pageToken !== "") throw new DomainError("INVALID_PAGE_TOKEN", "page_token was not issued by this API");
      return { results: [], nextPageToken: "", pageSize };
    },
    async getStorageUsage(_req, ctx) {
      requireTenant(ctx);
      return { storageUsedBytes: 0n, storageQuotaBytes: 0n };
    },
  };
}
