import type { Db } from "../db/types.js";
import { logger } from "../log.js";
import { startWorker, type Worker } from "../worker/worker.js";

const log = logger("lib:bus:retention");

/**
 * How long event bookkeeping is kept (config `EVENT_RETENTION`, `INBOX_RETENTION`). `eventsMs` is
 * how long a published event stays replayable: the JetStream streams' max age, and how long
 * published outbox rows are kept (in the embedded mode the outbox is the stream). `inboxMs` is how
 * long a consumer remembers an applied event id; it is never shorter than `eventsMs`, so no event
 * the broker can still redeliver has been forgotten by the inbox.
 */
export type RetentionWindows = { eventsMs: number; inboxMs: number };

/** Deletes `<db.schema>`'s outbox rows published longer ago than eventsMs and inbox rows older than inboxMs. */
export async function pruneEventTables(db: Db, windows: RetentionWindows): Promise<{ outbox: number; inbox: number }> {
  const schema = db.schema;
  const outbox = await db.query(
    `DELETE FROM ${schema}.outbox WHERE published_at < now() - $1 * interval '1 millisecond'`,
    [windows.eventsMs],
  );
  const inbox = await db.query(
    `DELETE FROM ${schema}.inbox WHERE processed_at < now() - $1 * interval '1 millisecond'`,
    [windows.inboxMs],
  );
  return { outbox: outbox.rowCount, inbox: inbox.rowCount };
}

/** Prunes one service's outbox and inbox every `intervalMs` (an hour by default). */
export function startRetentionWorker(db: Db, windows: RetentionWindows, intervalMs = 60 * 60_000): Worker {
  return startWorker({
    name: `${db.schema}:event-retention`,
    intervalMs,
    round: async () => {
      const deleted = await pruneEventTables(db, windows);
      if (deleted.outbox + deleted.inbox > 0) log.info({ schema: db.schema, ...deleted }, "pruned event tables");
      return false;
    },
  });
}
