import { logger } from "../log.js";
import type { Bus, BusHandler, BusMessage } from "./bus.js";
import { assertDurableName, assertPublishSubject, assertSubjectPattern, subjectMatches } from "./bus.js";

const log = logger("lib:bus:memory");

const retryBaseMs = 50;
const retryMaxMs = 5_000;

type Member = { handler: BusHandler; running: Promise<unknown> | undefined };

type Durable = {
  name: string;
  subjects: readonly string[];
  /** Index into the log of the next message this durable has not yet handled. */
  cursor: number;
  members: Member[];
  turn: number;
  pumping: boolean;
  wakeFromBackoff: (() => void) | undefined;
};

type Listener = {
  subjects: readonly string[];
  handler: BusHandler;
  queue: BusMessage[];
  draining: Promise<void> | undefined;
};

/**
 * The in-process bus of the embedded mode, with the JetStream semantics callers rely on: an event
 * id is stored once, a durable created later starts from the first message (deliver-all), a
 * durable's handlers run one message at a time in publish order, a failed message is retried with
 * capped exponential backoff until it succeeds (holding later ones back, to keep the order), and
 * subscribers of one durable share its messages.
 *
 * Everything lives in memory for the life of the process (messages and seen ids alike, as a
 * JetStream stream with limits retention and no age limit keeps them); nothing survives a restart.
 */
export function createMemoryBus(): Bus {
  const messages: BusMessage[] = [];
  const seen = new Set<string>();
  const durables = new Map<string, Durable>();
  const listeners = new Set<Listener>();
  let closed = false;

  const pump = async (durable: Durable): Promise<void> => {
    if (durable.pumping) return;
    durable.pumping = true;
    let attempts = 0;
    try {
      while (!closed && durable.members.length > 0 && durable.cursor < messages.length) {
        const msg = messages[durable.cursor] as BusMessage;
        if (!durable.subjects.some((pattern) => subjectMatches(pattern, msg.subject))) {
          durable.cursor++;
          continue;
        }
        const member = durable.members[durable.turn++ % durable.members.length] as Member;
        const run = Promise.resolve().then(() => member.handler({ ...msg }));
        member.running = run.catch(() => {});
        try {
          await run;
          durable.cursor++;
          attempts = 0;
        } catch (err) {
          attempts++;
          const delayMs = Math.min(retryBaseMs * 2 ** (attempts - 1), retryMaxMs);
          log.warn(
            { err, durable: durable.name, subject: msg.subject, eventId: msg.eventId, attempts, delayMs },
            "handler failed; retrying",
          );
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, delayMs);
            durable.wakeFromBackoff = () => {
              clearTimeout(timer);
              resolve();
            };
          });
          durable.wakeFromBackoff = undefined;
        } finally {
          member.running = undefined;
        }
      }
    } finally {
      durable.pumping = false;
    }
  };

  const drain = async (listener: Listener): Promise<void> => {
    for (let msg = listener.queue.shift(); msg !== undefined; msg = listener.queue.shift()) {
      try {
        await listener.handler(msg);
      } catch (err) {
        // Broadcast has no redelivery, as with core NATS.
        log.warn({ err, subject: msg.subject, eventId: msg.eventId }, "broadcast handler failed");
      }
    }
    listener.draining = undefined;
  };

  // Handlers run on a later tick, never inside publish(): a publisher inside a transaction (the
  // outbox relay on the single embedded connection) must not wait for consumers that need it.
  const schedule = (durable: Durable) => queueMicrotask(() => void pump(durable));

  return {
    async publish(subject, eventId, data) {
      if (closed) throw new Error("bus is closed");
      assertPublishSubject(subject);
      if (seen.has(eventId)) return;
      seen.add(eventId);
      // A copy, so that a publisher reusing its buffer cannot change what consumers see.
      const msg: BusMessage = { subject, eventId, data: data.slice() };
      messages.push(msg);
      for (const durable of durables.values()) schedule(durable);
      for (const listener of listeners) {
        if (!listener.subjects.some((pattern) => subjectMatches(pattern, subject))) continue;
        listener.queue.push(msg);
        listener.draining ??= Promise.resolve().then(() => drain(listener));
      }
    },

    async subscribe(name, subjects, handler) {
      if (closed) throw new Error("bus is closed");
      assertDurableName(name);
      if (subjects.length === 0) throw new Error(`durable ${name} subscribes to no subject`);
      for (const pattern of subjects) assertSubjectPattern(pattern);
      let durable = durables.get(name);
      if (durable === undefined) {
        durable = {
          name,
          subjects: [...subjects],
          cursor: 0,
          members: [],
          turn: 0,
          pumping: false,
          wakeFromBackoff: undefined,
        };
        durables.set(name, durable);
      } else if (!sameSet(durable.subjects, subjects)) {
        throw new Error(`durable ${name} already subscribes to ${durable.subjects.join(", ")}`);
      }
      const member: Member = { handler, running: undefined };
      durable.members.push(member);
      schedule(durable);
      const own = durable;
      return async () => {
        own.members = own.members.filter((m) => m !== member);
        // A message in backoff goes to the remaining members at once, or waits for the next one.
        own.wakeFromBackoff?.();
        await member.running;
      };
    },

    async broadcast(subjects, handler) {
      if (closed) throw new Error("bus is closed");
      for (const pattern of subjects) assertSubjectPattern(pattern);
      const listener: Listener = { subjects: [...subjects], handler, queue: [], draining: undefined };
      listeners.add(listener);
      return async () => {
        listeners.delete(listener);
        listener.queue.length = 0;
        await listener.draining;
      };
    },

    isReady: () => !closed,

    async close() {
      closed = true;
      const running: Promise<unknown>[] = [];
      for (const durable of durables.values()) {
        durable.wakeFromBackoff?.();
        for (const member of durable.members) if (member.running) running.push(member.running);
        durable.members = [];
      }
      for (const listener of listeners) {
        listener.queue.length = 0;
        if (listener.draining) running.push(listener.draining);
      }
      listeners.clear();
      await Promise.all(running);
    },
  };
}

function sameSet(a: readonly string[], b: readonly string[]): boolean {
  const left = new Set(a);
  const right = new Set(b);
  return left.size === right.size && [...left].every((s) => right.has(s));
}
