import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { holdTransaction, preparedPlans, type TestDb, testDbModes } from "../../lib/db/_testing.js";
import { retryingSerializationFailure } from "../../lib/db/errors.js";
import type { Db, Queryable } from "../../lib/db/types.js";
import { pollUntil } from "../../test/poll.js";
import * as queue from "./delivery/queue-store.js";
import * as store from "./store.js";

// The fan-out's one statement for a group of events (events.ts), and a subscription's delete, against a real
// database in both modes.

/** The default WEBHOOK_LOG_RETENTION: every delivery these tests make is in sight. */
const LOG_RETENTION_MS = 30 * 86_400_000;

describe.each(testDbModes())("webhooks store ($name database)", ({ name, open }) => {
  let testDb: TestDb;
  let db: Db;
  beforeAll(async () => {
    testDb = await open("webhooks");
    db = testDb.db;
  });
  afterAll(() => testDb[Symbol.asyncDispose]());

  const subscribe = async (tenantId: string, events: string[]) => {
    const subscriptionId = randomUUID();
    await store.insertSubscription(db, {
      subscriptionId,
      tenantId,
      url: `https://receiver.example/${subscriptionId}`,
      events,
      secret: "whsec_test",
    });
    return subscriptionId;
  };

  type Row = { event_id: string; status: string; last_status_code: number | null; attempts: number; body: string };
  const deliveries = async (subscriptionId: string) => {
    const { rows } = await db.query<Row>(
      `SELECT event_id, status, last_status_code, body,
              (SELECT count(*)::int FROM webhooks.attempt a WHERE a.delivery_id = d.delivery_id) AS attempts
         FROM webhooks.delivery d WHERE subscription_id = $1 ORDER BY body`,
      [subscriptionId],
    );
    return rows;
  };

  it("logs an attempt recorded after its lease was taken over, and leaves the delivery's state to the holder", async () => {
    const tenantId = randomUUID();
    const subscriptionId = await subscribe(tenantId, ["asset.ready"]);
    await db.transaction((tx) =>
      store.insertDeliveries(tx, [
        { tenantId, eventId: randomUUID(), event: "asset.ready", body: "{}", firstAttemptAt: new Date(Date.now() - 1) },
      ]),
    );
    const claim = (owner: string) =>
      queue
        .claimDeliveries(db, { owner, leaseMs: 60_000, perSubscription: 16, limit: 10, busy: new Map() })
        .then((claim) => claim.claimed);
    const claimed = (await claim("replica-a")).find((d) => d.subscription_id === subscriptionId);
    if (!claimed) throw new Error("nothing claimed");
    // Replica A's lease runs out while its attempt hangs; replica B claims, sends and succeeds.
    await db.query(
      "UPDATE webhooks.delivery SET lease_expires_at = now() - interval '1 second' WHERE delivery_id = $1",
      [claimed.delivery_id],
    );
    const retaken = (await claim("replica-b")).find((d) => d.delivery_id === claimed.delivery_id);
    // Each claim opened its attempt in the log: A's is 1, B's 2.
    expect([claimed.attempt, retaken?.attempt]).toEqual([1, 2]);
    const record = (owner: string, attempt: number, statusCode: number): queue.AttemptRecord => ({
      deliveryId: claimed.delivery_id,
      attempt,
      owner,
      trigger: "automatic",
      startedAt: new Date(),
      durationMs: 5,
      statusCode,
      error: statusCode === 200 ? null : `HTTP ${statusCode}`,
      nextAttemptAt: statusCode === 200 ? null : new Date(Date.now() + 60_000),
      gone: false,
    });
    await queue.recordAttempts(db, [record("replica-b", 2, 200)]);
    // A's failure comes last: logged, but the delivery stays succeeded, with no attempt due.
    await queue.recordAttempts(db, [record("replica-a", 1, 500)]);
    // Recorded again (a retry after a lost connection): nothing changes.
    await queue.recordAttempts(db, [record("replica-b", 2, 200)]);
    const { rows } = await db.query(
      `SELECT status, last_status_code, next_attempt_at, attempt_count, automatic_attempts, lease_owner
         FROM webhooks.delivery WHERE delivery_id = $1`,
      [claimed.delivery_id],
    );
    expect(rows).toEqual([
      {
        status: "succeeded",
        last_status_code: 200,
        next_attempt_at: null,
        attempt_count: 2,
        automatic_attempts: 1,
        lease_owner: null,
      },
    ]);
    const attempts = await store.listAttempts(db, [claimed.delivery_id]);
    expect(attempts.map((a) => [a.attempt, a.status_code])).toEqual([
      [2, 200],
      [1, 500],
    ]);
  });

  it("counts an attempt on its delivery before its request and logs it once it ends; one whose sender stopped is logged by the takeover or the release", async () => {
    const tenantId = randomUUID();
    const subscriptionId = await subscribe(tenantId, ["asset.ready"]);
    await db.transaction((tx) =>
      store.insertDeliveries(tx, [
        { tenantId, eventId: randomUUID(), event: "asset.ready", body: "{}", firstAttemptAt: new Date(Date.now() - 1) },
      ]),
    );
    const claim = (owner: string) =>
      queue
        .claimDeliveries(db, { owner, leaseMs: 60_000, perSubscription: 16, limit: 10, busy: new Map() })
        .then(({ claimed }) => claimed.find((d) => d.subscription_id === subscriptionId));
    const first = await claim("replica-a");
    if (!first) throw new Error("nothing claimed");
    const counted = () =>
      db
        .query<{ attempt_count: number; started: boolean }>(
          "SELECT attempt_count, attempt_started_at IS NOT NULL AS started FROM webhooks.delivery WHERE delivery_id = $1",
          [first.delivery_id],
        )
        .then((r) => r.rows[0]);
    const logged = () =>
      store.listAttempts(db, [first.delivery_id]).then((rows) => rows.map((a) => [a.attempt, a.trigger, a.error]));
    // In flight: counted on the delivery, not in the log yet.
    expect(await counted()).toEqual({ attempt_count: 1, started: true });
    expect(await logged()).toEqual([]);
    // Replica A dies mid-attempt; its lease runs out and B claims: A's attempt is logged, failed, its start kept.
    await db.query(
      "UPDATE webhooks.delivery SET lease_expires_at = now() - interval '1 second', attempt_started_at = now() - interval '5 seconds' WHERE delivery_id = $1",
      [first.delivery_id],
    );
    const second = await claim("replica-b");
    expect(second?.attempt).toBe(2);
    expect(await logged()).toEqual([[1, "automatic", "no answer recorded: the sender stopped"]]);
    const [abandoned] = await store.listAttempts(db, [first.delivery_id]);
    expect(abandoned?.duration_ms).toBeGreaterThanOrEqual(5_000);
    // B stops with its request cut: handed back, its attempt logged too.
    await queue.releaseDeliveries(db, "replica-b", [first.delivery_id], "cut short: the sender stopped");
    expect(await logged()).toEqual([
      [2, "automatic", "cut short: the sender stopped"],
      [1, "automatic", "no answer recorded: the sender stopped"],
    ]);
    // A's answer arrives after all (its record was only late): its attempt takes the real outcome, the delivery's
    // state stays the holder's.
    await queue.recordAttempts(db, [
      {
        deliveryId: first.delivery_id,
        attempt: 1,
        owner: "replica-a",
        trigger: "automatic",
        startedAt: new Date(),
        durationMs: 12,
        statusCode: 200,
        error: null,
        nextAttemptAt: null,
        gone: false,
      },
    ]);
    expect(await logged()).toEqual([
      [2, "automatic", "cut short: the sender stopped"],
      [1, "automatic", null],
    ]);
    expect((await store.findDelivery(db, tenantId, first.delivery_id, LOG_RETENTION_MS))?.status).toBe("pending");
  });

  it("fans out several events in one statement, each delivery with its own event's body", async () => {
    const [tenantA, tenantB] = [randomUUID(), randomUUID()];
    const a1 = await subscribe(tenantA, ["asset.ready"]);
    const a2 = await subscribe(tenantA, ["asset.ready", "replay.deleted"]);
    const b1 = await subscribe(tenantB, ["replay.deleted"]);
    const [ready1, ready2, deletedA, deletedB] = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
    const event = (tenantId: string, eventId: string, name: string, body: string) => ({
      tenantId,
      eventId,
      event: name,
      body,
      firstAttemptAt: new Date(),
    });
    const { waiting, leased } = await db.transaction((tx) =>
      store.insertDeliveries(tx, [
        event(tenantA, ready1, "asset.ready", "ready-1"),
        event(tenantA, ready2, "asset.ready", "ready-2"),
        event(tenantA, deletedA, "replay.deleted", "deleted-a"),
        event(tenantB, deletedB, "replay.deleted", "deleted-b"),
      ]),
    );
    // No lease asked for: every delivery waits for the worker.
    expect(leased).toEqual([]);
    expect(waiting).toBe(6);

    const row = (eventId: string, body: string, status: string, code: number | null, attempts: number) => ({
      event_id: eventId,
      body,
      status,
      last_status_code: code,
      attempts,
    });
    expect(await deliveries(a1)).toEqual([
      row(ready1, "ready-1", "pending", null, 0),
      row(ready2, "ready-2", "pending", null, 0),
    ]);
    expect(await deliveries(a2)).toEqual([
      row(deletedA, "deleted-a", "pending", null, 0),
      row(ready1, "ready-1", "pending", null, 0),
      row(ready2, "ready-2", "pending", null, 0),
    ]);
    // Another tenant's event reaches that tenant's subscriptions only.
    expect(await deliveries(b1)).toEqual([row(deletedB, "deleted-b", "pending", null, 0)]);
    // An event the bus hands out again fans out once through the inbox, in the same transaction (events.test.ts).
  });

  it("gives deliveries ids in the order they were made (UUID version 7), so a day's log is neighbours in its keys", async () => {
    const tenantId = randomUUID();
    const subscriptionId = await subscribe(tenantId, ["asset.ready"]);
    for (let i = 0; i < 5; i++) {
      await db.transaction((tx) =>
        store.insertDeliveries(tx, [
          { tenantId, eventId: randomUUID(), event: "asset.ready", body: `${i}`, firstAttemptAt: new Date() },
        ]),
      );
      // The next one a millisecond later at least, by the database's clock: the ids' time part orders them.
      const ms = "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint::text AS ms";
      const made = (await db.query<{ ms: string }>(ms)).rows[0]?.ms;
      while ((await db.query<{ ms: string }>(ms)).rows[0]?.ms === made);
    }
    const { rows } = await db.query<{ delivery_id: string; body: string }>(
      "SELECT delivery_id, body FROM webhooks.delivery WHERE subscription_id = $1 ORDER BY delivery_id",
      [subscriptionId],
    );
    expect(rows.map((r) => r.body)).toEqual(["0", "1", "2", "3", "4"]);
    for (const { delivery_id } of rows)
      expect(delivery_id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });

  // Embedded mode sends unnamed statements: nothing is cached there to plan again or not.
  it.skipIf(name !== "postgres")(
    "plans the worker's batch statements once: each settles on its generic plan on a backlog, whatever the batch sizes",
    async () => {
      const tenantId = randomUUID();
      const subscriptions = await Promise.all(Array.from({ length: 10 }, () => subscribe(tenantId, ["asset.ready"])));
      const event = () => ({
        tenantId,
        eventId: randomUUID(),
        event: "asset.ready",
        body: "{}",
        firstAttemptAt: new Date(Date.now() - 1000),
      });
      // A backlog of 5 000 waiting deliveries, analysed: on a near-empty table every plan costs about the same.
      for (let i = 0; i < 5; i++)
        await db.transaction((tx) => store.insertDeliveries(tx, Array.from({ length: 100 }, event)));
      await db.query("ANALYZE webhooks.delivery");
      const plans = await db.transaction(async (tx) => {
        // One connection; small and varying batches, the ones a custom plan is estimated cheapest for.
        for (let i = 0; i < 12; i++) {
          const found = await queue.claimDeliveries(tx, {
            owner: "test",
            leaseMs: 30_000,
            perSubscription: 4,
            limit: 1 + (i % 4),
            busy: new Map(subscriptions.slice(0, i % 3).map((id) => [id, 1])),
          });
          // Other tests' subscriptions, due with nothing to claim (leased), move out of the way as
          // the worker moves them.
          await queue.refreshDue(tx, found);
          const { claimed } = found;
          expect(claimed).toHaveLength(1 + (i % 4));
          await queue.recordAttempts(
            tx,
            claimed.map((d) => ({
              deliveryId: d.delivery_id,
              attempt: d.attempt,
              owner: "test",
              trigger: "automatic",
              startedAt: new Date(),
              durationMs: 3,
              statusCode: 200,
              error: null,
              nextAttemptAt: null,
              gone: false,
            })),
          );
          await store.insertDeliveries(tx, Array.from({ length: 1 + (i % 3) }, event));
        }
        const [claim] = await preparedPlans(tx, "WITH busy AS");
        const [record] = await preparedPlans(tx, "WITH r AS");
        const [fanOut] = await preparedPlans(tx, "WITH e AS");
        return { claim, record, fanOut };
      });
      // Postgres tries five custom plans before it compares, and may still pick a custom one at the
      // next comparison or two (the claim does, depending on the other tests' subscriptions); then
      // it settles on the generic plan. With the arrays in sight of the planner, all 12 were custom.
      // (The connection may have run the fan-out before, outside this transaction.)
      for (const plan of [plans.claim, plans.record, plans.fanOut]) {
        expect(plan?.custom).toBeGreaterThanOrEqual(5);
        expect(plan?.custom).toBeLessThanOrEqual(7);
        expect(plan?.generic).toBeGreaterThanOrEqual(5);
      }
    },
  );

  // Due a year ago: claimed before the backlogs other tests left due.
  const readyEvent = (tenantId: string) => ({
    tenantId,
    eventId: randomUUID(),
    event: "asset.ready",
    body: "{}",
    firstAttemptAt: new Date(Date.now() - 365 * 86_400_000),
  });
  /** Claims every due delivery and records each attempt as failed, a retry due in a minute; returns how many of each subscription's. */
  const attemptAll = async (q: Queryable) => {
    const { claimed } = await queue.claimDeliveries(q, {
      owner: "test",
      leaseMs: 60_000,
      perSubscription: 16,
      limit: 64,
      busy: new Map(),
    });
    await queue.recordAttempts(
      q,
      claimed.map((d) => ({
        deliveryId: d.delivery_id,
        attempt: d.attempt,
        owner: "test",
        trigger: "automatic" as const,
        startedAt: new Date(),
        durationMs: 3,
        statusCode: 500,
        error: "HTTP 500",
        nextAttemptAt: new Date(Date.now() + 60_000),
        gone: false,
      })),
    );
    const counts = new Map<string, number>();
    for (const d of claimed) counts.set(d.subscription_id, (counts.get(d.subscription_id) ?? 0) + 1);
    return counts;
  };
  const logOf = async (subscriptionId: string, deliveryIds: readonly string[] = []) => {
    const { rows } = await db.query<{ deliveries: number; attempts: number; due: number }>(
      `SELECT (SELECT count(*)::int FROM webhooks.delivery WHERE subscription_id = $1) AS deliveries,
              (SELECT count(*)::int FROM webhooks.attempt WHERE delivery_id = ANY ($2::uuid[])) AS attempts,
              (SELECT count(*)::int FROM webhooks.subscription_due WHERE subscription_id = $1) AS due`,
      [subscriptionId, deliveryIds],
    );
    return rows[0];
  };
  const deliveryIdsOf = async (subscriptionId: string) =>
    (
      await db.query<{ delivery_id: string }>("SELECT delivery_id FROM webhooks.delivery WHERE subscription_id = $1", [
        subscriptionId,
      ])
    ).rows.map((r) => r.delivery_id);

  it("deletes a subscription with its deliveries and their attempts, and nothing of another's", async () => {
    const tenantId = randomUUID();
    const [gone, kept] = [await subscribe(tenantId, ["asset.ready"]), await subscribe(tenantId, ["asset.ready"])];
    await db.transaction((tx) => store.insertDeliveries(tx, [readyEvent(tenantId), readyEvent(tenantId)]));
    const attempted = await attemptAll(db);
    expect([attempted.get(gone), attempted.get(kept)]).toEqual([2, 2]);
    const [goneIds, keptIds] = [await deliveryIdsOf(gone), await deliveryIdsOf(kept)];

    expect(await db.transaction((tx) => store.deleteSubscription(tx, randomUUID(), gone))).toBe(false);
    expect(await db.transaction((tx) => store.deleteSubscription(tx, tenantId, gone))).toBe(true);
    expect(await logOf(gone, goneIds)).toEqual({ deliveries: 0, attempts: 0, due: 0 });
    expect(await logOf(kept, keptIds)).toEqual({ deliveries: 2, attempts: 2, due: 1 });
    expect(await db.transaction((tx) => store.deleteSubscription(tx, tenantId, gone))).toBe(false);
  });

  /** Resolves once some statement waits for a lock another transaction holds. */
  const someoneWaits = () =>
    pollUntil(
      async () =>
        (await db.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_locks WHERE NOT granted")).rows[0]?.n ?? 0,
      (waiting) => waiting > 0,
      30_000,
    );

  // Two transactions at once: one connection (embedded) runs them one after the other.
  it.skipIf(name !== "postgres")(
    "takes the deliveries of a fan-out that commits while the delete waits for it, and a later fan-out writes none",
    async () => {
      const tenantId = randomUUID();
      const subscriptionId = await subscribe(tenantId, ["asset.ready"]);
      const fanOut = await holdTransaction(db, (tx) => store.insertDeliveries(tx, [readyEvent(tenantId)]));
      const deleting = db.transaction((tx) => store.deleteSubscription(tx, tenantId, subscriptionId));
      await someoneWaits();
      await fanOut.end();
      expect(await deleting).toBe(true);
      expect(await logOf(subscriptionId)).toEqual({ deliveries: 0, attempts: 0, due: 0 });

      // The other way round: the delete not yet committed, a fan-out waits for it and finds the subscription gone.
      const other = await subscribe(tenantId, ["asset.ready"]);
      const deleteHeld = await holdTransaction(db, (tx) => store.deleteSubscription(tx, tenantId, other));
      expect(deleteHeld.result).toBe(true);
      const late = db.transaction((tx) => store.insertDeliveries(tx, [readyEvent(tenantId)]));
      await someoneWaits();
      await deleteHeld.end();
      await late;
      expect(await logOf(other)).toEqual({ deliveries: 0, attempts: 0, due: 0 });
    },
  );

  // A stopping sender's release logs its attempts with an update of their deliveries only: with the subscription due
  // already, nothing else it holds would make the delete wait (a record also holds the subscription's hourly counts).
  it.skipIf(name !== "postgres")(
    "takes the attempts a statement in flight logs while the delete waits for it",
    async () => {
      const tenantId = randomUUID();
      const subscriptionId = await subscribe(tenantId, ["asset.ready"]);
      const { leased } = await db.transaction((tx) =>
        store.insertDeliveries(tx, [readyEvent(tenantId), readyEvent(tenantId)], {
          owner: "stopping",
          leaseMs: 60_000,
          perSubscription: 16,
          limit: 64,
          busy: new Map(),
        }),
      );
      const ids = leased.map((d) => d.delivery_id);
      expect(ids).toHaveLength(2);
      await db.query("UPDATE webhooks.subscription_due SET due_at = '-infinity' WHERE subscription_id = $1", [
        subscriptionId,
      ]);
      const release = await holdTransaction(db, (tx) =>
        queue.releaseDeliveries(tx, "stopping", ids, queue.unknownOutcome.notSent),
      );
      const deleting = db.transaction((tx) => store.deleteSubscription(tx, tenantId, subscriptionId));
      await someoneWaits();
      await release.end();
      expect(await deleting).toBe(true);
      expect(await logOf(subscriptionId, ids)).toEqual({ deliveries: 0, attempts: 0, due: 0 });
    },
  );
  // Two transactions at once: one connection (embedded) runs them one after the other.
  it.skipIf(name !== "postgres")(
    "replays, tried once more, a delivery that another replay moved back to pending while this one waited for it",
    async () => {
      const tenantId = randomUUID();
      const subscriptionId = await subscribe(tenantId, ["asset.ready"]);
      await db.transaction((tx) => store.insertDeliveries(tx, [readyEvent(tenantId)]));
      const { rows } = await db.query<{ delivery_id: string }>(
        "UPDATE webhooks.delivery SET status = 'failed', next_attempt_at = NULL WHERE subscription_id = $1 RETURNING delivery_id",
        [subscriptionId],
      );
      const deliveryId = rows[0]?.delivery_id as string;
      const failures: unknown[] = [];
      // The first replay moves the delivery from its day's partition to delivery_pending (migration 016): the second,
      // waiting for the row, cannot follow it there and fails with 40001; run again, it finds it pending.
      const first = await holdTransaction(db, (tx) =>
        store.updateDeliveryReplayed(tx, tenantId, deliveryId, LOG_RETENTION_MS),
      );
      const second = retryingSerializationFailure(() =>
        store.updateDeliveryReplayed(db, tenantId, deliveryId, LOG_RETENTION_MS).catch((err: unknown) => {
          failures.push((err as { code?: unknown }).code);
          throw err;
        }),
      );
      await someoneWaits();
      await first.end();
      expect(await second).toMatchObject({ status: "pending", retry_count: 2 });
      expect(failures).toEqual(["40001"]);
    },
  );
});
