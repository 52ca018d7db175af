// The Bus (bus.ts) on NATS JetStream: one stream per producer, durable pull consumers.

import type {
  ConsumerConfig,
  ConsumerMessages,
  JetStreamManager,
  JsMsg,
  MsgHdrs,
  NatsConnection,
  NatsError,
} from "nats";
import {
  AckPolicy,
  ConsumerEvents,
  connect,
  DeliverPolicy,
  ErrorCode,
  Events,
  nanos,
  headers as natsHeaders,
  RetentionPolicy,
  StorageType,
} from "nats";
import { logger } from "../log.js";
import { consumerRedeliveries } from "../metrics.js";
import { TRACEPARENT } from "../trace.js";
import { startWorker } from "../worker/worker.js";
import type { Bus, BusHandler, Producer } from "./bus.js";
import { assertDurableName, assertPublishSubject, assertSubjectPattern, producers } from "./bus.js";

const log = logger("lib:bus:nats");

// A relay whose publish reached the broker but whose transaction then failed publishes again
// after a backoff of at most seconds (or once the broker is back): two minutes covers it.
const duplicateWindowMs = 2 * 60_000;
const ackWaitMs = 30_000;
// Few messages in flight per process: the rest stay available to other replicas, and buffered ones
// do not use up their ack wait behind a slow handler.
const pullBatch = 16;
/**
 * Not nats.js's 30 s: a pull left on a consumer leader that died is replaced after two missed heartbeats
 * at half of this, so within seconds (test/faults/nats-cluster.test.ts).
 */
const pullExpiresMs = 3_000;
const nakBaseMs = 500;
const nakMaxMs = 30_000;
const restartBaseMs = 250;
const restartMaxMs = 5_000;
const drainTimeoutMs = 5_000;

const streamNameInUse = 10058;

export type NatsBusOptions = {
  /** Comma-separated. */
  servers: string;
  /** Prefixes stream names and subjects on the wire; tests use it to share one server. */
  namespace?: string;
  name?: string;
  /** The streams' max age (EVENT_RETENTION). */
  maxAgeMs?: number;
  replicas?: number;
};

/**
 * Unreachable or not ready yet, as opposed to a refusal that waiting does not change. A server still
 * starting may accept the connection and reset it (ECONNRESET, EPIPE).
 */
export function isNatsUnreachable(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return (
    code === "ECONNRESET" ||
    code === "EPIPE" ||
    code === ErrorCode.ConnectionRefused ||
    code === ErrorCode.ConnectionTimeout ||
    code === ErrorCode.Timeout ||
    code === ErrorCode.Disconnect ||
    code === ErrorCode.ConnectionClosed ||
    code === ErrorCode.JetStreamNotEnabled
  );
}

/**
 * Creates or updates the producers' streams, so replicas may start at once; the event id is `Nats-Msg-Id`,
 * so JetStream stores a re-published event once. Each subject filter of a durable is one pull consumer
 * (servers before 2.10 allow one filter each). Order holds per filter and process only: replicas run in
 * parallel, so handlers must tolerate concurrency (the inbox makes them idempotent).
 */
export async function createNatsBus(options: NatsBusOptions): Promise<Bus> {
  const namespace = options.namespace ? assertNamespace(options.namespace) : undefined;
  const toWire = (subject: string) => (namespace === undefined ? subject : `${namespace}.${subject}`);
  const fromWire = (subject: string) => (namespace === undefined ? subject : subject.slice(namespace.length + 1));
  const streamOf = (producer: Producer) => natsStreamName(producer, namespace);

  const nc = await connect({
    servers: options.servers.split(",").map((server) => server.trim()),
    name: options.name,
    maxReconnectAttempts: -1,
  });
  let connected = true;
  void watchConnection(nc, (up) => {
    connected = up;
  });

  let jsm: JetStreamManager;
  try {
    jsm = await nc.jetstreamManager();
    for (const producer of producers) {
      await ensureStream(
        jsm,
        streamOf(producer),
        [toWire(`${producer}.>`)],
        options.maxAgeMs ?? 0,
        options.replicas ?? 1,
      );
    }
  } catch (err) {
    await nc.close();
    throw err;
  }
  const js = nc.jetstream();

  const ensureConsumer = async (stream: string, name: string, filter: string): Promise<void> => {
    const config: Partial<ConsumerConfig> = {
      durable_name: name,
      filter_subject: filter,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      max_deliver: -1,
      ack_wait: nanos(ackWaitMs),
    };
    try {
      await jsm.consumers.add(stream, config);
    } catch (err) {
      // An existing durable with an older configuration: bring the settings we own up to date.
      const existing = await jsm.consumers.info(stream, name).catch(() => undefined);
      if (existing === undefined) throw err;
      await jsm.consumers.update(stream, name, { max_deliver: -1, ack_wait: nanos(ackWaitMs) });
    }
  };

  const deliver = async (msg: JsMsg, handler: BusHandler, durable: string): Promise<void> => {
    const subject = fromWire(msg.subject);
    const eventId = msg.headers?.get("Nats-Msg-Id") ?? "";
    if (eventId === "") {
      // Without it a consumer cannot deduplicate; retrying would only repeat the failure.
      log.error({ subject, seq: msg.seq }, "message without Nats-Msg-Id; terminating it");
      msg.term();
      return;
    }
    // By durable, as replay_consumer_pending: msg.info.consumer is one of its consumers (consumerName).
    if (msg.info.redelivered) consumerRedeliveries.inc({ durable });
    // Keeps a long handler's message from being redelivered to another replica after ackWait.
    const keepAlive = setInterval(() => msg.working(), ackWaitMs / 3);
    try {
      await handler({
        subject,
        eventId,
        data: msg.data,
        traceparent: traceparentOf(msg),
        redelivered: msg.info.redelivered,
      });
    } catch (err) {
      const delayMs = Math.min(nakBaseMs * 2 ** (msg.info.deliveryCount - 1), nakMaxMs);
      log.warn(
        { err, subject, eventId, deliveries: msg.info.deliveryCount, delayMs },
        "handler failed; redelivering later",
      );
      msg.nak(delayMs);
      return;
    } finally {
      clearInterval(keepAlive);
    }
    msg.ack();
  };

  // A round ends when the iterator ends or reports the consumer gone; the worker then starts another,
  // re-creating the consumer, so nothing short of stop() ends it. An empty round fails, so restarts back off.
  const startConsumeLoop = (
    durable: string,
    stream: string,
    name: string,
    filter: string,
    handler: BusHandler,
    concurrency: number,
  ) => {
    let stopping = false;
    let current: ConsumerMessages | undefined;
    let started = false;
    const worker = startWorker({
      name: `nats:${name}`,
      intervalMs: restartBaseMs,
      backoff: { baseMs: restartBaseMs, maxMs: restartMaxMs },
      round: async () => {
        if (started) await ensureConsumer(stream, name, filter);
        started = true;
        const consumer = await js.consumers.get(stream, name);
        const messages = await consumer.consume({
          max_messages: Math.max(pullBatch, concurrency),
          expires: pullExpiresMs,
        });
        current = messages;
        let delivered = 0;
        const handling = new Set<Promise<void>>();
        try {
          if (stopping) await messages.close();
          void restartWhenGone(messages, name);
          for await (const msg of messages) {
            if (stopping) {
              // Hands the buffered rest back at once instead of after ackWait.
              msg.nak();
              continue;
            }
            const handled: Promise<void> = deliver(msg, handler, durable).finally(() => handling.delete(handled));
            handling.add(handled);
            delivered++;
            if (handling.size >= concurrency) await Promise.race(handling);
          }
        } finally {
          await Promise.all(handling);
          current = undefined;
        }
        if (stopping) return false;
        if (delivered === 0) throw new Error(`consume of ${name} ended before delivering anything`);
        log.warn({ stream, consumer: name }, "consume ended; restarting");
        return true;
      },
    });
    return async () => {
      stopping = true;
      await current?.close();
      await worker.stop();
    };
  };

  const restartWhenGone = async (messages: ConsumerMessages, name: string): Promise<void> => {
    for await (const status of await messages.status()) {
      if (status.type === ConsumerEvents.ConsumerDeleted || status.type === ConsumerEvents.ConsumerNotFound) {
        log.warn({ consumer: name, status: status.type }, "consumer gone; re-creating it");
        await messages.close();
        return;
      }
    }
  };

  const stops = new Set<() => Promise<void>>();
  const track = (stop: () => Promise<void>) => {
    const once = async () => {
      if (!stops.delete(once)) return;
      await stop();
    };
    stops.add(once);
    return once;
  };
  let closing: Promise<void> | undefined;

  return {
    async publish(subject, eventId, data, traceparent) {
      const producer = assertPublishSubject(subject);
      const ack = await js.publish(toWire(subject), data, {
        msgID: eventId,
        ...(traceparent ? { headers: traceHeaders(traceparent) } : {}),
        expect: { streamName: streamOf(producer) },
      });
      if (ack.duplicate) log.debug({ subject, eventId }, "duplicate publish absorbed");
    },

    async subscribe(durable, subjects, handler, options) {
      assertDurableName(durable);
      if (subjects.length === 0) throw new Error(`durable ${durable} subscribes to no subject`);
      const consumers = [...new Set(subjects)].map((pattern) => ({
        stream: streamOf(assertSubjectPattern(pattern)),
        name: consumerName(durable, pattern),
        filter: toWire(pattern),
      }));
      // All consumers exist before any loop starts, so a failure leaves nothing running.
      for (const c of consumers) await ensureConsumer(c.stream, c.name, c.filter);
      const concurrency = Math.max(1, options?.concurrency ?? 1);
      const loops = consumers.map((c) => startConsumeLoop(durable, c.stream, c.name, c.filter, handler, concurrency));
      return track(async () => {
        await Promise.all(loops.map((stop) => stop()));
      });
    },

    async broadcast(subjects, handler) {
      for (const pattern of subjects) assertSubjectPattern(pattern);
      let stopping = false;
      const subs = subjects.map((pattern) => nc.subscribe(toWire(pattern)));
      const loops = subs.map(async (sub) => {
        for await (const msg of sub) {
          if (stopping) break;
          const subject = fromWire(msg.subject);
          const eventId = msg.headers?.get("Nats-Msg-Id") ?? "";
          try {
            await handler({ subject, eventId, data: msg.data, traceparent: traceparentOf(msg) });
          } catch (err) {
            log.warn({ err, subject, eventId }, "broadcast handler failed");
          }
        }
      });
      // "From now on": the server knows the subscriptions once the flush returns.
      await nc.flush();
      return track(async () => {
        stopping = true;
        for (const sub of subs) sub.unsubscribe();
        await Promise.all(loops);
      });
    },

    async pending(durable, subjects) {
      const infos = await Promise.all(
        [...new Set(subjects)].map((pattern) =>
          jsm.consumers.info(streamOf(assertSubjectPattern(pattern)), consumerName(durable, pattern)),
        ),
      );
      return infos.reduce((sum, info) => sum + info.num_pending + info.num_ack_pending, 0);
    },

    isReady: () => connected && !nc.isClosed(),

    close() {
      closing ??= (async () => {
        await Promise.all([...stops].map((stop) => stop()));
        if (nc.isClosed()) return;
        // Drain flushes what is pending; while the server is unreachable it could wait forever.
        let timer: NodeJS.Timeout | undefined;
        const timeout = new Promise<"timeout">((resolve) => {
          timer = setTimeout(() => resolve("timeout"), drainTimeoutMs);
        });
        const drained = nc.drain().then(
          () => "drained" as const,
          (err: unknown) => {
            log.warn({ err }, "drain failed");
            return "failed" as const;
          },
        );
        const outcome = await Promise.race([drained, timeout]);
        clearTimeout(timer);
        if (outcome !== "drained") await nc.close();
      })();
      return closing;
    },
  };
}

/** The stream holding a producer's subjects, e.g. `IDENTITY` or, namespaced, `t1_IDENTITY`. */
export function natsStreamName(producer: Producer, namespace?: string): string {
  const name = producer.toUpperCase();
  return namespace === undefined ? name : `${assertNamespace(namespace)}_${name}`;
}

function assertNamespace(namespace: string): string {
  // A producer's name as namespace would overlap the un-namespaced streams' subjects.
  if (!/^[A-Za-z0-9_]{1,32}$/.test(namespace) || (producers as readonly string[]).includes(namespace)) {
    throw new Error(`invalid bus namespace ${namespace}`);
  }
  return namespace;
}

/**
 * `markers` + `replays.recording.*` → `markers-replays-recording-ANY`. Subject tokens are lower
 * case and durable names have no `-`, so distinct pairs never collide.
 */
function consumerName(durable: string, pattern: string): string {
  const tokens = pattern.split(".").map((token) => (token === "*" ? "ANY" : token === ">" ? "ALL" : token));
  return `${durable}-${tokens.join("-")}`;
}

async function ensureStream(
  jsm: JetStreamManager,
  name: string,
  subjects: string[],
  maxAgeMs: number,
  replicas: number,
): Promise<void> {
  const settings = {
    subjects,
    duplicate_window: nanos(duplicateWindowMs),
    max_age: nanos(maxAgeMs),
    num_replicas: replicas,
  };
  try {
    await jsm.streams.add({ name, storage: StorageType.File, retention: RetentionPolicy.Limits, ...settings });
  } catch (err) {
    // Exists with another configuration (an older release, or a replica that won the race with
    // different settings): storage and retention cannot change in place, the rest can.
    if ((err as NatsError).api_error?.err_code !== streamNameInUse) throw err;
    const { config } = await jsm.streams.info(name);
    const current = config.duplicate_window ?? 0;
    const sameSubjects = subjects.every((s) => config.subjects.includes(s));
    const sameReplicas = config.num_replicas === replicas;
    if (current >= settings.duplicate_window && sameSubjects && config.max_age === settings.max_age && sameReplicas) {
      return;
    }
    // A replica count can change in place: the servers copy the stream to the new peers.
    await jsm.streams.update(name, {
      subjects: [...new Set([...config.subjects, ...subjects])],
      duplicate_window: Math.max(current, settings.duplicate_window),
      max_age: settings.max_age,
      num_replicas: replicas,
    });
    log.info({ stream: name }, "updated stream settings");
  }
}

async function watchConnection(nc: NatsConnection, onChange: (up: boolean) => void): Promise<void> {
  for await (const status of nc.status()) {
    if (status.type === Events.Disconnect) {
      onChange(false);
      log.warn({ server: status.data }, "disconnected from NATS");
    } else if (status.type === Events.Reconnect) {
      onChange(true);
      log.info({ server: status.data }, "reconnected to NATS");
    }
  }
}

/** js.publish adds Nats-Msg-Id itself. */
function traceHeaders(traceparent: string) {
  const h = natsHeaders();
  h.set(TRACEPARENT, traceparent);
  return h;
}

function traceparentOf(msg: { headers?: MsgHdrs }): string | undefined {
  return msg.headers?.get(TRACEPARENT) || undefined;
}
