import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { verifyWebhookSignature } from "../services/webhooks/delivery/signature.js";
import { send } from "./http.js";
import { pollUntil } from "./poll.js";
import { sharedSystems } from "./shared-system.js";
import { startWebhookReceiver, type WebhookReceiver } from "./webhook-receiver.js";
import { tenantOn } from "./webhook-tenant.js";

// Managing a webhook subscription through the gateway (decisions.md §6.1), in both modes, against a
// real HTTPS receiver: get and PATCH, disabled subscriptions holding their events, the secret's
// rotation with X-FV-Signature-Next, recover, the rate limit and the stats. The shared systems run
// WEBHOOK_RETRY_SCHEDULE 0,300ms,300ms (test/global-setup.ts). Every refusal's status and code, and
// another tenant's ids: gateway/routes/webhook-subscriptions.test.ts.

const SECRET = /^whsec_[A-Za-z0-9_-]{43}$/;

let receiver: WebhookReceiver;
beforeAll(async () => {
  const { subscriptionsPort, certDir } = inject("webhookReceiver");
  receiver = await startWebhookReceiver({ port: subscriptionsPort, certDir });
});
afterAll(async () => {
  await receiver?.close();
});

const replayIdOf = (json: unknown) =>
  (json as { data: { collection: { replay_id: string } } }).data.collection.replay_id;

describe.each(sharedSystems())("managing a webhook subscription ($mode mode)", (sys) => {
  it("gets a subscription with its state; PATCH changes only the fields named", async () => {
    const t = await tenantOn(sys);
    const url = receiver.url(receiver.newPath());
    const { id } = await t.subscribe(url, ["collection.finalized"]);

    const got = await t.signed("GET", `/v1/webhooks/${id}`);
    expect(got.status, got.text).toBe(200);
    expect(got.body).toEqual({
      id,
      url,
      events: ["collection.finalized"],
      createdAt: expect.any(String),
      disabled: false,
      disabledReason: null,
      disabledAt: null,
      rateLimitPerSecond: null,
      previousSecretExpiresAt: null,
    });
    const patched = await t.signed("PATCH", `/v1/webhooks/${id}`, {
      events: ["asset.ready", "collection.finalized"],
      rateLimitPerSecond: 50,
    });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body).toEqual({
      ...got.body,
      events: ["asset.ready", "collection.finalized"],
      rateLimitPerSecond: 50,
    });
    const unlimited = await t.signed("PATCH", `/v1/webhooks/${id}`, { rateLimitPerSecond: null });
    expect(unlimited.body.rateLimitPerSecond).toBeNull();
    // The list keeps the contract's four fields (the conformance suite pins them).
    const list = await t.signed("GET", "/v1/webhooks");
    expect(Object.keys(list.body.subscriptions[0]).sort()).toEqual(["createdAt", "events", "id", "url"]);
  });

  it("holds a disabled subscription's events, sends a manual replay even then, and sends the rest oldest first once enabled, to its new url", async () => {
    const t = await tenantOn(sys);
    const oldPath = receiver.newPath();
    const newPath = receiver.newPath();
    const { id } = await t.subscribe(receiver.url(oldPath), ["collection.finalized"]);
    const disabled = await t.signed("PATCH", `/v1/webhooks/${id}`, { disabled: true });
    expect(disabled.status, disabled.text).toBe(200);
    expect(disabled.body).toMatchObject({ disabled: true, disabledReason: "manual", disabledAt: expect.any(String) });

    const replays: string[] = [];
    for (let i = 0; i < 3; i++) replays.push((await t.finishedReplay()).replayId);
    const held = await pollUntil(
      () => t.deliveries(id),
      (list) => list.length === 3,
      15_000,
      100,
    );
    for (const d of held) expect(d).toMatchObject({ status: "pending", next_attempt_at: null, attempts: [] });

    // A person's replay goes even while disabled: the worker is running, and sends that one only.
    const oldest = held.at(-1) as (typeof held)[number];
    const replayed = await send(sys.baseUrl, "POST", `/v1/webhooks/deliveries/${oldest.id}/replay`, {
      headers: t.bearer(),
    });
    expect(replayed.status, replayed.text).toBe(202);
    const [manual] = await receiver.waitForRequests(oldPath, 1);
    expect(replayIdOf(manual?.json)).toBe(replays[0]);
    await t.waitDelivery(id, (d) => d.id === oldest.id && d.status === "succeeded");
    expect(receiver.requests(oldPath)).toHaveLength(1);
    expect((await t.deliveries(id)).filter((d) => d.status === "pending")).toHaveLength(2);

    // One a second, so that arrival order is send order.
    const enabled = await t.signed("PATCH", `/v1/webhooks/${id}`, {
      disabled: false,
      url: receiver.url(newPath),
      rateLimitPerSecond: 1,
    });
    expect(enabled.body).toMatchObject({ disabled: false, disabledReason: null, disabledAt: null });
    const sent = await receiver.waitForRequests(newPath, 2, 15_000);
    expect(sent.map((r) => replayIdOf(r.json))).toEqual(replays.slice(1));
    expect(receiver.requests(oldPath)).toHaveLength(1);
  });

  it("rotates the secret with an overlap: X-FV-Signature keeps the previous secret and X-FV-Signature-Next carries the new one", async () => {
    const t = await tenantOn(sys);
    const path = receiver.newPath();
    const { id, secret: first } = await t.subscribe(receiver.url(path), ["collection.finalized"]);
    const rotated = await t.signed("POST", `/v1/webhooks/${id}/rotate-secret`, undefined);
    expect(rotated.status, rotated.text).toBe(200);
    expect(rotated.body.secret).toMatch(SECRET);
    const expiresIn = Date.parse(rotated.body.previousSecretExpiresAt) - Date.now();
    expect(expiresIn).toBeGreaterThan(86_400_000 - 60_000);
    expect(expiresIn).toBeLessThanOrEqual(86_400_000 + 60_000);
    const second: string = rotated.body.secret;
    expect((await t.signed("GET", `/v1/webhooks/${id}`)).body.previousSecretExpiresAt).toBe(
      rotated.body.previousSecretExpiresAt,
    );

    await t.finishedReplay();
    const [during] = await receiver.waitForRequests(path, 1);
    const next = { ...during?.headers, "x-fv-signature": during?.headers["x-fv-signature-next"] };
    expect(verifyWebhookSignature(first, during?.headers ?? {}, during?.raw ?? "")).toBe(true);
    expect(verifyWebhookSignature(second, next, during?.raw ?? "")).toBe(true);
    expect(during?.headers["x-fv-signature-next"]).toMatch(/^sha256=[0-9a-f]{64}$/);

    // A second rotation inside the window starts a new overlap from the secret then current.
    const again = await t.signed("POST", `/v1/webhooks/${id}/rotate-secret`, { graceSeconds: 600 });
    const third: string = again.body.secret;
    await t.finishedReplay();
    const [overlap2] = (await receiver.waitForRequests(path, 2)).slice(1);
    const next2 = { ...overlap2?.headers, "x-fv-signature": overlap2?.headers["x-fv-signature-next"] };
    expect(verifyWebhookSignature(second, overlap2?.headers ?? {}, overlap2?.raw ?? "")).toBe(true);
    expect(verifyWebhookSignature(third, next2, overlap2?.raw ?? "")).toBe(true);
    expect(verifyWebhookSignature(first, overlap2?.headers ?? {}, overlap2?.raw ?? "")).toBe(false);
    expect(verifyWebhookSignature(first, next2, overlap2?.raw ?? "")).toBe(false);

    // No grace: the new secret signs at once, and no X-FV-Signature-Next.
    const now = await t.signed("POST", `/v1/webhooks/${id}/rotate-secret`, { graceSeconds: 0 });
    expect(now.body.previousSecretExpiresAt).toBeNull();
    await t.finishedReplay();
    const [after] = (await receiver.waitForRequests(path, 3)).slice(2);
    expect(after?.headers["x-fv-signature-next"]).toBeUndefined();
    expect(verifyWebhookSignature(now.body.secret, after?.headers ?? {}, after?.raw ?? "")).toBe(true);
    expect((await t.signed("GET", `/v1/webhooks/${id}`)).body.previousSecretExpiresAt).toBeNull();
  });

  it("recovers failed deliveries in a window, oldest first, and counts them in the stats", async () => {
    const t = await tenantOn(sys);
    const path = receiver.newPath();
    let failing = true;
    receiver.behave(path, () => ({ status: failing ? 500 : 200 }));
    const { id } = await t.subscribe(receiver.url(path), ["collection.finalized"]);
    const before = new Date(Date.now() - 60_000).toISOString();
    await t.finishedReplay();
    await t.finishedReplay();
    await pollUntil(
      () => t.deliveries(id),
      (list) => list.length === 2 && list.every((d) => d.status === "failed"),
      20_000,
      100,
    );

    // A window that holds none of them queues nothing.
    const none = await t.signed("POST", `/v1/webhooks/${id}/recover`, { since: before, until: before });
    expect(none.status, none.text).toBe(202);
    expect(none.body).toEqual({ queued: 0 });

    failing = false;
    const recovered = await t.signed("POST", `/v1/webhooks/${id}/recover`, { since: before });
    expect(recovered.status, recovered.text).toBe(202);
    expect(recovered.body).toEqual({ queued: 2 });
    const done = await pollUntil(
      () => t.deliveries(id),
      (list) => list.every((d) => d.status === "succeeded"),
      20_000,
      100,
    );
    for (const d of done)
      expect(d).toMatchObject({ retry_count: 1, attempts: [{ trigger: "manual", status_code: 200 }, {}, {}, {}] });

    const stats = await t.signed("GET", `/v1/webhooks/${id}/stats`);
    expect(stats.status, stats.text).toBe(200);
    expect(stats.body).toEqual({
      pending: 0,
      last24h: { succeeded: 2, failed: 6 },
      last7d: { succeeded: 2, failed: 6 },
    });
  });
});
