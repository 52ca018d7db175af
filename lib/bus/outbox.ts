import type { Migration } from "../db/migrate.js";
import { traceparentOf } from "../db/transaction-trace.js";
import type { Db, Queryable, Tx } from "../db/types.js";
import { assertSchemaName } from "../db/types.js";
import { logger } from "../log.js";
import { parseTraceparent } from "../trace.js";
import { startWorker, type Worker } from "../worker/worker.js";
import type { Bus } from "./bus.js";

/** Appended to a service's own migrations; `bus/` ids never clash with its `NNN_name.sql`. */
export function outboxMigrations(schema: string): Migration[] {
  const s = assertSchemaName(schema);
  return [
    {
      id: "bus/001_outbox_inbox.sql",
      sql: `
        CREATE TABLE ${s}.outbox (
          id bigserial PRIMARY KEY,
          event_id uuid NOT NULL UNIQUE,
          subject text NOT NULL,
          payload bytea NOT NULL,
          created_at timestamptz NOT NULL DEFAULT now(),
          published_at timestamptz
        );
        -- The relay only ever looks for what is still to publish.
        CREATE INDEX outbox_unpublished ON ${s}.outbox (id) WHERE published_at IS NULL;

        CREATE TABLE ${s}.inbox (
          consumer text NOT NULL,
          event_id uuid NOT NULL,
          processed_at timestamptz NOT NULL DEFAULT now(),
          PRIMARY KEY (consumer, event_id)
        );
      `,
    },
    {
      id: "bus/002_outbox_traceparent.sql",
      // The trace of the hop that committed the event, handed on with it (lib/trace.ts).
      sql: `ALTER TABLE ${s}.outbox ADD COLUMN traceparent text;`,
    },
    {
      id: "bus/003_retention_indexes.sql",
      sql: `
        -- Retention (retention.ts) deletes in batches, the oldest first: each batch reads the first
        -- rows of one of these indexes instead of scanning and sorting the whole table. The relay
        -- sets published_at once, from null, so the outbox index holds only published rows, the
        -- only ones retention may delete. Plain CREATE INDEX (a migration is one transaction): it
        -- blocks writes to the table while it builds.
        CREATE INDEX outbox_published_at ON ${s}.outbox (published_at) WHERE published_at IS NOT NULL;
        CREATE INDEX inbox_processed_at ON ${s}.inbox (processed_at);
      `,
    },
  ];
}

const log = logger("lib:bus:outbox");

function traceIdOf(traceparent: string | null): string | undefined {
  return traceparent ? parseTraceparent(traceparent)?.traceId : undefined;
}

/** An event to publish once the transaction that enqueues it commits. */
export type OutboxEvent = { subject: string; eventId: string; payload: Uint8Array };

/** In the caller's transaction; its NOTIFY wakes the relays only on commit, so a rollback publishes nothing. */
export async function enqueue(tx: Tx, schema: string, event: OutboxEvent): Promise<void> {
  const s = assertSchemaName(schema);
  await tx.query(`INSERT INTO ${s}.outbox (event_id, subject, payload, traceparent) VALUES ($1, $2, $3, $4)`, [
    event.eventId,
    event.subject,
    event.payload,
    traceparentOf(tx) ?? null,
  ]);
  await tx.query(`NOTIFY ${outboxChannel(s)}`);
}

export type OutboxRow = {
  id: number;
  event_id: string;
  subject: string;
  payload: Uint8Array;
  traceparent: string | null;
};
export const OUTBOX_ROW_COLUMNS = "id, event_id, subject, payload, traceparent";

export type OutboxRelayDeps = {
  db: Db;
  bus: Bus;
  /** The poll while the relay is not listening (its LISTEN failed or its connection was lost): 1 s. */
  pollMs?: number;
  /**
   * The poll while it listens, 10 s: every commit notifies, so the poll only finds rows a relay that died left
   * unlocked (another replica's) and never pays for an idle system's rounds every second.
   */
  listeningPollMs?: number;
  batchSize?: number;
};

/**
 * Publishes committed rows in id order, woken by enqueue's NOTIFY, polling for missed ones. A batch is
 * locked SKIP LOCKED (replicas relay side by side) and marked in the transaction that awaited every ack:
 * a failed publish rolls back and retries, so no row is skipped; the duplicate window absorbs repeats.
 */
export function startOutboxRelay(deps: OutboxRelayDeps): Worker {
  const { db, bus } = deps;
  const batchSize = deps.batchSize ?? 100;
  const schema = db.schema;

  const relayBatch = () =>
    db.transaction(async (tx) => {
      const { rows } = await tx.query<OutboxRow>(
        `SELECT ${OUTBOX_ROW_COLUMNS} FROM ${schema}.outbox
          WHERE published_at IS NULL
          ORDER BY id
          LIMIT $1
          FOR UPDATE SKIP LOCKED`,
        [batchSize],
      );
      // One at a time, in id order: the broker stores this relay's events in commit order.
      for (const row of rows) {
        await bus.publish(row.subject, row.event_id, row.payload, row.traceparent ?? undefined);
        if (log.isLevelEnabled("debug")) {
          log.debug({ subject: row.subject, eventId: row.event_id, trace_id: traceIdOf(row.traceparent) }, "published");
        }
      }
      if (rows.length > 0) {
        await tx.query(`UPDATE ${schema}.outbox SET published_at = now() WHERE id = ANY($1::bigint[])`, [
          rows.map((row) => row.id),
        ]);
      }
      return rows.length;
    });

  // The poll behind the NOTIFY finds nothing nearly every time: one read of the unpublished index then, where the
  // batch's transaction is three round trips (an idle system's Postgres spent most of its time on these polls). A
  // round a NOTIFY or a full batch started goes straight to its batch: under load the read would be one more each.
  const anyUnpublished = async () =>
    (await db.query(`SELECT 1 FROM ${schema}.outbox WHERE published_at IS NULL LIMIT 1`)).rows.length > 0;

  return startWorker({
    name: `${schema}:outbox-relay`,
    intervalMs: deps.pollMs ?? 1000,
    wakeOn: { db, channel: outboxChannel(schema), pollMs: deps.listeningPollMs ?? 10_000 },
    round: async (_signal, polled) => (!polled || (await anyUnpublished())) && (await relayBatch()) === batchSize,
  });
}

/** The NOTIFY channel enqueue() signals on commit; relays and the embedded bus listen to it. */
export function outboxChannel(schema: string): string {
  return `${assertSchemaName(schema)}_outbox`;
}

/** `age`: of the oldest unpublished event, in seconds (0 when none). */
export async function outboxBacklog(
  q: Queryable,
  schema: string,
): Promise<{ backlog: number; age: number; oldest?: { eventId: string; subject: string; createdAt: Date } }> {
  const s = assertSchemaName(schema);
  const { rows } = await q.query<{
    backlog: string;
    event_id: string | null;
    subject: string | null;
    created_at: Date | null;
    age: number | null;
  }>(
    `SELECT (SELECT count(*) FROM ${s}.outbox WHERE published_at IS NULL) AS backlog, o.event_id, o.subject,
            o.created_at, EXTRACT(EPOCH FROM now() - o.created_at)::float8 AS age
       FROM (SELECT 1) one
       LEFT JOIN LATERAL (SELECT event_id, subject, created_at FROM ${s}.outbox WHERE published_at IS NULL ORDER BY id LIMIT 1) o ON true`,
  );
  const row = rows[0];
  const oldest =
    row?.event_id && row.subject && row.created_at
      ? { eventId: row.event_id, subject: row.subject, createdAt: row.created_at }
      : undefined;
  return { backlog: Number(row?.backlog ?? 0), age: Math.max(0, row?.age ?? 0), ...(oldest ? { oldest } : {}) };
}
