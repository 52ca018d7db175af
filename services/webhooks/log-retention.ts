import { isLockTimeout } from "../../lib/db/errors.js";
import type { Db } from "../../lib/db/types.js";
import { logger } from "../../lib/log.js";
import { watchRetention } from "../../lib/metrics.js";
import type { WorkerSpec } from "../../lib/worker/worker.js";
import {
  createLogDay,
  deleteAttemptHoursExpired,
  deleteExpiredRows,
  deliveryLogOverdueSeconds,
  dropLogDay,
  listLogDays,
  missingLogDays,
} from "./retention-store.js";

const log = logger("webhooks:log-retention");

const DAY_MS = 86_400_000;

/**
 * How long past the window a day may wait for its last deliveries to end before what it holds past the window is
 * deleted row by row: longer than the default retry schedule (about 3.2 days), so that only a day a replay or a held
 * subscription keeps goes that way.
 */
export const STRAGGLER_GRACE_MS = 7 * DAY_MS;

/** Days made ahead, so that no delivery lands in a default partition while the worker runs. */
const DAYS_AHEAD = 2;

/**
 * A make or drop of partitions waits at most this long for its locks (the parents' ACCESS EXCLUSIVE), so that the
 * queries queued behind it wait no longer; it is tried again next round.
 */
const LOCK_TIMEOUT_MS = 200;

export type LogRetentionDeps = {
  db: Db;
  retentionMs: number;
  /** Rows deleted per statement, where rows are deleted one by one. */
  batchSize?: number;
  intervalMs?: number;
  graceMs?: number;
};

/**
 * decisions.md §6.1 "Retention"; a pending delivery stays however old. Each round makes the coming days' partitions,
 * drops every day whose deliveries all ended more than the window ago, and deletes in bounded statements what the
 * default partitions and days held past their grace still keep past the window. Until its day goes, a delivery past
 * the window is out of sight (store.ts). Runs with WEBHOOK_DELIVERY off too: a deployment that turned delivery off
 * still holds its log.
 */
export function logRetentionWorker(deps: LogRetentionDeps): WorkerSpec {
  const batchSize = deps.batchSize ?? 2_000;
  const graceMs = deps.graceMs ?? STRAGGLER_GRACE_MS;
  const { db, retentionMs } = deps;
  let unwatch = () => {};
  /** Runs a make or drop of partitions; a lock it could not get in time leaves it to the next round. */
  const underLockTimeout = async <T>(what: string, work: () => Promise<T>): Promise<T | undefined> => {
    try {
      return await work();
    } catch (err) {
      if (!isLockTimeout(err)) throw err;
      log.warn({ what }, "the delivery log's partitions were busy; next round");
      return undefined;
    }
  };
  return {
    name: "webhooks-log-retention",
    started() {
      unwatch = watchRetention("webhooks.delivery", () => deliveryLogOverdueSeconds(db, retentionMs, graceMs));
    },
    async drain() {
      unwatch();
    },
    intervalMs: deps.intervalMs ?? 60_000,
    async round() {
      // Only the days missing are made (one read a round when none is). A day that cannot be made (a default partition
      // holding one of its rows refuses it) leaves its deliveries to the default partitions, whose rows go one by one:
      // the other days, drops and deletes go on regardless.
      for (const ahead of await missingLogDays(db, DAYS_AHEAD)) {
        await underLockTimeout(`make a day ${ahead} ahead`, () =>
          db.transaction((tx) => createLogDay(tx, ahead, LOCK_TIMEOUT_MS)),
        ).catch((err: unknown) => log.error({ err, ahead }, "making a day of the delivery log failed"));
      }
      let more = false;
      for (const { day, expired, straggling } of await listLogDays(db, retentionMs, graceMs)) {
        if (!expired) break;
        const dropped = await underLockTimeout(`drop ${day}`, () =>
          db.transaction((tx) => dropLogDay(tx, day, retentionMs, LOCK_TIMEOUT_MS)),
        );
        if (dropped) log.info({ day }, "dropped a day of the delivery log");
        else if (straggling) more = (await deleteExpiredRows(db, day, retentionMs, batchSize)) === batchSize || more;
      }
      const deleted = await deleteExpiredRows(db, "default", retentionMs, batchSize);
      if (deleted > 0) log.info({ deleted }, "pruned the delivery log's default partition");
      const hours = await deleteAttemptHoursExpired(db, batchSize);
      return more || deleted === batchSize || hours === batchSize;
    },
  };
}
