import { join } from "node:path";
import { describe, expect, inject, it, onTestFinished } from "vitest";
import { freePorts } from "../free-port.js";
import { pollUntil } from "../poll.js";
import { distributedSkipReason, startDistributedSystem } from "../system.js";
import { startWebhookReceiver } from "../webhook-receiver.js";
import { tenantOn } from "../webhook-tenant.js";

// Two webhooks processes on one database (decisions.md §6.1): a subscription's rateLimitPerSecond
// holds across both replicas' workers, and a subscription failing throughout WEBHOOK_DISABLE_AFTER
// is disabled, its deliveries held, and counted on /metrics.

const skip = distributedSkipReason();

describe.skipIf(skip)(`webhooks with two replicas (distributed mode; ${skip ?? "a system of its own"})`, () => {
  it("holds the rate limit across both replicas and disables a subscription that fails throughout WEBHOOK_DISABLE_AFTER", async () => {
    const [receiverPort] = (await freePorts(1)) as [number];
    const { certDir } = inject("webhookReceiver");
    const receiver = await startWebhookReceiver({ port: receiverPort, certDir });
    onTestFinished(() => receiver.close());
    const sys = await startDistributedSystem({
      webhooksReplicas: 2,
      env: {
        WEBHOOK_ALLOW_TARGETS: `127.0.0.1:${receiverPort}`,
        WEBHOOK_CA_FILE: join(certDir, "cert.pem"),
        WEBHOOK_RETRY_SCHEDULE: "0,1500ms,1500ms",
        WEBHOOK_TIMEOUT_MS: "2000",
        WEBHOOK_DISABLE_AFTER: "1s",
      },
    });
    onTestFinished(() => sys.stop().then(() => undefined));
    const t = await tenantOn(sys);

    // 24 deliveries due at once (held while disabled, then enabled) at 3 a second take eight
    // seconds of the database's clock, whichever replica claims them: more than 6 s from the first
    // arrival to the last. Each replica held to 3 a second on its own would send them in four (4 s).
    const limited = receiver.newPath();
    const { id: limitedId } = await t.subscribe(receiver.url(limited), ["collection.finalized"]);
    const held = { disabled: true, rateLimitPerSecond: 3 };
    expect((await t.signed("PATCH", `/v1/webhooks/${limitedId}`, held)).status).toBe(200);

    const failing = receiver.newPath();
    receiver.behave(failing, { status: 500 });
    const { id: failingId } = await t.subscribe(receiver.url(failing), ["asset.deleted"]);

    for (let i = 0; i < 24; i++) await t.finishedReplay();
    await pollUntil(
      () => t.deliveries(limitedId),
      (list) => list.length === 24,
      30_000,
      200,
    );
    expect((await t.signed("PATCH", `/v1/webhooks/${limitedId}`, { disabled: false })).status).toBe(200);
    const arrived = await receiver.waitForRequests(limited, 24, 60_000);
    const times = arrived.map((r) => r.at).sort((a, b) => a - b);
    const spreadMs = (times.at(-1) as number) - (times[0] as number);
    expect(spreadMs, `24 deliveries at 3/s arrived over ${spreadMs} ms`).toBeGreaterThan(5_000);
    const bySecond = new Map<number, number>();
    for (const at of times) bySecond.set(Math.floor(at / 1000), (bySecond.get(Math.floor(at / 1000)) ?? 0) + 1);
    // A send may cross into the next second after its claim: never more than two seconds' worth.
    for (const [, n] of bySecond) expect(n).toBeLessThanOrEqual(6);

    // The failing subscription: attempts 1.5 s apart, none succeeding, trip the 1 s clock.
    const { replayId } = await t.finishedReplay();
    await t.signed("DELETE", `/v1/replays/${replayId}`);
    const disabled = await pollUntil(
      async () => (await t.signed("GET", `/v1/webhooks/${failingId}`)).body,
      (s) => s.disabled === true,
      30_000,
      200,
    );
    expect(disabled).toMatchObject({ disabledReason: "failing", disabledAt: expect.any(String) });
    const holding = await pollUntil(
      () => t.deliveries(failingId),
      (list) => list.length === 1 && list[0]?.next_attempt_at === null,
      30_000,
      200,
    );
    expect(holding[0]).toMatchObject({ status: "pending", attempts: [{}, {}] });
    const counted = await pollUntil(
      async () => {
        const texts = await Promise.all(
          ["webhooks", "webhooks-1"].map(async (name) => (await fetch(`${sys.serviceUrls?.[name]}/metrics`)).text()),
        );
        return texts.join("\n");
      },
      (text) => /replay_webhook_subscriptions_disabled_total\{reason="failing"\} 1/.test(text),
      10_000,
      200,
    );
    expect(counted).toMatch(/replay_webhook_subscriptions_disabled_total\{reason="failing"\} 1/);
    // Enabled again: its held delivery goes (and fails again, as the receiver still answers 500).
    expect((await t.signed("PATCH", `/v1/webhooks/${failingId}`, { disabled: false })).status).toBe(200);
    await receiver.waitForRequests(failing, 3, 30_000);
  }, 180_000);
});
