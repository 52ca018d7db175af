// `npm run bench markers`: POST /v1/api/timeline-events through the gateway (API key, rate limit,
// scope, body parsing, RPC, the markers service's checks and its transaction with the 500 cap) at
// 1, 16 and 64 connections, against a baseline measured in the same run: one Fastify process doing
// the same validation and a single INSERT with `pg` (baseline-markers-server.ts). Each request pins
// a full marker (every optional field set) to the next of SEEDED_REPLAYS replays, round-robin, so
// concurrent creates rarely meet on one replay and no replay reaches the cap. Where the time goes:
// CPU µs per request of every process. Last line: {"bench":"markers","ratio":{...}}.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { RecordingService } from "../../gen/replay/replays/v1/recording_pb.js";
import { provisionTenant, send } from "../http.js";
import { pollUntil } from "../poll.js";
import { grpcCheckIn } from "../recorder.js";
import { type System, startDistributedSystem } from "../system.js";
import { type ChildServer, startChildServer, systemCpuGroups } from "./child-server.js";
import { requirePostgresAndNats, systemNodeArgs } from "./env.js";
import type { LoadResult, LoadTarget } from "./load.js";
import { baselineComparison, type Cell, cpuRow, formatTable, type Run, round, writeResults } from "./report.js";
import { ROUNDS, runAlternating } from "./rounds.js";

export const description =
  "POST /v1/api/timeline-events through the gateway vs one Fastify process validating and INSERTing with pg (1/16/64 connections)";

const CONNECTIONS = [1, 16, 64] as const;
const RATIO_TARGET = 0.6;
/** Enough replays that every measured run together stays far below 500 markers on any one of them. */
const SEEDED_REPLAYS = 2_000;
/** Servers recording the seeded replays side by side (a divisor of SEEDED_REPLAYS). */
const SEEDING_SERVERS = 8;
const UNTHROTTLED_RPS = 1_000_000;
const CPU_LABELS = ["gateway", "markers", "postgres", "baseline", "other services", "generator"] as const;

const progress = (line: string) => process.stderr.write(`[bench markers] ${line}\n`);

export async function run(_args: string[]): Promise<void> {
  const env = await requirePostgresAndNats();
  const startedAt = new Date();
  progress("starting the distributed system (5 processes, fresh database)");
  const sys = await startDistributedSystem({
    gateways: 1,
    nodeArgs: systemNodeArgs(),
  });
  const work = await mkdtemp(join(tmpdir(), "bench-markers-"));
  let baseline: ChildServer | undefined;
  const runs: Run[] = [];
  let seedMs = 0;
  try {
    const databaseUrl = sys.databaseUrl as string;
    const tenant = await provisionTenant(sys, { rateLimitRps: UNTHROTTLED_RPS, rateLimitBurst: UNTHROTTLED_RPS });
    const seedStarted = performance.now();
    const replayIds = await seedReplays(sys, tenant.bearer());
    seedMs = performance.now() - seedStarted;
    progress(`recorded ${replayIds.length} replays and saw them reach the markers service in ${Math.round(seedMs)} ms`);
    const bodiesFile = join(work, "bodies.jsonl");
    await writeFile(
      bodiesFile,
      `${replayIds.map((replayId, i) => JSON.stringify(markerBody(replayId, i))).join("\n")}\n`,
    );

    baseline = await startChildServer("baseline-markers-server", { DATABASE_URL: databaseUrl });
    await checkSameAnswer(sys.baseUrl, tenant.bearer(), baseline.url, replayIds[0] as string);
    const cpuGroups = systemCpuGroups(databaseUrl, "markers", baseline.pid);
    const targets: Record<string, LoadTarget> = {
      baseline: { kind: "http", url: `${baseline.url}/v1/api/timeline-events`, postBodiesFile: bodiesFile },
      gateway: {
        kind: "http",
        url: `${sys.baseUrl}/v1/api/timeline-events`,
        headers: tenant.bearer(),
        postBodiesFile: bodiesFile,
      },
    };
    // Baseline and gateway alternate in rounds (rounds.ts), the side that goes first swapping
    // between connection counts: drift of a shared machine hits both alike.
    for (const [i, connections] of CONNECTIONS.entries()) {
      const order = i % 2 === 0 ? (["baseline", "gateway"] as const) : (["gateway", "baseline"] as const);
      const merged = await runAlternating(order, targets, {
        connections,
        durationS: env.durationS,
        warmupS: env.warmupS,
        cpuGroups,
      });
      for (const target of order) {
        const result = merged[target] as LoadResult;
        progress(
          `${target.padEnd(8)} ${String(connections).padStart(2)} conns: ${Math.round(result.rps)} req/s, p50 ${round(result.latency.p50Ms)} ms, non-2xx ${result.non2xx}`,
        );
        runs.push({ target, connections, result });
      }
    }
  } finally {
    await baseline?.stop();
    await sys.stop();
    await rm(work, { recursive: true, force: true });
  }

  const report = buildReport(runs);
  const path = await writeResults(
    "markers",
    {
      benchmark: "markers",
      startedAt: startedAt.toISOString(),
      node: process.version,
      cpus: cpus().length,
      durationS: env.durationS,
      warmupS: env.warmupS,
      seededReplays: SEEDED_REPLAYS,
      seedMs,
      ratios: report.ratios,
      ratioTarget: RATIO_TARGET,
      runs,
    },
    startedAt,
  );
  process.stdout.write(
    [
      `markers benchmark: POST /v1/api/timeline-events with every field set, round-robin over ${SEEDED_REPLAYS} replays, ` +
        `${env.durationS} s per target and connection count, in ${ROUNDS} alternating rounds (the first after a ${env.warmupS} s warm-up)`,
      `machine: ${cpus().length} cores, shared; node ${process.version}. The load generator (autocannon, its own process) ` +
        "competes with the servers for those cores, the same way for both targets.",
      "",
      report.text,
      "",
      `results: ${path}`,
      JSON.stringify({
        bench: "markers",
        ratio: Object.fromEntries(CONNECTIONS.map((c) => [String(c), round(report.ratios[c], 2) ?? null])),
        target: { connections: 64, ratio: RATIO_TARGET, met: (report.ratios[64] ?? 0) >= RATIO_TARGET },
      }),
      "",
    ].join("\n"),
  );
}

/** A marker with every field, so both sides run every rule. */
function markerBody(replayId: string, i: number) {
  return {
    replayId,
    tick: 1000 + i,
    label: `  Kill streak #${i}  `,
    category: "combat",
    colour: "#FFAA00",
    icon: "swords",
    actor: "player-7",
  };
}

/**
 * SEEDED_REPLAYS finished replays, recorded through the internal API as recorders do, on
 * SEEDING_SERVERS connected servers at once (a server records one replay at a time, and each
 * start and finish is a commit: one server alone took 40-48 s); resolves once the markers service
 * has seen the last of them (its projection is fed by events).
 */
async function seedReplays(sys: System, bearer: Record<string, string>): Promise<string[]> {
  const rpc = createClient(RecordingService, createGrpcTransport({ baseUrl: sys.internalUrl }));
  const recordOn = async (index: number, count: number): Promise<string[]> => {
    const created = await send(sys.baseUrl, "POST", "/v1/api/servers", {
      headers: bearer,
      body: { name: `bench-${index}` },
    });
    if (created.status !== 201) throw new Error(`POST /v1/api/servers: ${created.status} ${created.text}`);
    const serverId = created.body.serverId as string;
    await grpcCheckIn(sys.internalUrl, serverId, { pluginVersion: "1.0.0" });
    // The replays service learns of the connection from an event: the first start may wait for it.
    const first = await pollUntil(
      () => rpc.startRecording({ serverId, integration: "bench" }).catch(() => undefined),
      (r) => r !== undefined,
      10_000,
    );
    const ids: string[] = [];
    let replayId = (first as { replayId: string }).replayId;
    for (;;) {
      await rpc.finishRecording({ replayId, sizeBytes: 1n });
      ids.push(replayId);
      if (ids.length === count) return ids;
      replayId = (await rpc.startRecording({ serverId, integration: "bench" })).replayId;
    }
  };
  const perServer = Math.ceil(SEEDED_REPLAYS / SEEDING_SERVERS);
  const batches = await Promise.all(
    Array.from({ length: SEEDING_SERVERS }, (_, i) => recordOn(i, Math.min(perServer, SEEDED_REPLAYS - i * perServer))),
  );
  const ids = batches.flat();
  await Promise.all(
    batches.map((batch) =>
      pollUntil(
        () =>
          send(sys.baseUrl, "GET", `/v1/api/replays/${batch[batch.length - 1]}/timeline-events`, { headers: bearer }),
        (res) => res.status === 200,
        30_000,
      ),
    ),
  );
  return ids;
}

/** Both sides must answer alike: 201 and a marker of the same shape and values (ids and times aside). */
async function checkSameAnswer(
  gatewayUrl: string,
  bearer: Record<string, string>,
  baselineUrl: string,
  replayId: string,
): Promise<void> {
  const body = markerBody(replayId, -1);
  const [viaGateway, viaBaseline] = await Promise.all([
    send(gatewayUrl, "POST", "/v1/api/timeline-events", { headers: bearer, body }),
    send(baselineUrl, "POST", "/v1/api/timeline-events", { body }),
  ]);
  const comparable = (marker: Record<string, unknown>) => ({ ...marker, id: "-", createdAt: "-" });
  if (
    viaGateway.status !== 201 ||
    viaBaseline.status !== 201 ||
    JSON.stringify(comparable(viaGateway.body)) !== JSON.stringify(comparable(viaBaseline.body))
  ) {
    throw new Error(
      `the gateway and the baseline answer differently:\ngateway:  ${viaGateway.status} ${viaGateway.text}\nbaseline: ${viaBaseline.status} ${viaBaseline.text}`,
    );
  }
}

function buildReport(runs: Run[]) {
  const { ratios, table } = baselineComparison(runs, CONNECTIONS);
  const cpuRows: Cell[][] = [];
  for (const { target, connections, result } of runs) {
    if (result.requests > 0) cpuRows.push(cpuRow([connections, target], result, CPU_LABELS, cpus().length));
  }
  const ratio64 = ratios[64];
  const text = [
    table,
    "",
    `ratio at 64 connections: ${round(ratio64, 2) ?? "-"} (target >= ${RATIO_TARGET}: ${ratio64 === undefined ? "not measured" : ratio64 >= RATIO_TARGET ? "met" : "NOT met"})`,
    "",
    "where the time goes: CPU µs per request by process (from /proc around each measured run)",
    formatTable(
      ["conns", "target", "req/s", ...CPU_LABELS, "attributed", "rest of machine", "machine busy %"],
      cpuRows,
    ),
  ].join("\n");
  return { text, ratios };
}
