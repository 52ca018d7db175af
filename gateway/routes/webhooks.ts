import type { Client } from "@connectrpc/connect";
import {
  AttemptTrigger,
  type Delivery,
  DeliveryStatus,
  type Subscription,
  type WebhooksService,
} from "../../gen/replay/webhooks/v1/webhooks_pb.js";
import { parsePageSize } from "../../lib/page/size.js";
import { hasNul } from "../../lib/text.js";
import { isoOrNull, parseQuery, queryId, stringField } from "./json.js";
import { type Route, type RouteCall, readJsonObject } from "./route.js";

const statuses: Record<DeliveryStatus, string | null> = {
  [DeliveryStatus.UNSPECIFIED]: null,
  [DeliveryStatus.PENDING]: "pending",
  [DeliveryStatus.SUCCEEDED]: "succeeded",
  [DeliveryStatus.FAILED]: "failed",
};
const triggers: Record<AttemptTrigger, string | null> = {
  [AttemptTrigger.UNSPECIFIED]: null,
  [AttemptTrigger.AUTOMATIC]: "automatic",
  [AttemptTrigger.MANUAL]: "manual",
};

/** A subscription as GET /v1/webhooks lists it (decisions.md §6): never its secret. */
export function subscriptionJson(s: Subscription | undefined) {
  return { id: s?.subscriptionId, url: s?.url, events: s?.events, createdAt: isoOrNull(s?.createdAt) };
}

/** A delivery record of the delivery log (decisions.md §6), its attempts newest first. */
export function deliveryJson(d: Delivery | undefined) {
  return {
    id: d?.deliveryId,
    subscription_id: d?.subscriptionId,
    event_id: d?.eventId,
    event: d?.event,
    status: d ? statuses[d.status] : null,
    retry_count: d?.retryCount,
    attempts: (d?.attempts ?? []).map((a) => ({
      attempt: a.attempt,
      trigger: triggers[a.trigger],
      started_at: isoOrNull(a.startedAt),
      duration_ms: Number(a.durationMs),
      status_code: a.statusCode ?? null,
      error: a.error ?? null,
    })),
    last_status_code: d?.lastStatusCode ?? null,
    last_error: d?.lastError ?? null,
    next_attempt_at: isoOrNull(d?.nextAttemptAt),
    created_at: isoOrNull(d?.createdAt),
    updated_at: isoOrNull(d?.updatedAt),
  };
}

/** `events` of a create or PATCH body: an array of strings as sent, or malformed (any other JSON type). */
export function eventsField(body: Record<string, unknown>, malformed: string[]): string[] {
  const value = body.events;
  if (Array.isArray(value) && value.every((name) => typeof name === "string" && !hasNul(name))) return value;
  malformed.push("events");
  return [];
}

function createSubscription(webhooks: Client<typeof WebhooksService>) {
  return async (call: RouteCall) => {
    const body = readJsonObject(call);
    const malformed: string[] = [];
    const url = stringField(body, "url", malformed);
    if (body.url === undefined || body.url === null) malformed.push("url");
    const events = eventsField(body, malformed);
    const res = await webhooks.createSubscription({ url, events, malformedFields: malformed }, call.rpc);
    return { status: 201, body: { ...subscriptionJson(res.subscription), secret: res.secret } };
  };
}

function listDeliveries(webhooks: Client<typeof WebhooksService>) {
  return async (call: RouteCall) => {
    const query = parseQuery(call.rawQuery);
    const res = await webhooks.listDeliveries(
      {
        subscriptionId: call.params.id ?? "",
        pageSize: parsePageSize(query.get("page_size")),
        pageToken: queryId(query.get("page_token")) ?? "",
      },
      call.rpc,
    );
    return {
      status: 200,
      body: { results: res.results.map(deliveryJson), next_page_token: res.nextPageToken, page_size: res.pageSize },
    };
  };
}

/**
 * Webhooks: spec "Webhooks", decisions.md §6. Subscriptions and the delivery log are signed
 * routes; the manual replay of a delivery takes an API key with collections:write.
 */
export function webhookRoutes(webhooks: Client<typeof WebhooksService>): Route[] {
  return [
    {
      method: "POST",
      path: "/v1/webhooks",
      auth: "signature",
      doc: {
        operationId: "createSubscription",
        tag: "Webhook subscriptions",
        summary: "Subscribe to events",
        description:
          "Each named event is then sent to the URL as a signed POST (see the webhooks of this document). The signing secret is in this response only.",
        requestBody: "SubscriptionCreate",
        success: { status: 201, description: "The subscription, with its secret.", schema: "SubscriptionCreated" },
        errors: ["VALIDATION_ERROR", "WEBHOOK_DELIVERY_UNCONFIGURED"],
      },
      handle: createSubscription(webhooks),
    },
    {
      method: "GET",
      path: "/v1/webhooks",
      auth: "signature",
      doc: {
        operationId: "listSubscriptions",
        tag: "Webhook subscriptions",
        summary: "List subscriptions",
        success: {
          status: 200,
          description: "Every subscription, oldest first; never a secret.",
          schema: "SubscriptionList",
        },
        errors: [],
      },
      async handle(call) {
        const res = await webhooks.listSubscriptions({}, call.rpc);
        return { status: 200, body: { subscriptions: res.subscriptions.map(subscriptionJson) } };
      },
    },
    {
      method: "DELETE",
      path: "/v1/webhooks/:id",
      auth: "signature",
      doc: {
        operationId: "deleteSubscription",
        tag: "Webhook subscriptions",
        summary: "Delete a subscription",
        description: "Its delivery log goes with it; no further attempt is made.",
        pathParams: { id: "The subscription's id." },
        success: { status: 204, description: "The subscription is gone." },
        errors: ["SUBSCRIPTION_NOT_FOUND"],
      },
      async handle(call) {
        await webhooks.deleteSubscription({ subscriptionId: call.params.id ?? "" }, call.rpc);
        return { status: 204 };
      },
    },
    {
      method: "GET",
      path: "/v1/webhooks/:id/deliveries",
      auth: "signature",
      doc: {
        operationId: "listDeliveries",
        tag: "Webhook subscriptions",
        summary: "List a subscription's deliveries",
        description: "The delivery log, newest first, each delivery with its attempts.",
        pathParams: { id: "The subscription's id." },
        query: [
          {
            name: "page_size",
            description: "1 to 100, default 20.",
            schema: { type: "integer", minimum: 1, maximum: 100, default: 20 },
          },
          {
            name: "page_token",
            description: "The `next_page_token` of the previous page.",
            schema: { type: "string" },
          },
        ],
        success: { status: 200, description: "One page of the delivery log.", schema: "DeliveryPage" },
        errors: ["INVALID_PAGE_SIZE", "INVALID_PAGE_TOKEN", "SUBSCRIPTION_NOT_FOUND"],
      },
      handle: listDeliveries(webhooks),
    },
    {
      method: "GET",
      path: "/v1/webhooks/deliveries/:id",
      auth: "signature",
      doc: {
        operationId: "getDelivery",
        tag: "Webhook subscriptions",
        summary: "Get a delivery",
        pathParams: { id: "The delivery's id." },
        success: { status: 200, description: "The delivery with its attempts.", schema: "Delivery" },
        errors: ["DELIVERY_NOT_FOUND"],
      },
      async handle(call) {
        const res = await webhooks.getDelivery({ deliveryId: call.params.id ?? "" }, call.rpc);
        return { status: 200, body: deliveryJson(res.delivery) };
      },
    },
    {
      method: "POST",
      path: "/v1/webhooks/deliveries/:id/replay",
      auth: "api-key",
      scope: "collections:write",
      doc: {
        operationId: "replayDelivery",
        tag: "Webhook subscriptions",
        summary: "Send a delivery again",
        description:
          "Queues one more attempt at once, with the same body and a fresh signature, and adds 1 to `retry_count`. Any delivery not yet succeeded can be replayed; there is no idempotency key: each call is one more attempt.",
        pathParams: { id: "The delivery's id." },
        success: { status: 202, description: "The delivery, its new attempt queued.", schema: "Delivery" },
        errors: ["DELIVERY_NOT_FOUND", "DELIVERY_NOT_REPLAYABLE"],
      },
      async handle(call) {
        const res = await webhooks.replayDelivery({ deliveryId: call.params.id ?? "" }, call.rpc);
        return { status: 202, body: deliveryJson(res.delivery) };
      },
    },
  ];
}
