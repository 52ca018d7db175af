// `npm run bench servers`: recorder check-ins of 10 000 connected servers over internal gRPC (a stock
// @grpc/grpc-js client straight to the servers service) against a baseline measured in the same run:
// the check-in's bare UPDATE of one row through `pg` at the same concurrency. Beside them, the same
// check-ins through the gateway's internal forwarder, and the service's check-in handler without the
// RPC (where the time goes). Every measured run is checked against the rows it should have written.
// The last line on stdout is one JSON object for scripts (summaryLine).
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { ServerStatus } from "../../gen/replay/servers/v1/servers_pb.js";
import { provisionTenant } from "../http.js";
import { grpcCheckIn } from "../recorder.js";
import { type System, startDistributedSystem } from "../system.js";
import { requirePostgresAndNats, systemNodeArgs } from "./env.js";
import { type CheckInKeys, type LoadResult, type LoadTarget, runLoad } from "./load.js";
import { type CpuGroup, findChildPids, listProcesses } from "./proc.js";
import { type Cell, cpuRow, formatTable, round, writeResults } from "./report.js";

export const description =
  "gRPC check-ins of 10 000 connected servers vs a bare pg UPDATE (1/16/64 in flight), the gateway forwarder, where the time goes";

const CONCURRENCY = [1, 16, 64] as const;
const SERVER_COUNT = 10_000;
const INSERT_BATCH = 2_000;
const PG_POOL_MAX = 64;
/**
 * Connections left free on the Postgres cluster when sizing the baseline's pool: the machine's
 * Postgres is shared (max_connections 100 here, other systems' pools in use), and a benchmark must
 * not refuse someone else's connection.
 */
const PG_HEADROOM = 10;

/**
 * The baseline (B), the measured path (A), the optional forwarder row, and the service's check-in
 * handler called without RPC (a breakdown row, at BREAKDOWN_CONCURRENCY only).
 */
const TARGETS = ["pg-update", "grpc-direct", "grpc-forwarder", "service-no-rpc"] as const;
const BREAKDOWN_CONCURRENCY: readonly number[] = [1, 64];
/**
 * Generator processes of the gRPC and baseline loads, the calls in flight shared between them, as
 * many recorders' clients are, each its own channel (or share of the pool). One stock grpc-js
 * client process tops out well below what the service serves, so with one, its event loop, not the
 * service, set the pace; four processes cost more CPU a call each (fewer calls coalesced per tick).
 * The figures: docs/performance.md.
 * Both sides use the same number.
 */
const GENERATOR_PROCESSES = 2;
/** Batching lets the service beat the bare UPDATE loop at 64 in flight. */
const TARGET_CONCURRENCY = 64;
const RATIO_TARGET = 1.0;
type TargetName = (typeof TARGETS)[number];

const progress = (line: string) => process.stderr.write(`[bench servers] ${line}\n`);

/** What the database holds after a measured run, against what the run says it did. */
type Verification = {
  /** Rows carrying the run's plugin version: written by its measured part and by nothing since. */
  tagged: number;
  /** Of those, rows whose last_seen_at is not older than the run's start. */
  fresh: number;
  /**
   * Distinct ids the run checked in successfully; round-robin from the first id, min(check-ins,
   * servers) for each generator process over its share of the ids.
   */
  expected: number;
  ok: boolean;
};

type Run = {
  target: TargetName;
  concurrency: number;
  pluginVersion: string;
  result: LoadResult;
  verification: Verification;
  /**
   * Postgres connections serving the load: the baseline's pool (sized before its run), or those the
   * servers service holds right after a gRPC run (its own pool).
   */
  pgConnections: number | undefined;
};

type PgSettings = Record<string, string>;

export async function run(_args: string[]): Promise<void> {
  const env = await requirePostgresAndNats();
  const startedAt = new Date();

  progress("starting the distributed system (5 processes, fresh database)");
  const sys = await startDistributedSystem({ gateways: 1, nodeArgs: systemNodeArgs() });
  const tmp = await mkdtemp(join(tmpdir(), "bench-servers-"));
  const runs: Run[] = [];
  let fixture: Fixture | undefined;
  let pgSettings: PgSettings = {};
  let forwarder = false;
  let db: pg.Client | undefined;
  try {
    const databaseUrl = sys.databaseUrl;
    const serversUrl = sys.serviceUrls?.servers;
    if (!databaseUrl || !serversUrl) throw new Error("startDistributedSystem() returned no databaseUrl or servers URL");

    progress(`provisioning a tenant and inserting ${SERVER_COUNT} connected servers`);
    fixture = await seedServers(sys, databaseUrl);
    const idsFile = join(tmp, "server-ids.txt");
    await writeFile(idsFile, `${fixture.ids.join("\n")}\n`);

    db = new pg.Client({ connectionString: databaseUrl, application_name: "bench-verify" });
    await db.connect();
    pgSettings = await readPgSettings(db);

    // One check-in answers ONLINE and writes its row, before anything is measured.
    await probe(db, serversUrl, fixture.ids[0] as string, "bench-probe-direct");
    try {
      await probe(db, sys.internalUrl, fixture.ids[1] as string, "bench-probe-forwarder");
      forwarder = true;
    } catch (err) {
      progress(`the gateway's internal port does not forward check-ins (${(err as Error).message}); no forwarder row`);
    }

    const cpuGroups = processGroups(databaseUrl);
    const targetFor = (target: TargetName, keys: CheckInKeys, poolMax: number): LoadTarget => {
      switch (target) {
        case "pg-update":
          return { kind: "pg-checkin", databaseUrl, poolMax, keys };
        case "grpc-direct":
          return { kind: "grpc-checkin", address: new URL(serversUrl).host, keys };
        case "grpc-forwarder":
          return { kind: "grpc-checkin", address: new URL(sys.internalUrl).host, keys };
        case "service-no-rpc":
          return { kind: "service-checkin", databaseUrl, keys };
      }
    };

    // The baseline and the measured path alternate (B A F, then F A B, ...), so drift of a shared
    // machine hits both sides alike; the breakdown row comes after them, outside the comparison.
    for (const [i, concurrency] of CONCURRENCY.entries()) {
      const order: TargetName[] = i % 2 === 0 ? ["pg-update", "grpc-direct"] : ["grpc-direct", "pg-update"];
      if (forwarder) order.splice(i % 2 === 0 ? 2 : 0, 0, "grpc-forwarder");
      if (BREAKDOWN_CONCURRENCY.includes(concurrency)) order.push("service-no-rpc");
      for (const target of order) {
        const pluginVersion = `bench-${target}-${concurrency}`;
        const poolMax = target === "pg-update" ? await baselinePoolSize(db, concurrency) : 0;
        if (poolMax > 0 && poolMax < Math.min(concurrency, PG_POOL_MAX))
          progress(`only ${poolMax} free Postgres connections for the baseline's pool of ${concurrency}`);
        const notBefore = new Date();
        const result = await runLoad({
          target: targetFor(target, { idsFile, pluginVersion }, poolMax),
          connections: concurrency,
          processes: target === "service-no-rpc" ? 1 : GENERATOR_PROCESSES,
          durationS: env.durationS,
          warmupS: env.warmupS,
          cpuGroups,
        });
        const verification = await verify(db, result, pluginVersion, notBefore);
        const pgConnections =
          target === "pg-update"
            ? poolMax
            : target === "service-no-rpc"
              ? undefined
              : await connectionsOf(db, "replay-servers");
        runs.push({ target, concurrency, pluginVersion, result, verification, pgConnections });
        progress(
          `${target.padEnd(14)} ${String(concurrency).padStart(2)} in flight: ${Math.round(result.rps)} check-ins/s, ` +
            `p50 ${round(result.latency.p50Ms)} ms, p99 ${round(result.latency.p99Ms)} ms, errors ${result.errors}, ` +
            `rows ${verification.tagged}/${verification.expected} ${verification.ok ? "ok" : "MISMATCH"}`,
        );
      }
    }
  } finally {
    await db?.end().catch(() => {});
    await sys.stop();
    await rm(tmp, { recursive: true, force: true });
  }

  const report = buildReport(runs, pgSettings);
  const failures = runs.filter((r) => !r.verification.ok || r.result.errors > 0 || r.result.requests === 0);
  const results = {
    benchmark: "servers",
    startedAt: startedAt.toISOString(),
    node: process.version,
    cpus: cpus().length,
    durationS: env.durationS,
    warmupS: env.warmupS,
    servers: SERVER_COUNT,
    seedMs: fixture?.seedMs,
    pgPoolMax: PG_POOL_MAX,
    pgSettings,
    forwarder,
    ratios: report.ratios,
    verified: failures.length === 0,
    runs,
  };
  const path = await writeResults("servers", results, startedAt);
  process.stdout.write(
    [
      `servers benchmark: RecorderService.CheckIn of ${SERVER_COUNT} connected servers (ids round-robin, a plugin version each), ` +
        `${env.durationS} s per run after a ${env.warmupS} s warm-up`,
      `machine: ${cpus().length} cores, shared; node ${process.version}; Postgres ${pgSettings.server_version ?? "?"} ` +
        `(synchronous_commit=${pgSettings.synchronous_commit ?? "?"}, wal_sync_method=${pgSettings.wal_sync_method ?? "?"}). ` +
        `Each load runs in ${GENERATOR_PROCESSES} child processes of its own (the calls in flight and the ids shared between them; ` +
        "one for 1 in flight and for service-no-rpc) that share those cores.",
      "  grpc-direct    = the measured path: @grpc/grpc-js, one channel per generator process, N unary calls in flight in all, to the servers service's own port",
      `  pg-update      = the baseline: the bare UPDATE of one row through pg, N in flight on pools of min(N, ${PG_POOL_MAX}) connections in all`,
      "  grpc-forwarder = grpc-direct sent to the gateway's internal port, which forwards RecorderService to the servers service",
      `  service-no-rpc = breakdown (${BREAKDOWN_CONCURRENCY.join(" and ")} in flight): the service's check-in handler ` +
        "(its per-tick batching and store on lib/db's pg pool, the service's default size of 10) called in the load worker: a check-in without the RPC",
      "",
      report.text,
      "",
      `results: ${path}`,
      summaryLine(runs, report.ratios, failures.length === 0),
      "",
    ].join("\n"),
  );
  if (failures.length > 0) {
    throw new Error(
      `${failures.length} run(s) failed verification (errors, or rows not written as the run says): ${failures
        .map((r) => `${r.target}@${r.concurrency}`)
        .join(", ")}; see ${path}`,
    );
  }
}

// ---------------------------------------------------------------------------------------------
// Fixture: a tenant with room for every server, and the servers themselves, connected.

type Fixture = { tenantId: string; ids: string[]; seedMs: number };

async function seedServers(sys: System, databaseUrl: string): Promise<Fixture> {
  const tenant = await provisionTenant(sys, { serverLimit: BigInt(SERVER_COUNT) });
  // Straight into the fresh database in a few multi-row INSERTs: the benchmark measures check-ins,
  // not the setup flow. Connected and seen a moment ago, as servers that check in regularly are.
  const beganMs = performance.now();
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  const ids: string[] = [];
  try {
    for (let first = 1; first <= SERVER_COUNT; first += INSERT_BATCH) {
      const last = Math.min(SERVER_COUNT, first + INSERT_BATCH - 1);
      const { rows } = await client.query<{ server_id: string }>(
        `INSERT INTO servers.server (server_id, tenant_id, name, state, plugin_version, last_seen_at)
         SELECT gen_random_uuid(), $1, format('bench-server-%s', lpad(i::text, 5, '0')), 'connected', 'bench-seed', now()
           FROM generate_series($2::int, $3::int) AS i
         RETURNING server_id`,
        [tenant.tenantId, first, last],
      );
      ids.push(...rows.map((r) => r.server_id));
    }
    await client.query("ANALYZE servers.server");
  } finally {
    await client.end();
  }
  if (ids.length !== SERVER_COUNT) throw new Error(`inserted ${ids.length} servers, expected ${SERVER_COUNT}`);
  return { tenantId: tenant.tenantId, ids, seedMs: performance.now() - beganMs };
}

/** One stock gRPC check-in (test/recorder.ts) answers ONLINE for the server and writes its row. */
async function probe(db: pg.Client, baseUrl: string, serverId: string, pluginVersion: string): Promise<void> {
  const res = await grpcCheckIn(baseUrl, serverId, { pluginVersion });
  if (res.serverId !== serverId || res.status !== ServerStatus.ONLINE) {
    throw new Error(
      `check-in of ${serverId} at ${baseUrl} answered ${JSON.stringify({ ...res, $typeName: undefined })}`,
    );
  }
  const { rows } = await db.query<{ plugin_version: string | null }>(
    "SELECT plugin_version FROM servers.server WHERE server_id = $1",
    [serverId],
  );
  if (rows[0]?.plugin_version !== pluginVersion)
    throw new Error(`check-in of ${serverId} at ${baseUrl} did not write its row (${JSON.stringify(rows[0])})`);
}

async function verify(
  db: pg.Client,
  result: LoadResult,
  pluginVersion: string,
  notBefore: Date,
): Promise<Verification> {
  const { rows } = await db.query<{ tagged: number; fresh: number }>(
    `SELECT count(*)::int AS tagged, (count(*) FILTER (WHERE last_seen_at >= $2))::int AS fresh
       FROM servers.server WHERE plugin_version = $1`,
    [pluginVersion, notBefore],
  );
  const { tagged, fresh } = rows[0] ?? { tagged: 0, fresh: 0 };
  // Every check-in worker reports it (load-worker.ts); none reported fails the check below.
  const expected = result.expectedKeys ?? 0;
  const ok =
    result.errors === 0 &&
    expected > 0 &&
    result.distinctKeys === expected &&
    tagged === expected &&
    fresh === expected;
  return { tagged, fresh, expected, ok };
}

/** min(concurrency, PG_POOL_MAX), within what the cluster has free beyond PG_HEADROOM. */
async function baselinePoolSize(db: pg.Client, concurrency: number): Promise<number> {
  const { rows } = await db.query<{ free: number }>(
    `SELECT (current_setting('max_connections')::int - current_setting('superuser_reserved_connections')::int
             - (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'))::int AS free`,
  );
  const free = (rows[0]?.free ?? 0) - PG_HEADROOM;
  if (free < 1) throw new Error("no free Postgres connection for the baseline's pool (max_connections reached)");
  return Math.min(concurrency, PG_POOL_MAX, free);
}

async function connectionsOf(db: pg.Client, applicationName: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1",
    [applicationName],
  );
  return rows[0]?.n ?? 0;
}

async function readPgSettings(db: pg.Client): Promise<PgSettings> {
  const { rows } = await db.query<{ name: string; setting: string }>(
    `SELECT name, setting FROM pg_settings
      WHERE name IN ('server_version', 'synchronous_commit', 'fsync', 'wal_sync_method', 'commit_delay',
                     'max_connections', 'shared_buffers', 'autovacuum')`,
  );
  const settings = Object.fromEntries(rows.map((r) => [r.name, r.setting]));
  const { rows: used } = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity");
  settings.connections_in_use_at_start = String(used[0]?.n ?? "?");
  return settings;
}

// ---------------------------------------------------------------------------------------------
// Processes whose CPU time is read around each run.

/**
 * The harness's processes are children of this one (`dist/start.js <name>`); Postgres backends name
 * their database in their command line (the services' pools and the baseline's pool alike). The
 * cluster's WAL writer, checkpointer and background writer serve every database on it, this one
 * included: they are counted apart, as "pg shared".
 */
function processGroups(databaseUrl: string): CpuGroup[] {
  const only = (name: string) => {
    const pids = findChildPids(process.pid, `start.js ${name}`);
    if (pids.length !== 1) throw new Error(`expected one "${name}" process under the harness, found ${pids.length}`);
    return pids;
  };
  const database = new URL(databaseUrl).pathname.slice(1);
  const shared = listProcesses()
    .filter((p) => /^postgres: .*(walwriter|checkpointer|background writer)$/.test(p.cmdline))
    .map((p) => p.pid);
  return [
    { label: "servers", pids: only("servers") },
    { label: "gateway", pids: only("gateway") },
    { label: "postgres", cmdlineIncludes: ` ${database} ` },
    { label: "pg shared", pids: shared },
    { label: "other services", pids: [...only("markers"), ...only("replays"), ...only("webhooks")] },
  ];
}

// ---------------------------------------------------------------------------------------------
// Report.

const CPU_LABELS = ["servers", "gateway", "postgres", "pg shared", "other services", "generator"] as const;

function buildReport(runs: Run[], pgSettings: PgSettings) {
  const find = (target: TargetName, concurrency: number) =>
    runs.find((r) => r.target === target && r.concurrency === concurrency);
  const ratios: Record<number, { grpcOverPg: number | undefined; forwarderOverPg: number | undefined }> = {};
  const lines: string[] = [];

  const mainRows: Cell[][] = [];
  for (const concurrency of CONCURRENCY) {
    const base = find("pg-update", concurrency)?.result;
    const rate = (target: TargetName) => {
      const r = find(target, concurrency)?.result;
      return r && base && base.rps > 0 ? r.rps / base.rps : undefined;
    };
    ratios[concurrency] = { grpcOverPg: rate("grpc-direct"), forwarderOverPg: rate("grpc-forwarder") };
    for (const target of TARGETS) {
      const run = find(target, concurrency);
      if (!run) continue;
      const r = run.result;
      mainRows.push([
        concurrency,
        target,
        Math.round(r.rps),
        round(r.latency.p50Ms),
        round(r.latency.p99Ms),
        round(r.latency.meanMs),
        r.errors,
        `${run.verification.tagged}/${run.verification.expected}${run.verification.ok ? "" : " FAIL"}`,
        run.pgConnections,
        target === "pg-update" ? undefined : round(rate(target), 2),
      ]);
    }
  }
  lines.push(
    formatTable(
      [
        "in flight",
        "target",
        "check-ins/s",
        "p50 ms",
        "p99 ms",
        "mean ms",
        "errors",
        "rows written",
        "pg conns",
        "vs pg-update",
      ],
      mainRows,
    ),
    "",
    "rows written: rows carrying the run's plugin version with last_seen_at past its start / distinct ids it checked in",
    `ratio at ${TARGET_CONCURRENCY} in flight: ${round(ratios[TARGET_CONCURRENCY]?.grpcOverPg, 2) ?? "-"} (target >= ${RATIO_TARGET}: ${
      ratios[TARGET_CONCURRENCY]?.grpcOverPg === undefined
        ? "not measured"
        : (ratios[TARGET_CONCURRENCY]?.grpcOverPg ?? 0) >= RATIO_TARGET
          ? "met"
          : "NOT met"
    })`,
    "pg conns: the baseline's pool; for gRPC, the servers service's connections to Postgres after the run (its pool)",
    `ratio grpc-direct / pg-update (check-ins/s): ${CONCURRENCY.map((c) => `${c} in flight ${round(ratios[c]?.grpcOverPg, 2) ?? "-"}`).join(", ")}`,
  );

  const cpuHeaders = [
    "in flight",
    "target",
    "check-ins/s",
    ...CPU_LABELS,
    "attributed",
    "rest of machine",
    "machine busy %",
  ];
  const cpuRows: Cell[][] = [];
  for (const concurrency of CONCURRENCY) {
    for (const target of TARGETS) {
      const r = find(target, concurrency)?.result;
      if (!r || r.requests === 0) continue;
      cpuRows.push(cpuRow([concurrency, target], r, CPU_LABELS, cpus().length));
    }
  }
  lines.push(
    "",
    "where the time goes: CPU µs per check-in by process (from /proc around each measured run)",
    "  generator = the load workers: the gRPC clients for grpc-*, the pg clients (pool, protocol, Date encoding) for pg-update",
    "  pg shared = the cluster's WAL writer, checkpointer and background writer (shared with any other database on it)",
    formatTable(cpuHeaders, cpuRows),
    "",
    ...explain(find, pgSettings),
  );
  return { text: lines.join("\n"), ratios };
}

function explain(find: (target: TargetName, concurrency: number) => Run | undefined, pgSettings: PgSettings): string[] {
  const n = (v: number) => String(Math.round(v));
  const x = (a: number, b: number) => (a / b).toFixed(2);
  const us = (r: LoadResult, label: string) => ((r.cpuMs[label] ?? 0) * 1000) / r.requests;
  const busy = (r: LoadResult) => (100 * r.machineBusyMs) / (r.elapsedS * 1000 * cpus().length);
  const lines = ["where the time goes:"];
  for (const concurrency of CONCURRENCY) {
    const base = find("pg-update", concurrency)?.result;
    const grpc = find("grpc-direct", concurrency)?.result;
    if (!base || !grpc || base.requests === 0 || grpc.requests === 0) continue;
    // Serving a check-in: what the servers side spends, without the gRPC client (in production it
    // runs on the recorders' hosts); the baseline's pg client is part of its serving.
    const grpcServe = us(grpc, "servers") + us(grpc, "postgres");
    const baseServe = us(base, "postgres") + us(base, "generator");
    const grpcTotal = grpcServe + us(grpc, "generator");
    lines.push(
      `  ${concurrency} in flight: a gRPC check-in costs ${n(grpcTotal)} µs of CPU: servers ${n(us(grpc, "servers"))}, ` +
        `Postgres ${n(us(grpc, "postgres"))}, the gRPC client ${n(us(grpc, "generator"))}. The bare UPDATE costs ${n(baseServe)} µs: ` +
        `Postgres ${n(us(base, "postgres"))}, the pg client ${n(us(base, "generator"))}. Serving alone (the gRPC client runs ` +
        `on the recorders' hosts in production): ${n(grpcServe)} µs against ${n(baseServe)} µs, x${x(grpcServe, baseServe)}. ` +
        `Machine busy: ${n(busy(grpc))}% vs ${n(busy(base))}% of ${cpus().length} cores.`,
    );
    // A Node process runs its JavaScript on one core: the servers process's share of one core is its ceiling.
    const coreShare = (r: LoadResult, label: string) => (100 * (r.cpuMs[label] ?? 0)) / (r.elapsedS * 1000);
    if (concurrency === 1) {
      const waiting =
        grpcTotal < grpc.latency.meanMs * 1000
          ? "the rest is waiting (wake-ups across processes, the WAL flush at each commit, other load on the shared cores)"
          : "it exceeds the latency because the processes work in parallel on the two cores: even one call in flight is CPU-bound, not waiting";
      lines.push(
        `    with one call in flight the rate is 1/latency: p50 ${round(grpc.latency.p50Ms)} ms over gRPC vs ${round(base.latency.p50Ms)} ms ` +
          `for the UPDATE alone, so the hop (gRPC client, HTTP/2, Connect, protobuf, the service's pool) adds ${round(grpc.latency.p50Ms - base.latency.p50Ms)} ms. ` +
          `The gRPC check-in's CPU, summed over the processes, is ${n(grpcTotal)} µs against a ${n(grpc.latency.meanMs * 1000)} µs mean latency: ${waiting}. ` +
          `The UPDATE's: ${n(baseServe)} of ${n(base.latency.meanMs * 1000)} µs (synchronous_commit=${pgSettings.synchronous_commit ?? "?"}).`,
      );
    } else {
      lines.push(
        `    if the cores are the limit, CPU per check-in predicts the ratio: ${x(baseServe, grpcTotal)} (measured ${x(grpc.rps, base.rps)}). ` +
          `The servers process ran at ${n(coreShare(grpc, "servers"))}% of one core, the gRPC clients at ${n(coreShare(grpc, "generator"))}% ` +
          `(${grpc.processes ?? 1} process(es)), ` +
          `Postgres at ${n(coreShare(grpc, "postgres"))}%` +
          (Math.min(busy(grpc), busy(base)) < 75
            ? `; the machine was not saturated (${n(busy(grpc))}% and ${n(busy(base))}% busy), so waits limit the rate as much as CPU.`
            : ` (busy time excludes iowait, which the commits' WAL flushes add).`),
      );
    }
    const runA = find("grpc-direct", concurrency);
    const runB = find("pg-update", concurrency);
    if (runA && runB && concurrency > 1) {
      lines.push(
        `    the servers service held ${runA.pgConnections} Postgres connection(s) after the run (its pool) for ${concurrency} ` +
          `calls in flight, so calls beyond that queue in the process; the baseline's pool had ${runB.pgConnections}.`,
      );
    }
    const handler = find("service-no-rpc", concurrency)?.result;
    if (handler && handler.requests > 0) {
      const rpcLayer = us(grpc, "servers") - us(handler, "generator");
      lines.push(
        `    the service's check-in handler without the RPC (batching, store, pg client): ${Math.round(handler.rps)} check-ins/s, ` +
          `p50 ${round(handler.latency.p50Ms)} ms; Postgres ${n(us(handler, "postgres"))} µs and handler + pg client ${n(us(handler, "generator"))} µs ` +
          `per check-in (the bare UPDATE: ${n(us(base, "postgres"))} and ${n(us(base, "generator"))}). So of the servers process's ` +
          `${n(us(grpc, "servers"))} µs, ~${n(rpcLayer)} µs is the RPC layer (HTTP/2 server, the gRPC handler, protobuf); ` +
          `Postgres spends ${n(us(handler, "postgres"))} µs per check-in on the handler's statements against ${n(us(base, "postgres"))} µs ` +
          `on the bare UPDATE (through gRPC: ${n(us(grpc, "postgres"))} µs, at ${Math.round(grpc.rps)} rather than ${Math.round(handler.rps)} check-ins/s, ` +
          "so smaller batches).",
      );
    }
    const fwd = find("grpc-forwarder", concurrency)?.result;
    if (fwd && fwd.requests > 0) {
      lines.push(
        `    through the gateway's forwarder: ${Math.round(fwd.rps)} check-ins/s (x${x(fwd.rps, grpc.rps)} of direct), ` +
          `p50 ${round(fwd.latency.p50Ms)} ms; the gateway spends ${n(us(fwd, "gateway"))} µs per check-in (a Connect server and a ` +
          `Connect client in one process), the servers service ${n(us(fwd, "servers"))} µs.`,
      );
    }
  }
  return lines;
}

/**
 * The last line on stdout, for scripts: `{"bench":"servers","ratio":{"1":n,"16":n,"64":n},...}` with
 * the headline ratios (grpc-direct / pg-update check-ins per second), and per concurrency the rates,
 * p50/p99 latencies and CPU µs per check-in by process of both sides, and the ratio the serving side
 * alone predicts (servingCpuRatio: generator CPU excluded).
 */
function summaryLine(
  runs: readonly Run[],
  ratios: Record<number, { grpcOverPg: number | undefined; forwarderOverPg: number | undefined }>,
  verified: boolean,
): string {
  const perConcurrency = <T>(value: (c: number) => T) =>
    Object.fromEntries(CONCURRENCY.map((c) => [String(c), value(c)]));
  const side = (target: TargetName, c: number) => {
    const r = runs.find((run) => run.target === target && run.concurrency === c)?.result;
    if (!r || r.requests === 0) return null;
    // CPU µs per check-in by process: where the time goes, for scripts too.
    const cpuUs = Object.fromEntries(
      CPU_LABELS.map((label) => [label, Math.round(((r.cpuMs[label] ?? 0) * 1000) / r.requests)]),
    );
    return {
      rps: Math.round(r.rps),
      p50Ms: round(r.latency.p50Ms) ?? null,
      p99Ms: round(r.latency.p99Ms) ?? null,
      cpuUs,
    };
  };
  const ratio = (c: number) => round(ratios[c]?.grpcOverPg) ?? null;
  // The load generator shares the cores, and the stock gRPC client costs several times the pg
  // client per call; in production it runs on the recorders' hosts. So, beside the headline, the
  // ratio the serving side alone predicts: the bare UPDATE's CPU per check-in (Postgres and its pg
  // client) over the service's (servers process and Postgres), generator excluded.
  const servingRatio = (c: number) => {
    const grpc = side("grpc-direct", c)?.cpuUs;
    const base = side("pg-update", c)?.cpuUs;
    if (!grpc || !base) return null;
    const grpcServe = (grpc.servers ?? 0) + (grpc.postgres ?? 0);
    return grpcServe > 0 ? (round(((base.postgres ?? 0) + (base.generator ?? 0)) / grpcServe) ?? null) : null;
  };
  return JSON.stringify({
    bench: "servers",
    ratio: perConcurrency(ratio),
    target: {
      concurrency: TARGET_CONCURRENCY,
      ratio: RATIO_TARGET,
      met: (ratio(TARGET_CONCURRENCY) ?? 0) >= RATIO_TARGET,
    },
    p99Ms: perConcurrency((c) => ({
      grpc: side("grpc-direct", c)?.p99Ms ?? null,
      baseline: side("pg-update", c)?.p99Ms ?? null,
    })),
    grpc: perConcurrency((c) => side("grpc-direct", c)),
    baseline: perConcurrency((c) => side("pg-update", c)),
    forwarderRatio: perConcurrency((c) => round(ratios[c]?.forwarderOverPg) ?? null),
    servingCpuRatio: perConcurrency(servingRatio),
    verified,
  });
}
