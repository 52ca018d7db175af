import type { Queryable } from "../../lib/db/types.js";

// SQL of schema `webhooks` for the delivery log's retention (decisions.md §6.1 "Retention").

/**
 * Ended deliveries only, on the database's clock, in delivery_ended_idx order, with their attempts (no foreign key
 * cascades, migration 015). Deleted by ctid (`delivery_id IN` got a whole-table generic plan), stable since the pick
 * locks the rows; FOR UPDATE re-checks a row made pending meanwhile, and SKIP LOCKED lets replicas prune side by side.
 * Every attempt of a delivery picked is in sight: an attempt is logged only with an update of its delivery, which
 * either holds the row (skipped) or committed before the pick read it again, setting updated_at (no longer expired).
 */
export async function deleteDeliveriesExpired(q: Queryable, retentionMs: number, limit: number): Promise<number> {
  const { rows } = await q.query<{ deleted: number }>(
    `WITH d AS (
       DELETE FROM webhooks.delivery
        WHERE ctid = ANY (ARRAY(
          SELECT ctid FROM webhooks.delivery
           WHERE status <> 'pending' AND updated_at < now() - $1 * interval '1 millisecond'
           ORDER BY updated_at
           LIMIT $2
             FOR UPDATE SKIP LOCKED))
        RETURNING delivery_id
     ), attempts AS (
       DELETE FROM webhooks.attempt WHERE delivery_id = ANY (ARRAY(SELECT delivery_id FROM d))
     )
     SELECT count(*)::int AS deleted FROM d`,
    [retentionMs, limit],
  );
  return rows[0]?.deleted ?? 0;
}

/** The stats read the last 168. */
export const ATTEMPT_HOURS_KEPT = 8 * 24;

export async function deleteAttemptHoursExpired(q: Queryable, limit: number): Promise<number> {
  const { rowCount } = await q.query(
    `DELETE FROM webhooks.attempt_hourly
      WHERE ctid = ANY (ARRAY(
        SELECT ctid FROM webhooks.attempt_hourly
         WHERE hour < now() - $1 * interval '1 hour'
         LIMIT $2
           FOR UPDATE SKIP LOCKED))`,
    [ATTEMPT_HOURS_KEPT, limit],
  );
  return rowCount;
}

/** Off delivery_ended_idx; 0 when none is overdue. */
export async function deliveryLogOverdueSeconds(q: Queryable, retentionMs: number): Promise<number> {
  const { rows } = await q.query<{ overdue: number | null }>(
    `SELECT EXTRACT(EPOCH FROM now() - $1 * interval '1 millisecond' - min(updated_at))::float8 AS overdue
       FROM webhooks.delivery WHERE status <> 'pending'`,
    [retentionMs],
  );
  return Math.max(0, rows[0]?.overdue ?? 0);
}
