import type { BlobStore } from "../../lib/blob/blob.js";
import type { Db } from "../../lib/db/types.js";
import { logger } from "../../lib/log.js";
import type { WorkerSpec } from "../../lib/worker/worker.js";
import * as archive from "./archive-store.js";

const log = logger("replays:blob-deletions");

export type BlobDeletionsDeps = {
  db: Db;
  blobs: BlobStore;
  batchSize?: number;
  intervalMs?: number;
  /** How long a claimed key is left to this replica before another may take it. */
  leaseMs?: number;
  /** Doubling per attempt. */
  retry?: { baseMs: number; maxMs: number };
};

export function retryDelayMs(attempts: number, retry: { baseMs: number; maxMs: number }): number {
  return Math.min(retry.baseMs * 2 ** Math.min(attempts, 30), retry.maxMs);
}

/**
 * Removes each archive outside any transaction (the embedded mode's one connection cannot wait on a slow
 * store), deleting the queue row only once the store confirmed; removing a key twice does no harm.
 */
export function blobDeletionsWorker(deps: BlobDeletionsDeps): WorkerSpec {
  const batchSize = deps.batchSize ?? 50;
  const retry = deps.retry ?? { baseMs: 1_000, maxMs: 5 * 60_000 };
  const leaseMs = deps.leaseMs ?? 5 * 60_000;
  return {
    name: "replays-blob-deletions",
    // A delete's NOTIFY starts a round at once; the poll catches retries that fall due.
    intervalMs: deps.intervalMs ?? 5_000,
    wakeOn: { db: deps.db, channel: archive.blobDeletionChannel },
    async round() {
      await archive.updateArchiveUploadsAbandoned(deps.db);
      const claimed = await archive.updateBlobDeletionsClaimed(deps.db, batchSize, leaseMs);
      for (const row of claimed) {
        try {
          await deps.blobs.delete(row.archive_key);
        } catch (err) {
          const delayMs = retryDelayMs(row.attempts, retry);
          log.warn({ err, archiveKey: row.archive_key, attempts: row.attempts + 1, delayMs }, "archive removal failed");
          await archive.updateBlobDeletionRetry(deps.db, row.archive_key, delayMs);
          continue;
        }
        await archive.deleteBlobDeletion(deps.db, row.archive_key);
      }
      return claimed.length === batchSize;
    },
  };
}
