// `npm run bench scale [--scale N] [--reseed]`: the distributed system on a platform-sized dataset
// against the same system on an empty database, in the same run. The dataset (scale-seed.ts; at
// scale 1: 10 000 tenants, 100 000 subscriptions, 5 000 000 ended deliveries with 10 000 000
// attempts over 30 days, 1 000 000 replays, 5 000 000 markers) is seeded by SQL into a database of
// its own, kept between runs (`--reseed` seeds it anew; another scale or seed version does too).
// Each system (scale-run.ts) is measured alike: idle CPU of each process and of Postgres over
// 30 s, the delivery worker's claim and next-due statements (p50/p99), finish-to-delivery for a
// new tenant (FinishRecording to collection.finalized at a local HTTPS receiver), the retry path
// (first attempt answered 500, the second 200), marker creates, a delivery-log page and a replays
// page through the gateway (the heavy tenant's on the seeded system), the claim and
// finish-to-delivery while a 60 s snapshot is held, and five retention passes over a day's worth
// of deliveries each (the empty system gets those days seeded first; the median pass compared).
// Targets: every latency within 1.2x of the empty system's, idle CPU at most 1% of a core for the
// webhooks process and Postgres.
// Last line: {"bench":"scale","ratio":{...},"idleCpuPct":{...},...}.
import { mkdtemp, rm } from "node:fs/promises";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { freePorts } from "../free-port.js";
import { startDistributedSystem } from "../system.js";
import { writeReceiverCertificate } from "../webhook-receiver.js";
import { startChildServer } from "./child-server.js";
import { BenchEnvError, requirePostgresAndNats, systemNodeArgs } from "./env.js";
import { type Cell, formatTable, round, writeResults } from "./report.js";
import { RETENTION_DAYS, summarize } from "./scale-measure.js";
import { type Heavy, runSystem, type SystemFigures } from "./scale-run.js";
import {
  alignSeed,
  appliedMigrations,
  bulkSession,
  createBenchSchema,
  createLogDays,
  DELIVERY_DAYS,
  databaseBytes,
  deliveryDay,
  ensureDatabase,
  readSeedRecord,
  SEED_DATABASE,
  SEED_VERSION,
  type SeedRecord,
  type SeedSize,
  seedAll,
  seedDeliveries,
  seedSize,
  seedSubscriptions,
  setRetentionPending,
  vacuumAnalyze,
  writeSeedRecord,
} from "./scale-seed.js";

/** The secrets key of every run on the kept dataset (a bench's own, not a secret). */
const SCALE_SECRETS_KEY = Buffer.alloc(32, 7).toString("base64");

export const description =
  "the system on 100 000 subscriptions, 5M deliveries, 1M replays, 5M markers vs on an empty database: latencies, idle CPU, retention (--scale N)";

const RATIO_TARGET = 1.2;
const IDLE_TARGET_PCT = 1;
const DAY_MS = 86_400_000;
const RETENTION_CUTOFF_PAST_DAY_MS = 10 * 60_000;

const progress = (line: string) => process.stderr.write(`[bench scale] ${line}\n`);

function parseArgs(args: string[]): { scale: number; reseed: boolean } {
  let scale = 1;
  let reseed = false;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (arg === "--reseed") reseed = true;
    else if (arg === "--scale" || arg.startsWith("--scale=")) {
      const text = arg === "--scale" ? args[++i] : arg.slice("--scale=".length);
      scale = Number(text);
      if (!Number.isFinite(scale) || scale <= 0 || scale > 10)
        throw new BenchEnvError(`--scale must be a number in (0, 10], got "${text}"`);
    } else throw new BenchEnvError(`unknown argument "${arg}" (expected --scale N, --reseed)`);
  }
  return { scale, reseed };
}

export async function run(args: string[]): Promise<void> {
  const { scale, reseed } = parseArgs(args);
  const env = await requirePostgresAndNats();
  const startedAt = new Date();
  const size = seedSize(scale);
  const seed = await prepareSeededDatabase(env.databaseUrl, scale, size, reseed);

  const work = await mkdtemp(join(tmpdir(), "bench-scale-"));
  writeReceiverCertificate(work);
  const [tlsPort] = (await freePorts(1)) as [number];
  const receiver = await startChildServer("scale-receiver", { CERT_DIR: work, TLS_PORT: String(tlsPort) });
  const systemEnv = {
    WEBHOOK_ALLOW_TARGETS: `127.0.0.1:${tlsPort}`,
    WEBHOOK_CA_FILE: join(work, "cert.pem"),
    WEBHOOK_RETRY_SCHEDULE: "0,1s",
    // The bench runs the retention pass itself, on a window of its choosing: the worker's own
    // (hourly, 30 d by default) would drop the kept dataset's oldest rows as they age past it.
    WEBHOOK_LOG_RETENTION: "3650d",
    // One key for every run: the kept dataset's secrets, sealed by the first run's reseal pass
    // (the seed writes them in the clear, as an upgrade finds them), stay readable in the next.
    SECRETS_KEY: SCALE_SECRETS_KEY,
  };
  const common = { receiver, receiverOrigin: `https://127.0.0.1:${tlsPort}`, progress };
  let empty: SystemFigures;
  let seeded: SystemFigures;
  let bytes = 0;
  try {
    empty = await runSystem({
      ...common,
      label: "empty",
      env: systemEnv,
      prepareRetention: (url) => seedRetentionDays(url, size),
    });
    seeded = await runSystem({
      ...common,
      label: "seeded",
      env: { ...systemEnv, DATABASE_URL: seed.url },
      databaseUrl: seed.url,
      heavy: seed.heavy,
      prepareRetention: async (url) => {
        await withClient(url, (c) => setRetentionPending(c, true));
        return (day) => windowMs(seed.record.seededAt, day);
      },
    });
  } finally {
    await receiver.stop();
    await rm(work, { recursive: true, force: true });
    const record = await readSeedRecord(env.databaseUrl);
    if (record?.retentionPending) await restoreRetentionDays(seed.url, size, record.seededAt);
    bytes = await withClient(seed.url, databaseBytes);
  }

  const report = buildReport(empty, seeded);
  const summary = {
    bench: "scale",
    scale,
    ratio: report.ratios,
    target: { ratio: RATIO_TARGET, idleCpuPct: IDLE_TARGET_PCT, met: report.met },
    idleCpuPct: { empty: report.idle(empty), seeded: report.idle(seeded) },
    held: {
      claimP99Ms: { empty: round(empty.held.claim.p99), seeded: round(seeded.held.claim.p99) },
      finishToDeliveryP99Ms: {
        empty: round(empty.held.finishToDelivery.p99),
        seeded: round(seeded.held.finishToDelivery.p99),
      },
    },
  };
  const path = await writeResults(
    "scale",
    {
      ...summary,
      startedAt: startedAt.toISOString(),
      node: process.version,
      cpus: cpus().length,
      size,
      seed: { ...seed.record, reused: seed.reused, seedingMs: seed.seedingMs, databaseBytes: bytes },
      empty,
      seeded,
    },
    startedAt,
  );
  process.stdout.write(
    [
      `scale benchmark at scale ${scale}: ${size.tenants} tenants, ${size.subscriptions} subscriptions, ${size.deliveries} ended deliveries ` +
        `(${size.attempts} attempts) over ${DELIVERY_DAYS} days, ${size.replays} replays, ${size.markers} markers ` +
        `(${(bytes / 2 ** 30).toFixed(1)} GiB; ${seed.reused ? `kept from ${seed.record.seededAt.toISOString()}` : `seeded in ${Math.round(seed.seedingMs / 1000)} s`})`,
      `machine: ${cpus().length} cores, shared; node ${process.version}. Both systems measured alike in this run, the empty one first.`,
      "",
      report.table,
      "",
      report.idleTable,
      "",
      `latency ratios (seeded / empty) within ${RATIO_TARGET}: ${report.metCount} of ${Object.keys(report.ratios).length}; ` +
        `idle CPU at most ${IDLE_TARGET_PCT}% of a core (webhooks, Postgres) on the seeded system: ${report.idleMet ? "met" : "NOT met"}`,
      "",
      `results: ${path}`,
      JSON.stringify(summary),
      "",
    ].join("\n"),
  );
}

type PreparedSeed = { url: string; record: SeedRecord; reused: boolean; seedingMs: number; heavy: Heavy };

/**
 * The kept database at this scale: reused when its record matches, else made anew: the system
 * started once on it to apply its migrations, stopped, then seeded. A retention day left deleted
 * by a run that stopped early is written again first.
 */
async function prepareSeededDatabase(
  baseUrl: string,
  scale: number,
  size: SeedSize,
  reseed: boolean,
): Promise<PreparedSeed> {
  const existing = await readSeedRecord(baseUrl);
  const reused = !reseed && existing?.scale === scale && existing.seedVersion === SEED_VERSION;
  let seedingMs = 0;
  const url = await ensureDatabase(baseUrl, !reused);
  if (!reused) {
    const started = performance.now();
    progress(
      `seeding ${SEED_DATABASE} at scale ${scale} (${existing ? `it held scale ${existing.scale}` : "none yet"})`,
    );
    progress("  the system once on it, to apply its migrations");
    const sys = await startDistributedSystem({
      env: { DATABASE_URL: url, SECRETS_KEY: SCALE_SECRETS_KEY },
      nodeArgs: systemNodeArgs(),
    });
    await sys.stop();
    const at = lastUtcMidnight();
    await withClient(url, async (client) => {
      await createBenchSchema(client);
      await seedAll(client, size, at, progress);
      seedingMs = performance.now() - started;
      await writeSeedRecord(client, {
        scale,
        seedVersion: SEED_VERSION,
        migrations: await appliedMigrations(client),
        seededAt: at,
        seedMs: Math.round(seedingMs),
        retentionPending: false,
      });
    });
    progress(`seeded in ${Math.round(seedingMs / 1000)} s`);
  } else if (existing.retentionPending) {
    await restoreRetentionDays(url, size, existing.seededAt);
  }
  return withClient(url, async (client) => {
    await alignSeed(client);
    // The seed or a day's write-back leaves gigabytes of dirty pages; written out now, not by a checkpoint running
    // under either system's measures.
    await client.query("CHECKPOINT");
    const record = (await readSeedRecord(baseUrl)) as SeedRecord;
    const now = await appliedMigrations(client);
    const newer = now.filter((m) => !record.migrations.includes(m));
    if (reused)
      progress(
        `reusing ${SEED_DATABASE} (scale ${scale}, seeded ${record.seededAt.toISOString()})${newer.length ? `; migrations applied since: ${newer.join(", ")}` : ""}`,
      );
    const { rows } = await client.query<{ t: string; s: string }>(
      "SELECT bench_scale.uuid4('t', 1) AS t, bench_scale.uuid4('s', 1) AS s",
    );
    const heavy = { tenantId: rows[0]?.t as string, subscriptionId: rows[0]?.s as string };
    return { url, record, reused, seedingMs, heavy };
  });
}

/**
 * The seed's "now": the last UTC midnight, so that each day of deliveries is one of the log's day partitions
 * (migration 016) and the retention pass drops day 0 whole on both systems.
 */
function lastUtcMidnight(): Date {
  return new Date(Math.floor(Date.now() / DAY_MS) * DAY_MS);
}

/**
 * The retention window that drops delivery days 0 to `day` (day 0 the oldest of those seeded at `at`): all of their
 * deliveries ended past it, the last ones 305 s after the day's end, so it ends ten minutes into the day after
 * (whose partition stays).
 */
function windowMs(at: Date, day: number): number {
  return Date.now() - (at.getTime() - (DELIVERY_DAYS - 1 - day) * DAY_MS + RETENTION_CUTOFF_PAST_DAY_MS);
}

/** The empty system's retention days: the seeded subscriptions and the oldest RETENTION_DAYS days of deliveries, nothing else. */
async function seedRetentionDays(url: string, size: SeedSize): Promise<(day: number) => number> {
  const at = lastUtcMidnight();
  await withClient(url, async (client) => {
    await createBenchSchema(client);
    await bulkSession(client);
    await seedSubscriptions(client, size, at);
    await alignSeed(client);
    await createLogDays(client, at);
    await seedDeliveries(client, size, at, deliveryDay(size, 0).lo, deliveryDay(size, RETENTION_DAYS - 1).hi);
    await vacuumAnalyze(client, ["webhooks.subscription", "webhooks.delivery", "webhooks.attempt"]);
  });
  return (day) => windowMs(at, day);
}

/**
 * Writes back what the seeded system's retention passes deleted: days 0 to RETENTION_DAYS - 1, and the day after
 * too (the window moves on with the clock while a pass runs); rows still there are left as they are.
 */
async function restoreRetentionDays(url: string, size: SeedSize, at: Date): Promise<void> {
  const started = performance.now();
  await withClient(url, async (client) => {
    await bulkSession(client);
    await createLogDays(client, at);
    await seedDeliveries(client, size, at, deliveryDay(size, 0).lo, deliveryDay(size, RETENTION_DAYS).hi);
    await vacuumAnalyze(client, ["webhooks.delivery", "webhooks.attempt"]);
    await setRetentionPending(client, false);
  });
  progress(`wrote the retention passes' days back in ${Math.round((performance.now() - started) / 1000)} s`);
}

async function withClient<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, application_name: "bench-scale-seed" });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** The latencies compared (seeded / empty), each read off both systems' figures. */
const LATENCIES: [key: string, label: string, read: (f: SystemFigures) => number][] = [
  ["claimP50", "claim p50 ms", (f) => f.claim.p50],
  ["claimP99", "claim p99 ms", (f) => f.claim.p99],
  ["nextDueP50", "next-due read p50 ms", (f) => f.nextDue.p50],
  ["nextDueP99", "next-due read p99 ms", (f) => f.nextDue.p99],
  ["finishToDeliveryP50", "finish-to-delivery p50 ms", (f) => f.finishToDelivery.p50],
  ["finishToDeliveryP99", "finish-to-delivery p99 ms", (f) => f.finishToDelivery.p99],
  ["retryP50", "retry: scheduled to received p50 ms", (f) => f.retryLate.p50],
  ["retryP99", "retry: scheduled to received p99 ms", (f) => f.retryLate.p99],
  ["retryRawP50", "retry: 500 to 200 received p50 ms", (f) => f.retryRaw.p50],
  ["markerCreateP50", "marker create p50 ms", (f) => f.markerCreate.p50],
  ["deliveryLogPageP99", "delivery-log page p99 ms", (f) => f.deliveryLogPage.p99],
  ["replaysPageP99", "replays page p99 ms", (f) => f.replaysPage.p99],
  ["retentionMsPer1000", "retention ms per 1 000 deliveries (median pass)", (f) => f.retention.msPer1000],
];

function buildReport(empty: SystemFigures, seeded: SystemFigures) {
  const ratios: Record<string, number | null> = {};
  const met: Record<string, boolean> = {};
  const rows: Cell[][] = [];
  for (const [key, label, read] of LATENCIES) {
    const ratio = read(seeded) / read(empty);
    ratios[key] = round(ratio, 3) ?? null;
    met[key] = ratio <= RATIO_TARGET;
    rows.push([label, round(read(empty)), round(read(seeded)), round(ratio, 3), met[key] ? "yes" : "NO"]);
  }
  const info: [string, (f: SystemFigures) => number][] = [
    ["delivery-log page p50 ms", (f) => f.deliveryLogPage.p50],
    ["replays page p50 ms", (f) => f.replaysPage.p50],
    ["new tenant's delivery-log page p99 ms", (f) => f.newTenantLogPage.p99],
    ["new tenant's replays page p99 ms", (f) => f.newTenantReplaysPage.p99],
    ["retention passes: deliveries deleted, median", (f) => summarize(f.retention.passes.map((p) => p.deliveries)).p50],
    ["retention passes: ms, median", (f) => summarize(f.retention.passes.map((p) => p.totalMs)).p50],
    ["retention passes: ms, slowest", (f) => summarize(f.retention.passes.map((p) => p.totalMs)).max],
    ["latency series: blocks read from outside shared_buffers", (f) => f.buffers.read],
    ["latency series: % of blocks found in shared_buffers", (f) => f.buffers.hitPct],
    ["latency series: buffers written by backends", (f) => f.buffers.backendWrites],
    ["latency series: WAL full-page images", (f) => f.buffers.walFpi],
    ["latency series: WAL MiB", (f) => f.buffers.walMiB],
    ["held snapshot: claim p99 ms", (f) => f.held.claim.p99],
    ["held snapshot: finish-to-delivery p50 ms", (f) => f.held.finishToDelivery.p50],
    ["held snapshot: finish-to-delivery p99 ms", (f) => f.held.finishToDelivery.p99],
    ["delivery-log pages answered other than 200", (f) => f.failedPages.deliveryLogPage ?? 0],
    ["replays pages answered other than 200", (f) => f.failedPages.replaysPage ?? 0],
    ["system start ms", (f) => f.startMs],
  ];
  for (const [label, read] of info)
    rows.push([label, round(read(empty)), round(read(seeded)), round(read(seeded) / read(empty), 2), undefined]);
  const idle = (f: SystemFigures) => ({
    webhooks: round(f.idleCpuPct.webhooks, 2) ?? 0,
    postgres: round((f.idleCpuPct["postgres backends"] ?? 0) + (f.idleCpuPct["postgres server"] ?? 0), 2) ?? 0,
  });
  const labels = Object.keys(seeded.idleCpuPct);
  const idleTable = formatTable(
    ["idle CPU, % of one core over 30 s", ...labels, "postgres in all"],
    [empty, seeded].map((f) => [f.label, ...labels.map((l) => round(f.idleCpuPct[l], 2)), idle(f).postgres]),
  );
  const idleMet = idle(seeded).webhooks <= IDLE_TARGET_PCT && idle(seeded).postgres <= IDLE_TARGET_PCT;
  met.idleCpu = idleMet;
  const table = formatTable(["measure", "empty", "seeded", "seeded/empty", `<= ${RATIO_TARGET}`], rows);
  const metCount = LATENCIES.filter(([key]) => met[key]).length;
  return { ratios, met, table, idleTable, idleMet, metCount, idle };
}
