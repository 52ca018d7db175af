import type { Queryable } from "../../lib/db/types.js";
import type { OwnedTarget, ResolvedTarget, ResolveTarget } from "./replay-owner.js";

// A stand-in for the replays service in tests of the markers service alone: it answers each target
// as the events the test applied to this schema's projections say (the replays service decides the
// same from its own rows: services/replays/lookup-service.ts), or as the test says for a target it
// names in `answers` (an owner ahead of the projection, or behind it).

export type TestOwner = ResolveTarget & { answers: Map<string, ResolvedTarget> };

export function ownerFromProjection(q: Queryable): TestOwner {
  const answers = new Map<string, ResolvedTarget>();
  const resolve = async (target: OwnedTarget): Promise<ResolvedTarget> => {
    const named = answers.get("replayId" in target ? target.replayId : target.serverId);
    if (named) return named;
    if ("replayId" in target) {
      const { rows } = await q.query<{ server_id: string; started_at: Date | null; recording: boolean }>(
        `SELECT server_id, started_at, recording FROM markers.replay
          WHERE replay_id = $1 AND tenant_id = $2 AND NOT deleted`,
        [target.replayId, target.tenantId],
      );
      const row = rows[0];
      return row
        ? {
            outcome: "found",
            replayId: target.replayId,
            serverId: row.server_id,
            startedAt: row.started_at,
            recording: row.recording,
          }
        : { outcome: "not_found" };
    }
    const { rows } = await q.query<{ state: string | null; replay_id: string | null; started_at: Date | null }>(
      `SELECT (SELECT state FROM markers.server WHERE server_id = $1 AND tenant_id = $2) AS state, r.replay_id, r.started_at
         FROM (SELECT 1) one LEFT JOIN LATERAL (
           SELECT replay_id, started_at FROM markers.replay
            WHERE server_id = $1 AND tenant_id = $2 AND recording AND NOT deleted
            ORDER BY started_at DESC NULLS LAST LIMIT 1) r ON true`,
      [target.serverId, target.tenantId],
    );
    const { state, replay_id, started_at } = rows[0] ?? { state: null, replay_id: null, started_at: null };
    if (state === "purged") return { outcome: "not_found" };
    if (state !== "deauthorised" && replay_id !== null)
      return {
        outcome: "found",
        replayId: replay_id,
        serverId: target.serverId,
        startedAt: started_at,
        recording: true,
      };
    return state !== null ? { outcome: "not_recording" } : { outcome: "not_found" };
  };
  return Object.assign(resolve, { answers });
}
