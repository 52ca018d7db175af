import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import { outboxBacklog } from "./bus/outbox.js";
import type { Db, Queryable } from "./db/types.js";
import { logger } from "./log.js";

// One registry per process (shared in the embedded mode; labels tell services apart). No label ever
// holds a tenant id or another unbounded value.

const log = logger("lib:metrics");

export const registry = new Registry();
collectDefaultMetrics({ register: registry });

/** Seconds. */
const LATENCY = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** `route` is the route table's pattern, or "unmatched". */
export const httpRequests = new Histogram({
  name: "replay_http_request_duration_seconds",
  help: "Public HTTP requests by route pattern, method and status, and their latency.",
  labelNames: ["route", "method", "status"] as const,
  buckets: LATENCY,
  registers: [registry],
});

export const rpcCalls = new Histogram({
  name: "replay_rpc_server_duration_seconds",
  help: "RPCs served by service, method and code, and their latency.",
  labelNames: ["service", "method", "code"] as const,
  buckets: LATENCY,
  registers: [registry],
});

/** Lookups of what another process owns (lib/rpc/peers.ts); "unavailable" here is a 503 a caller got. */
export const peerCalls = new Histogram({
  name: "replay_rpc_peer_duration_seconds",
  help: "Lookups made of another process, by owner, method and code, and their latency.",
  labelNames: ["owner", "method", "code"] as const,
  buckets: LATENCY,
  registers: [registry],
});

/** By route pattern, never by tenant. */
export const rateLimitRefusals = new Counter({
  name: "replay_rate_limit_refusals_total",
  help: "Requests refused by the per-tenant rate limit, by route pattern.",
  labelNames: ["route"] as const,
  registers: [registry],
});

export const consumerRedeliveries = new Counter({
  name: "replay_consumer_redeliveries_total",
  help: "Events a durable consumer was handed again after a failure or a lost ack.",
  labelNames: ["durable"] as const,
  registers: [registry],
});

// Values read when scraped, from whatever the process registered to watch.
const outboxes = new Map<string, Queryable>();
const pools = new Set<{ schema: string; stats: () => PoolStats }>();

export type PoolStats = { total: number; idle: number; waiting: number };

const poolTotals = () => {
  const bySchema = new Map<string, PoolStats>();
  for (const { schema, stats } of pools) {
    const now = stats();
    const sum = bySchema.get(schema) ?? { total: 0, idle: 0, waiting: 0 };
    bySchema.set(schema, {
      total: sum.total + now.total,
      idle: sum.idle + now.idle,
      waiting: sum.waiting + now.waiting,
    });
  }
  return bySchema;
};
new Gauge({
  name: "replay_db_pool_connections",
  help: "Postgres connections of the process's pools, by schema and state (active, idle).",
  labelNames: ["schema", "state"] as const,
  registers: [registry],
  collect() {
    this.reset();
    for (const [schema, s] of poolTotals()) {
      this.set({ schema, state: "active" }, s.total - s.idle);
      this.set({ schema, state: "idle" }, s.idle);
    }
  },
});
new Gauge({
  name: "replay_db_pool_waiting",
  help: "Callers waiting for a Postgres connection of the process's pools, by schema: the pool is exhausted.",
  labelNames: ["schema"] as const,
  registers: [registry],
  collect() {
    this.reset();
    for (const [schema, s] of poolTotals()) this.set({ schema }, s.waiting);
  },
});

const retentionOverdue = scrapedGauge({
  name: "replay_retention_overdue_seconds",
  help: "How far past its retention window the oldest row a retention job should have dropped still is, by table (0: on time).",
  labelNames: ["table"] as const,
});

/** Until the returned function is called. */
export function watchRetention(table: string, overdueSeconds: () => Promise<number>): () => void {
  return retentionOverdue.watch(async () => [[{ table }, await overdueSeconds()]]);
}

export function watchPool(schema: string, stats: () => PoolStats): () => void {
  const entry = { schema, stats };
  pools.add(entry);
  return () => {
    pools.delete(entry);
  };
}
const consumers = new Map<string, () => Promise<number>>();

// Both outbox families read each schema through readOrLog keyed by its Db: the family collected
// second joins the first's query in flight instead of running its own.
async function readOutboxes(): Promise<Map<string, { backlog: number; age: number }>> {
  const values = new Map<string, { backlog: number; age: number }>();
  await Promise.all(
    [...outboxes].map(async ([schema, db]) => {
      const backlog = await readOrLog(`outbox ${schema}`, () => outboxBacklog(db, schema), db);
      if (backlog) values.set(schema, backlog);
    }),
  );
  return values;
}

new Gauge({
  name: "replay_outbox_backlog",
  help: "Events committed to a schema's outbox and not yet published.",
  labelNames: ["schema"] as const,
  registers: [registry],
  async collect() {
    this.reset();
    for (const [schema, { backlog }] of await readOutboxes()) this.set({ schema }, backlog);
  },
});
new Gauge({
  name: "replay_outbox_oldest_unpublished_age_seconds",
  help: "Age of the oldest event of a schema's outbox not yet published (0 when none).",
  labelNames: ["schema"] as const,
  registers: [registry],
  async collect() {
    this.reset();
    for (const [schema, { age }] of await readOutboxes()) this.set({ schema }, age);
  },
});

new Gauge({
  name: "replay_consumer_pending",
  help: "Events a durable consumer has not finished yet (delivered but unacknowledged included).",
  labelNames: ["durable"] as const,
  registers: [registry],
  async collect() {
    this.reset();
    await Promise.all(
      [...consumers].map(async ([durable, lag]) => {
        const pending = await readOrLog(`consumer ${durable}`, lag);
        if (pending !== undefined) this.set({ durable }, pending);
      }),
    );
  },
});

/** Read at each scrape from its watchers' readers, until `watch`'s returned function is called. */
export function scrapedGauge<L extends string>(spec: {
  name: string;
  help: string;
  labelNames: readonly L[];
}): { watch(read: () => Promise<ReadonlyArray<[Partial<Record<L, string>>, number]>>): () => void } {
  const readers = new Set<() => Promise<ReadonlyArray<[Partial<Record<L, string>>, number]>>>();
  new Gauge({
    ...spec,
    registers: [registry],
    async collect() {
      this.reset();
      const all = await Promise.all([...readers].map((read) => readOrLog(spec.name, read)));
      for (const [labels, value] of all.flatMap((values) => values ?? [])) this.set(labels, value);
    },
  });
  return {
    watch(read) {
      readers.add(read);
      return () => {
        readers.delete(read);
      };
    },
  };
}

/**
 * How long a scrape waits for one read by default (METRICS_READ_DEADLINE_MS): a read stuck behind an
 * exhausted pool or a NATS outage leaves its series out rather than the whole scrape timing out,
 * which would hide every other series (replay_db_pool_waiting among them) just when they matter.
 */
export const SCRAPE_READ_DEADLINE_MS = 2_000;
let readDeadlineMs = SCRAPE_READ_DEADLINE_MS;

/** The process's settings (lib/config.ts), once at start. */
export function configureMetrics(settings: { readDeadlineMs: number }): void {
  readDeadlineMs = settings.readDeadlineMs;
}
const LATE = Symbol("late");
/** Reads still running after their scrape gave up on them, by reader: the next scrape joins one instead of adding another. */
const reading = new Map<object, Promise<unknown>>();

async function readOrLog<T>(what: string, read: () => Promise<T>, key: object = read): Promise<T | undefined> {
  let running = reading.get(key) as Promise<T> | undefined;
  if (!running) {
    // Started in a promise, so that a reader that throws before returning one fails this read only.
    running = (async () => read())().finally(() => reading.delete(key));
    reading.set(key, running);
  }
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<typeof LATE>((resolve) => {
    timer = setTimeout(() => resolve(LATE), readDeadlineMs);
  });
  try {
    const value = await Promise.race([running, late]);
    if (value === LATE)
      log.warn({ what, deadlineMs: readDeadlineMs }, "a metric's read is late; left out of this scrape");
    return value === LATE ? undefined : value;
  } catch (err) {
    log.warn({ err, what }, "reading a metric for /metrics failed");
    return undefined;
  } finally {
    clearTimeout(timer);
  }
}

export function watchOutbox(db: Db): () => void {
  outboxes.set(db.schema, db);
  return () => outboxes.delete(db.schema);
}

export function watchConsumer(durable: string, lag: () => Promise<number>): () => void {
  consumers.set(durable, lag);
  return () => consumers.delete(durable);
}

export async function metricsText(): Promise<{ contentType: string; body: string }> {
  return { contentType: registry.contentType, body: await registry.metrics() };
}
