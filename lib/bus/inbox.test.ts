import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { migrate } from "../db/migrate.js";
import type { Db } from "../db/types.js";
import { createTestDb } from "./_testing.js";
import { handleOnce } from "./inbox.js";
import { outboxMigrations } from "./outbox.js";

const schema = "bus_inbox_test";

async function openDb() {
  const testDb = await createTestDb(schema);
  await migrate(testDb.db, [
    ...outboxMigrations(schema),
    { id: "test/001_applied.sql", sql: `CREATE TABLE ${schema}.applied (event_id uuid NOT NULL, consumer text NOT NULL)` },
  ]);
  return testDb;
}

const record = (consumer: string, eventId: string) => async (tx: { query: Db["query"] }) => {
  await tx.query(`INSERT INTO ${schema}.applied (event_id, consumer) VALUES ($1, $2)`, [eventId, consumer]);
};

async function appliedCount(db: Db, eventId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${schema}.applied WHERE event_id = $1`, [eventId]);
  return rows[0]?.n ?? -1;
}

describe("inbox", () => {
  it("applies a redelivered event once", async () => {
    await using t = await openDb();
    const eventId = randomUUID();
    expect(await handleOnce(t.db, "projection", eventId, record("projection", eventId))).toBe(true);
    expect(await handleOnce(t.db, "projection", eventId, record("projection", eventId))).toBe(false);
    expect(await appliedCount(t.db, eventId)).toBe(1);
  });

  it("applies an event delivered to several handlers at once exactly once", async () => {
    await using t = await openDb();
    const eventId = randomUUID();
    const results = await Promise.all(
      Array.from({ length: 8 }, () => handleOnce(t.db, "projection", eventId, record("projection", eventId))),
    );
    expect(results.filter(Boolean)).toHaveLength(1);
    expect(await appliedCount(t.db, eventId)).toBe(1);
  });

  it("records nothing when apply fails, so the redelivery applies it", async () => {
    await using t = await openDb();
    const eventId = randomUUID();
    await expect(
      handleOnce(t.db, "projection", eventId, async (tx) => {
        await record("projection", eventId)(tx);
        throw new Error("projection failed");
      }),
    ).rejects.toThrow("projection failed");
    expect(await appliedCount(t.db, eventId)).toBe(0);
    expect(await handleOnce(t.db, "projection", eventId, record("projection", eventId))).toBe(true);
    expect(await appliedCount(t.db, eventId)).toBe(1);
  });

  it("applies the same event once for each consumer", async () => {
    await using t = await openDb();
    const eventId = randomUUID();
    expect(await handleOnce(t.db, "markers_projection", eventId, record("markers_projection", eventId))).toBe(true);
    expect(await handleOnce(t.db, "servers_projection", eventId, record("servers_projection", eventId))).toBe(true);
    expect(await handleOnce(t.db, "servers_projection", eventId, record("servers_projection", eventId))).toBe(false);
    expect(await appliedCount(t.db, eventId)).toBe(2);
  });
});
