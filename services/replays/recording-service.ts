import { type Timestamp, timestampDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { AssetState, type RecordingService } from "../../gen/replay/replays/v1/recording_pb.js";
import { Quality } from "../../gen/replay/replays/v1/replays_pb.js";
import type { BlobStore } from "../../lib/blob/blob.js";
import { buildEvent } from "../../lib/bus/events.js";
import { isUniqueViolation } from "../../lib/db/errors.js";
import type { Db, Tx } from "../../lib/db/types.js";
import { DomainError } from "../../lib/errors.js";
import { newId, parseUuid } from "../../lib/ids.js";
import { logger } from "../../lib/log.js";
import type { LookupPlan } from "../../lib/plan-owner.js";
import { traceOf } from "../../lib/rpc/context.js";
import { codePointLength } from "../../lib/text.js";
import { traceLogFields } from "../../lib/trace.js";
import {
  archiveChunks,
  archiveKeyOf,
  declaredSizeOf,
  readArchiveHeader,
  throwIfCancelled,
  UPLOAD_ABANDON_MS,
  UPLOAD_MAX_MS,
} from "./archive.js";
import * as archive from "./archive-store.js";
import { assetOf, collectionOf, expireLockedReplay, finishLockedReplay, tsOf } from "./lifecycle.js";
import type { LookupServer } from "./server-owner.js";
import type { ReplayRow } from "./store.js";
import * as store from "./store.js";
import { type Action, type AssetStep, nextState } from "./transitions.js";

/** Used until a tenant's plan reaches this service (decisions.md, "Recording lifecycle"). */
export const DEFAULT_RETENTION_DAYS = 90;
export const DEFAULT_HOT_DAYS = 30;

const DAY_MS = 24 * 60 * 60 * 1000;
/** The spec sets none, but Postgres refuses an index entry over ~2.7 kB: a longer one would be a 500. */
const INTEGRATION_MAX_CHARS = 256;
/** JSON answers carry size_bytes as a number, exact to 2^53 - 1. */
const SIZE_BYTES_MAX = BigInt(Number.MAX_SAFE_INTEGER);
const daysAfter = (date: Date, days: number) => new Date(date.getTime() + days * DAY_MS);

const log = logger("replays:recording");

export type RecordingDeps = {
  db: Db;
  blobs: BlobStore;
  now: () => Date;
  lookupServer: LookupServer;
  lookupPlan: LookupPlan;
};

const dateOf = (ts: Timestamp | undefined, fallback: Date) => (ts ? timestampDate(ts) : fallback);

const parseReplayId = (raw: string) => parseUuid(raw, "INVALID_REPLAY_ID", "replay_id");
const assetSteps: Partial<Record<AssetState, AssetStep>> = {
  [AssetState.PROCESSING]: "processing",
  [AssetState.READY]: "ready",
  [AssetState.FAILED]: "failed",
};

/**
 * The recording lifecycle (decisions.md §7). Each action locks the replay's row in its transaction, so two
 * callers racing on one replay make one transition and one event; the second gets INVALID_TRANSITION.
 */
export function createRecordingService(deps: RecordingDeps): ServiceImpl<typeof RecordingService> {
  const { db } = deps;

  async function transition(
    ctx: HandlerContext,
    rawId: string,
    action: (row: ReplayRow) => Action,
    apply: (tx: Tx, row: ReplayRow, change: ReturnType<typeof nextState>) => Promise<ReplayRow>,
  ): Promise<{ replayId: string }> {
    const replayId = parseReplayId(rawId);
    await db.transaction(
      async (tx) => {
        const row = await store.findReplayForUpdate(tx, replayId);
        if (!row) throw new DomainError("REPLAY_NOT_FOUND", `no replay ${replayId}`);
        const change = nextState(row, action(row));
        await apply(tx, row, change);
      },
      { trace: traceOf(ctx) },
    );
    return { replayId };
  }

  function collectionTransition(ctx: HandlerContext, rawId: string, state: "released" | "revoked") {
    return transition(
      ctx,
      rawId,
      () => ({ kind: state === "released" ? "release" : "revoke" }),
      async (tx, row, change) => {
        const done = await store.updateReplayState(tx, row.replay_id, change);
        const collection = collectionOf(done, state);
        const tenantId = row.tenant_id;
        await store.enqueueEvent(
          tx,
          state === "released"
            ? buildEvent("replays.collection.released", { tenantId, collection })
            : buildEvent("replays.collection.revoked", { tenantId, collection }),
        );
        return done;
      },
    );
  }

  return {
    async startRecording(req, ctx) {
      const serverId = parseUuid(req.serverId, "INVALID_SERVER_ID", "server_id");
      const now = deps.now();
      const startedAt = dateOf(req.startedAt, now);
      const quality = req.quality === Quality.HD ? "hd" : "standard";
      if (codePointLength(req.integration) > INTEGRATION_MAX_CHARS) {
        throw new DomainError("INVALID_ARGUMENT", `integration must be at most ${INTEGRATION_MAX_CHARS} characters`);
      }
      const replayId = newId();
      // Asked of its owner, not the projection: a start right after an acknowledged check-in or
      // deauthorisation is decided on it. The projection is brought forward (states only move on).
      const owned = await deps.lookupServer(serverId, ctx.signal);
      if (!owned) throw new DomainError("SERVER_NOT_FOUND", `no server ${serverId}`);
      // So is a tenant's plan this projection has not heard of.
      const known = await store.findTenantStorage(db, owned.tenantId);
      const plan = known && known.plan_version > 0n ? undefined : await deps.lookupPlan(owned.tenantId, ctx.signal);
      try {
        await db.transaction(
          async (tx) => {
            await store.upsertServerState(tx, { serverId, tenantId: owned.tenantId, state: owned.state });
            if (plan) await store.upsertTenantPlan(tx, { tenantId: owned.tenantId, ...plan });
            const server = await store.findServerById(tx, serverId);
            if (!server) throw new DomainError("SERVER_NOT_FOUND", `no server ${serverId}`);
            if (server.state === "pending") {
              throw new DomainError("SERVER_NOT_CONNECTED", `server ${serverId} has not connected yet`);
            }
            if (server.state === "deauthorised") {
              throw new DomainError("SERVER_DEAUTHORISED", `server ${serverId} is deauthorised`);
            }
            if (await store.findRecordingByServer(tx, serverId)) throw recordingInProgress(serverId);
            // No plan (version 0 or no row): no known quota, so nothing is refused on it (decisions.md).
            const storage = await store.findTenantStorage(tx, server.tenant_id);
            if (storage && storage.plan_version > 0n && storage.storage_used_bytes >= storage.storage_quota_bytes) {
              throw new DomainError("STORAGE_QUOTA_EXCEEDED", "the tenant's storage quota is used up");
            }
            const row = await store.insertReplay(tx, {
              replayId,
              tenantId: server.tenant_id,
              serverId,
              integration: req.integration,
              quality,
              startedAt,
              // The plan's periods as they are now: a later plan change leaves this replay as it is.
              retentionUntil: daysAfter(startedAt, storage?.retention_days ?? DEFAULT_RETENTION_DAYS),
              hotUntil: daysAfter(startedAt, storage?.hot_days ?? DEFAULT_HOT_DAYS),
            });
            await store.enqueueEvent(
              tx,
              buildEvent("replays.recording.started", {
                tenantId: row.tenant_id,
                replayId,
                serverId,
                startedAt: tsOf(row.started_at),
              }),
            );
          },
          { trace: traceOf(ctx) },
        );
      } catch (err) {
        // Two starts racing on one server: the partial unique index lets one in.
        if (isUniqueViolation(err, store.oneRecordingPerServer)) throw recordingInProgress(serverId);
        throw err;
      }
      return { replayId };
    },

    async finishRecording(req, ctx) {
      const now = deps.now();
      const endedAt = dateOf(req.endedAt, now);
      const sizeBytes = req.sizeBytes ?? 0n;
      const formatVersion = req.formatVersion ?? 1;
      if (sizeBytes < 0n) throw new DomainError("INVALID_ARGUMENT", "size_bytes must not be negative");
      if (sizeBytes > SIZE_BYTES_MAX) {
        throw new DomainError("INVALID_ARGUMENT", `size_bytes must be at most ${SIZE_BYTES_MAX} (2^53 - 1)`);
      }
      return transition(
        ctx,
        req.replayId,
        (row) => ({ kind: "finish", startedAt: row.started_at, endedAt }),
        (tx, row) => finishLockedReplay(tx, row, { endedAt, sizeBytes, formatVersion, archiveKey: null }),
      );
    },

    async uploadArchive(requests, ctx) {
      const deadlineAt = Date.now() + UPLOAD_MAX_MS;
      const messages = requests[Symbol.asyncIterator]();
      const header = await readArchiveHeader(messages, deadlineAt);
      const replayId = parseReplayId(header?.replayId ?? "");
      if (!header) throw new Error("unreachable: an empty stream names no replay");
      declaredSizeOf(header);
      const endedAt = dateOf(header.endedAt, deps.now());
      const formatVersion = header.formatVersion ?? 1;
      const finish = (row: ReplayRow): Action => ({ kind: "finish", startedAt: row.started_at, endedAt });
      // Checked before any byte is read; the upload recorded before any is stored.
      let archiveKey = "";
      await transition(ctx, replayId, finish, async (tx, row) => {
        archiveKey = archiveKeyOf(row.tenant_id, replayId, newId());
        await archive.insertArchiveUpload(tx, { archiveKey, replayId, abandonAfterMs: UPLOAD_ABANDON_MS });
        return row;
      });
      let sizeBytes = 0n;
      try {
        sizeBytes = BigInt(
          (await deps.blobs.put(archiveKey, archiveChunks(header, messages, deadlineAt, ctx.signal))).sizeBytes,
        );
        await transition(ctx, replayId, finish, async (tx, row) => {
          // The caller may have reset the stream while the archive was being stored.
          throwIfCancelled(ctx.signal);
          if (!(await archive.deleteArchiveUpload(tx, archiveKey))) {
            throw new Error(`the upload of ${archiveKey} outlived UPLOAD_ABANDON_MS`);
          }
          return finishLockedReplay(tx, row, { endedAt, sizeBytes, formatVersion, archiveKey });
        });
      } catch (err) {
        // The blob is queued for removal now; should that fail or the process crash, the deletions
        // worker queues it once the upload counts as abandoned.
        await archive.updateArchiveUploadsAbandoned(db, archiveKey).catch((cleanupErr: unknown) => {
          log.warn(
            { err: cleanupErr, archiveKey, ...traceLogFields(traceOf(ctx)) },
            "queueing a failed upload's archive for removal failed",
          );
        });
        throw err;
      }
      return { replayId, sizeBytes };
    },

    async setAssetState(req, ctx) {
      const known = assetSteps[req.state];
      return transition(
        ctx,
        req.replayId,
        () => {
          if (known === undefined) throw new DomainError("INVALID_TRANSITION", "the asset state is unspecified");
          return { kind: "asset", step: known };
        },
        async (tx, row, change) => {
          const step = known as AssetStep;
          const done = await store.updateReplayState(tx, row.replay_id, change);
          const asset = assetOf(done, step);
          const tenantId = row.tenant_id;
          const event =
            step === "processing"
              ? buildEvent("replays.asset.processing", { tenantId, asset })
              : step === "ready"
                ? buildEvent("replays.asset.ready", { tenantId, asset })
                : buildEvent("replays.asset.failed", { tenantId, asset });
          await store.enqueueEvent(tx, event);
          return done;
        },
      );
    },

    async releaseCollection(req, ctx) {
      return collectionTransition(ctx, req.replayId, "released");
    },

    async revokeCollection(req, ctx) {
      return collectionTransition(ctx, req.replayId, "revoked");
    },

    async expireReplay(req, ctx) {
      return transition(
        ctx,
        req.replayId,
        () => ({ kind: "expire" }),
        (tx, row) => expireLockedReplay(tx, row),
      );
    },
  };
}

const recordingInProgress = (serverId: string) =>
  new DomainError("RECORDING_IN_PROGRESS", `server ${serverId} already has a recording in progress`);
