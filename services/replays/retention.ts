import type { Db } from "../../lib/db/types.js";
import type { WorkerSpec } from "../../lib/worker/worker.js";
import { expireLockedReplay } from "./lifecycle.js";
import * as store from "./store.js";

export type RetentionDeps = {
  db: Db;
  now: () => Date;
  /** Per transaction. */
  batchSize?: number;
  intervalMs?: number;
};

/**
 * Moves replays past `hot_until` to cold, then expires those past `retention_until` as ExpireReplay does.
 * Claimed SKIP LOCKED and re-checked once locked, so replicas never expire one replay twice.
 */
export function retentionWorker(deps: RetentionDeps): WorkerSpec {
  const batchSize = deps.batchSize ?? 50;
  return {
    name: "replays-retention",
    intervalMs: deps.intervalMs ?? 60_000,
    async round() {
      const now = deps.now();
      const cooled = await store.updateReplaysCold(deps.db, now, batchSize);
      const expired = await deps.db.transaction(async (tx) => {
        const due = await store.findReplaysDueForExpiryForUpdate(tx, now, batchSize);
        for (const row of due) await expireLockedReplay(tx, row);
        return due.length;
      });
      return cooled === batchSize || expired === batchSize;
    },
  };
}
