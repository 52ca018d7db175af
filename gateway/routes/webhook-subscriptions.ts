import type { Client } from "@connectrpc/connect";
import type { Subscription, WebhooksService } from "../../gen/replay/webhooks/v1/webhooks_pb.js";
import { hasNul } from "../../lib/text.js";
import { isoOrNull, stringField, timeField } from "./json.js";
import { type Route, type RouteCall, readJsonObject } from "./route.js";
import { eventsField, subscriptionJson } from "./webhooks.js";

// Managing a subscription (decisions.md §6.1): get, PATCH, rotate its secret, recover its failed
// deliveries, its stats. Signed like the other /v1/webhooks routes.

/** A subscription as GET and PATCH return it: the list's fields and the management ones. */
function subscriptionRecordJson(s: Subscription | undefined) {
  return {
    ...subscriptionJson(s),
    disabled: s?.disabled ?? false,
    disabledReason: s?.disabledReason ?? null,
    disabledAt: isoOrNull(s?.disabledAt),
    rateLimitPerSecond: s?.rateLimitPerSecond ?? null,
    previousSecretExpiresAt: isoOrNull(s?.previousSecretExpiresAt),
  };
}

const INT32_MAX = 2 ** 31 - 1;

/** An integer JSON field for an int32 of the RPC: out of int32's range becomes -1 (the service's range refuses it). */
function int32Of(value: number): number {
  return Math.abs(value) > INT32_MAX ? -1 : value;
}

/** A PATCH body as the RPC takes it: the fields it sets, their values, the malformed and the unknown. */
function updateRequest(call: RouteCall) {
  const body = readJsonObject(call);
  const fields: string[] = [];
  const malformed: string[] = [];
  const unknown: string[] = [];
  let url = "";
  let events: string[] = [];
  let disabled = false;
  let rateLimitPerSecond: number | undefined;
  for (const [name, value] of Object.entries(body)) {
    if (name === "url") {
      url = stringField(body, "url", malformed);
      if (value === null) malformed.push("url");
    } else if (name === "events") events = eventsField(body, malformed);
    else if (name === "disabled") {
      if (typeof value === "boolean") disabled = value;
      else malformed.push("disabled");
    } else if (name === "rateLimitPerSecond") {
      if (typeof value === "number" && Number.isInteger(value)) rateLimitPerSecond = int32Of(value);
      else if (value !== null) malformed.push("rateLimitPerSecond");
    } else {
      unknown.push(hasNul(name) ? name.replaceAll("\u0000", "%00") : name);
      continue;
    }
    fields.push(name);
  }
  return {
    subscriptionId: call.params.id ?? "",
    fields,
    url,
    events,
    disabled,
    rateLimitPerSecond,
    malformedFields: malformed,
    unknownFields: unknown,
  };
}

/** A body that may be absent: no bytes is an empty object. */
function optionalJsonObject(call: RouteCall): Record<string, unknown> {
  return call.body && call.body.length > 0 ? readJsonObject(call) : {};
}

export function webhookSubscriptionRoutes(webhooks: Client<typeof WebhooksService>): Route[] {
  const pathParams = { id: "The subscription's id." };
  return [
    {
      method: "GET",
      path: "/v1/webhooks/:id",
      auth: "signature",
      doc: {
        operationId: "getSubscription",
        tag: "Webhook subscriptions",
        summary: "Get a subscription",
        description: "With its state: disabled or not (and why), its rate limit and any secret overlap running.",
        pathParams,
        success: { status: 200, description: "The subscription; never its secret.", schema: "SubscriptionRecord" },
        errors: ["SUBSCRIPTION_NOT_FOUND"],
      },
      async handle(call) {
        const res = await webhooks.getSubscription({ subscriptionId: call.params.id ?? "" }, call.rpc);
        return { status: 200, body: subscriptionRecordJson(res.subscription) };
      },
    },
    {
      method: "PATCH",
      path: "/v1/webhooks/:id",
      auth: "signature",
      doc: {
        operationId: "updateSubscription",
        tag: "Webhook subscriptions",
        summary: "Change a subscription",
        description:
          "Any of `url`, `events`, `disabled`, `rateLimitPerSecond`. A new `url` applies to every attempt made after the change, retries of stored deliveries included; new `events` to events that arrive after it. While disabled nothing is sent (a manual replay or a recover excepted) and events are held as pending deliveries with no attempt due; enabling sends them, oldest first.",
        pathParams,
        requestBody: "SubscriptionUpdate",
        success: { status: 200, description: "The subscription after the change.", schema: "SubscriptionRecord" },
        errors: ["VALIDATION_ERROR", "SUBSCRIPTION_NOT_FOUND"],
      },
      async handle(call) {
        const res = await webhooks.updateSubscription(updateRequest(call), call.rpc);
        return { status: 200, body: subscriptionRecordJson(res.subscription) };
      },
    },
    {
      method: "POST",
      path: "/v1/webhooks/:id/rotate-secret",
      auth: "signature",
      doc: {
        operationId: "rotateSubscriptionSecret",
        tag: "Webhook subscriptions",
        summary: "Rotate a subscription's secret",
        description:
          "A new secret, shown in this response only. For `graceSeconds` (default 86 400, at most 604 800) every delivery still carries `X-FV-Signature` made with the previous secret, and `X-FV-Signature-Next` made with the new one; after it, `X-FV-Signature` uses the new secret. A rotation during an overlap starts a new one from the secret then current.",
        pathParams,
        requestBody: "SecretRotation",
        requestBodyOptional: true,
        success: { status: 200, description: "The new secret.", schema: "SecretRotated" },
        errors: ["INVALID_BODY", "VALIDATION_ERROR", "SUBSCRIPTION_NOT_FOUND"],
      },
      async handle(call) {
        const body = optionalJsonObject(call);
        const malformed: string[] = [];
        const grace = body.graceSeconds;
        let graceSeconds: bigint | undefined;
        if (typeof grace === "number" && Number.isSafeInteger(grace)) graceSeconds = BigInt(grace);
        else if (grace !== undefined && grace !== null) malformed.push("graceSeconds");
        const res = await webhooks.rotateSubscriptionSecret(
          { subscriptionId: call.params.id ?? "", graceSeconds, malformedFields: malformed },
          call.rpc,
        );
        return {
          status: 200,
          body: { secret: res.secret, previousSecretExpiresAt: isoOrNull(res.previousSecretExpiresAt) },
        };
      },
    },
    {
      method: "POST",
      path: "/v1/webhooks/:id/recover",
      auth: "signature",
      doc: {
        operationId: "recoverDeliveries",
        tag: "Webhook subscriptions",
        summary: "Send failed deliveries again",
        description:
          "Every `failed` delivery created in [`since`, `until`) gets one manual attempt queued, as a replay does (`retry_count` + 1), oldest first, at most 10 000 a call: call again for more. Sent even while the subscription is disabled.",
        pathParams,
        requestBody: "DeliveryRecovery",
        success: { status: 202, description: "How many attempts were queued.", schema: "DeliveriesRecovered" },
        errors: ["INVALID_BODY", "VALIDATION_ERROR", "SUBSCRIPTION_NOT_FOUND"],
      },
      async handle(call) {
        const body = readJsonObject(call);
        const malformed: string[] = [];
        const since = timeField(body, "since", malformed);
        const until = timeField(body, "until", malformed);
        const res = await webhooks.recoverDeliveries(
          { subscriptionId: call.params.id ?? "", since, until, malformedFields: malformed },
          call.rpc,
        );
        return { status: 202, body: { queued: res.queued } };
      },
    },
    {
      method: "GET",
      path: "/v1/webhooks/:id/stats",
      auth: "signature",
      doc: {
        operationId: "getSubscriptionStats",
        tag: "Webhook subscriptions",
        summary: "A subscription's delivery figures",
        description:
          "Deliveries pending now, and finished attempts by outcome over the last 24 hours and 7 days (counted by the hour: this hour so far and the 23, or 167, before it).",
        pathParams,
        success: { status: 200, description: "The figures.", schema: "SubscriptionStats" },
        errors: ["SUBSCRIPTION_NOT_FOUND"],
      },
      async handle(call) {
        const res = await webhooks.getSubscriptionStats({ subscriptionId: call.params.id ?? "" }, call.rpc);
        const counts = (c: { succeeded: bigint; failed: bigint } | undefined) => ({
          succeeded: Number(c?.succeeded ?? 0n),
          failed: Number(c?.failed ?? 0n),
        });
        return {
          status: 200,
          body: { pending: Number(res.pending), last24h: counts(res.last24h), last7d: counts(res.last7d) },
        };
      },
    },
  ];
}
