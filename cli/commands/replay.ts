import { type Command, command } from "../command.js";
import { replayFlag } from "../flags.js";

/** replayctl replay … (spec/operations.md §replayctl). */
export const replayCommands: readonly Command[] = [
  command({
    noun: "replay",
    verb: "expire",
    flags: replayFlag,
    run: async (c, v) => ({ replayId: (await c.recording.expireReplay({ replayId: v.replay })).replayId }),
  }),
];
