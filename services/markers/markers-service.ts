import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import type { Marker, MarkersService } from "../../gen/replay/markers/v1/markers_pb.js";
import { createBatcher } from "../../lib/db/batch.js";
import { isDataException } from "../../lib/db/errors.js";
import type { Db, Queryable } from "../../lib/db/types.js";
import { DomainError } from "../../lib/errors.js";
import { newTimeOrderedId } from "../../lib/ids.js";
import { requireTenant } from "../../lib/rpc/context.js";
import { MARKERS_PER_REPLAY, type MarkerInput, parseMarkerId, parseMarkerInput, parseReplayId } from "./marker.js";
import type { ResolvedTarget, ResolveTarget } from "./replay-owner.js";
import type { BatchOutcome, MarkerRow, NewMarker } from "./store.js";
import * as store from "./store.js";

/** How long an idempotency record is remembered (decisions.md §3). */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;

export type MarkersDeps = {
  db: Db;
  now: () => Date;
  resolveTarget: ResolveTarget;
};

export function toMarkerMessage(row: MarkerRow): Omit<Marker, "$typeName"> {
  return {
    markerId: row.marker_id,
    replayId: row.replay_id,
    tick: BigInt(row.tick),
    label: row.label,
    category: row.category ?? undefined,
    colour: row.colour ?? undefined,
    icon: row.icon ?? undefined,
    actor: row.actor ?? undefined,
    createdAt: timestampFromDate(row.created_at),
  };
}

const replayNotFound = (what: string) => new DomainError("REPLAY_NOT_FOUND", `no replay ${what}`);

function targetReplayOf(resolved: ResolvedTarget, target: MarkerInput["target"]): string {
  if (resolved.outcome === "found") return resolved.replayId;
  if (target.serverId === undefined) throw replayNotFound(target.replayId);
  if (resolved.outcome === "not_recording")
    throw new DomainError("NO_ACTIVE_RECORDING", `server ${target.serverId} has nothing recording`);
  throw replayNotFound(`for server ${target.serverId}`);
}

/**
 * Two statements at once: Node builds one while Postgres runs the other. They lock their replays in id
 * order (no deadlock) and re-read the counts after the locks (the cap stays exact).
 */
const CREATE_BATCH_MAX = 256;
const CREATE_BATCHES_RUNNING_MAX = 2;

type InsertMarker = (marker: NewMarker) => Promise<BatchOutcome>;

/**
 * Timeline markers (decisions.md §3). The target is the replays service's answer at request time; the cap and
 * an earlier delete are decided on the locked projection row, so they hold under any concurrency.
 */
export function createMarkersService(deps: MarkersDeps): ServiceImpl<typeof MarkersService> {
  const { db } = deps;
  const insertBatched: InsertMarker = createBatcher<NewMarker, BatchOutcome>({
    run: (batch) => store.insertMarkers(db, batch, MARKERS_PER_REPLAY),
    maxBatch: CREATE_BATCH_MAX,
    maxRunning: CREATE_BATCHES_RUNNING_MAX,
    // One create's value that Postgres refuses fails it alone.
    isolate: isDataException,
  });

  /** Existence, then the cap (the proto's order); `resolved` before any transaction began (none waits on a call). */
  async function insert(
    q: Queryable,
    tenantId: string,
    input: MarkerInput,
    resolved: ResolvedTarget,
    into: InsertMarker,
  ): Promise<MarkerRow> {
    // Fields named one by one: a rest pattern or a spread with more properties is slow (docs/engineering.md).
    const { target, tick, label, category, colour, icon, actor } = input;
    const serverId = target.serverId ?? null;
    const replayId = targetReplayOf(resolved, target);
    const markerId = newTimeOrderedId();
    const createdAt = deps.now();
    const marker: NewMarker = {
      tick,
      label,
      category,
      colour,
      icon,
      actor,
      markerId,
      tenantId,
      replayId,
      serverId,
      createdAt,
    };
    let outcome = await into(marker);
    if (outcome === "missing" && resolved.outcome === "found") {
      // The projection has not heard of it yet: it learns it from the answer. A tombstone stays.
      await store.insertReplayKnown(q, {
        replayId,
        tenantId,
        serverId: resolved.serverId,
        startedAt: resolved.startedAt,
        recording: resolved.recording,
      });
      outcome = await into(marker);
    }
    if (outcome === "missing") throw replayNotFound(replayId);
    // spec "Limits": 500 markers per replay.
    if (outcome === "full")
      throw new DomainError("TOO_MANY_MARKERS", `the replay already holds ${MARKERS_PER_REPLAY} markers`);
    return {
      tick,
      label,
      category,
      colour,
      icon,
      actor,
      marker_id: markerId,
      replay_id: replayId,
      created_at: createdAt,
    };
  }

  /** In one transaction that holds the key's record (decisions.md §3). */
  function insertIdempotent(
    tenantId: string,
    input: MarkerInput,
    resolved: ResolvedTarget,
    idempotency: { key: string; fingerprint: string },
  ): Promise<MarkerRow> {
    return db.transaction(async (tx) => {
      const now = deps.now();
      const claimed = await store.claimIdempotencyKey(tx, {
        tenantId,
        ...idempotency,
        now,
        expiredBefore: new Date(now.getTime() - IDEMPOTENCY_TTL_MS),
      });
      if (!claimed) {
        const record = await store.findIdempotencyRecord(tx, tenantId, idempotency.key);
        if (record?.fingerprint !== idempotency.fingerprint)
          throw new DomainError("IDEMPOTENCY_KEY_REUSED", "this Idempotency-Key was used with another body");
        // A live record is only ever committed with its marker (a refused create rolls it back).
        if (!record.marker) throw new Error("an idempotency record without its marker");
        return record.marker;
      }
      const marker = await insert(tx, tenantId, input, resolved, async (m) => {
        const [outcome] = await store.insertMarkers(tx, [m], MARKERS_PER_REPLAY);
        return outcome as BatchOutcome;
      });
      await store.recordIdempotentMarker(tx, tenantId, idempotency.key, marker);
      return marker;
    });
  }

  return {
    async createMarker(req, ctx) {
      const tenantId = requireTenant(ctx);
      const input = parseMarkerInput(req);
      const idempotency =
        req.idempotencyKey === "" ? undefined : { key: req.idempotencyKey, fingerprint: req.requestFingerprint };
      const { target } = input;
      const resolved = await deps.resolveTarget(
        target.replayId !== undefined
          ? { tenantId, replayId: target.replayId }
          : { tenantId, serverId: target.serverId },
      );
      const row = await (idempotency
        ? insertIdempotent(tenantId, input, resolved, idempotency)
        : insert(db, tenantId, input, resolved, insertBatched));
      return { marker: toMarkerMessage(row) };
    },

    async deleteMarker(req, ctx) {
      const tenantId = requireTenant(ctx);
      const markerId = parseMarkerId(req.markerId);
      await db.transaction(async (tx) => {
        const replayId = await store.findMarkerReplay(tx, tenantId, markerId);
        // The replay's row first, as creates and the delete consumer lock it: the count stays exact.
        if (replayId !== undefined) await store.findReplayForUpdate(tx, tenantId, replayId);
        if (replayId === undefined || !(await store.deleteMarker(tx, tenantId, markerId)))
          throw new DomainError("MARKER_NOT_FOUND", `no marker ${markerId}`);
      });
      return {};
    },

    async listMarkers(req, ctx) {
      const tenantId = requireTenant(ctx);
      const replayId = parseReplayId(req.replayId);
      const resolved = await deps.resolveTarget({ tenantId, replayId });
      if (resolved.outcome !== "found") throw replayNotFound(replayId);
      const rows = await store.listMarkersByReplay(db, tenantId, replayId);
      return { markers: rows.map(toMarkerMessage) };
    },
  };
}
