import { randomBytes, randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebhooksService } from "../../gen/replay/webhooks/v1/webhooks_pb.js";
import { loadConfig } from "../../lib/config.js";
import { createTestDb, holdTransaction, type TestDb, testDbModes } from "../../lib/db/_testing.js";
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

/** The UTC day `daysAgo` days before today, YYYY-MM-DD. */
const utcDay = (daysAgo: number) => new Date(Date.now() - daysAgo * DAY_MS).toISOString().slice(0, 10);

/** A UUID v7 of the millisecond `ms` (RFC 9562), as webhooks.uuid7 makes them. */
function uuid7At(ms: number): string {
  const time = ms.toString(16).padStart(12, "0");
  const random = randomBytes(10).toString("hex");
  const variant = (8 + (Number.parseInt(random.charAt(3), 16) & 3)).toString(16);
  return `${time.slice(0, 8)}-${time.slice(8)}-7${random.slice(0, 3)}-${variant}${random.slice(4, 7)}-${random.slice(7, 19)}`;
}
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
    const rows = await store.listDeliveries(db, tenantId, subscriptionId, undefined, count + 1, 30 * DAY_MS);
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

  /**
   * Moves the deliveries into the day `daysAgo` days before now (UTC; its partitions made), made a second apart in
   * the order given, newest first, as the fan-out would have made them then; or with "legacy" to version 4 ids, as
   * made before migration 009 (the default partitions). Resolves to their new ids, in order.
   */
  const relocate = async (ids: readonly string[], to: number | "legacy") => {
    const made = ids.map((_, i) => Date.now() - (to === "legacy" ? 0 : to * DAY_MS) - i * 1_000);
    const moved = made.map((at) => (to === "legacy" ? randomUUID() : uuid7At(at)));
    if (to !== "legacy") await db.query("SELECT webhooks.create_log_day($1::date)", [utcDay(to)]);
    await db.query(
      `UPDATE webhooks.delivery AS d
          SET delivery_id = m.moved,
              created_at = CASE WHEN $4 THEN d.created_at ELSE to_timestamp(m.made / 1000.0) END
         FROM unnest($1::uuid[], $2::uuid[], $3::float8[]) AS m(id, moved, made) WHERE d.delivery_id = m.id`,
      [ids, moved, made, to === "legacy"],
    );
    return moved;
  };

  /** Whether day `daysAgo`'s partitions (UTC) are there. */
  const hasDay = async (daysAgo: number) => {
    const { rows } = await db.query<{ there: boolean }>(
      "SELECT to_regclass('webhooks.delivery_ended_' || $1) IS NOT NULL AS there",
      [utcDay(daysAgo).replaceAll("-", "")],
    );
    return rows[0]?.there;
  };

  it("drops a day whose deliveries all ended past the window, with their attempts, and keeps a day with one pending or ended inside it", async () => {
    const tenantId = randomUUID();
    const subscriptionId = await subscribe(tenantId);
    const fanned = await fanOut(tenantId, subscriptionId, 6);
    const [succeededOld, failedOld] = await relocate(fanned.slice(0, 2), 5);
    const [pendingOld, endedBesidePending] = await relocate(fanned.slice(2, 4), 6);
    const [endedInside] = await relocate(fanned.slice(4, 5), 4);
    const [endedToday] = fanned.slice(5) as [string];
    await age([succeededOld as string], "succeeded", 2 * DAY_MS, 1);
    await age([failedOld as string], "failed", 2 * DAY_MS, 3);
    await age([pendingOld as string], "pending", 90 * DAY_MS, 4);
    await age([endedBesidePending as string], "succeeded", 2 * DAY_MS, 1);
    await age([endedInside as string], "succeeded", DAY_MS - 3_600_000);
    await age([endedToday], "failed", 2 * DAY_MS);

    const worker = logRetentionWorker({ db, retentionMs: DAY_MS });
    expect(await worker.round(signal)).toBe(false);

    expect([await hasDay(5), await hasDay(6), await hasDay(4), await hasDay(0)]).toEqual([false, true, true, true]);
    expect(await present([succeededOld, failedOld] as string[])).toEqual(new Set());
    expect(await attemptsOf([succeededOld, failedOld] as string[])).toBe(0);
    // Kept with their days; the ended ones past the window are out of sight until their days go (the next test).
    const kept = [pendingOld, endedBesidePending, endedInside, endedToday] as string[];
    expect(await present(kept)).toEqual(new Set(kept));
    expect(await attemptsOf(kept)).toBe(4 + 1 + 2 + 2);
    // The days ahead are made, so that no delivery ends in a default partition.
    expect([await hasDay(-1), await hasDay(-2)]).toEqual([true, true]);
  });

  it("deletes row by row, in bounded rounds and oldest ended first, what a day held past its grace and the default partition keep past the window", async () => {
    const tenantId = randomUUID();
    const subscriptionId = await subscribe(tenantId);
    const fanned = await fanOut(tenantId, subscriptionId, 262);
    // A day that a pending delivery holds, 10 days back: past the window and the grace, so it goes row by row.
    const held = await relocate(fanned.slice(0, 131), 10);
    // Version 4 ids, as made before migration 009: in the default partitions.
    const legacy = await relocate(fanned.slice(131), "legacy");
    const [pending, keptHeld] = held.slice(129) as [string, string];
    const keptLegacy = legacy.slice(129);
    const due = [...held.slice(0, 129), ...legacy.slice(0, 129)];
    // Each partition's due rows ended a minute apart, past the window: the i-th of each is its i-th oldest.
    const ages = (rows: readonly string[]) => rows.map((_, i) => 2 * DAY_MS + (rows.length - i) * 60_000);
    await age(held.slice(0, 129), "succeeded", ages(held.slice(0, 129)), 1);
    await age(legacy.slice(0, 129), "failed", ages(legacy.slice(0, 129)), 1);
    await age([pending], "pending", 20 * DAY_MS, 1);
    await age([keptHeld, ...keptLegacy], "succeeded", 60_000, 1);

    const worker = logRetentionWorker({ db, retentionMs: 2 * DAY_MS, graceMs: DAY_MS, batchSize: 100 });
    const rounds: { more: boolean | number; left: Set<string> }[] = [];
    for (let i = 0; i < 3; i++) rounds.push({ more: await worker.round(signal), left: await present(due) });

    expect(rounds.map((round) => round.more)).toEqual([true, false, false]);
    expect(rounds[0]?.left).toEqual(new Set([...held.slice(100, 129), ...legacy.slice(100, 129)]));
    expect(rounds[1]?.left).toEqual(new Set());
    expect(await present([pending, keptHeld, ...keptLegacy])).toEqual(new Set([pending, keptHeld, ...keptLegacy]));
    expect(await attemptsOf(due)).toBe(0);
    expect(await hasDay(10)).toBe(true);

    // Once its pending delivery ended past the window too, the day goes whole.
    await age([pending, keptHeld], "failed", 3 * DAY_MS, 0);
    await worker.round(signal);
    expect(await hasDay(10)).toBe(false);
    expect(await present([pending, keptHeld])).toEqual(new Set());
  });

  it("answers DELIVERY_NOT_FOUND for a delivery ended past the window, its day dropped or not yet, and pages the log on past a page boundary that went", async () => {
    const tenantId = randomUUID();
    const subscriptionId = await subscribe(tenantId);
    const fanned = await fanOut(tenantId, subscriptionId, 5);
    // a today; b alone in the day 2 days back, which the retention drops; c, d, e in the day before it, which d's
    // neighbours keep (inside the grace, nothing in it goes row by row), d out of sight. Listed newest first: a to e.
    const [a] = fanned as [string];
    const [b] = (await relocate(fanned.slice(1, 2), 2)) as [string];
    const [c, d, e] = (await relocate(fanned.slice(2), 3)) as [string, string, string];
    const webhooks = inMemoryClient(WebhooksService, (router) =>
      router.service(
        WebhooksService,
        createWebhooksService({
          db,
          pageTokens: createPageTokens(randomBytes(32)),
          delivery: true,
          urls: { resolve: async () => [], allowTargets: new Set() },
          logRetentionMs: DAY_MS,
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
    expect([await hasDay(2), await hasDay(3)]).toEqual([false, true]);
    expect(await present([d])).toEqual(new Set([d]));

    expect(await contractCodeOfCall(webhooks.getDelivery({ deliveryId: b }, as))).toBe("DELIVERY_NOT_FOUND");
    expect(await contractCodeOfCall(webhooks.getDelivery({ deliveryId: d }, as))).toBe("DELIVERY_NOT_FOUND");
    expect(await contractCodeOfCall(webhooks.replayDelivery({ deliveryId: d }, as))).toBe("DELIVERY_NOT_FOUND");
    const second = await webhooks.listDeliveries({ subscriptionId, pageSize: 2, pageToken: first.nextPageToken }, as);
    expect(second.results.map((delivery) => delivery.deliveryId)).toEqual([c, e]);
    expect(second.nextPageToken).toBe("");
    expect((await webhooks.getDelivery({ deliveryId: c }, as)).delivery?.attempts).toHaveLength(2);
  });

  it("pages a log whose deliveries have version 4 ids, made before migration 009, in their place by when they were made", async () => {
    const tenantId = randomUUID();
    const subscriptionId = await subscribe(tenantId);
    const [newest, legacyEnded, legacyPending, ...older] = await fanOut(tenantId, subscriptionId, 6);
    // The smallest ids there are: before every day's bound, one ended (the default partition), one pending; made a
    // second and two after the newest, then the others a second apart.
    const small = ["00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000002"];
    await db.query(
      `UPDATE webhooks.delivery AS d SET delivery_id = COALESCE(m.small, d.delivery_id),
              created_at = now() - m.n * interval '1 second'
         FROM unnest($1::uuid[], $2::uuid[]) WITH ORDINALITY AS m(id, small, n) WHERE d.delivery_id = m.id`,
      [
        [legacyEnded, legacyPending, ...older],
        [...small, ...older.map(() => null)],
      ],
    );
    await age([small[0] as string], "succeeded", 60_000, 1);
    // A page of recent ids alone would be full (newest and the others): the two must be read besides.
    const page = await store.listDeliveries(db, tenantId, subscriptionId, undefined, 3, DAY_MS);
    expect(page.map((row) => row.delivery_id)).toEqual([newest, ...small]);
  });

  // Two connections at once: the embedded database has one.
  it.runIf(name === "postgres")(
    "drops no day while a manual replay of one of its deliveries is being committed, and keeps that one once it is pending",
    async () => {
      const tenantId = randomUUID();
      const subscriptionId = await subscribe(tenantId);
      const [replayed, other] = (await relocate(await fanOut(tenantId, subscriptionId, 2), 14)) as [string, string];
      await age([replayed, other], "failed", 2 * DAY_MS);
      const worker = logRetentionWorker({ db, retentionMs: DAY_MS });

      // Replayed as a service with a longer window would: the replay holds its row and its day until it commits.
      const replay = await holdTransaction(db, (tx) =>
        store.updateDeliveryReplayed(tx, tenantId, replayed, 30 * DAY_MS),
      );
      expect(replay.result).toMatchObject({ status: "pending" });
      // The drop gives up on its lock; the day is past its grace, so the other one goes row by row.
      expect(await worker.round(signal)).toBe(false);
      expect(await hasDay(14)).toBe(true);
      expect(await present([replayed, other])).toEqual(new Set([replayed]));
      await replay.end();
      await worker.round(signal);
      expect(await present([replayed])).toEqual(new Set([replayed]));
      expect(await attemptsOf([replayed])).toBe(2);
      expect(await hasDay(14)).toBe(true);
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
