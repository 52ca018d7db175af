import { Code, ConnectError } from "@connectrpc/connect";
import type { UploadArchiveRequest } from "../../gen/replay/replays/v1/recording_pb.js";
import { DomainError } from "../../lib/errors.js";

// The rules of an archive upload (RecordingService.UploadArchive).

/** A long HD session's archive is a few hundred MiB. */
export const ARCHIVE_MAX_BYTES = 1024 ** 3;

/** How long a stream's end waits for a reset sent with it (archiveChunks); once per upload, so cheap. */
export const END_GRACE_MS = 50;

export const UPLOAD_MAX_MS = 30 * 60_000;

/** Twice the longest upload, so no upload still writing its blob has its key queued for removal under it. */
export const UPLOAD_ABANDON_MS = 2 * UPLOAD_MAX_MS;

/** A key per upload, so a failed or abandoned one can be removed without touching any other. */
export function archiveKeyOf(tenantId: string, replayId: string, uploadId: string): string {
  return `tenant/${tenantId}/replay/${replayId}/${uploadId}.rpl`;
}

async function nextBefore<T>(messages: AsyncIterator<T>, deadlineAt: number): Promise<IteratorResult<T>> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new ConnectError(`an upload may last ${UPLOAD_MAX_MS / 60_000} minutes`, Code.DeadlineExceeded)),
      Math.max(0, deadlineAt - Date.now()),
    );
  });
  try {
    return await Promise.race([messages.next(), late]);
  } finally {
    clearTimeout(timer);
  }
}

/** The first message of an upload, which names the replay; an empty stream names none. */
export async function readArchiveHeader(
  messages: AsyncIterator<UploadArchiveRequest>,
  deadlineAt: number,
): Promise<UploadArchiveRequest | undefined> {
  const first = await nextBefore(messages, deadlineAt);
  return first.done ? undefined : first.value;
}

/**
 * A client's cancel sends END_STREAM then RST_STREAM, so the end waits END_GRACE_MS for a reset; only a
 * declared size_bytes tells a cancelled stream from a whole one for sure.
 */
export async function* archiveChunks(
  header: UploadArchiveRequest,
  rest: AsyncIterator<UploadArchiveRequest>,
  deadlineAt: number,
  cancelled: AbortSignal,
): AsyncGenerator<Uint8Array> {
  const declared = declaredSizeOf(header);
  let sizeBytes = 0;
  const counted = (chunk: Uint8Array) => {
    sizeBytes += chunk.length;
    if (sizeBytes > ARCHIVE_MAX_BYTES) {
      throw new DomainError("PAYLOAD_TOO_LARGE", `an archive may hold at most ${ARCHIVE_MAX_BYTES} bytes`);
    }
    if (declared !== undefined && sizeBytes > declared) {
      throw new DomainError("INVALID_ARGUMENT", `the archive passes the ${declared} bytes its size_bytes declared`);
    }
    return chunk;
  };
  if (header.chunk.length > 0) yield counted(header.chunk);
  for (;;) {
    const next = await nextBefore(rest, deadlineAt);
    if (next.done) {
      await new Promise((resolve) => setTimeout(resolve, END_GRACE_MS));
      throwIfCancelled(cancelled);
      if (declared !== undefined && sizeBytes !== declared) {
        throw new DomainError(
          "INVALID_ARGUMENT",
          `the archive ended after ${sizeBytes} of the ${declared} bytes its size_bytes declared`,
        );
      }
      return;
    }
    const message = next.value;
    if (
      message.replayId !== "" ||
      message.endedAt !== undefined ||
      message.formatVersion !== undefined ||
      message.sizeBytes !== undefined
    ) {
      throw new DomainError(
        "INVALID_ARGUMENT",
        "replay_id, ended_at, format_version and size_bytes belong in the first message only",
      );
    }
    if (message.chunk.length > 0) yield counted(message.chunk);
  }
}

/** An upload whose caller went away: its end was no end. */
export function throwIfCancelled(cancelled: AbortSignal): void {
  if (cancelled.aborted) throw new ConnectError("the upload was cancelled before its end", Code.Canceled);
}

/** Checked before any byte is read or stored. */
export function declaredSizeOf(header: UploadArchiveRequest): number | undefined {
  const declared = header.sizeBytes;
  if (declared === undefined) return undefined;
  if (declared < 0n) throw new DomainError("INVALID_ARGUMENT", "size_bytes may not be negative");
  if (declared > BigInt(ARCHIVE_MAX_BYTES)) {
    throw new DomainError("PAYLOAD_TOO_LARGE", `an archive may hold at most ${ARCHIVE_MAX_BYTES} bytes`);
  }
  return Number(declared);
}
