import { readFile } from "node:fs/promises";
import { WebhookOpsService, WebhookSecretsService, WebhooksService } from "../../gen/replay/webhooks/v1/webhooks_pb.js";
import type { Config } from "../../lib/config.js";
import { resealWorker } from "../../lib/db/reseal-secrets.js";
import { loadPageTokenKey } from "../../lib/keys/key-file.js";
import { logger } from "../../lib/log.js";
import { createPageTokens } from "../../lib/page/token.js";
import { sourceFolder } from "../../lib/paths.js";
import type { Platform } from "../../lib/platform.js";
import { loadSecretBox } from "../../lib/secrets/load.js";
import { type Running, type ServiceSpec, startService } from "../../lib/service-host.js";
import { createDeliveryClient } from "./delivery/client.js";
import { parseAllowTargets, resolverWithin, systemResolver } from "./delivery/target.js";
import { deliveryWorker } from "./delivery/worker.js";
import { webhooksConsumers } from "./events.js";
import { logRetentionWorker } from "./log-retention.js";
import { createWebhookOpsService, createWebhookSecretsService } from "./ops-service.js";
import { SUBSCRIPTION_SECRETS } from "./subscription-store.js";
import { createWebhooksService } from "./webhooks-service.js";

const log = logger("webhooks:secrets");

/** How long a subscription request waits for its URL's host to resolve before accepting it unresolved. */
const SUBSCRIPTION_LOOKUP_MS = 2_000;

/** decisions.md §6. With WEBHOOK_DELIVERY=off it refuses new subscriptions and sends nothing; retention still runs. */
export const webhooksService: ServiceSpec = {
  name: "webhooks",
  migrationsDir: sourceFolder(import.meta.url, "./migrations"),
  async setup({ config, db }) {
    const settings = config.webhooks;
    const key = await loadPageTokenKey({
      key: config.pages.tokenKey,
      keyFile: config.pages.tokenKeyFile,
      dataDir: config.db.dataDir,
    });
    const secrets = await loadSecretBox(config);
    const allowTargets = parseAllowTargets(settings.allowTargets);
    const extraCaPem = settings.caFile === undefined ? undefined : await readFile(settings.caFile, "utf8");
    const worker = settings.delivery
      ? deliveryWorker({
          db,
          secrets,
          client: createDeliveryClient({ timeoutMs: settings.timeoutMs, allowTargets, extraCaPem }),
          retryScheduleMs: settings.retryScheduleMs,
          timeoutMs: settings.timeoutMs,
          disableAfterMs: settings.disableAfterMs,
        })
      : undefined;
    const onQueued = () => worker?.wake();
    const webhooks = createWebhooksService({
      db,
      pageTokens: createPageTokens(key),
      secrets,
      delivery: settings.delivery,
      urls: { resolve: resolverWithin(systemResolver, SUBSCRIPTION_LOOKUP_MS), allowTargets },
      logRetentionMs: settings.logRetentionMs,
      onQueued,
    });
    return {
      routes(router) {
        router.service(WebhooksService, webhooks);
        router.service(WebhookOpsService, createWebhookOpsService(db));
        router.service(WebhookSecretsService, createWebhookSecretsService(db, secrets));
      },
      consumers: webhooksConsumers({ db, retryScheduleMs: settings.retryScheduleMs, worker, onQueued }),
      workers: [
        ...(worker ? [worker] : []),
        logRetentionWorker({ db, retentionMs: settings.logRetentionMs }),
        resealWorker(db, SUBSCRIPTION_SECRETS, secrets, log),
      ],
    };
  },
};

export function start(config: Config, platform: Platform): Promise<Running> {
  return startService(webhooksService, config, platform);
}
