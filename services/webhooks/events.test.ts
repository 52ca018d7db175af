import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it, onTestFinished } from "vitest";
import { createTestBus, type TestBus } from "../../lib/bus/_testing.js";
import { startConsumer } from "../../lib/bus/consumer.js";
import { buildEvent } from "../../lib/bus/events.js";
import { createTestDb, type TestDb } from "../../lib/db/_testing.js";
import type { Db } from "../../lib/db/types.js";
import { openSecrets } from "../../lib/secrets/_testing.js";
import { startWorker } from "../../lib/worker/worker.js";
import { pollUntil } from "../../test/poll.js";
import { startWebhookReceiver, type WebhookReceiver } from "../../test/webhook-receiver.js";
import { createDeliveryClient } from "./delivery/client.js";
import { parseAllowTargets } from "./delivery/target.js";
import { deliveryWorker } from "./delivery/worker.js";
import { webhooksConsumers } from "./events.js";
import * as store from "./store.js";

// The webhooks consumer on a real bus (JetStream with NATS, else the embedded one) and a real HTTPS
// receiver. The broker may hand an event out again as a new message, not flagged
// redelivered (a NATS restart that lost the consumer's acks: 285 events POSTed again in the soak,
// none of them in the delivery log). An event applied already must send nothing, and every POST
// sent must be in the log.

const certDir = inject("webhookReceiver").certDir;
let receiver: WebhookReceiver;
let testDb: TestDb;
let db: Db;
let bus: TestBus;
beforeAll(async () => {
  receiver = await startWebhookReceiver({ certDir });
  testDb = await createTestDb("webhooks");
  db = testDb.db;
  bus = await createTestBus(testDb.dbFor);
});
afterAll(async () => {
  await bus?.[Symbol.asyncDispose]();
  await testDb?.[Symbol.asyncDispose]();
  await receiver?.close();
});

describe("webhooks fan-out on the bus", () => {
  it("sends an event handed out again after it was applied nowhere, and logs every attempt it sent", async () => {
    const tenantId = randomUUID();
    const paths = [receiver.newPath(), receiver.newPath()];
    for (const path of paths)
      await store.insertSubscription(db, {
        subscriptionId: randomUUID(),
        tenantId,
        url: receiver.url(path),
        events: ["collection.finalized"],
        secret: "whsec_test",
      });
    const worker = deliveryWorker({
      db,
      secrets: openSecrets,
      client: createDeliveryClient({
        timeoutMs: 5_000,
        allowTargets: parseAllowTargets([`127.0.0.1:${receiver.port}`]),
        extraCaPem: readFileSync(join(certDir, "cert.pem"), "utf8"),
      }),
      retryScheduleMs: [0, 60_000],
      timeoutMs: 5_000,
      intervalMs: 100,
    });
    const running = startWorker(worker);
    onTestFinished(() => running.stop(1_000));
    const [consumer] = webhooksConsumers({ db, retryScheduleMs: [0, 60_000], worker, onQueued: () => worker.wake() });
    const stop = await startConsumer(
      { db, bus: bus.bus, inboxMs: 86_400_000, now: () => new Date() },
      consumer as NonNullable<typeof consumer>,
    );
    onTestFinished(stop);

    const finalized = (replayId: string) =>
      buildEvent("replays.collection.finalized", { tenantId, collection: { replayId, serverId: randomUUID() } });
    const first = finalized(randomUUID());
    await bus.emit(first.subject, randomUUID(), first.payload);
    for (const path of paths) await receiver.waitForRequests(path, 1);
    const succeeded = () =>
      db
        .query<{ n: number }>(
          "SELECT count(*)::int AS n FROM webhooks.delivery WHERE event_id = $1 AND status = 'succeeded'",
          [first.eventId],
        )
        .then((r) => r.rows[0]?.n);
    await pollUntil(succeeded, (n) => n === 2, 15_000);

    // The same event again under new message ids, as a broker that lost its acks hands it out: not
    // flagged redelivered. Then a new event, whose POSTs arrive after any the repeats would cause.
    for (let i = 0; i < 3; i++) await bus.emit(first.subject, randomUUID(), first.payload);
    const sentinel = finalized(randomUUID());
    await bus.emit(sentinel.subject, randomUUID(), sentinel.payload);
    const eventIdOf = (r: { json: unknown }) => (r.json as { event_id?: string }).event_id;
    for (const path of paths)
      await pollUntil(
        async () => receiver.requests(path).map(eventIdOf),
        (ids) => ids.includes(sentinel.eventId),
        15_000,
      );

    // Every message handled and acknowledged: the repeats' work, whatever it was, is done.
    const c = consumer as NonNullable<typeof consumer>;
    await pollUntil(
      () => bus.bus.pending(c.durable, Object.keys(c.handlers)),
      (n) => n === 0,
      15_000,
    );
    for (const path of paths)
      expect(receiver.requests(path).filter((r) => eventIdOf(r) === first.eventId)).toHaveLength(1);
    const { rows } = await db.query<{ attempts: number }>(
      `SELECT count(*)::int AS attempts FROM webhooks.attempt a JOIN webhooks.delivery d USING (delivery_id)
        WHERE d.event_id = $1`,
      [first.eventId],
    );
    expect(rows[0]?.attempts).toBe(2);
  });
});
