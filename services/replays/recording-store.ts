import type { Queryable, Tx } from "../../lib/db/types.js";
import { blobDeletionChannel, insertBlobDeletion, type ReplayRow, replayColumns } from "./store.js";
import type { Pipeline, ReplayStatus, Visibility } from "./transitions.js";

// The row, its columns, the outbox helper and the tenant's storage are store.ts's, shared with
// the read side.
export { enqueueEvent, findTenantStorage, type ReplayRow } from "./store.js";

// SQL of the recording lifecycle and of the projections it checks against (schema `replays`).

export type ServerState = "pending" | "connected" | "deauthorised";

/**
 * identity.tenant.upserted: a newer plan replaces the quota, the retention and the hot period; the
 * usage is this service's own.
 */
export async function upsertTenantPlan(
  tx: Tx,
  plan: { tenantId: string; storageQuotaBytes: bigint; version: bigint; retentionDays: number; hotDays: number },
): Promise<void> {
  await tx.query(
    `INSERT INTO replays.tenant (tenant_id, storage_quota_bytes, plan_version, retention_days, hot_days)
     VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (tenant_id) DO UPDATE
       SET storage_quota_bytes = EXCLUDED.storage_quota_bytes, plan_version = EXCLUDED.plan_version,
           retention_days = EXCLUDED.retention_days, hot_days = EXCLUDED.hot_days
       WHERE replays.tenant.plan_version < EXCLUDED.plan_version`,
    [plan.tenantId, plan.storageQuotaBytes.toString(), plan.version.toString(), plan.retentionDays, plan.hotDays],
  );
}

/**
 * Adds `deltaBytes` (negative to free space) to the tenant's usage. A tenant whose plan has not
 * been projected yet gets a row with plan version 0 and quota 0, which its first plan replaces.
 */
export async function updateTenantStorageUsed(tx: Tx, tenantId: string, deltaBytes: bigint): Promise<void> {
  await tx.query(
    `INSERT INTO replays.tenant (tenant_id, storage_quota_bytes, plan_version, storage_used_bytes)
     VALUES ($1, 0, 0, GREATEST($2::bigint, 0))
     ON CONFLICT (tenant_id) DO UPDATE
       SET storage_used_bytes = GREATEST(replays.tenant.storage_used_bytes + $2::bigint, 0)`,
    [tenantId, deltaBytes.toString()],
  );
}

const serverRank: Record<ServerState, number> = { pending: 0, connected: 1, deauthorised: 2 };

/**
 * servers.server.created / connected / deauthorised. A server only moves forward (pending,
 * connected, deauthorised), so an event that arrives after a later one changes nothing.
 */
export async function upsertServerState(
  tx: Tx,
  server: { serverId: string; tenantId: string; state: ServerState },
): Promise<void> {
  await tx.query(
    `INSERT INTO replays.server (server_id, tenant_id, state)
     SELECT $1, $2, $3 WHERE NOT EXISTS (SELECT 1 FROM replays.server_purged WHERE server_id = $1)
     ON CONFLICT (server_id) DO UPDATE SET state = EXCLUDED.state
       WHERE (CASE replays.server.state WHEN 'pending' THEN 0 WHEN 'connected' THEN 1 ELSE 2 END) < $4`,
    [server.serverId, server.tenantId, server.state, serverRank[server.state]],
  );
}

/** servers.server.purged: the server is unknown from now on, even to an event that arrives late. */
export async function deleteServer(tx: Tx, serverId: string): Promise<void> {
  await tx.query("DELETE FROM replays.server WHERE server_id = $1", [serverId]);
  await tx.query("INSERT INTO replays.server_purged (server_id) VALUES ($1) ON CONFLICT DO NOTHING", [serverId]);
}

export async function findServerById(
  q: Queryable,
  serverId: string,
): Promise<{ tenant_id: string; state: ServerState } | undefined> {
  const { rows } = await q.query<{ tenant_id: string; state: ServerState }>(
    "SELECT tenant_id, state FROM replays.server WHERE server_id = $1",
    [serverId],
  );
  return rows[0];
}

/** The server's recording in progress, if any. */
export async function findRecordingByServer(q: Queryable, serverId: string): Promise<string | undefined> {
  const { rows } = await q.query<{ replay_id: string }>(
    "SELECT replay_id FROM replays.replay WHERE server_id = $1 AND status = 'recording'",
    [serverId],
  );
  return rows[0]?.replay_id;
}

/** The partial unique index that keeps one recording per server, whatever races. */
export const oneRecordingPerServer = "replay_recording_server_idx";

export async function insertReplay(
  tx: Tx,
  replay: {
    replayId: string;
    tenantId: string;
    serverId: string;
    integration: string;
    quality: "standard" | "hd";
    startedAt: Date;
    retentionUntil: Date;
    hotUntil: Date;
  },
): Promise<ReplayRow> {
  const { rows } = await tx.query<ReplayRow>(
    `INSERT INTO replays.replay (replay_id, tenant_id, server_id, integration, quality, status, started_at,
                                 storage_tier, retention_until, visibility, hot_until)
     VALUES ($1, $2, $3, $4, $5, 'recording', $6, 'hot', $7, 'staff', $8)
     RETURNING ${replayColumns}`,
    [
      replay.replayId,
      replay.tenantId,
      replay.serverId,
      replay.integration,
      replay.quality,
      replay.startedAt,
      replay.retentionUntil,
      replay.hotUntil,
    ],
  );
  return rows[0] as ReplayRow;
}

/** One replay, locked until the end of `tx` so that one transition at a time sees its state. */
export async function findReplayForUpdate(tx: Tx, replayId: string): Promise<ReplayRow | undefined> {
  const { rows } = await tx.query<ReplayRow>(
    `SELECT ${replayColumns} FROM replays.replay WHERE replay_id = $1 FOR UPDATE`,
    [replayId],
  );
  return rows[0];
}

export async function updateReplayFinished(
  tx: Tx,
  replayId: string,
  finish: { endedAt: Date; durationMs: bigint; sizeBytes: bigint; formatVersion: number; archiveKey: string | null },
): Promise<ReplayRow> {
  const { rows } = await tx.query<ReplayRow>(
    `UPDATE replays.replay
        SET status = 'processing', ended_at = $2, duration_ms = $3, size_bytes = $4, format_version = $5,
            archive_key = $6
      WHERE replay_id = $1
      RETURNING ${replayColumns}`,
    [
      replayId,
      finish.endedAt,
      finish.durationMs.toString(),
      finish.sizeBytes.toString(),
      finish.formatVersion,
      finish.archiveKey,
    ],
  );
  return rows[0] as ReplayRow;
}

/** An archive upload about to write `archiveKey`, committed before its first byte is stored. */
export async function insertArchiveUpload(
  q: Queryable,
  upload: { archiveKey: string; replayId: string; abandonAfterMs: number },
): Promise<void> {
  await q.query(
    `INSERT INTO replays.archive_upload (archive_key, replay_id, abandon_at)
     VALUES ($1, $2, now() + $3 * interval '1 millisecond')`,
    [upload.archiveKey, upload.replayId, upload.abandonAfterMs],
  );
}

/**
 * The upload of `archiveKey` is over: its row is deleted. False when there was none, because the
 * upload was abandoned meanwhile (and its key queued for removal).
 */
export async function deleteArchiveUpload(q: Queryable, archiveKey: string): Promise<boolean> {
  const { rows } = await q.query("DELETE FROM replays.archive_upload WHERE archive_key = $1 RETURNING 1", [archiveKey]);
  return rows.length > 0;
}

/**
 * Uploads whose row outlived `abandon_at` (a crash mid-upload), or the one named, are over and
 * failed: each row is deleted and its key queued for removal from the blob store, in one
 * statement, so an upload's commit (which deletes the same row) and this never both win.
 */
export async function updateArchiveUploadsAbandoned(q: Queryable, archiveKey: string | null = null): Promise<number> {
  const { rows } = await q.query(
    `WITH gone AS (
       DELETE FROM replays.archive_upload
        WHERE ($1::text IS NULL AND abandon_at <= now()) OR archive_key = $1
        RETURNING archive_key)
     INSERT INTO replays.blob_deletion (archive_key) SELECT archive_key FROM gone
       ON CONFLICT (archive_key) DO UPDATE SET next_attempt_at = now()
     RETURNING archive_key`,
    [archiveKey],
  );
  if (rows.length > 0) await q.query(`NOTIFY ${blobDeletionChannel}`);
  return rows.length;
}

/** Applies a transition's change to the lifecycle columns (the others stay). */
export async function updateReplayState(
  tx: Tx,
  replayId: string,
  change: { status?: ReplayStatus; pipeline?: Pipeline; visibility?: Visibility; revoked?: boolean },
): Promise<ReplayRow> {
  const { rows } = await tx.query<ReplayRow>(
    `UPDATE replays.replay
        SET status = COALESCE($2, status), pipeline = COALESCE($3, pipeline),
            visibility = COALESCE($4, visibility), revoked = COALESCE($5, revoked)
      WHERE replay_id = $1
      RETURNING ${replayColumns}`,
    [replayId, change.status ?? null, change.pipeline ?? null, change.visibility ?? null, change.revoked ?? null],
  );
  return rows[0] as ReplayRow;
}

/** The archive is gone from the metadata; its blob is queued for the deletion worker, woken on commit. */
export async function updateReplayArchiveRemoved(tx: Tx, row: ReplayRow): Promise<void> {
  await tx.query("UPDATE replays.replay SET archive_key = NULL WHERE replay_id = $1", [row.replay_id]);
  if (row.archive_key !== null) await insertBlobDeletion(tx, row.archive_key);
}

/**
 * Up to `limit` finished replays whose retention has passed by `now`, locked until the end of `tx`;
 * rows another replica holds are skipped, so replicas never expire the same replay.
 */
export async function findReplaysDueForExpiryForUpdate(tx: Tx, now: Date, limit: number): Promise<ReplayRow[]> {
  const { rows } = await tx.query<ReplayRow>(
    `SELECT ${replayColumns} FROM replays.replay
      WHERE retention_until <= $1 AND status <> 'expired' AND status <> 'recording'
      ORDER BY retention_until LIMIT $2
      FOR UPDATE SKIP LOCKED`,
    [now, limit],
  );
  return rows;
}

/**
 * Moves up to `limit` finished, unexpired `hot` replays whose hot period (their hot_until, set from
 * the plan when they started) has passed by `now` to `cold`, skipping rows another transaction
 * holds. Returns how many moved.
 */
export async function updateReplaysCold(q: Queryable, now: Date, limit: number): Promise<number> {
  const { rows } = await q.query<{ replay_id: string }>(
    `UPDATE replays.replay SET storage_tier = 'cold'
      WHERE replay_id IN (
        SELECT replay_id FROM replays.replay
         WHERE storage_tier = 'hot' AND hot_until <= $1 AND status <> 'expired' AND status <> 'recording'
         ORDER BY hot_until LIMIT $2
         FOR UPDATE SKIP LOCKED)
      RETURNING replay_id`,
    [now, limit],
  );
  return rows.length;
}
