import { Code, ConnectError } from "@connectrpc/connect";
import type { UploadArchiveRequest } from "../../gen/replay/replays/v1/recording_pb.js";
import { DomainError } from "../../lib/errors.js";

// The rules of an archive upload (RecordingService.UploadArchive): where the bytes go, how many
// there may be, how long they may take, and what each message of the stream may carry.

/** The largest archive an upload may store: 1 GiB (a long HD session's archive is a few hundred MiB). */
export const ARCHIVE_MAX_BYTES = 1024 ** 3;

/**
 * How long the end of an upload's stream waits for a reset sent with it (archiveChunks): the two
 * frames leave a Node client in one go and arrive a few milliseconds apart (more on a busy machine,
 * or with the gateway's hop between; docs/performance.md). Once per upload, so cheap. A
 * recorder that declares size_bytes needs none of it.
 */
export const END_GRACE_MS = 50;

/** The longest an upload may last, from its first message to its last byte. */
export const UPLOAD_MAX_MS = 30 * 60_000;

/**
 * When an upload's row (replays.archive_upload) counts as abandoned by a crash: twice the longest
 * upload, so that no upload still writing its blob has its key queued for removal under it.
 */
export const UPLOAD_ABANDON_MS = 2 * UPLOAD_MAX_MS;

/**
 * The blob key of one upload of a replay's archive. Each upload writes a key of its own, so a
 * failed or abandoned one can be removed without touching any other.
 */
export function archiveKeyOf(tenantId: string, replayId: string, uploadId: string): string {
  return `tenant/${tenantId}/replay/${replayId}/${uploadId}.rpl`;
}

/** The next message of the stream, or DEADLINE_EXCEEDED once `deadlineAt` (epoch ms) has passed. */
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
 * The archive's bytes: the first message's chunk, then every later message's, in order. Refuses a
 * later message that sets a header field (INVALID_ARGUMENT), an archive past ARCHIVE_MAX_BYTES
 * (PAYLOAD_TOO_LARGE, before the chunk that passes it is stored) and an upload past `deadlineAt`.
 * A stream that ends because the caller went away (`cancelled`: the call's signal, aborted when the
 * client reset the stream or dropped the connection) is no archive (Canceled): a gRPC client's
 * cancel half-closes the stream and resets it at once (grpc-js and Node's http2 both send END_STREAM
 * before RST_STREAM, so does the gateway's forwarder when its caller went away), so the end waits
 * END_GRACE_MS for a reset that came with it.
 * The finish checks the signal again before it commits (recording-service.ts). An archive whose first
 * message declared its size (size_bytes) must end at exactly that size (INVALID_ARGUMENT): the one
 * way to tell a cancelled stream from a whole one whatever the reset's timing.
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

/** Refuses to go on with an upload whose caller went away (archiveChunks): its end was no end. */
export function throwIfCancelled(cancelled: AbortSignal): void {
  if (cancelled.aborted) throw new ConnectError("the upload was cancelled before its end", Code.Canceled);
}

/**
 * The archive size the first message declared (size_bytes), checked before any byte is read or
 * stored: not negative, and within ARCHIVE_MAX_BYTES; undefined when it declared none.
 */
export function declaredSizeOf(header: UploadArchiveRequest): number | undefined {
  const declared = header.sizeBytes;
  if (declared === undefined) return undefined;
  if (declared < 0n) throw new DomainError("INVALID_ARGUMENT", "size_bytes may not be negative");
  if (declared > BigInt(ARCHIVE_MAX_BYTES)) {
    throw new DomainError("PAYLOAD_TOO_LARGE", `an archive may hold at most ${ARCHIVE_MAX_BYTES} bytes`);
  }
  return Number(declared);
}
