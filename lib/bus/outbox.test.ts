import { randomBytes, randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { waitFor } from "../../test/poll.js";
import { metricValue } from "../_testing.js";
import { createTestDb, type TestDb } from "../db/_testing.js";
import { migrate } from "../db/migrate.js";
import type { Db } from "../db/types.js";
import { metricsText, watchOutbox } from "../metrics.js";
import { formatTraceparent, nextSpan } from "../trace.js";
import { createTestBus, recorder } from "./_testing.js";
import type { Bus } from "./bus.js";
import { enqueue, outboxChannel, outboxMigrations, startOutboxRelay } from "./outbox.js";

const subject = "servers.server.created";

// One database per file; each test gets a schema of its own in it, as a service would.
let testDb: TestDb;
beforeAll(async () => {
  testDb = await createTestDb("bus_outbox_test");
});
afterAll(() => testDb[Symbol.asyncDispose]());

async function openDb(): Promise<Db> {
  const db = testDb.dbFor(`bus_outbox_${randomBytes(4).toString("hex")}`);
  onTestFinished(() => db.close());
  await migrate(db, outboxMigrations(db.schema));
  return db;
}

/** The real bus, counting the publishes each event id gets and failing the first `failures`. */
function countingBus(bus: Bus, failures = 0): Bus & { publishes: Map<string, number> } {
  const publishes = new Map<string, number>();
  let toFail = failures;
  return {
    ...bus,
    async publish(subj, eventId, data) {
      if (toFail > 0) {
        toFail--;
        throw new Error("broker unavailable");
      }
      await bus.publish(subj, eventId, data);
      publishes.set(eventId, (publishes.get(eventId) ?? 0) + 1);
    },
    publishes,
  };
}

async function enqueueCommitted(db: Db, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const eventId = randomUUID();
    await db.transaction((tx) =>
      enqueue(tx, db.schema, { subject, eventId, payload: new TextEncoder().encode(eventId) }),
    );
    ids.push(eventId);
  }
  return ids;
}

async function unpublished(db: Db): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM ${db.schema}.outbox WHERE published_at IS NULL`,
  );
  return rows[0]?.n ?? -1;
}

describe("outbox", () => {
  it("applies its migrations once, leaving outbox and inbox in the service's schema", async () => {
    const db = testDb.dbFor(`bus_outbox_${randomBytes(4).toString("hex")}`);
    onTestFinished(() => db.close());
    expect(await migrate(db, outboxMigrations(db.schema))).toEqual([
      "bus/001_outbox_inbox.sql",
      "bus/002_outbox_traceparent.sql",
      "bus/003_retention_indexes.sql",
    ]);
    expect(await migrate(db, outboxMigrations(db.schema))).toEqual([]);
    const { rows } = await db.query<{ table_name: string }>(
      "SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name",
      [db.schema],
    );
    expect(rows.map((row) => row.table_name)).toEqual(["inbox", "outbox", "schema_migrations"]);
  });

  it("refuses a schema name that is not a plain identifier", () => {
    expect(() => outboxMigrations("x; DROP TABLE y")).toThrow(/invalid schema/);
  });

  it("publishes nothing for an event enqueued in a rolled-back transaction", async () => {
    const db = await openDb();
    await using b = await createTestBus(testDb.dbFor);
    const got = recorder();
    onTestFinished(await b.bus.broadcast([subject], got.handler));
    await using _relay = startOutboxRelay({ db: db, bus: b.bus, pollMs: 50 });

    const rolledBack = randomUUID();
    await expect(
      db.transaction(async (tx) => {
        await enqueue(tx, db.schema, { subject, eventId: rolledBack, payload: new Uint8Array([1]) });
        throw new Error("business rule failed");
      }),
    ).rejects.toThrow("business rule failed");
    const [marker] = await enqueueCommitted(db, 1);

    await waitFor("the committed event", () => got.ids().includes(marker as string));
    expect(got.ids()).toEqual([marker]);
    const { rowCount } = await db.query(`SELECT 1 FROM ${db.schema}.outbox WHERE event_id = $1`, [rolledBack]);
    expect(rowCount).toBe(0);
  });

  it("hands on the trace of the transaction that enqueued an event, and none for one without", async () => {
    const db = await openDb();
    await using b = await createTestBus(testDb.dbFor);
    const got = recorder();
    onTestFinished(await b.bus.broadcast([subject], got.handler));
    await using _relay = startOutboxRelay({ db: db, bus: b.bus, pollMs: 50 });

    const hop = nextSpan(undefined);
    const [traced, untraced] = [randomUUID(), randomUUID()];
    await db.transaction((tx) => enqueue(tx, db.schema, { subject, eventId: traced, payload: new Uint8Array([1]) }), {
      trace: hop,
    });
    await db.transaction((tx) => enqueue(tx, db.schema, { subject, eventId: untraced, payload: new Uint8Array([2]) }));
    await waitFor("both events", () => got.received.length >= 2);
    const traceparentOf = (eventId: string) => got.received.find((msg) => msg.eventId === eventId)?.traceparent;
    expect(traceparentOf(traced)).toBe(formatTraceparent(hop));
    expect(traceparentOf(untraced)).toBeUndefined();
  });

  it("publishes every committed event exactly once, in commit order, and marks it published", async () => {
    const db = await openDb();
    await using b = await createTestBus(testDb.dbFor);
    const bus = countingBus(b.bus);
    const got = recorder();
    onTestFinished(await b.bus.broadcast([subject], got.handler));
    // A small batch makes the relay go through several rounds.
    await using _relay = startOutboxRelay({ db: db, bus, pollMs: 50, batchSize: 7 });

    const ids = await enqueueCommitted(db, 40);
    await waitFor("all events", () => got.received.length >= ids.length);
    expect(got.ids()).toEqual(ids);
    expect(got.received.map((msg) => new TextDecoder().decode(msg.data))).toEqual(ids);
    expect([...bus.publishes.values()].every((n) => n === 1)).toBe(true);
    await waitFor("every row marked", async () => (await unpublished(db)) === 0);
  });

  it("publishes each event once when two relays run side by side", async () => {
    const db = await openDb();
    await using b = await createTestBus(testDb.dbFor);
    const bus = countingBus(b.bus);
    await using _one = startOutboxRelay({ db: db, bus, pollMs: 20, batchSize: 5 });
    await using _two = startOutboxRelay({ db: db, bus, pollMs: 20, batchSize: 5 });

    const ids = await enqueueCommitted(db, 60);
    await waitFor("all events published", () => bus.publishes.size >= ids.length);
    await waitFor("every row marked", async () => (await unpublished(db)) === 0);
    expect([...bus.publishes.keys()].sort()).toEqual([...ids].sort());
    expect([...bus.publishes.values()].every((n) => n === 1)).toBe(true);
  });

  it("keeps rows whose publish failed and publishes them after backing off", async () => {
    const db = await openDb();
    await using b = await createTestBus(testDb.dbFor);
    const bus = countingBus(b.bus, 3);
    const got = recorder();
    onTestFinished(await b.bus.broadcast([subject], got.handler));
    const ids = await enqueueCommitted(db, 5);
    await using _relay = startOutboxRelay({ db: db, bus, pollMs: 50 });

    await waitFor("all events", () => got.received.length >= ids.length);
    expect(got.ids()).toEqual(ids);
    await waitFor("every row marked", async () => (await unpublished(db)) === 0);
  });

  it("wakes on NOTIFY without waiting for the next poll", async () => {
    const db = await openDb();
    await using b = await createTestBus(testDb.dbFor);
    const bus = countingBus(b.bus);
    await using _relay = startOutboxRelay({ db: db, bus, pollMs: 60_000, listeningPollMs: 60_000 });
    // The first round runs at start; only a notification can start the next within the minute.
    await waitFor("the first round", async () => (await unpublished(db)) === 0);
    const [eventId] = await enqueueCommitted(db, 1);
    await waitFor("the notified round", () => bus.publishes.has(eventId as string), 30_000);
  });

  it("polls an empty outbox with one read, opening no transaction", async () => {
    const db = await openDb();
    await using b = await createTestBus(testDb.dbFor);
    const calls = { query: 0, transaction: 0 };
    const counted: Db = {
      schema: db.schema,
      query: (text, params) => {
        calls.query++;
        return db.query(text, params);
      },
      transaction: (fn, options) => {
        calls.transaction++;
        return db.transaction(fn, options);
      },
      listen: (channel, onNotify) => db.listen(channel, onNotify),
      close: () => db.close(),
    };
    await using _relay = startOutboxRelay({ db: counted, bus: b.bus, pollMs: 20, listeningPollMs: 20 });
    // The first round, at start, reads its batch at once; the polls after it find nothing to lock.
    await waitFor("five polls", () => calls.query >= 5);
    expect(calls.transaction).toBe(1);

    await enqueueCommitted(db, 1);
    await waitFor("the event's round", async () => (await unpublished(db)) === 0);
    expect(calls.transaction).toBeGreaterThan(1);
  });

  it.skipIf(!process.env.DATABASE_URL)("listens again when its LISTEN connection is lost (Postgres)", async () => {
    const db = await openDb();
    await using b = await createTestBus(testDb.dbFor);
    const bus = countingBus(b.bus);
    // No poll within the minute: only a notification, heard on a LISTEN made again, publishes the event in time.
    await using _relay = startOutboxRelay({ db: db, bus, pollMs: 60_000, listeningPollMs: 60_000 });
    const listeners = async () => {
      const { rows } = await db.query<{ pid: number }>("SELECT pid FROM pg_stat_activity WHERE query = $1", [
        `LISTEN "${outboxChannel(db.schema)}"`,
      ]);
      return rows.map((row) => row.pid);
    };
    await waitFor("the relay to listen", async () => (await listeners()).length === 1);
    const [lost] = await listeners();
    await db.query("SELECT pg_terminate_backend($1::int)", [lost]);
    await waitFor("the relay to listen again", async () => {
      const now = await listeners();
      return now.length === 1 && now[0] !== lost;
    });
    const [eventId] = await enqueueCommitted(db, 1);
    await waitFor("the notified round", () => bus.publishes.has(eventId as string), 30_000);
  });

  it("stop waits for the running round", async () => {
    const db = await openDb();
    await using b = await createTestBus(testDb.dbFor);
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let entered = false;
    const slowBus: Bus = {
      ...b.bus,
      async publish(subj, eventId, data) {
        entered = true;
        await gate;
        await b.bus.publish(subj, eventId, data);
      },
    };
    await enqueueCommitted(db, 1);
    const relay = startOutboxRelay({ db: db, bus: slowBus, pollMs: 50 });
    let stopped = false;
    try {
      await waitFor("the round to publish", () => entered);
      const stopping = relay.stop().then(() => {
        stopped = true;
      });
      await new Promise((resolve) => setImmediate(resolve));
      expect(stopped).toBe(false);
      release();
      await stopping;
    } finally {
      release();
      await relay.stop();
    }
    expect(await unpublished(db)).toBe(0);
  });
});

describe("outbox metrics", () => {
  it("reports the backlog and the age of the oldest unpublished event on /metrics until the relay sends them", async () => {
    const db = await openDb();
    onTestFinished(watchOutbox(db));
    const read = async () => {
      const { body } = await metricsText();
      return {
        backlog: metricValue(body, "replay_outbox_backlog", { schema: db.schema }),
        age: metricValue(body, "replay_outbox_oldest_unpublished_age_seconds", { schema: db.schema }),
      };
    };
    expect(await read()).toEqual({ backlog: 0, age: 0 });
    await db.transaction(async (tx) => {
      await tx.query(
        `INSERT INTO ${db.schema}.outbox (event_id, subject, payload, created_at) VALUES ($1, $2, '', now() - interval '5 seconds')`,
        [randomUUID(), subject],
      );
      await enqueue(tx, db.schema, { subject, eventId: randomUUID(), payload: new Uint8Array() });
    });
    const before = await read();
    expect(before.backlog).toBe(2);
    expect(before.age).toBeGreaterThanOrEqual(5);

    await using world = await createTestBus(testDb.dbFor);
    const relay = startOutboxRelay({ db, bus: world.bus, pollMs: 50 });
    onTestFinished(() => relay.stop());
    await waitFor("the relay to publish both", async () => (await read()).backlog === 0);
    expect((await read()).age).toBe(0);
  });
});
