import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type TestDb, testDbModes } from "../db/_testing.js";
import { claimLeases, type LeaseTable, newLeaseOwner, releaseLeases } from "./lease.js";

const jobs: LeaseTable = { table: "lease_test.job", key: "id", ready: "NOT done", order: "id" };

describe.each(testDbModes())("leases ($name database)", ({ open }) => {
  // One database per mode for the file; each test starts from 40 fresh jobs.
  let shared: TestDb;
  beforeAll(async () => {
    shared = await open("lease_test");
    await shared.db.query("CREATE SCHEMA lease_test");
    await shared.db.query(
      `CREATE TABLE lease_test.job (id int PRIMARY KEY, done boolean NOT NULL DEFAULT false,
                                    lease_owner text, lease_expires_at timestamptz)`,
    );
  });
  afterAll(() => shared[Symbol.asyncDispose]());

  async function setup(): Promise<TestDb> {
    await shared.db.query("TRUNCATE lease_test.job");
    await shared.db.query("INSERT INTO lease_test.job (id) SELECT generate_series(1, 40)");
    return { ...shared, [Symbol.asyncDispose]: async () => {} };
  }

  it("never hands one row to two replicas claiming at once", async () => {
    await using testDb = await setup();
    const owners = Array.from({ length: 8 }, () => newLeaseOwner());
    const claims = await Promise.all(
      owners.map((owner) => claimLeases<{ id: number }>(testDb.db, jobs, { owner, leaseMs: 60_000, limit: 7 })),
    );
    const ids = claims.flat().map((row) => row.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.length).toBe(40);
  });

  it("hands an expired lease to the next claimer, and a released one at once", async () => {
    await using testDb = await setup();
    const [first, second] = [newLeaseOwner(), newLeaseOwner()];
    const short = await claimLeases<{ id: number }>(testDb.db, jobs, { owner: first, leaseMs: 1, limit: 40 });
    expect(short).toHaveLength(40);
    await new Promise((resolve) => setTimeout(resolve, 20));
    const taken = await claimLeases<{ id: number }>(testDb.db, jobs, { owner: second, leaseMs: 60_000, limit: 2 });
    expect(taken.map((row) => row.id)).toEqual([1, 2]);
    // Only the holder's release counts: the first owner's lease on 1 and 2 has passed to the second.
    expect(await releaseLeases(testDb.db, jobs, first, [1, 2])).toBe(0);
    expect(await releaseLeases(testDb.db, jobs, second, [1, 2])).toBe(2);
    const again = await claimLeases<{ id: number }>(testDb.db, jobs, { owner: first, leaseMs: 60_000, limit: 1 });
    expect(again.map((row) => row.id)).toEqual([1]);
  });

  it("claims only ready rows", async () => {
    await using testDb = await setup();
    await testDb.db.query("UPDATE lease_test.job SET done = true WHERE id > 3");
    const rows = await claimLeases<{ id: number }>(testDb.db, jobs, {
      owner: newLeaseOwner(),
      leaseMs: 1000,
      limit: 10,
    });
    expect(rows.map((row) => row.id).sort()).toEqual([1, 2, 3]);
  });
});
