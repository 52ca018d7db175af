import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import {
  createReplayClient,
  verifyWebhook,
  WEBHOOK_EVENT_NAMES,
  type WebhookEvent,
  type WebhookEventName,
  type WebhookEventOf,
} from "@replay/client";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { AssetState, RecordingService } from "../gen/replay/replays/v1/recording_pb.js";
import { WEBHOOK_EVENTS } from "../lib/vocabulary.js";
import { webhookSignature } from "../services/webhooks/delivery/signature.js";
import { provisionTenant, send } from "./http.js";
import { openApiValidator } from "./openapi-validator.js";
import { pollUntil } from "./poll.js";
import { recordingOnNewServer } from "./recorder.js";
import { sharedSystems } from "./shared-system.js";
import { startWebhookReceiver, type WebhookReceiver } from "./webhook-receiver.js";

// The client package's webhook side on real deliveries of all eight events, in both modes: a
// subscription made with the package's signed client, three replays driven through their lifecycle
// over internal gRPC, and every delivery verified with verifyWebhook, validated against the served
// document's WebhookEvent schema, and read through the package's discriminated union.

let receiver: WebhookReceiver;
beforeAll(async () => {
  const { clientPort, certDir } = inject("webhookReceiver");
  receiver = await startWebhookReceiver({ port: clientPort, certDir });
});
afterAll(async () => {
  await receiver?.close();
});

/** The replay an event is about, read where its type says it is: a compile-time check of the union. */
function replayOf(event: WebhookEvent): string {
  switch (event.event) {
    case "collection.finalized":
    case "collection.released":
    case "collection.revoked":
      return event.data.collection.replay_id;
    case "asset.processing":
    case "asset.ready":
    case "asset.failed":
    case "asset.expired":
    case "asset.deleted":
      return event.data.asset.replay_id;
    default: {
      const never: never = event;
      throw new Error(`unknown event ${JSON.stringify(never)}`);
    }
  }
}

/** The state the event says it moved its collection or asset to (the part after the dot). */
function stateOf(event: WebhookEvent): string {
  return "collection" in event.data ? event.data.collection.state : event.data.asset.state;
}

type Received = { raw: Buffer; headers: Record<string, string | string[] | undefined>; event: WebhookEvent };

describe("the package's webhook types", () => {
  it("name the eight events of the contract", () => {
    expect([...WEBHOOK_EVENT_NAMES]).toEqual([...WEBHOOK_EVENTS]);
  });

  it("narrow data to the event's collection or asset (tsc, npm run lint, refuses the other)", () => {
    // Never called: each line is a compile-time check, and an unused @ts-expect-error fails tsc too.
    const misuses = [
      // @ts-expect-error: an asset.* event carries data.asset, not data.collection
      (e: WebhookEventOf<"asset.ready">) => e.data.collection,
      // @ts-expect-error: a collection.* event carries data.collection, not data.asset
      (e: WebhookEvent) => e.event === "collection.revoked" && e.data.asset,
      // @ts-expect-error: not one of the eight
      (): WebhookEventName => "asset.created",
    ];
    expect(misuses).toHaveLength(3);
  });
});

describe.each(sharedSystems())("the client package on real deliveries of the eight events ($mode mode)", (sys) => {
  let secret: string;
  let received: Received[];
  /** The events each replay must have sent, as `event replay` lines. */
  let expected: string[];
  let validator: ReturnType<typeof openApiValidator>;
  let doc: any;
  /** What the rotation test below needs: the signed client, the subscription, its receiver path, a tenant's key. */
  let client: ReturnType<typeof createReplayClient>;
  let subscriptionId: string;
  let path: string;
  let bearer: Record<string, string>;

  beforeAll(async () => {
    const served = await send(sys.baseUrl, "GET", "/openapi.json");
    expect(served.status).toBe(200);
    doc = served.body;
    validator = openApiValidator(doc);

    const t = await provisionTenant(sys, { rateLimitRps: 1000, rateLimitBurst: 1000, serverLimit: 10n });
    bearer = t.bearer();
    client = createReplayClient({ baseUrl: sys.baseUrl, signingKey: t.signer });
    path = receiver.newPath();
    const created = await client.POST("/v1/webhooks", {
      body: { url: receiver.url(path), events: [...WEBHOOK_EVENT_NAMES] },
    });
    expect(created.error).toBeUndefined();
    secret = created.data?.secret ?? "";
    subscriptionId = created.data?.id ?? "";

    // Which call makes which event: services/replays/lifecycle.ts and recording-service.ts
    // (decisions.md §7's table), replays-service.ts deleteReplay for asset.deleted.
    const recording = createClient(RecordingService, createGrpcTransport({ baseUrl: sys.internalUrl }));
    const a = (await recordingOnNewServer(sys, t.bearer(), "client-webhooks-a")).replayId;
    const b = (await recordingOnNewServer(sys, t.bearer(), "client-webhooks-b")).replayId;
    const c = (await recordingOnNewServer(sys, t.bearer(), "client-webhooks-c")).replayId;
    await recording.finishRecording({ replayId: a, sizeBytes: 4096n, formatVersion: 2 }); // collection.finalized
    await recording.setAssetState({ replayId: a, state: AssetState.PROCESSING }); // asset.processing
    await recording.setAssetState({ replayId: a, state: AssetState.READY }); // asset.ready
    await recording.releaseCollection({ replayId: a }); // collection.released
    await recording.revokeCollection({ replayId: a }); // collection.revoked
    await recording.expireReplay({ replayId: a }); // asset.expired
    await recording.finishRecording({ replayId: b }); // collection.finalized
    await recording.setAssetState({ replayId: b, state: AssetState.PROCESSING }); // asset.processing
    await recording.setAssetState({ replayId: b, state: AssetState.FAILED }); // asset.failed
    // Still recording when deleted: the asset's size and format version are null.
    const deleted = await client.DELETE("/v1/replays/{id}", { params: { path: { id: c } } }); // asset.deleted
    expect(deleted.response.status).toBe(204);
    const ofA = [
      ...["collection.finalized", "asset.processing", "asset.ready"],
      ...["collection.released", "collection.revoked", "asset.expired"],
    ];
    const ofB = ["collection.finalized", "asset.processing", "asset.failed"];
    expected = [...ofA.map((e) => `${e} ${a}`), ...ofB.map((e) => `${e} ${b}`), `asset.deleted ${c}`].sort();

    // An event may arrive more than once (the contract's at-least-once): one of each event id.
    const requests = await pollUntil(
      async () => receiver.requests(path),
      (got) => new Set(got.map((r) => r.headers["x-fv-event-id"])).size >= expected.length,
      60_000,
      100,
    );
    const byId = new Map(requests.map((r) => [String(r.headers["x-fv-event-id"]), r]));
    received = [...byId.values()].map((r) => {
      const verified = verifyWebhook(r.raw, r.headers, secret);
      if (!verified.ok) throw new Error(`a real delivery was refused: ${verified.reason}`);
      return { raw: r.raw, headers: r.headers, event: verified.event };
    });
  }, 120_000);

  it("verifies every delivery and parses its body, all eight events among them", () => {
    for (const { raw, headers, event } of received) {
      expect(event).toEqual(JSON.parse(raw.toString("utf8")));
      expect(headers["x-fv-event"]).toBe(event.event);
      expect(headers["x-fv-event-id"]).toBe(event.event_id);
    }
    expect(new Set(received.map((r) => r.event.event))).toEqual(new Set(WEBHOOK_EVENTS));
  });

  it("holds every body to the served document's WebhookEvent schema and to its own event's", () => {
    const violations = received.flatMap(({ event }) => [
      ...validator.schemaViolations({ $ref: "#/components/schemas/WebhookEvent" }, event),
      ...validator.schemaViolations(
        doc.webhooks[event.event].post.requestBody.content["application/json"].schema,
        event,
      ),
    ]);
    expect(violations).toEqual([]);
  });

  it("reads each event's replay and state from data.collection or data.asset, as its type says", () => {
    expect(received.map(({ event }) => `${event.event} ${replayOf(event)}`).sort()).toEqual(expected);
    for (const { event } of received) {
      expect(stateOf(event), event.event).toBe(event.event.split(".")[1]);
      expect(event.tenant_id).toBe(received[0]?.event.tenant_id);
    }
    const deleted = received.find((r) => r.event.event === "asset.deleted")?.event as WebhookEventOf<"asset.deleted">;
    expect(deleted.data.asset).toMatchObject({ status: "recording", size_bytes: null, format_version: null });
    const expired = received.find((r) => r.event.event === "asset.expired")?.event as WebhookEventOf<"asset.expired">;
    expect(expired.data.asset).toMatchObject({ status: "expired", size_bytes: 4096, format_version: 2 });
    const revoked = received.find((r) => r.event.event === "collection.revoked")
      ?.event as WebhookEventOf<"collection.revoked">;
    expect(revoked.data.collection).toMatchObject({ revoked: true, visibility: "staff", status: "ready" });
  });

  it("refuses each delivery with one byte changed, under another secret, and signed 301 s ago", () => {
    for (const { raw, headers } of received) {
      const tampered = Buffer.from(raw);
      tampered[tampered.length - 2] ^= 1;
      expect(verifyWebhook(tampered, headers, secret)).toEqual({ ok: false, reason: "bad-signature" });
      expect(verifyWebhook(raw, headers, `whsec_${"A".repeat(43)}`)).toEqual({ ok: false, reason: "bad-signature" });
      const signedAt = (timestampS: number) => ({
        ...headers,
        "x-fv-timestamp": String(timestampS),
        "x-fv-signature": webhookSignature(secret, timestampS, raw),
      });
      const nowS = Math.floor(Date.now() / 1000);
      expect(verifyWebhook(raw, signedAt(nowS - 301), secret)).toEqual({ ok: false, reason: "stale-timestamp" });
      // The same body signed now passes: only the age was refused.
      expect(verifyWebhook(raw, signedAt(nowS), secret).ok).toBe(true);
    }
  });

  it("during a rotation's overlap accepts a delivery with the new secret, the old or both, through either header", async () => {
    const rotated = await client.POST("/v1/webhooks/{id}/rotate-secret", {
      params: { path: { id: subscriptionId } },
      body: { graceSeconds: 600 },
    });
    expect(rotated.error).toBeUndefined();
    const next = rotated.data?.secret ?? "";
    const before = receiver.requests(path).length;
    const recording = createClient(RecordingService, createGrpcTransport({ baseUrl: sys.internalUrl }));
    const { replayId } = await recordingOnNewServer(sys, bearer, "client-webhooks-rotation");
    await recording.finishRecording({ replayId, sizeBytes: 1n, formatVersion: 1 });
    const [during] = (await receiver.waitForRequests(path, before + 1, 30_000)).slice(before);
    const raw = during?.raw ?? Buffer.alloc(0);
    const headers = during?.headers ?? {};
    expect(headers["x-fv-signature-next"]).toBe(webhookSignature(next, Number(headers["x-fv-timestamp"]), raw));
    expect(verifyWebhook(raw, headers, secret).ok).toBe(true);
    expect(verifyWebhook(raw, headers, next).ok).toBe(true);
    expect(verifyWebhook(raw, headers, [next, secret]).ok).toBe(true);
    // Only X-FV-Signature-Next left: the new secret still verifies it.
    const nextOnly = { ...headers, "x-fv-signature": undefined };
    expect(verifyWebhook(raw, nextOnly, next).ok).toBe(true);
    expect(verifyWebhook(raw, nextOnly, secret)).toEqual({ ok: false, reason: "bad-signature" });
    expect(verifyWebhook(raw, headers, [`whsec_${"A".repeat(43)}`])).toEqual({ ok: false, reason: "bad-signature" });
    expect(() => verifyWebhook(raw, headers, [])).toThrow(TypeError);
    expect(() => verifyWebhook(raw, headers, [next, ""])).toThrow(TypeError);
  });
});
