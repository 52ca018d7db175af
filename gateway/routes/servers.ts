import type { Client } from "@connectrpc/connect";
import {
  type PendingSetup,
  type Server,
  ServerState,
  ServerStatus,
  type ServersService,
} from "../../gen/replay/servers/v1/servers_pb.js";
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

/** Servers management: spec "Servers", decisions.md §4. */
export function serverRoutes(servers: Client<typeof ServersService>): Route[] {
  return [
    {
      method: "GET",
      path: "/v1/api/servers",
      auth: "api-key",
      scope: "servers:read",
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
        ["/v1/api/servers/:id", (serverId, rpc) => servers.deauthoriseServer({ serverId }, rpc)],
        ["/v1/api/servers/permanent/:id", (serverId, rpc) => servers.purgeServer({ serverId }, rpc)],
        ["/v1/api/servers/pending/:id", (serverId, rpc) => servers.cancelPendingSetup({ serverId }, rpc)],
      ] as const satisfies readonly (readonly [string, (serverId: string, rpc: RouteCall["rpc"]) => Promise<unknown>])[]
    ).map(
      ([path, remove]): Route => ({
        method: "DELETE",
        path,
        auth: "api-key",
        scope: "servers:write",
        actor: true,
        async handle(call) {
          await remove(call.params.id as string, call.rpc);
          return { status: 204 };
        },
      }),
    ),
  ];
}
