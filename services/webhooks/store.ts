import { PLANNED_PER_CALL } from "../../lib/db/statements.js";
import type { Queryable, Tx } from "../../lib/db/types.js";
import { bringDueForward, type ClaimedDelivery, signingSecrets } from "./delivery/queue-store.js";

// The API's half of schema `webhooks`; the worker's half (claim, record, release) is delivery/queue-store.ts.

export type SubscriptionRow = {
  subscription_id: string;
  url: string;
  events: string[];
  created_at: Date;
  disabled: boolean;
  disabled_reason: "manual" | "failing" | null;
  disabled_at: Date | null;
  rate_limit_per_second: number | null;
  /** Null once the overlap is over, whatever the column holds. */
  previous_secret_expires_at: Date | null;
};

export const subscriptionColumns = `subscription_id, url, events, created_at, disabled, disabled_reason, disabled_at,
  rate_limit_per_second,
  CASE WHEN previous_secret_expires_at > now() THEN previous_secret_expires_at END AS previous_secret_expires_at`;

export async function insertSubscription(
  q: Queryable,
  s: { subscriptionId: string; tenantId: string; url: string; events: readonly string[]; secret: string },
): Promise<SubscriptionRow> {
  // Its subscription_due row ('infinity': nothing pending) is made up front, for bringDueForward to find.
  const { rows } = await q.query<SubscriptionRow>(
    `WITH s AS (
       INSERT INTO webhooks.subscription (subscription_id, tenant_id, url, events, secret)
       VALUES ($1, $2, $3, $4, $5)
       RETURNING ${subscriptionColumns}
     ), due AS (
       INSERT INTO webhooks.subscription_due (subscription_id, due_at) SELECT subscription_id, 'infinity' FROM s
     )
     SELECT * FROM s`,
    [s.subscriptionId, s.tenantId, s.url, s.events, s.secret],
  );
  return rows[0] as SubscriptionRow;
}

export async function listSubscriptions(q: Queryable, tenantId: string): Promise<SubscriptionRow[]> {
  const { rows } = await q.query<SubscriptionRow>(
    `SELECT ${subscriptionColumns} FROM webhooks.subscription
      WHERE tenant_id = $1 ORDER BY created_at, subscription_id`,
    [tenantId],
  );
  return rows;
}

export async function existsSubscription(q: Queryable, tenantId: string, subscriptionId: string): Promise<boolean> {
  const { rows } = await q.query("SELECT 1 FROM webhooks.subscription WHERE subscription_id = $1 AND tenant_id = $2", [
    subscriptionId,
    tenantId,
  ]);
  return rows.length > 0;
}

/**
 * Removes the subscription with its deliveries and their attempts; false when the tenant has none by that id. Three
 * statements, each on a snapshot taken after the one before (no foreign keys do it, migration 015): the subscription
 * first, which waits for a fan-out writing to it (its KEY SHARE lock) and keeps any later one out; then its deliveries
 * locked, which waits for every statement that logs an attempt (each updates its delivery); then both deleted, with
 * every attempt now in sight.
 */
export async function deleteSubscription(tx: Tx, tenantId: string, subscriptionId: string): Promise<boolean> {
  const { rowCount } = await tx.query(
    "DELETE FROM webhooks.subscription WHERE subscription_id = $1 AND tenant_id = $2",
    [subscriptionId, tenantId],
  );
  if (rowCount === 0) return false;
  await tx.query(
    "SELECT count(*) FROM (SELECT 1 FROM webhooks.delivery WHERE subscription_id = $1 FOR UPDATE) AS locked",
    [subscriptionId],
  );
  await tx.query(
    `WITH d AS (DELETE FROM webhooks.delivery WHERE subscription_id = $1 RETURNING delivery_id)
     DELETE FROM webhooks.attempt WHERE delivery_id = ANY (ARRAY(SELECT delivery_id FROM d))`,
    [subscriptionId],
  );
  return true;
}

export type FanOutTarget = { subscription_id: string; url: string; secret: string };

/** The tenant's subscriptions that name `event`: where its deliveries go. */
export async function listFanOutTargets(q: Queryable, tenantId: string, event: string): Promise<FanOutTarget[]> {
  const { rows } = await q.query<FanOutTarget>(
    "SELECT subscription_id, url, secret FROM webhooks.subscription WHERE tenant_id = $1 AND $2 = ANY (events)",
    [tenantId, event],
  );
  return rows;
}

export type FanOutEvent = {
  tenantId: string;
  eventId: string;
  event: string;
  body: string;
  firstAttemptAt: Date;
  traceparent?: string | undefined;
};

/** The caps of what a fan-out leases to its process's worker, as claimDeliveries takes them. */
export type FanOutLease = {
  owner: string;
  leaseMs: number;
  perSubscription: number;
  limit: number;
  busy: ReadonlyMap<string, number>;
};

/** What a fan-out stored: the deliveries leased to attempt at once (as claimed), and how many wait for the worker. */
export type FanOut = { leased: ClaimedDelivery[]; waiting: number };

/**
 * One delivery per subscription and event, in one statement; in the transaction that records the events in the inbox,
 * which is what keeps a redelivered event from fanning out again (migration 015). With `lease`, due-now
 * deliveries are leased (their attempts counted) before anything is sent, so every request sent is on its delivery.
 */
export async function insertDeliveries(tx: Tx, events: readonly FanOutEvent[], lease?: FanOutLease): Promise<FanOut> {
  if (events.length === 0) return { leased: [], waiting: 0 };
  // Rate-limited subscriptions are left to the claims, which keep the rate; a leased delivery is due when its lease
  // ends, should its holder stop. Scalar subqueries keep the generic plan, as in claimDeliveries.
  // The leased deliveries come back whole, the others as one count: most of a backlog's fan-out waits for the claims,
  // and returning each of its rows (its body among them) cost more than the statement's own writes. Their URL and
  // secrets are read by the subscription's key: joined back to `c` (both estimated at one row), Postgres compared
  // every delivery with every other, 93 of a 680-delivery call's 123 ms. The subscriptions written to are locked
  // (KEY SHARE, as a foreign key would, once each) and written to only if still there once locked: a delete waits for
  // the fan-out to commit and then takes its deliveries (deleteSubscription), and a fan-out after it writes none.
  const { rows } = await tx.query<ClaimedDelivery & { waiting: number | null }>(
    `WITH e AS (
       SELECT * FROM unnest((SELECT $1::uuid[]), (SELECT $2::uuid[]), (SELECT $3::text[]), (SELECT $4::text[]),
                            (SELECT $5::timestamptz[]), (SELECT $6::text[]), (SELECT $7::bool[]))
         AS e(event_id, tenant_id, event, body, first_attempt_at, traceparent, due_now)
     ), busy AS (
       SELECT * FROM unnest((SELECT $10::uuid[]), (SELECT $11::int[])) AS b(subscription_id, n)
     ), t AS (
       SELECT e.*, s.subscription_id, s.url, ${signingSecrets("s")}, s.disabled,
              e.due_now AND NOT s.disabled AND s.rate_limit_per_second IS NULL
                AND COALESCE(b.n, 0) + row_number() OVER (PARTITION BY s.subscription_id, e.due_now ORDER BY e.event_id)
                    <= (SELECT $12::int) AS due
         FROM e
         JOIN webhooks.subscription s ON s.tenant_id = e.tenant_id AND e.event = ANY (s.events)
         LEFT JOIN busy b ON b.subscription_id = s.subscription_id
     ), locked AS (
       SELECT subscription_id FROM webhooks.subscription
        WHERE subscription_id = ANY (ARRAY(SELECT DISTINCT subscription_id FROM t))
          FOR KEY SHARE
     ), c AS (
       SELECT t.*, t.due AND count(*) FILTER (WHERE t.due) OVER (ORDER BY t.event_id, t.subscription_id)
                             <= (SELECT $13::int) AS leased
         FROM t WHERE t.subscription_id IN (SELECT subscription_id FROM locked)
     ), d AS (
       INSERT INTO webhooks.delivery
              (delivery_id, tenant_id, subscription_id, event_id, event, body, status, next_attempt_at,
               attempt_count, lease_owner, lease_expires_at, attempt_started_at, traceparent)
       SELECT webhooks.uuid7(), c.tenant_id, c.subscription_id, c.event_id, c.event, c.body, 'pending',
              CASE WHEN NOT c.disabled THEN c.first_attempt_at END, c.leased::int,
              CASE WHEN c.leased THEN $8::text END,
              CASE WHEN c.leased THEN now() + $9::int * interval '1 millisecond' END,
              CASE WHEN c.leased THEN now() END,
              c.traceparent
         FROM c
       RETURNING delivery_id, subscription_id, event_id, event, body, traceparent, lease_owner IS NOT NULL AS leased,
                 COALESCE(lease_expires_at, next_attempt_at) AS due_at, next_attempt_at
     )${bringDueForward("d", "next_attempt_at")}
     SELECT d.delivery_id, d.subscription_id, d.event_id, d.event, d.body, d.traceparent, NULL::int AS waiting,
            s.url, ${signingSecrets("s")}, false AS manual, 0 AS automatic_attempts, 1 AS attempt
       FROM d JOIN webhooks.subscription s ON s.subscription_id = d.subscription_id
      WHERE d.leased
     UNION ALL
     SELECT NULL, NULL, NULL, NULL, NULL, NULL, count(*)::int, NULL, NULL, NULL, NULL, NULL, NULL FROM d WHERE NOT d.leased`,
    [
      events.map((e) => e.eventId),
      events.map((e) => e.tenantId),
      events.map((e) => e.event),
      events.map((e) => e.body),
      events.map((e) => e.firstAttemptAt),
      events.map((e) => e.traceparent ?? null),
      // Due by the clock that computed firstAttemptAt (this process's), not the database's.
      events.map((e) => lease !== undefined && e.firstAttemptAt.getTime() <= Date.now()),
      lease?.owner ?? null,
      lease?.leaseMs ?? 0,
      [...(lease?.busy.keys() ?? [])],
      [...(lease?.busy.values() ?? [])],
      lease?.perSubscription ?? 0,
      lease?.limit ?? 0,
    ],
  );
  const leased: ClaimedDelivery[] = [];
  let waiting = 0;
  for (const { waiting: count, ...row } of rows) {
    if (count === null) leased.push(row);
    else waiting = count;
  }
  return { leased, waiting };
}

export type DeliveryRow = {
  delivery_id: string;
  subscription_id: string;
  event_id: string;
  event: string;
  status: "pending" | "succeeded" | "failed";
  retry_count: number;
  last_status_code: number | null;
  last_error: string | null;
  /** The soonest attempt due: a queued manual one (now), else the automatic schedule's. */
  next_attempt_at: Date | null;
  created_at: Date;
  updated_at: Date;
};

export type AttemptRow = {
  delivery_id: string;
  attempt: number;
  trigger: "automatic" | "manual";
  started_at: Date;
  duration_ms: number;
  status_code: number | null;
  error: string | null;
};

const deliveryColumns = `delivery_id, subscription_id, event_id, event, status, retry_count, last_status_code,
  last_error, CASE WHEN manual_queued > 0 THEN updated_at ELSE next_attempt_at END AS next_attempt_at,
  created_at, updated_at`;

/**
 * What the API shows of the log (decisions.md §6.1 "Retention"): a delivery that ended more than the window ago is
 * gone, though its row stays until its day's partition is dropped (log-retention.ts). `window` names the parameter
 * that holds the window in milliseconds.
 */
const inSight = (window: string) =>
  `(status = 'pending' OR updated_at >= now() - ${window}::float8 * interval '1 millisecond')`;

/** A position in a delivery log: the last delivery of the previous page. */
export type DeliveryPosition = { createdAt: string; deliveryId: string };

/** How far back from its position a page of the delivery log looks first, before it looks at every day. */
const RECENT_DAYS_MS = 86_400_000;

type LogRow = DeliveryRow & { position_at: string };

/**
 * A page of the delivery log, newest first; `position_at` keeps the microseconds a JS Date drops, for the token.
 *
 * A page first reads the day partitions (migration 016) of the day before its position, by the id's time, which is
 * never before created_at (the fan-out makes both, created_at being its transaction's start); across every day, a
 * page of a big log began with a row from each (1.7x a page at 30 days, npm run bench scale). Rows that read leaves
 * out were made before that, so it is the page when it is full, its last row was made since, and the subscription has
 * no delivery whose id tells nothing of its time left out (a version 4 id, from before migration 009, pending or in
 * the default partition); else every day is read.
 */
export async function listDeliveries(
  q: Queryable,
  tenantId: string,
  subscriptionId: string,
  after: DeliveryPosition | undefined,
  limit: number,
  retentionMs: number,
): Promise<LogRow[]> {
  const page: LogPage = { tenantId, subscriptionId, after, limit, retentionMs };
  const madeSince = new Date((after ? Date.parse(after.createdAt) : Date.now()) - RECENT_DAYS_MS);
  const recent = await pageOfDeliveries(q, page, madeSince);
  const last = recent.at(-1);
  if (recent.length === limit && last !== undefined && last.created_at >= madeSince && !last.ids_out_of_order)
    return recent;
  return pageOfDeliveries(q, page, null);
}

type LogPage = {
  tenantId: string;
  subscriptionId: string;
  after: DeliveryPosition | undefined;
  limit: number;
  retentionMs: number;
};

/** listDeliveries' read: of the deliveries whose ids were made since `madeSince`, or of all. */
async function pageOfDeliveries(
  q: Queryable,
  { tenantId, subscriptionId, after, limit, retentionMs }: LogPage,
  madeSince: Date | null,
): Promise<(LogRow & { ids_out_of_order: boolean })[]> {
  // Ids that are not version 7 (UUID's version digit) tell nothing of when they were made.
  const before = "delivery_id < webhooks.uuid7_floor($7::timestamptz) AND substr(delivery_id::text, 15, 1) <> '7'";
  // Planned per call: a generic plan read a big subscription's whole log to sort it (npm run bench scale), and the
  // bound on ids must be a constant for the planner to leave the other days out.
  const { rows } = await q.query<LogRow & { ids_out_of_order: boolean }>(
    `${PLANNED_PER_CALL}
     SELECT ${deliveryColumns},
            to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS position_at,
            $7::timestamptz IS NOT NULL
              AND (EXISTS (SELECT 1 FROM webhooks.delivery_pending WHERE subscription_id = $1 AND ${before})
                   OR EXISTS (SELECT 1 FROM webhooks.delivery_ended_default WHERE subscription_id = $1 AND ${before}))
              AS ids_out_of_order
       FROM webhooks.delivery
      WHERE subscription_id = $1 AND tenant_id = $2
        AND ($3::timestamptz IS NULL OR (created_at, delivery_id) < ($3::timestamptz, $4::uuid))
        AND ($7::timestamptz IS NULL OR delivery_id >= webhooks.uuid7_floor($7::timestamptz))
        AND ${inSight("$6")}
      ORDER BY created_at DESC, delivery_id DESC
      LIMIT $5`,
    [subscriptionId, tenantId, after?.createdAt ?? null, after?.deliveryId ?? null, limit, retentionMs, madeSince],
  );
  return rows;
}

export async function findDelivery(
  q: Queryable,
  tenantId: string,
  deliveryId: string,
  retentionMs: number,
): Promise<DeliveryRow | undefined> {
  const { rows } = await q.query<DeliveryRow>(
    `SELECT ${deliveryColumns} FROM webhooks.delivery WHERE delivery_id = $1 AND tenant_id = $2 AND ${inSight("$3")}`,
    [deliveryId, tenantId, retentionMs],
  );
  return rows[0];
}

/** Every attempt of the deliveries that ended, newest first within each (one in flight is not listed yet). */
export async function listAttempts(q: Queryable, deliveryIds: readonly string[]): Promise<AttemptRow[]> {
  if (deliveryIds.length === 0) return [];
  const { rows } = await q.query<AttemptRow>(
    `SELECT delivery_id, attempt, trigger, started_at, duration_ms, status_code, error
       FROM webhooks.attempt WHERE delivery_id = ANY ($1::uuid[]) AND duration_ms IS NOT NULL
      ORDER BY delivery_id, attempt DESC`,
    [deliveryIds],
  );
  return rows;
}

/** A manual replay (decisions.md §6); undefined when absent or succeeded (findDelivery tells the two apart). */
export async function updateDeliveryReplayed(
  q: Queryable,
  tenantId: string,
  deliveryId: string,
  retentionMs: number,
): Promise<DeliveryRow | undefined> {
  // A failed delivery moves back to the pending partition (migration 016); one that ended past the window is gone.
  const { rows } = await q.query<DeliveryRow>(
    `WITH r AS (
       UPDATE webhooks.delivery
          SET retry_count = retry_count + 1, manual_queued = manual_queued + 1, status = 'pending', updated_at = now()
        WHERE delivery_id = $1 AND tenant_id = $2 AND status <> 'succeeded' AND ${inSight("$3")}
        RETURNING ${deliveryColumns}
     ), due AS (
       SELECT subscription_id, '-infinity'::timestamptz AS due_at FROM r
     )${bringDueForward("due")}
     SELECT * FROM r`,
    [deliveryId, tenantId, retentionMs],
  );
  return rows[0];
}
