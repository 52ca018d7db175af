import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { Consumer, EventHandler, GroupHandler } from "../../lib/bus/consumer.js";
import type { EventOf } from "../../lib/bus/events.js";
import type { Db } from "../../lib/db/types.js";
import { formatTraceparent } from "../../lib/trace.js";
import { firstAttemptAt } from "./delivery/schedule.js";
import type { DeliveryWorker } from "./delivery/worker.js";
import { deliveryBody, type WebhookSubject, webhookSubjects } from "./payload.js";
import * as store from "./store.js";

/** Events of one subject fanned out at once by one process. */
const FAN_OUT_CONCURRENCY = 16;
/** Fan-out transactions at once: each inserts only rows of its own, so they never wait on each other's locks. */
const FAN_OUT_GROUPS = 4;

export type FanOutDeps = {
  db: Db;
  /** WEBHOOK_RETRY_SCHEDULE. */
  retryScheduleMs: readonly number[];
  /** This process's delivery worker; none when delivery is off. */
  worker: DeliveryWorker | undefined;
  /** Wakes the worker once a fan-out that left it deliveries commits; other replicas' workers poll. */
  onQueued: () => void;
};

const eventOf = (subject: WebhookSubject) => subject.slice("replays.".length);
const occurredAtOf = (message: { occurredAt?: Parameters<typeof timestampDate>[0] }) =>
  message.occurredAt ? timestampDate(message.occurredAt) : new Date();

/**
 * In the consumer's transaction with the inbox records, so each event fans out exactly once and nothing is sent for
 * one already applied. No NOTIFY: Postgres serialises notifying commits, and so would the fan-outs.
 */
function fanOut(deps: FanOutDeps): GroupHandler {
  return async (tx, items) => {
    const { leased, waiting } = await store.insertDeliveries(
      tx,
      items.map(({ subject, event, hop }) => {
        const webhookSubject = subject as WebhookSubject;
        const message = event as EventOf<WebhookSubject>;
        return {
          tenantId: message.tenantId,
          eventId: message.eventId,
          event: eventOf(webhookSubject),
          body: deliveryBody(webhookSubject, message),
          firstAttemptAt: firstAttemptAt(occurredAtOf(message), deps.retryScheduleMs),
          traceparent: hop ? formatTraceparent(hop) : undefined,
        };
      }),
      deps.worker?.fanOutLease(),
    );
    const { worker } = deps;
    if (worker && leased.length > 0) tx.onCommit(() => worker.startLeased(leased));
    if (waiting > 0) tx.onCommit(deps.onQueued);
  };
}

/** The webhooks service's one consumer: the eight replays events that are webhook events. */
export function webhooksConsumers(deps: FanOutDeps): Consumer[] {
  const handleGroup = fanOut(deps);
  const handlers: Consumer["handlers"] = {};
  for (const subject of webhookSubjects) {
    (handlers as Record<WebhookSubject, EventHandler<WebhookSubject>>)[subject] = (tx, event) =>
      handleGroup(tx, [{ subject, event, hop: tx.trace }]);
  }
  // Fan-outs depend on nothing but their own event, so events may go in any order, several at once.
  return [
    {
      durable: "webhooks_replays",
      handlers,
      concurrency: FAN_OUT_CONCURRENCY,
      groups: FAN_OUT_GROUPS,
      handleGroup,
    },
  ];
}
