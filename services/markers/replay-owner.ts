import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { Client } from "@connectrpc/connect";
import { MarkerTargetOutcome, type ReplayLookupService } from "../../gen/replay/replays/v1/lookup_pb.js";
import { createBatcher } from "../../lib/db/batch.js";
import { ownerUnavailable } from "../../lib/rpc/peers.js";

export type OwnedTarget = { tenantId: string; replayId: string } | { tenantId: string; serverId: string };

export type ResolvedTarget =
  | { outcome: "found"; replayId: string; serverId: string; startedAt: Date | null; recording: boolean }
  | { outcome: "not_found" }
  | { outcome: "not_recording" };

export type ResolveTarget = (target: OwnedTarget) => Promise<ResolvedTarget>;

/** One call at a time, so creates that arrive while it runs go together into the next (docs/performance.md). */
const RESOLVE_BATCH_MAX = 256;
const RESOLVE_CALLS_RUNNING_MAX = 1;

/** The targets of creates that arrive together go in one call; a failed call fails its creates (503). */
export function replayOwner(client: Client<typeof ReplayLookupService>): ResolveTarget {
  return createBatcher<OwnedTarget, ResolvedTarget>({
    async run(targets) {
      const answer = await client.resolveMarkerTargets({
        targets: targets.map((t) => ({
          tenantId: t.tenantId,
          target: "replayId" in t ? { case: "replayId", value: t.replayId } : { case: "serverId", value: t.serverId },
        })),
      });
      if (answer.targets.length !== targets.length) {
        throw ownerUnavailable("replays", new Error(`${answer.targets.length} answers for ${targets.length} targets`));
      }
      return answer.targets.map((t): ResolvedTarget => {
        if (t.outcome === MarkerTargetOutcome.FOUND) {
          return {
            outcome: "found",
            replayId: t.replayId,
            serverId: t.serverId,
            startedAt: t.startedAt ? timestampDate(t.startedAt) : null,
            recording: t.recording,
          };
        }
        return t.outcome === MarkerTargetOutcome.NOT_RECORDING
          ? { outcome: "not_recording" }
          : { outcome: "not_found" };
      });
    },
    maxBatch: RESOLVE_BATCH_MAX,
    maxRunning: RESOLVE_CALLS_RUNNING_MAX,
  });
}
