import { randomUUID } from "node:crypto";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { RecordingService } from "../gen/replay/replays/v1/recording_pb.js";
import { metricValue } from "../lib/_testing.js";
import { provisionTenant, send, sendSigned } from "./http.js";
import { pollUntil } from "./poll.js";
import { recordingOnNewServer } from "./recorder.js";
import { sharedSystems } from "./shared-system.js";
import { startWebhookReceiver, type WebhookReceiver } from "./webhook-receiver.js";

// GET /metrics on every process's internal port (Prometheus text format): each family is there, and
// moves when its thing happens. The outbox backlog and consumer lag, which a running system clears
// too fast to catch, are also held to their values in lib/bus's tests.

let receiver: WebhookReceiver;
beforeAll(async () => {
  const { metricsPort, certDir } = inject("webhookReceiver");
  receiver = await startWebhookReceiver({ port: metricsPort, certDir });
});
afterAll(async () => {
  await receiver?.close();
});

describe.each(sharedSystems())("metrics ($mode mode)", (sys) => {
  const recording = createClient(RecordingService, createGrpcTransport({ baseUrl: sys.internalUrl }));
  /** Each process's internal address: the gateway's, and each service's own (the same process when embedded). */
  const processes = { gateway: sys.internalUrl, ...(sys.serviceUrls ?? {}) } as Record<string, string>;
  const serviceOf = (name: string) => processes[name] ?? sys.internalUrl;
  const scrape = async (url: string) => {
    const res = await send(url, "GET", "/metrics");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
    return res.text;
  };

  it("serves every family on every process's internal port, with Node's process metrics", async () => {
    for (const [name, url] of Object.entries(processes)) {
      const text = await scrape(url);
      for (const family of [
        "process_cpu_seconds_total",
        "nodejs_heap_size_used_bytes",
        "replay_outbox_backlog",
        "replay_outbox_oldest_unpublished_age_seconds",
      ]) {
        expect(metricValue(text, family), `${name} ${family}`).toBeDefined();
      }
      // No tenant id, or any other id, ever becomes a label value.
      expect(text, name).not.toMatch(/="[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"/);
    }
    expect(
      metricValue(await scrape(serviceOf("webhooks")), "replay_consumer_pending", { durable: "webhooks_replays" }),
    ).toBeDefined();
    expect(
      metricValue(await scrape(serviceOf("webhooks")), "replay_webhook_queue_depth", { due: "now" }),
    ).toBeDefined();
  });

  it("leaves the kubelet's probes out of the request metric (they are not API requests)", async () => {
    for (const path of ["/healthz", "/readyz"]) expect((await send(sys.baseUrl, "GET", path)).status).toBe(200);
    const text = await scrape(sys.internalUrl);
    for (const route of ["/healthz", "/readyz"])
      expect(metricValue(text, "replay_http_request_duration_seconds_count", { route }) ?? 0, route).toBe(0);
  });

  it("counts HTTP requests by route pattern, RPCs by method and code, and rate-limit refusals", async () => {
    const t = await provisionTenant(sys, { rateLimitRps: 1, rateLimitBurst: 2 });
    const http = { route: "/v1/api/servers/:id", method: "PATCH", status: "404" };
    const rpc = { service: "replay.servers.v1.ServersService", method: "RenameServer", code: "not_found" };
    const before = { gateway: await scrape(sys.internalUrl), servers: await scrape(serviceOf("servers")) };

    const renamed = await send(sys.baseUrl, "PATCH", `/v1/api/servers/${randomUUID()}`, {
      headers: t.bearer(),
      body: { name: "x" },
    });
    expect(renamed.status).toBe(404);
    // Until the bucket is empty (its size per replica depends on the replicas): each 429 counts once.
    let refused = 0;
    for (let i = 0; i < 4; i++) {
      const res = await send(sys.baseUrl, "GET", "/v1/api/servers", { headers: t.bearer() });
      if (res.status === 429) refused++;
    }
    expect(refused).toBeGreaterThan(0);

    const after = { gateway: await scrape(sys.internalUrl), servers: await scrape(serviceOf("servers")) };
    const moved = (
      text: { gateway: string; servers: string },
      name: string,
      labels: Record<string, string>,
      on: "gateway" | "servers",
    ) => metricValue(text[on], name, labels) ?? 0;
    const delta = (name: string, labels: Record<string, string>, on: "gateway" | "servers") =>
      moved(after, name, labels, on) - moved(before, name, labels, on);
    expect(delta("replay_http_request_duration_seconds_count", http, "gateway")).toBe(1);
    expect(delta("replay_http_request_duration_seconds_bucket", { ...http, le: "+Inf" }, "gateway")).toBe(1);
    expect(delta("replay_rpc_server_duration_seconds_count", rpc, "servers")).toBe(1);
    expect(delta("replay_rate_limit_refusals_total", { route: "/v1/api/servers" }, "gateway")).toBe(refused);
    // Route patterns only: the id in the path is nowhere.
    expect(after.gateway).not.toContain(renamed.headers.get("x-request-id") ?? "none");
  });

  it("counts webhook attempts by outcome and times them", async () => {
    const t = await provisionTenant(sys, { rateLimitRps: 1000, rateLimitBurst: 1000, serverLimit: 10n });
    const webhooks = serviceOf("webhooks");
    const outcome = (text: string, labels: Record<string, string>) =>
      metricValue(text, "replay_webhook_attempt_duration_seconds_count", labels) ?? 0;
    const before = await scrape(webhooks);

    const path = receiver.newPath();
    const sub = await sendSigned(sys.baseUrl, t.signer, "POST", "/v1/webhooks", {
      body: { url: receiver.url(path), events: ["collection.finalized"] },
    });
    expect(sub.status, sub.text).toBe(201);
    const { replayId } = await recordingOnNewServer(sys, t.bearer(), "metrics");
    await recording.finishRecording({ replayId, sizeBytes: 1n });
    await receiver.waitForRequests(path, 1, 15_000);

    const after = await pollUntil(
      () => scrape(webhooks),
      (text) =>
        outcome(text, { outcome: "succeeded", trigger: "automatic" }) >
        outcome(before, { outcome: "succeeded", trigger: "automatic" }),
      10_000,
      100,
    );
    expect(metricValue(after, "replay_webhook_attempt_duration_seconds_sum")).toBeGreaterThan(0);
  });
});
