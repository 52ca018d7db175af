// `npm run bench webhooks`: 10 000 replays events fanned out to 10 subscriptions (100 000 signed
// deliveries) through the whole pipeline (the replays outbox, its relay, NATS, the webhooks
// consumer's fan-out, the delivery worker's leases, HTTPS, the attempt log) to a local HTTPS receiver
// in a process of its own, against a baseline in the same run: one Node process POSTing the same
// signed bodies straight to the receiver at the worker's concurrency, on kept-alive connections.
// Reports deliveries/s, the delay from event to receipt (p50/p99), CPU µs per delivery by process,
// then the drain: the receiver goes down for 30 s while 1 000 events (10 000 deliveries) occur, and
// the time from its return to the last delivery. Every event must arrive at every subscription.
// Last line: {"bench":"webhooks","ratio":{"160":n},...}.
import { spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { buildEvent, decodeEvent } from "../../lib/bus/events.js";
import { newId } from "../../lib/ids.js";
import { PER_SUBSCRIPTION_MAX } from "../../services/webhooks/delivery/worker.js";
import { deliveryBody } from "../../services/webhooks/payload.js";
import { freePorts } from "../free-port.js";
import { provisionTenant, sendSigned } from "../http.js";
import { startDistributedSystem } from "../system.js";
import { writeReceiverCertificate } from "../webhook-receiver.js";
import { type ChildServer, startChildServer } from "./child-server.js";
import { requirePostgresAndNats, systemNodeArgs } from "./env.js";
import { type CpuGroup, cpuDelta, findChildPids, snapshotCpu } from "./proc.js";
import { formatTable, round, writeResults } from "./report.js";
import { percentile } from "./stats.js";

export const description =
  "10 000 events x 10 subscriptions delivered to a local HTTPS receiver vs one process POSTing the same signed bodies; drain after 30 s down";

const EVENTS = 10_000;
const SUBSCRIPTIONS = 10;
/** The worker's in-flight deliveries with 10 busy subscriptions: the baseline sends at the same concurrency. */
const CONCURRENCY = SUBSCRIPTIONS * PER_SUBSCRIPTION_MAX;
const RATIO_TARGET = 0.8;
const DRAIN_EVENTS = 1_000;
const DOWN_MS = 30_000;
const DRAIN_TARGET_S = 10;
const DRAIN_WAIT_MS = 180_000;

const progress = (line: string) => process.stderr.write(`[bench webhooks] ${line}\n`);

type Received = [path: string, eventId: string, atMs: number][];
type Phase = {
  target: string;
  deliveries: number;
  elapsedMs: number;
  perSecond: number;
  delayP50Ms: number;
  delayP99Ms: number;
  cpuUsPerDelivery: Record<string, number>;
  machineBusyPct: number;
};

export async function run(_args: string[]): Promise<void> {
  await requirePostgresAndNats();
  const startedAt = new Date();
  const work = await mkdtemp(join(tmpdir(), "bench-webhooks-"));
  writeReceiverCertificate(work);
  const [tlsPort] = (await freePorts(1)) as [number];
  const receiver = await startChildServer("webhook-receiver-server", { CERT_DIR: work, TLS_PORT: String(tlsPort) });
  progress("starting the distributed system (5 processes, fresh database)");
  const sys = await startDistributedSystem({
    env: { WEBHOOK_ALLOW_TARGETS: `127.0.0.1:${tlsPort}`, WEBHOOK_CA_FILE: join(work, "cert.pem") },
    nodeArgs: systemNodeArgs(),
  });
  const db = new pg.Client({ connectionString: sys.databaseUrl });
  await db.connect();
  const phases: Phase[] = [];
  let drain: { downMs: number; events: number; drainMs: number | undefined; complete: boolean } | undefined;
  try {
    const tenant = await provisionTenant(sys);
    const targets: { url: string; secret: string; path: string }[] = [];
    for (let i = 0; i < SUBSCRIPTIONS; i++) {
      const path = `/s${i}`;
      const url = `https://127.0.0.1:${tlsPort}${path}`;
      const res = await sendSigned(sys.baseUrl, tenant.signer, "POST", "/v1/webhooks", {
        body: { url, events: ["collection.finalized"] },
      });
      if (res.status !== 201) throw new Error(`POST /v1/webhooks: ${res.status} ${res.text}`);
      targets.push({ url, secret: res.body.secret, path });
    }
    const cpuGroups: CpuGroup[] = [
      { label: "webhooks", pids: findChildPids(process.pid, "start.js webhooks") },
      { label: "replays", pids: findChildPids(process.pid, "start.js replays") },
      { label: "postgres", cmdlineIncludes: ` ${new URL(sys.databaseUrl as string).pathname.slice(1)} ` },
      { label: "receiver", pids: [receiver.pid] },
      // The bus the events travel on: the system's cost, none of the baseline's.
      { label: "nats", cmdlineIncludes: "nats-server" },
      // Postgres's own processes (WAL writer, checkpointer, autovacuum), shared by every database on the server.
      { label: "pg background", cmdlineIncludes: "postgres: " },
      // This process: it emits the events and polls the receiver's count.
      { label: "harness", pids: [process.pid] },
    ];

    // The baseline sends what the system will send: the bodies of these events, to every target.
    const events = Array.from({ length: EVENTS }, (_, i) => finalizedEvent(tenant.tenantId, i));
    const bodiesFile = join(work, "bodies.jsonl");
    await writeFile(
      bodiesFile,
      `${events
        .map((e) => {
          const body = deliveryBody(
            "replays.collection.finalized",
            decodeEvent("replays.collection.finalized", e.payload),
          );
          return JSON.stringify({ eventId: e.eventId, event: "collection.finalized", body });
        })
        .join("\n")}\n`,
    );

    // The floor is the baseline's sending plus the cheapest delivery log (delivery-log-floor.ts). Baseline and floor
    // each run on both sides of the system and are averaged: a shared machine drifts within a run, and one floor
    // phase alone moved its ratio by 0.3 between runs of the same code.
    for (const target of ["baseline", "floor", "system", "floor", "baseline"]) {
      await stats(receiver, true);
      const before = snapshotCpu(cpuGroups);
      let startMs: number;
      let eventTimes: Map<string, number> | undefined;
      let senderCpuMs = 0;
      // The floor's last log write ends after its last delivery arrived: its run ends with the sender.
      let senderDoneMs = 0;
      // The floor's Postgres backend exits with its sender, before the reading below: it reports its CPU.
      let logPostgresCpuMs = 0;
      if (target === "baseline" || target === "floor") {
        startMs = Date.now();
        const out = await runBaselineSender({
          bodiesFile,
          targets,
          caFile: join(work, "cert.pem"),
          logDatabaseUrl: target === "floor" ? sys.databaseUrl : undefined,
        });
        if (out.failed > 0) throw new Error(`the ${target} sender saw ${out.failed} failed requests`);
        senderCpuMs = out.cpuMs;
        if (target === "floor") senderDoneMs = startMs + out.elapsedMs;
        logPostgresCpuMs = out.logPostgresCpuMs;
      } else {
        startMs = Date.now();
        eventTimes = await emit(db, events);
      }
      const received = await waitReceived(receiver, EVENTS * SUBSCRIPTIONS, 300_000);
      if (distinct(received) < EVENTS * SUBSCRIPTIONS) {
        throw new Error(`${target}: ${distinct(received)} of ${EVENTS * SUBSCRIPTIONS} deliveries within 300 s`);
      }
      const after = snapshotCpu(cpuGroups);
      const lastMs = Math.max(senderDoneMs, ...received.map((r) => r[2]));
      const delays = received.map((r) => r[2] - (eventTimes?.get(r[1]) ?? startMs)).sort((a, b) => a - b);
      const cpu = cpuDelta(before, after);
      // The sender has exited by now: it reports its own CPU time.
      if (senderCpuMs > 0) cpu.byLabelMs["baseline sender"] = senderCpuMs;
      cpu.byLabelMs.postgres = (cpu.byLabelMs.postgres ?? 0) + logPostgresCpuMs;
      // The machine's CPU outside every process above (the harness, the system's idle processes, the kernel's own).
      const measuredMs = Object.values(cpu.byLabelMs).reduce((sum, ms) => sum + ms, 0);
      cpu.byLabelMs.other = Math.max(0, cpu.machineBusyMs - measuredMs);
      const deliveries = received.length;
      phases.push({
        target,
        deliveries,
        elapsedMs: lastMs - startMs,
        perSecond: (EVENTS * SUBSCRIPTIONS) / ((lastMs - startMs) / 1000),
        delayP50Ms: percentile(delays, 0.5),
        delayP99Ms: percentile(delays, 0.99),
        cpuUsPerDelivery: Object.fromEntries(
          Object.entries(cpu.byLabelMs).map(([label, ms]) => [label, Math.round((ms * 1000) / deliveries)]),
        ),
        machineBusyPct: Math.round((100 * cpu.machineBusyMs) / (cpu.elapsedMs * cpus().length)),
      });
      progress(
        `${target}: ${deliveries} deliveries (${deliveries - distinct(received)} repeated) in ${Math.round(lastMs - startMs)} ms`,
      );
    }

    progress(`drain: the receiver goes down for ${DOWN_MS / 1000} s while ${DRAIN_EVENTS} events occur`);
    await stats(receiver, true);
    await fetch(`${receiver.url}/down`, { method: "POST", body: String(DOWN_MS) });
    const downAt = Date.now();
    await emit(
      db,
      Array.from({ length: DRAIN_EVENTS }, (_, i) => finalizedEvent(tenant.tenantId, i)),
    );
    const upAt = downAt + DOWN_MS;
    const expected = DRAIN_EVENTS * SUBSCRIPTIONS;
    const received = await waitReceived(receiver, expected, DOWN_MS + DRAIN_WAIT_MS);
    const complete = distinct(received) >= expected;
    drain = {
      downMs: DOWN_MS,
      events: DRAIN_EVENTS,
      complete,
      drainMs: complete ? Math.max(...received.map((r) => r[2])) - upAt : undefined,
    };
  } finally {
    await db.end();
    await sys.stop();
    await receiver.stop();
    await rm(work, { recursive: true, force: true });
  }

  // Each target but the system runs on both sides of it: its rate is the mean of its phases.
  const meanRate = (target: string) => {
    const runs = phases.filter((p) => p.target === target);
    return runs.length > 0 ? runs.reduce((sum, p) => sum + p.perSecond, 0) / runs.length : undefined;
  };
  const system = phases.find((p) => p.target === "system");
  const baselineRate = meanRate("baseline") ?? 0;
  const ratio = system ? system.perSecond / baselineRate : undefined;
  const floorRate = meanRate("floor");
  const floorRatio = floorRate ? floorRate / baselineRate : undefined;
  const ofFloor = floorRate && system ? system.perSecond / floorRate : undefined;
  const labels = [
    "webhooks",
    "replays",
    "postgres",
    "pg background",
    "nats",
    "receiver",
    "baseline sender",
    "harness",
    "other",
  ];
  const table = formatTable(
    [
      "target",
      "deliveries/s",
      "elapsed s",
      "delay p50 ms",
      "delay p99 ms",
      ...labels.map((l) => `${l} µs`),
      "machine busy %",
    ],
    phases.map((p) => [
      p.target,
      Math.round(p.perSecond),
      round(p.elapsedMs / 1000, 2),
      Math.round(p.delayP50Ms),
      Math.round(p.delayP99Ms),
      ...labels.map((l) => p.cpuUsPerDelivery[l] ?? 0),
      p.machineBusyPct,
    ]),
  );
  const path = await writeResults(
    "webhooks",
    {
      benchmark: "webhooks",
      startedAt: startedAt.toISOString(),
      node: process.version,
      cpus: cpus().length,
      phases,
      drain,
      ratio,
      floorRatio,
      ofFloor,
    },
    startedAt,
  );
  const drainText = drain?.complete
    ? `${round((drain.drainMs ?? 0) / 1000, 2)} s (target < ${DRAIN_TARGET_S} s: ${(drain.drainMs ?? 0) / 1000 < DRAIN_TARGET_S ? "met" : "NOT met"})`
    : `NOT drained within ${DRAIN_WAIT_MS / 1000} s of the receiver's return`;
  process.stdout.write(
    [
      `webhooks benchmark: ${EVENTS} events x ${SUBSCRIPTIONS} subscriptions = ${EVENTS * SUBSCRIPTIONS} deliveries to one HTTPS receiver process, ` +
        `concurrency ${CONCURRENCY} (the worker's: ${PER_SUBSCRIPTION_MAX} per subscription); baseline and floor before and after it`,
      `machine: ${cpus().length} cores, shared; node ${process.version}. Delay: from the event (system) or the start (baseline) to receipt.`,
      "CPU µs per delivery by process (from /proc around each phase; the baseline sender is its own process; other = the",
      "machine's busy time outside them: the system's idle processes, short-lived ones, the kernel's threads)",
      "floor = the baseline's sender keeping the cheapest delivery log we know (test/bench/delivery-log-floor.ts: each body once,",
      "        one narrow row per delivery, multi-row durable inserts after the sends; no bus, lease, schedule or retry): what any",
      "        sender that logs its deliveries pays at least; its process reads in the baseline sender column",
      "",
      table,
      "",
      `ratio (system deliveries/s over the baselines' mean): ${round(ratio, 2) ?? "-"} (target >= ${RATIO_TARGET}: ${(ratio ?? 0) >= RATIO_TARGET ? "met" : "NOT met"}); every event arrived at every subscription`,
      `floor (its deliveries/s over the baselines' mean): ${round(floorRatio, 2) ?? "-"}: the most a system with a delivery log can reach here; ` +
        `the system reached ${round(ofFloor, 2) ?? "-"} of it`,
      `drain after the receiver was down ${DOWN_MS / 1000} s with ${DRAIN_EVENTS} events (${DRAIN_EVENTS * SUBSCRIPTIONS} deliveries) waiting: ${drainText}`,
      "",
      `results: ${path}`,
      JSON.stringify({
        bench: "webhooks",
        ratio: { [String(CONCURRENCY)]: round(ratio, 2) ?? null },
        target: { ratio: RATIO_TARGET, met: (ratio ?? 0) >= RATIO_TARGET },
        drainS: drain?.complete ? round((drain.drainMs ?? 0) / 1000, 2) : null,
        drainTargetS: DRAIN_TARGET_S,
        floor: { [String(CONCURRENCY)]: round(floorRatio, 2) ?? null },
        ofFloor: { [String(CONCURRENCY)]: round(ofFloor, 2) ?? null },
      }),
      "",
    ].join("\n"),
  );
}

/** A replays.collection.finalized event of the bench tenant, as the replays service would emit it. */
function finalizedEvent(tenantId: string, i: number) {
  const replayId = newId();
  return buildEvent("replays.collection.finalized", {
    tenantId,
    collection: {
      id: replayId,
      replayId,
      serverId: "00000000-0000-4000-8000-000000000001",
      state: "finalized",
      visibility: "staff",
      status: "processing",
      integration: "bench",
      quality: "standard",
      durationMs: BigInt(60_000 + i),
      sizeBytes: 1_048_576n,
      formatVersion: 1,
    },
  });
}

/**
 * Commits the events into the replays service's outbox, as its transitions do (500 a statement),
 * and wakes its relay. Resolves to each event's commit time.
 */
async function emit(db: pg.Client, events: ReturnType<typeof finalizedEvent>[]): Promise<Map<string, number>> {
  const times = new Map<string, number>();
  for (let i = 0; i < events.length; i += 500) {
    const chunk = events.slice(i, i + 500);
    await db.query(
      `INSERT INTO replays.outbox (event_id, subject, payload)
       SELECT * FROM unnest($1::uuid[], $2::text[], $3::bytea[])`,
      [chunk.map((e) => e.eventId), chunk.map((e) => e.subject), chunk.map((e) => Buffer.from(e.payload))],
    );
    await db.query("NOTIFY replays_outbox");
    const at = Date.now();
    for (const e of chunk) times.set(e.eventId, at);
  }
  return times;
}

async function stats(receiver: ChildServer, reset: boolean): Promise<Received> {
  const res = await fetch(`${receiver.url}/stats${reset ? "?reset=1" : ""}`);
  return (await res.json()) as Received;
}

/**
 * Polls the receiver's distinct count until `count` deliveries arrived or `timeoutMs` passed,
 * printing progress every 5 s; then resolves to what it received either way (the whole list, read
 * once: see the receiver's /count).
 */
async function waitReceived(receiver: ChildServer, count: number, timeoutMs: number): Promise<Received> {
  const deadline = Date.now() + timeoutMs;
  let lastProgress = Date.now();
  for (;;) {
    const res = await fetch(`${receiver.url}/count`);
    const got = ((await res.json()) as { distinct: number }).distinct;
    if (got >= count || Date.now() > deadline) return stats(receiver, false);
    if (Date.now() - lastProgress >= 5_000) {
      progress(`  ${got} of ${count} deliveries so far`);
      lastProgress = Date.now();
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

function distinct(received: Received): number {
  return new Set(received.map((r) => `${r[0]} ${r[1]}`)).size;
}

function runBaselineSender(input: {
  bodiesFile: string;
  targets: { url: string; secret: string }[];
  caFile: string;
  logDatabaseUrl?: string | undefined;
}): Promise<{ sent: number; failed: number; elapsedMs: number; cpuMs: number; logPostgresCpuMs: number }> {
  const entry = fileURLToPath(new URL("./webhook-baseline-sender.js", import.meta.url));
  const child = spawn(process.execPath, [entry], {
    env: {
      PATH: process.env.PATH ?? "",
      BODIES_FILE: input.bodiesFile,
      TARGETS: JSON.stringify(input.targets.map(({ url, secret }) => ({ url, secret }))),
      CONCURRENCY: String(CONCURRENCY),
      CA_FILE: input.caFile,
      ...(input.logDatabaseUrl === undefined ? {} : { LOG_DATABASE_URL: input.logDatabaseUrl }),
    },
    stdio: ["ignore", "pipe", "inherit"],
  });
  let out = "";
  child.stdout.on("data", (chunk: Buffer) => {
    out += chunk.toString();
  });
  return new Promise((resolve, reject) => {
    child.once("exit", (code) => {
      if (code !== 0) return reject(new Error(`the baseline sender exited ${code}: ${out}`));
      resolve(JSON.parse(out.trim().split("\n").at(-1) as string));
    });
  });
}
