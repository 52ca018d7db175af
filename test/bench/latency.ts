// `npm run bench latency`: the recorder's and the webhook consumer's path on the distributed system,
// each call made the moment the one before it was acknowledged: a check-in then StartRecording
// (refusals counted: none are expected), a marker by server id on it, the finish, and its
// collection.finalized at a receiver; then marker creates that land against marker creates that
// miss (an unknown replay, a server with nothing recording), one caller at a time and 16 at once,
// and the database transactions each costs (pg_stat_database over a window of each, less the idle
// system's over as long). Ratios in the same run: a miss's p50 over a landing create's (target
// <= 1.5), and transactions per miss (target <= 2). Last line: {"bench":"latency","ratio":{...}}.

import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { freePorts } from "../free-port.js";
import { send } from "../http.js";
import { grpcCheckIn } from "../recorder.js";
import { startDistributedSystem } from "../system.js";
import { writeReceiverCertificate } from "../webhook-receiver.js";
import { startChildServer } from "./child-server.js";
import { requirePostgresAndNats, systemNodeArgs } from "./env.js";
import { formatTable, round, writeResults } from "./report.js";
import { nowMs, type Summary, sleep, summarize } from "./scale-measure.js";
import { finishToDelivery, recordingTenant } from "./scale-recording.js";

export const description =
  "check-in to start, marker hit vs miss (1 and 16 callers), transactions per miss, finish to delivery: p50/p99";

const SESSIONS = 30;
const SEQUENTIAL = 200;
const CONCURRENCY = 16;
const WINDOW_MS = 8_000;
const MISS_RATIO_TARGET = 1.5;
const MISS_TRANSACTIONS_TARGET = 2;
/** Postgres reports a backend's transactions when it has been idle a while (PGSTAT_IDLE_INTERVAL, 10 s). */
const STATS_SETTLE_MS = 11_000;

const progress = (line: string) => process.stderr.write(`[bench latency] ${line}\n`);

type Window = { requests: number; perSecond: number; latency: Summary; transactions: number };

export async function run(_args: string[]): Promise<void> {
  await requirePostgresAndNats();
  const startedAt = new Date();
  const work = await mkdtemp(join(tmpdir(), "bench-latency-"));
  writeReceiverCertificate(work);
  const [tlsPort] = (await freePorts(1)) as [number];
  const receiver = await startChildServer("scale-receiver", { CERT_DIR: work, TLS_PORT: String(tlsPort) });
  progress("starting the distributed system (5 processes, fresh database)");
  const sys = await startDistributedSystem({
    env: { WEBHOOK_ALLOW_TARGETS: `127.0.0.1:${tlsPort}`, WEBHOOK_CA_FILE: join(work, "cert.pem") },
    nodeArgs: systemNodeArgs(),
  });
  const stats = new pg.Client({ connectionString: sys.databaseUrl });
  await stats.connect();
  try {
    const tenant = await recordingTenant(sys, `https://127.0.0.1:${tlsPort}/ok`, BigInt(SESSIONS + 1));
    const marker = (target: { replayId: string } | { serverId: string }) =>
      send(sys.baseUrl, "POST", "/v1/api/timeline-events", {
        headers: tenant.bearer(),
        body: { ...target, tick: 1, label: "bench" },
      });

    progress(`${SESSIONS} recorder sessions: check-in, start, marker by server id, finish`);
    const checkInToStart: number[] = [];
    let refusedStarts = 0;
    let pinned = 0;
    const replays: string[] = [];
    const servers: string[] = [];
    for (let i = 0; i < SESSIONS; i++) {
      const created = await send(sys.baseUrl, "POST", "/v1/api/servers", {
        headers: tenant.bearer(),
        body: { name: `latency-${i}` },
      });
      if (created.status !== 201) throw new Error(`POST /v1/api/servers: ${created.status} ${created.text}`);
      const serverId = created.body.serverId as string;
      servers.push(serverId);
      await grpcCheckIn(sys.serviceUrls?.servers as string, serverId);
      const acked = nowMs();
      let replayId: string | undefined;
      while (replayId === undefined) {
        replayId = await tenant.rpc
          .startRecording({ serverId, integration: "bench" })
          .then((r) => r.replayId)
          .catch(() => {
            refusedStarts++;
            return undefined;
          });
      }
      checkInToStart.push(nowMs() - acked);
      if ((await marker({ serverId })).body?.replayId === replayId) pinned++;
      await tenant.finish(replayId);
      replays.push(replayId);
    }

    progress("finish to delivery x 30");
    const f2d = summarize(await finishToDelivery(tenant, receiver, { count: 30 }));

    // Landing creates spread over the finished replays (500 markers each at most).
    let next = 0;
    const hit = () => marker({ replayId: replays[next++ % replays.length] as string });
    const missReplay = () => marker({ replayId: randomUUID() });
    const missServer = () => marker({ serverId: servers[next++ % servers.length] as string });
    const expectStatus = (status: number) => (res: { status: number; text: string }) => {
      if (res.status !== status) throw new Error(`expected ${status}, got ${res.status} ${res.text}`);
    };

    progress(`one caller: ${SEQUENTIAL} creates of each kind`);
    const sequential = async (call: () => Promise<{ status: number; text: string }>, status: number) => {
      const samples: number[] = [];
      for (let i = 0; i < SEQUENTIAL; i++) {
        const t0 = performance.now();
        expectStatus(status)(await call());
        samples.push(performance.now() - t0);
      }
      return summarize(samples);
    };
    const one = {
      hit: await sequential(hit, 201),
      missReplay: await sequential(missReplay, 404),
      missServer: await sequential(missServer, 404),
    };

    const transactions = async () => {
      const { rows } = await stats.query<{ n: string }>(
        "SELECT xact_commit + xact_rollback AS n FROM pg_stat_database WHERE datname = current_database()",
      );
      return Number(rows[0]?.n);
    };
    const windowOf = async (call: (() => Promise<{ status: number; text: string }>) | undefined, status = 0) => {
      await sleep(STATS_SETTLE_MS);
      const before = await transactions();
      const samples: number[] = [];
      const until = performance.now() + WINDOW_MS;
      if (call) {
        await Promise.all(
          Array.from({ length: CONCURRENCY }, async () => {
            while (performance.now() < until) {
              const t0 = performance.now();
              expectStatus(status)(await call());
              samples.push(performance.now() - t0);
            }
          }),
        );
      } else await sleep(WINDOW_MS);
      await sleep(STATS_SETTLE_MS);
      // The reading itself is one transaction.
      const spent = (await transactions()) - before - 1;
      return {
        requests: samples.length,
        perSecond: samples.length / (WINDOW_MS / 1000),
        latency: summarize(samples),
        transactions: spent,
      };
    };
    progress(
      `${CONCURRENCY} callers, ${WINDOW_MS / 1000} s each: idle, landing, missing a replay, missing a recording`,
    );
    const idle = await windowOf(undefined);
    const many: Record<string, Window> = {
      hit: await windowOf(hit, 201),
      missReplay: await windowOf(missReplay, 404),
      missServer: await windowOf(missServer, 404),
    };
    const perRequest = (w: Window) => Math.max(0, w.transactions - idle.transactions) / w.requests;

    const missRatio = Math.max(many.missReplay.latency.p50, many.missServer.latency.p50) / many.hit.latency.p50;
    const missRatioOne = Math.max(one.missReplay.p50, one.missServer.p50) / one.hit.p50;
    const missTransactions = Math.max(perRequest(many.missReplay), perRequest(many.missServer));
    const rows = [
      [
        "check-in -> start",
        checkInToStart.length,
        summarize(checkInToStart).p50,
        summarize(checkInToStart).p99,
        "-",
        "-",
      ],
      ["finish -> delivery", f2d.n, f2d.p50, f2d.p99, "-", "-"],
      ...(["hit", "missReplay", "missServer"] as const).flatMap((kind) => [
        [`${kind} (1)`, one[kind].n, one[kind].p50, one[kind].p99, "-", "-"],
        [
          `${kind} (${CONCURRENCY})`,
          many[kind].requests,
          many[kind].latency.p50,
          many[kind].latency.p99,
          round(many[kind].perSecond, 0),
          round(perRequest(many[kind]), 2),
        ],
      ]),
    ].map((row) => row.map((cell) => (typeof cell === "number" ? String(round(cell, 2)) : String(cell))));
    process.stdout.write(
      `latency benchmark: each call made when the one before was acknowledged; distributed system, one tenant\n` +
        `idle system: ${idle.transactions} transactions in ${WINDOW_MS / 1000} s (subtracted)\n\n`,
    );
    process.stdout.write(`${formatTable(["path", "n", "p50 ms", "p99 ms", "req/s", "transactions/req"], rows)}\n\n`);
    process.stdout.write(
      `starts refused right after a check-in: ${refusedStarts} of ${SESSIONS}; markers by server id on the new recording: ${pinned} of ${SESSIONS}\n` +
        `miss p50 / landing p50: ${round(missRatio, 2)} at ${CONCURRENCY} callers, ${round(missRatioOne, 2)} at 1 (target <= ${MISS_RATIO_TARGET})\n` +
        `transactions per miss: ${round(missTransactions, 2)} (target <= ${MISS_TRANSACTIONS_TARGET})\n`,
    );
    const result = {
      bench: "latency",
      ratio: { [String(CONCURRENCY)]: round(missRatio, 2), "1": round(missRatioOne, 2) },
      target: {
        missRatio: MISS_RATIO_TARGET,
        missTransactions: MISS_TRANSACTIONS_TARGET,
        met: missRatio <= MISS_RATIO_TARGET && missTransactions <= MISS_TRANSACTIONS_TARGET && refusedStarts === 0,
      },
      missTransactions: round(missTransactions, 2),
      refusedStarts,
      checkInToStart: summarize(checkInToStart),
      finishToDelivery: f2d,
      one,
      many,
    };
    const file = await writeResults("latency", result, startedAt);
    process.stdout.write(`results: ${file}\n`);
    process.stdout.write(
      `${JSON.stringify({ bench: result.bench, ratio: result.ratio, target: result.target, missTransactions: result.missTransactions })}\n`,
    );
  } finally {
    await stats.end();
    await sys.stop();
    await receiver.stop();
    await rm(work, { recursive: true, force: true });
  }
}
