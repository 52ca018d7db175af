import { createHmac } from "node:crypto";
import { describe, expect, it } from "vitest";
import { generateWebhookSecret } from "./secret.js";
import { deliveryHeaders, verifyWebhookSignature, webhookSignature } from "./signature.js";

const body = JSON.stringify({ event_id: "0b0f8d2e-1", event: "asset.ready", data: { asset: { id: "é" } } });

function signed(secret: string, timestampS: number) {
  return deliveryHeaders({ secret, event: "asset.ready", eventId: "0b0f8d2e-1", body, timestampS });
}

describe("deliveryHeaders", () => {
  it("carries the decisions.md headers with sha256= and the hex HMAC of <timestamp>.<raw body>", () => {
    const secret = generateWebhookSecret();
    const headers = signed(secret, 1_795_000_000);
    const expected = createHmac("sha256", secret).update(`1795000000.${body}`).digest("hex");
    expect(headers).toEqual({
      "content-type": "application/json",
      "user-agent": "ReplayService-Webhooks/1",
      "x-fv-event": "asset.ready",
      "x-fv-event-id": "0b0f8d2e-1",
      "x-fv-timestamp": "1795000000",
      "x-fv-signature": `sha256=${expected}`,
    });
  });
});

describe("verifyWebhookSignature", () => {
  const secret = generateWebhookSecret();
  const nowS = 1_795_000_000;
  const headers = signed(secret, nowS);
  const raw = Buffer.from(body, "utf8");

  it("accepts the raw body as bytes or text with the subscription secret", () => {
    expect(verifyWebhookSignature(secret, headers, raw, { nowS })).toBe(true);
    expect(verifyWebhookSignature(secret, headers, body, { nowS: nowS + 300 })).toBe(true);
  });

  it("refuses another secret, an altered body, a re-labelled timestamp or a malformed signature", () => {
    expect(verifyWebhookSignature(`${secret}x`, headers, raw, { nowS })).toBe(false);
    expect(verifyWebhookSignature(secret, headers, Buffer.from(body.replace("ready", "failed")), { nowS })).toBe(false);
    expect(verifyWebhookSignature(secret, headers, Buffer.from(`${body} `), { nowS })).toBe(false);
    expect(verifyWebhookSignature(secret, { ...headers, "x-fv-timestamp": String(nowS + 1) }, raw, { nowS })).toBe(
      false,
    );
    const signature = headers["x-fv-signature"] ?? "";
    for (const bad of [signature.toUpperCase(), signature.slice(0, -1), `${signature}0`, signature.slice(7), ""]) {
      expect(verifyWebhookSignature(secret, { ...headers, "x-fv-signature": bad }, raw, { nowS })).toBe(false);
    }
    expect(verifyWebhookSignature(secret, { ...headers, "x-fv-signature": undefined }, raw, { nowS })).toBe(false);
    expect(verifyWebhookSignature(secret, { ...headers, "x-fv-timestamp": "1e9" }, raw, { nowS })).toBe(false);
  });

  it("refuses a timestamp more than five minutes from the receiver's clock, unless told otherwise", () => {
    expect(verifyWebhookSignature(secret, headers, raw, { nowS: nowS + 301 })).toBe(false);
    expect(verifyWebhookSignature(secret, headers, raw, { nowS: nowS - 301 })).toBe(false);
    expect(verifyWebhookSignature(secret, headers, raw, { nowS: nowS + 86_400, toleranceS: Infinity })).toBe(true);
  });

  it("hashes the exact bytes, so a body that is not valid UTF-8 still verifies", () => {
    const bytes = Buffer.from([0x7b, 0xff, 0xfe, 0x7d]);
    const binary = { "x-fv-timestamp": String(nowS), "x-fv-signature": webhookSignature(secret, nowS, bytes) };
    expect(verifyWebhookSignature(secret, binary, bytes, { nowS })).toBe(true);
    expect(verifyWebhookSignature(secret, binary, bytes.toString("utf8"), { nowS })).toBe(false);
  });
});

describe("generateWebhookSecret", () => {
  it("is whsec_ and 43 base64url characters from 32 random bytes, different every time", () => {
    const secrets = new Set(Array.from({ length: 100 }, generateWebhookSecret));
    expect(secrets.size).toBe(100);
    for (const secret of secrets) {
      expect(secret).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/);
      expect(Buffer.from(secret.slice(6), "base64url")).toHaveLength(32);
    }
  });
});
