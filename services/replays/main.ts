import { RecordingService } from "../../gen/replay/replays/v1/recording_pb.js";
import { ReplaysService } from "../../gen/replay/replays/v1/replays_pb.js";
import type { Config } from "../../lib/config.js";
import type { Platform } from "../../lib/platform.js";
import { type Running, startService } from "../../lib/service-host.js";
import { createReplaysService } from "./service.js";

/** The replays service: replay reads and deletes, the recording lifecycle and operator actions. */
export function start(config: Config, platform: Platform): Promise<Running> {
  return startService(
    {
      name: "replays",
      healthNames: [ReplaysService.typeName, RecordingService.typeName],
      setup: () => ({
        routes(router) {
          router.service(ReplaysService, createReplaysService());
          router.service(RecordingService, {});
        },
      }),
    },
    config,
    platform,
  );
}
