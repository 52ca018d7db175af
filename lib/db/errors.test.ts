import { describe, expect, it } from "vitest";
import { testDbModes } from "./_testing.js";
import { isUniqueViolation } from "./errors.js";

describe.each(testDbModes())("isUniqueViolation ($name)", ({ open }) => {
  it("recognises a duplicate key of the named constraint, and nothing else", async () => {
    await using testDb = await open("shop");
    const { db } = testDb;
    await db.query("CREATE SCHEMA shop");
    await db.query("CREATE TABLE shop.item (id int PRIMARY KEY, name text CONSTRAINT item_name_key UNIQUE)");
    await db.query("INSERT INTO shop.item VALUES (1, 'a')");
    const duplicateName = await db.query("INSERT INTO shop.item VALUES (2, 'a')").catch((err: unknown) => err);
    expect(isUniqueViolation(duplicateName)).toBe(true);
    expect(isUniqueViolation(duplicateName, "item_name_key")).toBe(true);
    expect(isUniqueViolation(duplicateName, "item_pkey")).toBe(false);
    const notNull = await db.query("INSERT INTO shop.item VALUES (NULL, 'b')").catch((err: unknown) => err);
    expect(isUniqueViolation(notNull)).toBe(false);
    expect(isUniqueViolation(new Error("23505"))).toBe(false);
    expect(isUniqueViolation(undefined)).toBe(false);
  });
});
