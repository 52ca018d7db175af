// One system's pass of the scale benchmark, the same on the empty database and on the seeded one:
// start the distributed system, set up two new tenants (one subscribed to a receiver path that
// answers 200, one to a path that answers each delivery's first attempt 500), then measure in turn
// idle CPU, the worker's claim, finish-to-delivery, the retry path, marker creates, a delivery-log
// page and a replays page (through the gateway, signed, on the heavy tenant when there is one), the
// claim and finish-to-delivery under a 60 s held snapshot, and retention passes dropping a day each; then stop.
import pg from "pg";
import { type Signer, sendSigned } from "../http.js";
import { type System, startDistributedSystem } from "../system.js";
import type { ChildServer } from "./child-server.js";
import { systemNodeArgs } from "./env.js";
import { type CpuGroup, findChildPids } from "./proc.js";
import {
  bufferCounters,
  bufferDelta,
  idleCpuPct,
  postgresServerPids,
  RETENTION_DAYS,
  type RetentionSeries,
  retentionSeries,
  type Summary,
  sampleClaims,
  sequential,
  sleep,
  summarize,
  webhooksDb,
  withHeldSnapshot,
} from "./scale-measure.js";
import { finishToDelivery, recordingTenant, retryPath } from "./scale-recording.js";

const IDLE_MS = 30_000;
const SETTLE_MS = 5_000;
const CLAIMS = { count: 300, maxMs: 40_000, gapMs: 20 };
const HELD_MS = 60_000;
const FINISHES = 100;
const RETRIES = 30;
const MARKERS = 200;
const PAGES = 300;
/** The most one latency series may take: a read that costs seconds at this size gets fewer samples. */
const MEASURE_MAX_MS = 60_000;
const RETENTION_MAX_MS = 180_000;

export type SystemFigures = {
  label: string;
  startMs: number;
  idleCpuPct: Record<string, number>;
  claim: Summary;
  nextDue: Summary;
  finishToDelivery: Summary;
  retryRaw: Summary;
  retryLate: Summary;
  markerCreate: Summary;
  deliveryLogPage: Summary;
  replaysPage: Summary;
  /** On the seeded system, the new tenant's own (small) log and list, beside the heavy tenant's. */
  newTenantLogPage: Summary;
  newTenantReplaysPage: Summary;
  /** Pages answered other than 200 (503: slower than the gateway's RPC deadline), by series. */
  failedPages: Record<string, number>;
  held: { claim: Summary; finishToDelivery: Summary };
  /** Postgres's buffers over the latency series (the claim to the last page): no target, what explains them. */
  buffers: ReturnType<typeof bufferDelta>;
  retention: RetentionSeries;
};

/** The seeded heavy tenant (a signing key is minted for it each run) and its subscription with the big log. */
export type Heavy = { tenantId: string; subscriptionId: string };

export type SystemRun = {
  label: string;
  /** The system's processes' environment (the seeded run points DATABASE_URL at the kept database). */
  env: Record<string, string>;
  /** The seeded database; unset: the harness's fresh one. */
  databaseUrl?: string;
  receiver: ChildServer;
  receiverOrigin: string;
  heavy?: Heavy;
  /**
   * Makes the days the retention passes drop (RETENTION_DAYS), when the database has none (the empty system);
   * resolves to the window that puts days 0 to `day` past it.
   */
  prepareRetention(databaseUrl: string): Promise<(day: number) => number>;
  progress(line: string): void;
};

export async function runSystem(run: SystemRun): Promise<SystemFigures> {
  const { progress, receiver } = run;
  const started = performance.now();
  const sys = await startDistributedSystem({ env: run.env, nodeArgs: systemNodeArgs() });
  const startMs = performance.now() - started;
  const databaseUrl = run.databaseUrl ?? (sys.databaseUrl as string);
  progress(`${run.label}: the system is up in ${Math.round(startMs)} ms`);
  const suffix = Math.random().toString(36).slice(2, 8);
  try {
    const ok = await recordingTenant(sys, `${run.receiverOrigin}/ok-${suffix}`);
    const flaky = await recordingTenant(sys, `${run.receiverOrigin}/flaky-${suffix}`);
    let heavySigner: Signer = ok.signer;
    if (run.heavy) {
      const { kid, secret } = await sys.admin.createSigningKey({ tenantId: run.heavy.tenantId });
      heavySigner = { tenant: run.heavy.tenantId, kid, secret };
    }
    const heavySubscription = run.heavy?.subscriptionId ?? ok.subscriptionId;
    await sleep(SETTLE_MS);

    progress(`${run.label}: idle CPU for ${IDLE_MS / 1000} s`);
    const idle = await idleCpuPct(cpuGroups(databaseUrl), IDLE_MS);

    const db = webhooksDb(databaseUrl);
    const client = new pg.Client({ connectionString: databaseUrl, application_name: "bench-scale" });
    await client.connect();
    try {
      progress(`${run.label}: the worker's claim`);
      const buffersBefore = await bufferCounters(client);
      const claims = await sampleClaims(db, CLAIMS);
      progress(`${run.label}: finish-to-delivery x ${FINISHES}`);
      const f2d = await finishToDelivery(ok, receiver, { count: FINISHES });
      progress(`${run.label}: the retry path x ${RETRIES}`);
      const retry = await retryPath(flaky, receiver, client, RETRIES);
      progress(`${run.label}: marker creates, delivery-log and replays pages`);
      const markers = await markerCreates(sys, ok.bearer(), ok.replayIds, MARKERS);
      // A page slower than the gateway's 10 s RPC deadline is answered 503: counted, its time kept.
      const failed: Record<string, number> = {};
      const page = (signer: Signer, path: string, label: string) =>
        sequential(
          PAGES,
          async () => {
            const res = await sendSigned(sys.baseUrl, signer, "GET", path);
            if (res.status !== 200) {
              failed[label] = (failed[label] ?? 0) + 1;
              if (failed[label] === 1) progress(`${run.label}: GET ${path}: ${res.status} ${res.text.slice(0, 200)}`);
            }
          },
          { warmup: 2, maxMs: MEASURE_MAX_MS },
        );
      const logPage = await page(heavySigner, `/v1/webhooks/${heavySubscription}/deliveries`, "deliveryLogPage");
      const replaysPage = await page(heavySigner, "/v1/replays", "replaysPage");
      const newLogPage = run.heavy
        ? await page(ok.signer, `/v1/webhooks/${ok.subscriptionId}/deliveries`, "newTenantLogPage")
        : logPage;
      const newReplaysPage = run.heavy ? await page(ok.signer, "/v1/replays", "newTenantReplaysPage") : replaysPage;
      const buffers = bufferDelta(buffersBefore, await bufferCounters(client));

      progress(`${run.label}: the claim and finish-to-delivery while a snapshot is held ${HELD_MS / 1000} s`);
      const held = await withHeldSnapshot(databaseUrl, async () => {
        const untilMs = performance.now() + HELD_MS;
        const [heldClaims, heldF2d] = await Promise.all([
          sampleClaims(db, { count: Number.POSITIVE_INFINITY, maxMs: HELD_MS, gapMs: 100 }),
          finishToDelivery(ok, receiver, { count: Number.POSITIVE_INFINITY, untilMs }),
        ]);
        return { claim: summarize(heldClaims.claim), finishToDelivery: summarize(heldF2d) };
      });

      progress(`${run.label}: ${RETENTION_DAYS} retention passes, each over a day's worth of the delivery log`);
      const windowFor = await run.prepareRetention(databaseUrl);
      const retention = await retentionSeries(db, windowFor, RETENTION_MAX_MS);
      for (const pass of retention.passes)
        progress(
          `${run.label}: retention deleted ${pass.deliveries} deliveries in ${pass.statements} rounds, ${Math.round(pass.totalMs)} ms${pass.cut ? " (cut short)" : ""}`,
        );
      return {
        label: run.label,
        startMs,
        idleCpuPct: idle,
        claim: summarize(claims.claim),
        nextDue: summarize(claims.nextDue),
        finishToDelivery: summarize(f2d),
        retryRaw: summarize(retry.raw),
        retryLate: summarize(retry.late),
        markerCreate: summarize(markers),
        deliveryLogPage: summarize(logPage),
        replaysPage: summarize(replaysPage),
        newTenantLogPage: summarize(newLogPage),
        newTenantReplaysPage: summarize(newReplaysPage),
        failedPages: failed,
        held,
        buffers,
        retention,
      };
    } finally {
      await client.end();
      await db.close();
    }
  } catch (err) {
    progress(`${run.label}: failed; the system's output:\n${sys.output().slice(-4000)}`);
    throw err;
  } finally {
    await sys.stop();
  }
}

/** The five processes (children of this one) and Postgres: the system's backends, and the server's own processes. */
function cpuGroups(databaseUrl: string): CpuGroup[] {
  const database = new URL(databaseUrl).pathname.slice(1);
  return [
    ...["webhooks", "gateway", "markers", "servers", "replays"].map((name) => ({
      label: name,
      pids: findChildPids(process.pid, `start.js ${name}`),
    })),
    { label: "postgres backends", cmdlineIncludes: ` ${database} ` },
    { label: "postgres server", pids: postgresServerPids() },
  ];
}

/** Marker creates through the gateway (API key), round-robin over the tenant's finished replays; ms each. */
async function markerCreates(
  sys: System,
  bearer: Record<string, string>,
  replayIds: readonly string[],
  count: number,
): Promise<number[]> {
  let i = 0;
  const once = async () => {
    const replayId = replayIds[i % replayIds.length] as string;
    i++;
    const res = await fetch(`${sys.baseUrl}/v1/api/timeline-events`, {
      method: "POST",
      headers: { ...bearer, "content-type": "application/json" },
      body: JSON.stringify({ replayId, tick: 1000 + i, label: `Bench marker ${i}` }),
    });
    const text = await res.text();
    if (res.status !== 201) throw new Error(`POST /v1/api/timeline-events: ${res.status} ${text}`);
  };
  return sequential(count, once, { maxMs: MEASURE_MAX_MS });
}
