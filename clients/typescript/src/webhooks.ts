// The receiver's side of a webhook delivery (spec "Delivery", decisions.md §6): X-FV-Signature is
// "sha256=" and the hex HMAC-SHA256 of `<X-FV-Timestamp>.<raw body>` keyed with the subscription's
// secret. The same check as the service's services/webhooks/delivery/signature.ts, which the root's
// test/client-package.test.ts signs with.
import { createHmac, timingSafeEqual } from "node:crypto";
import type { components } from "./openapi.js";

/**
 * A delivery's body: one type per event, told apart by `event`, so that a `switch (event.event)`
 * narrows `data` to `data.collection` (collection.* events) or `data.asset` (asset.* events).
 */
export type WebhookEvent = components["schemas"]["WebhookEvent"];

/** The eight event names. */
export type WebhookEventName = WebhookEvent["event"];

/** The body of one event, for a handler of that event alone: `WebhookEventOf<"asset.ready">`. */
export type WebhookEventOf<N extends WebhookEventName> = Extract<WebhookEvent, { event: N }>;

/** `data.collection` of the collection.* events. */
export type WebhookCollection = components["schemas"]["WebhookCollection"];

/** `data.asset` of the asset.* events. */
export type WebhookAsset = components["schemas"]["WebhookAsset"];

// A record rather than a list, so that the compiler refuses it when it lacks an event of the
// document or names one the document does not have.
const eventNames: Record<WebhookEventName, true> = {
  "collection.finalized": true,
  "collection.released": true,
  "collection.revoked": true,
  "asset.processing": true,
  "asset.ready": true,
  "asset.failed": true,
  "asset.expired": true,
  "asset.deleted": true,
};

/** Every event name, for a subscription to all of them: `events: [...WEBHOOK_EVENT_NAMES]`. */
export const WEBHOOK_EVENT_NAMES: readonly WebhookEventName[] = Object.freeze(
  Object.keys(eventNames) as WebhookEventName[],
);

/**
 * The delivery's headers: node's `req.headers`, a fetch `Headers` (any implementation with `get`),
 * or a plain record whose names may have any case (as some serverless platforms hand them over).
 */
export type WebhookHeaders =
  | { get(name: string): string | null }
  | Readonly<Record<string, string | readonly string[] | undefined>>;

export type VerifyWebhookOptions = {
  /** Seconds X-FV-Timestamp may stray from now either way before a delivery is refused as replayed; 300. */
  toleranceSeconds?: number;
  /** Unix seconds to compare with; the clock by default. */
  nowSeconds?: number;
};

export type VerifyWebhookResult =
  | { ok: true; event: WebhookEvent }
  | { ok: false; reason: "missing-headers" | "stale-timestamp" | "bad-signature" | "bad-body" };

/** One header's value: a repeated header (two values) is no value, since either could be forged. */
function header(headers: WebhookHeaders, name: string): string | undefined {
  if (typeof headers.get === "function")
    return (headers as { get(name: string): string | null }).get(name) ?? undefined;
  const record = headers as Readonly<Record<string, string | readonly string[] | undefined>>;
  const key = Object.keys(record).find((k) => k.toLowerCase() === name);
  const value = key === undefined ? undefined : record[key];
  if (Array.isArray(value)) return value.length === 1 ? value[0] : undefined;
  return typeof value === "string" ? value : undefined;
}

/** Whether `sent` is `sha256=` and the hex HMAC of `<timestamp>.<raw body>` under `secret`, compared in constant time. */
function signedWith(secret: string, timestamp: string, rawBody: Uint8Array | string, sent: string): boolean {
  const mac = createHmac("sha256", Buffer.from(secret, "utf8")).update(`${timestamp}.`, "utf8").update(rawBody);
  const expected = Buffer.from(`sha256=${mac.digest("hex")}`, "utf8");
  const received = Buffer.from(sent, "utf8");
  // The expected length is public (always "sha256=" and 64 hex digits); only the content is secret.
  return received.length === expected.length && timingSafeEqual(received, expected);
}

/**
 * Checks one delivery: the signature over the raw body bytes exactly as received (before any JSON
 * parsing), compared in constant time, and a timestamp within the tolerance. Returns the parsed
 * event only when both hold, typed by the API reference's schema (which a signed body, the
 * service's own, holds to; its fields are not checked one by one). Deliveries may repeat: act on
 * each `event_id` once.
 *
 * During a secret rotation's overlap pass every secret the receiver holds (`[newSecret,
 * oldSecret]`): a delivery is accepted when `X-FV-Signature` or `X-FV-Signature-Next` matches any
 * of them (docs/webhooks.md, "Rotating the secret").
 */
export function verifyWebhook(
  rawBody: Uint8Array | string,
  headers: WebhookHeaders,
  secret: string | readonly string[],
  options: VerifyWebhookOptions = {},
): VerifyWebhookResult {
  const secrets = typeof secret === "string" ? [secret] : Array.isArray(secret) ? secret : [];
  // An empty secret is an unset variable: with it, anyone could sign a delivery that passes.
  if (secrets.length === 0 || secrets.some((s) => typeof s !== "string" || s === "")) {
    throw new TypeError("verifyWebhook needs the subscription's secret");
  }
  const tolerance = options.toleranceSeconds ?? 300;
  if (!Number.isFinite(tolerance) || tolerance < 0)
    throw new RangeError(`toleranceSeconds must be a number of seconds, not ${tolerance}`);
  const timestamp = header(headers, "x-fv-timestamp");
  const sent = [header(headers, "x-fv-signature"), header(headers, "x-fv-signature-next")].filter(
    (value): value is string => value !== undefined,
  );
  if (timestamp === undefined || sent.length === 0 || !/^\d{1,12}$/.test(timestamp)) {
    return { ok: false, reason: "missing-headers" };
  }
  const now = options.nowSeconds ?? Math.floor(Date.now() / 1000);
  if (Math.abs(now - Number(timestamp)) > tolerance) return { ok: false, reason: "stale-timestamp" };
  if (!secrets.some((key) => sent.some((value) => signedWith(key, timestamp, rawBody, value)))) {
    return { ok: false, reason: "bad-signature" };
  }
  let event: unknown;
  try {
    event = JSON.parse(typeof rawBody === "string" ? rawBody : Buffer.from(rawBody).toString("utf8"));
  } catch {
    return { ok: false, reason: "bad-body" };
  }
  if (typeof event !== "object" || event === null || Array.isArray(event)) return { ok: false, reason: "bad-body" };
  return { ok: true, event: event as WebhookEvent };
}
