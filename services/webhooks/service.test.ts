import { randomBytes, randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { DeliveryStatus, WebhooksService } from "../../gen/replay/webhooks/v1/webhooks_pb.js";
import { createTestDb } from "../../lib/db/_testing.js";
import { createPageTokens } from "../../lib/page/token.js";
import { asCaller, contractCodeOfCall, inMemoryClient } from "../../lib/rpc/_testing.js";
import { openSecrets } from "../../lib/secrets/_testing.js";
import type { Resolver } from "./delivery/target.js";
import * as store from "./store.js";
import { createWebhooksService } from "./webhooks-service.js";

// What the webhooks service does, call by call: WebhooksService served in this process on the real
// schema. Subscription URLs resolve through a fixed table (the host's answer is the input the
// address rules judge); deliveries are stored as the fan-out of events.ts stores them. Sending them
// is the delivery worker's (services/webhooks/delivery/); the public API's answers, with a real
// receiver, are test/webhooks.test.ts.

const addresses: Record<string, string[]> = {
  "hooks.example.com": ["93.184.216.34"],
  "inside.example.com": ["10.0.0.7"],
};
const resolve: Resolver = async (hostname) => addresses[hostname] ?? [];

async function webhooksOn(delivery = true) {
  const testDb = await createTestDb("webhooks");
  const tenantId = randomUUID();
  let queued = 0;
  const service = createWebhooksService({
    db: testDb.db,
    pageTokens: createPageTokens(randomBytes(32)),
    delivery,
    urls: { resolve, allowTargets: new Set() },
    logRetentionMs: 30 * 86_400_000,
    secrets: openSecrets,
    onQueued: () => {
      queued++;
    },
  });
  return {
    testDb,
    tenantId,
    queued: () => queued,
    webhooks: inMemoryClient(WebhooksService, (router) => router.service(WebhooksService, service)),
    as: asCaller({ tenantId }),
  };
}

describe("webhooks service", () => {
  it("creates a subscription with its signing secret, lists it and deletes it", async () => {
    const { testDb, webhooks, as } = await webhooksOn();
    await using _ = testDb;

    const created = await webhooks.createSubscription(
      { url: "https://hooks.example.com/replays", events: ["asset.ready", "asset.deleted"] },
      as,
    );
    const subscriptionId = created.subscription?.subscriptionId ?? "";
    expect(created.secret).not.toBe("");
    expect(created.subscription).toMatchObject({ url: "https://hooks.example.com/replays" });
    expect((await webhooks.listSubscriptions({}, as)).subscriptions.map((s) => s.subscriptionId)).toEqual([
      subscriptionId,
    ]);

    await webhooks.deleteSubscription({ subscriptionId }, as);
    expect((await webhooks.listSubscriptions({}, as)).subscriptions).toEqual([]);
    expect(await contractCodeOfCall(webhooks.deleteSubscription({ subscriptionId }, as))).toBe(
      "SUBSCRIPTION_NOT_FOUND",
    );
  });

  it("refuses a URL that is not https or reaches a private address, an unknown event, and any create with delivery off", async () => {
    const { testDb, webhooks, as } = await webhooksOn();
    await using _ = testDb;
    const create = (url: string, events = ["asset.ready"]) =>
      contractCodeOfCall(webhooks.createSubscription({ url, events }, as));

    expect(await create("http://hooks.example.com/replays")).toBe("VALIDATION_ERROR");
    expect(await create("https://inside.example.com/replays")).toBe("VALIDATION_ERROR");
    expect(await create("https://hooks.example.com/replays", ["asset.readied"])).toBe("VALIDATION_ERROR");
    expect((await webhooks.listSubscriptions({}, as)).subscriptions).toEqual([]);

    const off = await webhooksOn(false);
    await using __ = off.testDb;
    expect(
      await contractCodeOfCall(
        off.webhooks.createSubscription({ url: "https://hooks.example.com/replays", events: ["asset.ready"] }, off.as),
      ),
    ).toBe("WEBHOOK_DELIVERY_UNCONFIGURED");
  });

  it("shows a subscription's deliveries a page at a time, and queues a manual replay of one", async () => {
    const { testDb, tenantId, webhooks, queued, as } = await webhooksOn();
    await using _ = testDb;
    const { subscription } = await webhooks.createSubscription(
      { url: "https://hooks.example.com/replays", events: ["asset.ready"] },
      as,
    );
    const subscriptionId = subscription?.subscriptionId ?? "";
    // Three events fanned out, as the consumers of events.ts store them (due later: no worker runs).
    const later = new Date(Date.now() + 3_600_000);
    await testDb.db.transaction((tx) =>
      store.insertDeliveries(
        tx,
        Array.from({ length: 3 }, () => ({
          tenantId,
          eventId: randomUUID(),
          event: "asset.ready",
          body: "{}",
          firstAttemptAt: later,
        })),
      ),
    );

    const first = await webhooks.listDeliveries({ subscriptionId, pageSize: 2 }, as);
    const second = await webhooks.listDeliveries({ subscriptionId, pageSize: 2, pageToken: first.nextPageToken }, as);
    const listed = [...first.results, ...second.results];
    expect(listed).toHaveLength(3);
    expect(second.nextPageToken).toBe("");
    expect(new Set(listed.map((d) => d.status))).toEqual(new Set([DeliveryStatus.PENDING]));

    const deliveryId = listed[0]?.deliveryId ?? "";
    expect((await webhooks.getDelivery({ deliveryId }, as)).delivery).toMatchObject({ deliveryId, retryCount: 0 });
    const replayed = await webhooks.replayDelivery({ deliveryId }, as);
    expect(replayed.delivery).toMatchObject({ deliveryId, retryCount: 1, status: DeliveryStatus.PENDING });
    expect(queued()).toBe(1);

    const stranger = asCaller({ tenantId: randomUUID() });
    expect(await contractCodeOfCall(webhooks.getDelivery({ deliveryId }, stranger))).toBe("DELIVERY_NOT_FOUND");
    expect(await contractCodeOfCall(webhooks.listDeliveries({ subscriptionId }, stranger))).toBe(
      "SUBSCRIPTION_NOT_FOUND",
    );
  });
});
