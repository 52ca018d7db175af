import type { Queryable } from "../../lib/db/types.js";

// SQL of schema `webhooks` for the delivery log's retention (decisions.md §6.1 "Retention"): ended
// deliveries are dropped once their window has passed, oldest first, a bounded batch a statement.

/**
 * Deletes up to `limit` ended (succeeded or failed) deliveries whose last change is older than
 * `retentionMs`, oldest first, and returns how many went; a pending delivery is never touched. The
 * window is measured on the database's clock, the one that set updated_at. The batch is read in
 * updated_at order from delivery_ended_idx (migration 007), so a statement reads about the rows it
 * deletes however long the log is, and steps over the index entries of rows deleted since the
 * table's last vacuum (1 500 pages after 420 000 deletions). Their attempts go by the ON DELETE
 * CASCADE: deleting them first in the same statement measured twice the work, since the cascade's
 * trigger still runs for each delivery.
 * The rows are deleted by the ctid their pick returned: with `delivery_id IN (…)` the generic plan
 * of the prepared statement joined the batch to a scan of the whole table. A ctid cannot change
 * under us because the pick locks the rows; FOR UPDATE re-checks the conditions on a row changed
 * since the statement began, so a manual replay that made a delivery pending meanwhile keeps it,
 * and SKIP LOCKED leaves a row being replayed or recorded right now to a later round and lets two
 * replicas prune side by side, each its own batch.
 */
export async function deleteDeliveriesExpired(q: Queryable, retentionMs: number, limit: number): Promise<number> {
  const { rowCount } = await q.query(
    `DELETE FROM webhooks.delivery
      WHERE ctid = ANY (ARRAY(
        SELECT ctid FROM webhooks.delivery
         WHERE status <> 'pending' AND updated_at < now() - $1 * interval '1 millisecond'
         ORDER BY updated_at
         LIMIT $2
           FOR UPDATE SKIP LOCKED))`,
    [retentionMs, limit],
  );
  return rowCount;
}

/** How long attempt_hourly keeps an hour: the stats read the last 168. */
export const ATTEMPT_HOURS_KEPT = 8 * 24;

/** Deletes up to `limit` hourly attempt counts older than ATTEMPT_HOURS_KEPT; returns how many went. */
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

/** How far past the window the oldest ended delivery still kept is (0 when none is), off delivery_ended_idx. */
export async function deliveryLogOverdueSeconds(q: Queryable, retentionMs: number): Promise<number> {
  const { rows } = await q.query<{ overdue: number | null }>(
    `SELECT EXTRACT(EPOCH FROM now() - $1 * interval '1 millisecond' - min(updated_at))::float8 AS overdue
       FROM webhooks.delivery WHERE status <> 'pending'`,
    [retentionMs],
  );
  return Math.max(0, rows[0]?.overdue ?? 0);
}
