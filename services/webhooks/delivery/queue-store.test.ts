import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { holdTransaction, type TestDb, testDbModes } from "../../../lib/db/_testing.js";
import type { Db, Queryable, QueryResult } from "../../../lib/db/types.js";
import { pollUntil } from "../../../test/poll.js";
import * as store from "../store.js";
import * as queue from "./queue-store.js";

// The worker's queue against a real database (both modes): what a claim and the worker's sleep read
// (subscription_due), how each write moves a subscription's due time, and that a claim
// never moves one past a delivery a writer has not committed yet.

const claimOptions = { owner: "test-worker", leaseMs: 60_000, perSubscription: 4, limit: 16, busy: new Map() };
/** The default WEBHOOK_LOG_RETENTION: every delivery these tests make is in sight. */
const LOG_RETENTION_MS = 30 * 86_400_000;

/**
 * The buffers (shared blocks hit or read) the next statement sent through it touches, by running it
 * under EXPLAIN (ANALYZE, BUFFERS): what a statement costs, counted by Postgres, whatever the
 * machine's speed. The statement runs for real (its writes included).
 */
function countingBuffers(q: Queryable): Queryable & { blocks: number } {
  const counting = {
    blocks: 0,
    async query<R>(text: string, params?: readonly unknown[]): Promise<QueryResult<R>> {
      const { rows } = await q.query<{ "QUERY PLAN": [{ Plan: Record<string, number> }] }>(
        `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${text}`,
        params,
      );
      const plan = rows[0]?.["QUERY PLAN"][0]?.Plan ?? {};
      counting.blocks = (plan["Shared Hit Blocks"] ?? 0) + (plan["Shared Read Blocks"] ?? 0);
      return { rows: [], rowCount: 0 };
    },
  };
  return counting;
}

describe.each(testDbModes())("delivery queue ($name database)", ({ name, open }) => {
  let testDb: TestDb;
  let db: Db;
  beforeAll(async () => {
    testDb = await open("webhooks");
    db = testDb.db;
  });
  afterAll(() => testDb[Symbol.asyncDispose]());

  const subscribe = async (tenantId = randomUUID()) => {
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
  const fanOut = (tenantId: string, firstAttemptAt = new Date(Date.now() - 1_000)) =>
    db.transaction((tx) =>
      store.insertDeliveries(tx, [
        { tenantId, eventId: randomUUID(), event: "asset.ready", body: "{}", firstAttemptAt },
      ]),
    );
  const dueAt = async (subscriptionId: string) => {
    const { rows } = await db.query<{ due_at: string }>(
      "SELECT due_at::text FROM webhooks.subscription_due WHERE subscription_id = $1",
      [subscriptionId],
    );
    return rows[0]?.due_at;
  };
  /** Due a second ago with nothing pending, as after a delivery that succeeded since. */
  const dueASecondAgo = (subscriptionId: string) =>
    db.query("UPDATE webhooks.subscription_due SET due_at = now() - interval '1 second' WHERE subscription_id = $1", [
      subscriptionId,
    ]);
  /** A claim as the worker makes it: the statement, then the drained subscriptions moved on. */
  const claim = async (options: Partial<typeof claimOptions> = {}) => {
    const found = await queue.claimDeliveries(db, { ...claimOptions, ...options });
    await db.transaction((tx) => queue.refreshDue(tx, found));
    return found.claimed;
  };
  const record = (d: queue.ClaimedDelivery, outcome: { error: string | null; nextAttemptAt: Date | null }) =>
    queue.recordAttempts(db, [
      {
        deliveryId: d.delivery_id,
        attempt: d.attempt,
        owner: claimOptions.owner,
        trigger: d.manual ? "manual" : "automatic",
        startedAt: new Date(),
        durationMs: 5,
        statusCode: outcome.error === null ? 200 : 500,
        gone: false,
        ...outcome,
      },
    ]);

  it("claims and sleeps reading only subscriptions with work due: 400 idle ones cost nothing more", async () => {
    // Whatever other tests left due is claimed and recorded first: the two statements then read an
    // empty range of subscription_due, which is what is measured.
    for (let round = 0; round < 10; round++) {
      const left = await claim({ limit: 256, perSubscription: 16 });
      for (const d of left) await record(d, { error: null, nextAttemptAt: null });
    }
    const claimCost = async () => {
      const counting = countingBuffers(db);
      await queue.claimDeliveries(counting, claimOptions);
      const claimBlocks = counting.blocks;
      await queue.nextDueInMs(counting);
      return { claim: claimBlocks, nextDue: counting.blocks };
    };
    const before = await claimCost();

    // 400 subscriptions of 400 tenants, each with ended deliveries in its log, nothing pending: the
    // platform a year on, at a small scale.
    const tenants = Array.from({ length: 400 }, () => randomUUID());
    const subscriptions = Array.from({ length: 400 }, () => randomUUID());
    await db.query(
      `WITH s AS (
         INSERT INTO webhooks.subscription (subscription_id, tenant_id, url, events, secret)
         SELECT s, t, 'https://receiver.example/' || s, '{asset.ready}', 'whsec_test'
           FROM unnest($1::uuid[], $2::uuid[]) AS x(s, t)
         RETURNING subscription_id, tenant_id
       ), due AS (
         INSERT INTO webhooks.subscription_due (subscription_id, due_at) SELECT subscription_id, 'infinity' FROM s
       )
       INSERT INTO webhooks.delivery (delivery_id, tenant_id, subscription_id, event_id, event, body, status, updated_at)
       SELECT gen_random_uuid(), s.tenant_id, s.subscription_id, gen_random_uuid(), 'asset.ready', '{}',
              CASE WHEN n = 1 THEN 'succeeded' ELSE 'failed' END, now() - n * interval '1 hour'
         FROM s CROSS JOIN generate_series(1, 3) n`,
      [subscriptions, tenants],
    );
    await db.query("ANALYZE webhooks.subscription_due");
    const after = await claimCost();

    // The claim used to probe every subscription's deliveries: 400 subscriptions, 400+ blocks.
    expect(after.claim).toBeLessThanOrEqual(before.claim + 4);
    expect(after.claim).toBeLessThan(30);
    expect(after.nextDue).toBeLessThanOrEqual(before.nextDue + 4);
    expect(after.nextDue).toBeLessThan(10);
  });

  it("records attempts in one statement that makes its own commit asynchronous, with no BEGIN, SET or COMMIT around it", async () => {
    const { tenantId } = await subscribe();
    await fanOut(tenantId);
    const [claimed] = await claim();
    if (!claimed) throw new Error("nothing claimed");
    // Within a transaction the statement's setting shows; on its own it is that transaction's, its commit's.
    const setting = await db.transaction(async (tx) => {
      await queue.recordAttempts(tx, [
        {
          deliveryId: claimed.delivery_id,
          attempt: claimed.attempt,
          owner: claimOptions.owner,
          trigger: "automatic",
          startedAt: new Date(),
          durationMs: 5,
          statusCode: 200,
          error: null,
          nextAttemptAt: null,
          gone: false,
        },
      ]);
      const { rows } = await tx.query<{ setting: string }>("SELECT current_setting('synchronous_commit') AS setting");
      return rows[0]?.setting;
    });
    expect(setting).toBe("off");
    const { rows } = await db.query<{ status: string }>("SELECT status FROM webhooks.delivery WHERE delivery_id = $1", [
      claimed.delivery_id,
    ]);
    expect(rows[0]?.status).toBe("succeeded");
  });

  it("moves a subscription's due time with each write: fan-out, retry, manual replay, success", async () => {
    const { tenantId, subscriptionId } = await subscribe();
    expect(await dueAt(subscriptionId)).toBe("infinity");

    const firstAttemptAt = new Date(Date.now() - 1_000);
    await fanOut(tenantId, firstAttemptAt);
    expect(new Date((await dueAt(subscriptionId)) ?? "").getTime()).toBe(firstAttemptAt.getTime());

    // At its cap in this replica: not claimed, and not moved either (it still has work due).
    expect(await claim({ busy: new Map([[subscriptionId, claimOptions.perSubscription]]) })).toEqual([]);
    expect(new Date((await dueAt(subscriptionId)) ?? "").getTime()).toBe(firstAttemptAt.getTime());

    const [first] = (await claim()).filter((d) => d.subscription_id === subscriptionId);
    if (!first) throw new Error("nothing claimed");
    // Failed, the next attempt in a minute: a claim finds nothing due and moves the subscription on
    // to that minute, which is when the worker wakes.
    const retryAt = new Date(Date.now() + 60_000);
    await record(first, { error: "HTTP 500", nextAttemptAt: retryAt });
    expect(await claim()).toEqual([]);
    expect(new Date((await dueAt(subscriptionId)) ?? "").getTime()).toBe(retryAt.getTime());
    const sleep = await queue.nextDueInMs(db);
    expect(sleep).toBeGreaterThan(50_000);
    expect(sleep).toBeLessThanOrEqual(60_000);

    // A manual replay is due at once.
    expect(await store.updateDeliveryReplayed(db, tenantId, first.delivery_id, LOG_RETENTION_MS)).toBeDefined();
    expect(await dueAt(subscriptionId)).toBe("-infinity");
    const [manual] = await claim();
    expect(manual).toMatchObject({ delivery_id: first.delivery_id, manual: true });
    if (!manual) throw new Error("nothing claimed");
    // While it is in flight, a claim moves the subscription to the end of its lease, no later: if
    // this worker died with it, the delivery would be claimed again then.
    expect(await claim()).toEqual([]);
    const leaseEnd = new Date((await dueAt(subscriptionId)) ?? "").getTime();
    expect(leaseEnd).toBeGreaterThan(Date.now() + 30_000);
    expect(leaseEnd).toBeLessThanOrEqual(Date.now() + claimOptions.leaseMs);

    // It succeeds: nothing is pending. Nothing writes the subscription for that (a success takes
    // no lock); once the lease's end comes, the claim that looks finds nothing and the subscription
    // leaves the claims and the sleep.
    await record(manual, { error: null, nextAttemptAt: null });
    expect(new Date((await dueAt(subscriptionId)) ?? "").getTime()).toBe(leaseEnd);
    await db.query(
      "UPDATE webhooks.subscription_due SET due_at = now() - interval '1 millisecond' WHERE subscription_id = $1",
      [subscriptionId],
    );
    expect(await claim()).toEqual([]);
    expect(await dueAt(subscriptionId)).toBe("infinity");
  });

  it("moves a fan-out's leased deliveries' subscription to the end of their lease, and a handed-back one to now", async () => {
    const { tenantId, subscriptionId } = await subscribe();
    const { leased } = await db.transaction((tx) =>
      store.insertDeliveries(
        tx,
        [
          {
            tenantId,
            eventId: randomUUID(),
            event: "asset.ready",
            body: "{}",
            firstAttemptAt: new Date(Date.now() - 1),
          },
        ],
        { owner: "fan-out-worker", leaseMs: 60_000, perSubscription: 4, limit: 4, busy: new Map() },
      ),
    );
    expect(leased).toHaveLength(1);
    const leaseEnd = new Date((await dueAt(subscriptionId)) ?? "").getTime();
    expect(leaseEnd).toBeGreaterThan(Date.now() + 30_000);
    // Handed back by a stopping worker: claimable at once by another replica.
    await queue.releaseDeliveries(db, "fan-out-worker", [leased[0]?.delivery_id ?? ""], queue.unknownOutcome.notSent);
    expect(new Date((await dueAt(subscriptionId)) ?? "").getTime()).toBeLessThanOrEqual(Date.now());
    expect((await claim()).map((d) => d.delivery_id)).toContain(leased[0]?.delivery_id);
  });

  // Two transactions at once: one connection (embedded) runs them one after the other.
  it.skipIf(name !== "postgres")(
    "brings a subscription forward past a refresh that committed while the write waited for it",
    async () => {
      const { tenantId, subscriptionId } = await subscribe();
      await dueASecondAgo(subscriptionId);
      // A claim's refresh, nothing pending: it moves the subscription to 'infinity' and holds its
      // due lock until it commits.
      const refresh = await holdTransaction(db, (tx) =>
        queue.refreshDue(tx, { visited: [subscriptionId], drained: [subscriptionId] }),
      );
      // A fan-out starts now, from a snapshot that still shows the subscription due a second ago,
      // and waits for the due lock.
      const firstAttemptAt = new Date();
      const writing = fanOut(tenantId, firstAttemptAt);
      await pollUntil(
        async () =>
          (
            await db.query<{ n: number }>(
              "SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted",
            )
          ).rows[0]?.n ?? 0,
        (waiting) => waiting > 0,
        30_000,
      );
      await refresh.end();
      await writing;
      // It read the row anew once it had the lock: brought forward from 'infinity' to its delivery.
      expect(new Date((await dueAt(subscriptionId)) ?? "").getTime()).toBe(firstAttemptAt.getTime());
      expect((await claim()).map((d) => d.subscription_id)).toContain(subscriptionId);
    },
  );

  // A snapshot held open (an analytics query) keeps every sent delivery's index entry alive; the
  // embedded database's one connection cannot hold one beside the claims.
  it.skipIf(name !== "postgres")(
    "reads a subscription's deliveries from its first pending one, not past every one it sent, under a held snapshot",
    async () => {
      const { tenantId, subscriptionId } = await subscribe();
      await db.transaction((tx) =>
        store.insertDeliveries(
          tx,
          Array.from({ length: 600 }, (_, i) => ({
            tenantId,
            eventId: randomUUID(),
            event: "asset.ready",
            body: "{}",
            firstAttemptAt: new Date(Date.now() - 60_000 + i),
          })),
        ),
      );
      const snapshot = await holdTransaction(db, async (tx) => {
        await tx.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ");
        await tx.query("SELECT count(*) FROM webhooks.delivery");
      });
      try {
        // 560 sent and recorded, 40 left pending behind them.
        for (let sent = 0; sent < 560; ) {
          const batch = (await claim({ limit: 40, perSubscription: 40 })).filter(
            (d) => d.subscription_id === subscriptionId,
          );
          for (const d of batch) await record(d, { error: null, nextAttemptAt: null });
          sent += batch.length;
        }
        const counting = countingBuffers(db);
        await queue.claimDeliveries(counting, claimOptions);
        // From the start of its range the claim read all 560 sent deliveries first: 1 058 blocks here, 168 from scan_from.
        expect(counting.blocks).toBeLessThan(300);
      } finally {
        await snapshot.end();
      }
    },
  );

  // Two transactions at once: one connection (embedded) runs them one after the other.
  it.skipIf(name !== "postgres")(
    "never moves a subscription past a delivery a writer has not committed yet",
    async () => {
      const { tenantId, subscriptionId } = await subscribe();
      // Due a second ago with nothing pending (a delivery that succeeded since): a writer adding a
      // delivery due later moves nothing, it only holds the row until it commits.
      await dueASecondAgo(subscriptionId);
      const writer = await holdTransaction(db, (tx) =>
        store.insertDeliveries(tx, [
          { tenantId, eventId: randomUUID(), event: "asset.ready", body: "{}", firstAttemptAt: new Date() },
        ]),
      );
      const stale = await dueAt(subscriptionId);

      // A claim now sees nothing pending for it. Its refresh skips the row the writer holds instead
      // of moving it to 'infinity' (and never waits for it).
      const found = await queue.claimDeliveries(db, claimOptions);
      expect(found.claimed.filter((d) => d.subscription_id === subscriptionId)).toEqual([]);
      expect(found.drained).toContain(subscriptionId);
      await db.transaction((tx) => queue.refreshDue(tx, found));
      expect(await dueAt(subscriptionId)).toBe(stale);

      await writer.end();
      expect((await claim()).map((d) => d.subscription_id)).toContain(subscriptionId);
    },
  );
});
