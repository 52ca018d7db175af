import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSecretBox } from "../secrets/box.js";
import { type TestDb, testDbModes } from "./_testing.js";
import { resealAll, type SealedColumns } from "./reseal-secrets.js";

// Resealing in a real database (both modes), on a table of its own: clear text and values under the
// previous key move to the current one, in batches, idempotently; a value changed meanwhile wins.

const target: SealedColumns = { table: "reseal_test.secret", id: "id", idType: "text", columns: ["a", "b"] };

describe.each(testDbModes())("resealing secrets ($name database)", ({ open }) => {
  let testDb: TestDb;
  beforeAll(async () => {
    testDb = await open("webhooks");
    await testDb.db.query("CREATE SCHEMA IF NOT EXISTS reseal_test");
    await testDb.db.query("CREATE TABLE reseal_test.secret (id text PRIMARY KEY, a text NOT NULL, b text)");
  });
  afterAll(() => testDb[Symbol.asyncDispose]());

  it("seals clear text and the previous key's values under the current key, and leaves what no key opens", async () => {
    const db = testDb.db;
    const previous = randomBytes(32);
    const old = createSecretBox(previous);
    const box = createSecretBox(randomBytes(32), previous);
    const rows = Array.from({ length: 1_200 }, (_, i) => [
      `k${String(i).padStart(5, "0")}`,
      i % 2 === 0 ? `clear-${i}` : old.seal(`old-${i}`),
      i % 3 === 0 ? null : `clear-b-${i}`,
    ]);
    rows.push(["lost", createSecretBox(randomBytes(32)).seal("lost"), null]);
    for (const row of rows) await db.query("INSERT INTO reseal_test.secret VALUES ($1, $2, $3)", row);

    expect(await resealAll(db, target, box)).toEqual({ resealed: 1_200, unreadable: 1 });
    const { rows: after } = await db.query<{ id: string; a: string; b: string | null }>(
      "SELECT id, a, b FROM reseal_test.secret WHERE id <> 'lost' ORDER BY id",
    );
    for (const [i, row] of after.entries()) {
      expect(box.isCurrent(row.a)).toBe(true);
      expect(box.open(row.a)).toBe(i % 2 === 0 ? `clear-${i}` : `old-${i}`);
      if (i % 3 === 0) expect(row.b).toBeNull();
      else expect(box.open(row.b as string)).toBe(`clear-b-${i}`);
    }
    // Again: nothing left to do.
    expect(await resealAll(db, target, box)).toEqual({ resealed: 0, unreadable: 1 });
  });
});
