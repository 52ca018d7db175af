import { AssetState } from "../../gen/replay/replays/v1/recording_pb.js";
import { type Command, command } from "../command.js";
import { choice, replayFlag, required } from "../flags.js";

/** replayctl asset … (spec/operations.md §replayctl). */
export const assetCommands: readonly Command[] = [
  command({
    noun: "asset",
    verb: "set",
    flags: {
      ...replayFlag,
      state: required(
        choice({ processing: AssetState.PROCESSING, ready: AssetState.READY, failed: AssetState.FAILED }),
      ),
    },
    run: async (c, v) => {
      const res = await c.recording.setAssetState({ replayId: v.replay, state: v.state });
      return { replayId: res.replayId };
    },
  }),
];
