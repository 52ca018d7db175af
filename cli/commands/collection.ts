import { type Command, command } from "../command.js";
import { replayFlag } from "../flags.js";

/** replayctl collection … (spec/operations.md §replayctl). */
export const collectionCommands: readonly Command[] = [
  command({
    noun: "collection",
    verb: "release",
    flags: replayFlag,
    run: async (c, v) => ({ replayId: (await c.recording.releaseCollection({ replayId: v.replay })).replayId }),
  }),
  command({
    noun: "collection",
    verb: "revoke",
    flags: replayFlag,
    run: async (c, v) => ({ replayId: (await c.recording.revokeCollection({ replayId: v.replay })).replayId }),
  }),
];
