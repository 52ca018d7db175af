import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { createTestDb } from "../../lib/db/_testing.js";
import { deleteNoncesExpired } from "./store.js";

describe("nonce sweep", () => {
  it("deletes expired nonces a bounded batch at a time, the longest expired first, never a live one", async () => {
    await using testDb = await createTestDb("identity");
    const { db } = testDb;
    const now = new Date("2026-11-28T00:00:00Z");
    const kid = `kid_${randomUUID().slice(0, 8)}`;
    // `e<n>` expired n seconds ago; `l<n>` expires n seconds from now.
    await db.query(
      `INSERT INTO identity.nonce (kid, nonce, expires_at)
       SELECT $1, 'e' || n, $2::timestamptz - n * interval '1 second' FROM generate_series(1, 250) n
       UNION ALL
       SELECT $1, 'l' || n, $2::timestamptz + n * interval '1 second' FROM generate_series(1, 20) n`,
      [kid, now],
    );
    const left = async () => {
      const { rows } = await db.query<{ nonce: string }>(
        "SELECT nonce FROM identity.nonce WHERE kid = $1 ORDER BY expires_at DESC",
        [kid],
      );
      return rows.map((row) => row.nonce);
    };
    const names = (prefix: string, count: number) => Array.from({ length: count }, (_, i) => `${prefix}${i + 1}`);

    expect(await deleteNoncesExpired(db, now, 100)).toBe(100);
    expect(await left()).toEqual([...names("l", 20).reverse(), ...names("e", 150)]);
    // The sweep's loop: batches until a short one.
    expect(await deleteNoncesExpired(db, now, 100)).toBe(100);
    expect(await deleteNoncesExpired(db, now, 100)).toBe(50);
    expect(await left()).toEqual(names("l", 20).reverse());
    expect(await deleteNoncesExpired(db, now, 100)).toBe(0);
  });
});
