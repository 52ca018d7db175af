import type { Queryable, Tx } from "../../lib/db/types.js";

// SQL of schema `webhooks`: subscriptions, deliveries and their attempts. Over ~350 lines because
// it holds two jobs for now: the API's half (subscriptions, the fan-out, the delivery log, manual
// replay) and, from ClaimedDelivery on, the delivery worker's queue (claim, record, release). The
// two share the delivery columns and the fan-out leases through the worker's claim; the queue half
// moves out (a store of its own beside delivery/worker.ts) once the worker's split lands, which
// then imports it instead of this file.

export type SubscriptionRow = {
  subscription_id: string;
  url: string;
  events: string[];
  created_at: Date;
};

const subscriptionColumns = "subscription_id, url, events, created_at";

export async function insertSubscription(
  q: Queryable,
  s: { subscriptionId: string; tenantId: string; url: string; events: readonly string[]; secret: string },
): Promise<SubscriptionRow> {
  const { rows } = await q.query<SubscriptionRow>(
    `INSERT INTO webhooks.subscription (subscription_id, tenant_id, url, events, secret)
     VALUES ($1, $2, $3, $4, $5)
     RETURNING ${subscriptionColumns}`,
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

/** Removes the subscription with its deliveries and their attempts; false when the tenant has none by that id. */
export async function deleteSubscription(q: Queryable, tenantId: string, subscriptionId: string): Promise<boolean> {
  const { rowCount } = await q.query(
    "DELETE FROM webhooks.subscription WHERE subscription_id = $1 AND tenant_id = $2",
    [subscriptionId, tenantId],
  );
  return rowCount > 0;
}

/** A subscription an event fans out to, with what an attempt needs. */
export type FanOutTarget = { subscription_id: string; url: string; secret: string };

/** The tenant's subscriptions that name `event`: where its deliveries go. */
export async function listFanOutTargets(q: Queryable, tenantId: string, event: string): Promise<FanOutTarget[]> {
  const { rows } = await q.query<FanOutTarget>(
    "SELECT subscription_id, url, secret FROM webhooks.subscription WHERE tenant_id = $1 AND $2 = ANY (events)",
    [tenantId, event],
  );
  return rows;
}

/** One event for insertDeliveries. */
export type FanOutEvent = {
  tenantId: string;
  eventId: string;
  event: string;
  body: string;
  firstAttemptAt: Date;
  traceparent?: string | undefined;
};

/**
 * Which new deliveries the fan-out leases to this process's worker, to attempt as soon as the
 * fan-out commits: those due at once, at most `limit` in all and, per subscription, up to
 * `perSubscription` counting what the worker has in flight already (`busy`, as claimDeliveries).
 */
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
 * The fan-out of events, all in one statement: for each, a delivery to every subscription of its
 * tenant that names the event, all carrying the event's body, due at their event's
 * `firstAttemptAt`. With `lease`, those due at once are leased to this process's worker within its
 * caps, their first attempt opened in the log (claimDeliveries), and come back with what their
 * attempt needs: nothing is sent before the deliveries and their attempts are stored, so every
 * request sent is in the log (issue 28). A subscription deleted meanwhile
 * gets nothing; one created meanwhile that names the event gets a delivery. An event the bus
 * delivers again adds nothing (one delivery per subscription and event). Every array, the limit
 * and the cap are read through scalar subqueries, as claimDeliveries's, so that the prepared
 * statement settles on its generic plan.
 */
export async function insertDeliveries(tx: Tx, events: readonly FanOutEvent[], lease?: FanOutLease): Promise<FanOut> {
  if (events.length === 0) return { leased: [], waiting: 0 };
  const { rows } = await tx.query<ClaimedDelivery & { leased: boolean }>(
    `WITH e AS (
       SELECT * FROM unnest((SELECT $1::uuid[]), (SELECT $2::uuid[]), (SELECT $3::text[]), (SELECT $4::text[]),
                            (SELECT $5::timestamptz[]), (SELECT $6::text[]), (SELECT $7::bool[]))
         AS e(event_id, tenant_id, event, body, first_attempt_at, traceparent, due_now)
     ), busy AS (
       SELECT * FROM unnest((SELECT $10::uuid[]), (SELECT $11::int[])) AS b(subscription_id, n)
     ), t AS (
       SELECT e.*, s.subscription_id, s.url, s.secret,
              e.due_now
                AND COALESCE(b.n, 0) + row_number() OVER (PARTITION BY s.subscription_id, e.due_now ORDER BY e.event_id)
                    <= (SELECT $12::int) AS due
         FROM e
         JOIN webhooks.subscription s ON s.tenant_id = e.tenant_id AND e.event = ANY (s.events)
         LEFT JOIN busy b ON b.subscription_id = s.subscription_id
     ), c AS (
       SELECT t.*, t.due AND count(*) FILTER (WHERE t.due) OVER (ORDER BY t.event_id, t.subscription_id)
                             <= (SELECT $13::int) AS leased
         FROM t
     ), d AS (
       INSERT INTO webhooks.delivery
              (delivery_id, tenant_id, subscription_id, event_id, event, body, status, next_attempt_at,
               attempt_count, lease_owner, lease_expires_at, traceparent)
       SELECT gen_random_uuid(), c.tenant_id, c.subscription_id, c.event_id, c.event, c.body, 'pending',
              c.first_attempt_at, c.leased::int,
              CASE WHEN c.leased THEN $8::text END,
              CASE WHEN c.leased THEN now() + $9::int * interval '1 millisecond' END,
              c.traceparent
         FROM c
       ON CONFLICT (subscription_id, event_id) DO NOTHING
       RETURNING delivery_id, subscription_id, event_id, event, body, traceparent, lease_owner IS NOT NULL AS leased
     ), opened AS (
       INSERT INTO webhooks.attempt (delivery_id, attempt, trigger, started_at)
       SELECT d.delivery_id, 1, 'automatic', now() FROM d WHERE d.leased
     )
     SELECT d.delivery_id, d.subscription_id, d.event_id, d.event, d.body, d.traceparent, d.leased,
            CASE WHEN d.leased THEN c.url END AS url, CASE WHEN d.leased THEN c.secret END AS secret,
            false AS manual, 0 AS automatic_attempts, 1 AS attempt
       FROM d JOIN c USING (subscription_id, event_id)`,
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
  for (const { leased: isLeased, ...row } of rows) {
    if (isLeased) leased.push(row);
    else waiting++;
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

/** A position in a delivery log: the last delivery of the previous page. */
export type DeliveryPosition = { createdAt: string; deliveryId: string };

/**
 * One page of a subscription's delivery log, newest first, after `after` when given. `position_at`
 * is created_at to the microsecond, for the next page's token (a JS Date keeps milliseconds only).
 */
export async function listDeliveries(
  q: Queryable,
  tenantId: string,
  subscriptionId: string,
  after: DeliveryPosition | undefined,
  limit: number,
): Promise<(DeliveryRow & { position_at: string })[]> {
  const { rows } = await q.query<DeliveryRow & { position_at: string }>(
    `SELECT ${deliveryColumns},
            to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS position_at
       FROM webhooks.delivery
      WHERE subscription_id = $1 AND tenant_id = $2
        AND ($3::timestamptz IS NULL OR (created_at, delivery_id) < ($3::timestamptz, $4::uuid))
      ORDER BY created_at DESC, delivery_id DESC
      LIMIT $5`,
    [subscriptionId, tenantId, after?.createdAt ?? null, after?.deliveryId ?? null, limit],
  );
  return rows;
}

export async function findDelivery(
  q: Queryable,
  tenantId: string,
  deliveryId: string,
): Promise<DeliveryRow | undefined> {
  const { rows } = await q.query<DeliveryRow>(
    `SELECT ${deliveryColumns} FROM webhooks.delivery WHERE delivery_id = $1 AND tenant_id = $2`,
    [deliveryId, tenantId],
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

/**
 * A manual replay (decisions.md §6): one more attempt queued at once, retry_count + 1, the delivery
 * pending until that attempt ends. Resolves to the delivery, or undefined when the tenant has no
 * delivery by that id that has not succeeded (findDelivery tells the two apart).
 */
export async function updateDeliveryReplayed(
  q: Queryable,
  tenantId: string,
  deliveryId: string,
): Promise<DeliveryRow | undefined> {
  const { rows } = await q.query<DeliveryRow>(
    `UPDATE webhooks.delivery
        SET retry_count = retry_count + 1, manual_queued = manual_queued + 1, status = 'pending', updated_at = now()
      WHERE delivery_id = $1 AND tenant_id = $2 AND status <> 'succeeded'
      RETURNING ${deliveryColumns}`,
    [deliveryId, tenantId],
  );
  return rows[0];
}

// When a pending delivery's next attempt is due: a queued manual attempt at once, else the
// automatic schedule's. Word for word the expression of delivery_due_idx, so the index serves it.
const dueAt = "(CASE WHEN manual_queued > 0 THEN '-infinity'::timestamptz ELSE next_attempt_at END)";

/** A delivery claimed for one attempt, with what the attempt needs. */
export type ClaimedDelivery = {
  delivery_id: string;
  subscription_id: string;
  event_id: string;
  event: string;
  body: string;
  url: string;
  secret: string;
  /** A queued manual attempt goes first; it leaves the automatic schedule as it is. */
  manual: boolean;
  /** Automatic attempts made before this one. */
  automatic_attempts: number;
  /** The trace of the event (its fan-out's hop), when it had one. */
  traceparent: string | null;
  /** The number of the attempt opened for it in the log, which its record closes. */
  attempt: number;
};

/**
 * The errors of attempts whose outcome is not known: opened in the log, and their sender stopped
 * before it recorded an answer (killed, or lost its lease), cut them short at shutdown, or never
 * sent them. The receiver may have had the request (or, not sent, did not).
 */
export const unknownOutcome = {
  abandoned: "no answer recorded: the sender stopped",
  cutShort: "cut short: the sender stopped",
  notSent: "not sent: the sender was stopping",
} as const;
const ABANDONED = unknownOutcome.abandoned;

/**
 * Claims due deliveries for one attempt each under a lease (lib/worker/lease.ts's rules, with a
 * per-subscription cap): at most `limit` in all, soonest due first, and at most `perSubscription`
 * in flight for one subscription in this replica, counting those it has in flight already (`busy`),
 * so that a receiver that hangs holds a few of its slots and never all of them. Each subscription
 * is probed through delivery_due_idx, so a backlog of one subscription is never scanned whole.
 * The arrays and the limit are read through scalar subqueries, hidden from the planner: a custom
 * plan that saw them was estimated cheaper than the generic one, and Postgres planned this
 * statement anew at every claim (the same plan either way; see updateServersSeen in the servers
 * store). Hidden, the prepared statement settles on its generic plan. Each claim opens its attempt in
 * the log (numbered from the delivery's count) before the request is sent, and closes as abandoned
 * the one before it if a previous holder left it open (each claim does, so no older one is open).
 */
export async function claimDeliveries(
  q: Queryable,
  claim: {
    owner: string;
    leaseMs: number;
    perSubscription: number;
    limit: number;
    busy: ReadonlyMap<string, number>;
  },
): Promise<ClaimedDelivery[]> {
  const { rows } = await q.query<ClaimedDelivery>(
    `WITH busy AS (
       SELECT * FROM unnest((SELECT $5::uuid[]), (SELECT $6::int[])) AS b(subscription_id, n)
     ), d AS (
       UPDATE webhooks.delivery AS d
          SET lease_owner = $1, lease_expires_at = now() + $2 * interval '1 millisecond',
              attempt_count = d.attempt_count + 1
         FROM (
           SELECT c.delivery_id, s.url, s.secret
             FROM webhooks.subscription s
             LEFT JOIN busy b ON b.subscription_id = s.subscription_id
             CROSS JOIN LATERAL (
               SELECT x.delivery_id, ${dueAt} AS due
                 FROM webhooks.delivery x
                WHERE x.subscription_id = s.subscription_id AND x.status = 'pending' AND ${dueAt} <= now()
                  AND (x.lease_expires_at IS NULL OR x.lease_expires_at <= now())
                ORDER BY ${dueAt}
                LIMIT GREATEST($3 - COALESCE(b.n, 0), 0)
                  FOR UPDATE OF x SKIP LOCKED
             ) c
            WHERE COALESCE(b.n, 0) < $3
            ORDER BY c.due
            LIMIT (SELECT $4::int)
         ) AS picked
        WHERE d.delivery_id = picked.delivery_id
        RETURNING d.delivery_id, d.subscription_id, d.event_id, d.event, d.body, picked.url, picked.secret,
                  d.manual_queued > 0 AS manual, d.automatic_attempts, d.traceparent, d.attempt_count AS attempt
     ), abandoned AS (
       UPDATE webhooks.attempt AS a
          SET duration_ms = GREATEST((EXTRACT(EPOCH FROM (now() - a.started_at)) * 1000)::int, 0), error = '${ABANDONED}'
         FROM d
        WHERE a.delivery_id = d.delivery_id AND a.attempt = d.attempt - 1 AND a.duration_ms IS NULL
     ), opened AS (
       INSERT INTO webhooks.attempt (delivery_id, attempt, trigger, started_at)
       SELECT delivery_id, attempt, CASE WHEN manual THEN 'manual' ELSE 'automatic' END, now() FROM d
     )
     SELECT * FROM d`,
    [claim.owner, claim.leaseMs, claim.perSubscription, claim.limit, [...claim.busy.keys()], [...claim.busy.values()]],
  );
  return rows;
}

/**
 * Milliseconds until the soonest attempt not yet due falls due, or undefined when none is. Attempts
 * already due but not claimable (their subscription at its cap, or leased) are left out: a finished
 * attempt wakes the worker for those.
 */
export async function nextDueInMs(q: Queryable): Promise<number | undefined> {
  const { rows } = await q.query<{ ms: number | null }>(
    `SELECT (EXTRACT(EPOCH FROM (min(n.due) - now())) * 1000)::float8 AS ms
       FROM webhooks.subscription s
       CROSS JOIN LATERAL (
         SELECT ${dueAt} AS due FROM webhooks.delivery x
          WHERE x.subscription_id = s.subscription_id AND x.status = 'pending' AND ${dueAt} > now()
          ORDER BY ${dueAt} LIMIT 1
       ) n`,
  );
  const ms = rows[0]?.ms;
  return ms === null || ms === undefined ? undefined : Math.max(0, Math.ceil(ms));
}

/**
 * Lets the rest of the transaction commit without waiting for its WAL flush: for writes whose loss
 * in a database crash only repeats work (an attempt record: the delivery stays leased and goes
 * again), never for writes others act on at once.
 */
export async function setAsynchronousCommit(tx: Tx): Promise<void> {
  await tx.query("SET LOCAL synchronous_commit = off");
}

/** One finished attempt, and what it decided for the delivery. */
export type AttemptRecord = {
  deliveryId: string;
  /** The attempt's number, opened in the log when its delivery was claimed. */
  attempt: number;
  owner: string;
  trigger: "automatic" | "manual";
  startedAt: Date;
  durationMs: number;
  statusCode: number | null;
  error: string | null;
  /** The automatic schedule after an automatic attempt (null: none); a manual one leaves it as it is. */
  nextAttemptAt: Date | null;
  /** The receiver answered 410: no attempt follows, automatic or manual. */
  gone: boolean;
};

/**
 * Records finished attempts in one statement: each closes its attempt's row, opened when its delivery
 * was claimed, with the outcome (a row already closed as abandoned gets the real one), and, while
 * the recording worker still holds its lease, the delivery's counters, status and schedule, and
 * the lease released. Recording the same attempt twice changes nothing more (a retry after a lost
 * connection): the lease is no longer held the second time. A delivery deleted meanwhile (its subscription removed)
 * records nothing. A manual attempt takes one queued manual attempt off; success or a 410 ends the
 * delivery, pending otherwise while any attempt is still due, else failed. An attempt recorded after
 * its lease ran out and another replica claimed the delivery (or attempted and released it) is
 * logged only: the delivery's state is the current holder's, so a late
 * failure never turns a succeeded delivery back to pending, nor moves its schedule. The arrays are
 * read through scalar subqueries so that the prepared statement settles on its generic plan instead
 * of being planned for every batch's size (as claimDeliveries).
 */
export async function recordAttempts(q: Queryable, records: readonly AttemptRecord[]): Promise<void> {
  if (records.length === 0) return;
  await q.query(
    `WITH r AS (
       SELECT * FROM unnest((SELECT $1::uuid[]), (SELECT $2::text[]), (SELECT $3::text[]), (SELECT $4::timestamptz[]),
                            (SELECT $5::int[]), (SELECT $6::int[]), (SELECT $7::text[]), (SELECT $8::timestamptz[]),
                            (SELECT $9::bool[]), (SELECT $10::int[]))
         AS r(delivery_id, owner, trigger, started_at, duration_ms, status_code, error, next_attempt_at, gone, attempt)
     ), u AS (
       UPDATE webhooks.delivery AS d
          SET automatic_attempts = d.automatic_attempts
                + (d.lease_owner IS NOT DISTINCT FROM r.owner AND r.trigger = 'automatic')::int,
              manual_queued = CASE WHEN d.lease_owner IS DISTINCT FROM r.owner THEN d.manual_queued
                                   WHEN r.error IS NULL OR r.gone THEN 0
                                   WHEN r.trigger = 'manual' THEN GREATEST(d.manual_queued - 1, 0)
                                   ELSE d.manual_queued END,
              next_attempt_at = CASE WHEN d.lease_owner IS DISTINCT FROM r.owner THEN d.next_attempt_at
                                     WHEN r.error IS NULL OR r.gone THEN NULL
                                     WHEN r.trigger = 'automatic' THEN r.next_attempt_at
                                     ELSE d.next_attempt_at END,
              status = CASE WHEN d.lease_owner IS DISTINCT FROM r.owner THEN d.status
                            WHEN r.error IS NULL THEN 'succeeded'
                            WHEN r.gone THEN 'failed'
                            WHEN (r.trigger = 'manual' AND d.manual_queued > 1)
                              OR (r.trigger = 'automatic' AND (d.manual_queued > 0 OR r.next_attempt_at IS NOT NULL))
                              OR (r.trigger = 'manual' AND d.next_attempt_at IS NOT NULL) THEN 'pending'
                            ELSE 'failed' END,
              last_status_code = CASE WHEN d.lease_owner IS DISTINCT FROM r.owner THEN d.last_status_code
                                      ELSE r.status_code END,
              last_error = CASE WHEN d.lease_owner IS DISTINCT FROM r.owner THEN d.last_error ELSE r.error END,
              updated_at = now(),
              lease_owner = CASE WHEN d.lease_owner = r.owner THEN NULL ELSE d.lease_owner END,
              lease_expires_at = CASE WHEN d.lease_owner = r.owner THEN NULL ELSE d.lease_expires_at END
         FROM r
        WHERE d.delivery_id = r.delivery_id
     )
     UPDATE webhooks.attempt AS a
        SET started_at = r.started_at, duration_ms = r.duration_ms, status_code = r.status_code, error = r.error
       FROM r
      WHERE a.delivery_id = r.delivery_id AND a.attempt = r.attempt`,
    [
      records.map((r) => r.deliveryId),
      records.map((r) => r.owner),
      records.map((r) => r.trigger),
      records.map((r) => r.startedAt),
      records.map((r) => r.durationMs),
      records.map((r) => r.statusCode),
      records.map((r) => r.error),
      records.map((r) => r.nextAttemptAt),
      records.map((r) => r.gone),
      records.map((r) => r.attempt),
    ],
  );
}

/**
 * Hands claimed deliveries back (a stopping worker), so another replica takes them at once; their
 * open attempts are closed with `why` (their requests were cut, or never sent).
 */
export async function releaseDeliveries(
  q: Queryable,
  owner: string,
  deliveryIds: readonly string[],
  why: string,
): Promise<void> {
  if (deliveryIds.length === 0) return;
  await q.query(
    `WITH released AS (
       UPDATE webhooks.delivery SET lease_owner = NULL, lease_expires_at = NULL
        WHERE delivery_id = ANY ($1::uuid[]) AND lease_owner = $2
        RETURNING delivery_id
     )
     UPDATE webhooks.attempt
        SET duration_ms = GREATEST((EXTRACT(EPOCH FROM (now() - started_at)) * 1000)::int, 0), error = $3
      WHERE delivery_id IN (SELECT delivery_id FROM released) AND duration_ms IS NULL`,
    [deliveryIds, owner, why],
  );
}

/** Pending deliveries: those with an attempt due now (a manual one queued, or the schedule's), and those scheduled later. */
export async function queueDepth(q: Queryable): Promise<{ now: number; later: number }> {
  const { rows } = await q.query<{ now: string; later: string }>(
    `SELECT count(*) FILTER (WHERE manual_queued > 0 OR next_attempt_at <= now()) AS now,
            count(*) FILTER (WHERE manual_queued = 0 AND next_attempt_at > now()) AS later
       FROM webhooks.delivery WHERE status = 'pending'`,
  );
  return { now: Number(rows[0]?.now ?? 0), later: Number(rows[0]?.later ?? 0) };
}
