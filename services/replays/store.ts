import type { OutgoingEvent } from "../../lib/bus/events.js";
import { enqueue } from "../../lib/bus/outbox.js";
import type { Queryable, Tx } from "../../lib/db/types.js";
import type { Pipeline, ReplayStatus, Visibility } from "./transitions.js";

/** A replays.replay row, as every store function of the service reads it. */
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

/** A listed row also carries its started_at to the microsecond, as text: the page token's position. */
export type ReplayListRow = ReplayRow & { position_at: string };

/**
 * Where a list page starts: after the row with this (started_at, replay_id), the last of the
 * previous page. started_at is text to the microsecond (timestamptz's precision, finer than a
 * Date's), so that rows a millisecond apart or less are neither skipped nor repeated.
 */
export type ReplayPosition = { startedAt: string; replayId: string };

export type ReplayFilters = { serverId?: string; integration?: string };

/**
 * A tenant's quota and usage, and its plan's retention and hot period in days; plan_version 0 marks
 * usage recorded before its plan arrived (the retention fields then hold their defaults).
 */
export type TenantStorage = {
  storage_quota_bytes: bigint;
  storage_used_bytes: bigint;
  plan_version: bigint;
  retention_days: number;
  hot_days: number;
};

export type BlobDeletionRow = { archive_key: string; attempts: number };

// bigint columns come back as strings from pg and as numbers or strings from the embedded
// database; callers convert them with BigInt().
export const replayColumns = `replay_id, tenant_id, server_id, integration, quality, status, pipeline, started_at,
  ended_at, duration_ms::text AS duration_ms, size_bytes::text AS size_bytes, format_version, storage_tier,
  retention_until, visibility, revoked, archive_key`;

/** Records an event in this schema's outbox, in the caller's transaction. */
export function enqueueEvent(tx: Tx, event: OutgoingEvent): Promise<void> {
  return enqueue(tx, "replays", event);
}

/**
 * One page of a tenant's replays, newest first (started_at desc, replay_id desc: decisions.md §5),
 * after `after` when given, read with `limit` (the page size plus one, to know whether a replay
 * follows). The row-value comparison and the order match the (tenant_id[, server_id |
 * integration], started_at DESC, replay_id DESC) indexes of 001, so every page is one index range
 * scan from the token's position, however deep. The `IS NULL` alternatives cost nothing: each query
 * is an unnamed statement planned with its parameters, so the planner drops the unused filters and
 * keeps the row comparison as an index condition (checked with EXPLAIN on 300 000 rows).
 */
export async function listReplaysByTenant(
  q: Queryable,
  tenantId: string,
  filters: ReplayFilters,
  after: ReplayPosition | undefined,
  limit: number,
): Promise<ReplayListRow[]> {
  const { rows } = await q.query<ReplayListRow>(
    `SELECT ${replayColumns},
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

export async function deleteReplay(tx: Tx, replayId: string): Promise<void> {
  await tx.query("DELETE FROM replays.replay WHERE replay_id = $1", [replayId]);
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

/** The NOTIFY channel insertBlobDeletion signals on commit; the blob deletions worker wakes on it. */
export const blobDeletionChannel = "replays_blob_deletion";

/**
 * Queues an archive for removal from the blob store, in the transaction that drops its metadata,
 * and wakes the workers (NOTIFY is delivered only on commit).
 */
export async function insertBlobDeletion(tx: Tx, archiveKey: string): Promise<void> {
  await tx.query(
    `INSERT INTO replays.blob_deletion (archive_key) VALUES ($1)
       ON CONFLICT (archive_key) DO UPDATE SET next_attempt_at = now()`,
    [archiveKey],
  );
  await tx.query(`NOTIFY ${blobDeletionChannel}`);
}

/**
 * Claims up to `limit` due queued archives for `leaseMs`, in one statement: each claimed row is made
 * due again only when the lease runs out, so no other replica takes it meanwhile (SKIP LOCKED keeps
 * replicas claiming at once apart), and a replica that dies leaves its rows to be retried after the
 * lease. The removal itself then runs outside any transaction.
 */
export async function updateBlobDeletionsClaimed(
  q: Queryable,
  limit: number,
  leaseMs: number,
): Promise<BlobDeletionRow[]> {
  const { rows } = await q.query<BlobDeletionRow>(
    `UPDATE replays.blob_deletion AS b
        SET next_attempt_at = now() + $2 * interval '1 millisecond'
      WHERE b.archive_key IN (
        SELECT archive_key FROM replays.blob_deletion
         WHERE next_attempt_at <= now()
         ORDER BY next_attempt_at
         LIMIT $1
           FOR UPDATE SKIP LOCKED)
     RETURNING b.archive_key, b.attempts`,
    [limit, leaseMs],
  );
  return rows;
}

export async function deleteBlobDeletion(q: Queryable, archiveKey: string): Promise<void> {
  await q.query("DELETE FROM replays.blob_deletion WHERE archive_key = $1", [archiveKey]);
}

/** A failed removal: counted, and due again after `delayMs`. */
export async function updateBlobDeletionRetry(q: Queryable, archiveKey: string, delayMs: number): Promise<void> {
  await q.query(
    `UPDATE replays.blob_deletion
        SET attempts = attempts + 1, next_attempt_at = now() + $2 * interval '1 millisecond'
      WHERE archive_key = $1`,
    [archiveKey, delayMs],
  );
}
