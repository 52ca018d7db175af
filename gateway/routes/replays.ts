import type { Client } from "@connectrpc/connect";
import {
  Quality,
  type Replay,
  ReplayListRoute,
  ReplayStatus,
  type ReplaysService,
  StorageTier,
  Visibility,
} from "../../gen/replay/replays/v1/replays_pb.js";
import { parsePageSize } from "../../lib/page/size.js";
import { isoOrNull, lastValue, parseQuery, queryId } from "./json.js";
import type { Route, RouteCall } from "./route.js";

const qualities: Record<Quality, string | null> = {
  [Quality.UNSPECIFIED]: null,
  [Quality.STANDARD]: "standard",
  [Quality.HD]: "hd",
};
const tiers: Record<StorageTier, string | null> = {
  [StorageTier.UNSPECIFIED]: null,
  [StorageTier.HOT]: "hot",
  [StorageTier.COLD]: "cold",
};
const visibilities: Record<Visibility, string | null> = {
  [Visibility.UNSPECIFIED]: null,
  [Visibility.STAFF]: "staff",
  [Visibility.PUBLIC]: "public",
};
const statuses: Record<ReplayStatus, string | null> = {
  [ReplayStatus.UNSPECIFIED]: null,
  [ReplayStatus.RECORDING]: "recording",
  [ReplayStatus.PROCESSING]: "processing",
  [ReplayStatus.READY]: "ready",
  [ReplayStatus.FAILED]: "failed",
  [ReplayStatus.EXPIRED]: "expired",
};

/** ReplayMetadata of the spec plus `status` (decisions.md §5); unset fields are null. */
export function replayMetadata(replay: Replay) {
  return {
    id: replay.replayId,
    server_id: replay.serverId,
    integration: replay.integration,
    quality: qualities[replay.quality],
    started_at: isoOrNull(replay.startedAt),
    ended_at: isoOrNull(replay.endedAt),
    duration_ms: replay.durationMs === undefined ? null : Number(replay.durationMs),
    size_bytes: replay.sizeBytes === undefined ? null : Number(replay.sizeBytes),
    storage_tier: tiers[replay.storageTier],
    retention_until: isoOrNull(replay.retentionUntil),
    visibility: visibilities[replay.visibility],
    format_version: replay.formatVersion ?? null,
    status: statuses[replay.status],
  };
}

/** Both list routes share one shape; the route is part of what a page token is bound to. */
function listReplays(replays: Client<typeof ReplaysService>, route: ReplayListRoute) {
  return async (call: RouteCall) => {
    const query = parseQuery(call.rawQuery);
    const res = await replays.listReplays(
      {
        pageSize: parsePageSize(query.get("page_size")),
        pageToken: queryId(query.get("page_token")) ?? "",
        serverId: queryId(query.get("server_id")),
        integration: lastValue(query.get("integration")),
        route,
      },
      call.rpc,
    );
    return {
      status: 200,
      body: { results: res.results.map(replayMetadata), next_page_token: res.nextPageToken, page_size: res.pageSize },
    };
  };
}

function getReplay(replays: Client<typeof ReplaysService>) {
  return async (call: RouteCall) => {
    const res = await replays.getReplay({ replayId: call.params.id }, call.rpc);
    return { status: 200, body: res.replay ? replayMetadata(res.replay) : undefined };
  };
}

/** Replays: spec "Replays", decisions.md §5. */
export function replayRoutes(replays: Client<typeof ReplaysService>): Route[] {
  return [
    { method: "GET", path: "/v1/replays", auth: "signature", handle: listReplays(replays, ReplayListRoute.SIGNED) },
    { method: "GET", path: "/v1/replays/:id", auth: "signature", handle: getReplay(replays) },
    {
      method: "DELETE",
      path: "/v1/replays/:id",
      auth: "signature",
      async handle(call) {
        await replays.deleteReplay({ replayId: call.params.id }, call.rpc);
        return { status: 204 };
      },
    },
    {
      method: "GET",
      path: "/v1/api/replays",
      auth: "api-key",
      scope: "replays:read",
      handle: listReplays(replays, ReplayListRoute.API),
    },
    { method: "GET", path: "/v1/api/replays/:id", auth: "api-key", scope: "replays:read", handle: getReplay(replays) },
  ];
}
