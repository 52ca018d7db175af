// One load run in its own process (see load.ts): argv[2] is a LoadSpec as JSON; the LoadResult is
// the last line on stdout.
import { readFileSync } from "node:fs";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { createClient, createContextValues, type HandlerContext } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import autocannon from "autocannon";
import pg from "pg";
import {
  type CheckInRequest,
  CheckInRequestSchema,
  CheckInResponseSchema,
  RecorderService,
} from "../../gen/replay/servers/v1/recorder_pb.js";
import { ServerStatus, ServersService } from "../../gen/replay/servers/v1/servers_pb.js";
import { trustedHeaders } from "../../lib/rpc/context.js";
import { createLeanTransport } from "../../lib/rpc/lean-transport.js";
import type { CheckInKeys, LoadResult, LoadSpec, LoadTarget } from "./load.js";
import { cpuDelta, snapshotCpu } from "./proc.js";
import { createSampleBuffer, summarizeLatencies } from "./stats.js";

type Recorder = { latency(ms: number): void; status(code: string): void };
type Outcome = {
  errors: number;
  bytes: number | undefined;
  errorKinds?: Record<string, number>;
  distinctKeys?: number;
  expectedKeys?: number;
};

const ignore: Recorder = { latency() {}, status() {} };

/** One timed stretch of load; `measured` is false for the warm-up. */
type Driver = (durationS: number, record: Recorder, measured: boolean) => Promise<Outcome>;

function httpDriver(target: Extract<LoadTarget, { kind: "http" }>, connections: number): Driver {
  const posts = target.postBodiesFile === undefined ? undefined : postRequests(target.postBodiesFile);
  return (durationS, record) =>
    new Promise((resolve, reject) => {
      const instance = autocannon(
        {
          url: target.url,
          headers: posts ? { ...target.headers, "content-type": "application/json" } : target.headers,
          connections,
          duration: durationS,
          pipelining: 1,
          timeout: 10,
          ...(posts ? { requests: posts } : {}),
        },
        (err, result) => (err ? reject(err) : resolve({ errors: result.errors, bytes: result.throughput.total })),
      );
      // Sub-millisecond response times from the event (autocannon's own histogram keeps whole ms).
      instance.on("response", (_client, statusCode, _bytes, responseTimeMs) => {
        record.latency(responseTimeMs);
        record.status(String(statusCode));
      });
    });
}

/** One POST request definition whose body is the next line of the file each time it is sent. */
function postRequests(bodiesFile: string): autocannon.Request[] {
  const bodies = readFileSync(bodiesFile, "utf8").split("\n").filter(Boolean);
  if (bodies.length === 0) throw new Error(`no bodies in ${bodiesFile}`);
  let next = 0;
  return [{ method: "POST", setupRequest: (req) => ({ ...req, body: bodies[next++ % bodies.length] }) }];
}

function connectDriver(target: Extract<LoadTarget, { kind: "connect-list-servers" }>, connections: number): Driver {
  // "lean" is the gateway's own hop (lib/rpc/clients.ts); "connect-h2c" a stock connect-node client.
  const transport =
    target.transport === "lean"
      ? createLeanTransport({ baseUrl: target.baseUrl })
      : createConnectTransport({ baseUrl: target.baseUrl, httpVersion: "2", useBinaryFormat: true });
  const client = createClient(ServersService, transport);
  const headers = trustedHeaders({ tenantId: target.tenantId, requestId: "bench" });
  return async (durationS, record) => {
    const untilMs = performance.now() + durationS * 1000;
    let errors = 0;
    const loop = async () => {
      while (performance.now() < untilMs) {
        const startMs = performance.now();
        try {
          await client.listServers({}, { headers, timeoutMs: 10_000 });
          record.latency(performance.now() - startMs);
          record.status("200");
        } catch {
          errors++;
        }
      }
    };
    await Promise.all(Array.from({ length: connections }, loop));
    return { errors, bytes: undefined };
  };
}

/** One check-in of `serverId`: undefined when it succeeded, else what went wrong. */
type CheckInCall = (serverId: string, pluginVersion: string) => Promise<string | undefined>;

/**
 * `connections` loops, each checking in the next server of a shared round-robin over the ids
 * (from the first, every run), so two in-flight check-ins never touch the same row and every
 * target sees the same sequence of ids.
 */
function checkInDriver(keys: CheckInKeys, connections: number, call: CheckInCall): Driver {
  const shard = keys.shard;
  const ids = readFileSync(keys.idsFile, "utf8")
    .split("\n")
    .filter((id, i) => id !== "" && (!shard || i % shard.count === shard.index));
  if (ids.length === 0) throw new Error(`no server ids in ${keys.idsFile}`);
  return async (durationS, record, measured) => {
    const pluginVersion = measured ? keys.pluginVersion : `${keys.pluginVersion}-warmup`;
    const touched = new Uint8Array(ids.length);
    const errorKinds: Record<string, number> = {};
    let distinctKeys = 0;
    let succeeded = 0;
    let errors = 0;
    let next = 0;
    const untilMs = performance.now() + durationS * 1000;
    const loop = async () => {
      while (performance.now() < untilMs) {
        const index = next++ % ids.length;
        const startMs = performance.now();
        const failure = await call(ids[index] as string, pluginVersion);
        if (failure === undefined) {
          record.latency(performance.now() - startMs);
          record.status("200");
          succeeded++;
          if (touched[index] === 0) {
            touched[index] = 1;
            distinctKeys++;
          }
        } else {
          errors++;
          errorKinds[failure] = (errorKinds[failure] ?? 0) + 1;
        }
      }
    };
    await Promise.all(Array.from({ length: connections }, loop));
    return { errors, bytes: undefined, errorKinds, distinctKeys, expectedKeys: Math.min(succeeded, ids.length) };
  };
}

/** A stock gRPC client as recorder infrastructure runs one: one channel, protobuf-es serializers (test/recorder.ts). */
function grpcCheckInDriver(target: Extract<LoadTarget, { kind: "grpc-checkin" }>, connections: number): Driver {
  const client = new grpc.Client(target.address, grpc.credentials.createInsecure());
  const method = `/${RecorderService.typeName}/CheckIn`;
  const serialize = (message: CheckInRequest) => Buffer.from(toBinary(CheckInRequestSchema, message));
  const deserialize = (bytes: Buffer) => fromBinary(CheckInResponseSchema, bytes);
  return checkInDriver(
    target.keys,
    connections,
    (serverId, pluginVersion) =>
      new Promise((resolve) => {
        client.makeUnaryRequest(
          method,
          serialize,
          deserialize,
          create(CheckInRequestSchema, { serverId, pluginVersion }),
          { deadline: Date.now() + 10_000 },
          (err, res) => {
            if (err) resolve(grpc.status[err.code] ?? `grpc-${err.code}`);
            else if (res?.serverId !== serverId || res.status !== ServerStatus.ONLINE) resolve("not-online");
            else resolve(undefined);
          },
        );
      }),
  );
}

/** The baseline of a check-in: its one UPDATE through `pg`, autocommitted, nothing else. */
async function pgCheckInDriver(
  target: Extract<LoadTarget, { kind: "pg-checkin" }>,
  connections: number,
): Promise<Driver> {
  const pool = new pg.Pool({
    connectionString: target.databaseUrl,
    max: target.poolMax,
    // The pool stays whole for the worker's life: no backend exits (and takes its CPU time along) mid-run.
    idleTimeoutMillis: 0,
    application_name: "bench-pg-checkin",
  });
  pool.on("error", () => {
    // an idle client's error: the next query on it fails and is counted
  });
  // Every connection opened now, outside the warm-up and the measured run; a refusal (max_connections) fails here.
  const clients = await Promise.all(Array.from({ length: target.poolMax }, () => pool.connect()));
  for (const client of clients) client.release();
  return checkInDriver(target.keys, connections, async (serverId, pluginVersion) => {
    try {
      const res = await pool.query(
        "UPDATE servers.server SET last_seen_at = $2, plugin_version = $3 WHERE server_id = $1",
        [serverId, new Date(), pluginVersion],
      );
      return res.rowCount === 1 ? undefined : "no-row";
    } catch (err) {
      return (err as { code?: string }).code ?? "pg-error";
    }
  });
}

/**
 * The servers service's check-in without the RPC around it: its RecorderService handler (batching
 * and store) on lib/db's pg pool of the service's default size, called in this process.
 */
async function serviceCheckInDriver(
  target: Extract<LoadTarget, { kind: "service-checkin" }>,
  connections: number,
): Promise<Driver> {
  // Imported here: only this target needs the service's modules.
  const { createPgDb } = await import("../../lib/db/db.js");
  const { createRecorderService } = await import("../../services/servers/recorder-service.js");
  const db = createPgDb({ url: target.databaseUrl, schema: "servers", applicationName: "bench-service-checkin" });
  const recorder = createRecorderService({ db, now: () => new Date() });
  // The check-in handler reads only the trace hop from its context (none here: the RPC layer's
  // part is what is left out).
  const ctx = { values: createContextValues() } as HandlerContext;
  return checkInDriver(target.keys, connections, async (serverId, pluginVersion) => {
    try {
      const res = await recorder.checkIn(create(CheckInRequestSchema, { serverId, pluginVersion }), ctx);
      return res.serverId === serverId && res.status === ServerStatus.ONLINE ? undefined : "not-online";
    } catch (err) {
      return (err as { code?: unknown }).code?.toString() ?? "error";
    }
  });
}

function driverFor(spec: LoadSpec): Driver | Promise<Driver> {
  switch (spec.target.kind) {
    case "http":
      return httpDriver(spec.target, spec.connections);
    case "connect-list-servers":
      return connectDriver(spec.target, spec.connections);
    case "grpc-checkin":
      return grpcCheckInDriver(spec.target, spec.connections);
    case "pg-checkin":
      return pgCheckInDriver(spec.target, spec.connections);
    case "service-checkin":
      return serviceCheckInDriver(spec.target, spec.connections);
  }
}

/** Tells the parent this worker is warm and waits for its word to start measuring (load.ts, runLoad). */
function startSignal(): Promise<void> {
  return new Promise((resolve, reject) => {
    if (!process.send) {
      reject(new Error("a load in several processes needs an IPC channel to its parent"));
      return;
    }
    process.on("message", (message) => {
      if (message === "go") resolve();
    });
    process.send("ready");
  });
}

async function main(): Promise<void> {
  const spec = JSON.parse(process.argv[2] ?? "") as LoadSpec;
  const drive = await driverFor(spec);
  if (spec.warmupS > 0) await drive(spec.warmupS, ignore, false);
  const several = (spec.processes ?? 1) > 1;
  if (several) await startSignal();

  const latencies = createSampleBuffer();
  const statusCounts: Record<string, number> = {};
  const record: Recorder = {
    latency: (ms) => latencies.push(ms),
    status(code) {
      statusCounts[code] = (statusCounts[code] ?? 0) + 1;
    },
  };
  const before = snapshotCpu(spec.cpuGroups);
  const ownBefore = process.cpuUsage();
  const startMs = performance.now();
  const outcome = await drive(spec.durationS, record, true);
  const elapsedS = (performance.now() - startMs) / 1000;
  const own = process.cpuUsage(ownBefore);
  const cpu = cpuDelta(before, snapshotCpu(spec.cpuGroups));

  const requests = Object.values(statusCounts).reduce((a, b) => a + b, 0);
  const non2xx = Object.entries(statusCounts).reduce((n, [code, count]) => (code.startsWith("2") ? n : n + count), 0);
  const result: LoadResult = {
    connections: spec.connections,
    elapsedS,
    requests,
    rps: requests / elapsedS,
    latency: summarizeLatencies(latencies.values()),
    errors: outcome.errors,
    ...(outcome.errorKinds ? { errorKinds: outcome.errorKinds } : {}),
    ...(outcome.distinctKeys === undefined ? {} : { distinctKeys: outcome.distinctKeys }),
    ...(outcome.expectedKeys === undefined ? {} : { expectedKeys: outcome.expectedKeys }),
    non2xx,
    statusCounts,
    bytesPerResponse: outcome.bytes === undefined || requests === 0 ? undefined : outcome.bytes / requests,
    cpuMs: { ...cpu.byLabelMs, generator: (own.user + own.system) / 1000 },
    machineBusyMs: cpu.machineBusyMs,
    // Whole microseconds: the merge's percentiles need no more, and the line stays a few hundred KB.
    ...(several ? { samplesMs: Array.from(latencies.values(), (ms) => Math.round(ms * 1000) / 1000) } : {}),
  };
  // A pipe takes a long line in several writes: exit only once it is all out.
  await new Promise<void>((resolve, reject) =>
    process.stdout.write(`${JSON.stringify(result)}\n`, (err) => (err ? reject(err) : resolve())),
  );
}

main().then(
  // An HTTP/2 session or a keep-alive socket may linger; the result is out, so leave now.
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
