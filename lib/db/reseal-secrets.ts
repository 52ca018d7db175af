import type { SecretBox } from "../secrets/box.js";
import type { WorkerSpec } from "../worker/worker.js";
import type { Queryable } from "./types.js";

/** Code constants, never input. */
export type SealedColumns = { table: string; id: string; idType: "uuid" | "text"; columns: readonly string[] };

export type ResealCount = { resealed: number; unreadable: number };

const RESEAL_INTERVAL_MS = 3_600_000;
const RESEAL_BATCH = 500;

/**
 * Seals clear text and values under the previous key with the current one, in key order (resumable). A row
 * is written only if unchanged since read, so it is safe beside live traffic; unopenable values are counted.
 */
export async function resealAll(q: Queryable, target: SealedColumns, box: SecretBox): Promise<ResealCount> {
  const count: ResealCount = { resealed: 0, unreadable: 0 };
  const { table, id, idType, columns } = target;
  const stale = columns.map((c) => `(${c} IS NOT NULL AND ${c} NOT LIKE $1)`).join(" OR ");
  let after: string | null = null;
  for (;;) {
    const { rows }: { rows: Record<string, string | null>[] } = await q.query<Record<string, string | null>>(
      `SELECT ${id}::text AS id, ${columns.join(", ")} FROM ${table}
        WHERE (${stale}) AND ($2::${idType} IS NULL OR ${id} > $2::${idType})
        ORDER BY ${id} LIMIT $3`,
      [`enc1:${box.keyId}:%`, after, RESEAL_BATCH],
    );
    if (rows.length === 0) return count;
    after = rows.at(-1)?.id ?? null;
    const ids: string[] = [];
    const before: (string | null)[][] = columns.map(() => []);
    const resealed: (string | null)[][] = columns.map(() => []);
    for (const row of rows) {
      let sealed: (string | null)[];
      try {
        sealed = columns.map((c) => {
          const value = row[c] ?? null;
          return value === null || box.isCurrent(value) ? value : box.seal(box.open(value));
        });
      } catch {
        count.unreadable++;
        continue;
      }
      ids.push(row.id as string);
      columns.forEach((c, i) => {
        before[i]?.push(row[c] ?? null);
        resealed[i]?.push(sealed[i] ?? null);
      });
    }
    if (ids.length === 0) continue;
    const n = columns.length;
    const { rowCount } = await q.query(
      `UPDATE ${table} AS t SET ${columns.map((c, i) => `${c} = v.new${i}`).join(", ")}
         FROM unnest($1::text[], ${columns.map((_, i) => `$${i + 2}::text[], $${i + 2 + n}::text[]`).join(", ")})
           AS v(id, ${columns.map((_, i) => `old${i}, new${i}`).join(", ")})
        WHERE t.${id} = v.id::${idType} AND ${columns.map((c, i) => `t.${c} IS NOT DISTINCT FROM v.old${i}`).join(" AND ")}`,
      [ids, ...before, ...resealed],
    );
    count.resealed += rowCount;
  }
}

/** At start, then hourly, so an upgrade's clear text and a rotation's old key move on without anyone asking. */
export function resealWorker(
  q: Queryable,
  target: SealedColumns,
  box: SecretBox,
  log: { info(o: object, msg: string): void; error(o: object, msg: string): void },
): WorkerSpec {
  return {
    name: `reseal:${target.table}`,
    intervalMs: RESEAL_INTERVAL_MS,
    async round() {
      const count = await resealAll(q, target, box);
      if (count.resealed > 0) log.info({ table: target.table, ...count }, "sealed secrets anew under SECRETS_KEY");
      if (count.unreadable > 0) {
        log.error({ table: target.table, ...count }, "secrets sealed under a key this process does not hold");
      }
      return false;
    },
  };
}
