import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { freePorts } from "./free-port.js";
import { provisionTenant, sendSigned } from "./http.js";
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from "./otlp-receiver.js";
import { pollUntil } from "./poll.js";
import { recordingOnNewServer } from "./recorder.js";
import { distributedSkipReason, type System, startDistributedSystem, startEmbeddedSystem } from "./system.js";
import { startWebhookReceiver, type WebhookReceiver } from "./webhook-receiver.js";

// Trace context (W3C traceparent): one request followed by its trace id through the logs of the
// gateway, the service it calls, the outbox relay, the consumers of the event it caused and the
// webhook delivery of that event, in both run modes (LOG_LEVEL=debug shows every hop); and the same
// hops as OpenTelemetry spans, each the child of the one before, at a stand-in OTLP collector.

// The client's trace, one per mode: both modes' spans reach the one collector.
const CLIENT_SPAN = "b7ad6b7169203331";
const traceIds = { embedded: "0af7651916cd43dd8448eb211c80319c", distributed: "4bf92f3577b34da6a3ce929d0e0e4736" };
// OTLP's SpanKind numbers.
const SERVER = 2;
const CLIENT = 3;
const CONSUMER = 5;

let receiver: WebhookReceiver;
let receiverPort: number;
let collector: OtlpReceiver;
beforeAll(async () => {
  collector = await startOtlpReceiver();
  [receiverPort] = (await freePorts(1)) as [number];
  receiver = await startWebhookReceiver({ port: receiverPort, certDir: inject("webhookReceiver").certDir });
});
afterAll(async () => {
  await receiver?.close();
  await collector?.close();
});

const skip = distributedSkipReason();
const modes: { mode: string; start: (env: Record<string, string>) => Promise<System>; skip?: string }[] = [
  { mode: "embedded", start: (env) => startEmbeddedSystem(env) },
  { mode: "distributed", start: (env) => startDistributedSystem({ env }), skip },
];

describe.each(modes)(
  "a request's trace through the logs and spans ($mode mode)",
  ({ mode, start, skip: skipReason }) => {
    it.skipIf(skipReason)(
      "carries the client's trace id from the gateway to the webhook delivery",
      async () => {
        const TRACE_ID = traceIds[mode as keyof typeof traceIds];
        const TRACEPARENT = `00-${TRACE_ID}-${CLIENT_SPAN}-01`;
        const certDir = inject("webhookReceiver").certDir;
        const dataDir = await mkdtemp(join(tmpdir(), "replay-trace-"));
        const sys = await start({
          LOG_LEVEL: "debug",
          DATA_DIR: dataDir,
          WEBHOOK_ALLOW_TARGETS: `127.0.0.1:${receiverPort}`,
          WEBHOOK_CA_FILE: join(certDir, "cert.pem"),
          OTEL_EXPORTER_OTLP_ENDPOINT: collector.endpoint,
          OTEL_BSP_SCHEDULE_DELAY: "100",
        });
        try {
          const t = await provisionTenant(sys, { serverLimit: 5n });
          const path = receiver.newPath();
          const sub = await sendSigned(sys.baseUrl, t.signer, "POST", "/v1/webhooks", {
            body: { url: receiver.url(path), events: ["asset.deleted"] },
          });
          expect(sub.status, sub.text).toBe(201);
          const { replayId } = await recordingOnNewServer(sys, t.bearer(), "traced");

          // The traced request: its delete emits replay.deleted (markers drop the replay's markers) and
          // asset.deleted (webhooks deliver it).
          const deleted = await sendSigned(sys.baseUrl, t.signer, "DELETE", `/v1/replays/${replayId}`, {
            headers: { traceparent: TRACEPARENT },
          });
          expect(deleted.status, deleted.text).toBe(204);
          const [delivery] = await receiver.waitForRequests(path, 1, 15_000);
          expect(delivery?.headers["x-fv-event"]).toBe("asset.deleted");

          const hops = () => {
            const lines = sys
              .output()
              .split("\n")
              .flatMap((line) => {
                try {
                  return [JSON.parse(line) as Record<string, unknown>];
                } catch {
                  return [];
                }
              });
            return lines.filter((line) => line.trace_id === TRACE_ID);
          };
          const traced = await pollUntil(
            async () => hops(),
            // The webhook's first attempt may come before its fan-out is applied (it is made first).
            (lines) =>
              lines.some((line) => line.msg === "delivery attempt") &&
              ["webhooks_replays", "markers_replays"].every((durable) =>
                lines.some((line) => line.msg === "applied event" && line.durable === durable),
              ),
            10_000,
            100,
          ).catch(() => hops());
          const seen = (name: string, msg: string, fields: Record<string, unknown> = {}) =>
            traced.some(
              (line) =>
                line.name === name && line.msg === msg && Object.entries(fields).every(([k, v]) => line[k] === v),
            );
          const summary = traced.map((line) => `${line.name} ${line.msg}`).join("\n");
          expect(
            seen("gateway:access", "request", {
              route: "/v1/replays/:id",
              status: 204,
              requestId: deleted.headers.get("x-request-id"),
            }),
            summary,
          ).toBe(true);
          expect(seen("lib:rpc:server", "rpc", { method: "DeleteReplay", code: "ok" }), summary).toBe(true);
          expect(seen("lib:bus:outbox", "published", { subject: "replays.asset.deleted" }), summary).toBe(true);
          expect(
            seen("lib:bus:consumer", "applied event", {
              durable: "webhooks_replays",
              subject: "replays.asset.deleted",
            }),
            summary,
          ).toBe(true);
          expect(
            seen("lib:bus:consumer", "applied event", {
              durable: "markers_replays",
              subject: "replays.replay.deleted",
            }),
            summary,
          ).toBe(true);
          expect(
            seen("webhooks:delivery", "delivery attempt", { event: "asset.deleted", outcome: "succeeded" }),
            summary,
          ).toBe(true);
          // Inside the service, its lines carry the request id next to the trace id.
          expect(traced.find((line) => line.msg === "rpc")?.requestId).toBe(deleted.headers.get("x-request-id"));

          // The spans: each hop the child of the hop that caused it, from the client's span down.
          // Each process exports in batches, and a consumer's span ends after its commit, so the
          // delivery it caused can be exported first: wait for every span asserted below.
          const expected = [
            "DELETE /v1/replays/:id",
            "replay.replays.v1.ReplaysService/DeleteReplay",
            "webhooks_replays replays.asset.deleted",
            "markers_replays replays.replay.deleted",
            "webhook asset.deleted",
          ];
          const spans = await pollUntil(
            async () => collector.spans().filter((span) => span.traceId === TRACE_ID),
            (found) => expected.every((name) => found.some((span) => span.name === name)),
            10_000,
            100,
          ).catch(() => collector.spans().filter((span) => span.traceId === TRACE_ID));
          const tree = spans
            .map((span) => `${span.service} ${span.name} ${span.spanId} <- ${span.parentSpanId}`)
            .join("\n");
          const span = (name: string, parent: ReceivedSpan | string): ReceivedSpan => {
            const parentId = typeof parent === "string" ? parent : parent.spanId;
            const found = spans.find((s) => s.name === name && s.parentSpanId === parentId);
            expect(found, `${name} <- ${parentId} in\n${tree}`).toBeDefined();
            return found as ReceivedSpan;
          };
          const service = (name: string) => (mode === "embedded" ? "replay" : `replay-${name}`);
          const request = span("DELETE /v1/replays/:id", CLIENT_SPAN);
          expect(request).toMatchObject({ kind: SERVER, service: service("gateway") });
          expect(request.attributes).toMatchObject({
            "http.request.method": "DELETE",
            "http.response.status_code": 204,
          });
          const rpc = span("replay.replays.v1.ReplaysService/DeleteReplay", request);
          expect(rpc).toMatchObject({ kind: SERVER, service: service("replays") });
          expect(rpc.attributes).toMatchObject({ "rpc.system": "connect_rpc", "rpc.method": "DeleteReplay" });
          const fanOut = span("webhooks_replays replays.asset.deleted", rpc);
          expect(fanOut).toMatchObject({ kind: CONSUMER, service: service("webhooks") });
          expect(span("markers_replays replays.replay.deleted", rpc).service).toBe(service("markers"));
          const hook = span("webhook asset.deleted", fanOut);
          expect(hook).toMatchObject({ kind: CLIENT, service: service("webhooks") });
          expect(hook.attributes).toMatchObject({
            "webhook.outcome": "succeeded",
            "http.response.status_code": 200,
          });
        } finally {
          await sys.stop();
          await rm(dataDir, { recursive: true, force: true });
        }
      },
      120_000,
    );
  },
);
