// The scale benchmark's tenants as users and recorders drive them: a new tenant with a webhook
// subscription to the bench's receiver (scale-receiver.ts) and a connected server, whose recordings
// are started and finished through the internal RecordingService as recorder infrastructure does
// (test/recorder.ts); the finish produces collection.finalized (decisions.md §7), which the
// subscription receives. Also the finish-to-delivery and retry measurements built on it.
import { type Client, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import type pg from "pg";
import { RecordingService } from "../../gen/replay/replays/v1/recording_pb.js";
import { provisionTenant, send, sendSigned } from "../http.js";
import { grpcCheckIn } from "../recorder.js";
import type { System } from "../system.js";
import type { ChildServer } from "./child-server.js";
import { nowMs, sleep } from "./scale-measure.js";

export type Arrival = { path: string; eventId: string; status: number; atMs: number };

/** Resolves once `n` requests naming `replayId` reached the receiver (or after its 60 s wait, with those that did). */
export async function arrivals(receiver: ChildServer, replayId: string, n: number): Promise<Arrival[]> {
  const res = await fetch(`${receiver.url}/wait?replay=${replayId}&n=${n}`, { signal: AbortSignal.timeout(70_000) });
  return (await res.json()) as Arrival[];
}

export type RecordingTenant = Awaited<ReturnType<typeof provisionTenant>> & {
  subscriptionId: string;
  serverId: string;
  /** Starts a recording on the tenant's server (the previous one finished); resolves to its replay id. */
  start(): Promise<string>;
  finish(replayId: string): Promise<void>;
  /** Every replay recorded so far. */
  replayIds: string[];
  /** RecordingService on the gateway's internal port, as recorder infrastructure calls it. */
  rpc: Client<typeof RecordingService>;
};

/** A new tenant (unthrottled), subscribed to collection.finalized at `url`, with one connected server. */
export async function recordingTenant(sys: System, url: string, serverLimit = 10n): Promise<RecordingTenant> {
  const tenant = await provisionTenant(sys, { rateLimitRps: 1_000_000, rateLimitBurst: 1_000_000, serverLimit });
  const sub = await sendSigned(sys.baseUrl, tenant.signer, "POST", "/v1/webhooks", {
    body: { url, events: ["collection.finalized"] },
  });
  if (sub.status !== 201) throw new Error(`POST /v1/webhooks: ${sub.status} ${sub.text}`);
  const created = await send(sys.baseUrl, "POST", "/v1/api/servers", {
    headers: tenant.bearer(),
    body: { name: "bench-scale" },
  });
  if (created.status !== 201) throw new Error(`POST /v1/api/servers: ${created.status} ${created.text}`);
  const serverId = created.body.serverId as string;
  await grpcCheckIn(sys.internalUrl, serverId, { pluginVersion: "1.0.0" });
  const rpc = createClient(RecordingService, createGrpcTransport({ baseUrl: sys.internalUrl }));
  const replayIds: string[] = [];
  return {
    ...tenant,
    subscriptionId: sub.body.id as string,
    serverId,
    replayIds,
    rpc,
    async start() {
      const { replayId } = await rpc.startRecording({ serverId, integration: "bench" });
      replayIds.push(replayId);
      return replayId;
    },
    async finish(replayId) {
      await rpc.finishRecording({ replayId, sizeBytes: 1n });
    },
  };
}

/** Finish-to-delivery: from the FinishRecording call to collection.finalized's receipt, ms each. */
export async function finishToDelivery(
  tenant: RecordingTenant,
  receiver: ChildServer,
  opts: { count: number; untilMs?: number },
): Promise<number[]> {
  const samples: number[] = [];
  while (samples.length < opts.count && (opts.untilMs === undefined || performance.now() < opts.untilMs)) {
    const replayId = await tenant.start();
    const sentAt = nowMs();
    await tenant.finish(replayId);
    const got = await arrivals(receiver, replayId, 1);
    if (!got[0]) throw new Error(`collection.finalized of ${replayId} did not arrive within 60 s`);
    samples.push(got[0].atMs - sentAt);
  }
  return samples;
}

/**
 * The retry path on a subscription whose receiver answers 500 to each delivery's first attempt and
 * 200 to its second: per delivery, the time from the first attempt's arrival to the second's
 * (`raw`, the schedule's wait included), and from when the worker scheduled the second
 * (next_attempt_at, read from the delivery once the first attempt is recorded) to its arrival
 * (`late`: the worker's wake-up, claim and send).
 */
export async function retryPath(
  tenant: RecordingTenant,
  receiver: ChildServer,
  db: pg.Client,
  count: number,
): Promise<{ raw: number[]; late: number[] }> {
  const raw: number[] = [];
  const late: number[] = [];
  for (let i = 0; i < count; i++) {
    const replayId = await tenant.start();
    await tenant.finish(replayId);
    const [first] = await arrivals(receiver, replayId, 1);
    if (!first) throw new Error(`the first attempt for ${replayId} did not arrive within 60 s`);
    let scheduledMs: number | undefined;
    const deadline = performance.now() + 5_000;
    while (scheduledMs === undefined && performance.now() < deadline) {
      const { rows } = await db.query<{ next_attempt_at: Date | null; automatic_attempts: number }>(
        `SELECT next_attempt_at, automatic_attempts FROM webhooks.delivery
          WHERE subscription_id = $1 AND event_id = $2`,
        [tenant.subscriptionId, first.eventId],
      );
      const row = rows[0];
      if (row && row.automatic_attempts >= 1) {
        if (row.next_attempt_at) scheduledMs = row.next_attempt_at.getTime();
        break;
      }
      await sleep(5);
    }
    const both = await arrivals(receiver, replayId, 2);
    const second = both[1];
    if (!second) throw new Error(`the retry for ${replayId} did not arrive within 60 s`);
    raw.push(second.atMs - first.atMs);
    if (scheduledMs !== undefined) late.push(second.atMs - scheduledMs);
  }
  return { raw, late };
}
