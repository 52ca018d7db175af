import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { CpuGroup } from "./proc.js";
import { type LatencySummary, summarizeLatencies } from "./stats.js";

/**
 * What a load run drives: an HTTP/1.1 endpoint through autocannon, the servers service's ListServers
 * RPC through a Connect client (h2c), recorder check-ins through a stock gRPC client, or a check-in's
 * bare `UPDATE` through `pg`, or the servers service's check-in handler without the RPC.
 */
export type LoadTarget =
  | {
      kind: "http";
      url: string;
      headers?: Record<string, string>;
      /**
       * POST these JSON bodies instead of a GET, each request the next one round-robin; a file with
       * one body a line (argv strings are limited to 128 KiB).
       */
      postBodiesFile?: string;
    }
  | {
      kind: "connect-list-servers";
      baseUrl: string;
      tenantId: string;
      /**
       * "lean": the gateway's own hop (lib/rpc/lean-transport.ts, HTTP/1.1 keep-alive, binary);
       * "connect-h2c": a stock connect-node client over one HTTP/2 session, for comparison.
       */
      transport: "lean" | "connect-h2c";
    }
  | {
      /** RecorderService.CheckIn with @grpc/grpc-js: one channel, `connections` unary calls in flight. */
      kind: "grpc-checkin";
      /** host:port of an h2c server that serves RecorderService. */
      address: string;
      /** The servers checked in, round-robin from the first: see CheckInKeys. */
      keys: CheckInKeys;
    }
  | {
      /** `UPDATE servers.server SET last_seen_at, plugin_version WHERE server_id` on a pg pool. */
      kind: "pg-checkin";
      databaseUrl: string;
      /** The pool's size (every connection is opened before the warm-up). */
      poolMax: number;
      keys: CheckInKeys;
    }
  | {
      /**
       * The servers service's check-in handler (its batching and store on lib/db's pg pool, the
       * service's default size), called in the load worker: a check-in without the RPC layer.
       */
      kind: "service-checkin";
      databaseUrl: string;
      keys: CheckInKeys;
    };

/**
 * Which servers a check-in load checks in, and the plugin version it sends: the measured run sends
 * `pluginVersion`, the warm-up `${pluginVersion}-warmup`, so the rows the measured run wrote can be
 * counted afterwards. Ids are read from a file, one a line (10 000 UUIDs exceed an argv string's 128 KiB).
 */
export type CheckInKeys = {
  idsFile: string;
  pluginVersion: string;
  /**
   * This worker's share when a load runs in several processes (LoadSpec.processes): the ids whose
   * index modulo `count` is `index`, so no two workers check in the same server.
   */
  shard?: { index: number; count: number };
};

export type LoadSpec = {
  target: LoadTarget;
  /** Concurrent requests in flight: HTTP connections, or concurrent calls on the one HTTP/2 session. */
  connections: number;
  /**
   * Check-in targets only: worker processes that share the `connections` (and a pg target's pool),
   * each its own client and its share of the ids, measured over one window. Several recorders'
   * clients, not one process's event loop, as in production; 1 if omitted.
   */
  processes?: number;
  durationS: number;
  /** The same load, not recorded, right before the measured run. */
  warmupS: number;
  /** Processes whose CPU time is read around the measured run (the generator's own is added as "generator"). */
  cpuGroups: CpuGroup[];
};

export type LoadResult = {
  connections: number;
  elapsedS: number;
  /** Completed responses of any status. */
  requests: number;
  rps: number;
  latency: LatencySummary;
  /** Connection errors and timeouts (http), failed calls (connect, check-ins: never counted as requests). */
  errors: number;
  /** Failed calls by kind (gRPC status name, SQLSTATE, "not-online", "no-row"), when the driver tells them apart. */
  errorKinds?: Record<string, number>;
  /** Check-ins: distinct server ids whose check-in succeeded in the measured run. */
  distinctKeys?: number;
  /**
   * Check-ins: the distinct ids the run's check-ins reach going round-robin over its ids from the
   * first (per worker, its share of them): min(check-ins, ids), summed over the workers.
   */
  expectedKeys?: number;
  non2xx: number;
  statusCounts: Record<string, number>;
  /** Response size including headers (http only). */
  bytesPerResponse: number | undefined;
  /** CPU ms per group during the measured run, "generator" included. */
  cpuMs: Record<string, number>;
  /** Busy CPU ms of the whole machine (all cores) during the measured run. */
  machineBusyMs: number;
  /** The alternating rounds this result merges (rounds.ts), when more than one. */
  rounds?: number;
  /** Generator processes the load ran in (LoadSpec.processes), when more than one. */
  processes?: number;
  /** The raw latencies (ms), only from a worker of a load in several processes, for the merge. */
  samplesMs?: number[];
};

const workerPath = fileURLToPath(new URL("./load-worker.js", import.meta.url));

/**
 * Runs one load in child processes of its own (one unless `spec.processes` says more), so the
 * generator's CPU is not the measured process's; it still shares the machine's cores with the
 * servers it loads. Several workers warm up apart, then start their measured runs together when
 * the last is ready; the CPU of the machine and the groups is the first worker's reading of that
 * window, the generator's the sum of the workers' own.
 */
export async function runLoad(spec: LoadSpec): Promise<LoadResult> {
  const processes = Math.min(spec.processes ?? 1, spec.connections);
  if (processes <= 1) return runWorker({ ...spec, processes: 1 }, () => {}).result;
  const target = spec.target;
  if (!("keys" in target)) throw new Error(`a ${target.kind} load runs in one process`);
  const workers = Array.from({ length: processes }, (_, index) => {
    const share = (total: number) => Math.floor(total / processes) + (index < total % processes ? 1 : 0);
    const part: LoadTarget = { ...target, keys: { ...target.keys, shard: { index, count: processes } } };
    if (part.kind === "pg-checkin") part.poolMax = Math.max(1, share(part.poolMax));
    return runWorker({ ...spec, target: part, connections: share(spec.connections), processes }, () => ready());
  });
  let readyCount = 0;
  const ready = () => {
    if (++readyCount === processes) for (const worker of workers) worker.go();
  };
  try {
    return mergeResults(spec.connections, await Promise.all(workers.map((w) => w.result)));
  } catch (err) {
    // A worker that failed never gets ready: the others would wait for their start forever.
    for (const worker of workers) worker.kill();
    throw err;
  }
}

/** One load run's results from several workers over one window, as one. */
function mergeResults(connections: number, parts: LoadResult[]): LoadResult {
  const [first] = parts;
  if (!first) throw new Error("no load worker results");
  const samples = parts.flatMap((p) => p.samplesMs ?? []);
  const requests = sum(parts, (p) => p.requests);
  const elapsedS = Math.max(...parts.map((p) => p.elapsedS));
  const errorKinds: Record<string, number> = {};
  const statusCounts: Record<string, number> = {};
  for (const part of parts) {
    addCounts(errorKinds, part.errorKinds ?? {});
    addCounts(statusCounts, part.statusCounts);
  }
  return {
    connections,
    elapsedS,
    requests,
    rps: requests / elapsedS,
    latency: summarizeLatencies(Float64Array.from(samples)),
    errors: sum(parts, (p) => p.errors),
    ...(parts.some((p) => p.errorKinds) ? { errorKinds } : {}),
    ...(parts.every((p) => p.distinctKeys !== undefined)
      ? { distinctKeys: sum(parts, (p) => p.distinctKeys ?? 0) }
      : {}),
    ...(parts.every((p) => p.expectedKeys !== undefined)
      ? { expectedKeys: sum(parts, (p) => p.expectedKeys ?? 0) }
      : {}),
    non2xx: sum(parts, (p) => p.non2xx),
    statusCounts,
    bytesPerResponse: undefined,
    cpuMs: { ...first.cpuMs, generator: sum(parts, (p) => p.cpuMs.generator ?? 0) },
    machineBusyMs: first.machineBusyMs,
    processes: parts.length,
  };
}

function sum<T>(items: readonly T[], of: (item: T) => number): number {
  return items.reduce((total, item) => total + of(item), 0);
}

function addCounts(into: Record<string, number>, counts: Record<string, number>): void {
  for (const [key, n] of Object.entries(counts)) into[key] = (into[key] ?? 0) + n;
}

/**
 * One worker process. With `spec.processes` > 1 it reports when its warm-up is done (`onReady`)
 * and waits for `go()` before its measured run.
 */
function runWorker(spec: LoadSpec, onReady: () => void): { result: Promise<LoadResult>; go(): void; kill(): void } {
  const child = spawn(process.execPath, [workerPath, JSON.stringify(spec)], {
    stdio: ["ignore", "pipe", "pipe", "ipc"],
  });
  child.on("message", (message) => {
    if (message === "ready") onReady();
  });
  const result = new Promise<LoadResult>((resolve, reject) => {
    let stdout = "";
    let stderr = "";
    child.stdout?.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr?.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    child.once("error", reject);
    child.once("exit", (code) => {
      const line = stdout.trim().split("\n").pop() ?? "";
      if (code !== 0 || !line.startsWith("{")) {
        reject(new Error(`load worker exited ${code}:\n${stderr}${stdout}`));
        return;
      }
      resolve(JSON.parse(line) as LoadResult);
    });
  });
  return { result, go: () => child.send("go"), kill: () => child.kill() };
}
