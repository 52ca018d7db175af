import { type FileHandle, open } from "node:fs/promises";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { UploadArchiveRequestSchema } from "../../gen/replay/replays/v1/recording_pb.js";
import { Quality } from "../../gen/replay/replays/v1/replays_pb.js";
import { type Command, command } from "../command.js";
import { choice, int32, int64, replayFlag, required, text, time } from "../flags.js";
import { usageError } from "../output.js";

/** The archive file, open; one that cannot be read is the operator's mistake (exit 2). */
async function openArchive(path: string): Promise<FileHandle> {
  try {
    return await open(path, "r");
  } catch (err) {
    throw usageError(`--archive ${path} cannot be read (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
  }
}

/** UploadArchive's stream: the header, then the file in chunks of 1 MiB (the advised size). */
async function* archiveMessages(
  file: FileHandle,
  header: MessageInitShape<typeof UploadArchiveRequestSchema>,
): AsyncGenerator<MessageInitShape<typeof UploadArchiveRequestSchema>> {
  try {
    yield header;
    for await (const chunk of file.createReadStream({ highWaterMark: 1024 * 1024, autoClose: false })) {
      yield { chunk: chunk as Buffer };
    }
  } finally {
    await file.close();
  }
}

/** replayctl recording … (spec/operations.md §replayctl). */
export const recordingCommands: readonly Command[] = [
  command({
    noun: "recording",
    verb: "start",
    flags: {
      server: required(text("S")),
      integration: text("I"),
      quality: choice({ standard: Quality.STANDARD, hd: Quality.HD }),
      "started-at": time(),
    },
    run: async (c, v) => {
      const res = await c.recording.startRecording({
        serverId: v.server,
        integration: v.integration ?? "",
        quality: v.quality ?? Quality.UNSPECIFIED,
        startedAt: v["started-at"] && timestampFromDate(v["started-at"]),
      });
      return { replayId: res.replayId };
    },
  }),
  command({
    noun: "recording",
    verb: "finish",
    flags: {
      ...replayFlag,
      "ended-at": time(),
      "size-bytes": int64(0n),
      "format-version": int32(1),
      archive: text("FILE"),
    },
    run: async (c, v) => {
      if (v.archive !== undefined) {
        // The archive's size is what is stored: a size of the operator's would contradict it.
        if (v["size-bytes"] !== undefined) throw usageError("--size-bytes and --archive exclude each other");
        const file = await openArchive(v.archive);
        const res = await c.recording.uploadArchive(
          archiveMessages(file, {
            replayId: v.replay,
            endedAt: v["ended-at"] && timestampFromDate(v["ended-at"]),
            formatVersion: v["format-version"],
            // Declared, so that an upload cut off midway can never finish the replay.
            sizeBytes: BigInt((await file.stat()).size),
          }),
        );
        return { replayId: res.replayId };
      }
      const res = await c.recording.finishRecording({
        replayId: v.replay,
        endedAt: v["ended-at"] && timestampFromDate(v["ended-at"]),
        sizeBytes: v["size-bytes"],
        formatVersion: v["format-version"],
      });
      return { replayId: res.replayId };
    },
  }),
];
