import type { Tx } from "../db/types.js";
import { assertSchemaName } from "../db/types.js";

/**
 * In the applying transaction; resolves to the ids recorded now, the ones to apply. A concurrent attempt
 * waits on the row lock; ids go in order, so overlapping transactions wait instead of deadlocking.
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
