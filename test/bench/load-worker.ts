// One load run in its own process (see load.ts): argv[2] is a LoadSpec as JSON; the LoadResult is
// the last line on stdout.
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import autocannon from "autocannon";
import { ServersService } from "../../gen/replay/servers/v1/servers_pb.js";
import { trustedHeaders } from "../../lib/rpc/context.js";
import { cpuDelta, snapshotCpu } from "./proc.js";
import type { LoadResult, LoadSpec, LoadTarget } from "./load.js";
import { createSampleBuffer, summarizeLatencies } from "./stats.js";

type Recorder = { latency(ms: number): void; status(code: string): void };
type Outcome = { errors: number; bytes: number | undefined };

const ignore: Recorder = { latency() {}, status() {} };

type Driver = (durationS: number, record: Recorder) => Promise<Outcome>;

function httpDriver(target: Extract<LoadTarget, { kind: "http" }>, connections: number): Driver {
  return (durationS, record) =>
    new Promise((resolve, reject) => {
      const instance = autocannon(
        { url: target.url, headers: target.headers, connections, duration: durationS, pipelining: 1, timeout: 10 },
        (err, result) => (err ? reject(err) : resolve({ errors: result.errors, bytes: result.throughput.total })),
      );
      // Sub-millisecond response times from the event (autocannon's own histogram keeps whole ms).
      instance.on("response", (_client, statusCode, _bytes, responseTimeMs) => {
        record.latency(responseTimeMs);
        record.status(String(statusCode));
      });
    });
}

function connectDriver(target: Extract<LoadTarget, { kind: "connect-list-servers" }>, connections: number): Driver {
  // The gateway's own transport settings (lib/rpc/clients.ts): one HTTP/2 session, binary protobuf.
  const transport = createConnectTransport({
    baseUrl: target.baseUrl,
    httpVersion: "2",
    useBinaryFormat: true,
    ...(target.acceptCompression === false ? { acceptCompression: [] } : {}),
  });
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

async function main(): Promise<void> {
  const spec = JSON.parse(process.argv[2] ?? "") as LoadSpec;
  const drive =
    spec.target.kind === "http"
      ? httpDriver(spec.target, spec.connections)
      : connectDriver(spec.target, spec.connections);
  if (spec.warmupS > 0) await drive(spec.warmupS, ignore);

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
  const outcome = await drive(spec.durationS, record);
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
    non2xx,
    statusCounts,
    bytesPerResponse: outcome.bytes === undefined || requests === 0 ? undefined : outcome.bytes / requests,
    cpuMs: { ...cpu.byLabelMs, generator: (own.user + own.system) / 1000 },
    machineBusyMs: cpu.machineBusyMs,
  };
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

main().then(
  // An HTTP/2 session or a keep-alive socket may linger; the result is out, so leave now.
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
