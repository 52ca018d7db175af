import type { Tx } from "../db/types.js";

/**
 * `settle` (the embedded bus's cursor) records in the consumer's transaction that the message is done, so
 * the effect and the bus's position commit together; JetStream has none and acks once the handler resolved.
 */
export type BusMessage = {
  subject: string;
  eventId: string;
  data: Uint8Array;
  /** Of the hop that committed the event. */
  traceparent?: string;
  /** Delivered before: its event may have been applied already. */
  redelivered?: boolean;
  settle?: (tx: Tx) => Promise<void>;
};

/** Applies one event; a rejection asks for redelivery (durable) or is logged (broadcast). */
export type BusHandler = (msg: BusMessage) => Promise<void>;

export type SubscribeOptions = {
  /**
   * Messages of one subject a process handles at once (default 1: in order); only for handlers that commute.
   * The embedded bus, whose cursor moves in order, handles one at a time.
   */
  concurrency?: number;
};

/** The event bus of ARCHITECTURE.md §Events: JetStream (`nats.ts`) or the outbox tables (`embedded.ts`). */
export interface Bus {
  /** Resolves once the broker stored it; the same eventId published twice is stored once. */
  publish(subject: string, eventId: string, data: Uint8Array, traceparent?: string): Promise<void>;
  /**
   * At-least-once: acked after the handler resolves, redelivered with backoff after a throw. Processes with
   * the same durable share the work. The stop function waits for in-flight handlers.
   */
  subscribe(
    durable: string,
    subjects: readonly string[],
    handler: BusHandler,
    options?: SubscribeOptions,
  ): Promise<() => Promise<void>>;
  /** Every process gets every message published from now on; no durability. */
  broadcast(subjects: readonly string[], handler: BusHandler): Promise<() => Promise<void>>;
  /** Events the durable has not finished (waiting, or delivered and not acked): its lag. */
  pending(durable: string, subjects: readonly string[]): Promise<number>;
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

/** `<producer>.<entity>.<verb>`, no wildcards; throws otherwise, since a wrong subject is a programmer error. */
export function assertPublishSubject(subject: string): Producer {
  const match = publishSubject.exec(subject);
  if (!match) throw new Error(`invalid event subject ${subject}: want <producer>.<entity>.<verb>`);
  return match[1] as Producer;
}

/** A literal producer, then tokens or `*`, optionally a final `>`. */
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
