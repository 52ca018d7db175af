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
import type { Route, RouteCall, RouteDoc } from "./route.js";

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

const listQuery = (route: "signed" | "api"): RouteDoc["query"] => [
  {
    name: "page_size",
    description: "1 to 100 (1 to 3 ASCII digits), default 20.",
    schema: { type: "integer", minimum: 1, maximum: 100, default: 20 },
  },
  {
    name: "page_token",
    description: `The \`next_page_token\` of the previous page; bound to the tenant, this route (${route === "signed" ? "/v1/replays" : "/v1/api/replays"}) and the filters.`,
    schema: { type: "string" },
  },
  {
    name: "server_id",
    description: "Only this server's replays (an unknown server gives an empty page).",
    schema: { type: "string", format: "uuid" },
  },
  { name: "integration", description: "Only replays of this integration (exact match).", schema: { type: "string" } },
];
const listErrors = ["INVALID_PAGE_SIZE", "INVALID_PAGE_TOKEN", "INVALID_SERVER_ID"] as const;
const listDescription = "Newest first (`started_at`, then `id`), in stable keyset pages.";
const replayId = { id: "The replay's id (a UUID v4)." };
const getDoc = (operationId: string, summary: string): RouteDoc => ({
  operationId,
  tag: "Replays",
  summary,
  pathParams: replayId,
  success: { status: 200, description: "The replay's metadata.", schema: "ReplayMetadata" },
  errors: ["INVALID_REPLAY_ID", "REPLAY_NOT_FOUND"],
});

/** Replays: spec "Replays", decisions.md §5. */
export function replayRoutes(replays: Client<typeof ReplaysService>): Route[] {
  return [
    {
      method: "GET",
      path: "/v1/replays",
      auth: "signature",
      doc: {
        operationId: "listReplays",
        tag: "Replays",
        summary: "List replays",
        description: listDescription,
        query: listQuery("signed"),
        success: { status: 200, description: "One page of replays.", schema: "ReplayPage" },
        errors: listErrors,
      },
      handle: listReplays(replays, ReplayListRoute.SIGNED),
    },
    {
      method: "GET",
      path: "/v1/replays/:id",
      auth: "signature",
      doc: getDoc("getReplay", "Get a replay"),
      handle: getReplay(replays),
    },
    {
      method: "DELETE",
      path: "/v1/replays/:id",
      auth: "signature",
      doc: {
        operationId: "deleteReplay",
        tag: "Replays",
        summary: "Delete a replay permanently",
        description:
          "The archive, the metadata and every marker of the replay are removed for good, its storage is freed against the plan quota at once, and `asset.deleted` is sent to webhook subscriptions.",
        pathParams: replayId,
        success: { status: 204, description: "The replay is gone." },
        errors: ["INVALID_REPLAY_ID", "REPLAY_NOT_FOUND"],
      },
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
      doc: {
        operationId: "listReplaysWithKey",
        tag: "Replays",
        summary: "List replays (API key)",
        description: `${listDescription} The same list as GET /v1/replays, for API keys.`,
        query: listQuery("api"),
        success: { status: 200, description: "One page of replays.", schema: "ReplayPage" },
        errors: listErrors,
      },
      handle: listReplays(replays, ReplayListRoute.API),
    },
    {
      method: "GET",
      path: "/v1/api/replays/:id",
      auth: "api-key",
      scope: "replays:read",
      doc: getDoc("getReplayWithKey", "Get a replay (API key)"),
      handle: getReplay(replays),
    },
  ];
}
