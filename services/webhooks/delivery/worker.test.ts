import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it, onTestFinished } from "vitest";
import { type TestDb, testDbModes } from "../../../lib/db/_testing.js";
import type { Db } from "../../../lib/db/types.js";
import { openSecrets } from "../../../lib/secrets/_testing.js";
import { startWorker, type Worker } from "../../../lib/worker/worker.js";
import { freePorts } from "../../../test/free-port.js";
import { pollUntil, waitFor } from "../../../test/poll.js";
import { startWebhookReceiver, type WebhookReceiver } from "../../../test/webhook-receiver.js";
import * as store from "../store.js";
import { createDeliveryClient } from "./client.js";
import * as queue from "./queue-store.js";
import { parseAllowTargets } from "./target.js";
import { type DeliveryWorkerDeps, deliveryWorker } from "./worker.js";

// The delivery worker against a real database (both modes) and a real HTTPS receiver: leases across
// replicas, the per-subscription cap, a dead replica's deliveries, and the drain on stop.

const certDir = inject("webhookReceiver").certDir;
let receiver: WebhookReceiver;
beforeAll(async () => {
  receiver = await startWebhookReceiver({ certDir });
});
afterAll(() => receiver?.close());

describe.each(testDbModes())("delivery worker ($name database)", ({ open }) => {
  let testDb: TestDb;
  let db: Db;
  beforeAll(async () => {
    testDb = await open("webhooks");
    db = testDb.db;
  });
  afterAll(() => testDb[Symbol.asyncDispose]());

  /** `onProbe` hears each probe of an unreachable receiver (the real one runs after it). */
  function worker(overrides: Partial<DeliveryWorkerDeps> = {}, alsoAllow: number[] = [], onProbe = () => {}): Worker {
    const timeoutMs = overrides.timeoutMs ?? 2_000;
    const real = createDeliveryClient({
      timeoutMs,
      allowTargets: parseAllowTargets([receiver.port, ...alsoAllow].map((port) => `127.0.0.1:${port}`)),
      extraCaPem: readFileSync(join(certDir, "cert.pem"), "utf8"),
    });
    const client: typeof real = {
      ...real,
      probe: (url) => {
        onProbe();
        return real.probe(url);
      },
    };
    const w = startWorker(
      deliveryWorker({
        db,
        secrets: openSecrets,
        client,
        retryScheduleMs: [0, 100],
        timeoutMs,
        intervalMs: 100,
        ...overrides,
      }),
    );
    // A test that fails leaves no replica behind to claim the next test's deliveries.
    onTestFinished(() => w.stop(100));
    return w;
  }

  /** A subscription to every event at a fresh receiver path, and `events` events fanned out to it. */
  async function subscriptionWith(
    events: number,
    url = receiver.url(receiver.newPath()),
  ): Promise<{ subscriptionId: string; path: string }> {
    const tenantId = randomUUID();
    const path = new URL(url).pathname;
    const subscriptionId = randomUUID();
    await store.insertSubscription(db, {
      subscriptionId,
      tenantId,
      url,
      events: ["asset.ready"],
      secret: "whsec_test",
    });
    for (let i = 0; i < events; i++) {
      await db.transaction((tx) =>
        store.insertDeliveries(tx, [
          {
            tenantId,
            eventId: randomUUID(),
            event: "asset.ready",
            body: JSON.stringify({ n: i }),
            firstAttemptAt: new Date(),
          },
        ]),
      );
    }
    return { subscriptionId, path };
  }

  async function statuses(subscriptionId: string): Promise<Record<string, number>> {
    const { rows } = await db.query<{ status: string; n: number }>(
      "SELECT status, count(*)::int AS n FROM webhooks.delivery WHERE subscription_id = $1 GROUP BY status",
      [subscriptionId],
    );
    return Object.fromEntries(rows.map((r) => [r.status, r.n]));
  }

  it("three replicas send every delivery exactly once, one attempt each", async () => {
    const subs = await Promise.all(Array.from({ length: 3 }, () => subscriptionWith(20)));
    // A generous timeout: the receiver shares this process (and, embedded, the database's) event loop.
    const replicas = [worker({ timeoutMs: 15_000 }), worker({ timeoutMs: 15_000 }), worker({ timeoutMs: 15_000 })];
    for (const { subscriptionId } of subs) {
      await pollUntil(
        () => statuses(subscriptionId),
        (s) => s.succeeded === 20,
        20_000,
      ).catch(async (err) => {
        const { rows } = await db.query("SELECT last_error, count(*) FROM webhooks.delivery GROUP BY 1");
        throw new Error(`${err.message} ${JSON.stringify(rows)}`);
      });
    }
    for (const { path } of subs) {
      const ids = receiver.requests(path).map((r) => r.headers["x-fv-event-id"]);
      expect(ids).toHaveLength(20);
      expect(new Set(ids).size).toBe(20);
    }
    const { rows } = await db.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM webhooks.attempt a JOIN webhooks.delivery d USING (delivery_id) WHERE d.subscription_id = ANY($1::uuid[])",
      [subs.map((s) => s.subscriptionId)],
    );
    expect(rows[0]?.n).toBe(60);
    await Promise.all(replicas.map((w) => w.stop()));
  }, 120_000);

  it("lets a hanging receiver hold its subscription's slots only, while another subscription's deliveries go through", async () => {
    const hanging = await subscriptionWith(10);
    receiver.behave(hanging.path, { hang: true });
    // The hanging receiver holds its two requests open until the worker stops (a latch, not a race
    // with a timer): an attempt timeout longer than the whole wait below cannot free their slots.
    const w = worker({ maxInFlight: 4, perSubscription: 2, timeoutMs: 60_000 });
    // Two hanging attempts take two of the four slots...
    await receiver.waitForRequests(hanging.path, 2, 20_000);
    const live = await subscriptionWith(12);
    await pollUntil(
      () => statuses(live.subscriptionId),
      (s) => s.succeeded === 12,
      30_000,
    );
    // ...and the live subscription's twelve went through the other two while both still hung.
    expect(receiver.requests(hanging.path).map((r) => r.closed)).toEqual([false, false]);
    await w.stop(100);
  });

  it("attempts a delivery again once the lease of a replica that died mid-attempt runs out", async () => {
    const { subscriptionId, path } = await subscriptionWith(1);
    // A replica claims the delivery and dies before recording anything.
    const { claimed } = await queue.claimDeliveries(db, {
      owner: "dead-replica",
      leaseMs: 500,
      perSubscription: 16,
      limit: 10,
      busy: new Map(),
    });
    expect(claimed.map((c) => c.body)).toContain(JSON.stringify({ n: 0 }));
    const w = worker();
    await pollUntil(
      () => statuses(subscriptionId),
      (s) => s.succeeded === 1,
      30_000,
    );
    expect(receiver.requests(path)).toHaveLength(1);
    await w.stop();
  });

  it("holds an unreachable receiver's deliveries without spending attempts, and sends them all once a probe finds it back", async () => {
    const [port] = (await freePorts(1)) as [number];
    const { subscriptionId } = await subscriptionWith(5, `https://127.0.0.1:${port}/down`);
    const attempts = async () => {
      const { rows } = await db.query<{ attempt_count: number; status: string }>(
        "SELECT attempt_count, status, last_error FROM webhooks.delivery WHERE subscription_id = $1",
        [subscriptionId],
      );
      return rows;
    };
    // Nothing listens: the first attempts fail as refused connections, and the schedule would spend
    // the second 100 ms later; the breaker holds them instead (for at most UNREACHABLE_HOLD_MS).
    let probes = 0;
    worker({ retryScheduleMs: [0, 100, 60_000] }, [port], () => probes++);
    await pollUntil(attempts, (rows) => rows.length === 5 && rows.every((r) => r.attempt_count === 1), 30_000);
    // Then nothing while two probes (a second apart) find it still down, where the schedule would
    // have spent the second attempts 100 ms after the first and the worker polls every 100 ms.
    const probed = probes;
    await waitFor("two more probes of the unreachable receiver", () => probes >= probed + 2, 30_000);
    expect(await attempts()).toEqual(
      Array(5).fill({ attempt_count: 1, status: "pending", last_error: "connection error: ECONNREFUSED" }),
    );

    const back = await startWebhookReceiver({ port, certDir });
    onTestFinished(() => back.close());
    await back.waitForRequests("/down", 5, 30_000);
    await pollUntil(attempts, (rows) => rows.every((r) => r.status === "succeeded"), 30_000);
  });

  it("holds an unreachable receiver once, for its bound: then the deliveries follow the schedule to failed", async () => {
    const [port] = (await freePorts(1)) as [number];
    const { subscriptionId } = await subscriptionWith(3, `https://127.0.0.1:${port}/gone`);
    const state = async () => {
      const { rows } = await db.query<{ attempt_count: number; status: string }>(
        "SELECT attempt_count, status FROM webhooks.delivery WHERE subscription_id = $1",
        [subscriptionId],
      );
      return rows;
    };
    // Five attempts 100 ms apart, the hold 4 s. Held once, one gap between a delivery's attempts
    // lasts the hold and the others follow the schedule; held again after each failure, every gap
    // after the first would last the hold too (half the hold tells the two apart). The gaps come
    // from the attempt log once all deliveries failed: a slow machine makes the test slower, not
    // wrong (it measured the whole run against 7 s before).
    const holdMs = 4_000;
    worker({ retryScheduleMs: [0, 100, 100, 100, 100], unreachableHoldMs: holdMs }, [port]);
    await pollUntil(state, (rows) => rows.length === 3 && rows.every((r) => r.status === "failed"), 60_000);
    expect(await state()).toEqual(Array(3).fill({ attempt_count: 5, status: "failed" }));
    const { rows: gaps } = await db.query<{ held: number }>(
      `SELECT count(*) FILTER (WHERE gap_ms >= $2)::int AS held
         FROM (SELECT a.delivery_id, extract(epoch FROM a.started_at - lag(a.started_at)
                        OVER (PARTITION BY a.delivery_id ORDER BY a.attempt)) * 1000 AS gap_ms
                 FROM webhooks.attempt a JOIN webhooks.delivery d USING (delivery_id)
                WHERE d.subscription_id = $1) g
        GROUP BY delivery_id`,
      [subscriptionId, holdMs / 2],
    );
    expect(gaps.map((g) => g.held)).toEqual([1, 1, 1]);
  });

  it("attempts a fan-out's leased deliveries once it commits, records each like a claimed one, and sends nothing for one that rolls back", async () => {
    const tenantId = randomUUID();
    const paths = { ok: receiver.newPath(), failing: receiver.newPath(), slow: receiver.newPath() };
    receiver.behave(paths.failing, { status: 500 });
    receiver.behave(paths.slow, { delayMs: 300 });
    const ids: Record<string, string> = {};
    for (const [name, path] of Object.entries(paths)) {
      ids[name] = randomUUID();
      await store.insertSubscription(db, {
        subscriptionId: ids[name] as string,
        tenantId,
        url: receiver.url(path),
        events: ["asset.ready"],
        secret: "whsec_test",
      });
    }
    const spec = deliveryWorker({
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
    const w = startWorker(spec);
    onTestFinished(() => w.stop(100));
    // What events.ts's fan-out does in the consumer's transaction.
    const fanOut = (eventId: string, commit: boolean) =>
      db.transaction(async (tx) => {
        const { leased } = await store.insertDeliveries(
          tx,
          [{ tenantId, eventId, event: "asset.ready", body: JSON.stringify({ eventId }), firstAttemptAt: new Date() }],
          spec.fanOutLease(),
        );
        tx.onCommit(() => spec.startLeased(leased));
        if (!commit) throw new Error("rolled back");
        return leased;
      });
    const deliveries = async (eventId: string) => {
      const { rows } = await db.query<{
        subscription_id: string;
        status: string;
        attempt_count: number;
        last_status_code: number | null;
        leased: boolean;
        retry_due: boolean;
        attempts: number;
      }>(
        `SELECT subscription_id, status, attempt_count, last_status_code, lease_owner IS NOT NULL AS leased,
                COALESCE(next_attempt_at > now() + interval '30 seconds', false) AS retry_due,
                (SELECT count(*)::int FROM webhooks.attempt a WHERE a.delivery_id = d.delivery_id) AS attempts
           FROM webhooks.delivery d WHERE event_id = $1`,
        [eventId],
      );
      return Object.fromEntries(rows.map(({ subscription_id, ...r }) => [subscription_id, r]));
    };

    // A fan-out that rolls back stores nothing and sends nothing: the event comes again.
    const rolledBack = randomUUID();
    await expect(fanOut(rolledBack, false)).rejects.toThrow("rolled back");
    expect(await deliveries(rolledBack)).toEqual({});

    const committed = randomUUID();
    const leased = await fanOut(committed, true);
    expect(leased.map((d) => d.subscription_id).sort()).toEqual(Object.values(ids).sort());
    expect(leased.every((d) => d.url.startsWith("https://127.0.0.1:") && d.secret === "whsec_test")).toBe(true);
    await pollUntil(
      () => deliveries(committed),
      (d) => Object.values(d).every((r) => r.attempts === 1 && !r.leased),
      30_000,
    );
    const succeeded = {
      status: "succeeded",
      attempt_count: 1,
      last_status_code: 200,
      leased: false,
      retry_due: false,
      attempts: 1,
    };
    expect(await deliveries(committed)).toEqual({
      [ids.ok as string]: succeeded,
      [ids.failing as string]: {
        status: "pending",
        attempt_count: 1,
        last_status_code: 500,
        leased: false,
        retry_due: true,
        attempts: 1,
      },
      [ids.slow as string]: succeeded,
    });
    // One request each, the committed event's: the rolled-back fan-out sent nothing.
    for (const path of Object.values(paths)) {
      const sent = receiver.requests(path).map((r) => (r.json as { eventId: string }).eventId);
      expect(sent).toEqual([committed]);
    }
  });

  it("leases a fan-out's deliveries within the worker's caps, and leaves the rest to the claims", async () => {
    const tenantId = randomUUID();
    const [free, full] = [randomUUID(), randomUUID()];
    for (const subscriptionId of [free, full])
      await store.insertSubscription(db, {
        subscriptionId,
        tenantId,
        url: receiver.url(receiver.newPath()),
        events: ["asset.ready"],
        secret: "whsec_test",
      });
    const events = Array.from({ length: 3 }, () => ({
      tenantId,
      eventId: randomUUID(),
      event: "asset.ready",
      body: "{}",
      firstAttemptAt: new Date(),
    }));
    const later = {
      ...events[0],
      eventId: randomUUID(),
      firstAttemptAt: new Date(Date.now() + 60_000),
    } as (typeof events)[0];
    const result = await db.transaction((tx) =>
      store.insertDeliveries(tx, [...events, later], {
        owner: "test",
        leaseMs: 30_000,
        perSubscription: 2,
        limit: 10,
        // `free` has one attempt in flight, `full` its cap.
        busy: new Map([
          [free, 1],
          [full, 2],
        ]),
      }),
    );
    // One more for `free` (its cap less the one in flight), none for `full`, none not yet due.
    expect(result.leased.map((d) => d.subscription_id)).toEqual([free]);
    expect(result.waiting).toBe(7);
    const limited = await db.transaction((tx) =>
      store.insertDeliveries(
        tx,
        events.map((e) => ({ ...e, eventId: randomUUID() })),
        { owner: "test", leaseMs: 30_000, perSubscription: 10, limit: 4, busy: new Map() },
      ),
    );
    expect(limited.leased).toHaveLength(4);
    expect(limited.waiting).toBe(2);
  });

  it("on stop, finishes and records the attempts in flight, and hands back those that outlast the drain once their requests are cut", async () => {
    const slow = await subscriptionWith(2);
    receiver.behave(slow.path, { delayMs: 300 });
    const w = worker();
    await receiver.waitForRequests(slow.path, 2, 20_000);
    await w.stop();
    expect(await statuses(slow.subscriptionId)).toEqual({ succeeded: 2 });

    const stuck = await subscriptionWith(1);
    receiver.behave(stuck.path, { hang: true });
    const w2 = worker({ timeoutMs: 10_000 });
    await receiver.waitForRequests(stuck.path, 1, 20_000);
    const stopping = w2.stop(200);
    // Handed back only once its request was cut: another replica may claim it at once.
    await pollUntil(
      async () =>
        (
          await db.query("SELECT 1 FROM webhooks.delivery WHERE subscription_id = $1 AND lease_owner IS NULL", [
            stuck.subscriptionId,
          ])
        ).rows.length,
      (n) => n === 1,
      20_000,
      5,
    );
    expect(receiver.requests(stuck.path)[0]?.closed).toBe(true);
    await stopping;
    const { rows } = await db.query<{ lease_owner: string | null; attempt_count: number; status: string }>(
      "SELECT lease_owner, attempt_count, status FROM webhooks.delivery WHERE subscription_id = $1",
      [stuck.subscriptionId],
    );
    // Its request was sent and cut: the log shows that attempt, failed, and the delivery goes on.
    expect(rows).toEqual([{ lease_owner: null, attempt_count: 1, status: "pending" }]);
    const { rows: logged } = await db.query<{ error: string }>(
      "SELECT a.error FROM webhooks.attempt a JOIN webhooks.delivery d USING (delivery_id) WHERE d.subscription_id = $1",
      [stuck.subscriptionId],
    );
    expect(logged).toEqual([{ error: "cut short: the sender stopped" }]);
  });
});
