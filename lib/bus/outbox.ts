import type { Migration } from "../db/migrate.js";
import type { Db, Tx } from "../db/types.js";
import { assertSchemaName } from "../db/types.js";
import { logger } from "../log.js";
import type { Bus } from "./bus.js";

const log = logger("lib:bus:outbox");

const backoffBaseMs = 100;
const backoffMaxMs = 5_000;
const cleanupEveryMs = 60 * 60_000;

/**
 * The outbox and inbox tables of one service's schema; the service appends these to its own
 * migrations. Ids start with `bus/` so they never clash with the service's `NNN_name.sql`.
 */
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
  ];
}

/** An event to publish once the transaction that enqueues it commits. */
export type OutboxEvent = { subject: string; eventId: string; payload: Uint8Array };

/**
 * Records an event in `<schema>.outbox` inside the caller's transaction and wakes the relays
 * (NOTIFY is delivered only on commit). A rolled-back transaction therefore publishes nothing.
 */
export async function enqueue(tx: Tx, schema: string, event: OutboxEvent): Promise<void> {
  const s = assertSchemaName(schema);
  await tx.query(`INSERT INTO ${s}.outbox (event_id, subject, payload) VALUES ($1, $2, $3)`, [
    event.eventId,
    event.subject,
    event.payload,
  ]);
  await tx.query(`NOTIFY ${s}_outbox`);
}

export type OutboxRelayDeps = { db: Db; bus: Bus; pollMs?: number; batchSize?: number };

/** A running relay; stopping (or disposing) it waits for the round in progress. */
export type OutboxRelay = { stop(): Promise<void> } & AsyncDisposable;

/**
 * Publishes the committed rows of `<db.schema>.outbox` in id order and marks them published.
 * It wakes on NOTIFY and polls every `pollMs` as a safety net for missed notifications.
 *
 * Each round locks a batch with `FOR UPDATE SKIP LOCKED` (replicas relay side by side), awaits
 * the broker's ack for every row and marks the batch in the same transaction. A failed publish
 * rolls the round back and retries after a capped exponential backoff, so a committed row is never
 * skipped; what was published before the failure goes out again and the broker's duplicate window
 * (event id = `Nats-Msg-Id`) absorbs it. About once an hour, rows published more than a day ago
 * are deleted.
 */
export function startOutboxRelay(deps: OutboxRelayDeps): OutboxRelay {
  const { db, bus } = deps;
  const pollMs = deps.pollMs ?? 1000;
  const batchSize = deps.batchSize ?? 100;
  const schema = db.schema;

  let stopping = false;
  let woken = false;
  let wake: (() => void) | undefined;
  const nudge = () => {
    woken = true;
    wake?.();
  };
  // Ends early on nudge() when `wakeable`, and always on stop().
  const pause = (ms: number, wakeable: boolean) =>
    new Promise<void>((resolve) => {
      if (stopping || (wakeable && woken)) return resolve();
      const timer = setTimeout(resolve, ms);
      wake = () => {
        if (!wakeable && !stopping) return;
        clearTimeout(timer);
        resolve();
      };
    }).finally(() => {
      wake = undefined;
    });

  const relayBatch = () =>
    db.transaction(async (tx) => {
      const { rows } = await tx.query<{ id: number; event_id: string; subject: string; payload: Uint8Array }>(
        `SELECT id, event_id, subject, payload FROM ${schema}.outbox
          WHERE published_at IS NULL
          ORDER BY id
          LIMIT $1
          FOR UPDATE SKIP LOCKED`,
        [batchSize],
      );
      // One at a time, in id order: the broker stores this relay's events in commit order.
      for (const row of rows) await bus.publish(row.subject, row.event_id, row.payload);
      if (rows.length > 0) {
        await tx.query(`UPDATE ${schema}.outbox SET published_at = now() WHERE id = ANY($1::bigint[])`, [
          rows.map((row) => row.id),
        ]);
      }
      return rows.length;
    });

  const deletePublished = async () => {
    const { rowCount } = await db.query(`DELETE FROM ${schema}.outbox WHERE published_at < now() - interval '1 day'`);
    if (rowCount > 0) log.info({ schema, deleted: rowCount }, "deleted old published outbox rows");
  };

  const loop = async () => {
    let unlisten: (() => Promise<void>) | undefined;
    try {
      unlisten = await db.listen(`${schema}_outbox`, nudge);
    } catch (err) {
      log.warn({ err, schema }, "LISTEN failed; relaying by polling only");
    }
    let failures = 0;
    let lastCleanup = 0;
    try {
      while (!stopping) {
        woken = false;
        try {
          const relayed = await relayBatch();
          failures = 0;
          if (relayed === batchSize) continue;
          if (Date.now() - lastCleanup > cleanupEveryMs) {
            lastCleanup = Date.now();
            await deletePublished();
          }
        } catch (err) {
          failures++;
          const delayMs = Math.min(backoffBaseMs * 2 ** (failures - 1), backoffMaxMs);
          log.warn({ err, schema, failures, delayMs }, "outbox relay round failed; retrying");
          // Notifications do not cut a backoff short: a busy service would hammer a broker that is down.
          await pause(delayMs, false);
          continue;
        }
        await pause(pollMs, true);
      }
    } finally {
      await unlisten?.();
    }
  };

  const running = loop();
  const stop = async () => {
    stopping = true;
    wake?.();
    await running;
  };
  return { stop, [Symbol.asyncDispose]: stop };
}
