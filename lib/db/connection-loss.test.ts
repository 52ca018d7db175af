import { describe, expect, it } from "vitest";
import { pollUntil } from "../../test/poll.js";
import { createTestDb } from "./_testing.js";
import { isConnectionLoss } from "./errors.js";
import type { Db } from "./types.js";

// A Postgres failover, restart or pg_terminate_backend drops every connection at once.
// The transaction on a dropped connection must fail alone, with an error callers can tell apart
// (isConnectionLoss: a 503, never a 500), and the process must live: pg emits the loss as an
// 'error' event on the checked-out client, which crashed the process when nothing listened.

const skip = process.env.DATABASE_URL
  ? undefined
  : "needs DATABASE_URL (a real Postgres whose backends can be terminated)";

async function terminate(admin: Db, pid: number): Promise<void> {
  await admin.query("SELECT pg_terminate_backend($1::int)", [pid]);
  await pollUntil(
    () => admin.query("SELECT 1 FROM pg_stat_activity WHERE pid = $1::int", [pid]).then((r) => r.rows.length),
    (n) => n === 0,
    10_000,
  );
}

describe.skipIf(skip)(`a dropped Postgres connection (${skip ?? "real Postgres"})`, () => {
  it("fails the transaction whose statement was running, with a connection-loss error, and the pool goes on", async () => {
    await using testDb = await createTestDb("public");
    const { db } = testDb;
    const admin = testDb.dbFor("public");
    let pid = 0;
    let sleeping: () => void = () => {};
    const asleep = new Promise<void>((resolve) => {
      sleeping = resolve;
    });
    const running = db
      .transaction(async (tx) => {
        pid = (await tx.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]?.pid as number;
        sleeping();
        await tx.query("SELECT pg_sleep($1::int)", [60]);
      })
      .catch((err: unknown) => err);
    await asleep;
    await terminate(admin, pid);
    const err = await running;
    expect(isConnectionLoss(err), String(err)).toBe(true);
    expect((await db.query<{ one: number }>("SELECT $1::int AS one", [1])).rows).toEqual([{ one: 1 }]);
  });

  it("fails a transaction whose connection dropped between its statements, when it next uses it", async () => {
    await using testDb = await createTestDb("public");
    const { db } = testDb;
    const admin = testDb.dbFor("public");
    let pid = 0;
    let opened: () => void = () => {};
    const open = new Promise<void>((resolve) => {
      opened = resolve;
    });
    let resume: () => void = () => {};
    const resumed = new Promise<void>((resolve) => {
      resume = resolve;
    });
    const running = db
      .transaction(async (tx) => {
        pid = (await tx.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]?.pid as number;
        opened();
        // Idle in the transaction (the outbox relay waiting on NATS): the loss arrives as an event
        // on a client no statement is running on.
        await resumed;
        await tx.query("SELECT $1::int", [1]);
      })
      .catch((err: unknown) => err);
    await open;
    await terminate(admin, pid);
    // The backend is gone (terminate() saw it leave pg_stat_activity, over I/O turns in which the
    // idle client read its socket's end); one more turn for the error event, as an idle client has.
    await new Promise((resolve) => setImmediate(resolve));
    resume();
    const err = await running;
    expect(isConnectionLoss(err), String(err)).toBe(true);
    expect((await db.query<{ one: number }>("SELECT $1::int AS one", [1])).rows).toEqual([{ one: 1 }]);
  });

  it("fails a pool statement on a dropped idle connection with a connection-loss error, and the next one connects anew", async () => {
    await using testDb = await createTestDb("public");
    const { db } = testDb;
    const admin = testDb.dbFor("public");
    const pid = (await db.query<{ pid: number }>("SELECT pg_backend_pid() AS pid, $1::int", [1])).rows[0]
      ?.pid as number;
    await terminate(admin, pid);
    const first = await db.query("SELECT $1::int AS one", [1]).catch((err: unknown) => err);
    if (first instanceof Error) expect(isConnectionLoss(first), String(first)).toBe(true);
    expect((await db.query<{ one: number }>("SELECT $1::int AS one", [1])).rows).toEqual([{ one: 1 }]);
  });
});

describe("isConnectionLoss", () => {
  it("knows a lost or refused connection from a statement's own failure", () => {
    for (const code of ["57P01", "57P02", "57P03", "08006", "08003", "53300"])
      expect(isConnectionLoss(Object.assign(new Error("x"), { code })), code).toBe(true);
    for (const code of ["ECONNREFUSED", "ECONNRESET"])
      expect(isConnectionLoss(Object.assign(new Error("x"), { code, syscall: "read" })), code).toBe(true);
    // An HTTP client that went away mid-body: Node's "aborted" ECONNRESET, no socket call of ours.
    expect(isConnectionLoss(Object.assign(new Error("aborted"), { code: "ECONNRESET" }))).toBe(false);
    expect(isConnectionLoss(new Error("Connection terminated unexpectedly"))).toBe(true);
    expect(isConnectionLoss(new Error("Client has encountered a connection error and is not queryable"))).toBe(true);
    expect(isConnectionLoss(new Error("timeout exceeded when trying to connect"))).toBe(true);
    for (const code of ["23505", "22P02", "40001", "42P01"])
      expect(isConnectionLoss(Object.assign(new Error("x"), { code })), code).toBe(false);
    expect(isConnectionLoss(new Error("boom"))).toBe(false);
    expect(isConnectionLoss(undefined)).toBe(false);
  });
});
