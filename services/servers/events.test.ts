import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { createTestBus } from "../../lib/bus/_testing.js";
import { applyEvent, startConsumer } from "../../lib/bus/consumer.js";
import { buildEvent } from "../../lib/bus/events.js";
import { outboxMigrations } from "../../lib/bus/outbox.js";
import { createTestDb } from "../../lib/db/_testing.js";
import { migrate, readMigrations } from "../../lib/db/migrate.js";
import type { Db } from "../../lib/db/types.js";
import { sourceFolder } from "../../lib/paths.js";
import { waitFor } from "../../test/poll.js";
import { serversConsumers } from "./events.js";
import * as store from "./store.js";

// The servers service's projections, fed through the real bus adapter (NATS with NATS_URL, else
// in-process) into the real schema (Postgres with DATABASE_URL, else embedded).
async function setup() {
  const testDb = await createTestDb("servers");
  await migrate(testDb.db, [
    ...outboxMigrations("servers"),
    ...(await readMigrations(sourceFolder(import.meta.url, "./migrations"))),
  ]);
  const testBus = await createTestBus(testDb.dbFor);
  const deps = { db: testDb.db, bus: testBus.bus, inboxMs: 86_400_000, now: () => new Date() };
  const stops = await Promise.all(serversConsumers.map((consumer) => startConsumer(deps, consumer)));
  return {
    db: testDb.db,
    bus: testBus,
    deps,
    async [Symbol.asyncDispose]() {
      for (const stop of stops) await stop();
      await testBus[Symbol.asyncDispose]();
      await testDb[Symbol.asyncDispose]();
    },
  };
}

/**
 * Waits until the servers inbox holds every one of `events`: each is applied (the inbox row is
 * written in the handler's transaction), so what a test asserts next is the final state, not a
 * state the projection passes through on its way.
 */
async function waitUntilApplied(db: Db, events: { eventId: string }[]) {
  await waitFor(`all ${events.length} events applied`, async () => {
    const { rows } = await db.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM servers.inbox WHERE event_id = ANY($1::uuid[])",
      [events.map((e) => e.eventId)],
    );
    return rows[0]?.n === events.length;
  });
}

async function insertConnected(db: Db, tenantId: string, serverId: string) {
  await db.transaction((tx) =>
    store.insertServer(tx, { serverId, tenantId, name: "s", categoryId: null, sourceServerId: null }),
  );
}

describe("servers projections", () => {
  it("keeps the newest plan of a tenant, whatever order plan events arrive in", async () => {
    await using ctx = await setup();
    const tenantId = randomUUID();
    const plan = (version: number, serverLimit: number) =>
      buildEvent("identity.tenant.upserted", {
        tenantId,
        serverLimit: BigInt(serverLimit),
        storageQuotaBytes: 0n,
        version: BigInt(version),
      });
    // The newest first, then the older ones: without the version guard the last applied (v2) wins.
    const events = [plan(3, 9), plan(1, 3), plan(2, 7)];
    for (const event of events) await ctx.bus.emit(event.subject, event.eventId, event.payload);
    await waitUntilApplied(ctx.db, events);
    expect((await store.findTenantPlan(ctx.db, tenantId))?.server_limit).toBe(9);
  });

  it("counts a server's existing replays, applying each event once even when it is delivered again past the bus", async () => {
    await using ctx = await setup();
    const tenantId = randomUUID();
    const serverId = randomUUID();
    await insertConnected(ctx.db, tenantId, serverId);
    const replays = [randomUUID(), randomUUID(), randomUUID()];
    const events = [
      ...replays.map((replayId) => buildEvent("replays.recording.started", { tenantId, replayId, serverId })),
      buildEvent("replays.replay.deleted", { tenantId, replayId: replays[0], serverId, sizeBytes: 10n }),
    ];
    for (const event of events) await ctx.bus.emit(event.subject, event.eventId, event.payload);
    // Subjects are consumed independently, so wait until the inbox holds all four, then count.
    await waitUntilApplied(ctx.db, events);
    expect((await store.findServerById(ctx.db, tenantId, serverId))?.replay_count).toBe(2);
    // The deleted replay's start again, as a new message no broker de-duplication would catch: the
    // inbox knows the event and the replay stays deleted.
    const again = events[0] as (typeof events)[0];
    const consumer = serversConsumers.find((c) => c.durable === "servers_replays") as (typeof serversConsumers)[0];
    const redelivered = { subject: again.subject, eventId: randomUUID(), data: again.payload };
    expect(await applyEvent(ctx.deps, consumer, redelivered)).toBe(false);
    expect((await store.findServerById(ctx.db, tenantId, serverId))?.replay_count).toBe(2);
  });

  it("does not count a replay whose delete arrived before its start", async () => {
    await using ctx = await setup();
    const tenantId = randomUUID();
    const serverId = randomUUID();
    await insertConnected(ctx.db, tenantId, serverId);
    const replayId = randomUUID();
    const deleted = buildEvent("replays.replay.deleted", { tenantId, replayId, serverId, sizeBytes: 1n });
    const started = buildEvent("replays.recording.started", { tenantId, replayId, serverId });
    const marker = buildEvent("replays.recording.started", { tenantId, replayId: randomUUID(), serverId });
    // Each subject has its own consumer, so the delete is applied before the start is sent: the start
    // must then find the tombstone. Count once all are applied: a count taken on the way could read 1
    // from the marker alone before the start, with a broken tombstone, makes it 2.
    await ctx.bus.emit(deleted.subject, deleted.eventId, deleted.payload);
    await waitUntilApplied(ctx.db, [deleted]);
    for (const event of [started, marker]) await ctx.bus.emit(event.subject, event.eventId, event.payload);
    await waitUntilApplied(ctx.db, [deleted, started, marker]);
    expect((await store.findServerById(ctx.db, tenantId, serverId))?.replay_count).toBe(1);
  });
});
