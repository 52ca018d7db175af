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
import type { BatchOutcome, MarkerRow, NewMarker } from "./store.js";
import * as store from "./store.js";

/** How long an idempotency record is remembered (decisions.md §3). */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;

/**
 * How long a create or a list waits for the projections to learn of a replay or recording it does
 * not know yet (docs/decisions.md, "Timeline markers"): a recording started a moment ago reaches them within
 * milliseconds normally, and within the bus's one-second poll at worst.
 */
export const PROJECTION_WAIT_MS = 3000;

export type MarkersDeps = {
  db: Db;
  now: () => Date;
  /** PROJECTION_WAIT_MS unless set (tests). */
  projectionWaitMs?: number;
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
const isProjectionMiss = (err: unknown) =>
  err instanceof DomainError && (err.code === "REPLAY_NOT_FOUND" || err.code === "NO_ACTIVE_RECORDING");

/**
 * The replay a create by server id goes to (decisions.md §3): a purged server is unknown, a
 * deauthorised one records nothing; otherwise its recording in progress, if any. A recording the
 * projection knows of wins over a server state that has not caught up (pending).
 */
async function resolveServerTarget(q: Queryable, tenantId: string, serverId: string): Promise<string> {
  const { state, replay_id } = await store.findServerTarget(q, tenantId, serverId);
  if (state === "purged") throw replayNotFound(`for server ${serverId}`);
  if (state !== "deauthorised" && replay_id !== null) return replay_id;
  if (state !== null) throw new DomainError("NO_ACTIVE_RECORDING", `server ${serverId} has nothing recording`);
  throw replayNotFound(`for server ${serverId}`);
}

/**
 * The most creates in one statement, and the statements at once: two, so that the creates that
 * arrive while one runs go together into the next, and Node builds one statement while Postgres
 * runs the other (`npm run bench markers` at 64 connections did better with two than with one:
 * docs/performance.md). Two statements lock their replays in id order, so they never deadlock,
 * and each re-reads the counts after its locks, so the cap stays exact.
 */
const CREATE_BATCH_MAX = 256;
const CREATE_BATCHES_RUNNING_MAX = 2;

/** Inserts one marker on `q`; resolves to its outcome (store.insertMarkers). */
type InsertMarker = (marker: NewMarker) => Promise<BatchOutcome>;

/**
 * Timeline markers (spec "Timeline markers", decisions.md §3). Existence and the 500 cap are
 * decided in the statement that inserts, on the replay's projection row, locked, so they hold under
 * any concurrency and against the delete consumer, which takes the same lock. Concurrent creates
 * without an Idempotency-Key are grouped per tick into one statement (store.insertMarkers); each
 * caller still gets its own answer, as if the creates ran one after another.
 */
export function createMarkersService(deps: MarkersDeps): ServiceImpl<typeof MarkersService> {
  const { db } = deps;
  const projectionWaitMs = deps.projectionWaitMs ?? PROJECTION_WAIT_MS;
  const insertBatched: InsertMarker = createBatcher<NewMarker, BatchOutcome>({
    run: (batch) => store.insertMarkers(db, batch, MARKERS_PER_REPLAY),
    maxBatch: CREATE_BATCH_MAX,
    maxRunning: CREATE_BATCHES_RUNNING_MAX,
    // One create's value that Postgres refuses fails it alone.
    isolate: isDataException,
  });

  // A target created a moment ago may not have reached the projections yet: a refusal for an
  // unknown replay or an idle server is tried again until the wait is over. The failed attempt
  // changed nothing.
  async function untilProjected<T>(attempt: () => Promise<T>): Promise<T> {
    const deadline = Date.now() + projectionWaitMs;
    for (;;) {
      try {
        return await attempt();
      } catch (err) {
        if (!isProjectionMiss(err) || Date.now() >= deadline) throw err;
      }
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }

  /** Existence, then the cap (the proto's order), for a create whose key, if any, is settled. */
  async function insert(q: Queryable, tenantId: string, input: MarkerInput, into: InsertMarker): Promise<MarkerRow> {
    // Fields named one by one: a rest pattern and spreads with more properties after them take
    // V8's slow path (docs/engineering.md; it was a visible share of the service's CPU, docs/performance.md).
    const { target, tick, label, category, colour, icon, actor } = input;
    const serverId = target.serverId ?? null;
    const replayId = target.replayId ?? (await resolveServerTarget(q, tenantId, target.serverId as string));
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
    const outcome = await into(marker);
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

  /** A create with an Idempotency-Key, in one transaction that holds the key's record (decisions.md §3). */
  function insertIdempotent(
    tenantId: string,
    input: MarkerInput,
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
      const marker = await insert(tx, tenantId, input, async (m) => {
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
      const row = await untilProjected(() =>
        idempotency ? insertIdempotent(tenantId, input, idempotency) : insert(db, tenantId, input, insertBatched),
      );
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
      const rows = await untilProjected(async () => {
        if (!(await store.existsReplay(db, tenantId, replayId))) throw replayNotFound(replayId);
        return store.listMarkersByReplay(db, tenantId, replayId);
      });
      return { markers: rows.map(toMarkerMessage) };
    },
  };
}
