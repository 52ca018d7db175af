// The SQL of schema `replays`; the archive queues, shared with the blob deletions worker, are archive-store.ts's.

import type { OutgoingEvent } from "../../lib/bus/events.js";
import { enqueue } from "../../lib/bus/outbox.js";
import { PLANNED_PER_CALL } from "../../lib/db/statements.js";
import type { Queryable, Tx } from "../../lib/db/types.js";
import { insertBlobDeletion } from "./archive-store.js";
import type { Pipeline, ReplayStatus, Visibility } from "./transitions.js";

export type ReplayRow = {
  replay_id: string;
  tenant_id: string;
  server_id: string;
  integration: string;
  quality: "standard" | "hd";
  status: ReplayStatus;
  pipeline: Pipeline;
  started_at: Date;
  ended_at: Date | null;
  duration_ms: string | null;
  size_bytes: string | null;
  format_version: number | null;
  storage_tier: "hot" | "cold";
  retention_until: Date;
  visibility: Visibility;
  revoked: boolean;
  archive_key: string | null;
};

export type ReplayListRow = ReplayRow & { position_at: string };

/** Microsecond text (finer than a Date): rows under 1 ms apart are neither skipped nor repeated. */
export type ReplayPosition = { startedAt: string; replayId: string };

export type ReplayFilters = { serverId?: string; integration?: string };

/** plan_version 0 marks usage recorded before the plan arrived (retention fields then hold defaults). */
export type TenantStorage = {
  storage_quota_bytes: bigint;
  storage_used_bytes: bigint;
  plan_version: bigint;
  retention_days: number;
  hot_days: number;
};

export type ServerState = "pending" | "connected" | "deauthorised";

// bigint columns come back as strings or numbers, depending on the adapter: callers use BigInt().
export const replayColumns = `replay_id, tenant_id, server_id, integration, quality, status, pipeline, started_at,
  ended_at, duration_ms::text AS duration_ms, size_bytes::text AS size_bytes, format_version, storage_tier,
  retention_until, visibility, revoked, archive_key`;

export function enqueueEvent(tx: Tx, event: OutgoingEvent): Promise<void> {
  return enqueue(tx, "replays", event);
}

/** Only a newer plan replaces quota, retention and hot period; the usage is this service's own. */
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

/** A tenant whose plan is not projected yet gets plan version 0 and quota 0, which its first plan replaces. */
export async function updateTenantStorageUsed(tx: Tx, tenantId: string, deltaBytes: bigint): Promise<void> {
  await tx.query(
    `INSERT INTO replays.tenant (tenant_id, storage_quota_bytes, plan_version, storage_used_bytes)
     VALUES ($1, 0, 0, GREATEST($2::bigint, 0))
     ON CONFLICT (tenant_id) DO UPDATE
       SET storage_used_bytes = GREATEST(replays.tenant.storage_used_bytes + $2::bigint, 0)`,
    [tenantId, deltaBytes.toString()],
  );
}

/** Frees storage at once (decisions.md §5); never below zero, whatever the projection saw. */
export async function updateTenantStorageFreed(tx: Tx, tenantId: string, bytes: bigint): Promise<void> {
  await tx.query(
    `UPDATE replays.tenant SET storage_used_bytes = GREATEST(storage_used_bytes - $2::int8, 0)
      WHERE tenant_id = $1`,
    [tenantId, bytes.toString()],
  );
}

export async function findTenantStorage(q: Queryable, tenantId: string): Promise<TenantStorage | undefined> {
  const { rows } = await q.query<{
    storage_quota_bytes: string;
    storage_used_bytes: string;
    plan_version: string;
    retention_days: number;
    hot_days: number;
  }>(
    `SELECT storage_quota_bytes::text, storage_used_bytes::text, plan_version::text, retention_days, hot_days
       FROM replays.tenant WHERE tenant_id = $1`,
    [tenantId],
  );
  const row = rows[0];
  return row
    ? {
        storage_quota_bytes: BigInt(row.storage_quota_bytes),
        storage_used_bytes: BigInt(row.storage_used_bytes),
        plan_version: BigInt(row.plan_version),
        retention_days: row.retention_days,
        hot_days: row.hot_days,
      }
    : undefined;
}

const serverRank: Record<ServerState, number> = { pending: 0, connected: 1, deauthorised: 2 };

/** A server only moves forward, so an event that arrives after a later one changes nothing. */
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

export async function findRecordingByServer(q: Queryable, serverId: string): Promise<string | undefined> {
  const { rows } = await q.query<{ replay_id: string }>(
    "SELECT replay_id FROM replays.replay WHERE server_id = $1 AND status = 'recording'",
    [serverId],
  );
  return rows[0]?.replay_id;
}

/** What this schema knows of one marker target (lookup-service.ts decides from it). */
export type MarkerTargetRow = {
  replay_id: string | null;
  server_id: string | null;
  started_at: Date | null;
  status: ReplayStatus | null;
  /** For a server target: the server's state here, null when this projection does not know it. */
  server_state: ServerState | null;
  purged: boolean;
};

/** In target order; an index lookup or two per target, whatever the number of replays. */
export async function findMarkerTargets(
  q: Queryable,
  targets: readonly { tenantId: string; replayId?: string; serverId?: string }[],
): Promise<MarkerTargetRow[]> {
  const { rows } = await q.query<MarkerTargetRow>(
    `SELECT r.replay_id, r.server_id, r.started_at, r.status, s.state AS server_state,
            EXISTS (SELECT 1 FROM replays.server_purged p WHERE p.server_id = t.server_id) AS purged
       FROM unnest($1::uuid[], $2::uuid[], $3::uuid[]) WITH ORDINALITY AS t(tenant_id, replay_id, server_id, ord)
       LEFT JOIN LATERAL (
         SELECT x.replay_id, x.server_id, x.started_at, x.status FROM replays.replay x
          WHERE x.replay_id = t.replay_id AND x.tenant_id = t.tenant_id
         UNION ALL
         SELECT x.replay_id, x.server_id, x.started_at, x.status FROM replays.replay x
          WHERE t.replay_id IS NULL AND x.server_id = t.server_id AND x.tenant_id = t.tenant_id
            AND x.status = 'recording'
         LIMIT 1
       ) r ON true
       LEFT JOIN replays.server s ON s.server_id = t.server_id AND s.tenant_id = t.tenant_id
      ORDER BY t.ord`,
    [targets.map((t) => t.tenantId), targets.map((t) => t.replayId ?? null), targets.map((t) => t.serverId ?? null)],
  );
  return rows;
}

/** Newest first (decisions.md §5): one index range scan from the token's position, however deep. */
export async function listReplaysByTenant(
  q: Queryable,
  tenantId: string,
  filters: ReplayFilters,
  after: ReplayPosition | undefined,
  limit: number,
): Promise<ReplayListRow[]> {
  // Planned per call: which index serves the page depends on the filters given and on the tenant's size.
  const { rows } = await q.query<ReplayListRow>(
    `${PLANNED_PER_CALL}
     SELECT ${replayColumns},
            to_char(started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS position_at
       FROM replays.replay
      WHERE tenant_id = $1
        AND ($2::uuid IS NULL OR server_id = $2::uuid)
        AND ($3::text IS NULL OR integration = $3::text)
        AND ($4::timestamptz IS NULL OR (started_at, replay_id) < ($4::timestamptz, $5::uuid))
      ORDER BY started_at DESC, replay_id DESC
      LIMIT $6`,
    [
      tenantId,
      filters.serverId ?? null,
      filters.integration ?? null,
      after?.startedAt ?? null,
      after?.replayId ?? null,
      limit,
    ],
  );
  return rows;
}

/** One replay of a tenant (undefined for another tenant's), locked for the transaction when asked. */
export async function findReplayById(
  q: Queryable,
  tenantId: string,
  replayId: string,
  lock = false,
): Promise<ReplayRow | undefined> {
  const { rows } = await q.query<ReplayRow>(
    `SELECT ${replayColumns} FROM replays.replay WHERE tenant_id = $1 AND replay_id = $2 ${lock ? "FOR UPDATE" : ""}`,
    [tenantId, replayId],
  );
  return rows[0];
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

export async function deleteReplay(tx: Tx, replayId: string): Promise<void> {
  await tx.query("DELETE FROM replays.replay WHERE replay_id = $1", [replayId]);
}

/** Rows another replica holds are skipped, so replicas never expire the same replay. */
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

/** Skips rows another transaction holds; returns how many moved. */
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
