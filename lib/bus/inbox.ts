import type { Tx } from "../db/types.js";
import { assertSchemaName } from "../db/types.js";

/**
 * Records that `consumer` applied these events, in `<schema>.inbox`, inside the transaction that
 * applies them, in one statement. Resolves to the ids it recorded now, those to apply: an id
 * recorded already was applied before and must not be applied again. A concurrent attempt waits on
 * the first one's row lock and records (and applies) only if that one rolled back. Rows go in id
 * order, so two transactions recording overlapping ids lock them in one order and the later waits
 * instead of deadlocking.
 */
export async function recordInbox(
  tx: Tx,
  schema: string,
  consumer: string,
  eventIds: readonly string[],
): Promise<Set<string>> {
  if (eventIds.length === 0) return new Set();
  const { rows } = await tx.query<{ event_id: string }>(
    `INSERT INTO ${assertSchemaName(schema)}.inbox (consumer, event_id)
     SELECT $1, id FROM unnest($2::uuid[]) AS id ORDER BY id
     ON CONFLICT DO NOTHING
     RETURNING event_id`,
    [consumer, eventIds],
  );
  return new Set(rows.map((row) => row.event_id));
}
