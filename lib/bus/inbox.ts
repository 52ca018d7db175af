import type { Tx } from "../db/types.js";
import { assertSchemaName } from "../db/types.js";

/**
 * Records that `consumer` applied `eventId`, in `<schema>.inbox`, inside the transaction that
 * applies it. Returns false when the id was already recorded: the event was applied before and must
 * not be applied again. A concurrent attempt waits on the first one's row lock and records (and
 * applies) only if that one rolled back.
 */
export async function recordInbox(tx: Tx, schema: string, consumer: string, eventId: string): Promise<boolean> {
  const recorded = await tx.query(
    `INSERT INTO ${assertSchemaName(schema)}.inbox (consumer, event_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
    [consumer, eventId],
  );
  return recorded.rowCount === 1;
}
