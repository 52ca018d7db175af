import type { Queryable } from "../../lib/db/types.js";
import type { OwnedTarget, ResolvedTarget, ResolveTarget } from "./replay-owner.js";

// What this schema's projections hold, for tests, and a stand-in for the replays service in tests of
// the markers service alone: it answers each target as the events the test applied to these
// projections say (the replays service decides the same from its own rows:
// services/replays/lookup-service.ts), or as the test says for a target it names in `answers` (an
// owner ahead of the projection, or behind it).

/** The projection's replay of the tenant, unless unknown or deleted. */
export async function projectedReplay(
  q: Queryable,
  tenantId: string,
  replayId: string,
): Promise<{ server_id: string; started_at: Date | null; recording: boolean } | undefined> {
  const { rows } = await q.query<{ server_id: string; started_at: Date | null; recording: boolean }>(
    "SELECT server_id, started_at, recording FROM markers.replay WHERE replay_id = $1 AND tenant_id = $2 AND NOT deleted",
    [replayId, tenantId],
  );
  return rows[0];
}

/** The projection's state of a server, and its newest recording in progress. */
export async function projectedServerTarget(
  q: Queryable,
  tenantId: string,
  serverId: string,
): Promise<{ state: string | null; replay_id: string | null }> {
  const { rows } = await q.query<{ state: string | null; replay_id: string | null }>(
    `SELECT (SELECT state FROM markers.server WHERE server_id = $1 AND tenant_id = $2) AS state,
            (SELECT replay_id FROM markers.replay WHERE server_id = $1 AND tenant_id = $2 AND recording AND NOT deleted
              ORDER BY started_at DESC NULLS LAST LIMIT 1) AS replay_id`,
    [serverId, tenantId],
  );
  return rows[0] ?? { state: null, replay_id: null };
}

export type TestOwner = ResolveTarget & { answers: Map<string, ResolvedTarget> };

export function ownerFromProjection(q: Queryable): TestOwner {
  const answers = new Map<string, ResolvedTarget>();
  const found = async (tenantId: string, replayId: string): Promise<ResolvedTarget> => {
    const row = await projectedReplay(q, tenantId, replayId);
    return row
      ? { outcome: "found", replayId, serverId: row.server_id, startedAt: row.started_at, recording: row.recording }
      : { outcome: "not_found" };
  };
  const resolve = async (target: OwnedTarget): Promise<ResolvedTarget> => {
    const named = answers.get("replayId" in target ? target.replayId : target.serverId);
    if (named) return named;
    if ("replayId" in target) return found(target.tenantId, target.replayId);
    const { state, replay_id } = await projectedServerTarget(q, target.tenantId, target.serverId);
    if (state === "purged") return { outcome: "not_found" };
    if (state !== "deauthorised" && replay_id !== null) return found(target.tenantId, replay_id);
    return state !== null ? { outcome: "not_recording" } : { outcome: "not_found" };
  };
  return Object.assign(resolve, { answers });
}
