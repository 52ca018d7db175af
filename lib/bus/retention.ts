import type { Db } from "../db/types.js";
import { logger } from "../log.js";
import { watchRetention } from "../metrics.js";
import { startWorker, type Worker } from "../worker/worker.js";

const log = logger("lib:bus:retention");

export const RETENTION_BATCH_ROWS = 5_000;

/**
 * `eventsMs`: how long a published event stays replayable (in the embedded mode the outbox is the stream).
 * `inboxMs` is never shorter, so the inbox forgets no event the broker can still redeliver.
 */
export type RetentionWindows = { eventsMs: number; inboxMs: number };

export type PruneSteps = { rows: number; statements: number; rowsPerStatementMax: number };

export type PruneResult = { outbox: PruneSteps; inbox: PruneSteps };

type Table = keyof PruneResult;

// Each batch is one statement outside any transaction: no snapshot or row lock outlives a batch, however
// large the backlog. An unpublished outbox row (published_at null) never matches. Constants, never input.
const agedBy: Record<Table, string> = { outbox: "published_at", inbox: "processed_at" };

async function deleteOlderThan(db: Db, table: Table, windowMs: number, limit: number): Promise<number> {
  const column = agedBy[table];
  const { rowCount } = await db.query(
    `DELETE FROM ${db.schema}.${table} WHERE ctid IN (
       SELECT ctid FROM ${db.schema}.${table}
        WHERE ${column} < now() - $1 * interval '1 millisecond'
        ORDER BY ${column}
        LIMIT $2)`,
    [windowMs, limit],
  );
  return rowCount;
}

type Pass = { result: PruneResult; step(): Promise<boolean> };

/** step() deletes a batch of every table whose last batch was full; a short batch means nothing more was due. */
function startPass(db: Db, windows: RetentionWindows, batchSize: number): Pass {
  if (!Number.isInteger(batchSize) || batchSize < 1) throw new Error(`retention batch size ${batchSize}`);
  const windowOf: Record<Table, number> = { outbox: windows.eventsMs, inbox: windows.inboxMs };
  const result: PruneResult = {
    outbox: { rows: 0, statements: 0, rowsPerStatementMax: 0 },
    inbox: { rows: 0, statements: 0, rowsPerStatementMax: 0 },
  };
  const pending = new Set<Table>(["outbox", "inbox"]);
  return {
    result,
    async step() {
      for (const table of [...pending]) {
        const rows = await deleteOlderThan(db, table, windowOf[table], batchSize);
        const steps = result[table];
        steps.rows += rows;
        steps.statements++;
        steps.rowsPerStatementMax = Math.max(steps.rowsPerStatementMax, rows);
        if (rows < batchSize) pending.delete(table);
      }
      return pending.size > 0;
    },
  };
}

/** In DELETEs of at most `batchSize` rows, oldest first, until one comes back short; never unpublished rows. */
export async function pruneEventTables(
  db: Db,
  windows: RetentionWindows,
  batchSize = RETENTION_BATCH_ROWS,
): Promise<PruneResult> {
  const pass = startPass(db, windows, batchSize);
  let more = true;
  while (more) more = await pass.step();
  return pass.result;
}

export type RetentionWorkerOptions = { intervalMs?: number; batchSize?: number };

/** A round is one batch per table, so stop() waits for one batch at most, never a whole pass. */
export function startRetentionWorker(db: Db, windows: RetentionWindows, options: RetentionWorkerOptions = {}): Worker {
  const batchSize = options.batchSize ?? RETENTION_BATCH_ROWS;
  let pass: Pass | undefined;
  const windowOf: Record<Table, number> = { outbox: windows.eventsMs, inbox: windows.inboxMs };
  const unwatch = (["outbox", "inbox"] as const).map((table) =>
    watchRetention(`${db.schema}.${table}`, () => overdueSeconds(db, table, windowOf[table])),
  );
  const worker = startWorker({
    name: `${db.schema}:event-retention`,
    intervalMs: options.intervalMs ?? 60 * 60_000,
    round: async () => {
      pass ??= startPass(db, windows, batchSize);
      // A failed step keeps the pass: the retry goes on where it stopped.
      if (await pass.step()) return true;
      const { outbox, inbox } = pass.result;
      pass = undefined;
      if (outbox.rows + inbox.rows > 0) log.info({ schema: db.schema, outbox, inbox }, "pruned event tables");
      return false;
    },
  });
  const stop = async (graceMs?: number) => {
    for (const off of unwatch) off();
    await worker.stop(graceMs);
  };
  return { ...worker, stop, [Symbol.asyncDispose]: () => stop() };
}

/** Read off the retention index; 0 when no row is overdue. */
async function overdueSeconds(db: Db, table: Table, windowMs: number): Promise<number> {
  const column = agedBy[table];
  const { rows } = await db.query<{ overdue: number | null }>(
    `SELECT EXTRACT(EPOCH FROM now() - $1 * interval '1 millisecond' - min(${column}))::float8 AS overdue
       FROM ${db.schema}.${table}`,
    [windowMs],
  );
  return Math.max(0, rows[0]?.overdue ?? 0);
}
