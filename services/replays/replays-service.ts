import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import {
  Quality,
  type Replay,
  ReplayListRoute,
  ReplayStatus,
  type ReplaysService,
  StorageTier,
  Visibility,
} from "../../gen/replay/replays/v1/replays_pb.js";
import { buildEvent } from "../../lib/bus/events.js";
import type { Db } from "../../lib/db/types.js";
import { DomainError } from "../../lib/errors.js";
import { isUuid, parseUuid, parseUuidV4 } from "../../lib/ids.js";
import { pageSizeOf } from "../../lib/page/size.js";
import { isPositionTimestamp, type PageTokens } from "../../lib/page/token.js";
import { requireTenant, traceOf } from "../../lib/rpc/context.js";
import * as archive from "./archive-store.js";
import * as store from "./store.js";

export type ReplaysDeps = { db: Db; pageTokens: PageTokens };

const routeNames: Partial<Record<ReplayListRoute, string>> = {
  [ReplayListRoute.SIGNED]: "signed",
  [ReplayListRoute.API]: "api",
};

const qualities = { standard: Quality.STANDARD, hd: Quality.HD } as const;
const tiers = { hot: StorageTier.HOT, cold: StorageTier.COLD } as const;
const visibilities = { staff: Visibility.STAFF, public: Visibility.PUBLIC } as const;
const statuses = {
  recording: ReplayStatus.RECORDING,
  processing: ReplayStatus.PROCESSING,
  ready: ReplayStatus.READY,
  failed: ReplayStatus.FAILED,
  expired: ReplayStatus.EXPIRED,
} as const;

const optionalBigInt = (value: string | number | null) => (value === null ? undefined : BigInt(value));

function toReplayMessage(row: store.ReplayRow): Omit<Replay, "$typeName"> {
  return {
    replayId: row.replay_id,
    serverId: row.server_id,
    integration: row.integration,
    quality: qualities[row.quality],
    startedAt: timestampFromDate(row.started_at),
    endedAt: row.ended_at ? timestampFromDate(row.ended_at) : undefined,
    durationMs: optionalBigInt(row.duration_ms),
    sizeBytes: optionalBigInt(row.size_bytes),
    formatVersion: row.format_version ?? undefined,
    storageTier: tiers[row.storage_tier],
    retentionUntil: timestampFromDate(row.retention_until),
    visibility: visibilities[row.visibility],
    status: statuses[row.status],
  };
}

/** A position this service issued: the MAC vouches for it, the shape check guards the SQL anyway. */
function isPosition(value: unknown): value is store.ReplayPosition {
  const p = value as store.ReplayPosition | null;
  return typeof p === "object" && p !== null && isPositionTimestamp(p.startedAt) && isUuid(p.replayId);
}

/** decisions.md §5: a replay "still holds an archive" until it expires; a recording has no size yet. */
function heldBytes(row: store.ReplayRow): bigint {
  if (row.status === "expired" && row.archive_key === null) return 0n;
  return row.size_bytes === null ? 0n : BigInt(row.size_bytes);
}

/** spec "Replays", decisions.md §5 and §7. */
export function createReplaysService(deps: ReplaysDeps): ServiceImpl<typeof ReplaysService> {
  const { db } = deps;
  return {
    async listReplays(req, ctx) {
      const tenantId = requireTenant(ctx);
      const pageSize = pageSizeOf(req.pageSize);
      const route = routeNames[req.route];
      if (route === undefined) throw new Error(`listReplays without a route (${req.route})`);
      const serverId =
        req.serverId === undefined ? undefined : parseUuid(req.serverId, "INVALID_SERVER_ID", "server_id");
      const binding = { tenantId, route, filters: { server_id: serverId, integration: req.integration } };
      let after: store.ReplayPosition | undefined;
      if (req.pageToken !== "") {
        const position = deps.pageTokens.read<unknown>(binding, req.pageToken);
        if (!isPosition(position))
          throw new DomainError("INVALID_PAGE_TOKEN", "page_token was not issued for this list");
        after = position;
      }
      const rows = await store.listReplaysByTenant(
        db,
        tenantId,
        { serverId, integration: req.integration },
        after,
        pageSize + 1,
      );
      const page = rows.slice(0, pageSize);
      const last = page.at(-1);
      const nextPageToken =
        rows.length > pageSize && last !== undefined
          ? deps.pageTokens.issue(binding, { startedAt: last.position_at, replayId: last.replay_id })
          : "";
      return { results: page.map(toReplayMessage), nextPageToken, pageSize };
    },

    async getReplay(req, ctx) {
      const tenantId = requireTenant(ctx);
      const replayId = parseUuidV4(req.replayId, "INVALID_REPLAY_ID", "id");
      const row = await store.findReplayById(db, tenantId, replayId);
      if (!row) throw notFound();
      return { replay: toReplayMessage(row) };
    },

    async deleteReplay(req, ctx) {
      const tenantId = requireTenant(ctx);
      const replayId = parseUuidV4(req.replayId, "INVALID_REPLAY_ID", "id");
      await db.transaction(
        async (tx) => {
          // Locked: a concurrent second delete finds nothing, so the events go out once.
          const row = await store.findReplayById(tx, tenantId, replayId, true);
          if (!row) throw notFound();
          await store.deleteReplay(tx, replayId);
          const freed = heldBytes(row);
          if (freed > 0n) await store.updateTenantStorageFreed(tx, tenantId, freed);
          if (row.archive_key !== null) await archive.insertBlobDeletion(tx, row.archive_key);
          await store.enqueueEvent(
            tx,
            buildEvent("replays.replay.deleted", { tenantId, replayId, serverId: row.server_id, sizeBytes: freed }),
          );
          await store.enqueueEvent(
            tx,
            buildEvent("replays.asset.deleted", {
              tenantId,
              asset: {
                id: replayId,
                replayId,
                serverId: row.server_id,
                state: "deleted",
                status: row.status,
                visibility: row.visibility,
                storageTier: row.storage_tier,
                sizeBytes: optionalBigInt(row.size_bytes),
                formatVersion: row.format_version ?? undefined,
                retentionUntil: timestampFromDate(row.retention_until),
              },
            }),
          );
        },
        { trace: traceOf(ctx) },
      );
      return {};
    },

    async getStorageUsage(_req, ctx) {
      const tenantId = requireTenant(ctx);
      // A tenant not projected yet has no replay and no known quota: 0 until the projection catches up.
      const row = await store.findTenantStorage(db, tenantId);
      return {
        storageUsedBytes: row?.storage_used_bytes ?? 0n,
        storageQuotaBytes: row?.storage_quota_bytes ?? 0n,
      };
    },
  };
}

function notFound(): DomainError {
  return new DomainError("REPLAY_NOT_FOUND", "no such replay");
}
