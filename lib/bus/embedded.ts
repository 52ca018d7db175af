import type { Migration } from "../db/migrate.js";
import { migrate } from "../db/migrate.js";
import type { Db, Queryable } from "../db/types.js";
import { logger } from "../log.js";
import { startWorker, type Worker } from "../worker/worker.js";
import type { Bus, BusHandler, BusMessage, Producer } from "./bus.js";
import { assertDurableName, assertPublishSubject, assertSubjectPattern, producers, subjectMatches } from "./bus.js";
import { OUTBOX_ROW_COLUMNS, type OutboxRow, outboxChannel, outboxMigrations } from "./outbox.js";

const log = logger("lib:bus:embedded");

const batchSize = 100;
// Only a safety net: every outbox row comes with a NOTIFY (enqueue), which PGlite delivers in-process, and a
// notification during a round is kept. At 1 s the ~20 readers' polls were most of an idle system's CPU.
const POLL_MS = 30_000;

const cursorMigrations: Migration[] = [
  {
    id: "001_cursor.sql",
    sql: `
      -- How far each durable has read each subject filter of a producer's outbox: the outbox id of
      -- the last message it settled. Advanced in the consumer's own transaction.
      CREATE TABLE bus.cursor (
        durable text NOT NULL,
        filter text NOT NULL,
        position bigint NOT NULL,
        PRIMARY KEY (durable, filter)
      );
    `,
  },
];

type Member = { handler: BusHandler; running: Promise<unknown> | undefined };
type Durable = { name: string; subjects: readonly string[]; members: Member[]; turn: number; workers: Worker[] };
type Listener = { subjects: readonly string[]; handler: BusHandler; queue: BusMessage[]; draining?: Promise<void> };

/**
 * Durables read the producers' outbox tables, one worker per subject filter (in order within one, as
 * JetStream), and settle their position in the consumer's transaction with the inbox row. Reading by
 * outbox id is sound only because the embedded database is one connection: ids become visible in commit
 * order (real Postgres does not promise that, hence JetStream there). `publish` feeds only broadcasts.
 */
export async function createEmbeddedBus(
  openDb: (schema: string) => Db,
  { pollMs = POLL_MS }: { pollMs?: number } = {},
): Promise<Bus> {
  const db = openDb("bus");
  await migrate(db, cursorMigrations);
  const outboxes = new Map<Producer, Db>();
  // A consumer may start before its producer has run its migrations.
  for (const producer of producers) {
    const producerDb = openDb(producer);
    await migrate(producerDb, outboxMigrations(producer));
    outboxes.set(producer, producerDb);
  }
  const durables = new Map<string, Durable>();
  const listeners = new Set<Listener>();
  let closed = false;

  const saveCursor = (q: Queryable, durable: string, filter: string, position: number) =>
    q.query(
      `INSERT INTO bus.cursor (durable, filter, position) VALUES ($1, $2, $3)
       ON CONFLICT (durable, filter) DO UPDATE SET position = GREATEST(bus.cursor.position, EXCLUDED.position)`,
      [durable, filter, position],
    );

  const readFilter = (durable: Durable, filter: string): Worker => {
    const producer = assertSubjectPattern(filter);
    const outbox = outboxes.get(producer) as Db;
    return startWorker({
      name: `bus:${durable.name}:${filter}`,
      intervalMs: pollMs,
      wakeOn: { db: outbox, channel: outboxChannel(producer) },
      backoff: { baseMs: 50, maxMs: 5_000 },
      round: async () => {
        const { rows: cursor } = await db.query<{ position: number }>(
          "SELECT position FROM bus.cursor WHERE durable = $1 AND filter = $2",
          [durable.name, filter],
        );
        const { rows } = await db.query<OutboxRow>(
          `SELECT ${OUTBOX_ROW_COLUMNS} FROM ${producer}.outbox WHERE id > $1 ORDER BY id LIMIT $2`,
          [cursor[0]?.position ?? 0, batchSize],
        );
        let passed: number | undefined;
        for (const row of rows) {
          if (closed || durable.members.length === 0) return false;
          if (!subjectMatches(filter, row.subject)) {
            passed = row.id;
            continue;
          }
          let settled = false;
          const msg: BusMessage = {
            subject: row.subject,
            eventId: row.event_id,
            data: row.payload,
            traceparent: row.traceparent ?? undefined,
            settle: async (tx) => {
              await saveCursor(tx, durable.name, filter, row.id);
              settled = true;
            },
          };
          const member = durable.members[durable.turn++ % durable.members.length] as Member;
          const run = member.handler(msg);
          member.running = run.catch(() => {});
          try {
            await run;
          } finally {
            member.running = undefined;
          }
          // A handler that keeps no transaction of its own is settled after it resolved (at least once).
          if (!settled) await saveCursor(db, durable.name, filter, row.id);
          passed = undefined;
        }
        if (passed !== undefined) await saveCursor(db, durable.name, filter, passed);
        return rows.length === batchSize;
      },
    });
  };

  const drain = async (listener: Listener): Promise<void> => {
    for (let msg = listener.queue.shift(); msg !== undefined; msg = listener.queue.shift()) {
      try {
        await listener.handler(msg);
      } catch (err) {
        // Broadcast has no redelivery, as with core NATS.
        log.warn({ err, subject: msg.subject, eventId: msg.eventId }, "broadcast handler failed");
      }
    }
    listener.draining = undefined;
  };

  return {
    async publish(subject, eventId, data, traceparent) {
      if (closed) throw new Error("bus is closed");
      assertPublishSubject(subject);
      const msg: BusMessage = { subject, eventId, data: data.slice(), traceparent };
      for (const listener of listeners) {
        if (!listener.subjects.some((pattern) => subjectMatches(pattern, subject))) continue;
        listener.queue.push(msg);
        // On a later tick, never inside publish(): the relay publishes inside its transaction.
        listener.draining ??= Promise.resolve().then(() => drain(listener));
      }
    },

    async subscribe(name, subjects, handler) {
      if (closed) throw new Error("bus is closed");
      assertDurableName(name);
      if (subjects.length === 0) throw new Error(`durable ${name} subscribes to no subject`);
      for (const pattern of subjects) assertSubjectPattern(pattern);
      let durable = durables.get(name);
      if (durable && !sameSet(durable.subjects, subjects)) {
        throw new Error(`durable ${name} already subscribes to ${durable.subjects.join(", ")}`);
      }
      const member: Member = { handler, running: undefined };
      if (!durable) {
        durable = { name, subjects: [...new Set(subjects)], members: [member], turn: 0, workers: [] };
        durables.set(name, durable);
        const own = durable;
        own.workers = own.subjects.map((filter) => readFilter(own, filter));
      } else {
        durable.members.push(member);
      }
      const own = durable;
      return async () => {
        own.members = own.members.filter((m) => m !== member);
        await member.running;
        if (own.members.length === 0 && durables.get(name) === own) {
          durables.delete(name);
          await Promise.all(own.workers.map((worker) => worker.stop()));
        }
      };
    },

    async broadcast(subjects, handler) {
      if (closed) throw new Error("bus is closed");
      for (const pattern of subjects) assertSubjectPattern(pattern);
      const listener: Listener = { subjects: [...subjects], handler, queue: [] };
      listeners.add(listener);
      return async () => {
        listeners.delete(listener);
        listener.queue.length = 0;
        await listener.draining;
      };
    },

    async pending(name, subjects) {
      let total = 0;
      for (const filter of new Set(subjects)) {
        const producer = assertSubjectPattern(filter);
        const { rows: cursor } = await db.query<{ position: number }>(
          "SELECT position FROM bus.cursor WHERE durable = $1 AND filter = $2",
          [name, filter],
        );
        // Counted per subject, then matched here: the outbox holds a handful of distinct subjects.
        const { rows } = await db.query<{ subject: string; n: string }>(
          `SELECT subject, count(*) AS n FROM ${producer}.outbox WHERE id > $1 GROUP BY subject`,
          [cursor[0]?.position ?? 0],
        );
        for (const row of rows) if (subjectMatches(filter, row.subject)) total += Number(row.n);
      }
      return total;
    },

    isReady: () => !closed,

    async close() {
      if (closed) return;
      closed = true;
      const running: Promise<unknown>[] = [];
      for (const durable of durables.values()) {
        for (const member of durable.members) if (member.running) running.push(member.running);
        durable.members = [];
        running.push(...durable.workers.map((worker) => worker.stop()));
      }
      durables.clear();
      for (const listener of listeners) {
        listener.queue.length = 0;
        if (listener.draining) running.push(listener.draining);
      }
      listeners.clear();
      await Promise.all(running);
    },
  };
}

function sameSet(a: readonly string[], b: readonly string[]): boolean {
  const left = new Set(a);
  const right = new Set(b);
  return left.size === right.size && [...left].every((s) => right.has(s));
}
