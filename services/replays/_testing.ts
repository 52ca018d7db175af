import type { Queryable } from "../../lib/db/types.js";
import type { LookupPlan, OwnedPlan } from "../../lib/plan-owner.js";
import type { LookupServer, OwnedServer } from "./server-owner.js";
import * as store from "./store.js";

// A stand-in for the servers service in tests of the replays service alone: it answers a server as
// this schema's projection of servers has it (as the events the test applied say), or as the test
// says for a server it names in `answers` (undefined: the owner does not have it).

export type TestServerOwner = LookupServer & { answers: Map<string, OwnedServer | undefined> };

export function serversFromProjection(q: Queryable): TestServerOwner {
  const answers = new Map<string, OwnedServer | undefined>();
  const lookup: LookupServer = async (serverId) => {
    if (answers.has(serverId)) return answers.get(serverId);
    const row = await store.findServerById(q, serverId);
    return row ? { tenantId: row.tenant_id, state: row.state } : undefined;
  };
  return Object.assign(lookup, { answers });
}

/** A stand-in for the gateway's plan lookups: the plans a test names in `answers`, no other tenant. */
export function plansOf(answers = new Map<string, OwnedPlan>()): LookupPlan & { answers: Map<string, OwnedPlan> } {
  const lookup: LookupPlan = async (tenantId) => answers.get(tenantId);
  return Object.assign(lookup, { answers });
}
