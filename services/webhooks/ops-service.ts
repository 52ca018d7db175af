import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import type { WebhookOpsService, WebhookSecretsService } from "../../gen/replay/webhooks/v1/webhooks_pb.js";
import { resealAll } from "../../lib/db/reseal-secrets.js";
import type { Db } from "../../lib/db/types.js";
import { DomainError } from "../../lib/errors.js";
import type { SecretBox } from "../../lib/secrets/box.js";
import { subscriptionBacklog } from "./delivery/queue-store.js";
import { SUBSCRIPTION_SECRETS } from "./subscription-store.js";

/** Subscriptions Backlog lists by default, and at most. */
const BACKLOG_DEFAULT = 20;
const BACKLOG_MAX = 1_000;

export function createWebhookOpsService(db: Db): ServiceImpl<typeof WebhookOpsService> {
  return {
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
  };
}

export function createWebhookSecretsService(db: Db, secrets: SecretBox): ServiceImpl<typeof WebhookSecretsService> {
  return {
    async resealSecrets() {
      const count = await resealAll(db, SUBSCRIPTION_SECRETS, secrets);
      return { resealed: BigInt(count.resealed), unreadable: BigInt(count.unreadable) };
    },
  };
}
