import type { Client } from "@connectrpc/connect";
import { ServerLifecycle, type ServerLookupService } from "../../gen/replay/servers/v1/lookup_pb.js";
import type { ServerState } from "./store.js";

/** A server as its owner, the servers service, knows it now. */
export type OwnedServer = { tenantId: string; state: ServerState };

/** Looks a server up at its owner; undefined when it has none (unknown, cancelled or purged). */
export type LookupServer = (serverId: string, signal?: AbortSignal) => Promise<OwnedServer | undefined>;

const states: Partial<Record<ServerLifecycle, ServerState>> = {
  [ServerLifecycle.PENDING]: "pending",
  [ServerLifecycle.CONNECTED]: "connected",
  [ServerLifecycle.DEAUTHORISED]: "deauthorised",
};

/**
 * The servers service's answer for a server: what this service's projection of servers (fed by
 * servers.server.* events) may not have learnt yet, such as a check-in a moment ago (the client
 * comes from lib/rpc/peers.ts: its deadline, and SERVICE_UNAVAILABLE when it fails).
 */
export function serverOwner(client: Client<typeof ServerLookupService>): LookupServer {
  return async (serverId, signal) => {
    const answer = await client.lookupServer({ serverId }, { signal });
    const state = states[answer.lifecycle];
    return answer.found && state ? { tenantId: answer.tenantId, state } : undefined;
  };
}
