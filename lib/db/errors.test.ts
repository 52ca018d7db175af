import { describe, expect, it } from "vitest";
import { testDbModes } from "./_testing.js";
import { isDataException, isUniqueViolation } from "./errors.js";

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

describe.each(testDbModes())("isDataException ($name)", ({ open }) => {
  it("recognises a value the database refuses, or one the adapter cannot encode, and no other failure", async () => {
    await using testDb = await open("shop");
    const { db } = testDb;
    const refused = (text: string, params: unknown[]) => db.query(text, params).catch((err: unknown) => err);
    expect(isDataException(await refused("SELECT $1::text[]", [["nul\u0000"]]))).toBe(true);
    expect(isDataException(await refused("SELECT $1::timestamptz", [new Date(-8.6e15)]))).toBe(true);
    expect(isDataException(await refused("SELECT 1 / $1::int", [0]))).toBe(true);
    expect(isDataException(await refused("SELECT $1::int", ["x"]))).toBe(true);
    expect(isDataException(new RangeError("Invalid time value"))).toBe(true);
    expect(isDataException(await refused("SELECT * FROM shop.missing", []))).toBe(false);
    expect(isDataException(new Error("Connection terminated unexpectedly"))).toBe(false);
    expect(isDataException({ code: "ECONNREFUSED" })).toBe(false);
    expect(isDataException(undefined)).toBe(false);
  });
});
