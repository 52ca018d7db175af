import { RecorderService } from "../../gen/replay/servers/v1/recorder_pb.js";
import { ServersService } from "../../gen/replay/servers/v1/servers_pb.js";
import { sourceFolder } from "../../lib/paths.js";
import type { Platform } from "../../lib/platform.js";
import { type Running, startService } from "../../lib/service-host.js";
import { startServersConsumers } from "./events.js";
import { createServersService } from "./service.js";
import { createServersStore } from "./store.js";

/** The servers service: management RPCs, recorder check-in, categories and plan slots. */
export function start(platform: Platform, listen: { port: number; host: string }): Promise<Running> {
  let store: ReturnType<typeof createServersStore> | undefined;
  const storeOf = (db: Parameters<typeof createServersStore>[0]) => (store ??= createServersStore(db));
  return startService(
    {
      name: "servers",
      migrationsDir: sourceFolder(import.meta.url, "./migrations"),
      healthNames: [ServersService.typeName, RecorderService.typeName],
      routes(router, db) {
        router.service(ServersService, createServersService({ store: storeOf(db), now: () => new Date() }));
        router.service(RecorderService, {});
      },
      consumers: (db, bus) => startServersConsumers(storeOf(db), bus),
    },
    platform,
    listen,
  );
}
