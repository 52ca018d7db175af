import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { waitFor } from "../../test/poll.js";
import { type TestDb, type TestDbMode, testDbModes } from "../db/_testing.js";
import { createEmbeddedTestBus, describeBusContract, type TestBus } from "./_testing.js";

// One embedded database for the file (from the migrated template); the tests run one after another
// and each starts from empty outboxes and no cursors.
let testDb: TestDb;
beforeAll(async () => {
  testDb = await (testDbModes()[0] as TestDbMode).open("bus");
});
afterAll(() => testDb[Symbol.asyncDispose]());

/** An embedded bus on the file's database, emptied first; `reopen` starts a second bus on the same data. */
async function openWorld(): Promise<TestBus & { reopen(): Promise<TestBus> }> {
  await testDb.db.query("TRUNCATE identity.outbox, servers.outbox, replays.outbox");
  await testDb.db.query("DROP TABLE IF EXISTS bus.cursor, bus.schema_migrations");
  const world = await createEmbeddedTestBus(testDb.dbFor);
  const others: TestBus[] = [];
  return {
    ...world,
    reopen: async () => {
      const other = await createEmbeddedTestBus(testDb.dbFor);
      others.push(other);
      return other;
    },
    async [Symbol.asyncDispose]() {
      for (const other of others) await other[Symbol.asyncDispose]();
      await world[Symbol.asyncDispose]();
    },
  };
}

const none = new Uint8Array();

describe("embedded bus", () => {
  describeBusContract(openWorld);

  it("delivers different subjects of one durable concurrently, as JetStream's consumer per subject does", async () => {
    await using world = await openWorld();
    let release: () => void = () => {};
    const blocked = new Promise<void>((resolve) => {
      release = resolve;
    });
    const handled: string[] = [];
    onTestFinished(release);
    onTestFinished(
      await world.bus.subscribe("concurrent", ["replays.recording.started", "replays.replay.deleted"], async (msg) => {
        if (msg.subject === "replays.recording.started") await blocked;
        handled.push(msg.subject);
      }),
    );
    await world.emit("replays.recording.started", randomUUID(), none);
    await world.emit("replays.replay.deleted", randomUUID(), none);
    // The delete is handled while the start's handler is still blocked.
    await waitFor("the other subject", () => handled.includes("replays.replay.deleted"));
    expect(handled).toEqual(["replays.replay.deleted"]);
    release();
    await waitFor("the blocked subject", () => handled.length === 2);
  });

  it("holds later events of a subject back while an earlier one keeps failing", async () => {
    await using world = await openWorld();
    const failing = randomUUID();
    const later = randomUUID();
    const order: string[] = [];
    let failures = 0;
    onTestFinished(
      await world.bus.subscribe("blocked", ["servers.server.created"], async (msg) => {
        if (msg.eventId === failing && failures < 2) {
          failures++;
          throw new Error("not yet");
        }
        order.push(msg.eventId);
      }),
    );
    await world.emit("servers.server.created", failing, none);
    await world.emit("servers.server.created", later, none);
    await waitFor("both events", () => order.length === 2);
    expect(order).toEqual([failing, later]);
    expect(failures).toBe(2);
  });

  it("redelivers after a restart what no handler had settled, and only that", async () => {
    await using world = await openWorld();
    const settled = randomUUID();
    const unsettled = randomUUID();
    const seen: string[] = [];
    const stop = await world.bus.subscribe("restart", ["servers.server.purged"], async (msg) => {
      seen.push(msg.eventId);
      // The process stops before this handler's transaction commits.
      if (msg.eventId === unsettled) throw new Error("stopped mid-way");
    });
    await world.emit("servers.server.purged", settled, none);
    await world.emit("servers.server.purged", unsettled, none);
    await waitFor("the unsettled event", () => seen.includes(unsettled));
    await stop();
    await world.bus.close();

    const restarted = await world.reopen();
    const again: string[] = [];
    onTestFinished(
      await restarted.bus.subscribe("restart", ["servers.server.purged"], async (msg) => {
        again.push(msg.eventId);
      }),
    );
    await waitFor("the redelivery", () => again.includes(unsettled));
    expect(again).toEqual([unsettled]);
  });

  it("refuses a durable name reused for other subjects", async () => {
    await using world = await openWorld();
    onTestFinished(await world.bus.subscribe("named", ["servers.server.created"], async () => {}));
    await expect(world.bus.subscribe("named", ["servers.server.purged"], async () => {})).rejects.toThrow(
      /already subscribes/,
    );
  });

  it("refuses to publish after close", async () => {
    await using world = await openWorld();
    await world.bus.close();
    await expect(world.bus.publish("servers.server.created", randomUUID(), none)).rejects.toThrow(/closed/);
  });
});
