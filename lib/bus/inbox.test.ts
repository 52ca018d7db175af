import { randomBytes, randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { createTestDb, type TestDb } from "../db/_testing.js";
import { migrate } from "../db/migrate.js";
import type { Db, Queryable } from "../db/types.js";
import { handleOnce } from "./inbox.js";
import { outboxMigrations } from "./outbox.js";

// One database per file; each test gets a schema of its own in it, as a service would.
let testDb: TestDb;
beforeAll(async () => {
  testDb = await createTestDb("bus_inbox_test");
});
afterAll(() => testDb[Symbol.asyncDispose]());

async function openDb(): Promise<Db> {
  const db = testDb.dbFor(`bus_inbox_${randomBytes(4).toString("hex")}`);
  onTestFinished(() => db.close());
  await migrate(db, [
    ...outboxMigrations(db.schema),
    {
      id: "test/001_applied.sql",
      sql: `CREATE TABLE ${db.schema}.applied (event_id uuid NOT NULL, consumer text NOT NULL)`,
    },
  ]);
  return db;
}

const record = (db: Db, consumer: string, eventId: string) => async (tx: Queryable) => {
  await tx.query(`INSERT INTO ${db.schema}.applied (event_id, consumer) VALUES ($1, $2)`, [eventId, consumer]);
};

async function appliedCount(db: Db, eventId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM ${db.schema}.applied WHERE event_id = $1`,
    [eventId],
  );
  return rows[0]?.n ?? -1;
}

describe("inbox", () => {
  it("applies a redelivered event once", async () => {
    const db = await openDb();
    const eventId = randomUUID();
    expect(await handleOnce(db, "projection", eventId, record(db, "projection", eventId))).toBe(true);
    expect(await handleOnce(db, "projection", eventId, record(db, "projection", eventId))).toBe(false);
    expect(await appliedCount(db, eventId)).toBe(1);
  });

  it("applies an event delivered to several handlers at once exactly once", async () => {
    const db = await openDb();
    const eventId = randomUUID();
    const results = await Promise.all(
      Array.from({ length: 8 }, () => handleOnce(db, "projection", eventId, record(db, "projection", eventId))),
    );
    expect(results.filter(Boolean)).toHaveLength(1);
    expect(await appliedCount(db, eventId)).toBe(1);
  });

  it("records nothing when apply fails, so the redelivery applies it", async () => {
    const db = await openDb();
    const eventId = randomUUID();
    await expect(
      handleOnce(db, "projection", eventId, async (tx) => {
        await record(db, "projection", eventId)(tx);
        throw new Error("projection failed");
      }),
    ).rejects.toThrow("projection failed");
    expect(await appliedCount(db, eventId)).toBe(0);
    expect(await handleOnce(db, "projection", eventId, record(db, "projection", eventId))).toBe(true);
    expect(await appliedCount(db, eventId)).toBe(1);
  });

  it("applies the same event once for each consumer", async () => {
    const db = await openDb();
    const eventId = randomUUID();
    expect(await handleOnce(db, "markers_projection", eventId, record(db, "markers_projection", eventId))).toBe(true);
    expect(await handleOnce(db, "servers_projection", eventId, record(db, "servers_projection", eventId))).toBe(true);
    expect(await handleOnce(db, "servers_projection", eventId, record(db, "servers_projection", eventId))).toBe(false);
    expect(await appliedCount(db, eventId)).toBe(2);
  });
});
