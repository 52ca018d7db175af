import { createBatcher } from "../../../lib/db/batch.js";
import { isConnectionLoss, retryingSerializationFailure } from "../../../lib/db/errors.js";
import type { Db } from "../../../lib/db/types.js";
import { logger } from "../../../lib/log.js";
import type { SecretBox } from "../../../lib/secrets/box.js";
import { parseTraceparent, type Span, startSpan, traceLogFields } from "../../../lib/trace.js";
import { newLeaseOwner } from "../../../lib/worker/lease.js";
import type { WorkerSpec } from "../../../lib/worker/worker.js";
import type * as store from "../store.js";
import { holdDeliveries } from "../subscription-store.js";
import { newBreaker, noteAttempt, probeHeld } from "./breaker.js";
import type { AttemptResult, DeliveryClient } from "./client.js";
import { watchQueueDepth, webhookAttempts, webhookSubscriptionsDisabled } from "./metrics.js";
import * as queue from "./queue-store.js";
import { nextStep } from "./schedule.js";
import { claimCaps, newSlots, noteClaim, occupy, planClaim, vacate } from "./slots.js";

const log = logger("webhooks:delivery");

export type DeliveryWorkerDeps = {
  db: Db;
  client: DeliveryClient;
  secrets: Pick<SecretBox, "open">;
  /** WEBHOOK_RETRY_SCHEDULE. */
  retryScheduleMs: readonly number[];
  /** WEBHOOK_TIMEOUT_MS: how long one attempt may take; the lease outlasts it. */
  timeoutMs: number;
  /** Attempts in flight in this process at most. */
  maxInFlight?: number;
  /** Attempts in flight for one subscription at most, in this replica. */
  perSubscription?: number;
  /** The poll between rounds when nothing wakes the worker (other replicas' leases and caps). */
  intervalMs?: number;
  /** How long an unreachable receiver's deliveries are held at most (UNREACHABLE_HOLD_MS). */
  unreachableHoldMs?: number;
  /** WEBHOOK_DISABLE_AFTER in ms: a subscription failing throughout this long is disabled; null: never. */
  disableAfterMs?: number | null;
};

export type DeliveryWorker = WorkerSpec & {
  /** Starts a claim at once: deliveries were queued. */
  wake(): void;
  /** What a fan-out may lease to this worker (store.FanOutLease); undefined while stopping or with no slot free. */
  fanOutLease(): store.FanOutLease | undefined;
  /** Starts the attempts of deliveries a fan-out leased to this worker, once it committed. */
  startLeased(rows: readonly queue.ClaimedDelivery[]): void;
};

/** Attempts of this process in flight at most: each is an open HTTP request, cheap while it waits. */
export const MAX_IN_FLIGHT = 256;
/** Per subscription and replica: a receiver that hangs holds this many slots, never all. */
export const PER_SUBSCRIPTION_MAX = 16;
/** How much longer than an attempt's timeout its lease lasts: time to record the attempt. */
const LEASE_MARGIN_MS = 10_000;
/** Finished attempts gather this long, so one claim refills every slot freed meanwhile. */
const CLAIM_GATHER_MS = 5;
// The idle poll, only for work another replica made due but cannot send (its slots full): everything else wakes the
// worker or sets its sleep (subscription_due's soonest due time, whoever wrote it).
const IDLE_POLL_MS = 2_000;
/** How often a receiver that could not be reached is probed for its return. */
export const PROBE_INTERVAL_MS = 1_000;
/** A deploy-length outage drains at once on return; a longer one costs the schedule this, once (decisions.md §6). */
export const UNREACHABLE_HOLD_MS = 5 * 60_000;

/**
 * The delivery worker (decisions.md §6): rounds do not wait for attempts, so a slow receiver holds only its own slots.
 * At least once: a lease outlasts an attempt, so a dead replica's or an unrecorded attempt goes again.
 */
export function deliveryWorker(deps: DeliveryWorkerDeps): DeliveryWorker {
  const { db, client } = deps;
  const owner = newLeaseOwner();
  const leaseMs = deps.timeoutMs + LEASE_MARGIN_MS;
  const slots = newSlots(deps.maxInFlight ?? MAX_IN_FLIGHT, deps.perSubscription ?? PER_SUBSCRIPTION_MAX);
  const breaker = newBreaker(deps.unreachableHoldMs ?? UNREACHABLE_HOLD_MS);
  let nudge = () => {};
  let gathering: NodeJS.Timeout | undefined;
  const slotFreed = () => {
    gathering ??= setTimeout(() => {
      gathering = undefined;
      nudge();
    }, CLAIM_GATHER_MS);
  };
  let recording = true;
  let unwatchQueue = () => {};
  let probes: NodeJS.Timeout | undefined;
  const probeUnreachable = () =>
    probeHeld(
      breaker,
      Date.now(),
      (url) => client.probe(url),
      (subscriptionId, why) => {
        log.info(
          { subscriptionId },
          why === "reachable"
            ? "receiver reachable again; resuming its deliveries"
            : "receiver still unreachable; its deliveries follow the schedule",
        );
        nudge();
      },
    );

  const record = createBatcher<queue.AttemptRecord, void>({
    // One statement, its own transaction, committed asynchronously (recordAttempts).
    run: async (records) => {
      // A delivery a manual replay moves back to pending meanwhile fails the statement (40001); a new snapshot sees it.
      const write = () =>
        retryingSerializationFailure(() => queue.recordAttempts(db, records, deps.disableAfterMs ?? null));
      // Lost with its connection (a failover), sent attempts would miss the log and go again: retry once.
      const { disabled } = await write().catch((err: unknown) => {
        if (!isConnectionLoss(err)) throw err;
        log.warn({ err: String(err), attempts: records.length }, "recording attempts lost its connection; once more");
        return write();
      });
      if (disabled.length > 0) disabledForFailing(disabled);
      // A scheduled retry resets the sleep (a claim moves the subscription to its time), or it waits for the poll.
      if (records.some((r) => r.nextAttemptAt !== null)) nudge();
      return records.map(() => undefined);
    },
    maxBatch: 256,
    maxRunning: 1,
  });

  /** Subscriptions the last record disabled (decisions.md §6.1): logged, counted, their deliveries held. */
  function disabledForFailing(subscriptionIds: readonly string[]): void {
    for (const subscriptionId of subscriptionIds) {
      log.warn(
        { subscriptionId, disableAfterMs: deps.disableAfterMs },
        "subscription disabled: no attempt succeeded while attempts failed throughout WEBHOOK_DISABLE_AFTER",
      );
      webhookSubscriptionsDisabled.inc({ reason: "failing" });
    }
    // The claims already send it nothing; this shows the held deliveries with no attempt due.
    void retryingSerializationFailure(() => holdDeliveries(db, subscriptionIds)).catch((err: unknown) =>
      log.error({ err, subscriptionIds }, "holding a disabled subscription's deliveries failed"),
    );
  }

  /** The attempt's request, or why it cannot be signed (a secret sealed under a key this process lacks). */
  function sendAttempt(row: queue.ClaimedDelivery): Promise<AttemptResult> {
    let secret: string;
    let nextSecret: string | null;
    try {
      secret = deps.secrets.open(row.secret);
      nextSecret = row.next_secret === null ? null : deps.secrets.open(row.next_secret);
    } catch (err) {
      log.error({ subscriptionId: row.subscription_id, err: String(err) }, "a subscription's secret cannot be opened");
      const error = "not sent: the subscription's secret cannot be opened (SECRETS_KEY)";
      return Promise.resolve({ statusCode: null, error, retryAfterMs: null, durationMs: 0, unreachable: false });
    }
    return client.send({ url: row.url, secret, nextSecret, event: row.event, eventId: row.event_id, body: row.body });
  }

  async function attempt(row: queue.ClaimedDelivery, span: Span): Promise<queue.AttemptRecord> {
    const startedAt = new Date();
    const result = await sendAttempt(row);
    if (noteAttempt(breaker, row.subscription_id, row.url, result.unreachable, Date.now())) {
      log.warn(
        { subscriptionId: row.subscription_id, error: result.error, ...traceLogFields(span.trace) },
        "receiver unreachable; holding its deliveries",
      );
    }
    const trigger = row.manual ? "manual" : "automatic";
    const next =
      trigger === "automatic"
        ? nextStep({
            outcome: result,
            automaticAttempts: row.automatic_attempts + 1,
            failedAt: new Date(),
            retryScheduleMs: deps.retryScheduleMs,
          })
        : undefined;
    const outcome = outcomeOf(result, next?.nextAttemptAt ?? null);
    webhookAttempts.observe({ outcome, trigger }, result.durationMs / 1000);
    span.end(
      {
        "webhook.outcome": outcome,
        "webhook.trigger": trigger,
        "http.response.status_code": result.statusCode ?? undefined,
      },
      outcome === "succeeded" ? undefined : (result.error ?? `HTTP ${result.statusCode}`),
    );
    if (log.isLevelEnabled("debug"))
      log.debug(
        {
          deliveryId: row.delivery_id,
          subscriptionId: row.subscription_id,
          event: row.event,
          eventId: row.event_id,
          trigger,
          outcome,
          statusCode: result.statusCode,
          durationMs: result.durationMs,
          ...traceLogFields(span.trace),
        },
        "delivery attempt",
      );
    return {
      deliveryId: row.delivery_id,
      attempt: row.attempt,
      owner,
      trigger,
      startedAt,
      durationMs: result.durationMs,
      statusCode: result.statusCode,
      error: result.error,
      nextAttemptAt: next?.nextAttemptAt ?? null,
      gone: result.statusCode === 410,
    };
  }

  /** The slot is freed only once `done` stored the attempt; `first`: a fan-out leased it (see Slots.heldBack). */
  function start(
    row: queue.ClaimedDelivery,
    done: (attempt: queue.AttemptRecord) => Promise<void>,
    first = false,
  ): void {
    const span = startSpan(`webhook ${row.event}`, "client", parseTraceparent(row.traceparent ?? undefined), {
      attributes: {
        "webhook.event": row.event,
        "webhook.delivery_id": row.delivery_id,
        "webhook.subscription_id": row.subscription_id,
      },
    });
    const running = attempt(row, span)
      .then((record) => (recording ? done(record) : undefined))
      .catch((err: unknown) => {
        // The lease is still held: the delivery is attempted again when it runs out.
        log.error(
          { err, deliveryId: row.delivery_id, ...traceLogFields(span.trace) },
          "recording a delivery attempt failed",
        );
      })
      .finally(() => {
        if (vacate(slots, row.delivery_id, row.subscription_id, first)) slotFreed();
      });
    occupy(slots, row.delivery_id, row.subscription_id, running);
  }

  /**
   * Lets a fan-out lease its due deliveries here, saving each a claim; held subscriptions count as full. Attempts
   * started meanwhile may take a subscription a few over its cap until they end.
   */
  function fanOutLease(): store.FanOutLease | undefined {
    const free = slots.max - slots.running.size;
    if (!recording || free <= 0) return undefined;
    const busy = claimCaps(slots, breaker.held.keys());
    return { owner, leaseMs, perSubscription: slots.perSubscription, limit: free, busy };
  }

  return {
    name: "webhooks-delivery",
    intervalMs: deps.intervalMs ?? IDLE_POLL_MS,
    wake: () => nudge(),
    fanOutLease,
    startLeased(rows) {
      if (recording) {
        for (const row of rows) start(row, record, true);
        return;
      }
      // The drain is over (a fan-out committed as the process stopped): another replica takes them.
      void queue
        .releaseDeliveries(
          db,
          owner,
          rows.map((row) => row.delivery_id),
          queue.unknownOutcome.notSent,
        )
        .catch((err: unknown) =>
          log.error({ err }, "handing back leased deliveries failed; their leases run out instead"),
        );
    },
    started(wake) {
      nudge = wake;
      unwatchQueue = watchQueueDepth(db);
      probes = setInterval(probeUnreachable, PROBE_INTERVAL_MS);
      probes.unref();
    },
    async round() {
      const plan = planClaim(slots, breaker.held.keys());
      // Every slot busy: a finishing attempt wakes the loop.
      if (!plan) return false;
      // A delivery whose late record ends it as the claim takes it over fails the statement (40001): claim again.
      const claim = await retryingSerializationFailure(() =>
        queue.claimDeliveries(db, { owner, leaseMs, perSubscription: slots.perSubscription, ...plan }),
      );
      const filled = noteClaim(slots, plan, claim.claimed.length);
      for (const row of claim.claimed) start(row, record);
      // Move the visited subscriptions on, so the next claim and the sleep skip what was just sent or found empty.
      await queue.refreshDue(db, claim);
      if (filled) return true;
      // With attempts running, each one that finishes wakes the loop; idle, sleep until the next due time.
      if (slots.running.size > 0) return false;
      return (await queue.nextDueInMs(db)) ?? false;
    },
    async drain(signal) {
      const finished = Promise.all(slots.running.values()).then(() => undefined);
      const aborted = new Promise<void>((resolve) => {
        if (signal.aborted) resolve();
        signal.addEventListener("abort", () => resolve(), { once: true });
      });
      await Promise.race([finished, aborted]);
      recording = false;
      unwatchQueue();
      clearTimeout(gathering);
      clearInterval(probes);
      const unfinished = [...slots.running.keys()];
      if (unfinished.length === 0) {
        await client.close();
        return;
      }
      // Cut the requests first, or another replica could claim and send a delivery still in flight here.
      await client.destroy();
      log.warn({ deliveries: unfinished.length }, "handing back deliveries still in flight at the end of the drain");
      await queue.releaseDeliveries(db, owner, unfinished, queue.unknownOutcome.cutShort).catch((err: unknown) => {
        log.error({ err }, "handing back deliveries failed; their leases run out instead");
      });
    },
  };
}

/** The /metrics outcome: succeeded, retrying (another automatic attempt due), failed, or gone (410). */
function outcomeOf(result: { statusCode: number | null; error: string | null }, nextAttemptAt: Date | null): string {
  if (result.error === null) return "succeeded";
  if (result.statusCode === 410) return "gone";
  return nextAttemptAt ? "retrying" : "failed";
}
