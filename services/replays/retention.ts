import type { Db } from "../../lib/db/types.js";
import type { WorkerSpec } from "../../lib/worker/worker.js";
import { expireLockedReplay } from "./lifecycle.js";
import * as store from "./store.js";

export type RetentionDeps = {
  db: Db;
  now: () => Date;
  /** Replays per transaction; a full batch starts the next round at once. */
  batchSize?: number;
  /** The wait between rounds. */
  intervalMs?: number;
};

/**
 * The retention reaper. Each round moves finished replays whose hot period has passed
 * (`hot_until`, set from the tenant's plan when the recording started) from `hot` to `cold`, then expires a batch of replays whose `retention_until` has passed, through the
 * same transition as ExpireReplay, in one transaction. Rows are claimed with FOR UPDATE SKIP LOCKED,
 * and a claimed row is re-checked against its committed state, so several replicas never move or
 * expire one replay twice, and `replays.asset.expired` is enqueued once. A recording in progress is
 * never touched.
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
