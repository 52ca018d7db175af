import { timestampDate } from "@bufbuild/protobuf/wkt";
import { createBatcher } from "../db/batch.js";
import { withTrace } from "../db/transaction-trace.js";
import type { Db, Tx } from "../db/types.js";
import { logger } from "../log.js";
import { watchConsumer } from "../metrics.js";
import { nextSpan, parseTraceparent, startSpan, type TraceContext, traceLogFields } from "../trace.js";
import type { Bus, BusMessage } from "./bus.js";
import { decodeEvent, type EventOf, type EventSubject } from "./events.js";
import { recordInbox } from "./inbox.js";

const log = logger("lib:bus:consumer");

/** Applies one decoded event inside the consumer's transaction. */
export type EventHandler<S extends EventSubject> = (tx: Tx, event: EventOf<S>) => Promise<void>;

/** One event of a group, with its own hop of the trace. */
export type GroupItem = {
  subject: EventSubject;
  event: EventOf<EventSubject>;
  hop: TraceContext | undefined;
};

/** Applies a group's new events at once in its transaction; what it does for each carries that event's hop. */
export type GroupHandler = (tx: Tx, items: readonly GroupItem[]) => Promise<void>;

/** A service's consumer of other services' events: one durable name, one handler per subject. */
export type Consumer = {
  durable: string;
  handlers: { [S in EventSubject]?: EventHandler<S> };
  /**
   * Events in flight together applied in one transaction: only for handlers that commute and lock no
   * shared row two events could lock in different orders.
   */
  concurrency?: number;
  /** Groups' transactions at once (default 1): more only for handlers that lock no row another event's could. */
  groups?: number;
  /**
   * With `concurrency`: applies a group's events together. It must do to each what its handler does (which
   * applies an event outside a group); simplest: handlers that call it with one item.
   */
  handleGroup?: GroupHandler;
};

export type ConsumerDeps = {
  db: Db;
  bus: Bus;
  /** The inbox window (config INBOX_RETENTION): an older event cannot be told from one applied already. */
  inboxMs: number;
  now: () => Date;
};

/** Each message's hop, for its handler when it runs in a group's transaction under another's. */
const hops = new WeakMap<BusMessage, TraceContext>();

/** Subscribes under the durable name to the subjects `consumer` has handlers for. */
export async function startConsumer(deps: ConsumerDeps, consumer: Consumer): Promise<() => Promise<void>> {
  const subjects = Object.keys(consumer.handlers) as EventSubject[];
  const concurrency = consumer.concurrency ?? 1;
  const apply =
    concurrency > 1 ? groupedApply(deps, consumer, concurrency) : (msg: BusMessage) => applyEvent(deps, consumer, msg);
  const stop = await deps.bus.subscribe(
    consumer.durable,
    subjects,
    async (msg) => {
      const span = startSpan(`${consumer.durable} ${msg.subject}`, "consumer", parseTraceparent(msg.traceparent), {
        attributes: { "messaging.consumer.group.name": consumer.durable, "messaging.destination.name": msg.subject },
      });
      hops.set(msg, span.trace);
      try {
        await apply(msg);
        span.end();
      } catch (err) {
        span.end(undefined, String(err));
        throw err;
      }
    },
    { concurrency },
  );
  const unwatch = watchConsumer(consumer.durable, () => deps.bus.pending(consumer.durable, subjects));
  return async () => {
    unwatch();
    await stop();
  };
}

/**
 * Applies one message at most once per consumer, by the event's own id (not the transport's) in the inbox,
 * and settles it in the same transaction. Resolves to whether the handler ran. An event older than the
 * inbox window (only a manual replay brings one) is logged, not applied: its id may have been pruned.
 */
export async function applyEvent(deps: ConsumerDeps, consumer: Consumer, msg: BusMessage): Promise<boolean> {
  const [applied] = await deps.db.transaction((tx) => applyInTransaction(tx, deps, consumer, [msg]));
  return applied === true;
}

/** Resolves to whether each message's event was applied, in order; an event twice in a group counts once. */
async function applyInTransaction(
  tx: Tx,
  deps: ConsumerDeps,
  consumer: Consumer,
  msgs: readonly BusMessage[],
): Promise<boolean[]> {
  const items = msgs.map((msg): GroupItem | undefined => {
    const subject = msg.subject as EventSubject;
    if (!consumer.handlers[subject]) throw new Error(`consumer ${consumer.durable} has no handler for ${msg.subject}`);
    const event = decodeEvent(subject, msg.data);
    if (refusedAsTooOld(deps, consumer, subject, event)) return undefined;
    return { subject, event, hop: hopOf(msg) };
  });
  const candidates = items.flatMap((item) => (item ? [item.event.eventId] : []));
  const recorded = await recordInbox(tx, deps.db.schema, consumer.durable, candidates);
  // The inbox answers ids in Postgres's form (lower case); an id applies once, for its first message.
  const applied = items.map((item) => item !== undefined && recorded.delete(item.event.eventId.toLowerCase()));
  const toApply = items.filter((item, i): item is GroupItem => applied[i] === true);
  if (toApply.length > 0) await (consumer.handleGroup ?? oneByOne(consumer))(tx, toApply);
  if (log.isLevelEnabled("debug"))
    for (const item of toApply)
      log.debug(
        { durable: consumer.durable, subject: item.subject, eventId: item.event.eventId, ...traceLogFields(item.hop) },
        "applied event",
      );
  for (const msg of msgs) await msg.settle?.(tx);
  return applied;
}

/** Each handler's transaction carries its event's own hop, so what it enqueues continues that trace. */
function oneByOne(consumer: Consumer): GroupHandler {
  return async (tx, items) => {
    for (const { subject, event, hop } of items) {
      const handle = consumer.handlers[subject] as EventHandler<EventSubject>;
      await handle(hop ? withTrace(tx, hop) : tx, event);
    }
  };
}

/** See applyEvent. */
function refusedAsTooOld(deps: ConsumerDeps, consumer: Consumer, subject: EventSubject, event: EventOf<EventSubject>) {
  if (!tooOld(deps, event)) return false;
  log.error(
    {
      durable: consumer.durable,
      subject,
      eventId: event.eventId,
      occurredAt: event.occurredAt ? timestampDate(event.occurredAt) : undefined,
    },
    "event older than the inbox window; not applied, as it may have been applied before",
  );
  return true;
}

/** The message's hop: the consumer's span of it, or (a direct applyEvent) a child of the trace it carries. */
function hopOf(msg: BusMessage): TraceContext {
  let hop = hops.get(msg);
  if (!hop) {
    hop = nextSpan(parseTraceparent(msg.traceparent));
    hops.set(msg, hop);
  }
  return hop;
}

function tooOld(deps: ConsumerDeps, event: EventOf<EventSubject>): boolean {
  const occurredAt = event.occurredAt ? timestampDate(event.occurredAt) : undefined;
  return occurredAt !== undefined && deps.now().getTime() - occurredAt.getTime() > deps.inboxMs;
}

/**
 * Events in flight together share one transaction, each acked once it committed. A failed group is applied
 * again one by one, so only the event at fault fails and is redelivered.
 */
function groupedApply(deps: ConsumerDeps, consumer: Consumer, maxBatch: number): (msg: BusMessage) => Promise<boolean> {
  return createBatcher<BusMessage, boolean>({
    run: (msgs) => deps.db.transaction((tx) => applyInTransaction(tx, deps, consumer, msgs)),
    maxBatch,
    maxRunning: consumer.groups ?? 1,
    isolate: () => true,
  });
}
