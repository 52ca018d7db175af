import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import {
  MarkerTargetOutcome,
  type ReplayLookupService,
  type ResolvedMarkerTarget,
} from "../../gen/replay/replays/v1/lookup_pb.js";
import type { Db } from "../../lib/db/types.js";
import { DomainError } from "../../lib/errors.js";
import { isUuid } from "../../lib/ids.js";
import type { LookupServer } from "./server-owner.js";
import * as store from "./store.js";

/** The most targets one call resolves: a markers batch is at most 256. */
const TARGETS_MAX = 1000;

type Target = { tenantId: string; replayId?: string; serverId?: string };
type Resolved = Omit<ResolvedMarkerTarget, "$typeName" | "startedAt"> & {
  startedAt?: ReturnType<typeof timestampFromDate>;
};

const notFound: Resolved = { replayId: "", serverId: "", recording: false, outcome: MarkerTargetOutcome.NOT_FOUND };
const notRecording: Resolved = { ...notFound, outcome: MarkerTargetOutcome.NOT_RECORDING };

/**
 * Decided here, where replays are written, so a marker create right after an acknowledged start or delete
 * sees it (decisions.md §3). A server not projected yet is asked of the servers service: "not recording", not unknown.
 */
export function createReplayLookupService(deps: {
  db: Db;
  lookupServer: LookupServer;
}): ServiceImpl<typeof ReplayLookupService> {
  return {
    async resolveMarkerTargets(req, ctx) {
      if (req.targets.length > TARGETS_MAX) {
        throw new DomainError("INVALID_ARGUMENT", `at most ${TARGETS_MAX} targets a call`);
      }
      const targets: Target[] = req.targets.map((t) => {
        const id = t.target.value;
        if (!isUuid(t.tenantId) || id === undefined || !isUuid(id)) {
          throw new DomainError(
            "INVALID_ARGUMENT",
            "each target needs a tenant_id and a replay_id or server_id (UUIDs)",
          );
        }
        const tenantId = t.tenantId.toLowerCase();
        return t.target.case === "replayId"
          ? { tenantId, replayId: id.toLowerCase() }
          : { tenantId, serverId: id.toLowerCase() };
      });
      const rows = await store.findMarkerTargets(deps.db, targets);
      const resolved = await Promise.all(
        targets.map((target, i) => resolve(target, rows[i] as store.MarkerTargetRow, deps.lookupServer, ctx.signal)),
      );
      return { targets: resolved };
    },
  };
}

async function resolve(
  target: Target,
  row: store.MarkerTargetRow,
  lookupServer: LookupServer,
  signal: AbortSignal,
): Promise<Resolved> {
  const found = (): Resolved => ({
    replayId: row.replay_id as string,
    serverId: row.server_id as string,
    startedAt: row.started_at ? timestampFromDate(row.started_at) : undefined,
    recording: row.status === "recording",
    outcome: MarkerTargetOutcome.FOUND,
  });
  if (target.replayId !== undefined) return row.replay_id ? found() : notFound;
  if (row.purged) return notFound;
  if (row.server_state === "deauthorised") return notRecording;
  if (row.replay_id) return found();
  if (row.server_state !== null) return notRecording;
  const owned = await lookupServer(target.serverId as string, signal);
  return owned?.tenantId === target.tenantId ? notRecording : notFound;
}
