import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "nats";
import { describe, expect, it, onTestFinished } from "vitest";
import { startConsumer } from "../../lib/bus/consumer.js";
import { buildEvent } from "../../lib/bus/events.js";
import { createNatsBus } from "../../lib/bus/nats.js";
import { enqueue, outboxMigrations, startOutboxRelay } from "../../lib/bus/outbox.js";
import { createTestDb } from "../../lib/db/_testing.js";
import { migrate } from "../../lib/db/migrate.js";
import { freePorts } from "../free-port.js";
import { natsServer, natsServerBinary } from "../nats-server.js";
import { waitFor } from "../poll.js";

const schema = "fault_outbox";
const subject = "servers.server.created" as const;
const consumer = "fault_projection";
const restarts = 3;
const downtimeMs = 1_000;

function disposable(dispose: () => Promise<void>): AsyncDisposable {
  return { [Symbol.asyncDispose]: dispose };
}

const binary = natsServerBinary();

describe.skipIf(!binary)("outbox → NATS across broker crashes (skipped: no nats-server binary to crash)", () => {
  it("delivers every committed event exactly once and stores it once while the NATS server is SIGKILLed and restarted", async () => {
    const storeDir = await mkdtemp(join(tmpdir(), "nats-fault-"));
    const [port = 0] = await freePorts(1);
    const url = `nats://127.0.0.1:${port}`;
    const server = natsServer(binary as string, port, storeDir);
    onTestFinished(async () => {
      await server.kill();
      await rm(storeDir, { recursive: true, force: true });
    });
    await server.start();

    await using t = await createTestDb(schema);
    const { db } = t;
    await migrate(db, [
      ...outboxMigrations(schema),
      // No unique key: a duplicate reaching the projection must show up, not fail the insert.
      { id: "test/001_received.sql", sql: `CREATE TABLE ${schema}.received (event_id uuid NOT NULL)` },
    ]);

    // Two processes: one relays the outbox, the other consumes. Declared after the database, so
    // they are disposed before it: relay, consumer, buses, database.
    const producerBus = await createNatsBus({ servers: url, name: "fault-producer" });
    await using _producerBus = disposable(() => producerBus.close());
    const consumerBus = await createNatsBus({ servers: url, name: "fault-consumer" });
    await using _consumerBus = disposable(() => consumerBus.close());

    let deliveries = 0;
    await using _consumer = disposable(
      await startConsumer(
        { db, bus: consumerBus, inboxMs: 86_400_000, now: () => new Date() },
        {
          durable: consumer,
          handlers: {
            [subject]: async (tx, event) => {
              deliveries++;
              await tx.query(`INSERT INTO ${schema}.received (event_id) VALUES ($1)`, [event.eventId]);
            },
          },
        },
      ),
    );
    await using _relay = startOutboxRelay({ db, bus: producerBus, pollMs: 100, batchSize: 20 });

    const received = async () => {
      const { rows } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${schema}.received`);
      return rows[0]?.n ?? 0;
    };

    // Producer: small transactions, one in five rolled back, until the crashes are over.
    const committed: string[] = [];
    const rolledBack: string[] = [];
    let producing = true;
    const producer = (async () => {
      for (let i = 0; producing; i++) {
        const ids = Array.from({ length: 1 + (i % 3) }, () => randomUUID());
        const rollback = i % 5 === 4;
        try {
          await db.transaction(async (tx) => {
            for (const eventId of ids) {
              const event = buildEvent(subject, { eventId, tenantId: eventId, serverId: eventId, categoryId: "" });
              await enqueue(tx, schema, event);
            }
            if (rollback) throw new Error("rolled back on purpose");
          });
          committed.push(...ids);
        } catch {
          rolledBack.push(...ids);
        }
        await new Promise((resolve) => setTimeout(resolve, 15));
      }
    })();

    try {
      for (let crash = 0; crash < restarts; crash++) {
        const before = await received();
        await waitFor("consumption to progress before the crash", async () => (await received()) > before + 20, 15_000);
        await server.kill();
        await new Promise((resolve) => setTimeout(resolve, downtimeMs));
        await server.start();
      }
      const before = await received();
      await waitFor(
        "consumption to progress after the last restart",
        async () => (await received()) > before + 20,
        15_000,
      );
    } finally {
      producing = false;
      await producer;
    }

    await waitFor("every committed event at the consumer", async () => (await received()) >= committed.length, 20_000);
    const { rows } = await db.query<{ event_id: string; n: number }>(
      `SELECT event_id, count(*)::int AS n FROM ${schema}.received GROUP BY event_id`,
    );
    expect(rows.filter((row) => row.n !== 1)).toEqual([]);
    expect(rows.map((row) => row.event_id).sort()).toEqual([...committed].sort());
    expect(rolledBack.length).toBeGreaterThan(0);

    const { rows: left } = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM ${schema}.outbox WHERE published_at IS NULL`,
    );
    expect(left[0]?.n).toBe(0);

    const nc = await connect({ servers: url });
    onTestFinished(() => nc.close());
    const jsm = await nc.jetstreamManager();
    expect((await jsm.streams.info("SERVERS")).state.messages, server.log()).toBe(committed.length);
    expect(deliveries).toBeGreaterThanOrEqual(committed.length);
  }, 60_000);
});
