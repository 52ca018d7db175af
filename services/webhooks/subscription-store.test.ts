import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type TestDb, testDbModes } from "../../lib/db/_testing.js";
import type { Db } from "../../lib/db/types.js";
import * as queue from "./delivery/queue-store.js";
import * as store from "./store.js";
import * as subscriptions from "./subscription-store.js";

// A subscription's management in the database (both modes): the automatic disable's clock kept by
// the attempts' records, and the rate limit held by claims made side by side, as two replicas make
// them.

describe.each(testDbModes())("subscription management ($name database)", ({ open }) => {
  let testDb: TestDb;
  let db: Db;
  beforeAll(async () => {
    testDb = await open("webhooks");
    db = testDb.db;
  });
  afterAll(() => testDb[Symbol.asyncDispose]());

  const subscribe = async () => {
    const tenantId = randomUUID();
    const subscriptionId = randomUUID();
    await store.insertSubscription(db, {
      subscriptionId,
      tenantId,
      url: `https://receiver.example/${subscriptionId}`,
      events: ["asset.ready"],
      secret: "whsec_test",
    });
    return { tenantId, subscriptionId };
  };
  const fanOut = (tenantId: string, count: number) =>
    db.transaction((tx) =>
      store.insertDeliveries(
        tx,
        Array.from({ length: count }, () => ({
          tenantId,
          eventId: randomUUID(),
          event: "asset.ready",
          body: "{}",
          firstAttemptAt: new Date(Date.now() - 1_000),
        })),
      ),
    );
  const claimAll = (owner: string) =>
    queue.claimDeliveries(db, { owner, leaseMs: 60_000, perSubscription: 64, limit: 64, busy: new Map() });

  /** A claimed delivery's automatic attempt by `owner`, started `atMs` after t0, failed or succeeded. */
  const attemptAt = (row: queue.ClaimedDelivery, owner: string, atMs: number, ok: boolean): queue.AttemptRecord => ({
    deliveryId: row.delivery_id,
    attempt: row.attempt,
    owner,
    trigger: "automatic",
    startedAt: new Date(Date.UTC(2026, 0, 1) + atMs),
    durationMs: 5,
    statusCode: ok ? 200 : 500,
    error: ok ? null : "HTTP 500",
    nextAttemptAt: null,
    gone: false,
  });
  /** Records that one attempt alone. */
  const recordAt = (
    row: queue.ClaimedDelivery,
    owner: string,
    atMs: number,
    ok: boolean,
    disableAfterMs: number | null,
  ) => db.transaction((tx) => queue.recordAttempts(tx, [attemptAt(row, owner, atMs, ok)], disableAfterMs));

  it("disables a subscription whose attempts failed throughout WEBHOOK_DISABLE_AFTER; a success resets the clock", async () => {
    const failing = await subscribe();
    const recovering = await subscribe();
    const never = await subscribe();
    for (const s of [failing, recovering, never]) await fanOut(s.tenantId, 5);
    const claimed = (await claimAll("w")).claimed;
    const of = (s: { subscriptionId: string }) => claimed.filter((row) => row.subscription_id === s.subscriptionId);
    const [f1, f2, f3] = of(failing) as [queue.ClaimedDelivery, queue.ClaimedDelivery, queue.ClaimedDelivery];
    const [r1, r2, r3, r4, r5] = of(recovering) as queue.ClaimedDelivery[] as [
      queue.ClaimedDelivery,
      queue.ClaimedDelivery,
      queue.ClaimedDelivery,
      queue.ClaimedDelivery,
      queue.ClaimedDelivery,
    ];
    const [n1, n2] = of(never) as [queue.ClaimedDelivery, queue.ClaimedDelivery];
    const after = 1_000;

    expect(await recordAt(f1, "w", 0, false, after)).toEqual({ disabled: [] });
    expect(await recordAt(f2, "w", 999, false, after)).toEqual({ disabled: [] });
    expect(await recordAt(f3, "w", 1_000, false, after)).toEqual({ disabled: [failing.subscriptionId] });
    const found = await subscriptions.findSubscription(db, failing.tenantId, failing.subscriptionId);
    expect(found).toMatchObject({ disabled: true, disabled_reason: "failing", disabled_at: expect.any(Date) });

    await recordAt(r1, "w", 0, false, after);
    await recordAt(r2, "w", 600, true, after);
    await recordAt(r3, "w", 1_200, false, after);
    expect(await recordAt(r4, "w", 2_100, false, after)).toEqual({ disabled: [] });
    expect(await recordAt(r5, "w", 2_200, false, after)).toEqual({ disabled: [recovering.subscriptionId] });

    // WEBHOOK_DISABLE_AFTER=off: never.
    await recordAt(n1, "w", 0, false, null);
    expect(await recordAt(n2, "w", 30 * 86_400_000, false, null)).toEqual({ disabled: [] });
    expect((await subscriptions.findSubscription(db, never.tenantId, never.subscriptionId))?.disabled).toBe(false);
  });

  it("records a batch in which one subscription failed and then succeeded: the clock stops, nothing trips", async () => {
    const { tenantId, subscriptionId } = await subscribe();
    await fanOut(tenantId, 2);
    const [first, second] = (await claimAll("w")).claimed.filter((row) => row.subscription_id === subscriptionId) as [
      queue.ClaimedDelivery,
      queue.ClaimedDelivery,
    ];
    const recorded = await db.transaction((tx) =>
      queue.recordAttempts(tx, [attemptAt(first, "w", 0, false), attemptAt(second, "w", 100, true)], 1),
    );
    expect(recorded).toEqual({ disabled: [] });
    const { rows } = await db.query<{ failing_since: Date | null; disabled: boolean }>(
      "SELECT failing_since, disabled FROM webhooks.subscription WHERE subscription_id = $1",
      [subscriptionId],
    );
    expect(rows[0]).toEqual({ failing_since: null, disabled: false });
    expect((await subscriptions.subscriptionStats(db, subscriptionId)).last24h).toEqual({ succeeded: 1, failed: 1 });
  });

  it("holds a rate-limited subscription to its rate across claims made side by side, within each second of the database's clock", async () => {
    const { tenantId, subscriptionId } = await subscribe();
    await db.transaction((tx) =>
      subscriptions.updateSubscription(tx, tenantId, subscriptionId, { rateLimitPerSecond: 3 }),
    );
    await fanOut(tenantId, 10);
    const owners = ["replica-a", "replica-b"];
    let claimed = 0;
    let throttled = 0;
    while (claimed < 10) {
      const claims = await Promise.all(owners.map(claimAll));
      for (const claim of claims) {
        claimed += claim.claimed.length;
        throttled += claim.throttled.length;
        if (claim.visited.length > 0) await db.transaction((tx) => queue.refreshDue(tx, claim));
      }
      // The next second's allowance: a throttled subscription is due at its start.
      const { rows } = await db.query<{ wait: number }>(
        "SELECT GREATEST(EXTRACT(EPOCH FROM due_at - now()) * 1000, 0)::float8 AS wait FROM webhooks.subscription_due WHERE subscription_id = $1",
        [subscriptionId],
      );
      const wait = rows[0]?.wait ?? 0;
      if (claimed < 10) await new Promise((resolve) => setTimeout(resolve, Math.min(wait, 1_000)));
    }
    expect(throttled).toBeGreaterThan(0);
    // Each delivery was claimed once: its attempt's start is the claim's.
    const { rows: seconds } = await db.query<{ second: string; n: string }>(
      `SELECT floor(EXTRACT(EPOCH FROM attempt_started_at))::text AS second, count(*)::text AS n
         FROM webhooks.delivery WHERE subscription_id = $1 GROUP BY 1 ORDER BY 1`,
      [subscriptionId],
    );
    expect(seconds.reduce((sum, s) => sum + Number(s.n), 0)).toBe(10);
    for (const s of seconds) expect(Number(s.n), JSON.stringify(seconds)).toBeLessThanOrEqual(3);
    expect(seconds.length).toBeGreaterThanOrEqual(4);
  });
});
