import { MarkersService } from "../../gen/replay/markers/v1/markers_pb.js";
import type { Config } from "../../lib/config.js";
import type { Platform } from "../../lib/platform.js";
import { type Running, startService } from "../../lib/service-host.js";

/** The markers service: timeline markers. Its RPCs land with the markers issue (Unimplemented until then). */
export function start(config: Config, platform: Platform): Promise<Running> {
  return startService(
    {
      name: "markers",
      healthNames: [MarkersService.typeName],
      setup: () => ({
        routes(router) {
          router.service(MarkersService, {});
        },
      }),
    },
    config,
    platform,
  );
}
