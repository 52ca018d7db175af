import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { CpuGroup } from "./proc.js";
import type { LatencySummary } from "./stats.js";

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
export type CheckInKeys = { idsFile: string; pluginVersion: string };

export type LoadSpec = {
  target: LoadTarget;
  /** Concurrent requests in flight: HTTP connections, or concurrent calls on the one HTTP/2 session. */
  connections: number;
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
};

const workerPath = fileURLToPath(new URL("./load-worker.js", import.meta.url));

/**
 * Runs one load in a child process of its own, so the generator's CPU is not the measured
 * process's; it still shares the machine's cores with the servers it loads.
 */
export function runLoad(spec: LoadSpec): Promise<LoadResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [workerPath, JSON.stringify(spec)], { stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr.on("data", (chunk: Buffer) => {
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
}
