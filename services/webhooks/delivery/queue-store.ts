import type { Queryable } from "../../../lib/db/types.js";

// The worker's half of schema `webhooks`; ../store.ts's fan-out leases deliveries as claimDeliveries does.

// Word for word delivery_due_idx's expression (migration 011), so the index serves it.
const dueAt = "(CASE WHEN manual_queued > 0 THEN '-infinity'::timestamptz ELSE next_attempt_at END)";

/** During a rotation's overlap X-FV-Signature keeps the previous secret, -Next gets the new one (decisions.md §6.1). */
export const signingSecrets = (s: string) =>
  `CASE WHEN ${s}.previous_secret_expires_at > now() THEN ${s}.previous_secret ELSE ${s}.secret END AS secret,
   CASE WHEN ${s}.previous_secret_expires_at > now() THEN ${s}.secret END AS next_secret`;

// Shared by the rate take and the pick, so both count the same deliveries.
const claimable = `x.subscription_id = u.subscription_id AND x.status = 'pending'
  AND ${dueAt} >= u.scan_from AND ${dueAt} <= now()
  AND (x.lease_expires_at IS NULL OR x.lease_expires_at <= now())
  AND (x.manual_queued > 0 OR NOT u.disabled)`;

// rateLimitPerSecond (decisions.md §6.1) counts every replica's attempts in the database clock's second: the
// UPDATE re-reads the row once locked, so two claims never spend the same second's allowance.
const nowSecond = "floor(EXTRACT(EPOCH FROM now()))::bigint";
const rateUsed = `(CASE WHEN q.rate_second = ${nowSecond} THEN q.rate_used ELSE 0 END)`;
const rateTake = `GREATEST(LEAST(u.rate - ${rateUsed}, $3 - u.n, (
    SELECT count(*) FROM (
      SELECT 1 FROM webhooks.delivery x
       WHERE ${claimable} LIMIT $3) due)), 0)`;

export type ClaimedDelivery = {
  delivery_id: string;
  subscription_id: string;
  event_id: string;
  event: string;
  body: string;
  url: string;
  /** The secret X-FV-Signature is made with: the previous one while a rotation's overlap runs. */
  secret: string;
  /** While a rotation's overlap runs, the new secret, for X-FV-Signature-Next; else null. */
  next_secret: string | null;
  /** A queued manual attempt goes first; it leaves the automatic schedule as it is. */
  manual: boolean;
  /** Automatic attempts made before this one. */
  automatic_attempts: number;
  traceparent: string | null;
  /** The attempt's number, counted on its delivery when leased: its record logs it under this number. */
  attempt: number;
};

/** Errors of attempts logged with no answer recorded; recordAttempts may still overwrite them. */
export const unknownOutcome = {
  abandoned: "no answer recorded: the sender stopped",
  cutShort: "cut short: the sender stopped",
  notSent: "not sent: the sender was stopping",
} as const;
const ABANDONED = unknownOutcome.abandoned;
const UNKNOWN_OUTCOMES = Object.values(unknownOutcome)
  .map((why) => `'${why}'`)
  .join(", ");

/**
 * An INSERT logging, for `source`'s rows (with `manual`: a queued manual attempt, which the unrecorded one was then
 * too) where `only` holds, the attempt numbered `attempt` that started at
 * `startedAt` and whose answer went unrecorded, failed with `why`. An attempt is logged once it ends (recordAttempts),
 * so the log misses one only while it runs, or if its sender stopped: then its lease's takeover or release logs it
 * here. A row an older release left open (migration 013) is closed instead.
 */
function logUnrecorded(source: string, attempt: string, startedAt: string, why: string, only = "true"): string {
  const started = `COALESCE(${startedAt}, now())`;
  return `INSERT INTO webhooks.attempt AS a (delivery_id, attempt, trigger, started_at, duration_ms, error)
       SELECT delivery_id, ${attempt}, CASE WHEN manual THEN 'manual' ELSE 'automatic' END, ${started},
              ${msSince(started)}, ${why}
         FROM ${source} WHERE ${only}
       ON CONFLICT (delivery_id, attempt) DO UPDATE SET duration_ms = ${msSince("a.started_at")}, error = excluded.error
        WHERE a.duration_ms IS NULL`;
}

/** Whole milliseconds from `start` to the statement's now(), never negative: an unanswered attempt's duration. */
const msSince = (start: string) => `GREATEST((EXTRACT(EPOCH FROM (now() - ${start})) * 1000)::int, 0)`;

// The automatic disable (decisions.md §6.1): failures WEBHOOK_DISABLE_AFTER ($11 ms; null: never) apart with no
// success between. Its clock is the first failure since the last success.
const failingSince = `(CASE WHEN f.last_success IS NOT NULL THEN f.first_failure
                            ELSE COALESCE(s.failing_since, f.first_failure) END)`;
// COALESCE: with no failure since the last success the test is null, which must read as false.
const trips = `COALESCE(NOT s.disabled AND $11::bigint IS NOT NULL AND f.last_failure IS NOT NULL
                AND f.last_failure - ${failingSince} >= $11::bigint * interval '1 millisecond', false)`;

/** What a claim took, and for refreshDue the subscriptions it looked at, found drained or throttled. */
export type Claim = { claimed: ClaimedDelivery[]; visited: string[]; drained: string[]; throttled: string[] };

/**
 * Leases due deliveries for one attempt each, at most `perSubscription` per subscription in this replica counting
 * `busy` (a hanging receiver never holds every slot), and counts each attempt on its delivery before it is sent; a
 * delivery taken over from a sender that stopped gets that sender's unrecorded attempt logged as abandoned.
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
): Promise<Claim> {
  // Arrays and limit go through scalar subqueries so the prepared statement keeps its generic plan (seen by the
  // planner, they had every claim planned anew). A rate row another claim holds is skipped, as used up. Each read and
  // write of deliveries names status = 'pending', so the plan holds delivery_pending alone, not every day of the log
  // (migration 016: a generic plan locks and opens every partition it holds, 0.3 ms a claim on 30 days).
  const { rows } = await q.query<ClaimedDelivery & { drained: boolean; throttled: boolean }>(
    `WITH busy AS (
       SELECT * FROM unnest((SELECT $5::uuid[]), (SELECT $6::int[])) AS b(subscription_id, n)
     ), ready AS (
       SELECT q.subscription_id, q.scan_from, COALESCE(b.n, 0) AS n
         FROM webhooks.subscription_due q
         LEFT JOIN busy b ON b.subscription_id = q.subscription_id
        WHERE q.due_at <= now() AND COALESCE(b.n, 0) < $3
        ORDER BY q.due_at
        LIMIT (SELECT $4::int)
     ), subs AS (
       SELECT r.*, s.url, ${signingSecrets("s")}, s.disabled, s.rate_limit_per_second AS rate
         FROM ready r JOIN webhooks.subscription s ON s.subscription_id = r.subscription_id
     ), metered AS (
       SELECT q.subscription_id FROM webhooks.subscription_due q JOIN subs u ON u.subscription_id = q.subscription_id
        WHERE u.rate IS NOT NULL
          FOR NO KEY UPDATE OF q SKIP LOCKED
     ), granted AS (
       UPDATE webhooks.subscription_due AS q
          SET rate_granted = ${rateTake}, rate_used = ${rateUsed} + ${rateTake}, rate_second = ${nowSecond}
         FROM metered m, subs u
        WHERE q.subscription_id = m.subscription_id AND u.subscription_id = m.subscription_id
       RETURNING q.subscription_id, q.rate_granted AS allowed, q.rate_used >= u.rate AS exhausted
     ), allowed AS (
       SELECT u.*, CASE WHEN u.rate IS NULL THEN $3 - u.n ELSE COALESCE(g.allowed, 0) END AS allowed,
              u.rate IS NOT NULL AND COALESCE(g.exhausted, true) AS throttled
         FROM subs u LEFT JOIN granted g ON g.subscription_id = u.subscription_id
     ), picked AS (
       SELECT c.delivery_id, c.taken_over, c.unrecorded_started_at, u.subscription_id, u.url, u.secret, u.next_secret
         FROM allowed u
         CROSS JOIN LATERAL (
           SELECT x.delivery_id, ${dueAt} AS due, x.lease_owner IS NOT NULL AS taken_over,
                  x.attempt_started_at AS unrecorded_started_at
             FROM webhooks.delivery x
            WHERE ${claimable}
            ORDER BY ${dueAt}, x.delivery_id
            LIMIT u.allowed
              FOR UPDATE OF x SKIP LOCKED
         ) c
        ORDER BY c.due, c.delivery_id
        LIMIT (SELECT $4::int)
     ), d AS (
       UPDATE webhooks.delivery AS d
          SET lease_owner = $1, lease_expires_at = now() + $2 * interval '1 millisecond',
              attempt_count = d.attempt_count + 1, attempt_started_at = now()
         FROM picked
        WHERE d.delivery_id = picked.delivery_id AND d.status = 'pending'
        RETURNING d.delivery_id, d.subscription_id, d.event_id, d.event, d.body, picked.url, picked.secret,
                  picked.next_secret, d.manual_queued > 0 AS manual, d.automatic_attempts, d.traceparent,
                  d.attempt_count AS attempt, picked.taken_over, picked.unrecorded_started_at
     ), abandoned AS (
       ${logUnrecorded("d", "attempt - 1", "unrecorded_started_at", `'${ABANDONED}'`, "taken_over")}
     )
     SELECT d.delivery_id, d.subscription_id, d.event_id, d.event, d.body, d.url, d.secret, d.next_secret, d.manual,
            d.automatic_attempts, d.traceparent, d.attempt, NULL::bool AS drained, NULL::bool AS throttled FROM d
     UNION ALL
     SELECT NULL, u.subscription_id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
            NOT EXISTS (SELECT 1 FROM picked p WHERE p.subscription_id = u.subscription_id),
            u.throttled
       FROM allowed u`,
    [claim.owner, claim.leaseMs, claim.perSubscription, claim.limit, [...claim.busy.keys()], [...claim.busy.values()]],
  );
  const found: Claim = { claimed: [], visited: [], drained: [], throttled: [] };
  for (const { drained, throttled, ...row } of rows) {
    if (drained === null) found.claimed.push(row);
    else {
      found.visited.push(row.subscription_id);
      if (drained) found.drained.push(row.subscription_id);
      if (throttled) found.throttled.push(row.subscription_id);
    }
  }
  return found;
}

// More than can be leased at once (PER_SUBSCRIPTION_MAX), so the first unleased pending delivery is among them;
// past them, the last one's due time bounds the rest.
const REFRESH_HEAD = 64;

/**
 * Moves each visited subscription's scan_from to its soonest pending delivery, and a drained one's due_at to when it
 * may next have work, where no writer holds its due lock (webhooks.refresh_due, migration 014). One statement that
 * never waits for a lock; the locks it takes last to the end of its transaction (the caller's, if any).
 *
 * The due lock (an advisory lock per subscription) keeps it from moving a subscription past a writer's uncommitted
 * delivery: writers hold it shared until commit (bringDueForward, migration 010), the refresh exclusively where it
 * can. Advisory, since a row lock shared by concurrent fan-outs went through MultiXacts (docs/performance.md).
 */
export async function refreshDue(
  q: Queryable,
  claim: Pick<Claim, "visited" | "drained"> & Partial<Pick<Claim, "throttled">>,
): Promise<void> {
  if (claim.visited.length === 0) return;
  await q.query("SELECT webhooks.refresh_due($1::uuid[], $2::uuid[], $3::int, $4::uuid[])", [
    claim.visited,
    claim.drained,
    REFRESH_HEAD,
    claim.throttled ?? [],
  ]);
}

/**
 * CTEs, each led by a comma, that bring subscription_due forward for `source`'s rows (subscription_id, due_at, and
 * `scanAt` for scan_from) through webhooks.bring_due_forward (migration 010).
 */
export function bringDueForward(source: string, scanAt = "due_at"): string {
  // An INSERT of the nothing the function returns, because a data-modifying CTE always runs to completion.
  return `, due_new AS (
       SELECT subscription_id, min(due_at) AS due_at, min(${scanAt}) AS scan_at FROM ${source}
        WHERE due_at IS NOT NULL GROUP BY subscription_id
     ), due_moved AS (
       INSERT INTO webhooks.subscription_due
       SELECT * FROM webhooks.bring_due_forward(
         (SELECT array_agg(subscription_id ORDER BY subscription_id) FROM due_new),
         (SELECT array_agg(due_at ORDER BY subscription_id) FROM due_new),
         (SELECT array_agg(scan_at ORDER BY subscription_id) FROM due_new))
     )`;
}

/** Ms until the next subscription falls due; for due ones (capped or leased) a finished attempt wakes the worker. */
export async function nextDueInMs(q: Queryable): Promise<number | undefined> {
  const { rows } = await q.query<{ ms: number | null }>(
    `SELECT (EXTRACT(EPOCH FROM (min(due_at) - now())) * 1000)::float8 AS ms
       FROM webhooks.subscription_due
      WHERE due_at > now() AND due_at < 'infinity'`,
  );
  const ms = rows[0]?.ms;
  return ms === null || ms === undefined ? undefined : Math.max(0, Math.ceil(ms));
}

export type AttemptRecord = {
  deliveryId: string;
  /** The attempt's number, counted on its delivery when it was leased. */
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
 * Records finished attempts in one statement; returns the subscriptions it disabled. Its commit is asynchronous (the
 * statement sets synchronous_commit for its own transaction, or the caller's): a record lost in a crash leaves its
 * delivery leased, so the attempt goes again when the lease runs out, at least once and never two at once.
 */
export async function recordAttempts(
  q: Queryable,
  records: readonly AttemptRecord[],
  disableAfterMs: number | null = null,
): Promise<{ disabled: string[] }> {
  if (records.length === 0) return { disabled: [] };
  // The delivery's state is its lease holder's: a record after the lease ran out only logs its attempt, so a late
  // failure never reopens a succeeded delivery, and one recorded twice logs it once. An attempt logged as abandoned
  // still takes its real outcome. Scalar subqueries keep the generic plan, as in claimDeliveries.
  const { rows } = await q.query<{ subscription_id: string }>(
    `WITH r AS (
       SELECT r.* FROM (SELECT set_config('synchronous_commit', 'off', true)) AS asynchronous_commit,
              unnest((SELECT $1::uuid[]), (SELECT $2::text[]), (SELECT $3::text[]), (SELECT $4::timestamptz[]),
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
                                     WHEN r.trigger = 'automatic' AND NOT s.disabled THEN r.next_attempt_at
                                     WHEN r.trigger = 'automatic' THEN NULL
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
         FROM r, webhooks.subscription s
        WHERE d.delivery_id = r.delivery_id AND s.subscription_id = d.subscription_id
        RETURNING d.delivery_id, d.subscription_id,
                  CASE WHEN d.status = 'pending' AND d.manual_queued > 0 THEN '-infinity'::timestamptz
                       WHEN d.status = 'pending' THEN d.next_attempt_at END AS due_at
     )${bringDueForward("u")}, closed AS (
       INSERT INTO webhooks.attempt AS a (delivery_id, attempt, trigger, started_at, duration_ms, status_code, error)
       SELECT r.delivery_id, r.attempt, r.trigger, r.started_at, r.duration_ms, r.status_code, r.error
         FROM r JOIN u USING (delivery_id)
       ON CONFLICT (delivery_id, attempt) DO UPDATE
          SET started_at = excluded.started_at, duration_ms = excluded.duration_ms, status_code = excluded.status_code,
              error = excluded.error
        WHERE a.duration_ms IS NULL OR a.error IN (${UNKNOWN_OUTCOMES})
        RETURNING a.delivery_id, a.started_at, a.error IS NULL AS ok
     ), per_subscription AS (
       SELECT u.subscription_id, count(*) FILTER (WHERE c.ok) AS succeeded, count(*) FILTER (WHERE NOT c.ok) AS failed,
              max(c.started_at) FILTER (WHERE c.ok) AS last_success, max(c.started_at) FILTER (WHERE NOT c.ok) AS last_failure
         FROM closed c JOIN u USING (delivery_id)
        GROUP BY u.subscription_id
     ), failures AS (
       SELECT p.*, (SELECT min(c.started_at) FROM closed c JOIN u USING (delivery_id)
                     WHERE u.subscription_id = p.subscription_id AND NOT c.ok
                       AND c.started_at > COALESCE(p.last_success, '-infinity')) AS first_failure
         FROM per_subscription p
     ), counted AS (
       INSERT INTO webhooks.attempt_hourly AS h (subscription_id, hour, succeeded, failed)
       SELECT subscription_id, date_trunc('hour', now()), succeeded, failed FROM per_subscription
       ON CONFLICT (subscription_id, hour)
       DO UPDATE SET succeeded = h.succeeded + excluded.succeeded, failed = h.failed + excluded.failed
     ), failing AS (
       UPDATE webhooks.subscription AS s
          SET failing_since = ${failingSince},
              disabled = s.disabled OR ${trips},
              disabled_reason = CASE WHEN ${trips} THEN 'failing' ELSE s.disabled_reason END,
              disabled_at = CASE WHEN ${trips} THEN now() ELSE s.disabled_at END
         FROM failures f
        WHERE s.subscription_id = f.subscription_id AND (f.last_failure IS NOT NULL OR s.failing_since IS NOT NULL)
        RETURNING s.subscription_id, s.disabled_reason = 'failing' AND s.disabled_at = now() AS tripped
     )
     SELECT subscription_id FROM failing WHERE tripped`,
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
      disableAfterMs,
    ],
  );
  return { disabled: rows.map((row) => row.subscription_id) };
}

/**
 * Hands a stopping worker's deliveries back, due at once for another replica; their attempts are logged as `why`. A
 * lease is a pending delivery's only (its holder's record clears it as it ends the delivery), so the update reads
 * delivery_pending alone (migration 016).
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
        WHERE delivery_id = ANY ($1::uuid[]) AND lease_owner = $2 AND status = 'pending'
        RETURNING delivery_id, subscription_id, CASE WHEN status = 'pending' THEN ${dueAt} END AS due_at,
                  attempt_count, attempt_started_at, manual_queued > 0 AS manual
     )${bringDueForward("released")}
     ${logUnrecorded("released", "attempt_count", "attempt_started_at", "$3")}`,
    [deliveryIds, owner, why],
  );
}

/** Pending deliveries due now and later; a queued manual attempt has waited since its delivery's last change. */
export async function queueDepth(q: Queryable): Promise<{ now: number; later: number; oldestDueAgeS: number }> {
  const { rows } = await q.query<{ now: string; later: string; oldest: number | null }>(
    `SELECT count(*) FILTER (WHERE manual_queued > 0 OR next_attempt_at <= now()) AS now,
            count(*) FILTER (WHERE manual_queued = 0 AND next_attempt_at > now()) AS later,
            EXTRACT(EPOCH FROM now() - min(CASE WHEN manual_queued > 0 THEN updated_at ELSE next_attempt_at END)
              FILTER (WHERE manual_queued > 0 OR next_attempt_at <= now()))::float8 AS oldest
       FROM webhooks.delivery WHERE status = 'pending'`,
  );
  const row = rows[0];
  return {
    now: Number(row?.now ?? 0),
    later: Number(row?.later ?? 0),
    oldestDueAgeS: Math.max(0, row?.oldest ?? 0),
  };
}

/** Subscriptions failing now (failed attempts since their last success, not disabled) and disabled ones. */
export async function unhealthySubscriptions(q: Queryable): Promise<{ failing: number; disabled: number }> {
  const { rows } = await q.query<{ failing: string; disabled: string }>(
    `SELECT count(*) FILTER (WHERE NOT disabled) AS failing, count(*) FILTER (WHERE disabled) AS disabled
       FROM webhooks.subscription WHERE disabled OR failing_since IS NOT NULL`,
  );
  return { failing: Number(rows[0]?.failing ?? 0), disabled: Number(rows[0]?.disabled ?? 0) };
}

/** One subscription's pending deliveries, for the operator (WebhookOpsService.Backlog). */
export type SubscriptionBacklogRow = {
  subscription_id: string;
  tenant_id: string;
  pending: string;
  due: string;
  oldest_due_at: Date | null;
  failing_since: Date | null;
  disabled: boolean;
  rate_limit_per_second: number | null;
};

/** Subscriptions with deliveries pending, most due first; reads every pending delivery, so operators only. */
export async function subscriptionBacklog(q: Queryable, limit: number): Promise<SubscriptionBacklogRow[]> {
  const { rows } = await q.query<SubscriptionBacklogRow>(
    `SELECT b.subscription_id, s.tenant_id, b.pending, b.due, b.oldest_due_at, s.failing_since, s.disabled,
            s.rate_limit_per_second
       FROM (SELECT subscription_id, count(*) AS pending,
                    count(*) FILTER (WHERE manual_queued > 0 OR next_attempt_at <= now()) AS due,
                    min(CASE WHEN manual_queued > 0 THEN updated_at ELSE next_attempt_at END)
                      FILTER (WHERE manual_queued > 0 OR next_attempt_at <= now()) AS oldest_due_at
               FROM webhooks.delivery WHERE status = 'pending' GROUP BY subscription_id) b
       JOIN webhooks.subscription s USING (subscription_id)
      ORDER BY b.due DESC, b.pending DESC, b.subscription_id
      LIMIT $1`,
    [limit],
  );
  return rows;
}
