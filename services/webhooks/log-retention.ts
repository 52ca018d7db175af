import type { Db } from "../../lib/db/types.js";
import { logger } from "../../lib/log.js";
import { watchRetention } from "../../lib/metrics.js";
import type { WorkerSpec } from "../../lib/worker/worker.js";
import { deleteAttemptHoursExpired, deleteDeliveriesExpired, deliveryLogOverdueSeconds } from "./retention-store.js";

const log = logger("webhooks:log-retention");

export type LogRetentionDeps = {
  db: Db;
  retentionMs: number;
  /** Per statement. */
  batchSize?: number;
  intervalMs?: number;
};

/**
 * decisions.md §6.1 "Retention"; a pending delivery stays however old. Runs with WEBHOOK_DELIVERY off too:
 * a deployment that turned delivery off still holds its log.
 */
export function logRetentionWorker(deps: LogRetentionDeps): WorkerSpec {
  const batchSize = deps.batchSize ?? 2_000;
  let unwatch = () => {};
  return {
    name: "webhooks-log-retention",
    started() {
      unwatch = watchRetention("webhooks.delivery", () => deliveryLogOverdueSeconds(deps.db, deps.retentionMs));
    },
    async drain() {
      unwatch();
    },
    intervalMs: deps.intervalMs ?? 60_000,
    async round() {
      const deleted = await deleteDeliveriesExpired(deps.db, deps.retentionMs, batchSize);
      if (deleted > 0) log.info({ deleted }, "pruned the delivery log");
      const hours = await deleteAttemptHoursExpired(deps.db, batchSize);
      return deleted === batchSize || hours === batchSize;
    },
  };
}
