import type { Client } from "@connectrpc/connect";
import {
  type PendingSetup,
  type Server,
  ServerState,
  ServerStatus,
  type ServersService,
} from "../../gen/replay/servers/v1/servers_pb.js";
import type { ErrorCode } from "../../lib/errors.js";
import { idField, isoOrNull, stringField } from "./json.js";
import { type Route, type RouteCall, readJsonObject } from "./route.js";

/** The list entry of decisions.md §4; every documented field is present, unset ones null. */
export function serverEntry(server: Server) {
  return {
    id: server.serverId,
    name: server.name,
    status: server.status === ServerStatus.ONLINE ? "online" : "offline",
    lastSeenAt: isoOrNull(server.lastSeenAt),
    pluginVersion: server.pluginVersion ?? null,
    replayCount: Number(server.replayCount),
    categoryId: server.categoryId || null,
    state: server.state === ServerState.DEAUTHORISED ? "deauthorised" : "connected",
  };
}

function pendingEntry(setup: PendingSetup) {
  return {
    serverId: setup.serverId,
    name: setup.name,
    categoryId: setup.categoryId || null,
    createdAt: isoOrNull(setup.createdAt),
    sourceServerId: setup.sourceServerId || null,
  };
}

/** What a management write can answer for the key's member (decisions.md §4), before the route's own codes. */
const memberWriteErrors = [
  "ACTOR_BINDING_REQUIRED",
  "ACTOR_REMOVED",
  "PERMISSION_DENIED",
  "TARGET_ACCESS_DENIED",
] as const satisfies readonly ErrorCode[];

/** Servers management: spec "Servers", decisions.md §4. */
export function serverRoutes(servers: Client<typeof ServersService>): Route[] {
  return [
    {
      method: "GET",
      path: "/v1/api/servers",
      auth: "api-key",
      scope: "servers:read",
      doc: {
        operationId: "listServers",
        tag: "Servers",
        summary: "List connected servers",
        description:
          "Every connected or deauthorised server of the tenant with its derived status (online: a check-in within the last 15 minutes). Pending setups are listed separately.",
        success: { status: 200, description: "The tenant's servers.", schema: "ServerList" },
        errors: [],
      },
      async handle(call) {
        const res = await servers.listServers({}, call.rpc);
        return { status: 200, body: { servers: res.servers.map(serverEntry) } };
      },
    },
    {
      method: "GET",
      path: "/v1/api/servers/pending",
      auth: "api-key",
      scope: "servers:read",
      actor: true,
      doc: {
        operationId: "listPendingSetups",
        tag: "Servers",
        summary: "List pending server setups",
        description: "Setups created but not yet connected by a recorder; each holds a plan slot.",
        success: { status: 200, description: "The tenant's pending setups.", schema: "PendingSetupList" },
        errors: [],
      },
      async handle(call) {
        const res = await servers.listPendingSetups({}, call.rpc);
        return { status: 200, body: { pending: res.pending.map(pendingEntry) } };
      },
    },
    {
      method: "POST",
      path: "/v1/api/servers",
      auth: "api-key",
      scope: "servers:write",
      actor: true,
      doc: {
        operationId: "createPendingSetup",
        tag: "Servers",
        summary: "Create a pending server setup",
        description:
          "Reserves a plan slot until a recorder connects with the returned server id or the setup is cancelled. The key's member must be able to manage servers (decisions.md §4); with one free slot and concurrent creates, exactly one succeeds.",
        requestBody: "ServerCreate",
        success: { status: 201, description: "The new setup's id and cleaned name.", schema: "PendingSetupCreated" },
        errors: [
          ...memberWriteErrors,
          "INVALID_NAME",
          "INVALID_CATEGORY_ID",
          "INVALID_SERVER_ID",
          "CATEGORY_NOT_FOUND",
          "SERVER_NOT_FOUND",
          "SERVER_LIMIT_REACHED",
        ],
      },
      async handle(call) {
        const body = readJsonObject(call);
        const malformedFields: string[] = [];
        const res = await servers.createPendingSetup(
          {
            name: stringField(body, "name", malformedFields),
            categoryId: idField(body, "categoryId", malformedFields),
            sourceServerId: idField(body, "sourceServerId", malformedFields),
            malformedFields,
          },
          call.rpc,
        );
        return { status: 201, body: { serverId: res.setup?.serverId, name: res.setup?.name } };
      },
    },
    {
      method: "PATCH",
      path: "/v1/api/servers/:id",
      auth: "api-key",
      scope: "servers:write",
      actor: true,
      doc: {
        operationId: "renameServer",
        tag: "Servers",
        summary: "Rename a server",
        pathParams: { id: "A connected or deauthorised server's id." },
        requestBody: "ServerRename",
        success: { status: 200, description: "The updated list entry.", schema: "Server" },
        errors: [...memberWriteErrors, "INVALID_NAME", "INVALID_SERVER_ID", "SERVER_NOT_FOUND"],
      },
      async handle(call) {
        const body = readJsonObject(call);
        const malformedFields: string[] = [];
        const name = stringField(body, "name", malformedFields);
        const res = await servers.renameServer({ serverId: call.params.id, name, malformedFields }, call.rpc);
        return { status: 200, body: res.server ? serverEntry(res.server) : undefined };
      },
    },
    // The three removals: each addresses one kind of record (decisions.md §4) and answers 204.
    ...(
      [
        [
          "/v1/api/servers/:id",
          (serverId, rpc) => servers.deauthoriseServer({ serverId }, rpc),
          {
            operationId: "deauthoriseServer",
            summary: "Deauthorise a connected server",
            description:
              "The server keeps its replays and refuses check-ins and new recordings; its plan slot is freed. Deauthorising it again changes nothing.",
            id: "A connected or deauthorised server's id.",
          },
        ],
        [
          "/v1/api/servers/permanent/:id",
          (serverId, rpc) => servers.purgeServer({ serverId }, rpc),
          {
            operationId: "purgeServer",
            summary: "Remove a server record permanently",
            description: "Its replays stay; the server id becomes unknown.",
            id: "A connected or deauthorised server's id.",
          },
        ],
        [
          "/v1/api/servers/pending/:id",
          (serverId, rpc) => servers.cancelPendingSetup({ serverId }, rpc),
          {
            operationId: "cancelPendingSetup",
            summary: "Cancel a pending setup",
            description: "Its reserved plan slot is released at once.",
            id: "A pending setup's server id.",
          },
        ],
      ] as const satisfies readonly (readonly [
        string,
        (serverId: string, rpc: RouteCall["rpc"]) => Promise<unknown>,
        { operationId: string; summary: string; description: string; id: string },
      ])[]
    ).map(
      ([path, remove, doc]): Route => ({
        method: "DELETE",
        path,
        auth: "api-key",
        scope: "servers:write",
        actor: true,
        doc: {
          operationId: doc.operationId,
          tag: "Servers",
          summary: doc.summary,
          description: doc.description,
          pathParams: { id: doc.id },
          success: { status: 204, description: "Done." },
          errors: [...memberWriteErrors, "INVALID_SERVER_ID", "SERVER_NOT_FOUND"],
        },
        async handle(call) {
          await remove(call.params.id as string, call.rpc);
          return { status: 204 };
        },
      }),
    ),
  ];
}
