import { TenantLookupService } from "../../gen/replay/identity/v1/lookup_pb.js";
import { ServerLookupService } from "../../gen/replay/servers/v1/lookup_pb.js";
import { RecorderService } from "../../gen/replay/servers/v1/recorder_pb.js";
import { ServersService } from "../../gen/replay/servers/v1/servers_pb.js";
import type { Config } from "../../lib/config.js";
import { sourceFolder } from "../../lib/paths.js";
import { planOwner } from "../../lib/plan-owner.js";
import type { Platform } from "../../lib/platform.js";
import { type Running, type ServiceSpec, startService } from "../../lib/service-host.js";
import { serversConsumers } from "./events.js";
import { createServerLookupService } from "./lookup-service.js";
import { createRecorderService } from "./recorder-service.js";
import { createServersService } from "./servers-service.js";

export const serversService: ServiceSpec = {
  name: "servers",
  migrationsDir: sourceFolder(import.meta.url, "./migrations"),
  setup({ db, now, peers }) {
    const deps = { db, now, lookupPlan: planOwner(peers.client(TenantLookupService, "gateway")) };
    return {
      routes(router) {
        router.service(ServersService, createServersService(deps));
        router.service(RecorderService, createRecorderService(deps));
        router.service(ServerLookupService, createServerLookupService(deps));
      },
      consumers: serversConsumers,
    };
  },
};

export function start(config: Config, platform: Platform): Promise<Running> {
  return startService(serversService, config, platform);
}
