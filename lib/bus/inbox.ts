import type { Db, Tx } from "../db/types.js";

/**
 * Applies an event at most once per consumer: in one transaction it records `(consumer,
 * eventId)` in `<db.schema>.inbox` and runs `apply`. Returns false without applying when the id
 * was already recorded, so a redelivered or concurrently delivered event is harmless; a concurrent
 * attempt waits on the first one's row lock and applies only if that one rolled back.
 */
export async function handleOnce(
  db: Db,
  consumer: string,
  eventId: string,
  apply: (tx: Tx) => Promise<void>,
): Promise<boolean> {
  return db.transaction(async (tx) => {
    const recorded = await tx.query(
      `INSERT INTO ${db.schema}.inbox (consumer, event_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
      [consumer, eventId],
    );
    if (recorded.rowCount === 0) return false;
    await apply(tx);
    return true;
  });
}
