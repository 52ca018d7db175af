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
/**
 * Fan-out transactions at once: a fan-out inserts rows of its own only (its deliveries, its inbox
 * rows), so groups never wait on each other's locks, and with one at a time the
 * events queued behind its statements and commit.
 */
const FAN_OUT_GROUPS = 4;

export type FanOutDeps = {
  db: Db;
  /** WEBHOOK_RETRY_SCHEDULE. */
  retryScheduleMs: readonly number[];
  /** This process's delivery worker; none when delivery is off. */
  worker: DeliveryWorker | undefined;
  /** Runs after a fan-out that left deliveries for the worker committed: wakes it (other replicas' workers find them on their poll). */
  onQueued: () => void;
};

const eventOf = (subject: WebhookSubject) => subject.slice("replays.".length);
const occurredAtOf = (message: { occurredAt?: Parameters<typeof timestampDate>[0] }) =>
  message.occurredAt ? timestampDate(message.occurredAt) : new Date();

/**
 * The fan-out of replays events, those of one group at once (one statement): for each, a delivery
 * to each subscription of its tenant that names the event, due the schedule's first wait after the
 * event. Those due at once are leased to this process's worker within its caps and attempted as
 * soon as the transaction commits; the rest wait for the worker's claims. (No NOTIFY: Postgres
 * serialises the commits of notifying transactions, which would serialise the fan-outs.) It runs
 * in the consumer's transaction with the inbox records, so an event is fanned out exactly once
 * however often the bus delivers it, nothing is sent for an event applied already, and a crash
 * before the commit leaves the events to be delivered again; one after it leaves the leased
 * deliveries to be claimed when their leases run out.
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
    // One event alone (outside a group): the group's fan-out with one item.
    (handlers as Record<WebhookSubject, EventHandler<WebhookSubject>>)[subject] = (tx, event) =>
      handleGroup(tx, [{ subject, event, hop: tx.trace }]);
  }
  // A fan-out depends on nothing but its own event: events may fan out in any order, several at
  // once: those in flight together in one transaction and one statement (handleGroup).
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
