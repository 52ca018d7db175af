// The scale benchmark's measurements, each on a running system and blind to whether its database is
// empty or seeded: the delivery worker's claim and next-due statements timed as the worker runs
// them, idle CPU by process, latency summaries, a held snapshot, and one delivery-log retention pass.
// The worker's statements and the retention round: each is
// called from one small function here (claimOnce, nextDueOnce, retentionPass), the place to adjust.
import pg from "pg";
import { createPgDb } from "../../lib/db/db.js";
import type { Db } from "../../lib/db/types.js";
import { claimDeliveries, nextDueInMs } from "../../services/webhooks/delivery/queue-store.js";
import { PER_SUBSCRIPTION_MAX } from "../../services/webhooks/delivery/worker.js";
import { logRetentionWorker } from "../../services/webhooks/log-retention.js";
import { type CpuGroup, cpuDelta, listProcesses, snapshotCpu } from "./proc.js";
import { percentile } from "./stats.js";

/** A latency summary in ms. */
export type Summary = { n: number; p50: number; p99: number; max: number };

export function summarize(samples: readonly number[]): Summary {
  const sorted = [...samples].sort((a, b) => a - b);
  return {
    n: sorted.length,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    max: sorted.length ? (sorted[sorted.length - 1] as number) : Number.NaN,
  };
}

/**
 * Milliseconds since the epoch: the clock the receiver process stamps arrivals with and the database schedules
 * retries by. The wall clock itself, read at each call: a clock anchored once at start (performance.timeOrigin)
 * drifts from another process's and from the database's when the machine's clock is stepped (a run's retry
 * figures came out negative by seconds).
 */
export const nowMs = () => Date.now();
export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The webhooks schema's pool, as the service opens it (createPgDb: jit off, named statements). */
export function webhooksDb(databaseUrl: string): Db {
  return createPgDb({ url: databaseUrl, schema: "webhooks", poolMax: 2, applicationName: "bench-scale" });
}

/** The delivery worker's claim parameters (worker.ts: lease = the 15 s attempt timeout + 10 s). */
const CLAIM = { owner: "bench-scale-claim", leaseMs: 25_000, perSubscription: PER_SUBSCRIPTION_MAX, limit: 256 };

/**
 * One claim as the idle worker runs it (every slot free, nothing busy), timed around the statement
 * alone, in a transaction rolled back: whatever it would lease goes back at once, so the bench
 * never holds a delivery the worker should send.
 */
export async function claimOnce(db: Db): Promise<number> {
  let ms = 0;
  await db
    .transaction(async (tx) => {
      const started = performance.now();
      await claimDeliveries(tx, { ...CLAIM, busy: new Map() });
      ms = performance.now() - started;
      throw rollback;
    })
    .catch((err: unknown) => {
      if (err !== rollback) throw err;
    });
  return ms;
}
const rollback = new Error("rollback");

/** The worker's read of when it next has an attempt due (it sleeps until then). */
export async function nextDueOnce(db: Db): Promise<number> {
  const started = performance.now();
  await nextDueInMs(db);
  return performance.now() - started;
}

/** Claims (and next-due reads) one after another until `count` or `maxMs`, `gapMs` apart. */
export async function sampleClaims(
  db: Db,
  opts: { count: number; maxMs: number; gapMs: number },
): Promise<{ claim: number[]; nextDue: number[] }> {
  const claim: number[] = [];
  const nextDue: number[] = [];
  const until = performance.now() + opts.maxMs;
  // The first of each warms the pool's connection and prepares the statements.
  await claimOnce(db);
  await nextDueOnce(db);
  while (claim.length < opts.count && performance.now() < until) {
    claim.push(await claimOnce(db));
    nextDue.push(await nextDueOnce(db));
    await sleep(opts.gapMs);
  }
  return { claim, nextDue };
}

/**
 * `count` runs of `once` one after another, after `warmup` unmeasured ones; ms each. Stops early
 * once `maxMs` passed (a read that takes seconds at this size), with 10 samples at least.
 */
export async function sequential(
  count: number,
  once: () => Promise<void>,
  opts: { warmup?: number; maxMs?: number } = {},
): Promise<number[]> {
  for (let i = 0; i < (opts.warmup ?? 5); i++) await once();
  const until = performance.now() + (opts.maxMs ?? Number.POSITIVE_INFINITY);
  const samples: number[] = [];
  while (samples.length < count && (samples.length < 10 || performance.now() < until)) {
    const started = performance.now();
    await once();
    samples.push(performance.now() - started);
  }
  return samples;
}

/**
 * The Postgres server's own processes (postmaster, checkpointer, writers, launchers): every
 * postgres process that serves no database connection. Backends of other databases (other work on
 * this shared server) are left out; the system's are counted by their database's name.
 */
export function postgresServerPids(): number[] {
  return listProcesses()
    .filter(
      (p) =>
        /\/bin\/postgres\s/.test(p.cmdline) ||
        /^postgres: [^:]+: (checkpointer|background writer|walwriter|autovacuum launcher|logical replication launcher|stats collector|archiver)/.test(
          p.cmdline,
        ),
    )
    .map((p) => p.pid);
}

/** CPU of each group over `ms` of nothing asked of the system, as % of one core. */
export async function idleCpuPct(groups: readonly CpuGroup[], ms: number): Promise<Record<string, number>> {
  const before = snapshotCpu(groups);
  await sleep(ms);
  const delta = cpuDelta(before, snapshotCpu(groups));
  return Object.fromEntries(
    groups.map((g) => [g.label, (100 * (delta.byLabelMs[g.label] ?? 0)) / delta.elapsedMs] as const),
  );
}

/**
 * Postgres's buffer and WAL counters: the database's block reads and hits, the server's buffers written by backends,
 * and the WAL it wrote (full-page images: a page's first change after a checkpoint writes all of it).
 */
export type BufferCounters = { read: number; hit: number; backendWrites: number; walFpi: number; walBytes: number };

export async function bufferCounters(client: pg.Client): Promise<BufferCounters> {
  const { rows } = await client.query<Record<keyof BufferCounters, string>>(
    `SELECT d.blks_read AS "read", d.blks_hit AS hit, b.buffers_backend AS "backendWrites",
            w.wal_fpi AS "walFpi", w.wal_bytes AS "walBytes"
       FROM pg_stat_database d, pg_stat_bgwriter b, pg_stat_wal w
      WHERE d.datname = current_database()`,
  );
  const row = rows[0];
  return {
    read: Number(row?.read),
    hit: Number(row?.hit),
    backendWrites: Number(row?.backendWrites),
    walFpi: Number(row?.walFpi),
    walBytes: Number(row?.walBytes),
  };
}

/** What the buffers and the WAL did between two readings. */
export function bufferDelta(before: BufferCounters, after: BufferCounters) {
  const read = after.read - before.read;
  const hit = after.hit - before.hit;
  return {
    read,
    hitPct: (100 * hit) / Math.max(1, hit + read),
    backendWrites: after.backendWrites - before.backendWrites,
    walFpi: after.walFpi - before.walFpi,
    walMiB: (after.walBytes - before.walBytes) / 2 ** 20,
  };
}

/**
 * Runs `during` while a separate connection holds a REPEATABLE READ snapshot open (as a long
 * analytics query does): nothing deleted or updated after it began can be pruned or vacuumed
 * away meanwhile. Rolled back after `during` resolves.
 */
export async function withHeldSnapshot<T>(databaseUrl: string, during: () => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: databaseUrl, application_name: "bench-scale-snapshot" });
  await client.connect();
  try {
    await client.query("BEGIN ISOLATION LEVEL REPEATABLE READ");
    await client.query("SELECT 1 FROM webhooks.delivery LIMIT 1");
    return await during();
  } finally {
    await client.query("ROLLBACK").catch(() => {});
    await client.end();
  }
}

/** The retention's batch where it deletes row by row: what one statement deletes at most (log-retention.ts's default). */
export const RETENTION_BATCH = 2_000;

/**
 * Retention passes per system, each dropping one more day. A day's drop is ~10 ms of statements and ~100 ms of
 * the kernel truncating ~200 MB of files, which varies 80-190 ms from one drop to the next on an idle machine:
 * one sample per system measured that noise, the median of five measures the drop.
 */
export const RETENTION_DAYS = 5;

export type RetentionPass = {
  deliveries: number;
  /** The retention worker's rounds. */
  statements: number;
  totalMs: number;
  /** Stopped at maxMs before the window was empty. */
  cut: boolean;
  perStatement: Summary;
  /** ms per 1 000 deliveries deleted (with their attempts). */
  msPer1000: number;
};

/** Deliveries made before the window, counted in the partitions that can hold them (out of the timing). */
async function deliveriesBefore(db: Db, retentionMs: number): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM webhooks.delivery
      WHERE delivery_id < webhooks.uuid7_floor(now() - $1 * interval '1 millisecond')`,
    [retentionMs],
  );
  return rows[0]?.n ?? 0;
}

export type RetentionSeries = {
  passes: RetentionPass[];
  /** The median pass's ms per 1 000 deliveries. */
  msPer1000: number;
};

/**
 * RETENTION_DAYS passes, the window moved on a day before each (`windowFor(day)`: the window that puts days 0 to
 * `day` past it), after a checkpoint so that neither system's drops share the disk with the writes before them.
 */
export async function retentionSeries(
  db: Db,
  windowFor: (day: number) => number,
  maxMs: number,
): Promise<RetentionSeries> {
  await db.query("CHECKPOINT");
  const passes: RetentionPass[] = [];
  for (let day = 0; day < RETENTION_DAYS; day++) passes.push(await retentionPass(db, windowFor(day), maxMs));
  return { passes, msPer1000: summarize(passes.map((p) => p.msPer1000)).p50 };
}

/**
 * One retention pass: the retention worker's rounds (log-retention.ts, as the service runs it: days dropped whole,
 * stragglers and the default partitions row by row) one after another until one asks for no other at once, or until
 * `maxMs` passed.
 */
export async function retentionPass(db: Db, retentionMs: number, maxMs: number): Promise<RetentionPass> {
  const worker = logRetentionWorker({ db, retentionMs, batchSize: RETENTION_BATCH });
  const signal = new AbortController().signal;
  const before = await deliveriesBefore(db, retentionMs);
  const started = performance.now();
  const perStatement: number[] = [];
  let cut = false;
  for (;;) {
    const t = performance.now();
    const more = await worker.round(signal);
    perStatement.push(performance.now() - t);
    if (more !== true) break;
    if (performance.now() - started > maxMs) {
      cut = true;
      break;
    }
  }
  const totalMs = performance.now() - started;
  const deliveries = before - (await deliveriesBefore(db, retentionMs));
  return {
    deliveries,
    statements: perStatement.length,
    totalMs,
    cut,
    perStatement: summarize(perStatement),
    msPer1000: deliveries > 0 ? (1000 * totalMs) / deliveries : Number.NaN,
  };
}
