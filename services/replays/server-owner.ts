import type { Client } from "@connectrpc/connect";
import { ServerLifecycle, type ServerLookupService } from "../../gen/replay/servers/v1/lookup_pb.js";
import type { ServerState } from "./store.js";

export type OwnedServer = { tenantId: string; state: ServerState };

/** Undefined when unknown, cancelled or purged. */
export type LookupServer = (serverId: string, signal?: AbortSignal) => Promise<OwnedServer | undefined>;

const states: Partial<Record<ServerLifecycle, ServerState>> = {
  [ServerLifecycle.PENDING]: "pending",
  [ServerLifecycle.CONNECTED]: "connected",
  [ServerLifecycle.DEAUTHORISED]: "deauthorised",
};

/** What the projection may not have learnt yet, such as a check-in a moment ago. */
export function serverOwner(client: Client<typeof ServerLookupService>): LookupServer {
  return async (serverId, signal) => {
    const answer = await client.lookupServer({ serverId }, { signal });
    const state = states[answer.lifecycle];
    return answer.found && state ? { tenantId: answer.tenantId, state } : undefined;
  };
}
