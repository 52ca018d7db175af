import { randomUUID } from "node:crypto";
import { ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { RecordingService } from "../gen/replay/replays/v1/recording_pb.js";
import { WEBHOOK_EVENTS } from "../lib/vocabulary.js";
import { provisionTenant, type Res, type Signer, send, sendSigned } from "./http.js";
import { openApiValidator } from "./openapi-validator.js";
import { pollUntil } from "./poll.js";
import { grpcCheckIn } from "./recorder.js";
import { sharedSystems } from "./shared-system.js";
import { startWebhookReceiver, type WebhookReceiver } from "./webhook-receiver.js";

// The API reference's contract test: real requests to a running system, in both modes, each response
// (success and problem) validated against the document the gateway serves at GET /openapi.json, so
// the document cannot drift from the behaviour. Every operation must answer its documented success
// and a problem at least once.

let receiver: WebhookReceiver;
beforeAll(async () => {
  const { contractPort, certDir } = inject("webhookReceiver");
  receiver = await startWebhookReceiver({ port: contractPort, certDir });
});
afterAll(async () => {
  await receiver?.close();
});

const EVENTS = [...WEBHOOK_EVENTS];

/** A path template of the document with its `{name}` parameters filled in. */
function fill(template: string, params: Record<string, string> = {}): string {
  return template.replace(/\{([^}]+)\}/g, (_all, name: string) => encodeURIComponent(params[name] ?? randomUUID()));
}

describe.each(sharedSystems())("the API reference holds for every route ($mode mode)", (sys) => {
  const recording = createClient(RecordingService, createGrpcTransport({ baseUrl: sys.internalUrl }));
  let doc: any;
  let validator: ReturnType<typeof openApiValidator>;
  const violations: string[] = [];

  beforeAll(async () => {
    const res = await send(sys.baseUrl, "GET", "/openapi.json");
    expect(res.status).toBe(200);
    doc = res.body;
    validator = openApiValidator(doc);
  });

  /** Records what breaks the document and hands the response back, so a scenario reads straight on. */
  function checked(method: string, template: string, res: Res): Res {
    violations.push(...validator.violations(method, template, res));
    return res;
  }
  const operations = () =>
    Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([template, methods]) =>
      Object.entries(methods).map(([method, op]) => ({ template, method: method.toUpperCase(), op })),
    );

  async function tenant(plan: { rateLimitRps?: number; rateLimitBurst?: number } = {}) {
    const t = await provisionTenant(sys, { rateLimitRps: 1000, rateLimitBurst: 1000, serverLimit: 10n, ...plan });
    const api = async (
      method: string,
      template: string,
      opts: {
        params?: Record<string, string>;
        query?: string;
        body?: unknown;
        rawBody?: string;
        key?: string;
        headers?: Record<string, string>;
      } = {},
    ) => {
      const headers = { ...t.bearer(opts.key), ...opts.headers };
      const res = await send(sys.baseUrl, method, fill(template, opts.params) + (opts.query ?? ""), {
        headers,
        body: opts.body,
        rawBody: opts.rawBody,
      });
      return checked(method, template, res);
    };
    const signed = async (
      method: string,
      template: string,
      opts: { params?: Record<string, string>; body?: unknown; signer?: Signer; query?: string } = {},
    ) => {
      const path = fill(template, opts.params) + (opts.query ?? "");
      return checked(method, template, await sendSigned(sys.baseUrl, opts.signer ?? t.signer, method, path, opts));
    };
    return { ...t, api, signed };
  }

  it("answers every route's success as documented", async () => {
    const t = await tenant();
    const created = await t.api("POST", "/v1/api/servers", { body: { name: " contract server " } });
    expect(created.status, created.text).toBe(201);
    const serverId: string = created.body.serverId;
    expect((await t.api("GET", "/v1/api/servers/pending")).status).toBe(200);
    const other = await t.api("POST", "/v1/api/servers", { body: { name: "to cancel" } });
    expect(
      (await t.api("DELETE", "/v1/api/servers/pending/{id}", { params: { id: other.body.serverId } })).status,
    ).toBe(204);
    await grpcCheckIn(sys.internalUrl, serverId, { pluginVersion: "1.2.3" });
    expect((await t.api("GET", "/v1/api/servers")).status).toBe(200);
    expect(
      (await t.api("PATCH", "/v1/api/servers/{id}", { params: { id: serverId }, body: { name: "renamed" } })).status,
    ).toBe(200);

    const okPath = receiver.newPath();
    const failingPath = receiver.newPath();
    receiver.behave(failingPath, { status: 500 });
    const sub = await t.signed("POST", "/v1/webhooks", { body: { url: receiver.url(okPath), events: EVENTS } });
    expect(sub.status, sub.text).toBe(201);
    const failing = await t.signed("POST", "/v1/webhooks", {
      body: { url: receiver.url(failingPath), events: ["collection.finalized"] },
    });
    expect(failing.status, failing.text).toBe(201);
    expect((await t.signed("GET", "/v1/webhooks")).status).toBe(200);

    const started = await pollUntil(
      () => recording.startRecording({ serverId }).catch((err) => ConnectError.from(err)),
      (r) => !(r instanceof ConnectError),
      10_000,
    );
    const { replayId } = started as { replayId: string };
    const marker = await t.api("POST", "/v1/api/timeline-events", {
      body: { serverId, tick: 42, label: "Boss down", colour: "#AABBCC", icon: "trophy" },
      headers: { "idempotency-key": randomUUID() },
    });
    expect(marker.status, marker.text).toBe(201);
    expect((await t.api("GET", "/v1/api/replays/{id}/timeline-events", { params: { id: replayId } })).status).toBe(200);
    expect((await t.api("DELETE", "/v1/api/timeline-events/{id}", { params: { id: marker.body.id } })).status).toBe(
      204,
    );
    // A replay still recording (nulls where nothing is known yet), then a finished one.
    expect((await t.signed("GET", "/v1/replays/{id}", { params: { id: replayId } })).status).toBe(200);
    await recording.finishRecording({ replayId, sizeBytes: 2048n, formatVersion: 1 });
    expect((await t.signed("GET", "/v1/replays", { query: "?page_size=1" })).status).toBe(200);
    expect((await t.signed("GET", "/v1/replays/{id}", { params: { id: replayId } })).status).toBe(200);
    expect((await t.api("GET", "/v1/api/replays")).status).toBe(200);
    expect((await t.api("GET", "/v1/api/replays/{id}", { params: { id: replayId } })).status).toBe(200);

    const log = async (subscriptionId: string) =>
      (await t.signed("GET", "/v1/webhooks/{id}/deliveries", { params: { id: subscriptionId } })).body.results;
    const [delivered] = await pollUntil(
      () => log(sub.body.id),
      (results: any[]) => results.some((d) => d.status === "succeeded"),
      15_000,
      100,
    );
    expect((await t.signed("GET", "/v1/webhooks/deliveries/{id}", { params: { id: delivered.id } })).status).toBe(200);
    const [gaveUp] = await pollUntil(
      () => log(failing.body.id),
      (results: any[]) => results.some((d) => d.status === "failed"),
      15_000,
      100,
    );
    expect((await t.api("POST", "/v1/webhooks/deliveries/{id}/replay", { params: { id: gaveUp.id } })).status).toBe(
      202,
    );
    expect((await t.api("POST", "/v1/webhooks/deliveries/{id}/replay", { params: { id: delivered.id } })).status).toBe(
      409,
    );
    const id = { id: failing.body.id };
    expect((await t.signed("GET", "/v1/webhooks/{id}", { params: id })).status).toBe(200);
    const patched = await t.signed("PATCH", "/v1/webhooks/{id}", { params: id, body: { rateLimitPerSecond: 100 } });
    expect(patched.status, patched.text).toBe(200);
    const rotated = await t.signed("POST", "/v1/webhooks/{id}/rotate-secret", {
      params: id,
      body: { graceSeconds: 60 },
    });
    expect(rotated.status, rotated.text).toBe(200);
    const since = new Date(Date.now() - 600_000).toISOString();
    const recovered = await t.signed("POST", "/v1/webhooks/{id}/recover", { params: id, body: { since } });
    expect(recovered.status, recovered.text).toBe(202);
    expect((await t.signed("GET", "/v1/webhooks/{id}/stats", { params: id })).status).toBe(200);

    expect((await t.signed("DELETE", "/v1/replays/{id}", { params: { id: replayId } })).status).toBe(204);
    expect((await t.signed("DELETE", "/v1/webhooks/{id}", { params: { id: sub.body.id } })).status).toBe(204);
    expect((await t.api("DELETE", "/v1/api/servers/{id}", { params: { id: serverId } })).status).toBe(204);
    expect((await t.api("DELETE", "/v1/api/servers/permanent/{id}", { params: { id: serverId } })).status).toBe(204);

    expect(violations).toEqual([]);
    for (const { template, method, op } of operations()) {
      const success = Object.keys(op.responses).find((status) => status.startsWith("2"));
      expect(validator.seen(), `${method} ${template}`).toContain(`${method} ${template} ${success}`);
    }
  }, 60_000);

  it("answers problems as documented: authentication, scope, rate limit, ids, bodies, pages", async () => {
    const t = await tenant();
    const readOnly = await t.mintKey(["servers:read"]);
    for (const { template, method, op } of operations()) {
      const body = op.requestBody ? {} : undefined;
      // No credential at all: 401 on every route.
      checked(method, template, await send(sys.baseUrl, method, fill(template), { body }));
      if (op.security[0].apiKey) {
        checked(
          method,
          template,
          await send(sys.baseUrl, method, fill(template), { body, headers: t.bearer("svc_live_nope") }),
        );
        const scope = op["x-scope"];
        const key = scope === "servers:read" ? (await t.mintKey(["replays:read"])).key : readOnly.key;
        if (scope) expect((await t.api(method, template, { key, body })).status, `${method} ${template}`).toBe(403);
        // Unknown ids and malformed bodies, with every scope.
        await t.api(method, template, { body });
        await t.api(method, template, { params: { id: "not-an-id" }, rawBody: op.requestBody ? "{" : undefined });
      } else {
        const forged = { ...t.signer, secret: "wrong" };
        expect((await t.signed(method, template, { body, signer: forged })).status, `${method} ${template}`).toBe(401);
        await t.signed(method, template, { body });
        await t.signed(method, template, { params: { id: "not-an-id" }, body });
      }
    }
    // Field violations with errors[], pages, and a body over 64 KiB.
    await t.signed("POST", "/v1/webhooks", { body: { url: "http://example.com/x", events: ["nope"] } });
    await t.signed("GET", "/v1/replays", { query: "?page_size=0" });
    await t.signed("GET", "/v1/replays", { query: "?page_token=forged" });
    await t.api("GET", "/v1/api/replays", { query: "?page_size=101" });
    await t.api("POST", "/v1/api/timeline-events", { body: { replayId: randomUUID(), tick: -1, label: "" } });
    await t.api("POST", "/v1/api/timeline-events", { body: { replayId: randomUUID(), tick: 1, label: "x" } });
    await t.api("POST", "/v1/api/servers", { body: { name: "" } });
    await t.api("POST", "/v1/api/timeline-events", { rawBody: JSON.stringify({ label: "x".repeat(70_000) }) });
    // The rate limit: a tenant with one token.
    const slow = await tenant({ rateLimitRps: 1, rateLimitBurst: 1 });
    await slow.api("GET", "/v1/api/servers");
    expect((await slow.api("GET", "/v1/api/servers")).status).toBe(429);

    expect(violations).toEqual([]);
    const problems = [...validator.seen()].filter((entry) => / [45]\d\d$/.test(entry));
    for (const { template, method } of operations()) {
      expect(
        problems.some((entry) => entry.startsWith(`${method} ${template} 4`)),
        `${method} ${template}`,
      ).toBe(true);
    }
    for (const status of ["400", "401", "403", "404", "413", "422", "429"]) {
      expect(
        problems.some((entry) => entry.endsWith(` ${status}`)),
        status,
      ).toBe(true);
    }
  }, 60_000);
});
