import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { Consumer, EventHandler } from "../../lib/bus/consumer.js";
import { currentTraceparent } from "../../lib/trace.js";
import { firstAttemptAt } from "./delivery/schedule.js";
import { deliveryBody, type WebhookSubject, webhookSubjects } from "./payload.js";
import * as store from "./store.js";

/** Events of one subject fanned out at once by one process. */
const FAN_OUT_CONCURRENCY = 16;

/**
 * The fan-out of one replays event: a delivery to each subscription of its tenant that names the
 * event, due the schedule's first wait after the event. (No NOTIFY: Postgres serialises the commits
 * of notifying transactions, which would serialise the fan-outs.) It runs in the consumer's transaction with
 * the inbox record, so an event is fanned out exactly once however often the bus delivers it, and a
 * crash before the commit leaves the event to be delivered again.
 */
function fanOut(
  subject: WebhookSubject,
  retryScheduleMs: readonly number[],
  onQueued: () => void,
): EventHandler<WebhookSubject> {
  const event = subject.slice("replays.".length);
  return async (tx, message) => {
    const occurredAt = message.occurredAt ? timestampDate(message.occurredAt) : new Date();
    const created = await store.insertDeliveries(tx, {
      tenantId: message.tenantId,
      eventId: message.eventId,
      event,
      body: deliveryBody(subject, message),
      firstAttemptAt: firstAttemptAt(occurredAt, retryScheduleMs),
      traceparent: currentTraceparent(),
    });
    if (created > 0) tx.onCommit(onQueued);
  };
}

/**
 * The webhooks service's one consumer: the eight replays events that are webhook events. `onQueued`
 * runs after a fan-out that created deliveries committed: it wakes this process's delivery worker
 * (other replicas' workers find them on their poll).
 */
export function webhooksConsumers(retryScheduleMs: readonly number[], onQueued: () => void): Consumer[] {
  const handlers: Consumer["handlers"] = {};
  for (const subject of webhookSubjects) {
    (handlers as Record<WebhookSubject, EventHandler<WebhookSubject>>)[subject] = fanOut(
      subject,
      retryScheduleMs,
      onQueued,
    );
  }
  // A fan-out depends on nothing but its own event: events of one subject may fan out in any order,
  // several at once (each its own transaction, so their commits share WAL flushes).
  return [{ durable: "webhooks_replays", handlers, concurrency: FAN_OUT_CONCURRENCY }];
}
