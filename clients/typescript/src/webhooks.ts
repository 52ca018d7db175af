// The receiver's side of a webhook delivery (spec "Delivery", decisions.md §6): X-FV-Signature is
// "sha256=" and the hex HMAC-SHA256 of `<X-FV-Timestamp>.<raw body>` keyed with the subscription's
// secret. The same check as the service's services/webhooks/delivery/signature.ts, which the root's
// test/client-package.test.ts signs with.
import { createHmac, timingSafeEqual } from "node:crypto";
import type { components } from "./openapi.js";

export type WebhookEvent = components["schemas"]["WebhookEvent"];

/** Node's lower-cased `req.headers`, or a fetch `Headers`. */
export type WebhookHeaders = Headers | Readonly<Record<string, string | string[] | undefined>>;

export type VerifyWebhookOptions = {
  /** Seconds X-FV-Timestamp may stray from now either way before a delivery is refused as replayed; 300. */
  toleranceSeconds?: number;
  /** Unix seconds to compare with; the clock by default. */
  nowSeconds?: number;
};

export type VerifyWebhookResult =
  | { ok: true; event: WebhookEvent }
  | { ok: false; reason: "missing-headers" | "stale-timestamp" | "bad-signature" | "bad-body" };

function header(headers: WebhookHeaders, name: string): string | undefined {
  if (headers instanceof Headers) return headers.get(name) ?? undefined;
  const value = headers[name];
  return typeof value === "string" ? value : undefined;
}

/**
 * Checks one delivery: the signature over the raw body bytes exactly as received (before any JSON
 * parsing), compared in constant time, and a timestamp within the tolerance. Returns the parsed
 * event only when both hold. Deliveries may repeat: act on each `event_id` once.
 */
export function verifyWebhook(
  rawBody: Uint8Array | string,
  headers: WebhookHeaders,
  secret: string,
  options: VerifyWebhookOptions = {},
): VerifyWebhookResult {
  const timestamp = header(headers, "x-fv-timestamp");
  const sent = header(headers, "x-fv-signature");
  if (timestamp === undefined || sent === undefined || !/^\d{1,12}$/.test(timestamp)) {
    return { ok: false, reason: "missing-headers" };
  }
  const now = options.nowSeconds ?? Math.floor(Date.now() / 1000);
  if (Math.abs(now - Number(timestamp)) > (options.toleranceSeconds ?? 300))
    return { ok: false, reason: "stale-timestamp" };
  const mac = createHmac("sha256", Buffer.from(secret, "utf8")).update(`${timestamp}.`, "utf8").update(rawBody);
  const expected = Buffer.from(`sha256=${mac.digest("hex")}`, "utf8");
  const received = Buffer.from(sent, "utf8");
  // The expected length is public (always "sha256=" and 64 hex digits); only the content is secret.
  if (received.length !== expected.length || !timingSafeEqual(received, expected)) {
    return { ok: false, reason: "bad-signature" };
  }
  try {
    const text = typeof rawBody === "string" ? rawBody : Buffer.from(rawBody).toString("utf8");
    return { ok: true, event: JSON.parse(text) as WebhookEvent };
  } catch {
    return { ok: false, reason: "bad-body" };
  }
}
