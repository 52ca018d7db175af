import type { Queryable, Tx } from "../../lib/db/types.js";

// SQL of schema `webhooks` for the delivery log's retention (decisions.md §6.1 "Retention"), over the day partitions
// of migration 016: a day is dropped whole once none of its deliveries is pending and all ended more than the window
// ago; rows are deleted one by one only in the default partitions and in a day held past its grace.

/** A day that has partitions (UTC, YYYY-MM-DD), as the database's clock places it against the window. */
export type LogDay = {
  day: string;
  /** Every delivery of the day was made more than the window ago: it may be dropped. */
  expired: boolean;
  /** Past the window and the grace: what it still holds past the window is deleted row by row. */
  straggling: boolean;
};

/** Which of today and the `ahead` days after it (UTC, the database's clock) have no partitions yet, as days ahead. */
export async function missingLogDays(q: Queryable, ahead: number): Promise<number[]> {
  const { rows } = await q.query<{ n: number }>(
    `SELECT n FROM generate_series(0, $1::int) n
      WHERE to_regclass('webhooks.delivery_ended_' || to_char((now() AT TIME ZONE 'UTC')::date + n, 'YYYYMMDD')) IS NULL`,
    [ahead],
  );
  return rows.map((row) => row.n);
}

/** Makes the partitions of the day `daysAhead` days after today (UTC, the database's clock) unless they exist. */
export async function createLogDay(tx: Tx, daysAhead: number, lockTimeoutMs: number): Promise<boolean> {
  await setLockTimeout(tx, lockTimeoutMs);
  const { rows } = await tx.query<{ made: boolean }>(
    "SELECT webhooks.create_log_day((now() AT TIME ZONE 'UTC')::date + $1::int) AS made",
    [daysAhead],
  );
  return rows[0]?.made === true;
}

export async function listLogDays(q: Queryable, retentionMs: number, graceMs: number): Promise<LogDay[]> {
  const { rows } = await q.query<LogDay>(
    `SELECT to_char(d, 'YYYY-MM-DD') AS day,
            ((d + 1)::timestamp AT TIME ZONE 'UTC') <= now() - $1 * interval '1 millisecond' AS expired,
            ((d + 1)::timestamp AT TIME ZONE 'UTC') <= now() - ($1 + $2) * interval '1 millisecond' AS straggling
       FROM webhooks.log_days() d`,
    [retentionMs, graceMs],
  );
  return rows;
}

/** Drops the day's partitions if it holds nothing pending nor ended inside the window (webhooks.drop_log_day). */
export async function dropLogDay(tx: Tx, day: string, retentionMs: number, lockTimeoutMs: number): Promise<boolean> {
  await setLockTimeout(tx, lockTimeoutMs);
  const { rows } = await tx.query<{ dropped: boolean }>(
    "SELECT webhooks.drop_log_day($1::date, now() - $2 * interval '1 millisecond') AS dropped",
    [day, retentionMs],
  );
  return rows[0]?.dropped === true;
}

/** A day's partitions by the name they end with; anything else is refused before it reaches SQL. */
function partitionSuffix(day: string | "default"): string {
  if (day === "default") return day;
  if (!/^\d{4}-\d{2}-\d{2}$/.test(day)) throw new Error(`not a log day: ${day}`);
  return day.replaceAll("-", "");
}

/**
 * Deletes up to `limit` of a day's (or the default partitions') deliveries that ended more than the window ago, oldest
 * ended first, with their attempts, in one statement; the count deleted. By ctid within the one partition (a ctid is
 * a partition's own), stable since the pick locks the rows; SKIP LOCKED lets replicas prune side by side. Every
 * attempt of a delivery picked is in sight: an attempt is logged only with an update of its delivery, which either
 * holds the row (skipped) or committed before the pick read it, setting updated_at (no longer expired).
 */
export async function deleteExpiredRows(
  q: Queryable,
  day: string | "default",
  retentionMs: number,
  limit: number,
): Promise<number> {
  const suffix = partitionSuffix(day);
  const deliveries = `webhooks.delivery_ended_${suffix}`;
  const { rows } = await q.query<{ deleted: number }>(
    `WITH d AS (
       DELETE FROM ${deliveries}
        WHERE ctid = ANY (ARRAY(
          SELECT ctid FROM ${deliveries}
           WHERE updated_at < now() - $1 * interval '1 millisecond'
           ORDER BY updated_at
           LIMIT $2
             FOR UPDATE SKIP LOCKED))
        RETURNING delivery_id
     ), attempts AS (
       DELETE FROM webhooks.attempt_${suffix} WHERE delivery_id = ANY (ARRAY(SELECT delivery_id FROM d))
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

/**
 * How long past its due the oldest ended delivery is; 0 when none is. A delivery is due to go within a day past the
 * window and the grace (its day dropped, or its row deleted as a straggler), from the ends in each day's index.
 */
export async function deliveryLogOverdueSeconds(q: Queryable, retentionMs: number, graceMs: number): Promise<number> {
  const { rows } = await q.query<{ overdue: number | null }>(
    `SELECT EXTRACT(EPOCH FROM now() - ($1 + $2) * interval '1 millisecond' - interval '1 day'
                               - min(updated_at))::float8 AS overdue
       FROM webhooks.delivery_ended`,
    [retentionMs, graceMs],
  );
  return Math.max(0, rows[0]?.overdue ?? 0);
}

async function setLockTimeout(tx: Tx, ms: number): Promise<void> {
  await tx.query("SELECT set_config('lock_timeout', $1, true)", [`${Math.max(1, Math.round(ms))}ms`]);
}
