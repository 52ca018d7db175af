import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { type Command, command } from "../command.js";
import { required, text, time } from "../flags.js";
import { isoOrNull, statusName } from "../respond.js";

/** replayctl recorder … (spec/operations.md §replayctl). */
export const recorderCommands: readonly Command[] = [
  command({
    noun: "recorder",
    verb: "checkin",
    flags: { server: required(text("S")), "plugin-version": text("V"), at: time() },
    run: async (c, v) => {
      const res = await c.recorder.checkIn({
        serverId: v.server,
        pluginVersion: v["plugin-version"] ?? "",
        at: v.at && timestampFromDate(v.at),
      });
      return { serverId: res.serverId, status: statusName(res.status), lastSeenAt: isoOrNull(res.lastSeenAt) };
    },
  }),
];
