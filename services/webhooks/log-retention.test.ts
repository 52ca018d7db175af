import { randomBytes, randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebhooksService } from "../../gen/replay/webhooks/v1/webhooks_pb.js";
import { loadConfig } from "../../lib/config.js";
import { createTestDb, type TestDb, testDbModes } from "../../lib/db/_testing.js";
import type { Db } from "../../lib/db/types.js";
import { createPageTokens } from "../../lib/page/token.js";
import { asCaller, contractCodeOfCall, inMemoryClient } from "../../lib/rpc/_testing.js";
import { openSecrets } from "../../lib/secrets/_testing.js";
import { logRetentionWorker } from "./log-retention.js";
import { webhooksService } from "./main.js";
import * as store from "./store.js";
import { createWebhooksService } from "./webhooks-service.js";

// The delivery log's retention (decisions.md §6.1 "Retention") on the real schema, in both database
// modes: deliveries are stored as the fan-out stores them, then ended and aged by SQL, as the
// worker's records and the passing of days would leave them.

const DAY_MS = 86_400_000;
const signal = new AbortController().signal;

describe.each(testDbModes())("webhooks delivery log retention ($name database)", ({ name, open }) => {
  let testDb: TestDb;
  let db: Db;
  beforeAll(async () => {
    testDb = await open("webhooks");
    db = testDb.db;
  });
  afterAll(() => testDb[Symbol.asyncDispose]());

  const subscribe = async (tenantId: string) => {
    const subscriptionId = randomUUID();
    await store.insertSubscription(db, {
      subscriptionId,
      tenantId,
      url: `https://receiver.example/${subscriptionId}`,
      events: ["asset.ready"],
      secret: "whsec_test",
    });
    return subscriptionId;
  };

  /** `count` deliveries to the subscription, pending with nothing due yet; their ids, newest-listed first. */
  const fanOut = async (tenantId: string, subscriptionId: string, count: number) => {
    const later = new Date(Date.now() + DAY_MS);
    await db.transaction((tx) =>
      store.insertDeliveries(
        tx,
        Array.from({ length: count }, () => ({
          tenantId,
          eventId: randomUUID(),
          event: "asset.ready",
          body: "{}",
          firstAttemptAt: later,
        })),
      ),
    );
    const rows = await store.listDeliveries(db, tenantId, subscriptionId, undefined, count + 1);
    return rows.map((row) => row.delivery_id);
  };

  /**
   * Leaves the deliveries as their last attempt did, `agoMs` before the database's now (one for
   * all, or one each), with `attempts` logged each.
   */
  const age = async (
    ids: readonly string[],
    status: "succeeded" | "failed" | "pending",
    agoMs: number | readonly number[],
    attempts = 2,
  ) => {
    const agos = typeof agoMs === "number" ? ids.map(() => agoMs) : agoMs;
    await db.query(
      `UPDATE webhooks.delivery AS d
          SET status = $2, next_attempt_at = NULL, attempt_count = $4,
              updated_at = now() - u.ago * interval '1 millisecond'
         FROM unnest($1::uuid[], $3::float8[]) AS u(id, ago)
        WHERE d.delivery_id = u.id`,
      [ids, status, agos, attempts],
    );
    await db.query(
      `INSERT INTO webhooks.attempt (delivery_id, attempt, trigger, started_at, duration_ms, status_code)
       SELECT u.id, n, 'automatic', now() - u.ago * interval '1 millisecond', 40, 500
         FROM unnest($1::uuid[], $2::float8[]) AS u(id, ago), generate_series(1, $3::int) AS n`,
      [ids, agos, attempts],
    );
  };

  const present = async (ids: readonly string[]) => {
    const { rows } = await db.query<{ delivery_id: string }>(
      "SELECT delivery_id FROM webhooks.delivery WHERE delivery_id = ANY ($1::uuid[])",
      [ids],
    );
    return new Set(rows.map((row) => row.delivery_id));
  };
  const attemptsOf = async (ids: readonly string[]) => {
    const { rows } = await db.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM webhooks.attempt WHERE delivery_id = ANY ($1::uuid[])",
      [ids],
    );
    return rows[0]?.n;
  };

  it("drops ended deliveries past the window with their attempts, and keeps pending ones however old and ended ones inside it", async () => {
    const tenantId = randomUUID();
    const subscriptionId = await subscribe(tenantId);
    const [succeededOld, failedOld, pendingOld, succeededNew, failedNew] = (await fanOut(
      tenantId,
      subscriptionId,
      5,
    )) as [string, string, string, string, string];
    await age([succeededOld], "succeeded", 2 * DAY_MS, 1);
    await age([failedOld], "failed", 2 * DAY_MS, 3);
    await age([pendingOld], "pending", 90 * DAY_MS, 4);
    await age([succeededNew], "succeeded", DAY_MS - 3_600_000);
    await age([failedNew], "failed", 60_000);

    const worker = logRetentionWorker({ db, retentionMs: DAY_MS });
    expect(await worker.round(signal)).toBe(false);

    expect(await present([succeededOld, failedOld])).toEqual(new Set());
    expect(await attemptsOf([succeededOld, failedOld])).toBe(0);
    expect(await present([pendingOld, succeededNew, failedNew])).toEqual(
      new Set([pendingOld, succeededNew, failedNew]),
    );
    expect(await attemptsOf([pendingOld, succeededNew, failedNew])).toBe(8);
  });

  it("works through more due deliveries than a batch in bounded rounds, oldest ended first, each but the last asking for the next at once", async () => {
    const tenantId = randomUUID();
    const subscriptionId = await subscribe(tenantId);
    const ids = await fanOut(tenantId, subscriptionId, 260);
    const due = ids.slice(0, 250);
    const kept = ids.slice(250);
    // The due ones ended a minute apart, the first 250 minutes past the window: due[i] is the i-th oldest.
    const ages = due.map((_, i) => 2 * DAY_MS + (250 - i) * 60_000);
    const half = <T>(rows: readonly T[], parity: number) => rows.filter((_, i) => i % 2 === parity);
    await age(half(due, 0), "succeeded", half(ages, 0), 1);
    await age(half(due, 1), "failed", half(ages, 1), 1);
    await age(kept, "succeeded", 60_000, 1);

    const worker = logRetentionWorker({ db, retentionMs: 2 * DAY_MS, batchSize: 100 });
    const rounds: { more: boolean | number; left: Set<string> }[] = [];
    for (let i = 0; i < 4; i++) rounds.push({ more: await worker.round(signal), left: await present(due) });

    expect(rounds.map((round) => round.more)).toEqual([true, true, false, false]);
    expect(rounds[0]?.left).toEqual(new Set(due.slice(100)));
    expect(rounds[1]?.left).toEqual(new Set(due.slice(200)));
    expect(rounds[2]?.left).toEqual(new Set());
    expect(await present(kept)).toEqual(new Set(kept));
    expect(await attemptsOf(due)).toBe(0);
  });

  it("answers DELIVERY_NOT_FOUND for a dropped delivery, and pages the log on past a page boundary that was dropped", async () => {
    const tenantId = randomUUID();
    const subscriptionId = await subscribe(tenantId);
    const [a, b, c, d, e] = (await fanOut(tenantId, subscriptionId, 5)) as [string, string, string, string, string];
    const webhooks = inMemoryClient(WebhooksService, (router) =>
      router.service(
        WebhooksService,
        createWebhooksService({
          db,
          pageTokens: createPageTokens(randomBytes(32)),
          delivery: true,
          urls: { resolve: async () => [], allowTargets: new Set() },
          logRetentionMs: 30 * 86_400_000,
          secrets: openSecrets,
          onQueued: () => {},
        }),
      ),
    );
    const as = asCaller({ tenantId });
    const first = await webhooks.listDeliveries({ subscriptionId, pageSize: 2 }, as);
    expect(first.results.map((delivery) => delivery.deliveryId)).toEqual([a, b]);

    // b, the last of the first page, is where its token points; d is further on.
    await age([b, d], "failed", 2 * DAY_MS);
    await age([a, c, e], "succeeded", 60_000);
    await logRetentionWorker({ db, retentionMs: DAY_MS }).round(signal);

    expect(await contractCodeOfCall(webhooks.getDelivery({ deliveryId: b }, as))).toBe("DELIVERY_NOT_FOUND");
    expect(await contractCodeOfCall(webhooks.replayDelivery({ deliveryId: d }, as))).toBe("DELIVERY_NOT_FOUND");
    const second = await webhooks.listDeliveries({ subscriptionId, pageSize: 2, pageToken: first.nextPageToken }, as);
    expect(second.results.map((delivery) => delivery.deliveryId)).toEqual([c, e]);
    expect(second.nextPageToken).toBe("");
    expect((await webhooks.getDelivery({ deliveryId: c }, as)).delivery?.attempts).toHaveLength(2);
  });

  // Two connections at once: the embedded database has one.
  it.runIf(name === "postgres")(
    "passes over a delivery whose manual replay is being committed, without waiting, and keeps it once it is pending",
    async () => {
      const tenantId = randomUUID();
      const subscriptionId = await subscribe(tenantId);
      const [replayed, other] = (await fanOut(tenantId, subscriptionId, 2)) as [string, string];
      await age([replayed, other], "failed", 2 * DAY_MS);
      const worker = logRetentionWorker({ db, retentionMs: DAY_MS });

      await db.transaction(async (tx) => {
        expect(await store.updateDeliveryReplayed(tx, tenantId, replayed)).toMatchObject({ status: "pending" });
        // The replay holds its row until it commits; the prune takes the other one and returns.
        expect(await worker.round(signal)).toBe(false);
        expect(await present([replayed, other])).toEqual(new Set([replayed]));
      });
      await worker.round(signal);
      expect(await present([replayed])).toEqual(new Set([replayed]));
    },
  );
});

describe("webhooks service", () => {
  it("runs the delivery log's retention whether or not WEBHOOK_DELIVERY is on", async () => {
    await using testDb = await createTestDb("webhooks");
    for (const delivery of ["on", "off"]) {
      const config = loadConfig({ WEBHOOK_DELIVERY: delivery, PAGE_TOKEN_KEY: randomBytes(32).toString("hex") });
      // Setting up takes neither the bus nor the blob store.
      const unused = undefined as never;
      const parts = await webhooksService.setup({
        db: testDb.db,
        config,
        now: () => new Date(),
        peers: unused,
        bus: unused,
        blobs: unused,
      });
      expect(
        parts.workers?.map((worker) => worker.name),
        delivery,
      ).toContain("webhooks-log-retention");
    }
  });
});
