import { TenantLookupService } from "../../gen/replay/identity/v1/lookup_pb.js";
import { ReplayLookupService } from "../../gen/replay/replays/v1/lookup_pb.js";
import { RecordingService } from "../../gen/replay/replays/v1/recording_pb.js";
import { ReplaysService } from "../../gen/replay/replays/v1/replays_pb.js";
import { ServerLookupService } from "../../gen/replay/servers/v1/lookup_pb.js";
import type { Config } from "../../lib/config.js";
import { loadPageTokenKey } from "../../lib/keys/key-file.js";
import { createPageTokens } from "../../lib/page/token.js";
import { sourceFolder } from "../../lib/paths.js";
import { planOwner } from "../../lib/plan-owner.js";
import type { Platform } from "../../lib/platform.js";
import { type Running, type ServiceSpec, startService } from "../../lib/service-host.js";
import { blobDeletionsWorker } from "./blob-deletions.js";
import { replaysConsumers } from "./events.js";
import { createReplayLookupService } from "./lookup-service.js";
import { createRecordingService } from "./recording-service.js";
import { createReplaysService } from "./replays-service.js";
import { retentionWorker } from "./retention.js";
import { serverOwner } from "./server-owner.js";

export const replaysService: ServiceSpec = {
  name: "replays",
  migrationsDir: sourceFolder(import.meta.url, "./migrations"),
  async setup({ config, db, blobs, now, peers }) {
    const key = await loadPageTokenKey({
      key: config.pages.tokenKey,
      keyFile: config.pages.tokenKeyFile,
      dataDir: config.db.dataDir,
    });
    const replays = createReplaysService({ db, pageTokens: createPageTokens(key) });
    const lookupServer = serverOwner(peers.client(ServerLookupService, "servers"));
    const lookupPlan = planOwner(peers.client(TenantLookupService, "gateway"));
    return {
      routes(router) {
        router.service(ReplaysService, replays);
        router.service(RecordingService, createRecordingService({ db, blobs, now, lookupServer, lookupPlan }));
        router.service(ReplayLookupService, createReplayLookupService({ db, lookupServer }));
      },
      consumers: replaysConsumers,
      workers: [blobDeletionsWorker({ db, blobs }), retentionWorker({ db, now })],
    };
  },
};

export function start(config: Config, platform: Platform): Promise<Running> {
  return startService(replaysService, config, platform);
}
