import type { SealedColumns } from "../../lib/db/reseal-secrets.js";
import type { Queryable, Tx } from "../../lib/db/types.js";
import { bringDueForward } from "./delivery/queue-store.js";
import { type SubscriptionRow, subscriptionColumns } from "./store.js";

// SQL of schema `webhooks` for managing a subscription (decisions.md §6.1).

export const SUBSCRIPTION_SECRETS: SealedColumns = {
  table: "webhooks.subscription",
  id: "subscription_id",
  idType: "uuid",
  columns: ["secret", "previous_secret"],
};

/** Deliveries one recover queues at most (decisions.md §6.1). */
export const RECOVER_MAX = 10_000;

export async function findSubscription(
  q: Queryable,
  tenantId: string,
  subscriptionId: string,
): Promise<SubscriptionRow | undefined> {
  const { rows } = await q.query<SubscriptionRow>(
    `SELECT ${subscriptionColumns} FROM webhooks.subscription WHERE subscription_id = $1 AND tenant_id = $2`,
    [subscriptionId, tenantId],
  );
  return rows[0];
}

/** An absent key leaves its column as it is. */
export type SubscriptionChange = {
  url?: string;
  events?: readonly string[];
  disabled?: boolean;
  rateLimitPerSecond?: number | null;
};

/** Locks the row first, so two changes apply one after the other; enabling releases held deliveries. */
export async function updateSubscription(
  tx: Tx,
  tenantId: string,
  subscriptionId: string,
  change: SubscriptionChange,
): Promise<{ row: SubscriptionRow; disabled: boolean; enabled: boolean } | undefined> {
  const { rows: before } = await tx.query<{ disabled: boolean }>(
    "SELECT disabled FROM webhooks.subscription WHERE subscription_id = $1 AND tenant_id = $2 FOR UPDATE",
    [subscriptionId, tenantId],
  );
  const current = before[0];
  if (!current) return undefined;
  const disabling = change.disabled === true && !current.disabled;
  const enabling = change.disabled === false && current.disabled;
  const { rows } = await tx.query<SubscriptionRow>(
    `UPDATE webhooks.subscription
        SET url = COALESCE($2, url),
            events = COALESCE($3, events),
            rate_limit_per_second = CASE WHEN $4 THEN $5 ELSE rate_limit_per_second END,
            disabled = CASE WHEN $6 THEN true WHEN $7 THEN false ELSE disabled END,
            disabled_reason = CASE WHEN $6 THEN 'manual' WHEN $7 THEN NULL ELSE disabled_reason END,
            disabled_at = CASE WHEN $6 THEN now() WHEN $7 THEN NULL ELSE disabled_at END,
            failing_since = CASE WHEN $7 THEN NULL ELSE failing_since END
      WHERE subscription_id = $1
      RETURNING ${subscriptionColumns}`,
    [
      subscriptionId,
      change.url ?? null,
      change.events ?? null,
      change.rateLimitPerSecond !== undefined,
      change.rateLimitPerSecond ?? null,
      disabling,
      enabling,
    ],
  );
  if (disabling) await holdDeliveries(tx, [subscriptionId]);
  if (enabling) await releaseHeldDeliveries(tx, subscriptionId);
  return { row: rows[0] as SubscriptionRow, disabled: disabling, enabled: enabling };
}

/** No automatic attempt is due until enabled again; queued manual attempts still go, in-flight ones finish. */
export async function holdDeliveries(q: Queryable, subscriptionIds: readonly string[]): Promise<void> {
  if (subscriptionIds.length === 0) return;
  await q.query(
    `UPDATE webhooks.delivery SET next_attempt_at = NULL
      WHERE subscription_id = ANY ($1::uuid[]) AND status = 'pending' AND next_attempt_at IS NOT NULL`,
    [subscriptionIds],
  );
}

/** Due now; the claim sends them oldest first (time-ordered ids) and reads from the start again. */
async function releaseHeldDeliveries(tx: Tx, subscriptionId: string): Promise<void> {
  await tx.query(
    `WITH held AS (
       UPDATE webhooks.delivery SET next_attempt_at = now()
        WHERE subscription_id = $1 AND status = 'pending' AND next_attempt_at IS NULL AND manual_queued = 0
     ), due AS (
       SELECT $1::uuid AS subscription_id, now() AS due_at, '-infinity'::timestamptz AS scan_at
     )${bringDueForward("due", "scan_at")}
     SELECT 1`,
    [subscriptionId],
  );
}

/** With a grace the old secret still signs until it ends; rotating in an overlap starts from the current one. */
export async function rotateSecret(
  q: Queryable,
  tenantId: string,
  subscriptionId: string,
  secret: string,
  graceSeconds: number,
): Promise<{ previous_secret_expires_at: Date | null } | undefined> {
  const { rows } = await q.query<{ previous_secret_expires_at: Date | null }>(
    `UPDATE webhooks.subscription
        SET previous_secret = CASE WHEN $4::int > 0 THEN secret END,
            previous_secret_expires_at = CASE WHEN $4::int > 0 THEN now() + $4::int * interval '1 second' END,
            secret = $3
      WHERE subscription_id = $1 AND tenant_id = $2
      RETURNING previous_secret_expires_at`,
    [subscriptionId, tenantId, secret, graceSeconds],
  );
  return rows[0];
}

/** A manual attempt (retry_count + 1) for each failed delivery created in [since, until), oldest first. */
export async function recoverDeliveries(
  q: Queryable,
  subscriptionId: string,
  since: Date,
  until: Date,
): Promise<number> {
  const { rows } = await q.query<{ queued: string }>(
    `WITH picked AS (
       SELECT delivery_id FROM webhooks.delivery
        WHERE subscription_id = $1 AND status = 'failed' AND created_at >= $2 AND created_at < $3
        ORDER BY created_at, delivery_id
        LIMIT $4
          FOR UPDATE
     ), r AS (
       UPDATE webhooks.delivery AS d
          SET retry_count = d.retry_count + 1, manual_queued = d.manual_queued + 1, status = 'pending',
              updated_at = now()
         FROM picked
        WHERE d.delivery_id = picked.delivery_id AND d.status = 'failed'
        RETURNING d.subscription_id, '-infinity'::timestamptz AS due_at
     )${bringDueForward("r")}
     SELECT count(*) AS queued FROM r`,
    [subscriptionId, since, until, RECOVER_MAX],
  );
  return Number(rows[0]?.queued ?? 0);
}

export type AttemptCounts = { succeeded: number; failed: number };
export type SubscriptionStats = { pending: number; last24h: AttemptCounts; last7d: AttemptCounts };

/** Attempts come from the hourly counts (attempt_hourly), not the log. */
export async function subscriptionStats(q: Queryable, subscriptionId: string): Promise<SubscriptionStats> {
  const { rows } = await q.query<{
    pending: string;
    succeeded_24h: string;
    failed_24h: string;
    succeeded_7d: string;
    failed_7d: string;
  }>(
    `SELECT (SELECT count(*) FROM webhooks.delivery WHERE subscription_id = $1 AND status = 'pending') AS pending,
            COALESCE(sum(succeeded) FILTER (WHERE hour > date_trunc('hour', now()) - interval '24 hours'), 0) AS succeeded_24h,
            COALESCE(sum(failed) FILTER (WHERE hour > date_trunc('hour', now()) - interval '24 hours'), 0) AS failed_24h,
            COALESCE(sum(succeeded), 0) AS succeeded_7d,
            COALESCE(sum(failed), 0) AS failed_7d
       FROM webhooks.attempt_hourly
      WHERE subscription_id = $1 AND hour > date_trunc('hour', now()) - interval '168 hours'`,
    [subscriptionId],
  );
  const row = rows[0];
  return {
    pending: Number(row?.pending ?? 0),
    last24h: { succeeded: Number(row?.succeeded_24h ?? 0), failed: Number(row?.failed_24h ?? 0) },
    last7d: { succeeded: Number(row?.succeeded_7d ?? 0), failed: Number(row?.failed_7d ?? 0) },
  };
}
