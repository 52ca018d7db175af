// `npm run bench gateway`: authenticated GET /v1/api/servers through the gateway (key lookup,
// scope, rate limit, RPC, SQL) against a baseline measured in the same run (one Fastify process
// answering the same query with `pg`), plus where the extra time goes (the embedded start has its
// own benchmark, `npm run bench embedded`).
import { cpus } from "node:os";
import { isDeepStrictEqual } from "node:util";
import pg from "pg";
import { provisionTenant } from "../http.js";
import { type System, startDistributedSystem } from "../system.js";
import { type ChildServer, startChildServer, systemCpuGroups } from "./child-server.js";
import { requirePostgresAndNats, systemNodeArgs } from "./env.js";
import { type LoadResult, type LoadTarget, runLoad } from "./load.js";
import { listeningPorts } from "./proc.js";
import { baselineComparison, type Cell, cpuRow, formatTable, type Run, round, writeResults } from "./report.js";
import { ROUNDS, runAlternating } from "./rounds.js";

export const description =
  "GET /v1/api/servers through the gateway vs one Fastify process on pg (1/16/64 connections), where the time goes";

const CONNECTIONS = [1, 16, 64] as const;
const BREAKDOWN_CONNECTIONS = [1, 64] as const;
const SEEDED_SERVERS = 20;
const RATIO_TARGET = 0.6;
/** Far above what 2 cores can serve, so the bucket never refuses a benchmark request. */
const UNTHROTTLED_RPS = 1_000_000;

const progress = (line: string) => process.stderr.write(`[bench gateway] ${line}\n`);

export async function run(_args: string[]): Promise<void> {
  const env = await requirePostgresAndNats();
  const startedAt = new Date();

  progress("starting the distributed system (5 processes, fresh database)");
  const distributedStartMs = performance.now();
  const sys = await startDistributedSystem({
    gateways: 1,
    nodeArgs: systemNodeArgs(),
  });
  const distributedReadyMs = performance.now() - distributedStartMs;
  let baseline: ChildServer | undefined;
  let floorBack: ChildServer | undefined;
  let floorFront: ChildServer | undefined;
  const runs: Run[] = [];
  let servers: ServersFixture;
  try {
    const databaseUrl = sys.databaseUrl;
    if (!databaseUrl) throw new Error("startDistributedSystem() returned no databaseUrl");
    servers = await prepareServers(sys, databaseUrl);
    baseline = await startChildServer("baseline-server", { DATABASE_URL: databaseUrl, TENANT_ID: servers.tenantId });
    await checkSameAnswer(sys.baseUrl, servers, baseline.url);
    const cpuGroups = systemCpuGroups(databaseUrl, "servers", baseline.pid);
    const servicePid = cpuGroups.find((g) => g.label === "servers")?.pids?.[0];
    const serversRpcUrl = servicePid === undefined ? undefined : rpcUrlOf(servicePid);

    const record = (target: string, connections: number, result: LoadResult) => {
      progress(
        `${target.padEnd(10)} ${String(connections).padStart(2)} conns: ${Math.round(result.rps)} req/s, p50 ${round(result.latency.p50Ms)} ms`,
      );
      runs.push({ target, connections, result });
    };
    const load = async (target: string, loadTarget: LoadTarget, connections: number) => {
      const result = await runLoad({
        target: loadTarget,
        connections,
        durationS: env.durationS,
        warmupS: env.warmupS,
        cpuGroups,
      });
      record(target, connections, result);
    };
    const targets: Record<string, LoadTarget> = {
      baseline: { kind: "http", url: `${baseline.url}/v1/api/servers` },
      gateway: {
        kind: "http",
        url: `${sys.baseUrl}/v1/api/servers`,
        headers: { authorization: `Bearer ${servers.key}` },
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
      for (const target of order) record(target, connections, merged[target] as LoadResult);
    }

    // The breakdown: the same load on parts of the gateway path, outside the measured comparison.
    const parts: [string, LoadTarget, readonly number[]][] = [
      ["healthz", { kind: "http", url: `${sys.baseUrl}/healthz` }, BREAKDOWN_CONNECTIONS],
      [
        "auth-403",
        {
          kind: "http",
          url: `${sys.baseUrl}/v1/api/servers`,
          headers: { authorization: `Bearer ${servers.unscopedKey}` },
        },
        BREAKDOWN_CONNECTIONS,
      ],
    ];
    if (serversRpcUrl) {
      const rpc = { kind: "connect-list-servers", baseUrl: serversRpcUrl, tenantId: servers.tenantId } as const;
      parts.push(
        ["rpc-direct", { ...rpc, transport: "lean" }, BREAKDOWN_CONNECTIONS],
        ["rpc-h2c", { ...rpc, transport: "connect-h2c" }, [64]],
      );
    } else {
      progress("could not find the servers service's port; skipping the direct RPC part of the breakdown");
    }
    for (const connections of BREAKDOWN_CONNECTIONS) {
      for (const [target, loadTarget, counts] of parts)
        if (counts.includes(connections)) await load(target, loadTarget, connections);
    }

    // The floor: the same answer from the least two processes can do (floor-front.ts, floor-back.ts),
    // alternated with the baseline at 64, so the ratio says what two processes and a hop cost at least.
    floorBack = await startChildServer("floor-back", { DATABASE_URL: databaseUrl });
    floorFront = await startChildServer("floor-front", { BACK_URL: floorBack.url, TENANT_ID: servers.tenantId });
    await expectSameBody("the floor", `${floorFront.url}/v1/api/servers`, undefined, baseline.url);
    // The floor's processes read in the gateway and servers columns.
    const floorPids: Record<string, number[]> = { gateway: [floorFront.pid], servers: [floorBack.pid] };
    const floorGroups = cpuGroups.map((g) => ({
      label: g.label,
      pids: floorPids[g.label] ?? g.pids,
      cmdlineIncludes: g.cmdlineIncludes,
    }));
    const floorRounds = await runAlternating(
      ["floor-baseline", "floor"],
      { "floor-baseline": targets.baseline, floor: { kind: "http", url: `${floorFront.url}/v1/api/servers` } },
      { connections: 64, durationS: env.durationS, warmupS: env.warmupS, cpuGroups: floorGroups },
    );
    record("floor-baseline", 64, floorRounds["floor-baseline"] as LoadResult);
    record("floor", 64, floorRounds.floor as LoadResult);
  } finally {
    await floorFront?.stop();
    await floorBack?.stop();
    await baseline?.stop();
    await sys.stop();
  }

  const report = buildReport(runs);
  const results = {
    benchmark: "gateway",
    startedAt: startedAt.toISOString(),
    node: process.version,
    cpus: cpus().length,
    durationS: env.durationS,
    warmupS: env.warmupS,
    seededServers: SEEDED_SERVERS,
    responseBytes: servers.bodyBytes,
    distributedReadyMs,
    ratios: report.ratios,
    ratioAt64: report.ratios[64],
    ratioTarget: RATIO_TARGET,
    floorRatioAt64: report.floorRatio,
    runs,
  };
  const path = await writeResults("gateway", results, startedAt);
  process.stdout.write(
    [
      `gateway benchmark: GET /v1/api/servers listing ${SEEDED_SERVERS} servers (${servers.bodyBytes} bytes of JSON), ` +
        `${env.durationS} s per target and connection count after a ${env.warmupS} s warm-up, baseline and gateway in ${ROUNDS} alternating rounds`,
      `machine: ${cpus().length} cores, shared; node ${process.version}. The load generator (autocannon, its own process) ` +
        "competes with the servers for those cores, the same way for both targets.",
      "",
      report.text,
      "",
      `results: ${path}`,
      // The last line, for scripts: one JSON object.
      JSON.stringify({
        bench: "gateway",
        ratio: Object.fromEntries(CONNECTIONS.map((c) => [String(c), round(report.ratios[c], 2) ?? null])),
        target: { connections: 64, ratio: RATIO_TARGET, met: (report.ratios[64] ?? 0) >= RATIO_TARGET },
        floor: { "64": round(report.floorRatio, 2) ?? null },
      }),
      "",
    ].join("\n"),
  );
}

// ---------------------------------------------------------------------------------------------
// Fixture: tenant, keys, seeded servers.

type ServersFixture = { tenantId: string; key: string; unscopedKey: string; bodyBytes: number };

async function prepareServers(sys: System, databaseUrl: string): Promise<ServersFixture> {
  const tenant = await provisionTenant(sys, { rateLimitRps: UNTHROTTLED_RPS, rateLimitBurst: UNTHROTTLED_RPS });
  // A key without servers:read: the same request then ends at the scope check (403), before the RPC.
  const { key: unscopedKey } = await tenant.mintKey(["replays:read"]);
  // Rows go straight into the fresh database (no setup/check-in flow needed): online, offline and
  // never-seen servers, as a real tenant has. Only columns every version of the table has.
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await client.query(
      `INSERT INTO servers.server (server_id, tenant_id, name, state, plugin_version, last_seen_at)
       SELECT gen_random_uuid(), $1, format('bench-server-%s', lpad(i::text, 2, '0')), 'connected', '2.4.1',
              CASE WHEN i % 4 = 0 THEN NULL WHEN i % 4 = 1 THEN now() - interval '3 days' ELSE now() END
         FROM generate_series(1, $2::int) AS i`,
      [tenant.tenantId, SEEDED_SERVERS],
    );
  } finally {
    await client.end();
  }
  return { tenantId: tenant.tenantId, key: tenant.key, unscopedKey, bodyBytes: 0 };
}

/** Both sides must do the same work: the same 200 body (the gateway's 403 for the unscoped key). */
async function checkSameAnswer(gatewayUrl: string, fixture: ServersFixture, baselineUrl: string): Promise<void> {
  const [text, unscoped] = await Promise.all([
    expectSameBody("the gateway", `${gatewayUrl}/v1/api/servers`, fixture.key, baselineUrl),
    get(`${gatewayUrl}/v1/api/servers`, fixture.unscopedKey),
  ]);
  if (unscoped.status !== 403)
    throw new Error(`expected 403 for the key without servers:read, got ${unscoped.status} ${unscoped.text}`);
  fixture.bodyBytes = Buffer.byteLength(text);
}

/** `url` answers 200 with the baseline's body, listing every seeded server; returns that body. */
async function expectSameBody(
  name: string,
  url: string,
  key: string | undefined,
  baselineUrl: string,
): Promise<string> {
  const [viaTarget, viaBaseline] = await Promise.all([get(url, key), get(`${baselineUrl}/v1/api/servers`)]);
  if (viaTarget.status !== 200 || viaBaseline.status !== 200) {
    throw new Error(
      `expected 200 from both: ${name} ${viaTarget.status} ${viaTarget.text}, baseline ${viaBaseline.status} ${viaBaseline.text}`,
    );
  }
  const body = JSON.parse(viaTarget.text) as { servers: unknown[] };
  if (body.servers.length !== SEEDED_SERVERS || !isDeepStrictEqual(body, JSON.parse(viaBaseline.text))) {
    throw new Error(
      `${name} and the baseline answer differently:\n${name}: ${viaTarget.text}\nbaseline: ${viaBaseline.text}`,
    );
  }
  return viaTarget.text;
}

async function get(url: string, key?: string): Promise<{ status: number; text: string }> {
  const res = await fetch(url, {
    headers: key ? { authorization: `Bearer ${key}` } : {},
    signal: AbortSignal.timeout(10_000),
  });
  return { status: res.status, text: await res.text() };
}

// ---------------------------------------------------------------------------------------------
// Processes.

/** The servers service's RPC address: the harness does not expose service URLs, so its one listening port. */
function rpcUrlOf(pid: number): string | undefined {
  const ports = listeningPorts(pid);
  return ports.length === 1 ? `http://127.0.0.1:${ports[0]}` : undefined;
}

// ---------------------------------------------------------------------------------------------
// Report.

const CPU_LABELS = ["gateway", "servers", "postgres", "baseline", "other services", "generator"] as const;

function buildReport(runs: Run[]) {
  const find = (target: string, connections: number) =>
    runs.find((r) => r.target === target && r.connections === connections)?.result;
  const { ratios, table } = baselineComparison(runs, CONNECTIONS);
  const lines: string[] = [table];
  const bytes = (target: string) => find(target, 64)?.bytesPerResponse;
  lines.push(
    "",
    `bytes per response with headers: baseline ${Math.round(bytes("baseline") ?? 0)}, gateway ${Math.round(bytes("gateway") ?? 0)} ` +
      "(the same JSON body; the gateway adds x-request-id and the RateLimit headers)",
  );
  const ratio64 = ratios[64];
  const floor = find("floor", 64);
  const floorBase = find("floor-baseline", 64);
  const floorRatio = floor && floorBase && floorBase.rps > 0 ? floor.rps / floorBase.rps : undefined;
  lines.push(
    "",
    `ratio at 64 connections: ${round(ratio64, 2) ?? "-"} (target >= ${RATIO_TARGET}: ${ratio64 === undefined ? "not measured" : ratio64 >= RATIO_TARGET ? "met" : "NOT met"})`,
    `the floor at 64 connections (the least two processes do, floor-front.ts + floor-back.ts, in ${ROUNDS} rounds with the baseline): ` +
      `${floor ? Math.round(floor.rps) : "-"} vs ${floorBase ? Math.round(floorBase.rps) : "-"} req/s, ratio ${round(floorRatio, 2) ?? "-"}`,
  );

  // Where the time goes: CPU per request of every process, per run, at each breakdown connection count.
  const cpuHeaders = ["conns", "target", "req/s", ...CPU_LABELS, "attributed", "rest of machine", "machine busy %"];
  const cpuRows: Cell[][] = [];
  for (const connections of BREAKDOWN_CONNECTIONS) {
    for (const target of [
      "baseline",
      "gateway",
      "healthz",
      "auth-403",
      "rpc-direct",
      "rpc-h2c",
      "floor-baseline",
      "floor",
    ]) {
      const r = find(target, connections);
      if (!r || r.requests === 0) continue;
      cpuRows.push(cpuRow([connections, target], r, CPU_LABELS, cpus().length));
    }
  }
  lines.push(
    "",
    "where the time goes: CPU µs per request by process (from /proc around each measured run)",
    "  healthz    = GET /healthz on the gateway: HTTP/1.1 + Fastify alone",
    "  auth-403   = the servers route with a key lacking servers:read: + key lookup (cached), rate limit, scope, problem JSON; no RPC",
    "  rpc-direct = ListServers straight to the servers service with the gateway's own hop (lib/rpc/lean-transport.ts: Connect",
    "               protocol, binary, HTTP/1.1 keep-alive): RPC + SQL, no gateway; its generator is a client loop, not autocannon,",
    "               so its generator column is not comparable",
    "  rpc-h2c    = rpc-direct with a stock connect-node client over one HTTP/2 session (what the hop cost before the lean path)",
    "  floor      = the least two processes do for the same answer: Fastify passing on the bytes of one undici keep-alive request",
    "               to a node:http process that runs the same query and JSON (floor-front.ts, floor-back.ts; no auth, RPC protocol",
    "               or protobuf); its front and back read in the gateway and servers columns; alternated with floor-baseline",
    formatTable(cpuHeaders, cpuRows),
  );
  lines.push("", ...explain(find));

  const latencyRows: Cell[][] = ["healthz", "auth-403", "baseline", "rpc-direct", "gateway"].flatMap((target) => {
    const r = find(target, 1);
    return r ? [[target, round(r.latency.meanMs), round(r.latency.p50Ms), round(r.latency.p99Ms)]] : [];
  });
  lines.push(
    "",
    "one connection (latency, nothing queued):",
    formatTable(["target", "mean ms", "p50 ms", "p99 ms"], latencyRows),
  );

  return { text: lines.join("\n"), ratios, floorRatio };
}

/** The 64-connection story in words: what the gateway path costs beyond the baseline, by process. */
function explain(find: (target: string, connections: number) => LoadResult | undefined): string[] {
  const base = find("baseline", 64);
  const gw = find("gateway", 64);
  if (!base || !gw || base.requests === 0 || gw.requests === 0) return [];
  const us = (r: LoadResult, label: string) => ((r.cpuMs[label] ?? 0) * 1000) / r.requests;
  const servedBy = (r: LoadResult) =>
    us(r, "gateway") + us(r, "servers") + us(r, "postgres") + us(r, "baseline") + us(r, "other services");
  const baseServe = servedBy(base);
  const gwServe = servedBy(gw);
  const health = find("healthz", 64);
  const auth = find("auth-403", 64);
  const rpc = find("rpc-direct", 64);
  const n = (v: number) => String(Math.round(v));
  const lines = [
    "at 64 connections:",
    `  serving one request costs ${n(gwServe)} µs of CPU through the gateway against ${n(baseServe)} µs for the baseline ` +
      `(x${(gwServe / baseServe).toFixed(2)}; generator excluded); with the cores saturated that alone predicts a ratio near ${(baseServe / gwServe).toFixed(2)}.`,
    `  of the extra ${n(gwServe - baseServe)} µs: the servers process ${n(us(gw, "servers"))} µs (its HTTP/1.1 server, Connect, protobuf, its pg pool), ` +
      `the gateway process ${n(us(gw, "gateway") - us(base, "baseline"))} µs more than the baseline's Fastify process ` +
      `(${n(us(gw, "gateway"))} vs ${n(us(base, "baseline"))}), Postgres ${n(us(gw, "postgres") - us(base, "postgres"))} µs.`,
  ];
  if (health && auth) {
    lines.push(
      `  inside the gateway process: HTTP + Fastify alone ${n(us(health, "gateway"))} µs (healthz); up to the scope check ${n(us(auth, "gateway"))} µs (auth-403); ` +
        `the rest of its ${n(us(gw, "gateway"))} µs (~${n(us(gw, "gateway") - us(auth, "gateway"))} µs) is the RPC client call, protobuf decoding and the JSON reply.`,
    );
  }
  if (rpc) {
    lines.push(
      `  the servers service answers ListServers directly at ${Math.round(rpc.rps)} req/s (${n(us(rpc, "servers"))} µs servers + ${n(us(rpc, "postgres"))} µs Postgres per call), ` +
        `so neither hop alone is the limit: the two Node processes share 2 cores with Postgres and the generator.`,
    );
  }
  const h2c = find("rpc-h2c", 64);
  if (rpc && h2c) {
    lines.push(
      `  a stock connect-node client over HTTP/2 to the same service: ${Math.round(h2c.rps)} req/s, the servers process ${n(us(h2c, "servers"))} µs ` +
        `and its client ${n(us(h2c, "generator"))} µs per call, against ${n(us(rpc, "servers"))} µs and ${n(us(rpc, "generator"))} µs on the lean hop.`,
    );
  }
  const floor = find("floor", 64);
  if (floor) {
    lines.push(
      `  the floor's two processes spend ${n(us(floor, "gateway"))} µs (front) and ${n(us(floor, "servers"))} µs (back) per request, ` +
        `Postgres ${n(us(floor, "postgres"))} µs: the gateway process costs x${(us(gw, "gateway") / us(floor, "gateway")).toFixed(2)} its front, ` +
        `the servers process x${(us(gw, "servers") / us(floor, "servers")).toFixed(2)} its back.`,
    );
  }
  lines.push(
    `  the generator spends ${n(us(gw, "generator"))} µs (gateway) and ${n(us(base, "generator"))} µs (baseline) per request on the same cores.`,
  );
  return lines;
}
