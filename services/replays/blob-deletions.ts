import type { BlobStore } from "../../lib/blob/blob.js";
import type { Db } from "../../lib/db/types.js";
import { logger } from "../../lib/log.js";
import type { WorkerSpec } from "../../lib/worker/worker.js";
import * as archive from "./archive-store.js";

const log = logger("replays:blob-deletions");

export type BlobDeletionsDeps = {
  db: Db;
  blobs: BlobStore;
  /** Rows per round; a full batch starts the next round at once. */
  batchSize?: number;
  /** The poll between rounds when nothing nudges the worker. */
  intervalMs?: number;
  /** How long a claimed key is left to this replica before another may take it. */
  leaseMs?: number;
  /** The wait before a failed key is tried again, doubling per attempt from `baseMs` up to `maxMs`. */
  retry?: { baseMs: number; maxMs: number };
};

/** The wait before attempt `attempts + 1` of a key whose removal failed `attempts` times. */
export function retryDelayMs(attempts: number, retry: { baseMs: number; maxMs: number }): number {
  return Math.min(retry.baseMs * 2 ** Math.min(attempts, 30), retry.maxMs);
}

/**
 * Drains replays.blob_deletion (a crash between the metadata delete and the blob delete
 * leaves no orphan for ever), after queueing the keys of archive uploads a crash abandoned. Each round claims due keys for a lease (one statement, SKIP LOCKED, so
 * replicas never take the same key at once), removes each archive from the blob store outside any
 * transaction (a slow store never holds a database connection, which the embedded mode's single one
 * could not spare), and deletes the queue row only once the store confirmed; a failure leaves the
 * row queued with a growing delay. Removing a missing object is fine, so a key removed twice (a
 * crash after the store confirmed, or a removal slower than its lease) does no harm.
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
      // Uploads a crash left unfinished queue their keys first, so this round removes them too.
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
