import { randomUUID } from "node:crypto";
import { ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { expect } from "vitest";
import { RecordingService } from "../gen/replay/replays/v1/recording_pb.js";
import { provisionTenant, send, sendSigned } from "./http.js";
import { pollUntil } from "./poll.js";
import { grpcCheckIn } from "./recorder.js";
import type { SystemHandle } from "./system.js";

// A tenant of a running system with what the webhook tests share: signed calls, a subscription, a
// finished replay (collection.finalized), the delivery log.

export type Delivery = {
  id: string;
  subscription_id: string;
  event_id: string;
  event: string;
  status: string;
  retry_count: number;
  attempts: { attempt: number; trigger: string; status_code: number | null; error: string | null }[];
  last_status_code: number | null;
  last_error: string | null;
  next_attempt_at: string | null;
};

/** A tenant of `sys` with the helpers the tests below share. */
export async function tenantOn(sys: Pick<SystemHandle, "baseUrl" | "internalUrl" | "admin">) {
  const recording = createClient(RecordingService, createGrpcTransport({ baseUrl: sys.internalUrl }));
  const t = await provisionTenant(sys, { rateLimitRps: 5000, rateLimitBurst: 5000, serverLimit: 100n });
  const signed = (method: string, path: string, body?: unknown) =>
    sendSigned(sys.baseUrl, t.signer, method, path, { body });
  async function subscribe(url: string, events: string[]): Promise<{ id: string; secret: string }> {
    const res = await signed("POST", "/v1/webhooks", { url, events });
    expect(res.status, res.text).toBe(201);
    return res.body;
  }
  /** A finished replay (collection.finalized) on a server of its own. */
  async function finishedReplay(): Promise<{ serverId: string; replayId: string }> {
    const created = await send(sys.baseUrl, "POST", "/v1/api/servers", {
      headers: t.bearer(),
      body: { name: `srv-${randomUUID().slice(0, 8)}` },
    });
    expect(created.status, created.text).toBe(201);
    const serverId: string = created.body.serverId;
    await grpcCheckIn(sys.internalUrl, serverId, { pluginVersion: "1.0.0" });
    const started = await pollUntil(
      () => recording.startRecording({ serverId }).catch((err) => ConnectError.from(err)),
      (r) => !(r instanceof ConnectError),
      10_000,
    );
    const { replayId } = started as { replayId: string };
    await recording.finishRecording({ replayId, sizeBytes: 1024n, formatVersion: 1 });
    return { serverId, replayId };
  }
  async function deliveries(subscriptionId: string, query = "?page_size=100"): Promise<Delivery[]> {
    const res = await signed("GET", `/v1/webhooks/${subscriptionId}/deliveries${query}`);
    expect(res.status, res.text).toBe(200);
    return res.body.results;
  }
  async function waitDelivery(subscriptionId: string, done: (d: Delivery) => boolean, timeoutMs = 15_000) {
    const found = await pollUntil(
      async () => (await deliveries(subscriptionId)).find(done),
      (d) => d !== undefined,
      timeoutMs,
      100,
    );
    return found as Delivery;
  }
  return { ...t, signed, subscribe, finishedReplay, deliveries, waitDelivery };
}
