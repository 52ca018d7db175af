-- Archive uploads in flight (UploadArchive). A row is committed before the first byte
-- reaches the blob store and deleted in the transaction that records the archive on its replay;
-- an upload that fails removes its row and queues the key in replays.blob_deletion, and a row left
-- behind by a crash is moved there by the blob deletions worker once `abandon_at` passes (well
-- after the longest an upload may last), so no uploaded archive is ever orphaned.
CREATE TABLE replays.archive_upload (
  archive_key text PRIMARY KEY,
  replay_id uuid NOT NULL,
  started_at timestamptz NOT NULL DEFAULT now(),
  abandon_at timestamptz NOT NULL
);
CREATE INDEX archive_upload_abandon_idx ON replays.archive_upload (abandon_at);
