import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { AssetSnapshot, CollectionSnapshot } from "../../gen/replay/events/v1/replays_pb.js";
import { buildEvent } from "../../lib/bus/events.js";
import type { Tx } from "../../lib/db/types.js";
import type { ReplayRow } from "./store.js";
import * as store from "./store.js";
import { type AssetStep, nextState } from "./transitions.js";

// Transitions on a row the caller holds locked, shared by the recording service and the retention worker.

export const tsOf = (date: Date | null) => (date ? timestampFromDate(date) : undefined);
const bigOf = (text: string | null) => (text === null ? 0n : BigInt(text));

export function collectionOf(
  row: ReplayRow,
  state: "finalized" | "released" | "revoked",
): Omit<CollectionSnapshot, "$typeName"> {
  return {
    id: row.replay_id,
    replayId: row.replay_id,
    serverId: row.server_id,
    state,
    visibility: row.visibility,
    status: row.status,
    revoked: row.revoked,
    integration: row.integration,
    quality: row.quality,
    startedAt: tsOf(row.started_at),
    endedAt: tsOf(row.ended_at),
    durationMs: bigOf(row.duration_ms),
    sizeBytes: bigOf(row.size_bytes),
    formatVersion: row.format_version ?? 0,
    retentionUntil: tsOf(row.retention_until),
  };
}

// A replay has one asset, its archive, so the asset id is the replay id.
export function assetOf(row: ReplayRow, state: AssetStep | "expired"): Omit<AssetSnapshot, "$typeName"> {
  return {
    id: row.replay_id,
    replayId: row.replay_id,
    serverId: row.server_id,
    state,
    status: row.status,
    visibility: row.visibility,
    storageTier: row.storage_tier,
    sizeBytes: row.size_bytes === null ? undefined : BigInt(row.size_bytes),
    formatVersion: row.format_version ?? undefined,
    retentionUntil: tsOf(row.retention_until),
  };
}

/** `archiveKey` is null for a finish without an archive; the size counts toward the tenant's storage. */
export async function finishLockedReplay(
  tx: Tx,
  row: ReplayRow,
  finish: { endedAt: Date; sizeBytes: bigint; formatVersion: number; archiveKey: string | null },
): Promise<ReplayRow> {
  const durationMs = BigInt(finish.endedAt.getTime() - row.started_at.getTime());
  const done = await store.updateReplayFinished(tx, row.replay_id, { ...finish, durationMs });
  await store.updateTenantStorageUsed(tx, row.tenant_id, finish.sizeBytes);
  await store.enqueueEvent(
    tx,
    buildEvent("replays.recording.finished", {
      tenantId: row.tenant_id,
      replayId: row.replay_id,
      serverId: row.server_id,
      startedAt: tsOf(done.started_at),
      endedAt: tsOf(done.ended_at),
      sizeBytes: finish.sizeBytes,
    }),
  );
  await store.enqueueEvent(
    tx,
    buildEvent("replays.collection.finalized", {
      tenantId: row.tenant_id,
      collection: collectionOf(done, "finalized"),
    }),
  );
  return done;
}

/** Throws INVALID_TRANSITION when the replay is still recording or already expired. */
export async function expireLockedReplay(tx: Tx, row: ReplayRow): Promise<ReplayRow> {
  const change = nextState(row, { kind: "expire" });
  const done = await store.updateReplayState(tx, row.replay_id, change);
  await store.updateReplayArchiveRemoved(tx, row);
  // decisions.md §5: usage counts replays that still hold an archive; expiry frees it at once.
  await store.updateTenantStorageUsed(tx, row.tenant_id, -bigOf(row.size_bytes));
  await store.enqueueEvent(
    tx,
    buildEvent("replays.asset.expired", { tenantId: row.tenant_id, asset: assetOf(done, "expired") }),
  );
  return done;
}
