import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Quality } from "../../gen/replay/replays/v1/replays_pb.js";
import { type Command, command } from "../command.js";
import { choice, int32, int64, replayFlag, required, text, time } from "../flags.js";

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
    flags: { ...replayFlag, "ended-at": time(), "size-bytes": int64(0n), "format-version": int32(1) },
    run: async (c, v) => {
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
