import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { type TestDbMode, testDbModes } from "./_testing.js";
import { createEmbeddedDb, openEmbeddedPostgres } from "./embedded.js";
import { defaultTemplateDir } from "./embedded-template.js";

describe("embedded Postgres", () => {
  // One data directory on disk for both guarantees (created from the initdb template).
  it("keeps data across restarts on the same data directory, and refuses a second opener while it is in use", async () => {
    const dir = await mkdtemp(join(tmpdir(), "pglite-"));
    try {
      const first = await openEmbeddedPostgres(dir, { template: defaultTemplateDir() });
      await expect(openEmbeddedPostgres(dir)).rejects.toThrow(/in use by process/);
      const db = createEmbeddedDb(first, "shop");
      await db.query("CREATE SCHEMA shop");
      await db.query("CREATE TABLE shop.item (n int8)");
      await db.transaction(async (tx) => {
        await tx.query("INSERT INTO shop.item VALUES ($1)", [9007199254740991]);
      });
      await first.close();
      const second = await openEmbeddedPostgres(dir);
      const { rows } = await createEmbeddedDb(second, "shop").query<{ n: number }>("SELECT n FROM shop.item");
      expect(rows).toEqual([{ n: 9007199254740991 }]);
      await second.close();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("rolls a failed transaction back and runs onCommit hooks only after a commit", async () => {
    await using testDb = await (testDbModes()[0] as TestDbMode).open("shop");
    const { db } = testDb;
    await db.query("CREATE SCHEMA shop; ");
    await db.query("CREATE TABLE shop.item (n int)");
    const hooks: string[] = [];
    await expect(
      db.transaction(async (tx) => {
        tx.onCommit(() => hooks.push("rolled back"));
        await tx.query("INSERT INTO shop.item VALUES (1)");
        throw new Error("abort");
      }),
    ).rejects.toThrow("abort");
    await db.transaction(async (tx) => {
      tx.onCommit(() => hooks.push("committed"));
      await tx.query("INSERT INTO shop.item VALUES (2)");
    });
    const { rows } = await db.query<{ n: number }>("SELECT n FROM shop.item");
    expect(rows).toEqual([{ n: 2 }]);
    expect(hooks).toEqual(["committed"]);
  });
});
