import { MarkersService } from "../../gen/replay/markers/v1/markers_pb.js";
import type { Config } from "../../lib/config.js";
import type { Platform } from "../../lib/platform.js";
import { type Running, type ServiceSpec, startService } from "../../lib/service-host.js";

/** The markers service: timeline markers. Its RPCs land with the markers issue (Unimplemented until then). */
export const markersService: ServiceSpec = {
  name: "markers",
  healthNames: [MarkersService.typeName],
  setup: () => ({
    routes(router) {
      router.service(MarkersService, {});
    },
  }),
};

export function start(config: Config, platform: Platform): Promise<Running> {
  return startService(markersService, config, platform);
}
