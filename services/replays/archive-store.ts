// The SQL of schema `replays`' archive queues: uploads in flight and archives to remove from the blob store.

import type { Queryable, Tx } from "../../lib/db/types.js";

export const blobDeletionChannel = "replays_blob_deletion";

export type BlobDeletionRow = { archive_key: string; attempts: number };

/** In the transaction that drops the archive's metadata; its NOTIFY wakes the workers on commit. */
export async function insertBlobDeletion(tx: Tx, archiveKey: string): Promise<void> {
  await tx.query(
    `INSERT INTO replays.blob_deletion (archive_key) VALUES ($1)
       ON CONFLICT (archive_key) DO UPDATE SET next_attempt_at = now()`,
    [archiveKey],
  );
  await tx.query(`NOTIFY ${blobDeletionChannel}`);
}

/** Due again only when the lease runs out: no other replica takes it meanwhile, and a dead one's are retried. */
export async function updateBlobDeletionsClaimed(
  q: Queryable,
  limit: number,
  leaseMs: number,
): Promise<BlobDeletionRow[]> {
  const { rows } = await q.query<BlobDeletionRow>(
    `UPDATE replays.blob_deletion AS b
        SET next_attempt_at = now() + $2 * interval '1 millisecond'
      WHERE b.archive_key IN (
        SELECT archive_key FROM replays.blob_deletion
         WHERE next_attempt_at <= now()
         ORDER BY next_attempt_at
         LIMIT $1
           FOR UPDATE SKIP LOCKED)
     RETURNING b.archive_key, b.attempts`,
    [limit, leaseMs],
  );
  return rows;
}

export async function deleteBlobDeletion(q: Queryable, archiveKey: string): Promise<void> {
  await q.query("DELETE FROM replays.blob_deletion WHERE archive_key = $1", [archiveKey]);
}

export async function updateBlobDeletionRetry(q: Queryable, archiveKey: string, delayMs: number): Promise<void> {
  await q.query(
    `UPDATE replays.blob_deletion
        SET attempts = attempts + 1, next_attempt_at = now() + $2 * interval '1 millisecond'
      WHERE archive_key = $1`,
    [archiveKey, delayMs],
  );
}

/** Committed before the upload's first byte is stored. */
export async function insertArchiveUpload(
  q: Queryable,
  upload: { archiveKey: string; replayId: string; abandonAfterMs: number },
): Promise<void> {
  await q.query(
    `INSERT INTO replays.archive_upload (archive_key, replay_id, abandon_at)
     VALUES ($1, $2, now() + $3 * interval '1 millisecond')`,
    [upload.archiveKey, upload.replayId, upload.abandonAfterMs],
  );
}

/** False when the upload was abandoned meanwhile (and its key queued for removal). */
export async function deleteArchiveUpload(q: Queryable, archiveKey: string): Promise<boolean> {
  const { rows } = await q.query("DELETE FROM replays.archive_upload WHERE archive_key = $1 RETURNING 1", [archiveKey]);
  return rows.length > 0;
}

/**
 * Rows past `abandon_at` (a crash mid-upload), or the one named: deleted and queued for removal in one
 * statement, so an upload's commit (which deletes the same row) and this never both win.
 */
export async function updateArchiveUploadsAbandoned(q: Queryable, archiveKey: string | null = null): Promise<number> {
  const { rows } = await q.query(
    `WITH gone AS (
       DELETE FROM replays.archive_upload
        WHERE ($1::text IS NULL AND abandon_at <= now()) OR archive_key = $1
        RETURNING archive_key)
     INSERT INTO replays.blob_deletion (archive_key) SELECT archive_key FROM gone
       ON CONFLICT (archive_key) DO UPDATE SET next_attempt_at = now()
     RETURNING archive_key`,
    [archiveKey],
  );
  if (rows.length > 0) await q.query(`NOTIFY ${blobDeletionChannel}`);
  return rows.length;
}
