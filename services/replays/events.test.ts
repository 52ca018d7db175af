import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { applyEvent, type Consumer } from "../../lib/bus/consumer.js";
import { buildEvent, type OutgoingEvent } from "../../lib/bus/events.js";
import { outboxMigrations } from "../../lib/bus/outbox.js";
import { createTestDb } from "../../lib/db/_testing.js";
import { migrate, readMigrations } from "../../lib/db/migrate.js";
import { sourceFolder } from "../../lib/paths.js";
import { replaysConsumers } from "./events.js";
import * as store from "./store.js";

// The replays service's projections on the real schema (Postgres with DATABASE_URL, else
// embedded), each event applied in the order the test chooses, as a late or early delivery would.
async function setup() {
  const testDb = await createTestDb("replays");
  await migrate(testDb.db, [
    ...outboxMigrations("replays"),
    ...(await readMigrations(sourceFolder(import.meta.url, "./migrations"))),
  ]);
  const deps = { db: testDb.db, bus: undefined as never, inboxMs: 86_400_000, now: () => new Date() };
  const consumerOf = (subject: string) => replaysConsumers.find((c) => Object.hasOwn(c.handlers, subject)) as Consumer;
  return {
    db: testDb.db,
    apply: (event: OutgoingEvent) =>
      applyEvent(deps, consumerOf(event.subject), {
        subject: event.subject,
        eventId: event.eventId,
        data: event.payload,
      }),
    [Symbol.asyncDispose]: () => testDb[Symbol.asyncDispose](),
  };
}

describe("replays projections", () => {
  it("keeps the newest plan's quota and the tenant's own usage, whatever order plans arrive in", async () => {
    await using ctx = await setup();
    const tenantId = randomUUID();
    // Version 3 comes from before the plan had a retention: the defaults (90 days, 30 hot).
    const plan = (version: number, quota: number) =>
      buildEvent("identity.tenant.upserted", {
        tenantId,
        serverLimit: 1n,
        storageQuotaBytes: BigInt(quota),
        version: BigInt(version),
        ...(version === 3 ? {} : { retentionDays: version, hotDays: version - 1 }),
      });
    // Usage recorded before any plan arrived: a placeholder the first plan replaces.
    await ctx.db.transaction((tx) => store.updateTenantStorageUsed(tx, tenantId, 40n));
    await ctx.apply(plan(2, 700));
    await ctx.apply(plan(1, 300));
    expect(await store.findTenantStorage(ctx.db, tenantId)).toEqual({
      storage_quota_bytes: 700n,
      storage_used_bytes: 40n,
      plan_version: 2n,
      retention_days: 2,
      hot_days: 1,
    });
    await ctx.db.transaction((tx) => store.updateTenantStorageUsed(tx, tenantId, -15n));
    await ctx.apply(plan(3, 900));
    expect(await store.findTenantStorage(ctx.db, tenantId)).toEqual({
      storage_quota_bytes: 900n,
      storage_used_bytes: 25n,
      plan_version: 3n,
      retention_days: 90,
      hot_days: 30,
    });
  });

  it("moves a server only forward, and forgets a purged one for good", async () => {
    await using ctx = await setup();
    const tenantId = randomUUID();
    const serverId = randomUUID();
    const event = (subject: "created" | "connected" | "deauthorised" | "purged") =>
      subject === "created"
        ? buildEvent("servers.server.created", { tenantId, serverId, categoryId: "" })
        : buildEvent(`servers.server.${subject}`, { tenantId, serverId });
    const state = async () => (await store.findServerById(ctx.db, serverId))?.state;
    await ctx.apply(event("connected"));
    await ctx.apply(event("created"));
    expect(await state()).toBe("connected");
    await ctx.apply(event("deauthorised"));
    await ctx.apply(event("connected"));
    expect(await state()).toBe("deauthorised");
    await ctx.apply(event("purged"));
    expect(await state()).toBeUndefined();
    await ctx.apply(event("created"));
    await ctx.apply(event("connected"));
    expect(await state()).toBeUndefined();
    // Another server of the tenant is not affected.
    const other = randomUUID();
    await ctx.apply(buildEvent("servers.server.created", { tenantId, serverId: other, categoryId: "" }));
    expect((await store.findServerById(ctx.db, other))?.state).toBe("pending");
  });

  it("applies an event delivered twice once", async () => {
    await using ctx = await setup();
    const tenantId = randomUUID();
    const upserted = buildEvent("identity.tenant.upserted", {
      tenantId,
      serverLimit: 1n,
      storageQuotaBytes: 5n,
      version: 1n,
    });
    expect(await ctx.apply(upserted)).toBe(true);
    expect(await ctx.apply(upserted)).toBe(false);
  });
});
