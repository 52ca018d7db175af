import { createHmac, timingSafeEqual } from "node:crypto";

export const WEBHOOK_USER_AGENT = "ReplayService-Webhooks/1";

/** How far a receiver lets X-FV-Timestamp stray from its clock before refusing a delivery as replayed. */
export const SIGNATURE_TOLERANCE_S = 300;

/** X-FV-Signature (spec/replay-api.md §Delivery), over the exact body bytes sent, never re-serialised JSON. */
export function webhookSignature(secret: string, timestampS: number | string, rawBody: Uint8Array | string): string {
  const mac = createHmac("sha256", Buffer.from(secret, "utf8")).update(`${timestampS}.`, "utf8").update(rawBody);
  return `sha256=${mac.digest("hex")}`;
}

export type SignedDeliveryInput = {
  /** The secret X-FV-Signature is made with (the previous one while a rotation's overlap runs). */
  secret: string;
  /** While a rotation's overlap runs, the new secret: X-FV-Signature-Next is made with it. */
  nextSecret?: string | null | undefined;
  event: string;
  eventId: string;
  /** The JSON body exactly as it will be sent. */
  body: string;
  /** Unix seconds of this attempt; a manual replay signs the same body with a fresh one. */
  timestampS: number;
};

/** The request headers of one delivery attempt (decisions.md §6, §6.1 for X-FV-Signature-Next). */
export function deliveryHeaders(input: SignedDeliveryInput): Record<string, string> {
  const headers: Record<string, string> = {
    "content-type": "application/json",
    "user-agent": WEBHOOK_USER_AGENT,
    "x-fv-event": input.event,
    "x-fv-event-id": input.eventId,
    "x-fv-timestamp": String(input.timestampS),
    "x-fv-signature": webhookSignature(input.secret, input.timestampS, input.body),
  };
  if (input.nextSecret)
    headers["x-fv-signature-next"] = webhookSignature(input.nextSecret, input.timestampS, input.body);
  return headers;
}

export type ReceivedHeaders = Readonly<Record<string, string | string[] | undefined>>;

export type VerifyOptions = {
  /** Seconds either side of `nowS` a timestamp may be; Infinity skips the check. */
  toleranceS?: number;
  nowS?: number;
};

/** The receiver's check, on the raw body before any JSON parsing; the timestamp bound stops a captured replay. */
export function verifyWebhookSignature(
  secret: string,
  headers: ReceivedHeaders,
  rawBody: Uint8Array | string,
  options: VerifyOptions = {},
): boolean {
  const timestamp = headers["x-fv-timestamp"];
  const sent = headers["x-fv-signature"];
  if (typeof timestamp !== "string" || typeof sent !== "string" || !/^\d{1,12}$/.test(timestamp)) return false;
  const nowS = options.nowS ?? Math.floor(Date.now() / 1000);
  if (Math.abs(nowS - Number(timestamp)) > (options.toleranceS ?? SIGNATURE_TOLERANCE_S)) return false;
  const expected = Buffer.from(webhookSignature(secret, timestamp, rawBody), "utf8");
  const received = Buffer.from(sent, "utf8");
  // The expected length is public (always "sha256=" and 64 hex digits); only the content is secret.
  return received.length === expected.length && timingSafeEqual(received, expected);
}
