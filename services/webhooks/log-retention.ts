import type { Db } from "../../lib/db/types.js";
import { logger } from "../../lib/log.js";
import { watchRetention } from "../../lib/metrics.js";
import type { WorkerSpec } from "../../lib/worker/worker.js";
import { deleteAttemptHoursExpired, deleteDeliveriesExpired, deliveryLogOverdueSeconds } from "./retention-store.js";

const log = logger("webhooks:log-retention");

export type LogRetentionDeps = {
  db: Db;
  /** How long an ended delivery stays in the log (WEBHOOK_LOG_RETENTION). */
  retentionMs: number;
  /** Deliveries per statement; a full batch starts the next round at once. */
  batchSize?: number;
  /** The wait between rounds. */
  intervalMs?: number;
};

/**
 * Drops ended deliveries, with their attempts, once WEBHOOK_LOG_RETENTION has passed since they
 * ended (decisions.md §6.1 "Retention"); a pending one stays however old; and the stats' hourly
 * attempt counts past the eight days they serve. Runs whether or not
 * WEBHOOK_DELIVERY is on: a deployment that turned delivery off still holds the log it had.
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
