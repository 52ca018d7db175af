import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { waitFor } from "../../test/poll.js";
import { createTestDb, type TestDb } from "../db/_testing.js";
import { migrate } from "../db/migrate.js";
import type { Db } from "../db/types.js";
import { createTestBus } from "./_testing.js";
import type { BusMessage } from "./bus.js";
import { applyEvent, type Consumer, type ConsumerDeps, type GroupHandler, startConsumer } from "./consumer.js";
import { buildEvent } from "./events.js";
import { outboxMigrations } from "./outbox.js";

// One database per file, with a consumer schema whose `applied` table counts every time a handler
// ran: a handler that is not idempotent, so only the inbox can keep it to once.
let testDb: TestDb;
let db: Db;
beforeAll(async () => {
  testDb = await createTestDb("consumer_test");
  db = testDb.db;
  await migrate(db, [
    ...outboxMigrations("consumer_test"),
    { id: "test/001_applied.sql", sql: "CREATE TABLE consumer_test.applied (tenant_id uuid NOT NULL)" },
  ]);
});
afterAll(() => testDb[Symbol.asyncDispose]());

const deps = (): ConsumerDeps => ({ db, bus: undefined as never, inboxMs: 86_400_000, now: () => new Date() });

function countingConsumer(durable: string, fail?: () => boolean): Consumer {
  return {
    durable,
    handlers: {
      "servers.server.created": async (tx, event) => {
        await tx.query("INSERT INTO consumer_test.applied (tenant_id) VALUES ($1)", [event.tenantId]);
        if (fail?.()) throw new Error("projection failed");
      },
    },
  };
}

async function appliedCount(tenantId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM consumer_test.applied WHERE tenant_id = $1",
    [tenantId],
  );
  return rows[0]?.n ?? -1;
}

/** The same event as a new transport message: a duplicate no broker de-duplication would catch. */
function message(event: { subject: string; payload: Uint8Array }): BusMessage {
  return { subject: event.subject, eventId: randomUUID(), data: event.payload };
}

/**
 * A bus that hands each message straight to the consumer's handler, as many at once as the test
 * delivers (as JetStream does with concurrency); the handler's promise is the delivery's outcome.
 */
function handingBus(): { bus: ConsumerDeps["bus"]; handler(msg: BusMessage): Promise<void> } {
  let subscribed: ((msg: BusMessage) => Promise<void>) | undefined;
  const bus = {
    subscribe: async (_durable: string, _subjects: readonly string[], h: (msg: BusMessage) => Promise<void>) => {
      subscribed = h;
      return async () => {};
    },
  } as unknown as ConsumerDeps["bus"];
  return {
    bus,
    handler: (msg) => {
      if (!subscribed) throw new Error("no consumer subscribed yet");
      return subscribed(msg);
    },
  };
}

describe("consumer", () => {
  it("applies an event delivered again under another message id once, by the event's own id", async () => {
    const tenantId = randomUUID();
    const event = buildEvent("servers.server.created", { tenantId, serverId: randomUUID(), categoryId: "" });
    const consumer = countingConsumer("once");
    expect(await applyEvent(deps(), consumer, message(event))).toBe(true);
    expect(await applyEvent(deps(), consumer, message(event))).toBe(false);
    expect(await appliedCount(tenantId)).toBe(1);
  });

  it("applies an event delivered to several replicas at once exactly once", async () => {
    const tenantId = randomUUID();
    const event = buildEvent("servers.server.created", { tenantId, serverId: randomUUID(), categoryId: "" });
    const consumer = countingConsumer("racing");
    const results = await Promise.all(Array.from({ length: 8 }, () => applyEvent(deps(), consumer, message(event))));
    expect(results.filter(Boolean)).toHaveLength(1);
    expect(await appliedCount(tenantId)).toBe(1);
  });

  it("records nothing when the handler fails, so the redelivery applies it", async () => {
    const tenantId = randomUUID();
    const event = buildEvent("servers.server.created", { tenantId, serverId: randomUUID(), categoryId: "" });
    let failing = true;
    const consumer = countingConsumer("failing", () => failing);
    await expect(applyEvent(deps(), consumer, message(event))).rejects.toThrow("projection failed");
    expect(await appliedCount(tenantId)).toBe(0);
    failing = false;
    expect(await applyEvent(deps(), consumer, message(event))).toBe(true);
    expect(await appliedCount(tenantId)).toBe(1);
  });

  it("applies the same event once for each consumer", async () => {
    const tenantId = randomUUID();
    const event = buildEvent("servers.server.created", { tenantId, serverId: randomUUID(), categoryId: "" });
    expect(await applyEvent(deps(), countingConsumer("first"), message(event))).toBe(true);
    expect(await applyEvent(deps(), countingConsumer("second"), message(event))).toBe(true);
    expect(await applyEvent(deps(), countingConsumer("second"), message(event))).toBe(false);
    expect(await appliedCount(tenantId)).toBe(2);
  });

  it("does not apply an event older than the inbox window, which it could no longer tell from a duplicate", async () => {
    const tenantId = randomUUID();
    const event = buildEvent("servers.server.created", { tenantId, serverId: randomUUID(), categoryId: "" });
    const later = { ...deps(), now: () => new Date(Date.now() + 2 * 86_400_000) };
    expect(await applyEvent(later, countingConsumer("late"), message(event))).toBe(false);
    expect(await appliedCount(tenantId)).toBe(0);
  });

  it("consumes from the bus: decodes, applies once, and settles", async () => {
    await using testBus = await createTestBus(testDb.dbFor);
    const tenantId = randomUUID();
    const consumer = countingConsumer(`bus_${randomUUID().slice(0, 8)}`);
    onTestFinished(await startConsumer({ ...deps(), bus: testBus.bus }, consumer));
    const events = Array.from({ length: 5 }, () =>
      buildEvent("servers.server.created", { tenantId, serverId: randomUUID(), categoryId: "" }),
    );
    for (const event of events) await testBus.emit(event.subject, event.eventId, event.payload);
    await waitFor("every event applied", async () => (await appliedCount(tenantId)) === 5);
  });

  it("applies the events a concurrent consumer has in flight together in one transaction, and one that fails alone", async () => {
    const { bus, handler } = handingBus();
    const tenantId = randomUUID();
    const poisonTenant = randomUUID();
    let poisoned = true;
    const consumer: Consumer = {
      durable: `grouped_${randomUUID().slice(0, 8)}`,
      concurrency: 8,
      handlers: {
        "servers.server.created": async (tx, event) => {
          await tx.query("INSERT INTO consumer_test.applied (tenant_id) VALUES ($1)", [event.tenantId]);
          if (poisoned && event.tenantId === poisonTenant) throw new Error("projection failed");
        },
      },
    };
    await startConsumer({ ...deps(), bus }, consumer);
    const event = (t: string) =>
      buildEvent("servers.server.created", { tenantId: t, serverId: randomUUID(), categoryId: "" });
    const good = Array.from({ length: 6 }, () => event(tenantId));
    const poison = event(poisonTenant);
    const deliver = (e: ReturnType<typeof event>) => handler(message(e));

    // Six at once: one transaction for all of them.
    await Promise.all(good.map(deliver));
    const { rows } = await db.query<{ n: number }>(
      "SELECT count(DISTINCT xmin::text)::int AS n FROM consumer_test.applied WHERE tenant_id = $1",
      [tenantId],
    );
    expect(rows[0]?.n).toBe(1);
    expect(await appliedCount(tenantId)).toBe(6);

    // A group with a failing event: the others are applied, the failing one rejects (redelivery)...
    const more = Array.from({ length: 3 }, () => event(tenantId));
    const outcomes = await Promise.allSettled([...more, poison].map(deliver));
    expect(outcomes.map((o) => o.status)).toEqual(["fulfilled", "fulfilled", "fulfilled", "rejected"]);
    expect(await appliedCount(tenantId)).toBe(9);
    expect(await appliedCount(poisonTenant)).toBe(0);
    // ...and applies once it can.
    poisoned = false;
    await deliver(poison);
    expect(await appliedCount(poisonTenant)).toBe(1);
  });

  it("hands a group's new events to the group handler in one call: an event twice in the group, or applied before, is not handed again", async () => {
    const { bus, handler } = handingBus();
    const tenantId = randomUUID();
    const calls: { eventIds: string[]; hops: (string | undefined)[] }[] = [];
    const handleGroup: GroupHandler = async (tx, items) => {
      calls.push({ eventIds: items.map((i) => i.event.eventId), hops: items.map((i) => i.hop?.spanId) });
      for (const item of items)
        await tx.query("INSERT INTO consumer_test.applied (tenant_id) VALUES ($1)", [item.event.tenantId]);
    };
    const consumer: Consumer = {
      durable: `group_handler_${randomUUID().slice(0, 8)}`,
      concurrency: 8,
      handleGroup,
      handlers: {
        "servers.server.created": (tx, event) =>
          handleGroup(tx, [{ subject: "servers.server.created", event, hop: tx.trace }]),
      },
    };
    await startConsumer({ ...deps(), bus }, consumer);
    const event = () => buildEvent("servers.server.created", { tenantId, serverId: randomUUID(), categoryId: "" });
    const applied = event();
    await applyEvent(deps(), consumer, message(applied));
    expect(calls).toHaveLength(1);

    const fresh = Array.from({ length: 4 }, event);
    const twice = fresh[0] as ReturnType<typeof event>;
    await Promise.all([...fresh, twice, applied].map((e) => handler(message(e))));
    expect(calls).toHaveLength(2);
    expect(calls[1]?.eventIds.sort()).toEqual(fresh.map((e) => e.eventId).sort());
    // Each event under its own hop, not the group's first.
    expect(new Set(calls[1]?.hops).size).toBe(4);
    expect(calls[1]?.hops.every((h) => typeof h === "string")).toBe(true);
    expect(await appliedCount(tenantId)).toBe(5);
  });
});
