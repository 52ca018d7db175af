import { MarkersService } from "../../gen/replay/markers/v1/markers_pb.js";
import { ReplayLookupService } from "../../gen/replay/replays/v1/lookup_pb.js";
import type { Config } from "../../lib/config.js";
import { sourceFolder } from "../../lib/paths.js";
import type { Platform } from "../../lib/platform.js";
import { type Running, type ServiceSpec, startService } from "../../lib/service-host.js";
import { markersConsumers } from "./events.js";
import { idempotencySweepWorker } from "./idempotency-sweep.js";
import { createMarkersService } from "./markers-service.js";
import { replayOwner } from "./replay-owner.js";

export const markersService: ServiceSpec = {
  name: "markers",
  migrationsDir: sourceFolder(import.meta.url, "./migrations"),
  setup({ db, now, peers }) {
    const resolveTarget = replayOwner(peers.client(ReplayLookupService, "replays"));
    return {
      routes(router) {
        router.service(MarkersService, createMarkersService({ db, now, resolveTarget }));
      },
      consumers: markersConsumers,
      workers: [idempotencySweepWorker({ db, now })],
    };
  },
};

export function start(config: Config, platform: Platform): Promise<Running> {
  return startService(markersService, config, platform);
}
