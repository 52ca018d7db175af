import type { Tx } from "../db/types.js";

/**
 * One event as a consumer sees it: its subject, its event id and the encoded payload. `settle`,
 * where the adapter has it, records inside the consumer's own transaction that this message is
 * done (the embedded bus's cursor), so the handler's effect and the bus's position commit together;
 * the JetStream adapter has none and acks once the handler resolved.
 */
export type BusMessage = {
  subject: string;
  eventId: string;
  data: Uint8Array;
  /** The W3C traceparent of the hop that committed the event (lib/trace.ts), when it had one. */
  traceparent?: string;
  /**
   * The bus delivered this message before (JetStream's redelivery after a failure, an ack lost or
   * the ack wait passed): its event may have been applied already.
   */
  redelivered?: boolean;
  settle?: (tx: Tx) => Promise<void>;
};

/** Applies one event; a rejection asks for redelivery (durable) or is logged (broadcast). */
export type BusHandler = (msg: BusMessage) => Promise<void>;

export type SubscribeOptions = {
  /**
   * How many messages of one subject a process may handle at once (default 1: in order). Only for
   * handlers that commute, whose effects do not depend on the order events of a subject arrive in.
   * The JetStream adapter honours it; the embedded bus, whose cursor moves in order, handles one at
   * a time.
   */
  concurrency?: number;
};

/**
 * The event bus of ARCHITECTURE.md §Events. Two adapters implement it: JetStream (`nats.ts`) for
 * the distributed mode and the embedded one (`embedded.ts`), whose durables read the producers'
 * outbox tables, for the embedded mode.
 */
export interface Bus {
  /** Publishes durably: resolves once the broker has stored it; the same eventId published twice is stored once. */
  publish(subject: string, eventId: string, data: Uint8Array, traceparent?: string): Promise<void>;
  /** A durable, shared consumer (at-least-once; the message is acked only after handler resolves, redelivered after a throw, with backoff). Several processes subscribing with the same durable name share the work. Resolves to a stop function that waits for the in-flight handler. */
  subscribe(
    durable: string,
    subjects: readonly string[],
    handler: BusHandler,
    options?: SubscribeOptions,
  ): Promise<() => Promise<void>>;
  /** Every process gets every message published from now on (used by gateway replicas for key revocations); no durability. */
  broadcast(subjects: readonly string[], handler: BusHandler): Promise<() => Promise<void>>;
  /**
   * How many events of these subjects the durable has not finished (waiting, or delivered and not
   * yet acknowledged): its lag, for /metrics.
   */
  pending(durable: string, subjects: readonly string[]): Promise<number>;
  /** True when the broker is reachable (readiness). */
  isReady(): boolean;
  close(): Promise<void>;
}

/** The producing services; each owns one stream and the subjects under `<producer>.`. */
export const producers = ["identity", "servers", "replays"] as const;
export type Producer = (typeof producers)[number];

// Tokens are lower snake_case so that adapters can derive names from subjects without collisions.
const token = "[a-z0-9_]+";
const publishSubject = new RegExp(`^(${producers.join("|")})\\.${token}\\.${token}$`);
const subjectPattern = new RegExp(`^(${producers.join("|")})(\\.(${token}|\\*))*(\\.>)?$`);

/**
 * Checks a subject an event is published on: `<producer>.<entity>.<verb>`, no wildcards. Returns
 * its producer. Throws on anything else, since a wrong subject is a programmer error.
 */
export function assertPublishSubject(subject: string): Producer {
  const match = publishSubject.exec(subject);
  if (!match) throw new Error(`invalid event subject ${subject}: want <producer>.<entity>.<verb>`);
  return match[1] as Producer;
}

/**
 * Checks a subject filter a consumer subscribes to: a literal producer, then tokens or `*`, and
 * optionally a final `>`. Returns its producer.
 */
export function assertSubjectPattern(pattern: string): Producer {
  const match = subjectPattern.exec(pattern);
  if (!match) throw new Error(`invalid subject filter ${pattern}`);
  return match[1] as Producer;
}

/** NATS subject matching: `*` matches one token, a final `>` one or more. */
export function subjectMatches(pattern: string, subject: string): boolean {
  const want = pattern.split(".");
  const have = subject.split(".");
  for (const [i, part] of want.entries()) {
    if (part === ">") return have.length > i;
    if (i >= have.length) return false;
    if (part !== "*" && part !== have[i]) return false;
  }
  return want.length === have.length;
}

/** A durable name both adapters accept (JetStream consumer names exclude `.`, `*`, `>`). */
export function assertDurableName(durable: string): string {
  if (!/^[A-Za-z0-9_]{1,64}$/.test(durable)) throw new Error(`invalid durable name ${durable}`);
  return durable;
}
