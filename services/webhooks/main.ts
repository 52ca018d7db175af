import { readFile } from "node:fs/promises";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { WebhookOpsService, WebhookSecretsService, WebhooksService } from "../../gen/replay/webhooks/v1/webhooks_pb.js";
import type { Config } from "../../lib/config.js";
import { resealAll, resealWorker } from "../../lib/db/reseal-secrets.js";
import { DomainError } from "../../lib/errors.js";
import { loadPageTokenKey } from "../../lib/keys/key-file.js";
import { logger } from "../../lib/log.js";
import { createPageTokens } from "../../lib/page/token.js";
import { sourceFolder } from "../../lib/paths.js";
import type { Platform } from "../../lib/platform.js";
import { loadSecretBox } from "../../lib/secrets/load.js";
import { type Running, type ServiceSpec, startService } from "../../lib/service-host.js";
import { createDeliveryClient } from "./delivery/client.js";
import { subscriptionBacklog } from "./delivery/queue-store.js";
import { parseAllowTargets, resolverWithin, systemResolver } from "./delivery/target.js";
import { deliveryWorker } from "./delivery/worker.js";
import { webhooksConsumers } from "./events.js";
import { logRetentionWorker } from "./log-retention.js";
import { SUBSCRIPTION_SECRETS } from "./subscription-store.js";
import { createWebhooksService } from "./webhooks-service.js";

const log = logger("webhooks:secrets");

/** Subscriptions WebhookOpsService.Backlog lists by default, and at most. */
const BACKLOG_DEFAULT = 20;
const BACKLOG_MAX = 1_000;

/** How long a subscription request waits for its URL's host to resolve before accepting it unresolved. */
const SUBSCRIPTION_LOOKUP_MS = 2_000;

/**
 * The webhooks service: subscriptions, the fan-out of the replays service's eight webhook events
 * into deliveries, the delivery worker and the delivery log's retention (decisions.md §6). With
 * WEBHOOK_DELIVERY=off it refuses new subscriptions and sends nothing; the log's retention runs
 * either way.
 */
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
        router.service(WebhookOpsService, {
          async backlog(req) {
            const limit = req.limit ?? BACKLOG_DEFAULT;
            if (!Number.isInteger(limit) || limit < 1 || limit > BACKLOG_MAX) {
              throw new DomainError("INVALID_ARGUMENT", `limit must be 1 to ${BACKLOG_MAX}`);
            }
            const rows = await subscriptionBacklog(db, limit);
            return {
              subscriptions: rows.map((row) => ({
                subscriptionId: row.subscription_id,
                tenantId: row.tenant_id,
                pending: BigInt(row.pending),
                due: BigInt(row.due),
                oldestDueAt: row.oldest_due_at ? timestampFromDate(row.oldest_due_at) : undefined,
                failingSince: row.failing_since ? timestampFromDate(row.failing_since) : undefined,
                disabled: row.disabled,
                rateLimitPerSecond: row.rate_limit_per_second ?? undefined,
              })),
            };
          },
        });
        router.service(WebhookSecretsService, {
          async resealSecrets() {
            const count = await resealAll(db, SUBSCRIPTION_SECRETS, secrets);
            return { resealed: BigInt(count.resealed), unreadable: BigInt(count.unreadable) };
          },
        });
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
