import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { Consumer, EventHandler } from "../../lib/bus/consumer.js";
import { firstAttemptAt } from "./delivery/schedule.js";
import { deliveryBody, type WebhookSubject, webhookSubjects } from "./payload.js";
import * as store from "./store.js";

/**
 * The fan-out of one replays event: a delivery to each subscription of its tenant that names the
 * event, due the schedule's first wait after the event. It runs in the consumer's transaction with
 * the inbox record, so an event is fanned out exactly once however often the bus delivers it, and a
 * crash before the commit leaves the event to be delivered again.
 */
function fanOut(subject: WebhookSubject, retryScheduleMs: readonly number[]): EventHandler<WebhookSubject> {
  const event = subject.slice("replays.".length);
  return async (tx, message) => {
    const occurredAt = message.occurredAt ? timestampDate(message.occurredAt) : new Date();
    await store.insertDeliveries(tx, {
      tenantId: message.tenantId,
      eventId: message.eventId,
      event,
      body: deliveryBody(subject, message),
      firstAttemptAt: firstAttemptAt(occurredAt, retryScheduleMs),
    });
  };
}

/** The webhooks service's one consumer: the eight replays events that are webhook events. */
export function webhooksConsumers(retryScheduleMs: readonly number[]): Consumer[] {
  const handlers: Consumer["handlers"] = {};
  for (const subject of webhookSubjects) {
    (handlers as Record<WebhookSubject, EventHandler<WebhookSubject>>)[subject] = fanOut(subject, retryScheduleMs);
  }
  return [{ durable: "webhooks_replays", handlers }];
}
