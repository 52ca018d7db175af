import type { Db } from "../../lib/db/types.js";
import type { WorkerSpec } from "../../lib/worker/worker.js";
import { IDEMPOTENCY_TTL_MS } from "./markers-service.js";
import { deleteIdempotencyExpired } from "./store.js";

export type IdempotencySweepDeps = {
  db: Db;
  now: () => Date;
  /** Per statement. */
  batchSize?: number;
  intervalMs?: number;
};

/** Creates take an expired key over anyway (decisions.md §3): the sweep only keeps the table small. */
export function idempotencySweepWorker(deps: IdempotencySweepDeps): WorkerSpec {
  const batchSize = deps.batchSize ?? 1000;
  return {
    name: "markers-idempotency-sweep",
    intervalMs: deps.intervalMs ?? 60_000,
    async round() {
      const before = new Date(deps.now().getTime() - IDEMPOTENCY_TTL_MS);
      return (await deleteIdempotencyExpired(deps.db, before, batchSize)) === batchSize;
    },
  };
}
