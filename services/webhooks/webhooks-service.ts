import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import {
  AttemptTrigger,
  type Delivery,
  DeliveryStatus,
  type Subscription,
  type WebhooksService,
} from "../../gen/replay/webhooks/v1/webhooks_pb.js";
import { retryingSerializationFailure } from "../../lib/db/errors.js";
import type { Db } from "../../lib/db/types.js";
import { DomainError, type FieldViolation } from "../../lib/errors.js";
import { isUuid, newId } from "../../lib/ids.js";
import { pageSizeOf } from "../../lib/page/size.js";
import { isPositionTimestamp, type PageTokens } from "../../lib/page/token.js";
import { requireTenant } from "../../lib/rpc/context.js";
import type { SecretBox } from "../../lib/secrets/box.js";
import { webhookSubscriptionsDisabled } from "./delivery/metrics.js";
import { generateWebhookSecret } from "./delivery/secret.js";
import type { AllowTargets, Resolver } from "./delivery/target.js";
import { vetWebhookUrl } from "./delivery/webhook-url.js";
import { webhookEvents } from "./payload.js";
import * as store from "./store.js";
import { eventsViolation, graceSecondsOf, recoverWindow, subscriptionChange } from "./subscription-rules.js";
import * as subscriptions from "./subscription-store.js";

export type WebhooksDeps = {
  db: Db;
  pageTokens: PageTokens;
  /** WEBHOOK_DELIVERY: off refuses new subscriptions (503) and stores nothing. */
  delivery: boolean;
  /** decisions.md §6. */
  urls: { resolve: Resolver; allowTargets: AllowTargets };
  secrets: Pick<SecretBox, "seal">;
  /** WEBHOOK_LOG_RETENTION: a recover cannot reach further back than the log keeps. */
  logRetentionMs: number;
  onQueued: () => void;
};

const statuses = {
  pending: DeliveryStatus.PENDING,
  succeeded: DeliveryStatus.SUCCEEDED,
  failed: DeliveryStatus.FAILED,
} as const;
const triggers = { automatic: AttemptTrigger.AUTOMATIC, manual: AttemptTrigger.MANUAL } as const;

function toSubscription(row: store.SubscriptionRow): Omit<Subscription, "$typeName"> {
  return {
    subscriptionId: row.subscription_id,
    url: row.url,
    events: row.events,
    createdAt: timestampFromDate(row.created_at),
    disabled: row.disabled,
    disabledReason: row.disabled_reason ?? undefined,
    disabledAt: row.disabled_at ? timestampFromDate(row.disabled_at) : undefined,
    rateLimitPerSecond: row.rate_limit_per_second ?? undefined,
    previousSecretExpiresAt: row.previous_secret_expires_at
      ? timestampFromDate(row.previous_secret_expires_at)
      : undefined,
  };
}

function toDelivery(row: store.DeliveryRow, attempts: readonly store.AttemptRow[]): Omit<Delivery, "$typeName"> {
  return {
    deliveryId: row.delivery_id,
    subscriptionId: row.subscription_id,
    eventId: row.event_id,
    event: row.event,
    status: statuses[row.status],
    retryCount: row.retry_count,
    attempts: attempts.map((a) => ({
      $typeName: "replay.webhooks.v1.DeliveryAttempt",
      attempt: a.attempt,
      trigger: triggers[a.trigger],
      startedAt: timestampFromDate(a.started_at),
      durationMs: BigInt(a.duration_ms),
      statusCode: a.status_code ?? undefined,
      error: a.error ?? undefined,
    })),
    lastStatusCode: row.last_status_code ?? undefined,
    lastError: row.last_error ?? undefined,
    nextAttemptAt: row.next_attempt_at ? timestampFromDate(row.next_attempt_at) : undefined,
    createdAt: timestampFromDate(row.created_at),
    updatedAt: timestampFromDate(row.updated_at),
  };
}

/** Attempts newest first, in one more statement. */
async function withAttempts(db: Db, rows: readonly store.DeliveryRow[]) {
  const byDelivery = new Map<string, store.AttemptRow[]>();
  for (const attempt of await store.listAttempts(
    db,
    rows.map((row) => row.delivery_id),
  )) {
    const list = byDelivery.get(attempt.delivery_id);
    if (list) list.push(attempt);
    else byDelivery.set(attempt.delivery_id, [attempt]);
  }
  return rows.map((row) => toDelivery(row, byDelivery.get(row.delivery_id) ?? []));
}

function isPosition(value: unknown): value is store.DeliveryPosition {
  const p = value as store.DeliveryPosition | null;
  return typeof p === "object" && p !== null && isPositionTimestamp(p.createdAt) && isUuid(p.deliveryId);
}

const subscriptionNotFound = () => new DomainError("SUBSCRIPTION_NOT_FOUND", "no such subscription");
/** A malformed id is SUBSCRIPTION_NOT_FOUND too. */
async function subscriptionOf(db: Db, tenantId: string, subscriptionId: string): Promise<store.SubscriptionRow> {
  const found = isUuid(subscriptionId)
    ? await subscriptions.findSubscription(db, tenantId, subscriptionId.toLowerCase())
    : undefined;
  if (!found) throw subscriptionNotFound();
  return found;
}

const deliveryNotFound = () => new DomainError("DELIVERY_NOT_FOUND", "no such delivery");

/** spec "Webhooks", decisions.md §6. */
export function createWebhooksService(deps: WebhooksDeps): ServiceImpl<typeof WebhooksService> {
  const { db } = deps;
  return {
    async createSubscription(req, ctx) {
      const tenantId = requireTenant(ctx);
      if (!deps.delivery) {
        throw new DomainError("WEBHOOK_DELIVERY_UNCONFIGURED", "webhook delivery is not configured on this deployment");
      }
      const malformed = new Set(req.malformedFields);
      const violations: FieldViolation[] = [];
      const urlViolation = malformed.has("url")
        ? { field: "url", code: "VALIDATION_ERROR" as const, detail: "url must be a string" }
        : await vetWebhookUrl(req.url, deps.urls);
      if (urlViolation) violations.push(urlViolation);
      const events = malformed.has("events")
        ? {
            field: "events",
            code: "VALIDATION_ERROR" as const,
            detail: `events must be an array of event names; the valid names are ${webhookEvents.join(", ")}`,
          }
        : eventsViolation(req.events);
      if (events) violations.push(events);
      if (violations.length > 0) {
        throw new DomainError("VALIDATION_ERROR", violations.map((v) => v.detail).join("; "), violations);
      }
      const secret = generateWebhookSecret();
      const row = await store.insertSubscription(db, {
        subscriptionId: newId(),
        tenantId,
        url: req.url,
        events: req.events,
        secret: deps.secrets.seal(secret),
      });
      return { subscription: toSubscription(row), secret };
    },

    async listSubscriptions(_req, ctx) {
      const tenantId = requireTenant(ctx);
      return { subscriptions: (await store.listSubscriptions(db, tenantId)).map(toSubscription) };
    },

    async deleteSubscription(req, ctx) {
      const tenantId = requireTenant(ctx);
      if (!isUuid(req.subscriptionId)) throw subscriptionNotFound();
      const subscriptionId = req.subscriptionId.toLowerCase();
      const deleted = await retryingSerializationFailure(() =>
        db.transaction((tx) => store.deleteSubscription(tx, tenantId, subscriptionId)),
      );
      if (!deleted) throw subscriptionNotFound();
      return {};
    },

    async listDeliveries(req, ctx) {
      const tenantId = requireTenant(ctx);
      const pageSize = pageSizeOf(req.pageSize);
      const subscriptionId = isUuid(req.subscriptionId) ? req.subscriptionId.toLowerCase() : undefined;
      const binding = {
        tenantId,
        route: "deliveries",
        filters: { subscription_id: subscriptionId ?? req.subscriptionId },
      };
      let after: store.DeliveryPosition | undefined;
      if (req.pageToken !== "") {
        const position = deps.pageTokens.read<unknown>(binding, req.pageToken);
        if (!isPosition(position))
          throw new DomainError("INVALID_PAGE_TOKEN", "page_token was not issued for this list");
        after = position;
      }
      if (subscriptionId === undefined || !(await store.existsSubscription(db, tenantId, subscriptionId))) {
        throw subscriptionNotFound();
      }
      const rows = await store.listDeliveries(db, tenantId, subscriptionId, after, pageSize + 1, deps.logRetentionMs);
      const page = rows.slice(0, pageSize);
      const last = page.at(-1);
      const nextPageToken =
        rows.length > pageSize && last !== undefined
          ? deps.pageTokens.issue(binding, { createdAt: last.position_at, deliveryId: last.delivery_id })
          : "";
      return { results: await withAttempts(db, page), nextPageToken, pageSize };
    },

    async getDelivery(req, ctx) {
      const tenantId = requireTenant(ctx);
      if (!isUuid(req.deliveryId)) throw deliveryNotFound();
      const row = await store.findDelivery(db, tenantId, req.deliveryId.toLowerCase(), deps.logRetentionMs);
      if (!row) throw deliveryNotFound();
      const [delivery] = await withAttempts(db, [row]);
      return { delivery };
    },

    async replayDelivery(req, ctx) {
      const tenantId = requireTenant(ctx);
      if (!isUuid(req.deliveryId)) throw deliveryNotFound();
      const deliveryId = req.deliveryId.toLowerCase();
      const replayed = await retryingSerializationFailure(() =>
        store.updateDeliveryReplayed(db, tenantId, deliveryId, deps.logRetentionMs),
      );
      if (!replayed) {
        if (!(await store.findDelivery(db, tenantId, deliveryId, deps.logRetentionMs))) throw deliveryNotFound();
        throw new DomainError("DELIVERY_NOT_REPLAYABLE", "the delivery already succeeded; it cannot be replayed");
      }
      deps.onQueued();
      const [delivery] = await withAttempts(db, [replayed]);
      return { delivery };
    },

    async getSubscription(req, ctx) {
      const found = await subscriptionOf(db, requireTenant(ctx), req.subscriptionId);
      return { subscription: toSubscription(found) };
    },

    async updateSubscription(req, ctx) {
      const tenantId = requireTenant(ctx);
      const found = await subscriptionOf(db, tenantId, req.subscriptionId);
      const change = await subscriptionChange(req, deps.urls);
      const updated = await retryingSerializationFailure(() =>
        db.transaction((tx) => subscriptions.updateSubscription(tx, tenantId, found.subscription_id, change)),
      );
      if (!updated) throw subscriptionNotFound();
      if (updated.disabled) webhookSubscriptionsDisabled.inc({ reason: "manual" });
      if (updated.enabled) deps.onQueued();
      return { subscription: toSubscription(updated.row) };
    },

    async rotateSubscriptionSecret(req, ctx) {
      const tenantId = requireTenant(ctx);
      const found = await subscriptionOf(db, tenantId, req.subscriptionId);
      const graceSeconds = graceSecondsOf(req);
      const secret = generateWebhookSecret();
      const rotated = await subscriptions.rotateSecret(
        db,
        tenantId,
        found.subscription_id,
        deps.secrets.seal(secret),
        graceSeconds,
      );
      if (!rotated) throw subscriptionNotFound();
      return {
        secret,
        previousSecretExpiresAt: rotated.previous_secret_expires_at
          ? timestampFromDate(rotated.previous_secret_expires_at)
          : undefined,
      };
    },

    async recoverDeliveries(req, ctx) {
      const found = await subscriptionOf(db, requireTenant(ctx), req.subscriptionId);
      const window = recoverWindow(req, deps.logRetentionMs);
      const queued = await retryingSerializationFailure(() =>
        subscriptions.recoverDeliveries(db, found.subscription_id, window.since, window.until),
      );
      if (queued > 0) deps.onQueued();
      return { queued };
    },

    async getSubscriptionStats(req, ctx) {
      const found = await subscriptionOf(db, requireTenant(ctx), req.subscriptionId);
      const stats = await subscriptions.subscriptionStats(db, found.subscription_id);
      return {
        pending: BigInt(stats.pending),
        last24h: { succeeded: BigInt(stats.last24h.succeeded), failed: BigInt(stats.last24h.failed) },
        last7d: { succeeded: BigInt(stats.last7d.succeeded), failed: BigInt(stats.last7d.failed) },
      };
    },
  };
}
