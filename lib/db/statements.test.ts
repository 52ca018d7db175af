import { describe, expect, it } from "vitest";
import { testDbModes } from "./_testing.js";
import { createStatementNames, isStalePreparedStatement, PLANNED_PER_CALL } from "./statements.js";

describe("createStatementNames", () => {
  it("names each text once, a forgotten one anew, and none past the cap", () => {
    const names = createStatementNames(2);
    const a = names.nameOf("SELECT $1::int");
    expect(a).toBeDefined();
    expect(names.nameOf("SELECT $1::int")).toBe(a);
    const b = names.nameOf("SELECT $1::text");
    expect(b).not.toBe(a);
    expect(names.nameOf("SELECT $1::uuid")).toBeUndefined();
    names.forget("SELECT $1::int");
    const again = names.nameOf("SELECT $1::int");
    expect(again).toBeDefined();
    expect(again).not.toBe(a);
  });

  it("names no statement led by PLANNED_PER_CALL: it is planned on every call", () => {
    const names = createStatementNames();
    expect(names.nameOf(`${PLANNED_PER_CALL} SELECT $1::int`)).toBeUndefined();
    expect(names.nameOf("SELECT $1::int")).toBeDefined();
  });
});

describe.each(testDbModes())("parameterised statements ($name)", ({ name, open }) => {
  // Embedded mode sends every statement unnamed.
  it.skipIf(name !== "postgres")(
    "prepares a statement once per connection, but never one planned per call",
    async () => {
      await using testDb = await open("shop");
      const prepared = await testDb.db.transaction(async (tx) => {
        await tx.query("SELECT $1::int AS kept", [1]);
        await tx.query(`${PLANNED_PER_CALL} SELECT $1::int AS each_call`, [1]);
        const { rows } = await tx.query<{ statement: string }>("SELECT statement FROM pg_prepared_statements");
        return rows.map((row) => row.statement);
      });
      expect(prepared.filter((text) => text.includes("AS kept"))).toHaveLength(1);
      expect(prepared.filter((text) => text.includes("AS each_call"))).toEqual([]);
    },
  );

  it("keep answering, with the new columns, after their table changes shape", async () => {
    await using testDb = await open("shop");
    const { db } = testDb;
    await db.query("CREATE SCHEMA shop");
    await db.query("CREATE TABLE shop.item (id int PRIMARY KEY)");
    await db.query("INSERT INTO shop.item VALUES (1)");
    const select = "SELECT * FROM shop.item WHERE id = $1";
    // Enough calls that every connection of a pool of five has run it.
    await Promise.all(Array.from({ length: 10 }, () => db.query(select, [1])));
    await db.query("ALTER TABLE shop.item ADD COLUMN name text DEFAULT 'a'");
    for (let i = 0; i < 10; i++) expect((await db.query(select, [1])).rows).toEqual([{ id: 1, name: "a" }]);
    // In a transaction the stale statement fails the transaction once; the next one prepares it anew.
    await db.query("ALTER TABLE shop.item ADD COLUMN price int DEFAULT 2");
    const inTx = () => db.transaction((tx) => tx.query(select, [1]));
    const outcomes = await Promise.all(
      Array.from({ length: 10 }, () =>
        inTx().then(
          (r) => r.rows,
          (err) => err,
        ),
      ),
    );
    for (const outcome of outcomes) {
      if (Array.isArray(outcome)) expect(outcome).toEqual([{ id: 1, name: "a", price: 2 }]);
      else expect(isStalePreparedStatement(outcome)).toBe(true);
    }
    expect((await inTx()).rows).toEqual([{ id: 1, name: "a", price: 2 }]);
  });

  it.skipIf(name !== "postgres")("are prepared once per connection", async () => {
    await using testDb = await open("shop");
    const { db } = testDb;
    await db.transaction(async (tx) => {
      for (let i = 0; i < 3; i++) await tx.query("SELECT $1::int + 1 AS n", [i]);
      const { rows } = await tx.query<{ statement: string }>("SELECT statement FROM pg_prepared_statements");
      expect(rows.map((r) => r.statement)).toEqual(["SELECT $1::int + 1 AS n"]);
    });
  });
});
